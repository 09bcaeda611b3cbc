//! One shard of one subscription: delivering records to the component and settling them.
//!
//! The pipeline is the same whether records come from Kinesis or from `TestApp`'s in-process
//! streams. It tracks every delivery in the shard's watermark, calls the component once per
//! batch, and carries out what the settlement rules say about each outcome:
//!
//! - handled (ack, drop, retired): marked handled, so the checkpoint may pass it;
//! - held (`retry` without declared attempts): a warning, and the checkpoint stays in front of
//!   it while later records go on;
//! - a counted copy: published to the stream (or dead-letter stream) first, and only once the
//!   stream has acknowledged it is the original marked handled. A failed publish is retried
//!   with backoff while the original holds the checkpoint; nothing is ever lost. A copy that
//!   can never be published (larger than a stream record once its headers are added) is given
//!   up with an error, and its original is held like a `retry` without attempts.
//!
//! A `retry_after` copy carries its due time in its envelope; when it is read before it is due
//! the pipeline keeps it waiting (holding the checkpoint, not the records after it), so the
//! delay survives a crash and is honoured again when the copy is re-read. It holds the
//! checkpoint for at most the tenant's `max_hold`, then it is carried forward: published again
//! at the tip with the same due time.
//!
//! The tenant's limits bound all of it: a delay is clamped to its maximum (and a due time read
//! from the stream to the record's arrival plus that maximum, whoever wrote it), copies of a
//! record after the first are spaced by the minimum delay, and every copy and dead letter
//! draws on the tenant's write quota: past it the copy waits, its original holding.
//!
//! Three state machines make it up: delivery and settlement (`settle`), the copies on their
//! way to a stream (`outbox`), and the records held back from the component (`holding`).

mod holding;
mod lines;
mod metrics;
mod outbox;
mod settle;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::app::SubscriptionSpec;
use crate::checkpoint::{Ticket, Watermark};
use crate::clock::millis;
use crate::component::{HandlerInstance, LoadedComponent, TrapKind};
use crate::env::Env;
use crate::limits::Limits;
use crate::record::{Delivery, OutgoingRecord};
use crate::rollout::CallStats;
use crate::settlement::Outcome;
use crate::tenant::Tenant;
use holding::{Holding, Waiting};
use lines::RuntimeLog;
use metrics::SubscriptionMetrics;
use outbox::{Outbox, UnsentCopy};

/// Records handed to one call when the subscription does not set `batch`.
pub const DEFAULT_BATCH_LIMIT: usize = 1000;

/// Why a shard must stop being delivered on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The lease is lost: stop at once, write nothing more.
    Lost,
    /// Another host asked for the lease: stop at the next call boundary and hand it over.
    HandOff(String),
}

/// What one delivery came to, for observers (tests, metrics, quarantine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryReport {
    /// The tenant whose component handled it.
    pub tenant: String,
    /// The app (as the component declares it) that handled it.
    pub app: String,
    /// The subscription that handled it.
    pub subscriber: String,
    /// The stream it was read from.
    pub stream: String,
    /// The shard it was read from.
    pub shard_id: String,
    /// Its sequence number in that shard.
    pub sequence_number: String,
    /// Its attempt number: 1 on first delivery.
    pub attempt: u32,
    /// The outcome that was settled: the handler's, or the registration's `on_trap` stand-in.
    pub outcome: Outcome,
    /// Set when the call trapped instead of returning an outcome.
    pub trap: Option<TrapKind>,
    /// When the outcome was settled (the pipeline clock, ms since the epoch).
    pub at_ms: u64,
    /// When the stream took the record (ms since the epoch, as the stream reports it).
    pub arrival_ms: u64,
    /// How long the call that settled it took (one call handles a batch of records).
    pub call_duration: Duration,
}

/// How many deliveries of a shard settled with each outcome, on this host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeCounts {
    /// Settled as `ack`.
    pub ack: u64,
    /// Settled as `drop`.
    pub drop: u64,
    /// Settled as `retry`.
    pub retry: u64,
    /// Settled as `retry_after`.
    pub retry_after: u64,
    /// Calls that trapped on the record (settled as the registration's `on_trap`, also
    /// counted above).
    pub trapped: u64,
}

