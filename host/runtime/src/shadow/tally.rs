//! The running account of a shadow: records compared by result, and the first disagreements.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use metrics::{Counter, Label};

use crate::metrics::{FOLDED, label, shadow_labels};
use ruststream_common::sync::lock;

pub use crate::metrics::{SHADOW_RECORDS, SHADOW_SKIPPED};

/// What became of one record offered to a shadow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShadowResult {
    /// The shadow handled it as the live version did.
    Agree,
    /// It handled it otherwise.
    Disagree,
    /// Its call trapped on it.
    Trap,
    /// It was not compared, for this reason (the live version never waits for its shadow).
    Skipped(SkipReason),
}

impl ShadowResult {
    /// The metric label (`result`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Agree => "agree",
            Self::Disagree => "disagree",
            Self::Trap => "trap",
            Self::Skipped(_) => "skipped",
        }
    }

    fn slot(self) -> usize {
        match self {
            Self::Agree => 0,
            Self::Disagree => 1,
            Self::Trap => 2,
            Self::Skipped(_) => 3,
        }
    }
}

/// Why a shadow did not compare a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Left out by the sampling rate.
    Sample,
    /// Its queue was full: the shadow was behind the live version.
    Behind,
    /// Its instance did not fit in the tenant's memory budget.
    Budget,
    /// Its queue was full while its calls waited for the CPU that live calls took: a shadow
    /// runs only on what the live versions leave.
    Cpu,
    /// The shadow was aborted, promoted or replaced before it got to them: queued records are
    /// dropped, and a call in flight is stopped.
    Withdrawn,
}

impl SkipReason {
    /// The metric label (`reason`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Sample => "sample",
            Self::Behind => "behind",
            Self::Budget => "budget",
            Self::Cpu => "cpu",
            Self::Withdrawn => "withdrawn",
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
    /// Not compared, for any reason: the five below together.
    pub skipped: u64,
    /// Left out by the sampling rate.
    #[cfg_attr(feature = "serde", serde(default))]
    pub skipped_sample: u64,
    /// Skipped because the shadow was behind (its queue full).
    #[cfg_attr(feature = "serde", serde(default))]
    pub skipped_behind: u64,
    /// Skipped because the shadow's instance did not fit in the tenant's memory budget.
    #[cfg_attr(feature = "serde", serde(default))]
    pub skipped_budget: u64,
    /// Skipped because live calls took the CPU the shadow waited for.
    #[cfg_attr(feature = "serde", serde(default))]
    pub skipped_cpu: u64,
    /// Dropped because the shadow was withdrawn (aborted, promoted, replaced).
    #[cfg_attr(feature = "serde", serde(default))]
    pub skipped_withdrawn: u64,
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
/// as the [`SHADOW_RECORDS`] and [`SHADOW_SKIPPED`] metrics, the tenant's, labelled by app
/// within the tenant's series bound) and the first `keep` disagreements.
pub struct ShadowTally {
    /// Agree, disagree, trap, skipped; then skipped by reason.
    counts: [AtomicU64; 9],
    counters: [Counter; 9],
    keep: usize,
    first: Mutex<Vec<Disagreement>>,
}

const RESULTS: [ShadowResult; 4] = [
    ShadowResult::Agree,
    ShadowResult::Disagree,
    ShadowResult::Trap,
    ShadowResult::Skipped(SkipReason::Sample),
];

const REASONS: [SkipReason; 5] = [
    SkipReason::Sample,
    SkipReason::Behind,
    SkipReason::Budget,
    SkipReason::Cpu,
    SkipReason::Withdrawn,
];

impl ShadowTally {
    /// An empty tally of `tenant`'s shadow of `app`, keeping the first `keep` disagreements.
    /// Its series count against the tenant's `max_series`; past it they are labelled
    /// `app="_other"`.
    pub fn new(tenant: &str, app: &str, max_series: usize, keep: usize) -> Self {
        let owner = shadow_labels(tenant, app, max_series);
        if owner.iter().any(|l| l.value() == FOLDED) {
            tracing::warn!(
                tenant,
                app,
                "the tenant's metric series bound (max_metric_series) \
                is reached: this shadow's series are counted under app=\"_other\""
            );
        }
        let result = |result: ShadowResult| {
            let mut labels = owner.clone();
            labels.push(Label::new("result", result.label()));
            metrics::counter!(SHADOW_RECORDS, labels)
        };
        let reason = |reason: SkipReason| {
            let mut labels = owner.clone();
            labels.push(Label::new(label::REASON, reason.label()));
            metrics::counter!(SHADOW_SKIPPED, labels)
        };
        let [agree, disagree, trap, skipped] = RESULTS.map(result);
        let [sample, behind, budget, cpu, withdrawn] = REASONS.map(reason);
        Self {
            counts: Default::default(),
            counters: [
                agree, disagree, trap, skipped, sample, behind, budget, cpu, withdrawn,
            ],
            keep,
            first: Mutex::new(Vec::new()),
        }
    }

    /// Counts `n` records with `result`.
    pub fn count(&self, result: ShadowResult, n: u64) {
        let add = |slot: usize| {
            self.counts[slot].fetch_add(n, Ordering::Relaxed);
            self.counters[slot].increment(n);
        };
        add(result.slot());
        if let ShadowResult::Skipped(reason) = result {
            add(4 + reason as usize);
        }
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
        let read = |slot: usize| self.counts[slot].load(Ordering::Relaxed);
        ShadowCounts {
            agree: read(0),
            disagree: read(1),
            trap: read(2),
            skipped: read(3),
            skipped_sample: read(4),
            skipped_behind: read(5),
            skipped_budget: read(6),
            skipped_cpu: read(7),
            skipped_withdrawn: read(8),
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
        let tally = ShadowTally::new("acme", "books", 1_000, 2);
        tally.count(ShadowResult::Agree, 3);
        tally.count(ShadowResult::Disagree, 1);
        tally.count(ShadowResult::Skipped(SkipReason::Sample), 4);
        tally.count(ShadowResult::Skipped(SkipReason::Budget), 1);
        for sequence in ["1", "2", "3"] {
            tally.disagreed(disagreement(sequence));
        }
        let counts = tally.counts();
        assert_eq!(counts.compared(), 4);
        assert_eq!(counts.skipped, 5);
        assert_eq!((counts.skipped_sample, counts.skipped_budget), (4, 1));
        assert_eq!(counts.skipped_behind, 0);
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
