//! The `RSK2` record envelope: user headers carried in front of the payload.
//!
//! The format is the one native RustStream services write, so streams can be shared with them:
//!
//! ```text
//! "RSK2" | u32 BE length of the header block | repeated (u32 BE name len, name, u32 BE value len, value) | payload
//! ```
//!
//! Records in the text envelope of native RustStream 0.6 (`"RSK1" | u32 BE length | lines of
//! "name: value\n" | payload`) are read too, never written.
//!
//! A record carries an envelope only when it has headers, or when its payload itself starts
//! with the magic: then an envelope with no headers keeps those bytes from being read as an
//! envelope, so nobody can forge the host's control headers through a raw payload. Anything
//! that does not start with a complete, well-formed envelope is a plain payload with no
//! headers: a producer that knows nothing of RustStream must never have its bytes misread.
//!
//! Header names starting with [`RESERVED_PREFIX`] belong to the host; a guest cannot publish
//! them.
//!
//! The headers a native RustStream reader sets on every delivery
//! ([`NATIVE_DELIVERY_HEADERS`]: the record's partition key, sequence number and shard) are
//! never user headers here, whatever an envelope says: a native service writes every header it
//! was delivered into the envelope of the copies it makes, so a native copy carries the
//! original's sequence number and shard. Its own reader overwrites them on read; this one
//! drops them (in any case), so a handler is never told another record's position. Nobody
//! may publish them either: every reader would discard them.

use std::sync::Arc;

use bytes::Bytes;

use crate::record::{CopyOrigin, CopyOwner, Delivery, Header, OutgoingRecord};
use crate::text::Text;

const MAGIC: &[u8; 4] = b"RSK2";
/// The text envelope native RustStream 0.6 wrote: read, never written.
const TEXT_MAGIC: &[u8; 4] = b"RSK1";

/// The header names the host keeps for itself: `x-ruststream-*`.
pub const RESERVED_PREFIX: &str = "x-ruststream-";

/// Header holding the number of deliveries a counted copy has already had (absent on the
/// first delivery; the attempt number is this count + 1).
pub const RETRY_COUNT_HEADER: &str = "x-ruststream-retry-count";

/// Header holding the earliest time, in milliseconds since the epoch, at which a
/// `retry_after` copy may be delivered. It travels with the copy so the delay survives a crash.
pub const DUE_AT_HEADER: &str = "x-ruststream-due-ms";

/// Header naming the subscription a counted copy is for, as `tenant/app/subscriber`: every
/// other reader of the stream moves past the copy without handling it.
pub const COPY_FOR_HEADER: &str = "x-ruststream-copy-for";

/// Header naming the record a chain of copies started from, as `shard/sequence`.
pub const COPY_OF_HEADER: &str = "x-ruststream-copy-of";

/// Header holding when the chain's first record arrived (ms since the epoch).
pub const FIRST_ARRIVAL_HEADER: &str = "x-ruststream-first-arrival-ms";

/// Header naming the redrive that wrote a dead letter back to its origin stream, as
/// `redrive-id/dead-letter-shard/dead-letter-sequence`: which dead letter it was, so that a
/// redrive resumed after a crash finds what it already wrote.
pub const REDRIVE_HEADER: &str = "x-ruststream-redrive";

/// The headers a native RustStream Kinesis reader (`ruststream-kinesis` 0.7) sets on every
/// delivery, over whatever the record's envelope holds: `partition-key` (which its writer
/// leaves out of envelopes), `kinesis-sequence-number` and `kinesis-shard-id` (which its
/// counted copies carry, as the copied record's). Names compare in any case, as the native
/// header map's do.
pub const NATIVE_DELIVERY_HEADERS: [&str; 3] = [
    "partition-key",
    "kinesis-sequence-number",
    "kinesis-shard-id",
];

