//! The `LeaseStore` contract, one set of cases run against every store: the memory store and
//! DynamoDB (a local dynalite server each case starts, and fails without).
//!
//! Each case is a function of a [`Backend`], which hands out stores of separate namespaces
//! (a fresh memory store; a fresh table on the case's server). The `contract!` macro makes
//! each case a test per store: `lease_contract::memory::<case>` and
//! `lease_contract::dynamodb::<case>`. What a case asserts is what `LeaseStore`'s docs
//! promise, so a store that differs from another fails here, not in a fleet.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use ruststream_kinesis::{
    DynamoLeaseStore, LeaseStore, MemoryLeaseStore,
    lease::{Checkpoint, Claim, HeldLease, LeaseKey, PresenceKey},
};
use ruststream_runtime::{Clock as _, SystemClock};
use ruststream_tests::e2e::dynamo_store;
use ruststream_tests::servers::LocalDynamo;

const TTL: Duration = Duration::from_secs(10);

/// Where a case's stores live.
enum Backend {
    Memory,
    /// Boxed: the server's handle is large, the memory variant empty.
    Dynamo(Box<LocalDynamo>),
}

impl Backend {
    async fn dynalite() -> Result<Self> {
        let server = LocalDynamo::start()
            .await
            .context("the DynamoDB half of the lease contract needs dynalite")?;
        Ok(Self::Dynamo(Box::new(server)))
    }

    /// The store of namespace `name`: its own memory store, or its own table.
    async fn namespace(&self, name: &str) -> Result<Arc<dyn LeaseStore>> {
        Ok(match self {
            Self::Memory => Arc::new(MemoryLeaseStore::new()),
            Self::Dynamo(server) => {
                dynamo_store(server.client().await, &format!("leases-{name}")).await?
            }
        })
    }

    async fn store(&self) -> Result<Arc<dyn LeaseStore>> {
        self.namespace("app").await
    }
}

/// Makes every case a test against each store.
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $case() -> anyhow::Result<()> {
                    super::$case(super::Backend::Memory).await
                }
            )*
        }
        mod dynamodb {
            $(
                #[tokio::test]
                async fn $case() -> anyhow::Result<()> {
                    super::$case(super::Backend::dynalite().await?).await
                }
            )*
        }
    };
}

contract!(
    a_free_lease_is_taken_once_and_again_by_its_owner,
    a_seek_mark_is_stored_with_its_checkpoint_and_outlives_checkpoints,
    a_takeover_needs_the_counter_it_observed,
    a_fenced_holder_writes_nothing,
    every_write_bumps_the_counter_and_sets_an_expiry,
    a_checkpoint_outlives_its_holder,
    a_handoff_is_asked_for_seen_at_renewal_and_done_by_the_holder,
    a_handoff_request_is_conditional_and_cleared_by_a_new_owner,
    presence_rows_are_renewed_listed_apart_and_withdrawn,
    a_seeded_checkpoint_never_overwrites_one,
    namespaces_and_subscriptions_do_not_share_rows,
    racing_takers_get_one_lease_between_them,
);

fn key() -> LeaseKey {
    LeaseKey::new("ledger", "shardId-000000000000")
}

/// `owner` takes `key` under `claim`; `None` when the condition did not hold.
async fn take(
    store: &dyn LeaseStore,
    key: &LeaseKey,
    owner: &str,
    claim: Claim,
) -> Result<Option<HeldLease>> {
    Ok(store.acquire(key, owner, TTL, claim).await?)
}

async fn row(
    store: &dyn LeaseStore,
    key: &LeaseKey,
) -> Result<ruststream_kinesis::lease::LeaseRecord> {
    store
        .read(key)
        .await?
        .with_context(|| format!("{}: no row for `{key}`", store.describe()))
}

async fn a_free_lease_is_taken_once_and_again_by_its_owner(backend: Backend) -> Result<()> {
    let store = backend.store().await?;
    let store = store.as_ref();
    let key = key();
    assert_eq!(store.list().await?, Vec::new(), "{}", store.describe());
    assert_eq!(store.read(&key).await?, None);

    let a = take(store, &key, "a", Claim::Free)
        .await?
        .context("a free lease")?;
    assert_eq!((a.key.clone(), a.owner.as_str()), (key.clone(), "a"));
    assert_eq!(a.checkpoint, None);
    let stored = row(store, &key).await?;
    assert_eq!(stored.key, "ledger:shardId-000000000000");
    assert_eq!(stored.owner.as_deref(), Some("a"));
    assert_eq!(stored.counter, a.counter);

    assert_eq!(
        take(store, &key, "b", Claim::Free).await?,
        None,
        "a holds it"
    );
    // A restart with the same owner id takes its own lease back at once.
    let again = take(store, &key, "a", Claim::Free)
        .await?
        .context("its own")?;
    assert_eq!(again.counter, a.counter + 1);
    assert_eq!(store.list().await?, vec![row(store, &key).await?]);
    Ok(())
}

