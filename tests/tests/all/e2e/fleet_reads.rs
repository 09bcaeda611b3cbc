//! Kinesis serves five GetRecords a second per shard to all its readers together: a fleet
//! reads each shard within that, whatever the number of hosts, tenants, apps and identities
//! reading it. A recording proxy in front of kinesis-local counts every GetRecords the hosts
//! make (kinesis-local itself never throttles, so nothing else would show an excess).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ruststream_kinesis::runner::READS_TABLE;
use ruststream_kinesis::{DynamoLeaseStore, LeaseStore as _};
use ruststream_tests::e2e::put_json_batch;
use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::guests;
use ruststream_tests::neighbour::verb;
use ruststream_tests::proxy::RecordingProxy;
use ruststream_tests::scrape::Scrape;
use ruststream_tests::wait::poll_for;
use serde_json::json;
use tokio::task::JoinHandle;

/// The window the rate is averaged over: Kinesis's limit holds for any 10 s.
const WINDOW: Duration = Duration::from_secs(10);

/// `names` each running the auditor on `ledger`, with `role_arn` when given.
fn auditors(names: &[(&str, Option<&str>)]) -> String {
    names
        .iter()
        .map(|(name, role)| {
            let role = role.map_or(String::new(), |arn| format!("role_arn = \"{arn}\""));
            format!(
                r#"
                [[tenants]]
                name = "{name}"
                components = ["{audit}"]
                subscribe = ["ledger"]
                {role}
                "#,
                audit = guests::LEDGER_AUDIT.path().display(),
            )
        })
        .collect()
}

/// Puts entries on `ledger` without a pause, ten at a time, until aborted: every read finds
/// records, so readers read back to back (an empty answer would pause them for a second).
/// Returns how many it put.
fn keep_putting(client: aws_sdk_kinesis::Client) -> (JoinHandle<()>, Arc<AtomicU64>) {
    let put = Arc::new(AtomicU64::new(0));
    let counted = put.clone();
    let task = tokio::spawn(async move {
        for batch in 0u64.. {
            let entries: Vec<_> = (0..10)
                .map(|n| json!({ "id": batch * 10 + n, "amount": 1 }))
                .collect();
            if put_json_batch(&client, "ledger", &entries).await.is_ok() {
                counted.fetch_add(10, Ordering::SeqCst);
            }
        }
    });
    (task, put)
}

/// Waits until every host says `hosts` hosts read the ledger's shard.
async fn until_shared_by(hosts: &[BinaryHost], readers: f64) -> anyhow::Result<()> {
    for host in hosts {
        let shared = poll_for(Duration::from_secs(60), async || {
            let scrape = host.scrape().await.ok()?;
            let seen = scrape.sum("ruststream_shard_reader_hosts", &[("stream", "ledger")]);
            (seen == readers).then_some(())
        })
        .await;
        anyhow::ensure!(
            shared.is_some(),
            "a host never saw {readers} readers of the shard: {}",
            host.output()
        );
    }
    Ok(())
}

/// The GetRecords calls the proxy forwarded in the [`WINDOW`] from now on.
async fn reads_in_a_window(proxy: &RecordingProxy) -> usize {
    let from = Instant::now();
    tokio::time::sleep(WINDOW).await;
    let to = Instant::now();
    proxy
        .calls("GetRecords")
        .iter()
        .filter(|call| call.at >= from && call.at <= to)
        .count()
}

/// The `reads` of the ledger's one shard in `host`'s status (its first tenant's).
async fn shard_reads(host: &BinaryHost) -> anyhow::Result<serde_json::Value> {
    let (ok, said) = verb(host, &["status", "--json"]).await?;
    anyhow::ensure!(ok, "status: {said}");
    let status: serde_json::Value = serde_json::from_str(&said)?;
    let reads = &status["tenants"][0]["apps"][0]["subscriptions"][0]["shards"][0]["reads"];
    anyhow::ensure!(reads.is_object(), "no reads in the status: {said}");
    Ok(reads.clone())
}

/// Waits until each of `tenants` has handled `count` records on `host`.
async fn handled(host: &BinaryHost, tenants: &[&str], count: u64) -> anyhow::Result<()> {
    let done = poll_for(Duration::from_secs(120), async || {
        let scrape: Scrape = host.scrape().await.ok()?;
        tenants
            .iter()
            .all(|t| scrape.sum("ruststream_records_total", &[("tenant", t)]) >= count as f64)
            .then_some(())
    })
    .await;
    anyhow::ensure!(
        done.is_some(),
        "not every tenant of {tenants:?} handled {count} records: {}",
        host.output()
    );
    Ok(())
}

