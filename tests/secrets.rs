//! Secrets: header values and `${env:...}` values must never appear in a listing, a reason, an
//! error, a `Debug` output or a log line, even when a server echoes them back; server text that
//! holds one shows `[redacted]` instead.
//!
//! Every test here captures every log record at trace level (the Pack's `tracing` events and,
//! through the `log` bridge, its HTTP stack's) into a buffer, with a subscriber set as the
//! default for the test's (current-thread) runtime. Tests that set environment variables hold
//! one lock for their whole run, so no other thread of this binary reads the environment while
//! it changes.
#![allow(
    clippy::await_holding_lock,
    reason = "ENV_LOCK serializes whole tests, each on its own current-thread runtime: holding it across awaits is the point, and no task of another test can wait on it"
)]

#[path = "support/hostile.rs"]
mod hostile;
mod support;

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::time::Duration;

use hostile::{
    Received, Reply, Server, result, rpc_error, serve, server_entry, sse_event, standard,
    text_result, tool, tools_page,
};
use proptest::prelude::*;
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};
use support::Host;

// ---------------------------------------------------------------------------------------------
// capture and environment

static ENV_LOCK: Mutex<()> = Mutex::new(());

/// Serializes the tests of this binary (they set environment variables) and installs, once, the
/// bridge from the `log` crate into `tracing`.
fn exclusive() -> MutexGuard<'static, ()> {
    static BRIDGE: Once = Once::new();
    BRIDGE.call_once(|| {
        // A global subscriber that discards, installed only for the `log` → `tracing` bridge
        // that `try_init` sets up; each test's own default subscriber overrides it.
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(std::io::sink)
            .try_init();
    });
    ENV_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets `name` to `value` for this process.
fn set_env(_guard: &MutexGuard<'static, ()>, name: &str, value: &str) {
    // SAFETY: every test of this binary holds ENV_LOCK (the guard proves it) while it sets
    // variables and while its Pack runs, on a current-thread runtime: no other thread of this
    // process reads or writes the environment meanwhile.
    unsafe { std::env::set_var(name, value) };
}

/// A buffer every log line of the test is written to.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Captures every event at trace level on this thread until the guard drops.
fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

// ---------------------------------------------------------------------------------------------
// the echo server

/// Everything a request carried that a config can make secret: the target and every header
/// value.
fn echo_of(req: &Received) -> String {
    let mut echo = req.target.clone();
    for value in req.headers.values() {
        echo.push(' ');
        echo.push_str(&String::from_utf8_lossy(value.as_bytes()));
    }
    echo
}

const ECHO_TOOLS: [&str; 8] = [
    "result",
    "is_error",
    "rpc_error",
    "structured",
    "http_400",
    "html",
    "sse_message",
    "bad_shape",
];

/// A server that hands every secret it receives back, in every place a server's text can go:
/// `initialize` fails with a 500 quoting them when `fail_start`; otherwise tool descriptions,
/// titles, schemas and annotations, results, `isError` texts, JSON-RPC errors, error bodies and
/// content types all quote them.
async fn echo_server(fail_start: bool) -> Server {
    serve(move |req| async move {
        let echo = echo_of(&req);
        let id = req.id();
        if req.method() == "initialize" && fail_start {
            return Reply::raw(500, "text/plain", format!("you sent: {echo}"));
        }
        if let Some(reply) = standard(&req) {
            return reply;
        }
        match req.method() {
            "tools/list" => {
                let tools = ECHO_TOOLS
                    .iter()
                    .map(|name| {
                        json!({
                            "name": name,
                            "title": format!("title {echo}"),
                            "description": format!("describes {echo}"),
                            "inputSchema": {"type": "object", "description": echo,
                                "properties": {"k": {"default": echo}}},
                            "outputSchema": {"type": "object", "title": echo},
                            "annotations": {"title": echo},
                        })
                    })
                    .collect();
                Reply::json(&tools_page(&id, tools, None))
            }
            "tools/call" => match req.rpc["params"]["name"].as_str().unwrap_or("") {
                "result" => Reply::json(&text_result(&id, &format!("result {echo}"))),
                "is_error" => Reply::json(&result(
                    &id,
                    json!({"content": [{"type": "text", "text": format!("failed {echo}")}], "isError": true}),
                )),
                "rpc_error" => Reply::json(&rpc_error(&id, -32000, &format!("rpc {echo}"))),
                "structured" => Reply::json(&result(&id, json!({"structuredContent": {"echo": echo}}))),
                "http_400" => Reply::raw(400, "text/plain", format!("bad request {echo}")),
                "html" => Reply::raw(
                    200,
                    &format!("text/html; v=\"{}\"", echo.replace(['"', '\\'], "")),
                    "<p>",
                ),
                "sse_message" => Reply::sse(&[
                    json!({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"level": "error", "data": echo}}),
                    text_result(&id, &format!("sse {echo}")),
                ]),
                _ => Reply::json(&result(&id, json!({"content": echo}))),
            },
            _ => Reply::json(&rpc_error(&id, -32601, "Method not found")),
        }
    })
    .await
}

