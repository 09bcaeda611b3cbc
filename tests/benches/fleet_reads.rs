//! A fleet's reads of one stream: three hosts on one lease namespace, six tenants (two with
//! an identity of their own), one 4-shard stream at a steady put rate. Measured with the
//! fleet's share of each shard ([`FleetReads`] through `ruststream.reads`) and, as the
//! baseline in the same run, without it (each host paced on its own, as before issue 33).
//!
//! `cargo bench -p ruststream-tests --bench fleet_reads`. Each run gets a fresh kinesis-local
//! (a 4-shard `ledger`) and dynalite; the three hosts run in this process. Two placements:
//! every host runs all six tenants (the `ledger-audit` component, one app each) on lease
//! tables shared by the three, so balancing spreads the 24 leases over the hosts; or each host
//! runs two tenants of its own, so every shard is read by all three hosts. Tenants
//! `t4` and `t5` call Kinesis with clients of their own credentials (`Host::with_kinesis`),
//! as a tenant with a `role_arn` does. Once every lease is read, [`RATE`] records a second
//! are put for [`WINDOW`]; then the run waits (at most [`DRAIN`]) for every tenant to handle
//! every record.
//!
//! - **GetRecords per shard per second, fleet-wide**: every [`SAMPLE`] during the window,
//!   the sum over the hosts of each host's calls on the shard in the last 10 s (its pacing's
//!   count: one turn is one call), divided by 10; the busiest shard's busiest sample and the
//!   mean over shards and samples are shown. Kinesis serves 5.0.
//! - **put → handled**: the handled time minus the record's arrival at the stream, over every
//!   tenant's deliveries; a record not handled counts as slower than any.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_kinesis::config::Credentials;
use ruststream_kinesis::runner::{FleetReads, READS_TABLE, RunningApp, ShardState};
use ruststream_kinesis::{Deployment, DynamoLeaseStore, Host, HostConfig, LeaseStore};
use ruststream_runtime::{LoadedComponent, Runtime, RuntimeConfig, Tenant, log::LogSink};
use ruststream_tests::bench::HandledLatencies;
use ruststream_tests::e2e::put_json_batch;
use ruststream_tests::guests;
use ruststream_tests::servers::{LocalDynamo, LocalKinesis};
use serde_json::json;

const HOSTS: [&str; 3] = ["host-a", "host-b", "host-c"];
const TENANTS: [&str; 6] = ["t0", "t1", "t2", "t3", "t4", "t5"];
/// Tenants calling Kinesis with credentials of their own.
const OWN_IDENTITY: [&str; 2] = ["t4", "t5"];
const SHARDS: i32 = 4;
/// Records put a second (in batches of ten).
const RATE: u32 = 40;
const WINDOW: Duration = Duration::from_secs(40);
const SAMPLE: Duration = Duration::from_secs(10);
const DRAIN: Duration = Duration::from_secs(60);
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// Where the tenants run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Every host runs every tenant (one tenants file for the fleet): the 24 leases are
    /// balanced over the three hosts.
    Everywhere,
    /// Each host runs two tenants of its own (`t0`, `t1` on the first, ...): every shard is
    /// read by all three hosts, as when a fleet's hosts have different tenants files or
    /// balancing cannot keep a shard's leases together.
    Pinned,
}

impl Placement {
    fn runs(self, host: usize, tenant: usize) -> bool {
        match self {
            Self::Everywhere => true,
            Self::Pinned => tenant / 2 == host,
        }
    }
}

struct Figures {
    /// Per sample, per shard: the fleet's GetRecords a second on it, and the hosts reading it.
    rates: Vec<BTreeMap<String, (f64, usize)>>,
    latencies: Vec<u64>,
    expected: usize,
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(async {
            let runtime = Runtime::new(RuntimeConfig::in_process())?;
            let mut runs = Vec::new();
            for placement in [Placement::Everywhere, Placement::Pinned] {
                for fleet_share in [false, true] {
                    eprintln!("{placement:?}, fleet share: {fleet_share}");
                    let figures = scenario(&runtime, placement, fleet_share).await?;
                    runs.push((placement, fleet_share, figures));
                }
            }
            report(&runs);
            Ok(())
        })
}

