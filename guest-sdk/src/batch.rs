//! The batch `handle-batch` hands over, read where it lies: three byte buffers laid out as
//! `wit/ruststream.wit` describes them. `records` and `headers` are tables of fixed-size
//! little-endian entries whose spans point into `arena`; nothing is copied or decoded until a
//! handler asks for it. A record `handle` hands over is read through the same view.

use crate::bindings::exports::ruststream::handler::handler::Record;

/// Bytes of one entry of the `records` table.
const RECORD_ENTRY: usize = 44;
/// Bytes of one entry of the `headers` table.
const HEADER_ENTRY: usize = 16;

/// One record, read where it lies: each field is found when a handler asks for it, so a record
/// a handler reads only the data of costs one span. Text is checked for UTF-8 only when a
/// handler asks for it.
#[derive(Clone, Copy)]
pub(crate) enum RecordView<'a> {
    /// An entry of a batch's record table, with the buffers its spans address.
    Entry {
        arena: &'a [u8],
        headers: &'a [u8],
        entry: &'a [u8; RECORD_ENTRY],
    },
    /// The record a `handle` call carries.
    Record(&'a Record),
}

/// A record's user headers: entries of the batch's header table, or the list a `handle`
/// call carries.
#[derive(Clone, Copy)]
pub(crate) enum HeaderList<'a> {
    Table { arena: &'a [u8], entries: &'a [u8] },
    List(&'a [crate::bindings::ruststream::handler::types::Header]),
}

impl<'a> HeaderList<'a> {
    pub(crate) fn iter(self) -> impl Iterator<Item = (&'a str, &'a [u8])> {
        let (table, list) = match self {
            Self::Table { arena, entries } => (Some((arena, entries)), None),
            Self::List(list) => (None, Some(list)),
        };
        let from_table = table.into_iter().flat_map(|(arena, entries)| {
            entries.chunks_exact(HEADER_ENTRY).map(move |entry| {
                let name = span(arena, entry, 0, 1);
                (text(name), span(arena, entry, 8, 1))
            })
        });
        let from_list = list
            .into_iter()
            .flatten()
            .map(|header| (header.name.as_str(), header.value.as_slice()));
        from_table.chain(from_list)
    }
}

impl<'a> RecordView<'a> {
    /// The record's data.
    #[inline]
    pub(crate) fn data(self) -> &'a [u8] {
        match self {
            Self::Entry { arena, entry, .. } => span(arena, entry, 0, 1),
            Self::Record(record) => &record.data,
        }
    }

    /// The record's partition key, as bytes.
    pub(crate) fn partition_key(self) -> &'a [u8] {
        match self {
            Self::Entry { arena, entry, .. } => span(arena, entry, 8, 1),
            Self::Record(record) => record.partition_key.as_bytes(),
        }
    }

    /// The record's sequence number, as bytes.
    pub(crate) fn sequence_number(self) -> &'a [u8] {
        match self {
            Self::Entry { arena, entry, .. } => span(arena, entry, 16, 1),
            Self::Record(record) => record.sequence_number.as_bytes(),
        }
    }

    /// Approximate arrival time at the stream, ms since the epoch.
    pub(crate) fn arrival_ms(self) -> u64 {
        match self {
            Self::Entry { entry, .. } => u64_at(entry, 32),
            Self::Record(record) => record.arrival_ms,
        }
    }

    /// 1 on first delivery; counted copies the previous count + 1.
    pub(crate) fn attempt(self) -> u32 {
        match self {
            Self::Entry { entry, .. } => u32_at(entry, 40),
            Self::Record(record) => record.attempt,
        }
    }

    /// The record's user headers.
    pub(crate) fn headers(self) -> HeaderList<'a> {
        match self {
            Self::Entry {
                arena,
                headers,
                entry,
            } => HeaderList::Table {
                arena,
                entries: span(headers, entry, 24, HEADER_ENTRY),
            },
            Self::Record(record) => HeaderList::List(&record.headers),
        }
    }
}

/// `bytes` as text; empty when they are not UTF-8 (the host only sends UTF-8).
pub(crate) fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}

