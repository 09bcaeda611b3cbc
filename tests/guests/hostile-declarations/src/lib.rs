//! Hostile declarations: one source, one component per attack. Each package below has this
//! file as its library (`[lib] path = "../hostile-declarations/src/lib.rs"`), and `describe`
//! returns the declaration its package name selects at compile time
//! (`env!("CARGO_PKG_NAME")`; an unknown package fails to compile). Built with `wit-bindgen`
//! against the repo contract (`../../../wit`), not the SDK, which cannot express some of these.
//! It exports `handle` alone (world `subscriber`), which acks everything.
//!
//! | package                     | `describe` returns                                               | the host must                                                                 |
//! |-----------------------------|------------------------------------------------------------------|-------------------------------------------------------------------------------|
//! | `hostile-decl-long-name`    | a subscriber named with 32 MiB of `a`                             | refuse the component (name too long), quoting at most a bounded prefix        |
//! | `hostile-decl-many`         | 50 000 subscriptions `s0`..`s49999` on `hostile`                  | refuse it (too many subscriptions) without building 50 000 of anything        |
//! | `hostile-decl-wide`         | 64 subscriptions `s0`..`s63` on `wide` (the most a tenant may have) | run it, its metric series within the tenant's `max_metric_series`            |
//! | `hostile-decl-cycle`        | `a` dead-letters into `b`, `b` into `c`, `c` into `a`             | refuse it (dead-letter cycle), or else bound every copy so none loops forever |
//! | `hostile-decl-future-start` | a start `at-timestamp(4102444800000)` (the year 2100)             | refuse a start position in the future                                         |
//! | `hostile-decl-batch`        | `batch-limit` 0 on one subscription, 20 000 on another            | refuse it, naming the subscription (batch must be 1..=10 000)                 |
//! | `hostile-decl-control`      | ESC, CR, BEL, NUL, BS in the app version and a subscriber name    | refuse it, or escape them everywhere they are printed: no forged output line  |
//! | `hostile-decl-bad-names`    | a 100-char app name, stream `no spaces allowed`, a 200-char DLQ   | refuse it, naming each bad name (app ≤ 64 chars; stream names `[A-Za-z0-9_.-]{1,128}`) |

wit_bindgen::generate!({ path: "../../../wit", world: "subscriber" });

use exports::ruststream::handler::handler::{
    App, AppInfo, CallInfo, Guest, Record, StartPosition, Subscription,
};
use ruststream::handler::types::{FailureAction, HandlerOutcome};

/// The attacks, one per package.
enum Attack {
    LongName,
    Many,
    Wide,
    Cycle,
    FutureStart,
    Batch,
    Control,
    BadNames,
}

const PACKAGE: &str = env!("CARGO_PKG_NAME");

/// This package's attack, chosen while compiling.
const ATTACK: Attack = attack(PACKAGE);

const fn attack(package: &str) -> Attack {
    if same(package, "hostile-decl-long-name") {
        Attack::LongName
    } else if same(package, "hostile-decl-many") {
        Attack::Many
    } else if same(package, "hostile-decl-wide") {
        Attack::Wide
    } else if same(package, "hostile-decl-cycle") {
        Attack::Cycle
    } else if same(package, "hostile-decl-future-start") {
        Attack::FutureStart
    } else if same(package, "hostile-decl-batch") {
        Attack::Batch
    } else if same(package, "hostile-decl-control") {
        Attack::Control
    } else if same(package, "hostile-decl-bad-names") {
        Attack::BadNames
    } else {
        panic!("hostile-declarations: no attack for this package name")
    }
}

/// `a == b`, usable in a `const`.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A subscription with every setting at its default.
fn subscription(name: impl Into<String>, stream: impl Into<String>) -> Subscription {
    Subscription {
        name: name.into(),
        stream: stream.into(),
        max_attempts: None,
        dead_letter: None,
        start: None,
        on_trap: FailureAction::Retry,
        batch_limit: None,
    }
}

fn app(
    name: impl Into<String>,
    version: impl Into<String>,
    subscriptions: Vec<Subscription>,
) -> App {
    App {
        info: AppInfo {
            name: name.into(),
            version: version.into(),
        },
        subscriptions,
    }
}

/// Dead-letters into `dead_letter`.
fn dead_lettering(name: &str, stream: &str, dead_letter: &str) -> Subscription {
    Subscription {
        dead_letter: Some(dead_letter.to_owned()),
        ..subscription(name, stream)
    }
}

/// With this batch limit.
fn batched(name: &str, batch: u32) -> Subscription {
    Subscription {
        batch_limit: Some(batch),
        ..subscription(name, "hostile")
    }
}

fn declaration() -> App {
    match ATTACK {
        Attack::LongName => app(
            PACKAGE,
            "0.1.0",
            vec![subscription("a".repeat(32 << 20), "hostile")],
        ),
        Attack::Many => app(
            PACKAGE,
            "0.1.0",
            (0..50_000)
                .map(|i| subscription(format!("s{i}"), "hostile"))
                .collect(),
        ),
        Attack::Wide => app(
            PACKAGE,
            "0.1.0",
            (0..64)
                .map(|i| subscription(format!("s{i}"), "wide"))
                .collect(),
        ),
        Attack::Cycle => app(
            PACKAGE,
            "0.1.0",
            vec![
                dead_lettering("a", "a", "b"),
                dead_lettering("b", "b", "c"),
                dead_lettering("c", "c", "a"),
            ],
        ),
        Attack::FutureStart => app(
            PACKAGE,
            "0.1.0",
            vec![Subscription {
                // 2100-01-01T00:00:00Z.
                start: Some(StartPosition::AtTimestamp(4_102_444_800_000)),
                ..subscription("book", "hostile")
            }],
        ),
        Attack::Batch => app(
            PACKAGE,
            "0.1.0",
            vec![batched("empty", 0), batched("huge", 20_000)],
        ),
        Attack::Control => app(
            PACKAGE,
            // Erases the host's line and prints a fake success for another component.
            "\x1b[2K\rok    fake.wasm: ledger\x07",
            vec![subscription("book\x1b[1A\x1b[2K\r\0\x08\x07", "hostile")],
        ),
        Attack::BadNames => app(
            "x".repeat(100),
            "0.1.0",
            vec![Subscription {
                dead_letter: Some("d".repeat(200)),
                ..subscription("book", "no spaces allowed")
            }],
        ),
    }
}

struct HostileDeclarations;

impl Guest for HostileDeclarations {
    fn describe() -> App {
        declaration()
    }

    fn handle(_info: CallInfo, _record: Record) -> HandlerOutcome {
        HandlerOutcome::Ack
    }
}

export!(HostileDeclarations);
