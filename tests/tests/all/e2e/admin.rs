//! The admin plane of `ruststream run` as operators (and the pages of a browser on their
//! machine) meet it, through the binary on kinesis-local: the token, the `Host` check, the
//! body types, the bounded uploads, TLS for remote admin; and deploys that persist in the state
//! directory: through restarts, `versions`, `rollback --to`, the rollout judge's rollbacks, and
//! a component file changed while the host was down.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use ruststream_tests::e2e::put_json;
use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::http::{AdminApi, read_answer, request};
use ruststream_tests::process::{Running, admin_addr, state_dir};
use ruststream_tests::servers::LocalKinesis;
use ruststream_tests::versioned::handled;
use ruststream_tests::wait::{eventually, poll_for};
use ruststream_tests::{binary, guests};
use serde_json::{Value, json};

/// The compile size bound of these hosts: above the `versioned` components (~190 KB), far
/// below the 32 MiB default, so a refused upload is small to send.
const MAX_BYTES: usize = 400_000;

/// The test certificate (127.0.0.1, localhost) and its key.
fn tls_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/admin-tls")
        .join(name)
}

/// Tenant `acme` running `dir/versioned.wasm` (a copy of `versioned` v1 unless the file is
/// there already), granted `events`, `legacy` and `audit`, leases in memory; `host` adds
/// lines to `[host]`.
fn write_config(dir: &Path, host: &str) -> anyhow::Result<PathBuf> {
    let component = dir.join("versioned.wasm");
    if !component.exists() {
        std::fs::copy(guests::VERSIONED_V1.path(), &component)?;
    }
    let config = dir.join("tenants.toml");
    std::fs::write(
        &config,
        format!(
            "[host]\ncompile_max_bytes = {MAX_BYTES}\n{host}\n\n[[tenants]]\nname = \"acme\"\n\
             components = [{component:?}]\nsubscribe = [\"events\", \"legacy\", \"audit\"]\n"
        ),
    )?;
    Ok(config)
}

/// The servers, an `events` stream and a folder for test `name`, with [`write_config`]'s
/// tenants file (no `[host]` additions) in it.
async fn events(name: &str) -> anyhow::Result<(Fixture, PathBuf)> {
    let fixture = Fixture::builder(&format!("admin-{name}"))
        .stream("events", 1)
        .start()
        .await?;
    let config = write_config(fixture.dir(), "")?;
    Ok((fixture, config))
}

/// `bytes` (a component) with a custom section appended: the same app and version, other
/// bytes, so another content hash.
fn with_custom_section(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    // id 0, size 6: name length 4, "test", one byte of payload.
    out.extend_from_slice(&[0, 6, 4, b't', b'e', b's', b't', 1]);
    out
}

/// The version that handled event `id`, from the `handled` lines of a host log.
fn handled_by(log: &str, id: u64) -> Vec<String> {
    handled(log)
        .into_iter()
        .filter(|line| line.n == id)
        .map(|line| line.version)
        .collect()
}

/// A running host of one test, its log in `host-N.log` in the fixture's folder.
struct Host {
    host: BinaryHost,
    /// Where it keeps its admin token and versions.
    state: PathBuf,
}

impl Host {
    /// Runs the host of `config` (its state in `state/` beside it), its `run`th start.
    fn start(fixture: &Fixture, config: &Path, run: u32, args: &[&str]) -> anyhow::Result<Self> {
        let host = fixture
            .host(config)
            .log(&format!("host-{run}.log"))
            .args(args)
            .start()?;
        let state = host.state_dir();
        Ok(Self { host, state })
    }

    fn output(&self) -> String {
        self.host.output()
    }

    async fn addr(&self) -> anyhow::Result<String> {
        self.host.admin_addr().await
    }

    async fn admin(&self) -> anyhow::Result<AdminApi> {
        AdminApi::new(&self.addr().await?, &self.state)
    }

    /// `ruststream ARGS --admin http://ADDR` with `RUSTSTREAM_STATE_DIR=STATE` (where the
    /// verb finds the token): whether it succeeded, and what it printed.
    async fn cli(&self, args: &[&str]) -> anyhow::Result<(bool, String)> {
        let url = format!("http://{}", self.addr().await?);
        let mut command = Command::new(binary());
        command
            .args(args)
            .args(["--admin", &url])
            .env("RUSTSTREAM_STATE_DIR", &self.state);
        run_cli(command).await
    }

    /// Waits until `version` handles a record put now: records are put one by one until one
    /// is handled (a record put before the shard opened at the tip is never read), and the one
    /// handled must be handled by `version` alone.
    async fn serves(&self, kinesis: &aws_sdk_kinesis::Client, version: &str) -> anyhow::Result<()> {
        self.handle(kinesis, &[version]).await
    }

    /// [`serves`](Self::serves) for several apps reading `events`: each of `versions` handles
    /// the record, and no other.
    async fn handle(
        &self,
        kinesis: &aws_sdk_kinesis::Client,
        versions: &[&str],
    ) -> anyhow::Result<()> {
        let mut wanted: Vec<String> = versions.iter().map(|v| (*v).to_owned()).collect();
        wanted.sort();
        for _ in 0..30 {
            let id = next_id();
            put_json(kinesis, "events", &json!({ "id": id }), None).await?;
            let all = poll_for(Duration::from_secs(5), async || {
                let by = handled_by(&self.output(), id);
                versions
                    .iter()
                    .all(|v| by.iter().any(|b| b == v))
                    .then_some(by)
            })
            .await;
            // Never handled by another version; handled by only some of them when their shards
            // opened at the tip after the record was put: then with the next record.
            let mut by = all.unwrap_or_else(|| handled_by(&self.output(), id));
            by.sort();
            anyhow::ensure!(
                by.iter().all(|b| wanted.contains(b)),
                "record {id} handled by versions {by:?}, not {wanted:?}: {}",
                self.output()
            );
            if by == wanted {
                return Ok(());
            }
        }
        anyhow::bail!(
            "versions {versions:?} never handled a record: {}",
            self.output()
        )
    }

    async fn stop(self) -> anyhow::Result<String> {
        self.host.stop().await
    }
}

/// Distinct record ids across every host of the test binary.
fn next_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1_000);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Runs a verb off the async runtime: whether it succeeded, and what it printed.
async fn run_cli(mut command: Command) -> anyhow::Result<(bool, String)> {
    let out = tokio::task::spawn_blocking(move || command.output()).await??;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Ok((out.status.success(), text))
}

