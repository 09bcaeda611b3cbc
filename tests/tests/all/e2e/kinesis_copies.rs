//! Counted copies, dead letters, seek and publishing on a local Kinesis server: nothing lost
//! across a crash or a failing publish.

use std::time::Duration;

use ruststream_common::escape::escape_controls;
use ruststream_kinesis::kinesis::ReadMode;
use ruststream_kinesis::{Deployment, runner::SeekError};
use ruststream_runtime::envelope;
use ruststream_runtime::pipeline::MAX_UNSENT_COPIES;
use ruststream_runtime::{Outcome, app::StartPosition, record::Header};
use ruststream_tests::e2e::{
    TestHost, dynamo_store, put_json, put_json_batch, put_raw, quick_config, read_all,
    stored_checkpoint,
};
use ruststream_tests::faults::{Fault, Faults};
use ruststream_tests::guests;
use ruststream_tests::servers::{LocalDynamo, LocalKinesis};
use ruststream_tests::wait::poll_for;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn entry(id: u64, amount: i64) -> serde_json::Value {
    json!({ "id": id, "amount": amount })
}

async fn streams(kinesis: &LocalKinesis, names: &[&str]) -> anyhow::Result<()> {
    for name in names {
        kinesis.create_stream(name, 1).await?;
    }
    Ok(())
}

const RETRIES_STREAMS: [&str; 4] = ["refunds", "refunds.dead", "payouts", "audit"];
const RELAY_STREAMS: [&str; 5] = ["orders", "orders.lost", "reminders", "inbox", "shipments"];

async fn max_attempts_delivers_three_times_then_dead_letters(read: ReadMode) -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    streams(&kinesis, &RETRIES_STREAMS).await?;
    let client = kinesis.client().await;
    let store = dynamo_store(dynamo.client().await, "ruststream-ledger-retries").await?;

    let host = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = host
        .run(guests::SETTLEMENT_RETRIES, store.clone(), 3)
        .await?;
    let (shard, original) = put_json(&client, "refunds", &entry(7, -40), None).await?;
    host.deliveries.wait_for(3, WAIT).await?;
    let dead = wait_for_records(&client, "refunds.dead", 1).await?;
    // A payment behind them, acked: a fourth attempt's copy would have been published when
    // the third was settled, so before it on the shard, and delivered first.
    let (_, marker) = put_json(&client, "refunds", &entry(8, 40), None).await?;
    let mut reports = host
        .deliveries
        .wait_for_sequences(std::slice::from_ref(&marker), WAIT)
        .await?;
    app.shutdown().await;
    let last = reports.pop().expect("the marker");
    assert_eq!((last.sequence_number, last.outcome), (marker, Outcome::Ack));
    assert_eq!(read_all(&client, "refunds.dead").await?.len(), 1);

    let attempts: Vec<u32> = reports.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert!(reports.iter().all(|r| r.outcome == Outcome::Retry));
    let seen_by_handler: Vec<String> = host
        .log
        .captured()
        .iter()
        .filter(|l| l.message == "reconciling")
        .filter_map(|l| l.field("attempt").map(str::to_owned))
        .collect();
    assert_eq!(seen_by_handler, ["1", "2", "3", "1"]);

    let dead = dead[0].envelope();
    assert_eq!(dead.retry_count, 3);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&dead.payload)?,
        entry(7, -40)
    );

    let refunds = read_all(&client, "refunds").await?;
    assert_eq!(refunds.len(), 4, "the original, two copies and the marker");
    assert_eq!(refunds[0].sequence_number, original);
    // Past the dead-lettered copy, up to the marker.
    let last = &refunds[3].sequence_number;
    assert_eq!(
        stored_checkpoint(store.as_ref(), "refunds", &shard)
            .await?
            .as_ref(),
        Some(last)
    );
    Ok(())
}

