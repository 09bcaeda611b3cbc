//! `ruststream put STREAM`: JSON records written to a stream, with headers (in the `RSK2`
//! envelope the host reads) and a partition key, from arguments or a JSON-lines file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::error::{BuildError, SdkError};
use aws_sdk_kinesis::operation::put_records::PutRecordsError;
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use ruststream_runtime::envelope;
use ruststream_runtime::record::Header;

use ruststream_fleet::aws::AwsOptions;

/// Records per PutRecords call: Kinesis's own maximum.
const PER_CALL: usize = 500;
/// Tries of the records a call did not take (throttled), with a growing pause between.
const TRIES: u32 = 5;

/// Why `put` wrote nothing, or not everything: the record, file, line, header or stream it
/// failed on. Nothing is written when a record or a header is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PutError {
    /// The records file cannot be read.
    #[error("cannot read {}", file.display())]
    Read {
        /// The records file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line of the records file is not JSON.
    #[error("{}, line {line} is not JSON", file.display())]
    LineNotJson {
        /// The records file.
        file: PathBuf,
        /// The line (1-based).
        line: usize,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// A record given as an argument is not JSON.
    #[error("record {number} is not JSON")]
    RecordNotJson {
        /// Its position among the arguments (1-based).
        number: usize,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// Neither records nor a file with any were given.
    #[error("no records to put: give JSON records or --file")]
    NoRecords,
    /// A `--header` has no `=`.
    #[error("header `{header}` is not NAME=VALUE")]
    HeaderNotPair {
        /// The header as given.
        header: String,
    },
    /// A `--header` takes a name the host keeps for itself, or one readers set on delivery
    /// (which no reader would show).
    #[error(
        "header `{name}`: `{}*` names belong to the host, and readers set `{}` on delivery",
        envelope::RESERVED_PREFIX,
        envelope::NATIVE_DELIVERY_HEADERS.join("`, `")
    )]
    ReservedHeader {
        /// The header's name.
        name: String,
    },
    /// A record cannot be made into a request entry.
    #[error("building a record")]
    Build(#[source] BuildError),
    /// A PutRecords call to the stream failed (records of earlier calls are written).
    #[error("writing to `{stream}`")]
    Kinesis {
        /// The stream.
        stream: String,
        /// Why (boxed: the SDK's error is large).
        #[source]
        source: Box<SdkError<PutRecordsError>>,
    },
    /// Kinesis did not take some records however often they were tried (throttled).
    #[error("{failed} of {total} records were not taken by `{stream}` after {TRIES} tries")]
    NotTaken {
        /// The stream.
        stream: String,
        /// How many of the call's records were not taken.
        failed: usize,
        /// How many the call had.
        total: usize,
    },
    /// Where each record went cannot be written to the output.
    #[error("cannot write the output")]
    Output(#[source] std::io::Error),
}

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

/// Writes each record (arguments, or the lines of `--file`), in order, writes where each
/// went to `out` (`SHARD SEQUENCE`, a line per record, as Kinesis answers), and returns how
/// many it wrote.
///
/// # Errors
/// A record that is not JSON (naming it), a reserved header, or records Kinesis would not take
/// after several tries; see [`PutError`].
pub async fn put(args: PutOptions, out: &mut dyn Write) -> Result<usize, PutError> {
    let payloads = match &args.file {
        Some(file) => read_lines(file)?,
        None => checked(args.records.iter().cloned().enumerate().map(|(i, record)| {
            let number = i + 1;
            let refused = move |source| PutError::RecordNotJson { number, source };
            (record, refused)
        }))?,
    };
    if payloads.is_empty() {
        return Err(PutError::NoRecords);
    }
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
                    .map_err(PutError::Build)?,
            );
        }
        written += put_all(&client, &args.stream, entries, out).await?;
    }
    Ok(written)
}

/// Puts `entries`, trying again those Kinesis did not take; writes `shard sequence` per record
/// to `out`.
async fn put_all(
    client: &Client,
    stream: &str,
    mut entries: Vec<PutRecordsRequestEntry>,
    out: &mut dyn Write,
) -> Result<usize, PutError> {
    let total = entries.len();
    for attempt in 1..=TRIES {
        let answer = client
            .put_records()
            .stream_name(stream)
            .set_records(Some(entries.clone()))
            .send()
            .await
            .map_err(|source| PutError::Kinesis {
                stream: stream.to_owned(),
                source: Box::new(source),
            })?;
        let mut failed = Vec::new();
        for (entry, result) in entries.into_iter().zip(answer.records()) {
            match (result.shard_id(), result.sequence_number()) {
                (Some(shard), Some(sequence)) => {
                    writeln!(out, "{shard} {sequence}").map_err(PutError::Output)?;
                }
                _ => failed.push(entry),
            }
        }
        if failed.is_empty() {
            return Ok(total);
        }
        entries = failed;
        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
    }
    Err(PutError::NotTaken {
        stream: stream.to_owned(),
        failed: entries.len(),
        total,
    })
}

