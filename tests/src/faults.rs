//! Faults injected at the AWS SDK's HTTP client seam, between a client and a local server.
//!
//! A [`Faults`] wraps the SDK's plain-HTTP client. Every request passes through it; the
//! operation is the part of its `X-Amz-Target` header after the last `.`
//! (`Kinesis_20131202.GetRecords` → `GetRecords`, `DynamoDB_20120810.UpdateItem` →
//! `UpdateItem`). A programmed operation is answered with an AWS error instead of reaching the
//! server, or is delayed (or held for good) before it does. No socket or HTTP parser of ours is
//! involved: the SDK sees exactly what a real server would have sent.
//!
//! ```no_run
//! # async fn demo(kinesis: &ruststream_tests::servers::LocalKinesis) {
//! use ruststream_tests::faults::{Fault, Faults};
//!
//! let faults = Faults::new();
//! let client = faults.kinesis_client(&kinesis.endpoint()).await;
//! faults.inject(&["GetRecords"], 1, Fault::expired_iterator());
//! # }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use ruststream_common::sync::lock;

/// What an injected operation gets instead of a plain pass to the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// An AWS error answer, as the AWS JSON protocols send one: the status, an
    /// `x-amzn-ErrorType` header and a body `{"__type": .., "message": ..}`, so the SDK
    /// reports the modelled error.
    Error {
        /// The HTTP status.
        status: u16,
        /// The error's type, as the service names it (`ProvisionedThroughputExceededException`).
        error_type: String,
        /// Its message.
        message: String,
    },
    /// The request reaches the server only after this long: a slow or hung server.
    Delay(Duration),
}

impl Fault {
    /// Any error answer.
    pub fn error(status: u16, error_type: &str, message: &str) -> Fault {
        Fault::Error {
            status,
            error_type: error_type.to_owned(),
            message: message.to_owned(),
        }
    }

    /// HTTP 400 `ProvisionedThroughputExceededException` "Rate exceeded", as Kinesis throttles.
    /// The SDK's standard retry policy classifies it as throttling and retries it.
    pub fn throughput_exceeded() -> Fault {
        Fault::error(
            400,
            "ProvisionedThroughputExceededException",
            "Rate exceeded",
        )
    }

    /// HTTP 400 `ExpiredIteratorException`, as GetRecords answers a shard iterator older than
    /// 5 minutes. Not retried by the SDK.
    pub fn expired_iterator() -> Fault {
        Fault::error(400, "ExpiredIteratorException", "Iterator expired")
    }

    /// HTTP 500 `InternalFailure`. The SDK's standard retry policy retries it as transient.
    pub fn internal_failure() -> Fault {
        Fault::error(500, "InternalFailure", "Injected internal failure")
    }

    /// A server that does not answer for an hour: a hung call.
    pub fn hang() -> Fault {
        Fault::Delay(Duration::from_secs(3600))
    }
}

/// An AWS JSON error answer (a status outside 100-999 is sent as 500).
fn error_response(status: u16, error_type: &str, message: &str) -> HttpResponse {
    let body = serde_json::json!({ "__type": error_type, "message": message }).to_string();
    let status = StatusCode::try_from(status)
        .or_else(|_| StatusCode::try_from(500))
        .expect("500 is a status code");
    let mut response = HttpResponse::new(status, SdkBody::from(body));
    let headers = response.headers_mut();
    headers.insert("content-type", "application/x-amz-json-1.1");
    headers.insert("x-amzn-errortype", error_type.to_owned());
    headers.insert("x-amzn-requestid", "ruststream-faults");
    response
}

/// Programmed faults and request counts, shared by every client made from it.
#[derive(Clone, Default)]
pub struct Faults {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    /// GetRecords answers with records still to be cut short.
    cuts: u32,
    /// Per operation: requests seen, and of those, how many got a fault.
    counts: HashMap<String, (u64, u64)>,
}

struct Rule {
    operations: Vec<String>,
    remaining: u32,
    fault: Fault,
}

impl fmt::Debug for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Faults")
            .field("pending", &self.pending_faults())
            .finish()
    }
}

impl Faults {
    /// An injector with no rules: every request goes through.
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives the next `times` requests of any of `operations` `fault`. Rules apply in the
    /// order they were added.
    pub fn inject(&self, operations: &[&str], times: u32, fault: Fault) {
        self.lock().rules.push(Rule {
            operations: operations.iter().map(|op| (*op).to_owned()).collect(),
            remaining: times,
            fault,
        });
    }

    /// Cuts the next `times` GetRecords answers that carry records to the first half of
    /// their body, as a connection lost mid-answer leaves them (status and headers as the
    /// server sent them). Answers without records pass untouched and count for nothing; each
    /// cut counts as an injected fault of `GetRecords`.
    pub fn cut_answers_with_records(&self, times: u32) {
        self.lock().cuts += times;
    }

