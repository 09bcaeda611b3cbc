//! The settlement contract, through the compiled seed examples, in TestApp.

use std::time::Duration;

use ruststream_runtime::{
    Outcome, TestApp,
    component::{AdapterRoute, CallForm},
    dead_letter::{ATTEMPTS_EXHAUSTED, DeadLetterOrigin},
    log::{Level, Origin},
    testing::{self, SHARD_ID},
};
use ruststream_tests::scratch::ScratchDir;
use ruststream_tests::{Guest, guests};
use serde_json::json;

/// Every form of the seed's example must behave the same: the seed's two ways to write the
/// handler with the SDK (the macro, the manual `Handle` trait), both on the batch fast path,
/// and plain `wit-bindgen` exporting only `handle` (one record per call).
const SETTLEMENT: [Guest; 3] = [
    guests::SETTLEMENT,
    guests::SETTLEMENT_MANUAL,
    guests::SETTLEMENT_PLAIN,
];

fn entry(id: u64, amount: i64) -> serde_json::Value {
    json!({ "id": id, "amount": amount })
}

async fn start(guest: Guest) -> TestApp {
    TestApp::start(guest.path())
        .await
        .unwrap_or_else(|e| panic!("{} should load: {e}", guest.name()))
}

#[tokio::test]
async fn the_component_declares_the_seed_app() -> anyhow::Result<()> {
    for name in SETTLEMENT {
        let app = start(name).await;
        assert_eq!(app.app().name, "ledger");
        assert_eq!(app.app().version, "0.1.0");
        let subscriptions = &app.app().subscriptions;
        assert_eq!(subscriptions.len(), 1);
        assert_eq!(subscriptions[0].stream, "ledger");
    }
    let app = start(guests::SETTLEMENT).await;
    assert_eq!(app.app().subscriptions[0].name, "book");
    Ok(())
}

#[tokio::test]
async fn an_empty_entry_is_dropped_and_the_checkpoint_passes_it() -> anyhow::Result<()> {
    for name in SETTLEMENT {
        let mut app = start(name).await;
        let dropped = app.publish("ledger", &entry(1, 0)).await?;
        let ledger = app.subscriber("ledger")?;
        assert_eq!(ledger.outcomes(), [Outcome::Drop], "{name}");
        assert_eq!(ledger.checkpoint(), Some(dropped.sequence_number.as_str()));
        assert_eq!(ledger.held_at(), None);
        assert!(app.logs_containing("booked").is_empty());
    }
    Ok(())
}

#[tokio::test]
async fn a_refund_holds_the_checkpoint_while_later_entries_are_booked() -> anyhow::Result<()> {
    for name in SETTLEMENT {
        let mut app = start(name).await;
        let first = app.publish("ledger", &entry(1, 5)).await?;
        let refund = app.publish("ledger", &entry(2, -3)).await?;
        app.publish("ledger", &entry(3, 7)).await?;
        let last = app.publish("ledger", &entry(4, 9)).await?;

        let ledger = app.subscriber("ledger")?;
        assert_eq!(
            ledger.outcomes(),
            [Outcome::Ack, Outcome::Retry, Outcome::Ack, Outcome::Ack],
            "{name}"
        );
        assert_eq!(ledger.checkpoint(), Some(first.sequence_number.as_str()));
        assert_eq!(ledger.held_at(), Some(refund.sequence_number.as_str()));

        let warnings = app.logs_containing("cannot requeue");
        assert_eq!(warnings.len(), 1, "{name}: {warnings:?}");
        assert_eq!(warnings[0].level, Level::Warn);
        assert_eq!(warnings[0].origin, Origin::Runtime);
        assert_eq!(
            warnings[0].sequence_number.as_deref(),
            Some(refund.sequence_number.as_str())
        );

        let booked = app.logs_containing("booked");
        let ids: Vec<_> = booked.iter().map(|l| l.field("entry.id")).collect();
        assert_eq!(ids, [Some("1"), Some("3"), Some("4")], "{name}");
        let line = &booked[2];
        assert_eq!(line.origin, Origin::Guest);
        assert_eq!(line.level, Level::Info);
        assert_eq!(line.field("amount"), Some("9"));
        assert_eq!(line.component, name.name().replace('-', "_"));
        assert_eq!(line.stream.as_deref(), Some("ledger"));
        assert_eq!(line.shard_id.as_deref(), Some(SHARD_ID));
        assert_eq!(
            line.sequence_number.as_deref(),
            Some(last.sequence_number.as_str())
        );

        // Within one run the held record does not come back, whatever time does.
        app.advance(Duration::from_secs(3600)).await?;
        assert_eq!(app.subscriber("ledger")?.calls(), 4);
    }
    Ok(())
}

