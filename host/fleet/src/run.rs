//! The host: tenants' components against Kinesis, picking up new versions and tenants while it
//! runs. [`RunningHost`] is the host embedded (started from [`RunOptions`], driven through its
//! control, stopped when a future completes); [`run`] is `ruststream run`, the same host until
//! a stop signal.
//!
//! `run` installs its signal handlers first, so a stop during start-up is as graceful as any
//! other. Every change goes through the fleet's reload path: the first start, SIGHUP (the config
//! and every component file read again) and uploads. Tenants load side by side, each app starting as soon
//! as it is loaded: a tenant whose component is slow to compile or to instantiate delays nobody
//! else. Apps stop side by side too.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ruststream_common::escape::one_line;
use ruststream_kinesis::{Host, HostConfig, lease::DEFAULT_TABLE_TEMPLATE};
use ruststream_runtime::{
    Runtime, RuntimeConfig, component::compile::CompileLimits, cpu::Compute, rollout::RolloutPolicy,
};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::task::JoinSet;

use crate::admin::allowed_hosts::HostName;
use crate::admin::control::ControlError;
use crate::admin::model::Deployed;
use crate::admin::tls::TlsFiles;
use crate::admin::token::{AdminToken, TOKEN_ENV, TokenError};
use crate::admin::{self, AdminOptions, AdminStartError, AuditLog};
use crate::aws::AwsOptions;
use crate::config::{Config, ConfigError};
use crate::desired::DESIRED_TABLE;
use crate::engine::{CompileCache, CompileIn, EngineError, runtime_config_in};
use crate::fleet::{Fleet, LeaseSettings, TenantSources};
use crate::http_server::HttpServer;
use crate::identity::Identities;
use crate::recent_errors::RecentErrors;
use crate::settings::deprecated::GivenTwice;
use crate::settings::{HostSettings, LeaseStoreKind, SettingError};
use crate::state::audit::AuditFile;
use crate::state::versions::DEFAULT_KEEP;
use crate::state::{Kept, StateDir, StateError};
use crate::tokens::dynamo::DynamoTokens;
use crate::tokens::{FileTokens, TokenStore};
use crate::watch::FileWatch;
use crate::{metrics, state};

/// How many calls of a swapped-in version are judged, and how much higher its failure rate
/// may be, unless told otherwise ([`RunOptions::rollout_calls`], [`RunOptions::rollout_margin`]).
pub use ruststream_runtime::rollout::{DEFAULT_ROLLOUT_CALLS, DEFAULT_ROLLOUT_MARGIN};

/// How long changes to watched files must be quiet before a reload: a component file is
/// replaced by one rename (or written and closed), which is one event, so a short wait only
/// gathers the changes of one deploy.
const FILE_QUIET: Duration = Duration::from_millis(20);

/// How long requests under way to the admin API or the metrics endpoint may take once the
/// host stops.
const SERVER_GRACE: Duration = Duration::from_secs(2);

