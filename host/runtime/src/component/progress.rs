//! How far a call has got, and the deadline of the record it is on.
//!
//! The guest reports each record's outcome as it goes (on its board, or by `record-outcome`),
//! and each report gives the next record a fresh deadline. A report is on the hot path of
//! every record, so it only bumps a counter (read from the board at each check); the deadline
//! moves when a check sees the counter moved. Checks run at
//! every epoch tick while the guest runs, and at least every eighth of the per-record
//! deadline from the timer that bounds the call from outside (time blocked in host imports).
//! A record therefore gets at least its deadline, and at most one check interval more.
//!
//! Deadlines are on the call's own clock ([`CallClock`]): on a compute pool the time it ran
//! and was blocked in imports, never the time it waited for a compute slot.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cpu::CallClock;
use ruststream_common::sync::lock;

/// The progress of one call, shared between the instance's store, the epoch callback and the
/// outside timer.
#[derive(Clone)]
pub(crate) struct CallProgress(Arc<Shared>);

struct Shared {
    per_record: Duration,
    clock: CallClock,
    /// Records reported so far.
    reported: AtomicUsize,
    watch: Mutex<Watch>,
}

/// What the last check saw.
struct Watch {
    reported: usize,
    /// On the call's own clock.
    deadline: Duration,
}

impl CallProgress {
    /// A call whose records each have `per_record` of `clock`'s own time to finish; the
    /// first starts now.
    pub(crate) fn new(per_record: Duration, clock: CallClock) -> Self {
        let deadline = clock.now() + per_record;
        Self(Arc::new(Shared {
            per_record,
            clock,
            reported: AtomicUsize::new(0),
            watch: Mutex::new(Watch {
                reported: 0,
                deadline,
            }),
        }))
    }

    /// Notes that `reported` records are done: cheap enough for every record. The count only
    /// grows (a board the guest rewinds gains it no fresh deadline), and the caller caps it at
    /// the call's records: a call gets at most one fresh deadline per record.
    pub(crate) fn reported(&self, reported: usize) {
        self.0.reported.fetch_max(reported, Ordering::Relaxed);
    }

    /// How many records were reported so far: the index of the record under way.
    pub(crate) fn reported_so_far(&self) -> usize {
        self.0.reported.load(Ordering::Relaxed)
    }

    /// When the record under way must be done, on the call's own clock: its deadline
    /// counted from the first check that saw the record before it reported.
    pub(crate) fn deadline(&self) -> Duration {
        let reported = self.0.reported.load(Ordering::Relaxed);
        let mut watch = lock(&self.0.watch);
        if reported != watch.reported {
            watch.reported = reported;
            watch.deadline = self.0.clock.now() + self.0.per_record;
        }
        watch.deadline
    }

    /// How much own time the record under way has left, `slack` past its deadline included;
    /// zero once it is past. Reads the running thread's clock: only from the thread polling
    /// the call.
    pub(crate) fn left(&self, slack: Duration) -> Duration {
        (self.deadline() + slack).saturating_sub(self.0.clock.now())
    }

    /// How often the outside timer checks for reports while the call is blocked: an eighth of
    /// the per-record deadline.
    pub(crate) fn check_interval(&self) -> Duration {
        (self.0.per_record / 8).max(Duration::from_millis(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_moves_the_deadline_at_the_next_check() {
        let progress = CallProgress::new(Duration::from_secs(60), CallClock::new());
        let first = progress.deadline();
        assert_eq!(progress.deadline(), first, "no report, no new deadline");
        std::thread::sleep(Duration::from_millis(2));
        progress.reported(1);
        let second = progress.deadline();
        assert!(second > first, "the next record gets a fresh deadline");
        assert_eq!(progress.deadline(), second, "only once per report");
    }
}
