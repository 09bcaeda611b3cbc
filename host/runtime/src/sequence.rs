//! Sequence numbers as the checkpoint bookkeeping keeps them: without a heap allocation per
//! record.
//!
//! Kinesis sequence numbers are decimal strings of 56 digits today, and up to 129 by the
//! API's pattern. The watermark keeps one per record in flight and copies them as the
//! checkpoint moves; held inline, tracking a record allocates nothing.

use std::fmt;

/// Bytes kept inline; a longer sequence number is kept on the heap.
const INLINE: usize = 62;

/// One shard sequence number, carried and never parsed or compared by value.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum SequenceNumber {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

impl SequenceNumber {
    /// The empty sequence number: what is left where one was taken out.
    pub(crate) const EMPTY: Self = Self::Inline {
        len: 0,
        bytes: [0; INLINE],
    };

    pub(crate) fn new(text: &str) -> Self {
        let Some(len) = u8::try_from(text.len())
            .ok()
            .filter(|&len| usize::from(len) <= INLINE)
        else {
            return Self::Heap(text.into());
        };
        let mut bytes = [0; INLINE];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Self::Inline { len, bytes }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // Whole UTF-8 text was copied in, so the prefix of its length is text too.
            Self::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            Self::Heap(text) => text,
        }
    }
}

impl fmt::Debug for SequenceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_numbers_read_back_whole() {
        let kinesis = "49590338271490256608559692538361571095921575989136588898";
        let longest = "1".repeat(129);
        for text in ["", "7", kinesis, &"9".repeat(INLINE), &longest] {
            assert_eq!(SequenceNumber::new(text).as_str(), text);
        }
        assert!(matches!(
            SequenceNumber::new(kinesis),
            SequenceNumber::Inline { .. }
        ));
        assert!(matches!(
            SequenceNumber::new(&longest),
            SequenceNumber::Heap(_)
        ));
    }
}
