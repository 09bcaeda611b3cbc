//! What happened against what was expected: one check per expectation, each with both sides
//! written out for the report.

use std::collections::BTreeMap;

use base64::Engine as _;
use ruststream_common::escape::escape_controls;
use ruststream_runtime::publish::{PublishedBy, RefusedPublish};
use ruststream_runtime::testing::SHARD_ID;

use super::expect::{
    Expectations, ExpectedCheckpoint, ExpectedPublish, ExpectedRecord, ExpectedRefusal, Position,
};
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

/// Checks every expectation against what was observed, and every refused publish against
/// the refusals expected.
///
/// # Errors
/// A message naming the entry of the expectations file that does not fit the records or the
/// component: a count of positional `[[record]]` entries other than the records', two
/// entries about one record's call by one subscription, a subscription the component does
/// not have or that does not read the record's stream, a record number past the last record.
pub(crate) fn judge(
    records: &[InputRecord],
    expected: &Expectations,
    observed: &Observed,
) -> Result<Vec<Check>, String> {
    let mut checks = record_checks(records, &expected.records, observed)?;
    checks.extend(publish_checks(records, &expected.publishes, observed)?);
    checks.extend(refusal_checks(records, &expected.refused, observed)?);
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
    let positional = expected.iter().filter(|e| e.number.is_none()).count();
    if positional != 0 && positional != records.len() {
        return Err(format!(
            "{positional} [[record]] entries for {} records: give one per record, in order \
             (an entry with `number` is about that record alone)",
            records.len()
        ));
    }
    // How many positional entries were met so far: the next one is about the record after.
    let mut positional_seen = 0;
    // Each (record, subscription) is checked once: which entry checks it.
    let mut checked: BTreeMap<(usize, String), usize> = BTreeMap::new();
    let mut checks = Vec::new();
    for entry in expected {
        let about = |e: String| format!("[[record]] {}: {e}", entry.entry);
        let number = entry.number.unwrap_or_else(|| {
            positional_seen += 1;
            positional_seen
        });
        let (Some(record), Some(sent)) = (records.get(number - 1), observed.sent.get(number - 1))
        else {
            return Err(about(format!(
                "record {number}: there are {} records",
                records.len()
            )));
        };
        for subscriber in subscribers_of(record, entry, sent, observed).map_err(about)? {
            let key = (number, subscriber.clone());
            if let Some(other) = checked.insert(key, entry.entry) {
                return Err(about(format!(
                    "record {number} on `{}` is already expected by [[record]] {other}: give \
                     one outcome per record and subscription",
                    escape_controls(&subscriber)
                )));
            }
            let check = record_check(record, entry, sent, &subscriber, observed);
            checks.push((number, check));
        }
    }
    // In the records' order, each record's subscriptions in the order the file gives them.
    checks.sort_by_key(|(number, _)| *number);
    Ok(checks.into_iter().map(|(_, check)| check).collect())
}

/// The subscriptions whose call on `record` is checked: the one the entry names, else the
/// one the record names, else every subscription reading the record's stream.
fn subscribers_of(
    record: &InputRecord,
    expected: &ExpectedRecord,
    sent: &Sent,
    observed: &Observed,
) -> Result<Vec<String>, String> {
    let readers: Vec<_> = (observed.subscriptions.iter())
        .filter(|s| s.stream == sent.stream)
        .map(|s| s.name.clone())
        .collect();
    let named = expected
        .subscription
        .as_ref()
        .or(record.subscription.as_ref());
    let Some(name) = named else {
        if readers.is_empty() {
            return Err(format!(
                "no subscription reads `{}`, where record {} went",
                escape_controls(&sent.stream),
                record.number
            ));
        }
        return Ok(readers);
    };
    // By its name, or by the stream only it reads.
    let state = subscription(name, observed)?;
    if state.stream == sent.stream {
        return Ok(vec![state.name.clone()]);
    }
    Err(format!(
        "subscription `{}` reads `{}`, not `{}`, where record {} went",
        escape_controls(&state.name),
        escape_controls(&state.stream),
        escape_controls(&sent.stream),
        record.number
    ))
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
            "record {} (line {}, key {}, sequence {}) on `{}`",
            record.number,
            record.line,
            escape_controls(&sent.key),
            sent.sequence,
            escape_controls(subscriber)
        ),
        expected: expected.outcome.to_string(),
        got: got.map_or_else(|| "no call".to_owned(), |outcome| outcome.to_string()),
        passed: got == Some(expected.outcome),
        sequence: Some(sent.sequence.clone()),
    }
}

