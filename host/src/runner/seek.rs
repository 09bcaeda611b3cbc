//! Seeking a running subscription: the commands that carry a seek to its shards.

use tokio::sync::oneshot;

use crate::app::StartPosition;

/// Why a seek was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeekError {
    #[error("no subscriber `{0}` in this app")]
    UnknownSubscriber(String),
    #[error(
        "subscriber `{subscriber}`: shard `{shard_id}` is not held by this host, so it cannot be moved here"
    )]
    NotOwned {
        subscriber: String,
        shard_id: String,
    },
    #[error("subscriber `{0}` is no longer running")]
    Stopped(String),
    #[error("subscriber `{subscriber}`: shard `{shard_id}` could not be reopened: {reason}")]
    Reopen {
        subscriber: String,
        shard_id: String,
        reason: String,
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
    pub reply: oneshot::Sender<Result<(), String>>,
}
