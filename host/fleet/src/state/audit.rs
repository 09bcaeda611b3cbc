//! The audit file: `audit.jsonl` in the state directory, one JSON line per change made through
//! the admin API, written before the change is answered. It is bounded: past `ROTATE_AT` the
//! file moves to `audit.jsonl.1` (replacing the one before) and a new one starts, so at most
//! twice that is kept. For longer, ship the host's log: each entry is a log line too.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead as _, BufReader, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ruststream_common::sync::lock;

use serde::{Deserialize, Serialize};

/// The file's name in the state directory.
pub const AUDIT_FILE: &str = "audit.jsonl";

/// Size past which the file is moved aside before the next line.
pub(crate) const ROTATE_AT: u64 = 16 * 1024 * 1024;

/// The audit file of one state directory.
#[derive(Debug)]
pub(crate) struct AuditFile {
    path: PathBuf,
    rotate_at: u64,
    /// One writer at a time: a line is never split by another, and a rotation is whole.
    writing: Mutex<()>,
}

impl AuditFile {
    /// The audit file in `dir` (made at the first line, mode 0600).
    pub(crate) fn new(dir: &Path) -> Self {
        Self::rotating_at(dir, ROTATE_AT)
    }

    /// The same, moved aside past `rotate_at` bytes.
    pub(crate) fn rotating_at(dir: &Path, rotate_at: u64) -> Self {
        Self {
            path: dir.join(AUDIT_FILE),
            rotate_at,
            writing: Mutex::new(()),
        }
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Where it moves once full.
    fn rotated(&self) -> PathBuf {
        self.path.with_extension("jsonl.1")
    }

    /// Appends `line` (one JSON object, no line break in it) and syncs it to disk, moving a
    /// full file aside first.
    ///
    /// # Errors
    /// The file cannot be moved, opened, written or synced.
    pub(crate) fn append(&self, line: &str) -> io::Result<()> {
        let _one_writer = lock(&self.writing);
        if std::fs::metadata(&self.path).is_ok_and(|m| m.len() >= self.rotate_at) {
            std::fs::rename(&self.path, self.rotated())?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.path)?;
        file.write_all(format!("{line}\n").as_bytes())?;
        file.sync_data()
    }

    /// Every line kept, oldest first: the moved-aside file's, then the current one's.
    ///
    /// # Errors
    /// A file that exists cannot be read.
    pub(crate) fn lines(&self) -> io::Result<Vec<String>> {
        let mut lines = Vec::new();
        for path in [self.rotated(), self.path.clone()] {
            let file = match File::open(&path) {
                Ok(file) => file,
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            for line in BufReader::new(file).lines() {
                lines.push(line?);
            }
        }
        Ok(lines)
    }
}

/// One change made through the admin API, as the audit trail keeps it (`GET /v1/audit`, the
/// `audit.jsonl` file in the state directory, and a log line of target `ruststream::audit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When it was answered (ms since the epoch).
    pub at_ms: u64,
    /// The same, RFC 3339 in UTC.
    pub at: String,
    /// The host that took it (its owner id).
    pub host: String,
    /// The token it came with, by id (`operator` for the host's admin token), never its secret.
    pub token: String,
    /// The tenant it was about, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// What was asked: `seek`, `pause`, `resume`, `deploy`, `deploy-shadow`, `abort-shadow`,
    /// `promote`, `undeploy`, `reload`, `rollback`, `redrive`.
    pub action: String,
    /// What it was asked of: the app, subscriber or component after the tenant, or the route.
    pub target: String,
    /// What the request said: its JSON body, or the size of an upload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
    /// `ok`, `refused` (4xx) or `failed` (5xx).
    pub result: String,
    /// The HTTP status answered.
    pub status: u16,
    /// Why it was refused or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What a change that went through answered (omitted past a few KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<serde_json::Value>,
}

/// Which audit entries to show: of one tenant, from a time on, the newest so many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only those about this tenant.
    pub tenant: Option<String>,
    /// Only those made at or after this time (ms since the epoch).
    pub since_ms: u64,
    /// The newest this many.
    pub limit: usize,
}

impl AuditFilter {
    /// The entries of `entries` (oldest first) it keeps, oldest first.
    pub fn keep(&self, entries: impl IntoIterator<Item = AuditEntry>) -> Vec<AuditEntry> {
        let mut kept: Vec<AuditEntry> = entries
            .into_iter()
            .filter(|entry| {
                entry.at_ms >= self.since_ms
                    && (self.tenant.as_ref()).is_none_or(|t| entry.tenant.as_ref() == Some(t))
            })
            .collect();
        let newest = self.limit.min(kept.len());
        kept.drain(..kept.len() - newest);
        kept
    }
}

/// The audit entries in `lines`: lines of an audit file, or of a log the host wrote with
/// `--log-format json` (their `audit` field, on lines of target `ruststream::audit`). Other
/// lines, and a line cut short by a crash, are skipped.
pub fn entries<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<AuditEntry> {
    lines
        .into_iter()
        .filter_map(|line| {
            if let Ok(entry) = serde_json::from_str::<AuditEntry>(line) {
                return Some(entry);
            }
            let logged: serde_json::Value = serde_json::from_str(line).ok()?;
            if logged["target"] != "ruststream::audit" {
                return None;
            }
            serde_json::from_str(logged["audit"].as_str()?).ok()
        })
        .collect()
}

/// The audit entries of the file at `path` (see [`entries`]).
///
/// # Errors
/// The file cannot be read.
pub fn read_entries(path: &Path) -> io::Result<Vec<AuditEntry>> {
    let text = std::fs::read_to_string(path)?;
    Ok(entries(text.lines()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tests::scratch;

    #[test]
    fn lines_are_kept_in_order_across_a_rotation_and_bounded() -> io::Result<()> {
        let dir = scratch("audit-rotation");
        std::fs::create_dir_all(&dir)?;
        let audit = AuditFile::rotating_at(&dir, 20);
        assert!(audit.lines()?.is_empty(), "nothing written yet");
        for n in 0..7 {
            audit.append(&format!("{{\"n\":{n}}}"))?;
        }
        // 8 bytes a line: a file of three lines is full, so the fourth and the seventh move it
        // aside; the first three are gone with the second move.
        let kept: Vec<String> = (3..7).map(|n| format!("{{\"n\":{n}}}")).collect();
        assert_eq!(audit.lines()?, kept);
        let mode = std::fs::metadata(audit.path())?.permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        Ok(())
    }
}
