//! A shadow version of a running app: fed, per shard, the records the live version settled,
//! through a bounded queue the live worker never waits on; run with no effects; compared
//! record by record (see `ruststream_runtime::shadow`).

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, watch};
use tracing::Instrument as _;

use ruststream_runtime::cpu::{CpuAccount, Role};
use ruststream_runtime::shadow::{
    Disagreement, RecordingPublisher, Settled, ShadowCounts, ShadowResult, ShadowRun, ShadowTally,
    SkipReason,
};
use ruststream_runtime::tenant::MemoryBudget;
use ruststream_runtime::{
    LoadedComponent, ShardPipeline, Tenant, component::Env, pipeline::Stop, policy::SandboxPolicy,
};

use super::Host;
use super::settings::OperatorSettings;
use super::status::VersionInfo;

/// Disagreements a shadow keeps to show (the first ones found).
pub const KEPT_DISAGREEMENTS: usize = 20;

/// Batches of settled records waiting for one shard's shadow. Past it, what the live version
/// settles is skipped (counted `skipped`, reason `behind`) until the shadow catches up: the
/// live worker never waits for its shadow.
const QUEUED_BATCHES: usize = 16;

/// A shadow version as the host runs it: its component, the environment of its instances, the
/// tenant's memory its instances reserve from, the share of records it gets, and its tally
/// over every shard.
pub(crate) struct ShadowRelease {
    pub component: LoadedComponent,
    env: Env,
    memory: Arc<MemoryBudget>,
    /// Share of records compared, in (0, 1].
    pub sample_rate: f64,
    pub tally: Arc<ShadowTally>,
    publisher: Arc<RecordingPublisher>,
    settings: HashMap<String, OperatorSettings>,
    /// Says `Withdrawn` once the shadow is aborted, promoted or replaced.
    withdrawn: watch::Sender<Option<Stop>>,
    /// The tenant's share of the compute threads, which its calls wait in.
    cpu: Option<Arc<CpuAccount>>,
}

impl ShadowRelease {
    /// `component` as a shadow of `tenant`'s app: the tenant's limits (deadline, memory, fuel,
    /// log caps) apply to its instances as to the live version's, and each instance reserves
    /// its memory from the tenant's budget or is not made. It gets a policy of its own
    /// so that its publishes never spend the live version's write quota and its host lines
    /// never crowd out the live version's; its publisher writes nothing, and its component is
    /// named `NAME (shadow)` in every line it logs.
    pub(crate) fn new(
        host: &Host,
        component: LoadedComponent,
        tenant: &Tenant,
        sample_rate: f64,
        settings: HashMap<String, OperatorSettings>,
    ) -> Self {
        let live = tenant.policy();
        let policy = SandboxPolicy::shadow_of(live);
        let cpu = component.cpu_account(&policy);
        let publisher = Arc::new(RecordingPublisher::default());
        let mut env = component.env(
            Arc::new(policy),
            publisher.clone(),
            host.clock.clone(),
            host.log.clone(),
        );
        env.component = format!("{} (shadow)", component.name()).into();
        let tally = Arc::new(ShadowTally::new(
            tenant.name(),
            &component.app().name,
            live.limits().max_metric_series,
            KEPT_DISAGREEMENTS,
        ));
        Self {
            component,
            env,
            memory: tenant.memory().clone(),
            sample_rate: sample_rate.clamp(f64::MIN_POSITIVE, 1.0),
            tally,
            publisher,
            settings,
            withdrawn: watch::channel(None).0,
            cpu,
        }
    }

    /// Withdraws it: its calls in flight stop at their next check, and the records queued
    /// for it are dropped, counted `withdrawn`. Its CPU use ends within one epoch tick.
    pub(crate) fn withdraw(&self) {
        self.withdrawn.send_replace(Some(Stop::Withdrawn));
    }

    /// Why a full queue skips records: its calls wait for CPU that live calls took (`cpu`),
    /// or it is slower than the live version (`behind`).
    fn full_queue_reason(&self) -> SkipReason {
        if self
            .cpu
            .as_ref()
            .is_some_and(|cpu| cpu.is_waiting(Role::Shadow))
        {
            SkipReason::Cpu
        } else {
            SkipReason::Behind
        }
    }

    /// What an operator sees of it.
    pub(crate) fn status(&self) -> ShadowStatus {
        ShadowStatus {
            version: VersionInfo {
                component: self.component.name().to_owned(),
                version: self.component.app().version.clone(),
                content_hash: self.component.content_hash().to_owned(),
            },
            sample_percent: (self.sample_rate * 100.0).round() as u32,
            counts: self.tally.counts(),
            publishes_recorded: self.publisher.accepted(),
            disagreements: self.tally.disagreements(),
        }
    }