async fn a_takeover_needs_the_counter_it_observed(backend: Backend) -> Result<()> {
    let store = backend.store().await?;
    let store = store.as_ref();
    let key = key();
    // No row: there is no counter to observe, and nothing is created.
    assert_eq!(take(store, &key, "b", Claim::Observed(0)).await?, None);
    assert_eq!(take(store, &key, "b", Claim::Observed(3)).await?, None);
    assert_eq!(
        store.read(&key).await?,
        None,
        "a failed claim writes nothing"
    );

    let mut a = take(store, &key, "a", Claim::Free).await?.context("free")?;
    let observed = a.counter;
    assert!(store.renew(&mut a, TTL).await?.held);
    assert_eq!(
        take(store, &key, "b", Claim::Observed(observed)).await?,
        None,
        "a renewed after b observed: b's observation is stale"
    );
    let b = take(store, &key, "b", Claim::Observed(a.counter)).await?;
    let b = b.context("the counter b observed is current")?;
    assert_eq!(b.counter, a.counter + 1);
    assert_eq!(row(store, &key).await?.owner.as_deref(), Some("b"));
    Ok(())
}

async fn a_fenced_holder_writes_nothing(backend: Backend) -> Result<()> {
    let store = backend.store().await?;
    let store = store.as_ref();
    let key = key();
    let mut a = take(store, &key, "a", Claim::Free).await?.context("free")?;
    assert!(store.checkpoint(&mut a, "100", TTL).await?);
    let b = take(store, &key, "b", Claim::Observed(a.counter)).await?;
    let b = b.context("taken over")?;
    let before = row(store, &key).await?;

    let renewal = store.renew(&mut a, TTL).await?;
    assert!(!renewal.held, "{}: a was taken over", store.describe());
    assert!(!store.checkpoint(&mut a, "200", TTL).await?);
    assert!(!store.hand_off(a.clone(), "c").await?);
    assert!(!store.release(a).await?);
    assert_eq!(row(store, &key).await?, before, "nothing a wrote landed");
    assert_eq!(
        b.checkpoint.as_deref(),
        Some("100"),
        "b starts after a's last"
    );
    Ok(())
}

async fn every_write_bumps_the_counter_and_sets_an_expiry(backend: Backend) -> Result<()> {
    let store = backend.store().await?;
    let store = store.as_ref();
    let key = key();
    let before = SystemClock.now_ms();
    let mut a = take(store, &key, "a", Claim::Free).await?.context("free")?;
    let taken = row(store, &key).await?;
    let expiry = taken.expiry_ms.context("an expiry")?;
    ensure!(
        expiry >= before + TTL.as_millis() as u64,
        "expiry {expiry} is not now + ttl"
    );
    let mut counter = a.counter;
    let renewal = store.renew(&mut a, TTL).await?;
    assert!(renewal.held);
    assert_eq!(renewal.wanted_by, None);
    assert_eq!(a.counter, counter + 1);
    counter = a.counter;
    assert!(store.checkpoint(&mut a, "7", TTL).await?);
    assert_eq!(a.counter, counter + 1);
    let stored = row(store, &key).await?;
    assert_eq!(stored.counter, a.counter, "the holder's token is the row's");
    ensure!(
        stored.expiry_ms >= Some(expiry),
        "a checkpoint extends the lease"
    );
    Ok(())
}

