//! Writing cgroup v2 files: the only module that creates cgroups and writes
//! interface files (and `/proc/<pid>/oom_score_adj`).
//!
//! - Paths: [`CgroupPath`] is a relative path whose every component passed
//!   [`validate_name`]; [`kubepods`], [`qos_tier`], [`pod`] and [`container`]
//!   build the kubelet's layout for both cgroup drivers. Container cgroups
//!   are named after the container (real runtimes use container ids).
//! - Roots: [`CgroupRoot::open`] accepts a cgroup2 mount (files are never
//!   created there: a missing file means its controller is not enabled) or a
//!   plain directory that stands in for one in tests and dry runs (files are
//!   created). The kind is decided by the filesystem type (`statfs`): a
//!   cgroup v1, sysfs, procfs or devtmpfs root is refused, and so is a
//!   stand-in at `/` or in a system directory (`/etc`, `/usr`, ...), so a
//!   cgroup v1 or hybrid host is never written to by mistake.
//! - Never outside the root: the root is held open, and every read, write,
//!   `mkdir` and removal resolves its path beneath that directory with
//!   `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` (and `*at` calls on
//!   the directory it opened), at the moment of the operation. A symlink
//!   swapped in anywhere on the path after planning fails that one
//!   operation (`ELOOP`); nothing is created, written or removed through it.
//! - Plan, then apply: [`plan`] reads the current values and returns the
//!   [`Change`]s that make the tree match, in a safe order; [`apply`]
//!   performs them and stops at the first failure, saying how many were
//!   applied. Every write is one `write(2)` of the whole value
//!   ([`write_file`]), and every error names the absolute path.
//!
//! The values come from the policy component; nothing here decides one. The
//! only knowledge of the kernel is structural: which controller a file
//! belongs to, and which files are limits whose order matters.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io::{self, Read, Write as _};
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

use crate::bindings::{CgroupDriver, QosClass};

/// The longest name a path component may have (the kernel's `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

/// The most of one interface file that is read; cgroup files fit in a page.
const MAX_READ_BYTES: u64 = 64 << 10;

/// Values longer than this are shortened in error messages.
const MAX_SHOWN_CHARS: usize = 64;

/// cgroup v2 controllers in the kernel's order (`cgroup_subsys` ids), which
/// is also the order `cgroup.subtree_control` lists them in.
pub const CONTROLLERS: [&str; 8] = [
    "cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc",
];

/// The subtree control file, written by this module only.
const SUBTREE_CONTROL: &str = "cgroup.subtree_control";

/// Something that stops a plan or a write. Every variant names a field or an
/// absolute path.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// A name that would become a path component is unsafe.
    #[error("{field}: {reason}: `{value}`")]
    InvalidName {
        /// The input field the name came from, e.g. `spec.containers[1].name`.
        field: String,
        /// What is wrong with it.
        reason: &'static str,
        /// The name, escaped and shortened for display.
        value: String,
    },
    /// The root cannot be used.
    #[error("{}: {reason}", path.display())]
    Root {
        /// The root as given (made absolute).
        path: PathBuf,
        /// Why it is refused.
        reason: String,
    },
    /// Two different values were asked for one file.
    #[error("{}: asked to write both `{first}` and `{second}`", path.display())]
    Conflict {
        /// The file.
        path: PathBuf,
        /// The first value.
        first: String,
        /// The other value.
        second: String,
    },
    /// A symbolic link where a cgroup directory or file is expected.
    #[error("{}: is a symbolic link; refusing to follow it", path.display())]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A file or a symbolic link where a cgroup directory is expected.
    #[error("{}: is not a directory (a symbolic link or a file where a cgroup directory is expected); refusing to follow it", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A path that is not below the root.
    #[error("{}: not below the cgroup root {}", path.display(), root.display())]
    OutsideRoot {
        /// The path.
        path: PathBuf,
        /// The root.
        root: PathBuf,
    },
    /// Reading a directory failed.
    #[error("reading {}: {source}", path.display())]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A process whose `oom_score_adj` was to be written does not exist.
    #[error("no process {pid}: {} does not exist", path.display())]
    NoProcess {
        /// The PID.
        pid: u32,
        /// The file that was looked for.
        path: PathBuf,
    },
    /// Removing a cgroup (or a stand-in file in it) failed.
    #[error("removing {}: {source}", path.display())]
    Remove {
        /// The directory or file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Creating a cgroup directory failed.
    #[error("creating {}: {source}", path.display())]
    Mkdir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Writing a file failed.
    #[error("writing `{value}` to {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The value, shortened for display.
        value: String,
        /// The OS error.
        source: io::Error,
    },
}

/// Escape and shorten a value for an error message.
fn shown(value: &str) -> String {
    let escaped: String = value.escape_debug().collect();
    if escaped.chars().count() > MAX_SHOWN_CHARS {
        let head: String = escaped.chars().take(MAX_SHOWN_CHARS).collect();
        format!("{head}... ({} bytes)", value.len())
    } else {
        escaped
    }
}

/// Whether `name` is the controller of an interface file name
/// (`memory.max` belongs to `memory`).
fn controller_of(file: &str) -> Option<&'static str> {
    let prefix = file.split('.').next()?;
    CONTROLLERS.iter().copied().find(|c| *c == prefix)
}

