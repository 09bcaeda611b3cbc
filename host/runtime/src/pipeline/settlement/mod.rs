//! Delivery and settlement: handing records to the component in batches, deciding what
//! each outcome means by the settlement rules (`rules`), and carrying that out.

mod rules;

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument as _;

use crate::checkpoint::Ticket;
use crate::clock::millis;
use crate::component::{BatchCall, BatchFailure, CallFailure, TrapKind};
use crate::dead_letter::{ATTEMPTS_EXHAUSTED, DeadLetterOrigin, FirstRecord, RECORD_AGE_EXCEEDED};
use crate::limits::CopyLimits;
use crate::log::Level;
use crate::outcome::Outcome;
use crate::pipeline::outbox::UnsentCopy;
use crate::pipeline::{DEFAULT_BATCH_LIMIT, DeliveryReport, ShardPipeline};
use crate::record::{Deliveries, Delivery, OutgoingRecord};
use rules::{CopyPlan, Disposition};

impl ShardPipeline {
    /// Hands `deliveries` (tracked as `tickets`) to the component in batches, in order, and
    /// settles each outcome. After a trap, the records the guest had reported stand as
    /// reported, the record it was on is a failed attempt, and the rest go on in the next
    /// call: no record runs twice. Each call gets a range of `deliveries`, never a copy.
    pub(in crate::pipeline) async fn run(
        &mut self,
        tickets: Vec<Ticket>,
        deliveries: Arc<Vec<Delivery>>,
    ) {
        let limit = self
            .subscription
            .batch_limit
            .map_or(DEFAULT_BATCH_LIMIT, |l| l as usize);
        let mut next = 0;
        while next < deliveries.len() {
            if self.stopped().is_some() {
                // Not delivered, not handled: the next holder reads them from the checkpoint.
                break;
            }
            // A stopped tenant's records wait parked for its resume; a replaced version's for
            // the version that replaced it, which the shard changes over to before the next.
            if self.env.tenant.is_stopped() || self.version_retired() {
                let rest = tickets[next..].iter().copied();
                self.holding
                    .park(rest.zip(deliveries[next..].iter().cloned()));
                break;
            }
            let end = deliveries.len().min(next + limit);
            let batch = Deliveries::new(deliveries.clone(), next..end);
            // Every call settles at least one record (a trap settles the one it was on).
            next += self.run_batch(&tickets[next..end], batch).await.max(1);
        }
        self.log.flush();
    }

    /// [`run`](Self::run) for records set aside earlier (waiting, parked).
    pub(in crate::pipeline) async fn run_records(&mut self, records: Vec<(Ticket, Delivery)>) {
        if records.is_empty() {
            return;
        }
        let (tickets, deliveries): (Vec<Ticket>, Vec<Delivery>) = records.into_iter().unzip();
        self.run(tickets, Arc::new(deliveries)).await;
    }

    /// One call; returns how many of its records it settled (after a trap, those the guest
    /// reported and the one it trapped on).
    async fn run_batch(&mut self, tickets: &[Ticket], deliveries: Deliveries) -> usize {
        let call = BatchCall {
            subscription: self.subscription.index,
            stream: &self.stream,
            shard_id: &self.shard_id,
            deliveries: deliveries.clone(),
            stop: self.stop.as_ref(),
        };
        let started = std::time::Instant::now();
        let span = tracing::info_span!("call", records = call.deliveries.len());
        let result = self.instance.handle_batch(&call).instrument(span).await;
        self.call_duration = started.elapsed();
        self.metrics.called(self.call_duration);
        let failure = result.as_ref().err().map(|f| &f.failure);
        // A call the host stopped (lease lost, shutdown) failed nobody: no quarantine, no
        // rollout.
        if failure.is_none_or(|f| !f.kind.is_hosts()) {
            self.count_call(failure);
        }
        let (outcomes, failure) = match result {
            Ok(outcomes) => (outcomes, None),
            Err(BatchFailure { settled, failure }) => (settled, Some(failure)),
        };
        let mut records = tickets.iter().zip(deliveries.iter());
        let mut settled = 0;
        // Outcomes first: `zip` would otherwise take one record past the last outcome.
        for (outcome, (ticket, delivery)) in outcomes.into_iter().zip(records.by_ref()) {
            // Handled and dropped records, nearly all of them, settle without building the
            // future of the rarer dispositions (copies publish, holds log).
            match self.judge(delivery, outcome, None) {
                Disposition::Handled | Disposition::Dropped => self.mark(*ticket),
                disposition => {
                    self.carry_out(*ticket, delivery, disposition, None).await;
                }
            }
            settled += 1;
        }
        let Some(failure) = failure else {
            return settled;
        };
        if failure.kind.is_hosts() {
            self.stopped_by_host(failure.kind, settled, deliveries.len());
            return settled;
        }
        // The record the guest was on when the call failed (none if it failed after the last).
        if let Some((ticket, delivery)) = records.next() {
            self.trapped(*ticket, delivery, failure).await;
            settled += 1;
        }
        settled
    }

