//! Leases kept in the host's memory: the default store. They are gone when the process ends,
//! so a restarted host opens each shard at its subscription's start position (the tip, unless
//! the subscription says otherwise), as the seed does.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::{
    Claim, HeldLease, HostRecord, LeaseFuture, LeaseKey, LeaseRecord, LeaseStore, LeaseTable,
    PresenceKey, Renewal, expiry_ms,
};
use ruststream_common::sync::lock;

/// An in-memory lease store. Shared (behind an `Arc`) by the hosts of one process, it behaves
/// like a real store: conditions and fencing counters included.
#[derive(Debug, Default)]
pub struct MemoryLeaseStore {
    rows: Mutex<BTreeMap<String, LeaseRecord>>,
    hosts: Mutex<BTreeMap<String, HostRecord>>,
}

impl MemoryLeaseStore {
    /// An empty store: every shard opens at its subscription's start.
    pub fn new() -> Self {
        Self::default()
    }

    fn rows(&self) -> MutexGuard<'_, BTreeMap<String, LeaseRecord>> {
        lock(&self.rows)
    }

    fn hosts(&self) -> MutexGuard<'_, BTreeMap<String, HostRecord>> {
        lock(&self.hosts)
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
        // A takeover needs a row whose counter was observed; a missing row has none (as in
        // DynamoDB, where the condition fails and nothing is written).
        if matches!(claim, Claim::Observed(_)) && !rows.contains_key(&name) {
            return None;
        }
        let row = rows.entry(name.clone()).or_insert_with(|| empty_row(name));
        let allowed = match claim {
            Claim::Free => row.owner.as_deref().is_none_or(|o| o == owner),
            Claim::Observed(counter) => row.counter == counter,
        };
        if !allowed {
            return None;
        }
        row.owner = Some(owner.to_owned());
        row.expiry_ms = Some(expiry_ms(ttl));
        row.wanted_by = None;
        row.counter += 1;
        Some(HeldLease {
            key: key.clone(),
            owner: owner.to_owned(),
            counter: row.counter,
            checkpoint: row.checkpoint.clone(),
            seek_mark: row.seek_mark,
        })
    }

    /// Applies `write` to the row of `lease` if this holder still holds it; returns the row
    /// as written.
    fn held_write(
        &self,
        lease: &mut HeldLease,
        write: impl FnOnce(&mut LeaseRecord),
    ) -> Option<LeaseRecord> {
        let mut rows = self.rows();
        let row = rows.get_mut(&lease.key.to_string())?;
        if row.owner.as_deref() != Some(lease.owner.as_str()) || row.counter != lease.counter {
            return None;
        }
        write(row);
        row.counter += 1;
        lease.counter = row.counter;
        Some(row.clone())
    }
}

fn empty_row(key: String) -> LeaseRecord {
    LeaseRecord {
        key,
        owner: None,
        expiry_ms: None,
        counter: 0,
        checkpoint: None,
        wanted_by: None,
        seek_mark: None,
    }
}

impl LeaseStore for MemoryLeaseStore {
    fn describe(&self) -> String {
        "memory".to_owned()
    }