/// Check a name that becomes one path component (a pod UID, a container
/// name, a file name). `field` names the input it came from and appears in
/// the error.
///
/// Refused: empty, `.`, `..`, `/`, NUL or any control character, more than
/// [`MAX_NAME_BYTES`] bytes, and names in the kernel's interface-file
/// namespace (`cgroup.*`, `memory.*`, ...), which a cgroup directory cannot
/// take.
pub fn validate_name(field: &str, name: &str) -> Result<(), CgroupError> {
    let reason = if name.is_empty() {
        Some("must not be empty")
    } else if name == "." || name == ".." {
        Some("must not be `.` or `..`")
    } else if name.contains('/') {
        Some("must not contain `/`")
    } else if name.contains('\0') {
        Some("must not contain NUL")
    } else if name.chars().any(char::is_control) {
        Some("must not contain control characters")
    } else if name.len() > MAX_NAME_BYTES {
        Some("must be at most 255 bytes")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(CgroupError::InvalidName {
            field: field.to_string(),
            reason,
            value: shown(name),
        }),
        None => Ok(()),
    }
}

/// Like [`validate_name`], and also refuses names that collide with
/// interface files, for names that become cgroup directories.
fn validate_cgroup_name(field: &str, name: &str) -> Result<(), CgroupError> {
    validate_name(field, name)?;
    let prefix = name.split('.').next().unwrap_or_default();
    if name.contains('.') && (prefix == "cgroup" || controller_of(name).is_some()) {
        return Err(CgroupError::InvalidName {
            field: field.to_string(),
            reason: "collides with cgroup interface file names",
            value: shown(name),
        });
    }
    Ok(())
}

/// A cgroup, as a path relative to the cgroup root; every component has
/// been validated. The empty path is the root itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CgroupPath {
    components: Vec<String>,
}

impl CgroupPath {
    /// The cgroup root.
    pub fn root() -> CgroupPath {
        CgroupPath::default()
    }

    /// A child cgroup; `field` names where `name` came from.
    pub fn child(&self, field: &str, name: &str) -> Result<CgroupPath, CgroupError> {
        validate_cgroup_name(field, name)?;
        let mut components = self.components.clone();
        components.push(name.to_string());
        Ok(CgroupPath { components })
    }

    /// Parse a cgroup path such as `/kube.slice` or `system.slice/x`
    /// (relative to the root either way); each component is validated.
    pub fn parse(field: &str, text: &str) -> Result<CgroupPath, CgroupError> {
        let trimmed = text.trim_start_matches('/');
        if trimmed.is_empty() {
            return Err(CgroupError::InvalidName {
                field: field.to_string(),
                reason: "must name a cgroup below the root",
                value: shown(text),
            });
        }
        let mut path = CgroupPath::root();
        for component in trimmed.split('/') {
            path = path.child(field, component)?;
        }
        Ok(path)
    }

    /// The components, outermost first.
    pub fn components(&self) -> &[String] {
        &self.components
    }

    /// How many components deep the cgroup is (the root is 0).
    pub fn depth(&self) -> usize {
        self.components.len()
    }

    /// The parent cgroup; `None` for the root.
    pub fn parent(&self) -> Option<CgroupPath> {
        let (_, rest) = self.components.split_last()?;
        Some(CgroupPath {
            components: rest.to_vec(),
        })
    }

    /// This cgroup and every ancestor up to the root, outermost first.
    pub fn lineage(&self) -> Vec<CgroupPath> {
        (0..=self.components.len())
            .map(|n| CgroupPath {
                components: self.components[..n].to_vec(),
            })
            .collect()
    }

    /// The directory of this cgroup below `root`.
    pub fn dir_in(&self, root: &Path) -> PathBuf {
        let mut dir = root.to_path_buf();
        dir.extend(&self.components);
        dir
    }
}

impl fmt::Display for CgroupPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/{}", self.components.join("/"))
    }
}

fn fixed(components: &[&str]) -> CgroupPath {
    CgroupPath {
        components: components.iter().map(|c| c.to_string()).collect(),
    }
}

/// The `kubepods` cgroup: `kubepods` (cgroupfs) or `kubepods.slice` (systemd).
pub fn kubepods(driver: CgroupDriver) -> CgroupPath {
    match driver {
        CgroupDriver::Cgroupfs => fixed(&["kubepods"]),
        CgroupDriver::Systemd => fixed(&["kubepods.slice"]),
    }
}

fn tier_name(qos: QosClass) -> Option<&'static str> {
    match qos {
        QosClass::Guaranteed => None,
        QosClass::Burstable => Some("burstable"),
        QosClass::BestEffort => Some("besteffort"),
    }
}

/// The QoS tier a pod of class `qos` lives in: `kubepods/burstable`,
/// `kubepods/besteffort`, or `kubepods` itself for Guaranteed pods
/// (systemd: `kubepods.slice/kubepods-burstable.slice`, ...).
pub fn qos_tier(driver: CgroupDriver, qos: QosClass) -> CgroupPath {
    match (driver, tier_name(qos)) {
        (_, None) => kubepods(driver),
        (CgroupDriver::Cgroupfs, Some(tier)) => fixed(&["kubepods", tier]),
        (CgroupDriver::Systemd, Some(tier)) => {
            fixed(&["kubepods.slice", &format!("kubepods-{tier}.slice")])
        }
    }
}

