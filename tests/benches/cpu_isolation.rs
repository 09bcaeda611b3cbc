//! CPU isolation, measured through the binary: a neighbour tenant's put → handled latency
//! (p50, p99) alone, beside 1 and 4 tenants spinning to their deadline, and beside its own
//! shadow spinning or flooding publishes; the CPU each tenant got; how late lease renewals
//! started and how long the admin API took to answer meanwhile; and two spinning tenants, one
//! reading 1 shard and one 8, side by side.
//!
//! `cargo build --release -p ruststream-cli && cargo bench -p ruststream-tests --bench
//! cpu_isolation`. Each scenario is a fresh host (two compute threads) on local Kinesis; the
//! neighbour (`burner`) gets a record of 20 ms of CPU every 100 ms, sized by the CPU the host
//! counts for a probe; spinners are `hostile-spin` tenants (each on the 8 shards of
//! `hostile`, 2 s deadline). Ratios are against the alone scenario of the same run.

use std::time::{Duration, Instant};

use ruststream_tests::e2e::put_json_batch;
use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::guests;
use ruststream_tests::http::request;
use ruststream_tests::neighbour::{
    cpu_seconds, deploy_shadow, neighbour, percentile, rounds_for, spinner, steady,
};
use ruststream_tests::scrape::Scrape;
use serde_json::json;

/// Neighbour records per scenario.
const RECORDS: u64 = 60;
const EVERY: Duration = Duration::from_millis(100);
const NEIGHBOUR_CPU: Duration = Duration::from_millis(20);

/// What burns beside the neighbour.
#[derive(Clone, Copy)]
enum Beside {
    Nothing,
    Spinners(usize),
    Shadow(ruststream_tests::Guest),
}

/// One scenario's figures.
struct Figures {
    name: String,
    p50: u64,
    p99: u64,
    neighbour_cpu: f64,
    others_cpu: f64,
    renewal_late_ms: f64,
    admin_p99_ms: f64,
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let scenarios = [
        ("alone", Beside::Nothing),
        ("1 spinning tenant", Beside::Spinners(1)),
        ("4 spinning tenants", Beside::Spinners(4)),
        ("its shadow spinning", Beside::Shadow(guests::BURNER_SPIN)),
        (
            "its shadow flooding publishes",
            Beside::Shadow(guests::BURNER_FLOOD),
        ),
    ];
    let mut figures = Vec::new();
    for (name, beside) in scenarios {
        let measured = scenario(name, beside).await?;
        eprintln!("{name}: p50 {} ms, p99 {} ms", measured.p50, measured.p99);
        figures.push(measured);
    }
    let alone = figures[0].p99.max(1) as f64;
    println!(
        "| beside the neighbour | p50 (ms) | p99 (ms) | p99 / alone | neighbour CPU (s) | others' CPU (s) | latest renewal (ms, bucket) | admin p99 (ms) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for f in &figures {
        println!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.2} | ≤ {:.0} | {:.1} |",
            f.name,
            f.p50,
            f.p99,
            f.p99 as f64 / alone,
            f.neighbour_cpu,
            f.others_cpu,
            f.renewal_late_ms,
            f.admin_p99_ms
        );
    }
    let (one, eight) = shares().await?;
    println!(
        "\ntwo spinning tenants for 20 s, one on 1 shard and one on 8: CPU {one:.2} s and \
         {eight:.2} s ({:.2}x)",
        eight / one.max(f64::MIN_POSITIVE)
    );
    Ok(())
}

async fn start(
    name: &str,
    work_shards: i32,
    tenants: &str,
) -> anyhow::Result<(Fixture, BinaryHost)> {
    let fixture = Fixture::builder(name)
        .stream("work", work_shards)
        .stream("work.dead", 1)
        .stream("work.out", 1)
        .stream("hostile", 8)
        .start()
        .await?;
    let file = fixture.tenants(tenants)?;
    let host = fixture
        .host(&file)
        .args(&["--compute-threads", "2"])
        .start()?;
    Ok((fixture, host))
}

