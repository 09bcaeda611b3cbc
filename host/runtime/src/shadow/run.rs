//! One shard of a shadow version: its own instance, fed the records the live version settled.

use std::sync::Arc;

use tokio::sync::watch;

use super::compare::{Comparison, Handling, compare};
use super::tally::{Disagreement, ShadowResult, ShadowTally, SkipReason};
use crate::app::DEFAULT_BATCH_LIMIT;
use crate::app::SubscriptionSpec;
use crate::component::{BatchCall, BatchFailure, HandlerInstance, LoadedComponent};
use crate::env::Env;
use crate::publish::PublishLog;
use crate::record::{Deliveries, Delivery};
use crate::stop::Stop;
use crate::tenant::{MemoryBudget, MemoryReservation};

/// A record the live version settled, and how.
#[derive(Debug, Clone)]
pub struct Settled {
    /// The record as delivered.
    pub delivery: Delivery,
    /// What the live version did with it.
    pub live: Handling,
}

/// A shadow version on one shard: an instance of it under the tenant's limits, whose
/// publishes go to `env`'s publisher (a [`RecordingPublisher`](super::RecordingPublisher))
/// and are noted by record. It settles nothing: outcomes and traps are only compared.
///
/// Its instance exists only while its memory fits in the tenant's budget beside everything
/// else the tenant reserved ([`MemoryBudget`]): checked before each batch, given back as soon
/// as live instances need the room. Records it gets meanwhile are skipped with reason
/// `budget`.
pub struct ShadowRun {
    component: LoadedComponent,
    env: Env,
    instance: Option<HandlerInstance>,
    memory: Arc<MemoryBudget>,
    reservation: Option<MemoryReservation>,
    spec: Arc<SubscriptionSpec>,
    stream: Arc<str>,
    shard_id: Arc<str>,
    publishes: PublishLog,
    tally: Arc<ShadowTally>,
    /// Says when the shadow is withdrawn: its calls stop at their next check, and what is
    /// left of its records is counted `withdrawn`.
    stop: Option<watch::Receiver<Option<Stop>>>,
}

impl ShadowRun {
    /// A shadow of subscription `spec` (as the shadow version declares it) of `component` on
    /// `shard_id`, running in `env`, its instance's memory reserved from `memory`, counting
    /// into `tally`.
    pub fn new(
        component: &LoadedComponent,
        spec: Arc<SubscriptionSpec>,
        shard_id: &str,
        env: Env,
        memory: Arc<MemoryBudget>,
        tally: Arc<ShadowTally>,
    ) -> Self {
        Self {
            component: component.clone(),
            env,
            instance: None,
            memory,
            reservation: None,
            stream: spec.stream.as_str().into(),
            shard_id: shard_id.into(),
            spec,
            publishes: PublishLog::default(),
            tally,
            stop: None,
        }
    }

    /// Stops its calls (at their next check) and its batches once `stop` says anything.
    pub fn stop_when(mut self, stop: watch::Receiver<Option<Stop>>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Whether it was withdrawn.
    pub fn is_withdrawn(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|stop| stop.borrow().is_some())
    }

