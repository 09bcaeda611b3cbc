//! Shards never stall: a reader whose iterator expired keeps reading, whatever else wakes its
//! worker meanwhile.

use std::time::Duration;

use ruststream_tests::e2e::{TestHost, put_json};
use ruststream_tests::faults::{Fault, Faults};
use ruststream_tests::guests;
use ruststream_tests::servers::LocalKinesis;
use ruststream_tests::wait::eventually;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_iterator_while_a_copy_comes_due_keeps_the_shard_reading() -> anyhow::Result<()>
{
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream("paced", 1).await?;
    let client = kinesis.client().await;
    let faults = Faults::new();
    let host = TestHost::new(faults.kinesis_client(&kinesis.endpoint()).await, "host-a")?;
    let app = host.run_in_memory(guests::PACER, 1).await?;

    // A copy due in 3 s, read early: it waits in the pipeline, holding the checkpoint.
    put_json(&client, "paced", &json!({"id": 1, "after_ms": 3000}), None).await?;
    let waiting = app
        .wait_for(WAIT, |s| {
            s[0].shards.values().any(|shard| {
                shard.held_at.is_some() && shard.checkpoint.is_some() && shard.delivered >= 2
            })
        })
        .await;
    assert!(waiting, "{:#?}", app.status());

    // The next read finds its iterator expired, and renewing it takes longer than the copy
    // has left to wait: the copy comes due while the shard is being reopened.
    faults.inject(&["GetRecords"], 1, Fault::expired_iterator());
    faults.inject(
        &["GetShardIterator"],
        1,
        Fault::Delay(Duration::from_secs(4)),
    );
    let copy = eventually(WAIT, || {
        host.deliveries.all().iter().any(|r| r.attempt == 2)
    })
    .await;
    assert!(copy, "the copy was delivered: {:#?}", host.deliveries.all());
    assert_eq!(faults.injected("GetRecords"), 1, "the iterator did expire");

    // The shard reads on.
    put_json(&client, "paced", &json!({"id": 2}), None).await?;
    let read_on = eventually(WAIT, || host.deliveries.len() >= 3).await;
    assert!(read_on, "the shard stalled: {:#?}", app.status());
    assert_eq!(faults.injected("GetShardIterator"), 1, "renewed once");
    app.shutdown().await;
    Ok(())
}
