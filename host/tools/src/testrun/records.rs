//! The records file of `ruststream test`: one JSON object a line, each a record to publish to
//! the component's in-process streams, in order.
//!
//! ```text
//! {"json": {"id": 1, "amount": 5}}
//! {"data": "plain text", "partition_key": "acct-7", "headers": {"trace": "t-1"}}
//! {"data_base64": "AAEC", "stream": "ledger", "attempt": 3}
//! ```
//!
//! Blank lines and lines starting with `#` or `//` are skipped; records are numbered from 1
//! in the order they appear.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use ruststream_runtime::envelope;
use ruststream_runtime::record::Header;
use serde::Deserialize;

use super::TestRunError;

/// One record to publish, as the file gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InputRecord {
    /// Its number: 1 for the file's first record.
    pub number: usize,
    /// The file's line it is on (1-based).
    pub line: usize,
    /// The stream it goes to, when the line names one.
    pub stream: Option<String>,
    /// The subscription it is meant for, when the line names one (its stream is then that
    /// subscription's).
    pub subscription: Option<String>,
    /// Its partition key, when the line gives one.
    pub partition_key: Option<String>,
    /// Its user headers, in name order.
    pub headers: Vec<Header>,
    /// The attempt the handler sees: 1 unless the line says otherwise.
    pub attempt: u32,
    /// The payload bytes.
    pub payload: Vec<u8>,
}

/// A payload as a file gives it: `data` (text), `data_base64` or `json`; exactly one.
#[derive(Debug, Default, Clone, Deserialize)]
pub(crate) struct PayloadFields {
    /// The payload as UTF-8 text.
    pub data: Option<String>,
    /// The payload as standard base64.
    pub data_base64: Option<String>,
    /// The payload as a JSON value, written compactly.
    pub json: Option<serde_json::Value>,
}

/// A payload to compare or to publish.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Payload {
    /// Exact bytes (from `data` or `data_base64`).
    Bytes(Vec<u8>),
    /// A JSON value: compared as a value, whatever its key order or spacing.
    Json(serde_json::Value),
}

impl PayloadFields {
    /// The one payload given.
    ///
    /// # Errors
    /// None or several of the fields, or base64 that does not decode: the message says which.
    pub(crate) fn payload(self) -> Result<Payload, String> {
        match (self.data, self.data_base64, self.json) {
            (Some(text), None, None) => Ok(Payload::Bytes(text.into_bytes())),
            (None, Some(encoded), None) => base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map(Payload::Bytes)
                .map_err(|error| format!("`data_base64` is not base64: {error}")),
            (None, None, Some(value)) => Ok(Payload::Json(value)),
            (None, None, None) => Err("no payload: give `data`, `data_base64` or `json`".into()),
            _ => Err("give only one of `data`, `data_base64` and `json`".into()),
        }
    }
}

impl Payload {
    /// The bytes a producer would write.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        match self {
            Self::Bytes(bytes) => bytes.clone(),
            Self::Json(value) => value.to_string().into_bytes(),
        }
    }

    /// Whether `bytes` are this payload: the same bytes, or JSON equal to this value.
    pub(crate) fn matches(&self, bytes: &[u8]) -> bool {
        match self {
            Self::Bytes(expected) => expected == bytes,
            Self::Json(expected) => {
                serde_json::from_slice::<serde_json::Value>(bytes).is_ok_and(|got| &got == expected)
            }
        }
    }
}

/// One line of the file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordLine {
    data: Option<String>,
    data_base64: Option<String>,
    json: Option<serde_json::Value>,
    stream: Option<String>,
    subscription: Option<String>,
    partition_key: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    attempt: Option<u32>,
}

/// Reads the records file at `path`.
///
/// # Errors
/// [`TestRunError::Records`] naming the file and line of the first bad record, or
/// [`TestRunError::Read`] when the file cannot be read; a file without records is bad too.
pub(crate) fn read(path: &Path) -> Result<Vec<InputRecord>, TestRunError> {
    let text = super::read_text(path)?;
    let records = parse(&text).map_err(|(line, message)| TestRunError::Records {
        file: path.to_owned(),
        line,
        message,
    })?;
    if records.is_empty() {
        return Err(TestRunError::Records {
            file: path.to_owned(),
            line: 0,
            message: "no records in the file".into(),
        });
    }
    Ok(records)
}

/// The records of `text`; an error is the line (1-based) and what is wrong with it.
pub(crate) fn parse(text: &str) -> Result<Vec<InputRecord>, (usize, String)> {
    let lines = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()));
    let meaningful = lines.filter(|(_, line)| !skipped(line));
    meaningful
        .enumerate()
        .map(|(index, (line, text))| parse_line(index + 1, line, text).map_err(|e| (line, e)))
        .collect()
}

