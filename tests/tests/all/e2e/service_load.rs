//! The load a host puts on Kinesis does not grow with the number of apps reading a stream: its
//! apps list the stream's shards once between them per round, and read each shard at most five
//! times a second together, as Kinesis allows. A recording proxy in front of the server counts
//! the calls.

use std::time::Duration;

use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::guests;
use ruststream_tests::proxy::{RecordingProxy, SignedRequest};
use ruststream_tests::wait::eventually;

/// A host of `tenants` auditors on `ledger` (of `shards` shards), reading through a recording
/// proxy, once every shard of every tenant is being read.
struct Apps {
    _fixture: Fixture,
    proxy: RecordingProxy,
    host: BinaryHost,
}

impl Apps {
    async fn start(name: &str, tenants: usize, shards: i32) -> anyhow::Result<Self> {
        let fixture = Fixture::builder(name)
            .stream("ledger", shards)
            .start()
            .await?;
        let proxy = RecordingProxy::start(&format!("127.0.0.1:{}", fixture.kinesis.port())).await?;
        let audit = guests::LEDGER_AUDIT.path();
        let config: String = (0..tenants)
            .map(|n| {
                format!(
                    "[[tenants]]\nname = \"t{n}\"\ncomponents = [\"{}\"]\nsubscribe = [\"ledger\"]\n",
                    audit.display()
                )
            })
            .collect();
        let host = fixture
            .host(&fixture.tenants(&config)?)
            .kinesis_endpoint(&proxy.endpoint())
            .start()?;
        host.wait_until(Duration::from_secs(90), "every shard read", |log| {
            log.matches("reading shard").count() >= tenants * shards as usize
        })
        .await?;
        Ok(Self {
            _fixture: fixture,
            proxy,
            host,
        })
    }

    fn output(&self) -> String {
        self.host.output()
    }

    fn calls(&self, operation: &str) -> Vec<SignedRequest> {
        let target = format!(".{operation}");
        self.proxy
            .requests()
            .into_iter()
            .filter(|r| r.target.ends_with(&target))
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_on_one_stream_share_its_shard_listing() -> anyhow::Result<()> {
    const TENANTS: usize = 8;
    let apps = Apps::start("listing", TENANTS, 2).await?;
    let listings = apps.calls("ListShards").len();
    // Apps started within half a round (5 s) of each other share one listing; the compile they
    // all wait on makes them start together.
    assert!(
        (1..=2).contains(&listings),
        "{listings} ListShards calls for {TENANTS} apps' first rounds"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_on_one_shard_read_it_five_times_a_second_together() -> anyhow::Result<()> {
    // Each polls every 200 ms: alone, six would read the shard 30 times a second.
    const TENANTS: usize = 6;
    const READS: usize = 30;
    let apps = Apps::start("pacing", TENANTS, 1).await?;
    let before = apps.calls("GetRecords").len();
    let enough = eventually(Duration::from_secs(60), || {
        apps.calls("GetRecords").len() >= before + READS
    })
    .await;
    anyhow::ensure!(enough, "the shard is not being read: {}", apps.output());
    let reads = apps.calls("GetRecords");
    let window = &reads[before..];
    let span = window
        .last()
        .zip(window.first())
        .map(|(last, first)| last.at.duration_since(first.at))
        .unwrap_or_default();
    let per_second = (window.len() - 1) as f64 / span.as_secs_f64();
    assert!(
        per_second <= 5.5,
        "{} reads in {span:?}: {per_second:.1} a second",
        window.len()
    );
    Ok(())
}
