//! The redrives the admin API started, kept in the state directory: one the host was running
//! when it stopped (a crash, a `kill -9`, a restart) is started again when the host starts,
//! and resumes where its progress rows in DynamoDB say; one that ended keeps its report, so
//! `GET /v1/redrives/{id}` answers after a restart too.
//!
//! `redrives/<id>.json` holds the request (its id filled in) and, once the run ended
//! (finished, or failed), its last report. A redrive whose file has no report is one to
//! resume.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use ruststream_common::sync::lock;
use ruststream_kinesis::redrive::RedriveReport;

use super::{StateError, create_private_dir, file_name, read_json, write_atomic};

/// `POST /v1/redrives`: a redrive of `stream`'s dead letters, as `ruststream redrive` takes it
/// (`since` and `until` RFC 3339 or ms since the epoch, as text). With `dry_run`, the answer is
/// the plan; otherwise the redrive starts in the host and the answer is its first progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedriveRequest {
    /// The dead-letter stream.
    pub stream: String,
    /// Only this tenant's dead letters.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Only those dead-lettered for this reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// Only those that reached the stream at or after this time.
    #[serde(default)]
    pub since: Option<String>,
    /// Only those that reached it at or before this time.
    #[serde(default)]
    pub until: Option<String>,
    /// Its name (default: derived from the stream and filter, as the verb derives it).
    #[serde(default)]
    pub id: Option<String>,
    /// Only say what would move.
    #[serde(default)]
    pub dry_run: bool,
}

/// One kept redrive.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RedriveRecord {
    /// What it was started with, its id set.
    pub request: RedriveRequest,
    /// Its last report, once its run ended; `None` while it runs (or when the host stopped
    /// while it ran).
    pub report: Option<RedriveReport>,
}

/// The kept redrives of a state directory.
pub(crate) struct RedriveRecords {
    dir: PathBuf,
    /// One read-modify-write at a time.
    writing: Mutex<()>,
}

impl RedriveRecords {
    /// The redrives kept in state directory `root`.
    pub(crate) fn new(root: &Path) -> Self {
        Self {
            dir: root.join("redrives"),
            writing: Mutex::new(()),
        }
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{}.json", file_name(id)))
    }

    /// Keeps `request` (whose `id` is set) as running: resumed if the host stops before
    /// [`ended`](Self::ended) is called.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub(crate) fn started(&self, request: &RedriveRequest) -> Result<(), StateError> {
        let record = RedriveRecord {
            request: request.clone(),
            report: None,
        };
        let _writing = lock(&self.writing);
        self.write(&record)
    }

    /// Keeps `report` as the end of the redrive it is about: it is not resumed any more.
    ///
    /// # Errors
    /// When the file cannot be read or written. A redrive never kept is not kept now.
    pub(crate) fn ended(&self, report: &RedriveReport) -> Result<(), StateError> {
        let _writing = lock(&self.writing);
        let Some(mut record) = read_json::<RedriveRecord>(&self.path(&report.id))? else {
            return Ok(());
        };
        record.report = Some(report.clone());
        self.write(&record)
    }

    fn write(&self, record: &RedriveRecord) -> Result<(), StateError> {
        let id = record.request.id.as_deref().unwrap_or_default();
        create_private_dir(&self.dir)?;
        let path = self.path(id);
        let json = serde_json::to_vec_pretty(record).map_err(|error| StateError::Invalid {
            path: path.clone(),
            reason: error.to_string(),
        })?;
        write_atomic(&path, &json, 0o600).map_err(StateError::io("write", &path))
    }

    /// The kept redrive `id`, if there is one.
    ///
    /// # Errors
    /// When its file cannot be read or parsed.
    pub(crate) fn get(&self, id: &str) -> Result<Option<RedriveRecord>, StateError> {
        read_json(&self.path(id))
    }

    /// The kept redrives that were running when the host stopped; files that cannot be read
    /// are left out, each with why.
    pub(crate) fn unfinished(&self) -> (Vec<RedriveRequest>, Vec<StateError>) {
        let (records, errors) = self.all();
        let requests = records
            .into_iter()
            .filter(|record| record.report.is_none())
            .map(|record| record.request)
            .collect();
        (requests, errors)
    }

    /// Every kept redrive, by id; files that cannot be read are left out, each with why.
    pub(crate) fn all(&self) -> (Vec<RedriveRecord>, Vec<StateError>) {
        let mut records = Vec::new();
        let mut errors = Vec::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return (records, errors);
            }
            Err(error) => return (records, vec![StateError::io("read", &self.dir)(error)]),
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.extension().is_none_or(|ext| ext != "json") {
                continue;
            }
            match read_json::<RedriveRecord>(&path) {
                Ok(Some(record)) => records.push(record),
                Ok(None) => {}
                Err(error) => errors.push(error),
            }
        }
        records.sort_by(|a, b| a.request.id.cmp(&b.request.id));
        (records, errors)
    }
}

#[cfg(test)]
mod tests {
    use ruststream_kinesis::redrive::RedriveState;

    use super::*;

    fn request(id: &str) -> RedriveRequest {
        RedriveRequest {
            stream: "books.dead".into(),
            tenant: Some("acme".into()),
            reason: None,
            since: None,
            until: None,
            id: Some(id.into()),
            dry_run: false,
        }
    }

    #[test]
    fn a_started_redrive_is_resumed_until_it_ended_and_its_report_is_kept() {
        let root = crate::state::tests::scratch("redrives");
        let kept = RedriveRecords::new(&root);
        assert!(kept.unfinished().0.is_empty(), "none kept yet");
        kept.started(&request("rd-1")).expect("kept");
        kept.started(&request("../rd-2")).expect("kept");
        let (unfinished, errors) = kept.unfinished();
        assert!(errors.is_empty(), "{errors:?}");
        let ids: Vec<_> = unfinished.iter().filter_map(|r| r.id.as_deref()).collect();
        assert_eq!(ids, ["../rd-2", "rd-1"]);

        let report = RedriveReport {
            id: "rd-1".into(),
            stream: "books.dead".into(),
            state: RedriveState::Finished,
            redriven: 20,
            ..RedriveReport::default()
        };
        kept.ended(&report).expect("kept");
        let ids: Vec<_> = kept
            .unfinished()
            .0
            .into_iter()
            .filter_map(|r| r.id)
            .collect();
        assert_eq!(ids, ["../rd-2"]);
        let (all, _) = kept.all();
        let ended: Vec<_> = all.iter().map(|r| r.report.is_some()).collect();
        assert_eq!(
            ended,
            [false, true],
            "every kept redrive, the ended one with its report"
        );
        let record = kept.get("rd-1").expect("readable").expect("kept");
        let stored = record.report.expect("its report");
        assert_eq!(
            (stored.state, stored.redriven),
            (RedriveState::Finished, 20)
        );
        assert!(kept.get("rd-none").expect("readable").is_none());

        std::fs::write(root.join("redrives").join("bad.json"), "{").expect("written");
        let (unfinished, errors) = kept.unfinished();
        assert_eq!((unfinished.len(), errors.len()), (1, 1), "{errors:?}");
        let _ = std::fs::remove_dir_all(root);
    }
}
