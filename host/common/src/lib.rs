//! What every layer of the RustStream host shares and no embedder needs: the runtime, the
//! Kinesis side, the serving host and the tools all use these, so they sit beneath the runtime
//! instead of in its public API.
//!
//! - [`sync`]: a lock that outlives a panicked holder, and a sleep until a timer that may be
//!   unset;
//! - [`backoff`]: exponential backoff with jitter, for every retry of reads, copies and writes;
//! - [`escape`]: untrusted text (what a tenant writes, names it chose, its traps) shown with
//!   its control characters escaped and cut to a readable length.
//!
//! ```
//! use std::sync::Mutex;
//! use std::time::Duration;
//!
//! use ruststream_common::backoff::Backoff;
//! use ruststream_common::escape::quote;
//! use ruststream_common::sync::lock;
//!
//! let seen = Mutex::new(Vec::new());
//! lock(&seen).push(quote("\x1b[2Kok"));
//! assert_eq!(lock(&seen)[0], "\\u{1b}[2Kok");
//!
//! let mut pauses = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
//! assert!(pauses.next_pause() <= Duration::from_millis(100));
//! ```

pub mod backoff;
pub mod escape;
pub mod sync;
