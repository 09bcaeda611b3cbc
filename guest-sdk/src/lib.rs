//! The RustStream guest SDK: write Kinesis record handlers in Rust, compile them to a
//! WebAssembly component (`wasm32-wasip2`), and let a RustStream host run them.
//!
//! The host owns everything a handler must not touch: the stream reader, leases, checkpoints,
//! retries and limits. A component only says which streams it subscribes to and what happened
//! to each record it was handed ([`HandlerOutcome`]).
//!
//! ```no_run
//! use ruststream::prelude::*;
//!
//! #[derive(serde::Deserialize)]
//! struct Entry { id: u64, amount: i64 }
//!
//! /// Books each entry. An empty entry is retired; a refund holds the checkpoint.
//! #[subscriber(KinesisStream::new("ledger"))]
//! async fn book(entry: &Entry) -> HandlerOutcome {
//!     match entry.amount {
//!         0 => HandlerOutcome::drop(),
//!         amount if amount < 0 => HandlerOutcome::retry(),
//!         amount => {
//!             tracing::info!(entry.id, amount, "booked");
//!             HandlerOutcome::ack()
//!         }
//!     }
//! }
//!
//! #[service]
//! fn service(broker: KinesisBroker) -> RustStream {
//!     RustStream::new(AppInfo::new("ledger", "0.1.0")).with_broker(broker, |b| {
//!         b.include(book).max_attempts(3).dead_letter("ledger.dead");
//!     })
//! }
//! ```
//!
//! Build with `cargo build --release --target wasm32-wasip2`; the `.wasm` file is the
//! component. A tenant crate needs this crate, `serde` for its types, and nothing else: no
//! WIT files (the contract ships inside this crate, `wit/`), no `wit-bindgen`.
//! `ruststream new NAME` writes such a crate, with a `TestApp` test.
//!
//! A component built with this SDK speaks contract `ruststream:handler@1.0.0`, which every 1.x
//! host runs. It exports both `handle` (one record per call, the base contract) and the
//! `handle-batch` fast path (world `batch-subscriber`); the host calls it in batches.
//!
//! The SDK installs its own global allocator in the component ([`allocator`]: a free list per
//! size class in front of wasi-libc's `malloc`), for the small blocks records come in and
//! handlers make. A tenant crate with a `#[global_allocator]` of its own depends on the SDK
//! with `default-features = false`, which leaves the `allocator` feature off.
//!
//! Records are decoded from JSON into the handler's input type (`&Raw` takes the payload as it
//! is), to the value and the error `serde_json::from_slice` gives (a reader built for wasm
//! reads the common shapes first, serde_json everything it refuses); a record that does not
//! decode is logged (naming the subscriber and sequence number) and settled by the
//! registration's decode policy (default: dropped). Handlers publish with
//! [`publish`], which answers where the record landed or a typed [`PublishError`]. `tracing`
//! events inside a handler reach the host's log, tagged with the component, stream, shard and
//! sequence number.

pub mod allocator;
mod app;
mod batch;
mod board;
mod context;
mod executor;
mod handle;
mod json;
mod log;
mod outcome;
mod publish;
mod stream;

#[doc(hidden)]
pub mod __private {
    pub use crate::export::*;
}
mod export;

/// Bindings generated from the RustStream WIT contract (`ruststream:handler@1.0.0`, world
/// `batch-subscriber`: `handle` and the batch fast path both exported).
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "ruststream:handler/batch-subscriber",
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "::ruststream::bindings",
    });
}

/// The component's allocator (see [`allocator`]): installed by the default `allocator` feature,
/// on single-threaded `wasm32` only.
#[cfg(all(
    feature = "allocator",
    target_arch = "wasm32",
    not(target_feature = "atomics")
))]
#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator::new();

pub use app::{AppInfo, BrokerScope, Mounting, RustStream};
pub use context::{
    Context, Headers, PARTITION_KEY_HEADER, RETRY_COUNT_HEADER, SEQUENCE_HEADER, SHARD_HEADER,
};
pub use handle::{
    Declared, Handle, Raw, Subscriber, SubscriberBuilder, SubscriberSettings, subscriber,
    subscriber_raw,
};
pub use outcome::{FailurePolicies, FailurePolicy, HandlerOutcome, IntoOutcome};
pub use publish::{PublishError, Published, Record, publish};
pub use ruststream_macros::{service, subscriber};
pub use stream::{KinesisBroker, KinesisPosition, KinesisStream};
pub use tracing;

/// Everything a handler crate usually needs: `use ruststream::prelude::*;`.
pub mod prelude {
    pub use crate::{
        AppInfo, Context, FailurePolicies, FailurePolicy, Handle, HandlerOutcome, KinesisBroker,
        KinesisPosition, KinesisStream, Raw, Record, RustStream, SubscriberSettings, publish,
        service, subscriber, subscriber_raw, tracing,
    };
    pub use std::future::{Future, ready};
}
