//! Reading one shard by enhanced fan-out: Kinesis pushes the shard's records to the app's
//! consumer over `SubscribeToShard`, as they arrive, instead of the reader polling.
//!
//! - One subscription per reader, in a task of its own that hands each event with records to
//!   the reader (one event ahead, as polling reads one answer ahead), so the handler sets the
//!   pace and an event waits while the pipeline is busy. An event is handed to the pipeline
//!   in parts of at most the reader's `get_records_limit` records, as GetRecords answers are, so
//!   what the pipeline checks between batches (the copies it owes, a lost lease, a stop)
//!   comes as often in both modes.
//! - A subscription lasts at most five minutes; it is then made again from the last event's
//!   `ContinuationSequenceNumber`, so no record is skipped and none is handed twice. A reader
//!   is never opened at the tip (`ShardReader::open_fan_out` turns it into the time it was
//!   opened), so subscribing again before any event (a refusal: the previous holder is still
//!   subscribed) neither skips what arrived meanwhile nor reads what came before.
//! - `ResourceInUseException` (the consumer is still subscribed to the shard: the previous
//!   holder of a lease handed over has not let go yet) is waited out with backoff, however
//!   long; other failures are tried again with backoff, up to 20 in a row.
//! - A subscription that brings no event for [`STALLED_AFTER`] (Kinesis sends one at least
//!   every five seconds, records or not) is dropped and made again.
//! - A closed shard is read to its end by polling: once an event names the shard's children
//!   (`ChildShards`), or a subscription fails and a listing says the shard is closed (a server
//!   may refuse to subscribe to one; kinesis-local does), the reader hands back the position
//!   it reached ([`FanOutNext::Closed`]) and the caller reads on from there with GetRecords to
//!   `SHARD_END`, which names the children as polling always does. On Kinesis that costs one
//!   GetShardIterator and one empty GetRecords per closed shard; it also makes the end the
//!   same in both modes, whatever a server puts in its events.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::types::{ShardIteratorType, StartingPosition, SubscribeToShardEventStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::answer::delivery;
use super::batch::Batch;
use super::listings::ShardListings;
use super::progress::ReadProgress;
use super::read_config::{MAX_CONSECUTIVE_FAILURES, ReaderConfig, StartAt};
use super::read_error::ReadError;
use ruststream_common::backoff::Backoff;
use ruststream_common::escape::one_line;
use ruststream_runtime::Delivery;
use ruststream_runtime::{Clock, SystemClock};

/// How long a subscription may bring no event before it is made again.
pub const STALLED_AFTER: Duration = Duration::from_secs(30);
/// Kinesis takes one `SubscribeToShard` a second per consumer and shard: calls are spaced so.
const SUBSCRIBE_INTERVAL: Duration = Duration::from_secs(1);
/// The most a quiet subscription goes between events: Kinesis's heartbeat.
const EVENT_GAP: Duration = Duration::from_secs(5);

/// What the subscription task hands the reader.
enum Event {
    /// Records (never empty), and how far behind the tip.
    Records {
        batch: Batch,
        millis_behind_latest: i64,
    },
    /// The shard is closed and cannot be subscribed to: read on from `.0` by polling.
    Closed(StartAt),
    /// The shard cannot be read on.
    Fatal(ReadError),
}

/// What [`FanOutReader::next`] came to.
pub(crate) enum FanOutNext {
    /// Records (never empty).
    Batch(Batch),
    /// The shard is closed and cannot be subscribed to: what is left of it is read from this
    /// position on by polling.
    Closed(StartAt),
}

/// Reads one shard in order through consumer `consumer_arn`.
pub(crate) struct FanOutReader {
    stream: String,
    shard_id: String,
    events: mpsc::Receiver<Event>,
    task: JoinHandle<()>,
    millis_behind_latest: Option<i64>,
    progress: Arc<ReadProgress>,
    /// Most records handed on at once.
    limit: usize,
    /// The rest of the last event, past what was handed on.
    rest: std::vec::IntoIter<Delivery>,
}