async fn a_delayed_copy_survives_a_crash_and_keeps_its_delay(read: ReadMode) -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let dynamo = LocalDynamo::start().await?;
    streams(&kinesis, &RELAY_STREAMS).await?;
    let client = kinesis.client().await;
    let store = dynamo_store(dynamo.client().await, "ruststream-relay").await?;

    let first = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = first.run(guests::RELAY, store.clone(), 4).await?;
    let (shard, original) = put_json(
        &client,
        "reminders",
        &json!({"id": 1, "customer": "c"}),
        None,
    )
    .await?;
    let reports = first.deliveries.wait_for(1, WAIT).await?;
    assert_eq!(
        reports[0].outcome,
        Outcome::RetryAfter(Duration::from_secs(5))
    );
    // The copy is in the stream and the original is settled before the crash.
    let copy = wait_for_records(&client, "reminders", 2).await?.remove(1);
    let due = copy
        .envelope()
        .due_at_ms
        .expect("the copy carries its due time");
    wait_until_checkpoint(store.as_ref(), "reminders", &shard, &original).await?;
    app.abort();

    // Another host takes the shard over once the lease is seen expired (3 s here).
    let second = TestHost::new(client.clone(), "host-b")?.reading(read);
    let app = second.launch(Deployment::new(
        second.load(guests::RELAY).await?,
        store.clone(),
    ))?;
    second.deliveries.wait_for(1, WAIT).await?;
    // A reminder behind the copy: a second delivery of the copy would have come before it.
    let (_, marker) = put_json(
        &client,
        "reminders",
        &json!({"id": 2, "customer": "d"}),
        None,
    )
    .await?;
    let reports = second
        .deliveries
        .wait_for_sequences(std::slice::from_ref(&marker), WAIT)
        .await?;
    app.shutdown().await;

    let of_copy = reports
        .iter()
        .filter(|r| r.sequence_number == copy.sequence_number)
        .count();
    assert_eq!(of_copy, 1, "delivered once: {reports:#?}");
    let report = &reports[0];
    assert_eq!(report.sequence_number, copy.sequence_number);
    assert_eq!(report.attempt, 2);
    assert_eq!(report.outcome, Outcome::Ack);
    assert!(
        report.at_ms >= due,
        "delivered at {} before its due time {due}",
        report.at_ms
    );
    Ok(())
}

async fn copies_that_cannot_go_out_stop_the_reading_until_they_drain(
    read: ReadMode,
) -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    streams(&kinesis, &RETRIES_STREAMS).await?;
    let faults = Faults::new();
    let client = kinesis.client().await;
    let mut config = quick_config("host-a");
    config.reader.get_records_limit = 100;
    let host = TestHost::with_config(faults.kinesis_client(&kinesis.endpoint()).await, config)?
        .reading(read);
    let app = host.run_in_memory(guests::SETTLEMENT_RETRIES, 3).await?;
    // No copy goes out: every refund's copy waits in the pipeline, payload and all. (An error
    // the SDK does not retry itself, so each try fails at once.)
    let gone = Fault::error(400, "ResourceNotFoundException", "Stream refunds not found");
    faults.inject(&["PutRecord"], u32::MAX, gone);
    let refunds = MAX_UNSENT_COPIES + 200;
    let entries: Vec<_> = (0..refunds as u64).map(|id| entry(id, -1)).collect();
    put_json_batch(&client, "refunds", &entries).await?;
    host.deliveries.wait_for(MAX_UNSENT_COPIES, WAIT).await?;
    // Reading stops there. Were it not stopped, the next 200 would be read within a second
    // (reads of 100 records every 200 ms): give it three. A window, not a wait: a reader that
    // does not read marks nothing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let read = host.deliveries.len();
    assert!(
        read < MAX_UNSENT_COPIES + 100,
        "{read} refunds read with {MAX_UNSENT_COPIES} copies owed"
    );
    // Once copies go out again, everything is read and runs its course.
    faults.clear_faults();
    let dead = poll_for(Duration::from_secs(360), async || {
        let dead = read_all(&client, "refunds.dead").await.ok()?;
        (dead.len() >= refunds).then_some(dead)
    })
    .await;
    assert_eq!(
        dead.map(|d| d.len()),
        Some(refunds),
        "every refund dead-lettered"
    );
    app.shutdown().await;
    Ok(())
}

