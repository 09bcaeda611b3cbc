//! Tenants: who owns a component, what they are granted, and whether they may run.
//!
//! A tenant has a name, the streams it may subscribe to and publish to, the limits of its
//! calls, and a quarantine gate. A component that subscribes to (or dead-letters into) a stream
//! its tenant is not granted is refused before it runs. A tenant whose calls keep failing is
//! quarantined after a configurable number of consecutive failures: its shards stop being
//! delivered (nothing is lost: records wait unhandled behind the checkpoint) until the operator
//! resumes it, or a rollback of the app whose failures caused it lifts it. An operator's pause
//! stops them the same way but is a state of its own: lifting a quarantine never lifts a pause.
//! Other tenants are not affected. Its instances' memory is counted together, live and shadow,
//! against its optional budget ([`MemoryBudget`]).

mod memory;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::component::{LoadedComponent, TrapKind};
pub use crate::limits::{CopyLimits, Limits, LogLimits, WriteLimits};
use crate::policy::{SandboxPolicy, StreamGrant};
pub use memory::{InstanceRole, MemoryBudget, MemoryReservation, ReservedMemory};
use ruststream_common::sync::lock;

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
    /// An operator's settings send a subscription's counted copies to a retry stream the
    /// tenant may not publish to.
    #[error(
        "tenant `{tenant}`, component `{component}`: subscriber `{subscriber}` writes its \
         counted copies to retry stream `{stream}`, which the tenant may not publish to (add it \
         to the tenant's `publish` list)"
    )]
    RetryStreamNotGranted {
        /// The tenant.
        tenant: String,
        /// The component declaring the subscription.
        component: String,
        /// The subscription.
        subscriber: String,
        /// Its retry stream.
        stream: String,
    },
    /// A subscription's retry stream is not a stream of its own: it is the stream it reads, or
    /// where its records given up on go.
    #[error(
        "tenant `{tenant}`, component `{component}`: subscriber `{subscriber}`'s retry stream \
         `{stream}` is {clash}; give its copies a stream of their own"
    )]
    RetryStreamNotOwn {
        /// The tenant.
        tenant: String,
        /// The component declaring the subscription.
        component: String,
        /// The subscription.
        subscriber: String,
        /// Its retry stream.
        stream: String,
        /// What else the stream is, and what would go wrong.
        clash: &'static str,
    },
}

/// A tenant of the host: its grants, its sandbox policy, its quarantine gate, and the memory
/// its instances reserve.
#[derive(Debug)]
pub struct Tenant {
    subscribe: StreamGrant,
    policy: Arc<SandboxPolicy>,
    gate: Gate,
    memory: Arc<MemoryBudget>,
}

