//! Publishing records to streams through the host.

use std::fmt;

use serde::Serialize;

use crate::bindings::ruststream::handler::host;
use crate::bindings::ruststream::handler::types::Header;

/// A record to publish.
#[derive(Debug, Clone, Default)]
pub struct Record {
    data: Vec<u8>,
    partition_key: Option<String>,
    headers: Vec<Header>,
}

impl Record {
    /// A record carrying `data` as is.
    pub fn new(data: impl Into<Vec<u8>>) -> Self {
        Self {
            data: data.into(),
            ..Self::default()
        }
    }

    /// A record carrying `value` as JSON.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::to_vec(value).map(Self::new)
    }

    /// The partition key, which picks the shard. Without one the host derives a key from the
    /// data, so equal payloads land on the same shard.
    pub fn partition_key(mut self, key: impl Into<String>) -> Self {
        self.partition_key = Some(key.into());
        self
    }

    /// Adds a user header (carried in the record's `RSK2` envelope). Names are lowercased.
    pub fn header(mut self, name: impl AsRef<str>, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push(Header {
            name: name.as_ref().to_ascii_lowercase(),
            value: value.into(),
        });
        self
    }
}

/// Where a published record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The shard it was written to.
    pub shard_id: String,
    /// Its sequence number in that shard.
    pub sequence_number: String,
}

/// Why a publish failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PublishError {
    /// The stream does not exist.
    StreamNotFound(String),
    /// This tenant is not granted publishing to the stream.
    NotPermitted(String),
    /// The record is larger than a stream record may be (size in bytes).
    RecordTooLarge(u64),
    /// The stream stayed throttled through the host's retries, or the tenant's write quota is
    /// spent for now: try again later.
    Throttled,
    /// Another failure, as the host describes it.
    Unavailable(String),
    /// The header name is in the `x-ruststream-` space, which the host reserves for itself, or
    /// is one readers set on delivery (`partition-key`, `kinesis-sequence-number`,
    /// `kinesis-shard-id`), which no reader would show.
    ReservedHeader(String),
}

impl fmt::Display for PublishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::StreamNotFound(stream) => write!(f, "stream `{stream}` does not exist"),
            Self::NotPermitted(stream) => write!(f, "publishing to `{stream}` is not granted"),
            Self::RecordTooLarge(size) => write!(f, "record of {size} bytes is too large"),
            Self::Throttled => f.write_str("the stream stayed throttled"),
            Self::Unavailable(reason) => write!(f, "publish failed: {reason}"),
            Self::ReservedHeader(name) => {
                write!(
                    f,
                    "header `{name}` is reserved to the host or set by readers on delivery"
                )
            }
        }
    }
}

impl std::error::Error for PublishError {}

/// Publishes `record` to `stream` and returns where it landed once the stream acknowledged it.
pub fn publish(stream: &str, record: Record) -> Result<Published, PublishError> {
    host::publish(
        stream,
        record.partition_key.as_deref(),
        &record.data,
        &record.headers,
    )
    .map(|published| Published {
        shard_id: published.shard_id,
        sequence_number: published.sequence_number,
    })
    .map_err(|error| match error {
        host::PublishError::StreamNotFound(stream) => PublishError::StreamNotFound(stream),
        host::PublishError::NotPermitted(stream) => PublishError::NotPermitted(stream),
        host::PublishError::RecordTooLarge(size) => PublishError::RecordTooLarge(size),
        host::PublishError::Throttled => PublishError::Throttled,
        host::PublishError::Unavailable(reason) => PublishError::Unavailable(reason),
        host::PublishError::ReservedHeader(name) => PublishError::ReservedHeader(name),
    })
}
