//! The checks an admin request passes before its route runs, each refusal saying which failed:
//!
//! 1. its `Host` is this API's (421, see `allowed_hosts`), on every route;
//! 2. it comes from no page, or from a page of this API's own origin: an `Origin` that is not
//!    this API's, and a `Sec-Fetch-Site` other than `same-origin` or `none`, are refused (403),
//!    on every route;
//! 3. it carries a token, `Authorization: Bearer <token>` (the operator's, or a tenant's), or
//!    a console session's cookie, and then, for a change, the session's CSRF token (401, 403),
//!    on every route but `/healthz`, `/readyz`, the console's page and assets and its sign-in;
//! 4. a body is `application/json`, or `application/wasm` for an upload (415);
//! 5. an upload is within the compile size bound, refused by its `Content-Length` before any of
//!    it is read (413), and one runs at a time (429).
//!
//! The size of an upload without a `Content-Length` is bounded while it streams in (the
//! route's body limit, also 413).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::header::{
    AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderName, ORIGIN, TRANSFER_ENCODING,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::allowed_hosts::AllowedHosts;
use super::caller::Caller;
use super::error::ApiError;
use super::session::{self, CSRF_HEADER, Session, Sessions};
use super::token::AdminToken;
use crate::tokens::{self, TokenStore};
use ruststream_common::escape::one_line;
use ruststream_runtime::{Clock as _, SystemClock};

/// How long an upload may take to arrive: 32 MiB at 2 Mbit/s. A client that stalls would
/// otherwise hold the one upload slot until its connection dies.
pub(crate) const UPLOAD_TIME: Duration = Duration::from_secs(150);

/// What a browser says of how the page that sent a request relates to its target.
const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");

/// The routes a probe, or a browser before it signs in, reaches without the token.
const OPEN_ROUTES: [&str; 5] = ["/healthz", "/readyz", "/ui", "/ui/app.js", "/ui/app.css"];
/// Why a request without a token (or a session) is refused.
const NO_TOKEN: &str = "no admin token: send `Authorization: Bearer TOKEN`, TOKEN being the \
                        contents of the host's admin token file (the ruststream verbs send it \
                        themselves)";
/// The console's sign-in: it checks the token it is given itself.
const SIGN_IN: &str = "/ui/session";

/// What the checks compare requests with.
#[derive(Debug)]
pub(crate) struct Guard {
    token: AdminToken,
    /// Where tenant tokens are looked up, when the host takes them.
    tenant_tokens: Option<Arc<dyn TokenStore>>,
    /// The console's signed-in pages.
    sessions: Sessions,
    hosts: AllowedHosts,
    /// Largest upload: the compile size bound (`compile_max_bytes`).
    max_upload: usize,
    /// How long an upload may take to arrive.
    upload_time: Duration,
    /// One permit: the upload under way holds it.
    uploads: Semaphore,
}

impl Guard {
    /// Checks against `token` and `hosts`, uploads of at most `max_upload` bytes arriving
    /// within [`UPLOAD_TIME`].
    pub(crate) fn new(token: AdminToken, hosts: AllowedHosts, max_upload: usize) -> Self {
        Self {
            sessions: Sessions::new(&token),
            token,
            tenant_tokens: None,
            hosts,
            max_upload,
            upload_time: UPLOAD_TIME,
            uploads: Semaphore::new(1),
        }
    }

    /// The same, taking the tenant tokens `store` keeps too.
    pub(crate) fn with_tenant_tokens(self, store: Arc<dyn TokenStore>) -> Self {
        Self {
            tenant_tokens: Some(store),
            ..self
        }
    }

    /// Where tenant tokens are looked up, if the host takes them.
    pub(crate) fn tenant_tokens(&self) -> Option<Arc<dyn TokenStore>> {
        self.tenant_tokens.clone()
    }

    /// The same with another time for an upload to arrive.
    #[cfg(test)]
    pub(crate) fn with_upload_time(self, upload_time: Duration) -> Self {
        Self {
            upload_time,
            ..self
        }
    }

    /// Largest upload accepted.
    pub(crate) fn max_upload(&self) -> usize {
        self.max_upload
    }

    /// How long an upload may take to arrive.
    pub(crate) fn upload_time(&self) -> Duration {
        self.upload_time
    }

