//! A loopback proxy in front of a local server that notes who signed each request: the access
//! key id of its SigV4 `Authorization` header, its `X-Amz-Target` and its body. Requests and
//! answers pass through unchanged; the tests read the notes to tell whose credentials a call
//! ran with, which the local servers themselves do not check.
//!
//! It can also **stall** chosen operations: such a request is read (the connection was
//! accepted and the request taken) and then never forwarded nor answered; the connection stays
//! open until the client gives up on it. This is a server that hangs after connecting, which no
//! fault at the SDK's HTTP seam can show.
//!
//! And it can **deny** chosen operations as IAM would: a request of such an operation signed by
//! any key but the allowed ones is answered `400 AccessDeniedException` (the JSON protocol's
//! error, as Kinesis sends it) and never forwarded. The local servers check no policy, so this
//! is how a tenant whose role may not read a stream is shown.
//!
//! And it can **end subscriptions** as Kinesis does after five minutes: a `SubscribeToShard`
//! answer is relayed event by event and, once it is older than a lifetime the test sets, closed
//! cleanly between two events (the chunked body's last chunk), while its connection to the
//! server is dropped. kinesis-local keeps a subscription open for as long as its client stays.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use ruststream_common::sync::lock;

/// One request as it passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRequest {
    /// The access key id it was signed with; empty when unsigned.
    pub access_key_id: String,
    /// Its `X-Amz-Target` (`Kinesis_20131202.GetRecords`, `DynamoDB_20120810.PutItem`, ...).
    pub target: String,
    /// Its body as text.
    pub body: String,
    /// When it was forwarded (or stalled).
    pub at: Instant,
    /// It was stalled: never forwarded, never answered.
    pub stalled: bool,
    /// It was denied: answered `AccessDeniedException`, never forwarded.
    pub denied: bool,
}

/// What the proxy noted, and which operations it stalls.
#[derive(Debug, Default)]
struct Notes {
    seen: Vec<SignedRequest>,
    stalls: Vec<Stall>,
    denials: Vec<Denial>,
    /// How long a `SubscribeToShard` answer is relayed before it is ended; `None`: as long as
    /// the server sends it.
    subscription_lifetime: Option<Duration>,
    /// Subscriptions the proxy ended.
    subscriptions_ended: usize,
}

/// Operations denied to every key but `allowed`.
#[derive(Debug)]
struct Denial {
    operations: Vec<String>,
    allowed: Vec<String>,
}

#[derive(Debug)]
struct Stall {
    operations: Vec<String>,
    /// Requests still to stall; `None` until cleared.
    remaining: Option<u32>,
}

impl Notes {
    /// Whether a request of `operation` (the part of its target after the last `.`) is stalled;
    /// counts the stall down.
    fn stalls(&mut self, operation: &str) -> bool {
        let Some(stall) = self
            .stalls
            .iter_mut()
            .find(|s| s.remaining != Some(0) && s.operations.iter().any(|op| op == operation))
        else {
            return false;
        };
        if let Some(remaining) = &mut stall.remaining {
            *remaining -= 1;
        }
        true
    }

    /// Whether a request of `operation` signed by `key` is denied.
    fn denies(&self, operation: &str, key: &str) -> bool {
        self.denials.iter().any(|denial| {
            denial.operations.iter().any(|op| op == operation)
                && !denial.allowed.iter().any(|allowed| allowed == key)
        })
    }
}

/// A proxy on a free loopback port forwarding to `upstream`; stops when dropped.
#[derive(Debug)]
pub struct RecordingProxy {
    port: u16,
    notes: Arc<Mutex<Notes>>,
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
        let notes = Arc::new(Mutex::new(Notes::default()));
        let upstream = upstream.to_owned();
        let kept = notes.clone();
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
            notes: kept,
            accepting,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<SignedRequest> {
        lock(&self.notes).seen.clone()
    }

    /// Requests whose target ends with `.operation` (`GetRecords`, ...), in order.
    pub fn calls(&self, operation: &str) -> Vec<SignedRequest> {
        let suffix = format!(".{operation}");
        lock(&self.notes)
            .seen
            .iter()
            .filter(|r| r.target.ends_with(&suffix))
            .cloned()
            .collect()
    }

    /// Stalls the next `times` requests of any of `operations` (`GetRecords`, `ListShards`,
    /// ...): each is taken and never forwarded nor answered.
    pub fn stall(&self, operations: &[&str], times: u32) {
        self.add_stall(operations, Some(times));
    }

    /// Stalls every request of any of `operations` until [`clear_stalls`](Self::clear_stalls).
    pub fn stall_until_cleared(&self, operations: &[&str]) {
        self.add_stall(operations, None);
    }

