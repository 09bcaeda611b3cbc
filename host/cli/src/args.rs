//! Command-line arguments of `ruststream`.

use std::net::SocketAddr;
use std::path::PathBuf;

use ruststream_fleet::admin::DEFAULT_ADDR;
use ruststream_fleet::admin::allowed_hosts::{HostName, parse_host_name};
use ruststream_fleet::admin::model::SeekPosition;
use ruststream_fleet::aws::AwsOptions;
use ruststream_fleet::client::{self, parse_position};
use ruststream_fleet::engine::CompileCache;
use ruststream_fleet::escape::quote;
use ruststream_fleet::streams::{ExistingStreams, StreamsFlagError, StreamsMode, existing_streams};

#[derive(Debug, clap::Parser)]
#[command(
    name = "ruststream",
    version,
    about = "Runs RustStream handler components against Kinesis"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// How log lines are written: `text` for people, `json` (one object per line, the
    /// component's own fields as separate keys) for log pipelines.
    #[arg(long, global = true, value_enum, env = "RUSTSTREAM_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines, coloured only on a terminal.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Loads components and reports what each declares, or why it is refused; with
    /// `--config`, checks a tenants file offline: every component under its tenant's grants
    /// and limits, every name and limit, the lease table template.
    Check {
        #[arg(required_unless_present = "config", conflicts_with = "config")]
        components: Vec<PathBuf>,
        /// A tenants file to check as `run --config` would load it.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        #[command(flatten)]
        compile: CompileArgs,
    },
    /// Runs components until SIGINT/SIGTERM.
    Run(Box<RunArgs>),
    /// Writes a tenant crate: the seed's handler, built into a component with
    /// `cargo build-component`, and a test `cargo test` runs with `ruststream test`.
    New(NewArgs),
    /// Shows what a running host runs: tenants, apps, subscriptions and shards.
    Status {
        /// Print the host's JSON as is.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Moves a subscription of a running host to another position.
    Seek(SeekArgs),
    /// Stops handing a tenant's handlers records until `resume`.
    Pause {
        tenant: String,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Resumes a paused or quarantined tenant.
    Resume {
        tenant: String,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Loads a component into a running host for a tenant: a new version of the app it
    /// declares, or a new app.
    Deploy(DeployArgs),
    /// Stops, for good, a component a running host took by upload under a name its tenants
    /// file does not list (a listed one is stopped by removing it from the file).
    Undeploy {
        tenant: String,
        /// The component's name, as it was deployed.
        name: String,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Has a running host re-read its config and component files (as SIGHUP does).
    Reload {
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Prints a stream's records, one JSON object per line, with their envelopes decoded
    /// (headers, retry count, due time, a dead letter's origin).
    Tail(TailArgs),
    /// Writes JSON records to a stream, with headers and a partition key.
    Put(PutArgs),
    /// Swaps a tenant's app over to the shadow version running beside it (`deploy --shadow`),
    /// through the normal swap and its automatic rollback.
    Promote {
        tenant: String,
        app: String,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Swaps a tenant's app back to its previous version, or to a kept one (`--to`).
    Rollback {
        tenant: String,
        app: String,
        /// The kept version to return to: its content hash, or a unique prefix of it (see
        /// `ruststream versions`).
        #[arg(long, value_name = "HASH")]
        to: Option<String>,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Lists the versions a running host keeps of a tenant's app: hash, version, when it went
    /// live, how it came (file, upload, rollback), and which one is live.
    Versions {
        tenant: String,
        app: String,
        /// Print the host's JSON as is.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Makes, lists and revokes tokens that reach one tenant's apps only (the operator's
    /// token reaches all).
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// Lists the changes made through a host's admin API (its audit trail): when, which token,
    /// tenant, action, target, what was asked and the result; or those of an audit file or a
    /// JSON log (`--file`), with no host running.
    Audit(AuditArgs),
    /// Lists the warnings and errors a host logged lately, newest first, with whom each is
    /// about (tenant, app, subscription, stream, shard): the host keeps the last 200 of each
    /// tenant, and 200 of its own, in memory.
    Errors(ErrorsArgs),
    /// Writes the dead letters of a dead-letter stream back to the streams they came from,
    /// each exactly once (a run stopped and run again resumes), addressed to the subscription
    /// that gave up on them; `--dry-run` says what would move.
    Redrive(RedriveArgs),
    /// Builds a tenant crate (or takes a component file), runs it on in-process streams, feeds
    /// it records as JSON lines and prints what each came to (outcomes, checkpoints, refused
    /// publishes, log lines); with `--watch`, rebuilds on every save and swaps the new version
    /// in, keeping the streams and checkpoints. Every stream the component publishes to exists
    /// unless `--streams listed`.
    Dev(DevArgs),
    /// Runs a component (any language) on in-process streams: feeds it the records of a
    /// JSON-lines file and checks outcomes, publishes, refused publishes and checkpoints
    /// against an expectations file. Every stream the component publishes to exists unless
    /// `--streams listed`. Exit status 0: all held; 1: one did not; 2: bad input.
    Test(TestArgs),
}

/// Which running host an admin verb talks to, and how it proves itself.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct AdminTarget {
    /// The host's admin API: http:// on loopback, or https://.
    #[arg(long = "admin", env = "RUSTSTREAM_ADMIN", value_name = "URL", default_value = client::DEFAULT_URL)]
    pub url: String,
    /// The file holding the host's admin token [default: admin-token in the state directory].
    #[arg(long, env = "RUSTSTREAM_ADMIN_TOKEN_FILE", value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// The host's state directory, where its admin token is [default:
    /// $XDG_DATA_HOME/ruststream, or ~/.local/share/ruststream].
    #[arg(long, env = "RUSTSTREAM_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Certificates (PEM) to trust for an https:// admin URL, e.g. the host's own
    /// self-signed one [default: the system's root certificates].
    #[arg(long, env = "RUSTSTREAM_ADMIN_CA", value_name = "FILE")]
    pub admin_ca: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct SeekArgs {
    pub tenant: String,
    pub app: String,
    pub subscriber: String,
    /// `horizon`, `latest`, `at-timestamp:MS` (ms since the Unix epoch) or
    /// `at-sequence:SHARD:SEQ` (that shard only, from record SEQ on).
    #[arg(value_parser = parse_position)]
    pub position: SeekPosition,
    #[command(flatten)]
    pub admin: AdminTarget,
}

#[derive(Debug, clap::Args)]
pub(crate) struct DeployArgs {
    pub tenant: String,
    /// The component (`.wasm`).
    #[arg(required_unless_present = "abort_shadow")]
    pub file: Option<PathBuf>,
    /// The component's name in the host [default: the file's stem].
    #[arg(long)]
    pub name: Option<String>,
    /// Run the component beside the live version of its app as a shadow: same records, no
    /// effects, each record's outcome and publishes compared (`ruststream status`).
    #[arg(long)]
    pub shadow: bool,
    /// The percentage of records the shadow is given (1 to 100).
    #[arg(long, value_name = "PERCENT", default_value_t = 100, requires = "shadow",
        value_parser = clap::value_parser!(u32).range(1..=100))]
    pub sample: u32,
    /// Drop the shadow of this app instead of deploying anything.
    #[arg(long, value_name = "APP", conflicts_with_all = ["file", "shadow", "name"])]
    pub abort_shadow: Option<String>,
    #[command(flatten)]
    pub admin: AdminTarget,
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
    pub streams: StreamArgs,
    #[command(flatten)]
    pub compile: CompileArgs,
}

/// Which streams exist for the component `dev` and `test` run: what a host's account would
/// hold.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StreamArgs {
    /// Which streams exist. `any`: every stream, as in an account holding every stream the
    /// component names: the ones it reads and dead-letters into from the start, any other from
    /// its first write, so no publish is refused for a missing stream. `listed`: only those
    /// given with --with-stream: a component reading or dead-lettering into another does not
    /// start (the error names each), and a publish to another is refused with
    /// `stream-not-found`. Every refused publish is shown with its record and subscription.
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = StreamsWhich::Any)]
    pub streams: StreamsWhich,
    /// A stream that exists with `--streams listed` (repeatable): list the streams the
    /// component reads, dead-letters into and publishes to, as the account it will run in has
    /// them.
    #[arg(long = "with-stream", value_name = "NAME")]
    pub with_streams: Vec<String>,
}

/// `--streams`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StreamsWhich {
    /// Every stream exists.
    Any,
    /// Only those given with --with-stream.
    Listed,
}

impl StreamArgs {
    /// The streams that exist, as the library takes them.
    ///
    /// # Errors
    /// When streams are listed with `--streams any`.
    pub(crate) fn existing(&self) -> Result<ExistingStreams, StreamsFlagError> {
        let mode = match self.streams {
            StreamsWhich::Any => StreamsMode::Any,
            StreamsWhich::Listed => StreamsMode::Listed,
        };
        existing_streams(mode, &self.with_streams)
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct TestArgs {
    /// The component file (`.wasm`).
    pub component: PathBuf,
    /// The records, one JSON object a line: `json`, `data` or `data_base64`, and optionally
    /// `stream`, `subscription`, `partition_key`, `headers`, `attempt`.
    #[arg(long, value_name = "RECORDS.jsonl")]
    pub records: PathBuf,
    /// The expectations: `[[record]]` outcomes (one per record in order, or by `number`;
    /// `subscription` to check one of several readers of its stream, else every one),
    /// `[[publish]]`es, `[[refused]]` publishes, `[[checkpoint]]`s; TOML, or JSON for a
    /// `.json` file. A refused publish no `[[refused]]` expects fails the test.
    #[arg(long, value_name = "EXPECT.toml")]
    pub expect: PathBuf,
    #[command(flatten)]
    pub streams: StreamArgs,
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
    /// A RustStream checkout to take the SDK from (and the runtime, for in-process tests)
    /// [default: the checkout this binary was built from].
    #[arg(long, conflicts_with = "git")]
    pub ruststream: Option<PathBuf>,
    /// A git repository of RustStream to take them from instead.
    #[arg(long)]
    pub git: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
    /// Most records per GetRecords (1-10000) [default: 10000; `[host] get_records_limit`].
    /// Records per handler call are the subscription's `batch_size`, a different thing.
    #[arg(long, env = "RUSTSTREAM_GET_RECORDS_LIMIT", value_parser = clap::value_parser!(i32).range(1..=10000))]
    pub get_records_limit: Option<i32>,
    /// Threads that run guest calls, shared by tenants by their `cpu_weight` [default: one
    /// per core; `[host] compute_threads`].
    #[arg(long, env = "RUSTSTREAM_COMPUTE_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub compute_threads: Option<u16>,
    /// Pause after an empty read, in milliseconds [default: 1000; `[host] poll_interval`].
    #[arg(long, env = "RUSTSTREAM_POLL_INTERVAL_MS")]
    pub poll_interval_ms: Option<u64>,
    /// Least time between two checkpoint writes of a shard, in milliseconds [default: 1000;
    /// `[host] checkpoint_interval`].
    #[arg(long, env = "RUSTSTREAM_CHECKPOINT_INTERVAL_MS")]
    pub checkpoint_interval_ms: Option<u64>,
    /// How long a lease lives without renewal, in milliseconds [default: 10000;
    /// `[host] lease_ttl`].
    #[arg(long, env = "RUSTSTREAM_LEASE_TTL_MS")]
    pub lease_ttl_ms: Option<u64>,
    /// How often a held lease is renewed, in milliseconds [default: 3000;
    /// `[host] renew_interval`].
    #[arg(long, env = "RUSTSTREAM_RENEW_INTERVAL_MS")]
    pub renew_interval_ms: Option<u64>,
    /// How often shards are re-listed and leases balanced, in milliseconds [default: 10000;
    /// `[host] shard_sync_interval`].
    #[arg(long, env = "RUSTSTREAM_SHARD_SYNC_INTERVAL_MS")]
    pub shard_sync_interval_ms: Option<u64>,
    /// How long a stop waits for calls to finish and checkpoints to be flushed, in
    /// milliseconds [default: 15000; `[host] shutdown_grace`].
    #[arg(long, env = "RUSTSTREAM_SHUTDOWN_GRACE_MS")]
    pub shutdown_grace_ms: Option<u64>,
    /// How many calls of a swapped-in version are judged against the last calls of the
    /// version it replaced.
    #[arg(long, default_value_t = ruststream_fleet::run::DEFAULT_ROLLOUT_CALLS,
        value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub rollout_calls: u32,
    /// How much higher (0 to 1) a swapped-in version's failure rate may be than the old
    /// version's before it is rolled back.
    #[arg(long, default_value_t = ruststream_fleet::run::DEFAULT_ROLLOUT_MARGIN, value_parser = parse_margin)]
    pub rollout_margin: f64,
    /// Where the admin API listens; `off` (or `none`) for no admin API. Loopback only,
    /// unless --allow-remote-admin.
    #[arg(long, env = "RUSTSTREAM_ADMIN_ADDR", value_name = "ADDR", default_value_t = ListenAddr(Some(DEFAULT_ADDR)), value_parser = parse_listen_addr)]
    pub admin_addr: ListenAddr,
    /// Let the admin API listen on a non-loopback address. Needs TLS (--admin-tls-cert and
    /// --admin-tls-key) besides the token: whoever has the token can load code into tenants.
    #[arg(long)]
    pub allow_remote_admin: bool,
    /// The certificate chain (PEM) the admin API serves TLS with.
    #[arg(
        long,
        env = "RUSTSTREAM_ADMIN_TLS_CERT",
        value_name = "FILE",
        requires = "admin_tls_key"
    )]
    pub admin_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --admin-tls-cert.
    #[arg(
        long,
        env = "RUSTSTREAM_ADMIN_TLS_KEY",
        value_name = "FILE",
        requires = "admin_tls_cert"
    )]
    pub admin_tls_key: Option<PathBuf>,
    /// A name the admin API answers to besides its address (`NAME` or `NAME:PORT`, repeatable):
    /// requests with another `Host` are refused.
    #[arg(long = "admin-host", value_name = "NAME", value_parser = parse_host_name)]
    pub admin_hosts: Vec<HostName>,
    /// The file holding the admin token, made at the first start if missing [default:
    /// admin-token in the state directory].
    #[arg(long, env = "RUSTSTREAM_ADMIN_TOKEN_FILE", value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// Where the host keeps its state: the admin token, every accepted component version, and
    /// which one each app runs [default: `[host] state_dir`, else $XDG_DATA_HOME/ruststream, or
    /// ~/.local/share/ruststream].
    #[arg(long, env = "RUSTSTREAM_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Where Prometheus metrics are served (`GET /metrics`); `off` (or `none`) for none.
    #[arg(long, env = "RUSTSTREAM_METRICS_ADDR", value_name = "ADDR", default_value_t = ListenAddr(Some(METRICS_ADDR)), value_parser = parse_listen_addr)]
    pub metrics_addr: ListenAddr,
}

