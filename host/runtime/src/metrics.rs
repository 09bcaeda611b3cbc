//! The runtime's metrics, through the `metrics` facade: whoever embeds the runtime installs a
//! recorder (the `ruststream` binary exports Prometheus); without one every update is a no-op.
//!
//! Handles are registered once per pipeline (or tenant) with their labels, so the per-record
//! cost is an atomic add, with no label lookup and no allocation. Names and label keys are
//! constants here, so exporters and tests spell them the same way; this module depends on
//! nothing else of the crate, so any module can count.

/// Records settled, by `outcome` (`ack`, `drop`, `retry`, `retry_after`).
pub const RECORDS: &str = "ruststream_records_total";
/// Calls that trapped, by `kind` (see [`TrapKind::label`](crate::component::TrapKind::label)).
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
    /// Whose instance: `live` or `shadow`.
    pub const ROLE: &str = "role";
    /// Why a shadow skipped a record: `sample`, `behind`, `budget`, `cpu` or `withdrawn`.
    pub const REASON: &str = "reason";
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

/// The series one subscription registers for itself, on one shard: records (4 outcomes),
/// traps (7 kinds), the call-duration histogram (11 buckets, `+Inf`, sum and count), copies,
/// dead letters and others' copies, the host's leases taken, lost and held and checkpoint
/// writes (2), and its shard's 5 gauges.
pub const SERIES_PER_SUBSCRIPTION: usize = 4 + 7 + 14 + 3 + 3 + 2 + SHARD_GAUGE_SERIES;

/// The gauges of one shard row (lag, iterator age, held records, hold age, copies pending).
pub const SHARD_GAUGE_SERIES: usize = 5;

/// Series a tenant has besides its subscriptions' and its shadows', kept out of its bound for
/// them: its quarantine, pause and folded gauges, its write throttles, CPU and CPU wait by role
/// (6), its instance memory by role (2), its apps' swap and rollback counters (3 per app, room
/// for 4 apps), and one set of shadow series for the shadows past the bound ([`FOLDED`]).
pub const TENANT_SERIES: usize = 3 + 6 + 2 + 3 * 4 + SHADOW_SERIES;

/// The series one shadow version registers: its records by result (4) and its skipped ones
/// by reason (5).
pub const SHADOW_SERIES: usize = 4 + 5;

/// The `app` and `subscriber` of the series of subscriptions past their tenant's bound.
pub const FOLDED: &str = "_other";

/// The labels of a subscription's series, within its tenant's bound of `max_series`: its
/// own (tenant, app, subscriber) while the tenant's labelled subscriptions fit
/// ([`SERIES_PER_SUBSCRIPTION`] each, beside one set for [`FOLDED`] and the
/// [`TENANT_SERIES`]), else `app` and `subscriber` [`FOLDED`], so that every further
/// subscription of the tenant adds into one set of series instead of its own. A
/// subscription keeps what it got first for the life of the process (a swap keeps its labels).
pub fn subscription_labels(
    tenant: &str,
    app: &str,
    subscriber: &str,
    max_series: usize,
) -> Vec<metrics::Label> {
    if series::admit(tenant, app, subscriber, max_series) {
        owner_labels(tenant, app, Some(subscriber))
    } else {
        owner_labels(tenant, FOLDED, Some(FOLDED))
    }
}

/// The labels of the series of `tenant`'s shadow of `app`, within the tenant's bound of
/// `max_series`: its own (tenant, app) while the tenant's subscriptions and shadows fit
/// beside each other ([`SHADOW_SERIES`] each), else `app` [`FOLDED`]. An app's shadow keeps
/// what it got first for the life of the process (a shadow replacing another keeps them).
pub fn shadow_labels(tenant: &str, app: &str, max_series: usize) -> Vec<metrics::Label> {
    if series::admit_shadow(tenant, app, max_series) {
        owner_labels(tenant, app, None)
    } else {
        owner_labels(tenant, FOLDED, None)
    }
}

/// How many of the tenant's apps have shadow series of their own.
pub fn labelled_shadows(tenant: &str) -> usize {
    series::shadows(tenant)
}

/// Whether the subscription has series of its own (see [`subscription_labels`]).
pub fn is_labelled(tenant: &str, app: &str, subscriber: &str) -> bool {
    series::is_labelled(tenant, app, subscriber)
}

