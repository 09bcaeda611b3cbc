//! What a shard reader hands on: one answer's (or one event's) records.

use ruststream_runtime::Delivery;

/// One GetRecords' (or one fan-out event's) worth of a shard.
#[derive(Debug, Default)]
pub struct Batch {
    /// The records, in shard order, their envelopes taken apart.
    pub records: Vec<Delivery>,
    /// The shard is closed and this was its last batch.
    pub shard_end: bool,
}
