//! Chaos: three `ruststream` processes share the four shards of a stream while a producer writes
//! numbered records without pause. Processes are killed with `kill -9` at random points (also
//! 50-300 ms after a burst, in the middle of a batch), restarted with the same or a new owner
//! id, and a shard is split mid-run. The run must show:
//!
//! - every record handled at least once;
//! - no stored checkpoint ever past a record that was not handled by then;
//! - a record handled twice only when the process that first handled it was killed;
//! - per partition key, records first handled in the order they were written;
//! - a killed process's shards read again within the lease duration and one shard sync;
//! - a second tenant (`recheck`) reading the same stream and making counted copies of its own:
//!   no copy of its is ever handled by the first tenant, and it handles its own.
//!
//! `RUSTSTREAM_CHAOS_SCALE=N` makes it N times longer (records and kills);
//! `RUSTSTREAM_CHAOS_SEED` replays a run. The figures are printed at the end.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use ruststream_common::sync::lock;
use ruststream_kinesis::{DynamoLeaseStore, LeaseStore};
use ruststream_tests::binary;
use ruststream_tests::fixture::Fixture;
use ruststream_tests::guests;
use serde_json::json;

const LEASE_TTL_MS: u64 = 3_000;
const SHARD_SYNC_MS: u64 = 1_000;
/// Time a restarted or surviving process needs on top of TTL + sync on a loaded machine: a
/// first read, and the record's call.
const TAKEOVER_SLACK_MS: u64 = 4_000;
/// What a takeover by enhanced fan-out adds: the server ends the killed holder's subscription
/// only once it sees the connection gone (1-3 s on kinesis-local), the new holder retries its
/// `SubscribeToShard` at most once a second, and a holder restarted and killed again before
/// that starts the wait over.
const FAN_OUT_SLACK_MS: u64 = 5_000;
const HOSTS: usize = 3;
const KEYS: u64 = 32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_record_is_lost_under_kills_restarts_and_a_split() -> anyhow::Result<()> {
    chaos("polling", "chaos").await
}

/// The same run with the settled tenant reading by enhanced fan-out: its subscriptions are
/// handed over by kills (the consumer still subscribed elsewhere is waited out) and follow the
/// split from the parent's last event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_record_is_lost_under_kills_restarts_and_a_split_reading_by_fan_out()
-> anyhow::Result<()> {
    chaos("fan-out", "chaos-fan-out").await
}

