//! Hostile: imports `acme:vault/secrets@1.0.0`, an interface that is neither WASI nor the
//! RustStream contract, and reads a secret from it on every record.
//!
//! The host cannot link what it does not know: it must refuse to load the component, naming
//! the import (unlike `wasi:sockets` or `wasi:http`, which it links and denies).

mod vault {
    wit_bindgen::generate!({
        inline: "
            package acme:vault@1.0.0;
            interface secrets {
                get: func(name: string) -> option<string>;
            }
            world vault {
                import secrets;
            }
        ",
    });
}

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Entry {
    pub id: u64,
}

/// Reads a secret, then acks.
#[subscriber(KinesisStream::new("hostile"))]
async fn peek(entry: &Entry) -> HandlerOutcome {
    let secret = vault::acme::vault::secrets::get("payments-key");
    tracing::info!(entry.id, found = secret.is_some(), "secret read");
    HandlerOutcome::ack()
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("hostile-vault", "0.1.0")).with_broker(broker, |b| {
        b.include(peek);
    })
}
