//! Hostile: a static constructor (a function pointer in `.init_array`) that spins forever in
//! a loop the optimizer cannot remove. The service itself is a normal app that acks
//! everything.
//!
//! When it runs, as measured: at the top of the first export call (`describe` on load), not
//! during instantiation (see `hostile-init-sleep`). The deadline trap's wasm backtrace shows
//! it: the spin loop, called from `__wasm_call_ctors`, called from the core export
//! `ruststream:handler/handler@0.2.0#describe`; an `_initialize` spin instead reports
//! "instantiation failed".
//!
//! The host must interrupt the spinning guest at its load deadline (an epoch or fuel trap, not
//! a wall-clock wait on a call that never yields), refuse the component, and keep loading the
//! others. `hostile-initialize-spin` is the same attack moved into instantiation itself.

use ruststream::prelude::*;

/// Registered as a constructor: nothing in the SDK calls it.
#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
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
    RustStream::new(AppInfo::new("hostile-init-spin", "0.1.0")).with_broker(broker, |b| {
        b.include(book);
    })
}
