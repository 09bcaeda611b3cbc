//! Where a dead letter came from, carried in its `RSK2` envelope as `x-ruststream-origin-*`
//! headers: whoever reads a dead-letter stream (a person with `ruststream tail`, a repair
//! job, another tenant's handler) can tell which record of which shard it was, whose
//! subscriber gave up on it, after how many attempts and why.
//!
//! Two records are named. `-origin-shard` and `-origin-sequence` are the record the last
//! attempt was made on: the original itself, or, when its attempts were counted copies, the
//! last copy. `-origin-first-shard`, `-origin-first-sequence` and `-origin-first-arrival-ms`
//! are the original, the record the chain of copies started from (what a copy's
//! `x-ruststream-copy-of` and `x-ruststream-first-arrival-ms` say), as Lambda's on-failure
//! record names the original shard and sequence range.

use crate::record::{Delivery, Header};

/// Header names, in the order they are written.
const STREAM: &str = "x-ruststream-origin-stream";
const SHARD: &str = "x-ruststream-origin-shard";
const SEQUENCE: &str = "x-ruststream-origin-sequence";
const SUBSCRIBER: &str = "x-ruststream-origin-subscriber";
const TENANT: &str = "x-ruststream-origin-tenant";
const ATTEMPTS: &str = "x-ruststream-origin-attempts";
const REASON: &str = "x-ruststream-origin-reason";
/// Written since redrives address a redriven record to the subscription that gave up on it;
/// a dead letter written before has none.
const APP: &str = "x-ruststream-origin-app";
/// The original record: written since dead letters name it; a dead letter written before has
/// none, and so has one whose last attempt was a copy that named no original (a native
/// service's).
const FIRST_SHARD: &str = "x-ruststream-origin-first-shard";
const FIRST_SEQUENCE: &str = "x-ruststream-origin-first-sequence";
const FIRST_ARRIVAL: &str = "x-ruststream-origin-first-arrival-ms";

/// Why a record was dead-lettered when its last attempt did not trap.
pub const ATTEMPTS_EXHAUSTED: &str = "attempts-exhausted";

/// Why a record older than its subscription's maximum record age was dead-lettered.
pub const RECORD_AGE_EXCEEDED: &str = "record-age-exceeded";

/// The record a dead letter started as: the one its chain of counted copies started from,
/// or the dead-lettered record itself when it was no copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstRecord {
    /// Its shard (of the dead letter's origin stream).
    pub shard_id: String,
    /// Its sequence number there.
    pub sequence_number: String,
    /// When it arrived at its stream (ms since the epoch).
    pub arrival_ms: u64,
}

impl FirstRecord {
    /// The record `delivery` (read from `shard_id`) started as: the original its copy names,
    /// itself when it is no copy, and `None` for a copy that names no original (one a native
    /// service made: it carries a retry count and no chain).
    pub fn of(delivery: &Delivery, shard_id: &str) -> Option<Self> {
        match &delivery.copy {
            Some(copy) => {
                let (shard, sequence) = copy.chain.split_once('/')?;
                Some(Self {
                    shard_id: shard.to_owned(),
                    sequence_number: sequence.to_owned(),
                    arrival_ms: copy.first_arrival_ms,
                })
            }
            None if delivery.retry_count == 0 => Some(Self {
                shard_id: shard_id.to_owned(),
                sequence_number: delivery.sequence_number.to_string(),
                arrival_ms: delivery.arrival_ms,
            }),
            None => None,
        }
    }
}

/// The origin of a dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterOrigin {
    /// The stream the record was read from.
    pub stream: String,
    /// The shard of the record its last attempt was made on.
    pub shard_id: String,
    /// That record's sequence number there: the last copy's, when the attempts were counted
    /// copies; [`first`](Self::first) names the original.
    pub sequence_number: String,
    /// The subscription that gave up on it.
    pub subscriber: String,
    /// The tenant running that subscription.
    pub tenant: String,
    /// The tenant's app the subscription belongs to (`None` in a dead letter written before
    /// hosts said it).
    pub app: Option<String>,
    /// How many deliveries it had.
    pub attempts: u32,
    /// [`ATTEMPTS_EXHAUSTED`], [`RECORD_AGE_EXCEEDED`], or the kind of trap its last attempt
    /// ended in ([`TrapKind::label`](crate::component::TrapKind::label)).
    pub reason: String,
    /// The original record (`None` in a dead letter written before hosts named it, or when
    /// the last attempt was a copy that named no original).
    pub first: Option<FirstRecord>,
}