#[tokio::test]
async fn a_batch_is_settled_record_by_record() -> anyhow::Result<()> {
    for name in SETTLEMENT {
        let mut app = start(name).await;
        let published = app
            .publish_batch(
                "ledger",
                &[entry(1, 5), entry(2, 0), entry(3, -1), entry(4, 2)],
            )
            .await?;
        let ledger = app.subscriber("ledger")?;
        assert_eq!(
            ledger.outcomes(),
            [Outcome::Ack, Outcome::Drop, Outcome::Retry, Outcome::Ack],
            "{name}"
        );
        assert_eq!(
            ledger.checkpoint(),
            Some(published[1].sequence_number.as_str())
        );
        assert_eq!(
            ledger.held_at(),
            Some(published[2].sequence_number.as_str())
        );
    }
    Ok(())
}

#[tokio::test]
async fn each_form_prints_the_seed_outcome_table() -> anyhow::Result<()> {
    let entries = [entry(1, 5), entry(2, 0), entry(3, -3), entry(4, 9)];
    let mut tables = Vec::new();
    let mut forms = Vec::new();
    for name in SETTLEMENT {
        let mut app = start(name).await;
        let form = app.component_form();
        forms.push(form);
        // The one called through `handle` is wrapped with the host's adapter, which calls
        // `handle` inside it, one host call per batch.
        let route = (form == CallForm::Handle).then_some(AdapterRoute::Inline);
        assert_eq!(app.component_adapter_route(), route, "{name}");
        app.publish_batch("ledger", &entries).await?;
        let outcomes = app.subscriber("ledger")?.outcomes();
        println!("{name} ({form}):");
        for (entry, outcome) in entries.iter().zip(&outcomes) {
            println!("  {entry} -> {outcome:?}");
        }
        tables.push(outcomes);
    }
    assert_eq!(
        tables[0],
        [Outcome::Ack, Outcome::Drop, Outcome::Retry, Outcome::Ack]
    );
    assert!(tables.iter().all(|t| *t == tables[0]), "{tables:?}");
    assert_eq!(forms, [CallForm::Batch, CallForm::Batch, CallForm::Handle]);
    Ok(())
}

#[tokio::test]
async fn nested_in_another_component_the_handle_only_form_prints_the_same_table()
-> anyhow::Result<()> {
    // The layout a composition tool gives: `handle` lifted in a child component, which the
    // host's adapter cannot call into, so it goes beside the component.
    let plain = std::fs::read(guests::SETTLEMENT_PLAIN.path())?;
    let nested = testing::nested_component(&plain).expect("its top level can be copied");
    let dir = ScratchDir::new("settlement-nested")?;
    let path = dir.join("nested.wasm");
    std::fs::write(&path, nested)?;
    let mut app = TestApp::start(&path).await?;
    assert_eq!(app.component_form(), CallForm::Handle);
    assert_eq!(app.component_adapter_route(), Some(AdapterRoute::Beside));
    let entries = [entry(1, 5), entry(2, 0), entry(3, -3), entry(4, 9)];
    let published = app.publish_batch("ledger", &entries).await?;
    let ledger = app.subscriber("ledger")?;
    assert_eq!(
        ledger.outcomes(),
        [Outcome::Ack, Outcome::Drop, Outcome::Retry, Outcome::Ack]
    );
    // The retried third holds the checkpoint after the second.
    assert_eq!(
        ledger.checkpoint(),
        Some(published[1].sequence_number.as_str())
    );
    Ok(())
}

#[tokio::test]
async fn a_record_that_is_not_json_is_logged_and_dropped() -> anyhow::Result<()> {
    for name in SETTLEMENT {
        let mut app = start(name).await;
        let bad = app.publish_raw("ledger", "{not json").await?;
        let ledger = app.subscriber("ledger")?;
        assert_eq!(ledger.outcomes(), [Outcome::Drop], "{name}");
        assert_eq!(ledger.checkpoint(), Some(bad.sequence_number.as_str()));

        let errors = app.logs_containing("could not be decoded");
        assert_eq!(errors.len(), 1, "{name}: {:?}", app.logs());
        let error = &errors[0];
        assert_eq!(error.level, Level::Error);
        assert!(error.field("subscriber").is_some_and(|s| !s.is_empty()));
        assert_eq!(
            error.field("sequence_number"),
            Some(bad.sequence_number.as_str())
        );
        assert_eq!(
            error.sequence_number.as_deref(),
            Some(bad.sequence_number.as_str())
        );
        assert!(error.field("error").is_some_and(|e| e.contains("line 1")));
    }
    Ok(())
}