/// One admin token for a fleet, given by the environment (`RUSTSTREAM_ADMIN_TOKEN`, as a
/// Kubernetes Secret is given to every pod): two hosts make no token file and take a verb
/// given the same value; another value is refused, the answer saying where the verb's token
/// came from. A token too short, or given by a file as well, is refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_given_by_the_environment_serves_every_host() -> anyhow::Result<()> {
    let (fixture, config) = events("token-env").await?;
    let elsewhere = |name: &str| -> anyhow::Result<PathBuf> {
        let dir = fixture.dir().join(name);
        std::fs::create_dir_all(&dir)?;
        write_config(&dir, "")
    };
    let token = "f00d".repeat(16);
    let given = |value: &str| {
        let value = value.to_owned();
        move |command: &mut Command| {
            command.env("RUSTSTREAM_ADMIN_TOKEN", value);
        }
    };
    let second = elsewhere("second")?;
    let hosts = [
        fixture.host(&config).log("a.log").adjust(given(&token)),
        fixture.host(&second).log("b.log").adjust(given(&token)),
    ]
    .map(|host| host.start());
    for host in hosts {
        let host = host?;
        let url = format!("http://{}", host.admin_addr().await?);
        let status = |value: &str| {
            let mut command = Command::new(binary());
            command
                .args(["status", "--admin", &url])
                .env("RUSTSTREAM_ADMIN_TOKEN", value)
                .env_remove("RUSTSTREAM_STATE_DIR");
            command
        };
        let (ok, said) = run_cli(status(&token)).await?;
        anyhow::ensure!(ok && said.contains("acme"), "{said}");
        assert!(
            !host.state_dir().join("admin-token").exists(),
            "a host given its token makes no token file"
        );
        let (ok, said) = run_cli(status(&"0".repeat(64))).await?;
        assert!(
            !ok && said.contains("wrong admin token")
                && said.contains("read from $RUSTSTREAM_ADMIN_TOKEN"),
            "{said}"
        );
        host.stop().await?;
    }

    // Refused at start: what the host says on its standard error.
    let refusal = async |name: &str, token: &str, args: &[&str]| -> anyhow::Result<String> {
        let said = fixture.dir().join(format!("{name}.err"));
        let stderr = std::fs::File::create(&said)?;
        let token = token.to_owned();
        let host = fixture
            .host(&elsewhere(name)?)
            .args(args)
            .adjust(move |command| {
                command.env("RUSTSTREAM_ADMIN_TOKEN", token).stderr(stderr);
            })
            .start()?;
        let (status, _) = host.exit(Duration::from_secs(60)).await?;
        anyhow::ensure!(!status.success(), "{name}: the host started");
        Ok(std::fs::read_to_string(&said)?)
    };
    let said = refusal("short", "too-short", &[]).await?;
    assert!(
        said.contains("the admin token in $RUSTSTREAM_ADMIN_TOKEN holds a token shorter than 32"),
        "{said}"
    );
    let file = fixture.dir().join("token-file");
    std::fs::write(&file, format!("{token}\n"))?;
    let file = file.display().to_string();
    let said = refusal("twice", &token, &["--admin-token-file", &file]).await?;
    assert!(said.contains("the admin token is given twice"), "{said}");
    Ok(())
}

/// Every change made through the admin API is audited: a pause, a seek refused, a deploy and
/// a resume through the verbs come back from `ruststream audit` (of the tenant, oldest first,
/// the operator's token by id, the refusal with its reason, the upload by its size), from the
/// state directory's audit file, and from the host's JSON log, with no host running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_audited_and_read_back_from_the_host_its_file_and_its_log()
-> anyhow::Result<()> {
    let (fixture, config) = events("audit").await?;
    let host = Host::start(&fixture, &config, 1, &["--log-format", "json"])?;
    reading(&host).await?;
    let v2_path = guests::VERSIONED_V2.path().to_string_lossy().into_owned();
    let changes: [(&[&str], bool); 4] = [
        (&["pause", "acme"], true),
        (&["seek", "acme", "versioned", "nobody", "horizon"], false),
        (&["deploy", "acme", &v2_path, "--name", "versioned"], true),
        (&["resume", "acme"], true),
    ];
    for (args, ok) in changes {
        let (done, said) = host.cli(args).await?;
        anyhow::ensure!(done == ok, "{args:?}: {said}");
    }
    let (ok, said) = host.cli(&["status"]).await?;
    anyhow::ensure!(ok, "{said}");

    let (ok, said) = host.cli(&["audit", "--tenant", "acme", "--json"]).await?;
    anyhow::ensure!(ok, "{said}");
    let entries: Vec<Value> = serde_json::from_str(&said)?;
    let actions: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| {
            let field = |name: &str| e[name].as_str().unwrap_or("?");
            (field("action"), field("result"))
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("pause", "ok"),
            ("seek", "refused"),
            ("deploy", "ok"),
            ("resume", "ok")
        ],
        "{said}"
    );
    assert!(entries.iter().all(|e| e["token"] == "operator"), "{said}");
    assert!(
        entries[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("nobody")),
        "{said}"
    );
    let size = std::fs::metadata(&v2_path)?.len();
    assert_eq!(entries[2]["request"]["bytes"], size, "{said}");
    assert!(entries[2]["answer"]["content_hash"].is_string(), "{said}");
    let (ok, people) = host.cli(&["audit"]).await?;
    anyhow::ensure!(ok, "{people}");
    assert!(
        people.contains(" operator pause acme ok")
            && people.contains("4 change(s), from ")
            && people.contains("audit.jsonl"),
        "{people}"
    );
    let log = host.host.log_path().to_owned();
    let file = host.state.join("audit.jsonl");
    host.stop().await?;

    // With no host running: the audit file, and the JSON log, say the same.
    for path in [&file, &log] {
        let path = path.display().to_string();
        let (ok, said) = host_less_cli(&["audit", "--tenant", "acme", "--json", "--file", &path])?;
        anyhow::ensure!(ok, "{said}");
        let read: Vec<Value> = serde_json::from_str(&said)?;
        assert_eq!(read, entries, "{path}");
    }
    Ok(())
}

