//! Payloads decoded from JSON: a reader for the shapes handlers take, with serde_json as the
//! authority for everything else.
//!
//! serde_json, compiled to wasm and then by Cranelift, was most of a small record's cost (about
//! 1 000 instructions of 2 400 for `{"id":1000000,"amount":37}`, see `docs/benchmarks.md`): its
//! helpers are calls, and under Cranelift every call pays a stack check, an epoch check and
//! register saves; every string it reads from bytes goes through `str::from_utf8`; each digit
//! is a call. [`from_slice`] first reads with [`Reader`], a deserializer whose hot path is a
//! few loops inlined into the caller (docs/benchmarks.md has what it costs now), which
//! refuses anything it is not sure to read exactly as serde_json does: malformed JSON, numbers
//! serde_json would round its own way, values of another kind than the type asks for, keys not
//! read as strings, serde_json's raw values, bytes. Whatever it refuses goes to
//! `serde_json::from_slice`, whose answer, value or error, is the one returned. So a value is
//! always the one serde_json reads, and an error always serde_json's; a record the reader
//! refuses costs both.

use std::sync::OnceLock;

use serde::de::value::{BorrowedStrDeserializer, StrDeserializer};
use serde::de::{self, DeserializeOwned, DeserializeSeed, Visitor};

/// `bytes` as JSON of type `T`, exactly as `serde_json::from_slice` reads them.
///
/// # Errors
/// serde_json's, when the bytes are not JSON of type `T`.
pub(crate) fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    if !plain_numbers() {
        return serde_json::from_slice(bytes);
    }
    let mut reader = Reader::new(bytes);
    match T::deserialize(&mut reader).and_then(|value| reader.end().map(|()| value)) {
        Ok(value) => Ok(value),
        Err(Refused) => serde_json::from_slice(bytes),
    }
}

/// Whether serde_json is built as the reader assumes. A tenant's dependencies may turn on its
/// `arbitrary_precision` feature, which keeps a number's text ("1.50") where the reader hands
/// over its value (1.5): then serde_json reads every payload.
fn plain_numbers() -> bool {
    static PLAIN: OnceLock<bool> = OnceLock::new();
    *PLAIN.get_or_init(|| {
        let read = serde_json::from_str::<serde_json::Number>("1.50");
        read.is_ok_and(|number| matches!(number.to_string().as_str(), "1.5"))
    })
}

/// The reader gave up: serde_json decides. Carries nothing, so giving up allocates nothing.
#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("left to serde_json")
    }
}

impl std::error::Error for Refused {}

impl de::Error for Refused {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Refused
    }
}

type Result<T> = std::result::Result<T, Refused>;

/// serde_json's nesting limit: it reads 127 arrays or objects inside each other and refuses
/// the 128th; so does the reader (and serde_json then refuses it for good).
const MAX_DEPTH: u8 = 127;

/// Powers of ten a `f64` holds exactly: a decimal of at most 2^53 with an exponent in this
/// range is one correctly rounded operation, the same one serde_json makes.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The bytes that end the plain run of a string: its closing quote, an escape, and the
/// control characters JSON forbids in strings.
const STOPS: [bool; 256] = {
    let mut stops = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        stops[byte] = true;
        byte += 1;
    }
    stops[b'"' as usize] = true;
    stops[b'\\' as usize] = true;
    stops
};

/// Eight bytes of ones, to repeat a byte across a `u64`.
const ONES: u64 = 0x0101_0101_0101_0101;

/// The high bit of each of eight bytes.
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The bytes of `word` (little-endian) that end a string's plain run, as [`STOPS`] has them,
/// each marked by its high bit. Only the lowest mark is exact (a borrow can mark a byte above
/// a true one), which is the one a reader needs: where the run ends.
#[inline(always)]
fn stop_bytes(word: u64) -> u64 {
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH_BITS;
    let quote = zero(word ^ (ONES * u64::from(b'"')));
    let backslash = zero(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH_BITS;
    quote | backslash | control
}

/// A JSON reader over one payload.
struct Reader<'de> {
    input: &'de [u8],
    at: usize,
    depth: u8,
    /// A string with escapes, unescaped.
    scratch: Vec<u8>,
}

