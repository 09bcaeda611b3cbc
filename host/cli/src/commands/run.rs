//! `ruststream run`: the host, until SIGINT or SIGTERM (`ruststream_fleet::run`).

use std::net::SocketAddr;
use std::path::PathBuf;

use ruststream_fleet::admin::DEFAULT_ADDR;
use ruststream_fleet::admin::allowed_hosts::{HostName, parse_host_name};
use ruststream_fleet::admin::token::AdminToken;
use ruststream_fleet::engine::CompileIn;
use ruststream_fleet::recent_errors::RecentErrors;
use ruststream_fleet::run::RunOptions;
use ruststream_fleet::settings::HostSettings;

use crate::args::{AwsArgs, CompileArgs, ListenAddr, parse_listen_addr};

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Component files (`.wasm`) to run for one trusted tenant, `default`, granted every
    /// stream. Untrusted tenants are configured with `--config` instead.
    #[arg(required_unless_present = "config", conflicts_with = "config")]
    pub components: Vec<PathBuf>,
    /// A TOML file of tenants: their components, grants and limits.
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub aws: AwsArgs,
    #[command(flatten)]
    pub compile: CompileArgs,
    /// The settings the tenants file's `[host]` gives too; a flag wins over the file.
    #[command(flatten)]
    pub settings: HostSettings,
    /// This host's lease owner id (default: unique per process). A fixed id lets a
    /// restarted host take its leases back at once.
    #[arg(long, env = "RUSTSTREAM_OWNER_ID")]
    pub owner_id: Option<String>,
    /// How many calls of a swapped-in version are judged against the last calls of the
    /// version it replaced.
    #[arg(long, default_value_t = ruststream_fleet::run::DEFAULT_ROLLOUT_CALLS,
        value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub rollout_calls: u32,
    /// How much higher (0 to 1) a swapped-in version's failure rate may be than the old
    /// version's before it is rolled back.
    #[arg(long, default_value_t = ruststream_fleet::run::DEFAULT_ROLLOUT_MARGIN, value_parser = parse_margin)]
    pub rollout_margin: f64,
    /// Where the admin API listens; `off` (or `none`) for no admin API. Loopback only,
    /// unless --allow-remote-admin.
    #[arg(long, env = "RUSTSTREAM_ADMIN_ADDR", value_name = "ADDR", default_value_t = ListenAddr(Some(DEFAULT_ADDR)), value_parser = parse_listen_addr)]
    pub admin_addr: ListenAddr,
    /// Let the admin API listen on a non-loopback address. Needs TLS (--admin-tls-cert and
    /// --admin-tls-key) besides the token: whoever has the token can load code into tenants.
    #[arg(long)]
    pub allow_remote_admin: bool,
    /// The certificate chain (PEM) the admin API serves TLS with.
    #[arg(
        long,
        env = "RUSTSTREAM_ADMIN_TLS_CERT",
        value_name = "FILE",
        requires = "admin_tls_key"
    )]
    pub admin_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --admin-tls-cert.
    #[arg(
        long,
        env = "RUSTSTREAM_ADMIN_TLS_KEY",
        value_name = "FILE",
        requires = "admin_tls_cert"
    )]
    pub admin_tls_key: Option<PathBuf>,
    /// A name the admin API answers to besides its address (`NAME` or `NAME:PORT`, repeatable):
    /// requests with another `Host` are refused.
    #[arg(long = "admin-host", value_name = "NAME", value_parser = parse_host_name)]
    pub admin_hosts: Vec<HostName>,
    /// The file holding the admin token, made at the first start if missing [default:
    /// admin-token in the state directory].
    #[arg(long, env = "RUSTSTREAM_ADMIN_TOKEN_FILE", value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// Where Prometheus metrics are served (`GET /metrics`); `off` (or `none`) for none.
    #[arg(long, env = "RUSTSTREAM_METRICS_ADDR", value_name = "ADDR", default_value_t = ListenAddr(Some(METRICS_ADDR)), value_parser = parse_listen_addr)]
    pub metrics_addr: ListenAddr,
}

/// Where the metrics endpoint listens unless told otherwise: loopback, port 9464.
pub(crate) const METRICS_ADDR: SocketAddr = ruststream_fleet::metrics::DEFAULT_ADDR;

fn parse_margin(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(margin) if (0.0..=1.0).contains(&margin) => Ok(margin),
        _ => Err(format!("`{text}` is not a rate between 0 and 1")),
    }
}

/// Runs the host with the flags' options, keeping the warnings and errors it logs in `recent`.
pub(crate) async fn run(args: RunArgs, recent_errors: RecentErrors) -> anyhow::Result<()> {
    Ok(ruststream_fleet::run::run(options(args, recent_errors)?).await?)
}