/// How often Kinesis and DynamoDB are probed for readiness.
const PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// Why a host could not start, or stopped by itself: which step failed, with the input it
/// failed on. The messages are what `ruststream run` prints (with `{:#}`, the sources too).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The tenants file cannot be read, or has a mistake (file, line and key named).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The tenants file read as a reload would read it fails: a lease table template that
    /// does not fit, `fuel` set where the engine does not meter it, a component file missing.
    /// (The fleet's reload path still reports in `anyhow`: its messages are built in many
    /// places.)
    #[error(transparent)]
    Tenants(anyhow::Error),
    /// A signal handler cannot be installed.
    #[error("installing the {signal} handler")]
    Signal {
        /// `SIGTERM`, `SIGINT`, `SIGUSR1` or `SIGHUP`.
        signal: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A deprecated flag (`--lease-ttl-ms`) given beside the one that replaces it.
    #[error(transparent)]
    DeprecatedFlag(#[from] GivenTwice),
    /// A flag (or an embedder's setting) whose value no host can run with.
    #[error("--{flag}: {error}", flag = .0.key.replace('_', "-"), error = .0)]
    Setting(SettingError),
    /// The lease renewal interval is not shorter than the lease's time to live.
    #[error("--renew-interval ({renew:?}) must be shorter than --lease-ttl ({ttl:?})")]
    Timing {
        /// The renewal interval.
        renew: Duration,
        /// The lease's time to live.
        ttl: Duration,
    },
    /// `[host] component_bucket` is set, but the fleet's deploys cannot be set up.
    #[error("fleet deploys: {0}")]
    FleetDeploys(String),
    /// No state directory was given and none can be derived.
    #[error(
        "no state directory: HOME and XDG_DATA_HOME are unset; give --state-dir or `[host] \
         state_dir`"
    )]
    NoStateDir,
    /// The state directory cannot be used (held by another host, not writable).
    #[error(transparent)]
    StateDir(#[from] StateError),
    /// The admin token is given twice: by value in the environment and by a file.
    #[error(
        "the admin token is given twice, by ${variable} and by --admin-token-file {}: give \
         one",
        file.display()
    )]
    TwoTokens {
        /// The file given.
        file: PathBuf,
        /// The variable set.
        variable: &'static str,
    },
    /// The admin token file cannot be read or made.
    #[error(transparent)]
    AdminToken(#[from] TokenError),
    /// The admin API cannot start (its address, TLS files, the bind).
    #[error(transparent)]
    Admin(#[from] AdminStartError),
    /// The engine cannot be made (this program cannot be found for its compile worker, or the
    /// engine's configuration is refused).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The metrics recorder cannot be installed or its endpoint cannot listen.
    #[error(transparent)]
    Metrics(anyhow::Error),
    /// The first load started no component: every one was refused, each named as `check
    /// --config` names it, with why (`; ` between them).
    #[error("no component could be started: {reasons}")]
    NothingStarted {
        /// Each refused component and why.
        reasons: String,
    },
}

/// What `ruststream run` runs, and how: each `Option` left `None` takes the tenants file's
/// `[host]` key, else the built-in default.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Component files (`.wasm`) to run for one trusted tenant, `default`, granted every
    /// stream; untrusted tenants are configured with `config` instead.
    pub components: Vec<PathBuf>,
    /// A TOML file of tenants: their components, grants and limits.
    pub config: Option<PathBuf>,
    /// Where AWS is.
    pub aws: AwsOptions,
    /// Where compiled components are cached.
    pub compile: CompileCache,
    /// Where components are compiled: the bounded worker unless an embedder whose components
    /// are all trusted opts in to this process.
    pub compile_in: CompileIn,
    /// The host's settings given here, as `run`'s flags give them: each one given wins over
    /// the tenants file's `[host]` key, which wins over the built-in default.
    pub settings: HostSettings,
    /// This host's lease owner id (default: unique per process).
    pub owner_id: Option<String>,
    /// How many calls of a swapped-in version are judged against the last calls of the
    /// version it replaced.
    pub rollout_calls: u32,
    /// How much higher (0 to 1) a swapped-in version's failure rate may be than the old
    /// version's before it is rolled back.
    pub rollout_margin: f64,
    /// Where the admin API listens; `None` for no admin API.
    pub admin_addr: Option<SocketAddr>,
    /// Let the admin API listen on a non-loopback address (needs TLS).
    pub allow_remote_admin: bool,
    /// The certificate chain (PEM) the admin API serves TLS with.
    pub admin_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of `admin_tls_cert`.
    pub admin_tls_key: Option<PathBuf>,
    /// Names the admin API answers to besides its address.
    pub admin_hosts: Vec<HostName>,
    /// The file holding the admin token, made at the first start if missing [default:
    /// admin-token in the state directory].
    pub admin_token_file: Option<PathBuf>,
    /// The admin token itself, as [`TOKEN_ENV`] gives it to
    /// every host of a fleet alike: no token file is read or made. Not together with
    /// `admin_token_file`.
    pub admin_token: Option<AdminToken>,
    /// Where Prometheus metrics are served; `None` for nowhere.
    pub metrics_addr: Option<SocketAddr>,
    /// Where the warnings and errors the process logs are kept for the console and
    /// `GET /v1/errors`: the store whose [`layer`](RecentErrors::layer) the embedder installed
    /// in its tracing subscriber (one without it keeps nothing).
    pub recent_errors: RecentErrors,
}

