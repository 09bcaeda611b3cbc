//! What a component declares about itself: its app identity and subscriptions, validated.

use std::time::Duration;

use crate::component::bindings::exports::ruststream::handler::handler as wit;
use crate::component::bindings::ruststream::handler::types::FailureAction;
use crate::settlement::{Outcome, RetryPolicy};

/// Most records one GetRecords call may return, and so the largest batch a subscription may ask for.
pub const MAX_BATCH_LIMIT: u32 = 10_000;

/// A component's app and subscriptions, as the host uses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSpec {
    pub name: String,
    pub version: String,
    pub subscriptions: Vec<SubscriptionSpec>,
}

/// One subscription of a component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionSpec {
    /// Position in the component's list; how the host names it in calls.
    pub index: u32,
    pub name: String,
    pub stream: String,
    pub retry: RetryPolicy,
    pub start: Option<StartPosition>,
    /// The outcome a trapped call stands for (`Retry` unless the registration says otherwise).
    pub on_trap: Outcome,
    pub batch_limit: Option<u32>,
}

/// Where a shard without a checkpoint starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartPosition {
    Latest,
    Horizon,
    /// Milliseconds since the epoch.
    AtTimestamp(u64),
    AtSequence {
        shard_id: String,
        sequence_number: String,
    },
}

/// Why a component's declaration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("the app name `{0}` is not valid: use 1-64 characters of [A-Za-z0-9_.-]")]
    AppName(String),
    #[error("the component declares no subscriptions")]
    NoSubscriptions,
    #[error("subscriber `{0}` is declared twice")]
    DuplicateSubscriber(String),
    #[error(
        "subscriber `{subscriber}`: `{stream}` is not a valid stream name (1-128 characters of [A-Za-z0-9_.-])"
    )]
    StreamName { subscriber: String, stream: String },
    #[error("subscriber `{0}`: max_attempts must be at least 1")]
    ZeroAttempts(String),
    #[error(
        "subscriber `{subscriber}`: batch must be between 1 and {MAX_BATCH_LIMIT}, not {batch}"
    )]
    BatchLimit { subscriber: String, batch: u32 },
    #[error("subscriber `{0}`: the dead-letter stream cannot be the subscribed stream")]
    DeadLetterLoop(String),
}

impl AppSpec {
    /// Validates what a component's `describe` returned.
    pub fn from_wit(app: wit::App) -> Result<Self, SpecError> {
        if !valid_name(&app.info.name, 64) {
            return Err(SpecError::AppName(app.info.name));
        }
        if app.subscriptions.is_empty() {
            return Err(SpecError::NoSubscriptions);
        }
        let mut subscriptions: Vec<SubscriptionSpec> = Vec::new();
        for (index, subscription) in (0u32..).zip(app.subscriptions) {
            let spec = SubscriptionSpec::from_wit(index, subscription)?;
            if subscriptions.iter().any(|s| s.name == spec.name) {
                return Err(SpecError::DuplicateSubscriber(spec.name));
            }
            subscriptions.push(spec);
        }
        Ok(Self {
            name: app.info.name,
            version: app.info.version,
            subscriptions,
        })
    }

    /// The subscription called `name`.
    pub fn subscription(&self, name: &str) -> Option<&SubscriptionSpec> {
        self.subscriptions.iter().find(|s| s.name == name)
    }
}

impl SubscriptionSpec {
    fn from_wit(index: u32, s: wit::Subscription) -> Result<Self, SpecError> {
        let stream_error = |stream: &str| SpecError::StreamName {
            subscriber: s.name.clone(),
            stream: stream.to_owned(),
        };
        if !valid_name(&s.stream, 128) {
            return Err(stream_error(&s.stream));
        }
        if let Some(dead) = &s.dead_letter {
            if !valid_name(dead, 128) {
                return Err(stream_error(dead));
            }
            if *dead == s.stream {
                return Err(SpecError::DeadLetterLoop(s.name));
            }
        }
        if s.max_attempts == Some(0) {
            return Err(SpecError::ZeroAttempts(s.name));
        }
        if let Some(batch) = s.batch_limit.filter(|b| !(1..=MAX_BATCH_LIMIT).contains(b)) {
            return Err(SpecError::BatchLimit {
                subscriber: s.name,
                batch,
            });
        }
        Ok(Self {
            index,
            retry: RetryPolicy {
                max_attempts: s.max_attempts,
                dead_letter: s.dead_letter,
            },
            start: s.start.map(StartPosition::from_wit),
            on_trap: match s.on_trap {
                FailureAction::Drop => Outcome::Drop,
                FailureAction::Retry => Outcome::Retry,
                FailureAction::RetryAfter(ms) => Outcome::RetryAfter(Duration::from_millis(ms)),
            },
            batch_limit: s.batch_limit,
            name: s.name,
            stream: s.stream,
        })
    }
}

impl StartPosition {
    fn from_wit(position: wit::StartPosition) -> Self {
        match position {
            wit::StartPosition::Latest => Self::Latest,
            wit::StartPosition::Horizon => Self::Horizon,
            wit::StartPosition::AtTimestamp(ms) => Self::AtTimestamp(ms),
            wit::StartPosition::AtSequence(at) => Self::AtSequence {
                shard_id: at.shard_id,
                sequence_number: at.sequence_number,
            },
        }
    }
}

/// Kinesis stream names (and our app names): letters, digits, `_`, `.`, `-`.
pub fn valid_name(name: &str, max_len: usize) -> bool {
    !name.is_empty()
        && name.len() <= max_len
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}
