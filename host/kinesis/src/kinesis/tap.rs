//! The seam where a GetRecords answer's records are taken before the SDK deserializes them.
//!
//! A [`RecordsTap`] is an interceptor of one GetRecords call. It wraps a successful answer's
//! body; when the SDK reads that body, the wrapper reads it whole, takes the records as
//! deliveries ([`answer`](super::answer)) and gives the SDK the answer without them, so the
//! SDK's output still carries the next iterator, the lag and the child shards. An answer the
//! tap cannot read goes to the SDK untouched, and the caller uses the SDK's records: the tap
//! can make a read cheaper, never fail one. Error answers are never touched, so the SDK's error
//! classification (throttling, expired iterators) sees exactly what the server sent.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeDeserializationInterceptorContextMut;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;
use bytes::Bytes;
use http_body::{Body, Frame};
use ruststream_common::sync::lock;
use ruststream_runtime::Delivery;

use super::answer;

/// The interceptor of one GetRecords call, and what it took. Add a clone to the call
/// (`customize().interceptor(..)`); after the call, [`take`](Self::take) the records.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecordsTap {
    taken: Arc<Mutex<Option<Vec<Delivery>>>>,
}

impl RecordsTap {
    /// The records of the answer, when the tap read it; `None` when the SDK did (then its
    /// output has them).
    pub(crate) fn take(&self) -> Option<Vec<Delivery>> {
        lock(&self.taken).take()
    }
}

impl Intercept for RecordsTap {
    fn name(&self) -> &'static str {
        "RecordsTap"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let response = context.response_mut();
        if response.status().is_success() {
            let inner = std::mem::replace(response.body_mut(), SdkBody::taken());
            *response.body_mut() = SdkBody::from_body_1_x(TapBody {
                inner,
                read: Vec::new(),
                taken: self.taken.clone(),
                done: false,
            });
        }
        Ok(())
    }
}

/// An answer's body as the SDK reads it: the whole answer is read first, then handed on
/// without its records (or as it was, when it could not be read).
struct TapBody {
    inner: SdkBody,
    read: Vec<u8>,
    taken: Arc<Mutex<Option<Vec<Delivery>>>>,
    done: bool,
}