/// The publishes of each stream, expected against written, position by position.
fn publish_checks(
    records: &[InputRecord],
    expected: &[ExpectedPublish],
    observed: &Observed,
) -> Result<Vec<Check>, String> {
    // Who each entry expects to have published it, checked against the component first.
    let mut publishers = BTreeMap::new();
    for entry in expected {
        let about = |e: String| format!("[[publish]] {}: {e}", entry.entry);
        if let Some(number) = entry.record.filter(|n| *n > records.len()) {
            return Err(about(format!(
                "record {number}: there are {} records",
                records.len()
            )));
        }
        if let Some(name) = &entry.subscription {
            let state = subscription(name, observed).map_err(about)?;
            publishers.insert(entry.entry, state.name.clone());
        }
    }
    let written = &observed.written;
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
            let (wanted, got) = (wanted.get(position).copied(), got.get(position).copied());
            let publisher = wanted
                .and_then(|w| publishers.get(&w.entry))
                .map(String::as_str);
            let passed = matches!((wanted, got), (Some(w), Some(g))
                if publish_matches(w, publisher, g, &observed.sent));
            let origin = got.and_then(|g| g.by.as_ref()).map(|by| {
                let (origin, whom) = (publish_origin(by, &observed.sent), by.subscriber.as_deref());
                let from = describe_origin(&origin, records, &observed.sent);
                format!(" from {from} {}", crate::streams::by_whom(whom))
            });
            checks.push(Check {
                subject: format!("publish {} to `{}`", position + 1, escape_controls(stream)),
                expected: wanted.map_or_else(|| "nothing".to_owned(), describe_expected),
                got: got.map_or_else(
                    || "nothing".to_owned(),
                    |g| describe_written(g, wanted, origin.as_deref()),
                ),
                passed,
                sequence: None,
            });
        }
    }
    Ok(checks)
}

/// Whether `got` is `wanted`: payload, and the key, headers, record and subscription it gives
/// (`publisher`, the subscription's name, resolved).
fn publish_matches(
    wanted: &ExpectedPublish,
    publisher: Option<&str>,
    got: &Written,
    sent: &[Sent],
) -> bool {
    let key = wanted
        .partition_key
        .as_ref()
        .is_none_or(|key| *key == got.key);
    let headers = wanted
        .headers
        .as_ref()
        .is_none_or(|headers| *headers == header_map(got));
    let by = got.by.as_ref();
    let subscriber =
        publisher.is_none_or(|name| by.and_then(|b| b.subscriber.as_deref()) == Some(name));
    let record = wanted.record.is_none_or(|number| {
        by.map(|b| publish_origin(b, sent)).and_then(|o| o.number()) == Some(number)
    });
    key && headers && subscriber && record && wanted.payload.matches(&got.payload)
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
    if let Some(record) = wanted.record {
        text.push_str(&format!(" from record {record}"));
    }
    if let Some(subscription) = &wanted.subscription {
        text.push_str(&format!(" on `{}`", escape_controls(subscription)));
    }
    text
}

/// A written record, with the key, headers and who published it (`origin`) when the
/// expectation checks them (or when nothing was expected, to show everything about it).
fn describe_written(
    got: &Written,
    wanted: Option<&ExpectedPublish>,
    origin: Option<&str>,
) -> String {
    let mut text = shown_payload(&got.payload);
    if wanted.is_none_or(|w| w.partition_key.is_some()) {
        text.push_str(&format!(" key {}", escape_controls(&got.key)));
    }
    if wanted.is_none_or(|w| w.headers.is_some()) {
        text.push_str(&format!(" headers {:?}", header_map(got)));
    }
    let checks_who = wanted.is_none_or(|w| w.record.is_some() || w.subscription.is_some());
    if let Some(origin) = origin.filter(|_| checks_who) {
        text.push_str(origin);
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
    let shown = escape_controls(name);
    let mut on_stream = all.iter().filter(|s| s.stream == name);
    match (on_stream.next(), on_stream.next()) {
        (Some(only), None) => Ok(only),
        (Some(_), Some(_)) => Err(format!(
            "`{shown}` is read by several subscriptions: name one"
        )),
        (None, _) => {
            let names: Vec<_> = all.iter().map(|s| escape_controls(&s.name)).collect();
            Err(format!(
                "no subscription `{shown}` in the component (it has: {})",
                names.join(", ")
            ))
        }
    }
}

/// Where a refused publish came from: an input record (its index in the records, the call on
/// it or on a copy of it), another record (its sequence number), or no record at all.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Origin {
    Input(usize),
    Other(String),
    Outside,
}

