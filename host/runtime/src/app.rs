//! What a component declares about itself: its app identity and subscriptions, validated.

use std::time::Duration;

use crate::outcome::{Outcome, RetryPolicy};

/// Records handed to one call when the subscription does not set `batch`.
pub const DEFAULT_BATCH_LIMIT: usize = 1000;

/// Most records one GetRecords call may return, and so the largest batch a subscription may ask for.
pub const MAX_BATCH_LIMIT: u32 = 10_000;

/// A component's app and subscriptions, as the host uses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSpec {
    /// The app's name: 1-64 characters of `[A-Za-z0-9_.-]`, safe in lease table names and log
    /// lines.
    pub name: String,
    /// The app's version: 1-64 characters of semver's alphabet (`1.2.0-rc.1+build`).
    pub version: String,
    /// Its subscriptions, in declaration order (at least one, names unique).
    pub subscriptions: Vec<SubscriptionSpec>,
}

/// One subscription of a component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionSpec {
    /// Position in the component's list; how the host names it in calls.
    pub index: u32,
    /// The subscriber's name, unique within the component (1-64 characters of
    /// `[A-Za-z0-9_.-]`): what tells its leases and log lines apart.
    pub name: String,
    /// The stream it reads.
    pub stream: String,
    /// Its `max-attempts` and `dead-letter`: whether `retry` holds a record or copies it.
    pub retry: RetryPolicy,
    /// Where a shard without a checkpoint starts; `None` is [`StartPosition::Latest`].
    pub start: Option<StartPosition>,
    /// The outcome a trapped call stands for (`Retry` unless the registration says otherwise).
    pub on_trap: Outcome,
    /// Most records one `handle-batch` call gets, 1 to [`MAX_BATCH_LIMIT`]; `None` is the
    /// host's default.
    pub batch_limit: Option<u32>,
    /// How old a record may get before it is given up on: an operator's setting, components
    /// do not declare it.
    pub max_record_age: Option<MaxRecordAge>,
    /// Where the subscription's counted copies go instead of back to `stream`, when set (an
    /// operator's setting): a stream of its own, which the subscription reads beside `stream`
    /// ([`reading_retry_stream`](Self::reading_retry_stream)), so that other readers of
    /// `stream` (native services, which would handle a copy at once as a record of their own)
    /// never see its copies. Dead letters still go to their dead-letter stream.
    pub retry_stream: Option<String>,
}

impl SubscriptionSpec {
    /// The stream the subscription's counted copies are published to: its retry stream, else
    /// the stream it reads.
    pub fn copy_stream(&self) -> &str {
        self.retry_stream.as_deref().unwrap_or(&self.stream)
    }

    /// The subscription as the readers of its retry stream run it, when it has one: the same
    /// subscription (name, handler, policy), reading the retry stream from its oldest record
    /// wherever the subscription itself starts (every record there is a copy someone is
    /// owed), its copies going back to the retry stream.
    pub fn reading_retry_stream(&self) -> Option<Self> {
        let retry_stream = self.retry_stream.clone()?;
        Some(Self {
            stream: retry_stream,
            start: Some(StartPosition::Horizon),
            ..self.clone()
        })
    }
}

/// Records older than `age` (from their arrival) are dead-lettered to `dead_letter`, or
/// retired without one, instead of delivered; a record held by `retry` is given up on when it
/// reaches `age`, so the checkpoint moves on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaxRecordAge {
    /// The age.
    pub age: Duration,
    /// Where records past it go.
    pub dead_letter: Option<String>,
}

/// Where a shard without a checkpoint starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartPosition {
    /// The tip: only records written after the shard is opened.
    Latest,
    /// The oldest record the shard still holds.
    Horizon,
    /// The first record that arrived at or after this time, in milliseconds since the epoch.
    AtTimestamp(u64),
    /// The record with this sequence number, delivered again; shards other than `shard_id`
    /// start at [`Latest`](Self::Latest).
    AtSequence {
        /// The shard the sequence number belongs to.
        shard_id: String,
        /// Where to start on it: 1-128 decimal digits, never parsed.
        sequence_number: String,
    },
}

