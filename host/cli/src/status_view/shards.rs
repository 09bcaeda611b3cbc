//! A subscription in the status tree and one line per shard: owner, checkpoint, held record,
//! outcomes, lag and how it is read.

use ruststream_fleet::admin::model::{
    OutcomeCounts, ReadMode, ShardState, ShardStatus, SubscriptionStatus,
};

use super::text::{age, line, text};

pub(super) fn render_subscription(
    out: &mut String,
    subscription: &SubscriptionStatus,
    now_ms: u64,
) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status_view::render_status;
    use ruststream_fleet::admin::fake::sample_status;
    use ruststream_fleet::admin::model::HostStatus;

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
}
