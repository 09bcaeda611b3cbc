//! Dead-letter redrive through the binary: a broken version of an app dead-letters 500 entries
//! of two streams, a fixed version takes over, and `ruststream redrive` writes the dead
//! letters back, stopped twice on the way (once right after a publish, before its checkpoint,
//! once with `kill -9` at whatever moment): every dead letter lands in its origin stream once,
//! the fixed handler acks each once, and a dead letter forged for a stream its tenant may not
//! write to is refused and reported. Also `--dry-run`, and the admin route running a redrive
//! in the host, which resumes it after a `kill -9` when the host starts again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use aws_sdk_kinesis::primitives::Blob;
use ruststream_runtime::envelope;
use ruststream_runtime::{dead_letter::DeadLetterOrigin, record::Header};
use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::http::AdminApi;
use ruststream_tests::wait::poll_for;
use ruststream_tests::{binary, guests};
use serde_json::{Value, json};

/// Entries written to each of the two origin streams.
const PER_STREAM: usize = 250;

/// The local servers, streams and folder of one test, and the verbs run against them.
pub(crate) struct Setup {
    pub(crate) fixture: Fixture,
}

impl Setup {
    pub(crate) async fn start(name: &str) -> anyhow::Result<Self> {
        let fixture = Fixture::builder(name)
            .stream("orders", 1)
            .stream("refunds", 1)
            .stream("books.dead", 2)
            .stream("books.acked", 1)
            .stream("secrets", 1)
            .dynamo()
            .start()
            .await?;
        Ok(Self { fixture })
    }

    /// A tenants file running `guest` for `acme`, writing at most `rate` records a second.
    pub(crate) fn tenants(&self, name: &str, guest: &Path, rate: u32) -> anyhow::Result<PathBuf> {
        self.fixture.tenants_file(
            &format!("{name}.toml"),
            &format!(
                "[[tenants]]\nname = \"acme\"\ncomponents = [\"{}\"]\n\
                 subscribe = [\"orders\", \"refunds\"]\npublish = [\"books.dead\", \"books.acked\"]\n\
                 limits = {{ write_records_per_second = {rate} }}\n",
                guest.display()
            ),
        )
    }

    /// `ruststream ARGS` against the servers, as a command to run.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(binary());
        command
            .args(args)
            .args(["--kinesis-endpoint", &self.fixture.kinesis.endpoint()])
            .args(["--dynamodb-endpoint", &self.fixture.dynamo().endpoint()])
            .args(["--region", "us-east-1"])
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null());
        command
    }

    /// `ruststream ARGS`: whether it succeeded, its stdout and stderr.
    fn run(&self, args: &[&str]) -> anyhow::Result<(bool, String, String)> {
        let out = self.command(args).output()?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// The records of `stream`, as `ruststream tail` shows them.
    fn tail(&self, stream: &str) -> anyhow::Result<Vec<Value>> {
        let out = Command::new(binary())
            .args([
                "tail",
                stream,
                "--kinesis-endpoint",
                &self.fixture.kinesis.endpoint(),
            ])
            .args(["--region", "us-east-1"])
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "tail {stream}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect())
    }

    /// The records of `stream` a redrive wrote (tagged `x-ruststream-redrive`), and the
    /// distinct entry ids among them.
    fn redriven(&self, stream: &str) -> anyhow::Result<(Vec<Value>, BTreeSet<u64>)> {
        let redriven: Vec<Value> = self
            .tail(stream)?
            .into_iter()
            .filter(|r| r["headers"][envelope::REDRIVE_HEADER].is_string())
            .collect();
        let ids = redriven
            .iter()
            .filter_map(|r| r["payload"]["id"].as_u64())
            .collect();
        Ok((redriven, ids))
    }

    /// Waits until `stream` holds at least `count` records; returns them.
    pub(crate) async fn wait_for(&self, stream: &str, count: usize) -> anyhow::Result<Vec<Value>> {
        let mut last = 0;
        let found = poll_for(Duration::from_secs(120), async || {
            let records = self.tail(stream).ok()?;
            last = records.len();
            (records.len() >= count).then_some(records)
        })
        .await;
        found.ok_or_else(|| anyhow::anyhow!("`{stream}` holds {last} records, not {count}"))
    }

    /// Writes `count` entries `{"id": n}` to `stream`.
    fn put_entries(&self, stream: &str, count: usize) -> anyhow::Result<()> {
        let file = self.fixture.dir().join(format!("{stream}.jsonl"));
        let lines: Vec<String> = (0..count).map(|id| format!("{{\"id\":{id}}}")).collect();
        std::fs::write(&file, lines.join("\n"))?;
        let file = file.display().to_string();
        let (ok, _, error) = self.run(&["put", stream, "--file", &file])?;
        anyhow::ensure!(ok, "put {stream}: {error}");
        Ok(())
    }

    /// Writes a dead letter straight into `books.dead`, as a host would have, for `origin`.
    pub(crate) async fn forge_dead_letter(
        &self,
        origin: &DeadLetterOrigin,
        id: u64,
    ) -> anyhow::Result<()> {
        let mut headers = vec![Header::new("trace", "forged")];
        headers.extend(origin.headers());
        let data = envelope::wrap(&headers, format!("{{\"id\":{id}}}").as_bytes());
        self.fixture
            .client()
            .put_record()
            .stream_name("books.dead")
            .partition_key(id.to_string())
            .data(Blob::new(data))
            .send()
            .await?;
        Ok(())
    }
}

