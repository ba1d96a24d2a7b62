//! Policy versions on disk, and the checks a candidate passes before it
//! serves (the hot swap of [`crate::swap`]).
//!
//! A policy directory holds `.wasm` components, a `requests/` folder where
//! `podpolicy policy activate|rollback` leave one file per request, and
//! `state.json`, written only by the process serving from the directory
//! (the agent or the webhook): which digest is active, the rollback
//! history, and the verdict on every candidate it has seen. A `.wasm` file
//! that appears is a candidate once; an explicit activate request vets it
//! again (e.g. to return to a version after a rollback).
//!
//! Vetting ([`vet`]): the WIT version check happens at load; then the
//! built-in self-check (golden cases shipped inside the host: KEP example
//! pods and their exact expected answers) and a shadow evaluation of the
//! pods the node runs, where the candidate may compute different values
//! but must not fail, trap, reject a pod the serving version admits, or
//! produce output that fails the host's sanity checks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bindings::NodeSettings;
use crate::pod_input::PodDocument;
use crate::runtime::{Cache, Limits, PolicyRuntime};
use crate::swap::{PolicySlot, SwapOutcome, short};

/// Golden cases: (origin, pod YAML, the exact `explain` answer).
const GOLDEN_PODS: &[(&str, &str, &str)] = &[
    (
        "fixtures/pods/kep-ide.yaml",
        include_str!("../../fixtures/pods/kep-ide.yaml"),
        include_str!("../../fixtures/pods/kep-ide.expected.json"),
    ),
    (
        "fixtures/pods/kep-oom-example1-pod1.yaml",
        include_str!("../../fixtures/pods/kep-oom-example1-pod1.yaml"),
        include_str!("../../fixtures/pods/kep-oom-example1-pod1.expected.json"),
    ),
    (
        "fixtures/pods/kep-row16-all-set.yaml",
        include_str!("../../fixtures/pods/kep-row16-all-set.yaml"),
        include_str!("../../fixtures/pods/kep-row16-all-set.expected.json"),
    ),
    (
        "fixtures/pods/kep-row10-invalid-container-limits.yaml",
        include_str!("../../fixtures/pods/kep-row10-invalid-container-limits.yaml"),
        include_str!("../../fixtures/pods/kep-row10-invalid-container-limits.expected.json"),
    ),
];

/// The node the golden answers were computed on.
const GOLDEN_NODE: (&str, &str) = (
    "fixtures/nodes/node-1000gi.yaml",
    include_str!("../../fixtures/nodes/node-1000gi.yaml"),
);

/// The first place two JSON values differ, as a JSON pointer.
fn first_difference(path: &str, want: &Value, got: &Value) -> Option<String> {
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|k| {
                let child = format!("{path}/{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => first_difference(&child, x, y),
                    _ => Some(child),
                }
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(&format!("{path}/{i}"), x, y)),
        _ if want == got => None,
        _ => Some(if path.is_empty() {
            "/".into()
        } else {
            path.into()
        }),
    }
}

/// Run the golden cases on `candidate`; every answer must be exact.
pub fn self_check(candidate: &PolicyRuntime) -> Result<()> {
    let node = crate::node_input::parse_node(GOLDEN_NODE.0, GOLDEN_NODE.1)?;
    for (origin, pod, expected) in GOLDEN_PODS {
        let docs = crate::pod_input::parse_pods(origin, pod)?;
        let doc = docs.first().context("golden case without a pod")?;
        let (explanation, _) = crate::explain(candidate, doc, &node)
            .with_context(|| format!("self-check {origin}"))?;
        let got = serde_json::to_value(&explanation)?;
        let want: Value = serde_json::from_str(expected)?;
        if let Some(at) = first_difference("", &want, &got) {
            bail!(
                "self-check {origin}: the answer differs from the golden case at {at} (want {}, got {})",
                pointer_text(&want, &at),
                pointer_text(&got, &at)
            );
        }
    }
    Ok(())
}

fn pointer_text(value: &Value, at: &str) -> String {
    value
        .pointer(at)
        .map_or("nothing".to_string(), |v| v.to_string())
}

/// What a shadow evaluation found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ShadowReport {
    /// Pods evaluated.
    pub pods: usize,
    /// Pods whose values the candidate changes (`namespace/name`).
    pub changed: Vec<String>,
}

