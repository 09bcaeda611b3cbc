//! What happens to a record after its handler call: the settlement rules.
//!
//! The rules are the seed system's (see the crate docs): `ack` and `drop` mark a record handled;
//! `retry` without declared attempts holds it (a shard cannot requeue); with `max_attempts`
//! and/or `dead_letter` declared, `retry` and `retry_after` publish a counted copy, and spent
//! attempts go to the dead-letter stream or are retired. `retry_after` without any declaration
//! publishes a copy after each delay, with no cap.
//!
//! This module only decides. The settling beside it (`pipeline::settlement`) carries the
//! decision out, and marks the original handled only once a copy is acknowledged by the stream.

use std::time::Duration;

use crate::outcome::{Outcome, RetryPolicy};

/// What to do with a record, decided from its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Mark it handled (ack).
    Handled,
    /// Mark it handled: retired by `drop`.
    Dropped,
    /// Mark it handled: attempts spent and no dead-letter stream (logged as a warning).
    Retired { attempts: u32 },
    /// Leave it unhandled: the checkpoint stays in front of it (logged as a warning).
    Held,
    /// Publish a copy, then mark the original handled once the stream acknowledges the copy.
    Copy(CopyPlan),
}

/// A copy to publish in place of the original.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CopyPlan {
    /// `None`: back to the record's own stream. `Some`: the dead-letter stream.
    pub dead_letter: Option<String>,
    /// The retry count the copy carries (the original's + 1).
    pub retry_count: u32,
    /// Delay before the copy may be delivered.
    pub delay: Option<Duration>,
}

/// Decides what happens to a record that was delivered with `retry_count` earlier deliveries.
pub(crate) fn decide(outcome: Outcome, retry_count: u32, policy: &RetryPolicy) -> Disposition {
    let delay = match outcome {
        Outcome::Ack => return Disposition::Handled,
        Outcome::Drop => return Disposition::Dropped,
        Outcome::Retry if !policy.counts_attempts() => return Disposition::Held,
        Outcome::Retry => None,
        Outcome::RetryAfter(delay) => Some(delay),
    };
    let attempts = retry_count.saturating_add(1);
    let spent = match policy.max_attempts {
        Some(max) => attempts >= max,
        // With only a dead letter declared, every retry is spent at once.
        None => policy.dead_letter.is_some(),
    };
    if !spent {
        return Disposition::Copy(CopyPlan {
            dead_letter: None,
            retry_count: attempts,
            delay,
        });
    }
    match &policy.dead_letter {
        Some(stream) => Disposition::Copy(CopyPlan {
            dead_letter: Some(stream.clone()),
            retry_count: attempts,
            delay: None,
        }),
        None => Disposition::Retired { attempts },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max_attempts: Option<u32>, dead_letter: Option<&str>) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            dead_letter: dead_letter.map(str::to_owned),
        }
    }

    fn copy(dead_letter: Option<&str>, retry_count: u32, delay: Option<u64>) -> Disposition {
        Disposition::Copy(CopyPlan {
            dead_letter: dead_letter.map(str::to_owned),
            retry_count,
            delay: delay.map(Duration::from_secs),
        })
    }

    #[test]
    fn ack_and_drop_handle_whatever_is_declared() {
        for p in [policy(None, None), policy(Some(3), Some("dead"))] {
            assert_eq!(decide(Outcome::Ack, 7, &p), Disposition::Handled);
            assert_eq!(decide(Outcome::Drop, 7, &p), Disposition::Dropped);
        }
    }

    #[test]
    fn retry_without_declaration_holds() {
        assert_eq!(
            decide(Outcome::Retry, 0, &policy(None, None)),
            Disposition::Held
        );
    }

    #[test]
    fn retry_after_without_declaration_copies_forever() {
        let after = Outcome::RetryAfter(Duration::from_secs(30));
        assert_eq!(
            decide(after, 41, &policy(None, None)),
            copy(None, 42, Some(30))
        );
    }

    #[test]
    fn max_attempts_counts_deliveries_then_dead_letters() {
        let p = policy(Some(3), Some("ledger.dead"));
        assert_eq!(decide(Outcome::Retry, 0, &p), copy(None, 1, None));
        assert_eq!(decide(Outcome::Retry, 1, &p), copy(None, 2, None));
        assert_eq!(
            decide(Outcome::Retry, 2, &p),
            copy(Some("ledger.dead"), 3, None)
        );
    }

    #[test]
    fn spent_without_dead_letter_is_retired() {
        let p = policy(Some(2), None);
        assert_eq!(decide(Outcome::Retry, 0, &p), copy(None, 1, None));
        assert_eq!(
            decide(Outcome::Retry, 1, &p),
            Disposition::Retired { attempts: 2 }
        );
    }

    #[test]
    fn dead_letter_without_cap_takes_every_retry() {
        let p = policy(None, Some("dead"));
        assert_eq!(decide(Outcome::Retry, 0, &p), copy(Some("dead"), 1, None));
        let after = Outcome::RetryAfter(Duration::from_secs(5));
        assert_eq!(decide(after, 0, &p), copy(Some("dead"), 1, None));
    }

    #[test]
    fn retry_after_keeps_its_delay_until_spent() {
        let p = policy(Some(2), Some("dead"));
        let after = Outcome::RetryAfter(Duration::from_secs(5));
        assert_eq!(decide(after, 0, &p), copy(None, 1, Some(5)));
        assert_eq!(decide(after, 1, &p), copy(Some("dead"), 2, None));
    }
}
