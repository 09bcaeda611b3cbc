//! What a version published for a record, and the publisher that writes nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::publish::{BoxFuture, PublishError, Publisher, check_size, derived_partition_key};
use crate::record::{OutgoingRecord, Published};
use ruststream_common::escape::escape_controls;
use ruststream_common::sync::lock;

/// Characters of a payload kept to show an operator which publish differed.
const PREVIEW_CHARS: usize = 40;

/// One publish as a comparison sees it: where it went, its key, and its payload by size and
/// digest (with a short preview for the operator; the digest decides equality).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedPublish {
    /// The stream it was published to.
    pub stream: String,
    /// Its partition key.
    pub partition_key: String,
    /// Its payload's size in bytes.
    pub payload_bytes: usize,
    /// Its payload's 64-bit FNV-1a digest, hex.
    pub payload_digest: String,
    /// The payload's first characters, control characters escaped.
    pub preview: String,
}

impl RecordedPublish {
    /// `record`, published to `stream`.
    pub fn of(stream: &str, record: &OutgoingRecord) -> Self {
        let payload = &record.payload;
        let head = String::from_utf8_lossy(&payload[..payload.len().min(PREVIEW_CHARS * 4)]);
        let head: String = head.chars().take(PREVIEW_CHARS).collect();
        Self {
            stream: stream.to_owned(),
            partition_key: record.partition_key.clone(),
            payload_bytes: payload.len(),
            payload_digest: derived_partition_key(payload),
            preview: escape_controls(&head).into_owned(),
        }
    }
}

impl std::fmt::Display for RecordedPublish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} key={} {} bytes #{} {:?}",
            self.stream, self.partition_key, self.payload_bytes, self.payload_digest, self.preview
        )
    }
}

/// The publishes one instance had accepted, each with the sequence number of the record its
/// call was on. Shared between the instance (which notes) and whoever compares (which takes).
#[derive(Clone, Default)]
pub struct PublishLog(Arc<Mutex<Vec<Noted>>>);

/// A publish, with the sequence number of the record it was made for (none outside a record).
type Noted = (Option<String>, RecordedPublish);

impl PublishLog {
    /// Notes `publish`, made while the call was on record `sequence` (none outside a record).
    pub(crate) fn note(&self, sequence: Option<String>, publish: RecordedPublish) {
        lock(&self.0).push((sequence, publish));
    }

    /// Takes every publish noted so far, by the sequence number of its record, in order.
    pub fn take_by_record(&self) -> HashMap<String, Vec<RecordedPublish>> {
        let noted = std::mem::take(&mut *lock(&self.0));
        let mut by_record: HashMap<String, Vec<RecordedPublish>> = HashMap::new();
        for (sequence, publish) in noted {
            if let Some(sequence) = sequence {
                by_record.entry(sequence).or_default().push(publish);
            }
        }
        by_record
    }
}

/// A publisher that writes nothing: every record that would fit a stream is answered as
/// accepted (on shard `shadow`, with a made-up sequence number) and counted. A shadow
/// version's publishes go here, so it has no effect on any stream.
#[derive(Default)]
pub struct RecordingPublisher {
    accepted: AtomicU64,
}

impl RecordingPublisher {
    /// How many publishes it answered as accepted.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Publisher for RecordingPublisher {
    fn publish<'a>(
        &'a self,
        _stream: &'a str,
        record: OutgoingRecord,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            // A record a stream would refuse is refused here too: the shadow sees what the
            // live version would see.
            check_size(&record)?;
            let n = self.accepted.fetch_add(1, Ordering::Relaxed) + 1;
            Ok(Published {
                shard_id: "shadow".to_owned(),
                sequence_number: n.to_string(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str, payload: &[u8]) -> OutgoingRecord {
        OutgoingRecord {
            partition_key: key.into(),
            payload: payload.to_vec(),
            headers: vec![],
        }
    }

    #[tokio::test]
    async fn the_recording_publisher_accepts_and_writes_nothing() {
        let publisher = RecordingPublisher::default();
        let published = publisher.publish("orders", record("k", b"{}")).await;
        let published = published.expect("accepted");
        assert_eq!(published.shard_id, "shadow");
        assert_eq!(publisher.accepted(), 1);
        let too_large = record("k", &vec![0; crate::publish::MAX_RECORD_BYTES as usize]);
        assert!(matches!(
            publisher.publish("orders", too_large).await,
            Err(PublishError::RecordTooLarge { .. })
        ));
        assert_eq!(publisher.accepted(), 1, "a refused record is not counted");
    }

    #[test]
    fn publishes_are_taken_by_their_record_in_order() {
        let log = PublishLog::default();
        let a = RecordedPublish::of("out", &record("a", b"1"));
        let b = RecordedPublish::of("out", &record("b", b"2"));
        log.note(Some("7".into()), a.clone());
        log.note(None, b.clone());
        log.note(Some("7".into()), b.clone());
        let by_record = log.take_by_record();
        assert_eq!(by_record.get("7"), Some(&vec![a, b]));
        assert_eq!(
            by_record.len(),
            1,
            "a publish outside any record is dropped"
        );
        assert!(log.take_by_record().is_empty(), "taken once");
    }

    #[test]
    fn equal_payloads_have_equal_digests() {
        let a = RecordedPublish::of("out", &record("k", b"same"));
        let b = RecordedPublish::of("out", &record("k", b"same"));
        let c = RecordedPublish::of("out", &record("k", b"other"));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.to_string().contains("out key=k 4 bytes"));
    }
}
