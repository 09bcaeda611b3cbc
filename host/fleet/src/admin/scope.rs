//! What a tenant token may reach: its tenant's routes (`/v1/tenants/<its tenant>/...`), and
//! its own part of the status, the history, the recent errors, the audit trail and the dead-letter redrives (the
//! routes filter those, and start only its own redrives). Anything else is refused with a 403 naming the tenant the token belongs to. The
//! operator's token passes untouched.

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ruststream_common::escape::quote;

use super::caller::Caller;
use super::error::ApiError;

/// Refuses what the caller's tenant token does not reach.
pub(super) async fn tenant_scope(request: Request, next: Next) -> Response {
    let caller = request.extensions().get::<Caller>().cloned();
    let Some(Caller {
        token_id,
        tenant: Some(own),
    }) = caller
    else {
        return next.run(request).await;
    };
    let segments: Vec<&str> = request.uri().path().trim_matches('/').split('/').collect();
    let method = request.method();
    let refusal = match segments.as_slice() {
        ["v1", "tenants", tenant, ..] => {
            let tenant = percent_decoded(tenant);
            (tenant != own).then(|| {
                format!(
                    "token {token_id} belongs to tenant `{}`: it reaches that tenant's apps \
                     only, not tenant `{}`'s",
                    quote(&own),
                    quote(&tenant)
                )
            })
        }
        ["v1", "status" | "audit" | "history" | "errors"] if method == Method::GET => None,
        ["v1", "redrives"] if method == Method::POST || method == Method::GET => None,
        ["v1", "redrives", _] if method == Method::GET => None,
        _ => Some(format!(
            "token {token_id} belongs to tenant `{}`: {} {} is the operator's",
            quote(&own),
            method,
            quote(request.uri().path())
        )),
    };
    match refusal {
        Some(reason) => {
            tracing::warn!(token = %token_id, "admin API refused a tenant token: {reason}");
            ApiError::new(StatusCode::FORBIDDEN, reason).into_response()
        }
        None => next.run(request).await,
    }
}

/// `value` with its `%XX` escapes decoded (an escape that is not one is kept as it is).
pub(super) fn percent_decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[at], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
