//! Kinesis: listing shards, reading them, and publishing records.
//!
//! Reads pace themselves (at most 5 GetRecords per second per shard) and retry throttling and
//! server errors themselves, with jittered exponential backoff, so the log says what happened
//! and an expired iterator is reopened where the reader stood, never at the tip.

mod backoff;
mod publisher;
mod reader;
mod shards;

pub use backoff::Backoff;
pub use publisher::KinesisPublisher;
pub use reader::{ReadError, ReaderConfig, ShardReader, StartAt};
pub use shards::{ShardInfo, list_shards};

use aws_sdk_kinesis::error::ProvideErrorMetadata;

/// Renders an SDK error as its service code and message rather than "service error".
pub(crate) fn describe_error<E: ProvideErrorMetadata + std::fmt::Debug>(error: &E) -> String {
    match (error.code(), error.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_owned(),
        _ => format!("{error:?}"),
    }
}
