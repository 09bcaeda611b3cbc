//! What a handler returns, and what happens when it cannot run.

use std::fmt::Display;
use std::time::Duration;

use crate::bindings::ruststream::handler::types as wit;

/// A handler's decision about one record.
///
/// - [`ack`](Self::ack): handled. The shard's checkpoint moves past the record once every
///   earlier record of the shard is handled too.
/// - [`drop`](Self::drop): handled by retiring it; how a poison record is retired.
/// - [`retry`](Self::retry): a requeue, which a shard cannot do. Without `max_attempts` or
///   `dead_letter` on the registration the host logs a warning and the record holds the
///   checkpoint in front of it (later records are still delivered) until the shard's lease is
///   next taken. With them, the host publishes a counted copy back to the stream, or to the
///   dead-letter stream once the attempts are spent.
/// - [`retry_after`](Self::retry_after): a copy delivered no earlier than the delay.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerOutcome(Kind);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ack,
    Drop,
    Retry,
    RetryAfter(Duration),
}

impl HandlerOutcome {
    /// The record is handled.
    pub const fn ack() -> Self {
        Self(Kind::Ack)
    }

    /// The record is retired without being handled (it counts as handled for the checkpoint).
    pub const fn drop() -> Self {
        Self(Kind::Drop)
    }

    /// Asks for the record again; see the type's docs for what a shard can do with that.
    pub const fn retry() -> Self {
        Self(Kind::Retry)
    }

    /// Asks for the record again, no earlier than `delay` from now.
    pub const fn retry_after(delay: Duration) -> Self {
        Self(Kind::RetryAfter(delay))
    }

    /// Whether this is [`ack`](Self::ack).
    pub const fn is_ack(&self) -> bool {
        matches!(self.0, Kind::Ack)
    }

    /// Whether this is [`drop`](Self::drop).
    pub const fn is_drop(&self) -> bool {
        matches!(self.0, Kind::Drop)
    }

    /// True for both `retry` and `retry_after`.
    pub const fn is_retry(&self) -> bool {
        matches!(self.0, Kind::Retry | Kind::RetryAfter(_))
    }

    /// The delay of a `retry_after`.
    pub const fn retry_delay(&self) -> Option<Duration> {
        match self.0 {
            Kind::RetryAfter(delay) => Some(delay),
            _ => None,
        }
    }

    pub(crate) fn to_wit(self) -> wit::HandlerOutcome {
        match self.0 {
            Kind::Ack => wit::HandlerOutcome::Ack,
            Kind::Drop => wit::HandlerOutcome::Drop,
            Kind::Retry => wit::HandlerOutcome::Retry,
            Kind::RetryAfter(delay) => wit::HandlerOutcome::RetryAfter(millis(delay)),
        }
    }
}

pub(crate) fn millis(delay: Duration) -> u64 {
    u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)
}

/// Turns what a handler function returns into the outcome of its record.
///
/// Implemented for [`HandlerOutcome`], `()` (always ack), `Result<(), E>` (`Err` drops the
/// record and logs the error, as the seed system does) and `Result<(), HandlerOutcome>` (the
/// manual [`Handle`](crate::Handle) form).
pub trait IntoOutcome {
    /// `Ok(())` to ack the record, or the outcome it stands for.
    fn into_outcome(self) -> Result<(), HandlerOutcome>;
}

impl IntoOutcome for HandlerOutcome {
    fn into_outcome(self) -> Result<(), HandlerOutcome> {
        if self.is_ack() { Ok(()) } else { Err(self) }
    }
}

impl IntoOutcome for () {
    fn into_outcome(self) -> Result<(), HandlerOutcome> {
        Ok(())
    }
}

impl IntoOutcome for Result<(), HandlerOutcome> {
    fn into_outcome(self) -> Result<(), HandlerOutcome> {
        self
    }
}

impl<E: Display> IntoOutcome for Result<(), E> {
    fn into_outcome(self) -> Result<(), HandlerOutcome> {
        self.map_err(|error| {
            tracing::warn!(%error, "handler returned an error; the record is dropped");
            HandlerOutcome::drop()
        })
    }
}

/// What happens to a record when something other than the handler's own decision settles it.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Retire the record (counts as handled).
    Drop,
    /// A failed attempt, treated as [`HandlerOutcome::retry`].
    Retry,
    /// A failed attempt, treated as [`HandlerOutcome::retry_after`].
    RetryAfter(Duration),
    /// Treat the record as handled, as if acked.
    Skip,
}

/// The failure policies of a registration.
///
/// `decode` applies to a record whose payload does not decode into the handler's input type
/// (default: [`FailurePolicy::Drop`], logged as an error). `panic` applies when the handler
/// call traps: a panic, a deadline, the memory limit (default: [`FailurePolicy::Retry`]; a guest
/// can never stop the host, so the seed's `fail_fast` does not exist here).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailurePolicies {
    /// What a trapped call stands for (panic, deadline, memory limit).
    pub panic: FailurePolicy,
    /// What a record that does not decode into the handler's input stands for.
    pub decode: FailurePolicy,
}

impl Default for FailurePolicies {
    fn default() -> Self {
        Self {
            panic: FailurePolicy::Retry,
            decode: FailurePolicy::Drop,
        }
    }
}

impl FailurePolicies {
    /// These policies, with `policy` for trapped calls.
    pub fn with_panic(mut self, policy: FailurePolicy) -> Self {
        self.panic = policy;
        self
    }

    /// These policies, with `policy` for records that do not decode.
    pub fn with_decode(mut self, policy: FailurePolicy) -> Self {
        self.decode = policy;
        self
    }
}

impl FailurePolicy {
    pub(crate) fn outcome(self) -> HandlerOutcome {
        match self {
            FailurePolicy::Drop => HandlerOutcome::drop(),
            FailurePolicy::Retry => HandlerOutcome::retry(),
            FailurePolicy::RetryAfter(delay) => HandlerOutcome::retry_after(delay),
            FailurePolicy::Skip => HandlerOutcome::ack(),
        }
    }

    pub(crate) fn to_wit(self) -> wit::FailureAction {
        match self {
            // A trapped call cannot be "handled"; skipping it retires it like a drop.
            FailurePolicy::Drop | FailurePolicy::Skip => wit::FailureAction::Drop,
            FailurePolicy::Retry => wit::FailureAction::Retry,
            FailurePolicy::RetryAfter(delay) => wit::FailureAction::RetryAfter(millis(delay)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_forms_map_to_outcomes() {
        assert_eq!(().into_outcome(), Ok(()));
        assert_eq!(HandlerOutcome::ack().into_outcome(), Ok(()));
        assert_eq!(
            HandlerOutcome::retry().into_outcome(),
            Err(HandlerOutcome::retry())
        );
        assert_eq!(
            Result::<(), String>::Err("bad".into()).into_outcome(),
            Err(HandlerOutcome::drop())
        );
        assert_eq!(Result::<(), String>::Ok(()).into_outcome(), Ok(()));
    }

    #[test]
    fn retry_after_carries_its_delay() {
        let outcome = HandlerOutcome::retry_after(Duration::from_secs(30));
        assert!(outcome.is_retry());
        assert_eq!(outcome.retry_delay(), Some(Duration::from_secs(30)));
        assert!(matches!(
            outcome.to_wit(),
            wit::HandlerOutcome::RetryAfter(30_000)
        ));
    }
}
