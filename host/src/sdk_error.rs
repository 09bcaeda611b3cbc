//! Rendering AWS SDK errors for logs and typed errors.

use aws_sdk_kinesis::error::ProvideErrorMetadata;

/// An SDK error as its service code and message (`ExpiredIteratorException: ...`) rather than
/// the SDK's generic "service error". The trait is smithy's, shared by every AWS SDK crate.
pub(crate) fn describe_error<E: ProvideErrorMetadata + std::fmt::Debug>(error: &E) -> String {
    match (error.code(), error.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_owned(),
        _ => format!("{error:?}"),
    }
}
