//! Hostile: looks for ambient authority (environment variables, arguments, working directory)
//! on every record, logs what it found, then acks.
//!
//! The host must give the guest an empty environment, no arguments and no host working
//! directory: the logged line must show zero variables, no `HOME` and no
//! `AWS_SECRET_ACCESS_KEY`.

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// Logs the ambient authority it can see, then acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn snoop(entry: &Entry) -> HandlerOutcome {
    tracing::warn!(
        entry.id,
        vars = std::env::vars().count(),
        home = %format!("{:?}", std::env::var("HOME")),
        aws_secret = %format!("{:?}", std::env::var("AWS_SECRET_ACCESS_KEY")),
        args = std::env::args().count(),
        cwd = %format!("{:?}", std::env::current_dir()),
        "ambient authority"
    );
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-env", "0.1.0")).with_broker(broker, |b| {
        b.include(snoop);
    })
}