/// The pod cgroup: `kubepods/<tier>/pod<uid>` (cgroupfs) or
/// `kubepods.slice/kubepods-<tier>.slice/kubepods-<tier>-pod<uid_>.slice`
/// (systemd, `-` in the UID becomes `_` as systemd unit names need);
/// Guaranteed pods sit directly under `kubepods`. The UID is validated as
/// `metadata.uid`.
pub fn pod(driver: CgroupDriver, qos: QosClass, uid: &str) -> Result<CgroupPath, CgroupError> {
    const FIELD: &str = "metadata.uid";
    validate_name(FIELD, uid)?;
    let tier = qos_tier(driver, qos);
    let leaf = match (driver, tier_name(qos)) {
        (CgroupDriver::Cgroupfs, _) => format!("pod{uid}"),
        (CgroupDriver::Systemd, None) => format!("kubepods-pod{}.slice", uid.replace('-', "_")),
        (CgroupDriver::Systemd, Some(tier)) => {
            format!("kubepods-{tier}-pod{}.slice", uid.replace('-', "_"))
        }
    };
    tier.child(FIELD, &leaf)
}

/// A container cgroup: the container name below the pod cgroup. `field`
/// names the container's name field, e.g. `spec.containers[1].name`.
pub fn container(pod: &CgroupPath, field: &str, name: &str) -> Result<CgroupPath, CgroupError> {
    pod.child(field, name)
}

/// One interface file and the exact text to write to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileValue {
    /// File name inside the cgroup directory, e.g. `cpu.max`.
    pub file: String,
    /// The text, e.g. `50000 100000`.
    pub value: String,
}

/// The files one cgroup should have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupValues {
    /// The cgroup.
    pub path: CgroupPath,
    /// Its files.
    pub files: Vec<FileValue>,
}

/// What kind of tree a root is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootKind {
    /// A cgroup2 mount: the kernel owns the files; they are never created.
    Cgroup2,
    /// A plain directory standing in for one: files are created on write.
    Directory,
}

/// The directory cgroup paths are resolved against, held open: every
/// operation resolves its path beneath this descriptor.
#[derive(Clone, Debug)]
pub struct CgroupRoot {
    dir: PathBuf,
    kind: RootKind,
    fd: Arc<OwnedFd>,
}

/// Top-level directories a stand-in root may not be in (or be).
const SYSTEM_DIRS: [&str; 12] = [
    "etc", "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "boot", "dev", "proc", "sys",
];

