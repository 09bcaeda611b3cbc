//! The web console (`/ui`) in a real browser: headless Chromium through ChromeDriver
//! (`ruststream_tests::browser`), against hosts on the local servers. Each test saves
//! screenshots under `target/console-screenshots/` for people to look at.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ruststream_tests::browser::Browser;
use ruststream_tests::fixture::{BinaryHost, Fixture};
use ruststream_tests::guests;
use ruststream_tests::http::{AdminApi, admin_token};
use ruststream_tests::wait::poll_for;
use serde_json::{Value, json};

use crate::e2e::redrive;

/// Where the screenshots go.
fn screenshot(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("../console-screenshots")
        .join(format!("{name}.png"))
}

/// A fixture with `events` (1 shard) and `orders` (1 shard), and a host running tenant `acme`
/// (the `versioned` guest on `events`) and, with `globex`, tenant `globex` (`books-broken` on
/// `orders`: every record asks for a retry, so it is held).
async fn host(name: &str, globex: bool) -> anyhow::Result<(Fixture, BinaryHost)> {
    let fixture = Fixture::builder(&format!("console-{name}"))
        .stream("events", 1)
        .stream("legacy", 1)
        .stream("audit", 1)
        .stream("orders", 1)
        .stream("refunds", 1)
        .start()
        .await?;
    let mut tenants = format!(
        "[[tenants]]\nname = \"acme\"\ncomponents = [\"{}\"]\nsubscribe = [\"events\", \"legacy\", \"audit\"]\n",
        guests::VERSIONED_V1.path().display()
    );
    if globex {
        tenants.push_str(&format!(
            "\n[[tenants]]\nname = \"globex\"\ncomponents = [\"{}\"]\nsubscribe = [\"orders\", \"refunds\"]\n\
             publish = [\"books.dead\", \"books.acked\"]\n",
            guests::BOOKS_BROKEN.path().display()
        ));
    }
    let file = fixture.tenants_file("tenants.toml", &tenants)?;
    let host = fixture.host(&file).start()?;
    host.wait_for_log("reading shard", if globex { 2 } else { 1 })
        .await?;
    Ok((fixture, host))
}

/// Signs `browser` in to `host`'s console with `token`, and waits for the fleet page.
async fn sign_in(browser: &Browser, url: &str, token: &str) -> anyhow::Result<()> {
    browser.goto(&format!("{url}/ui"))?;
    browser
        .wait_for_text("Sign in", Duration::from_secs(20))
        .await?;
    browser.type_into("#token", token)?;
    browser.click("#sign-in-form button")?;
    browser
        .wait_for_text("Which host holds what", Duration::from_secs(20))
        .await
}

/// The host's address and API, and a browser signed in to its console as the operator.
async fn operator_console(
    fixture: &Fixture,
    host: &BinaryHost,
) -> anyhow::Result<(String, AdminApi, Browser)> {
    let addr = host.admin_addr().await?;
    let token = admin_token(&host.state_dir())?;
    let api = AdminApi::new(&addr, &host.state_dir())?;
    let browser = Browser::start(fixture.dir()).await?;
    sign_in(&browser, &format!("http://{addr}"), &token).await?;
    Ok((addr, api, browser))
}

/// Clicks the page's button `label` and confirms.
fn act(browser: &Browser, label: &str) -> anyhow::Result<()> {
    browser.click(&format!("button[data-action=\"{label}\"]"))?;
    browser.click("#confirm-ok")
}

/// The status a host's admin API answers.
fn status(api: &AdminApi) -> anyhow::Result<Value> {
    let (code, body) = api.call("GET", "/v1/status", None, b"")?;
    anyhow::ensure!(code == 200, "status: {code} {body}");
    Ok(serde_json::from_str(&body)?)
}

/// The first shard of `tenant`'s first subscription on `stream`.
fn shard_of(status: &Value, tenant: &str, stream: &str) -> Option<Value> {
    let tenant = (status["tenants"].as_array()?.iter()).find(|t| t["name"] == tenant)?;
    (tenant["apps"].as_array()?.iter())
        .flat_map(|app| app["subscriptions"].as_array().cloned().unwrap_or_default())
        .find(|sub| sub["stream"] == stream)
        .and_then(|sub| sub["shards"].as_array()?.first().cloned())
}