    /// The host stopped the call: the records reported before settled; the rest are left to
    /// the lease's next holder, which reads them again. After a lost lease nothing of them is
    /// stored (the keeper writes nothing more, and no copy goes out); at a shutdown the
    /// checkpoint of what settled is flushed.
    fn stopped_by_host(&self, kind: TrapKind, settled: usize, records: usize) {
        let (tag, why) = match kind {
            TrapKind::LeaseLost => ("lease-lost", "the shard's lease was lost during a call"),
            _ => (
                "call-stopped",
                "the host is shutting down and a call outlived the calls' part of the grace",
            ),
        };
        self.log.say(
            tag,
            Level::Warn,
            None,
            format!(
                "{why}: it was stopped after {settled} of its {records} records; the rest are \
                 left to the lease's next holder"
            ),
        );
    }

    /// A KPL-aggregated record holds many user records in a format no handler expects; it is
    /// refused and skipped (as the seed does), so it cannot block its shard forever.
    pub(in crate::pipeline) fn refuse_aggregated(&mut self, ticket: Ticket, delivery: &Delivery) {
        self.log.say(
            "aggregated",
            Level::Error,
            Some(delivery),
            "KPL-aggregated record refused: RustStream does not de-aggregate records; publish \
             without KPL aggregation. The record is skipped"
                .to_owned(),
        );
        self.mark(ticket);
    }

    /// Tells the tenant's quarantine gate how a call went: a replaced version's failures (the
    /// rest of a batch it was in when a rollback decided against it) quarantine nobody.
    fn count_call(&self, failure: Option<&CallFailure>) {
        if let Some(stats) = &self.env.calls {
            stats.record(failure.is_some());
        }
        match failure {
            None => self.env.tenant.call_succeeded(),
            Some(failure) => {
                self.metrics.trapped(failure.kind);
                if !self.version_retired() {
                    self.env.tenant.call_failed(&self.app, failure.kind);
                }
            }
        }
    }

    /// Whether another version replaced the one this pipeline runs.
    fn version_retired(&self) -> bool {
        self.env
            .calls
            .as_ref()
            .is_some_and(|calls| calls.is_retired())
    }

    async fn trapped(&mut self, ticket: Ticket, delivery: &Delivery, failure: CallFailure) {
        let stand_in = self.subscription.on_trap;
        let mut line = self.log.line(
            Level::Error,
            Some(delivery),
            format!("handler call failed: {}", failure.kind),
        );
        line.fields.push(("trap".into(), failure.kind.to_string()));
        line.fields.push(("error".into(), failure.message));
        line.fields
            .push(("settled_as".into(), stand_in.to_string()));
        self.log.emit("trap", line);
        let trap = Some(failure.kind);
        let disposition = self.judge(delivery, stand_in, trap);
        self.carry_out(ticket, delivery, disposition, trap).await;
    }

    /// Reports `outcome` and decides what settles it.
    fn judge(
        &mut self,
        delivery: &Delivery,
        outcome: Outcome,
        trap: Option<TrapKind>,
    ) -> Disposition {
        self.report(delivery, outcome, trap);
        rules::decide(outcome, delivery.retry_count, &self.subscription.retry)
    }

