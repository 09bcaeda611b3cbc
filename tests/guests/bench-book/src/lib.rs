//! The callgrind benchmark's component: the handler of `book.rs` as a component.

mod book;

use ruststream::prelude::*;

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("book-bench", "0.1.0")).with_broker(broker, |b| {
        b.include(book::book);
    })
}
