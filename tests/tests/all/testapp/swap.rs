//! Hot swaps in TestApp (`TestApp::swap`): one app's versions (`tests/guests/versioned-*`)
//! take over each other's shards between calls, keeping checkpoints and held records.

use ruststream_runtime::{Outcome, TestApp, testing::TestAppError};
use ruststream_tests::{Guest, guests};
use serde_json::json;

async fn start(guest: Guest) -> TestApp {
    TestApp::start(guest.path())
        .await
        .unwrap_or_else(|e| panic!("{} should load: {e}", guest.name()))
}

/// Each `message` line as (event id, version that logged it), in order.
fn handled_by(app: &TestApp, message: &str) -> Vec<(u64, u64)> {
    let number = |value: Option<&str>| value.and_then(|v| v.parse().ok()).unwrap_or(0);
    app.logs()
        .iter()
        .filter(|line| line.message == message)
        .map(|line| {
            (
                number(line.field("event.id")),
                number(line.field("version")),
            )
        })
        .collect()
}

#[tokio::test]
async fn records_before_and_after_a_swap_are_each_handled_once_by_their_version()
-> anyhow::Result<()> {
    let mut app = start(guests::VERSIONED_V1).await;
    app.publish("events", &json!({ "id": 1 })).await?;
    let second = app.publish("events", &json!({ "id": 2 })).await?;

    app.swap(guests::VERSIONED_V2.path()).await?;
    assert_eq!(app.app().version, "2.0.0");
    let handle = app.subscriber("handle")?;
    assert_eq!(handle.checkpoint(), Some(second.sequence_number.as_str()));
    assert_eq!(handle.calls(), 2, "the swap delivered nothing again");

    app.publish("events", &json!({ "id": 3 })).await?;
    let last = app.publish("events", &json!({ "id": 4 })).await?;
    assert_eq!(
        handled_by(&app, "handled"),
        [(1, 1), (2, 1), (3, 2), (4, 2)]
    );
    let handle = app.subscriber("handle")?;
    assert_eq!(handle.outcomes(), [Outcome::Ack; 4]);
    assert_eq!(handle.checkpoint(), Some(last.sequence_number.as_str()));
    assert_eq!(handle.held_at(), None);
    Ok(())
}

#[tokio::test]
async fn a_held_record_stays_held_across_a_swap() -> anyhow::Result<()> {
    let mut app = start(guests::VERSIONED_V1).await;
    let first = app.publish("events", &json!({ "id": 1 })).await?;
    let held = app
        .publish("events", &json!({ "id": 2, "hold": true }))
        .await?;
    app.publish("events", &json!({ "id": 3 })).await?;

    app.swap(guests::VERSIONED_V2.path()).await?;
    app.publish("events", &json!({ "id": 4 })).await?;

    let handle = app.subscriber("handle")?;
    assert_eq!(handle.checkpoint(), Some(first.sequence_number.as_str()));
    assert_eq!(handle.held_at(), Some(held.sequence_number.as_str()));
    assert_eq!(
        handle.outcomes(),
        [Outcome::Ack, Outcome::Retry, Outcome::Ack, Outcome::Ack]
    );
    assert_eq!(
        handled_by(&app, "handled"),
        [(1, 1), (2, 1), (3, 1), (4, 2)],
        "the held record is not handed to the new version"
    );
    Ok(())
}

#[tokio::test]
async fn a_renamed_app_is_refused_and_the_running_version_goes_on() -> anyhow::Result<()> {
    let mut app = start(guests::VERSIONED_V1).await;
    let first = app.publish("events", &json!({ "id": 1 })).await?;

    let refused = app.swap(guests::VERSIONED_RENAMED.path()).await;
    let Err(error @ TestAppError::Renamed { .. }) = refused else {
        panic!("a renamed app must be refused, got {refused:?}");
    };
    let message = error.to_string();
    assert!(
        message.contains("`versioned`") && message.contains("`renamed`"),
        "{message}"
    );
    assert_eq!(app.app().name, "versioned");
    assert_eq!(app.app().version, "1.0.0");

    let second = app.publish("events", &json!({ "id": 2 })).await?;
    assert_eq!(handled_by(&app, "handled"), [(1, 1), (2, 1)]);
    let handle = app.subscriber("handle")?;
    assert_eq!(handle.checkpoint(), Some(second.sequence_number.as_str()));
    assert_ne!(first.sequence_number, second.sequence_number);
    Ok(())
}

#[tokio::test]
async fn a_component_that_does_not_load_is_refused_and_the_running_version_goes_on()
-> anyhow::Result<()> {
    let mut app = start(guests::VERSIONED_V1).await;
    let refused = app.swap_bytes("broken", b"not a component".to_vec()).await;
    assert!(matches!(refused, Err(TestAppError::Load(_))), "{refused:?}");
    app.publish("events", &json!({ "id": 1 })).await?;
    assert_eq!(handled_by(&app, "handled"), [(1, 1)]);
    Ok(())
}

#[tokio::test]
async fn a_subscription_the_new_version_adds_starts_and_one_it_drops_stops() -> anyhow::Result<()> {
    let mut app = start(guests::VERSIONED_V1).await;
    // `audit` (only in v2) reads from the horizon: what its stream held before the swap.
    app.create_stream("audit");
    app.publish("audit", &json!({ "id": 10 })).await?;
    app.publish("legacy", &json!({ "id": 20 })).await?;
    assert_eq!(handled_by(&app, "legacy"), [(20, 1)]);
    assert!(app.subscriber("audit").is_err());

    app.swap(guests::VERSIONED_V2.path()).await?;
    assert_eq!(
        handled_by(&app, "audited"),
        [(10, 2)],
        "caught up at the swap"
    );
    assert!(matches!(
        app.subscriber("legacy"),
        Err(TestAppError::UnknownSubscriber(_))
    ));

    app.publish("legacy", &json!({ "id": 21 })).await?;
    app.publish("audit", &json!({ "id": 11 })).await?;
    assert_eq!(handled_by(&app, "legacy"), [(20, 1)], "legacy stopped");
    assert_eq!(handled_by(&app, "audited"), [(10, 2), (11, 2)]);
    assert_eq!(app.subscriber("audit")?.calls(), 2);
    assert_eq!(app.stream("legacy").len(), 2, "its stream stays");
    Ok(())
}
