//! A neighbour tenant and the CPU burners beside it, for the CPU-isolation tests and
//! benchmark: the tenants-file entries, the neighbour's put → handled latencies (which its
//! `burner` component logs), its calls sized in CPU by what the host counts, and the CPU each
//! tenant got.
//!
//! The neighbour runs `burner` on `work` (each record says how many rounds of a mixing loop to
//! run); spinners run `hostile-spin` on `hostile`, and spin until their deadline stops them.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use anyhow::Result;
use aws_sdk_kinesis::primitives::Blob;
use serde_json::json;

use crate::fixture::{BinaryHost, Fixture};
use crate::guests;
use crate::scrape::Scrape;
use crate::wait::poll_for;

/// How long a batch of the neighbour's records may take to be handled.
const HANDLED_WITHIN: Duration = Duration::from_secs(240);

/// The neighbour's entry: `burner` on `work`, each record under `deadline_ms`, its traps
/// becoming copies (two attempts) and then dead letters on `work.dead`.
pub fn neighbour(deadline_ms: u64) -> String {
    format!(
        r#"
        [[tenants]]
        name = "neighbour"
        components = ["{burner}"]
        subscribe = ["work"]
        publish = ["work", "work.dead", "work.out"]
        limits = {{ call_deadline = "{deadline_ms}ms" }}
        "#,
        burner = guests::BURNER.path().display(),
    )
}

/// A tenant `name` spinning to its `deadline_ms` on every record of `hostile`, never
/// quarantined for it (so it goes on spinning).
pub fn spinner(name: &str, deadline_ms: u64) -> String {
    format!(
        r#"
        [[tenants]]
        name = "{name}"
        components = ["{spin}"]
        subscribe = ["hostile"]
        quarantine_after = 1000000
        limits = {{ call_deadline = "{deadline_ms}ms" }}
        "#,
        spin = guests::HOSTILE_SPIN.path().display(),
    )
}

/// `ruststream ARGS` against `host`'s admin API: whether it succeeded, and what it said.
///
/// # Errors
/// The host has no admin API, or the binary cannot be run.
pub async fn verb(host: &BinaryHost, args: &[&str]) -> Result<(bool, String)> {
    let admin = format!("http://{}", host.admin_addr().await?);
    let state = host.state_dir().display().to_string();
    crate::process::verb(&[args, &["--admin", &admin, "--state-dir", &state]].concat())
}

/// Deploys `shadow` as the shadow of the neighbour's `burner` app.
///
/// # Errors
/// The verb fails.
pub async fn deploy_shadow(host: &BinaryHost, shadow: crate::Guest) -> Result<()> {
    let path = shadow.path().display().to_string();
    let (ok, said) = verb(
        host,
        &["deploy", "neighbour", &path, "--name", "burner", "--shadow"],
    )
    .await?;
    anyhow::ensure!(ok, "deploy --shadow: {said}");
    Ok(())
}

/// The put → handled latencies (ms) of the neighbour's records `ids`, in id order, once every
/// one is handled.
///
/// # Errors
/// Not all of them within four minutes; the error holds the log's end.
pub async fn latencies(host: &BinaryHost, ids: Range<u64>) -> Result<Vec<u64>> {
    latencies_across(&[host], ids).await
}

/// [`latencies`] of records handled by any of `hosts` (a fleet sharing the neighbour's
/// shards).
///
/// # Errors
/// Not all of them within four minutes; the error holds the end of each host's log.
pub async fn latencies_across(hosts: &[&BinaryHost], ids: Range<u64>) -> Result<Vec<u64>> {
    let wanted = ids.clone().count();
    let found = poll_for(HANDLED_WITHIN, async || {
        let log: String = hosts.iter().map(|host| host.output()).collect();
        let mut by_id = BTreeMap::new();
        for line in log.lines().filter(|l| l.contains("burned")) {
            if let (Some(id), Some(latency)) = (field(line, "id"), field(line, "latency_ms"))
                && ids.contains(&id)
            {
                by_id.insert(id, latency);
            }
        }
        (by_id.len() == wanted).then(|| by_id.into_values().collect::<Vec<_>>())
    })
    .await;
    found.ok_or_else(|| {
        let tails: Vec<String> = hosts.iter().map(|host| tail(&host.output())).collect();
        anyhow::anyhow!(
            "records {ids:?} were not all handled: {}",
            tails.join("\n---\n")
        )
    })
}

