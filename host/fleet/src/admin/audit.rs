//! The audit trail: every change asked of the admin API by a caller whose token it took is
//! recorded once it is answered, ok or not, with who asked (the token's id), the tenant, the
//! action, its target, what the request said and the result.
//!
//! Each entry goes to the state directory's audit file (`audit.jsonl`, see
//! `crate::state::audit`), synced before the answer leaves, and to the log as a line of target
//! `ruststream::audit` whose `audit` field is the entry's JSON, for whoever ships logs.
//! `GET /v1/audit` (`ruststream audit`) reads the file back. Reads (`GET`) are not changes and
//! are not recorded; neither is a request the guard refused before it knew the caller.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ruststream_common::escape::one_line;

use super::caller::Caller;
use super::error::ApiError;
use super::model::{AuditEntry, AuditList};
use super::scope::percent_decoded;
use crate::state::audit::{self, AuditFile, AuditFilter};

/// Largest request body kept in an entry (JSON bodies only; uploads by their size).
const KEPT_REQUEST: usize = 64 * 1024;
/// Largest answer kept in an entry, serialized.
const KEPT_ANSWER: usize = 4 * 1024;
/// Largest answer read back to find what it said; the admin API's answers are far smaller.
const READ_ANSWER: usize = 16 * 1024 * 1024;
/// Entries an audit query returns unless it says otherwise, and at most.
const DEFAULT_LIMIT: usize = 1000;

/// Where a host's audit entries go.
#[derive(Debug, Clone)]
pub(crate) struct AuditLog {
    /// The host's owner id.
    host: String,
    /// The state directory's audit file; none for a host that keeps no state (tests).
    file: Option<Arc<AuditFile>>,
}

impl AuditLog {
    /// Entries of `host`, kept in `file`.
    pub(crate) fn new(host: &str, file: Option<AuditFile>) -> Self {
        Self {
            host: host.to_owned(),
            file: file.map(Arc::new),
        }
    }

    /// Logs `entry` and appends it to the audit file, synced. A failed write is logged as an
    /// error: the change it records happened all the same.
    async fn record(&self, entry: &AuditEntry) {
        let line = match serde_json::to_string(entry) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(error = %error, "an audit entry cannot be written as JSON");
                return;
            }
        };
        tracing::info!(target: "ruststream::audit", audit = %line, "audit: {} {} {}",
            entry.action, entry.target, entry.result);
        let Some(file) = self.file.clone() else {
            return;
        };
        let written = tokio::task::spawn_blocking(move || file.append(&line)).await;
        let failed = match written {
            Ok(Ok(())) => return,
            Ok(Err(error)) => one_line(&error),
            Err(error) => error.to_string(),
        };
        tracing::error!(error = %failed, "the audit file was not written: this change is in the log only");
    }

    /// The entries `filter` keeps, oldest first.
    ///
    /// # Errors
    /// The audit file cannot be read.
    fn read(&self, filter: &AuditFilter) -> Result<AuditList, ApiError> {
        let Some(file) = &self.file else {
            return Ok(AuditList {
                kept_in: "nowhere: this host keeps no state directory".to_owned(),
                entries: Vec::new(),
            });
        };
        let lines = file.lines().map_err(|error| {
            let message = format!(
                "cannot read the audit file {}: {}",
                file.path().display(),
                one_line(&error)
            );
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
        })?;
        let entries = audit::entries(lines.iter().map(String::as_str));
        Ok(AuditList {
            kept_in: file.path().display().to_string(),
            entries: filter.keep(entries),
        })
    }
}

/// The filter of an audit query: `?tenant=T&since_ms=MS&limit=N`.
///
/// # Errors
/// A number that is not one, or an unknown parameter.
pub(super) fn query(uri: &Uri) -> Result<AuditFilter, ApiError> {
    let mut filter = AuditFilter {
        tenant: None,
        since_ms: 0,
        limit: DEFAULT_LIMIT,
    };
    let bad = |what: String| ApiError::new(StatusCode::BAD_REQUEST, what);
    for pair in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| bad(format!("`{name}` = {value:?} is not a whole number")))
        };
        match name {
            "tenant" => filter.tenant = Some(percent_decoded(value)),
            "since_ms" => filter.since_ms = number()?,
            "limit" => filter.limit = (number()? as usize).min(DEFAULT_LIMIT),
            other => {
                return Err(bad(format!(
                    "unknown query parameter {other:?}: tenant, since_ms and limit are known"
                )));
            }
        }
    }
    Ok(filter)
}

