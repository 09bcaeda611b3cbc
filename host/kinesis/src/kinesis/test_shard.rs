//! An in-process Kinesis shard behind the SDK's HTTP seam, for the paused-time unit tests of
//! shared reads: GetShardIterator and GetRecords over one shard whose records the test adds,
//! with every call counted, throttles and holds to program. The proof that reads work is the
//! end-to-end tests against kinesis-local; this is for what only a clock the test controls can
//! show.

use std::sync::{Arc, Mutex};

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use serde_json::{Value, json};
use tokio::sync::watch;

use ruststream_common::sync::lock;

/// One shard: its records, and what was asked of it.
#[derive(Debug, Clone)]
pub(crate) struct TestShard {
    state: Arc<Mutex<State>>,
    /// While `false`, GetRecords answers wait.
    open: watch::Sender<bool>,
}

#[derive(Debug, Default)]
struct State {
    records: Vec<Vec<u8>>,
    get_records: u32,
    get_shard_iterator: u32,
    throttles: u32,
}

impl TestShard {
    pub(crate) fn new() -> Self {
        Self {
            state: Arc::default(),
            open: watch::Sender::new(true),
        }
    }

    /// A client of this shard.
    pub(crate) fn client(&self) -> Client {
        let config = aws_sdk_kinesis::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("id", "secret", None, None, "test"))
            .endpoint_url("http://127.0.0.1:4567")
            .http_client(SharedHttpClient::new(self.clone()))
            .build();
        Client::from_conf(config)
    }

    /// Appends a record.
    pub(crate) fn put(&self, data: &str) {
        lock(&self.state).records.push(data.as_bytes().to_vec());
    }

    /// The sequence number of record `index` (from 0).
    pub(crate) fn sequence(index: usize) -> String {
        format!("{:056}", index + 1)
    }

    pub(crate) fn get_records(&self) -> u32 {
        lock(&self.state).get_records
    }

    pub(crate) fn get_shard_iterator(&self) -> u32 {
        lock(&self.state).get_shard_iterator
    }

    /// Throttles the next `times` GetRecords.
    pub(crate) fn throttle(&self, times: u32) {
        lock(&self.state).throttles += times;
    }

    /// Holds GetRecords answers (`false`) or lets them go (`true`).
    pub(crate) fn set_open(&self, open: bool) {
        self.open.send_replace(open);
    }

    fn answer(&self, operation: &str, body: &Value) -> (u16, Value) {
        let mut state = lock(&self.state);
        let index = |iterator: &str| {
            iterator
                .strip_prefix("i:")
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0)
        };
        match operation {
            "GetShardIterator" => {
                state.get_shard_iterator += 1;
                let after = |seq: &Value| seq.as_str().and_then(|s| s.parse::<usize>().ok());
                let at = match body["ShardIteratorType"].as_str() {
                    Some("LATEST") => state.records.len(),
                    Some("AFTER_SEQUENCE_NUMBER") => {
                        after(&body["StartingSequenceNumber"]).unwrap_or(0)
                    }
                    Some("AT_SEQUENCE_NUMBER") => {
                        after(&body["StartingSequenceNumber"]).map_or(0, |n| n.saturating_sub(1))
                    }
                    _ => 0,
                };
                (200, json!({ "ShardIterator": format!("i:{at}") }))
            }
            "GetRecords" => {
                if state.throttles > 0 {
                    state.throttles -= 1;
                    let error = json!({"__type": "ProvisionedThroughputExceededException",
                        "message": "Rate exceeded"});
                    return (400, error);
                }
                let from = index(body["ShardIterator"].as_str().unwrap_or_default());
                let limit = body["Limit"].as_u64().unwrap_or(10_000) as usize;
                let to = state.records.len().min(from + limit).max(from);
                let records: Vec<Value> = (from..to)
                    .map(|i| {
                        json!({
                            "SequenceNumber": Self::sequence(i),
                            "ApproximateArrivalTimestamp": 1_767_225_600,
                            "Data": base64_simd::STANDARD.encode_to_string(&state.records[i]),
                            "PartitionKey": "k",
                        })
                    })
                    .collect();
                let behind = if to == state.records.len() { 0 } else { 1000 };
                (
                    200,
                    json!({"Records": records, "NextShardIterator": format!("i:{to}"),
                        "MillisBehindLatest": behind}),
                )
            }
            other => (
                400,
                json!({"__type": "InvalidArgumentException", "message": other}),
            ),
        }
    }
}

impl HttpClient for TestShard {
    fn http_connector(
        &self,
        _: &HttpConnectorSettings,
        _: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

impl HttpConnector for TestShard {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let operation = request
            .headers()
            .get("x-amz-target")
            .and_then(|target| target.rsplit('.').next())
            .unwrap_or_default()
            .to_owned();
        let body: Value = request
            .body()
            .bytes()
            .and_then(|bytes| serde_json::from_slice(bytes).ok())
            .unwrap_or_default();
        let shard = self.clone();
        HttpConnectorFuture::new(async move {
            if operation == "GetRecords" {
                lock(&shard.state).get_records += 1;
                let mut open = shard.open.subscribe();
                let _ = open.wait_for(|open| *open).await;
            }
            let (status, body) = shard.answer(&operation, &body);
            let status = StatusCode::try_from(status).expect("a status");
            let mut response = HttpResponse::new(status, SdkBody::from(body.to_string()));
            let headers = response.headers_mut();
            headers.insert("content-type", "application/x-amz-json-1.1");
            if let Some(kind) = body["__type"].as_str() {
                headers.insert("x-amzn-errortype", kind.to_owned());
            }
            Ok(response)
        })
    }
}
