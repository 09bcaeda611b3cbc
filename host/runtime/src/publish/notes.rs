//! What a tool reporting a component's publishes (`TestApp`, and the `dev` and `test` verbs
//! built on it) notes of them: each publish refused, and who wrote each record a publish put
//! in a stream, both by subscription and by the record the call was on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::publish::PublishError;
use crate::record::Delivery;
use ruststream_common::sync::lock;

/// Distinct refusals (by target stream and reason) noted for one record of one subscription;
/// past that, a record's further kinds of refusal are only counted
/// ([`PublishNotes::unlisted`]), so a component that publishes to a million names is
/// noted in bounded memory per record.
pub const MAX_NOTED_PER_RECORD: usize = 16;

/// Who made a publish: the subscription and the record its call was on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedBy {
    /// The subscription whose instance published; none while the component was loaded (its
    /// instantiation and `describe`, where every publish is refused).
    pub subscriber: Option<String>,
    /// The record the call was on (its sequence number in the stream the subscription
    /// reads), or none when the publish came outside any record (while instantiating).
    pub sequence_number: Option<String>,
    /// When that record was a copy (a retry's, or a delay's): the record its chain of copies
    /// started from, as `shard/sequence`.
    pub chain: Option<String>,
}

impl PublishedBy {
    fn of(subscriber: Option<&str>, delivery: Option<&Delivery>) -> Self {
        Self {
            subscriber: subscriber.map(str::to_owned),
            sequence_number: delivery.map(|d| d.sequence_number.to_string()),
            chain: (delivery.and_then(|d| d.copy.as_ref())).map(|c| c.chain.clone()),
        }
    }
}

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

/// Where publishes are noted, shared by the instances of every subscription of an app (each
/// notes under its own subscription name) and whoever reports them. Refusals are kept in
/// first-seen order; a refusal of the same record, subscription, stream and reason adds to the
/// count of the one noted before. Who wrote a record is kept by the sequence number the stream
/// gave it: one entry per record written, as the stream itself keeps one.
#[derive(Clone, Default)]
pub struct PublishNotes(Arc<Mutex<Noted>>);

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
    /// Who wrote each record a publish put in a stream, by the sequence number it got.
    written: HashMap<String, PublishedBy>,
}

impl PublishNotes {
    /// Every refusal noted, in the order each was first seen.
    pub fn refused(&self) -> Vec<RefusedPublish> {
        lock(&self.0).refused.clone()
    }

    /// Who published the record a stream gave `sequence_number` (none for a record no
    /// component publish wrote: a test's own, a copy, a dead letter).
    pub fn written_by(&self, sequence_number: &str) -> Option<PublishedBy> {
        lock(&self.0).written.get(sequence_number).cloned()
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
    pub(crate) fn for_subscriber(&self, subscriber: &str) -> InstanceNotes {
        InstanceNotes {
            log: self.clone(),
            subscriber: Some(subscriber.into()),
        }
    }

    /// A handle noting under no subscriber: while a component is loaded.
    pub(crate) fn while_loading(&self) -> InstanceNotes {
        InstanceNotes {
            log: self.clone(),
            subscriber: None,
        }
    }

    fn note_refused(
        &self,
        subscriber: Option<&str>,
        delivery: Option<&Delivery>,
        stream: &str,
        error: PublishError,
    ) {
        let PublishedBy {
            subscriber,
            sequence_number,
            chain,
        } = PublishedBy::of(subscriber, delivery);
        let mut noted = lock(&self.0);
        let record: RecordKey = (subscriber, sequence_number);
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

/// A component instance's handle on a [`PublishNotes`]: the subscription it runs for,
/// none while loading.
#[derive(Clone)]
pub(crate) struct InstanceNotes {
    log: PublishNotes,
    subscriber: Option<Arc<str>>,
}

impl InstanceNotes {
    /// Notes that a publish to `stream`, made while the call was on `delivery` (none outside
    /// any record), was refused with `error`.
    pub(crate) fn refused(&self, delivery: Option<&Delivery>, stream: &str, error: &PublishError) {
        let subscriber = self.subscriber.as_deref();
        self.log
            .note_refused(subscriber, delivery, stream, error.clone());
    }

    /// Notes that a publish made while the call was on `delivery` was written, as the record
    /// the stream gave `sequence_number`.
    pub(crate) fn written(&self, delivery: Option<&Delivery>, sequence_number: &str) {
        let by = PublishedBy::of(self.subscriber.as_deref(), delivery);
        lock(&self.log.0)
            .written
            .insert(sequence_number.to_owned(), by);
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
        let log = PublishNotes::default();
        let book = log.for_subscriber("book");
        let audit = log.for_subscriber("audit");
        let seven = record("7");
        let missing = PublishError::StreamNotFound("booked".into());
        book.refused(Some(&seven), "booked", &missing);
        audit.refused(Some(&seven), "booked", &missing);
        book.refused(Some(&seven), "booked", &missing);
        let too_large = PublishError::RecordTooLarge { size: 2 };
        book.refused(Some(&seven), "big", &too_large);
        book.refused(None, "booked", &missing);
        let loading = log.while_loading();
        loading.refused(None, "booked", &PublishError::NotPermitted("booked".into()));
        let noted = log.refused();
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
        let log = PublishNotes::default();
        let book = log.for_subscriber("book");
        let (one, two) = (record("1"), record("2"));
        let missing = |stream: &str| PublishError::StreamNotFound(stream.to_owned());
        for n in 0..MAX_NOTED_PER_RECORD + 5 {
            let stream = format!("s{n}");
            book.refused(Some(&one), &stream, &missing(&stream));
        }
        book.refused(Some(&two), "s0", &missing("s0"));
        let noted = log.refused();
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
        book.refused(Some(&one), "s0", &missing("s0"));
        assert_eq!(log.refused()[0].count, 2);
    }
}
