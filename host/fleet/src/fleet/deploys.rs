//! This host's part in the fleet's deploys, when the tenants file names a component bucket:
//! a deploy through any host's admin API goes live there, then is recorded in the fleet's
//! desired state (its bytes stored before, so a recorded hash always has its bytes); every
//! host, this one included, polls the desired state and runs what it records.
//!
//! A host converges by the same path a local deploy takes (`Fleet::deploy`: loaded, checked,
//! swapped shard by shard with drain), so a deploy is as safe on the fleet as on one host. A
//! version this host refuses (its limits, say) is tried once per hash, and the refusal is
//! logged; the host keeps running what it ran. A host reads the desired state once before
//! its first load, so one started with an empty (or stale) state directory starts each app on
//! the fleet's live version, not on the tenants file's, and does not start an app the fleet
//! undeployed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ruststream_runtime::Tenant;
use ruststream_runtime::clock::{Clock as _, SystemClock};
use ruststream_runtime::escape::one_line;
use ruststream_runtime::sync::lock;

use super::{Fleet, Source};
use crate::admin::control::ControlError;
use crate::admin::model::{Deployed, FleetVersion, Undeployed, VersionOrigin};
use crate::desired::{AppDesired, AppId, ComponentBucket, DesiredError, DesiredTable, LiveVersion};

/// How often a host reads the desired state: the bound on how long a deploy takes to reach
/// every host, beyond its compile and swap.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// The fleet's stores, as this host uses them.
pub(crate) struct FleetDeploys {
    pub table: DesiredTable,
    pub bucket: ComponentBucket,
    /// Versions kept per app.
    pub keep: usize,
    /// Who this host is, in what it records.
    pub owner: String,
    /// `tenant/component@hash` this host refused: not tried again.
    refused: Mutex<HashSet<String>>,
    /// Whether the last poll failed (said once until one succeeds).
    failing: Mutex<bool>,
    /// What the last poll read, by (tenant, component): the revision and the live hash.
    read: Mutex<Read>,
}

/// What the last read of the desired state found.
#[derive(Default)]
struct Read {
    at_ms: u64,
    /// By (tenant, component).
    apps: HashMap<(String, String), AppDesired>,
}

impl FleetDeploys {
    /// This host's use of `table` and `bucket`.
    pub(crate) fn new(
        table: DesiredTable,
        bucket: ComponentBucket,
        keep: usize,
        owner: &str,
    ) -> Self {
        Self {
            table,
            bucket,
            keep,
            owner: owner.to_owned(),
            refused: Mutex::new(HashSet::new()),
            failing: Mutex::new(false),
            read: Mutex::new(Read::default()),
        }
    }
}

impl FleetDeploys {
    /// Reads every app's desired state, and keeps it as what was last read.
    async fn read(&self) -> Result<Vec<AppDesired>, DesiredError> {
        let states = self.table.all().await?;
        *lock(&self.read) = Read {
            at_ms: SystemClock.now_ms(),
            apps: (states.iter())
                .map(|state| {
                    let key = (state.app.tenant.clone(), state.component.clone());
                    (key, state.clone())
                })
                .collect(),
        };
        Ok(states)
    }
}

impl Fleet {
    /// Makes this host's deploys the fleet's: component bytes in `bucket`, what runs in the
    /// desired-state table `table` (made when `create_table`), `keep` versions kept per app;
    /// once, at start.
    ///
    /// # Errors
    /// When the table cannot be made.
    pub(crate) async fn share_deploys(
        &self,
        bucket: &str,
        table: &str,
        create_table: bool,
        keep: usize,
    ) -> Result<(), crate::desired::DesiredError> {
        let identities = &self.inner.identities;
        let table = DesiredTable::new(identities.base().dynamo.clone(), table);
        if create_table {
            table.create_if_missing().await?;
        }
        let bucket = ComponentBucket::new(identities.s3().clone(), bucket);
        let owner = self.host().config().owner_id.clone();
        let deploys = FleetDeploys::new(table, bucket, keep, &owner);
        // Read before the first load, so that it starts what the fleet runs.
        if let Err(error) = deploys.read().await {
            tracing::error!(table = %deploys.table.table(), error = %one_line(&error),
                "cannot read the fleet's desired state at start; starting the tenants file's components, then what it records once it can be read");
        }
        if self.inner.deploys.set(deploys).is_err() {
            tracing::warn!("the fleet's deploys were set up twice; the first stays");
        }
        Ok(())
    }