impl FanOutReader {
    /// Subscribes to `shard_id` of `stream` through `consumer_arn`, from `start`.
    pub(crate) fn open(
        client: Client,
        listings: Arc<ShardListings>,
        consumer_arn: String,
        stream: &str,
        shard_id: &str,
        start: StartAt,
        config: &ReaderConfig,
    ) -> Self {
        let progress = Arc::new(ReadProgress::new(EVENT_GAP));
        let (sender, events) = mpsc::channel(1);
        let subscription = Subscription {
            client,
            listings,
            consumer_arn,
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
            position: start,
            backoff: Backoff::new(config.backoff_first, config.backoff_max),
            // Up to a few seconds: a killed holder's subscription ends when the service sees
            // its connection go, and the next holder should not sleep long past that.
            in_use: Backoff::new(SUBSCRIBE_INTERVAL, 3 * SUBSCRIBE_INTERVAL),
            subscribed_at: None,
            progress: progress.clone(),
            sender,
        };
        Self {
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
            events,
            task: tokio::spawn(subscription.run()),
            millis_behind_latest: None,
            progress,
            limit: usize::try_from(config.get_records_limit)
                .unwrap_or(1)
                .max(1),
            rest: Vec::new().into_iter(),
        }
    }

    /// The stream and shard it reads.
    pub(crate) fn shard(&self) -> (&str, &str) {
        (&self.stream, &self.shard_id)
    }

    pub(crate) fn millis_behind_latest(&self) -> Option<i64> {
        self.millis_behind_latest
    }

    pub(crate) fn progress(&self) -> Arc<ReadProgress> {
        self.progress.clone()
    }

    /// The next `limit` records of the last event as a batch.
    fn part(&mut self) -> Batch {
        let records: Vec<Delivery> = self.rest.by_ref().take(self.limit).collect();
        if self.rest.len() == 0 {
            self.progress.handed_on();
        }
        Batch {
            records,
            shard_end: false,
        }
    }

    /// The next records; cancel-safe (its one await is on the channel).
    pub(crate) async fn next(&mut self) -> Result<FanOutNext, ReadError> {
        if self.rest.len() > 0 {
            return Ok(FanOutNext::Batch(self.part()));
        }
        match self.events.recv().await {
            Some(Event::Records {
                batch,
                millis_behind_latest,
            }) => {
                self.millis_behind_latest = Some(millis_behind_latest);
                if batch.records.len() <= self.limit {
                    self.progress.handed_on();
                    return Ok(FanOutNext::Batch(batch));
                }
                self.rest = batch.records.into_iter();
                Ok(FanOutNext::Batch(self.part()))
            }
            Some(Event::Closed(position)) => Ok(FanOutNext::Closed(position)),
            Some(Event::Fatal(error)) => Err(error),
            None => Err(ReadError::Stalled {
                stream: self.stream.clone(),
                shard_id: self.shard_id.clone(),
            }),
        }
    }
}

impl Drop for FanOutReader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The task that keeps a shard subscribed.
struct Subscription {
    client: Client,
    listings: Arc<ShardListings>,
    consumer_arn: String,
    stream: String,
    shard_id: String,
    /// Where the next subscription starts: the reader's start, then after the last event.
    position: StartAt,
    /// Failures in a row (20 end the reader).
    backoff: Backoff,
    /// Refusals in a row because the consumer is still subscribed elsewhere (never the end).
    in_use: Backoff,
    /// When the last `SubscribeToShard` went out.
    subscribed_at: Option<tokio::time::Instant>,
    progress: Arc<ReadProgress>,
    sender: mpsc::Sender<Event>,
}

/// Why a subscription was refused (or its events failed), as far as it matters here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// `ResourceInUseException`: the consumer is still subscribed to the shard elsewhere.
    InUse,
    /// `ResourceNotFoundException`: the stream (or consumer) is gone.
    Gone,
    /// Anything else: a failure to try again.
    Other,
}

/// How one subscription ended.
enum Ended {
    /// Its five minutes are over, or it went quiet: subscribe again from the continuation.
    Again,
    /// The shard is closed: its rest is read by polling.
    Closed,
    /// The reader is gone.
    Done,
}

