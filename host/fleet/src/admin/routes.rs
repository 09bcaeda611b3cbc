//! The admin API's routes: HTTP in, [`Control`] calls, JSON out.
//!
//! Every answer is JSON, errors included (`{"error":"<one line>"}`): a bad body, an unknown
//! route, a body over the limit and a refusal by the guard get the same shape as a refusal from
//! the host, so a client parses one kind of error. Request bodies are parsed here with
//! serde_json rather than with axum's `Json` extractor, which answers in plain text; their
//! content type is the guard's to check.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use ruststream_common::escape::quote;

use super::audit::{self, AuditLog};
use super::caller::Caller;
use super::console;
use super::control::Control;
use super::error::ApiError;
use super::extract::{JsonBody, Names, OptionalJsonBody};
use super::guard::{self, Guard};
use super::model::{
    AppVersionList, Deployed, ErrorList, HostHistory, HostStatus, Moved, PauseState, Readiness,
    RedriveList, RedriveRequest, RollbackTo, SeekPosition, ShadowDeployed, ShadowDropped,
    Undeployed,
};
use super::scope;
use super::token_routes::{self, TokenApi};

/// The admin API over `control`, every request checked by `guard` first.
pub(super) fn router<C: Control>(
    control: Arc<C>,
    guard: Arc<Guard>,
    audit: Arc<AuditLog>,
) -> Router {
    let tokens = TokenApi::new(control.clone(), guard.tenant_tokens());
    let (max_upload, upload_time) = (guard.max_upload(), guard.upload_time());
    let upload = from_fn_with_state(guard.clone(), guard::upload);
    let json = || from_fn(guard::json_body);
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz::<C>))
        .route("/v1/status", get(status::<C>))
        .route(
            "/v1/tenants/{tenant}/apps/{app}/subscriptions/{subscriber}/seek",
            post(seek::<C>).layer(json()),
        )
        .route("/v1/tenants/{tenant}/pause", post(pause::<C>).layer(json()))
        .route(
            "/v1/tenants/{tenant}/resume",
            post(resume::<C>).layer(json()),
        )
        .route(
            "/v1/tenants/{tenant}/components/{name}",
            put(move |control, names, body| {
                deploy::<C>(control, names, body, (max_upload, upload_time))
            })
            .layer(upload)
            .merge(delete(undeploy::<C>).layer(json())),
        )
        .route(
            "/v1/tenants/{tenant}/components/{name}/shadow",
            put(move |control, names, uri, body| {
                deploy_shadow::<C>(control, names, uri, body, (max_upload, upload_time))
            })
            .layer(from_fn_with_state(guard.clone(), guard::upload)),
        )
        .route(
            "/v1/tenants/{tenant}/apps/{app}/shadow",
            delete(abort_shadow::<C>).layer(json()),
        )
        .route(
            "/v1/tenants/{tenant}/apps/{app}/promote",
            post(promote::<C>).layer(json()),
        )
        .route("/v1/reload", post(reload::<C>).layer(json()))
        .route(
            "/v1/tenants/{tenant}/apps/{app}/rollback",
            post(rollback::<C>).layer(json()),
        )
        .route(
            "/v1/tenants/{tenant}/apps/{app}/versions",
            get(versions::<C>),
        )
        .route(
            "/v1/redrives",
            get(redrives::<C>).merge(post(start_redrive::<C>).layer(json())),
        )
        .route("/v1/redrives/{id}", get(redrive::<C>))
        .route("/v1/audit", get(audit::list).with_state(audit.clone()))
        .route("/v1/errors", get(recent_errors::<C>))
        .route("/v1/history", get(history::<C>))
        .route(
            "/v1/tokens",
            get(token_routes::list::<C>)
                .merge(post(token_routes::create::<C>).layer(json()))
                .with_state(tokens.clone()),
        )
        .route(
            "/v1/tokens/{id}",
            delete(token_routes::revoke::<C>)
                .layer(json())
                .with_state(tokens),
        )
        .route("/ui", get(console::index))
        .route("/ui/app.js", get(console::script))
        .route("/ui/app.css", get(console::style))
        .route(
            "/ui/session",
            get(console::current)
                .merge(post(console::sign_in).layer(json()))
                .merge(delete(console::sign_out))
                .with_state(guard.clone()),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn(scope::tenant_scope))
        // Inside the guard: only a caller whose token it took is recorded, the ones the scope
        // refuses included.
        .layer(from_fn_with_state(audit, audit::record_changes))
        .layer(from_fn_with_state(guard, guard::host_and_token))
        .with_state(control)
}

type Answer<T> = Result<Json<T>, ApiError>;

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn readyz<C: Control>(State(control): State<Arc<C>>) -> (StatusCode, Json<Readiness>) {
    let reasons = control.not_ready();
    let ready = reasons.is_empty();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let notices = control.notices();
    (
        status,
        Json(Readiness {
            ready,
            reasons,
            notices,
        }),
    )
}

