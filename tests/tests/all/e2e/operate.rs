//! Operating a running `ruststream run` by what it exposes: `GET /metrics`, scraped and parsed
//! as Prometheus would, `ruststream status`, and `--log-format json` lines, read as a log
//! pipeline would. Two tenants read streams of the same name; one of them holds a record.

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::http::{AdminApi, http};
use ruststream_tests::scrape::Scrape;
use ruststream_tests::wait::{eventually, poll_for};
use ruststream_tests::{binary, guests};
use serde_json::{Value, json};

/// Entries written; the one with this id is a refund, which `acme`'s `book` holds.
const ENTRIES: u64 = 40;
const REFUND: u64 = 5;

const ACME: [(&str, &str); 1] = [("tenant", "acme")];
const GLOBEX: [(&str, &str); 1] = [("tenant", "globex")];

/// `acme` runs the seed's settlement (holds refunds), `globex` an auditor that holds nothing;
/// both read the stream named `ledger`.
fn tenants() -> String {
    format!(
        r#"
        [[tenants]]
        name = "acme"
        components = ["{settlement}"]
        subscribe = ["ledger"]

        [[tenants]]
        name = "globex"
        components = ["{audit}"]
        subscribe = ["ledger"]
        "#,
        settlement = guests::SETTLEMENT.path().display(),
        audit = guests::LEDGER_AUDIT.path().display(),
    )
}

/// Scrapes `host` until `done` holds for a scrape, for at most a minute; returns that scrape.
async fn scrape_until(host: &BinaryHost, done: impl Fn(&Scrape) -> bool) -> anyhow::Result<Scrape> {
    let mut last = Scrape::default();
    let scraped = poll_for(Duration::from_secs(60), async || {
        match host.scrape().await {
            Ok(scrape) if done(&scrape) => Some(Ok(scrape)),
            Ok(scrape) => {
                last = scrape;
                None
            }
            Err(error) => Some(Err(error)),
        }
    })
    .await;
    scraped.unwrap_or_else(|| anyhow::bail!("the condition never held; last scrape: {last:?}"))
}

/// Both tenants' host on a two-shard `ledger`, leases in DynamoDB-local, once all four shards
/// (two per tenant) are read; `args` adds to its command line.
async fn start(name: &str, args: &[&str]) -> anyhow::Result<(Fixture, BinaryHost)> {
    let fixture = Fixture::builder(name)
        .stream("ledger", 2)
        .dynamo()
        .start()
        .await?;
    let host = launch(&fixture, &tenants(), 4, args).await?;
    Ok((fixture, host))
}

/// A host running the tenants file `config`, leases in DynamoDB-local, once `shards` shards
/// are read.
async fn launch(
    fixture: &Fixture,
    config: &str,
    shards: usize,
    args: &[&str],
) -> anyhow::Result<BinaryHost> {
    let tenants = fixture.tenants(config)?;
    let host = fixture.host(&tenants).dynamo_leases().args(args).start()?;
    host.wait_for_log("reading shard", shards).await?;
    Ok(host)
}

