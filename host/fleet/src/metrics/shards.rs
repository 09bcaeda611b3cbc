//! The state half of a scrape: per-shard lag and holds, and quarantined tenants, read from the
//! fleet's status and written in the Prometheus text format.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use ruststream_kinesis::runner::{ShardState, ShardStatus};
use ruststream_runtime::metrics::{self, label};

use crate::fleet::Fleet;

/// How far behind the tip each shard's checkpoint is, at least (s).
pub(crate) const BEHIND_LATEST: &str = "ruststream_behind_latest_seconds";
/// How old the last record read was when it was read (s).
pub(crate) const ITERATOR_AGE: &str = "ruststream_iterator_age_seconds";
/// Records read and not handled yet.
pub(crate) const HELD_RECORDS: &str = "ruststream_held_records";
/// How long the checkpoint has been held in front of the same record (s).
pub(crate) const OLDEST_HELD_AGE: &str = "ruststream_oldest_held_age_seconds";
/// Copies owed to a stream.
pub(crate) const COPIES_PENDING: &str = "ruststream_copies_pending";
/// 1 while a tenant's failures have it quarantined.
pub(crate) const QUARANTINED: &str = "ruststream_tenant_quarantined";
/// 1 while an operator has a tenant paused.
pub(crate) const PAUSED: &str = "ruststream_tenant_paused";
/// Subscriptions of a tenant past its series bound, sharing the `_other` series.
pub(crate) const FOLDED: &str = "ruststream_metric_subscriptions_folded";

