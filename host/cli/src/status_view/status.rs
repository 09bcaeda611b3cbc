//! The status tree of `ruststream status`: the host, its tenants and their apps; what hangs
//! under an app is drawn by its siblings.

use std::borrow::Cow;
use std::fmt::Write as _;

use ruststream_fleet::admin::model::{AppStatus, HostStatus, TenantStatus};

use super::fleet::render_fleet_tally;
use super::shadow::render_shadow;
use super::shards::render_subscription;
use super::text::{age, line, mib, short_hash, text};

/// The status as a tree, one line per host, tenant, refusal, app, subscription and shard,
/// indented two spaces per level. `now_ms` (milliseconds since the Unix epoch) turns the
/// host's timestamps into ages.
pub(crate) fn render_status(status: &HostStatus, now_ms: u64) -> String {
    let mut out = String::new();
    let owner = text(&status.owner);
    if status.ready {
        line(&mut out, 0, format_args!("host {owner}: ready"));
    } else {
        line(&mut out, 0, format_args!("host {owner}: not ready"));
        for reason in &status.not_ready {
            line(&mut out, 1, format_args!("- {}", text(reason)));
        }
    }
    if status.tenants.is_empty() {
        line(&mut out, 0, format_args!("no tenants"));
    }
    for tenant in &status.tenants {
        render_tenant(&mut out, tenant, now_ms);
    }
    out
}

fn render_tenant(out: &mut String, tenant: &TenantStatus, now_ms: u64) {
    let state = match (tenant.paused, &tenant.pause_reason) {
        (false, _) => Cow::Borrowed("running"),
        (true, None) => Cow::Borrowed("paused"),
        (true, Some(reason)) => Cow::Owned(format!("paused: {}", text(reason))),
    };
    line(
        out,
        0,
        format_args!("tenant {} ({state})", text(&tenant.name)),
    );
    let memory = &tenant.instance_memory;
    if memory.live_bytes + memory.shadow_bytes > 0 || memory.budget_bytes.is_some() {
        let budget = memory.budget_bytes.map_or(Cow::Borrowed("no budget"), |b| {
            Cow::Owned(format!("budget {}", mib(b)))
        });
        line(
            out,
            1,
            format_args!(
                "instance memory: live {}, shadow {}, {budget}",
                mib(memory.live_bytes),
                mib(memory.shadow_bytes)
            ),
        );
    }
    for refusal in &tenant.refused {
        let age = age(now_ms, refusal.at_ms);
        let (component, reason) = (text(&refusal.component), text(&refusal.reason));
        line(
            out,
            1,
            format_args!("refused {component} {age} ago: {reason}"),
        );
    }
    if tenant.apps.is_empty() {
        line(out, 1, format_args!("no apps"));
    }
    for app in &tenant.apps {
        render_app(out, app, now_ms);
    }
}

fn render_app(out: &mut String, app: &AppStatus, now_ms: u64) {
    let mut head = format!(
        "app {} {} ({}, {})",
        text(&app.name),
        text(&app.version),
        text(&app.component),
        short_hash(&app.content_hash)
    );
    if app.rollbacks > 0 {
        let _ = write!(head, ", rolled back {}x", app.rollbacks);
    }
    if let Some(fleet) = &app.fleet {
        let _ = match (&fleet.live_hash, fleet.converged) {
            (_, true) => write!(head, ", the fleet's (revision {})", fleet.revision),
            (Some(live), false) => write!(
                head,
                ", the fleet runs {} (revision {}): converging",
                short_hash(live),
                fleet.revision
            ),
            (None, false) => write!(
                head,
                ", undeployed by the fleet (revision {}): stopping",
                fleet.revision
            ),
        };
    }
    line(out, 1, format_args!("{head}"));
    if let Some(rollout) = &app.rollout {
        line(
            out,
            2,
            format_args!(
                "rollout {}: {} calls, {} failed, judged over {}",
                text(&rollout.verdict),
                rollout.calls,
                rollout.failures,
                rollout.judged_over
            ),
        );
    }
    if let Some(previous) = &app.previous {
        line(
            out,
            2,
            format_args!(
                "previous {} ({}, {})",
                text(&previous.version),
                text(&previous.component),
                short_hash(&previous.content_hash)
            ),
        );
    }
    if let Some(shadow) = &app.shadow {
        render_shadow(out, shadow);
    }
    if let Some(fleet) = &app.fleet {
        render_fleet_tally(out, fleet);
    }
    for subscription in &app.subscriptions {
        render_subscription(out, subscription, now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruststream_fleet::admin::fake::sample_status;

    #[test]
    fn the_status_tree() {
        let shown = render_status(&sample_status(), 1_012_500);
        let expected = "\
host host-a: ready
tenant acme (running)
  instance memory: live 128 MiB, shadow 0 MiB, budget 256 MiB
  refused bad.wasm 2s ago: imports `wasi:sockets`, which no tenant is granted
  app ledger 0.2.0 (ledger.wasm, #1a2b3c4d5e6f), rolled back 1x
    rollout pending: 40 calls, 1 failed, judged over 100
    previous 0.1.0 (ledger-0.1.wasm, #9f8e7d6c5b4a)
    subscription book on `ledger`
      shardId-000000000000 reading, owner host-a, checkpoint 4959, held at 4960 for 12s, \
delivered 120 (ack 100, drop 2, retry 17, retry_after 0, trapped 1), 250 ms behind, polling
      shardId-000000000001 stopped, no owner, no checkpoint, delivered 0 (ack 0, drop 0, \
retry 0, retry_after 0, trapped 0), paused
  app fresh 1.0.0 (fresh.wasm, #abc)
    subscription audit on `secret`
      error: stream `secret` is not granted to tenant `acme`
";
        assert_eq!(shown, expected, "\n{shown}");
    }

    #[test]
    fn not_ready_and_paused() {
        let mut status = sample_status();
        status.ready = false;
        status.not_ready = vec!["tenant `acme` is loading".to_owned()];
        status.tenants[0].paused = true;
        status.tenants[0].pause_reason = Some("quarantined: 3 traps".to_owned());
        status.tenants[0].apps.clear();
        status.tenants[0].refused.clear();
        status.tenants[0].instance_memory = Default::default();
        let shown = render_status(&status, 0);
        let expected = "\
host host-a: not ready
  - tenant `acme` is loading
tenant acme (paused: quarantined: 3 traps)
  no apps
";
        assert_eq!(shown, expected);
    }

    #[test]
    fn control_characters_are_escaped() {
        let mut status = sample_status();
        status.tenants[0].name = "evil\x1b[2J".to_owned();
        status.tenants[0].apps[0].version = "1\r\nok".to_owned();
        let shown = render_status(&status, 0);
        assert!(shown.contains(r"tenant evil\u{1b}[2J (running)"), "{shown}");
        assert!(shown.contains(r"app ledger 1\u{d}\u{a}ok "), "{shown}");
        assert!(!shown.chars().any(|c| c.is_control() && c != '\n'));
    }
}
