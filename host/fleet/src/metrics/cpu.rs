//! Each tenant's CPU on this host's compute threads, read from the runtime at scrape time:
//! what its calls ran and how long they waited for a slot, by role (live, shadow). Counters in
//! seconds, written here because the recorder's counters hold whole numbers.

use std::fmt::Write as _;

use ruststream_runtime::cpu::CpuUsage;
use ruststream_runtime::metrics::label;

use super::shards::labels;

/// CPU time a tenant's calls ran on the compute threads (s).
pub(crate) const CPU_SECONDS: &str = "ruststream_tenant_cpu_seconds_total";
/// Time a tenant's calls were ready to run and waited for a compute slot (s).
pub(crate) const CPU_WAIT_SECONDS: &str = "ruststream_tenant_cpu_wait_seconds_total";

/// A counter: its name, its help, and its value for one tenant and role.
type UsageCounter = (&'static str, &'static str, fn(&CpuUsage) -> f64);

/// Appends both counters, one series per tenant and role, to `out`.
pub(crate) fn render(usage: &[CpuUsage], out: &mut String) {
    let counters: [UsageCounter; 2] = [
        (
            CPU_SECONDS,
            "CPU time the tenant's calls ran on the compute threads, by role (live, shadow).",
            |u| u.cpu.as_secs_f64(),
        ),
        (
            CPU_WAIT_SECONDS,
            "Time the tenant's calls were ready to run and waited for a compute slot (other \
             tenants' share), by role.",
            |u| u.waited.as_secs_f64(),
        ),
    ];
    for (name, help, value) in counters {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} counter");
        for row in usage {
            let labels = labels(&[
                (label::TENANT, &row.tenant),
                (label::ROLE, row.role.label()),
            ]);
            let _ = writeln!(out, "{name}{{{labels}}} {}", value(row));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ruststream_runtime::cpu::Role;

    use super::*;

    #[test]
    fn each_tenant_and_role_is_a_counter_in_seconds() {
        let usage = [CpuUsage {
            tenant: "a\"b".to_owned(),
            role: Role::Shadow,
            cpu: Duration::from_millis(1_500),
            waited: Duration::from_millis(250),
        }];
        let mut out = String::new();
        render(&usage, &mut out);
        assert!(
            out.contains("# TYPE ruststream_tenant_cpu_seconds_total counter"),
            "{out}"
        );
        assert!(
            out.contains(
                "ruststream_tenant_cpu_seconds_total{tenant=\"a\\\"b\",role=\"shadow\"} 1.5"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "ruststream_tenant_cpu_wait_seconds_total{tenant=\"a\\\"b\",role=\"shadow\"} 0.25"
            ),
            "{out}"
        );
    }
}
