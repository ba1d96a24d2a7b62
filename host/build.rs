//! Builds the policy component from `policy-wasm/` and embeds it.
//!
//! A nested cargo compiles `policy-wasm` for `wasm32-unknown-unknown` into
//! its own target directory (the outer cargo holds the lock on ours), then
//! wit-component wraps the core module into a component. The wasm target is
//! added with rustup when missing, so a plain `cargo test` works on a fresh
//! machine.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-unknown-unknown";

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("host/ lives in the workspace")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for path in [
        "policy-wasm/src",
        "policy-wasm/Cargo.toml",
        "wit",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!("cargo::rerun-if-changed={}", workspace.join(path).display());
    }
    println!("cargo::rerun-if-env-changed=PODPOLICY_SKIP_TARGET_ADD");

    generate_nri(&manifest_dir, &out_dir);
    ensure_wasm_target();

    // target/<profile>/build/<pkg>/out -> target/
    let target_root = out_dir
        .ancestors()
        .nth(4)
        .expect("OUT_DIR is inside the target dir")
        .to_path_buf();
    // One guest target dir per workspace checkout: worktrees that share a
    // CARGO_TARGET_DIR would otherwise share `policy_wasm.wasm`, and a fresh
    // nested build does not copy its own module there again, so one
    // checkout could embed another's policy without a word.
    let checkout = workspace
        .to_string_lossy()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |hash, b| {
            (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    let guest_target = target_root
        .join("wasm-guest")
        .join(format!("{:08x}", checkout >> 32));
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace)
        .args([
            "rustc",
            "-p",
            "policy-wasm",
            "--lib",
            "--crate-type",
            "cdylib",
            "--target",
            TARGET,
        ])
        .args(["--profile", "guest", "--locked"])
        .arg("--target-dir")
        .arg(&guest_target);
    if env::var_os("CARGO_NET_OFFLINE").is_some() {
        cmd.arg("--offline");
    }
    // The outer build's flags (coverage, sanitizers, wrappers) are for the host.
    for key in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_LLVM_COV",
        "CARGO_INCREMENTAL",
        "RUSTC",
        "CARGO_MAKEFLAGS",
    ] {
        cmd.env_remove(key);
    }
    let status = cmd
        .status()
        .expect("could not run the nested cargo that builds the policy component");
    if !status.success() {
        panic!("building the policy component failed (see the nested cargo output above)");
    }
    let core_path = guest_target
        .join(TARGET)
        .join("guest")
        .join("policy_wasm.wasm");
    let core = std::fs::read(&core_path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", core_path.display()));
    let component = wit_component::ComponentEncoder::default()
        .module(&core)
        .and_then(|encoder| encoder.validate(true).encode())
        .unwrap_or_else(|e| panic!("turning {} into a component: {e:#}", core_path.display()));
    std::fs::write(out_dir.join("policy.component.wasm"), component)
        .expect("writing the component");
}

/// Generate the NRI messages and async ttrpc services (`podpolicy nri`)
/// from the vendored v0.8.0 `api.proto` into `$OUT_DIR/nri/` (`api.rs`,
/// `api_ttrpc.rs`), with ttrpc-codegen's pure-Rust parser: no `protoc`.
fn generate_nri(manifest_dir: &Path, out_dir: &Path) {
    let proto_dir = manifest_dir.join("proto").join("nri");
    println!(
        "cargo::rerun-if-changed={}",
        proto_dir.join("api.proto").display()
    );
    let nri_out = out_dir.join("nri");
    std::fs::create_dir_all(&nri_out).expect("creating $OUT_DIR/nri");
    ttrpc_codegen::Codegen::new()
        .out_dir(&nri_out)
        .input(proto_dir.join("api.proto"))
        .include(&proto_dir)
        .rust_protobuf()
        .customize(ttrpc_codegen::Customize {
            async_all: true,
            ..Default::default()
        })
        .rust_protobuf_customize(ttrpc_codegen::ProtobufCustomize::default().gen_mod_rs(false))
        .run()
        .expect("generating the NRI ttrpc code from host/proto/nri/api.proto");
    // `include!` refuses inner attributes and inner doc comments: the
    // including module sets its own.
    for file in ["api.rs", "api_ttrpc.rs"] {
        let path = nri_out.join(file);
        let text = std::fs::read_to_string(&path).expect("reading generated NRI code");
        let kept: Vec<&str> = text
            .lines()
            .filter(|l| {
                let l = l.trim_start();
                !l.starts_with("#![") && !l.starts_with("//!")
            })
            .collect();
        std::fs::write(&path, kept.join("\n")).expect("writing generated NRI code");
    }
}

/// Add the wasm target with rustup when the toolchain lacks it.
fn ensure_wasm_target() {
    if env::var_os("PODPOLICY_SKIP_TARGET_ADD").is_some() {
        return;
    }
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_string()));
    let installed =
        sysroot.is_some_and(|root| Path::new(&root).join("lib/rustlib").join(TARGET).exists());
    if installed {
        return;
    }
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status();
    match status {
        Ok(s) if s.success() => {}
        _ => panic!("the {TARGET} target is missing and `rustup target add {TARGET}` failed"),
    }
}
