//! Leases and checkpoints in a DynamoDB table: they survive restarts, and several hosts share
//! the shards of a stream through them.
//!
//! The table layout is the seed's, so a table written by native RustStream services is
//! readable (and ours by them): hash key `lease_key` (S, `stream:shard`), attributes
//! `lease_owner` (S), `lease_expiry` (N, epoch ms), `lease_counter` (N, incremented by every
//! write) and `checkpoint` (S). Two attributes of ours come on top, which native services
//! ignore: `lease_wanted_by` (S), the host that asked for the lease to be handed over, and
//! `lease_seek_mark` (N), the last fleet seek carried out on the shard. Every write is
//! one conditional `UpdateItem`; the protocol needs no transactions or TTL.
//!
//! Presence rows (`#host/<scope>/<owner>`) hold `lease_owner`, `lease_expiry`, `lease_counter`
//! and `host_scope` (S), never a checkpoint. Native services never see them: they read and
//! write only the `stream:shard` keys they compute, and never scan. Rows keyed by a bare shard
//! id (written by `ruststream-kinesis` 0.6) make a listing fail with
//! [`LeaseError::LegacyRows`]; [`DynamoLeaseStore::adopt_legacy_rows`] migrates them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, TableStatus};

use super::{
    Claim, HeldLease, HostRecord, LeaseError, LeaseFuture, LeaseKey, LeaseRecord, LeaseStore,
    LeaseTable, PRESENCE_PREFIX, PresenceKey, Renewal, expiry_ms, is_legacy_key,
};
use crate::Cause;
use crate::dynamo_table::{self, TableError};

const KEY: &str = "lease_key";
const OWNER: &str = "lease_owner";
const EXPIRY: &str = "lease_expiry";
const COUNTER: &str = "lease_counter";
const CHECKPOINT: &str = "checkpoint";
const WANTED_BY: &str = "lease_wanted_by";
const SEEK_MARK: &str = "lease_seek_mark";
const SCOPE: &str = "host_scope";

/// Counts of what the store sent, for tests and metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DynamoStoreStats {
    /// Writes sent: the conditional ones (acquire, renew, checkpoint, release, handoffs) and
    /// presence rows' (announce, withdraw).
    pub writes: u64,
    /// Of those, checkpoint writes.
    pub checkpoint_writes: u64,
}

/// A lease store backed by one DynamoDB table (one table per namespace: a tenant's app).
#[derive(Debug)]
pub struct DynamoLeaseStore {
    client: Client,
    table: String,
    writes: AtomicU64,
    checkpoint_writes: AtomicU64,
}

