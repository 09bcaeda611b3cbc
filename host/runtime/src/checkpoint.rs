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
pub(crate) struct Ticket {
    generation: u64,
    index: u64,
}

/// The handled-prefix tracker of one shard.
///
/// Only records not yet handled are kept (with, for the one whose turn comes next, the sequence
/// number of the record just before it): memory follows what is outstanding, not what was
/// read. A record held for good in front of a million handled ones costs one entry.
#[derive(Debug, Default)]
pub(crate) struct Watermark {
    generation: u64,
    /// Arrival index the next tracked delivery gets.
    next: u64,
    /// Unhandled deliveries, by arrival index (increasing).
    pending: VecDeque<Pending>,
    /// Sequence number of the last tracked delivery.
    latest: Option<String>,
    checkpoint: Option<String>,
}

#[derive(Debug)]
struct Pending {
    index: u64,
    sequence_number: String,
    /// The sequence number of the delivery just before this one, once that one is handled:
    /// where the checkpoint moves when this one is the first still unhandled.
    before: Option<String>,
}

impl Watermark {
    /// A watermark whose checkpoint starts at `checkpoint` (the stored position, if any).
    pub(crate) fn new(checkpoint: Option<String>) -> Self {
        Self {
            checkpoint,
            ..Self::default()
        }
    }

    /// Starts tracking the next delivery in arrival order.
    pub(crate) fn track(&mut self, sequence_number: impl Into<String>) -> Ticket {
        let index = self.next;
        self.next += 1;
        let sequence_number = sequence_number.into();
        // When the delivery before this one is already handled, remember where it stood.
        let previous_pending = self.pending.back().is_some_and(|p| p.index + 1 == index);
        let before = if previous_pending {
            None
        } else {
            self.latest.take()
        };
        self.latest = Some(sequence_number.clone());
        self.pending.push_back(Pending {
            index,
            sequence_number,
            before,
        });
        Ticket {
            generation: self.generation,
            index,
        }
    }

    /// Marks a delivery handled. Returns the new checkpoint when the handled prefix grew.
    /// A stale ticket (from before a reset) or one already handled changes nothing.
    pub(crate) fn mark_handled(&mut self, ticket: Ticket) -> Option<&str> {
        if ticket.generation != self.generation {
            return None;
        }
        let position = self
            .pending
            .binary_search_by_key(&ticket.index, |p| p.index)
            .ok()?;
        let handled = self.pending.remove(position)?;
        if let Some(after) = self.pending.get_mut(position)
            && after.index == handled.index + 1
        {
            after.before = Some(handled.sequence_number);
        }
        if position != 0 {
            return None;
        }
        let moved_to = match self.pending.front() {
            Some(first) => first.before.clone(),
            None => self.latest.clone(),
        };
        if moved_to.is_some() {
            self.checkpoint = moved_to;
        }
        self.checkpoint.as_deref()
    }

    /// The sequence number of the last record of the handled prefix, if any record is handled
    /// (or a checkpoint was given at creation or reset).
    pub(crate) fn checkpoint(&self) -> Option<&str> {
        self.checkpoint.as_deref()
    }

    /// Deliveries tracked and not yet handled.
    pub(crate) fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// The first unhandled delivery's sequence number: where the checkpoint is held.
    pub(crate) fn held_at(&self) -> Option<&str> {
        self.pending.front().map(|p| p.sequence_number.as_str())
    }

    /// Starts the bookkeeping afresh (a seek): every earlier ticket becomes stale, and the
    /// checkpoint becomes `checkpoint`.
    pub(crate) fn reset(&mut self, checkpoint: Option<String>) {
        self.generation += 1;
        self.pending.clear();
        self.latest = None;
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
    fn a_held_record_costs_one_entry_whatever_comes_after_it() {
        let mut w = Watermark::new(None);
        let first = w.track("1");
        let held = w.track("2");
        assert_eq!(w.mark_handled(first), Some("1"));
        for n in 3..100_003u64 {
            let ticket = w.track(n.to_string());
            assert_eq!(w.mark_handled(ticket), None);
        }
        assert_eq!(w.in_flight(), 1, "only the held record is kept");
        assert_eq!(w.held_at(), Some("2"));
        assert_eq!(w.mark_handled(held), Some("100002"));
    }

    #[test]
    fn records_handled_out_of_order_move_it_to_the_right_place() {
        let mut w = Watermark::new(None);
        let t: Vec<Ticket> = (1..=5).map(|n| w.track(n.to_string())).collect();
        assert_eq!(w.mark_handled(t[3]), None);
        assert_eq!(w.mark_handled(t[1]), None);
        assert_eq!(w.mark_handled(t[0]), Some("2"));
        assert_eq!(w.held_at(), Some("3"));
        assert_eq!(w.mark_handled(t[2]), Some("4"));
        let later = w.track("6");
        assert_eq!(w.mark_handled(t[4]), Some("5"));
        assert_eq!(w.mark_handled(later), Some("6"));
        assert_eq!(w.in_flight(), 0);
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
