//! Records as the host sees them: read from a shard, handed to a component, published back.
//!
//! These are plain values; how they are written to and read from a stream (the `RSK2`
//! envelope) is [`envelope`](crate::envelope)'s concern.

/// How a record aggregated by the Kinesis Producer Library begins.
pub const KPL_MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];

/// A user header. Names are lowercase by convention of the envelope format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Its name; `x-ruststream-*` names belong to the host.
    pub name: String,
    /// Its value, any bytes.
    pub value: Vec<u8>,
}

impl Header {
    /// A header with a text value.
    pub fn new(name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// One record read from a shard, with its envelope already taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The shard's sequence number: a decimal string up to 56 digits (or more). Never parsed.
    pub sequence_number: String,
    /// The key the producer gave it, which chose its shard.
    pub partition_key: String,
    /// Approximate arrival time at the stream, milliseconds since the epoch.
    pub arrival_ms: u64,
    /// The payload the handler decodes (the envelope removed).
    pub payload: Vec<u8>,
    /// User headers (the host's control headers removed).
    pub headers: Vec<Header>,
    /// How many deliveries this record's content already had; 0 for an original.
    pub retry_count: u32,
    /// A `retry_after` copy is not delivered before this time (milliseconds since the epoch).
    pub due_at_ms: Option<u64>,
}

impl Delivery {
    /// Whether the payload is a KPL-aggregated record (it starts with the KPL magic bytes).
    pub fn is_aggregated(&self) -> bool {
        self.payload.starts_with(&KPL_MAGIC)
    }

    /// The attempt number the handler sees: 1 on first delivery.
    pub fn attempt(&self) -> u32 {
        self.retry_count.saturating_add(1)
    }
}

/// A record to be written to a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingRecord {
    /// The key that chooses its shard.
    pub partition_key: String,
    /// The payload, before the envelope is added.
    pub payload: Vec<u8>,
    /// User and control headers; an envelope is written only when there are any.
    pub headers: Vec<Header>,
}

/// Where a published record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The shard it was written to.
    pub shard_id: String,
    /// Its sequence number in that shard.
    pub sequence_number: String,
}
