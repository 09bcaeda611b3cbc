//! Every host works: hosts know each other through their presence rows, a host below its share
//! takes a lease from one at the share (as KCL does), a request for a lease is conditional,
//! the taker starts a handed-over shard at once, and a reshard's children go to every live
//! host. Against kinesis-local and dynalite.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::{PutRecordsRequestEntry, ScalingType};
use ruststream_kinesis::{
    Deployment, DynamoLeaseStore, HostConfig, LeaseStore, RunningApp,
    lease::{Claim, LeaseKey, PresenceKey},
    runner::ShardState,
};
use ruststream_runtime::Outcome;
use ruststream_tests::e2e::{Servers, TestHost, put_json, quick_config};
use ruststream_tests::guests;
use ruststream_tests::reads::ReadLog;
use ruststream_tests::wait::{eventually, eventually_async};
use serde_json::json;
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(30);
/// Long enough that a taker waiting for its next sync (the code before) shows.
const SYNC: Duration = Duration::from_secs(3);
/// The hosts' read interval: the longest a shard may go unread during a handoff.
const READ_INTERVAL: Duration = Duration::from_secs(1);

fn config(owner: &str) -> HostConfig {
    let mut config = quick_config(owner);
    config.shard_sync_interval = SYNC;
    config.reader.poll_interval = READ_INTERVAL;
    config
}

/// Hosts on one stream, each reading through a client that notes its reads, sharing a lease
/// store whose client notes lease moves.
struct Fleet {
    servers: Servers,
    reads: ReadLog,
    store: Arc<DynamoLeaseStore>,
    hosts: Vec<(TestHost, RunningApp)>,
}

impl Fleet {
    async fn start(stream: &str, shards: i32, table: &str) -> anyhow::Result<Self> {
        let servers = Servers::start(stream, shards, table).await?;
        let reads = ReadLog::new();
        let dynamo = reads.dynamo_client(&servers.dynamo.endpoint()).await;
        let store = Arc::new(DynamoLeaseStore::new(dynamo, table));
        Ok(Self {
            servers,
            reads,
            store,
            hosts: Vec::new(),
        })
    }

    /// Starts `owner` running the settlement component; returns once it is started (not
    /// once it reads anything).
    async fn add(&mut self, owner: &str) -> anyhow::Result<()> {
        self.add_with(owner, config(owner)).await
    }

    /// [`add`](Self::add), with `config`.
    async fn add_with(&mut self, owner: &str, config: HostConfig) -> anyhow::Result<()> {
        let endpoint = self.servers.kinesis.endpoint();
        let client = self.reads.kinesis_client(&endpoint, owner).await;
        let host = TestHost::with_config(client, config)?;
        let component = host.load(guests::SETTLEMENT).await?;
        let app = host
            .host
            .start(Deployment::new(component, self.store.clone()))?;
        self.hosts.push((host, app));
        Ok(())
    }

    /// Shards each host reads now, in the order the hosts started.
    fn reading(&self) -> Vec<usize> {
        self.hosts
            .iter()
            .map(|(_, app)| app.status()[0].count(&ShardState::Reading))
            .collect()
    }

    /// Leases per owner in the table.
    async fn owners(&self) -> BTreeMap<String, usize> {
        let rows = self.store.list().await.unwrap_or_default();
        let mut owners = BTreeMap::new();
        for row in rows
            .into_iter()
            .filter(|r| r.checkpoint.as_deref() != Some("SHARD_END"))
        {
            if let Some(owner) = row.owner {
                *owners.entry(owner).or_insert(0) += 1;
            }
        }
        owners
    }

    /// Every sequence number handled (acknowledged) by any host, with how often.
    fn handled(&self) -> BTreeMap<String, usize> {
        let mut times = BTreeMap::new();
        for (host, _) in &self.hosts {
            for report in host.deliveries.all() {
                if report.outcome == Outcome::Ack {
                    *times.entry(report.sequence_number).or_insert(0) += 1;
                }
            }
        }
        times
    }

    async fn shutdown(self) {
        for (_, app) in &self.hosts {
            app.shutdown().await;
        }
    }
}

/// Sorted loads.
fn shape(mut loads: Vec<usize>) -> Vec<usize> {
    loads.sort_unstable();
    loads
}

