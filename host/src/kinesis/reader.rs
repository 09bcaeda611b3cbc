//! Reading one shard: iterators, paced GetRecords with read-ahead, backoff, expiry.

use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::config::retry::RetryConfig;
use aws_sdk_kinesis::error::SdkError;
use aws_sdk_kinesis::operation::get_records::{GetRecordsError, GetRecordsOutput};
use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::types::ShardIteratorType;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::backoff::Backoff;
use crate::clock::{Clock, SystemClock};
use crate::record::Delivery;
use crate::sdk_error::describe_error;

/// Kinesis allows 5 GetRecords per second per shard.
pub const MIN_READ_INTERVAL: Duration = Duration::from_millis(200);

/// Consecutive failed reads after which the reader gives up (the lease is released and the
/// shard is taken again later).
const MAX_CONSECUTIVE_FAILURES: u32 = 20;

/// How a shard is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderConfig {
    /// Most records per GetRecords (1..=10000; default 10000, as KCL: with at most 5 reads a
    /// second per shard, a smaller limit caps a shard below what it can deliver).
    pub batch_limit: i32,
    /// Pause after a read that returned no records.
    pub poll_interval: Duration,
    /// Least time between two GetRecords on one shard; never below 200 ms (5 reads/s).
    pub min_read_interval: Duration,
    /// First and largest pause after a throttled or failed read.
    pub backoff_first: Duration,
    pub backoff_max: Duration,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        Self {
            batch_limit: 10_000,
            poll_interval: Duration::from_secs(1),
            min_read_interval: MIN_READ_INTERVAL,
            backoff_first: Duration::from_millis(200),
            backoff_max: Duration::from_secs(10),
        }
    }
}

/// Where to start reading a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartAt {
    /// After a stored checkpoint.
    AfterSequence(String),
    /// At this record (redelivering it).
    AtSequence(String),
    /// The oldest record still in the shard.
    Horizon,
    /// Only records written from now on.
    Latest,
    /// Records that arrived at or after this time (ms since the epoch).
    AtTimestamp(u64),
}

/// Why a shard cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("stream `{0}` no longer exists")]
    StreamGone(String),
    #[error("{0}")]
    Service(String),
}

/// One GetRecords' worth of a shard.
#[derive(Debug, Default)]
pub struct Batch {
    pub records: Vec<Delivery>,
    /// The shard is closed and this was its last batch.
    pub shard_end: bool,
}

/// Reads one shard in order.
///
/// The next GetRecords is in flight while the caller handles the current batch (read-ahead),
/// so the handler, not the network, sets the pace. [`next`](Self::next) is cancel-safe: a fetch
/// in flight is kept for the next call.
pub struct ShardReader {
    client: Client,
    stream: String,
    shard_id: String,
    config: ReaderConfig,
    /// Where to reopen if the iterator expires: after the last record read, else the start.
    resume: StartAt,
    in_flight: Option<JoinHandle<Fetched>>,
    /// The iterator of the fetch in flight, to read again with after a failure.
    last_iterator: Option<String>,
    backoff: Backoff,
    finished: bool,
}

enum Fetched {
    Records {
        output: GetRecordsOutput,
        started: Instant,
    },
    Throttled(String),
    Expired,
    Gone,
    Failed(String),
}

impl ShardReader {
    /// Opens `shard_id` of `stream` at `start`.
    ///
    /// # Errors
    /// When the stream is gone, or no iterator could be had after repeated tries.
    pub async fn open(
        client: Client,
        stream: &str,
        shard_id: &str,
        start: StartAt,
        config: ReaderConfig,
    ) -> Result<Self, ReadError> {
        let resume = match &start {
            // Reopening at the tip could skip records that arrived while the iterator sat
            // unused; a timestamp a little before opening cannot.
            StartAt::Latest => StartAt::AtTimestamp(SystemClock.now_ms().saturating_sub(1000)),
            other => other.clone(),
        };
        let backoff = Backoff::new(config.backoff_first, config.backoff_max);
        let mut reader = Self {
            client,
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
            config,
            resume,
            in_flight: None,
            last_iterator: None,
            backoff,
            finished: false,
        };
        let iterator = reader.iterator(&start).await?;
        reader.fetch(iterator, Instant::now());
        Ok(reader)
    }

