//! The admin API's client, for the CLI verbs (`status`, `seek`, `pause`, ...): HTTP/1 to the
//! admin URL with the host's token, JSON answers parsed into the shared `admin::model` types.
//!
//! The URL is the default loopback one or the one the operator names (`--admin`,
//! `RUSTSTREAM_ADMIN`); nothing is discovered. `http://` only to loopback (the token must not
//! cross a network in clear); `https://` anywhere, trusting the system's roots or the
//! certificates of `--admin-ca`.

use std::fmt::Write as _;
use std::time::Duration;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Bytes;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use ruststream_common::escape::{escape_controls, quote};
use serde::de::DeserializeOwned;

use ruststream_fleet::admin::certificates::GivenCertificates;
use ruststream_fleet::admin::model::{
    AppVersionList, AuditList, Deployed, ErrorBody, ErrorList, HostStatus, Moved, PauseState,
    RollbackTo, SeekPosition, ShadowDeployed, ShadowDropped, TokenList, TokenMade, TokenRevoked,
    Undeployed,
};
use ruststream_fleet::admin::token::AdminToken;

/// `route` queried as the audit trail and the recent errors are: `?since_ms=&limit=&tenant=`.
fn trail_path(route: &str, tenant: Option<&str>, since_ms: u64, limit: usize) -> String {
    let mut path = format!("{route}?since_ms={since_ms}&limit={limit}");
    if let Some(tenant) = tenant {
        path.push_str(&format!("&tenant={}", segment(tenant)));
    }
    path
}

/// The admin URL used when none is given.
pub const DEFAULT_URL: &str = "http://127.0.0.1:9465";

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
pub enum ClientError {
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
    /// The server's TLS certificate is not one this client trusts (nor issued by one).
    #[error(
        "the admin API at {url} presented a certificate not trusted here ({reason}): give the \
         certificate it serves, or the CA that issued it, with --admin-ca"
    )]
    Certificate {
        /// The request's URL.
        url: String,
        /// What rustls found wrong with it, one line.
        reason: String,
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
    /// The certificates to trust for an `https://` URL cannot be had.
    #[error("cannot set up TLS for the admin API: {reason}")]
    Tls {
        /// Why, one line.
        reason: String,
    },
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

/// What a client proves itself with, and whom it trusts.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The host's admin token.
    pub token: AdminToken,
    /// Where it was read (a file's path, or the variable that gave it), for a refusal's
    /// message.
    pub token_from: String,
    /// Certificates (PEM) to trust for `https://` instead of the system's roots.
    pub ca: Option<PathBuf>,
}

/// A connection to one host's admin API.
#[derive(Debug, Clone)]
pub struct AdminClient {
    /// The base URL without a trailing `/`; request paths are appended to it.
    base: String,
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    credentials: Credentials,
}

