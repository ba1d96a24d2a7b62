//! Hostile policy components, written in WAT here: a core module with the
//! pod-policy world's exports (signatures from `wit/` through wit-parser),
//! turned into a component by wit-component exactly as the real guest is.
//! `policy-info` answers correctly, so the host loads the module; every
//! other export misbehaves in the chosen way.

use std::fmt::Write as _;

use wit_parser::abi::{AbiVariant, WasmType};
use wit_parser::{Resolve, WorldItem};

use crate::util::workspace;

/// How every export but `policy-info` behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hostility {
    /// `loop br 0`: never returns (fuel or the epoch deadline stop it).
    InfiniteLoop,
    /// Grows linear memory until the cap stops it.
    MemoryBomb,
    /// `unreachable`.
    Trap,
    /// Returns a pointer to 0xff bytes: no valid value lifts from that.
    Garbage,
    /// Returns a pointer to zero bytes: well-formed empty answers (no
    /// containers, no files), which the host's sanity checks must refuse.
    Zeros,
    /// Answers like [`Hostility::Zeros`] but reports another WIT version.
    WrongWitVersion,
    /// Traps like [`Hostility::Trap`], but also holds one function of
    /// [`SLOW_COMPILE_OPERATIONS`] operations over 129 live locals: seconds of
    /// compiling (a candidate that keeps a compiler busy).
    SlowCompile,
}

/// The size of [`Hostility::SlowCompile`]'s big function, in operations.
pub const SLOW_COMPILE_OPERATIONS: usize = 800_000;

fn core_type(t: &WasmType) -> &'static str {
    match t {
        WasmType::I64 | WasmType::PointerOrI64 => "i64",
        WasmType::F32 => "f32",
        WasmType::F64 => "f64",
        _ => "i32",
    }
}

/// A region of the hostile module's memory.
const INFO_AT: u32 = 1024;
const STRINGS_AT: u32 = 2048;
const GARBAGE_AT: u32 = 4096;
const ZEROS_AT: u32 = 16384;
const HEAP_AT: u32 = 65536;

fn le(values: &[u32]) -> String {
    values
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .map(|b| format!("\\{b:02x}"))
        .collect()
}

fn body(hostility: Hostility, results: &[WasmType]) -> String {
    let pointer = match hostility {
        Hostility::Garbage => GARBAGE_AT,
        _ => ZEROS_AT,
    };
    let value = |t: &WasmType| match core_type(t) {
        "i32" => format!("(i32.const {pointer})"),
        "i64" => "(i64.const -1)".to_string(),
        "f32" => "(f32.const 0)".to_string(),
        _ => "(f64.const 0)".to_string(),
    };
    match hostility {
        Hostility::InfiniteLoop => "(loop $spin (br $spin)) unreachable".to_string(),
        Hostility::MemoryBomb => {
            "(loop $grow (drop (memory.grow (i32.const 64))) (br $grow)) unreachable".to_string()
        }
        Hostility::Trap | Hostility::SlowCompile => "unreachable".to_string(),
        Hostility::Garbage | Hostility::Zeros | Hostility::WrongWitVersion => {
            results.iter().map(value).collect::<Vec<_>>().join(" ")
        }
    }
}

/// The repository's WIT and its pod-policy world.
/// The world the host binds (`pod-policy-conformance`) from `wit_text`.
fn pod_policy_world_of(wit_text: &str) -> (Resolve, wit_parser::WorldId) {
    let mut resolve = Resolve::default();
    let package = resolve
        .push_str("policy.wit", wit_text)
        .expect("the WIT parses");
    let world = resolve
        .select_world(&[package], Some("pod-policy-conformance"))
        .expect("the pod-policy-conformance world");
    (resolve, world)
}

fn wit_text() -> String {
    std::fs::read_to_string(workspace().join("wit/policy.wit")).expect("reading wit/policy.wit")
}

fn pod_policy_world() -> (Resolve, wit_parser::WorldId) {
    pod_policy_world_of(&wit_text())
}

