//! The console's overview at scale: how long headless Chromium takes to draw the fleet page and
//! the shards page of a host with 200 tenants and 1 000 shards, against the same pages of one
//! tenant with one shard (the baseline, measured in the same run).
//!
//! `cargo bench -p ruststream-tests --bench console_render` (needs Debian's `chromium` and
//! `chromium-driver`). The console's own assets (`host/fleet/src/admin/console/assets/`, the
//! bytes the host builds in) are served by a small local server with a made-up status of that
//! size: what is measured is the page drawing, in the browser, not the host. Each figure is
//! read from the page itself (`data-first-drawn-ms`: from the navigation's start to the first
//! page drawn, the status fetched; `data-render-ms`: one drawing), over [`ROUNDS`] loads.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::time::Duration;

use ruststream_tests::browser::Browser;
use ruststream_tests::wait::poll_for;
use serde_json::{Value, json};

const ROUNDS: usize = 10;
const TENANTS: usize = 200;
const SHARDS: usize = 1000;

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let dir = std::env::temp_dir().join(format!("ruststream-console-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let browser = Browser::start(&dir).await?;
        let mut report = Vec::new();
        for (name, tenants, shards) in [("baseline", 1, 1), ("large", TENANTS, SHARDS)] {
            let addr = serve(status(tenants, shards))?;
            for page in ["fleet", "shards"] {
                let (first, draw) = measure(&browser, &addr, page).await?;
                report.push((name, page, first, draw));
            }
        }
        println!("console_render ({ROUNDS} loads each, median ms; first = navigation start to first page drawn)");
        for (name, page, first, draw) in &report {
            println!("  {name:8} {page:7} first {first:8.1}  draw {draw:8.1}");
        }
        for page in ["fleet", "shards"] {
            let of = |name: &str| report.iter().find(|r| r.0 == name && r.1 == page).map(|r| r.2);
            if let (Some(base), Some(large)) = (of("baseline"), of("large")) {
                println!("  {page}: {TENANTS} tenants / {SHARDS} shards take {:.2}× the baseline's first drawing", large / base);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        anyhow::Ok(())
    })
}

/// The medians of the first drawing and of one drawing of `page`, over [`ROUNDS`] loads.
async fn measure(browser: &Browser, addr: &str, page: &str) -> anyhow::Result<(f64, f64)> {
    let (mut firsts, mut draws) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        // A fresh document each time: the fragment alone would not reload it.
        browser.goto("about:blank")?;
        browser.goto(&format!("http://{addr}/ui#/{page}"))?;
        let drawn = poll_for(Duration::from_secs(60), async || {
            let read = browser.run(
                "return [document.body.dataset.firstDrawnMs || null, document.body.dataset.renderMs || null];",
                &[],
            );
            let read = read.ok()?;
            let first: f64 = read[0].as_str()?.parse().ok()?;
            let draw: f64 = read[1].as_str()?.parse().ok()?;
            Some((first, draw))
        })
        .await;
        let (first, draw) =
            drawn.ok_or_else(|| anyhow::anyhow!("the {page} page was never drawn"))?;
        firsts.push(first);
        draws.push(draw);
    }
    Ok((median(firsts), median(draws)))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A status of `tenants` tenants, one app each, with `shards` shards spread over them.
fn status(tenants: usize, shards: usize) -> Value {
    let per_tenant = shards.div_ceil(tenants);
    let tenants: Vec<Value> = (0..tenants)
        .map(|t| {
            let shards: Vec<Value> = (0..per_tenant)
                .map(|s| {
                    json!({
                        "shard_id": format!("shardId-{s:012}"),
                        "state": "reading",
                        "owner": if s % 3 == 0 { "host-b" } else { "host-a" },
                        "checkpoint": format!("4968090263{t:06}{s:036}"),
                        "held_at": if s % 10 == 0 { Value::from(format!("4968090263{t:06}{s:036}")) } else { Value::Null },
                        "held_since_ms": Value::Null,
                        "delivered": 1000 + s,
                        "outcomes": {"ack": 1000, "drop": s % 4, "retry": 0, "retry_after": 0, "trapped": 0, "foreign_copies": 0},
                        "millis_behind_latest": s * 10,
                        "read": "polling",
                        "paused": false,
                        "copies_pending": 0,
                    })
                })
                .collect();
            json!({
                "name": format!("tenant-{t:03}"),
                "paused": t % 17 == 0,
                "pause_reason": if t % 17 == 0 { Value::from("operator") } else { Value::Null },
                "refused": [],
                "apps": [{
                    "name": "ledger", "component": "ledger", "version": "1.2.0",
                    "content_hash": format!("{t:064x}"), "previous": null, "rollout": null,
                    "rollbacks": 0, "shadow": null,
                    "fleet": {"revision": 3, "live_hash": format!("{t:064x}"), "converged": true,
                              "read_at_ms": 0, "running": [{"owner": "host-a", "converged": true}, {"owner": "host-b", "converged": true}]},
                    "subscriptions": [{"name": "book", "stream": format!("stream-{t}"), "error": null, "shards": shards}],
                }],
            })
        })
        .collect();
    json!({"owner": "host-a", "ready": true, "not_ready": [], "tenants": tenants})
}

/// A local server of the console's assets and of `status`, on a free loopback port.
fn serve(status: Value) -> anyhow::Result<String> {
    let assets =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/fleet/src/admin/console/assets");
    let read = |name: &str| std::fs::read_to_string(assets.join(name));
    let (index, script, style) = (read("index.html")?, read("app.js")?, read("app.css")?);
    let status = status.to_string();
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0_u8; 8192];
            let read = stream.read(&mut request).unwrap_or(0);
            let head = String::from_utf8_lossy(&request[..read]);
            let path = head.split_whitespace().nth(1).unwrap_or("/");
            let (kind, body) = match path {
                "/ui" => ("text/html", index.as_str()),
                "/ui/app.js" => ("text/javascript", script.as_str()),
                "/ui/app.css" => ("text/css", style.as_str()),
                "/ui/session" => (
                    "application/json",
                    r#"{"csrf":"x","token_id":"operator","tenant":null}"#,
                ),
                "/v1/status" => ("application/json", status.as_str()),
                "/v1/history" => (
                    "application/json",
                    r#"{"interval_ms":1000,"lag":[],"rate":[]}"#,
                ),
                _ => ("application/json", "{}"),
            };
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    Ok(addr)
}
