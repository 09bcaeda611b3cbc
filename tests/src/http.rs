//! Plain HTTP/1.1 to loopback servers without a client library: the host's admin API and
//! metrics endpoint, and the local servers' own state APIs.

use std::io::{Read as _, Write as _};
use std::path::Path;

/// One HTTP/1.1 request to `addr` (`127.0.0.1:port`) without a client library: the status code
/// and the body. Enough for the admin API's small JSON answers.
///
/// # Errors
/// When the connection fails or the answer is not HTTP.
pub fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> anyhow::Result<(u16, String)> {
    request(addr, method, path, &[], body)
}

/// [`http`] with `headers` added (a `Host` among them replaces the default, `addr`).
///
/// # Errors
/// As [`http`].
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> anyhow::Result<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    let host = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("host"))
        .map_or(addr, |(_, value)| value);
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("host"))
    {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    read_answer(stream)
}

/// Signs in to the console of the host at `addr` with `token` (`POST /ui/session`), as a
/// browser would: the session cookie (`name=value`) and the session's CSRF token.
///
/// # Errors
/// When the connection fails, or the sign-in is refused (the error holds the answer).
pub fn console_sign_in(addr: &str, token: &str) -> anyhow::Result<(String, String)> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    let body = serde_json::json!({ "token": token }).to_string();
    let head = format!(
        "POST /ui/session HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let cookie = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("set-cookie"))
        .and_then(|(_, value)| value.trim().split(';').next())
        .map(str::to_owned);
    let csrf = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|session| session["csrf"].as_str().map(str::to_owned));
    match (cookie, csrf) {
        (Some(cookie), Some(csrf)) => Ok((cookie, csrf)),
        _ => anyhow::bail!("the console refused the sign-in: {answer}"),
    }
}

/// Reads an HTTP/1.1 answer to its end (the request asked to close): status and body.
///
/// # Errors
/// When the connection fails or the answer is not HTTP.
pub fn read_answer(mut stream: std::net::TcpStream) -> anyhow::Result<(u16, String)> {
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("not an HTTP answer: {answer}"))?;
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// A host's admin API as an operator reaches it: its loopback address and its token.
#[derive(Debug, Clone)]
pub struct AdminApi {
    /// `127.0.0.1:port`.
    pub addr: String,
    /// The bearer token.
    pub token: String,
}

impl AdminApi {
    /// The API at `addr` of the host keeping its state in `state_dir`.
    ///
    /// # Errors
    /// When the host's token cannot be read.
    pub fn new(addr: &str, state_dir: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            addr: addr.to_owned(),
            token: admin_token(state_dir)?,
        })
    }

    /// One request with the token, and `content_type` when given.
    ///
    /// # Errors
    /// As [`http`].
    pub fn call(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> anyhow::Result<(u16, String)> {
        let bearer = format!("Bearer {}", self.token);
        let mut headers = vec![("Authorization", bearer.as_str())];
        headers.extend(content_type.map(|t| ("Content-Type", t)));
        request(&self.addr, method, path, &headers, body)
    }
}

/// The admin token the host keeps in `state_dir`, once it made it.
///
/// # Errors
/// When the file cannot be read.
pub fn admin_token(state_dir: &Path) -> anyhow::Result<String> {
    let path = state_dir.join("admin-token");
    let text = std::fs::read_to_string(&path)
        .map_err(|error| anyhow::anyhow!("no admin token at {}: {error}", path.display()))?;
    Ok(text.trim().to_owned())
}
