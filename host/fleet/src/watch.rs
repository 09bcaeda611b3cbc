//! A debounced file watcher: which of some files and directories changed, one set per burst of
//! changes, awaited from tokio. `ruststream dev --watch` watches a tenant crate's sources (or a
//! component file) with it; `ruststream run` can watch its component files and tenants file.
//!
//! The contract of [`FileWatch`]:
//!
//! - A watched **file** is seen however it is replaced: written in place, or written to a
//!   temporary file renamed over it (editors, `cp`, cargo). Its directory is what is watched,
//!   so the file may be missing when the watch starts (a component not built yet) and may be
//!   deleted and created again. A symbolic link is watched as the link, not what it points to.
//! - A watched **directory** is watched with everything below it, subdirectories created later
//!   included; it must exist when the watch starts.
//! - Only changes to watched paths count: a sibling of a watched file (a build's output, an
//!   editor's swap file) is never reported, and neither is a file only opened or read (a
//!   build reading the sources).
//! - [`FileWatch::changed`] waits for a change, then for [`DEBOUNCE`] (or the quiet time set
//!   with [`FileWatch::quiet_for`]) without another, and
//!   returns every path changed meanwhile, once each, spelled as the caller spelled the path it
//!   falls under: a watched file as given, a file below a watched directory as that directory
//!   as given joined with the rest of its path.
//! - When changes may have been missed (the kernel's or this watcher's queue overflowed, or
//!   the backend reported an error), every watched path is reported as changed: a change is
//!   never lost, at the cost of a spurious rebuild or reload.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How long a burst of changes must have been quiet before [`FileWatch::changed`] returns it:
/// long enough to cover an editor's write-then-rename or a `cp` of a few hundred KB, short
/// enough to feel immediate.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

/// Events queued between notify's thread and the task awaiting them; past it they are
/// dropped and [`FileWatch::changed`] reports every watched path instead.
const QUEUE: usize = 4096;

