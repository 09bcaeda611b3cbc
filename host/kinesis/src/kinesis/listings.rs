//! Shard listings shared by every subscription of a host that calls Kinesis with one client.
//!
//! Each app's coordinator lists its stream's shards every round. A thousand apps on one stream
//! would list it a thousand times a round, which is load on the service (and, on a local
//! server, most of a host's start-up); here they list it once between them. A listing is
//! handed out again while it is younger than half a round, so a new or closed shard is seen at
//! most half a round later than a coordinator of its own would see it.
//!
//! A listing runs in a task of its own, bounded by the ListShards timeout; whoever asks while
//! it runs waits for it, never for longer than that timeout. When it fails or times out, the
//! last listing that succeeded is handed out instead (a stalled ListShards must not stop the
//! other coordinators of the stream), and the next caller lists again: errors are not kept.
//! A stream that is gone, or that the client may not list, is reported as such, never
//! answered from an old listing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_kinesis::Client;
use tokio::sync::watch;
use tokio::time::Instant;

use super::read_error::ReadError;
use super::shards::{ShardInfo, list_shards};
use ruststream_common::escape::one_line;
use ruststream_common::sync::lock;

/// What one listing came to, for everyone who waited for it.
type Listed = Result<Arc<Vec<ShardInfo>>, Arc<ReadError>>;

/// One client's listings, by stream.
pub(crate) struct ShardListings {
    client: Client,
    /// How long a listing is handed out again.
    fresh_for: Duration,
    /// How long one listing may take.
    timeout: Duration,
    streams: Arc<Mutex<HashMap<String, Slot>>>,
}

#[derive(Default)]
struct Slot {
    /// The last listing that succeeded.
    last: Option<Listing>,
    /// The listing under way.
    under_way: Option<watch::Receiver<Option<Listed>>>,
}

struct Listing {
    at: Instant,
    shards: Arc<Vec<ShardInfo>>,
}

impl ShardListings {
    /// Listings made with `client`, each kept for `fresh_for`, each bounded by `timeout`.
    pub(crate) fn new(client: Client, fresh_for: Duration, timeout: Duration) -> Self {
        Self {
            client,
            fresh_for,
            timeout,
            streams: Arc::default(),
        }
    }

    /// The shards of `stream`: a listing younger than `fresh_for`, or a new one; should the
    /// new one fail or time out, the last one that succeeded.
    ///
    /// # Errors
    /// [`ReadError::StreamGone`] when the stream does not exist, [`ReadError::AccessDenied`]
    /// when this client's identity may not list it; as [`list_shards`], or
    /// [`ReadError::TimedOut`], when no listing of the stream ever succeeded.
    pub(crate) async fn list(&self, stream: &str) -> Result<Arc<Vec<ShardInfo>>, ReadError> {
        let mut under_way = {
            let mut streams = lock(&self.streams);
            let slot = streams.entry(stream.to_owned()).or_default();
            if let Some(listing) = &slot.last
                && listing.at.elapsed() < self.fresh_for
            {
                return Ok(listing.shards.clone());
            }
            match &slot.under_way {
                Some(under_way) => under_way.clone(),
                None => {
                    let (listed, under_way) = watch::channel(None);
                    slot.under_way = Some(under_way.clone());
                    tokio::spawn(self.listing(stream.to_owned(), listed));
                    under_way
                }
            }
        };
        let waited = tokio::time::timeout(self.timeout, under_way.wait_for(Option::is_some)).await;
        let listed = match waited {
            Ok(Ok(listed)) => (*listed).clone(),
            _ => None,
        };
        match listed {
            Some(Ok(shards)) => Ok(shards),
            // Said as it is, never answered from an old listing: the stream is gone, or this
            // identity may no longer list it (a revoked policy must stop its reads).
            Some(Err(error))
                if matches!(
                    *error,
                    ReadError::StreamGone { .. } | ReadError::AccessDenied { .. }
                ) =>
            {
                Err(ReadError::for_another(&error))
            }
            failed => self.last(stream).ok_or_else(|| match failed {
                Some(Err(error)) => ReadError::for_another(&error),
                _ => ReadError::TimedOut {
                    operation: "ListShards",
                    target: format!("`{stream}`"),
                    after: self.timeout,
                },
            }),
        }
    }

    /// The last listing of `stream` that succeeded, however old.
    fn last(&self, stream: &str) -> Option<Arc<Vec<ShardInfo>>> {
        lock(&self.streams)
            .get(stream)
            .and_then(|slot| slot.last.as_ref())
            .map(|listing| listing.shards.clone())
    }

    /// The task of one listing: lists `stream` within the timeout and hands the outcome to
    /// whoever waits for it.
    fn listing(
        &self,
        stream: String,
        listed: watch::Sender<Option<Listed>>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let (client, timeout, streams) = (self.client.clone(), self.timeout, self.streams.clone());
        async move {
            let outcome = match tokio::time::timeout(timeout, list_shards(&client, &stream)).await {
                Ok(Ok(shards)) => Ok(Arc::new(shards)),
                Ok(Err(error)) => Err(Arc::new(error)),
                Err(_) => Err(Arc::new(ReadError::TimedOut {
                    operation: "ListShards",
                    target: format!("`{stream}`"),
                    after: timeout,
                })),
            };
            if let Err(error) = &outcome {
                tracing::warn!(stream = %stream, error = %one_line(&**error),
                    "listing shards failed; the last listing serves until one succeeds");
            }
            let mut streams = lock(&streams);
            let slot = streams.entry(stream).or_default();
            slot.under_way = None;
            if let Ok(shards) = &outcome {
                slot.last = Some(Listing {
                    at: Instant::now(),
                    shards: shards.clone(),
                });
            }
            listed.send_replace(Some(outcome));
        }
    }
}
