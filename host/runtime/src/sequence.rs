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
#[derive(Clone)]
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
        copy_in(&mut bytes, text.as_bytes());
        Self::Inline { len, bytes }
    }

    /// Makes this `text`, in place: what the watermark does for each record it tracks, so
    /// the number is written once, where it is kept, rather than built and then moved.
    #[inline]
    pub(crate) fn set(&mut self, text: &str) {
        match (self, u8::try_from(text.len())) {
            (Self::Inline { len, bytes }, Ok(new)) if usize::from(new) <= INLINE => {
                *len = new;
                copy_in(bytes, text.as_bytes());
            }
            (this, _) => *this = Self::new(text),
        }
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

/// Copies `text` (at most [`INLINE`] bytes) to the front of `bytes`. From 32 bytes on (a
/// Kinesis sequence number has 56) as two fixed-size copies that overlap, which compile to a
/// few vector moves where a copy of any length is a call to `memcpy`.
#[inline(always)]
fn copy_in(bytes: &mut [u8; INLINE], text: &[u8]) {
    let len = text.len().min(INLINE);
    if len >= 32 {
        bytes[..32].copy_from_slice(&text[..32]);
        bytes[len - 32..len].copy_from_slice(&text[len - 32..len]);
    } else {
        bytes[..len].copy_from_slice(&text[..len]);
    }
}

/// Equal when the numbers are: an inline number's bytes past its length are whatever was
/// there before a [`SequenceNumber::set`].
impl PartialEq for SequenceNumber {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SequenceNumber {}

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
        let lengths = (0..=INLINE + 1).map(|len| kinesis.repeat(2)[..len].to_owned());
        for text in ["", "7", kinesis, &"9".repeat(INLINE), &longest]
            .map(str::to_owned)
            .into_iter()
            .chain(lengths)
        {
            assert_eq!(SequenceNumber::new(&text).as_str(), text);
            // Set over a longer number, a shorter one and a long one kept on the heap.
            for before in [kinesis, "1", &longest] {
                let mut number = SequenceNumber::new(before);
                number.set(&text);
                assert_eq!(number.as_str(), text, "{before} set to {text}");
                assert_eq!(number, SequenceNumber::new(&text));
            }
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