/// A record's payload split from its envelope.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Unwrapped {
    /// The payload the handler decodes.
    pub payload: Bytes,
    /// User headers, without the host's own `x-ruststream-*` control headers and without
    /// [`NATIVE_DELIVERY_HEADERS`].
    pub headers: Vec<Header>,
    /// Value of [`RETRY_COUNT_HEADER`], 0 when absent or unreadable.
    pub retry_count: u32,
    /// Value of [`DUE_AT_HEADER`], when present and readable.
    pub due_at_ms: Option<u64>,
    /// What a copy made by a RustStream host says about itself, when all three of
    /// [`COPY_FOR_HEADER`], [`COPY_OF_HEADER`] and [`FIRST_ARRIVAL_HEADER`] are there and
    /// readable.
    pub copy: Option<Arc<CopyOrigin>>,
}

impl Delivery {
    /// Builds a delivery from the raw bytes of a stream record, unwrapping an `RSK2` envelope.
    /// The payload is a slice of `data`: nothing is copied.
    pub fn from_stream(
        sequence_number: Text,
        partition_key: Text,
        arrival_ms: u64,
        data: Bytes,
    ) -> Self {
        let unwrapped = unwrap_shared(data);
        Self {
            sequence_number,
            partition_key,
            arrival_ms,
            payload: unwrapped.payload,
            headers: unwrapped.headers,
            retry_count: unwrapped.retry_count,
            due_at_ms: unwrapped.due_at_ms,
            copy: unwrapped.copy,
        }
    }
}

impl OutgoingRecord {
    /// The bytes written to the stream: the payload inside an `RSK2` envelope when there are
    /// headers, the bare payload otherwise.
    pub fn to_stream_bytes(&self) -> Vec<u8> {
        wrap(&self.headers, &self.payload)
    }

    /// Size Kinesis counts against its record limit: data plus partition key.
    pub fn stream_size(&self) -> u64 {
        (wrapped_len(&self.headers, &self.payload) + self.partition_key.len()) as u64
    }

    /// A counted copy of `original`: same payload, key and user headers, the retry count set
    /// to `retry_count`, the due time when the copy is delayed, and `origin` when the copy
    /// goes back to its own stream for one subscription (a dead letter has none: whoever reads
    /// the dead-letter stream may handle it).
    pub fn counted_copy(
        original: &Delivery,
        retry_count: u32,
        due_at_ms: Option<u64>,
        origin: Option<&CopyOrigin>,
    ) -> Self {
        let mut headers = original.headers.clone();
        headers.push(Header::new(RETRY_COUNT_HEADER, retry_count.to_string()));
        if let Some(due) = due_at_ms {
            headers.push(Header::new(DUE_AT_HEADER, due.to_string()));
        }
        if let Some(origin) = origin {
            headers.extend(origin_headers(origin));
        }
        Self {
            partition_key: original.partition_key.to_string(),
            payload: original.payload.to_vec(),
            headers,
        }
    }
}

/// Whether `name` is one of the host's own header names.
pub fn is_reserved(name: &str) -> bool {
    name.len() >= RESERVED_PREFIX.len()
        && name.as_bytes()[..RESERVED_PREFIX.len()].eq_ignore_ascii_case(RESERVED_PREFIX.as_bytes())
}

/// Whether `name` is one of [`NATIVE_DELIVERY_HEADERS`], in any case.
pub fn is_set_on_delivery(name: &str) -> bool {
    NATIVE_DELIVERY_HEADERS
        .iter()
        .any(|native| native.eq_ignore_ascii_case(name))
}

/// Whether a record may not be published with a header `name`: one of the host's own
/// ([`is_reserved`]), or one readers set on delivery ([`is_set_on_delivery`]), which no reader
/// would ever show (this host drops it, a native one overwrites it).
pub fn refused_on_publish(name: &str) -> bool {
    is_reserved(name) || is_set_on_delivery(name)
}

