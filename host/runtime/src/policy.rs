//! A tenant's sandbox policy, resolved once: what its components may do and within which
//! bounds. The sandbox reads this value, never the tenant it came from (as Spin resolves each
//! component's grants when the app is configured).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::cpu::Role;
use crate::limits::Limits;
use crate::log::{HostLineBudget, LogRate, LogSink};
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

    /// Whether `stream` is granted.
    pub fn allows(&self, stream: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Only(streams) => streams.contains(stream),
        }
    }

    /// `Ok` when publishing to `stream` is granted; the guest's typed error otherwise.
    ///
    /// # Errors
    /// [`PublishError::NotPermitted`] naming the stream.
    pub fn check_publish(&self, stream: &str) -> Result<(), PublishError> {
        if self.allows(stream) {
            Ok(())
        } else {
            Err(PublishError::NotPermitted(stream.to_owned()))
        }
    }
}

/// What the sandbox applies to one tenant's components: limits, grants for what they publish,
/// and the budgets and quota they share.
#[derive(Debug)]
pub struct SandboxPolicy {
    tenant: String,
    role: Role,
    limits: Limits,
    publish: StreamGrant,
    log_rate: LogRate,
    host_lines: HostLineBudget,
    quota: WriteQuota,
}

impl SandboxPolicy {
    /// The policy of tenant `tenant`'s live versions: `limits`, and `publish` for what its
    /// guests publish.
    pub fn new(tenant: impl Into<String>, limits: Limits, publish: StreamGrant) -> Self {
        Self::with_role(tenant.into(), limits, publish, Role::Live)
    }

    /// The policy of a shadow version of `live`'s tenant: the same limits and grants, with
    /// budgets and a write quota of its own (so it never spends the live version's), its
    /// calls below every live call on the compute threads (inside the tenant's share), and
    /// its series labelled `role="shadow"`.
    pub fn shadow_of(live: &Self) -> Self {
        Self::with_role(
            live.tenant.clone(),
            live.limits.clone(),
            live.publish.clone(),
            Role::Shadow,
        )
    }

    fn with_role(tenant: String, limits: Limits, publish: StreamGrant, role: Role) -> Self {
        Self {
            log_rate: LogRate::new(limits.log.lines_per_second),
            host_lines: HostLineBudget::new(limits.log.host_lines_per_second),
            quota: WriteQuota::new(&limits.writes, &tenant, role),
            tenant,
            role,
            limits,
            publish,
        }
    }

    /// Whose calls it governs: the tenant's live versions, or a shadow.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The tenant's name, for log lines and errors.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The limits of its calls, instances, output, copies and writes.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The streams its guests and its dead letters may publish to.
    pub fn publish_grant(&self) -> &StreamGrant {
        &self.publish
    }

    /// The log-lines-per-second bucket shared by its instances.
    pub(crate) fn log_rate(&self) -> &LogRate {
        &self.log_rate
    }

    /// The budget of what the host itself logs because of it.
    pub(crate) fn host_lines(&self) -> &HostLineBudget {
        &self.host_lines
    }

    /// Its write quota, shared by its guest publishes, copies and dead letters.
    pub(crate) fn write_quota(&self) -> &WriteQuota {
        &self.quota
    }

    /// Takes one record of `bytes` bytes from the tenant's write quota at `now_ms` (ms since
    /// the epoch), for a writer outside the sandbox that writes on the tenant's behalf (a
    /// dead-letter redrive): it shares the quota with the tenant's publishes and copies.
    ///
    /// # Errors
    /// How long until the record would fit, when the quota is spent for now; nothing is taken.
    pub fn take_write(&self, now_ms: u64, bytes: u64) -> Result<(), std::time::Duration> {
        self.quota.take(now_ms, bytes)
    }

    /// Says on `sink` how many of the lines the host logs because of this tenant were dropped
    /// past their budget, for every second that is over: call it periodically, so the end of
    /// a flood is reported even when nothing else happens after it.
    pub fn report_dropped_lines(&self, sink: &LogSink) {
        self.host_lines.flush(sink);
    }

    /// As [`report_dropped_lines`](Self::report_dropped_lines), seconds over or not: for the
    /// end of the tenant's run.
    pub fn summarise_dropped_lines(&self, sink: &LogSink) {
        self.host_lines.summarise(sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_exact() {
        let grant = StreamGrant::only(["ledger"]);
        assert!(grant.allows("ledger"));
        assert!(!grant.allows("ledger.dead"));
        assert!(!StreamGrant::none().allows("ledger"));
        assert!(StreamGrant::Any.allows("anything"));
        assert!(matches!(
            grant.check_publish("payments"),
            Err(PublishError::NotPermitted(stream)) if stream == "payments"
        ));
    }
}
