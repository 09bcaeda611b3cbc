//! Reading one shard: iterators, paced GetRecords with read-ahead, backoff, expiry.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::config::retry::RetryConfig;
use aws_sdk_kinesis::operation::get_records::GetRecordsOutput;
use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::types::ShardIteratorType;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::pacing::{MIN_READ_INTERVAL, ReadPacing};
use super::tap::RecordsTap;
use crate::Cause;
use ruststream_runtime::internals::Backoff;
use ruststream_runtime::{Clock, Delivery, SystemClock, one_line};

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
    /// First pause after a throttled or failed read; pauses double from there.
    pub backoff_first: Duration,
    /// Largest pause after a throttled or failed read.
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
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The stream does not exist (it never did, or was deleted).
    #[error("stream `{stream}` does not exist in region {region}")]
    StreamGone {
        /// The stream.
        stream: String,
        /// The region the client asked, as its configuration names it.
        region: String,
    },
    /// A Kinesis call kept failing; the cause is the SDK's error of the last try.
    #[error("{operation} on {target} failed {tries} times in a row")]
    Service {
        /// The Kinesis operation.
        operation: &'static str,
        /// The stream, and the shard when the call was about one.
        target: String,
        /// How many times it was tried.
        tries: u32,
        /// The last failure, as the SDK reported it.
        #[source]
        source: Cause,
    },
    /// A Kinesis call failed in a way that trying again cannot mend (an invalid argument).
    #[error("{operation} on {target} was refused")]
    Refused {
        /// The Kinesis operation.
        operation: &'static str,
        /// The stream and shard, and the position asked for.
        target: String,
        /// The SDK's error.
        #[source]
        source: Cause,
    },
    /// Kinesis answered without what the call is for.
    #[error("{operation} on {target} returned {missing}")]
    Incomplete {
        /// The Kinesis operation.
        operation: &'static str,
        /// The stream and shard.
        target: String,
        /// What was missing.
        missing: &'static str,
    },
    /// The reader of an unfinished shard has no read in flight: a bug, reported rather than
    /// spinning.
    #[error("the reader of `{stream}`/{shard_id} has no read in flight on an unfinished shard")]
    Stalled {
        /// The stream.
        stream: String,
        /// The shard.
        shard_id: String,
    },
}

impl ReadError {
    /// [`ReadError::StreamGone`] for `stream`, naming the region `client` asks.
    pub(crate) fn stream_gone(client: &aws_sdk_kinesis::Client, stream: &str) -> Self {
        let region = client.config().region().map_or_else(
            || "(none configured)".to_owned(),
            |region| region.as_ref().to_owned(),
        );
        Self::StreamGone {
            stream: stream.to_owned(),
            region,
        }
    }
}

/// One GetRecords' worth of a shard.
#[derive(Debug, Default)]
pub struct Batch {
    /// The records, in shard order, their envelopes taken apart.
    pub records: Vec<Delivery>,
    /// The shard is closed and this was its last batch.
    pub shard_end: bool,
}

/// Reads one shard in order.
///
/// The next GetRecords is in flight while the caller handles the current batch (read-ahead),
/// so the handler, not the network, sets the pace. [`next`](Self::next) is cancel-safe: its
/// only await is on the fetch task, which stays in place if the call is dropped, and the fetch
/// task does everything that waits (pacing, the read, reopening an expired iterator).
pub struct ShardReader {
    client: Client,
    /// Turns shared with the host's other readers of the shard.
    pacing: Arc<ReadPacing>,
    stream: String,
    shard_id: String,
    config: ReaderConfig,
    /// Where to reopen if the iterator expires: after the last record read, else the start.
    resume: StartAt,
    in_flight: Option<JoinHandle<Fetched>>,
    backoff: Backoff,
    finished: bool,
    /// The shards that continue this one, as its last read named them.
    children: Vec<String>,
    /// How far the last read was behind the tip, as the service said.
    millis_behind_latest: Option<i64>,
}

enum Fetched {
    Records {
        output: GetRecordsOutput,
        /// The records as the tap read them; `None` when they are in `output`.
        records: Option<Vec<Delivery>>,
        started: Instant,
    },
    /// Worth trying again with the same iterator, after a pause.
    Throttled {
        error: Cause,
        iterator: String,
    },
    Failed {
        error: Cause,
        iterator: String,
    },
    /// The stream is gone, or the iterator could not be renewed.
    Fatal(ReadError),
}

