//! A DynamoDB table keyed by one string attribute, on demand: made when missing and waited for
//! until active. The lease store's table and the fleet's desired-state table are such tables;
//! several hosts starting together may each try to make one, and all of them succeed.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
};

/// How often a table being made is asked whether it is active, and how many times.
const ACTIVE_POLL: Duration = Duration::from_millis(500);
const ACTIVE_POLLS: u32 = 120;

/// What went wrong with a table; each store turns it into its own error, naming itself.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// A call about the table failed; the cause is the SDK's error, kept whole.
    #[error("{operation} of table `{table}` failed")]
    Call {
        /// The table.
        table: String,
        /// The DynamoDB operation (`DescribeTable`, `CreateTable`).
        operation: &'static str,
        /// The SDK's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The table was made but did not become active within a minute.
    #[error("table `{table}` did not become active within a minute")]
    NotActive {
        /// The table.
        table: String,
    },
}

/// The table's status; `None` when there is no such table.
///
/// # Errors
/// [`TableError::Call`] when `DescribeTable` is refused or fails.
pub async fn status(client: &Client, table: &str) -> Result<Option<TableStatus>, TableError> {
    let described = client.describe_table().table_name(table).send().await;
    match described {
        Ok(out) => Ok(out.table.and_then(|t| t.table_status)),
        Err(error)
            if error
                .as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            Ok(None)
        }
        Err(error) => Err(call_failed(table, "DescribeTable", error)),
    }
}

/// Makes `table` (hash key `key`, a string; on-demand capacity) unless it exists, and waits
/// until it is active. Another host making it meanwhile is as good.
///
/// # Errors
/// [`TableError::Call`] when DynamoDB refuses, [`TableError::NotActive`] when the table is
/// not active within a minute.
pub async fn create_if_missing(client: &Client, table: &str, key: &str) -> Result<(), TableError> {
    if status(client, table).await?.is_none() {
        let attribute = AttributeDefinition::builder()
            .attribute_name(key)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(|e| call_failed(table, "CreateTable", e))?;
        let schema = KeySchemaElement::builder()
            .attribute_name(key)
            .key_type(KeyType::Hash)
            .build()
            .map_err(|e| call_failed(table, "CreateTable", e))?;
        let created = (client.create_table())
            .table_name(table)
            .attribute_definitions(attribute)
            .key_schema(schema)
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await;
        if let Err(error) = created
            && !error
                .as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception())
        {
            return Err(call_failed(table, "CreateTable", error));
        }
    }
    for _ in 0..ACTIVE_POLLS {
        if status(client, table).await? == Some(TableStatus::Active) {
            return Ok(());
        }
        tokio::time::sleep(ACTIVE_POLL).await;
    }
    Err(TableError::NotActive {
        table: table.to_owned(),
    })
}

fn call_failed(
    table: &str,
    operation: &'static str,
    error: impl std::error::Error + Send + Sync + 'static,
) -> TableError {
    TableError::Call {
        table: table.to_owned(),
        operation,
        source: Box::new(error),
    }
}
