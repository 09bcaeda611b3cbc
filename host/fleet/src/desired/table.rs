//! The desired-state table in DynamoDB: one item per (tenant, app), written only by
//! conditional puts on its revision.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use ruststream_kinesis::dynamo_table::{self, TableError};
use ruststream_runtime::{Clock as _, SystemClock};

use super::{AppDesired, AppId, DesiredError, HostReport, HostTally, count_call};

/// The item's key: `tenant/app`.
const KEY: &str = "app";
/// The revision, as a number, for the write's condition.
const REVISION: &str = "revision";
/// The state itself, as JSON: the table holds a few items, read whole.
const STATE: &str = "state";
/// A host's counts, as JSON (items keyed `#tally/...`).
const TALLY: &str = "tally";
/// What a host runs, as JSON (items keyed `#host/...`).
const REPORT: &str = "report";
/// The judge's lease: its item's key, its holder and when it ends (ms since the epoch).
const JUDGE_KEY: &str = "#judge";
const OWNER: &str = "owner";
const EXPIRES: &str = "expires_ms";

/// Everything the table holds, as one read found it.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Every app's desired state, in key order.
    pub apps: Vec<AppDesired>,
    /// Every host's counts, as each last wrote them.
    pub tallies: Vec<HostTally>,
    /// What every host runs, as each last reported it.
    pub reports: Vec<HostReport>,
    /// The judge's lease, when one was taken: its holder, and when it ends unrenewed (ms since
    /// the epoch).
    pub judge: Option<(String, u64)>,
}

/// The desired state of every app of a fleet, in one DynamoDB table.
#[derive(Debug, Clone)]
pub struct DesiredTable {
    client: Client,
    table: String,
}

impl DesiredTable {
    /// The table `table` (made by [`create_if_missing`](Self::create_if_missing)).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table (on-demand capacity) unless it exists, and waits until it is active.
    ///
    /// # Errors
    /// When DynamoDB refuses, or the table is not active within a minute.
    pub async fn create_if_missing(&self) -> Result<(), DesiredError> {
        match dynamo_table::create_if_missing(&self.client, &self.table, KEY).await {
            Ok(()) => Ok(()),
            Err(TableError::NotActive { table }) => Err(DesiredError::NotActive { table }),
            Err(TableError::Call {
                operation, source, ..
            }) => Err(DesiredError::Backend {
                store: self.describe(),
                operation,
                target: String::new(),
                source,
            }),
        }
    }

    /// What is recorded for `app`, read consistently; `None` when nothing is.
    ///
    /// # Errors
    /// When DynamoDB fails, or the item cannot be read ([`DesiredError::Unreadable`]).
    pub async fn get(&self, app: &AppId) -> Result<Option<AppDesired>, DesiredError> {
        let key = app.key();
        let item = self.item(&key).await?;
        item.map(|item| self.parse(&key, &item)).transpose()
    }

    /// Every app's desired state, read consistently, in key order.
    ///
    /// # Errors
    /// When DynamoDB fails, or an item cannot be read.
    pub async fn all(&self) -> Result<Vec<AppDesired>, DesiredError> {
        Ok(self.read().await?.apps)
    }

    /// Every app's desired state and every host's counts, read consistently in one scan.
    ///
    /// # Errors
    /// When DynamoDB fails, or an app's item cannot be read (a host's counts that cannot be
    /// read are left out: they are the host's to write again).
    pub async fn read(&self) -> Result<Snapshot, DesiredError> {
        let mut states = Vec::new();
        let mut tallies = Vec::new();
        let mut reports = Vec::new();
        let mut judge = None;
        let mut start = None;
        loop {
            count_call("Scan");
            let page = (self.client.scan())
                .table_name(&self.table)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.backend("Scan", "", e))?;
            for item in page.items() {
                let key = match item.get(KEY) {
                    Some(AttributeValue::S(key)) => key.clone(),
                    _ => String::new(),
                };
                if !key.starts_with('#') {
                    states.push(self.parse(&key, item)?);
                } else if let Some(AttributeValue::S(tally)) = item.get(TALLY)
                    && let Ok(tally) = serde_json::from_str::<HostTally>(tally)
                {
                    tallies.push(tally);
                } else if let Some(AttributeValue::S(report)) = item.get(REPORT)
                    && let Ok(report) = serde_json::from_str::<HostReport>(report)
                {
                    reports.push(report);
                } else if key == JUDGE_KEY
                    && let (Some(AttributeValue::S(owner)), Some(AttributeValue::N(expires))) =
                        (item.get(OWNER), item.get(EXPIRES))
                {
                    judge = expires.parse().ok().map(|expires| (owner.clone(), expires));
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                break;
            }
        }
        states.sort_by(|a, b| a.app.cmp(&b.app));
        Ok(Snapshot {
            apps: states,
            tallies,
            reports,
            judge,
        })
    }

