//! Writing records to streams: the seam between the runtime and a transport.

mod notes;
mod recorded;

pub(crate) use notes::InstanceNotes;
pub use notes::{MAX_NOTED_PER_RECORD, PublishNotes, PublishedBy, RefusedPublish};
pub use recorded::{PublishLog, RecordedPublish, RecordingPublisher};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::record::{OutgoingRecord, Published};

/// Largest record Kinesis accepts: data plus partition key.
pub const MAX_RECORD_BYTES: u64 = 1024 * 1024;

/// A boxed future, for the object-safe async seams of the runtime.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Writes records to streams. Implemented by the Kinesis client and by the in-process streams
/// of `TestApp`.
///
/// `publish` resolves once the stream has acknowledged the record (it is durable), or with the
/// reason it was not written. Implementations retry what is worth retrying (throttling, 5xx)
/// before giving up.
pub trait Publisher: Send + Sync + 'static {
    /// Writes `record` to `stream`.
    ///
    /// # Errors
    /// Why it was not written; see [`PublishError`].
    fn publish<'a>(
        &'a self,
        stream: &'a str,
        record: OutgoingRecord,
    ) -> BoxFuture<'a, Result<Published, PublishError>>;
}

/// Why a record was not published.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The stream does not exist.
    #[error("stream `{0}` does not exist")]
    StreamNotFound(String),
    /// The tenant may not publish to the stream.
    #[error("publishing to stream `{0}` is not granted to this tenant")]
    NotPermitted(String),
    /// The record (data plus partition key, envelope included) is too large for a stream.
    #[error("record of {size} bytes exceeds the {MAX_RECORD_BYTES}-byte limit of a stream record")]
    RecordTooLarge {
        /// Its size in bytes.
        size: u64,
    },
    /// The stream refused the record for throughput, through every retry of the transport.
    #[error("stream `{0}` stayed throttled through every retry")]
    Throttled(String),
    /// The tenant's write quota is spent for now.
    #[error("tenant `{0}` has spent its write quota for now (records or bytes per second)")]
    QuotaExceeded(String),
    /// The record carries a header reserved to the host (`x-ruststream-*`), or one readers
    /// set on delivery ([`NATIVE_DELIVERY_HEADERS`](crate::envelope::NATIVE_DELIVERY_HEADERS)),
    /// which no reader would show.
    #[error(
        "header `{0}` is reserved to the host (`x-ruststream-*`) or set by readers on delivery \
         (`partition-key`, `kinesis-sequence-number`, `kinesis-shard-id`)"
    )]
    ReservedHeader(String),
    /// The transport failed otherwise: the cause is the transport's own error (an SDK error
    /// stays an SDK error).
    #[error("publishing to stream `{stream}` failed")]
    Unavailable {
        /// The stream.
        stream: String,
        /// What the transport said.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
}

impl PublishError {
    /// Whether publishing the same record again later may succeed, so a counted copy keeps
    /// being retried: throttling and outages pass, and an operator may create a missing stream
    /// or grant one. Only a record too large never fits.
    pub fn can_succeed_later(&self) -> bool {
        !matches!(self, Self::RecordTooLarge { .. } | Self::ReservedHeader(_))
    }

    /// The case of the contract's `publish-error` a component is told: `stream-not-found`,
    /// `not-permitted`, `record-too-large`, `throttled` (the stream's or the tenant's write
    /// quota), `reserved-header` or `unavailable`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::StreamNotFound(_) => "stream-not-found",
            Self::NotPermitted(_) => "not-permitted",
            Self::RecordTooLarge { .. } => "record-too-large",
            Self::Throttled(_) | Self::QuotaExceeded(_) => "throttled",
            Self::ReservedHeader(_) => "reserved-header",
            Self::Unavailable { .. } => "unavailable",
        }
    }
}

/// Checks a record against the stream record size limit before it is sent anywhere.
///
/// # Errors
/// [`PublishError::RecordTooLarge`] with its size.
pub fn check_size(record: &OutgoingRecord) -> Result<(), PublishError> {
    let size = record.stream_size();
    if size > MAX_RECORD_BYTES {
        return Err(PublishError::RecordTooLarge { size });
    }
    Ok(())
}

/// The partition key used when a guest publishes without one: derived from the data alone
/// (64-bit FNV-1a, hex), so the same payload always lands on the same shard.
pub(crate) fn derived_partition_key(data: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in data {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_are_stable_and_spread() {
        assert_eq!(derived_partition_key(b""), "cbf29ce484222325");
        assert_eq!(derived_partition_key(b"a"), derived_partition_key(b"a"));
        assert_ne!(derived_partition_key(b"a"), derived_partition_key(b"b"));
    }

    #[test]
    fn oversized_records_are_refused() {
        let record = OutgoingRecord {
            partition_key: "k".into(),
            payload: vec![0; MAX_RECORD_BYTES as usize],
            headers: vec![],
        };
        assert!(matches!(
            check_size(&record),
            Err(PublishError::RecordTooLarge { size }) if size == MAX_RECORD_BYTES + 1
        ));
    }
}