impl Subscription {
    async fn run(mut self) {
        loop {
            let ended = self.subscribe_once().await;
            self.progress.subscribed(None);
            match ended {
                Ok(Ended::Again) => {}
                Ok(Ended::Closed) => {
                    let _ = self.sender.send(Event::Closed(self.position.clone())).await;
                    return;
                }
                Ok(Ended::Done) => return,
                Err(error) => {
                    let _ = self.sender.send(Event::Fatal(error)).await;
                    return;
                }
            }
        }
    }

    fn target(&self) -> String {
        format!("`{}`/{}", self.stream, self.shard_id)
    }

    /// One `SubscribeToShard` and its events.
    async fn subscribe_once(&mut self) -> Result<Ended, ReadError> {
        if let Some(last) = self.subscribed_at {
            tokio::time::sleep_until(last + SUBSCRIBE_INTERVAL).await;
        }
        self.subscribed_at = Some(tokio::time::Instant::now());
        let subscribed = self
            .client
            .subscribe_to_shard()
            .consumer_arn(&self.consumer_arn)
            .shard_id(&self.shard_id)
            .starting_position(starting_position(&self.position)?)
            .send()
            .await;
        let mut output = match subscribed {
            Ok(output) => {
                self.progress.subscribed(Some(SystemClock.now_ms()));
                output
            }
            Err(error) => {
                let refusal = match error.as_service_error() {
                    Some(e) if e.is_resource_in_use_exception() => Refusal::InUse,
                    Some(e) if e.is_resource_not_found_exception() => Refusal::Gone,
                    _ => Refusal::Other,
                };
                let target = || self.target();
                let error = match ReadError::denied("SubscribeToShard", target, error) {
                    Ok(denied) => return Err(denied),
                    Err(error) => error,
                };
                return self
                    .refused("SubscribeToShard", refusal, Box::new(error))
                    .await;
            }
        };
        loop {
            let next = tokio::time::timeout(STALLED_AFTER, output.event_stream.recv()).await;
            let event = match next {
                Err(_) => {
                    tracing::warn!(stream = %self.stream, shard = %self.shard_id, after = ?STALLED_AFTER,
                        "the shard's subscription brought no event; subscribing again");
                    return Ok(Ended::Again);
                }
                Ok(Ok(None)) => {
                    tracing::debug!(stream = %self.stream, shard = %self.shard_id, from = ?self.position,
                        "the shard's subscription ended; subscribing again from its continuation");
                    return Ok(Ended::Again);
                }
                Ok(Ok(Some(SubscribeToShardEventStream::SubscribeToShardEvent(event)))) => event,
                Ok(Ok(Some(_))) => continue,
                Ok(Err(error)) => {
                    // A refusal may come as the stream's first message rather than as the
                    // call's answer (kinesis-local sends `ResourceInUseException` so).
                    let refusal = match error.as_service_error() {
                        Some(e) if e.is_resource_in_use_exception() => Refusal::InUse,
                        Some(e) if e.is_resource_not_found_exception() => Refusal::Gone,
                        _ => Refusal::Other,
                    };
                    let source = Box::new(error);
                    return self
                        .refused("SubscribeToShard (events)", refusal, source)
                        .await;
                }
            };
            self.backoff.reset();
            self.in_use.reset();
            let records: Vec<_> = event.records.into_iter().map(delivery).collect();
            let oldest = records.first().map(|record| record.arrival_ms);
            self.progress.answered(
                Some(event.millis_behind_latest),
                oldest,
                SystemClock.now_ms(),
            );
            let closing = event
                .child_shards
                .is_some_and(|children| !children.is_empty());
            if !event.continuation_sequence_number.is_empty() {
                self.position = StartAt::AfterSequence(event.continuation_sequence_number);
            } else if let Some(last) = records.last() {
                self.position = StartAt::AfterSequence(last.sequence_number.to_string());
            }
            // A closed shard's last records come before its end: check once nothing comes.
            if records.is_empty() && !closing && self.is_closed().await {
                return Ok(Ended::Closed);
            }
            if !records.is_empty() {
                let handed = Event::Records {
                    batch: Batch {
                        records,
                        shard_end: false,
                    },
                    millis_behind_latest: event.millis_behind_latest,
                };
                if self.sender.send(handed).await.is_err() {
                    return Ok(Ended::Done);
                }
            }
            if closing {
                return Ok(Ended::Closed);
            }
        }
    }

