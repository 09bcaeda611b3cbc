//! Which `Host` and `Origin` headers the admin API answers: its own address, and names the
//! operator gave.
//!
//! A web page can make a browser send requests to `127.0.0.1:9465` under a name of its own
//! that it re-points at loopback (DNS rebinding); such a request carries that name as its
//! `Host`. So a request whose `Host` is neither the listening address (an IP literal, or
//! `localhost` on loopback) nor a configured name (`--admin-host`) is refused. On a wildcard
//! address (`0.0.0.0`, `::`) any IP literal with the right port is the host's own: rebinding
//! always comes under a name.
//!
//! A browser names the page a request comes from in `Origin` (and says how it relates to the
//! target in `Sec-Fetch-Site`). The API's own origins are its scheme (`https` over TLS, else
//! `http`) with a `Host` it answers; a request from any other origin (`null` too: a sandboxed
//! page, a file) is refused, whatever else it carries. Requests without an `Origin` (the
//! verbs, `curl`, probes) are not browsers' cross-site requests and pass this check.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderValue;
use axum::http::Uri;
use axum::http::uri::Authority;
use ruststream_common::escape::quote;

/// A name the admin API also answers to (`--admin-host`): `NAME` (with the listening port)
/// or `NAME:PORT` (exactly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostName {
    name: String,
    port: Option<u16>,
}

/// Parses `--admin-host`: `NAME` or `NAME:PORT`.
///
/// # Errors
/// When it is not a host name with an optional port.
pub fn parse_host_name(input: &str) -> Result<HostName, String> {
    let bad = || {
        format!(
            "`{}` is not a host name: give NAME or NAME:PORT",
            quote(input)
        )
    };
    let authority: Authority = input.parse().map_err(|_| bad())?;
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return Err(bad());
    }
    Ok(HostName {
        name: normalize(authority.host()),
        port: authority.port_u16(),
    })
}

