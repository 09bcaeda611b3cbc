//! Enhanced fan-out consumers: registered once per (tenant, app) and stream, under a name made
//! from both, waited for until `ACTIVE`, and found again by that name by every host of a fleet
//! and after every restart.
//!
//! Kinesis lets a stream have at most 20 consumers (50 with On-demand Advantage); a
//! registration past that is refused with [`ReadError::ConsumerLimit`], which names the stream,
//! the limit and the consumers the stream has. Registering a name that exists already
//! (another host's, or this one's before a restart) is not an error: the existing consumer is
//! taken.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::types::ConsumerStatus;
use tokio::sync::OnceCell;

use super::read_error::ReadError;
use crate::lease::{DEFAULT_TABLE_TEMPLATE, TableTemplate};
use ruststream_runtime::sync::lock;

/// How long a consumer may stay `CREATING` before the registration is given up (Kinesis takes
/// a few seconds).
const ACTIVE_WITHIN: Duration = Duration::from_secs(120);
/// Between two looks at a consumer that is not active yet.
const ACTIVE_POLL: Duration = Duration::from_millis(500);
/// The consumer limit Kinesis states for a stream (without On-demand Advantage).
pub const CONSUMERS_PER_STREAM: usize = 20;

/// The name of the consumer of `tenant`'s `app` on a stream: `ruststream-{tenant}-{app}`,
/// each name escaped as lease tables escape them (no two pairs share one), then
/// `-{subscriber}` for a subscription that shares its stream with another of the same app.
pub fn consumer_name(tenant: &str, app: &str, subscriber: Option<&str>) -> String {
    let base = TableTemplate::new(DEFAULT_TABLE_TEMPLATE, 2, 2)
        .map(|template| template.table(tenant, app))
        .unwrap_or_else(|_| format!("ruststream-{tenant}-{app}"));
    match subscriber {
        Some(subscriber) => format!("{base}-{}", subscriber.replace('-', "._")),
        None => base,
    }
}

/// A consumer's ARN once registered, by (stream, consumer name).
type Registered = HashMap<(String, String), Arc<OnceCell<String>>>;

/// The consumers registered through one client, by (stream, name): registered once, their ARN
/// kept.
#[derive(Debug, Default)]
pub struct Consumers {
    arns: Mutex<Registered>,
}

impl Consumers {
    /// None registered yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The ARN of consumer `name` of `stream`, registered (and waited for until active) if it
    /// does not exist yet. Concurrent callers for one consumer wait for one registration; a
    /// failed registration is tried again by the next caller.
    ///
    /// # Errors
    /// The stream is gone ([`ReadError::StreamGone`]); the stream has all the consumers it may
    /// have ([`ReadError::ConsumerLimit`]); a call was refused or kept failing; the consumer
    /// did not become active within two minutes.
    pub async fn arn(
        &self,
        client: &Client,
        stream: &str,
        name: &str,
    ) -> Result<String, ReadError> {
        let cell = lock(&self.arns)
            .entry((stream.to_owned(), name.to_owned()))
            .or_default()
            .clone();
        cell.get_or_try_init(|| register(client, stream, name))
            .await
            .cloned()
    }

    /// Deregisters consumer `name` of `stream` (one already gone is not an error) and forgets
    /// it.
    ///
    /// # Errors
    /// The stream is gone, or the call was refused (denied, or failed).
    pub async fn deregister(
        &self,
        client: &Client,
        stream: &str,
        name: &str,
    ) -> Result<(), ReadError> {
        self.forget(stream, name);
        let stream_arn = stream_arn(client, stream).await?;
        let deregistered = client
            .deregister_stream_consumer()
            .stream_arn(&stream_arn)
            .consumer_name(name)
            .send()
            .await;
        match deregistered {
            Ok(_) => Ok(()),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception()) =>
            {
                Ok(())
            }
            Err(error) => Err(refused(
                "DeregisterStreamConsumer",
                || format!("consumer `{name}` of `{stream}`"),
                error,
            )),
        }
    }

    /// Forgets consumer `name` of `stream` (found deregistered): the next
    /// [`arn`](Self::arn) registers it again.
    pub fn forget(&self, stream: &str, name: &str) {
        lock(&self.arns).remove(&(stream.to_owned(), name.to_owned()));
    }
}