impl Default for RunOptions {
    /// No component, no tenants file; the admin API and the metrics on their loopback ports.
    fn default() -> Self {
        Self {
            components: Vec::new(),
            config: None,
            aws: AwsOptions::default(),
            compile: CompileCache::default(),
            compile_in: CompileIn::Worker,
            settings: HostSettings::default(),
            owner_id: None,
            rollout_calls: DEFAULT_ROLLOUT_CALLS,
            rollout_margin: DEFAULT_ROLLOUT_MARGIN,
            admin_addr: Some(admin::DEFAULT_ADDR),
            allow_remote_admin: false,
            admin_tls_cert: None,
            admin_tls_key: None,
            admin_hosts: Vec::new(),
            admin_token_file: None,
            admin_token: None,
            metrics_addr: Some(metrics::DEFAULT_ADDR),
            recent_errors: RecentErrors::new(),
        }
    }
}

/// Runs the host until SIGINT or SIGTERM, as `ruststream run` does: SIGHUP reloads, SIGUSR1
/// lifts every tenant's quarantine, and a second SIGINT while stopping exits the process at
/// once (status 130) without flushing checkpoints.
///
/// # Errors
/// The tenants file, the state directory, a server that cannot listen, or no component
/// started.
pub async fn run(options: RunOptions) -> Result<(), RunError> {
    // Signal handlers come first, so a stop during start-up is as graceful as any other.
    let mut signals = Signals::install()?;
    let host = RunningHost::start(options).await?;
    host.serve(Events::Signals(&mut signals)).await
}

/// A host running a fleet of tenants in this process: the tenants file (or component files)
/// loaded, the admin API and the metrics endpoint listening as its [`RunOptions`] say.
///
/// [`RunningHost::control`] drives it as the admin API does; [`RunningHost::run_until`] keeps
/// it running (reloading when its files change) until a future completes, then stops it
/// gracefully. Stop it that way: dropped otherwise, its servers stop and a load under way is
/// aborted, but the apps already running (and the readiness probe) run on until the tokio
/// runtime shuts down, with no checkpoint flushed and no lease released.
pub struct RunningHost {
    fleet: Fleet,
    state_dir: StateDir,
    admin: Option<HttpServer>,
    metrics: Option<HttpServer>,
    reloads: JoinSet<Result<Vec<Deployed>, ControlError>>,
    starting: Option<tokio::task::Id>,
    probing: tokio::task::JoinHandle<()>,
    /// This host's part in the fleet's reads, once its table exists (DynamoDB leases only).
    reads: Option<tokio::task::JoinHandle<ruststream_kinesis::runner::FleetReads>>,
    /// Following the fleet's desired state, once the first load is done (fleet deploys only).
    following: Option<tokio::task::JoinHandle<()>>,
}

