//! `ruststream redrive`: dead letters written back to their origin streams
//! (`ruststream_fleet::redrive`).

use ruststream_fleet::redrive::RedriveOptions;

use crate::args::RedriveArgs;

/// Runs (or with `--dry-run`, plans) the redrive the flags describe, printing its progress.
pub(crate) async fn redrive(args: RedriveArgs) -> anyhow::Result<()> {
    let out = &mut std::io::stdout();
    Ok(ruststream_fleet::redrive::redrive(options(args), out).await?)
}

/// The flags as the library takes them.
fn options(args: RedriveArgs) -> RedriveOptions {
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
        lease_ttl_ms: args.lease_ttl_ms,
        aws: args.aws.options(),
    }
}
