//! The fleet as the admin API sees it: status as JSON, readiness, and the operations.

use std::sync::Arc;

use ruststream_kinesis::{
    RunningApp,
    runner::{AppVersions, SeekError, SubscriptionStatus},
};
use ruststream_runtime::app::StartPosition;

use super::{Fleet, TenantRun};
use crate::admin::control::{Control, ControlError};
use crate::admin::model::{
    AppStatus, AppVersionList, Deployed, HostHistory, HostStatus, Refusal, SeekPosition,
    ShadowDeployed, ShadowDropped, TenantStatus, Undeployed,
};

/// Why an operator paused a tenant, as status shows it.
pub(super) const PAUSED_BY_OPERATOR: &str = "paused by an operator";

impl Control for Fleet {
    async fn start_redrive(
        &self,
        request: crate::admin::model::RedriveRequest,
    ) -> Result<serde_json::Value, ControlError> {
        Fleet::start_redrive(self, request).await
    }

    fn redrive(&self, id: &str) -> Result<serde_json::Value, ControlError> {
        self.redrive_progress(id)
    }

    fn redrives(&self) -> Vec<crate::admin::model::RedriveListed> {
        self.redrive_list()
    }

    fn recent_errors(
        &self,
        tenant: Option<&str>,
        since_ms: u64,
        limit: usize,
    ) -> Vec<crate::admin::model::ErrorEvent> {
        self.inner.recent_errors.read(tenant, since_ms, limit)
    }

    fn status(&self) -> HostStatus {
        let not_ready = self.not_ready();
        let tenants = self.with_tenants(|tenants| {
            tenants
                .iter()
                .map(|(name, run)| tenant_status(self, name, run))
                .collect()
        });
        HostStatus {
            owner: self.host().config().owner_id.clone(),
            ready: not_ready.is_empty(),
            not_ready,
            tenants,
        }
    }

    fn history(&self, tenant: Option<&str>) -> HostHistory {
        self.inner.history.read(tenant)
    }

    fn not_ready(&self) -> Vec<String> {
        Fleet::not_ready(self)
    }

    fn notices(&self) -> Vec<String> {
        Fleet::notices(self)
    }

    async fn seek(
        &self,
        tenant: &str,
        app: &str,
        subscriber: &str,
        position: SeekPosition,
    ) -> Result<Vec<String>, ControlError> {
        self.seek_for_fleet(tenant, app, subscriber, position).await
    }

    async fn pause(&self, tenant: &str) -> Result<(), ControlError> {
        self.pause_for_fleet(tenant).await
    }

    async fn resume(&self, tenant: &str) -> Result<(), ControlError> {
        self.resume_for_fleet(tenant).await
    }

    async fn deploy(
        &self,
        tenant: &str,
        component: &str,
        wasm: Vec<u8>,
    ) -> Result<Deployed, ControlError> {
        Fleet::deploy_for_fleet(self, tenant, component, wasm).await
    }

    async fn undeploy(&self, tenant: &str, component: &str) -> Result<Undeployed, ControlError> {
        Fleet::undeploy_for_fleet(self, tenant, component).await
    }

    async fn reload(&self) -> Result<Vec<Deployed>, ControlError> {
        Fleet::reload(self).await
    }

    async fn rollback(
        &self,
        tenant: &str,
        app: &str,
        to: Option<String>,
    ) -> Result<Deployed, ControlError> {
        match to {
            Some(to) => self.roll_back_to(tenant, app, &to).await,
            None => self.roll_back(tenant, app).await,
        }
    }

    fn versions(&self, tenant: &str, app: &str) -> Result<AppVersionList, ControlError> {
        Fleet::versions(self, tenant, app)
    }

    async fn deploy_shadow(
        &self,
        tenant: &str,
        component: &str,
        wasm: Vec<u8>,
        sample_percent: u32,
    ) -> Result<ShadowDeployed, ControlError> {
        Fleet::deploy_shadow_for_fleet(self, tenant, component, wasm, sample_percent).await
    }

