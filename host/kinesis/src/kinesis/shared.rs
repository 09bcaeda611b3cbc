//! GetRecords shared by the readers of a shard that stand at the same place, in a host that
//! calls Kinesis with one client (one set of credentials: readers of other clients never
//! share, so a tenant's reads stay signed with its own rights).
//!
//! The subscriptions of a host that read one shard are usually all at its tip, asking Kinesis
//! the same thing: "the records after S". Here they ask it once between them.
//!
//! - A reader stands at a **position**: after the last record it was handed, or at the start
//!   it was opened at (a sequence number, the horizon, a time), or, opened at the tip and
//!   handed nothing yet, on an iterator chain. The records after a position never change, so
//!   every iterator of a position reads the same records.
//! - A read asked for a position while another read of it waits for its turn or is under way
//!   **joins** it: one turn, one GetRecords, the answer handed to each (an empty one too: it
//!   was asked while the read was in flight). The read runs in a task of its own: a reader
//!   dropped while waiting leaves it to the others, and a read nobody waits for any more
//!   gives its turn up.
//! - A non-empty answer is **kept** for readers that ask for the same position a little later
//!   (one still handling the answer before): at most [`KEPT_ANSWERS`] answers holding at most
//!   [`KEPT_BYTES`] of data per shard, each for [`KEPT_FOR`], and only while the shard has more
//!   than one reader. An empty answer is never kept: records may arrive at any time.
//! - A reader that fell out of step (busy for longer than an answer is kept) reads on its own,
//!   and steps back in when one of its answers passes a position where another read waits or
//!   was kept: the answer is cut there, and the reader goes on from that read.
//! - A reader opened at the tip starts on the iterator of a read that reached the tip at most
//!   [`TIP_WINDOW`] before, instead of one of its own: it may be handed records that arrived
//!   up to that long before it opened (the second that its pinned start, one second before it
//!   opened, reads again after a restart), and misses none.
//! - A reader opened at a position where a read waits, or where one stood less than
//!   [`KNOWN_FOR`] ago, takes that read's iterator instead of calling GetShardIterator.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::operation::get_records::GetRecordsOutput;
use tokio::sync::watch;
use tokio::time::Instant;

use super::answer::delivery;
use super::calls::{Called, ShardRef};
use super::pacing::{Place, ReadPacing, ReaderOwner, Ticket};
use super::read_config::{ReaderConfig, StartAt};
use super::read_error::ReadError;
use ruststream_common::escape::one_line;
use ruststream_common::{backoff::Backoff, sync::lock};
use ruststream_runtime::{Delivery, record::Text};

/// Most non-empty answers a shard keeps for readers that ask for them later.
pub(crate) const KEPT_ANSWERS: usize = 8;
/// Most payload bytes the kept answers of a shard hold together; a larger answer is not kept.
pub(crate) const KEPT_BYTES: usize = 4 << 20;
/// How long a non-empty answer is handed to readers that ask for its position later.
pub(crate) const KEPT_FOR: Duration = Duration::from_secs(5);
/// How recently a read must have reached the tip for a reader opened at the tip to join it.
pub(crate) const TIP_WINDOW: Duration = Duration::from_secs(1);
/// How long the iterator of a position is taken again by a reader opened there (Kinesis keeps
/// an iterator valid for five minutes).
pub(crate) const KNOWN_FOR: Duration = Duration::from_secs(60);
/// Positions whose iterators a shard remembers.
const KNOWN_POSITIONS: usize = 16;

/// The reads of every shard made with one client: their turns and what they share.
pub struct SharedReads {
    client: Client,
    pacing: Arc<ReadPacing>,
    hubs: Mutex<HashMap<(String, String), Weak<ShardHub>>>,
}

impl SharedReads {
    /// Reads made with `client`, taking turns of their own.
    pub fn new(client: Client) -> Self {
        Self::with_pacing(client, Arc::new(ReadPacing::new()))
    }

    /// Reads made with `client`, taking turns from `pacing`, which the reads of other
    /// clients (a host's other identities) may share: turns count what the host asks of a
    /// shard, whoever signs.
    pub fn with_pacing(client: Client, pacing: Arc<ReadPacing>) -> Self {
        Self {
            client,
            pacing,
            hubs: Mutex::default(),
        }
    }

