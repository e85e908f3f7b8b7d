//! Trace context (built with `--features opentelemetry`; `.ci/run` step "traces"): each
//! request's span, exported by a real OpenTelemetry pipeline (`tracing-opentelemetry` into an
//! in-memory exporter), has the MCP semantic conventions' name and attributes, and its W3C
//! trace context reaches the server in `params._meta` in both eras.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::{Value, json};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

// The integration tests' Host and servers (tests/it/support), shared as they are: reached
// through `it` so that tests/it/support.rs finds its files as in the `it` binary.
#[allow(dead_code, unused_imports)]
#[path = "it"]
mod it {
    pub mod support;
}
use it::support;

use crate::support::Host;
use crate::support::modern::{Era, Modern};

const WAIT: Duration = Duration::from_secs(10);

/// A `tracing` subscriber exporting every span to memory, as a Host's OpenTelemetry set-up
/// would; the guard keeps it the thread's default.
fn exporting() -> (
    InMemorySpanExporter,
    SdkTracerProvider,
    tracing::subscriber::DefaultGuard,
) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("host"));
    support::logs::keep_interest();
    let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    (exporter, provider, guard)
}

/// The attribute `key` of an exported span, as text.
fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

/// One `tools/call` made inside a Host span, against `server` in its era; returns the exported
/// spans and the `_meta` the server received with the call.
async fn call_in_host_span(server: &Modern) -> (Vec<SpanData>, Value) {
    let (exporter, provider, guard) = exporting();
    let host = Host::new(json!({"m": {"url": server.url}}));
    host.ready("m", WAIT).await;
    let turn = tracing::info_span!("host.turn");
    let args = json!({"namespace": "m", "toolName": "echo", "arguments": {"x": 1}});
    let answer = host.call("call_dynamic_tool", args).instrument(turn).await;
    assert_eq!(answer, Ok("echo echo {\"x\":1}".to_string()));
    drop(host);
    drop(guard);
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let meta = server.steps("tools/call")[0].meta.clone();
    (spans, meta)
}

/// The exported span named `name`; panics listing the names otherwise.
fn named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
        let names: Vec<_> = spans.iter().map(|s| s.name.to_string()).collect();
        panic!("no span {name} among {names:?}")
    })
}

/// The call's span is exported as `tools/call echo`, a client span and a child of the Host's,
/// with the conventions' attributes; the server gets `traceparent` `00-{trace}-{span}-01`
/// naming that span, beside the modern era's own `_meta` members.
#[tokio::test]
async fn a_call_in_a_host_span_sends_its_traceparent_in_meta_in_the_modern_era() {
    let server = Modern::start().await;
    let (spans, meta) = call_in_host_span(&server).await;
    let turn = named(&spans, "host.turn");
    let call = named(&spans, "tools/call echo");
    assert_eq!(call.span_kind, opentelemetry::trace::SpanKind::Client);
    assert_eq!(call.parent_span_id, turn.span_context.span_id());
    assert_eq!(call.span_context.trace_id(), turn.span_context.trace_id());
    let attributes: Vec<(&str, Option<String>)> = [
        "mcp.method.name",
        "mcp.protocol.version",
        "gen_ai.tool.name",
        "gen_ai.operation.name",
        "server.address",
        "network.transport",
    ]
    .into_iter()
    .map(|k| (k, attribute(call, k)))
    .collect();
    assert_eq!(
        attributes,
        [
            ("mcp.method.name", Some("tools/call".into())),
            ("mcp.protocol.version", Some("2026-07-28".into())),
            ("gen_ai.tool.name", Some("echo".into())),
            ("gen_ai.operation.name", Some("execute_tool".into())),
            ("server.address", Some("127.0.0.1".into())),
            ("network.transport", Some("tcp".into())),
        ]
    );
    // A modern request has no session.
    assert_eq!(attribute(call, "mcp.session.id"), None);
    let expected = format!(
        "00-{}-{}-01",
        call.span_context.trace_id(),
        call.span_context.span_id()
    );
    assert_eq!(meta["traceparent"], json!(expected));
    assert_eq!(meta.get("tracestate"), None);
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        json!("2026-07-28")
    );
    // The start's requests carry their own spans' context too.
    assert_eq!(
        server.steps("server/discover")[0].meta["traceparent"],
        json!(traceparent(named(&spans, "server/discover")))
    );
}

/// The `traceparent` naming `span`: `00-{trace-id}-{span-id}-01`.
fn traceparent(span: &SpanData) -> String {
    format!(
        "00-{}-{}-01",
        span.span_context.trace_id(),
        span.span_context.span_id()
    )
}

/// A 2025-era call carries no `_meta` of the client's own, so the trace context is its only
/// member; the span names the session.
#[tokio::test]
async fn a_call_in_a_host_span_sends_its_traceparent_in_meta_in_the_2025_era() {
    let server = Modern::start_in(Era::Legacy).await;
    let (spans, meta) = call_in_host_span(&server).await;
    let call = named(&spans, "tools/call echo");
    let expected = format!(
        "00-{}-{}-01",
        call.span_context.trace_id(),
        call.span_context.span_id()
    );
    assert_eq!(meta, json!({"traceparent": expected}));
    assert!(attribute(call, "mcp.session.id").is_some());
    assert_eq!(
        server.steps("initialize")[0].meta,
        json!({"traceparent": traceparent(named(&spans, "initialize"))})
    );
}

/// With no OpenTelemetry layer (a Host that exports nothing) no trace context is sent: a 2025-era
/// call has no `_meta` at all.
#[tokio::test]
async fn with_no_opentelemetry_layer_no_trace_context_is_sent() {
    let server = Modern::start_in(Era::Legacy).await;
    let host = Host::new(json!({"m": {"url": server.url}}));
    host.ready("m", WAIT).await;
    let args = json!({"namespace": "m", "toolName": "echo", "arguments": {"x": 1}});
    let answer = host
        .call("call_dynamic_tool", args)
        .instrument(tracing::info_span!("host.turn"))
        .await;
    assert_eq!(answer, Ok("echo echo {\"x\":1}".to_string()));
    assert_eq!(server.steps("tools/call")[0].meta, Value::Null);
}

/// A call starts at `Pack::call` (calls made in a row run at once), so its span is a child of
/// the span current there: a Host enters its span around `Pack::call` and may await outside it.
#[tokio::test]
async fn a_call_is_a_child_of_the_span_current_at_pack_call() {
    let server = Modern::start().await;
    let (exporter, provider, guard) = exporting();
    let host = Host::new(json!({"m": {"url": server.url}}));
    host.ready("m", WAIT).await;
    let args = json!({"namespace": "m", "toolName": "echo", "arguments": {"x": 1}});
    let entered = tracing::info_span!("host.entered");
    let made_inside = {
        let _inside = entered.enter();
        host.pack.call("mcp/call_dynamic_tool", args)
    };
    assert_eq!(made_inside.await, Ok("echo echo {\"x\":1}".to_string()));
    drop(entered);
    drop(host);
    drop(guard);
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    assert_eq!(
        named(&spans, "tools/call echo").parent_span_id,
        named(&spans, "host.entered").span_context.span_id()
    );
}
