//! A GetRecords answer read straight into deliveries.
//!
//! The SDK's deserializer builds a `Record` per record (its sequence number, key, data and
//! timestamps each decoded through the SDK's JSON tokenizer) that the reader then takes apart
//! again. Reading the JSON here, with strings borrowed from the body until they become the
//! delivery's own, the host spends about a quarter less CPU per record read (`kinesis_cpu`,
//! see `docs/notes.md`). What the reader needs besides the records (the next iterator, the
//! lag, the child shards of a closed shard) is handed back to the SDK as a body of its own,
//! so the SDK's output keeps every field it had.

use std::borrow::Cow;
use std::fmt;

use aws_smithy_types::DateTime;
use ruststream_runtime::Delivery;
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
    /// Not the JSON shape of a GetRecords answer.
    #[error("not a GetRecords answer: {0}")]
    Shape(#[from] serde_json::Error),
    /// A record whose `Data` is not base64.
    #[error("record {sequence_number}: its data is not base64: {source}")]
    Data {
        sequence_number: String,
        source: aws_smithy_types::base64::DecodeError,
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
    #[serde(rename = "PartitionKey", borrow, default)]
    partition_key: Option<Cow<'a, str>>,
}

/// Reads a GetRecords answer's body.
///
/// # Errors
/// When the body is not a GetRecords answer with a `Records` list, or a record lacks its
/// sequence number or data, or its data is not base64. The caller then leaves the body to the
/// SDK, which reports it its own way.
pub(crate) fn read(body: &[u8]) -> Result<Answer, AnswerError> {
    let wire: Wire<'_> = serde_json::from_slice(body)?;
    let mut deliveries = Vec::with_capacity(wire.records.len());
    for record in wire.records {
        deliveries.push(delivery(record)?);
    }
    let mut rest = wire.rest;
    rest.insert("Records".to_owned(), Value::Array(Vec::new()));
    Ok(Answer {
        deliveries,
        rest: serde_json::to_vec(&rest)?,
    })
}

fn delivery(record: WireRecord<'_>) -> Result<Delivery, AnswerError> {
    let data = match aws_smithy_types::base64::decode(&*record.data) {
        Ok(data) => data,
        Err(source) => {
            return Err(AnswerError::Data {
                sequence_number: record.sequence_number.into_owned(),
                source,
            });
        }
    };
    // As the SDK reads an epoch-seconds timestamp, so both paths agree to the millisecond.
    let arrival_ms = record
        .arrival
        .filter(|secs| secs.is_finite())
        .and_then(|secs| DateTime::from_secs_f64(secs).to_millis().ok())
        .map_or(0, |ms| ms.max(0) as u64);
    Ok(Delivery::from_stream(
        record.sequence_number.into_owned(),
        record
            .partition_key
            .map(Cow::into_owned)
            .unwrap_or_default(),
        arrival_ms,
        data,
    ))
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
        assert_eq!(first.payload, br#"{"id":1}"#);
        // The SDK's own reading of that timestamp (its float lands a millisecond short).
        assert_eq!(first.arrival_ms, 1_767_225_600_122);
        assert_eq!((second.payload.len(), second.arrival_ms), (0, 0));
        let rest: Value = serde_json::from_slice(&answer.rest).expect("JSON");
        let mut expected: Value = serde_json::from_str(&body).expect("JSON");
        expected["Records"] = Value::Array(Vec::new());
        assert_eq!(rest, expected);
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
