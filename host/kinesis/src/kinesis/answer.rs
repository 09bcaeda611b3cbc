//! A GetRecords answer read straight into deliveries.
//!
//! The SDK's deserializer builds a `Record` per record (its sequence number, key, data and
//! timestamps each decoded through the SDK's JSON tokenizer) that the reader then takes apart
//! again. Reading the JSON here into two buffers per answer (the strings, the decoded data)
//! that the deliveries are slices of, the host spends about a quarter less CPU per record read
//! (`kinesis_cpu`, see `docs/benchmarks.md`) and allocates nothing per record. What the reader
//! needs besides the records (the next iterator, the lag, the child shards of a closed shard)
//! is handed back to the SDK as a body of its own, so the SDK's output keeps every field it
//! had.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::str::Utf8Error;

use aws_smithy_types::DateTime;
use bytes::Bytes;
use ruststream_runtime::{Delivery, record::Text};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

/// An answer taken apart: its records as deliveries, and the rest for the SDK.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The records, in shard order.
    pub deliveries: Vec<Delivery>,
    /// The answer without its records (`"Records":[]`), every other field as it was.
    pub rest: Vec<u8>,
}

/// Why an answer was left to the SDK.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AnswerError {
    /// Not UTF-8, as JSON must be.
    #[error("not UTF-8: {0}")]
    NotUtf8(#[from] Utf8Error),
    /// Not the JSON shape of a GetRecords answer.
    #[error("not a GetRecords answer: {0}")]
    Shape(#[from] serde_json::Error),
    /// A record whose `Data` is not base64.
    #[error("record {sequence_number}: its data is not base64: {source}")]
    Data {
        sequence_number: String,
        source: base64_simd::Error,
    },
}

/// The answer's top level: its records, and every other field as it came. (Not serde's
/// `flatten`, which would buffer the whole answer, records included, before reading it.)
struct Wire<'a> {
    records: Vec<WireRecord<'a>>,
    rest: Map<String, Value>,
}

impl<'de> Deserialize<'de> for Wire<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(WireVisitor)
    }
}

struct WireVisitor;

impl<'de> Visitor<'de> for WireVisitor {
    type Value = Wire<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a GetRecords answer")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Wire<'de>, A::Error> {
        let mut records = None;
        let mut rest = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "Records" {
                records = Some(map.next_value()?);
            } else {
                rest.insert(key, map.next_value()?);
            }
        }
        let records = records.ok_or_else(|| de::Error::missing_field("Records"))?;
        Ok(Wire { records, rest })
    }
}

#[derive(Deserialize)]
struct WireRecord<'a> {
    #[serde(rename = "SequenceNumber", borrow)]
    sequence_number: Cow<'a, str>,
    #[serde(rename = "ApproximateArrivalTimestamp", default)]
    arrival: Option<f64>,
    #[serde(rename = "Data", borrow)]
    data: Cow<'a, str>,
    // A `Cow` of its own, not in an `Option`: serde borrows only a `Cow` field itself.
    #[serde(rename = "PartitionKey", borrow, default)]
    partition_key: Cow<'a, str>,
}

/// Reads a GetRecords answer's body. The deliveries share two buffers, made once per answer:
/// one holds every record's sequence number and key, the other every record's decoded data.
/// Nothing is allocated per record, and the body itself (its base64 a third larger than the
/// data it carries) is not kept.
///
/// # Errors
/// When the body is not UTF-8, or not a GetRecords answer with a `Records` list, or a record
/// lacks its sequence number or data, or its data is not base64. The caller then leaves the
/// body to the SDK, which reports it its own way.
pub(crate) fn read(body: &[u8]) -> Result<Answer, AnswerError> {
    // From a `str`, serde_json does not check each string's UTF-8 again.
    let wire: Wire<'_> = serde_json::from_str(std::str::from_utf8(body)?)?;
    let payloads = Payloads::decode(&wire.records)?;
    let strings = Strings::copy(&wire.records);
    let deliveries = wire
        .records
        .iter()
        .zip(strings.spans)
        .zip(payloads.spans)
        .map(|((record, (sequence, key)), payload)| {
            Delivery::from_stream(
                strings.all.slice(sequence),
                strings.all.slice(key),
                arrival_ms(record.arrival),
                payloads.all.slice(payload),
            )
        })
        .collect();
    let mut rest = wire.rest;
    rest.insert("Records".to_owned(), Value::Array(Vec::new()));
    Ok(Answer {
        deliveries,
        rest: serde_json::to_vec(&rest)?,
    })
}

/// Every record's data, decoded into one buffer.
struct Payloads {
    all: Bytes,
    spans: Vec<Range<usize>>,
}

