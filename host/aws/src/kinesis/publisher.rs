//! Publishing to Kinesis: counted copies, dead letters, and what guests publish.

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::primitives::Blob;

use std::sync::Arc;

use ruststream_runtime::{
    BoxFuture, OutgoingRecord, PublishError, Published, Publisher, check_size,
};

/// Writes records with PutRecord. The SDK's standard retries cover throttling and server
/// errors; what is left after them is reported as a typed [`PublishError`].
#[derive(Debug, Clone)]
pub struct KinesisPublisher {
    client: Client,
}

impl KinesisPublisher {
    /// A publisher writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
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
            let result = self
                .client
                .put_record()
                .stream_name(stream)
                .partition_key(&record.partition_key)
                .data(Blob::new(record.to_stream_bytes()))
                .send()
                .await;
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
