//! Running the host against the local servers: hosts with short timings, recorded deliveries,
//! and producers that write straight to Kinesis.

use crate::Guest;
use crate::wait::eventually;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{Context as _, Result};
use aws_sdk_kinesis::primitives::Blob;
use ruststream_common::sync::lock;
use ruststream_kinesis::{
    Deployment, DynamoLeaseStore, Host, HostConfig, LeaseStore, MemoryLeaseStore, RunningApp,
    kinesis::{ReadMode, ReaderConfig},
    runner::ShardState,
};
use ruststream_runtime::{
    LoadedComponent, Runtime, RuntimeConfig, Tenant,
    component::compile::{CompileConfig, CompileLimits, Compiler},
    log::LogSink,
    pipeline::{DeliveryReport, Observer},
    rollout::RolloutPolicy,
};

/// The engine settings of the binary: components compiled by the `ruststream` binary's bounded
/// worker, cached under the target dir (so each test run compiles each component once).
pub fn sandboxed_runtime() -> RuntimeConfig {
    RuntimeConfig {
        compile: CompileConfig {
            compiler: Compiler::Worker {
                program: crate::binary(),
            },
            cache: Some(crate::compile_cache_dir()),
            // The worker runs niced: on a loaded machine its wall time stretches while its CPU
            // budget (what stops a bomb) does not, so the wall-clock bound is generous here.
            limits: CompileLimits {
                timeout: Duration::from_secs(120),
                ..CompileLimits::default()
            },
        },
        ..RuntimeConfig::default()
    }
}

/// Host timings short enough for tests, still inside Kinesis's limits.
pub fn quick_config(owner: &str) -> HostConfig {
    HostConfig {
        owner_id: owner.to_owned(),
        reader: ReaderConfig {
            poll_interval: Duration::from_millis(200),
            ..ReaderConfig::default()
        },
        lease_ttl: Duration::from_secs(3),
        renew_interval: Duration::from_millis(500),
        shard_sync_interval: Duration::from_millis(500),
        checkpoint_interval: Duration::from_millis(200),
        shutdown_grace: Duration::from_secs(10),
        rollout: RolloutPolicy::default(),
        publish_timeout: HostConfig::default().publish_timeout,
    }
}

/// Every settled delivery a host reports, in order.
#[derive(Clone, Default)]
pub struct Deliveries(Arc<Mutex<Vec<DeliveryReport>>>);

impl Deliveries {
    /// An observer that records every report here; give it to a host.
    pub fn observer(&self) -> Observer {
        let reports = self.0.clone();
        Arc::new(move |report: &DeliveryReport| {
            lock(&reports).push(report.clone());
        })
    }

    /// Every report so far, in order.
    pub fn all(&self) -> Vec<DeliveryReport> {
        self.lock().clone()
    }

    /// How many deliveries were reported.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Waits until at least `count` deliveries were reported.
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Result<Vec<DeliveryReport>> {
        let waited = eventually(timeout, || self.len() >= count).await;
        let all = self.all();
        anyhow::ensure!(
            waited,
            "waited {timeout:?} for {count} deliveries, saw {}: {all:#?}",
            all.len()
        );
        Ok(all)
    }

    /// Waits until every record of `sequences` was reported (each a marker put after the
    /// records a test watches: a shard is read in order, so once its marker is handled, a
    /// redelivery or a late delivery of what came before it would have been reported).
    /// Returns every report so far.
    pub async fn wait_for_sequences(
        &self,
        sequences: &[String],
        timeout: Duration,
    ) -> Result<Vec<DeliveryReport>> {
        wait_for_sequences_across(&[self], sequences, timeout).await?;
        Ok(self.all())
    }

    fn lock(&self) -> MutexGuard<'_, Vec<DeliveryReport>> {
        lock(&self.0)
    }
}

/// [`Deliveries::wait_for_sequences`] for hosts that share a stream's shards: every record of
/// `sequences` reported by one of `hosts`.
pub async fn wait_for_sequences_across(
    hosts: &[&Deliveries],
    sequences: &[String],
    timeout: Duration,
) -> Result<()> {
    let seen = || {
        let all: Vec<DeliveryReport> = hosts.iter().flat_map(|h| h.all()).collect();
        sequences
            .iter()
            .all(|s| all.iter().any(|r| &r.sequence_number == s))
    };
    let waited = eventually(timeout, seen).await;
    anyhow::ensure!(
        waited,
        "waited {timeout:?} for {sequences:?}; the hosts saw {:?}",
        hosts.iter().map(|h| h.len()).collect::<Vec<_>>()
    );
    Ok(())
}

