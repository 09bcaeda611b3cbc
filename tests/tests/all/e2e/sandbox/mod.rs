//! Untrusted tenants: every hostile component runs next to the well-behaved `settlement`
//! tenant in the same host, on a local Kinesis server, with checkpoints in a local DynamoDB.
//! Each test asserts both that the hostile one is contained (the refusal and its one-line
//! error, the cap, the quota) and that settlement's records keep being booked and its stored
//! checkpoint keeps moving meanwhile.
//!
//! One module per class of attack: calls (CPU, memory, stack, traps, grants), load (what runs
//! or compiles before the first record), declarations, output, control headers, writes
//! (delays, copies, quota) and namespaces.

mod calls;
mod declarations;
mod headers;
mod load;
mod namespaces;
mod output;
mod writes;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ruststream_kinesis::{
    Deployment, DynamoLeaseStore, LeaseStore, RunningApp, lease::TableTemplate, runner::ShardState,
};
use ruststream_runtime::{
    LoadedComponent, Tenant, component::LoadError, log::LogLine, pipeline::DeliveryReport,
    policy::StreamGrant, tenant::Limits,
};
use ruststream_tests::e2e::{TestHost, dynamo_store, put_json};
use ruststream_tests::fixture::Fixture;
use ruststream_tests::servers::LocalDynamo;
use ruststream_tests::{Guest, guests};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(40);

/// The streams every arena has.
const STREAMS: [&str; 5] = ["ledger", "hostile", "payments", "secrets", "flood"];

/// A host running `settlement` for tenant `good`, with streams for the hostile tenant.
pub(super) struct Arena {
    fixture: Fixture,
    pub client: aws_sdk_kinesis::Client,
    pub host: TestHost,
    good: RunningApp,
    good_store: Arc<DynamoLeaseStore>,
    /// Ids of the ledger entries put so far.
    ledger_ids: AtomicU64,
}

impl Arena {
    async fn start() -> anyhow::Result<Self> {
        Self::start_with(Limits::default()).await
    }

    /// An arena whose good tenant has `limits`.
    async fn start_with(limits: Limits) -> anyhow::Result<Self> {
        let fixture = STREAMS
            .iter()
            .fold(Fixture::builder("sandbox").dynamo(), |b, s| b.stream(s, 1))
            .start()
            .await?;
        let client = fixture.client().clone();
        let host = TestHost::new(client.clone(), "host-a")?;
        let good = Tenant::new("good")
            .subscribe(StreamGrant::only(["ledger"]))
            .limits(limits);
        let good = Arc::new(good);
        let component = host.load_for(guests::SETTLEMENT, &good).await?;
        let good_store = store(fixture.dynamo(), "good", &component).await?;
        let deployment = Deployment::new(component, good_store.clone()).for_tenant(good);
        let good = host.start(deployment, 1).await?;
        Ok(Self {
            fixture,
            client,
            host,
            good,
            good_store,
            ledger_ids: AtomicU64::new(0),
        })
    }

    /// Loads `guest` for `tenant`, keeping the refusal as it is.
    async fn load(&self, guest: Guest, tenant: &Arc<Tenant>) -> Result<LoadedComponent, LoadError> {
        let path = guest.path();
        LoadedComponent::from_file(&self.host.runtime, path, tenant.policy(), &self.host.log).await
    }

    /// Starts `guest` for `tenant` (checkpoints in DynamoDB), and waits until
    /// it reads its shard.
    async fn run(&self, guest: Guest, tenant: Tenant) -> anyhow::Result<RunningApp> {
        let tenant = Arc::new(tenant);
        let component = self.host.load_for(guest, &tenant).await?;
        let store = store(self.fixture.dynamo(), tenant.name(), &component).await?;
        let deployment = Deployment::new(component, store).for_tenant(tenant);
        let app = self.host.host.start(deployment)?;
        let reading = app
            .wait_for(WAIT, |s| s[0].count(&ShardState::Reading) == 1)
            .await;
        anyhow::ensure!(
            reading,
            "{} never read its shard: {:#?}",
            guest.name(),
            app.status()
        );
        Ok(app)
    }

    /// Publishes `hostile` records to the hostile stream between ledger entries; waits until
    /// settlement booked every entry and the hostile tenant saw `expected` deliveries.
    async fn traffic(&self, hostile: u64, expected: usize) -> anyhow::Result<()> {
        self.put_ledger(1).await?;
        for id in 0..hostile {
            let entry = json!({"id": 100 + id, "amount": 1});
            put_json(&self.client, "hostile", &entry, None).await?;
        }
        self.put_ledger(2).await?;
        let hostile = |r: &DeliveryReport| r.stream == "hostile";
        let waited = ruststream_tests::wait::eventually(WAIT, || {
            self.all_booked()
                && self
                    .host
                    .deliveries
                    .all()
                    .iter()
                    .filter(|r| hostile(r))
                    .count()
                    >= expected
        })
        .await;
        anyhow::ensure!(
            waited,
            "booked {:?} of {}, deliveries {:#?}",
            self.booked(),
            self.ledger_ids.load(Ordering::Relaxed),
            self.host.deliveries.all()
        );
        Ok(())
    }