/// The number of field `name` in a guest's log line (`fields=id=3 latency_ms=12`).
fn field(line: &str, name: &str) -> Option<u64> {
    let key = format!("{name}=");
    let at = line
        .match_indices(&key)
        .find(|(at, _)| matches!(line[..*at].chars().last(), Some(' ' | '=')))?
        .0
        + key.len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The last 60 lines of `log`.
pub fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

/// The `percent` percentile of `values` (nearest rank; 0 when there are none).
pub fn percentile(values: &[u64], percent: usize) -> u64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted.get(rank - 1).copied().unwrap_or(0)
}

/// The CPU seconds `tenant`'s calls of `role` (`live`, `shadow`) ran, as the host counts them.
pub fn cpu_seconds(scrape: &Scrape, tenant: &str, role: &str) -> f64 {
    scrape.sum(
        "ruststream_tenant_cpu_seconds_total",
        &[("tenant", tenant), ("role", role)],
    )
}

/// Rounds of `burner`'s loop that take `cpu` of CPU on this machine: one record (id `id`) of a
/// known number of rounds, sized by the CPU the host says the neighbour's call used.
///
/// # Errors
/// The probe is not handled, or the host counted no CPU for it.
pub async fn rounds_for(
    fixture: &Fixture,
    host: &BinaryHost,
    cpu: Duration,
    id: u64,
) -> Result<u64> {
    const PROBE: u64 = 50_000_000;
    let before = cpu_seconds(&host.scrape().await?, "neighbour", "live");
    fixture
        .put("work", &json!({"id": id, "work": PROBE}))
        .await?;
    latencies(host, id..id + 1).await?;
    let used = cpu_seconds(&host.scrape().await?, "neighbour", "live") - before;
    anyhow::ensure!(used > 0.0, "the host counted no CPU for the probe");
    Ok((PROBE as f64 * cpu.as_secs_f64() / used) as u64)
}

/// Puts the neighbour's records `ids` of `rounds` each on `work`, one every `every`, each
/// under its own partition key (spread over the stream's shards); returns their latencies.
///
/// # Errors
/// A put fails, or the records are not all handled.
pub async fn steady(
    fixture: &Fixture,
    host: &BinaryHost,
    ids: Range<u64>,
    rounds: u64,
    every: Duration,
) -> Result<Vec<u64>> {
    for id in ids.clone() {
        let value = json!({"id": id, "work": rounds});
        fixture
            .client()
            .put_record()
            .stream_name("work")
            .partition_key(id.to_string())
            .data(Blob::new(serde_json::to_vec(&value)?))
            .send()
            .await?;
        tokio::time::sleep(every).await;
    }
    latencies(host, ids).await
}

/// Counters of the neighbour's live version that a timed-out call would move: traps, copies
/// published, dead letters.
pub fn failures(scrape: &Scrape) -> [f64; 3] {
    let of = |name: &str| scrape.sum(name, &[("tenant", "neighbour")]);
    [
        of("ruststream_traps_total"),
        of("ruststream_copies_published_total"),
        of("ruststream_dead_letters_total"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_whatever_comes_before_them() {
        let line = "INFO burned sequence=\"7\" fields=id=31 version=1 latency_ms=120";
        assert_eq!(field(line, "id"), Some(31));
        assert_eq!(field(line, "latency_ms"), Some(120));
        assert_eq!(field("a xid=3", "id"), None);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 99), 99);
        assert_eq!(percentile(&values, 50), 50);
        assert_eq!(percentile(&[5], 99), 5);
        assert_eq!(percentile(&[], 99), 0);
    }
}
