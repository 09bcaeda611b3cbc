//! One shard of one subscription: delivering records to the component and settling them.
//!
//! The pipeline is the same whether records come from Kinesis or from `TestApp`'s in-process
//! streams. It tracks every delivery in the shard's watermark, calls the component once per
//! batch, and carries out what the settlement rules say about each outcome:
//!
//! - handled (ack, drop, retired): marked handled, so the checkpoint may pass it;
//! - held (`retry` without declared attempts): a warning, and the checkpoint stays in front of
//!   it while later records go on;
//! - a counted copy: published to the stream (or the subscription's retry stream, or the
//!   dead-letter stream) first, and only once that stream has acknowledged it is the original
//!   marked handled. A failed publish is retried
//!   with backoff while the original holds the checkpoint; nothing is ever lost. A copy that
//!   can never be published (larger than a stream record once its headers are added) is given
//!   up with an error, and its original is held like a `retry` without attempts.
//!
//! A `retry_after` copy carries its due time in its envelope; when it is read before it is due
//! the pipeline keeps it waiting (holding the checkpoint, not the records after it), so the
//! delay survives a crash and is honoured again when the copy is re-read. It holds the
//! checkpoint in front of handled records for at most the tenant's `max_hold`, then it is
//! carried forward: published again at the tip with the same due time. A later copy of the
//! same record supersedes a waiting one, so one copy of a record waits, never two.
//!
//! A copy belongs to the subscription that made it (its envelope names tenant, app and
//! subscriber): every other reader of the stream moves past it as handled, without calling
//! its component, holding, carrying or dead-lettering it. Repeated copies of one record back
//! off (the minimum delay doubling per copy, up to the maximum delay), and the chain's age runs
//! from its first record's arrival, so a chain of copies always ends.
//!
//! The tenant's limits bound all of it: a delay is clamped to its maximum (and a due time read
//! from the stream to the record's arrival plus that maximum, whoever wrote it), copies of a
//! record after the first are spaced by the minimum delay, and every copy and dead letter
//! draws on the tenant's write quota: past it the copy waits, its original holding.
//!
//! Three state machines make it up: delivery and settlement (`settlement`: the settlement
//! rules and their carrying out), the copies on their way to a stream (`outbox`), and the
//! records held back from the component (`holding`).

mod holding;
mod lines;
mod metrics;
mod outbox;
mod settlement;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::app::SubscriptionSpec;
use crate::checkpoint::{Ticket, Watermark};
use crate::clock::millis;
use crate::component::{HandlerInstance, LoadedComponent, TrapKind};
use crate::env::Env;
use crate::limits::Limits;
use crate::outcome::Outcome;
use crate::publish::{PublishLog, PublishNotes};
use crate::record::{CopyOrigin, CopyOwner, Delivery, OutgoingRecord};
use crate::rollout::CallStats;
use crate::shadow::{Handling, Settled};
use crate::tenant::{MemoryReservation, Tenant};
use holding::{Holding, Waiting};
use lines::RuntimeLog;
use metrics::SubscriptionMetrics;
use outbox::{Outbox, UnsentCopy};

pub use crate::app::DEFAULT_BATCH_LIMIT;

/// Unsent copies of one shard past which it is [backlogged](ShardPipeline::is_backlogged).
pub const MAX_UNSENT_COPIES: usize = 1000;

/// Bytes of unsent copies of one shard past which it is backlogged: the copies keep their
/// payloads until they are in their stream.
pub const MAX_UNSENT_BYTES: u64 = 16 << 20;

pub use crate::stop::Stop;

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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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
    /// Counted copies another subscription made, moved past without a call (not counted
    /// above).
    #[cfg_attr(feature = "serde", serde(default))]
    pub foreign_copies: u64,
}

/// A shard's [`OutcomeCounts`], shared: its pipeline adds to them where it adds to the
/// subscription's metrics (an atomic add each), and whoever holds a clone reads them at any
/// time, so a status read from them says what `/metrics` says, whichever step of the pipeline
/// settled the records (a read, a copy that came due, a seek, a change-over, a handoff).
#[derive(Debug, Clone, Default)]
pub struct OutcomeCounter(Arc<[AtomicU64; 6]>);

impl OutcomeCounter {
    const ACK: usize = 0;
    const DROP: usize = 1;
    const RETRY: usize = 2;
    const RETRY_AFTER: usize = 3;
    const TRAPPED: usize = 4;
    const FOREIGN_COPIES: usize = 5;

