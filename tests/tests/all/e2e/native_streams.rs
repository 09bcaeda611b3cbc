//! A stream shared with native RustStream services, through the binary on kinesis-local (and
//! DynamoDB-local for leases): what a native service writes reaches a guest without the
//! headers its reader sets on delivery, and a subscription with a `retry_stream` keeps its
//! counted copies off the stream, so a native reader of it (which would handle a copy at once,
//! as a record of its own) never sees them, while the copies still come back to their owner
//! at their due time, across a crash, and are dead-lettered once spent. Carried copies go there
//! too, also those of copies made before the setting, which otherwise still come back from the
//! stream itself.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ruststream_kinesis::LeaseStore;
use ruststream_runtime::dead_letter::DeadLetterOrigin;
use ruststream_runtime::envelope::{
    self, DUE_AT_HEADER, NATIVE_DELIVERY_HEADERS, RETRY_COUNT_HEADER,
};
use ruststream_runtime::record::{CopyOrigin, CopyOwner, Header};
use ruststream_tests::e2e::{ReadBack, put_json, put_raw, read_all, read_at_least};
use ruststream_tests::fixture::{BinaryHost, Fixture, WAIT};
use ruststream_tests::guests;
use ruststream_tests::wait::eventually_async;
use serde_json::{Value, json};