    /// Faults programmed and not yet given, cuts included.
    pub fn pending_faults(&self) -> u32 {
        let state = self.lock();
        state.rules.iter().map(|r| r.remaining).sum::<u32>() + state.cuts
    }

    /// Drops every programmed fault.
    pub fn clear_faults(&self) {
        let mut state = self.lock();
        state.rules.clear();
        state.cuts = 0;
    }

    /// Requests of `operation` seen so far, faulted or not.
    pub fn requests(&self, operation: &str) -> u64 {
        self.lock().counts.get(operation).map_or(0, |c| c.0)
    }

    /// Requests of `operation` that got a fault.
    pub fn injected(&self, operation: &str) -> u64 {
        self.lock().counts.get(operation).map_or(0, |c| c.1)
    }

    /// The SDK HTTP client that applies these faults over plain HTTP.
    pub fn http_client(&self) -> SharedHttpClient {
        SharedHttpClient::new(FaultClient {
            inner: aws_smithy_http_client::Builder::new().build_http(),
            faults: self.clone(),
        })
    }

    /// A Kinesis client for the local server at `endpoint`, through these faults.
    pub async fn kinesis_client(&self, endpoint: &str) -> aws_sdk_kinesis::Client {
        let config = crate::servers::sdk_config(endpoint).await;
        let config = aws_sdk_kinesis::config::Builder::from(&config)
            .http_client(self.http_client())
            .build();
        aws_sdk_kinesis::Client::from_conf(config)
    }

    /// A DynamoDB client for the local server at `endpoint`, through these faults.
    pub async fn dynamo_client(&self, endpoint: &str) -> aws_sdk_dynamodb::Client {
        let config = crate::servers::sdk_config(endpoint).await;
        let config = aws_sdk_dynamodb::config::Builder::from(&config)
            .http_client(self.http_client())
            .build();
        aws_sdk_dynamodb::Client::from_conf(config)
    }

    /// Counts a request of `operation` and takes the fault it gets, if any.
    fn take(&self, operation: &str) -> Option<Fault> {
        let mut state = self.lock();
        let fault = state
            .rules
            .iter_mut()
            .find(|r| r.remaining > 0 && r.operations.iter().any(|op| op == operation))
            .map(|rule| {
                rule.remaining -= 1;
                rule.fault.clone()
            });
        state.rules.retain(|r| r.remaining > 0);
        let counts = state.counts.entry(operation.to_owned()).or_default();
        counts.0 += 1;
        counts.1 += u64::from(fault.is_some());
        fault
    }

    /// Takes one cut if any is left and `body` carries records; counts it.
    fn take_cut(&self, body: &[u8]) -> bool {
        let mut state = self.lock();
        let carries_records = body.windows(16).any(|w| w == b"\"SequenceNumber\"");
        if state.cuts == 0 || !carries_records {
            return false;
        }
        state.cuts -= 1;
        state.counts.entry("GetRecords".to_owned()).or_default().1 += 1;
        true
    }

    fn wants_cut(&self) -> bool {
        self.lock().cuts > 0
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

/// The server's answer to `request`, its body cut to half when `faults` has a cut left for an
/// answer with records.
async fn cut_short(
    inner: SharedHttpConnector,
    faults: Faults,
    request: HttpRequest,
) -> Result<HttpResponse, ConnectorError> {
    let mut response = inner.call(request).await?;
    let body = ByteStream::new(response.take_body())
        .collect()
        .await
        .map_err(|error| ConnectorError::io(error.into()))?
        .into_bytes();
    let kept = if faults.take_cut(&body) {
        body.slice(..body.len() / 2)
    } else {
        body
    };
    *response.body_mut() = SdkBody::from(kept);
    Ok(response)
}

#[derive(Debug)]
struct FaultClient {
    inner: SharedHttpClient,
    faults: Faults,
}

impl HttpClient for FaultClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(FaultConnector {
            inner: self.inner.http_connector(settings, components),
            faults: self.faults.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultConnector {
    inner: SharedHttpConnector,
    faults: Faults,
}

impl HttpConnector for FaultConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let operation = request
            .headers()
            .get("x-amz-target")
            .and_then(|target| target.rsplit('.').next())
            .unwrap_or("")
            .to_owned();
        match self.faults.take(&operation) {
            None if operation == "GetRecords" && self.faults.wants_cut() => {
                HttpConnectorFuture::new(cut_short(
                    self.inner.clone(),
                    self.faults.clone(),
                    request,
                ))
            }
            None => self.inner.call(request),
            Some(Fault::Error {
                status,
                error_type,
                message,
            }) => HttpConnectorFuture::ready(Ok(error_response(status, &error_type, &message))),
            Some(Fault::Delay(delay)) => {
                let inner = self.inner.clone();
                HttpConnectorFuture::new(async move {
                    tokio::time::sleep(delay).await;
                    inner.call(request).await
                })
            }
        }
    }
}
