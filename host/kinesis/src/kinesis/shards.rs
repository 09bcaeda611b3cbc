//! Listing a stream's shards.

use aws_sdk_kinesis::Client;

use super::read_error::ReadError;

/// A shard as listed, with what decides when it may be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardInfo {
    /// Its id.
    pub shard_id: String,
    /// Parents (after a split: one; after a merge: two). A child is read only once every
    /// parent still in the stream has been read to its end.
    pub parents: Vec<String>,
    /// Whether the shard is closed (it has an ending sequence number).
    pub closed: bool,
}

/// Every shard of `stream`, following `ListShards` pages.
///
/// # Errors
/// [`ReadError::StreamGone`] when the stream does not exist; [`ReadError::AccessDenied`]
/// when the client's identity may not list it; [`ReadError::Service`] when listing fails
/// (after the SDK's own retries).
pub async fn list_shards(client: &Client, stream: &str) -> Result<Vec<ShardInfo>, ReadError> {
    let mut shards = Vec::new();
    let mut next_token: Option<String> = None;
    loop {
        // A request with a NextToken must not name the stream.
        let request = match next_token.take() {
            Some(token) => client.list_shards().next_token(token),
            None => client.list_shards().stream_name(stream),
        };
        let page = request.send().await.map_err(|error| {
            if error
                .as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception())
            {
                return ReadError::stream_gone(client, stream);
            }
            let target = || format!("`{stream}`");
            ReadError::denied("ListShards", target, error).unwrap_or_else(|error| {
                ReadError::Service {
                    operation: "ListShards",
                    target: target(),
                    tries: 1,
                    source: error.into(),
                }
            })
        })?;
        shards.extend(page.shards().iter().map(|shard| {
            ShardInfo {
                shard_id: shard.shard_id().to_owned(),
                parents: shard
                    .parent_shard_id()
                    .into_iter()
                    .chain(shard.adjacent_parent_shard_id())
                    .map(str::to_owned)
                    .collect(),
                closed: shard
                    .sequence_number_range()
                    .is_some_and(|range| range.ending_sequence_number().is_some()),
            }
        }));
        match page.next_token() {
            Some(token) => next_token = Some(token.to_owned()),
            None => return Ok(shards),
        }
    }
}
