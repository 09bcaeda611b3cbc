//! The tenants a running host serves, and the one path every change to them takes: the first
//! start, a changed file, SIGHUP and an upload through the admin API all end in
//! `Fleet::reload` or `Fleet::deploy`.
//!
//! A new version is loaded (compiled in the bounded compile worker, or taken from the cache of
//! compiled artifacts) and checked like a first load before anything changes; a refused version
//! leaves the running one serving, and the refusal is logged and kept for status. Tenants load
//! side by side, so a slow compile delays nobody else. A tenant whose grants or limits changed
//! is stopped (checkpoints flushed, leases released) and started again under its new settings,
//! with the same lease stores.
//!
//! Every version that goes live is kept in the state directory with which one is live (see
//! `versions`), so a restart runs what was live: the configured file when its bytes changed
//! since the host last saw them, else the version that was live (an upload, a rollback).

mod control;
mod converge;
mod deploys;
mod history;

pub(crate) use history::SAMPLE_EVERY as HISTORY_EVERY;
mod judge;
mod reads;
mod redrives;
mod seeks;
mod shadows;
mod versions;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use ruststream_common::escape::{escape_controls, one_line};
use ruststream_kinesis::{
    Deployment, DynamoLeaseStore, Host, LeaseStore, MemoryLeaseStore, RunningApp,
    lease::TableTemplate,
};
use ruststream_runtime::{
    Clock as _, LoadedComponent, Runtime, SystemClock, Tenant, component::compile::content_hash,
    cpu::CpuUsage, log::LogSink,
};
use tokio::task::JoinSet;

use crate::admin::control::ControlError;
use crate::admin::model::{Deployed, VersionOrigin};
use crate::config::{
    ComponentSource, Config, LimitOverrides, OperatorConfig, TenantSection, component_file,
};
use crate::identity::{Clients, Identities, Role};
use crate::recent_errors::RecentErrors;
use crate::settings::LeaseStoreKind;
use crate::state::Kept;
use crate::state::redrives::RedriveRecords;
use crate::state::versions::VersionStore;

/// Where a version to load comes from, as the state directory records it once it is live.
#[derive(Debug, Clone)]
struct Source {
    how: VersionOrigin,
    /// The configured file's hash, when the host read the file for this load.
    file_hash: Option<String>,
    /// Whether the component is one the tenants file does not list; `None`: as recorded.
    upload_only: Option<bool>,
}

/// A component version that was refused, as status shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub reason: String,
    pub at_ms: u64,
    /// The hash of the refused file: the same bytes are not tried again until they change
    /// (a compile bomb is compiled once, not on every reload). Unset for refusals that may
    /// pass on a later try (a lease store that could not be reached).
    file_hash: Option<String>,
}

/// Where leases live, as the host section said at start.
pub(crate) struct LeaseSettings {
    pub kind: LeaseStoreKind,
    pub template: String,
    /// The template came from `--lease-table` (a mistake in it names the flag, not the file).
    pub template_from_flag: bool,
    pub create_table: bool,
}

/// What the config (or the command line) asks to run.
struct Wanted {
    tenants: Vec<WantedTenant>,
}

/// Everything of a tenant's section but its component list, and the file's `[defaults]`: a
/// change restarts the tenant. Compared by value, so a setting respelt (an old key written the
/// new way) is no change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TenantSettings {
    subscribe: Vec<String>,
    publish: Vec<String>,
    quarantine_after: Option<u32>,
    limits: LimitOverrides,
    defaults: LimitOverrides,
    operator: OperatorConfig,
    role: Option<Role>,
}

impl TenantSettings {
    fn of(config: &Config, section: &TenantSection) -> Self {
        Self {
            subscribe: section.subscribe.clone(),
            publish: section.publish.clone(),
            quarantine_after: section.quarantine_after,
            limits: section.limits.clone(),
            defaults: config.defaults.clone(),
            operator: section.operator_settings(),
            role: section.role(),
        }
    }
}

struct WantedTenant {
    tenant: Arc<Tenant>,
    /// What a change of restarts the tenant.
    settings: TenantSettings,
    /// Its operator settings for its components' subscriptions.
    operator: OperatorConfig,
    /// The role its AWS calls assume (in `settings` too).
    role: Option<Role>,
    components: Vec<PathBuf>,
    /// Where the tenants file names each of `components` (none without a file).
    sources: Vec<ComponentSource>,
}

