//! Who read which shard, and when: an interceptor on a host's Kinesis client notes every
//! GetRecords with its shard (followed through the iterators GetShardIterator and GetRecords
//! hand out) and when it ran; one on the lease store's DynamoDB client notes when each lease
//! row changed owner. Tests measure how long a shard goes unread during a handoff with them,
//! from what the hosts actually sent, not from what they log. The Kinesis interceptor also
//! counts each host's ListShards calls: one per shard-sync round, so a test can wait for
//! rounds to pass.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::operation::update_item::UpdateItemOutput;
use aws_sdk_kinesis::operation::get_records::{GetRecordsInput, GetRecordsOutput};
use aws_sdk_kinesis::operation::get_shard_iterator::{
    GetShardIteratorInput, GetShardIteratorOutput,
};
use aws_sdk_kinesis::operation::list_shards::ListShardsInput;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use ruststream_common::sync::lock;

/// One GetRecords as a host sent it.
#[derive(Debug, Clone)]
pub struct Read {
    /// The host whose client sent it.
    pub host: String,
    /// The shard it read.
    pub shard_id: String,
    /// When it was sent.
    pub started: Instant,
    /// When its answer (or error) came.
    pub ended: Instant,
}

/// A shard changing reader: the time it went unread between the old reader's last read and
/// the new reader's first, and the part of it after the lease changed owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// The shard.
    pub shard_id: String,
    /// The host that read it before.
    pub from: String,
    /// The host that reads it now.
    pub to: String,
    /// From the end of `from`'s last read to the start of `to`'s first.
    pub unread: Duration,
    /// From the write that made `to` the lease's owner (a handoff, or a take) to the start of
    /// `to`'s first read; `None` when no such write was noted (no client of [`ReadLog`]).
    pub after_handover: Option<Duration>,
}

/// A lease row's owner changed.
#[derive(Debug, Clone)]
struct OwnerChange {
    /// The row's key (`stream:shard`).
    key: String,
    to: String,
    at: Instant,
}

/// The reads of every client made from it.
#[derive(Debug, Clone, Default)]
pub struct ReadLog {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// Every iterator handed out, with its shard.
    iterators: HashMap<String, String>,
    reads: Vec<Read>,
    /// Each lease row's owner as last written.
    owners: HashMap<String, String>,
    /// ListShards calls sent, per host.
    listings: HashMap<String, usize>,
    changes: Vec<OwnerChange>,
}

