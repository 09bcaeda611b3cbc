//! Client configuration for the local servers: loopback endpoints only, static test
//! credentials, nothing taken from the developer's environment that could change a test.

use anyhow::{Context, Result};
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_kinesis::config::Credentials;

/// Client configuration for a local server at `endpoint`: region `us-east-1`, static test
/// credentials, [`BehaviorVersion::latest`] and the standard retry policy.
///
/// # Panics
///
/// If `endpoint` is not `http://127.0.0.1:<port>`: tests must never reach a real AWS account.
pub async fn sdk_config(endpoint: &str) -> SdkConfig {
    if let Err(error) = loopback_port(endpoint) {
        panic!("refusing a non-loopback endpoint: {error:#}");
    }
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "AKIDRUSTSTREAMTEST",
            "ruststream-test-secret",
            None,
            None,
            "ruststream-tests",
        ))
        // Pinned so AWS_MAX_ATTEMPTS or a profile on the developer's machine can't change tests.
        .retry_config(aws_config::retry::RetryConfig::standard())
        .endpoint_url(endpoint)
        .load()
        .await
}

/// The port of `endpoint` if it is `http://127.0.0.1:<port>` (a trailing `/` allowed).
fn loopback_port(endpoint: &str) -> Result<u16> {
    let port = endpoint
        .strip_prefix("http://127.0.0.1:")
        .map(|rest| rest.trim_end_matches('/'))
        .with_context(|| format!("`{endpoint}` is not an http://127.0.0.1:<port> endpoint"))?;
    port.parse()
        .with_context(|| format!("bad port in endpoint `{endpoint}`"))
}
