//! The local-server harness against the real servers: kinesis-local and dynalite on loopback,
//! isolation between instances, and faults injected at the SDK seam reaching the SDK as typed
//! errors.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_kinesis::config::retry::RetryConfig;
use aws_sdk_kinesis::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::{PutRecordsRequestEntry, ShardIteratorType};
use ruststream_tests::faults::{Fault, Faults};
use ruststream_tests::servers::{LocalDynamo, LocalKinesis, sdk_config};
use ruststream_tests::wait::eventually_async;
use tokio::net::TcpStream;

#[tokio::test]
async fn kinesis_round_trips_a_record_through_a_two_shard_stream() -> Result<()> {
    let kinesis = LocalKinesis::start().await?;
    assert!(kinesis.endpoint().starts_with("http://127.0.0.1:"));
    kinesis.create_stream("orders", 2).await?;
    let client = kinesis.client().await;

    let shards = client.list_shards().stream_name("orders").send().await?;
    assert_eq!(shards.shards().len(), 2);
    let put = client
        .put_record()
        .stream_name("orders")
        .partition_key("order-1")
        .data(Blob::new("hello"))
        .send()
        .await?;
    assert!(
        shards
            .shards()
            .iter()
            .any(|s| s.shard_id() == put.shard_id())
    );

    let records = read_shard(&client, "orders", put.shard_id()).await?;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].data().as_ref(), b"hello");
    assert_eq!(records[0].partition_key(), Some("order-1"));
    assert_eq!(records[0].sequence_number(), put.sequence_number());
    Ok(())
}

#[tokio::test]
async fn dynamo_enforces_conditional_writes_as_typed_errors() -> Result<()> {
    let dynamo = LocalDynamo::start().await?;
    assert!(dynamo.endpoint().starts_with("http://127.0.0.1:"));
    let client = dynamo.client().await;
    create_lease_table(&client, "leases").await?;

    let claim = || {
        client
            .put_item()
            .table_name("leases")
            .item("lease_key", AttributeValue::S("shard-0".into()))
            .item("owner", AttributeValue::S("a".into()))
            .item("version", AttributeValue::N("1".into()))
            .condition_expression("attribute_not_exists(lease_key)")
    };
    claim().send().await?;
    let taken = claim().send().await.expect_err("the lease already exists");
    assert!(
        taken
            .as_service_error()
            .is_some_and(|e| e.is_conditional_check_failed_exception()),
        "{}",
        aws_sdk_dynamodb::error::DisplayErrorContext(&taken)
    );

    let steal_from_version_1 = || {
        client
            .update_item()
            .table_name("leases")
            .key("lease_key", AttributeValue::S("shard-0".into()))
            .update_expression("SET #owner = :owner, version = :next")
            .condition_expression("version = :expected")
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_values(":owner", AttributeValue::S("b".into()))
            .expression_attribute_values(":next", AttributeValue::N("2".into()))
            .expression_attribute_values(":expected", AttributeValue::N("1".into()))
    };
    steal_from_version_1().send().await?;
    let stale = steal_from_version_1()
        .send()
        .await
        .expect_err("version is 2 now");
    assert!(
        stale
            .as_service_error()
            .is_some_and(|e| e.is_conditional_check_failed_exception()),
        "{}",
        aws_sdk_dynamodb::error::DisplayErrorContext(&stale)
    );

    let item = client
        .get_item()
        .table_name("leases")
        .key("lease_key", AttributeValue::S("shard-0".into()))
        .consistent_read(true)
        .send()
        .await?
        .item
        .context("the lease item is gone")?;
    assert_eq!(item.get("owner"), Some(&AttributeValue::S("b".into())));
    assert_eq!(item.get("version"), Some(&AttributeValue::N("2".into())));
    Ok(())
}

#[tokio::test]
async fn kinesis_instances_are_isolated_and_stop_when_dropped() -> Result<()> {
    let (a, b) = tokio::try_join!(LocalKinesis::start(), LocalKinesis::start())?;
    assert_ne!(a.port(), b.port());
    // The same name in both: neither sees the other's stream.
    a.create_stream("shared-name", 1).await?;
    b.create_stream("shared-name", 3).await?;
    a.create_stream("only-in-a", 1).await?;
    assert_eq!(shard_count(&a, "shared-name").await?, 1);
    assert_eq!(shard_count(&b, "shared-name").await?, 3);
    let b_streams = b.client().await.list_streams().send().await?;
    assert_eq!(b_streams.stream_names(), ["shared-name"]);

    let a_port = a.port();
    drop(a);
    wait_until_refused(a_port).await?;
    // b is untouched by a's death.
    assert_eq!(shard_count(&b, "shared-name").await?, 3);
    Ok(())
}

