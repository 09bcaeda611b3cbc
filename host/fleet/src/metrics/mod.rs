//! The metrics endpoint of `ruststream run`: Prometheus text at `GET /metrics`, on
//! `--metrics-addr` ([`DEFAULT_ADDR`], 127.0.0.1:9464, by default).
//!
//! Two sources make up a scrape. Events (records by outcome, traps, call durations, copies,
//! checkpoint writes, leases taken and lost, compiles, swaps, rollbacks) are counted where
//! they happen, through the `metrics` facade, into the recorder installed here. State (how far
//! behind each shard is, what it holds and since when, quarantined tenants, whether the host is
//! ready) is read from the fleet's status at scrape time (`shards`, `READY`): it is always
//! current, and a shard this host no longer reads drops out of the next scrape instead of
//! leaving a stale series behind.

mod cpu;
mod shards;

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use ruststream_kinesis::metrics::RENEWAL_LATENESS;
use ruststream_runtime::metrics::{CALL_DURATION, CALL_DURATION_BUCKETS};

/// Upper bounds of the renewal lateness buckets (s): on time is well under 10 ms; past a
/// second, the lease is at risk.
const RENEWAL_LATENESS_BUCKETS: &[f64] = &[0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

use crate::fleet::Fleet;
use crate::http_server::{self, HttpServer};

/// 1 while the host is ready (`GET /readyz` answers 200), else 0.
pub(crate) const READY: &str = "ruststream_ready";

/// Where the metrics endpoint listens unless told otherwise: loopback, port 9464.
pub const DEFAULT_ADDR: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9464));

/// How often histograms are compacted between scrapes, so that no scrape for a while cannot
/// grow them without bound.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The exposition format's content type.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Installs the Prometheus recorder as the process's metrics recorder and describes every
/// metric of the runtime and the host.
///
/// # Errors
/// When a recorder is installed already.
pub(crate) fn install() -> anyhow::Result<PrometheusHandle> {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(CALL_DURATION.to_owned()),
            CALL_DURATION_BUCKETS,
        )
        .context("the call duration buckets")?
        .set_buckets_for_metric(
            Matcher::Full(RENEWAL_LATENESS.to_owned()),
            RENEWAL_LATENESS_BUCKETS,
        )
        .context("the renewal lateness buckets")?
        .build_recorder();
    let handle = recorder.handle();
    ::metrics::set_global_recorder(recorder).context("installing the metrics recorder")?;
    ruststream_runtime::metrics::describe();
    ruststream_kinesis::metrics::describe();
    ::metrics::describe_counter!(
        crate::desired::DESIRED_STATE_CALLS,
        "Calls this host made to the fleet's desired-state table, by operation."
    );
    Ok(handle)
}

#[derive(Clone)]
struct Scrape {
    handle: PrometheusHandle,
    fleet: Fleet,
}

/// Serves `GET /metrics` on `addr` until the returned server is shut down.
///
/// # Errors
/// When `addr` cannot be bound.
pub(crate) async fn serve(
    addr: SocketAddr,
    handle: PrometheusHandle,
    fleet: Fleet,
) -> anyhow::Result<HttpServer> {
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(UPKEEP_INTERVAL);
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    let router = Router::new()
        .route("/metrics", get(metrics))
        .with_state(Scrape { handle, fleet });
    Ok(http_server::serve("metrics endpoint", addr, router).await?)
}

async fn metrics(State(scrape): State<Scrape>) -> impl IntoResponse {
    let mut text = scrape.handle.render();
    shards::render(&scrape.fleet, &mut text);
    cpu::render(&scrape.fleet.cpu_usage(), &mut text);
    readiness(&scrape.fleet, &mut text);
    ([(header::CONTENT_TYPE, TEXT_FORMAT)], text)
}

/// Appends [`READY`], from the reasons `GET /readyz` gives: an alert reads readiness from the
/// scrape it has anyway, where the admin API is off, behind TLS, or out of the scraper's reach.
fn readiness(fleet: &Fleet, out: &mut String) {
    let ready = fleet.not_ready().is_empty();
    let _ = writeln!(
        out,
        "# HELP {READY} 1 while the host is ready (GET /readyz answers 200; its body says why \
         not), else 0."
    );
    let _ = writeln!(out, "# TYPE {READY} gauge");
    let _ = writeln!(out, "{READY} {}", u8::from(ready));
}