    /// The client the reads are made with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The turns the reads take.
    pub fn pacing(&self) -> &Arc<ReadPacing> {
        &self.pacing
    }

    /// The hub of `shard_id` of `stream`, shared while any reader holds it.
    pub(crate) fn hub(&self, stream: &str, shard_id: &str) -> Arc<ShardHub> {
        let key = (stream.to_owned(), shard_id.to_owned());
        let mut hubs = lock(&self.hubs);
        if let Some(hub) = hubs.get(&key).and_then(Weak::upgrade) {
            return hub;
        }
        hubs.retain(|_, hub| hub.strong_count() > 0);
        let hub = Arc::new(ShardHub {
            shard: ShardRef {
                client: self.client.clone(),
                stream: stream.to_owned(),
                shard_id: shard_id.to_owned(),
            },
            pacing: self.pacing.clone(),
            state: Mutex::default(),
            opening: tokio::sync::Mutex::new(()),
        });
        hubs.insert(key, Arc::downgrade(&hub));
        hub
    }
}

/// Where a reader stands in a shard.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Position {
    /// After this record.
    After(Text),
    /// At this record.
    At(String),
    /// At the oldest record.
    Horizon,
    /// At the first record that arrived at or after this time (ms since the epoch).
    Since(u64),
    /// On an iterator chain opened at the tip, no record read yet.
    Chain(u64),
}

impl Position {
    /// The position `start` names; `None` for the tip, which moves.
    pub(crate) fn of(start: &StartAt) -> Option<Self> {
        Some(match start {
            StartAt::AfterSequence(sequence) => Self::After(Text::from(sequence.as_str())),
            StartAt::AtSequence(sequence) => Self::At(sequence.clone()),
            StartAt::Horizon => Self::Horizon,
            StartAt::AtTimestamp(ms) => Self::Since(*ms),
            StartAt::Latest => return None,
        })
    }

    /// Where to reopen a reader standing here; `tip` is where a chain reopens.
    pub(crate) fn resume(&self, tip: &StartAt) -> StartAt {
        match self {
            Self::After(sequence) => StartAt::AfterSequence(sequence.to_string()),
            Self::At(sequence) => StartAt::AtSequence(sequence.clone()),
            Self::Horizon => StartAt::Horizon,
            Self::Since(ms) => StartAt::AtTimestamp(*ms),
            Self::Chain(_) => tip.clone(),
        }
    }
}

/// A GetRecords answer, as every reader it is handed to takes it.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The records, in shard order.
    pub records: Vec<Delivery>,
    /// Where to read on; `None` at the end of a closed shard.
    pub next_iterator: Option<String>,
    /// Where a reader handed this answer stands.
    pub next_position: Position,
    pub millis_behind_latest: Option<i64>,
    /// The shards that continue this one, when the answer ends it.
    pub children: Vec<String>,
    /// When the answered call went out.
    pub started: Instant,
    /// When the answer came: readers handed an empty answer poll again a fixed time after it,
    /// so its sharers stay in step.
    pub answered: Instant,
    /// Nothing was left after it when the call was answered: a reader opened at the tip may
    /// start where it leaves its readers.
    pub reached_tip: bool,
}

/// What a read came to, shared by everyone it was handed to.
pub(crate) enum Outcome {
    Records(Answer),
    /// Kinesis throttled the read; the shard's next turn was moved back. Read again with
    /// `iterator`.
    Throttled {
        iterator: String,
    },
    /// The read failed or timed out. Read again with `iterator`, after a pause.
    Failed {
        error: Arc<dyn std::error::Error + Send + Sync>,
        iterator: String,
    },
    /// The shard cannot be read on.
    Fatal(Arc<ReadError>),
}

/// A reader's read: where it stands, and whose it is.
pub(crate) struct ReadRequest {
    pub position: Position,
    pub iterator: String,
    /// Where a chain reopens if its iterator expired.
    pub tip: StartAt,
    pub owner: Arc<ReaderOwner>,
    pub config: ReaderConfig,
}

/// A read is shared by readers at one position that read with one batch limit.
type ReadKey = (Position, i32);

