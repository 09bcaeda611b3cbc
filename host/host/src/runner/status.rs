//! What a running subscription is doing, shard by shard.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use ruststream_runtime::sync::lock;
use ruststream_runtime::{
    ShardPipeline,
    clock::{Clock, SystemClock},
    pipeline::OutcomeCounts,
};

use crate::kinesis::ReadProgress;

/// The state of one shard on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardState {
    /// Leased; the reader is opening its iterator.
    Opening,
    /// Reading and delivering.
    Reading,
    /// Read to its end and settled (`SHARD_END` stored).
    Finished,
    /// Another host took the lease; nothing more is delivered here.
    Lost,
    /// Handed over to the host that asked for it (balancing), checkpoint flushed.
    HandedOver(String),
    /// Stopped by shutdown (checkpoint flushed, lease released).
    Stopped,
    /// Stopped by an error, which says why.
    Failed(String),
}

/// One shard's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardStatus {
    /// Where its worker stands.
    pub state: ShardState,
    /// The host holding its lease while this host reads it.
    pub owner: Option<String>,
    /// Records delivered to the component on this host.
    pub delivered: u64,
    /// The checkpoint the pipeline reached (stored within the checkpoint interval).
    pub checkpoint: Option<String>,
    /// The first unhandled record, in front of which the checkpoint is held.
    pub held_at: Option<String>,
    /// Since when (ms since the epoch) the checkpoint has been held in front of `held_at`.
    pub held_since_ms: Option<u64>,
    /// Records read and not handled yet: held, waiting for a due time, or whose copy is still
    /// being published.
    pub unhandled: u64,
    /// Copies owed to a stream: waiting for their due time or being published.
    pub copies_pending: u64,
    /// How its deliveries settled on this host.
    pub outcomes: OutcomeCounts,
    /// How far behind the tip of the shard its last read was, as Kinesis reported it.
    pub millis_behind_latest: Option<i64>,
    /// How old the last record of the last non-empty read was when it was read (ms): Lambda's
    /// iterator age.
    pub iterator_age_ms: Option<u64>,
    /// Delivery is paused: the component's tenant is quarantined.
    pub quarantined: bool,
}

/// One subscription's status.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscriptionStatus {
    /// The subscription.
    pub subscriber: String,
    /// The stream it reads.
    pub stream: String,
    /// Shards this host holds or held, by shard id.
    pub shards: BTreeMap<String, ShardStatus>,
    /// Set when the subscription stopped as a whole (e.g. its stream was deleted), or takes
    /// no lease until an operator acts (its lease table holds legacy rows).
    pub error: Option<String>,
}

impl SubscriptionStatus {
    /// Shards in `state`.
    pub fn count(&self, state: &ShardState) -> usize {
        self.shards.values().filter(|s| s.state == *state).count()
    }
}

/// A subscription's status, shared by its coordinator and workers.
#[derive(Debug, Clone)]
pub(crate) struct StatusBoard {
    status: Arc<Mutex<SubscriptionStatus>>,
    /// Each shard's reader progress, read at every snapshot: lag stays current while a worker
    /// is not reading (its tenant stopped, a long call).
    progress: Arc<Mutex<HashMap<String, Arc<ReadProgress>>>>,
}

impl StatusBoard {
    pub(crate) fn new(subscriber: &str, stream: &str) -> Self {
        Self {
            status: Arc::new(Mutex::new(SubscriptionStatus {
                subscriber: subscriber.to_owned(),
                stream: stream.to_owned(),
                ..SubscriptionStatus::default()
            })),
            progress: Arc::default(),
        }
    }

    /// The status now; each shard's `millis_behind_latest` is its reader's last figure plus
    /// the time since, beyond the reader's usual gap, that nobody read the shard.
    pub(crate) fn snapshot(&self) -> SubscriptionStatus {
        let mut status = self.lock().clone();
        let now_ms = SystemClock.now_ms();
        for (shard_id, progress) in lock(&self.progress).iter() {
            if let (Some(shard), Some(behind)) =
                (status.shards.get_mut(shard_id), progress.behind_ms(now_ms))
            {
                shard.millis_behind_latest = Some(i64::try_from(behind).unwrap_or(i64::MAX));
            }
        }
        status
    }

    /// Reports `shard_id`'s lag from `progress` from now on (its reader, opened or reopened).
    pub(crate) fn follow_reads(&self, shard_id: &str, progress: Arc<ReadProgress>) {
        lock(&self.progress).insert(shard_id.to_owned(), progress);
    }

    pub(crate) fn set_state(&self, shard_id: &str, state: ShardState) {
        self.update(shard_id, |s| s.state = state);
    }

    pub(crate) fn update(&self, shard_id: &str, change: impl FnOnce(&mut ShardStatus)) {
        let mut status = self.lock();
        let shard = status
            .shards
            .entry(shard_id.to_owned())
            .or_insert_with(|| ShardStatus {
                state: ShardState::Opening,
                owner: None,
                delivered: 0,
                checkpoint: None,
                held_at: None,
                held_since_ms: None,
                unhandled: 0,
                copies_pending: 0,
                outcomes: OutcomeCounts::default(),
                millis_behind_latest: None,
                iterator_age_ms: None,
                quarantined: false,
            });
        change(shard);
    }

    /// Records what `pipeline` holds: where the checkpoint is held (keeping the time it first
    /// stood there), how many records are unhandled and how many copies are owed.
    pub(crate) fn set_holds(&self, shard_id: &str, pipeline: &ShardPipeline, now_ms: u64) {
        let held_at = pipeline.held_at();
        self.update(shard_id, |s| {
            if s.held_at.as_deref() != held_at {
                s.held_since_ms = held_at.map(|_| now_ms);
                s.held_at = held_at.map(str::to_owned);
            }
            s.unhandled = pipeline.unhandled() as u64;
            s.copies_pending = pipeline.pending_copies() as u64;
        });
    }

    pub(crate) fn set_error(&self, error: String) {
        self.lock().error = Some(error);
    }

    pub(crate) fn clear_error(&self) {
        self.lock().error = None;
    }

    fn lock(&self) -> MutexGuard<'_, SubscriptionStatus> {
        lock(&self.status)
    }
}

/// One version of an app's component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionInfo {
    /// The component's name (its file stem, or the name it was uploaded under).
    pub component: String,
    /// The version the app declares.
    pub version: String,
    /// The SHA-256 of the component's bytes, hex.
    pub content_hash: String,
}

/// How the newest version of an app is doing against the one it replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutStatus {
    /// Calls the new version made since it went live.
    pub calls: u64,
    /// Of which failed (trapped).
    pub failures: u64,
    /// How many of its first calls are judged.
    pub judged_over: u32,
    /// `pending`, `kept`, or `rolled back: <why>`.
    pub verdict: String,
}

/// Which versions of an app run, and how the last swap went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppVersions {
    /// The version serving now.
    pub current: VersionInfo,
    /// The version it replaced, which a rollback returns to.
    pub previous: Option<VersionInfo>,
    /// The rollout of the last swap, if there was one.
    pub rollout: Option<RolloutStatus>,
    /// How many times the app was rolled back since the host started.
    pub rollbacks: u64,
}
