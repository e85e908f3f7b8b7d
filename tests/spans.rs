//! Request spans (README "Traces") seen by a `tracing` layer, in a test binary of its own: a
//! `tracing` subscriber's interest in a callsite is process-wide, so the integration tests'
//! log captures (tests/it, `support::logs`, which switch span targets off) running beside this
//! test could hide its spans.

use std::time::Duration;

use serde_json::{Value, json};

// The integration tests' Host and servers (tests/it/support), shared as they are: reached
// through `it` so that tests/it/support.rs finds its files as in the `it` binary.
#[allow(dead_code, unused_imports)]
#[path = "it"]
mod it {
    pub mod support;
}
use it::support;

use crate::support::Host;
use crate::support::hostile::{self, Reply};

const WAIT: Duration = Duration::from_secs(10);

/// A span as a [`Spans`] layer saw it: its name, its fields (as text) and its parent's name.
#[derive(Clone, Debug, Default)]
struct SeenSpan {
    name: String,
    fields: std::collections::BTreeMap<String, String>,
    parent: Option<String>,
}

/// An in-memory span collector: every span's name, fields (at creation and recorded later) and
/// parent, as an exporter would get them.
#[derive(Clone, Default)]
struct Spans(std::sync::Arc<std::sync::Mutex<Vec<SeenSpan>>>);

struct FieldText<'a>(&'a mut std::collections::BTreeMap<String, String>);

impl tracing::field::Visit for FieldText<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_string(),
            format!("{value:?}").trim_matches('"').to_string(),
        );
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

/// The index of a span in [`Spans`], kept in the span's extensions.
struct Index(usize);

impl<S> tracing_subscriber::Layer<S> for Spans
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut seen = SeenSpan {
            name: attrs.metadata().name().to_string(),
            ..SeenSpan::default()
        };
        attrs.record(&mut FieldText(&mut seen.fields));
        let span = ctx.span(id).unwrap();
        seen.parent = span.parent().map(|p| p.name().to_string());
        let mut all = self.0.lock().unwrap();
        all.push(seen);
        span.extensions_mut().insert(Index(all.len() - 1));
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let span = ctx.span(id).unwrap();
        let extensions = span.extensions();
        let Some(Index(i)) = extensions.get::<Index>() else {
            return;
        };
        values.record(&mut FieldText(&mut self.0.lock().unwrap()[*i].fields));
    }
}

