//! This host's part in recording the fleet's desired state, when the tenants file names a
//! component bucket. Every operator's change through this host's admin API (a deploy, a
//! rollback, an undeploy, a shadow and its promotion or drop, a tenant's pause and resume)
//! takes effect here first, then is recorded for every host: the bytes of a version first
//! (so a recorded hash always has its bytes), then the change, conditional on the revision it
//! read. Every host, this one included, applies what is recorded (`converge`).
//!
//! A host reads the desired state once before its first load, so one started with an empty
//! (or stale) state directory starts each app on the fleet's live version, not on the tenants
//! file's, and does not start an app the fleet undeployed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ruststream_common::escape::one_line;
use ruststream_common::sync::lock;
use ruststream_runtime::Tenant;
use ruststream_runtime::{Clock as _, SystemClock};

use super::{Fleet, Source};
use crate::admin::control::ControlError;
use crate::admin::model::{
    Deployed, FleetVersion, HostRunning, ShadowDeployed, ShadowDropped, Undeployed, VersionOrigin,
};
use crate::desired::{
    AppDesired, AppId, ComponentBucket, DesiredError, DesiredTable, HostReport, HostTally,
    LiveVersion, RunningVersion, Shadow, Snapshot, rollout_sum, shadow_sum,
};

/// How often a host reports what it runs when nothing changed: a host whose report is older
/// than [`REPORT_STALE`] is taken to have stopped.
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(60);
/// How old a host's report may be and still be shown.
pub(crate) const REPORT_STALE: Duration = Duration::from_secs(180);

/// `duration` in whole milliseconds.
fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

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
    pub(super) refused: Mutex<HashSet<String>>,
    /// Whether the last poll failed (said once until one succeeds).
    pub(super) failing: Mutex<bool>,
    /// What the last poll read, by (tenant, component): the revision and the live hash.
    pub(super) read: Mutex<Read>,
    /// This host's counts as it last wrote them (`at_ms` 0), by item key.
    pub(super) published: Mutex<HashMap<String, HostTally>>,
    /// The recorded seeks this host carried out, or found recorded when it started
    /// (`app/subscriber#id`).
    seeks_done: Mutex<HashSet<String>>,
    /// What this host last reported it runs, and when.
    pub(super) reported: Mutex<Option<(Vec<RunningVersion>, Instant)>>,
}

/// What the last read of the desired state found.
#[derive(Default)]
pub(super) struct Read {
    at_ms: u64,
    /// By (tenant, component).
    apps: HashMap<(String, String), AppDesired>,
    /// Every host's counts.
    pub(super) tallies: Vec<HostTally>,
    /// What every host runs.
    pub(super) reports: Vec<HostReport>,
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
            published: Mutex::new(HashMap::new()),
            seeks_done: Mutex::new(HashSet::new()),
            reported: Mutex::new(None),
        }
    }
}

impl FleetDeploys {
    /// Records a change of `app` as [`DesiredTable::change`] does, and keeps what was recorded
    /// as what was last read of it, so that this host's status shows the change it made at
    /// once, not at its next poll.
    pub(super) async fn change(
        &self,
        app: &AppId,
        seen: Option<u64>,
        change: impl FnOnce(&mut AppDesired),
    ) -> Result<AppDesired, DesiredError> {
        let recorded = self.table.change(app, seen, &self.owner, change).await?;
        let key = (recorded.app.tenant.clone(), recorded.component.clone());
        lock(&self.read).apps.insert(key, recorded.clone());
        Ok(recorded)
    }

    /// Notes that this host carried out seek `id` of `subscriber` of `app`, or leaves it to
    /// the hosts that ran when it was recorded.
    pub(super) fn seek_done(&self, app: &AppId, subscriber: &str, id: u64) {
        lock(&self.seeks_done).insert(format!("{app}/{subscriber}#{id}"));
    }

    /// Whether [`seek_done`](Self::seek_done) noted it.
    pub(super) fn is_seek_done(&self, app: &AppId, subscriber: &str, id: u64) -> bool {
        lock(&self.seeks_done).contains(&format!("{app}/{subscriber}#{id}"))
    }

