//! Where the AWS clients are configured: region and endpoints, resolved once for every service.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::SharedCredentialsProvider;

/// The region and the service endpoints AWS calls go to; `None` means the environment's
/// region and AWS's own endpoints.
#[derive(Debug, Clone, Default)]
pub struct AwsOptions {
    /// AWS region (default: from the environment).
    pub region: Option<String>,
    /// Kinesis endpoint, e.g. a local server (default: AWS).
    pub kinesis_endpoint: Option<String>,
    /// DynamoDB endpoint (default: AWS).
    pub dynamodb_endpoint: Option<String>,
    /// STS endpoint, where tenants' `role_arn`s are assumed (default: AWS).
    pub sts_endpoint: Option<String>,
    /// S3 endpoint, where a fleet's component bytes are kept (default: AWS); path-style
    /// addressing when given, as local servers need.
    pub s3_endpoint: Option<String>,
    /// The host's own credentials, for an embedder that has them in hand (default: the
    /// environment's chain: variables, profile, SSO, instance role). Tenants' `role_arn`s are
    /// assumed with them.
    pub credentials: Option<SharedCredentialsProvider>,
}

impl AwsOptions {
    async fn base(&self) -> aws_config::ConfigLoader {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(region) = &self.region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let Some(credentials) = &self.credentials {
            loader = loader.credentials_provider(credentials.clone());
        }
        loader
    }

    /// Region and credentials, resolved once for every service: one credentials chain (one
    /// `credential_process` run, one SSO token read) serves all the clients made from it.
    pub async fn shared_config(&self) -> SdkConfig {
        self.base().await.load().await
    }

    /// `shared` calling Kinesis at `--kinesis-endpoint`, else at AWS.
    pub fn kinesis(&self, shared: &SdkConfig) -> SdkConfig {
        at(shared, self.kinesis_endpoint.as_deref())
    }

    /// `shared` calling DynamoDB at `--dynamodb-endpoint`, else at AWS.
    pub fn dynamodb(&self, shared: &SdkConfig) -> SdkConfig {
        at(shared, self.dynamodb_endpoint.as_deref())
    }

    /// `shared` calling STS at `--sts-endpoint`, else at AWS.
    pub(crate) fn sts(&self, shared: &SdkConfig) -> SdkConfig {
        at(shared, self.sts_endpoint.as_deref())
    }

    /// An S3 client at `--s3-endpoint` (path-style), else at AWS.
    pub(crate) fn s3(&self, shared: &SdkConfig) -> aws_sdk_s3::Client {
        let config = aws_sdk_s3::config::Builder::from(&at(shared, self.s3_endpoint.as_deref()))
            .force_path_style(self.s3_endpoint.is_some())
            .build();
        aws_sdk_s3::Client::from_conf(config)
    }

    /// The Kinesis configuration alone (`put`, `tail`).
    pub async fn kinesis_config(&self) -> SdkConfig {
        self.kinesis(&self.shared_config().await)
    }
}

fn at(shared: &SdkConfig, endpoint: Option<&str>) -> SdkConfig {
    match endpoint {
        Some(endpoint) => shared.to_builder().endpoint_url(endpoint).build(),
        None => shared.clone(),
    }
}