/// The flags (and the admin token the environment gives) as the library takes them.
fn options(args: RunArgs, recent_errors: RecentErrors) -> anyhow::Result<RunOptions> {
    Ok(RunOptions {
        components: args.components,
        config: args.config,
        aws: args.aws.options(),
        compile: args.compile.options(),
        // The tenants' components are untrusted: always the bounded worker.
        compile_in: CompileIn::Worker,
        settings: args.settings,
        owner_id: args.owner_id,
        rollout_calls: args.rollout_calls,
        rollout_margin: args.rollout_margin,
        admin_addr: args.admin_addr.0,
        allow_remote_admin: args.allow_remote_admin,
        admin_tls_cert: args.admin_tls_cert,
        admin_tls_key: args.admin_tls_key,
        admin_hosts: args.admin_hosts,
        admin_token_file: args.admin_token_file,
        admin_token: AdminToken::from_env()?,
        metrics_addr: args.metrics_addr.0,
        recent_errors,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use ruststream_fleet::settings::DurationSetting;

    use super::*;
    use crate::commands::{Command, parse};

    fn run_args(args: &[&str]) -> RunArgs {
        match parse(args).map(|cli| cli.command) {
            Ok(Command::Run(run)) => *run,
            other => panic!("not a run: {other:?}"),
        }
    }

    #[test]
    fn the_admin_api_listens_on_loopback_by_default() {
        let run = run_args(&["run", "x.wasm"]);
        assert_eq!(run.admin_addr, ListenAddr(Some(DEFAULT_ADDR)));
        assert_eq!(run.admin_addr.to_string(), "127.0.0.1:9465");
        assert!(!run.allow_remote_admin);
        assert_eq!(run.metrics_addr.to_string(), "127.0.0.1:9464");

        let run = run_args(&[
            "run",
            "x.wasm",
            "--admin-addr",
            "off",
            "--metrics-addr",
            "none",
        ]);
        assert_eq!(run.metrics_addr, ListenAddr(None));
        assert_eq!(run.admin_addr, ListenAddr(None));
        let run = run_args(&[
            "run",
            "x.wasm",
            "--admin-addr",
            "0.0.0.0:80",
            "--allow-remote-admin",
        ]);
        assert_eq!(run.admin_addr.0.map(|a| a.port()), Some(80));
        assert!(run.allow_remote_admin);
        let error = parse(&["run", "x.wasm", "--admin-addr", "localhost"]).expect_err("no IP");
        assert!(
            error.to_string().contains("`localhost` is not an address"),
            "{error}"
        );
    }

    #[test]
    fn admin_security_flags() {
        let run = run_args(&[
            "run",
            "x.wasm",
            "--admin-host",
            "admin.example.com",
            "--admin-host",
            "proxy.example.com:443",
            "--admin-tls-cert",
            "c.pem",
            "--admin-tls-key",
            "k.pem",
            "--state-dir",
            "/var/lib/rs",
        ]);
        assert_eq!(run.admin_hosts.len(), 2);
        assert_eq!(run.settings.state_dir, Some(PathBuf::from("/var/lib/rs")));
        let error = parse(&["run", "x.wasm", "--admin-tls-cert", "c.pem"]).expect_err("no key");
        assert!(error.to_string().contains("--admin-tls-key"), "{error}");
        let error = parse(&["run", "x.wasm", "--admin-host", "a b"]).expect_err("not a name");
        assert!(error.to_string().contains("is not a host name"), "{error}");
    }

    #[test]
    fn durations_are_written_as_in_the_tenants_file_and_old_flags_still_parse() {
        let run = run_args(&[
            "run",
            "x.wasm",
            "--lease-ttl",
            "20s",
            "--poll-interval",
            "250ms",
            "--compile-timeout",
            "1m",
            "--create-lease-table",
        ]);
        let shown = |d: Option<DurationSetting>| d.map(|d| d.to_string());
        assert_eq!(shown(run.settings.lease_ttl).as_deref(), Some("20s"));
        assert_eq!(shown(run.settings.poll_interval).as_deref(), Some("250ms"));
        assert_eq!(shown(run.settings.compile_timeout).as_deref(), Some("1m"));
        assert_eq!(run.settings.create_lease_table, Some(true));
        assert_eq!(run.components, [PathBuf::from("x.wasm")]);
        let error = parse(&["run", "x.wasm", "--lease-ttl", "20"]).expect_err("no unit");
        assert!(
            error.to_string().contains("`20` is not a duration"),
            "{error}"
        );
        // The old spelling, read into its setting (with a warning) when the host starts.
        let old = run_args(&["run", "x.wasm", "--lease-ttl-ms", "20000"]);
        assert_eq!(old.settings.lease_ttl_ms, Some(20_000));
        let error = parse(&["run", "x.wasm", "--lease-ttl-ms", "1", "--lease-ttl", "1s"])
            .expect_err("both");
        assert!(error.to_string().contains("cannot be used with"), "{error}");
        let help = crate::commands::help_of("run");
        assert!(help.contains("--lease-ttl <DURATION>"), "{help}");
        assert!(!help.contains("--lease-ttl-ms"), "{help}");
    }
}
