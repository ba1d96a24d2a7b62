//! Reading input files with a hard bound.
//!
//! Every file the host reads (pods, node files, KubeletConfigurations,
//! sysfs and `/proc` attributes, policy candidates, checkpoints) goes
//! through here, so that no input can hang the process or exhaust its
//! memory:
//!
//! - only regular files are read: a FIFO (which would block a plain
//!   `open`/`read` forever), a device such as `/dev/zero` (which never ends),
//!   a socket or a directory is refused with what it is, before it is
//!   opened; the file is opened with `O_NONBLOCK` and checked again with
//!   `fstat` on the opened descriptor, so swapping it in between does not
//!   get past the check. [`Links::Refuse`] also opens with `O_NOFOLLOW` and
//!   refuses a symbolic link instead of following it;
//! - at most `cap + 1` bytes are read, whatever the metadata says: a file
//!   that reports a small size and then grows (or a `/proc` file that reports
//!   none) cannot exceed the cap;
//! - stdin (`-`) is read only where a caller asks for it ([`read_input`]),
//!   bounded the same way.
//!
//! Errors name the file and what it was read as (`pod file`,
//! `policy candidate`, ...).

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Whether a symbolic link at the path is followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    /// Follow links to a regular file (input files given by a user: a
    /// kubelet manifest directory or a ConfigMap mount is full of links).
    Follow,
    /// Refuse a link (`O_NOFOLLOW`): files dropped into a directory the host
    /// serves from, such as policy candidates.
    Refuse,
}

/// Why a bounded read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened, inspected or read.
    #[error("{path}: {what}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What it was read as.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// Not a regular file (a FIFO, a device, a socket, a directory, or a
    /// symbolic link where links are refused).
    #[error("{path}: {what} is not a regular file ({kind}){hint}")]
    NotRegular {
        /// The file.
        path: String,
        /// What it was read as.
        what: String,
        /// `a FIFO`, `a character device`, `a symbolic link`, ...
        kind: &'static str,
        /// Extra words for links.
        hint: &'static str,
    },
    /// Larger than the cap (by its metadata, or by what could be read).
    #[error("{path}: {what} is larger than {cap} bytes{size}")]
    TooLarge {
        /// The file.
        path: String,
        /// What it was read as.
        what: String,
        /// The cap.
        cap: u64,
        /// ` (N bytes)` when the metadata told the size.
        size: String,
    },
    /// Not UTF-8 where text was expected.
    #[error("{path}: {what} is not UTF-8 text (byte {at})")]
    NotUtf8 {
        /// The file.
        path: String,
        /// What it was read as.
        what: String,
        /// The offset of the first invalid byte.
        at: usize,
    },
}