/// One shard's reads, shared by its readers on this client.
pub(crate) struct ShardHub {
    shard: ShardRef,
    pacing: Arc<ReadPacing>,
    state: Mutex<HubState>,
    /// Held by a reader opening, so readers opened together take one iterator.
    opening: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct HubState {
    readers: usize,
    /// Reads waiting for their turn or under way.
    in_flight: HashMap<ReadKey, Arc<InFlight>>,
    /// Non-empty answers, oldest first.
    kept: VecDeque<Kept>,
    kept_bytes: usize,
    /// Iterators of positions reads reached, oldest first.
    known: VecDeque<Known>,
    chains: u64,
}

struct InFlight {
    place: Place,
    iterator: String,
    answer: watch::Sender<Option<Arc<Outcome>>>,
}

struct Kept {
    from: ReadKey,
    iterator: String,
    outcome: Arc<Outcome>,
    at: Instant,
    bytes: usize,
}

struct Known {
    position: Position,
    iterator: String,
    /// When the call that reached it went out.
    started: Instant,
    /// The call reached the tip of the shard.
    at_tip: bool,
}

/// A reader counted on its shard's hub while it lives.
pub(crate) struct Registration(Arc<ShardHub>);

impl Registration {
    pub(crate) fn hub(&self) -> &Arc<ShardHub> {
        &self.0
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut state = lock(&self.0.state);
        state.readers = state.readers.saturating_sub(1);
        if state.readers == 0 {
            state.kept.clear();
            state.kept_bytes = 0;
        }
    }
}

impl ShardHub {
    /// Counts a reader on this shard until the registration is dropped.
    pub(crate) fn register(self: &Arc<Self>) -> Registration {
        lock(&self.state).readers += 1;
        Registration(self.clone())
    }

    /// Where a reader opened at `start` (at `opened`) stands, and an iterator there.
    ///
    /// Opens wait for each other (one GetShardIterator of a shard at a time, as Kinesis serves
    /// five a second per shard), so readers opened together take one iterator: at an exact
    /// position, the iterator of a read waiting there or of one that stood there less than
    /// [`KNOWN_FOR`] ago; at the tip, that of a read, or of an open, that reached the tip at
    /// most [`TIP_WINDOW`] before `opened`. Otherwise GetShardIterator is called.
    ///
    /// # Errors
    /// As [`ShardRef::iterator`].
    pub(crate) async fn open_at(
        &self,
        start: &StartAt,
        opened: Instant,
        backoff: &mut Backoff,
        config: &ReaderConfig,
    ) -> Result<(Position, String), ReadError> {
        let _one_at_a_time = self.opening.lock().await;
        let exact = Position::of(start);
        let taken = match &exact {
            Some(position) => self
                .iterator_at(position)
                .map(|iterator| (position.clone(), iterator)),
            None => opened
                .checked_sub(TIP_WINDOW)
                .and_then(|since| self.tip_since(since)),
        };
        if let Some(taken) = taken {
            return Ok(taken);
        }
        let started = Instant::now();
        let iterator = self.shard.iterator(start, backoff, config).await?;
        let mut state = lock(&self.state);
        let position = exact.unwrap_or_else(|| {
            state.chains += 1;
            Position::Chain(state.chains)
        });
        // An iterator at the tip is at the tip as of the call: records after it arrived after
        // the call went out.
        state.remember(Known {
            position: position.clone(),
            iterator: iterator.clone(),
            started,
            at_tip: matches!(position, Position::Chain(_)),
        });
        Ok((position, iterator))
    }

    /// The newest position a read reached the tip at with a call that went out at `since` or
    /// later, and its iterator.
    fn tip_since(&self, since: Instant) -> Option<(Position, String)> {
        let state = lock(&self.state);
        state
            .known
            .iter()
            .rev()
            .find(|known| known.at_tip && known.started >= since)
            .map(|known| (known.position.clone(), known.iterator.clone()))
    }

    /// An iterator of `position` a read waits with, or one a read reached it with less than
    /// [`KNOWN_FOR`] ago.
    fn iterator_at(&self, position: &Position) -> Option<String> {
        let state = lock(&self.state);
        let waiting = state
            .in_flight
            .iter()
            .find(|((at, _), _)| at == position)
            .map(|(_, read)| read.iterator.clone());
        waiting.or_else(|| {
            state
                .known
                .iter()
                .rev()
                .find(|known| known.position == *position && known.started.elapsed() < KNOWN_FOR)
                .map(|known| known.iterator.clone())
        })
    }

