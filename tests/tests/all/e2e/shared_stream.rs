//! Many readers of one stream, through the binary on kinesis-local and DynamoDB-local: two
//! subscriptions of one app (`acme`'s `shared-ledger`: `reconcile` with `max_attempts` and a
//! dead letter, `defer` with `retry_after(15 min)` carried forward past a 2 s `max_hold`) and
//! a second tenant (`globex`'s `strict-ledger`, one attempt, its own dead letter) all read
//! `ledger`. Each copy must reach only the subscription that made it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use ruststream_host::{DynamoLeaseStore, LeaseStore};
use ruststream_runtime::dead_letter::DeadLetterOrigin;
use ruststream_tests::e2e::{ReadBack, put_json, read_all};
use ruststream_tests::guests;
use ruststream_tests::http::http;
use ruststream_tests::process::{Running, metrics_addr, run_host};
use ruststream_tests::scrape::Scrape;
use ruststream_tests::servers::{LocalDynamo, LocalKinesis};
use ruststream_tests::wait::{eventually, eventually_async, poll_for};
use serde_json::{Value, json};

const REFUNDS: u64 = 5;
const PAYMENTS: u64 = 30;
const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_copy_reaches_only_the_subscription_that_made_it() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    for stream in ["ledger", "ledger.dead", "ledger.strict-dead"] {
        kinesis.create_stream(stream, 1).await?;
    }
    let host = Host::start(&kinesis, &dynamo).await?;
    let client = kinesis.client().await;

    // Refunds among payments, written over a few seconds: the waiting copies of `defer` are
    // carried forward while payments are handled behind them.
    for id in 1..=PAYMENTS {
        let amount = if id % (PAYMENTS / REFUNDS) == 0 {
            -5
        } else {
            10
        };
        put_json(
            &client,
            "ledger",
            &json!({ "id": id, "amount": amount }),
            None,
        )
        .await?;
        // The producer's pace, not a wait.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let refunds: BTreeSet<u64> = (1..=PAYMENTS)
        .filter(|id| id % (PAYMENTS / REFUNDS) == 0)
        .collect();

    // Every reader gets its own records, and its own copies only.
    let done = eventually(WAIT, || {
        let seen = host.seen();
        seen.get("strict").map_or(0, Vec::len) as u64 >= PAYMENTS
            && seen.get("reconcile").map_or(0, Vec::len) as u64 >= PAYMENTS + 2 * REFUNDS
            && seen.get("defer").map_or(0, Vec::len) as u64 >= PAYMENTS
    })
    .await;
    anyhow::ensure!(done, "not every record was seen: {:?}", host.seen());
    let seen = host.seen();
    let attempts = |subscriber: &str, id: u64| -> Vec<u64> {
        let all = seen.get(subscriber).cloned().unwrap_or_default();
        all.into_iter()
            .filter(|(i, _)| *i == id)
            .map(|(_, a)| a)
            .collect()
    };
    for id in 1..=PAYMENTS {
        assert_eq!(attempts("strict", id), [1], "globex's strict, entry {id}");
        assert_eq!(attempts("defer", id), [1], "acme's defer, entry {id}");
        let expected: &[u64] = if refunds.contains(&id) {
            &[1, 2, 3]
        } else {
            &[1]
        };
        assert_eq!(
            attempts("reconcile", id),
            expected,
            "acme's reconcile, entry {id}"
        );
    }

    // Each dead-letter stream holds its own subscription's records, with its own counts.
    let dead = wait_for_records(&client, "ledger.dead", REFUNDS as usize).await?;
    let strict_dead = wait_for_records(&client, "ledger.strict-dead", REFUNDS as usize).await?;
    for (letters, subscriber, tenant, attempts) in [
        (&dead, "reconcile", "acme", 3),
        (&strict_dead, "strict", "globex", 1),
    ] {
        assert_eq!(letters.len() as u64, REFUNDS, "{subscriber}");
        for letter in letters.iter() {
            let origin = DeadLetterOrigin::from_headers(&letter.envelope().headers)
                .ok_or_else(|| anyhow::anyhow!("a dead letter without its origin"))?;
            assert_eq!(
                (
                    origin.subscriber.as_str(),
                    origin.tenant.as_str(),
                    origin.attempts
                ),
                (subscriber, tenant, attempts)
            );
        }
    }

    // The stream grows by the carries of one copy per refund, not by doubling: once the
    // producer stops, nothing is handled behind the waiting copies and carrying stops.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ledger = read_all(&client, "ledger").await?;
    let defer_copies = copies_for(&ledger, "acme/shared-ledger/defer");
    let written_for = Duration::from_millis(200 * PAYMENTS + 3_000 + 5_000);
    let carries_at_most = REFUNDS * (written_for.as_secs() / 2 + 2);
    assert!(
        defer_copies as u64 <= carries_at_most,
        "{defer_copies} copies of {REFUNDS} waiting refunds"
    );
    assert_eq!(
        copies_for(&ledger, "acme/shared-ledger/reconcile") as u64,
        2 * REFUNDS
    );
    assert_eq!(
        ledger.len(),
        PAYMENTS as usize + 2 * REFUNDS as usize + defer_copies,
        "nothing but originals and acme's copies"
    );

    // globex's checkpoint passes every copy of acme's: none holds it.
    let last = ledger.last().map(|r| r.sequence_number.clone());
    let store = DynamoLeaseStore::new(dynamo.client().await, "ruststream-globex-strict._ledger");
    let passed = eventually_async(WAIT, async || {
        let rows = store.list().await.unwrap_or_default();
        rows.first().and_then(|r| r.checkpoint.clone()) == last
    })
    .await;
    let now = read_all(&client, "ledger").await?;
    assert!(
        passed,
        "globex's checkpoint never reached the stream's last record {last:?} ({} records, now {}): {:?}",
        ledger.len(),
        now.len(),
        store.list().await?
    );

    let scrape = host.scrape().await?;
    let skipped = |tenant| {
        scrape.sum(
            "ruststream_foreign_copies_skipped_total",
            &[("tenant", tenant)],
        )
    };
    assert!(
        skipped("globex") >= (2 * REFUNDS as usize + defer_copies) as f64,
        "globex moved past acme's copies"
    );
    assert!(
        skipped("acme") >= 2.0 * REFUNDS as f64,
        "acme's subscriptions past each other's"
    );
    Ok(())
}

