//! Redrives the admin API starts (`POST /v1/redrives`): the engine `ruststream redrive` runs,
//! run inside the host with the host's own tenants, so a redriven record draws on the very
//! write quota the tenant's handlers draw on, and its grants are those the host enforces now.
//! Progress is kept in the same DynamoDB table as the verb's, so either resumes the other.
//! Each redrive started here is kept in the state directory too (`state::redrives`): one the
//! host was running when it stopped starts again when the host starts, and a finished one's
//! report outlives the process.

use std::sync::Arc;

use ruststream_common::escape::one_line;
use ruststream_common::sync::lock;
use ruststream_kinesis::DynamoLeaseStore;
use ruststream_kinesis::redrive::filter::{RedriveFilter, Tenants, parse_time};
use ruststream_kinesis::redrive::{
    DEFAULT_TABLE, Redrive, RedriveReport, RedriveSpec, RedriveState,
};

use super::Fleet;
use crate::admin::control::ControlError;
use crate::admin::model::{RedriveListed, RedriveRequest};
use crate::settings::LeaseStoreKind;

/// How many of the dead letters a dry run would move it lists.
const LISTED: usize = 10;

impl Fleet {
    /// Plans (`dry_run`) or starts the redrive `request` asks for.
    pub(super) async fn start_redrive(
        &self,
        request: RedriveRequest,
    ) -> Result<serde_json::Value, ControlError> {
        if self.inner.leases.kind != LeaseStoreKind::Dynamodb {
            return Err(ControlError::Redrive(
                "this host keeps its leases in memory, and a redrive's progress must outlive \
                 the process: run the host with --lease-store dynamodb, or run `ruststream \
                 redrive` against the servers"
                    .into(),
            ));
        }
        let redrive = self.redrive_for(request.clone()).await?;
        let failed = |error: ruststream_kinesis::redrive::RedriveError| {
            ControlError::Redrive(one_line(&error))
        };
        if request.dry_run {
            let plan = redrive.dry_run(LISTED).await.map_err(failed)?;
            return Ok(serde_json::to_value(plan).unwrap_or_default());
        }
        let id = redrive.id().to_owned();
        let progress = redrive.progress();
        {
            let mut state = self.state();
            if let Some(running) = state.redrives.get(&id)
                && lock(running).state == RedriveState::Running
            {
                return Err(ControlError::Redrive(format!(
                    "redrive `{id}` is running on this host already"
                )));
            }
            state.redrives.insert(id.clone(), Arc::clone(&progress));
        }
        let kept = RedriveRequest {
            id: Some(id.clone()),
            ..request
        };
        if let Err(error) = self.inner.kept_redrives.started(&kept) {
            self.state().redrives.remove(&id);
            return Err(ControlError::Redrive(format!(
                "redrive `{id}` was not started: it could not be kept to resume after a \
                 restart: {}",
                one_line(&error)
            )));
        }
        let fleet = self.clone();
        tokio::spawn(async move {
            let report = match redrive.run().await {
                Ok(report) => {
                    tracing::info!(redrive = %report.id, redriven = report.redriven,
                        skipped = report.skipped.values().sum::<u64>(), "redrive finished");
                    report
                }
                Err(error) => {
                    tracing::warn!(redrive = %redrive.id(), error = %one_line(&error),
                        "redrive stopped: starting it again resumes it");
                    lock(&redrive.progress()).clone()
                }
            };
            fleet.redrive_ended(&report);
        });
        Ok(serde_json::to_value(&*lock(&progress)).unwrap_or_default())
    }

    /// Keeps the end of a redrive's run: it is not resumed at the next start.
    fn redrive_ended(&self, report: &RedriveReport) {
        if let Err(error) = self.inner.kept_redrives.ended(report) {
            tracing::warn!(redrive = %report.id, error = %one_line(&error),
                "the redrive's end could not be kept: it runs again at the next start, \
                 and finds every dead letter settled");
        }
    }