async fn a_checkpoint_outlives_its_holder(backend: Backend) -> Result<()> {
    let store = backend.store().await?;
    let store = store.as_ref();
    let key = key();
    let mut a = take(store, &key, "a", Claim::Free).await?.context("free")?;
    assert!(
        store
            .checkpoint(
                &mut a,
                "49590338271490256608559692538361571095921575989136588802",
                TTL
            )
            .await?
    );
    assert!(store.checkpoint(&mut a, "SHARD_END", TTL).await?);
    assert!(store.release(a).await?);
    let released = row(store, &key).await?;
    assert_eq!(released.owner, None);
    assert_eq!(released.expiry_ms, None);
    assert_eq!(released.checkpoint.as_deref(), Some("SHARD_END"));
    assert_eq!(
        Checkpoint::parse(released.checkpoint.as_deref().unwrap_or_default()),
        Checkpoint::ShardEnd
    );

    let b = take(store, &key, "b", Claim::Free)
        .await?
        .context("released")?;
    assert_eq!(
        b.checkpoint.as_deref(),
        Some("SHARD_END"),
        "kept for the next"
    );
    Ok(())
}

async fn a_handoff_is_asked_for_seen_at_renewal_and_done_by_the_holder(
    backend: Backend,
) -> Result<()> {
    let store = backend.store().await?;
    let store = store.as_ref();
    let key = key();
    let mut a = take(store, &key, "a", Claim::Free).await?.context("free")?;
    let counter = a.counter;
    assert!(store.request_handoff(&key, "a", "b").await?);
    let asked = row(store, &key).await?;
    assert_eq!(asked.wanted_by.as_deref(), Some("b"));
    assert_eq!(
        asked.counter, counter,
        "asking does not fence the holder off"
    );

    let renewal = store.renew(&mut a, TTL).await?;
    assert!(renewal.held);
    assert_eq!(renewal.wanted_by.as_deref(), Some("b"));
    assert!(store.checkpoint(&mut a, "9", TTL).await?);
    assert!(store.hand_off(a, "b").await?);
    let handed = row(store, &key).await?;
    assert_eq!(handed.owner.as_deref(), Some("b"));
    assert_eq!(handed.wanted_by, None);
    assert_eq!(handed.checkpoint.as_deref(), Some("9"));

    assert_eq!(take(store, &key, "c", Claim::Free).await?, None, "b's now");
    let b = take(store, &key, "b", Claim::Free)
        .await?
        .context("handed over")?;
    assert_eq!(b.checkpoint.as_deref(), Some("9"));
    Ok(())
}

async fn a_handoff_request_is_conditional_and_cleared_by_a_new_owner(
    backend: Backend,
) -> Result<()> {
    let store = backend.store().await?;
    let store = store.as_ref();
    let key = key();
    assert!(!store.request_handoff(&key, "a", "b").await?, "no row");
    assert_eq!(
        store.read(&key).await?,
        None,
        "a refused request writes nothing"
    );

    let a = take(store, &key, "a", Claim::Free).await?.context("free")?;
    assert!(
        !store.request_handoff(&key, "c", "b").await?,
        "c holds nothing"
    );
    assert!(store.request_handoff(&key, "a", "b").await?);
    assert!(
        !store.request_handoff(&key, "a", "c").await?,
        "b asked first"
    );
    assert!(
        store.request_handoff(&key, "a", "b").await?,
        "again: harmless"
    );
    assert_eq!(row(store, &key).await?.wanted_by.as_deref(), Some("b"));

    // A release clears it.
    assert!(store.release(a).await?);
    assert_eq!(row(store, &key).await?.wanted_by, None);
    // So does a takeover.
    let c = take(store, &key, "c", Claim::Free).await?.context("free")?;
    assert!(store.request_handoff(&key, "c", "b").await?);
    let d = take(store, &key, "d", Claim::Observed(c.counter)).await?;
    assert!(d.is_some(), "the request does not change the counter");
    assert_eq!(row(store, &key).await?.wanted_by, None);
    assert!(store.request_handoff(&key, "d", "e").await?, "e may ask d");
    Ok(())
}

