//! Reading one shard by enhanced fan-out: Kinesis pushes the shard's records to the app's
//! consumer over `SubscribeToShard`, as they arrive, instead of the reader polling.
//!
//! - One subscription per reader, in a task of its own that hands each event with records to
//!   the reader (one event ahead, as polling reads one answer ahead), so the handler sets the
//!   pace and an event waits while the pipeline is busy.
//! - A subscription lasts at most five minutes; it is then made again from the last event's
//!   `ContinuationSequenceNumber`, so no record is skipped and none is handed twice. Before any
//!   event, a reader opened at the tip subscribes again a second before it opened (as polling
//!   reopens an expired iterator), never at the tip.
//! - `ResourceInUseException` (the consumer is still subscribed to the shard: the previous
//!   holder of a lease handed over has not let go yet) is waited out with backoff, however
//!   long; other failures are tried again with backoff, up to 20 in a row.
//! - A subscription that brings no event for [`STALLED_AFTER`] (Kinesis sends one at least
//!   every five seconds, records or not) is dropped and made again.
//! - The event that ends a closed shard names its children (`ChildShards`): the reader is then
//!   finished, and the coordinator starts the children after it, as for polling.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::types::{ShardIteratorType, StartingPosition, SubscribeToShardEventStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::answer::delivery;
use super::progress::ReadProgress;
use super::read_config::{MAX_CONSECUTIVE_FAILURES, ReaderConfig, StartAt};
use super::read_error::ReadError;
use super::reader::Batch;
use ruststream_runtime::backoff::Backoff;
use ruststream_runtime::clock::{Clock, SystemClock};
use ruststream_runtime::escape::one_line;

/// How long a subscription may bring no event before it is made again.
pub const STALLED_AFTER: Duration = Duration::from_secs(30);
/// The most a quiet subscription goes between events: Kinesis's heartbeat.
const EVENT_GAP: Duration = Duration::from_secs(5);

/// What the subscription task hands the reader.
enum Event {
    /// Records (never empty unless `children` ends the shard), how far behind the tip, and the
    /// children once the shard ended.
    Records {
        batch: Batch,
        millis_behind_latest: i64,
        children: Option<Vec<String>>,
    },
    /// The shard cannot be read on.
    Fatal(ReadError),
}

/// Reads one shard in order through consumer `consumer_arn`.
pub(crate) struct FanOutReader {
    stream: String,
    shard_id: String,
    events: mpsc::Receiver<Event>,
    task: JoinHandle<()>,
    finished: bool,
    children: Vec<String>,
    millis_behind_latest: Option<i64>,
    progress: Arc<ReadProgress>,
}

impl FanOutReader {
    /// Subscribes to `shard_id` of `stream` through `consumer_arn`, from `start`.
    pub(crate) fn open(
        client: Client,
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
            consumer_arn,
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
            // A reader opened at the tip that must subscribe again before its first event
            // does so a second before it opened: it may see a record twice, never miss one.
            tip: StartAt::AtTimestamp(SystemClock.now_ms().saturating_sub(1000)),
            position: start,
            backoff: Backoff::new(config.backoff_first, config.backoff_max),
            progress: progress.clone(),
            sender,
        };
        Self {
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
            events,
            task: tokio::spawn(subscription.run()),
            finished: false,
            children: Vec::new(),
            millis_behind_latest: None,
            progress,
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }

    pub(crate) fn children(&self) -> &[String] {
        &self.children
    }

    pub(crate) fn millis_behind_latest(&self) -> Option<i64> {
        self.millis_behind_latest
    }

    pub(crate) fn progress(&self) -> Arc<ReadProgress> {
        self.progress.clone()
    }

    /// The next records; cancel-safe (its one await is on the channel).
    pub(crate) async fn next(&mut self) -> Result<Batch, ReadError> {
        if self.finished {
            return Ok(Batch {
                records: Vec::new(),
                shard_end: true,
            });
        }
        match self.events.recv().await {
            Some(Event::Records {
                batch,
                millis_behind_latest,
                children,
            }) => {
                self.millis_behind_latest = Some(millis_behind_latest);
                self.progress.handed_on();
                if let Some(children) = children {
                    self.finished = true;
                    self.children = children;
                }
                Ok(batch)
            }
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
    consumer_arn: String,
    stream: String,
    shard_id: String,
    tip: StartAt,
    /// Where the next subscription starts: the reader's start, then after the last event.
    position: StartAt,
    backoff: Backoff,
    progress: Arc<ReadProgress>,
    sender: mpsc::Sender<Event>,
}

/// How one subscription ended.
enum Ended {
    /// Its five minutes are over, or it went quiet: subscribe again from the continuation.
    Again,
    /// The shard ended, or the reader is gone.
    Done,
}

impl Subscription {
    async fn run(mut self) {
        loop {
            match self.subscribe_once().await {
                Ok(Ended::Again) => {}
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
        let subscribed = self
            .client
            .subscribe_to_shard()
            .consumer_arn(&self.consumer_arn)
            .shard_id(&self.shard_id)
            .starting_position(starting_position(&self.position)?)
            .send()
            .await;
        let mut output = match subscribed {
            Ok(output) => output,
            Err(error) => {
                let service = error.as_service_error();
                if service.is_some_and(|e| e.is_resource_in_use_exception()) {
                    // Another subscription of the consumer to this shard still runs (a
                    // handoff's previous holder): wait it out, for as long as it takes.
                    let pause = self.backoff.next_pause();
                    tracing::debug!(stream = %self.stream, shard = %self.shard_id, ?pause,
                        "the consumer is still subscribed to the shard elsewhere; waiting");
                    tokio::time::sleep(pause).await;
                    return Ok(Ended::Again);
                }
                if service.is_some_and(|e| e.is_resource_not_found_exception()) {
                    return Err(ReadError::stream_gone(&self.client, &self.stream));
                }
                return self.failed("SubscribeToShard", Box::new(error)).await;
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
                Ok(Ok(None)) => return Ok(Ended::Again),
                Ok(Ok(Some(SubscribeToShardEventStream::SubscribeToShardEvent(event)))) => event,
                Ok(Ok(Some(_))) => continue,
                Ok(Err(error)) => {
                    return self
                        .failed("SubscribeToShard (events)", Box::new(error))
                        .await;
                }
            };
            self.backoff.reset();
            let records: Vec<_> = event.records.into_iter().map(delivery).collect();
            let oldest = records.first().map(|record| record.arrival_ms);
            self.progress.answered(
                Some(event.millis_behind_latest),
                oldest,
                SystemClock.now_ms(),
            );
            let children: Option<Vec<String>> = event
                .child_shards
                .filter(|children| !children.is_empty())
                .map(|children| children.into_iter().map(|c| c.shard_id).collect());
            if !event.continuation_sequence_number.is_empty() {
                self.position = StartAt::AfterSequence(event.continuation_sequence_number);
            } else if let Some(last) = records.last() {
                self.position = StartAt::AfterSequence(last.sequence_number.to_string());
            }
            if records.is_empty() && children.is_none() {
                continue;
            }
            let end = children.is_some();
            let handed = Event::Records {
                batch: Batch {
                    records,
                    shard_end: end,
                },
                millis_behind_latest: event.millis_behind_latest,
                children,
            };
            if self.sender.send(handed).await.is_err() || end {
                return Ok(Ended::Done);
            }
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
        if self.position == StartAt::Latest {
            self.position = self.tip.clone();
        }
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
