//! Untrusted tenants: every hostile component runs next to the well-behaved `settlement`
//! tenant in the same host, on a local Kinesis server. Each test asserts both that the hostile
//! one is contained with the right error and that settlement's records keep being handled and
//! its checkpoint keeps moving.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ruststream_host::component::{Limits, LoadError, LoadedComponent, LogLimits, TrapKind};
use ruststream_host::lease::MemoryLeaseStore;
use ruststream_host::log::{LogLine, Origin};
use ruststream_host::pipeline::DeliveryReport;
use ruststream_host::runner::{Deployment, RunningApp, ShardState};
use ruststream_host::settlement::Outcome;
use ruststream_host::tenant::{StreamGrant, Tenant, TenantError};
use ruststream_tests::e2e::{TestHost, put_json, read_all};
use ruststream_tests::servers::LocalKinesis;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(40);

/// A host running `settlement` for tenant `good`, with streams for the hostile tenant.
struct Arena {
    _kinesis: LocalKinesis,
    client: aws_sdk_kinesis::Client,
    host: TestHost,
    good: RunningApp,
}

impl Arena {
    async fn start() -> anyhow::Result<Self> {
        let kinesis = LocalKinesis::start().await?;
        for stream in ["ledger", "hostile", "payments", "secrets"] {
            kinesis.create_stream(stream, 1).await?;
        }
        let client = kinesis.client().await;
        let host = TestHost::new(client.clone(), "host-a")?;
        let good = Tenant::new("good").subscribe(StreamGrant::only(["ledger"]));
        let deployment =
            Deployment::new(host.load("settlement").await?, memory()).for_tenant(Arc::new(good));
        let good = host.start(deployment, 1).await?;
        Ok(Self {
            _kinesis: kinesis,
            client,
            host,
            good,
        })
    }

    /// Starts guest example `name` for `tenant`, and waits until it reads its shard.
    async fn run(&self, name: &str, tenant: Tenant) -> anyhow::Result<RunningApp> {
        let deployment =
            Deployment::new(self.host.load(name).await?, memory()).for_tenant(Arc::new(tenant));
        let app = self.host.host.start(deployment)?;
        let reading = app
            .wait_for(WAIT, |s| s[0].count(&ShardState::Reading) == 1)
            .await;
        anyhow::ensure!(reading, "{name} never read its shard: {:#?}", app.status());
        Ok(app)
    }