impl DeadLetterOrigin {
    /// The headers that carry it.
    pub fn headers(&self) -> Vec<Header> {
        [
            (STREAM, self.stream.clone()),
            (SHARD, self.shard_id.clone()),
            (SEQUENCE, self.sequence_number.clone()),
            (SUBSCRIBER, self.subscriber.clone()),
            (TENANT, self.tenant.clone()),
            (ATTEMPTS, self.attempts.to_string()),
            (REASON, self.reason.clone()),
        ]
        .into_iter()
        .chain(self.app.clone().map(|app| (APP, app)))
        .chain(self.first.iter().flat_map(|first| {
            [
                (FIRST_SHARD, first.shard_id.clone()),
                (FIRST_SEQUENCE, first.sequence_number.clone()),
                (FIRST_ARRIVAL, first.arrival_ms.to_string()),
            ]
        }))
        .map(|(name, value)| Header::new(name, value))
        .collect()
    }

    /// The origin `headers` carry, when they carry one whole.
    pub fn from_headers(headers: &[Header]) -> Option<Self> {
        let get = |name: &str| {
            let header = headers.iter().find(|h| h.name == name)?;
            String::from_utf8(header.value.clone()).ok()
        };
        Some(Self {
            stream: get(STREAM)?,
            shard_id: get(SHARD)?,
            sequence_number: get(SEQUENCE)?,
            subscriber: get(SUBSCRIBER)?,
            tenant: get(TENANT)?,
            attempts: get(ATTEMPTS)?.parse().ok()?,
            reason: get(REASON)?,
            app: get(APP),
            first: (|| {
                Some(FirstRecord {
                    shard_id: get(FIRST_SHARD)?,
                    sequence_number: get(FIRST_SEQUENCE)?,
                    arrival_ms: get(FIRST_ARRIVAL)?.parse().ok()?,
                })
            })(),
        })
    }

    /// Whether `name` is one of the origin's headers.
    pub fn is_origin_header(name: &str) -> bool {
        [
            STREAM,
            SHARD,
            SEQUENCE,
            SUBSCRIBER,
            TENANT,
            ATTEMPTS,
            REASON,
            APP,
            FIRST_SHARD,
            FIRST_SEQUENCE,
            FIRST_ARRIVAL,
        ]
        .contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_reads_back_from_its_headers_and_only_whole() {
        let origin = DeadLetterOrigin {
            stream: "refunds".into(),
            shard_id: "shardId-000000000001".into(),
            sequence_number: "4968".into(),
            subscriber: "reconcile".into(),
            tenant: "acme".into(),
            app: Some("books".into()),
            attempts: 3,
            reason: ATTEMPTS_EXHAUSTED.into(),
            first: Some(FirstRecord {
                shard_id: "shardId-000000000001".into(),
                sequence_number: "4960".into(),
                arrival_ms: 1_700_000_000_123,
            }),
        };
        let mut headers = vec![Header::new("trace", "abc")];
        headers.extend(origin.headers());
        assert_eq!(
            DeadLetterOrigin::from_headers(&headers),
            Some(origin.clone())
        );
        assert!(
            headers[1..]
                .iter()
                .all(|h| DeadLetterOrigin::is_origin_header(&h.name))
        );
        // Written before dead letters named the original: still read, without it.
        headers.truncate(headers.len() - 3);
        let before = DeadLetterOrigin::from_headers(&headers);
        assert_eq!(
            before,
            Some(DeadLetterOrigin {
                first: None,
                ..origin
            })
        );
        headers.pop();
        let without_app = DeadLetterOrigin::from_headers(&headers);
        assert_eq!(
            without_app.and_then(|o| o.app),
            None,
            "written before apps were"
        );
        headers.pop();
        assert_eq!(DeadLetterOrigin::from_headers(&headers), None);
    }

    #[test]
    fn the_first_record_is_the_chains_or_the_record_itself() {
        use crate::record::{CopyOrigin, CopyOwner};
        use std::sync::Arc;

        let original = Delivery::from_stream(
            "4960".into(),
            "k".into(),
            1_000,
            bytes::Bytes::from_static(b"{}"),
        );
        let first = FirstRecord::of(&original, "shardId-000000000001");
        assert_eq!(
            first,
            Some(FirstRecord {
                shard_id: "shardId-000000000001".into(),
                sequence_number: "4960".into(),
                arrival_ms: 1_000,
            })
        );
        // The second copy, read from another shard: the original is still the one named.
        let owner = CopyOwner {
            tenant: "acme".into(),
            app: "books".into(),
            subscriber: "reconcile".into(),
        };
        let origin = CopyOrigin::of(&original, "shardId-000000000001", &owner);
        let copy = Delivery {
            retry_count: 2,
            copy: Some(Arc::new(origin)),
            arrival_ms: 9_000,
            ..Delivery::from_stream("5000".into(), "k".into(), 9_000, bytes::Bytes::new())
        };
        assert_eq!(FirstRecord::of(&copy, "shardId-000000000002"), first);
        // A counted copy that names no original (a native service's): unknown, not itself.
        let native = Delivery { copy: None, ..copy };
        assert_eq!(FirstRecord::of(&native, "shardId-000000000002"), None);
    }
}
