//! Tenants: who owns a component, what they are granted, and whether they may run.
//!
//! A tenant has a name, the streams it may subscribe to and publish to, the limits of its
//! calls, and a quarantine gate. A component that subscribes to (or dead-letters into) a stream
//! its tenant is not granted is refused before it runs. A tenant whose calls keep failing is
//! paused after a configurable number of consecutive failures: its shards stop being delivered
//! (nothing is lost: records wait unhandled behind the checkpoint) until the operator resumes
//! it. Other tenants are not affected.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::component::{Limits, LoadedComponent, LogRate, TrapKind};
use crate::log::HostLineBudget;
use crate::publish::PublishError;
use crate::quota::WriteQuota;

/// The streams a tenant may use for one purpose (subscribing, or publishing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StreamGrant {
    /// Every stream: for a host running only trusted components, and for tests.
    #[default]
    Any,
    /// Only these streams.
    Only(Arc<BTreeSet<String>>),
}

impl StreamGrant {
    /// A grant of exactly `streams`.
    pub fn only<I, S>(streams: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::Only(Arc::new(streams.into_iter().map(Into::into).collect()))
    }

    /// No stream at all.
    pub fn none() -> Self {
        Self::Only(Arc::default())
    }

    pub fn allows(&self, stream: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Only(streams) => streams.contains(stream),
        }
    }

    /// `Ok` when publishing to `stream` is granted; the guest's typed error otherwise.
    pub fn check_publish(&self, stream: &str) -> Result<(), PublishError> {
        if self.allows(stream) {
            Ok(())
        } else {
            Err(PublishError::NotPermitted(stream.to_owned()))
        }
    }
}

/// Why a tenant's component may not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenantError {
    #[error(
        "tenant `{tenant}`, component `{component}`: subscriber `{subscriber}` reads stream \
         `{stream}`, which the tenant is not granted"
    )]
    SubscribeNotGranted {
        tenant: String,
        component: String,
        subscriber: String,
        stream: String,
    },
    #[error(
        "tenant `{tenant}`, component `{component}`: subscriber `{subscriber}` dead-letters \
         into stream `{stream}`, which the tenant may not publish to"
    )]
    DeadLetterNotGranted {
        tenant: String,
        component: String,
        subscriber: String,
        stream: String,
    },
}

/// A tenant of the host.
#[derive(Debug)]
pub struct Tenant {
    name: String,
    subscribe: StreamGrant,
    publish: StreamGrant,
    limits: Limits,
    log_rate: LogRate,
    host_lines: HostLineBudget,
    quota: WriteQuota,
    gate: Gate,
}

impl Tenant {
    /// A tenant granted nothing, with the default limits and quarantine after 10 consecutive
    /// failed calls.
    pub fn new(name: impl Into<String>) -> Self {
        let limits = Limits::default();
        Self {
            name: name.into(),
            subscribe: StreamGrant::none(),
            publish: StreamGrant::none(),
            log_rate: LogRate::new(limits.log.lines_per_second),
            host_lines: HostLineBudget::new(limits.log.host_lines_per_second),
            quota: WriteQuota::new(&limits.writes),
            limits,
            gate: Gate::new(10),
        }
    }

    /// A tenant granted every stream: for hosts that run only trusted components.
    pub fn trusted(name: impl Into<String>) -> Self {
        Self::new(name)
            .subscribe(StreamGrant::Any)
            .publish(StreamGrant::Any)
    }

    pub fn subscribe(mut self, grant: StreamGrant) -> Self {
        self.subscribe = grant;
        self
    }

    pub fn publish(mut self, grant: StreamGrant) -> Self {
        self.publish = grant;
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.log_rate = LogRate::new(limits.log.lines_per_second);
        self.host_lines = HostLineBudget::new(limits.log.host_lines_per_second);
        self.quota = WriteQuota::new(&limits.writes);
        self.limits = limits;
        self
    }

    /// Pauses the tenant after `failures` consecutive failed calls; 0 never pauses it.
    pub fn quarantine_after(mut self, failures: u32) -> Self {
        self.gate = Gate::new(failures);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn publish_grant(&self) -> &StreamGrant {
        &self.publish
    }

    pub fn call_limits(&self) -> &Limits {
        &self.limits
    }

    /// The log-lines-per-second bucket shared by the tenant's instances.
    pub fn log_rate(&self) -> &LogRate {
        &self.log_rate
    }

    /// The budget of what the host itself logs because of this tenant.
    pub fn host_lines(&self) -> &HostLineBudget {
        &self.host_lines
    }

    /// The tenant's write quota, shared by its guest publishes, copies and dead letters.
    pub fn write_quota(&self) -> &WriteQuota {
        &self.quota
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
                    tenant: self.name.clone(),
                    component: component.name().to_owned(),
                    subscriber: s.name.clone(),
                    stream: s.stream.clone(),
                });
            }
            if let Some(dead) = s
                .retry
                .dead_letter
                .as_ref()
                .filter(|d| !self.publish.allows(d))
            {
                return Err(TenantError::DeadLetterNotGranted {
                    tenant: self.name.clone(),
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
        tracing::error!(tenant = %self.name, %reason, "tenant quarantined: its shards are paused until it is resumed");
        *lock(&self.gate.reason) = Some(reason);
        self.gate.paused.send_replace(true);
        true
    }

    pub fn is_quarantined(&self) -> bool {
        *self.gate.paused.borrow()
    }

    /// Why the tenant is quarantined, if it is.
    pub fn quarantine_reason(&self) -> Option<String> {
        lock(&self.gate.reason).clone()
    }

    /// Lifts a quarantine: delivery resumes where it stopped.
    pub fn resume(&self) {
        self.gate.failures.store(0, Ordering::Relaxed);
        *lock(&self.gate.reason) = None;
        self.gate.paused.send_replace(false);
        tracing::info!(tenant = %self.name, "tenant resumed");
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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
    fn grants_are_exact() {
        let grant = StreamGrant::only(["ledger"]);
        assert!(grant.allows("ledger"));
        assert!(!grant.allows("ledger.dead"));
        assert!(!StreamGrant::none().allows("ledger"));
        assert!(StreamGrant::Any.allows("anything"));
        assert_eq!(
            grant.check_publish("payments"),
            Err(PublishError::NotPermitted("payments".into()))
        );
    }
}