/// The ARN of `stream`.
async fn stream_arn(client: &Client, stream: &str) -> Result<String, ReadError> {
    let summary = client
        .describe_stream_summary()
        .stream_name(stream)
        .send()
        .await;
    match summary {
        Ok(summary) => summary
            .stream_description_summary()
            .map(|d| d.stream_arn().to_owned())
            .ok_or(ReadError::Incomplete {
                operation: "DescribeStreamSummary",
                target: format!("`{stream}`"),
                missing: "no stream description",
            }),
        Err(error)
            if error
                .as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            Err(ReadError::stream_gone(client, stream))
        }
        Err(error) => Err(refused(
            "DescribeStreamSummary",
            || format!("`{stream}`"),
            error,
        )),
    }
}

async fn register(client: &Client, stream: &str, name: &str) -> Result<String, ReadError> {
    let stream_arn = stream_arn(client, stream).await?;
    let target = || format!("consumer `{name}` of `{stream}`");
    let registered = client
        .register_stream_consumer()
        .stream_arn(&stream_arn)
        .consumer_name(name)
        .send()
        .await;
    match registered {
        Ok(output) => {
            if let Some(consumer) = output.consumer() {
                tracing::info!(
                    stream,
                    consumer = name,
                    "registered an enhanced fan-out consumer"
                );
                if consumer.consumer_status() == &ConsumerStatus::Active {
                    return Ok(consumer.consumer_arn().to_owned());
                }
            }
        }
        // Registered before: by another host of the fleet, or by this one before a restart.
        Err(error)
            if error
                .as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) => {}
        Err(error)
            if error
                .as_service_error()
                .is_some_and(|e| e.is_limit_exceeded_exception()) =>
        {
            let consumers = client
                .list_stream_consumers()
                .stream_arn(&stream_arn)
                .send()
                .await
                .map(|listed| {
                    listed
                        .consumers()
                        .iter()
                        .map(|c| c.consumer_name().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            return Err(ReadError::ConsumerLimit {
                stream: stream.to_owned(),
                limit: CONSUMERS_PER_STREAM,
                consumers,
            });
        }
        Err(error)
            if error
                .as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            return Err(ReadError::stream_gone(client, stream));
        }
        Err(error) => return Err(refused("RegisterStreamConsumer", target, error)),
    }
    let deadline = tokio::time::Instant::now() + ACTIVE_WITHIN;
    loop {
        let described = client
            .describe_stream_consumer()
            .stream_arn(&stream_arn)
            .consumer_name(name)
            .send()
            .await
            .map_err(|error| refused("DescribeStreamConsumer", target, error))?;
        if let Some(consumer) = described.consumer_description()
            && consumer.consumer_status() == &ConsumerStatus::Active
        {
            return Ok(consumer.consumer_arn().to_owned());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ReadError::TimedOut {
                operation: "RegisterStreamConsumer (waiting for ACTIVE)",
                target: target(),
                after: ACTIVE_WITHIN,
            });
        }
        tokio::time::sleep(ACTIVE_POLL).await;
    }
}

/// `operation` on `target` failed in a way another try cannot mend: denied to the identity
/// ([`ReadError::AccessDenied`]), or refused.
fn refused<E, R>(
    operation: &'static str,
    target: impl Fn() -> String,
    error: aws_sdk_kinesis::error::SdkError<E, R>,
) -> ReadError
where
    E: aws_sdk_kinesis::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    ReadError::denied(operation, &target, error).unwrap_or_else(|error| ReadError::Refused {
        operation,
        target: target(),
        source: Box::new(error),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_from_tenant_and_app_and_never_collide() {
        assert_eq!(
            consumer_name("acme", "books", None),
            "ruststream-acme-books"
        );
        assert_ne!(
            consumer_name("acme", "eu-ledger", None),
            consumer_name("acme-eu", "ledger", None)
        );
        assert_eq!(
            consumer_name("acme", "books", Some("audit-log")),
            "ruststream-acme-books-audit._log"
        );
    }
}