impl ReadError {
    /// Nothing is at the path (callers with optional files treat that as
    /// absent, not as an error).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// What a file of this type is, in words.
pub fn file_kind(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

fn io_error(path: &Path, what: &str, source: io::Error) -> ReadError {
    ReadError::Io {
        path: path.display().to_string(),
        what: what.to_string(),
        source,
    }
}

fn not_regular(path: &Path, what: &str, file_type: std::fs::FileType) -> ReadError {
    ReadError::NotRegular {
        path: path.display().to_string(),
        what: what.to_string(),
        kind: file_kind(file_type),
        hint: if file_type.is_symlink() {
            "; links are not followed here"
        } else {
            ""
        },
    }
}

/// Open `path` for reading if it is a regular file: checked before the open
/// (so a device is never opened: opening some has side effects) and again
/// on the opened descriptor. Returns the file and its `fstat` metadata.
pub fn open_regular(path: &Path, what: &str, links: Links) -> Result<(File, Metadata), ReadError> {
    let before = match links {
        Links::Follow => std::fs::metadata(path),
        Links::Refuse => std::fs::symlink_metadata(path),
    }
    .map_err(|e| io_error(path, what, e))?;
    if !before.file_type().is_file() {
        return Err(not_regular(path, what, before.file_type()));
    }
    let mut flags = nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY;
    if links == Links::Refuse {
        flags |= nix::libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            // O_NOFOLLOW on a link that replaced the file meanwhile.
            if links == Links::Refuse && e.raw_os_error() == Some(nix::libc::ELOOP) {
                match std::fs::symlink_metadata(path) {
                    Ok(m) if m.file_type().is_symlink() => {
                        return not_regular(path, what, m.file_type());
                    }
                    _ => {}
                }
            }
            io_error(path, what, e)
        })?;
    let metadata = file.metadata().map_err(|e| io_error(path, what, e))?;
    if !metadata.file_type().is_file() {
        return Err(not_regular(path, what, metadata.file_type()));
    }
    Ok((file, metadata))
}

/// Read at most `cap` bytes from `reader`: `cap + 1` are asked for, and
/// getting them is the error. `size` is what the metadata said, if anything
/// (refused at once when over the cap; a hint for the buffer otherwise).
pub fn read_capped(
    reader: impl Read,
    size: Option<u64>,
    cap: u64,
    path: &Path,
    what: &str,
) -> Result<Vec<u8>, ReadError> {
    let too_large = |size: Option<u64>| ReadError::TooLarge {
        path: path.display().to_string(),
        what: what.to_string(),
        cap,
        size: size.map_or(String::new(), |s| format!(" ({s} bytes)")),
    };
    if let Some(size) = size
        && size > cap
    {
        return Err(too_large(Some(size)));
    }
    let hint = size.unwrap_or(0).min(cap).min(1 << 20) as usize;
    let mut bytes = Vec::with_capacity(hint);
    reader
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, what, e))?;
    if bytes.len() as u64 > cap {
        return Err(too_large(None));
    }
    Ok(bytes)
}

/// The bytes of the regular file at `path` (links followed), at most `cap`.
pub fn read_regular_file(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>, ReadError> {
    let (file, metadata) = open_regular(path, what, Links::Follow)?;
    read_capped(file, Some(metadata.len()), cap, path, what)
}

/// [`read_regular_file`] as UTF-8 text.
pub fn read_regular_file_to_string(path: &Path, cap: u64, what: &str) -> Result<String, ReadError> {
    let bytes = read_regular_file(path, cap, what)?;
    into_text(path, what, bytes)
}

/// The bytes of the regular file at `path`, which must not be a symbolic
/// link, at most `cap`; with the `fstat` metadata of what was read.
pub fn read_regular_file_nofollow(
    path: &Path,
    cap: u64,
    what: &str,
) -> Result<(Vec<u8>, Metadata), ReadError> {
    let (file, metadata) = open_regular(path, what, Links::Refuse)?;
    let bytes = read_capped(file, Some(metadata.len()), cap, path, what)?;
    Ok((bytes, metadata))
}

/// `path` (`-` = stdin, bounded too) as bytes, with the name to show for it
/// (`<stdin>` or the path).
pub fn read_input(path: &Path, cap: u64, what: &str) -> Result<(String, Vec<u8>), ReadError> {
    if path == Path::new("-") {
        let stdin = std::io::stdin().lock();
        let bytes = read_capped(stdin, None, cap, Path::new("<stdin>"), what)?;
        return Ok(("<stdin>".to_string(), bytes));
    }
    let bytes = read_regular_file(path, cap, what)?;
    Ok((path.display().to_string(), bytes))
}

/// `bytes` as text, or the offset of the first byte that is not UTF-8.
pub fn into_text(path: &Path, what: &str, bytes: Vec<u8>) -> Result<String, ReadError> {
    String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8 {
        path: path.display().to_string(),
        what: what.to_string(),
        at: e.utf8_error().valid_up_to(),
    })
}

/// What identifies one version of a file without reading it: size,
/// modification and change times, inode. Any write, rename over it or
/// `touch` changes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileStamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub modified_ns: i64,
    /// Status change time, nanoseconds since the epoch (cannot be set by
    /// `touch -d` or `cp -p`, unlike the modification time).
    pub changed_ns: i64,
    /// Inode number.
    pub inode: u64,
}

