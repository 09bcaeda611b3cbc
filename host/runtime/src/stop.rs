//! Why a shard must stop being delivered on this host: what the lease keeper tells the
//! pipeline, and the pipeline tells a call in flight.

/// Why a shard must stop being delivered on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The lease is lost: stop at once, write nothing more. A call in flight ends at its next
    /// deadline check or host call; what it reported stands, nothing more is published.
    Lost,
    /// Another host asked for the lease: stop at the next call boundary and hand it over.
    HandOff(String),
}

/// Whether `stop` (a keeper's signal, if the pipeline has one) says the lease is lost.
pub(crate) fn is_lost(stop: Option<&tokio::sync::watch::Receiver<Option<Stop>>>) -> bool {
    stop.is_some_and(|stop| matches!(*stop.borrow(), Some(Stop::Lost)))
}
