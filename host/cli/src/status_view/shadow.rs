//! A shadow version in the status tree: its counts, agreement, skips and first
//! disagreements.

use ruststream_fleet::admin::model::{ShadowCounts, ShadowStatus};

use super::text::{line, short_hash, text};

/// A shadow version under its app: its counts, agreement, and the first disagreements.
pub(super) fn render_shadow(out: &mut String, shadow: &ShadowStatus) {
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
