//! Judging a new component version against the one it replaced: each version counts its
//! calls and failed calls (traps, whatever `on_trap` then settled them as), and a rollout
//! compares the new version's first calls with the old version's last ones.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ruststream_common::sync::lock;

/// The default number of calls a rollout judges (the new version's first, the old one's last).
pub const DEFAULT_ROLLOUT_CALLS: u32 = 20;

/// The default margin: a new version is rolled back when its failure rate exceeds the old
/// version's by more than this.
pub const DEFAULT_ROLLOUT_MARGIN: f64 = 0.2;

/// How one version's calls went: totals, and the last `window` calls in order.
#[derive(Debug)]
pub struct CallStats {
    calls: AtomicU64,
    failures: AtomicU64,
    window: usize,
    recent: Mutex<VecDeque<bool>>,
    /// Another version replaced this one (a swap or a rollback).
    retired: AtomicBool,
}

impl CallStats {
    /// Counts that remember the last `window` calls (at least one).
    pub fn new(window: u32) -> Self {
        let window = (window as usize).max(1);
        Self {
            calls: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            window,
            recent: Mutex::new(VecDeque::with_capacity(window)),
            retired: AtomicBool::new(false),
        }
    }

    /// Marks the version replaced: its pipelines stop calling it at their next call boundary
    /// (what they read waits for the version that replaced it), and its failures from then on
    /// no longer count toward its tenant's quarantine.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
    }

    /// Makes the version current again (a rollback returned to it).
    pub fn reinstate(&self) {
        self.retired.store(false, Ordering::Relaxed);
    }

    /// Whether another version replaced this one.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// Counts one call; `failed` when it trapped.
    pub fn record(&self, failed: bool) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        let mut recent = lock(&self.recent);
        if recent.len() == self.window {
            recent.pop_front();
        }
        recent.push_back(failed);
    }

    /// Calls counted since the version went live.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Failed calls counted since the version went live.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The failure rate over the last `window` calls; 0 when there were none.
    pub fn recent_failure_rate(&self) -> f64 {
        let recent = lock(&self.recent);
        if recent.is_empty() {
            return 0.0;
        }
        recent.iter().filter(|failed| **failed).count() as f64 / recent.len() as f64
    }
}

/// What a rollout comes to so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Not enough calls yet to tell.
    Pending,
    /// The new version is no worse than the margin allows over its first calls.
    Keep,
    /// The new version fails too often: swap back. Says why.
    RollBack(String),
}

/// The rules of a rollout: over the new version's first `calls` calls, its failure rate may
/// exceed the old version's rate over its last `calls` calls by at most `margin`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RolloutPolicy {
    /// How many calls are judged.
    pub calls: u32,
    /// How much worse than the old version the new one may fail (a rate, 0 to 1).
    pub margin: f64,
    /// Whether a host acts on its own verdict. `false` where one judge decides for a fleet of
    /// hosts from all their counts: each host then only counts.
    pub local_verdicts: bool,
}

impl Default for RolloutPolicy {
    fn default() -> Self {
        Self {
            calls: DEFAULT_ROLLOUT_CALLS,
            margin: DEFAULT_ROLLOUT_MARGIN,
            local_verdicts: true,
        }
    }
}

impl RolloutPolicy {
    /// Judges `new` (counted since it went live) against `old_rate`, the old version's failure
    /// rate over its last calls. The verdict comes early once the failures already counted
    /// exceed what the whole window allows, so a version that traps on every call is rolled
    /// back after a few calls, before it can stall anything for long. A version whose every
    /// judged call failed is rolled back even when the old one failed as often.
    pub fn judge(&self, new: &CallStats, old_rate: f64) -> Verdict {
        self.judge_counts(new.calls(), new.failures(), old_rate)
    }

    /// [`judge`](Self::judge) over counts: `calls` made by the new version, `failures` of
    /// them; what a fleet's judge decides from every host's counts summed.
    pub fn judge_counts(&self, calls: u64, failures: u64, old_rate: f64) -> Verdict {
        let window = u64::from(self.calls.max(1));
        let (calls, failures) = (calls.min(window), failures.min(window));
        let allowed = ((old_rate + self.margin) * window as f64).floor() as u64;
        if failures > allowed {
            return Verdict::RollBack(format!(
                "{failures} of its first {calls} calls failed; the version it replaced failed \
                 {:.0}% of its last calls, and the margin is {:.0} points",
                old_rate * 100.0,
                self.margin * 100.0
            ));
        }
        if calls >= window && failures == calls {
            // Worse than the old version or not, a version that never succeeds is not kept.
            return Verdict::RollBack(format!("all of its first {calls} calls failed"));
        }
        if calls >= window {
            Verdict::Keep
        } else {
            Verdict::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(outcomes: &[bool]) -> CallStats {
        let stats = CallStats::new(4);
        for failed in outcomes {
            stats.record(*failed);
        }
        stats
    }

    #[test]
    fn a_version_failing_every_call_is_rolled_back_before_its_window_ends() {
        let policy = RolloutPolicy {
            calls: 10,
            margin: 0.2,
            local_verdicts: true,
        };
        // Allowed: floor(0.2 * 10) = 2 failures; the third decides.
        assert_eq!(policy.judge(&stats(&[true, true]), 0.0), Verdict::Pending);
        assert!(matches!(
            policy.judge(&stats(&[true, true, true]), 0.0),
            Verdict::RollBack(_)
        ));
    }

    #[test]
    fn a_version_as_good_as_the_old_one_is_kept_once_its_window_is_full() {
        let policy = RolloutPolicy {
            calls: 4,
            margin: 0.0,
            local_verdicts: true,
        };
        assert_eq!(policy.judge(&stats(&[false; 3]), 0.0), Verdict::Pending);
        assert_eq!(policy.judge(&stats(&[false; 4]), 0.0), Verdict::Keep);
        // The old version failed half its calls: half of the new one's may fail too.
        assert_eq!(
            policy.judge(&stats(&[true, false, true, false]), 0.5),
            Verdict::Keep
        );
        assert!(matches!(
            policy.judge(&stats(&[true, true, true, false]), 0.5),
            Verdict::RollBack(_)
        ));
    }

    #[test]
    fn a_version_that_never_succeeds_is_rolled_back_even_after_a_failing_one() {
        let policy = RolloutPolicy {
            calls: 4,
            margin: 0.2,
            local_verdicts: true,
        };
        assert_eq!(policy.judge(&stats(&[true; 3]), 1.0), Verdict::Pending);
        assert!(matches!(
            policy.judge(&stats(&[true; 4]), 1.0),
            Verdict::RollBack(_)
        ));
    }

    #[test]
    fn the_recent_rate_covers_the_last_calls_only() {
        let stats = stats(&[true, true, true, true, false, false]);
        assert_eq!(stats.calls(), 6);
        assert_eq!(stats.failures(), 4);
        assert!((stats.recent_failure_rate() - 0.5).abs() < f64::EPSILON);
    }
}
