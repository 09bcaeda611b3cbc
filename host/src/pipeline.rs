//! One shard of one subscription: delivering records to the component and settling them.
//!
//! The pipeline is the same whether records come from Kinesis or from
//! [`TestApp`](crate::testapp::TestApp)'s in-process streams. It tracks every delivery in the
//! shard's [`Watermark`], calls the component once per batch, and carries out what
//! [`settlement::decide`] says about each outcome:
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
//! delay survives a crash and is honoured again when the copy is re-read.
//!
//! The tenant's limits bound all of it: a delay is clamped to its maximum (and a due time read
//! from the stream to the record's arrival plus that maximum, whoever wrote it), copies of a
//! record after the first are spaced by the minimum delay, and every copy and dead letter
//! draws on the tenant's write quota: past it the copy waits, its original holding.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::app::SubscriptionSpec;
use crate::checkpoint::{Ticket, Watermark};
use crate::clock::Clock;
use crate::component::{BatchCall, BatchFailure, CallFailure, HandlerInstance, Limits, TrapKind};
use crate::log::{Level, LogLine, LogSink, Origin};
use crate::publish::Publisher;
use crate::record::{Delivery, OutgoingRecord};
use crate::settlement::{self, CopyPlan, Disposition, Outcome};
use crate::tenant::Tenant;

/// Records handed to one call when the subscription does not set `batch`.
pub const DEFAULT_BATCH_LIMIT: usize = 1000;

/// First and largest pause between attempts to publish a counted copy.
const COPY_RETRY_FIRST: Duration = Duration::from_millis(200);
const COPY_RETRY_MAX: Duration = Duration::from_secs(30);

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
    pub subscriber: String,
    pub stream: String,
    pub shard_id: String,
    pub sequence_number: String,
    pub attempt: u32,
    /// The outcome that was settled: the handler's, or the registration's `on_trap` stand-in.
    pub outcome: Outcome,
    /// Set when the call trapped instead of returning an outcome.
    pub trap: Option<TrapKind>,
    /// When the outcome was settled (the pipeline clock, ms since the epoch).
    pub at_ms: u64,
}

/// Receives a report of every settled delivery.
pub type Observer = Arc<dyn Fn(&DeliveryReport) + Send + Sync>;

/// What a pipeline needs from its host.
#[derive(Clone)]
pub struct PipelineEnv {
    /// The component's name, for log lines.
    pub component: Arc<str>,
    /// Its tenant, whose quarantine gate stops delivery and counts failed calls.
    pub tenant: Arc<Tenant>,
    /// Where counted copies are written (the host's own transport, not the tenant's grants).
    pub publisher: Arc<dyn Publisher>,
    pub clock: Arc<dyn Clock>,
    pub log: LogSink,
    pub observer: Option<Observer>,
}

/// A record read before its due time, waiting for it.
struct Waiting {
    ticket: Ticket,
    due_at_ms: u64,
    delivery: Delivery,
    /// When it was read: it holds the checkpoint from then on, for at most the tenant's
    /// `max_hold`, after which it is carried forward.
    since_ms: u64,
}

/// A counted copy whose publish failed; the original holds the checkpoint until it succeeds.
struct UnsentCopy {
    ticket: Ticket,
    original_sequence: String,
    target: String,
    record: OutgoingRecord,
    tries: u32,
    next_try_ms: u64,
}

/// The delivery and settlement state of one shard for one subscription.
pub struct ShardPipeline {
    stream: Arc<str>,
    shard_id: Arc<str>,
    subscription: Arc<SubscriptionSpec>,
    instance: HandlerInstance,
    watermark: Watermark,
    waiting: Vec<Waiting>,
    unsent: Vec<UnsentCopy>,
    /// Records not yet handed to the component because its tenant is quarantined.
    parked: Vec<(Ticket, Delivery)>,
    /// Set when the shard must stop being delivered here (lease lost, or wanted elsewhere).
    stop: Option<watch::Receiver<Option<Stop>>>,
    checkpoint_moved: bool,
    env: PipelineEnv,
}

impl ShardPipeline {
    /// A pipeline for `shard_id`, whose stored checkpoint (if any) is `checkpoint`.
    pub fn new(
        subscription: Arc<SubscriptionSpec>,
        shard_id: &str,
        checkpoint: Option<String>,
        instance: HandlerInstance,
        env: PipelineEnv,
    ) -> Self {
        Self {
            stream: subscription.stream.as_str().into(),
            shard_id: shard_id.into(),
            subscription,
            instance,
            watermark: Watermark::new(checkpoint),
            waiting: Vec::new(),
            unsent: Vec::new(),
            parked: Vec::new(),
            stop: None,
            checkpoint_moved: false,
            env,
        }
    }