/// The tenants running on a host, and the one path every change goes through (start, file
/// change, SIGHUP, upload, rollback). Cloning it is cheap: clones share the same fleet. It is
/// driven through [`Control`](crate::admin::control::Control), as the admin API drives it.
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<Inner>,
}

impl Fleet {
    /// What each tenant's calls used of the compute threads so far.
    pub(crate) fn cpu_usage(&self) -> Vec<CpuUsage> {
        self.inner.runtime.cpu_usage()
    }
}

struct Inner {
    host: Host,
    identities: Identities,
    runtime: Runtime,
    config_path: Option<PathBuf>,
    cli_components: Vec<PathBuf>,
    leases: LeaseSettings,
    /// The versions kept in the state directory, and which one each app runs.
    versions: VersionStore,
    /// The redrives the admin API started, kept in the state directory.
    kept_redrives: RedriveRecords,
    state: Mutex<State>,
    /// One reload (deploy, rollback) at a time: two would race to swap the same app.
    reloading: tokio::sync::Mutex<()>,
    /// The fleet's deploys, when a component bucket is configured: set once at start.
    deploys: std::sync::OnceLock<deploys::FleetDeploys>,
    /// What the console plots.
    history: history::History,
    /// The warnings and errors logged lately, for the console and `GET /v1/errors`.
    recent_errors: RecentErrors,
}

/// A lease store, with the role whose client a DynamoDB store calls with.
struct KeptStore {
    role: Option<Role>,
    store: Arc<dyn LeaseStore>,
}

#[derive(Default)]
struct State {
    tenants: BTreeMap<String, TenantRun>,
    /// By (tenant, app).
    stores: HashMap<(String, String), KeptStore>,
    config_error: Option<String>,
    /// Set once the first load is done.
    loaded: bool,
    /// The services the last probe could not reach, and why.
    unreachable: Vec<String>,
    /// Apps a reload is stopping: a shutdown meanwhile waits for them too (their checkpoints
    /// flushed, their leases released), even when it cancels the reload.
    stopping: Vec<Arc<RunningApp>>,
    /// Why the last version that went live could not be recorded in the state directory.
    state_error: Option<String>,
    /// The redrives started through the admin API, by id, and where each stands.
    redrives: BTreeMap<String, Arc<Mutex<ruststream_kinesis::redrive::RedriveReport>>>,
}

pub(crate) struct TenantRun {
    pub tenant: Arc<Tenant>,
    settings: TenantSettings,
    operator: OperatorConfig,
    role: Option<Role>,
    /// The host its apps run on when it has a role: the fleet's, calling with the role's client.
    role_host: Option<Host>,
    /// Running apps by component name.
    pub components: BTreeMap<String, ComponentRun>,
    /// Components whose last version was refused, by name.
    pub refused: BTreeMap<String, Refused>,
    /// Component files the config lists for the tenant.
    configured: Vec<PathBuf>,
    /// Where the tenants file names each configured component, by component name: what a
    /// line about the component says first.
    sources: BTreeMap<String, ComponentSource>,
}

impl TenantRun {
    /// How a line names component `name` of tenant `tenant`: by its place in the tenants file
    /// when the file lists it (as `check --config` does), else by its name.
    fn named(&self, tenant: &str, name: &str) -> String {
        self.sources.get(name).map_or_else(
            || format!("tenant `{tenant}`, component `{}`", escape_controls(name)),
            |source| source.named(tenant),
        )
    }
}

impl TenantRun {
    /// Whether the file of component `name` with `hash` was loaded or refused already.
    fn has_seen(&self, name: &str, hash: &str) -> bool {
        let running = self
            .components
            .get(name)
            .and_then(|c| c.file_hash.as_deref());
        let refused = self.refused.get(name).and_then(|r| r.file_hash.as_deref());
        running == Some(hash) || refused == Some(hash)
    }
}

pub(crate) struct ComponentRun {
    /// Shared with admin calls that outlive a look at the state (a seek awaits its shards).
    pub app: Arc<RunningApp>,
    /// The hash of the file last seen at its path: an unchanged file is not loaded again, so a
    /// reload does not undo an upload.
    file_hash: Option<String>,
}

/// Where a host's tenants come from: the tenants file, and the component files given on the
/// command line (one trusted tenant, `default`).
pub(crate) struct TenantSources {
    pub config_path: Option<PathBuf>,
    pub cli_components: Vec<PathBuf>,
}