/// A batch as the host laid it out.
pub(crate) struct Batch<'a> {
    arena: &'a [u8],
    records: &'a [u8],
    headers: &'a [u8],
}

impl<'a> Batch<'a> {
    pub(crate) fn new(arena: &'a [u8], records: &'a [u8], headers: &'a [u8]) -> Self {
        Self {
            arena,
            records,
            headers,
        }
    }

    /// How many records the batch has (a partial entry at the end is none).
    pub(crate) fn len(&self) -> usize {
        self.records.len() / RECORD_ENTRY
    }

    /// The records in shard order. A span the host got wrong reads as empty rather than
    /// trapping the component; a partial entry at the end is no record, and the host counts
    /// it as a failed attempt when the call returns without its outcome.
    pub(crate) fn records(&self) -> impl Iterator<Item = RecordView<'a>> + use<'a> {
        let (arena, headers) = (self.arena, self.headers);
        let (entries, _partial) = self.records.as_chunks::<RECORD_ENTRY>();
        entries.iter().map(move |entry| RecordView::Entry {
            arena,
            headers,
            entry,
        })
    }
}

/// The part of `buffer` that the span at `at` in `entry` names, counted in units of `unit`
/// bytes; empty when it lies outside.
#[inline]
fn span<'a>(buffer: &'a [u8], entry: &[u8], at: usize, unit: usize) -> &'a [u8] {
    let start = (u32_at(entry, at) as usize).saturating_mul(unit);
    let len = (u32_at(entry, at + 4) as usize).saturating_mul(unit);
    buffer
        .get(start..start.saturating_add(len))
        .unwrap_or_default()
}

fn u32_at(entry: &[u8], at: usize) -> u32 {
    entry
        .get(at..at + 4)
        .and_then(|bytes| bytes.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

fn u64_at(entry: &[u8], at: usize) -> u64 {
    entry
        .get(at..at + 8)
        .and_then(|bytes| bytes.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(fields: &[u32], arrival_ms: u64, attempt: u32) -> Vec<u8> {
        let mut entry: Vec<u8> = fields.iter().flat_map(|f| f.to_le_bytes()).collect();
        entry.extend_from_slice(&arrival_ms.to_le_bytes());
        entry.extend_from_slice(&attempt.to_le_bytes());
        entry
    }

    #[test]
    fn records_are_read_from_their_entries() {
        let arena = b"{}key-149traceidabc";
        let headers: Vec<u8> = [9u32, 7, 16, 3]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect();
        let mut records = entry(&[0, 2, 2, 5, 7, 2, 0, 1], 1_700_000_000_000, 3);
        records.extend(entry(&[0, 0, 0, 0, 0, 0, 0, 0], 5, 1));
        let batch = Batch::new(arena, &records, &headers);
        let views: Vec<RecordView<'_>> = batch.records().collect();
        assert_eq!(views.len(), 2);
        let first = views[0];
        assert_eq!(first.data(), b"{}");
        assert_eq!(first.partition_key(), b"key-1");
        assert_eq!(first.sequence_number(), b"49");
        assert_eq!(
            (first.arrival_ms(), first.attempt()),
            (1_700_000_000_000, 3)
        );
        let first_headers: Vec<_> = first.headers().iter().collect();
        assert_eq!(first_headers, [("traceid", &b"abc"[..])]);
        assert_eq!(views[1].data(), b"");
        assert_eq!(views[1].headers().iter().count(), 0);
    }

    #[test]
    fn spans_outside_their_buffer_read_as_empty() {
        let records = entry(&[100, 4, u32::MAX, u32::MAX, 0, 1, 5, 1], 0, 1);
        let batch = Batch::new(b"x", &records[..], &[]);
        let view = batch.records().next().expect("one record");
        assert_eq!(view.data(), b"");
        assert_eq!(view.partition_key(), b"");
        assert_eq!(view.sequence_number(), b"x");
        assert_eq!(view.headers().iter().count(), 0);
    }

    #[test]
    fn a_partial_entry_is_no_record() {
        let mut records = entry(&[0; 8], 0, 1);
        records.extend_from_slice(&[0; RECORD_ENTRY - 1]);
        assert_eq!(Batch::new(b"", &records, &[]).records().count(), 1);
    }
}
