//! One app's desired state, as the desired-state table keeps it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::state::versions::VersionOrigin;
use ruststream_runtime::app::StartPosition;

/// A tenant's app: the unit the desired state is kept for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AppId {
    /// The tenant.
    pub tenant: String,
    /// The app, as its component declares it.
    pub app: String,
}

impl AppId {
    /// App `app` of tenant `tenant`.
    pub fn new(tenant: impl Into<String>, app: impl Into<String>) -> Self {
        Self {
            tenant: tenant.into(),
            app: app.into(),
        }
    }

    /// The item key: `tenant/app` (neither name may hold a `/`: both are checked names).
    pub fn key(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant, self.app)
    }
}

/// A version of an app's component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveVersion {
    /// The hex SHA-256 of its bytes: its name in the component bucket.
    pub hash: String,
    /// The version its component declares.
    pub version: String,
    /// How it last went live for the fleet, and when; none when not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub came: Option<Came>,
}

impl LiveVersion {
    /// The version of bytes hashing to `hash` that declares `version`.
    pub fn new(hash: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            hash: hash.into(),
            version: version.into(),
            came: None,
        }
    }

    /// The same version, going live `by` a deploy, a rollback or a file at `at_ms`.
    pub fn came(self, by: VersionOrigin, at_ms: u64) -> Self {
        Self {
            came: Some(Came { by, at_ms }),
            ..self
        }
    }
}

/// How a version last went live for the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Came {
    /// A deploy, a rollback, or the tenants file the hosts started with.
    pub by: VersionOrigin,
    /// When (ms since the epoch).
    pub at_ms: u64,
}

/// A version run beside the live one on a sample of the records, its outcomes compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shadow {
    /// The shadow's content hash.
    pub hash: String,
    /// The percentage of records it is given (1-100).
    pub sample_percent: u32,
}

/// A rollout under way: `to` went live over `from`, and is judged until it is kept or rolled
/// back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollout {
    /// The version it replaced.
    pub from: String,
    /// The version being judged.
    pub to: String,
    /// When it began (ms since the epoch).
    pub started_ms: u64,
}

/// A seek of one subscriber, for every host to carry out on the shards it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetSeek {
    /// Its id, which only grows ([`AppDesired::next_seek_id`]): each shard's lease row keeps
    /// the id of the last seek that moved it, so that a seek moves each shard once, whichever
    /// host holds it when.
    pub id: u64,
    /// Where to.
    pub position: SeekTarget,
}

/// Where a recorded seek moves a subscription's shards. There is no "the tip": a seek to the
/// tip is recorded as the time it was made, so that every host moves to the same place however
/// late it reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "at", rename_all = "snake_case")]
pub enum SeekTarget {
    /// The oldest record each shard still holds.
    Horizon,
    /// The first record written at or after `ms` (ms since the epoch).
    Timestamp {
        /// Milliseconds since the Unix epoch.
        ms: u64,
    },
    /// One shard, from one record on.
    Sequence {
        /// The shard.
        shard: String,
        /// The sequence number of the first record to read again.
        sequence: String,
    },
}

impl SeekTarget {
    /// The position a host's subscription starts its shards at.
    pub fn start(&self) -> StartPosition {
        match self {
            Self::Horizon => StartPosition::Horizon,
            Self::Timestamp { ms } => StartPosition::AtTimestamp(*ms),
            Self::Sequence { shard, sequence } => StartPosition::AtSequence {
                shard_id: shard.clone(),
                sequence_number: sequence.clone(),
            },
        }
    }
}