impl Fleet {
    pub(crate) fn new(
        host: Host,
        identities: Identities,
        runtime: Runtime,
        sources: TenantSources,
        leases: LeaseSettings,
        kept: Kept,
        recent_errors: RecentErrors,
    ) -> Self {
        let Kept {
            versions,
            redrives: kept_redrives,
        } = kept;
        let TenantSources {
            config_path,
            cli_components,
        } = sources;
        Self {
            inner: Arc::new(Inner {
                host,
                identities,
                runtime,
                config_path,
                cli_components,
                leases,
                versions,
                kept_redrives,
                state: Mutex::default(),
                reloading: tokio::sync::Mutex::new(()),
                deploys: std::sync::OnceLock::new(),
                history: history::History::default(),
                recent_errors,
            }),
        }
    }

    pub(crate) fn host(&self) -> &Host {
        &self.inner.host
    }

    /// Files whose change calls for a reload: the config and every component it lists.
    pub(crate) fn watched_paths(&self) -> Vec<PathBuf> {
        let state = self.state();
        let components = state.tenants.values().flat_map(|t| t.configured.clone());
        let mut paths: Vec<PathBuf> = self.inner.config_path.iter().cloned().collect();
        paths.extend(components);
        paths.extend(self.inner.cli_components.iter().cloned());
        paths.sort();
        paths.dedup();
        paths
    }

    /// Reads the config and every component file again and applies what changed: new and
    /// changed components go live (or are refused, changing nothing), tenants and components
    /// no longer configured stop. Returns the versions that went live.
    ///
    /// # Errors
    /// [`ControlError::Config`] when the config cannot be read; nothing changes then.
    pub(crate) async fn reload(&self) -> Result<Vec<Deployed>, ControlError> {
        let _one_at_a_time = self.inner.reloading.lock().await;
        let wanted = match self.wanted() {
            Ok(wanted) => wanted,
            Err(error) => {
                let reason = format!("{error:#}");
                tracing::error!(config = ?self.inner.config_path, "config not reloaded: {reason}");
                self.state().config_error = Some(reason.clone());
                return Err(ControlError::Config(reason));
            }
        };
        self.state().config_error = None;
        self.retire(&wanted).await;
        let mut loads = JoinSet::new();
        for wanted in wanted.tenants {
            let fleet = self.clone();
            loads.spawn(async move { fleet.load_tenant(wanted).await });
        }
        let mut deployed = Vec::new();
        while let Some(joined) = loads.join_next().await {
            match joined {
                Ok(done) => deployed.extend(done),
                Err(error) => tracing::error!(error = %one_line(&error), "a tenant's load failed"),
            }
        }
        Ok(deployed)
    }

    /// Deploys `wasm` as component `component` of `tenant`: a new version of the app that
    /// component runs, or a new app.
    ///
    /// # Errors
    /// [`ControlError::UnknownTenant`], or [`ControlError::Refused`] with why; the running version
    /// goes on serving then.
    pub(crate) async fn deploy(
        &self,
        tenant: &str,
        component: &str,
        wasm: Vec<u8>,
    ) -> Result<Deployed, ControlError> {
        let _one_at_a_time = self.inner.reloading.lock().await;
        let (run, configured) = self
            .with_tenants(|tenants| {
                let run = tenants.get(tenant)?;
                let configured = run.configured.iter().any(|path| stem(path) == component);
                Some((run.tenant.clone(), configured))
            })
            .ok_or_else(|| ControlError::UnknownTenant(tenant.to_owned()))?;
        let source = Source {
            how: VersionOrigin::Upload,
            file_hash: None,
            upload_only: Some(!configured),
        };
        self.load_version(&run, component, wasm, source).await
    }

    /// Runs `f` over the running tenants (for status, seek, pause).
    pub(crate) fn with_tenants<T>(&self, f: impl FnOnce(&BTreeMap<String, TenantRun>) -> T) -> T {
        f(&self.state().tenants)
    }

    /// Marks the first load done: readiness no longer waits for it.
    pub(crate) fn first_load_done(&self) {
        self.state().loaded = true;
    }

    /// The configured components that run no version, each with why: what a partial start
    /// leaves out.
    pub(crate) fn not_started(&self) -> Vec<String> {
        not_started(&self.state().tenants)
    }

    /// What readiness reports without failing on it: tenants an operator paused.
    pub(crate) fn notices(&self) -> Vec<String> {
        let state = self.state();
        let paused = state.tenants.iter().filter_map(|(name, run)| {
            let reason = run.tenant.pause_reason()?;
            Some(format!("tenant `{name}` is paused ({reason})"))
        });
        paused.collect()
    }

