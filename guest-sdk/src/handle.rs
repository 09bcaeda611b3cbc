//! Handlers and their registrations.

use std::future::Future;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;

use crate::context::Context;
use crate::executor::block_on;
use crate::outcome::{FailurePolicies, HandlerOutcome, IntoOutcome};
use crate::stream::{KinesisPosition, KinesisStream};

/// A handler of records decoded into `In`: the manual path, for handlers that are values
/// (they can hold configuration) rather than functions.
///
/// `outs` is the seed system's output slot, kept so handlers move over unchanged; a component
/// publishes through [`publish`](crate::publish) instead.
///
/// ```
/// use ruststream::prelude::*;
/// # #[derive(serde::Deserialize)]
/// # struct Entry { amount: i64 }
///
/// struct Book;
///
/// impl Handle<Entry> for Book {
///     fn handle(&self, entry: &Entry, _outs: &(), _ctx: &mut Context<'_>)
///         -> impl Future<Output = Result<(), HandlerOutcome>> {
///         ready(if entry.amount == 0 { Err(HandlerOutcome::drop()) } else { Ok(()) })
///     }
/// }
/// ```
pub trait Handle<In> {
    /// Handles one record. `Ok(())` acks it; `Err(outcome)` settles it with `outcome`.
    fn handle(
        &self,
        input: &In,
        outs: &(),
        ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>>;
}

/// Starts the registration of `handler` on `stream`; finish it with
/// [`build`](SubscriberBuilder::build). Records are decoded from JSON into `In`.
pub fn subscriber<In, H>(stream: KinesisStream, handler: H) -> SubscriberBuilder<In, H>
where
    In: DeserializeOwned + 'static,
    H: Handle<In> + 'static,
{
    builder(stream, handler, decoding::<In, H, FromJson>)
}

/// Like [`subscriber`], for a handler of the payload's bytes as they are ([`Raw`]): nothing is
/// decoded, so nothing can fail to decode.
pub fn subscriber_raw<H>(stream: KinesisStream, handler: H) -> SubscriberBuilder<Raw, H>
where
    H: Handle<Raw> + 'static,
{
    builder(stream, handler, decoding::<Raw, H, AsRaw>)
}

fn builder<In, H>(
    stream: KinesisStream,
    handler: H,
    dispatch: Assemble<H>,
) -> SubscriberBuilder<In, H>
where
    H: Handle<In> + 'static,
{
    SubscriberBuilder {
        registration: Registration::new(default_name::<H>(), stream),
        handler,
        dispatch,
        input: PhantomData,
    }
}

/// A record's payload, undecoded (the envelope, if any, already removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raw(pub Vec<u8>);

impl std::ops::Deref for Raw {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// How a subscriber's input is made from a record's payload. A type rather than a function
/// pointer, so that decoding is compiled into each subscriber's dispatch: in a component a
/// call through a pointer, and the decoded value returned through memory, cost a record more
/// than the rest of its dispatch.
trait DecodeInto<In> {
    fn decode(bytes: &[u8]) -> Result<In, String>;
}

/// Input read from JSON.
struct FromJson;

impl<In: DeserializeOwned> DecodeInto<In> for FromJson {
    #[inline(always)]
    fn decode(bytes: &[u8]) -> Result<In, String> {
        crate::json::from_slice(bytes).map_err(|error| error.to_string())
    }
}

/// The payload as it is.
struct AsRaw;

impl DecodeInto<Raw> for AsRaw {
    fn decode(bytes: &[u8]) -> Result<Raw, String> {
        Ok(Raw(bytes.to_vec()))
    }
}

/// Builds a subscriber's dispatch around its handler.
type Assemble<H> = fn(H) -> Box<dyn Dispatch>;

fn decoding<In, H, D>(handler: H) -> Box<dyn Dispatch>
where
    In: 'static,
    H: Handle<In> + 'static,
    D: DecodeInto<In> + 'static,
{
    Box::new(Decoding::<In, H, D> {
        handler,
        decode: PhantomData,
    })
}

fn default_name<H>() -> String {
    let path = std::any::type_name::<H>();
    let name = path.rsplit("::").next().unwrap_or(path);
    name.to_owned()
}

/// A registration being built; see [`subscriber`].
#[must_use = "a subscriber does nothing until it is built and included"]
pub struct SubscriberBuilder<In, H> {
    registration: Registration,
    handler: H,
    dispatch: Assemble<H>,
    input: PhantomData<fn() -> In>,
}

impl<In, H> SubscriberBuilder<In, H>
where
    In: 'static,
    H: Handle<In> + 'static,
{
    /// The finished registration, ready for [`BrokerScope::include`](crate::BrokerScope::include).
    pub fn build(self) -> Subscriber {
        Subscriber {
            registration: self.registration,
            dispatch: (self.dispatch)(self.handler),
        }
    }
}

/// A complete registration: a handler, its stream and its settings.
pub struct Subscriber {
    pub(crate) registration: Registration,
    pub(crate) dispatch: Box<dyn Dispatch>,
}

/// Something [`BrokerScope::include`](crate::BrokerScope::include) accepts: a built
/// [`Subscriber`], or a handler declared with `#[subscriber(..)]`.
pub trait Declared {
    /// The subscriber, as the app declares it to the host.
    fn declare(self) -> Subscriber;
}

impl Declared for Subscriber {
    fn declare(self) -> Subscriber {
        self
    }
}

/// The settings of one registration. The host reads them once per component instance.
/// Public only because [`SubscriberSettings`] names it; it cannot be built or read outside.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct Registration {
    pub(crate) name: String,
    pub(crate) stream: String,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) dead_letter: Option<String>,
    pub(crate) start: Option<KinesisPosition>,
    pub(crate) on_failure: FailurePolicies,
    pub(crate) batch: Option<u32>,
}