/// The WAT of the core module.
pub fn core_wat(hostility: Hostility) -> String {
    let (resolve, world) = pod_policy_world();
    core_wat_of(&resolve, world, hostility)
}

/// [`core_wat`] for the world `world` of `resolve`.
fn core_wat_of(resolve: &Resolve, world: wit_parser::WorldId, hostility: Hostility) -> String {
    let wit_version = match hostility {
        Hostility::WrongWitVersion => "9.9.9",
        _ => podpolicy::runtime::WIT_VERSION,
    };
    let strings = ["hostile-1.0", wit_version, "1.36"];
    let mut info = Vec::new();
    let mut data = String::new();
    let mut at = STRINGS_AT;
    for s in strings {
        info.extend([at, s.len() as u32]);
        write!(data, "(data (i32.const {at}) \"{s}\")").unwrap();
        at += 32;
    }
    info.extend([0, 0]); // feature-gates: empty list
    write!(data, "(data (i32.const {INFO_AT}) \"{}\")", le(&info)).unwrap();
    write!(
        data,
        "(data (i32.const {GARBAGE_AT}) \"{}\")",
        "\\ff".repeat(8192)
    )
    .unwrap();

    let mut funcs = String::new();
    // Every function of every exported interface, under the core export
    // name wit-component expects (`podpolicy:policy/node@X.Y.Z#info`).
    for (key, item) in &resolve.worlds[world].exports {
        let WorldItem::Interface { id, .. } = item else {
            continue;
        };
        let interface = resolve.name_world_key(key);
        for func in resolve.interfaces[*id].functions.values() {
            let sig = resolve.wasm_signature(AbiVariant::GuestExport, func);
            let params: Vec<&str> = sig.params.iter().map(core_type).collect();
            let results: Vec<&str> = sig.results.iter().map(core_type).collect();
            let is_info = interface.starts_with("podpolicy:policy/node@") && func.name == "info";
            let code = if is_info {
                format!("(i32.const {INFO_AT})")
            } else {
                body(hostility, &sig.results)
            };
            writeln!(
                funcs,
                "(func (export \"{interface}#{}\") (param {}) (result {}) {code})",
                func.name,
                params.join(" "),
                results.join(" ")
            )
            .unwrap();
        }
    }
    if hostility == Hostility::SlowCompile {
        // Every local feeds the next and all stay live to the end, so no
        // optimisation shortens it and the register allocator spills
        // across the whole function.
        write!(
            funcs,
            "(func $slow (param i32) (result i32) (local i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)"
        )
        .unwrap();
        const LOCALS: usize = 129;
        for i in 0..SLOW_COMPILE_OPERATIONS {
            let op = ["i32.add", "i32.mul", "i32.xor", "i32.rotl"][i % 4];
            let (to, from) = (i % LOCALS, (i * 7 + 3) % LOCALS);
            write!(
                funcs,
                " (local.set {to} ({op} (local.get {to}) (local.get {from})))"
            )
            .unwrap();
        }
        funcs.push_str(" (local.get 0)");
        for i in 1..LOCALS {
            write!(funcs, " (local.get {i}) i32.add").unwrap();
        }
        funcs.push_str(")\n");
    }
    format!(
        r#"(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const {HEAP_AT}))
  ;; A bump allocator: enough for the host to pass arguments in.
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $ptr i32)
    (local.set $ptr (i32.and
      (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
      (i32.sub (i32.const 0) (local.get 2))))
    (global.set $heap (i32.add (local.get $ptr) (local.get 3)))
    (block $fits
      (loop $more
        (br_if $fits (i32.le_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536))))
        (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))
        (br $more)))
    (local.get $ptr))
  {data}
  {funcs})"#
    )
}

/// The hostile component's bytes.
pub fn component(hostility: Hostility) -> Vec<u8> {
    let (resolve, world) = pod_policy_world();
    encode(&core_wat(hostility), &resolve, world)
}