/// How many of the tenant's subscriptions share the [`FOLDED`] series.
pub fn folded_subscriptions(tenant: &str) -> usize {
    series::folded(tenant)
}

/// How many of the tenant's subscriptions have series of their own.
pub fn labelled_subscriptions(tenant: &str) -> usize {
    series::labelled(tenant)
}

/// How many shard rows (of [`SHARD_GAUGE_SERIES`] gauges each) a tenant with `labelled`
/// subscriptions and `shadows` shadows of its own may show within `max_series`, besides the
/// one [`FOLDED`] row: what the bound leaves once the other series are counted.
pub fn shard_rows_within(max_series: usize, labelled: usize, shadows: usize) -> usize {
    let counters = (labelled + 1) * (SERIES_PER_SUBSCRIPTION - SHARD_GAUGE_SERIES)
        + shadows * SHADOW_SERIES
        + TENANT_SERIES;
    (max_series.saturating_sub(counters) / SHARD_GAUGE_SERIES).saturating_sub(1)
}

/// Which subscriptions of each tenant have series of their own, process-wide (the recorder
/// is process-wide too).
mod series {
    use std::collections::{HashMap, HashSet};
    use std::sync::{Mutex, MutexGuard, OnceLock};

    use super::{SERIES_PER_SUBSCRIPTION, SHADOW_SERIES, TENANT_SERIES};

    #[derive(Default)]
    struct Tenant {
        labelled: HashSet<(String, String)>,
        folded: HashSet<(String, String)>,
        /// Apps whose shadows have series of their own.
        shadows: HashSet<String>,
    }

    impl Tenant {
        /// The series of `subscriptions` labelled subscriptions (and the folded set beside
        /// them) and of its labelled shadows, within `max_series`.
        fn fits(&self, subscriptions: usize, shadows: usize, max_series: usize) -> bool {
            (subscriptions + 1) * SERIES_PER_SUBSCRIPTION + shadows * SHADOW_SERIES + TENANT_SERIES
                <= max_series
        }
    }

    fn tenants() -> MutexGuard<'static, HashMap<String, Tenant>> {
        static TENANTS: OnceLock<Mutex<HashMap<String, Tenant>>> = OnceLock::new();
        let tenants = TENANTS.get_or_init(Mutex::default);
        tenants
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn admit(tenant: &str, app: &str, subscriber: &str, max_series: usize) -> bool {
        let mut tenants = tenants();
        let entry = tenants.entry(tenant.to_owned()).or_default();
        let key = (app.to_owned(), subscriber.to_owned());
        if entry.labelled.contains(&key) {
            return true;
        }
        // One more of its own, beside the folded set and the shadows'.
        let fits = entry.fits(entry.labelled.len() + 1, entry.shadows.len(), max_series);
        if fits {
            entry.labelled.insert(key);
        } else {
            entry.folded.insert(key);
        }
        fits
    }

    pub(super) fn admit_shadow(tenant: &str, app: &str, max_series: usize) -> bool {
        let mut tenants = tenants();
        let entry = tenants.entry(tenant.to_owned()).or_default();
        if entry.shadows.contains(app) {
            return true;
        }
        let fits = entry.fits(entry.labelled.len(), entry.shadows.len() + 1, max_series);
        if fits {
            entry.shadows.insert(app.to_owned());
        }
        fits
    }

    pub(super) fn shadows(tenant: &str) -> usize {
        tenants().get(tenant).map_or(0, |t| t.shadows.len())
    }

    pub(super) fn is_labelled(tenant: &str, app: &str, subscriber: &str) -> bool {
        let tenants = tenants();
        let key = (app.to_owned(), subscriber.to_owned());
        tenants
            .get(tenant)
            .is_some_and(|t| t.labelled.contains(&key))
    }

    pub(super) fn folded(tenant: &str) -> usize {
        tenants().get(tenant).map_or(0, |t| t.folded.len())
    }

    pub(super) fn labelled(tenant: &str) -> usize {
        tenants().get(tenant).map_or(0, |t| t.labelled.len())
    }
}

