//! Counted copies that fail to publish, and seeks, in TestApp (paused time, exact control).

use std::time::Duration;

use ruststream_runtime::{Outcome, TestApp, app::StartPosition, publish::MAX_RECORD_BYTES};
use ruststream_tests::guests;
use serde_json::json;

fn entry(id: u64, amount: i64) -> serde_json::Value {
    json!({ "id": id, "amount": amount })
}

async fn start() -> TestApp {
    TestApp::start(guests::SETTLEMENT_RETRIES.path())
        .await
        .expect("settlement-retries loads")
}

#[tokio::test]
async fn a_copy_that_fails_to_publish_is_retried_and_holds_the_checkpoint() -> anyhow::Result<()> {
    let mut app = start().await;
    app.fail_next_publishes("refunds", 2);
    let original = app.publish("refunds", &entry(1, -5)).await?;

    let reconcile = app.subscriber("reconcile")?;
    assert_eq!(reconcile.calls(), 1);
    assert_eq!(reconcile.checkpoint(), None);
    assert_eq!(reconcile.held_at(), Some(original.sequence_number.as_str()));
    assert_eq!(app.stream("refunds").len(), 1, "no copy yet");

    // First retry after 200 ms fails too; the original still holds the checkpoint.
    app.advance(Duration::from_millis(200)).await?;
    assert_eq!(app.subscriber("reconcile")?.checkpoint(), None);
    assert_eq!(app.logs_containing("publishing the copy").len(), 2);

    // The second retry, 400 ms later, succeeds: the copy runs its course to the dead letter
    // (its own copy a second later, the minimum between copies of one record).
    app.advance(Duration::from_millis(400)).await?;
    assert_eq!(app.subscriber("reconcile")?.attempts(), [1, 2]);
    app.advance(Duration::from_secs(1)).await?;
    let reconcile = app.subscriber("reconcile")?;
    assert_eq!(reconcile.attempts(), [1, 2, 3]);
    assert_eq!(reconcile.held_at(), None);
    let refunds = app.stream("refunds");
    assert_eq!(refunds.len(), 3);
    assert_eq!(
        reconcile.checkpoint(),
        Some(refunds[2].sequence_number.as_str())
    );
    assert_eq!(app.stream("refunds.dead").len(), 1);
    Ok(())
}

#[tokio::test]
async fn a_copy_too_large_to_publish_is_given_up_and_its_original_held() -> anyhow::Result<()> {
    let mut app = start().await;
    // The original fits a stream record with 10 bytes to spare (its partition key is 16
    // bytes); its copy, enveloped with the retry-count header, does not.
    let (head, tail) = (r#"{"id":1,"amount":-5,"pad":""#, r#""}"#);
    let pad = "x".repeat(MAX_RECORD_BYTES as usize - 16 - 10 - head.len() - tail.len());
    let big = app
        .publish_raw("refunds", format!("{head}{pad}{tail}"))
        .await?;
    let after = app.publish("refunds", &entry(2, 7)).await?;

    let reconcile = app.subscriber("reconcile")?;
    assert_eq!(reconcile.outcomes(), [Outcome::Retry, Outcome::Ack]);
    assert_eq!(reconcile.held_at(), Some(big.sequence_number.as_str()));
    assert_eq!(reconcile.checkpoint(), None);
    let given_up = app.logs_containing("can never be published");
    assert_eq!(given_up.len(), 1, "{given_up:#?}");
    assert_eq!(
        given_up[0].sequence_number.as_deref(),
        Some(big.sequence_number.as_str())
    );
    assert_eq!(app.stream("refunds").len(), 2, "no copy was written");

    // Given up means no retry loop: time passes, nothing more is tried or logged.
    app.advance(Duration::from_secs(60)).await?;
    assert_eq!(app.logs_containing("can never be published").len(), 1);
    assert_eq!(app.logs_containing("publishing the copy").len(), 0);
    let reconcile = app.subscriber("reconcile")?;
    assert_eq!(reconcile.calls(), 2);
    assert_eq!(reconcile.held_at(), Some(big.sequence_number.as_str()));
    assert_ne!(reconcile.checkpoint(), Some(after.sequence_number.as_str()));
    Ok(())
}

#[tokio::test]
async fn a_seek_to_the_horizon_replays_the_stream_in_order() -> anyhow::Result<()> {
    let mut app = start().await;
    let a = app.publish("payouts", &entry(1, 5)).await?;
    let b = app.publish("payouts", &entry(2, 6)).await?;
    app.seek("pay_out", StartPosition::Horizon).await?;
    let pay_out = app.subscriber("pay_out")?;
    let order: Vec<&str> = pay_out
        .reports()
        .iter()
        .map(|r| r.sequence_number.as_str())
        .collect();
    let (a, b) = (a.sequence_number.as_str(), b.sequence_number.as_str());
    assert_eq!(order, [a, b, a, b]);
    assert_eq!(pay_out.checkpoint(), Some(b));
    Ok(())
}

#[tokio::test]
async fn acks_of_records_delivered_before_a_seek_never_move_the_checkpoint() -> anyhow::Result<()> {
    let mut app = start().await;
    app.publish("payouts", &entry(1, 5)).await?;
    // B's delayed copy cannot be published: B stays unhandled, its copy pending.
    app.fail_next_publishes("payouts", 1);
    app.publish("payouts", &entry(2, -1)).await?;

    app.seek("pay_out", StartPosition::Latest).await?;
    let c = app.publish("payouts", &entry(3, 5)).await?;
    // C is handled, but B's copy is not out yet and B's place no longer counts here: storing
    // C now, a crash would lose B. Nothing is stored until the copy is out.
    assert_eq!(app.subscriber("pay_out")?.checkpoint(), None);
    // B's copy goes out on its retry, 100-200 ms after its first try (jittered), and comes
    // back at the tip to wait for its due time.
    app.advance(Duration::from_millis(200)).await?;
    let b_copy = app.stream("payouts")[3].clone();
    assert_eq!(
        b_copy.header("x-ruststream-retry-count").as_deref(),
        Some("1")
    );
    assert_eq!(
        app.subscriber("pay_out")?.checkpoint(),
        Some(c.sequence_number.as_str())
    );
    // D's copy fails once: D stays unhandled behind B's waiting copy.
    app.fail_next_publishes("payouts", 1);
    app.publish("payouts", &entry(4, -1)).await?;
    // B was delivered before the seek: settling it counted for nothing after the seek, and
    // D's copy, out on its retry, settles D without the checkpoint passing B's copy.
    app.advance(Duration::from_secs(1)).await?;
    let pay_out = app.subscriber("pay_out")?;
    assert_eq!(pay_out.checkpoint(), Some(c.sequence_number.as_str()));
    assert_eq!(pay_out.held_at(), Some(b_copy.sequence_number.as_str()));
    assert_eq!(
        pay_out.pending_copies(),
        2,
        "B's and D's copies wait, D itself is handled"
    );
    assert_eq!(
        app.stream("payouts").len(),
        6,
        "A, B, C, B's copy, D, D's copy"
    );
    let copies = app
        .stream("payouts")
        .iter()
        .filter(|r| r.header("x-ruststream-retry-count").is_some())
        .count();
    assert_eq!(copies, 2, "neither B's nor D's copy was lost");
    assert_eq!(
        pay_out.outcomes(),
        [
            Outcome::Ack,
            Outcome::RetryAfter(Duration::from_secs(30)),
            Outcome::Ack,
            Outcome::RetryAfter(Duration::from_secs(30)),
        ]
    );
    Ok(())
}
