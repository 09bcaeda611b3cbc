//! Records per second through the ledger component on a local Kinesis server, beside a bare
//! aws-sdk-kinesis GetRecords loop reading the same records in the same run (the source's own
//! limit).
//!
//! `cargo bench -p ruststream-tests --bench kinesis_throughput`. Each round starts a fresh
//! server (kinesis-local's PutRecords slows down as a shard grows) and measures:
//!
//! - put→handled: a host reads the stream at its tip while the records are put; records/s from
//!   the first PutRecords to the last record handled, and how long after the last put the host
//!   caught up;
//! - host read: a second host reads the same records from the horizon; records/s from its start
//!   (lease, shard listing, iterator included) to the last record handled;
//! - bare read: a plain GetRecords loop over the same records; records/s.
//!
//! The ratio host read / bare read says how close the host comes to the source's own limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::{PutRecordsRequestEntry, ShardIteratorType};
use ruststream_kinesis::{Deployment, MemoryLeaseStore, runner::OperatorSettings};
use ruststream_runtime::app::StartPosition;
use ruststream_tests::e2e::TestHost;
use ruststream_tests::guests;
use ruststream_tests::servers::LocalKinesis;

const RECORDS: usize = 4000;
const ROUNDS: usize = 3;
/// The stream the ledger component subscribes to.
const STREAM: &str = "ledger";
const WAIT: Duration = Duration::from_secs(300);

struct Round {
    put: f64,
    end_to_end: f64,
    lag: Duration,
    host_read: f64,
    bare_read: f64,
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(async {
            let mut rounds = Vec::new();
            for _ in 0..ROUNDS {
                rounds.push(round().await?);
            }
            report(&rounds);
            Ok(())
        })
}

async fn round() -> anyhow::Result<Round> {
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream(STREAM, 1).await?;
    let client = kinesis.client().await;

    let tip = TestHost::new(client.clone(), "bench-tip")?;
    let app = tip.run_in_memory(guests::BENCH_LEDGER, 1).await?;
    let started = Instant::now();
    put_all(&client).await?;
    let put = started.elapsed();
    tip.deliveries.wait_for(RECORDS, WAIT).await?;
    let end_to_end = started.elapsed();
    app.shutdown().await;

    let horizon = TestHost::new(client.clone(), "bench-horizon")?;
    let mut deployment = Deployment::new(
        horizon.load(guests::BENCH_LEDGER).await?,
        Arc::new(MemoryLeaseStore::new()),
    );
    let from_horizon = OperatorSettings {
        start: Some(StartPosition::Horizon),
        ..OperatorSettings::default()
    };
    deployment.settings.insert("classify".into(), from_horizon);
    let started = Instant::now();
    let app = horizon.host.start(deployment)?;
    horizon.deliveries.wait_for(RECORDS, WAIT).await?;
    let host_read = started.elapsed();
    app.shutdown().await;

    let bare_read = bare_read(&client).await?;
    let rate = |elapsed: Duration| RECORDS as f64 / elapsed.as_secs_f64();
    Ok(Round {
        put: rate(put),
        end_to_end: rate(end_to_end),
        lag: end_to_end - put,
        host_read: rate(host_read),
        bare_read: rate(bare_read),
    })
}

/// Reads the stream from the horizon with a plain GetRecords loop; the time it took.
async fn bare_read(client: &aws_sdk_kinesis::Client) -> anyhow::Result<Duration> {
    let shards = ruststream_kinesis::kinesis::list_shards(client, STREAM).await?;
    let shard = &shards
        .first()
        .ok_or_else(|| anyhow::anyhow!("no shard"))?
        .shard_id;
    let started = Instant::now();
    let mut iterator = client
        .get_shard_iterator()
        .stream_name(STREAM)
        .shard_id(shard)
        .shard_iterator_type(ShardIteratorType::TrimHorizon)
        .send()
        .await?
        .shard_iterator;
    let mut read = 0;
    while read < RECORDS {
        let Some(it) = iterator.take() else { break };
        let page = client
            .get_records()
            .shard_iterator(it)
            .limit(10_000)
            .send()
            .await?;
        read += page.records().len();
        iterator = page.next_shard_iterator;
    }
    anyhow::ensure!(read >= RECORDS, "read {read} of {RECORDS}");
    Ok(started.elapsed())
}

async fn put_all(client: &aws_sdk_kinesis::Client) -> anyhow::Result<()> {
    let ids: Vec<usize> = (0..RECORDS).collect();
    for chunk in ids.chunks(500) {
        let entries = chunk
            .iter()
            .map(|i| {
                let data = format!(
                    r#"{{"id":{},"amount":{},"account":"DE{:020}","currency":"EUR","memo":"invoice {i}"}}"#,
                    i + 1,
                    i % 9000 + 1,
                    i * 7919
                );
                PutRecordsRequestEntry::builder()
                    .partition_key(format!("account-{}", i % 64))
                    .data(Blob::new(data))
                    .build()
                    .map_err(anyhow::Error::from)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let out = client
            .put_records()
            .stream_name(STREAM)
            .set_records(Some(entries))
            .send()
            .await?;
        anyhow::ensure!(
            out.failed_record_count().unwrap_or(0) == 0,
            "PutRecords dropped records"
        );
    }
    Ok(())
}

fn report(rounds: &[Round]) {
    println!(
        "\nkinesis throughput: {RECORDS} records per round, {ROUNDS} rounds, kinesis-local on loopback\n"
    );
    println!(
        "{:<6} {:>10} {:>14} {:>12} {:>12} {:>12} {:>8}",
        "round", "put rec/s", "put→handled/s", "lag", "host read/s", "bare read/s", "ratio"
    );
    for (i, r) in rounds.iter().enumerate() {
        println!(
            "{:<6} {:>10.0} {:>14.0} {:>12.0?} {:>12.0} {:>12.0} {:>7.2}×",
            i + 1,
            r.put,
            r.end_to_end,
            r.lag,
            r.host_read,
            r.bare_read,
            r.host_read / r.bare_read
        );
    }
    let mut ratios: Vec<f64> = rounds.iter().map(|r| r.host_read / r.bare_read).collect();
    ratios.sort_by(f64::total_cmp);
    println!(
        "\nmedian ratio (host read / bare read): {:.2}×",
        ratios[ratios.len() / 2]
    );
}