    /// Does what `disposition` says about the record of `ticket`.
    async fn carry_out(
        &mut self,
        ticket: Ticket,
        delivery: &Delivery,
        disposition: Disposition,
        trap: Option<TrapKind>,
    ) {
        match disposition {
            Disposition::Handled | Disposition::Dropped => self.mark(ticket),
            Disposition::Retired { attempts } => {
                self.log.say(
                    "retired",
                    Level::Warn,
                    Some(delivery),
                    format!(
                        "attempts spent after {attempts} deliveries and no dead-letter stream: \
                         the record is retired"
                    ),
                );
                self.mark(ticket);
            }
            Disposition::Held => {
                self.log.say(
                    "held",
                    Level::Warn,
                    Some(delivery),
                    "retry requested, but a shard cannot requeue a record: it stays unhandled \
                     and holds the checkpoint until the shard's lease is next taken"
                        .to_owned(),
                );
                // With a maximum age, the hold ends when the record reaches it.
                if let Some(max) = &self.subscription.max_record_age {
                    let expires_at = delivery.first_arrival_ms().saturating_add(millis(max.age));
                    self.holding
                        .hold_until(ticket, delivery.clone(), expires_at);
                }
            }
            Disposition::Copy(plan) => self.copy(ticket, delivery, plan, trap).await,
        }
    }

    /// A counted copy, or a dead letter carrying its origin; `trap` is how the last attempt
    /// ended, when it trapped.
    async fn copy(
        &mut self,
        ticket: Ticket,
        delivery: &Delivery,
        plan: CopyPlan,
        trap: Option<TrapKind>,
    ) {
        let clock = &self.env.component.clock;
        let due_at_ms = (self.copy_delay(delivery, &plan))
            .map(|delay| clock.now_ms().saturating_add(millis(delay)));
        // A copy back to the stream (or to the retry stream) is this subscription's alone; a
        // dead letter is anyone's who reads the dead-letter stream.
        let origin = plan
            .dead_letter
            .is_none()
            .then(|| self.copy_origin(delivery));
        let mut record =
            OutgoingRecord::counted_copy(delivery, plan.retry_count, due_at_ms, origin.as_ref());
        let target = match plan.dead_letter {
            Some(dead_letter) => {
                let reason = trap.map_or(ATTEMPTS_EXHAUSTED, TrapKind::label);
                self.add_origin(&mut record, delivery, reason);
                self.log.say(
                    "dead-letter",
                    Level::Warn,
                    Some(delivery),
                    format!(
                        "attempts spent after {} deliveries: the record goes to dead-letter \
                         stream `{dead_letter}`",
                        plan.retry_count
                    ),
                );
                dead_letter
            }
            None => self.subscription.copy_stream().to_owned(),
        };
        let copy = UnsentCopy::new(ticket, delivery.sequence_number.to_string(), target, record);
        self.send_copy(copy).await;
    }

    /// Marks `record` (a dead letter of `delivery`) with where it came from and `reason`: the
    /// record its last attempt was made on, and the original its chain of copies started
    /// from. A record dead-lettered before keeps only its latest origin.
    fn add_origin(&self, record: &mut OutgoingRecord, delivery: &Delivery, reason: &str) {
        let origin = DeadLetterOrigin {
            stream: self.stream.to_string(),
            shard_id: self.shard_id.to_string(),
            sequence_number: delivery.sequence_number.to_string(),
            subscriber: self.subscription.name.clone(),
            tenant: self.env.tenant.name().to_owned(),
            app: Some(self.app.to_string()),
            attempts: delivery.attempt(),
            reason: reason.to_owned(),
            first: FirstRecord::of(delivery, &self.shard_id),
        };
        record
            .headers
            .retain(|h| !DeadLetterOrigin::is_origin_header(&h.name));
        record.headers.extend(origin.headers());
    }

    /// Whether `delivery` is older than the subscription's maximum record age at `now_ms`,
    /// counted from the arrival of the record a chain of copies started from (as Lambda's
    /// `MaximumRecordAgeInSeconds` counts from the original's).
    pub(in crate::pipeline) fn too_old(&self, delivery: &Delivery, now_ms: u64) -> bool {
        self.subscription
            .max_record_age
            .as_ref()
            .is_some_and(|max| {
                delivery.first_arrival_ms().saturating_add(millis(max.age)) <= now_ms
            })
    }

