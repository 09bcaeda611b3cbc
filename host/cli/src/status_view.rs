//! What the admin verbs print: the status tree of `ruststream status` and the one-line
//! answers of `seek`, `pause`, `deploy`, `reload` and `rollback`.
//!
//! Every string from the host is shown with its control characters escaped: names, reasons
//! and app versions come from tenants' components, and must not rewrite the operator's
//! terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

use ruststream_fleet::escape::escape_controls;

use ruststream_fleet::admin::model::{
    AppStatus, AppVersionList, AuditEntry, Deployed, ErrorEvent, FleetVersion, HostStatus,
    OutcomeCounts, PauseState, ReadMode, ShadowCounts, ShadowDeployed, ShadowDropped, ShadowStatus,
    ShardState, ShardStatus, SubscriptionStatus, TenantStatus, TokenList, TokenMade, Undeployed,
};

/// Hex digits of a content hash shown.
const SHORT_HASH: usize = 12;

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

/// The fleet's sums of the rollout and the shadow, and each host's part.
fn render_fleet_tally(out: &mut String, fleet: &FleetVersion) {
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

fn render_subscription(out: &mut String, subscription: &SubscriptionStatus, now_ms: u64) {
    let (name, stream) = (text(&subscription.subscriber), text(&subscription.stream));
    line(out, 2, format_args!("subscription {name} on `{stream}`"));
    if let Some(error) = &subscription.error {
        line(out, 3, format_args!("error: {}", text(error)));
    }
    for (shard_id, shard) in &subscription.shards {
        line(
            out,
            3,
            format_args!("{}", shard_line(shard_id, shard, now_ms)),
        );
    }
}

/// One shard: id, state, owner, checkpoint, held record, delivered and settled counts, lag.
fn shard_line(shard_id: &str, shard: &ShardStatus, now_ms: u64) -> String {
    let state = shard.state.to_string();
    let mut parts = vec![format!("{} {}", text(shard_id), text(&state))];
    parts.push(match &shard.owner {
        Some(owner) => format!("owner {}", text(owner)),
        None => "no owner".to_owned(),
    });
    parts.push(match &shard.checkpoint {
        Some(checkpoint) => format!("checkpoint {}", text(checkpoint)),
        None => "no checkpoint".to_owned(),
    });
    if let Some(held) = &shard.held_at {
        let since = shard
            .held_since_ms
            .map(|since| format!(" for {}", age(now_ms, since)))
            .unwrap_or_default();
        parts.push(format!("held at {}{since}", text(held)));
    }
    parts.push(format!(
        "delivered {} ({})",
        shard.delivered,
        outcomes(&shard.outcomes)
    ));
    match shard.millis_behind_latest {
        Some(behind) => parts.push(format!("{behind} ms behind")),
        // Read here but no answer yet (a shard taken while its tenant is paused): unknown is
        // said, never shown as caught up.
        None if matches!(shard.state, ShardState::Opening | ShardState::Reading) => {
            parts.push("lag unknown".to_owned());
        }
        None => {}
    }
    parts.extend(reading(shard, now_ms));
    if shard.paused {
        parts.push("paused".to_owned());
    }
    parts.join(", ")
}

/// How the shard is read: the mode, the subscription's age by fan-out, and what this host asks
/// of it (`polling 4.8 GetRecords/s shared by 2 of this host's subscriptions, 3 hosts read
/// it, 1 throttled`).
fn reading(shard: &ShardStatus, now_ms: u64) -> Option<String> {
    let mut line = match shard.read? {
        ReadMode::Polling => "polling".to_owned(),
        ReadMode::FanOut => match shard.subscribed_since_ms {
            Some(since) => format!("fan-out subscribed {} ago", age(now_ms, since)),
            None => "fan-out not subscribed".to_owned(),
        },
    };
    if let Some(reads) = &shard.reads {
        if reads.get_records_per_second > 0.0 {
            line.push_str(&format!(
                " {:.1} GetRecords/s",
                reads.get_records_per_second
            ));
        }
        match reads.subscriptions {
            0 | 1 => {}
            n => line.push_str(&format!(" shared by {n} of this host's subscriptions")),
        }
        if reads.fleet_hosts > 1 {
            line.push_str(&format!(", {} hosts read it", reads.fleet_hosts));
        }
        if reads.throttled > 0 {
            line.push_str(&format!(", {} throttled", reads.throttled));
        }
    }
    Some(line)
}

/// Why records were skipped, where any were: ` (3 sample, 2 behind, 0 budget, 0 cpu, 0
/// withdrawn)`.
fn skip_reasons(counts: &ShadowCounts) -> String {
    if counts.skipped == 0 {
        return String::new();
    }
    format!(
        " ({} sample, {} behind, {} budget, {} cpu, {} withdrawn)",
        counts.skipped_sample,
        counts.skipped_behind,
        counts.skipped_budget,
        counts.skipped_cpu,
        counts.skipped_withdrawn
    )
}

fn outcomes(counts: &OutcomeCounts) -> String {
    let mut line = format!(
        "ack {}, drop {}, retry {}, retry_after {}, trapped {}",
        counts.ack, counts.drop, counts.retry, counts.retry_after, counts.trapped
    );
    if counts.foreign_copies > 0 {
        line.push_str(&format!(", others' copies {}", counts.foreign_copies));
    }
    line
}

/// A shadow version under its app: its counts, agreement, and the first disagreements.
fn render_shadow(out: &mut String, shadow: &ShadowStatus) {
    let compared = shadow.compared();
    let agreement = match compared {
        0 => "none compared yet".to_owned(),
        n => format!(
            "{:.1}% agree",
            shadow.counts.agree as f64 * 100.0 / n as f64
        ),
    };
    line(
        out,
        2,
        format_args!(
            "shadow {} ({}, {}) on {}% of records: {compared} compared, {agreement}, {} disagree, \
             {} trapped, {} skipped{}, {} publishes recorded",
            text(&shadow.version.version),
            text(&shadow.version.component),
            short_hash(&shadow.version.content_hash),
            shadow.sample_percent,
            shadow.counts.disagree,
            shadow.counts.trap,
            shadow.counts.skipped,
            skip_reasons(&shadow.counts),
            shadow.publishes_recorded
        ),
    );
    for d in &shadow.disagreements {
        line(
            out,
            3,
            format_args!(
                "{} #{}: live {}; shadow {}",
                text(&d.shard_id),
                text(&d.sequence_number),
                text(&d.live),
                text(&d.shadow)
            ),
        );
        for publish in &d.publishes {
            line(out, 4, format_args!("{}", text(publish)));
        }
    }
}

/// `deploy --shadow`: the shadow now running.
pub(crate) fn render_shadow_deployed(shadow: &ShadowDeployed) -> String {
    format!(
        "{}/{} {} ({}, {}): running as a shadow on {}% of records (no effects); `ruststream \
         status` compares it, `ruststream promote {} {}` swaps it in",
        text(&shadow.tenant),
        text(&shadow.app),
        text(&shadow.version),
        text(&shadow.component),
        short_hash(&shadow.content_hash),
        shadow.sample_percent,
        text(&shadow.tenant),
        text(&shadow.app),
    )
}

/// `deploy --abort-shadow`.
pub(crate) fn render_shadow_dropped(dropped: &ShadowDropped) -> String {
    let what = if dropped.dropped {
        "shadow dropped"
    } else {
        "ran no shadow"
    };
    format!("{}/{}: {what}", text(&dropped.tenant), text(&dropped.app))
}

/// `deploy`, `rollback` and each line of `reload`: what now runs, and whether it replaced a
/// version.
pub(crate) fn render_deployed(deployed: &Deployed) -> String {
    let what = if deployed.swapped {
        "swapped in"
    } else {
        "started (new app)"
    };
    format!(
        "{}/{} {} ({}, {}): {what}",
        text(&deployed.tenant),
        text(&deployed.app),
        text(&deployed.version),
        text(&deployed.component),
        short_hash(&deployed.content_hash)
    )
}

/// `versions`: one line per kept version, newest first: short hash (what `rollback --to`
/// takes), app version, component, how long ago it went live and how it came, `live` on the
/// live one.
pub(crate) fn render_versions(list: &AppVersionList, now_ms: u64) -> String {
    let mut out = String::new();
    let count = list.versions.len();
    line(
        &mut out,
        0,
        format_args!(
            "{}/{}: {count} version(s) kept {}",
            text(&list.tenant),
            text(&list.app),
            if list.fleet {
                "by the fleet (every host alike)"
            } else {
                "by this host"
            }
        ),
    );
    for kept in &list.versions {
        let live = if kept.live { "  live" } else { "" };
        // A version the fleet recorded before it recorded when, and never live here.
        let when = match kept.at_ms {
            0 => "at an unrecorded time".to_owned(),
            at_ms => format!("{} ago", age(now_ms, at_ms)),
        };
        line(
            &mut out,
            1,
            format_args!(
                "{} {} ({}) {} {when}{live}",
                short_hash(&kept.content_hash),
                text(&kept.version),
                text(&kept.component),
                kept.came_by.word(),
            ),
        );
    }
    out
}

/// `audit`: one line per change, oldest first (when, host, token, tenant, action, target,
/// result, what was asked), then where they were read.
pub(crate) fn render_audit(entries: &[AuditEntry], from: &str) -> String {
    let mut out = String::new();
    for entry in entries {
        let target = match (&entry.tenant, entry.target.as_str()) {
            (Some(tenant), "") => text(tenant).into_owned(),
            (Some(tenant), target) => format!("{}/{}", text(tenant), text(target)),
            (None, target) => text(target).into_owned(),
        };
        let result = match &entry.error {
            Some(error) => format!("{} {}: {}", text(&entry.result), entry.status, text(error)),
            None => text(&entry.result).into_owned(),
        };
        let asked = entry
            .request
            .as_ref()
            .map(|request| format!(" {}", text(&request.to_string())))
            .unwrap_or_default();
        line(
            &mut out,
            0,
            format_args!(
                "{} {} {} {} {target} {result}{asked}",
                text(&entry.at),
                text(&entry.host),
                text(&entry.token),
                text(&entry.action),
            ),
        );
    }
    line(
        &mut out,
        0,
        format_args!("{} change(s), from {}", entries.len(), text(from)),
    );
    out
}

/// `errors`: one line per event, newest first: when, level, whom it is about, what it says.
pub(crate) fn render_errors(events: &[ErrorEvent]) -> String {
    let mut out = String::new();
    for event in events {
        let about: Vec<String> = [
            &event.tenant,
            &event.app,
            &event.subscriber,
            &event.stream,
            &event.shard,
        ]
        .into_iter()
        .flatten()
        .map(|name| text(name).into_owned())
        .collect();
        let about = if about.is_empty() {
            "host".to_owned()
        } else {
            about.join("/")
        };
        line(
            &mut out,
            0,
            format_args!(
                "{} {:5} {about}: {}",
                text(&event.at),
                text(&event.level),
                text(&event.message)
            ),
        );
    }
    line(
        &mut out,
        0,
        format_args!("{} warning(s) and error(s)", events.len()),
    );
    out
}

/// `token create`: the token, shown this once, and what it reaches.
pub(crate) fn render_token_made(made: &TokenMade) -> String {
    let mut out = String::new();
    line(
        &mut out,
        0,
        format_args!(
            "token {} for tenant {}{}: shown this once, keep it now",
            text(&made.id),
            text(&made.tenant),
            if made.name.is_empty() {
                String::new()
            } else {
                format!(" ({})", text(&made.name))
            }
        ),
    );
    line(&mut out, 0, format_args!("{}", text(&made.token)));
    line(
        &mut out,
        0,
        format_args!("kept hashed in the {}", text(&made.store)),
    );
    out
}

/// `token list`: one line per tenant token.
pub(crate) fn render_tokens(list: &TokenList, now_ms: u64) -> String {
    let mut out = String::new();
    line(
        &mut out,
        0,
        format_args!(
            "{} tenant token(s), in the {}",
            list.tokens.len(),
            text(&list.store)
        ),
    );
    for token in &list.tokens {
        line(
            &mut out,
            1,
            format_args!(
                "{} {} {} made {} ago by {}",
                text(&token.id),
                text(&token.tenant),
                if token.name.is_empty() {
                    "-".into()
                } else {
                    text(&token.name)
                },
                age(now_ms, token.created_ms),
                text(&token.created_by)
            ),
        );
    }
    out
}

/// `undeploy`: what stopped for good.
pub(crate) fn render_undeployed(gone: &Undeployed) -> String {
    format!(
        "{}/{} (app {}): stopped; a restart does not run it again",
        text(&gone.tenant),
        text(&gone.component),
        text(&gone.app)
    )
}

/// `pause` and `resume`: the tenant's state afterwards.
pub(crate) fn render_pause(state: &PauseState) -> String {
    let word = if state.paused { "paused" } else { "running" };
    format!("tenant {}: {word}", text(&state.tenant))
}

/// `seek`: the shards that moved.
pub(crate) fn render_moved(moved: &[String]) -> String {
    if moved.is_empty() {
        return "no shard moved".to_owned();
    }
    let shards: Vec<_> = moved.iter().map(|shard| text(shard)).collect();
    format!("moved {} shard(s): {}", moved.len(), shards.join(", "))
}

fn line(out: &mut String, depth: usize, content: std::fmt::Arguments<'_>) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{:indent$}{content}", "", indent = depth * 2);
}

pub(crate) fn text(value: &str) -> Cow<'_, str> {
    escape_controls(value)
}