/// The host's status; a tenant token's caller sees its tenant alone, and no reason for not
/// being ready that names another.
async fn status<C: Control>(
    State(control): State<Arc<C>>,
    caller: Option<Extension<Caller>>,
) -> Json<HostStatus> {
    let mut status = control.status();
    if let Some(Extension(Caller {
        tenant: Some(own), ..
    })) = caller
    {
        let others: Vec<String> = (status.tenants.iter())
            .filter(|t| t.name != own)
            .map(|t| format!("`{}`", t.name))
            .collect();
        status.tenants.retain(|t| t.name == own);
        (status.not_ready).retain(|reason| !others.iter().any(|other| reason.contains(other)));
    }
    Json(status)
}

/// What the console plots; a tenant token's caller gets its tenant's series alone.
async fn history<C: Control>(
    State(control): State<Arc<C>>,
    caller: Option<Extension<Caller>>,
) -> Json<HostHistory> {
    let own = caller.and_then(|Extension(caller)| caller.tenant);
    Json(control.history(own.as_deref()))
}

async fn seek<C: Control>(
    State(control): State<Arc<C>>,
    Names((tenant, app, subscriber)): Names<(String, String, String)>,
    JsonBody(position): JsonBody<SeekPosition>,
) -> Answer<Moved> {
    tracing::info!(tenant = %quote(&tenant), app = %quote(&app), subscriber = %quote(&subscriber), ?position, "admin: seek");
    let moved = control.seek(&tenant, &app, &subscriber, position).await?;
    Ok(Json(Moved { moved }))
}

async fn pause<C: Control>(
    State(control): State<Arc<C>>,
    Names(tenant): Names<String>,
) -> Answer<PauseState> {
    tracing::info!(tenant = %quote(&tenant), "admin: pause");
    control.pause(&tenant).await?;
    Ok(Json(PauseState {
        tenant,
        paused: true,
    }))
}

async fn resume<C: Control>(
    State(control): State<Arc<C>>,
    Names(tenant): Names<String>,
) -> Answer<PauseState> {
    tracing::info!(tenant = %quote(&tenant), "admin: resume");
    control.resume(&tenant).await?;
    Ok(Json(PauseState {
        tenant,
        paused: false,
    }))
}

async fn deploy<C: Control>(
    State(control): State<Arc<C>>,
    Names((tenant, name)): Names<(String, String)>,
    body: Body,
    (max_upload, upload_time): (usize, Duration),
) -> Answer<Deployed> {
    let wasm = read_upload(body, max_upload, upload_time).await?;
    if wasm.is_empty() {
        let message = "the request body is empty: send the component's .wasm bytes".to_owned();
        return Err(ApiError::new(StatusCode::BAD_REQUEST, message));
    }
    tracing::info!(tenant = %quote(&tenant), component = %quote(&name), bytes = wasm.len(), "admin: deploy");
    Ok(Json(control.deploy(&tenant, &name, Vec::from(wasm)).await?))
}

async fn deploy_shadow<C: Control>(
    State(control): State<Arc<C>>,
    Names((tenant, name)): Names<(String, String)>,
    uri: Uri,
    body: Body,
    (max_upload, upload_time): (usize, Duration),
) -> Answer<ShadowDeployed> {
    let sample_percent = sample_percent(&uri)?;
    let wasm = read_upload(body, max_upload, upload_time).await?;
    if wasm.is_empty() {
        let message = "the request body is empty: send the component's .wasm bytes".to_owned();
        return Err(ApiError::new(StatusCode::BAD_REQUEST, message));
    }
    tracing::info!(tenant = %quote(&tenant), component = %quote(&name), bytes = wasm.len(),
        sample_percent, "admin: deploy a shadow");
    let deployed = control.deploy_shadow(&tenant, &name, Vec::from(wasm), sample_percent);
    Ok(Json(deployed.await?))
}

/// The `sample` query parameter: a percentage from 1 to 100, 100 when absent.
fn sample_percent(uri: &Uri) -> Result<u32, ApiError> {
    let given = uri
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix("sample="));
    let Some(given) = given else { return Ok(100) };
    match given.parse::<u32>() {
        Ok(percent) if (1..=100).contains(&percent) => Ok(percent),
        _ => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("sample {} is not a percentage from 1 to 100", quote(given)),
        )),
    }
}

async fn abort_shadow<C: Control>(
    State(control): State<Arc<C>>,
    Names((tenant, app)): Names<(String, String)>,
) -> Answer<ShadowDropped> {
    tracing::info!(tenant = %quote(&tenant), app = %quote(&app), "admin: abort the shadow");
    Ok(Json(control.abort_shadow(&tenant, &app).await?))
}

async fn promote<C: Control>(
    State(control): State<Arc<C>>,
    Names((tenant, app)): Names<(String, String)>,
) -> Answer<Deployed> {
    tracing::info!(tenant = %quote(&tenant), app = %quote(&app), "admin: promote the shadow");
    Ok(Json(control.promote(&tenant, &app).await?))
}

