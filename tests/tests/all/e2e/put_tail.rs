//! `put` and `tail` through the library against the local Kinesis server: where each record
//! went, and each record read, are written to the writer the caller gives (the binary gives
//! stdout), and a stream that does not exist is named in a typed error.

use std::collections::BTreeSet;

use aws_sdk_kinesis::config::{Credentials, SharedCredentialsProvider};
use ruststream_fleet::aws::AwsOptions;
use ruststream_tests::fixture::Fixture;
use ruststream_tools::put::{PutOptions, put};
use ruststream_tools::tail::{TailError, TailFrom, TailOptions, tail};
use serde_json::Value;

/// The fixture's Kinesis, with credentials in hand (the test's environment has none).
fn aws(fixture: &Fixture) -> AwsOptions {
    let credentials = Credentials::new("test", "test", None, None, "put-tail-test");
    AwsOptions {
        region: Some("us-east-1".to_owned()),
        kinesis_endpoint: Some(fixture.kinesis.endpoint()),
        credentials: Some(SharedCredentialsProvider::new(credentials)),
        ..AwsOptions::default()
    }
}

/// `tail` of `stream` from its oldest record to its tip, as written to the writer.
async fn tail_to(fixture: &Fixture, stream: &str) -> Result<String, TailError> {
    let options = TailOptions {
        stream: stream.to_owned(),
        from: TailFrom::Horizon,
        follow: false,
        aws: aws(fixture),
    };
    let mut shown = Vec::new();
    tail(options, &mut shown).await?;
    Ok(String::from_utf8_lossy(&shown).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_and_tail_write_to_the_writer_they_are_given() -> anyhow::Result<()> {
    let fixture = Fixture::builder("put-tail")
        .stream("orders", 2)
        .start()
        .await?;
    let options = PutOptions {
        stream: "orders".to_owned(),
        records: vec![r#"{"id": 1}"#.to_owned(), r#"{"id": 2}"#.to_owned()],
        file: None,
        key: None,
        headers: vec!["trace=abc".to_owned()],
        aws: aws(&fixture),
    };
    let mut placed = Vec::new();
    assert_eq!(put(options, &mut placed).await?, 2);
    let placed = String::from_utf8(placed)?;
    let sequences: BTreeSet<&str> = placed
        .lines()
        .filter_map(|line| line.strip_prefix("shardId-")?.split_once(' '))
        .map(|(_, sequence)| sequence)
        .collect();
    assert_eq!(
        sequences.len(),
        2,
        "a `SHARD SEQUENCE` line per record: {placed}"
    );

    let shown = tail_to(&fixture, "orders").await?;
    let records: Vec<Value> = shown
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let read: BTreeSet<&str> = records
        .iter()
        .filter_map(|record| record["sequence"].as_str())
        .collect();
    assert_eq!(read, sequences, "{shown}");
    let ids: BTreeSet<_> = records
        .iter()
        .filter_map(|r| r["payload"]["id"].as_u64())
        .collect();
    assert_eq!(ids, BTreeSet::from([1, 2]), "{shown}");
    assert!(
        records.iter().all(|r| r["headers"]["trace"] == "abc"),
        "{shown}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_of_a_stream_that_does_not_exist_names_it() -> anyhow::Result<()> {
    let fixture = Fixture::builder("tail-gone").start().await?;
    let error = tail_to(&fixture, "nowhere").await;
    let Err(TailError::List(error)) = error else {
        anyhow::bail!("a typed listing error, not {error:?}");
    };
    assert!(
        error
            .to_string()
            .contains("stream `nowhere` does not exist"),
        "{error}"
    );
    Ok(())
}
