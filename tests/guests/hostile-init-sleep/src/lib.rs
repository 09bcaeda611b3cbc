//! Hostile: a static constructor (a function pointer in `.init_array`, as the `ctor` crate
//! emits) that sleeps for an hour inside an allowed WASI import (`std::thread::sleep`:
//! `wasi:clocks/monotonic-clock.subscribe-duration` then `wasi:io/poll.pollable.block`).
//! The service itself is a normal app that acks everything.
//!
//! When it runs, as measured (wasm32-wasip2, wasm-component-ld with wit-component 0.245.1):
//! not during instantiation. The core module exports no `_initialize`, so the component has
//! no start function; `wasm-ld` gathers `.init_array` into `__wasm_call_ctors`, which
//! wit-bindgen's `run_ctors_once` calls at the top of the first export called, before any SDK
//! code. The host's first export call is `describe`, so the sleep starts as `describe` starts
//! (`ruststream check` reports "`describe` failed: deadline exceeded" after 5 s).
//!
//! The host must bound the whole load (instantiation and `describe`, including time blocked
//! in host imports), refuse the component with a deadline error, and keep loading the others.
//! `hostile-initialize-sleep` is the same attack moved into instantiation itself.

use std::time::Duration;

use ruststream::prelude::*;

/// Registered as a constructor: nothing in the SDK calls it.
#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    std::thread::sleep(Duration::from_secs(3600));
}

/// Acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn book(_record: &Raw) -> HandlerOutcome {
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-init-sleep", "0.1.0")).with_broker(broker, |b| {
        b.include(book);
    })
}
