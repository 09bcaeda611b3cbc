//! Start and scale: how fast a cached component loads, and what idle tenants and active
//! shards cost in memory.
//!
//! `cargo bench -p ruststream-tests --bench scale` prints:
//!
//! - **cached load**: `LoadedComponent::from_file` in a fresh runtime whose artifact cache
//!   holds the component (read, hash, digest check, deserialize, link, instantiate under the
//!   tenant's limits, `describe`, validate), median of 20; and the same in a runtime that
//!   already holds the component for another tenant;
//! - **idle tenants**: RSS and start time of 1 000 tenants of one component, each with one
//!   subscription and its shard pipeline, no records flowing (instances are created on the
//!   first record, so an idle pipeline holds none); and of 1 000 tenants of 1 000 distinct
//!   components (each a copy of one with a different custom section, so each is compiled,
//!   cached and held on its own);
//! - **active shards**: the RSS each pipeline adds once it has handled a record (its instance,
//!   linear memory and batch buffers).
//!
//! RSS is this process's `VmRSS`; the harness's own share (the tokio runtime, the loaded
//! engine) is measured before the tenants and subtracted.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ruststream_runtime::{
    Delivery, LoadedComponent, Runtime, RuntimeConfig, ShardPipeline, Tenant,
    component::compile::CompileConfig, log::LogSink, record::Bytes,
};
use ruststream_tests::bench::{pipeline, status_kib, target_dir};
use ruststream_tests::guests;

const IDLE_TENANTS: usize = 1_000;
const DISTINCT_COMPONENTS: usize = 1_000;
const ACTIVE_SHARDS: usize = 100;
const LOADS: usize = 20;

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let dir = target_dir()?.join("scale");
    let cache = dir.join("artifacts");
    std::fs::create_dir_all(&cache)?;
    let component = guests::BENCH_BOOK.path();

    cached_load(&cache, &component).await?;

    let copies = distinct_copies(&component, &dir.join("distinct"), DISTINCT_COMPONENTS)?;
    let runtime = runtime(&cache)?;
    let before = rss()?;
    let (started, kept) = idle_tenants(&runtime, &copies).await?;
    let distinct = rss()?.saturating_sub(before);
    println!(
        "idle tenants, distinct components: {DISTINCT_COMPONENTS} started in {:.2} s (compiled \
         on the first run, from the artifact cache after), RSS {:.0} MiB ({:.0} KiB per tenant)",
        started.as_secs_f64(),
        mib(distinct),
        kib(distinct) / DISTINCT_COMPONENTS as f64
    );
    let baseline = rss()?;
    let same = vec![component; IDLE_TENANTS];
    let (started, mut pipelines) = idle_tenants(&runtime, &same).await?;
    let idle = rss()?.saturating_sub(baseline);
    println!(
        "\nidle tenants, one component: {IDLE_TENANTS} started in {:.2} s, RSS {:.0} MiB \
         ({:.0} KiB per tenant)",
        started.as_secs_f64(),
        mib(idle),
        kib(idle) / IDLE_TENANTS as f64
    );

    let before = rss()?;
    for (index, pipeline) in pipelines.iter_mut().take(ACTIVE_SHARDS).enumerate() {
        pipeline.deliver(vec![delivery(index)]).await;
        anyhow::ensure!(pipeline.is_settled(), "pipeline {index} did not settle");
    }
    let active = rss()?.saturating_sub(before);
    println!(
        "active shards: {ACTIVE_SHARDS} pipelines after one record each, +{:.0} MiB \
         ({:.0} KiB per active shard)",
        mib(active),
        kib(active) / ACTIVE_SHARDS as f64
    );

    drop(kept);
    Ok(())
}