/// The hash without an algorithm prefix (`sha256:`), cut to [`SHORT_HASH`] characters.
/// Bytes in whole MiB (reservations are whole MiB of `memory_mib`).
fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

fn short_hash(hash: &str) -> String {
    let digits = hash.rsplit(':').next().unwrap_or(hash);
    let short: String = digits.chars().take(SHORT_HASH).collect();
    format!("#{}", text(&short))
}

/// The time from `since_ms` to `now_ms`, readably; a time in the future (clocks differ) is 0.
fn age(now_ms: u64, since_ms: u64) -> String {
    let ms = now_ms.saturating_sub(since_ms);
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
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
    fn a_shard_read_here_whose_lag_is_unknown_says_so() {
        let mut status = sample_status();
        let shards = &mut status.tenants[0].apps[0].subscriptions[0].shards;
        let reading = shards.values_mut().next().expect("a shard");
        reading.millis_behind_latest = None;
        let shown = render_status(&status, 1_012_500);
        let line = shown
            .lines()
            .find(|l| l.contains("shardId-000000000000"))
            .unwrap_or_default();
        assert!(line.ends_with("trapped 1), lag unknown, polling"), "{line}");
        let stopped = shown
            .lines()
            .find(|l| l.contains("shardId-000000000001"))
            .unwrap_or_default();
        assert!(!stopped.contains("lag"), "a shard not read here: {stopped}");
    }

    #[test]
    fn a_shard_says_how_it_is_read_and_what_this_host_asks_of_it() {
        use ruststream_fleet::admin::model::ShardReads;
        let mut status = sample_status();
        let shards = &mut status.tenants[0].apps[0].subscriptions[0].shards;
        let reading = shards.values_mut().next().expect("a shard");
        reading.read = Some(ReadMode::Polling);
        reading.reads = Some(ShardReads {
            get_records_per_second: 2.45,
            subscriptions: 2,
            fleet_hosts: 2,
            throttled: 1,
        });
        let line = |status: &HostStatus| {
            let shown = render_status(status, 1_012_500);
            let line = shown.lines().find(|l| l.contains("shardId-000000000000"));
            line.unwrap_or_default().to_owned()
        };
        assert!(
            line(&status).ends_with(
                "250 ms behind, polling 2.5 GetRecords/s shared by 2 of this host's \
                 subscriptions, 2 hosts read it, 1 throttled"
            ),
            "{}",
            line(&status)
        );
        let shards = &mut status.tenants[0].apps[0].subscriptions[0].shards;
        let reading = shards.values_mut().next().expect("a shard");
        reading.read = Some(ReadMode::FanOut);
        reading.reads = None;
        reading.subscribed_since_ms = Some(1_000_000);
        assert!(
            line(&status).ends_with("250 ms behind, fan-out subscribed 12s ago"),
            "{}",
            line(&status)
        );
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

    #[test]
    fn ages() {
        assert_eq!(age(1_500, 1_000), "500ms");
        assert_eq!(age(1_000, 2_000), "0ms");
        assert_eq!(age(61_000, 0), "1m01s");
        assert_eq!(age(7_260_000, 0), "2h01m");
        assert_eq!(age(90_000_000, 0), "1d01h");
    }

    #[test]
    fn kept_versions() {
        use ruststream_fleet::admin::model::{KeptVersion, VersionOrigin};
        let kept = |hash: &str, version: &str, at_ms, came_by, live| KeptVersion {
            content_hash: hash.to_owned(),
            version: version.to_owned(),
            component: "ledger".to_owned(),
            at_ms,
            came_by,
            live,
        };
        let list = AppVersionList {
            tenant: "acme".to_owned(),
            app: "ledger".to_owned(),
            versions: vec![
                kept(
                    "aaaabbbbccccdddd",
                    "1.0.0",
                    9_000,
                    VersionOrigin::Rollback,
                    true,
                ),
                kept(
                    "1111222233334444",
                    "2.0.0",
                    5_000,
                    VersionOrigin::Upload,
                    false,
                ),
                kept(
                    "aaaabbbbccccdddd",
                    "1\x1b",
                    1_000,
                    VersionOrigin::File,
                    false,
                ),
            ],
            fleet: false,
        };
        let expected = "\
acme/ledger: 3 version(s) kept by this host
  #aaaabbbbcccc 1.0.0 (ledger) rollback 1s ago  live
  #111122223333 2.0.0 (ledger) upload 5s ago
  #aaaabbbbcccc 1\\u{1b} (ledger) file 9s ago
";
        assert_eq!(render_versions(&list, 10_000), expected);
        let fleet = AppVersionList {
            versions: vec![kept(
                "1111222233334444",
                "2.0.0",
                0,
                VersionOrigin::Upload,
                true,
            )],
            fleet: true,
            ..list
        };
        assert_eq!(
            render_versions(&fleet, 10_000),
            "acme/ledger: 1 version(s) kept by the fleet (every host alike)\n  \
             #111122223333 2.0.0 (ledger) upload at an unrecorded time  live\n"
        );
    }

    #[test]
    fn one_line_answers() {
        let deployed = Deployed {
            tenant: "acme".to_owned(),
            app: "ledger".to_owned(),
            component: "ledger.wasm".to_owned(),
            version: "0.3.0".to_owned(),
            content_hash: "0123456789abcdef".to_owned(),
            swapped: false,
        };
        let shown = render_deployed(&deployed);
        assert_eq!(
            shown,
            "acme/ledger 0.3.0 (ledger.wasm, #0123456789ab): started (new app)"
        );
        let paused = PauseState {
            tenant: "acme".to_owned(),
            paused: true,
        };
        assert_eq!(render_pause(&paused), "tenant acme: paused");
        assert_eq!(render_moved(&[]), "no shard moved");
        let moved = ["a".to_owned(), "b".to_owned()];
        assert_eq!(render_moved(&moved), "moved 2 shard(s): a, b");
    }
}