impl CgroupRoot {
    /// Open `dir` as a cgroup root. It must be an existing directory; by its
    /// filesystem type, a cgroup2 mount, or a plain directory standing in
    /// for one (not `/`, not in a system directory such as `/etc`, and not
    /// a cgroup v1, sysfs, procfs or devtmpfs mount).
    pub fn open(dir: &Path) -> Result<CgroupRoot, CgroupError> {
        use nix::sys::statfs::{
            CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, DEVPTS_SUPER_MAGIC, PROC_SUPER_MAGIC,
            SYSFS_MAGIC,
        };
        let given = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let refuse = |reason: String| CgroupError::Root {
            path: given.clone(),
            reason,
        };
        let canonical =
            fs::canonicalize(&given).map_err(|e| refuse(format!("cannot open: {e}")))?;
        let fd = nix::fcntl::open(
            &canonical,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            if e == nix::errno::Errno::ENOTDIR {
                refuse("is not a directory".to_string())
            } else {
                refuse(format!("cannot open: {e}"))
            }
        })?;
        // The type of what was opened (not of a path that may change since).
        let stat =
            nix::sys::statfs::fstatfs(&fd).map_err(|e| refuse(format!("cannot statfs: {e}")))?;
        let fs_type = stat.filesystem_type();
        const DEVTMPFS_MAGIC: nix::sys::statfs::FsType = nix::sys::statfs::FsType(0x1373 as _);
        let kind = if fs_type == CGROUP2_SUPER_MAGIC {
            RootKind::Cgroup2
        } else if fs_type == CGROUP_SUPER_MAGIC {
            return Err(refuse(
                "is a cgroup v1 mount (a v1 or hybrid host?); podpolicy writes cgroup v2 only"
                    .to_string(),
            ));
        } else if [
            SYSFS_MAGIC,
            PROC_SUPER_MAGIC,
            DEVPTS_SUPER_MAGIC,
            DEVTMPFS_MAGIC,
        ]
        .contains(&fs_type)
        {
            return Err(refuse(
                "is not a cgroup v2 mount (a kernel filesystem: sysfs, procfs or devices); refusing to write there"
                    .to_string(),
            ));
        } else {
            let top = canonical
                .components()
                .nth(1)
                .map(|c| c.as_os_str().to_string_lossy().into_owned());
            match top {
                None => {
                    return Err(refuse(
                        "is the filesystem root and not a cgroup v2 mount; refusing to write there (a stand-in cgroup root must be a directory of its own)"
                            .to_string(),
                    ));
                }
                Some(top) if SYSTEM_DIRS.contains(&top.as_str()) => {
                    return Err(refuse(format!(
                        "is not a cgroup v2 mount and lies in the system directory /{top}; refusing to write there"
                    )));
                }
                Some(_) => RootKind::Directory,
            }
        };
        Ok(CgroupRoot {
            dir: canonical,
            kind,
            fd: Arc::new(fd),
        })
    }

    /// The absolute root directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether this is a real cgroup2 mount or a stand-in directory.
    pub fn kind(&self) -> RootKind {
        self.kind
    }

    /// `path` relative to the root (`.` for the root itself).
    fn relative<'a>(&self, path: &'a Path) -> Result<&'a Path, CgroupError> {
        match path.strip_prefix(&self.dir) {
            Ok(rel) if rel.as_os_str().is_empty() => Ok(Path::new(".")),
            Ok(rel) => Ok(rel),
            Err(_) => Err(CgroupError::OutsideRoot {
                path: path.to_path_buf(),
                root: self.dir.clone(),
            }),
        }
    }

    /// Open `path` (absolute, below the root) with `flags`, resolving every
    /// component beneath the root and refusing any symlink on the way.
    fn open_beneath(&self, path: &Path, flags: OFlag) -> Result<OwnedFd, OpenError> {
        let rel = self.relative(path).map_err(OpenError::Refused)?;
        // openat2 refuses a mode without O_CREAT.
        let mode = if flags.contains(OFlag::O_CREAT) {
            Mode::from_bits_truncate(0o644)
        } else {
            Mode::empty()
        };
        let how = OpenHow::new()
            .flags(flags | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
            .mode(mode)
            .resolve(
                ResolveFlag::RESOLVE_BENEATH
                    | ResolveFlag::RESOLVE_NO_SYMLINKS
                    | ResolveFlag::RESOLVE_NO_MAGICLINKS,
            );
        nix::fcntl::openat2(self.fd.as_fd(), rel, how).map_err(|errno| match errno {
            nix::errno::Errno::ELOOP => OpenError::Refused(CgroupError::Symlink {
                path: path.to_path_buf(),
            }),
            nix::errno::Errno::ENOTDIR if flags.contains(OFlag::O_DIRECTORY) => {
                OpenError::Refused(CgroupError::NotADirectory {
                    path: path.to_path_buf(),
                })
            }
            nix::errno::Errno::EXDEV => OpenError::Refused(CgroupError::OutsideRoot {
                path: path.to_path_buf(),
                root: self.dir.clone(),
            }),
            nix::errno::Errno::ENOSYS => OpenError::Io(io::Error::other(
                "this kernel has no openat2 (Linux 5.6 or later is needed to write cgroups safely)",
            )),
            other => OpenError::Io(io::Error::from(other)),
        })
    }
}

/// Why [`CgroupRoot::open_beneath`] failed.
enum OpenError {
    /// The path may not be opened at all (symlink, outside the root).
    Refused(CgroupError),
    /// The OS said no (not found, permission, ...).
    Io(io::Error),
}

/// What a file holds before a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Current {
    /// The file does not exist (yet).
    Absent,
    /// Its text, without the trailing newline.
    Value(String),
    /// It could not be read; the write will tell whether it can be written.
    Unreadable(String),
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Create a cgroup directory.
    Mkdir {
        /// Absolute path of the directory.
        dir: PathBuf,
    },
    /// Write one file.
    Write {
        /// Absolute path of the file.
        path: PathBuf,
        /// What it holds now.
        old: Current,
        /// What is written.
        new: String,
        /// Whether a missing file may be created (stand-in roots only).
        create: bool,
    },
}

/// Read a small file below `root`; `Absent` when it does not exist. A
/// symlink on the way makes it unreadable.
fn read_current(root: &CgroupRoot, path: &Path) -> Current {
    let fd = match root.open_beneath(path, OFlag::O_RDONLY | OFlag::O_NONBLOCK) {
        Ok(fd) => fd,
        Err(OpenError::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Current::Absent,
        Err(OpenError::Io(e)) => return Current::Unreadable(e.to_string()),
        Err(OpenError::Refused(e)) => return Current::Unreadable(e.to_string()),
    };
    read_fd(fs::File::from(fd))
}

fn read_fd(file: fs::File) -> Current {
    match file.metadata() {
        Ok(meta) if !meta.is_file() => return Current::Unreadable("not a regular file".into()),
        Err(e) => return Current::Unreadable(e.to_string()),
        Ok(_) => {}
    }
    let mut bytes = Vec::new();
    match file.take(MAX_READ_BYTES).read_to_end(&mut bytes) {
        Ok(_) => {
            let text = String::from_utf8_lossy(&bytes);
            Current::Value(text.strip_suffix('\n').unwrap_or(&text).to_string())
        }
        Err(e) => Current::Unreadable(e.to_string()),
    }
}

/// Read a small file outside any cgroup root (`/proc/<pid>/oom_score_adj`)
/// without following a final symlink.
fn read_current_path(path: &Path) -> Current {
    let opened = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path);
    match opened {
        Ok(file) => read_fd(file),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Current::Absent,
        Err(e) => Current::Unreadable(e.to_string()),
    }
}