/// Where the metrics endpoint listens unless told otherwise: loopback, port 9464.
pub(crate) const METRICS_ADDR: SocketAddr = ruststream_fleet::metrics::DEFAULT_ADDR;

/// `--admin-addr`, `--metrics-addr`: the address to serve on, or `None` for no server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListenAddr(pub Option<SocketAddr>);

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(addr) => addr.fmt(f),
            None => f.write_str("off"),
        }
    }
}

/// Why an `--admin-addr` or `--metrics-addr` is not one.
#[derive(Debug, thiserror::Error)]
#[error("`{input}` is not an address: give IP:PORT (e.g. 127.0.0.1:9465), or `off`")]
pub(crate) struct ListenAddrError {
    input: String,
    #[source]
    source: std::net::AddrParseError,
}

/// Parses `--admin-addr` and `--metrics-addr`: `IP:PORT`, or `off`/`none`.
fn parse_listen_addr(input: &str) -> Result<ListenAddr, ListenAddrError> {
    if input.eq_ignore_ascii_case("off") || input.eq_ignore_ascii_case("none") {
        return Ok(ListenAddr(None));
    }
    match input.parse() {
        Ok(addr) => Ok(ListenAddr(Some(addr))),
        Err(source) => Err(ListenAddrError {
            input: quote(input),
            source,
        }),
    }
}