/// How long the step whose copy outlives a crash asks to wait: long enough that the host is
/// killed and started again (compiling its components) well before the copy is due, so a copy
/// handled early by the new host would be seen early.
const AFTER_MS: u64 = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_is_never_shown_the_headers_a_native_reader_sets_on_delivery() -> anyhow::Result<()>
{
    let fixture = Fixture::builder("native-headers")
        .stream("orders", 1)
        .stream("orders.lost", 1)
        .stream("reminders", 1)
        .stream("inbox", 1)
        .stream("shipments", 1)
        .start()
        .await?;
    let tenants = fixture.tenants(&format!(
        r#"
        [[tenants]]
        name = "acme"
        components = ["{relay}"]
        subscribe = ["orders", "orders.lost", "reminders", "inbox"]
        publish = ["shipments"]
        starting_position = "trim_horizon"
        "#,
        relay = guests::RELAY.path().display(),
    ))?;
    // Native copies, as the native framework writes them: every header its reader delivered
    // (the partition key aside, which its writer leaves out) and the retry count. The second
    // in other cases, as a native map would match them; the third with a partition key too.
    let original = fixture.put("inbox", &json!({"from": "a producer"})).await?;
    let copy = |names: [&str; 3], partition_key: bool| {
        let [key, sequence, shard] = names;
        let mut headers = vec![
            Header::new("x-tenant", "acme"),
            Header::new(sequence, original.clone()),
            Header::new(shard, "shardId-000000000000"),
            Header::new(RETRY_COUNT_HEADER, "1"),
        ];
        if partition_key {
            headers.push(Header::new(key, "pk"));
        }
        envelope::wrap(&headers, br#"{"from":"a native copy"}"#)
    };
    let upper = [
        "PARTITION-KEY",
        "Kinesis-Sequence-Number",
        "KINESIS-SHARD-ID",
    ];
    for data in [
        copy(NATIVE_DELIVERY_HEADERS, false),
        copy(upper, false),
        copy(upper, true),
    ] {
        put_raw(fixture.client(), "inbox", "pk", data).await?;
    }
    let host = fixture
        .host(&tenants)
        .args(&["--log-format", "json"])
        .start()?;
    host.wait_until(WAIT, "four records received", |log| {
        guest_lines(log, "received").len() >= 4
    })
    .await?;
    let received: Vec<(String, String)> = guest_lines(&host.output(), "received")
        .iter()
        .map(|fields| (text(&fields["payload"]), text(&fields["headers"])))
        .collect();
    host.stop().await?;
    let copy_seen = (
        r#"{"from":"a native copy"}"#.to_owned(),
        "x-tenant=acme".to_owned(),
    );
    assert_eq!(
        received,
        [
            (r#"{"from":"a producer"}"#.to_owned(), String::new()),
            copy_seen.clone(),
            copy_seen.clone(),
            copy_seen,
        ],
        "a copy's user headers pass, the positions of the record it copies never"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_stream_keeps_copies_off_the_stream_and_brings_them_back_to_their_owner()
-> anyhow::Result<()> {
    let fixture = Fixture::builder("retry-stream")
        .stream("paced", 1)
        .stream("paced.retry", 1)
        .stream("singly", 1)
        .stream("refunds", 1)
        .stream("refunds.retry", 1)
        .stream("refunds.dead", 1)
        .stream("payouts", 1)
        .stream("audit", 1)
        .dynamo()
        .start()
        .await?;
    let tenants = fixture.tenants(&format!(
        r#"
        [[tenants]]
        name = "acme"
        components = ["{pacer}", "{retries}"]
        subscribe = ["paced", "singly", "refunds", "payouts", "audit"]
        publish = ["paced.retry", "refunds.retry", "refunds.dead"]
        starting_position = "trim_horizon"
        limits = {{ max_hold = "1s" }}

        [tenants.subscriptions.pace]
        retry_stream = "paced.retry"

        [tenants.subscriptions.reconcile]
        retry_stream = "refunds.retry"
        "#,
        pacer = guests::PACER.path().display(),
        retries = guests::SETTLEMENT_RETRIES.path().display(),
    ))?;
    let client = fixture.client();

    // Copies of `pace`'s already in its input stream, from before it had a retry stream: one
    // due now comes back to its owner from there; one due in two minutes, held in front of a
    // record handled behind it for longer than `max_hold`, is carried forward to the retry
    // stream, not to the input stream.
    let far = now_ms() + 120_000;
    for (id, due) in [(1, now_ms()), (3, far)] {
        let mut headers = envelope::origin_headers(&CopyOrigin {
            owner: CopyOwner {
                tenant: "acme".into(),
                app: "pacer".into(),
                subscriber: "pace".into(),
            },
            chain: format!("shardId-000000000000/{id}"),
            first_arrival_ms: now_ms(),
        })
        .to_vec();
        headers.push(Header::new(RETRY_COUNT_HEADER, "1"));
        headers.push(Header::new(DUE_AT_HEADER, due.to_string()));
        let earlier = envelope::wrap(&headers, format!(r#"{{"id":{id}}}"#).as_bytes());
        put_raw(client, "paced", "k", earlier).await?;
    }

    let host = start(&fixture, &tenants, "host.log").await?;
    wait_for_paced(&host, 1, 2).await?;

    // A refund retried until spent: its copies in its retry stream, its dead letter out.
    let (refund_shard, refund) =
        put_json(client, "refunds", &json!({"id": 7, "amount": -40}), None).await?;
    let dead = read_at_least(client, "refunds.dead", 1, WAIT).await?;
    let origin = DeadLetterOrigin::from_headers(&dead[0].envelope().headers)
        .ok_or_else(|| anyhow::anyhow!("a dead letter without its origin"))?;
    assert_eq!(
        (
            origin.stream.as_str(),
            origin.subscriber.as_str(),
            origin.attempts
        ),
        ("refunds.retry", "reconcile", 3),
        "spent on its last copy, read from the retry stream"
    );
    // Both of its streams checkpointed past it, so the crash below leaves nothing of it to
    // read again.
    let ledger = fixture.lease_store("ruststream-acme-ledger._retries").await;
    let last_copy = read_at_least(client, "refunds.retry", 2, WAIT)
        .await?
        .remove(1);
    for (key, sequence) in [
        (format!("refunds:{refund_shard}"), &refund),
        (
            format!("refunds.retry:{}@reconcile", last_copy.shard_id),
            &last_copy.sequence_number,
        ),
    ] {
        let stored = eventually_async(WAIT, async || {
            checkpoint(&ledger, &key).await.as_ref() == Some(sequence)
        })
        .await;
        anyhow::ensure!(
            stored,
            "`{key}` never checkpointed {sequence}: {:?}",
            ledger.list().await?
        );
    }

    // A step asking for a copy in 20 s: the copy is in the retry stream, the waiting copy in
    // front of it carried there, and the original's checkpoint stored before the host is
    // killed.
    let (shard, step) = put_json(
        client,
        "paced",
        &json!({"id": 2, "after_ms": AFTER_MS}),
        None,
    )
    .await?;
    let copy = read_at_least(client, "paced.retry", 1, WAIT)
        .await?
        .remove(0);
    let due = copy
        .envelope()
        .due_at_ms
        .ok_or_else(|| anyhow::anyhow!("the copy carries no due time"))?;
    let leases = fixture.lease_store("ruststream-acme-pacer").await;
    let input_key = format!("paced:{shard}");
    let stored = eventually_async(WAIT, async || {
        checkpoint(&leases, &input_key).await.as_ref() == Some(&step)
    })
    .await;
    anyhow::ensure!(stored, "the original's checkpoint was never stored");
    host.signal("KILL")?;
    host.exit(WAIT).await?;
    anyhow::ensure!(
        now_ms() + 5_000 < due,
        "the host was killed too late to tell an early copy from one on time"
    );

    // Started again under the same owner: the copy held the retry stream's checkpoint, so it
    // is read again, and handled once, at its due time; the original is not.
    let host = start(&fixture, &tenants, "again.log").await?;
    wait_for_paced(&host, 2, 2).await?;
    let seen_at = now_ms();
    assert!(
        seen_at >= due,
        "the copy was handled {} ms before its due time",
        due - seen_at
    );
    let scrape = host.scrape().await?;
    let retry_labels = [
        ("subscriber", "pace"),
        ("stream", "paced.retry"),
        ("shard", shard.as_str()),
    ];
    assert!(
        scrape
            .max("ruststream_behind_latest_seconds", &retry_labels)
            .is_some(),
        "the retry stream's shard has its own series"
    );
    let log = host.stop().await?;
    let paced: Vec<(u64, u64)> = guest_lines(&log, "paced")
        .iter()
        .filter_map(|fields| Some((number(&fields["step.id"])?, number(&fields["attempt"])?)))
        .collect();
    assert_eq!(
        paced,
        [(2, 2)],
        "after the crash: the copy once, not its original"
    );

    // The input streams hold no copy but the ones from before; the retry streams hold them all.
    let copies = |stream: &[ReadBack]| -> Vec<(String, u32)> {
        stream
            .iter()
            .map(ReadBack::envelope)
            .filter(|read| read.retry_count > 0)
            .map(|read| {
                let owner = read.copy.map(|c| c.owner.subscriber.clone());
                (owner.unwrap_or_default(), read.retry_count)
            })
            .collect()
    };
    let input = read_all(client, "paced").await?;
    assert_eq!(input.len(), 3, "the earlier copies and the step");
    assert_eq!(
        copies(&input),
        [("pace".to_owned(), 1), ("pace".to_owned(), 1)],
        "only the earlier copies"
    );
    assert_eq!(copies(&read_all(client, "refunds").await?), []);
    assert_eq!(
        copies(&read_all(client, "refunds.retry").await?),
        [("reconcile".to_owned(), 1), ("reconcile".to_owned(), 2)]
    );
    let retried = read_all(client, "paced.retry").await?;
    assert_eq!(
        copies(&retried),
        [("pace".to_owned(), 1), ("pace".to_owned(), 1)]
    );
    let carried = retried[1].envelope();
    assert_eq!(
        (&carried.payload[..], carried.due_at_ms),
        (&br#"{"id":3}"#[..], Some(far)),
        "the waiting copy, carried with its due time"
    );

    // The retry stream's lease is the subscription's own, its checkpoint past the copy.
    let retry_key = format!("paced.retry:{}@pace", copy.shard_id);
    assert_eq!(
        checkpoint(&leases, &retry_key).await,
        Some(copy.sequence_number),
        "{:?}",
        leases.list().await?
    );
    assert_eq!(checkpoint(&leases, &input_key).await, Some(step));
    Ok(())
}

/// Starts a host of `tenants` with DynamoDB leases under a fixed owner, logging JSON to `log`;
/// waits until it reads every shard (seven: `paced`, `singly`, `refunds`, `payouts`, `audit`
/// and the two retry streams).
async fn start(
    fixture: &Fixture,
    tenants: &std::path::Path,
    log: &str,
) -> anyhow::Result<BinaryHost> {
    let host = fixture
        .host(tenants)
        .log(log)
        .dynamo_leases()
        .owner("retry-host")
        .args(&["--log-format", "json"])
        .start()?;
    host.wait_until(WAIT, "seven shards read", |log| {
        log.matches("reading shard").count() >= 7
    })
    .await?;
    Ok(host)
}

/// Waits until `pace` logged step `id` at `attempt`.
async fn wait_for_paced(host: &BinaryHost, id: u64, attempt: u64) -> anyhow::Result<()> {
    host.wait_until(
        WAIT + Duration::from_millis(AFTER_MS),
        &format!("step {id} at attempt {attempt}"),
        |log| {
            guest_lines(log, "paced").iter().any(|fields| {
                number(&fields["step.id"]) == Some(id)
                    && number(&fields["attempt"]) == Some(attempt)
            })
        },
    )
    .await
}

/// The fields of each line of the host's JSON log whose message is `message`.
fn guest_lines(log: &str, message: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["message"] == message)
        .map(|line| line["fields"].clone())
        .collect()
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn number(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| value.as_str()?.parse().ok())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// The stored checkpoint of lease `key`.
async fn checkpoint(store: &dyn LeaseStore, key: &str) -> Option<String> {
    let rows = store.list().await.ok()?;
    rows.into_iter()
        .find(|row| row.key == key)
        .and_then(|row| row.checkpoint)
}
