//! The running account of a shadow: records compared by result, and the first disagreements.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use metrics::{Counter, Label};

use crate::metrics::owner_labels;
use crate::sync::lock;

pub use crate::metrics::SHADOW_RECORDS;

/// What became of one record offered to a shadow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShadowResult {
    /// The shadow handled it as the live version did.
    Agree,
    /// It handled it otherwise.
    Disagree,
    /// Its call trapped on it.
    Trap,
    /// It was not compared: left out by the sampling rate, or dropped because the shadow was
    /// behind (the live version never waits for it).
    Skipped,
}

impl ShadowResult {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Agree => "agree",
            Self::Disagree => "disagree",
            Self::Trap => "trap",
            Self::Skipped => "skipped",
        }
    }
}

/// One record the versions handled differently, as shown to an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Disagreement {
    /// The shard it was read from.
    pub shard_id: String,
    /// Its sequence number.
    pub sequence_number: String,
    /// What the live version did.
    pub live: String,
    /// What the shadow did.
    pub shadow: String,
    /// The publishes that differed (`live only: ...`, `shadow only: ...`).
    pub publishes: Vec<String>,
}

/// Counts of a shadow's records by result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ShadowCounts {
    /// Handled alike.
    pub agree: u64,
    /// Handled otherwise.
    pub disagree: u64,
    /// The shadow trapped.
    pub trap: u64,
    /// Not compared.
    pub skipped: u64,
}

impl ShadowCounts {
    /// Records compared: agreed, disagreed or trapped.
    pub fn compared(&self) -> u64 {
        self.agree + self.disagree + self.trap
    }

    /// The share of compared records the versions agreed on, if any was compared.
    pub fn agreement_rate(&self) -> Option<f64> {
        let compared = self.compared();
        (compared > 0).then(|| self.agree as f64 / compared as f64)
    }
}

/// The account of one shadow over every shard of its app on this host: counts by result (also
/// as the [`SHADOW_RECORDS`] metric, the tenant's, labelled by app) and the first `keep`
/// disagreements.
pub struct ShadowTally {
    counts: [AtomicU64; 4],
    counters: [Counter; 4],
    keep: usize,
    first: Mutex<Vec<Disagreement>>,
}

const RESULTS: [ShadowResult; 4] = [
    ShadowResult::Agree,
    ShadowResult::Disagree,
    ShadowResult::Trap,
    ShadowResult::Skipped,
];

impl ShadowTally {
    /// An empty tally of `tenant`'s shadow of `app`, keeping the first `keep` disagreements.
    pub fn new(tenant: &str, app: &str, keep: usize) -> Self {
        let counter = |result: ShadowResult| {
            let mut labels = owner_labels(tenant, app, None);
            labels.push(Label::new("result", result.label()));
            metrics::counter!(SHADOW_RECORDS, labels)
        };
        Self {
            counts: Default::default(),
            counters: RESULTS.map(counter),
            keep,
            first: Mutex::new(Vec::new()),
        }
    }

    /// Counts `n` records with `result`.
    pub fn count(&self, result: ShadowResult, n: u64) {
        let slot = result as usize;
        self.counts[slot].fetch_add(n, Ordering::Relaxed);
        self.counters[slot].increment(n);
    }

    /// Keeps `disagreement` if fewer than `keep` are kept.
    pub fn disagreed(&self, disagreement: Disagreement) {
        let mut first = lock(&self.first);
        if first.len() < self.keep {
            first.push(disagreement);
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> ShadowCounts {
        let read = |result: ShadowResult| self.counts[result as usize].load(Ordering::Relaxed);
        ShadowCounts {
            agree: read(ShadowResult::Agree),
            disagree: read(ShadowResult::Disagree),
            trap: read(ShadowResult::Trap),
            skipped: read(ShadowResult::Skipped),
        }
    }

    /// The first disagreements, in the order they were found.
    pub fn disagreements(&self) -> Vec<Disagreement> {
        lock(&self.first).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disagreement(sequence: &str) -> Disagreement {
        Disagreement {
            shard_id: "s-0".into(),
            sequence_number: sequence.into(),
            live: "ack, 0 publishes".into(),
            shadow: "drop, 0 publishes".into(),
            publishes: vec![],
        }
    }

    #[test]
    fn counts_by_result_and_keeps_the_first_disagreements() {
        let tally = ShadowTally::new("acme", "books", 2);
        tally.count(ShadowResult::Agree, 3);
        tally.count(ShadowResult::Disagree, 1);
        tally.count(ShadowResult::Skipped, 5);
        for sequence in ["1", "2", "3"] {
            tally.disagreed(disagreement(sequence));
        }
        let counts = tally.counts();
        assert_eq!(counts.compared(), 4);
        assert_eq!(counts.skipped, 5);
        assert_eq!(counts.agreement_rate(), Some(0.75));
        let kept: Vec<String> = tally
            .disagreements()
            .into_iter()
            .map(|d| d.sequence_number)
            .collect();
        assert_eq!(kept, ["1", "2"]);
        assert_eq!(ShadowCounts::default().agreement_rate(), None);
    }
}
