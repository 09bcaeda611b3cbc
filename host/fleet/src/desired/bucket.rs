//! Component bytes in S3, content-addressed: an object is named by the SHA-256 of its bytes,
//! written once, and checked against that name whenever it is read.

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use ruststream_runtime::component::compile::content_hash;

use super::DesiredError;

/// Where a component's bytes live in the bucket.
fn object_key(hash: &str) -> String {
    format!("components/sha256/{hash}.wasm")
}

/// The fleet's component bytes, in one S3 bucket.
#[derive(Debug, Clone)]
pub struct ComponentBucket {
    client: Client,
    bucket: String,
}

impl ComponentBucket {
    /// The bucket `bucket`.
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }

    /// The bucket's name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Creates the bucket unless this account has it already.
    ///
    /// # Errors
    /// When S3 refuses (another account owns the name, say).
    pub async fn create_if_missing(&self) -> Result<(), DesiredError> {
        let created = self
            .client
            .create_bucket()
            .bucket(&self.bucket)
            .send()
            .await;
        match created {
            Ok(_) => Ok(()),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|e| e.is_bucket_already_owned_by_you()) =>
            {
                Ok(())
            }
            Err(error) => Err(self.backend("CreateBucket", "", error)),
        }
    }

    /// Stores `bytes` under their content hash, unless they are there already; returns the
    /// hash.
    ///
    /// # Errors
    /// When S3 fails.
    pub async fn put(&self, bytes: &[u8]) -> Result<String, DesiredError> {
        let hash = content_hash(bytes);
        let key = object_key(&hash);
        let head = (self.client.head_object())
            .bucket(&self.bucket)
            .key(&key)
            .send()
            .await;
        match head {
            Ok(head) if head.content_length() == Some(bytes.len() as i64) => return Ok(hash),
            Ok(_) => {}
            Err(error) if error.as_service_error().is_some_and(|e| e.is_not_found()) => {}
            Err(error) => return Err(self.backend("HeadObject", &key, error)),
        }
        (self.client.put_object())
            .bucket(&self.bucket)
            .key(&key)
            .content_type("application/wasm")
            .body(ByteStream::from(bytes.to_vec()))
            .send()
            .await
            .map_err(|e| self.backend("PutObject", &key, e))?;
        Ok(hash)
    }

    /// The bytes whose content hash is `hash`.
    ///
    /// # Errors
    /// [`DesiredError::Missing`] when the bucket has none; [`DesiredError::Altered`] when
    /// what it has does not hash to `hash` (never handed out); S3's failures.
    pub async fn get(&self, hash: &str) -> Result<Vec<u8>, DesiredError> {
        let key = object_key(hash);
        let got = (self.client.get_object())
            .bucket(&self.bucket)
            .key(&key)
            .send()
            .await;
        let object = match got {
            Ok(object) => object,
            Err(error) if error.as_service_error().is_some_and(|e| e.is_no_such_key()) => {
                return Err(DesiredError::Missing {
                    bucket: self.bucket.clone(),
                    hash: hash.to_owned(),
                });
            }
            Err(error) => return Err(self.backend("GetObject", &key, error)),
        };
        let bytes = (object.body.collect().await)
            .map_err(|e| self.backend("GetObject", &key, e))?
            .into_bytes()
            .to_vec();
        let found = content_hash(&bytes);
        if found != hash {
            return Err(DesiredError::Altered {
                bucket: self.bucket.clone(),
                hash: hash.to_owned(),
                found,
            });
        }
        Ok(bytes)
    }

    fn backend(
        &self,
        operation: &'static str,
        target: &str,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> DesiredError {
        DesiredError::Backend {
            store: format!("component bucket `{}`", self.bucket),
            operation,
            target: target.to_owned(),
            source: Box::new(error),
        }
    }
}