/// A string read: a slice of the input, or unescaped into the scratch buffer.
enum Text<'de, 's> {
    Borrowed(&'de str),
    Copied(&'s str),
}

enum Number {
    U64(u64),
    I64(i64),
    F64(f64),
}

impl<'de> Reader<'de> {
    fn new(input: &'de [u8]) -> Self {
        Self {
            input,
            at: 0,
            depth: MAX_DEPTH,
            scratch: Vec::new(),
        }
    }

    /// Only whitespace may follow the value.
    #[inline(always)]
    fn end(&mut self) -> Result<()> {
        match self.peek_token() {
            None => Ok(()),
            Some(_) => Err(Refused),
        }
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.input.get(self.at).copied()
    }

    /// The next byte that is not whitespace, not consumed.
    #[inline(always)]
    fn peek_token(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        // Tokens are rarely preceded by whitespace: one compare tells, and the loop that skips
        // it stays out of line. Inlined, its head would cost every token an epoch check (a
        // load and a compare Cranelift puts at each loop head) even when it never loops.
        if byte > b' ' {
            return Some(byte);
        }
        self.skip_whitespace()
    }

    /// [`Self::peek_token`] when the reader is at a byte that may be whitespace.
    #[inline(never)]
    fn skip_whitespace(&mut self) -> Option<u8> {
        loop {
            let byte = self.peek()?;
            if !matches!(byte, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(byte);
            }
            self.at += 1;
        }
    }

    #[inline(always)]
    fn eat(&mut self, byte: u8) -> Result<()> {
        if self.peek_token() != Some(byte) {
            return Err(Refused);
        }
        self.at += 1;
        Ok(())
    }

    #[inline(always)]
    fn literal(&mut self, word: &[u8]) -> Result<()> {
        if !self.input[self.at..].starts_with(word) {
            return Err(Refused);
        }
        self.at += word.len();
        Ok(())
    }

    /// A string; the reader is at its opening quote.
    #[inline(always)]
    fn string(&mut self) -> Result<Text<'de, '_>> {
        let input = self.input;
        let start = self.at + 1;
        let mut high = 0;
        let mut at = start;
        let stop = loop {
            // Eight bytes a step while eight remain: a loop step costs an epoch check and,
            // under Cranelift, reloads of what did not fit in registers, whatever it reads.
            if let Some(chunk) = input.get(at..).and_then(<[u8]>::first_chunk::<8>) {
                let word = u64::from_le_bytes(*chunk);
                let stops = stop_bytes(word);
                if stops == 0 {
                    high |= word;
                    at += 8;
                    continue;
                }
                let plain = (stops.trailing_zeros() / 8) as usize;
                high |= word & ((1 << (plain * 8)) - 1);
                at += plain;
                break chunk[plain];
            }
            let byte = *input.get(at).ok_or(Refused)?;
            if STOPS[usize::from(byte)] {
                break byte;
            }
            high |= u64::from(byte);
            at += 1;
        };
        match stop {
            b'"' => {}
            b'\\' => return self.escaped(start, at),
            _ => return Err(Refused),
        }
        self.at = at + 1;
        let bytes = &input[start..at];
        if high & HIGH_BITS == 0 {
            // SAFETY: every byte is below 0x80: ASCII, which is UTF-8.
            return Ok(Text::Borrowed(unsafe {
                std::str::from_utf8_unchecked(bytes)
            }));
        }
        Self::utf8(bytes).map(Text::Borrowed)
    }

    #[cold]
    #[inline(never)]
    fn utf8(bytes: &[u8]) -> Result<&str> {
        std::str::from_utf8(bytes).map_err(|_| Refused)
    }

    /// The rest of a string from its first escape at `at`, unescaped into the scratch buffer.
    #[cold]
    #[inline(never)]
    fn escaped(&mut self, start: usize, mut at: usize) -> Result<Text<'de, '_>> {
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.input[start..at]);
        loop {
            let byte = *self.input.get(at).ok_or(Refused)?;
            at += 1;
            match byte {
                b'"' => break,
                b'\\' => at = self.escape(at)?,
                0..=0x1f => return Err(Refused),
                _ => self.scratch.push(byte),
            }
        }
        self.at = at;
        std::str::from_utf8(&self.scratch)
            .map(Text::Copied)
            .map_err(|_| Refused)
    }

    /// One escape after its backslash, at `at`; where the string goes on.
    fn escape(&mut self, at: usize) -> Result<usize> {
        let plain = match *self.input.get(at).ok_or(Refused)? {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => return self.unicode_escape(at + 1),
            _ => return Err(Refused),
        };
        self.scratch.push(plain);
        Ok(at + 1)
    }

    /// A `\u` escape's code point (a surrogate pair when it is one), at its hex digits.
    fn unicode_escape(&mut self, at: usize) -> Result<usize> {
        let first = self.hex4(at)?;
        let (code, next) = match first {
            0xd800..=0xdbff => {
                if self.input.get(at + 4..at + 6) != Some(b"\\u") {
                    return Err(Refused);
                }
                let low = self.hex4(at + 6)?;
                if !(0xdc00..=0xdfff).contains(&low) {
                    return Err(Refused);
                }
                let code =
                    0x10000 + ((u32::from(first) - 0xd800) << 10) + (u32::from(low) - 0xdc00);
                (code, at + 10)
            }
            _ => (u32::from(first), at + 4),
        };
        let ch = char::from_u32(code).ok_or(Refused)?;
        let mut utf8 = [0; 4];
        self.scratch
            .extend_from_slice(ch.encode_utf8(&mut utf8).as_bytes());
        Ok(next)
    }

    fn hex4(&self, at: usize) -> Result<u16> {
        let digits = self.input.get(at..at + 4).ok_or(Refused)?;
        digits.iter().try_fold(0u16, |value, &digit| {
            let nibble = char::from(digit).to_digit(16).ok_or(Refused)?;
            Ok((value << 4) | nibble as u16)
        })
    }

    /// A number; the reader is at its first byte.
    #[inline(always)]
    fn number(&mut self) -> Result<Number> {
        let negative = self.peek() == Some(b'-');
        self.at += usize::from(negative);
        let integer = match self.peek() {
            Some(b'0') => {
                self.at += 1;
                0
            }
            Some(b'1'..=b'9') => self.integer()?,
            _ => return Err(Refused),
        };
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return self.float(negative, integer).map(Number::F64);
        }
        Ok(match (negative, integer) {
            (false, _) => Number::U64(integer),
            // serde_json reads `-0` as the float negative zero.
            (true, 0) => Number::F64(-0.0),
            (true, _) => Number::I64(0i64.checked_sub_unsigned(integer).ok_or(Refused)?),
        })
    }

