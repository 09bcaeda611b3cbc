//! How long a new component version takes to go live in a running `ruststream run`: from the
//! file landing (renamed over the configured one) to the swap, to every shard changing over,
//! and to the first record the new version handles; with a compiled artifact in the cache and
//! with a cold compile.
//!
//! `cargo build --release -p ruststream-cli && cargo bench -p ruststream-tests --bench
//! swap_latency`. One tenant runs the `versioned` app (`tests/guests/versioned`) on a
//! two-shard stream of kinesis-local while a producer writes a record every few milliseconds.
//! The host's log is read through a pipe and each line is timed as it arrives. A cold version
//! is a known one with a custom section appended (a nonce): the same code, bytes never seen, so
//! the compile worker compiles it. The first record handled waits for the shard's next read,
//! which the reader paces at 200 ms per shard: that figure includes up to one read interval.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ruststream_tests::bench::target_dir;
use ruststream_tests::e2e::put_json;
use ruststream_tests::servers::LocalKinesis;
use ruststream_tests::{Guest, binary, guests};

const SHARDS: usize = 2;
/// Cached swaps per run (`RUSTSTREAM_SWAP_ROUNDS` overrides): enough for a p99 to mean
/// something beyond the maximum.
const CACHED_ROUNDS: usize = 40;
const COLD_ROUNDS: usize = 3;
const TIMEOUT: Duration = Duration::from_secs(120);

/// The host's log lines, each with when it arrived.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<(Instant, String)>>>);

impl Lines {
    fn first_after(&self, since: Instant, matches: impl Fn(&str) -> bool) -> Option<Instant> {
        let lines = self.0.lock().ok()?;
        lines
            .iter()
            .find(|(at, line)| *at >= since && matches(line))
            .map(|(at, _)| *at)
    }

    fn count_after(&self, since: Instant, matches: impl Fn(&str) -> bool) -> usize {
        self.0.lock().map_or(0, |lines| {
            lines
                .iter()
                .filter(|(at, line)| *at >= since && matches(line))
                .count()
        })
    }

    /// Waits until `ready` returns a time, at most [`TIMEOUT`].
    async fn wait(
        &self,
        what: &str,
        ready: impl Fn(&Self) -> Option<Instant>,
    ) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(at) = ready(self) {
                return Ok(at);
            }
            anyhow::ensure!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// One swap's figures, from the file landing.
struct Timing {
    live: Duration,
    changed_over: Duration,
    first_record: Duration,
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream("events", SHARDS as i32).await?;
    // Version 1 also reads `legacy`, version 2 `audit`.
    kinesis.create_stream("legacy", 1).await?;
    kinesis.create_stream("audit", 1).await?;
    let dir = target_dir()?.join("swap-latency");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let component = dir.join("versioned.wasm");
    std::fs::copy(guests::VERSIONED_V1.path(), &component)?;
    let config = dir.join("tenants.toml");
    std::fs::write(
        &config,
        format!(
            "[host]\nlease_store = \"memory\"\ncompile_cache = {:?}\n\n[[tenants]]\nname = \"acme\"\n\
             components = [{component:?}]\nsubscribe = [\"events\", \"legacy\", \"audit\"]\n\
             limits = {{ log_lines_per_second = 100000, log_lines_per_call = 100000 }}\n",
            dir.join("cache")
        ),
    )?;
    let mut child = Command::new(binary())
        .args(["run", "--config"])
        .arg(&config)
        .args([
            "--kinesis-endpoint",
            &kinesis.endpoint(),
            "--region",
            "us-east-1",
        ])
        .args(["--poll-interval", "200ms"])
        .args(["--admin-addr", "off", "--metrics-addr", "off"])
        // Its own state directory: kept versions stay out of the user's.
        .env("RUSTSTREAM_STATE_DIR", dir.join("state"))
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let lines = Lines::default();
    let stdout = child.stdout.take().context("no stdout")?;
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(mut lines) = sink.0.lock() {
                lines.push((Instant::now(), line));
            }
        }
    });
    let start = Instant::now();
    lines
        .wait("both shards reading", |l| {
            (l.count_after(start, |line| line.contains("reading shard")) > SHARDS)
                .then(Instant::now)
        })
        .await?;
    let stop = Arc::new(AtomicBool::new(false));
    let producer = tokio::spawn(produce(kinesis.client().await, stop.clone()));

    let pid = child.id().to_string();
    let swap = |source: &Path, version: &'static str| {
        let (lines, component) = (lines.clone(), component.clone());
        let source = source.to_path_buf();
        async move { swap_once(&lines, &source, &component, version).await }
    };
    // Warm the cache with both versions.
    swap(&guests::VERSIONED_V2.path(), "2").await?;
    swap(&guests::VERSIONED_V1.path(), "1").await?;
    let mut cached = Vec::new();
    let rounds = std::env::var("RUSTSTREAM_SWAP_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CACHED_ROUNDS);
    for round in 0..rounds {
        let (guest, version) = version_for(round);
        cached.push(swap(&guest.path(), version).await?);
    }
    let mut cold = Vec::new();
    for round in 0..COLD_ROUNDS {
        let (guest, version) = version_for(round);
        let fresh = dir.join(format!("cold-{round}.wasm"));
        std::fs::write(&fresh, with_nonce(&std::fs::read(guest.path())?, round))?;
        cold.push(swap(&fresh, version).await?);
    }
    stop.store(true, Ordering::Relaxed);
    producer.await??;
    Command::new("kill").args(["-TERM", &pid]).status()?;
    child.wait()?;

    println!("\nswap latency: from the file landing, {SHARDS} shards, records flowing\n");
    report("cached artifact", &cached);
    report("cold compile", &cold);
    Ok(())
}