impl OutcomeCounts {
    fn count(&mut self, outcome: Outcome, trapped: bool) {
        let slot = match outcome {
            Outcome::Ack => &mut self.ack,
            Outcome::Drop => &mut self.drop,
            Outcome::Retry => &mut self.retry,
            Outcome::RetryAfter(_) => &mut self.retry_after,
        };
        *slot += 1;
        self.trapped += u64::from(trapped);
    }
}

/// Receives a report of every settled delivery.
pub type Observer = Arc<dyn Fn(&DeliveryReport) + Send + Sync>;

/// What a pipeline needs from its host: the environment its component runs in, the tenant
/// whose quarantine gate stops delivery and counts failed calls, and who to tell about each
/// settled delivery.
#[derive(Clone)]
pub struct PipelineEnv {
    /// The component's environment; its publisher also writes counted copies and dead
    /// letters.
    pub env: Env,
    /// The tenant owning the component.
    pub tenant: Arc<Tenant>,
    /// Told about every settled delivery.
    pub observer: Option<Observer>,
    /// Counts of this component version's calls, which a rollout judges it by.
    pub calls: Option<Arc<CallStats>>,
}

/// The delivery and settlement state of one shard for one subscription.
pub struct ShardPipeline {
    stream: Arc<str>,
    shard_id: Arc<str>,
    subscription: Arc<SubscriptionSpec>,
    instance: HandlerInstance,
    watermark: Watermark,
    holding: Holding,
    outbox: Outbox,
    /// Set when the shard must stop being delivered here (lease lost, or wanted elsewhere).
    stop: Option<watch::Receiver<Option<Stop>>>,
    checkpoint_moved: bool,
    outcomes: OutcomeCounts,
    env: PipelineEnv,
    log: RuntimeLog,
    /// The app the component declares, for reports.
    app: Arc<str>,
    metrics: SubscriptionMetrics,
    /// How long the call under settlement took, for reports.
    call_duration: Duration,
}

impl ShardPipeline {
    /// A pipeline delivering `shard_id` to `subscription` of `component`, in a fresh instance
    /// of it; `checkpoint` is the shard's stored position, if any.
    pub fn new(
        component: &LoadedComponent,
        subscription: Arc<SubscriptionSpec>,
        shard_id: &str,
        checkpoint: Option<String>,
        env: PipelineEnv,
    ) -> Self {
        let stream: Arc<str> = subscription.stream.as_str().into();
        let shard_id: Arc<str> = shard_id.into();
        let log = RuntimeLog::new(
            &env.env,
            &subscription.name,
            stream.clone(),
            shard_id.clone(),
        );
        let app: Arc<str> = component.app().name.as_str().into();
        let metrics = SubscriptionMetrics::new(env.tenant.name(), &app, &subscription.name);
        Self {
            instance: component.instance(env.env.clone()),
            stream,
            shard_id,
            subscription,
            watermark: Watermark::new(checkpoint),
            holding: Holding::default(),
            outbox: Outbox::default(),
            stop: None,
            checkpoint_moved: false,
            outcomes: OutcomeCounts::default(),
            env,
            log,
            app,
            metrics,
            call_duration: Duration::ZERO,
        }
    }

    /// The shard it delivers.
    pub fn shard_id(&self) -> &str {
        &self.shard_id
    }

    /// The subscription it delivers to.
    pub fn subscription(&self) -> &SubscriptionSpec {
        &self.subscription
    }

    /// Stops handing records to the component, at the next call boundary, once `stop` says
    /// so; once the lease is lost, copies are no longer published either (the next holder
    /// reads their originals again).
    pub fn stop_when(&mut self, stop: watch::Receiver<Option<Stop>>) {
        self.stop = Some(stop);
    }

