//! An app whose records say how much CPU to burn, for the CPU-isolation tests: one source,
//! one component per version (the package name picks it at compile time).
//!
//! | package        | app             | on each record of `work`                              |
//! |----------------|-----------------|-------------------------------------------------------|
//! | `burner`       | `burner` 1.0.0  | `work` rounds of a mixing loop, then `ack`            |
//! | `burner-spin`  | `burner` 2.0.0  | spins until its deadline stops it (a hostile shadow)  |
//! | `burner-flood` | `burner` 3.0.0  | publishes 2 000 records to `work.out` (past its quota) |
//!
//! Version 1 logs `burned` with the record's `id`, its `version` and `latency_ms`: from the
//! record's arrival in the stream to the end of its handling, on the host's clock. A trap
//! becomes a counted copy (two attempts, then the dead-letter stream `work.dead`), so a
//! record the host timed out shows as copies and dead letters.

use std::time::SystemTime;

use ruststream::prelude::*;
use serde::Deserialize;

/// A record of `work`.
#[derive(Debug, Deserialize)]
pub struct Job {
    pub id: u64,
    /// Rounds of the mixing loop (a few nanoseconds each).
    #[serde(default)]
    pub work: u64,
}

const VERSION: u64 = match env!("CARGO_PKG_NAME").as_bytes() {
    b"burner" => 1,
    b"burner-spin" => 2,
    b"burner-flood" => 3,
    _ => panic!("unknown burner package"),
};

const APP_VERSION: &str = match VERSION {
    1 => "1.0.0",
    2 => "2.0.0",
    _ => "3.0.0",
};

/// Burns, spins or floods, as its version does.
#[subscriber(KinesisStream::new("work"))]
async fn burn(job: &Job, ctx: &mut Context<'_>) -> HandlerOutcome {
    match VERSION {
        2 => spin(job.id),
        3 => flood(job.id),
        _ => {}
    }
    let mut state = job.id | 1;
    for _ in 0..job.work {
        // xorshift: a dependency chain the optimizer cannot shorten.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
    }
    std::hint::black_box(state);
    let latency_ms = SystemTime::now()
        .duration_since(ctx.arrival())
        .map_or(0, |d| d.as_millis() as u64);
    tracing::info!(id = job.id, version = VERSION, latency_ms, "burned");
    HandlerOutcome::ack()
}

fn spin(id: u64) -> ! {
    let mut counter = id;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

fn flood(id: u64) {
    for n in 0..2_000_u64 {
        let record = Record::new(format!("{id}/{n}").into_bytes()).partition_key("flood");
        let _ = publish("work.out", record);
    }
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("burner", APP_VERSION)).with_broker(broker, |b| {
        b.include(burn).max_attempts(2).dead_letter("work.dead");
    })
}
