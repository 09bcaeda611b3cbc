//! Folders of a test's own under the system's temp dir.
//!
//! A passing test leaves nothing behind: a test run makes hundreds of these (compile caches,
//! host logs, state directories, ~100 MB for one polyglot fixture), and runs on one machine
//! would otherwise fill its disk. A failing test keeps its folder, which holds its hosts' logs.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// An empty folder `$TMPDIR/ruststream-<name>-<pid>-<n>`, removed when dropped unless the
/// thread is panicking (a failed assertion keeps it for reading).
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// Makes the folder, emptied first if an earlier process of the same id left it.
    ///
    /// # Errors
    /// When it cannot be created.
    pub fn new(name: &str) -> std::io::Result<Self> {
        // Numbered: folders of one name in one test process are each their own.
        static MADE: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "ruststream-{name}-{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Deref for ScratchDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for ScratchDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} (the test failed)", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::PathBuf;

    use super::ScratchDir;

    #[test]
    fn a_folder_is_its_own_and_gone_once_dropped() -> io::Result<()> {
        let (a, b) = (ScratchDir::new("scratch")?, ScratchDir::new("scratch")?);
        assert_ne!(a.path(), b.path());
        std::fs::write(a.join("file"), "x")?;
        let path = a.path().to_owned();
        drop(a);
        assert!(!path.exists(), "{} is still there", path.display());
        assert!(b.is_dir());
        Ok(())
    }

    #[test]
    fn a_failed_test_keeps_its_folder() -> io::Result<()> {
        // The thread fails as a test would, holding its folder; the panic carries the path,
        // or the error that kept the folder from being made.
        let panicked = std::thread::spawn(|| {
            let held = ScratchDir::new("scratch-kept");
            let carried: Result<PathBuf, String> = match &held {
                Ok(dir) => Ok(dir.path().to_owned()),
                Err(error) => Err(error.to_string()),
            };
            std::panic::panic_any(carried);
        })
        .join()
        .expect_err("the thread panicked");
        let carried = panicked
            .downcast::<Result<PathBuf, String>>()
            .map_err(|_| io::Error::other("the panic carried no path"))?;
        let path = (*carried).map_err(io::Error::other)?;
        assert!(path.is_dir(), "{} was removed", path.display());
        std::fs::remove_dir_all(path)
    }
}