/// One host of the bench's fleet, its apps, and its part in the fleet's reads.
struct BenchHost {
    host: Host,
    apps: Vec<RunningApp>,
    reads: Option<FleetReads>,
}

async fn scenario(
    runtime: &Runtime,
    placement: Placement,
    fleet_share: bool,
) -> anyhow::Result<Figures> {
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream("ledger", SHARDS).await?;
    let dynamo = LocalDynamo::start().await?;
    let dynamo_client = dynamo.client().await;
    let client = kinesis.client().await;
    let latencies = HandledLatencies::new();
    let log = LogSink::new();
    let path = guests::LEDGER_AUDIT.path();

    let mut stores: BTreeMap<&str, Arc<dyn LeaseStore>> = BTreeMap::new();
    for tenant in TENANTS {
        let store = DynamoLeaseStore::new(dynamo_client.clone(), format!("bench-{tenant}"));
        store.create_table_if_missing().await?;
        stores.insert(tenant, Arc::new(store));
    }
    let reads_store = DynamoLeaseStore::new(dynamo_client.clone(), READS_TABLE);
    reads_store.create_table_if_missing().await?;
    let reads_store: Arc<dyn LeaseStore> = Arc::new(reads_store);

    let mut fleet = Vec::new();
    for (host_index, owner) in HOSTS.into_iter().enumerate() {
        let config = HostConfig {
            owner_id: owner.into(),
            lease_ttl: Duration::from_secs(6),
            renew_interval: Duration::from_secs(2),
            shard_sync_interval: Duration::from_secs(2),
            ..HostConfig::default()
        };
        let host = Host::new(client.clone(), config).with_observer(latencies.observer());
        let reads = fleet_share.then(|| {
            FleetReads::spawn(
                reads_store.clone(),
                host.read_pacing().clone(),
                host.config(),
            )
        });
        let mut apps = Vec::new();
        for (tenant_index, tenant_name) in TENANTS.into_iter().enumerate() {
            if !placement.runs(host_index, tenant_index) {
                continue;
            }
            let tenant = Arc::new(Tenant::trusted(tenant_name));
            let component =
                LoadedComponent::from_file(runtime, &path, tenant.policy(), &log).await?;
            let deployment =
                Deployment::new(component, stores[tenant_name].clone()).for_tenant(tenant);
            let identity = if OWN_IDENTITY.contains(&tenant_name) {
                host.with_kinesis(client_as(&client, tenant_name))
            } else {
                host.clone()
            };
            apps.push(identity.start(deployment)?);
        }
        fleet.push(BenchHost { host, apps, reads });
    }

    // Every tenant's four shards read somewhere, then a few rounds for shares to settle.
    let started = Instant::now();
    loop {
        let reading: usize = fleet
            .iter()
            .flat_map(|h| &h.apps)
            .flat_map(|app| app.status())
            .map(|s| s.count(&ShardState::Reading))
            .sum();
        if reading >= TENANTS.len() * SHARDS as usize {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < START_TIMEOUT,
            "only {reading} leases were read"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;

    let window = Instant::now();
    let mut put = 0usize;
    let mut rates = Vec::new();
    let mut next_sample = window + SAMPLE;
    let mut tick = tokio::time::interval(Duration::from_secs(10) / RATE);
    while window.elapsed() < WINDOW {
        tick.tick().await;
        let batch: Vec<_> = (put..put + 10)
            .map(|id| json!({"id": id, "amount": 1}))
            .collect();
        put_json_batch(&client, "ledger", &batch).await?;
        put += batch.len();
        if Instant::now() >= next_sample {
            rates.push(fleet_rates(&fleet));
            next_sample += SAMPLE;
        }
    }
    let expected = put * TENANTS.len();
    let drained = Instant::now();
    while latencies.handled() < expected && drained.elapsed() < DRAIN {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for bench_host in fleet {
        for app in &bench_host.apps {
            app.abort();
        }
        if let Some(reads) = bench_host.reads {
            reads.stop().await;
        }
    }
    Ok(Figures {
        rates,
        latencies: latencies.take_sorted(),
        expected,
    })
}

/// `client` signing with credentials of `tenant`'s own: another identity to the host (a
/// tenant's assumed role; kinesis-local checks no signature).
fn client_as(client: &aws_sdk_kinesis::Client, tenant: &str) -> aws_sdk_kinesis::Client {
    let credentials = Credentials::new(format!("AKID{tenant}"), "secret", None, None, "bench");
    let config = client
        .config()
        .to_builder()
        .credentials_provider(credentials)
        .build();
    aws_sdk_kinesis::Client::from_conf(config)
}

/// Per shard, the fleet's GetRecords a second over the last 10 s, and how many hosts read it.
fn fleet_rates(fleet: &[BenchHost]) -> BTreeMap<String, (f64, usize)> {
    let mut rates = BTreeMap::new();
    for bench_host in fleet {
        let shards = bench_host
            .host
            .read_pacing()
            .read_within(Duration::from_secs(10));
        for (stream, shard) in shards {
            if let Some(reads) = bench_host.host.read_pacing().reads(&stream, &shard) {
                let rate = reads.get_records_per_second;
                let (sum, hosts) = rates.entry(shard).or_insert((0.0, 0));
                *sum += rate;
                *hosts += usize::from(rate > 0.0);
            }
        }
    }
    rates
}

fn report(runs: &[(Placement, bool, Figures)]) {
    println!(
        "\nfleet reads: {} hosts, {} tenants ({} with identities of their own), one {SHARDS}-shard \
         stream of kinesis-local, {RATE} records/s for {WINDOW:?}\n",
        HOSTS.len(),
        TENANTS.len(),
        OWN_IDENTITY.len()
    );
    println!(
        "{:>10} {:>17} {:>11} {:>15} {:>12} {:>8} {:>8} {:>9}",
        "tenants", "", "hosts/shard", "busiest shard/s", "mean shard/s", "p50", "p99", "unhandled"
    );
    let mut busiest_of = BTreeMap::new();
    for (placement, fleet_share, figures) in runs {
        let all: Vec<(f64, usize)> = figures
            .rates
            .iter()
            .flat_map(|r| r.values())
            .copied()
            .collect();
        let samples = all.len().max(1) as f64;
        let busiest = all.iter().map(|(rate, _)| *rate).fold(0.0, f64::max);
        let mean = all.iter().map(|(rate, _)| rate).sum::<f64>() / samples;
        let hosts = all.iter().map(|(_, hosts)| *hosts as f64).sum::<f64>() / samples;
        let at = |quantile: f64| {
            let rank = ((figures.expected as f64) * quantile).ceil() as usize;
            figures
                .latencies
                .get(rank.saturating_sub(1))
                .map_or_else(|| format!(">{DRAIN:?}"), |ms| format!("{ms} ms"))
        };
        let share = if *fleet_share {
            "with fleet share"
        } else {
            "each host alone"
        };
        let placed = format!("{placement:?}").to_lowercase();
        busiest_of.insert((placed.clone(), *fleet_share), busiest);
        println!(
            "{placed:>10} {share:>17} {hosts:>11.1} {busiest:>15.1} {mean:>12.1} {:>8} {:>8} {:>9}",
            at(0.5),
            at(0.99),
            figures.expected.saturating_sub(figures.latencies.len())
        );
    }
    println!();
    for placed in ["everywhere", "pinned"] {
        let of = |share: bool| busiest_of.get(&(placed.to_owned(), share)).copied();
        if let (Some(with), Some(without)) = (of(true), of(false)) {
            println!(
                "{placed}: busiest shard, with the fleet share / without: {:.2}",
                with / without.max(f64::MIN_POSITIVE)
            );
        }
    }
}