/// Every text a Host, a model or a log could see after exercising every path of `host`.
async fn everything_visible(host: &Host) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let mut record = |label: String, outcome: Result<String, ToolError>| {
        seen.push((format!("{label} (Debug)"), format!("{outcome:?}")));
        match outcome {
            Ok(text) => seen.push((label, text)),
            Err(e) => {
                seen.push((format!("{label} (Display)"), e.to_string()));
                seen.push((label, e.message));
            }
        }
    };
    let get = |args: Value| host.call("get_dynamic_tools", args);
    record("listing".into(), get(json!({})).await);
    for ns in ["fail", "ok"] {
        record(format!("listing {ns}"), get(json!({"namespace": ns})).await);
        record(
            format!("call on {ns}"),
            host.call(
                "call_dynamic_tool",
                json!({"namespace": ns, "toolName": "result"}),
            )
            .await,
        );
    }
    for name in ECHO_TOOLS {
        record(
            format!("tool {name}"),
            get(json!({"namespace": "ok", "toolName": name})).await,
        );
        let call = host.call(
            "call_dynamic_tool",
            json!({"namespace": "ok", "toolName": name}),
        );
        let outcome = tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .expect("no call hangs");
        record(format!("call {name}"), outcome);
    }
    seen.push((
        "tool specs (Debug)".into(),
        format!("{:?}", host.pack.tools()),
    ));
    seen
}

/// Each form a secret could take in `text`: as is, JSON-escaped, and inside any JSON string of
/// `text` when it is JSON.
fn assert_no_secret(label: &str, text: &str, secrets: &[String]) {
    for secret in secrets {
        let escaped = serde_json::to_string(secret).unwrap();
        let escaped = &escaped[1..escaped.len() - 1];
        assert!(
            !text.contains(secret.as_str()) && !text.contains(escaped),
            "{label} shows a secret: {text}"
        );
    }
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        let mut strings = Vec::new();
        collect_strings(&value, &mut strings);
        for s in strings {
            for secret in secrets {
                assert!(
                    !s.contains(secret.as_str()),
                    "{label} holds a secret in JSON: {s}"
                );
            }
        }
    }
}

fn collect_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                collect_strings(v, out);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// the property

