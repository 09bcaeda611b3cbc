//! Command-line arguments of `ruststream`.

use std::path::PathBuf;
use std::time::Duration;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use ruststream_host::{HostConfig, ReaderConfig};

#[derive(Debug, clap::Parser)]
#[command(
    name = "ruststream",
    version,
    about = "Runs RustStream handler components against Kinesis"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Loads components and reports what each declares, or why it is refused.
    Check {
        #[arg(required = true)]
        components: Vec<PathBuf>,
        #[command(flatten)]
        compile: CompileArgs,
    },
    /// Runs components until SIGINT/SIGTERM.
    Run(RunArgs),
    /// Writes a tenant crate: the seed's handler, built into a component with
    /// `cargo build-component`, and a `TestApp` test run by `cargo test`.
    New(NewArgs),
    /// Builds a tenant crate (or takes a component file), runs it on in-process streams, feeds
    /// it records as JSON lines and prints what each came to; with `--watch`, rebuilds on
    /// every save and swaps the new version in, keeping the streams and checkpoints.
    Dev(DevArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct DevArgs {
    /// A tenant crate (a directory with Cargo.toml, built with `cargo build --release --target
    /// wasm32-wasip2` into its own target/), or a component file (`.wasm`).
    #[arg(default_value = ".")]
    pub path: PathBuf,
    /// Read the records, one JSON value a line, from this file instead of stdin.
    #[arg(long)]
    pub records: Option<PathBuf>,
    /// The stream the records are published to [default: the stream of the component's
    /// first subscription].
    #[arg(long)]
    pub stream: Option<String>,
    /// Rebuild (or reload the component file) whenever the crate's src/ or Cargo.toml
    /// changes, and swap the new version in: streams, checkpoints and held records stay.
    #[arg(long)]
    pub watch: bool,
    #[command(flatten)]
    pub compile: CompileArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct NewArgs {
    /// The crate's name (also its component's file name, `-` becoming `_`).
    pub name: String,
    /// Where to write it [default: ./NAME].
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// A RustStream checkout to take the SDK and the runtime from [default: the checkout this
    /// binary was built from].
    #[arg(long, conflicts_with = "git")]
    pub ruststream: Option<PathBuf>,
    /// A git repository of RustStream to take them from instead.
    #[arg(long)]
    pub git: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LeaseStoreKind {
    /// In memory: checkpoints are forgotten on restart (shards reopen at their start position).
    Memory,
    /// A DynamoDB table per app: checkpoints survive restarts, hosts share shards.
    Dynamodb,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Component files (`.wasm`) to run for one trusted tenant, `default`, granted every
    /// stream. Untrusted tenants are configured with `--config` instead.
    #[arg(required_unless_present = "config", conflicts_with = "config")]
    pub components: Vec<PathBuf>,
    /// A TOML file of tenants: their components, grants and limits.
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub aws: AwsArgs,
    #[command(flatten)]
    pub compile: CompileArgs,
    /// Where leases and checkpoints live.
    #[arg(long, value_enum)]
    pub lease_store: Option<LeaseStoreKind>,
    /// DynamoDB lease table; `{tenant}` and `{app}` are replaced (names escaped so that no two
    /// tenants' apps share a table), so each tenant's app has its own
    /// [default: ruststream-{tenant}-{app}].
    #[arg(long)]
    pub lease_table: Option<String>,
    /// Create lease tables that do not exist.
    #[arg(long)]
    pub create_lease_table: bool,
    /// This host's lease owner id (default: unique per process). A fixed id lets a
    /// restarted host take its leases back at once.
    #[arg(long, env = "RUSTSTREAM_OWNER_ID")]
    pub owner_id: Option<String>,
    /// Most records per GetRecords (1-10000).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(i32).range(1..=10000))]
    pub batch_limit: i32,
    /// Pause after an empty read, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub poll_interval_ms: u64,
    /// Least time between two checkpoint writes of a shard, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub checkpoint_interval_ms: u64,
    /// How long a lease lives without renewal, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub lease_ttl_ms: u64,
    /// How often a held lease is renewed, in milliseconds.
    #[arg(long, default_value_t = 3_000)]
    pub renew_interval_ms: u64,
    /// How often shards are re-listed and leases balanced, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub shard_sync_interval_ms: u64,
    /// How long a stop waits for calls to finish and checkpoints to be flushed, in
    /// milliseconds.
    #[arg(long, default_value_t = 15_000)]
    pub shutdown_grace_ms: u64,
}

impl RunArgs {
    pub(crate) fn host_config(&self) -> HostConfig {
        HostConfig {
            owner_id: self
                .owner_id
                .clone()
                .unwrap_or_else(|| HostConfig::default().owner_id),
            reader: ReaderConfig {
                batch_limit: self.batch_limit,
                poll_interval: Duration::from_millis(self.poll_interval_ms),
                ..ReaderConfig::default()
            },
            checkpoint_interval: Duration::from_millis(self.checkpoint_interval_ms),
            lease_ttl: Duration::from_millis(self.lease_ttl_ms),
            renew_interval: Duration::from_millis(self.renew_interval_ms),
            shard_sync_interval: Duration::from_millis(self.shard_sync_interval_ms),
            shutdown_grace: Duration::from_millis(self.shutdown_grace_ms),
        }
    }
}

/// Where compiled components are cached.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CompileArgs {
    /// Directory of compiled components, keyed by content hash and engine configuration
    /// [default: $XDG_CACHE_HOME/ruststream/compiled, or ~/.cache/ruststream/compiled].
    #[arg(long, env = "RUSTSTREAM_COMPILE_CACHE")]
    pub compile_cache: Option<PathBuf>,
    /// Compile every component at every load; keep no compiled artifacts.
    #[arg(long, conflicts_with = "compile_cache")]
    pub no_compile_cache: bool,
}

impl CompileArgs {
    /// The cache directory: the flag, else `configured`, else the user's cache directory.
    pub(crate) fn cache_dir(&self, configured: Option<&PathBuf>) -> Option<PathBuf> {
        if self.no_compile_cache {
            return None;
        }
        self.compile_cache
            .clone()
            .or_else(|| configured.cloned())
            .or_else(default_cache_dir)
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("ruststream").join("compiled"))
}

#[derive(Debug, clap::Args)]
pub(crate) struct AwsArgs {
    /// AWS region (default: from the environment).
    #[arg(long, env = "AWS_REGION")]
    pub region: Option<String>,
    /// Kinesis endpoint, e.g. a local server (default: AWS).
    #[arg(long, env = "RUSTSTREAM_KINESIS_ENDPOINT")]
    pub kinesis_endpoint: Option<String>,
    /// DynamoDB endpoint (default: AWS).
    #[arg(long, env = "RUSTSTREAM_DYNAMODB_ENDPOINT")]
    pub dynamodb_endpoint: Option<String>,
}

impl AwsArgs {
    async fn base(&self) -> aws_config::ConfigLoader {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(region) = &self.region {
            loader = loader.region(Region::new(region.clone()));
        }
        loader
    }

    pub(crate) async fn kinesis_config(&self) -> SdkConfig {
        let mut loader = self.base().await;
        if let Some(endpoint) = &self.kinesis_endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        loader.load().await
    }

    pub(crate) async fn dynamodb_config(&self) -> SdkConfig {
        let mut loader = self.base().await;
        if let Some(endpoint) = &self.dynamodb_endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        loader.load().await
    }
}
