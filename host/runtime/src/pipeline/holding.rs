//! Records the pipeline holds back from the component: copies read before their due time,
//! records parked while the tenant is quarantined, and held records that expire at their
//! subscription's maximum record age.

use crate::checkpoint::Ticket;
use crate::record::Delivery;

/// A copy read before its due time, waiting for it.
pub(super) struct Waiting {
    pub(super) ticket: Ticket,
    pub(super) due_at_ms: u64,
    pub(super) delivery: Delivery,
    /// When it was read: it holds the checkpoint from then on, for at most the tenant's
    /// `max_hold`, after which it is carried forward.
    since_ms: u64,
}

impl Waiting {
    /// When it must leave: due, or, when it holds the checkpoint back (see
    /// [`Holding::release`]), held as long as it may be.
    fn leaves_at(&self, max_hold_ms: u64, holds_back: bool) -> u64 {
        if !holds_back {
            return self.due_at_ms;
        }
        self.due_at_ms
            .min(self.since_ms.saturating_add(max_hold_ms))
    }
}

/// What [`Holding::release`] lets go.
pub(super) struct Released {
    /// Records parked during a quarantine that is over, in shard order.
    pub(super) unparked: Vec<(Ticket, Delivery)>,
    /// Waiting copies now due, in shard order.
    pub(super) due: Vec<(Ticket, Delivery)>,
    /// Waiting copies held for `max_hold` and not yet due: to be carried forward.
    pub(super) carry: Vec<Waiting>,
    /// Held records that reached their maximum age, in shard order.
    pub(super) expired: Vec<(Ticket, Delivery)>,
}

impl Released {
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.unparked.is_empty()
            && self.due.is_empty()
            && self.carry.is_empty()
            && self.expired.is_empty()
    }
}

/// The waiting and parked records of one shard.
#[derive(Default)]
pub(super) struct Holding {
    waiting: Vec<Waiting>,
    parked: Vec<(Ticket, Delivery)>,
    /// Held records (`retry` without attempts) and when they reach their maximum age.
    expiring: Vec<(Ticket, Delivery, u64)>,
}

impl Holding {
    /// Keeps `delivery` until `due_at_ms`, in buffers of its own (it may wait long after the
    /// rest of its answer is settled). Returns the ticket of a copy of the same chain that was
    /// waiting already: this later one supersedes it (a copy carried forward whose original
    /// was read again after a restart), so one copy of a record waits, never two.
    pub(super) fn wait(
        &mut self,
        ticket: Ticket,
        delivery: Delivery,
        due_at_ms: u64,
        now_ms: u64,
    ) -> Option<Ticket> {
        let superseded = delivery.chain().and_then(|chain| {
            let same = self
                .waiting
                .iter()
                .position(|w| w.delivery.chain() == Some(chain))?;
            Some(self.waiting.remove(same).ticket)
        });
        self.waiting.push(Waiting {
            ticket,
            due_at_ms,
            delivery: delivery.detached(),
            since_ms: now_ms,
        });
        superseded
    }

    /// Keeps a held record until `expires_at_ms`, when it is given up on; in buffers of its
    /// own, as [`wait`](Self::wait).
    pub(super) fn hold_until(&mut self, ticket: Ticket, delivery: Delivery, expires_at_ms: u64) {
        self.expiring
            .push((ticket, delivery.detached(), expires_at_ms));
    }

    /// Keeps `records` until the tenant's quarantine is lifted. They stay in their answer's
    /// buffers: a quarantine parks whole reads, not a record here and there.
    pub(super) fn park(&mut self, records: impl IntoIterator<Item = (Ticket, Delivery)>) {
        self.parked.extend(records);
    }