    /// The counts now.
    pub fn get(&self) -> OutcomeCounts {
        let at = |slot: usize| self.0[slot].load(Ordering::Relaxed);
        OutcomeCounts {
            ack: at(Self::ACK),
            drop: at(Self::DROP),
            retry: at(Self::RETRY),
            retry_after: at(Self::RETRY_AFTER),
            trapped: at(Self::TRAPPED),
            foreign_copies: at(Self::FOREIGN_COPIES),
        }
    }

    fn add(&self, slot: usize, by: u64) {
        self.0[slot].fetch_add(by, Ordering::Relaxed);
    }

    fn count(&self, outcome: Outcome, trapped: bool) {
        let slot = match outcome {
            Outcome::Ack => Self::ACK,
            Outcome::Drop => Self::DROP,
            Outcome::Retry => Self::RETRY,
            Outcome::RetryAfter(_) => Self::RETRY_AFTER,
        };
        self.add(slot, 1);
        if trapped {
            self.add(Self::TRAPPED, 1);
        }
    }

    fn foreign_copy(&self) {
        self.add(Self::FOREIGN_COPIES, 1);
    }

    /// Adds `counts` (what another counter counted) to these.
    fn absorb(&self, counts: OutcomeCounts) {
        for (slot, by) in [
            (Self::ACK, counts.ack),
            (Self::DROP, counts.drop),
            (Self::RETRY, counts.retry),
            (Self::RETRY_AFTER, counts.retry_after),
            (Self::TRAPPED, counts.trapped),
            (Self::FOREIGN_COPIES, counts.foreign_copies),
        ] {
            self.add(slot, by);
        }
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
    pub component: Env,
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
    outcomes: OutcomeCounter,
    env: PipelineEnv,
    log: RuntimeLog,
    /// The app the component declares, for reports.
    app: Arc<str>,
    /// Whose copies this pipeline makes and handles: the others' it moves past.
    owner: CopyOwner,
    /// The shard was read to its end: a waiting copy holds its children back.
    shard_ended: bool,
    metrics: SubscriptionMetrics,
    /// How long the call under settlement took, for reports.
    call_duration: Duration,
    /// What was settled since last taken, while a shadow compares this shard.
    notes: Option<Notes>,
    /// Where its instances' publishes (refused, and written) are noted, for a tool reporting
    /// them.
    publish_notes: Option<PublishNotes>,
    /// Its instance's memory cap, reserved from the tenant's (live, never refused) while the
    /// pipeline lives, whichever version's instance it runs.
    _memory: MemoryReservation,
}

/// The settlements of a shard noted for a shadow: each record with its outcome and trap, and
/// the publishes its instance had accepted, by record.
struct Notes {
    settled: Vec<(Delivery, Outcome, Option<TrapKind>)>,
    publishes: PublishLog,
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
            &env.component,
            &subscription.name,
            stream.clone(),
            shard_id.clone(),
        );
        let app: Arc<str> = component.app().name.as_str().into();
        let metrics = subscription_metrics(&env, &app, &subscription);
        let owner = copy_owner(&env, &app, &subscription);
        let memory = env
            .tenant
            .memory()
            .reserve_live(env.component.policy.limits().memory_bytes);
        Self {
            _memory: memory,
            owner,
            shard_ended: false,
            instance: component.instance(env.component.clone()),
            stream,
            shard_id,
            subscription,
            watermark: Watermark::new(checkpoint),
            holding: Holding::default(),
            outbox: Outbox::default(),
            stop: None,
            checkpoint_moved: false,
            outcomes: OutcomeCounter::default(),
            env,
            log,
            app,
            metrics,
            call_duration: Duration::ZERO,
            notes: None,
            publish_notes: None,
        }
    }

    /// Notes in `log` every publish its component makes from here on, refused or written,
    /// under this subscription's name and by the record the call was on, or stops noting them.
    /// Off by default: a serving host says a refusal in a log line and keeps nothing.
    pub fn keep_publish_notes(&mut self, log: Option<PublishNotes>) {
        let notes = log
            .as_ref()
            .map(|l| l.for_subscriber(&self.subscription.name));
        self.instance.keep_publish_notes(notes);
        self.publish_notes = log;
    }

    /// Starts (or stops) noting what is settled from here on, for a shadow to compare: each
    /// record, its outcome or trap, and the publishes the stream accepted while the call was
    /// on it. Off by default: the live path then does no extra work.
    pub fn note_settlements(&mut self, on: bool) {
        if on == self.notes.is_some() {
            return;
        }
        self.notes = on.then(|| Notes {
            settled: Vec::new(),
            publishes: PublishLog::default(),
        });
        let log = self.notes.as_ref().map(|n| n.publishes.clone());
        self.instance.note_publishes(log);
    }

    /// Takes what was settled since last taken, in the order it was settled (nothing unless
    /// [`note_settlements`](Self::note_settlements) is on).
    pub fn take_settled(&mut self) -> Vec<Settled> {
        let Some(notes) = &mut self.notes else {
            return Vec::new();
        };
        let settled = std::mem::take(&mut notes.settled);
        let mut by_record = notes.publishes.take_by_record();
        settled
            .into_iter()
            .map(|(delivery, outcome, trap)| {
                let publishes = by_record
                    .remove(delivery.sequence_number.as_str())
                    .unwrap_or_default();
                Settled {
                    delivery,
                    live: Handling {
                        outcome,
                        trap,
                        publishes,
                    },
                }
            })
            .collect()
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
        let now = self.env.component.clock.now_ms();
        let max_delay = millis(self.limits().copies.max_delay);
        let mut tickets = Vec::with_capacity(records.len());
        let mut all_ready = true;
        for delivery in &records {
            tickets.push(self.watermark.track(delivery.sequence_number.as_str()));
            all_ready &= delivery.due(max_delay).is_none_or(|due| due <= now)
                && !delivery.is_aggregated()
                && !self.is_foreign(delivery)
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

    /// Moves past other subscriptions' copies, refuses aggregated records and keeps copies not
    /// yet due waiting; returns the rest, and apart the records past the subscription's
    /// maximum age, to give up on.
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
            if self.is_foreign(&delivery) {
                self.outcomes.foreign_copy();
                self.metrics.foreign_copy();
                self.mark(ticket);
                continue;
            }
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
                    if let Some(superseded) = self.holding.wait(ticket, delivery, due_at_ms, now) {
                        self.mark(superseded);
                    }
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
        let now = self.env.component.clock.now_ms();
        let max_hold = millis(self.limits().copies.max_hold);
        let quarantined = self.env.tenant.is_stopped();
        let (watermark, ended) = (&self.watermark, self.shard_ended);
        let released = self.holding.release(now, max_hold, quarantined, |ticket| {
            ended || watermark.handled_after(ticket)
        });
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
        // A chain's age runs from its first record: a copy may reach it while it waits.
        let (aged, due): (Vec<_>, Vec<_>) = released
            .due
            .into_iter()
            .partition(|(_, delivery)| self.too_old(delivery, now));
        for (ticket, delivery) in aged {
            self.expire(ticket, &delivery).await;
        }
        self.run_records(due).await;
        for copy in self.outbox.take_due(now) {
            self.send_copy(copy).await;
        }
        self.moved_checkpoint()
    }

    /// The earliest time (ms since the epoch) at which [`poll_due`](Self::poll_due) has work.
    pub fn next_due_ms(&self) -> Option<u64> {
        let now = self.env.component.clock.now_ms();
        let max_hold = millis(self.limits().copies.max_hold);
        let quarantined = self.env.tenant.is_stopped();
        let held = self
            .holding
            .next_release_ms(now, max_hold, quarantined, |ticket| {
                self.shard_ended || self.watermark.handled_after(ticket)
            });
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

    /// Tells the pipeline its shard was read to its end: a waiting copy then holds the shard's
    /// children back, and is carried forward after `max_hold` even with nothing after it.
    pub fn reached_shard_end(&mut self) {
        self.shard_ended = true;
    }

    /// The checkpoint that may be stored: the last record of the handled prefix. `None` while
    /// a copy owed from before a seek is not in its stream yet: until then only the checkpoint
    /// stored before the seek keeps that copy's original.
    pub fn checkpoint(&self) -> Option<&str> {
        if self.outbox.is_pinned() {
            return None;
        }
        self.watermark.checkpoint()
    }

    /// The first record that is not handled, where the checkpoint is held.
    pub fn held_at(&self) -> Option<&str> {
        self.watermark.held_at()
    }

    /// How many of this shard's deliveries settled with each outcome (with what the counter
    /// given to [`count_outcomes_in`](Self::count_outcomes_in) held before).
    pub fn outcomes(&self) -> OutcomeCounts {
        self.outcomes.get()
    }

    /// Counts outcomes in `counter` from now on, what was counted so far added to it: a status
    /// board hands each pipeline of a shard the shard's one counter, and reads it whenever it
    /// is asked, never a copy a step of the pipeline may have left stale.
    pub fn count_outcomes_in(&mut self, counter: OutcomeCounter) {
        counter.absorb(self.outcomes.get());
        self.outcomes = counter;
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

    /// Whether so many copies are owed to streams (their publishes throttled by the write quota
    /// or failing) that reading on would only pile more of them up in memory: at least
    /// [`MAX_UNSENT_COPIES`] copies, or [`MAX_UNSENT_BYTES`] of them. A transport reads no more
    /// of the shard until they drain.
    pub fn is_backlogged(&self) -> bool {
        self.outbox.len() >= MAX_UNSENT_COPIES || self.outbox.bytes() >= MAX_UNSENT_BYTES
    }

    /// Whether every delivered record is handled and no copy is pending.
    pub fn is_settled(&self) -> bool {
        self.watermark.in_flight() == 0 && self.outbox.is_empty() && !self.holding.has_parked()
    }

    /// Starts the bookkeeping afresh at `checkpoint` (a seek): records delivered before no
    /// longer move the checkpoint. Copies read and waiting for their due time are carried
    /// forward (published again at the tip with the same due time), and copies still being
    /// published go on being retried: every pending copy comes back at its due time, wherever
    /// the seek moved the reader. Until they are, no checkpoint is stored (see
    /// [`checkpoint`](Self::checkpoint)): their originals' places no longer count here.
    pub fn reset(&mut self, checkpoint: Option<String>) {
        self.watermark.reset(checkpoint);
        self.checkpoint_moved = false;
        self.outbox.pin_all();
        for waiting in self.holding.clear() {
            let carried = self.carry(waiting).pinned();
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
            &env.component,
            &subscription.name,
            self.stream.clone(),
            self.shard_id.clone(),
        );
        self.instance = component.instance(env.component.clone());
        let log = self.notes.as_ref().map(|n| n.publishes.clone());
        self.instance.note_publishes(log);
        let notes = (self.publish_notes.as_ref()).map(|l| l.for_subscriber(&subscription.name));
        self.instance.keep_publish_notes(notes);
        // The app name cannot change in a swap; the tenant's labels are rebuilt all the same,
        // so counts follow the subscription as the new version declares it.
        self.metrics = subscription_metrics(&env, &self.app, &subscription);
        self.owner = copy_owner(&env, &self.app, &subscription);
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
        self.env.component.policy.limits()
    }

    fn mark(&mut self, ticket: Ticket) {
        if self.watermark.mark_handled(ticket) {
            self.checkpoint_moved = true;
        }
    }

    fn moved_checkpoint(&mut self) -> Option<String> {
        self.watermark.settle();
        // While pinned the move is kept, to be reported once the pin is gone.
        if !self.checkpoint_moved || self.outbox.is_pinned() {
            return None;
        }
        self.checkpoint_moved = false;
        self.watermark.checkpoint().map(str::to_owned)
    }

    /// Whether `delivery` is a counted copy another subscription made.
    fn is_foreign(&self, delivery: &Delivery) -> bool {
        delivery
            .copy
            .as_ref()
            .is_some_and(|origin| origin.owner != self.owner)
    }

    /// What a copy of `delivery` for this subscription says about itself.
    fn copy_origin(&self, delivery: &Delivery) -> CopyOrigin {
        CopyOrigin::of(delivery, &self.shard_id, &self.owner)
    }

    /// A waiting copy, to be published again as it is (same retry count, same due time).
    fn carry(&self, waiting: Waiting) -> UnsentCopy {
        let delivery = &waiting.delivery;
        let origin = self.copy_origin(delivery);
        let record = OutgoingRecord::counted_copy(
            delivery,
            delivery.retry_count,
            Some(waiting.due_at_ms),
            Some(&origin),
        );
        UnsentCopy::new(
            waiting.ticket,
            delivery.sequence_number.to_string(),
            self.subscription.copy_stream().to_owned(),
            record,
        )
    }

    /// Publishes `copy`, unless the lease is lost: the next holder handles the original
    /// again, and a copy from here would be a second.
    async fn send_copy(&mut self, copy: UnsentCopy) {
        if self.stopped() == Some(Stop::Lost) {
            return;
        }
        let dead_letter = copy.target() != self.subscription.copy_stream();
        if let Some(ticket) = self.outbox.send(copy, &self.env.component, &self.log).await {
            self.metrics.copy_published(dead_letter);
            self.mark(ticket);
        }
    }
}

/// The owner of the copies a pipeline of `subscription` makes.
fn copy_owner(env: &PipelineEnv, app: &str, subscription: &SubscriptionSpec) -> CopyOwner {
    CopyOwner {
        tenant: env.tenant.name().to_owned(),
        app: app.to_owned(),
        subscriber: subscription.name.clone(),
    }
}

/// The metric handles of `subscription`, within its tenant's series bound.
fn subscription_metrics(
    env: &PipelineEnv,
    app: &str,
    subscription: &SubscriptionSpec,
) -> SubscriptionMetrics {
    let max_series = env.tenant.policy().limits().max_metric_series;
    SubscriptionMetrics::new(env.tenant.name(), app, &subscription.name, max_series)
}