#[tokio::test]
async fn max_attempts_delivers_three_times_then_dead_letters() -> anyhow::Result<()> {
    let mut app = start(guests::SETTLEMENT_RETRIES).await;
    let original = app
        .publish_with_headers("refunds", &entry(7, -40), &[("trace-id", "t-7")])
        .await?;
    // The first copy comes back at once; later copies of one record are a second apart (the
    // tenant's `min_copy_delay`), so a loop cannot spin through the stream.
    assert_eq!(app.subscriber("reconcile")?.calls(), 2);
    app.advance(Duration::from_secs(1)).await?;

    let reconcile = app.subscriber("reconcile")?;
    assert_eq!(reconcile.calls(), 3);
    assert_eq!(reconcile.attempts(), [1, 2, 3]);
    assert_eq!(reconcile.outcomes(), [Outcome::Retry; 3]);

    let refunds = app.stream("refunds");
    assert_eq!(refunds.len(), 3, "the original and two counted copies");
    assert_eq!(refunds[0].sequence_number, original.sequence_number);
    for (copy, count) in refunds[1..].iter().zip(["1", "2"]) {
        assert_eq!(
            copy.header("x-ruststream-retry-count").as_deref(),
            Some(count)
        );
        assert_eq!(copy.header("trace-id").as_deref(), Some("t-7"));
        assert_eq!(copy.partition_key, refunds[0].partition_key);
        assert_eq!(copy.payload(), refunds[0].payload());
    }

    let dead = app.stream("refunds.dead");
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].header("x-ruststream-retry-count").as_deref(),
        Some("3")
    );
    assert_eq!(dead[0].header("trace-id").as_deref(), Some("t-7"));
    assert_eq!(dead[0].decode::<serde_json::Value>()?, entry(7, -40));
    // Its origin: the last copy it was read as, whose subscriber gave up, after how many
    // attempts, and why.
    let origin = DeadLetterOrigin::from_headers(&dead[0].headers())
        .ok_or_else(|| anyhow::anyhow!("the dead letter carries no origin"))?;
    assert_eq!(origin.stream, "refunds");
    assert_eq!(origin.shard_id, SHARD_ID);
    assert_eq!(origin.sequence_number, refunds[2].sequence_number);
    assert_eq!(origin.subscriber, "reconcile");
    assert_eq!(origin.tenant, app.tenant().name());
    assert_eq!(origin.attempts, 3);
    assert_eq!(origin.reason, ATTEMPTS_EXHAUSTED);

    // Every delivery is settled: the checkpoint passed the original and both copies.
    let reconcile = app.subscriber("reconcile")?;
    assert_eq!(
        reconcile.checkpoint(),
        Some(refunds[2].sequence_number.as_str())
    );
    assert_eq!(reconcile.held_at(), None);
    assert_eq!(
        app.logs_containing("dead-letter stream `refunds.dead`")
            .len(),
        1
    );
    Ok(())
}

#[tokio::test]
async fn retry_after_delivers_the_copy_exactly_at_its_delay() -> anyhow::Result<()> {
    let mut app = start(guests::SETTLEMENT_RETRIES).await;
    app.publish("payouts", &entry(9, -1)).await?;
    assert_eq!(app.subscriber("pay_out")?.calls(), 1);

    app.advance(Duration::from_millis(29_999)).await?;
    assert_eq!(app.subscriber("pay_out")?.calls(), 1);

    app.advance(Duration::from_millis(1)).await?;
    let pay_out = app.subscriber("pay_out")?;
    assert_eq!(pay_out.calls(), 2);
    assert_eq!(pay_out.attempts(), [1, 2]);
    assert_eq!(app.elapsed(), Duration::from_secs(30));

    // No declaration: the copies go on, one per delay.
    app.advance(Duration::from_secs(60)).await?;
    assert_eq!(app.subscriber("pay_out")?.attempts(), [1, 2, 3, 4]);
    Ok(())
}

#[tokio::test]
async fn a_waiting_copy_holds_the_checkpoint_but_not_later_records() -> anyhow::Result<()> {
    let mut app = start(guests::SETTLEMENT_RETRIES).await;
    app.publish("payouts", &entry(1, -1)).await?;
    app.publish("payouts", &entry(2, 10)).await?;
    let payouts = app.stream("payouts");
    let copy = &payouts[1];
    assert_eq!(
        copy.header("x-ruststream-retry-count").as_deref(),
        Some("1")
    );
    let pay_out = app.subscriber("pay_out")?;
    // The original is settled by its copy; the copy waits for its due time and holds the
    // checkpoint, while entry 2 behind it is handled.
    assert_eq!(pay_out.outcomes().len(), 2);
    assert_eq!(
        pay_out.checkpoint(),
        Some(payouts[0].sequence_number.as_str())
    );
    assert_eq!(pay_out.held_at(), Some(copy.sequence_number.as_str()));
    Ok(())
}