/// Why a component's declaration was refused. Every variant names the field at fault; names
/// a component declared are quoted escaped and cut short, whatever they hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The app's name is empty, too long or has a character outside `[A-Za-z0-9_.-]`; holds
    /// the name, quoted.
    #[error("field `app.name`: `{0}` is not valid: use 1-64 characters of [A-Za-z0-9_.-]")]
    AppName(String),
    /// The app's version is empty, too long or outside semver's alphabet; holds the version,
    /// quoted.
    #[error("field `app.version`: `{0}` is not valid: use 1-64 characters of [A-Za-z0-9_.+-]")]
    AppVersion(String),
    /// The component declares no subscriptions: it would never be called.
    #[error("the component declares no subscriptions")]
    NoSubscriptions,
    /// More subscriptions than the tenant's `max_subscriptions`, refused before any is read.
    #[error(
        "field `subscriptions`: {declared} subscriptions declared; at most {max} are allowed \
         (limit `max_subscriptions`)"
    )]
    TooManySubscriptions {
        /// How many the component declared.
        declared: usize,
        /// The tenant's bound.
        max: usize,
    },
    /// A subscriber's name is empty, too long or has a character outside `[A-Za-z0-9_.-]`.
    #[error(
        "field `subscriptions[{index}].name`: `{name}` is not valid: use 1-64 characters of \
         [A-Za-z0-9_.-]"
    )]
    SubscriberName {
        /// Position of the subscription in the declaration.
        index: usize,
        /// The name, quoted.
        name: String,
    },
    /// Two subscriptions share a name, which must tell them apart in lease keys and logs.
    #[error("field `subscriptions[{index}].name`: subscriber `{name}` is declared twice")]
    DuplicateSubscriber {
        /// Position of the second subscription with the name.
        index: usize,
        /// The name declared twice.
        name: String,
    },
    /// A stream or dead-letter stream name is not a valid Kinesis stream name.
    #[error(
        "subscriber `{subscriber}`, field `{field}`: `{stream}` is not a valid stream name \
         (1-128 characters of [A-Za-z0-9_.-])"
    )]
    StreamName {
        /// The subscriber declaring it.
        subscriber: String,
        /// `stream` or `dead-letter`.
        field: &'static str,
        /// The name, quoted.
        stream: String,
    },
    /// A subscriber's `max-attempts` is 0, which allows not even the first delivery; holds
    /// the subscriber's name.
    #[error("subscriber `{0}`, field `max-attempts`: must be at least 1")]
    ZeroAttempts(String),
    /// A subscriber's `batch-limit` is 0 or over [`MAX_BATCH_LIMIT`].
    #[error(
        "subscriber `{subscriber}`, field `batch-limit`: must be between 1 and \
         {MAX_BATCH_LIMIT}, not {batch}"
    )]
    BatchLimit {
        /// The subscriber declaring it.
        subscriber: String,
        /// The limit declared.
        batch: u32,
    },
    /// A subscriber starts at a timestamp later than the time of loading.
    #[error(
        "subscriber `{subscriber}`, field `start`: timestamp {at_ms} ms is in the future \
         (now is {now_ms} ms)"
    )]
    FutureStart {
        /// The subscriber declaring it.
        subscriber: String,
        /// The start declared, in ms since the epoch.
        at_ms: u64,
        /// The time it was checked against, in ms since the epoch.
        now_ms: u64,
    },
    /// A subscriber starts at a sequence position whose shard id or sequence number is not
    /// valid.
    #[error("subscriber `{subscriber}`, field `start`: {reason}")]
    StartSequence {
        /// The subscriber declaring it.
        subscriber: String,
        /// Which part is wrong, the value quoted.
        reason: String,
    },
    /// Dead-letter streams form a cycle, over one subscription or several: a spent record
    /// would never leave it.
    #[error(
        "field `dead-letter`: the dead-letter streams of subscribers {subscribers} form a \
         cycle ({cycle}): a spent record would go round it forever"
    )]
    DeadLetterCycle {
        /// The subscribers along the cycle, quoted with backticks and comma-separated.
        subscribers: String,
        /// The streams along it, `a -> b -> a`.
        cycle: String,
    },
}

/// What a declaration is checked against: the loading tenant's bounds, and the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeclarationBounds {
    /// Most subscriptions one component may declare.
    pub max_subscriptions: usize,
    /// Now, in ms since the epoch: start timestamps may not be later.
    pub now_ms: u64,
}

impl AppSpec {
    /// The subscription called `name`.
    pub fn subscription(&self, name: &str) -> Option<&SubscriptionSpec> {
        self.subscriptions.iter().find(|s| s.name == name)
    }
}

/// The longest name Kinesis gives a stream.
pub const MAX_STREAM_NAME_LEN: usize = 128;

/// Kinesis stream names (and our app, subscriber and tenant names): 1 to `max_len`
/// letters, digits, `_`, `.`, `-`. No control character, space or separator of ours (`:`, `@`)
/// can get into a lease key or a log line through one.
pub fn valid_name(name: &str, max_len: usize) -> bool {
    !name.is_empty()
        && name.len() <= max_len
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}