impl RunningHost {
    /// Reads the tenants file, opens (and locks) the state directory, starts the admin API and
    /// the metrics endpoint, and begins loading every tenant; it returns before the tenants are
    /// loaded (readiness says so meanwhile). Must be called within a multi-threaded tokio
    /// runtime; the program must serve the compile worker (see [`crate::engine`]) unless
    /// [`RunOptions::compile_in`] is [`CompileIn::ThisProcess`].
    ///
    /// # Errors
    /// The tenants file (its first mistake, naming file, line and key), the state directory
    /// (held by another host), a server that cannot listen, timing options that contradict.
    pub async fn start(args: RunOptions) -> Result<Self, RunError> {
        // Read once for what `run` settles at start; the fleet reads it again on every reload.
        let file = args.config.as_deref().map(Config::load).transpose()?;
        let host = host_settings(&args.settings, file.as_ref())?;
        let settings = Settings::new(&args, &host, file.as_ref())?;
        // Before the runtime: its compiles are counted.
        let recorder = args
            .metrics_addr
            .map(|_| metrics::install())
            .transpose()
            .map_err(RunError::Metrics)?;
        let runtime = runtime_config_in(
            args.compile_in,
            settings.compile_limits.clone(),
            settings.compile_cache.clone(),
            settings.fuel,
        )
        .and_then(|config| {
            Ok(Runtime::new(RuntimeConfig {
                compute: settings.compute,
                ..config
            })?)
        })?;
        let identities = Identities::new(&args.aws).await;
        let config = host_config(&args, &host);
        if config.renew_interval >= config.lease_ttl {
            return Err(RunError::Timing {
                renew: config.renew_interval,
                ttl: config.lease_ttl,
            });
        }
        let deploys_need = DeploysNeed {
            dynamo_leases: settings.leases.kind == LeaseStoreKind::Dynamodb,
            create_table: settings.leases.create_table,
            keep: settings.keep_versions,
        };
        let fleet = Fleet::new(
            Host::new(identities.base().kinesis.clone(), config),
            identities,
            runtime,
            TenantSources {
                config_path: args.config.clone(),
                cli_components: args.components.clone(),
            },
            settings.leases,
            Kept::new(&settings.state_dir, settings.keep_versions),
            args.recent_errors.clone(),
        );
        fleet.check_config().map_err(RunError::Tenants)?;
        share_deploys(&fleet, &host, &deploys_need).await?;
        // Locked for as long as this host runs: a second host on the same directory is refused.
        // Opened once the config is known to load, before anything is read from it or written.
        let state_dir = StateDir::open(&settings.state_dir)?;
        tracing::info!(state_dir = %state_dir.root().display(), "state directory");
        // Before the first load: readiness says the host is still loading, and the metrics count
        // the first compiles.
        let admin = match args.admin_addr {
            Some(addr) => {
                let max_upload = settings.compile_limits.max_bytes;
                let owner = &fleet.host().config().owner_id;
                let mut options = admin_options(&args, addr, &state_dir, owner, max_upload)?;
                // Tenant tokens live where every host of the fleet reads them: beside the
                // fleet's desired state when deploys are the fleet's, else in the state
                // directory.
                let tenant_tokens: Arc<dyn TokenStore> = match fleet.desired_table() {
                    Some(table) => Arc::new(DynamoTokens::new(table)),
                    None => Arc::new(FileTokens::new(state_dir.root())),
                };
                tracing::info!(store = %tenant_tokens.describe(), "tenant tokens");
                options.tenant_tokens = Some(tenant_tokens);
                Some(admin::serve(options, Arc::new(fleet.clone())).await?)
            }
            None => None,
        };
        let metrics = match (args.metrics_addr, recorder) {
            (Some(addr), Some(handle)) => Some(
                metrics::serve(addr, handle, fleet.clone())
                    .await
                    .map_err(RunError::Metrics)?,
            ),
            _ => None,
        };
        let mut reloads = JoinSet::new();
        let first = {
            let fleet = fleet.clone();
            reloads.spawn(async move { fleet.reload().await })
        };
        Ok(Self {
            starting: Some(first.id()),
            probing: tokio::spawn(probe(fleet.clone())),
            reads: fleet.join_fleet_reads(),
            following: None,
            fleet,
            state_dir,
            admin,
            metrics,
            reloads,
        })
    }

    /// The host's control surface: what the admin API calls (status, seek, pause, deploy,
    /// reload, rollback, ...), through [`crate::admin::control::Control`].
    pub fn control(&self) -> &Fleet {
        &self.fleet
    }