/// Bucket bounds of [`CALL_DURATION`], in seconds: a batch call takes from microseconds to the
/// deadline of each of its records.
pub const CALL_DURATION_BUCKETS: &[f64] = &[
    0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0,
];

/// Records a shadow version was given, by `tenant`, `app` and `result` (`agree`, `disagree`,
/// `trap`, `skipped`: not compared; [`SHADOW_SKIPPED`] says why).
pub const SHADOW_RECORDS: &str = "ruststream_shadow_records_total";

/// Records a shadow version skipped, by `tenant`, `app` and `reason`: `sample` (left out by
/// the sampling rate), `behind` (its queue was full), `budget` (its instance did not fit in
/// the tenant's memory budget).
pub const SHADOW_SKIPPED: &str = "ruststream_shadow_skipped_total";

/// Bytes a tenant's instances on this host have reserved (each its memory cap), by `tenant`
/// and `role` (`live`, `shadow`).
pub const INSTANCE_MEMORY: &str = "ruststream_tenant_instance_memory_bytes";

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
        SHADOW_RECORDS,
        "Records offered to a shadow version, by result: agree, disagree, trap, skipped."
    );
    metrics::describe_counter!(
        SHADOW_SKIPPED,
        "Records a shadow version skipped, by reason: sample, behind, budget, cpu, withdrawn."
    );
    metrics::describe_gauge!(
        INSTANCE_MEMORY,
        metrics::Unit::Bytes,
        "Memory a tenant's instances on this host reserve (each its cap), by role: live, shadow."
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every series a tenant's subscriptions can have: the labelled ones, the folded set, and
    /// the shard rows past one per labelled subscription.
    fn worst_case(max_series: usize, labelled: usize, shadows: usize) -> usize {
        let rows = shard_rows_within(max_series, labelled, shadows) + 1;
        (labelled + 1) * (SERIES_PER_SUBSCRIPTION - SHARD_GAUGE_SERIES)
            + rows * SHARD_GAUGE_SERIES
            + shadows * SHADOW_SERIES
            + TENANT_SERIES
    }

    #[test]
    fn a_tenant_with_many_subscriptions_stays_within_its_bound() {
        for max_series in [0, 40, 100, 1_000, 5_000] {
            let tenant = format!("bound-{max_series}");
            for index in 0..200 {
                subscription_labels(&tenant, "app", &format!("s{index}"), max_series);
            }
            let labelled = labelled_subscriptions(&tenant);
            assert_eq!(labelled + folded_subscriptions(&tenant), 200);
            assert!(shard_rows_within(max_series, labelled, 0) >= labelled);
            if max_series >= SERIES_PER_SUBSCRIPTION * 2 + TENANT_SERIES {
                assert!(
                    worst_case(max_series, labelled, 0) <= max_series,
                    "{max_series}"
                );
            }
        }
        assert_eq!(labelled_subscriptions("bound-1000"), 24);
    }

    #[test]
    fn shadows_and_subscriptions_share_the_tenants_bound() {
        for max_series in [40, 100, 1_000] {
            let tenant = format!("shadows-{max_series}");
            for index in 0..10 {
                subscription_labels(&tenant, "app", &format!("s{index}"), max_series);
                shadow_labels(&tenant, &format!("app{index}"), max_series);
            }
            let (labelled, shadows) = (labelled_subscriptions(&tenant), labelled_shadows(&tenant));
            if max_series >= SERIES_PER_SUBSCRIPTION * 2 + TENANT_SERIES {
                let worst = worst_case(max_series, labelled, shadows);
                assert!(worst <= max_series, "{max_series}: {worst}");
            }
        }
        assert_eq!(labelled_shadows("shadows-1000"), 10, "room for all of them");
        let folded = shadow_labels("shadows-40", "late", 40);
        assert!(folded.iter().any(|l| l.value() == FOLDED), "{folded:?}");
        let first = shadow_labels("shadows-1000", "app0", 0);
        assert!(
            first.iter().any(|l| l.value() == "app0"),
            "keeps its labels"
        );
    }

    #[test]
    fn a_subscription_keeps_the_labels_it_got_first() {
        let first = subscription_labels("keeps", "app", "a", 1_000);
        assert_eq!(subscription_labels("keeps", "app", "a", 0), first);
        assert!(is_labelled("keeps", "app", "a"));
    }
}
