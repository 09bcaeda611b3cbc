//! One module per verb: each defines its flags, turns them into what the library takes, calls
//! it, and prints the answer. Here: the command line ([`Cli`]) and its verbs ([`Command`]), and
//! what the admin verbs share: the client of the host named by `--admin`, with the token it
//! reads, and the clock ages are shown against.

pub(crate) mod audit;
pub(crate) mod check;
pub(crate) mod deploy;
pub(crate) mod dev;
pub(crate) mod errors;
pub(crate) mod new;
pub(crate) mod pause;
pub(crate) mod promote;
pub(crate) mod put;
pub(crate) mod redrive;
pub(crate) mod reload;
pub(crate) mod resume;
pub(crate) mod rollback;
pub(crate) mod run;
pub(crate) mod seek;
pub(crate) mod status;
pub(crate) mod tail;
pub(crate) mod test;
pub(crate) mod token;
pub(crate) mod undeploy;
pub(crate) mod versions;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use ruststream_fleet::admin::token::{AdminToken, TOKEN_ENV};
use ruststream_fleet::state;
use ruststream_tools::client::{AdminClient, Credentials};

use crate::args::AdminTarget;

/// Where the verbs read the token: `--admin-token-file`, else `admin-token` in `--state-dir`,
/// else in the default state directory.
fn token_path(target: &AdminTarget) -> anyhow::Result<PathBuf> {
    if let Some(file) = &target.admin_token_file {
        return Ok(file.clone());
    }
    let dir = target
        .state_dir
        .clone()
        .or_else(state::default_dir)
        .context(
            "no admin token file: HOME and XDG_DATA_HOME are unset; give --admin-token-file \
             or --state-dir",
        )?;
    Ok(dir.join(state::TOKEN_FILE))
}

/// The client of the host `target` names, carrying the token [`TOKEN_ENV`] gives, else the
/// one it reads from the token file.
fn client(target: &AdminTarget) -> anyhow::Result<AdminClient> {
    let (token, token_from) = match AdminToken::from_env()? {
        Some(_) if target.admin_token_file.is_some() => anyhow::bail!(
            "the admin token is given twice, by ${TOKEN_ENV} and by --admin-token-file: give one"
        ),
        Some(token) => (token, format!("${TOKEN_ENV}")),
        None => {
            let token_path = token_path(target)?;
            (
                AdminToken::read(&token_path)?,
                token_path.display().to_string(),
            )
        }
    };
    let credentials = Credentials {
        token,
        token_from,
        ca: target.admin_ca.clone(),
    };
    Ok(AdminClient::new(&target.url, credentials)?)
}

/// Now, in milliseconds since the Unix epoch: what the host's timestamps are shown against.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// The command line: a verb and the flags every verb takes.
#[derive(Debug, clap::Parser)]
#[command(
    name = "ruststream",
    version,
    about = "Runs RustStream handler components against Kinesis"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// How log lines are written: `text` for people, `json` (one object per line, the
    /// component's own fields as separate keys) for log pipelines.
    #[arg(long, global = true, value_enum, env = "RUSTSTREAM_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines, coloured only on a terminal.
    Text,
    /// One JSON object per line.
    Json,
}

/// The verbs, each with its flags (defined beside its `execute`, in its module).
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Loads components and reports what each declares, or why it is refused; with
    /// `--config`, checks a tenants file offline: every component under its tenant's grants
    /// and limits, every name and limit, the lease table template.
    Check(check::CheckArgs),
    /// Runs components until SIGINT/SIGTERM.
    Run(Box<run::RunArgs>),
    /// Writes a tenant crate: the seed's handler, built into a component with
    /// `cargo build-component`, and a test `cargo test` runs with `ruststream test`.
    New(new::NewArgs),
    /// Shows what a running host runs: tenants, apps, subscriptions and shards.
    Status(status::StatusArgs),
    /// Moves a subscription of a running host to another position.
    Seek(seek::SeekArgs),
    /// Stops handing a tenant's handlers records until `resume`.
    Pause(pause::PauseArgs),
    /// Resumes a paused or quarantined tenant.
    Resume(resume::ResumeArgs),
    /// Loads a component into a running host for a tenant: a new version of the app it
    /// declares, or a new app.
    Deploy(deploy::DeployArgs),
    /// Stops, for good, a component a running host took by upload under a name its tenants
    /// file does not list (a listed one is stopped by removing it from the file).
    Undeploy(undeploy::UndeployArgs),
    /// Has a running host re-read its config and component files (as SIGHUP does).
    Reload(reload::ReloadArgs),
    /// Prints a stream's records, one JSON object per line, with their envelopes decoded
    /// (headers, retry count, due time, a dead letter's origin).
    Tail(tail::TailArgs),
    /// Writes JSON records to a stream, with headers and a partition key.
    Put(put::PutArgs),
    /// Swaps a tenant's app over to the shadow version running beside it (`deploy --shadow`),
    /// through the normal swap and its automatic rollback.
    Promote(promote::PromoteArgs),
    /// Swaps a tenant's app back to its previous version, or to a kept one (`--to`).
    Rollback(rollback::RollbackArgs),
    /// Lists the versions a running host keeps of a tenant's app: hash, version, when it went
    /// live, how it came (file, upload, rollback), and which one is live.
    Versions(versions::VersionsArgs),
    /// Makes, lists and revokes tokens that reach one tenant's apps only (the operator's
    /// token reaches all).
    Token(token::TokenArgs),
    /// Lists the changes made through a host's admin API (its audit trail): when, which token,
    /// tenant, action, target, what was asked and the result; or those of an audit file or a
    /// JSON log (`--file`), with no host running.
    Audit(audit::AuditArgs),
    /// Lists the warnings and errors a host logged lately, newest first, with whom each is
    /// about (tenant, app, subscription, stream, shard): the host keeps the last 200 of each
    /// tenant, and 200 of its own, in memory.
    Errors(errors::ErrorsArgs),
    /// Writes the dead letters of a dead-letter stream back to the streams they came from,
    /// each exactly once (a run stopped and run again resumes), addressed to the subscription
    /// that gave up on them; `--dry-run` says what would move.
    Redrive(redrive::RedriveArgs),
    /// Builds a tenant crate (or takes a component file), runs it on in-process streams, feeds
    /// it records as JSON lines and prints what each came to (outcomes, checkpoints, refused
    /// publishes, log lines); with `--watch`, rebuilds on every save and swaps the new version
    /// in, keeping the streams and checkpoints. Every stream the component publishes to exists
    /// unless `--streams listed`.
    Dev(dev::DevArgs),
    /// Runs a component (any language) on in-process streams: feeds it the records of a
    /// JSON-lines file and checks outcomes, publishes, refused publishes and checkpoints
    /// against an expectations file. Every stream the component publishes to exists unless
    /// `--streams listed`. Exit status 0: all held; 1: one did not; 2: bad input.
    Test(test::TestArgs),
}

/// `args` parsed as the binary's command line (after its name).
#[cfg(test)]
pub(crate) fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    use clap::Parser as _;
    Cli::try_parse_from(std::iter::once("ruststream").chain(args.iter().copied()))
}

/// The `--help` of `verb`, as the binary prints it.
#[cfg(test)]
pub(crate) fn help_of(verb: &str) -> String {
    use clap::CommandFactory as _;
    let mut command = Cli::command();
    command
        .find_subcommand_mut(verb)
        .map(|sub| sub.render_long_help().to_string())
        .unwrap_or_default()
}