const SHARD_GAUGES: [(&str, &str); metrics::SHARD_GAUGE_SERIES] = [
    (
        BEHIND_LATEST,
        "How far behind the tip the shard's checkpoint is, at least: Kinesis's \
         MillisBehindLatest for the last read (growing with the time since, while the shard \
         is not read), the age of the oldest record read and not yet delivered, or the time a \
         held record has held the checkpoint, whichever is larger. No sample while none of \
         these is known (no answer read yet): unknown, not caught up.",
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

/// How each gauge of [`SHARD_GAUGES`] adds up over the shards folded into one row: lags and
/// ages by the largest, counts by the sum.
const FOLD_BY_SUM: [bool; 5] = [false, false, true, false, true];

/// One shard's gauge values, [`SHARD_GAUGES`] in order; `None` is unknown, and has no sample.
type Values = [Option<f64>; 5];

/// One shard's series, labelled.
struct ShardRow {
    labels: String,
    values: Values,
}

/// A tenant's state at a scrape.
struct TenantRow {
    name: String,
    quarantined: bool,
    paused: bool,
    /// Its shards past its series bound, added up into one row.
    folded: Option<Values>,
}

/// Appends the per-shard gauges of every shard this host reads, and each tenant's state, to
/// `out`. A tenant's shard rows stay within its series bound: shards of subscriptions past it
/// (and shards past it) add into one row labelled `_other`.
pub(crate) fn render(fleet: &Fleet, out: &mut String) {
    let now_ms = now_ms();
    let mut rows = Vec::new();
    let mut tenants = Vec::new();
    fleet.with_tenants(|running| {
        for (name, run) in running {
            let mut tenant = TenantRow {
                name: name.clone(),
                quarantined: run.tenant.is_quarantined(),
                paused: run.tenant.is_paused(),
                folded: None,
            };
            let max_rows = metrics::shard_rows_within(
                run.tenant.policy().limits().max_metric_series,
                metrics::labelled_subscriptions(name),
                metrics::labelled_shadows(name),
            );
            let mut own_rows = 0;
            for component in run.components.values() {
                let app = component.app.name();
                for subscription in component.app.status() {
                    let labelled = metrics::is_labelled(name, app, &subscription.subscriber);
                    for (shard_id, shard) in &subscription.shards {
                        if !matches!(shard.state, ShardState::Opening | ShardState::Reading) {
                            continue;
                        }
                        let values = values(shard, now_ms);
                        if !labelled || own_rows >= max_rows {
                            fold(&mut tenant.folded, values);
                            continue;
                        }
                        own_rows += 1;
                        let labels = labels(&[
                            (label::TENANT, name),
                            (label::APP, app),
                            (label::SUBSCRIBER, &subscription.subscriber),
                            (label::STREAM, &subscription.stream),
                            (label::SHARD, shard_id),
                        ]);
                        rows.push(ShardRow { labels, values });
                    }
                }
            }
            tenants.push(tenant);
        }
    });
    for tenant in &tenants {
        if let Some(values) = tenant.folded {
            let other = metrics::FOLDED;
            let labels = labels(&[
                (label::TENANT, &tenant.name),
                (label::APP, other),
                (label::SUBSCRIBER, other),
                (label::STREAM, other),
                (label::SHARD, other),
            ]);
            rows.push(ShardRow { labels, values });
        }
    }
    for (index, (name, help)) in SHARD_GAUGES.iter().enumerate() {
        header(out, name, help);
        for row in &rows {
            if let Some(value) = row.values[index] {
                let _ = writeln!(out, "{name}{{{}}} {value}", row.labels);
            }
        }
    }
    tenant_gauges(&tenants, out);
}

/// A per-tenant gauge: its name, its help, and its value for a tenant.
type TenantGauge = (&'static str, &'static str, fn(&TenantRow) -> f64);

/// Each tenant's quarantine, pause and folded subscriptions.
fn tenant_gauges(tenants: &[TenantRow], out: &mut String) {
    let gauges: [TenantGauge; 3] = [
        (
            QUARANTINED,
            "1 while the tenant's failures have it quarantined: its shards read nothing.",
            |t| f64::from(u8::from(t.quarantined)),
        ),
        (
            PAUSED,
            "1 while an operator has the tenant paused: its shards read nothing.",
            |t| f64::from(u8::from(t.paused)),
        ),
        (
            FOLDED,
            "Subscriptions of the tenant past its series bound (max_metric_series), counted \
             in the series labelled subscriber=\"_other\".",
            |t| metrics::folded_subscriptions(&t.name) as f64,
        ),
    ];
    for (name, help, value) in gauges {
        header(out, name, help);
        for tenant in tenants {
            let labels = labels(&[(label::TENANT, &tenant.name)]);
            let _ = writeln!(out, "{name}{{{labels}}} {}", value(tenant));
        }
    }
}

/// Adds `values` into a folded row; an unknown value adds nothing (a folded lag is unknown
/// only while every shard's is).
fn fold(into: &mut Option<Values>, values: Values) {
    let Some(row) = into else {
        *into = Some(values);
        return;
    };
    for (index, value) in values.into_iter().enumerate() {
        row[index] = match (row[index], value) {
            (Some(a), Some(b)) if FOLD_BY_SUM[index] => Some(a + b),
            (Some(a), Some(b)) => Some(a.max(b)),
            (known, None) | (None, known) => known,
        };
    }
}

fn values(shard: &ShardStatus, now_ms: u64) -> Values {
    let held_for_ms = shard
        .held_since_ms
        .map(|since| now_ms.saturating_sub(since));
    let read_behind = shard
        .millis_behind_latest
        .map(|behind| u64::try_from(behind.max(0)).unwrap_or(0));
    let seconds = |ms: u64| ms as f64 / 1000.0;
    [
        // A held record is read again, with everything after it, when the lease is next
        // taken: the checkpoint is as far behind as the hold is old, whatever the reader says.
        // Neither known (no answer read yet, nothing held): no sample, never a 0 that would
        // read as caught up.
        read_behind.max(held_for_ms).map(seconds),
        Some(seconds(shard.iterator_age_ms.unwrap_or(0))),
        Some(shard.unhandled as f64),
        Some(seconds(held_for_ms.unwrap_or(0))),
        Some(shard.copies_pending as f64),
    ]
}

fn header(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

/// `key="value",...` with values escaped as the text format wants.
pub(super) fn labels(pairs: &[(&str, &str)]) -> String {
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
            read: Some(ruststream_kinesis::kinesis::ReadMode::Polling),
            reads: None,
            subscribed_since_ms: None,
            iterator_age_ms: Some(3),
            paused: false,
        };
        assert_eq!(
            values(&shard, 61_000),
            [Some(60.0), Some(0.003), Some(1.0), Some(60.0), Some(0.0)]
        );
        let caught_up = ShardStatus {
            held_at: None,
            held_since_ms: None,
            unhandled: 0,
            millis_behind_latest: Some(250),
            ..shard
        };
        assert_eq!(
            values(&caught_up, 61_000),
            [Some(0.25), Some(0.003), Some(0.0), Some(0.0), Some(0.0)]
        );
        // Taken while its tenant is paused, nothing read yet: unknown, not 0.
        let unknown = ShardStatus {
            millis_behind_latest: None,
            ..caught_up
        };
        assert_eq!(values(&unknown, 61_000)[0], None);
    }

    #[test]
    fn folded_shards_add_counts_and_keep_the_largest_lag() {
        let mut folded = None;
        fold(&mut folded, [1.0, 2.0, 3.0, 4.0, 5.0].map(Some));
        fold(&mut folded, [10.0, 0.5, 1.0, 0.0, 1.0].map(Some));
        assert_eq!(folded, Some([10.0, 2.0, 4.0, 4.0, 6.0].map(Some)));
        // A shard whose lag is unknown leaves the others' largest.
        fold(
            &mut folded,
            [None, Some(0.0), Some(1.0), Some(0.0), Some(0.0)],
        );
        assert_eq!(folded.map(|row| row[0]), Some(Some(10.0)));
        let mut unknown = None;
        fold(
            &mut unknown,
            [None, Some(0.0), Some(1.0), Some(0.0), Some(0.0)],
        );
        assert_eq!(unknown.map(|row| row[0]), Some(None));
    }
}