    /// The answer to `request`: a kept one, the one of a read of its position already waiting
    /// or under way, or that of a new read, made at its turn.
    pub(crate) async fn read(self: &Arc<Self>, request: ReadRequest) -> Arc<Outcome> {
        let iterator = request.iterator.clone();
        let mut answer = match self.join_or_start(request) {
            Ok(kept) => return kept,
            Err(waiting) => waiting,
        };
        let outcome = answer
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|seen| (*seen).clone());
        outcome.unwrap_or_else(|| {
            // The read's task ended without an answer (the runtime is shutting down).
            let error = ReadError::Incomplete {
                operation: "GetRecords",
                target: self.shard.target(),
                missing: "no answer: the shared read ended",
            };
            Arc::new(Outcome::Failed {
                error: Arc::new(error),
                iterator,
            })
        })
    }

    /// A kept answer (`Ok`), or the answer to wait for (`Err`).
    fn join_or_start(
        self: &Arc<Self>,
        request: ReadRequest,
    ) -> Result<Arc<Outcome>, watch::Receiver<Option<Arc<Outcome>>>> {
        let key = (request.position.clone(), request.config.get_records_limit);
        let mut state = lock(&self.state);
        if let Some(kept) = state.kept_answer(&key) {
            return Ok(kept);
        }
        if let Some(read) = state.in_flight.get(&key) {
            self.pacing.join(&read.place, &request.owner);
            return Err(read.answer.subscribe());
        }
        let ticket = self.pacing.line_up(
            &self.shard.stream,
            &self.shard.shard_id,
            request.owner.clone(),
        );
        let (answer, receiver) = watch::channel(None);
        let read = Arc::new(InFlight {
            place: ticket.place(),
            iterator: request.iterator.clone(),
            answer,
        });
        state.in_flight.insert(key.clone(), read.clone());
        drop(state);
        tokio::spawn(self.clone().fetch(key, request, ticket, read));
        Err(receiver)
    }

    /// The task of one read: its turn, the call, and the answer handed out.
    async fn fetch(
        self: Arc<Self>,
        key: ReadKey,
        request: ReadRequest,
        ticket: Ticket,
        read: Arc<InFlight>,
    ) {
        if !self.turn(&key, ticket, &read).await {
            return;
        }
        let resume = request.position.resume(&request.tip);
        let (called, iterator) = self
            .shard
            .read(request.iterator, &resume, &request.config)
            .await;
        let outcome = match called {
            Called::Records {
                output,
                records,
                started,
            } => {
                self.pacing
                    .answered(&self.shard.stream, &self.shard.shard_id);
                let answer = answer_of(&key, output, records, started);
                let mut state = lock(&self.state);
                let answer = state.placed(&key, answer);
                state.hand_out(&key, &read, &iterator, Outcome::Records(answer));
                return;
            }
            Called::Throttled(error) => {
                let config = &request.config;
                let pause = self.pacing.throttled(
                    &self.shard.stream,
                    &self.shard.shard_id,
                    config.backoff_first,
                    config.backoff_max,
                );
                tracing::warn!(stream = %self.shard.stream, shard = %self.shard.shard_id, ?pause,
                    error = %one_line(&*error), "GetRecords throttled; the shard's next turn moves back");
                metrics::counter!(
                    crate::metrics::READ_THROTTLES,
                    "stream" => self.shard.stream.clone(),
                    "shard" => self.shard.shard_id.clone()
                )
                .increment(1);
                Outcome::Throttled { iterator }
            }
            Called::Failed(error) => {
                tracing::warn!(stream = %self.shard.stream, shard = %self.shard.shard_id,
                    error = %one_line(&*error), "GetRecords failed; its readers back off");
                Outcome::Failed {
                    error: Arc::from(error),
                    iterator,
                }
            }
            Called::Fatal(error) => Outcome::Fatal(Arc::new(error)),
        };
        lock(&self.state).hand_out(&key, &read, "", outcome);
    }

    /// Waits for the read's turn; `false` (and the read dropped) if everyone waiting for its
    /// answer went away first.
    async fn turn(&self, key: &ReadKey, ticket: Ticket, read: &Arc<InFlight>) -> bool {
        let granted = ticket.granted();
        tokio::pin!(granted);
        loop {
            tokio::select! {
                () = &mut granted => return true,
                () = read.answer.closed() => {
                    let mut state = lock(&self.state);
                    if read.answer.receiver_count() == 0 {
                        state.finished(key, read);
                        return false;
                    }
                }
            }
        }
    }
}

