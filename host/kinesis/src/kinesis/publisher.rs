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
///
/// Its calls run on the executor it was made on (the host's), wherever they are awaited: a
/// guest's publish is awaited on a compute thread, and its connection must not depend on
/// compute threads that spinning guests keep busy.
#[derive(Debug, Clone)]
pub struct KinesisPublisher {
    client: Client,
    attempt_timeout: Option<Duration>,
    home: Option<tokio::runtime::Handle>,
}

impl KinesisPublisher {
    /// A publisher writing through `client`, its attempts bounded only by the client's own
    /// timeout configuration; its calls run on the current executor (if any).
    pub fn new(client: Client) -> Self {
        Self {
            client,
            attempt_timeout: None,
            home: tokio::runtime::Handle::try_current().ok(),
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
        let Some(home) = self.home.clone() else {
            return Box::pin(self.clone().put(stream.to_owned(), record));
        };
        let stream = stream.to_owned();
        let call = home.spawn(self.clone().put(stream.clone(), record));
        Box::pin(async move {
            call.await.unwrap_or_else(|error| {
                Err(PublishError::Unavailable {
                    stream,
                    source: Arc::new(error),
                })
            })
        })
    }
}

impl KinesisPublisher {
    /// One PutRecord of `record` to `stream`, with the SDK's retries.
    async fn put(self, stream: String, record: OutgoingRecord) -> Result<Published, PublishError> {
        let stream = stream.as_str();
        {
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
        }
    }
}
