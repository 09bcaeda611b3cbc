//! The host embedded through the library alone: a tenants file in, its control surface out,
//! with no `ruststream` binary.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use ruststream_fleet::admin::control::{Control as _, ControlError};
use ruststream_fleet::aws::AwsOptions;
use ruststream_fleet::run::{RunOptions, RunningHost};

/// A directory of this test's own, emptied first.
fn scratch(name: &str) -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ruststream-embed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// AWS nowhere reachable: nothing here may need it (a call would fail at once, not hang).
fn no_aws() -> AwsOptions {
    let nowhere = Some("http://127.0.0.1:1".to_owned());
    AwsOptions {
        region: Some("us-east-1".to_owned()),
        kinesis_endpoint: nowhere.clone(),
        dynamodb_endpoint: nowhere.clone(),
        sts_endpoint: nowhere,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_embedded_host_answers_its_control_and_reports_that_nothing_started()
-> anyhow::Result<()> {
    let dir = scratch("control")?;
    // Not WebAssembly: refused by its first bytes, before anything is compiled.
    std::fs::write(dir.join("ledger.wasm"), "just text")?;
    let config = dir.join("tenants.toml");
    std::fs::write(
        &config,
        "[[tenants]]\nname = \"acme\"\ncomponents = [\"ledger.wasm\"]\n",
    )?;
    let host = RunningHost::start(RunOptions {
        config: Some(config),
        aws: no_aws(),
        state_dir: Some(dir.join("state")),
        admin_addr: Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))),
        metrics_addr: None,
        ..RunOptions::default()
    })
    .await?;

    let admin = host.admin_addr().expect("the admin API listens");
    assert_ne!(admin.port(), 0, "the port chosen is reported");
    assert!(dir.join("state").join("admin-token").exists());
    // The tenants load after `start` returns: wait for the component's refusal.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let refused = |host: &RunningHost| {
        let status = host.control().status();
        status.tenants.iter().any(|t| !t.refused.is_empty())
    };
    while !refused(&host) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "acme's load never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = host.control().status();
    let names: Vec<_> = status.tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["acme"]);
    assert_eq!(status.tenants[0].refused.len(), 1, "{status:?}");
    host.control().pause("acme")?;
    assert!(matches!(
        host.control().pause("nobody"),
        Err(ControlError::UnknownTenant(name)) if name == "nobody"
    ));

    // The first load refuses the one component: the host stops by itself and says why.
    let error = host
        .run_until(std::future::pending())
        .await
        .expect_err("nothing runs");
    assert!(
        error.to_string().contains("no component could be started"),
        "{error:#}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenants_file_with_a_mistake_is_refused_at_start() -> anyhow::Result<()> {
    let dir = scratch("mistake")?;
    let config = dir.join("tenants.toml");
    std::fs::write(
        &config,
        "[[tenants]]\nname = \"acme\"\ncomponents = [\"a.wasm\"]\nsubscrbe = [\"ledger\"]\n",
    )?;
    let started = RunningHost::start(RunOptions {
        config: Some(config),
        aws: no_aws(),
        state_dir: Some(dir.join("state")),
        admin_addr: None,
        metrics_addr: None,
        ..RunOptions::default()
    })
    .await;
    let error = started.err().expect("refused");
    assert!(format!("{error:#}").contains("subscrbe"), "{error:#}");
    assert!(!dir.join("state").exists(), "nothing written");
    Ok(())
}
