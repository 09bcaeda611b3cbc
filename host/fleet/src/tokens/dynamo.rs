//! Tenant tokens in the fleet's desired-state table: one item `#token/<id>` each, whose
//! `token` attribute is the record as JSON. Every host of the fleet reads the same items, so a
//! token made through one host works on all, and a revoked one is refused by all from their
//! next request (each request reads its token's item, consistently).

use ruststream_common::escape::one_line;
use ruststream_runtime::publish::BoxFuture;

use super::{TokenRecord, TokenStore, TokenStoreError};
use crate::desired::DesiredTable;

/// The start of a token item's key.
const PREFIX: &str = "#token/";
/// The attribute holding the record.
const ATTRIBUTE: &str = "token";

/// The tokens of the fleet whose desired state `table` keeps.
#[derive(Debug, Clone)]
pub struct DynamoTokens {
    table: DesiredTable,
}

impl DynamoTokens {
    /// The tokens kept in `table`.
    pub fn new(table: DesiredTable) -> Self {
        Self { table }
    }

    fn failed(&self, action: &'static str) -> impl Fn(String) -> TokenStoreError + '_ {
        move |reason| TokenStoreError {
            store: self.describe(),
            action,
            reason,
        }
    }
}

fn parse(json: &str) -> Result<TokenRecord, String> {
    serde_json::from_str(json).map_err(|e| format!("a token item is not a token record: {e}"))
}

impl TokenStore for DynamoTokens {
    fn describe(&self) -> String {
        format!("DynamoDB table {}", self.table.table())
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TokenRecord>, TokenStoreError>> {
        Box::pin(async move {
            let fail = self.failed("read a token");
            let key = format!("{PREFIX}{id}");
            let json =
                (self.table.get_json(&key, ATTRIBUTE).await).map_err(|e| fail(one_line(&e)))?;
            json.as_deref().map(parse).transpose().map_err(fail)
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<TokenRecord>, TokenStoreError>> {
        Box::pin(async move {
            let fail = self.failed("list the tokens");
            let items =
                (self.table.scan_json(PREFIX, ATTRIBUTE).await).map_err(|e| fail(one_line(&e)))?;
            let mut records = (items.iter().map(|json| parse(json)))
                .collect::<Result<Vec<_>, _>>()
                .map_err(fail)?;
            records.sort_by(|a, b| a.id.cmp(&b.id));
            Ok(records)
        })
    }

    fn put<'a>(&'a self, record: &'a TokenRecord) -> BoxFuture<'a, Result<(), TokenStoreError>> {
        Box::pin(async move {
            let fail = self.failed("keep a token");
            let key = format!("{PREFIX}{}", record.id);
            let put = self.table.put_new_json(&key, ATTRIBUTE, record).await;
            match put.map_err(|e| fail(one_line(&e)))? {
                true => Ok(()),
                false => Err(fail(format!(
                    "a token with id {} exists already",
                    record.id
                ))),
            }
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, TokenStoreError>> {
        Box::pin(async move {
            let key = format!("{PREFIX}{id}");
            (self.table.delete_item(&key).await)
                .map_err(|e| self.failed("revoke a token")(one_line(&e)))
        })
    }
}