/// Pause and resume from the page pause and resume the tenant: its checkpoint stays while it
/// is paused, and moves once it is resumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_from_the_page_stop_then_move_the_tenant_s_checkpoint()
-> anyhow::Result<()> {
    let (fixture, host) = host("pause", false).await?;
    let (addr, api, browser) = operator_console(&fixture, &host).await?;

    let checkpoint = || -> Option<String> {
        let status = status(&api).ok()?;
        shard_of(&status, "acme", "events")?["checkpoint"]
            .as_str()
            .map(str::to_owned)
    };
    fixture.put("events", &json!({"id": 1})).await?;
    let first = poll_for(Duration::from_secs(60), async || checkpoint()).await;
    let first = first.ok_or_else(|| {
        anyhow::anyhow!("no checkpoint: {:?}\n{}", status(&api).ok(), host.output())
    })?;

    browser.goto(&format!("http://{addr}/ui#/tenants"))?;
    browser
        .wait_for_text("running", Duration::from_secs(10))
        .await?;
    act(&browser, "Pause")?;
    browser
        .wait_for_text("paused", Duration::from_secs(10))
        .await?;
    browser.screenshot(&screenshot("tenants-paused"))?;
    let paused = status(&api)?;
    let acme = (paused["tenants"].as_array().into_iter().flatten()).find(|t| t["name"] == "acme");
    assert_eq!(
        acme.map(|t| t["paused"].clone()),
        Some(json!(true)),
        "{paused}"
    );
    // Records put while paused are not handled: the checkpoint stays where it was.
    fixture.put("events", &json!({"id": 2})).await?;
    let moved = poll_for(Duration::from_secs(5), async || {
        checkpoint().filter(|now| *now != first)
    })
    .await;
    assert_eq!(moved, None, "the checkpoint moved while paused");

    act(&browser, "Resume")?;
    let resumed = poll_for(Duration::from_secs(60), async || {
        checkpoint().filter(|now| *now != first)
    })
    .await;
    anyhow::ensure!(
        resumed.is_some(),
        "the checkpoint never moved: {}",
        host.output()
    );
    browser
        .wait_for_text("running", Duration::from_secs(10))
        .await?;
    Ok(())
}

/// A record held by `retry` shows on the shards page with its sequence number and its age
/// within two seconds of the host holding it, and the lag plot gets samples while a producer
/// writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_record_shows_on_the_shards_page_and_the_plots_move() -> anyhow::Result<()> {
    let (fixture, host) = host("held", true).await?;
    let (addr, api, browser) = operator_console(&fixture, &host).await?;
    browser.goto(&format!("http://{addr}/ui#/shards"))?;
    browser
        .wait_for_text("Lag per shard", Duration::from_secs(10))
        .await?;

    let sequence = fixture.put("orders", &json!({"id": 7})).await?;
    let held = poll_for(Duration::from_secs(60), async || {
        let status = status(&api).ok()?;
        let shard = shard_of(&status, "globex", "orders")?;
        (shard["held_at"].as_str() == Some(sequence.as_str())).then(Instant::now)
    })
    .await;
    let held = held.ok_or_else(|| {
        anyhow::anyhow!(
            "{sequence} never held: {:?}\n{}",
            status(&api).ok(),
            host.output()
        )
    })?;
    browser
        .wait_for_text(&sequence, Duration::from_secs(10))
        .await?;
    let shown = held.elapsed();
    assert!(
        shown <= Duration::from_secs(2),
        "shown {shown:?} after it was held"
    );
    let age = browser.run(
        "return [...document.querySelectorAll('td.held-age')].map(e => e.textContent).join(',');",
        &[],
    )?;
    assert!(age.as_str().is_some_and(|a| a.contains(" s")), "{age}");
    browser.screenshot(&screenshot("shards-held"))?;

    // A producer writes; the plots get samples.
    let points = || -> u64 {
        let count = browser.run(
            "return [...document.querySelectorAll('canvas')].map(c => Number(c.dataset.points || 0)).reduce((a, b) => a + b, 0);",
            &[],
        );
        count.ok().and_then(|c| c.as_u64()).unwrap_or(0)
    };
    let before = points();
    let grew = poll_for(Duration::from_secs(30), async || {
        fixture.put("events", &json!({"id": 8})).await.ok()?;
        (points() > before).then_some(())
    })
    .await;
    anyhow::ensure!(grew.is_some(), "the plots never moved from {before} points");
    browser.screenshot(&screenshot("shards-plots"))?;
    Ok(())
}