impl ReadLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A client of the local Kinesis server at `endpoint` whose reads are noted as `host`'s.
    pub async fn kinesis_client(&self, endpoint: &str, host: &str) -> aws_sdk_kinesis::Client {
        let config = crate::servers::sdk_config(endpoint).await;
        let config = aws_sdk_kinesis::config::Builder::from(&config)
            .interceptor(Noting {
                log: self.clone(),
                host: host.to_owned(),
            })
            .build();
        aws_sdk_kinesis::Client::from_conf(config)
    }

    /// A client of the local DynamoDB server at `endpoint` (for a lease store) that notes when
    /// each lease row changes owner.
    pub async fn dynamo_client(&self, endpoint: &str) -> aws_sdk_dynamodb::Client {
        let config = crate::servers::sdk_config(endpoint).await;
        let config = aws_sdk_dynamodb::config::Builder::from(&config)
            .interceptor(NotingOwners { log: self.clone() })
            .build();
        aws_sdk_dynamodb::Client::from_conf(config)
    }

    /// How many ListShards calls `host` has sent: a host lists its stream's shards once per
    /// shard-sync round (its listings live half a round), before it reads the lease table and
    /// takes or hands over leases in that round.
    pub fn listings(&self, host: &str) -> usize {
        self.lock().listings.get(host).copied().unwrap_or(0)
    }

    /// Every read so far, in the order they ended.
    pub fn reads(&self) -> Vec<Read> {
        self.lock().reads.clone()
    }

    /// Every change of reader of every shard, in time order per shard.
    pub fn handoffs(&self) -> Vec<Handoff> {
        let mut by_shard: BTreeMap<String, Vec<Read>> = BTreeMap::new();
        for read in self.reads() {
            by_shard
                .entry(read.shard_id.clone())
                .or_default()
                .push(read);
        }
        let mut handoffs = Vec::new();
        for (shard_id, mut reads) in by_shard {
            reads.sort_by_key(|r| r.started);
            let mut last: Option<&Read> = None;
            for read in &reads {
                if let Some(before) = last
                    && before.host != read.host
                {
                    // Unread since the latest end of any read sent before this one.
                    let read_until = reads
                        .iter()
                        .filter(|r| r.started < read.started)
                        .map(|r| r.ended)
                        .max()
                        .unwrap_or(before.ended);
                    handoffs.push(Handoff {
                        shard_id: shard_id.clone(),
                        from: before.host.clone(),
                        to: read.host.clone(),
                        unread: read.started.saturating_duration_since(read_until),
                        after_handover: self.handed_over(&shard_id, read),
                    });
                }
                last = Some(read);
            }
        }
        handoffs
    }

    /// How long before `first` (a host's first read of `shard_id`) the lease row of the shard
    /// last became that host's.
    fn handed_over(&self, shard_id: &str, first: &Read) -> Option<Duration> {
        let suffix = format!(":{shard_id}");
        let state = self.lock();
        let change = state
            .changes
            .iter()
            .filter(|c| c.key.ends_with(&suffix) && c.to == first.host && c.at <= first.started)
            .max_by_key(|c| c.at)?;
        Some(first.started.duration_since(change.at))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

/// Notes the lease rows whose owner an `UpdateItem` changed, from the row it returned.
#[derive(Debug, Clone)]
struct NotingOwners {
    log: ReadLog,
}

impl Intercept for NotingOwners {
    fn name(&self) -> &'static str {
        "ruststream-tests::reads::owners"
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let output = context.output_or_error().and_then(Result::ok);
        let Some(row) = output
            .and_then(|o| o.downcast_ref::<UpdateItemOutput>())
            .and_then(|o| o.attributes.as_ref())
        else {
            return Ok(());
        };
        let text = |name: &str| row.get(name).and_then(|v| v.as_s().ok()).cloned();
        let (Some(key), Some(owner)) = (text("lease_key"), text("lease_owner")) else {
            return Ok(());
        };
        let mut state = self.log.lock();
        if state.owners.get(&key) != Some(&owner) {
            state.owners.insert(key.clone(), owner.clone());
            state.changes.push(OwnerChange {
                key,
                to: owner,
                at: Instant::now(),
            });
        }
        Ok(())
    }
}

/// A call in flight: which, the shard it is about, and when it was sent.
#[derive(Debug, Clone)]
struct Sent {
    read: bool,
    shard_id: Option<String>,
    at: Instant,
}

impl Storable for Sent {
    type Storer = StoreReplace<Self>;
}

#[derive(Debug, Clone)]
struct Noting {
    log: ReadLog,
    host: String,
}

impl Intercept for Noting {
    fn name(&self) -> &'static str {
        "ruststream-tests::reads"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let input = context.input();
        if input.downcast_ref::<ListShardsInput>().is_some() {
            *self
                .log
                .lock()
                .listings
                .entry(self.host.clone())
                .or_default() += 1;
            return Ok(());
        }
        let (read, shard_id) = if let Some(input) = input.downcast_ref::<GetShardIteratorInput>() {
            (false, input.shard_id.clone())
        } else if let Some(input) = input.downcast_ref::<GetRecordsInput>() {
            let iterator = input.shard_iterator.as_deref().unwrap_or_default();
            (true, self.log.lock().iterators.get(iterator).cloned())
        } else {
            return Ok(());
        };
        cfg.interceptor_state().store_put(Sent {
            read,
            shard_id,
            at: Instant::now(),
        });
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(Sent {
            read,
            shard_id: Some(shard_id),
            at,
        }) = cfg.load::<Sent>().cloned()
        else {
            return Ok(());
        };
        let output = context.output_or_error().and_then(Result::ok);
        let mut state = self.log.lock();
        if !read {
            let out = output.and_then(|o| o.downcast_ref::<GetShardIteratorOutput>());
            if let Some(iterator) = out.and_then(|o| o.shard_iterator.clone()) {
                state.iterators.insert(iterator, shard_id);
            }
            return Ok(());
        }
        let out = output.and_then(|o| o.downcast_ref::<GetRecordsOutput>());
        if let Some(next) = out.and_then(|o| o.next_shard_iterator.clone()) {
            state.iterators.insert(next, shard_id.clone());
        }
        state.reads.push(Read {
            host: self.host.clone(),
            shard_id,
            started: at,
            ended: Instant::now(),
        });
        Ok(())
    }
}