impl FileStamp {
    /// The stamp of `metadata` (from `stat`, `lstat` or `fstat`).
    pub fn of(metadata: &Metadata) -> FileStamp {
        let ns = |secs: i64, nsec: i64| secs.saturating_mul(1_000_000_000).saturating_add(nsec);
        FileStamp {
            size: metadata.len(),
            modified_ns: ns(metadata.mtime(), metadata.mtime_nsec()),
            changed_ns: ns(metadata.ctime(), metadata.ctime_nsec()),
            inode: metadata.ino(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("podpolicy-bounded-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn dev_zero_is_refused_before_it_is_read() {
        let error = read_regular_file(Path::new("/dev/zero"), 1024, "pod file").unwrap_err();
        assert_eq!(
            error.to_string(),
            "/dev/zero: pod file is not a regular file (a character device)"
        );
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = temp("fifo");
        let fifo = dir.join("pod.yaml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let error = read_regular_file(&fifo, 1024, "pod file").unwrap_err();
        assert!(
            error
                .to_string()
                .ends_with("pod file is not a regular file (a FIFO)")
        );
        let error = read_regular_file_nofollow(&fifo, 1024, "policy candidate").unwrap_err();
        assert!(error.to_string().contains("not a regular file (a FIFO)"));
    }

    #[test]
    fn links_are_followed_or_refused() {
        let dir = temp("links");
        std::fs::write(dir.join("real"), b"abc").unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join("zero")).unwrap();
        assert_eq!(
            read_regular_file(&dir.join("link"), 10, "pod file").unwrap(),
            b"abc"
        );
        let error = read_regular_file_nofollow(&dir.join("link"), 10, "policy candidate")
            .unwrap_err()
            .to_string();
        assert!(
            error.ends_with(
                "policy candidate is not a regular file (a symbolic link); links are not followed here"
            ),
            "{error}"
        );
        let error = read_regular_file(&dir.join("zero"), 10, "pod file")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("not a regular file (a character device)"),
            "{error}"
        );
    }

    #[test]
    fn the_cap_holds_whatever_the_metadata_says() {
        let dir = temp("cap");
        let path = dir.join("big");
        std::fs::write(&path, vec![b'x'; 11]).unwrap();
        assert_eq!(read_regular_file(&path, 11, "f").unwrap().len(), 11);
        let error = read_regular_file(&path, 10, "f").unwrap_err().to_string();
        assert!(
            error.ends_with("f is larger than 10 bytes (11 bytes)"),
            "{error}"
        );
        // A reader that says nothing of its size (stdin, /dev/zero).
        let error = read_capped(io::repeat(0), None, 10, Path::new("-"), "stdin")
            .unwrap_err()
            .to_string();
        assert_eq!(error, "-: stdin is larger than 10 bytes");
        // Metadata that lies (a /proc file says 0).
        let error = read_capped(io::repeat(0), Some(0), 10, Path::new("p"), "f")
            .unwrap_err()
            .to_string();
        assert_eq!(error, "p: f is larger than 10 bytes");
    }

    #[test]
    fn proc_files_report_no_size_and_are_read() {
        let text =
            read_regular_file_to_string(Path::new("/proc/self/status"), 1 << 20, "f").unwrap();
        assert!(text.contains("Name:"));
    }

    #[test]
    fn missing_files_are_told_apart() {
        let error = read_regular_file(Path::new("/nonexistent/x"), 1, "f").unwrap_err();
        assert!(error.is_not_found());
        assert!(
            !read_regular_file(Path::new("/dev/zero"), 1, "f")
                .unwrap_err()
                .is_not_found()
        );
    }

    #[test]
    fn stamps_change_with_the_content() {
        let dir = temp("stamp");
        let path = dir.join("f");
        std::fs::write(&path, b"one").unwrap();
        let first = FileStamp::of(&std::fs::metadata(&path).unwrap());
        assert_eq!(first, FileStamp::of(&std::fs::metadata(&path).unwrap()));
        std::fs::write(&path, b"one more").unwrap();
        assert_ne!(first, FileStamp::of(&std::fs::metadata(&path).unwrap()));
    }
}