/// The answer of a GetRecords read from `key`, its readers still standing at `key`.
fn answer_of(
    key: &ReadKey,
    mut output: GetRecordsOutput,
    tapped: Option<Vec<Delivery>>,
    started: Instant,
) -> Answer {
    let records = tapped.unwrap_or_else(|| {
        std::mem::take(&mut output.records)
            .into_iter()
            .map(delivery)
            .collect()
    });
    let children = output
        .child_shards()
        .iter()
        .map(|child| child.shard_id().to_owned())
        .collect();
    // A chain opened at the tip that still reads nothing is at the tip, whatever the lag says.
    let reached_tip = output.millis_behind_latest == Some(0)
        || (records.is_empty() && matches!(key.0, Position::Chain(_)));
    Answer {
        records,
        next_iterator: output.next_shard_iterator,
        next_position: key.0.clone(),
        millis_behind_latest: output.millis_behind_latest,
        children,
        started,
        answered: Instant::now(),
        reached_tip,
    }
}

impl HubState {
    /// Remembers an iterator of a position, the newest for it.
    fn remember(&mut self, known: Known) {
        self.known.retain(|k| k.position != known.position);
        self.known.push_back(known);
        while self.known.len() > KNOWN_POSITIONS {
            self.known.pop_front();
        }
    }

    /// Ends the read and hands its outcome to everyone waiting for it; learns from it
    /// (`iterator`: the one it read with).
    fn hand_out(&mut self, key: &ReadKey, read: &Arc<InFlight>, iterator: &str, outcome: Outcome) {
        self.finished(key, read);
        let outcome = Arc::new(outcome);
        self.learn(key, iterator, &outcome);
        read.answer.send_replace(Some(outcome));
    }

    /// A kept answer to a read from `key`, if one is young enough.
    fn kept_answer(&mut self, key: &ReadKey) -> Option<Arc<Outcome>> {
        while self
            .kept
            .front()
            .is_some_and(|kept| kept.at.elapsed() >= KEPT_FOR)
        {
            self.forget_oldest();
        }
        self.kept
            .iter()
            .rev()
            .find(|kept| kept.from == *key)
            .map(|kept| kept.outcome.clone())
    }

    fn forget_oldest(&mut self) {
        if let Some(kept) = self.kept.pop_front() {
            self.kept_bytes -= kept.bytes;
        }
    }

    /// Removes the read of `key`, if it is `read`.
    fn finished(&mut self, key: &ReadKey, read: &Arc<InFlight>) {
        if self
            .in_flight
            .get(key)
            .is_some_and(|current| Arc::ptr_eq(current, read))
        {
            self.in_flight.remove(key);
        }
    }

    /// Where `answer` (read from `key`) leaves its readers. When its records pass a position
    /// where another read waits or was kept, it is cut after the last such record and its
    /// readers go on from that read; otherwise they stand after its last record.
    fn placed(&self, key: &ReadKey, mut answer: Answer) -> Answer {
        let Some(last) = answer.records.last() else {
            return answer;
        };
        answer.next_position = Position::After(Text::from(last.sequence_number.as_str()));
        // Only this read is in flight and nothing is kept: there is nobody to step in with.
        let others = self.in_flight.len() + self.kept.len();
        if others <= 1
            || self
                .iterator_of_read(&(answer.next_position.clone(), key.1))
                .is_some()
        {
            return answer;
        }
        let cut = answer
            .records
            .iter()
            .enumerate()
            .rev()
            .skip(1)
            .find_map(|(index, record)| {
                let at = (Position::After(record.sequence_number.clone()), key.1);
                self.iterator_of_read(&at).map(|iterator| (index, iterator))
            });
        if let Some((index, iterator)) = cut {
            answer.records.truncate(index + 1);
            let last = answer.records[index].sequence_number.as_str();
            answer.next_position = Position::After(Text::from(last));
            answer.next_iterator = Some(iterator);
            answer.children.clear();
            answer.reached_tip = false;
        }
        answer
    }

    /// The iterator of a read from `key` that waits, is under way or was kept.
    fn iterator_of_read(&self, key: &ReadKey) -> Option<String> {
        if let Some(read) = self.in_flight.get(key) {
            return Some(read.iterator.clone());
        }
        self.kept
            .iter()
            .rev()
            .find(|kept| kept.from == *key && kept.at.elapsed() < KEPT_FOR)
            .map(|kept| kept.iterator.clone())
    }

