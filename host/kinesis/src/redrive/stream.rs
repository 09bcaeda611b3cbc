//! The Kinesis calls of a redrive: reading a shard of the dead-letter stream page by page,
//! looking through an origin stream for what a redrive already wrote, and writing a batch.

use std::collections::HashSet;
use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::primitives::{Blob, DateTime};
use aws_sdk_kinesis::types::{PutRecordsRequestEntry, ShardIteratorType};
use ruststream_runtime::envelope;
use ruststream_runtime::record::OutgoingRecord;

use super::RedriveError;
use super::filter::{DeadLetter, redrive_tag};
use crate::kinesis::list_shards;

/// Most records a PutRecords call takes.
pub(crate) const PUT_LIMIT: usize = 500;
/// Tries of the records a PutRecords call did not take (throttled), with a growing pause.
const PUT_TRIES: u32 = 8;

fn kinesis_error(
    operation: &'static str,
    target: &str,
    source: impl std::error::Error + Send + Sync + 'static,
) -> RedriveError {
    RedriveError::Kinesis {
        operation,
        target: target.to_owned(),
        source: Box::new(source),
    }
}

/// A position in a shard to read from.
pub(crate) enum Position<'a> {
    /// The oldest record.
    Horizon,
    /// Just after this record.
    After(&'a str),
    /// The records that arrived at or after this time (ms since the epoch).
    Time(u64),
}

/// A shard of a stream being read, page by page.
pub(crate) struct ShardPages {
    client: Client,
    stream: String,
    shard_id: String,
    iterator: Option<String>,
}

impl ShardPages {
    /// Opens `shard_id` of `stream` at `from`.
    ///
    /// # Errors
    /// The shard cannot be opened.
    pub(crate) async fn open(
        client: &Client,
        stream: &str,
        shard_id: &str,
        from: Position<'_>,
    ) -> Result<Self, RedriveError> {
        let request = client
            .get_shard_iterator()
            .stream_name(stream)
            .shard_id(shard_id);
        let request = match from {
            Position::Horizon => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            Position::After(sequence) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .starting_sequence_number(sequence),
            Position::Time(ms) => request
                .shard_iterator_type(ShardIteratorType::AtTimestamp)
                .timestamp(DateTime::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))),
        };
        let target = format!("shard {shard_id} of `{stream}`");
        let iterator = request
            .send()
            .await
            .map_err(|error| kinesis_error("GetShardIterator", &target, error))?
            .shard_iterator;
        Ok(Self {
            client: client.clone(),
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
            iterator,
        })
    }

    /// The next page; `None` once the shard is read to its tip (a page came back empty with
    /// nothing behind it) or to its end.
    ///
    /// # Errors
    /// A read failed.
    pub(crate) async fn next_page(&mut self) -> Result<Option<Vec<DeadLetter>>, RedriveError> {
        let Some(iterator) = self.iterator.take() else {
            return Ok(None);
        };
        let target = format!("shard {} of `{}`", self.shard_id, self.stream);
        let page = self
            .client
            .get_records()
            .shard_iterator(iterator)
            .send()
            .await
            .map_err(|error| kinesis_error("GetRecords", &target, error))?;
        let at_tip = page.records().is_empty() && page.millis_behind_latest().unwrap_or(0) == 0;
        if !at_tip {
            self.iterator = page.next_shard_iterator().map(str::to_owned);
        }
        let records = page
            .records()
            .iter()
            .map(|record| DeadLetter {
                shard_id: self.shard_id.clone(),
                sequence_number: record.sequence_number().to_owned(),
                partition_key: record.partition_key().unwrap_or_default().to_owned(),
                arrival_ms: record
                    .approximate_arrival_timestamp()
                    .and_then(|at| at.to_millis().ok())
                    .and_then(|ms| u64::try_from(ms).ok())
                    .unwrap_or(0),
                data: record.data().as_ref().to_vec(),
            })
            .collect();
        Ok((!at_tip).then_some(records))
    }
}

/// Every redrive tag of redrive `id` in `stream`, in the records that arrived from `from_ms`
/// on, to the tip of every shard.
///
/// # Errors
/// The stream cannot be listed or a shard read.
pub(crate) async fn tags_in(
    client: &Client,
    stream: &str,
    id: &str,
    from_ms: u64,
) -> Result<HashSet<String>, RedriveError> {
    let mut tags = HashSet::new();
    let shards = list_shards(client, stream)
        .await
        .map_err(|error| kinesis_error("ListShards", stream, error))?;
    for shard in shards {
        let mut pages =
            ShardPages::open(client, stream, &shard.shard_id, Position::Time(from_ms)).await?;
        while let Some(page) = pages.next_page().await? {
            for record in page {
                let headers = envelope::unwrap(&record.data).headers;
                if let Some(tag) = redrive_tag(&headers, id) {
                    tags.insert(String::from_utf8_lossy(tag).into_owned());
                }
            }
        }
    }
    Ok(tags)
}

/// Whether `stream` exists.
///
/// # Errors
/// Kinesis failed to say.
pub(crate) async fn exists(client: &Client, stream: &str) -> Result<bool, RedriveError> {
    match client
        .describe_stream_summary()
        .stream_name(stream)
        .send()
        .await
    {
        Ok(_) => Ok(true),
        Err(error)
            if error
                .as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            Ok(false)
        }
        Err(error) => Err(kinesis_error("DescribeStreamSummary", stream, error)),
    }
}

/// Writes `records` to `stream` (at most [`PUT_LIMIT`]), trying again those Kinesis did not
/// take; a call is given up after `timeout`, so that nothing this run sent lands long after
/// its lease could have passed to another run.
///
/// # Errors
/// A call failed or timed out (whether it wrote is then unknown: the intent stored before it
/// covers that), or records were still not taken after several tries.
pub(crate) async fn put(
    client: &Client,
    stream: &str,
    records: &[OutgoingRecord],
    timeout: Duration,
) -> Result<(), RedriveError> {
    let mut entries = records
        .iter()
        .map(|record| {
            PutRecordsRequestEntry::builder()
                .partition_key(&record.partition_key)
                .data(Blob::new(record.to_stream_bytes()))
                .build()
                .map_err(|error| kinesis_error("PutRecords", stream, error))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for attempt in 1..=PUT_TRIES {
        let call = client
            .put_records()
            .stream_name(stream)
            .set_records(Some(entries.clone()))
            .send();
        let answer = tokio::time::timeout(timeout, call)
            .await
            .map_err(|elapsed| kinesis_error("PutRecords", stream, elapsed))?
            .map_err(|error| kinesis_error("PutRecords", stream, error))?;
        entries = entries
            .into_iter()
            .zip(answer.records())
            .filter(|(_, result)| result.sequence_number().is_none())
            .map(|(entry, _)| entry)
            .collect();
        if entries.is_empty() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50 << attempt.min(6))).await;
    }
    Err(RedriveError::NotTaken {
        stream: stream.to_owned(),
        records: entries.len(),
    })
}
