//! `ruststream`: runs handler components against Kinesis.
//!
//! ```text
//! ruststream new ledger-book && cd ledger-book && cargo build-component && cargo test
//! ruststream check target/wasm32-wasip2/release/ledger_book.wasm
//! ruststream check --config tenants.toml          # offline preflight of a tenants file
//! ruststream run target/wasm32-wasip2/release/ledger_book.wasm --lease-store dynamodb
//! ruststream dev --watch < entries.jsonl     # in the crate: build, run, feed, rebuild on save
//! ruststream test ledger_book.wasm --records records.jsonl --expect expect.toml
//! ```
//!
//! `tail STREAM` prints a stream's records with their envelopes decoded (a dead letter's
//! origin too); `put STREAM` writes JSON records with headers and a partition key;
//! `redrive STREAM` writes dead letters back to their origin streams, each exactly once.
//!
//! `status`, `seek`, `pause`, `resume`, `deploy`, `undeploy`, `reload`, `rollback` and
//! `versions` are thin clients of a running host's admin API (`--admin URL`, default
//! `http://127.0.0.1:9465`), sending the token the host keeps in its state directory.
//!
//! Modules: `args` (the command line), `commands` (one file per verb: its arguments turned into
//! what the library `ruststream_fleet` takes, and what it prints) and `status_view` (how the
//! admin verbs print a host's answers). Everything else, the host `run` runs included, is in
//! `ruststream_fleet`.
//!
//! `run` stops gracefully on SIGINT/SIGTERM: it stops fetching, lets in-flight calls finish,
//! flushes checkpoints and releases leases; a second SIGINT exits at once. Errors are shown as
//! one line with their causes. Run as `ruststream compile-worker ...`, the program is the
//! host's bounded compile worker (see `ruststream_fleet::engine::compile_worker`).

#![forbid(unsafe_code)]

mod args;
mod commands;
mod status_view;

use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::Parser as _;
use ruststream_fleet::engine::{WORKER_COMMAND, compile_worker};
use ruststream_fleet::escape::one_line_within;
use ruststream_fleet::json_log;
use ruststream_fleet::recent_errors::RecentErrors;

use commands::{Cli, Command, LogFormat};

/// Logs to stdout in `format`, filtered by `RUST_LOG` or else `default_filter`; what passes the
/// filter at `WARN` and above is kept in `recent` too.
fn init_logging(format: LogFormat, default_filter: &str, recent: &RecentErrors) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_filter.into());
    let logged = tracing_subscriber::registry()
        .with(filter)
        .with(recent.layer());
    match format {
        LogFormat::Text => logged
            .with(
                tracing_subscriber::fmt::layer()
                    // Colour codes only for a person at a terminal, never into a file or a pipe.
                    .with_ansi(std::io::stdout().is_terminal()),
            )
            .init(),
        LogFormat::Json => logged
            .with(json_log::JsonLayer::new(|| {
                Box::new(std::io::stdout()) as Box<dyn std::io::Write>
            }))
            .init(),
    }
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some(WORKER_COMMAND) {
        return compile_worker(std::env::args().skip(2));
    }
    let cli = Cli::parse();
    // `dev` prints the component's and the runtime's lines itself, under the record they
    // concern; a second copy through tracing would bury them.
    let default_filter = match cli.command {
        Command::Dev(_) | Command::Test(_) => "warn,ruststream::guest=off,ruststream::runtime=off",
        _ => "info",
    };
    let recent = RecentErrors::new();
    init_logging(cli.log_format, default_filter, &recent);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return report(&anyhow::Error::from(error)),
    };
    let result = runtime.block_on(async move {
        let done = match cli.command {
            // `test` has exit statuses of its own: a failed expectation is not bad input.
            Command::Test(args) => return Ok(commands::test::test(args).await),
            Command::Check(args) => commands::check::check(&args).await,
            Command::Run(args) => commands::run::run(*args, recent).await,
            Command::Tail(args) => commands::tail::tail(args).await,
            Command::Put(args) => commands::put::put(args).await,
            Command::Redrive(args) => commands::redrive::redrive(args).await,
            Command::New(args) => commands::new::new(&args),
            Command::Status(args) => commands::status::status(&args).await,
            Command::Seek(args) => commands::seek::seek(&args).await,
            Command::Pause(args) => commands::pause::pause(&args).await,
            Command::Resume(args) => commands::resume::resume(&args).await,
            Command::Deploy(args) => commands::deploy::deploy(&args).await,
            Command::Reload(args) => commands::reload::reload(&args).await,
            Command::Undeploy(args) => commands::undeploy::undeploy(&args).await,
            Command::Promote(args) => commands::promote::promote(&args).await,
            Command::Rollback(args) => commands::rollback::rollback(&args).await,
            Command::Versions(args) => commands::versions::versions(&args).await,
            Command::Dev(args) => commands::dev::dev(args).await,
            Command::Audit(args) => commands::audit::audit(&args).await,
            Command::Errors(args) => commands::errors::errors(&args).await,
            Command::Token(args) => commands::token::token(&args.action).await,
        };
        done.map(|()| ExitCode::SUCCESS)
    });
    match result {
        Ok(code) => code,
        Err(error) => report(&error),
    }
}

/// Shows `error` as one line with its causes: never a backtrace, never a control character.
/// How long the binary's last word may get: read once by a person, and a config error lists
/// every key or value it accepts.
const REPORT_CHARS: usize = 4_000;

fn report(error: &anyhow::Error) -> ExitCode {
    eprintln!("error: {}", one_line_within(&**error, REPORT_CHARS));
    ExitCode::FAILURE
}