/// The refused publishes, one group per subscription, origin, stream and reason (a record's
/// copies add to its own), with how many and the first refusal's error.
fn refusal_groups(observed: &Observed) -> Vec<(Origin, u64, &RefusedPublish)> {
    let mut groups: Vec<(Origin, u64, &RefusedPublish)> = Vec::new();
    for refused in &observed.refused {
        let origin = origin_of(refused, &observed.sent);
        let same = groups.iter_mut().find(|(o, _, r)| {
            *o == origin
                && r.subscriber == refused.subscriber
                && r.stream == refused.stream
                && r.reason() == refused.reason()
        });
        match same {
            Some((_, count, _)) => *count += refused.count,
            None => groups.push((origin, refused.count, refused)),
        }
    }
    groups
}

impl Origin {
    /// Its number as the expectations file gives it: the record's, or 0 outside any record.
    fn number(&self) -> Option<usize> {
        match self {
            Self::Input(index) => Some(index + 1),
            Self::Outside => Some(0),
            Self::Other(_) => None,
        }
    }
}

fn origin_of(refused: &RefusedPublish, sent: &[Sent]) -> Origin {
    origin_in(
        refused.sequence_number.as_deref(),
        refused.chain.as_deref(),
        sent,
    )
}

fn publish_origin(by: &PublishedBy, sent: &[Sent]) -> Origin {
    origin_in(by.sequence_number.as_deref(), by.chain.as_deref(), sent)
}

/// Where a publish made while a call was on record `sequence` (a copy of the record `chain`
/// names, if any) came from.
fn origin_in(sequence: Option<&str>, chain: Option<&str>, sent: &[Sent]) -> Origin {
    let Some(sequence) = sequence else {
        return Origin::Outside;
    };
    // A copy names the record its chain started from as `shard/sequence`.
    let chain = chain.and_then(|c| c.rsplit_once('/'));
    let started = chain.map(|(_, sequence)| sequence);
    let input = sent
        .iter()
        .position(|s| s.sequence == sequence || Some(s.sequence.as_str()) == started);
    input.map_or_else(|| Origin::Other(sequence.to_owned()), Origin::Input)
}