    /// Stalls no more requests (those stalled stay so until their clients give up).
    pub fn clear_stalls(&self) {
        lock(&self.notes).stalls.clear();
    }

    /// How many requests of `operation` were stalled.
    pub fn stalled(&self, operation: &str) -> usize {
        self.calls(operation).iter().filter(|r| r.stalled).count()
    }

    /// Denies every request of any of `operations` signed by a key not in `allowed`, until
    /// [`clear_denials`](Self::clear_denials): each is answered `AccessDeniedException`.
    pub fn deny_unless_signed_by(&self, operations: &[&str], allowed: &[&str]) {
        let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
        lock(&self.notes).denials.push(Denial {
            operations: owned(operations),
            allowed: owned(allowed),
        });
    }

    /// Denies nothing more.
    pub fn clear_denials(&self) {
        lock(&self.notes).denials.clear();
    }

    /// How many requests of `operation` were denied.
    pub fn denied(&self, operation: &str) -> usize {
        self.calls(operation).iter().filter(|r| r.denied).count()
    }

    /// Ends every `SubscribeToShard` answer begun from now on once it is `lifetime` old, cleanly
    /// between two events, as Kinesis ends a subscription after five minutes.
    pub fn end_subscriptions_after(&self, lifetime: Duration) {
        lock(&self.notes).subscription_lifetime = Some(lifetime);
    }

    /// How many subscriptions the proxy ended.
    pub fn subscriptions_ended(&self) -> usize {
        lock(&self.notes).subscriptions_ended
    }

