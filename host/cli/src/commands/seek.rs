//! `ruststream seek`: a subscription of a running host moved to another position.

use ruststream_fleet::admin::model::SeekPosition;
use ruststream_tools::client::parse_position;

use crate::args::AdminTarget;
use crate::status_view;

#[derive(Debug, clap::Args)]
pub(crate) struct SeekArgs {
    pub tenant: String,
    pub app: String,
    pub subscriber: String,
    /// `horizon`, `latest`, `at-timestamp:MS` (ms since the Unix epoch) or
    /// `at-sequence:SHARD:SEQ` (that shard only, from record SEQ on).
    #[arg(value_parser = parse_position)]
    pub position: SeekPosition,
    #[command(flatten)]
    pub admin: AdminTarget,
}

/// Moves the subscription and prints where it now stands.
pub(crate) async fn seek(args: &SeekArgs) -> anyhow::Result<()> {
    let moved = super::client(&args.admin)?
        .seek(&args.tenant, &args.app, &args.subscriber, &args.position)
        .await?;
    println!("{}", status_view::render_moved(&moved));
    Ok(())
}

#[cfg(test)]
mod tests {
    use ruststream_fleet::admin::model::SeekPosition;
    use ruststream_tools::client;

    use crate::commands::{Command, parse};

    #[test]
    fn admin_verbs() {
        let cli = parse(&["seek", "acme", "ledger", "book", "at-timestamp:5"]).expect("a seek");
        let Command::Seek(seek) = cli.command else {
            panic!("not a seek")
        };
        assert_eq!(seek.position, SeekPosition::Timestamp { ms: 5 });
        assert_eq!(seek.admin.url, client::DEFAULT_URL);
        let error = parse(&["seek", "acme", "ledger", "book", "soon"]).expect_err("bad position");
        assert!(
            error.to_string().contains("`soon` is not a position"),
            "{error}"
        );

        let cli = parse(&["deploy", "acme", "x.wasm", "--admin", "http://127.0.0.1:1"]);
        let Ok(Command::Deploy(deploy)) = cli.map(|cli| cli.command) else {
            panic!("not a deploy")
        };
        assert_eq!(
            (deploy.name, deploy.admin.url.as_str()),
            (None, "http://127.0.0.1:1")
        );
    }
}
