//! Where a redrive stands, kept in a lease store as a subscription's checkpoints are.
//!
//! A redrive `id` of dead-letter stream `dls` keeps one row per shard of `dls`, keyed
//! `dls:shard@#redrive/id`, and one row of what it was started with, keyed
//! `dls:#redrive@id`. A subscription's keys are `stream:shard` or `stream:shard@subscriber`
//! (a subscriber name holds no `#`), and redrives keep their rows in a table of their own
//! besides, so none is ever a subscription's.
//!
//! A shard's row is a lease like a subscription's (owner, fencing counter) whose checkpoint is
//! this module's [`ShardProgress`], as JSON: every dead letter up to `done` is settled
//! (redriven or skipped), and an [`Intent`] says a batch after it is being written. The intent
//! is stored **before** the batch is published, so a run that died after publishing and before
//! its checkpoint leaves the intent behind, and the next run looks for what it wrote instead
//! of writing it again.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::filter::RedriveFilter;
use super::{RedriveError, Refused};
use crate::lease::{Claim, HeldLease, LeaseKey, LeaseStore};

/// The key of a shard's progress row.
pub(crate) fn shard_key(dls: &str, shard_id: &str, id: &str) -> LeaseKey {
    LeaseKey::for_subscriber(dls, shard_id, &format!("#redrive/{id}"))
}

/// The key of the row of what the redrive was started with.
pub(crate) fn start_key(dls: &str, id: &str) -> LeaseKey {
    LeaseKey::for_subscriber(dls, "#redrive", id)
}

/// What a redrive was started with: a run that resumes it keeps to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedriveStart {
    /// The filter, its `until` set (to the first run's start, when none was given).
    pub filter: RedriveFilter,
    /// When the first run started (ms since the epoch).
    pub started_ms: u64,
}

/// A batch being written: the dead letters after `done` up to `last`, published from
/// `from_ms` on (this host's clock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// The batch's last record in the dead-letter shard.
    pub last: String,
    /// When its first publish may have started (ms since the epoch).
    pub from_ms: u64,
}

/// Where one shard of the dead-letter stream stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardProgress {
    /// Every record up to this one is settled; `None`: none yet.
    pub done: Option<String>,
    /// A batch after `done` that may be partly written.
    pub intent: Option<Intent>,
    /// The shard is settled up to the redrive's `until` (or its end).
    pub finished: bool,
    /// Dead letters written back.
    pub redriven: u64,
    /// Dead letters refused, by reason ([`SkipReason::label`](super::filter::SkipReason::label)).
    pub skipped: BTreeMap<String, u64>,
    /// The first refused ones, listed.
    #[serde(default)]
    pub refused: Vec<Refused>,
}

impl ShardProgress {
    /// Reads a stored checkpoint; none is a shard not started.
    ///
    /// # Errors
    /// [`RedriveError::Progress`] naming the row when it is not a redrive's.
    pub(crate) fn parse(key: &LeaseKey, stored: Option<&str>) -> Result<Self, RedriveError> {
        stored.map_or(Ok(Self::default()), |text| {
            serde_json::from_str(text).map_err(|error| RedriveError::Progress {
                key: key.to_string(),
                reason: error.to_string(),
            })
        })
    }

