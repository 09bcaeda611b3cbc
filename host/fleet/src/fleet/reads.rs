//! This host's part in the fleet's reads ([`FleetReads`]): with DynamoDB leases, the hosts of
//! a fleet divide each shard's five GetRecords a second through one table for all tenants,
//! [`READS_TABLE`]. With memory leases a host is a fleet of its own and keeps all five.

use std::sync::Arc;
use std::time::Duration;

use ruststream_host::runner::{FleetReads, READS_TABLE};
use ruststream_host::{DynamoLeaseStore, LeaseStore};
use ruststream_runtime::escape::one_line;
use tokio::task::JoinHandle;

use super::Fleet;
use crate::config::LeaseStoreKind;

/// Pause between tries to create the reads table while DynamoDB refuses.
const CREATE_RETRY: Duration = Duration::from_secs(5);

impl Fleet {
    /// Starts taking part in the fleet's reads: once the reads table exists (made when the
    /// host makes its lease tables, tried again every few seconds while DynamoDB refuses),
    /// this host announces the shards it reads there and reads each at its share. `None` with
    /// memory leases.
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
            }
            let store: Arc<dyn LeaseStore> = Arc::new(store);
            FleetReads::spawn(store, host.read_pacing().clone(), host.config())
        }))
    }
}
