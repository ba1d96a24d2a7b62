//! The state directory (`--state-dir`): one lock for the processes that
//! share it, and one atomic commit of all the files it holds.
//!
//! `admit`, `release`, `apply` with `--state` and the agent keep the
//! resource managers' checkpoints (`cpu_manager_state`,
//! `memory_manager_state`) and, for the agent, `agent_state.json` here.
//! Two rules make them trustworthy after a crash or next to another
//! process:
//!
//! - **One writer.** [`StateDir::lock`] takes an exclusive `flock` on
//!   `.lock` for as long as the [`StateDir`] lives (the agent: its whole
//!   life). A second caller waits up to its timeout, then fails naming the
//!   holder's PID; it never reads a state the holder is about to replace.
//! - **One commit.** [`StateDir::commit`] changes several files as one step:
//!   the whole new content goes first into an intent record (`.commit`,
//!   itself written atomically), then each file is replaced atomically,
//!   then the record is removed. A crash before the record exists leaves
//!   the old state; after it, the record is complete and the next
//!   [`StateDir::lock`] replays it (a commit of one file needs no record:
//!   its own atomic rename is the step). Readers that take no lock (`explain`)
//!   read through [`read_file`], which prefers a pending record, so they
//!   see the old or the new state, never a mix.
//!
//! Locking also clears what a killed writer leaves behind: temporary files
//! (`.<name>.tmp.<pid>`) of any process, since none can be writing now.
//!
//! A commit is durable once its intent record is. A writer that must
//! answer before the files are replaced (the NRI plugin, whose runtime
//! waits for the answer) uses [`StateDir::commit_recorded`]: it writes the
//! record and leaves the files to [`StateDir::finish_recorded`], which the
//! plugin calls once the answer is sent. Crash safety does not change: the
//! record is what the next lock replays. The files lag the record only
//! within the holder's own process. Another process reads through the
//! lock or through [`read_file`], and both see the record.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

/// The lock file (holds the holder's PID, for the error of a waiter).
pub const LOCK_FILE: &str = ".lock";
/// The intent record of a commit in progress.
pub const INTENT_FILE: &str = ".commit";
/// How long a command waits for the lock by default.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(30);
/// The most a state file (or the intent record) may hold.
pub const MAX_STATE_BYTES: u64 = 64 << 20;

/// The intent record: the complete new content of every file of a commit.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Intent {
    files: BTreeMap<String, String>,
}

/// A locked state directory.
#[derive(Debug)]
pub struct StateDir {
    dir: PathBuf,
    /// A commit whose intent record is durable and whose files are not
    /// replaced yet ([`StateDir::commit_recorded`]). Every other commit
    /// finishes it first.
    recorded: Mutex<Option<Intent>>,
    /// Holds the `flock` until dropped.
    _lock: File,
}

