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
    /// The host is shutting down and the calls' part of the shutdown grace is over: a call in
    /// flight ends at its next deadline check or host call, what it reported stands, the rest
    /// of its records are left unsettled for the lease's next holder; the checkpoint is
    /// flushed and the lease released.
    Shutdown,
    /// The version was withdrawn (a shadow aborted, promoted or replaced): a call in flight
    /// ends at its next deadline check or host call, and nothing it did counts any more.
    Withdrawn,
}

impl Stop {
    /// Whether a call in flight must end at its next check rather than at its end.
    pub fn cuts_calls(&self) -> bool {
        !matches!(self, Self::HandOff(_))
    }
}

/// The stop that cuts a call in flight, if `stop` (a keeper's signal, if the pipeline has
/// one) says one.
pub(crate) fn cutting(stop: Option<&tokio::sync::watch::Receiver<Option<Stop>>>) -> Option<Stop> {
    stop.and_then(|stop| stop.borrow().clone().filter(Stop::cuts_calls))
}