    /// Where the admin API listens (the port chosen when asked for port 0), if it does.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(HttpServer::local_addr)
    }

    /// Keeps the host running until `stop` completes, then stops it: the servers first, then
    /// every app (calls finished, checkpoints flushed, leases released).
    ///
    /// # Errors
    /// No component could be started by the first load.
    pub async fn run_until(self, stop: impl Future<Output = ()> + Send) -> Result<(), RunError> {
        self.serve(Events::Until(std::pin::pin!(stop))).await
    }

    /// Reloads on file changes (and signals) until told to stop, then stops.
    async fn serve(mut self, mut events: Events<'_>) -> Result<(), RunError> {
        let fleet = self.fleet.clone();
        let mut files = Files::new(&fleet);
        let outcome = loop {
            tokio::select! {
                Some(done) = self.reloads.join_next_with_id() => {
                    let first_load = done.as_ref().map(|(id, _)| Some(*id) == self.starting).unwrap_or(false);
                    report_reload(done.map(|(_, result)| result));
                    // The config may list other files now.
                    files.follow(&fleet);
                    if first_load {
                        self.starting = None;
                        if let Err(error) = first_load_done(&fleet) {
                            break Err(error);
                        }
                        // Over what the tenants file loaded: the fleet's live versions.
                        self.following = Some(tokio::spawn({
                            let fleet = fleet.clone();
                            async move { fleet.follow_desired_state().await }
                        }));
                        // With the tenants loaded: a redrive draws on their write quotas.
                        tokio::spawn({
                            let fleet = fleet.clone();
                            async move { fleet.resume_redrives().await }
                        });
                    }
                }
                changed = files.changed() => {
                    tracing::info!(files = ?changed, "files changed: reloading");
                    let fleet = fleet.clone();
                    self.reloads.spawn(async move { fleet.reload().await });
                }
                event = events.next() => match event {
                    Received::Stop(name) => {
                        tracing::info!(signal = name, "stopping: finishing calls, flushing checkpoints, releasing leases");
                        break Ok(());
                    }
                    Received::Resume => resume(&fleet),
                    Received::Reload => {
                        tracing::info!("SIGHUP: reading the config and component files again");
                        let fleet = fleet.clone();
                        self.reloads.spawn(async move { fleet.reload().await });
                    }
                },
            }
        };
        self.reloads.abort_all();
        self.probing.abort();
        if let Some(following) = self.following.take() {
            following.abort();
        }
        for server in self.admin.into_iter().chain(self.metrics) {
            stop_server(server).await;
        }
        stop(&fleet, &mut events).await;
        // Withdrawn once nothing is read any more, so no host reads faster too early.
        if let Some(reads) = self.reads {
            if reads.is_finished() {
                if let Ok(reads) = reads.await {
                    reads.stop().await;
                }
            } else {
                reads.abort();
            }
        }
        drop(self.state_dir);
        outcome
    }
}

/// What the first load left running: an error when nothing runs.
fn first_load_done(fleet: &Fleet) -> Result<(), RunError> {
    fleet.first_load_done();
    let apps = fleet.with_tenants(|t| t.values().map(|t| t.components.len()).sum::<usize>());
    let left_out = fleet.not_started();
    if apps == 0 {
        return Err(RunError::NothingStarted {
            reasons: left_out.join("; "),
        });
    }
    if left_out.is_empty() {
        tracing::info!(apps, "every tenant is loaded");
    } else {
        tracing::warn!(
            apps,
            not_started = left_out.len(),
            "partial start: {apps} components running; not started: {}",
            left_out.join("; ")
        );
    }
    Ok(())
}

/// How the admin API is served: the token (made at the first start), TLS, names, the largest
/// upload (the compile size bound), and the audit file in the state directory.
fn admin_options(
    args: &RunOptions,
    addr: std::net::SocketAddr,
    state_dir: &StateDir,
    owner: &str,
    max_upload: usize,
) -> Result<AdminOptions, RunError> {
    let token = match (&args.admin_token, &args.admin_token_file) {
        (Some(_), Some(file)) => {
            return Err(RunError::TwoTokens {
                file: file.clone(),
                variable: TOKEN_ENV,
            });
        }
        (Some(token), None) => token.clone(),
        (None, file) => {
            let token_path = file.clone().unwrap_or_else(|| state_dir.token_path());
            let (token, created) = AdminToken::load_or_create(&token_path)?;
            if created {
                tracing::info!(file = %token_path.display(), "admin token made (mode 0600)");
            }
            token
        }
    };
    let tls = args
        .admin_tls_cert
        .clone()
        .zip(args.admin_tls_key.clone())
        .map(|(cert, key)| TlsFiles { cert, key });
    Ok(AdminOptions {
        addr,
        allow_remote: args.allow_remote_admin,
        tls,
        token,
        hosts: args.admin_hosts.clone(),
        max_upload,
        audit: AuditLog::new(owner, Some(AuditFile::new(state_dir.root()))),
        tenant_tokens: None,
    })
}

