//! What a handler answers for a record ([`Outcome`]), and what a subscription declares about
//! retrying ([`RetryPolicy`]): the vocabulary of settlement. The rules that turn an outcome
//! into a disposition, and the pipeline that carries it out, are `pipeline::settlement`.

use std::time::Duration;

/// A handler's decision about one record, or what the host substitutes for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Handled: the checkpoint may move past the record.
    Ack,
    /// Retired as a poison record; counts as handled for the checkpoint.
    Drop,
    /// Not handled: held in front of the checkpoint, or copied when the subscription counts
    /// attempts.
    Retry,
    /// Like `Retry`, but never held: a copy back to the stream is delivered no earlier than
    /// after the delay.
    RetryAfter(Duration),
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Ack => f.write_str("ack"),
            Outcome::Drop => f.write_str("drop"),
            Outcome::Retry => f.write_str("retry"),
            Outcome::RetryAfter(delay) => write!(f, "retry_after({}ms)", delay.as_millis()),
        }
    }
}

/// The registration settings that shape settlement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Deliveries a record gets in all, counting the first.
    pub max_attempts: Option<u32>,
    /// Where spent (or, without `max_attempts`, all retried) records go.
    pub dead_letter: Option<String>,
}

impl RetryPolicy {
    /// Whether `retry` becomes a counted copy rather than a hold.
    pub fn counts_attempts(&self) -> bool {
        self.max_attempts.is_some() || self.dead_letter.is_some()
    }
}
