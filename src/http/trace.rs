//! The span of each request the client sends, named and attributed by the OpenTelemetry
//! semantic conventions for MCP (client spans) and JSON-RPC, so a Host exporting `tracing` spans
//! (e.g. with `tracing-opentelemetry`) sees them (README "Traces").
//!
//! Owns which attributes a request span carries and when each is recorded. A span is made where
//! the request is made, so a `tools/call` made in a Host's span (the call task carries it) is its
//! child. Attributes hold names, ids, versions, codes and the server's host and port only:
//! never a header, an argument, a result or server text. The span's name is `mcp.request`;
//! `otel.name` (the name `tracing-opentelemetry` exports) is `{mcp.method.name} {target}`, the
//! target being a `tools/call`'s tool name.

use tracing::Span;
use tracing::field::Empty;

use super::error::Error;
use crate::redact::Redactor;

/// The span of JSON-RPC request `id` of `method` (naming `tool` for a `tools/call`) to the
/// server at `origin` (`scheme://host:port`; `None` when that part of the url holds a secret:
/// then neither `server.address` nor `server.port` is recorded).
pub(super) fn request_span(
    method: &str,
    tool: Option<&str>,
    id: u64,
    origin: Option<&str>,
) -> Span {
    let name = match tool {
        Some(tool) => format!("{method} {tool}"),
        None => method.to_string(),
    };
    let (address, port) = origin.and_then(host_and_port).unzip();
    tracing::info_span!(
        "mcp.request",
        "otel.name" = %name,
        "otel.kind" = "client",
        "otel.status_code" = Empty,
        "mcp.method.name" = method,
        "mcp.protocol.version" = Empty,
        "mcp.session.id" = Empty,
        "gen_ai.tool.name" = tool,
        "gen_ai.operation.name" = tool.map(|_| "execute_tool"),
        "jsonrpc.request.id" = id,
        "jsonrpc.protocol.version" = "2.0",
        "rpc.response.status_code" = Empty,
        "error.type" = Empty,
        "server.address" = address,
        "server.port" = port,
        "network.transport" = "tcp",
        "network.protocol.name" = "http",
    )
}

/// `host` and `port` of an origin `scheme://host:port` (an IPv6 host without its brackets).
fn host_and_port(origin: &str) -> Option<(&str, u16)> {
    let authority = origin.split_once("://")?.1;
    let (host, port) = authority.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some((host, port.parse().ok()?))
}

/// Records on the current request span the route a send goes out on: its protocol `version`
/// and, in the 2025 era, its `session_id` (`mcp.session.id`; a modern request has none). Both
/// are the server's words, so both are scrubbed with the entry's secrets (`redactor`) first: a
/// server that echoes a header value as its session id gets `[redacted]` recorded.
pub(super) fn on_route(redactor: &Redactor, version: Option<&str>, session_id: Option<&str>) {
    let span = Span::current();
    if let Some(version) = version {
        span.record("mcp.protocol.version", &*redactor.scrub(version));
    }
    if let Some(id) = session_id {
        span.record("mcp.session.id", &*redactor.scrub(id));
    }
}

/// Records how the request of `span` ended: on an error, `error.type` (the JSON-RPC error code
/// for a JSON-RPC error, else the error's kind name) and, for a JSON-RPC error, its code as
/// `rpc.response.status_code`.
pub(super) fn on_outcome<T>(span: &Span, outcome: &Result<T, Error>) {
    let Err(error) = outcome else { return };
    span.record("otel.status_code", "ERROR");
    match error.rpc() {
        Some(rpc) => {
            let code = rpc.code.to_string();
            span.record("rpc.response.status_code", code.as_str());
            span.record("error.type", code.as_str());
        }
        None => {
            span.record("error.type", error.kind_name());
        }
    }
}

/// Records on the current request span that the tool answered with `isError: true`
/// (`error.type` `tool_error`): called while its result is read.
pub(crate) fn tool_error() {
    let span = Span::current();
    span.record("otel.status_code", "ERROR");
    span.record("error.type", "tool_error");
}

#[cfg(test)]
mod tests {
    use super::host_and_port;

    #[test]
    fn an_origin_splits_into_host_and_port() {
        assert_eq!(
            host_and_port("https://api.example.com:443"),
            Some(("api.example.com", 443))
        );
        assert_eq!(host_and_port("http://[::1]:8080"), Some(("::1", 8080)));
        assert_eq!(host_and_port("nonsense"), None);
    }
}
