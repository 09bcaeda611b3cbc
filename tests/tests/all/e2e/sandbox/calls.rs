//! Calls: a component that spins, grows, recurses, panics, floods its log, reaches for files,
//! the environment, sockets or ungranted streams, or is no RustStream component at all, is
//! contained, and settlement runs on.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ruststream_common::escape::one_line;

use ruststream_runtime::{
    LoadedComponent, Outcome, Tenant,
    component::{CONTRACT, LoadPhase, Refusal, TrapKind, VersionRefusal},
    log::Origin,
    policy::StreamGrant,
    tenant::{Limits, LogLimits, TenantError},
};
use ruststream_tests::e2e::read_all;
use ruststream_tests::{Guest, guests};

use super::{Arena, WAIT, evil, evil_limits};

/// Runs a component that traps on every record and checks the trap is contained.
async fn assert_contained(guest: Guest, kind: TrapKind, evidence: &str) -> anyhow::Result<Arena> {
    assert_contained_as(evil(), guest, kind, evidence).await
}

/// [`assert_contained`] for `tenant`'s limits.
async fn assert_contained_as(
    tenant: Tenant,
    guest: Guest,
    kind: TrapKind,
    evidence: &str,
) -> anyhow::Result<Arena> {
    let arena = Arena::start().await?;
    let hostile = arena.run(guest, tenant).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    arena.assert_settlement_flows().await?;

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
    assert_eq!(failure.component, guest.name().replace('-', "_"));
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
    assert_contained(guests::HOSTILE_SPIN, TrapKind::Deadline, "deadline").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reports_from_handle_win_no_fresh_deadline() -> anyhow::Result<()> {
    // The handler stalls 600 ms, reports, stalls 600 ms more and acks: 1.2 s against a 1 s
    // deadline. A report from `handle` moving the deadline would let it ack.
    let tenant = evil().limits(Limits {
        call_deadline: Duration::from_secs(1),
        ..evil_limits()
    });
    assert_contained_as(
        tenant,
        guests::HOSTILE_REPORT_HANDLE,
        TrapKind::Deadline,
        "deadline",
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_hits_the_memory_limit() -> anyhow::Result<()> {
    assert_contained(
        guests::HOSTILE_MEMORY,
        TrapKind::MemoryLimit,
        "memory limit exceeded",
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_resources_are_capped_per_instance() -> anyhow::Result<()> {
    // Each pollable lives in host memory, outside the memory cap: the table of them is capped.
    assert_contained(
        guests::HOSTILE_RESOURCES,
        TrapKind::ResourceLimit,
        "resource table has no free keys",
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_overflows_the_stack() -> anyhow::Result<()> {
    assert_contained(guests::HOSTILE_RECURSION, TrapKind::StackOverflow, "stack").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_and_instance_caps_refuse_the_component_at_load() -> anyhow::Result<()> {
    // Every component has a function table and several core instances. Loading instantiates
    // it under the tenant's caps, so caps below that refuse it before it runs any record.
    let arena = Arena::start().await?;
    let cases = [
        (
            Limits {
                max_table_elements: 1,
                ..evil_limits()
            },
            "table limit exceeded",
        ),
        (
            Limits {
                max_instances: 1,
                ..evil_limits()
            },
            "instance count too high",
        ),
    ];
    for (limits, evidence) in cases {
        let tenant = Arc::new(evil().limits(limits));
        let error = arena
            .load(guests::HOSTILE_PANIC, &tenant)
            .await
            .err()
            .expect("refused");
        let line = one_line(&error);
        assert_eq!(error.phase, LoadPhase::Instantiate, "{line}");
        assert!(
            matches!(&error.refusal, Refusal::Trap(f) if f.kind == TrapKind::ResourceLimit),
            "{line}"
        );
        assert!(line.contains(evidence), "{line}");
    }
    arena.assert_settlement_flows().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_a_failed_attempt_and_its_message_is_logged() -> anyhow::Result<()> {
    let arena = assert_contained(guests::HOSTILE_PANIC, TrapKind::Panic, "unreachable").await?;
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
    let hostile = arena.run(guests::HOSTILE_PANIC, evil()).await?;
    arena.traffic(4, 0).await?;
    let tenant = hostile.tenant().clone();
    let paused = hostile
        .wait_for(WAIT, |s| s[0].shards.values().all(|x| x.paused))
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
    arena.assert_settlement_flows().await?;
    assert_eq!(
        arena.hostile_reports().len(),
        delivered,
        "nothing delivered while quarantined"
    );

    // Settlement's tenant was never affected; the operator lets the hostile one go on.
    tenant.resume();
    let resumed =
        ruststream_tests::wait::eventually(WAIT, || arena.hostile_reports().len() > delivered)
            .await;
    assert!(resumed, "the parked record was delivered after resume");
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
    let hostile = arena.run(guests::HOSTILE_LOG_FLOOD, flood).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    arena.assert_settlement_flows().await?;

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
    let hostile = arena.run(guests::HOSTILE_FS, evil()).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    arena.assert_settlement_flows().await?;

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
    let hostile = arena.run(guests::HOSTILE_ENV, evil()).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    arena.assert_settlement_flows().await?;

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
async fn a_component_that_imports_sockets_loads_and_every_connect_is_denied() -> anyhow::Result<()>
{
    let arena = Arena::start().await?;
    let loaded = arena.load(guests::HOSTILE_NET, &Arc::new(evil())).await?;
    let denied = loaded.denied_imports();
    assert!(
        denied.iter().any(|i| i.starts_with("wasi:sockets/tcp")),
        "{denied:?}"
    );
    let hostile = arena.run(guests::HOSTILE_NET, evil()).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    arena.assert_settlement_flows().await?;

    let logs = arena.logs();
    let dialled = logs
        .iter()
        .find(|l| l.field("op") == Some("connect 127.0.0.1:9"))
        .expect("the guest reports what its connect got");
    let result = dialled.field("result").unwrap_or_default();
    assert!(
        result.starts_with("Err(") && result.contains("PermissionDenied"),
        "{dialled:#?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_outside_wasi_and_the_contract_is_refused_at_load() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let refused = arena.load(guests::HOSTILE_VAULT, &Arc::new(evil())).await;
    let error = refused
        .err()
        .expect("hostile-vault must be refused for its acme:vault import");
    assert_eq!(error.component, "hostile_vault");
    assert_eq!(error.phase, LoadPhase::Check);
    let Refusal::ForbiddenImport { import } = &error.refusal else {
        panic!("refused for another reason: {}", one_line(&error));
    };
    assert_eq!(import, "acme:vault/secrets@1.0.0");
    let line = one_line(&error);
    assert!(
        line.contains("imports `acme:vault/secrets@1.0.0`, which is neither WASI 0.2 nor the RustStream contract"),
        "{line}"
    );
    arena.assert_settlement_flows().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_to_an_ungranted_stream_is_a_typed_error() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let hostile = arena.run(guests::HOSTILE_PUBLISH, evil()).await?;
    arena.traffic(1, 1).await?;
    hostile.shutdown().await;
    arena.assert_settlement_flows().await?;

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
    // About the record the batch call was on, though the guest did not say.
    assert!(host.sequence_number.is_some(), "{host:#?}");
    assert!(
        read_all(&arena.client, "payments").await?.is_empty(),
        "nothing reached Kinesis"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribing_to_an_ungranted_stream_is_refused() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let refused = arena.run(guests::HOSTILE_SUBSCRIBE, evil()).await;
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
    arena.assert_settlement_flows().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_components_are_refused_and_the_host_runs_on() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    let tenant = Arc::new(evil());
    let load = async |name: &'static str, bytes: Vec<u8>| {
        let runtime = &arena.host.runtime;
        let log = &arena.host.log;
        LoadedComponent::from_bytes(runtime, name, bytes, tenant.policy(), log)
            .await
            .err()
            .map(|error| (error.phase, error.refusal))
    };

    let random: Vec<u8> = (0u32..4096)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    assert!(matches!(
        load("random", random).await,
        Some((LoadPhase::Check, Refusal::NotWasm))
    ));
    let core = b"\0asm\x01\0\0\0".to_vec();
    assert!(matches!(
        load("core", core).await,
        Some((LoadPhase::Check, Refusal::CoreModule))
    ));
    let truncated = std::fs::read(guests::SETTLEMENT.path())?[..200].to_vec();
    assert!(matches!(
        load("truncated", truncated).await,
        Some((LoadPhase::Compile, Refusal::Compile(_)))
    ));

    let command = std::fs::read(guests::NOT_RUSTSTREAM.path())?;
    match load("not_ruststream", command.clone()).await {
        Some((LoadPhase::Check, Refusal::MissingExport { found })) => {
            assert!(found.contains("wasi:cli/run"), "{found}")
        }
        other => panic!("expected MissingExport, got {other:?}"),
    }
    // The compatibility rule: a 1.0 host runs 1.0 components; a newer minor (1.1) and the
    // 0.x line are refused at the check, each naming both versions and what to do.
    let future = std::fs::read(guests::FUTURE_CONTRACT.path())?;
    match load("future_contract", future.clone()).await {
        Some((
            LoadPhase::Check,
            Refusal::ContractVersion(VersionRefusal::TooNew { found, .. }),
        )) => {
            assert_eq!(found, "ruststream:handler/handler@1.1.0");
        }
        other => panic!("expected a newer contract refused, got {other:?}"),
    }
    let past = std::fs::read(guests::PAST_CONTRACT.path())?;
    match load("past_contract", past.clone()).await {
        Some((LoadPhase::Check, Refusal::ContractVersion(VersionRefusal::TooOld { found }))) => {
            assert_eq!(found, "ruststream:handler/handler@0.5.0");
        }
        other => panic!("expected an older contract refused, got {other:?}"),
    }
    // The error as one line, as the binary prints it.
    let refusal = async |name: &str, bytes: Vec<u8>| {
        LoadedComponent::from_bytes(
            &arena.host.runtime,
            name,
            bytes,
            tenant.policy(),
            &arena.host.log,
        )
        .await
        .err()
        .map(|e| one_line(&e))
        .unwrap_or_default()
    };
    // Built against 0.5.0, before `handle` came back: rebuild it.
    let refused = refusal("past_contract", past).await;
    assert!(
        refused.contains("built against `ruststream:handler/handler@0.5.0`")
            && refused.contains(&format!("it implements {CONTRACT}"))
            && refused.contains("ruststream:handler 1.0 to 1.0")
            && refused
                .contains("rebuild the component with a RustStream guest SDK for contract 1.x"),
        "{refused}"
    );
    // Built against 1.1.0: this host is too old for it.
    let refused = refusal("future_contract", future).await;
    assert!(
        refused.contains("built against `ruststream:handler/handler@1.1.0`, newer than this host")
            && refused.contains(&format!("it implements {CONTRACT}"))
            && refused.contains("upgrade the host to one implementing 1.1 or later"),
        "{refused}"
    );
    let refused = refusal("not_ruststream", command).await;
    assert!(
        refused.starts_with("tenant `evil`, component `not_ruststream`: checking refused: ")
            && refused.contains("ruststream:handler/handler@1.0.0"),
        "{refused}"
    );

    arena.assert_settlement_flows().await?;
    Ok(())
}
