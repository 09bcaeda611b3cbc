//! Reading one shard for one subscription: paced, shared GetRecords with read-ahead, backoff,
//! expiry.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::pacing::{MIN_READ_INTERVAL, ReaderOwner};
use super::shared::{Answer, Outcome, Position, ReadRequest, Registration, SharedReads};
use crate::Cause;
use ruststream_runtime::internals::Backoff;
use ruststream_runtime::{Clock, Delivery, SystemClock};

/// Consecutive failed reads after which the reader gives up (the lease is released and the
/// shard is taken again later).
pub(super) const MAX_CONSECUTIVE_FAILURES: u32 = 20;

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
    /// Longest a GetRecords call may take before it is abandoned and made again with the same
    /// iterator (a failed read). Default 10 s: an answer holds at most 10 MiB, which reaches
    /// a host in well under a second in a region; a call still silent after 10 s has stalled.
    pub get_records_timeout: Duration,
    /// Longest a GetShardIterator call may take before it is abandoned and made again.
    /// Default 5 s: its answer is a few hundred bytes, usually there in tens of milliseconds.
    pub get_shard_iterator_timeout: Duration,
    /// Longest a ListShards listing (all its pages) may take before it is abandoned; the next
    /// round lists again, and meanwhile the last listing serves. Default 5 s, as
    /// GetShardIterator: a page of up to 1 000 shards is small.
    pub list_shards_timeout: Duration,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        Self {
            batch_limit: 10_000,
            poll_interval: Duration::from_secs(1),
            min_read_interval: MIN_READ_INTERVAL,
            backoff_first: Duration::from_millis(200),
            backoff_max: Duration::from_secs(10),
            get_records_timeout: Duration::from_secs(10),
            get_shard_iterator_timeout: Duration::from_secs(5),
            list_shards_timeout: Duration::from_secs(5),
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
    /// A Kinesis call did not answer in time (it stalled after connecting).
    #[error("{operation} on {target} did not answer within {after:?}")]
    TimedOut {
        /// The Kinesis operation.
        operation: &'static str,
        /// The stream, and the shard when the call was about one.
        target: String,
        /// How long it was given.
        after: Duration,
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
    /// This error again, for one more of the readers a shared read failed for: the fields
    /// copied, an SDK cause shared.
    pub(crate) fn for_another(shared: &Arc<ReadError>) -> Self {
        let cause = || -> Cause { Box::new(CauseOf(shared.clone())) };
        match &**shared {
            Self::StreamGone { stream, region } => Self::StreamGone {
                stream: stream.clone(),
                region: region.clone(),
            },
            Self::Service {
                operation,
                target,
                tries,
                ..
            } => Self::Service {
                operation,
                target: target.clone(),
                tries: *tries,
                source: cause(),
            },
            Self::Refused {
                operation, target, ..
            } => Self::Refused {
                operation,
                target: target.clone(),
                source: cause(),
            },
            Self::Incomplete {
                operation,
                target,
                missing,
            } => Self::Incomplete {
                operation,
                target: target.clone(),
                missing,
            },
            Self::TimedOut {
                operation,
                target,
                after,
            } => Self::TimedOut {
                operation,
                target: target.clone(),
                after: *after,
            },
            Self::Stalled { stream, shard_id } => Self::Stalled {
                stream: stream.clone(),
                shard_id: shard_id.clone(),
            },
        }
    }

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

/// The SDK cause of a [`ReadError`] several readers were handed.
#[derive(Debug)]
struct CauseOf(Arc<ReadError>);

impl std::fmt::Display for CauseOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match std::error::Error::source(&*self.0) {
            Some(source) => std::fmt::Display::fmt(source, f),
            None => Ok(()),
        }
    }
}

impl std::error::Error for CauseOf {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0).and_then(std::error::Error::source)
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

/// Reads one shard in order, for one subscription.
///
/// The next GetRecords is in flight while the caller handles the current batch (read-ahead),
/// so the handler, not the network, sets the pace. [`next`](Self::next) is cancel-safe: its
/// only await is on the fetch task, which stays in place if the call is dropped, and the fetch
/// task does everything that waits (pacing, the read, reopening an expired iterator).
///
/// Readers of one [`SharedReads`] that stand at the same place in the shard share their reads
/// (one GetRecords, one turn, the answer handed to each; see `SharedReads`), and take turns on
/// the shard divided by tenant, then by subscription, as their [`ReaderOwner`] says. Every
/// reader is still handed every record after its position, once and in order.
pub struct ShardReader {
    /// This reader, counted on its shard's hub.
    registration: Registration,
    owner: Arc<ReaderOwner>,
    stream: String,
    shard_id: String,
    config: ReaderConfig,
    /// Where the reader stands: after the last record it was handed, or where it opened.
    position: Position,
    /// Where a reader opened at the tip reopens if its iterator expires before it read a
    /// record: a little before it opened.
    tip: StartAt,
    /// The iterator of the read in flight, to read again with should its task fail.
    iterator: String,
    in_flight: Option<JoinHandle<Arc<Outcome>>>,
    /// Failed reads in a row (throttles are not failures).
    backoff: Backoff,
    finished: bool,
    /// The shards that continue this one, as its last read named them.
    children: Vec<String>,
    /// How far the last read was behind the tip, as the service said.
    millis_behind_latest: Option<i64>,
}

