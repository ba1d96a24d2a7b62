//! Modules the host must refuse with a clear error, never a crash.

use podpolicy::runtime::{Cache, Limits, PolicyRuntime};

/// A component whose only feature is a WASI import.
pub const WASI_IMPORTING_COMPONENT: &str = r#"
(component
  (import "wasi:cli/environment@0.2.6" (instance))
)
"#;

fn load(bytes: &[u8]) -> String {
    match PolicyRuntime::from_bytes(bytes, &Cache::Off, Limits::default()) {
        Ok(_) => panic!("a hostile module was accepted"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn a_component_with_a_wasi_import_is_refused() {
    let bytes = wat::parse_str(WASI_IMPORTING_COMPONENT).expect("valid WAT");
    let message = load(&bytes);
    assert!(
        message.contains("imports wasi:cli/environment@0.2.6"),
        "{message}"
    );
    assert!(message.contains("must import nothing"), "{message}");
}

#[test]
fn a_core_module_is_not_a_policy() {
    let bytes = wat::parse_str("(module (func (export \"policy-info\")))").expect("valid WAT");
    let message = load(&bytes);
    assert!(
        message.contains("compiling the policy component"),
        "{message}"
    );
}

#[test]
fn a_component_without_the_exports_is_refused() {
    let bytes = wat::parse_str("(component)").expect("valid WAT");
    let message = load(&bytes);
    assert!(
        message.contains("does not implement the pod-policy world"),
        "{message}"
    );
}

#[test]
fn random_bytes_are_refused() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let bytes: Vec<u8> = (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let message = load(&bytes);
    assert!(
        message.contains("compiling the policy component"),
        "{message}"
    );
}
