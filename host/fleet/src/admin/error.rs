//! The admin API's error answers: a status and `{"error": "<one line>"}`, whatever refused
//! the request (the guard, a route, the host).

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ruststream_common::escape::one_line;

use super::control::ControlError;
use super::model::ErrorBody;

/// An error answer: a status and `{"error": message}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: String) -> Self {
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
        | ControlError::UnknownSubscriber { .. }
        | ControlError::UnknownRedrive(_) => StatusCode::NOT_FOUND,
        ControlError::Refused { .. } | ControlError::Config(_) => StatusCode::UNPROCESSABLE_ENTITY,
        ControlError::UnknownVersion { .. }
        | ControlError::UnknownComponent { .. }
        | ControlError::NoShadow { .. } => StatusCode::NOT_FOUND,
        ControlError::NothingToRollBack { .. }
        | ControlError::Seek(_)
        | ControlError::AmbiguousVersion { .. }
        | ControlError::AlreadyLive { .. }
        | ControlError::Configured { .. }
        | ControlError::Redrive(_)
        | ControlError::Desired(_) => StatusCode::CONFLICT,
        ControlError::State(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
