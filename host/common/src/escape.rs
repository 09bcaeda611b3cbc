//! Showing untrusted text safely: what a tenant writes (log lines, names, trap messages) never
//! reaches a log line or a terminal with control characters in it, and never at any length.
//!
//! A component's output can carry ANSI escape sequences, carriage returns and bells that would
//! rewrite an operator's terminal (fake `ok` lines in `ruststream check`, erased warnings). Every
//! such character is shown escaped (`\u{1b}`), and text quoted in an error is cut to a length a
//! person can read.

use std::borrow::Cow;
use std::fmt;

/// Longest untrusted text quoted in an error or a host log line, in characters.
const QUOTE_CHARS: usize = 80;

/// Longest rendering of an error chain on one line, in characters.
const ERROR_CHARS: usize = 600;

/// `text` with every control character (C0, DEL, C1) escaped as `\u{..}`. Text without control
/// characters is returned as is.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Untrusted text quoted in a message: control characters escaped, cut to [`QUOTE_CHARS`]
/// characters with the full length said, so a 32 MiB name cannot become a 32 MiB log line.
#[derive(Debug, Clone, Copy)]
struct Quoted<'a>(pub &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let chars = self.0.chars().count();
        if chars <= QUOTE_CHARS {
            return f.write_str(&escape_controls(self.0));
        }
        let cut: String = self.0.chars().take(QUOTE_CHARS).collect();
        write!(f, "{}... ({} bytes)", escape_controls(&cut), self.0.len())
    }
}

/// Untrusted `text` as quoted in a message: control characters escaped, cut to 80 characters
/// with the full length said. Owned, for error values that outlive the text they quote.
pub fn quote(text: &str) -> String {
    Quoted(text).to_string()
}

/// An error and its causes as one line (`error: cause: cause`, as anyhow's `{:#}` renders it),
/// control characters escaped and cut to about 600 characters. A multi-line cause (a wasm
/// backtrace) keeps its first lines and says how many it dropped, and the root cause is
/// always shown: it is the part that says what happened. Never a Rust backtrace: those come
/// only from `{:?}`. Pass `&*error` for an `anyhow::Error` or a `wasmtime::Error`.
pub fn one_line(error: &dyn std::error::Error) -> String {
    one_line_within(error, ERROR_CHARS)
}

/// [`one_line`] cut to about `chars` characters instead: for a message a person reads once
/// (the binary's last word: a config error lists every key it accepts), where a log line
/// repeated by the thousand keeps to the shorter bound.
pub fn one_line_within(error: &dyn std::error::Error, chars: usize) -> String {
    let mut parts = vec![cause_line(&error.to_string(), chars / 2)];
    let mut cause = error.source();
    while let Some(next) = cause {
        parts.push(cause_line(&next.to_string(), chars / 2));
        cause = next.source();
    }
    let mut line = parts.join(": ");
    if line.chars().count() > chars && parts.len() > 2 {
        let last = parts.len() - 1;
        line = format!("{}: ...: {}", parts[..last - 1].join(": "), parts[last]);
        if line.chars().count() > chars {
            line = format!("{}: ...: {}", parts[0], parts[last]);
        }
    }
    cut(&escape_controls(&line), chars)
}

/// Lines of one cause kept in [`one_line`] (a wasm backtrace's first frames).
const CAUSE_LINES: usize = 3;

fn cause_line(text: &str, chars: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let mut kept = lines[..lines.len().min(CAUSE_LINES)].join(" | ");
    if lines.len() > CAUSE_LINES {
        kept.push_str(&format!(" | ({} more lines)", lines.len() - CAUSE_LINES));
    }
    cut(&kept, chars)
}

fn cut(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(chars).collect();
    cut.push_str("...");
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_plain_text_is_untouched() {
        assert!(matches!(escape_controls("booked id=1"), Cow::Borrowed(_)));
        let shown = escape_controls("\x1b[2K\rok    fake\x07\u{9b}");
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert_eq!(shown, "\\u{1b}[2K\\u{d}ok    fake\\u{7}\\u{9b}");
    }

    #[test]
    fn long_quotes_are_cut_and_say_how_long_they_were() {
        let long = "a".repeat(1 << 20);
        let shown = quote(&long);
        assert!(shown.len() < 120, "{shown}");
        assert!(shown.ends_with("... (1048576 bytes)"), "{shown}");
        assert_eq!(quote("ledger"), "ledger");
    }

    #[test]
    fn an_error_chain_is_one_line() {
        let error = anyhow::anyhow!("wasm backtrace:\n    0: 0x1 - f\n    1: 0x2 - \x1b[31mg")
            .context("instantiation failed");
        let line = one_line(&*error);
        assert!(!line.contains('\n'), "{line}");
        assert!(!line.chars().any(char::is_control), "{line}");
        assert!(
            line.starts_with("instantiation failed: wasm backtrace: | 0: 0x1 - f"),
            "{line}"
        );
        assert!(one_line(&*anyhow::anyhow!("{}", "x".repeat(5000))).len() <= ERROR_CHARS + 3);
    }

    #[test]
    fn a_long_backtrace_never_hides_the_root_cause() {
        let frames: String = (0..200)
            .map(|i| format!("\n  {i}: 0x{i:x} - f{i}"))
            .collect();
        let error = anyhow::anyhow!("wasm `unreachable` instruction executed")
            .context(format!("error while executing at wasm backtrace:{frames}"))
            .context("the call failed");
        let line = one_line(&*error);
        assert!(
            line.ends_with("wasm `unreachable` instruction executed"),
            "{line}"
        );
        assert!(line.contains("(198 more lines)"), "{line}");
        assert!(line.chars().count() <= ERROR_CHARS + 3, "{line}");
    }
}