/// The chaos run, the `good` tenant reading by `read`, in a fixture named `name`.
async fn chaos(read: &str, name: &str) -> anyhow::Result<()> {
    let scale: u64 = env_number("RUSTSTREAM_CHAOS_SCALE").unwrap_or(1).max(1);
    let seed = env_number("RUSTSTREAM_CHAOS_SEED").unwrap_or_else(now_ms);
    let mut random = Random(seed | 1);
    let records = 1_500 * scale;

    let fixture = Fixture::builder(&format!("{name}-{seed}"))
        .stream("ledger", 4)
        .dynamo()
        .start()
        .await?;
    let client = fixture.client().clone();
    let config = fixture.tenants(&format!(
        "[host]\nlease_store = \"dynamodb\"\ncreate_lease_table = true\n\n\
         [[tenants]]\nname = \"good\"\ncomponents = [\"{}\"]\nsubscribe = [\"ledger\"]\nread = \"{read}\"\n\n\
         [[tenants]]\nname = \"other\"\ncomponents = [\"{}\"]\nsubscribe = [\"ledger\"]\n",
        guests::SETTLEMENT.path().display(),
        guests::RECHECK.path().display(),
    ))?;
    // A fleet of its own rather than the fixture's host: hosts killed with `kill -9` and
    // restarted under the same owner, each with its own state directory.
    let mut fleet = Fleet {
        dir: fixture.dir().to_owned(),
        config,
        kinesis: fixture.kinesis.endpoint(),
        dynamo: fixture.dynamo().endpoint(),
        instances: Vec::new(),
    };
    for host in 0..HOSTS {
        fleet.start(&format!("h{host}"))?;
    }
    // The subscription starts at the tip: produce once every shard is open somewhere.
    let store = fixture.lease_store("ruststream-good-ledger").await;
    let other = fixture.lease_store("ruststream-other-recheck").await;
    let open = ruststream_tests::wait::eventually_async(Duration::from_secs(60), async || {
        let mut open = 0;
        for store in [&store, &other] {
            let rows = store.list().await.unwrap_or_default();
            open += rows
                .iter()
                .filter(|r| r.owner.is_some() && r.checkpoint.is_some())
                .count();
        }
        open == 8
    })
    .await;
    anyhow::ensure!(
        open,
        "the hosts never opened the four shards for both tenants"
    );

    let produced: Arc<Mutex<Vec<Produced>>> = Arc::default();
    let producer = tokio::spawn(produce(client.clone(), records, produced.clone()));
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let sampler = tokio::spawn(sample(store, samples.clone()));

    // Kills at random points, a split on the way.
    let kills = 6 * scale;
    let mut split = false;
    for kill in 0..kills {
        // The chaos schedule's pace (this sleep and the two below), not a wait.
        tokio::time::sleep(Duration::from_millis(random.between(1_200, 2_500))).await;
        if !split && kill >= kills / 3 {
            split_a_shard(&client).await?;
            split = true;
        }
        // Mid-batch: a little after the latest burst.
        tokio::time::sleep(Duration::from_millis(random.between(50, 300))).await;
        let victim = random.between(0, HOSTS as u64) as usize;
        fleet.kill(victim)?;
        tokio::time::sleep(Duration::from_millis(random.between(300, 1_500))).await;
        let owner = if random.between(0, 2) == 0 {
            format!("h{victim}")
        } else {
            format!("h{victim}-r{kill}")
        };
        fleet.restart(victim, &owner)?;
    }
    producer.await??;

    // Every record handled, then a graceful stop.
    let produced = lock(&produced).clone();
    let all_handled = ruststream_tests::wait::eventually(Duration::from_secs(120), || {
        let booked: BTreeSet<u64> = fleet.bookings().iter().map(|b| b.id).collect();
        produced.iter().all(|p| booked.contains(&p.id))
    })
    .await;
    // The second tenant has looked twice at every entry it asked a second look at.
    let rechecked = ruststream_tests::wait::eventually(Duration::from_secs(60), || {
        not_looked_at_again(&produced, &fleet.looks()).is_empty()
    })
    .await;
    fleet.stop_all()?;
    sampler.abort();
    let bookings = fleet.bookings();
    let samples = lock(&samples).clone();
    let report = Report::of(&produced, &bookings, &samples, &fleet.instances);
    report.print(seed);
    assert!(all_handled, "never handled: {:?}", report.missing);
    let slack = match read {
        "fan-out" => TAKEOVER_SLACK_MS + FAN_OUT_SLACK_MS,
        _ => TAKEOVER_SLACK_MS,
    };
    report.assert_holds(slack);
    let missed = not_looked_at_again(&produced, &fleet.looks());
    assert!(
        rechecked,
        "the second tenant never got these copies back: {missed:?}"
    );
    assert_copies_stay_with_their_tenant(&client, &bookings, &fleet.looks()).await
}

/// The entries the second tenant asks to see again (every fifth and every seventh) that it has
/// not seen a second time.
fn not_looked_at_again(produced: &[Produced], looks: &[Look]) -> Vec<u64> {
    let again: BTreeSet<u64> = looks
        .iter()
        .filter(|look| look.attempt > 1)
        .map(|look| look.id)
        .collect();
    (produced.iter().map(|p| p.id))
        .filter(|id| (id % 5 == 0 || id % 7 == 0) && !again.contains(id))
        .collect()
}

/// No record that is a copy of the second tenant's was booked by the first, and every record
/// the second looked at again was a copy of its own.
async fn assert_copies_stay_with_their_tenant(
    client: &aws_sdk_kinesis::Client,
    bookings: &[Booking],
    looks: &[Look],
) -> anyhow::Result<()> {
    let stream = ruststream_tests::e2e::read_all(client, "ledger").await?;
    let copies: BTreeSet<&str> = stream
        .iter()
        .filter(|r| {
            r.envelope()
                .copy
                .is_some_and(|copy| copy.owner.tenant == "other")
        })
        .map(|r| r.sequence_number.as_str())
        .collect();
    assert!(!copies.is_empty(), "the second tenant made no copies");
    let foreign: Vec<&Booking> = bookings
        .iter()
        .filter(|b| copies.contains(b.sequence.as_str()))
        .collect();
    assert!(
        foreign.is_empty(),
        "the first tenant booked copies of the second's: {foreign:?}"
    );
    let strays: Vec<&Look> = looks
        .iter()
        .filter(|look| look.attempt > 1 && !copies.contains(look.sequence.as_str()))
        .collect();
    assert!(
        strays.is_empty(),
        "second looks at records that are not its copies: {strays:?}"
    );
    println!(
        "chaos: {} copies of the second tenant, none booked by the first",
        copies.len()
    );
    Ok(())
}