/// A host on `kinesis` with quick timings, its deliveries and log captured.
pub struct TestHost {
    /// The host.
    pub host: Host,
    /// Every delivery it settled.
    pub deliveries: Deliveries,
    /// What it and its components logged.
    pub log: LogSink,
    /// The wasm runtime it loads components with (compile worker, shared cache).
    pub runtime: Runtime,
    /// How every subscription it starts reads its shards, unless a deployment's settings say.
    pub read: ReadMode,
}

impl TestHost {
    /// A host called `owner` with [`quick_config`] timings.
    pub fn new(kinesis: aws_sdk_kinesis::Client, owner: &str) -> Result<Self> {
        Self::with_config(kinesis, quick_config(owner))
    }

    /// A host with `config`.
    pub fn with_config(kinesis: aws_sdk_kinesis::Client, config: HostConfig) -> Result<Self> {
        let deliveries = Deliveries::default();
        let log = LogSink::capturing();
        let host = Host::new(kinesis, config)
            .with_log(log.clone())
            .with_observer(deliveries.observer());
        Ok(Self {
            host,
            deliveries,
            log,
            runtime: Runtime::new(sandboxed_runtime())?,
            read: ReadMode::default(),
        })
    }

    /// The same host, its subscriptions reading by `read` (where a deployment does not say).
    pub fn reading(mut self, read: ReadMode) -> Self {
        self.read = read;
        self
    }

    /// Loads `guest` for a trusted tenant with the default limits.
    pub async fn load(&self, guest: Guest) -> Result<LoadedComponent> {
        self.load_for(guest, &Arc::new(Tenant::trusted("default")))
            .await
    }

    /// Loads `guest` for `tenant`: under its limits, logging to the host's log.
    pub async fn load_for(&self, guest: Guest, tenant: &Arc<Tenant>) -> Result<LoadedComponent> {
        let path = guest.path();
        LoadedComponent::from_file(&self.runtime, &path, tenant.policy(), &self.log)
            .await
            .with_context(|| format!("loading {}", path.display()))
    }

    /// Starts `guest` with `store` and waits until `shards` shards are read.
    pub async fn run(
        &self,
        guest: Guest,
        store: Arc<dyn LeaseStore>,
        shards: usize,
    ) -> Result<RunningApp> {
        let deployment = Deployment::new(self.load(guest).await?, store);
        self.start(deployment, shards).await
    }

    /// [`run`](Self::run) with a fresh in-memory lease store.
    pub async fn run_in_memory(&self, guest: Guest, shards: usize) -> Result<RunningApp> {
        self.run(guest, Arc::new(MemoryLeaseStore::new()), shards)
            .await
    }

    /// Starts `deployment` and waits until `shards` shards are being read.
    pub async fn start(&self, deployment: Deployment, shards: usize) -> Result<RunningApp> {
        let app = self.launch(deployment)?;
        let reading = app
            .wait_for(Duration::from_secs(30), |status| {
                status
                    .iter()
                    .map(|s| s.count(&ShardState::Reading))
                    .sum::<usize>()
                    >= shards
            })
            .await;
        anyhow::ensure!(
            reading,
            "{shards} shards never got to Reading: {:#?}",
            app.status()
        );
        Ok(app)
    }

    /// Starts `deployment`, each subscription reading by [`read`](Self::read) unless the
    /// deployment's settings say how; does not wait.
    ///
    /// # Errors
    /// When the host refuses the deployment.
    pub fn launch(&self, mut deployment: Deployment) -> Result<RunningApp> {
        // Polling is the default: its deployments are started as they are.
        let subscriptions = &deployment.component.app().subscriptions;
        for spec in subscriptions
            .iter()
            .filter(|_| self.read != ReadMode::Polling)
        {
            let settings = deployment.settings.entry(spec.name.clone()).or_default();
            settings.read.get_or_insert(self.read);
        }
        Ok(self.host.start(deployment)?)
    }
}