/// Evaluate every pod with both versions. The candidate fails when it
/// errors (trap, fuel, time, memory), rejects a pod the serving version
/// admits, or gives values that fail the host's sanity checks.
pub fn shadow_evaluate(
    candidate: &PolicyRuntime,
    serving: &PolicyRuntime,
    docs: &[PodDocument],
    node: &NodeSettings,
) -> Result<ShadowReport> {
    let mut report = ShadowReport::default();
    for doc in docs {
        let (new, _) = crate::explain(candidate, doc, node)
            .with_context(|| format!("shadow evaluation of {}", doc.origin))?;
        report.pods += 1;
        let old = crate::explain(serving, doc, node).ok().map(|(old, _)| old);
        if let Some(old) = &old {
            if old.errors.is_empty() && !new.errors.is_empty() {
                let errors: Vec<String> = new
                    .errors
                    .iter()
                    .map(|e| format!("{}: {}", e.field, e.message))
                    .collect();
                bail!(
                    "shadow evaluation: {} is admitted by the serving version and rejected by the candidate ({})",
                    new.pod,
                    errors.join("; ")
                );
            }
            if old != &new {
                report.changed.push(new.pod.clone());
            }
        }
        if new.errors.is_empty() {
            crate::apply::check_pod_output(doc, &new, node)
                .with_context(|| format!("shadow evaluation of {}", new.pod))?;
        }
    }
    Ok(report)
}

/// Self-check, then shadow evaluation of `docs`.
pub fn vet(
    candidate: &PolicyRuntime,
    serving: &PolicyRuntime,
    docs: &[PodDocument],
    node: &NodeSettings,
) -> Result<ShadowReport> {
    self_check(candidate)?;
    shadow_evaluate(candidate, serving, docs, node)
}

// ---------------------------------------------------------------------------
// The directory
// ---------------------------------------------------------------------------

/// A candidate's verdict, as recorded in `state.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The file it came from.
    pub file: String,
    /// Policy version string (empty when it did not load).
    #[serde(default)]
    pub version: String,
    /// Whether it was swapped in.
    pub accepted: bool,
    /// Why not, or what the shadow evaluation saw.
    pub detail: String,
}

/// `state.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DirState {
    /// Digest of the serving version.
    pub active: Option<String>,
    /// Its file in the directory (absent for the embedded policy).
    pub active_file: Option<String>,
    /// Earlier versions (digests), most recent last.
    pub history: Vec<String>,
    /// Every candidate seen, by digest.
    pub seen: BTreeMap<String, Verdict>,
    /// The last request or candidate that failed, and why.
    pub last_error: Option<String>,
}

impl DirState {
    /// A plain-text rendering for a terminal (`policy status`).
    pub fn to_table(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "active     {}",
            self.active.as_deref().unwrap_or("(embedded policy)")
        );
        if let Some(file) = &self.active_file {
            let _ = writeln!(out, "file       {file}");
        }
        let _ = writeln!(out, "history    {}", self.history.len());
        for digest in &self.history {
            let _ = writeln!(out, "  {digest}");
        }
        if let Some(error) = &self.last_error {
            let _ = writeln!(out, "last error {error}");
        }
        if !self.seen.is_empty() {
            let _ = writeln!(
                out,
                "{:<14} {:<24} {:<9} {:<10} DETAIL",
                "DIGEST", "FILE", "ACCEPTED", "VERSION"
            );
        }
        for (digest, v) in &self.seen {
            let short = &digest[..digest.len().min(12)];
            let _ = writeln!(
                out,
                "{short:<14} {:<24} {:<9} {:<10} {}",
                v.file, v.accepted, v.version, v.detail
            );
        }
        out
    }
}

/// One request left by the CLI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Vet and activate the `.wasm` file with this name in the directory.
    Activate(String),
    /// Return to the previous version.
    Rollback,
}

/// A policy directory.
#[derive(Clone, Debug)]
pub struct PolicyDir {
    dir: PathBuf,
}

fn is_wasm(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "wasm")
}

