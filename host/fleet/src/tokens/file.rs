//! Tenant tokens in one host's state directory.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ruststream_common::sync::lock;
use ruststream_runtime::publish::BoxFuture;

use super::{TokenRecord, TokenStore, TokenStoreError};
use crate::state::{read_json, write_atomic};

/// The file of [`FileTokens`] in the state directory.
pub const TOKENS_FILE: &str = "tokens.json";

/// Tenant tokens in one host's state directory: `tokens.json` (mode 0600), written whole and
/// atomically, read at every request (a revoked token is refused at the next).
#[derive(Debug)]
pub struct FileTokens {
    path: PathBuf,
    /// One change at a time: a read-modify-write is whole.
    changing: Mutex<()>,
}

impl FileTokens {
    /// The tokens of the state directory `dir`.
    pub fn new(dir: &Path) -> Self {
        Self {
            path: dir.join(TOKENS_FILE),
            changing: Mutex::new(()),
        }
    }

    fn failed(&self, action: &'static str) -> impl Fn(String) -> TokenStoreError + '_ {
        move |reason| TokenStoreError {
            store: self.describe(),
            action,
            reason,
        }
    }

    fn read(&self) -> Result<Vec<TokenRecord>, String> {
        match read_json::<Vec<TokenRecord>>(&self.path) {
            Ok(Some(records)) => Ok(records),
            Ok(None) => Ok(Vec::new()),
            Err(error) => Err(ruststream_common::escape::one_line(&error)),
        }
    }

    fn write(&self, records: &[TokenRecord]) -> Result<(), String> {
        let json = serde_json::to_vec_pretty(records).map_err(|e| e.to_string())?;
        write_atomic(&self.path, &json, 0o600).map_err(|e| e.to_string())
    }
}

impl TokenStore for FileTokens {
    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TokenRecord>, TokenStoreError>> {
        Box::pin(async move {
            let records = self.read().map_err(self.failed("read a token"))?;
            Ok(records.into_iter().find(|record| record.id == id))
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<TokenRecord>, TokenStoreError>> {
        Box::pin(async move {
            let mut records = self.read().map_err(self.failed("list the tokens"))?;
            records.sort_by(|a, b| a.id.cmp(&b.id));
            Ok(records)
        })
    }

    fn put<'a>(&'a self, record: &'a TokenRecord) -> BoxFuture<'a, Result<(), TokenStoreError>> {
        Box::pin(async move {
            let _one = lock(&self.changing);
            let mut records = self.read().map_err(self.failed("keep a token"))?;
            records.retain(|kept| kept.id != record.id);
            records.push(record.clone());
            self.write(&records).map_err(self.failed("keep a token"))
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, TokenStoreError>> {
        Box::pin(async move {
            let _one = lock(&self.changing);
            let mut records = self.read().map_err(self.failed("revoke a token"))?;
            let before = records.len();
            records.retain(|kept| kept.id != id);
            if records.len() == before {
                return Ok(false);
            }
            self.write(&records)
                .map_err(self.failed("revoke a token"))?;
            Ok(true)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tests::scratch;
    use crate::tokens::mint;

    #[tokio::test]
    async fn the_file_store_keeps_lists_and_revokes() -> Result<(), TokenStoreError> {
        let dir = scratch("tenant-tokens");
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let store = FileTokens::new(&dir);
        assert!(store.list().await?.is_empty());
        let minted = mint("acme", "ci", "operator", 7).expect("random bytes");
        store.put(&minted.record).await?;
        assert_eq!(
            store.get(&minted.record.id).await?,
            Some(minted.record.clone())
        );
        let text = std::fs::read_to_string(dir.join(TOKENS_FILE)).expect("written");
        assert!(
            !text.contains(&minted.token),
            "the token itself is never kept"
        );
        let mode = std::fs::metadata(dir.join(TOKENS_FILE))
            .expect("written")
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        assert!(store.delete(&minted.record.id).await?);
        assert!(!store.delete(&minted.record.id).await?, "gone already");
        assert_eq!(store.get(&minted.record.id).await?, None);
        Ok(())
    }
}