impl StateDir {
    /// Create `dir` if needed, take its lock (waiting up to `wait` for
    /// another holder), replay an interrupted commit and remove stray
    /// temporary files.
    pub fn lock(dir: &Path, wait: Duration) -> Result<StateDir> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(LOCK_FILE);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags_nofollow()
            .open(&path)
            .with_context(|| format!("opening the lock file {}", path.display()))?;
        let began = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if began.elapsed() < wait => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    let holder = holder.trim();
                    bail!(
                        "the state directory {} is locked by another podpolicy process{} (waited {} ms): an agent holds it while it runs; stop it, or use another state directory",
                        dir.display(),
                        if holder.is_empty() {
                            String::new()
                        } else {
                            format!(" (pid {holder})")
                        },
                        wait.as_millis()
                    );
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(anyhow!("locking {}: {e}", path.display()));
                }
            }
        }
        file.set_len(0)
            .and_then(|()| {
                use std::io::Seek as _;
                file.seek(std::io::SeekFrom::Start(0))?;
                write!(file, "{}", std::process::id())
            })
            .with_context(|| format!("writing {}", path.display()))?;
        let state = StateDir {
            dir: dir.to_path_buf(),
            recorded: Mutex::new(None),
            _lock: file,
        };
        state.recover()?;
        Ok(state)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Replay an interrupted commit and remove temporary files.
    fn recover(&self) -> Result<()> {
        let intent_path = self.dir.join(INTENT_FILE);
        if let Some(intent) = read_intent(&self.dir)? {
            tracing::warn!(
                files = intent.files.len(),
                "replaying a state commit a crash interrupted"
            );
            self.finish(&intent)?;
        }
        debug_assert!(!intent_path.exists());
        for entry in std::fs::read_dir(&self.dir)
            .with_context(|| format!("reading {}", self.dir.display()))?
        {
            let entry = entry.with_context(|| format!("reading {}", self.dir.display()))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') && name.contains(".tmp.") {
                let path = entry.path();
                std::fs::remove_file(&path)
                    .with_context(|| format!("removing the stray {}", path.display()))?;
            }
        }
        Ok(())
    }

    /// Replace `files` (name, content) as one step (see the module docs).
    pub fn commit(&self, files: &[(&str, Vec<u8>)]) -> Result<()> {
        let intent = intent_of(files)?;
        self.finish_recorded()?;
        // One file is replaced atomically by its own rename: no intent
        // record is needed (the NRI plugin without static managers commits
        // only its record, once per event: this halves its fsyncs).
        if let Some((name, text)) = single_file(&intent) {
            return self.replace_one(name, text);
        }
        self.record(&intent)?;
        self.finish(&intent)
    }

    /// As [`StateDir::commit`], but return once the commit is durable as
    /// its intent record: replacing the files is left to
    /// [`StateDir::finish_recorded`] (or to the next commit, or to the next
    /// lock's replay after a crash). The caller may answer as soon as this
    /// returns. A commit recorded before and not finished yet is merged
    /// into this one's record, so one record always holds all of it.
    pub fn commit_recorded(&self, files: &[(&str, Vec<u8>)]) -> Result<()> {
        let new = intent_of(files)?;
        let mut recorded = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        let intent = match recorded.take() {
            Some(mut pending) => {
                pending.files.extend(new.files);
                pending
            }
            None => new,
        };
        if let Some((name, text)) = single_file(&intent) {
            // Nothing pending and one file: its own rename is the step.
            return self.replace_one(name, text);
        }
        let written = self.record(&intent);
        // Kept even when the record failed: the record on disk is then the
        // pending one or this one, and this one holds both, so the next
        // finish or commit writes every file the caller's state now has
        // (the caller treats the failure as "commit everything again").
        *recorded = Some(intent);
        written
    }

    /// A commit of one file: its own atomic rename, no record.
    fn replace_one(&self, name: &str, text: &str) -> Result<()> {
        write_atomically(&self.dir.join(name), text.as_bytes())?;
        crash_point(&format!("commit: {name} replaced"));
        crash_point("commit: done");
        Ok(())
    }

    /// Replace the files of the commit [`StateDir::commit_recorded`] left
    /// (nothing when none is pending). On an error the commit stays
    /// pending: its record is on disk, and the next commit or lock tries
    /// again.
    pub fn finish_recorded(&self) -> Result<()> {
        let mut recorded = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(intent) = recorded.take()
            && let Err(e) = self.finish(&intent)
        {
            *recorded = Some(intent);
            return Err(e.context("replacing the files of a recorded commit"));
        }
        Ok(())
    }

    /// Write `intent` as the durable record of a commit.
    fn record(&self, intent: &Intent) -> Result<()> {
        let record = serde_json::to_vec(intent)?;
        write_atomically(&self.dir.join(INTENT_FILE), &record)?;
        crash_point("commit: intent recorded");
        Ok(())
    }

    fn finish(&self, intent: &Intent) -> Result<()> {
        // The record is durable, so the renames need not be one by one: a
        // crash before the directory's fsync below leaves the record, which
        // the next lock replays. One fsync of the directory for all of them
        // (each file's data is still synced before its rename: the record
        // goes once they are all durable). Two fsyncs fewer than one
        // durable replacement per file in the NRI plugin's three-file commit.
        for (name, text) in &intent.files {
            replace_file(&self.dir.join(name), text.as_bytes())?;
            crash_point(&format!("commit: {name} replaced"));
        }
        sync_dir(&self.dir)?;
        let record = self.dir.join(INTENT_FILE);
        std::fs::remove_file(&record).with_context(|| format!("removing {}", record.display()))?;
        sync_dir(&self.dir)?;
        crash_point("commit: done");
        Ok(())
    }
}

