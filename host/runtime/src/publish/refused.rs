//! The publishes a component was refused, noted by subscription and record for a tool that
//! reports them (`TestApp`, and the `dev` and `test` verbs built on it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::publish::PublishError;
use crate::record::Delivery;
use crate::sync::lock;

/// Distinct refusals (by target stream and reason) noted for one record of one subscription;
/// past that, a record's further kinds of refusal are only counted
/// ([`RefusedPublishes::unlisted`]), so a component that publishes to a million names is
/// noted in bounded memory per record.
pub const MAX_NOTED_PER_RECORD: usize = 16;

/// Publishes of one record, by one subscription, to one stream, refused for one reason.
#[derive(Debug, Clone)]
pub struct RefusedPublish {
    /// The subscription whose instance published; none while the component was loaded (its
    /// instantiation and `describe`, where every publish is refused).
    pub subscriber: Option<String>,
    /// The record the call was on (its sequence number in the stream the subscription
    /// reads), or none when the publish came outside any record (while instantiating).
    pub sequence_number: Option<String>,
    /// When that record was a copy (a retry's, or a delay's): the record its chain of copies
    /// started from, as `shard/sequence`.
    pub chain: Option<String>,
    /// The stream the component published to.
    pub stream: String,
    /// Why the first of them was refused, as the runtime said it.
    pub error: PublishError,
    /// How many publishes of this record to this stream were refused for this reason.
    pub count: u64,
}

impl RefusedPublish {
    /// The reason as the component was told it: the contract's `publish-error` case
    /// (`stream-not-found`, `not-permitted`, `record-too-large`, `throttled`,
    /// `reserved-header`, `unavailable`).
    pub fn reason(&self) -> &'static str {
        self.error.kind()
    }
}

/// Where refused publishes are noted, shared by the instances of every subscription of an app
/// (each notes under its own subscription name) and whoever reports them. In first-seen
/// order; a refusal of the same record, subscription, stream and reason adds to the count of
/// the one noted before.
#[derive(Clone, Default)]
pub struct RefusedPublishes(Arc<Mutex<Noted>>);

/// Who and which record a refusal is about.
type RecordKey = (Option<String>, Option<String>);

#[derive(Default)]
struct Noted {
    refused: Vec<RefusedPublish>,
    /// Where each (subscriber, record, stream, reason) is in `refused`.
    index: HashMap<(RecordKey, String, &'static str), usize>,
    /// How many distinct refusals each record has in `refused`.
    per_record: HashMap<RecordKey, usize>,
    /// Refused publishes of records that already had [`MAX_NOTED_PER_RECORD`] noted.
    unlisted: HashMap<RecordKey, u64>,
}

impl RefusedPublishes {
    /// Every refusal noted, in the order each was first seen.
    pub fn noted(&self) -> Vec<RefusedPublish> {
        lock(&self.0).refused.clone()
    }

    /// Publishes refused beyond [`MAX_NOTED_PER_RECORD`] kinds for a record: subscriber,
    /// record, how many.
    pub fn unlisted(&self) -> Vec<(Option<String>, Option<String>, u64)> {
        let noted = lock(&self.0);
        let mut unlisted: Vec<_> = (noted.unlisted.iter())
            .map(|((subscriber, record), count)| (subscriber.clone(), record.clone(), *count))
            .collect();
        unlisted.sort();
        unlisted
    }

    /// A handle noting under `subscriber`.
    pub(crate) fn for_subscriber(&self, subscriber: &str) -> RefusalNotes {
        RefusalNotes {
            log: self.clone(),
            subscriber: Some(subscriber.into()),
        }
    }

    /// A handle noting under no subscriber: while a component is loaded.
    pub(crate) fn while_loading(&self) -> RefusalNotes {
        RefusalNotes {
            log: self.clone(),
            subscriber: None,
        }
    }