    /// Starts the shadow of `subscriber` (reading `stream`) on `shard_id`, if the shadow
    /// version declares that subscription on that stream.
    fn start_shard(
        &self,
        subscriber: &str,
        stream: &str,
        shard_id: &str,
    ) -> Option<mpsc::Sender<Vec<Settled>>> {
        let spec = self
            .component
            .app()
            .subscriptions
            .iter()
            .find(|s| s.name == subscriber && s.stream == stream)?;
        let spec = match self.settings.get(subscriber) {
            Some(settings) => settings.apply(spec),
            None => spec.clone(),
        };
        let mut withdrawn = self.withdrawn.subscribe();
        let mut run = ShadowRun::new(
            &self.component,
            Arc::new(spec),
            shard_id,
            self.env.clone(),
            self.memory.clone(),
            self.tally.clone(),
        )
        .stop_when(withdrawn.clone());
        let tally = self.tally.clone();
        let (feed, mut queue) = mpsc::channel::<Vec<Settled>>(QUEUED_BATCHES);
        let span = tracing::info_span!("shadow", shard = %shard_id,
            version = %self.component.app().version);
        // Ends once the worker drops its end of the queue (the shard gone) and what was
        // queued is compared, or at once when the shadow is withdrawn, dropping the queue.
        tokio::spawn(
            async move {
                loop {
                    let settled = tokio::select! {
                        biased;
                        _ = withdrawn.wait_for(Option::is_some) => None,
                        settled = queue.recv() => settled,
                    };
                    match settled {
                        Some(settled) if !run.is_withdrawn() => run.compare(settled).await,
                        _ => break,
                    }
                }
                if run.is_withdrawn() {
                    queue.close();
                    let mut dropped = 0;
                    while let Ok(settled) = queue.try_recv() {
                        dropped += settled.len() as u64;
                    }
                    tally.count(ShadowResult::Skipped(SkipReason::Withdrawn), dropped);
                }
            }
            .instrument(span),
        );
        Some(feed)
    }

    /// Whether the record with `sequence` is among the sampled ones.
    fn samples(&self, sequence: &str) -> bool {
        sampled(self.sample_rate, sequence)
    }
}

/// Whether a record with `sequence` is among a `rate` share of records: decided by its
/// sequence number alone (64-bit FNV-1a), so every host, and every restart, samples the same
/// records.
fn sampled(rate: f64, sequence: &str) -> bool {
    if rate >= 1.0 {
        return true;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in sequence.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % 10_000) as f64 / 10_000.0 < rate
}

/// What an operator sees of a shadow version, as the admin API sends it (`apps[].shadow`):
/// the counts flattened beside the version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowStatus {
    /// Which build it is.
    pub version: VersionInfo,
    /// The percentage of records it is given (1 to 100).
    pub sample_percent: u32,
    /// Records by result, over every shard on this host.
    #[serde(flatten)]
    pub counts: ShadowCounts,
    /// Publishes it made, answered as accepted and never written.
    pub publishes_recorded: u64,
    /// The first disagreements (at most [`KEPT_DISAGREEMENTS`]).
    pub disagreements: Vec<Disagreement>,
}

impl ShadowStatus {
    /// Records compared: agreed, disagreed or trapped.
    pub fn compared(&self) -> u64 {
        self.counts.agree + self.counts.disagree + self.counts.trap
    }
}

/// One shard worker's side of the shadow: the shadow it feeds, if any, and its queue.
#[derive(Default)]
pub(crate) struct ShadowFeed {
    running: Option<Arc<ShadowRelease>>,
    queue: Option<mpsc::Sender<Vec<Settled>>>,
}

impl ShadowFeed {
    /// Follows `wanted`, the app's shadow now: starts feeding a new one (the old one's queue
    /// is dropped, which ends it), or stops when there is none. The pipeline notes its
    /// settlements only while a shadow is fed.
    pub(crate) fn follow(
        &mut self,
        wanted: Option<&Arc<ShadowRelease>>,
        pipeline: &mut ShardPipeline,
        subscriber: &str,
    ) {
        let same = match (&self.running, wanted) {
            (Some(running), Some(wanted)) => Arc::ptr_eq(running, wanted),
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        self.running = wanted.cloned();
        self.queue = wanted.and_then(|shadow| {
            let stream = pipeline.subscription().stream.clone();
            shadow.start_shard(subscriber, &stream, pipeline.shard_id())
        });
        pipeline.note_settlements(self.queue.is_some());
        // Settled before this shadow started: not its records.
        let _ = pipeline.take_settled();
    }

    /// Offers the shadow what the pipeline settled since the last offer: sampled records go
    /// to its queue unless it is full, the rest are counted `skipped` (`sample`, `behind`).
    /// Never waits.
    pub(crate) fn offer(&mut self, pipeline: &mut ShardPipeline) {
        let (Some(shadow), Some(queue)) = (&self.running, &self.queue) else {
            return;
        };
        let settled = pipeline.take_settled();
        if settled.is_empty() {
            return;
        }
        let total = settled.len();
        let sampled: Vec<Settled> = settled
            .into_iter()
            .filter(|s| shadow.samples(s.delivery.sequence_number.as_str()))
            .collect();
        let skip = |reason: SkipReason, n: usize| {
            if n > 0 {
                shadow.tally.count(ShadowResult::Skipped(reason), n as u64);
            }
        };
        skip(SkipReason::Sample, total - sampled.len());
        if sampled.is_empty() {
            return;
        }
        match queue.try_send(sampled) {
            Ok(()) => {}
            Err(TrySendError::Full(sampled)) => skip(shadow.full_queue_reason(), sampled.len()),
            Err(TrySendError::Closed(sampled)) => {
                skip(SkipReason::Behind, sampled.len());
                self.queue = None;
                pipeline.note_settlements(false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_takes_about_the_share_asked_and_always_the_same_records() {
        let sequences: Vec<String> = (0..10_000_u64)
            .map(|n| format!("4962{:040}", n * 7))
            .collect();
        let taken = |rate: f64| sequences.iter().filter(|s| sampled(rate, s)).count();
        assert_eq!(taken(1.0), 10_000);
        let quarter = taken(0.25);
        assert!((2_200..=2_800).contains(&quarter), "{quarter}");
        assert_eq!(taken(0.25), quarter, "the same records every time");
        assert!(
            sequences
                .iter()
                .all(|s| sampled(0.5, s) || !sampled(0.25, s)),
            "a smaller share is a subset of a larger one"
        );
    }
}