/// One case: random header and env values, configured through `${env:...}` in a header and in
/// the URL's path and query, and as a literal header; two servers that echo them on every path
/// (one failing its start with them). Nothing visible holds any of them.
fn no_secret_escapes(case: usize, literal: &str, token: &str, path: &str, query: &str) {
    let guard = exclusive();
    let names = [
        format!("MCP_SECRETS_PROP_{case}_TOKEN"),
        format!("MCP_SECRETS_PROP_{case}_PATH"),
        format!("MCP_SECRETS_PROP_{case}_QUERY"),
    ];
    for (name, value) in names.iter().zip([token, path, query]) {
        set_env(&guard, name, value);
    }
    let secrets: Vec<String> = [literal, token, path, query]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (logs, _capture) = capture();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let failing = echo_server(true).await;
        let working = echo_server(false).await;
        let configure = |url: &str| {
            json!({
                "url": format!("{url}/${{env:{}}}?key=${{env:{}}}", names[1], names[2]),
                "headers": {
                    "Authorization": format!("Bearer ${{env:{}}}", names[0]),
                    "X-Api-Key": literal,
                },
            })
        };
        let host =
            Host::new(json!({"fail": configure(&failing.url), "ok": configure(&working.url)}));
        host.ready("ok", Duration::from_secs(10)).await;
        let listing = host
            .wait_for(Duration::from_secs(10), |l| {
                server_entry(l, "fail")["status"] == "error"
            })
            .await;
        // The servers did receive every secret, and echoed them: the test is not vacuous.
        let first = &working.requests()[0];
        assert_eq!(first.target, format!("/mcp/{path}?key={query}"));
        assert_eq!(
            first.header("authorization").unwrap(),
            format!("Bearer {token}")
        );
        assert_eq!(first.header("x-api-key").unwrap(), literal);
        let reason = server_entry(&listing, "fail")["reason"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            reason.starts_with(
                "HTTP 500 Internal Server Error: you sent: /mcp/[redacted]?key=[redacted] "
            ),
            "{reason}"
        );
        // path, query, Authorization, X-Api-Key: each quoted once, each scrubbed.
        assert_eq!(reason.matches("[redacted]").count(), 4, "{reason}");
        let seen = everything_visible(&host).await;
        drop(host);
        for (label, text) in &seen {
            assert_no_secret(label, text, &secrets);
        }
        let result = &seen
            .iter()
            .find(|(label, _)| label == "call result")
            .unwrap()
            .1;
        assert!(
            result.starts_with("result /mcp/[redacted]?key=[redacted] "),
            "the echo came back, scrubbed: {result}"
        );
    });
    drop(runtime);
    assert_no_secret("the log", &logs.text(), &secrets);
    assert!(
        logs.text().contains("start failure"),
        "the capture works: {}",
        logs.text()
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 6,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn secrets_never_escape(
        literal in "[!-~]{16,40}",
        token in "[!-~]{16,40}",
        path in "[A-Za-z0-9]{16,32}",
        query in "[A-Za-z0-9_-]{16,32}",
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static CASE: AtomicUsize = AtomicUsize::new(0);
        no_secret_escapes(CASE.fetch_add(1, Ordering::SeqCst), &literal, &token, &path, &query);
    }
}

// ---------------------------------------------------------------------------------------------
// exact scrubbing

