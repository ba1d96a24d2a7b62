//! Policy versions on disk, and the checks a candidate passes before it
//! serves (the hot swap of [`crate::swap`]).
//!
//! A policy directory holds `.wasm` components, a `requests/` folder where
//! `podpolicy policy activate|rollback` leave one file per request, and
//! `state.json`, written only by the process serving from the directory
//! (the agent or the webhook): which digest is active, the rollback
//! history, and the verdict on every candidate it has seen. A `.wasm` file
//! that appears is a candidate once per version of the file (size,
//! modification and change times, inode): a file caught half written is
//! refused, then vetted again once it is complete; an explicit activate
//! request vets it again (e.g. to return to a version after a rollback).
//!
//! Nothing in the directory can stall or exhaust the server: only regular
//! files are read (a symbolic link, a FIFO or a device is refused with
//! what it is, without being opened), never more than
//! [`MAX_CANDIDATE_BYTES`] ([`crate::bounded_read`]); hidden names
//! (temp files) are ignored; and a candidate is read, compiled and
//! self-checked on a vetting thread with a deadline ([`VETTING_DEADLINE`]),
//! so the thread that polls (the agent's reconcile loop) never waits for
//! it: the serving version keeps serving, and the swap happens on a later
//! poll. A request is handled once whatever its outcome.
//!
//! Vetting ([`vet`]): the WIT version check happens at load; then the
//! built-in self-check (golden cases shipped inside the host: KEP example
//! pods and their exact expected answers) and a shadow evaluation of the
//! pods the node runs, where the candidate may compute different values
//! but must not fail, trap, reject a pod the serving version admits, or
//! produce output that fails the host's sanity checks.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bindings::NodeSettings;
use crate::bounded_read::{self, FileStamp};
use crate::pod_input::PodDocument;
use crate::runtime::{Cache, Limits, PolicyRuntime};
use crate::swap::{Heartbeat, PolicySlot, SwapOutcome, short};

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
        let explanation = crate::explain(candidate, doc, &node)
            .with_context(|| format!("self-check {origin}"))?
            .explanation();
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
    /// The values it changes, as `policy diff` lists them (at most
    /// [`MAX_RECORDED_CHANGES`]; `changed` counts every pod).
    pub changes: Vec<crate::policy_diff::DiffRow>,
}

/// The most changed values a shadow evaluation records (`state.json`
/// stays small with thousands of pods; `policy diff` lists them all).
pub const MAX_RECORDED_CHANGES: usize = 200;

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
        let new = crate::explain(candidate, doc, node)
            .with_context(|| format!("shadow evaluation of {}", doc.origin))?;
        report.pods += 1;
        let old = crate::explain(serving, doc, node).ok();
        if let Some(old) = &old {
            if old.evaluated().is_some() && new.evaluated().is_none() {
                bail!(
                    "shadow evaluation: {} is admitted by the serving version and rejected by the candidate ({})",
                    new.name,
                    new.refusals().join("; ")
                );
            }
            if old != &new {
                report.changed.push(new.name.clone());
                let room = MAX_RECORDED_CHANGES.saturating_sub(report.changes.len());
                report.changes.extend(
                    crate::policy_diff::diff_pods(old, &new)
                        .into_iter()
                        .take(room),
                );
            }
        }
        if let Some(evaluated) = new.evaluated() {
            crate::apply::check_pod_output(doc, evaluated, node)
                .with_context(|| format!("shadow evaluation of {}", new.name))?;
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

/// The largest policy candidate read. The policy component is a few MiB;
/// a bigger file is refused by its size before any of it is read (an 8 GiB
/// file once took a server to 8.5 GB), and no read goes past this even when
/// the file grows meanwhile.
pub const MAX_CANDIDATE_BYTES: u64 = 16 << 20;

/// How long a candidate may take to be read, compiled and self-checked on
/// its worker thread. Past it the candidate is refused and its thread
/// abandoned (it cannot be interrupted; its result is dropped).
pub const VETTING_DEADLINE: Duration = Duration::from_secs(120);

/// Vetting threads alive at once, abandoned ones included: a candidate
/// waits in the queue while this many are still compiling.
const MAX_VETTING_THREADS: usize = 2;

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
    /// The values the shadow evaluation saw it change (`policy diff` rows,
    /// at most [`MAX_RECORDED_CHANGES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<crate::policy_diff::DiffRow>,
}

/// How coarse file timestamps may be: the kernel stamps writes with a
/// clock tick (milliseconds), some filesystems with whole seconds.
const TIMESTAMP_TICK_NS: i64 = 2_000_000_000;

