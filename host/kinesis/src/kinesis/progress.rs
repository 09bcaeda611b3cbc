//! How far behind the tip a shard's reader was at its last answer, and when that was: what a
//! status read at any time needs to say how far behind the shard is now, also while nobody
//! reads it (a paused tenant, a long call, a stalled read).
//!
//! An answer is noted when it arrives, not when its records are taken: a reader of a paused
//! tenant has its first answer in hand and its records waiting, and the oldest of them says
//! how far behind the checkpoint is (at least) without another read. Before any answer the
//! lag is unknown, and says so (`None`), never 0.
//!
//! A reader by enhanced fan-out also notes when its current subscription began: how old a
//! subscription is says whether it is renewed (Kinesis ends each after five minutes).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Updated by a reader at every answer, empty ones included; read by whoever reports lag.
#[derive(Debug)]
pub struct ReadProgress {
    /// `MillisBehindLatest` of the last answer; [`NONE`] before the first.
    behind_ms: AtomicI64,
    /// When the last answer was taken (ms since the epoch); 0 before the first.
    answered_at_ms: AtomicU64,
    /// When the oldest record read and not yet handed on arrived (ms since the epoch);
    /// [`NOT_WAITING`] when the reader holds no records.
    waiting_since_ms: AtomicU64,
    /// The longest a reader reading normally goes between two answers it takes: its poll
    /// interval after an empty read.
    expected_gap_ms: u64,
    /// When the reader's subscription began (ms since the epoch); 0 while none is open.
    subscribed_at_ms: AtomicU64,
}

const NONE: i64 = i64::MIN;
const NOT_WAITING: u64 = u64::MAX;

impl ReadProgress {
    /// Progress of a reader that goes at most `expected_gap` between answers while it reads.
    pub(crate) fn new(expected_gap: Duration) -> Self {
        Self {
            behind_ms: AtomicI64::new(NONE),
            answered_at_ms: AtomicU64::new(0),
            waiting_since_ms: AtomicU64::new(NOT_WAITING),
            expected_gap_ms: u64::try_from(expected_gap.as_millis()).unwrap_or(u64::MAX),
            subscribed_at_ms: AtomicU64::new(0),
        }
    }

    /// Notes that a subscription began at `at_ms` (ms since the epoch), or that none is open
    /// (`None`).
    pub(crate) fn subscribed(&self, at_ms: Option<u64>) {
        // 0 means none open: a subscription at the epoch itself is noted a millisecond later.
        let stored = at_ms.map_or(0, |ms| ms.max(1));
        self.subscribed_at_ms.store(stored, Ordering::Relaxed);
    }

    /// When the reader's open subscription began; `None` while none is open (and always for a
    /// reader that polls).
    pub fn subscribed_since_ms(&self) -> Option<u64> {
        Some(self.subscribed_at_ms.load(Ordering::Relaxed)).filter(|at| *at != 0)
    }

    /// Notes an answer that arrived at `now_ms`, `behind_ms` behind the tip, its first record
    /// (if any) having arrived at its stream at `oldest_arrival_ms`: until they are handed on
    /// the records wait, and the checkpoint is at least as far behind as the oldest is old.
    pub(crate) fn answered(
        &self,
        behind_ms: Option<i64>,
        oldest_arrival_ms: Option<u64>,
        now_ms: u64,
    ) {
        self.behind_ms
            .store(behind_ms.unwrap_or(NONE).max(NONE + 1), Ordering::Relaxed);
        self.answered_at_ms.store(now_ms, Ordering::Relaxed);
        self.waiting_since_ms.store(
            oldest_arrival_ms.map_or(NOT_WAITING, |ms| ms.min(NOT_WAITING - 1)),
            Ordering::Relaxed,
        );
    }

    /// When the last answer was taken (ms since the epoch); 0 before the first.
    pub(crate) fn answered_at_ms(&self) -> u64 {
        self.answered_at_ms.load(Ordering::Relaxed)
    }

    /// Notes that the records of the last answer were handed on (to the pipeline, which
    /// reports what it holds itself).
    pub(crate) fn handed_on(&self) {
        self.waiting_since_ms.store(NOT_WAITING, Ordering::Relaxed);
    }

    /// How far behind the tip the shard is at `now_ms`, at least: the last answer's figure,
    /// plus the time since that answer beyond a normal reader's gap (records may have arrived
    /// meanwhile, and nobody read them), or the age of the oldest record read and still
    /// waiting to be handed on, whichever is larger. `None` before the first answer, or when
    /// the answer did not say and brought no record: unknown, not caught up.
    pub fn behind_ms(&self, now_ms: u64) -> Option<u64> {
        let behind = self.behind_ms.load(Ordering::Relaxed);
        let read = (behind != NONE && behind != NONE + 1).then(|| {
            let answered_at = self.answered_at_ms.load(Ordering::Relaxed);
            let unread = now_ms
                .saturating_sub(answered_at)
                .saturating_sub(self.expected_gap_ms);
            u64::try_from(behind.max(0))
                .unwrap_or(0)
                .saturating_add(unread)
        });
        let since = self.waiting_since_ms.load(Ordering::Relaxed);
        let waiting = (since != NOT_WAITING).then(|| now_ms.saturating_sub(since));
        read.max(waiting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_grows_with_the_time_nobody_reads() {
        let progress = ReadProgress::new(Duration::from_secs(1));
        assert_eq!(progress.behind_ms(5_000), None);
        progress.answered(Some(250), None, 10_000);
        assert_eq!(
            progress.behind_ms(10_900),
            Some(250),
            "within a reader's gap"
        );
        assert_eq!(progress.behind_ms(23_000), Some(12_250), "12 s unread");
        progress.answered(Some(0), None, 23_000);
        assert_eq!(progress.behind_ms(23_100), Some(0));
        progress.answered(None, None, 24_000);
        assert_eq!(progress.behind_ms(24_000), None);
    }

    #[test]
    fn records_read_and_not_handed_on_are_as_far_behind_as_the_oldest_is_old() {
        let progress = ReadProgress::new(Duration::from_secs(1));
        // A paused tenant's first answer reached the tip, with records 12 s old in it.
        progress.answered(Some(0), Some(88_000), 100_000);
        assert_eq!(progress.behind_ms(100_000), Some(12_000));
        assert_eq!(progress.behind_ms(105_000), Some(17_000), "still waiting");
        // Handed on: the pipeline says what it holds; the reader is at the tip.
        progress.handed_on();
        assert_eq!(progress.behind_ms(100_500), Some(0));
        // Records but no figure from the service: their age is still known.
        progress.answered(None, Some(99_000), 101_000);
        assert_eq!(progress.behind_ms(101_000), Some(2_000));
    }
}
