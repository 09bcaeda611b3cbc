//! Hot-loading new component versions into a running `ruststream run`, driven as a user
//! would: a spawned host, the local Kinesis and DynamoDB servers, component files replaced on
//! disk and picked up on SIGHUP.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ruststream_host::{DynamoLeaseStore, LeaseKey, LeaseStore};
use ruststream_tests::e2e::put_json;
use ruststream_tests::guests;
use ruststream_tests::process::{Running, run_host};
use ruststream_tests::servers::{LocalDynamo, LocalKinesis};
use ruststream_tests::wait::{eventually, eventually_async};
use serde_json::json;

/// Explicit hash keys that land on the first and on the second of two shards.
const HASH_KEYS: [&str; 2] = ["1", "200000000000000000000000000000000000000"];

/// One `handled` line of the `swapper` app: which version handled which record where.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Handled {
    n: u64,
    version: String,
    shard: String,
    sequence: String,
}

/// The `handled` lines of a host log, in log order.
fn handled(log: &str) -> Vec<Handled> {
    log.lines()
        .filter(|line| line.contains(" handled "))
        .filter_map(|line| {
            let field = |name: &str| {
                line.split_whitespace()
                    .map(|token| token.strip_prefix("fields=").unwrap_or(token))
                    .find_map(|token| token.strip_prefix(&format!("{name}=")))
                    .map(|value| value.trim_matches('"').to_owned())
            };
            Some(Handled {
                n: field("n")?.parse().ok()?,
                version: field("version")?,
                shard: field("shard")?,
                sequence: field("sequence")?,
            })
        })
        .collect()
}

/// A tenants file running `component` for tenant `acme`, granted `streams`.
fn write_config(dir: &Path, component: &Path, streams: &[&str]) -> anyhow::Result<PathBuf> {
    let config = dir.join("tenants.toml");
    let streams: Vec<String> = streams.iter().map(|s| format!("{s:?}")).collect();
    std::fs::write(
        &config,
        format!(
            r#"
            [host]
            lease_store = "dynamodb"
            create_lease_table = true

            [[tenants]]
            name = "acme"
            components = ["{component}"]
            subscribe = [{streams}]
            limits = {{ log_lines_per_second = 100000, log_lines_per_call = 100000 }}
            "#,
            component = component.display(),
            streams = streams.join(", "),
        ),
    )?;
    Ok(config)
}

/// Replaces `target` with `source` as deploy tools do: a copy beside it, renamed over it.
fn replace_file(source: &Path, target: &Path) -> anyhow::Result<()> {
    let staged = target.with_extension("staged");
    std::fs::copy(source, &staged)?;
    std::fs::rename(&staged, target)?;
    Ok(())
}