/// The current text of `file` in the cgroup directory `dir` (absolute,
/// below `root`), resolved beneath the root; `None` when absent.
pub fn read_file(root: &CgroupRoot, dir: &Path, file: &str) -> Result<Option<String>, CgroupError> {
    validate_name("cgroup file name", file)?;
    let path = dir.join(file);
    match read_current(root, &path) {
        Current::Absent => Ok(None),
        Current::Value(text) => Ok(Some(text)),
        Current::Unreadable(reason) => Err(CgroupError::ReadDir {
            path,
            source: io::Error::other(reason),
        }),
    }
}

/// Whether `path` (below `root`) is an existing directory; a symlink on
/// the way is an error, since cgroup directories are never links.
fn existing_dir(root: &CgroupRoot, path: &Path) -> Result<bool, CgroupError> {
    match root.open_beneath(path, OFlag::O_PATH) {
        Ok(fd) => Ok(fs::File::from(fd).metadata().is_ok_and(|m| m.is_dir())),
        Err(OpenError::Refused(e)) => Err(e),
        Err(OpenError::Io(_)) => Ok(false),
    }
}

/// A limit's size, for ordering: `max` is unlimited; `cpu.max` compares as
/// quota / period. Amounts come from `u64`s, so the cross products fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    Unlimited,
    Amount(u128, u128),
}

impl Limit {
    fn below(self, other: Limit) -> bool {
        match (self, other) {
            (Limit::Unlimited, _) => false,
            (Limit::Amount(..), Limit::Unlimited) => true,
            (Limit::Amount(a, p), Limit::Amount(b, q)) => a * q < b * p,
        }
    }
}

/// Whether `file` is a limit or protection whose parent/child order
/// matters: memory.{min,low,high,max,swap.*,zswap.max}, hugetlb.*.max,
/// pids.max and cpu.max.
fn is_ordered_limit(file: &str) -> bool {
    matches!(
        file,
        "memory.min"
            | "memory.low"
            | "memory.high"
            | "memory.max"
            | "memory.swap.high"
            | "memory.swap.max"
            | "memory.zswap.max"
            | "pids.max"
            | "cpu.max"
    ) || (file.starts_with("hugetlb.") && file.ends_with(".max"))
}

fn parse_limit(file: &str, text: &str) -> Option<Limit> {
    let text = text.trim();
    if file == "cpu.max" {
        let mut parts = text.split_whitespace();
        let quota = parts.next()?;
        let period: u64 = match parts.next() {
            Some(p) => p.parse().ok().filter(|p| *p > 0)?,
            None => 100_000,
        };
        return if quota == "max" {
            Some(Limit::Unlimited)
        } else {
            let quota: u64 = quota.parse().ok()?;
            Some(Limit::Amount(quota.into(), period.into()))
        };
    }
    if text == "max" {
        Some(Limit::Unlimited)
    } else {
        text.parse::<u64>().ok().map(|v| Limit::Amount(v.into(), 1))
    }
}

/// Whether writing `new` over `old` tightens a limit (such writes go to
/// children before parents).
fn is_lowering(file: &str, old: &Current, new: &str) -> bool {
    if !is_ordered_limit(file) {
        return false;
    }
    match old {
        Current::Value(old) => match (parse_limit(file, new), parse_limit(file, old)) {
            (Some(new), Some(old)) => new.below(old),
            _ => false,
        },
        _ => false,
    }
}

/// The controllers a `cgroup.subtree_control` text enables (`+` optional,
/// so a stand-in file written by [`plan`] reads back the same).
fn enabled_controllers(current: &Current) -> BTreeSet<String> {
    match current {
        Current::Value(text) => text
            .split_whitespace()
            .map(|t| t.trim_start_matches('+').to_string())
            .collect(),
        _ => BTreeSet::new(),
    }
}