impl Tenant {
    /// A tenant granted nothing, with the default limits and quarantine after 10 consecutive
    /// failed calls.
    pub fn new(name: impl Into<String>) -> Self {
        let policy = SandboxPolicy::new(name, Limits::default(), StreamGrant::none());
        let memory = MemoryBudget::new(policy.tenant(), None);
        Self {
            subscribe: StreamGrant::none(),
            policy: Arc::new(policy),
            gate: Gate::new(10),
            memory: Arc::new(memory),
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
        let budget = limits.memory_budget.map(|bytes| bytes as u64);
        self.memory = Arc::new(MemoryBudget::new(&name, budget));
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

    /// Whether its components may read `stream` (the host then writes their counted copies
    /// back to it too).
    pub fn may_subscribe(&self, stream: &str) -> bool {
        self.subscribe.allows(stream)
    }

    /// Its sandbox policy, as its components' instances and pipelines apply it.
    pub fn policy(&self) -> &Arc<SandboxPolicy> {
        &self.policy
    }

    /// The memory its instances on this host reserve, live and shadow, and its budget
    /// ([`Limits::memory_budget`]).
    pub fn memory(&self) -> &Arc<MemoryBudget> {
        &self.memory
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

    /// Counts a failed call of `app`'s component; returns true if this failure quarantined the
    /// tenant (then the quarantine is `app`'s: see [`lift_quarantine_of`](Self::lift_quarantine_of)).
    pub fn call_failed(&self, app: &str, kind: TrapKind) -> bool {
        let failures = self.gate.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if self.gate.threshold == 0 || failures < self.gate.threshold || self.is_quarantined() {
            return false;
        }
        let reason = format!("{failures} consecutive failed calls, the last one: {kind}");
        tracing::error!(tenant = %self.name(), app, %reason, "tenant quarantined: its shards are paused until it is resumed");
        self.gate.update(|state| {
            state.quarantine = Some(Quarantine {
                reason,
                app: app.to_owned(),
            });
        });
        true
    }

    /// Whether its shards are stopped: quarantined, or paused by an operator.
    pub fn is_stopped(&self) -> bool {
        *self.gate.stopped.borrow()
    }

    /// Whether its failures quarantined it (an operator's pause is not a quarantine).
    pub fn is_quarantined(&self) -> bool {
        lock(&self.gate.state).quarantine.is_some()
    }

    /// Whether `app`'s failures quarantined it.
    pub fn is_quarantined_by(&self, app: &str) -> bool {
        let state = lock(&self.gate.state);
        state.quarantine.as_ref().is_some_and(|q| q.app == app)
    }

    /// Whether an operator paused it.
    pub fn is_paused(&self) -> bool {
        lock(&self.gate.state).pause.is_some()
    }

    /// Why the tenant is quarantined, if it is.
    pub fn quarantine_reason(&self) -> Option<String> {
        let state = lock(&self.gate.state);
        state.quarantine.as_ref().map(|q| q.reason.clone())
    }

    /// Why an operator paused the tenant, if one did.
    pub fn pause_reason(&self) -> Option<String> {
        lock(&self.gate.state).pause.clone()
    }

    /// Pauses the tenant for `reason` (an operator's pause): its shards stop being delivered
    /// at the next call boundary, what they read waits parked, and [`resume`](Self::resume)
    /// lets them go on where they stopped. Separate from a quarantine: lifting one never lifts
    /// the other.
    pub fn pause(&self, reason: impl Into<String>) {
        let reason = reason.into();
        tracing::warn!(tenant = %self.name(), %reason, "tenant paused: its shards are paused until it is resumed");
        self.gate.update(|state| state.pause = Some(reason));
    }

    /// The operator's resume: lifts a pause and a quarantine alike; delivery resumes where it
    /// stopped.
    pub fn resume(&self) {
        self.gate.failures.store(0, Ordering::Relaxed);
        self.gate.update(|state| *state = GateState::default());
        tracing::info!(tenant = %self.name(), "tenant resumed");
    }

    /// Lifts a quarantine, whichever app's failures caused it, and leaves an operator's pause
    /// in place. Returns whether there was one.
    pub fn lift_quarantine(&self) -> bool {
        self.lift_quarantine_if(|_| true)
    }

    /// Lifts the quarantine `app`'s failures caused (a rollback of `app` took the failing
    /// version away), and no other: another app's quarantine and an operator's pause stay.
    /// Returns whether it lifted one.
    pub fn lift_quarantine_of(&self, app: &str) -> bool {
        self.lift_quarantine_if(|quarantine| quarantine.app == app)
    }

    fn lift_quarantine_if(&self, whose: impl Fn(&Quarantine) -> bool) -> bool {
        let mut lifted = false;
        self.gate.update(|state| {
            if state.quarantine.as_ref().is_some_and(&whose) {
                state.quarantine = None;
                lifted = true;
            }
        });
        if lifted {
            self.gate.failures.store(0, Ordering::Relaxed);
            tracing::info!(tenant = %self.name(), "tenant's quarantine lifted");
        }
        lifted
    }

    /// Changes when the tenant's shards are stopped or go on again.
    pub fn watch_stopped(&self) -> watch::Receiver<bool> {
        self.gate.stopped.subscribe()
    }
}

/// A tenant's quarantine: why, and whose failures caused it.
#[derive(Debug, Clone)]
struct Quarantine {
    reason: String,
    app: String,
}

#[derive(Debug, Default)]
struct GateState {
    quarantine: Option<Quarantine>,
    /// An operator's pause, and why.
    pause: Option<String>,
}

#[derive(Debug)]
struct Gate {
    threshold: u32,
    failures: AtomicU32,
    /// Whether delivery is stopped: kept equal to "quarantined or paused", for watchers.
    stopped: watch::Sender<bool>,
    state: Mutex<GateState>,
}

impl Gate {
    fn new(threshold: u32) -> Self {
        Self {
            threshold,
            failures: AtomicU32::new(0),
            stopped: watch::Sender::new(false),
            state: Mutex::new(GateState::default()),
        }
    }

    /// Changes the state and tells watchers whether delivery is now stopped.
    fn update(&self, change: impl FnOnce(&mut GateState)) {
        let mut state = lock(&self.state);
        change(&mut state);
        let stopped = state.quarantine.is_some() || state.pause.is_some();
        self.stopped
            .send_if_modified(|now| std::mem::replace(now, stopped) != stopped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_failures_quarantine_and_resume_lifts_it() {
        let tenant = Tenant::new("acme").quarantine_after(3);
        assert!(!tenant.call_failed("ledger", TrapKind::Panic));
        tenant.call_succeeded();
        assert!(!tenant.call_failed("ledger", TrapKind::Panic));
        assert!(!tenant.call_failed("ledger", TrapKind::Deadline));
        assert!(!tenant.is_quarantined());
        assert!(tenant.call_failed("ledger", TrapKind::Deadline));
        assert!(tenant.is_quarantined() && tenant.is_stopped());
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
    fn a_pause_and_a_quarantine_are_lifted_each_by_its_own() {
        let tenant = Tenant::new("acme").quarantine_after(1);
        let stopped = tenant.watch_stopped();
        tenant.pause("maintenance");
        assert!(tenant.call_failed("ledger", TrapKind::Panic));
        assert!(tenant.is_paused() && tenant.is_quarantined());
        assert!(
            !tenant.lift_quarantine_of("audit"),
            "another app's rollback lifts nothing"
        );
        assert!(tenant.lift_quarantine_of("ledger"));
        assert!(!tenant.is_quarantined());
        assert!(tenant.is_stopped(), "the operator's pause stays");
        assert_eq!(tenant.pause_reason().as_deref(), Some("maintenance"));
        assert!(*stopped.borrow());
        tenant.resume();
        assert!(!tenant.is_stopped() && !*stopped.borrow());
    }

    #[test]
    fn zero_never_quarantines() {
        let tenant = Tenant::new("acme").quarantine_after(0);
        for _ in 0..100 {
            assert!(!tenant.call_failed("ledger", TrapKind::Panic));
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