    /// Delivers records read from the shard, in shard order. Returns the new checkpoint when
    /// the call moved it: what a lease store should persist.
    ///
    /// A copy's due time is honoured up to its arrival plus the tenant's maximum delay: the
    /// time travels in the record, and whoever wrote the record (an outside producer too)
    /// must not be able to hold the shard for longer.
    pub async fn deliver(&mut self, records: Vec<Delivery>) -> Option<String> {
        let now = self.env.env.clock.now_ms();
        let max_delay = millis(self.limits().copies.max_delay);
        let mut tickets = Vec::with_capacity(records.len());
        let mut all_ready = true;
        for delivery in &records {
            tickets.push(self.watermark.track(delivery.sequence_number.as_str()));
            all_ready &= delivery.due(max_delay).is_none_or(|due| due <= now)
                && !delivery.is_aggregated()
                && !self.too_old(delivery, now);
        }
        // Almost always every record goes straight to the component, without being moved
        // again; otherwise the others are set aside first.
        let (tickets, ready) = if all_ready {
            (tickets, records)
        } else {
            let (ready, expired) = self.set_aside(tickets, records, now, max_delay);
            for (ticket, delivery) in expired {
                self.expire(ticket, &delivery).await;
            }
            ready
        };
        self.run(tickets, Arc::new(ready)).await;
        self.moved_checkpoint()
    }

    /// Refuses aggregated records and keeps copies not yet due waiting; returns the rest, and
    /// apart the records past the subscription's maximum age, to give up on.
    #[allow(clippy::type_complexity)]
    fn set_aside(
        &mut self,
        tickets: Vec<Ticket>,
        records: Vec<Delivery>,
        now: u64,
        max_delay: u64,
    ) -> ((Vec<Ticket>, Vec<Delivery>), Vec<(Ticket, Delivery)>) {
        let mut ready = (Vec::new(), Vec::new());
        let mut expired = Vec::new();
        for (ticket, delivery) in tickets.into_iter().zip(records) {
            if delivery.is_aggregated() {
                self.refuse_aggregated(ticket, &delivery);
                continue;
            }
            if self.too_old(&delivery, now) {
                expired.push((ticket, delivery));
                continue;
            }
            match delivery.due(max_delay) {
                Some(due_at_ms) if due_at_ms > now => {
                    self.holding.wait(ticket, delivery, due_at_ms, now);
                }
                _ => {
                    ready.0.push(ticket);
                    ready.1.push(delivery);
                }
            }
        }
        (ready, expired)
    }

    /// Delivers waiting copies that are now due (and parked records, once the tenant is out
    /// of quarantine), carries forward copies held for `max_hold`, and retries copies whose
    /// pause is over. Returns the new checkpoint when the call moved it.
    pub async fn poll_due(&mut self) -> Option<String> {
        let now = self.env.env.clock.now_ms();
        let max_hold = millis(self.limits().copies.max_hold);
        let released = self
            .holding
            .release(now, max_hold, self.env.tenant.is_quarantined());
        // A copy waiting longer than `max_hold` is published again at the tip with the same
        // due time; once that one is in the stream this one is handled and the checkpoint
        // moves on. The wait survives restarts and retention, and holds nothing for long.
        for waiting in released.carry {
            let carried = self.carry(waiting);
            self.outbox.push(carried);
        }
        for (ticket, delivery) in released.expired {
            self.expire(ticket, &delivery).await;
        }
        self.run_records(released.unparked).await;
        self.run_records(released.due).await;
        for copy in self.outbox.take_due(now) {
            self.send_copy(copy).await;
        }
        self.moved_checkpoint()
    }

    /// The earliest time (ms since the epoch) at which [`poll_due`](Self::poll_due) has work.
    pub fn next_due_ms(&self) -> Option<u64> {
        let now = self.env.env.clock.now_ms();
        let max_hold = millis(self.limits().copies.max_hold);
        let held = self
            .holding
            .next_release_ms(now, max_hold, self.env.tenant.is_quarantined());
        held.into_iter().chain(self.outbox.next_try_ms()).min()
    }

