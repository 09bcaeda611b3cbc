//! What a tenant is granted.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::publish::PublishError;

/// The streams a tenant may use for one purpose (subscribing, or publishing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StreamGrant {
    /// Every stream: for a host running only trusted components, and for tests.
    #[default]
    Any,
    /// Only these streams.
    Only(Arc<BTreeSet<String>>),
}

impl StreamGrant {
    /// A grant of exactly `streams`.
    pub fn only<I, S>(streams: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::Only(Arc::new(streams.into_iter().map(Into::into).collect()))
    }

    pub fn allows(&self, stream: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Only(streams) => streams.contains(stream),
        }
    }

    /// `Ok` when publishing to `stream` is granted; the guest's typed error otherwise.
    pub fn check_publish(&self, stream: &str) -> Result<(), PublishError> {
        if self.allows(stream) {
            Ok(())
        } else {
            Err(PublishError::NotPermitted(stream.to_owned()))
        }
    }
}