impl PolicyDir {
    /// Open (and create) a policy directory.
    pub fn open(dir: &Path) -> Result<PolicyDir> {
        std::fs::create_dir_all(dir.join("requests"))
            .with_context(|| format!("creating policy directory {}", dir.display()))?;
        Ok(PolicyDir {
            dir: dir.to_path_buf(),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Read `state.json` (empty when absent).
    pub fn state(&self) -> Result<DirState> {
        let path = self.dir.join("state.json");
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{}: not a policy directory state", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(DirState::default()),
            Err(e) => Err(anyhow!("reading {}: {e}", path.display())),
        }
    }

    fn save_state(&self, state: &DirState) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(state)?;
        crate::checkpoint::write_atomically(&self.dir.join("state.json"), &bytes)
    }

    /// The `.wasm` files, oldest first.
    pub fn components(&self) -> Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.dir)
            .with_context(|| format!("reading {}", self.dir.display()))?
        {
            let entry = entry?;
            let path = entry.path();
            if is_wasm(&path) && entry.file_type()?.is_file() {
                let modified = entry.metadata()?.modified().ok();
                files.push((modified, path));
            }
        }
        files.sort();
        Ok(files.into_iter().map(|(_, p)| p).collect())
    }

    /// Put `bytes` into the directory as `<digest>.wasm` (atomically) and
    /// leave an activate request for it. Returns the file's path.
    pub fn submit(&self, bytes: &[u8]) -> Result<PathBuf> {
        let digest = crate::runtime::digest(bytes);
        let name = format!("{digest}.wasm");
        let path = self.dir.join(&name);
        crate::checkpoint::write_atomically(&path, bytes)?;
        self.request(&format!("activate-{name}"), name.as_bytes())?;
        Ok(path)
    }

    /// Leave a rollback request.
    pub fn request_rollback(&self) -> Result<()> {
        self.request("rollback", b"")
    }

    fn request(&self, kind: &str, body: &[u8]) -> Result<()> {
        // Nanoseconds since the epoch order requests; the pid keeps two
        // CLIs in the same instant apart.
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = self
            .dir
            .join("requests")
            .join(format!("{stamp:024}-{}-{kind}", std::process::id()));
        crate::checkpoint::write_atomically(&path, body)
    }

    /// Pending requests, oldest first, with their files (removed by the
    /// caller once handled).
    pub fn requests(&self) -> Result<Vec<(PathBuf, Request)>> {
        let mut out = Vec::new();
        let dir = self.dir.join("requests");
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                !p.extension()
                    .is_some_and(|e| e.to_string_lossy().starts_with("tmp"))
            })
            .collect();
        names.sort();
        for path in names {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let request = if name.ends_with("-rollback") {
                Request::Rollback
            } else if name.contains("-activate-") {
                let target = std::fs::read_to_string(&path).unwrap_or_default();
                Request::Activate(target.trim().to_string())
            } else {
                continue;
            };
            out.push((path, request));
        }
        Ok(out)
    }
}

/// Serves from a policy directory: applies its requests and candidates to
/// a [`PolicySlot`] and keeps `state.json` true. Owned by one thread.
pub struct PolicyDirServer {
    dir: PolicyDir,
    cache: Cache,
    limits: Limits,
    state: DirState,
}

/// What one [`PolicyDirServer::poll`] did, for logs and metrics.
#[derive(Debug, Default)]
pub struct PollOutcome {
    /// Swaps and rollbacks that happened.
    pub swapped: Vec<SwapOutcome>,
    /// Candidates or requests that failed, with why.
    pub rejected: Vec<String>,
}

impl PolicyDirServer {
    /// Open `dir`; when its state names an active version whose file is
    /// still there, that version is loaded (from the compiled cache) and put
    /// into `slot` after the self-check, so a restart serves what served
    /// before.
    pub fn start(
        dir: &Path,
        slot: &PolicySlot,
        cache: Cache,
        limits: Limits,
    ) -> Result<PolicyDirServer> {
        let dir = PolicyDir::open(dir)?;
        let mut state = dir.state()?;
        let base = slot.current().digest().to_string();
        let mut server = PolicyDirServer {
            dir,
            cache,
            limits,
            state: DirState::default(),
        };
        if let (Some(active), Some(file)) = (state.active.clone(), state.active_file.clone())
            && active != base
        {
            let path = server.dir.dir.join(&file);
            let restored = PolicyRuntime::from_file(&path, &server.cache, server.limits).and_then(
                |candidate| {
                    if candidate.digest() != active {
                        bail!("{} no longer has digest {}", path.display(), short(&active));
                    }
                    slot.activate(candidate, |c, _| self_check(c))
                },
            );
            if let Err(e) = restored {
                tracing::warn!(error = %format!("{e:#}"), "could not restore the active policy; serving the base version");
                state.last_error = Some(format!("restoring {}: {e:#}", short(&active)));
            }
        }
        state.active = Some(slot.current().digest().to_string());
        if state.active.as_deref() == Some(base.as_str()) {
            state.active_file = None;
        }
        state.history = slot.history();
        server.state = state;
        server.dir.save_state(&server.state)?;
        Ok(server)
    }

    /// The directory.
    pub fn dir(&self) -> &PolicyDir {
        &self.dir
    }

    /// The recorded state.
    pub fn state(&self) -> &DirState {
        &self.state
    }