/// One check per group of refused publishes (passed when an entry expects it), and one per
/// `[[refused]]` entry that no refusal matched.
fn refusal_checks(
    records: &[InputRecord],
    expected: &[ExpectedRefusal],
    observed: &Observed,
) -> Result<Vec<Check>, String> {
    let subscribers = expected
        .iter()
        .map(|entry| {
            let about = |e: String| format!("[[refused]] {}: {e}", entry.entry);
            if let Some(number) = entry.record.filter(|n| *n > records.len()) {
                return Err(about(format!(
                    "record {number}: there are {} records",
                    records.len()
                )));
            }
            let name = entry.subscription.as_deref();
            name.map(|name| subscription(name, observed).map(|s| s.name.clone()))
                .transpose()
                .map_err(about)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut matched = vec![false; expected.len()];
    let mut checks = Vec::new();
    for (origin, count, refused) in refusal_groups(observed) {
        let fits = |(entry, subscriber): (&ExpectedRefusal, &Option<String>)| {
            entry.stream == refused.stream
                && entry.record.is_none_or(|n| Some(n) == origin.number())
                && subscriber
                    .as_ref()
                    .is_none_or(|s| Some(s) == refused.subscriber.as_ref())
                && entry
                    .reason
                    .as_deref()
                    .is_none_or(|r| r == refused.reason())
                && entry.count.is_none_or(|c| c == count)
        };
        // Every entry it fits is met by it.
        let mut expected_by_one = false;
        for (i, pair) in expected.iter().zip(&subscribers).enumerate() {
            if fits(pair) {
                matched[i] = true;
                expected_by_one = true;
            }
        }
        let grouped = RefusedPublish {
            count,
            ..refused.clone()
        };
        checks.push(Check {
            subject: format!(
                "publish refused, from {} {}",
                describe_origin(&origin, records, &observed.sent),
                crate::streams::by_whom(refused.subscriber.as_deref())
            ),
            expected: "no refused publish".to_owned(),
            got: crate::streams::refusal(&grouped),
            passed: expected_by_one,
            sequence: match &origin {
                Origin::Input(index) => observed.sent.get(*index).map(|s| s.sequence.clone()),
                Origin::Other(sequence) => Some(sequence.clone()),
                Origin::Outside => None,
            },
        });
    }
    for (entry, _) in expected.iter().zip(matched).filter(|(_, met)| !met) {
        checks.push(Check {
            subject: format!("refused publish of [[refused]] {}", entry.entry),
            expected: describe_refusal(entry),
            got: "no such refused publish".to_owned(),
            passed: false,
            sequence: None,
        });
    }
    for (subscriber, record, count) in &observed.unlisted {
        let origin = match record {
            Some(sequence) => match observed.sent.iter().position(|s| s.sequence == *sequence) {
                Some(index) => Origin::Input(index),
                None => Origin::Other(sequence.clone()),
            },
            None => Origin::Outside,
        };
        checks.push(Check {
            subject: format!(
                "publishes refused, from {} {}",
                describe_origin(&origin, records, &observed.sent),
                crate::streams::by_whom(subscriber.as_deref())
            ),
            expected: "no refused publish".to_owned(),
            got: format!(
                "{count} more, to other streams or for other reasons than those above (not \
                 listed one by one)"
            ),
            passed: false,
            sequence: None,
        });
    }
    Ok(checks)
}

/// `record 2 (line 3, key 2, sequence ...)`, a sequence number that is no input record's,
/// or no record at all.
fn describe_origin(origin: &Origin, records: &[InputRecord], sent: &[Sent]) -> String {
    match origin {
        Origin::Input(index) => match (records.get(*index), sent.get(*index)) {
            (Some(record), Some(sent)) => format!(
                "record {} (line {}, key {}, sequence {})",
                record.number,
                record.line,
                escape_controls(&sent.key),
                sent.sequence
            ),
            _ => format!("record {}", index + 1),
        },
        Origin::Other(sequence) => format!("sequence {sequence} (not an input record)"),
        Origin::Outside => "outside any record".to_owned(),
    }
}

/// What a `[[refused]]` entry asks for.
fn describe_refusal(entry: &ExpectedRefusal) -> String {
    let mut text = format!("to `{}`", escape_controls(&entry.stream));
    if let Some(reason) = &entry.reason {
        text.push_str(&format!(": {reason}"));
    }
    if let Some(record) = entry.record {
        text.push_str(&format!(", from record {record}"));
    }
    if let Some(subscription) = &entry.subscription {
        text.push_str(&format!(" on `{}`", escape_controls(subscription)));
    }
    if let Some(count) = entry.count {
        text.push_str(&format!(", {count} times"));
    }
    text
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

#[cfg(test)]
mod tests {
    use ruststream_runtime::Outcome;
    use ruststream_runtime::publish::PublishError;
    use ruststream_runtime::testing::ExistingStreams;

    use super::super::records;
    use super::*;

    /// Two records on `ledger`, read by `book` and `audit`; `other` reads `orders`.
    fn observed(refused: Vec<RefusedPublish>) -> (Vec<InputRecord>, Observed) {
        let records = records::parse("{\"json\": 1}\n{\"json\": 2}\n").expect("two records");
        let state = |name: &str, stream: &str| SubscriptionState {
            name: name.into(),
            stream: stream.into(),
            checkpoint: None,
            held_at: None,
            pending_copies: 0,
        };
        let sent = |sequence: &str, key: &str| Sent {
            stream: "ledger".into(),
            sequence: sequence.into(),
            key: key.into(),
        };
        let observed = Observed {
            app: "dispatch 0.1.0".into(),
            subscriptions: vec![
                state("book", "ledger"),
                state("audit", "ledger"),
                state("other", "orders"),
            ],
            sent: vec![sent("11", "1"), sent("12", "2")],
            calls: Vec::new(),
            written: Vec::new(),
            refused,
            unlisted: Vec::new(),
            existing: ExistingStreams::Any,
            logs: Vec::new(),
        };
        (records, observed)
    }

    fn entry(entry: usize, number: Option<usize>, subscription: Option<&str>) -> ExpectedRecord {
        ExpectedRecord {
            entry,
            number,
            subscription: subscription.map(str::to_owned),
            outcome: Outcome::Ack,
        }
    }

    fn judged(records: Vec<ExpectedRecord>) -> Result<Vec<String>, String> {
        let (input, observed) = observed(Vec::new());
        let expected = Expectations {
            records,
            ..Expectations::default()
        };
        let checks = judge(&input, &expected, &observed)?;
        Ok(checks.into_iter().map(|c| c.subject).collect())
    }

    #[test]
    fn an_entry_without_a_subscription_is_checked_for_every_reader_of_the_stream() {
        let subjects = judged(vec![
            entry(1, None, None),
            entry(2, None, Some("book")),
            entry(3, Some(2), Some("audit")),
        ]);
        let on: Vec<_> = (subjects.expect("fits").iter())
            .map(|s| {
                let record = s.split(' ').nth(1).unwrap_or_default().to_owned();
                let subscriber = s.rsplit(' ').next().unwrap_or_default().to_owned();
                format!("{record} {subscriber}")
            })
            .collect();
        assert_eq!(on, ["1 `book`", "1 `audit`", "2 `book`", "2 `audit`"]);
    }

    #[test]
    fn entries_that_do_not_fit_are_named() {
        let cases = [
            (
                vec![entry(1, None, None)],
                "1 [[record]] entries for 2 records",
            ),
            (
                vec![entry(1, Some(1), None), entry(2, Some(1), Some("book"))],
                "[[record]] 2: record 1 on `book` is already expected by [[record]] 1",
            ),
            (
                vec![entry(1, Some(2), Some("audt"))],
                "[[record]] 1: no subscription `audt` in the component (it has: book, audit, other)",
            ),
            (
                vec![entry(1, Some(2), Some("other"))],
                "[[record]] 1: subscription `other` reads `orders`, not `ledger`, where record 2 went",
            ),
            (
                vec![entry(1, Some(3), None)],
                "[[record]] 1: record 3: there are 2 records",
            ),
        ];
        for (entries, says) in cases {
            let error = judged(entries).err().unwrap_or_default();
            assert!(error.starts_with(says), "{says}: {error}");
        }
    }

    #[test]
    fn a_copys_refusals_count_as_its_records_and_each_must_be_expected() {
        let refusal = |sequence: &str, chain: Option<&str>| RefusedPublish {
            subscriber: Some("book".into()),
            sequence_number: Some(sequence.into()),
            chain: chain.map(str::to_owned),
            stream: "booked".into(),
            error: PublishError::StreamNotFound("booked".into()),
            count: 1,
        };
        let (input, observed) = observed(vec![
            refusal("12", None),
            refusal("13", Some("shardId-000000000000/12")),
            refusal("99", None),
        ]);
        let expected = Expectations {
            refused: vec![ExpectedRefusal {
                entry: 1,
                record: Some(2),
                subscription: Some("book".into()),
                stream: "booked".into(),
                reason: Some("stream-not-found".into()),
                count: Some(2),
            }],
            ..Expectations::default()
        };
        let checks = judge(&input, &expected, &observed).expect("fits");
        let seen: Vec<_> = (checks.iter())
            .map(|c| (c.subject.as_str(), c.passed, c.got.as_str()))
            .collect();
        let booked = "to `booked`: stream-not-found (stream `booked` does not exist)";
        assert_eq!(
            seen,
            [
                (
                    "publish refused, from record 2 (line 2, key 2, sequence 12) on `book`",
                    true,
                    format!("{booked}, 2 times").as_str()
                ),
                (
                    "publish refused, from sequence 99 (not an input record) on `book`",
                    false,
                    booked
                ),
            ]
        );
    }
}
