//! `ruststream run`: tenants' components against Kinesis until a stop signal.
//!
//! Signal handlers come first, so a stop during start-up is as graceful as any other. Tenants
//! load side by side, each app starting as soon as it is loaded: a tenant whose component is
//! slow to compile or to instantiate delays nobody else. Apps stop side by side too.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use ruststream_host::{
    DEFAULT_TABLE_TEMPLATE, Deployment, DynamoLeaseStore, Host, LeaseStore, MemoryLeaseStore,
    RunningApp, TableTemplate,
};
use ruststream_runtime::{
    CompileLimits, LoadedComponent, LogSink, Runtime, Tenant, describe_app, escape_controls,
    one_line,
};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::args::{LeaseStoreKind, RunArgs};
use crate::config::Config;
use crate::runtime_config;

pub(crate) async fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut signals = Signals::install()?;
    let plan = Arc::new(Plan::new(&args)?);
    let runtime = Runtime::new(runtime_config(
        plan.compile_limits.clone(),
        plan.compile_cache.clone(),
    )?)?;
    let kinesis = aws_sdk_kinesis::Client::new(&args.aws.kinesis_config().await);
    let dynamo = aws_sdk_dynamodb::Client::new(&args.aws.dynamodb_config().await);
    let config = args.host_config();
    anyhow::ensure!(
        config.renew_interval < config.lease_ttl,
        "--renew-interval-ms ({:?}) must be shorter than --lease-ttl-ms ({:?})",
        config.renew_interval,
        config.lease_ttl
    );
    let host = Host::new(kinesis, config);
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let mut loaders = JoinSet::new();
    for (tenant, components) in &plan.tenants {
        let loader = TenantLoader {
            host: host.clone(),
            runtime: runtime.clone(),
            plan: plan.clone(),
            dynamo: dynamo.clone(),
            tenant: tenant.clone(),
            started: started_tx.clone(),
        };
        loaders.spawn(loader.load(components.clone()));
    }
    drop(started_tx);

    let mut apps = Vec::new();
    let mut loading = true;
    loop {
        tokio::select! {
            app = started.recv(), if loading => match app {
                Some(app) => apps.push(app),
                None => {
                    loading = false;
                    anyhow::ensure!(!apps.is_empty(), "no component could be started");
                    tracing::info!(apps = apps.len(), "every tenant is loaded");
                }
            },
            signal = signals.next() => match signal {
                Received::Stop(name) => {
                    tracing::info!(signal = name, "stopping: finishing calls, flushing checkpoints, releasing leases");
                    break;
                }
                Received::Resume => resume(&plan),
            },
        }
    }
    loaders.abort_all();
    while let Ok(app) = started.try_recv() {
        apps.push(app);
    }
    stop_all(apps, &mut signals).await;
    Ok(())
}

/// Stops every app at once; a second SIGINT meanwhile exits without waiting.
async fn stop_all(apps: Vec<RunningApp>, signals: &mut Signals) {
    let mut stopping = JoinSet::new();
    for app in apps {
        stopping.spawn(async move {
            let name = app.name().to_owned();
            app.shutdown().await;
            tracing::info!(app = %name, "stopped");
        });
    }
    tokio::select! {
        () = async { while stopping.join_next().await.is_some() {} } => {}
        () = signals.interrupt() => {
            eprintln!("interrupted again: exiting without flushing checkpoints");
            std::process::exit(130);
        }
    }
}

/// SIGUSR1: every quarantined tenant goes on.
fn resume(plan: &Plan) {
    for (tenant, _) in plan.tenants.iter().filter(|(t, _)| t.is_quarantined()) {
        tenant.resume();
    }
}

/// Loads one tenant's components, one after another, and starts each app once loaded.
struct TenantLoader {
    host: Host,
    runtime: Runtime,
    plan: Arc<Plan>,
    dynamo: aws_sdk_dynamodb::Client,
    tenant: Arc<Tenant>,
    started: mpsc::UnboundedSender<RunningApp>,
}

impl TenantLoader {
    async fn load(self, components: Vec<PathBuf>) {
        for path in components {
            // A refused component is reported; the tenant's others, and other tenants, run.
            match self.start(&path).await {
                Ok(app) => {
                    let _ = self.started.send(app);
                }
                Err(error) => tracing::error!(
                    tenant = %self.tenant.name(),
                    component = %escape_controls(&path.display().to_string()),
                    "{}",
                    one_line(&*error)
                ),
            }
        }
    }

