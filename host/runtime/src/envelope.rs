//! The `RSK2` record envelope: user headers carried in front of the payload.
//!
//! The format is the one native RustStream services write, so streams can be shared with them:
//!
//! ```text
//! "RSK2" | u32 BE length of the header block | repeated (u32 BE name len, name, u32 BE value len, value) | payload
//! ```
//!
//! A record carries an envelope only when it has headers, or when its payload itself starts
//! with the magic: then an envelope with no headers keeps those bytes from being read as an
//! envelope, so nobody can forge the host's control headers through a raw payload. Anything
//! that does not start with a complete, well-formed envelope is a plain payload with no
//! headers: a producer that knows nothing of RustStream must never have its bytes misread.
//!
//! Header names starting with [`RESERVED_PREFIX`] belong to the host; a guest cannot publish
//! them.

use bytes::Bytes;

use crate::record::{Delivery, Header, OutgoingRecord};
use crate::text::Text;

const MAGIC: &[u8; 4] = b"RSK2";

/// The header names the host keeps for itself: `x-ruststream-*`.
pub const RESERVED_PREFIX: &str = "x-ruststream-";

/// Header holding the number of deliveries a counted copy has already had (absent on the
/// first delivery; the attempt number is this count + 1).
pub const RETRY_COUNT_HEADER: &str = "x-ruststream-retry-count";

/// Header holding the earliest time, in milliseconds since the epoch, at which a
/// `retry_after` copy may be delivered. It travels with the copy so the delay survives a crash.
pub const DUE_AT_HEADER: &str = "x-ruststream-due-ms";

/// A record's payload split from its envelope.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Unwrapped {
    /// The payload the handler decodes.
    pub payload: Bytes,
    /// User headers, without the host's own `x-ruststream-*` control headers.
    pub headers: Vec<Header>,
    /// Value of [`RETRY_COUNT_HEADER`], 0 when absent or unreadable.
    pub retry_count: u32,
    /// Value of [`DUE_AT_HEADER`], when present and readable.
    pub due_at_ms: Option<u64>,
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
    /// to `retry_count`, and the due time when the copy is delayed.
    pub fn counted_copy(original: &Delivery, retry_count: u32, due_at_ms: Option<u64>) -> Self {
        let mut headers = original.headers.clone();
        headers.push(Header::new(RETRY_COUNT_HEADER, retry_count.to_string()));
        if let Some(due) = due_at_ms {
            headers.push(Header::new(DUE_AT_HEADER, due.to_string()));
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
    !headers.is_empty() || payload.starts_with(MAGIC)
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
    let rest = data.strip_prefix(MAGIC)?;
    let (block_len, rest) = take_u32(rest)?;
    let block = rest.get(..block_len)?;
    let payload = &rest[block_len..];
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
    for header in all {
        match header.name.as_str() {
            RETRY_COUNT_HEADER => out.retry_count = parse_number(&header.value).unwrap_or(0),
            DUE_AT_HEADER => out.due_at_ms = parse_number(&header.value),
            _ => out.headers.push(header),
        }
    }
    out
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
        };
        let copy = OutgoingRecord::counted_copy(&original, 2, Some(99));
        let bytes = copy.to_stream_bytes();
        assert_eq!(copy.stream_size(), (bytes.len() + 2) as u64);
        let read = Delivery::from_stream("2".into(), "pk".into(), 6, bytes.clone().into());
        assert_eq!(&read.payload[..], b"{}");
        assert_eq!(read.headers, original.headers);
        assert_eq!(read.attempt(), 3);
        assert_eq!(read.due_at_ms, Some(99));
    }
}
