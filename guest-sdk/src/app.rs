//! The service a component exports: its identity and its subscribers.

use crate::handle::{Declared, Registration, Subscriber, SubscriberSettings};
use crate::stream::KinesisBroker;

/// The name and version of an app. The host namespaces leases and checkpoints by the name, so
/// two apps reading one stream keep separate positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppInfo {
    name: String,
    version: String,
}

impl AppInfo {
    /// The app `name` at `version`. The host validates both when it loads the component
    /// (1-64 characters of `[A-Za-z0-9_.-]`, and `+` in versions); its lease tables and log
    /// lines are named after them.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
        }
    }

    /// The app's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The app's version.
    pub fn version(&self) -> &str {
        &self.version
    }
}

/// A service: an app and the subscribers it registers. Returned by the component's service
/// function (the one marked `#[service]`).
pub struct RustStream {
    pub(crate) info: AppInfo,
    pub(crate) subscribers: Vec<Subscriber>,
}

impl RustStream {
    /// An app called `info`, with no subscribers yet: add them with
    /// [`with_broker`](Self::with_broker).
    pub fn new(info: AppInfo) -> Self {
        Self {
            info,
            subscribers: Vec::new(),
        }
    }

    /// Registers subscribers with `broker`, in the order `build` includes them.
    pub fn with_broker(
        mut self,
        _broker: KinesisBroker,
        build: impl FnOnce(&mut BrokerScope<'_>),
    ) -> Self {
        build(&mut BrokerScope {
            subscribers: &mut self.subscribers,
        });
        self
    }

    /// Its name and version.
    pub fn info(&self) -> &AppInfo {
        &self.info
    }
}

/// Where a service includes its subscribers; see [`RustStream::with_broker`].
pub struct BrokerScope<'a> {
    subscribers: &'a mut Vec<Subscriber>,
}

impl BrokerScope<'_> {
    /// Registers a subscriber. The returned value takes further settings in place:
    /// `b.include(book).max_attempts(3).dead_letter("ledger.dead");`
    pub fn include(&mut self, subscriber: impl Declared) -> Mounting<'_> {
        self.subscribers.push(subscriber.declare());
        let last = self.subscribers.len() - 1;
        Mounting {
            registration: &mut self.subscribers[last].registration,
        }
    }
}

/// An included subscriber, taking settings in place (see [`SubscriberSettings`]).
pub struct Mounting<'a> {
    registration: &'a mut Registration,
}

impl SubscriberSettings for Mounting<'_> {
    fn registration(&mut self) -> &mut Registration {
        self.registration
    }
}
