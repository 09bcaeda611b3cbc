//! Shadow deploys through the binary: a new version runs beside the live one on the same
//! records with no effects, its handling of each record compared with the live one's.
//!
//! - `books-reworked` shadowing `books-fixed` disagrees on some entries (drops multiples of 5,
//!   publishes another payload for multiples of 3): the live streams, dead letters and
//!   checkpoint are exactly what the live version alone makes; the disagreements name those
//!   entries; the shadow survives a restart; `promote` swaps it in with nothing lost or twice.
//! - `versioned-trap` shadowing `versioned-v1` traps on every record: the tenant is never
//!   quarantined, and the live version acks every record.
//! - `versioned-slow` (100 ms a record) shadowing `versioned-v1`: the live version acks 1 000
//!   records long before its shadow has compared them; the shadow's full queue skips records
//!   (reason `behind`) rather than wait, and agrees on every record it compared.
//! - The same shadow under a tenant memory budget: with no room beside the live instances its
//!   instance is never made and its records are skipped (reason `budget`) while the live
//!   version acks them all; with room, it compares. Status and metrics show what each role
//!   reserves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ruststream_tests::guests;
use ruststream_tests::process::{Running, admin_addr, metrics_addr, run_host, state_dir};
use ruststream_tests::scrape::Scrape;
use ruststream_tests::scratch::ScratchDir;
use ruststream_tests::servers::LocalKinesis;
use ruststream_tests::wait::poll_for;
use serde_json::Value;

/// The local Kinesis and a folder for one test.
struct Setup {
    kinesis: LocalKinesis,
    dir: ScratchDir,
}

impl Setup {
    async fn start(name: &str, streams: &[&str]) -> anyhow::Result<Self> {
        let kinesis = LocalKinesis::start().await?;
        for stream in streams {
            kinesis.create_stream(stream, 1).await?;
        }
        let dir = ScratchDir::new(name)?;
        Ok(Self { kinesis, dir })
    }

    /// A tenants file running `guest` for `acme`, which reads `subscribe` and writes `publish`,
    /// quarantined after 3 failed calls in a row.
    fn tenants(&self, guest: &Path, subscribe: &str, publish: &str) -> anyhow::Result<PathBuf> {
        self.tenants_with(guest, subscribe, publish, "")
    }

    /// [`tenants`](Self::tenants) with `more` (TOML lines) in the tenant's section.
    fn tenants_with(
        &self,
        guest: &Path,
        subscribe: &str,
        publish: &str,
        more: &str,
    ) -> anyhow::Result<PathBuf> {
        let file = self.dir.join("tenants.toml");
        std::fs::write(
            &file,
            format!(
                "[[tenants]]\nname = \"acme\"\ncomponents = [\"{}\"]\nsubscribe = [{subscribe}]\n\
                 publish = [{publish}]\nquarantine_after = 3\n{more}",
                guest.display()
            ),
        )?;
        Ok(file)
    }

    /// `ruststream ARGS` against the local Kinesis: whether it succeeded, its stdout and
    /// stderr.
    fn run(&self, args: &[&str]) -> anyhow::Result<(bool, String)> {
        let endpoint = self.kinesis.endpoint();
        let kinesis = ["--kinesis-endpoint", &endpoint, "--region", "us-east-1"];
        run(&[args, &kinesis].concat())
    }

    /// The records of `stream`, as `ruststream tail` shows them.
    fn tail(&self, stream: &str) -> anyhow::Result<Vec<Value>> {
        let (ok, text) = self.run(&["tail", stream])?;
        anyhow::ensure!(ok, "tail {stream}: {text}");
        Ok(text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect())
    }

    /// Writes entries `{"id": n}` for `ids` to `stream`.
    fn put(&self, stream: &str, ids: impl Iterator<Item = u64>) -> anyhow::Result<()> {
        let file = self.dir.join(format!("{stream}.jsonl"));
        let lines: Vec<String> = ids.map(|id| format!("{{\"id\":{id}}}")).collect();
        std::fs::write(&file, lines.join("\n"))?;
        let file = file.display().to_string();
        let (ok, text) = self.run(&["put", stream, "--file", &file])?;
        anyhow::ensure!(ok, "put {stream}: {text}");
        Ok(())
    }
}

