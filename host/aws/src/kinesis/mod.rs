//! Kinesis: listing shards, reading them, and publishing records.
//!
//! Reads pace themselves (at most 5 GetRecords per second per shard, all readers of the shard
//! in a host together) and retry throttling and
//! server errors themselves, with jittered exponential backoff, so the log says what happened
//! and an expired iterator is reopened where the reader stood, never at the tip.

mod answer;
mod listings;
mod pacing;
mod publisher;
mod reader;
mod shards;
mod tap;

pub(crate) use listings::ShardListings;
pub use pacing::{MIN_READ_INTERVAL, ReadPacing};
pub use publisher::KinesisPublisher;
pub use reader::{Batch, ReadError, ReaderConfig, ShardReader, StartAt};
pub use shards::{ShardInfo, list_shards};
