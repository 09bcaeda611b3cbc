//! A batch laid out for `handle-batch`: three byte buffers, as `wit/ruststream.wit` describes
//! them. The component model copies a `list<u8>` with one `memcpy`; a list of records would be
//! copied field by field, and each list costs a call into the guest's allocator, so a batch
//! crosses as three lists whatever its size.
//!
//! The buffers are kept between calls: in steady state a batch allocates nothing.

use crate::record::Delivery;

/// Bytes of one entry of the `records` table.
pub(crate) const RECORD_ENTRY: usize = 44;
/// Bytes of one entry of the `headers` table.
pub(crate) const HEADER_ENTRY: usize = 16;

/// Most bytes a buffer keeps between calls.
const KEPT_BYTES: usize = 1 << 20;

/// The three buffers of one batch.
#[derive(Default)]
pub(crate) struct BatchLayout {
    /// Every byte of the batch: data, partition keys, sequence numbers, header names and values.
    pub(crate) arena: Vec<u8>,
    /// One [`RECORD_ENTRY`]-byte entry per record.
    pub(crate) records: Vec<u8>,
    /// One [`HEADER_ENTRY`]-byte entry per user header.
    pub(crate) headers: Vec<u8>,
}

impl BatchLayout {
    /// Lays out `deliveries`, replacing what the buffers held.
    pub(crate) fn fill(&mut self, deliveries: &[Delivery]) {
        self.arena.clear();
        self.records.clear();
        self.headers.clear();
        self.records.reserve(deliveries.len() * RECORD_ENTRY);
        for delivery in deliveries {
            self.push_record(delivery);
        }
    }

    /// Gives memory back after an unusually large batch, so an idle pipeline does not keep
    /// a GetRecords response's worth (up to 10 MB) for good.
    pub(crate) fn trim(&mut self) {
        for buffer in [&mut self.arena, &mut self.records, &mut self.headers] {
            if buffer.capacity() > KEPT_BYTES {
                buffer.clear();
                buffer.shrink_to(KEPT_BYTES);
            }
        }
    }

    fn push_record(&mut self, delivery: &Delivery) {
        let first_header = self.headers.len() / HEADER_ENTRY;
        for header in &delivery.headers {
            let name = self.push_bytes(header.name.as_bytes());
            let value = self.push_bytes(&header.value);
            self.headers.extend_from_slice(&name);
            self.headers.extend_from_slice(&value);
        }
        let data = self.push_bytes(&delivery.payload);
        let key = self.push_bytes(delivery.partition_key.as_bytes());
        let sequence = self.push_bytes(delivery.sequence_number.as_bytes());
        let mut entry = [0u8; RECORD_ENTRY];
        entry[0..8].copy_from_slice(&data);
        entry[8..16].copy_from_slice(&key);
        entry[16..24].copy_from_slice(&sequence);
        entry[24..32].copy_from_slice(&span(first_header, delivery.headers.len()));
        entry[32..40].copy_from_slice(&delivery.arrival_ms.to_le_bytes());
        entry[40..44].copy_from_slice(&delivery.attempt().to_le_bytes());
        self.records.extend_from_slice(&entry);
    }

    /// Appends `bytes` to the arena; returns their span.
    fn push_bytes(&mut self, bytes: &[u8]) -> [u8; 8] {
        let span = span(self.arena.len(), bytes.len());
        self.arena.extend_from_slice(bytes);
        span
    }
}

/// A span as laid out: offset and length, little-endian u32s. A GetRecords batch is at most
/// 10 MB (and a call's records a fraction of that), far below what u32 offsets reach.
fn span(offset: usize, len: usize) -> [u8; 8] {
    let mut span = [0u8; 8];
    span[..4].copy_from_slice(&(offset as u32).to_le_bytes());
    span[4..].copy_from_slice(&(len as u32).to_le_bytes());
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    use crate::record::Header;

    fn u32_at(bytes: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
    }

    fn delivery(sequence_number: &str, payload: &[u8], headers: Vec<Header>) -> Delivery {
        Delivery {
            sequence_number: sequence_number.into(),
            partition_key: "key".into(),
            arrival_ms: 1_700_000_000_123,
            payload: Bytes::copy_from_slice(payload),
            headers,
            retry_count: 2,
            due_at_ms: None,
            copy: None,
        }
    }

    #[test]
    fn entries_point_at_their_bytes() {
        let mut layout = BatchLayout::default();
        let traced = vec![Header::new("trace", "t-1"), Header::new("tenant", "a")];
        layout.fill(&[
            delivery("49", b"{}", traced),
            delivery("50", b"[1]", Vec::new()),
        ]);
        assert_eq!(layout.records.len(), 2 * RECORD_ENTRY);
        assert_eq!(layout.headers.len(), 2 * HEADER_ENTRY);
        let read = |entry: &[u8], at: usize| {
            let (offset, len) = (u32_at(entry, at) as usize, u32_at(entry, at + 4) as usize);
            layout.arena[offset..offset + len].to_vec()
        };
        let (first, second) = layout.records.split_at(RECORD_ENTRY);
        assert_eq!(read(first, 0), b"{}");
        assert_eq!(read(first, 8), b"key");
        assert_eq!(read(first, 16), b"49");
        assert_eq!((u32_at(first, 24), u32_at(first, 28)), (0, 2));
        assert_eq!(
            u64::from_le_bytes(first[32..40].try_into().expect("eight bytes")),
            1_700_000_000_123
        );
        assert_eq!(u32_at(first, 40), 3, "attempt = retry count + 1");
        assert_eq!(read(&layout.headers[HEADER_ENTRY..], 0), b"tenant");
        assert_eq!(read(&layout.headers[HEADER_ENTRY..], 8), b"a");
        assert_eq!(read(second, 0), b"[1]");
        assert_eq!((u32_at(second, 24), u32_at(second, 28)), (2, 0));
    }

    #[test]
    fn large_buffers_are_given_back() {
        let mut layout = BatchLayout::default();
        layout.fill(&[delivery("1", &vec![7; 3 * KEPT_BYTES], Vec::new())]);
        layout.trim();
        assert!(layout.arena.capacity() <= KEPT_BYTES);
        layout.fill(&[delivery("2", b"small", Vec::new())]);
        let kept = layout.arena.capacity();
        layout.trim();
        assert_eq!(layout.arena.capacity(), kept, "small buffers are kept");
    }

    #[test]
    fn a_refill_replaces_the_batch() {
        let mut layout = BatchLayout::default();
        layout.fill(&[delivery("1", b"first", vec![Header::new("h", "v")])]);
        layout.fill(&[delivery("2", b"x", Vec::new())]);
        assert_eq!(layout.records.len(), RECORD_ENTRY);
        assert!(layout.headers.is_empty());
        assert_eq!(layout.arena, b"xkey2");
    }
}
