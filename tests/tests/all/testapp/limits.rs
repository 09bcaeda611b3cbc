//! Limits that TestApp can show exactly: fuel, and the deadline of a spinning call.

use std::time::Duration;

use ruststream_runtime::{
    Outcome, RuntimeConfig, Tenant, TestApp,
    component::{LoadPhase, Refusal, TrapKind},
    tenant::Limits,
    testing::TestAppError,
};
use ruststream_tests::{Guest, guests};
use serde_json::json;

async fn with_fuel(guest: Guest, fuel: u64) -> Result<TestApp, TestAppError> {
    TestApp::builder(guest.path())
        .runtime(RuntimeConfig {
            fuel: true,
            // In process, as `TestApp` compiles by default: the test binary serves no worker.
            ..RuntimeConfig::in_process()
        })
        .tenant(Tenant::trusted("metered").limits(Limits {
            fuel: Some(fuel),
            call_deadline: Duration::from_secs(30),
            ..Limits::default()
        }))
        .start()
        .await
}

#[tokio::test]
async fn a_call_that_runs_out_of_fuel_is_a_failed_attempt() -> anyhow::Result<()> {
    // Enough fuel to describe itself; its handler spins until the fuel is gone.
    let mut app = with_fuel(guests::HOSTILE_SPIN, 1_000_000).await?;
    app.publish("hostile", &json!({"id": 1})).await?;
    let spin = app.subscriber("hostile")?;
    assert_eq!(spin.reports()[0].trap, Some(TrapKind::OutOfFuel));
    assert_eq!(spin.outcomes(), [Outcome::Retry]);
    Ok(())
}

#[tokio::test]
async fn loading_runs_on_the_tenants_fuel_too() -> anyhow::Result<()> {
    let Err(TestAppError::Load(error)) = with_fuel(guests::SETTLEMENT, 1_000).await else {
        panic!("1 000 units of fuel cannot describe settlement");
    };
    assert_eq!(error.phase, LoadPhase::Describe);
    assert!(matches!(&error.refusal, Refusal::Trap(f) if f.kind == TrapKind::OutOfFuel));
    Ok(())
}

#[tokio::test]
async fn enough_fuel_handles_the_record() -> anyhow::Result<()> {
    let mut app = with_fuel(guests::SETTLEMENT, 10_000_000).await?;
    app.publish("ledger", &json!({"id": 1, "amount": 5}))
        .await?;
    let book = app.subscriber("book")?;
    assert_eq!(book.outcomes(), [Outcome::Ack]);
    assert_eq!(book.reports()[0].trap, None);
    Ok(())
}

#[tokio::test]
async fn a_spinning_call_ends_at_its_deadline_and_the_instance_is_replaced() -> anyhow::Result<()> {
    let deadline = Duration::from_millis(200);
    let mut app = TestApp::builder(guests::HOSTILE_SPIN.path())
        .tenant(Tenant::trusted("evil").limits(Limits {
            call_deadline: deadline,
            ..Limits::default()
        }))
        .start()
        .await
        .expect("hostile-spin loads");
    let started = std::time::Instant::now();
    app.publish("hostile", &json!({"id": 1})).await?;
    app.publish("hostile", &json!({"id": 2})).await?;
    let spin = app.subscriber("hostile")?;
    assert_eq!(
        spin.reports().iter().map(|r| r.trap).collect::<Vec<_>>(),
        [Some(TrapKind::Deadline); 2]
    );
    assert_eq!(spin.instance_replacements(), 2);
    // Each call was cut at its deadline, not left to run.
    assert!(started.elapsed() < deadline * 10, "{:?}", started.elapsed());
    Ok(())
}