/// `ruststream ARGS`: whether it succeeded, its stdout and stderr.
fn run(args: &[&str]) -> anyhow::Result<(bool, String)> {
    ruststream_tests::process::verb(args)
}

/// A host running `tenants`, once it reads `shards` shards, and how to reach its admin API.
struct Host {
    running: Running,
    log: PathBuf,
    admin: Vec<String>,
}

impl Host {
    async fn start(
        setup: &Setup,
        tenants: &Path,
        name: &str,
        shards: usize,
        args: &[&str],
    ) -> anyhow::Result<Self> {
        let log = setup.dir.join(format!("{name}.log"));
        let running = run_host(tenants, &setup.kinesis, &log, args)?;
        let addr = poll_for(Duration::from_secs(90), async || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let reading = text.matches("reading shard").count() >= shards;
            reading.then(|| admin_addr(&text)).flatten()
        })
        .await
        .ok_or_else(|| {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            anyhow::anyhow!("{name} never read its shards: {text}")
        })?;
        let admin = vec![
            "--admin".to_owned(),
            format!("http://{addr}"),
            "--state-dir".to_owned(),
            state_dir(tenants).display().to_string(),
        ];
        Ok(Self {
            running,
            log,
            admin,
        })
    }

    /// Stops the host with SIGTERM and waits until it has exited (its state directory free).
    async fn stop(mut self) -> anyhow::Result<()> {
        self.running.signal("TERM")?;
        let child = &mut self.running.0;
        let exited = poll_for(Duration::from_secs(30), async || {
            child.try_wait().ok().flatten()
        })
        .await;
        anyhow::ensure!(exited.is_some(), "the host did not stop on SIGTERM");
        Ok(())
    }

    /// Waits until the host has logged `line`.
    async fn wait_for_log(&self, line: &str) -> anyhow::Result<()> {
        let logged = poll_for(Duration::from_secs(90), async || {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            text.contains(line).then_some(())
        })
        .await;
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        anyhow::ensure!(logged.is_some(), "never logged `{line}`: {text}");
        Ok(())
    }

    /// `ruststream VERB ARGS` against this host's admin API.
    fn cli(&self, _setup: &Setup, args: &[&str]) -> anyhow::Result<(bool, String)> {
        let admin: Vec<&str> = self.admin.iter().map(String::as_str).collect();
        run(&[args, &admin].concat())
    }

    /// Deploys the component at `shadow` as the shadow of the app the component at `live`
    /// runs (named after its file); returns what the verb said.
    fn deploy_shadow(&self, setup: &Setup, shadow: &Path, live: &Path) -> anyhow::Result<String> {
        let shadow = shadow.display().to_string();
        let name = stem(live);
        let (ok, text) = self.cli(
            setup,
            &["deploy", "acme", &shadow, "--name", &name, "--shadow"],
        )?;
        anyhow::ensure!(ok, "deploy --shadow: {text}");
        Ok(text)
    }

    /// The host's status, as `ruststream status --json` shows it.
    fn status(&self, setup: &Setup) -> anyhow::Result<Value> {
        let (ok, text) = self.cli(setup, &["status", "--json"])?;
        anyhow::ensure!(ok, "status: {text}");
        Ok(serde_json::from_str(&text)?)
    }

    /// The app's status.
    fn app(&self, setup: &Setup) -> anyhow::Result<Value> {
        Ok(self.status(setup)?["tenants"][0]["apps"][0].clone())
    }

    /// Waits until the app's shadow has compared `count` records; returns the app's status.
    async fn compared(&self, setup: &Setup, count: u64) -> anyhow::Result<Value> {
        let mut last = Value::Null;
        let found = poll_for(Duration::from_secs(60), async || {
            last = self.app(setup).ok()?;
            let shadow = &last["shadow"];
            let compared = ["agree", "disagree", "trap"]
                .iter()
                .filter_map(|k| shadow[k].as_u64())
                .sum::<u64>();
            (compared >= count).then(|| last.clone())
        })
        .await;
        found.ok_or_else(|| anyhow::anyhow!("the shadow never compared {count}: {last}"))
    }

    fn metrics(&self) -> anyhow::Result<Scrape> {
        let text = std::fs::read_to_string(&self.log)?;
        let addr = metrics_addr(&text).ok_or_else(|| anyhow::anyhow!("no metrics endpoint"))?;
        let (_, body) = ruststream_tests::http::http(&addr, "GET", "/metrics", b"")?;
        Scrape::parse(&body)
    }
}

