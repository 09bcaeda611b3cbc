//! The taker's side of a handoff: once its request stands, it watches the lease row and takes
//! the lease as soon as the holder hands it over, rather than at its next shard sync.
//!
//! The holder learns of the request at its next renewal, stops at its next call boundary,
//! flushes its checkpoint and writes the taker as owner. The watch reads the row every
//! [`WATCH_EVERY`], so the shard goes unread for the holder's flush and handoff writes, at most
//! one watch interval, the taker's acquire and its first read. A watch is bounded (`within`,
//! a lease duration): a handoff that comes later is picked up by the next sync, which takes
//! every lease naming this host as owner.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::lease::{LeaseKey, LeaseStore};

/// How often a taker reads the row of a lease it asked for: one strongly consistent read
/// each, only while a request stands (at most a lease duration).
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(50);

/// How a watch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Watched {
    /// The row names the taker as owner: take it now.
    HandedOver,
    /// The request is gone without a handoff: the holder released or lost the lease, or
    /// another host took it.
    Withdrawn,
    /// Nothing happened within the bound.
    TimedOut,
}

/// Watches the row of `key`, which `taker` asked for, every `every` until it is handed over
/// to `taker`, the request is gone, or `within` has passed. Each read is bounded by
/// `call_timeout`; a failed read is tried again at the next interval.
pub(crate) async fn watch(
    store: Arc<dyn LeaseStore>,
    key: LeaseKey,
    taker: String,
    every: Duration,
    within: Duration,
    call_timeout: Duration,
) -> Watched {
    let deadline = Instant::now() + within;
    loop {
        tokio::time::sleep(every).await;
        if let Ok(Ok(row)) = tokio::time::timeout(call_timeout, store.read(&key)).await {
            let Some(row) = row else {
                return Watched::Withdrawn;
            };
            if row.owner.as_deref() == Some(taker.as_str()) {
                return Watched::HandedOver;
            }
            if row.wanted_by.as_deref() != Some(taker.as_str()) {
                return Watched::Withdrawn;
            }
        }
        if Instant::now() >= deadline {
            return Watched::TimedOut;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{Claim, MemoryLeaseStore};

    const TTL: Duration = Duration::from_secs(10);

    fn watching(store: &Arc<MemoryLeaseStore>, key: &LeaseKey) -> tokio::task::JoinHandle<Watched> {
        let store: Arc<dyn LeaseStore> = store.clone();
        tokio::spawn(watch(
            store,
            key.clone(),
            "b".to_owned(),
            WATCH_EVERY,
            TTL,
            Duration::from_secs(1),
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn the_taker_sees_the_handoff_within_one_interval() {
        let store = Arc::new(MemoryLeaseStore::new());
        let key = LeaseKey::new("ledger", "shard-0");
        let a = store.acquire(&key, "a", TTL, Claim::Free).await;
        let a = a.ok().flatten().expect("a free lease");
        assert_eq!(store.request_handoff(&key, "a", "b").await.ok(), Some(true));
        let watch = watching(&store, &key);
        // The holder hands over three seconds later (its next renewal, say).
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!watch.is_finished());
        assert_eq!(store.hand_off(a, "b").await.ok(), Some(true));
        let handed = Instant::now();
        assert_eq!(watch.await.ok(), Some(Watched::HandedOver));
        assert!(handed.elapsed() <= WATCH_EVERY, "{:?}", handed.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_withdraws_the_request_and_the_watch_is_bounded() {
        let store = Arc::new(MemoryLeaseStore::new());
        let key = LeaseKey::new("ledger", "shard-0");
        let a = store.acquire(&key, "a", TTL, Claim::Free).await;
        let a = a.ok().flatten().expect("a free lease");
        assert_eq!(store.request_handoff(&key, "a", "b").await.ok(), Some(true));
        let watch = watching(&store, &key);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(store.release(a).await.ok(), Some(true));
        assert_eq!(watch.await.ok(), Some(Watched::Withdrawn));

        // A holder that never hands over: the watch ends after its bound.
        let again = store.acquire(&key, "a", TTL, Claim::Free).await;
        assert!(again.ok().flatten().is_some());
        assert_eq!(store.request_handoff(&key, "a", "b").await.ok(), Some(true));
        let started = Instant::now();
        assert_eq!(watching(&store, &key).await.ok(), Some(Watched::TimedOut));
        assert!(started.elapsed() <= TTL + WATCH_EVERY);
    }
}