/// Three hosts on one lease table, two tenants each on one 1-shard stream, all reading at
/// once: together they call GetRecords at most five times a second, each host a third of
/// that, and every tenant still handles every record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hosts_read_one_shard_at_most_five_times_a_second_together() -> anyhow::Result<()> {
    let fixture = Fixture::builder("fleet-reads")
        .stream("ledger", 1)
        .dynamo()
        .start()
        .await?;
    let proxy = RecordingProxy::start(&format!("127.0.0.1:{}", fixture.kinesis.port())).await?;
    let placed = [["t1", "t2"], ["t3", "t4"], ["t5", "t6"]];
    let mut hosts = Vec::new();
    for (name, tenants) in ["a", "b", "c"].iter().zip(&placed) {
        std::fs::create_dir_all(fixture.dir().join(name))?;
        let listed: Vec<(&str, Option<&str>)> = tenants.iter().map(|t| (*t, None)).collect();
        let file = fixture.tenants_file(&format!("{name}/tenants.toml"), &auditors(&listed))?;
        let host = fixture
            .host(&file)
            .log(&format!("{name}.log"))
            .dynamo_leases()
            .kinesis_endpoint(&proxy.endpoint())
            .owner(name)
            .start()?;
        hosts.push(host);
    }
    for host in &hosts {
        host.wait_for_log("reading shard", 2).await?;
    }
    let (putting, put) = keep_putting(fixture.client().clone());
    until_shared_by(&hosts, 3.0).await?;
    let reads = reads_in_a_window(&proxy).await;
    putting.abort();
    let rate = reads as f64 / WINDOW.as_secs_f64();
    assert!(
        rate <= 5.1,
        "the fleet read the shard {rate:.1} times a second ({reads} GetRecords in {WINDOW:?})"
    );
    assert!(rate >= 2.0, "the fleet hardly read: {rate:.1} a second");
    // Each host's status says, for the shard, that three hosts read it, that its own two
    // tenants share its turns, and how often it asked (its third of five a second).
    for host in &hosts {
        let reads = shard_reads(host).await?;
        assert_eq!(reads["fleet_hosts"], json!(3), "{reads}");
        assert_eq!(reads["subscriptions"], json!(2), "{reads}");
        let per_second = reads["get_records_per_second"].as_f64().unwrap_or(-1.0);
        assert!(
            (0.5..=1.8).contains(&per_second),
            "a third of five a second: {reads}"
        );
    }
    let put = put.load(Ordering::SeqCst);
    for (host, tenants) in hosts.iter().zip(&placed) {
        handled(host, tenants, put).await?;
    }
    for host in hosts {
        host.stop().await?;
    }
    Ok(())
}

/// One host, three tenants reading one shard with three identities (two assumed roles and the
/// host's own): the host's reads take turns from one pacing, at most five a second together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_with_their_own_roles_share_a_shard_s_five_reads_a_second() -> anyhow::Result<()> {
    let fixture = Fixture::builder("identity-reads")
        .stream("ledger", 1)
        .dynamo()
        .sts()
        .start()
        .await?;
    let proxy = RecordingProxy::start(&format!("127.0.0.1:{}", fixture.kinesis.port())).await?;
    let tenants = auditors(&[
        (
            "alpha",
            Some("arn:aws:iam::123456789012:role/tenants/alpha"),
        ),
        ("beta", Some("arn:aws:iam::123456789012:role/tenants/beta")),
        ("gamma", None),
    ]);
    let host = fixture
        .host(&fixture.tenants(&tenants)?)
        .dynamo_leases()
        .kinesis_endpoint(&proxy.endpoint())
        .args(&["--sts-endpoint", &fixture.sts().endpoint()])
        .start()?;
    host.wait_for_log("reading shard", 3).await?;
    let (putting, put) = keep_putting(fixture.client().clone());
    // Wait for reads from every identity before measuring.
    let signers = poll_for(Duration::from_secs(60), async || {
        let keys: std::collections::BTreeSet<String> = proxy
            .calls("GetRecords")
            .into_iter()
            .map(|call| call.access_key_id)
            .collect();
        (keys.len() == 3).then_some(keys)
    })
    .await;
    anyhow::ensure!(
        signers.is_some(),
        "not every identity read: {}",
        host.output()
    );
    let reads = reads_in_a_window(&proxy).await;
    putting.abort();
    let rate = reads as f64 / WINDOW.as_secs_f64();
    assert!(
        rate <= 5.1,
        "three identities read the shard {rate:.1} times a second ({reads} GetRecords in {WINDOW:?})"
    );
    let put = put.load(Ordering::SeqCst);
    handled(&host, &["alpha", "beta", "gamma"], put).await?;
    host.stop().await.map(drop)
}

/// A host that may not make tables (`create_lease_table` off) in a namespace whose reads
/// table does not exist says so once, reads on at one host's rate, and takes part in the
/// fleet's reads as soon as the table is made, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_reads_table_is_said_once_and_used_once_made() -> anyhow::Result<()> {
    let fixture = Fixture::builder("reads-table-missing")
        .stream("ledger", 1)
        .dynamo()
        .start()
        .await?;
    let dynamo = fixture.dynamo().client().await;
    DynamoLeaseStore::new(dynamo.clone(), "ruststream-solo-audit")
        .create_table_if_missing()
        .await?;
    let host = fixture
        .host(&fixture.tenants_file("tenants.toml", &auditors(&[("solo", None)]))?)
        .args(&["--lease-store", "dynamodb"])
        .start()?;
    host.wait_for_log("reading shard", 1).await?;
    host.wait_for_log("the fleet's reads table does not exist", 1)
        .await?;
    fixture
        .put_all("ledger", (0..5).map(|id| json!({ "id": id, "amount": 1 })))
        .await?;
    handled(&host, &["solo"], 5).await?;
    let said = |what: &str| host.output().matches(what).count();
    assert_eq!(
        said("the fleet's reads table does not exist"),
        1,
        "said once"
    );
    assert_eq!(
        said("ruststream.reads"),
        1,
        "no other line about the table (no failed writes): {}",
        host.output()
    );

    let reads = DynamoLeaseStore::new(dynamo, READS_TABLE);
    reads.create_table_if_missing().await?;
    host.wait_for_log("the fleet's reads table exists", 1)
        .await?;
    let announced = poll_for(Duration::from_secs(30), async || {
        let table = reads.list_all().await.ok()?;
        table
            .hosts
            .iter()
            .any(|row| row.scope.starts_with("ledger:"))
            .then_some(())
    })
    .await;
    anyhow::ensure!(
        announced.is_some(),
        "the host never announced its shard: {}",
        host.output()
    );
    host.stop().await.map(drop)
}
