//! Why a shard cannot be read on.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kinesis::error::{ProvideErrorMetadata, SdkError};

use crate::Cause;

/// Why a shard cannot be read on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The stream does not exist (it never did, or was deleted).
    #[error("stream `{stream}` does not exist in region {region}")]
    StreamGone {
        /// The stream.
        stream: String,
        /// The region the client asked, as its configuration names it.
        region: String,
    },
    /// A Kinesis call kept failing; the cause is the SDK's error of the last try.
    #[error("{operation} on {target} failed {tries} times in a row")]
    Service {
        /// The Kinesis operation.
        operation: &'static str,
        /// The stream, and the shard when the call was about one.
        target: String,
        /// How many times it was tried.
        tries: u32,
        /// The last failure, as the SDK reported it.
        #[source]
        source: Cause,
    },
    /// A Kinesis call failed in a way that trying again cannot mend (an invalid argument).
    #[error("{operation} on {target} was refused")]
    Refused {
        /// The Kinesis operation.
        operation: &'static str,
        /// The stream and shard, and the position asked for.
        target: String,
        /// The SDK's error.
        #[source]
        source: Cause,
    },
    /// The identity making the call may not make it: IAM denied the action
    /// (`AccessDeniedException`), or the stream's KMS key denied decrypting its records
    /// (`KMSAccessDeniedException`). Nothing is read until a policy allows it; trying again at
    /// once cannot mend it.
    #[error("{operation} on {target} was denied to the identity reading it: it needs {needs}")]
    AccessDenied {
        /// The Kinesis operation.
        operation: &'static str,
        /// The stream, and the shard when the call was about one.
        target: String,
        /// What its policy must allow (`kinesis:GetRecords`, `kms:Decrypt` on the stream's key).
        needs: String,
        /// The SDK's error.
        #[source]
        source: Cause,
    },
    /// Kinesis answered without what the call is for.
    #[error("{operation} on {target} returned {missing}")]
    Incomplete {
        /// The Kinesis operation.
        operation: &'static str,
        /// The stream and shard.
        target: String,
        /// What was missing.
        missing: &'static str,
    },
    /// A Kinesis call did not answer in time (it stalled after connecting).
    #[error("{operation} on {target} did not answer within {after:?}")]
    TimedOut {
        /// The Kinesis operation.
        operation: &'static str,
        /// The stream, and the shard when the call was about one.
        target: String,
        /// How long it was given.
        after: Duration,
    },
    /// The stream has as many enhanced fan-out consumers as Kinesis allows: the subscription
    /// cannot read it in fan-out mode until one is deregistered (or it reads by polling).
    #[error(
        "stream `{stream}` has the most enhanced fan-out consumers Kinesis allows ({limit}; 50 \
         with On-demand Advantage): read it with `read = \"polling\"`, or deregister one of \
         its {}: {}",
        consumers.len(),
        consumers.join(", ")
    )]
    ConsumerLimit {
        /// The stream.
        stream: String,
        /// The limit.
        limit: usize,
        /// The consumers it has, by name.
        consumers: Vec<String>,
    },
    /// The enhanced fan-out consumer a subscription read through is gone (deregistered while
    /// the stream still exists): it is registered again when the shard is next opened.
    #[error("enhanced fan-out consumer {consumer_arn} of stream `{stream}` no longer exists")]
    ConsumerGone {
        /// The stream.
        stream: String,
        /// The consumer.
        consumer_arn: String,
    },
    /// The reader of an unfinished shard has no read in flight: a bug, reported rather than
    /// spinning.
    #[error("the reader of `{stream}`/{shard_id} has no read in flight on an unfinished shard")]
    Stalled {
        /// The stream.
        stream: String,
        /// The shard.
        shard_id: String,
    },
}

impl ReadError {
    /// This error again, for one more of the readers a shared read failed for: the fields
    /// copied, an SDK cause shared.
    pub(crate) fn for_another(shared: &Arc<ReadError>) -> Self {
        let cause = || -> Cause { Box::new(CauseOf(shared.clone())) };
        match &**shared {
            Self::StreamGone { stream, region } => Self::StreamGone {
                stream: stream.clone(),
                region: region.clone(),
            },
            Self::Service {
                operation,
                target,
                tries,
                ..
            } => Self::Service {
                operation,
                target: target.clone(),
                tries: *tries,
                source: cause(),
            },
            Self::Refused {
                operation, target, ..
            } => Self::Refused {
                operation,
                target: target.clone(),
                source: cause(),
            },
            Self::AccessDenied {
                operation,
                target,
                needs,
                ..
            } => Self::AccessDenied {
                operation,
                target: target.clone(),
                needs: needs.clone(),
                source: cause(),
            },
            Self::Incomplete {
                operation,
                target,
                missing,
            } => Self::Incomplete {
                operation,
                target: target.clone(),
                missing,
            },
            Self::TimedOut {
                operation,
                target,
                after,
            } => Self::TimedOut {
                operation,
                target: target.clone(),
                after: *after,
            },
            Self::ConsumerLimit {
                stream,
                limit,
                consumers,
            } => Self::ConsumerLimit {
                stream: stream.clone(),
                limit: *limit,
                consumers: consumers.clone(),
            },
            Self::ConsumerGone {
                stream,
                consumer_arn,
            } => Self::ConsumerGone {
                stream: stream.clone(),
                consumer_arn: consumer_arn.clone(),
            },
            Self::Stalled { stream, shard_id } => Self::Stalled {
                stream: stream.clone(),
                shard_id: shard_id.clone(),
            },
        }
    }

    /// [`ReadError::AccessDenied`] when `error` is a denial of `operation` on `target` (an
    /// IAM or KMS refusal of the caller's identity); otherwise `error` back.
    pub(crate) fn denied<E, R>(
        operation: &'static str,
        target: impl FnOnce() -> String,
        error: SdkError<E, R>,
    ) -> Result<Self, SdkError<E, R>>
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        let needs = match error.code() {
            Some("AccessDeniedException") => format!("`kinesis:{operation}`"),
            Some("KMSAccessDeniedException") => "`kms:Decrypt` on the stream's key".to_owned(),
            _ => return Err(error),
        };
        Ok(Self::AccessDenied {
            operation,
            target: target(),
            needs,
            source: Box::new(error),
        })
    }

    /// [`ReadError::StreamGone`] for `stream`, naming the region `client` asks.
    pub(crate) fn stream_gone(client: &aws_sdk_kinesis::Client, stream: &str) -> Self {
        let region = client.config().region().map_or_else(
            || "(none configured)".to_owned(),
            |region| region.as_ref().to_owned(),
        );
        Self::StreamGone {
            stream: stream.to_owned(),
            region,
        }
    }
}

/// The SDK cause of a [`ReadError`] several readers were handed.
#[derive(Debug)]
struct CauseOf(Arc<ReadError>);

impl std::fmt::Display for CauseOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match std::error::Error::source(&*self.0) {
            Some(source) => std::fmt::Display::fmt(source, f),
            None => Ok(()),
        }
    }
}

impl std::error::Error for CauseOf {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0).and_then(std::error::Error::source)
    }
}