/// A token made for `acme` sees acme alone in the console, is refused (403) on globex's
/// action, and is signed out once revoked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_token_sees_its_tenant_only_and_a_revoked_one_is_signed_out() -> anyhow::Result<()>
{
    let (fixture, host) = host("tenant", true).await?;
    let addr = host.admin_addr().await?;
    let api = AdminApi::new(&addr, &host.state_dir())?;
    let (code, made) = api.call(
        "POST",
        "/v1/tokens",
        Some("application/json"),
        br#"{"tenant":"acme","name":"browser"}"#,
    )?;
    anyhow::ensure!(code == 200, "token create: {code} {made}");
    let made: Value = serde_json::from_str(&made)?;
    let token = made["token"].as_str().unwrap_or_default().to_owned();
    let id = made["id"].as_str().unwrap_or_default().to_owned();

    let browser = Browser::start(fixture.dir()).await?;
    sign_in(&browser, &format!("http://{addr}"), &token).await?;
    browser.goto(&format!("http://{addr}/ui#/tenants"))?;
    browser
        .wait_for_text("acme", Duration::from_secs(10))
        .await?;
    let text = browser.text()?;
    assert!(
        text.contains(&format!("tenant acme (token {id})")),
        "{text}"
    );
    assert!(
        !text.contains("globex"),
        "another tenant is not even listed: {text}"
    );
    browser.screenshot(&screenshot("tenant-token"))?;
    // An action on globex's apps from the page: 403, naming the tenant the token belongs to.
    let refused = browser.run_async(
        "const done = arguments[arguments.length - 1];
         fetch('/ui/session', {credentials: 'same-origin'}).then(r => r.json()).then(s =>
           fetch('/v1/tenants/globex/pause', {method: 'POST', credentials: 'same-origin',
             headers: {'X-CSRF-Token': s.csrf}}))
         .then(r => r.json().then(b => done([r.status, b.error])))
         .catch(e => done([0, String(e)]));",
        &[],
    )?;
    assert_eq!(refused[0], 403, "{refused}");
    assert!(
        refused[1]
            .as_str()
            .is_some_and(|e| e.contains("belongs to tenant `acme`")),
        "{refused}"
    );

    let (code, body) = api.call("DELETE", &format!("/v1/tokens/{id}"), None, b"")?;
    anyhow::ensure!(code == 200, "revoke: {code} {body}");
    browser
        .wait_for_text("was revoked", Duration::from_secs(10))
        .await?;
    browser.screenshot(&screenshot("tenant-token-revoked"))?;
    Ok(())
}

