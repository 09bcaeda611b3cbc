//! The seed's settlement handler in Python and JavaScript, run by the `ruststream` binary on
//! the local Kinesis and DynamoDB servers under the default limits: each compiles in the
//! bounded worker within its size's budget, loads with its ungranted WASI imports denied, and
//! settles the seed's table as the Rust component does (ack, drop, retry held, ack).

use std::time::Duration;

use ruststream_kinesis::{DynamoLeaseStore, LeaseStore, lease::LeaseKey};
use ruststream_tests::fixture::Fixture;
use ruststream_tests::toolchains::{SETTLEMENT_JS, SETTLEMENT_PYTHON};
use ruststream_tests::wait::{eventually, poll_for};
use serde_json::json;

/// The tenants, one per language, each running its example on its own stream.
const TENANTS: [(&str, &str); 2] = [("py", "ledger"), ("js", "ledger")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_settles_the_seed_table_from_python_and_javascript() -> anyhow::Result<()> {
    let (python, js) = tokio::task::spawn_blocking(|| {
        anyhow::Ok((SETTLEMENT_PYTHON.build()?, SETTLEMENT_JS.build()?))
    })
    .await??;
    let fixture = Fixture::builder("polyglot")
        .stream("ledger", 1)
        .dynamo()
        .start()
        .await?;
    // No compile settings: the default budget, which grows with the component's size. The
    // cache is the test's own, so the first load compiles in the worker.
    let tenants = fixture.tenants(&format!(
        r#"
        [host]
        compile_cache = "{cache}"

        [[tenants]]
        name = "py"
        components = ["{python}"]
        subscribe = ["ledger"]

        [[tenants]]
        name = "js"
        components = ["{js}"]
        subscribe = ["ledger"]
        "#,
        cache = fixture.dir().join("compiled").display(),
        python = python.display(),
        js = js.display(),
    ))?;
    let host = fixture
        .host(&tenants)
        .dynamo_leases()
        .owner("polyglot-host")
        .args(&["--checkpoint-interval", "200ms"])
        .start()?;
    let output = || host.output();

    // Both tenants compile (minutes on a loaded machine) and open the shard at the tip.
    let mut stores = Vec::new();
    for (tenant, stream) in TENANTS {
        let store = DynamoLeaseStore::new(
            fixture.dynamo().client().await,
            format!("ruststream-{tenant}-ledger"),
        );
        let leased = poll_for(Duration::from_secs(900), async || {
            let rows = store.list().await.ok()?;
            rows.into_iter()
                .find(|r| r.owner.as_deref() == Some("polyglot-host"))
                .map(|r| r.key)
        })
        .await;
        let key =
            leased.ok_or_else(|| anyhow::anyhow!("{tenant} never took its lease: {}", output()))?;
        let shard = key.trim_start_matches(&format!("{stream}:")).to_owned();
        stores.push((tenant, store, LeaseKey::new(stream, &shard)));
    }
    host.wait_for_log("reading shard", TENANTS.len()).await?;

    let entries = [(1, 5), (2, 0), (3, -1), (4, 2)];
    let sequences = fixture
        .put_all(
            "ledger",
            entries.map(|(id, amount)| json!({"id": id, "amount": amount})),
        )
        .await?;
    for (tenant, store, key) in &stores {
        // ack, drop: the checkpoint passes both; retry: held in front of the third, while the
        // fourth is still booked.
        let settled = poll_for(Duration::from_secs(60), async || {
            let row = store.read(key).await.ok()??;
            (row.checkpoint.as_deref() == Some(sequences[1].as_str())).then_some(())
        })
        .await;
        assert!(settled.is_some(), "{tenant}: {}", output());
        let booked = eventually(Duration::from_secs(30), || {
            booked_ids(&output(), tenant) == ["1", "4"]
        })
        .await;
        assert!(booked, "{tenant}: {}", output());
    }
    let text = output();
    assert!(
        text.matches("cannot requeue").count() >= TENANTS.len(),
        "{text}"
    );
    Ok(())
}

/// The `entry.id` of each "booked" line the guest of `tenant` logged, in order.
fn booked_ids(output: &str, tenant: &str) -> Vec<String> {
    let tags = [format!("tenant=\"{tenant}\""), format!("tenant={tenant} ")];
    output
        .lines()
        .filter(|l| l.contains("booked") && tags.iter().any(|t| l.contains(t.as_str())))
        .filter_map(|l| l.split("entry.id=").nth(1))
        .map(|rest| {
            rest.split([' ', ','])
                .next()
                .unwrap_or_default()
                .trim_matches('"')
                .to_owned()
        })
        .collect()
}