/// A server's text holding a configured secret shows `[redacted]` in a reason, an error, a
/// result, a description and a log line — exactly; a 7-byte value is below the threshold and
/// is left alone, an 8-byte one is scrubbed.
#[tokio::test]
async fn server_text_with_a_secret_is_scrubbed_exactly() {
    let guard = exclusive();
    set_env(&guard, "MCP_SECRETS_EXACT_TOKEN", "env-secret-value-42");
    let (logs, _capture) = capture();
    const SAY: &str = "Bearer sk-live-0123456789 / env-secret-value-42 / eight888 / short77";
    let failing = serve(|req| async move {
        match req.method() {
            "initialize" => Reply::raw(500, "text/plain", format!("denied: {SAY}")),
            _ => standard(&req).unwrap(),
        }
    })
    .await;
    let working = serve(|req| async move {
        if let Some(reply) = standard(&req) {
            return reply;
        }
        let id = req.id();
        match req.method() {
            "tools/list" => Reply::json(&tools_page(
                &id,
                ["ok", "is_error", "rpc_error"].iter().map(|n| tool(n, &format!("{n} {SAY}"))).collect(),
                None,
            )),
            _ => match req.rpc["params"]["name"].as_str().unwrap() {
                "ok" => Reply::json(&text_result(&id, &format!("ok {SAY}"))),
                "is_error" => Reply::json(&result(
                    &id,
                    json!({"content": [{"type": "text", "text": format!("is_error {SAY}")}], "isError": true}),
                )),
                _ => Reply::json(&rpc_error(&id, -32000, &format!("rpc_error {SAY}"))),
            },
        }
    })
    .await;
    let headers = json!({
        "Authorization": "Bearer sk-live-0123456789",
        "X-Token": "${env:MCP_SECRETS_EXACT_TOKEN}",
        "X-Eight": "eight888",
        "X-Seven": "short77",
    });
    let host = Host::new(json!({
        "fail": {"url": failing.url, "headers": headers},
        "ok": {"url": working.url, "headers": headers},
    }));
    host.ready("ok", Duration::from_secs(10)).await;
    let listing = host
        .wait_for(Duration::from_secs(10), |l| {
            server_entry(l, "fail")["status"] == "error"
        })
        .await;
    const SCRUBBED: &str = "[redacted] / [redacted] / [redacted] / short77";
    assert_eq!(
        server_entry(&listing, "fail")["reason"],
        format!("HTTP 500 Internal Server Error: denied: {SCRUBBED}")
    );
    assert_eq!(
        host.listing(json!({"namespace": "ok", "toolName": "ok"}))
            .await["description"],
        format!("ok {SCRUBBED}")
    );
    let call = |name: &'static str| {
        host.call(
            "call_dynamic_tool",
            json!({"namespace": "ok", "toolName": name}),
        )
    };
    assert_eq!(call("ok").await, Ok(format!("ok {SCRUBBED}")));
    assert_eq!(
        call("is_error").await,
        Err(ToolError::new(
            ToolErrorKind::Backend,
            format!("is_error {SCRUBBED}")
        ))
    );
    assert_eq!(
        call("rpc_error").await,
        Err(ToolError::new(
            ToolErrorKind::Backend,
            format!("rpc_error {SCRUBBED}")
        ))
    );
    drop(host);
    let logs = logs.text();
    assert!(
        logs.contains(&format!(
            "reason=HTTP 500 Internal Server Error: denied: {SCRUBBED}"
        )),
        "the start failure is logged, scrubbed: {logs}"
    );
    for secret in ["sk-live-0123456789", "env-secret-value-42", "eight888"] {
        assert!(!logs.contains(secret), "a log line shows {secret}: {logs}");
    }
}

/// The method name of a server notification is server text too: a server that puts a secret
/// there must not get it into a trace log line.
#[tokio::test]
async fn notification_method_with_a_secret_is_not_logged() {
    let _guard = exclusive();
    let (logs, _capture) = capture();
    let server = serve(|req| async move {
        if let Some(reply) = standard(&req) {
            return reply;
        }
        match req.method() {
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            _ => {
                let key = req.header("x-api-key").unwrap();
                Reply::sse(&[
                    json!({"jsonrpc": "2.0", "method": format!("notifications/{key}")}),
                    text_result(&req.id(), "done"),
                ])
            }
        }
    })
    .await;
    let host =
        Host::new(json!({"n": {"url": server.url, "headers": {"X-Api-Key": "key-0123456789"}}}));
    host.ready("n", Duration::from_secs(10)).await;
    assert_eq!(
        host.call(
            "call_dynamic_tool",
            json!({"namespace": "n", "toolName": "t"})
        )
        .await,
        Ok("done".to_string())
    );
    drop(host);
    let logs = logs.text();
    assert!(
        logs.contains("ignored a server notification"),
        "captured: {logs}"
    );
    assert!(
        !logs.contains("key-0123456789"),
        "a log line shows the secret: {logs}"
    );
}

/// Schemas, annotations and structured results pass through as raw JSON. A server whose JSON
/// encoder escapes differently from serde_json (`\/` as PHP does, `\u00xx` as Python's
/// `ensure_ascii` does) must not slip a secret past the scrubber: decoded, the listing and the
/// result would show it.
#[tokio::test]
async fn secrets_in_raw_json_with_other_escapes_are_scrubbed() {
    let _guard = exclusive();
    const KEY: &str = "tok/abc+def/ghi123";
    const ESCAPED: &str = r"tok\/abc+def\/ghi\u0031\u00323";
    let server = serve(|req| async move {
        if let Some(reply) = standard(&req) {
            return reply;
        }
        let id = req.id();
        let body = match req.method() {
            "tools/list" => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"t","inputSchema":{{"type":"object","default":"{ESCAPED}"}},"annotations":{{"title":"{ESCAPED}"}}}}]}}}}"#
            ),
            _ => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"structuredContent":{{"echo":"{ESCAPED}"}}}}}}"#
            ),
        };
        Reply::raw(200, "application/json", body)
    })
    .await;
    let host = Host::new(json!({"esc": {"url": server.url, "headers": {"X-Api-Key": KEY}}}));
    host.ready("esc", Duration::from_secs(10)).await;
    let one = host
        .listing(json!({"namespace": "esc", "toolName": "t"}))
        .await;
    assert_eq!(one["inputSchema"]["default"], "[redacted]");
    assert_eq!(one["annotations"]["title"], "[redacted]");
    let result = host
        .call(
            "call_dynamic_tool",
            json!({"namespace": "esc", "toolName": "t"}),
        )
        .await
        .unwrap();
    let result: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(result, json!({"echo": "[redacted]"}));
}