/// A token made for tenant `acme` reaches acme's apps and its own status, audit trail and
/// recent errors, and is refused (403, naming acme) on tenant `globex` and on the operator's
/// routes; the operator lists it (never the token itself); once revoked it reaches nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_token_reaches_its_tenant_only_and_a_revoked_one_nothing() -> anyhow::Result<()> {
    let (fixture, config) = events("tenant-token").await?;
    let component = fixture.dir().join("versioned.wasm");
    // Globex is granted a stream its component does not read: its version is refused, with
    // an error naming the tenant.
    let globex = format!(
        "\n[[tenants]]\nname = \"globex\"\ncomponents = [{component:?}]\nsubscribe = [\"nowhere\"]\n"
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&config)?
        .write_all(globex.as_bytes())?;
    let host = Host::start(&fixture, &config, 1, &[])?;
    reading(&host).await?;
    let (ok, said) = host
        .cli(&[
            "token", "create", "--tenant", "acme", "--name", "ci", "--json",
        ])
        .await?;
    anyhow::ensure!(ok, "{said}");
    let made: Value = serde_json::from_str(&said)?;
    let (token, id) = (made["token"].as_str(), made["id"].as_str());
    let (Some(token), Some(id)) = (token, id) else {
        anyhow::bail!("no token: {said}");
    };
    let url = format!("http://{}", host.addr().await?);
    let holder = |args: &[&str]| {
        let mut command = Command::new(binary());
        command
            .args(args)
            .args(["--admin", &url])
            .env("RUSTSTREAM_ADMIN_TOKEN", token)
            .env_remove("RUSTSTREAM_STATE_DIR");
        run_cli(command)
    };

    let (ok, said) = holder(&["status", "--json"]).await?;
    anyhow::ensure!(ok, "{said}");
    let status: Value = serde_json::from_str(&said)?;
    let names: Vec<&str> = (status["tenants"].as_array().into_iter().flatten())
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["acme"], "globex is not even listed: {said}");
    for args in [
        &["pause", "acme"][..],
        &["resume", "acme"],
        &["versions", "acme", "versioned"],
    ] {
        let (ok, said) = holder(args).await?;
        anyhow::ensure!(ok, "{args:?}: {said}");
    }
    for args in [&["pause", "globex"][..], &["reload"], &["token", "list"]] {
        let (ok, said) = holder(args).await?;
        assert!(
            !ok && said.contains("403") && said.contains("belongs to tenant `acme`"),
            "{args:?}: {said}"
        );
    }
    let (ok, said) = holder(&["audit", "--json"]).await?;
    anyhow::ensure!(ok, "{said}");
    let trail: Vec<Value> = serde_json::from_str(&said)?;
    assert!(
        trail.iter().all(|e| e["tenant"] == "acme"),
        "its own tenant's entries only: {said}"
    );
    let by_it: Vec<&str> = (trail.iter())
        .filter(|e| e["token"] == id)
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(by_it, ["pause", "resume"], "{said}");
    // The operator sees the tenant's attempt on globex, by the token's id.
    let (ok, said) = host.cli(&["audit", "--tenant", "globex", "--json"]).await?;
    anyhow::ensure!(ok, "{said}");
    let refused: Vec<Value> = serde_json::from_str(&said)?;
    assert!(
        refused
            .iter()
            .any(|e| e["token"] == id && e["status"] == 403),
        "{said}"
    );

    // The recent errors: the operator's hold globex's refused version; the token's hold its
    // own tenant's alone, whatever it asks for.
    let about_globex = poll_for(Duration::from_secs(60), async || {
        let (ok, said) = host.cli(&["errors", "--json"]).await.ok()?;
        let events: Vec<Value> = serde_json::from_str(&said).ok().filter(|_| ok)?;
        events
            .iter()
            .any(|e| {
                e["tenant"] == "globex"
                    && e["level"] == "ERROR"
                    && e["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("not granted"))
            })
            .then_some(())
    })
    .await;
    anyhow::ensure!(
        about_globex.is_some(),
        "no recent error about globex's version: {}",
        host.cli(&["errors"]).await?.1
    );
    let (ok, said) = host.cli(&["errors", "--tenant", "globex"]).await?;
    assert!(
        ok && said.contains("ERROR globex") && said.contains("not granted"),
        "{said}"
    );
    let (ok, said) = holder(&["errors", "--tenant", "globex", "--json"]).await?;
    anyhow::ensure!(ok, "{said}");
    let seen: Vec<Value> = serde_json::from_str(&said)?;
    assert!(
        seen.iter().all(|e| e["tenant"] == "acme"),
        "its own tenant's alone: {said}"
    );

    let (ok, listed) = host.cli(&["token", "list"]).await?;
    anyhow::ensure!(ok, "{listed}");
    assert!(
        listed.contains(&format!("{id} acme ci made")) && !listed.contains(token),
        "{listed}"
    );
    let (ok, said) = host.cli(&["token", "revoke", id]).await?;
    anyhow::ensure!(ok, "{said}");
    let (ok, said) = holder(&["status"]).await?;
    assert!(!ok && said.contains("unknown or was revoked"), "{said}");
    host.stop().await?;
    Ok(())
}

/// `ruststream ARGS` without a host: whether it succeeded, and what it printed.
fn host_less_cli(args: &[&str]) -> anyhow::Result<(bool, String)> {
    let out = Command::new(binary()).args(args).output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Ok((out.status.success(), text))
}

/// The `error` of an admin API answer.
fn error_of(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("not an error body: {body}"))
}

/// Whether tenant `acme` is paused, by the admin API's status.
fn paused(admin: &AdminApi) -> anyhow::Result<bool> {
    let (code, body) = admin.call("GET", "/v1/status", None, b"")?;
    anyhow::ensure!(code == 200, "{code} {body}");
    let status: Value = serde_json::from_str(&body)?;
    Ok(status["tenants"][0]["paused"] == json!(true))
}

