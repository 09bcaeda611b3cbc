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

use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser as _;
use ruststream_host::component::{LoadedComponent, Runtime, RuntimeConfig, describe_app};
use ruststream_host::lease::{DynamoLeaseStore, LeaseStore, MemoryLeaseStore};
use ruststream_host::runner::{Deployment, Host, RunningApp};

use args::{Cli, Command, LeaseStoreKind, RunArgs};

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

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let kinesis = aws_sdk_kinesis::Client::new(&args.aws.kinesis_config().await);
    let dynamo = aws_sdk_dynamodb::Client::new(&args.aws.dynamodb_config().await);
    let host = Host::new(kinesis, args.host_config());
    let mut apps = Vec::new();
    for path in &args.components {
        let component = LoadedComponent::from_file(&runtime, path).await?;
        let store = lease_store(&args, &dynamo, &component.app().name).await?;
        tracing::info!(component = %path.display(), app = %describe_app(component.app()),
            lease_store = %store.describe(), "starting");
        apps.push(host.start(Deployment::new(component, store)));
    }
    shutdown_signal().await?;
    tracing::info!("shutting down: finishing calls, flushing checkpoints, releasing leases");
    for app in apps {
        stop(app).await;
    }
    Ok(())
}

async fn stop(app: RunningApp) {
    let name = app.name().to_owned();
    app.shutdown().await;
    tracing::info!(app = %name, "stopped");
}

async fn lease_store(
    args: &RunArgs,
    dynamo: &aws_sdk_dynamodb::Client,
    app: &str,
) -> anyhow::Result<Arc<dyn LeaseStore>> {
    Ok(match args.lease_store {
        LeaseStoreKind::Memory => Arc::new(MemoryLeaseStore::new()),
        LeaseStoreKind::Dynamodb => {
            let table = args.lease_table.replace("{app}", app);
            let store = DynamoLeaseStore::new(dynamo.clone(), &table);
            if args.create_lease_table {
                store
                    .create_table_if_missing()
                    .await
                    .with_context(|| format!("creating lease table `{table}`"))?;
            }
            Arc::new(store)
        }
    })
}

async fn shutdown_signal() -> anyhow::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted.context("waiting for SIGINT")?,
        _ = terminate.recv() => {}
    }
    Ok(())
}
