//! The outcome board: where the guest reports each record's outcome without a host call.
//!
//! A host call costs ~550 instructions in wasmtime's component machinery, as much as the rest
//! of the host's work per record; the board is a `list<u64>` in the guest's own memory that
//! the guest lends the host once per call (`progress.share-outcomes`) and then writes with
//! plain stores. The host reads it in place whenever it needs to know how far the call got:
//! at each deadline check, on each host import the guest calls, when the call returns and
//! after a trap. Layout: `wit/ruststream.wit`, interface `progress`.

use std::time::Duration;

use wasmtime::StoreContext;
use wasmtime::component::WasmList;

use super::bindings::contract_version;
use crate::outcome::Outcome;

/// A call's board, read where the guest keeps it.
pub(crate) struct Board {
    slots: WasmList<u64>,
}

/// The interface whose `share-outcomes` lends the board.
pub(crate) const INTERFACE: &str = concat!("ruststream:handler/progress@", contract_version!());

impl Board {
    /// The board the guest lent: `slots`, in its memory.
    pub(crate) fn new(slots: WasmList<u64>) -> Self {
        Self { slots }
    }

    /// How many records the board shows reported, at most `records`.
    pub(crate) fn reported<T: 'static>(&self, store: StoreContext<'_, T>, records: usize) -> usize {
        Self::count(self.slots.as_le_slice(store), records)
    }

    fn count(slots: &[u64], records: usize) -> usize {
        let Some((count, outcomes)) = slots.split_first() else {
            return 0;
        };
        usize::try_from(u64::from_le(*count))
            .unwrap_or(usize::MAX)
            .min(records)
            .min(outcomes.len())
    }

    /// The outcomes the board shows reported, in order, up to the first slot that is not an
    /// outcome.
    pub(crate) fn outcomes<T: 'static>(
        &self,
        store: StoreContext<'_, T>,
        records: usize,
    ) -> Vec<Outcome> {
        let slots = self.slots.as_le_slice(store);
        let reported = Self::count(slots, records);
        let mut outcomes = Vec::with_capacity(reported);
        outcomes.extend(
            slots
                .iter()
                .skip(1)
                .take(reported)
                .map_while(|slot| decode(u64::from_le(*slot))),
        );
        outcomes
    }
}

/// One slot: 1 `ack`, 2 `drop`, 3 `retry`, 4 + ms `retry-after(ms)`; anything else is no
/// outcome.
fn decode(slot: u64) -> Option<Outcome> {
    match slot {
        1 => Some(Outcome::Ack),
        2 => Some(Outcome::Drop),
        3 => Some(Outcome::Retry),
        ms if ms >= 4 => Some(Outcome::RetryAfter(Duration::from_millis(ms - 4))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_capped_by_the_batch_and_the_board() {
        assert_eq!(Board::count(&[], 10), 0, "an empty board reports nothing");
        assert_eq!(Board::count(&[3, 1, 1, 1], 10), 3);
        assert_eq!(
            Board::count(&[u64::MAX, 1, 1, 1], 2),
            2,
            "no more than the batch"
        );
        assert_eq!(Board::count(&[9, 1], 10), 1, "no more than the board holds");
    }

    #[test]
    fn slots_decode_to_outcomes() {
        assert_eq!(decode(1), Some(Outcome::Ack));
        assert_eq!(decode(2), Some(Outcome::Drop));
        assert_eq!(decode(3), Some(Outcome::Retry));
        assert_eq!(decode(4), Some(Outcome::RetryAfter(Duration::ZERO)));
        assert_eq!(
            decode(4 + 1_500),
            Some(Outcome::RetryAfter(Duration::from_millis(1_500)))
        );
        assert_eq!(decode(0), None, "an unwritten slot is no outcome");
    }
}
