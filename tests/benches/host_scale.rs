//! 1 000 idle tenants in one `ruststream run` process against a local Kinesis server: how long
//! until every one of them reads its shard, and what the process holds then.
//!
//! `cargo build --release -p ruststream-cli && cargo bench -p ruststream-tests --bench
//! host_scale`. Every tenant runs the `book` component (one subscription on `ledger`, one
//! shard, no records), with leases in memory and the compile cache in the target dir (the
//! first run compiles; the figures after it are for a warm cache). The binary logs `reading
//! shard` once per shard it reads; the start time runs from spawning the process to the last
//! of those lines. Then the process idles for [`IDLE`] and its RSS and CPU over that time are
//! read from `/proc`. Idle shards are polled every [`IDLE_POLL`].
//!
//! `-- distinct`: every tenant runs a component of its own, the same `book` with a custom
//! section of its own appended (other bytes, so another content hash and another compiled
//! artifact), as a host of 1 000 tenants who each deploy their own handler holds. The host runs
//! twice: the first run fills the compile cache (cold, unless an earlier run filled it), the
//! second starts from it (warm); both are reported.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ruststream_tests::bench::{status_kib, target_dir};
use ruststream_tests::servers::LocalKinesis;
use ruststream_tests::{binary, guests};

const TENANTS: usize = 1_000;
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// A cold start of 1 000 distinct components compiles each one in the bounded worker.
const COLD_START_TIMEOUT: Duration = Duration::from_secs(3_600);
const IDLE: Duration = Duration::from_secs(10);
/// The pause after an empty read. At the default (1 s) a thousand idle readers of one shard
/// send a thousand GetRecords a second, which saturates kinesis-local (one Node process) long
/// before the host: starting took over 300 s with the server at 100 % CPU and the host at 6 %.
/// Real Kinesis allows 5 reads a second per shard to all readers together.
const IDLE_POLL: Duration = Duration::from_secs(10);

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let distinct = std::env::args().any(|arg| arg == "distinct");
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream("ledger", 1).await?;
    let dir = target_dir()?.join(if distinct {
        "host-scale-distinct"
    } else {
        "host-scale"
    });
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("tenants.toml");
    std::fs::write(&config, tenants_file(&dir, TENANTS, distinct)?)?;
    if distinct {
        println!("\nfirst run (fills the compile cache unless an earlier run did):");
        measure(&kinesis, &dir, &config, COLD_START_TIMEOUT).await?;
        println!("\nsecond run, the compile cache warm:");
    }
    measure(&kinesis, &dir, &config, START_TIMEOUT).await
}

