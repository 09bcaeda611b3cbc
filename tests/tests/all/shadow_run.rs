//! A shadow's instance against its tenant's memory budget, in process: a `ShadowRun` of
//! `versioned-v1` on one shard, beside live reservations made and dropped around it. The
//! host's side (status, metrics, the binary) is `e2e::shadow`.

use std::sync::Arc;

use ruststream_runtime::SystemClock;
use ruststream_runtime::component::RuntimeConfig;
use ruststream_runtime::log::LogSink;
use ruststream_runtime::record::{Bytes, Delivery};
use ruststream_runtime::shadow::{Handling, RecordingPublisher, Settled, ShadowRun, ShadowTally};
use ruststream_runtime::tenant::{Limits, MemoryBudget};
use ruststream_runtime::{LoadedComponent, Outcome, Runtime, Tenant};
use ruststream_tests::guests;

const MIB: usize = 1 << 20;

/// Records `ids` as the live version settled them: acked, nothing published.
fn settled(ids: std::ops::RangeInclusive<u64>) -> Vec<Settled> {
    ids.map(|id| Settled {
        delivery: Delivery::from_stream(
            format!("4960{id:020}").into(),
            "key".into(),
            0,
            Bytes::from(format!("{{\"id\":{id}}}")),
        ),
        live: Handling {
            outcome: Outcome::Ack,
            trap: None,
            publishes: Vec::new(),
        },
    })
    .collect()
}

#[tokio::test]
async fn a_shadow_gives_its_memory_back_to_live_instances_and_takes_it_again_when_it_fits()
-> anyhow::Result<()> {
    let runtime = Runtime::new(RuntimeConfig::in_process())?;
    let limits = Limits {
        memory_bytes: 16 * MIB,
        memory_budget: Some(32 * MIB),
        ..Limits::default()
    };
    let tenant = Tenant::trusted("shadow-run").limits(limits);
    let log = LogSink::new();
    let path = guests::VERSIONED_V1.path();
    let component = LoadedComponent::from_file(&runtime, &path, tenant.policy(), &log).await?;
    let env = component.env(
        tenant.policy().clone(),
        Arc::new(RecordingPublisher::default()),
        Arc::new(SystemClock),
        log,
    );
    let spec = component
        .app()
        .subscriptions
        .iter()
        .find(|s| s.name == "handle")
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("versioned-v1 declares `handle`"))?;
    let tally = Arc::new(ShadowTally::new("shadow-run", "versioned", 1_000, 20));
    let memory: &Arc<MemoryBudget> = tenant.memory();
    let mut run = ShadowRun::new(
        &component,
        Arc::new(spec),
        "shardId-000000000000",
        env,
        memory.clone(),
        tally.clone(),
    );

    // 16 MiB live, 16 MiB shadow: within 32.
    let _live = memory.reserve_live(16 * MIB);
    run.compare(settled(1..=3)).await;
    assert_eq!(tally.counts().agree, 3);
    assert_eq!(memory.reserved().shadow_bytes, 16 << 20);

    // Another live instance: the shadow gives its room back at its next batch and skips it.
    let second = memory.reserve_live(16 * MIB);
    run.compare(settled(4..=5)).await;
    let counts = tally.counts();
    assert_eq!((counts.agree, counts.skipped_budget), (3, 2), "{counts:?}");
    assert_eq!(memory.reserved().shadow_bytes, 0);
    assert_eq!(memory.reserved().live_bytes, 32 << 20);

    // The live instance gone, the shadow fits again, in a fresh instance.
    drop(second);
    run.compare(settled(6..=8)).await;
    let counts = tally.counts();
    assert_eq!((counts.agree, counts.skipped_budget), (6, 2), "{counts:?}");
    assert_eq!(counts.skipped, 2);
    assert_eq!(memory.reserved().shadow_bytes, 16 << 20);

    drop(run);
    assert_eq!(
        memory.reserved().shadow_bytes,
        0,
        "given back when the run ends"
    );
    Ok(())
}
