//! The RustStream runtime: untrusted tenant handlers, compiled to WebAssembly components, run
//! in a sandbox and settled per shard. It knows no transport: `ruststream-host` drives it from
//! Kinesis, and `TestApp` (feature `testing`) from in-process streams in paused time.
//!
//! A component (built with the `ruststream` guest SDK for `wasm32-wasip2`) declares its
//! subscriptions and answers each record with a handler outcome; see `wit/ruststream.wit`.
//! The runtime owns everything else, in the order a record meets it:
//!
//! - [`Runtime`] and [`LoadedComponent`]: compiling a component in a bounded worker, checking
//!   it, instantiating it under its tenant's [`SandboxPolicy`], validating what it declares;
//! - [`ShardPipeline`]: one shard of one subscription: calls per batch with a deadline per
//!   record, settlement of each [`Outcome`], counted copies, the checkpoint;
//! - [`Tenant`]: what a tenant is granted, its limits, its quarantine gate.
//!
//! ```no_run
//! use ruststream_runtime::{Outcome, TestApp};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let mut app = TestApp::start("settlement.wasm").await?;
//! app.publish("ledger", &serde_json::json!({ "id": 1, "amount": -5 })).await?;
//! let book = app.subscriber("book")?;
//! assert_eq!(book.outcomes(), [Outcome::Retry]);
//! assert_eq!(book.checkpoint(), None); // held in front of the refund
//! # Ok(()) }
//! ```

mod app;
mod backoff;
mod checkpoint;
mod clock;
mod component;
mod dead_letter;
mod env;
mod envelope;
mod escape;
mod limits;
mod log;
pub mod metrics;
mod pipeline;
mod policy;
mod publish;
mod quota;
mod record;
mod rollout;
mod sequence;
mod settlement;
pub mod shadow;
mod stop;
mod sync;
mod tenant;
#[cfg(feature = "testing")]
mod testapp;
mod text;

pub use app::{
    AppSpec, DeclarationBounds, MAX_BATCH_LIMIT, MaxRecordAge, SpecError, StartPosition,
    SubscriptionSpec, valid_name,
};
/// The shared byte buffer a [`Delivery`]'s payload is a slice of.
pub use bytes::Bytes;
pub use clock::{Clock, ManualClock, SystemClock};
pub use component::{
    CONTRACT, CallFailure, CallForm, CompileError, ContractVersion, ImportAccess, LoadError,
    LoadPhase, LoadedComponent, Refusal, Runtime, RuntimeError, TrapKind, VersionRefusal,
    WORKER_COMMAND, compile_worker, content_hash, describe_app, import_access,
};
pub use dead_letter::{ATTEMPTS_EXHAUSTED, DeadLetterOrigin, RECORD_AGE_EXCEEDED};
pub use env::Env;
pub use escape::{escape_controls, one_line, one_line_within, quote};
pub use limits::{
    CompileBudget, CompileConfig, CompileLimits, Compiler, CopyLimits, Limits, LogLimits,
    RuntimeConfig, WriteLimits,
};
pub use log::{Level, LogLine, LogSink, Origin, parse_field_list};
pub use pipeline::{
    DEFAULT_BATCH_LIMIT, DeliveryReport, MAX_UNSENT_BYTES, MAX_UNSENT_COPIES, Observer,
    OutcomeCounts, PipelineEnv, ShardPipeline, Stop,
};
pub use policy::{SandboxPolicy, StreamGrant};
pub use publish::{BoxFuture, MAX_RECORD_BYTES, PublishError, Publisher, check_size};
pub use record::{CopyOrigin, CopyOwner, Delivery, Header, KPL_MAGIC, OutgoingRecord, Published};
pub use rollout::{
    CallStats, DEFAULT_ROLLOUT_CALLS, DEFAULT_ROLLOUT_MARGIN, RolloutPolicy, Verdict,
};
pub use settlement::{Outcome, RetryPolicy};
pub use tenant::{Tenant, TenantError};
#[cfg(feature = "testing")]
pub use testapp::{
    InProcessStreams, SHARD_ID, StoredRecord, SubscriberView, TestApp, TestAppBuilder, TestAppError,
};
pub use text::Text;

/// Internals that transports, benchmarks and the end-to-end tests of this workspace use. Not
/// part of the API: they change without notice.
#[doc(hidden)]
pub mod internals {
    pub use crate::backoff::Backoff;
    pub use crate::component::{BatchCall, BatchFailure, HandlerInstance};
    pub use crate::record::Deliveries;
    pub use crate::sync::{lock, sleep_until};

    /// The `RSK2` record envelope, as written to and read from streams.
    pub mod envelope {
        pub use crate::envelope::{
            COPY_FOR_HEADER, COPY_OF_HEADER, DUE_AT_HEADER, FIRST_ARRIVAL_HEADER, REDRIVE_HEADER,
            RESERVED_PREFIX, RETRY_COUNT_HEADER, Unwrapped, is_reserved, origin_headers, unwrap,
            wrap,
        };
    }
}
