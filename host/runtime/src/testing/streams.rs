//! The in-process transport of [`TestApp`](super::TestApp): one shard per stream, records kept
//! in memory with sequence numbers shaped like Kinesis's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::app::{MAX_STREAM_NAME_LEN, valid_name};
use crate::clock::Clock;
use crate::envelope;
use crate::publish::{BoxFuture, PublishError, Publisher, check_size};
use crate::record::{Delivery, Header, OutgoingRecord, Published};
use ruststream_common::escape::escape_controls;
use ruststream_common::sync::lock;

/// The shard id of every in-process stream.
pub const SHARD_ID: &str = "shardId-000000000000";

/// A record as an in-process stream holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// Its position: 56 digits like Kinesis's, increasing and unique across every stream.
    pub sequence_number: String,
    /// The partition key it was written with.
    pub partition_key: String,
    /// When it was appended, on the streams' clock (ms since the epoch).
    pub arrival_ms: u64,
    /// The bytes as written, envelope included.
    pub data: Vec<u8>,
}

impl StoredRecord {
    /// The payload without its envelope.
    pub fn payload(&self) -> Vec<u8> {
        envelope::unwrap(&self.data).payload.to_vec()
    }

    /// Every header of the envelope, the host's control headers included.
    pub fn headers(&self) -> Vec<Header> {
        let unwrapped = envelope::unwrap(&self.data);
        let mut headers = unwrapped.headers;
        if unwrapped.retry_count > 0 {
            headers.push(Header::new(
                envelope::RETRY_COUNT_HEADER,
                unwrapped.retry_count.to_string(),
            ));
        }
        if let Some(due) = unwrapped.due_at_ms {
            headers.push(Header::new(envelope::DUE_AT_HEADER, due.to_string()));
        }
        if let Some(origin) = &unwrapped.copy {
            headers.extend(envelope::origin_headers(origin));
        }
        headers
    }

    /// The value of header `name` as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers()
            .into_iter()
            .find(|h| h.name == name)
            .and_then(|h| String::from_utf8(h.value).ok())
    }

    /// The payload decoded from JSON.
    ///
    /// # Errors
    /// When the payload is not JSON of type `T`.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_slice(&self.payload())
    }

    /// The record as it would be written again, with the same key, payload and every header
    /// (the host's control headers included): what a stream holds twice after a producer or a
    /// host retried a write it thought had failed.
    pub fn to_outgoing(&self) -> OutgoingRecord {
        OutgoingRecord {
            partition_key: self.partition_key.clone(),
            payload: self.payload(),
            headers: self.headers(),
        }
    }

    pub(crate) fn to_delivery(&self) -> Delivery {
        Delivery::from_stream(
            self.sequence_number.as_str().into(),
            self.partition_key.as_str().into(),
            self.arrival_ms,
            self.data.clone().into(),
        )
    }
}

/// The in-process streams.
pub struct InProcessStreams {
    clock: Arc<dyn Clock>,
    streams: Mutex<Streams>,
}

#[derive(Default)]
struct Streams {
    /// Whether a write to a stream that does not exist creates it (an account where every
    /// stream exists) rather than failing with [`PublishError::StreamNotFound`].
    create_on_write: bool,
    by_name: BTreeMap<String, Vec<StoredRecord>>,
    next_sequence: u64,
    /// Injected faults: how many more appends to a stream fail.
    failing: BTreeMap<String, u32>,
}

