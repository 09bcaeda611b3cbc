//! Namespaces: no two (tenant, app) pairs share a lease table, however their names run
//! together, and a table template that would let them is refused.

use std::sync::Arc;

use ruststream_kinesis::{
    Deployment, LeaseStore,
    lease::{DEFAULT_TABLE_TEMPLATE, TableTemplate},
};
use ruststream_runtime::{Tenant, policy::StreamGrant};
use ruststream_tests::e2e::{TestHost, dynamo_store, put_json};
use ruststream_tests::guests;
use ruststream_tests::scratch::ScratchDir;
use ruststream_tests::servers::{LocalDynamo, LocalKinesis};
use ruststream_tests::wait::eventually;
use serde_json::json;

use super::WAIT;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_whose_names_run_together_keep_their_own_leases() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    kinesis.create_stream("ledger", 2).await?;
    let client = kinesis.client().await;
    // `acme` running app `eu-ledger`, and `acme-eu` running app `ledger`: once one table.
    let template = TableTemplate::new(DEFAULT_TABLE_TEMPLATE, 2, 1)?;
    let pairs = [("acme", "eu-ledger"), ("acme-eu", "ledger")];
    let tables: Vec<String> = pairs.iter().map(|(t, a)| template.table(t, a)).collect();
    assert_ne!(tables[0], tables[1]);

    let mut running = Vec::new();
    for ((tenant, _), table) in pairs.iter().zip(&tables) {
        let host = TestHost::new(client.clone(), &format!("host-{tenant}"))?;
        let tenant = Arc::new(Tenant::new(*tenant).subscribe(StreamGrant::only(["ledger"])));
        let component = host.load_for(guests::SETTLEMENT, &tenant).await?;
        let store = dynamo_store(dynamo.client().await, table).await?;
        let deployment = Deployment::new(component, store.clone()).for_tenant(tenant);
        let app = host.start(deployment, 2).await?;
        running.push((host, app, store));
    }
    for id in 1..=6 {
        let entry = json!({"id": id, "amount": 10});
        put_json(&client, "ledger", &entry, None).await?;
    }
    // Each tenant holds both shards in its own table and books every entry.
    for (host, _, store) in &running {
        let all = eventually(WAIT, || host.deliveries.len() >= 6).await;
        assert!(all, "{} of 6 delivered", host.deliveries.len());
        let rows = store.list().await?;
        assert_eq!(rows.len(), 2, "{rows:#?}");
        let owner = host.host.config().owner_id.clone();
        assert!(
            rows.iter().all(|r| r.owner.as_deref() == Some(&owner)),
            "{rows:#?}"
        );
    }
    // A marker on each shard: a record delivered twice would have come before its shard's.
    let mut markers = Vec::new();
    for (id, key) in [(100, "0"), (101, "200000000000000000000000000000000000000")] {
        let entry = json!({"id": id, "amount": 10});
        markers.push(put_json(&client, "ledger", &entry, Some(key)).await?.1);
    }
    for (host, app, _) in running {
        host.deliveries.wait_for_sequences(&markers, WAIT).await?;
        assert_eq!(host.deliveries.len(), 8, "each entry once per tenant");
        app.shutdown().await;
    }
    Ok(())
}

#[test]
fn a_template_that_would_share_a_table_is_refused_by_the_binary() -> anyhow::Result<()> {
    let dir = ScratchDir::new("template")?;
    let config = dir.join("tenants.toml");
    std::fs::write(
        &config,
        r#"
        [host]
        lease_store = "dynamodb"
        lease_table = "ruststream-{app}"
        [[tenants]]
        name = "acme"
        components = ["a.wasm"]
        [[tenants]]
        name = "acme-eu"
        components = ["b.wasm"]
        "#,
    )?;
    let out = std::process::Command::new(ruststream_tests::binary())
        .args(["run", "--config"])
        .arg(&config)
        .env(
            "RUSTSTREAM_STATE_DIR",
            ruststream_tests::process::state_dir(&config),
        )
        .env("RUST_LOG", "error")
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("has no `{tenant}` placeholder, but 2 tenants share this host"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    Ok(())
}