    /// Why the host is not ready, one line per reason; empty when it is: still loading, a
    /// tenant quarantined, the config unreadable, a configured component that failed to load
    /// (and runs no earlier version), a subscription stopped by an error, Kinesis or DynamoDB
    /// unreachable.
    pub(crate) fn not_ready(&self) -> Vec<String> {
        let state = self.state();
        let mut reasons = Vec::new();
        if !state.loaded {
            reasons.push("components are still loading".to_owned());
        }
        reasons.extend(state.config_error.iter().map(|e| format!("config: {e}")));
        reasons.extend(state.unreachable.iter().cloned());
        reasons.extend(state.state_error.iter().cloned());
        reasons.extend(not_started(&state.tenants));
        for (name, run) in &state.tenants {
            if let Some(reason) = run.tenant.quarantine_reason() {
                reasons.push(format!(
                    "tenant `{name}` is quarantined ({reason}): its shards read nothing until it \
                     is resumed (`ruststream resume {name}`, or SIGUSR1)"
                ));
            }
            for running in run.components.values() {
                for subscription in running.app.status() {
                    if let Some(error) = subscription.error {
                        reasons.push(format!(
                            "tenant `{name}`, app `{}`, subscription `{}`: {error}",
                            running.app.name(),
                            subscription.subscriber
                        ));
                    }
                }
            }
        }
        reasons
    }

    /// Asks Kinesis, and DynamoDB when leases live there, for a trivial answer, and keeps
    /// what could not be reached for [`not_ready`](Self::not_ready).
    /// Takes a sample of what the console plots.
    pub(crate) fn sample_history(&self) {
        use crate::admin::control::Control as _;
        let now_ms = ruststream_runtime::Clock::now_ms(&ruststream_runtime::SystemClock);
        self.inner.history.sample(&self.status(), now_ms);
    }

