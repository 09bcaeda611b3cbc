//! What happened against what was expected: one check per expectation, each with both sides
//! written out for the report.

use std::collections::BTreeMap;

use base64::Engine as _;
use ruststream_runtime::{escape::escape_controls, testing::SHARD_ID};

use super::expect::{Expectations, ExpectedCheckpoint, ExpectedPublish, ExpectedRecord, Position};
use super::records::InputRecord;
use super::run::{Observed, Sent, SubscriptionState, Written};

/// How much of a payload a report shows.
const SHOWN_PAYLOAD: usize = 200;

/// One expectation, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    /// What it is about: `record 3 (line 3, key 3, sequence ...) on book`.
    pub subject: String,
    /// What the file expects.
    pub expected: String,
    /// What happened.
    pub got: String,
    /// Whether the two agree.
    pub passed: bool,
    /// The sequence number of the input record it is about, whose log lines explain it.
    pub sequence: Option<String>,
}

/// Checks every expectation against what was observed.
///
/// # Errors
/// A message naming the entry of the expectations file that does not fit the records or the
/// component: a count of `[[record]]` entries other than the records', a subscription the
/// component does not have, a record number past the last record.
pub(crate) fn judge(
    records: &[InputRecord],
    expected: &Expectations,
    observed: &Observed,
) -> Result<Vec<Check>, String> {
    let mut checks = record_checks(records, &expected.records, observed)?;
    checks.extend(publish_checks(&expected.publishes, &observed.written));
    for (index, checkpoint) in expected.checkpoints.iter().enumerate() {
        let found = checkpoint_checks(checkpoint, observed)
            .map_err(|e| format!("[[checkpoint]] {}: {e}", index + 1))?;
        checks.extend(found);
    }
    Ok(checks)
}

fn record_checks(
    records: &[InputRecord],
    expected: &[ExpectedRecord],
    observed: &Observed,
) -> Result<Vec<Check>, String> {
    if expected.is_empty() {
        return Ok(Vec::new());
    }
    if expected.len() != records.len() {
        return Err(format!(
            "{} [[record]] entries for {} records: give one per record, in order",
            expected.len(),
            records.len()
        ));
    }
    let triples = records.iter().zip(expected).zip(&observed.sent);
    (triples.enumerate())
        .map(|(i, ((record, expected), sent))| {
            let subscriber = subscriber_of(record, expected, sent, observed)
                .map_err(|e| format!("[[record]] {}: {e}", i + 1))?;
            Ok(record_check(record, expected, sent, &subscriber, observed))
        })
        .collect()
}

/// The subscription whose call on `record` is checked: the one named, else the only one
/// reading its stream.
fn subscriber_of(
    record: &InputRecord,
    expected: &ExpectedRecord,
    sent: &Sent,
    observed: &Observed,
) -> Result<String, String> {
    let readers: Vec<_> = (observed.subscriptions.iter())
        .filter(|s| s.stream == sent.stream)
        .map(|s| s.name.clone())
        .collect();
    let named = expected
        .subscription
        .as_ref()
        .or(record.subscription.as_ref());
    match (named, readers.as_slice()) {
        (Some(name), _) if readers.contains(name) => Ok(name.clone()),
        (Some(name), _) => Err(format!("no subscription `{name}` reads `{}`", sent.stream)),
        (None, [only]) => Ok(only.clone()),
        (None, []) => Err(format!("no subscription reads `{}`", sent.stream)),
        (None, _) => Err(format!(
            "`{}` is read by {}: name the `subscription`",
            sent.stream,
            readers.join(", ")
        )),
    }
}

fn record_check(
    record: &InputRecord,
    expected: &ExpectedRecord,
    sent: &Sent,
    subscriber: &str,
    observed: &Observed,
) -> Check {
    let call = (observed.calls.iter())
        .find(|call| call.subscriber == subscriber && call.sequence_number == sent.sequence);
    let got = call.map(|call| call.outcome);
    Check {
        subject: format!(
            "record {} (line {}, key {}, sequence {}) on `{subscriber}`",
            record.number,
            record.line,
            escape_controls(&sent.key),
            sent.sequence
        ),
        expected: expected.outcome.to_string(),
        got: got.map_or_else(|| "no call".to_owned(), |outcome| outcome.to_string()),
        passed: got == Some(expected.outcome),
        sequence: Some(sent.sequence.clone()),
    }
}

/// The publishes of each stream, expected against written, position by position.
fn publish_checks(expected: &[ExpectedPublish], written: &[Written]) -> Vec<Check> {
    let mut streams: Vec<&str> = Vec::new();
    let names = expected.iter().map(|e| e.stream.as_str());
    for stream in names.chain(written.iter().map(|w| w.stream.as_str())) {
        if !streams.contains(&stream) {
            streams.push(stream);
        }
    }
    let mut checks = Vec::new();
    for stream in streams {
        let wanted: Vec<_> = expected.iter().filter(|e| e.stream == stream).collect();
        let got: Vec<_> = written.iter().filter(|w| w.stream == stream).collect();
        for position in 0..wanted.len().max(got.len()) {
            let (wanted, got) = (wanted.get(position), got.get(position));
            checks.push(publish_check(
                stream,
                position + 1,
                wanted.copied(),
                got.copied(),
            ));
        }
    }
    checks
}