fn report_reload(done: Result<Result<Vec<Deployed>, ControlError>, tokio::task::JoinError>) {
    match done {
        Ok(Ok(deployed)) => {
            for d in deployed {
                tracing::debug!(tenant = %d.tenant, app = %d.app, version = %d.version, "deployed");
            }
        }
        // Logged where it happened; the running versions go on.
        Ok(Err(_)) => {}
        Err(error) if error.is_cancelled() => {}
        Err(error) => tracing::error!(error = %error, "a reload failed"),
    }
}

/// The files whose change reloads the fleet: the tenants file and every component file it
/// lists. Without a watch (a directory that cannot be watched) the host runs on, and SIGHUP or
/// the admin API still reload.
struct Files {
    watched: Vec<PathBuf>,
    watch: Option<FileWatch>,
}

impl Files {
    fn new(fleet: &Fleet) -> Self {
        let mut files = Self {
            watched: Vec::new(),
            watch: None,
        };
        files.follow(fleet);
        files
    }

    /// Watches the fleet's files, if they changed since the last call.
    fn follow(&mut self, fleet: &Fleet) {
        let paths = fleet.watched_paths();
        if paths == self.watched {
            return;
        }
        self.watch = match FileWatch::new(&paths) {
            Ok(watch) => Some(watch.quiet_for(FILE_QUIET)),
            Err(error) => {
                tracing::warn!(
                    "not watching files (SIGHUP and the admin API still reload): {error:#}"
                );
                None
            }
        };
        self.watched = paths;
    }

    async fn changed(&mut self) -> Vec<PathBuf> {
        match &mut self.watch {
            Some(watch) => watch.changed().await,
            None => std::future::pending().await,
        }
    }
}

/// Probes the services the host depends on, every few seconds, for readiness.
async fn probe(fleet: Fleet) {
    let probing = async {
        loop {
            fleet.probe().await;
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
    };
    // The console's plots: one sample a second, whatever the probes do.
    let sampling = async {
        let mut every = tokio::time::interval(crate::fleet::HISTORY_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            fleet.sample_history();
        }
    };
    tokio::join!(probing, sampling);
}

/// Stops the admin API (and the metrics endpoint) first, so that nothing is deployed while
/// the apps stop; a request under way gets a moment to be answered.
async fn stop_server(server: HttpServer) {
    match tokio::time::timeout(SERVER_GRACE, server.shutdown()).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!("{:#}", anyhow::Error::from(error)),
        Err(_) => tracing::warn!(grace = ?SERVER_GRACE, "a server did not stop in time"),
    }
}

/// Stops every app at once; with signals, a second SIGINT meanwhile exits without waiting.
async fn stop(fleet: &Fleet, events: &mut Events<'_>) {
    let Events::Signals(signals) = events else {
        fleet.shutdown().await;
        return;
    };
    tokio::select! {
        () = fleet.shutdown() => {}
        () = signals.interrupt() => {
            eprintln!("interrupted again: exiting without flushing checkpoints");
            std::process::exit(130);
        }
    }
}

/// SIGUSR1: every quarantined tenant goes on.
fn resume(fleet: &Fleet) {
    fleet.with_tenants(|tenants| {
        for run in tenants.values().filter(|t| t.tenant.is_quarantined()) {
            run.tenant.lift_quarantine();
        }
    });
}

/// The host's settings: those `given` (the flags, or an embedder's), with their old spellings
/// folded in (each one warned about), over the tenants file's `[host]`.
///
/// # Errors
/// An old flag beside its new one, or a value no host can run with.
fn host_settings(given: &HostSettings, file: Option<&Config>) -> Result<HostSettings, RunError> {
    let mut given = given.clone();
    for deprecation in given.fold_deprecated()? {
        deprecation.warn();
    }
    given.check().map_err(RunError::Setting)?;
    Ok(given.over(file.map(|c| c.host().clone()).unwrap_or_default()))
}

/// The Kinesis side's configuration: `settings` over the built-in defaults, with this host's
/// owner id and rollout policy.
fn host_config(args: &RunOptions, settings: &HostSettings) -> HostConfig {
    let defaults = HostConfig::default();
    HostConfig {
        owner_id: args.owner_id.clone().unwrap_or(defaults.owner_id.clone()),
        rollout: RolloutPolicy {
            calls: args.rollout_calls,
            margin: args.rollout_margin,
            // With fleet deploys, one judge decides for every host from all their counts.
            local_verdicts: settings.component_bucket.is_none(),
        },
        ..settings.host_config(defaults)
    }
}