/// A redrive started from the dead-letters page, once confirmed, shows its progress there to
/// its end, beside one the API started (the page lists every redrive the host keeps, whoever
/// started it); the dead letters are back on their stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_started_from_the_page_shows_its_progress_to_its_end() -> anyhow::Result<()> {
    const LETTERS: u64 = 10;
    let setup = redrive::Setup::start("console-redrive").await?;
    for id in 0..LETTERS {
        setup
            .forge_dead_letter(&redrive::origin("orders", "acme"), id)
            .await?;
    }
    let fixed = setup.tenants("fixed", &guests::BOOKS_FIXED.path(), 10_000)?;
    let args = ["--lease-store", "dynamodb", "--create-lease-table"];
    let host = redrive::start_host(&setup, &fixed, "host", &args).await?;
    let (_, api, browser) = operator_console(&setup.fixture, &host).await?;
    // One the page did not start: a dry run is not kept, a redrive of no dead letters is.
    let (code, body) = api.call(
        "POST",
        "/v1/redrives",
        Some("application/json"),
        br#"{"stream": "books.dead", "tenant": "nobody", "id": "rd-by-the-api"}"#,
    )?;
    anyhow::ensure!(code == 200, "redrive through the API: {code} {body}");

    browser.click("#nav a[data-page=\"dead-letters\"]")?;
    browser
        .wait_for_text("rd-by-the-api", Duration::from_secs(20))
        .await?;
    browser.type_into("input[placeholder=\"dead-letter stream\"]", "books.dead")?;
    act(&browser, "Start redrive")?;
    let rows = poll_for(Duration::from_secs(60), async || {
        let rows = browser
            .run(
                "return [...document.querySelectorAll('#redrives tr[data-redrive]')]\
                 .map((row) => [...row.cells].map((cell) => cell.textContent));",
                &[],
            )
            .ok()?;
        let rows: Vec<Vec<String>> = serde_json::from_value(rows).ok()?;
        let ours = rows.iter().find(|row| row[0] != "rd-by-the-api")?;
        (ours[3] == "finished").then_some(rows)
    })
    .await;
    browser.screenshot(&screenshot("redrive"))?;
    let rows = rows.ok_or_else(|| anyhow::anyhow!("the redrive never showed finished"))?;
    let ours = rows.iter().find(|row| row[0] != "rd-by-the-api");
    assert_eq!(
        ours.map(|row| (row[1].as_str(), row[2].as_str(), row[4].as_str())),
        Some(("books.dead", "every tenant", LETTERS.to_string().as_str())),
        "stream, tenant, redriven: {rows:?}"
    );
    assert!(rows.iter().any(|row| row[0] == "rd-by-the-api"), "{rows:?}");
    let acked = setup.wait_for("books.acked", LETTERS as usize).await?;
    assert_eq!(acked.len(), LETTERS as usize);
    Ok(())
}

/// A page served by another local server, open in the same browser as a signed-in console,
/// posts to the console's actions (a form, and a script with credentials): every one is
/// refused, and the tenant is not paused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_origin_changes_nothing() -> anyhow::Result<()> {
    let (fixture, host) = host("origin", false).await?;
    let (addr, api, browser) = operator_console(&fixture, &host).await?;

    let target = format!("http://{addr}/v1/tenants/acme/pause");
    let page = format!(
        "<!doctype html><html><body><p id=\"said\">posting</p>\
         <form id=\"f\" method=\"post\" action=\"{target}\" target=\"sink\" enctype=\"text/plain\">\
         <input name=\"x\" value=\"1\"></form><iframe name=\"sink\"></iframe>\
         <script>\
         fetch('{target}', {{method: 'POST', credentials: 'include', body: '{{}}',\
           headers: {{'Content-Type': 'application/json'}}}})\
           .then(r => document.getElementById('said').textContent = 'answered ' + r.status)\
           .catch(e => document.getElementById('said').textContent = 'refused ' + e);\
         document.getElementById('f').submit();\
         </script></body></html>"
    );
    let other = serve_page(page)?;
    browser.goto(&format!("http://{other}/"))?;
    let said = poll_for(Duration::from_secs(20), async || {
        browser.text().ok().filter(|t| !t.contains("posting"))
    })
    .await;
    browser.screenshot(&screenshot("other-origin"))?;
    anyhow::ensure!(said.is_some(), "the page's script never finished");
    // Whatever the browser let through, the host refused it: the tenant runs on.
    let paused = poll_for(Duration::from_secs(3), async || {
        let status = status(&api).ok()?;
        let acme = (status["tenants"].as_array()?.iter()).find(|t| t["name"] == "acme")?;
        (acme["paused"] == true).then_some(())
    })
    .await;
    assert_eq!(paused, None, "a page of another origin paused the tenant");
    let log = host.output();
    assert!(
        log.contains("admin API refused a request"),
        "the host says why it refused: {log}"
    );
    Ok(())
}

/// A one-page HTTP server on a free loopback port, answering `page` to every request, for as
/// long as the test runs.
fn serve_page(page: String) -> anyhow::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0_u8; 4096];
            let _ = stream.read(&mut request);
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    Ok(addr)
}
