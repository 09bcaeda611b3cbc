//! Hostile: tries to read, list and create files through `std::fs` on every record, logging
//! each result, then acks.
//!
//! The host grants no filesystem: it must refuse to load the component (its `wasi:filesystem`
//! imports are not on the allow-list), or, if it links them, every attempt must fail with no
//! preopened directory.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// Probes the filesystem, then acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn probe(entry: &Entry) -> HandlerOutcome {
    tracing::info!(entry.id, "probing the filesystem");

    let result = std::fs::read_to_string("/etc/passwd");
    tracing::warn!(op = "read /etc/passwd", result = %format!("{:?}", result));

    let result = std::fs::read_dir("/").map(|dir| {
        dir.filter_map(Result::ok)
            .map(|item| item.path())
            .collect::<Vec<_>>()
    });
    tracing::warn!(op = "list /", result = %format!("{:?}", result));

    let result = std::fs::File::create("/tmp/ruststream-escape");
    tracing::warn!(op = "create /tmp/ruststream-escape", result = %format!("{:?}", result));

    let result = std::fs::read_to_string("secret.txt");
    tracing::warn!(op = "read secret.txt", result = %format!("{:?}", result));

    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-fs", "0.1.0")).with_broker(broker, |b| {
        b.include(probe);
    })
}