/// What `run` settles once at start: where leases live, how components compile, where the
/// state is kept.
struct Settings {
    leases: LeaseSettings,
    state_dir: PathBuf,
    keep_versions: usize,
    compile_limits: CompileLimits,
    compile_cache: Option<PathBuf>,
    /// Whether the engine meters fuel: when the tenants file sets `fuel` anywhere at start.
    fuel: bool,
    /// Where guest calls run.
    compute: Compute,
}

impl Settings {
    /// `host` (the flags over the file), with what only `args` gives: whether the lease table
    /// template was a flag, and the compile cache (`--compile-cache`, `--no-compile-cache`,
    /// over the file's `compile_cache`, over the user's cache directory).
    fn new(
        args: &RunOptions,
        host: &HostSettings,
        config: Option<&Config>,
    ) -> Result<Self, RunError> {
        Ok(Self {
            leases: LeaseSettings {
                kind: host.lease_store.unwrap_or(LeaseStoreKind::Memory),
                template: (host.lease_table.clone())
                    .unwrap_or_else(|| DEFAULT_TABLE_TEMPLATE.to_owned()),
                template_from_flag: args.settings.lease_table.is_some(),
                create_table: host.create_lease_table.unwrap_or(false),
            },
            compile_limits: host.compile_limits(),
            compile_cache: args.compile.cache_dir(host.compile_cache.as_ref()),
            fuel: config.is_some_and(Config::uses_fuel),
            compute: host
                .compute_threads
                .map_or_else(Compute::pool, |threads| Compute::Pool {
                    threads: usize::from(threads),
                }),
            state_dir: (host.state_dir.clone())
                .or_else(state::default_dir)
                .ok_or(RunError::NoStateDir)?,
            keep_versions: host.keep_versions.unwrap_or(DEFAULT_KEEP),
        })
    }
}

/// Makes the host's deploys the fleet's when the tenants file names a component bucket: its
/// desired state is kept beside the lease tables, so DynamoDB leases are required.
async fn share_deploys(
    fleet: &Fleet,
    host: &HostSettings,
    need: &DeploysNeed,
) -> Result<(), RunError> {
    let Some(bucket) = host.component_bucket.as_deref() else {
        return Ok(());
    };
    if !need.dynamo_leases {
        return Err(RunError::FleetDeploys(
            "`component_bucket` needs `lease_store = \"dynamodb\"`: the fleet's desired state \
             is kept beside its lease tables"
                .to_owned(),
        ));
    }
    let table = host.desired_table.as_deref().unwrap_or(DESIRED_TABLE);
    fleet
        .share_deploys(bucket, table, need.create_table, need.keep)
        .await
        .map_err(|error| RunError::FleetDeploys(one_line(&error)))
}

/// What [`share_deploys`] takes of the settings, which the fleet has taken by then.
struct DeploysNeed {
    dynamo_leases: bool,
    create_table: bool,
    keep: usize,
}

/// The signals `run` acts on, installed before anything else starts.
struct Signals {
    terminate: Signal,
    interrupt: Signal,
    resume: Signal,
    reload: Signal,
}

/// What a running host acts on besides its files: signals (`run`), or an embedder's stop.
enum Events<'a> {
    Signals(&'a mut Signals),
    Until(Pin<&'a mut (dyn Future<Output = ()> + Send)>),
}

impl Events<'_> {
    async fn next(&mut self) -> Received {
        match self {
            Self::Signals(signals) => signals.next().await,
            Self::Until(stop) => {
                stop.as_mut().await;
                Received::Stop("stop")
            }
        }
    }
}

