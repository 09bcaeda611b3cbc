//! Tenants: who owns a component, what they are granted, and whether they may run.
//!
//! A tenant has a name, the streams it may subscribe to and publish to, the limits of its
//! calls, and a quarantine gate. A component that subscribes to (or dead-letters into) a stream
//! its tenant is not granted is refused before it runs. A tenant whose calls keep failing is
//! paused after a configurable number of consecutive failures: its shards stop being delivered
//! (nothing is lost: records wait unhandled behind the checkpoint) until the operator resumes
//! it. Other tenants are not affected.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::component::{LoadedComponent, TrapKind};
use crate::limits::Limits;
use crate::policy::{SandboxPolicy, StreamGrant};
use crate::sync::lock;

/// Why a tenant's component may not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TenantError {
    /// A subscription reads a stream the tenant is not granted.
    #[error(
        "tenant `{tenant}`, component `{component}`: subscriber `{subscriber}` reads stream \
         `{stream}`, which the tenant is not granted"
    )]
    SubscribeNotGranted {
        /// The tenant.
        tenant: String,
        /// The component declaring the subscription.
        component: String,
        /// The subscription.
        subscriber: String,
        /// The stream it reads.
        stream: String,
    },
    /// A subscription dead-letters into a stream the tenant may not publish to.
    #[error(
        "tenant `{tenant}`, component `{component}`: subscriber `{subscriber}` dead-letters \
         into stream `{stream}`, which the tenant may not publish to"
    )]
    DeadLetterNotGranted {
        /// The tenant.
        tenant: String,
        /// The component declaring the subscription.
        component: String,
        /// The subscription.
        subscriber: String,
        /// Its dead-letter stream.
        stream: String,
    },
}

/// A tenant of the host: its grants, its sandbox policy, and its quarantine gate.
#[derive(Debug)]
pub struct Tenant {
    subscribe: StreamGrant,
    policy: Arc<SandboxPolicy>,
    gate: Gate,
}

impl Tenant {
    /// A tenant granted nothing, with the default limits and quarantine after 10 consecutive
    /// failed calls.
    pub fn new(name: impl Into<String>) -> Self {
        let policy = SandboxPolicy::new(name, Limits::default(), StreamGrant::none());
        Self {
            subscribe: StreamGrant::none(),
            policy: Arc::new(policy),
            gate: Gate::new(10),
        }
    }

    /// A tenant granted every stream: for hosts that run only trusted components.
    pub fn trusted(name: impl Into<String>) -> Self {
        Self::new(name)
            .subscribe(StreamGrant::Any)
            .publish(StreamGrant::Any)
    }

    /// The streams its components may read.
    pub fn subscribe(mut self, grant: StreamGrant) -> Self {
        self.subscribe = grant;
        self
    }

    /// The streams its components may publish to, dead letters included.
    pub fn publish(self, grant: StreamGrant) -> Self {
        let limits = self.policy.limits().clone();
        self.with_policy(limits, grant)
    }

    /// Its limits (instead of the defaults).
    pub fn limits(self, limits: Limits) -> Self {
        let grant = self.policy.publish_grant().clone();
        self.with_policy(limits, grant)
    }

    fn with_policy(mut self, limits: Limits, publish: StreamGrant) -> Self {
        let name = self.policy.tenant().to_owned();
        self.policy = Arc::new(SandboxPolicy::new(name, limits, publish));
        self
    }

    /// Pauses the tenant after `failures` consecutive failed calls; 0 never pauses it.
    pub fn quarantine_after(mut self, failures: u32) -> Self {
        self.gate = Gate::new(failures);
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.policy.tenant()
    }

    /// Its sandbox policy, as its components' instances and pipelines apply it.
    pub fn policy(&self) -> &Arc<SandboxPolicy> {
        &self.policy
    }

    /// Checks that every stream `component` subscribes to, and every dead-letter stream it
    /// declares, is granted.
    ///
    /// # Errors
    /// The first stream that is not granted, naming tenant, component and stream.
    pub fn admit(&self, component: &LoadedComponent) -> Result<(), TenantError> {
        for s in &component.app().subscriptions {
            if !self.subscribe.allows(&s.stream) {
                return Err(TenantError::SubscribeNotGranted {
                    tenant: self.name().to_owned(),
                    component: component.name().to_owned(),
                    subscriber: s.name.clone(),
                    stream: s.stream.clone(),
                });
            }
            if let Some(dead) = s
                .retry
                .dead_letter
                .as_ref()
                .filter(|d| !self.policy.publish_grant().allows(d))
            {
                return Err(TenantError::DeadLetterNotGranted {
                    tenant: self.name().to_owned(),
                    component: component.name().to_owned(),
                    subscriber: s.name.clone(),
                    stream: dead.clone(),
                });
            }
        }
        Ok(())
    }

