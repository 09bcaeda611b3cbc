//! Declarations: everything a component declares about itself is checked, and a bad one is
//! refused quickly, naming the field, with whatever the component put in it shown escaped and
//! cut short.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ruststream_common::escape::one_line;

use ruststream_runtime::{
    component::{LoadPhase, Refusal},
    tenant::Limits,
};
use ruststream_tests::guests;

use super::{Arena, assert_printable, evil};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_declarations_are_refused_naming_the_field() -> anyhow::Result<()> {
    let arena = Arena::start().await?;
    // The default memory cap: the 32 MiB name gets through `describe`, to be refused on its
    // length (under a tighter cap, `describe` itself fails on memory).
    let tenant = Arc::new(evil().limits(Limits::default()));
    let cases = [
        (
            guests::HOSTILE_DECL_LONG_NAME,
            "field `subscriptions[0].name`",
        ),
        (
            guests::HOSTILE_DECL_MANY,
            "field `subscriptions`: 50000 subscriptions declared; at most 64",
        ),
        (
            guests::HOSTILE_DECL_CYCLE,
            "field `dead-letter`: the dead-letter streams of subscribers `a`, `b`, `c` form a \
             cycle (a -> b -> c -> a)",
        ),
        (
            guests::HOSTILE_DECL_FUTURE_START,
            "field `start`: timestamp 4102444800000 ms is in the future",
        ),
        (
            guests::HOSTILE_DECL_BATCH,
            "field `batch-limit`: must be between 1 and 10000",
        ),
        (guests::HOSTILE_DECL_CONTROL, "field `app.version`"),
        (guests::HOSTILE_DECL_BAD_NAMES, "field `app.name`"),
    ];
    let refusals = async {
        for (name, field) in cases {
            // The first load compiles; the second times the declaration check alone.
            let _ = arena.load(name, &tenant).await;
            let started = Instant::now();
            let error = arena.load(name, &tenant).await.err().expect("refused");
            let took = started.elapsed();
            let line = one_line(&error);
            assert_eq!(error.phase, LoadPhase::Declaration, "{line}");
            assert!(matches!(error.refusal, Refusal::Spec(_)), "{line}");
            assert!(line.contains(field), "{name}: {line}");
            assert!(line.len() < 500, "{name}: {} bytes", line.len());
            assert_printable(&line);
            assert!(took < Duration::from_secs(1), "{name} took {took:?}");
        }
        anyhow::Ok(())
    };
    let (refused, flowed) = tokio::join!(refusals, arena.assert_settlement_flows());
    refused?;
    flowed
}
