//! Records as the host sees them: read from a shard, handed to a component, published back.
//!
//! These are plain values; how they are written to and read from a stream (the `RSK2`
//! envelope) is [`envelope`](crate::envelope)'s concern.

use std::ops::{Deref, Range};
use std::sync::Arc;

/// The shared byte buffer a [`Delivery`]'s payload is a slice of.
pub use bytes::Bytes;

/// A sequence number or partition key: text shared without copying (see [`Text`]).
pub use crate::text::Text;

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
    /// Read from a stream, a slice of the answer it came in.
    pub sequence_number: Text,
    /// The key the producer gave it, which chose its shard.
    pub partition_key: Text,
    /// Approximate arrival time at the stream, milliseconds since the epoch.
    pub arrival_ms: u64,
    /// The payload the handler decodes (the envelope removed). Read from a stream, a slice
    /// of one buffer that holds the whole answer's payloads.
    pub payload: Bytes,
    /// User headers (the host's control headers removed).
    pub headers: Vec<Header>,
    /// How many deliveries this record's content already had; 0 for an original.
    pub retry_count: u32,
    /// A `retry_after` copy is not delivered before this time (milliseconds since the epoch).
    pub due_at_ms: Option<u64>,
    /// Set on a counted copy a RustStream host made: whose it is and which record it
    /// continues. `None` for records of outside producers (native services' copies included).
    pub copy: Option<Arc<CopyOrigin>>,
}

/// The subscription a counted copy is for: only it handles the copy, every other reader of the
/// stream moves past it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CopyOwner {
    /// The tenant running the subscription.
    pub tenant: String,
    /// The app (as its component declares it).
    pub app: String,
    /// The subscription.
    pub subscriber: String,
}

/// What a counted copy carries about itself, beyond its retry count and due time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOrigin {
    /// The subscription that made it.
    pub owner: CopyOwner,
    /// The record the chain of copies started from: its shard and sequence number. Every copy
    /// of one record, carried or counted, names the same one.
    pub chain: String,
    /// When that first record arrived at its stream (ms since the epoch): a chain's age, which
    /// `maximum_record_age` measures, runs from there.
    pub first_arrival_ms: u64,
}

impl CopyOrigin {
    /// The origin of a copy of `delivery`, read from `shard_id`, made by `owner`: a copy of a
    /// copy continues its chain; a copy of any other record starts one.
    pub fn of(delivery: &Delivery, shard_id: &str, owner: &CopyOwner) -> Self {
        match &delivery.copy {
            Some(origin) => Self {
                owner: owner.clone(),
                ..CopyOrigin::clone(origin)
            },
            None => Self {
                owner: owner.clone(),
                chain: format!("{shard_id}/{}", delivery.sequence_number),
                first_arrival_ms: delivery.arrival_ms,
            },
        }
    }
}

impl Delivery {
    /// Whether the payload is a KPL-aggregated record (it starts with the KPL magic bytes).
    pub fn is_aggregated(&self) -> bool {
        self.payload.starts_with(&KPL_MAGIC)
    }

    /// When a `retry_after` copy is due (ms since the epoch): its due time, but no later than
    /// its arrival plus `max_delay_ms`. The time travels in the record, and whoever wrote the
    /// record (an outside producer too) must not be able to hold the shard for longer.
    pub fn due(&self, max_delay_ms: u64) -> Option<u64> {
        self.due_at_ms
            .map(|due| due.min(self.arrival_ms.saturating_add(max_delay_ms)))
    }

    /// The same record in buffers of its own. A record read from a stream shares its answer's
    /// buffers with the answer's other records; one kept long after the rest are settled (a
    /// copy waiting for its due time, a held record waiting for its maximum age) would keep
    /// the whole answer in memory.
    pub fn detached(self) -> Self {
        Self {
            sequence_number: Text::from(self.sequence_number.as_str()),
            partition_key: Text::from(self.partition_key.as_str()),
            payload: Bytes::copy_from_slice(&self.payload),
            ..self
        }
    }

    /// The attempt number the handler sees: 1 on first delivery.
    pub fn attempt(&self) -> u32 {
        self.retry_count.saturating_add(1)
    }

    /// When the record this one continues first arrived: the chain's first record for a
    /// counted copy, its own arrival otherwise.
    pub fn first_arrival_ms(&self) -> u64 {
        self.copy
            .as_ref()
            .map_or(self.arrival_ms, |origin| origin.first_arrival_ms)
    }

    /// The chain of copies it belongs to, when it is a counted copy.
    pub(crate) fn chain(&self) -> Option<&str> {
        self.copy.as_ref().map(|origin| origin.chain.as_str())
    }
}

/// The records of one call: a range of a shared batch read from a shard. Cloning shares the
/// batch; the records are never copied.
#[derive(Clone)]
pub struct Deliveries {
    // A `Vec` rather than a slice: sharing a read batch moves no record.
    all: Arc<Vec<Delivery>>,
    range: Range<usize>,
}

impl Deliveries {
    /// The records `range` of `all`; a range past the end is cut to it.
    pub fn new(all: Arc<Vec<Delivery>>, range: Range<usize>) -> Self {
        let end = range.end.min(all.len());
        let start = range.start.min(end);
        Self {
            all,
            range: start..end,
        }
    }

    /// All of `all`.
    pub fn whole(all: Arc<Vec<Delivery>>) -> Self {
        let len = all.len();
        Self::new(all, 0..len)
    }
}

impl Deref for Deliveries {
    type Target = [Delivery];

    fn deref(&self) -> &[Delivery] {
        &self.all[self.range.clone()]
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

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(sequence_number: &str) -> Delivery {
        Delivery {
            sequence_number: sequence_number.into(),
            partition_key: "k".into(),
            arrival_ms: 0,
            payload: Bytes::new(),
            headers: Vec::new(),
            retry_count: 0,
            due_at_ms: None,
            copy: None,
        }
    }

    #[test]
    fn a_range_shares_its_batch_and_stays_inside_it() {
        let all = Arc::new(vec![delivery("1"), delivery("2"), delivery("3")]);
        let middle = Deliveries::new(all.clone(), 1..2);
        assert_eq!(middle.len(), 1);
        assert_eq!(middle[0].sequence_number, "2");
        assert_eq!(Arc::strong_count(&all), 2, "shared, not copied");
        assert!(Deliveries::new(all.clone(), 2..9).len() == 1);
        assert!(Deliveries::new(all.clone(), 7..9).is_empty());
        assert_eq!(Deliveries::whole(all).len(), 3);
    }
}