    /// The console's sessions.
    pub(crate) fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Whether the API is served over TLS (the console's cookie is then `Secure`).
    pub(crate) fn is_tls(&self) -> bool {
        self.hosts.is_tls()
    }

    /// Who the request is from: its bearer token's holder or, without one, its console
    /// session's (a change in a session must carry the session's CSRF token), with the
    /// session's cookie renewed when it is due. `Err`: the status and reason to refuse it with.
    async fn check_caller(
        &self,
        method: &Method,
        headers: &HeaderMap,
    ) -> Result<(Caller, Option<String>), (StatusCode, String)> {
        if headers.contains_key(AUTHORIZATION) {
            return Ok((self.check_token(headers).await?, None));
        }
        let Some(cookie) = session::session_cookie(headers) else {
            return Err((StatusCode::UNAUTHORIZED, NO_TOKEN.to_owned()));
        };
        let now_ms = SystemClock.now_ms();
        let (session, caller) = self.session(cookie, now_ms).await?;
        let reads = *method == Method::GET || *method == Method::HEAD;
        let csrf = headers.get(CSRF_HEADER).map(HeaderValue::as_bytes);
        if !reads && !csrf.is_some_and(|csrf| self.sessions.csrf_matches(&session, csrf)) {
            let reason = "a change in a console session needs the session's CSRF token in \
                          X-CSRF-Token"
                .to_owned();
            return Err((StatusCode::FORBIDDEN, reason));
        }
        Ok((caller, self.sessions.renewed(&session, now_ms)))
    }

    /// The session `cookie` holds at `now_ms`, and who it is for: the operator, or the tenant
    /// of a tenant token the store still keeps (one revoked since the sign-in is signed out on
    /// every host). `Err`: the status and reason to refuse it with.
    pub(crate) async fn session(
        &self,
        cookie: &str,
        now_ms: u64,
    ) -> Result<(Session, Caller), (StatusCode, String)> {
        let session = (self.sessions.read(cookie, now_ms))
            .map_err(|ended| (StatusCode::UNAUTHORIZED, ended.to_string()))?;
        if session.who == Caller::OPERATOR {
            return Ok((session, Caller::operator()));
        }
        let ended = || {
            let reason = format!("signed out: token {} was revoked", session.who);
            (StatusCode::UNAUTHORIZED, reason)
        };
        let store = self.tenant_tokens.as_ref().ok_or_else(ended)?;
        let record = store.get(&session.who).await.map_err(|error| {
            let reason = format!("cannot check the token: {}", one_line(&error));
            (StatusCode::SERVICE_UNAVAILABLE, reason)
        })?;
        let record = record.ok_or_else(ended)?;
        let caller = Caller {
            token_id: record.id,
            tenant: Some(record.tenant),
        };
        Ok((session, caller))
    }

    /// Who the request's token is: the operator, or the tenant a tenant token reaches.
    /// `Err`: the status and reason to refuse it with.
    async fn check_token(&self, headers: &HeaderMap) -> Result<Caller, (StatusCode, String)> {
        let refused = |reason: &str| (StatusCode::UNAUTHORIZED, reason.to_owned());
        let Some(value) = headers.get(AUTHORIZATION) else {
            return Err(refused(NO_TOKEN));
        };
        // The scheme's name is case-insensitive (RFC 9110).
        let presented = value
            .as_bytes()
            .split_at_checked(7)
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case(b"Bearer "))
            .map(|(_, token)| token.trim_ascii())
            .ok_or_else(|| refused("the Authorization header is not `Bearer TOKEN`"))?;
        self.caller_of(presented).await
    }

    /// Who holds `presented`: the operator, or the tenant a tenant token reaches.
    /// `Err`: the status and reason to refuse it with.
    pub(crate) async fn caller_of(&self, presented: &[u8]) -> Result<Caller, (StatusCode, String)> {
        let refused = |reason: &str| (StatusCode::UNAUTHORIZED, reason.to_owned());
        if self.token.matches(presented) {
            return Ok(Caller::operator());
        }
        let (Some(store), Some(id)) = (&self.tenant_tokens, tokens::claimed_id(presented)) else {
            return Err(refused("wrong admin token"));
        };
        let record = store.get(id).await.map_err(|error| {
            let reason = format!("cannot check the token: {}", one_line(&error));
            (StatusCode::SERVICE_UNAVAILABLE, reason)
        })?;
        match record {
            Some(record) if tokens::matches(&record, presented) => Ok(Caller {
                token_id: record.id,
                tenant: Some(record.tenant),
            }),
            Some(_) => Err(refused("wrong admin token")),
            None => Err(refused(&format!(
                "token {id} is unknown or was revoked (ask the operator for a new one)"
            ))),
        }
    }
}

