//! Counted copies on their way to a stream. The original of a copy holds the checkpoint until
//! the stream has acknowledged the copy; a failed publish is retried with backoff, and a copy
//! that can never be published is given up with an error, its original held.

use std::time::Duration;

use super::lines::RuntimeLog;
use crate::checkpoint::Ticket;
use crate::clock::millis;
use crate::env::Env;
use crate::log::Level;
use crate::record::OutgoingRecord;
use ruststream_common::backoff::Backoff;

/// First and largest pause between attempts to publish a counted copy.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// A counted copy not yet in its stream.
pub(super) struct UnsentCopy {
    ticket: Ticket,
    /// The record it copies, for log lines.
    original_sequence: String,
    target: String,
    record: OutgoingRecord,
    backoff: Backoff,
    next_try_ms: u64,
    /// Its original's ticket went stale in a seek: until the copy is in the stream, nothing
    /// after the seek may be stored as the checkpoint (a crash would skip the original).
    pinned: bool,
}

impl UnsentCopy {
    /// `record`, the copy of the record `original_sequence` (tracked as `ticket`), for `target`.
    pub(super) fn new(
        ticket: Ticket,
        original_sequence: String,
        target: String,
        record: OutgoingRecord,
    ) -> Self {
        Self {
            ticket,
            original_sequence,
            target,
            record,
            backoff: Backoff::new(RETRY_FIRST, RETRY_MAX),
            next_try_ms: 0,
            pinned: false,
        }
    }

    /// The same copy, pinning the checkpoint until it is in the stream (see
    /// [`Outbox::pin_all`]).
    pub(super) fn pinned(mut self) -> Self {
        self.pinned = true;
        self
    }

    /// The stream it goes to.
    pub(super) fn target(&self) -> &str {
        &self.target
    }
}

/// The copies of one shard still to publish.
#[derive(Default)]
pub(super) struct Outbox {
    unsent: Vec<UnsentCopy>,
    /// Pinned copies given up for good: the checkpoint stays pinned until the lease is next
    /// taken, when the originals are read again.
    stuck_pins: usize,
}

impl Outbox {
    /// Pins every copy still owed: their originals' tickets are going stale (a seek), so
    /// nothing marks those originals handled any more; only the stored checkpoint from before
    /// the seek still keeps them. See [`is_pinned`](Self::is_pinned).
    pub(super) fn pin_all(&mut self) {
        for copy in &mut self.unsent {
            copy.pinned = true;
        }
    }

    /// Whether a checkpoint must not be stored now: a copy whose original went stale in a
    /// seek is not in its stream yet.
    pub(super) fn is_pinned(&self) -> bool {
        self.stuck_pins > 0 || self.unsent.iter().any(|copy| copy.pinned)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.unsent.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.unsent.len()
    }

    /// What the unsent copies weigh, as their streams count it.
    pub(super) fn bytes(&self) -> u64 {
        self.unsent
            .iter()
            .map(|copy| copy.record.stream_size())
            .sum()
    }

    /// Adds `copy`, to be tried at once.
    pub(super) fn push(&mut self, copy: UnsentCopy) {
        self.unsent.push(copy);
    }

    /// When the next copy may be tried.
    pub(super) fn next_try_ms(&self) -> Option<u64> {
        self.unsent.iter().map(|u| u.next_try_ms).min()
    }

    /// The copies whose pause is over at `now_ms`.
    pub(super) fn take_due(&mut self, now_ms: u64) -> Vec<UnsentCopy> {
        let (due, later) = std::mem::take(&mut self.unsent)
            .into_iter()
            .partition(|u| u.next_try_ms <= now_ms);
        self.unsent = later;
        due
    }

    /// Every copy, its pause over or not.
    pub(super) fn take_all(&mut self) -> Vec<UnsentCopy> {
        std::mem::take(&mut self.unsent)
    }

    /// Publishes `copy` within the tenant's write quota. Returns its original's ticket once
    /// the stream has the copy; otherwise the copy is kept for a later try (quota spent, or a
    /// failure that may pass), or given up (it can never be published) with an error line.
    pub(super) async fn send(
        &mut self,
        mut copy: UnsentCopy,
        env: &Env,
        log: &RuntimeLog,
    ) -> Option<Ticket> {
        let now = env.clock.now_ms();
        if let Err(wait) = env
            .policy
            .write_quota()
            .take(now, copy.record.stream_size())
        {
            copy.next_try_ms = now.saturating_add(millis(wait));
            self.unsent.push(copy);
            return None;
        }
        let result = env
            .publisher
            .publish(&copy.target, copy.record.clone())
            .await;
        let error = match result {
            Ok(_) => return Some(copy.ticket),
            Err(error) => error,
        };
        let sequence = Some(copy.original_sequence.as_str());
        if !error.can_succeed_later() {
            self.stuck_pins += usize::from(copy.pinned);
            let message = format!(
                "the copy for `{}` can never be published ({error}); the original stays \
                 unhandled and holds the checkpoint until the shard's lease is next taken",
                copy.target
            );
            log.emit("copy-failed", log.about(Level::Error, sequence, message));
            return None;
        }
        let pause = copy.backoff.next_pause();
        copy.next_try_ms = env.clock.now_ms().saturating_add(millis(pause));
        let message = format!(
            "publishing the copy to `{}` failed ({error}); the original holds the checkpoint, \
             next try in {pause:?}",
            copy.target
        );
        let mut line = log.about(Level::Error, sequence, message);
        line.fields
            .push(("tries".into(), copy.backoff.failures().to_string()));
        log.emit("copy-failed", line);
        self.unsent.push(copy);
        None
    }
}
