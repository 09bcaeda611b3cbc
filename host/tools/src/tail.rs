//! `ruststream tail STREAM`: a stream's records as they are stored, one JSON object per line,
//! with the `RSK2` envelope taken apart: user headers, the host's retry count and due time,
//! and a dead letter's origin.

use std::io::Write;
use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::error::SdkError;
use aws_sdk_kinesis::operation::get_records::GetRecordsError;
use aws_sdk_kinesis::operation::get_shard_iterator::GetShardIteratorError;
use aws_sdk_kinesis::types::ShardIteratorType;
use ruststream_kinesis::kinesis::{ReadError, list_shards};
use ruststream_runtime::dead_letter::DeadLetterOrigin;
use ruststream_runtime::envelope;
use serde_json::{Map, Value, json};

use ruststream_fleet::aws::AwsOptions;

/// How long `--follow` waits after a read that found nothing new.
const FOLLOW_PAUSE: Duration = Duration::from_secs(1);

/// Why `tail` stopped: the stream and shard it failed on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TailError {
    /// The stream's shards cannot be listed (the error names the stream).
    #[error(transparent)]
    List(#[from] ReadError),
    /// A shard cannot be opened where `--from` says.
    #[error("opening shard {shard} of `{stream}`")]
    Open {
        /// The stream.
        stream: String,
        /// The shard.
        shard: String,
        /// Why (boxed: the SDK's error is large).
        #[source]
        source: Box<SdkError<GetShardIteratorError>>,
    },
    /// A read of a shard failed.
    #[error("reading shard {shard} of `{stream}`")]
    Read {
        /// The stream.
        stream: String,
        /// The shard.
        shard: String,
        /// Why (boxed: the SDK's error is large).
        #[source]
        source: Box<SdkError<GetRecordsError>>,
    },
    /// A record cannot be written to the output (it was closed: `tail | head`).
    #[error("cannot write the output")]
    Output(#[source] std::io::Error),
}

/// What `ruststream tail` reads.
#[derive(Debug, Clone)]
pub struct TailOptions {
    /// The stream.
    pub stream: String,
    /// Where each shard is read from.
    pub from: TailFrom,
    /// Keep reading new records instead of stopping at the tip.
    pub follow: bool,
    /// Where Kinesis is.
    pub aws: AwsOptions,
}

/// Where `tail` reads each shard from (`--from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum TailFrom {
    /// The oldest record each shard keeps.
    Horizon,
    /// Only records written from now on.
    Latest,
}

/// Writes every record of every shard of the stream to `out`, one JSON object a line, from
/// where `--from` says, shard after shard; without `--follow` it stops once each shard is
/// read up to its tip. Each line is written as it is read.
///
/// # Errors
/// When the stream cannot be listed, a shard cannot be read, or `out` cannot be written; see
/// [`TailError`].
pub async fn tail(args: TailOptions, out: &mut dyn Write) -> Result<(), TailError> {
    let client = Client::new(&args.aws.kinesis_config().await);
    let shards = list_shards(&client, &args.stream).await?;
    let kind = match args.from {
        TailFrom::Horizon => ShardIteratorType::TrimHorizon,
        TailFrom::Latest => ShardIteratorType::Latest,
    };
    let mut readers = Vec::new();
    for shard in &shards {
        let iterator = client
            .get_shard_iterator()
            .stream_name(&args.stream)
            .shard_id(&shard.shard_id)
            .shard_iterator_type(kind.clone())
            .send()
            .await
            .map_err(|source| TailError::Open {
                stream: args.stream.clone(),
                shard: shard.shard_id.clone(),
                source: Box::new(source),
            })?
            .shard_iterator;
        readers.push((shard.shard_id.clone(), iterator));
    }
    loop {
        let mut all_caught_up = true;
        for (shard_id, iterator) in &mut readers {
            all_caught_up &= read_to_tip(&client, &args.stream, shard_id, iterator, out).await?;
        }
        if !args.follow || readers.iter().all(|(_, iterator)| iterator.is_none()) {
            return Ok(());
        }
        if all_caught_up {
            tokio::time::sleep(FOLLOW_PAUSE).await;
        }
    }
}

