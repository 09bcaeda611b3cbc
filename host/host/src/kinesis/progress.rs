//! How far behind the tip a shard's reader was at its last answer, and when that was: what a
//! status read at any time needs to say how far behind the shard is now, also while nobody
//! reads it (a paused tenant, a long call, a stalled read).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Updated by a reader at every answer, empty ones included; read by whoever reports lag.
#[derive(Debug)]
pub struct ReadProgress {
    /// `MillisBehindLatest` of the last answer; [`NONE`] before the first.
    behind_ms: AtomicI64,
    /// When the last answer was taken (ms since the epoch); 0 before the first.
    answered_at_ms: AtomicU64,
    /// The longest a reader reading normally goes between two answers it takes: its poll
    /// interval after an empty read.
    expected_gap_ms: u64,
}

const NONE: i64 = i64::MIN;

impl ReadProgress {
    /// Progress of a reader that goes at most `expected_gap` between answers while it reads.
    pub(crate) fn new(expected_gap: Duration) -> Self {
        Self {
            behind_ms: AtomicI64::new(NONE),
            answered_at_ms: AtomicU64::new(0),
            expected_gap_ms: u64::try_from(expected_gap.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Notes an answer taken at `now_ms` that was `behind_ms` behind the tip.
    pub(crate) fn answered(&self, behind_ms: Option<i64>, now_ms: u64) {
        self.behind_ms
            .store(behind_ms.unwrap_or(NONE).max(NONE + 1), Ordering::Relaxed);
        self.answered_at_ms.store(now_ms, Ordering::Relaxed);
    }

    /// How far behind the tip the shard is at `now_ms`, at least: the last answer's figure,
    /// plus the time since that answer beyond a normal reader's gap (records may have arrived
    /// meanwhile, and nobody read them). `None` before the first answer, or when the answer did
    /// not say.
    pub fn behind_ms(&self, now_ms: u64) -> Option<u64> {
        let behind = self.behind_ms.load(Ordering::Relaxed);
        if behind == NONE || behind == NONE + 1 {
            return None;
        }
        let answered_at = self.answered_at_ms.load(Ordering::Relaxed);
        let unread = now_ms
            .saturating_sub(answered_at)
            .saturating_sub(self.expected_gap_ms);
        Some(
            u64::try_from(behind.max(0))
                .unwrap_or(0)
                .saturating_add(unread),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_grows_with_the_time_nobody_reads() {
        let progress = ReadProgress::new(Duration::from_secs(1));
        assert_eq!(progress.behind_ms(5_000), None);
        progress.answered(Some(250), 10_000);
        assert_eq!(
            progress.behind_ms(10_900),
            Some(250),
            "within a reader's gap"
        );
        assert_eq!(progress.behind_ms(23_000), Some(12_250), "12 s unread");
        progress.answered(Some(0), 23_000);
        assert_eq!(progress.behind_ms(23_100), Some(0));
        progress.answered(None, 24_000);
        assert_eq!(progress.behind_ms(24_000), None);
    }
}
