//! `ruststream redrive`: dead letters written back to their origin streams
//! (`ruststream_tools::redrive`).

use std::path::PathBuf;

use ruststream_fleet::settings::DurationSetting;
use ruststream_fleet::settings::deprecated::{MS, Spelling, fold};
use ruststream_tools::redrive::RedriveOptions;

use crate::args::AwsArgs;

/// `ruststream redrive`.
#[derive(Debug, clap::Args)]
pub(crate) struct RedriveArgs {
    /// The dead-letter stream.
    pub stream: String,
    /// The tenants file: whose dead letters may go back where (their grants), and at what
    /// rate (their write quota).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Only the dead letters of this tenant.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Only those dead-lettered for this reason (`attempts-exhausted`,
    /// `record-age-exceeded`, or a trap kind such as `panic`).
    #[arg(long)]
    pub reason: Option<String>,
    /// Only those that reached the dead-letter stream at or after TIME (RFC 3339, or ms
    /// since the Unix epoch).
    #[arg(long, value_name = "TIME", value_parser = parse_redrive_time)]
    pub since: Option<u64>,
    /// Only those that reached it at or before TIME [default: when the redrive first started].
    #[arg(long, value_name = "TIME", value_parser = parse_redrive_time)]
    pub until: Option<u64>,
    /// Print what would move (per origin stream and reason, and the first records) and what
    /// would be refused; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The redrive's name [default: derived from the stream and the options, so the same
    /// command run again resumes the same redrive].
    #[arg(long)]
    pub id: Option<String>,
    /// The DynamoDB table redrives keep their progress in.
    #[arg(long, default_value = ruststream_tools::redrive::DEFAULT_TABLE)]
    pub redrive_table: String,
    /// Create the table if it does not exist.
    #[arg(long)]
    pub create_redrive_table: bool,
    /// How long a stopped run holds the redrive before another may resume it.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        conflicts_with = "lease_ttl_ms"
    )]
    pub lease_ttl: DurationSetting,
    /// Deprecated: --lease-ttl, in ms.
    #[arg(long, hide = true)]
    pub lease_ttl_ms: Option<u64>,
    #[command(flatten)]
    pub aws: AwsArgs,
}

fn parse_redrive_time(text: &str) -> Result<u64, String> {
    ruststream_tools::redrive::parse_time(text).map_err(|error| error.to_string())
}

/// Runs (or with `--dry-run`, plans) the redrive the flags describe, printing its progress.
pub(crate) async fn redrive(args: RedriveArgs) -> anyhow::Result<()> {
    let out = &mut std::io::stdout();
    Ok(ruststream_tools::redrive::redrive(options(args), out).await?)
}

/// The flags as the library takes them; an old flag is read with a warning.
fn options(args: RedriveArgs) -> RedriveOptions {
    let mut lease_ttl = Some(args.lease_ttl);
    let mut old = args.lease_ttl_ms;
    // `--lease-ttl` has a default, so it is taken as not given when the old flag is: clap
    // refuses the two given together.
    if old.is_some() {
        lease_ttl = None;
    }
    let spelling = Spelling::Flag {
        old: "lease_ttl_ms",
        new: "lease_ttl",
        variable: false,
    };
    if let Ok(Some(deprecation)) = fold(&mut old, MS, &mut lease_ttl, spelling) {
        deprecation.warn();
    }
    RedriveOptions {
        stream: args.stream,
        config: args.config,
        tenant: args.tenant,
        reason: args.reason,
        since: args.since,
        until: args.until,
        dry_run: args.dry_run,
        id: args.id,
        redrive_table: args.redrive_table,
        create_redrive_table: args.create_redrive_table,
        lease_ttl: lease_ttl.unwrap_or(args.lease_ttl).get(),
        aws: args.aws.options(),
    }
}