    /// What was last read (or recorded here) of `app` of `tenant`.
    pub(super) fn recorded(&self, tenant: &str, app: &str) -> Option<AppDesired> {
        let read = lock(&self.read);
        (read.apps.values())
            .find(|state| state.app.tenant == tenant && state.app.app == app)
            .cloned()
    }

    /// Reads every app's desired state, and keeps it as what was last read.
    pub(super) async fn read(&self) -> Result<Snapshot, DesiredError> {
        let snapshot = self.table.read().await?;
        *lock(&self.read) = Read {
            at_ms: SystemClock.now_ms(),
            apps: (snapshot.apps.iter())
                .map(|state| {
                    let key = (state.app.tenant.clone(), state.component.clone());
                    (key, state.clone())
                })
                .collect(),
            tallies: snapshot.tallies.clone(),
            reports: snapshot.reports.clone(),
        };
        Ok(snapshot)
    }
}

impl Fleet {
    /// The fleet's desired-state table, when deploys are the fleet's.
    pub(crate) fn desired_table(&self) -> Option<DesiredTable> {
        (self.inner.deploys.get()).map(|shared| shared.table.clone())
    }

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
        // Read before the first load, so that it starts what the fleet runs. Seeks recorded
        // before this host started were carried out by the hosts of then: not again here.
        match deploys.read().await {
            Ok(snapshot) => {
                for state in &snapshot.apps {
                    for (subscriber, seek) in &state.seeks {
                        deploys.seek_done(&state.app, subscriber, seek.id);
                    }
                }
            }
            Err(error) => {
                tracing::error!(table = %deploys.table.table(), error = %one_line(&error),
                "cannot read the fleet's desired state at start; starting the tenants file's components, then what it records once it can be read")
            }
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
        // Checked and live here first: a refused component is refused with its reason, and
        // never stored.
        let done = self.deploy(tenant, component, wasm.clone()).await?;
        shared.bucket.put(&wasm).await.map_err(not_recorded)?;
        let app = AppId::new(tenant, &done.app);
        let live = LiveVersion::new(&done.content_hash, &done.version)
            .came(VersionOrigin::Upload, SystemClock.now_ms());
        // The first deploy the fleet records of an app replaces what the hosts started with
        // (the tenants file's): recorded as live before it, bytes stored, so that the fleet's
        // judge has a version to return every host to.
        let replaced = self.replaced_version(shared, &app).await?;
        let recorded = shared
            .change(&app, None, |state| {
                state.component = component.to_owned();
                if state.live.is_none()
                    && let Some(replaced) = &replaced
                {
                    state.go_live(replaced.clone(), shared.keep);
                }
                state.begin_rollout(live, shared.keep, SystemClock.now_ms());
            })
            .await
            .map_err(not_recorded)?;
        tracing::info!(tenant, app = %done.app, component, hash = %done.content_hash,
            revision = recorded.revision, "deploy recorded for the fleet");
        Ok(done)
    }