    /// Publishes the copies still owed (their pause over or not), for at most `grace`: what a
    /// shard handed over owes before it goes.
    pub async fn send_copies(&mut self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        while !self.outbox.is_empty() && tokio::time::Instant::now() < deadline {
            for copy in self.outbox.take_all() {
                self.send_copy(copy).await;
            }
            if !self.outbox.is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    /// Where the checkpoint stands: the last record of the handled prefix.
    pub fn checkpoint(&self) -> Option<&str> {
        self.watermark.checkpoint()
    }

    /// The first record that is not handled, where the checkpoint is held.
    pub fn held_at(&self) -> Option<&str> {
        self.watermark.held_at()
    }

    /// How many of this shard's deliveries settled with each outcome.
    pub fn outcomes(&self) -> OutcomeCounts {
        self.outcomes
    }

    /// How many records read are not handled yet: held, waiting for their due time, parked,
    /// or whose copy is still being published.
    pub fn unhandled(&self) -> usize {
        self.watermark.in_flight()
    }

    /// How many copies are owed to a stream: waiting for their due time or being published.
    pub fn pending_copies(&self) -> usize {
        self.outbox.len() + self.holding.waiting()
    }

    /// Whether every delivered record is handled and no copy is pending.
    pub fn is_settled(&self) -> bool {
        self.watermark.in_flight() == 0 && self.outbox.is_empty() && !self.holding.has_parked()
    }

    /// Starts the bookkeeping afresh at `checkpoint` (a seek): records delivered before no
    /// longer move the checkpoint. Copies read and waiting for their due time are carried
    /// forward (published again at the tip with the same due time), and copies still being
    /// published go on being retried: every pending copy comes back at its due time, wherever
    /// the seek moved the reader.
    pub fn reset(&mut self, checkpoint: Option<String>) {
        self.watermark.reset(checkpoint);
        self.checkpoint_moved = false;
        for waiting in self.holding.clear() {
            let carried = self.carry(waiting);
            self.outbox.push(carried);
        }
    }

    /// Hands the records delivered from now on to another version of the component: a fresh
    /// instance of `component`, `subscription` as that version declares it (same name and
    /// stream; its settings apply from here), and its environment. Called between two calls,
    /// so no call is split between versions. The shard's bookkeeping carries over untouched:
    /// checkpoint, held records, waiting and unsent copies.
    pub fn swap(
        &mut self,
        component: &LoadedComponent,
        subscription: Arc<SubscriptionSpec>,
        env: PipelineEnv,
    ) {
        debug_assert_eq!(subscription.stream, *self.stream);
        self.log.flush();
        self.log = RuntimeLog::new(
            &env.env,
            &subscription.name,
            self.stream.clone(),
            self.shard_id.clone(),
        );
        self.instance = component.instance(env.env.clone());
        // The app name cannot change in a swap; the tenant's labels are rebuilt all the same,
        // so counts follow the subscription as the new version declares it.
        self.metrics = SubscriptionMetrics::new(env.tenant.name(), &self.app, &subscription.name);
        self.subscription = subscription;
        self.env = env;
    }

    /// How many times the component instance was replaced after a failure.
    pub fn instance_replacements(&self) -> u64 {
        self.instance.replacements()
    }

    fn stopped(&self) -> Option<Stop> {
        self.stop.as_ref().and_then(|stop| stop.borrow().clone())
    }

    fn limits(&self) -> &Limits {
        self.env.env.policy.limits()
    }

    fn mark(&mut self, ticket: Ticket) {
        if self.watermark.mark_handled(ticket) {
            self.checkpoint_moved = true;
        }
    }

    fn moved_checkpoint(&mut self) -> Option<String> {
        if !std::mem::take(&mut self.checkpoint_moved) {
            return None;
        }
        self.watermark.checkpoint().map(str::to_owned)
    }

    /// A waiting copy, to be published again as it is (same retry count, same due time).
    fn carry(&self, waiting: Waiting) -> UnsentCopy {
        let delivery = &waiting.delivery;
        let record =
            OutgoingRecord::counted_copy(delivery, delivery.retry_count, Some(waiting.due_at_ms));
        UnsentCopy::new(
            waiting.ticket,
            delivery.sequence_number.to_string(),
            self.stream.to_string(),
            record,
        )
    }

    /// Publishes `copy`, unless the lease is lost: the next holder handles the original
    /// again, and a copy from here would be a second.
    async fn send_copy(&mut self, copy: UnsentCopy) {
        if self.stopped() == Some(Stop::Lost) {
            return;
        }
        let dead_letter = copy.target() != &*self.stream;
        if let Some(ticket) = self.outbox.send(copy, &self.env.env, &self.log).await {
            self.metrics.copy_published(dead_letter);
            self.mark(ticket);
        }
    }
}