/// `GET /v1/audit`: a tenant token's caller sees its tenant's entries alone.
pub(super) async fn list(
    State(audit): State<Arc<AuditLog>>,
    caller: Option<axum::extract::Extension<Caller>>,
    uri: Uri,
) -> Response {
    let own = caller.and_then(|axum::extract::Extension(caller)| caller.tenant);
    let listed = query(&uri).and_then(|mut filter| {
        if own.is_some() {
            filter.tenant = own;
        }
        audit.read(&filter)
    });
    match listed {
        Ok(list) => axum::Json(list).into_response(),
        Err(error) => error.into_response(),
    }
}

/// Records every change a known caller asks for, once it is answered.
pub(super) async fn record_changes(
    State(audit): State<Arc<AuditLog>>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        return next.run(request).await;
    };
    if method == Method::GET || method == Method::HEAD {
        return next.run(request).await;
    }
    let (action, tenant, target) = action_of(&method, request.uri().path());
    let (request, said) = what_it_says(request).await;
    // A route without a tenant in its path may name one in its body (a token, a redrive).
    let tenant = tenant.or_else(|| {
        let named = said.as_ref()?.get("tenant")?.as_str()?;
        Some(named.to_owned())
    });
    let response = next.run(request).await;
    let status = response.status();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, READ_ANSWER)
        .await
        .unwrap_or_default();
    let mut answer: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
    // A token made is shown to its maker once, never kept: not here either.
    if let Some(serde_json::Value::Object(fields)) = &mut answer
        && fields.contains_key("token")
    {
        fields.insert("token".into(), "(shown once, not kept)".into());
    }
    let error = (!status.is_success()).then(|| {
        (answer.as_ref())
            .and_then(|a| a["error"].as_str().map(str::to_owned))
            .unwrap_or_else(|| status.to_string())
    });
    let kept = answer.filter(|_| status.is_success()).map(|answer| {
        if bytes.len() <= KEPT_ANSWER {
            answer
        } else {
            serde_json::json!({ "omitted": format!("{} bytes", bytes.len()) })
        }
    });
    let at = SystemTime::now();
    let entry = AuditEntry {
        at_ms: at
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis() as u64,
        at: crate::json_log::timestamp(at),
        host: audit.host.clone(),
        token: caller.token_id,
        tenant,
        action,
        target,
        request: said,
        result: match status.as_u16() {
            200..=399 => "ok",
            400..=499 => "refused",
            _ => "failed",
        }
        .to_owned(),
        status: status.as_u16(),
        error,
        answer: kept,
    };
    audit.record(&entry).await;
    Response::from_parts(parts, Body::from(bytes))
}

/// The request with its body (read whole when it is small JSON, to keep it), and what it says:
/// the JSON body, or an upload's size and query.
async fn what_it_says(request: Request) -> (Request, Option<serde_json::Value>) {
    let headers = request.headers();
    // A body of a known size: the header, or what the body itself says.
    let length = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .or_else(|| {
            let hint = HttpBody::size_hint(request.body()).exact();
            hint.and_then(|n| usize::try_from(n).ok())
        });
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    let query = request.uri().query().map(str::to_owned);
    match length {
        Some(length) if json && length <= KEPT_REQUEST => {
            let (parts, body) = request.into_parts();
            let bytes = axum::body::to_bytes(body, KEPT_REQUEST)
                .await
                .unwrap_or_else(|_| Bytes::new());
            let said = serde_json::from_slice(&bytes).ok();
            (Request::from_parts(parts, Body::from(bytes)), said)
        }
        Some(length) if length > 0 => {
            let said = serde_json::json!({ "bytes": length, "query": query });
            (request, Some(said))
        }
        _ => (request, None),
    }
}

