//! A real browser for the console's tests: Debian's headless Chromium, driven through
//! ChromeDriver's WebDriver protocol (W3C, JSON over HTTP on loopback) with the plain HTTP of
//! [`crate::http`], so no client library is needed. A test that needs it and finds no
//! `chromedriver` fails, saying how to install it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use crate::process::Running;
use crate::wait::poll_for;

/// How long an element may take to accept a click or text once it is found.
const ELEMENT_SETTLES: Duration = Duration::from_secs(15);

/// Where Debian's packages put them.
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// A headless Chromium session, ended (and its driver killed) when dropped.
pub struct Browser {
    driver: Running,
    addr: String,
    session: String,
    /// Its profile, removed with it.
    profile: PathBuf,
}

impl Browser {
    /// Starts ChromeDriver on a free loopback port and a headless Chromium session in a fresh
    /// profile under `dir`.
    ///
    /// # Errors
    /// ChromeDriver or Chromium is missing, or the session does not start.
    pub async fn start(dir: &Path) -> Result<Self> {
        for (path, package) in [(CHROMEDRIVER, "chromium-driver"), (CHROMIUM, "chromium")] {
            if !Path::new(path).exists() {
                bail!(
                    "{path} is missing: the console's browser tests need Debian's `{package}` \
                     package (`apt-get install chromium chromium-driver`; .ci/run installs both)"
                );
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting chromedriver")?;
        let driver = Running(child);
        let addr = format!("127.0.0.1:{port}");
        let ready = poll_for(Duration::from_secs(30), async || {
            let (status, body) = exchange(&addr, "GET", "/status", b"").ok()?;
            (status == 200 && body.contains("\"ready\":true")).then_some(())
        })
        .await;
        anyhow::ensure!(ready.is_some(), "chromedriver did not start on {addr}");
        let profile = dir.join(format!("chromium-{port}"));
        std::fs::create_dir_all(&profile)?;
        // Flags a closed network needs: nothing fetched in the background, no QUIC.
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1400,1000",
        ]
        .map(String::from)
        .into_iter()
        .chain([format!("--user-data-dir={}", profile.display())])
        .collect::<Vec<_>>();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let mut browser = Self {
            driver,
            addr,
            session: String::new(),
            profile,
        };
        let answer = browser.call("POST", "/session", &capabilities)?;
        browser.session = answer["sessionId"]
            .as_str()
            .context("no session id")?
            .to_owned();
        Ok(browser)
    }

    /// One WebDriver command: its `value`.
    fn call(&self, method: &str, path: &str, body: &Value) -> Result<Value> {
        let body = if method == "GET" {
            Vec::new()
        } else {
            serde_json::to_vec(body)?
        };
        let (status, answer) = exchange(&self.addr, method, path, &body)?;
        let answer: Value = serde_json::from_str(&answer)
            .with_context(|| format!("chromedriver answered {status} to {path}: {answer}"))?;
        if status != 200 {
            bail!(
                "chromedriver: {method} {path}: {status} {}",
                answer["value"]
            );
        }
        Ok(answer["value"].clone())
    }

    fn session_call(&self, method: &str, path: &str, body: &Value) -> Result<Value> {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    /// Opens `url`.
    ///
    /// # Errors
    /// The driver refused.
    pub fn goto(&self, url: &str) -> Result<()> {
        self.session_call("POST", "/url", &json!({ "url": url }))
            .map(drop)
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page; its return value.
    ///
    /// # Errors
    /// The driver refused, or the script threw.
    pub fn run(&self, script: &str, args: &[Value]) -> Result<Value> {
        self.session_call(
            "POST",
            "/execute/sync",
            &json!({ "script": script, "args": args }),
        )
    }

    /// Runs `script` (a function body ending by calling `arguments[arguments.length - 1]`
    /// with its result) in the page.
    ///
    /// # Errors
    /// The driver refused, or the script threw.
    pub fn run_async(&self, script: &str, args: &[Value]) -> Result<Value> {
        self.session_call(
            "POST",
            "/execute/async",
            &json!({ "script": script, "args": args }),
        )
    }

    /// The first element matching `css`, its id for the driver.
    fn find(&self, css: &str) -> Result<String> {
        let found = self.session_call(
            "POST",
            "/element",
            &json!({ "using": "css selector", "value": css }),
        )?;
        (found.as_object())
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .map(str::to_owned)
            .with_context(|| format!("no element {css}"))
    }

    /// Clicks the first element matching `css`.
    ///
    /// # Errors
    /// No such element, or the driver refused.
    pub fn click(&self, css: &str) -> Result<()> {
        self.on_element(css, "click", &json!({}))
    }

    /// Types `text` into the first element matching `css`.
    ///
    /// # Errors
    /// No such element, or the driver refused.
    pub fn type_into(&self, css: &str, text: &str) -> Result<()> {
        self.on_element(css, "value", &json!({ "text": text }))
    }

    /// Does `action` (`click`, `value`) with `body` on the first element matching `css`, once
    /// the element takes it (within [`ELEMENT_SETTLES`]).
    fn on_element(&self, css: &str, action: &str, body: &Value) -> Result<()> {
        let deadline = Instant::now() + ELEMENT_SETTLES;
        loop {
            let id = self.find(css)?;
            match self.session_call("POST", &format!("/element/{id}/{action}"), body) {
                Ok(_) => return Ok(()),
                // Nothing was done to the element: the page drew itself again between the find
                // and the action (stale), or has not finished laying it out (a form the page
                // shows once its data arrives, slow on a loaded machine). Find it again.
                Err(error)
                    if Instant::now() < deadline
                        && ["stale element", "element not interactable"]
                            .iter()
                            .any(|settling| error.to_string().contains(settling)) =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The visible text of the page's body.
    ///
    /// # Errors
    /// The driver refused.
    pub fn text(&self) -> Result<String> {
        let text = self.run("return document.body.innerText;", &[])?;
        Ok(text.as_str().unwrap_or_default().to_owned())
    }

    /// Waits, for at most `within`, until the page's text holds `wanted`.
    ///
    /// # Errors
    /// It did not; the error holds the page's text.
    pub async fn wait_for_text(&self, wanted: &str, within: Duration) -> Result<()> {
        let shown = poll_for(within, async || {
            self.text().ok().filter(|text| text.contains(wanted))
        })
        .await;
        match shown {
            Some(_) => Ok(()),
            None => bail!("the page never showed {wanted:?}: {}", self.text()?),
        }
    }

    /// Saves a screenshot of the page to `path` (PNG), for people to look at.
    ///
    /// # Errors
    /// The driver refused, or the file cannot be written.
    pub fn screenshot(&self, path: &Path) -> Result<()> {
        use base64::Engine as _;
        let png = self.session_call("GET", "/screenshot", &json!({}))?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap_or_default())
            .context("a screenshot that is not base64")?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, png)?;
        Ok(())
    }
}

/// One request to the driver: its status and body. The driver keeps its connections open, so
/// the answer is read to its `Content-Length`, not to the connection's end.
fn exchange(addr: &str, method: &str, path: &str, body: &[u8]) -> Result<(u16, String)> {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = (line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("not an HTTP answer: {line}"))?;
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value
                .trim()
                .parse()
                .context("a Content-Length that is not a number")?;
        }
    }
    let mut answer = vec![0; length];
    reader.read_exact(&mut answer)?;
    Ok((status, String::from_utf8_lossy(&answer).into_owned()))
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), &json!({}));
        }
        let _ = self.driver.0.kill();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
