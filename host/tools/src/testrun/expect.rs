//! The expectations file of `ruststream test` (TOML, or JSON for a `.json` file): the outcome
//! of each record, what the component publishes, and where each checkpoint ends.
//!
//! ```toml
//! [[record]]            # one per record of the records file, in order
//! outcome = "ack"       # ack, drop, retry, or retry_after with after_ms
//!
//! [[record]]
//! outcome = "retry_after"
//! after_ms = 30000
//!
//! [[record]]            # more about a record, by its number: another subscription's call
//! number = 2
//! subscription = "audit"
//! outcome = "drop"
//!
//! [[refused]]           # a publish the component is refused, and expected to be
//! record = 2            # the record it came from (a copy of it counts as it)
//! subscription = "book"
//! stream = "ledger.booked"
//! reason = "stream-not-found"
//!
//! [[publish]]           # in order, per stream
//! stream = "shipments"
//! json = { id = 1 }     # or data (text) or data_base64
//! headers = { x-source = "orders" }
//! record = 1            # who published it: the record and the subscription
//! subscription = "forward"
//!
//! [[checkpoint]]
//! subscription = "book" # or its stream
//! at = 2                # the record it stands at (its number), 0 for none
//! held_at = 3           # the record it is held in front of, 0 for none
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use ruststream_runtime::Outcome;
use serde::Deserialize;

use super::TestRunError;
use super::records::{Payload, PayloadFields};

/// Everything the file expects.
#[derive(Debug, Default)]
pub(crate) struct Expectations {
    /// Streams to watch for publishes beyond those read or named in `publishes`.
    pub streams: Vec<String>,
    /// The outcome of each record, in the records file's order.
    pub records: Vec<ExpectedRecord>,
    /// Every record the component publishes to the streams watched, in order per stream.
    pub publishes: Vec<ExpectedPublish>,
    /// Where checkpoints stand once everything is delivered.
    pub checkpoints: Vec<ExpectedCheckpoint>,
    /// The publishes the component is refused.
    pub refused: Vec<ExpectedRefusal>,
}

/// The outcome of one record's call, for one subscription or for every one reading the
/// record's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExpectedRecord {
    /// Which `[[record]]` entry of the file it is (from 1), for messages.
    pub entry: usize,
    /// The record's number, when the entry gives it; else the entry is positional: the
    /// n-th entry without a number is about record n.
    pub number: Option<usize>,
    /// The subscription whose call it is; none for the one the record names, else every
    /// subscription reading the record's stream.
    pub subscription: Option<String>,
    /// The outcome of the record's own call (not of the copies a retry made).
    pub outcome: Outcome,
}

/// One record the component publishes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExpectedPublish {
    /// Which `[[publish]]` entry of the file it is (from 1), for messages.
    pub entry: usize,
    /// The stream it goes to.
    pub stream: String,
    /// The record whose call published it (0: outside any record), when checked.
    pub record: Option<usize>,
    /// The subscription whose call published it, or the stream only it reads, when checked.
    pub subscription: Option<String>,
    /// Its payload.
    pub payload: Payload,
    /// Its partition key, when checked.
    pub partition_key: Option<String>,
    /// Its user headers, exactly, when checked.
    pub headers: Option<BTreeMap<String, String>>,
}

/// A publish the component is expected to be refused: every field given must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExpectedRefusal {
    /// Which `[[refused]]` entry of the file it is (from 1), for messages.
    pub entry: usize,
    /// The record it came from (0: outside any record), when checked.
    pub record: Option<usize>,
    /// The subscription whose call published, or the stream only it reads, when checked.
    pub subscription: Option<String>,
    /// The stream the component published to.
    pub stream: String,
    /// The contract's `publish-error` case, when checked.
    pub reason: Option<String>,
    /// How many such publishes of the record were refused, when checked.
    pub count: Option<u64>,
}

/// The reasons a publish is refused, as the contract's `publish-error` names them.
pub(crate) const REASONS: [&str; 6] = [
    "stream-not-found",
    "not-permitted",
    "record-too-large",
    "throttled",
    "reserved-header",
    "unavailable",
];

/// A position of a checkpoint: nothing yet, a record of the records file, or any sequence
/// number (a copy the runtime made).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Position {
    /// No checkpoint (or nothing held).
    None,
    /// The record with this number in the records file.
    Record(usize),
    /// A sequence number as the stream gave it.
    Sequence(String),
}

