//! Which dead letters a redrive moves, and what it writes for each.
//!
//! A record of the dead-letter stream is judged on its own envelope and the tenants' grants:
//! the filter (`--tenant`, `--reason`, `--since`, `--until`) chooses among dead letters, and a
//! chosen one is refused (skipped and reported, never written anywhere) when its origin is not
//! a stream its tenant may have records in, or names no app to address it to.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_smithy_types::DateTime;
use aws_smithy_types::date_time::Format;
use ruststream_runtime::envelope::{self, REDRIVE_HEADER};
use ruststream_runtime::{
    Tenant,
    dead_letter::DeadLetterOrigin,
    publish::MAX_RECORD_BYTES,
    record::{CopyOrigin, CopyOwner, Header, OutgoingRecord},
};
use serde::{Deserialize, Serialize};

/// What a redrive chooses among the dead letters of its stream. Times are the dead letter's
/// arrival in the dead-letter stream, in ms since the epoch; both bounds are inclusive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedriveFilter {
    /// Only the dead letters of this tenant.
    pub tenant: Option<String>,
    /// Only those dead-lettered for this reason (`attempts-exhausted`, a trap kind, ...).
    pub reason: Option<String>,
    /// Only those that arrived at or after this time.
    pub since_ms: Option<u64>,
    /// Only those that arrived at or before this time; a redrive started without one takes
    /// its start time, so that it never chases dead letters written while it runs.
    pub until_ms: Option<u64>,
}

impl RedriveFilter {
    /// Whether the dead letter with `origin`, arrived at `arrival_ms`, is chosen.
    pub fn chooses(&self, origin: &DeadLetterOrigin, arrival_ms: u64) -> bool {
        self.tenant.as_ref().is_none_or(|t| *t == origin.tenant)
            && self.reason.as_ref().is_none_or(|r| *r == origin.reason)
            && self.since_ms.is_none_or(|since| arrival_ms >= since)
            && self.until_ms.is_none_or(|until| arrival_ms <= until)
    }
}

/// Why a time given to `--since` or `--until` is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a time: give RFC 3339 (e.g. 2026-12-03T06:00:00Z) or ms since the Unix epoch"
)]
pub struct TimeError(pub String);

/// Reads a time: RFC 3339 (`2026-12-03T06:00:00Z`), or ms since the Unix epoch.
///
/// # Errors
/// [`TimeError`] naming the text.
pub fn parse_time(text: &str) -> Result<u64, TimeError> {
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    DateTime::from_str(text, Format::DateTime)
        .ok()
        .and_then(|at| at.to_millis().ok())
        .and_then(|ms| u64::try_from(ms).ok())
        .ok_or_else(|| TimeError(text.to_owned()))
}

/// Why a chosen dead letter is not redriven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// The record carries no whole origin: it is not a dead letter a host wrote.
    NotADeadLetter,
    /// Its tenant is not one of the host's tenants.
    UnknownTenant,
    /// Its tenant neither reads nor publishes to its origin stream: writing there on the
    /// tenant's behalf is not granted.
    NotGranted,
    /// Its origin stream does not exist (any more).
    StreamGone,
    /// It names no app (written by a host from before redrives), so it cannot be addressed
    /// to the subscription that gave up on it.
    NoApp,
    /// With the redrive's header it no longer fits in a record.
    TooLarge,
}

impl SkipReason {
    /// Its label, in reports and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::NotADeadLetter => "not-a-dead-letter",
            Self::UnknownTenant => "unknown-tenant",
            Self::NotGranted => "not-granted",
            Self::StreamGone => "stream-gone",
            Self::NoApp => "no-app",
            Self::TooLarge => "too-large",
        }
    }
}

/// A record of the dead-letter stream, as read.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// Its shard in the dead-letter stream.
    pub shard_id: String,
    /// Its sequence number there.
    pub sequence_number: String,
    /// Its partition key (the original's: a dead letter keeps it).
    pub partition_key: String,
    /// When it arrived in the dead-letter stream (ms since the epoch).
    pub arrival_ms: u64,
    /// Its bytes, envelope included.
    pub data: Vec<u8>,
}

/// What a redrive does with one record of the dead-letter stream.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Not chosen by the filter: passed over silently.
    Passed,
    /// Chosen, and refused.
    Skip {
        /// Why.
        reason: SkipReason,
        /// Its origin, when it has one.
        origin: Option<Box<DeadLetterOrigin>>,
    },
    /// Chosen, and written back to its origin stream.
    Redrive(Box<Redriven>),
}

