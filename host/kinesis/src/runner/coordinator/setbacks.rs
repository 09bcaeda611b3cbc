//! What keeps a subscription from taking leases for a while: its tenant's identity denied
//! reading the stream (IAM or the stream's KMS key), or its shard workers failing.
//!
//! - A denied **listing** (`ListShards`) stops the round before any lease is taken; every
//!   round lists again, so a policy mended is seen within a round.
//! - A denied **read** (`GetShardIterator`, `GetRecords`, `SubscribeToShard`, the fan-out
//!   consumer's calls) or a **failed worker** (a position refused, a consumer limit, a read
//!   that kept failing) ends its worker and releases the lease. The lease is then not taken
//!   back for a hold that doubles with each setback in a row ([`FIRST_HOLD`] up to
//!   [`LONGEST_HOLD`]), instead of at once, failing again in a loop (hundreds of calls a
//!   second against Kinesis and the lease table). A denial is the identity's: it holds every
//!   take of the subscription. A failure is the shard's: it holds that shard only, and the
//!   subscription's other shards are taken as usual (a reshard's failing child does not keep
//!   its siblings unread).
//! - A denial is said once (its status and one log line name the tenant, the stream and the
//!   action) and is over once a listing succeeds (a denied listing) or a reader of the
//!   subscription was answered after it (a denied read). The holds start over from the first
//!   once a reader (of the shard, for a shard's hold) was answered after the last setback.

use std::collections::HashMap;
use std::time::Duration;

use ruststream_common::backoff::Backoff;
use tokio::time::Instant;

/// The first hold after a denied read or a failed worker.
pub(super) const FIRST_HOLD: Duration = Duration::from_secs(2);
/// The longest hold: a mended policy is read by then.
pub(super) const LONGEST_HOLD: Duration = Duration::from_secs(60);

/// The setbacks of one subscription.
#[derive(Default)]
pub(super) struct Setbacks {
    /// Why its identity may not read the stream, as said; `None` when it may.
    denied: Option<String>,
    /// The identity's hold (denied reads): no lease of the subscription is taken during it.
    identity: Hold,
    /// Each failing shard's hold: its lease is not taken back during it.
    shards: HashMap<String, Hold>,
}

/// Holds that double with each setback in a row.
struct Hold {
    /// When the last setback came (ms since the epoch): a reader answered after it ends them.
    last_at_ms: Option<u64>,
    /// Nothing is taken before this.
    until: Option<Instant>,
    pauses: Backoff,
}

impl Default for Hold {
    fn default() -> Self {
        Self {
            last_at_ms: None,
            until: None,
            pauses: Backoff::new(FIRST_HOLD, LONGEST_HOLD),
        }
    }
}

impl Hold {
    fn set_back(&mut self, now_ms: u64) {
        self.last_at_ms = Some(now_ms);
        self.until = Some(Instant::now() + self.pauses.next_pause());
    }

    fn holding(&self) -> bool {
        self.until.is_some_and(|until| Instant::now() < until)
    }

    /// Whether a reader answered after the last setback (`answered_since` says): the holds
    /// start over.
    fn over(&self, answered_since: impl FnOnce(u64) -> bool) -> bool {
        self.last_at_ms.is_none_or(answered_since)
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
        self.identity.set_back(now_ms);
        self.deny(reason)
    }

    /// The worker of `shard_id` failed at `now_ms`: its lease is not taken back for the
    /// shard's next hold.
    pub(super) fn shard_failed(&mut self, shard_id: &str, now_ms: u64) {
        (self.shards.entry(shard_id.to_owned()).or_default()).set_back(now_ms);
    }

    fn deny(&mut self, reason: String) -> bool {
        let new = self.denied.as_deref() != Some(reason.as_str());
        self.denied = Some(reason);
        new
    }

    /// Whether no lease of the subscription may be taken now.
    pub(super) fn holding(&self) -> bool {
        self.identity.holding()
    }

    /// Whether the lease of `shard_id` may not be taken now.
    pub(super) fn holding_shard(&self, shard_id: &str) -> bool {
        self.shards.get(shard_id).is_some_and(Hold::holding)
    }

    /// A listing succeeded. A reader of the subscription answered after the identity's last
    /// setback (`answered_since(None, ms)` says) ends the denial; a denied listing with no
    /// setback since ends too. A reader of a failing shard answered after its last setback
    /// (`answered_since(Some(shard), ms)`) ends the shard's holds. Returns the reason of the
    /// denial that ended.
    pub(super) fn listed(
        &mut self,
        answered_since: impl Fn(Option<&str>, u64) -> bool,
    ) -> Option<String> {
        self.shards
            .retain(|shard_id, hold| !hold.over(|ms| answered_since(Some(shard_id), ms)));
        if !self.identity.over(|ms| answered_since(None, ms)) {
            return None;
        }
        self.identity = Hold::default();
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
        assert_eq!(setbacks.listed(|_, _| false), None, "not answered since");
        assert!(!setbacks.read_denied("denied".into(), 5_000), "said once");
        // The second is drawn from [2 s, 4 s].
        tokio::time::sleep(FIRST_HOLD / 2).await;
        assert!(setbacks.holding(), "the second hold is longer");
        tokio::time::sleep(FIRST_HOLD * 3 / 2).await;
        assert!(!setbacks.holding());
        assert_eq!(
            setbacks.listed(|_, since| since == 5_000),
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
        assert_eq!(
            setbacks.listed(|_, _| false),
            Some("no ListShards".to_owned())
        );
        assert_eq!(setbacks.listed(|_, _| false), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_shard_holds_its_own_take_back_and_an_answer_starts_its_holds_over() {
        let mut setbacks = Setbacks::default();
        let mut longest = Duration::ZERO;
        for n in 0..8 {
            setbacks.shard_failed("s1", n);
            assert!(
                !setbacks.holding(),
                "the subscription's other shards are taken"
            );
            assert!(!setbacks.holding_shard("s2"));
            let start = Instant::now();
            while setbacks.holding_shard("s1") {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            longest = longest.max(start.elapsed());
        }
        assert!(
            longest > LONGEST_HOLD / 2 - Duration::from_secs(1),
            "{longest:?}"
        );
        assert!(longest <= LONGEST_HOLD + Duration::from_millis(100));
        // Another shard's answer does not end s1's holds; its own does.
        let answered = |shard: Option<&str>, since: u64| shard == Some("s2") && since == 7;
        assert_eq!(setbacks.listed(answered), None, "no denial said");
        setbacks.shard_failed("s1", 8);
        assert!(setbacks.holding_shard("s1"));
        tokio::time::sleep(LONGEST_HOLD).await;
        let answered = |shard: Option<&str>, since: u64| shard == Some("s1") && since == 8;
        assert_eq!(setbacks.listed(answered), None);
        setbacks.shard_failed("s1", 100);
        let start = Instant::now();
        while setbacks.holding_shard("s1") {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            start.elapsed() <= FIRST_HOLD + Duration::from_millis(100),
            "started over"
        );
    }
}
