//! A fixture for the host's timing: each record says how long its handler takes and how it
//! ends, so tests can make slow but healthy batches, a trap at a chosen record, and delayed
//! copies.
//!
//! `pace` reads `paced` in the host's batches; `pace_singly` reads `singly` one record per call.
//! `{"id": 7}` is acked; `"sleep_ms": 10` sleeps first (a WASI clock wait, outside the guest's
//! own code); `"burn": n` computes for n rounds first (the guest's own code, no host call);
//! `"spin": true` never ends; `"panic": true` panics; `"after_ms": 1500` asks for a copy after
//! that delay on the first attempt and acks the copy; `"quiet": true` logs nothing (each
//! record logs `paced` otherwise); `"announce": true` logs `step started` as the call begins,
//! before anything else, so a test can tell that the call is under way.

use std::time::Duration;

use ruststream::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Step {
    pub id: u64,
    #[serde(default)]
    pub sleep_ms: u64,
    #[serde(default)]
    pub burn: u64,
    #[serde(default)]
    pub spin: bool,
    #[serde(default)]
    pub panic: bool,
    #[serde(default)]
    pub quiet: bool,
    #[serde(default)]
    pub after_ms: Option<u64>,
    #[serde(default)]
    pub announce: bool,
}

/// Takes the time the step asks for, then ends as it asks.
#[subscriber(KinesisStream::new("paced"))]
async fn pace(step: &Step, ctx: &mut Context<'_>) -> HandlerOutcome {
    take_step(step, ctx)
}

/// The same, one record per call (`batch(1)` on the mount): a call boundary after every record.
#[subscriber(KinesisStream::new("singly"))]
async fn pace_singly(step: &Step, ctx: &mut Context<'_>) -> HandlerOutcome {
    take_step(step, ctx)
}

fn take_step(step: &Step, ctx: &mut Context<'_>) -> HandlerOutcome {
    if step.announce {
        tracing::info!(step.id, "step started");
    }
    if step.sleep_ms > 0 {
        std::thread::sleep(Duration::from_millis(step.sleep_ms));
    }
    burn(step.burn);
    if step.spin {
        loop {
            std::hint::spin_loop();
        }
    }
    if step.panic {
        panic!("step {} panics", step.id);
    }
    if !step.quiet {
        tracing::info!(step.id, attempt = ctx.attempt(), "paced");
    }
    match step.after_ms {
        Some(ms) if ctx.attempt() == 1 => HandlerOutcome::retry_after(Duration::from_millis(ms)),
        _ => HandlerOutcome::ack(),
    }
}

/// `rounds` of arithmetic the optimizer cannot remove.
fn burn(rounds: u64) {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for round in 0..rounds {
        x = std::hint::black_box(x.rotate_left(5) ^ round).wrapping_mul(31);
    }
    std::hint::black_box(x);
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("pacer", "0.1.0")).with_broker(broker, |b| {
        b.include(pace);
        b.include(pace_singly).batch(1);
    })
}
