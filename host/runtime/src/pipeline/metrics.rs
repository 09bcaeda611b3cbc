//! The metric handles of one subscription of one tenant's app, registered once so that
//! counting a record is an atomic add (see `crate::metrics` for the names).

use std::time::Duration;

use metrics::{Counter, Histogram, Label};

use crate::component::TrapKind;
use crate::metrics::{
    CALL_DURATION, COPIES_PUBLISHED, DEAD_LETTERS, FOREIGN_COPIES, RECORDS, TRAPS,
    subscription_labels,
};
use crate::outcome::Outcome;

/// The handles of one subscription (shared by its shards: the recorder hands out the same
/// counter for the same labels).
pub(super) struct SubscriptionMetrics {
    /// ack, drop, retry, retry_after.
    outcomes: [Counter; 4],
    /// By [`TrapKind::ALL`].
    traps: [Counter; 7],
    call_duration: Histogram,
    copies_published: Counter,
    dead_letters: Counter,
    foreign_copies: Counter,
}

impl SubscriptionMetrics {
    /// The handles of `subscriber`, labelled as its tenant's bound of `max_series` allows.
    pub(super) fn new(tenant: &str, app: &str, subscriber: &str, max_series: usize) -> Self {
        let own = subscription_labels(tenant, app, subscriber, max_series);
        let labels = || own.clone();
        let with = |key: &'static str, value: &'static str| {
            let mut labels = labels();
            labels.push(Label::new(key, value));
            labels
        };
        let outcome = |name| metrics::counter!(RECORDS, with("outcome", name));
        Self {
            outcomes: ["ack", "drop", "retry", "retry_after"].map(outcome),
            traps: TrapKind::ALL.map(|kind| metrics::counter!(TRAPS, with("kind", kind.label()))),
            call_duration: metrics::histogram!(CALL_DURATION, labels()),
            copies_published: metrics::counter!(COPIES_PUBLISHED, labels()),
            dead_letters: metrics::counter!(DEAD_LETTERS, labels()),
            foreign_copies: metrics::counter!(FOREIGN_COPIES, labels()),
        }
    }

    pub(super) fn settled(&self, outcome: &Outcome) {
        let index = match outcome {
            Outcome::Ack => 0,
            Outcome::Drop => 1,
            Outcome::Retry => 2,
            Outcome::RetryAfter(_) => 3,
        };
        self.outcomes[index].increment(1);
    }

    pub(super) fn trapped(&self, kind: TrapKind) {
        if let Some(index) = TrapKind::ALL.iter().position(|k| *k == kind) {
            self.traps[index].increment(1);
        }
    }

    pub(super) fn called(&self, took: Duration) {
        self.call_duration.record(took.as_secs_f64());
    }

    pub(super) fn copy_published(&self, dead_letter: bool) {
        if dead_letter {
            self.dead_letters.increment(1);
        } else {
            self.copies_published.increment(1);
        }
    }

    pub(super) fn foreign_copy(&self) {
        self.foreign_copies.increment(1);
    }
}