impl Payloads {
    fn decode(records: &[WireRecord<'_>]) -> Result<Self, AnswerError> {
        // Base64 is 4 bytes for 3: the buffer is sized once.
        let size = records.iter().map(|r| r.data.len() / 4 * 3).sum();
        let mut all = Vec::with_capacity(size);
        let mut spans = Vec::with_capacity(records.len());
        for record in records {
            let start = all.len();
            // The engine the SDK's own `base64::decode` uses: both paths accept the same data.
            if let Err(source) = base64_simd::STANDARD.decode_append(&*record.data, &mut all) {
                return Err(AnswerError::Data {
                    sequence_number: record.sequence_number.to_string(),
                    source,
                });
            }
            spans.push(start..all.len());
        }
        Ok(Self {
            all: Bytes::from(all),
            spans,
        })
    }
}

/// Every record's sequence number and key, in one buffer.
struct Strings {
    all: Text,
    /// Per record, the sequence number's span and the key's.
    spans: Vec<(Range<usize>, Range<usize>)>,
}

impl Strings {
    fn copy(records: &[WireRecord<'_>]) -> Self {
        let size = records
            .iter()
            .map(|r| r.sequence_number.len() + r.partition_key.len())
            .sum();
        let mut all = String::with_capacity(size);
        let mut push = |text: &str| {
            let start = all.len();
            all.push_str(text);
            start..all.len()
        };
        let spans = records
            .iter()
            .map(|r| (push(&r.sequence_number), push(&r.partition_key)))
            .collect();
        Self {
            all: Text::from(all),
            spans,
        }
    }
}

/// As the SDK reads an epoch-seconds timestamp, so both paths agree to the millisecond.
fn arrival_ms(seconds: Option<f64>) -> u64 {
    seconds
        .filter(|secs| secs.is_finite())
        .and_then(|secs| DateTime::from_secs_f64(secs).to_millis().ok())
        .map_or(0, |ms| ms.max(0) as u64)
}

/// The record as delivered, its strings and data moved out of the SDK's answer, not copied.
pub(super) fn delivery(record: aws_sdk_kinesis::types::Record) -> Delivery {
    let arrival_ms = record
        .approximate_arrival_timestamp()
        .and_then(|t| t.to_millis().ok())
        .map_or(0, |ms| ms.max(0) as u64);
    Delivery::from_stream(
        record.sequence_number.into(),
        record.partition_key.unwrap_or_default().into(),
        arrival_ms,
        record.data.into_inner().into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        aws_smithy_types::base64::encode(bytes)
    }

    #[test]
    fn records_become_deliveries_and_the_rest_stays() {
        // Escapes in a key (as JSON may send them), a timestamp in exponent form, a record
        // without a timestamp, and the child shards of a closed shard.
        let body = format!(
            r#"{{"Records":[
                {{"SequenceNumber":"4960","ApproximateArrivalTimestamp":1.767225600123E9,
                  "Data":"{}","PartitionKey":"k\"ey\u00e9","EncryptionType":"NONE"}},
                {{"SequenceNumber":"4961","Data":"","PartitionKey":"k"}}],
              "NextShardIterator":"AAAA/+==","MillisBehindLatest":42,
              "ChildShards":[{{"ShardId":"shardId-000000000002","ParentShards":["a"],
                "HashKeyRange":{{"StartingHashKey":"0","EndingHashKey":"9"}}}}]}}"#,
            b64(br#"{"id":1}"#)
        );
        let answer = read(body.as_bytes()).expect("an answer");
        let [first, second] = &answer.deliveries[..] else {
            panic!("{:?}", answer.deliveries);
        };
        assert_eq!(first.sequence_number, "4960");
        assert_eq!(first.partition_key, "k\"ey\u{e9}");
        assert_eq!(&first.payload[..], br#"{"id":1}"#);
        // The SDK's own reading of that timestamp (its float lands a millisecond short).
        assert_eq!(first.arrival_ms, 1_767_225_600_122);
        assert_eq!((second.payload.len(), second.arrival_ms), (0, 0));
        let rest: Value = serde_json::from_slice(&answer.rest).expect("JSON");
        let mut expected: Value = serde_json::from_str(&body).expect("JSON");
        expected["Records"] = Value::Array(Vec::new());
        assert_eq!(rest, expected);
    }

    #[test]
    fn records_share_two_buffers_instead_of_three_each() {
        let records: Vec<String> = (0..3)
            .map(|i| {
                format!(
                    r#"{{"SequenceNumber":"49{i}","Data":"{}","PartitionKey":"key-{i}"}}"#,
                    b64(format!("payload {i}").as_bytes())
                )
            })
            .collect();
        let body = format!(r#"{{"Records":[{}]}}"#, records.join(","));
        let answer = read(body.as_bytes()).expect("an answer");
        let mut strings = Vec::new();
        let mut payloads = Vec::new();
        for (i, delivery) in answer.deliveries.iter().enumerate() {
            assert_eq!(delivery.sequence_number, format!("49{i}"));
            assert_eq!(delivery.partition_key, format!("key-{i}"));
            assert_eq!(delivery.payload, format!("payload {i}"));
            strings.extend([&delivery.sequence_number, &delivery.partition_key]);
            payloads.push(&delivery.payload);
        }
        // Each kind laid end to end in one buffer, in record order.
        let end_to_end = |parts: Vec<&[u8]>| {
            parts
                .windows(2)
                .all(|pair| pair[0].as_ptr_range().end == pair[1].as_ptr())
        };
        assert!(end_to_end(
            strings.iter().map(|s| &s.as_bytes()[..]).collect()
        ));
        assert!(end_to_end(payloads.iter().map(|p| &p[..]).collect()));
        let body_range = body.as_bytes().as_ptr_range();
        assert!(
            !body_range.contains(&strings[0].as_ptr()),
            "the body is not kept"
        );
    }

    #[test]
    fn what_is_not_an_answer_is_left_to_the_sdk() {
        for body in [
            &b"not json"[..],
            br#"{"NextShardIterator":"x"}"#,
            br#"{"Records":null}"#,
            br#"{"Records":[{"Data":"AA=="}]}"#,
        ] {
            let error = read(body).expect_err("refused");
            assert!(matches!(error, AnswerError::Shape(_)), "{error}");
        }
        let error = read(b"{\"Records\":[\xff]}").expect_err("refused");
        assert!(matches!(error, AnswerError::NotUtf8(_)), "{error}");
        let error =
            read(br#"{"Records":[{"SequenceNumber":"7","Data":"!!"}]}"#).expect_err("refused");
        assert!(
            error
                .to_string()
                .starts_with("record 7: its data is not base64"),
            "{error}"
        );
    }
}