/// The median time of a load from the artifact cache, in a fresh runtime and in one that
/// already holds the component.
async fn cached_load(cache: &Path, component: &Path) -> anyhow::Result<()> {
    let tenant = Arc::new(Tenant::new("warm"));
    load(&runtime(cache)?, component, &tenant).await?;
    let mut fresh = Vec::with_capacity(LOADS);
    let mut shared = Vec::with_capacity(LOADS);
    for _ in 0..LOADS {
        let runtime = runtime(cache)?;
        let started = Instant::now();
        let first = load(&runtime, component, &tenant).await?;
        fresh.push(started.elapsed());
        let started = Instant::now();
        load(&runtime, component, &tenant).await?;
        shared.push(started.elapsed());
        drop(first);
    }
    println!(
        "\ncached load: {:.1} ms from the artifact cache in a fresh runtime, {:.1} ms when the \
         runtime holds the component already (medians of {LOADS})",
        millis(median(&mut fresh)),
        millis(median(&mut shared))
    );
    Ok(())
}

/// Starts a tenant of each of `components` at once, one pipeline each, as a host starts
/// its tenants; returns how long that took.
async fn idle_tenants(
    runtime: &Runtime,
    components: &[PathBuf],
) -> anyhow::Result<(Duration, Vec<ShardPipeline>)> {
    let started = Instant::now();
    let loads: Vec<_> = components
        .iter()
        .enumerate()
        .map(|(index, component)| {
            let (runtime, component) = (runtime.clone(), component.clone());
            tokio::spawn(async move {
                let tenant = Arc::new(Tenant::new(format!("tenant-{index}")));
                let loaded = load(&runtime, &component, &tenant).await?;
                anyhow::Ok(pipeline(&loaded, tenant)?)
            })
        })
        .collect();
    let mut pipelines = Vec::with_capacity(components.len());
    for load in loads {
        pipelines.push(load.await??);
    }
    Ok((started.elapsed(), pipelines))
}

fn runtime(cache: &Path) -> anyhow::Result<Runtime> {
    Ok(Runtime::new(RuntimeConfig {
        compile: CompileConfig {
            cache: Some(cache.to_owned()),
            // In process: our own guest examples are trusted, and a bench binary does not
            // serve the compile worker.
            ..CompileConfig::in_process()
        },
        ..RuntimeConfig::default()
    })?)
}

async fn load(
    runtime: &Runtime,
    component: &Path,
    tenant: &Tenant,
) -> anyhow::Result<LoadedComponent> {
    LoadedComponent::from_file(runtime, component, tenant.policy(), &LogSink::new())
        .await
        .with_context(|| format!("loading {}", component.display()))
}

/// `count` components that differ from `component` only in a custom section at the end: the
/// same code under distinct content hashes.
fn distinct_copies(component: &Path, dir: &Path, count: usize) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let bytes = std::fs::read(component)?;
    (0..count)
        .map(|index| {
            let name = b"scale-copy";
            let payload = (index as u32).to_le_bytes();
            let mut copy = bytes.clone();
            // A custom section: id 0, size, name (length-prefixed), payload.
            copy.push(0);
            copy.push((1 + name.len() + payload.len()) as u8);
            copy.push(name.len() as u8);
            copy.extend_from_slice(name);
            copy.extend_from_slice(&payload);
            let path = dir.join(format!("copy-{index}.wasm"));
            std::fs::write(&path, copy)?;
            Ok(path)
        })
        .collect()
}

fn delivery(index: usize) -> Delivery {
    Delivery {
        sequence_number: format!("4960{:052}", index + 1).into(),
        partition_key: "key".into(),
        arrival_ms: 1_767_225_600_000,
        payload: Bytes::from_static(br#"{"id":1000000,"amount":37}"#),
        headers: Vec::new(),
        retry_count: 0,
        due_at_ms: None,
        copy: None,
    }
}

/// This process's resident set, in bytes.
fn rss() -> anyhow::Result<u64> {
    Ok(status_kib("self", "VmRSS")? * 1024)
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn kib(bytes: u64) -> f64 {
    bytes as f64 / 1024.0
}