fn parse_margin(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(margin) if (0.0..=1.0).contains(&margin) => Ok(margin),
        _ => Err(format!("`{text}` is not a rate between 0 and 1")),
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
    /// The flags as the library takes them.
    pub(crate) fn options(&self) -> CompileCache {
        CompileCache {
            compile_cache: self.compile_cache.clone(),
            no_compile_cache: self.no_compile_cache,
        }
    }
}

/// `ruststream tail`.
#[derive(Debug, clap::Args)]
pub(crate) struct TailArgs {
    /// The stream.
    pub stream: String,
    /// Where each shard is read from.
    #[arg(long, value_enum, default_value_t = TailFrom::Horizon)]
    pub from: TailFrom,
    /// Keep reading new records instead of stopping at the tip.
    #[arg(long)]
    pub follow: bool,
    #[command(flatten)]
    pub aws: AwsArgs,
}

/// `ruststream tail --from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TailFrom {
    /// The oldest record each shard keeps.
    Horizon,
    /// Only records written from now on.
    Latest,
}

/// `ruststream redrive`.
#[derive(Debug, clap::Args)]
pub(crate) struct RedriveArgs {
    /// The dead-letter stream.
    pub stream: String,
    /// The tenants file: whose dead letters may go back where (their grants), and at what
    /// rate (their write quota).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Only the dead letters of this tenant.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Only those dead-lettered for this reason (`attempts-exhausted`,
    /// `record-age-exceeded`, or a trap kind such as `panic`).
    #[arg(long)]
    pub reason: Option<String>,
    /// Only those that reached the dead-letter stream at or after TIME (RFC 3339, or ms
    /// since the Unix epoch).
    #[arg(long, value_name = "TIME", value_parser = parse_redrive_time)]
    pub since: Option<u64>,
    /// Only those that reached it at or before TIME [default: when the redrive first started].
    #[arg(long, value_name = "TIME", value_parser = parse_redrive_time)]
    pub until: Option<u64>,
    /// Print what would move (per origin stream and reason, and the first records) and what
    /// would be refused; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The redrive's name [default: derived from the stream and the options, so the same
    /// command run again resumes the same redrive].
    #[arg(long)]
    pub id: Option<String>,
    /// The DynamoDB table redrives keep their progress in.
    #[arg(long, default_value = ruststream_fleet::redrive::DEFAULT_TABLE)]
    pub redrive_table: String,
    /// Create the table if it does not exist.
    #[arg(long)]
    pub create_redrive_table: bool,
    /// How long a stopped run holds the redrive before another may resume it, in ms.
    #[arg(long, default_value_t = 10_000)]
    pub lease_ttl_ms: u64,
    #[command(flatten)]
    pub aws: AwsArgs,
}

