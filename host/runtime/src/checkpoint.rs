//! Per-shard checkpoint bookkeeping: the watermark over deliveries.
//!
//! Records are tracked in arrival order by a monotonic index; sequence numbers are only carried,
//! never parsed or compared (they are 56-digit decimals and shards do not promise any shape).
//! The checkpoint is the sequence number of the last record of the contiguous handled prefix:
//! it never passes a record that is not handled.

use std::collections::{BTreeMap, VecDeque};

use crate::sequence::SequenceNumber;

/// Identifies one tracked delivery. A ticket from before a [`Watermark::reset`] is stale: it
/// no longer moves anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Ticket {
    generation: u64,
    index: u64,
}

/// The handled-prefix tracker of one shard.
///
/// Only records not yet handled are kept (with, for one whose predecessor is handled, that
/// predecessor's sequence number), and those handled in order since the last `track`: memory
/// follows what is outstanding, not what was read. A record held for good in front of a
/// million handled ones costs one entry.
///
/// Records handled in arrival order, the common case, take one entry into `pending` and one
/// step of a count: the first `done` entries of `pending` are handled, in order, behind the
/// checkpoint, and the last of them *is* the checkpoint until the next [`track`](Self::track)
/// drops them all and keeps its sequence number. So no sequence number moves per record, only
/// one per batch. `before` is used only when records are handled out of order.
#[derive(Debug, Default)]
pub(crate) struct Watermark {
    generation: u64,
    /// Arrival index the next tracked delivery gets.
    next: u64,
    /// Deliveries by arrival index (increasing): the first `done` handled, the rest not.
    pending: VecDeque<Pending>,
    /// How many entries at the front of `pending` are handled: the handled prefix grown in
    /// arrival order since the last `track`. While it is not zero, `before` and `latest` are
    /// empty and `checkpoint` is stale: the last of them is the checkpoint.
    done: usize,
    /// For a pending delivery that is not the first and whose predecessor is handled, by the
    /// pending one's index: the predecessor's sequence number, where the checkpoint moves when
    /// the pending one becomes the first unhandled.
    before: BTreeMap<u64, SequenceNumber>,
    /// Sequence number of the last tracked delivery once it is handled (while it is pending,
    /// `pending` holds it), until the checkpoint or the next delivery takes it.
    latest: Option<SequenceNumber>,
    checkpoint: Option<SequenceNumber>,
}

#[derive(Debug)]
struct Pending {
    index: u64,
    sequence_number: SequenceNumber,
}

impl Watermark {
    /// A watermark whose checkpoint starts at `checkpoint` (the stored position, if any).
    pub(crate) fn new(checkpoint: Option<String>) -> Self {
        Self {
            checkpoint: checkpoint.as_deref().map(SequenceNumber::new),
            ..Self::default()
        }
    }

    /// Starts tracking the next delivery in arrival order. Allocates nothing for sequence
    /// numbers of Kinesis's usual length.
    pub(crate) fn track(&mut self, sequence_number: &str) -> Ticket {
        self.settle();
        let index = self.next;
        self.next += 1;
        // When the delivery before this one is handled and another is still pending in front,
        // remember where it stood. (With nothing pending, the checkpoint took it already.)
        if let Some(latest) = self.latest.take() {
            self.before.insert(index, latest);
        }
        // Written where it is kept: built first, the entry would be moved in whole.
        self.pending.push_back(Pending {
            index,
            sequence_number: SequenceNumber::EMPTY,
        });
        if let Some(entry) = self.pending.back_mut() {
            entry.sequence_number.set(sequence_number);
        }
        Ticket {
            generation: self.generation,
            index,
        }
    }