    /// The digits of an integer part. Nineteen digits always fit a `u64`, so the loop checks
    /// for no overflow (on wasm32 a checked 64-bit multiply is a call to a 128-bit multiply,
    /// which cost more than the rest of the number); a twentieth is refused.
    #[inline(always)]
    fn integer(&mut self) -> Result<u64> {
        let mut value = 0u64;
        let mut count = 0;
        for &byte in &self.input[self.at..] {
            let digit = byte.wrapping_sub(b'0');
            if digit > 9 {
                break;
            }
            value = value * 10 + u64::from(digit);
            count += 1;
            if count == 19 {
                break;
            }
        }
        self.at += count;
        if matches!(self.peek(), Some(b'0'..=b'9')) {
            return Err(Refused);
        }
        Ok(value)
    }

    /// Decimal digits at the reader, added to `value`; how many there were.
    fn digits(&mut self, value: &mut u64) -> Result<u32> {
        let mut count = 0;
        while let Some(digit @ b'0'..=b'9') = self.peek() {
            let digit = u64::from(digit - b'0');
            if *value >= u64::MAX / 10 && (*value > u64::MAX / 10 || digit > u64::MAX % 10) {
                return Err(Refused);
            }
            *value = *value * 10 + digit;
            self.at += 1;
            count += 1;
        }
        Ok(count)
    }

    /// The rest of a number with a fraction or an exponent, after its integer part.
    #[cold]
    #[inline(never)]
    fn float(&mut self, negative: bool, integer: u64) -> Result<f64> {
        let mut significand = integer;
        let mut exponent: i64 = 0;
        if self.peek() == Some(b'.') {
            self.at += 1;
            let fraction = self.digits(&mut significand)?;
            if fraction == 0 {
                return Err(Refused);
            }
            exponent -= i64::from(fraction);
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            exponent += self.exponent()?;
        }
        Self::exact(negative, significand, exponent)
    }

    /// An exponent, at its `e`.
    fn exponent(&mut self) -> Result<i64> {
        self.at += 1;
        let negative = match self.peek() {
            Some(b'-') => true,
            Some(b'+') => false,
            _ => false,
        };
        self.at += usize::from(matches!(self.peek(), Some(b'-' | b'+')));
        let mut value = 0;
        if self.digits(&mut value)? == 0 || value > 1_000 {
            return Err(Refused);
        }
        let value = value as i64;
        Ok(if negative { -value } else { value })
    }

