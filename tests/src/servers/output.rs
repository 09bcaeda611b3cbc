//! What a server prints: read line by line so it never blocks on a full pipe, kept (its tail,
//! capped) for error messages, with the port announcements of `loopback.cjs` picked out.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;

/// Most server output kept for error messages; the tail is what explains a crash.
const OUTPUT_CAP: usize = 64 * 1024;

/// Copies `stream` line by line into `output`, sending each port announcement of
/// `loopback.cjs` to `ports`. Reading never stops early, so the server never blocks on a full
/// pipe.
pub(super) fn capture<R>(
    stream: Option<R>,
    output: Arc<Mutex<String>>,
    ports: Option<mpsc::UnboundedSender<(u16, u16)>>,
) where
    R: AsyncRead + Unpin + Send + 'static,
{
    let Some(stream) = stream else { return };
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        while matches!(reader.read_until(b'\n', &mut line).await, Ok(n) if n > 0) {
            let text = String::from_utf8_lossy(&line);
            if let (Some(ports), Some(announced)) = (&ports, parse_announcement(&text)) {
                let _ = ports.send(announced);
            }
            append_capped(&output, &text);
            line.clear();
        }
    });
}

/// Parses `loopback-listening requested=<port> port=<port>` (see `loopback.cjs`).
fn parse_announcement(line: &str) -> Option<(u16, u16)> {
    let rest = line.trim().strip_prefix("loopback-listening requested=")?;
    let (requested, port) = rest.split_once(" port=")?;
    Some((requested.parse().ok()?, port.parse().ok()?))
}

fn append_capped(output: &Mutex<String>, text: &str) {
    let mut output = lock(output);
    output.push_str(text);
    if output.len() > OUTPUT_CAP {
        let mut cut = output.len() - OUTPUT_CAP / 2;
        while !output.is_char_boundary(cut) {
            cut += 1;
        }
        output.replace_range(..cut, "[…]\n");
    }
}

pub(super) use ruststream_common::sync::lock;