impl ShardReader {
    /// Opens `shard_id` of `stream` at `start`; each read takes its turn from `pacing`.
    ///
    /// # Errors
    /// When the stream is gone, or no iterator could be had after repeated tries.
    pub async fn open(
        client: Client,
        pacing: Arc<ReadPacing>,
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
        let mut backoff = Backoff::new(config.backoff_first, config.backoff_max);
        let shard = ShardRef {
            client: client.clone(),
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
        };
        let iterator = shard.iterator(&start, &mut backoff).await?;
        let mut reader = Self {
            client,
            pacing,
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
            config,
            resume,
            in_flight: None,
            backoff,
            finished: false,
            children: Vec::new(),
            millis_behind_latest: None,
        };
        reader.fetch(iterator, Instant::now());
        Ok(reader)
    }

    /// Whether the shard was read to its end.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The shards that continue this one (after a split or merge), as the read that reached its
    /// end named them (`ChildShards`); empty until then, or if the server does not say.
    pub fn children(&self) -> &[String] {
        &self.children
    }

    /// How many milliseconds the last read was behind the tip of the shard, as the service
    /// reported it (empty reads included); `None` before the first answer.
    pub fn millis_behind_latest(&self) -> Option<i64> {
        self.millis_behind_latest
    }

    /// The next batch of records (never empty unless it ends the shard).
    ///
    /// # Errors
    /// [`ReadError::StreamGone`] when the stream was deleted; [`ReadError::Service`] after
    /// repeated failures; [`ReadError::Stalled`] if the reader of an unfinished shard has no
    /// read in flight, which would be a bug.
    pub async fn next(&mut self) -> Result<Batch, ReadError> {
        loop {
            let Some(handle) = self.in_flight.as_mut() else {
                if self.finished {
                    return Ok(Batch {
                        records: Vec::new(),
                        shard_end: true,
                    });
                }
                let stalled = ReadError::Stalled {
                    stream: self.stream.clone(),
                    shard_id: self.shard_id.clone(),
                };
                tracing::error!(error = %stalled, "a shard reader lost its read");
                return Err(stalled);
            };
            let fetched = handle.await.unwrap_or_else(|join| Fetched::Failed {
                error: join.into(),
                iterator: String::new(),
            });
            // From here to the next fetch nothing awaits: dropping this call cannot lose it.
            self.in_flight = None;
            match fetched {
                Fetched::Records {
                    output,
                    records,
                    started,
                } => {
                    if let Some(batch) = self.received(output, records, started) {
                        return Ok(batch);
                    }
                }
                Fetched::Throttled { error, iterator } => {
                    self.retry_later(error, iterator, "throttled")?
                }
                Fetched::Failed { error, iterator } => {
                    self.retry_later(error, iterator, "failed")?
                }
                Fetched::Fatal(error) => return Err(error),
            }
        }
    }

    /// Takes a GetRecords answer; returns a batch unless it was empty and the shard goes on.
    fn received(
        &mut self,
        mut output: GetRecordsOutput,
        tapped: Option<Vec<Delivery>>,
        started: Instant,
    ) -> Option<Batch> {
        self.backoff.reset();
        self.millis_behind_latest = output.millis_behind_latest;
        let records = tapped.unwrap_or_else(|| {
            std::mem::take(&mut output.records)
                .into_iter()
                .map(delivery)
                .collect()
        });
        if let Some(last) = records.last() {
            self.resume = StartAt::AfterSequence(last.sequence_number.to_string());
        }
        let children: Vec<String> = output
            .child_shards()
            .iter()
            .map(|child| child.shard_id().to_owned())
            .collect();
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
                self.children = children;
                Some(Batch {
                    records,
                    shard_end: true,
                })
            }
        }
    }

    /// Schedules the failed read again after a backoff pause, with the same iterator (still
    /// valid after a failed read).
    fn retry_later(&mut self, error: Cause, iterator: String, what: &str) -> Result<(), ReadError> {
        if self.backoff.failures() >= MAX_CONSECUTIVE_FAILURES {
            return Err(ReadError::Service {
                operation: "GetRecords",
                target: format!("`{}`/{}", self.stream, self.shard_id),
                tries: self.backoff.failures() + 1,
                source: error,
            });
        }
        let pause = self.backoff.next_pause();
        tracing::warn!(stream = %self.stream, shard = %self.shard_id, ?pause,
            error = %one_line(&*error), "GetRecords {what}; backing off");
        self.fetch(iterator, Instant::now() + pause);
        Ok(())
    }

    /// Starts the next read: after `not_before`, GetRecords with `iterator`; should the
    /// iterator have expired, the task itself reopens the shard where the reader stood.
    fn fetch(&mut self, iterator: String, not_before: Instant) {
        let shard = ShardRef {
            client: self.client.clone(),
            stream: self.stream.clone(),
            shard_id: self.shard_id.clone(),
        };
        let limit = self.config.batch_limit;
        let resume = self.resume.clone();
        let backoff = Backoff::new(self.config.backoff_first, self.config.backoff_max);
        let pacing = self.pacing.clone();
        self.in_flight = Some(tokio::spawn(async move {
            tokio::time::sleep_until(not_before).await;
            pacing.turn(&shard.stream, &shard.shard_id).await;
            shard.read(iterator, limit, resume, backoff).await
        }));
    }
}

