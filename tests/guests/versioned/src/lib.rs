//! One app in several versions, for hot-swap tests: one source, one component per version.
//! Each `versioned-*` package has this file as its library
//! (`[lib] path = "../versioned/src/lib.rs"`), and the package name selects the version at
//! compile time (`env!("CARGO_PKG_NAME")`; an unknown package fails to compile).
//!
//! | package             | app                 | subscriptions                                   |
//! |---------------------|---------------------|-------------------------------------------------|
//! | `versioned-v1`      | `versioned` 1.0.0   | `handle` on `events`, `legacy` on `legacy`      |
//! | `versioned-v2`      | `versioned` 2.0.0   | `handle` on `events`, `audit` on `audit` (from the horizon) |
//! | `versioned-renamed` | `renamed` 3.0.0     | `handle` on `events`                            |
//! | `versioned-trap`    | `versioned` 4.0.0   | `handle` on `events`, which panics on every record |
//! | `versioned-slow`    | `versioned` 5.0.0   | `handle` on `events`, 100 ms a record (a shadow that falls behind) |
//!
//! Every handler logs what it handled with the version that handled it (`version` field).
//! `handle` holds `{"id": 7, "hold": true}` (a `retry` without declared attempts) and acks
//! the rest; version 4 traps instead, so a host has something to roll back.

use ruststream::prelude::*;
use serde::Deserialize;

/// What each stream carries.
#[derive(Debug, Deserialize)]
pub struct Event {
    pub id: u64,
    #[serde(default)]
    pub hold: bool,
}

/// This package's version: (app name, app version, the `version` field of its log lines).
const VERSION: (&str, &str, u64) = match env!("CARGO_PKG_NAME").as_bytes() {
    b"versioned-v1" => ("versioned", "1.0.0", 1),
    b"versioned-v2" => ("versioned", "2.0.0", 2),
    b"versioned-renamed" => ("renamed", "3.0.0", 3),
    b"versioned-trap" => ("versioned", "4.0.0", 4),
    b"versioned-slow" => ("versioned", "5.0.0", 5),
    _ => panic!("unknown versioned-* package"),
};

/// Logs the event with this version; holds it when it asks to be held.
#[subscriber(KinesisStream::new("events"))]
async fn handle(event: &Event) -> HandlerOutcome {
    if VERSION.2 == 4 {
        panic!("version 4 cannot handle event {}", event.id);
    }
    if VERSION.2 == 5 {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    tracing::info!(event.id, version = VERSION.2, "handled");
    if event.hold {
        HandlerOutcome::retry()
    } else {
        HandlerOutcome::ack()
    }
}

/// Only in version 1: stops when version 2 takes over.
#[subscriber(KinesisStream::new("legacy"))]
async fn legacy(event: &Event) {
    tracing::info!(event.id, version = VERSION.2, "legacy");
}

/// Only in version 2: starts at the swap, from the oldest record of its stream.
#[subscriber(KinesisStream::new("audit"), start_at(KinesisPosition::horizon()))]
async fn audit(event: &Event) {
    tracing::info!(event.id, version = VERSION.2, "audited");
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    let (name, version, number) = VERSION;
    RustStream::new(AppInfo::new(name, version)).with_broker(broker, |b| {
        b.include(handle);
        match number {
            1 => {
                b.include(legacy);
            }
            2 => {
                b.include(audit);
            }
            _ => {}
        }
    })
}