    fn add_stall(&self, operations: &[&str], remaining: Option<u32>) {
        lock(&self.notes).stalls.push(Stall {
            operations: operations.iter().map(|op| (*op).to_owned()).collect(),
            remaining,
        });
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Copies answers back as they come, and requests forward one at a time, noting each. A
/// stalled request ends the forwarding: the connection is held, unanswered, until the client
/// closes it.
async fn forward(client: TcpStream, upstream: &str, notes: Arc<Mutex<Notes>>) -> Result<()> {
    let server = TcpStream::connect(upstream)
        .await
        .with_context(|| format!("connecting to {upstream}"))?;
    let (client_read, client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // The server's answers and the proxy's own denials go back on one connection: a client
    // sends its next request only once it has the answer to the last, so they never mix.
    let client_write = Arc::new(tokio::sync::Mutex::new(client_write));
    let writer = client_write.clone();
    let answers = tokio::spawn(async move {
        let mut chunk = vec![0u8; 64 << 10];
        while let Ok(read) = server_read.read(&mut chunk).await {
            if read == 0 || writer.lock().await.write_all(&chunk[..read]).await.is_err() {
                break;
            }
        }
    });
    let mut requests = BufReader::new(client_read);
    while let Some((raw, mut note)) = next_request(&mut requests).await? {
        let operation = note
            .target
            .rsplit('.')
            .next()
            .unwrap_or_default()
            .to_owned();
        let (stalled, denied, lifetime) = {
            let mut notes = lock(&notes);
            note.denied = notes.denies(&operation, &note.access_key_id);
            note.stalled = !note.denied && notes.stalls(&operation);
            let said = (note.stalled, note.denied);
            notes.seen.push(note);
            let lifetime = notes
                .subscription_lifetime
                .filter(|_| operation == "SubscribeToShard");
            (said.0, said.1, lifetime)
        };
        if denied {
            let answer = access_denied(&operation);
            client_write.lock().await.write_all(&answer).await?;
            continue;
        }
        if let Some(lifetime) = lifetime {
            // The subscription gets a server connection of its own, and the client's ends
            // with it (`Connection: close`), so nothing else is answered on either.
            answers.abort();
            let ended = {
                let mut client = client_write.lock().await;
                relay_subscription(&raw, upstream, &mut client, lifetime).await?
            };
            if ended {
                lock(&notes).subscriptions_ended += 1;
            }
            return Ok(());
        }
        if stalled {
            // Hold the connection until the client gives up on it.
            let mut rest = Vec::new();
            let _ = requests.read_to_end(&mut rest).await;
            break;
        }
        server_write.write_all(&raw).await?;
    }
    answers.abort();
    Ok(())
}

/// Forwards the `SubscribeToShard` request `raw` to `upstream` on a connection of its own and
/// relays the answer to `client` until it is `lifetime` old, then ends its chunked body between
/// two event-stream messages. Whether the proxy ended it (rather than the server).
async fn relay_subscription(
    raw: &[u8],
    upstream: &str,
    client: &mut OwnedWriteHalf,
    lifetime: Duration,
) -> Result<bool> {
    let ends_at = tokio::time::Instant::now() + lifetime;
    let server = TcpStream::connect(upstream)
        .await
        .with_context(|| format!("connecting to {upstream}"))?;
    let (server_read, mut server_write) = server.into_split();
    server_write.write_all(raw).await?;
    let mut answer = BufReader::new(server_read);
    let mut head = Vec::new();
    let (mut chunked, mut length) = (false, 0usize);
    loop {
        let mut line = Vec::new();
        if answer.read_until(b'\n', &mut line).await? == 0 {
            anyhow::bail!("the server closed the subscription before its answer's head ended");
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_owned();
        if text.is_empty() {
            break;
        }
        let (name, value) = text.split_once(':').unwrap_or((&text, ""));
        match name.to_ascii_lowercase().as_str() {
            "connection" => continue,
            "transfer-encoding" => chunked = value.trim().eq_ignore_ascii_case("chunked"),
            "content-length" => length = value.trim().parse().context("a bad Content-Length")?,
            _ => {}
        }
        head.extend_from_slice(&line);
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    client.write_all(&head).await?;
    if !chunked {
        // A refusal: a plain answer, relayed whole.
        let mut body = vec![0; length];
        answer.read_exact(&mut body).await?;
        client.write_all(&body).await?;
        return Ok(false);
    }
    let mut messages = MessageBounds::default();
    loop {
        let mut size_line = Vec::new();
        let read = if messages.at_boundary() {
            match tokio::time::timeout_at(ends_at, answer.read_until(b'\n', &mut size_line)).await {
                Ok(read) => read?,
                Err(_) => {
                    client.write_all(b"0\r\n\r\n").await?;
                    return Ok(true);
                }
            }
        } else {
            answer.read_until(b'\n', &mut size_line).await?
        };
        if read == 0 {
            return Ok(false);
        }
        let size_text = String::from_utf8_lossy(&size_line);
        let size_hex = size_text.trim().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(size_hex, 16)
            .with_context(|| format!("a bad chunk size {size_hex:?}"))?;
        let mut chunk = vec![0; size + 2];
        answer.read_exact(&mut chunk).await?;
        messages.pass(&chunk[..size]);
        client.write_all(&size_line).await?;
        client.write_all(&chunk).await?;
        if size == 0 {
            return Ok(false);
        }
    }
}

/// Where the event-stream messages of a body begin and end: each opens with its total length
/// (a big-endian `u32`, the length itself included).
#[derive(Debug, Default)]
struct MessageBounds {
    /// Bytes of the current message still to come; 0 between messages.
    left: usize,
    /// The opening bytes of the next message's length read so far.
    prelude: Vec<u8>,
}

impl MessageBounds {
    fn pass(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.left == 0 {
                let take = (4 - self.prelude.len()).min(bytes.len());
                self.prelude.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                if let Ok(length) = <[u8; 4]>::try_from(self.prelude.as_slice()) {
                    self.left = (u32::from_be_bytes(length) as usize).saturating_sub(4);
                    self.prelude.clear();
                }
            } else {
                let take = self.left.min(bytes.len());
                self.left -= take;
                bytes = &bytes[take..];
            }
        }
    }

    fn at_boundary(&self) -> bool {
        self.left == 0 && self.prelude.is_empty()
    }
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
        stalled: false,
        denied: false,
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

/// The answer IAM gives a request of `operation` its caller may not make: `400` with the JSON
/// protocol's `AccessDeniedException`.
fn access_denied(operation: &str) -> Vec<u8> {
    let body = format!(
        r#"{{"__type":"AccessDeniedException","message":"User: arn:aws:sts::123456789012:assumed-role/denied/session is not authorized to perform: kinesis:{operation} because no identity-based policy allows the kinesis:{operation} action"}}"#
    );
    format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.1\r\n\
         x-amzn-RequestId: denied-by-the-recording-proxy\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
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
    fn message_bounds_follow_each_message_s_length_across_chunks() {
        let mut bounds = MessageBounds::default();
        assert!(bounds.at_boundary());
        // A 10-byte message split 3 + 9 with the next one's first 2 bytes.
        bounds.pass(&[0, 0, 0]);
        assert!(!bounds.at_boundary());
        bounds.pass(&[10, 1, 2, 3, 4, 5, 6, 0, 0]);
        assert!(!bounds.at_boundary(), "the next message began");
        bounds.pass(&[0, 5, 9]);
        assert!(bounds.at_boundary());
    }

    #[test]
    fn the_access_key_id_is_the_credential_s_first_part() {
        let header = "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20261201/us-east-1/kinesis/aws4_request, SignedHeaders=host, Signature=ab";
        assert_eq!(access_key_id(header), "ASIAEXAMPLE");
        assert_eq!(access_key_id("Bearer x"), "");
    }
}