/// A core module in WAT, with `world` embedded, as a component (what
/// wit-component does to the real guest).
fn encode(wat: &str, resolve: &Resolve, world: wit_parser::WorldId) -> Vec<u8> {
    let mut core = wat::parse_str(wat).expect("the WAT parses");
    wit_component::embed_component_metadata(
        &mut core,
        resolve,
        world,
        wit_component::StringEncoding::UTF8,
        false,
    )
    .expect("embedding the world");
    wit_component::ComponentEncoder::default()
        .module(&core)
        .and_then(|encoder| encoder.validate(true).encode())
        .expect("encoding the component")
}

/// A component of an older contract: package `podpolicy:policy@{version}`
/// whose world only has `policy-info` (the record every version shares),
/// answering `version`. The host must refuse it naming both versions.
pub fn old_contract_component(version: &str) -> Vec<u8> {
    let wit = format!(
        r#"package podpolicy:policy@{version};
world pod-policy {{
    record feature-gate {{ name: string, enabled: bool }}
    record policy-info {{
        policy-version: string,
        wit-version: string,
        kubernetes-version: string,
        feature-gates: list<feature-gate>,
    }}
    export policy-info: func() -> policy-info;
}}
"#
    );
    let mut resolve = Resolve::default();
    let package = resolve
        .push_str("old.wit", &wit)
        .expect("the old WIT parses");
    let world = resolve
        .select_world(&[package], Some("pod-policy"))
        .expect("the world");
    let mut info = Vec::new();
    let mut data = String::new();
    let mut at = STRINGS_AT;
    for s in ["old-0.1.0", version, "1.35"] {
        info.extend([at, s.len() as u32]);
        write!(data, "(data (i32.const {at}) \"{s}\")").unwrap();
        at += 32;
    }
    info.extend([0, 0]);
    write!(data, "(data (i32.const {INFO_AT}) \"{}\")", le(&info)).unwrap();
    let wat = format!(
        r#"(module
  (memory (export "memory") 1)
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32) (i32.const {HEAP_AT}))
  {data}
  (func (export "policy-info") (result i32) (i32.const {INFO_AT})))"#
    );
    encode(&wat, &resolve, world)
}

/// A component of a later contract in today's layout: today's WIT with the
/// package version replaced by `version`, so every export name carries
/// `@{version}` (and its `info` answers `version` too). The host must
/// refuse it from the export names, naming both versions.
pub fn later_contract_component(version: &str) -> Vec<u8> {
    let text = wit_text();
    let today = format!(
        "package podpolicy:policy@{};",
        podpolicy::runtime::WIT_VERSION
    );
    assert!(text.contains(&today), "wit/policy.wit declares {today}");
    let (resolve, world) =
        pod_policy_world_of(&text.replace(&today, &format!("package podpolicy:policy@{version};")));
    let wat = core_wat_of(&resolve, world, Hostility::Zeros).replace(
        &format!("\"{}\"", podpolicy::runtime::WIT_VERSION),
        &format!("\"{version}\""),
    );
    encode(&wat, &resolve, world)
}

/// Writes the trapping and the looping components as
/// `$PODPOLICY_HOSTILE_OUT/{trap,loop}.wasm` for the real-runtime test
/// (tests/nri/run.sh), which hands them to `podpolicy nri --policy`. Ignored:
/// the script runs it by name with `--ignored`.
#[test]
#[ignore = "run by tests/nri/run.sh with PODPOLICY_HOSTILE_OUT set"]
fn export_for_nri_test() {
    let dir = std::env::var_os("PODPOLICY_HOSTILE_OUT").expect("PODPOLICY_HOSTILE_OUT is set");
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir).expect("creating PODPOLICY_HOSTILE_OUT");
    for (name, hostility) in [("trap", Hostility::Trap), ("loop", Hostility::InfiniteLoop)] {
        let path = dir.join(format!("{name}.wasm"));
        let bytes = component(hostility);
        assert!(bytes.starts_with(b"\0asm"), "{name}: not a wasm binary");
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}