/// `ruststream token`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum TokenAction {
    /// Makes a token that reaches TENANT's apps only: deploy, shadow, promote, rollback, seek,
    /// pause and resume, its status, versions and audit trail, its dead letters' redrive. It
    /// is printed this once; the host keeps its hash.
    Create {
        /// The tenant it reaches.
        #[arg(long)]
        tenant: String,
        /// What to call it (`ci`, a person's name).
        #[arg(long, default_value = "")]
        name: String,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Lists the tenant tokens (ids, tenants, names; never the tokens).
    List {
        /// Print the host's JSON as is.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        admin: AdminTarget,
    },
    /// Revokes a tenant token: refused from the next request on, on every host that reads the
    /// same token store.
    Revoke {
        /// The token's id (see `token list`).
        id: String,
        #[command(flatten)]
        admin: AdminTarget,
    },
}

/// Which entries of a host's trail (`audit`, `errors`) to show.
#[derive(Debug, clap::Args)]
pub(crate) struct TrailQuery {
    /// Only those about this tenant.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Only those at or after WHEN: a time (RFC 3339, or ms since the Unix epoch) or a time
    /// ago (`90s`, `15m`, `2h`, `7d`).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    pub since: Option<u64>,
    /// The newest this many (at most 1000 from a host).
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    /// Print them as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `ruststream audit`.
#[derive(Debug, clap::Args)]
pub(crate) struct AuditArgs {
    #[command(flatten)]
    pub query: TrailQuery,
    /// Read the entries from FILE instead of a host: its audit file (`audit.jsonl` in the
    /// state directory) or a log it wrote with `--log-format json`.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// `ruststream errors`.
#[derive(Debug, clap::Args)]
pub(crate) struct ErrorsArgs {
    #[command(flatten)]
    pub query: TrailQuery,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// A time, or a time ago (`15m`): ms since the Unix epoch.
fn parse_since(text: &str) -> Result<u64, String> {
    let units = [
        ('s', 1_000),
        ('m', 60_000),
        ('h', 3_600_000),
        ('d', 86_400_000),
    ];
    let ago = units.iter().find_map(|&(unit, ms)| {
        let count: u64 = text.strip_suffix(unit)?.parse().ok()?;
        Some(count.saturating_mul(ms))
    });
    match ago {
        Some(ago) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as u64);
            Ok(now.saturating_sub(ago))
        }
        None => ruststream_fleet::redrive::parse_time(text)
            .map_err(|error| format!("{error}; or a time ago such as 90s, 15m, 2h or 7d")),
    }
}

fn parse_redrive_time(text: &str) -> Result<u64, String> {
    ruststream_fleet::redrive::parse_time(text).map_err(|error| error.to_string())
}

/// `ruststream put`.
#[derive(Debug, clap::Args)]
pub(crate) struct PutArgs {
    /// The stream.
    pub stream: String,
    /// Records, each a JSON text.
    #[arg(conflicts_with = "file")]
    pub records: Vec<String>,
    /// A file of records, one JSON text per line.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The partition key of every record (default: each record's position).
    #[arg(long)]
    pub key: Option<String>,
    /// A header of every record, `NAME=VALUE` (repeatable; not `x-ruststream-*`).
    #[arg(long = "header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,
    #[command(flatten)]
    pub aws: AwsArgs,
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
    /// STS endpoint, where tenants' `role_arn`s are assumed (default: AWS).
    #[arg(long, env = "RUSTSTREAM_STS_ENDPOINT")]
    pub sts_endpoint: Option<String>,
    /// S3 endpoint, where a fleet's component bytes are kept (default: AWS).
    #[arg(long, env = "RUSTSTREAM_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
}

impl AwsArgs {
    /// The flags as the library takes them.
    pub(crate) fn options(&self) -> AwsOptions {
        AwsOptions {
            region: self.region.clone(),
            kinesis_endpoint: self.kinesis_endpoint.clone(),
            dynamodb_endpoint: self.dynamodb_endpoint.clone(),
            sts_endpoint: self.sts_endpoint.clone(),
            s3_endpoint: self.s3_endpoint.clone(),
            credentials: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ruststream").chain(args.iter().copied()))
    }

    fn run_args(args: &[&str]) -> RunArgs {
        match parse(args).map(|cli| cli.command) {
            Ok(Command::Run(run)) => *run,
            other => panic!("not a run: {other:?}"),
        }
    }

    #[test]
    fn the_admin_api_listens_on_loopback_by_default() {
        let run = run_args(&["run", "x.wasm"]);
        assert_eq!(run.admin_addr, ListenAddr(Some(DEFAULT_ADDR)));
        assert_eq!(run.admin_addr.to_string(), "127.0.0.1:9465");
        assert!(!run.allow_remote_admin);
        assert_eq!(run.metrics_addr.to_string(), "127.0.0.1:9464");

        let run = run_args(&[
            "run",
            "x.wasm",
            "--admin-addr",
            "off",
            "--metrics-addr",
            "none",
        ]);
        assert_eq!(run.metrics_addr, ListenAddr(None));
        assert_eq!(run.admin_addr, ListenAddr(None));
        let run = run_args(&[
            "run",
            "x.wasm",
            "--admin-addr",
            "0.0.0.0:80",
            "--allow-remote-admin",
        ]);
        assert_eq!(run.admin_addr.0.map(|a| a.port()), Some(80));
        assert!(run.allow_remote_admin);
        let error = parse(&["run", "x.wasm", "--admin-addr", "localhost"]).expect_err("no IP");
        assert!(
            error.to_string().contains("`localhost` is not an address"),
            "{error}"
        );
    }

    #[test]
    fn admin_security_flags() {
        let run = run_args(&[
            "run",
            "x.wasm",
            "--admin-host",
            "admin.example.com",
            "--admin-host",
            "proxy.example.com:443",
            "--admin-tls-cert",
            "c.pem",
            "--admin-tls-key",
            "k.pem",
            "--state-dir",
            "/var/lib/rs",
        ]);
        assert_eq!(run.admin_hosts.len(), 2);
        assert_eq!(run.state_dir, Some(PathBuf::from("/var/lib/rs")));
        let error = parse(&["run", "x.wasm", "--admin-tls-cert", "c.pem"]).expect_err("no key");
        assert!(error.to_string().contains("--admin-tls-key"), "{error}");
        let error = parse(&["run", "x.wasm", "--admin-host", "a b"]).expect_err("not a name");
        assert!(error.to_string().contains("is not a host name"), "{error}");

        let cli = parse(&[
            "rollback",
            "acme",
            "ledger",
            "--to",
            "3f2a",
            "--state-dir",
            "/s",
        ]);
        let Ok(Command::Rollback { to, admin, .. }) = cli.map(|cli| cli.command) else {
            panic!("not a rollback")
        };
        assert_eq!(to.as_deref(), Some("3f2a"));
        assert_eq!(admin.state_dir, Some(PathBuf::from("/s")));
        let cli = parse(&["versions", "acme", "ledger", "--json"]).expect("versions");
        assert!(matches!(cli.command, Command::Versions { json: true, .. }));
    }

    #[test]
    fn dev_and_test_read_the_same_stream_flags() {
        let dev = parse(&[
            "dev",
            "x.wasm",
            "--streams",
            "listed",
            "--with-stream",
            "ledger",
            "--with-stream",
            "ledger.dead",
        ]);
        let Ok(Command::Dev(dev)) = dev.map(|cli| cli.command) else {
            panic!("not a dev")
        };
        let listed = ["ledger".to_owned(), "ledger.dead".to_owned()];
        assert_eq!(
            dev.streams.existing(),
            Ok(ExistingStreams::Listed(listed.into_iter().collect()))
        );
        let test = parse(&["test", "x.wasm", "--records", "r", "--expect", "e"]);
        let Ok(Command::Test(test)) = test.map(|cli| cli.command) else {
            panic!("not a test")
        };
        assert_eq!(test.streams.existing(), Ok(ExistingStreams::Any));
        let error = parse(&["dev", "x.wasm", "--streams", "some"]).expect_err("no such choice");
        assert!(
            error.to_string().contains("[possible values: any, listed]"),
            "{error}"
        );
    }

    #[test]
    fn admin_verbs() {
        let cli = parse(&["seek", "acme", "ledger", "book", "at-timestamp:5"]).expect("a seek");
        let Command::Seek(seek) = cli.command else {
            panic!("not a seek")
        };
        assert_eq!(seek.position, SeekPosition::Timestamp { ms: 5 });
        assert_eq!(seek.admin.url, client::DEFAULT_URL);
        let error = parse(&["seek", "acme", "ledger", "book", "soon"]).expect_err("bad position");
        assert!(
            error.to_string().contains("`soon` is not a position"),
            "{error}"
        );

        let cli = parse(&["deploy", "acme", "x.wasm", "--admin", "http://127.0.0.1:1"]);
        let Ok(Command::Deploy(deploy)) = cli.map(|cli| cli.command) else {
            panic!("not a deploy")
        };
        assert_eq!(
            (deploy.name, deploy.admin.url.as_str()),
            (None, "http://127.0.0.1:1")
        );
    }
}
