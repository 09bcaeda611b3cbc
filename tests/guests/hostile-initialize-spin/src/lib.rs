//! Hostile: exports a core function named `_initialize` that spins forever in a loop the
//! optimizer cannot remove. The service itself is a normal app that acks everything.
//!
//! When it runs, as measured: during instantiation, from the `start` function of the
//! component's fixup core module (see `hostile-initialize-sleep`).
//!
//! The host must interrupt the guest during instantiation (an epoch or fuel deadline armed
//! before instantiating, not only before export calls), refuse the component, and keep
//! loading the others.

use ruststream::prelude::*;

/// The reactor initializer, as wit-component sees it.
#[unsafe(export_name = "_initialize")]
pub extern "C" fn initialize() {
    let mut counter = 0u64;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

/// Acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn book(_record: &Raw) -> HandlerOutcome {
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-initialize-spin", "0.1.0")).with_broker(broker, |b| {
        b.include(book);
    })
}