async fn a_failing_copy_publish_holds_the_checkpoint_until_it_succeeds(
    read: ReadMode,
) -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    streams(&kinesis, &RETRIES_STREAMS).await?;
    let faults = Faults::new();
    let client = kinesis.client().await;

    let host =
        TestHost::new(faults.kinesis_client(&kinesis.endpoint()).await, "host-a")?.reading(read);
    let app = host.run_in_memory(guests::SETTLEMENT_RETRIES, 3).await?;
    // Two pipeline tries' worth of SDK attempts fail (the SDK itself tries 3 times).
    faults.inject(&["PutRecord"], 6, Fault::internal_failure());
    let (_, original) = put_json(&client, "refunds", &entry(1, -1), None).await?;
    host.deliveries.wait_for(1, WAIT).await?;
    let refunds_shard = |status: &[ruststream_kinesis::runner::SubscriptionStatus]| {
        let refunds = status
            .iter()
            .find(|s| s.stream == "refunds")
            .expect("refunds");
        refunds.shards.values().next().expect("one shard").clone()
    };
    let held = app
        .wait_for(WAIT, |s| {
            refunds_shard(s).held_at.as_deref() == Some(original.as_str())
        })
        .await;
    assert!(held, "{:#?}", app.status());
    while faults.pending_faults() > 0 {
        let shard = refunds_shard(&app.status());
        assert_eq!(
            shard.checkpoint, None,
            "the checkpoint passed a record whose copy is not out"
        );
        assert_eq!(shard.held_at.as_deref(), Some(original.as_str()));
        // The sampler's pace, not a wait: the invariant is checked while faults remain.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    host.deliveries.wait_for(3, WAIT).await?;
    wait_for_records(&client, "refunds.dead", 1).await?;
    // Nothing owed any more (no copy waits to be published): no publish can come after.
    let drained = app
        .wait_for(WAIT, |s| {
            let shard = refunds_shard(s);
            shard.copies_pending == 0 && shard.held_at.is_none()
        })
        .await;
    assert!(drained, "{:#?}", app.status());
    let status = app.status();
    app.shutdown().await;

    assert_eq!(faults.injected("PutRecord"), 6);
    let failed_publishes = host
        .log
        .captured()
        .iter()
        .filter(|l| l.message.contains("publishing the copy"))
        .count();
    assert_eq!(
        failed_publishes, 2,
        "two pipeline tries failed, the third went out"
    );
    let shard = refunds_shard(&status);
    let all = read_all(&client, "refunds").await?;
    assert_eq!(all.len(), 3);
    assert_eq!(shard.checkpoint.as_ref(), Some(&all[2].sequence_number));
    Ok(())
}

async fn seek_replays_in_order_and_refuses_shards_held_elsewhere(
    read: ReadMode,
) -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream("ledger", 2).await?;
    let client = kinesis.client().await;
    let host = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = host.run_in_memory(guests::SETTLEMENT, 2).await?;
    let shard_0 = "0";
    let shard_1 = "300000000000000000000000000000000000000";
    let mut first_shard = Vec::new();
    for (id, amount) in [(1, 5), (2, -1), (3, 7)] {
        first_shard.push(put_json(&client, "ledger", &entry(id, amount), Some(shard_0)).await?);
    }
    let (other_shard, _) = put_json(&client, "ledger", &entry(4, 4), Some(shard_1)).await?;
    host.deliveries.wait_for(4, WAIT).await?;

    let mut moved = app.seek("book", StartPosition::Horizon).await?;
    moved.sort();
    assert_eq!(moved.len(), 2);
    let reports = host.deliveries.wait_for(8, WAIT).await?;
    let (shard, sequences): (Vec<_>, Vec<_>) = first_shard.iter().cloned().unzip();
    let replayed: Vec<String> = reports[4..]
        .iter()
        .filter(|r| r.shard_id == shard[0])
        .map(|r| r.sequence_number.clone())
        .collect();
    assert_eq!(replayed, sequences, "the first shard replays in order");

    let refused = app
        .seek(
            "book",
            StartPosition::AtSequence {
                shard_id: "shardId-000000000099".into(),
                sequence_number: sequences[0].clone(),
            },
        )
        .await;
    assert!(
        matches!(refused, Err(SeekError::NotOwned { .. })),
        "{refused:?}"
    );
    let (_, later) = put_json(&client, "ledger", &entry(5, 5), Some(shard_1)).await?;
    let reports = host.deliveries.wait_for(9, WAIT).await?;
    assert_eq!(reports[8].sequence_number, later);
    assert_eq!(reports[8].shard_id, other_shard);

    // A sequence seek on a held shard redelivers from that record.
    let moved = app
        .seek(
            "book",
            StartPosition::AtSequence {
                shard_id: shard[0].clone(),
                sequence_number: sequences[1].clone(),
            },
        )
        .await?;
    assert_eq!(moved, [shard[0].clone()]);
    let reports = host.deliveries.wait_for(11, WAIT).await?;
    let again: Vec<&str> = reports[9..]
        .iter()
        .map(|r| r.sequence_number.as_str())
        .collect();
    assert_eq!(again, [sequences[1].as_str(), sequences[2].as_str()]);
    app.shutdown().await;
    Ok(())
}

