//! Records as the host sees them: read from a shard, handed to a component, published back.

use crate::envelope::{self, DUE_AT_HEADER, RETRY_COUNT_HEADER};

/// How a record aggregated by the Kinesis Producer Library begins.
pub const KPL_MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];

/// A user header. Names are lowercase by convention of the envelope format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub name: String,
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
    /// Builds a delivery from the raw bytes of a stream record, unwrapping an `RSK2` envelope.
    pub fn from_stream(
        sequence_number: String,
        partition_key: String,
        arrival_ms: u64,
        data: &[u8],
    ) -> Self {
        let unwrapped = envelope::unwrap(data);
        Self {
            sequence_number,
            partition_key,
            arrival_ms,
            payload: unwrapped.payload,
            headers: unwrapped.headers,
            retry_count: unwrapped.retry_count,
            due_at_ms: unwrapped.due_at_ms,
        }
    }

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
    pub partition_key: String,
    /// The payload, before the envelope is added.
    pub payload: Vec<u8>,
    /// User and control headers; an envelope is written only when there are any.
    pub headers: Vec<Header>,
}

impl OutgoingRecord {
    /// The bytes written to the stream: the payload inside an `RSK2` envelope when there are
    /// headers, the bare payload otherwise.
    pub fn to_stream_bytes(&self) -> Vec<u8> {
        envelope::wrap(&self.headers, &self.payload)
    }

    /// Size Kinesis counts against its record limit: data plus partition key.
    pub fn stream_size(&self) -> u64 {
        (envelope::wrapped_len(&self.headers, &self.payload) + self.partition_key.len()) as u64
    }

    /// A counted copy of `original`: same payload, key and user headers, the retry count set
    /// to `retry_count`, and the due time when the copy is delayed.
    pub fn counted_copy(original: &Delivery, retry_count: u32, due_at_ms: Option<u64>) -> Self {
        let mut headers = original.headers.clone();
        headers.push(Header::new(RETRY_COUNT_HEADER, retry_count.to_string()));
        if let Some(due) = due_at_ms {
            headers.push(Header::new(DUE_AT_HEADER, due.to_string()));
        }
        Self {
            partition_key: original.partition_key.clone(),
            payload: original.payload.clone(),
            headers,
        }
    }
}

/// Where a published record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub shard_id: String,
    pub sequence_number: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counted_copy_reads_back_with_its_count_and_due_time() {
        let original = Delivery {
            sequence_number: "1".into(),
            partition_key: "pk".into(),
            arrival_ms: 5,
            payload: b"{}".to_vec(),
            headers: vec![Header::new("trace", "t1")],
            retry_count: 1,
            due_at_ms: None,
        };
        let copy = OutgoingRecord::counted_copy(&original, 2, Some(99));
        let bytes = copy.to_stream_bytes();
        assert_eq!(copy.stream_size(), (bytes.len() + 2) as u64);
        let read = Delivery::from_stream("2".into(), "pk".into(), 6, &bytes);
        assert_eq!(read.payload, b"{}");
        assert_eq!(read.headers, original.headers);
        assert_eq!(read.attempt(), 3);
        assert_eq!(read.due_at_ms, Some(99));
    }
}
