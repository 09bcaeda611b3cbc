//! The fleet's side of shadow versions: starting one beside a running app from an upload,
//! dropping it, promoting it through the normal swap, and keeping it (hash, sample) in the
//! state directory beside the kept versions so a restart starts it again.

use std::sync::Arc;

use ruststream_common::escape::one_line;
use ruststream_kinesis::RunningApp;
use ruststream_runtime::{LoadedComponent, Tenant, component::compile::content_hash, log::LogSink};

use super::Fleet;
use crate::admin::control::ControlError;
use crate::admin::model::{Deployed, ShadowDeployed, ShadowDropped};
use crate::state::versions::ShadowRecord;

impl Fleet {
    /// Runs `wasm` beside the app component `component` of `tenant` runs, as its shadow on
    /// `sample_percent` of the records, replacing the shadow it had.
    ///
    /// # Errors
    /// When the tenant or component is unknown, or the upload is refused (it does not load,
    /// declares another app, reads streams the tenant is not granted).
    pub(crate) async fn deploy_shadow(
        &self,
        tenant: &str,
        component: &str,
        wasm: Vec<u8>,
        sample_percent: u32,
    ) -> Result<ShadowDeployed, ControlError> {
        let _one_at_a_time = self.inner.reloading.lock().await;
        let (run, running) = self
            .with_tenants(|tenants| {
                let run = tenants.get(tenant)?;
                let running = run.components.get(component).map(|c| c.app.clone());
                Some((run.tenant.clone(), running))
            })
            .ok_or_else(|| ControlError::UnknownTenant(tenant.to_owned()))?;
        let running = running.ok_or_else(|| ControlError::UnknownComponent {
            tenant: tenant.to_owned(),
            component: component.to_owned(),
        })?;
        let hash = content_hash(&wasm);
        let keep = (!self.inner.versions.has(&hash)).then(|| wasm.clone());
        let refused = |reason: String| ControlError::Refused {
            tenant: tenant.to_owned(),
            component: component.to_owned(),
            reason,
        };
        let loaded = self.load_shadow(&run, component, wasm).await;
        let loaded = loaded.map_err(refused)?;
        let version = loaded.app().version.clone();
        running
            .start_shadow(loaded, f64::from(sample_percent) / 100.0)
            .map_err(|error| refused(one_line(&error)))?;
        let record = ShadowRecord {
            hash: hash.clone(),
            sample_percent,
        };
        self.persist_shadow(tenant, running.name(), Some(record), keep)
            .await;
        Ok(ShadowDeployed {
            tenant: tenant.to_owned(),
            app: running.name().to_owned(),
            component: component.to_owned(),
            version,
            content_hash: hash,
            sample_percent,
        })
    }

    /// Drops the shadow of `tenant`'s `app`, if it runs one.
    ///
    /// # Errors
    /// When the tenant or app is unknown.
    pub(crate) async fn abort_shadow(
        &self,
        tenant: &str,
        app: &str,
    ) -> Result<ShadowDropped, ControlError> {
        let _one_at_a_time = self.inner.reloading.lock().await;
        let running = self.app(tenant, app)?;
        let dropped = running.stop_shadow();
        self.persist_shadow(tenant, app, None, None).await;
        Ok(ShadowDropped {
            tenant: tenant.to_owned(),
            app: app.to_owned(),
            dropped,
        })
    }

    /// Swaps the shadow of `tenant`'s `app` in as a deploy of its bytes would (the rollout
    /// judge watches it, the version is kept and recorded live); the swap ends the shadow.
    ///
    /// # Errors
    /// [`ControlError::NoShadow`] when it runs none; what a deploy answers otherwise.
    pub(crate) async fn promote(&self, tenant: &str, app: &str) -> Result<Deployed, ControlError> {
        let running = self.app(tenant, app)?;
        let no_shadow = || ControlError::NoShadow {
            tenant: tenant.to_owned(),
            app: app.to_owned(),
        };
        let shadow = running.shadow_component().ok_or_else(no_shadow)?;
        let component = self.component_of(tenant, &running).ok_or_else(no_shadow)?;
        let bytes = self
            .kept_bytes(shadow.content_hash())
            .await
            .map_err(ControlError::State)?;
        let done = self.deploy(tenant, &component, bytes).await?;
        self.persist_shadow(tenant, app, None, None).await;
        tracing::info!(tenant, app, hash = %done.content_hash, "shadow promoted");
        Ok(done)
    }

    /// Starts again the shadow the state directory records for `app` of `tenant`, if any (a
    /// restart, or an app started again). A shadow that cannot start is logged and dropped.
    pub(super) async fn restore_shadow(&self, tenant: &Arc<Tenant>, app: &Arc<RunningApp>) {
        let record = self.inner.versions.record(tenant.name(), app.name());
        let Some(shadow) = record.ok().flatten().and_then(|r| r.shadow) else {
            return;
        };
        let Some(component) = self.component_of(tenant.name(), app) else {
            return;
        };
        let started = match self.kept_bytes(&shadow.hash).await {
            Ok(bytes) => match self.load_shadow(tenant, &component, bytes).await {
                Ok(loaded) => app
                    .start_shadow(loaded, f64::from(shadow.sample_percent) / 100.0)
                    .map_err(|error| one_line(&error)),
                Err(reason) => Err(reason),
            },
            Err(reason) => Err(reason),
        };
        match started {
            Ok(()) => tracing::info!(tenant = %tenant.name(), app = %app.name(),
                hash = %shadow.hash, "shadow version started again"),
            Err(reason) => tracing::warn!(tenant = %tenant.name(), app = %app.name(),
                hash = %shadow.hash, "cannot start the shadow version again: {reason}"),
        }
    }

    /// Compiles and checks a shadow's bytes under the tenant's policy.
    async fn load_shadow(
        &self,
        tenant: &Arc<Tenant>,
        component: &str,
        wasm: Vec<u8>,
    ) -> Result<LoadedComponent, String> {
        let log = LogSink::new();
        let runtime = &self.inner.runtime;
        LoadedComponent::from_bytes(runtime, component, wasm, tenant.policy(), &log)
            .await
            .map_err(|error| one_line(&error))
    }

    /// The component name `app` runs as in `tenant`.
    pub(super) fn component_of(&self, tenant: &str, app: &Arc<RunningApp>) -> Option<String> {
        self.with_tenants(|tenants| {
            let run = tenants.get(tenant)?;
            run.components
                .iter()
                .find(|(_, c)| Arc::ptr_eq(&c.app, app))
                .map(|(name, _)| name.clone())
        })
    }

    /// Records `shadow` for `app` of `tenant` (keeping `bytes` first, when given), off the
    /// async workers; a failure is reported by readiness, the shadow runs all the same.
    async fn persist_shadow(
        &self,
        tenant: &str,
        app: &str,
        shadow: Option<ShadowRecord>,
        bytes: Option<Vec<u8>>,
    ) {
        let (fleet, tenant, app) = (self.clone(), tenant.to_owned(), app.to_owned());
        let written = tokio::task::spawn_blocking(move || {
            let versions = &fleet.inner.versions;
            let kept = match (&shadow, bytes) {
                (Some(shadow), Some(bytes)) => versions.keep_bytes(&shadow.hash, &bytes),
                _ => Ok(()),
            };
            kept.and_then(|()| versions.set_shadow(&tenant, &app, shadow))
                .map_err(|error| one_line(&error))
        })
        .await;
        let written = written.unwrap_or_else(|error| Err(format!("state directory: {error}")));
        self.note_state(written);
    }
}
