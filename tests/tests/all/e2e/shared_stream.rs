//! Many readers of one stream, through the binary on kinesis-local and DynamoDB-local: two
//! subscriptions of one app (`acme`'s `shared-ledger`: `reconcile` with `max_attempts` and a
//! dead letter, `defer` with `retry_after(15 min)` carried forward past a 2 s `max_hold`) and
//! a second tenant (`globex`'s `strict-ledger`, one attempt, its own dead letter) all read
//! `ledger`. Each copy must reach only the subscription that made it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ruststream_kinesis::LeaseStore;
use ruststream_runtime::dead_letter::DeadLetterOrigin;
use ruststream_tests::e2e::{ReadBack, put_json, read_all, read_at_least};
use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::guests;
use ruststream_tests::wait::{eventually, eventually_async, poll_for};
use serde_json::{Value, json};

const REFUNDS: u64 = 5;
const PAYMENTS: u64 = 30;
const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_copy_reaches_only_the_subscription_that_made_it() -> anyhow::Result<()> {
    let fixture = Fixture::builder("shared")
        .stream("ledger", 1)
        .stream("ledger.dead", 1)
        .stream("ledger.strict-dead", 1)
        .dynamo()
        .start()
        .await?;
    let host = start_host(&fixture).await?;
    let client = fixture.client();

    // Refunds among payments, written over a few seconds: the waiting copies of `defer` are
    // carried forward while payments are handled behind them.
    for id in 1..=PAYMENTS {
        let amount = if id % (PAYMENTS / REFUNDS) == 0 {
            -5
        } else {
            10
        };
        put_json(
            client,
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
        let seen = seen(&host.output());
        seen.get("strict").map_or(0, Vec::len) as u64 >= PAYMENTS
            && seen.get("reconcile").map_or(0, Vec::len) as u64 >= PAYMENTS + 2 * REFUNDS
            && seen.get("defer").map_or(0, Vec::len) as u64 >= PAYMENTS
    })
    .await;
    anyhow::ensure!(
        done,
        "not every record was seen: {:?}",
        seen(&host.output())
    );
    let seen = seen(&host.output());
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
    let dead = read_at_least(client, "ledger.dead", REFUNDS as usize, WAIT).await?;
    let strict_dead = read_at_least(client, "ledger.strict-dead", REFUNDS as usize, WAIT).await?;
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
    // producer stops, nothing is handled behind the waiting copies and carrying stops. A carry
    // ends a hold, so a hold of `acme`'s older than `max_hold` (2 s) proves that carrying
    // stopped; were it going on, no hold would live that long and this wait would fail.
    let outlived = poll_for(WAIT, async || {
        let scrape = host.scrape().await.ok()?;
        let age = scrape.max("ruststream_oldest_held_age_seconds", &[("tenant", "acme")])?;
        (age >= 3.0).then_some(())
    })
    .await;
    assert!(outlived.is_some(), "no hold of acme's outlived max_hold");
    let ledger = read_all(client, "ledger").await?;
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
    let store = fixture
        .lease_store("ruststream-globex-strict._ledger")
        .await;
    let passed = eventually_async(WAIT, async || {
        let rows = store.list().await.unwrap_or_default();
        rows.first().and_then(|r| r.checkpoint.clone()) == last
    })
    .await;
    let now = read_all(client, "ledger").await?;
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

/// The host of both tenants, once it reads its three shards (two subscriptions of `acme`, one
/// of `globex`), logging JSON.
async fn start_host(fixture: &Fixture) -> anyhow::Result<BinaryHost> {
    let tenants = fixture.tenants(&format!(
        r#"
        [[tenants]]
        name = "acme"
        components = ["{shared}"]
        subscribe = ["ledger"]
        publish = ["ledger.dead"]
        limits = {{ max_hold = "2s" }}

        [[tenants]]
        name = "globex"
        components = ["{strict}"]
        subscribe = ["ledger"]
        publish = ["ledger.strict-dead"]
        "#,
        shared = guests::SHARED_LEDGER.path().display(),
        strict = guests::STRICT_LEDGER.path().display(),
    ))?;
    let host = fixture
        .host(&tenants)
        .dynamo_leases()
        .args(&["--log-format", "json"])
        .start()?;
    host.wait_until(WAIT, "three shards read", |log| {
        log.matches("reading shard").count() >= 3
    })
    .await?;
    Ok(host)
}

/// (entry id, attempt) of every record each subscriber's handler saw, in order, from the
/// host's JSON log.
fn seen(output: &str) -> BTreeMap<String, Vec<(u64, u64)>> {
    let mut seen: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    for line in output.lines() {
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
