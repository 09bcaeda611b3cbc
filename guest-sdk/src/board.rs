//! The outcome board a `handle-batch` call lends the host (WIT interface `progress`): one u64
//! slot per record, written as each record is decided, so that reporting an outcome costs two
//! stores instead of a host call. The host reads it at its deadline checks, on the guest's host
//! imports, and when the call returns or traps.

use std::cell::RefCell;

use crate::bindings::ruststream::handler::progress;
use crate::bindings::ruststream::handler::types::HandlerOutcome as WitOutcome;

thread_local! {
    /// The board's memory, kept between calls: the host reads a call's board after the call
    /// returns, so it must outlive `handle-batch`; the next call reuses it.
    static SLOTS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// A call's board: slot 0 counts the records reported, slot 1 + i is record i's outcome.
pub(crate) struct OutcomeBoard<'a> {
    slots: &'a mut [u64],
}

/// Runs `f` with a cleared board for `records` records, lent to the host for the call under
/// way.
pub(crate) fn with_board<R>(records: usize, f: impl FnOnce(&mut OutcomeBoard<'_>) -> R) -> R {
    SLOTS.with_borrow_mut(|slots| {
        slots.clear();
        slots.resize(records + 1, 0);
        progress::share_outcomes(slots);
        f(&mut OutcomeBoard { slots })
    })
}

impl OutcomeBoard<'_> {
    /// Writes record `index`'s outcome, then the count that covers it. A record past the
    /// board is not written (the host counts it unreported).
    pub(crate) fn write(&mut self, index: u32, outcome: WitOutcome) {
        let at = index as usize + 1;
        if at >= self.slots.len() {
            return;
        }
        let slot = encode(outcome).to_le();
        // Volatile: the host reads the board while the call runs, which the compiler cannot
        // see; the stores must happen when and in the order written, the outcome first.
        // SAFETY: `at` and 0 are in bounds (checked above), so both references are valid,
        // aligned and exclusive.
        unsafe {
            std::ptr::write_volatile(&mut self.slots[at], slot);
            std::ptr::write_volatile(&mut self.slots[0], (at as u64).to_le());
        }
    }
}

/// The slot value of `outcome`: 1 `ack`, 2 `drop`, 3 `retry`, 4 + ms `retry-after(ms)`.
fn encode(outcome: WitOutcome) -> u64 {
    match outcome {
        WitOutcome::Ack => 1,
        WitOutcome::Drop => 2,
        WitOutcome::Retry => 3,
        WitOutcome::RetryAfter(ms) => ms.saturating_add(4),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_encode_as_the_contract_says() {
        assert_eq!(encode(WitOutcome::Ack), 1);
        assert_eq!(encode(WitOutcome::Drop), 2);
        assert_eq!(encode(WitOutcome::Retry), 3);
        assert_eq!(encode(WitOutcome::RetryAfter(0)), 4);
        assert_eq!(encode(WitOutcome::RetryAfter(1_500)), 1_504);
        assert_eq!(encode(WitOutcome::RetryAfter(u64::MAX)), u64::MAX);
    }
}
