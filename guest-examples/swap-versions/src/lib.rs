//! Versions of one app for the hot-load tests: one source, one component per package
//! (`[lib] path = "../swap-versions/src/lib.rs"`), the version chosen by the package name at
//! compile time (`env!("CARGO_PKG_NAME")`).
//!
//! Every version is app `swapper` and reads `{"n": 7}` records from `numbered` in subscription
//! `count`, logging `handled` with the record's number, its shard and sequence number, and the
//! version that handled it.
//!
//! | package     | declares                              | `count` answers           |
//! |-------------|---------------------------------------|---------------------------|
//! | `swap-v1`   | version 1.0.0: `count`                | ack                       |
//! | `swap-v2`   | version 2.0.0: `count`, and `tally` on `tallied` | ack            |
//! | `swap-trap` | version 3.0.0: `count`                | panics on every record    |
//! | `swap-renamed` | app `renamed`, version 4.0.0: `count` | ack                    |

use ruststream::prelude::*;
use serde::Deserialize;

const PACKAGE: &str = env!("CARGO_PKG_NAME");

#[derive(Debug, Deserialize)]
pub struct Numbered {
    pub n: u64,
}

const fn version() -> &'static str {
    match PACKAGE.as_bytes() {
        b"swap-v1" => "1.0.0",
        b"swap-v2" => "2.0.0",
        b"swap-trap" => "3.0.0",
        b"swap-renamed" => "4.0.0",
        _ => panic!("swap-versions: no version for this package name"),
    }
}

/// Logs which version handled which record.
#[subscriber(KinesisStream::new("numbered"))]
async fn count(record: &Numbered, ctx: &mut Context<'_>) -> HandlerOutcome {
    if PACKAGE == "swap-trap" {
        panic!("version {} cannot handle record {}", version(), record.n);
    }
    tracing::info!(
        n = record.n,
        version = version(),
        shard = ctx.shard_id(),
        seq = ctx.sequence_number(),
        "handled"
    );
    HandlerOutcome::ack()
}

/// Only in version 2: a second subscription, started by the swap to it and stopped by the
/// swap away from it.
#[subscriber(KinesisStream::new("tallied"))]
async fn tally(record: &Numbered) -> HandlerOutcome {
    tracing::info!(n = record.n, version = version(), "tallied");
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    let app = if PACKAGE == "swap-renamed" {
        "renamed"
    } else {
        "swapper"
    };
    RustStream::new(AppInfo::new(app, version())).with_broker(broker, |b| {
        b.include(count);
        if PACKAGE == "swap-v2" {
            b.include(tally);
        }
    })
}
