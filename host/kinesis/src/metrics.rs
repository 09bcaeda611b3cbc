//! The host's metrics, through the `metrics` facade (see `ruststream_runtime::metrics` for
//! the runtime's, and its labels): leases, checkpoint writes, swaps and rollbacks. Without an
//! installed recorder every update is a no-op.

use metrics::{Counter, Gauge, Histogram, Label};
use ruststream_runtime::metrics::{owner_labels, subscription_labels};

/// Leases taken by this host.
pub const LEASES_TAKEN: &str = "ruststream_leases_taken_total";
/// Leases lost by this host (taken over, fenced off, or not renewed in time).
pub const LEASES_LOST: &str = "ruststream_leases_lost_total";
/// Leases this host holds now.
pub const LEASES_HELD: &str = "ruststream_leases_held";
/// Checkpoint writes, by `result` (`ok`, `failed`).
pub const CHECKPOINT_WRITES: &str = "ruststream_checkpoint_writes_total";
/// Versions swapped in.
pub const SWAPS: &str = "ruststream_swaps_total";
/// Rollbacks, by `trigger` (`automatic`, `operator`).
pub const ROLLBACKS: &str = "ruststream_rollbacks_total";

/// How late lease renewals started against their schedule: the host's own work delayed (by
/// a busy executor, a starved core), whatever tenants run.
pub const RENEWAL_LATENESS: &str = "ruststream_lease_renewal_lateness_seconds";

/// GetRecords calls this host made, by `stream` and `shard` (host-wide: one read serves every
/// reader of the shard in the host).
pub const GET_RECORDS: &str = "ruststream_get_records_total";
/// GetRecords calls of this host that Kinesis throttled, by `stream` and `shard`.
pub const READ_THROTTLES: &str = "ruststream_get_records_throttled_total";
/// Hosts of the fleet reading a shard, this one included, as the fleet's reads table says, by
/// `stream` and `shard`: this host's turns on the shard are that many times 200 ms apart.
pub const SHARD_READERS: &str = "ruststream_shard_reader_hosts";

/// Dead letters a redrive settled, by `redrive` (its id), `outcome` (`redriven`, `skipped`)
/// and, when skipped, `reason`.
pub const REDRIVE_RECORDS: &str = "ruststream_redrive_records_total";

/// Registers the descriptions of the host's metrics with the installed recorder.
pub fn describe() {
    metrics::describe_counter!(LEASES_TAKEN, "Shard leases taken by this host.");
    metrics::describe_counter!(LEASES_LOST, "Shard leases lost by this host.");
    metrics::describe_gauge!(LEASES_HELD, "Shard leases this host holds.");
    metrics::describe_counter!(
        CHECKPOINT_WRITES,
        "Checkpoint writes to the lease store, by result."
    );
    metrics::describe_histogram!(
        RENEWAL_LATENESS,
        metrics::Unit::Seconds,
        "How late lease renewals started against their schedule."
    );
    metrics::describe_counter!(SWAPS, "Component versions swapped in.");
    metrics::describe_counter!(ROLLBACKS, "Swaps rolled back, by trigger.");
    metrics::describe_counter!(
        GET_RECORDS,
        "GetRecords calls this host made, by stream and shard."
    );
    metrics::describe_counter!(
        READ_THROTTLES,
        "GetRecords calls of this host that Kinesis throttled, by stream and shard."
    );
    metrics::describe_gauge!(
        SHARD_READERS,
        "Hosts of the fleet reading the shard, this one included: this host reads it at most \
         5/n times a second."
    );
    metrics::describe_counter!(
        REDRIVE_RECORDS,
        "Dead letters a redrive settled, by redrive, outcome and skip reason."
    );
}

/// The lease and checkpoint handles of one subscription of one tenant's app.
#[derive(Clone)]
pub(crate) struct LeaseMetrics {
    taken: Counter,
    lost: Counter,
    held: Gauge,
    written: Counter,
    write_failed: Counter,
    /// Host-wide, unlabelled: the host's health, not the tenant's.
    renewal_lateness: Histogram,
}

impl LeaseMetrics {
    /// The handles of `subscriber`, labelled as its tenant's bound of `max_series` allows.
    pub(crate) fn new(tenant: &str, app: &str, subscriber: &str, max_series: usize) -> Self {
        let own = subscription_labels(tenant, app, subscriber, max_series);
        let labels = || own.clone();
        let result = |value: &'static str| {
            let mut labels = labels();
            labels.push(Label::new("result", value));
            metrics::counter!(CHECKPOINT_WRITES, labels)
        };
        Self {
            taken: metrics::counter!(LEASES_TAKEN, labels()),
            lost: metrics::counter!(LEASES_LOST, labels()),
            held: metrics::gauge!(LEASES_HELD, labels()),
            written: result("ok"),
            write_failed: result("failed"),
            renewal_lateness: metrics::histogram!(RENEWAL_LATENESS),
        }
    }

    /// A lease taken: held until [`released`](Self::released).
    pub(crate) fn taken(&self) {
        self.taken.increment(1);
        self.held.increment(1.0);
    }

    /// A lease no longer held (released, handed over, lost or abandoned).
    pub(crate) fn released(&self) {
        self.held.decrement(1.0);
    }

    pub(crate) fn lost(&self) {
        self.lost.increment(1);
    }

    /// A renewal started `late` after its schedule.
    pub(crate) fn renewal_started(&self, late: std::time::Duration) {
        self.renewal_lateness.record(late.as_secs_f64());
    }

    pub(crate) fn checkpoint_written(&self, ok: bool) {
        if ok {
            self.written.increment(1);
        } else {
            self.write_failed.increment(1);
        }
    }
}

/// Counts a version swapped into `app` of `tenant`.
pub(crate) fn swapped(tenant: &str, app: &str) {
    metrics::counter!(SWAPS, owner_labels(tenant, app, None)).increment(1);
}

/// Counts a rollback of `app` of `tenant`, decided by the host (`automatic`) or by an
/// operator.
pub(crate) fn rolled_back(tenant: &str, app: &str, automatic: bool) {
    let mut labels = owner_labels(tenant, app, None);
    let trigger = if automatic { "automatic" } else { "operator" };
    labels.push(Label::new("trigger", trigger));
    metrics::counter!(ROLLBACKS, labels).increment(1);
}