    async fn abort_shadow(&self, tenant: &str, app: &str) -> Result<ShadowDropped, ControlError> {
        Fleet::abort_shadow_for_fleet(self, tenant, app).await
    }

    async fn promote(&self, tenant: &str, app: &str) -> Result<Deployed, ControlError> {
        Fleet::promote_for_fleet(self, tenant, app).await
    }
}

impl Fleet {
    pub(super) fn tenant(
        &self,
        name: &str,
    ) -> Result<Arc<ruststream_runtime::Tenant>, ControlError> {
        self.with_tenants(|tenants| tenants.get(name).map(|run| run.tenant.clone()))
            .ok_or_else(|| ControlError::UnknownTenant(name.to_owned()))
    }

    pub(super) fn app(&self, tenant: &str, app: &str) -> Result<Arc<RunningApp>, ControlError> {
        self.with_tenants(|tenants| {
            let run = tenants
                .get(tenant)
                .ok_or_else(|| ControlError::UnknownTenant(tenant.to_owned()))?;
            run.components
                .values()
                .find(|c| c.app.name() == app)
                .map(|c| c.app.clone())
                .ok_or_else(|| ControlError::UnknownApp {
                    tenant: tenant.to_owned(),
                    app: app.to_owned(),
                })
        })
    }
}

/// `error` of a seek of `subscriber` of `tenant`'s `app`, as the admin API answers it.
pub(super) fn seek_refused(
    tenant: &str,
    app: &str,
    subscriber: &str,
    error: SeekError,
) -> ControlError {
    match error {
        SeekError::UnknownSubscriber(_) => ControlError::UnknownSubscriber {
            tenant: tenant.to_owned(),
            app: app.to_owned(),
            subscriber: subscriber.to_owned(),
        },
        other => ControlError::Seek(ruststream_common::escape::one_line(&other)),
    }
}

pub(super) fn start_position(position: SeekPosition) -> StartPosition {
    match position {
        SeekPosition::Horizon => StartPosition::Horizon,
        SeekPosition::Latest => StartPosition::Latest,
        SeekPosition::Timestamp { ms } => StartPosition::AtTimestamp(ms),
        SeekPosition::Sequence { shard, sequence } => StartPosition::AtSequence {
            shard_id: shard,
            sequence_number: sequence,
        },
    }
}

fn tenant_status(fleet: &Fleet, name: &str, run: &TenantRun) -> TenantStatus {
    let paused = run.tenant.is_stopped();
    TenantStatus {
        name: name.to_owned(),
        paused,
        pause_reason: run.tenant.quarantine_reason().or(run.tenant.pause_reason()),
        apps: run
            .components
            .values()
            .map(|c| {
                let mut status = app_status(&c.app, paused);
                status.fleet = fleet.fleet_version(name, &status.component, &status.content_hash);
                status
            })
            .collect(),
        refused: run
            .refused
            .iter()
            .map(|(component, refused)| Refusal {
                component: component.clone(),
                reason: refused.reason.clone(),
                at_ms: refused.at_ms,
            })
            .collect(),
        instance_memory: run.tenant.memory().reserved(),
    }
}

fn app_status(app: &RunningApp, paused: bool) -> AppStatus {
    let AppVersions {
        current,
        previous,
        rollout,
        rollbacks,
    } = app.versions();
    AppStatus {
        name: app.name().to_owned(),
        component: current.component,
        version: current.version,
        content_hash: current.content_hash,
        previous,
        rollout,
        rollbacks,
        shadow: app.shadow(),
        fleet: None,
        subscriptions: app
            .status()
            .into_iter()
            .map(|s| subscription_status(s, paused))
            .collect(),
    }
}

/// The runner's status as sent: a shard is paused if its worker saw its tenant stopped or the
/// tenant is stopped now (the worker notices at its next turn).
fn subscription_status(mut status: SubscriptionStatus, paused: bool) -> SubscriptionStatus {
    for shard in status.shards.values_mut() {
        shard.paused |= paused;
    }
    status
}
