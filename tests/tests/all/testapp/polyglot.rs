//! The seed's settlement handler in Python and JavaScript (`guest-examples/settlement-python`,
//! `settlement-js`), built by componentize-py and componentize-js from their registries, in
//! TestApp under the default limits: the same outcome table as the Rust component.

use ruststream_runtime::{
    Outcome, RuntimeConfig, TestApp,
    component::compile::CompileConfig,
    component::{AdapterRoute, CallForm},
    log::{Level, Origin},
    testing::SHARD_ID,
};
use ruststream_tests::toolchains::{PolyglotGuest, SETTLEMENT_JS, SETTLEMENT_PYTHON};
use serde_json::json;

const EXAMPLES: [PolyglotGuest; 2] = [SETTLEMENT_PYTHON, SETTLEMENT_JS];

/// The example built (or its cached build), in a TestApp with default limits; its compiled
/// code is cached with the other tests' (the engine's defaults otherwise).
async fn start(guest: PolyglotGuest) -> anyhow::Result<TestApp> {
    let path = tokio::task::spawn_blocking(move || guest.build()).await??;
    let runtime = RuntimeConfig {
        compile: CompileConfig {
            cache: Some(ruststream_tests::compile_cache_dir()),
            // In process, as `TestApp` compiles by default: the test binary serves no worker.
            ..CompileConfig::in_process()
        },
        ..RuntimeConfig::default()
    };
    let app = TestApp::builder(&path).runtime(runtime).start().await;
    app.map_err(|e| {
        anyhow::anyhow!(
            "{}: {}",
            guest.name,
            ruststream_common::escape::one_line(&e)
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_outcome_table_from_python_and_javascript() -> anyhow::Result<()> {
    for guest in EXAMPLES {
        let name = guest.name;
        let mut app = start(guest).await?;
        assert_eq!(app.app().name, "ledger", "{name}");
        assert_eq!(app.app().subscriptions[0].name, "book", "{name}");
        assert_eq!(app.component_form(), CallForm::Handle, "{name}");
        assert_eq!(
            app.component_adapter_route(),
            Some(AdapterRoute::Inline),
            "{name}: handle runs inside the component, in its own memory"
        );
        let entries = [(1, 5), (2, 0), (3, -1), (4, 2)]
            .map(|(id, amount)| json!({"id": id, "amount": amount}));
        let published = app.publish_batch("ledger", &entries).await?;

        let book = app.subscriber("book")?;
        assert_eq!(
            book.outcomes(),
            [Outcome::Ack, Outcome::Drop, Outcome::Retry, Outcome::Ack],
            "{name}"
        );
        assert_eq!(
            book.checkpoint(),
            Some(published[1].sequence_number.as_str()),
            "{name}"
        );
        assert_eq!(
            book.held_at(),
            Some(published[2].sequence_number.as_str()),
            "{name}"
        );
        let booked = app.logs_containing("booked");
        let ids: Vec<_> = booked.iter().map(|l| l.field("entry.id")).collect();
        assert_eq!(ids, [Some("1"), Some("4")], "{name}: {booked:?}");
        let line = &booked[1];
        assert_eq!(line.origin, Origin::Guest, "{name}");
        assert_eq!(line.level, Level::Info, "{name}");
        assert_eq!(line.field("amount"), Some("2"), "{name}");
        assert_eq!(line.shard_id.as_deref(), Some(SHARD_ID), "{name}");
        assert_eq!(
            line.sequence_number.as_deref(),
            Some(published[3].sequence_number.as_str()),
            "{name}"
        );
        assert_eq!(app.logs_containing("cannot requeue").len(), 1, "{name}");

        // A record that is not JSON is logged and retired, as the Rust example does.
        let bad = app.publish_raw("ledger", "{not json").await?;
        assert_eq!(
            app.subscriber("book")?.outcomes()[4],
            Outcome::Drop,
            "{name}"
        );
        let errors = app.logs_containing("could not be decoded");
        assert_eq!(errors.len(), 1, "{name}: {:?}", app.logs());
        assert_eq!(errors[0].level, Level::Error, "{name}");
        assert_eq!(
            errors[0].sequence_number.as_deref(),
            Some(bad.sequence_number.as_str()),
            "{name}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_that_outgrow_what_the_adapter_keeps_in_the_component_are_handled_whole()
-> anyhow::Result<()> {
    // The adapter keeps an arena for the batch (64 KiB at first) and an outcome board in the
    // component's memory, and replaces each by a bigger one when a batch needs more: a small
    // batch, one of ~200 KiB, one of many records, then a small one again.
    let plain = TestApp::start(ruststream_tests::guests::SETTLEMENT_PLAIN.path());
    let mut apps = vec![("settlement-plain", plain.await?)];
    for guest in EXAMPLES {
        apps.push((guest.name, start(guest).await?));
    }
    let padding = "p".repeat(2 << 10);
    let big: Vec<_> = (1..=100)
        .map(|id| json!({"id": id, "amount": 1, "padding": padding}))
        .collect();
    let many: Vec<_> = (101..=400)
        .map(|id| json!({"id": id, "amount": 1}))
        .collect();
    for (name, app) in &mut apps {
        assert_eq!(
            app.component_adapter_route(),
            Some(AdapterRoute::Inline),
            "{name}"
        );
        app.publish("ledger", &json!({"id": 0, "amount": 1}))
            .await?;
        app.publish_batch("ledger", &big).await?;
        app.publish_batch("ledger", &many).await?;
        app.publish("ledger", &json!({"id": 401, "amount": 1}))
            .await?;
        let outcomes = app.subscriber("ledger")?.outcomes();
        assert_eq!(outcomes.len(), 402, "{name}");
        assert!(
            outcomes.iter().all(|o| *o == Outcome::Ack),
            "{name}: {outcomes:?} {:?}",
            app.logs()
        );
        let booked = app.logs_containing("booked");
        let ids: Vec<_> = booked.iter().filter_map(|l| l.field("entry.id")).collect();
        let expected: Vec<String> = (0..=401).map(|id| id.to_string()).collect();
        assert_eq!(ids, expected, "{name}");
    }
    Ok(())
}

/// Records per measured batch.
const MEASURED: usize = 200;

/// Informational: the per-record cost of each example end to end in TestApp (publish, read,
/// `handle` per record, settle), against the Rust settlement component in the same run.
/// Printed for `docs/benchmarks.md`; asserts only that every record was booked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_record_cost_against_the_rust_component() -> anyhow::Result<()> {
    let rust = TestApp::start(ruststream_tests::guests::SETTLEMENT.path());
    let mut apps = vec![("rust settlement", rust.await?)];
    for guest in EXAMPLES {
        apps.push((guest.name, start(guest).await?));
    }
    let entries: Vec<_> = (1..=MEASURED)
        .map(|id| json!({"id": id, "amount": 10}))
        .collect();
    for (name, app) in &mut apps {
        // One warm-up record: the first call instantiates.
        app.publish("ledger", &json!({"id": 0, "amount": 1}))
            .await?;
        let started = std::time::Instant::now();
        app.publish_batch("ledger", &entries).await?;
        let elapsed = started.elapsed();
        let outcomes = app.subscriber("ledger")?.outcomes();
        assert_eq!(outcomes.len(), MEASURED + 1, "{name}");
        assert!(
            outcomes.iter().all(|o| *o == Outcome::Ack),
            "{name}: {outcomes:?} {:?}",
            app.logs()
        );
        let per_record = elapsed / u32::try_from(MEASURED)?;
        eprintln!("{name}: {per_record:?} per record ({MEASURED} records in {elapsed:?})");
    }
    Ok(())
}
