//! Seeking a running subscription: the commands that carry a seek to its shards.

use tokio::sync::oneshot;

use crate::kinesis::ReadError;
use ruststream_runtime::app::StartPosition;

/// Why a seek was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeekError {
    /// The app has no subscriber of this name.
    #[error("no subscriber `{0}` in this app")]
    UnknownSubscriber(String),
    /// A sequence-number seek names a shard another host holds.
    #[error(
        "subscriber `{subscriber}`: shard `{shard_id}` is not held by this host, so it cannot be moved here"
    )]
    NotOwned {
        /// The subscriber.
        subscriber: String,
        /// The shard.
        shard_id: String,
    },
    /// The subscriber stopped running.
    #[error("subscriber `{0}` is no longer running")]
    Stopped(String),
    /// A shard could not be reopened at the position; it reads on where it was.
    #[error("subscriber `{subscriber}`: shard `{shard_id}` could not be reopened")]
    Reopen {
        /// The subscriber.
        subscriber: String,
        /// The shard.
        shard_id: String,
        /// Why.
        #[source]
        source: ReadError,
    },
}

/// A seek the fleet recorded: every shard of the subscription is moved once, whichever host
/// holds it, and its lease row keeps the seek's `id` as its mark
/// ([`LeaseStore::mark_seek`](crate::lease::LeaseStore::mark_seek)). Ids only grow: a shard
/// whose mark is at least `id` was moved by this seek (or a later one) already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FleetSeekMark {
    /// The seek's id.
    pub(crate) id: u64,
    /// Where it moves the shards it names.
    pub(crate) position: StartPosition,
}

impl FleetSeekMark {
    /// Whether the seek moves `shard_id` (a sequence names one shard), stored with `mark`.
    pub(crate) fn moves(&self, shard_id: &str, mark: Option<u64>) -> bool {
        let named = match &self.position {
            StartPosition::AtSequence {
                shard_id: named, ..
            } => named == shard_id,
            _ => true,
        };
        named && mark.is_none_or(|mark| mark < self.id)
    }
}

/// A seek on its way to a subscription's coordinator.
pub(crate) struct SeekRequest {
    pub position: StartPosition,
    /// Set for a fleet seek: its id, so that each shard is moved once.
    pub mark: Option<u64>,
    /// The shards moved, or why not.
    pub reply: oneshot::Sender<Result<Vec<String>, SeekError>>,
}

/// A seek on its way to one shard's worker.
pub(crate) struct ShardSeek {
    pub position: StartPosition,
    pub mark: Option<u64>,
    /// Whether it moved (a fleet seek the shard's row says moved it already does not).
    pub reply: oneshot::Sender<Result<bool, ReadError>>,
}