    /// Handle pending requests, then any `.wasm` file not seen before.
    /// `vet` runs each candidate against the serving version (see [`vet`]).
    pub fn poll(
        &mut self,
        slot: &PolicySlot,
        vet: &dyn Fn(&PolicyRuntime, &PolicyRuntime) -> Result<ShadowReport>,
    ) -> Result<PollOutcome> {
        let mut outcome = PollOutcome::default();
        for (path, request) in self.dir.requests()? {
            let result = match &request {
                Request::Rollback => slot.rollback().inspect(|swap| {
                    self.state.active_file = self
                        .state
                        .seen
                        .iter()
                        .find(|(digest, _)| **digest == swap.to_digest)
                        .map(|(_, v)| v.file.clone());
                }),
                Request::Activate(file) => self.try_candidate(slot, file, vet),
            };
            match result {
                Ok(swap) => outcome.swapped.push(swap),
                Err(e) => {
                    let text = format!("{e:#}");
                    self.state.last_error = Some(text.clone());
                    outcome.rejected.push(text);
                }
            }
            // A request is handled once, whatever its outcome.
            let _ = std::fs::remove_file(&path);
        }
        for path in self.dir.components()? {
            let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                continue;
            };
            if self.state.seen.values().any(|v| v.file == name) {
                continue;
            }
            match self.try_candidate(slot, &name, vet) {
                Ok(swap) => outcome.swapped.push(swap),
                Err(e) => {
                    let text = format!("{e:#}");
                    self.state.last_error = Some(text.clone());
                    outcome.rejected.push(text);
                }
            }
        }
        if !outcome.swapped.is_empty() || !outcome.rejected.is_empty() {
            self.state.active = Some(slot.current().digest().to_string());
            self.state.history = slot.history();
            self.dir.save_state(&self.state)?;
        }
        Ok(outcome)
    }

    fn try_candidate(
        &mut self,
        slot: &PolicySlot,
        file: &str,
        vet: &dyn Fn(&PolicyRuntime, &PolicyRuntime) -> Result<ShadowReport>,
    ) -> Result<SwapOutcome> {
        if file.contains('/') || file.starts_with('.') || !file.ends_with(".wasm") {
            bail!(
                "activate request names `{}`, not a .wasm file in the policy directory",
                file.escape_debug()
            );
        }
        let path = self.dir.dir.join(file);
        let bytes = std::fs::read(&path)
            .with_context(|| format!("reading candidate {}", path.display()))?;
        let digest = crate::runtime::digest(&bytes);
        let mut verdict = Verdict {
            file: file.to_string(),
            version: String::new(),
            accepted: false,
            detail: String::new(),
        };
        // Compiled here, on the directory thread: callers keep being served
        // by the current version meanwhile.
        let result = PolicyRuntime::from_bytes(&bytes, &self.cache, self.limits)
            .with_context(|| format!("loading candidate {file}"))
            .and_then(|candidate| {
                verdict.version = candidate.info().policy_version.clone();
                let mut detail = String::new();
                let swap = slot.activate(candidate, |c, serving| {
                    let report = vet(c, serving)?;
                    detail = format!(
                        "shadow evaluation: {} pods, {} with changed values",
                        report.pods,
                        report.changed.len()
                    );
                    Ok(())
                })?;
                Ok((swap, detail))
            });
        match result {
            Ok((swap, detail)) => {
                verdict.accepted = true;
                verdict.detail = detail;
                self.state.active_file = Some(file.to_string());
                self.state.seen.insert(digest, verdict);
                Ok(swap)
            }
            Err(e) => {
                verdict.detail = format!("{e:#}");
                self.state.seen.insert(digest, verdict);
                Err(e)
            }
        }
    }
}

/// Serve `slot` from a policy directory in a background thread, polling it
/// every `interval`: for servers without a pod list of their own (the
/// webhook), so a candidate is vetted by the self-check alone. Each swap or
/// rejection is passed to `report`.
pub fn watch_in_background(
    mut server: PolicyDirServer,
    slot: std::sync::Arc<PolicySlot>,
    interval: std::time::Duration,
    report: impl Fn(&PollOutcome) + Send + 'static,
) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("podpolicy-policy-dir".into())
        .spawn(move || {
            let vet = |candidate: &PolicyRuntime, _: &PolicyRuntime| -> Result<ShadowReport> {
                self_check(candidate)?;
                Ok(ShadowReport::default())
            };
            loop {
                match server.poll(&slot, &vet) {
                    Ok(outcome) => report(&outcome),
                    Err(e) => tracing::error!(error = %format!("{e:#}"), "policy directory"),
                }
                std::thread::sleep(interval);
            }
        })
        .context("starting the policy directory thread")
}