/// A record as written: its id, key, where it landed, and when.
#[derive(Debug, Clone)]
struct Produced {
    id: u64,
    key: String,
    shard: String,
    sequence: String,
}

/// A record handled by a host process, as its log says.
#[derive(Debug, Clone)]
struct Booking {
    id: u64,
    shard: String,
    sequence: String,
    at_ms: u64,
    instance: usize,
}

/// A record the second tenant looked at, as its log says.
#[derive(Debug, Clone)]
struct Look {
    id: u64,
    attempt: u64,
    sequence: String,
}

/// A checkpoint as read from the lease table.
#[derive(Debug, Clone)]
struct Sample {
    at_ms: u64,
    shard: String,
    sequence: String,
}

/// One run of a host process.
struct Instance {
    slot: usize,
    log: PathBuf,
    child: Option<Child>,
    killed_at_ms: Option<u64>,
}

struct Fleet {
    dir: PathBuf,
    config: PathBuf,
    kinesis: String,
    dynamo: String,
    instances: Vec<Instance>,
}

impl Fleet {
    fn start(&mut self, owner: &str) -> anyhow::Result<()> {
        let slot = self.instances.iter().filter(|i| i.child.is_some()).count();
        self.spawn(slot, owner)
    }

    fn spawn(&mut self, slot: usize, owner: &str) -> anyhow::Result<()> {
        let log = self
            .dir
            .join(format!("{}-{owner}.log", self.instances.len()));
        let child = Command::new(binary())
            .args(["run", "--config"])
            .arg(&self.config)
            .args(["--kinesis-endpoint", &self.kinesis])
            .args(["--dynamodb-endpoint", &self.dynamo])
            .args(["--region", "us-east-1", "--owner-id", owner])
            // One state directory per host (a host locks its own): a restart finds its own.
            .env(
                "RUSTSTREAM_STATE_DIR",
                self.dir.join(format!("state-{owner}")),
            )
            .args([
                "--admin-addr",
                "127.0.0.1:0",
                "--metrics-addr",
                "127.0.0.1:0",
            ])
            .args(["--poll-interval", "200ms", "--checkpoint-interval", "200ms"])
            .args(["--lease-ttl", &format!("{LEASE_TTL_MS}ms")])
            .args(["--renew-interval", "500ms"])
            .args(["--shard-sync-interval", &format!("{SHARD_SYNC_MS}ms")])
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log)?)
            .stderr(Stdio::null())
            .spawn()?;
        self.instances.push(Instance {
            slot,
            log,
            child: Some(child),
            killed_at_ms: None,
        });
        Ok(())
    }

    /// `kill -9` of the live process in `slot`.
    fn kill(&mut self, slot: usize) -> anyhow::Result<()> {
        let Some(instance) = self
            .instances
            .iter_mut()
            .rev()
            .find(|i| i.slot == slot && i.child.is_some())
        else {
            return Ok(());
        };
        if let Some(mut child) = instance.child.take() {
            child.kill()?;
            child.wait()?;
            instance.killed_at_ms = Some(now_ms());
        }
        Ok(())
    }

    fn restart(&mut self, slot: usize, owner: &str) -> anyhow::Result<()> {
        self.spawn(slot, owner)
    }

    /// SIGTERM to every live process, and wait for each.
    fn stop_all(&mut self) -> anyhow::Result<()> {
        for instance in &mut self.instances {
            if let Some(mut child) = instance.child.take() {
                Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status()?;
                child.wait()?;
            }
        }
        Ok(())
    }

    fn bookings(&self) -> Vec<Booking> {
        let mut all = Vec::new();
        for (instance, run) in self.instances.iter().enumerate() {
            all.extend(read_bookings(&run.log, instance));
        }
        all
    }

    fn looks(&self) -> Vec<Look> {
        self.instances
            .iter()
            .flat_map(|run| read_looks(&run.log))
            .collect()
    }
}