impl Registration {
    fn new(name: String, stream: KinesisStream) -> Self {
        Self {
            name,
            stream: stream.into_name(),
            max_attempts: None,
            dead_letter: None,
            start: None,
            on_failure: FailurePolicies::default(),
            batch: None,
        }
    }
}

/// Registration settings, available on a [`SubscriberBuilder`], a built [`Subscriber`] and on
/// what [`include`](crate::BrokerScope::include) returns:
///
/// ```
/// # use ruststream::prelude::*;
/// # #[derive(serde::Deserialize)]
/// # struct Entry { amount: i64 }
/// # #[subscriber(KinesisStream::new("ledger"))]
/// # async fn book(entry: &Entry) {}
/// # let service = RustStream::new(AppInfo::new("ledger", "0.1.0"));
/// # let _ = service.with_broker(ruststream::KinesisBroker::default(), |b| {
/// b.include(book).max_attempts(3).dead_letter("ledger.dead");
/// # });
/// ```
///
/// Invalid values (a zero `max_attempts` or `batch`, a dead-letter stream equal to the
/// subscribed one) are refused by the host when it loads the component, with an error naming
/// the subscriber.
pub trait SubscriberSettings: Sized {
    #[doc(hidden)]
    fn registration(&mut self) -> &mut Registration;

    /// The subscriber's name in logs and the host's reports (default: the handler's name).
    fn name(mut self, name: impl Into<String>) -> Self {
        self.registration().name = name.into();
        self
    }

    /// Turns `retry` into a counted copy: a record is delivered at most `attempts` times in all.
    fn max_attempts(mut self, attempts: u32) -> Self {
        self.registration().max_attempts = Some(attempts);
        self
    }

    /// Where spent records go (with no `max_attempts`, every retried record).
    fn dead_letter(mut self, stream: impl Into<String>) -> Self {
        self.registration().dead_letter = Some(stream.into());
        self
    }

    /// Where shards without a checkpoint start (default: the tip).
    fn start_at(mut self, position: KinesisPosition) -> Self {
        self.registration().start = Some(position);
        self
    }

    /// What happens to records that fail to decode or whose handler call traps.
    fn on_failure(mut self, policies: FailurePolicies) -> Self {
        self.registration().on_failure = policies;
        self
    }

    /// Most records handed to the component in one call (default: the host's).
    fn batch(mut self, records: u32) -> Self {
        self.registration().batch = Some(records);
        self
    }
}

impl<In, H> SubscriberSettings for SubscriberBuilder<In, H> {
    fn registration(&mut self) -> &mut Registration {
        &mut self.registration
    }
}

impl SubscriberSettings for Subscriber {
    fn registration(&mut self) -> &mut Registration {
        &mut self.registration
    }
}

/// A registered handler with its input type erased.
pub(crate) trait Dispatch {
    fn dispatch(&self, ctx: &mut Context<'_>, registration: &Registration) -> HandlerOutcome;
}

/// A handler with the decoder of its input.
struct Decoding<In, H, D> {
    handler: H,
    decode: PhantomData<fn() -> (In, D)>,
}

impl<In, H, D> Dispatch for Decoding<In, H, D>
where
    H: Handle<In>,
    D: DecodeInto<In>,
{
    fn dispatch(&self, ctx: &mut Context<'_>, registration: &Registration) -> HandlerOutcome {
        let input: In = match D::decode(ctx.data()) {
            Ok(input) => input,
            Err(error) => return decode_failed(ctx, registration, &error),
        };
        match block_on(self.handler.handle(&input, &(), ctx)).into_outcome() {
            Ok(()) => HandlerOutcome::ack(),
            Err(outcome) => outcome,
        }
    }
}

fn decode_failed(ctx: &Context<'_>, registration: &Registration, error: &str) -> HandlerOutcome {
    let outcome = registration.on_failure.decode.outcome();
    tracing::error!(
        subscriber = %registration.name,
        sequence_number = %ctx.sequence_number(),
        %error,
        policy = ?registration.on_failure.decode,
        "record could not be decoded as JSON"
    );
    outcome
}