async fn a_handler_publishes_to_a_second_stream_with_its_key(read: ReadMode) -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    streams(&kinesis, &RELAY_STREAMS).await?;
    let client = kinesis.client().await;
    let host = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = host.run_in_memory(guests::RELAY, 4).await?;
    let order = json!({"id": 42, "customer": "cust-7"});
    put_json(&client, "orders", &order, None).await?;
    put_json(&client, "orders.lost", &order, None).await?;
    host.deliveries.wait_for(2, WAIT).await?;
    app.shutdown().await;

    let shipments = read_all(&client, "shipments").await?;
    assert_eq!(shipments.len(), 1);
    assert_eq!(shipments[0].partition_key, "cust-7");
    let shipped = shipments[0].envelope();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&shipped.payload)?,
        order
    );
    assert_eq!(shipped.headers, [Header::new("x-source", "orders")]);
    let forwarded = host.log.captured();
    let forwarded = forwarded
        .iter()
        .find(|l| l.message == "forwarded")
        .expect("logged");
    assert_eq!(
        forwarded.field("sequence"),
        Some(shipments[0].sequence_number.as_str())
    );

    let failed = host.log.captured();
    let failed = failed
        .iter()
        .find(|l| l.message == "publish failed")
        .expect("logged");
    assert_eq!(
        failed.field("kind"),
        Some("StreamNotFound(\"no-such-stream\")")
    );
    Ok(())
}

async fn plain_enveloped_text_enveloped_and_malformed_payloads_decode_correctly(
    read: ReadMode,
) -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    streams(&kinesis, &RELAY_STREAMS).await?;
    let client = kinesis.client().await;
    let host = TestHost::new(client.clone(), "host-a")?.reading(read);
    let app = host.run_in_memory(guests::RELAY, 4).await?;
    let plain = br#"{"from":"another producer"}"#.to_vec();
    let wrapped = envelope::wrap(&[Header::new("trace", "t-1")], br#"{"from":"native"}"#);
    let malformed = b"RSK2\x00\x00\x00\xffnot really an envelope".to_vec();
    // Native RustStream 0.6 wrote headers in a text envelope.
    let block = b"trace: t-2\n";
    let mut text = b"RSK1".to_vec();
    text.extend_from_slice(&(block.len() as u32).to_be_bytes());
    text.extend_from_slice(block);
    text.extend_from_slice(br#"{"from":"native 0.6"}"#);
    for data in [plain.clone(), wrapped, malformed.clone(), text] {
        put_raw(&client, "inbox", "pk", data).await?;
    }
    host.deliveries.wait_for(4, WAIT).await?;
    app.shutdown().await;

    let received: Vec<(String, String)> = host
        .log
        .captured()
        .iter()
        .filter(|l| l.message == "received")
        .map(|l| {
            let field = |name| l.field(name).unwrap_or_default().to_owned();
            (field("payload"), field("headers"))
        })
        .collect();
    assert_eq!(
        received,
        [
            (String::from_utf8(plain)?, String::new()),
            (r#"{"from":"native"}"#.to_owned(), "trace=t-1".to_owned()),
            // Shown with its control characters escaped, as every guest log line is.
            (
                escape_controls(&String::from_utf8_lossy(&malformed)).into_owned(),
                String::new()
            ),
            (
                r#"{"from":"native 0.6"}"#.to_owned(),
                "trace=t-2".to_owned()
            ),
        ]
    );
    Ok(())
}

async fn wait_for_records(
    client: &aws_sdk_kinesis::Client,
    stream: &str,
    count: usize,
) -> anyhow::Result<Vec<ruststream_tests::e2e::ReadBack>> {
    let held = poll_for(Duration::from_secs(20), async || {
        match read_all(client, stream).await {
            Ok(records) if records.len() < count => None,
            read => Some(read),
        }
    })
    .await;
    match held {
        Some(records) => records,
        None => anyhow::bail!("{stream} never held {count} records"),
    }
}

async fn wait_until_checkpoint(
    store: &dyn ruststream_kinesis::LeaseStore,
    stream: &str,
    shard: &str,
    sequence: &str,
) -> anyhow::Result<()> {
    let reached = poll_for(Duration::from_secs(5), async || {
        match stored_checkpoint(store, stream, shard).await {
            Ok(checkpoint) if checkpoint.as_deref() != Some(sequence) => None,
            read => Some(read.map(drop)),
        }
    })
    .await;
    match reached {
        Some(result) => result,
        None => anyhow::bail!("the checkpoint of {stream}:{shard} never reached {sequence}"),
    }
}

in_both_read_modes!(
    max_attempts_delivers_three_times_then_dead_letters,
    a_delayed_copy_survives_a_crash_and_keeps_its_delay,
    copies_that_cannot_go_out_stop_the_reading_until_they_drain,
    a_failing_copy_publish_holds_the_checkpoint_until_it_succeeds,
    seek_replays_in_order_and_refuses_shards_held_elsewhere,
    a_handler_publishes_to_a_second_stream_with_its_key,
    plain_enveloped_text_enveloped_and_malformed_payloads_decode_correctly,
);