    /// Publishes `hostile` records to the hostile stream and 3 ledger entries around them;
    /// waits until settlement booked all 3 and the hostile tenant saw `expected` deliveries.
    async fn traffic(&self, hostile: u64, expected: usize) -> anyhow::Result<()> {
        put_json(
            &self.client,
            "ledger",
            &json!({"id": 1, "amount": 10}),
            None,
        )
        .await?;
        for id in 0..hostile {
            put_json(
                &self.client,
                "hostile",
                &json!({"id": 100 + id, "amount": 1}),
                None,
            )
            .await?;
        }
        put_json(
            &self.client,
            "ledger",
            &json!({"id": 2, "amount": 20}),
            None,
        )
        .await?;
        put_json(
            &self.client,
            "ledger",
            &json!({"id": 3, "amount": 30}),
            None,
        )
        .await?;
        let hostile = |r: &DeliveryReport| r.stream == "hostile";
        let waited = tokio::time::timeout(WAIT, async {
            loop {
                let all = self.host.deliveries.all();
                if self.booked().len() == 3 && all.iter().filter(|r| hostile(r)).count() >= expected
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        anyhow::ensure!(
            waited.is_ok(),
            "booked {:?}, deliveries {:#?}",
            self.booked(),
            self.host.deliveries.all()
        );
        Ok(())
    }

    /// The ids settlement booked.
    fn booked(&self) -> BTreeSet<String> {
        self.logs()
            .iter()
            .filter(|l| l.message == "booked")
            .filter_map(|l| l.field("entry.id").map(str::to_owned))
            .collect()
    }

    /// Settlement's records are handled and its checkpoint moved past all three.
    fn assert_settlement_flows(&self) {
        assert_eq!(self.booked(), ["1", "2", "3"].map(String::from).into());
        let status = self.good.status();
        let shard = status[0].shards.values().next().expect("ledger shard");
        assert_eq!(shard.state, ShardState::Reading);
        assert_eq!(shard.held_at, None);
        let last_ledger = self
            .host
            .deliveries
            .all()
            .into_iter()
            .rfind(|r| r.stream == "ledger")
            .map(|r| r.sequence_number);
        assert_eq!(shard.checkpoint, last_ledger);
    }

    fn logs(&self) -> Vec<LogLine> {
        self.host.log.captured()
    }

    fn hostile_reports(&self) -> Vec<DeliveryReport> {
        self.host
            .deliveries
            .all()
            .into_iter()
            .filter(|r| r.stream == "hostile")
            .collect()
    }

    fn failures(&self) -> Vec<LogLine> {
        self.logs()
            .into_iter()
            .filter(|l| l.message.starts_with("handler call failed"))
            .collect()
    }
}

fn memory() -> Arc<MemoryLeaseStore> {
    Arc::new(MemoryLeaseStore::new())
}

/// A hostile tenant: granted only its stream, tight limits, quarantined after 3 failures.
fn evil() -> Tenant {
    Tenant::new("evil")
        .subscribe(StreamGrant::only(["hostile"]))
        .limits(evil_limits())
        .quarantine_after(3)
}

fn evil_limits() -> Limits {
    Limits {
        call_deadline: Duration::from_millis(300),
        memory_bytes: 16 << 20,
        ..Limits::default()
    }
}

/// Runs a component that traps on every record and checks the trap is contained.
async fn assert_contained(name: &str, kind: TrapKind, evidence: &str) -> anyhow::Result<Arena> {
    assert_contained_as(evil(), name, kind, evidence).await
}

/// [`assert_contained`] for `tenant`'s limits.
async fn assert_contained_as(
    tenant: Tenant,
    name: &str,
    kind: TrapKind,
    evidence: &str,
) -> anyhow::Result<Arena> {
    let arena = Arena::start().await?;
    let hostile = arena.run(name, tenant).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    arena.assert_settlement_flows();

    let reports = arena.hostile_reports();
    assert_eq!(reports[0].trap, Some(kind), "{reports:#?}");
    assert_eq!(
        reports[0].outcome,
        Outcome::Retry,
        "a trap counts as a failed attempt"
    );
    let failures = arena.failures();
    let failure = failures.first().expect("the failure is logged");
    assert_eq!(failure.tenant.as_deref(), Some("evil"));
    assert_eq!(failure.component, name.replace('-', "_"));
    assert_eq!(failure.stream.as_deref(), Some("hostile"));
    assert!(failure.shard_id.is_some());
    assert_eq!(
        failure.sequence_number.as_ref(),
        Some(&reports[0].sequence_number)
    );
    assert_eq!(failure.field("trap"), Some(kind.to_string().as_str()));
    assert!(
        failure.field("error").is_some_and(|e| e.contains(evidence)),
        "{failure:#?}"
    );
    Ok(arena)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_infinite_loop_ends_at_its_deadline() -> anyhow::Result<()> {
    assert_contained("hostile-spin", TrapKind::Deadline, "deadline").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_hits_the_memory_limit() -> anyhow::Result<()> {
    assert_contained(
        "hostile-memory",
        TrapKind::MemoryLimit,
        "memory limit exceeded",
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_overflows_the_stack() -> anyhow::Result<()> {
    assert_contained("hostile-recursion", TrapKind::StackOverflow, "stack").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_and_instance_caps_refuse_the_instance() -> anyhow::Result<()> {
    // Every component has a function table and several core instances; caps below that make
    // each instantiation fail, which is a failed attempt of the record that needed it.
    let tight_tables = Limits {
        max_table_elements: 1,
        ..evil_limits()
    };
    assert_contained_as(
        evil().limits(tight_tables),
        "hostile-panic",
        TrapKind::ResourceLimit,
        "table limit exceeded",
    )
    .await?;
    let one_instance = Limits {
        max_instances: 1,
        ..evil_limits()
    };
    assert_contained_as(
        evil().limits(one_instance),
        "hostile-panic",
        TrapKind::ResourceLimit,
        "instance count too high",
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_a_failed_attempt_and_its_message_is_logged() -> anyhow::Result<()> {
    let arena = assert_contained("hostile-panic", TrapKind::Panic, "unreachable").await?;
    let stderr = arena.logs().into_iter().find(|l| {
        l.field("fd") == Some("stderr") && l.message.contains("hostile panic on entry 100")
    });
    let stderr = stderr.expect("the panic message reaches the log through stderr");
    assert_eq!(stderr.origin, Origin::Guest);
    assert_eq!(stderr.tenant.as_deref(), Some("evil"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_whose_calls_keep_failing_is_quarantined_until_resumed() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let hostile = arena.run("hostile-panic", evil()).await?;
    arena.traffic(4, 0).await?;
    let tenant = hostile.tenant().clone();
    let paused = hostile
        .wait_for(WAIT, |s| s[0].shards.values().all(|x| x.quarantined))
        .await;
    assert!(paused, "{:#?}", hostile.status());
    assert!(tenant.is_quarantined());
    let reason = tenant.quarantine_reason().unwrap_or_default();
    assert!(
        reason.contains("3 consecutive failed calls") && reason.contains("panic"),
        "{reason}"
    );
    // Whether the 4 records came in one read or several, 3 failed calls stopped delivery
    // before the last record.
    let delivered = arena.hostile_reports().len();
    assert!((2..=3).contains(&delivered), "{delivered} deliveries");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        arena.hostile_reports().len(),
        delivered,
        "nothing delivered while quarantined"
    );
    arena.assert_settlement_flows();

    // Settlement's tenant was never affected; the operator lets the hostile one go on.
    tenant.resume();
    let resumed = tokio::time::timeout(WAIT, async {
        while arena.hostile_reports().len() <= delivered {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        resumed.is_ok(),
        "the parked record was delivered after resume"
    );
    hostile.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_flood_is_capped() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let flood = Tenant::new("evil")
        .subscribe(StreamGrant::only(["hostile"]))
        .limits(Limits {
            call_deadline: Duration::from_secs(20),
            log: LogLimits {
                lines_per_record: 50,
                ..LogLimits::default()
            },
            ..Limits::default()
        });
    let hostile = arena.run("hostile-log-flood", flood).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    arena.assert_settlement_flows();

    assert_eq!(arena.hostile_reports()[0].outcome, Outcome::Ack);
    let logs = arena.logs();
    let from_guest = logs
        .iter()
        .filter(|l| l.origin == Origin::Guest && l.tenant.as_deref() == Some("evil"))
        .count();
    assert!(
        from_guest <= 50,
        "{from_guest} guest lines got through a cap of 50"
    );
    let capped = logs
        .iter()
        .find(|l| l.message.starts_with("log output capped"))
        .expect("one warning says what was dropped");
    assert!(capped.message.contains("lines"), "{capped:#?}");
    assert_eq!(capped.tenant.as_deref(), Some("evil"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_cannot_be_opened() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let hostile = arena.run("hostile-fs", evil()).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    arena.assert_settlement_flows();

    assert_eq!(arena.hostile_reports()[0].outcome, Outcome::Ack);
    let attempts: Vec<(String, String)> = arena
        .logs()
        .iter()
        .filter_map(|l| Some((l.field("op")?.to_owned(), l.field("result")?.to_owned())))
        .collect();
    assert_eq!(attempts.len(), 4, "{attempts:#?}");
    for (op, result) in attempts {
        assert!(result.starts_with("Err("), "{op} succeeded: {result}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_is_empty() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let hostile = arena.run("hostile-env", evil()).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    arena.assert_settlement_flows();

    let logs = arena.logs();
    let seen = logs
        .iter()
        .find(|l| l.message == "ambient authority")
        .expect("the guest reports what it saw");
    let fields: BTreeSet<String> = seen
        .fields
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    for value in &seen.fields {
        assert!(!value.1.contains("/root"), "{fields:?}");
    }
    assert!(
        fields.iter().any(|f| f.ends_with("=0")),
        "no variables, no arguments: {fields:?}"
    );
    assert!(
        seen.fields
            .iter()
            .filter(|(_, v)| v.contains("NotPresent"))
            .count()
            >= 2,
        "HOME and the secret are absent: {fields:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_that_imports_sockets_is_refused_at_load() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let refused = LoadedComponent::from_file(
        &arena.host.runtime,
        ruststream_tests::component("hostile-net"),
    )
    .await;
    let Err(LoadError::ForbiddenImport { component, import }) = refused else {
        panic!("hostile-net must be refused for its socket import");
    };
    assert_eq!(component, "hostile_net");
    assert!(import.starts_with("wasi:sockets/"), "{import}");
    arena.traffic(0, 0).await?;
    arena.assert_settlement_flows();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_to_an_ungranted_stream_is_a_typed_error() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let hostile = arena.run("hostile-publish", evil()).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    arena.assert_settlement_flows();

    let logs = arena.logs();
    let guest = logs
        .iter()
        .find(|l| l.message == "publish refused")
        .expect("the guest got an error back");
    assert!(
        guest
            .field("error")
            .is_some_and(|e| e.contains("not granted")),
        "{guest:#?}"
    );
    let host = logs
        .iter()
        .find(|l| l.origin == Origin::Runtime && l.message.starts_with("publish refused"))
        .expect("the host logs the refusal");
    assert_eq!(host.field("target_stream"), Some("payments"));
    assert_eq!(host.tenant.as_deref(), Some("evil"));
    assert!(
        read_all(&arena.client, "payments").await?.is_empty(),
        "nothing reached Kinesis"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribing_to_an_ungranted_stream_is_refused() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let refused = arena.run("hostile-subscribe", evil()).await;
    let error = refused.err().expect("refused").downcast::<TenantError>()?;
    assert_eq!(
        error,
        TenantError::SubscribeNotGranted {
            tenant: "evil".into(),
            component: "hostile_subscribe".into(),
            subscriber: "eavesdrop".into(),
            stream: "secrets".into(),
        }
    );
    arena.traffic(0, 0).await?;
    arena.assert_settlement_flows();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_components_are_refused_and_the_host_runs_on() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let runtime = &arena.host.runtime;
    let load = async |name: &'static str, bytes: Vec<u8>| {
        LoadedComponent::from_bytes(runtime, name, bytes).await
    };

    let random: Vec<u8> = (0u32..4096)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    assert!(matches!(
        load("random", random).await,
        Err(LoadError::NotWasm { .. })
    ));
    let core = b"\0asm\x01\0\0\0".to_vec();
    assert!(matches!(
        load("core", core).await,
        Err(LoadError::CoreModule { .. })
    ));
    let truncated = std::fs::read(ruststream_tests::component("settlement"))?[..200].to_vec();
    assert!(matches!(
        load("truncated", truncated).await,
        Err(LoadError::Compile { .. })
    ));

    let command = std::fs::read(ruststream_tests::component("not-ruststream"))?;
    match load("not_ruststream", command).await {
        Err(LoadError::MissingExport { found, .. }) => {
            assert!(found.contains("wasi:cli/run"), "{found}")
        }
        other => panic!("expected MissingExport, got {:?}", other.err()),
    }
    let future = std::fs::read(ruststream_tests::component("future-contract"))?;
    match load("future_contract", future).await {
        Err(LoadError::ContractVersion { found, .. }) => {
            assert_eq!(found, "ruststream:handler/handler@0.2.0");
        }
        other => panic!("expected ContractVersion, got {:?}", other.err()),
    }
    let refused = load(
        "not_ruststream",
        std::fs::read(ruststream_tests::component("not-ruststream"))?,
    )
    .await
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        refused.contains("not_ruststream") && refused.contains("ruststream:handler/handler@0.1.0"),
        "{refused}"
    );

    arena.traffic(0, 0).await?;
    arena.assert_settlement_flows();
    Ok(())
}
