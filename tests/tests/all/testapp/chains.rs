//! Counted copies belong to the subscription that made it, one copy of a waiting record exists
//! at a time, and a chain of copies ends: it backs off, and it ages from its first record.

use std::time::Duration;

use ruststream_runtime::envelope::{COPY_FOR_HEADER, COPY_OF_HEADER, RETRY_COUNT_HEADER};
use ruststream_runtime::{
    Outcome, TestApp,
    app::{MaxRecordAge, StartPosition},
    testing::StoredRecord,
};
use ruststream_tests::guests;
use serde_json::json;

fn entry(id: u64, amount: i64) -> serde_json::Value {
    json!({ "id": id, "amount": amount })
}

async fn shared_ledger() -> TestApp {
    TestApp::start(guests::SHARED_LEDGER.path())
        .await
        .expect("shared-ledger loads")
}

fn copies_for(stream: &[StoredRecord], subscriber: &str) -> usize {
    let owner = format!("test/shared-ledger/{subscriber}");
    stream
        .iter()
        .filter(|r| r.header(COPY_FOR_HEADER).as_deref() == Some(owner.as_str()))
        .count()
}

#[tokio::test]
async fn copies_reach_only_the_subscription_that_made_them() -> anyhow::Result<()> {
    let mut app = shared_ledger().await;
    for id in 1..=3 {
        app.publish("ledger", &entry(id, -5)).await?;
        app.publish("ledger", &entry(100 + id, 7)).await?;
    }
    // `reconcile`'s copies back off (1 s, then 2 s) until its third attempt dead-letters.
    app.advance(Duration::from_secs(5)).await?;

    let ledger = app.stream("ledger");
    assert_eq!(copies_for(&ledger, "reconcile"), 6, "two copies per refund");
    assert_eq!(
        copies_for(&ledger, "defer"),
        3,
        "one waiting copy per refund"
    );
    assert_eq!(ledger.len(), 6 + 6 + 3, "no copy of anybody else's copy");

    let reconcile = app.subscriber("reconcile")?;
    assert_eq!(
        reconcile.calls(),
        3 + 3 * 3,
        "payments once, refunds three times"
    );
    assert_eq!(reconcile.foreign_copies(), 3, "defer's copies moved past");
    assert_eq!(
        reconcile.held_at(),
        None,
        "defer's waiting copies hold nothing here"
    );
    assert_eq!(
        reconcile.checkpoint(),
        ledger.last().map(|r| r.sequence_number.as_str())
    );

    let defer = app.subscriber("defer")?;
    assert_eq!(
        defer.attempts(),
        [1; 6],
        "reconcile's copies never reached defer"
    );
    assert_eq!(defer.foreign_copies(), 6);
    assert_eq!(defer.pending_copies(), 3);

    let dead = app.stream("ledger.dead");
    assert_eq!(dead.len(), 3);
    for letter in &dead {
        assert_eq!(
            letter.header("x-ruststream-origin-subscriber").as_deref(),
            Some("reconcile")
        );
        assert_eq!(
            letter.header(COPY_FOR_HEADER),
            None,
            "a dead letter is anyone's"
        );
    }

    // A quarter of an hour on, defer gets its own copies back, and only those.
    app.advance(Duration::from_secs(15 * 60)).await?;
    let defer = app.subscriber("defer")?;
    assert_eq!(defer.attempts().iter().filter(|a| **a == 2).count(), 3);
    assert_eq!(
        app.subscriber("reconcile")?.calls(),
        12,
        "reconcile saw none of them"
    );
    Ok(())
}

#[tokio::test]
async fn carrying_a_waiting_copy_forward_never_multiplies_it() -> anyhow::Result<()> {
    let mut app = shared_ledger().await;
    let refund = app.publish("ledger", &entry(1, -5)).await?;
    // Payments keep arriving behind the waiting copy, so it is carried forward every
    // `max_hold` (60 s) for the 15 minutes it waits.
    for minute in 0..16 {
        app.publish("ledger", &entry(100 + minute, 7)).await?;
        app.advance(Duration::from_secs(60)).await?;
        assert!(
            app.subscriber("defer")?.pending_copies() <= 1,
            "minute {minute}"
        );
    }
    let chain = format!("shardId-000000000000/{}", refund.sequence_number);
    let ledger = app.stream("ledger");
    let in_chain = ledger
        .iter()
        .filter(|r| r.header(COPY_OF_HEADER).as_deref() == Some(chain.as_str()))
        .filter(|r| r.header(COPY_FOR_HEADER).as_deref() == Some("test/shared-ledger/defer"))
        .count();
    assert!(
        (14..=17).contains(&in_chain),
        "one copy carried about once a minute, not doubled: {in_chain}"
    );
    let defer = app.subscriber("defer")?;
    assert_eq!(
        defer.attempts().iter().filter(|a| **a == 2).count(),
        1,
        "delivered once at its due time"
    );
    Ok(())
}

