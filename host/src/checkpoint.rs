//! Per-shard checkpoint bookkeeping: the watermark over deliveries.
//!
//! Records are tracked in arrival order by a monotonic index; sequence numbers are only carried,
//! never parsed or compared (they are 56-digit decimals and shards do not promise any shape).
//! The checkpoint is the sequence number of the last record of the contiguous handled prefix:
//! it never passes a record that is not handled.

use std::collections::VecDeque;

/// Identifies one tracked delivery. A ticket from before a [`Watermark::reset`] is stale: it
/// no longer moves anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket {
    generation: u64,
    index: u64,
}

/// The handled-prefix tracker of one shard.
#[derive(Debug, Default)]
pub struct Watermark {
    generation: u64,
    /// Arrival index of `slots[0]`.
    base: u64,
    slots: VecDeque<Slot>,
    checkpoint: Option<String>,
}

#[derive(Debug)]
struct Slot {
    sequence_number: String,
    handled: bool,
}

impl Watermark {
    /// A watermark whose checkpoint starts at `checkpoint` (the stored position, if any).
    pub fn new(checkpoint: Option<String>) -> Self {
        Self {
            checkpoint,
            ..Self::default()
        }
    }

    /// Starts tracking the next delivery in arrival order.
    pub fn track(&mut self, sequence_number: impl Into<String>) -> Ticket {
        let index = self.base + self.slots.len() as u64;
        self.slots.push_back(Slot {
            sequence_number: sequence_number.into(),
            handled: false,
        });
        Ticket {
            generation: self.generation,
            index,
        }
    }

    /// Marks a delivery handled. Returns the new checkpoint when the handled prefix grew.
    /// A stale ticket (from before a reset) or one already handled changes nothing.
    pub fn mark_handled(&mut self, ticket: Ticket) -> Option<&str> {
        if ticket.generation != self.generation || ticket.index < self.base {
            return None;
        }
        let slot = self.slots.get_mut((ticket.index - self.base) as usize)?;
        slot.handled = true;
        self.advance()
    }

    fn advance(&mut self) -> Option<&str> {
        let mut moved = false;
        while self.slots.front().is_some_and(|slot| slot.handled) {
            if let Some(slot) = self.slots.pop_front() {
                self.checkpoint = Some(slot.sequence_number);
                self.base += 1;
                moved = true;
            }
        }
        if moved {
            self.checkpoint.as_deref()
        } else {
            None
        }
    }

    /// The sequence number of the last record of the handled prefix, if any record is handled
    /// (or a checkpoint was given at creation or reset).
    pub fn checkpoint(&self) -> Option<&str> {
        self.checkpoint.as_deref()
    }

    /// Deliveries tracked and not yet passed by the checkpoint (handled or not).
    pub fn in_flight(&self) -> usize {
        self.slots.len()
    }

    /// The first unhandled delivery's sequence number: where the checkpoint is held.
    pub fn held_at(&self) -> Option<&str> {
        self.slots
            .iter()
            .find(|slot| !slot.handled)
            .map(|slot| slot.sequence_number.as_str())
    }

    /// Starts the bookkeeping afresh (a seek): every earlier ticket becomes stale, and the
    /// checkpoint becomes `checkpoint`.
    pub fn reset(&mut self, checkpoint: Option<String>) {
        self.generation += 1;
        self.base = 0;
        self.slots.clear();
        self.checkpoint = checkpoint;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_only_over_a_contiguous_handled_prefix() {
        let mut w = Watermark::new(None);
        let a = w.track("10");
        let b = w.track("20");
        let c = w.track("30");
        assert_eq!(w.mark_handled(b), None);
        assert_eq!(w.mark_handled(c), None);
        assert_eq!(w.checkpoint(), None);
        assert_eq!(w.held_at(), Some("10"));
        assert_eq!(w.mark_handled(a), Some("30"));
        assert_eq!(w.in_flight(), 0);
    }

    #[test]
    fn a_held_record_keeps_the_checkpoint_in_front_of_it() {
        let mut w = Watermark::new(Some("5".into()));
        let a = w.track("10");
        let held = w.track("20");
        let c = w.track("30");
        assert_eq!(w.mark_handled(a), Some("10"));
        assert_eq!(w.mark_handled(c), None);
        assert_eq!(w.checkpoint(), Some("10"));
        assert_eq!(w.held_at(), Some("20"));
        assert_eq!(w.mark_handled(held), Some("30"));
    }

    #[test]
    fn sequence_numbers_are_never_compared() {
        // Arrival order rules, even when the strings would sort the other way.
        let mut w = Watermark::new(None);
        let a = w.track("9");
        let b = w.track("10");
        w.mark_handled(b);
        assert_eq!(w.mark_handled(a), Some("10"));
    }

    #[test]
    fn tickets_from_before_a_reset_are_stale() {
        let mut w = Watermark::new(None);
        let old = w.track("10");
        w.reset(Some("3".into()));
        let new = w.track("4");
        assert_eq!(w.mark_handled(old), None);
        assert_eq!(w.checkpoint(), Some("3"));
        assert_eq!(w.mark_handled(new), Some("4"));
    }

    #[test]
    fn handling_twice_changes_nothing() {
        let mut w = Watermark::new(None);
        let a = w.track("1");
        let b = w.track("2");
        assert_eq!(w.mark_handled(a), Some("1"));
        assert_eq!(w.mark_handled(a), None);
        assert_eq!(w.mark_handled(b), Some("2"));
    }
}