/// Plan the changes that make the tree below `root` hold `desired`.
///
/// Order: directories top-down, each followed by the controllers its
/// children's files need in its `cgroup.subtree_control` (the root
/// included); then the file writes whose value changes: writes that raise
/// a limit, and every other write, parents first; then writes that lower a
/// limit, children first. Files that already hold their value are left out.
/// Nothing is written.
pub fn plan(root: &CgroupRoot, desired: &[CgroupValues]) -> Result<Vec<Change>, CgroupError> {
    let create = root.kind == RootKind::Directory;
    // Merge the wanted values per cgroup, refusing conflicting duplicates.
    let mut wanted: BTreeMap<&CgroupPath, Vec<&FileValue>> = BTreeMap::new();
    for values in desired {
        let entry = wanted.entry(&values.path).or_default();
        for file in &values.files {
            validate_name("cgroup file name", &file.file)?;
            if file.file == SUBTREE_CONTROL {
                return Err(CgroupError::InvalidName {
                    field: "cgroup file name".to_string(),
                    reason: "is derived from the other files, not given",
                    value: SUBTREE_CONTROL.to_string(),
                });
            }
            match entry.iter().find(|f| f.file == file.file) {
                Some(existing) if existing.value != file.value => {
                    return Err(CgroupError::Conflict {
                        path: values.path.dir_in(&root.dir).join(&file.file),
                        first: existing.value.clone(),
                        second: file.value.clone(),
                    });
                }
                Some(_) => {}
                None => entry.push(file),
            }
        }
    }

    // Which controllers each cgroup must enable for its descendants.
    let mut needed: BTreeMap<CgroupPath, BTreeSet<&'static str>> = BTreeMap::new();
    let mut dirs: BTreeSet<(usize, CgroupPath)> = BTreeSet::new();
    for (path, files) in &wanted {
        for ancestor in path.lineage() {
            dirs.insert((ancestor.depth(), ancestor));
        }
        for controller in files.iter().filter_map(|f| controller_of(&f.file)) {
            let mut ancestor = path.parent();
            while let Some(dir) = ancestor {
                needed.entry(dir.clone()).or_default().insert(controller);
                ancestor = dir.parent();
            }
        }
    }

    let mut changes = Vec::new();
    for (_, path) in &dirs {
        let dir = path.dir_in(&root.dir);
        if path.depth() > 0 && !existing_dir(root, &dir)? {
            changes.push(Change::Mkdir { dir: dir.clone() });
        }
        let Some(controllers) = needed.get(path) else {
            continue;
        };
        let file = dir.join(SUBTREE_CONTROL);
        let old = read_current(root, &file);
        let enabled = enabled_controllers(&old);
        if controllers.iter().all(|c| enabled.contains(*c)) {
            continue;
        }
        let new = CONTROLLERS
            .iter()
            .filter(|c| controllers.contains(*c) || enabled.contains(**c))
            .map(|c| format!("+{c}"))
            .collect::<Vec<_>>()
            .join(" ");
        changes.push(Change::Write {
            path: file,
            old,
            new,
            create,
        });
    }

    let mut raising = Vec::new();
    let mut lowering = Vec::new();
    for (path, files) in &wanted {
        let dir = path.dir_in(&root.dir);
        for file in files {
            let target = dir.join(&file.file);
            let old = read_current(root, &target);
            if old == Current::Value(file.value.clone()) {
                continue;
            }
            let lowers = is_lowering(&file.file, &old, &file.value);
            let change = Change::Write {
                path: target,
                old,
                new: file.value.clone(),
                create,
            };
            if lowers {
                lowering.push((path.depth(), change));
            } else {
                raising.push((path.depth(), change));
            }
        }
    }
    // Stable sorts keep the input order within one depth.
    raising.sort_by_key(|(depth, _)| *depth);
    lowering.sort_by_key(|(depth, _)| std::cmp::Reverse(*depth));
    changes.extend(raising.into_iter().map(|(_, c)| c));
    changes.extend(lowering.into_iter().map(|(_, c)| c));
    Ok(changes)
}

/// Plan writing `value` to `<proc_root>/<pid>/oom_score_adj`; `None` when
/// it already holds that value. The file is never created.
pub fn plan_oom_score_adj(
    proc_root: &Path,
    pid: u32,
    value: i32,
) -> Result<Option<Change>, CgroupError> {
    let proc_root = std::path::absolute(proc_root).unwrap_or_else(|_| proc_root.to_path_buf());
    let path = proc_root.join(pid.to_string()).join("oom_score_adj");
    let old = read_current_path(&path);
    let new = value.to_string();
    match &old {
        Current::Absent => Err(CgroupError::NoProcess { pid, path }),
        Current::Value(v) if v.trim() == new => Ok(None),
        _ => Ok(Some(Change::Write {
            path,
            old,
            new,
            create: false,
        })),
    }
}

/// Write `value` to `path` (below `root`) in one `write(2)` call, so the
/// kernel sees the whole value or nothing. `create` allows a missing file
/// to be created (stand-in roots); the path is resolved beneath the root at
/// this moment, and no symlink on it is followed.
pub fn write_file(
    root: &CgroupRoot,
    path: &Path,
    value: &str,
    create: bool,
) -> Result<(), CgroupError> {
    let mut flags = OFlag::O_WRONLY | OFlag::O_TRUNC;
    if create {
        flags |= OFlag::O_CREAT;
    }
    let file = match root.open_beneath(path, flags) {
        Ok(fd) => fs::File::from(fd),
        Err(OpenError::Refused(e)) => return Err(e),
        Err(OpenError::Io(e)) => {
            return Err(write_error(path, value, missing_hint(e, create)));
        }
    };
    write_once(file, path, value)
}

fn missing_hint(e: io::Error, create: bool) -> io::Error {
    if e.kind() == io::ErrorKind::NotFound && !create {
        io::Error::new(
            e.kind(),
            "no such file (is its controller enabled in the parent's cgroup.subtree_control?)",
        )
    } else {
        e
    }
}

fn write_error(path: &Path, value: &str, source: io::Error) -> CgroupError {
    CgroupError::Write {
        path: path.to_path_buf(),
        value: shown(value),
        source,
    }
}