fn publish_check(
    stream: &str,
    number: usize,
    wanted: Option<&ExpectedPublish>,
    got: Option<&Written>,
) -> Check {
    let passed = matches!((wanted, got), (Some(w), Some(g)) if publish_matches(w, g));
    Check {
        subject: format!("publish {number} to `{}`", escape_controls(stream)),
        expected: wanted.map_or_else(|| "nothing".to_owned(), describe_expected),
        got: got.map_or_else(|| "nothing".to_owned(), |g| describe_written(g, wanted)),
        passed,
        sequence: None,
    }
}

fn publish_matches(wanted: &ExpectedPublish, got: &Written) -> bool {
    let key = wanted
        .partition_key
        .as_ref()
        .is_none_or(|key| *key == got.key);
    let headers = wanted
        .headers
        .as_ref()
        .is_none_or(|headers| *headers == header_map(got));
    key && headers && wanted.payload.matches(&got.payload)
}

/// The headers as text (a value that is not UTF-8 is shown lossily, and so never equal to a
/// text the file gives).
fn header_map(got: &Written) -> BTreeMap<String, String> {
    (got.headers.iter())
        .map(|h| {
            (
                h.name.clone(),
                String::from_utf8_lossy(&h.value).into_owned(),
            )
        })
        .collect()
}

fn describe_expected(wanted: &ExpectedPublish) -> String {
    let mut text = shown_payload(&wanted.payload.to_bytes());
    if let Some(key) = &wanted.partition_key {
        text.push_str(&format!(" key {}", escape_controls(key)));
    }
    if let Some(headers) = &wanted.headers {
        text.push_str(&format!(" headers {headers:?}"));
    }
    text
}

/// A written record, with the key and headers when the expectation checks them (or when
/// nothing was expected, to show everything about it).
fn describe_written(got: &Written, wanted: Option<&ExpectedPublish>) -> String {
    let mut text = shown_payload(&got.payload);
    if wanted.is_none_or(|w| w.partition_key.is_some()) {
        text.push_str(&format!(" key {}", escape_controls(&got.key)));
    }
    if wanted.is_none_or(|w| w.headers.is_some()) {
        text.push_str(&format!(" headers {:?}", header_map(got)));
    }
    text
}

/// A payload as text when it is UTF-8 (escaped, cut short), else as base64.
fn shown_payload(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            let cut: String = text.chars().take(SHOWN_PAYLOAD).collect();
            let more = if cut.len() < text.len() { "..." } else { "" };
            format!("{}{more}", escape_controls(&cut))
        }
        Err(_) => format!(
            "base64 {}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        ),
    }
}

/// The checks of one `[[checkpoint]]` entry: where it stands and where it is held.
fn checkpoint_checks(
    expected: &ExpectedCheckpoint,
    observed: &Observed,
) -> Result<Vec<Check>, String> {
    let state = subscription(&expected.subscription, observed)?;
    if let Some(shard) = expected.shard.as_ref().filter(|s| *s != SHARD_ID) {
        return Err(format!(
            "no shard `{shard}`: in-process streams have one shard, `{SHARD_ID}`"
        ));
    }
    let mut checks = Vec::new();
    let sides = [
        ("checkpoint of", &expected.at, &state.checkpoint),
        ("record held by", &expected.held_at, &state.held_at),
    ];
    for (what, wanted, got) in sides {
        let Some(wanted) = wanted else { continue };
        let wanted = sequence_of(wanted, &observed.sent)?;
        checks.push(Check {
            subject: format!("{what} `{}` ({SHARD_ID})", state.name),
            expected: describe_position(wanted.as_deref(), &observed.sent),
            got: describe_position(got.as_deref(), &observed.sent),
            passed: wanted == *got,
            sequence: None,
        });
    }
    Ok(checks)
}

/// The subscription named `name`, or the only one reading stream `name`.
fn subscription<'a>(name: &str, observed: &'a Observed) -> Result<&'a SubscriptionState, String> {
    let all = &observed.subscriptions;
    if let Some(found) = all.iter().find(|s| s.name == name) {
        return Ok(found);
    }
    let mut on_stream = all.iter().filter(|s| s.stream == name);
    match (on_stream.next(), on_stream.next()) {
        (Some(only), None) => Ok(only),
        (Some(_), Some(_)) => Err(format!(
            "`{name}` is read by several subscriptions: name one"
        )),
        (None, _) => {
            let names: Vec<_> = all.iter().map(|s| s.name.as_str()).collect();
            Err(format!(
                "no subscription `{name}` in the component (it has: {})",
                names.join(", ")
            ))
        }
    }
}

/// The sequence number a position stands for.
fn sequence_of(position: &Position, sent: &[Sent]) -> Result<Option<String>, String> {
    match position {
        Position::None => Ok(None),
        Position::Sequence(sequence) => Ok(Some(sequence.clone())),
        Position::Record(number) => sent
            .get(number - 1)
            .map(|s| Some(s.sequence.clone()))
            .ok_or_else(|| format!("record {number}: there are {} records", sent.len())),
    }
}

/// `none`, `record 2 (sequence ...)`, or a sequence number that is no input record's.
fn describe_position(sequence: Option<&str>, sent: &[Sent]) -> String {
    let Some(sequence) = sequence else {
        return "none".to_owned();
    };
    match sent.iter().position(|s| s.sequence == sequence) {
        Some(index) => format!("record {} (sequence {sequence})", index + 1),
        None => format!("sequence {sequence} (a copy, not an input record)"),
    }
}
