//! What a handler knows about the record it handles.

use std::cell::OnceCell;
use std::time::{Duration, SystemTime};

use crate::batch::{RecordView, text};
use crate::bindings::exports::ruststream::handler::handler::CallInfo;

/// Header name under which [`Headers::get_str`] answers the record's sequence number, as the
/// seed system exposes it.
pub const SEQUENCE_HEADER: &str = "kinesis-sequence-number";
/// Header name under which [`Headers::get_str`] answers the record's shard id.
pub const SHARD_HEADER: &str = "kinesis-shard-id";
/// Header name under which [`Headers::get_str`] answers the record's partition key.
pub const PARTITION_KEY_HEADER: &str = "partition-key";
/// Header of a counted copy: how many deliveries the record already had (absent on the first).
pub const RETRY_COUNT_HEADER: &str = "x-ruststream-retry-count";

/// The record being handled and where it came from.
pub struct Context<'a> {
    subscriber: &'a str,
    /// The call and the record, which the headers answer for too.
    headers: Headers<'a>,
}

impl<'a> Context<'a> {
    pub(crate) fn new(subscriber: &'a str, batch: &'a CallInfo, record: RecordView<'a>) -> Self {
        Self {
            subscriber,
            headers: Headers {
                batch,
                record,
                retry_count: OnceCell::new(),
            },
        }
    }

    /// The subscriber's name (the handler function's name, or the one set with `name(..)`).
    pub fn name(&self) -> &str {
        self.subscriber
    }

    /// The stream the record was read from.
    pub fn stream(&self) -> &str {
        &self.headers.batch.stream
    }

    /// The shard the record was read from.
    pub fn shard_id(&self) -> &str {
        &self.headers.batch.shard_id
    }

    /// The record's sequence number: a decimal string of up to 56 digits; compare sequence
    /// numbers of one shard as big integers (length first), never as `u64`.
    pub fn sequence_number(&self) -> &str {
        text(self.headers.record.sequence_number())
    }

    /// The key the producer gave the record, which chose its shard.
    pub fn partition_key(&self) -> &str {
        text(self.headers.record.partition_key())
    }

    /// 1 on the first delivery; a counted copy carries the previous attempt + 1.
    pub fn attempt(&self) -> u32 {
        self.headers.record.attempt()
    }

    /// When the record reached the stream (approximately, as Kinesis reports it).
    pub fn arrival(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(self.headers.record.arrival_ms())
    }

    /// The raw payload, before decoding.
    pub fn data(&self) -> &[u8] {
        self.headers.record.data()
    }

    /// The record's user headers, plus the seed system's Kinesis pseudo-headers.
    pub fn headers(&self) -> &Headers<'a> {
        &self.headers
    }
}

/// A record's headers.
///
/// Besides the user headers from the record's envelope, [`get_str`](Self::get_str) answers
/// [`SEQUENCE_HEADER`], [`SHARD_HEADER`], [`PARTITION_KEY_HEADER`] and (for a counted copy)
/// [`RETRY_COUNT_HEADER`], so code written for the seed system reads them unchanged.
pub struct Headers<'a> {
    batch: &'a CallInfo,
    record: RecordView<'a>,
    retry_count: OnceCell<Option<String>>,
}

impl<'a> Headers<'a> {
    /// A user header's raw value.
    pub fn get(&self, name: &str) -> Option<&'a [u8]> {
        self.iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    }

    /// A header's value as text; `None` when absent or not UTF-8.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        match name {
            SEQUENCE_HEADER => Some(text(self.record.sequence_number())),
            SHARD_HEADER => Some(&self.batch.shard_id),
            PARTITION_KEY_HEADER => Some(text(self.record.partition_key())),
            RETRY_COUNT_HEADER => self.retry_count().as_deref(),
            _ => std::str::from_utf8(self.get(name)?).ok(),
        }
    }

    /// The user headers, in envelope order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> + use<'a> {
        self.record.headers().iter()
    }

    fn retry_count(&self) -> &Option<String> {
        self.retry_count.get_or_init(|| {
            let count = self.record.attempt().saturating_sub(1);
            (count > 0).then(|| count.to_string())
        })
    }
}
