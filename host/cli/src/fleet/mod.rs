//! The tenants a running host serves, and the one path every change to them takes: the first
//! start, a changed file, SIGHUP and an upload through the admin API all end in
//! [`Fleet::reload`] or [`Fleet::deploy`].
//!
//! A new version is loaded (compiled in the bounded compile worker, or taken from the cache of
//! compiled artifacts) and checked like a first load before anything changes; a refused version
//! leaves the running one serving, and the refusal is logged and kept for status. Tenants load
//! side by side, so a slow compile delays nobody else. A tenant whose grants or limits changed
//! is stopped (checkpoints flushed, leases released) and started again under its new settings,
//! with the same lease stores.

mod control;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use ruststream_host::{
    Deployment, DynamoLeaseStore, Host, LeaseStore, MemoryLeaseStore, RunningApp, TableTemplate,
};
use ruststream_runtime::{
    Clock as _, LoadedComponent, LogSink, Runtime, SystemClock, Tenant, content_hash,
    escape_controls, one_line,
};
use tokio::task::JoinSet;

use crate::admin::control::ControlError;
use crate::admin::model::Deployed;
use crate::args::LeaseStoreKind;
use crate::config::{ComponentSource, Config, OperatorConfig};
use crate::identity::{Clients, Identities, Role};

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
    pub create_table: bool,
}

/// What the config (or the command line) asks to run.
struct Wanted {
    tenants: Vec<WantedTenant>,
}

struct WantedTenant {
    tenant: Arc<Tenant>,
    /// Everything of its section but the component list: a change restarts the tenant.
    settings: String,
    /// Its operator settings for its components' subscriptions.
    operator: OperatorConfig,
    /// The role its AWS calls assume (part of `settings` too).
    role: Option<Role>,
    components: Vec<PathBuf>,
    /// Where the tenants file names each of `components` (none without a file).
    sources: Vec<ComponentSource>,
}

/// The tenants running on a host.
#[derive(Clone)]
pub(crate) struct Fleet {
    inner: Arc<Inner>,
}

struct Inner {
    host: Host,
    identities: Identities,
    runtime: Runtime,
    config_path: Option<PathBuf>,
    cli_components: Vec<PathBuf>,
    leases: LeaseSettings,
    state: Mutex<State>,
    /// One reload at a time: two would race to swap the same app.
    reloading: tokio::sync::Mutex<()>,
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
}

pub(crate) struct TenantRun {
    pub tenant: Arc<Tenant>,
    settings: String,
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

impl Fleet {
    pub(crate) fn new(
        host: Host,
        identities: Identities,
        runtime: Runtime,
        config_path: Option<PathBuf>,
        cli_components: Vec<PathBuf>,
        leases: LeaseSettings,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                host,
                identities,
                runtime,
                config_path,
                cli_components,
                leases,
                state: Mutex::default(),
                reloading: tokio::sync::Mutex::new(()),
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
        let run = self
            .state()
            .tenants
            .get(tenant)
            .map(|t| t.tenant.clone())
            .ok_or_else(|| ControlError::UnknownTenant(tenant.to_owned()))?;
        self.load_version(&run, component, wasm, None).await
    }

