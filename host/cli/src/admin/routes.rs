//! The admin API's routes: HTTP in, [`Control`] calls, JSON out.
//!
//! Every answer is JSON, errors included (`{"error":"<one line>"}`): a bad body, an unknown
//! route and a body over the limit get the same shape as a refusal from the host, so a client
//! parses one kind of error. Request bodies are parsed here with serde_json rather than with
//! axum's `Json` extractor, which answers in plain text and insists on a content type.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use ruststream_runtime::{one_line, quote};
use serde::de::DeserializeOwned;

use super::control::{Control, ControlError};
use super::model::{Deployed, ErrorBody, HostStatus, Moved, PauseState, Readiness, SeekPosition};

/// Largest component a `PUT .../components/{name}` accepts; a larger body is answered 413.
pub(crate) const MAX_COMPONENT_BYTES: usize = 64 << 20;

/// The admin API over `control`, accepting components of at most `max_component_bytes`.
pub(super) fn router<C: Control>(control: Arc<C>, max_component_bytes: usize) -> Router {
    let component_limit = DefaultBodyLimit::max(max_component_bytes);
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz::<C>))
        .route("/v1/status", get(status::<C>))
        .route(
            "/v1/tenants/{tenant}/apps/{app}/subscriptions/{subscriber}/seek",
            post(seek::<C>),
        )
        .route("/v1/tenants/{tenant}/pause", post(pause::<C>))
        .route("/v1/tenants/{tenant}/resume", post(resume::<C>))
        .route(
            "/v1/tenants/{tenant}/components/{name}",
            put(deploy::<C>).layer(component_limit),
        )
        .route("/v1/reload", post(reload::<C>))
        .route(
            "/v1/tenants/{tenant}/apps/{app}/rollback",
            post(rollback::<C>),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(control)
}

/// An error answer: a status and `{"error": message}`.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: String) -> Self {
        Self { status, message }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.message,
        };
        (self.status, Json(body)).into_response()
    }
}

impl From<ControlError> for ApiError {
    fn from(error: ControlError) -> Self {
        // Names in the message come from the request path: one_line escapes and bounds them.
        Self::new(status_of(&error), one_line(&error))
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        Self::new(rejection.status(), rejection.body_text())
    }
}

/// The HTTP status of each refusal from the host. Exhaustive on purpose: a new variant must
/// be given its status here.
fn status_of(error: &ControlError) -> StatusCode {
    match error {
        ControlError::UnknownTenant(_)
        | ControlError::UnknownApp { .. }
        | ControlError::UnknownSubscriber { .. } => StatusCode::NOT_FOUND,
        ControlError::Refused { .. } | ControlError::Config(_) => StatusCode::UNPROCESSABLE_ENTITY,
        ControlError::NothingToRollBack { .. } | ControlError::Seek(_) => StatusCode::CONFLICT,
    }
}

/// Path parameters, with a JSON error when they do not decode (invalid percent-encoding).
pub(super) struct Names<T>(T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Names<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(names)) => Ok(Names(names)),
            Err(rejection) => Err(ApiError::new(rejection.status(), rejection.body_text())),
        }
    }
}

/// A JSON request body, whatever its content type: 400 with a JSON error when it does not parse.
pub(super) struct JsonBody<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, state).await?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|error| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("the request body is not the expected JSON: {error}"),
                )
            })
    }
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

async fn status<C: Control>(State(control): State<Arc<C>>) -> Json<HostStatus> {
    Json(control.status())
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
    control.pause(&tenant)?;
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
    control.resume(&tenant)?;
    Ok(Json(PauseState {
        tenant,
        paused: false,
    }))
}

async fn deploy<C: Control>(
    State(control): State<Arc<C>>,
    Names((tenant, name)): Names<(String, String)>,
    wasm: Result<Bytes, BytesRejection>,
) -> Answer<Deployed> {
    let wasm = wasm?;
    if wasm.is_empty() {
        let message = "the request body is empty: send the component's .wasm bytes".to_owned();
        return Err(ApiError::new(StatusCode::BAD_REQUEST, message));
    }
    tracing::info!(tenant = %quote(&tenant), component = %quote(&name), bytes = wasm.len(), "admin: deploy");
    Ok(Json(control.deploy(&tenant, &name, Vec::from(wasm)).await?))
}

async fn reload<C: Control>(State(control): State<Arc<C>>) -> Answer<Vec<Deployed>> {
    tracing::info!("admin: reload");
    Ok(Json(control.reload().await?))
}

async fn rollback<C: Control>(
    State(control): State<Arc<C>>,
    Names((tenant, app)): Names<(String, String)>,
) -> Answer<Deployed> {
    tracing::info!(tenant = %quote(&tenant), app = %quote(&app), "admin: rollback");
    Ok(Json(control.rollback(&tenant, &app).await?))
}

async fn not_found(uri: Uri) -> ApiError {
    let message = format!("no route {}", quote(uri.path()));
    ApiError::new(StatusCode::NOT_FOUND, message)
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    let message = format!("{method} is not allowed on {}", quote(uri.path()));
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, message)
}
