//! The Grafana dashboard (`deploy/grafana/ruststream.json`) and the Prometheus alert rules
//! (`deploy/prometheus/alerts.yml`) against the host they watch (see docs/dashboards.md):
//!
//! - promtool checks the rules and runs their unit tests (`alerts_test.yml`); without promtool
//!   the test fails, saying how to install it, rather than pass having checked nothing;
//! - the dashboard is one Grafana imports: every query on the `${datasource}` variable;
//! - a running host is driven through what the panels and alerts show (shards read, a
//!   GetRecords throttled, components compiled, a swap, a rollback, a shadow comparing, not
//!   ready, ready and not ready again) and scraped until every metric a panel, a template variable or
//!   an alert names is there, with every label their selectors match on: a misspelt or renamed
//!   metric fails it, named.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::guests;
use ruststream_tests::http::http;
use ruststream_tests::process::{metrics_addr, verb};
use ruststream_tests::scrape::{Sample, Scrape};
use ruststream_tests::wait::poll_for;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How long each step of the scrape test may take: components compile in the worker of a
/// debug build, on a loaded two-core machine.
const LONG: Duration = Duration::from_secs(240);

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn dashboard() -> Result<Value> {
    let path = deploy().join("grafana/ruststream.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

fn rules() -> Result<String> {
    let path = deploy().join("prometheus/alerts.yml");
    std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn promtool_checks_the_rules_and_runs_their_unit_tests() -> Result<()> {
    let dir = deploy().join("prometheus");
    for args in [
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts_test.yml"],
    ] {
        let output = match Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
        {
            Ok(output) => output,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => bail!(
                "promtool is not installed ({error}): it comes with Debian's `prometheus` \
                 package (`apt-get install -y --no-install-recommends prometheus`), or put the \
                 promtool of a Prometheus 2.x release on PATH"
            ),
            Err(error) => return Err(error).context("running promtool"),
        };
        ensure!(
            output.status.success(),
            "`promtool {}` in {} failed ({}):\n{}",
            args.join(" "),
            dir.display(),
            output.status,
            text(&output)
        );
    }
    Ok(())
}

#[test]
fn every_query_of_the_dashboard_is_on_its_datasource_variable() -> Result<()> {
    let dashboard = dashboard()?;
    assert!(
        dashboard["schemaVersion"].as_u64() >= Some(39),
        "schemaVersion"
    );
    assert_eq!(dashboard["uid"], "ruststream");
    let variables = dashboard["templating"]["list"]
        .as_array()
        .context("no templating.list")?;
    let datasource = variables
        .iter()
        .find(|v| v["name"] == "datasource")
        .context("no `datasource` variable")?;
    assert_eq!(datasource["type"], "datasource");
    assert_eq!(datasource["query"], "prometheus");
    let on_variable = json!({"type": "prometheus", "uid": "${datasource}"});
    let mut ids = BTreeSet::new();
    let panels = dashboard["panels"].as_array().context("no panels")?;
    for panel in panels {
        let title = &panel["title"];
        assert!(ids.insert(panel["id"].as_u64()), "id of {title} taken");
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(panel["datasource"], on_variable, "{title}");
        let targets = panel["targets"].as_array().context("no targets")?;
        assert!(!targets.is_empty(), "{title} queries nothing");
        for target in targets {
            assert_eq!(target["datasource"], on_variable, "{title}");
            let expr = target["expr"].as_str().unwrap_or_default();
            assert!(expr.contains("ruststream_"), "{title}: {expr}");
        }
    }
    for variable in variables.iter().filter(|v| v["type"] == "query") {
        assert_eq!(variable["datasource"], on_variable, "{}", variable["name"]);
    }
    assert!(panels.len() > 20, "{} panels", panels.len());
    Ok(())
}

/// The metrics the dashboard and the rules name, with the label keys their selectors match on
/// (`instance` and `job` are Prometheus's own, and not checked), and where each is named.
#[derive(Debug, Default)]
struct Wanted(BTreeMap<String, (BTreeSet<String>, BTreeSet<&'static str>)>);

impl Wanted {
    fn add(&mut self, expr: &str, source: &'static str) {
        for (name, labels) in selectors(expr) {
            let entry = self.0.entry(name).or_default();
            entry.0.extend(
                labels
                    .into_iter()
                    .filter(|label| label != "instance" && label != "job"),
            );
            entry.1.insert(source);
        }
    }

    fn names(&self, source: &str) -> BTreeSet<&str> {
        self.0
            .iter()
            .filter(|(_, (_, sources))| sources.contains(source))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// What `scrape` lacks: each metric not in it, each label key no sample of its metric has.
    fn missing(&self, scrape: &Exposition) -> Vec<String> {
        let mut missing = Vec::new();
        for (name, (labels, sources)) in &self.0 {
            let sources = sources.iter().copied().collect::<Vec<_>>().join(", ");
            let samples = scrape.samples_of(name);
            if samples.is_empty() {
                missing.push(format!("{name} (named by the {sources})"));
                continue;
            }
            for label in labels {
                if !samples.iter().any(|s| s.labels.contains_key(label)) {
                    missing.push(format!(
                        "label `{label}` of {name} (named by the {sources})"
                    ));
                }
            }
        }
        missing
    }
}

/// Every `ruststream_*` name in `expr` not inside a longer identifier, with the label keys of
/// the `{...}` right after it, if any.
fn selectors(expr: &str) -> Vec<(String, Vec<String>)> {
    const PREFIX: &str = "ruststream_";
    let is_name = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    let mut found = Vec::new();
    for (at, _) in expr.match_indices(PREFIX) {
        let before = expr[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let tail = &expr[at + PREFIX.len()..];
        let end = tail.find(|c: char| !is_name(c)).unwrap_or(tail.len());
        if end == 0 {
            continue;
        }
        let name = format!("{PREFIX}{}", &tail[..end]);
        let labels = tail[end..]
            .strip_prefix('{')
            .map(label_keys)
            .unwrap_or_default();
        found.push((name, labels));
    }
    found
}

/// The keys of the matchers `key op "value", ...}` open at `text`, up to the closing brace.
fn label_keys(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let (mut key, mut in_key, mut quoted, mut escaped) = (String::new(), true, false, false);
    for c in text.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            _ if quoted => {}
            '}' => break,
            ',' => in_key = true,
            '=' | '!' | '~' => in_key = false,
            c if in_key && !c.is_whitespace() => key.push(c),
            _ => {}
        }
        if !in_key && !key.is_empty() {
            keys.push(std::mem::take(&mut key));
        }
    }
    keys
}

/// Every PromQL text of a dashboard: its panels' `expr`, its template variables' `query` and
/// `definition`.
fn dashboard_queries(json: &Value, out: &mut Vec<String>) {
    match json {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr" | "query" | "definition", Value::String(text)) => {
                        out.push(text.clone());
                    }
                    _ => dashboard_queries(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| dashboard_queries(item, out)),
        _ => {}
    }
}

/// The `expr` of every rule in a rules file: inline, or a block scalar (`>-`, `|`) over the
/// lines indented deeper than its key.
fn rule_exprs(yaml: &str) -> Vec<String> {
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut exprs = Vec::new();
    let mut lines = yaml.lines().peekable();
    while let Some(line) = lines.next() {
        // The key's column: past the `- ` of a list item's first key.
        let key = line.trim_start();
        let key = key.strip_prefix("- ").unwrap_or(key);
        let Some(value) = key.strip_prefix("expr:") else {
            continue;
        };
        let column = line.len() - key.len();
        let value = value.trim();
        if value.starts_with(['|', '>']) {
            let mut block = Vec::new();
            while let Some(next) = lines.next_if(|l| l.trim().is_empty() || indent(l) > column) {
                block.push(next.trim());
            }
            exprs.push(block.join(" "));
        } else {
            exprs.push(value.trim_matches(['"', '\'']).to_owned());
        }
    }
    exprs
}

fn wanted() -> Result<Wanted> {
    let mut wanted = Wanted::default();
    let mut queries = Vec::new();
    dashboard_queries(&dashboard()?, &mut queries);
    for query in &queries {
        wanted.add(query, "dashboard");
    }
    let rules = rules()?;
    let exprs = rule_exprs(&rules);
    assert_eq!(
        exprs.len(),
        rules.matches("- alert:").count(),
        "one expr read per alert: {exprs:#?}"
    );
    for expr in &exprs {
        wanted.add(expr, "alerts");
    }
    // The reading itself: a reader that found nothing would pass any scrape.
    let (panels, alerts) = (wanted.names("dashboard"), wanted.names("alerts"));
    for name in [
        "ruststream_behind_latest_seconds",
        "ruststream_oldest_held_age_seconds",
        "ruststream_ready",
        "ruststream_get_records_throttled_total",
    ] {
        assert!(panels.contains(name), "{name} not read from the dashboard");
        assert!(alerts.contains(name), "{name} not read from the alerts");
    }
    assert!(panels.len() >= 20, "{panels:?}");
    assert!(
        wanted.0["ruststream_records_total"].0.contains("outcome"),
        "the selectors' labels are read"
    );
    Ok(wanted)
}

#[test]
fn names_and_labels_are_read_from_both_files() -> Result<()> {
    wanted()?;
    assert_eq!(
        selectors(r#"sum(rate(ruststream_a_bucket{tenant=~"x,}", le!="1"}[5m])) / ruststream_b"#),
        [
            (
                "ruststream_a_bucket".to_owned(),
                vec!["tenant".to_owned(), "le".to_owned()]
            ),
            ("ruststream_b".to_owned(), vec![]),
        ]
    );
    assert_eq!(
        rule_exprs("  - expr: >-\n      a\n      > b\n    for: 1m\n  - expr: c > 1\n"),
        ["a > b", "c > 1"]
    );
    Ok(())
}

/// One scrape: its samples, and which of its metrics are histograms (whose samples are
/// `_bucket`, `_sum` and `_count`).
struct Exposition {
    scrape: Scrape,
    histograms: BTreeSet<String>,
}

impl Exposition {
    fn parse(text: &str) -> Result<Self> {
        let histograms = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .filter_map(|rest| rest.strip_suffix(" histogram"))
            .map(str::to_owned)
            .collect();
        Ok(Self {
            scrape: Scrape::parse(text)?,
            histograms,
        })
    }

    /// The samples of `name`; of all of a histogram's series when `name` is one, bare or with
    /// its `_bucket`, `_sum` or `_count`.
    fn samples_of(&self, name: &str) -> Vec<&Sample> {
        const PARTS: [&str; 3] = ["_bucket", "_sum", "_count"];
        let histogram = PARTS
            .iter()
            .filter_map(|part| name.strip_suffix(part))
            .chain([name])
            .find(|base| self.histograms.contains(*base));
        self.scrape
            .0
            .iter()
            .filter(|s| match histogram {
                Some(base) => s
                    .name
                    .strip_prefix(base)
                    .is_some_and(|part| PARTS.contains(&part)),
                None => s.name == name,
            })
            .collect()
    }
}

#[test]
fn a_histogram_is_matched_by_its_name_and_its_series() -> Result<()> {
    let scrape = Exposition::parse(
        "# TYPE ruststream_h histogram\nruststream_h_bucket{tenant=\"a\",le=\"1\"} 1\n\
         ruststream_h_sum{tenant=\"a\"} 1\nruststream_h_count{tenant=\"a\"} 1\n\
         # TYPE ruststream_g_count gauge\nruststream_g_count 2\n",
    )?;
    for name in ["ruststream_h", "ruststream_h_bucket", "ruststream_h_count"] {
        assert_eq!(scrape.samples_of(name).len(), 3, "{name}");
    }
    assert_eq!(scrape.samples_of("ruststream_g_count").len(), 1);
    assert!(
        scrape.samples_of("ruststream_g").is_empty(),
        "not a histogram"
    );
    assert!(scrape.samples_of("ruststream_h_total").is_empty());
    Ok(())
}

/// `GET path` of `addr`, off the runtime's threads (the proxy's relays run there).
async fn get(addr: &str, path: &str) -> Result<(u16, String)> {
    let (addr, path) = (addr.to_owned(), path.to_owned());
    tokio::task::spawn_blocking(move || http(&addr, "GET", &path, b"")).await?
}

async fn scrape(metrics: &str) -> Result<Exposition> {
    let (status, body) = get(metrics, "/metrics").await?;
    ensure!(status == 200, "GET /metrics: {status} {body}");
    Exposition::parse(&body)
}

/// `ruststream ARGS` against `host`'s admin API; fails with what it printed unless it succeeds.
async fn admin_verb(host: &BinaryHost, admin: &str, args: &[&str]) -> Result<String> {
    let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    args.extend([
        "--admin".to_owned(),
        format!("http://{admin}"),
        "--state-dir".to_owned(),
        host.state_dir().display().to_string(),
    ]);
    let (ok, text) = tokio::task::spawn_blocking(move || {
        verb(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await??;
    ensure!(ok, "{text}");
    Ok(text)
}

/// Waits until `GET /readyz` says `ready` (naming `reason` when not) and the scrape's
/// `ruststream_ready` says the same.
async fn wait_ready(
    host: &BinaryHost,
    addrs: (&str, &str),
    ready: bool,
    reason: &str,
) -> Result<()> {
    let (admin, metrics) = addrs;
    let mut last = String::new();
    let agreed = poll_for(LONG, async || {
        let (code, body) = get(admin, "/readyz").await.ok()?;
        let gauge = scrape(metrics)
            .await
            .ok()?
            .scrape
            .max("ruststream_ready", &[]);
        last = format!("/readyz {code} {body}; ruststream_ready {gauge:?}");
        let readyz = if ready {
            code == 200
        } else {
            code == 503 && body.contains(reason)
        };
        (readyz && gauge == Some(f64::from(u8::from(ready)))).then_some(())
    })
    .await;
    ensure!(
        agreed.is_some(),
        "waited {LONG:?} for ready = {ready}; last: {last}\n{}",
        host.output()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_host_exports_every_metric_the_dashboard_and_the_alerts_name() -> Result<()> {
    let wanted = wanted()?;
    // `legacy`, which version 1 reads, does not exist: the host is not ready while it runs.
    let fixture = Fixture::builder("dashboards")
        .stream("events", 1)
        .stream("audit", 1)
        .start()
        .await?;
    let proxy = Throttler::start(&fixture.kinesis.endpoint(), 2).await?;
    let component = fixture.dir().join("versioned.wasm");
    std::fs::copy(guests::VERSIONED_V1.path(), &component)?;
    let tenants = fixture.tenants(&format!(
        "[[tenants]]\nname = \"acme\"\ncomponents = [\"{}\"]\n\
         subscribe = [\"events\", \"legacy\", \"audit\"]\n",
        component.display()
    ))?;
    // An empty compile cache: the first load compiles.
    let cache = fixture.dir().join("compiled");
    let host = fixture
        .host(&tenants)
        .kinesis_endpoint(&proxy.endpoint())
        .args(&["--compile-cache", &cache.display().to_string()])
        .start()?;
    host.wait_until(LONG, "the shard of `events` read", |log| {
        log.contains("reading shard")
    })
    .await?;
    let admin = host.admin_addr().await?;
    let metrics = poll_for(LONG, async || metrics_addr(&host.output()))
        .await
        .context("no metrics endpoint")?;
    let addrs = (admin.as_str(), metrics.as_str());
    wait_ready(&host, addrs, false, "legacy").await?;
    fixture
        .put_all("events", (1..=5).map(|id| json!({ "id": id })))
        .await?;

    // Version 2 reads `events` and `audit`: swapped in, the host is ready.
    let v2 = guests::VERSIONED_V2.path().display().to_string();
    admin_verb(
        &host,
        &admin,
        &["deploy", "acme", &v2, "--name", "versioned"],
    )
    .await?;
    wait_ready(&host, addrs, true, "").await?;
    // Rolled back to version 1, it is not ready again; version 2 runs beside it as a shadow.
    admin_verb(&host, &admin, &["rollback", "acme", "versioned"]).await?;
    wait_ready(&host, addrs, false, "legacy").await?;
    admin_verb(
        &host,
        &admin,
        &["deploy", "acme", &v2, "--name", "versioned", "--shadow"],
    )
    .await?;
    fixture
        .put_all("events", (6..=10).map(|id| json!({ "id": id })))
        .await?;

    let agreed = [("result", "agree")];
    let mut last = Vec::new();
    let complete = poll_for(LONG, async || {
        let scrape = scrape(&metrics).await.ok()?;
        last = wanted.missing(&scrape);
        if scrape
            .scrape
            .sum("ruststream_shadow_records_total", &agreed)
            < 1.0
        {
            last.push("a shadow record compared and agreed on".to_owned());
        }
        last.is_empty().then_some(scrape)
    })
    .await;
    let Some(scrape) = complete else {
        bail!(
            "after {LONG:?}, the host's scrape lacks what the dashboard and the alerts name:\n  \
             {}\nhost log:\n{}",
            last.join("\n  "),
            host.output()
        );
    };
    assert!(proxy.throttled() >= 1);
    let throttled = scrape
        .scrape
        .sum("ruststream_get_records_throttled_total", &[]);
    assert!(throttled >= 1.0, "{throttled} throttles counted");
    assert!(scrape.scrape.sum("ruststream_swaps_total", &[]) >= 1.0);
    let by_operator = [("trigger", "operator")];
    assert_eq!(
        scrape
            .scrape
            .sum("ruststream_rollbacks_total", &by_operator),
        1.0
    );
    host.stop().await?;
    Ok(())
}

/// A loopback proxy in front of the Kinesis server that answers the first few GetRecords
/// itself, with the `ProvisionedThroughputExceededException` Kinesis throttles with
/// (kinesis-local never throttles), and forwards every other request; stops when dropped.
struct Throttler {
    port: u16,
    left: Arc<AtomicU32>,
    throttles: u32,
    accepting: JoinHandle<()>,
}

impl Throttler {
    /// Throttles the first `throttles` GetRecords on their way to `upstream`
    /// (`http://127.0.0.1:port`).
    async fn start(upstream: &str, throttles: u32) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let left = Arc::new(AtomicU32::new(throttles));
        let counting = left.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, left) = (upstream.clone(), counting.clone());
                tokio::spawn(async move {
                    if let Err(error) = relay(client, &upstream, &left).await {
                        eprintln!("throttling proxy: connection ended: {error:#}");
                    }
                });
            }
        });
        Ok(Self {
            port,
            left,
            throttles,
            accepting,
        })
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// How many GetRecords it answered itself.
    fn throttled(&self) -> u32 {
        self.throttles - self.left.load(Ordering::SeqCst)
    }
}

impl Drop for Throttler {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Forwards the client's requests to the server one at a time and copies the answers back; a
/// throttled request is answered here instead (a client sends its next request only once it
/// has the answer to the last, so answers never mix). The client's connection ends with the
/// server's.
async fn relay(client: TcpStream, upstream: &str, left: &AtomicU32) -> Result<()> {
    let server = TcpStream::connect(upstream)
        .await
        .with_context(|| format!("connecting to {upstream}"))?;
    let (client_read, client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let client_write = Arc::new(tokio::sync::Mutex::new(client_write));
    let writer = client_write.clone();
    let answers = tokio::spawn(async move {
        let mut chunk = vec![0u8; 64 << 10];
        while let Ok(read) = server_read.read(&mut chunk).await {
            if read == 0 || writer.lock().await.write_all(&chunk[..read]).await.is_err() {
                break;
            }
        }
        let _ = writer.lock().await.shutdown().await;
    });
    let mut requests = BufReader::new(client_read);
    while let Some((raw, target)) = next_request(&mut requests).await? {
        let throttle = target.ends_with(".GetRecords")
            && left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if throttle {
            client_write.lock().await.write_all(&throttled()).await?;
        } else {
            server_write.write_all(&raw).await?;
        }
    }
    answers.abort();
    Ok(())
}

/// The next request's bytes (head and `Content-Length` body) and its `X-Amz-Target`; `None`
/// at the end of the connection.
async fn next_request(reader: &mut BufReader<OwnedReadHalf>) -> Result<Option<(Vec<u8>, String)>> {
    let (mut raw, mut length, mut target) = (Vec::new(), 0usize, String::new());
    loop {
        let start = raw.len();
        if reader.read_until(b'\n', &mut raw).await? == 0 {
            return Ok(None);
        }
        let line = String::from_utf8_lossy(&raw[start..]).trim_end().to_owned();
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().context("a bad Content-Length")?,
            "x-amz-target" => value.trim().clone_into(&mut target),
            _ => {}
        }
    }
    let start = raw.len();
    raw.resize(start + length, 0);
    reader.read_exact(&mut raw[start..]).await?;
    Ok(Some((raw, target)))
}

/// Kinesis's answer to a read over the shard's limit: `400` with the JSON protocol's
/// `ProvisionedThroughputExceededException`.
fn throttled() -> Vec<u8> {
    let body = r#"{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded for shard in stream under account 000000000000."}"#;
    format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.1\r\n\
         x-amzn-RequestId: throttled-by-the-test-proxy\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}