/// Each request is a span named as the OpenTelemetry MCP conventions say (`otel.name`
/// `{mcp.method.name} {target}`), with their attributes; a call's span is the child of the
/// Host's span it was made in; `isError` is `error.type` `tool_error`, a JSON-RPC error its code.
/// No attribute holds a header value, an argument or a result.
#[tokio::test]
async fn each_request_is_a_span_with_the_mcp_attributes_and_no_secret() {
    use tracing::Instrument;
    use tracing_subscriber::layer::SubscriberExt;
    const SECRET: &str = "trace-header-secret-7c6b5a49";
    const ARGUMENT: &str = "trace-argument-value-3e2d1c";
    const RESULT: &str = "trace-result-text-0f9e8d";
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    support::logs::keep_interest();
    let _default = tracing::subscriber::set_default(subscriber);
    let tools: Vec<Value> = ["search", "broken", "refused"]
        .into_iter()
        .map(|name| hostile::tool(name, "a tool"))
        .collect();
    let server = hostile::serve_tools(tools, |req| {
        let id = req.id();
        match req.rpc["params"]["name"].as_str().unwrap_or_default() {
            "broken" => Reply::json(&hostile::result(
                &id,
                json!({"content": [{"type": "text", "text": "it broke"}], "isError": true}),
            )),
            "refused" => Reply::json(&hostile::rpc_error(&id, -32602, "bad params")),
            _ => Reply::json(&hostile::text_result(&id, RESULT)),
        }
    })
    .await;
    let host = Host::new(json!({"docs": {
        "url": format!("http://127.0.0.1:{}/mcp", server.port),
        "headers": {"X-Api-Key": SECRET},
    }}));
    host.ready("docs", WAIT).await;
    let turn = tracing::info_span!("host.turn");
    let args = json!({"namespace": "docs", "toolName": "search", "arguments": {"q": ARGUMENT}});
    let answer = host
        .call("call_dynamic_tool", args)
        .instrument(turn.clone())
        .await
        .unwrap();
    assert_eq!(answer, RESULT);
    for tool in ["broken", "refused"] {
        let _ = host.call_tool("docs", tool).instrument(turn.clone()).await;
    }
    drop(host);
    let seen = spans.0.lock().unwrap().clone();
    let requests: Vec<&SeenSpan> = seen.iter().filter(|s| s.name == "mcp.request").collect();
    let named = |otel: &str| {
        requests
            .iter()
            .find(|s| s.fields.get("otel.name").map(String::as_str) == Some(otel))
            .unwrap_or_else(|| panic!("no span {otel} among {requests:#?}"))
    };
    let call = named("tools/call search");
    let id = call.fields["jsonrpc.request.id"].clone();
    assert!(id.parse::<u64>().is_ok(), "{id}");
    let expected: std::collections::BTreeMap<String, String> = [
        ("otel.name", "tools/call search"),
        ("otel.kind", "client"),
        ("mcp.method.name", "tools/call"),
        ("mcp.protocol.version", "2025-06-18"),
        ("mcp.session.id", hostile::SESSION),
        ("gen_ai.tool.name", "search"),
        ("gen_ai.operation.name", "execute_tool"),
        ("jsonrpc.request.id", id.as_str()),
        ("jsonrpc.protocol.version", "2.0"),
        ("server.address", "127.0.0.1"),
        ("server.port", &server.port.to_string()),
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(call.fields, expected);
    assert_eq!(call.parent.as_deref(), Some("host.turn"));
    let broken = named("tools/call broken");
    assert_eq!(
        (
            broken.fields.get("error.type").map(String::as_str),
            broken.fields.get("otel.status_code").map(String::as_str),
            broken.parent.as_deref()
        ),
        (Some("tool_error"), Some("ERROR"), Some("host.turn"))
    );
    let refused = named("tools/call refused");
    assert_eq!(
        (
            refused.fields.get("error.type").map(String::as_str),
            refused
                .fields
                .get("rpc.response.status_code")
                .map(String::as_str)
        ),
        (Some("-32602"), Some("-32602"))
    );
    // The start's own requests are spans too, outside any Host span.
    let listing = named("tools/list");
    assert_eq!(
        (
            listing.fields.get("gen_ai.tool.name"),
            listing.parent.as_deref()
        ),
        (None, None)
    );
    assert!(
        requests
            .iter()
            .any(|s| s.fields["mcp.method.name"] == "initialize")
    );
    // A notification is a span too, with no request id.
    let initialized = seen
        .iter()
        .find(|s| s.name == "mcp.notification")
        .expect("a notification span");
    assert_eq!(
        (
            initialized.fields.get("otel.name").map(String::as_str),
            initialized.fields.get("mcp.session.id").map(String::as_str),
            initialized.fields.get("jsonrpc.request.id"),
        ),
        (
            Some("notifications/initialized"),
            Some(hostile::SESSION),
            None
        )
    );
    let every_value: String = seen
        .iter()
        .flat_map(|s| s.fields.values())
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    for secret in [SECRET, ARGUMENT, RESULT, "it broke", "bad params"] {
        assert!(!every_value.contains(secret), "{secret} in {every_value}");
    }
}

/// README "Traces": "Each request the Pack sends is a `tracing` span (`mcp.request` …)". The
/// standalone stream's `ping` (asked after its `GET` is refused `404`) is a request the Pack
/// sends: an `mcp.request` span named `ping`.
#[tokio::test]
async fn the_standalone_streams_ping_is_a_request_span_too() {
    use tracing_subscriber::layer::SubscriberExt;
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    support::logs::keep_interest();
    let _default = tracing::subscriber::set_default(subscriber);
    let server = hostile::serve_all(|req| async move {
        match (req.http_method.as_str(), req.method()) {
            ("POST", "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
            ("GET", _) => Reply::raw(404, "text/plain", "Not Found"),
            ("POST", "ping") => Reply::json(&hostile::result(&req.id(), json!({}))),
            ("POST", "tools/list") => Reply::json(&hostile::tools_page(
                &req.id(),
                vec![hostile::tool("t", "t")],
                None,
            )),
            _ => hostile::standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
        }
    })
    .await;
    let host = Host::new(json!({"s": {"url": server.url}}));
    host.ready("s", WAIT).await;
    server
        .wait_until(WAIT, "the stream's ping", |r| {
            r.iter().any(|r| r.method() == "ping")
        })
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(host);
    let seen = spans.0.lock().unwrap().clone();
    let methods: Vec<String> = seen
        .iter()
        .filter(|s| s.name == "mcp.request")
        .filter_map(|s| s.fields.get("mcp.method.name").cloned())
        .collect();
    assert!(
        methods.iter().any(|m| m == "ping"),
        "no mcp.request span for the ping the server got; the request spans: {methods:?}"
    );
}

/// A modern route's change stream is a request the Pack sends too, `subscriptions/listen`
/// (MCP 2026-07-28, basic/patterns/subscriptions): an `mcp.request` span.
#[tokio::test]
async fn a_modern_subscriptions_listen_is_a_request_span_too() {
    use tracing_subscriber::layer::SubscriberExt;
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    support::logs::keep_interest();
    let _default = tracing::subscriber::set_default(subscriber);
    let server = support::modern::Modern::start().await;
    server.set_list_changed();
    let host = Host::new(json!({"m": {"url": server.url}}));
    host.ready("m", WAIT).await;
    server
        .wait_until(WAIT, "the listen", |t| {
            t.iter().any(|s| s.line().contains("subscriptions/listen"))
        })
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(host);
    let seen = spans.0.lock().unwrap().clone();
    let methods: Vec<String> = seen
        .iter()
        .filter(|s| s.name == "mcp.request")
        .filter_map(|s| s.fields.get("mcp.method.name").cloned())
        .collect();
    assert!(
        methods.iter().any(|m| m == "subscriptions/listen"),
        "no mcp.request span for the listen the server got; the request spans: {methods:?}"
    );
}