/// Encodes `payload` with `headers`. Without headers the payload is returned as is, exactly as
/// the native services do, unless it starts with the envelope's magic: then it gets an
/// envelope with no headers, so it reads back as exactly those bytes.
///
/// # Panics
/// Never for realistic input; a header block over 4 GiB cannot be represented and would exceed
/// any stream's record size limit long before.
pub fn wrap(headers: &[Header], payload: &[u8]) -> Vec<u8> {
    if !needs_envelope(headers, payload) {
        return payload.to_vec();
    }
    let block_len = block_len(headers);
    let mut out = Vec::with_capacity(8 + block_len + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&be32(block_len));
    for header in headers {
        out.extend_from_slice(&be32(header.name.len()));
        out.extend_from_slice(header.name.as_bytes());
        out.extend_from_slice(&be32(header.value.len()));
        out.extend_from_slice(&header.value);
    }
    out.extend_from_slice(payload);
    out
}

/// The size of what [`wrap`] writes for `headers` and `payload`.
pub(crate) fn wrapped_len(headers: &[Header], payload: &[u8]) -> usize {
    let envelope = if needs_envelope(headers, payload) {
        8 + block_len(headers)
    } else {
        0
    };
    envelope + payload.len()
}

fn needs_envelope(headers: &[Header], payload: &[u8]) -> bool {
    !headers.is_empty() || payload.starts_with(MAGIC) || payload.starts_with(TEXT_MAGIC)
}

fn block_len(headers: &[Header]) -> usize {
    headers
        .iter()
        .map(|h| 8 + h.name.len() + h.value.len())
        .sum()
}

fn be32(len: usize) -> [u8; 4] {
    u32::try_from(len)
        .expect("envelope field longer than 4 GiB")
        .to_be_bytes()
}

/// Splits a record's bytes into headers and payload. Never fails: a malformed envelope is a
/// plain payload.
pub fn unwrap(data: &[u8]) -> Unwrapped {
    unwrap_shared(Bytes::copy_from_slice(data))
}

/// [`unwrap`], the payload a slice of `data`: a record read from a stream is not copied.
fn unwrap_shared(data: Bytes) -> Unwrapped {
    match parse(&data) {
        Some((headers, payload)) => split_control(headers, data.slice_ref(payload)),
        None => Unwrapped {
            payload: data,
            ..Unwrapped::default()
        },
    }
}

fn parse(data: &[u8]) -> Option<(Vec<Header>, &[u8])> {
    if let Some(rest) = data.strip_prefix(TEXT_MAGIC) {
        let (block, payload) = take_field(rest)?;
        return Some((parse_text_block(block), payload));
    }
    let rest = data.strip_prefix(MAGIC)?;
    let (block, payload) = take_field(rest)?;
    let mut headers = Vec::new();
    let mut cursor = block;
    while !cursor.is_empty() {
        let (name, after_name) = take_field(cursor)?;
        let (value, after_value) = take_field(after_name)?;
        let name = std::str::from_utf8(name).ok()?;
        headers.push(Header {
            name: name.to_owned(),
            value: value.to_vec(),
        });
        cursor = after_value;
    }
    Some((headers, payload))
}

/// The header block of an `RSK1` envelope: one `name: value` per line, both trimmed, as native
/// RustStream 0.6 wrote and read it (a line without a colon is skipped).
fn parse_text_block(block: &[u8]) -> Vec<Header> {
    String::from_utf8_lossy(block)
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| Header::new(name.trim(), value.trim()))
        .collect()
}

fn take_u32(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let (len, rest) = bytes.split_first_chunk::<4>()?;
    Some((u32::from_be_bytes(*len) as usize, rest))
}

fn take_field(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = take_u32(bytes)?;
    (rest.len() >= len).then(|| rest.split_at(len))
}

fn split_control(all: Vec<Header>, payload: Bytes) -> Unwrapped {
    let mut out = Unwrapped {
        payload,
        ..Unwrapped::default()
    };
    let mut copy = CopyHeaders::default();
    for header in all {
        match header.name.as_str() {
            RETRY_COUNT_HEADER => out.retry_count = parse_number(&header.value).unwrap_or(0),
            DUE_AT_HEADER => out.due_at_ms = parse_number(&header.value),
            COPY_FOR_HEADER => copy.owner = parse_owner(&header.value),
            COPY_OF_HEADER => copy.chain = String::from_utf8(header.value).ok(),
            FIRST_ARRIVAL_HEADER => copy.first_arrival_ms = parse_number(&header.value),
            // A native copy's record of where the original was: never this record's.
            name if is_set_on_delivery(name) => {}
            _ => out.headers.push(header),
        }
    }
    out.copy = copy.origin().map(Arc::new);
    out
}

