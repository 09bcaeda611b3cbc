//! Kept component versions: each accepted version's bytes by content hash (once, whichever
//! tenants and apps run them), and per (tenant, app) a record of the live version, the hash of
//! the configured file the host last saw, and the versions kept for a rollback, newest last.
//!
//! A record is read from disk each time it is needed (a start, a deploy, a listing) and
//! written whole; writes are serialized within the process, and the state directory's lock
//! keeps other hosts out. At most `keep` versions are kept per app: when another goes live, the
//! oldest that is not live is dropped, and its bytes too once no record names them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ruststream_runtime::{Clock as _, SystemClock, component::compile::content_hash};
use serde::{Deserialize, Serialize};

use super::{StateError, create_private_dir, file_name, read_json, write_atomic};

/// How a version came to be live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VersionOrigin {
    /// Read from the configured component file (at a start, on a change, on a reload).
    File,
    /// Uploaded through the admin API (`ruststream deploy`).
    Upload,
    /// Returned to by a rollback: an operator's, or the rollout judge's.
    Rollback,
}

impl VersionOrigin {
    /// The word `ruststream versions` shows.
    pub fn word(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Upload => "upload",
            Self::Rollback => "rollback",
        }
    }
}

/// How many versions of an app are kept unless `[host] keep_versions` says otherwise.
pub(crate) const DEFAULT_KEEP: usize = 10;

/// What the state directory knows of one app of one tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AppRecord {
    /// The tenant.
    pub tenant: String,
    /// The app, as its component declares it.
    pub app: String,
    /// The component (file stem or upload name) it runs under.
    pub component: String,
    /// True when the component came by upload under a name the tenants file does not list:
    /// a restart runs it again all the same.
    #[serde(default)]
    pub upload_only: bool,
    /// The hash of the live version; `None` once the app no longer runs (its component was
    /// dropped from the tenants file, or another app took the component).
    pub live: Option<String>,
    /// The hash of the configured file the host last read for the component.
    pub file_hash: Option<String>,
    /// The kept versions, the one that went live last at the end.
    pub versions: Vec<StoredVersion>,
    /// The version running beside the live one as a shadow, if any: a restart starts it
    /// again. Its bytes are kept like a version's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowRecord>,
}

/// A shadow version as the state directory keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ShadowRecord {
    /// The hex SHA-256 of its bytes (`versions/<hash>.wasm`).
    pub hash: String,
    /// The percentage of records it is given.
    pub sample_percent: u32,
}

/// One kept version of an app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredVersion {
    /// The hex SHA-256 of its bytes (its file is `versions/<hash>.wasm`).
    pub hash: String,
    /// The app version it declares.
    pub version: String,
    /// The component name it came under.
    pub component: String,
    /// When it last went live, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// How it came then.
    pub how: VersionOrigin,
}

/// A version that just went live, as [`VersionStore::went_live`] records it.
#[derive(Debug, Clone)]
pub(crate) struct WentLive<'a> {
    pub tenant: &'a str,
    pub app: &'a str,
    pub component: &'a str,
    pub hash: &'a str,
    pub version: &'a str,
    pub how: VersionOrigin,
    /// The configured file's hash, when the host read it for this load.
    pub file_hash: Option<&'a str>,
    /// Whether the component is one the tenants file does not list; `None` keeps what the
    /// record says (a rollback).
    pub upload_only: Option<bool>,
}

/// Why a hash (or a prefix of one) names no single kept version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pick {
    /// No kept version starts with it.
    None,
    /// Several do: these.
    Several(Vec<String>),
}

/// The versions kept in a state directory.
#[derive(Debug)]
pub(crate) struct VersionStore {
    root: PathBuf,
    keep: usize,
    /// One read-modify-write of records at a time.
    writing: Mutex<()>,
}

impl VersionStore {
    /// The store in state directory `root`, keeping `keep` (at least 1) versions per app.
    pub(crate) fn new(root: &Path, keep: usize) -> Self {
        Self {
            root: root.to_owned(),
            keep: keep.max(1),
            writing: Mutex::new(()),
        }
    }

    fn blob_path(&self, hash: &str) -> PathBuf {
        self.root
            .join("versions")
            .join(format!("{}.wasm", file_name(hash)))
    }

