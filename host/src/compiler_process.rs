//! Compiling a policy candidate in a child process that can be killed.
//!
//! wasmtime compiles in-process and a compile cannot be interrupted: a
//! candidate built to compile for minutes (one huge function) would keep a
//! vetting thread, a core and its memory busy long after its deadline. A
//! long-lived server (the agent, the webhook) therefore compiles candidates
//! in a child, `podpolicy policy precompile`, which compiles with the same
//! limits into the same on-disk cache and exits; past the vetting deadline
//! the child is killed. The server then loads the cached artifact (or, if
//! the child could not cache it, compiles again in-process, which is known
//! to finish: it just did, in the child).
//!
//! Which program is the compiler is set once by `main`
//! ([`use_program`]); without it (tests, library users) candidates compile
//! in-process as before.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use crate::runtime::{Cache, Limits};

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Compile candidates with `program policy precompile` from now on.
pub fn use_program(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// The program set by [`use_program`], if any.
pub fn program() -> Option<PathBuf> {
    PROGRAM.get().cloned()
}

/// How much of the child's error output is kept.
const MAX_ERROR_BYTES: u64 = 16 << 10;

/// How often the parent looks whether the child has ended.
const POLL: Duration = Duration::from_millis(10);

/// Compile `wasm` with `program policy precompile`, into `cache` when it is
/// a directory; kill the child if it has not finished within `deadline`.
pub fn compile(
    program: &Path,
    wasm: &[u8],
    cache: &Cache,
    limits: Limits,
    deadline: Duration,
) -> Result<()> {
    let began = Instant::now();
    // The same limits as the server's, so the same engine settings and
    // the same cache key.
    let mut command = Command::new(program);
    command
        .arg("--memory-mib")
        .arg((limits.memory_bytes >> 20).to_string());
    if let Some(fuel) = limits.fuel {
        command.arg("--fuel").arg(fuel.to_string());
    }
    match cache {
        Cache::Dir(dir) => command.arg("--cache-dir").arg(dir),
        Cache::Off => command.arg("--no-cache"),
    };
    command.args(["policy", "precompile"]);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting the compiler process {}", program.display()))?;
    // The child reads all of its input before it compiles.
    let written = child
        .stdin
        .take()
        .context("the compiler process has no stdin")?
        .write_all(wasm);
    let mut stderr = child
        .stderr
        .take()
        .context("the compiler process has no stderr")?;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .context("waiting for the compiler process")?
        {
            break status;
        }
        if began.elapsed() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "compiling took longer than {} s; the compiler process was killed",
                deadline.as_secs_f64()
            );
        }
        std::thread::sleep(POLL);
    };
    let mut error = String::new();
    let _ = (&mut stderr)
        .take(MAX_ERROR_BYTES)
        .read_to_string(&mut error);
    if !status.success() {
        let error = error.trim();
        return Err(match error.strip_prefix("podpolicy: ") {
            Some(message) => anyhow!("{message}"),
            None if error.is_empty() => anyhow!("the compiler process failed ({status})"),
            None => anyhow!("{error}"),
        });
    }
    written.context("sending the candidate to the compiler process")?;
    Ok(())
}

/// The child's side (`podpolicy policy precompile`): read the component
/// from stdin (bounded), compile it with `limits` into `cache`.
pub fn precompile_stdin(cache: &Cache, limits: Limits) -> Result<()> {
    let cap = crate::policy_dir::MAX_CANDIDATE_BYTES;
    let mut wasm = Vec::new();
    std::io::stdin()
        .lock()
        .take(cap + 1)
        .read_to_end(&mut wasm)
        .context("reading the component from stdin")?;
    if wasm.len() as u64 > cap {
        bail!("the component is larger than {cap} bytes");
    }
    crate::runtime::precompile(&wasm, cache, limits)
}
