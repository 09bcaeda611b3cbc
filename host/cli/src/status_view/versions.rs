//! `ruststream versions`: the versions of an app this host or the fleet keeps.

use ruststream_fleet::admin::model::AppVersionList;

use super::text::{age, line, short_hash, text};

/// `versions`: one line per kept version, newest first: short hash (what `rollback --to`
/// takes), app version, component, how long ago it went live and how it came, `live` on the
/// live one.
pub(crate) fn render_versions(list: &AppVersionList, now_ms: u64) -> String {
    let mut out = String::new();
    let count = list.versions.len();
    line(
        &mut out,
        0,
        format_args!(
            "{}/{}: {count} version(s) kept {}",
            text(&list.tenant),
            text(&list.app),
            if list.fleet {
                "by the fleet (every host alike)"
            } else {
                "by this host"
            }
        ),
    );
    for kept in &list.versions {
        let live = if kept.live { "  live" } else { "" };
        // A version the fleet recorded before it recorded when, and never live here.
        let when = match kept.at_ms {
            0 => "at an unrecorded time".to_owned(),
            at_ms => format!("{} ago", age(now_ms, at_ms)),
        };
        line(
            &mut out,
            1,
            format_args!(
                "{} {} ({}) {} {when}{live}",
                short_hash(&kept.content_hash),
                text(&kept.version),
                text(&kept.component),
                kept.came_by.word(),
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_versions() {
        use ruststream_fleet::admin::model::{KeptVersion, VersionOrigin};
        let kept = |hash: &str, version: &str, at_ms, came_by, live| KeptVersion {
            content_hash: hash.to_owned(),
            version: version.to_owned(),
            component: "ledger".to_owned(),
            at_ms,
            came_by,
            live,
        };
        let list = AppVersionList {
            tenant: "acme".to_owned(),
            app: "ledger".to_owned(),
            versions: vec![
                kept(
                    "aaaabbbbccccdddd",
                    "1.0.0",
                    9_000,
                    VersionOrigin::Rollback,
                    true,
                ),
                kept(
                    "1111222233334444",
                    "2.0.0",
                    5_000,
                    VersionOrigin::Upload,
                    false,
                ),
                kept(
                    "aaaabbbbccccdddd",
                    "1\x1b",
                    1_000,
                    VersionOrigin::File,
                    false,
                ),
            ],
            fleet: false,
        };
        let expected = "\
acme/ledger: 3 version(s) kept by this host
  #aaaabbbbcccc 1.0.0 (ledger) rollback 1s ago  live
  #111122223333 2.0.0 (ledger) upload 5s ago
  #aaaabbbbcccc 1\\u{1b} (ledger) file 9s ago
";
        assert_eq!(render_versions(&list, 10_000), expected);
        let fleet = AppVersionList {
            versions: vec![kept(
                "1111222233334444",
                "2.0.0",
                0,
                VersionOrigin::Upload,
                true,
            )],
            fleet: true,
            ..list
        };
        assert_eq!(
            render_versions(&fleet, 10_000),
            "acme/ledger: 1 version(s) kept by the fleet (every host alike)\n  \
             #111122223333 2.0.0 (ledger) upload at an unrecorded time  live\n"
        );
    }
}