impl InProcessStreams {
    /// No streams yet; arrival times are read from `clock`. A write to a stream that was
    /// never created fails with [`PublishError::StreamNotFound`].
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            streams: Mutex::default(),
        }
    }

    /// No streams yet, and every write to a stream that does not exist creates it: an
    /// account where every stream a writer names exists.
    pub fn creating_on_write(clock: Arc<dyn Clock>) -> Self {
        let streams = Streams {
            create_on_write: true,
            ..Streams::default()
        };
        Self {
            clock,
            streams: Mutex::new(streams),
        }
    }

    /// Whether a write to a stream that does not exist creates it.
    pub fn creates_on_write(&self) -> bool {
        self.lock().create_on_write
    }

    /// The names of every stream that exists, in name order.
    pub fn names(&self) -> Vec<String> {
        self.lock().by_name.keys().cloned().collect()
    }

    /// Creates `stream` if it does not exist.
    pub fn create(&self, stream: &str) {
        self.lock().by_name.entry(stream.to_owned()).or_default();
    }

    /// Whether `stream` was created.
    pub fn exists(&self, stream: &str) -> bool {
        self.lock().by_name.contains_key(stream)
    }

    /// Every record of `stream` (empty when it does not exist).
    pub fn records(&self, stream: &str) -> Vec<StoredRecord> {
        self.lock().by_name.get(stream).cloned().unwrap_or_default()
    }

    /// Records of `stream` from position `from` on.
    pub fn read_from(&self, stream: &str, from: usize) -> Vec<StoredRecord> {
        self.lock()
            .by_name
            .get(stream)
            .and_then(|records| records.get(from..))
            .map(<[StoredRecord]>::to_vec)
            .unwrap_or_default()
    }

    /// Makes the next `count` publishes to `stream` (by the runtime or a component, not
    /// [`append`](Self::append)) fail as an unavailable stream would.
    pub fn fail_next_publishes(&self, stream: &str, count: u32) {
        self.lock().failing.insert(stream.to_owned(), count);
    }

    fn injected_fault(&self, stream: &str) -> Result<(), PublishError> {
        let mut streams = self.lock();
        match streams.failing.get_mut(stream).filter(|left| **left > 0) {
            Some(left) => {
                *left -= 1;
                Err(PublishError::Unavailable {
                    stream: stream.to_owned(),
                    source: Arc::new(std::io::Error::other("fault injected by the test")),
                })
            }
            None => Ok(()),
        }
    }

    /// How many records `stream` holds.
    pub fn len(&self, stream: &str) -> usize {
        self.lock().by_name.get(stream).map_or(0, Vec::len)
    }

    /// Appends a record.
    ///
    /// # Errors
    /// [`PublishError::Unavailable`] for a name no Kinesis stream can have (Kinesis refuses
    /// it before looking for the stream), [`PublishError::StreamNotFound`] for a stream that
    /// was never created (unless these streams create one on its first write), and
    /// [`PublishError::RecordTooLarge`] past the Kinesis record limit.
    pub fn append(&self, stream: &str, record: &OutgoingRecord) -> Result<Published, PublishError> {
        if !valid_name(stream, MAX_STREAM_NAME_LEN) {
            let reason = format!(
                "`{}` is not a Kinesis stream name: 1 to {MAX_STREAM_NAME_LEN} letters, digits, \
                 `_`, `.` and `-`",
                escape_controls(stream)
            );
            return Err(PublishError::Unavailable {
                stream: stream.to_owned(),
                source: Arc::new(std::io::Error::other(reason)),
            });
        }
        check_size(record)?;
        let arrival_ms = self.clock.now_ms();
        let mut streams = self.lock();
        let Streams {
            by_name,
            next_sequence,
            create_on_write,
            ..
        } = &mut *streams;
        if *create_on_write && !by_name.contains_key(stream) {
            by_name.insert(stream.to_owned(), Vec::new());
        }
        let records = by_name
            .get_mut(stream)
            .ok_or_else(|| PublishError::StreamNotFound(stream.to_owned()))?;
        *next_sequence += 1;
        // 56 digits, like Kinesis's; one counter for every stream keeps them unique.
        let sequence_number = format!("4960{:052}", *next_sequence);
        records.push(StoredRecord {
            sequence_number: sequence_number.clone(),
            partition_key: record.partition_key.clone(),
            arrival_ms,
            data: record.to_stream_bytes(),
        });
        Ok(Published {
            shard_id: SHARD_ID.to_owned(),
            sequence_number,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Streams> {
        lock(&self.streams)
    }
}

/// What the runtime and components write: subject to injected faults.
impl Publisher for InProcessStreams {
    fn publish<'a>(
        &'a self,
        stream: &'a str,
        record: OutgoingRecord,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            self.injected_fault(stream)?;
            self.append(stream, &record)
        })
    }
}