enum Received {
    Stop(&'static str),
    Resume,
    Reload,
}

impl Signals {
    fn install() -> Result<Self, RunError> {
        let install = |kind, name| {
            signal(kind).map_err(|source| RunError::Signal {
                signal: name,
                source,
            })
        };
        Ok(Self {
            terminate: install(SignalKind::terminate(), "SIGTERM")?,
            interrupt: install(SignalKind::interrupt(), "SIGINT")?,
            resume: install(SignalKind::user_defined1(), "SIGUSR1")?,
            reload: install(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    async fn next(&mut self) -> Received {
        tokio::select! {
            _ = self.terminate.recv() => Received::Stop("SIGTERM"),
            _ = self.interrupt.recv() => Received::Stop("SIGINT"),
            _ = self.resume.recv() => Received::Resume,
            _ = self.reload.recv() => Received::Reload,
        }
    }

    async fn interrupt(&mut self) {
        self.interrupt.recv().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_wins_over_the_file_which_wins_over_the_default() -> anyhow::Result<()> {
        let file = crate::config::Config::parse(
            std::path::Path::new("tenants.toml"),
            "[host]\nlease_ttl = \"20s\"\nrenew_interval = \"5s\"\nget_records_limit = 500\n[[tenants]]\nname = \"a\"\ncomponents = [\"a.wasm\"]",
        )?;
        let run = RunOptions {
            components: vec![PathBuf::from("x.wasm")],
            settings: HostSettings {
                lease_ttl: Some("30s".parse()?),
                ..HostSettings::default()
            },
            ..RunOptions::default()
        };
        let config = host_config(&run, &host_settings(&run.settings, Some(&file))?);
        assert_eq!(config.lease_ttl, Duration::from_secs(30));
        assert_eq!(config.renew_interval, Duration::from_secs(5));
        assert_eq!(config.reader.get_records_limit, 500);
        assert_eq!(config.shutdown_grace, HostConfig::default().shutdown_grace);
        let bare = host_config(&run, &host_settings(&run.settings, None)?);
        assert_eq!(bare.renew_interval, HostConfig::default().renew_interval);
        Ok(())
    }

    #[test]
    fn the_compile_cache_is_the_flag_s_then_the_file_s_and_none_when_turned_off()
    -> anyhow::Result<()> {
        let file = crate::config::Config::parse(
            std::path::Path::new("/etc/ruststream/tenants.toml"),
            "[host]\ncompile_cache = \"/var/cache/file\"\n[[tenants]]\nname = \"a\"\ncomponents = [\"a.wasm\"]",
        )?;
        let cache = |compile: CompileCache| -> anyhow::Result<Option<PathBuf>> {
            let run = RunOptions {
                compile,
                settings: HostSettings {
                    state_dir: Some(PathBuf::from("/var/lib/ruststream")),
                    ..HostSettings::default()
                },
                ..RunOptions::default()
            };
            let host = host_settings(&run.settings, Some(&file))?;
            Ok(Settings::new(&run, &host, Some(&file))?.compile_cache)
        };
        let flag = CompileCache {
            compile_cache: Some(PathBuf::from("/var/cache/flag")),
            no_compile_cache: false,
        };
        assert_eq!(cache(flag)?, Some(PathBuf::from("/var/cache/flag")));
        assert_eq!(
            cache(CompileCache::default())?,
            Some(PathBuf::from("/var/cache/file"))
        );
        let off = CompileCache {
            compile_cache: None,
            no_compile_cache: true,
        };
        assert_eq!(cache(off)?, None);
        Ok(())
    }

    #[test]
    fn an_old_flag_still_sets_its_setting_but_not_beside_the_new_one() -> anyhow::Result<()> {
        let old = RunOptions {
            settings: HostSettings {
                lease_ttl_ms: Some(30_000),
                ..HostSettings::default()
            },
            ..RunOptions::default()
        };
        let config = host_config(&old, &host_settings(&old.settings, None)?);
        assert_eq!(config.lease_ttl, Duration::from_secs(30));
        let both = HostSettings {
            lease_ttl: Some("30s".parse()?),
            ..old.settings.clone()
        };
        let error = host_settings(&both, None).expect_err("given twice");
        assert!(
            error
                .to_string()
                .contains("--lease-ttl-ms and --lease-ttl are both given"),
            "{error}"
        );
        let zero = HostSettings {
            poll_interval: Some("0s".parse()?),
            ..HostSettings::default()
        };
        let error = host_settings(&zero, None).expect_err("zero");
        assert!(
            error.to_string().starts_with("--poll-interval: "),
            "{error}"
        );
        Ok(())
    }
}