    /// The version a swap here just replaced for `app`, its bytes stored, when the desired
    /// state records no live version for the app yet; `None` otherwise.
    async fn replaced_version(
        &self,
        shared: &FleetDeploys,
        app: &AppId,
    ) -> Result<Option<LiveVersion>, ControlError> {
        let recorded = shared.table.get(app).await.map_err(not_recorded)?;
        if recorded.is_some_and(|state| state.live.is_some()) {
            return Ok(None);
        }
        let Some(previous) = self.app(&app.tenant, &app.app)?.versions().previous else {
            return Ok(None);
        };
        let bytes = (self.kept_bytes(&previous.content_hash).await).map_err(ControlError::State)?;
        shared.bucket.put(&bytes).await.map_err(not_recorded)?;
        let live = LiveVersion::new(&previous.content_hash, &previous.version);
        Ok(Some(self.as_it_came_here(&app.tenant, &app.app, live)))
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
            let live = LiveVersion::new(&done.content_hash, &done.version)
                .came(VersionOrigin::Rollback, SystemClock.now_ms());
            let change = shared.change(&app, None, |state| {
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
        let change = shared.change(&app, None, AppDesired::undeploy);
        let recorded = change.await.map_err(not_recorded)?;
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
        let since = state
            .rollout
            .as_ref()
            .map_or(0, |rollout| rollout.started_ms);
        let hosts: Vec<HostTally> = (read.tallies.iter())
            .filter(|tally| tally.app == state.app && tally.at_ms >= since)
            .cloned()
            .collect();
        let rollout = (state.rollout.as_ref())
            .and_then(|rollout| rollout_sum(&hosts, &rollout.to))
            .map(|(sum, _)| sum);
        let shadow = (state.shadow.as_ref()).and_then(|shadow| shadow_sum(&hosts, &shadow.hash));
        let fresh = read.at_ms.saturating_sub(duration_ms(REPORT_STALE));
        let mut running: Vec<HostRunning> = (read.reports.iter())
            .filter(|report| report.at_ms >= fresh)
            .map(|report| {
                let hash = (report.apps.iter())
                    .find(|running| running.app == state.app)
                    .map(|running| running.hash.clone());
                HostRunning {
                    host: report.host.clone(),
                    converged: hash.is_some() && hash == live_hash,
                    hash,
                    reported_at_ms: report.at_ms,
                }
            })
            .collect();
        running.sort_by(|a, b| a.host.cmp(&b.host));
        Some(FleetVersion {
            revision: state.revision,
            converged: live_hash.as_deref() == Some(running_hash),
            live_hash,
            read_at_ms: read.at_ms,
            rollout,
            shadow,
            hosts,
            running,
        })
    }

    /// Pauses `tenant` here and, when deploys are the fleet's, records the pause for every
    /// host.
    ///
    /// # Errors
    /// [`ControlError::UnknownTenant`]; [`ControlError::Desired`] when the pause cannot be
    /// recorded (it holds here all the same, until this host reads the desired state again).
    pub(crate) async fn pause_for_fleet(&self, tenant: &str) -> Result<(), ControlError> {
        let run = self.tenant(tenant)?;
        if !run.is_paused() {
            run.pause(super::control::PAUSED_BY_OPERATOR);
        }
        self.change_tenant_for_fleet(tenant, |state| state.paused = true)
            .await
    }

    /// Resumes `tenant` here and, when deploys are the fleet's, records it for every host.
    ///
    /// # Errors
    /// As [`Fleet::pause_for_fleet`].
    pub(crate) async fn resume_for_fleet(&self, tenant: &str) -> Result<(), ControlError> {
        let run = self.tenant(tenant)?;
        if run.is_stopped() {
            run.resume();
        }
        self.change_tenant_for_fleet(tenant, |state| state.paused = false)
            .await
    }

    /// Runs `wasm` as the shadow of the app component `component` of `tenant` runs here and,
    /// when deploys are the fleet's, records it (its bytes stored first) for every host.
    ///
    /// # Errors
    /// As [`Fleet::deploy_shadow`]; [`ControlError::Desired`] when it cannot be recorded.
    pub(crate) async fn deploy_shadow_for_fleet(
        &self,
        tenant: &str,
        component: &str,
        wasm: Vec<u8>,
        sample_percent: u32,
    ) -> Result<ShadowDeployed, ControlError> {
        let done = (self.deploy_shadow(tenant, component, wasm.clone(), sample_percent)).await?;
        let Some(shared) = self.inner.deploys.get() else {
            return Ok(done);
        };
        shared.bucket.put(&wasm).await.map_err(not_recorded)?;
        let shadow = Shadow {
            hash: done.content_hash.clone(),
            sample_percent,
        };
        self.change_app_for_fleet(shared, tenant, component, |state| {
            state.shadow = Some(shadow.clone());
        })
        .await?;
        Ok(done)
    }

    /// Drops the shadow of `tenant`'s `app` here and, when deploys are the fleet's, records it
    /// dropped for every host.
    ///
    /// # Errors
    /// As [`Fleet::abort_shadow`]; [`ControlError::Desired`] when it cannot be recorded.
    pub(crate) async fn abort_shadow_for_fleet(
        &self,
        tenant: &str,
        app: &str,
    ) -> Result<ShadowDropped, ControlError> {
        let done = self.abort_shadow(tenant, app).await?;
        let Some(shared) = self.inner.deploys.get() else {
            return Ok(done);
        };
        let running = self.app(tenant, app)?;
        if let Some(component) = self.component_of(tenant, &running) {
            (self.change_app_for_fleet(shared, tenant, &component, |state| state.shadow = None))
                .await?;
        }
        Ok(done)
    }

    /// Promotes the shadow of `tenant`'s `app` here and, when deploys are the fleet's, records
    /// it live (and no shadow) for every host.
    ///
    /// # Errors
    /// As [`Fleet::promote`]; [`ControlError::Desired`] when it cannot be recorded.
    pub(crate) async fn promote_for_fleet(
        &self,
        tenant: &str,
        app: &str,
    ) -> Result<Deployed, ControlError> {
        let done = self.promote(tenant, app).await?;
        let Some(shared) = self.inner.deploys.get() else {
            return Ok(done);
        };
        let live = LiveVersion::new(&done.content_hash, &done.version)
            .came(VersionOrigin::Upload, SystemClock.now_ms());
        self.change_app_for_fleet(shared, tenant, &done.component, |state| {
            state.begin_rollout(live.clone(), shared.keep, SystemClock.now_ms());
        })
        .await?;
        Ok(done)
    }

    /// Records `change` for every app of `tenant`: each the desired state records, and each
    /// this host runs (recorded first when it is not, see [`Fleet::change_app_for_fleet`]).
    async fn change_tenant_for_fleet(
        &self,
        tenant: &str,
        change: impl Fn(&mut AppDesired),
    ) -> Result<(), ControlError> {
        let Some(shared) = self.inner.deploys.get() else {
            return Ok(());
        };
        let recorded = shared.table.all().await.map_err(not_recorded)?;
        let mut components: Vec<String> = (recorded.into_iter())
            .filter(|state| state.app.tenant == tenant)
            .map(|state| state.component)
            .collect();
        let running = self.with_tenants(|tenants| {
            (tenants.get(tenant)).map_or_else(Vec::new, |run| {
                run.components.keys().cloned().collect::<Vec<_>>()
            })
        });
        components.extend(running);
        components.sort();
        components.dedup();
        for component in components {
            (self.change_app_for_fleet(shared, tenant, &component, &change)).await?;
        }
        Ok(())
    }

    /// Records `change` for the app component `component` of `tenant` runs; the revision
    /// recorded (0 when neither this host nor the desired state knows the component). An app
    /// the desired state does not record yet is recorded with the version this host runs (its
    /// bytes stored first), so that a change never records a running app as undeployed.
    pub(super) async fn change_app_for_fleet(
        &self,
        shared: &FleetDeploys,
        tenant: &str,
        component: &str,
        change: impl Fn(&mut AppDesired),
    ) -> Result<u64, ControlError> {
        let running = self.with_tenants(|tenants| {
            let run = tenants.get(tenant)?.components.get(component)?;
            Some((run.app.name().to_owned(), run.app.versions().current))
        });
        let current_live = running.as_ref().map(|(app, current)| {
            let live = LiveVersion::new(&current.content_hash, &current.version);
            self.as_it_came_here(tenant, app, live)
        });
        let recorded = (lock(&shared.read).apps)
            .get(&(tenant.to_owned(), component.to_owned()))
            .map(|state| state.app.clone());
        let (app, current) = match (running, recorded) {
            (Some((app, current)), _) => (AppId::new(tenant, app), Some(current)),
            (None, Some(app)) => (app, None),
            (None, None) => return Ok(0),
        };
        let exists = shared.table.get(&app).await.map_err(not_recorded)?;
        if exists.is_none()
            && let Some(current) = &current
        {
            let bytes =
                (self.kept_bytes(&current.content_hash).await).map_err(ControlError::State)?;
            shared.bucket.put(&bytes).await.map_err(not_recorded)?;
        }
        let recorded = shared.change(&app, None, |state| {
            if state.revision == 0 {
                state.component = component.to_owned();
                if let Some(live) = &current_live {
                    state.go_live(live.clone(), shared.keep);
                }
            }
            change(state);
        });
        let recorded = recorded.await.map_err(not_recorded)?;
        tracing::info!(tenant, app = %app.app, component, revision = recorded.revision,
            paused = recorded.paused, shadow = ?recorded.shadow.as_ref().map(|s| &s.hash),
            "change recorded for the fleet");
        Ok(recorded.revision)
    }
}

/// A change the desired state did not take, as the admin API answers it.
fn not_recorded(error: DesiredError) -> ControlError {
    ControlError::Desired(one_line(&error))
}