impl DynamoLeaseStore {
    /// A store over the existing table `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            writes: AtomicU64::new(0),
            checkpoint_writes: AtomicU64::new(0),
        }
    }

    /// The table it uses.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// What the store has sent so far.
    pub fn stats(&self) -> DynamoStoreStats {
        DynamoStoreStats {
            writes: self.writes.load(Ordering::Relaxed),
            checkpoint_writes: self.checkpoint_writes.load(Ordering::Relaxed),
        }
    }

    /// Creates the table (on-demand capacity) unless it exists, and waits until it is active.
    ///
    /// # Errors
    /// When DynamoDB refuses or the table does not become active within a minute.
    pub async fn create_table_if_missing(&self) -> Result<(), LeaseError> {
        (dynamo_table::create_if_missing(&self.client, &self.table, KEY).await)
            .map_err(|error| self.table_error(error))
    }

    /// Whether the table exists and is active.
    ///
    /// # Errors
    /// When DynamoDB cannot be asked (`DescribeTable` refused or failed).
    pub async fn table_is_active(&self) -> Result<bool, LeaseError> {
        let status = (dynamo_table::status(&self.client, &self.table).await)
            .map_err(|error| self.table_error(error))?;
        Ok(status == Some(TableStatus::Active))
    }

    fn table_error(&self, error: TableError) -> LeaseError {
        match error {
            TableError::NotActive { table } => LeaseError::NotActive { table },
            TableError::Call {
                operation, source, ..
            } => self.backend(operation, "", source),
        }
    }

    /// Every item of the table, read consistently.
    async fn scan(&self) -> Result<Vec<HashMap<String, AttributeValue>>, LeaseError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.backend("Scan", "", e))?;
            items.extend(page.items.unwrap_or_default());
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    /// Migrates the rows `ruststream-kinesis` 0.6 keyed by a bare shard id, for a table that
    /// served `stream` alone: each bare row's checkpoint is stored under `stream:<shard id>`
    /// (unless that row has a checkpoint already, which is newer and stays), then the bare row
    /// is deleted. Returns the bare keys migrated. Run it with the 0.6 services stopped; a
    /// table that served several streams cannot be migrated this way (a bare row holds
    /// whichever stream checkpointed last): delete its bare rows instead.
    ///
    /// # Errors
    /// [`LeaseError::LegacyRowHeld`] when a bare row's lease has not expired (a 0.6 service
    /// still runs; nothing more is migrated); the store failed.
    pub async fn adopt_legacy_rows(&self, stream: &str) -> Result<Vec<String>, LeaseError> {
        let mut adopted = Vec::new();
        for item in self.scan().await? {
            let Some(bare) = string(&item, KEY).filter(|key| is_legacy_key(key)) else {
                continue;
            };
            let expiry = read_number(&bare, &item, EXPIRY)?;
            if let (Some(owner), Some(expiry_ms)) = (string(&item, OWNER), expiry)
                && expiry_ms > expiry_ms_now()
            {
                return Err(LeaseError::LegacyRowHeld {
                    table: self.table.clone(),
                    key: bare,
                    owner,
                    expiry_ms,
                });
            }
            if let Some(checkpoint) = string(&item, CHECKPOINT) {
                self.seed_checkpoint(&LeaseKey::new(stream, &bare), &checkpoint, None)
                    .await?;
            }
            self.delete_legacy(&bare, read_number(&bare, &item, COUNTER)?)
                .await?;
            tracing::info!(table = %self.table, row = %bare, stream, "legacy lease row migrated");
            adopted.push(bare);
        }
        Ok(adopted)
    }

    /// Deletes a bare row unless it was written since it was read (its counter moved).
    async fn delete_legacy(&self, key: &str, counter: Option<u64>) -> Result<(), LeaseError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        let request = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(KEY, AttributeValue::S(key.to_owned()));
        let request = match counter {
            Some(counter) => request
                .condition_expression(format!("{COUNTER} = :c"))
                .expression_attribute_values(":c", number(counter)),
            None => request.condition_expression(format!("attribute_not_exists({COUNTER})")),
        };
        match request.send().await {
            Ok(_) => Ok(()),
            Err(error) => Err(self.backend("DeleteItem(legacy row)", key, error)),
        }
    }

    fn backend(&self, operation: &'static str, key: &str, error: impl Into<Cause>) -> LeaseError {
        LeaseError::Backend {
            store: self.describe(),
            operation,
            key: key.to_owned(),
            source: error.into(),
        }
    }

    /// [`update`](Self::update) of `key`'s row when only whether the condition held matters.
    async fn update_if(
        &self,
        operation: &'static str,
        key: &LeaseKey,
        update: &str,
        condition: &str,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<bool, LeaseError> {
        let row = self
            .update(operation, &key.to_string(), update, condition, values)
            .await?;
        Ok(row.is_some())
    }

    /// One conditional `UpdateItem` (unconditional with an empty `condition`). `Ok(None)` when
    /// the condition failed.
    async fn update(
        &self,
        operation: &'static str,
        key: &str,
        update: &str,
        condition: &str,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<Option<HashMap<String, AttributeValue>>, LeaseError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, AttributeValue::S(key.to_owned()))
            .update_expression(update)
            .return_values(ReturnValue::AllNew);
        if !condition.is_empty() {
            request = request.condition_expression(condition);
        }
        for (name, value) in values {
            request = request.expression_attribute_values(name, value);
        }
        match request.send().await {
            Ok(out) => Ok(Some(out.attributes.unwrap_or_default())),
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => {
                Ok(None)
            }
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception()) =>
            {
                Err(LeaseError::NoTable {
                    table: self.table.clone(),
                })
            }
            Err(error) => Err(self.backend(operation, key, error)),
        }
    }

    /// A write by the holder of `lease`: conditional on owner and counter, and bumping the
    /// counter. Returns the row as written, `None` when the lease was lost.
    async fn held_write(
        &self,
        operation: &'static str,
        lease: &mut HeldLease,
        set: &str,
        mut values: Vec<(&str, AttributeValue)>,
    ) -> Result<Option<HashMap<String, AttributeValue>>, LeaseError> {
        let key = lease.key.to_string();
        values.extend([
            (":me", AttributeValue::S(lease.owner.clone())),
            (":c", number(lease.counter)),
            (":one", number(1)),
        ]);
        let update = format!("{set} ADD {COUNTER} :one");
        let condition = format!("{OWNER} = :me AND {COUNTER} = :c");
        let Some(row) = self
            .update(operation, &key, &update, &condition, values)
            .await?
        else {
            return Ok(None);
        };
        lease.counter = read_counter(&key, &row)?;
        Ok(Some(row))
    }
}

