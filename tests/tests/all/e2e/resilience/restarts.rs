//! Nothing is skipped across restarts and reshards: a shard opened at the tip pins where it
//! opened, and the children of a reshard that happened before the app are not replayed.

use std::collections::BTreeSet;
use std::time::Duration;

use ruststream_kinesis::runner::ShardState;
use ruststream_runtime::Outcome;
use ruststream_tests::e2e::{Servers, TestHost, put_json};
use ruststream_tests::guests;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn entry(id: u64, amount: i64) -> serde_json::Value {
    json!({"id": id, "amount": amount})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_held_before_the_first_checkpoint_is_read_again_after_a_restart()
-> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-pinned").await?;
    let (client, store) = (&servers.client, &servers.store);
    let first = TestHost::new(client.clone(), "host-a")?;
    let app = first.run(guests::SETTLEMENT, store.clone(), 1).await?;
    // The shard opened at the tip; its first record is held, so nothing is ever checkpointed.
    let (_, refund) = put_json(client, "ledger", &entry(1, -5), None).await?;
    let (_, booked) = put_json(client, "ledger", &entry(2, 5), None).await?;
    let outcomes: Vec<Outcome> = first
        .deliveries
        .wait_for(2, WAIT)
        .await?
        .iter()
        .map(|r| r.outcome)
        .collect();
    assert_eq!(outcomes, [Outcome::Retry, Outcome::Ack]);
    app.shutdown().await;

    // Restarted, the shard opens where it first opened, not at the new tip.
    let second = TestHost::new(client.clone(), "host-b")?;
    let app = second.run(guests::SETTLEMENT, store.clone(), 1).await?;
    let again = second.deliveries.wait_for(2, WAIT).await?;
    let sequences: Vec<&str> = again.iter().map(|r| r.sequence_number.as_str()).collect();
    assert_eq!(sequences, [refund.as_str(), booked.as_str()]);
    app.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_of_a_split_before_the_app_started_are_read_from_the_tip() -> anyhow::Result<()> {
    let servers = Servers::start("ledger", 1, "ruststream-old-split").await?;
    let (client, store) = (&servers.client, &servers.store);
    let (parent, _) = put_json(client, "ledger", &entry(1, 1), None).await?;
    client
        .split_shard()
        .stream_name("ledger")
        .shard_to_split(&parent)
        .new_starting_hash_key("170141183460469231731687303715884105728")
        .send()
        .await?;
    let low_key = "0";
    let high_key = "200000000000000000000000000000000000000";
    for (id, key) in [(2, low_key), (3, high_key)] {
        put_json(client, "ledger", &entry(id, 1), Some(key)).await?;
    }

    // A subscription starting at the tip, on a stream resharded before it ever ran.
    let host = TestHost::new(client.clone(), "host-a")?;
    let app = host.run(guests::SETTLEMENT, store.clone(), 2).await?;
    let settled = app
        .wait_for(WAIT, |s| s[0].count(&ShardState::Finished) == 1)
        .await;
    assert!(settled, "{:#?}", app.status());
    let mut fresh = BTreeSet::new();
    for (id, key) in [(4, low_key), (5, high_key)] {
        fresh.insert(
            put_json(client, "ledger", &entry(id, 1), Some(key))
                .await?
                .1,
        );
    }
    // The fresh records are the markers: an older record stands before its shard's fresh
    // one, so it would have been delivered first.
    let fresh_list: Vec<String> = fresh.iter().cloned().collect();
    host.deliveries
        .wait_for_sequences(&fresh_list, WAIT)
        .await?;
    app.shutdown().await;
    let delivered: BTreeSet<String> = host
        .deliveries
        .all()
        .into_iter()
        .map(|r| r.sequence_number)
        .collect();
    assert_eq!(
        delivered, fresh,
        "only the records written after it started"
    );
    Ok(())
}
