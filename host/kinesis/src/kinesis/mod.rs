//! Kinesis: listing shards, reading them, and publishing records.
//!
//! Reads pace themselves (at most 5 GetRecords per second per shard, all readers of the shard
//! in a host together, turns divided by tenant), are shared by the readers that stand at the
//! same place in a shard, and retry throttling, server errors and stalled calls themselves,
//! with jittered exponential backoff, so the log says what happened and an expired iterator is
//! reopened where the reader stood, never at the tip. A subscription may read by enhanced
//! fan-out instead (`fan_out.rs`, through a consumer of its app's own: `consumer.rs`).

mod answer;
mod batch;
mod calls;
mod consumer;
mod fan_out;
mod listings;
mod pacing;
mod progress;
mod publisher;
mod read_config;
mod read_error;
mod reader;
mod shards;
mod shared;
mod tap;
#[cfg(test)]
mod test_shard;

pub use batch::Batch;
pub use consumer::{CONSUMERS_PER_STREAM, Consumers, consumer_name};
pub use fan_out::STALLED_AFTER;
pub(crate) use listings::ShardListings;
pub use pacing::{MIN_READ_INTERVAL, READS_WINDOW, ReadPacing, ReaderOwner, ShardReads};
pub use progress::ReadProgress;
pub use publisher::KinesisPublisher;
pub use read_config::{ReadMode, ReaderConfig, StartAt};
pub use read_error::ReadError;
pub use reader::ShardReader;
pub use shards::{ShardInfo, list_shards};
pub use shared::SharedReads;
