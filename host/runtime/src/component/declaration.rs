//! What a component declares, as `describe` returns it, checked and turned into the host's
//! [`AppSpec`]: every name bounded and validated, the subscriptions counted before they are
//! looked at, start positions sane, dead letters without cycles.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use super::bindings::exports::ruststream::handler::handler as wit;
use super::bindings::ruststream::handler::types::FailureAction;
use crate::app::{
    AppSpec, DeclarationBounds, MAX_BATCH_LIMIT, MAX_STREAM_NAME_LEN, SpecError, StartPosition,
    SubscriptionSpec, valid_name,
};
use crate::outcome::{Outcome, RetryPolicy};
use ruststream_common::escape::quote;

/// Validates what a component's `describe` returned. Cheap checks come first: a list of 50 000
/// subscriptions is refused on its length, before any of them is looked at.
///
/// # Errors
/// The first field that is not valid; see [`SpecError`].
pub(crate) fn app_spec(app: wit::App, bounds: &DeclarationBounds) -> Result<AppSpec, SpecError> {
    if !valid_name(&app.info.name, 64) {
        return Err(SpecError::AppName(quote(&app.info.name)));
    }
    if !valid_version(&app.info.version) {
        return Err(SpecError::AppVersion(quote(&app.info.version)));
    }
    let declared = app.subscriptions.len();
    if declared == 0 {
        return Err(SpecError::NoSubscriptions);
    }
    if declared > bounds.max_subscriptions {
        return Err(SpecError::TooManySubscriptions {
            declared,
            max: bounds.max_subscriptions,
        });
    }
    let mut names = HashSet::new();
    let mut subscriptions = Vec::with_capacity(declared);
    for (index, subscription) in (0u32..).zip(app.subscriptions) {
        let spec = subscription_spec(index, subscription, bounds)?;
        if !names.insert(spec.name.clone()) {
            return Err(SpecError::DuplicateSubscriber {
                index: index as usize,
                name: spec.name,
            });
        }
        subscriptions.push(spec);
    }
    refuse_dead_letter_cycles(&subscriptions)?;
    Ok(AppSpec {
        name: app.info.name,
        version: app.info.version,
        subscriptions,
    })
}

fn subscription_spec(
    index: u32,
    s: wit::Subscription,
    bounds: &DeclarationBounds,
) -> Result<SubscriptionSpec, SpecError> {
    if !valid_name(&s.name, 64) {
        return Err(SpecError::SubscriberName {
            index: index as usize,
            name: quote(&s.name),
        });
    }
    let stream_error = |field, stream: &str| SpecError::StreamName {
        subscriber: s.name.clone(),
        field,
        stream: quote(stream),
    };
    if !valid_name(&s.stream, MAX_STREAM_NAME_LEN) {
        return Err(stream_error("stream", &s.stream));
    }
    if let Some(dead) = s
        .dead_letter
        .as_deref()
        .filter(|d| !valid_name(d, MAX_STREAM_NAME_LEN))
    {
        return Err(stream_error("dead-letter", dead));
    }
    if s.max_attempts == Some(0) {
        return Err(SpecError::ZeroAttempts(s.name));
    }
    if let Some(batch) = s.batch_limit.filter(|b| !(1..=MAX_BATCH_LIMIT).contains(b)) {
        return Err(SpecError::BatchLimit {
            subscriber: s.name,
            batch,
        });
    }
    let start = s
        .start
        .map(|position| start_position(position, &s.name, bounds))
        .transpose()?;
    Ok(SubscriptionSpec {
        index,
        retry: RetryPolicy {
            max_attempts: s.max_attempts,
            dead_letter: s.dead_letter,
        },
        start,
        on_trap: match s.on_trap {
            FailureAction::Drop => Outcome::Drop,
            FailureAction::Retry => Outcome::Retry,
            FailureAction::RetryAfter(ms) => Outcome::RetryAfter(Duration::from_millis(ms)),
        },
        batch_limit: s.batch_limit,
        max_record_age: None,
        retry_stream: None,
        name: s.name,
        stream: s.stream,
    })
}