/// One shard, as the fetch task needs it.
struct ShardRef {
    client: Client,
    stream: String,
    shard_id: String,
}

impl ShardRef {
    /// GetRecords with `iterator`; an expired iterator is renewed at `resume` and the read
    /// tried again.
    async fn read(
        &self,
        mut iterator: String,
        limit: i32,
        resume: StartAt,
        mut backoff: Backoff,
    ) -> Fetched {
        loop {
            let started = Instant::now();
            let tap = RecordsTap::default();
            let result = self
                .client
                .get_records()
                .shard_iterator(&iterator)
                .limit(limit)
                .customize()
                .interceptor(tap.clone())
                // This reader does its own backoff, so it can log and pace it.
                .config_override(
                    aws_sdk_kinesis::Config::builder().retry_config(RetryConfig::disabled()),
                )
                .send()
                .await;
            let error = match result {
                Ok(output) => {
                    return Fetched::Records {
                        output,
                        records: tap.take(),
                        started,
                    };
                }
                Err(error) => error,
            };
            let service = error.as_service_error();
            if service.is_some_and(|e| e.is_expired_iterator_exception()) {
                tracing::info!(stream = %self.stream, shard = %self.shard_id, resume = ?resume,
                    "shard iterator expired; reopening where the reader stood");
                match self.iterator(&resume, &mut backoff).await {
                    Ok(renewed) => iterator = renewed,
                    Err(error) => return Fetched::Fatal(error),
                }
                continue;
            }
            return match service {
                Some(e) if e.is_provisioned_throughput_exceeded_exception() => Fetched::Throttled {
                    error: error.into(),
                    iterator,
                },
                Some(e) if e.is_resource_not_found_exception() => {
                    Fetched::Fatal(ReadError::stream_gone(&self.client, &self.stream))
                }
                _ => Fetched::Failed {
                    error: error.into(),
                    iterator,
                },
            };
        }
    }

    /// Gets an iterator at `start`, retrying throttling and server errors.
    async fn iterator(&self, start: &StartAt, backoff: &mut Backoff) -> Result<String, ReadError> {
        loop {
            let error = match self.request_iterator(start).await {
                Ok(iterator) => return Ok(iterator),
                Err(IteratorFailure::Fatal(error)) => return Err(error),
                Err(IteratorFailure::Retry(error)) => error,
            };
            if backoff.failures() >= MAX_CONSECUTIVE_FAILURES {
                return Err(ReadError::Service {
                    operation: "GetShardIterator",
                    target: self.target(),
                    tries: backoff.failures() + 1,
                    source: error,
                });
            }
            tracing::warn!(stream = %self.stream, shard = %self.shard_id,
                error = %one_line(&*error), "GetShardIterator failed; retrying");
            tokio::time::sleep(backoff.next_pause()).await;
        }
    }

    async fn request_iterator(&self, start: &StartAt) -> Result<String, IteratorFailure> {
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
        let error = match request.send().await {
            Ok(out) => {
                return out.shard_iterator.ok_or_else(|| {
                    IteratorFailure::Fatal(ReadError::Incomplete {
                        operation: "GetShardIterator",
                        target: self.target(),
                        missing: "no iterator",
                    })
                });
            }
            Err(error) => error,
        };
        let service = error.as_service_error();
        if service.is_some_and(|e| e.is_resource_not_found_exception()) {
            return Err(IteratorFailure::Fatal(ReadError::stream_gone(
                &self.client,
                &self.stream,
            )));
        }
        if service.is_some_and(|e| e.is_invalid_argument_exception()) {
            return Err(IteratorFailure::Fatal(ReadError::Refused {
                operation: "GetShardIterator",
                target: format!("{} at {start:?}", self.target()),
                source: error.into(),
            }));
        }
        Err(IteratorFailure::Retry(error.into()))
    }

    fn target(&self) -> String {
        format!("`{}`/{}", self.stream, self.shard_id)
    }
}

/// Why no iterator was had this time.
enum IteratorFailure {
    /// Trying again cannot help.
    Fatal(ReadError),
    /// Worth another try, after a pause.
    Retry(Cause),
}

impl Drop for ShardReader {
    fn drop(&mut self) {
        if let Some(handle) = self.in_flight.take() {
            handle.abort();
        }
    }
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