/// The action a change asks for, the tenant it is about and its target, from its route.
fn action_of(method: &Method, path: &str) -> (String, Option<String>, String) {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let owned = |s: &[&str]| s.join("/");
    match segments.as_slice() {
        ["v1", "tenants", tenant, rest @ ..] => {
            let tenant = Some((*tenant).to_owned());
            let (action, target) = match (method, rest) {
                (_, ["pause"] | ["resume"]) => (rest[0].to_owned(), String::new()),
                (_, ["apps", app, "subscriptions", subscriber, "seek"]) => {
                    ("seek".to_owned(), format!("{app}/{subscriber}"))
                }
                (m, ["components", name]) if m == Method::DELETE => {
                    ("undeploy".to_owned(), (*name).to_owned())
                }
                (_, ["components", name]) => ("deploy".to_owned(), (*name).to_owned()),
                (_, ["components", name, "shadow"]) => {
                    ("deploy-shadow".to_owned(), (*name).to_owned())
                }
                (m, ["apps", app, "shadow"]) if m == Method::DELETE => {
                    ("abort-shadow".to_owned(), (*app).to_owned())
                }
                (_, ["apps", app, verb]) => ((*verb).to_owned(), (*app).to_owned()),
                _ => (format!("{method}"), owned(rest)),
            };
            (action, tenant, target)
        }
        ["v1", "reload"] => ("reload".to_owned(), None, String::new()),
        ["v1", "tokens"] => ("token-create".to_owned(), None, String::new()),
        ["v1", "tokens", id] => ("token-revoke".to_owned(), None, (*id).to_owned()),
        ["v1", "redrives"] => ("redrive".to_owned(), None, String::new()),
        _ => (format!("{method}"), None, path.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_route_names_its_action_tenant_and_target() {
        let cases = [
            (
                Method::POST,
                "/v1/tenants/acme/apps/books/subscriptions/handle/seek",
                ("seek", Some("acme"), "books/handle"),
            ),
            (
                Method::POST,
                "/v1/tenants/acme/pause",
                ("pause", Some("acme"), ""),
            ),
            (
                Method::POST,
                "/v1/tenants/acme/resume",
                ("resume", Some("acme"), ""),
            ),
            (
                Method::PUT,
                "/v1/tenants/acme/components/books",
                ("deploy", Some("acme"), "books"),
            ),
            (
                Method::DELETE,
                "/v1/tenants/acme/components/books",
                ("undeploy", Some("acme"), "books"),
            ),
            (
                Method::PUT,
                "/v1/tenants/acme/components/books/shadow",
                ("deploy-shadow", Some("acme"), "books"),
            ),
            (
                Method::DELETE,
                "/v1/tenants/acme/apps/books/shadow",
                ("abort-shadow", Some("acme"), "books"),
            ),
            (
                Method::POST,
                "/v1/tenants/acme/apps/books/promote",
                ("promote", Some("acme"), "books"),
            ),
            (
                Method::POST,
                "/v1/tenants/acme/apps/books/rollback",
                ("rollback", Some("acme"), "books"),
            ),
            (Method::POST, "/v1/reload", ("reload", None, "")),
            (Method::POST, "/v1/redrives", ("redrive", None, "")),
            (Method::POST, "/v1/tokens", ("token-create", None, "")),
            (
                Method::DELETE,
                "/v1/tokens/ab12",
                ("token-revoke", None, "ab12"),
            ),
            (Method::POST, "/v1/nothing", ("POST", None, "/v1/nothing")),
        ];
        for (method, path, (action, tenant, target)) in cases {
            let (a, t, g) = action_of(&method, path);
            assert_eq!(
                (a.as_str(), t.as_deref(), g.as_str()),
                (action, tenant, target),
                "{method} {path}"
            );
        }
    }

    #[test]
    fn a_query_filters_by_tenant_and_time_and_keeps_the_newest() -> Result<(), ApiError> {
        let uri = |text: &'static str| Uri::from_static(text);
        let filter = query(&uri("/v1/audit?tenant=ac%6De&since_ms=5&limit=2"))?;
        assert_eq!(
            filter,
            AuditFilter {
                tenant: Some("acme".into()),
                since_ms: 5,
                limit: 2,
            }
        );
        assert!(
            query(&uri("/v1/audit?since=5")).is_err(),
            "an unknown parameter"
        );
        assert!(query(&uri("/v1/audit?limit=many")).is_err(), "not a number");
        let entry = |at_ms, tenant: &str| AuditEntry {
            at_ms,
            at: String::new(),
            host: "a".into(),
            token: "operator".into(),
            tenant: Some(tenant.into()),
            action: "pause".into(),
            target: String::new(),
            request: None,
            result: "ok".into(),
            status: 200,
            error: None,
            answer: None,
        };
        let entries = [1, 6, 7, 8].map(|at| entry(at, "acme"));
        let kept = filter.keep(entries.into_iter().chain([entry(9, "other")]));
        let times: Vec<u64> = kept.iter().map(|e| e.at_ms).collect();
        assert_eq!(times, [7, 8], "acme's, from 5 on, the newest two");
        Ok(())
    }
}