/// Refuses dead-letter streams that lead back to where they started, over any number of
/// subscriptions: `a` dead-letters into `b`, whose subscriber dead-letters into `a`. A
/// depth-first search over streams (an edge per subscription that dead-letters), linear in the
/// number of subscriptions.
fn refuse_dead_letter_cycles(subscriptions: &[SubscriptionSpec]) -> Result<(), SpecError> {
    let mut edges: BTreeMap<&str, Vec<&SubscriptionSpec>> = BTreeMap::new();
    for s in subscriptions
        .iter()
        .filter(|s| s.retry.dead_letter.is_some())
    {
        edges.entry(s.stream.as_str()).or_default().push(s);
    }
    // Streams fully explored, and the path being explored: each stream with the index of its
    // next edge to follow and the edge it was entered by.
    let mut done: HashSet<&str> = HashSet::new();
    for start in edges.keys().copied() {
        if done.contains(start) {
            continue;
        }
        let mut path: Vec<(&str, usize, Option<&SubscriptionSpec>)> = vec![(start, 0, None)];
        while let Some(top) = path.last_mut() {
            let stream = top.0;
            let Some(edge) = edges.get(stream).and_then(|out| out.get(top.1)).copied() else {
                done.insert(stream);
                path.pop();
                continue;
            };
            top.1 += 1;
            let target = edge.retry.dead_letter.as_deref().unwrap_or_default();
            if done.contains(target) {
                continue;
            }
            if let Some(at) = path.iter().position(|(on_path, ..)| *on_path == target) {
                let mut cycle: Vec<&SubscriptionSpec> =
                    path[at + 1..].iter().filter_map(|(.., by)| *by).collect();
                cycle.push(edge);
                return Err(cycle_error(&cycle));
            }
            path.push((target, 0, Some(edge)));
        }
    }
    Ok(())
}

fn cycle_error(path: &[&SubscriptionSpec]) -> SpecError {
    let subscribers: Vec<String> = path.iter().map(|s| format!("`{}`", s.name)).collect();
    let mut streams: Vec<&str> = path.iter().map(|s| s.stream.as_str()).collect();
    streams.extend(path.last().and_then(|s| s.retry.dead_letter.as_deref()));
    SpecError::DeadLetterCycle {
        subscribers: subscribers.join(", "),
        cycle: streams.join(" -> "),
    }
}

fn start_position(
    position: wit::StartPosition,
    subscriber: &str,
    bounds: &DeclarationBounds,
) -> Result<StartPosition, SpecError> {
    let refused = |reason: String| SpecError::StartSequence {
        subscriber: subscriber.to_owned(),
        reason,
    };
    Ok(match position {
        wit::StartPosition::Latest => StartPosition::Latest,
        wit::StartPosition::Horizon => StartPosition::Horizon,
        wit::StartPosition::AtTimestamp(at_ms) if at_ms > bounds.now_ms => {
            return Err(SpecError::FutureStart {
                subscriber: subscriber.to_owned(),
                at_ms,
                now_ms: bounds.now_ms,
            });
        }
        wit::StartPosition::AtTimestamp(ms) => StartPosition::AtTimestamp(ms),
        wit::StartPosition::AtSequence(at) => {
            if !valid_name(&at.shard_id, 128) {
                return Err(refused(format!(
                    "`{}` is not a shard id (1-128 characters of [A-Za-z0-9_.-])",
                    quote(&at.shard_id)
                )));
            }
            if !valid_sequence(&at.sequence_number) {
                return Err(refused(format!(
                    "`{}` is not a sequence number (1-128 decimal digits)",
                    quote(&at.sequence_number)
                )));
            }
            StartPosition::AtSequence {
                shard_id: at.shard_id,
                sequence_number: at.sequence_number,
            }
        }
    })
}

/// App versions: 1-64 characters of semver's alphabet (`1.2.0-rc.1+build`).
fn valid_version(version: &str) -> bool {
    !version.is_empty()
        && version.len() <= 64
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
}