fn temp_dir(name: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ruststream-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// A host running `swapper` (v1) for tenant `acme` from `dir`, its leases in `dynamo`.
struct HotHost {
    running: Running,
    log: PathBuf,
    component: PathBuf,
}

impl HotHost {
    fn start(
        dir: &Path,
        kinesis: &LocalKinesis,
        dynamo: &LocalDynamo,
        streams: &[&str],
        args: &[&str],
    ) -> anyhow::Result<Self> {
        let component = dir.join("swapper.wasm");
        replace_file(&guests::SWAP_V1.path(), &component)?;
        let config = write_config(dir, &component, streams)?;
        let log = dir.join("host.log");
        let mut all = vec![
            "--dynamodb-endpoint".to_owned(),
            dynamo.endpoint(),
            "--checkpoint-interval-ms".to_owned(),
            "200".to_owned(),
        ];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let running = run_host(&config, kinesis, &log, &all)?;
        Ok(Self {
            running,
            log,
            component,
        })
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn count(&self, text: &str) -> usize {
        self.output().matches(text).count()
    }

    /// Waits until the host has opened `shards` shards.
    async fn wait_reading(&self, shards: usize) -> anyhow::Result<()> {
        let open = eventually(Duration::from_secs(60), || {
            self.count("reading shard") >= shards
        })
        .await;
        anyhow::ensure!(open, "shards never opened: {}", self.output());
        Ok(())
    }

    /// Waits until `version` has handled records of both shards among the `handled` lines
    /// after the first `after`.
    async fn wait_for_both_shards(&self, version: &str, after: usize) -> anyhow::Result<()> {
        let both = eventually(Duration::from_secs(60), || {
            let lines = handled(&self.output());
            let fresh = &lines[after.min(lines.len())..];
            let shards: BTreeSet<&String> = fresh
                .iter()
                .filter(|h| h.version == version)
                .map(|h| &h.shard)
                .collect();
            shards.len() == HASH_KEYS.len()
        })
        .await;
        anyhow::ensure!(both, "version {version} never handled both shards");
        Ok(())
    }

    /// Puts `source` in place of the component file and sends SIGHUP.
    fn deploy(&self, source: &Path) -> anyhow::Result<()> {
        replace_file(source, &self.component)?;
        self.running.signal("HUP")
    }

    async fn stop(self) -> anyhow::Result<String> {
        self.running.signal("TERM")?;
        let HotHost {
            mut running, log, ..
        } = self;
        let exit = tokio::task::spawn_blocking(move || running.0.wait()).await??;
        let output = std::fs::read_to_string(&log).unwrap_or_default();
        anyhow::ensure!(exit.success(), "exit {exit:?}: {output}");
        Ok(output)
    }
}

/// Writes `{"n": 0}`, `{"n": 1}`, ... to `numbered`, alternating between its two shards, until
/// `stop` is set. Returns how many it wrote.
fn produce(
    kinesis: aws_sdk_kinesis::Client,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<anyhow::Result<u64>> {
    tokio::spawn(async move {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            let key = HASH_KEYS[(n % 2) as usize];
            put_json(&kinesis, "numbered", &json!({ "n": n }), Some(key)).await?;
            n += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(n)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_swaps_under_load_lose_nothing_and_handle_nothing_twice() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    kinesis.create_stream("numbered", 2).await?;
    kinesis.create_stream("tallied", 1).await?;
    let dir = temp_dir("hotload-swaps")?;
    let host = HotHost::start(&dir, &kinesis, &dynamo, &["numbered", "tallied"], &[])?;
    host.wait_reading(2).await?;
    let store = DynamoLeaseStore::new(dynamo.client().await, "ruststream-acme-swapper");

    let stop = Arc::new(AtomicBool::new(false));
    let producer = produce(kinesis.client().await, stop.clone());
    let versions = [
        (guests::SWAP_V2, "2.0.0"),
        (guests::SWAP_V1, "1.0.0"),
        (guests::SWAP_V2, "2.0.0"),
    ];
    host.wait_for_both_shards("1.0.0", 0).await?;
    for (round, (guest, version)) in versions.iter().enumerate() {
        let before = handled(&host.output()).len();
        host.deploy(&guest.path())?;
        let live = eventually(Duration::from_secs(60), || {
            host.count("new version live") > round
        })
        .await;
        anyhow::ensure!(live, "swap {round} never happened: {}", host.output());
        host.wait_for_both_shards(version, before).await?;
        if *version == "1.0.0" {
            // v1 has no `tally`: the swap stopped it, which released its lease.
            let key = LeaseKey::new("tallied", "shardId-000000000000");
            let released = eventually_async(Duration::from_secs(30), async || {
                store
                    .read(&key)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|row| row.owner.is_none())
            })
            .await;
            anyhow::ensure!(released, "the stopped subscription kept its lease");
        }
    }
    stop.store(true, Ordering::Relaxed);
    let written = producer.await??;
    let all_handled = eventually(Duration::from_secs(60), || {
        let seen: BTreeSet<u64> = handled(&host.output()).iter().map(|h| h.n).collect();
        (0..written).all(|n| seen.contains(&n))
    })
    .await;
    anyhow::ensure!(all_handled, "records missing: {}", host.output());
    // The checkpoint writer runs every 200 ms; let it catch up before the graceful stop, which
    // flushes anyway.
    let output = host.stop().await?;

    let lines = handled(&output);
    let mut seen = BTreeMap::new();
    for line in &lines {
        *seen.entry(line.n).or_insert(0) += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, count)| **count > 1).collect();
    assert!(twice.is_empty(), "handled more than once: {twice:?}");
    assert_eq!(seen.len() as u64, written, "every record handled");

    // Per shard: records in shard order, and the versions in the order they were deployed.
    for shard in lines
        .iter()
        .map(|h| h.shard.clone())
        .collect::<BTreeSet<_>>()
    {
        let on_shard: Vec<&Handled> = lines.iter().filter(|h| h.shard == shard).collect();
        for pair in on_shard.windows(2) {
            assert!(
                pair[0].n < pair[1].n,
                "order broken on {shard}: {:?} then {:?}",
                pair[0],
                pair[1]
            );
        }
        let mut changes: Vec<&str> = Vec::new();
        for line in &on_shard {
            if changes.last() != Some(&line.version.as_str()) {
                changes.push(&line.version);
            }
        }
        assert_eq!(changes, ["1.0.0", "2.0.0", "1.0.0", "2.0.0"], "on {shard}");
        // No checkpoint gap: the stored checkpoint is the last record handled on the shard.
        let row = store
            .read(&LeaseKey::new("numbered", &shard))
            .await?
            .ok_or_else(|| anyhow::anyhow!("no lease row for {shard}"))?;
        let last = on_shard.last().map(|h| h.sequence.clone());
        assert_eq!(row.checkpoint, last, "checkpoint of {shard}");
    }
    // v2's extra subscription started with each swap to it and stopped with the swap away.
    assert_eq!(
        output.matches(r#"started=["tally"]"#).count(),
        2,
        "{output}"
    );
    assert_eq!(
        output.matches(r#"stopped=["tally"]"#).count(),
        1,
        "{output}"
    );
    assert_eq!(
        output.matches("reading shard stream=tallied").count(),
        2,
        "{output}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_that_traps_on_every_record_is_rolled_back_and_loses_nothing()
-> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    kinesis.create_stream("numbered", 2).await?;
    let dir = temp_dir("hotload-rollback")?;
    let args = ["--rollout-calls", "10", "--rollout-margin", "0.2"];
    let host = HotHost::start(&dir, &kinesis, &dynamo, &["numbered"], &args)?;
    host.wait_reading(2).await?;

    let stop = Arc::new(AtomicBool::new(false));
    let producer = produce(kinesis.client().await, stop.clone());
    let warmed = eventually(Duration::from_secs(60), || {
        handled(&host.output()).len() >= 20
    })
    .await;
    anyhow::ensure!(warmed, "v1 never handled records: {}", host.output());
    host.deploy(&guests::SWAP_TRAP.path())?;
    let rolled_back = eventually(Duration::from_secs(60), || {
        host.count("rolled back to the previous version") == 1
    })
    .await;
    anyhow::ensure!(rolled_back, "no rollback: {}", host.output());
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let written = producer.await??;
    // Every record, those v3 trapped on included, is handled by v1 in the end.
    let all_handled = eventually(Duration::from_secs(60), || {
        let seen: BTreeSet<u64> = handled(&host.output()).iter().map(|h| h.n).collect();
        (0..written).all(|n| seen.contains(&n))
    })
    .await;
    anyhow::ensure!(all_handled, "records lost: {}", host.output());
    let output = host.stop().await?;
    assert!(
        handled(&output).iter().all(|h| h.version == "1.0.0"),
        "only v1 handles records"
    );
    assert!(output.contains("handler call failed"), "v3 did trap");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_versions_are_refused_and_the_running_one_goes_on() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    kinesis.create_stream("numbered", 1).await?;
    let dir = temp_dir("hotload-refusals")?;
    // Not granted `tallied`, which v2 reads.
    let host = HotHost::start(&dir, &kinesis, &dynamo, &["numbered"], &[])?;
    host.wait_reading(1).await?;
    let client = kinesis.client().await;

    let garbage = dir.join("garbage.wasm");
    std::fs::write(&garbage, b"\0asm\x0d\0\x01\0 not really a component")?;
    let refusals = [
        (garbage, "not a valid component"),
        (guests::SWAP_V2.path(), "tallied"),
        (guests::SWAP_RENAMED.path(), "`renamed`"),
    ];
    for (n, (source, reason)) in refusals.iter().enumerate() {
        host.deploy(source)?;
        let refused = eventually(Duration::from_secs(60), || {
            host.output()
                .lines()
                .filter(|l| l.contains("version refused"))
                .nth(n)
                .is_some_and(|l| l.contains(reason))
        })
        .await;
        anyhow::ensure!(refused, "refusal {n} ({reason}) missing: {}", host.output());
        // v1 goes on serving.
        put_json(&client, "numbered", &json!({ "n": n }), None).await?;
        let served = eventually(Duration::from_secs(30), || {
            handled(&host.output())
                .iter()
                .any(|h| h.n == n as u64 && h.version == "1.0.0")
        })
        .await;
        anyhow::ensure!(served, "v1 stopped serving after refusal {n}");
    }
    let output = host.stop().await?;
    assert_eq!(output.matches("new version live").count(), 0);
    Ok(())
}