fn write_once(mut file: fs::File, path: &Path, value: &str) -> Result<(), CgroupError> {
    let written = file
        .write(value.as_bytes())
        .map_err(|e| write_error(path, value, e))?;
    if written != value.len() {
        return Err(write_error(
            path,
            value,
            io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {written} of {} bytes", value.len()),
            ),
        ));
    }
    Ok(())
}

/// Write a file outside any cgroup root (`/proc/<pid>/oom_score_adj`): an
/// existing file, never a final symlink, one `write(2)`.
fn write_proc_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    let file = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| write_error(path, value, e))?;
    write_once(file, path, value)
}

/// A plan that stopped: how many changes were applied before `error`.
#[derive(Debug, thiserror::Error)]
#[error("{error} (after {applied} applied change(s))")]
pub struct ApplyError {
    /// The number of leading changes that were applied.
    pub applied: usize,
    /// What failed.
    pub error: CgroupError,
}

/// Perform `changes` (planned for `root`) in order, stopping at the first
/// failure. Cgroup paths are resolved beneath `root` again for each change.
pub fn apply(root: &CgroupRoot, changes: &[Change]) -> Result<(), ApplyError> {
    for (applied, change) in changes.iter().enumerate() {
        let result = match change {
            Change::Mkdir { dir } => make_dir(root, dir),
            Change::Write {
                path, new, create, ..
            } => {
                if path.starts_with(root.dir()) {
                    write_file(root, path, new, *create)
                } else if path.file_name().is_some_and(|n| n == "oom_score_adj") && !*create {
                    write_proc_file(path, new)
                } else {
                    Err(CgroupError::OutsideRoot {
                        path: path.clone(),
                        root: root.dir().to_path_buf(),
                    })
                }
            }
        };
        if let Err(error) = result {
            return Err(ApplyError { applied, error });
        }
    }
    Ok(())
}

