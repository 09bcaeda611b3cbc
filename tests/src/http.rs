//! Plain HTTP/1.1 to loopback servers without a client library: the host's admin API and
//! metrics endpoint, and the local servers' own state APIs.

/// One HTTP/1.1 request to `addr` (`127.0.0.1:port`) without a client library: the status code
/// and the body. Enough for the admin API's small JSON answers.
///
/// # Errors
/// When the connection fails or the answer is not HTTP.
pub fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> anyhow::Result<(u16, String)> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
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
