//! Which streams a component running in TestApp has (every stream by default, as in an account
//! holding every stream it names; or only those listed) and the publishes it is refused,
//! noted by subscription and record whatever the reason.

use std::collections::BTreeSet;
use std::time::Duration;

use ruststream_runtime::policy::StreamGrant;
use ruststream_runtime::testing::{ExistingStreams, SHARD_ID, TestAppError};
use ruststream_runtime::{Outcome, Tenant, TestApp};
use ruststream_tests::guests;
use serde_json::json;

fn listed(streams: &[&str]) -> ExistingStreams {
    ExistingStreams::Listed(
        streams
            .iter()
            .map(|s| (*s).to_owned())
            .collect::<BTreeSet<_>>(),
    )
}

#[tokio::test]
async fn every_stream_a_component_publishes_to_exists_unless_streams_are_listed()
-> anyhow::Result<()> {
    // By default: the stream `book` publishes to exists, and so does any other it names.
    let mut app = TestApp::start(guests::DISPATCH.path()).await?;
    let first = app
        .publish("ledger", &json!({"id": 1, "amount": 5}))
        .await?;
    // Who wrote it: `book`, on the record just published.
    let booked = &app.stream("ledger.booked")[0];
    let by = app.publish_notes().written_by(&booked.sequence_number);
    let by = by.map(|by| (by.subscriber, by.sequence_number));
    assert_eq!(
        by,
        Some((Some("book".to_owned()), Some(first.sequence_number)))
    );
    let to = json!({"id": 2, "amount": 5, "to": ["ledger.booked", "audit-7", "x.y_z"]});
    app.publish("ledger", &to).await?;
    assert_eq!(app.subscriber("book")?.outcomes(), [Outcome::Ack; 2]);
    assert_eq!(app.stream("ledger.booked").len(), 2);
    for stream in ["audit-7", "x.y_z"] {
        assert_eq!(app.stream(stream).len(), 1, "{stream}");
    }
    assert!(app.publish_notes().refused().is_empty());
    // Not a name any stream can have: refused, as Kinesis refuses it, and nothing created.
    let nameless = json!({"id": 3, "amount": 5, "to": ["a b", ""]});
    let refused = app.publish("ledger", &nameless).await?;
    let noted = app.publish_notes().refused();
    // The record's own call, then the copy its retry made, at once (a counted retry).
    let streams: Vec<_> = (noted.iter())
        .map(|r| (r.stream.as_str(), r.reason(), r.chain.is_some()))
        .collect();
    assert_eq!(
        streams,
        [
            ("a b", "unavailable", false),
            ("", "unavailable", false),
            ("a b", "unavailable", true),
            ("", "unavailable", true),
        ]
    );
    assert_eq!(
        noted[0].sequence_number.as_deref(),
        Some(refused.sequence_number.as_str())
    );
    let names = app.stream_names();
    assert!(
        !names.iter().any(|n| n.is_empty() || n == "a b"),
        "{names:?}"
    );
    for stream in ["ledger", "ledger.dead", "ledger.booked", "audit-7", "x.y_z"] {
        assert!(names.iter().any(|n| n == stream), "{stream} in {names:?}");
    }

    // Listed: a publish elsewhere is refused with `stream-not-found`, noted with the
    // subscription and the record, and the copy's refusal names the record its chain began at.
    let mut app = TestApp::builder(guests::DISPATCH.path())
        .streams(listed(&["ledger", "ledger.dead"]))
        .start()
        .await?;
    let first = app
        .publish("ledger", &json!({"id": 1, "amount": 5}))
        .await?;
    app.advance(Duration::from_secs(60)).await?;
    assert_eq!(app.subscriber("book")?.outcomes(), [Outcome::Retry; 2]);
    assert_eq!(app.subscriber("audit")?.outcomes(), [Outcome::Ack]);
    assert_eq!(
        app.stream("ledger.dead").len(),
        1,
        "two attempts, then a dead letter"
    );
    let noted = app.publish_notes().refused();
    assert_eq!(noted.len(), 2, "{noted:#?}");
    for refused in &noted {
        assert_eq!(
            (refused.subscriber.as_deref(), refused.stream.as_str()),
            (Some("book"), "ledger.booked")
        );
        assert_eq!(refused.reason(), "stream-not-found");
        assert_eq!(refused.count, 1);
    }
    assert_eq!(
        noted[0].sequence_number.as_deref(),
        Some(first.sequence_number.as_str())
    );
    assert_eq!(noted[0].chain, None);
    let chain = format!("{SHARD_ID}/{}", first.sequence_number);
    assert_eq!(noted[1].chain.as_deref(), Some(chain.as_str()));
    assert!(app.stream("ledger.booked").is_empty());
    assert!(!app.stream_names().iter().any(|n| n == "ledger.booked"));
    // A stream created by the test is one of them from then on.
    app.create_stream("ledger.booked");
    app.publish("ledger", &json!({"id": 3, "amount": 5}))
        .await?;
    assert_eq!(
        app.subscriber("book")?.outcomes().last(),
        Some(&Outcome::Ack)
    );
    Ok(())
}

