//! The fleet's side of the kept versions: recording each version that goes live in the state
//! directory, running again what was live (at a start, or when a tenant restarts), following
//! the rollout judge's rollbacks, and the operator's rollbacks and listing.

use std::sync::Arc;

use ruststream_common::escape::one_line;
use ruststream_kinesis::RunningApp;
use ruststream_runtime::{LoadedComponent, Tenant, log::LogSink};

use super::{Fleet, Source, deployed};
use crate::admin::control::ControlError;
use crate::admin::model::{AppVersionList, Deployed, KeptVersion, Undeployed, VersionOrigin};
use crate::desired::{AppDesired, LiveVersion};
use crate::state::versions::{AppRecord, Pick, VersionStore, WentLive};

impl Fleet {
    /// Records that `done` went live (and how, from `source`), keeping `bytes` when given;
    /// the writes (each fsynced) run off the async workers. A failure is logged and reported by
    /// readiness: the version runs all the same.
    pub(super) async fn record_live(
        &self,
        done: &Deployed,
        bytes: Option<Vec<u8>>,
        source: &Source,
    ) {
        // A rollback (an operator's, or the rollout judge's) is the fleet's: every host
        // returns to the version.
        let rollback = (source.how == VersionOrigin::Rollback).then(|| done.clone());
        let (fleet, done, source) = (self.clone(), done.clone(), source.clone());
        let recorded = tokio::task::spawn_blocking(move || {
            let versions = &fleet.inner.versions;
            let kept = bytes.map_or(Ok(()), |b| versions.keep_bytes(&done.content_hash, &b));
            kept.and_then(|()| {
                versions.went_live(&WentLive {
                    tenant: &done.tenant,
                    app: &done.app,
                    component: &done.component,
                    hash: &done.content_hash,
                    version: &done.version,
                    how: source.how,
                    file_hash: source.file_hash.as_deref(),
                    upload_only: source.upload_only,
                })
            })
            .map_err(|error| one_line(&error))
        })
        .await;
        let recorded = recorded.unwrap_or_else(|error| Err(format!("state directory: {error}")));
        self.note_state(recorded);
        if let Some(done) = rollback {
            self.record_rollback_for_fleet(&done).await;
        }
    }