    pub(crate) async fn probe(&self) {
        let timeout = std::time::Duration::from_secs(3);
        let mut unreachable = Vec::new();
        let base = self.inner.identities.base();
        let kinesis = base.kinesis.list_streams().limit(1).send();
        match tokio::time::timeout(timeout, kinesis).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => unreachable.push(format!("Kinesis: {}", one_line(&error))),
            Err(_) => unreachable.push(format!("Kinesis: no answer within {timeout:?}")),
        }
        if self.inner.leases.kind == LeaseStoreKind::Dynamodb {
            let dynamo = base.dynamo.list_tables().limit(1).send();
            match tokio::time::timeout(timeout, dynamo).await {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => unreachable.push(format!("DynamoDB: {}", one_line(&error))),
                Err(_) => unreachable.push(format!("DynamoDB: no answer within {timeout:?}")),
            }
        }
        self.state().unreachable = unreachable;
    }

    /// Stops every app at once, and waits for those a reload is stopping: calls finish,
    /// checkpoints are flushed, leases released.
    pub(crate) async fn shutdown(&self) {
        self.record_rollbacks().await;
        let apps: Vec<Arc<RunningApp>> = {
            let mut state = self.state();
            let mut apps = std::mem::take(&mut state.stopping);
            apps.extend(
                std::mem::take(&mut state.tenants)
                    .into_values()
                    .flat_map(|t| t.components.into_values().map(|c| c.app)),
            );
            apps
        };
        stop_apps(apps).await;
    }

    /// Reads the config as a reload would, changing nothing: a start refuses a config that
    /// could never load, where a reload keeps what runs.
    ///
    /// # Errors
    /// The config cannot be read or parsed, or its lease table template does not fit it.
    pub(crate) fn check_config(&self) -> anyhow::Result<()> {
        self.wanted().map(drop)
    }

    fn wanted(&self) -> anyhow::Result<Wanted> {
        let Some(path) = &self.inner.config_path else {
            let components = self.inner.cli_components.len();
            TableTemplate::new(&self.inner.leases.template, 1, components)
                .map_err(|e| anyhow::Error::new(e).context("--lease-table"))?;
            let tenant = Arc::new(Tenant::trusted("default"));
            return Ok(Wanted {
                tenants: vec![WantedTenant {
                    tenant,
                    settings: TenantSettings::default(),
                    operator: OperatorConfig::default(),
                    role: None,
                    components: self.inner.cli_components.clone(),
                    sources: Vec::new(),
                }],
            });
        };
        let config = Config::load(path)?;
        anyhow::ensure!(
            !config.uses_fuel() || self.inner.runtime.config().fuel,
            "config file {}: a tenant sets `fuel`, but this host started without fuel metering \
             (no tenant set it then): restart the host to meter fuel",
            path.display()
        );
        // Checked again on every reload: the names of the tables must stay distinct. Worded
        // as `check --config` words it when the template is the file's.
        let template = &self.inner.leases.template;
        if self.inner.leases.template_from_flag {
            let busiest = config.tenants.iter().map(|t| t.components.len()).max();
            TableTemplate::new(template, config.tenants.len(), busiest.unwrap_or(0))
                .map_err(|e| anyhow::Error::new(e).context("--lease-table"))?;
        } else {
            config.check_lease_table(path, template)?;
        }
        let tenants = config
            .tenants
            .iter()
            .map(|section| {
                let operator = section.operator_settings();
                let role = section.role();
                WantedTenant {
                    tenant: Arc::new(config.tenant(section)),
                    settings: TenantSettings::of(&config, section),
                    operator,
                    role,
                    components: section.components.clone(),
                    sources: section.sources.clone(),
                }
            })
            .collect();
        Ok(Wanted { tenants })
    }

    /// Stops tenants no longer configured or configured differently, and components no longer
    /// listed.
    async fn retire(&self, wanted: &Wanted) {
        let mut stopping: Vec<Arc<RunningApp>> = Vec::new();
        let mut retired = Vec::new();
        {
            let mut state = self.state();
            let names: Vec<String> = state.tenants.keys().cloned().collect();
            for name in names {
                let keep = wanted
                    .tenants
                    .iter()
                    .find(|w| w.tenant.name() == name)
                    .filter(|w| {
                        state
                            .tenants
                            .get(&name)
                            .is_some_and(|t| t.settings == w.settings)
                    });
                match keep {
                    Some(w) => {
                        let listed: Vec<String> = w.components.iter().map(|p| stem(p)).collect();
                        if let Some(run) = state.tenants.get_mut(&name) {
                            // Components that came by upload only were never listed: they stay.
                            let was: Vec<String> = run.configured.iter().map(|p| stem(p)).collect();
                            let gone: Vec<String> = run
                                .components
                                .keys()
                                .filter(|c| !listed.contains(c) && was.contains(c))
                                .cloned()
                                .collect();
                            for component in gone {
                                tracing::info!(tenant = %name, component = %component, "component no longer configured: stopping it");
                                stopping.extend(run.components.remove(&component).map(|c| c.app));
                                retired.push((name.clone(), component));
                            }
                            run.refused.retain(|c, _| listed.contains(c));
                        }
                    }
                    None => {
                        tracing::info!(tenant = %name, "tenant removed or reconfigured: stopping its apps");
                        if let Some(run) = state.tenants.remove(&name) {
                            stopping.extend(run.components.into_values().map(|c| c.app));
                        }
                    }
                }
            }
            state.stopping.extend(stopping.iter().cloned());
        }
        for (tenant, component) in retired {
            let recorded = self.inner.versions.retired(&tenant, &component);
            self.note_state(recorded.map_err(|e| e.to_string()));
        }
        stop_apps(stopping.clone()).await;
        self.state()
            .stopping
            .retain(|app| !stopping.iter().any(|done| Arc::ptr_eq(app, done)));
    }

    /// Loads the tenant's changed components, one after another.
    async fn load_tenant(&self, wanted: WantedTenant) -> Vec<Deployed> {
        let (tenant, fresh) = {
            let mut state = self.state();
            let fresh = !state.tenants.contains_key(wanted.tenant.name());
            let run = state
                .tenants
                .entry(wanted.tenant.name().to_owned())
                .or_insert_with(|| TenantRun {
                    tenant: wanted.tenant.clone(),
                    settings: wanted.settings.clone(),
                    operator: wanted.operator.clone(),
                    role: wanted.role.clone(),
                    role_host: None,
                    components: BTreeMap::new(),
                    refused: BTreeMap::new(),
                    configured: Vec::new(),
                    sources: BTreeMap::new(),
                });
            run.configured = wanted.components.clone();
            run.sources = wanted
                .components
                .iter()
                .zip(&wanted.sources)
                .map(|(path, source)| (stem(path), source.clone()))
                .collect();
            (run.tenant.clone(), fresh)
        };
        let mut deployed = Vec::new();
        for (slot, path) in wanted.components.iter().enumerate() {
            let name = stem(path);
            let written = wanted.sources.get(slot);
            deployed.extend(self.load_configured(&tenant, &name, path, written).await);
        }
        // Apps that came by upload only run again when their tenant (re)starts.
        if fresh {
            let configured: Vec<String> = wanted.components.iter().map(|p| stem(p)).collect();
            deployed.extend(self.start_fleet_uploads(&tenant, &configured).await);
            deployed.extend(self.restore_uploads(&tenant, &configured).await);
        }
        deployed
    }

    /// Loads configured component `name` from `path` if it changed: the file when its bytes
    /// are not what the host last saw there, else (when the component does not run yet) the
    /// version that was live. When the file is unreadable or refused and the component does
    /// not run, the version that was live runs.
    async fn load_configured(
        &self,
        tenant: &Arc<Tenant>,
        name: &str,
        path: &Path,
        written: Option<&ComponentSource>,
    ) -> Option<Deployed> {
        let running = self.with_tenants(|t| {
            t.get(tenant.name())
                .is_some_and(|t| t.components.contains_key(name))
        });
        let record = (!running)
            .then(|| self.inner.versions.live_under(tenant.name(), name))
            .flatten();
        let bytes = match self.read_file(path, written).await {
            Ok(bytes) => bytes,
            Err(reason) => {
                self.refuse(tenant.name(), name, reason, None);
                return self.restore_over_refusal(tenant, name, record?).await;
            }
        };
        let hash = content_hash(&bytes);
        if self.with_tenants(|t| {
            t.get(tenant.name())
                .is_some_and(|t| t.has_seen(name, &hash))
        }) {
            return None;
        }
        if !running
            && let Some(started) =
                (self.start_as_the_fleet_runs(tenant, name, Some(hash.clone()))).await
        {
            return started;
        }
        if let Some(record) = record
            .as_ref()
            .filter(|r| r.file_hash.as_deref() == Some(&hash) && r.live.as_deref() != Some(&hash))
        {
            tracing::info!(tenant = %tenant.name(), component = %name,
                "the file is what this host last saw: running the version that was live");
            if let Some(done) = self
                .restore(tenant, record.clone(), Some(hash.clone()))
                .await
            {
                return Some(done);
            }
        }
        let source = Source {
            how: VersionOrigin::File,
            file_hash: Some(hash.clone()),
            upload_only: Some(false),
        };
        match self.load_version(tenant, name, bytes, source).await {
            Ok(done) => Some(done),
            Err(_) => {
                let record = record.filter(|r| r.live.as_deref() != Some(&hash))?;
                self.restore_over_refusal(tenant, name, record).await
            }
        }
    }

    /// The file's bytes, within the compile size bound, read as `check --config` reads them.
    /// Errors name the file as the tenants file writes it (`written`), or by its path.
    async fn read_file(
        &self,
        path: &Path,
        written: Option<&ComponentSource>,
    ) -> Result<Vec<u8>, String> {
        let shown = written.map_or_else(
            || escape_controls(&path.display().to_string()).into_owned(),
            ComponentSource::shown_path,
        );
        let max = self.inner.runtime.config().compile.limits.max_bytes;
        component_file::read(path, &shown, max).await
    }

    /// Loads one version and makes it live: swapped into the app the component runs, or
    /// started as a new app.
    async fn load_version(
        &self,
        tenant: &Arc<Tenant>,
        name: &str,
        bytes: Vec<u8>,
        source: Source,
    ) -> Result<Deployed, ControlError> {
        let file_hash = source.file_hash.clone();
        // Kept once it is live; a copy only when the state directory does not have it yet.
        let hash = content_hash(&bytes);
        let keep = (!self.inner.versions.has(&hash)).then(|| bytes.clone());
        let log = LogSink::new();
        let loaded =
            LoadedComponent::from_bytes(&self.inner.runtime, name, bytes, tenant.policy(), &log)
                .await;
        let component = match loaded {
            Ok(component) => component,
            Err(error) => {
                let reason = one_line(&error);
                return Err(self.refuse(tenant.name(), name, reason, file_hash));
            }
        };
        let app = component.app().name.clone();
        let (host, clients, role) = match self.identity(tenant.name()).await {
            Ok(identity) => identity,
            Err(reason) => return Err(self.refuse(tenant.name(), name, reason, None)),
        };
        let store = match self.lease_store(tenant.name(), &app, &clients, role).await {
            Ok(store) => store,
            Err(error) => return Err(self.refuse(tenant.name(), name, format!("{error:#}"), None)),
        };
        let result = self.go_live(&host, tenant, name, component, store, file_hash.clone());
        let done = result.map_err(|reason| self.refuse(tenant.name(), name, reason, file_hash))?;
        self.record_live(&done, keep, &source).await;
        if !done.swapped
            && let Ok(app) = self.app(tenant.name(), &done.app)
        {
            self.restore_shadow(tenant, &app).await;
        }
        Ok(done)
    }

    /// The host, clients and role `tenant`'s apps run with: the host's own, or its role's.
    async fn identity(&self, tenant: &str) -> Result<(Host, Clients, Option<Role>), String> {
        let role = self
            .with_tenants(|tenants| tenants.get(tenant).map(|t| t.role.clone()))
            .ok_or_else(|| "the tenant was removed meanwhile".to_owned())?;
        let clients = self
            .inner
            .identities
            .for_tenant(tenant, role.as_ref())
            .await?;
        if role.is_none() {
            return Ok((self.inner.host.clone(), clients, role));
        }
        // One host per role tenant, so all its apps share its listings and read pacing.
        let mut state = self.state();
        let run = state
            .tenants
            .get_mut(tenant)
            .ok_or_else(|| "the tenant was removed meanwhile".to_owned())?;
        let host = run
            .role_host
            .get_or_insert_with(|| self.inner.host.with_kinesis(clients.kinesis.clone()))
            .clone();
        Ok((host, clients, role))
    }

    fn go_live(
        &self,
        host: &Host,
        tenant: &Arc<Tenant>,
        name: &str,
        component: LoadedComponent,
        store: Arc<dyn LeaseStore>,
        file_hash: Option<String>,
    ) -> Result<Deployed, String> {
        let mut state = self.state();
        let run = state
            .tenants
            .get_mut(tenant.name())
            .ok_or_else(|| "the tenant was removed meanwhile".to_owned())?;
        let app = component.app().name.clone();
        if let Some(other) = run
            .components
            .iter()
            .find(|(other, c)| other.as_str() != name && c.app.name() == app)
        {
            return Err(format!(
                "app `{app}` is already run by component `{}`",
                other.0
            ));
        }
        let settings = run
            .operator
            .for_subscriptions(&component.app().subscriptions);
        let swapped = if let Some(running) = run.components.get_mut(name) {
            let swapped = running
                .app
                .swap(component, settings)
                .map_err(|e| one_line(&e))?;
            running.file_hash = file_hash.or(running.file_hash.take());
            tracing::info!(tenant = %tenant.name(), component = %name, app = %app,
                version = %running.app.versions().current.version, kept = ?swapped.kept,
                started = ?swapped.started, stopped = ?swapped.stopped, "new version live");
            true
        } else {
            let mut deployment = Deployment::new(component, store).for_tenant(tenant.clone());
            deployment.settings = settings;
            let started = host.start(deployment).map_err(|e| one_line(&e))?;
            tracing::info!(tenant = %tenant.name(), component = %name, app = %app, "app started");
            let started = Arc::new(started);
            tokio::spawn(
                self.clone()
                    .follow_rollbacks(tenant.name().to_owned(), &started),
            );
            run.components.insert(
                name.to_owned(),
                ComponentRun {
                    app: started,
                    file_hash,
                },
            );
            false
        };
        run.refused.remove(name);
        let running = &run.components[name].app;
        Ok(deployed(tenant.name(), running, swapped))
    }

    /// Records a refused version for status and says so in the log.
    fn refuse(
        &self,
        tenant: &str,
        component: &str,
        reason: String,
        file_hash: Option<String>,
    ) -> ControlError {
        let named = self.with_tenants(|t| t.get(tenant).map(|run| run.named(tenant, component)));
        let named = named.unwrap_or_else(|| {
            format!(
                "tenant `{tenant}`, component `{}`",
                escape_controls(component)
            )
        });
        tracing::error!(tenant = %tenant, component = %escape_controls(component),
            "version refused, the running one (if any) goes on: {named}: {reason}");
        if let Some(run) = self.state().tenants.get_mut(tenant) {
            let at_ms = SystemClock.now_ms();
            run.refused.insert(
                component.to_owned(),
                Refused {
                    reason: reason.clone(),
                    at_ms,
                    file_hash,
                },
            );
        }
        ControlError::Refused {
            tenant: tenant.to_owned(),
            component: component.to_owned(),
            reason,
        }
    }

    /// The lease store of (tenant, app): the same one for every version and restart of the
    /// tenant within this process, so a memory store keeps its checkpoints across swaps.
    /// A DynamoDB store is made again when the tenant's role changed: its rows are in the
    /// table, and the new role's client must be the one writing them.
    async fn lease_store(
        &self,
        tenant: &str,
        app: &str,
        clients: &Clients,
        role: Option<Role>,
    ) -> anyhow::Result<Arc<dyn LeaseStore>> {
        let key = (tenant.to_owned(), app.to_owned());
        let memory = self.inner.leases.kind == LeaseStoreKind::Memory;
        if let Some(kept) = self.state().stores.get(&key)
            && (memory || kept.role == role)
        {
            return Ok(kept.store.clone());
        }
        let leases = &self.inner.leases;
        let store: Arc<dyn LeaseStore> = match leases.kind {
            LeaseStoreKind::Memory => Arc::new(MemoryLeaseStore::new()),
            LeaseStoreKind::Dynamodb => {
                let template = TableTemplate::new(&leases.template, 1, 1)?;
                let table = template.table(tenant, app);
                let store = DynamoLeaseStore::new(clients.dynamo.clone(), &table);
                if leases.create_table {
                    anyhow::Context::with_context(store.create_table_if_missing().await, || {
                        format!("creating lease table `{table}`")
                    })?;
                }
                Arc::new(store)
            }
        };
        tracing::debug!(tenant, app, lease_store = %store.describe(), "lease store");
        let mut state = self.state();
        let kept = state.stores.entry(key).or_insert_with(|| KeptStore {
            role: role.clone(),
            store: store.clone(),
        });
        if !memory && kept.role != role {
            *kept = KeptStore { role, store };
        }
        Ok(kept.store.clone())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        ruststream_common::sync::lock(&self.inner.state)
    }
}