/// The intent record of `files`, their names checked.
fn intent_of(files: &[(&str, Vec<u8>)]) -> Result<Intent> {
    let mut intent = Intent {
        files: BTreeMap::new(),
    };
    for (name, bytes) in files {
        if name.contains('/') || name.starts_with('.') || name.is_empty() {
            bail!("internal: state file name `{name}`");
        }
        let text = String::from_utf8(bytes.clone())
            .map_err(|_| anyhow!("internal: state file {name} is not UTF-8"))?;
        intent.files.insert((*name).to_string(), text);
    }
    Ok(intent)
}

/// The one file of `intent` (name, content), when it has exactly one.
fn single_file(intent: &Intent) -> Option<(&str, &str)> {
    match intent.files.len() {
        1 => intent
            .files
            .iter()
            .next()
            .map(|(name, text)| (name.as_str(), text.as_str())),
        _ => None,
    }
}

/// `OpenOptions` that do not follow a final symlink.
trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt as _;
        self.custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
    }
}

fn read_intent(dir: &Path) -> Result<Option<Intent>> {
    let path = dir.join(INTENT_FILE);
    let Some(bytes) = read_bounded(&path)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes).map(Some).with_context(|| {
        format!(
            "{}: not a podpolicy commit record (it is written atomically, so this is not a torn write); move it away to continue",
            path.display()
        )
    })
}

/// Read a regular file of at most [`MAX_STATE_BYTES`], without following a
/// symlink and without blocking on a FIFO; `None` when it does not exist.
pub fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(anyhow!("reading {}: {e}", path.display())),
    };
    let meta = file
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!("{}: not a regular file", path.display());
    }
    let mut bytes = Vec::new();
    file.take(MAX_STATE_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > MAX_STATE_BYTES {
        bail!(
            "{}: larger than {MAX_STATE_BYTES} bytes; refusing it",
            path.display()
        );
    }
    Ok(Some(bytes))
}

/// The content of state file `name` in `dir` as the last commit left it:
/// from a pending intent record if there is one (a crash interrupted it; the
/// next lock holder replays it), else the file. `None` when absent.
pub fn read_file(dir: &Path, name: &str) -> Result<Option<Vec<u8>>> {
    if let Some(intent) = read_intent(dir)?
        && let Some(text) = intent.files.get(name)
    {
        return Ok(Some(text.clone().into_bytes()));
    }
    read_bounded(&dir.join(name))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing directory {}", dir.display()))
}

/// Write `bytes` to `path` atomically and durably: a temporary file in the
/// same directory, fsync, rename over `path`, fsync of the directory. A
/// crash leaves the old or the new content, and at worst a temporary file
/// that the next [`StateDir::lock`] removes.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    replace_file(path, bytes)?;
    sync_dir(parent_dir(path))
}

fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// [`write_atomically`] without the directory's fsync: the new content is
/// durable in its file, but the rename is durable only once the caller
/// syncs the directory.
fn replace_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .context("state path has no file name")?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags_nofollow()
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        file.write_all(bytes)
            .with_context(|| format!("writing {}", tmp.display()))?;
        file.sync_all()
            .with_context(|| format!("syncing {}", tmp.display()))?;
        crash_point(&format!("write: {name} synced, not renamed"));
        std::fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

// ----------------------------------------------------------------------
// Deterministic crash points, for the fault-injection tests: a thread that
// arms one "crashes" (panics, so nothing after the point runs) when it
// reaches it. Unarmed, a crash point only records its name when tracing.
// ----------------------------------------------------------------------

thread_local! {
    static CRASH: RefCell<CrashPoints> = const { RefCell::new(CrashPoints { armed: None, trace: None }) };
}

struct CrashPoints {
    /// The armed point and how many more passes reach it before it fires.
    armed: Option<(String, usize)>,
    trace: Option<Vec<String>>,
}

/// The panic payload of an armed crash point.
#[derive(Debug)]
pub struct Crashed(pub String);