/// Writes the entries, the refund among them.
async fn produce(fixture: &Fixture) -> anyhow::Result<()> {
    let entries = (0..ENTRIES).map(|id| {
        let amount = if id == REFUND { -5 } else { 10 };
        json!({ "id": id, "amount": amount })
    });
    fixture.put_all("ledger", entries).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenants_counts_and_lag_are_its_own() -> anyhow::Result<()> {
    let (fixture, host) = start("metrics", &[]).await?;
    produce(&fixture).await?;
    let records = "ruststream_records_total";
    let first = scrape_until(&host, |s| {
        s.sum(records, &GLOBEX) == ENTRIES as f64 && s.sum(records, &ACME) == ENTRIES as f64
    })
    .await?;
    // Each tenant's outcomes are what was produced, and only its own.
    let outcome = |tenant: &str, outcome: &str| {
        first.sum(records, &[("tenant", tenant), ("outcome", outcome)])
    };
    assert_eq!(outcome("acme", "ack"), (ENTRIES - 1) as f64);
    assert_eq!(outcome("acme", "retry"), 1.0);
    assert_eq!(outcome("globex", "ack"), ENTRIES as f64);
    assert_eq!(outcome("globex", "retry"), 0.0);
    assert_eq!(first.sum("ruststream_held_records", &ACME), 1.0);
    assert_eq!(first.sum("ruststream_held_records", &GLOBEX), 0.0);
    for tenant in [&ACME, &GLOBEX] {
        assert_eq!(
            first.sum("ruststream_leases_held", tenant),
            2.0,
            "{tenant:?}"
        );
        assert!(first.sum("ruststream_call_duration_seconds_count", tenant) >= 1.0);
        assert_eq!(first.sum("ruststream_tenant_quarantined", tenant), 0.0);
    }
    let held_age = |s: &Scrape| s.max("ruststream_oldest_held_age_seconds", &ACME);
    let behind = |s: &Scrape, tenant| s.max("ruststream_behind_latest_seconds", tenant);
    let (age, acme_behind) = (held_age(&first), behind(&first, &ACME));
    anyhow::ensure!(
        age.is_some() && acme_behind.is_some(),
        "no acme shard: {first:?}"
    );

    // The hold ages, and acme's checkpoint falls behind with it; globex's stays at the tip.
    let later = scrape_until(&host, |s| {
        held_age(s) >= age.map(|a| a + 1.0) && behind(s, &ACME) > acme_behind
    })
    .await?;
    let acme_behind = behind(&later, &ACME).unwrap_or_default();
    let age = held_age(&later).unwrap_or_default();
    // Both from one hold time in ms, in seconds as floats: compare to the millisecond.
    assert!(
        acme_behind + 0.001 >= age,
        "{acme_behind} s behind, held {age} s"
    );
    let globex_behind = behind(&later, &GLOBEX).unwrap_or(f64::MAX);
    assert!(globex_behind < 1.0, "globex is {globex_behind} s behind");
    assert_eq!(
        later.sum("ruststream_oldest_held_age_seconds", &GLOBEX),
        0.0
    );
    // Every globex record is checkpointed in DynamoDB; acme's shard without the refund too.
    let written = [("result", "ok")];
    let checkpointed = scrape_until(&host, |s| {
        let ok = |tenant| {
            s.sum(
                "ruststream_checkpoint_writes_total",
                &[("tenant", tenant), written[0]],
            )
        };
        ok("globex") >= 2.0 && ok("acme") >= 1.0
    })
    .await?;
    assert_eq!(
        checkpointed.sum("ruststream_leases_taken_total", &GLOBEX),
        2.0
    );

    host.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_log_lines_say_whose_they_are() -> anyhow::Result<()> {
    let (fixture, host) = start("json-log", &["--log-format", "json"]).await?;
    produce(&fixture).await?;
    let booked = |line: &Value| line["message"] == "booked";
    let all_booked = eventually(Duration::from_secs(60), || {
        json_lines(&host.output())
            .iter()
            .filter(|l| booked(l))
            .count()
            == (ENTRIES - 1) as usize
    })
    .await;
    anyhow::ensure!(all_booked, "not every entry booked: {}", host.output());
    let output = host.stop().await?;
    let lines = json_lines(&output);
    assert_eq!(
        lines.len(),
        output.lines().count(),
        "every line is one JSON object"
    );
    // The component's line: whose it is from the spans, its own fields as separate keys.
    let line = lines.iter().find(|l| booked(l)).expect("a booked line");
    assert_whose(line, ["acme", "ledger", "book"]);
    assert_eq!(line["fields"]["amount"], "10", "{line}");
    assert!(line["fields"]["entry.id"].as_str().is_some(), "{line}");
    assert_eq!(line["target"], "ruststream::guest", "{line}");
    // The host's lines about a shard of the other tenant, on a stream of the same name.
    let opened: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "reading shard" && l["tenant"] == "globex")
        .collect();
    assert_eq!(opened.len(), 2, "{output}");
    for line in opened {
        assert_whose(line, ["globex", "audit", "audit"]);
    }
    // Held: the retry's warning names the tenant and the record.
    let held = lines
        .iter()
        .find(|l| l["level"] == "WARN" && l["tenant"] == "acme" && l["sequence"].is_string());
    assert!(held.is_some(), "{output}");
    Ok(())
}

/// `line` is about a shard of `ledger` read by `[tenant, app, subscriber]`.
fn assert_whose(line: &Value, [tenant, app, subscriber]: [&str; 3]) {
    assert_eq!(line["tenant"], tenant, "{line}");
    assert_eq!(line["app"], app, "{line}");
    assert_eq!(line["subscriber"], subscriber, "{line}");
    assert_eq!(line["stream"], "ledger", "{line}");
    let shard = line["shard"].as_str().unwrap_or_default();
    assert!(shard.starts_with("shardId-"), "{line}");
}

/// The lines of a JSON log that parse as JSON objects.
fn json_lines(output: &str) -> Vec<Value> {
    output
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(Value::is_object)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_fails_while_quarantined_not_paused_and_lag_rises_in_both() -> anyhow::Result<()>
{
    let fixture = Fixture::builder("ready-quarantine")
        .stream("intake", 1)
        .stream("intake.dead", 1)
        .dynamo()
        .start()
        .await?;
    let config = format!(
        "[[tenants]]\nname = \"crashy\"\ncomponents = [\"{}\"]\nsubscribe = [\"intake\"]\n\
         publish = [\"intake.dead\"]\nquarantine_after = 2\n",
        guests::POISON.path().display()
    );
    let host = launch(&fixture, &config, 1, &[]).await?;
    let addr = host.admin_addr().await?;
    let readyz = || http(&addr, "GET", "/readyz", b"");
    let ready = poll_for(Duration::from_secs(30), async || {
        readyz().ok().filter(|(code, _)| *code == 200)
    })
    .await;
    anyhow::ensure!(ready.is_some(), "never ready: {}", host.output());
    // Two poison entries in a row: two failed calls, and the tenant is quarantined.
    let poison = (1..=3).map(|id| json!({ "id": id, "amount": -1 }));
    fixture.put_all("intake", poison).await?;
    let unready = poll_for(Duration::from_secs(60), async || {
        readyz().ok().filter(|(code, _)| *code == 503)
    })
    .await;
    let (_, body) = unready.ok_or_else(|| anyhow::anyhow!("readyz stayed ready"))?;
    assert!(
        body.contains("tenant `crashy` is quarantined (2 consecutive failed calls"),
        "{body}"
    );
    // Nobody reads its shard now, and its lag says so: it keeps rising.
    let crashy = [("tenant", "crashy")];
    let behind = |s: &Scrape| s.max("ruststream_behind_latest_seconds", &crashy);
    let first = behind(&host.scrape().await?).unwrap_or_default();
    let later = scrape_until(&host, |s| behind(s).is_some_and(|b| b >= first + 2.0)).await?;
    assert_eq!(later.sum("ruststream_tenant_quarantined", &crashy), 1.0);
    assert_eq!(later.sum("ruststream_tenant_paused", &crashy), 0.0);
    // SIGUSR1 lifts the quarantine: ready again.
    host.signal("USR1")?;
    let again = poll_for(Duration::from_secs(30), async || {
        readyz().ok().filter(|(code, _)| *code == 200)
    })
    .await;
    assert!(
        again.is_some(),
        "not ready after SIGUSR1: {}",
        host.output()
    );
    // An operator's pause is reported, not failing, and the paused shard's lag rises too.
    let admin = AdminApi::new(&addr, &host.state_dir())?;
    let (code, body) = admin.call("POST", "/v1/tenants/crashy/pause", None, b"")?;
    assert_eq!(code, 200, "{body}");
    let paused = scrape_until(&host, |s| s.sum("ruststream_tenant_paused", &crashy) == 1.0).await?;
    let first = behind(&paused).unwrap_or_default();
    let later = scrape_until(&host, |s| behind(s).is_some_and(|b| b >= first + 2.0)).await?;
    assert_eq!(later.sum("ruststream_tenant_quarantined", &crashy), 0.0);
    let (code, body) = readyz()?;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("crashy") && body.contains("paused"), "{body}");
    host.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_with_many_subscriptions_stays_under_the_series_bound() -> anyhow::Result<()> {
    const RECORDS: u64 = 5;
    const SUBSCRIPTIONS: u64 = 64;
    let fixture = Fixture::builder("series-bound")
        .stream("wide", 1)
        .dynamo()
        .start()
        .await?;
    // The default bound (1 000 series) holds 24 subscriptions' series beside the folded set and
    // the tenant's own; 40 are folded.
    let config = format!(
        "[[tenants]]\nname = \"wide\"\ncomponents = [\"{}\"]\nsubscribe = [\"wide\"]\n",
        guests::HOSTILE_DECL_WIDE.path().display()
    );
    let host = launch(&fixture, &config, 64, &[]).await?;
    fixture
        .put_all("wide", (1..=RECORDS).map(|id| json!({ "id": id })))
        .await?;
    let wide = [("tenant", "wide")];
    let settled = |s: &Scrape| s.sum("ruststream_records_total", &wide);
    let scrape = scrape_until(&host, |s| settled(s) >= (RECORDS * SUBSCRIPTIONS) as f64).await?;
    // Every record of every subscription is counted, folded or not.
    assert_eq!(settled(&scrape), (RECORDS * SUBSCRIPTIONS) as f64);
    let series = scrape
        .0
        .iter()
        .filter(|s| s.labels.get("tenant").map(String::as_str) == Some("wide"));
    let subscribers: std::collections::BTreeSet<&str> = series
        .clone()
        .filter_map(|s| s.labels.get("subscriber").map(String::as_str))
        .collect();
    assert!(
        series.clone().count() <= 1_000,
        "{} series for one tenant",
        series.count()
    );
    eprintln!("{} series for tenant `wide`", series.clone().count());
    assert!(subscribers.contains("_other"), "{subscribers:?}");
    assert_eq!(
        subscribers.len(),
        25,
        "24 of their own and `_other`: {subscribers:?}"
    );
    assert_eq!(
        scrape.sum("ruststream_metric_subscriptions_folded", &wide),
        40.0
    );
    let folded = [("tenant", "wide"), ("subscriber", "_other")];
    assert_eq!(
        scrape.sum("ruststream_records_total", &folded),
        (RECORDS * 40) as f64
    );
    host.stop().await?;
    Ok(())
}

/// `ruststream ARGS` against `host`'s admin API (the token from its state directory): what it
/// printed, once it succeeded.
async fn verb(host: &BinaryHost, args: &[&str]) -> anyhow::Result<String> {
    let url = format!("http://{}", host.admin_addr().await?);
    let mut command = Command::new(binary());
    command
        .args(args)
        .args(["--admin", &url])
        .env("RUSTSTREAM_STATE_DIR", host.state_dir());
    let out = tokio::task::spawn_blocking(move || command.output()).await??;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    anyhow::ensure!(
        out.status.success(),
        "{args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(text)
}

/// The shards of `tenant`'s subscription `subscriber` in `ruststream status --json`.
async fn status_shards(
    host: &BinaryHost,
    tenant: &str,
    subscriber: &str,
) -> anyhow::Result<Vec<Value>> {
    let status: Value = serde_json::from_str(&verb(host, &["status", "--json"]).await?)?;
    let shards = status["tenants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["name"] == tenant)
        .flat_map(|t| t["apps"].as_array().into_iter().flatten())
        .flat_map(|a| a["subscriptions"].as_array().into_iter().flatten())
        .filter(|s| s["name"] == subscriber)
        .flat_map(|s| s["shards"].as_array().into_iter().flatten())
        .cloned()
        .collect();
    Ok(shards)
}

const OUTCOMES: [&str; 4] = ["ack", "drop", "retry", "retry_after"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_counts_what_metrics_count_when_copies_settle_at_their_due_time()
-> anyhow::Result<()> {
    let fixture = Fixture::builder("status-due")
        .stream("refunds", 1)
        .stream("refunds.dead", 1)
        .stream("payouts", 1)
        .stream("audit", 1)
        .start()
        .await?;
    // `reconcile` retries every refund, 3 attempts, then the dead letter. The second copy is
    // due 4 s after it is made: it is read before then and settled when it comes due, on a
    // shard that reads nothing after it.
    let config = format!(
        "[[tenants]]\nname = \"acme\"\ncomponents = [\"{}\"]\n\
         subscribe = [\"refunds\", \"payouts\", \"audit\"]\npublish = [\"refunds.dead\"]\n\
         limits = {{ min_copy_delay = \"4s\" }}\n",
        guests::SETTLEMENT_RETRIES.path().display()
    );
    let host = fixture.host(&fixture.tenants(&config)?).start()?;
    host.wait_for_log("reading shard", 3).await?;
    fixture
        .put("refunds", &json!({ "id": 9, "amount": -5 }))
        .await?;
    let reconcile = [("tenant", "acme"), ("subscriber", "reconcile")];
    let scrape = scrape_until(&host, |s| {
        s.sum("ruststream_dead_letters_total", &reconcile) == 1.0
    })
    .await?;
    assert_eq!(
        scrape.sum(
            "ruststream_records_total",
            &[reconcile[0], reconcile[1], ("outcome", "retry")]
        ),
        3.0,
        "three attempts"
    );
    // Nothing is read after the last attempt; status says what /metrics says all the same.
    let shards = status_shards(&host, "acme", "reconcile").await?;
    anyhow::ensure!(!shards.is_empty(), "no reconcile shard in status");
    for outcome in OUTCOMES {
        let in_status: u64 = shards
            .iter()
            .map(|shard| shard["outcomes"][outcome].as_u64().unwrap_or_default())
            .sum();
        let labels = [reconcile[0], reconcile[1], ("outcome", outcome)];
        assert_eq!(
            in_status as f64,
            scrape.sum("ruststream_records_total", &labels),
            "{outcome}: status {shards:?}"
        );
    }
    host.stop().await?;
    Ok(())
}

/// Now, in ms since the epoch.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_taken_while_its_tenant_is_paused_never_reads_as_caught_up() -> anyhow::Result<()> {
    let fixture = Fixture::builder("paused-lag")
        .stream("ledger", 1)
        .dynamo()
        .start()
        .await?;
    let config = format!(
        "[[tenants]]\nname = \"acme\"\ncomponents = [\"{}\"]\nsubscribe = [\"ledger\"]\n",
        guests::SETTLEMENT.path().display()
    );
    // Two hosts on one lease table, each with its own state directory (beside its tenants
    // file): `a` reads the shard, `b` waits for a lease (one shard, two hosts: `a` holds its
    // share).
    let sync = ["--shard-sync-interval", "1000ms"];
    for host in ["a", "b"] {
        std::fs::create_dir_all(fixture.dir().join(host))?;
    }
    let a = fixture
        .host(&fixture.tenants_file("a/tenants.toml", &config)?)
        .log("a.log")
        .dynamo_leases()
        .owner("a")
        .args(&sync)
        .start()?;
    a.wait_for_log("reading shard", 1).await?;
    let b = fixture
        .host(&fixture.tenants_file("b/tenants.toml", &config)?)
        .log("b.log")
        .dynamo_leases()
        .owner("b")
        .args(&sync)
        .start()?;
    b.wait_for_log("every tenant is loaded", 1).await?;
    for host in [&a, &b] {
        verb(host, &["pause", "acme"]).await?;
    }
    // Records nobody handles: the checkpoint stays in front of them.
    fixture
        .put_all(
            "ledger",
            (1..=3).map(|id| json!({ "id": id, "amount": 10 })),
        )
        .await?;
    let put = now_ms();
    // `a` stops (its checkpoint flushed, its lease released) and `b` takes the lease while
    // its tenant is paused: it reads nothing for the tenant, and its lag is not 0.
    a.stop().await?;
    b.wait_for_log("reading shard", 1).await?;
    let acme = [("tenant", "acme")];
    let scrape = scrape_until(&b, |s| {
        s.max("ruststream_held_records", &acme).is_some()
            && s.max("ruststream_behind_latest_seconds", &acme).is_some()
    })
    .await?;
    let waited = (now_ms() - put) as f64 / 1000.0;
    let behind = scrape
        .max("ruststream_behind_latest_seconds", &acme)
        .unwrap_or_default();
    assert!(
        behind + 0.001 >= waited,
        "{behind} s behind while records have waited {waited} s: {}",
        b.output()
    );
    let shards = status_shards(&b, "acme", "book").await?;
    let waited_ms = now_ms() - put;
    let shown = shards
        .iter()
        .filter_map(|shard| shard["millis_behind_latest"].as_u64())
        .max();
    assert!(
        shown.is_some_and(|ms| ms >= waited_ms),
        "status: {shards:?}, waited {waited_ms} ms"
    );
    assert!(
        shards.iter().all(|shard| shard["paused"] == json!(true)),
        "{shards:?}"
    );
    b.stop().await?;
    Ok(())
}