    /// The bytes of kept version `hash`, read off the async workers.
    pub(super) async fn kept_bytes(&self, hash: &str) -> Result<Vec<u8>, String> {
        let (fleet, hash) = (self.clone(), hash.to_owned());
        let read = tokio::task::spawn_blocking(move || fleet.inner.versions.bytes(&hash));
        match read.await {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(error)) => Err(one_line(&error)),
            Err(error) => Err(format!("state directory: {error}")),
        }
    }

    /// Keeps the outcome of the last write to the state directory for readiness.
    pub(super) fn note_state(&self, result: Result<(), String>) {
        let error = result.err().map(|reason| {
            tracing::error!("{reason}: what went live may not survive a restart");
            format!("{reason}: what went live may not survive a restart")
        });
        self.state().state_error = error;
    }

    /// Runs the version `record` says was live, as component `record.component` of `tenant`;
    /// `file_hash` is the configured file's, when it was read. `None` when there is none, its
    /// bytes are gone, or it is refused now (the log says why).
    pub(super) async fn restore(
        &self,
        tenant: &Arc<Tenant>,
        record: AppRecord,
        file_hash: Option<String>,
    ) -> Option<Deployed> {
        let live = record.live.clone()?;
        let bytes = match self.kept_bytes(&live).await {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::warn!(tenant = %tenant.name(), app = %record.app,
                    "cannot run the version that was live: {error}");
                return None;
            }
        };
        let how = record
            .versions
            .iter()
            .find(|v| v.hash == live)
            .map_or(VersionOrigin::Upload, |v| v.how);
        tracing::info!(tenant = %tenant.name(), app = %record.app, component = %record.component,
            hash = %live, "running the version that was live");
        let source = Source {
            how,
            file_hash,
            upload_only: None,
        };
        let loaded = self.load_version(tenant, &record.component, bytes, source);
        loaded.await.ok()
    }

    /// [`restore`](Self::restore) after the configured file of `name` was refused: the
    /// refusal stays in the status, and the same bytes are not tried again.
    pub(super) async fn restore_over_refusal(
        &self,
        tenant: &Arc<Tenant>,
        name: &str,
        record: AppRecord,
    ) -> Option<Deployed> {
        let refused = self.with_tenants(|t| t.get(tenant.name())?.refused.get(name).cloned());
        let done = self.restore(tenant, record, None).await;
        if let Some(refused) = refused
            && let Some(run) = self.state().tenants.get_mut(tenant.name())
        {
            run.refused.insert(name.to_owned(), refused);
        }
        done
    }

    /// Runs again the apps of `tenant` that came by upload under a name the tenants file does
    /// not list (`configured`), and were live.
    pub(super) async fn restore_uploads(
        &self,
        tenant: &Arc<Tenant>,
        configured: &[String],
    ) -> Vec<Deployed> {
        let (records, errors) = self.inner.versions.records(tenant.name());
        for error in errors {
            tracing::warn!(tenant = %tenant.name(), "skipped: {}", one_line(&error));
        }
        let mut deployed = Vec::new();
        for record in records {
            let running = self.with_tenants(|t| {
                t.get(tenant.name())
                    .is_some_and(|t| t.components.contains_key(&record.component))
            });
            if record.upload_only
                && record.live.is_some()
                && !configured.contains(&record.component)
                && !running
            {
                deployed.extend(self.restore(tenant, record, None).await);
            }
        }
        deployed
    }

    /// Records the rollbacks `app` (of `tenant`) makes by itself, when its rollout judge
    /// returns to the previous version; ends when the app stops. Swaps and an operator's
    /// rollbacks are recorded by whoever made them, under the reload lock this waits for.
    pub(super) fn follow_rollbacks(
        self,
        tenant: String,
        app: &Arc<RunningApp>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let mut changes = app.version_changes();
        let mut rollbacks = app.versions().rollbacks;
        let weak = Arc::downgrade(app);
        async move {
            while changes.changed().await.is_ok() {
                let Some(app) = weak.upgrade() else { return };
                let now = app.versions().rollbacks;
                if now == rollbacks {
                    continue;
                }
                rollbacks = now;
                let _one_at_a_time = self.inner.reloading.lock().await;
                let still_running = self.with_tenants(|t| {
                    t.get(&tenant).is_some_and(|run| {
                        run.components.values().any(|c| Arc::ptr_eq(&c.app, &app))
                    })
                });
                if !still_running {
                    return;
                }
                let done = deployed(&tenant, &app, true);
                let recorded = self.inner.versions.record(&tenant, app.name());
                let live = recorded.ok().flatten().and_then(|r| r.live);
                if live.as_deref() != Some(done.content_hash.as_str()) {
                    let source = Source {
                        how: VersionOrigin::Rollback,
                        file_hash: None,
                        upload_only: None,
                    };
                    self.record_live(&done, None, &source).await;
                }
            }
        }
    }

    /// Records, before a stop, the versions the rollout judges returned to that
    /// [`follow_rollbacks`](Self::follow_rollbacks) has not recorded yet: what runs at the stop
    /// is what the next start runs.
    /// Takes no reload lock: at a stop, an upload still being compiled must not hold it up.
    pub(super) async fn record_rollbacks(&self) {
        let running: Vec<(String, Arc<RunningApp>)> = self.with_tenants(|tenants| {
            tenants
                .iter()
                .flat_map(|(name, run)| {
                    run.components
                        .values()
                        .map(|c| (name.clone(), c.app.clone()))
                })
                .collect()
        });
        for (tenant, app) in running {
            let done = deployed(&tenant, &app, true);
            let recorded = self.inner.versions.record(&tenant, app.name());
            let live = recorded.ok().flatten().and_then(|r| r.live);
            if app.versions().rollbacks > 0 && live.as_deref() != Some(done.content_hash.as_str()) {
                let source = Source {
                    how: VersionOrigin::Rollback,
                    file_hash: None,
                    upload_only: None,
                };
                self.record_live(&done, None, &source).await;
            }
        }
    }

    /// Returns app `app` of `tenant` to the version its last swap replaced.
    ///
    /// # Errors
    /// When the tenant or app is unknown, or the app has no earlier version.
    pub(crate) async fn roll_back(
        &self,
        tenant: &str,
        app: &str,
    ) -> Result<Deployed, ControlError> {
        let _one_at_a_time = self.inner.reloading.lock().await;
        let running = self.app(tenant, app)?;
        running
            .roll_back("asked by an operator")
            .map_err(|_| ControlError::NothingToRollBack {
                tenant: tenant.to_owned(),
                app: app.to_owned(),
            })?;
        let done = deployed(tenant, &running, true);
        let source = Source {
            how: VersionOrigin::Rollback,
            file_hash: None,
            upload_only: None,
        };
        self.record_live(&done, None, &source).await;
        Ok(done)
    }

    /// Returns app `app` of `tenant` to its kept version whose hash starts with `to`: one the
    /// fleet keeps when deploys are the fleet's and it records the app (its bytes from this
    /// host's state directory, else from the component bucket, then kept here), else one
    /// this host's state directory keeps.
    ///
    /// # Errors
    /// When the tenant or app is unknown, no kept version (or several) matches `to`, it is
    /// the live one, its bytes cannot be read, or it is refused now.
    pub(crate) async fn roll_back_to(
        &self,
        tenant: &str,
        app: &str,
        to: &str,
    ) -> Result<Deployed, ControlError> {
        let _one_at_a_time = self.inner.reloading.lock().await;
        let running = self.app(tenant, app)?;
        let picked = |pick| match pick {
            Pick::None => ControlError::UnknownVersion {
                tenant: tenant.to_owned(),
                app: app.to_owned(),
                hash: to.to_owned(),
            },
            Pick::Several(hashes) => ControlError::AmbiguousVersion {
                prefix: to.to_owned(),
                hashes,
            },
        };
        let fleet = (self.inner.deploys.get()).and_then(|shared| {
            let state = shared
                .recorded(tenant, app)
                .filter(|s| !s.kept.is_empty())?;
            Some((shared, state))
        });
        let hash = match &fleet {
            Some((_, state)) => {
                let kept = state.kept.iter().map(|kept| kept.hash.as_str());
                VersionStore::pick_hash(kept, to).map_err(picked)?
            }
            None => {
                let record = self.record(tenant, app)?;
                VersionStore::pick(&record, to).map_err(picked)?.hash
            }
        };
        let current = running.versions().current;
        if hash == current.content_hash {
            return Err(ControlError::AlreadyLive {
                tenant: tenant.to_owned(),
                app: app.to_owned(),
                hash,
            });
        }
        let (bytes, fetched) = match (self.kept_bytes(&hash).await, &fleet) {
            (Ok(bytes), _) => (bytes, None),
            (Err(_), Some((shared, _))) => {
                let bytes = shared.bucket.get(&hash).await.map_err(|error| {
                    ControlError::State(format!(
                        "kept version {hash} of the fleet: {}",
                        one_line(&error)
                    ))
                })?;
                (bytes.clone(), Some(bytes))
            }
            (Err(error), None) => return Err(ControlError::State(error)),
        };
        let (run, operator) = self
            .with_tenants(|t| {
                t.get(tenant)
                    .map(|r| (r.tenant.clone(), r.operator.clone()))
            })
            .ok_or_else(|| ControlError::UnknownTenant(tenant.to_owned()))?;
        // Named as the running component: the version's own name may be an older upload's.
        let name = current.component;
        let log = LogSink::new();
        let runtime = &self.inner.runtime;
        let loaded = LoadedComponent::from_bytes(runtime, &name, bytes, run.policy(), &log).await;
        let component = loaded.map_err(|e| self.refuse(tenant, &name, one_line(&e), None))?;
        let settings = operator.for_subscriptions(&component.app().subscriptions);
        let reason = format!("asked by an operator (to {hash})");
        running
            .roll_back_to(component, settings, &reason)
            .map_err(|e| self.refuse(tenant, &name, one_line(&e), None))?;
        let done = deployed(tenant, &running, true);
        let source = Source {
            how: VersionOrigin::Rollback,
            file_hash: None,
            upload_only: None,
        };
        self.record_live(&done, fetched, &source).await;
        Ok(done)
    }

    /// Stops component `component` of `tenant` for good: one that came by upload under a name
    /// the tenants file does not list (a listed one is stopped by removing it there).
    ///
    /// # Errors
    /// When the tenant is unknown, runs no such component, or lists it in the tenants file.
    pub(crate) async fn undeploy(
        &self,
        tenant: &str,
        component: &str,
    ) -> Result<Undeployed, ControlError> {
        let _one_at_a_time = self.inner.reloading.lock().await;
        let app = {
            let mut state = self.state();
            let run = state
                .tenants
                .get_mut(tenant)
                .ok_or_else(|| ControlError::UnknownTenant(tenant.to_owned()))?;
            if run
                .configured
                .iter()
                .any(|path| super::stem(path) == component)
            {
                return Err(ControlError::Configured {
                    tenant: tenant.to_owned(),
                    component: component.to_owned(),
                });
            }
            run.refused.remove(component);
            run.components
                .remove(component)
                .ok_or_else(|| ControlError::UnknownComponent {
                    tenant: tenant.to_owned(),
                    component: component.to_owned(),
                })?
                .app
        };
        let retired = self.inner.versions.retired(tenant, component);
        self.note_state(retired.map_err(|error| one_line(&error)));
        let undeployed = Undeployed {
            tenant: tenant.to_owned(),
            component: component.to_owned(),
            app: app.name().to_owned(),
        };
        tracing::info!(tenant, component, app = %undeployed.app, "undeployed: stopping it");
        super::stop_apps(vec![app.clone()]).await;
        // Undeployed for good (not a restart, a swap or a handoff): its fan-out consumers go
        // too, unless another host runs it.
        app.deregister_consumers().await;
        Ok(undeployed)
    }

    /// The versions kept of `app` of `tenant`, the one that went live last first: the
    /// fleet's, as its desired state recorded them at this host's last poll, when deploys are
    /// the fleet's and it records the app; else this host's state directory's.
    ///
    /// # Errors
    /// When the tenant is not configured, no version of the app is kept, or its record cannot
    /// be read.
    pub(crate) fn versions(&self, tenant: &str, app: &str) -> Result<AppVersionList, ControlError> {
        if !self.with_tenants(|t| t.contains_key(tenant)) {
            return Err(ControlError::UnknownTenant(tenant.to_owned()));
        }
        let fleet = (self.inner.deploys.get()).and_then(|shared| shared.recorded(tenant, app));
        if let Some(state) = fleet.filter(|state| !state.kept.is_empty()) {
            return Ok(self.fleet_versions(&state));
        }
        let record = self.record(tenant, app)?;
        let versions = record
            .versions
            .iter()
            .rev()
            .map(|v| KeptVersion {
                content_hash: v.hash.clone(),
                version: v.version.clone(),
                component: v.component.clone(),
                at_ms: v.at_ms,
                came_by: v.how,
                live: record.live.as_deref() == Some(&v.hash),
            })
            .collect();
        Ok(AppVersionList {
            tenant: tenant.to_owned(),
            app: app.to_owned(),
            versions,
            fleet: false,
        })
    }

    /// The fleet's kept versions of `state`'s app. A version recorded before the desired state
    /// said how it went live shows how it went live here, if it did.
    fn fleet_versions(&self, state: &AppDesired) -> AppVersionList {
        let live = state.live.as_ref().map(|live| live.hash.as_str());
        let versions = (state.kept.iter().rev())
            .map(|kept| {
                let came = kept.came.or_else(|| {
                    let here =
                        self.as_it_came_here(&state.app.tenant, &state.app.app, kept.clone());
                    here.came
                });
                KeptVersion {
                    content_hash: kept.hash.clone(),
                    version: kept.version.clone(),
                    component: state.component.clone(),
                    at_ms: came.map_or(0, |came| came.at_ms),
                    came_by: came.map_or(VersionOrigin::File, |came| came.by),
                    live: live == Some(kept.hash.as_str()),
                }
            })
            .collect();
        AppVersionList {
            tenant: state.app.tenant.clone(),
            app: state.app.app.clone(),
            versions,
            fleet: true,
        }
    }

    /// `live`, with how and when it last went live on this host as its state directory
    /// recorded, if it did (unchanged otherwise).
    pub(super) fn as_it_came_here(
        &self,
        tenant: &str,
        app: &str,
        live: LiveVersion,
    ) -> LiveVersion {
        let Ok(Some(record)) = self.inner.versions.record(tenant, app) else {
            return live;
        };
        match record.versions.iter().find(|v| v.hash == live.hash) {
            Some(here) => live.came(here.how, here.at_ms),
            None => live,
        }
    }

    fn record(&self, tenant: &str, app: &str) -> Result<AppRecord, ControlError> {
        self.inner
            .versions
            .record(tenant, app)
            .map_err(|error| ControlError::State(one_line(&error)))?
            .ok_or_else(|| ControlError::UnknownApp {
                tenant: tenant.to_owned(),
                app: app.to_owned(),
            })
    }
}