    /// Gives up on a record past the subscription's maximum age, held or not yet delivered:
    /// to the dead-letter stream (reason `record-age-exceeded`), or retired with a warning
    /// when there is none. Either way the checkpoint may pass it.
    pub(in crate::pipeline) async fn expire(&mut self, ticket: Ticket, delivery: &Delivery) {
        let (age, dead_letter) = match &self.subscription.max_record_age {
            Some(max) => (max.age, max.dead_letter.clone()),
            None => (Duration::ZERO, None),
        };
        let Some(dead_letter) = dead_letter else {
            self.log.say(
                "expired",
                Level::Warn,
                Some(delivery),
                format!("older than the maximum record age of {age:?}: the record is retired"),
            );
            self.report(delivery, Outcome::Drop, None);
            self.mark(ticket);
            return;
        };
        let mut record = OutgoingRecord::counted_copy(delivery, delivery.retry_count, None, None);
        self.add_origin(&mut record, delivery, RECORD_AGE_EXCEEDED);
        self.log.say(
            "expired",
            Level::Warn,
            Some(delivery),
            format!(
                "older than the maximum record age of {age:?}: the record goes to dead-letter \
                 stream `{dead_letter}`"
            ),
        );
        self.report(delivery, Outcome::Drop, None);
        let copy = UnsentCopy::new(
            ticket,
            delivery.sequence_number.to_string(),
            dead_letter,
            record,
        );
        self.send_copy(copy).await;
    }

    /// The delay a copy waits: what the handler asked, clamped to the tenant's maximum (with a
    /// warning), and, when the record is already a copy, at least the minimum between copies
    /// doubled once per earlier copy, up to the maximum: a chain of copies backs off, so a
    /// handler that retries at once forever costs a few copies an hour, not one a second.
    /// Dead letters never wait.
    fn copy_delay(&self, delivery: &Delivery, plan: &CopyPlan) -> Option<Duration> {
        if plan.dead_letter.is_some() {
            return None;
        }
        let limits = &self.limits().copies;
        let mut delay = plan.delay;
        if let Some(asked) = delay.filter(|asked| *asked > limits.max_delay) {
            self.log.say(
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
            let spacing = copy_spacing(limits, delivery.retry_count);
            delay = Some(delay.unwrap_or_default().max(spacing));
        }
        delay
    }

    fn report(&mut self, delivery: &Delivery, outcome: Outcome, trap: Option<TrapKind>) {
        self.outcomes.count(outcome, trap.is_some());
        self.metrics.settled(&outcome);
        if let Some(notes) = &mut self.notes {
            notes.settled.push((delivery.clone(), outcome, trap));
        }
        if let Some(observer) = &self.env.observer {
            observer(&DeliveryReport {
                tenant: self.env.tenant.name().to_owned(),
                app: self.app.to_string(),
                subscriber: self.subscription.name.clone(),
                stream: self.stream.to_string(),
                shard_id: self.shard_id.to_string(),
                sequence_number: delivery.sequence_number.to_string(),
                attempt: delivery.attempt(),
                outcome,
                trap,
                at_ms: self.env.component.clock.now_ms(),
                arrival_ms: delivery.arrival_ms,
                call_duration: self.call_duration,
            });
        }
    }
}

/// The least delay of the copy made from a record that already had `retry_count` copies:
/// `min_copy_delay` doubled `retry_count - 1` times, never over `max_delay` (nor under
/// `min_copy_delay`, should the two be set the wrong way round).
fn copy_spacing(limits: &CopyLimits, retry_count: u32) -> Duration {
    let doublings = retry_count.saturating_sub(1).min(32);
    let spacing = limits
        .min_copy_delay
        .checked_mul(1 << doublings.min(31))
        .unwrap_or(Duration::MAX);
    spacing.min(limits.max_delay).max(limits.min_copy_delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_of_one_record_back_off_up_to_the_maximum_delay() {
        let limits = CopyLimits::default();
        let spacing: Vec<u64> = (1..=13)
            .map(|count| copy_spacing(&limits, count).as_secs())
            .collect();
        assert_eq!(
            spacing,
            [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900, 900]
        );
        assert_eq!(copy_spacing(&limits, u32::MAX), limits.max_delay);
    }
}
