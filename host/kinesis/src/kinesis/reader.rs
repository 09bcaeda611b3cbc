//! Reading one shard for one subscription, in either read mode: paced, shared GetRecords with
//! read-ahead, backoff and expiry (polling), or records pushed through the app's consumer
//! (enhanced fan-out, `fan_out.rs`). Every caller sees the same reader.

use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::batch::Batch;
use super::consumer::Consumers;
use super::fan_out::{FanOutNext, FanOutReader};
use super::listings::ShardListings;
use super::pacing::{MIN_READ_INTERVAL, ReaderOwner};
use super::progress::ReadProgress;
use super::read_config::{MAX_CONSECUTIVE_FAILURES, ReadMode, ReaderConfig, StartAt};
use super::read_error::ReadError;
use super::shared::{Answer, Outcome, Position, ReadRequest, Registration, SharedReads};
use ruststream_common::backoff::Backoff;
use ruststream_runtime::{Clock, Delivery, SystemClock};

/// Reads one shard in order, for one subscription, by polling or by enhanced fan-out: the
/// same batches, ends and lag either way, so the pipeline, settlement, checkpoints, seeks and
/// metrics do not depend on the mode.
pub struct ShardReader {
    source: Source,
}

enum Source {
    Polling(Box<PollingReader>),
    FanOut(Box<FanOut>),
}

/// A fan-out reader, and what it takes to read its shard on by polling once it is closed.
struct FanOut {
    reader: FanOutReader,
    reads: Arc<SharedReads>,
    owner: ReaderOwner,
    config: ReaderConfig,
    /// Where polling takes over, once the shard was found closed (kept while the polling
    /// reader opens, so a dropped `next` loses nothing).
    closed_at: Option<StartAt>,
}

impl ShardReader {
    /// Opens `shard_id` of `stream` at `start` for polling, for `owner`'s subscription; its
    /// reads go through `reads` (the host's reads with one client): shared with the other
    /// readers of the shard that stand where it stands, each taking its turn from `reads`'
    /// pacing.
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
        let polling = PollingReader::open(reads, owner, stream, shard_id, start, config).await?;
        Ok(Self {
            source: Source::Polling(Box::new(polling)),
        })
    }

    /// Opens `shard_id` of `stream` at `start` by enhanced fan-out, through consumer
    /// `consumer` (registered through `consumers` if it is not yet, and waited for until
    /// active). Opened at the tip, it subscribes from when it was asked to open, by the host's
    /// clock (the subscription is made later, from a task of its own): it misses none of what
    /// arrives from then on, and reads nothing from before. A shard that turns out closed and
    /// refuses subscriptions is read to its end by polling, through `reads` for `owner`.
    ///
    /// # Errors
    /// When the stream is gone, or the consumer cannot be registered (the stream has all the
    /// consumers it may have: [`ReadError::ConsumerLimit`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn open_fan_out(
        client: &aws_sdk_kinesis::Client,
        listings: Arc<ShardListings>,
        consumers: &Consumers,
        consumer: &str,
        reads: Arc<SharedReads>,
        owner: ReaderOwner,
        stream: &str,
        shard_id: &str,
        start: StartAt,
        config: &ReaderConfig,
    ) -> Result<Self, ReadError> {
        // The tip as it is now: the subscription goes out later, from a task of its own,
        // maybe after the consumer is registered or a previous holder has let go.
        let start = match start {
            StartAt::Latest => StartAt::AtTimestamp(SystemClock.now_ms()),
            other => other,
        };
        let arn = consumers.arn(client, stream, consumer).await?;
        let reader = FanOutReader::open(
            client.clone(),
            listings,
            arn,
            stream,
            shard_id,
            start,
            config,
        );
        Ok(Self {
            source: Source::FanOut(Box::new(FanOut {
                reader,
                reads,
                owner,
                config: config.clone(),
                closed_at: None,
            })),
        })
    }

    /// How it reads now (a fan-out reader of a closed shard reads its rest by polling).
    pub fn mode(&self) -> ReadMode {
        match &self.source {
            Source::Polling(_) => ReadMode::Polling,
            Source::FanOut(_) => ReadMode::FanOut,
        }
    }

    /// Whether the shard was read to its end.
    pub fn is_finished(&self) -> bool {
        match &self.source {
            Source::Polling(reader) => reader.is_finished(),
            // A closed shard's end is read by polling, which takes over.
            Source::FanOut(_) => false,
        }
    }

    /// The shards that continue this one (after a split or merge), as the read that reached its
    /// end named them (`ChildShards`); empty until then, or if the server does not say.
    pub fn children(&self) -> &[String] {
        match &self.source {
            Source::Polling(reader) => reader.children(),
            Source::FanOut(_) => &[],
        }
    }

    /// How many milliseconds the last answer (or event) was behind the tip of the shard, as
    /// the service reported it; `None` before the first.
    pub fn millis_behind_latest(&self) -> Option<i64> {
        match &self.source {
            Source::Polling(reader) => reader.millis_behind_latest(),
            Source::FanOut(fan_out) => fan_out.reader.millis_behind_latest(),
        }
    }

    /// The lag of this reader's last answer and when it came, updated as answers arrive:
    /// what says how far behind the shard is while the reader is not asked for records.
    pub fn progress(&self) -> Arc<ReadProgress> {
        match &self.source {
            Source::Polling(reader) => reader.progress(),
            Source::FanOut(fan_out) => fan_out.reader.progress(),
        }
    }

    /// The next batch of records (never empty unless it ends the shard). Cancel-safe.
    ///
    /// # Errors
    /// [`ReadError::StreamGone`] when the stream was deleted; [`ReadError::Service`] after
    /// 20 failed reads (or subscriptions) in a row; [`ReadError::Stalled`] if the reader of an
    /// unfinished shard has no read in flight, which would be a bug.
    pub async fn next(&mut self) -> Result<Batch, ReadError> {
        loop {
            let fan_out = match &mut self.source {
                Source::Polling(reader) => return reader.next().await,
                Source::FanOut(fan_out) => fan_out,
            };
            let position = match &fan_out.closed_at {
                Some(position) => position.clone(),
                None => match fan_out.reader.next().await? {
                    FanOutNext::Batch(batch) => return Ok(batch),
                    FanOutNext::Closed(position) => {
                        let (stream, shard) = fan_out.reader.shard();
                        tracing::info!(stream, shard, from = ?position,
                            "the shard is closed; reading the rest of it by polling, to its end");
                        fan_out.closed_at = Some(position.clone());
                        position
                    }
                },
            };
            let (stream, shard_id) = fan_out.reader.shard();
            let polling = PollingReader::open(
                &fan_out.reads,
                fan_out.owner.clone(),
                stream,
                shard_id,
                position,
                fan_out.config.clone(),
            )
            .await?;
            self.source = Source::Polling(Box::new(polling));
        }
    }
}

