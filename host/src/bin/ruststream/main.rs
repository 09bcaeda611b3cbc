//! `ruststream`: runs handler components against Kinesis.
//!
//! ```text
//! ruststream check settlement.wasm
//! ruststream run settlement.wasm --lease-store dynamodb --create-lease-table
//! ```
//!
//! `run` stops gracefully on SIGINT/SIGTERM: it stops fetching, lets in-flight calls finish,
//! flushes checkpoints and releases leases.

mod args;
mod config;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser as _;
use ruststream_host::component::{LoadedComponent, Runtime, RuntimeConfig, describe_app};
use ruststream_host::lease::{DynamoLeaseStore, LeaseStore, MemoryLeaseStore};
use ruststream_host::runner::{Deployment, Host, RunningApp};
use ruststream_host::tenant::Tenant;

use args::{Cli, Command, LeaseStoreKind, RunArgs};
use config::Config;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    match Cli::parse().command {
        Command::Check { components } => check(&components).await,
        Command::Run(args) => run(args).await,
    }
}

async fn check(components: &[std::path::PathBuf]) -> anyhow::Result<()> {
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let mut failed = 0;
    for path in components {
        match LoadedComponent::from_file(&runtime, path).await {
            Ok(component) => {
                println!(
                    "ok    {}: {}",
                    path.display(),
                    describe_app(component.app())
                );
                for s in &component.app().subscriptions {
                    println!(
                        "      {} on `{}` (max_attempts {:?}, dead letter {:?}, start {:?})",
                        s.name, s.stream, s.retry.max_attempts, s.retry.dead_letter, s.start
                    );
                }
            }
            Err(error) => {
                failed += 1;
                println!("error {error}");
            }
        }
    }
    anyhow::ensure!(
        failed == 0,
        "{failed} of {} components refused",
        components.len()
    );
    Ok(())
}

/// What `run` starts: each tenant with its component files.
struct Plan {
    tenants: Vec<(Arc<Tenant>, Vec<PathBuf>)>,
    lease_store: LeaseStoreKind,
    lease_table: String,
    create_lease_table: bool,
}

impl Plan {
    fn new(args: &RunArgs) -> anyhow::Result<Self> {
        let config = args.config.as_deref().map(Config::load).transpose()?;
        let host = config.as_ref().map(|c| &c.host);
        let tenants = match &config {
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
        Ok(Self {
            tenants,
            lease_store: args
                .lease_store
                .or(host.and_then(|h| h.lease_store))
                .unwrap_or(LeaseStoreKind::Memory),
            lease_table: args
                .lease_table
                .clone()
                .or(host.and_then(|h| h.lease_table.clone()))
                .unwrap_or_else(|| "ruststream-{tenant}-{app}".to_owned()),
            create_lease_table: args.create_lease_table
                || host.and_then(|h| h.create_lease_table).unwrap_or(false),
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
                let table = self
                    .lease_table
                    .replace("{tenant}", tenant)
                    .replace("{app}", app);
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

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let plan = Plan::new(&args)?;
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let kinesis = aws_sdk_kinesis::Client::new(&args.aws.kinesis_config().await);
    let dynamo = aws_sdk_dynamodb::Client::new(&args.aws.dynamodb_config().await);
    let host = Host::new(kinesis, args.host_config());
    let mut apps = Vec::new();
    for (tenant, components) in &plan.tenants {
        for path in components {
            // A refused component is reported; the others run.
            match start(&host, &runtime, &plan, &dynamo, tenant, path).await {
                Ok(app) => apps.push(app),
                Err(error) => {
                    tracing::error!(tenant = %tenant.name(), component = %path.display(), "{error:#}")
                }
            }
        }
    }
    anyhow::ensure!(!apps.is_empty(), "no component could be started");
    serve(&plan).await?;
    tracing::info!("shutting down: finishing calls, flushing checkpoints, releasing leases");
    for app in apps {
        stop(app).await;
    }
    Ok(())
}

async fn start(
    host: &Host,
    runtime: &Runtime,
    plan: &Plan,
    dynamo: &aws_sdk_dynamodb::Client,
    tenant: &Arc<Tenant>,
    path: &std::path::Path,
) -> anyhow::Result<RunningApp> {
    let component = LoadedComponent::from_file(runtime, path).await?;
    let store = plan
        .lease_store(dynamo, tenant.name(), &component.app().name)
        .await?;
    tracing::info!(tenant = %tenant.name(), component = %path.display(),
        app = %describe_app(component.app()), lease_store = %store.describe(), "starting");
    let deployment = Deployment::new(component, store).for_tenant(tenant.clone());
    Ok(host.start(deployment)?)
}

/// Runs until SIGINT/SIGTERM. SIGUSR1 resumes every quarantined tenant.
async fn serve(plan: &Plan) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate =
        signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut resume =
        signal(SignalKind::user_defined1()).context("installing the SIGUSR1 handler")?;
    loop {
        tokio::select! {
            interrupted = tokio::signal::ctrl_c() => return interrupted.context("waiting for SIGINT"),
            _ = terminate.recv() => return Ok(()),
            _ = resume.recv() => {
                for (tenant, _) in plan.tenants.iter().filter(|(t, _)| t.is_quarantined()) {
                    tenant.resume();
                }
            }
        }
    }
}

async fn stop(app: RunningApp) {
    let name = app.name().to_owned();
    app.shutdown().await;
    tracing::info!(app = %name, "stopped");
}
