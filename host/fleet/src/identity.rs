//! Whose rights a tenant's AWS calls run with.
//!
//! The host's own credentials come from aws-config's default chain: environment, shared
//! config and credentials files (profiles, `credential_process`, IAM Identity Center / SSO),
//! web identity, container and instance metadata. A tenant that names a `role_arn` gets its
//! own Kinesis and DynamoDB clients whose credentials come from STS `AssumeRole` with the
//! host's credentials, session name `ruststream-<tenant>`: its reads, checkpoints, lease
//! rows, counted copies and publishes all run with the role's rights, and CloudTrail names the
//! tenant. The clients refresh the role's credentials before they expire.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use aws_config::SdkConfig;
use aws_config::sts::AssumeRoleProvider;
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider, future};
use ruststream_common::escape::one_line;

use crate::aws::AwsOptions;

/// The role a tenant's calls assume.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Role {
    /// `arn:aws:iam::ACCOUNT:role/NAME`.
    pub arn: String,
    /// The external id the role's trust policy asks for, if any.
    pub external_id: Option<String>,
}

/// The clients one identity calls AWS with.
#[derive(Clone)]
pub struct Clients {
    /// Kinesis: reads, publishes, shard listings.
    pub kinesis: aws_sdk_kinesis::Client,
    /// DynamoDB: leases, checkpoints, redrive progress.
    pub dynamo: aws_sdk_dynamodb::Client,
}

/// The host's clients, and those of every tenant role assumed so far.
pub struct Identities {
    kinesis: SdkConfig,
    dynamo: SdkConfig,
    /// What STS is called with: the host's credentials, at the STS endpoint.
    sts: SdkConfig,
    base: Clients,
    /// The host's S3 client: the fleet's component bucket.
    s3: aws_sdk_s3::Client,
    /// By tenant and role: a tenant keeps its session across reloads while its role stays.
    assumed: Mutex<HashMap<(String, Role), Clients>>,
}

impl Identities {
    /// The host's identity as `aws` and the environment describe it.
    pub async fn new(aws: &AwsOptions) -> Self {
        let shared = aws.shared_config().await;
        let (kinesis, dynamo, sts) = (
            aws.kinesis(&shared),
            aws.dynamodb(&shared),
            aws.sts(&shared),
        );
        let base = Clients {
            kinesis: aws_sdk_kinesis::Client::new(&kinesis),
            dynamo: aws_sdk_dynamodb::Client::new(&dynamo),
        };
        Self {
            kinesis,
            dynamo,
            sts,
            base,
            s3: aws.s3(&shared),
            assumed: Mutex::default(),
        }
    }

    /// The host's own clients.
    pub fn base(&self) -> &Clients {
        &self.base
    }

    /// The host's own S3 client (the fleet's component bucket).
    pub fn s3(&self) -> &aws_sdk_s3::Client {
        &self.s3
    }

    /// The clients of `tenant`: the host's without a role, else the role's, assumed once and
    /// kept while the tenant keeps that role.
    ///
    /// # Errors
    /// The role cannot be assumed (not found, not trusted, STS unreachable), said in one line
    /// naming the role; nothing of the tenant should start then.
    pub async fn for_tenant(&self, tenant: &str, role: Option<&Role>) -> Result<Clients, String> {
        let Some(role) = role else {
            return Ok(self.base.clone());
        };
        let key = (tenant.to_owned(), role.clone());
        if let Some(clients) = self.lock().get(&key) {
            return Ok(clients.clone());
        }
        let credentials = self.assume(tenant, role).await?;
        let clients = Clients {
            kinesis: aws_sdk_kinesis::Client::from_conf(
                aws_sdk_kinesis::config::Builder::from(&self.kinesis)
                    .credentials_provider(credentials.clone())
                    .build(),
            ),
            dynamo: aws_sdk_dynamodb::Client::from_conf(
                aws_sdk_dynamodb::config::Builder::from(&self.dynamo)
                    .credentials_provider(credentials)
                    .build(),
            ),
        };
        let mut assumed = self.lock();
        // A tenant's older role is of no more use once it has another.
        assumed.retain(|(name, _), _| name != tenant);
        Ok(assumed.entry(key).or_insert(clients).clone())
    }

    /// A credentials provider for `role`, tried once so a role that cannot be assumed is
    /// refused at load rather than on every read.
    async fn assume(&self, tenant: &str, role: &Role) -> Result<SharedCredentialsProvider, String> {
        let mut builder = AssumeRoleProvider::builder(&role.arn)
            .session_name(format!("ruststream-{tenant}"))
            .configure(&self.sts);
        if let Some(id) = &role.external_id {
            builder = builder.external_id(id);
        }
        let provider = SharedCredentialsProvider::new(Session::new(builder.build().await));
        provider
            .provide_credentials()
            .await
            .map_err(|error| format!("cannot assume role `{}`: {}", role.arn, one_line(&error)))?;
        Ok(provider)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, Role), Clients>> {
        ruststream_common::sync::lock(&self.assumed)
    }
}

/// A role session shared by all of a tenant's clients: each client caches credentials on its
/// own, and without this each would assume the role for itself.
#[derive(Debug)]
struct Session {
    role: AssumeRoleProvider,
    current: tokio::sync::Mutex<Option<Credentials>>,
}

/// How long before their expiry a session's credentials are renewed.
const RENEW_BEFORE: Duration = Duration::from_secs(5 * 60);

impl Session {
    fn new(role: AssumeRoleProvider) -> Self {
        Self {
            role,
            current: tokio::sync::Mutex::new(None),
        }
    }

    /// The current credentials, or new ones once those are within [`RENEW_BEFORE`] of expiry.
    async fn credentials(&self) -> aws_credential_types::provider::Result {
        let mut current = self.current.lock().await;
        let fresh = |c: &&Credentials| {
            c.expiry()
                .is_none_or(|expiry| expiry > SystemTime::now() + RENEW_BEFORE)
        };
        if let Some(credentials) = current.as_ref().filter(fresh) {
            return Ok(credentials.clone());
        }
        let credentials = self.role.provide_credentials().await?;
        *current = Some(credentials.clone());
        Ok(credentials)
    }
}

impl ProvideCredentials for Session {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.credentials())
    }
}