/// Reads `shard_id` from `iterator` until a read comes back empty at the tip (or the shard
/// ends: `iterator` becomes `None`), writing each record to `out`. Returns whether it is at
/// the tip.
async fn read_to_tip(
    client: &Client,
    stream: &str,
    shard_id: &str,
    iterator: &mut Option<String>,
    out: &mut dyn Write,
) -> Result<bool, TailError> {
    while let Some(current) = iterator.take() {
        let page = client
            .get_records()
            .shard_iterator(current)
            .send()
            .await
            .map_err(|source| TailError::Read {
                stream: stream.to_owned(),
                shard: shard_id.to_owned(),
                source: Box::new(source),
            })?;
        for record in page.records() {
            let arrival_ms = record
                .approximate_arrival_timestamp()
                .and_then(|at| at.to_millis().ok());
            let line = describe(
                stream,
                shard_id,
                record.sequence_number(),
                record.partition_key().unwrap_or_default(),
                arrival_ms,
                record.data().as_ref(),
            );
            writeln!(out, "{line}").map_err(TailError::Output)?;
        }
        *iterator = page.next_shard_iterator().map(str::to_owned);
        if page.records().is_empty() && page.millis_behind_latest().unwrap_or(0) == 0 {
            return Ok(true);
        }
    }
    Ok(true)
}

/// One record as a JSON object: where it is, its envelope decoded, and its payload (as JSON
/// when it is JSON, as text when it is UTF-8, else as the number of bytes).
fn describe(
    stream: &str,
    shard_id: &str,
    sequence: &str,
    partition_key: &str,
    arrival_ms: Option<i64>,
    data: &[u8],
) -> Value {
    let unwrapped = envelope::unwrap(data);
    let mut headers = Map::new();
    for header in &unwrapped.headers {
        if !DeadLetterOrigin::is_origin_header(&header.name) {
            let value = String::from_utf8_lossy(&header.value).into_owned();
            headers.insert(header.name.clone(), value.into());
        }
    }
    let payload = match (
        serde_json::from_slice::<Value>(&unwrapped.payload),
        std::str::from_utf8(&unwrapped.payload),
    ) {
        (Ok(json), _) => json,
        (_, Ok(text)) => text.into(),
        _ => json!({ "binary_bytes": unwrapped.payload.len() }),
    };
    let mut line = json!({
        "stream": stream,
        "shard": shard_id,
        "sequence": sequence,
        "partition_key": partition_key,
        "arrival_ms": arrival_ms,
        "headers": headers,
        "payload": payload,
    });
    if unwrapped.retry_count > 0 {
        line["retry_count"] = unwrapped.retry_count.into();
    }
    if let Some(due) = unwrapped.due_at_ms {
        line["due_at_ms"] = due.into();
    }
    if let Some(origin) = DeadLetterOrigin::from_headers(&unwrapped.headers) {
        line["dead_letter"] = json!({
            "stream": origin.stream,
            "shard": origin.shard_id,
            "sequence": origin.sequence_number,
            "subscriber": origin.subscriber,
            "tenant": origin.tenant,
            "attempts": origin.attempts,
            "reason": origin.reason,
        });
        if let Some(first) = origin.first {
            line["dead_letter"]["first"] = json!({
                "shard": first.shard_id,
                "sequence": first.sequence_number,
                "arrival_ms": first.arrival_ms,
            });
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use ruststream_runtime::dead_letter::FirstRecord;
    use ruststream_runtime::record::Header;

    use super::*;

    #[test]
    fn a_dead_letter_is_shown_with_its_origin_and_its_own_headers() {
        let origin = DeadLetterOrigin {
            stream: "refunds".into(),
            shard_id: "shardId-000000000000".into(),
            sequence_number: "42".into(),
            subscriber: "reconcile".into(),
            tenant: "acme".into(),
            app: Some("books".into()),
            attempts: 3,
            reason: "attempts-exhausted".into(),
            first: Some(FirstRecord {
                shard_id: "shardId-000000000000".into(),
                sequence_number: "40".into(),
                arrival_ms: 1_000,
            }),
        };
        let mut headers = vec![
            Header::new("trace", "abc"),
            Header::new(envelope::RETRY_COUNT_HEADER, "3"),
        ];
        headers.extend(origin.headers());
        let data = envelope::wrap(&headers, br#"{"id":9}"#);
        let line = describe(
            "refunds.dead",
            "shardId-000000000000",
            "77",
            "k",
            Some(5),
            &data,
        );
        assert_eq!(line["payload"]["id"], 9);
        assert_eq!(line["headers"], json!({ "trace": "abc" }));
        assert_eq!(line["retry_count"], 3);
        assert_eq!(line["dead_letter"]["stream"], "refunds");
        assert_eq!(line["dead_letter"]["attempts"], 3);
        assert_eq!(line["dead_letter"]["reason"], "attempts-exhausted");
        assert_eq!(
            line["dead_letter"]["first"],
            json!({ "shard": "shardId-000000000000", "sequence": "40", "arrival_ms": 1_000 })
        );
        assert_eq!(line["headers"].as_object().map(Map::len), Some(1), "{line}");
        let plain = describe("s", "shard", "1", "k", None, b"not json");
        assert_eq!(plain["payload"], "not json");
        assert!(plain.get("dead_letter").is_none());
    }
}
