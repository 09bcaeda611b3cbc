//! A loopback proxy in front of a local server that notes who signed each request: the access
//! key id of its SigV4 `Authorization` header, its `X-Amz-Target` and its body. Requests and
//! answers pass through unchanged; the tests read the notes to tell whose credentials a call
//! ran with, which the local servers themselves do not check.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context as _, Result};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use ruststream_runtime::internals::lock;

/// One request as it passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRequest {
    /// The access key id it was signed with; empty when unsigned.
    pub access_key_id: String,
    /// Its `X-Amz-Target` (`Kinesis_20131202.GetRecords`, `DynamoDB_20120810.PutItem`, ...).
    pub target: String,
    /// Its body as text.
    pub body: String,
    /// When it was forwarded.
    pub at: Instant,
}

/// A proxy on a free loopback port forwarding to `upstream`; stops when dropped.
#[derive(Debug)]
pub struct RecordingProxy {
    port: u16,
    seen: Arc<Mutex<Vec<SignedRequest>>>,
    accepting: JoinHandle<()>,
}

impl RecordingProxy {
    /// Listens on 127.0.0.1 and forwards every connection to `upstream` (`127.0.0.1:port`).
    ///
    /// # Errors
    /// When no loopback port can be bound.
    pub async fn start(upstream: &str) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let upstream = upstream.to_owned();
        let notes = seen.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, notes) = (upstream.clone(), notes.clone());
                tokio::spawn(async move {
                    if let Err(error) = forward(client, &upstream, notes).await {
                        eprintln!("recording proxy: connection ended: {error:#}");
                    }
                });
            }
        });
        Ok(Self {
            port,
            seen,
            accepting,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<SignedRequest> {
        lock(&self.seen).clone()
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Copies answers back as they come, and requests forward one at a time, noting each.
async fn forward(
    client: TcpStream,
    upstream: &str,
    notes: Arc<Mutex<Vec<SignedRequest>>>,
) -> Result<()> {
    let server = TcpStream::connect(upstream)
        .await
        .with_context(|| format!("connecting to {upstream}"))?;
    let (client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let answers = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
    });
    let mut requests = BufReader::new(client_read);
    while let Some((raw, note)) = next_request(&mut requests).await? {
        lock(&notes).push(note);
        server_write.write_all(&raw).await?;
    }
    answers.abort();
    Ok(())
}

/// The next request's bytes (head and `Content-Length` body) and what it says; `None` at the
/// end of the connection.
async fn next_request(
    reader: &mut BufReader<OwnedReadHalf>,
) -> Result<Option<(Vec<u8>, SignedRequest)>> {
    let mut raw = Vec::new();
    let mut length = 0usize;
    let mut note = SignedRequest {
        access_key_id: String::new(),
        target: String::new(),
        body: String::new(),
        at: Instant::now(),
    };
    loop {
        let start = raw.len();
        if reader.read_until(b'\n', &mut raw).await? == 0 {
            return Ok(None);
        }
        let line = String::from_utf8_lossy(&raw[start..]).trim_end().to_owned();
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse().context("a bad Content-Length")?,
            "x-amz-target" => note.target = value.to_owned(),
            "authorization" => note.access_key_id = access_key_id(value).to_owned(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    note.body = String::from_utf8_lossy(&body).into_owned();
    note.at = Instant::now();
    raw.extend_from_slice(&body);
    Ok(Some((raw, note)))
}

/// `AWS4-HMAC-SHA256 Credential=AKID/date/region/service/aws4_request, ...` → `AKID`.
fn access_key_id(authorization: &str) -> &str {
    authorization
        .split_once("Credential=")
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_access_key_id_is_the_credential_s_first_part() {
        let header = "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20261201/us-east-1/kinesis/aws4_request, SignedHeaders=host, Signature=ab";
        assert_eq!(access_key_id(header), "ASIAEXAMPLE");
        assert_eq!(access_key_id("Bearer x"), "");
    }
}
