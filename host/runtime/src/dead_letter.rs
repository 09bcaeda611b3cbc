//! Where a dead letter came from, carried in its `RSK2` envelope as `x-ruststream-origin-*`
//! headers: whoever reads a dead-letter stream (a person with `ruststream tail`, a repair
//! job, another tenant's handler) can tell which record of which shard it was, whose
//! subscriber gave up on it, after how many attempts and why.

use crate::record::Header;

/// Header names, in the order they are written.
const STREAM: &str = "x-ruststream-origin-stream";
const SHARD: &str = "x-ruststream-origin-shard";
const SEQUENCE: &str = "x-ruststream-origin-sequence";
const SUBSCRIBER: &str = "x-ruststream-origin-subscriber";
const TENANT: &str = "x-ruststream-origin-tenant";
const ATTEMPTS: &str = "x-ruststream-origin-attempts";
const REASON: &str = "x-ruststream-origin-reason";
/// Written since redrives address a redriven record to the subscription that gave up on it;
/// a dead letter written before has none.
const APP: &str = "x-ruststream-origin-app";

/// Why a record was dead-lettered when its last attempt did not trap.
pub const ATTEMPTS_EXHAUSTED: &str = "attempts-exhausted";

/// Why a record older than its subscription's maximum record age was dead-lettered.
pub const RECORD_AGE_EXCEEDED: &str = "record-age-exceeded";

/// The origin of a dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterOrigin {
    /// The stream the record was read from.
    pub stream: String,
    /// Its shard.
    pub shard_id: String,
    /// Its sequence number there (the copy's, when the last attempt was a counted copy).
    pub sequence_number: String,
    /// The subscription that gave up on it.
    pub subscriber: String,
    /// The tenant running that subscription.
    pub tenant: String,
    /// The tenant's app the subscription belongs to (`None` in a dead letter written before
    /// hosts said it).
    pub app: Option<String>,
    /// How many deliveries it had.
    pub attempts: u32,
    /// [`ATTEMPTS_EXHAUSTED`], [`RECORD_AGE_EXCEEDED`], or the kind of trap its last attempt
    /// ended in ([`TrapKind::label`](crate::component::TrapKind::label)).
    pub reason: String,
}

impl DeadLetterOrigin {
    /// The headers that carry it.
    pub fn headers(&self) -> Vec<Header> {
        [
            (STREAM, self.stream.clone()),
            (SHARD, self.shard_id.clone()),
            (SEQUENCE, self.sequence_number.clone()),
            (SUBSCRIBER, self.subscriber.clone()),
            (TENANT, self.tenant.clone()),
            (ATTEMPTS, self.attempts.to_string()),
            (REASON, self.reason.clone()),
        ]
        .into_iter()
        .chain(self.app.clone().map(|app| (APP, app)))
        .map(|(name, value)| Header::new(name, value))
        .collect()
    }

    /// The origin `headers` carry, when they carry one whole.
    pub fn from_headers(headers: &[Header]) -> Option<Self> {
        let get = |name: &str| {
            let header = headers.iter().find(|h| h.name == name)?;
            String::from_utf8(header.value.clone()).ok()
        };
        Some(Self {
            stream: get(STREAM)?,
            shard_id: get(SHARD)?,
            sequence_number: get(SEQUENCE)?,
            subscriber: get(SUBSCRIBER)?,
            tenant: get(TENANT)?,
            attempts: get(ATTEMPTS)?.parse().ok()?,
            reason: get(REASON)?,
            app: get(APP),
        })
    }

    /// Whether `name` is one of the origin's headers.
    pub fn is_origin_header(name: &str) -> bool {
        [
            STREAM, SHARD, SEQUENCE, SUBSCRIBER, TENANT, ATTEMPTS, REASON, APP,
        ]
        .contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_reads_back_from_its_headers_and_only_whole() {
        let origin = DeadLetterOrigin {
            stream: "refunds".into(),
            shard_id: "shardId-000000000001".into(),
            sequence_number: "4968".into(),
            subscriber: "reconcile".into(),
            tenant: "acme".into(),
            app: Some("books".into()),
            attempts: 3,
            reason: ATTEMPTS_EXHAUSTED.into(),
        };
        let mut headers = vec![Header::new("trace", "abc")];
        headers.extend(origin.headers());
        assert_eq!(DeadLetterOrigin::from_headers(&headers), Some(origin));
        assert!(
            headers[1..]
                .iter()
                .all(|h| DeadLetterOrigin::is_origin_header(&h.name))
        );
        headers.pop();
        let without_app = DeadLetterOrigin::from_headers(&headers);
        assert_eq!(
            without_app.and_then(|o| o.app),
            None,
            "written before apps were"
        );
        headers.pop();
        assert_eq!(DeadLetterOrigin::from_headers(&headers), None);
    }
}