    /// A subscription was refused, or its events failed: the stream is gone, the shard is
    /// closed (read its rest by polling), the consumer is still subscribed elsewhere (waited
    /// out, however long), or a failure to try again.
    async fn refused(
        &mut self,
        operation: &'static str,
        refusal: Refusal,
        source: crate::Cause,
    ) -> Result<Ended, ReadError> {
        if refusal == Refusal::Gone {
            // The stream, or only the consumer (deregistered by hand): a stream still listed
            // keeps its shards, and the consumer is registered again at the next opening.
            return Err(match self.listings.list(&self.stream).await {
                Err(gone @ ReadError::StreamGone { .. }) => gone,
                _ => ReadError::ConsumerGone {
                    stream: self.stream.clone(),
                    consumer_arn: self.consumer_arn.clone(),
                },
            });
        }
        if self.is_closed().await {
            return Ok(Ended::Closed);
        }
        if refusal == Refusal::InUse {
            // Another subscription of the consumer to this shard still runs: the previous
            // holder of a lease handed over (or killed) has not let go yet.
            let pause = self.in_use.next_pause();
            tracing::info!(stream = %self.stream, shard = %self.shard_id, ?pause,
                "the consumer is still subscribed to the shard elsewhere (a previous holder); waiting");
            tokio::time::sleep(pause).await;
            return Ok(Ended::Again);
        }
        self.failed(operation, source).await
    }

    /// Whether the shard is closed, as the host's listing of the stream says (shared with the
    /// coordinators: no call of its own while the listing is fresh; a failed listing: not
    /// known closed).
    async fn is_closed(&self) -> bool {
        match self.listings.list(&self.stream).await {
            Ok(shards) => shards
                .iter()
                .any(|shard| shard.shard_id == self.shard_id && shard.closed),
            Err(_) => false,
        }
    }

    /// A call failed: subscribe again after a pause, or give up after 20 in a row.
    async fn failed(
        &mut self,
        operation: &'static str,
        source: crate::Cause,
    ) -> Result<Ended, ReadError> {
        if self.backoff.failures() >= MAX_CONSECUTIVE_FAILURES {
            return Err(ReadError::Service {
                operation,
                target: self.target(),
                tries: self.backoff.failures() + 1,
                source,
            });
        }
        let pause = self.backoff.next_pause();
        tracing::warn!(stream = %self.stream, shard = %self.shard_id, ?pause,
            error = %one_line(&*source), "subscribing to the shard failed; trying again");
        tokio::time::sleep(pause).await;
        Ok(Ended::Again)
    }
}

/// `start` as `SubscribeToShard` takes it.
fn starting_position(start: &StartAt) -> Result<StartingPosition, ReadError> {
    let builder = StartingPosition::builder();
    let builder = match start {
        StartAt::AfterSequence(sequence) => builder
            .r#type(ShardIteratorType::AfterSequenceNumber)
            .sequence_number(sequence),
        StartAt::AtSequence(sequence) => builder
            .r#type(ShardIteratorType::AtSequenceNumber)
            .sequence_number(sequence),
        StartAt::Horizon => builder.r#type(ShardIteratorType::TrimHorizon),
        StartAt::Latest => builder.r#type(ShardIteratorType::Latest),
        StartAt::AtTimestamp(ms) => {
            builder
                .r#type(ShardIteratorType::AtTimestamp)
                .timestamp(DateTime::from_millis(
                    i64::try_from(*ms).unwrap_or(i64::MAX),
                ))
        }
    };
    builder.build().map_err(|error| ReadError::Refused {
        operation: "SubscribeToShard",
        target: format!("starting position {start:?}"),
        source: Box::new(error),
    })
}