    /// Marks a delivery handled. Returns whether the handled prefix grew (the checkpoint
    /// moved). A stale ticket (from before a reset) or one already handled changes nothing.
    ///
    /// Sequence numbers are moved, never copied: each is needed in one place at a time.
    #[inline]
    pub(crate) fn mark_handled(&mut self, ticket: Ticket) -> bool {
        if ticket.generation != self.generation {
            return false;
        }
        // Records are mostly handled in order: the first unhandled one, with nothing handled
        // after it, moves the checkpoint to itself. (A record handled after the first
        // unhandled one always leaves an entry in `before` or `latest`: the end of its run.)
        if self.before.is_empty()
            && self.latest.is_none()
            && (self.pending.get(self.done)).is_some_and(|first| first.index == ticket.index)
        {
            self.done += 1;
            return true;
        }
        self.mark_out_of_order(ticket)
    }

    /// [`mark_handled`](Self::mark_handled) of any record but the first unhandled one with
    /// nothing handled after it.
    #[inline(never)]
    fn mark_out_of_order(&mut self, ticket: Ticket) -> bool {
        self.settle();
        let position = match self.pending.front() {
            Some(first) if first.index == ticket.index => 0,
            _ => match self
                .pending
                .binary_search_by_key(&ticket.index, |p| p.index)
            {
                Ok(position) => position,
                Err(_) => return false,
            },
        };
        let removed = if position == 0 {
            self.pending.pop_front()
        } else {
            self.pending.remove(position)
        };
        let Some(handled) = removed else {
            return false;
        };
        if !self.before.is_empty() {
            // Its own predecessor's position no longer counts: its own does.
            self.before.remove(&handled.index);
        }
        let successor = handled.index + 1;
        let successor_pending = self
            .pending
            .get(position)
            .is_some_and(|after| after.index == successor);
        if position != 0 {
            if successor_pending {
                self.before.insert(successor, handled.sequence_number);
            } else if successor == self.next {
                self.latest = Some(handled.sequence_number);
            }
            // Otherwise the delivery after it is handled already: its position is the one
            // that counts.
            return false;
        }
        // The first unhandled record was handled: the checkpoint moves to the end of the
        // handled run behind it.
        self.checkpoint = if successor_pending || successor == self.next {
            Some(handled.sequence_number)
        } else {
            match self.pending.front() {
                Some(first) => self.before.remove(&first.index),
                None => self.latest.take(),
            }
        };
        true
    }

    /// The sequence number of the last record of the handled prefix, if any record is handled
    /// (or a checkpoint was given at creation or reset).
    pub(crate) fn checkpoint(&self) -> Option<&str> {
        match self.done.checked_sub(1) {
            Some(last) => self.pending.get(last).map(|p| p.sequence_number.as_str()),
            None => self.checkpoint.as_ref().map(SequenceNumber::as_str),
        }
    }

    /// Deliveries tracked and not yet handled.
    pub(crate) fn in_flight(&self) -> usize {
        self.pending.len() - self.done
    }

    /// The first unhandled delivery's sequence number: where the checkpoint is held.
    pub(crate) fn held_at(&self) -> Option<&str> {
        (self.pending.get(self.done)).map(|p| p.sequence_number.as_str())
    }

    /// Whether a record tracked after `ticket` is handled already: only then does handling
    /// `ticket` move the checkpoint further than to `ticket` itself. False for a stale ticket.
    pub(crate) fn handled_after(&self, ticket: Ticket) -> bool {
        if ticket.generation != self.generation || ticket.index >= self.next {
            return false;
        }
        // The unhandled entries after `ticket`: past both `ticket` and the handled front.
        let up_to_ticket = (self.pending).partition_point(|pending| pending.index <= ticket.index);
        let pending_after = self.pending.len() - up_to_ticket.max(self.done);
        let tracked_after = self.next - ticket.index - 1;
        tracked_after > pending_after as u64
    }

    /// Drops the records handled in order since the last `track`, keeping the last one's
    /// sequence number as the checkpoint: what a pipeline does once a batch is settled, so
    /// that an idle shard keeps no handled records.
    pub(crate) fn settle(&mut self) {
        if self.done != 0 {
            self.settle_done();
        }
    }

