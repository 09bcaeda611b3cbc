//! What a component may import: each import is granted (the host's contract, and the WASI 0.2
//! interfaces a language's standard library needs), denied (a WASI interface the tenant is not
//! granted, linked to an implementation that refuses every call) or refused (anything else: the
//! component does not load).
//!
//! Denying rather than refusing is what lets components from other toolchains load: CPython
//! (componentize-py) imports `wasi:sockets/*` and StarlingMonkey (componentize-js) imports
//! `wasi:http/*` whether or not the handler uses them. wasmtime-wasi and wasmtime-wasi-http
//! serve them here under a context that allows nothing: every socket is refused with
//! `access-denied` before an OS socket exists, every name lookup fails, every outgoing request
//! ends in `http-request-denied` before a connection is tried.

use std::future::Future;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi_http::{
    Error as HttpError, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks,
};

/// How the host treats one import of a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportAccess {
    /// Served: the host's own interfaces and the WASI interfaces of the sandbox.
    Granted,
    /// Linked to an implementation that refuses every call with the interface's access error.
    Denied,
    /// Not served: a component importing it is refused at load.
    Refused,
}

/// The interfaces of the host's contract a component may import (at the contract's version).
const CONTRACT_IMPORTS: &[&str] = &[
    "ruststream:handler/host",
    "ruststream:handler/progress",
    "ruststream:handler/types",
];

/// The WASI 0.2 interfaces that Rust's, CPython's and StarlingMonkey's standard libraries need,
/// served by a context with no preopened directories, no environment, no arguments and no
/// network.
const GRANTED_WASI: &[&str] = &[
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
];

/// The WASI 0.2 interfaces linked to implementations that refuse every call.
const DENIED_WASI: &[&str] = &[
    "wasi:sockets/network",
    "wasi:sockets/instance-network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
    "wasi:sockets/ip-name-lookup",
    "wasi:http/types",
    "wasi:http/outgoing-handler",
];

/// How the host treats the import named `name` (`namespace:package/interface@version`).
/// Contract imports are judged by interface only: their version is the loader's concern.
pub fn import_access(name: &str) -> ImportAccess {
    let (interface, version) = name.rsplit_once('@').unwrap_or((name, ""));
    if CONTRACT_IMPORTS.contains(&interface) {
        return ImportAccess::Granted;
    }
    // wasmtime links a 0.2.x import to the host's 0.2 implementation; any other WASI version
    // has none here.
    if !version.starts_with("0.2.") {
        return ImportAccess::Refused;
    }
    if GRANTED_WASI.contains(&interface) {
        ImportAccess::Granted
    } else if DENIED_WASI.contains(&interface) {
        ImportAccess::Denied
    } else {
        ImportAccess::Refused
    }
}

/// Denies the network in a WASI context: TCP and UDP sockets cannot even be created (no OS
/// socket is opened), no address passes the check, names are never looked up.
pub(crate) fn deny_network(builder: &mut WasiCtxBuilder) -> &mut WasiCtxBuilder {
    builder
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .socket_addr_check(|_, _| Box::pin(async { false }))
}

/// The `wasi:http` state of an instance: a context whose headers are small, and hooks that deny
/// every outgoing request.
pub(crate) struct DeniedHttp {
    ctx: WasiHttpCtx,
    hooks: DenyRequests,
}

/// Most bytes of headers one `fields` resource may hold: held in host memory, and no request
/// ever leaves, so a guest needs no more than a small header block.
const FIELD_SIZE_LIMIT: usize = 8 << 10;

impl Default for DeniedHttp {
    fn default() -> Self {
        let mut ctx = WasiHttpCtx::new();
        ctx.set_field_size_limit(FIELD_SIZE_LIMIT);
        Self {
            ctx,
            hooks: DenyRequests,
        }
    }
}

/// Refuses every outgoing request with `http-request-denied`.
struct DenyRequests;

type ResponseFuture = Box<dyn Future<Output = Result<(), HttpError>> + Send>;

impl WasiHttpHooks for DenyRequests {
    fn send_request(
        &mut self,
        _request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: ResponseFuture,
    ) -> Box<
        dyn Future<Output = Result<(http::Response<WasiBody>, ResponseFuture), HttpError>> + Send,
    > {
        Box::new(async { Err(HttpError::HttpRequestDenied) })
    }
}

impl DeniedHttp {
    /// What `wasi:http` serves an instance from: this state, over the instance's resources.
    pub(crate) fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiHttpCtxView<'a> {
        WasiHttpCtxView {
            ctx: &mut self.ctx,
            table,
            hooks: &mut self.hooks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_granted_denied_or_refused() {
        for name in [
            "ruststream:handler/host@1.0.0",
            "wasi:io/streams@0.2.12",
            "wasi:cli/stdout@0.2.9",
            "wasi:filesystem/preopens@0.2.0",
        ] {
            assert_eq!(import_access(name), ImportAccess::Granted, "{name}");
        }
        for name in [
            "wasi:sockets/tcp@0.2.9",
            "wasi:sockets/network@0.2.0",
            "wasi:http/types@0.2.10",
            "wasi:http/outgoing-handler@0.2.10",
        ] {
            assert_eq!(import_access(name), ImportAccess::Denied, "{name}");
        }
        for name in [
            "acme:secrets/vault@1.0.0",
            "wasi:keyvalue/store@0.2.0-draft",
            "wasi:sockets/tcp@0.3.0",
            "wasi:http/incoming-handler@0.2.10",
            "wasi:cli/stdout",
            "env",
        ] {
            assert_eq!(import_access(name), ImportAccess::Refused, "{name}");
        }
    }
}