impl Body for TapBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        while let Some(frame) = ready!(Pin::new(&mut self.inner).poll_frame(cx)) {
            if let Ok(data) = frame?.into_data() {
                self.read.extend_from_slice(&data);
            }
        }
        self.done = true;
        let read = Bytes::from(std::mem::take(&mut self.read));
        let body = match answer::read(&read) {
            Ok(answer) => {
                *lock(&self.taken) = Some(answer.deliveries);
                Bytes::from(answer.rest)
            }
            Err(error) => {
                tracing::debug!(%error, "GetRecords answer left to the SDK");
                read
            }
        };
        Poll::Ready(Some(Ok(Frame::data(body))))
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_kinesis::Client;
    use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
    use aws_sdk_kinesis::error::SdkError;
    use aws_sdk_kinesis::operation::get_records::{GetRecordsError, GetRecordsOutput};
    use aws_smithy_runtime_api::client::http::{
        HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
        SharedHttpConnector,
    };
    use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
    use aws_smithy_runtime_api::http::StatusCode;

    use super::*;
    use crate::kinesis::answer::delivery;

    /// Answers every request with one status and body, as a server would.
    #[derive(Debug, Clone)]
    struct Answering(u16, &'static str);

    impl HttpClient for Answering {
        fn http_connector(
            &self,
            _: &HttpConnectorSettings,
            _: &RuntimeComponents,
        ) -> SharedHttpConnector {
            SharedHttpConnector::new(self.clone())
        }
    }

    impl HttpConnector for Answering {
        fn call(&self, _: HttpRequest) -> HttpConnectorFuture {
            let status = StatusCode::try_from(self.0).expect("a status");
            let mut response = HttpResponse::new(status, SdkBody::from(self.1));
            response
                .headers_mut()
                .insert("content-type", "application/x-amz-json-1.1");
            if self.0 != 200 {
                response
                    .headers_mut()
                    .insert("x-amzn-errortype", "ExpiredIteratorException");
            }
            HttpConnectorFuture::ready(Ok(response))
        }
    }

    fn client(status: u16, body: &'static str) -> Client {
        let config = aws_sdk_kinesis::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("id", "secret", None, None, "test"))
            .endpoint_url("http://127.0.0.1:4567")
            .http_client(SharedHttpClient::new(Answering(status, body)))
            .build();
        Client::from_conf(config)
    }

    /// One GetRecords through a fresh tap: the SDK's result, and the tap.
    async fn through_tap(
        client: &Client,
    ) -> (
        Result<GetRecordsOutput, SdkError<GetRecordsError, HttpResponse>>,
        RecordsTap,
    ) {
        let tap = RecordsTap::default();
        let result = client
            .get_records()
            .shard_iterator("it")
            .customize()
            .interceptor(tap.clone())
            .send()
            .await;
        (result, tap)
    }

    /// The answer read by the SDK alone, then through a tap: the output and the tap's records.
    async fn both(
        status: u16,
        body: &'static str,
    ) -> (GetRecordsOutput, GetRecordsOutput, RecordsTap) {
        let client = client(status, body);
        let plain = client.get_records().shard_iterator("it").send().await;
        let (tapped, tap) = through_tap(&client).await;
        (
            plain.expect("the SDK reads it"),
            tapped.expect("read through the tap"),
            tap,
        )
    }

    const ANSWER: &str = r#"{"Records":[
        {"SequenceNumber":"49590338271490256608559692538361571095921575989136588898",
         "ApproximateArrivalTimestamp":1.767225600123E9,"Data":"eyJpZCI6MX0=",
         "PartitionKey":"k\"ey\u00e9","EncryptionType":"NONE"},
        {"SequenceNumber":"49590338271490256608559692538361571095921575989136588899",
         "ApproximateArrivalTimestamp":1767225601,"Data":"UlNLMgAAAA17fQ==","PartitionKey":"k"}],
        "NextShardIterator":"AAAA/+==","MillisBehindLatest":42,
        "ChildShards":[{"ShardId":"shardId-000000000002","ParentShards":["shardId-000000000000"],
          "HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"99"}}]}"#;

    #[tokio::test]
    async fn the_tap_reads_what_the_sdk_reads() {
        let (mut plain, tapped, tap) = both(200, ANSWER).await;
        let taken = tap.take().expect("the tap read the answer");
        let expected: Vec<Delivery> = std::mem::take(&mut plain.records)
            .into_iter()
            .map(delivery)
            .collect();
        assert_eq!(taken.len(), 2);
        assert_eq!(taken, expected);
        assert!(tapped.records.is_empty());
        assert_eq!(tapped, plain, "the rest of the output is the SDK's");
    }

    #[tokio::test]
    async fn an_answer_the_tap_cannot_read_is_the_sdks() {
        // `Records: null`: the SDK reads no records; the tap leaves it alone.
        let body = r#"{"Records":null,"NextShardIterator":"next","MillisBehindLatest":0}"#;
        let (plain, tapped, tap) = both(200, body).await;
        assert!(tap.take().is_none());
        assert_eq!(tapped, plain);
        assert_eq!(tapped.next_shard_iterator(), Some("next"));
    }

    #[tokio::test]
    async fn error_answers_are_untouched() {
        let client = client(
            400,
            r#"{"__type":"ExpiredIteratorException","message":"old"}"#,
        );
        let (result, tap) = through_tap(&client).await;
        let error = result.expect_err("an error answer");
        assert!(
            error
                .as_service_error()
                .is_some_and(|e| e.is_expired_iterator_exception())
        );
        assert!(tap.take().is_none());
    }
}
