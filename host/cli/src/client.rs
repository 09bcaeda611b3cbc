//! The admin API's client, for the CLI verbs (`status`, `seek`, `pause`, ...): plain HTTP/1 to
//! the admin URL, JSON answers parsed into the shared `admin::model` types.
//!
//! The URL is the default loopback one or the one the operator names (`--admin`,
//! `RUSTSTREAM_ADMIN`); nothing is discovered. Only `http://`: the server has no TLS, and is
//! meant to be reached over loopback or a tunnel.

use std::fmt::Write as _;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Bytes;
use hyper::header::CONTENT_TYPE;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use ruststream_runtime::{escape_controls, quote};
use serde::de::DeserializeOwned;

use crate::admin::model::{Deployed, ErrorBody, HostStatus, Moved, PauseState, SeekPosition};

/// The admin URL used when none is given.
pub(crate) const DEFAULT_URL: &str = "http://127.0.0.1:9465";

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a quick request (status, seek, pause) may take, answer included.
const QUICK_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a request that loads components (deploy, reload, rollback) may take: the host
/// compiles within its own budget, per component.
const LOAD_TIMEOUT: Duration = Duration::from_secs(600);
/// Largest answer read; a status of many shards stays far below it.
const MAX_ANSWER_BYTES: usize = 64 << 20;

/// Why a request to the admin API failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The admin URL is not one this client can use.
    #[error("admin URL `{url}` cannot be used: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// Why.
        reason: String,
    },
    /// No connection, or no answer, from the server.
    #[error("cannot reach the admin API at {url}")]
    Connect {
        /// The request's URL.
        url: String,
        /// Why.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// The server did not answer in time.
    #[error("no answer from the admin API at {url} within {after:?}")]
    Timeout {
        /// The request's URL.
        url: String,
        /// The time allowed.
        after: Duration,
    },
    /// The answer's body could not be read (cut short, or larger than the client accepts).
    #[error("cannot read the admin API's answer from {url}")]
    Read {
        /// The request's URL.
        url: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The server refused the request: its own message, and the status.
    #[error("{message} ({status})")]
    Server {
        /// The HTTP status.
        status: StatusCode,
        /// The server's one-line message, control characters escaped.
        message: String,
    },
    /// The request's JSON body could not be written.
    #[error("cannot encode the request")]
    Encode(#[source] serde_json::Error),
    /// A success answer that is not the JSON expected.
    #[error("the admin API at {url} answered {status} with unexpected JSON")]
    Decode {
        /// The request's URL.
        url: String,
        /// The HTTP status.
        status: StatusCode,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
}

/// A connection to one host's admin API.
#[derive(Debug, Clone)]
pub(crate) struct AdminClient {
    /// The base URL without a trailing `/`; request paths are appended to it.
    base: String,
    http: Client<HttpConnector, Full<Bytes>>,
}

impl AdminClient {
    /// A client of the admin API at `url` (`http://host:port`, optionally with a path prefix).
    /// Nothing is sent until a request is made.
    pub(crate) fn new(url: &str) -> Result<Self, ClientError> {
        let base = base_url(url)?;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let http = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self { base, http })
    }

    /// `GET /v1/status`.
    pub(crate) async fn status(&self) -> Result<HostStatus, ClientError> {
        self.call(Method::GET, "/v1/status", None, QUICK_TIMEOUT)
            .await
    }

    /// Moves `tenant`'s `app`'s `subscriber` to `position`; returns the shards moved.
    pub(crate) async fn seek(
        &self,
        tenant: &str,
        app: &str,
        subscriber: &str,
        position: &SeekPosition,
    ) -> Result<Vec<String>, ClientError> {
        let path = format!(
            "/v1/tenants/{}/apps/{}/subscriptions/{}/seek",
            segment(tenant),
            segment(app),
            segment(subscriber)
        );
        let body = serde_json::to_vec(position).map_err(ClientError::Encode)?;
        let moved: Moved = self
            .call(Method::POST, &path, Some(json(body)), QUICK_TIMEOUT)
            .await?;
        Ok(moved.moved)
    }

    /// Pauses `tenant`.
    pub(crate) async fn pause(&self, tenant: &str) -> Result<PauseState, ClientError> {
        let path = format!("/v1/tenants/{}/pause", segment(tenant));
        self.call(Method::POST, &path, None, QUICK_TIMEOUT).await
    }

    /// Resumes `tenant`.
    pub(crate) async fn resume(&self, tenant: &str) -> Result<PauseState, ClientError> {
        let path = format!("/v1/tenants/{}/resume", segment(tenant));
        self.call(Method::POST, &path, None, QUICK_TIMEOUT).await
    }

    /// Uploads `wasm` as component `name` of `tenant`.
    pub(crate) async fn deploy(
        &self,
        tenant: &str,
        name: &str,
        wasm: Vec<u8>,
    ) -> Result<Deployed, ClientError> {
        let path = format!(
            "/v1/tenants/{}/components/{}",
            segment(tenant),
            segment(name)
        );
        let body = ("application/wasm", Bytes::from(wasm));
        self.call(Method::PUT, &path, Some(body), LOAD_TIMEOUT)
            .await
    }

    /// Has the host re-read its config and component files; returns what it loaded.
    pub(crate) async fn reload(&self) -> Result<Vec<Deployed>, ClientError> {
        self.call(Method::POST, "/v1/reload", None, LOAD_TIMEOUT)
            .await
    }

    /// Swaps `tenant`'s `app` back to its previous version.
    pub(crate) async fn rollback(&self, tenant: &str, app: &str) -> Result<Deployed, ClientError> {
        let path = format!(
            "/v1/tenants/{}/apps/{}/rollback",
            segment(tenant),
            segment(app)
        );
        self.call(Method::POST, &path, None, LOAD_TIMEOUT).await
    }

    /// Sends one request and parses its answer: `T` on success, the server's message otherwise.
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<(&'static str, Bytes)>,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        let url = format!("{}{path}", self.base);
        let request = self.request(method, &url, body)?;
        let exchange = async {
            let response = self.http.request(request).await;
            let response = response.map_err(|source| ClientError::Connect {
                url: url.clone(),
                source,
            })?;
            let status = response.status();
            let limited = Limited::new(response.into_body(), MAX_ANSWER_BYTES);
            match limited.collect().await {
                Ok(collected) => Ok((status, collected.to_bytes())),
                Err(source) => Err(ClientError::Read {
                    url: url.clone(),
                    source,
                }),
            }
        };
        let (status, bytes) = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                url: url.clone(),
                after: timeout,
            })??;
        answer(&url, status, &bytes)
    }

    fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<(&'static str, Bytes)>,
    ) -> Result<Request<Full<Bytes>>, ClientError> {
        let builder = Request::builder().method(method).uri(url);
        let request = match body {
            Some((content_type, bytes)) => builder
                .header(CONTENT_TYPE, content_type)
                .body(Full::new(bytes)),
            None => builder.body(Full::new(Bytes::new())),
        };
        request.map_err(|error| ClientError::BadUrl {
            url: url.to_owned(),
            reason: error.to_string(),
        })
    }
}