/// The directory holding `path` (below `root`), opened beneath the root,
/// and `path`'s last component.
fn parent_beneath<'a>(
    root: &CgroupRoot,
    path: &'a Path,
) -> Result<(OwnedFd, &'a std::ffi::OsStr), CgroupError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(CgroupError::OutsideRoot {
            path: path.to_path_buf(),
            root: root.dir().to_path_buf(),
        });
    };
    match root.open_beneath(parent, OFlag::O_PATH | OFlag::O_DIRECTORY) {
        Ok(fd) => Ok((fd, name)),
        Err(OpenError::Refused(e)) => Err(e),
        Err(OpenError::Io(source)) => Err(CgroupError::Mkdir {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn make_dir(root: &CgroupRoot, dir: &Path) -> Result<(), CgroupError> {
    let (parent, name) = parent_beneath(root, dir)?;
    match nix::sys::stat::mkdirat(&parent, name, Mode::from_bits_truncate(0o755)) {
        Ok(()) => Ok(()),
        // Someone else created it between plan and apply: fine if it is a directory.
        Err(nix::errno::Errno::EEXIST) if existing_dir(root, dir)? => Ok(()),
        Err(nix::errno::Errno::EEXIST) => Err(CgroupError::Mkdir {
            path: dir.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a directory",
            ),
        }),
        Err(errno) => Err(CgroupError::Mkdir {
            path: dir.to_path_buf(),
            source: io::Error::from(errno),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_name(name: &str, ok: bool) {
        assert_eq!(validate_cgroup_name("f", name).is_ok(), ok, "name {name:?}");
    }

    #[test]
    fn names() {
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\0b",
            "a\nb",
            "\u{7f}",
            "cgroup.procs",
            "memory.max",
            "cpu.x",
        ] {
            check_name(bad, false);
        }
        check_name(&"x".repeat(256), false);
        for good in [
            "ide",
            "x".repeat(255).as_str(),
            "a.b",
            "pod-1",
            "..a",
            "ünï",
        ] {
            check_name(good, true);
        }
        let err = validate_name("spec.containers[1].name", "a/b").unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.containers[1].name: must not contain `/`: `a/b`"
        );
    }

    #[test]
    fn driver_paths() {
        let uid = "8d3c6f0e-0b1d";
        let cases = [
            (
                CgroupDriver::Cgroupfs,
                QosClass::Burstable,
                "/kubepods/burstable/pod8d3c6f0e-0b1d",
            ),
            (
                CgroupDriver::Cgroupfs,
                QosClass::BestEffort,
                "/kubepods/besteffort/pod8d3c6f0e-0b1d",
            ),
            (
                CgroupDriver::Cgroupfs,
                QosClass::Guaranteed,
                "/kubepods/pod8d3c6f0e-0b1d",
            ),
            (
                CgroupDriver::Systemd,
                QosClass::Burstable,
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod8d3c6f0e_0b1d.slice",
            ),
            (
                CgroupDriver::Systemd,
                QosClass::Guaranteed,
                "/kubepods.slice/kubepods-pod8d3c6f0e_0b1d.slice",
            ),
        ];
        for (driver, qos, want) in cases {
            assert_eq!(pod(driver, qos, uid).unwrap().to_string(), want);
        }
        assert_eq!(
            CgroupPath::parse("f", "/kube.slice/x").unwrap().to_string(),
            "/kube.slice/x"
        );
        assert!(CgroupPath::parse("f", "/").is_err());
        assert!(CgroupPath::parse("f", "/a/../b").is_err());
    }

    #[test]
    fn limits_order() {
        let lower = |file, old: &str, new| is_lowering(file, &Current::Value(old.into()), new);
        assert!(lower("memory.max", "max", "100"));
        assert!(lower("memory.max", "200", "100"));
        assert!(!lower("memory.max", "100", "max"));
        assert!(!lower("memory.max", "100", "200"));
        assert!(lower("cpu.max", "max 100000", "50000 100000"));
        assert!(lower("cpu.max", "100000 100000", "40000 50000"));
        assert!(!lower("cpu.max", "40000 50000", "100000 100000"));
        assert!(!lower("cpu.weight", "100", "10"));
        assert!(lower("hugetlb.2MB.max", "4194304", "0"));
        assert!(!is_lowering("memory.max", &Current::Absent, "100"));
    }
}

/// What [`remove`] did with a cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The cgroup (and any child cgroups) is gone, or was never there.
    Removed,
    /// Processes still run in it (or in a child); nothing was removed there.
    Busy {
        /// The cgroup directory holding processes.
        dir: PathBuf,
    },
}

/// Whether the open cgroup directory `dir` has processes: a non-empty
/// `cgroup.procs`.
fn has_processes(dir: &OwnedFd) -> bool {
    let Ok(fd) = nix::fcntl::openat(
        dir,
        "cgroup.procs",
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    match read_fd(fs::File::from(fd)) {
        Current::Value(text) => !text.trim().is_empty(),
        _ => false,
    }
}

/// Remove the cgroup `path` below `root` and its child cgroups, children
/// first, once no process runs in them. On a cgroup2 mount a cgroup is one
/// `rmdir` (the kernel's interface files go with it); in a stand-in
/// directory the files written there are removed first. Every step works
/// on directories opened beneath the root without following a symlink; a
/// symlink inside is unlinked, never followed.
pub fn remove(root: &CgroupRoot, path: &CgroupPath) -> Result<Removal, CgroupError> {
    if path.depth() == 0 {
        return Err(CgroupError::Root {
            path: root.dir().to_path_buf(),
            reason: "the cgroup root itself is never removed".to_string(),
        });
    }
    let dir = path.dir_in(root.dir());
    let (parent, name) = match parent_beneath(root, &dir) {
        Ok(found) => found,
        // A parent that is gone holds nothing to remove.
        Err(CgroupError::Mkdir { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(Removal::Removed);
        }
        Err(e) => return Err(e),
    };
    remove_dir_tree(root.kind(), &parent, name, &dir)
}

fn remove_dir_tree(
    kind: RootKind,
    parent: &OwnedFd,
    name: &std::ffi::OsStr,
    shown: &Path,
) -> Result<Removal, CgroupError> {
    use nix::unistd::{UnlinkatFlags, unlinkat};
    let fail = |source: io::Error| CgroupError::Remove {
        path: shown.to_path_buf(),
        source,
    };
    let dir = match nix::fcntl::openat(
        parent,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) => return Ok(Removal::Removed),
        Err(nix::errno::Errno::ELOOP) => {
            return Err(CgroupError::Symlink {
                path: shown.to_path_buf(),
            });
        }
        Err(errno) => return Err(fail(io::Error::from(errno))),
    };
    if has_processes(&dir) {
        return Ok(Removal::Busy {
            dir: shown.to_path_buf(),
        });
    }
    let mut subdirs = Vec::new();
    let mut others = Vec::new();
    {
        let listing = dir.try_clone().map_err(fail)?;
        let mut listing = nix::dir::Dir::from_fd(listing).map_err(|e| fail(e.into()))?;
        for entry in listing.iter() {
            let entry = entry.map_err(|e| fail(e.into()))?;
            let entry_name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes()).to_owned();
            if entry_name == "." || entry_name == ".." {
                continue;
            }
            let stat = nix::sys::stat::fstatat(
                &dir,
                entry_name.as_os_str(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .map_err(|e| fail(e.into()))?;
            if stat.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR {
                subdirs.push(entry_name);
            } else {
                others.push(entry_name);
            }
        }
    }
    for sub in subdirs {
        let removal = remove_dir_tree(kind, &dir, &sub, &shown.join(&sub))?;
        if let Removal::Busy { .. } = removal {
            return Ok(removal);
        }
    }
    if kind == RootKind::Directory {
        for file in others {
            unlinkat(&dir, file.as_os_str(), UnlinkatFlags::NoRemoveDir).map_err(|e| {
                CgroupError::Remove {
                    path: shown.join(&file),
                    source: e.into(),
                }
            })?;
        }
    }
    match unlinkat(parent, name, UnlinkatFlags::RemoveDir) {
        Ok(()) | Err(nix::errno::Errno::ENOENT) => Ok(Removal::Removed),
        // The kernel refuses with EBUSY while a process is (still) inside.
        Err(nix::errno::Errno::EBUSY) => Ok(Removal::Busy {
            dir: shown.to_path_buf(),
        }),
        Err(errno) => Err(fail(errno.into())),
    }
}