async fn scenario(name: &str, beside: Beside) -> anyhow::Result<Figures> {
    let spinners = match beside {
        Beside::Spinners(n) => n,
        _ => 0,
    };
    let mut file = neighbour(2_000);
    for n in 0..spinners {
        file.push_str(&spinner(&format!("spinner{n}"), 2_000));
    }
    let (fixture, host) = start("bench-cpu", 2, &file).await?;
    host.wait_for_log("reading shard", 2 + 8 * spinners).await?;
    let rounds = rounds_for(&fixture, &host, NEIGHBOUR_CPU, 0).await?;
    match beside {
        Beside::Nothing => {}
        Beside::Spinners(_) => {
            let spins: Vec<_> = (0..400).map(|id| json!({"id": id})).collect();
            put_json_batch(fixture.client(), "hostile", &spins).await?;
            host.wait_for_log("spinning forever", 2 * spinners).await?;
        }
        Beside::Shadow(guest) => deploy_shadow(&host, guest).await?,
    }
    let before = host.scrape().await?;
    let sampler = admin_sampler(&host).await?;
    let latencies = steady(&fixture, &host, 1..RECORDS + 1, rounds, EVERY).await?;
    let admin = sampler.finish().await?;
    let after = host.scrape().await?;
    let used = |tenant: &str, role: &str| {
        cpu_seconds(&after, tenant, role) - cpu_seconds(&before, tenant, role)
    };
    let others: f64 = (0..spinners)
        .map(|n| used(&format!("spinner{n}"), "live"))
        .sum::<f64>()
        + used("neighbour", "shadow");
    let figures = Figures {
        name: name.to_owned(),
        p50: percentile(&latencies, 50),
        p99: percentile(&latencies, 99),
        neighbour_cpu: used("neighbour", "live"),
        others_cpu: others,
        renewal_late_ms: latest_renewal(&after) * 1000.0,
        admin_p99_ms: percentile(&admin, 99) as f64 / 1000.0,
    };
    host.stop().await?;
    Ok(figures)
}

/// The smallest bucket bound every renewal started within (s).
fn latest_renewal(scrape: &Scrape) -> f64 {
    const NAME: &str = "ruststream_lease_renewal_lateness_seconds";
    let total = scrape.sum(&format!("{NAME}_count"), &[]);
    let mut bounds: Vec<(f64, f64)> = scrape
        .matching(&format!("{NAME}_bucket"), &[])
        .filter_map(|s| Some((s.labels.get("le")?.parse::<f64>().ok()?, s.value)))
        .collect();
    bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    bounds
        .into_iter()
        .find(|(_, count)| *count >= total)
        .map_or(f64::INFINITY, |(le, _)| le)
}

/// Asks the admin API for the status every 200 ms until finished; the answer times in µs.
struct Sampler {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<Vec<u64>>>,
}

async fn admin_sampler(host: &BinaryHost) -> anyhow::Result<Sampler> {
    let addr = host.admin_addr().await?;
    let token = std::fs::read_to_string(host.state_dir().join("admin-token"))?;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let task = tokio::task::spawn_blocking(move || {
        let mut times = Vec::new();
        let bearer = format!("Bearer {}", token.trim());
        while !*stopped.borrow_and_update() {
            let asked = Instant::now();
            let (status, body) = request(
                &addr,
                "GET",
                "/v1/status",
                &[("Authorization", &bearer)],
                b"",
            )?;
            anyhow::ensure!(status == 200, "status answered {status}: {body}");
            times.push(asked.elapsed().as_micros() as u64);
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(times)
    });
    Ok(Sampler { stop, task })
}

impl Sampler {
    async fn finish(self) -> anyhow::Result<Vec<u64>> {
        self.stop.send_replace(true);
        self.task.await?
    }
}

/// Two tenants spinning for 20 s, one on a stream of 1 shard (`burner-spin` on `work`) and one
/// on 8 (`hostile-spin` on `hostile`): the CPU each got.
async fn shares() -> anyhow::Result<(f64, f64)> {
    let file = format!(
        r#"
        [[tenants]]
        name = "one"
        components = ["{one}"]
        subscribe = ["work"]
        publish = ["work", "work.dead", "work.out"]
        quarantine_after = 1000000
        limits = {{ call_deadline = "2s" }}
        {eight}"#,
        one = guests::BURNER_SPIN.path().display(),
        eight = spinner("eight", 2_000),
    );
    let (fixture, host) = start("bench-cpu-shares", 1, &file).await?;
    host.wait_for_log("reading shard", 9).await?;
    let spins: Vec<_> = (0..400).map(|id| json!({"id": id})).collect();
    put_json_batch(fixture.client(), "hostile", &spins).await?;
    put_json_batch(fixture.client(), "work", &spins).await?;
    host.wait_for_log("spinning forever", 8).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = host.scrape().await?;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let after = host.scrape().await?;
    let used =
        |tenant: &str| cpu_seconds(&after, tenant, "live") - cpu_seconds(&before, tenant, "live");
    let figures = (used("one"), used("eight"));
    host.stop().await?;
    Ok(figures)
}
