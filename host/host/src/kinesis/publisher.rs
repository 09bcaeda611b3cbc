//! Publishing to Kinesis: counted copies, dead letters, and what guests publish.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::config::timeout::TimeoutConfig;
use aws_sdk_kinesis::primitives::Blob;

use ruststream_runtime::{
    publish::{BoxFuture, PublishError, Publisher, check_size},
    record::{OutgoingRecord, Published},
};

/// Writes records with PutRecord. The SDK's standard retries cover throttling, server errors
/// and attempts that outlast the attempt timeout (a call stalled after connecting, which would
/// otherwise block the pipeline waiting for its copy); what is left after them is reported as a
/// typed [`PublishError`].
#[derive(Debug, Clone)]
pub struct KinesisPublisher {
    client: Client,
    attempt_timeout: Option<Duration>,
}

impl KinesisPublisher {
    /// A publisher writing through `client`, its attempts bounded only by the client's own
    /// timeout configuration.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            attempt_timeout: None,
        }
    }

    /// The same publisher, each attempt of a PutRecord abandoned (and retried by the SDK) after
    /// `timeout`.
    pub fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = Some(timeout);
        self
    }
}

impl Publisher for KinesisPublisher {
    fn publish<'a>(
        &'a self,
        stream: &'a str,
        record: OutgoingRecord,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            check_size(&record)?;
            let request = self
                .client
                .put_record()
                .stream_name(stream)
                .partition_key(&record.partition_key)
                .data(Blob::new(record.to_stream_bytes()));
            let result = match self.attempt_timeout {
                Some(timeout) => {
                    // The client's other timeouts (connecting, reading) stay as they were.
                    let timeouts = self
                        .client
                        .config()
                        .timeout_config()
                        .map_or_else(TimeoutConfig::builder, TimeoutConfig::to_builder)
                        .operation_attempt_timeout(timeout)
                        .build();
                    request
                        .customize()
                        .config_override(
                            aws_sdk_kinesis::Config::builder().timeout_config(timeouts),
                        )
                        .send()
                        .await
                }
                None => request.send().await,
            };
            match result {
                Ok(out) => Ok(Published {
                    shard_id: out.shard_id,
                    sequence_number: out.sequence_number,
                }),
                Err(error) => Err(match error.as_service_error() {
                    Some(e) if e.is_resource_not_found_exception() => {
                        PublishError::StreamNotFound(stream.to_owned())
                    }
                    Some(e) if e.is_provisioned_throughput_exceeded_exception() => {
                        PublishError::Throttled(stream.to_owned())
                    }
                    _ => PublishError::Unavailable {
                        stream: stream.to_owned(),
                        source: Arc::new(error),
                    },
                }),
            }
        })
    }
}
