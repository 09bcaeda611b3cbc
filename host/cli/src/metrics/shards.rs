//! The state half of a scrape: per-shard lag and holds, and quarantined tenants, read from the
//! fleet's status and written in the Prometheus text format.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use ruststream_host::{ShardState, ShardStatus};
use ruststream_runtime::metrics::label;

use crate::fleet::Fleet;

/// How far behind the tip each shard's checkpoint is, at least (ms).
pub(crate) const MILLIS_BEHIND_LATEST: &str = "ruststream_millis_behind_latest";
/// How old the last record read was when it was read (ms).
pub(crate) const ITERATOR_AGE: &str = "ruststream_iterator_age_milliseconds";
/// Records read and not handled yet.
pub(crate) const HELD_RECORDS: &str = "ruststream_held_records";
/// How long the checkpoint has been held in front of the same record (s).
pub(crate) const OLDEST_HELD_AGE: &str = "ruststream_oldest_held_age_seconds";
/// Copies owed to a stream.
pub(crate) const COPIES_PENDING: &str = "ruststream_copies_pending";
/// 1 while a tenant is quarantined (or paused by an operator).
pub(crate) const QUARANTINED: &str = "ruststream_tenant_quarantined";

const SHARD_GAUGES: [(&str, &str); 5] = [
    (
        MILLIS_BEHIND_LATEST,
        "How far behind the tip the shard's checkpoint is, at least: Kinesis's \
         MillisBehindLatest for the last read, or the time a held record has held the \
         checkpoint, whichever is larger.",
    ),
    (
        ITERATOR_AGE,
        "Age of the last record of the last non-empty read, when it was read.",
    ),
    (HELD_RECORDS, "Records read and not handled yet."),
    (
        OLDEST_HELD_AGE,
        "How long the checkpoint has been held in front of the same record.",
    ),
    (
        COPIES_PENDING,
        "Counted copies and dead letters not yet in their stream.",
    ),
];

/// One shard's series, labelled.
struct ShardRow {
    labels: String,
    values: [f64; 5],
}

/// Appends the per-shard gauges of every shard this host reads, and each tenant's quarantine
/// gauge, to `out`.
pub(crate) fn render(fleet: &Fleet, out: &mut String) {
    let now_ms = now_ms();
    let mut rows = Vec::new();
    let mut tenants = Vec::new();
    fleet.with_tenants(|running| {
        for (name, run) in running {
            tenants.push((name.clone(), run.tenant.is_quarantined()));
            for component in run.components.values() {
                let app = component.app.name();
                for subscription in component.app.status() {
                    for (shard_id, shard) in &subscription.shards {
                        if !matches!(shard.state, ShardState::Opening | ShardState::Reading) {
                            continue;
                        }
                        let labels = labels(&[
                            (label::TENANT, name),
                            (label::APP, app),
                            (label::SUBSCRIBER, &subscription.subscriber),
                            (label::STREAM, &subscription.stream),
                            (label::SHARD, shard_id),
                        ]);
                        rows.push(ShardRow {
                            labels,
                            values: values(shard, now_ms),
                        });
                    }
                }
            }
        }
    });
    for (index, (name, help)) in SHARD_GAUGES.iter().enumerate() {
        header(out, name, help);
        for row in &rows {
            let _ = writeln!(out, "{name}{{{}}} {}", row.labels, row.values[index]);
        }
    }
    header(
        out,
        QUARANTINED,
        "1 while the tenant is quarantined or paused: its shards read nothing.",
    );
    for (name, quarantined) in tenants {
        let labels = labels(&[(label::TENANT, &name)]);
        let _ = writeln!(out, "{QUARANTINED}{{{labels}}} {}", u8::from(quarantined));
    }
}

fn values(shard: &ShardStatus, now_ms: u64) -> [f64; 5] {
    let held_for_ms = shard
        .held_since_ms
        .map_or(0, |since| now_ms.saturating_sub(since));
    let read_behind = shard.millis_behind_latest.unwrap_or(0).max(0) as u64;
    [
        // A held record is read again, with everything after it, when the lease is next
        // taken: the checkpoint is as far behind as the hold is old, whatever the reader says.
        read_behind.max(held_for_ms) as f64,
        shard.iterator_age_ms.unwrap_or(0) as f64,
        shard.unhandled as f64,
        held_for_ms as f64 / 1000.0,
        shard.copies_pending as f64,
    ]
}

fn header(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

/// `key="value",...` with values escaped as the text format wants.
fn labels(pairs: &[(&str, &str)]) -> String {
    let mut text = String::new();
    for (index, (key, value)) in pairs.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        let _ = write!(text, "{key}=\"");
        for c in value.chars() {
            match c {
                '\\' => text.push_str("\\\\"),
                '"' => text.push_str("\\\""),
                '\n' => text.push_str("\\n"),
                c => text.push(c),
            }
        }
        text.push('"');
    }
    text
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(
            labels(&[("tenant", "a\"b\\c\nd"), ("shard", "s")]),
            r#"tenant="a\"b\\c\nd",shard="s""#
        );
    }

    #[test]
    fn a_held_record_puts_the_checkpoint_behind_however_current_the_reader_is() {
        let shard = ShardStatus {
            state: ShardState::Reading,
            owner: None,
            delivered: 10,
            checkpoint: None,
            held_at: Some("49".to_owned()),
            held_since_ms: Some(1_000),
            unhandled: 1,
            copies_pending: 0,
            outcomes: Default::default(),
            millis_behind_latest: Some(0),
            iterator_age_ms: Some(3),
            quarantined: false,
        };
        assert_eq!(values(&shard, 61_000), [60_000.0, 3.0, 1.0, 60.0, 0.0]);
        let caught_up = ShardStatus {
            held_at: None,
            held_since_ms: None,
            unhandled: 0,
            millis_behind_latest: Some(250),
            ..shard
        };
        assert_eq!(values(&caught_up, 61_000), [250.0, 3.0, 0.0, 0.0, 0.0]);
    }
}