/// The copy headers of one record, as read.
#[derive(Default)]
struct CopyHeaders {
    owner: Option<CopyOwner>,
    chain: Option<String>,
    first_arrival_ms: Option<u64>,
}

impl CopyHeaders {
    /// The origin, when every part of it was there and readable.
    fn origin(self) -> Option<CopyOrigin> {
        Some(CopyOrigin {
            owner: self.owner?,
            chain: self.chain.filter(|chain| !chain.is_empty())?,
            first_arrival_ms: self.first_arrival_ms?,
        })
    }
}

/// The headers that carry `origin`: a copy of a record for the subscription it names.
pub fn origin_headers(origin: &CopyOrigin) -> [Header; 3] {
    let owner = &origin.owner;
    [
        Header::new(
            COPY_FOR_HEADER,
            format!("{}/{}/{}", owner.tenant, owner.app, owner.subscriber),
        ),
        Header::new(COPY_OF_HEADER, origin.chain.clone()),
        Header::new(FIRST_ARRIVAL_HEADER, origin.first_arrival_ms.to_string()),
    ]
}

/// `tenant/app/subscriber`. App and subscriber names never hold a `/` (they are
/// `[A-Za-z0-9_.-]`), so the last two separators are theirs whatever the tenant is called.
fn parse_owner(value: &[u8]) -> Option<CopyOwner> {
    let value = std::str::from_utf8(value).ok()?;
    let mut parts = value.rsplitn(3, '/');
    let subscriber = parts.next()?;
    let app = parts.next()?;
    let tenant = parts.next()?;
    [tenant, app, subscriber]
        .iter()
        .all(|part| !part.is_empty())
        .then(|| CopyOwner {
            tenant: tenant.to_owned(),
            app: app.to_owned(),
            subscriber: subscriber.to_owned(),
        })
}