/// A dead letter on its way back.
#[derive(Debug, Clone)]
pub struct Redriven {
    /// Where it came from.
    pub origin: DeadLetterOrigin,
    /// Its tenant, whose write quota it draws on.
    pub tenant: Arc<Tenant>,
    /// What names it in its origin stream: [`REDRIVE_HEADER`]'s value.
    pub tag: String,
    /// The record written.
    pub record: OutgoingRecord,
}

/// The tenants a redrive writes for, by name.
pub type Tenants = BTreeMap<String, Arc<Tenant>>;

/// Judges `letter` for redrive `id`: `now_ms` restarts the age of the record it writes.
/// Whether the origin stream exists is not judged here (it takes a call).
pub fn judge(
    id: &str,
    filter: &RedriveFilter,
    tenants: &Tenants,
    letter: &DeadLetter,
    now_ms: u64,
) -> Verdict {
    let unwrapped = envelope::unwrap(&letter.data);
    let Some(origin) = DeadLetterOrigin::from_headers(&unwrapped.headers) else {
        // With a tenant or reason filter, a record that names neither is not chosen.
        return if filter.tenant.is_some() || filter.reason.is_some() {
            Verdict::Passed
        } else {
            skip(SkipReason::NotADeadLetter, None)
        };
    };
    if !filter.chooses(&origin, letter.arrival_ms) {
        return Verdict::Passed;
    }
    let Some(tenant) = tenants.get(&origin.tenant) else {
        return skip(SkipReason::UnknownTenant, Some(origin));
    };
    if !tenant.may_subscribe(&origin.stream)
        && !tenant.policy().publish_grant().allows(&origin.stream)
    {
        return skip(SkipReason::NotGranted, Some(origin));
    }
    let Some(app) = origin.app.clone() else {
        return skip(SkipReason::NoApp, Some(origin));
    };
    let tag = format!("{id}/{}/{}", letter.shard_id, letter.sequence_number);
    let mut headers: Vec<Header> = unwrapped
        .headers
        .into_iter()
        .filter(|h| !envelope::is_reserved(&h.name))
        .collect();
    // Addressed to the subscription that gave up on it: every other reader of the origin
    // stream passes it by, as it does a counted copy. Its age starts again now.
    let owner = CopyOwner {
        tenant: origin.tenant.clone(),
        app,
        subscriber: origin.subscriber.clone(),
    };
    headers.extend(envelope::origin_headers(&CopyOrigin {
        owner,
        chain: format!("{}/{}", origin.shard_id, origin.sequence_number),
        first_arrival_ms: now_ms,
    }));
    headers.push(Header::new(REDRIVE_HEADER, tag.clone()));
    let record = OutgoingRecord {
        partition_key: letter.partition_key.clone(),
        payload: unwrapped.payload.to_vec(),
        headers,
    };
    if record.stream_size() > MAX_RECORD_BYTES {
        return skip(SkipReason::TooLarge, Some(origin));
    }
    Verdict::Redrive(Box::new(Redriven {
        origin,
        tenant: Arc::clone(tenant),
        tag,
        record,
    }))
}

fn skip(reason: SkipReason, origin: Option<DeadLetterOrigin>) -> Verdict {
    Verdict::Skip {
        reason,
        origin: origin.map(Box::new),
    }
}

/// The redrive header's value in a record's bytes, when it names redrive `id`.
pub fn redrive_tag<'a>(headers: &'a [Header], id: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|h| h.name == REDRIVE_HEADER)
        .map(|h| h.value.as_slice())
        .filter(|value| {
            value.len() > id.len() && value.starts_with(id.as_bytes()) && value[id.len()] == b'/'
        })
}

#[cfg(test)]
mod tests {
    use ruststream_runtime::envelope::unwrap;
    use ruststream_runtime::policy::StreamGrant;

    use super::*;

    fn origin(stream: &str, app: Option<&str>) -> DeadLetterOrigin {
        DeadLetterOrigin {
            stream: stream.into(),
            shard_id: "shardId-000000000000".into(),
            sequence_number: "77".into(),
            subscriber: "book".into(),
            tenant: "acme".into(),
            app: app.map(str::to_owned),
            attempts: 3,
            reason: "attempts-exhausted".into(),
            first: None,
        }
    }