/// A host running `tenants`, logging to `<name>.log`, once its two subscriptions read their
/// shards.
pub(crate) async fn start_host(
    setup: &Setup,
    tenants: &Path,
    name: &str,
    args: &[&str],
) -> anyhow::Result<BinaryHost> {
    let host = setup
        .fixture
        .host(tenants)
        .log(&format!("{name}.log"))
        .args(args)
        .start()?;
    host.wait_until(Duration::from_secs(90), "two shards read", |log| {
        log.matches("reading shard").count() >= 2
    })
    .await?;
    Ok(host)
}

pub(crate) fn origin(stream: &str, tenant: &str) -> DeadLetterOrigin {
    DeadLetterOrigin {
        stream: stream.into(),
        shard_id: "shardId-000000000000".into(),
        sequence_number: "1".into(),
        subscriber: "orders".into(),
        tenant: tenant.into(),
        app: Some("books".into()),
        attempts: 1,
        reason: "attempts-exhausted".into(),
        first: None,
    }
}

/// The redrive tags in `records`, each with how many records carry it.
fn tags(records: &[Value]) -> BTreeMap<String, usize> {
    let mut tags = BTreeMap::new();
    for record in records {
        if let Some(tag) = record["headers"][envelope::REDRIVE_HEADER].as_str() {
            *tags.entry(tag.to_owned()).or_default() += 1;
        }
    }
    tags
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_redrive_resumes_and_every_dead_letter_goes_back_once() -> anyhow::Result<()> {
    let setup = Setup::start("redrive").await?;
    // The broken version dead-letters every entry of both streams.
    let broken = setup.tenants("broken", &guests::BOOKS_BROKEN.path(), 10_000)?;
    let host = start_host(&setup, &broken, "broken", &[]).await?;
    setup.put_entries("orders", PER_STREAM)?;
    setup.put_entries("refunds", PER_STREAM)?;
    let dead = setup.wait_for("books.dead", 2 * PER_STREAM).await?;
    assert!(
        dead.iter().all(|d| d["dead_letter"]["tenant"] == "acme"),
        "{:?}",
        dead.first()
    );
    drop(host);
    // A dead letter claiming to come from a stream `acme` may neither read nor write.
    setup
        .forge_dead_letter(&origin("secrets", "acme"), 9_999)
        .await?;

    // The fixed version takes over, reading from the tip. The redrive writes for `acme` at
    // 100 records a second (the tenants file it is given says so): slow enough to be stopped
    // midway.
    let fixed = setup.tenants("fixed", &guests::BOOKS_FIXED.path(), 10_000)?;
    let host = start_host(&setup, &fixed, "fixed", &[]).await?;
    let slow = setup.tenants("slow", &guests::BOOKS_FIXED.path(), 100)?;
    let config = slow.display().to_string();
    let redrive = [
        "redrive",
        "books.dead",
        "--config",
        &config,
        "--create-redrive-table",
        "--lease-ttl",
        "2000ms",
    ];

    // A dry run says what would move, and moves nothing.
    let (ok, plan, error) = setup.run(&[&redrive[..], &["--dry-run"]].concat())?;
    assert!(ok, "{error}");
    println!("{plan}");
    assert!(
        plan.contains("would redrive 250 to `orders` (attempts-exhausted)"),
        "{plan}"
    );
    assert!(
        plan.contains("would redrive 250 to `refunds` (attempts-exhausted)"),
        "{plan}"
    );
    assert!(plan.contains("would refuse 1 (not-granted)"), "{plan}");
    assert!(
        plan.lines().filter(|l| l.contains(" -> `")).count() == 10,
        "{plan}"
    );
    assert_eq!(
        setup.tail("orders")?.len(),
        PER_STREAM,
        "a dry run writes nothing"
    );

    // Stopped right after its second publish, before that batch's checkpoint.
    let status = setup
        .command(&redrive)
        .env("RUSTSTREAM_REDRIVE_ABORT_AFTER_BATCHES", "2")
        .stdout(Stdio::null())
        .status()?;
    assert!(!status.success(), "the first run was to stop");
    // Killed with SIGKILL once it has written part of the rest.
    let log = setup.fixture.dir().join("redrive-2.log");
    let mut second = setup
        .command(&redrive)
        .stdout(std::fs::File::create(&log)?)
        .spawn()?;
    let midway = poll_for(Duration::from_secs(90), async || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let redriven = text
            .lines()
            .filter_map(|l| l.strip_prefix("progress: redriven "))
            .filter_map(|l| l.split_whitespace().next()?.parse::<usize>().ok())
            .max()?;
        (redriven >= 300).then_some(redriven)
    })
    .await;
    second.kill()?;
    second.wait()?;
    let midway = midway.ok_or_else(|| {
        anyhow::anyhow!(
            "the second run never got past 300: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    })?;
    assert!(midway < 2 * PER_STREAM, "killed before the end: {midway}");

    // The third run finishes it.
    let (ok, summary, error) = setup.run(&redrive)?;
    assert!(ok, "{error}\n{summary}");
    println!("killed at {midway}; then:\n{summary}");
    assert!(summary.contains(": finished"), "{summary}");
    assert!(summary.contains("redriven 500 "), "{summary}");
    assert!(summary.contains("skipped not-granted: 1"), "{summary}");
    assert!(
        summary
            .lines()
            .any(|l| l.starts_with("refused ") && l.contains("origin `secrets`")),
        "{summary}"
    );

    // Every dead letter is back in its origin stream once, none twice, nothing in `secrets`.
    let mut back = BTreeMap::new();
    for stream in ["orders", "refunds"] {
        let (redriven, ids) = setup.redriven(stream)?;
        assert_eq!(redriven.len(), PER_STREAM, "{stream}");
        assert_eq!(ids.len(), PER_STREAM, "{stream}: an entry twice");
        assert!(
            redriven.iter().all(|r| r.get("retry_count").is_none()),
            "a fresh attempt count"
        );
        back.extend(tags(&redriven));
    }
    assert_eq!(back.len(), 2 * PER_STREAM);
    assert!(back.values().all(|&n| n == 1), "a dead letter twice");
    assert!(
        setup.tail("secrets")?.is_empty(),
        "nothing published elsewhere"
    );

    // The fixed handler acks each once.
    let acked = setup.wait_for("books.acked", 2 * PER_STREAM).await?;
    let mut handled = BTreeMap::new();
    for record in &acked {
        let key = (
            record["payload"]["stream"]
                .as_str()
                .unwrap_or("?")
                .to_owned(),
            record["payload"]["id"].as_u64().unwrap_or(u64::MAX),
        );
        *handled.entry(key).or_insert(0) += 1;
    }
    assert_eq!(handled.len(), 2 * PER_STREAM, "{}", host.output());
    assert!(handled.values().all(|&n| n == 1), "an entry handled twice");
    // Nothing was dead-lettered again.
    assert_eq!(setup.tail("books.dead")?.len(), 2 * PER_STREAM + 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_route_runs_a_redrive_in_the_host() -> anyhow::Result<()> {
    let setup = Setup::start("redrive-admin").await?;
    for id in 0..20 {
        setup
            .forge_dead_letter(&origin("orders", "acme"), id)
            .await?;
    }
    let fixed = setup.tenants("fixed", &guests::BOOKS_FIXED.path(), 10_000)?;
    let args = ["--lease-store", "dynamodb", "--create-lease-table"];
    let host = start_host(&setup, &fixed, "host", &args).await?;
    let addr = host.admin_addr().await?;
    let api = AdminApi::new(&addr, &host.state_dir())?;
    let json = Some("application/json");

    let body = br#"{"stream": "books.dead", "dry_run": true}"#;
    let (status, plan) = api.call("POST", "/v1/redrives", json, body)?;
    assert_eq!(status, 200, "{plan}");
    let plan: Value = serde_json::from_str(&plan)?;
    assert_eq!(plan["moves"]["orders"]["attempts-exhausted"], 20, "{plan}");

    let unauthorised = ruststream_tests::http::request(
        &addr,
        "POST",
        "/v1/redrives",
        &[("Content-Type", "application/json")],
        br#"{"stream": "books.dead"}"#,
    )?;
    assert_eq!(unauthorised.0, 401, "{unauthorised:?}");

    let (status, started) =
        api.call("POST", "/v1/redrives", json, br#"{"stream": "books.dead"}"#)?;
    assert_eq!(status, 200, "{started}");
    let started: Value = serde_json::from_str(&started)?;
    let id = started["id"].as_str().unwrap_or_default().to_owned();
    let path = format!("/v1/redrives/{id}");
    let done = poll_for(Duration::from_secs(60), async || {
        let (_, body) = api.call("GET", &path, None, b"").ok()?;
        let report: Value = serde_json::from_str(&body).ok()?;
        (report["state"] != "running").then_some(report)
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("the redrive never finished"))?;
    assert_eq!(done["state"], "finished", "{done}");
    assert_eq!(done["redriven"], 20, "{done}");
    let (status, _) = api.call("GET", "/v1/redrives/rd-none", None, b"")?;
    assert_eq!(status, 404);
    // Listed for whoever looks (the console shows it), with its report.
    let (status, listed) = api.call("GET", "/v1/redrives", None, b"")?;
    assert_eq!(status, 200, "{listed}");
    let listed: Value = serde_json::from_str(&listed)?;
    let redrives = listed["redrives"].as_array().cloned().unwrap_or_default();
    assert_eq!(redrives.len(), 1, "{listed}");
    let (one, report) = (&redrives[0], &redrives[0]["progress"]);
    assert_eq!(
        (&one["id"], &one["tenant"], &one["running"]),
        (&json!(id), &Value::Null, &json!(false)),
        "{listed}"
    );
    assert_eq!(
        (&report["state"], &report["redriven"]),
        (&json!("finished"), &json!(20)),
        "{listed}"
    );

    let acked = setup.wait_for("books.acked", 20).await?;
    assert_eq!(acked.len(), 20);
    let scrape = host.scrape().await?;
    let redriven = scrape.sum(
        "ruststream_redrive_records_total",
        &[("redrive", id.as_str()), ("outcome", "redriven")],
    );
    assert_eq!(redriven, 20.0, "{scrape:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_the_host_ran_when_it_was_killed_resumes_when_it_starts_again()
-> anyhow::Result<()> {
    const LETTERS: u64 = 300;
    let setup = Setup::start("redrive-resume").await?;
    for id in 0..LETTERS {
        setup
            .forge_dead_letter(&origin("orders", "acme"), id)
            .await?;
    }
    // 50 records a second: the redrive takes 6 s, time to kill its host midway.
    let fixed = setup.tenants("fixed", &guests::BOOKS_FIXED.path(), 50)?;
    let args = [
        "--lease-store",
        "dynamodb",
        "--create-lease-table",
        "--lease-ttl",
        "3000ms",
        "--renew-interval",
        "1000ms",
    ];
    let first = start_host(&setup, &fixed, "first", &args).await?;
    let api = AdminApi::new(&first.admin_addr().await?, &first.state_dir())?;
    let json = Some("application/json");
    let (status, started) =
        api.call("POST", "/v1/redrives", json, br#"{"stream": "books.dead"}"#)?;
    assert_eq!(status, 200, "{started}");
    let started: Value = serde_json::from_str(&started)?;
    let id = started["id"].as_str().unwrap_or_default().to_owned();
    let path = format!("/v1/redrives/{id}");
    let progress = |api: &AdminApi| -> Option<Value> {
        let (status, body) = api.call("GET", &path, None, b"").ok()?;
        (status == 200).then(|| serde_json::from_str(&body).ok())?
    };
    let midway = poll_for(Duration::from_secs(90), async || {
        let report = progress(&api)?;
        let redriven = report["redriven"].as_u64()?;
        (redriven >= 50).then_some(report)
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("the redrive never got to 50: {}", first.output()))?;
    first.signal("KILL")?;
    let _ = first.exit(Duration::from_secs(30)).await?;
    assert_eq!(
        midway["state"], "running",
        "killed before the end: {midway}"
    );

    // The next host on the same state directory resumes it, with no request.
    let second = start_host(&setup, &fixed, "second", &args).await?;
    let api = AdminApi::new(&second.admin_addr().await?, &second.state_dir())?;
    let done = poll_for(Duration::from_secs(120), async || {
        let report = progress(&api)?;
        (report["state"] == "finished").then_some(report)
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("the redrive never finished: {}", second.output()))?;
    assert_eq!(done["redriven"], LETTERS, "{done}");
    assert!(
        second.output().contains("resuming the redrive"),
        "{}",
        second.output()
    );

    // Every dead letter is back in `orders` once. (The handler's own publishes share the
    // tenant's 50 records a second with the redrive here, and one refused for the quota
    // dead-letters its entry again; that the handler acks each redriven entry once is
    // `a_killed_redrive_resumes_and_every_dead_letter_goes_back_once`.)
    let (redriven, ids) = setup.redriven("orders")?;
    assert_eq!(redriven.len() as u64, LETTERS, "none twice");
    assert_eq!(ids, (0..LETTERS).collect(), "every one back");

    // Its report outlives the host that ran it.
    second.stop().await?;
    let third = start_host(&setup, &fixed, "third", &args).await?;
    let api = AdminApi::new(&third.admin_addr().await?, &third.state_dir())?;
    let kept = progress(&api).ok_or_else(|| anyhow::anyhow!("no report after a restart"))?;
    assert_eq!(kept["state"], "finished", "{kept}");
    assert_eq!(kept["redriven"], LETTERS, "{kept}");
    assert!(
        !third.output().contains("resuming the redrive"),
        "a finished redrive is not run again"
    );
    Ok(())
}
