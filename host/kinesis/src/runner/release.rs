//! Releases: one version of an app's component as the host runs it, and what each of its
//! subscriptions' shard workers take from it. A swap publishes a new release to the workers,
//! which change over between two calls.

use std::collections::HashMap;
use std::sync::Arc;

use ruststream_runtime::{
    LoadedComponent, Tenant,
    app::{StartPosition, SubscriptionSpec},
    pipeline::PipelineEnv,
    rollout::CallStats,
};

use super::Host;
use super::settings::OperatorSettings;
use super::status::VersionInfo;

/// One version of an app: its component, the environment its instances run in, and the
/// counts of its calls a rollout judges it by.
pub(crate) struct Release {
    pub component: LoadedComponent,
    pub env: PipelineEnv,
    pub calls: Arc<CallStats>,
    /// The operator's settings, by subscriber name.
    pub settings: HashMap<String, OperatorSettings>,
}

impl Release {
    pub(crate) fn new(
        host: &Host,
        component: LoadedComponent,
        tenant: &Arc<Tenant>,
        settings: HashMap<String, OperatorSettings>,
        window: u32,
    ) -> Self {
        let calls = Arc::new(CallStats::new(window));
        let env = PipelineEnv {
            component: component.env(
                tenant.policy().clone(),
                host.publisher.clone(),
                host.clock.clone(),
                host.log.clone(),
            ),
            tenant: tenant.clone(),
            observer: host.observer.clone(),
            calls: Some(calls.clone()),
        };
        Self {
            component,
            env,
            calls,
            settings,
        }
    }

    pub(crate) fn info(&self) -> VersionInfo {
        VersionInfo {
            component: self.component.name().to_owned(),
            version: self.component.app().version.clone(),
            content_hash: self.component.content_hash().to_owned(),
        }
    }

    /// What the workers of `spec` (one of this release's subscriptions) run. `rewind` tells
    /// them to read again from their checkpoint when they hold records (a rollback).
    pub(crate) fn for_subscription(
        self: &Arc<Self>,
        spec: &SubscriptionSpec,
        rewind: u64,
    ) -> Arc<SubscriptionRelease> {
        let spec = match self.settings.get(&spec.name) {
            Some(settings) => settings.apply(spec),
            None => spec.clone(),
        };
        Arc::new(SubscriptionRelease {
            release: self.clone(),
            start: spec.start.clone(),
            spec: Arc::new(spec),
            rewind,
        })
    }

    /// Whether the operator lets subscription `name` run.
    pub(crate) fn enabled(&self, name: &str) -> bool {
        self.settings.get(name).is_none_or(|s| s.enabled)
    }
}

/// A release as one subscription's workers take it.
pub(crate) struct SubscriptionRelease {
    pub release: Arc<Release>,
    /// The subscription as this release declares it.
    pub spec: Arc<SubscriptionSpec>,
    /// Where shards without a checkpoint start.
    pub start: Option<StartPosition>,
    /// Bumped by each rollback: a worker seeing it move while it holds records reads its
    /// shard again from the checkpoint, so the held records reach the version rolled back to.
    pub rewind: u64,
}

impl SubscriptionRelease {
    /// What the workers of the subscription's retry stream run, when it has one: the same
    /// release, the subscription as
    /// [`reading_retry_stream`](ruststream_runtime::app::SubscriptionSpec::reading_retry_stream)
    /// makes it.
    pub(crate) fn reading_retry_stream(&self) -> Option<Arc<Self>> {
        let spec = self.spec.reading_retry_stream()?;
        Some(Arc::new(Self {
            release: self.release.clone(),
            start: spec.start.clone(),
            spec: Arc::new(spec),
            rewind: self.rewind,
        }))
    }
}
