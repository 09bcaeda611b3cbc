//! This host following the fleet's desired state: every [`POLL_INTERVAL`] it reads every
//! app's record and applies what differs from what it runs, through the same paths an
//! operator's verbs take here (a deploy is loaded, checked and swapped shard by shard with
//! drain): the live version, an undeploy, the shadow and its sample, a tenant's pause, and a
//! seek on the shards this host holds.
//!
//! What this host refuses (its limits, say) is tried once per version and logged; it keeps
//! running what it ran. A store that fails is said once, and read again at the next poll.

use std::collections::BTreeMap;
use std::time::Instant;

use ruststream_common::escape::one_line;
use ruststream_common::sync::lock;
use ruststream_runtime::{Clock as _, SystemClock};

use super::Fleet;
use super::control::PAUSED_BY_OPERATOR;
use super::deploys::{FleetDeploys, POLL_INTERVAL, REPORT_EVERY};
use crate::desired::{AppDesired, DesiredError, HostReport, RunningVersion};

impl Fleet {
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
        let snapshot = match shared.read().await {
            Ok(snapshot) => {
                *lock(&shared.failing) = false;
                snapshot
            }
            Err(error) => {
                if !std::mem::replace(&mut *lock(&shared.failing), true) {
                    tracing::error!(table = %shared.table.table(), error = %one_line(&error),
                        "cannot read the fleet's desired state; running what runs until it can be read");
                }
                return;
            }
        };
        self.publish_tallies(shared, &snapshot).await;
        self.judge_for_fleet(shared, &snapshot).await;
        let states = snapshot.apps;
        self.converge_pauses(&states);
        self.converge_seeks(shared, &states).await;
        for state in &states {
            self.converge_app(shared, state).await;
        }
        self.report_running(shared, &states).await;
    }

    /// Reports what this host runs of the apps `states` record, when it changed since its
    /// last report or that is [`REPORT_EVERY`] old.
    async fn report_running(&self, shared: &FleetDeploys, states: &[AppDesired]) {
        let apps: Vec<RunningVersion> = (states.iter())
            .filter_map(|state| {
                let app = self.app(&state.app.tenant, &state.app.app).ok()?;
                Some(RunningVersion {
                    app: state.app.clone(),
                    hash: app.versions().current.content_hash,
                })
            })
            .collect();
        let due = lock(&shared.reported)
            .as_ref()
            .is_none_or(|(before, at)| *before != apps || at.elapsed() >= REPORT_EVERY);
        if !due {
            return;
        }
        let report = HostReport {
            host: shared.owner.clone(),
            apps: apps.clone(),
            at_ms: SystemClock.now_ms(),
        };
        match shared.table.put_report(&report).await {
            Ok(()) => *lock(&shared.reported) = Some((apps, Instant::now())),
            Err(error) => tracing::warn!(error = %one_line(&error),
                "cannot report what this host runs to the fleet; trying at the next poll"),
        }
    }

    /// Pauses each tenant this host serves that the desired state records paused (any of its
    /// apps), and resumes each an operator paused that it no longer records paused.
    fn converge_pauses(&self, states: &[AppDesired]) {
        let mut paused: BTreeMap<&str, bool> = BTreeMap::new();
        for state in states {
            *paused.entry(state.app.tenant.as_str()).or_default() |= state.paused;
        }
        for (name, paused) in paused {
            let Ok(tenant) = self.tenant(name) else {
                continue;
            };
            if paused && !tenant.is_paused() {
                tenant.pause(PAUSED_BY_OPERATOR);
            } else if !paused && tenant.is_paused() {
                tenant.resume();
            }
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
            self.converge_shadow(shared, state).await;
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
            Ok(done) => {
                tracing::info!(tenant = %tenant, app = %done.app, component = %component,
                    hash = %done.content_hash, revision = state.revision,
                    "running the fleet's live version");
                // A quarantine the replaced version caused ends with it, as a rollback here
                // ends it.
                if let Ok(run) = self.tenant(tenant) {
                    run.lift_quarantine_of(&done.app);
                }
                self.converge_shadow(shared, state).await;
            }
            Err(error) => {
                tracing::error!(tenant = %tenant, component = %component, hash = %live.hash,
                    error = %one_line(&error), "refused the fleet's live version; running what runs");
                lock(&shared.refused).insert(tried);
            }
        }
    }

    /// Runs beside the live version of `state`'s app the shadow it records, on the sample it
    /// records, or drops the shadow it no longer records.
    async fn converge_shadow(&self, shared: &FleetDeploys, state: &AppDesired) {
        let (tenant, component) = (&state.app.tenant, &state.component);
        let Ok(app) = self.app(tenant, &state.app.app) else {
            return;
        };
        let running = app.shadow();
        let running = running
            .as_ref()
            .map(|s| (s.version.content_hash.as_str(), s.sample_percent));
        let wanted = state
            .shadow
            .as_ref()
            .map(|s| (s.hash.as_str(), s.sample_percent));
        if running == wanted {
            return;
        }
        let Some(shadow) = &state.shadow else {
            if let Err(error) = self.abort_shadow(tenant, &state.app.app).await {
                tracing::error!(tenant = %tenant, app = %state.app.app, error = %one_line(&error),
                    "cannot drop the shadow the fleet dropped");
            }
            return;
        };
        let tried = format!(
            "{tenant}/{component}@shadow:{}:{}",
            shadow.hash, shadow.sample_percent
        );
        if lock(&shared.refused).contains(&tried) {
            return;
        }
        let started = match shared.bucket.get(&shadow.hash).await {
            Ok(bytes) => self
                .deploy_shadow(tenant, component, bytes, shadow.sample_percent)
                .await
                .map_err(|error| one_line(&error)),
            Err(error) => Err(one_line(&error)),
        };
        match started {
            Ok(_) => tracing::info!(tenant = %tenant, app = %state.app.app, hash = %shadow.hash,
                sample_percent = shadow.sample_percent, revision = state.revision,
                "running the fleet's shadow"),
            Err(error) => {
                tracing::error!(tenant = %tenant, app = %state.app.app, hash = %shadow.hash,
                    %error, "cannot run the fleet's shadow; running without it");
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
