//! Text kept in a shared buffer: a record's sequence number and partition key as slices of
//! one buffer that holds the strings of the whole answer they were read with.
//!
//! A GetRecords answer carries up to 10 000 records; giving each record's strings a heap
//! buffer of their own cost an allocation to read and a free to settle, per string. A [`Text`]
//! is a [`Bytes`] known to hold UTF-8: slices of one buffer share it, and dropping one is a
//! reference count.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, Range};
use std::str::Utf8Error;

use bytes::Bytes;

/// Immutable UTF-8 text in a shared [`Bytes`] buffer. Cloning and slicing share the buffer.
///
/// Compares, hashes and prints as the `str` it holds.
#[derive(Clone, Default)]
pub struct Text(Bytes);

impl Text {
    /// The text of `bytes`, or where it is not UTF-8.
    pub fn from_utf8(bytes: Bytes) -> Result<Self, Utf8Error> {
        std::str::from_utf8(&bytes)?;
        Ok(Self(bytes))
    }

    /// The part `range` of the text, sharing its buffer.
    ///
    /// # Panics
    /// When `range` is out of bounds or does not fall on character boundaries, as indexing a
    /// `str` does.
    pub fn slice(&self, range: Range<usize>) -> Self {
        // Indexing the `str` checks the bounds and the character boundaries.
        let _ = &self.as_str()[range.clone()];
        Self(self.0.slice(range))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // SAFETY: every constructor either checks the bytes are UTF-8 or takes them from a
        // `str` (whole, or a subslice of one at `str` boundaries, which is UTF-8 too).
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }

    /// The buffer, shared.
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for Text {
    /// Takes the string's buffer; nothing is copied.
    fn from(text: String) -> Self {
        Self(Bytes::from(text))
    }
}

impl From<&str> for Text {
    /// Copies the text into a buffer of its own.
    fn from(text: &str) -> Self {
        Self(Bytes::copy_from_slice(text.as_bytes()))
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_share_the_buffer_and_read_as_their_text() {
        let whole = Text::from(String::from(r#"{"k":"é-1","s":"49"}"#));
        let key = whole.slice(6..10);
        assert_eq!(key, "é-1");
        assert_eq!(key.as_bytes().as_ptr(), whole.as_bytes()[6..].as_ptr());
        assert_eq!(format!("{key} {key:?}"), "é-1 \"é-1\"");
    }

    #[test]
    #[should_panic(expected = "is not a char boundary")]
    fn a_slice_inside_a_character_panics_as_str_indexing_does() {
        let _ = Text::from("é").slice(1..2);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused() {
        assert!(Text::from_utf8(Bytes::from_static(b"ok")).is_ok());
        assert!(Text::from_utf8(Bytes::from_static(&[b'a', 0xff])).is_err());
    }

    #[test]
    fn compares_and_hashes_as_its_str() {
        use std::collections::HashSet;
        let text = Text::from("shard-1");
        assert_eq!(text, "shard-1");
        assert_eq!(text, String::from("shard-1"));
        let set: HashSet<Text> = [text].into_iter().collect();
        assert!(set.contains("shard-1"));
    }
}