#[tokio::test]
async fn a_copy_read_again_after_its_carry_steps_aside_for_it() -> anyhow::Result<()> {
    // What a host that crashed between carrying a copy forward and storing the checkpoint past
    // it reads again: the waiting copy, then its carried successor. One of them waits.
    let mut app = shared_ledger().await;
    app.publish("ledger", &entry(1, -5)).await?;
    let ledger = app.stream("ledger");
    let waiting = ledger
        .iter()
        .find(|r| r.header(COPY_FOR_HEADER).as_deref() == Some("test/shared-ledger/defer"))
        .expect("defer's waiting copy")
        .clone();
    let again = app.publish_record("ledger", waiting.to_outgoing()).await?;
    let defer = app.subscriber("defer")?;
    assert_eq!(defer.pending_copies(), 1, "the earlier copy stepped aside");
    assert_eq!(
        defer.held_at(),
        Some(again.sequence_number.as_str()),
        "the earlier copy counts as handled; the later one waits"
    );
    app.advance(Duration::from_secs(15 * 60)).await?;
    let defer = app.subscriber("defer")?;
    assert_eq!(defer.attempts(), [1, 2], "delivered once");
    Ok(())
}

#[tokio::test]
async fn a_retry_after_zero_loop_costs_a_few_copies_an_hour() -> anyhow::Result<()> {
    // The case: 20 records answered `retry_after(0)` forever, no attempt cap.
    let mut app = TestApp::start(guests::HOSTILE_COPY_LOOP.path()).await?;
    let originals = 20;
    for id in 0..originals {
        app.publish("hostile", &json!({ "id": id })).await?;
    }
    // The bound in docs/semantics.md: 14 copies of a record in its first hour (at once, then 1, 2,
    // 4 ... 512 s apart, then every 15 minutes), 4 an hour after that.
    for minute in 1..=60 {
        app.advance(Duration::from_secs(60)).await?;
        let copies = app.stream("hostile").len() - originals;
        assert!(copies <= originals * 14, "minute {minute}: {copies} copies");
    }
    let first_hour = app.stream("hostile").len() - originals;
    app.advance(Duration::from_secs(3600)).await?;
    let second_hour = app.stream("hostile").len() - originals - first_hour;
    assert!(
        first_hour >= originals * 13,
        "the loop goes on: {first_hour}"
    );
    assert!(second_hour <= originals * 4, "second hour: {second_hour}");
    Ok(())
}

#[tokio::test]
async fn a_chain_ages_from_its_first_record() -> anyhow::Result<()> {
    let max = MaxRecordAge {
        age: Duration::from_secs(60),
        dead_letter: Some("ledger.aged".into()),
    };
    let mut app = TestApp::builder(guests::HOSTILE_COPY_LOOP.path())
        .max_record_age("again", max)
        .start()
        .await?;
    app.publish("hostile", &json!({ "id": 1 })).await?;
    app.advance(Duration::from_secs(600)).await?;
    let copies = app.stream("hostile").len() - 1;
    // Copies due at 0, 1, 3, 7, 15, 31 and 63 s; the last is past a minute from the first
    // record's arrival when it comes due.
    assert_eq!(copies, 7, "the chain stopped at the maximum age");
    let aged = app.stream("ledger.aged");
    assert_eq!(aged.len(), 1);
    assert_eq!(
        aged[0].header("x-ruststream-origin-reason").as_deref(),
        Some("record-age-exceeded")
    );
    assert_eq!(aged[0].header(RETRY_COUNT_HEADER).as_deref(), Some("7"));
    assert_eq!(app.subscriber("again")?.held_at(), None);
    Ok(())
}

#[tokio::test]
async fn a_seek_stores_no_checkpoint_until_the_copies_it_carried_are_out() -> anyhow::Result<()> {
    let mut app = TestApp::start(guests::PACER.path()).await?;
    app.publish("paced", &json!({"id": 1, "after_ms": 600_000}))
        .await?;
    assert_eq!(app.subscriber("pace")?.pending_copies(), 1);
    // The seek carries the waiting copy forward; its publish fails for a while.
    app.fail_next_publishes("paced", 3);
    app.seek("pace", StartPosition::Latest).await?;
    let after = app.publish("paced", &json!({"id": 2})).await?;
    let pace = app.subscriber("pace")?;
    assert_eq!(pace.outcomes().last(), Some(&Outcome::Ack));
    // Storing `after` now would let a crash skip the copy's original for good.
    assert_eq!(pace.checkpoint(), None);
    app.advance(Duration::from_secs(2)).await?;
    let pace = app.subscriber("pace")?;
    assert_eq!(pace.checkpoint(), Some(after.sequence_number.as_str()));
    assert_eq!(
        app.stream("paced").len(),
        4,
        "original, copy, carried copy, id 2"
    );
    Ok(())
}
