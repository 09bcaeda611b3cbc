//! Which streams exist for the component `dev` and `test` run (`--streams`, `--with-stream`),
//! and how both verbs say what a component was refused: one wording for the two.
//!
//! By default (`--streams any`) they give a component what a host's account holding every
//! stream it names gives it: the streams it reads and dead-letters into exist from the start,
//! and any other from its first write. With `--streams listed` only the streams given with
//! `--with-stream` exist: a component reading or dead-lettering into another does not start
//! (the error names each missing stream and what it is for), and a publish to another is
//! refused with `stream-not-found`, as on an account without it.

use std::collections::BTreeSet;

use ruststream_common::escape::{escape_controls, one_line};
use ruststream_runtime::app::{MAX_STREAM_NAME_LEN, valid_name};
use ruststream_runtime::publish::RefusedPublish;
use ruststream_runtime::testing::MissingStream;

pub use ruststream_runtime::testing::ExistingStreams;

/// `--streams`: which streams exist.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum StreamsMode {
    /// Every stream: read and dead-letter streams from the start, any other from its first
    /// write.
    #[default]
    Any,
    /// Only those given with `--with-stream`.
    Listed,
}

/// Why `--streams` and `--with-stream` are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamsFlagError {
    /// Streams listed with `--streams any`, where the list would mean nothing.
    #[error(
        "--with-stream `{0}` lists a stream for --streams listed; with --streams any (the \
         default) every stream exists: add --streams listed"
    )]
    ListedWithAny(String),
    /// A listed name no Kinesis stream can have.
    #[error(
        "--with-stream `{0}` is not a stream name: 1 to {MAX_STREAM_NAME_LEN} letters, digits, \
         `_`, `.` and `-`"
    )]
    NotAStreamName(String),
}

/// The streams that exist for `mode` and the `--with-stream` names `listed`.
///
/// # Errors
/// [`StreamsFlagError::ListedWithAny`] when streams are listed with `--streams any`, where
/// the list would mean nothing (the caller surely meant `--streams listed`), and
/// [`StreamsFlagError::NotAStreamName`] for a name no stream can have.
pub fn existing_streams(
    mode: StreamsMode,
    listed: &[String],
) -> Result<ExistingStreams, StreamsFlagError> {
    let shown = |name: &String| escape_controls(name).into_owned();
    if let Some(bad) = listed.iter().find(|s| !valid_name(s, MAX_STREAM_NAME_LEN)) {
        return Err(StreamsFlagError::NotAStreamName(shown(bad)));
    }
    match (mode, listed.first()) {
        (StreamsMode::Any, None) => Ok(ExistingStreams::Any),
        (StreamsMode::Any, Some(first)) => Err(StreamsFlagError::ListedWithAny(shown(first))),
        (StreamsMode::Listed, _) => Ok(ExistingStreams::Listed(
            listed.iter().cloned().collect::<BTreeSet<_>>(),
        )),
    }
}

/// One line saying which streams exist, for the top of `dev`'s output and `test`'s report.
pub fn describe(existing: &ExistingStreams) -> String {
    match existing {
        ExistingStreams::Any => {
            "streams: any (read and dead-letter streams from the start, any other from its first \
             write)"
                .to_owned()
        }
        ExistingStreams::Listed(listed) => {
            let names: Vec<_> = (listed.iter())
                .map(|s| format!("`{}`", escape_controls(s)))
                .collect();
            format!("streams: listed, only {}", names.join(", "))
        }
    }
}

/// What a component needs and does not have, with the flag that gives it.
pub fn missing(missing: &[MissingStream]) -> String {
    let named: Vec<_> = (missing.iter())
        .map(|m| format!("`{}` ({})", escape_controls(&m.stream), m.needed_as))
        .collect();
    format!(
        "with --streams listed, streams the component needs do not exist: {}; name each with \
         --with-stream",
        named.join(", ")
    )
}

/// Whose publish it was, as both verbs show it: `on `book``, or while loading the component
/// (where every publish is refused).
pub fn by_whom(subscriber: Option<&str>) -> String {
    match subscriber {
        Some(subscriber) => format!("on `{}`", escape_controls(subscriber)),
        None => "while loading the component (instantiating, `describe`)".to_owned(),
    }
}

/// A refusal as both verbs show it: `to `STREAM`: REASON (MESSAGE)`, with the count when
/// more than one publish was refused alike.
pub fn refusal(refused: &RefusedPublish) -> String {
    let times = if refused.count > 1 {
        format!(", {} times", refused.count)
    } else {
        String::new()
    };
    format!(
        "to `{}`: {} ({}){times}",
        escape_controls(&refused.stream),
        refused.reason(),
        escape_controls(&one_line(&refused.error)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_listed_only_with_streams_listed() {
        assert_eq!(
            existing_streams(StreamsMode::Any, &[]),
            Ok(ExistingStreams::Any)
        );
        let named = ["ledger".to_owned(), "ledger.dead".to_owned()];
        let Ok(ExistingStreams::Listed(listed)) = existing_streams(StreamsMode::Listed, &named)
        else {
            panic!("listed streams")
        };
        assert_eq!(listed.into_iter().collect::<Vec<_>>(), named);
        let error = existing_streams(StreamsMode::Any, &named).err();
        assert!(
            error.is_some_and(|e| e.to_string().contains("--with-stream `ledger`")),
            "a list with --streams any is refused"
        );
        let bad = ["ledger".to_owned(), "a b".to_owned()];
        assert_eq!(
            existing_streams(StreamsMode::Listed, &bad),
            Err(StreamsFlagError::NotAStreamName("a b".into()))
        );
    }
}
