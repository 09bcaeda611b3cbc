//! Running components against Kinesis: one coordinator per subscription, one worker per leased
//! shard, each kept leased by its lease keeper (`lease::keeper`).
//!
//! The crate's front page shows a deployment started and shut down.

mod app;
mod balance;
mod coordinator;
mod fleet_reads;
mod handoff;
mod observed;
mod presence;
mod release;
mod seek;
mod settings;
mod shadow;
mod status;
mod worker;

pub use app::{RunningApp, SwapError, Swapped};
pub use fleet_reads::{FleetReads, READS_TABLE};
pub use seek::SeekError;
pub use settings::{OperatorSettings, admit_settings};
pub use shadow::{KEPT_DISAGREEMENTS, ShadowStatus};
pub use status::{
    AppVersions, RolloutStatus, ShardState, ShardStatus, SubscriptionStatus, UnknownShardState,
    VersionInfo,
};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::kinesis::{
    Consumers, KinesisPublisher, ReadPacing, ReaderConfig, ShardListings, SharedReads,
};
use crate::lease::LeaseStore;
use crate::lease::keeper::KeeperTiming;
use ruststream_runtime::{
    Clock, LoadedComponent, SystemClock, Tenant, log::LogSink, pipeline::Observer,
    publish::Publisher, rollout::RolloutPolicy, tenant::TenantError,
};

/// How the host reads, leases and checkpoints. The defaults are the seed's timings.
#[derive(Debug, Clone, PartialEq)]
pub struct HostConfig {
    /// This host's identity in lease rows. A fixed id lets a restarted host take its own
    /// leases back at once; the default is unique per process.
    pub owner_id: String,
    /// How shards are read.
    pub reader: ReaderConfig,
    /// How long a lease lives without renewal.
    pub lease_ttl: Duration,
    /// How often a held lease is renewed; a lease counts as lost after `lease_ttl` minus this
    /// without a renewal, before anyone else may take it.
    pub renew_interval: Duration,
    /// How often shards are re-listed and leases rebalanced.
    pub shard_sync_interval: Duration,
    /// Least time between two checkpoint writes of one shard.
    pub checkpoint_interval: Duration,
    /// How long shutdown waits for in-flight calls and final checkpoint writes: calls still in
    /// flight after half of it are stopped at their next check (their records are left for
    /// the lease's next holder), so the checkpoints are flushed within the rest.
    pub shutdown_grace: Duration,
    /// How a swapped-in version is judged against the one it replaced.
    pub rollout: RolloutPolicy,
    /// Longest one attempt of a PutRecord (a counted copy, a dead letter, a guest's publish)
    /// may take before it is abandoned and retried by the SDK's standard retries. Default 5 s:
    /// its answer is tiny and usually there in tens of milliseconds, and a stalled attempt
    /// blocks the pipeline waiting for its copy.
    pub publish_timeout: Duration,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            owner_id: default_owner_id(),
            reader: ReaderConfig::default(),
            lease_ttl: Duration::from_secs(10),
            renew_interval: Duration::from_secs(3),
            shard_sync_interval: Duration::from_secs(10),
            checkpoint_interval: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(15),
            rollout: RolloutPolicy::default(),
            publish_timeout: Duration::from_secs(5),
        }
    }
}

impl HostConfig {
    /// How a held lease is kept: renewed, checkpointed, counted lost.
    pub(crate) fn keeper_timing(&self) -> KeeperTiming {
        KeeperTiming::new(
            self.lease_ttl,
            self.renew_interval,
            self.checkpoint_interval,
        )
    }

    /// How long calls in flight at shutdown may go on before they are stopped: half the
    /// shutdown grace, so the other half is left for the final checkpoints and releases.
    pub(crate) fn calls_grace(&self) -> Duration {
        self.shutdown_grace / 2
    }
}

fn default_owner_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".to_owned());
    let nonce = SystemClock.now_ms() ^ u64::from(std::process::id()).rotate_left(32);
    format!("rs-{host}-{}-{nonce:x}", std::process::id())
}

/// A component as deployed on a host: whose it is, where its leases live.
pub struct Deployment {
    /// The loaded component.
    pub component: LoadedComponent,
    /// The lease store of this component's namespace: its app, within its tenant. Give each
    /// (tenant, app) its own store (a DynamoDB table each), so no two share checkpoints.
    pub lease_store: Arc<dyn LeaseStore>,
    /// The tenant running it: grants, limits, quarantine.
    pub tenant: Arc<Tenant>,
    /// The operator's settings, by subscriber name; they win over what the component
    /// declares.
    pub settings: HashMap<String, OperatorSettings>,
}

