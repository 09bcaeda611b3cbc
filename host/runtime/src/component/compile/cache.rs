//! Compiled artifacts on disk, keyed by the component's content hash and the engine's
//! configuration, so a component the host compiled once loads in a millisecond after that.
//!
//! Only artifacts this host wrote are ever loaded: the directory is created private to the
//! host's user, each file is written whole (a temporary file renamed into place), and a
//! SHA-256 of the artifact, kept beside it (`.cwasm.sha256`, written after the artifact), is
//! checked before it is handed to wasmtime. A tenant supplies components, never artifacts.
//!
//! An artifact is the file alone, so wasmtime maps it (`Component::deserialize_file`) instead
//! of copying it into memory: its pages are the page cache's, shared by every process that
//! maps it and paged in as they are touched. Once a load ends the host lets go of the pages
//! it touched (`Compiled::release_touched_pages`), so a host of 1 000 distinct idle tenants
//! holds none of their code (see docs/benchmarks.md, `host_scale -- distinct`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// A directory of compiled artifacts for one engine configuration.
#[derive(Debug, Clone)]
pub(crate) struct ArtifactCache {
    dir: PathBuf,
    engine_key: String,
}

const DIGEST_BYTES: usize = 32;

impl ArtifactCache {
    /// Opens (creating it, private to this user) the cache at `dir` for an engine whose
    /// configuration hashes to `engine_key`.
    pub(crate) fn open(dir: &Path, engine_key: String) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        restrict(dir)?;
        Ok(Self {
            dir: dir.to_owned(),
            engine_key,
        })
    }

    /// The file of the artifact of the component whose content hash is `component`, if it is
    /// cached and intact (its digest read through, never held in memory). A damaged one is
    /// removed and reported as missing.
    pub(crate) fn get(&self, component: &str) -> Option<PathBuf> {
        let path = self.path(component);
        let digest = fs::read(digest_path(&path)).ok()?;
        if digest.len() == DIGEST_BYTES && file_digest(&path).ok()?.as_slice() == digest {
            return Some(path);
        }
        tracing::warn!(path = %path.display(), "a cached artifact is damaged; compiling again");
        let _ = fs::remove_file(digest_path(&path));
        let _ = fs::remove_file(&path);
        None
    }

    /// Stores the artifact of `component`; returns its file.
    ///
    /// # Errors
    /// When the directory cannot be written; the artifact is then simply not cached.
    pub(crate) fn put(&self, component: &str, artifact: &[u8]) -> io::Result<PathBuf> {
        let path = self.path(component);
        // The artifact first: a digest is never beside an artifact it is not of for longer
        // than a rename (a reader in between finds them apart, and compiles again).
        write_whole(&self.dir, &path, artifact)?;
        write_whole(&self.dir, &digest_path(&path), &Sha256::digest(artifact))?;
        Ok(path)
    }

    fn path(&self, component: &str) -> PathBuf {
        self.dir
            .join(format!("{component}-{}.cwasm", self.engine_key))
    }
}

/// The content hash of a component: the hex SHA-256 of its bytes, as
/// [`LoadedComponent::content_hash`](crate::LoadedComponent::content_hash) reports it.
pub fn content_hash(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A short hex key for an engine configuration, from wasmtime's compatibility hash: artifacts
/// of another configuration or wasmtime version never share a file name.
pub(crate) fn engine_key(engine: &wasmtime::Engine) -> String {
    use std::hash::Hash;
    let mut hasher = DigestHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex(&hasher.0.finalize()[..12])
}

/// Feeds `Hash` into SHA-256, a hash stable across processes (the std hashers are not
/// promised to be).
struct DigestHasher(Sha256);

impl std::hash::Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// Where the digest of the artifact at `path` is kept.
fn digest_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".sha256");
    PathBuf::from(name)
}

/// The SHA-256 of the file at `path`, read through a small buffer.
fn file_digest(path: &Path) -> io::Result<[u8; DIGEST_BYTES]> {
    let mut hasher = Sha256::new();
    io::copy(&mut fs::File::open(path)?, &mut hasher)?;
    Ok(hasher.finalize().into())
}

/// Writes `bytes` to `path` whole: a temporary file in `dir`, renamed into place.
fn write_whole(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    // Unique per write: two loads of one component may store it at the same time.
    let write = WRITES.fetch_add(1, Ordering::Relaxed);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let temporary = dir.join(format!(
        ".{}.{}.{write}.tmp",
        name.unwrap_or_default(),
        std::process::id()
    ));
    fs::write(&temporary, bytes)?;
    fs::rename(&temporary, path).inspect_err(|_| {
        let _ = fs::remove_file(&temporary);
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(unix)]
fn restrict(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

#[cfg(not(unix))]
fn restrict(_dir: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_round_trip_and_damage_is_detected() -> io::Result<()> {
        let dir = std::env::temp_dir().join(format!("ruststream-cache-{}", std::process::id()));
        let cache = ArtifactCache::open(&dir, "engine".into())?;
        let key = content_hash(b"component");
        assert_eq!(cache.get(&key), None);
        let path = cache.put(&key, b"artifact")?;
        assert_eq!(cache.get(&key).as_deref(), Some(path.as_path()));
        assert_eq!(
            fs::read(&path)?,
            b"artifact",
            "the artifact alone, to be mapped"
        );

        let mut stored = fs::read(&path)?;
        *stored.last_mut().expect("not empty") ^= 1;
        fs::write(&path, stored)?;
        assert_eq!(cache.get(&key), None, "a damaged artifact is never loaded");
        assert!(!path.exists(), "and it is removed");
        assert!(!digest_path(&path).exists(), "with its digest");

        // An artifact without its digest (written by an older host, or cut short between the
        // two renames) is compiled again.
        let path = cache.put(&key, b"artifact")?;
        fs::remove_file(digest_path(&path))?;
        assert_eq!(cache.get(&key), None);
        fs::remove_dir_all(dir)
    }
}
