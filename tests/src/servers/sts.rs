//! The local STS server: moto's (`tests/servers/sts.py`), in a Python virtualenv of pinned
//! packages. It answers `AssumeRole` for any role with fresh temporary credentials and keeps
//! every session it handed out, which [`LocalSts::assumed_roles`] reads back.

use std::process::Stdio;

use anyhow::{Context, Result};
use tokio::process::Command;

use super::node::ServerProcess;
use super::{python, servers_dir};
use crate::http::http;

/// A role session the server handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssumedRole {
    /// The temporary access key id: what requests made with the session are signed with.
    pub access_key_id: String,
    /// The role assumed.
    pub role_arn: String,
    /// The session name the caller gave.
    pub session_name: String,
    /// The external id the caller gave, if any.
    pub external_id: Option<String>,
}

/// A local STS server listening only on 127.0.0.1, killed when dropped.
#[derive(Debug)]
pub struct LocalSts {
    server: ServerProcess,
}

impl LocalSts {
    /// Installs the Python packages if needed, starts a fresh server on a free port and
    /// returns once it answers HTTP.
    ///
    /// # Errors
    /// Python 3 (with venv and pip) is missing, the install fails, or the server does not
    /// answer in time; the error carries what it printed.
    pub async fn start() -> Result<LocalSts> {
        let python = tokio::task::spawn_blocking(python::ensure_installed)
            .await
            .context("the Python install task panicked")??;
        let dir = servers_dir();
        // sts.py announces its port as the one that replaced API_PORT_SENTINEL (1).
        let child = Command::new(python)
            .arg(dir.join("sts.py"))
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting the STS server")?;
        Ok(LocalSts {
            server: ServerProcess::watch("moto (STS)", child).await?,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        self.server.endpoint()
    }

    /// Every role session handed out so far, read from moto's state API.
    ///
    /// # Errors
    /// When the server does not answer or its answer is not what moto 5 writes.
    pub async fn assumed_roles(&self) -> Result<Vec<AssumedRole>> {
        let addr = format!("127.0.0.1:{}", self.server.port());
        let (status, body) =
            tokio::task::spawn_blocking(move || http(&addr, "GET", "/moto-api/data.json", b""))
                .await??;
        anyhow::ensure!(status == 200, "moto's state API answered {status}: {body}");
        let state: serde_json::Value = serde_json::from_str(&body)?;
        let sessions = state["sts"]["AssumedRole"]
            .as_array()
            .context("no sts.AssumedRole in moto's state")?;
        sessions.iter().map(assumed_role).collect()
    }

    /// What the server has printed so far (its last 64 KiB), for diagnosing a failing test.
    pub fn output(&self) -> String {
        self.server.output()
    }
}

fn assumed_role(session: &serde_json::Value) -> Result<AssumedRole> {
    let text = |key: &str| {
        session[key]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("an assumed role without `{key}`: {session}"))
    };
    Ok(AssumedRole {
        access_key_id: text("access_key_id")?,
        role_arn: text("role_arn")?,
        session_name: text("session_name")?,
        external_id: session["external_id"].as_str().map(str::to_owned),
    })
}
