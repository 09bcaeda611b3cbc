//! A host's presence among the readers of a subscription: its own row in the lease table,
//! renewed like a lease, so every host counts it in its fair share even while it holds no
//! lease (a host that just started, or every host right after a reshard).
//!
//! The row is written at once and then every renewal interval (one `UpdateItem` each); others
//! judge it live while its counter moves, as they judge leases. A graceful stop deletes it; a
//! crash leaves it to expire, and a live host deletes it once it has not moved for
//! [`FORGET_AFTER_TTLS`] lease durations.

use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tracing::Instrument as _;

use ruststream_common::escape::one_line;

use super::observed::Observed;
use crate::lease::keeper::KeeperTiming;
use crate::lease::{HostRecord, LeaseStore, PresenceKey};

/// Lease durations after which a presence row that has not moved is deleted by whoever sees
/// it: long past its expiry, so a host paused for a while is not deleted and re-added.
pub(crate) const FORGET_AFTER_TTLS: u32 = 3;

/// A presence being kept. Dropped without [`withdraw`](Self::withdraw) (the host was
/// aborted), it stops renewing at once, as a crash would, and the row expires.
pub(crate) struct Presence {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Presence {
    /// Starts announcing `key`: now, then every `timing.renew_every`.
    pub(crate) fn spawn(
        store: Arc<dyn LeaseStore>,
        key: PresenceKey,
        timing: KeeperTiming,
    ) -> Self {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(keep(store, key, timing, stopped).in_current_span());
        Self {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops announcing and deletes the row (one try, bounded by the call timeout: a row
    /// left behind expires).
    pub(crate) async fn withdraw(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Presence {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Deletes the presence rows among `hosts` (of any scope, none of `owner`'s) that have not
/// moved for `long_dead`: their hosts died without withdrawing. Each delete is conditional on
/// the counter seen, so a host that came back keeps its row.
pub(crate) async fn forget_dead(
    store: &Arc<dyn LeaseStore>,
    hosts: &[HostRecord],
    owner: &str,
    observed: &Observed,
    long_dead: std::time::Duration,
    call_timeout: std::time::Duration,
) {
    for host in hosts {
        if host.owner == owner || observed.unchanged_for(&host.key, host.counter) < long_dead {
            continue;
        }
        let key = PresenceKey::new(&host.scope, &host.owner);
        let forgotten =
            tokio::time::timeout(call_timeout, store.withdraw(&key, Some(host.counter))).await;
        if let Ok(Ok(true)) = forgotten {
            tracing::info!(presence = %key, "forgot a host that stopped without saying so");
        }
    }
}

async fn keep(
    store: Arc<dyn LeaseStore>,
    key: PresenceKey,
    timing: KeeperTiming,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut tick = tokio::time::interval(timing.renew_every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            stop = &mut stopped => {
                // Only a graceful stop withdraws; a dropped sender is a crash.
                if stop.is_ok() {
                    let withdrawn = tokio::time::timeout(timing.call_timeout, store.withdraw(&key, None)).await;
                    if !matches!(withdrawn, Ok(Ok(_))) {
                        tracing::debug!(presence = %key, "presence row not withdrawn; it will expire");
                    }
                }
                return;
            }
            _ = tick.tick() => {
                let announced = tokio::time::timeout(timing.call_timeout, store.announce(&key, timing.ttl)).await;
                match announced {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => tracing::warn!(presence = %key, error = %one_line(&error), "announcing this host failed; retrying"),
                    Err(_) => tracing::warn!(presence = %key, "announcing this host timed out; retrying"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::lease::MemoryLeaseStore;

    /// The default host's lease timing.
    fn timing() -> KeeperTiming {
        crate::HostConfig::default().keeper_timing()
    }

    async fn counter(store: &MemoryLeaseStore) -> Option<u64> {
        let table = store.list_all().await.ok()?;
        table.hosts.first().map(|h| h.counter)
    }

    #[tokio::test(start_paused = true)]
    async fn a_presence_is_renewed_each_interval_and_withdrawn_at_a_graceful_stop() {
        let store = Arc::new(MemoryLeaseStore::new());
        let presence = Presence::spawn(store.clone(), PresenceKey::new("ledger", "a"), timing());
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(counter(&store).await, Some(1), "announced at once");
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(counter(&store).await, Some(3));
        presence.withdraw().await;
        assert_eq!(counter(&store).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_presence_stops_as_a_crash_would() {
        let store = Arc::new(MemoryLeaseStore::new());
        let presence = Presence::spawn(store.clone(), PresenceKey::new("ledger", "a"), timing());
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(presence);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(
            counter(&store).await,
            Some(1),
            "left to expire, not renewed"
        );
    }
}
