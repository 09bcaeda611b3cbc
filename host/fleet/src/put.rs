//! `ruststream put STREAM`: JSON records written to a stream, with headers (in the `RSK2`
//! envelope the host reads) and a partition key, from arguments or a JSON-lines file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use ruststream_runtime::envelope;
use ruststream_runtime::record::Header;

use crate::aws::AwsOptions;

/// Records per PutRecords call: Kinesis's own maximum.
const PER_CALL: usize = 500;
/// Tries of the records a call did not take (throttled), with a growing pause between.
const TRIES: u32 = 5;

/// What `ruststream put` writes, and where.
#[derive(Debug, Clone)]
pub struct PutOptions {
    /// The stream.
    pub stream: String,
    /// Records, each a JSON text.
    pub records: Vec<String>,
    /// A file of records, one JSON text per line (instead of `records`).
    pub file: Option<PathBuf>,
    /// The partition key of every record (default: each record's position).
    pub key: Option<String>,
    /// Headers of every record, `NAME=VALUE` (not `x-ruststream-*`).
    pub headers: Vec<String>,
    /// Where Kinesis is.
    pub aws: AwsOptions,
}

/// Writes each record (arguments, or the lines of `--file`), in order, and prints where each
/// went.
///
/// # Errors
/// A record that is not JSON (naming it), a reserved header, or records Kinesis would not take
/// after several tries.
pub async fn put(args: PutOptions) -> anyhow::Result<()> {
    let payloads = match &args.file {
        Some(file) => read_lines(file)?,
        None => checked(
            args.records
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("record {}", i + 1), r.clone())),
        )?,
    };
    anyhow::ensure!(
        !payloads.is_empty(),
        "no records to put: give JSON records or --file"
    );
    let headers = headers(&args.headers)?;
    let client = Client::new(&args.aws.kinesis_config().await);
    let mut written = 0;
    for (chunk_index, chunk) in payloads.chunks(PER_CALL).enumerate() {
        let mut entries = Vec::with_capacity(chunk.len());
        for (index, payload) in chunk.iter().enumerate() {
            let key = match &args.key {
                Some(key) => key.clone(),
                None => format!("{}", chunk_index * PER_CALL + index),
            };
            entries.push(
                PutRecordsRequestEntry::builder()
                    .partition_key(key)
                    .data(Blob::new(envelope::wrap(&headers, payload.as_bytes())))
                    .build()
                    .context("building a record")?,
            );
        }
        written += put_all(&client, &args.stream, entries).await?;
    }
    eprintln!("wrote {written} records to `{}`", args.stream);
    Ok(())
}

/// Puts `entries`, trying again those Kinesis did not take; prints `shard sequence` per record.
async fn put_all(
    client: &Client,
    stream: &str,
    mut entries: Vec<PutRecordsRequestEntry>,
) -> anyhow::Result<usize> {
    let total = entries.len();
    for attempt in 1..=TRIES {
        let answer = client
            .put_records()
            .stream_name(stream)
            .set_records(Some(entries.clone()))
            .send()
            .await
            .with_context(|| format!("writing to `{stream}`"))?;
        let mut failed = Vec::new();
        for (entry, result) in entries.into_iter().zip(answer.records()) {
            match (result.shard_id(), result.sequence_number()) {
                (Some(shard), Some(sequence)) => println!("{shard} {sequence}"),
                _ => failed.push(entry),
            }
        }
        if failed.is_empty() {
            return Ok(total);
        }
        entries = failed;
        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
    }
    anyhow::bail!(
        "{} of {total} records were not taken by `{stream}` after {TRIES} tries",
        entries.len()
    )
}

/// The lines of `file` that are not blank, each checked to be JSON.
fn read_lines(file: &Path) -> anyhow::Result<Vec<String>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    checked(lines.map(|(i, line)| {
        (
            format!("{}, line {}", file.display(), i + 1),
            line.to_owned(),
        )
    }))
}

/// `records`, each named for its error, checked to be JSON.
fn checked(records: impl Iterator<Item = (String, String)>) -> anyhow::Result<Vec<String>> {
    records
        .map(
            |(name, record)| match serde_json::from_str::<serde_json::Value>(&record) {
                Ok(_) => Ok(record),
                Err(error) => Err(anyhow::anyhow!("{name} is not JSON: {error}")),
            },
        )
        .collect()
}

/// `--header name=value`s, none of them the host's own.
fn headers(pairs: &[String]) -> anyhow::Result<Vec<Header>> {
    pairs
        .iter()
        .map(|pair| {
            let (name, value) = pair
                .split_once('=')
                .with_context(|| format!("header `{pair}` is not NAME=VALUE"))?;
            anyhow::ensure!(
                !envelope::is_reserved(name),
                "header `{name}`: `{}*` names belong to the host",
                envelope::RESERVED_PREFIX
            );
            Ok(Header::new(name, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_headers_are_checked_before_anything_is_written() {
        let error = checked([("record 2".to_owned(), "{nope".to_owned())].into_iter());
        assert!(error.is_err_and(|e| e.to_string().starts_with("record 2 is not JSON")));
        let reserved = headers(&["x-ruststream-retry-count=9".to_owned()]);
        assert!(reserved.is_err_and(|e| e.to_string().contains("belong to the host")));
        let bad = headers(&["novalue".to_owned()]);
        assert!(bad.is_err_and(|e| e.to_string().contains("NAME=VALUE")));
        let ok = headers(&["trace=a=b".to_owned()]).unwrap_or_default();
        assert_eq!(ok, vec![Header::new("trace", "a=b")]);
    }
}