async fn reading(host: &Host) -> anyhow::Result<()> {
    let open = eventually(Duration::from_secs(60), || {
        host.output().contains("reading shard")
    })
    .await;
    anyhow::ensure!(open, "no shard opened: {}", host.output());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_the_token_a_json_body_or_the_hosts_name_are_refused_with_the_reason()
-> anyhow::Result<()> {
    let (fixture, config) = events("refusals").await?;
    let dir = fixture.dir();
    let host = Host::start(&fixture, &config, 1, &[])?;
    let addr = host.addr().await?;
    let without = request(&addr, "GET", "/v1/status", &[], b"")?;
    assert_eq!(without.0, 401, "{}", without.1);
    assert!(
        error_of(&without.1).starts_with("no admin token"),
        "{}",
        without.1
    );
    // The token: made at the first start, readable by the host's user only.
    let admin = host.admin().await?;
    let token_file = host.state.join("admin-token");
    let mode = std::fs::metadata(&token_file)?.permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", token_file.display());
    assert_eq!(admin.token.len(), 64, "32 random bytes, hex");
    assert!(admin.token.bytes().all(|b| b.is_ascii_hexdigit()));

    // The right token but for its last digit.
    let last = if admin.token.ends_with('0') { '1' } else { '0' };
    let wrong = format!("Bearer {}{last}", &admin.token[..63]);
    let wrong = request(
        &addr,
        "GET",
        "/v1/status",
        &[("Authorization", &wrong)],
        b"",
    )?;
    assert_eq!(
        (wrong.0, error_of(&wrong.1).as_str()),
        (401, "wrong admin token")
    );
    // A page's form post: text/plain, which CORS lets through without asking.
    let pause = "/v1/tenants/acme/pause";
    let text = admin.call("POST", pause, Some("text/plain"), b"{}")?;
    assert_eq!(text.0, 415, "{}", text.1);
    assert_eq!(
        error_of(&text.1),
        "Content-Type `text/plain` is refused here: send `application/json`"
    );
    let seek = "/v1/tenants/acme/apps/versioned/subscriptions/handle/seek";
    let text = admin.call("POST", seek, Some("text/plain"), br#"{"at":"latest"}"#)?;
    assert_eq!(text.0, 415, "{}", text.1);
    // DNS rebinding: the page's own name, re-pointed at loopback, comes as the Host.
    let bearer = format!("Bearer {}", admin.token);
    let port = addr.rsplit(':').next().unwrap_or_default();
    let foreign = format!("rebind.example:{port}");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Host", foreign.as_str()),
        ("Content-Type", "application/json"),
    ];
    let rebound = request(&addr, "POST", pause, &headers, b"")?;
    assert_eq!(rebound.0, 421, "{}", rebound.1);
    let reason = error_of(&rebound.1);
    assert!(
        reason.starts_with(&format!(
            "Host `{foreign}` is not this admin API's address ({addr}, localhost:{port})"
        )),
        "{reason}"
    );
    assert!(reason.contains("DNS rebinding"), "{reason}");
    assert!(!paused(&admin)?, "no refused request paused the tenant");
    assert!(
        !host.output().contains("admin: seek"),
        "no refused seek reached the host"
    );

    // The probes need no token; everything else takes it, by the API or by the verbs.
    assert_eq!(request(&addr, "GET", "/healthz", &[], b"")?.0, 200);
    assert_ne!(request(&addr, "GET", "/readyz", &[], b"")?.0, 401);
    let localhost = format!("localhost:{port}");
    let named = request(
        &addr,
        "GET",
        "/v1/status",
        &[("Authorization", &bearer), ("Host", &localhost)],
        b"",
    )?;
    assert_eq!(named.0, 200, "{}", named.1);
    let (ok, text) = host.cli(&["pause", "acme"]).await?;
    assert!(ok, "{text}");
    assert!(paused(&admin)?);
    let (ok, text) = host.cli(&["resume", "acme"]).await?;
    assert!(ok && !paused(&admin)?, "{text}");
    // A verb given another token file says where its refused token came from.
    let other = dir.join("other-token");
    std::fs::write(&other, "f".repeat(64))?;
    let url = format!("http://{addr}");
    let mut command = Command::new(binary());
    command
        .args(["status", "--admin", &url, "--admin-token-file"])
        .arg(&other);
    let (ok, text) = run_cli(command).await?;
    assert!(!ok, "{text}");
    assert!(
        text.contains("wrong admin token (the token was read from"),
        "{text}"
    );
    assert!(text.contains("(401 Unauthorized)"), "{text}");
    host.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_from_another_origin_are_refused_and_change_nothing() -> anyhow::Result<()> {
    let (fixture, config) = events("origin").await?;
    let host = Host::start(&fixture, &config, 1, &[])?;
    let addr = host.addr().await?;
    let admin = host.admin().await?;
    let bearer = format!("Bearer {}", admin.token);
    let pause = "/v1/tenants/acme/pause";
    let with = |extra: (&'static str, String)| {
        let headers = [
            ("Authorization", bearer.clone()),
            ("Content-Type", "application/json".to_owned()),
            extra,
        ];
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        request(&addr, "POST", pause, &headers, b"{}")
    };
    // The token, a JSON body, this API's Host: only the page it came from is foreign.
    for (name, value) in [
        ("Origin", "http://evil.example".to_owned()),
        ("Origin", "null".to_owned()),
        ("Origin", format!("http://{addr}.evil.example")),
        ("Origin", format!("https://{addr}")),
        ("Sec-Fetch-Site", "cross-site".to_owned()),
    ] {
        let (code, body) = with((name, value.clone()))?;
        assert_eq!(code, 403, "{name}: {value}: {body}");
        let reason = error_of(&body);
        assert!(
            reason.starts_with(&format!("{name} `{value}`")),
            "{name}: {value}: {reason}"
        );
    }
    let (_, body) = with(("Origin", "http://evil.example".to_owned()))?;
    assert!(
        error_of(&body).contains(&format!("is not this admin API's own (http://{addr}")),
        "{body}"
    );
    assert!(!paused(&admin)?, "no refused request paused the tenant");
    // A page of the API's own origin, and a client that is no browser, are served.
    let (code, body) = with(("Origin", format!("http://{addr}")))?;
    assert_eq!(code, 200, "{body}");
    assert!(paused(&admin)?);
    let (ok, text) = host.cli(&["resume", "acme"]).await?;
    assert!(ok && !paused(&admin)?, "{text}");
    host.stop().await?;
    Ok(())
}

/// `PUT` headers of an upload to `addr` with `admin`'s token.
fn upload_head(admin: &AdminApi, length: usize) -> String {
    format!(
        "PUT /v1/tenants/acme/components/versioned HTTP/1.1\r\nHost: {}\r\n\
         Authorization: Bearer {}\r\nContent-Type: application/wasm\r\n\
         Content-Length: {length}\r\nConnection: close\r\n\r\n",
        admin.addr, admin.token
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_bounded_by_the_compile_size_before_reading_and_taken_one_at_a_time()
-> anyhow::Result<()> {
    let (fixture, config) = events("uploads").await?;
    let client = fixture.client();
    let dir = fixture.dir();
    let host = Host::start(&fixture, &config, 1, &[])?;
    let admin = host.admin().await?;
    reading(&host).await?;
    host.serves(client, "1").await?;

    // Ten megabytes announced, none sent: the answer comes without them.
    let mut stream = std::net::TcpStream::connect(&admin.addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.write_all(upload_head(&admin, 10_000_000).as_bytes())?;
    let (code, body) = read_answer(stream)?;
    assert_eq!(code, 413, "{body}");
    assert_eq!(
        error_of(&body),
        format!(
            "the upload is 10000000 bytes, more than the {MAX_BYTES} a component may have \
             (`compile_max_bytes`): refused before reading it"
        )
    );
    // The verb sends what the file holds; the host's answer says why it is refused.
    let big = dir.join("big.wasm");
    std::fs::write(&big, vec![0_u8; 2 * MAX_BYTES])?;
    let big = big.to_string_lossy().into_owned();
    let (ok, text) = host
        .cli(&["deploy", "acme", &big, "--name", "versioned"])
        .await?;
    assert!(!ok, "{text}");
    assert!(
        text.contains("more than the 400000 a component may have"),
        "{text}"
    );

    // An upload under way: its head and a first part of its body, the rest not yet sent.
    let start_upload = || -> anyhow::Result<std::net::TcpStream> {
        let mut stream = std::net::TcpStream::connect(&admin.addr)?;
        stream.write_all(upload_head(&admin, 300_000).as_bytes())?;
        stream.write_all(&[0_u8; 1_000])?;
        Ok(stream)
    };
    let mut first = start_upload()?;
    let garbage = b"\0asm\x0d\0\x01\0 not a component";
    let refused = poll_for(Duration::from_secs(30), async || {
        // A second upload taken before the first was refused the first (429): start it again.
        if answered(&first).ok()? {
            first = start_upload().ok()?;
        }
        let (code, body) = admin
            .call(
                "PUT",
                "/v1/tenants/acme/components/versioned",
                Some("application/wasm"),
                garbage,
            )
            .ok()?;
        // Until the first upload holds the slot, the second is taken (and refused as garbage).
        (code == 429).then_some(body)
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("a second upload was never refused"))?;
    assert_eq!(
        error_of(&refused),
        "another upload is in progress: uploads are taken one at a time; send this one again \
         once it is answered"
    );
    let v2 = guests::VERSIONED_V2.path().to_string_lossy().into_owned();
    let deploy = ["deploy", "acme", v2.as_str(), "--name", "versioned"];
    let (ok, text) = host.cli(&deploy).await?;
    assert!(
        !ok && text.contains("another upload is in progress"),
        "{text}"
    );
    assert!(text.contains("(429 Too Many Requests)"), "{text}");
    host.serves(client, "1").await?;
    // The first upload ends (its client went away): the next one is taken.
    drop(first);
    let deployed = poll_for(Duration::from_secs(30), async || {
        let (ok, text) = host.cli(&deploy).await.ok()?;
        ok.then_some(text)
    })
    .await;
    assert!(deployed.is_some(), "{}", host.output());
    host.serves(client, "2").await?;
    host.stop().await?;
    Ok(())
}

/// Whether the server answered (or closed) `stream` already, without waiting.
fn answered(stream: &std::net::TcpStream) -> std::io::Result<bool> {
    stream.set_nonblocking(true)?;
    let peeked = stream.peek(&mut [0_u8; 1]);
    stream.set_nonblocking(false)?;
    match peeked {
        Ok(_) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
        Err(error) => Err(error),
    }
}

/// Runs a host that must refuse to start: its exit and what it printed.
async fn refused_start(
    config: &Path,
    kinesis: &LocalKinesis,
    args: &[&str],
) -> anyhow::Result<String> {
    let mut command = Command::new(binary());
    command
        .args(["run", "--config"])
        .arg(config)
        .args([
            "--kinesis-endpoint",
            &kinesis.endpoint(),
            "--region",
            "us-east-1",
        ])
        .args(["--metrics-addr", "off"])
        .args(args)
        .env("RUSTSTREAM_STATE_DIR", state_dir(config))
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut running = Running(command.spawn()?);
    let exited = poll_for(Duration::from_secs(60), async || {
        running.0.try_wait().ok().flatten()
    })
    .await;
    let Some(exit) = exited else {
        anyhow::bail!("the host started with {args:?}");
    };
    anyhow::ensure!(!exit.success(), "exit {exit:?} with {args:?}");
    let mut text = String::new();
    if let Some(mut err) = running.0.stderr.take() {
        err.read_to_string(&mut text)?;
    }
    Ok(text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_admin_is_refused_without_tls_and_served_with_it_and_the_token() -> anyhow::Result<()>
{
    let (fixture, config) = events("remote").await?;
    let kinesis = &fixture.kinesis;
    let dir = fixture.dir();
    // (`--allow-remote-admin` on loopback here: a test listens on nothing else.)
    let remote = ["--admin-addr", "127.0.0.1:0", "--allow-remote-admin"];
    let text = refused_start(&config, kinesis, &remote).await?;
    assert!(
        text.contains(
            "--allow-remote-admin needs TLS: give --admin-tls-cert and --admin-tls-key (a \
             certificate chain and its private key, PEM); without them the admin token would \
             cross the network in clear"
        ),
        "{text}"
    );
    // Without --allow-remote-admin, another address is refused before anything listens on it.
    let text = refused_start(&config, kinesis, &["--admin-addr", "0.0.0.0:0"]).await?;
    assert!(text.contains("which is not a loopback address"), "{text}");

    let (cert, key) = (tls_file("cert.pem"), tls_file("key.pem"));
    let (cert, key) = (cert.to_string_lossy(), key.to_string_lossy());
    let tls = [
        "--allow-remote-admin",
        "--admin-tls-cert",
        &cert,
        "--admin-tls-key",
        &key,
    ];
    let host = Host::start(&fixture, &config, 1, &tls)?;
    let addr = host.addr().await?;
    assert!(host.output().contains("scheme=https"), "{}", host.output());
    let port = addr.rsplit(':').next().unwrap_or_default().to_owned();
    let verb = |url: String, token: Option<&Path>| {
        let mut command = Command::new(binary());
        command.args(["status", "--admin", &url, "--admin-ca", &cert]);
        match token {
            Some(file) => command.arg("--admin-token-file").arg(file),
            None => command.arg("--state-dir").arg(&host.state),
        };
        command
    };
    for name in ["127.0.0.1", "localhost"] {
        let (ok, text) = run_cli(verb(format!("https://{name}:{port}"), None)).await?;
        assert!(ok && text.contains("tenant acme"), "{name}: {text}");
    }
    // TLS does not stand in for the token.
    let other = dir.join("other-token");
    std::fs::write(&other, "f".repeat(64))?;
    let (ok, text) = run_cli(verb(format!("https://127.0.0.1:{port}"), Some(&other))).await?;
    assert!(!ok && text.contains("wrong admin token"), "{text}");
    // Nothing is answered in clear.
    let (ok, text) = run_cli(verb(format!("http://127.0.0.1:{port}"), None)).await?;
    assert!(!ok, "{text}");
    let plain = request(&addr, "GET", "/healthz", &[], b"");
    assert!(plain.is_err(), "{plain:?}");
    host.stop().await?;
    Ok(())
}

/// A self-signed certificate and its key as an operator makes them, `openssl req -x509` with
/// OpenSSL's default extensions (which mark it a CA), in `dir` as `NAME.pem` and
/// `NAME-key.pem`; naming `san` (`subjectAltName`), or nothing but its CN.
fn openssl_certificate(
    dir: &Path,
    name: &str,
    san: Option<&str>,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}-key.pem")),
    );
    let mut command = Command::new("openssl");
    command
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:P-256", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert);
    if let Some(san) = san {
        command.args(["-addext", &format!("subjectAltName={san}")]);
    }
    let out = command.output().map_err(|error| {
        anyhow::anyhow!("this test needs the `openssl` program to make certificates: {error}")
    })?;
    anyhow::ensure!(
        out.status.success(),
        "openssl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((cert, key))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_made_with_plain_openssl_is_served_and_trusted_as_itself()
-> anyhow::Result<()> {
    let (fixture, config) = events("openssl").await?;
    let kinesis = &fixture.kinesis;
    let dir = fixture.dir();
    let (cert, key) = openssl_certificate(dir, "admin", Some("DNS:localhost,IP:127.0.0.1"))?;
    let (other, _) = openssl_certificate(dir, "other", Some("DNS:localhost,IP:127.0.0.1"))?;
    let (bare, bare_key) = openssl_certificate(dir, "bare", None)?;
    let files = |cert: &Path, key: &Path| {
        [
            "--admin-tls-cert".to_owned(),
            cert.display().to_string(),
            "--admin-tls-key".to_owned(),
            key.display().to_string(),
        ]
    };
    // A certificate naming nothing a client could check is refused at start, with the line
    // that makes one that works.
    let bare_args = files(&bare, &bare_key);
    let bare_args: Vec<&str> = bare_args.iter().map(String::as_str).collect();
    let text = refused_start(&config, kinesis, &bare_args).await?;
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains(&format!(
            "the admin TLS certificate {} cannot be served: it names none of the names \
             clients reach this admin API by (127.0.0.1, localhost) in its subjectAltName",
            bare.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "`openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
             -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout \
             key.pem -out cert.pem`"
        ),
        "{text}"
    );

    // The host serves the certificate; the verbs trust it given as itself.
    let args = files(&cert, &key);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let host = Host::start(&fixture, &config, 1, &args)?;
    let addr = host.addr().await?;
    let port = addr.rsplit(':').next().unwrap_or_default().to_owned();
    let status = |url: String, ca: &Path| {
        let mut command = Command::new(binary());
        command
            .args(["status", "--admin", &url, "--admin-ca"])
            .arg(ca)
            .arg("--state-dir")
            .arg(&host.state);
        command
    };
    for name in ["127.0.0.1", "localhost"] {
        let (ok, text) = run_cli(status(format!("https://{name}:{port}"), &cert)).await?;
        assert!(ok && text.contains("tenant acme"), "{name}: {text}");
    }
    // Another certificate is not this one: refused, in one line that says so.
    let (ok, text) = run_cli(status(format!("https://127.0.0.1:{port}"), &other)).await?;
    assert!(!ok, "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with(&format!(
            "error: the admin API at https://127.0.0.1:{port}/v1/status presented a \
             certificate not trusted here (UnknownIssuer): give the certificate it serves, or \
             the CA that issued it, with --admin-ca"
        )),
        "{text}"
    );
    host.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verbs_read_the_token_from_the_default_state_directory() -> anyhow::Result<()> {
    let (fixture, config) = events("default-token").await?;
    let client = fixture.client();
    let dir = fixture.dir();
    let data = dir.join("data");
    let start = |run: u32| -> anyhow::Result<Host> {
        let data = data.clone();
        let host = fixture
            .host(&config)
            .log(&format!("host-{run}.log"))
            .adjust(move |command| {
                command
                    .env_remove("RUSTSTREAM_STATE_DIR")
                    .env("XDG_DATA_HOME", data);
            })
            .start()?;
        let state = fixture.dir().join("data/ruststream");
        Ok(Host { host, state })
    };
    let verb = |host: &Host, args: &[&str]| -> anyhow::Result<Command> {
        let addr = admin_addr(&host.output()).ok_or_else(|| anyhow::anyhow!("no address"))?;
        let mut command = Command::new(binary());
        command
            .args(args)
            .args(["--admin", &format!("http://{addr}")])
            .env_remove("RUSTSTREAM_STATE_DIR")
            .env_remove("RUSTSTREAM_ADMIN_TOKEN_FILE")
            .env("XDG_DATA_HOME", &data);
        Ok(command)
    };

    let host = start(1)?;
    host.addr().await?;
    let token_file = data.join("ruststream").join("admin-token");
    let token = std::fs::read_to_string(&token_file)?;
    assert_eq!(
        std::fs::metadata(&token_file)?.permissions().mode() & 0o777,
        0o600
    );
    assert!(
        host.output().contains("admin token made (mode 0600)"),
        "{}",
        host.output()
    );
    reading(&host).await?;
    for args in [
        &["status"][..],
        &["pause", "acme"],
        &["resume", "acme"],
        &["versions", "acme", "versioned"],
    ] {
        let (ok, text) = run_cli(verb(&host, args)?).await?;
        assert!(ok, "{args:?}: {text}");
    }
    host.serves(client, "1").await?;
    host.stop().await?;

    // Restarted: the same token, read back rather than made again.
    let host = start(2)?;
    host.addr().await?;
    assert_eq!(std::fs::read_to_string(&token_file)?, token);
    assert!(
        !host.output().contains("admin token made"),
        "{}",
        host.output()
    );
    let (ok, text) = run_cli(verb(&host, &["status"])?).await?;
    assert!(ok && text.contains("tenant acme"), "{text}");
    host.stop().await?;
    Ok(())
}

/// The first 12 hex digits of the hash of `bytes`, as `ruststream versions` shows them.
fn short(bytes: &[u8]) -> String {
    ruststream_runtime::component::compile::content_hash(bytes)[..12].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_survives_a_restart_and_rollback_to_returns_to_any_kept_version()
-> anyhow::Result<()> {
    let (fixture, config) = events("persist").await?;
    let client = fixture.client();
    let dir = fixture.dir();
    let v1 = std::fs::read(guests::VERSIONED_V1.path())?;
    let v2 = std::fs::read(guests::VERSIONED_V2.path())?;
    let v2_path = guests::VERSIONED_V2.path().to_string_lossy().into_owned();

    let host = Host::start(&fixture, &config, 1, &[])?;
    reading(&host).await?;
    host.serves(client, "1").await?;
    let (ok, text) = host
        .cli(&["deploy", "acme", &v2_path, "--name", "versioned"])
        .await?;
    assert!(ok, "{text}");
    host.serves(client, "2").await?;
    host.stop().await?;

    // The file did not change: what was live (the upload) runs again.
    let host = Host::start(&fixture, &config, 2, &[])?;
    reading(&host).await?;
    host.serves(client, "2").await?;
    assert!(
        host.output().contains("running the version that was live"),
        "{}",
        host.output()
    );
    let (ok, text) = host.cli(&["versions", "acme", "versioned"]).await?;
    assert!(ok, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0], "acme/versioned: 2 version(s) kept by this host",
        "{text}"
    );
    assert!(
        lines[1].starts_with(&format!("  #{} 2.0.0 (versioned) upload ", short(&v2))),
        "{text}"
    );
    assert!(lines[1].ends_with("  live"), "{text}");
    assert!(
        lines[2].starts_with(&format!("  #{} 1.0.0 (versioned) file ", short(&v1))),
        "{text}"
    );
    assert!(!lines[2].ends_with("live"), "{text}");
    let (ok, text) = host
        .cli(&["rollback", "acme", "versioned", "--to", &short(&v1)[..8]])
        .await?;
    assert!(ok && text.contains("acme/versioned 1.0.0"), "{text}");
    host.serves(client, "1").await?;
    let (ok, text) = host
        .cli(&["rollback", "acme", "versioned", "--to", &short(&v1)])
        .await?;
    assert!(
        !ok && text.contains("is the live one already (409 Conflict)"),
        "{text}"
    );
    let (ok, text) = host
        .cli(&["rollback", "acme", "versioned", "--to", "ffff"])
        .await?;
    assert!(!ok && text.contains("keeps no version `ffff`"), "{text}");
    assert!(text.contains("(404 Not Found)"), "{text}");
    let (ok, json) = host
        .cli(&["versions", "acme", "versioned", "--json"])
        .await?;
    assert!(ok, "{json}");
    let list: Value = serde_json::from_str(&json)?;
    assert_eq!(
        list["versions"][0]["content_hash"],
        json!(ruststream_runtime::component::compile::content_hash(&v1))
    );
    assert_eq!(list["versions"][0]["came_by"], json!("rollback"));
    assert_eq!(list["versions"][0]["live"], json!(true));
    host.stop().await?;

    // The rollback is what was live. (From here on, two versions are kept.)
    write_config(dir, "keep_versions = 2")?;
    let host = Host::start(&fixture, &config, 3, &[])?;
    reading(&host).await?;
    host.serves(client, "1").await?;
    // No swap since the start: nothing to go back to without --to.
    let (ok, text) = host.cli(&["rollback", "acme", "versioned"]).await?;
    assert!(!ok && text.contains("no previous version"), "{text}");
    let (ok, text) = host
        .cli(&["rollback", "acme", "versioned", "--to", &short(&v2)])
        .await?;
    assert!(ok, "{text}");
    host.serves(client, "2").await?;
    // A third version: two are kept, the oldest that is not live goes, bytes and all.
    let v1b = with_custom_section(&v1);
    let v1b_path = dir.join("v1b.wasm");
    std::fs::write(&v1b_path, &v1b)?;
    let v1b_path = v1b_path.to_string_lossy().into_owned();
    let (ok, text) = host
        .cli(&["deploy", "acme", &v1b_path, "--name", "versioned"])
        .await?;
    assert!(ok, "{text}");
    host.serves(client, "1").await?;
    // The rollback without --to returns to the version the last swap replaced, as before.
    let (ok, text) = host.cli(&["rollback", "acme", "versioned"]).await?;
    assert!(ok && text.contains("2.0.0"), "{text}");
    host.serves(client, "2").await?;
    let (ok, text) = host.cli(&["versions", "acme", "versioned"]).await?;
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        ok && lines[0] == "acme/versioned: 2 version(s) kept by this host",
        "{text}"
    );
    let newest = format!("  #{} 2.0.0 (versioned) rollback ", short(&v2));
    assert!(
        lines[1].starts_with(&newest) && lines[1].ends_with("  live"),
        "{text}"
    );
    let older = format!("  #{} 1.0.0 (versioned) upload ", short(&v1b));
    assert!(lines[2].starts_with(&older), "{text}");
    let kept = |bytes: &[u8]| {
        host.state
            .join("versions")
            .join(format!(
                "{}.wasm",
                ruststream_runtime::component::compile::content_hash(bytes)
            ))
            .exists()
    };
    assert!(!kept(&v1) && kept(&v2) && kept(&v1b));
    host.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_on_disk_wins_only_when_it_changed_since_the_host_saw_it() -> anyhow::Result<()> {
    let (fixture, config) = events("precedence").await?;
    let client = fixture.client();
    let dir = fixture.dir();
    let component = dir.join("versioned.wasm");
    let v2_path = guests::VERSIONED_V2.path().to_string_lossy().into_owned();

    let host = Host::start(&fixture, &config, 1, &[])?;
    reading(&host).await?;
    host.serves(client, "1").await?;
    let (ok, text) = host
        .cli(&["deploy", "acme", &v2_path, "--name", "versioned"])
        .await?;
    assert!(ok, "{text}");
    host.serves(client, "2").await?;
    host.stop().await?;

    // While the host is down, the operator drops a new build of v1 in place: it runs.
    let v1b = with_custom_section(&std::fs::read(guests::VERSIONED_V1.path())?);
    std::fs::write(&component, &v1b)?;
    let host = Host::start(&fixture, &config, 2, &[])?;
    reading(&host).await?;
    host.serves(client, "1").await?;
    assert!(
        !host.output().contains("running the version that was live"),
        "{}",
        host.output()
    );
    host.stop().await?;

    // A changed file that is refused: what was live runs, and the refusal is shown.
    std::fs::write(&component, b"\0asm\x0d\0\x01\0 not a component")?;
    let host = Host::start(&fixture, &config, 3, &[])?;
    reading(&host).await?;
    host.serves(client, "1").await?;
    assert!(
        host.output().contains("running the version that was live"),
        "{}",
        host.output()
    );
    let (ok, text) = host.cli(&["status"]).await?;
    assert!(ok && text.contains("refused versioned"), "{text}");
    assert!(
        text.contains(&format!(
            "app versioned 1.0.0 (versioned, #{})",
            short(&v1b)
        )),
        "{text}"
    );
    // What runs is the build the operator dropped in while the host was down, as it came.
    let (ok, text) = host.cli(&["versions", "acme", "versioned"]).await?;
    let newest = text.lines().nth(1).unwrap_or_default();
    let expected = format!("  #{} 1.0.0 (versioned) file", short(&v1b));
    assert!(ok && newest.starts_with(&expected), "{text}");
    assert!(newest.ends_with("live"), "{text}");
    host.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_by_the_rollout_judge_is_what_a_restart_runs() -> anyhow::Result<()> {
    let (fixture, config) = events("judged").await?;
    let client = fixture.client();
    let judge = ["--rollout-calls", "4", "--rollout-margin", "0.2"];
    let trap = guests::VERSIONED_TRAP.path().to_string_lossy().into_owned();
    let v2 = guests::VERSIONED_V2.path().to_string_lossy().into_owned();

    let host = Host::start(&fixture, &config, 1, &judge)?;
    reading(&host).await?;
    host.serves(client, "1").await?;
    let (ok, text) = host
        .cli(&["deploy", "acme", &v2, "--name", "versioned"])
        .await?;
    assert!(ok, "{text}");
    host.serves(client, "2").await?;
    let (ok, text) = host
        .cli(&["deploy", "acme", &trap, "--name", "versioned"])
        .await?;
    assert!(ok, "{text}");
    // Records for the trapping version to fail on, until the judge rolls it back to v2.
    let rolled_back = poll_for(Duration::from_secs(60), async || {
        put_json(client, "events", &json!({ "id": next_id() }), None)
            .await
            .ok()?;
        host.output()
            .contains("rolled back to the previous version")
            .then_some(())
    })
    .await;
    anyhow::ensure!(rolled_back.is_some(), "no rollback: {}", host.output());
    // Stopped at once: what the judge returned to is recorded by the stop at the latest.
    host.stop().await?;

    let host = Host::start(&fixture, &config, 2, &judge)?;
    reading(&host).await?;
    host.serves(client, "2").await?;
    let (ok, json) = host
        .cli(&["versions", "acme", "versioned", "--json"])
        .await?;
    assert!(ok, "{json}");
    let list: Value = serde_json::from_str(&json)?;
    let v2_hash = ruststream_runtime::component::compile::content_hash(&std::fs::read(
        guests::VERSIONED_V2.path(),
    )?);
    let newest = &list["versions"][0];
    assert_eq!(newest["content_hash"], json!(v2_hash), "{list}");
    assert_eq!(
        (&newest["came_by"], &newest["live"]),
        (&json!("rollback"), &json!(true)),
        "{list}"
    );
    assert_eq!(list["versions"][1]["version"], json!("4.0.0"), "{list}");
    assert_eq!(list["versions"][1]["came_by"], json!("upload"), "{list}");
    assert_eq!(list["versions"][2]["version"], json!("1.0.0"), "{list}");
    host.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_that_came_by_upload_only_runs_after_restarts_until_it_is_undeployed()
-> anyhow::Result<()> {
    let (fixture, config) = events("upload-only").await?;
    let client = fixture.client();
    // App `renamed` 3.0.0, reading `events` too: a new app, under a name the file does not list.
    let renamed = guests::VERSIONED_RENAMED
        .path()
        .to_string_lossy()
        .into_owned();

    let host = Host::start(&fixture, &config, 1, &[])?;
    reading(&host).await?;
    host.serves(client, "1").await?;
    let (ok, text) = host
        .cli(&["deploy", "acme", &renamed, "--name", "extra"])
        .await?;
    assert!(
        ok && text.contains("acme/renamed 3.0.0 (extra, #"),
        "{text}"
    );
    assert!(text.contains("started (new app)"), "{text}");
    host.handle(client, &["1", "3"]).await?;
    // A reload reads the tenants file again: the upload is not undone.
    let (ok, text) = host.cli(&["reload"]).await?;
    assert!(ok, "{text}");
    host.handle(client, &["1", "3"]).await?;
    host.stop().await?;

    let host = Host::start(&fixture, &config, 2, &[])?;
    reading(&host).await?;
    host.handle(client, &["1", "3"]).await?;
    let (ok, text) = host.cli(&["undeploy", "acme", "versioned"]).await?;
    assert!(
        !ok && text.contains("is listed in the tenants file"),
        "{text}"
    );
    assert!(text.contains("(409 Conflict)"), "{text}");
    let (ok, text) = host.cli(&["undeploy", "acme", "extra"]).await?;
    assert!(ok, "{text}");
    assert_eq!(
        text.trim(),
        "acme/extra (app renamed): stopped; a restart does not run it again"
    );
    host.serves(client, "1").await?;
    let (ok, text) = host.cli(&["undeploy", "acme", "extra"]).await?;
    assert!(
        !ok && text.contains("runs no component `extra` (404 Not Found)"),
        "{text}"
    );
    host.stop().await?;

    let host = Host::start(&fixture, &config, 3, &[])?;
    reading(&host).await?;
    host.serves(client, "1").await?;
    let (ok, text) = host.cli(&["status"]).await?;
    assert!(ok && !text.contains("app renamed"), "{text}");
    host.stop().await?;
    Ok(())
}