/// What every host should run of one app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppDesired {
    /// The app.
    pub app: AppId,
    /// The component it runs under: the tenants file's file stem, or the upload's name.
    #[serde(default)]
    pub component: String,
    /// Bumped by each change; 0 before the first is recorded.
    pub revision: u64,
    /// The live version; `None` once undeployed.
    pub live: Option<LiveVersion>,
    /// The versions kept for a rollback, the one that went live last at the end (the live one
    /// among them).
    pub kept: Vec<LiveVersion>,
    /// The shadow running beside the live version, if any.
    pub shadow: Option<Shadow>,
    /// Whether the app's subscriptions are paused.
    pub paused: bool,
    /// The rollout under way, if any.
    pub rollout: Option<Rollout>,
    /// The last seek of each subscriber, by subscriber: each host moves the shards it holds
    /// when it first reads one.
    #[serde(default)]
    pub seeks: BTreeMap<String, FleetSeek>,
    /// Who made the last change (an operator's token id, a host, the rollout judge).
    pub changed_by: String,
    /// When (ms since the epoch).
    pub changed_at_ms: u64,
}

impl AppDesired {
    /// The id of a seek recorded now (`now_ms`, ms since the epoch): above every seek the app
    /// records. The time, not the revision, so that ids keep growing should the desired
    /// state be recreated while the lease rows keep the marks of earlier seeks.
    pub fn next_seek_id(&self, now_ms: u64) -> u64 {
        let last = self.seeks.values().map(|seek| seek.id).max();
        last.map_or(0, |id| id.saturating_add(1)).max(now_ms)
    }

    /// Nothing recorded yet for `app`.
    pub fn new(app: AppId) -> Self {
        Self {
            app,
            component: String::new(),
            revision: 0,
            live: None,
            kept: Vec::new(),
            shadow: None,
            paused: false,
            rollout: None,
            seeks: BTreeMap::new(),
            changed_by: String::new(),
            changed_at_ms: 0,
        }
    }

    /// Makes `version` live and keeps it last, keeping at most `keep` versions (at least the
    /// live one): the oldest that are not live go first. A shadow of the same build ends, as
    /// a promotion ends it on a host.
    pub fn go_live(&mut self, version: LiveVersion, keep: usize) {
        if self.shadow.as_ref().is_some_and(|s| s.hash == version.hash) {
            self.shadow = None;
        }
        self.kept.retain(|kept| kept.hash != version.hash);
        self.kept.push(version.clone());
        self.live = Some(version);
        let keep = keep.max(1);
        while self.kept.len() > keep {
            // The live version is last, so the first is never it.
            self.kept.remove(0);
        }
    }

    /// Makes `version` live as [`go_live`](Self::go_live) does, and records its rollout over
    /// the version that was live (`now_ms`), for the fleet's judge; none when nothing was live
    /// or it was live already.
    pub fn begin_rollout(&mut self, version: LiveVersion, keep: usize, now_ms: u64) {
        let from = self.live.as_ref().map(|live| live.hash.clone());
        self.rollout = from
            .filter(|from| *from != version.hash)
            .map(|from| Rollout {
                from,
                to: version.hash.clone(),
                started_ms: now_ms,
            });
        self.go_live(version, keep);
    }

    /// Stops the app everywhere: no live version, no shadow, no rollout; the kept versions
    /// stay for a later deploy or rollback.
    pub fn undeploy(&mut self) {
        self.live = None;
        self.shadow = None;
        self.rollout = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn going_live_keeps_the_newest_versions_and_the_live_one_last() {
        let mut state = AppDesired::new(AppId::new("acme", "books"));
        for n in 1..=4 {
            state.go_live(LiveVersion::new(format!("h{n}"), format!("{n}.0.0")), 3);
        }
        let kept: Vec<&str> = state.kept.iter().map(|v| v.hash.as_str()).collect();
        assert_eq!(kept, ["h2", "h3", "h4"]);
        // Back to a kept version: it moves last, nothing is dropped.
        state.go_live(LiveVersion::new("h2", "2.0.0"), 3);
        let kept: Vec<&str> = state.kept.iter().map(|v| v.hash.as_str()).collect();
        assert_eq!(kept, ["h3", "h4", "h2"]);
        assert_eq!(state.live.as_ref().map(|v| v.hash.as_str()), Some("h2"));
        state.undeploy();
        assert_eq!(state.live, None);
        assert_eq!(state.kept.len(), 3, "kept for a later rollback");
    }

    #[test]
    fn the_key_is_tenant_slash_app() {
        assert_eq!(AppId::new("acme", "books").key(), "acme/books");
    }
}