/// The lines of `file` that are not blank, each checked to be JSON.
fn read_lines(file: &Path) -> Result<Vec<String>, PutError> {
    let text = std::fs::read_to_string(file).map_err(|source| PutError::Read {
        file: file.to_owned(),
        source,
    })?;
    let lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    checked(lines.map(|(i, line)| {
        let refused = move |source| PutError::LineNotJson {
            file: file.to_owned(),
            line: i + 1,
            source,
        };
        (line.to_owned(), refused)
    }))
}

/// `records` checked to be JSON; one that is not is refused with the error its own function
/// makes (which names it).
fn checked<F>(records: impl Iterator<Item = (String, F)>) -> Result<Vec<String>, PutError>
where
    F: FnOnce(serde_json::Error) -> PutError,
{
    records
        .map(
            |(record, refused)| match serde_json::from_str::<serde_json::Value>(&record) {
                Ok(_) => Ok(record),
                Err(error) => Err(refused(error)),
            },
        )
        .collect()
}

/// `--header name=value`s, none of them the host's own.
fn headers(pairs: &[String]) -> Result<Vec<Header>, PutError> {
    pairs
        .iter()
        .map(|pair| {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| PutError::HeaderNotPair {
                    header: pair.clone(),
                })?;
            if envelope::refused_on_publish(name) {
                return Err(PutError::ReservedHeader {
                    name: name.to_owned(),
                });
            }
            Ok(Header::new(name, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(records: &[&str], file: Option<PathBuf>) -> PutOptions {
        PutOptions {
            stream: "orders".into(),
            records: records.iter().map(|r| (*r).to_owned()).collect(),
            file,
            key: None,
            headers: Vec::new(),
            aws: AwsOptions::default(),
        }
    }

    /// `put` refused before it reaches Kinesis (none is configured), writing nothing.
    async fn refused(options: PutOptions) -> Option<PutError> {
        let mut out = Vec::new();
        let error = put(options, &mut out).await.err();
        assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
        error
    }

    #[tokio::test]
    async fn a_record_that_is_not_json_is_named_by_its_position() {
        let error = refused(options(&["{}", "{nope"], None)).await;
        assert!(
            matches!(error, Some(PutError::RecordNotJson { number: 2, .. })),
            "{error:?}"
        );
        let shown = error.map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(shown, "record 2 is not JSON");
        let none = refused(options(&[], None)).await;
        assert!(matches!(none, Some(PutError::NoRecords)), "{none:?}");
    }

    #[tokio::test]
    async fn a_file_is_named_when_missing_and_its_bad_line_by_number() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("ruststream-put-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let missing = dir.join("missing.jsonl");
        let error = refused(options(&[], Some(missing.clone()))).await;
        assert!(
            matches!(&error, Some(PutError::Read { file, .. }) if *file == missing),
            "{error:?}"
        );
        let file = dir.join("records.jsonl");
        std::fs::write(&file, "{\"id\":1}\n\n{\"id\":\n")?;
        let error = refused(options(&[], Some(file.clone()))).await;
        assert!(
            matches!(&error, Some(PutError::LineNotJson { file: f, line: 3, .. }) if *f == file),
            "{error:?}"
        );
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    #[test]
    fn headers_are_checked_before_anything_is_written() {
        let reserved = headers(&["x-ruststream-retry-count=9".to_owned()]);
        assert!(
            matches!(&reserved, Err(PutError::ReservedHeader { name }) if name == "x-ruststream-retry-count"),
            "{reserved:?}"
        );
        let native = headers(&["Kinesis-Sequence-Number=1".to_owned()]);
        assert!(
            matches!(&native, Err(PutError::ReservedHeader { name }) if name == "Kinesis-Sequence-Number"),
            "{native:?}"
        );
        let bad = headers(&["novalue".to_owned()]);
        assert!(
            matches!(&bad, Err(PutError::HeaderNotPair { header }) if header == "novalue"),
            "{bad:?}"
        );
        let ok = headers(&["trace=a=b".to_owned()]).unwrap_or_default();
        assert_eq!(ok, vec![Header::new("trace", "a=b")]);
    }
}