/// The ids in `records`' payloads, with how many times each appears.
fn ids(records: &[Value]) -> BTreeMap<u64, usize> {
    let mut ids = BTreeMap::new();
    for record in records {
        if let Some(id) = record["payload"]["id"].as_u64() {
            *ids.entry(id).or_default() += 1;
        }
    }
    ids
}

/// The component name a guest runs under: its file's stem.
fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disagreeing_shadow_has_no_effect_lists_its_disagreements_and_is_promoted()
-> anyhow::Result<()> {
    let setup = Setup::start(
        "shadow",
        &["orders", "refunds", "books.dead", "books.acked"],
    )
    .await?;
    let fixed = guests::BOOKS_FIXED.path();
    let tenants = setup.tenants(
        &fixed,
        "\"orders\", \"refunds\"",
        "\"books.dead\", \"books.acked\"",
    )?;
    let host = Host::start(&setup, &tenants, "first", 2, &[]).await?;
    let text = host.deploy_shadow(&setup, &guests::BOOKS_REWORKED.path(), &fixed)?;
    assert!(
        text.contains("running as a shadow on 100% of records"),
        "{text}"
    );

    // Entries 1..=10: the shadow drops 5 and 10, and publishes another payload for 3, 6, 9.
    setup.put("orders", 1..=10)?;
    let app = host.compared(&setup, 10).await?;
    let shadow = &app["shadow"];
    assert_eq!(shadow["agree"], 5, "{shadow}");
    assert_eq!(shadow["disagree"], 5, "{shadow}");
    assert_eq!(shadow["trap"], 0, "{shadow}");
    assert_eq!(shadow["publishes_recorded"], 8, "{shadow}");

    // The live version's effects alone: each entry acknowledged once, no dead letter, the
    // checkpoint at the last entry.
    let orders = setup.tail("orders")?;
    let acked = poll_for(Duration::from_secs(30), async || {
        let acked = setup.tail("books.acked").ok()?;
        (acked.len() >= 10).then_some(acked)
    })
    .await
    .unwrap_or_default();
    assert_eq!(acked.len(), 10, "{acked:?}");
    assert_eq!(ids(&acked), (1..=10).map(|id| (id, 1)).collect());
    assert!(
        acked.iter().all(|r| r["payload"]["rework"].is_null()),
        "{acked:?}"
    );
    assert!(setup.tail("books.dead")?.is_empty(), "no dead letter");
    let last = orders
        .last()
        .map(|r| r["sequence"].clone())
        .unwrap_or_default();
    let checkpoint = poll_for(Duration::from_secs(30), async || {
        let app = host.app(&setup).ok()?;
        let shards = app["subscriptions"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == "orders")?["shards"]
            .clone();
        let checkpoint = shards[0]["checkpoint"].clone();
        (checkpoint == last).then_some(checkpoint)
    })
    .await;
    assert!(checkpoint.is_some(), "the live checkpoint reaches {last}");

    // The disagreements name the entries they are about.
    let sequence_of: BTreeMap<String, u64> = orders
        .iter()
        .filter_map(|r| {
            Some((
                r["sequence"].as_str()?.to_owned(),
                r["payload"]["id"].as_u64()?,
            ))
        })
        .collect();
    let disagreed: BTreeSet<u64> = shadow["disagreements"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| sequence_of.get(d["sequence_number"].as_str()?).copied())
        .collect();
    assert_eq!(disagreed, BTreeSet::from([3, 5, 6, 9, 10]), "{shadow}");
    let five = shadow["disagreements"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| sequence_of.get(d["sequence_number"].as_str().unwrap_or("")) == Some(&5))
        .cloned()
        .unwrap_or_default();
    assert!(
        five["live"]
            .as_str()
            .unwrap_or("")
            .starts_with("ack, 1 publishes"),
        "{five}"
    );
    assert!(
        five["shadow"]
            .as_str()
            .unwrap_or("")
            .starts_with("drop, 0 publishes"),
        "{five}"
    );
    assert!(
        five["publishes"][0]
            .as_str()
            .unwrap_or("")
            .starts_with("live only: books.acked key=5"),
        "{five}"
    );

    // Metrics and the status tree say so too.
    let scrape = host.metrics()?;
    let count = |result: &str| {
        scrape.sum(
            "ruststream_shadow_records_total",
            &[("tenant", "acme"), ("app", "books"), ("result", result)],
        )
    };
    assert_eq!((count("agree"), count("disagree")), (5.0, 5.0));
    let (ok, tree) = host.cli(&setup, &["status"])?;
    assert!(ok, "{tree}");
    println!("{tree}");
    assert!(tree.contains("shadow 1.2.0"), "{tree}");
    assert!(tree.contains("50.0% agree"), "{tree}");

    // A restart starts the shadow again, its counts from zero.
    host.stop().await?;
    let host = Host::start(&setup, &tenants, "second", 2, &[]).await?;
    // The live version reads first; the shadow starts once its kept bytes are compiled again.
    host.wait_for_log("shadow version started again").await?;
    let app = host.app(&setup)?;
    assert_eq!(app["shadow"]["version"]["version"], "1.2.0", "{app}");

    // Promoted: the reworked version is live, the shadow gone; entries before and after are
    // each handled once (dropped ones, multiples of 5, publish nothing).
    let (ok, text) = host.cli(&setup, &["promote", "acme", "books"])?;
    assert!(ok && text.contains("swapped in"), "{text}");
    let app = host.app(&setup)?;
    assert_eq!(app["version"], "1.2.0", "{app}");
    assert!(app["shadow"].is_null(), "{app}");
    setup.put("orders", 11..=20)?;
    let acked = poll_for(Duration::from_secs(60), async || {
        let acked = setup.tail("books.acked").ok()?;
        (acked.len() >= 18).then_some(acked)
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("the promoted version never booked 11..=20"))?;
    let expected: BTreeMap<u64, usize> = (1..=20)
        .filter(|id| *id <= 10 || id % 5 != 0)
        .map(|id| (id, 1))
        .collect();
    assert_eq!(ids(&acked), expected, "0 lost, 0 twice");
    assert!(setup.tail("books.dead")?.is_empty(), "no dead letter");
    let (ok, text) = host.cli(&setup, &["promote", "acme", "books"])?;
    assert!(!ok && text.contains("runs no shadow version"), "{text}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_shadow_never_touches_the_live_version() -> anyhow::Result<()> {
    let setup = Setup::start("shadow-trap", &["events", "legacy"]).await?;
    let v1 = guests::VERSIONED_V1.path();
    let tenants = setup.tenants(&v1, "\"events\", \"legacy\"", "")?;
    let host = Host::start(&setup, &tenants, "host", 2, &[]).await?;
    host.deploy_shadow(&setup, &guests::VERSIONED_TRAP.path(), &v1)?;

    setup.put("events", 1..=10)?;
    let app = host.compared(&setup, 10).await?;
    assert_eq!(app["shadow"]["trap"], 10, "{app}");
    // Far past the tenant's quarantine threshold of 3, and nobody quarantined: the live
    // version acked every record and its checkpoint moved.
    let (ok, text) = host.cli(&setup, &["status", "--json"])?;
    assert!(ok, "{text}");
    let status: Value = serde_json::from_str(&text)?;
    assert_eq!(status["tenants"][0]["paused"], false, "{status}");
    let events = app["subscriptions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == "handle")
        .cloned()
        .unwrap_or_default();
    let shard = &events["shards"][0];
    assert_eq!(shard["outcomes"]["ack"], 10, "{events}");
    assert_eq!(shard["outcomes"]["trapped"], 0, "{events}");
    assert!(shard["checkpoint"].is_string(), "{events}");
    assert!(app["rollout"].is_null(), "no swap happened: {app}");

    // Dropped: status shows no shadow, and the live version goes on.
    let (ok, text) = host.cli(&setup, &["deploy", "acme", "--abort-shadow", "versioned"])?;
    assert!(ok && text.contains("shadow dropped"), "{text}");
    assert!(host.app(&setup)?["shadow"].is_null());
    setup.put("events", 11..=12)?;
    let acked = poll_for(Duration::from_secs(30), async || {
        let app = host.app(&setup).ok()?;
        let subscriptions = app["subscriptions"].as_array()?.clone();
        let handle = subscriptions.iter().find(|s| s["name"] == "handle")?;
        (handle["shards"][0]["outcomes"]["ack"] == 12).then_some(())
    })
    .await;
    assert!(acked.is_some(), "the live version goes on acking");
    Ok(())
}

/// The shadow's counts in `app`'s status: (agree, disagree, trap, skipped).
fn counts(app: &Value) -> [u64; 4] {
    ["agree", "disagree", "trap", "skipped"].map(|k| app["shadow"][k].as_u64().unwrap_or(0))
}

/// Records the live version acked on its `handle` subscription, per `app`'s status.
fn live_acked(app: &Value) -> Option<u64> {
    let subscriptions = app["subscriptions"].as_array()?;
    let handle = subscriptions.iter().find(|s| s["name"] == "handle")?;
    handle["shards"][0]["outcomes"]["ack"].as_u64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_shadow_skips_what_its_full_queue_cannot_take_and_never_holds_the_live_version_back()
-> anyhow::Result<()> {
    let setup = Setup::start("shadow-slow", &["events", "legacy"]).await?;
    let v1 = guests::VERSIONED_V1.path();
    let tenants = setup.tenants(&v1, "\"events\", \"legacy\"", "")?;
    // Reads of 10 records: the live version settles 1 000 records in 100 batches, at most 5
    // a second (reads of a shard are 200 ms apart), while the shadow, at 100 ms a record,
    // takes a second a batch. Its queue of 16 batches fills unless the live version is
    // slower than the shadow, 10 records a second.
    let host = Host::start(&setup, &tenants, "host", 2, &["--get-records-limit", "10"]).await?;
    host.deploy_shadow(&setup, &guests::VERSIONED_SLOW.path(), &v1)?;

    const RECORDS: u64 = 1_000;
    setup.put("events", 1..=RECORDS)?;
    let live_done = poll_for(Duration::from_secs(180), async || {
        let app = host.app(&setup).ok()?;
        (live_acked(&app) == Some(RECORDS)).then_some(app)
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("the live version never acked the {RECORDS} records"))?;
    let [agree, disagree, _, _] = counts(&live_done);
    assert!(
        agree + disagree < RECORDS,
        "the live version waited for its shadow: {}",
        live_done["shadow"]
    );

    // Every record is accounted for once the shadow has worked through its queue: compared
    // (and agreed), or skipped because the queue was full. None left out by sampling (100%)
    // or the budget (none set).
    let settled = poll_for(Duration::from_secs(120), async || {
        let app = host.app(&setup).ok()?;
        let [agree, _, _, skipped] = counts(&app);
        (agree + skipped == RECORDS).then_some(app)
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("the shadow never accounted for every record"))?;
    let shadow = &settled["shadow"];
    println!("live done: {}\nsettled: {shadow}", live_done["shadow"]);
    let [agree, disagree, trap, skipped] = counts(&settled);
    assert_eq!((disagree, trap), (0, 0), "{shadow}");
    assert!(agree > 0 && skipped > 0, "{shadow}");
    assert_eq!(shadow["skipped_behind"], skipped, "{shadow}");
    assert_eq!(shadow["skipped_sample"], 0, "{shadow}");
    assert_eq!(shadow["skipped_budget"], 0, "{shadow}");
    let scrape = host.metrics()?;
    let behind = scrape.sum(
        "ruststream_shadow_skipped_total",
        &[
            ("tenant", "acme"),
            ("app", "versioned"),
            ("reason", "behind"),
        ],
    );
    assert_eq!(behind, skipped as f64);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_counts_against_the_tenants_memory_budget() -> anyhow::Result<()> {
    const MIB: u64 = 1 << 20;
    let setup = Setup::start("shadow-budget", &["events", "legacy"]).await?;
    let v1 = guests::VERSIONED_V1.path();
    let subscribe = "\"events\", \"legacy\"";
    // Two live instances of 16 MiB (`handle` and `legacy`): 32 MiB, past a budget of 24.
    let tenants = setup.tenants_with(
        &v1,
        subscribe,
        "",
        "limits = { memory_mib = 16, memory_budget_mib = 24 }\n",
    )?;
    let host = Host::start(&setup, &tenants, "host", 2, &[]).await?;
    host.deploy_shadow(&setup, &guests::VERSIONED_SLOW.path(), &v1)?;

    // Live alone is past the budget: it runs anyway, and says so once; the shadow's instance
    // is never made, and its records are skipped for the budget.
    setup.put("events", 1..=10)?;
    let skipped = poll_for(Duration::from_secs(60), async || {
        let app = host.app(&setup).ok()?;
        let done = live_acked(&app) == Some(10) && app["shadow"]["skipped_budget"] == 10;
        done.then_some(app)
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("the live version never acked 10, or the shadow skip 10"))?;
    assert_eq!(counts(&skipped), [0, 0, 0, 10], "{}", skipped["shadow"]);
    let status = host.status(&setup)?;
    assert_eq!(
        status["tenants"][0]["instance_memory"],
        serde_json::json!({
            "live_bytes": 32 * MIB, "shadow_bytes": 0, "budget_bytes": 24 * MIB
        }),
        "{status}"
    );
    assert_eq!(status["tenants"][0]["paused"], false, "{status}");
    let log = std::fs::read_to_string(&host.log)?;
    let warnings = log
        .matches("alone reserve more memory than its memory budget")
        .count();
    assert_eq!(warnings, 1, "one warning: {log}");
    let scrape = host.metrics()?;
    let memory = |role: &str| {
        scrape.sum(
            "ruststream_tenant_instance_memory_bytes",
            &[("tenant", "acme"), ("role", role)],
        )
    };
    assert_eq!((memory("live"), memory("shadow")), ((32 * MIB) as f64, 0.0));
    let budget = scrape.sum(
        "ruststream_shadow_skipped_total",
        &[
            ("tenant", "acme"),
            ("app", "versioned"),
            ("reason", "budget"),
        ],
    );
    assert_eq!(budget, 10.0);

    // A budget with room for one more instance: the reload restarts the tenant, its shadow
    // with it, whose one instance (`handle`) now fits and compares.
    setup.tenants_with(
        &v1,
        subscribe,
        "",
        "limits = { memory_mib = 16, memory_budget_mib = 48 }\n",
    )?;
    let (ok, text) = host.cli(&setup, &["reload"])?;
    assert!(ok, "{text}");
    let restarted = poll_for(Duration::from_secs(60), async || {
        let status = host.status(&setup).ok()?;
        let tenant = &status["tenants"][0];
        let ready = tenant["instance_memory"]["budget_bytes"] == 48 * MIB
            && tenant["instance_memory"]["live_bytes"] == 32 * MIB
            && !tenant["apps"][0]["shadow"].is_null();
        ready.then_some(())
    })
    .await;
    assert!(
        restarted.is_some(),
        "the tenant never restarted with its new budget"
    );
    setup.put("events", 11..=20)?;
    let app = host.compared(&setup, 10).await?;
    assert_eq!(counts(&app)[0], 10, "{}", app["shadow"]);
    assert_eq!(app["shadow"]["skipped_budget"], 0, "{}", app["shadow"]);
    let status = host.status(&setup)?;
    assert_eq!(
        status["tenants"][0]["instance_memory"]["shadow_bytes"],
        16 * MIB,
        "{status}"
    );
    let (ok, tree) = host.cli(&setup, &["status"])?;
    assert!(ok, "{tree}");
    assert!(
        tree.contains("instance memory: live 32 MiB, shadow 16 MiB, budget 48 MiB"),
        "{tree}"
    );
    Ok(())
}