/// The second tenant's `looked` lines: `entry.id`, `attempt` and the record's sequence.
fn read_looks(log: &Path) -> Vec<Look> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|line| line.contains(" looked "))
        .filter_map(|line| {
            Some(Look {
                id: number_after(line, "entry.id=")?,
                attempt: number_after(line, "attempt=")?,
                sequence: between(line, "sequence=\"", "\"")?.to_owned(),
            })
        })
        .collect()
}

/// The `booked` lines of a host's log: timestamp, shard and `entry.id`.
fn read_bookings(log: &Path, instance: usize) -> Vec<Booking> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|line| line.contains(" booked "))
        .filter_map(|line| {
            let at_ms = parse_timestamp(line.split_whitespace().next()?)?;
            let shard = between(line, "shard=\"", "\"")?.to_owned();
            let sequence = between(line, "sequence=\"", "\"")?.to_owned();
            let id = between(line, "entry.id=", " ")?.parse().ok()?;
            Some(Booking {
                id,
                shard,
                sequence,
                at_ms,
                instance,
            })
        })
        .collect()
}

/// A lease of the first tenant taken by a host process, as its log says.
struct Take {
    shard: String,
    at_ms: u64,
    instance: usize,
}

/// The first tenant's `lease taken` lines of a host's log: timestamp and shard.
fn read_takes(log: &Path, instance: usize) -> Vec<Take> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|line| line.contains("tenant=good") && line.contains(" lease taken "))
        .filter_map(|line| {
            let at_ms = parse_timestamp(line.split_whitespace().next()?)?;
            let shard = between(line, "lease=ledger:", " ")?.to_owned();
            Some(Take {
                shard,
                at_ms,
                instance,
            })
        })
        .collect()
}

/// The decimal number right after the first `key` in `line`.
fn number_after(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().ok()
}

fn between<'a>(line: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = &line[line.find(start)? + start.len()..];
    Some(rest.split(end).next().unwrap_or(rest))
}