    fn letter(origin: &DeadLetterOrigin, arrival_ms: u64) -> DeadLetter {
        let mut headers = vec![
            Header::new("trace", "abc"),
            Header::new(envelope::RETRY_COUNT_HEADER, "3"),
        ];
        headers.extend(origin.headers());
        DeadLetter {
            shard_id: "shardId-000000000001".into(),
            sequence_number: "900".into(),
            partition_key: "customer-9".into(),
            arrival_ms,
            data: envelope::wrap(&headers, br#"{"id":9}"#),
        }
    }

    fn tenants() -> Tenants {
        let acme = Tenant::new("acme")
            .subscribe(StreamGrant::only(["orders"]))
            .publish(StreamGrant::only(["orders.dead", "refunds"]));
        Tenants::from([("acme".to_owned(), Arc::new(acme))])
    }

    #[test]
    fn a_redriven_record_is_the_original_addressed_to_its_subscriber_afresh() {
        let dead = letter(&origin("orders", Some("books")), 10);
        let Verdict::Redrive(redriven) =
            judge("rd-1", &RedriveFilter::default(), &tenants(), &dead, 5_000)
        else {
            panic!("not redriven")
        };
        assert_eq!(redriven.tag, "rd-1/shardId-000000000001/900");
        assert_eq!(redriven.record.partition_key, "customer-9");
        let read = unwrap(&redriven.record.to_stream_bytes());
        assert_eq!(&read.payload[..], br#"{"id":9}"#);
        assert_eq!(read.retry_count, 0, "a fresh attempt count");
        let copy = read.copy.expect("addressed to its subscription");
        assert_eq!(
            (copy.owner.app.as_str(), copy.owner.subscriber.as_str()),
            ("books", "book")
        );
        assert_eq!(copy.first_arrival_ms, 5_000, "its age starts again");
        assert_eq!(read.headers[0], Header::new("trace", "abc"));
        assert!(
            read.headers[1..]
                .iter()
                .all(|h| h.name == REDRIVE_HEADER && h.value == b"rd-1/shardId-000000000001/900"),
            "no origin header is carried back: {:?}",
            read.headers
        );
        assert!(redrive_tag(&read.headers, "rd-1").is_some());
        assert!(redrive_tag(&read.headers, "rd").is_none());
    }

    #[test]
    fn origins_the_tenant_may_not_write_to_are_refused() {
        let reason = |stream: &str, app: Option<&str>, tenant: &str| {
            let mut origin = origin(stream, app);
            origin.tenant = tenant.into();
            match judge(
                "rd",
                &RedriveFilter::default(),
                &tenants(),
                &letter(&origin, 1),
                1,
            ) {
                Verdict::Skip { reason, .. } => Some(reason),
                _ => None,
            }
        };
        assert_eq!(
            reason("payments", Some("a"), "acme"),
            Some(SkipReason::NotGranted)
        );
        assert_eq!(reason("refunds", Some("a"), "acme"), None, "published to");
        assert_eq!(
            reason("orders", Some("a"), "globex"),
            Some(SkipReason::UnknownTenant)
        );
        assert_eq!(reason("orders", None, "acme"), Some(SkipReason::NoApp));
    }

    #[test]
    fn the_filter_chooses_by_tenant_reason_and_arrival() -> Result<(), TimeError> {
        let filter = RedriveFilter {
            tenant: Some("acme".into()),
            reason: Some("attempts-exhausted".into()),
            since_ms: Some(parse_time("1970-01-01T00:00:01Z")?),
            until_ms: Some(parse_time("2000")?),
        };
        let dead = origin("orders", Some("books"));
        assert!(filter.chooses(&dead, 1_000) && filter.chooses(&dead, 2_000));
        assert!(!filter.chooses(&dead, 999) && !filter.chooses(&dead, 2_001));
        let mut other = dead.clone();
        other.reason = "panic".into();
        assert!(!filter.chooses(&other, 1_500));
        assert_eq!(parse_time("yesterday"), Err(TimeError("yesterday".into())));
        let plain = DeadLetter {
            data: b"{}".to_vec(),
            ..letter(&dead, 1_500)
        };
        assert!(matches!(
            judge("rd", &filter, &tenants(), &plain, 1),
            Verdict::Passed
        ));
        assert!(matches!(
            judge("rd", &RedriveFilter::default(), &tenants(), &plain, 1),
            Verdict::Skip {
                reason: SkipReason::NotADeadLetter,
                ..
            }
        ));
        Ok(())
    }
}
