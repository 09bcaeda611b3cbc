//! This host's part in the fleet's reads ([`FleetReads`]): with DynamoDB leases, the hosts of
//! a fleet divide each shard's five GetRecords a second through one table for all tenants,
//! [`READS_TABLE`]. With memory leases a host is a fleet of its own and keeps all five.

use std::sync::Arc;
use std::time::Duration;

use ruststream_common::escape::one_line;
use ruststream_kinesis::runner::{FleetReads, READS_TABLE};
use ruststream_kinesis::{DynamoLeaseStore, LeaseStore};
use tokio::task::JoinHandle;

use super::Fleet;
use crate::settings::LeaseStoreKind;

/// Pause between tries to create the reads table while DynamoDB refuses, or to find it while
/// the host may not create it.
const CREATE_RETRY: Duration = Duration::from_secs(5);

impl Fleet {
    /// Starts taking part in the fleet's reads: once the reads table exists (made when the
    /// host makes its lease tables, tried again every few seconds while DynamoDB refuses;
    /// looked for every few seconds, said missing once, when it may not make them), this host
    /// announces the shards it reads there and reads each at its share. `None` with memory
    /// leases.
    pub(crate) fn join_fleet_reads(&self) -> Option<JoinHandle<FleetReads>> {
        let leases = &self.inner.leases;
        if leases.kind != LeaseStoreKind::Dynamodb {
            return None;
        }
        let store = DynamoLeaseStore::new(self.inner.identities.base().dynamo.clone(), READS_TABLE);
        let create = leases.create_table;
        let host = self.host().clone();
        Some(tokio::spawn(async move {
            if create {
                while let Err(error) = store.create_table_if_missing().await {
                    tracing::warn!(table = READS_TABLE, error = %one_line(&error),
                        "creating the fleet's reads table failed; reading each shard at the full rate of one host until it exists");
                    tokio::time::sleep(CREATE_RETRY).await;
                }
            } else {
                wait_for_table(&store).await;
            }
            let store: Arc<dyn LeaseStore> = Arc::new(store);
            FleetReads::spawn(store, host.read_pacing().clone(), host.config())
        }))
    }
}

/// Waits until the reads table exists, which this host may not create (`create_lease_table`
/// off): said once while it is missing (or cannot be looked for), and once when found.
async fn wait_for_table(store: &DynamoLeaseStore) {
    let mut said = false;
    loop {
        match store.table_is_active().await {
            Ok(true) => break,
            Ok(false) if !said => {
                tracing::error!(
                    table = READS_TABLE,
                    "the fleet's reads table does not exist and `create_lease_table` is off: this \
                     host reads each shard at the full rate of one host (a fleet may then read a \
                     shard more than five times a second) until the table is made, with key \
                     `lease_key` (string) like the lease tables"
                );
                said = true;
            }
            Err(error) if !said => {
                tracing::warn!(table = READS_TABLE, error = %one_line(&error),
                    "looking for the fleet's reads table failed; reading each shard at the full rate of one host until it is found");
                said = true;
            }
            _ => {}
        }
        tokio::time::sleep(CREATE_RETRY).await;
    }
    if said {
        tracing::info!(
            table = READS_TABLE,
            "the fleet's reads table exists; reading each shard at this host's share"
        );
    }
}
