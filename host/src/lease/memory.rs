//! Leases kept in the host's memory: the default store. They are gone when the process ends,
//! so a restarted host opens each shard at its subscription's start position (the tip, unless
//! the subscription says otherwise), as the seed does.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::{Claim, HeldLease, LeaseError, LeaseKey, LeaseRecord, LeaseStore, expiry_ms};
use crate::publish::BoxFuture;

/// An in-memory lease store. Shared (behind an `Arc`) by the hosts of one process, it behaves
/// like a real store: conditions and fencing counters included.
#[derive(Debug, Default)]
pub struct MemoryLeaseStore {
    rows: Mutex<BTreeMap<String, LeaseRecord>>,
}

impl MemoryLeaseStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn rows(&self) -> MutexGuard<'_, BTreeMap<String, LeaseRecord>> {
        self.rows.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn acquire_now(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
        claim: Claim,
    ) -> Option<HeldLease> {
        let name = key.to_string();
        let mut rows = self.rows();
        let row = rows.entry(name.clone()).or_insert_with(|| LeaseRecord {
            key: name,
            owner: None,
            expiry_ms: None,
            counter: 0,
            checkpoint: None,
        });
        let allowed = match claim {
            Claim::Free => row.owner.as_deref().is_none_or(|o| o == owner),
            Claim::Observed(counter) => row.counter == counter,
        };
        if !allowed {
            return None;
        }
        row.owner = Some(owner.to_owned());
        row.expiry_ms = Some(expiry_ms(ttl));
        row.counter += 1;
        Some(HeldLease {
            key: key.clone(),
            owner: owner.to_owned(),
            counter: row.counter,
            checkpoint: row.checkpoint.clone(),
        })
    }

    /// Applies `write` to the row of `lease` if this holder still holds it.
    fn held_write(&self, lease: &mut HeldLease, write: impl FnOnce(&mut LeaseRecord)) -> bool {
        let mut rows = self.rows();
        let Some(row) = rows.get_mut(&lease.key.to_string()) else {
            return false;
        };
        if row.owner.as_deref() != Some(lease.owner.as_str()) || row.counter != lease.counter {
            return false;
        }
        write(row);
        row.counter += 1;
        lease.counter = row.counter;
        true
    }
}

impl LeaseStore for MemoryLeaseStore {
    fn describe(&self) -> String {
        "memory".to_owned()
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<LeaseRecord>, LeaseError>> {
        Box::pin(async move { Ok(self.rows().values().cloned().collect()) })
    }

    fn read<'a>(
        &'a self,
        key: &'a LeaseKey,
    ) -> BoxFuture<'a, Result<Option<LeaseRecord>, LeaseError>> {
        Box::pin(async move { Ok(self.rows().get(&key.to_string()).cloned()) })
    }

    fn acquire<'a>(
        &'a self,
        key: &'a LeaseKey,
        owner: &'a str,
        ttl: Duration,
        claim: Claim,
    ) -> BoxFuture<'a, Result<Option<HeldLease>, LeaseError>> {
        Box::pin(async move { Ok(self.acquire_now(key, owner, ttl, claim)) })
    }

    fn renew<'a>(
        &'a self,
        lease: &'a mut HeldLease,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, LeaseError>> {
        Box::pin(
            async move { Ok(self.held_write(lease, |row| row.expiry_ms = Some(expiry_ms(ttl)))) },
        )
    }

    fn checkpoint<'a>(
        &'a self,
        lease: &'a mut HeldLease,
        sequence: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, LeaseError>> {
        Box::pin(async move {
            Ok(self.held_write(lease, |row| {
                row.checkpoint = Some(sequence.to_owned());
                row.expiry_ms = Some(expiry_ms(ttl));
            }))
        })
    }

    fn release(&self, mut lease: HeldLease) -> BoxFuture<'_, Result<bool, LeaseError>> {
        Box::pin(async move {
            Ok(self.held_write(&mut lease, |row| {
                row.owner = None;
                row.expiry_ms = None;
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    fn block<T>(f: BoxFuture<'_, T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime")
            .block_on(f)
    }

    fn take(
        store: &MemoryLeaseStore,
        key: &LeaseKey,
        owner: &str,
        claim: Claim,
    ) -> Option<HeldLease> {
        block(store.acquire(key, owner, TTL, claim)).expect("the memory store does not fail")
    }

    #[test]
    fn a_held_lease_fences_off_other_owners() -> Result<(), LeaseError> {
        let store = MemoryLeaseStore::new();
        let key = LeaseKey::new("ledger", "shard-0");
        let mut a = take(&store, &key, "a", Claim::Free).expect("a free lease");
        assert!(take(&store, &key, "b", Claim::Free).is_none());
        // b observed a's counter and takes the lease over; a's next writes fail.
        let b = take(&store, &key, "b", Claim::Observed(a.counter)).expect("counter matches");
        assert!(!block(store.checkpoint(&mut a, "42", TTL))?);
        assert!(!block(store.renew(&mut a, TTL))?);
        let row = block(store.read(&key))?.expect("row");
        assert_eq!(row.owner.as_deref(), Some("b"));
        assert_eq!(row.checkpoint, None);
        assert!(block(store.release(b))?);
        Ok(())
    }

    #[test]
    fn a_stale_observation_cannot_steal() -> Result<(), LeaseError> {
        let store = MemoryLeaseStore::new();
        let key = LeaseKey::new("ledger", "shard-0");
        let mut a = take(&store, &key, "a", Claim::Free).expect("a free lease");
        let observed = a.counter;
        assert!(block(store.renew(&mut a, TTL))?);
        assert!(take(&store, &key, "b", Claim::Observed(observed)).is_none());
        Ok(())
    }

    #[test]
    fn release_keeps_the_checkpoint_and_frees_the_lease() -> Result<(), LeaseError> {
        let store = MemoryLeaseStore::new();
        let key = LeaseKey::new("ledger", "shard-0");
        let mut a = take(&store, &key, "a", Claim::Free).expect("a free lease");
        assert!(block(store.checkpoint(&mut a, "7", TTL))?);
        assert!(block(store.release(a))?);
        let b = take(&store, &key, "b", Claim::Free).expect("released");
        assert_eq!(b.checkpoint.as_deref(), Some("7"));
        Ok(())
    }
}