/// A step boundary where a crash must leave a recoverable state.
pub fn crash_point(name: &str) {
    let hit = CRASH.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(trace) = c.trace.as_mut() {
            trace.push(name.to_string());
        }
        match c.armed.as_mut() {
            Some((armed, left)) if armed == name => {
                *left = left.saturating_sub(1);
                *left == 0
            }
            _ => false,
        }
    });
    if hit {
        CRASH.with(|c| c.borrow_mut().armed = None);
        std::panic::panic_any(Crashed(name.to_string()));
    }
}

/// Arm (or, with `None`, disarm) the crash point `name` on this thread.
#[doc(hidden)]
pub fn arm_crash_point(name: Option<&str>) {
    arm_crash_point_nth(name, 1);
}

/// Arm the crash point `name` on this thread to fire on its `nth` pass
/// (1 = the first).
#[doc(hidden)]
pub fn arm_crash_point_nth(name: Option<&str>, nth: usize) {
    CRASH.with(|c| c.borrow_mut().armed = name.map(|n| (n.to_string(), nth.max(1))));
}

/// Start recording the crash points this thread passes.
#[doc(hidden)]
pub fn trace_crash_points() {
    CRASH.with(|c| c.borrow_mut().trace = Some(Vec::new()));
}

/// The crash points passed since [`trace_crash_points`] (recording stops).
#[doc(hidden)]
pub fn traced_crash_points() -> Vec<String> {
    CRASH.with(|c| c.borrow_mut().trace.take().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("podpolicy-state-dir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_second_holder_waits_then_fails_naming_the_first() {
        let dir = temp("lock");
        let first = StateDir::lock(&dir, Duration::ZERO).unwrap();
        let err = StateDir::lock(&dir, Duration::from_millis(50)).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("is locked by another podpolicy process"),
            "{text}"
        );
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        drop(first);
        StateDir::lock(&dir, Duration::ZERO).expect("free again");
    }

    /// `a` and `b` as one commit holds them.
    fn two_files(a: &str, b: &str) -> Vec<(&'static str, Vec<u8>)> {
        vec![("a", a.as_bytes().to_vec()), ("b", b.as_bytes().to_vec())]
    }

    /// The step boundaries `commit` passes on a new directory.
    fn crash_points_of(name: &str, commit: impl FnOnce(&StateDir)) -> Vec<String> {
        let state = StateDir::lock(&temp(name), Duration::ZERO).unwrap();
        trace_crash_points();
        commit(&state);
        let points = traced_crash_points();
        assert!(points.len() >= 6, "{points:?}");
        points
    }

    /// A new directory whose `a` and `b` hold "old", and `commit` run on it
    /// until it crashes at `point`; the holder is gone (as after a crash),
    /// nobody has locked the directory since.
    fn crashed_at(
        name: &str,
        point: &str,
        commit: impl FnOnce(&StateDir, &Path) -> Result<()>,
    ) -> PathBuf {
        let dir = temp(name);
        let state = StateDir::lock(&dir, Duration::ZERO).unwrap();
        state.commit(&two_files("old", "old")).unwrap();
        arm_crash_point(Some(point));
        let crashed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commit(&state, &dir)));
        arm_crash_point(None);
        assert!(crashed.is_err(), "{point}: did not crash");
        dir
    }

    #[test]
    fn a_commit_interrupted_at_any_point_is_all_or_nothing() {
        let points = crash_points_of("points", |state| {
            state.commit(&two_files("1", "1")).unwrap();
        });
        for point in points {
            let dir = crashed_at("crash", &point, |state, _| {
                state.commit(&two_files("new", "new"))
            });
            // A reader before recovery sees one whole state.
            let read = |name| String::from_utf8(read_file(&dir, name).unwrap().unwrap()).unwrap();
            let (a, b) = (read("a"), read("b"));
            assert_eq!(a, b, "{point}: a reader saw a mix");
            // The next holder finishes or leaves the old state, and cleans up.
            let _state = StateDir::lock(&dir, Duration::ZERO).unwrap();
            let on_disk = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
            assert_eq!(on_disk("a"), on_disk("b"), "{point}");
            assert_eq!(
                on_disk("a"),
                a,
                "{point}: recovery disagrees with the reader"
            );
            let leftovers: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n != LOCK_FILE && n != "a" && n != "b")
                .collect();
            assert!(leftovers.is_empty(), "{point}: {leftovers:?}");
        }
    }

    #[test]
    fn a_recorded_commit_is_durable_before_its_files_are_replaced() {
        let files = |a: &str, b: &str, c: Option<&str>| {
            let mut f = vec![("a", a.as_bytes().to_vec()), ("b", b.as_bytes().to_vec())];
            if let Some(c) = c {
                f.push(("c", c.as_bytes().to_vec()));
            }
            f
        };
        let on_disk = |dir: &Path, name: &str| std::fs::read_to_string(dir.join(name)).ok();
        let read = |dir: &Path, name| {
            read_file(dir, name)
                .unwrap()
                .map(|b| String::from_utf8(b).unwrap())
        };

        // Recorded: the files are the old ones, the record holds the new
        // ones, a reader sees the new state; finishing replaces the files.
        let dir = temp("recorded");
        let state = StateDir::lock(&dir, Duration::ZERO).unwrap();
        state.commit(&files("1", "1", None)).unwrap();
        state.commit_recorded(&files("2", "2", None)).unwrap();
        assert_eq!(on_disk(&dir, "a").as_deref(), Some("1"));
        assert!(dir.join(INTENT_FILE).exists(), "the record is the commit");
        assert_eq!(read(&dir, "a").as_deref(), Some("2"));
        state.finish_recorded().unwrap();
        assert_eq!(on_disk(&dir, "a").as_deref(), Some("2"));
        assert_eq!(on_disk(&dir, "b").as_deref(), Some("2"));
        assert!(!dir.join(INTENT_FILE).exists());
        state
            .finish_recorded()
            .expect("nothing pending: nothing to do");

        // Two recorded commits in a row: the second record holds both, and
        // a holder that stops before finishing leaves it to the next lock.
        state.commit_recorded(&files("3", "3", Some("3"))).unwrap();
        state.commit_recorded(&[("a", b"4".to_vec())]).unwrap();
        drop(state);
        assert_eq!(on_disk(&dir, "c"), None, "not replaced yet");
        let state = StateDir::lock(&dir, Duration::ZERO).unwrap();
        let now: Vec<_> = ["a", "b", "c"].map(|n| on_disk(&dir, n)).into();
        assert_eq!(
            now,
            [Some("4"), Some("3"), Some("3")].map(|v| v.map(String::from))
        );
        assert!(!dir.join(INTENT_FILE).exists());

        // A plain commit finishes a recorded one first; so does a one-file
        // commit, which alone needs no record.
        state.commit_recorded(&files("5", "5", None)).unwrap();
        state.commit(&[("c", b"5".to_vec())]).unwrap();
        let now: Vec<_> = ["a", "b", "c"].map(|n| on_disk(&dir, n)).into();
        assert_eq!(
            now,
            [Some("5"), Some("5"), Some("5")].map(|v| v.map(String::from))
        );
        assert!(!dir.join(INTENT_FILE).exists());

        // One file and nothing pending: the file is replaced at once.
        state.commit_recorded(&[("b", b"6".to_vec())]).unwrap();
        assert_eq!(on_disk(&dir, "b").as_deref(), Some("6"));
        assert!(!dir.join(INTENT_FILE).exists());
    }

    #[test]
    fn a_recorded_commit_interrupted_at_any_point_is_all_or_nothing() {
        let points = crash_points_of("recorded-points", |state| {
            state.commit_recorded(&two_files("1", "1")).unwrap();
            state.finish_recorded().unwrap();
        });
        for point in points {
            let dir = crashed_at("recorded-crash", &point, |state, dir| {
                state.commit_recorded(&two_files("new", "new"))?;
                // Recorded: the commit stands from here on, whatever
                // happens to the finish.
                std::fs::write(dir.join("answered"), "")?;
                state.finish_recorded()
            });
            let answered = dir.join("answered").exists();
            let _state = StateDir::lock(&dir, Duration::ZERO).unwrap();
            let on_disk = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
            assert_eq!(on_disk("a"), on_disk("b"), "{point}");
            if answered {
                assert_eq!(on_disk("a"), "new", "{point}: an answered commit was lost");
            }
            assert!(!dir.join(INTENT_FILE).exists(), "{point}");
        }
    }
}