    /// Drops the handled front of `pending`, its last sequence number kept as the checkpoint:
    /// back to the form in which `pending` holds unhandled deliveries only.
    #[inline(never)]
    fn settle_done(&mut self) {
        let Some(last) = self.done.checked_sub(1) else {
            return;
        };
        // The last handled entry's number is taken out first, so that the entries are
        // dropped where they are rather than each moved out.
        if let Some(last) = self.pending.get_mut(last) {
            let sequence_number =
                std::mem::replace(&mut last.sequence_number, SequenceNumber::EMPTY);
            self.checkpoint = Some(sequence_number);
        }
        self.pending.drain(..self.done);
        self.done = 0;
    }

    /// Starts the bookkeeping afresh (a seek): every earlier ticket becomes stale, and the
    /// checkpoint becomes `checkpoint`.
    pub(crate) fn reset(&mut self, checkpoint: Option<String>) {
        self.generation += 1;
        self.pending.clear();
        self.done = 0;
        self.before.clear();
        self.latest = None;
        self.checkpoint = checkpoint.as_deref().map(SequenceNumber::new);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Marks `ticket` handled; the new checkpoint, if it moved.
    fn mark(w: &mut Watermark, ticket: Ticket) -> Option<String> {
        w.mark_handled(ticket)
            .then(|| w.checkpoint().map(str::to_owned))
            .flatten()
    }

    #[test]
    fn moves_only_over_a_contiguous_handled_prefix() {
        let mut w = Watermark::new(None);
        let a = w.track("10");
        let b = w.track("20");
        let c = w.track("30");
        assert_eq!(mark(&mut w, b), None);
        assert_eq!(mark(&mut w, c), None);
        assert_eq!(w.checkpoint(), None);
        assert_eq!(w.held_at(), Some("10"));
        assert_eq!(mark(&mut w, a).as_deref(), Some("30"));
        assert_eq!(w.in_flight(), 0);
    }

    #[test]
    fn a_held_record_keeps_the_checkpoint_in_front_of_it() {
        let mut w = Watermark::new(Some("5".into()));
        let a = w.track("10");
        let held = w.track("20");
        let c = w.track("30");
        assert_eq!(mark(&mut w, a).as_deref(), Some("10"));
        assert_eq!(mark(&mut w, c), None);
        assert_eq!(w.checkpoint(), Some("10"));
        assert_eq!(w.held_at(), Some("20"));
        assert_eq!(mark(&mut w, held).as_deref(), Some("30"));
    }

    #[test]
    fn sequence_numbers_are_never_compared() {
        // Arrival order rules, even when the strings would sort the other way.
        let mut w = Watermark::new(None);
        let a = w.track("9");
        let b = w.track("10");
        mark(&mut w, b);
        assert_eq!(mark(&mut w, a).as_deref(), Some("10"));
    }

    #[test]
    fn tickets_from_before_a_reset_are_stale() {
        let mut w = Watermark::new(None);
        let old = w.track("10");
        w.reset(Some("3".into()));
        let new = w.track("4");
        assert_eq!(mark(&mut w, old), None);
        assert_eq!(w.checkpoint(), Some("3"));
        assert_eq!(mark(&mut w, new).as_deref(), Some("4"));
    }

    #[test]
    fn a_held_record_costs_one_entry_whatever_comes_after_it() {
        let mut w = Watermark::new(None);
        let first = w.track("1");
        let held = w.track("2");
        assert_eq!(mark(&mut w, first).as_deref(), Some("1"));
        for n in 3..100_003u64 {
            let ticket = w.track(&n.to_string());
            assert_eq!(mark(&mut w, ticket), None);
        }
        assert_eq!(w.in_flight(), 1, "only the held record is kept");
        assert_eq!(w.held_at(), Some("2"));
        assert_eq!(mark(&mut w, held).as_deref(), Some("100002"));
    }

    #[test]
    fn records_handled_out_of_order_move_it_to_the_right_place() {
        let mut w = Watermark::new(None);
        let t: Vec<Ticket> = (1..=5).map(|n| w.track(&n.to_string())).collect();
        assert_eq!(mark(&mut w, t[3]), None);
        assert_eq!(mark(&mut w, t[1]), None);
        assert_eq!(mark(&mut w, t[0]).as_deref(), Some("2"));
        assert_eq!(w.held_at(), Some("3"));
        assert_eq!(mark(&mut w, t[2]).as_deref(), Some("4"));
        let later = w.track("6");
        assert_eq!(mark(&mut w, t[4]).as_deref(), Some("5"));
        assert_eq!(mark(&mut w, later).as_deref(), Some("6"));
        assert_eq!(w.in_flight(), 0);
    }

    #[test]
    fn knows_whether_anything_after_a_record_is_handled() {
        let mut w = Watermark::new(None);
        let a = w.track("1");
        let b = w.track("2");
        assert!(!w.handled_after(a), "the record after it is pending");
        let c = w.track("3");
        mark(&mut w, c);
        assert!(w.handled_after(a) && w.handled_after(b));
        assert!(!w.handled_after(c), "nothing tracked after the last");
        w.reset(None);
        assert!(!w.handled_after(a), "stale");
    }

    #[test]
    fn records_handled_in_order_are_dropped_once_settled() {
        let mut w = Watermark::new(None);
        let tickets: Vec<Ticket> = (1..=1_000).map(|n| w.track(&n.to_string())).collect();
        for ticket in &tickets {
            assert!(w.mark_handled(*ticket));
        }
        assert_eq!((w.checkpoint(), w.in_flight()), (Some("1000"), 0));
        w.settle();
        assert_eq!(w.pending.len(), 0, "an idle shard keeps no handled record");
        assert_eq!((w.checkpoint(), w.held_at()), (Some("1000"), None));
        assert!(!w.mark_handled(tickets[999]), "handled already");
        let next = w.track("1001");
        assert!(w.mark_handled(next));
        assert_eq!(w.checkpoint(), Some("1001"));
    }

    #[test]
    fn handling_twice_changes_nothing() {
        let mut w = Watermark::new(None);
        let a = w.track("1");
        let b = w.track("2");
        assert_eq!(mark(&mut w, a).as_deref(), Some("1"));
        assert_eq!(mark(&mut w, a), None);
        assert_eq!(mark(&mut w, b).as_deref(), Some("2"));
    }

    #[test]
    fn agrees_with_the_handled_prefix_in_any_order() {
        // Deterministic pseudo-random interleavings of tracking and marking, against the
        // definition: the last record of the longest handled prefix. Half the marks take the
        // first unhandled record (the common, in-order case); some tickets are marked twice;
        // some steps settle.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut random = move |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        for _ in 0..400 {
            let mut w = Watermark::new(Some("start".into()));
            let (mut tickets, mut handled) = (Vec::new(), Vec::<bool>::new());
            for step in 0..80 {
                let before = handled.iter().take_while(|h| **h).count();
                let mut moved = false;
                if tickets.len() < 50 && (random(3) > 0 || step < 5) {
                    tickets.push(w.track(&format!("s{}", tickets.len())));
                    handled.push(false);
                } else {
                    let first_unhandled = handled.iter().position(|h| !*h);
                    let i = match first_unhandled {
                        Some(first) if random(2) == 0 => first,
                        _ => random(tickets.len()),
                    };
                    moved = w.mark_handled(tickets[i]);
                    handled[i] = true;
                }
                if random(7) == 0 {
                    // As a pipeline does once a batch is settled.
                    w.settle();
                }
                let prefix = handled.iter().take_while(|h| **h).count();
                assert_eq!(moved, prefix > before, "step {step}: whether it moved");
                let expected = match prefix {
                    0 => "start".to_owned(),
                    n => format!("s{}", n - 1),
                };
                assert_eq!(w.checkpoint(), Some(expected.as_str()));
                assert_eq!(w.in_flight(), handled.iter().filter(|h| !**h).count());
                let held = (prefix < handled.len()).then(|| format!("s{prefix}"));
                assert_eq!(w.held_at(), held.as_deref());
                for (i, ticket) in tickets.iter().enumerate() {
                    let after = handled[i + 1..].iter().any(|h| *h);
                    assert_eq!(w.handled_after(*ticket), after, "step {step}, record {i}");
                }
            }
        }
    }
}