impl FileVerdict {
    /// Whether the verdict may be stale although the file's stamp is
    /// unchanged: the file was read within a timestamp tick of its last
    /// change, so a same-size write in the same tick (an in-place rewrite
    /// finishing a non-atomic copy) leaves the stamp as it was ("racy
    /// git"). Such a file is read once more when the tick is over, at
    /// `now_ns`; that read settles it.
    pub fn racy(&self, now_ns: i64) -> bool {
        let changed = self.stamp.changed_ns.max(self.stamp.modified_ns);
        self.read_ns < changed.saturating_add(TIMESTAMP_TICK_NS)
            && now_ns >= changed.saturating_add(TIMESTAMP_TICK_NS)
    }
}

/// The wall clock, nanoseconds since the epoch (file times are on it).
fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// What happened to one version of a `.wasm` file in the directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileVerdict {
    /// The version of the file considered (size, times, inode): the file is
    /// considered again once any of them changes.
    #[serde(flatten)]
    pub stamp: FileStamp,
    /// Digest of the bytes read (absent when the file was not read: not a
    /// regular file, too large, unreadable).
    pub digest: Option<String>,
    /// Whether it was swapped in.
    pub accepted: bool,
    /// Why not, or what the shadow evaluation saw.
    pub detail: String,
    /// Wall-clock time just before the file was read, nanoseconds since
    /// the epoch (0: unknown). See [`FileVerdict::racy`].
    #[serde(default)]
    pub read_ns: i64,
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
    /// Every `.wasm` file in the directory considered, by name.
    #[serde(default)]
    pub files: BTreeMap<String, FileVerdict>,
    /// Files queued or being vetted now, in order. A server that starts and
    /// finds files here was stopped while vetting them (a restart, or a
    /// crash the candidate caused): they are recorded as interrupted, not
    /// vetted again, so a candidate that crashes the server cannot do it in
    /// a loop.
    #[serde(default)]
    pub vetting: Vec<String>,
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
        if !self.vetting.is_empty() {
            let _ = writeln!(out, "vetting    {}", self.vetting.join(", "));
        }
        if let Some(error) = &self.last_error {
            let _ = writeln!(out, "last error {error}");
        }
        // Files never read have no digest, so no row in `seen`.
        let unread: Vec<(&String, &FileVerdict)> = self
            .files
            .iter()
            .filter(|(_, v)| v.digest.is_none())
            .collect();
        if !self.seen.is_empty() || !unread.is_empty() {
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
        for (file, v) in unread {
            let _ = writeln!(
                out,
                "{:<14} {file:<24} {:<9} {:<10} {}",
                "-", v.accepted, "", v.detail
            );
        }
        for (digest, v) in self.seen.iter().filter(|(_, v)| !v.changes.is_empty()) {
            let short = &digest[..digest.len().min(12)];
            let _ = writeln!(out, "\nchanges by {short} ({}):", v.file);
            out.push_str(&crate::policy_diff::render_rows(&v.changes));
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

/// A name the directory's readers consider: not hidden (temp files of
/// [`crate::checkpoint::write_atomically`] are `.<name>.tmp.<pid>`).
fn visible(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.')
}

fn is_wasm_name(name: &str) -> bool {
    visible(name) && Path::new(name).extension().is_some_and(|e| e == "wasm")
}

/// A request file's name, `<24-digit stamp>-<pid>-rollback` or
/// `<24-digit stamp>-<pid>-activate-<file>.wasm` (what
/// [`PolicyDir::submit`] and [`PolicyDir::request_rollback`] write, by
/// renaming a complete temp file into place): anything else in `requests/`
/// (a temp file, an editor's backup) is not a request.
fn parse_request_name(name: &str) -> Option<Request> {
    if !visible(name) {
        return None;
    }
    let (stamp, rest) = name.split_once('-')?;
    let (pid, kind) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(stamp) || !digits(pid) {
        return None;
    }
    if kind == "rollback" {
        return Some(Request::Rollback);
    }
    let file = kind.strip_prefix("activate-")?;
    (!file.is_empty()).then(|| Request::Activate(file.to_string()))
}

impl PolicyDir {
    /// Open (and create) a policy directory.
    /// Open an existing policy directory without creating anything (what
    /// `policy status` reads: a typo in the path is an error, not a new
    /// empty directory).
    pub fn open_existing(dir: &Path) -> Result<PolicyDir> {
        match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => Ok(PolicyDir {
                dir: dir.to_path_buf(),
            }),
            Ok(_) => Err(anyhow!("{}: not a directory", dir.display())),
            Err(e) => Err(anyhow!("policy directory {}: {e}", dir.display())),
        }
    }

    /// Open `dir`, creating it and its `requests/` when missing (the
    /// serving process and `policy activate|rollback`).
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
        Ok(self.read_state()?.0)
    }

    /// `state.json`, and whether it records file versions
    /// ([`DirState::files`]; a state written before they were has none).
    fn read_state(&self) -> Result<(DirState, bool)> {
        let path = self.dir.join("state.json");
        let not_state = || format!("{}: not a policy directory state", path.display());
        match bounded_read::read_regular_file(&path, MAX_STATE_BYTES, "policy directory state") {
            Ok(bytes) => {
                let value: Value = serde_json::from_slice(&bytes).with_context(not_state)?;
                let has_files = value.get("files").is_some();
                let state = serde_json::from_value(value).with_context(not_state)?;
                Ok((state, has_files))
            }
            Err(e) if e.is_not_found() => Ok((DirState::default(), true)),
            Err(e) => Err(e.into()),
        }
    }

    fn save_state(&self, state: &DirState) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(state)?;
        crate::checkpoint::write_atomically(&self.dir.join("state.json"), &bytes)
    }

    /// Every visible `.wasm` entry that is not a directory, oldest first,
    /// with its `lstat` metadata (nothing is opened, so nothing blocks).
    fn entries(&self) -> Result<Vec<(String, std::fs::Metadata)>> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.dir)
            .with_context(|| format!("reading {}", self.dir.display()))?
        {
            let entry = entry.with_context(|| format!("reading {}", self.dir.display()))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !is_wasm_name(&name) {
                continue;
            }
            // Gone meanwhile: not a candidate.
            let Ok(metadata) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if !metadata.is_dir() {
                files.push((metadata.modified().ok(), name, metadata));
            }
        }
        files.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        Ok(files.into_iter().map(|(_, n, m)| (n, m)).collect())
    }

    /// The regular `.wasm` files, oldest first.
    pub fn components(&self) -> Result<Vec<PathBuf>> {
        Ok(self
            .entries()?
            .into_iter()
            .filter(|(_, m)| m.file_type().is_file())
            .map(|(name, _)| self.dir.join(name))
            .collect())
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

    /// Write a request: a temp file renamed into place, so a reader sees a
    /// complete request or none (the temp name is hidden, see
    /// [`parse_request_name`]).
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
    /// caller once handled). Only names in the request format count; the
    /// request is in the name, so no request file is ever read.
    pub fn requests(&self) -> Result<Vec<(PathBuf, Request)>> {
        let dir = self.dir.join("requests");
        let mut out = Vec::new();
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if let Some(request) = parse_request_name(&name) {
                out.push((entry.path(), request));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// The most read from `state.json`.
const MAX_STATE_BYTES: u64 = 16 << 20;

/// Why a candidate failed on its vetting thread.
enum Refusal {
    /// Not read or not loaded (not a regular file, too large, not a
    /// component, imports something, wrong WIT version).
    Load(anyhow::Error),
    /// Loaded, but its answers differ from the golden cases.
    SelfCheck(anyhow::Error),
}

/// What a vetting thread found.
struct Prepared {
    /// The version of the file read (`fstat` of the opened file).
    stamp: Option<FileStamp>,
    digest: Option<String>,
    version: String,
    result: std::result::Result<PolicyRuntime, Refusal>,
}

/// Read, compile and self-check one candidate: what runs on a vetting
/// thread, away from the thread that serves or reconciles.
fn prepare(
    path: &Path,
    file: &str,
    cap: u64,
    cache: &Cache,
    limits: Limits,
    serving_digest: &str,
    compiler: Option<(&Path, Duration)>,
) -> Prepared {
    let mut prepared = Prepared {
        stamp: None,
        digest: None,
        version: String::new(),
        result: Err(Refusal::Load(anyhow!("not read"))),
    };
    let (bytes, metadata) =
        match bounded_read::read_regular_file_nofollow(path, cap, "policy candidate") {
            Ok(read) => read,
            Err(e) => {
                prepared.result = Err(Refusal::Load(e.into()));
                return prepared;
            }
        };
    prepared.stamp = Some(FileStamp::of(&metadata));
    let digest = crate::runtime::digest(&bytes);
    prepared.digest = Some(digest.clone());
    // In a child that is killed past the deadline, when there is one: a
    // compile cannot be stopped in-process.
    if let Some((program, deadline)) = compiler
        && let Err(e) = crate::compiler_process::compile(program, &bytes, cache, limits, deadline)
    {
        prepared.result = Err(Refusal::Load(
            e.context(format!("loading candidate {file}: compiling it")),
        ));
        return prepared;
    }
    let candidate = match PolicyRuntime::from_bytes(&bytes, cache, limits)
        .with_context(|| format!("loading candidate {file}"))
    {
        Ok(candidate) => candidate,
        Err(e) => {
            prepared.result = Err(Refusal::Load(e));
            return prepared;
        }
    };
    drop(bytes);
    prepared.version = candidate.info().policy_version.clone();
    // The serving version is not checked again (activating it is a no-op).
    prepared.result = if digest == serving_digest {
        Ok(candidate)
    } else {
        match self_check(&candidate) {
            Ok(()) => Ok(candidate),
            Err(e) => Err(Refusal::SelfCheck(e)),
        }
    };
    prepared
}

/// The candidate on its vetting thread.
struct Job {
    file: String,
    /// The file as it was when queued (`lstat`), when it was there.
    stamp: Option<FileStamp>,
    started: Instant,
    /// [`wall_ns`] before its thread started (so before the read).
    read_ns: i64,
    rx: mpsc::Receiver<Prepared>,
    /// A result already taken from `rx` by [`PolicyDirServer::wait_for_vetting`].
    done: Option<Prepared>,
}

/// Decrements the count of live vetting threads when one ends.
struct ThreadCount(Arc<AtomicUsize>);

impl Drop for ThreadCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves from a policy directory: applies its requests and candidates to
/// a [`PolicySlot`] and keeps `state.json` true. Owned by one thread, which
/// calls [`PolicyDirServer::poll`] now and then; candidates are read,
/// compiled and self-checked on a vetting thread meanwhile, so a poll never
/// waits for them: a candidate is swapped in by the first poll after its
/// vetting thread is done (and it passes the caller's `vet`).
pub struct PolicyDirServer {
    dir: PolicyDir,
    cache: Cache,
    limits: Limits,
    state: DirState,
    max_candidate_bytes: u64,
    deadline: Duration,
    /// How long a compile in the child may take; `None`: three quarters
    /// of [`Self::deadline`].
    compile_deadline: Option<Duration>,
    /// Files waiting for a vetting thread, with their stamp when queued.
    queue: VecDeque<(String, Option<FileStamp>)>,
    /// Queued files read again only because their verdict was racy
    /// ([`FileVerdict::racy`]): the same bytes keep their verdict (an
    /// accepted version rolled back since is not swapped in again).
    rechecks: BTreeSet<String>,
    /// The program that compiles candidates in a child process
    /// ([`crate::compiler_process`]); in-process without one.
    compiler: Option<PathBuf>,
    job: Option<Job>,
    threads: Arc<AtomicUsize>,
    waker: Option<Arc<dyn Fn() + Send + Sync>>,
    heartbeat: Arc<Heartbeat>,
    /// Requests handled whose file could not be removed.
    handled: BTreeSet<String>,
}

/// What one [`PolicyDirServer::poll`] did, for logs and metrics.
#[derive(Debug, Default)]
pub struct PollOutcome {
    /// Swaps and rollbacks that happened.
    pub swapped: Vec<SwapOutcome>,
    /// Candidates or requests that failed, with why.
    pub rejected: Vec<String>,
}

impl PollOutcome {
    fn extend(&mut self, other: PollOutcome) {
        self.swapped.extend(other.swapped);
        self.rejected.extend(other.rejected);
    }

    /// One log line per swap (info) and per rejection (warning).
    pub fn log(&self) {
        for swap in &self.swapped {
            tracing::info!(
                from = crate::swap::short(&swap.from_digest),
                to = crate::swap::short(&swap.to_digest),
                version = %swap.to_version,
                rollback = swap.rollback,
                "policy swapped"
            );
        }
        for reason in &self.rejected {
            tracing::warn!(reason = %reason, "policy candidate or request rejected");
        }
    }
}

impl PolicyDirServer {
    /// Open `dir`; when its state names an active version whose file is
    /// still there, that version is loaded (from the compiled cache) and put
    /// into `slot` after the self-check, so a restart serves what served
    /// before. Files the state says were being vetted when the last server
    /// stopped are recorded as interrupted (see [`DirState::vetting`]).
    pub fn start(
        dir: &Path,
        slot: &PolicySlot,
        cache: Cache,
        limits: Limits,
    ) -> Result<PolicyDirServer> {
        let dir = PolicyDir::open(dir)?;
        let (mut state, has_files) = dir.read_state()?;
        if !has_files {
            // Written by a server that kept no file versions: the files it
            // named were considered already (vetting them again could bring
            // back a version rolled back since).
            for (name, metadata) in dir.entries()? {
                if let Some((digest, verdict)) = state.seen.iter().find(|(_, v)| v.file == name) {
                    let verdict = FileVerdict {
                        stamp: FileStamp::of(&metadata),
                        digest: Some(digest.clone()),
                        accepted: verdict.accepted,
                        detail: verdict.detail.clone(),
                        read_ns: wall_ns(),
                    };
                    state.files.insert(name, verdict);
                }
            }
        }
        let base = slot.current().digest().to_string();
        let mut server = PolicyDirServer {
            dir,
            cache,
            limits,
            state: DirState::default(),
            max_candidate_bytes: MAX_CANDIDATE_BYTES,
            deadline: VETTING_DEADLINE,
            compile_deadline: None,
            queue: VecDeque::new(),
            rechecks: BTreeSet::new(),
            compiler: crate::compiler_process::program(),
            job: None,
            threads: Arc::new(AtomicUsize::new(0)),
            waker: None,
            heartbeat: Arc::new(Heartbeat::new()),
            handled: BTreeSet::new(),
        };
        if let (Some(active), Some(file)) = (state.active.clone(), state.active_file.clone())
            && active != base
        {
            let path = server.dir.dir.join(&file);
            let restored = bounded_read::read_regular_file_nofollow(
                &path,
                server.max_candidate_bytes,
                "active policy",
            )
            .map_err(anyhow::Error::from)
            .and_then(|(bytes, _)| {
                PolicyRuntime::from_bytes(&bytes, &server.cache, server.limits)
                    .with_context(|| format!("loading policy {}", path.display()))
            })
            .and_then(|candidate| {
                if candidate.digest() != active {
                    bail!("{} no longer has digest {}", path.display(), short(&active));
                }
                slot.activate(candidate, |c, _| self_check(c))
            });
            if let Err(e) = restored {
                tracing::warn!(error = %format!("{e:#}"), "could not restore the active policy; serving the base version");
                state.last_error = Some(format!("restoring {}: {e:#}", short(&active)));
            }
        }
        for file in std::mem::take(&mut state.vetting) {
            let detail = format!(
                "policy candidate {file}: interrupted, the server stopped while vetting it (a restart, or a crash); it is vetted again when the file changes or on `policy activate`"
            );
            tracing::warn!("{detail}");
            if let Ok(metadata) = std::fs::symlink_metadata(server.dir.dir.join(&file)) {
                state.files.insert(
                    file.clone(),
                    FileVerdict {
                        stamp: FileStamp::of(&metadata),
                        digest: None,
                        accepted: false,
                        detail: detail.clone(),
                        // Never racy: a candidate that may have crashed the
                        // server is not read again until its stamp changes.
                        read_ns: i64::MAX,
                    },
                );
            }
            state.last_error = Some(detail);
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

    /// The largest candidate read (default [`MAX_CANDIDATE_BYTES`]).
    pub fn set_max_candidate_bytes(&mut self, bytes: u64) {
        self.max_candidate_bytes = bytes;
    }

    /// Compile candidates with `program policy precompile` in a child that
    /// is killed past the deadline (default: the program `main` set with
    /// [`crate::compiler_process::use_program`]); `None` compiles in-process.
    pub fn set_compiler(&mut self, program: Option<PathBuf>) {
        self.compiler = program;
    }

    /// How long a compile in the child process may take (default: three
    /// quarters of the vetting deadline).
    pub fn set_compile_deadline(&mut self, deadline: Duration) {
        self.compile_deadline = Some(deadline);
    }

    /// How long a candidate may take on its vetting thread (default
    /// [`VETTING_DEADLINE`]).
    pub fn set_vetting_deadline(&mut self, deadline: Duration) {
        self.deadline = deadline;
    }

    /// Called from the vetting thread when a candidate is ready, so the
    /// serving loop can poll at once instead of at its next wake-up.
    pub fn set_waker(&mut self, waker: impl Fn() + Send + Sync + 'static) {
        self.waker = Some(Arc::new(waker));
    }

    /// Beaten by every [`PolicyDirServer::poll`]: the liveness of the loop
    /// that polls (see [`Heartbeat`]).
    pub fn heartbeat(&self) -> Arc<Heartbeat> {
        self.heartbeat.clone()
    }

    /// The directory.
    pub fn dir(&self) -> &PolicyDir {
        &self.dir
    }

    /// The recorded state.
    pub fn state(&self) -> &DirState {
        &self.state
    }

    /// Whether no candidate is queued or being vetted.
    pub fn is_idle(&self) -> bool {
        self.job.is_none() && self.queue.is_empty()
    }

    /// Handle pending requests, find new or changed `.wasm` files, start
    /// vetting the next candidate, and finish the one whose vetting thread
    /// is done: `vet` runs it against the serving version (see [`vet`]) and
    /// it is swapped in when it passes. Never waits for a vetting thread.
    pub fn poll(
        &mut self,
        slot: &PolicySlot,
        vet: &dyn Fn(&PolicyRuntime, &PolicyRuntime) -> Result<ShadowReport>,
    ) -> Result<PollOutcome> {
        self.heartbeat.beat();
        let mut outcome = PollOutcome::default();
        let mut changed = self.handle_requests(slot, &mut outcome)?;
        changed |= self.scan(&mut outcome)?;
        changed |= self.finish_job(slot, vet, &mut outcome);
        changed |= self.start_job(slot, &mut outcome);
        if changed {
            self.state.active = Some(slot.current().digest().to_string());
            self.state.history = slot.history();
            self.state.vetting = self
                .job
                .iter()
                .map(|job| job.file.clone())
                .chain(self.queue.iter().map(|(file, _)| file.clone()))
                .collect();
            self.dir.save_state(&self.state)?;
        }
        Ok(outcome)
    }

    /// [`PolicyDirServer::poll`] until every candidate found is vetted, or
    /// `timeout` passes: for callers that run once (`agent --once`, tests)
    /// and must see the outcome.
    pub fn settle(
        &mut self,
        slot: &PolicySlot,
        vet: &dyn Fn(&PolicyRuntime, &PolicyRuntime) -> Result<ShadowReport>,
        timeout: Duration,
    ) -> Result<PollOutcome> {
        let end = Instant::now() + timeout;
        let mut outcome = PollOutcome::default();
        loop {
            outcome.extend(self.poll(slot, vet)?);
            let left = end.saturating_duration_since(Instant::now());
            if self.is_idle() || left.is_zero() {
                return Ok(outcome);
            }
            self.wait_for_vetting(left.min(Duration::from_millis(250)));
        }
    }

    /// Wait up to `timeout` for the vetting thread to be done (at once when
    /// nothing is being vetted and nothing is queued); a poll then finishes
    /// the candidate.
    pub fn wait_for_vetting(&mut self, timeout: Duration) {
        match &mut self.job {
            Some(job) if job.done.is_none() => {
                if let Ok(prepared) = job.rx.recv_timeout(timeout) {
                    job.done = Some(prepared);
                }
            }
            Some(_) => {}
            // Queued behind abandoned threads: try again later.
            None if !self.queue.is_empty() => {
                std::thread::sleep(timeout.min(Duration::from_millis(50)))
            }
            None => {}
        }
    }

    fn handle_requests(&mut self, slot: &PolicySlot, outcome: &mut PollOutcome) -> Result<bool> {
        let mut changed = false;
        for (path, request) in self.dir.requests()? {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if self.handled.contains(&name) {
                continue;
            }
            changed = true;
            let result = match &request {
                Request::Rollback => slot.rollback().map(|swap| {
                    self.state.active_file = self
                        .state
                        .seen
                        .iter()
                        .find(|(digest, _)| **digest == swap.to_digest)
                        .map(|(_, v)| v.file.clone());
                    Some(swap)
                }),
                Request::Activate(file) if !is_wasm_name(file) || file.contains('/') => {
                    Err(anyhow!(
                        "activate request names `{}`, not a .wasm file in the policy directory",
                        file.escape_debug()
                    ))
                }
                Request::Activate(file) => {
                    self.enqueue(file);
                    Ok(None)
                }
            };
            match result {
                Ok(Some(swap)) => {
                    // A success clears the last failure: it is history now.
                    self.state.last_error = None;
                    outcome.swapped.push(swap);
                }
                Ok(None) => {}
                Err(e) => self.reject(outcome, format!("{e:#}")),
            }
            // A request is handled once, whatever its outcome (an activation
            // is recorded in `vetting` until it is done).
            if let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                self.reject(
                    outcome,
                    format!(
                        "removing the handled request {}: {e} (it is not handled again)",
                        path.display()
                    ),
                );
                self.handled.insert(name);
            }
        }
        Ok(changed)
    }

    /// Queue `file` for vetting unless it is queued or being vetted.
    fn enqueue(&mut self, file: &str) {
        // Asked for by name: vetted in full, whatever its verdict was.
        self.rechecks.remove(file);
        if self.job.as_ref().is_some_and(|job| job.file == file)
            || self.queue.iter().any(|(queued, _)| queued == file)
        {
            return;
        }
        let stamp = std::fs::symlink_metadata(self.dir.dir.join(file))
            .ok()
            .map(|m| FileStamp::of(&m));
        self.queue.push_back((file.to_string(), stamp));
    }

    /// Queue new and changed `.wasm` files; refuse the ones that are not
    /// regular files or too large without opening them.
    fn scan(&mut self, outcome: &mut PollOutcome) -> Result<bool> {
        let mut changed = false;
        let now = wall_ns();
        let entries = self.dir.entries()?;
        let present: BTreeSet<&str> = entries.iter().map(|(name, _)| name.as_str()).collect();
        let before = self.state.files.len();
        self.state
            .files
            .retain(|name, _| present.contains(name.as_str()));
        changed |= self.state.files.len() != before;
        for (name, metadata) in &entries {
            let stamp = FileStamp::of(metadata);
            if self.job.as_ref().is_some_and(|job| &job.file == name)
                || self.queue.iter().any(|(queued, _)| queued == name)
            {
                continue;
            }
            match self.state.files.get(name) {
                Some(verdict) if verdict.stamp == stamp && !verdict.racy(now) => continue,
                Some(verdict) if verdict.stamp == stamp => {
                    self.rechecks.insert(name.clone());
                }
                _ => {
                    self.rechecks.remove(name);
                }
            }
            changed = true;
            let refusal = if !metadata.file_type().is_file() {
                Some(format!(
                    "policy candidate {name} is not a regular file ({}){}",
                    bounded_read::file_kind(metadata.file_type()),
                    if metadata.file_type().is_symlink() {
                        "; links are not followed here"
                    } else {
                        ""
                    }
                ))
            } else if metadata.len() > self.max_candidate_bytes {
                Some(format!(
                    "policy candidate {name} is larger than {} bytes ({} bytes)",
                    self.max_candidate_bytes,
                    metadata.len()
                ))
            } else {
                None
            };
            match refusal {
                Some(detail) => {
                    self.record(
                        name,
                        Some((stamp, now)),
                        None,
                        String::new(),
                        false,
                        &detail,
                    );
                    self.reject(outcome, detail);
                }
                None => self.queue.push_back((name.clone(), Some(stamp))),
            }
        }
        Ok(changed)
    }

    /// Start a vetting thread for the next queued file, when none is
    /// running and fewer than [`MAX_VETTING_THREADS`] are alive.
    fn start_job(&mut self, slot: &PolicySlot, outcome: &mut PollOutcome) -> bool {
        if self.job.is_some() || self.threads.load(Ordering::SeqCst) >= MAX_VETTING_THREADS {
            return false;
        }
        let Some((file, stamp)) = self.queue.pop_front() else {
            return false;
        };
        let (tx, rx) = mpsc::channel();
        let path = self.dir.dir.join(&file);
        let (name, cap, cache, limits) = (
            file.clone(),
            self.max_candidate_bytes,
            self.cache.clone(),
            self.limits,
        );
        let serving = slot.current().digest().to_string();
        let waker = self.waker.clone();
        // The compile gets three quarters of the deadline; the rest is for
        // loading the artifact and the self-check, so a killed compile is
        // reported as such before the job itself is given up.
        let deadline = self.compile_deadline.unwrap_or(self.deadline * 3 / 4);
        let compiler = self.compiler.clone();
        self.threads.fetch_add(1, Ordering::SeqCst);
        let count = ThreadCount(self.threads.clone());
        let read_ns = wall_ns();
        let spawned = std::thread::Builder::new()
            .name("podpolicy-vet".into())
            .spawn(move || {
                let _count = count;
                let prepared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let compiler = compiler.as_deref().map(|p| (p, deadline));
                    prepare(&path, &name, cap, &cache, limits, &serving, compiler)
                }))
                .unwrap_or_else(|_| Prepared {
                    stamp: None,
                    digest: None,
                    version: String::new(),
                    result: Err(Refusal::Load(anyhow!(
                        "loading candidate {name}: the vetting thread panicked"
                    ))),
                });
                if tx.send(prepared).is_ok()
                    && let Some(wake) = waker
                {
                    wake();
                }
            });
        match spawned {
            Ok(_) => {
                self.job = Some(Job {
                    file,
                    stamp,
                    started: Instant::now(),
                    read_ns,
                    rx,
                    done: None,
                });
            }
            Err(e) => {
                // The closure (and its count) is dropped with the error.
                let detail = format!("policy candidate {file}: starting its vetting thread: {e}");
                let read = stamp.map(|s| (s, read_ns));
                self.record(&file, read, None, String::new(), false, &detail);
                self.reject(outcome, detail);
            }
        }
        true
    }

    /// Finish the candidate whose vetting thread is done, or give it up
    /// past the deadline.
    fn finish_job(
        &mut self,
        slot: &PolicySlot,
        vet: &dyn Fn(&PolicyRuntime, &PolicyRuntime) -> Result<ShadowReport>,
        outcome: &mut PollOutcome,
    ) -> bool {
        let Some(job) = self.job.as_mut() else {
            return false;
        };
        let prepared = match job.done.take() {
            Some(prepared) => prepared,
            None => match job.rx.try_recv() {
                Ok(prepared) => prepared,
                Err(mpsc::TryRecvError::Empty) if job.started.elapsed() < self.deadline => {
                    return false;
                }
                Err(mpsc::TryRecvError::Empty) => {
                    let job = self.job.take().expect("a job");
                    let detail = format!(
                        "policy candidate {}: not read, compiled and self-checked within {} s; given up (its thread is abandoned)",
                        job.file,
                        self.deadline.as_secs_f64()
                    );
                    let read = job.stamp.map(|s| (s, job.read_ns));
                    self.record(&job.file, read, None, String::new(), false, &detail);
                    self.reject(outcome, detail);
                    return true;
                }
                Err(mpsc::TryRecvError::Disconnected) => Prepared {
                    stamp: None,
                    digest: None,
                    version: String::new(),
                    result: Err(Refusal::Load(anyhow!(
                        "loading candidate {}: the vetting thread ended without an answer",
                        job.file
                    ))),
                },
            },
        };
        let job = self.job.take().expect("a job");
        let stamp = prepared.stamp.or(job.stamp);
        let (digest, version) = (prepared.digest, prepared.version);
        if self.rechecks.remove(&job.file)
            && let Some(before) = self.state.files.get(&job.file)
            && before.digest.is_some()
            && before.digest == digest
            && Some(before.stamp) == stamp
        {
            // A racy verdict read again: the same bytes, so the same
            // verdict, now settled.
            let settled = FileVerdict {
                read_ns: job.read_ns,
                ..before.clone()
            };
            self.state.files.insert(job.file.clone(), settled);
            return true;
        }
        let serving = slot.current();
        let result = match prepared.result {
            Err(Refusal::Load(e)) => Err(e),
            Err(Refusal::SelfCheck(e)) => Err(anyhow!(
                "policy {} ({version}) rejected, {} ({}) keeps serving: {e:#}",
                short(digest.as_deref().unwrap_or_default()),
                short(serving.digest()),
                serving.info().policy_version
            )),
            Ok(candidate) => {
                let mut detail = String::new();
                let mut changes = Vec::new();
                slot.activate(candidate, |c, serving| {
                    let report = vet(c, serving)?;
                    detail = format!(
                        "shadow evaluation: {} pods, {} with changed values",
                        report.pods,
                        report.changed.len()
                    );
                    changes = report.changes;
                    Ok(())
                })
                .map(|swap| (swap, detail, changes))
            }
        };
        match result {
            Ok((swap, detail, changes)) => {
                let read = stamp.map(|s| (s, job.read_ns));
                self.record(&job.file, read, digest.clone(), version, true, &detail);
                if let Some(verdict) = digest.and_then(|d| self.state.seen.get_mut(&d)) {
                    verdict.changes = changes;
                }
                self.state.last_error = None;
                outcome.swapped.push(swap);
            }
            Err(e) => {
                let detail = format!("{e:#}");
                let read = stamp.map(|s| (s, job.read_ns));
                self.record(&job.file, read, digest, version, false, &detail);
                self.reject(outcome, detail);
            }
        }
        true
    }

    /// Record a verdict on `file` (as it was at `read`: its stamp, and the
    /// wall-clock time before it was read; the bytes with `digest`).
    fn record(
        &mut self,
        file: &str,
        read: Option<(FileStamp, i64)>,
        digest: Option<String>,
        version: String,
        accepted: bool,
        detail: &str,
    ) {
        if let Some(digest) = &digest {
            self.state.seen.insert(
                digest.clone(),
                Verdict {
                    file: file.to_string(),
                    version,
                    accepted,
                    detail: detail.to_string(),
                    changes: Vec::new(),
                },
            );
        }
        if let Some((stamp, read_ns)) = read {
            self.state.files.insert(
                file.to_string(),
                FileVerdict {
                    stamp,
                    digest,
                    accepted,
                    detail: detail.to_string(),
                    read_ns,
                },
            );
        }
        if accepted {
            self.state.active_file = Some(file.to_string());
        }
    }

    fn reject(&mut self, outcome: &mut PollOutcome, detail: String) {
        self.state.last_error = Some(detail.clone());
        outcome.rejected.push(detail);
    }
}

/// Serve `slot` from a policy directory in a background thread, polling it
/// every `interval` (and as soon as a candidate's vetting thread is done):
/// for servers without a pod list of their own (the webhook), so a
/// candidate is vetted by the self-check alone. Each swap or rejection is
/// passed to `report`.
pub fn watch_in_background(
    mut server: PolicyDirServer,
    slot: std::sync::Arc<PolicySlot>,
    interval: std::time::Duration,
    report: impl Fn(&PollOutcome) + Send + 'static,
) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("podpolicy-policy-dir".into())
        .spawn(move || {
            // The vetting thread ran the self-check already; this one costs
            // milliseconds and covers a candidate it skipped (the version
            // that served when its thread started).
            let vet = |candidate: &PolicyRuntime, _: &PolicyRuntime| -> Result<ShadowReport> {
                self_check(candidate)?;
                Ok(ShadowReport::default())
            };
            loop {
                match server.poll(&slot, &vet) {
                    Ok(outcome) => report(&outcome),
                    Err(e) => tracing::error!(error = %format!("{e:#}"), "policy directory"),
                }
                if server.is_idle() {
                    std::thread::sleep(interval);
                } else {
                    server.wait_for_vetting(interval);
                }
            }
        })
        .context("starting the policy directory thread")
}
