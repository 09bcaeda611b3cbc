//! The host's state directory: what outlives a `ruststream run` process.
//!
//! ```text
//! STATE/
//!   admin-token                the admin API's bearer token, mode 0600 (see `admin::token`)
//!   lock                       locked by the running host: one host per directory
//!   versions/<sha256>.wasm     every kept component version, by content hash, once
//!   apps/<tenant>/<app>.json   per app: the live version, the file last seen, the kept ones
//!   redrives/<id>.json         per redrive the admin API started: its request, its report
//!                              once it ended (see `redrives`)
//! ```
//!
//! Where it is: `--state-dir`, else `[host] state_dir`, else [`default_dir`]. Every file is
//! written whole (`write_atomic`): a crash leaves the old file or the new one, never a part.

pub mod audit;
pub mod redrives;
pub mod versions;

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What the fleet keeps in the state directory: app versions and redrives.
pub(crate) struct Kept {
    /// The versions of each app, and which one is live.
    pub versions: versions::VersionStore,
    /// The redrives the admin API started.
    pub redrives: redrives::RedriveRecords,
}

impl Kept {
    /// What is kept in state directory `root`, `keep_versions` versions per app.
    pub(crate) fn new(root: &Path, keep_versions: usize) -> Self {
        Self {
            versions: versions::VersionStore::new(root, keep_versions),
            redrives: redrives::RedriveRecords::new(root),
        }
    }
}

/// The admin token's file name in the state directory.
pub const TOKEN_FILE: &str = "admin-token";

/// Why the state directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A file or directory of it cannot be created, read or written.
    #[error("state directory: cannot {action} {}", path.display())]
    Io {
        /// What was being done (`create`, `read`, `write`, `lock`).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Another process holds the directory's lock.
    #[error(
        "state directory {} is in use by another `ruststream run`: give each host its own \
         (--state-dir, or `[host] state_dir`)",
        path.display()
    )]
    InUse {
        /// The directory.
        path: PathBuf,
    },
    /// A file of it is not what the host wrote there.
    #[error("state directory: {} is not valid: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why, one line.
        reason: String,
    },
}

impl StateError {
    pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Self {
        let path = path.to_owned();
        move |source| Self::Io {
            action,
            path,
            source,
        }
    }
}

/// The default state directory: `$XDG_DATA_HOME/ruststream`, else
/// `~/.local/share/ruststream`; `None` when neither variable is set.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local").join("share"))
        })?;
    Some(base.join("ruststream"))
}

/// A state directory, created (mode 0700 for what this creates) and locked for this process
/// while the value lives.
#[derive(Debug)]
pub(crate) struct StateDir {
    root: PathBuf,
    /// Holds the advisory lock; released when dropped (or when the process ends, however).
    _lock: File,
}

impl StateDir {
    /// Creates `root` if missing and takes its lock.
    ///
    /// # Errors
    /// [`StateError::InUse`] when another host holds it; [`StateError::Io`] when it cannot be
    /// created or locked.
    pub(crate) fn open(root: &Path) -> Result<Self, StateError> {
        create_private_dir(root)?;
        let lock_path = root.join("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(StateError::io("create", &lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StateError::InUse {
                    path: root.to_owned(),
                });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(StateError::io("lock", &lock_path)(source));
            }
        }
        Ok(Self {
            root: root.to_owned(),
            _lock: lock,
        })
    }

    /// The directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Where the admin token is kept unless `--admin-token-file` says otherwise.
    pub(crate) fn token_path(&self) -> PathBuf {
        self.root.join(TOKEN_FILE)
    }
}

/// Creates `dir` and its missing parents, each readable by this user only.
///
/// # Errors
/// [`StateError::Io`] naming the directory.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), StateError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(StateError::io("create", dir))
}

/// Names temporary files apart within one process.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// A temporary file beside `path`, holding `bytes`, with `mode`, flushed to disk.
fn write_temp(path: &Path, bytes: &[u8], mode: u32) -> io::Result<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map_or_else(
        || "state".into(),
        |name| name.to_string_lossy().into_owned(),
    );
    let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    match written {
        Ok(()) => Ok(temp),
        Err(error) => {
            let _ = std::fs::remove_file(&temp);
            Err(error)
        }
    }
}

/// Flushes `path`'s directory, so that a rename into it survives a crash.
fn sync_parent(path: &Path) -> io::Result<()> {
    File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}

/// Replaces `path` with `bytes` (file mode `mode`) in one step: a temporary file beside it,
/// fsynced, renamed over it, and the directory fsynced.
///
/// # Errors
/// The I/O error; `path` is then unchanged.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let temp = write_temp(path, bytes, mode)?;
    if let Err(error) = std::fs::rename(&temp, path) {
        let _ = std::fs::remove_file(&temp);
        return Err(error);
    }
    sync_parent(path)
}

/// Creates `path` holding `bytes` (file mode `mode`) unless it exists, in one step (a
/// temporary file hard-linked to the name): two processes creating it at once end with one
/// file, whole. Returns whether this call created it.
///
/// # Errors
/// The I/O error.
pub(crate) fn create_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<bool> {
    let temp = write_temp(path, bytes, mode)?;
    let linked = std::fs::hard_link(&temp, path);
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => sync_parent(path).map(|()| true),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(error),
    }
}

/// The JSON file at `path`, if there is one.
///
/// # Errors
/// [`StateError::Io`] when it cannot be read, [`StateError::Invalid`] when it is not a `T`.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Option<T>, StateError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(StateError::io("read", path)(error)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|error| StateError::Invalid {
            path: path.to_owned(),
            reason: error.to_string(),
        })
}

/// `name` as one file name: every byte outside `[A-Za-z0-9_-]` percent-encoded, so that no
/// tenant or app name (`..`, `a/b`) leaves its directory, and no two names share a file.
pub(crate) fn file_name(name: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' {
            out.push(char::from(byte));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    pub(crate) fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ruststream-state-{name}-{}-{}",
            std::process::id(),
            TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn one_host_per_directory() {
        let root = scratch("lock");
        let first = StateDir::open(&root).expect("a fresh directory");
        let mode = std::fs::metadata(&root)
            .expect("created")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let second = StateDir::open(&root).expect_err("locked by the first");
        assert!(second.to_string().contains("in use by another"), "{second}");
        drop(first);
        StateDir::open(&root).expect("free again");
    }

    #[test]
    fn atomic_writes() {
        let root = scratch("atomic");
        create_private_dir(&root).expect("created");
        let path = root.join("file");
        assert!(create_atomic(&path, b"one", 0o600).expect("created"));
        assert!(!create_atomic(&path, b"two", 0o600).expect("exists"));
        assert_eq!(std::fs::read(&path).expect("read"), b"one");
        write_atomic(&path, b"three", 0o644).expect("replaced");
        assert_eq!(std::fs::read(&path).expect("read"), b"three");
        let mode = std::fs::metadata(&path)
            .expect("there")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        let left: Vec<_> = std::fs::read_dir(&root)
            .expect("listed")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, ["file"], "no temporary file left behind");
    }

    #[test]
    fn file_names_stay_in_their_directory() {
        assert_eq!(file_name("acme"), "acme");
        assert_eq!(file_name(".."), "%2E%2E");
        assert_eq!(file_name("a/b.c"), "a%2Fb%2Ec");
        assert_ne!(file_name("a.b"), file_name("a%2Eb"));
    }
}