    pub fn shard_id(&self) -> &str {
        &self.shard_id
    }

    /// Stops handing records to the component, at the next call boundary, once `stop` says
    /// so; once the lease is lost, copies are no longer published either (the next holder
    /// reads their originals again).
    pub fn stop_when(&mut self, stop: watch::Receiver<Option<Stop>>) {
        self.stop = Some(stop);
    }

    fn stopped(&self) -> Option<Stop> {
        self.stop.as_ref().and_then(|stop| stop.borrow().clone())
    }

    /// Publishes the copies still owed (their pause over or not), for at most `grace`: what a
    /// shard handed over owes before it goes.
    pub async fn send_copies(&mut self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        while !self.unsent.is_empty() && tokio::time::Instant::now() < deadline {
            for copy in std::mem::take(&mut self.unsent) {
                self.send_copy(copy).await;
            }
            if !self.unsent.is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    pub fn subscription(&self) -> &SubscriptionSpec {
        &self.subscription
    }

    /// Delivers records read from the shard, in shard order.
    ///
    /// A copy's due time is honoured up to its arrival plus the tenant's maximum delay: the
    /// time travels in the record, and whoever wrote the record (an outside producer too)
    /// must not be able to hold the shard for longer.
    pub async fn deliver(&mut self, records: Vec<Delivery>) {
        let now = self.env.clock.now_ms();
        let max_delay = millis(self.limits().copies.max_delay);
        let mut ready = Vec::with_capacity(records.len());
        for delivery in records {
            let ticket = self.watermark.track(delivery.sequence_number.as_str());
            if delivery.is_aggregated() {
                self.refuse_aggregated(ticket, &delivery);
                continue;
            }
            let due = delivery
                .due_at_ms
                .map(|due| due.min(delivery.arrival_ms.saturating_add(max_delay)));
            match due {
                Some(due_at_ms) if due_at_ms > now => self.waiting.push(Waiting {
                    ticket,
                    due_at_ms,
                    delivery,
                    since_ms: now,
                }),
                _ => ready.push((ticket, delivery)),
            }
        }
        self.run(ready).await;
    }

    /// Delivers waiting records that are now due (and parked ones, once the tenant is out of
    /// quarantine), and retries copies whose pause is over. Returns whether it did anything.
    pub async fn poll_due(&mut self) -> bool {
        let now = self.env.clock.now_ms();
        let unparked = if self.env.tenant.is_quarantined() {
            Vec::new()
        } else {
            std::mem::take(&mut self.parked)
        };
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|w| w.due_at_ms <= now);
        let max_hold = millis(self.limits().copies.max_hold);
        let (held_long, waiting): (Vec<_>, Vec<_>) = waiting
            .into_iter()
            .partition(|w| w.since_ms.saturating_add(max_hold) <= now);
        self.waiting = waiting;
        // A copy waiting longer than `max_hold` is published again at the tip with the same
        // due time; once that one is in the stream this one is handled and the checkpoint
        // moves on. The wait survives restarts and retention, and holds nothing for long.
        let carried: Vec<UnsentCopy> = held_long.into_iter().map(|w| self.carry(w)).collect();
        self.unsent.extend(carried);
        let (retry, unsent): (Vec<_>, Vec<_>) = std::mem::take(&mut self.unsent)
            .into_iter()
            .partition(|u| u.next_try_ms <= now);
        self.unsent = unsent;
        let progressed = !unparked.is_empty() || !due.is_empty() || !retry.is_empty();
        self.run(unparked).await;
        self.run(due.into_iter().map(|w| (w.ticket, w.delivery)).collect())
            .await;
        for copy in retry {
            self.send_copy(copy).await;
        }
        progressed
    }

    /// The earliest time (ms since the epoch) at which [`poll_due`](Self::poll_due) has work.
    pub fn next_due_ms(&self) -> Option<u64> {
        let max_hold = millis(self.limits().copies.max_hold);
        let waiting = self
            .waiting
            .iter()
            .map(|w| w.due_at_ms.min(w.since_ms.saturating_add(max_hold)));
        let unsent = self.unsent.iter().map(|u| u.next_try_ms);
        let parked = (!self.parked.is_empty() && !self.env.tenant.is_quarantined())
            .then(|| self.env.clock.now_ms());
        waiting.chain(unsent).chain(parked).min()
    }

    /// Where the checkpoint stands: the last record of the handled prefix.
    pub fn checkpoint(&self) -> Option<&str> {
        self.watermark.checkpoint()
    }

    /// The checkpoint, if it moved since the last call; what a lease store should persist.
    pub fn take_checkpoint(&mut self) -> Option<String> {
        if !std::mem::take(&mut self.checkpoint_moved) {
            return None;
        }
        self.watermark.checkpoint().map(str::to_owned)
    }

    /// The first record that is not handled, where the checkpoint is held.
    pub fn held_at(&self) -> Option<&str> {
        self.watermark.held_at()
    }

    /// Whether every delivered record is handled and no copy is pending.
    pub fn is_settled(&self) -> bool {
        self.watermark.in_flight() == 0 && self.unsent.is_empty() && self.parked.is_empty()
    }

    /// Starts the bookkeeping afresh at `checkpoint` (a seek): records delivered before no
    /// longer move the checkpoint. Copies read and waiting for their due time are carried
    /// forward (published again at the tip with the same due time), and copies still being
    /// published go on being retried: every pending copy comes back at its due time, wherever
    /// the seek moved the reader.
    pub fn reset(&mut self, checkpoint: Option<String>) {
        self.watermark.reset(checkpoint);
        let waiting = std::mem::take(&mut self.waiting);
        let carried: Vec<UnsentCopy> = waiting.into_iter().map(|w| self.carry(w)).collect();
        self.unsent.extend(carried);
        self.parked.clear();
        self.checkpoint_moved = false;
    }

    /// How many times the component instance was replaced after a failure.
    pub fn instance_replacements(&self) -> u64 {
        self.instance.replacements()
    }

    /// Hands `records` to the component in batches, in order, and settles each outcome. After
    /// a trap, the records the guest had reported stand as reported, the record it was on is a
    /// failed attempt, and the rest go on in the next call: no record runs twice.
    async fn run(&mut self, records: Vec<(Ticket, Delivery)>) {
        let limit = self
            .subscription
            .batch_limit
            .map_or(DEFAULT_BATCH_LIMIT, |l| l as usize);
        let mut queue: VecDeque<(Ticket, Delivery)> = records.into();
        while !queue.is_empty() {
            if self.stopped().is_some() {
                // Not delivered, not handled: the next holder reads them from the checkpoint.
                break;
            }
            if self.env.tenant.is_quarantined() {
                self.parked.extend(queue);
                break;
            }
            let take = limit.min(queue.len());
            let (tickets, deliveries): (Vec<Ticket>, Vec<Delivery>) = queue.drain(..take).unzip();
            let unfinished = self.run_batch(tickets, deliveries.into()).await;
            for record in unfinished.into_iter().rev() {
                queue.push_front(record);
            }
        }
        // Say how many of the tenant's host lines were dropped in seconds that are over.
        self.env.tenant.host_lines().flush(&self.env.log);
    }

    /// One call; returns the records it did not get to (after a trap), in order.
    async fn run_batch(
        &mut self,
        tickets: Vec<Ticket>,
        deliveries: Arc<[Delivery]>,
    ) -> Vec<(Ticket, Delivery)> {
        let call = BatchCall {
            subscription: self.subscription.index,
            stream: &self.stream,
            shard_id: &self.shard_id,
            deliveries: &deliveries,
        };
        let result = self.instance.handle_batch(&call).await;
        self.count_call(result.as_ref().err().map(|f| &f.failure));
        let (outcomes, failure) = match result {
            Ok(outcomes) => (outcomes, None),
            Err(BatchFailure { settled, failure }) => (settled, Some(failure)),
        };
        let mut records = tickets.into_iter().zip(deliveries.iter());
        // Outcomes first: `zip` would otherwise take one record past the last outcome.
        for (outcome, (ticket, delivery)) in outcomes.into_iter().zip(records.by_ref()) {
            self.settle(ticket, delivery, outcome, None).await;
        }
        let Some(failure) = failure else {
            return Vec::new();
        };
        // The record the guest was on when the call failed (none if it failed after the last).
        if let Some((ticket, delivery)) = records.next() {
            self.trapped(ticket, delivery, failure).await;
        }
        records.map(|(t, d)| (t, d.clone())).collect()
    }

    /// A KPL-aggregated record holds many user records in a format no handler expects; it is
    /// refused and skipped (as the seed does), so it cannot block its shard forever.
    fn refuse_aggregated(&mut self, ticket: Ticket, delivery: &Delivery) {
        self.runtime_log(
            "aggregated",
            Level::Error,
            Some(delivery),
            "KPL-aggregated record refused: RustStream does not de-aggregate records; publish \
             without KPL aggregation. The record is skipped"
                .to_owned(),
        );
        self.mark(ticket);
    }

    /// Tells the tenant's quarantine gate how a call went.
    fn count_call(&self, failure: Option<&CallFailure>) {
        match failure {
            None => self.env.tenant.call_succeeded(),
            Some(failure) => {
                self.env.tenant.call_failed(failure.kind);
            }
        }
    }

    async fn trapped(&mut self, ticket: Ticket, delivery: &Delivery, failure: CallFailure) {
        let stand_in = self.subscription.on_trap;
        let mut line = self.line(
            Level::Error,
            Some(delivery),
            format!("handler call failed: {}", failure.kind),
        );
        line.fields.push(("trap".into(), failure.kind.to_string()));
        line.fields.push(("error".into(), failure.message));
        line.fields
            .push(("settled_as".into(), stand_in.to_string()));
        self.emit("trap", line);
        self.settle(ticket, delivery, stand_in, Some(failure.kind))
            .await;
    }

    async fn settle(
        &mut self,
        ticket: Ticket,
        delivery: &Delivery,
        outcome: Outcome,
        trap: Option<TrapKind>,
    ) {
        self.report(delivery, outcome, trap);
        match settlement::decide(outcome, delivery.retry_count, &self.subscription.retry) {
            Disposition::Handled | Disposition::Dropped => self.mark(ticket),
            Disposition::Retired { attempts } => {
                self.runtime_log(
                    "retired",
                    Level::Warn,
                    Some(delivery),
                    format!("attempts spent after {attempts} deliveries and no dead-letter stream: the record is retired"),
                );
                self.mark(ticket);
            }
            Disposition::Held => self.runtime_log(
                "held",
                Level::Warn,
                Some(delivery),
                "retry requested, but a shard cannot requeue a record: it stays unhandled and \
                 holds the checkpoint until the shard's lease is next taken"
                    .to_owned(),
            ),
            Disposition::Copy(plan) => self.copy(ticket, delivery, plan).await,
        }
    }

    async fn copy(&mut self, ticket: Ticket, delivery: &Delivery, plan: CopyPlan) {
        let due_at_ms = self
            .copy_delay(delivery, &plan)
            .map(|delay| self.env.clock.now_ms().saturating_add(millis(delay)));
        let record = OutgoingRecord::counted_copy(delivery, plan.retry_count, due_at_ms);
        let target = match plan.dead_letter {
            Some(dead_letter) => {
                self.runtime_log(
                    "dead-letter",
                    Level::Warn,
                    Some(delivery),
                    format!(
                        "attempts spent after {} deliveries: the record goes to dead-letter stream `{dead_letter}`",
                        plan.retry_count
                    ),
                );
                dead_letter
            }
            None => self.stream.to_string(),
        };
        let copy = UnsentCopy {
            ticket,
            original_sequence: delivery.sequence_number.clone(),
            target,
            record,
            tries: 0,
            next_try_ms: 0,
        };
        self.send_copy(copy).await;
    }

    /// A waiting copy, to be published again as it is (same retry count, same due time).
    fn carry(&self, waiting: Waiting) -> UnsentCopy {
        let delivery = &waiting.delivery;
        let record =
            OutgoingRecord::counted_copy(delivery, delivery.retry_count, Some(waiting.due_at_ms));
        UnsentCopy {
            ticket: waiting.ticket,
            original_sequence: delivery.sequence_number.clone(),
            target: self.stream.to_string(),
            record,
            tries: 0,
            next_try_ms: 0,
        }
    }

    /// The delay a copy waits: what the handler asked, clamped to the tenant's maximum (with a
    /// warning), and at least the minimum between copies when the record is already a copy.
    /// Dead letters never wait.
    fn copy_delay(&self, delivery: &Delivery, plan: &CopyPlan) -> Option<Duration> {
        if plan.dead_letter.is_some() {
            return None;
        }
        let limits = &self.limits().copies;
        let mut delay = plan.delay;
        if let Some(asked) = delay.filter(|asked| *asked > limits.max_delay) {
            self.runtime_log(
                "delay-clamped",
                Level::Warn,
                Some(delivery),
                format!(
                    "subscriber `{}` asked for a retry in {asked:?}, more than the maximum delay \
                     of {:?}: the copy is due after the maximum",
                    self.subscription.name, limits.max_delay
                ),
            );
            delay = Some(limits.max_delay);
        }
        if delivery.retry_count > 0 {
            delay = Some(delay.unwrap_or_default().max(limits.min_copy_delay));
        }
        delay
    }

    async fn send_copy(&mut self, mut copy: UnsentCopy) {
        if self.stopped() == Some(Stop::Lost) {
            // The next holder handles the original again; a copy from here would be a second.
            return;
        }
        let now = self.env.clock.now_ms();
        let quota = self.env.tenant.write_quota();
        if let Err(wait) = quota.take(now, copy.record.stream_size()) {
            // The tenant's write quota is spent for now: the copy waits, the original holds.
            copy.next_try_ms = now.saturating_add(millis(wait));
            self.unsent.push(copy);
            return;
        }
        let result = self
            .env
            .publisher
            .publish(&copy.target, copy.record.clone())
            .await;
        let Err(error) = result else {
            self.mark(copy.ticket);
            return;
        };
        if !error.can_succeed_later() {
            // The original is held, as a `retry` without attempts.
            let line = self.copy_failed(
                &copy,
                format!(
                    "the copy for `{}` can never be published ({error}); the original stays unhandled and holds the checkpoint until the shard's lease is next taken",
                    copy.target
                ),
            );
            self.emit("copy-failed", line);
            return;
        }
        copy.tries += 1;
        let pause = backoff(copy.tries);
        copy.next_try_ms = self
            .env
            .clock
            .now_ms()
            .saturating_add(pause.as_millis() as u64);
        let mut line = self.copy_failed(
            &copy,
            format!(
                "publishing the copy to `{}` failed ({error}); the original holds the checkpoint, next try in {pause:?}",
                copy.target
            ),
        );
        line.fields.push(("tries".into(), copy.tries.to_string()));
        self.emit("copy-failed", line);
        self.unsent.push(copy);
    }

    /// The error line of a copy that was not published, tagged with its original's sequence.
    fn copy_failed(&self, copy: &UnsentCopy, message: String) -> LogLine {
        let mut line = self.line(Level::Error, None, message);
        line.sequence_number = Some(copy.original_sequence.clone());
        line
    }

    fn limits(&self) -> &Limits {
        self.env.tenant.call_limits()
    }

    fn mark(&mut self, ticket: Ticket) {
        if self.watermark.mark_handled(ticket).is_some() {
            self.checkpoint_moved = true;
        }
    }

    fn report(&self, delivery: &Delivery, outcome: Outcome, trap: Option<TrapKind>) {
        if let Some(observer) = &self.env.observer {
            observer(&DeliveryReport {
                subscriber: self.subscription.name.clone(),
                stream: self.stream.to_string(),
                shard_id: self.shard_id.to_string(),
                sequence_number: delivery.sequence_number.clone(),
                attempt: delivery.attempt(),
                outcome,
                trap,
                at_ms: self.env.clock.now_ms(),
            });
        }
    }

    /// Logs a line about this tenant's records, within the tenant's host-line budget: past
    /// it, lines of the same `kind` are counted and summarised.
    fn runtime_log(
        &self,
        kind: &'static str,
        level: Level,
        delivery: Option<&Delivery>,
        message: String,
    ) {
        self.emit(kind, self.line(level, delivery, message));
    }

    fn emit(&self, kind: &'static str, line: LogLine) {
        self.env.tenant.host_lines().emit(&self.env.log, kind, line);
    }

    fn line(&self, level: Level, delivery: Option<&Delivery>, message: String) -> LogLine {
        let mut fields = vec![("subscriber".to_owned(), self.subscription.name.clone())];
        if let Some(delivery) = delivery {
            fields.push(("attempt".to_owned(), delivery.attempt().to_string()));
        }
        LogLine {
            level,
            origin: Origin::Runtime,
            tenant: Some(self.env.tenant.name().to_owned()),
            component: self.env.component.to_string(),
            stream: Some(self.stream.to_string()),
            shard_id: Some(self.shard_id.to_string()),
            sequence_number: delivery.map(|d| d.sequence_number.clone()),
            message,
            fields,
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Exponential backoff for copy publishes: 200 ms, 400 ms, ... up to 30 s.
fn backoff(tries: u32) -> Duration {
    let factor = 1u32 << tries.saturating_sub(1).min(8);
    (COPY_RETRY_FIRST * factor).min(COPY_RETRY_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_backoff_doubles_up_to_its_cap() {
        assert_eq!(backoff(1), Duration::from_millis(200));
        assert_eq!(backoff(2), Duration::from_millis(400));
        assert_eq!(backoff(20), COPY_RETRY_MAX);
    }
}