/// Where one subscription's checkpoint ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExpectedCheckpoint {
    /// The subscription, or the stream only it reads.
    pub subscription: String,
    /// The shard, when the file names one.
    pub shard: Option<String>,
    /// The last record of the handled prefix, when checked.
    pub at: Option<Position>,
    /// The record it is held in front of, when checked.
    pub held_at: Option<Position>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    streams: Vec<String>,
    #[serde(default, alias = "records")]
    record: Vec<RecordEntry>,
    #[serde(default, alias = "publishes")]
    publish: Vec<PublishEntry>,
    #[serde(default, alias = "checkpoints")]
    checkpoint: Vec<CheckpointEntry>,
    #[serde(default)]
    refused: Vec<RefusedEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordEntry {
    number: Option<usize>,
    #[serde(alias = "subscriber")]
    subscription: Option<String>,
    outcome: String,
    after_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefusedEntry {
    record: Option<usize>,
    #[serde(alias = "subscriber")]
    subscription: Option<String>,
    stream: String,
    reason: Option<String>,
    count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishEntry {
    stream: String,
    record: Option<usize>,
    #[serde(alias = "subscriber")]
    subscription: Option<String>,
    data: Option<String>,
    data_base64: Option<String>,
    json: Option<serde_json::Value>,
    partition_key: Option<String>,
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointEntry {
    #[serde(alias = "subscriber")]
    subscription: String,
    shard: Option<String>,
    at: Option<PositionEntry>,
    held_at: Option<PositionEntry>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PositionEntry {
    Number(usize),
    Text(String),
}

/// Reads the expectations file at `path`: JSON when it ends in `.json`, else TOML.
///
/// # Errors
/// [`TestRunError::Expect`] with the parser's line and column, or naming the entry that is
/// wrong; [`TestRunError::Read`] when the file cannot be read.
pub(crate) fn read(path: &Path) -> Result<Expectations, TestRunError> {
    let text = super::read_text(path)?;
    let bad = |message: String| TestRunError::Expect {
        file: path.to_owned(),
        message,
    };
    let json = path.extension().is_some_and(|ext| ext == "json");
    let file: File = if json {
        serde_json::from_str(&text).map_err(|error| bad(error.to_string()))?
    } else {
        toml::from_str(&text).map_err(|error| bad(one_line(&error.to_string())))?
    };
    file.into_expectations().map_err(bad)
}

/// The TOML parser's message, which spans lines (it quotes the line), made one line.
fn one_line(message: &str) -> String {
    let lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    lines.collect::<Vec<_>>().join(" ")
}

impl File {
    fn into_expectations(self) -> Result<Expectations, String> {
        let records = (self.record.into_iter().enumerate())
            .map(|(i, entry)| {
                entry
                    .expected(i + 1)
                    .map_err(|e| format!("[[record]] {}: {e}", i + 1))
            })
            .collect::<Result<_, _>>()?;
        let refused = (self.refused.into_iter().enumerate())
            .map(|(i, entry)| {
                entry
                    .expected(i + 1)
                    .map_err(|e| format!("[[refused]] {}: {e}", i + 1))
            })
            .collect::<Result<_, _>>()?;
        let publishes = (self.publish.into_iter().enumerate())
            .map(|(i, entry)| {
                entry
                    .expected(i + 1)
                    .map_err(|e| format!("[[publish]] {}: {e}", i + 1))
            })
            .collect::<Result<_, _>>()?;
        let checkpoints = self
            .checkpoint
            .into_iter()
            .map(CheckpointEntry::expected)
            .collect();
        Ok(Expectations {
            streams: self.streams,
            records,
            publishes,
            checkpoints,
            refused,
        })
    }
}

impl RecordEntry {
    fn expected(self, entry: usize) -> Result<ExpectedRecord, String> {
        if self.number == Some(0) {
            return Err("`number` counts records from 1".into());
        }
        Ok(ExpectedRecord {
            entry,
            number: self.number,
            subscription: self.subscription,
            outcome: parse_outcome(&self.outcome, self.after_ms)?,
        })
    }
}

impl RefusedEntry {
    fn expected(self, entry: usize) -> Result<ExpectedRefusal, String> {
        let reason = self
            .reason
            .map(|r| r.trim().to_ascii_lowercase().replace('_', "-"));
        if let Some(reason) = reason.as_ref().filter(|r| !REASONS.contains(&r.as_str())) {
            return Err(format!(
                "unknown reason `{reason}`: expected one of {}",
                REASONS.join(", ")
            ));
        }
        if self.count == Some(0) {
            return Err("`count` of refused publishes starts at 1".into());
        }
        Ok(ExpectedRefusal {
            entry,
            record: self.record,
            subscription: self.subscription,
            stream: self.stream,
            reason,
            count: self.count,
        })
    }
}

/// `ack`, `drop`, `retry`, or `retry_after` with `after_ms` (also written `retry_after(500ms)`,
/// as reports show it).
pub(crate) fn parse_outcome(text: &str, after_ms: Option<u64>) -> Result<Outcome, String> {
    let normalized = text.trim().to_ascii_lowercase().replace('-', "_");
    let delay = |ms| Outcome::RetryAfter(Duration::from_millis(ms));
    match (normalized.as_str(), after_ms) {
        ("ack", None) => Ok(Outcome::Ack),
        ("drop", None) => Ok(Outcome::Drop),
        ("retry", None) => Ok(Outcome::Retry),
        ("retry_after", Some(ms)) => Ok(delay(ms)),
        ("retry_after", None) => Err("`retry_after` needs `after_ms`".into()),
        ("ack" | "drop" | "retry", Some(_)) => {
            Err(format!("`after_ms` goes with `retry_after`, not `{text}`"))
        }
        (other, None) => written_delay(other).map(delay).ok_or_else(|| {
            format!("unknown outcome `{text}`: expected ack, drop, retry or retry_after")
        }),
        (_, Some(_)) => Err(format!("`after_ms` goes with `retry_after`, not `{text}`")),
    }
}

/// The delay of `retry_after(500ms)`.
fn written_delay(text: &str) -> Option<u64> {
    let inner = text.strip_prefix("retry_after(")?.strip_suffix(')')?;
    inner.trim().strip_suffix("ms")?.trim().parse().ok()
}

impl PublishEntry {
    fn expected(self, entry: usize) -> Result<ExpectedPublish, String> {
        let payload = PayloadFields {
            data: self.data,
            data_base64: self.data_base64,
            json: self.json,
        }
        .payload()?;
        Ok(ExpectedPublish {
            entry,
            stream: self.stream,
            record: self.record,
            subscription: self.subscription,
            payload,
            partition_key: self.partition_key,
            headers: self.headers,
        })
    }
}

impl CheckpointEntry {
    fn expected(self) -> ExpectedCheckpoint {
        ExpectedCheckpoint {
            subscription: self.subscription,
            shard: self.shard,
            at: self.at.map(PositionEntry::position),
            held_at: self.held_at.map(PositionEntry::position),
        }
    }
}

impl PositionEntry {
    fn position(self) -> Position {
        match self {
            Self::Number(0) => Position::None,
            Self::Number(n) => Position::Record(n),
            Self::Text(text) if text.eq_ignore_ascii_case("none") => Position::None,
            Self::Text(text) => Position::Sequence(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_toml(text: &str) -> Result<Expectations, String> {
        let file: File = toml::from_str(text).map_err(|e| one_line(&e.to_string()))?;
        file.into_expectations()
    }

    #[test]
    fn outcomes_are_read_in_both_spellings() {
        let delay = Outcome::RetryAfter(Duration::from_millis(500));
        assert_eq!(parse_outcome("ack", None), Ok(Outcome::Ack));
        assert_eq!(parse_outcome("Retry", None), Ok(Outcome::Retry));
        assert_eq!(parse_outcome("retry-after", Some(500)), Ok(delay));
        assert_eq!(parse_outcome("retry_after(500ms)", None), Ok(delay));
        for bad in [("ak", None), ("retry_after", None), ("ack", Some(5))] {
            assert!(parse_outcome(bad.0, bad.1).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_file_reads_into_expectations() -> Result<(), String> {
        let expect = parse_toml(
            "[[record]]\noutcome = \"ack\"\n[[publish]]\nstream = \"s\"\njson = { id = 1 }\n\
             [[checkpoint]]\nsubscription = \"book\"\nat = 2\nheld_at = \"none\"\n",
        )?;
        assert_eq!(expect.records[0].outcome, Outcome::Ack);
        assert!(expect.publishes[0].payload.matches(br#"{ "id": 1 }"#));
        assert_eq!(expect.checkpoints[0].at, Some(Position::Record(2)));
        assert_eq!(expect.checkpoints[0].held_at, Some(Position::None));
        Ok(())
    }

    #[test]
    fn entries_may_name_their_record_and_subscriber() -> Result<(), String> {
        let expect = parse_toml(
            "[[record]]\nnumber = 2\nsubscriber = \"audit\"\noutcome = \"drop\"\n\
             [[refused]]\nrecord = 2\nstream = \"booked\"\nreason = \"stream_not_found\"\n",
        )?;
        let record = &expect.records[0];
        assert_eq!(
            (record.entry, record.number, record.subscription.as_deref()),
            (1, Some(2), Some("audit"))
        );
        let refused = &expect.refused[0];
        assert_eq!(refused.reason.as_deref(), Some("stream-not-found"));
        assert_eq!(
            (refused.record, refused.stream.as_str()),
            (Some(2), "booked")
        );
        let unknown = parse_toml("[[refused]]\nstream = \"s\"\nreason = \"gone\"\n");
        assert!(unknown.is_err_and(|e| e.starts_with("[[refused]] 1: unknown reason `gone`")));
        let zero = parse_toml("[[record]]\nnumber = 0\noutcome = \"ack\"\n");
        assert!(zero.is_err_and(|e| e.contains("counts records from 1")));
        Ok(())
    }

    #[test]
    fn a_bad_entry_is_named() {
        let unknown = parse_toml("[[record]]\noutcom = \"ack\"\n");
        assert!(unknown.is_err_and(|e| e.contains("outcom") && e.contains("line 2")));
        let second = parse_toml("[[record]]\noutcome = \"ack\"\n[[record]]\noutcome = \"nak\"\n");
        assert!(second.is_err_and(|e| e.starts_with("[[record]] 2: unknown outcome `nak`")));
    }
}