fn copies_for(stream: &[ReadBack], owner: &str) -> usize {
    stream
        .iter()
        .filter(|r| {
            r.envelope().copy.is_some_and(|copy| {
                format!(
                    "{}/{}/{}",
                    copy.owner.tenant, copy.owner.app, copy.owner.subscriber
                ) == owner
            })
        })
        .count()
}

async fn wait_for_records(
    client: &aws_sdk_kinesis::Client,
    stream: &str,
    count: usize,
) -> anyhow::Result<Vec<ReadBack>> {
    poll_for(WAIT, async || {
        let records = read_all(client, stream).await.ok()?;
        (records.len() >= count).then_some(records)
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("`{stream}` never held {count} records"))
}

struct Host {
    _running: Running,
    log: PathBuf,
}

impl Host {
    async fn start(kinesis: &LocalKinesis, dynamo: &LocalDynamo) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("ruststream-shared-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let config = dir.join("tenants.toml");
        std::fs::write(
            &config,
            format!(
                r#"
                [host]
                lease_store = "dynamodb"
                create_lease_table = true

                [[tenants]]
                name = "acme"
                components = ["{shared}"]
                subscribe = ["ledger"]
                publish = ["ledger.dead"]
                limits = {{ max_hold_ms = 2000 }}

                [[tenants]]
                name = "globex"
                components = ["{strict}"]
                subscribe = ["ledger"]
                publish = ["ledger.strict-dead"]
                "#,
                shared = guests::SHARED_LEDGER.path().display(),
                strict = guests::STRICT_LEDGER.path().display(),
            ),
        )?;
        let log = dir.join("host.log");
        let endpoint = dynamo.endpoint();
        let args = ["--dynamodb-endpoint", &endpoint, "--log-format", "json"];
        let host = Self {
            _running: run_host(&config, kinesis, &log, &args)?,
            log,
        };
        let reading =
            eventually(WAIT, || host.output().matches("reading shard").count() >= 3).await;
        anyhow::ensure!(reading, "shards never opened: {}", host.output());
        Ok(host)
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// (entry id, attempt) of every record each subscriber's handler saw, in order.
    fn seen(&self) -> BTreeMap<String, Vec<(u64, u64)>> {
        let mut seen: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
        for line in self.output().lines() {
            let Ok(line) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let Some(subscriber) = line["message"]
                .as_str()
                .and_then(|m| m.strip_suffix(" saw"))
            else {
                continue;
            };
            let number = |name: &str| {
                let value = &line["fields"][name];
                value.as_u64().or_else(|| value.as_str()?.parse().ok())
            };
            if let (Some(id), Some(attempt)) = (number("entry.id"), number("attempt")) {
                seen.entry(subscriber.to_owned())
                    .or_default()
                    .push((id, attempt));
            }
        }
        seen
    }

    async fn scrape(&self) -> anyhow::Result<Scrape> {
        let addr = poll_for(WAIT, async || metrics_addr(&self.output()))
            .await
            .ok_or_else(|| anyhow::anyhow!("no metrics endpoint"))?;
        let (status, body) =
            tokio::task::spawn_blocking(move || http(&addr, "GET", "/metrics", b"")).await??;
        anyhow::ensure!(status == 200, "GET /metrics: {status} {body}");
        Scrape::parse(&body)
    }
}
