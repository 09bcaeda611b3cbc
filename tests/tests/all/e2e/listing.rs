//! Apps on one stream in one host list its shards once between them per round, not once each:
//! the load a host puts on Kinesis does not grow with the number of apps reading a stream.

use std::time::Duration;

use ruststream_tests::guests;
use ruststream_tests::process::run_host_at;
use ruststream_tests::proxy::RecordingProxy;
use ruststream_tests::servers::LocalKinesis;
use ruststream_tests::wait::eventually;

const TENANTS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_on_one_stream_share_its_shard_listing() -> anyhow::Result<()> {
    let kinesis = LocalKinesis::start().await?;
    let proxy = RecordingProxy::start(&format!("127.0.0.1:{}", kinesis.port())).await?;
    kinesis.create_stream("ledger", 2).await?;
    let dir = std::env::temp_dir().join(format!("ruststream-listing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let audit = guests::LEDGER_AUDIT.path();
    let tenants: String = (0..TENANTS)
        .map(|n| {
            format!(
                "[[tenants]]\nname = \"t{n}\"\ncomponents = [\"{}\"]\nsubscribe = [\"ledger\"]\n",
                audit.display()
            )
        })
        .collect();
    let config = dir.join("tenants.toml");
    std::fs::write(&config, tenants)?;
    let log = dir.join("host.log");
    let host = run_host_at(&config, &proxy.endpoint(), &log, &[])?;
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    let reading = eventually(Duration::from_secs(90), || {
        output().matches("reading shard").count() >= 2 * TENANTS
    })
    .await;
    anyhow::ensure!(reading, "not every shard opened: {}", output());
    let listings = proxy
        .requests()
        .iter()
        .filter(|r| r.target.ends_with(".ListShards"))
        .count();
    // Apps started within half a round (5 s) of each other share one listing; the compile they
    // all wait on makes them start together.
    assert!(
        (1..=2).contains(&listings),
        "{listings} ListShards calls for {TENANTS} apps' first rounds"
    );
    drop(host);
    Ok(())
}