/// Runs the host on `config` until every tenant reads, idles it, and prints what it took.
async fn measure(
    kinesis: &LocalKinesis,
    dir: &std::path::Path,
    config: &std::path::Path,
    start_timeout: Duration,
) -> anyhow::Result<()> {
    // What an earlier run kept would be what this one runs: start without it.
    let _ = std::fs::remove_dir_all(dir.join("state"));
    let started = Instant::now();
    let mut child = Command::new(binary())
        .args(["run", "--config"])
        .arg(config)
        .args([
            "--kinesis-endpoint",
            &kinesis.endpoint(),
            "--region",
            "us-east-1",
        ])
        .args(["--poll-interval", &format!("{}ms", IDLE_POLL.as_millis())])
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
    let pid = child.id();
    let reading = Arc::new(AtomicUsize::new(0));
    let stdout = child.stdout.take().context("no stdout")?;
    let counter = reading.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains("reading shard") {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    while reading.load(Ordering::Relaxed) < TENANTS {
        if started.elapsed() > start_timeout || child.try_wait()?.is_some() {
            let _ = child.kill();
            anyhow::bail!(
                "{} of {TENANTS} tenants reading after {:?}",
                reading.load(Ordering::Relaxed),
                started.elapsed()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        if started.elapsed().as_millis() % 10_000 < 50 {
            eprintln!(
                "{:>4.0} s: {} of {TENANTS} tenants reading",
                started.elapsed().as_secs_f64(),
                reading.load(Ordering::Relaxed)
            );
        }
    }
    let start = started.elapsed();
    let rss_started = rss_kib(pid)?;
    let cpu_before = cpu_ticks(pid)?;
    tokio::time::sleep(IDLE).await;
    let idle_cpu = cpu_ticks(pid)? - cpu_before;
    let rss = rss_kib(pid)?;
    // What of it is the process's own (heap, instances) and what is mapped from files (the
    // binary, compiled artifacts: page cache, shared with other processes mapping them).
    let anonymous = rollup_kib(pid, "Anonymous")?;
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    let stopped = child.wait()?;
    ensure!(stopped.success(), "the host exited with {stopped}");

    let ticks = clock_ticks_per_second()?;
    println!(
        "\nhost scale: {TENANTS} idle tenants in one process, kinesis-local, leases in memory\n\n\
         all reading after {:.2} s; RSS {:.0} MiB then, {:.0} MiB after {IDLE:?} idle \
         ({:.0} KiB per tenant; {:.0} MiB anonymous, {:.0} MiB mapped from files); CPU while \
         idle {:.0} % of one core",
        start.as_secs_f64(),
        rss_started as f64 / 1024.0,
        rss as f64 / 1024.0,
        rss as f64 / TENANTS as f64,
        anonymous as f64 / 1024.0,
        rss.saturating_sub(anonymous) as f64 / 1024.0,
        idle_cpu as f64 / ticks as f64 / IDLE.as_secs_f64() * 100.0
    );
    Ok(())
}

/// A config of `count` tenants, each granted `ledger` and running the `book` component: the
/// same file for all, or with `distinct` a copy of its own (written in `dir`).
fn tenants_file(dir: &std::path::Path, count: usize, distinct: bool) -> anyhow::Result<String> {
    let book = guests::BENCH_BOOK.path();
    let bytes = std::fs::read(&book)?;
    let copies = dir.join("components");
    std::fs::create_dir_all(&copies)?;
    let mut file = format!(
        "[host]\nlease_store = \"memory\"\ncompile_cache = {:?}\n",
        dir.join("cache")
    );
    for tenant in 0..count {
        let component = if distinct {
            let copy = copies.join(format!("book-{tenant}.wasm"));
            std::fs::write(&copy, with_section(&bytes, tenant as u32))?;
            copy
        } else {
            book.clone()
        };
        write!(
            file,
            "\n[[tenants]]\nname = \"tenant-{tenant}\"\ncomponents = [{component:?}]\n\
             subscribe = [\"ledger\"]\n"
        )?;
    }
    Ok(file)
}

/// `component` with a custom section `bench` holding `n` appended: the same component, other
/// bytes. (A component's custom section is section id 0, as a core module's.)
fn with_section(component: &[u8], n: u32) -> Vec<u8> {
    let name = b"bench";
    let payload = n.to_le_bytes();
    let size = 1 + name.len() + payload.len();
    let mut out = component.to_vec();
    out.extend_from_slice(&[0, size as u8, name.len() as u8]);
    out.extend_from_slice(name);
    out.extend_from_slice(&payload);
    out
}

/// Field `field` of `/proc/<pid>/smaps_rollup`, in KiB.
fn rollup_kib(pid: u32, field: &str) -> anyhow::Result<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))?;
    rollup
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no {field} in smaps_rollup"))
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    status_kib(&pid.to_string(), "VmRSS")
}

/// User + system CPU of `pid`, in clock ticks (fields 14 and 15 of `/proc/<pid>/stat`).
fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; the fields after it are plain.
    let after_name = stat.rsplit_once(')').context("malformed stat")?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field =
        |n: usize| -> anyhow::Result<u64> { Ok(fields.get(n - 3).context("short stat")?.parse()?) };
    Ok(field(14)? + field(15)?)
}

fn clock_ticks_per_second() -> anyhow::Result<u64> {
    let out = Command::new("getconf").arg("CLK_TCK").output()?;
    Ok(String::from_utf8(out.stdout)?.trim().parse()?)
}
