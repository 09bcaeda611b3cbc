//! The host embedded through `ruststream-fleet` alone, with no `ruststream` binary: a tenants
//! file in, its control surface out. Components compile in this process
//! ([`CompileIn::ThisProcess`]): a test binary cannot serve the compile worker.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use aws_sdk_kinesis::config::{Credentials, SharedCredentialsProvider};
use ruststream_fleet::admin::control::{Control as _, ControlError};
use ruststream_fleet::aws::AwsOptions;
use ruststream_fleet::engine::{CompileCache, CompileIn};
use ruststream_fleet::run::{RunOptions, RunningHost};
use ruststream_fleet::settings::{DurationSetting, HostSettings, LeaseStoreKind};
use ruststream_kinesis::lease::{LeaseKey, LeaseStore as _};
use ruststream_kinesis::runner::ShardState;
use ruststream_tests::fixture::Fixture;
use ruststream_tests::scratch::ScratchDir;
use ruststream_tests::wait::poll_for;
use ruststream_tests::{compile_cache_dir, guests};
use serde_json::json;

/// How long the host may take to load, read and checkpoint on a loaded machine.
const WAIT: Duration = Duration::from_secs(60);

/// The local servers take any key; the test binary's environment has none to find.
fn test_credentials() -> Option<SharedCredentialsProvider> {
    let credentials = Credentials::new("test", "test", None, None, "embed-test");
    Some(SharedCredentialsProvider::new(credentials))
}

/// The fixture's servers, with the test credentials in hand (none from the environment).
fn fixture_aws(fixture: &Fixture) -> AwsOptions {
    AwsOptions {
        region: Some("us-east-1".to_owned()),
        kinesis_endpoint: Some(fixture.kinesis.endpoint()),
        dynamodb_endpoint: Some(fixture.dynamo().endpoint()),
        sts_endpoint: None,
        s3_endpoint: None,
        credentials: test_credentials(),
    }
}

/// Tenant `acme` runs `versioned` v1 (`handle` on `events` acks `{"id": N}`); leases and
/// checkpoints in DynamoDB-local; one record put; the host stopped by the embedder. What it
/// handled is in its status, its checkpoint in the lease table, and its lease released.
#[tokio::test(flavor = "multi_thread")]
async fn an_embedded_host_runs_a_component_from_a_tenants_file_and_stops_cleanly()
-> anyhow::Result<()> {
    let fixture = Fixture::builder("embed-runs")
        .stream("events", 1)
        .stream("legacy", 1)
        .dynamo()
        .start()
        .await?;
    let config = fixture.tenants(&format!(
        "[[tenants]]\nname = \"acme\"\ncomponents = [{:?}]\nsubscribe = [\"events\", \"legacy\"]\n",
        guests::VERSIONED_V1.path()
    ))?;
    let host = RunningHost::start(RunOptions {
        config: Some(config),
        aws: fixture_aws(&fixture),
        compile: CompileCache {
            compile_cache: Some(compile_cache_dir()),
            no_compile_cache: false,
        },
        compile_in: CompileIn::ThisProcess,
        settings: HostSettings {
            lease_store: Some(LeaseStoreKind::Dynamodb),
            create_lease_table: Some(true),
            poll_interval: Some(DurationSetting::from_millis(50)),
            checkpoint_interval: Some(DurationSetting::from_millis(50)),
            state_dir: Some(fixture.dir().join("state")),
            ..HostSettings::default()
        },
        owner_id: Some("embedder".to_owned()),
        admin_addr: None,
        metrics_addr: None,
        ..RunOptions::default()
    })
    .await?;
    assert_eq!(host.admin_addr(), None, "no admin API was asked for");
    // The control outlives `run_until`'s hold on the host: the embedder drives it meanwhile.
    let control = host.control().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(host.run_until(async {
        let _ = stopped.await;
    }));

    let reading = poll_for(WAIT, async || {
        let status = control.status();
        let app = status.tenants.first()?.apps.first()?;
        let events = app.subscriptions.iter().find(|s| s.stream == "events")?;
        // Reading, not only listed: a record put while the shard still opens at the tip
        // comes before it, and is rightly not read.
        let state = &events.shards.values().next()?.state;
        (*state == ShardState::Reading).then_some(())
    })
    .await;
    assert!(reading.is_some(), "acme never read: {:?}", control.status());
    let sequence = fixture.put("events", &json!({"id": 1})).await?;

    let handled = poll_for(WAIT, async || {
        let status = control.status();
        let app = status.tenants.first()?.apps.first()?;
        let events = app.subscriptions.iter().find(|s| s.stream == "events")?;
        let shard = events.shards.values().next()?;
        (shard.outcomes.ack == 1).then_some(())
    })
    .await;
    assert!(
        handled.is_some(),
        "the record was never acked: {:?}",
        control.status()
    );
    let store = fixture.lease_store("ruststream-acme-versioned").await;
    let key = LeaseKey::new("events", "shardId-000000000000");
    let checkpointed = poll_for(WAIT, async || {
        let row = store.read(&key).await.ok()??;
        (row.checkpoint.as_deref() == Some(sequence.as_str())).then_some(())
    })
    .await;
    assert!(checkpointed.is_some(), "{:?}", store.read(&key).await?);

    stop.send(())
        .map_err(|()| anyhow::anyhow!("the host stopped by itself"))?;
    running.await??;
    let row = store.read(&key).await?.expect("the lease row stays");
    assert_eq!(row.checkpoint.as_deref(), Some(sequence.as_str()));
    assert_eq!(row.owner, None, "the lease is released at a clean stop");
    Ok(())
}

