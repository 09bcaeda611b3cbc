//! Shard listings shared by every subscription of a host that calls Kinesis with one client.
//!
//! Each app's coordinator lists its stream's shards every round. A thousand apps on one stream
//! would list it a thousand times a round, which is load on the service (and, on a local
//! server, most of a host's start-up); here they list it once between them. A listing is
//! handed out again while it is younger than half a round, so a new or closed shard is seen at
//! most half a round later than a coordinator of its own would see it. Errors are not kept:
//! the next caller lists again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_kinesis::Client;
use tokio::time::Instant;

use super::reader::ReadError;
use super::shards::{ShardInfo, list_shards};
use ruststream_runtime::internals::lock;

/// One client's listings, by stream.
pub(crate) struct ShardListings {
    client: Client,
    /// How long a listing is handed out again.
    fresh_for: Duration,
    /// One slot per stream; its async lock makes concurrent callers wait for one listing.
    streams: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Listing>>>>>,
}

struct Listing {
    at: Instant,
    shards: Arc<Vec<ShardInfo>>,
}

impl ShardListings {
    /// Listings made with `client`, each kept for `fresh_for`.
    pub(crate) fn new(client: Client, fresh_for: Duration) -> Self {
        Self {
            client,
            fresh_for,
            streams: Mutex::default(),
        }
    }

    /// The shards of `stream`: a listing younger than `fresh_for`, or a new one.
    ///
    /// # Errors
    /// As [`list_shards`].
    pub(crate) async fn list(&self, stream: &str) -> Result<Arc<Vec<ShardInfo>>, ReadError> {
        let slot = lock(&self.streams)
            .entry(stream.to_owned())
            .or_default()
            .clone();
        let mut kept = slot.lock().await;
        if let Some(listing) = kept.as_ref()
            && listing.at.elapsed() < self.fresh_for
        {
            return Ok(listing.shards.clone());
        }
        let shards = Arc::new(list_shards(&self.client, stream).await?);
        *kept = Some(Listing {
            at: Instant::now(),
            shards: shards.clone(),
        });
        Ok(shards)
    }
}
