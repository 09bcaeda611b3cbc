//! Streams, start positions and the broker a service registers its subscribers with.

use crate::bindings::exports::ruststream::handler::handler as wit;

/// A Kinesis stream a subscriber reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KinesisStream {
    name: String,
}

impl KinesisStream {
    /// The stream called `name`. The host checks at load that the name is a valid stream name
    /// and that the tenant is granted the stream.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }

    /// The stream's name.
    pub fn stream(&self) -> &str {
        &self.name
    }

    pub(crate) fn into_name(self) -> String {
        self.name
    }
}

/// A position in a stream: where a subscription starts reading shards that have no checkpoint
/// (see [`SubscriberSettings::start_at`](crate::SubscriberSettings::start_at)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KinesisPosition {
    /// The oldest record still in each shard.
    Horizon,
    /// Only records written after the shard is opened.
    Latest,
    /// The first record that arrived at or after this time, in milliseconds since the epoch.
    Timestamp(u64),
    /// This record of this shard (delivered again).
    Sequence {
        /// The shard; other shards start at the tip.
        shard: String,
        /// The record's sequence number.
        sequence: String,
    },
}

impl KinesisPosition {
    /// The oldest record still in each shard.
    pub const fn horizon() -> Self {
        Self::Horizon
    }

    /// Only records written from now on.
    pub const fn latest() -> Self {
        Self::Latest
    }

    /// The first record that arrived at or after `millis` since the epoch. The host refuses a
    /// time in the future.
    pub const fn timestamp(millis: u64) -> Self {
        Self::Timestamp(millis)
    }

    /// Record `sequence` of `shard`, delivered again; the other shards start at the tip.
    pub fn sequence(shard: impl Into<String>, sequence: impl Into<String>) -> Self {
        Self::Sequence {
            shard: shard.into(),
            sequence: sequence.into(),
        }
    }

    pub(crate) fn to_wit(&self) -> wit::StartPosition {
        match self {
            Self::Horizon => wit::StartPosition::Horizon,
            Self::Latest => wit::StartPosition::Latest,
            Self::Timestamp(millis) => wit::StartPosition::AtTimestamp(*millis),
            Self::Sequence { shard, sequence } => {
                wit::StartPosition::AtSequence(wit::SequencePosition {
                    shard_id: shard.clone(),
                    sequence_number: sequence.clone(),
                })
            }
        }
    }
}

/// The Kinesis broker of the host running this component.
///
/// The host owns the connection, the leases and the checkpoints; a component only names the
/// streams it subscribes to. The host hands this token to the service function.
#[derive(Debug, Clone, Default)]
pub struct KinesisBroker {
    _private: (),
}

impl KinesisBroker {
    pub(crate) fn new() -> Self {
        Self { _private: () }
    }
}