fn skipped(line: &str) -> bool {
    line.is_empty() || line.starts_with('#') || line.starts_with("//")
}

fn parse_line(number: usize, line: usize, text: &str) -> Result<InputRecord, String> {
    let parsed: RecordLine = serde_json::from_str(text).map_err(|error| within_line(&error))?;
    let payload = PayloadFields {
        data: parsed.data,
        data_base64: parsed.data_base64,
        json: parsed.json,
    }
    .payload()?
    .to_bytes();
    let attempt = parsed.attempt.unwrap_or(1);
    if attempt == 0 {
        return Err("`attempt` counts from 1".into());
    }
    Ok(InputRecord {
        number,
        line,
        stream: parsed.stream,
        subscription: parsed.subscription,
        partition_key: parsed.partition_key,
        headers: headers(parsed.headers)?,
        attempt,
        payload,
    })
}

/// The parser's message with its position as a column: the line is the file's, named apart.
fn within_line(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    let bare = message.strip_suffix(&position).unwrap_or(&message);
    format!("{bare} (column {})", error.column())
}

/// User headers; the host's own names are refused (`attempt` sets the retry count), and so
/// are the ones readers set on delivery, which no handler would be shown.
fn headers(given: BTreeMap<String, String>) -> Result<Vec<Header>, String> {
    given
        .into_iter()
        .map(|(name, value)| {
            if envelope::is_reserved(&name) {
                return Err(format!(
                    "header `{name}`: `{}*` names belong to the host (use `attempt`)",
                    envelope::RESERVED_PREFIX
                ));
            }
            if envelope::is_set_on_delivery(&name) {
                return Err(format!(
                    "header `{name}`: readers set it on delivery, so no handler is shown it \
                     (give the key as `partition_key`)"
                ));
            }
            Ok(Header::new(name, value))
        })
        .collect()
}

impl InputRecord {
    /// The headers as written to the stream: the user's, and the retry count an attempt
    /// after the first stands for.
    pub(crate) fn stream_headers(&self) -> Vec<Header> {
        let mut headers = self.headers.clone();
        if self.attempt > 1 {
            let retries = (self.attempt - 1).to_string();
            headers.push(Header::new(envelope::RETRY_COUNT_HEADER, retries));
        }
        headers
    }

    /// The partition key written: the line's, else the record's number.
    pub(crate) fn key(&self) -> String {
        self.partition_key
            .clone()
            .unwrap_or_else(|| self.number.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_numbered_records() -> Result<(), (usize, String)> {
        let text = "# entries\n{\"json\": {\"id\": 1}}\n\n{\"data\": \"hi\", \"attempt\": 3, \
                    \"headers\": {\"trace\": \"t\"}, \"partition_key\": \"k\"}\n";
        let records = parse(text)?;
        assert_eq!(records.len(), 2);
        assert_eq!((records[0].number, records[0].line), (1, 2));
        assert_eq!(records[0].payload, br#"{"id":1}"#);
        assert_eq!(records[0].key(), "1");
        let second = &records[1];
        assert_eq!((second.number, second.line, second.attempt), (2, 4, 3));
        assert_eq!(second.key(), "k");
        let headers = second.stream_headers();
        assert_eq!(headers[0], Header::new("trace", "t"));
        assert_eq!(headers[1], Header::new(envelope::RETRY_COUNT_HEADER, "2"));
        Ok(())
    }

    #[test]
    fn a_bad_line_is_named() {
        for (text, says) in [
            ("{\"json\": 1}\n{\"jsn\": 2}", "unknown field `jsn`"),
            (
                "{\"json\": 1}\n{\"data\": \"a\", \"json\": 2}",
                "only one of",
            ),
            ("{\"json\": 1}\n{\"data_base64\": \"***\"}", "not base64"),
            (
                "{\"json\": 1}\n{\"json\": 1, \"attempt\": 0}",
                "counts from 1",
            ),
            ("{\"json\": 1}\n{nope", "key must be a string"),
            (
                "{\"json\": 1}\n{\"json\": 1, \"headers\": {\"x-ruststream-due-ms\": \"1\"}}",
                "belong to the host",
            ),
            (
                "{\"json\": 1}\n{\"json\": 1, \"headers\": {\"Kinesis-Shard-Id\": \"s\"}}",
                "set it on delivery",
            ),
        ] {
            let error = parse(text).err();
            assert!(
                error
                    .as_ref()
                    .is_some_and(|(line, e)| *line == 2 && e.contains(says)),
                "{text}: {error:?}"
            );
        }
    }
}