/// Milliseconds since the epoch of a `2026-12-01T04:35:02.080684Z` timestamp.
fn parse_timestamp(text: &str) -> Option<u64> {
    let (date, time) = text.trim_end_matches('Z').split_once('T')?;
    let mut ymd = date.split('-').map(|n| n.parse::<i64>().ok());
    let (year, month, day) = (ymd.next()??, ymd.next()??, ymd.next()??);
    let (hms, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let mut parts = hms.split(':').map(|n| n.parse::<i64>().ok());
    let (hour, minute, second) = (parts.next()??, parts.next()??, parts.next()??);
    let millis: i64 = format!("{fraction:0<3}")[..3].parse().ok()?;
    // Days since 1970-01-01 (Howard Hinnant's days_from_civil).
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis;
    u64::try_from(ms).ok()
}

/// Writes `records` numbered records in bursts, keys spread over the stream.
async fn produce(
    client: aws_sdk_kinesis::Client,
    records: u64,
    produced: Arc<Mutex<Vec<Produced>>>,
) -> anyhow::Result<()> {
    const BURST: u64 = 25;
    for first in (0..records).step_by(BURST as usize) {
        let ids: Vec<u64> = (first..records.min(first + BURST)).collect();
        let entries = ids
            .iter()
            .map(|id| {
                PutRecordsRequestEntry::builder()
                    .partition_key(format!("k{}", id % KEYS))
                    .data(Blob::new(
                        json!({"id": id, "amount": 1 + id % 7}).to_string(),
                    ))
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let out = client
            .put_records()
            .stream_name("ledger")
            .set_records(Some(entries))
            .send()
            .await?;
        let mut put = Vec::with_capacity(ids.len());
        for (id, result) in ids.iter().zip(out.records()) {
            let (Some(shard), Some(sequence)) = (result.shard_id(), result.sequence_number())
            else {
                anyhow::bail!("record {id} was not put: {result:?}");
            };
            put.push(Produced {
                id: *id,
                key: format!("k{}", id % KEYS),
                shard: shard.to_owned(),
                sequence: sequence.to_owned(),
            });
        }
        lock(&produced).extend(put);
        // The producer's pace, not a wait.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Reads every checkpoint of the lease table, again and again.
async fn sample(store: DynamoLeaseStore, samples: Arc<Mutex<Vec<Sample>>>) {
    loop {
        if let Ok(rows) = store.list().await {
            // The checkpoints were stored by the time the listing answered: a record they cover
            // must have been handled by then.
            let at_ms = now_ms();
            let mut samples = lock(&samples);
            for row in rows {
                let Some(checkpoint) = row
                    .checkpoint
                    .filter(|c| c.bytes().all(|b| b.is_ascii_digit()))
                else {
                    continue;
                };
                let shard = row.key.trim_start_matches("ledger:").to_owned();
                samples.push(Sample {
                    at_ms,
                    shard,
                    sequence: checkpoint,
                });
            }
        }
        // The sampler's period, not a wait.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Splits an open shard at the middle of its hash key range.
async fn split_a_shard(client: &aws_sdk_kinesis::Client) -> anyhow::Result<()> {
    let shards = client.list_shards().stream_name("ledger").send().await?;
    let Some(shard) = shards.shards().iter().find(|s| {
        s.sequence_number_range()
            .is_some_and(|r| r.ending_sequence_number().is_none())
    }) else {
        return Ok(());
    };
    let range = shard.hash_key_range();
    let (low, high): (u128, u128) = (
        range.map_or(Ok(0), |r| r.starting_hash_key().parse())?,
        range.map_or(Ok(u128::MAX), |r| r.ending_hash_key().parse())?,
    );
    let middle = low + (high - low) / 2 + 1;
    client
        .split_shard()
        .stream_name("ledger")
        .shard_to_split(shard.shard_id())
        .new_starting_hash_key(middle.to_string())
        .send()
        .await?;
    Ok(())
}

/// What the run came to.
struct Report {
    records: usize,
    kills: usize,
    missing: Vec<u64>,
    duplicates: usize,
    /// Duplicates whose first handling was by a process that was not killed afterwards.
    unexplained_duplicates: Vec<u64>,
    /// Checkpoints stored past a record not handled by then: (shard, checkpoint, record id).
    premature: Vec<(String, String, u64)>,
    /// Records of one key first handled out of their order: (key, earlier id, later id).
    out_of_order: Vec<(String, u64, u64)>,
    slowest_takeover_ms: u64,
}

impl Report {
    fn of(
        produced: &[Produced],
        bookings: &[Booking],
        samples: &[Sample],
        instances: &[Instance],
    ) -> Self {
        let mut first: HashMap<u64, &Booking> = HashMap::new();
        let mut times: HashMap<u64, usize> = HashMap::new();
        for booking in bookings {
            *times.entry(booking.id).or_default() += 1;
            let earliest = first.entry(booking.id).or_insert(booking);
            if booking.at_ms < earliest.at_ms {
                *earliest = booking;
            }
        }
        let killed = |instance: usize, after: u64| {
            instances[instance]
                .killed_at_ms
                .is_some_and(|killed| killed >= after)
        };
        let missing: Vec<u64> = produced
            .iter()
            .filter(|p| !first.contains_key(&p.id))
            .map(|p| p.id)
            .collect();
        let duplicated: Vec<u64> = times
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(id, _)| *id)
            .collect();
        let unexplained_duplicates = duplicated
            .iter()
            .copied()
            .filter(|id| first.get(id).is_some_and(|b| !killed(b.instance, b.at_ms)))
            .collect();
        Self {
            records: produced.len(),
            kills: instances
                .iter()
                .filter(|i| i.killed_at_ms.is_some())
                .count(),
            missing,
            duplicates: duplicated.len(),
            unexplained_duplicates,
            premature: premature(produced, samples, &first),
            out_of_order: out_of_order(produced, &first),
            slowest_takeover_ms: slowest_takeover(produced, bookings, instances),
        }
    }

    fn print(&self, seed: u64) {
        println!(
            "chaos (seed {seed}): {} records, {} kills, {} handled twice, slowest takeover {} ms",
            self.records, self.kills, self.duplicates, self.slowest_takeover_ms
        );
    }

    /// Every property holds, and each takeover within the lease, a shard sync and `slack_ms`.
    fn assert_holds(&self, slack_ms: u64) {
        assert!(
            self.premature.is_empty(),
            "checkpoints past unhandled records: {:?}",
            self.premature
        );
        assert!(
            self.unexplained_duplicates.is_empty(),
            "handled twice with no kill to explain it: {:?}",
            self.unexplained_duplicates
        );
        assert!(
            self.out_of_order.is_empty(),
            "out of key order: {:?}",
            self.out_of_order
        );
        let bound = LEASE_TTL_MS + SHARD_SYNC_MS + slack_ms;
        assert!(
            self.slowest_takeover_ms <= bound,
            "takeover took {} ms",
            self.slowest_takeover_ms
        );
    }
}

/// Checkpoints that were stored while a record at or before them was not yet handled.
fn premature(
    produced: &[Produced],
    samples: &[Sample],
    first: &HashMap<u64, &Booking>,
) -> Vec<(String, String, u64)> {
    let mut by_shard: BTreeMap<&str, Vec<&Produced>> = BTreeMap::new();
    for record in produced {
        by_shard.entry(&record.shard).or_default().push(record);
    }
    let mut found = Vec::new();
    for sample in samples {
        let records = by_shard
            .get(sample.shard.as_str())
            .map_or(&[][..], Vec::as_slice);
        for record in records {
            let covered = sequence_le(&record.sequence, &sample.sequence);
            let handled_by_then = first
                .get(&record.id)
                .is_some_and(|b| b.at_ms <= sample.at_ms);
            if covered && !handled_by_then {
                found.push((sample.shard.clone(), sample.sequence.clone(), record.id));
            }
        }
    }
    found
}

/// Sequence numbers compare as big decimals: by length, then digit by digit.
fn sequence_le(a: &str, b: &str) -> bool {
    (a.len(), a) <= (b.len(), b)
}

/// Pairs of records of one key whose first handling is out of the order they were written.
fn out_of_order(produced: &[Produced], first: &HashMap<u64, &Booking>) -> Vec<(String, u64, u64)> {
    let mut by_key: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for record in produced {
        by_key.entry(&record.key).or_default().push(record.id);
    }
    let mut found = Vec::new();
    for (key, ids) in by_key {
        for pair in ids.windows(2) {
            let (Some(a), Some(b)) = (first.get(&pair[0]), first.get(&pair[1])) else {
                continue;
            };
            if b.at_ms < a.at_ms {
                found.push((key.to_owned(), pair[0], pair[1]));
            }
        }
    }
    found
}

/// For every kill, the time until each shard the killed process was reading is handled again
/// by another process (for shards that got records after the kill). A takeover cut short by
/// a second kill (the process that took the shard's lease killed before it handled a record
/// of it) is counted from that second kill: it is the second kill's takeover.
fn slowest_takeover(produced: &[Produced], bookings: &[Booking], instances: &[Instance]) -> u64 {
    let takes: Vec<Take> = (instances.iter().enumerate())
        .flat_map(|(instance, run)| read_takes(&run.log, instance))
        .collect();
    let shards_with_records: BTreeSet<&str> = produced.iter().map(|p| p.shard.as_str()).collect();
    let mut slowest = 0;
    for (victim, instance) in instances.iter().enumerate() {
        let Some(killed_at) = instance.killed_at_ms else {
            continue;
        };
        let held: BTreeSet<&str> = bookings
            .iter()
            .filter(|b| {
                b.instance == victim && b.at_ms + 2_000 >= killed_at && b.at_ms <= killed_at
            })
            .map(|b| b.shard.as_str())
            .filter(|s| shards_with_records.contains(s))
            .collect();
        for shard in held {
            let next = bookings
                .iter()
                .filter(|b| b.shard == shard && b.instance != victim && b.at_ms >= killed_at)
                .map(|b| b.at_ms)
                .min();
            let Some(next) = next else {
                continue;
            };
            let cut_short = (takes.iter())
                .filter(|t| t.shard == shard && t.at_ms >= killed_at && t.at_ms <= next)
                .filter_map(|t| {
                    let killed = instances[t.instance].killed_at_ms?;
                    let handled = bookings
                        .iter()
                        .any(|b| b.instance == t.instance && b.shard == shard && b.at_ms <= killed);
                    (killed >= t.at_ms && killed <= next && !handled).then_some(killed)
                })
                .max();
            slowest = slowest.max(next - cut_short.unwrap_or(killed_at).max(killed_at));
        }
    }
    slowest
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

/// xorshift64: enough randomness for choosing kill points, and replayable from its seed.
struct Random(u64);

impl Random {
    /// A number in `low..high`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        low + self.0 % (high - low).max(1)
    }
}

#[test]
fn timestamps_of_the_log_are_read_as_epoch_milliseconds() {
    assert_eq!(parse_timestamp("1970-01-01T00:00:01.5Z"), Some(1_500));
    assert_eq!(
        parse_timestamp("2026-12-01T04:35:02.080684Z"),
        Some(1_796_099_702_080)
    );
}