fn version_for(round: usize) -> (Guest, &'static str) {
    if round.is_multiple_of(2) {
        (guests::VERSIONED_V2, "2")
    } else {
        (guests::VERSIONED_V1, "1")
    }
}

/// Lands `source` as the component file (the host's file watch picks it up) and times the
/// swap.
async fn swap_once(
    lines: &Lines,
    source: &Path,
    component: &Path,
    version: &str,
) -> anyhow::Result<Timing> {
    // Each round starts right after a read delivered records; landing at a random point of
    // the next read interval keeps the first-record figure from measuring that phase only.
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .subsec_nanos()
        % 200;
    tokio::time::sleep(Duration::from_millis(u64::from(jitter))).await;
    let staged = component.with_extension("staged");
    std::fs::copy(source, &staged)?;
    std::fs::rename(&staged, component)?;
    let landed = Instant::now();
    let live = lines
        .wait("the new version live", |l| {
            l.first_after(landed, |line| line.contains("new version live"))
        })
        .await?;
    let changed_over = lines
        .wait("every shard changed over", |l| {
            let changed = |line: &str| line.contains("shard changed over");
            (l.count_after(landed, changed) >= SHARDS).then(Instant::now)
        })
        .await?;
    let needle = format!("version={version}");
    let first_record = lines
        .wait("a record handled by the new version", |l| {
            l.first_after(landed, |line| {
                line.contains(" handled ") && line.contains(&needle)
            })
        })
        .await?;
    Ok(Timing {
        live: live - landed,
        changed_over: changed_over - landed,
        first_record: first_record - landed,
    })
}

/// `component` with a custom section holding `nonce` appended: the same component, new bytes.
fn with_nonce(component: &[u8], nonce: usize) -> Vec<u8> {
    let payload = format!("{nonce}-{:?}", Instant::now());
    let section = wasm_encoder::CustomSection {
        name: "ruststream-bench-nonce".into(),
        data: payload.as_bytes().into(),
    };
    let mut bytes = component.to_vec();
    wasm_encoder::ComponentSection::append_to_component(&section, &mut bytes);
    bytes
}

async fn produce(kinesis: aws_sdk_kinesis::Client, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        // Explicit hash keys at both ends of the range: every other record on each shard.
        let key = if n.is_multiple_of(2) {
            "1"
        } else {
            "300000000000000000000000000000000000000"
        };
        put_json(
            &kinesis,
            "events",
            &serde_json::json!({ "id": n }),
            Some(key),
        )
        .await?;
        n += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

fn report(what: &str, timings: &[Timing]) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let quantiles = |pick: &dyn Fn(&Timing) -> Duration| {
        let mut all: Vec<Duration> = timings.iter().map(pick).collect();
        all.sort();
        // Nearest rank.
        let at = |q: f64| all[((q * all.len() as f64).ceil() as usize).clamp(1, all.len()) - 1];
        format!(
            "{:.1} / {:.1} / {:.1} / {:.1}",
            ms(all[0]),
            ms(at(0.5)),
            ms(at(0.99)),
            ms(all[all.len() - 1])
        )
    };
    println!(
        "{what} ({} swaps), min / p50 / p99 / max ms:",
        timings.len()
    );
    println!("  live                      {}", quantiles(&|t| t.live));
    println!(
        "  every shard changed over  {}",
        quantiles(&|t| t.changed_over)
    );
    println!(
        "  first record handled      {}",
        quantiles(&|t| t.first_record)
    );
    println!(
        "  first record after live   {}",
        quantiles(&|t| t.first_record.saturating_sub(t.live))
    );
}