async fn presence_rows_are_renewed_listed_apart_and_withdrawn(backend: Backend) -> Result<()> {
    let store = backend.store().await?;
    let store = store.as_ref();
    let a = PresenceKey::new("ledger", "a");
    let b = PresenceKey::new("ledger@audit", "b");
    store.announce(&a, TTL).await?;
    store.announce(&a, TTL).await?;
    store.announce(&b, TTL).await?;
    let lease = take(store, &key(), "a", Claim::Free).await?;
    assert!(lease.is_some());

    let mut table = store.list_all().await?;
    table.hosts.sort_by(|x, y| x.key.cmp(&y.key));
    assert_eq!(table.leases.len(), 1, "{}", store.describe());
    assert_eq!(store.list().await?, table.leases, "list: leases only");
    let keys: Vec<_> = table.hosts.iter().map(|h| h.key.as_str()).collect();
    assert_eq!(keys, ["#host/ledger/a", "#host/ledger@audit/b"]);
    let first = &table.hosts[0];
    assert_eq!(
        (first.scope.as_str(), first.owner.as_str()),
        ("ledger", "a")
    );
    assert_eq!(first.counter, 2, "every announcement bumps the counter");
    ensure!(first.expiry_ms.is_some(), "an announcement sets an expiry");
    assert_eq!(table.hosts[1].scope, "ledger@audit");

    assert!(!store.withdraw(&a, Some(1)).await?, "its counter moved");
    assert!(store.withdraw(&a, Some(2)).await?);
    assert!(!store.withdraw(&a, None).await?, "gone already");
    assert!(
        store.withdraw(&b, None).await?,
        "a host's own row, whatever it holds"
    );
    assert!(store.list_all().await?.hosts.is_empty());
    Ok(())
}

async fn a_seeded_checkpoint_never_overwrites_one(backend: Backend) -> Result<()> {
    let store = backend.store().await?;
    let store = store.as_ref();
    let key = key();
    assert!(store.seed_checkpoint(&key, "TRIM_HORIZON", None).await?);
    assert!(
        !store
            .seed_checkpoint(&key, "AT_TIMESTAMP:5", Some(9))
            .await?
    );
    let seeded = row(store, &key).await?;
    assert_eq!(
        (seeded.owner, seeded.counter),
        (None, 0),
        "no owner, no write counted"
    );

    let mut a = take(store, &key, "a", Claim::Free).await?.context("free")?;
    assert_eq!(a.checkpoint.as_deref(), Some("TRIM_HORIZON"));
    assert!(store.checkpoint(&mut a, "11", TTL).await?);
    // On a held row with a checkpoint: refused, and the holder's token still holds.
    assert!(!store.seed_checkpoint(&key, "TRIM_HORIZON", None).await?);
    assert!(store.renew(&mut a, TTL).await?.held);
    let kept = row(store, &key).await?;
    assert_eq!(kept.checkpoint.as_deref(), Some("11"));
    assert_eq!(kept.seek_mark, None, "a refused seed marks nothing");
    Ok(())
}

async fn a_seek_mark_is_stored_with_its_checkpoint_and_outlives_checkpoints(
    backend: Backend,
) -> Result<()> {
    let store = backend.store().await?;
    let store = store.as_ref();
    let key = key();
    let mut a = take(store, &key, "a", Claim::Free).await?.context("free")?;
    assert_eq!(a.seek_mark, None);
    assert!(store.checkpoint(&mut a, "11", TTL).await?);
    assert!(store.mark_seek(&mut a, "TRIM_HORIZON", 1_700, TTL).await?);
    assert_eq!(a.seek_mark, Some(1_700), "the holder knows its mark");
    assert!(store.checkpoint(&mut a, "12", TTL).await?);
    let stored = row(store, &key).await?;
    assert_eq!(
        (stored.checkpoint.as_deref(), stored.seek_mark),
        (Some("12"), Some(1_700)),
        "a checkpoint write keeps the mark"
    );

    // Fenced: a holder whose lease was taken over marks nothing.
    let mut b = take(store, &key, "b", Claim::Observed(stored.counter))
        .await?
        .context("taken over")?;
    assert_eq!(
        (b.checkpoint.as_deref(), b.seek_mark),
        (Some("12"), Some(1_700)),
        "the next holder reads the mark back"
    );
    assert!(!store.mark_seek(&mut a, "TRIM_HORIZON", 1_800, TTL).await?);
    assert_eq!(row(store, &key).await?.seek_mark, Some(1_700));
    assert!(
        store
            .mark_seek(&mut b, "AT_TIMESTAMP:5", 1_800, TTL)
            .await?
    );
    assert!(store.release(b).await?);
    let after = row(store, &key).await?;
    assert_eq!(
        (after.checkpoint.as_deref(), after.seek_mark),
        (Some("AT_TIMESTAMP:5"), Some(1_800)),
        "a release keeps both"
    );

    // A child seeded by a parent that carried a seek out counts it carried out.
    let child = LeaseKey::new("ledger", "shardId-000000000009");
    assert!(
        store
            .seed_checkpoint(&child, "TRIM_HORIZON", Some(1_800))
            .await?
    );
    let c = take(store, &child, "c", Claim::Free)
        .await?
        .context("free")?;
    assert_eq!(c.seek_mark, Some(1_800));
    Ok(())
}