impl AdminClient {
    /// A client of the admin API at `url` (`http://` to loopback or `https://`, `host:port`,
    /// optionally with a path prefix) sending `credentials`' token. Nothing is sent until a
    /// request is made.
    ///
    /// # Errors
    /// [`ClientError::BadUrl`] for a URL it cannot use, [`ClientError::Tls`] when the
    /// certificates to trust cannot be read.
    pub fn new(url: &str, credentials: Credentials) -> Result<Self, ClientError> {
        let (base, https) = base_url(url)?;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.enforce_http(false);
        let tls = tls_config(https, credentials.ca.as_deref())?;
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let http = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self {
            base,
            http,
            credentials,
        })
    }

    /// `GET /v1/status`.
    pub async fn status(&self) -> Result<HostStatus, ClientError> {
        self.call(Method::GET, "/v1/status", None, QUICK_TIMEOUT)
            .await
    }

    /// Moves `tenant`'s `app`'s `subscriber` to `position`; returns the shards moved.
    pub async fn seek(
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
    pub async fn pause(&self, tenant: &str) -> Result<PauseState, ClientError> {
        let path = format!("/v1/tenants/{}/pause", segment(tenant));
        self.call(Method::POST, &path, None, QUICK_TIMEOUT).await
    }

    /// Resumes `tenant`.
    pub async fn resume(&self, tenant: &str) -> Result<PauseState, ClientError> {
        let path = format!("/v1/tenants/{}/resume", segment(tenant));
        self.call(Method::POST, &path, None, QUICK_TIMEOUT).await
    }

    /// Uploads `wasm` as component `name` of `tenant`.
    pub async fn deploy(
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

    /// Runs `wasm` beside the app component `name` of `tenant` runs, as its shadow on
    /// `sample_percent` of the records.
    pub async fn deploy_shadow(
        &self,
        tenant: &str,
        name: &str,
        wasm: Vec<u8>,
        sample_percent: u32,
    ) -> Result<ShadowDeployed, ClientError> {
        let path = format!(
            "/v1/tenants/{}/components/{}/shadow?sample={sample_percent}",
            segment(tenant),
            segment(name)
        );
        let body = ("application/wasm", Bytes::from(wasm));
        self.call(Method::PUT, &path, Some(body), LOAD_TIMEOUT)
            .await
    }

    /// Drops the shadow of `tenant`'s `app`.
    pub async fn abort_shadow(
        &self,
        tenant: &str,
        app: &str,
    ) -> Result<ShadowDropped, ClientError> {
        let path = format!(
            "/v1/tenants/{}/apps/{}/shadow",
            segment(tenant),
            segment(app)
        );
        self.call(Method::DELETE, &path, None, LOAD_TIMEOUT).await
    }

    /// Swaps the shadow of `tenant`'s `app` in.
    pub async fn promote(&self, tenant: &str, app: &str) -> Result<Deployed, ClientError> {
        let path = format!(
            "/v1/tenants/{}/apps/{}/promote",
            segment(tenant),
            segment(app)
        );
        self.call(Method::POST, &path, None, LOAD_TIMEOUT).await
    }

    /// Stops component `name` of `tenant` (one that came by upload only) for good.
    pub async fn undeploy(&self, tenant: &str, name: &str) -> Result<Undeployed, ClientError> {
        let path = format!(
            "/v1/tenants/{}/components/{}",
            segment(tenant),
            segment(name)
        );
        self.call(Method::DELETE, &path, None, LOAD_TIMEOUT).await
    }

    /// Has the host re-read its config and component files; returns what it loaded.
    pub async fn reload(&self) -> Result<Vec<Deployed>, ClientError> {
        self.call(Method::POST, "/v1/reload", None, LOAD_TIMEOUT)
            .await
    }

    /// Swaps `tenant`'s `app` back to its previous version, or to the kept version `to` (a
    /// content hash or a unique prefix of one).
    pub async fn rollback(
        &self,
        tenant: &str,
        app: &str,
        to: Option<&str>,
    ) -> Result<Deployed, ClientError> {
        let path = format!(
            "/v1/tenants/{}/apps/{}/rollback",
            segment(tenant),
            segment(app)
        );
        let body = match to {
            Some(to) => {
                let to = Some(to.to_owned());
                Some(json(
                    serde_json::to_vec(&RollbackTo { to }).map_err(ClientError::Encode)?,
                ))
            }
            None => None,
        };
        self.call(Method::POST, &path, body, LOAD_TIMEOUT).await
    }

    /// The versions the host keeps of `tenant`'s `app`, newest first.
    pub async fn versions(&self, tenant: &str, app: &str) -> Result<AppVersionList, ClientError> {
        let path = format!(
            "/v1/tenants/{}/apps/{}/versions",
            segment(tenant),
            segment(app)
        );
        self.call(Method::GET, &path, None, QUICK_TIMEOUT).await
    }

    /// The changes the host recorded in its audit trail (`GET /v1/audit`), oldest first: of
    /// `tenant` only when given, from `since_ms` on, the newest `limit` (at most 1000).
    ///
    /// # Errors
    /// As [`status`](Self::status).
    pub async fn audit(
        &self,
        tenant: Option<&str>,
        since_ms: u64,
        limit: usize,
    ) -> Result<AuditList, ClientError> {
        let path = trail_path("/v1/audit", tenant, since_ms, limit);
        self.call(Method::GET, &path, None, QUICK_TIMEOUT).await
    }

    /// The warnings and errors the host logged lately (`GET /v1/errors`), newest first: the
    /// last `limit` at or after `since_ms`, about `tenant` only when given (a tenant's token
    /// sees its own alone).
    ///
    /// # Errors
    /// As [`status`](Self::status).
    pub async fn errors(
        &self,
        tenant: Option<&str>,
        since_ms: u64,
        limit: usize,
    ) -> Result<ErrorList, ClientError> {
        let path = trail_path("/v1/errors", tenant, since_ms, limit);
        self.call(Method::GET, &path, None, QUICK_TIMEOUT).await
    }

    /// Makes a token that reaches `tenant` only, called `name` (`POST /v1/tokens`); the
    /// answer holds the token, shown this once.
    ///
    /// # Errors
    /// As [`status`](Self::status); the host refuses a tenant it does not have, and a caller
    /// that is not the operator.
    pub async fn create_token(&self, tenant: &str, name: &str) -> Result<TokenMade, ClientError> {
        let body = serde_json::json!({ "tenant": tenant, "name": name });
        let body = serde_json::to_vec(&body).map_err(ClientError::Encode)?;
        (self.call(Method::POST, "/v1/tokens", Some(json(body)), QUICK_TIMEOUT)).await
    }

    /// The tenant tokens the host's store keeps (`GET /v1/tokens`), never the tokens.
    ///
    /// # Errors
    /// As [`status`](Self::status).
    pub async fn tokens(&self) -> Result<TokenList, ClientError> {
        self.call(Method::GET, "/v1/tokens", None, QUICK_TIMEOUT)
            .await
    }

    /// Revokes tenant token `id` (`DELETE /v1/tokens/{id}`): refused from the next request on,
    /// by every host that reads the same store.
    ///
    /// # Errors
    /// As [`status`](Self::status); 404 for an unknown id.
    pub async fn revoke_token(&self, id: &str) -> Result<TokenRevoked, ClientError> {
        let path = format!("/v1/tokens/{}", segment(id));
        self.call(Method::DELETE, &path, None, QUICK_TIMEOUT).await
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
            let response = response.map_err(|source| match refused_certificate(&source) {
                Some(reason) => ClientError::Certificate {
                    url: url.clone(),
                    reason,
                },
                None => ClientError::Connect {
                    url: url.clone(),
                    source,
                },
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
        answer(&url, status, &bytes).map_err(|error| self.explain(error))
    }

    /// A refused token says where it was read: the host may keep its state elsewhere.
    fn explain(&self, error: ClientError) -> ClientError {
        match error {
            ClientError::Server { status, message } if status == StatusCode::UNAUTHORIZED => {
                ClientError::Server {
                    status,
                    message: format!(
                        "{message} (the token was read from {}: if the host keeps its state \
                         elsewhere, give its --state-dir or --admin-token-file)",
                        self.credentials.token_from
                    ),
                }
            }
            other => other,
        }
    }

    fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<(&'static str, Bytes)>,
    ) -> Result<Request<Full<Bytes>>, ClientError> {
        let bearer = format!("Bearer {}", self.credentials.token.secret());
        let builder = Request::builder()
            .method(method)
            .uri(url)
            .header(AUTHORIZATION, bearer);
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

/// Why the server's certificate was refused, when that is why `error` happened. rustls's error
/// travels inside `io::Error`s (one in another), whose `source()` skips what they wrap: each
/// is looked into.
fn refused_certificate(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(rustls::Error::InvalidCertificate(refusal)) =
            error.downcast_ref::<rustls::Error>()
        {
            return Some(refusal.to_string());
        }
        let wrapped = error
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref);
        next = match wrapped {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => error.source(),
        };
    }
    None
}

/// `url` checked and without a trailing `/`, and whether it is `https://`.
fn base_url(url: &str) -> Result<(String, bool), ClientError> {
    let bad = |reason: &str| ClientError::BadUrl {
        url: quote(url),
        reason: reason.to_owned(),
    };
    let parsed: Uri = url.parse().map_err(|_| bad("not a URL"))?;
    let https = match parsed.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(bad("give http://HOST:PORT or https://HOST:PORT")),
    };
    let Some(authority) = parsed.authority() else {
        return Err(bad("no host"));
    };
    if parsed.query().is_some() {
        return Err(bad("a query has no meaning here"));
    }
    if !https && !is_loopback(authority.host()) {
        return Err(bad(
            "http:// would send the admin token across the network in clear: use https:// \
             (a host serving remote admin has TLS), or a tunnel to loopback",
        ));
    }
    Ok((url.trim_end_matches('/').to_owned(), https))
}

/// Whether `host` (from a URL) names this machine over loopback.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The TLS configuration of a client: trusting the certificates in `ca` (as roots, and each
/// pinned: a server presenting one of them is trusted as it, see `admin::certificates`), else
/// (for an `https://` URL) the system's roots. An `http://` client trusts nothing: it never
/// uses TLS.
fn tls_config(https: bool, ca: Option<&Path>) -> Result<rustls::ClientConfig, ClientError> {
    let tls = |reason: String| ClientError::Tls { reason };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| tls(error.to_string()))?;
    if let Some(path) = ca {
        let pem = std::fs::read(path)
            .map_err(|error| tls(format!("cannot read {}: {error}", path.display())))?;
        let certificates = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| tls(format!("{}: {error}", path.display())))?;
        if certificates.is_empty() {
            return Err(tls(format!("{} holds no certificate", path.display())));
        }
        let given = GivenCertificates::new(certificates, &provider)
            .map_err(|error| tls(format!("{}: {error}", path.display())))?;
        return Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(given))
            .with_no_client_auth());
    }
    let mut roots = rustls::RootCertStore::empty();
    if https {
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        if roots.is_empty() {
            return Err(tls(
                "the system has no root certificates: give the host's with --admin-ca".to_owned(),
            ));
        }
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
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
pub struct PositionError {
    /// The argument, quoted.
    input: String,
    /// What is wrong with it.
    reason: &'static str,
}

/// Parses the CLI's POSITION: `horizon`, `latest`, `at-timestamp:MS` (milliseconds since the
/// Unix epoch) or `at-sequence:SHARD:SEQ` (one shard, from sequence number SEQ on).
pub fn parse_position(input: &str) -> Result<SeekPosition, PositionError> {
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
