//! Hot-loading new component versions into a running `ruststream run`, driven as a user
//! would: a spawned host, the local Kinesis and DynamoDB servers, component files replaced on
//! disk (picked up by the host's file watch, or on SIGHUP) or uploaded with `ruststream
//! deploy`, and the host's state read with `ruststream status`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ruststream_kinesis::{LeaseStore, lease::LeaseKey};
use ruststream_tests::binary;
use ruststream_tests::e2e::{put_json, put_json_batch};
use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::guests;
use ruststream_tests::http::{AdminApi, http};
use ruststream_tests::versioned::{Handled, handled};
use ruststream_tests::wait::{eventually, eventually_async, poll_for};
use serde_json::json;

/// Explicit hash keys that land on the first and on the second of two shards.
const HASH_KEYS: [&str; 2] = ["1", "200000000000000000000000000000000000000"];

/// A tenants file running `component` for tenant `acme`, granted `streams`, with `tenant_keys`
/// (lines of TOML) added to its section.
fn write_config(
    dir: &Path,
    component: &Path,
    streams: &[&str],
    tenant_keys: &str,
) -> anyhow::Result<PathBuf> {
    let config = dir.join("tenants.toml");
    let streams: Vec<String> = streams.iter().map(|s| format!("{s:?}")).collect();
    std::fs::write(
        &config,
        format!(
            r#"
            [[tenants]]
            name = "acme"
            components = ["{component}"]
            subscribe = [{streams}]
            limits = {{ log_lines_per_second = 100000, log_lines_per_call = 100000 }}
            {tenant_keys}
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

/// A host running `versioned` (v1) for tenant `acme` from the fixture's folder, its leases
/// in the fixture's DynamoDB.
struct HotHost {
    host: BinaryHost,
    component: PathBuf,
}

impl HotHost {
    fn start(fixture: &Fixture, streams: &[&str], args: &[&str]) -> anyhow::Result<Self> {
        Self::start_with(fixture, streams, "", args)
    }

    /// [`start`](Self::start) with `tenant_keys` in the tenant's section.
    fn start_with(
        fixture: &Fixture,
        streams: &[&str],
        tenant_keys: &str,
        args: &[&str],
    ) -> anyhow::Result<Self> {
        Self::start_in(fixture, fixture.dir(), streams, tenant_keys, args)
    }

    /// [`start_with`](Self::start_with) from `dir`, a folder of the fixture's.
    fn start_in(
        fixture: &Fixture,
        dir: &Path,
        streams: &[&str],
        tenant_keys: &str,
        args: &[&str],
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let component = dir.join("versioned.wasm");
        replace_file(&guests::VERSIONED_V1.path(), &component)?;
        let config = write_config(dir, &component, streams, tenant_keys)?;
        let log = dir.strip_prefix(fixture.dir())?.join("host.log");
        let host = fixture
            .host(&config)
            .log(&log.display().to_string())
            .dynamo_leases()
            .args(&["--checkpoint-interval", "200ms"])
            .args(args)
            .start()?;
        Ok(Self { host, component })
    }

    fn output(&self) -> String {
        self.host.output()
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

    /// Puts `source` in place of the component file: the host's file watch picks it up.
    fn land(&self, source: &Path) -> anyhow::Result<()> {
        replace_file(source, &self.component)
    }

    /// Runs `ruststream VERB ARGS --admin URL --state-dir DIR` against this host's admin API
    /// (the verb reads the host's token in its state directory); returns whether it succeeded
    /// and what it printed.
    async fn cli(&self, args: &[&str]) -> anyhow::Result<(bool, String)> {
        let addr = self.host.admin_addr().await?;
        let out = std::process::Command::new(binary())
            .args(args)
            .args(["--admin", &format!("http://{addr}")])
            .arg("--state-dir")
            .arg(self.host.state_dir())
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        Ok((out.status.success(), text))
    }

    async fn stop(self) -> anyhow::Result<String> {
        self.host.stop().await
    }
}

/// Writes `{"id": 0}`, `{"id": 1}`, ... to `events`, alternating between its two shards, until
/// `stop` is set. Returns how many it wrote.
fn produce(
    kinesis: aws_sdk_kinesis::Client,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<anyhow::Result<u64>> {
    tokio::spawn(async move {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            let key = HASH_KEYS[(n % 2) as usize];
            put_json(&kinesis, "events", &json!({ "id": n }), Some(key)).await?;
            n += 1;
            // The producer's pace, not a wait.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(n)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_swaps_under_load_lose_nothing_and_handle_nothing_twice() -> anyhow::Result<()> {
    let fixture = Fixture::builder("hotload-swaps")
        .stream("events", 2)
        .stream("legacy", 1)
        .stream("audit", 1)
        .dynamo()
        .start()
        .await?;
    let streams = ["events", "legacy", "audit"];
    let host = HotHost::start(&fixture, &streams, &[])?;
    host.wait_reading(3).await?;
    let store = fixture.lease_store("ruststream-acme-versioned").await;

    let stop = Arc::new(AtomicBool::new(false));
    let producer = produce(fixture.client().clone(), stop.clone());
    let versions = [
        (guests::VERSIONED_V2, "2"),
        (guests::VERSIONED_V1, "1"),
        (guests::VERSIONED_V2, "2"),
    ];
    host.wait_for_both_shards("1", 0).await?;
    for (round, (guest, version)) in versions.iter().enumerate() {
        let before = handled(&host.output()).len();
        host.land(&guest.path())?;
        let live = eventually(Duration::from_secs(60), || {
            host.count("new version live") > round
        })
        .await;
        anyhow::ensure!(live, "swap {round} never happened: {}", host.output());
        host.wait_for_both_shards(version, before).await?;
        // Each swap shows in the status: the version serving, and the one it replaced.
        let (ok, text) = host.cli(&["status"]).await?;
        let previous = if *version == "2" { "1.0.0" } else { "2.0.0" };
        assert!(ok, "{text}");
        assert!(
            text.contains(&format!("app versioned {version}.0.0 (versioned, #")),
            "{text}"
        );
        assert!(
            text.contains(&format!("previous {previous} (versioned, #")),
            "{text}"
        );
        let (ok, json) = host.cli(&["status", "--json"]).await?;
        assert!(ok, "{json}");
        let status: serde_json::Value = serde_json::from_str(&json)?;
        let app = &status["tenants"][0]["apps"][0];
        assert_eq!(app["version"], format!("{version}.0.0"), "{json}");
        assert_eq!(app["previous"]["version"], previous, "{json}");
        if *version == "1" {
            // v1 has no `audit`: the swap stopped it, which released its lease.
            let key = LeaseKey::new("audit", "shardId-000000000000");
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
        assert_eq!(changes, ["1", "2", "1", "2"], "on {shard}");
        // No checkpoint gap: the stored checkpoint is the last record handled on the shard.
        let row = store
            .read(&LeaseKey::new("events", &shard))
            .await?
            .ok_or_else(|| anyhow::anyhow!("no lease row for {shard}"))?;
        let last = on_shard.last().map(|h| h.sequence.clone());
        assert_eq!(row.checkpoint, last, "checkpoint of {shard}");
    }
    // Each version's own subscription started with each swap to it and stopped with each
    // swap away from it.
    for (subscription, started, stopped) in [("audit", 2, 1), ("legacy", 1, 2)] {
        let count = |what: &str| {
            output
                .matches(&format!(r#"{what}=["{subscription}"]"#))
                .count()
        };
        assert_eq!(
            count("started"),
            started,
            "{subscription} started: {output}"
        );
        assert_eq!(
            count("stopped"),
            stopped,
            "{subscription} stopped: {output}"
        );
    }
    assert_eq!(output.matches("reading shard stream=audit").count(), 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_that_traps_on_every_record_is_rolled_back_and_loses_nothing()
-> anyhow::Result<()> {
    let fixture = Fixture::builder("hotload-rollback")
        .stream("events", 2)
        .stream("legacy", 1)
        .dynamo()
        .start()
        .await?;
    let args = ["--rollout-calls", "10", "--rollout-margin", "0.2"];
    let host = HotHost::start(&fixture, &["events", "legacy"], &args)?;
    host.wait_reading(3).await?;

    let stop = Arc::new(AtomicBool::new(false));
    let producer = produce(fixture.client().clone(), stop.clone());
    let warmed = eventually(Duration::from_secs(60), || {
        handled(&host.output()).len() >= 20
    })
    .await;
    anyhow::ensure!(warmed, "v1 never handled records: {}", host.output());
    // Uploaded through the admin API.
    let trap = guests::VERSIONED_TRAP.path();
    let trap = trap
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("path not UTF-8"))?;
    let (deployed, text) = host
        .cli(&["deploy", "acme", trap, "--name", "versioned"])
        .await?;
    anyhow::ensure!(deployed, "deploy failed: {text}");
    let rolled_back = eventually(Duration::from_secs(60), || {
        host.count("rolled back to the previous version") == 1
    })
    .await;
    anyhow::ensure!(rolled_back, "no rollback: {}", host.output());
    // The producer runs on until v1 has handled records written after the rollback.
    let at_rollback = handled(&host.output()).iter().map(|h| h.n).max();
    let after = eventually(Duration::from_secs(60), || {
        handled(&host.output())
            .iter()
            .any(|h| h.version == "1" && Some(h.n) > at_rollback.map(|n| n + 10))
    })
    .await;
    anyhow::ensure!(
        after,
        "v1 handled nothing after the rollback: {}",
        host.output()
    );
    stop.store(true, Ordering::Relaxed);
    let written = producer.await??;
    // Every record, those v4 trapped on included, is handled by v1 in the end.
    let all_handled = eventually(Duration::from_secs(60), || {
        let seen: BTreeSet<u64> = handled(&host.output()).iter().map(|h| h.n).collect();
        (0..written).all(|n| seen.contains(&n))
    })
    .await;
    anyhow::ensure!(all_handled, "records lost: {}", host.output());
    let (ok, text) = host.cli(&["status"]).await?;
    assert!(ok && text.contains("rolled back 1x"), "{text}");
    assert!(text.contains("rollout rolled back:"), "{text}");
    let output = host.stop().await?;
    assert!(
        handled(&output).iter().all(|h| h.version == "1"),
        "only v1 handles records"
    );
    assert!(output.contains("handler call failed"), "v4 did trap");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_versions_are_refused_and_the_running_one_goes_on() -> anyhow::Result<()> {
    let fixture = Fixture::builder("hotload-refusals")
        .stream("events", 1)
        .stream("legacy", 1)
        .dynamo()
        .start()
        .await?;
    // Not granted `audit`, which v2 reads.
    let host = HotHost::start(&fixture, &["events", "legacy"], &[])?;
    host.wait_reading(2).await?;
    let client = fixture.client();

    let garbage = fixture.dir().join("garbage.wasm");
    std::fs::write(&garbage, b"\0asm\x0d\0\x01\0 not really a component")?;
    let refusals = [
        (garbage, "not a valid component"),
        (guests::VERSIONED_V2.path(), "`audit`"),
        (guests::VERSIONED_RENAMED.path(), "`renamed`"),
    ];
    for (n, (source, reason)) in refusals.iter().enumerate() {
        host.land(source)?;
        host.host.signal("HUP")?;
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
        put_json(client, "events", &json!({ "id": n }), None).await?;
        let served = eventually(Duration::from_secs(30), || {
            handled(&host.output())
                .iter()
                .any(|h| h.n == n as u64 && h.version == "1")
        })
        .await;
        anyhow::ensure!(served, "v1 stopped serving after refusal {n}");
    }
    let (ok, text) = host.cli(&["status"]).await?;
    assert!(ok && text.contains("refused versioned"), "{text}");
    assert!(text.contains("app versioned 1.0.0"), "{text}");
    // Nothing was swapped, so there is nothing to roll back to.
    let (ok, text) = host.cli(&["rollback", "acme", "versioned"]).await?;
    assert!(!ok && text.contains("no previous version"), "{text}");
    let output = host.stop().await?;
    assert_eq!(output.matches("new version live").count(), 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenant_is_paused_and_resumed_and_readiness_names_a_missing_stream()
-> anyhow::Result<()> {
    // `legacy`, which v1 also reads, does not exist.
    let fixture = Fixture::builder("hotload-admin")
        .stream("events", 1)
        .dynamo()
        .start()
        .await?;
    let host = HotHost::start(&fixture, &["events", "legacy"], &[])?;
    host.wait_reading(1).await?;
    let addr = host.host.admin_addr().await?;
    let (code, body) = http(&addr, "GET", "/healthz", b"")?;
    assert_eq!(code, 200, "{body}");
    let unready = poll_for(Duration::from_secs(60), async || {
        let (code, body) = http(&addr, "GET", "/readyz", b"").ok()?;
        (code == 503 && body.contains("legacy")).then_some(body)
    })
    .await;
    let unready =
        unready.ok_or_else(|| anyhow::anyhow!("readyz never named the missing stream"))?;
    assert!(
        unready.contains("stream `legacy` does not exist in region us-east-1"),
        "{unready}"
    );

    let (ok, text) = host.cli(&["pause", "acme"]).await?;
    assert!(ok, "{text}");
    let (_, status) = host.cli(&["status"]).await?;
    assert!(
        status.contains("tenant acme (paused: paused by an operator)"),
        "{status}"
    );
    put_json(fixture.client(), "events", &json!({ "id": 1 }), None).await?;
    let (ok, text) = host.cli(&["resume", "acme"]).await?;
    assert!(ok, "{text}");
    let handled_after_resume = eventually(Duration::from_secs(30), || {
        handled(&host.output()).iter().any(|h| h.n == 1)
    })
    .await;
    assert!(handled_after_resume, "{}", host.output());
    let admin = AdminApi::new(&addr, &host.host.state_dir())?;
    let (code, _) = admin.call("POST", "/v1/tenants/nobody/pause", None, b"")?;
    assert_eq!(code, 404);
    host.stop().await?;
    Ok(())
}

/// How many times each record was handled, by any version.
fn times_handled(log: &str) -> BTreeMap<u64, usize> {
    let mut times = BTreeMap::new();
    for h in handled(log) {
        *times.entry(h.n).or_default() += 1;
    }
    times
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_leaves_the_old_version_serving_unquarantined_and_handles_each_record_once()
-> anyhow::Result<()> {
    let fixture = Fixture::builder("hotload-rollback-quarantine")
        .stream("events", 2)
        .stream("legacy", 1)
        .dynamo()
        .start()
        .await?;
    // Three failed calls decide the rollout; sixty in a row quarantine the tenant. A thousand
    // records reach the trapping version in two reads: the rest of what it is handed when the
    // rollback is decided must neither run on it nor quarantine the version restored.
    let args = ["--rollout-calls", "10", "--rollout-margin", "0.2"];
    let host = HotHost::start_with(
        &fixture,
        &["events", "legacy"],
        "quarantine_after = 60",
        &args,
    )?;
    host.wait_reading(3).await?;
    let client = fixture.client();
    let warm: Vec<_> = (0..20).map(|n| json!({ "id": n })).collect();
    put_json_batch(client, "events", &warm).await?;
    host.wait_for_both_shards("1", 0).await?;
    // By the file: v4 drops `legacy`, and the rollback adds it again.
    host.land(&guests::VERSIONED_TRAP.path())?;
    let live = eventually(Duration::from_secs(60), || {
        host.count("new version live") == 1
    })
    .await;
    anyhow::ensure!(live, "v4 never went live: {}", host.output());
    let backlog: Vec<_> = (20..1_020).map(|n| json!({ "id": n })).collect();
    put_json_batch(client, "events", &backlog).await?;
    let rolled_back = eventually(Duration::from_secs(60), || {
        host.count("rolled back to the previous version") == 1
    })
    .await;
    anyhow::ensure!(rolled_back, "no rollback: {}", host.output());
    let all_handled = eventually(Duration::from_secs(90), || {
        times_handled(&host.output()).len() == 1_020
    })
    .await;
    anyhow::ensure!(all_handled, "records lost: {}", host.output());
    let output = host.stop().await?;
    // The trapping version's own failures may quarantine the tenant before the rollback; none
    // after it does, and the rollback lifts the first.
    let rollback = output
        .find("rolled back to the previous version")
        .unwrap_or(output.len());
    assert!(
        !output[rollback..].contains("tenant quarantined"),
        "quarantined after the rollback: {output}"
    );
    if output[..rollback].contains("tenant quarantined") {
        assert!(output[rollback..].contains("quarantine lifted"), "{output}");
    }
    let twice: Vec<(u64, usize)> = times_handled(&output)
        .into_iter()
        .filter(|(_, times)| *times > 1)
        .collect();
    assert!(twice.is_empty(), "handled more than once: {twice:?}");
    assert!(handled(&output).iter().all(|h| h.version == "1"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_on_a_fresh_stream_reads_what_the_bad_version_held_and_a_restart_loses_nothing()
-> anyhow::Result<()> {
    let fixture = Fixture::builder("hotload-rollback-fresh")
        .stream("events", 1)
        .stream("legacy", 1)
        .dynamo()
        .start()
        .await?;
    let args = ["--rollout-calls", "10", "--rollout-margin", "0.2"];
    let host = HotHost::start(&fixture, &["events", "legacy"], &args)?;
    host.wait_reading(2).await?;
    // Nothing was ever checkpointed on `events`: the trapping version holds its first five.
    host.land(&guests::VERSIONED_TRAP.path())?;
    let live = eventually(Duration::from_secs(60), || {
        host.count("new version live") == 1
    })
    .await;
    anyhow::ensure!(live, "v4 never went live: {}", host.output());
    let client = fixture.client();
    for n in 0..5 {
        put_json(client, "events", &json!({ "id": n }), None).await?;
    }
    let rolled_back = eventually(Duration::from_secs(60), || {
        host.count("rolled back to the previous version") == 1
    })
    .await;
    anyhow::ensure!(rolled_back, "no rollback: {}", host.output());
    put_json(client, "events", &json!({ "id": 5 }), None).await?;
    let six = eventually(Duration::from_secs(60), || {
        times_handled(&host.output()).len() == 6
    })
    .await;
    anyhow::ensure!(six, "v1 never handled all six: {}", host.output());
    let first = host.stop().await?;
    // The file on disk is v4 again at the restart: put v1 back, as an operator would.
    let second = fixture.dir().join("second");
    let again = HotHost::start_in(&fixture, &second, &["events", "legacy"], "", &args)?;
    again.wait_reading(2).await?;
    put_json(client, "events", &json!({ "id": 6 }), None).await?;
    let seventh = eventually(Duration::from_secs(60), || {
        times_handled(&again.output()).contains_key(&6)
    })
    .await;
    anyhow::ensure!(
        seventh,
        "the restarted host never read on: {}",
        again.output()
    );
    let second = again.stop().await?;
    let mut times = times_handled(&first);
    for (n, count) in times_handled(&second) {
        *times.entry(n).or_default() += count;
    }
    assert_eq!(
        times,
        (0..7).map(|n| (n, 1)).collect::<BTreeMap<u64, usize>>(),
        "each record handled once, across the rollback and the restart"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigterm_during_a_reload_that_stops_an_app_still_flushes_and_releases()
-> anyhow::Result<()> {
    let fixture = Fixture::builder("hotload-sigterm-reload")
        .stream("events", 1)
        .stream("legacy", 1)
        .stream("paced", 1)
        .stream("singly", 1)
        .dynamo()
        .start()
        .await?;
    // A second tenant, `beta`, runs the pacer: its calls take seconds, so stopping it does.
    let beta = format!(
        "\n[[tenants]]\nname = \"beta\"\ncomponents = [\"{}\"]\nsubscribe = [\"paced\", \"singly\"]\n",
        guests::PACER.path().display()
    );
    let host = HotHost::start_with(&fixture, &["events", "legacy"], &beta, &[])?;
    host.wait_reading(4).await?;
    let client = fixture.client();
    put_json(client, "paced", &json!({ "id": 1 }), None).await?;
    let slow: Vec<_> = (2..6)
        .map(|id| json!({ "id": id, "sleep_ms": 1500 }))
        .collect();
    put_json_batch(client, "paced", &slow).await?;
    let busy = eventually(Duration::from_secs(60), || {
        host.count("ruststream::guest: paced") >= 2
    })
    .await;
    anyhow::ensure!(busy, "the pacer never started: {}", host.output());
    // `beta` leaves the file; the reload stops its app, and SIGTERM comes while it does.
    write_config(fixture.dir(), &host.component, &["events", "legacy"], "")?;
    host.host.signal("HUP")?;
    let stopping = eventually(Duration::from_secs(30), || {
        host.count("tenant removed or reconfigured: stopping its apps") == 1
    })
    .await;
    anyhow::ensure!(stopping, "the reload never stopped beta: {}", host.output());
    let output = host.stop().await?;
    let store = fixture.lease_store("ruststream-beta-pacer").await;
    let rows = store.list().await?;
    let paced = rows
        .iter()
        .find(|row| row.key.starts_with("paced:"))
        .ok_or_else(|| anyhow::anyhow!("no lease row for `paced`: {rows:?}"))?;
    assert_eq!(paced.owner, None, "the lease was not released: {output}");
    assert!(
        paced
            .checkpoint
            .as_deref()
            .is_some_and(|c| c.bytes().all(|b| b.is_ascii_digit())),
        "no record checkpointed: {paced:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_s_pause_during_a_rollout_stays_paused() -> anyhow::Result<()> {
    let fixture = Fixture::builder("hotload-pause-rollout")
        .stream("events", 2)
        .stream("legacy", 1)
        .dynamo()
        .start()
        .await?;
    // A rollout that takes long to decide by failure rate: what stops the trapping version
    // here is the operator's pause, which is not a verdict.
    let args = ["--rollout-calls", "1000", "--rollout-margin", "0.9"];
    let host = HotHost::start_with(
        &fixture,
        &["events", "legacy"],
        "quarantine_after = 1000",
        &args,
    )?;
    host.wait_reading(3).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let producer = produce(fixture.client().clone(), stop.clone());
    host.wait_for_both_shards("1", 0).await?;
    host.land(&guests::VERSIONED_TRAP.path())?;
    let trapping = eventually(Duration::from_secs(60), || {
        host.count("handler call failed") >= 3
    })
    .await;
    anyhow::ensure!(trapping, "v4 never ran: {}", host.output());
    let (ok, text) = host.cli(&["pause", "acme"]).await?;
    anyhow::ensure!(ok, "{text}");
    // The rollout judge looks every 20 ms: give it a second to act on the pause, wrongly. A
    // window, not a wait: a judge that looks and does nothing leaves no mark to wait on.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (ok, status) = host.cli(&["status"]).await?;
    assert!(ok, "{status}");
    assert!(
        status.contains("tenant acme (paused: paused by an operator)"),
        "{status}"
    );
    assert_eq!(
        host.count("rolled back to the previous version"),
        0,
        "{status}"
    );
    assert_eq!(host.count("tenant resumed"), 0);
    stop.store(true, Ordering::Relaxed);
    producer.await??;
    host.stop().await?;
    Ok(())
}
