//! The runtime's metrics, through the `metrics` facade: whoever embeds the runtime installs a
//! recorder (the `ruststream` binary exports Prometheus); without one every update is a no-op.
//!
//! Handles are registered once per pipeline (or tenant) with their labels, so the per-record
//! cost is an atomic add, with no label lookup and no allocation. Names and label keys are
//! constants here, so exporters and tests spell them the same way; this module depends on
//! nothing else of the crate, so any module can count.

/// Records settled, by `outcome` (`ack`, `drop`, `retry`, `retry_after`).
pub const RECORDS: &str = "ruststream_records_total";
/// Calls that trapped, by `kind` (see [`TrapKind::label`](crate::TrapKind::label)).
pub const TRAPS: &str = "ruststream_traps_total";
/// How long each handler call took, in seconds.
pub const CALL_DURATION: &str = "ruststream_call_duration_seconds";
/// Counted copies the stream has acknowledged.
pub const COPIES_PUBLISHED: &str = "ruststream_copies_published_total";
/// Dead letters the dead-letter stream has acknowledged.
pub const DEAD_LETTERS: &str = "ruststream_dead_letters_total";
/// Counted copies another subscription made, moved past without a call: the reader's labels.
pub const FOREIGN_COPIES: &str = "ruststream_foreign_copies_skipped_total";
/// Copies and guest publishes that had to wait for the tenant's write quota.
pub const PUBLISH_THROTTLES: &str = "ruststream_publish_throttles_total";
/// Components compiled (not read from the artifact cache), by `result` (`ok`, `refused`).
pub const COMPILES: &str = "ruststream_component_compiles_total";

/// Label keys.
pub mod label {
    /// The tenant.
    pub const TENANT: &str = "tenant";
    /// The app a component declares.
    pub const APP: &str = "app";
    /// The subscription.
    pub const SUBSCRIBER: &str = "subscriber";
    /// The stream a subscription reads.
    pub const STREAM: &str = "stream";
    /// The shard.
    pub const SHARD: &str = "shard";
}

/// The labels that say whose a series is: `tenant` and `app`, and `subscriber` when it is
/// about one subscription.
pub fn owner_labels(tenant: &str, app: &str, subscriber: Option<&str>) -> Vec<metrics::Label> {
    let mut labels = vec![
        metrics::Label::new(label::TENANT, tenant.to_owned()),
        metrics::Label::new(label::APP, app.to_owned()),
    ];
    if let Some(subscriber) = subscriber {
        labels.push(metrics::Label::new(
            label::SUBSCRIBER,
            subscriber.to_owned(),
        ));
    }
    labels
}

/// Bucket bounds of [`CALL_DURATION`], in seconds: a batch call takes from microseconds to the
/// deadline of each of its records.
pub const CALL_DURATION_BUCKETS: &[f64] = &[
    0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0,
];

/// Registers the descriptions of the runtime's metrics with the installed recorder.
pub fn describe() {
    metrics::describe_counter!(RECORDS, "Records settled, by outcome.");
    metrics::describe_counter!(TRAPS, "Handler calls that trapped, by kind.");
    metrics::describe_histogram!(
        CALL_DURATION,
        metrics::Unit::Seconds,
        "Duration of each handler call (one batch of records)."
    );
    metrics::describe_counter!(
        COPIES_PUBLISHED,
        "Counted copies written back to their stream."
    );
    metrics::describe_counter!(
        DEAD_LETTERS,
        "Dead letters written to a dead-letter stream."
    );
    metrics::describe_counter!(
        FOREIGN_COPIES,
        "Counted copies made by another subscription of the stream, moved past unhandled."
    );
    metrics::describe_counter!(
        PUBLISH_THROTTLES,
        "Publishes and copies that waited for the tenant's write quota."
    );
    metrics::describe_counter!(COMPILES, "Components compiled, by result.");
}
