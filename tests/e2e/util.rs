//! Shared helpers: one compiled policy per test binary, paths, a temp dir.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use podpolicy::runtime::{Cache, Limits, PolicyRuntime};

/// The embedded policy, compiled once for the whole test binary.
pub fn policy() -> &'static PolicyRuntime {
    static POLICY: OnceLock<PolicyRuntime> = OnceLock::new();
    POLICY.get_or_init(|| {
        PolicyRuntime::embedded(&Cache::Dir(cache_dir()), Limits::default())
            .expect("embedded policy loads")
    })
}

/// A cache dir inside the target dir, shared by the tests and the CLI runs.
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("policy-cache")
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    let host = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = host.parent().expect("host/ is in the workspace");
    root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
}

/// `tests/vectors`: the repository's copy of the shared conformance vectors
/// (same files, same contract), so a fresh clone tests itself.
pub fn vectors_dir() -> PathBuf {
    let dir = workspace().join("tests/vectors");
    assert!(
        dir.is_dir(),
        "the conformance vectors are expected at {}",
        dir.display()
    );
    dir
}

/// A fresh empty directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a temp dir");
    dir
}

/// Run the `podpolicy` binary; returns (exit code, stdout, stderr).
pub fn podpolicy(args: &[&str]) -> (i32, String, String) {
    podpolicy_with_stdin(args, None)
}

/// Run the `podpolicy` binary with optional stdin.
pub fn podpolicy_with_stdin(args: &[&str], stdin: Option<&[u8]>) -> (i32, String, String) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_podpolicy"))
        .args(args)
        .env("PODPOLICY_CACHE_DIR", cache_dir())
        .current_dir(workspace())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running podpolicy");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(input)
            .expect("writing stdin");
    }
    let out = child.wait_with_output().expect("waiting for podpolicy");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The embedded policy with a custom section appended: the same policy
/// under another digest, i.e. a valid new version.
pub fn embedded_variant(tag: &str) -> Vec<u8> {
    let name = b"podpolicy-test-tag";
    let mut payload = vec![name.len() as u8];
    payload.extend_from_slice(name);
    payload.extend_from_slice(tag.as_bytes());
    let mut bytes = podpolicy::runtime::EMBEDDED_POLICY.to_vec();
    bytes.push(0); // custom section id
    bytes.push(payload.len() as u8); // LEB128 of a length < 128
    bytes.extend(payload);
    bytes
}
