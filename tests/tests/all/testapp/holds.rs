//! Waiting copies hold their shard's checkpoint for a bounded time, and survive seeks.

use std::time::Duration;

use ruststream_runtime::envelope::DUE_AT_HEADER;
use ruststream_runtime::{TestApp, app::StartPosition};
use ruststream_tests::guests;
use serde_json::json;

#[tokio::test]
async fn a_long_wait_is_carried_forward_and_holds_the_checkpoint_at_most_a_minute()
-> anyhow::Result<()> {
    let mut app = TestApp::start(guests::PACER.path()).await?;
    let original = app
        .publish("paced", &json!({"id": 1, "after_ms": 600_000}))
        .await?;
    let first_copy = app.stream("paced")[1].clone();
    let due = first_copy.header(DUE_AT_HEADER).expect("a due time");
    let pace = app.subscriber("pace")?;
    assert_eq!(pace.checkpoint(), Some(original.sequence_number.as_str()));
    assert_eq!(pace.held_at(), Some(first_copy.sequence_number.as_str()));

    // With nothing handled behind it the wait holds nothing back: no carry.
    app.advance(Duration::from_secs(61)).await?;
    assert_eq!(app.stream("paced").len(), 2, "nothing to gain from a carry");
    // A record handled behind it is held back: after the hold limit the copy is published
    // again, due when it was, and the checkpoint moves past the one that waited.
    let behind = app.publish("paced", &json!({"id": 2})).await?;
    app.advance(Duration::from_secs(61)).await?;
    let stream = app.stream("paced");
    assert_eq!(stream.len(), 4, "carried forward once");
    assert_eq!(
        stream[3].header(DUE_AT_HEADER).as_deref(),
        Some(due.as_str())
    );
    assert_eq!(stream[3].payload(), first_copy.payload());
    let pace = app.subscriber("pace")?;
    assert_eq!(pace.checkpoint(), Some(behind.sequence_number.as_str()));
    assert_eq!(
        pace.calls(),
        2,
        "the copy is not delivered before it is due"
    );

    // Delivered once, at its due time, after being carried forward every minute.
    app.advance(Duration::from_secs(600)).await?;
    let pace = app.subscriber("pace")?;
    assert_eq!(pace.attempts(), [1, 1, 2]);
    let delivered_at = pace.reports()[2].at_ms;
    assert!(
        delivered_at >= due.parse::<u64>()?,
        "{delivered_at} < {due}"
    );
    assert_eq!(pace.held_at(), None);
    Ok(())
}

#[tokio::test]
async fn a_seek_keeps_the_copies_waiting_for_their_due_time() -> anyhow::Result<()> {
    let mut app = TestApp::start(guests::PACER.path()).await?;
    app.publish("paced", &json!({"id": 1, "after_ms": 30_000}))
        .await?;
    assert_eq!(app.subscriber("pace")?.calls(), 1);
    app.seek("pace", StartPosition::Latest).await?;
    app.advance(Duration::from_secs(60)).await?;
    let pace = app.subscriber("pace")?;
    assert_eq!(pace.attempts(), [1, 2], "the copy came back after the seek");
    Ok(())
}