    /// Writes `tally` over the one its host wrote before for its app.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn put_tally(&self, tally: &HostTally) -> Result<(), DesiredError> {
        self.put_json(&tally.key(), TALLY, tally).await
    }

    /// Writes `report` over the one its host wrote before.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn put_report(&self, report: &HostReport) -> Result<(), DesiredError> {
        self.put_json(&report.key(), REPORT, report).await
    }

    /// Writes item `key` holding `value` as JSON in attribute `attribute`.
    async fn put_json(
        &self,
        key: &str,
        attribute: &str,
        value: &impl serde::Serialize,
    ) -> Result<(), DesiredError> {
        let json = serde_json::to_string(value).map_err(|e| self.backend("PutItem", key, e))?;
        count_call("PutItem");
        (self.client.put_item())
            .table_name(&self.table)
            .item(KEY, AttributeValue::S(key.to_owned()))
            .item(attribute, AttributeValue::S(json))
            .send()
            .await
            .map_err(|e| self.backend("PutItem", key, e))?;
        Ok(())
    }

    /// The JSON `attribute` of the item `key`, read consistently, if the item exists.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn get_json(
        &self,
        key: &str,
        attribute: &str,
    ) -> Result<Option<String>, DesiredError> {
        Ok(self
            .item(key)
            .await?
            .and_then(|item| match item.get(attribute) {
                Some(AttributeValue::S(json)) => Some(json.clone()),
                _ => None,
            }))
    }

    /// Writes `value` as the JSON `attribute` of the item `key`, which must not exist yet.
    /// `false`: it exists.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn put_new_json(
        &self,
        key: &str,
        attribute: &str,
        value: &impl serde::Serialize,
    ) -> Result<bool, DesiredError> {
        let json = serde_json::to_string(value).map_err(|e| self.backend("PutItem", key, e))?;
        count_call("PutItem");
        let put = (self.client.put_item())
            .table_name(&self.table)
            .item(KEY, AttributeValue::S(key.to_owned()))
            .item(attribute, AttributeValue::S(json))
            .condition_expression("attribute_not_exists(#key)")
            .expression_attribute_names("#key", KEY)
            .send()
            .await;
        self.put_if(put, key)
    }

    /// Deletes the item `key`; whether it existed.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn delete_item(&self, key: &str) -> Result<bool, DesiredError> {
        count_call("DeleteItem");
        let deleted = (self.client.delete_item())
            .table_name(&self.table)
            .key(KEY, AttributeValue::S(key.to_owned()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| self.backend("DeleteItem", key, e))?;
        Ok(deleted.attributes.is_some_and(|old| !old.is_empty()))
    }

    /// The JSON `attribute` of every item whose key starts with `prefix`, read consistently.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn scan_json(
        &self,
        prefix: &str,
        attribute: &str,
    ) -> Result<Vec<String>, DesiredError> {
        let mut found = Vec::new();
        let mut start = None;
        loop {
            count_call("Scan");
            let page = (self.client.scan())
                .table_name(&self.table)
                .consistent_read(true)
                .filter_expression("begins_with(#key, :prefix)")
                .expression_attribute_names("#key", KEY)
                .expression_attribute_values(":prefix", AttributeValue::S(prefix.to_owned()))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.backend("Scan", prefix, e))?;
            for item in page.items() {
                if let Some(AttributeValue::S(json)) = item.get(attribute) {
                    found.push(json.clone());
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(found);
            }
        }
    }

    /// Takes or renews the judge's lease for `owner` until `ttl` from now; whether `owner`
    /// holds it. Another holder keeps it until its lease ends unrenewed.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn claim_judge(&self, owner: &str, ttl: Duration) -> Result<bool, DesiredError> {
        let now = SystemClock.now_ms();
        let expires = now + u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let put = (self.client.put_item())
            .table_name(&self.table)
            .item(KEY, AttributeValue::S(JUDGE_KEY.to_owned()))
            .item(OWNER, AttributeValue::S(owner.to_owned()))
            .item(EXPIRES, AttributeValue::N(expires.to_string()))
            .condition_expression(
                "attribute_not_exists(#key) OR #owner = :owner OR #expires < :now",
            )
            .expression_attribute_names("#key", KEY)
            .expression_attribute_names("#owner", OWNER)
            .expression_attribute_names("#expires", EXPIRES)
            .expression_attribute_values(":owner", AttributeValue::S(owner.to_owned()))
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()));
        count_call("PutItem");
        self.put_if(put.send().await, JUDGE_KEY)
    }

    /// What a conditional put of `key` answered: `true` written, `false` its condition failed.
    fn put_if<T>(
        &self,
        put: Result<T, SdkError<PutItemError, HttpResponse>>,
        key: &str,
    ) -> Result<bool, DesiredError> {
        match put {
            Ok(_) => Ok(true),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(error) => Err(self.backend("PutItem", key, error)),
        }
    }

    /// Applies `change` to `app`'s desired state and records it as the next revision, made
    /// `by` someone (a token id, a host), now.
    ///
    /// `seen` is the revision the change was decided on (0: nothing was recorded); `None`
    /// applies it to whatever is recorded when it is read. Either way the write is conditional
    /// on the revision it was applied to: a change recorded meanwhile refuses this one whole.
    ///
    /// # Errors
    /// [`DesiredError::Raced`] with what is recorded, when another change came first;
    /// DynamoDB's failures, and an unreadable item.
    pub async fn change(
        &self,
        app: &AppId,
        seen: Option<u64>,
        by: &str,
        change: impl FnOnce(&mut AppDesired),
    ) -> Result<AppDesired, DesiredError> {
        let current = self.get(app).await?;
        let base = current.unwrap_or_else(|| AppDesired::new(app.clone()));
        if let Some(seen) = seen
            && seen != base.revision
        {
            return Err(DesiredError::Raced {
                app: app.clone(),
                seen,
                now: Box::new(base),
            });
        }
        let mut next = base.clone();
        change(&mut next);
        next.app = app.clone();
        next.revision = base.revision + 1;
        next.changed_by = by.to_owned();
        next.changed_at_ms = SystemClock.now_ms();
        let key = app.key();
        let state = serde_json::to_string(&next).map_err(|e| self.backend("PutItem", &key, e))?;
        let put = (self.client.put_item())
            .table_name(&self.table)
            .item(KEY, AttributeValue::S(key.clone()))
            .item(REVISION, AttributeValue::N(next.revision.to_string()))
            .item(STATE, AttributeValue::S(state));
        let put = if base.revision == 0 {
            put.condition_expression("attribute_not_exists(#key)")
                .expression_attribute_names("#key", KEY)
        } else {
            put.condition_expression("#revision = :seen")
                .expression_attribute_names("#revision", REVISION)
                .expression_attribute_values(":seen", AttributeValue::N(base.revision.to_string()))
        };
        count_call("PutItem");
        match put.send().await {
            Ok(_) => Ok(next),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                let now = self.get(app).await?;
                Err(DesiredError::Raced {
                    app: app.clone(),
                    seen: base.revision,
                    now: Box::new(now.unwrap_or_else(|| AppDesired::new(app.clone()))),
                })
            }
            Err(error) => Err(self.backend("PutItem", &key, error)),
        }
    }

    /// An item as a desired state: its JSON, with the revision its number says.
    fn parse(
        &self,
        key: &str,
        item: &HashMap<String, AttributeValue>,
    ) -> Result<AppDesired, DesiredError> {
        let unreadable = |reason: String| DesiredError::Unreadable {
            table: self.table.clone(),
            key: key.to_owned(),
            reason,
        };
        let Some(AttributeValue::S(state)) = item.get(STATE) else {
            return Err(unreadable(format!("no `{STATE}` string")));
        };
        let revision = match item.get(REVISION) {
            Some(AttributeValue::N(n)) => n.parse::<u64>().ok(),
            _ => None,
        };
        let revision = revision.ok_or_else(|| unreadable(format!("no `{REVISION}` number")))?;
        let mut parsed: AppDesired =
            serde_json::from_str(state).map_err(|e| unreadable(e.to_string()))?;
        if parsed.app.key() != key {
            return Err(unreadable(format!("it names `{}`", parsed.app)));
        }
        parsed.revision = revision;
        Ok(parsed)
    }

    /// The item `key`, read consistently, if it exists.
    async fn item(
        &self,
        key: &str,
    ) -> Result<Option<HashMap<String, AttributeValue>>, DesiredError> {
        count_call("GetItem");
        let got = (self.client.get_item())
            .table_name(&self.table)
            .key(KEY, AttributeValue::S(key.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.backend("GetItem", key, e))?;
        Ok(got.item)
    }

    fn describe(&self) -> String {
        format!("desired-state table `{}`", self.table)
    }

    fn backend(
        &self,
        operation: &'static str,
        target: &str,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> DesiredError {
        DesiredError::Backend {
            store: self.describe(),
            operation,
            target: target.to_owned(),
            source: Box::new(error),
        }
    }
}
