//! How a shard is read: the reader's settings, and where it starts.

use std::time::Duration;

use super::pacing::MIN_READ_INTERVAL;

/// Consecutive failed reads after which the reader gives up (the lease is released and the
/// shard is taken again later).
pub(crate) const MAX_CONSECUTIVE_FAILURES: u32 = 20;

/// How a shard is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderConfig {
    /// Most records per GetRecords (1..=10000; default 10000, as KCL: with at most 5 reads a
    /// second per shard, a smaller limit caps a shard below what it can deliver).
    pub get_records_limit: i32,
    /// Pause after a read that returned no records.
    pub poll_interval: Duration,
    /// Least time between two GetRecords on one shard; never below 200 ms (5 reads/s).
    pub min_read_interval: Duration,
    /// First pause after a throttled or failed read; pauses double from there.
    pub backoff_first: Duration,
    /// Largest pause after a throttled or failed read.
    pub backoff_max: Duration,
    /// Longest a GetRecords call may take before it is abandoned and made again with the same
    /// iterator (a failed read). Default 10 s: an answer holds at most 10 MiB, which reaches
    /// a host in well under a second in a region; a call still silent after 10 s has stalled.
    pub get_records_timeout: Duration,
    /// Longest a GetShardIterator call may take before it is abandoned and made again.
    /// Default 5 s: its answer is a few hundred bytes, usually there in tens of milliseconds.
    pub get_shard_iterator_timeout: Duration,
    /// Longest a ListShards listing (all its pages) may take before it is abandoned; the next
    /// round lists again, and meanwhile the last listing serves. Default 5 s, as
    /// GetShardIterator: a page of up to 1 000 shards is small.
    pub list_shards_timeout: Duration,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        Self {
            get_records_limit: 10_000,
            poll_interval: Duration::from_secs(1),
            min_read_interval: MIN_READ_INTERVAL,
            backoff_first: Duration::from_millis(200),
            backoff_max: Duration::from_secs(10),
            get_records_timeout: Duration::from_secs(10),
            get_shard_iterator_timeout: Duration::from_secs(5),
            list_shards_timeout: Duration::from_secs(5),
        }
    }
}

/// How a subscription reads its shards; spelled `polling` and `fan-out` in the tenants file
/// and the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadMode {
    /// GetRecords, paced and shared by the host's readers of a shard (five reads a second per
    /// shard for the whole fleet).
    #[default]
    Polling,
    /// Enhanced fan-out: records pushed over `SubscribeToShard` through a consumer of the
    /// app's own, with 2 MB/s per shard of its own and no polling.
    FanOut,
}

/// Where to start reading a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartAt {
    /// After a stored checkpoint.
    AfterSequence(String),
    /// At this record (redelivering it).
    AtSequence(String),
    /// The oldest record still in the shard.
    Horizon,
    /// Only records written from now on.
    Latest,
    /// Records that arrived at or after this time (ms since the epoch).
    AtTimestamp(u64),
}