/// Puts `payload` on the one-shard `stream` with a witness reading beside it: a host of its
/// own (`guest` on in-memory leases, opened at the tip before the put). Returns once the
/// witness has handled the record: by then a reader still polling the stream would have had
/// it too, so a test can assert that a host that should have stopped did not deliver it.
///
/// # Errors
/// The witness does not start, the put fails, or the witness never handles the record.
pub async fn put_witnessed(
    kinesis: &aws_sdk_kinesis::Client,
    guest: Guest,
    stream: &str,
    payload: &serde_json::Value,
) -> Result<String> {
    let witness = TestHost::new(kinesis.clone(), "witness")?;
    let watching = witness.run_in_memory(guest, 1).await?;
    let (_, sequence) = put_json(kinesis, stream, payload, None).await?;
    witness
        .deliveries
        .wait_for_sequences(std::slice::from_ref(&sequence), Duration::from_secs(30))
        .await?;
    watching.shutdown().await;
    Ok(sequence)
}

/// A local Kinesis server with one stream, and a local DynamoDB server with a lease table.
/// Both servers stop when this is dropped.
pub struct Servers {
    /// The Kinesis server.
    pub kinesis: crate::servers::LocalKinesis,
    /// The DynamoDB server.
    pub dynamo: crate::servers::LocalDynamo,
    /// A client of the Kinesis server.
    pub client: aws_sdk_kinesis::Client,
    /// A lease store on the lease table.
    pub store: Arc<DynamoLeaseStore>,
}

impl Servers {
    /// Starts both servers, creates `stream` with `shards` shards and the lease table `table`.
    pub async fn start(stream: &str, shards: i32, table: &str) -> Result<Self> {
        let kinesis = crate::servers::LocalKinesis::start().await?;
        let dynamo = crate::servers::LocalDynamo::start().await?;
        kinesis.create_stream(stream, shards).await?;
        let client = kinesis.client().await;
        let store = dynamo_store(dynamo.client().await, table).await?;
        Ok(Self {
            kinesis,
            dynamo,
            client,
            store,
        })
    }
}