    /// Starts again every redrive the host was running when it stopped: each resumes where
    /// its progress rows say. One that cannot start is kept as failed, with why.
    pub(crate) async fn resume_redrives(&self) {
        let (unfinished, errors) = self.inner.kept_redrives.unfinished();
        for error in errors {
            tracing::warn!(error = %one_line(&error), "a kept redrive cannot be read: not resumed");
        }
        for request in unfinished {
            let id = request.id.clone().unwrap_or_default();
            tracing::info!(redrive = %id, stream = %request.stream,
                "resuming the redrive this host was running when it stopped");
            if let Err(error) = self.start_redrive(request.clone()).await {
                tracing::warn!(redrive = %id, error = %one_line(&error),
                    "the redrive could not be resumed: start it again to resume it");
                self.redrive_ended(&RedriveReport {
                    id,
                    stream: request.stream,
                    state: RedriveState::Failed,
                    error: Some(one_line(&error)),
                    ..RedriveReport::default()
                });
            }
        }
    }

    /// The redrive of `request`, over the host's tenants, Kinesis client and redrive table.
    async fn redrive_for(&self, request: RedriveRequest) -> Result<Redrive, ControlError> {
        let time = |text: Option<String>| {
            text.map(|text| parse_time(&text))
                .transpose()
                .map_err(|error| ControlError::Redrive(error.to_string()))
        };
        let filter = RedriveFilter {
            tenant: request.tenant,
            reason: request.reason,
            since_ms: time(request.since)?,
            until_ms: time(request.until)?,
        };
        let spec = RedriveSpec::new(&request.stream, filter, request.id);
        let tenants: Tenants = self.with_tenants(|tenants| {
            tenants
                .iter()
                .map(|(name, run)| (name.clone(), Arc::clone(&run.tenant)))
                .collect()
        });
        let clients = self.inner.identities.base();
        let store = DynamoLeaseStore::new(clients.dynamo.clone(), DEFAULT_TABLE);
        if self.inner.leases.create_table {
            store.create_table_if_missing().await.map_err(|error| {
                ControlError::Redrive(format!(
                    "creating redrive table `{DEFAULT_TABLE}`: {}",
                    one_line(&error)
                ))
            })?;
        }
        let config = self.host().config();
        let owner = format!("{}/redrive", config.owner_id);
        Ok(Redrive::new(
            clients.kinesis.clone(),
            Arc::new(store),
            tenants,
            spec,
            &owner,
            config.lease_ttl,
        ))
    }

    /// Where redrive `id`, started on this host (by this process, or kept from an earlier
    /// one), stands.
    /// Every redrive the state directory keeps, with its live progress while it runs here.
    pub(super) fn redrive_list(&self) -> Vec<RedriveListed> {
        let (records, errors) = self.inner.kept_redrives.all();
        for error in errors {
            tracing::warn!(error = %one_line(&error), "a kept redrive cannot be read");
        }
        let state = self.state();
        records
            .into_iter()
            .map(|record| {
                let id = record.request.id.clone().unwrap_or_default();
                let live = state
                    .redrives
                    .get(&id)
                    .map(|progress| lock(progress).clone());
                let running = live
                    .as_ref()
                    .is_some_and(|progress| progress.state == RedriveState::Running);
                let progress = live.or(record.report);
                RedriveListed {
                    stream: record.request.stream,
                    tenant: record.request.tenant,
                    running,
                    progress: serde_json::to_value(progress).unwrap_or_default(),
                    id,
                }
            })
            .collect()
    }

    pub(super) fn redrive_progress(&self, id: &str) -> Result<serde_json::Value, ControlError> {
        if let Some(progress) = self.state().redrives.get(id) {
            return Ok(serde_json::to_value(&*lock(progress)).unwrap_or_default());
        }
        let kept = self
            .inner
            .kept_redrives
            .get(id)
            .map_err(|error| ControlError::Redrive(one_line(&error)))?;
        kept.and_then(|record| record.report)
            .map(|report| serde_json::to_value(report).unwrap_or_default())
            .ok_or_else(|| ControlError::UnknownRedrive(id.to_owned()))
    }
}