/// The upload's bytes: at most `max` (the compile size bound) within `time`, so a client that
/// stalls does not hold the one upload slot for good.
async fn read_upload(body: Body, max: usize, time: Duration) -> Result<Bytes, ApiError> {
    match tokio::time::timeout(time, axum::body::to_bytes(body, max)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(error)) => {
            let error = error.into_inner();
            if error.is::<http_body_util::LengthLimitError>() {
                let message = guard::too_large_streamed(max);
                return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message));
            }
            let message = format!("cannot read the upload: {error}");
            Err(ApiError::new(StatusCode::BAD_REQUEST, message))
        }
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!("the upload did not arrive within {time:?}: send it again"),
        )),
    }
}

async fn undeploy<C: Control>(
    State(control): State<Arc<C>>,
    Names((tenant, name)): Names<(String, String)>,
) -> Answer<Undeployed> {
    tracing::info!(tenant = %quote(&tenant), component = %quote(&name), "admin: undeploy");
    Ok(Json(control.undeploy(&tenant, &name).await?))
}

async fn reload<C: Control>(State(control): State<Arc<C>>) -> Answer<Vec<Deployed>> {
    tracing::info!("admin: reload");
    Ok(Json(control.reload().await?))
}

async fn rollback<C: Control>(
    State(control): State<Arc<C>>,
    Names((tenant, app)): Names<(String, String)>,
    OptionalJsonBody(body): OptionalJsonBody<RollbackTo>,
) -> Answer<Deployed> {
    let to = body.to.as_deref().map(quote);
    tracing::info!(tenant = %quote(&tenant), app = %quote(&app), ?to, "admin: rollback");
    Ok(Json(control.rollback(&tenant, &app, body.to).await?))
}

async fn versions<C: Control>(
    State(control): State<Arc<C>>,
    Names((tenant, app)): Names<(String, String)>,
) -> Answer<AppVersionList> {
    Ok(Json(control.versions(&tenant, &app)?))
}

async fn start_redrive<C: Control>(
    State(control): State<Arc<C>>,
    caller: Option<Extension<Caller>>,
    JsonBody(request): JsonBody<RedriveRequest>,
) -> Answer<serde_json::Value> {
    if let Some(Extension(Caller {
        token_id,
        tenant: Some(own),
    })) = caller
        && request.tenant.as_deref() != Some(own.as_str())
    {
        let message = format!(
            "token {token_id} belongs to tenant `{}`: it redrives that tenant's dead letters \
             only (give --tenant {})",
            quote(&own),
            quote(&own)
        );
        return Err(ApiError::new(StatusCode::FORBIDDEN, message));
    }
    tracing::info!(stream = %quote(&request.stream), dry_run = request.dry_run, "admin: redrive");
    Ok(Json(control.start_redrive(request).await?))
}

async fn redrive<C: Control>(
    State(control): State<Arc<C>>,
    caller: Option<Extension<Caller>>,
    Names(id): Names<String>,
) -> Answer<serde_json::Value> {
    if let Some(Extension(Caller {
        token_id,
        tenant: Some(own),
    })) = caller
    {
        // Another tenant's redrive is not even said to exist.
        let theirs = control
            .redrives()
            .into_iter()
            .any(|listed| listed.id == id && listed.tenant.as_deref() == Some(own.as_str()));
        if !theirs {
            let message = format!(
                "token {token_id} belongs to tenant `{}`: it sees that tenant's redrives only, \
                 and `{}` is none of them",
                quote(&own),
                quote(&id)
            );
            return Err(ApiError::new(StatusCode::NOT_FOUND, message));
        }
    }
    Ok(Json(control.redrive(&id)?))
}

/// `GET /v1/errors?since_ms=&limit=&tenant=`: the query the audit trail takes; a tenant
/// token's caller sees its own tenant's alone.
async fn recent_errors<C: Control>(
    State(control): State<Arc<C>>,
    caller: Option<Extension<Caller>>,
    uri: Uri,
) -> Answer<ErrorList> {
    let mut filter = audit::query(&uri)?;
    if let Some(Extension(Caller {
        tenant: Some(own), ..
    })) = caller
    {
        filter.tenant = Some(own);
    }
    let errors = control.recent_errors(filter.tenant.as_deref(), filter.since_ms, filter.limit);
    Ok(Json(ErrorList { errors }))
}

async fn redrives<C: Control>(
    State(control): State<Arc<C>>,
    caller: Option<Extension<Caller>>,
) -> Json<RedriveList> {
    let own = caller.and_then(|Extension(caller)| caller.tenant);
    let mut redrives = control.redrives();
    if let Some(own) = own {
        redrives.retain(|listed| listed.tenant.as_deref() == Some(own.as_str()));
    }
    Json(RedriveList { redrives })
}

async fn not_found(uri: Uri) -> ApiError {
    let message = format!("no route {}", quote(uri.path()));
    ApiError::new(StatusCode::NOT_FOUND, message)
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    let message = format!("{method} is not allowed on {}", quote(uri.path()));
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, message)
}