/// Kinesis sequence numbers: decimal digits, compared as strings elsewhere, never parsed.
fn valid_sequence(sequence: &str) -> bool {
    !sequence.is_empty() && sequence.len() <= 128 && sequence.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_767_225_600_000;

    fn bounds() -> DeclarationBounds {
        DeclarationBounds {
            max_subscriptions: 64,
            now_ms: NOW,
        }
    }

    fn subscription(name: &str, stream: &str, dead_letter: Option<&str>) -> wit::Subscription {
        wit::Subscription {
            name: name.into(),
            stream: stream.into(),
            max_attempts: None,
            dead_letter: dead_letter.map(str::to_owned),
            start: None,
            on_trap: FailureAction::Retry,
            batch_limit: None,
        }
    }

    fn app(subscriptions: Vec<wit::Subscription>) -> wit::App {
        wit::App {
            info: wit::AppInfo {
                name: "ledger".into(),
                version: "0.1.0".into(),
            },
            subscriptions,
        }
    }

    fn refused(app: wit::App) -> String {
        match app_spec(app, &bounds()) {
            Ok(spec) => panic!("accepted: {spec:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn a_plain_declaration_is_accepted() {
        let spec = app_spec(
            app(vec![subscription("book", "ledger", Some("ledger.dead"))]),
            &bounds(),
        );
        assert!(spec.is_ok(), "{spec:?}");
    }

    #[test]
    fn names_are_bounded_escaped_and_named_by_field() {
        let mut long = app(vec![subscription(&"a".repeat(32 << 20), "ledger", None)]);
        let error = refused(long.clone());
        assert!(
            error.starts_with("field `subscriptions[0].name`"),
            "{error}"
        );
        assert!(error.len() < 300, "{error}");
        long.subscriptions[0].name = "\x1b[2K\rok".into();
        let error = refused(long);
        assert!(!error.chars().any(char::is_control), "{error}");
        let mut version = app(vec![subscription("book", "ledger", None)]);
        version.info.version = "1.0\x07".into();
        assert!(refused(version).starts_with("field `app.version`"));
        let stream = app(vec![subscription("book", "no spaces", None)]);
        assert!(refused(stream).contains("field `stream`"));
        let dead = app(vec![subscription("book", "ledger", Some(&"d".repeat(200)))]);
        assert!(refused(dead).contains("field `dead-letter`"));
    }

    #[test]
    fn too_many_subscriptions_are_refused_on_their_count() {
        let many: Vec<_> = (0..50_000)
            .map(|i| subscription(&format!("s{i}"), "ledger", None))
            .collect();
        let started = std::time::Instant::now();
        let error = refused(app(many));
        assert!(
            error.contains("50000 subscriptions declared; at most 64"),
            "{error}"
        );
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
    }

    #[test]
    fn dead_letter_cycles_of_any_length_are_refused() {
        let selfloop = app(vec![subscription("a", "a", Some("a"))]);
        assert!(refused(selfloop).contains("a -> a"));
        let three = app(vec![
            subscription("x", "a", Some("b")),
            subscription("y", "b", Some("c")),
            subscription("z", "c", Some("a")),
        ]);
        let error = refused(three);
        assert!(error.contains("form a cycle (a -> b -> c -> a)"), "{error}");
        let chain = app(vec![
            subscription("x", "a", Some("b")),
            subscription("y", "b", Some("c")),
            subscription("w", "d", Some("b")),
        ]);
        assert!(app_spec(chain, &bounds()).is_ok());
    }

    #[test]
    fn starts_and_batches_are_sane() {
        let mut future = app(vec![subscription("book", "ledger", None)]);
        future.subscriptions[0].start = Some(wit::StartPosition::AtTimestamp(NOW + 1));
        assert!(refused(future).contains("in the future"));
        let mut sequence = app(vec![subscription("book", "ledger", None)]);
        sequence.subscriptions[0].start =
            Some(wit::StartPosition::AtSequence(wit::SequencePosition {
                shard_id: "shardId-000000000000".into(),
                sequence_number: "12ab".into(),
            }));
        assert!(refused(sequence).contains("not a sequence number"));
        for batch in [0, MAX_BATCH_LIMIT + 1] {
            let mut limit = app(vec![subscription("book", "ledger", None)]);
            limit.subscriptions[0].batch_limit = Some(batch);
            assert!(refused(limit).contains("field `batch-limit`"));
        }
    }
}