    /// Whether the shard was read to its end.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The next batch of records (never empty unless it ends the shard).
    ///
    /// # Errors
    /// [`ReadError::StreamGone`] when the stream was deleted; [`ReadError::Service`] after
    /// repeated failures.
    pub async fn next(&mut self) -> Result<Batch, ReadError> {
        loop {
            let Some(handle) = self.in_flight.as_mut() else {
                return Ok(Batch {
                    records: Vec::new(),
                    shard_end: true,
                });
            };
            let fetched = handle
                .await
                .unwrap_or_else(|join| Fetched::Failed(format!("read task failed: {join}")));
            self.in_flight = None;
            match fetched {
                Fetched::Records { output, started } => {
                    if let Some(batch) = self.received(output, started) {
                        return Ok(batch);
                    }
                }
                Fetched::Throttled(reason) => self.retry_later(reason, "throttled")?,
                Fetched::Failed(reason) => self.retry_later(reason, "failed")?,
                Fetched::Expired => {
                    tracing::info!(stream = %self.stream, shard = %self.shard_id, resume = ?self.resume,
                        "shard iterator expired; reopening where the reader stood");
                    let resume = self.resume.clone();
                    let iterator = self.iterator(&resume).await?;
                    self.fetch(iterator, Instant::now());
                }
                Fetched::Gone => return Err(ReadError::StreamGone(self.stream.clone())),
            }
        }
    }

    /// Takes a GetRecords answer; returns a batch unless it was empty and the shard goes on.
    fn received(&mut self, output: GetRecordsOutput, started: Instant) -> Option<Batch> {
        self.backoff.reset();
        let records: Vec<Delivery> = output.records().iter().map(delivery).collect();
        if let Some(last) = records.last() {
            self.resume = StartAt::AfterSequence(last.sequence_number.clone());
        }
        match output.next_shard_iterator {
            Some(iterator) => {
                let spacing = self.config.min_read_interval.max(MIN_READ_INTERVAL);
                let mut not_before = started + spacing;
                if records.is_empty() {
                    not_before = not_before.max(Instant::now() + self.config.poll_interval);
                }
                self.fetch(iterator, not_before);
                (!records.is_empty()).then_some(Batch {
                    records,
                    shard_end: false,
                })
            }
            None => {
                self.finished = true;
                Some(Batch {
                    records,
                    shard_end: true,
                })
            }
        }
    }

    /// Schedules the failed read again after a backoff pause, with the same iterator.
    fn retry_later(&mut self, reason: String, what: &str) -> Result<(), ReadError> {
        if self.backoff.failures() >= MAX_CONSECUTIVE_FAILURES {
            return Err(ReadError::Service(format!(
                "GetRecords on `{}`/{} {what} {MAX_CONSECUTIVE_FAILURES} times in a row: {reason}",
                self.stream, self.shard_id
            )));
        }
        let pause = self.backoff.next_pause();
        tracing::warn!(stream = %self.stream, shard = %self.shard_id, ?pause, %reason,
            "GetRecords {what}; backing off");
        // The iterator of a failed read is still valid: read again with it.
        if let Some(iterator) = self.last_iterator.take() {
            self.fetch(iterator, Instant::now() + pause);
        }
        Ok(())
    }

    fn fetch(&mut self, iterator: String, not_before: Instant) {
        let client = self.client.clone();
        let limit = self.config.batch_limit;
        self.last_iterator = Some(iterator.clone());
        self.in_flight = Some(tokio::spawn(async move {
            tokio::time::sleep_until(not_before).await;
            let started = Instant::now();
            let result = client
                .get_records()
                .shard_iterator(iterator)
                .limit(limit)
                .customize()
                // This reader does its own backoff, so it can log and pace it.
                .config_override(
                    aws_sdk_kinesis::Config::builder().retry_config(RetryConfig::disabled()),
                )
                .send()
                .await;
            classify(result, started)
        }));
    }