    /// Only where one exact operation gives the value: elsewhere serde_json's own rounding
    /// decides.
    fn exact(negative: bool, significand: u64, exponent: i64) -> Result<f64> {
        let power = POW10.get(exponent.unsigned_abs() as usize).ok_or(Refused)?;
        if significand > 1 << 53 {
            return Err(Refused);
        }
        let magnitude = if exponent >= 0 {
            significand as f64 * power
        } else {
            significand as f64 / power
        };
        Ok(if negative { -magnitude } else { magnitude })
    }

    fn nested<T>(&mut self, read: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.depth = self.depth.checked_sub(1).ok_or(Refused)?;
        self.at += 1;
        let value = read(self)?;
        self.depth += 1;
        Ok(value)
    }
}

/// `deserialize_*` methods that read only values whose first byte passes the test.
macro_rules! only {
    ($de:lifetime; $($($method:ident)+ => $first:pat => $read:ident;)+) => {
        $($(
            // Inlined where the value is read (the callers are a few per type read), or each
            // value would cost a call: see [`Element`].
            #[inline(always)]
            fn $method<V: Visitor<$de>>(self, visitor: V) -> Result<V::Value> {
                match self.peek_token() {
                    Some($first) => self.$read(visitor),
                    _ => Err(Refused),
                }
            }
        )+)+
    };
}

impl<'de> de::Deserializer<'de> for &mut Reader<'de> {
    type Error = Refused;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.value(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.peek_token() == Some(b'n') {
            self.literal(b"null")?;
            return visitor.visit_none();
        }
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        // serde_json's `RawValue` asks its own deserializer for the value's text.
        if name.starts_with("$serde_json") {
            return Err(Refused);
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self.peek_token().ok_or(Refused)? {
            b'"' => match self.string()? {
                Text::Borrowed(text) => {
                    visitor.visit_enum(BorrowedStrDeserializer::<Refused>::new(text))
                }
                Text::Copied(text) => visitor.visit_enum(StrDeserializer::<Refused>::new(text)),
            },
            b'{' => self.nested(|reader| {
                let value = visitor.visit_enum(Variant { reader })?;
                reader.eat(b'}').map(|()| value)
            }),
            _ => Err(Refused),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, _: V) -> Result<V::Value> {
        // serde_json reads a string's raw bytes here, unchecked: its call.
        Err(Refused)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, _: V) -> Result<V::Value> {
        Err(Refused)
    }

    fn deserialize_i128<V: Visitor<'de>>(self, _: V) -> Result<V::Value> {
        Err(Refused)
    }

    fn deserialize_u128<V: Visitor<'de>>(self, _: V) -> Result<V::Value> {
        Err(Refused)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_any(visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_struct_body(visitor)
    }

    // serde_json reads a value only as the kind asked for (a number where a string is asked
    // for is an error there), while a visitor may take more kinds than it asks for: what is
    // not of the kind asked for is refused, for serde_json to answer.
    only! { 'de;
        deserialize_bool => b't' | b'f' => value;
        deserialize_unit => b'n' => value;
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_f32 deserialize_f64 => b'-' | b'0'..=b'9' => visit_number;
        deserialize_char deserialize_str deserialize_string
        deserialize_identifier => b'"' => visit_string;
        deserialize_seq => b'[' => visit_array;
        deserialize_map => b'{' => visit_object;
    }
}

/// The reader, handing over an array's element.
///
/// A type of its own so that the code reading a value of some type is called from objects
/// and from arrays as two functions, each with one caller. serde's derive reads a struct both
/// from an object and from an array; with two callers, LLVM inlined the reading of a field
/// into neither, and each field cost a call. With this and the `deserialize_*` methods
/// inlined, `{"id":1000000,"amount":37}` costs the instance 77 instructions fewer (1 199 →
/// 1 122, `cargo bench -p ruststream-tests --bench callgrind -- instance`).
struct Element<'r, 'de>(&'r mut Reader<'de>);

/// `Deserializer` methods of [`Element`], passed on to its reader.
macro_rules! element_forwards {
    ($($method:ident($($arg:ident: $ty:ty),*);)+) => {
        $(
            #[inline(always)]
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value> {
                self.0.$method($($arg,)* visitor)
            }
        )+
    };
}