fn normalize(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// The `Host`s an admin API listening on one address answers to.
#[derive(Debug, Clone)]
pub(crate) struct AllowedHosts {
    addr: SocketAddr,
    /// Over TLS: its origins are `https://`, and a `Host` without a port means 443, else 80.
    tls: bool,
    names: Vec<HostName>,
}

impl AllowedHosts {
    /// The hosts of an API listening on `addr` (over TLS when `tls`), and `names`.
    pub(crate) fn new(addr: SocketAddr, tls: bool, names: Vec<HostName>) -> Self {
        Self { addr, tls, names }
    }

    /// Whether the API is served over TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.tls
    }

    /// The port a `Host` without one means.
    fn default_port(&self) -> u16 {
        if self.tls { 443 } else { 80 }
    }

    /// The scheme of this API's own origins.
    fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }

    /// Whether a request with this `Origin` header (and `Sec-Fetch-Site`, if the browser sent
    /// one) comes from this API's own origin, or from no page at all.
    ///
    /// # Errors
    /// Why not, one line: another site's page (or `null`), or a browser saying it is
    /// cross-site.
    pub(crate) fn check_origin(
        &self,
        origin: Option<&HeaderValue>,
        fetch_site: Option<&HeaderValue>,
    ) -> Result<(), String> {
        let foreign = |shown: &str| {
            format!(
                "Origin `{}` is not this admin API's own ({}): refused, as a request a page of \
                 another site made a browser send would be",
                quote(shown),
                self.own_origins()
            )
        };
        if let Some(origin) = origin {
            let text = String::from_utf8_lossy(origin.as_bytes());
            let own = origin
                .to_str()
                .ok()
                .and_then(|text| text.parse::<Uri>().ok())
                .filter(|uri| uri.path_and_query().is_none_or(|p| p.as_str() == "/"))
                .filter(|uri| uri.scheme_str() == Some(self.scheme()))
                .and_then(|uri| {
                    let authority = uri.authority()?;
                    let port = authority.port_u16().unwrap_or(self.default_port());
                    Some(self.allows(&normalize(authority.host()), port))
                });
            if own != Some(true) {
                return Err(foreign(&text));
            }
        }
        match fetch_site.map(HeaderValue::as_bytes) {
            None | Some(b"same-origin" | b"none") => Ok(()),
            Some(other) => Err(format!(
                "Sec-Fetch-Site `{}`: the browser says a page of another origin sent this \
                 request; refused, only this admin API's own pages ({}) and clients that are \
                 not browsers may",
                quote(&String::from_utf8_lossy(other)),
                self.own_origins()
            )),
        }
    }

    /// The names clients reach this API by, without ports: its IP address (unless it is a
    /// wildcard), `localhost` on loopback or a wildcard, and the configured names.
    pub(crate) fn served_names(&self) -> Vec<String> {
        let ip = self.addr.ip();
        let mut names = Vec::new();
        if !ip.is_unspecified() {
            names.push(ip.to_string());
        }
        if ip.is_loopback() || ip.is_unspecified() {
            names.push("localhost".to_owned());
        }
        for name in &self.names {
            if !names.contains(&name.name) {
                names.push(name.name.clone());
            }
        }
        names
    }

    /// This API's own origins, for a refusal.
    fn own_origins(&self) -> String {
        let scheme = self.scheme();
        self.shown()
            .split(", ")
            .map(|host| match host.strip_prefix("any IP address") {
                Some(port) => format!("{scheme}://ANY-IP-ADDRESS{port}"),
                None => format!("{scheme}://{host}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether a request with this `Host` header is for this API.
    ///
    /// # Errors
    /// Why not, one line: no header, not a host, or not one of this API's.
    pub(crate) fn check(&self, header: Option<&HeaderValue>) -> Result<(), String> {
        let header = header.ok_or_else(|| "the request has no Host header".to_owned())?;
        let text = header
            .to_str()
            .map_err(|_| "the Host header is not text".to_owned())?;
        let authority: Authority = text
            .parse()
            .map_err(|_| format!("the Host header `{}` is not HOST[:PORT]", quote(text)))?;
        let host = normalize(authority.host());
        let port = authority.port_u16().unwrap_or(self.default_port());
        if self.allows(&host, port) {
            return Ok(());
        }
        Err(format!(
            "Host `{}` is not this admin API's address ({}) nor a name given with \
             --admin-host: refused, as a page re-pointing its own name at this host \
             (DNS rebinding) would be",
            quote(text),
            self.shown()
        ))
    }

    fn allows(&self, host: &str, port: u16) -> bool {
        let ip = self.addr.ip();
        let named = self
            .names
            .iter()
            .any(|n| n.name == host && n.port.unwrap_or(self.addr.port()) == port);
        if named {
            return true;
        }
        if port != self.addr.port() {
            return false;
        }
        match host.parse::<IpAddr>() {
            Ok(asked) => asked == ip || ip.is_unspecified(),
            Err(_) => host == "localhost" && (ip.is_loopback() || ip.is_unspecified()),
        }
    }

    /// The addresses and names accepted, for a refusal.
    fn shown(&self) -> String {
        let port = self.addr.port();
        let mut shown = Vec::new();
        if self.addr.ip().is_unspecified() {
            shown.push(format!("any IP address:{port}"));
        } else {
            shown.push(self.addr.to_string());
        }
        if self.addr.ip().is_loopback() || self.addr.ip().is_unspecified() {
            shown.push(format!("localhost:{port}"));
        }
        for name in &self.names {
            shown.push(format!("{}:{}", name.name, name.port.unwrap_or(port)));
        }
        shown.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(hosts: &AllowedHosts, header: &str) -> Result<(), String> {
        hosts.check(Some(&HeaderValue::from_str(header).expect("a header")))
    }

    #[test]
    fn loopback_answers_its_address_and_localhost() {
        let hosts = AllowedHosts::new("127.0.0.1:9465".parse().expect("addr"), false, Vec::new());
        for ok in ["127.0.0.1:9465", "localhost:9465", "LOCALHOST.:9465"] {
            check(&hosts, ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (refused, needle) in [
            (
                "evil.example:9465",
                "not this admin API's address (127.0.0.1:9465, localhost:9465)",
            ),
            ("127.0.0.1:80", "DNS rebinding"),
            ("127.0.0.1", "refused"),
            ("127.0.0.2:9465", "refused"),
            ("[::1]:9465", "refused"),
            ("a b", "not HOST[:PORT]"),
        ] {
            let error = check(&hosts, refused).expect_err(refused);
            assert!(error.contains(needle), "{refused}: {error}");
        }
        let error = hosts.check(None).expect_err("no header");
        assert_eq!(error, "the request has no Host header");
    }

    fn origin(hosts: &AllowedHosts, origin: &str) -> Result<(), String> {
        let value = HeaderValue::from_str(origin).expect("a header");
        hosts.check_origin(Some(&value), None)
    }

    #[test]
    fn only_the_apis_own_origin_or_none_passes() {
        let hosts = AllowedHosts::new("127.0.0.1:9465".parse().expect("addr"), false, Vec::new());
        for own in [
            "http://127.0.0.1:9465",
            "http://localhost:9465",
            "http://LOCALHOST:9465",
        ] {
            origin(&hosts, own).unwrap_or_else(|e| panic!("{own}: {e}"));
        }
        hosts.check_origin(None, None).expect("no page at all");
        for foreign in [
            "http://evil.example",
            "http://evil.example:9465",
            "null",
            "https://127.0.0.1:9465",
            "http://127.0.0.1:9466",
            "http://127.0.0.1",
            "http://localhost:9465/page",
            "file://",
        ] {
            let error = origin(&hosts, foreign).expect_err(foreign);
            assert!(
                error.contains(
                    "is not this admin API's own (http://127.0.0.1:9465, http://localhost:9465)"
                ),
                "{foreign}: {error}"
            );
        }
        let site = |value: &str| {
            let value = HeaderValue::from_str(value).expect("a header");
            hosts.check_origin(None, Some(&value))
        };
        site("same-origin").expect("the API's own page");
        site("none").expect("typed in the address bar");
        for refused in ["cross-site", "same-site"] {
            let error = site(refused).expect_err(refused);
            assert!(error.starts_with("Sec-Fetch-Site `"), "{error}");
        }
        let wildcard = AllowedHosts::new("0.0.0.0:9465".parse().expect("addr"), false, Vec::new());
        origin(&wildcard, "http://10.1.2.3:9465").expect("any IP address is its own");
        let error = origin(&wildcard, "http://evil.example:9465").expect_err("a name");
        assert!(
            error.contains("(http://ANY-IP-ADDRESS:9465, http://localhost:9465)"),
            "{error}"
        );
        let tls = AllowedHosts::new("127.0.0.1:443".parse().expect("addr"), true, Vec::new());
        origin(&tls, "https://127.0.0.1").expect("443 is https's own port");
        origin(&tls, "http://127.0.0.1:443").expect_err("not over TLS");
    }

    #[test]
    fn configured_names_and_wildcards() {
        let names = vec![
            parse_host_name("Admin.Example.com").expect("a name"),
            parse_host_name("proxy.example.com:443").expect("a name with a port"),
        ];
        let hosts = AllowedHosts::new("0.0.0.0:9465".parse().expect("addr"), true, names);
        for ok in [
            "admin.example.com:9465",
            "10.1.2.3:9465",
            "[fe80::1]:9465",
            "proxy.example.com",
            "proxy.example.com:443",
            "localhost:9465",
        ] {
            check(&hosts, ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for refused in ["admin.example.com:1", "10.1.2.3:1", "rebind.example:9465"] {
            check(&hosts, refused).expect_err(refused);
        }
        let v6 = AllowedHosts::new("[::1]:1".parse().expect("addr"), false, Vec::new());
        check(&v6, "[::1]:1").expect("its own address");
        assert!(parse_host_name("user@host").is_err());
        assert!(parse_host_name("").is_err());
        assert!(parse_host_name("a/b").is_err());
    }
}