    /// Returns app `app` of `tenant` to the version its last swap replaced.
    ///
    /// # Errors
    /// When the tenant or app is unknown, or the app has no earlier version.
    pub(crate) fn roll_back(&self, tenant: &str, app: &str) -> Result<Deployed, ControlError> {
        let state = self.state();
        let run = state
            .tenants
            .get(tenant)
            .ok_or_else(|| ControlError::UnknownTenant(tenant.to_owned()))?;
        let running = run
            .components
            .values()
            .find(|c| c.app.name() == app)
            .ok_or_else(|| ControlError::UnknownApp {
                tenant: tenant.to_owned(),
                app: app.to_owned(),
            })?;
        running.app.roll_back("asked by an operator").map_err(|_| {
            ControlError::NothingToRollBack {
                tenant: tenant.to_owned(),
                app: app.to_owned(),
            }
        })?;
        Ok(deployed(tenant, &running.app, true))
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
            TableTemplate::new(&self.inner.leases.template, 1, components)?;
            let tenant = Arc::new(Tenant::trusted("default"));
            return Ok(Wanted {
                tenants: vec![WantedTenant {
                    tenant,
                    settings: String::new(),
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
        let busiest = config.tenants.iter().map(|t| t.components.len()).max();
        // Checked again on every reload: the names of the tables must stay distinct.
        TableTemplate::new(
            &self.inner.leases.template,
            config.tenants.len(),
            busiest.unwrap_or(0),
        )?;
        let tenants = config
            .tenants
            .iter()
            .map(|section| {
                let operator = section.operator_settings();
                let role = section.role();
                WantedTenant {
                    tenant: Arc::new(config.tenant(section)),
                    settings: format!(
                        "{:?} {:?} {:?} {:?} {:?} {operator:?} {role:?}",
                        section.subscribe,
                        section.publish,
                        section.quarantine_after,
                        section.limits,
                        config.defaults
                    ),
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
                            let gone: Vec<String> = run
                                .components
                                .keys()
                                .filter(|c| !listed.contains(c))
                                .cloned()
                                .collect();
                            for component in gone {
                                tracing::info!(tenant = %name, component = %component, "component no longer configured: stopping it");
                                stopping.extend(run.components.remove(&component).map(|c| c.app));
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
        stop_apps(stopping.clone()).await;
        self.state()
            .stopping
            .retain(|app| !stopping.iter().any(|done| Arc::ptr_eq(app, done)));
    }

    /// Loads the tenant's changed components, one after another.
    async fn load_tenant(&self, wanted: WantedTenant) -> Vec<Deployed> {
        let tenant = {
            let mut state = self.state();
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
                });
            run.configured = wanted.components.clone();
            run.tenant.clone()
        };
        let mut deployed = Vec::new();
        for (slot, path) in wanted.components.iter().enumerate() {
            let name = stem(path);
            let source = wanted.sources.get(slot);
            let bytes = match self.read_if_changed(&tenant, &name, path, source).await {
                Ok(Some(bytes)) => bytes,
                Ok(None) => continue,
                Err(reason) => {
                    self.refuse(tenant.name(), &name, reason, None);
                    continue;
                }
            };
            let hash = content_hash(&bytes);
            if let Ok(done) = self.load_version(&tenant, &name, bytes, Some(hash)).await {
                deployed.push(done);
            }
        }
        deployed
    }

    /// The file's bytes, unless they are what was last seen at this path. Errors name the
    /// file as the tenants file does (`source`), or by its path.
    async fn read_if_changed(
        &self,
        tenant: &Tenant,
        name: &str,
        path: &Path,
        source: Option<&ComponentSource>,
    ) -> Result<Option<Vec<u8>>, String> {
        let shown = source.map_or_else(|| path.display().to_string(), ToString::to_string);
        let max = self.inner.runtime.config().compile.limits.max_bytes;
        let size = tokio::fs::metadata(path)
            .await
            .map_err(|e| format!("cannot read {shown}: {e}"))?
            .len();
        if size > max as u64 {
            return Err(format!(
                "{shown} is {size} bytes, more than the {max} a component may have"
            ));
        }
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|e| format!("cannot read {shown}: {e}"))?;
        let hash = content_hash(&bytes);
        let unchanged = self.with_tenants(|tenants| {
            tenants
                .get(tenant.name())
                .is_some_and(|t| t.has_seen(name, &hash))
        });
        Ok((!unchanged).then_some(bytes))
    }

    /// Loads one version and makes it live: swapped into the app the component runs, or
    /// started as a new app.
    async fn load_version(
        &self,
        tenant: &Arc<Tenant>,
        name: &str,
        bytes: Vec<u8>,
        file_hash: Option<String>,
    ) -> Result<Deployed, ControlError> {
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
        result.map_err(|reason| self.refuse(tenant.name(), name, reason, file_hash))
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
            run.components.insert(
                name.to_owned(),
                ComponentRun {
                    app: Arc::new(started),
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
        tracing::error!(tenant = %tenant, component = %escape_controls(component),
            "version refused, the running one (if any) goes on: {reason}");
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
        ruststream_runtime::internals::lock(&self.inner.state)
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
                    "tenant `{name}`: component `{component}` failed to load: {}",
                    refused.reason
                ));
            }
        }
    }
    lines
}