#[tokio::test]
async fn error_results_drop_and_decode_policy_is_honoured() -> anyhow::Result<()> {
    let mut app = start(guests::SETTLEMENT_RETRIES).await;
    let no_id = app.publish("audit", &entry(0, 5)).await?;
    let bad = app.publish_raw("audit", "[]").await?;
    let audit = app.subscriber("audit")?;
    // `Err` drops; the registration says `on_failure(decode = retry)`, which holds.
    assert_eq!(audit.outcomes(), [Outcome::Drop, Outcome::Retry]);
    assert_eq!(audit.checkpoint(), Some(no_id.sequence_number.as_str()));
    assert_eq!(audit.held_at(), Some(bad.sequence_number.as_str()));
    let error = app.logs_containing("handler returned an error");
    assert_eq!(error.len(), 1);
    assert_eq!(error[0].field("error"), Some("entry 0 has no id"));
    Ok(())
}

#[tokio::test]
async fn a_trapping_component_does_not_stop_the_host() -> anyhow::Result<()> {
    let mut app = start(guests::FAULTY).await;
    let trapped = app.publish("ledger", &entry(1, 13)).await?;
    app.publish("ledger", &entry(2, 5)).await?;

    let book = app.subscriber("book")?;
    assert_eq!(book.outcomes(), [Outcome::Retry, Outcome::Ack]);
    assert_eq!(
        book.reports()[0].trap.map(|t| t.to_string()).as_deref(),
        Some("panic")
    );
    assert_eq!(book.held_at(), Some(trapped.sequence_number.as_str()));
    assert_eq!(book.instance_replacements(), 1);

    let failures = app.logs_containing("handler call failed");
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].field("trap"), Some("panic"));
    assert_eq!(
        failures[0].sequence_number.as_deref(),
        Some(trapped.sequence_number.as_str())
    );
    assert_eq!(app.logs_containing("booked").len(), 1);
    Ok(())
}

#[tokio::test]
async fn a_trap_inside_a_batch_settles_the_other_records() -> anyhow::Result<()> {
    let mut app = start(guests::FAULTY).await;
    let published = app
        .publish_batch("ledger", &[entry(1, 1), entry(2, 13), entry(3, 3)])
        .await?;
    let book = app.subscriber("book")?;
    assert_eq!(
        book.outcomes(),
        [Outcome::Ack, Outcome::Retry, Outcome::Ack]
    );
    assert_eq!(
        book.checkpoint(),
        Some(published[0].sequence_number.as_str())
    );
    assert_eq!(book.held_at(), Some(published[1].sequence_number.as_str()));
    let booked: Vec<_> = app
        .logs_containing("booked")
        .iter()
        .filter_map(|l| l.field("entry.id").map(str::to_owned))
        .collect();
    // Entry 1 ran in the failed batch and again alone: delivery is at-least-once.
    assert!(
        booked.ends_with(&["1".to_owned(), "3".to_owned()]),
        "{booked:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_kpl_aggregated_record_is_refused_and_skipped() -> anyhow::Result<()> {
    let mut app = start(guests::SETTLEMENT).await;
    let mut aggregated = ruststream_runtime::record::KPL_MAGIC.to_vec();
    aggregated.extend_from_slice(b"\x0a\x03pk1\x1a\x05hello");
    let refused = app.publish_raw("ledger", aggregated).await?;
    let after = app.publish("ledger", &entry(2, 5)).await?;

    let book = app.subscriber("book")?;
    assert_eq!(
        book.calls(),
        1,
        "the handler never sees the aggregated record"
    );
    assert_eq!(book.checkpoint(), Some(after.sequence_number.as_str()));
    let errors = app.logs_containing("KPL-aggregated record refused");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].level, Level::Error);
    assert_eq!(errors[0].shard_id.as_deref(), Some(SHARD_ID));
    assert_eq!(
        errors[0].sequence_number.as_deref(),
        Some(refused.sequence_number.as_str())
    );
    Ok(())
}

#[tokio::test]
async fn a_dead_letter_after_traps_names_the_trap() -> anyhow::Result<()> {
    let mut app = start(guests::POISON).await;
    app.publish("intake", &entry(3, -1)).await?;
    app.advance(Duration::from_secs(1)).await?;
    let intake = app.subscriber("intake")?;
    assert_eq!(intake.attempts(), [1, 2]);
    assert!(intake.checkpoint().is_some(), "the poison is retired");
    let dead = app.stream("intake.dead");
    assert_eq!(dead.len(), 1);
    let origin = DeadLetterOrigin::from_headers(&dead[0].headers())
        .ok_or_else(|| anyhow::anyhow!("the dead letter carries no origin"))?;
    assert_eq!(origin.reason, "panic");
    assert_eq!(origin.attempts, 2);
    assert_eq!(origin.subscriber, "intake");
    assert_eq!(dead[0].decode::<serde_json::Value>()?, entry(3, -1));
    Ok(())
}