impl<'de> de::Deserializer<'de> for Element<'_, 'de> {
    type Error = Refused;

    element_forwards! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
        deserialize_ignored_any();
    }
}

/// Visiting what the reader reads: each kind of value has its own, so a type that asks for
/// one kind is not compiled with the code of all the others.
impl<'de> Reader<'de> {
    /// Any value.
    fn value<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        match self.peek_token().ok_or(Refused)? {
            b'n' => self.literal(b"null").and_then(|()| visitor.visit_unit()),
            b't' => self
                .literal(b"true")
                .and_then(|()| visitor.visit_bool(true)),
            b'f' => self
                .literal(b"false")
                .and_then(|()| visitor.visit_bool(false)),
            b'"' => self.visit_string(visitor),
            b'-' | b'0'..=b'9' => self.visit_number(visitor),
            b'[' => self.visit_array(visitor),
            b'{' => self.visit_object(visitor),
            _ => Err(Refused),
        }
    }

    #[inline(always)]
    fn visit_string<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        match self.string()? {
            Text::Borrowed(text) => visitor.visit_borrowed_str(text),
            Text::Copied(text) => visitor.visit_str(text),
        }
    }

    #[inline(always)]
    fn visit_number<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        match self.number()? {
            Number::U64(n) => visitor.visit_u64(n),
            Number::I64(n) => visitor.visit_i64(n),
            Number::F64(n) => visitor.visit_f64(n),
        }
    }

    fn visit_array<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        self.nested(|reader| {
            let value = visitor.visit_seq(Items {
                reader,
                first: true,
            })?;
            reader.eat(b']').map(|()| value)
        })
    }

    fn visit_object<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        self.nested(|reader| {
            let value = visitor.visit_map(Items {
                reader,
                first: true,
            })?;
            reader.eat(b'}').map(|()| value)
        })
    }

    /// A struct's body: an object, or an array of its fields in order.
    fn deserialize_struct_body<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        match self.peek_token() {
            Some(b'{') => self.visit_object(visitor),
            Some(b'[') => self.visit_array(visitor),
            _ => Err(Refused),
        }
    }
}

/// The elements of an array or the entries of an object, after its opening bracket.
struct Items<'r, 'de> {
    reader: &'r mut Reader<'de>,
    first: bool,
}

impl Items<'_, '_> {
    /// Whether another item follows (`close` ends the list).
    #[inline(always)]
    fn more(&mut self, close: u8) -> Result<bool> {
        let next = self.reader.peek_token().ok_or(Refused)?;
        if next == close {
            return Ok(false);
        }
        if self.first {
            self.first = false;
            return Ok(true);
        }
        if next != b',' {
            return Err(Refused);
        }
        self.reader.at += 1;
        Ok(true)
    }
}

impl<'de> de::SeqAccess<'de> for Items<'_, 'de> {
    type Error = Refused;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if !self.more(b']')? {
            return Ok(None);
        }
        seed.deserialize(Element(&mut *self.reader)).map(Some)
    }
}

impl<'de> de::MapAccess<'de> for Items<'_, 'de> {
    type Error = Refused;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if !self.more(b'}')? {
            return Ok(None);
        }
        // Keys are strings; serde_json also reads numbers out of them for number-keyed maps,
        // which the key's own type refuses here and serde_json then does.
        if self.reader.peek_token() != Some(b'"') {
            return Err(Refused);
        }
        seed.deserialize(&mut *self.reader).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        self.reader.eat(b':')?;
        seed.deserialize(&mut *self.reader)
    }
}

/// An enum written as `{"variant": content}`, after its opening brace.
struct Variant<'r, 'de> {
    reader: &'r mut Reader<'de>,
}