    async fn start(&self, path: &Path) -> anyhow::Result<RunningApp> {
        let log = LogSink::new();
        let component =
            LoadedComponent::from_file(&self.runtime, path, self.tenant.policy(), &log).await?;
        let store = self
            .plan
            .lease_store(&self.dynamo, self.tenant.name(), &component.app().name)
            .await?;
        tracing::info!(tenant = %self.tenant.name(), component = %path.display(),
            app = %describe_app(component.app()), lease_store = %store.describe(), "starting");
        let deployment = Deployment::new(component, store).for_tenant(self.tenant.clone());
        Ok(self.host.start(deployment)?)
    }
}

/// What `run` starts: each tenant with its component files, and where leases live.
struct Plan {
    tenants: Vec<(Arc<Tenant>, Vec<PathBuf>)>,
    lease_store: LeaseStoreKind,
    lease_table: TableTemplate,
    create_lease_table: bool,
    compile_limits: CompileLimits,
    compile_cache: Option<PathBuf>,
}

impl Plan {
    fn new(args: &RunArgs) -> anyhow::Result<Self> {
        let config = args.config.as_deref().map(Config::load).transpose()?;
        let host = config.as_ref().map(|c| &c.host);
        let tenants: Vec<(Arc<Tenant>, Vec<PathBuf>)> = match &config {
            Some(config) => config
                .tenants
                .iter()
                .map(|section| (Arc::new(config.tenant(section)), section.components.clone()))
                .collect(),
            None => vec![(
                Arc::new(Tenant::trusted("default")),
                args.components.clone(),
            )],
        };
        let template = args
            .lease_table
            .clone()
            .or(host.and_then(|h| h.lease_table.clone()))
            .unwrap_or_else(|| DEFAULT_TABLE_TEMPLATE.to_owned());
        let busiest = tenants.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
        let lease_table = TableTemplate::new(&template, tenants.len(), busiest)?;
        Ok(Self {
            lease_store: args
                .lease_store
                .or(host.and_then(|h| h.lease_store))
                .unwrap_or(LeaseStoreKind::Memory),
            lease_table,
            create_lease_table: args.create_lease_table
                || host.and_then(|h| h.create_lease_table).unwrap_or(false),
            compile_limits: host.map(|h| h.compile_limits()).unwrap_or_default(),
            compile_cache: args
                .compile
                .cache_dir(host.and_then(|h| h.compile_cache.as_ref())),
            tenants,
        })
    }

    async fn lease_store(
        &self,
        dynamo: &aws_sdk_dynamodb::Client,
        tenant: &str,
        app: &str,
    ) -> anyhow::Result<Arc<dyn LeaseStore>> {
        Ok(match self.lease_store {
            LeaseStoreKind::Memory => Arc::new(MemoryLeaseStore::new()),
            LeaseStoreKind::Dynamodb => {
                let table = self.lease_table.table(tenant, app);
                let store = DynamoLeaseStore::new(dynamo.clone(), &table);
                if self.create_lease_table {
                    store
                        .create_table_if_missing()
                        .await
                        .with_context(|| format!("creating lease table `{table}`"))?;
                }
                Arc::new(store)
            }
        })
    }
}

/// The signals `run` acts on, installed before anything else starts.
struct Signals {
    terminate: Signal,
    interrupt: Signal,
    resume: Signal,
}

enum Received {
    Stop(&'static str),
    Resume,
}

impl Signals {
    fn install() -> anyhow::Result<Self> {
        let install =
            |kind, name| signal(kind).with_context(|| format!("installing the {name} handler"));
        Ok(Self {
            terminate: install(SignalKind::terminate(), "SIGTERM")?,
            interrupt: install(SignalKind::interrupt(), "SIGINT")?,
            resume: install(SignalKind::user_defined1(), "SIGUSR1")?,
        })
    }

    async fn next(&mut self) -> Received {
        tokio::select! {
            _ = self.terminate.recv() => Received::Stop("SIGTERM"),
            _ = self.interrupt.recv() => Received::Stop("SIGINT"),
            _ = self.resume.recv() => Received::Resume,
        }
    }

    async fn interrupt(&mut self) {
        self.interrupt.recv().await;
    }
}
