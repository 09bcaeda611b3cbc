//! Hostile: exports a core function named `_initialize` that sleeps for an hour inside an
//! allowed WASI import (`std::thread::sleep`). The service itself is a normal app that acks
//! everything.
//!
//! When it runs, as measured: during instantiation. `wasm-component-ld` (wit-component)
//! treats a core `_initialize` export as the reactor's initializer and calls it from the
//! `start` function of the component's fixup core module, so the sleep begins while the host
//! instantiates the component, before it can call any export. This is a start-function attack
//! written in plain Rust.
//!
//! The host must bound instantiation itself (not only export calls), including time blocked
//! in host imports: an epoch deadline alone never fires, since the guest runs no wasm while it
//! waits in `pollable.block`. It must refuse the component with a deadline error and keep
//! loading the others.

use std::time::Duration;

use ruststream::prelude::*;

/// The reactor initializer, as wit-component sees it.
#[unsafe(export_name = "_initialize")]
pub extern "C" fn initialize() {
    std::thread::sleep(Duration::from_secs(3600));
}

/// Acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn book(_record: &Raw) -> HandlerOutcome {
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-initialize-sleep", "0.1.0")).with_broker(broker, |b| {
        b.include(book);
    })
}
