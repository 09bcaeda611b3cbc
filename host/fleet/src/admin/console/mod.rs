//! The web console at the admin address (`/ui`): pages for the fleet, tenants, apps, shards,
//! dead letters and errors, plots of lag and throughput, and the operator's actions, drawn
//! by a script from the admin API's own routes. Its assets are built into the binary
//! (`assets/`): nothing is fetched at run time, and no Node.js builds them.
//!
//! The same security as the API: the guard's `Host` and `Origin` checks, sign-in with a token
//! into an `HttpOnly`, `SameSite=Strict` session cookie (`super::session`), a CSRF token on every
//! change, and a strict Content-Security-Policy (no inline script or style, nothing from
//! another origin). Nothing it serves is cached.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, SET_COOKIE,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::JsonBody;
use super::guard::Guard;
use super::session;
use ruststream_runtime::{Clock as _, SystemClock};

/// The page, its script and its style.
const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// What a page of the console may load and do: its own script, style and API, nothing else.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                      connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                      base-uri 'none'";

/// The headers of everything the console serves.
fn headers(content_type: &'static str) -> [(axum::http::HeaderName, HeaderValue); 6] {
    [
        (CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY)),
        (CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
    ]
}

/// `GET /ui`.
pub(super) async fn index() -> Response {
    (headers("text/html; charset=utf-8"), INDEX).into_response()
}

/// `GET /ui/app.js`.
pub(super) async fn script() -> Response {
    (headers("text/javascript; charset=utf-8"), SCRIPT).into_response()
}

/// `GET /ui/app.css`.
pub(super) async fn style() -> Response {
    (headers("text/css; charset=utf-8"), STYLE).into_response()
}

/// The body of `POST /ui/session`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SignIn {
    token: String,
}

/// A session as the page learns it.
#[derive(Debug, Serialize)]
pub(super) struct SessionInfo {
    /// What it sends back with every change, in `X-CSRF-Token`.
    csrf: String,
    /// The token it signed in with, by id.
    token_id: String,
    /// The tenant a tenant token reaches; none for the operator.
    tenant: Option<String>,
}

/// `POST /ui/session`: signs in with a token; the session cookie comes back.
pub(super) async fn sign_in(
    State(guard): State<Arc<Guard>>,
    JsonBody(asked): JsonBody<SignIn>,
) -> Result<Response, ApiError> {
    let caller = (guard.caller_of(asked.token.trim().as_bytes()).await)
        .map_err(|(status, reason)| ApiError::new(status, reason))?;
    let now_ms = SystemClock.now_ms();
    let value = guard.sessions().open(&caller.token_id, now_ms);
    let (session, _) = (guard.session(&value, now_ms).await)
        .map_err(|(status, reason)| ApiError::new(status, reason))?;
    let cookie = HeaderValue::from_str(&session::set_cookie(&value, guard.is_tls()))
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    tracing::info!(token = %caller.token_id, "console: signed in");
    let info = SessionInfo {
        csrf: guard.sessions().csrf(&session),
        token_id: caller.token_id,
        tenant: caller.tenant,
    };
    let mut response = Json(info).into_response();
    response.headers_mut().insert(SET_COOKIE, cookie);
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `GET /ui/session`: the session the cookie names, for a page loaded again.
pub(super) async fn current(
    State(guard): State<Arc<Guard>>,
    request_headers: HeaderMap,
) -> Result<Response, ApiError> {
    let cookie = session::session_cookie(&request_headers)
        .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "not signed in".to_owned()))?;
    let (session, caller) = (guard.session(cookie, SystemClock.now_ms()).await)
        .map_err(|(status, reason)| ApiError::new(status, reason))?;
    let info = SessionInfo {
        csrf: guard.sessions().csrf(&session),
        token_id: caller.token_id,
        tenant: caller.tenant,
    };
    let mut response = Json(info).into_response();
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `DELETE /ui/session`: signs out; the cookie is cleared in the browser, and this host refuses
/// the session from now on.
pub(super) async fn sign_out(
    State(guard): State<Arc<Guard>>,
    request_headers: HeaderMap,
) -> Response {
    let now_ms = SystemClock.now_ms();
    if let Some(cookie) = session::session_cookie(&request_headers)
        && let Ok(session) = guard.sessions().read(cookie, now_ms)
    {
        guard.sessions().sign_out(&session, now_ms);
    }
    let mut response = Json(serde_json::json!({ "signed_out": true })).into_response();
    if let Ok(cleared) = HeaderValue::from_str(&session::clear_cookie(guard.is_tls())) {
        response.headers_mut().insert(SET_COOKIE, cleared);
    }
    response
}