    /// Lets go of what may go at `now_ms`: parked records unless `quarantined`, due copies,
    /// and copies held for `max_hold_ms` that hold the checkpoint back (`holds_back`: records
    /// after them are handled, or the shard ended). Carrying forward a copy that holds nothing
    /// back would move no checkpoint and only add a record to the stream.
    pub(super) fn release(
        &mut self,
        now_ms: u64,
        max_hold_ms: u64,
        quarantined: bool,
        holds_back: impl Fn(Ticket) -> bool,
    ) -> Released {
        let unparked = if quarantined {
            Vec::new()
        } else {
            std::mem::take(&mut self.parked)
        };
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|w| w.due_at_ms <= now_ms);
        let (carry, waiting): (Vec<_>, Vec<_>) = waiting
            .into_iter()
            .partition(|w| w.leaves_at(max_hold_ms, holds_back(w.ticket)) <= now_ms);
        self.waiting = waiting;
        let (expired, expiring): (Vec<_>, Vec<_>) = std::mem::take(&mut self.expiring)
            .into_iter()
            .partition(|(_, _, at)| *at <= now_ms);
        self.expiring = expiring;
        Released {
            unparked,
            due: due.into_iter().map(|w| (w.ticket, w.delivery)).collect(),
            carry,
            expired: expired.into_iter().map(|(t, d, _)| (t, d)).collect(),
        }
    }

    /// The earliest time at which [`release`](Self::release) lets something go; `now_ms`
    /// when parked records may go at once.
    pub(super) fn next_release_ms(
        &self,
        now_ms: u64,
        max_hold_ms: u64,
        quarantined: bool,
        holds_back: impl Fn(Ticket) -> bool,
    ) -> Option<u64> {
        let waiting = self
            .waiting
            .iter()
            .map(|w| w.leaves_at(max_hold_ms, holds_back(w.ticket)));
        let parked = (!self.parked.is_empty() && !quarantined).then_some(now_ms);
        let expiring = self.expiring.iter().map(|(_, _, at)| *at);
        waiting.chain(parked).chain(expiring).min()
    }

    /// Every waiting copy, due or not (a seek carries them all forward), and the parked and
    /// held records dropped: the seek reads the shard again from elsewhere.
    pub(super) fn clear(&mut self) -> Vec<Waiting> {
        self.parked.clear();
        self.expiring.clear();
        std::mem::take(&mut self.waiting)
    }

    /// Whether records are parked.
    pub(super) fn has_parked(&self) -> bool {
        !self.parked.is_empty()
    }

    /// Copies read before their due time, waiting for it.
    pub(super) fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    use crate::checkpoint::Watermark;

    fn delivery(sequence: &str) -> Delivery {
        Delivery {
            sequence_number: sequence.into(),
            partition_key: "k".into(),
            arrival_ms: 0,
            payload: Bytes::new(),
            headers: Vec::new(),
            retry_count: 1,
            due_at_ms: None,
            copy: None,
        }
    }

    #[test]
    fn waiting_copies_leave_when_due_or_when_held_too_long() {
        let mut watermark = Watermark::new(None);
        let mut holding = Holding::default();
        holding.wait(watermark.track("1"), delivery("1"), 500, 100);
        holding.wait(watermark.track("2"), delivery("2"), 10_000, 100);
        let held_back = |_| true;
        assert_eq!(
            holding.next_release_ms(100, 1_000, false, held_back),
            Some(500)
        );
        let first = holding.release(500, 1_000, false, held_back);
        assert_eq!(first.due.len(), 1);
        assert!(first.carry.is_empty());
        assert_eq!(
            holding.next_release_ms(500, 1_000, false, held_back),
            Some(1_100)
        );
        let second = holding.release(1_100, 1_000, false, held_back);
        assert!(second.due.is_empty());
        assert_eq!(second.carry.len(), 1, "held for max_hold: carried forward");
        assert_eq!(
            holding.next_release_ms(1_100, 1_000, false, held_back),
            None
        );
    }

    #[test]
    fn a_copy_that_holds_nothing_back_waits_for_its_due_time() {
        let mut watermark = Watermark::new(None);
        let mut holding = Holding::default();
        holding.wait(watermark.track("1"), delivery("1"), 10_000, 100);
        let nothing_after = |_| false;
        assert_eq!(
            holding.next_release_ms(100, 1_000, false, nothing_after),
            Some(10_000)
        );
        assert!(
            holding
                .release(5_000, 1_000, false, nothing_after)
                .is_empty()
        );
        assert_eq!(
            holding
                .release(10_000, 1_000, false, nothing_after)
                .due
                .len(),
            1
        );
    }

    #[test]
    fn a_later_copy_of_the_same_chain_supersedes_the_waiting_one() {
        let mut watermark = Watermark::new(None);
        let mut holding = Holding::default();
        let of = |sequence: &str, chain: &str| Delivery {
            copy: Some(std::sync::Arc::new(crate::record::CopyOrigin {
                owner: crate::record::CopyOwner {
                    tenant: "t".into(),
                    app: "a".into(),
                    subscriber: "s".into(),
                },
                chain: chain.into(),
                first_arrival_ms: 0,
            })),
            ..delivery(sequence)
        };
        let first = watermark.track("1");
        assert_eq!(holding.wait(first, of("1", "shard/9"), 5_000, 100), None);
        assert_eq!(
            holding.wait(watermark.track("2"), of("2", "shard/8"), 5_000, 100),
            None
        );
        let again = holding.wait(watermark.track("3"), of("3", "shard/9"), 5_000, 200);
        assert_eq!(
            again,
            Some(first),
            "the earlier copy of the chain steps aside"
        );
        assert_eq!(holding.waiting(), 2);
    }

    #[test]
    fn records_kept_for_long_no_longer_share_their_answer() {
        let answer = Bytes::from_static(b"payload-1payload-2");
        let read = |at: usize| Delivery {
            payload: answer.slice(at..at + 9),
            ..delivery("1")
        };
        let inside = |d: &Delivery| answer.as_ptr_range().contains(&d.payload.as_ptr());
        assert!(inside(&read(0)));
        let mut watermark = Watermark::new(None);
        let mut holding = Holding::default();
        holding.wait(watermark.track("1"), read(0), 500, 100);
        holding.hold_until(watermark.track("2"), read(9), 700);
        let released = holding.release(700, 1_000, false, |_| true);
        let (waited, held) = (&released.due[0].1, &released.expired[0].1);
        assert_eq!(
            (&waited.payload[..], &held.payload[..]),
            (&b"payload-1"[..], &b"payload-2"[..])
        );
        assert!(!inside(waited) && !inside(held), "copied out of the answer");
    }

    #[test]
    fn parked_records_stay_while_quarantined() {
        let mut watermark = Watermark::new(None);
        let mut holding = Holding::default();
        holding.park([(watermark.track("1"), delivery("1"))]);
        assert_eq!(holding.next_release_ms(7, 1_000, true, |_| true), None);
        assert!(holding.release(7, 1_000, true, |_| true).is_empty());
        assert_eq!(holding.next_release_ms(7, 1_000, false, |_| true), Some(7));
        assert_eq!(holding.release(7, 1_000, false, |_| true).unparked.len(), 1);
        assert!(!holding.has_parked());
    }
}
