//! Enhanced fan-out consumers: registered once per (tenant, app) and stream, under a name made
//! from both, waited for until `ACTIVE`, and found again by that name by every host of a fleet
//! and after every restart.
//!
//! Kinesis lets a stream have at most 20 consumers (50 with On-demand Advantage); a
//! registration past that is refused with [`ReadError::ConsumerLimit`], which names the stream,
//! the limit and the consumers the stream has. Kinesis refuses a registration with the same
//! `LimitExceededException` when it is busy (five consumers of a stream `CREATING` at once, or
//! the calls' rate), as when several apps start reading one stream together: the stream's
//! consumers are listed to tell the two apart, and a busy registration is tried again after a
//! pause that doubles, within the two minutes a registration is given. Registering a name that
//! exists already (another host's, or this one's before a restart) is not an error: the
//! existing consumer is taken.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::types::ConsumerStatus;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::read_error::ReadError;
use crate::lease::{DEFAULT_TABLE_TEMPLATE, TableTemplate};
use ruststream_common::backoff::Backoff;
use ruststream_common::sync::lock;

/// How long a consumer may stay `CREATING` before the registration is given up (Kinesis takes
/// a few seconds).
const ACTIVE_WITHIN: Duration = Duration::from_secs(120);
/// Between two looks at a consumer that is not active yet.
const ACTIVE_POLL: Duration = Duration::from_millis(500);
/// The consumer limit Kinesis states for a stream (without On-demand Advantage).
pub const CONSUMERS_PER_STREAM: usize = 20;
/// The first pause after Kinesis turned a registration or a listing away as busy (at most
/// five consumers of a stream may be `CREATING` at once, and each call has a rate), doubling
/// up to [`BUSY_LONGEST`].
const BUSY_FIRST: Duration = Duration::from_millis(250);
/// The longest pause between two tries of a busy registration.
const BUSY_LONGEST: Duration = Duration::from_secs(5);

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
    let deadline = Instant::now() + ACTIVE_WITHIN;
    let mut busy = Backoff::new(BUSY_FIRST, BUSY_LONGEST);
    loop {
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
            // Kinesis answers a full stream and a busy one alike: only the consumers it has
            // tell them apart.
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|e| e.is_limit_exceeded_exception()) =>
            {
                let consumers = list(client, &stream_arn, stream, deadline).await?;
                if !consumers.iter().any(|(listed, _)| listed == name) {
                    if consumers.len() >= CONSUMERS_PER_STREAM {
                        return Err(ReadError::ConsumerLimit {
                            stream: stream.to_owned(),
                            limit: CONSUMERS_PER_STREAM,
                            consumers: consumers.into_iter().map(|(name, _)| name).collect(),
                        });
                    }
                    let creating = consumers
                        .iter()
                        .filter(|(_, status)| *status == ConsumerStatus::Creating)
                        .count();
                    tracing::debug!(
                        stream,
                        consumer = name,
                        creating,
                        "Kinesis turned a registration away for its rate; trying again"
                    );
                    pause_before(deadline, busy.next_pause(), || ReadError::TimedOut {
                        operation: "RegisterStreamConsumer (turned away as busy)",
                        target: target(),
                        after: ACTIVE_WITHIN,
                    })
                    .await?;
                    continue;
                }
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
        if let Some(arn) = active(client, &stream_arn, name, deadline, &target).await? {
            return Ok(arn);
        }
        // Deregistered while it was waited for (an undeploy on another host): registered again.
    }
}

/// The ARN of consumer `name` once it is `ACTIVE`; `None` when it is gone meanwhile.
async fn active(
    client: &Client,
    stream_arn: &str,
    name: &str,
    deadline: Instant,
    target: &impl Fn() -> String,
) -> Result<Option<String>, ReadError> {
    loop {
        let described = client
            .describe_stream_consumer()
            .stream_arn(stream_arn)
            .consumer_name(name)
            .send()
            .await;
        match described {
            Ok(described) => {
                if let Some(consumer) = described.consumer_description()
                    && consumer.consumer_status() == &ConsumerStatus::Active
                {
                    return Ok(Some(consumer.consumer_arn().to_owned()));
                }
            }
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception()) =>
            {
                return Ok(None);
            }
            // Throttled: looked at again at the next poll.
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|e| e.is_limit_exceeded_exception()) => {}
            Err(error) => return Err(refused("DescribeStreamConsumer", target, error)),
        }
        pause_before(deadline, ACTIVE_POLL, || ReadError::TimedOut {
            operation: "RegisterStreamConsumer (waiting for ACTIVE)",
            target: target(),
            after: ACTIVE_WITHIN,
        })
        .await?;
    }
}

/// Every consumer of the stream at `stream_arn`, by name with its status, in the order Kinesis
/// lists them; a throttled page is asked for again.
async fn list(
    client: &Client,
    stream_arn: &str,
    stream: &str,
    deadline: Instant,
) -> Result<Vec<(String, ConsumerStatus)>, ReadError> {
    let mut consumers = Vec::new();
    let mut next_token: Option<String> = None;
    let mut busy = Backoff::new(BUSY_FIRST, BUSY_LONGEST);
    loop {
        let listed = client
            .list_stream_consumers()
            .stream_arn(stream_arn)
            .set_next_token(next_token.clone())
            .send()
            .await;
        match listed {
            Ok(page) => {
                consumers.extend(page.consumers().iter().map(|consumer| {
                    (
                        consumer.consumer_name().to_owned(),
                        consumer.consumer_status().clone(),
                    )
                }));
                match page.next_token() {
                    Some(token) => next_token = Some(token.to_owned()),
                    None => return Ok(consumers),
                }
            }
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|e| e.is_limit_exceeded_exception()) =>
            {
                pause_before(deadline, busy.next_pause(), || ReadError::TimedOut {
                    operation: "ListStreamConsumers (throttled)",
                    target: format!("`{stream}`"),
                    after: ACTIVE_WITHIN,
                })
                .await?;
            }
            Err(error) => {
                return Err(refused(
                    "ListStreamConsumers",
                    || format!("`{stream}`"),
                    error,
                ));
            }
        }
    }
}

/// Sleeps `pause`, or fails with `late()` when that would end past `deadline`.
async fn pause_before(
    deadline: Instant,
    pause: Duration,
    late: impl FnOnce() -> ReadError,
) -> Result<(), ReadError> {
    if Instant::now() + pause > deadline {
        return Err(late());
    }
    tokio::time::sleep(pause).await;
    Ok(())
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
