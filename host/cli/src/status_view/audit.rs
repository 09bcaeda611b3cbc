//! `ruststream audit`: the admin changes recorded, one line each.

use ruststream_fleet::admin::model::AuditEntry;

use super::text::{line, text};

/// `audit`: one line per change, oldest first (when, host, token, tenant, action, target,
/// result, what was asked), then where they were read.
pub(crate) fn render_audit(entries: &[AuditEntry], from: &str) -> String {
    let mut out = String::new();
    for entry in entries {
        let target = match (&entry.tenant, entry.target.as_str()) {
            (Some(tenant), "") => text(tenant).into_owned(),
            (Some(tenant), target) => format!("{}/{}", text(tenant), text(target)),
            (None, target) => text(target).into_owned(),
        };
        let result = match &entry.error {
            Some(error) => format!("{} {}: {}", text(&entry.result), entry.status, text(error)),
            None => text(&entry.result).into_owned(),
        };
        let asked = entry
            .request
            .as_ref()
            .map(|request| format!(" {}", text(&request.to_string())))
            .unwrap_or_default();
        line(
            &mut out,
            0,
            format_args!(
                "{} {} {} {} {target} {result}{asked}",
                text(&entry.at),
                text(&entry.host),
                text(&entry.token),
                text(&entry.action),
            ),
        );
    }
    line(
        &mut out,
        0,
        format_args!("{} change(s), from {}", entries.len(), text(from)),
    );
    out
}