    /// Remembers where the read of `key` (made with `iterator`) left its readers, and keeps
    /// a non-empty answer for readers asking for `key` later.
    fn learn(&mut self, key: &ReadKey, iterator: &str, outcome: &Arc<Outcome>) {
        let Outcome::Records(answer) = &**outcome else {
            return;
        };
        if let Some(next) = &answer.next_iterator {
            let at_tip = answer.reached_tip;
            self.known
                .retain(|known| known.position != answer.next_position);
            self.known.push_back(Known {
                position: answer.next_position.clone(),
                iterator: next.clone(),
                started: answer.started,
                at_tip,
            });
            while self.known.len() > KNOWN_POSITIONS {
                self.known.pop_front();
            }
        }
        let bytes: usize = answer.records.iter().map(|r| r.payload.len()).sum();
        if answer.records.is_empty() || self.readers < 2 || bytes > KEPT_BYTES {
            return;
        }
        self.kept.push_back(Kept {
            from: key.clone(),
            iterator: iterator.to_owned(),
            outcome: outcome.clone(),
            at: Instant::now(),
            bytes,
        });
        self.kept_bytes += bytes;
        while self.kept.len() > KEPT_ANSWERS || self.kept_bytes > KEPT_BYTES {
            self.forget_oldest();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::task::JoinHandle;

    use super::*;
    use crate::kinesis::pacing::ReaderOwner;
    use crate::kinesis::reader::ShardReader;
    use crate::kinesis::test_shard::TestShard;

    fn config() -> ReaderConfig {
        ReaderConfig {
            poll_interval: Duration::from_millis(200),
            ..ReaderConfig::default()
        }
    }

    async fn open(reads: &SharedReads, tenant: &str, start: StartAt) -> ShardReader {
        let owner = ReaderOwner::new(tenant, "app", "sub");
        ShardReader::open(reads, owner, "s", "shard-0", start, config())
            .await
            .expect("the shard opens")
    }

    fn data(batch: &[Delivery]) -> impl Iterator<Item = String> + '_ {
        batch
            .iter()
            .map(|r| String::from_utf8_lossy(&r.payload).into_owned())
    }

    /// Reads until `count` records came; their data, in order.
    fn collect(mut reader: ShardReader, count: usize) -> JoinHandle<Vec<String>> {
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while seen.len() < count {
                let batch = reader.next().await.expect("the shard reads");
                seen.extend(data(&batch.records));
            }
            seen
        })
    }

    /// GetRecords calls of `readers` readers of one shard from the horizon, while 20 records
    /// arrive 300 ms apart; each reader gets every record once, in order.
    async fn calls_while_reading(readers: usize) -> u32 {
        let shard = TestShard::new();
        let reads = SharedReads::new(shard.client());
        let mut tasks = Vec::new();
        for n in 0..readers {
            tasks.push(collect(
                open(&reads, &format!("t{n}"), StartAt::Horizon).await,
                20,
            ));
        }
        let expected: Vec<String> = (0..20).map(|i| format!("r{i}")).collect();
        for record in &expected {
            shard.put(record);
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        for task in tasks {
            assert_eq!(task.await.expect("the reader ran"), expected);
        }
        shard.get_records()
    }

    #[tokio::test(start_paused = true)]
    async fn readers_at_one_position_share_each_read() {
        let alone = calls_while_reading(1).await;
        let together = calls_while_reading(50).await;
        assert!(
            together <= alone + alone / 2,
            "50 readers made {together} GetRecords, one alone {alone}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_dropped_while_waiting_leaves_the_read_to_the_others() {
        let shard = TestShard::new();
        let reads = SharedReads::new(shard.client());
        shard.set_open(false);
        let first = open(&reads, "a", StartAt::Horizon).await;
        // Its read is under way, held by the shard.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(shard.get_records(), 1);
        let second = open(&reads, "b", StartAt::Horizon).await;
        assert_eq!(
            shard.get_shard_iterator(),
            1,
            "the second took the read's iterator"
        );
        let waiting = collect(second, 1);
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(first);
        shard.put("r0");
        shard.set_open(true);
        assert_eq!(waiting.await.expect("the reader ran"), ["r0"]);
        assert_eq!(shard.get_records(), 1, "one read for both");
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_a_little_behind_is_handed_the_kept_answer() {
        let shard = TestShard::new();
        let reads = SharedReads::new(shard.client());
        for i in 0..3 {
            shard.put(&format!("r{i}"));
        }
        let mut ahead = open(&reads, "a", StartAt::Horizon).await;
        let mut behind = open(&reads, "b", StartAt::Horizon).await;
        let first = ahead.next().await.expect("reads");
        let calls = shard.get_records();
        // The one behind asks two seconds later: the answer is still kept.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let later = behind.next().await.expect("reads");
        assert_eq!(data(&later.records).collect::<Vec<_>>(), ["r0", "r1", "r2"]);
        assert_eq!(data(&first.records).count(), 3);
        assert!(
            shard.get_records() <= calls + 1,
            "{} calls: at most the read-ahead of the one ahead",
            shard.get_records()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_opened_at_the_tip_joins_a_read_that_just_reached_it() {
        let shard = TestShard::new();
        let reads = SharedReads::new(shard.client());
        shard.put("old");
        let first = collect(open(&reads, "a", StartAt::Latest).await, 2);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let second = collect(open(&reads, "b", StartAt::Latest).await, 2);
        assert_eq!(
            shard.get_shard_iterator(),
            1,
            "the second joined the first's read"
        );
        shard.put("new-0");
        shard.put("new-1");
        assert_eq!(first.await.expect("ran"), ["new-0", "new-1"]);
        assert_eq!(second.await.expect("ran"), ["new-0", "new-1"]);
    }

    #[tokio::test(start_paused = true)]
    async fn throttles_are_waited_out_and_never_end_a_reader() {
        let shard = TestShard::new();
        let reads = SharedReads::new(shard.client());
        let reader = open(&reads, "a", StartAt::Horizon).await;
        shard.throttle(30);
        shard.put("r0");
        assert_eq!(collect(reader, 1).await.expect("ran"), ["r0"]);
        assert!(shard.get_records() > 30, "{}", shard.get_records());
    }

    /// Batches the reader `late` takes in the last 10 s of 30 s of records arriving 100 ms
    /// apart, after pausing 10 s early on; beside it, with `beside`, a reader that never
    /// pauses.
    async fn batches_after_falling_behind(beside: bool) -> usize {
        let shard = TestShard::new();
        let reads = SharedReads::new(shard.client());
        let start = Instant::now();
        let producer = {
            let shard = shard.clone();
            tokio::spawn(async move {
                for i in 0..300 {
                    shard.put(&format!("r{i}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let steady = if beside {
            Some(collect(open(&reads, "a", StartAt::Horizon).await, 300))
        } else {
            None
        };
        let mut late = open(&reads, "b", StartAt::Horizon).await;
        let mut seen = 0;
        let mut counted = 0;
        while seen < 300 {
            let batch = late.next().await.expect("reads");
            seen += batch.records.len();
            if seen >= 5 && seen - batch.records.len() < 5 {
                tokio::time::sleep(KEPT_FOR * 2).await;
            }
            if start.elapsed() >= Duration::from_secs(20) {
                counted += 1;
            }
        }
        producer.await.expect("produced");
        if let Some(steady) = steady {
            assert_eq!(steady.await.expect("ran").len(), 300);
        }
        counted
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_fell_behind_steps_back_into_the_shared_reads() {
        let alone = batches_after_falling_behind(false).await;
        let beside = batches_after_falling_behind(true).await;
        assert!(
            beside * 5 >= alone * 4,
            "after catching up it takes {beside} batches, {alone} when alone"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn readers_opened_together_at_the_tip_take_one_iterator() {
        let shard = TestShard::new();
        let reads = Arc::new(SharedReads::new(shard.client()));
        let opening: Vec<_> = (0..50)
            .map(|n| {
                let reads = reads.clone();
                tokio::spawn(async move {
                    let reader = open(&reads, &format!("t{n}"), StartAt::Latest).await;
                    collect(reader, 1).await.expect("ran")
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        shard.put("r0");
        for reader in opening {
            assert_eq!(reader.await.expect("ran"), ["r0"]);
        }
        assert_eq!(shard.get_shard_iterator(), 1);
        assert!(shard.get_records() <= 5, "{} reads", shard.get_records());
    }
}