/// Reads one shard in order, for one subscription, by polling.
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
struct PollingReader {
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
    /// The same, and when, for whoever reports lag while this reader is not polled.
    progress: Arc<ReadProgress>,
}

impl PollingReader {
    /// See [`ShardReader::open`].
    async fn open(
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
        let expected_gap = config.poll_interval.max(config.min_read_interval);
        let progress = Arc::new(ReadProgress::new(expected_gap));
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
            progress,
        };
        reader.fetch(iterator, Instant::now());
        Ok(reader)
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn children(&self) -> &[String] {
        &self.children
    }

    fn millis_behind_latest(&self) -> Option<i64> {
        self.millis_behind_latest
    }

    fn progress(&self) -> Arc<ReadProgress> {
        self.progress.clone()
    }

    /// See [`ShardReader::next`]. Throttled reads are read again at the shard's next turn
    /// (which the throttle moved back for every reader of the shard) and never count as
    /// failures; reads that fail or time out are read again after a backoff pause.
    async fn next(&mut self) -> Result<Batch, ReadError> {
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
        // Noted as it arrived (`fetch`); from here the pipeline says what it holds.
        self.progress.handed_on();
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
        let progress = self.progress.clone();
        self.in_flight = Some(tokio::spawn(async move {
            tokio::time::sleep_until(not_before).await;
            let outcome = hub.read(request).await;
            // Noted on arrival, not when taken: a reader nobody polls (its tenant paused)
            // still says how far behind its shard is.
            if let Outcome::Records(answer) = &*outcome {
                let oldest = answer.records.first().map(|record| record.arrival_ms);
                progress.answered(answer.millis_behind_latest, oldest, SystemClock.now_ms());
            }
            outcome
        }));
    }
}

impl Drop for PollingReader {
    fn drop(&mut self) {
        if let Some(handle) = self.in_flight.take() {
            handle.abort();
        }
    }
}
