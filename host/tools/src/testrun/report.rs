//! The printed report of `ruststream test`: the app, which streams existed, each check on a
//! line (`ok` or `FAIL`, a failure with both sides; a refused publish is one, with the record
//! it came from), the log lines of a record whose check failed, and a summary.

use std::fmt::Write as _;
use std::path::Path;

use ruststream_common::escape::escape_controls;

use super::run::Observed;
use super::verdict::Check;
use crate::dev::short_line;

/// The whole report, ending in a newline.
pub(crate) fn render(component: &Path, observed: &Observed, checks: &[Check]) -> String {
    let mut out = header(component, observed);
    for check in checks {
        out.push_str(&check_line(check));
        if !check.passed {
            out.push_str(&record_logs(check, observed));
        }
    }
    out.push_str(&summary(checks));
    out
}

/// What ran: the component, its app, the streams, and each subscription's end state.
fn header(component: &Path, observed: &Observed) -> String {
    let shown = escape_controls(&component.display().to_string()).into_owned();
    let mut out = format!(
        "component {shown}: app {}, {} records\n",
        observed.app,
        observed.sent.len()
    );
    let _ = writeln!(out, "  {}", crate::streams::describe(&observed.existing));
    let loading: u64 = (observed.refused.iter())
        .filter(|r| r.subscriber.is_none())
        .map(|r| r.count)
        .sum();
    if loading > 0 {
        let _ = writeln!(
            out,
            "  {loading} publishes refused while loading the component"
        );
    }
    for s in &observed.subscriptions {
        let calls = observed.calls.iter().filter(|c| c.subscriber == s.name);
        let _ = write!(
            out,
            "  subscriber `{}` on `{}`: {} calls",
            escape_controls(&s.name),
            escape_controls(&s.stream),
            calls.count()
        );
        let refused: u64 = (observed.refused.iter())
            .filter(|r| r.subscriber.as_ref() == Some(&s.name))
            .map(|r| r.count)
            .chain(
                observed
                    .unlisted
                    .iter()
                    .filter(|u| u.0.as_ref() == Some(&s.name))
                    .map(|u| u.2),
            )
            .sum();
        if refused > 0 {
            let _ = write!(out, ", {refused} publishes refused");
        }
        if s.pending_copies > 0 {
            let _ = write!(out, ", {} copies still due after a day", s.pending_copies);
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

fn check_line(check: &Check) -> String {
    if check.passed {
        format!("ok    {}: {}\n", check.subject, check.got)
    } else {
        format!(
            "FAIL  {}: expected {}, got {}\n",
            check.subject, check.expected, check.got
        )
    }
}

/// The log lines about the record a failed check concerns, indented under it.
fn record_logs(check: &Check, observed: &Observed) -> String {
    let Some(sequence) = &check.sequence else {
        return String::new();
    };
    let lines = observed.logs.iter();
    let about = lines.filter(|line| line.sequence_number.as_ref() == Some(sequence));
    about
        .map(|line| format!("        {}\n", short_line(line)))
        .collect()
}

fn summary(checks: &[Check]) -> String {
    let failed = checks.iter().filter(|c| !c.passed).count();
    let total = checks.len();
    if failed == 0 {
        format!("\npassed: {total} expectations held\n")
    } else {
        format!("\nFAILED: {failed} of {total} expectations did not hold\n")
    }
}