fn deployed(tenant: &str, app: &RunningApp, swapped: bool) -> Deployed {
    let current = app.versions().current;
    Deployed {
        tenant: tenant.to_owned(),
        app: app.name().to_owned(),
        component: current.component,
        version: current.version,
        content_hash: current.content_hash,
        swapped,
    }
}

/// A component's name: its file's stem.
fn stem(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// Stops apps side by side, each flushing its checkpoints and releasing its leases.
pub(crate) async fn stop_apps(apps: Vec<Arc<RunningApp>>) {
    let mut stopping = JoinSet::new();
    for app in apps {
        stopping.spawn(async move {
            let name = app.name().to_owned();
            app.shutdown().await;
            tracing::info!(app = %name, "stopped");
        });
    }
    while stopping.join_next().await.is_some() {}
}

fn not_started(tenants: &BTreeMap<String, TenantRun>) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, run) in tenants {
        for (component, refused) in &run.refused {
            if !run.components.contains_key(component) {
                lines.push(format!(
                    "{}: {}",
                    run.named(name, component),
                    refused.reason
                ));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn settings(text: &str) -> TenantSettings {
        let config = Config::parse(Path::new("tenants.toml"), text).expect("a valid file");
        TenantSettings::of(&config, &config.tenants[0])
    }

    const TENANT: &str = "[[tenants]]\nname = \"acme\"\ncomponents = [\"a.wasm\"]\n";

    #[test]
    fn a_tenant_restarts_for_a_changed_value_not_a_respelt_one() {
        let old = settings(&format!("{TENANT}limits = {{ call_deadline_ms = 500 }}\n"));
        let respelt = settings(&format!(
            "{TENANT}limits = {{ call_deadline = \"500ms\" }}\n"
        ));
        assert_eq!(old, respelt);
        let reordered = settings(&format!(
            "{TENANT}limits = {{ memory_mib = 32, call_deadline = \"500ms\" }}\n"
        ));
        let reordered_back = settings(&format!(
            "{TENANT}limits = {{ call_deadline = \"500ms\", memory_mib = 32 }}\n"
        ));
        assert_eq!(reordered, reordered_back);
        let changed = settings(&format!(
            "{TENANT}limits = {{ call_deadline = \"600ms\" }}\n"
        ));
        assert_ne!(old, changed);
        let defaults = settings(&format!("[defaults]\nmemory_mib = 32\n{TENANT}"));
        assert_ne!(defaults, settings(TENANT));
        let granted = settings(&format!("{TENANT}publish = [\"ledger.dead\"]\n"));
        assert_ne!(granted, settings(TENANT));
    }
}