/// An env value used in the URL is sent percent-encoded; a server that quotes the request
/// target quotes that encoded form, which is the secret all the same.
#[tokio::test]
async fn percent_encoded_url_secrets_are_scrubbed() {
    let guard = exclusive();
    set_env(
        &guard,
        "MCP_SECRETS_URL_QUERY",
        "pass word{with}\"specials\"",
    );
    let server = serve(|req| async move {
        match req.method() {
            "initialize" => Reply::raw(500, "text/plain", format!("bad target {}", req.target)),
            _ => standard(&req).unwrap(),
        }
    })
    .await;
    let host = Host::new(
        json!({"pct": {"url": format!("{}?key=${{env:MCP_SECRETS_URL_QUERY}}", server.url)}}),
    );
    let listing = host
        .wait_for(Duration::from_secs(10), |l| {
            server_entry(l, "pct")["status"] == "error"
        })
        .await;
    assert_eq!(
        server.requests()[0].target,
        "/mcp?key=pass%20word{with}%22specials%22"
    );
    assert_eq!(
        server_entry(&listing, "pct")["reason"],
        "HTTP 500 Internal Server Error: bad target /mcp?key=[redacted]"
    );
}

/// The header keys may be named; values never, also when the server sends the value back in an
/// SSE notification while a call runs (the notification is dropped, the answer scrubbed).
#[tokio::test]
async fn sse_echo_during_a_call_is_scrubbed() {
    let _guard = exclusive();
    let (logs, _capture) = capture();
    let server = serve(|req| async move {
        if let Some(reply) = standard(&req) {
            return reply;
        }
        let key = req.header("x-api-key").unwrap();
        match req.method() {
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            _ => Reply::raw(
                200,
                "text/event-stream",
                format!(
                    "{}{}",
                    sse_event(&json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": key}})),
                    sse_event(&text_result(&req.id(), &format!("header was {key}")))
                ),
            ),
        }
    })
    .await;
    let host =
        Host::new(json!({"s": {"url": server.url, "headers": {"X-Api-Key": "value-0123456789"}}}));
    host.ready("s", Duration::from_secs(10)).await;
    assert_eq!(
        host.call(
            "call_dynamic_tool",
            json!({"namespace": "s", "toolName": "t"})
        )
        .await,
        Ok("header was [redacted]".to_string())
    );
    drop(host);
    assert!(!logs.text().contains("value-0123456789"));
}

/// A port given by `${env:...}` never shows in a connect failure, also when the url is written
/// with one slash after the scheme (`http:/host:port/...`, which a WHATWG parser reads as
/// `http://host:port/...`): the env value is short, so only the origin rule can hide it.
#[tokio::test]
#[ignore = "finding 5: an env port in a url written 'http:/127.0.0.1:${env:P}/' shows in the connect-refused reason"]
async fn an_env_port_in_a_one_slash_url_is_not_shown() {
    let guard = exclusive();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    set_env(&guard, "MCP_SECRETS_PORT", &port.to_string());
    let host = Host::new(json!({"p": {"url": "http:/127.0.0.1:${env:MCP_SECRETS_PORT}/mcp"}}));
    let listing = host
        .wait_for(Duration::from_secs(10), |l| {
            server_entry(l, "p")["status"] == "error"
        })
        .await;
    assert_eq!(
        server_entry(&listing, "p")["reason"],
        "connection refused (no server is listening at the configured URL)"
    );
}
