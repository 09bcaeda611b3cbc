//! The routes of tenant tokens, the operator's alone (the scope refuses tenant tokens):
//! `POST /v1/tokens` makes one, `GET /v1/tokens` lists them, `DELETE /v1/tokens/{id}` revokes
//! one.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use ruststream_common::escape::{one_line, quote};

use super::caller::Caller;
use super::control::Control;
use super::error::ApiError;
use super::extract::{JsonBody, Names};
use super::model::{TokenInfo, TokenList, TokenMade, TokenRequest, TokenRevoked};
use crate::tokens::{self, TokenStore, TokenStoreError};

/// What the token routes work with: the host's tenants, and where tokens are kept.
pub(super) struct TokenApi<C> {
    control: Arc<C>,
    store: Option<Arc<dyn TokenStore>>,
}

impl<C> TokenApi<C> {
    /// Tokens of `control`'s tenants, kept in `store` (none: the host takes no tenant tokens).
    pub(super) fn new(control: Arc<C>, store: Option<Arc<dyn TokenStore>>) -> Self {
        Self { control, store }
    }

    fn store(&self) -> Result<&Arc<dyn TokenStore>, ApiError> {
        self.store.as_ref().ok_or_else(|| {
            let message = "this host takes no tenant tokens".to_owned();
            ApiError::new(StatusCode::NOT_FOUND, message)
        })
    }
}

impl<C> Clone for TokenApi<C> {
    fn clone(&self) -> Self {
        Self {
            control: self.control.clone(),
            store: self.store.clone(),
        }
    }
}

fn unavailable(error: &TokenStoreError) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, one_line(error))
}

/// `POST /v1/tokens`.
pub(super) async fn create<C: Control>(
    State(api): State<TokenApi<C>>,
    Extension(caller): Extension<Caller>,
    JsonBody(asked): JsonBody<TokenRequest>,
) -> Result<Json<TokenMade>, ApiError> {
    let store = api.store()?;
    let known = (api.control.status().tenants.iter()).any(|t| t.name == asked.tenant);
    if !known {
        let message = format!("no tenant `{}` on this host", quote(&asked.tenant));
        return Err(ApiError::new(StatusCode::NOT_FOUND, message));
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64);
    let minted = tokens::mint(&asked.tenant, &asked.name, &caller.token_id, now_ms)
        .map_err(|reason| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, reason))?;
    store
        .put(&minted.record)
        .await
        .map_err(|e| unavailable(&e))?;
    tracing::info!(id = %minted.record.id, tenant = %quote(&asked.tenant), "tenant token made");
    Ok(Json(TokenMade {
        id: minted.record.id,
        tenant: minted.record.tenant,
        name: minted.record.name,
        token: minted.token,
        store: store.describe(),
    }))
}

/// `GET /v1/tokens`.
pub(super) async fn list<C: Control>(
    State(api): State<TokenApi<C>>,
) -> Result<Json<TokenList>, ApiError> {
    let store = api.store()?;
    let records = store.list().await.map_err(|e| unavailable(&e))?;
    let tokens = records
        .into_iter()
        .map(|record| TokenInfo {
            id: record.id,
            tenant: record.tenant,
            name: record.name,
            created_ms: record.created_ms,
            created_by: record.created_by,
        })
        .collect();
    Ok(Json(TokenList {
        store: store.describe(),
        tokens,
    }))
}

/// `DELETE /v1/tokens/{id}`.
pub(super) async fn revoke<C: Control>(
    State(api): State<TokenApi<C>>,
    Names(id): Names<String>,
) -> Result<Json<TokenRevoked>, ApiError> {
    let store = api.store()?;
    if !store.delete(&id).await.map_err(|e| unavailable(&e))? {
        let message = format!("no token {}", quote(&id));
        return Err(ApiError::new(StatusCode::NOT_FOUND, message));
    }
    tracing::info!(id = %quote(&id), "tenant token revoked");
    Ok(Json(TokenRevoked { id }))
}