    fn to_checkpoint(&self) -> String {
        // Strings, numbers and maps with string keys: it always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A shard's progress row, held.
pub(crate) struct HeldProgress {
    lease: HeldLease,
    /// Where the shard stands, as last stored.
    pub(crate) progress: ShardProgress,
}

impl HeldProgress {
    /// Takes the row of `key` for `owner`. A row another run holds is taken once its counter
    /// has not moved for `ttl` (that run is gone), as a subscription's lease is.
    ///
    /// # Errors
    /// The store failed; the row is not a redrive's.
    pub(crate) async fn take(
        store: &dyn LeaseStore,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<Self, RedriveError> {
        loop {
            if let Some(lease) = store.acquire(key, owner, ttl, Claim::Free).await? {
                return Self::held(key, lease);
            }
            let Some(seen) = store.read(key).await? else {
                continue;
            };
            tracing::info!(%key, holder = ?seen.owner, ?ttl,
                "another run holds this redrive's shard: waiting for it to renew or expire");
            tokio::time::sleep(ttl).await;
            let still = store.read(key).await?;
            if still
                .as_ref()
                .is_some_and(|row| row.counter == seen.counter)
                && let Some(lease) = store
                    .acquire(key, owner, ttl, Claim::Observed(seen.counter))
                    .await?
            {
                return Self::held(key, lease);
            }
        }
    }

    fn held(key: &LeaseKey, lease: HeldLease) -> Result<Self, RedriveError> {
        let progress = ShardProgress::parse(key, lease.checkpoint.as_deref())?;
        Ok(Self { lease, progress })
    }

    /// Stores `progress` (and extends the lease).
    ///
    /// # Errors
    /// [`RedriveError::LeaseLost`] when another run took the row: nothing was stored.
    pub(crate) async fn store(
        &mut self,
        store: &dyn LeaseStore,
        progress: ShardProgress,
        ttl: Duration,
    ) -> Result<(), RedriveError> {
        let text = progress.to_checkpoint();
        if !store.checkpoint(&mut self.lease, &text, ttl).await? {
            return Err(RedriveError::LeaseLost(self.lease.key.to_string()));
        }
        self.progress = progress;
        Ok(())
    }

    /// Gives the row up, keeping what it says.
    ///
    /// # Errors
    /// The store failed.
    pub(crate) async fn release(self, store: &dyn LeaseStore) -> Result<(), RedriveError> {
        store.release(self.lease).await?;
        Ok(())
    }
}

/// What the redrive of `key` was started with: the stored start, or, at its first run,
/// `given` started at `now_ms` (its `until` then `now_ms` unless given), stored now.
///
/// # Errors
/// The store failed; the stored start is not readable; it was started with another filter
/// (a redrive named with `--id` again, with other options).
pub(crate) async fn start(
    store: &dyn LeaseStore,
    key: &LeaseKey,
    given: &RedriveFilter,
    now_ms: u64,
) -> Result<RedriveStart, RedriveError> {
    let fresh = RedriveStart {
        filter: RedriveFilter {
            until_ms: given.until_ms.or(Some(now_ms)),
            ..given.clone()
        },
        started_ms: now_ms,
    };
    let text = serde_json::to_string(&fresh).unwrap_or_default();
    store.seed_checkpoint(key, &text, None).await?;
    let unreadable = |reason: String| RedriveError::Progress {
        key: key.to_string(),
        reason,
    };
    let stored = store
        .read(key)
        .await?
        .and_then(|row| row.checkpoint)
        .ok_or_else(|| unreadable("its start was written but reads back empty".into()))?;
    let stored: RedriveStart =
        serde_json::from_str(&stored).map_err(|error| unreadable(error.to_string()))?;
    let mut asked = given.clone();
    if asked.until_ms.is_none() {
        asked.until_ms = stored.filter.until_ms;
    }
    if asked != stored.filter {
        return Err(RedriveError::OtherFilter {
            key: key.to_string(),
            stored: Box::new(stored.filter),
        });
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::MemoryLeaseStore;
    use crate::redrive::filter::SkipReason;

    #[tokio::test]
    async fn progress_round_trips_and_a_second_run_keeps_the_first_runs_start()
    -> Result<(), RedriveError> {
        let store = MemoryLeaseStore::new();
        let key = shard_key("orders.dead", "shardId-0", "rd-1");
        assert_eq!(key.to_string(), "orders.dead:shardId-0@#redrive/rd-1");
        let ttl = Duration::from_secs(10);
        let mut held = HeldProgress::take(&store, &key, "run-1", ttl).await?;
        assert_eq!(held.progress, ShardProgress::default());
        let progress = ShardProgress {
            done: Some("41".into()),
            intent: Some(Intent {
                last: "99".into(),
                from_ms: 5,
            }),
            skipped: BTreeMap::from([(SkipReason::NotGranted.label().to_owned(), 2)]),
            ..ShardProgress::default()
        };
        held.store(&store, progress.clone(), ttl).await?;
        held.release(&store).await?;
        let again = HeldProgress::take(&store, &key, "run-2", ttl).await?;
        assert_eq!(again.progress, progress);

        let start_key = start_key("orders.dead", "rd-1");
        let first = start(&store, &start_key, &RedriveFilter::default(), 1_000).await?;
        assert_eq!(first.filter.until_ms, Some(1_000), "until its first start");
        let later = start(&store, &start_key, &RedriveFilter::default(), 9_000).await?;
        assert_eq!(later, first, "a second run keeps to the first's bounds");
        let other = RedriveFilter {
            tenant: Some("acme".into()),
            ..RedriveFilter::default()
        };
        assert!(matches!(
            start(&store, &start_key, &other, 9_000).await,
            Err(RedriveError::OtherFilter { .. })
        ));
        Ok(())
    }
}