    fn tenant_dir(&self, tenant: &str) -> PathBuf {
        self.root.join("apps").join(file_name(tenant))
    }

    fn record_path(&self, tenant: &str, app: &str) -> PathBuf {
        self.tenant_dir(tenant)
            .join(format!("{}.json", file_name(app)))
    }

    /// Whether the bytes of version `hash` are kept.
    pub(crate) fn has(&self, hash: &str) -> bool {
        self.blob_path(hash).is_file()
    }

    /// Keeps `bytes` under their hash `hash`, unless they are kept already.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub(crate) fn keep_bytes(&self, hash: &str, bytes: &[u8]) -> Result<(), StateError> {
        let path = self.blob_path(hash);
        if path.exists() {
            return Ok(());
        }
        if let Some(dir) = path.parent() {
            create_private_dir(dir)?;
        }
        write_atomic(&path, bytes, 0o600).map_err(StateError::io("write", &path))
    }

    /// The bytes of version `hash`, checked against the hash.
    ///
    /// # Errors
    /// When they are not kept (pruned, or removed by hand), cannot be read, or do not hash to
    /// `hash` any more.
    pub(crate) fn bytes(&self, hash: &str) -> Result<Vec<u8>, StateError> {
        let path = self.blob_path(hash);
        let bytes = std::fs::read(&path).map_err(StateError::io("read", &path))?;
        if content_hash(&bytes) != hash {
            return Err(StateError::Invalid {
                path,
                reason: "its bytes do not match their hash".to_owned(),
            });
        }
        Ok(bytes)
    }

    /// The record of `app` of `tenant`, if there is one.
    ///
    /// # Errors
    /// When it cannot be read or parsed.
    pub(crate) fn record(&self, tenant: &str, app: &str) -> Result<Option<AppRecord>, StateError> {
        read_record(&self.record_path(tenant, app))
    }

    /// Every record of `tenant`; records that cannot be read are left out, each with why.
    pub(crate) fn records(&self, tenant: &str) -> (Vec<AppRecord>, Vec<StateError>) {
        let dir = self.tenant_dir(tenant);
        let mut records = Vec::new();
        let mut errors = Vec::new();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return (records, errors);
            }
            Err(error) => return (records, vec![StateError::io("read", &dir)(error)]),
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.extension().is_none_or(|ext| ext != "json") {
                continue;
            }
            match read_record(&path) {
                Ok(Some(record)) => records.push(record),
                Ok(None) => {}
                Err(error) => errors.push(error),
            }
        }
        records.sort_by(|a, b| a.app.cmp(&b.app));
        (records, errors)
    }

    /// The record of the app that runs as `component` of `tenant`, if one does.
    pub(crate) fn live_under(&self, tenant: &str, component: &str) -> Option<AppRecord> {
        self.records(tenant)
            .0
            .into_iter()
            .find(|r| r.component == component && r.live.is_some())
    }

    /// Records that `went` is live: its version kept (or moved to the end, when kept already),
    /// the file hash noted, older versions pruned. Another app of the tenant that ran as the
    /// same component no longer does.
    ///
    /// # Errors
    /// When a record cannot be read or written; the bytes must be kept already
    /// ([`keep_bytes`](Self::keep_bytes)).
    pub(crate) fn went_live(&self, went: &WentLive<'_>) -> Result<(), StateError> {
        let _one = ruststream_common::sync::lock(&self.writing);
        let (others, _) = self.records(went.tenant);
        for mut other in others {
            if other.app != went.app && other.component == went.component && other.live.is_some() {
                other.live = None;
                self.write(&other)?;
            }
        }
        let mut record = self
            .record(went.tenant, went.app)?
            .unwrap_or_else(|| AppRecord {
                tenant: went.tenant.to_owned(),
                app: went.app.to_owned(),
                component: went.component.to_owned(),
                upload_only: false,
                live: None,
                file_hash: None,
                versions: Vec::new(),
                shadow: None,
            });
        record.component = went.component.to_owned();
        if let Some(upload_only) = went.upload_only {
            record.upload_only = upload_only;
        }
        if let Some(file_hash) = went.file_hash {
            record.file_hash = Some(file_hash.to_owned());
        }
        if record.live.as_deref() != Some(went.hash) {
            record.versions.retain(|v| v.hash != went.hash);
            record.versions.push(StoredVersion {
                hash: went.hash.to_owned(),
                version: went.version.to_owned(),
                component: went.component.to_owned(),
                at_ms: SystemClock.now_ms(),
                how: went.how,
            });
            record.live = Some(went.hash.to_owned());
        }
        let pruned = self.prune(&mut record);
        self.write(&record)?;
        self.drop_unnamed(&pruned);
        Ok(())
    }

    /// Records `shadow` (none: no shadow) as the shadow of `app` of `tenant`, whose record
    /// must exist (the app went live); its bytes must be kept already. A shadow no longer
    /// named has its bytes dropped unless a version names them.
    ///
    /// # Errors
    /// When the record cannot be read or written, or there is none.
    pub(crate) fn set_shadow(
        &self,
        tenant: &str,
        app: &str,
        shadow: Option<ShadowRecord>,
    ) -> Result<(), StateError> {
        let _one = ruststream_common::sync::lock(&self.writing);
        let path = self.record_path(tenant, app);
        let mut record = self
            .record(tenant, app)?
            .ok_or_else(|| StateError::Invalid {
                path,
                reason: "no record of the app: it never went live here".to_owned(),
            })?;
        let before = std::mem::replace(&mut record.shadow, shadow);
        self.write(&record)?;
        let dropped: Vec<String> = before
            .map(|s| s.hash)
            .filter(|h| record.shadow.as_ref().is_none_or(|s| &s.hash != h))
            .into_iter()
            .collect();
        self.drop_unnamed(&dropped);
        Ok(())
    }

    /// Records that the app running as `component` of `tenant` stopped for good (its
    /// component is no longer configured): a restart does not run it again.
    ///
    /// # Errors
    /// When its record cannot be written.
    pub(crate) fn retired(&self, tenant: &str, component: &str) -> Result<(), StateError> {
        let _one = ruststream_common::sync::lock(&self.writing);
        for mut record in self.records(tenant).0 {
            if record.component == component && record.live.is_some() {
                record.live = None;
                self.write(&record)?;
            }
        }
        Ok(())
    }

    /// The kept version of `app` of `tenant` whose hash starts with `prefix`.
    ///
    /// # Errors
    /// [`Pick::None`] or [`Pick::Several`].
    pub(crate) fn pick(record: &AppRecord, prefix: &str) -> Result<StoredVersion, Pick> {
        let hashes = record.versions.iter().map(|v| v.hash.as_str());
        let hash = Self::pick_hash(hashes, prefix)?;
        let picked = record.versions.iter().find(|v| v.hash == hash);
        picked.cloned().ok_or(Pick::None)
    }

    /// The one of `hashes` that starts with `prefix` (a leading `#` and the case ignored).
    pub(crate) fn pick_hash<'a>(
        hashes: impl Iterator<Item = &'a str>,
        prefix: &str,
    ) -> Result<String, Pick> {
        let prefix = prefix.trim_start_matches('#').to_ascii_lowercase();
        let matching: Vec<&str> = hashes
            .filter(|hash| !prefix.is_empty() && hash.starts_with(&prefix))
            .collect();
        match matching.as_slice() {
            [] => Err(Pick::None),
            [one] => Ok((*one).to_owned()),
            several => Err(Pick::Several(
                several.iter().map(|hash| (*hash).to_owned()).collect(),
            )),
        }
    }

    /// Drops the oldest versions that are not live until at most `keep` are left; returns
    /// the hashes dropped.
    fn prune(&self, record: &mut AppRecord) -> Vec<String> {
        let mut dropped = Vec::new();
        while record.versions.len() > self.keep {
            let Some(oldest) = record
                .versions
                .iter()
                .position(|v| record.live.as_deref() != Some(&v.hash))
            else {
                break;
            };
            dropped.push(record.versions.remove(oldest).hash);
        }
        dropped
    }

    /// Removes the bytes of `hashes` that no record keeps any more.
    fn drop_unnamed(&self, hashes: &[String]) {
        if hashes.is_empty() {
            return;
        }
        // A record that cannot be read may name them: better a file too many.
        let Some(named) = self.every_kept_hash() else {
            return;
        };
        for hash in hashes.iter().filter(|h| !named.contains(*h)) {
            let path = self.blob_path(hash);
            if let Err(error) = std::fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), "cannot remove a pruned version: {error}");
            }
        }
    }

    /// The hashes every record of every tenant keeps; `None` when a record cannot be read.
    fn every_kept_hash(&self) -> Option<std::collections::HashSet<String>> {
        let mut named = std::collections::HashSet::new();
        let tenants = std::fs::read_dir(self.root.join("apps"))
            .into_iter()
            .flatten()
            .filter_map(Result::ok);
        for tenant in tenants {
            let files = std::fs::read_dir(tenant.path())
                .into_iter()
                .flatten()
                .filter_map(Result::ok);
            for file in files.filter(|f| f.path().extension().is_some_and(|e| e == "json")) {
                let record = read_record(&file.path()).ok()?;
                if let Some(record) = record {
                    named.extend(record.shadow.map(|s| s.hash));
                    named.extend(record.versions.into_iter().map(|v| v.hash));
                }
            }
        }
        Some(named)
    }

    fn write(&self, record: &AppRecord) -> Result<(), StateError> {
        let path = self.record_path(&record.tenant, &record.app);
        if let Some(dir) = path.parent() {
            create_private_dir(dir)?;
        }
        let json = serde_json::to_vec_pretty(record).map_err(|error| StateError::Invalid {
            path: path.clone(),
            reason: error.to_string(),
        })?;
        write_atomic(&path, &json, 0o600).map_err(StateError::io("write", &path))
    }
}

