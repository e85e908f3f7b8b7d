//! The span of each request and notification the client sends, named and attributed by the
//! OpenTelemetry semantic conventions for MCP (client spans) and JSON-RPC, so a Host exporting
//! `tracing` spans (e.g. with `tracing-opentelemetry`) sees them (README "Traces").
//!
//! Owns which attributes a request span carries and when each is recorded. A span is made where
//! the request is made, so a `tools/call` made in a Host's span (the call task carries it) is its
//! child. Attributes hold names, ids, versions, codes and the server's host and port only:
//! never a header, an argument, a result or server text. A request's span is named
//! `mcp.request`, a notification's `mcp.notification`;
//! `otel.name` (the name `tracing-opentelemetry` exports) is `{mcp.method.name} {target}`, the
//! target being a `tools/call`'s tool name.
//!
//! With the `opentelemetry` feature, also owns the trace context a request carries: when the
//! request's span has an OpenTelemetry span context (the Host installed `tracing-opentelemetry`),
//! its W3C `traceparent` and `tracestate` go into `params._meta` ([`request_meta`]).

use tracing::Span;
use tracing::field::Empty;

use super::error::Error;
use crate::redact::Redactor;

/// A server's `server.address` and `server.port` for spans, read once from its origin
/// (`scheme://host:port`; `None` when that part of the url holds a secret: then neither is
/// recorded).
#[derive(Debug)]
pub(super) struct Peer(Option<(Box<str>, u16)>);

impl Peer {
    pub(super) fn of(origin: Option<&str>) -> Self {
        Self(
            origin
                .and_then(host_and_port)
                .map(|(host, port)| (host.into(), port)),
        )
    }

    fn address(&self) -> Option<&str> {
        self.0.as_ref().map(|(host, _)| &**host)
    }

    fn port(&self) -> Option<u16> {
        self.0.as_ref().map(|&(_, port)| port)
    }
}

/// The span of JSON-RPC request `id` of `method` (naming `tool` for a `tools/call`) to the
/// server `peer`.
pub(super) fn request_span(method: &str, tool: Option<&str>, id: u64, peer: &Peer) -> Span {
    // The fields are made only when the span is enabled (the macro's values are evaluated
    // then): a Pack without a subscriber pays no formatting per request.
    message_span!(
        "mcp.request",
        SpanName { method, tool },
        method,
        tool,
        Some(id),
        peer.address(),
        peer.port()
    )
}

/// A request span's `otel.name`: the method, and for a `tools/call` the tool (`tools/call
/// search`), written when the span is recorded.
struct SpanName<'a> {
    method: &'a str,
    tool: Option<&'a str>,
}

impl std::fmt::Display for SpanName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.tool {
            Some(tool) => write!(f, "{} {tool}", self.method),
            None => f.write_str(self.method),
        }
    }
}

/// The span of a notification of `method` the client sends (`notifications/initialized`,
/// `notifications/cancelled`) to the server `peer`: named `mcp.notification`, with the
/// attributes of [`request_span`] without a request id or a tool.
pub(super) fn notification_span(method: &str, peer: &Peer) -> Span {
    message_span!(
        "mcp.notification",
        method,
        method,
        None::<&str>,
        None::<u64>,
        peer.address(),
        peer.port()
    )
}

/// A span of a JSON-RPC message the client sends, with the MCP and JSON-RPC attributes (one
/// list for [`request_span`] and [`notification_span`]; a span's name must be a literal).
macro_rules! message_span {
    ($span:literal, $name:expr, $method:expr, $tool:expr, $id:expr, $address:expr, $port:expr) => {
        tracing::info_span!(
            $span,
            "otel.name" = %$name,
            "otel.kind" = "client",
            "otel.status_code" = Empty,
            "mcp.method.name" = $method,
            "mcp.protocol.version" = Empty,
            "mcp.session.id" = Empty,
            "gen_ai.tool.name" = $tool,
            "gen_ai.operation.name" = $tool.map(|_| "execute_tool"),
            "jsonrpc.request.id" = $id,
            "jsonrpc.protocol.version" = "2.0",
            "rpc.response.status_code" = Empty,
            "error.type" = Empty,
            "server.address" = $address,
            "server.port" = $port,
            "network.transport" = "tcp",
            "network.protocol.name" = "http",
        )
    };
}
use message_span;

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
/// are the server's words, so both are scrubbed first (`redactor`, joined to the Pack's gate:
/// every entry's secrets): a
/// server that echoes a header value as its session id gets `[redacted]` recorded.
pub(super) fn on_route(redactor: &Redactor, version: Option<&str>, session_id: Option<&str>) {
    let span = Span::current();
    if span.is_disabled() {
        return;
    }
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

/// The text of the `_meta` object a request carries: `base` (the text of a JSON object, the
/// modern era's members; `None` in the 2025 era) with the W3C trace context of the current span
/// added as `traceparent` and, when not empty, `tracestate` (W3C Trace Context §3.2 and §3.3;
/// the root keys of `_meta`, MCP 2026-07-28 basic "`_meta`"). `None` when there is neither:
/// then a 2025-era request carries no `_meta`. The trace context is there only with the
/// `opentelemetry` feature and a valid span context on the current span.
pub(super) fn request_meta(base: Option<&str>) -> Option<std::borrow::Cow<'_, str>> {
    use std::borrow::Cow;
    let Some(members) = trace_context() else {
        return base.map(Cow::Borrowed);
    };
    Some(Cow::Owned(match base {
        // `base` is the text of a JSON object with at least one member.
        Some(base) => match base.trim_end().strip_suffix('}') {
            Some(open) if open.trim_end().ends_with('{') => format!("{open}{members}}}"),
            Some(open) => format!("{open},{members}}}"),
            None => base.to_string(),
        },
        None => format!("{{{members}}}"),
    }))
}

/// The members `"traceparent":"00-{trace-id}-{span-id}-{flags}"` and maybe
/// `"tracestate":"…"` of the current span's OpenTelemetry context, or `None` when it has no
/// valid span context (no OpenTelemetry layer, or the feature is off).
#[cfg(feature = "opentelemetry")]
fn trace_context() -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let context = Span::current().context();
    let span = context.span();
    let span_context = span.span_context();
    if !span_context.is_valid() {
        return None;
    }
    let traceparent = format!(
        "00-{}-{}-{:02x}",
        span_context.trace_id(),
        span_context.span_id(),
        span_context.trace_flags().to_u8()
    );
    let mut members = format!(r#""traceparent":"{traceparent}""#);
    let state = span_context.trace_state().header();
    if !state.is_empty() {
        let state = serde_json::to_string(&state).expect("a string serializes");
        members.push_str(&format!(r#","tracestate":{state}"#));
    }
    Some(members)
}

/// Without the `opentelemetry` feature no span has a trace context to send.
#[cfg(not(feature = "opentelemetry"))]
fn trace_context() -> Option<String> {
    None
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