/// Checks 1, 2 and 3, on every request.
pub(crate) async fn host_and_token(
    State(guard): State<Arc<Guard>>,
    mut request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if let Err(reason) = guard.hosts.check(headers.get(HOST)) {
        return refuse(StatusCode::MISDIRECTED_REQUEST, reason);
    }
    if let Err(reason) = guard
        .hosts
        .check_origin(headers.get(ORIGIN), headers.get(SEC_FETCH_SITE))
    {
        return refuse(StatusCode::FORBIDDEN, reason);
    }
    let path = request.uri().path();
    let open = (request.method() == Method::GET && OPEN_ROUTES.contains(&path)) || path == SIGN_IN;
    let mut renewed = None;
    if !open {
        match guard
            .check_caller(request.method(), request.headers())
            .await
        {
            // Who asked, for the routes and the audit trail.
            Ok((caller, renewal)) => {
                request.extensions_mut().insert(caller);
                renewed = renewal;
            }
            Err((status, reason)) if status != StatusCode::UNAUTHORIZED => {
                return refuse(status, reason);
            }
            Err((_, reason)) => {
                let mut response = refuse(StatusCode::UNAUTHORIZED, reason);
                let challenge = HeaderValue::from_static("Bearer realm=\"ruststream admin\"");
                response
                    .headers_mut()
                    .insert(axum::http::header::WWW_AUTHENTICATE, challenge);
                return response;
            }
        }
    }
    let mut response = next.run(request).await;
    if let Some(cookie) = renewed
        && let Ok(cookie) = HeaderValue::from_str(&session::set_cookie(&cookie, guard.is_tls()))
    {
        response
            .headers_mut()
            .append(axum::http::header::SET_COOKIE, cookie);
    }
    response
}

/// Check 4 for the routes that take JSON (or nothing).
pub(crate) async fn json_body(request: Request, next: Next) -> Response {
    if let Err(reason) = content_type(request.headers(), "application/json") {
        return refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, reason);
    }
    next.run(request).await
}

/// Checks 4 and 5 for an upload; the permit is held until the upload is answered.
pub(crate) async fn upload(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if let Err(reason) = content_type(headers, "application/wasm") {
        return refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, reason);
    }
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(length) = declared.filter(|&n| n > guard.max_upload as u64) {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            too_large(length, guard.max_upload),
        );
    }
    let Ok(_permit) = guard.uploads.try_acquire() else {
        let reason = "another upload is in progress: uploads are taken one at a time; send \
                      this one again once it is answered";
        return refuse(StatusCode::TOO_MANY_REQUESTS, reason.to_owned());
    };
    next.run(request).await
}

/// Why an upload of `length` bytes is refused.
pub(crate) fn too_large(length: u64, max: usize) -> String {
    format!(
        "the upload is {length} bytes, more than the {max} a component may have \
         (`compile_max_bytes`): refused before reading it"
    )
}

/// Why a body of more than `max` bytes, streamed without a length, was refused.
pub(crate) fn too_large_streamed(max: usize) -> String {
    format!("the upload is more than the {max} bytes a component may have (`compile_max_bytes`)")
}

/// Whether the request's body (if it has one) is of `wanted` type.
fn content_type(headers: &HeaderMap, wanted: &str) -> Result<(), String> {
    let has_body = headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get(CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return if has_body {
            Err(format!(
                "the request body has no Content-Type: send it as `{wanted}`"
            ))
        } else {
            Ok(())
        };
    };
    let essence = value
        .to_str()
        .ok()
        .and_then(|v| v.split(';').next())
        .map(str::trim)
        .unwrap_or_default();
    if essence.eq_ignore_ascii_case(wanted) {
        return Ok(());
    }
    let shown = ruststream_common::escape::quote(&String::from_utf8_lossy(value.as_bytes()));
    Err(format!(
        "Content-Type `{shown}` is refused here: send `{wanted}`"
    ))
}

fn refuse(status: StatusCode, reason: String) -> Response {
    tracing::warn!(
        status = status.as_u16(),
        "admin API refused a request: {reason}"
    );
    ApiError::new(status, reason).into_response()
}