impl LeaseStore for DynamoLeaseStore {
    fn describe(&self) -> String {
        format!("dynamodb:{}", self.table)
    }

    fn list_all(&self) -> LeaseFuture<'_, LeaseTable> {
        Box::pin(async move {
            let mut table = LeaseTable::default();
            let mut legacy = Vec::new();
            for item in self.scan().await? {
                let key = string(&item, KEY).ok_or_else(|| LeaseError::Malformed {
                    key: "?".to_owned(),
                    reason: format!("a row without a string `{KEY}`"),
                })?;
                if key.starts_with(PRESENCE_PREFIX) {
                    table.hosts.push(parse_host(key, &item)?);
                } else if is_legacy_key(&key) {
                    legacy.push(key);
                } else {
                    table.leases.push(parse_record(&item)?);
                }
            }
            if !legacy.is_empty() {
                legacy.sort();
                return Err(LeaseError::LegacyRows {
                    table: self.table.clone(),
                    keys: legacy,
                });
            }
            Ok(table)
        })
    }

    fn read<'a>(&'a self, key: &'a LeaseKey) -> LeaseFuture<'a, Option<LeaseRecord>> {
        Box::pin(async move {
            let name = key.to_string();
            let out = self
                .client
                .get_item()
                .table_name(&self.table)
                .key(KEY, AttributeValue::S(name.clone()))
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| self.backend("GetItem", &name, e))?;
            out.item.as_ref().map(parse_record).transpose()
        })
    }

    fn acquire<'a>(
        &'a self,
        key: &'a LeaseKey,
        owner: &'a str,
        ttl: Duration,
        claim: Claim,
    ) -> LeaseFuture<'a, Option<HeldLease>> {
        Box::pin(async move {
            let name = key.to_string();
            let mut values = vec![
                (":me", AttributeValue::S(owner.to_owned())),
                (":exp", number(expiry_ms(ttl))),
                (":one", number(1)),
            ];
            let condition = match claim {
                Claim::Free => format!("attribute_not_exists({OWNER}) OR {OWNER} = :me"),
                Claim::Observed(counter) => {
                    values.push((":c", number(counter)));
                    format!("{COUNTER} = :c")
                }
            };
            let update =
                format!("SET {OWNER} = :me, {EXPIRY} = :exp REMOVE {WANTED_BY} ADD {COUNTER} :one");
            let Some(row) = self
                .update("UpdateItem(acquire)", &name, &update, &condition, values)
                .await?
            else {
                return Ok(None);
            };
            Ok(Some(HeldLease {
                key: key.clone(),
                owner: owner.to_owned(),
                counter: read_counter(&name, &row)?,
                checkpoint: string(&row, CHECKPOINT),
                seek_mark: read_number(&name, &row, SEEK_MARK)?,
            }))
        })
    }

    fn renew<'a>(&'a self, lease: &'a mut HeldLease, ttl: Duration) -> LeaseFuture<'a, Renewal> {
        Box::pin(async move {
            let set = format!("SET {EXPIRY} = :exp");
            let values = vec![(":exp", number(expiry_ms(ttl)))];
            let row = self
                .held_write("UpdateItem(renew)", lease, &set, values)
                .await?;
            Ok(Renewal {
                held: row.is_some(),
                wanted_by: row.and_then(|row| string(&row, WANTED_BY)),
            })
        })
    }

    fn checkpoint<'a>(
        &'a self,
        lease: &'a mut HeldLease,
        sequence: &'a str,
        ttl: Duration,
    ) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            self.checkpoint_writes.fetch_add(1, Ordering::Relaxed);
            let set = format!("SET {CHECKPOINT} = :seq, {EXPIRY} = :exp");
            let values = vec![
                (":seq", AttributeValue::S(sequence.to_owned())),
                (":exp", number(expiry_ms(ttl))),
            ];
            let row = self
                .held_write("UpdateItem(checkpoint)", lease, &set, values)
                .await?;
            Ok(row.is_some())
        })
    }

    fn mark_seek<'a>(
        &'a self,
        lease: &'a mut HeldLease,
        checkpoint: &'a str,
        mark: u64,
        ttl: Duration,
    ) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            self.checkpoint_writes.fetch_add(1, Ordering::Relaxed);
            let set = format!("SET {CHECKPOINT} = :seq, {SEEK_MARK} = :mark, {EXPIRY} = :exp");
            let values = vec![
                (":seq", AttributeValue::S(checkpoint.to_owned())),
                (":mark", number(mark)),
                (":exp", number(expiry_ms(ttl))),
            ];
            let row = self
                .held_write("UpdateItem(seek checkpoint)", lease, &set, values)
                .await?;
            if row.is_some() {
                lease.seek_mark = Some(mark);
            }
            Ok(row.is_some())
        })
    }

    fn release(&self, mut lease: HeldLease) -> LeaseFuture<'_, bool> {
        Box::pin(async move {
            let set = format!("REMOVE {OWNER}, {EXPIRY}, {WANTED_BY}");
            let row = self
                .held_write("UpdateItem(release)", &mut lease, &set, Vec::new())
                .await?;
            Ok(row.is_some())
        })
    }

    fn request_handoff<'a>(
        &'a self,
        key: &'a LeaseKey,
        holder: &'a str,
        taker: &'a str,
    ) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            // The counter is left alone: the holder's fenced writes go on until it hands over.
            let values = vec![
                (":holder", AttributeValue::S(holder.to_owned())),
                (":taker", AttributeValue::S(taker.to_owned())),
            ];
            let update = format!("SET {WANTED_BY} = :taker");
            let condition = format!(
                "{OWNER} = :holder AND (attribute_not_exists({WANTED_BY}) OR {WANTED_BY} = :taker)"
            );
            self.update_if(
                "UpdateItem(request handoff)",
                key,
                &update,
                &condition,
                values,
            )
            .await
        })
    }

    fn hand_off<'a>(&'a self, mut lease: HeldLease, to: &'a str) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            let set = format!("SET {OWNER} = :to REMOVE {WANTED_BY}");
            let values = vec![(":to", AttributeValue::S(to.to_owned()))];
            let row = self
                .held_write("UpdateItem(hand off)", &mut lease, &set, values)
                .await?;
            Ok(row.is_some())
        })
    }

    fn announce<'a>(&'a self, presence: &'a PresenceKey, ttl: Duration) -> LeaseFuture<'a, ()> {
        Box::pin(async move {
            let values = vec![
                (":me", AttributeValue::S(presence.owner().to_owned())),
                (":scope", AttributeValue::S(presence.scope().to_owned())),
                (":exp", number(expiry_ms(ttl))),
                (":one", number(1)),
            ];
            let update =
                format!("SET {OWNER} = :me, {SCOPE} = :scope, {EXPIRY} = :exp ADD {COUNTER} :one");
            let key = presence.to_string();
            self.update("UpdateItem(announce)", &key, &update, "", values)
                .await?;
            Ok(())
        })
    }

    fn withdraw<'a>(
        &'a self,
        presence: &'a PresenceKey,
        counter: Option<u64>,
    ) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            let key = presence.to_string();
            self.writes.fetch_add(1, Ordering::Relaxed);
            let mut request = self
                .client
                .delete_item()
                .table_name(&self.table)
                .key(KEY, AttributeValue::S(key.clone()))
                .return_values(ReturnValue::AllOld);
            if let Some(counter) = counter {
                request = request
                    .condition_expression(format!("{COUNTER} = :c"))
                    .expression_attribute_values(":c", number(counter));
            }
            match request.send().await {
                Ok(out) => Ok(out.attributes.is_some_and(|old| !old.is_empty())),
                Err(SdkError::ServiceError(e))
                    if e.err().is_conditional_check_failed_exception() =>
                {
                    Ok(false)
                }
                Err(error) => Err(self.backend("DeleteItem(withdraw)", &key, error)),
            }
        })
    }

    fn seed_checkpoint<'a>(
        &'a self,
        key: &'a LeaseKey,
        checkpoint: &'a str,
        mark: Option<u64>,
    ) -> LeaseFuture<'a, bool> {
        Box::pin(async move {
            let mut values = vec![(":c", AttributeValue::S(checkpoint.to_owned()))];
            let update = match mark {
                Some(mark) => {
                    values.push((":mark", number(mark)));
                    format!("SET {CHECKPOINT} = :c, {SEEK_MARK} = :mark")
                }
                None => format!("SET {CHECKPOINT} = :c"),
            };
            let condition = format!("attribute_not_exists({CHECKPOINT})");
            self.update_if(
                "UpdateItem(seed checkpoint)",
                key,
                &update,
                &condition,
                values,
            )
            .await
        })
    }
}

