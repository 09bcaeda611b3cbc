//! The pieces every view is made of: escaped host strings, indented lines, short hashes,
//! sizes and ages.

use std::borrow::Cow;
use std::fmt::Write as _;

use ruststream_fleet::escape::escape_controls;

/// Hex digits of a content hash shown.
const SHORT_HASH: usize = 12;

pub(super) fn line(out: &mut String, depth: usize, content: std::fmt::Arguments<'_>) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{:indent$}{content}", "", indent = depth * 2);
}

pub(crate) fn text(value: &str) -> Cow<'_, str> {
    escape_controls(value)
}

/// Bytes in whole MiB (reservations are whole MiB of `memory_mib`).
pub(super) fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// The hash without an algorithm prefix (`sha256:`), cut to [`SHORT_HASH`] characters.
pub(super) fn short_hash(hash: &str) -> String {
    let digits = hash.rsplit(':').next().unwrap_or(hash);
    let short: String = digits.chars().take(SHORT_HASH).collect();
    format!("#{}", text(&short))
}

/// The time from `since_ms` to `now_ms`, readably; a time in the future (clocks differ) is 0.
pub(super) fn age(now_ms: u64, since_ms: u64) -> String {
    let ms = now_ms.saturating_sub(since_ms);
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages() {
        assert_eq!(age(1_500, 1_000), "500ms");
        assert_eq!(age(1_000, 2_000), "0ms");
        assert_eq!(age(61_000, 0), "1m01s");
        assert_eq!(age(7_260_000, 0), "2h01m");
        assert_eq!(age(90_000_000, 0), "1d01h");
    }
}