impl<'r, 'de> de::EnumAccess<'de> for Variant<'r, 'de> {
    type Error = Refused;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self)> {
        if self.reader.peek_token() != Some(b'"') {
            return Err(Refused);
        }
        let variant = seed.deserialize(&mut *self.reader)?;
        self.reader.eat(b':')?;
        Ok((variant, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_, 'de> {
    type Error = Refused;

    fn unit_variant(self) -> Result<()> {
        de::Deserialize::deserialize(self.reader)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        seed.deserialize(self.reader)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        de::Deserializer::deserialize_seq(self.reader, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        de::Deserializer::deserialize_map(self.reader, visitor)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fmt::Debug;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Entry {
        id: u64,
        amount: i64,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(default)]
    struct Loose {
        id: Option<u32>,
        amount: f64,
        memo: String,
        tags: Vec<String>,
        kind: Option<Kind>,
        nested: Option<Box<Loose>>,
    }

    impl Default for Loose {
        fn default() -> Self {
            Self {
                id: None,
                amount: 0.5,
                memo: String::new(),
                tags: Vec::new(),
                kind: None,
                nested: None,
            }
        }
    }

    #[derive(Debug, Deserialize, PartialEq)]
    enum Kind {
        Unit,
        Newtype(i8),
        Pair(u16, bool),
        Shape { x: f32 },
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(tag = "type")]
    enum Tagged {
        Unit,
        Struct { id: u64 },
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(untagged)]
    enum Untagged {
        Number(f64),
        Text(String),
        List(Vec<Untagged>),
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Flat {
        id: u64,
        #[serde(flatten)]
        rest: BTreeMap<String, serde_json::Value>,
    }

    /// The reader's result, and serde_json's, for `bytes` as a `T`, each printed.
    fn both<T: DeserializeOwned + Debug>(bytes: &[u8]) -> (String, String) {
        let print = |result: serde_json::Result<T>| match result {
            Ok(value) => format!("{value:?}"),
            Err(error) => format!("error: {error}"),
        };
        (
            print(from_slice(bytes)),
            print(serde_json::from_slice(bytes)),
        )
    }

    /// Whether the reader reads `bytes` as a `T` itself, without serde_json.
    fn read_here<T: DeserializeOwned>(bytes: &[u8]) -> bool {
        let mut reader = Reader::new(bytes);
        T::deserialize(&mut reader).is_ok() && reader.end().is_ok()
    }

    fn agree<T: DeserializeOwned + Debug>(bytes: &[u8]) {
        let (here, serde_json) = both::<T>(bytes);
        assert_eq!(
            here,
            serde_json,
            "{} as {}",
            String::from_utf8_lossy(bytes),
            std::any::type_name::<T>()
        );
    }

    fn agree_on_all(bytes: &[u8]) {
        agree::<Entry>(bytes);
        agree::<Loose>(bytes);
        agree::<serde_json::Value>(bytes);
        agree::<Kind>(bytes);
        agree::<Tagged>(bytes);
        agree::<Untagged>(bytes);
        agree::<Flat>(bytes);
        agree::<BTreeMap<String, f64>>(bytes);
        agree::<BTreeMap<u32, bool>>(bytes);
        agree::<(u8, String)>(bytes);
        agree::<Vec<i32>>(bytes);
        agree::<char>(bytes);
        agree::<()>(bytes);
    }

    #[test]
    fn the_common_shapes_are_read_here() {
        assert!(read_here::<Entry>(br#"{"id":1000000,"amount":37}"#));
        assert!(read_here::<Entry>(b" [ 7 , -3 ] "));
        assert!(read_here::<Loose>(
            br#"{"id":7,"amount":-12.5e-1,"memo":"caf\u00e9 \"x\"","tags":["a","\ud83d\ude00"],
                "kind":{"Shape":{"x":1.5}},"nested":{"kind":"Unit","nested":null}}"#
        ));
        assert!(read_here::<serde_json::Value>(
            br#"{"a":[true,false,null,0,-0,1e2,"\/"],"b":{}}"#
        ));
        assert!(read_here::<Tagged>(br#"{"type":"Struct","id":3}"#));
        assert!(read_here::<Flat>(br#"{"id":3,"x":[1],"y":"z"}"#));
    }

    #[test]
    fn integers_of_every_length_read_as_serde_json_reads_them() {
        let digits = "98765432101234567890123";
        for len in 1..=digits.len() {
            let number = &digits[..len];
            for sign in ["", "-"] {
                // Alone, last in the payload, followed by more, and as a float's integer part.
                for payload in [
                    format!("{sign}{number}"),
                    format!("[{sign}{number}]"),
                    format!("[{sign}{number} ]"),
                    format!("[{sign}{number},1,\"x\"]"),
                    format!("{{\"id\":{sign}{number}0,\"amount\":{sign}{number}}}"),
                    format!("[{sign}{number}.5e1]"),
                ] {
                    agree_on_all(payload.as_bytes());
                    agree::<Vec<u64>>(payload.as_bytes());
                    agree::<Vec<i64>>(payload.as_bytes());
                    agree::<u64>(payload.as_bytes());
                }
            }
        }
        for edge in [
            "18446744073709551615",
            "18446744073709551616",
            "9223372036854775808",
        ] {
            agree::<u64>(edge.as_bytes());
            agree::<i64>(format!("-{edge}").as_bytes());
        }
        assert!(read_here::<Vec<u64>>(b"[1234567890123456789,7]"));
    }

    #[test]
    fn the_eight_byte_step_stops_where_the_byte_check_stops() {
        // Every byte value at every position of a word of plain text.
        for at in 0..8 {
            for byte in 0..=255u8 {
                let mut bytes = [b'a'; 8];
                bytes[at] = byte;
                let expected = bytes.iter().position(|b| STOPS[usize::from(*b)]);
                let stops = stop_bytes(u64::from_le_bytes(bytes));
                let found = (stops != 0).then(|| stops.trailing_zeros() as usize / 8);
                assert_eq!(found, expected, "{bytes:?}");
            }
        }
        // Two stops: the first one counts, whatever comes after it.
        for (first, second) in [(b'"', 0u8), (b'\\', b'"'), (0x1f, 0x80), (b'"', b'"')] {
            for at in 0..7 {
                let mut bytes = [b'a'; 8];
                bytes[at] = first;
                bytes[at + 1] = second;
                let stops = stop_bytes(u64::from_le_bytes(bytes));
                assert_eq!(stops.trailing_zeros() as usize / 8, at, "{bytes:?}");
            }
        }
    }

    #[test]
    fn what_is_refused_here_is_serde_json_s() {
        for (bytes, why) in [
            (&br#"{"id":1,"amount":2"#[..], "cut short"),
            (br#"{"id":1,"amount":2} x"#, "trailing characters"),
            (br#"{"id":01,"amount":2}"#, "a leading zero"),
            (br#"{"id":1,"amount":2,}"#, "a trailing comma"),
            (br#"{"id":18446744073709551616,"amount":2}"#, "past u64"),
            (br#"{"id":1,"amount":-9223372036854775809}"#, "past i64"),
            (
                b"{\"id\":1,\"amount\":2,\"m\":\"\x01\"}",
                "a control character",
            ),
            (
                b"{\"id\":1,\"amount\":2,\"m\":\"\xff\"}",
                "not UTF-8, in an ignored string",
            ),
            (br#"{"id":1,"amount":2,"m":"\ud800"}"#, "a lone surrogate"),
        ] {
            assert!(!read_here::<Entry>(bytes), "{why}");
            agree::<Entry>(bytes);
        }
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(read_here::<serde_json::Value>(nested(127).as_bytes()));
        for depth in [127, 128, 200] {
            agree::<serde_json::Value>(nested(depth).as_bytes());
        }
        assert!(!read_here::<serde_json::Value>(nested(128).as_bytes()));
        assert!(serde_json::from_slice::<serde_json::Value>(nested(128).as_bytes()).is_err());
    }

    #[test]
    fn floats_are_read_here_only_where_serde_json_rounds_the_same() {
        for (text, here) in [
            ("1.5", true),
            ("-0.0", true),
            ("1e22", true),
            ("9007199254740992.5", false),
            ("1e23", false),
            ("0.1e-30", false),
            ("1e400", false),
        ] {
            assert_eq!(read_here::<f64>(text.as_bytes()), here, "{text}");
            agree::<f64>(text.as_bytes());
        }
    }

    #[test]
    fn serde_json_raw_values_and_bytes_are_serde_json_s() {
        #[derive(Deserialize)]
        struct Raw<'a> {
            #[serde(borrow, rename = "raw")]
            _raw: &'a serde_json::value::RawValue,
        }
        let bytes = br#"{"raw": [1, {"a":2}]}"#;
        let mut reader = Reader::new(bytes);
        assert!(Raw::deserialize(&mut reader).is_err());
        agree::<Box<serde_json::value::RawValue>>(br#" {"a" : 1} "#);
        agree::<serde_bytes_like::Bytes>(br#""abc""#);
    }

    /// A type that asks for bytes, as `serde_bytes` does.
    mod serde_bytes_like {
        #[derive(Debug)]
        pub(super) struct Bytes(#[allow(dead_code, reason = "printed")] pub(super) Vec<u8>);

        impl<'de> serde::Deserialize<'de> for Bytes {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Visit;
                impl serde::de::Visitor<'_> for Visit {
                    type Value = Bytes;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("bytes")
                    }
                    fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
                        Ok(Bytes(v.to_vec()))
                    }
                }
                d.deserialize_bytes(Visit)
            }
        }
    }

    /// Random JSON, mostly well formed, some of it damaged.
    struct Generator(fastrand::Rng);

    impl Generator {
        fn value(&mut self, out: &mut String, depth: u32) {
            let pick = if depth > 3 {
                self.0.u32(0..6)
            } else {
                self.0.u32(0..9)
            };
            match pick {
                0 => out.push_str(["null", "true", "false"][self.0.usize(0..3)]),
                1 | 2 => self.number(out),
                3..=5 => self.string(out),
                6 => self.list(out, depth),
                _ => self.object(out, depth),
            }
        }

        fn number(&mut self, out: &mut String) {
            const EDGES: [&str; 14] = [
                "0",
                "-0",
                "18446744073709551615",
                "18446744073709551616",
                "-9223372036854775808",
                "-9223372036854775809",
                "1e22",
                "1e23",
                "9007199254740993.0",
                "0.30000000000000004",
                "1E-7",
                "2.5e+3",
                "255",
                "-128",
            ];
            match self.0.u32(0..4) {
                0 => out.push_str(EDGES[self.0.usize(..EDGES.len())]),
                1 => out.push_str(&self.0.i64(..).to_string()),
                2 => out.push_str(&self.0.u16(..).to_string()),
                _ => {
                    let width = self.0.u32(1..19);
                    let digits = self.0.u64(..10u64.pow(width));
                    let scale = self.0.u32(0..20);
                    out.push_str(&format!("{digits}e-{scale}"));
                }
            }
        }

        fn string(&mut self, out: &mut String) {
            const PARTS: [&str; 16] = [
                "id",
                "amount",
                "memo",
                "tags",
                "kind",
                "type",
                "Unit",
                "Shape",
                "x",
                "1",
                "caf\u{e9}",
                "\\n",
                "\\\"",
                "\\u00e9",
                "\\ud83d\\ude00",
                "\\ud800",
            ];
            out.push('"');
            for _ in 0..self.0.usize(0..3) {
                out.push_str(PARTS[self.0.usize(..PARTS.len())]);
            }
            out.push('"');
        }

        fn list(&mut self, out: &mut String, depth: u32) {
            out.push('[');
            for i in 0..self.0.usize(0..4) {
                if i > 0 {
                    out.push(',');
                }
                self.space(out);
                self.value(out, depth + 1);
            }
            out.push(']');
        }

        fn object(&mut self, out: &mut String, depth: u32) {
            out.push('{');
            for i in 0..self.0.usize(0..4) {
                if i > 0 {
                    out.push(',');
                }
                self.string(out);
                self.space(out);
                out.push(':');
                self.value(out, depth + 1);
            }
            out.push('}');
        }

        fn space(&mut self, out: &mut String) {
            if self.0.u32(0..4) == 0 {
                out.push_str([" ", "\n\t", "\r "][self.0.usize(0..3)]);
            }
        }

        fn damage(&mut self, bytes: &mut Vec<u8>) {
            const BYTES: &[u8] = b"{}[],:\"\\ -+.eE0159aun\x00\xc3\xff";
            if bytes.is_empty() || self.0.u32(0..3) != 0 {
                return;
            }
            let at = self.0.usize(..bytes.len());
            match self.0.u32(0..3) {
                0 => bytes.truncate(at),
                1 => bytes[at] = BYTES[self.0.usize(..BYTES.len())],
                _ => bytes.insert(at, BYTES[self.0.usize(..BYTES.len())]),
            }
        }
    }

    #[test]
    fn random_payloads_read_as_serde_json_reads_them() {
        let mut generator = Generator(fastrand::Rng::with_seed(0x5eed));
        let mut read_here_count = 0;
        for _ in 0..20_000 {
            let mut text = String::new();
            generator.value(&mut text, 0);
            let mut bytes = text.into_bytes();
            generator.damage(&mut bytes);
            read_here_count += usize::from(read_here::<serde_json::Value>(&bytes));
            agree_on_all(&bytes);
        }
        // Most of them are read without serde_json, or the test would prove little.
        assert!(read_here_count > 8_000, "{read_here_count} of 20 000");
    }
}