    /// Hands `settled` to the shadow in order, in batches of the subscription's size,
    /// compares each record's handling with the live version's and tallies the result. After
    /// a trap, the records reported before it stand, the one it was on is the trap, and the
    /// rest go on in the next call (in a fresh instance), as the live pipeline does. A batch
    /// for which the instance does not fit in the tenant's memory budget is skipped.
    pub async fn compare(&mut self, settled: Vec<Settled>) {
        let (deliveries, live): (Vec<Delivery>, Vec<Handling>) =
            settled.into_iter().map(|s| (s.delivery, s.live)).unzip();
        let deliveries = Arc::new(deliveries);
        let limit = self
            .spec
            .batch_limit
            .map_or(DEFAULT_BATCH_LIMIT, |l| l as usize);
        let mut next = 0;
        while next < deliveries.len() {
            if self.is_withdrawn() {
                let left = (deliveries.len() - next) as u64;
                self.tally
                    .count(ShadowResult::Skipped(SkipReason::Withdrawn), left);
                return;
            }
            let end = deliveries.len().min(next + limit);
            if !self.fits() {
                let skipped = (end - next) as u64;
                self.tally
                    .count(ShadowResult::Skipped(SkipReason::Budget), skipped);
                next = end;
                continue;
            }
            let batch = Deliveries::new(deliveries.clone(), next..end);
            let handled = self.call(batch).await;
            let by_record = self.publishes.take_by_record();
            if handled.is_empty() && self.is_withdrawn() {
                // Stopped before it settled anything: counted above at the next turn.
                continue;
            }
            let count = handled.len().max(1);
            for (offset, (outcome, trap)) in handled.into_iter().enumerate() {
                let delivery = &deliveries[next + offset];
                let sequence = delivery.sequence_number.to_string();
                let shadow = Handling {
                    outcome,
                    trap,
                    publishes: by_record.get(&sequence).cloned().unwrap_or_default(),
                };
                self.judge(sequence, &live[next + offset], &shadow);
            }
            next += count;
        }
    }

    /// Whether the shadow has an instance for the next batch: it keeps its memory while the
    /// tenant is within its budget, gives it back (and its instance) when live instances need
    /// it, and takes it again when it fits.
    fn fits(&mut self) -> bool {
        if MemoryReservation::yield_if_over(&mut self.reservation) {
            self.instance = None;
            tracing::warn!(
                tenant = %self.env.policy.tenant(),
                "the shadow's instance gave its memory back to the tenant's live instances; \
                 its records are skipped (budget) until it fits again"
            );
        }
        if self.reservation.is_none() {
            let bytes = self.env.policy.limits().memory_bytes;
            self.reservation = self.memory.try_reserve_shadow(bytes);
        }
        if self.reservation.is_some() && self.instance.is_none() {
            let mut instance = self.component.instance(self.env.clone());
            instance.note_publishes(Some(self.publishes.clone()));
            self.instance = Some(instance);
        }
        self.instance.is_some()
    }

    /// One call of `batch`: the outcome (and trap) of each record it settled.
    async fn call(
        &mut self,
        batch: Deliveries,
    ) -> Vec<(crate::Outcome, Option<crate::component::TrapKind>)> {
        let call = BatchCall {
            subscription: self.spec.index,
            stream: &self.stream,
            shard_id: &self.shard_id,
            deliveries: batch,
            stop: self.stop.as_ref(),
        };
        let Some(instance) = self.instance.as_mut() else {
            // `compare` calls only once `fits` made the instance.
            return Vec::new();
        };
        match instance.handle_batch(&call).await {
            Ok(outcomes) => outcomes.into_iter().map(|o| (o, None)).collect(),
            Err(BatchFailure { settled, failure }) => {
                let mut handled: Vec<_> = settled.into_iter().map(|o| (o, None)).collect();
                // Stopped by the host: the rest are neither compared nor trapped (the next
                // turn counts them withdrawn).
                if failure.kind.is_hosts() {
                    return handled;
                }
                if handled.len() < call.deliveries.len() {
                    handled.push((self.spec.on_trap, Some(failure.kind)));
                }
                handled
            }
        }
    }

    fn judge(&self, sequence_number: String, live: &Handling, shadow: &Handling) {
        let (result, publishes) = match compare(live, shadow) {
            Comparison::Agree => (ShadowResult::Agree, None),
            Comparison::Trap => (ShadowResult::Trap, (live != shadow).then(Vec::new)),
            Comparison::Disagree { publishes } => (ShadowResult::Disagree, Some(publishes)),
        };
        self.tally.count(result, 1);
        if let Some(publishes) = publishes {
            self.tally.disagreed(Disagreement {
                shard_id: self.shard_id.to_string(),
                sequence_number,
                live: live.to_string(),
                shadow: shadow.to_string(),
                publishes,
            });
        }
    }
}