#[tokio::test]
async fn with_listed_streams_a_missing_read_or_dead_letter_stream_is_refused_at_start()
-> anyhow::Result<()> {
    let started = TestApp::builder(guests::DISPATCH.path())
        .streams(listed(&["ledger.booked"]))
        .start()
        .await;
    let Err(TestAppError::MissingStreams(missing)) = started else {
        panic!("started without its streams");
    };
    let named: Vec<_> = missing
        .iter()
        .map(|m| (m.stream.as_str(), m.needed_as.as_str()))
        .collect();
    assert_eq!(
        named,
        [
            ("ledger", "read by `book`"),
            ("ledger.dead", "dead letters of `book`"),
            ("ledger", "read by `audit`"),
        ]
    );
    let error = TestAppError::MissingStreams(missing).to_string();
    assert!(
        error.contains("`ledger.dead` (dead letters of `book`)"),
        "{error}"
    );

    // A new version reading a stream not listed is refused the same way, and the running
    // version goes on.
    let mut app = TestApp::builder(guests::VERSIONED_V1.path())
        .streams(listed(&["events", "legacy"]))
        .start()
        .await?;
    let swapped = app.swap(guests::VERSIONED_V2.path()).await;
    let Err(TestAppError::MissingStreams(missing)) = swapped else {
        panic!("swapped in a version without its streams: {swapped:?}");
    };
    assert_eq!(missing[0].stream, "audit", "{missing:?}");
    assert_eq!(app.app().version, "1.0.0");
    Ok(())
}

#[tokio::test]
async fn every_refused_publish_is_noted_whatever_the_reason() -> anyhow::Result<()> {
    let tenant = Tenant::new("acme")
        .subscribe(StreamGrant::Any)
        .publish(StreamGrant::only([
            "ledger",
            "ledger.booked",
            "ledger.dead",
        ]));
    let mut app = TestApp::builder(guests::DISPATCH.path())
        .tenant(tenant)
        .start()
        .await?;
    let cases = [
        (
            json!({"id": 1, "amount": 1, "to": ["secret"]}),
            "secret",
            "not-permitted",
        ),
        (
            json!({"id": 2, "amount": 1, "header": "x-ruststream-retry-count"}),
            "ledger.booked",
            "reserved-header",
        ),
        (
            json!({"id": 3, "amount": 1, "bytes": 1_100_000}),
            "ledger.booked",
            "record-too-large",
        ),
        // A second's worth of the tenant's write quota goes at once; the rest is throttled.
        (
            json!({"id": 4, "amount": 1, "times": 1001}),
            "ledger.booked",
            "throttled",
        ),
    ];
    // An outage first: the throttled case spends the write quota of this paused instant.
    app.fail_next_publishes("ledger.booked", 1);
    let outage = app
        .publish("ledger", &json!({"id": 5, "amount": 1}))
        .await?;
    let mut sequences = Vec::new();
    for (entry, _, _) in &cases {
        sequences.push(app.publish("ledger", entry).await?.sequence_number);
    }
    let noted = app.publish_notes().refused();
    let found = |sequence: &str, stream: &str, reason: &str| {
        noted.iter().any(|r| {
            r.subscriber.as_deref() == Some("book")
                && r.sequence_number.as_deref() == Some(sequence)
                && r.stream == stream
                && r.reason() == reason
        })
    };
    for ((entry, stream, reason), sequence) in cases.iter().zip(&sequences) {
        assert!(found(sequence, stream, reason), "{entry}: {noted:#?}");
    }
    assert!(
        found(&outage.sequence_number, "ledger.booked", "unavailable"),
        "{noted:#?}"
    );
    assert!(
        noted
            .iter()
            .all(|r| r.subscriber.as_deref() == Some("book")),
        "audit publishes nothing"
    );
    Ok(())
}