#[tokio::test]
async fn injected_get_records_faults_are_typed_sdk_errors() -> Result<()> {
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream("faults", 1).await?;
    let faults = Faults::new();
    let client = kinesis_client(&kinesis.endpoint(), &faults, RetryConfig::disabled()).await;
    let put = client
        .put_record()
        .stream_name("faults")
        .partition_key("k")
        .data(Blob::new("payload"))
        .send()
        .await?;
    let iterator = trim_horizon(&client, "faults", put.shard_id()).await?;

    faults.inject(&["GetRecords"], 1, Fault::throughput_exceeded());
    faults.inject(&["GetRecords"], 1, Fault::expired_iterator());
    assert_eq!(faults.pending_faults(), 2);
    let get = || client.get_records().shard_iterator(&iterator).send();
    let throttled = get().await.expect_err("first GetRecords is throttled");
    assert!(
        throttled
            .as_service_error()
            .is_some_and(|e| e.is_provisioned_throughput_exceeded_exception()),
        "{}",
        DisplayErrorContext(&throttled)
    );
    let expired = get()
        .await
        .expect_err("second GetRecords has an expired iterator");
    assert!(
        expired
            .as_service_error()
            .is_some_and(|e| e.is_expired_iterator_exception()),
        "{}",
        DisplayErrorContext(&expired)
    );
    let records = get().await?;
    assert_eq!(records.records().len(), 1);
    assert_eq!(records.records()[0].data().as_ref(), b"payload");

    assert_eq!(faults.pending_faults(), 0);
    assert_eq!(
        (faults.requests("GetRecords"), faults.injected("GetRecords")),
        (3, 2)
    );
    assert_eq!(
        (faults.requests("PutRecord"), faults.injected("PutRecord")),
        (1, 0)
    );
    assert_eq!(faults.requests("GetShardIterator"), 1);
    assert_eq!(faults.requests("ListShards"), 0);
    Ok(())
}

#[tokio::test]
async fn injected_500s_are_retried_by_the_sdk_and_never_reach_the_server() -> Result<()> {
    let kinesis = LocalKinesis::start().await?;
    kinesis.create_stream("flaky", 1).await?;
    let faults = Faults::new();
    // Standard retries (3 attempts) with a short backoff so the test stays fast.
    let fast_retry = RetryConfig::standard().with_initial_backoff(Duration::from_millis(5));
    let retrying = kinesis_client(&kinesis.endpoint(), &faults, fast_retry).await;
    let once = kinesis_client(&kinesis.endpoint(), &faults, RetryConfig::disabled()).await;

    faults.inject(&["PutRecord", "PutRecords"], 2, Fault::internal_failure());
    let put = retrying
        .put_record()
        .stream_name("flaky")
        .partition_key("k")
        .data(Blob::new("survived"))
        .send()
        .await?;
    assert_eq!(
        (faults.requests("PutRecord"), faults.injected("PutRecord")),
        (3, 2)
    );

    faults.inject(&["PutRecord", "PutRecords"], 1, Fault::internal_failure());
    let entry = PutRecordsRequestEntry::builder()
        .partition_key("k")
        .data(Blob::new("lost"))
        .build()?;
    let failed = once
        .put_records()
        .stream_name("flaky")
        .records(entry)
        .send()
        .await
        .expect_err("the only attempt gets a 500");
    assert_eq!(
        failed.raw_response().map(|r| r.status().as_u16()),
        Some(500)
    );
    assert_eq!(failed.code(), Some("InternalFailure"));
    assert_eq!(
        (faults.requests("PutRecords"), faults.injected("PutRecords")),
        (1, 1)
    );

    // Only the forwarded attempt stored a record.
    let stored = read_shard(&kinesis.client().await, "flaky", put.shard_id()).await?;
    let data: Vec<&[u8]> = stored.iter().map(|r| r.data().as_ref()).collect();
    assert_eq!(data, [b"survived".as_slice()]);
    Ok(())
}

/// A Kinesis client of `endpoint` through `faults`, with the harness configuration but `retry`.
async fn kinesis_client(
    endpoint: &str,
    faults: &Faults,
    retry: RetryConfig,
) -> aws_sdk_kinesis::Client {
    let config = aws_sdk_kinesis::config::Builder::from(&sdk_config(endpoint).await)
        .retry_config(retry)
        .http_client(faults.http_client())
        .build();
    aws_sdk_kinesis::Client::from_conf(config)
}

async fn trim_horizon(
    client: &aws_sdk_kinesis::Client,
    stream: &str,
    shard: &str,
) -> Result<String> {
    client
        .get_shard_iterator()
        .stream_name(stream)
        .shard_id(shard)
        .shard_iterator_type(ShardIteratorType::TrimHorizon)
        .send()
        .await?
        .shard_iterator
        .context("GetShardIterator returned no iterator")
}

/// Every record of `shard`, read from the trim horizon until a read comes back empty.
async fn read_shard(
    client: &aws_sdk_kinesis::Client,
    stream: &str,
    shard: &str,
) -> Result<Vec<aws_sdk_kinesis::types::Record>> {
    let mut iterator = trim_horizon(client, stream, shard).await?;
    let mut records = Vec::new();
    loop {
        let page = client
            .get_records()
            .shard_iterator(&iterator)
            .send()
            .await?;
        if page.records().is_empty() {
            return Ok(records);
        }
        records.extend_from_slice(page.records());
        iterator = page
            .next_shard_iterator
            .context("open shard without next iterator")?;
    }
}

async fn shard_count(kinesis: &LocalKinesis, stream: &str) -> Result<i32> {
    let summary = kinesis
        .client()
        .await
        .describe_stream_summary()
        .stream_name(stream)
        .send()
        .await?;
    Ok(summary
        .stream_description_summary()
        .context("no stream summary")?
        .open_shard_count())
}

/// Creates `table` with the lease layout and waits until it is active: dynalite answers
/// CreateTable before the table accepts writes, even with `--createTableMs 0`.
async fn create_lease_table(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<()> {
    ruststream_kinesis::DynamoLeaseStore::new(client.clone(), table)
        .create_table_if_missing()
        .await?;
    Ok(())
}

/// Waits (at most 10 s) until nothing accepts connections on `port` any more.
async fn wait_until_refused(port: u16) -> Result<()> {
    let refused = eventually_async(Duration::from_secs(10), async || {
        TcpStream::connect(("127.0.0.1", port)).await.is_err()
    })
    .await;
    ensure!(refused, "port {port} still accepts after drop");
    Ok(())
}