    fn note(
        &self,
        subscriber: Option<&str>,
        delivery: Option<&Delivery>,
        stream: &str,
        error: PublishError,
    ) {
        let sequence = delivery.map(|d| d.sequence_number.to_string());
        let chain = delivery
            .and_then(|d| d.copy.as_ref())
            .map(|c| c.chain.clone());
        let mut noted = lock(&self.0);
        let record: RecordKey = (subscriber.map(str::to_owned), sequence);
        let key = (record.clone(), stream.to_owned(), error.kind());
        if let Some(at) = noted.index.get(&key).copied() {
            noted.refused[at].count += 1;
            return;
        }
        let distinct = noted.per_record.entry(record.clone()).or_default();
        if *distinct >= MAX_NOTED_PER_RECORD {
            *noted.unlisted.entry(record).or_default() += 1;
            return;
        }
        *distinct += 1;
        let at = noted.refused.len();
        noted.refused.push(RefusedPublish {
            subscriber: record.0,
            sequence_number: record.1,
            chain,
            stream: stream.to_owned(),
            error,
            count: 1,
        });
        noted.index.insert(key, at);
    }
}

/// A component instance's handle on a [`RefusedPublishes`]: the subscription it runs for,
/// none while loading.
#[derive(Clone)]
pub(crate) struct RefusalNotes {
    log: RefusedPublishes,
    subscriber: Option<Arc<str>>,
}

impl RefusalNotes {
    /// Notes that a publish to `stream`, made while the call was on `delivery` (none outside
    /// any record), was refused with `error`.
    pub(crate) fn note(&self, delivery: Option<&Delivery>, stream: &str, error: &PublishError) {
        let subscriber = self.subscriber.as_deref();
        self.log.note(subscriber, delivery, stream, error.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(sequence: &str) -> Delivery {
        Delivery::from_stream(sequence.into(), "k".into(), 0, b"{}".to_vec().into())
    }

    #[test]
    fn refusals_are_counted_by_record_stream_and_reason_in_first_seen_order() {
        let log = RefusedPublishes::default();
        let book = log.for_subscriber("book");
        let audit = log.for_subscriber("audit");
        let seven = record("7");
        let missing = PublishError::StreamNotFound("booked".into());
        book.note(Some(&seven), "booked", &missing);
        audit.note(Some(&seven), "booked", &missing);
        book.note(Some(&seven), "booked", &missing);
        let too_large = PublishError::RecordTooLarge { size: 2 };
        book.note(Some(&seven), "big", &too_large);
        book.note(None, "booked", &missing);
        let loading = log.while_loading();
        loading.note(None, "booked", &PublishError::NotPermitted("booked".into()));
        let noted = log.noted();
        let seen: Vec<_> = (noted.iter())
            .map(|r| {
                let record = r.sequence_number.as_deref();
                (
                    r.subscriber.as_deref(),
                    record,
                    r.stream.as_str(),
                    r.reason(),
                    r.count,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (Some("book"), Some("7"), "booked", "stream-not-found", 2),
                (Some("audit"), Some("7"), "booked", "stream-not-found", 1),
                (Some("book"), Some("7"), "big", "record-too-large", 1),
                (Some("book"), None, "booked", "stream-not-found", 1),
                (None, None, "booked", "not-permitted", 1),
            ]
        );
        assert!(log.unlisted().is_empty());
    }

    #[test]
    fn a_record_past_its_share_of_kinds_is_only_counted() {
        let log = RefusedPublishes::default();
        let book = log.for_subscriber("book");
        let (one, two) = (record("1"), record("2"));
        let missing = |stream: &str| PublishError::StreamNotFound(stream.to_owned());
        for n in 0..MAX_NOTED_PER_RECORD + 5 {
            let stream = format!("s{n}");
            book.note(Some(&one), &stream, &missing(&stream));
        }
        book.note(Some(&two), "s0", &missing("s0"));
        let noted = log.noted();
        assert_eq!(
            noted.len(),
            MAX_NOTED_PER_RECORD + 1,
            "another record is noted"
        );
        assert_eq!(
            log.unlisted(),
            [(Some("book".to_owned()), Some("1".to_owned()), 5)]
        );
        // A kind already noted still counts in full.
        book.note(Some(&one), "s0", &missing("s0"));
        assert_eq!(log.noted()[0].count, 2);
    }
}
