//! What a loaded component holds of its compiled code: an artifact mapped from the compile
//! cache is released once its load ends (the pages `describe` touched go back to the page
//! cache), and a call maps back the pages it runs. A host of a thousand idle tenants holds
//! none of their code. Read from `/proc/self/smaps`: pages, not timings.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, ensure};
use ruststream_runtime::component::compile::CompileConfig;
use ruststream_runtime::cpu::Compute;
use ruststream_runtime::log::LogSink;
use ruststream_runtime::testing::InProcessStreams;
use ruststream_runtime::{LoadedComponent, Outcome, Runtime, RuntimeConfig, SystemClock, Tenant};
use ruststream_tests::scratch::ScratchDir;
use ruststream_tests::{bench, guests};

#[tokio::test]
async fn a_component_mapped_from_the_cache_holds_none_of_its_code_until_it_is_called()
-> anyhow::Result<()> {
    let cache = ScratchDir::new("code-released")?;
    let config = RuntimeConfig {
        compute: Compute::Inline,
        compile: CompileConfig {
            cache: Some(cache.to_path_buf()),
            ..CompileConfig::in_process()
        },
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config)?;
    let path = guests::BENCH_BOOK.path();
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let tenant = Tenant::trusted("code-pages");
    let component =
        LoadedComponent::from_bytes(&runtime, "book", bytes, tenant.policy(), &LogSink::new())
            .await?;

    let loaded = mapped_from(&cache)?;
    ensure!(
        loaded.size_kib > 0,
        "the artifact is mapped from the cache: {loaded:?}"
    );
    ensure!(
        loaded.resident_kib == 0,
        "none of the artifact's pages is held once the load ends: {loaded:?}"
    );

    let clock = Arc::new(SystemClock);
    let streams = Arc::new(InProcessStreams::new(clock.clone()));
    let env = component.env(tenant.policy().clone(), streams, clock, LogSink::new());
    let mut instance = component.instance(env);
    let deliveries = Arc::new(bench::consume_json_batch(0..10));
    let outcomes = bench::call_batch(&mut instance, &deliveries).await?;
    ensure!(
        outcomes.iter().all(|o| *o == Outcome::Ack),
        "the released code runs as before: {outcomes:?}"
    );
    let called = mapped_from(&cache)?;
    ensure!(
        called.resident_kib > 0,
        "the call mapped back the pages it ran: {called:?}"
    );
    drop(instance);
    drop(component);
    std::fs::remove_dir_all(&cache)?;
    Ok(())
}

/// The size and resident part of this process's mappings of files in `dir`, in KiB.
#[derive(Debug, Default)]
struct Mapped {
    size_kib: u64,
    resident_kib: u64,
}

fn mapped_from(dir: &Path) -> anyhow::Result<Mapped> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let dir = dir.to_string_lossy();
    let mut mapped = Mapped::default();
    let mut inside = false;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if !first.ends_with(':') {
            // A mapping's header: range, permissions, offset, device, inode, path.
            inside = fields.nth(4).is_some_and(|file| file.starts_with(&*dir));
            continue;
        }
        let kib = fields
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        match first {
            "Size:" if inside => mapped.size_kib += kib,
            "Rss:" if inside => mapped.resident_kib += kib,
            _ => {}
        }
    }
    Ok(mapped)
}