fn read_record(path: &Path) -> Result<Option<AppRecord>, StateError> {
    read_json(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(name: &str, keep: usize) -> VersionStore {
        let root =
            std::env::temp_dir().join(format!("ruststream-versions-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        VersionStore::new(&root, keep)
    }

    /// Keeps `bytes` and records them live for acme's ledger; returns their hash.
    fn live(store: &VersionStore, bytes: &[u8], how: VersionOrigin) -> String {
        let hash = content_hash(bytes);
        store.keep_bytes(&hash, bytes).expect("kept");
        let went = WentLive {
            tenant: "acme",
            app: "ledger",
            component: "ledger",
            hash: &hash,
            version: "1.0.0",
            how,
            file_hash: (how == VersionOrigin::File).then_some(hash.as_str()),
            upload_only: None,
        };
        store.went_live(&went).expect("recorded");
        hash
    }

    #[test]
    fn versions_are_kept_once_and_pruned_oldest_first() {
        let store = store("prune", 3);
        let one = live(&store, b"one", VersionOrigin::File);
        let two = live(&store, b"two", VersionOrigin::Upload);
        // Live again: moved to the end, not kept twice.
        live(&store, b"one", VersionOrigin::Rollback);
        let three = live(&store, b"three", VersionOrigin::Upload);
        let record = store
            .record("acme", "ledger")
            .expect("read")
            .expect("a record");
        let hashes: Vec<&str> = record.versions.iter().map(|v| v.hash.as_str()).collect();
        assert_eq!(hashes, [two.as_str(), one.as_str(), three.as_str()]);
        assert_eq!(record.versions[1].how, VersionOrigin::Rollback);
        assert_eq!(record.live.as_deref(), Some(three.as_str()));
        assert_eq!(record.file_hash.as_deref(), Some(one.as_str()));

        let four = live(&store, b"four", VersionOrigin::Upload);
        let record = store
            .record("acme", "ledger")
            .expect("read")
            .expect("a record");
        assert_eq!(record.versions.len(), 3);
        assert!(
            record.versions.iter().all(|v| v.hash != two),
            "the oldest went"
        );
        assert!(!store.has(&two), "and its bytes");
        assert_eq!(store.bytes(&four).expect("kept"), b"four");
        assert_eq!(store.bytes(&one).expect("kept"), b"one");
    }

    #[test]
    fn bytes_another_app_keeps_stay() {
        let store = store("shared", 1);
        let shared = live(&store, b"shared", VersionOrigin::File);
        let other = WentLive {
            tenant: "globex",
            app: "audit",
            component: "audit",
            hash: &shared,
            version: "1.0.0",
            how: VersionOrigin::File,
            file_hash: None,
            upload_only: None,
        };
        store.went_live(&other).expect("recorded");
        live(&store, b"newer", VersionOrigin::Upload);
        assert!(store.has(&shared), "globex still keeps it");
    }

    #[test]
    fn a_hash_or_a_prefix_picks_one_version() {
        let store = store("pick", 10);
        let one = live(&store, b"one", VersionOrigin::File);
        live(&store, b"two", VersionOrigin::Upload);
        let record = store
            .record("acme", "ledger")
            .expect("read")
            .expect("a record");
        assert_eq!(
            VersionStore::pick(&record, &one).map(|v| v.hash),
            Ok(one.clone())
        );
        let prefix = format!("#{}", one[..8].to_ascii_uppercase());
        assert_eq!(
            VersionStore::pick(&record, &prefix).map(|v| v.hash),
            Ok(one)
        );
        assert_eq!(VersionStore::pick(&record, "zz"), Err(Pick::None));
        assert_eq!(VersionStore::pick(&record, ""), Err(Pick::None));
        let mut twins = record.clone();
        twins.versions[1].hash = format!("{}0", &twins.versions[0].hash[..4]);
        assert!(matches!(
            VersionStore::pick(&twins, &twins.versions[0].hash[..4]),
            Err(Pick::Several(hashes)) if hashes.len() == 2
        ));
    }

    #[test]
    fn a_component_runs_one_app_and_retires() {
        let store = store("component", 10);
        live(&store, b"one", VersionOrigin::File);
        let hash = content_hash(b"renamed");
        store.keep_bytes(&hash, b"renamed").expect("kept");
        let renamed = WentLive {
            tenant: "acme",
            app: "renamed",
            component: "ledger",
            hash: &hash,
            version: "1.0.0",
            how: VersionOrigin::File,
            file_hash: Some(&hash),
            upload_only: Some(false),
        };
        store.went_live(&renamed).expect("recorded");
        let old = store
            .record("acme", "ledger")
            .expect("read")
            .expect("a record");
        assert_eq!(old.live, None, "the component runs another app now");
        let now = store.live_under("acme", "ledger").expect("one runs it");
        assert_eq!(now.app, "renamed");
        store.retired("acme", "ledger").expect("recorded");
        assert_eq!(store.live_under("acme", "ledger"), None);
    }

    #[test]
    fn tampered_bytes_are_refused() {
        let store = store("tampered", 10);
        let hash = live(&store, b"one", VersionOrigin::File);
        std::fs::write(store.blob_path(&hash), b"not one").expect("written");
        let error = store.bytes(&hash).expect_err("not its hash");
        assert!(
            error.to_string().contains("do not match their hash"),
            "{error}"
        );
    }

    #[test]
    fn a_shadow_is_kept_across_versions_and_its_bytes_go_with_it() {
        let store = store("shadow", 1);
        live(&store, b"one", VersionOrigin::File);
        let shadow = content_hash(b"candidate");
        store.keep_bytes(&shadow, b"candidate").expect("kept");
        let record = ShadowRecord {
            hash: shadow.clone(),
            sample_percent: 25,
        };
        store
            .set_shadow("acme", "ledger", Some(record.clone()))
            .expect("recorded");
        // Another version goes live (pruning the first): the shadow and its bytes stay.
        live(&store, b"two", VersionOrigin::Upload);
        let read = store.record("acme", "ledger").expect("read");
        assert_eq!(read.and_then(|r| r.shadow), Some(record));
        assert!(store.has(&shadow), "a shadow's bytes are not pruned");
        store.set_shadow("acme", "ledger", None).expect("cleared");
        let read = store.record("acme", "ledger").expect("read");
        assert_eq!(read.and_then(|r| r.shadow), None);
        assert!(!store.has(&shadow), "bytes no record names are dropped");
        assert!(
            store.set_shadow("acme", "books", None).is_err(),
            "an app that never went live has no record"
        );
    }
}