    /// Puts `count` ledger entries with fresh ids.
    async fn put_ledger(&self, count: u64) -> anyhow::Result<()> {
        for _ in 0..count {
            let id = self.ledger_ids.fetch_add(1, Ordering::Relaxed) + 1;
            let entry = json!({"id": id, "amount": 10 * id});
            put_json(&self.client, "ledger", &entry, None).await?;
        }
        Ok(())
    }

    /// Settlement keeps working: it books fresh entries, and its checkpoint, as stored in
    /// DynamoDB, reaches the last of them.
    async fn assert_settlement_flows(&self) -> anyhow::Result<()> {
        self.put_ledger(3).await?;
        // A record is booked (logged) during the call, and reported once the call returned
        // and it settled: wait for both, or the last report may not be there yet.
        let booked = ruststream_tests::wait::eventually(WAIT, || {
            self.all_booked() && self.ledger_reports() >= self.ledger_ids.load(Ordering::Relaxed)
        })
        .await;
        // What the good tenant's shard and every tenant's CPU show, for a failure to say
        // whether its calls waited for a slot, ran and failed, or never came.
        anyhow::ensure!(
            booked,
            "settlement booked {:?}, reported {} of {}; CPU {:?}; {:#?}",
            self.booked(),
            self.ledger_reports(),
            self.ledger_ids.load(Ordering::Relaxed),
            self.host.runtime.cpu_usage(),
            self.good.status()
        );
        let last = self
            .host
            .deliveries
            .all()
            .into_iter()
            .rfind(|r| r.stream == "ledger")
            .map(|r| r.sequence_number);
        let stored = ruststream_tests::wait::eventually_async(WAIT, async || {
            self.stored_checkpoint().await == last
        })
        .await;
        let shard = self.good.status()[0].shards.values().next().cloned();
        anyhow::ensure!(
            stored,
            "stored checkpoint {:?} never reached {last:?}; CPU {:?}; {shard:#?}",
            self.stored_checkpoint().await,
            self.host.runtime.cpu_usage()
        );
        let shard = shard.expect("the ledger shard");
        assert_eq!(shard.state, ShardState::Reading);
        Ok(())
    }

    async fn stored_checkpoint(&self) -> Option<String> {
        let rows = self.good_store.list().await.ok()?;
        rows.into_iter().find_map(|row| row.checkpoint)
    }

    /// The ids settlement booked.
    fn booked(&self) -> BTreeSet<u64> {
        self.logs()
            .iter()
            .filter(|l| l.message == "booked")
            .filter_map(|l| l.field("entry.id")?.parse().ok())
            .collect()
    }

    /// How many ledger records have settled, as the delivery reports tell.
    fn ledger_reports(&self) -> u64 {
        let reports = self.host.deliveries.all();
        reports.iter().filter(|r| r.stream == "ledger").count() as u64
    }

    /// Whether every ledger entry put so far is booked.
    fn all_booked(&self) -> bool {
        let put = self.ledger_ids.load(Ordering::Relaxed);
        let booked = self.booked();
        (1..=put).all(|id| booked.contains(&id))
    }

    fn logs(&self) -> Vec<LogLine> {
        self.host.log.captured()
    }

    fn hostile_reports(&self) -> Vec<DeliveryReport> {
        self.host
            .deliveries
            .all()
            .into_iter()
            .filter(|r| r.stream == "hostile")
            .collect()
    }

    fn failures(&self) -> Vec<LogLine> {
        self.logs()
            .into_iter()
            .filter(|l| l.message.starts_with("handler call failed"))
            .collect()
    }
}

/// The DynamoDB lease store of `tenant`'s app, named by the default table template.
async fn store(
    dynamo: &LocalDynamo,
    tenant: &str,
    component: &LoadedComponent,
) -> anyhow::Result<Arc<DynamoLeaseStore>> {
    let template = TableTemplate::new(ruststream_kinesis::lease::DEFAULT_TABLE_TEMPLATE, 2, 1)?;
    let table = template.table(tenant, &component.app().name);
    dynamo_store(dynamo.client().await, &table).await
}

/// A hostile tenant: granted only its stream, tight limits, quarantined after 3 failures.
fn evil() -> Tenant {
    Tenant::new("evil")
        .subscribe(StreamGrant::only(["hostile"]))
        .limits(evil_limits())
        .quarantine_after(3)
}

fn evil_limits() -> Limits {
    Limits {
        call_deadline: Duration::from_millis(300),
        memory_bytes: 16 << 20,
        ..Limits::default()
    }
}

/// `line`, as a person would read it, holds no control character.
fn assert_printable(line: &impl std::fmt::Display) {
    let text = line.to_string();
    assert!(!text.chars().any(char::is_control), "{text:?}");
}
