//! The fleet's part of an app in the status tree: its summed rollout and shadow, and what
//! each host runs and tallies.

use ruststream_fleet::admin::model::FleetVersion;

use super::text::{line, short_hash, text};

/// The fleet's sums of the rollout and the shadow, and each host's part.
pub(super) fn render_fleet_tally(out: &mut String, fleet: &FleetVersion) {
    if let Some(sum) = &fleet.rollout {
        line(
            out,
            2,
            format_args!(
                "fleet rollout: {} calls, {} failed, over {} hosts",
                sum.calls,
                sum.failures,
                fleet.hosts.iter().filter(|h| h.rollout.is_some()).count()
            ),
        );
    }
    if let Some(sum) = &fleet.shadow {
        line(
            out,
            2,
            format_args!(
                "fleet shadow {}: {} agree, {} disagree, {} trapped, {} skipped",
                short_hash(&sum.hash),
                sum.agree,
                sum.disagree,
                sum.trap,
                sum.skipped
            ),
        );
    }
    if !fleet.running.is_empty() {
        let hosts: Vec<String> = (fleet.running.iter())
            .map(|host| {
                let hash = host
                    .hash
                    .as_deref()
                    .map_or("nothing".to_owned(), short_hash);
                let state = if host.converged {
                    "converged"
                } else {
                    "converging"
                };
                format!("{} {hash} ({state})", text(&host.host))
            })
            .collect();
        line(out, 2, format_args!("fleet hosts: {}", hosts.join(", ")));
    }
    if fleet.rollout.is_some() || fleet.shadow.is_some() {
        for host in &fleet.hosts {
            let rollout = host.rollout.map_or_else(String::new, |r| {
                format!(" rollout {} calls, {} failed;", r.calls, r.failures)
            });
            let shadow = host.shadow.as_ref().map_or_else(String::new, |s| {
                format!(
                    " shadow {} agree, {} disagree, {} trapped;",
                    s.agree, s.disagree, s.trap
                )
            });
            line(
                out,
                3,
                format_args!("host {}:{rollout}{shadow}", text(&host.host)),
            );
        }
    }
}