async fn namespaces_and_subscriptions_do_not_share_rows(backend: Backend) -> Result<()> {
    let (orders, audit) = (
        backend.namespace("orders").await?,
        backend.namespace("audit").await?,
    );
    let key = key();
    let mut a = take(orders.as_ref(), &key, "a", Claim::Free)
        .await?
        .context("free")?;
    assert!(orders.checkpoint(&mut a, "5", TTL).await?);
    orders
        .announce(&PresenceKey::new("ledger", "a"), TTL)
        .await?;
    assert_eq!(audit.read(&key).await?, None, "another app's namespace");
    assert!(audit.list_all().await?.hosts.is_empty());
    let b = take(audit.as_ref(), &key, "b", Claim::Free).await?;
    assert_eq!(b.context("free in its own namespace")?.checkpoint, None);

    // Two subscriptions of one app on one stream: one row each.
    let shared = LeaseKey::for_subscriber("ledger", "shardId-000000000000", "audit");
    assert_eq!(orders.read(&shared).await?, None);
    let s = take(orders.as_ref(), &shared, "b", Claim::Free).await?;
    assert_eq!(s.context("its own row")?.checkpoint, None);
    let mut keys: Vec<_> = orders.list().await?.into_iter().map(|r| r.key).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "ledger:shardId-000000000000",
            "ledger:shardId-000000000000@audit"
        ]
    );
    Ok(())
}

async fn racing_takers_get_one_lease_between_them(backend: Backend) -> Result<()> {
    const TAKERS: usize = 8;
    let store = backend.store().await?;
    let key = key();
    let race = async |claim: Claim| -> Result<Vec<String>> {
        let mut takers = tokio::task::JoinSet::new();
        for taker in 0..TAKERS {
            let (store, key) = (store.clone(), key.clone());
            takers.spawn(async move {
                let owner = format!("host-{taker}");
                let taken = store.acquire(&key, &owner, TTL, claim).await;
                taken.map(|held| held.map(|_| owner))
            });
        }
        let mut winners = Vec::new();
        for joined in takers.join_all().await {
            winners.extend(joined?);
        }
        Ok(winners)
    };
    let winners = race(Claim::Free).await?;
    assert_eq!(winners.len(), 1, "{}: {winners:?}", store.describe());
    let held = row(store.as_ref(), &key).await?;
    assert_eq!(held.owner.as_ref(), winners.first());

    // They all observed it unchanged; one takes it over.
    let winners = race(Claim::Observed(held.counter)).await?;
    assert_eq!(winners.len(), 1, "{}: {winners:?}", store.describe());
    let taken = row(store.as_ref(), &key).await?;
    assert_eq!(taken.owner.as_ref(), winners.first());
    assert_eq!(taken.counter, held.counter + 1);
    Ok(())
}

/// Hosts of a fleet starting together each make the lease table they share when it is
/// missing: every one of them gets it, active, whichever made it.
#[tokio::test]
async fn hosts_starting_together_all_get_the_lease_table() -> Result<()> {
    let server = LocalDynamo::start()
        .await
        .context("making the lease table needs dynalite")?;
    let client = server.client().await;
    let hosts: Vec<_> = (0..3)
        .map(|_| DynamoLeaseStore::new(client.clone(), "leases-shared"))
        .collect();
    ensure!(
        !hosts[0].table_is_active().await?,
        "the table is there before any host made it"
    );
    let (a, b, c) = tokio::join!(
        hosts[0].create_table_if_missing(),
        hosts[1].create_table_if_missing(),
        hosts[2].create_table_if_missing(),
    );
    for (host, made) in [a, b, c].into_iter().enumerate() {
        made.with_context(|| format!("host {host} could not make the table"))?;
    }
    for host in &hosts {
        ensure!(host.table_is_active().await?, "the table is not active");
    }
    // The table is one: a lease one host took is held as the others see it.
    let held = take(&hosts[0], &key(), "a", Claim::Free).await?;
    ensure!(held.is_some(), "a free lease was not taken");
    for other in &hosts[1..] {
        ensure!(
            take(other, &key(), "b", Claim::Free).await?.is_none(),
            "another host took a held lease"
        );
    }
    Ok(())
}
