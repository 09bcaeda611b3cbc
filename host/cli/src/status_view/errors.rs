//! `ruststream errors`: the host's recent warnings and errors, one line each.

use ruststream_fleet::admin::model::ErrorEvent;

use super::text::{line, text};

/// `errors`: one line per event, newest first: when, level, whom it is about, what it says.
pub(crate) fn render_errors(events: &[ErrorEvent]) -> String {
    let mut out = String::new();
    for event in events {
        let about: Vec<String> = [
            &event.tenant,
            &event.app,
            &event.subscriber,
            &event.stream,
            &event.shard,
        ]
        .into_iter()
        .flatten()
        .map(|name| text(name).into_owned())
        .collect();
        let about = if about.is_empty() {
            "host".to_owned()
        } else {
            about.join("/")
        };
        line(
            &mut out,
            0,
            format_args!(
                "{} {:5} {about}: {}",
                text(&event.at),
                text(&event.level),
                text(&event.message)
            ),
        );
    }
    line(
        &mut out,
        0,
        format_args!("{} warning(s) and error(s)", events.len()),
    );
    out
}