    fn list_all(&self) -> LeaseFuture<'_, LeaseTable> {
        Box::pin(async move {
            Ok(LeaseTable {
                leases: self.rows().values().cloned().collect(),
                hosts: self.hosts().values().cloned().collect(),
            })
        })
    }

    fn read<'a>(&'a self, key: &'a LeaseKey) -> LeaseFuture<'a, Option<LeaseRecord>> {
        Box::pin(async move { Ok(self.rows().get(&key.to_string()).cloned()) })
    }

    fn acquire<'a>(
        &'a self,
        key: &'a LeaseKey,
        owner: &'a str,
        ttl: Duration,
        claim: Claim,
    ) -> LeaseFuture<'a, Option<HeldLease>> {
        Box::pin(async move { Ok(self.acquire_now(key, owner, ttl, claim)) })
    }

    fn renew<'a>(&'a self, lease: &'a mut HeldLease, ttl: Duration) -> LeaseFuture<'a, Renewal> {
        Box::pin(async move {
            let row = self.held_write(lease, |row| row.expiry_ms = Some(expiry_ms(ttl)));
            Ok(Renewal {
                held: row.is_some(),
                wanted_by: row.and_then(|row| row.wanted_by),
            })
        })
    }

    fn checkpoint<'a>(
        &'a self,
        lease: &'a mut HeldLease,
        sequence: &'a str,
        ttl: Duration,
    ) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            let written = self.held_write(lease, |row| {
                row.checkpoint = Some(sequence.to_owned());
                row.expiry_ms = Some(expiry_ms(ttl));
            });
            Ok(written.is_some())
        })
    }

    fn mark_seek<'a>(
        &'a self,
        lease: &'a mut HeldLease,
        checkpoint: &'a str,
        mark: u64,
        ttl: Duration,
    ) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            let written = self.held_write(lease, |row| {
                row.checkpoint = Some(checkpoint.to_owned());
                row.seek_mark = Some(mark);
                row.expiry_ms = Some(expiry_ms(ttl));
            });
            if written.is_some() {
                lease.seek_mark = Some(mark);
            }
            Ok(written.is_some())
        })
    }

    fn release(&self, mut lease: HeldLease) -> LeaseFuture<'_, bool> {
        Box::pin(async move {
            let written = self.held_write(&mut lease, |row| {
                row.owner = None;
                row.expiry_ms = None;
                row.wanted_by = None;
            });
            Ok(written.is_some())
        })
    }

    fn request_handoff<'a>(
        &'a self,
        key: &'a LeaseKey,
        holder: &'a str,
        taker: &'a str,
    ) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            let mut rows = self.rows();
            let row = rows.get_mut(&key.to_string()).filter(|row| {
                row.owner.as_deref() == Some(holder)
                    && row.wanted_by.as_deref().is_none_or(|by| by == taker)
            });
            Ok(row
                .map(|row| row.wanted_by = Some(taker.to_owned()))
                .is_some())
        })
    }

    fn hand_off<'a>(&'a self, mut lease: HeldLease, to: &'a str) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            let written = self.held_write(&mut lease, |row| {
                row.owner = Some(to.to_owned());
                row.wanted_by = None;
            });
            Ok(written.is_some())
        })
    }

    fn announce<'a>(&'a self, presence: &'a PresenceKey, ttl: Duration) -> LeaseFuture<'a, ()> {
        Box::pin(async move {
            let key = presence.to_string();
            let mut hosts = self.hosts();
            let row = hosts.entry(key.clone()).or_insert_with(|| HostRecord {
                key,
                scope: presence.scope().to_owned(),
                owner: presence.owner().to_owned(),
                counter: 0,
                expiry_ms: None,
            });
            row.counter += 1;
            row.expiry_ms = Some(expiry_ms(ttl));
            Ok(())
        })
    }

    fn withdraw<'a>(
        &'a self,
        presence: &'a PresenceKey,
        counter: Option<u64>,
    ) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            let mut hosts = self.hosts();
            let key = presence.to_string();
            let matches = hosts
                .get(&key)
                .is_some_and(|row| counter.is_none_or(|c| c == row.counter));
            Ok(matches && hosts.remove(&key).is_some())
        })
    }

    fn seed_checkpoint<'a>(
        &'a self,
        key: &'a LeaseKey,
        checkpoint: &'a str,
        mark: Option<u64>,
    ) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            let name = key.to_string();
            let mut rows = self.rows();
            let row = rows.entry(name.clone()).or_insert_with(|| empty_row(name));
            if row.checkpoint.is_some() {
                return Ok(false);
            }
            row.checkpoint = Some(checkpoint.to_owned());
            row.seek_mark = mark.or(row.seek_mark);
            Ok(true)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::LeaseError;

    const TTL: Duration = Duration::from_secs(10);

    fn block<T>(f: LeaseFuture<'_, T>) -> Result<T, LeaseError> {
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
        assert!(!block(store.renew(&mut a, TTL))?.held);
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
        assert!(block(store.renew(&mut a, TTL))?.held);
        assert!(take(&store, &key, "b", Claim::Observed(observed)).is_none());
        Ok(())
    }

    #[test]
    fn a_handoff_is_asked_for_seen_at_renewal_and_done_by_the_holder() -> Result<(), LeaseError> {
        let store = MemoryLeaseStore::new();
        let key = LeaseKey::new("ledger", "shard-0");
        let mut a = take(&store, &key, "a", Claim::Free).expect("a free lease");
        let counter = a.counter;
        assert!(block(store.request_handoff(&key, "a", "b"))?);
        assert!(
            !block(store.request_handoff(&key, "c", "b"))?,
            "c holds nothing"
        );
        let renewal = block(store.renew(&mut a, TTL))?;
        assert!(renewal.held, "asking does not fence the holder off");
        assert_eq!(renewal.wanted_by.as_deref(), Some("b"));
        assert_eq!(a.counter, counter + 1);
        assert!(block(store.checkpoint(&mut a, "9", TTL))?);
        assert!(block(store.hand_off(a, "b"))?);
        let b = take(&store, &key, "b", Claim::Free).expect("handed over");
        assert_eq!(b.checkpoint.as_deref(), Some("9"));
        let row = block(store.read(&key))?.expect("row");
        assert_eq!(row.wanted_by, None);
        Ok(())
    }

    #[test]
    fn a_second_taker_does_not_overwrite_a_standing_request() -> Result<(), LeaseError> {
        let store = MemoryLeaseStore::new();
        let key = LeaseKey::new("ledger", "shard-0");
        let mut a = take(&store, &key, "a", Claim::Free).expect("a free lease");
        assert!(block(store.request_handoff(&key, "a", "b"))?);
        assert!(
            !block(store.request_handoff(&key, "a", "c"))?,
            "b asked first"
        );
        assert!(
            block(store.request_handoff(&key, "a", "b"))?,
            "asking again is harmless"
        );
        let renewal = block(store.renew(&mut a, TTL))?;
        assert_eq!(renewal.wanted_by.as_deref(), Some("b"));
        // Handed over, the request is gone: c may ask the new holder.
        assert!(block(store.hand_off(a, "b"))?);
        let _b = take(&store, &key, "b", Claim::Free).expect("handed over");
        assert!(block(store.request_handoff(&key, "b", "c"))?);
        Ok(())
    }

    #[test]
    fn presence_rows_are_renewed_listed_apart_and_withdrawn() -> Result<(), LeaseError> {
        let store = MemoryLeaseStore::new();
        let a = PresenceKey::new("ledger", "a");
        block(store.announce(&a, TTL))?;
        block(store.announce(&a, TTL))?;
        let table = block(store.list_all())?;
        assert!(table.leases.is_empty());
        assert_eq!(table.hosts.len(), 1);
        assert_eq!(table.hosts[0].counter, 2);
        assert_eq!(table.hosts[0].key, "#host/ledger/a");
        assert!(!block(store.withdraw(&a, Some(1)))?, "its counter moved");
        assert!(block(store.withdraw(&a, Some(2)))?);
        assert!(!block(store.withdraw(&a, None))?, "gone already");
        Ok(())
    }

    #[test]
    fn a_seeded_checkpoint_never_overwrites_one() -> Result<(), LeaseError> {
        let store = MemoryLeaseStore::new();
        let key = LeaseKey::new("ledger", "shard-1");
        assert!(block(store.seed_checkpoint(&key, "TRIM_HORIZON", None))?);
        assert!(!block(store.seed_checkpoint(&key, "AT_TIMESTAMP:5", None))?);
        let a = take(&store, &key, "a", Claim::Free).expect("free");
        assert_eq!(a.checkpoint.as_deref(), Some("TRIM_HORIZON"));
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