    /// Gets an iterator at `start`, retrying throttling and server errors.
    async fn iterator(&mut self, start: &StartAt) -> Result<String, ReadError> {
        loop {
            match self.request_iterator(start).await {
                Ok(iterator) => return Ok(iterator),
                Err(Some(error)) => return Err(error),
                Err(None) if self.backoff.failures() >= MAX_CONSECUTIVE_FAILURES => {
                    return Err(ReadError::Service(format!(
                        "no iterator for `{}`/{} after {MAX_CONSECUTIVE_FAILURES} tries",
                        self.stream, self.shard_id
                    )));
                }
                Err(None) => tokio::time::sleep(self.backoff.next_pause()).await,
            }
        }
    }

    /// `Err(None)`: worth retrying.
    async fn request_iterator(&self, start: &StartAt) -> Result<String, Option<ReadError>> {
        let mut request = self
            .client
            .get_shard_iterator()
            .stream_name(&self.stream)
            .shard_id(&self.shard_id);
        request = match start {
            StartAt::AfterSequence(seq) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .starting_sequence_number(seq),
            StartAt::AtSequence(seq) => request
                .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
                .starting_sequence_number(seq),
            StartAt::Horizon => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            StartAt::Latest => request.shard_iterator_type(ShardIteratorType::Latest),
            StartAt::AtTimestamp(ms) => request
                .shard_iterator_type(ShardIteratorType::AtTimestamp)
                .timestamp(DateTime::from_millis(*ms as i64)),
        };
        match request.send().await {
            Ok(out) => out.shard_iterator.ok_or_else(|| {
                Some(ReadError::Service(format!(
                    "GetShardIterator on `{}`/{} returned no iterator",
                    self.stream, self.shard_id
                )))
            }),
            Err(error) => {
                let service = error.as_service_error();
                if service.is_some_and(|e| e.is_resource_not_found_exception()) {
                    return Err(Some(ReadError::StreamGone(self.stream.clone())));
                }
                if service.is_some_and(|e| e.is_invalid_argument_exception()) {
                    return Err(Some(ReadError::Service(format!(
                        "GetShardIterator on `{}`/{} at {start:?}: {}",
                        self.stream,
                        self.shard_id,
                        describe_error(&error)
                    ))));
                }
                tracing::warn!(stream = %self.stream, shard = %self.shard_id,
                    error = %describe_error(&error), "GetShardIterator failed; retrying");
                Err(None)
            }
        }
    }
}

impl Drop for ShardReader {
    fn drop(&mut self) {
        if let Some(handle) = self.in_flight.take() {
            handle.abort();
        }
    }
}

fn classify(
    result: Result<GetRecordsOutput, SdkError<GetRecordsError>>,
    started: Instant,
) -> Fetched {
    match result {
        Ok(output) => Fetched::Records { output, started },
        Err(error) => match error.as_service_error() {
            Some(e) if e.is_provisioned_throughput_exceeded_exception() => {
                Fetched::Throttled(describe_error(&error))
            }
            Some(e) if e.is_expired_iterator_exception() => Fetched::Expired,
            Some(e) if e.is_resource_not_found_exception() => Fetched::Gone,
            _ => Fetched::Failed(describe_error(&error)),
        },
    }
}

fn delivery(record: &aws_sdk_kinesis::types::Record) -> Delivery {
    let arrival_ms = record
        .approximate_arrival_timestamp()
        .and_then(|t| t.to_millis().ok())
        .map_or(0, |ms| ms.max(0) as u64);
    Delivery::from_stream(
        record.sequence_number().to_owned(),
        record.partition_key().unwrap_or_default().to_owned(),
        arrival_ms,
        record.data().as_ref(),
    )
}