fn json(body: Vec<u8>) -> (&'static str, Bytes) {
    ("application/json", Bytes::from(body))
}

/// The answer as `T` on a success status, else the server's error as [`ClientError::Server`].
fn answer<T: DeserializeOwned>(
    url: &str,
    status: StatusCode,
    bytes: &[u8],
) -> Result<T, ClientError> {
    if status.is_success() {
        return serde_json::from_slice(bytes).map_err(|source| ClientError::Decode {
            url: url.to_owned(),
            status,
            source,
        });
    }
    let message = match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(body) => escape_controls(&body.error).into_owned(),
        // Not our server, or a proxy in between: show the start of what it said.
        Err(_) => quote(&String::from_utf8_lossy(bytes)),
    };
    Err(ClientError::Server { status, message })
}

/// `url` checked and without a trailing `/`.
fn base_url(url: &str) -> Result<String, ClientError> {
    let bad = |reason: &str| ClientError::BadUrl {
        url: quote(url),
        reason: reason.to_owned(),
    };
    let parsed: Uri = url.parse().map_err(|_| bad("not a URL"))?;
    match parsed.scheme_str() {
        Some("http") => {}
        Some("https") => return Err(bad("only http:// is supported; the admin API has no TLS")),
        _ => return Err(bad("give http://HOST:PORT")),
    }
    if parsed.authority().is_none() {
        return Err(bad("no host"));
    }
    if parsed.query().is_some() {
        return Err(bad("a query has no meaning here"));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// `name` as one path segment: every byte outside the unreserved set percent-encoded, so a
/// name with `/` or `?` in it stays one name.
fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Why a POSITION argument is not one.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{input}` is not a position: {reason}; give horizon, latest, at-timestamp:MS or \
     at-sequence:SHARD:SEQ"
)]
pub(crate) struct PositionError {
    /// The argument, quoted.
    input: String,
    /// What is wrong with it.
    reason: &'static str,
}

/// Parses the CLI's POSITION: `horizon`, `latest`, `at-timestamp:MS` (milliseconds since the
/// Unix epoch) or `at-sequence:SHARD:SEQ` (one shard, from sequence number SEQ on).
pub(crate) fn parse_position(input: &str) -> Result<SeekPosition, PositionError> {
    let error = |reason| PositionError {
        input: quote(input),
        reason,
    };
    if let Some(ms) = input.strip_prefix("at-timestamp:") {
        let ms = ms
            .parse()
            .map_err(|_| error("MS must be milliseconds since the Unix epoch"))?;
        return Ok(SeekPosition::Timestamp { ms });
    }
    if let Some(rest) = input.strip_prefix("at-sequence:") {
        let (shard, sequence) = rest
            .split_once(':')
            .ok_or_else(|| error("at-sequence needs SHARD:SEQ"))?;
        if shard.is_empty() {
            return Err(error("SHARD is empty"));
        }
        if sequence.is_empty() || !sequence.bytes().all(|b| b.is_ascii_digit()) {
            return Err(error("SEQ must be a decimal sequence number"));
        }
        let (shard, sequence) = (shard.to_owned(), sequence.to_owned());
        return Ok(SeekPosition::Sequence { shard, sequence });
    }
    match input {
        "horizon" => Ok(SeekPosition::Horizon),
        "latest" => Ok(SeekPosition::Latest),
        _ => Err(error("unknown position")),
    }
}

#[cfg(test)]
mod tests;