    /// Counts a call that returned outcomes.
    pub fn call_succeeded(&self) {
        self.gate.failures.store(0, Ordering::Relaxed);
    }

    /// Counts a failed call; returns true if this failure quarantined the tenant.
    pub fn call_failed(&self, kind: TrapKind) -> bool {
        let failures = self.gate.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if self.gate.threshold == 0 || failures < self.gate.threshold || self.is_quarantined() {
            return false;
        }
        let reason = format!("{failures} consecutive failed calls, the last one: {kind}");
        tracing::error!(tenant = %self.name(), %reason, "tenant quarantined: its shards are paused until it is resumed");
        *lock(&self.gate.reason) = Some(reason);
        self.gate.paused.send_replace(true);
        true
    }

    /// Whether its shards are paused.
    pub fn is_quarantined(&self) -> bool {
        *self.gate.paused.borrow()
    }

    /// Why the tenant is quarantined, if it is.
    pub fn quarantine_reason(&self) -> Option<String> {
        lock(&self.gate.reason).clone()
    }

    /// Pauses the tenant as a quarantine would, for `reason` (an operator's pause): its shards
    /// stop being delivered at the next call boundary, what they read waits parked, and
    /// [`resume`](Self::resume) lets them go on where they stopped.
    pub fn pause(&self, reason: impl Into<String>) {
        let reason = reason.into();
        tracing::warn!(tenant = %self.name(), %reason, "tenant paused: its shards are paused until it is resumed");
        *lock(&self.gate.reason) = Some(reason);
        self.gate.paused.send_replace(true);
    }

    /// Lifts a quarantine: delivery resumes where it stopped.
    pub fn resume(&self) {
        self.gate.failures.store(0, Ordering::Relaxed);
        *lock(&self.gate.reason) = None;
        self.gate.paused.send_replace(false);
        tracing::info!(tenant = %self.name(), "tenant resumed");
    }

    /// Changes when the tenant is quarantined or resumed.
    pub fn watch_quarantine(&self) -> watch::Receiver<bool> {
        self.gate.paused.subscribe()
    }
}

#[derive(Debug)]
struct Gate {
    threshold: u32,
    failures: AtomicU32,
    paused: watch::Sender<bool>,
    reason: Mutex<Option<String>>,
}

impl Gate {
    fn new(threshold: u32) -> Self {
        Self {
            threshold,
            failures: AtomicU32::new(0),
            paused: watch::Sender::new(false),
            reason: Mutex::new(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_failures_quarantine_and_resume_lifts_it() {
        let tenant = Tenant::new("acme").quarantine_after(3);
        assert!(!tenant.call_failed(TrapKind::Panic));
        tenant.call_succeeded();
        assert!(!tenant.call_failed(TrapKind::Panic));
        assert!(!tenant.call_failed(TrapKind::Deadline));
        assert!(!tenant.is_quarantined());
        assert!(tenant.call_failed(TrapKind::Deadline));
        assert!(tenant.is_quarantined());
        assert!(
            tenant
                .quarantine_reason()
                .is_some_and(|r| r.contains("deadline"))
        );
        tenant.resume();
        assert!(!tenant.is_quarantined());
        assert_eq!(tenant.quarantine_reason(), None);
    }

    #[test]
    fn zero_never_quarantines() {
        let tenant = Tenant::new("acme").quarantine_after(0);
        for _ in 0..100 {
            assert!(!tenant.call_failed(TrapKind::Panic));
        }
        assert!(!tenant.is_quarantined());
    }

    #[test]
    fn builders_keep_each_other() {
        let limits = Limits {
            max_subscriptions: 3,
            ..Limits::default()
        };
        let tenant = Tenant::new("acme")
            .publish(StreamGrant::only(["out"]))
            .limits(limits.clone());
        assert_eq!(tenant.policy().limits(), &limits);
        assert!(tenant.policy().publish_grant().allows("out"));
        assert_eq!(tenant.policy().tenant(), "acme");
    }
}