impl Deployment {
    /// `component` with `lease_store`, run by a trusted tenant `default` (every stream
    /// granted, default limits).
    pub fn new(component: LoadedComponent, lease_store: Arc<dyn LeaseStore>) -> Self {
        Self {
            component,
            lease_store,
            tenant: Arc::new(Tenant::trusted("default")),
            settings: HashMap::new(),
        }
    }

    /// Runs it for `tenant` instead.
    pub fn for_tenant(mut self, tenant: Arc<Tenant>) -> Self {
        self.tenant = tenant;
        self
    }
}

/// A RustStream host on one Kinesis endpoint.
#[derive(Clone)]
pub struct Host {
    client: aws_sdk_kinesis::Client,
    /// Shared by every app started on this host with `client`.
    listings: Arc<ShardListings>,
    /// Reads of each shard with `client`: what they share, and their turns (taken from one
    /// pacing for every identity of the host).
    reads: Arc<SharedReads>,
    /// Enhanced fan-out consumers registered with `client`.
    consumers: Arc<Consumers>,
    config: Arc<HostConfig>,
    publisher: Arc<dyn Publisher>,
    clock: Arc<dyn Clock>,
    log: LogSink,
    observer: Option<Observer>,
}

impl Host {
    /// A host reading and writing through `client`, publishing with it too.
    pub fn new(client: aws_sdk_kinesis::Client, config: HostConfig) -> Self {
        Self {
            publisher: publisher(&client, &config),
            listings: listings(&client, &config),
            reads: Arc::new(SharedReads::new(client.clone())),
            consumers: Arc::new(Consumers::new()),
            client,
            config: Arc::new(config),
            clock: Arc::new(SystemClock),
            log: LogSink::new(),
            observer: None,
        }
    }

    /// The same host calling Kinesis through `client` instead, publishing with it too: a
    /// tenant whose calls run with its own credentials (an assumed role). Its reads share
    /// nothing with the other identities' (each is signed with its own rights) but take their
    /// turns on a shard from the same pacing: a shard is read at most five times a second
    /// by the host, whatever the identities.
    pub fn with_kinesis(&self, client: aws_sdk_kinesis::Client) -> Self {
        Self {
            publisher: publisher(&client, &self.config),
            listings: listings(&client, &self.config),
            reads: Arc::new(SharedReads::with_pacing(
                client.clone(),
                self.reads.pacing().clone(),
            )),
            consumers: Arc::new(Consumers::new()),
            client,
            ..self.clone()
        }
    }

    /// Where component and runtime log lines go (default: `tracing` only).
    pub fn with_log(mut self, log: LogSink) -> Self {
        self.log = log;
        self
    }

    /// Called with a report of every settled delivery.
    pub fn with_observer(mut self, observer: Observer) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Reads the time from `clock` instead of the system's: due times, record ages, the
    /// components' clock, the provisional pin of a shard opened at the tip (tests of a host
    /// whose clock is off). Lease expiry never reads it (it is judged on the monotonic clock),
    /// and a shard's first record is pinned by its sequence number.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Replaces the publisher of counted copies and guest publishes (fault injection in tests).
    pub fn with_publisher(mut self, publisher: Arc<dyn Publisher>) -> Self {
        self.publisher = publisher;
        self
    }

    /// The turns of every shard this host reads, for all its identities: what a fleet's
    /// share of a shard's reads ([`FleetReads`]) is applied to.
    pub fn read_pacing(&self) -> &Arc<ReadPacing> {
        self.reads.pacing()
    }

    /// Its configuration.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// Starts every subscription of `deployment`.
    ///
    /// # Errors
    /// When the component subscribes to, or dead-letters into, a stream its tenant is not
    /// granted; nothing of it runs then.
    pub fn start(&self, deployment: Deployment) -> Result<RunningApp, TenantError> {
        RunningApp::start(self, deployment)
    }
}

/// Listings kept for half a shard-sync round: a shard change is seen at most that much later.
fn listings(client: &aws_sdk_kinesis::Client, config: &HostConfig) -> Arc<ShardListings> {
    Arc::new(ShardListings::new(
        client.clone(),
        config.shard_sync_interval / 2,
        config.reader.list_shards_timeout,
    ))
}

fn publisher(client: &aws_sdk_kinesis::Client, config: &HostConfig) -> Arc<dyn Publisher> {
    Arc::new(KinesisPublisher::new(client.clone()).with_attempt_timeout(config.publish_timeout))
}

/// Says, once a second, how many of the tenant's host lines were dropped, so the last second
/// of a flood is reported even when nothing else happens after it; and once more at shutdown.
async fn report_dropped_lines(
    tenant: Arc<Tenant>,
    log: LogSink,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => tenant.policy().report_dropped_lines(&log),
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
    }
    tenant.policy().summarise_dropped_lines(&log);
}
