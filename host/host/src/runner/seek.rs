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

/// A seek on its way to a subscription's coordinator.
pub(crate) struct SeekRequest {
    pub position: StartPosition,
    /// The shards moved, or why not.
    pub reply: oneshot::Sender<Result<Vec<String>, SeekError>>,
}

/// A seek on its way to one shard's worker.
pub(crate) struct ShardSeek {
    pub position: StartPosition,
    pub reply: oneshot::Sender<Result<(), ReadError>>,
}