    /// Starts component `component` of `tenant`, which does not run yet, as the fleet runs it:
    /// its live version fetched from the bucket (`file_hash` recorded as the tenants file's
    /// version seen, so an unchanged file does not replace it). `Some(Some(_))` when it went
    /// live, `Some(None)` when the fleet undeployed the app (not started); `None` when the
    /// fleet records nothing for it or its version cannot run here: the caller starts its own
    /// version then, and the next poll tries the fleet's again.
    pub(super) async fn start_as_the_fleet_runs(
        &self,
        tenant: &Arc<Tenant>,
        component: &str,
        file_hash: Option<String>,
    ) -> Option<Option<Deployed>> {
        let shared = self.inner.deploys.get()?;
        let state = {
            let read = lock(&shared.read);
            let key = (tenant.name().to_owned(), component.to_owned());
            read.apps.get(&key).cloned()?
        };
        let Some(live) = &state.live else {
            tracing::info!(tenant = %tenant.name(), app = %state.app.app, component,
                revision = state.revision, "not started: the fleet undeployed it");
            return Some(None);
        };
        let bytes = match shared.bucket.get(&live.hash).await {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::error!(tenant = %tenant.name(), component, hash = %live.hash,
                    error = %one_line(&error), "cannot fetch the fleet's live version at start");
                return None;
            }
        };
        let source = Source {
            how: VersionOrigin::Upload,
            upload_only: Some(file_hash.is_none()),
            file_hash,
        };
        match self.load_version(tenant, component, bytes, source).await {
            Ok(done) => {
                tracing::info!(tenant = %tenant.name(), app = %done.app, component,
                    hash = %done.content_hash, revision = state.revision,
                    "started on the fleet's live version");
                Some(Some(done))
            }
            // Refused, with why, as any load is; what the caller starts stays.
            Err(_) => None,
        }
    }

    /// Starts the fleet's apps of `tenant` whose components the tenants file does not list
    /// (`configured`) and that do not run here: what a deploy of a new app left in the desired
    /// state.
    pub(super) async fn start_fleet_uploads(
        &self,
        tenant: &Arc<Tenant>,
        configured: &[String],
    ) -> Vec<Deployed> {
        let Some(shared) = self.inner.deploys.get() else {
            return Vec::new();
        };
        let components: Vec<String> = (lock(&shared.read).apps.keys())
            .filter(|(t, c)| t == tenant.name() && !configured.contains(c))
            .map(|(_, c)| c.clone())
            .collect();
        let mut deployed = Vec::new();
        for component in components {
            let runs = self.with_tenants(|t| {
                t.get(tenant.name())
                    .is_some_and(|t| t.components.contains_key(&component))
            });
            if !runs {
                let started = self.start_as_the_fleet_runs(tenant, &component, None).await;
                deployed.extend(started.flatten());
            }
        }
        deployed
    }

    /// Deploys `wasm` as component `component` of `tenant` here and, when deploys are the
    /// fleet's, records it as the app's live version for every host.
    ///
    /// # Errors
    /// As [`Fleet::deploy`]; [`ControlError::Desired`] when the bytes cannot be stored or the
    /// change recorded (this host then converges back on what is recorded).
    pub(crate) async fn deploy_for_fleet(
        &self,
        tenant: &str,
        component: &str,
        wasm: Vec<u8>,
    ) -> Result<Deployed, ControlError> {
        let Some(shared) = self.inner.deploys.get() else {
            return self.deploy(tenant, component, wasm).await;
        };
        let not_recorded =
            |error: crate::desired::DesiredError| ControlError::Desired(one_line(&error));
        // Checked and live here first: a refused component is refused with its reason, and
        // never stored.
        let done = self.deploy(tenant, component, wasm.clone()).await?;
        shared.bucket.put(&wasm).await.map_err(not_recorded)?;
        let app = AppId::new(tenant, &done.app);
        let live = LiveVersion::new(&done.content_hash, &done.version);
        let recorded = shared
            .table
            .change(&app, None, &shared.owner, |state| {
                state.component = component.to_owned();
                state.go_live(live, shared.keep);
            })
            .await
            .map_err(not_recorded)?;
        tracing::info!(tenant, app = %done.app, component, hash = %done.content_hash,
            revision = recorded.revision, "deploy recorded for the fleet");
        Ok(done)
    }

    /// Records, when deploys are the fleet's, that app `done.app` of `done.tenant` returned to
    /// `done`'s version (its bytes stored first: it may be a version the bucket never had,
    /// such as the tenants file's). A failure is logged: this host runs the version all the
    /// same, and converges back on what is recorded.
    pub(super) async fn record_rollback_for_fleet(&self, done: &Deployed) {
        let Some(shared) = self.inner.deploys.get() else {
            return;
        };
        let recorded = async {
            let bytes = self.kept_bytes(&done.content_hash).await?;
            shared.bucket.put(&bytes).await.map_err(|e| one_line(&e))?;
            let app = AppId::new(&done.tenant, &done.app);
            let live = LiveVersion::new(&done.content_hash, &done.version);
            let change = shared.table.change(&app, None, &shared.owner, |state| {
                state.component = done.component.clone();
                state.go_live(live, shared.keep);
                state.rollout = None;
            });
            change.await.map_err(|e| one_line(&e))
        };
        match recorded.await {
            Ok(state) => tracing::info!(tenant = %done.tenant, app = %done.app,
                hash = %done.content_hash, revision = state.revision,
                "rollback recorded for the fleet"),
            Err(error) => tracing::error!(tenant = %done.tenant, app = %done.app,
                hash = %done.content_hash, error = %error,
                "cannot record the rollback for the fleet; this host converges back on what is recorded"),
        }
    }

    /// Stops component `component` of `tenant` here and, when deploys are the fleet's,
    /// records that its app runs nowhere.
    ///
    /// # Errors
    /// As [`Fleet::undeploy`]; [`ControlError::Desired`] when the change cannot be recorded.
    pub(crate) async fn undeploy_for_fleet(
        &self,
        tenant: &str,
        component: &str,
    ) -> Result<Undeployed, ControlError> {
        let done = self.undeploy(tenant, component).await?;
        let Some(shared) = self.inner.deploys.get() else {
            return Ok(done);
        };
        let app = AppId::new(tenant, &done.app);
        let change = shared
            .table
            .change(&app, None, &shared.owner, AppDesired::undeploy);
        let recorded = change
            .await
            .map_err(|error| ControlError::Desired(one_line(&error)))?;
        tracing::info!(tenant, app = %done.app, component, revision = recorded.revision,
            "undeploy recorded for the fleet");
        Ok(done)
    }

    /// What the desired state records for component `component` of `tenant`, and whether
    /// `running_hash` is it; `None` without fleet deploys, or before a poll read the app.
    pub(super) fn fleet_version(
        &self,
        tenant: &str,
        component: &str,
        running_hash: &str,
    ) -> Option<FleetVersion> {
        let shared = self.inner.deploys.get()?;
        let read = lock(&shared.read);
        let key = (tenant.to_owned(), component.to_owned());
        let state = read.apps.get(&key)?;
        let live_hash = state.live.as_ref().map(|live| live.hash.clone());
        Some(FleetVersion {
            revision: state.revision,
            converged: live_hash.as_deref() == Some(running_hash),
            live_hash,
            read_at_ms: read.at_ms,
        })
    }

    /// Polls the desired state every [`POLL_INTERVAL`] and runs what it records, until the
    /// task is dropped. Does nothing when deploys are this host's own.
    pub(crate) async fn follow_desired_state(&self) {
        if self.inner.deploys.get().is_none() {
            return;
        }
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.converge().await;
        }
    }

    /// Runs, for each app the desired state records and this host serves, the version it
    /// records, unless this host runs it already or refused it before.
    async fn converge(&self) {
        let Some(shared) = self.inner.deploys.get() else {
            return;
        };
        let states = match shared.read().await {
            Ok(states) => {
                *lock(&shared.failing) = false;
                states
            }
            Err(error) => {
                if !std::mem::replace(&mut *lock(&shared.failing), true) {
                    tracing::error!(table = %shared.table.table(), error = %one_line(&error),
                        "cannot read the fleet's desired state; running what runs until it can be read");
                }
                return;
            }
        };
        for state in states {
            self.converge_app(shared, &state).await;
        }
    }

    async fn converge_app(&self, shared: &FleetDeploys, state: &AppDesired) {
        let (tenant, component) = (&state.app.tenant, &state.component);
        let Some(live) = &state.live else {
            self.converge_undeployed(shared, state).await;
            return;
        };
        let running = self.with_tenants(|tenants| {
            let run = tenants.get(tenant)?;
            Some((run.components.get(component)).map(|c| c.app.versions().current.content_hash))
        });
        // A tenant this host does not serve, or the version it runs already.
        let Some(running) = running else {
            return;
        };
        if running.as_deref() == Some(live.hash.as_str()) {
            return;
        }
        let tried = format!("{tenant}/{component}@{}", live.hash);
        if lock(&shared.refused).contains(&tried) {
            return;
        }
        let bytes = match shared.bucket.get(&live.hash).await {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::error!(tenant = %tenant, component = %component, hash = %live.hash,
                    error = %one_line(&error), "cannot fetch the fleet's live version");
                // Missing or altered bytes stay so; a store that failed is tried next poll.
                if matches!(
                    error,
                    DesiredError::Missing { .. } | DesiredError::Altered { .. }
                ) {
                    lock(&shared.refused).insert(tried);
                }
                return;
            }
        };
        match self.deploy(tenant, component, bytes).await {
            Ok(done) => tracing::info!(tenant = %tenant, app = %done.app, component = %component,
                hash = %done.content_hash, revision = state.revision,
                "running the fleet's live version"),
            Err(error) => {
                tracing::error!(tenant = %tenant, component = %component, hash = %live.hash,
                    error = %one_line(&error), "refused the fleet's live version; running what runs");
                lock(&shared.refused).insert(tried);
            }
        }
    }

    /// An app the desired state records as undeployed: stopped here too, when it runs.
    async fn converge_undeployed(&self, shared: &FleetDeploys, state: &AppDesired) {
        let (tenant, component) = (&state.app.tenant, &state.component);
        let runs = self.with_tenants(|tenants| {
            tenants
                .get(tenant)
                .is_some_and(|run| run.components.contains_key(component))
        });
        let tried = format!("{tenant}/{component}@undeployed#{}", state.revision);
        if !runs || lock(&shared.refused).contains(&tried) {
            return;
        }
        match self.undeploy(tenant, component).await {
            Ok(done) => tracing::info!(tenant = %tenant, app = %done.app, component = %component,
                revision = state.revision, "stopped: the fleet undeployed it"),
            Err(error) => {
                tracing::error!(tenant = %tenant, component = %component, error = %one_line(&error),
                    "the fleet undeployed the app, but it cannot be stopped here");
                lock(&shared.refused).insert(tried);
            }
        }
    }
}
