//! Tokens scoped to a tenant: `ruststream token create --tenant acme` mints one, and a request
//! carrying it reaches that tenant's apps only (the routes under `/v1/tenants/acme/`, and its
//! own part of status, the audit trail and redrives); anything else is refused with a 403
//! naming the tenant it belongs to. The operator's admin token reaches all.
//!
//! A token reads `rst_<id>_<secret>`: the id (12 hex digits) names it in lists and in the audit
//! trail, the secret (32 random bytes, hex) is shown once, when it is made. The store keeps
//! the SHA-256 of the whole token, never the token. Every request looks its token up in the
//! store, so a revoked token is refused from the next request on, on every host reading the
//! same store: the fleet's desired-state table in DynamoDB when deploys are the fleet's
//! ([`dynamo`]), else `tokens.json` in the host's state directory ([`file`](mod@file)).

pub mod dynamo;
pub mod file;

pub use file::FileTokens;

use std::fmt::Write as _;

use ruststream_runtime::component::compile::content_hash;
use ruststream_runtime::publish::BoxFuture;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq as _;

/// How a tenant token starts.
const PREFIX: &str = "rst_";
/// Random bytes in a token's id and secret.
const ID_BYTES: usize = 6;
const SECRET_BYTES: usize = 32;

/// A tenant token as the store keeps it: everything but the token itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// Its id: 12 hex digits.
    pub id: String,
    /// The tenant it reaches.
    pub tenant: String,
    /// What its maker called it (`ci`, a person's name), if anything.
    #[serde(default)]
    pub name: String,
    /// The hex SHA-256 of the whole token.
    pub hash: String,
    /// When it was made (ms since the epoch).
    pub created_ms: u64,
    /// Which token made it, by id.
    pub created_by: String,
}

/// A token just made: its record, and the token itself, which is not kept anywhere.
#[derive(Debug, Clone)]
pub struct MintedToken {
    /// What the store keeps.
    pub record: TokenRecord,
    /// The token to hand to its holder.
    pub token: String,
}

/// A token store failed.
#[derive(Debug, thiserror::Error)]
#[error("the token store ({store}) failed to {action}: {reason}")]
pub struct TokenStoreError {
    /// Which store.
    pub store: String,
    /// What it was asked.
    pub action: &'static str,
    /// Why it failed.
    pub reason: String,
}

/// Where tenant tokens are kept. A real seam: one host's state directory, or the fleet's
/// desired-state table.
pub trait TokenStore: Send + Sync + std::fmt::Debug + 'static {
    /// What it is, for errors and `token list`.
    fn describe(&self) -> String;
    /// The record of token `id`, if it exists (revoked ones do not).
    fn get<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TokenRecord>, TokenStoreError>>;
    /// Every record, in id order.
    fn list(&self) -> BoxFuture<'_, Result<Vec<TokenRecord>, TokenStoreError>>;
    /// Keeps `record` (a new id).
    fn put<'a>(&'a self, record: &'a TokenRecord) -> BoxFuture<'a, Result<(), TokenStoreError>>;
    /// Drops token `id`; whether it existed.
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, TokenStoreError>>;
}

/// Makes a token for `tenant`, by `created_by`, called `name`.
///
/// # Errors
/// The OS gave no random bytes.
pub fn mint(
    tenant: &str,
    name: &str,
    created_by: &str,
    now_ms: u64,
) -> Result<MintedToken, String> {
    let hex = |count: usize| -> Result<String, String> {
        let mut bytes = vec![0_u8; count];
        getrandom::fill(&mut bytes).map_err(|e| format!("the OS gave no random bytes ({e})"))?;
        Ok(bytes.iter().fold(String::new(), |mut hex, byte| {
            // Writing to a String cannot fail.
            let _ = write!(hex, "{byte:02x}");
            hex
        }))
    };
    let id = hex(ID_BYTES)?;
    let token = format!("{PREFIX}{id}_{}", hex(SECRET_BYTES)?);
    let record = TokenRecord {
        hash: content_hash(token.as_bytes()),
        id,
        tenant: tenant.to_owned(),
        name: name.to_owned(),
        created_ms: now_ms,
        created_by: created_by.to_owned(),
    };
    Ok(MintedToken { record, token })
}

/// The id a presented token claims, if it has a tenant token's shape.
pub fn claimed_id(presented: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(presented).ok()?;
    let (id, secret) = text.strip_prefix(PREFIX)?.split_once('_')?;
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(id, ID_BYTES * 2) && hex(secret, SECRET_BYTES * 2)).then_some(id)
}

/// Whether `presented` is the token `record` keeps the hash of (compared in constant time).
pub fn matches(record: &TokenRecord, presented: &[u8]) -> bool {
    let hash = content_hash(presented);
    hash.as_bytes().ct_eq(record.hash.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_token_matches_its_record_only_and_claims_its_id() -> Result<(), String> {
        let minted = mint("acme", "ci", "operator", 7)?;
        let token = minted.token.as_bytes();
        assert_eq!(claimed_id(token), Some(minted.record.id.as_str()));
        assert!(matches(&minted.record, token));
        assert!(
            !minted.token.contains(&minted.record.hash),
            "the hash is not the secret"
        );
        let other = mint("acme", "ci", "operator", 7)?;
        assert_ne!(other.record.id, minted.record.id);
        assert!(!matches(&minted.record, other.token.as_bytes()));
        for not_one in ["operator-token-of-64-hex", "rst_abc_def", "rst_", ""] {
            assert_eq!(claimed_id(not_one.as_bytes()), None, "{not_one}");
        }
        Ok(())
    }
}
