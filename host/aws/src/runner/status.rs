//! What a running subscription is doing, shard by shard.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use ruststream_runtime::internals::lock;

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
    /// Records delivered to the component on this host.
    pub delivered: u64,
    /// The checkpoint the pipeline reached (stored within the checkpoint interval).
    pub checkpoint: Option<String>,
    /// The first unhandled record, in front of which the checkpoint is held.
    pub held_at: Option<String>,
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
    /// Set when the subscription stopped as a whole (e.g. its stream was deleted).
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
pub(crate) struct StatusBoard(Arc<Mutex<SubscriptionStatus>>);

impl StatusBoard {
    pub(crate) fn new(subscriber: &str, stream: &str) -> Self {
        Self(Arc::new(Mutex::new(SubscriptionStatus {
            subscriber: subscriber.to_owned(),
            stream: stream.to_owned(),
            ..SubscriptionStatus::default()
        })))
    }

    pub(crate) fn snapshot(&self) -> SubscriptionStatus {
        self.lock().clone()
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
                delivered: 0,
                checkpoint: None,
                held_at: None,
                quarantined: false,
            });
        change(shard);
    }

    pub(crate) fn set_error(&self, error: String) {
        self.lock().error = Some(error);
    }

    fn lock(&self) -> MutexGuard<'_, SubscriptionStatus> {
        lock(&self.0)
    }
}
