//! The flags several verbs share: which host an admin verb talks to, AWS endpoints, the
//! compile cache, which streams exist for `dev` and `test`, and which entries of a trail to
//! show; and the value of the flags that name an address to serve on. A verb's own flags are
//! in its module under `commands/`.

use std::net::SocketAddr;
use std::path::PathBuf;

use ruststream_fleet::aws::AwsOptions;
use ruststream_fleet::engine::CompileCache;
use ruststream_fleet::escape::quote;
use ruststream_tools::client;
use ruststream_tools::streams::{ExistingStreams, StreamsFlagError, StreamsMode, existing_streams};

/// Which running host an admin verb talks to, and how it proves itself.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct AdminTarget {
    /// The host's admin API: http:// on loopback, or https://.
    #[arg(long = "admin", env = "RUSTSTREAM_ADMIN", value_name = "URL", default_value = client::DEFAULT_URL)]
    pub url: String,
    /// The file holding the host's admin token [default: admin-token in the state directory].
    #[arg(long, env = "RUSTSTREAM_ADMIN_TOKEN_FILE", value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// The host's state directory, where its admin token is [default:
    /// $XDG_DATA_HOME/ruststream, or ~/.local/share/ruststream].
    #[arg(long, env = "RUSTSTREAM_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Certificates (PEM) to trust for an https:// admin URL, e.g. the host's own
    /// self-signed one [default: the system's root certificates].
    #[arg(long, env = "RUSTSTREAM_ADMIN_CA", value_name = "FILE")]
    pub admin_ca: Option<PathBuf>,
}

/// Which streams exist for the component `dev` and `test` run: what a host's account would
/// hold.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StreamArgs {
    /// Which streams exist. `any`: every stream, as in an account holding every stream the
    /// component names: the ones it reads and dead-letters into from the start, any other from
    /// its first write, so no publish is refused for a missing stream. `listed`: only those
    /// given with --with-stream: a component reading or dead-lettering into another does not
    /// start (the error names each), and a publish to another is refused with
    /// `stream-not-found`. Every refused publish is shown with its record and subscription.
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = StreamsMode::Any)]
    pub streams: StreamsMode,
    /// A stream that exists with `--streams listed` (repeatable): list the streams the
    /// component reads, dead-letters into and publishes to, as the account it will run in has
    /// them.
    #[arg(long = "with-stream", value_name = "NAME")]
    pub with_streams: Vec<String>,
}

impl StreamArgs {
    /// The streams that exist, as the library takes them.
    ///
    /// # Errors
    /// When streams are listed with `--streams any`.
    pub(crate) fn existing(&self) -> Result<ExistingStreams, StreamsFlagError> {
        existing_streams(self.streams, &self.with_streams)
    }
}

/// Where compiled components are cached.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CompileArgs {
    /// Directory of compiled components, keyed by content hash and engine configuration
    /// [default: $XDG_CACHE_HOME/ruststream/compiled, or ~/.cache/ruststream/compiled].
    #[arg(long, env = "RUSTSTREAM_COMPILE_CACHE")]
    pub compile_cache: Option<PathBuf>,
    /// Compile every component at every load; keep no compiled artifacts.
    #[arg(long, conflicts_with = "compile_cache")]
    pub no_compile_cache: bool,
}

impl CompileArgs {
    /// The flags as the library takes them.
    pub(crate) fn options(&self) -> CompileCache {
        CompileCache {
            compile_cache: self.compile_cache.clone(),
            no_compile_cache: self.no_compile_cache,
        }
    }
}

/// Which entries of a host's trail (`audit`, `errors`) to show.
#[derive(Debug, clap::Args)]
pub(crate) struct TrailQuery {
    /// Only those about this tenant.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Only those at or after WHEN: a time (RFC 3339, or ms since the Unix epoch) or a time
    /// ago (`90s`, `15m`, `2h`, `7d`).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    pub since: Option<u64>,
    /// The newest this many (at most 1000 from a host).
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    /// Print them as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A time, or a time ago (`15m`): ms since the Unix epoch.
fn parse_since(text: &str) -> Result<u64, String> {
    let units = [
        ('s', 1_000),
        ('m', 60_000),
        ('h', 3_600_000),
        ('d', 86_400_000),
    ];
    let ago = units.iter().find_map(|&(unit, ms)| {
        let count: u64 = text.strip_suffix(unit)?.parse().ok()?;
        Some(count.saturating_mul(ms))
    });
    match ago {
        Some(ago) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as u64);
            Ok(now.saturating_sub(ago))
        }
        None => ruststream_tools::redrive::parse_time(text)
            .map_err(|error| format!("{error}; or a time ago such as 90s, 15m, 2h or 7d")),
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct AwsArgs {
    /// AWS region (default: from the environment).
    #[arg(long, env = "AWS_REGION")]
    pub region: Option<String>,
    /// Kinesis endpoint, e.g. a local server (default: AWS).
    #[arg(long, env = "RUSTSTREAM_KINESIS_ENDPOINT")]
    pub kinesis_endpoint: Option<String>,
    /// DynamoDB endpoint (default: AWS).
    #[arg(long, env = "RUSTSTREAM_DYNAMODB_ENDPOINT")]
    pub dynamodb_endpoint: Option<String>,
    /// STS endpoint, where tenants' `role_arn`s are assumed (default: AWS).
    #[arg(long, env = "RUSTSTREAM_STS_ENDPOINT")]
    pub sts_endpoint: Option<String>,
    /// S3 endpoint, where a fleet's component bytes are kept (default: AWS).
    #[arg(long, env = "RUSTSTREAM_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
}

impl AwsArgs {
    /// The flags as the library takes them.
    pub(crate) fn options(&self) -> AwsOptions {
        AwsOptions {
            region: self.region.clone(),
            kinesis_endpoint: self.kinesis_endpoint.clone(),
            dynamodb_endpoint: self.dynamodb_endpoint.clone(),
            sts_endpoint: self.sts_endpoint.clone(),
            s3_endpoint: self.s3_endpoint.clone(),
            credentials: None,
        }
    }
}

/// `--admin-addr`, `--metrics-addr`: the address to serve on, or `None` for no server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListenAddr(pub Option<SocketAddr>);

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(addr) => addr.fmt(f),
            None => f.write_str("off"),
        }
    }
}

/// Why an `--admin-addr` or `--metrics-addr` is not one.
#[derive(Debug, thiserror::Error)]
#[error("`{input}` is not an address: give IP:PORT (e.g. 127.0.0.1:9465), or `off`")]
pub(crate) struct ListenAddrError {
    input: String,
    #[source]
    source: std::net::AddrParseError,
}

/// Parses `--admin-addr` and `--metrics-addr`: `IP:PORT`, or `off`/`none`.
pub(crate) fn parse_listen_addr(input: &str) -> Result<ListenAddr, ListenAddrError> {
    if input.eq_ignore_ascii_case("off") || input.eq_ignore_ascii_case("none") {
        return Ok(ListenAddr(None));
    }
    match input.parse() {
        Ok(addr) => Ok(ListenAddr(Some(addr))),
        Err(source) => Err(ListenAddrError {
            input: quote(input),
            source,
        }),
    }
}
