//! The Kinesis calls of reading one shard: GetShardIterator and GetRecords, each bounded by its
//! timeout, so a call that stalls after connecting is abandoned and tried again instead of
//! holding its reader (and every reader sharing it) for good.

use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::config::retry::RetryConfig;
use aws_sdk_kinesis::operation::get_records::GetRecordsOutput;
use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::types::ShardIteratorType;
use tokio::time::Instant;

use super::read_config::{MAX_CONSECUTIVE_FAILURES, ReaderConfig, StartAt};
use super::read_error::ReadError;
use super::tap::RecordsTap;
use crate::Cause;
use ruststream_common::backoff::Backoff;
use ruststream_common::escape::one_line;
use ruststream_runtime::Delivery;

/// One shard, as its calls name it.
#[derive(Clone)]
pub(super) struct ShardRef {
    pub client: Client,
    pub stream: String,
    pub shard_id: String,
}

/// What one GetRecords (with the reopening of an expired iterator) came to.
pub(super) enum Called {
    Records {
        output: GetRecordsOutput,
        /// The records as the tap read them; `None` when they are in `output`.
        records: Option<Vec<Delivery>>,
        /// When the answered call went out.
        started: Instant,
    },
    /// Kinesis throttled the read; the iterator is still good.
    Throttled(Cause),
    /// The read failed or timed out; the iterator is still good.
    Failed(Cause),
    /// The stream is gone, the read was denied, or the iterator could not be renewed.
    Fatal(ReadError),
}

/// Why no iterator was had this time.
enum IteratorFailure {
    /// Trying again cannot help.
    Fatal(ReadError),
    /// Kinesis throttled the call: worth another try, and no failure.
    Throttled(Cause),
    /// Worth another try, after a pause.
    Retry(Cause),
}

impl ShardRef {
    pub(super) fn target(&self) -> String {
        format!("`{}`/{}", self.stream, self.shard_id)
    }

    fn timed_out(&self, operation: &'static str, after: Duration) -> ReadError {
        ReadError::TimedOut {
            operation,
            target: self.target(),
            after,
        }
    }

    /// GetRecords with `iterator`; an expired iterator is renewed at `resume` and the read
    /// tried again. A call that outlasts `config.get_records_timeout` counts as failed.
    pub(super) async fn read(
        &self,
        mut iterator: String,
        resume: &StartAt,
        config: &ReaderConfig,
    ) -> (Called, String) {
        let mut backoff = Backoff::new(config.backoff_first, config.backoff_max);
        loop {
            let started = Instant::now();
            let tap = RecordsTap::default();
            metrics::counter!(
                crate::metrics::GET_RECORDS,
                "stream" => self.stream.clone(),
                "shard" => self.shard_id.clone()
            )
            .increment(1);
            let call = self
                .client
                .get_records()
                .shard_iterator(&iterator)
                .limit(config.get_records_limit)
                .customize()
                .interceptor(tap.clone())
                // The reader does its own backoff, so it can log and pace it.
                .config_override(
                    aws_sdk_kinesis::Config::builder().retry_config(RetryConfig::disabled()),
                )
                .send();
            let result = match tokio::time::timeout(config.get_records_timeout, call).await {
                Ok(result) => result,
                Err(_) => {
                    let error = self.timed_out("GetRecords", config.get_records_timeout);
                    return (Called::Failed(error.into()), iterator);
                }
            };
            let error = match result {
                Ok(output) => {
                    let called = Called::Records {
                        output,
                        records: tap.take(),
                        started,
                    };
                    return (called, iterator);
                }
                Err(error) => error,
            };
            let service = error.as_service_error();
            if service.is_some_and(|e| e.is_expired_iterator_exception()) {
                tracing::info!(stream = %self.stream, shard = %self.shard_id, resume = ?resume,
                    "shard iterator expired; reopening where the reader stood");
                match self.iterator(resume, &mut backoff, config).await {
                    Ok(renewed) => iterator = renewed,
                    Err(error) => return (Called::Fatal(error), iterator),
                }
                continue;
            }
            let called = match service {
                Some(e) if e.is_provisioned_throughput_exceeded_exception() => {
                    Called::Throttled(error.into())
                }
                Some(e) if e.is_resource_not_found_exception() => {
                    Called::Fatal(ReadError::stream_gone(&self.client, &self.stream))
                }
                _ => match ReadError::denied("GetRecords", || self.target(), error) {
                    Ok(denied) => Called::Fatal(denied),
                    Err(error) => Called::Failed(error.into()),
                },
            };
            return (called, iterator);
        }
    }

