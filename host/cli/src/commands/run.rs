//! `ruststream run`: the host, until SIGINT or SIGTERM (`ruststream_fleet::run`).

use ruststream_fleet::admin::token::AdminToken;
use ruststream_fleet::config;
use ruststream_fleet::engine::CompileIn;
use ruststream_fleet::recent_errors::RecentErrors;
use ruststream_fleet::run::RunOptions;

use crate::args::{LeaseStoreKind, RunArgs};

/// Runs the host with the flags' options, keeping the warnings and errors it logs in `recent`.
pub(crate) async fn run(args: RunArgs, recent_errors: RecentErrors) -> anyhow::Result<()> {
    Ok(ruststream_fleet::run::run(options(args, recent_errors)?).await?)
}

/// The flags (and the admin token the environment gives) as the library takes them.
fn options(args: RunArgs, recent_errors: RecentErrors) -> anyhow::Result<RunOptions> {
    Ok(RunOptions {
        components: args.components,
        config: args.config,
        aws: args.aws.options(),
        compile: args.compile.options(),
        // The tenants' components are untrusted: always the bounded worker.
        compile_in: CompileIn::Worker,
        lease_store: args.lease_store.map(lease_store),
        lease_table: args.lease_table,
        create_lease_table: args.create_lease_table,
        owner_id: args.owner_id,
        get_records_limit: args.get_records_limit,
        compute_threads: args.compute_threads,
        poll_interval_ms: args.poll_interval_ms,
        checkpoint_interval_ms: args.checkpoint_interval_ms,
        lease_ttl_ms: args.lease_ttl_ms,
        renew_interval_ms: args.renew_interval_ms,
        shard_sync_interval_ms: args.shard_sync_interval_ms,
        shutdown_grace_ms: args.shutdown_grace_ms,
        rollout_calls: args.rollout_calls,
        rollout_margin: args.rollout_margin,
        admin_addr: args.admin_addr.0,
        allow_remote_admin: args.allow_remote_admin,
        admin_tls_cert: args.admin_tls_cert,
        admin_tls_key: args.admin_tls_key,
        admin_hosts: args.admin_hosts,
        admin_token_file: args.admin_token_file,
        admin_token: AdminToken::from_env()?,
        state_dir: args.state_dir,
        metrics_addr: args.metrics_addr.0,
        recent_errors,
    })
}

fn lease_store(kind: LeaseStoreKind) -> config::LeaseStoreKind {
    match kind {
        LeaseStoreKind::Memory => config::LeaseStoreKind::Memory,
        LeaseStoreKind::Dynamodb => config::LeaseStoreKind::Dynamodb,
    }
}