fn parse_number<T: std::str::FromStr>(value: &[u8]) -> Option<T> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, value: &str) -> Header {
        Header {
            name: name.into(),
            value: value.as_bytes().to_vec(),
        }
    }

    #[test]
    fn no_headers_is_the_bare_payload() {
        assert_eq!(wrap(&[], b"{\"a\":1}"), b"{\"a\":1}");
        let plain = unwrap(b"{\"a\":1}");
        assert_eq!(&plain.payload[..], b"{\"a\":1}");
        assert!(plain.headers.is_empty());
        assert_eq!(plain.retry_count, 0);
    }

    #[test]
    fn round_trips_user_and_control_headers() {
        let headers = vec![
            header("trace-id", "abc"),
            header(RETRY_COUNT_HEADER, "2"),
            header(DUE_AT_HEADER, "1700000000123"),
        ];
        let bytes = wrap(&headers, b"payload");
        let parsed = unwrap(&bytes);
        assert_eq!(&parsed.payload[..], b"payload");
        assert_eq!(parsed.headers, vec![header("trace-id", "abc")]);
        assert_eq!(parsed.retry_count, 2);
        assert_eq!(parsed.due_at_ms, Some(1_700_000_000_123));
    }

    #[test]
    fn matches_the_native_byte_layout() {
        let bytes = wrap(&[header("k", "vv")], b"P");
        let expected: &[u8] = b"RSK2\x00\x00\x00\x0b\x00\x00\x00\x01k\x00\x00\x00\x02vvP";
        assert_eq!(bytes, expected);
    }

    #[test]
    fn malformed_envelopes_are_plain_payloads() {
        for bad in [
            &b"RSK2"[..],
            b"RSK2\x00\x00\x00\x09\x00\x00\x00\x01k",
            b"RSK2\x00\x00\x00\x05\x00\x00\x00\x09kvalue",
            b"RSK2\x00\x00\x00\x0a\x00\x00\x00\x02\xff\xfe\x00\x00\x00\x00",
        ] {
            let parsed = unwrap(bad);
            assert_eq!(parsed.payload, bad, "{bad:?}");
            assert!(parsed.headers.is_empty());
        }
    }

    #[test]
    fn a_raw_payload_that_looks_like_an_envelope_is_carried_as_data() {
        let forged = wrap(&[header(DUE_AT_HEADER, "99999999999999")], b"{}");
        let bytes = wrap(&[], &forged);
        assert_eq!(bytes.len(), wrapped_len(&[], &forged));
        let read = unwrap(&bytes);
        assert_eq!(read.payload, forged, "the guest's bytes, untouched");
        assert_eq!(read.due_at_ms, None, "no control header was forged");
        assert!(read.headers.is_empty());
    }

    #[test]
    fn reserved_names_are_recognised_in_any_case() {
        assert!(is_reserved(DUE_AT_HEADER));
        assert!(is_reserved("X-RustStream-Retry-Count"));
        assert!(is_reserved("x-ruststream-anything"));
        assert!(!is_reserved("x-rust"));
        assert!(!is_reserved("trace-id"));
    }

    /// A native service's counted copy, as its framework writes it: every header it was
    /// delivered (the user's, then the sequence number and shard its reader set; the partition
    /// key its writer leaves out), and the retry count.
    fn native_copy(names: [&str; 3]) -> Vec<u8> {
        let [partition, sequence, shard] = names;
        wrap(
            &[
                header("x-tenant", "acme"),
                header(partition, "pk-of-the-original"),
                header(
                    sequence,
                    "49650000000000000000000000000000000000000000000000000001",
                ),
                header(shard, "shardId-000000000003"),
                header(RETRY_COUNT_HEADER, "1"),
            ],
            b"{}",
        )
    }

    #[test]
    fn headers_a_native_reader_sets_on_delivery_are_never_user_headers() {
        for names in [
            NATIVE_DELIVERY_HEADERS,
            [
                "Partition-Key",
                "KINESIS-SEQUENCE-NUMBER",
                "Kinesis-Shard-Id",
            ],
        ] {
            let read = unwrap(&native_copy(names));
            assert_eq!(read.headers, vec![header("x-tenant", "acme")], "{names:?}");
            assert_eq!(read.retry_count, 1);
            assert_eq!(&read.payload[..], b"{}");
        }
        // The text envelope of native 0.6 too.
        let block = b"kinesis-sequence-number: 1\nKinesis-Shard-Id: s\ntrace: t\n";
        let mut data = b"RSK1".to_vec();
        data.extend_from_slice(&(block.len() as u32).to_be_bytes());
        data.extend_from_slice(block);
        assert_eq!(unwrap(&data).headers, vec![header("trace", "t")]);
        // Names that only look alike are the user's.
        let alike = wrap(&[header("kinesis-sequence-numbers", "1")], b"");
        assert_eq!(unwrap(&alike).headers.len(), 1);
    }

    #[test]
    fn no_publish_may_carry_the_hosts_or_the_readers_headers() {
        for name in NATIVE_DELIVERY_HEADERS.into_iter().chain([
            "Kinesis-Shard-Id",
            RETRY_COUNT_HEADER,
            "X-RustStream-Anything",
        ]) {
            assert!(refused_on_publish(name), "{name}");
        }
        for name in ["trace-id", "kinesis-region", "partition", "x-rust"] {
            assert!(!refused_on_publish(name), "{name}");
        }
    }

    #[test]
    fn unreadable_control_values_are_ignored() {
        let bytes = wrap(&[header(RETRY_COUNT_HEADER, "many")], b"x");
        let parsed = unwrap(&bytes);
        assert_eq!(parsed.retry_count, 0);
        assert!(parsed.headers.is_empty());
    }

    #[test]
    fn a_counted_copy_reads_back_with_its_count_and_due_time() {
        let original = Delivery {
            sequence_number: "1".into(),
            partition_key: "pk".into(),
            arrival_ms: 5,
            payload: Bytes::from_static(b"{}"),
            headers: vec![Header::new("trace", "t1")],
            retry_count: 1,
            due_at_ms: None,
            copy: None,
        };
        let copy = OutgoingRecord::counted_copy(&original, 2, Some(99), None);
        let bytes = copy.to_stream_bytes();
        assert_eq!(copy.stream_size(), (bytes.len() + 2) as u64);
        let read = Delivery::from_stream("2".into(), "pk".into(), 6, bytes.clone().into());
        assert_eq!(&read.payload[..], b"{}");
        assert_eq!(read.headers, original.headers);
        assert_eq!(read.attempt(), 3);
        assert_eq!(read.due_at_ms, Some(99));
        assert_eq!(read.copy, None, "a dead letter's kind of copy is nobody's");
    }

    fn owner(tenant: &str) -> CopyOwner {
        CopyOwner {
            tenant: tenant.into(),
            app: "ledger".into(),
            subscriber: "book".into(),
        }
    }

    #[test]
    fn a_copy_names_its_owner_chain_and_first_arrival() {
        let original = Delivery::from_stream("41".into(), "pk".into(), 1_000, Bytes::from("{}"));
        let first = CopyOrigin::of(&original, "shard-0", &owner("acme/eu"));
        let bytes =
            OutgoingRecord::counted_copy(&original, 1, None, Some(&first)).to_stream_bytes();
        let copy = Delivery::from_stream("42".into(), "pk".into(), 5_000, bytes.into());
        let read = copy.copy.as_deref().expect("the copy says whose it is");
        assert_eq!(
            read.owner,
            owner("acme/eu"),
            "a tenant with a `/` reads back whole"
        );
        assert_eq!(read.chain, "shard-0/41");
        assert_eq!(copy.first_arrival_ms(), 1_000);
        assert!(
            copy.headers.is_empty(),
            "control headers are not user headers"
        );
        // A copy of the copy continues the chain.
        let next = CopyOrigin::of(&copy, "shard-7", &owner("acme/eu"));
        assert_eq!(
            (next.chain.as_str(), next.first_arrival_ms),
            ("shard-0/41", 1_000)
        );
    }

    #[test]
    fn a_partial_or_unreadable_copy_origin_is_no_origin() {
        for headers in [
            vec![
                header(COPY_FOR_HEADER, "t/a/s"),
                header(COPY_OF_HEADER, "s/1"),
            ],
            vec![
                header(COPY_FOR_HEADER, "a/s"),
                header(COPY_OF_HEADER, "s/1"),
                header(FIRST_ARRIVAL_HEADER, "5"),
            ],
            vec![
                header(COPY_FOR_HEADER, "t/a/s"),
                header(COPY_OF_HEADER, "s/1"),
                header(FIRST_ARRIVAL_HEADER, "soon"),
            ],
        ] {
            let read = unwrap(&wrap(&headers, b"x"));
            assert_eq!(read.copy, None, "{headers:?}");
            assert!(read.headers.is_empty());
        }
    }

    #[test]
    fn reads_the_text_envelope_of_native_0_6() {
        let mut data = b"RSK1".to_vec();
        let block = b"trace-id: abc\nx-ruststream-retry-count: 2\nno colon here\n";
        data.extend_from_slice(&(block.len() as u32).to_be_bytes());
        data.extend_from_slice(block);
        data.extend_from_slice(b"{\"id\":1}");
        let read = unwrap(&data);
        assert_eq!(&read.payload[..], b"{\"id\":1}");
        assert_eq!(read.headers, vec![header("trace-id", "abc")]);
        assert_eq!(read.retry_count, 2);
        let cut = &data[..10];
        assert_eq!(
            unwrap(cut).payload,
            cut,
            "a cut text envelope is a plain payload"
        );
    }

    #[test]
    fn a_raw_payload_that_looks_like_a_text_envelope_is_carried_as_data() {
        let mut raw = b"RSK1".to_vec();
        raw.extend_from_slice(&[0, 0, 0, 0]);
        raw.extend_from_slice(b"data");
        let read = unwrap(&wrap(&[], &raw));
        assert_eq!(read.payload, raw);
    }
}