/// A DynamoDB lease store over a fresh table `table`.
pub async fn dynamo_store(
    client: aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<Arc<DynamoLeaseStore>> {
    let store = DynamoLeaseStore::new(client, table);
    store.create_table_if_missing().await?;
    Ok(Arc::new(store))
}

/// The stored checkpoint of `stream:shard`.
pub async fn stored_checkpoint(
    store: &dyn LeaseStore,
    stream: &str,
    shard: &str,
) -> Result<Option<String>> {
    let key = ruststream_kinesis::lease::LeaseKey::new(stream, shard);
    Ok(store.read(&key).await?.and_then(|row| row.checkpoint))
}

/// Takes the lease of `key` for `owner` (30 s), exactly as observed, as another host would:
/// the holder may renew between an observation and the claim (the counter moves and the claim
/// fails, as it must), so it observes again until a claim succeeds, for at most `within`.
///
/// # Errors
/// No claim succeeded within `within`.
pub async fn take_over(
    store: &dyn LeaseStore,
    key: &ruststream_kinesis::lease::LeaseKey,
    owner: &str,
    within: Duration,
) -> Result<ruststream_kinesis::lease::HeldLease> {
    crate::wait::poll_for(within, async || {
        let row = store.read(key).await.ok()??;
        let claim = ruststream_kinesis::lease::Claim::Observed(row.counter);
        store
            .acquire(key, owner, Duration::from_secs(30), claim)
            .await
            .ok()?
    })
    .await
    .with_context(|| format!("no claim of {key:?} by {owner} succeeded within {within:?}"))
}

/// Puts `payload` as JSON on `stream`, on the shard owning `hash_key` when given.
/// Returns (shard id, sequence number).
pub async fn put_json(
    kinesis: &aws_sdk_kinesis::Client,
    stream: &str,
    payload: &serde_json::Value,
    hash_key: Option<&str>,
) -> Result<(String, String)> {
    let out = kinesis
        .put_record()
        .stream_name(stream)
        .partition_key("pk")
        .set_explicit_hash_key(hash_key.map(str::to_owned))
        .data(Blob::new(serde_json::to_vec(payload)?))
        .send()
        .await
        .with_context(|| format!("PutRecord on {stream}"))?;
    Ok((out.shard_id, out.sequence_number))
}

/// Puts every value as JSON on `stream`, with PutRecords (500 at a time), partition keys
/// `pk-0`, `pk-1`, ... so the records spread over the stream's shards.
pub async fn put_json_batch(
    kinesis: &aws_sdk_kinesis::Client,
    stream: &str,
    values: &[serde_json::Value],
) -> Result<()> {
    for (chunk_index, chunk) in values.chunks(500).enumerate() {
        let mut entries = Vec::with_capacity(chunk.len());
        for (index, value) in chunk.iter().enumerate() {
            entries.push(
                aws_sdk_kinesis::types::PutRecordsRequestEntry::builder()
                    .partition_key(format!("pk-{}", chunk_index * 500 + index))
                    .data(Blob::new(serde_json::to_vec(value)?))
                    .build()?,
            );
        }
        let out = kinesis
            .put_records()
            .stream_name(stream)
            .set_records(Some(entries))
            .send()
            .await
            .with_context(|| format!("PutRecords on {stream}"))?;
        anyhow::ensure!(
            out.failed_record_count().unwrap_or(0) == 0,
            "{} records were not put",
            out.failed_record_count().unwrap_or(0)
        );
    }
    Ok(())
}

/// A record as read back from a stream.
#[derive(Debug, Clone)]
pub struct ReadBack {
    /// The shard it was read from.
    pub shard_id: String,
    /// Its sequence number there.
    pub sequence_number: String,
    /// Its partition key.
    pub partition_key: String,
    /// The bytes as stored, envelope included.
    pub data: Vec<u8>,
}

impl ReadBack {
    /// Payload and headers, as the host reads them from the envelope.
    pub fn envelope(&self) -> ruststream_runtime::envelope::Unwrapped {
        ruststream_runtime::envelope::unwrap(&self.data)
    }
}

/// Waits up to `within` until `stream` holds at least `count` records; returns them all, as
/// [`read_all`] does.
///
/// # Errors
/// When it never holds that many.
pub async fn read_at_least(
    kinesis: &aws_sdk_kinesis::Client,
    stream: &str,
    count: usize,
    within: Duration,
) -> Result<Vec<ReadBack>> {
    crate::wait::poll_for(within, async || {
        let records = read_all(kinesis, stream).await.ok()?;
        (records.len() >= count).then_some(records)
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("`{stream}` never held {count} records"))
}

/// Every record of every shard of `stream`, from the horizon, in shard order.
pub async fn read_all(kinesis: &aws_sdk_kinesis::Client, stream: &str) -> Result<Vec<ReadBack>> {
    let mut out = Vec::new();
    let shards = ruststream_kinesis::kinesis::list_shards(kinesis, stream).await?;
    for shard in shards {
        let mut iterator = kinesis
            .get_shard_iterator()
            .stream_name(stream)
            .shard_id(&shard.shard_id)
            .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
            .send()
            .await?
            .shard_iterator;
        while let Some(it) = iterator.take() {
            let page = kinesis.get_records().shard_iterator(it).send().await?;
            let records = page.records();
            out.extend(records.iter().map(|r| ReadBack {
                shard_id: shard.shard_id.clone(),
                sequence_number: r.sequence_number().to_owned(),
                partition_key: r.partition_key().unwrap_or_default().to_owned(),
                data: r.data().as_ref().to_vec(),
            }));
            // An open shard always has a next iterator: stop at the first empty page.
            if !records.is_empty() {
                iterator = page.next_shard_iterator;
            }
        }
    }
    Ok(out)
}

/// Puts raw `data` on `stream` with `partition_key`. Returns (shard id, sequence number).
pub async fn put_raw(
    kinesis: &aws_sdk_kinesis::Client,
    stream: &str,
    partition_key: &str,
    data: Vec<u8>,
) -> Result<(String, String)> {
    let out = kinesis
        .put_record()
        .stream_name(stream)
        .partition_key(partition_key)
        .data(Blob::new(data))
        .send()
        .await
        .with_context(|| format!("PutRecord on {stream}"))?;
    Ok((out.shard_id, out.sequence_number))
}