impl ShardReader {
    /// Opens `shard_id` of `stream` at `start`, for `owner`'s subscription; its reads go
    /// through `reads` (the host's reads with one client): shared with the other readers of
    /// the shard that stand where it stands, each taking its turn from `reads`' pacing.
    ///
    /// Opened at the tip, a reader may start on the iterator of a read of the shard that
    /// reached the tip less than a second before: it may then be handed records that arrived
    /// up to a second before it opened, and misses none.
    ///
    /// # Errors
    /// When the stream is gone, or no iterator could be had after repeated tries.
    pub async fn open(
        reads: &SharedReads,
        owner: ReaderOwner,
        stream: &str,
        shard_id: &str,
        start: StartAt,
        config: ReaderConfig,
    ) -> Result<Self, ReadError> {
        let opened = Instant::now();
        // Reopening at the tip could skip records that arrived while the iterator sat
        // unused; a timestamp a little before opening cannot.
        let tip = StartAt::AtTimestamp(SystemClock.now_ms().saturating_sub(1000));
        let registration = reads.hub(stream, shard_id).register();
        let hub = registration.hub();
        let mut backoff = Backoff::new(config.backoff_first, config.backoff_max);
        let (position, iterator) = hub.open_at(&start, opened, &mut backoff, &config).await?;
        let mut reader = Self {
            registration,
            owner: Arc::new(owner),
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
            config,
            position,
            tip,
            iterator: String::new(),
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
    /// Throttled reads are read again at the shard's next turn (which the throttle moved back
    /// for every reader of the shard) and never count as failures; reads that fail or time
    /// out are read again after a backoff pause.
    ///
    /// # Errors
    /// [`ReadError::StreamGone`] when the stream was deleted; [`ReadError::Service`] after
    /// 20 failed reads in a row; [`ReadError::Stalled`] if the reader of an unfinished shard
    /// has no read in flight, which would be a bug.
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
            let outcome = match handle.await {
                Ok(outcome) => outcome,
                Err(join) => Arc::new(Outcome::Failed {
                    error: Arc::new(join),
                    iterator: self.iterator.clone(),
                }),
            };
            // From here to the next fetch nothing awaits: dropping this call cannot lose it.
            self.in_flight = None;
            let batch = match Arc::try_unwrap(outcome) {
                Ok(Outcome::Records(mut answer)) => {
                    let records = std::mem::take(&mut answer.records);
                    self.received(&answer, records)
                }
                Ok(other) => self.not_read(&other)?,
                Err(shared) => match &*shared {
                    // Each sharer's batch is its own vector; the records' buffers are shared.
                    Outcome::Records(answer) => self.received(answer, answer.records.clone()),
                    other => self.not_read(other)?,
                },
            };
            if let Some(batch) = batch {
                return Ok(batch);
            }
        }
    }

    /// Takes an answer; returns a batch unless it was empty and the shard goes on.
    fn received(&mut self, answer: &Answer, records: Vec<Delivery>) -> Option<Batch> {
        self.backoff.reset();
        self.millis_behind_latest = answer.millis_behind_latest;
        self.position = answer.next_position.clone();
        match &answer.next_iterator {
            Some(iterator) => {
                let spacing = self.config.min_read_interval.max(MIN_READ_INTERVAL);
                let mut not_before = answer.started + spacing;
                if records.is_empty() {
                    not_before = not_before.max(answer.answered + self.config.poll_interval);
                }
                self.fetch(iterator.clone(), not_before);
                (!records.is_empty()).then_some(Batch {
                    records,
                    shard_end: false,
                })
            }
            None => {
                self.finished = true;
                self.children = answer.children.clone();
                Some(Batch {
                    records,
                    shard_end: true,
                })
            }
        }
    }

    /// Takes a read that brought no answer: reads again, or gives up.
    fn not_read(&mut self, outcome: &Outcome) -> Result<Option<Batch>, ReadError> {
        match outcome {
            // The throttle moved the shard's next turn back; waiting for it is the pause.
            Outcome::Throttled { iterator, .. } => self.fetch(iterator.clone(), Instant::now()),
            Outcome::Failed { error, iterator } => self.retry_later(error, iterator.clone())?,
            Outcome::Fatal(error) => return Err(ReadError::for_another(error)),
            Outcome::Records(_) => {}
        }
        Ok(None)
    }

    /// Schedules the failed read again after a backoff pause, with the same iterator (still
    /// valid after a failed read).
    fn retry_later(
        &mut self,
        error: &Arc<dyn std::error::Error + Send + Sync>,
        iterator: String,
    ) -> Result<(), ReadError> {
        if self.backoff.failures() >= MAX_CONSECUTIVE_FAILURES {
            return Err(ReadError::Service {
                operation: "GetRecords",
                target: format!("`{}`/{}", self.stream, self.shard_id),
                tries: self.backoff.failures() + 1,
                source: Box::new(error.clone()),
            });
        }
        let pause = self.backoff.next_pause();
        tracing::debug!(stream = %self.stream, shard = %self.shard_id, ?pause,
            failures = self.backoff.failures(), "reading again after a failed read");
        self.fetch(iterator, Instant::now() + pause);
        Ok(())
    }

    /// Starts the next read: after `not_before`, the read of where the reader stands, shared
    /// with the readers that stand there too; `iterator` is this reader's own for it.
    fn fetch(&mut self, iterator: String, not_before: Instant) {
        let hub = self.registration.hub().clone();
        let request = ReadRequest {
            position: self.position.clone(),
            iterator: iterator.clone(),
            tip: self.tip.clone(),
            owner: self.owner.clone(),
            config: self.config.clone(),
        };
        self.iterator = iterator;
        self.in_flight = Some(tokio::spawn(async move {
            tokio::time::sleep_until(not_before).await;
            hub.read(request).await
        }));
    }
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
