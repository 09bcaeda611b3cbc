//! What keeps a subscription from taking leases for a while: its tenant's identity denied
//! reading the stream (IAM or the stream's KMS key), or its shard workers failing.
//!
//! - A denied **listing** (`ListShards`) stops the round before any lease is taken; every
//!   round lists again, so a policy mended is seen within a round.
//! - A denied **read** (`GetShardIterator`, `GetRecords`, `SubscribeToShard`, the fan-out
//!   consumer's calls) or a **failed worker** (a position refused, a consumer limit, a read
//!   that kept failing) ends its worker and releases the lease. The subscription then takes
//!   no lease for a hold that doubles with each setback in a row ([`FIRST_HOLD`] up to
//!   [`LONGEST_HOLD`]), instead of taking the lease back at once and failing again in a
//!   loop (hundreds of calls a second against Kinesis and the lease table).
//! - A denial is said once (its status and one log line name the tenant, the stream and the
//!   action) and is over once a listing succeeds (a denied listing) or a reader of the
//!   subscription was answered after it (a denied read). The holds start over from the first
//!   once a reader was answered after the last setback.

use std::time::Duration;

use ruststream_runtime::backoff::Backoff;
use tokio::time::Instant;

/// The first hold after a denied read or a failed worker.
pub(super) const FIRST_HOLD: Duration = Duration::from_secs(2);
/// The longest hold: a mended policy is read by then.
pub(super) const LONGEST_HOLD: Duration = Duration::from_secs(60);

/// The setbacks of one subscription.
pub(super) struct Setbacks {
    /// Why its identity may not read the stream, as said; `None` when it may.
    denied: Option<String>,
    /// When the last setback came (ms since the epoch): a reader answered after it ends them.
    last_at_ms: Option<u64>,
    /// No lease is taken before this.
    hold_until: Option<Instant>,
    holds: Backoff,
}

impl Default for Setbacks {
    fn default() -> Self {
        Self {
            denied: None,
            last_at_ms: None,
            hold_until: None,
            holds: Backoff::new(FIRST_HOLD, LONGEST_HOLD),
        }
    }
}

impl Setbacks {
    /// The listing was denied for `reason`. Returns whether the reason is new (to be said).
    pub(super) fn listing_denied(&mut self, reason: String) -> bool {
        self.deny(reason)
    }

    /// A read was denied for `reason` at `now_ms`: no lease is taken for the next hold.
    /// Returns whether the reason is new (to be said).
    pub(super) fn read_denied(&mut self, reason: String, now_ms: u64) -> bool {
        self.failed(now_ms);
        self.deny(reason)
    }

    /// A worker failed at `now_ms`: no lease is taken for the next hold.
    pub(super) fn failed(&mut self, now_ms: u64) {
        self.last_at_ms = Some(now_ms);
        self.hold_until = Some(Instant::now() + self.holds.next_pause());
    }

    fn deny(&mut self, reason: String) -> bool {
        let new = self.denied.as_deref() != Some(reason.as_str());
        self.denied = Some(reason);
        new
    }

    /// Whether leases must not be taken now.
    pub(super) fn holding(&self) -> bool {
        self.hold_until.is_some_and(|until| Instant::now() < until)
    }

    /// A listing succeeded. A reader answered after the last setback (`answered_since` says)
    /// ends the setbacks; a denied listing with no setback since ends too. Returns the reason
    /// of the denial that ended.
    pub(super) fn listed(&mut self, answered_since: impl FnOnce(u64) -> bool) -> Option<String> {
        let answered = match self.last_at_ms {
            None => true,
            Some(at_ms) => answered_since(at_ms),
        };
        if !answered {
            return None;
        }
        self.last_at_ms = None;
        self.hold_until = None;
        self.holds.reset();
        self.denied.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_denied_read_holds_leases_back_for_longer_each_time_until_a_read_is_answered() {
        let mut setbacks = Setbacks::default();
        assert!(!setbacks.holding());
        assert!(setbacks.read_denied("denied".into(), 1_000));
        assert!(setbacks.holding(), "no lease right after a denied read");
        // Holds are drawn from [pause/2, pause]: the first is over after 2 s.
        tokio::time::sleep(FIRST_HOLD).await;
        assert!(!setbacks.holding());
        assert_eq!(setbacks.listed(|_| false), None, "not answered since");
        assert!(!setbacks.read_denied("denied".into(), 5_000), "said once");
        // The second is drawn from [2 s, 4 s].
        tokio::time::sleep(FIRST_HOLD / 2).await;
        assert!(setbacks.holding(), "the second hold is longer");
        tokio::time::sleep(FIRST_HOLD * 3 / 2).await;
        assert!(!setbacks.holding());
        assert_eq!(
            setbacks.listed(|since| since == 5_000),
            Some("denied".to_owned())
        );
        assert!(setbacks.read_denied("denied".into(), 9_000), "said again");
    }

    #[tokio::test(start_paused = true)]
    async fn a_denied_listing_takes_nothing_and_ends_with_a_listing() {
        let mut setbacks = Setbacks::default();
        assert!(setbacks.listing_denied("no ListShards".into()));
        assert!(!setbacks.listing_denied("no ListShards".into()));
        assert!(!setbacks.holding(), "the round itself stops: no hold");
        assert_eq!(setbacks.listed(|_| false), Some("no ListShards".to_owned()));
        assert_eq!(setbacks.listed(|_| false), None);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_workers_hold_takes_back_and_an_answer_starts_the_holds_over() {
        let mut setbacks = Setbacks::default();
        let mut longest = Duration::ZERO;
        for n in 0..8 {
            setbacks.failed(n);
            let start = Instant::now();
            while setbacks.holding() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            longest = longest.max(start.elapsed());
        }
        assert!(
            longest > LONGEST_HOLD / 2 - Duration::from_secs(1),
            "{longest:?}"
        );
        assert!(longest <= LONGEST_HOLD + Duration::from_millis(100));
        assert_eq!(setbacks.listed(|since| since == 7), None, "no denial said");
        setbacks.failed(100);
        let start = Instant::now();
        while setbacks.holding() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            start.elapsed() <= FIRST_HOLD + Duration::from_millis(100),
            "started over"
        );
    }
}