/// AWS nowhere reachable: nothing here may need it (a call would fail at once, not hang).
fn no_aws() -> AwsOptions {
    let nowhere = Some("http://127.0.0.1:1".to_owned());
    AwsOptions {
        region: Some("us-east-1".to_owned()),
        kinesis_endpoint: nowhere.clone(),
        dynamodb_endpoint: nowhere.clone(),
        sts_endpoint: nowhere.clone(),
        s3_endpoint: nowhere,
        credentials: test_credentials(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_embedded_host_answers_its_control_and_reports_that_nothing_started()
-> anyhow::Result<()> {
    let dir = ScratchDir::new("embed-control")?;
    // Not WebAssembly: refused by its first bytes, before anything is compiled.
    std::fs::write(dir.join("ledger.wasm"), "just text")?;
    let config = dir.join("tenants.toml");
    std::fs::write(
        &config,
        "[[tenants]]\nname = \"acme\"\ncomponents = [\"ledger.wasm\"]\n",
    )?;
    let host = RunningHost::start(RunOptions {
        config: Some(config),
        aws: no_aws(),
        settings: HostSettings {
            state_dir: Some(dir.join("state")),
            ..HostSettings::default()
        },
        compile_in: CompileIn::ThisProcess,
        admin_addr: Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))),
        metrics_addr: None,
        ..RunOptions::default()
    })
    .await?;

    let admin = host.admin_addr().expect("the admin API listens");
    assert_ne!(admin.port(), 0, "the port chosen is reported");
    assert!(dir.join("state").join("admin-token").exists());
    // The tenants load after `start` returns: wait for the component's refusal.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let refused = |host: &RunningHost| {
        let status = host.control().status();
        status.tenants.iter().any(|t| !t.refused.is_empty())
    };
    while !refused(&host) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "acme's load never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = host.control().status();
    let names: Vec<_> = status.tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["acme"]);
    assert_eq!(status.tenants[0].refused.len(), 1, "{status:?}");
    host.control().pause("acme").await?;
    assert!(matches!(
        host.control().pause("nobody").await,
        Err(ControlError::UnknownTenant(name)) if name == "nobody"
    ));

    // The first load refuses the one component: the host stops by itself and says why.
    let error = host
        .run_until(std::future::pending())
        .await
        .expect_err("nothing runs");
    assert!(
        error.to_string().contains("no component could be started"),
        "{error:#}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenants_file_with_a_mistake_is_refused_at_start() -> anyhow::Result<()> {
    let dir = ScratchDir::new("embed-mistake")?;
    let config = dir.join("tenants.toml");
    std::fs::write(
        &config,
        "[[tenants]]\nname = \"acme\"\ncomponents = [\"a.wasm\"]\nsubscrbe = [\"ledger\"]\n",
    )?;
    let started = RunningHost::start(RunOptions {
        config: Some(config),
        aws: no_aws(),
        settings: HostSettings {
            state_dir: Some(dir.join("state")),
            ..HostSettings::default()
        },
        admin_addr: None,
        metrics_addr: None,
        ..RunOptions::default()
    })
    .await;
    let error = started.err().expect("refused");
    assert!(format!("{error:#}").contains("subscrbe"), "{error:#}");
    assert!(!dir.join("state").exists(), "nothing written");
    Ok(())
}