/// Writes 40 records every 100 ms, partition keys all distinct so they spread over every
/// shard, until `stop`; returns every sequence number written, with when its put returned.
fn produce(
    client: aws_sdk_kinesis::Client,
    stream: &'static str,
    stop: Arc<AtomicBool>,
) -> JoinHandle<anyhow::Result<Vec<(Instant, String)>>> {
    tokio::spawn(async move {
        let mut written = Vec::new();
        let mut id = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let entries = (0..40)
                .map(|_| {
                    id += 1;
                    PutRecordsRequestEntry::builder()
                        .partition_key(format!("k{id}"))
                        .data(Blob::new(json!({"id": id, "amount": 1}).to_string()))
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = client
                .put_records()
                .stream_name(stream)
                .set_records(Some(entries))
                .send()
                .await?;
            let put = Instant::now();
            for record in out.records() {
                let sequence = record.sequence_number().map(str::to_owned);
                let sequence = sequence.ok_or_else(|| anyhow::anyhow!("not put: {record:?}"))?;
                written.push((put, sequence));
            }
            // The producer's pace, not a wait.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(written)
    })
}

/// Waits until every record written after `since` (when every shard was open) was handled,
/// then checks that no record was handled twice.
async fn every_record_once(
    fleet: &Fleet,
    written: &[(Instant, String)],
    since: Instant,
) -> anyhow::Result<()> {
    let written: BTreeSet<&String> = written
        .iter()
        .filter(|(at, _)| *at >= since)
        .map(|(_, sequence)| sequence)
        .collect();
    let all = eventually(WAIT, || {
        let handled = fleet.handled();
        written.iter().all(|s| handled.contains_key(*s))
    })
    .await;
    let handled = fleet.handled();
    let missing = written
        .iter()
        .filter(|s| !handled.contains_key(**s))
        .count();
    let statuses: Vec<_> = fleet.hosts.iter().map(|(_, app)| app.status()).collect();
    anyhow::ensure!(
        all,
        "{missing} of {} records never handled: {statuses:#?}\n{:?}",
        written.len(),
        fleet.owners().await
    );
    let twice: Vec<_> = handled.iter().filter(|(_, n)| **n > 1).collect();
    anyhow::ensure!(twice.is_empty(), "handled twice: {twice:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hosts_on_four_shards_settle_at_two_one_one_and_hand_over_at_once()
-> anyhow::Result<()> {
    let mut fleet = Fleet::start("ledger", 4, "ruststream-two-one-one").await?;
    // Records flow all along, so every shard is read every turn, not once a poll interval.
    let stop = Arc::new(AtomicBool::new(false));
    let producer = produce(fleet.servers.client.clone(), "ledger", stop.clone());

    // a takes all four, b joins and takes two: 2/2.
    fleet.add("host-a").await?;
    let all_four = eventually(WAIT, || fleet.reading() == [4]).await;
    assert!(all_four, "{:?}", fleet.reading());
    let open = Instant::now();
    fleet.add("host-b").await?;
    let two_two = eventually(WAIT, || fleet.reading() == [2, 2]).await;
    assert!(two_two, "{:?}", fleet.reading());

    // c joins: it needs two and the others hold exactly the target, so it takes one.
    fleet.add("host-c").await?;
    let joined = Instant::now();
    let settled = eventually_async(WAIT, async || {
        shape(fleet.reading()) == [1, 1, 2]
            && shape(fleet.owners().await.into_values().collect()) == [1, 1, 2]
    })
    .await;
    let took = joined.elapsed();
    println!("2/1/1 {took:?} after the third host started");
    assert!(
        settled,
        "{:?} / {:?}",
        fleet.reading(),
        fleet.owners().await
    );
    assert!(
        took <= 2 * SYNC,
        "2/1/1 after {took:?}, two sync intervals are {:?}",
        2 * SYNC
    );

    // It stays so: no lease moves for two more sync intervals (once c has read its shard, a
    // -> b twice and one to c).
    let c_reads = eventually(WAIT, || fleet.reads.handoffs().len() >= 3).await;
    assert!(c_reads, "{:#?}", fleet.reads.handoffs());
    let handoffs = fleet.reads.handoffs().len();
    let settled_at = fleet.owners().await;
    // Two more whole sync rounds of every host: a round begins with its listing, so three
    // more listings each.
    let hosts = ["host-a", "host-b", "host-c"];
    let listed: Vec<usize> = hosts.iter().map(|h| fleet.reads.listings(h)).collect();
    let two_rounds = eventually(WAIT, || {
        hosts
            .iter()
            .zip(&listed)
            .all(|(host, at)| fleet.reads.listings(host) >= at + 3)
    })
    .await;
    assert!(two_rounds, "the hosts stopped syncing: {listed:?}");
    assert_eq!(fleet.owners().await, settled_at, "a lease moved");
    assert_eq!(
        fleet.reads.handoffs().len(),
        handoffs,
        "{:#?}",
        fleet.reads.handoffs()
    );

    stop.store(true, Ordering::Relaxed);
    let written = producer.await??;
    every_record_once(&fleet, &written, open).await?;

    // Once handed over, each shard was read again within one read interval (the holder
    // stopped reading at its last call, flushed and handed over just before).
    let handoffs = fleet.reads.handoffs();
    let after: Vec<Duration> = handoffs.iter().filter_map(|h| h.after_handover).collect();
    println!(
        "handoffs: {}, read again {after:?} after the handover; between the two hosts' reads {:?}",
        handoffs.len(),
        handoffs.iter().map(|h| h.unread).collect::<Vec<_>>()
    );
    assert_eq!(after.len(), handoffs.len(), "{handoffs:#?}");
    assert!(
        after.iter().all(|gap| *gap <= READ_INTERVAL),
        "a handed-over shard went unread for more than {READ_INTERVAL:?}: {handoffs:#?}"
    );
    fleet.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_taker_does_not_overwrite_the_first_ones_request() -> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-two-takers").await?;
    let store = &servers.store;
    let key = LeaseKey::new("ledger", "shardId-000000000000");
    let ttl = Duration::from_secs(30);
    let a = store.acquire(&key, "a", ttl, Claim::Free).await?;
    let mut a = a.expect("a free lease");

    assert!(store.request_handoff(&key, "a", "b").await?, "b asks first");
    assert!(
        !store.request_handoff(&key, "a", "c").await?,
        "c gets false: b's request stands"
    );
    assert!(
        store.request_handoff(&key, "a", "b").await?,
        "b may ask again"
    );
    let row = store.read(&key).await?.expect("the row");
    assert_eq!(row.wanted_by.as_deref(), Some("b"));
    let renewal = store.renew(&mut a, ttl).await?;
    assert_eq!(renewal.wanted_by.as_deref(), Some("b"), "the holder sees b");

    // Handed over, the request is spent: c may ask the new holder.
    assert!(store.hand_off(a, "b").await?);
    let b = store.acquire(&key, "b", ttl, Claim::Free).await?;
    assert!(b.is_some(), "b takes what it was handed");
    assert!(store.request_handoff(&key, "b", "c").await?);
    assert!(
        !store.request_handoff(&key, "a", "c").await?,
        "a holds nothing"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taker_that_asked_and_died_costs_the_shard_one_lease_duration() -> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-dead-taker").await?;
    let (client, store) = (&servers.client, servers.store.clone());
    let host = TestHost::with_config(client.clone(), config("host-a"))?;
    let app = host.run(guests::SETTLEMENT, store.clone(), 1).await?;
    let (shard, _) = put_json(client, "ledger", &json!({"id": 1, "amount": 1}), None).await?;
    host.deliveries.wait_for(1, WAIT).await?;

    // A taker asks and dies before it takes anything: the holder hands the lease to it.
    let key = LeaseKey::new("ledger", &shard);
    assert!(store.request_handoff(&key, "host-a", "ghost").await?);
    let handed = app
        .wait_for(WAIT, |s| {
            s[0].count(&ShardState::HandedOver("ghost".into())) == 1
        })
        .await;
    assert!(handed, "{:#?}", app.status());
    let (_, later) = put_json(client, "ledger", &json!({"id": 2, "amount": 2}), None).await?;

    // The ghost never renews: the lease expires and the host takes the shard back, from the
    // checkpoint it flushed, so nothing is lost.
    let lease_ttl = config("host-a").lease_ttl;
    let taken_back = Instant::now();
    let again = eventually(WAIT, || {
        host.deliveries
            .all()
            .iter()
            .any(|r| r.sequence_number == later)
    })
    .await;
    assert!(again, "{:#?}", app.status());
    assert!(
        taken_back.elapsed() <= lease_ttl + SYNC + Duration::from_secs(3),
        "read again after {:?}",
        taken_back.elapsed()
    );
    assert_eq!(host.deliveries.len(), 2, "each record once");
    app.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reshard_spreads_the_children_over_every_live_host() -> anyhow::Result<()> {
    let mut fleet = Fleet::start("ledger", 4, "ruststream-reshard-spread").await?;
    for owner in ["host-a", "host-b", "host-c"] {
        // A child nobody takes for a whole lease duration is taken by any host whatever its
        // share (the coordinator's rule against unread shards): with the quick 3 s lease, a
        // loaded machine's slower rounds let one host take five children so. The share is
        // what this test checks, so the neglect must take longer than the spread does.
        let mut config = config(owner);
        config.lease_ttl = Duration::from_secs(15);
        fleet.add_with(owner, config).await?;
    }
    let opened = eventually(WAIT, || fleet.reading().iter().sum::<usize>() == 4).await;
    assert!(opened, "{:?}", fleet.reading());
    let open = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let producer = produce(fleet.servers.client.clone(), "ledger", stop.clone());
    // Something is read on every shard before the reshard.
    let flowing = eventually(WAIT, || fleet.handled().len() >= 200).await;
    assert!(flowing);

    let client = &fleet.servers.client;
    let parents: BTreeSet<String> = ruststream_kinesis::kinesis::list_shards(client, "ledger")
        .await?
        .into_iter()
        .map(|s| s.shard_id)
        .collect();
    client
        .update_shard_count()
        .stream_name("ledger")
        .target_shard_count(8)
        .scaling_type(ScalingType::UniformScaling)
        .send()
        .await?;
    let children: BTreeSet<String> = ruststream_kinesis::kinesis::list_shards(client, "ledger")
        .await?
        .into_iter()
        .filter(|s| !s.closed && !parents.contains(&s.shard_id))
        .map(|s| s.shard_id)
        .collect();
    assert_eq!(children.len(), 8, "{children:?}");

    // Every child is read, by every host, and none took more than its share of them.
    let held_children = |app: &RunningApp| -> BTreeSet<String> {
        let status = &app.status()[0];
        let held = status.shards.keys().filter(|s| children.contains(*s));
        held.cloned().collect()
    };
    let share = 8usize.div_ceil(3);
    let spread = eventually(WAIT, || {
        let reading = fleet.reading();
        reading.iter().sum::<usize>() == 8 && reading.iter().all(|n| *n >= 2)
    })
    .await;
    let ever: Vec<usize> = fleet
        .hosts
        .iter()
        .map(|(_, app)| held_children(app).len())
        .collect();
    assert!(
        spread,
        "reading {:?}, children ever held {ever:?}",
        fleet.reading()
    );
    assert!(
        ever.iter().all(|n| *n <= share),
        "a host took more than {share} children: {ever:?}"
    );
    println!(
        "children ever held per host: {ever:?}, reading {:?}",
        fleet.reading()
    );

    stop.store(true, Ordering::Relaxed);
    let written = producer.await??;
    every_record_once(&fleet, &written, open).await?;
    fleet.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_host_that_takes_nothing_leaves_no_shard_unread_and_a_dead_one_is_forgotten()
-> anyhow::Result<()> {
    let servers = Servers::start("ledger", 2, "ruststream-idle-host").await?;
    let store = servers.store.clone();
    // A host that says it reads the subscription but never takes a lease.
    let ghost = PresenceKey::new("ledger", "ghost");
    let announcing = {
        let (store, ghost) = (store.clone(), ghost.clone());
        tokio::spawn(async move {
            loop {
                let _ = store.announce(&ghost, Duration::from_secs(3)).await;
                // The ghost's renewal period, not a wait.
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let host = TestHost::with_config(servers.client.clone(), config("host-a"))?;
    let started = Instant::now();
    let app = host.run(guests::SETTLEMENT, store.clone(), 1).await?;
    // Counting the ghost, host-a's share is one shard; the other is taken once nobody has
    // taken it for a lease duration.
    let both = app
        .wait_for(WAIT, |s| s[0].count(&ShardState::Reading) == 2)
        .await;
    assert!(both, "{:#?}", app.status());
    let lease_ttl = config("host-a").lease_ttl;
    assert!(
        started.elapsed() >= lease_ttl,
        "the ghost was not counted: both taken after {:?}",
        started.elapsed()
    );

    // The ghost dies without withdrawing: a live host deletes its row a few lease durations
    // later.
    announcing.abort();
    let forgotten = eventually_async(WAIT, async || {
        let hosts = store.list_all().await.map(|t| t.hosts).unwrap_or_default();
        hosts.iter().all(|h| h.owner != "ghost") && hosts.iter().any(|h| h.owner == "host-a")
    })
    .await;
    assert!(forgotten, "{:#?}", store.list_all().await?.hosts);
    app.shutdown().await;
    let hosts = store.list_all().await?.hosts;
    assert!(hosts.is_empty(), "withdrawn at a graceful stop: {hosts:#?}");
    Ok(())
}