    /// Gets an iterator at `start`, retrying throttling (which never counts as a failure),
    /// server errors and calls that outlast `config.get_shard_iterator_timeout`.
    ///
    /// # Errors
    /// When the stream is gone, the position or the identity is refused, or the call failed
    /// [`MAX_CONSECUTIVE_FAILURES`] times in a row.
    pub(super) async fn iterator(
        &self,
        start: &StartAt,
        backoff: &mut Backoff,
        config: &ReaderConfig,
    ) -> Result<String, ReadError> {
        let mut throttles = Backoff::new(config.backoff_first, config.backoff_max);
        loop {
            let call = self.request_iterator(start);
            let failure = match tokio::time::timeout(config.get_shard_iterator_timeout, call).await
            {
                Ok(Ok(iterator)) => return Ok(iterator),
                Ok(Err(failure)) => failure,
                Err(_) => IteratorFailure::Retry(
                    self.timed_out("GetShardIterator", config.get_shard_iterator_timeout)
                        .into(),
                ),
            };
            let (error, pause) = match failure {
                IteratorFailure::Fatal(error) => return Err(error),
                IteratorFailure::Throttled(error) => (error, throttles.next_pause()),
                IteratorFailure::Retry(error) => {
                    if backoff.failures() >= MAX_CONSECUTIVE_FAILURES {
                        return Err(ReadError::Service {
                            operation: "GetShardIterator",
                            target: self.target(),
                            tries: backoff.failures() + 1,
                            source: error,
                        });
                    }
                    (error, backoff.next_pause())
                }
            };
            tracing::warn!(stream = %self.stream, shard = %self.shard_id, ?pause,
                error = %one_line(&*error), "GetShardIterator failed; retrying");
            tokio::time::sleep(pause).await;
        }
    }

    async fn request_iterator(&self, start: &StartAt) -> Result<String, IteratorFailure> {
        let mut request = self
            .client
            .get_shard_iterator()
            .stream_name(&self.stream)
            .shard_id(&self.shard_id);
        request = match start {
            StartAt::AfterSequence(seq) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .starting_sequence_number(seq),
            StartAt::AtSequence(seq) => request
                .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
                .starting_sequence_number(seq),
            StartAt::Horizon => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            StartAt::Latest => request.shard_iterator_type(ShardIteratorType::Latest),
            StartAt::AtTimestamp(ms) => request
                .shard_iterator_type(ShardIteratorType::AtTimestamp)
                .timestamp(DateTime::from_millis(*ms as i64)),
        };
        // This reader does its own backoff: one call is one try, bounded by its timeout.
        let sent = request
            .customize()
            .config_override(
                aws_sdk_kinesis::Config::builder().retry_config(RetryConfig::disabled()),
            )
            .send()
            .await;
        let error = match sent {
            Ok(out) => {
                return out.shard_iterator.ok_or_else(|| {
                    IteratorFailure::Fatal(ReadError::Incomplete {
                        operation: "GetShardIterator",
                        target: self.target(),
                        missing: "no iterator",
                    })
                });
            }
            Err(error) => error,
        };
        let service = error.as_service_error();
        if service.is_some_and(|e| e.is_resource_not_found_exception()) {
            return Err(IteratorFailure::Fatal(ReadError::stream_gone(
                &self.client,
                &self.stream,
            )));
        }
        if service.is_some_and(|e| e.is_invalid_argument_exception()) {
            return Err(IteratorFailure::Fatal(ReadError::Refused {
                operation: "GetShardIterator",
                target: format!("{} at {start:?}", self.target()),
                source: error.into(),
            }));
        }
        if service.is_some_and(|e| e.is_provisioned_throughput_exceeded_exception()) {
            return Err(IteratorFailure::Throttled(error.into()));
        }
        match ReadError::denied("GetShardIterator", || self.target(), error) {
            Ok(denied) => Err(IteratorFailure::Fatal(denied)),
            Err(error) => Err(IteratorFailure::Retry(error.into())),
        }
    }
}
