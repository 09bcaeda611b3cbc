//! The dispatch benchmark's component: the handler of `ledger.rs` as a component.

mod ledger;

use ruststream::prelude::*;

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("ledger-bench", "0.1.0")).with_broker(broker, |b| {
        b.include(ledger::classify);
    })
}