fn number(n: u64) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

fn string(row: &HashMap<String, AttributeValue>, name: &str) -> Option<String> {
    row.get(name).and_then(|v| v.as_s().ok()).cloned()
}

fn read_number(
    key: &str,
    row: &HashMap<String, AttributeValue>,
    name: &str,
) -> Result<Option<u64>, LeaseError> {
    let Some(value) = row.get(name) else {
        return Ok(None);
    };
    let malformed = |reason: String| LeaseError::Malformed {
        key: key.to_owned(),
        reason,
    };
    let text = value
        .as_n()
        .map_err(|_| malformed(format!("`{name}` is not a number")))?;
    text.parse()
        .map(Some)
        .map_err(|_| malformed(format!("`{name}` = {text} is not a non-negative integer")))
}

fn read_counter(key: &str, row: &HashMap<String, AttributeValue>) -> Result<u64, LeaseError> {
    Ok(read_number(key, row, COUNTER)?.unwrap_or(0))
}

/// Now, in ms since the epoch, as `lease_expiry` counts.
fn expiry_ms_now() -> u64 {
    expiry_ms(Duration::ZERO)
}

fn parse_host(
    key: String,
    row: &HashMap<String, AttributeValue>,
) -> Result<HostRecord, LeaseError> {
    let missing = |name: &str| LeaseError::Malformed {
        key: key.clone(),
        reason: format!("a presence row without a string `{name}`"),
    };
    Ok(HostRecord {
        scope: string(row, SCOPE).ok_or_else(|| missing(SCOPE))?,
        owner: string(row, OWNER).ok_or_else(|| missing(OWNER))?,
        counter: read_counter(&key, row)?,
        expiry_ms: read_number(&key, row, EXPIRY)?,
        key,
    })
}

fn parse_record(row: &HashMap<String, AttributeValue>) -> Result<LeaseRecord, LeaseError> {
    let key = string(row, KEY).ok_or_else(|| LeaseError::Malformed {
        key: "?".to_owned(),
        reason: format!("a row without a string `{KEY}`"),
    })?;
    Ok(LeaseRecord {
        owner: string(row, OWNER),
        expiry_ms: read_number(&key, row, EXPIRY)?,
        counter: read_counter(&key, row)?,
        checkpoint: string(row, CHECKPOINT),
        wanted_by: string(row, WANTED_BY),
        seek_mark: read_number(&key, row, SEEK_MARK)?,
        key,
    })
}