/// Why a watch cannot start: the path it failed on, and the cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// The platform's watcher cannot start.
    #[error("cannot start the file watcher")]
    Start(#[source] notify::Error),
    /// A path has no file name (`..`, `/`), so no file in its directory can be told apart.
    #[error("cannot watch {}: not a file name", path.display())]
    NotAFile {
        /// The path as given.
        path: PathBuf,
    },
    /// A directory to watch cannot be resolved.
    #[error("cannot watch {}", path.display())]
    Directory {
        /// The directory as given.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A watched file's directory is missing.
    #[error("cannot watch {}: its directory is missing", path.display())]
    NoDirectory {
        /// The file as given.
        path: PathBuf,
        /// Why its directory cannot be resolved.
        #[source]
        source: std::io::Error,
    },
    /// The backend refused to watch a directory.
    #[error("cannot watch {}", path.display())]
    Watch {
        /// The directory, resolved.
        path: PathBuf,
        /// Why.
        #[source]
        source: notify::Error,
    },
}

/// Watches files and directories; see the module documentation for the contract.
pub struct FileWatch {
    targets: Vec<Target>,
    events: mpsc::Receiver<notify::Result<Event>>,
    overflowed: Arc<AtomicBool>,
    /// Changes seen and not yet returned: kept here so that a cancelled `changed` loses none.
    pending: BTreeSet<PathBuf>,
    /// How long a burst of changes must have been quiet.
    quiet: Duration,
    /// When the pending changes will have been quiet for `quiet`.
    quiet_at: Instant,
    /// Watching stops when this is dropped.
    _watcher: RecommendedWatcher,
}

/// One watched path: where it is, resolved, and how the caller spelled it.
struct Target {
    resolved: PathBuf,
    given: PathBuf,
    directory: bool,
}

impl FileWatch {
    /// Starts watching `paths`: each a directory (watched with everything below it) or a file
    /// (which need not exist yet, but whose directory must).
    ///
    /// # Errors
    /// When a directory to watch does not exist or cannot be watched (the error names it), or
    /// the platform's watcher cannot start.
    pub fn new(paths: &[PathBuf]) -> Result<Self, WatchError> {
        let targets = paths
            .iter()
            .map(|path| Target::resolve(path))
            .collect::<Result<Vec<_>, _>>()?;
        let (sender, events) = mpsc::channel(QUEUE);
        let overflowed = Arc::new(AtomicBool::new(false));
        let full = overflowed.clone();
        let mut watcher = notify::recommended_watcher(move |event| {
            if let Err(mpsc::error::TrySendError::Full(_)) = sender.try_send(event) {
                full.store(true, Ordering::Relaxed);
            }
        })
        .map_err(WatchError::Start)?;
        for (dir, mode) in watched_dirs(&targets) {
            watcher
                .watch(&dir, mode)
                .map_err(|source| WatchError::Watch { path: dir, source })?;
        }
        Ok(Self {
            targets,
            events,
            overflowed,
            pending: BTreeSet::new(),
            quiet: DEBOUNCE,
            quiet_at: Instant::now(),
            _watcher: watcher,
        })
    }

    /// Returns changes once they have been quiet for `quiet` instead of [`DEBOUNCE`]: shorter
    /// where files are replaced whole (a rename over them) and a change is one event.
    pub fn quiet_for(mut self, quiet: Duration) -> Self {
        self.quiet = quiet;
        self
    }

    /// Waits for a change to a watched path, then until the quiet time passes without another,
    /// and returns every changed path (sorted, each once). Cancel-safe: what a cancelled call
    /// had collected is returned by the next one, so it can race other work in
    /// `tokio::select!`.
    pub async fn changed(&mut self) -> Vec<PathBuf> {
        while self.pending.is_empty() {
            let event = self.next_event().await;
            self.note(event);
        }
        while let Ok(event) = tokio::time::timeout_at(self.quiet_at, self.next_event()).await {
            self.note(event);
        }
        std::mem::take(&mut self.pending).into_iter().collect()
    }

    async fn next_event(&mut self) -> notify::Result<Event> {
        match self.events.recv().await {
            Some(event) => event,
            // The watcher, which holds the sender, lives as long as `self`: never reached.
            None => std::future::pending().await,
        }
    }

    /// Adds the watched paths `event` changed to the pending set, and restarts the quiet
    /// period when there were any.
    fn note(&mut self, event: notify::Result<Event>) {
        let missed = self.overflowed.swap(false, Ordering::Relaxed)
            || event.as_ref().map_or(true, Event::need_rescan);
        let before = self.pending.len();
        if missed {
            self.pending
                .extend(self.targets.iter().map(|t| t.given.clone()));
        } else if let Ok(event) = &event
            && writes(&event.kind)
        {
            let changed: Vec<_> = event.paths.iter().filter_map(|p| self.spelled(p)).collect();
            self.pending.extend(changed);
        }
        if self.pending.len() > before || missed {
            self.quiet_at = Instant::now() + self.quiet;
        }
    }

    /// `path` (as the backend reports it) spelled as the caller spelled its target, when it is
    /// a watched file or lies below a watched directory.
    fn spelled(&self, path: &Path) -> Option<PathBuf> {
        self.targets.iter().find_map(|target| {
            if target.directory {
                let rest = path.strip_prefix(&target.resolved).ok()?;
                // Joining "" would add a trailing separator to the directory's own name.
                Some(if rest.as_os_str().is_empty() {
                    target.given.clone()
                } else {
                    target.given.join(rest)
                })
            } else {
                (path == target.resolved).then(|| target.given.clone())
            }
        })
    }
}

impl Target {
    /// Resolves `path` to what the backend will report: an absolute path through the real
    /// directories, the file's own name kept (it may not exist yet, or be a link).
    fn resolve(path: &Path) -> Result<Self, WatchError> {
        let directory = path.is_dir();
        let resolved = if directory {
            path.canonicalize()
                .map_err(|source| WatchError::Directory {
                    path: path.to_owned(),
                    source,
                })?
        } else {
            let name = path.file_name().ok_or_else(|| WatchError::NotAFile {
                path: path.to_owned(),
            })?;
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            let parent = parent
                .canonicalize()
                .map_err(|source| WatchError::NoDirectory {
                    path: path.to_owned(),
                    source,
                })?;
            parent.join(name)
        };
        Ok(Self {
            resolved,
            given: path.to_owned(),
            directory,
        })
    }
}

/// The directories to hand the backend: each watched directory with everything below it, and
/// the directory of each watched file on its own (a rename over a file is an event of its
/// directory), unless a recursive watch covers it already. Each once.
fn watched_dirs(targets: &[Target]) -> Vec<(PathBuf, RecursiveMode)> {
    let recursive: BTreeSet<&Path> = (targets.iter().filter(|t| t.directory))
        .map(|t| t.resolved.as_path())
        .collect();
    let covered = |dir: &Path| recursive.iter().any(|root| dir.starts_with(root));
    let single: BTreeSet<&Path> = (targets.iter().filter(|t| !t.directory))
        .filter_map(|t| t.resolved.parent())
        .filter(|dir| !covered(dir))
        .collect();
    let nested = |dir: &&Path| recursive.iter().any(|r| r != dir && dir.starts_with(r));
    (recursive.iter().filter(|dir| !nested(dir)))
        .map(|dir| (dir.to_path_buf(), RecursiveMode::Recursive))
        .chain(
            single
                .into_iter()
                .map(|dir| (dir.to_path_buf(), RecursiveMode::NonRecursive)),
        )
        .collect()
}

/// Whether an event of this kind can change a file's contents or which file a path names.
/// Opening and reading (a build reading the sources) cannot; closing a file written can.
fn writes(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use anyhow::Context as _;

    use super::*;

    /// Long enough for a loaded machine; only a failing test waits this long.
    const PATIENCE: Duration = Duration::from_secs(20);

    fn scratch(name: &str) -> anyhow::Result<PathBuf> {
        let dir =
            std::env::temp_dir().join(format!("ruststream-watch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    async fn next_change(watch: &mut FileWatch) -> anyhow::Result<Vec<PathBuf>> {
        tokio::time::timeout(PATIENCE, watch.changed())
            .await
            .context("no change reported")
    }

    #[tokio::test]
    async fn a_file_written_in_place_is_reported_as_given() -> anyhow::Result<()> {
        let dir = scratch("in-place")?;
        let file = dir.join("app.wasm");
        std::fs::write(&file, "v1")?;
        let mut watch = FileWatch::new(std::slice::from_ref(&file))?;
        std::fs::write(dir.join("unrelated.txt"), "x")?;
        std::fs::write(&file, "v2")?;
        assert_eq!(next_change(&mut watch).await?, [file]);
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    #[tokio::test]
    async fn a_file_renamed_over_is_reported_and_its_temporary_is_not() -> anyhow::Result<()> {
        let dir = scratch("rename")?;
        let file = dir.join("tenants.toml");
        let mut watch = FileWatch::new(std::slice::from_ref(&file))?;
        let temporary = dir.join(".tenants.toml.tmp");
        std::fs::write(&temporary, "new")?;
        std::fs::rename(&temporary, &file)?;
        assert_eq!(next_change(&mut watch).await?, std::slice::from_ref(&file));
        assert_eq!(std::fs::read_to_string(&file)?, "new");
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    #[tokio::test]
    async fn a_file_below_a_watched_directory_is_reported_under_it() -> anyhow::Result<()> {
        let dir = scratch("tree")?;
        let src = dir.join("src");
        std::fs::create_dir_all(src.join("nested"))?;
        let manifest = dir.join("Cargo.toml");
        let mut watch = FileWatch::new(&[src.clone(), manifest])?;
        std::fs::write(dir.join("Cargo.lock"), "not watched")?;
        std::fs::write(src.join("nested/lib.rs"), "fn main() {}")?;
        let changed = next_change(&mut watch).await?;
        assert!(changed.contains(&src.join("nested/lib.rs")), "{changed:?}");
        assert!(changed.iter().all(|p| p.starts_with(&src)), "{changed:?}");
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    #[test]
    fn a_missing_directory_is_named() -> anyhow::Result<()> {
        let dir = scratch("missing")?;
        let missing = dir.join("gone/app.wasm");
        let error = FileWatch::new(&[missing])
            .err()
            .context("watching a missing dir")?;
        assert!(format!("{error:#}").contains("gone/app.wasm"), "{error:#}");
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    #[test]
    fn a_recursive_watch_covers_the_directories_of_files_below_it() -> anyhow::Result<()> {
        let dir = scratch("covered")?;
        std::fs::create_dir_all(dir.join("src"))?;
        let targets = [
            dir.join("src"),
            dir.join("src/lib.rs"),
            dir.join("Cargo.toml"),
        ]
        .iter()
        .map(|p| Target::resolve(p))
        .collect::<Result<Vec<_>, _>>()?;
        let root = dir.canonicalize()?;
        assert_eq!(
            watched_dirs(&targets),
            [
                (root.join("src"), RecursiveMode::Recursive),
                (root, RecursiveMode::NonRecursive)
            ]
        );
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
