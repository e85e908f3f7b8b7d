//! Secrets: header values, `${env:...}` values and the tokens a sign-in learns must never appear in a listing, a reason, an
//! error, a `Debug` output or a log line, even when a server echoes them back; server text that
//! holds one shows `[redacted]` instead. A refused request's hint names unexpanded variables and
//! placeholders (VS Code's too) but never quotes one of no known form.
//!
//! Most tests here capture every log record at trace level (the Pack's `tracing` events and,
//! through the `log` bridge, its HTTP stack's) into a buffer, with a subscriber set as the
//! default for the test's (current-thread) runtime. The tests of this module hold one lock for
//! their whole run and set only variables of their own (`MCP_SECRETS_*`, `MCP_BREAK10_*`), which
//! no other module reads; the sign-in store they share with `signin` is set once, by
//! [`support::oauth_store`](crate::support::oauth_store).
#![allow(
    clippy::await_holding_lock,
    reason = "ENV_LOCK serializes whole tests, each on its own current-thread runtime: holding it across awaits is the point, and no task of another test can wait on it"
)]

use std::sync::{Mutex, MutexGuard, Once};
use std::time::Duration;

use crate::support::answers::key_echoing_sign_in;
use crate::support::hostile::{
    self, Received, Reply, Server, result, rpc_error, serve, server_entry, sse_event, standard,
    text_result, tool, tools_page,
};
use crate::support::{Host, logs, oauth};
use bytes::Bytes;
use proptest::prelude::*;
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// capture and environment

static ENV_LOCK: Mutex<()> = Mutex::new(());

/// Serializes the tests of this module (they set environment variables) and installs, once, the
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
    // SAFETY: every test of this module holds ENV_LOCK (the guard proves it) while it sets
    // variables and while its Pack runs, on a current-thread runtime, so no test here reads
    // them meanwhile. The other modules' tests, on other threads, read the environment only
    // through `std::env`, which takes the same process-wide lock as `set_var`.
    unsafe { std::env::set_var(name, value) };
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
        record(format!("call on {ns}"), host.call_tool(ns, "result").await);
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
        for s in crate::support::leaves::strings(&value) {
            for secret in secrets {
                assert!(
                    !s.contains(secret.as_str()),
                    "{label} holds a secret in JSON: {s}"
                );
            }
        }
    }
}

/// A Host with the one server `namespace` at `url`, sending `X-Api-Key: key`, once it is ready.
async fn keyed_host(namespace: &str, url: &str, key: &str) -> Host {
    let host = Host::new(json!({namespace: {"url": url, "headers": {"X-Api-Key": key}}}));
    host.ready(namespace, Duration::from_secs(10)).await;
    host
}

/// The first captured line holding `event`: proof that the capture saw the event a secret would
/// have been logged with, so that its absence from the capture means something. Panics with
/// the capture when there is none.
fn line_with<'a>(logs: &'a str, event: &str) -> &'a str {
    logs.lines()
        .find(|line| line.contains(event))
        .unwrap_or_else(|| panic!("no line with {event:?} in the capture: {logs}"))
}

/// The reason the `warn` line of a failed start of `namespace` gives (everything after
/// `reason=`).
fn logged_reason<'a>(logs: &'a str, namespace: &str) -> &'a str {
    let line = line_with(
        logs,
        &format!("server failed to start namespace={namespace} "),
    );
    assert!(line.starts_with(" WARN plugin_mcp::server: "), "{line}");
    line.split_once(" reason=").unwrap().1
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
    let (_capture, logs) = logs::capture("trace");
    let runtime = crate::support::current_thread_runtime();
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
        logs.text().contains("server failed to start"),
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
    let (_capture, logs) = logs::capture("trace");
    const SAY: &str = "Bearer sk-live-0123456789 / env-secret-value-42 / eight888 / short77";
    let failing =
        hostile::serve_initialize(|_| Reply::raw(500, "text/plain", format!("denied: {SAY}")))
            .await;
    let tools = ["ok", "is_error", "rpc_error"]
        .iter()
        .map(|n| tool(n, &format!("{n} {SAY}")));
    let working = hostile::serve_tools(tools.collect(), |req| {
        let id = req.id();
        match req.rpc["params"]["name"].as_str().unwrap() {
            "ok" => Reply::json(&text_result(&id, &format!("ok {SAY}"))),
            "is_error" => Reply::json(&result(
                &id,
                json!({"content": [{"type": "text", "text": format!("is_error {SAY}")}], "isError": true}),
            )),
            _ => Reply::json(&rpc_error(&id, -32000, &format!("rpc_error {SAY}"))),
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
    let failed = host.failed("fail", Duration::from_secs(10)).await;
    const SCRUBBED: &str = "[redacted] / [redacted] / [redacted] / short77";
    assert_eq!(
        failed["reason"],
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
    let warned: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("server failed to start"))
        .collect();
    assert!(!warned.is_empty(), "no warning of the failed start: {logs}");
    for line in &warned {
        assert!(
            line.contains("namespace=fail")
                && line.ends_with(&format!(
                    "reason=HTTP 500 Internal Server Error: denied: {SCRUBBED}"
                )),
            "the warning carries the scrubbed reason: {line}"
        );
    }
    for secret in ["sk-live-0123456789", "env-secret-value-42", "eight888"] {
        assert!(!logs.contains(secret), "a log line shows {secret}: {logs}");
    }
}

/// The method name of a server notification is server text too: a server that puts a secret
/// there must not get it into a trace log line.
#[tokio::test]
async fn notification_method_with_a_secret_is_not_logged() {
    let _guard = exclusive();
    let (_capture, logs) = logs::capture("trace");
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        let key = req.header("x-api-key").unwrap();
        Reply::sse(&[
            json!({"jsonrpc": "2.0", "method": format!("notifications/{key}")}),
            text_result(&req.id(), "done"),
        ])
    })
    .await;
    let host = keyed_host("n", &server.url, "key-0123456789").await;
    assert_eq!(host.call_tool("n", "t").await, Ok("done".to_string()));
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

/// A large text result (one text block of 300 000 bytes) arrives exactly, as a JSON body and
/// as an event stream cut into 1000-byte chunks; holding a configured secret, it shows
/// `[redacted]` instead, however it arrived.
#[tokio::test]
async fn a_large_text_result_is_exact_and_scrubbed() {
    let _guard = exclusive();
    const KEY: &str = "key-large-0123456789";
    let tools = vec![tool("plain", "p"), tool("secret", "s")];
    let server = hostile::serve_tools(tools, |req| {
        let name = req.rpc["params"]["name"].as_str().unwrap_or("").to_string();
        let tail = if name == "secret" { KEY } else { "" };
        let text = format!("{}{tail}", "abcdefghij".repeat(30_000));
        let answer = text_result(&req.id(), &text);
        if req.rpc["params"]["arguments"]["sse"] == json!(true) {
            let event = Bytes::from(sse_event(&answer));
            let chunks: Vec<Result<Bytes, std::io::Error>> = (0..event.len())
                .step_by(1000)
                .map(|at| Ok(event.slice(at..(at + 1000).min(event.len()))))
                .collect();
            Reply::stream(200, "text/event-stream", futures_util::stream::iter(chunks))
        } else {
            Reply::json(&answer)
        }
    })
    .await;
    let host = keyed_host("n", &server.url, KEY).await;
    let body = "abcdefghij".repeat(30_000);
    for sse in [false, true] {
        for (tool, expected) in [
            ("plain", body.clone()),
            ("secret", format!("{body}[redacted]")),
        ] {
            let text = host
                .call(
                    "call_dynamic_tool",
                    json!({"namespace": "n", "toolName": tool, "arguments": {"sse": sse}}),
                )
                .await
                .unwrap();
            assert_eq!(text.len(), expected.len(), "{tool}, sse {sse}");
            assert!(text == expected, "{tool}, sse {sse}");
        }
    }
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
    let host = keyed_host("esc", &server.url, KEY).await;
    let one = host
        .listing(json!({"namespace": "esc", "toolName": "t"}))
        .await;
    assert_eq!(one["inputSchema"]["default"], "[redacted]");
    assert_eq!(one["annotations"]["title"], "[redacted]");
    let result = host.call_tool("esc", "t").await.unwrap();
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
    let server = hostile::serve_initialize(|req| {
        Reply::raw(500, "text/plain", format!("bad target {}", req.target))
    })
    .await;
    let host = Host::new(
        json!({"pct": {"url": format!("{}?key=${{env:MCP_SECRETS_URL_QUERY}}", server.url)}}),
    );
    let failed = host.failed("pct", Duration::from_secs(10)).await;
    assert_eq!(
        server.requests()[0].target,
        "/mcp?key=pass%20word{with}%22specials%22"
    );
    assert_eq!(
        failed["reason"],
        "HTTP 500 Internal Server Error: bad target /mcp?key=[redacted]"
    );
}

/// The header keys may be named; values never, also when the server sends the value back in an
/// SSE notification while a call runs (the notification is dropped, the answer scrubbed).
#[tokio::test]
async fn sse_echo_during_a_call_is_scrubbed() {
    let _guard = exclusive();
    let (_capture, logs) = logs::capture("trace");
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
    let host = keyed_host("s", &server.url, "value-0123456789").await;
    assert_eq!(
        host.call_tool("s", "t").await,
        Ok("header was [redacted]".to_string())
    );
    drop(host);
    let logs = logs.text();
    assert_eq!(
        line_with(&logs, "notifications/message"),
        "TRACE plugin_mcp::notices: ignored a notifications/message without a level namespace=s"
    );
    assert!(!logs.contains("value-0123456789"), "{logs}");
}

// ---------------------------------------------------------------------------------------------
// secrets in other forms, and the hints a 401/403 earns

/// A server that echoes a header percent-encoded (as a URL or a form would carry it), and one
/// configured with a token as the URL's user name: both are scrubbed exactly.
#[tokio::test]
async fn percent_encoded_header_echoes_and_url_user_names_are_scrubbed() {
    let _guard = exclusive();
    let (_capture, logs) = logs::capture("trace");
    let server = hostile::serve_initialize(|req| {
        let key = req.header("x-api-key").unwrap_or_default();
        let auth = req.header("authorization").unwrap_or_default();
        let encoded: String = url_encode(&key) + " / " + &url_encode(&auth) + " / " + &auth;
        Reply::raw(401, "text/plain", format!("rejected {encoded}"))
    })
    .await;
    let user_url = server
        .url
        .replacen("http://", "http://ghp_4f9a8b7c6d5e%2Fq@", 1);
    let host = Host::new(json!({
        "header": {"url": server.url, "headers": {"X-Api-Key": "k3y/with spaces+plus"}},
        "user": {"url": user_url},
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    assert_eq!(
        server_entry(&listing, "header")["reason"],
        "HTTP 401 Unauthorized: rejected [redacted] /  / ; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry's \"headers\" (e.g. \"Authorization\": \"Bearer ${env:TOKEN}\")"
    );
    // base64("ghp_4f9a8b7c6d5e/q:") is the Basic token; the user name alone and encoded too.
    let sent = server.first(|r| r.header("authorization").is_some());
    assert_eq!(
        sent.header("authorization").unwrap(),
        "Basic Z2hwXzRmOWE4YjdjNmQ1ZS9xOg=="
    );
    assert_eq!(
        server_entry(&listing, "user")["reason"],
        "HTTP 401 Unauthorized: rejected  / [redacted] / [redacted]; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry's \"headers\" (e.g. \"Authorization\": \"Bearer ${env:TOKEN}\")"
    );
    drop(host);
    let logs = logs.text();
    for namespace in ["header", "user"] {
        assert_eq!(
            logged_reason(&logs, namespace),
            server_entry(&listing, namespace)["reason"]
        );
    }
    for secret in [
        "k3y%2Fwith",
        "ghp_4f9a8b7c6d5e",
        "Z2hwXzRmOWE4YjdjNmQ1ZS9xOg",
    ] {
        assert!(!logs.contains(secret), "a log line shows {secret}: {logs}");
    }
}

/// `encodeURIComponent`: every byte but letters, digits and `-_.!~*'()` percent-encoded.
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A 401 or 403 whose config sent a `${NAME}` as written, or an `${env:NAME}` that is set but
/// empty, says so, naming NAME and never a value; a 500 does not.
#[tokio::test]
async fn refused_requests_hint_at_unexpanded_and_empty_variables() {
    let guard = exclusive();
    set_env(&guard, "MCP_SECRETS_EMPTY_KEY", "");
    let server = hostile::serve_initialize(|req| match req.target.as_str() {
        "/unexpanded" => Reply::raw(401, "text/plain", "bad token"),
        "/empty" => Reply::raw(403, "text/plain", ""),
        _ => Reply::raw(500, "text/plain", ""),
    })
    .await;
    let base = format!("http://127.0.0.1:{}", server.port);
    let host = Host::new(json!({
        "cc": {"url": format!("{base}/unexpanded"), "headers": {"Authorization": "Bearer ${API_KEY}"}},
        "empty": {"url": format!("{base}/empty"), "headers": {"X-Key": "${env:MCP_SECRETS_EMPTY_KEY}"}},
        "other": {"url": format!("{base}/other"), "headers": {"Authorization": "Bearer ${API_KEY}"}},
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    assert_eq!(
        server_entry(&listing, "cc")["reason"],
        "HTTP 401 Unauthorized: bad token; header \"Authorization\" holds ${API_KEY}, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}); to use the environment variable, write ${env:API_KEY}"
    );
    assert_eq!(
        server_entry(&listing, "empty")["reason"],
        "HTTP 403 Forbidden; the environment variable \"MCP_SECRETS_EMPTY_KEY\" used in header \"X-Key\" is set but empty"
    );
    assert_eq!(
        server_entry(&listing, "other")["reason"],
        "HTTP 500 Internal Server Error"
    );
    let sent = server.first(|r| r.target == "/unexpanded");
    assert_eq!(
        sent.header("authorization").as_deref(),
        Some("Bearer ${API_KEY}")
    );
}

/// VS Code's `${input:ID}`, its predefined variables (`${workspaceFolder}`), `${config:...}` and
/// a `${...}` of no known form are sent as written; a 401 or 403 then says what each is and to
/// use `${env:NAME}`, quoting no unknown form (it may be a pasted secret).
#[tokio::test]
async fn vs_code_placeholders_earn_a_hint_on_401_and_403() {
    let server = hostile::serve_initialize(|req| match req.target.as_str() {
        "/input" => Reply::raw(401, "text/plain", ""),
        _ => Reply::raw(403, "text/plain", ""),
    })
    .await;
    let base = format!("http://127.0.0.1:{}", server.port);
    let host = Host::new(json!({
        "input": {"url": format!("{base}/input"), "headers": {"Authorization": "Bearer ${input:github-token}"}},
        "folder": {"url": format!("{base}/folder?root=${{workspaceFolder}}"), "headers": {"X-Setting": "${config:mcp.key}"}},
        "other": {"url": format!("{base}/other"), "headers": {"X-Key": "${sk-live-4f9a8b7c6d5e}"}},
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    assert_eq!(
        server_entry(&listing, "input")["reason"],
        "HTTP 401 Unauthorized; header \"Authorization\" holds ${input:github-token}, a VS Code input (a value VS Code prompts for), which was sent as written: this Pack cannot prompt; put the value in an environment variable and write ${env:NAME}"
    );
    assert_eq!(
        server_entry(&listing, "folder")["reason"],
        "HTTP 403 Forbidden; url holds ${workspaceFolder}, a VS Code predefined variable, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}); write the value itself, or put it in an environment variable and write ${env:NAME}; \
         header \"X-Setting\" holds ${config:…}, a VS Code setting variable, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}); put the value in an environment variable and write ${env:NAME}"
    );
    assert_eq!(
        server_entry(&listing, "other")["reason"],
        "HTTP 403 Forbidden; header \"X-Key\" holds a ${...} placeholder this Pack does not know, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}); put the value in an environment variable and write ${env:NAME}"
    );
    let sent = server.first(|r| r.target == "/input");
    assert_eq!(
        sent.header("authorization").as_deref(),
        Some("Bearer ${input:github-token}")
    );
}

/// An error body is read to 8 KiB and its reason shows 1 KiB of it after scrubbing. A server
/// that echoes a long token many times shrinks to well under 1 KiB once scrubbed, so the copy
/// the 8 KiB cut splits would show its start: that piece is redacted too.
#[tokio::test]
async fn a_secret_split_by_the_preview_cut_leaves_no_prefix() {
    let _guard = exclusive();
    let token = format!("tok-{}", "a1b2c3d4".repeat(25)); // 204 bytes
    let body = format!("{token} ").repeat(60); // 12,300 bytes; the cut is inside copy 40
    let server =
        hostile::serve_initialize(move |_| Reply::raw(401, "text/plain", body.clone())).await;
    let host = Host::new(json!({
        "long": {"url": server.url, "headers": {"Authorization": format!("Bearer {token}")}}
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    // 40 copies of 205 bytes would be 8200: the 8192-byte cut keeps 39 whole copies, then 197
    // bytes of the 40th, which end inside its token.
    assert_eq!(
        server_entry(&listing, "long")["reason"],
        format!(
            "HTTP 401 Unauthorized: {}[redacted]; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry's \"headers\" (e.g. \"Authorization\": \"Bearer ${{env:TOKEN}}\")",
            "[redacted] ".repeat(39)
        )
    );
}

// ---------------------------------------------------------------------------------------------
// Secrets echoed in forms the scrubber must still catch (re-cased, JSON-escaped)

/// A server that echoes a configured header value verbatim into its redirect's `Location` host
/// (`https://<key>.login.example/`): the reason quotes the target after the URL parser has
/// lower-cased the host, so the scrubber no longer recognises the secret and its (lower-cased)
/// text reaches the reason. README: redirect targets that repeat a secret show `[redacted]`.
#[tokio::test]
async fn a_secret_echoed_in_a_redirect_host_is_scrubbed() {
    let _guard = exclusive();
    let (_capture, logs) = logs::capture("trace");
    let server = serve(|req| async move {
        let key = req.header("x-api-key").unwrap_or_default();
        Reply::raw(307, "text/plain", "")
            .header("location", &format!("https://{key}.login.example/cb"))
    })
    .await;
    let host = Host::new(json!({
        "echo": {"url": server.url, "headers": {"X-Api-Key": "Sk-Live-4F9A8B7C6D5E"}},
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    assert_eq!(
        server_entry(&listing, "echo")["reason"],
        "the server answered with a redirect (HTTP 307) to \"https://[redacted].login.example/cb\", which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\""
    );
    drop(host);
    let logs = logs.text();
    assert_eq!(
        logged_reason(&logs, "echo"),
        server_entry(&listing, "echo")["reason"]
    );
    assert!(
        !logs.to_lowercase().contains("sk-live-4f9a8b7c6d5e"),
        "{logs}"
    );
}

/// An env value used as the url's host (`http://${env:HOST}:port/mcp`) is a secret (README:
/// env values). A FastMCP-style relative redirect (`/mcp` → `/mcp/`) is resolved against the
/// parsed url, whose host the URL parser lower-cased, so the env value (in lower case) reaches
/// the reason unscrubbed. `LocalHost` resolves to loopback, so this stays on 127.0.0.1/::1.
#[tokio::test]
async fn an_env_host_in_a_resolved_redirect_target_is_scrubbed() {
    let guard = exclusive();
    set_env(&guard, "MCP_BREAK10_HOST", "LocalHost");
    let server = serve(|req| async move {
        match req.target.as_str() {
            "/mcp" => Reply::raw(307, "text/plain", "").header("location", "/mcp/"),
            _ => standard(&req).unwrap_or_else(|| Reply::raw(404, "text/plain", "")),
        }
    })
    .await;
    let url = format!("http://${{env:MCP_BREAK10_HOST}}:{}/mcp", server.port);
    let host = Host::new(json!({"envhost": {"url": url}}));
    let listing = host.settled(Duration::from_secs(10)).await;
    assert_eq!(
        server_entry(&listing, "envhost")["reason"],
        format!(
            "the server answered with a redirect (HTTP 307) to \"http://[redacted]:{}/mcp/\", which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\"",
            server.port
        )
    );
}

/// An HTTP error body is quoted in the reason after a plain-text scrub only. A server that
/// echoes a secret inside a JSON error body with JSON's other escapes — PHP's `json_encode`
/// writes `/` as `\/`, Python's `json.dumps` (ensure_ascii, its default) writes `ä` as
/// `\u00e4` — gets it past the scrubber, although README promises JSON-escaped echoes are
/// scrubbed (and the crate sees through those very escapes in schemas and structuredContent).
#[tokio::test]
async fn a_secret_json_escaped_in_an_error_body_is_scrubbed() {
    let guard = exclusive();
    let (_capture, logs) = logs::capture("trace");
    set_env(&guard, "MCP_BREAK10_PW", "pässwort-geheim");
    let server = hostile::serve_initialize(|req| {
        let body = match req.target.as_str() {
            "/php" => r#"{"error":"invalid key k3y\/abcdef+ghi"}"#,
            _ => r#"{"detail":"bad key p\u00e4sswort-geheim"}"#,
        };
        Reply::raw(401, "application/json", body)
    })
    .await;
    let base = format!("http://127.0.0.1:{}", server.port);
    let host = Host::new(json!({
        "php": {"url": format!("{base}/php"), "headers": {"X-Api-Key": "k3y/abcdef+ghi"}},
        "py": {"url": format!("{base}/py?key=${{env:MCP_BREAK10_PW}}")},
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    assert_eq!(
        (
            server_entry(&listing, "php")["reason"].clone(),
            server_entry(&listing, "py")["reason"].clone()
        ),
        (
            json!(
                r#"HTTP 401 Unauthorized: {"error":"invalid key [redacted]"}; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry's "headers" (e.g. "Authorization": "Bearer ${env:TOKEN}")"#
            ),
            json!(
                r#"HTTP 401 Unauthorized: {"detail":"bad key [redacted]"}; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry's "headers" (e.g. "Authorization": "Bearer ${env:TOKEN}")"#
            )
        )
    );
    drop(host);
    let logs = logs.text();
    assert_eq!(
        (logged_reason(&logs, "php"), logged_reason(&logs, "py")),
        (
            r#"HTTP 401 Unauthorized: {"error":"invalid key [redacted]"}; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry's "headers" (e.g. "Authorization": "Bearer ${env:TOKEN}")"#,
            r#"HTTP 401 Unauthorized: {"detail":"bad key [redacted]"}; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry's "headers" (e.g. "Authorization": "Bearer ${env:TOKEN}")"#
        )
    );
    for leaked in [r"k3y\/abcdef", r"p\u00e4sswort"] {
        assert!(!logs.contains(leaked), "a log line shows {leaked}: {logs}");
    }
}

/// Tools very often answer a JSON document as their text block. One written by PHP's
/// `json_encode` (which escapes `/` as `\/`) that quotes a configured header value reaches the
/// model unscrubbed: result text gets a plain-text scrub only.
#[tokio::test]
async fn a_secret_json_escaped_in_a_text_result_is_scrubbed() {
    let _guard = exclusive();
    let server = serve(|req| async move {
        if let Some(reply) = standard(&req) {
            return reply;
        }
        let id = req.id();
        match req.method() {
            "tools/list" => Reply::json(&tools_page(&id, vec![tool("t", "t")], None)),
            _ => Reply::json(&text_result(&id, r#"{"key":"k3y\/abcdef+ghi","ok":true}"#)),
        }
    })
    .await;
    let host = Host::new(json!({
        "php": {"url": server.url, "headers": {"X-Api-Key": "k3y/abcdef+ghi"}},
    }));
    host.ready("php", Duration::from_secs(10)).await;
    let text = host.call_tool("php", "t").await;
    assert_eq!(text, Ok(r#"{"key":"[redacted]","ok":true}"#.to_string()));
}

/// An env value used as the url's host is a secret (README: env values), and no log line of this
/// crate carries it. The HTTP stack's own debug lines (`reqwest::connect`'s "starting new
/// connection", `hyper_util`'s pool) name the host they connect to, and this crate cannot
/// scrub another crate's log events: README says so. `localhost` keeps this on loopback.
#[tokio::test]
async fn an_env_host_reaches_no_log_line_of_this_crate() {
    let guard = exclusive();
    let (_capture, logs) = logs::capture("trace");
    set_env(&guard, "MCP_BREAK10_LHOST", "localhost");
    let server = serve(|req| async move {
        standard(&req).unwrap_or_else(|| Reply::json(&tools_page(&req.id(), vec![], None)))
    })
    .await;
    let url = format!("http://${{env:MCP_BREAK10_LHOST}}:{}/mcp", server.port);
    let host = Host::new(json!({"envhost": {"url": url}}));
    host.ready("envhost", Duration::from_secs(10)).await;
    drop(host);
    let text = logs.text();
    let ours: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" plugin_mcp::"))
        .collect();
    assert!(
        ours.iter().any(|l| l.contains("initialized")),
        "the start logs at debug: {text}"
    );
    let leaked: Vec<&str> = ours
        .into_iter()
        .filter(|l| l.contains("localhost"))
        .collect();
    assert_eq!(leaked, Vec::<&str>::new());
}

/// Hosted MCP servers often take their key in the url's query (`...?api_key=...`), written
/// literally in the config. Starlette (FastMCP) answers `/mcp` with a 307 to `/mcp/` keeping
/// the query, and the new redirect reason quotes that target, so the key reaches the model and
/// the `warn` log. README counts only header values, env values and URL user/password as
/// secrets, so this is a gap in the contract rather than in the scrubber; the brief counts any
/// token.
#[tokio::test]
async fn a_literal_query_key_reaches_no_redirect_reason() {
    let _guard = exclusive();
    let (_capture, logs) = logs::capture("trace");
    let server = serve(|req| async move {
        let query = req
            .target
            .split_once('?')
            .map_or("", |(_, q)| q)
            .to_string();
        Reply::raw(307, "text/plain", "").header("location", &format!("/mcp/?{query}"))
    })
    .await;
    let url = format!("{}?api_key=sk-live-4f9a8b7c6d5e", server.url);
    let host = Host::new(json!({"hosted": {"url": url}}));
    let listing = host.settled(Duration::from_secs(10)).await;
    let reason = server_entry(&listing, "hosted")["reason"]
        .as_str()
        .unwrap()
        .to_string();
    drop(host);
    let logs = logs.text();
    assert_eq!(logged_reason(&logs, "hosted"), reason);
    assert_eq!(
        (
            reason.contains("sk-live-4f9a8b7c6d5e"),
            logs.contains("sk-live-4f9a8b7c6d5e")
        ),
        (false, false),
        "reason: {reason}"
    );
}

/// A port given by `${env:...}` never shows in a connect failure, also when the url is written
/// with one slash after the scheme (`http:/host:port/...`, which a WHATWG parser reads as
/// `http://host:port/...`): the env value is short, so only the origin rule can hide it.
#[tokio::test]
async fn an_env_port_in_a_one_slash_url_is_not_shown() {
    let guard = exclusive();
    let port = crate::support::net::free_port();
    set_env(&guard, "MCP_SECRETS_PORT", &port.to_string());
    let host = Host::new(json!({"p": {"url": "http:/127.0.0.1:${env:MCP_SECRETS_PORT}/mcp"}}));
    assert_eq!(
        host.failed("p", Duration::from_secs(10)).await["reason"],
        "connection refused (no server is listening at the configured URL)"
    );
}

// ---------------------------------------------------------------------------------------------
// tokens learned by signing in

/// A local authorization server with `options` that echoes what it receives, and a Host whose
/// entry `ok` signed in to it through the listing's link (the browser played); and the link.
async fn signed_in_with_echo(options: oauth::Options) -> (oauth::TestServer, Host, String) {
    let server = oauth::TestServer::start(oauth::Options {
        echo: true,
        ..options
    })
    .await;
    let host = Host::new(json!({"ok": {"url": server.mcp_url().as_str()}}));
    let listing = host
        .wait_for(Duration::from_secs(10), |l| {
            !server_entry(l, "ok")["signInUrl"].is_null()
        })
        .await;
    let link = server_entry(&listing, "ok")["signInUrl"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        oauth::play_browser(&reqwest::Url::parse(&link).unwrap()).await,
        200
    );
    host.ready("ok", Duration::from_secs(10)).await;
    (server, host, link)
}

/// `call_dynamic_tool` of `tool` on the entry `ok`.
async fn call_on_ok(host: &Host, tool: &str) -> Result<String, ToolError> {
    host.call(
        "call_dynamic_tool",
        json!({"namespace": "ok", "toolName": tool}),
    )
    .await
}

/// Records what a caller sees of `outcome` under `label`: its `Debug` form, and its text or
/// error message.
fn record_outcome(
    seen: &mut Vec<(String, String)>,
    label: &str,
    outcome: Result<String, ToolError>,
) {
    seen.push((format!("{label} (Debug)"), format!("{outcome:?}")));
    match outcome {
        Ok(text) => seen.push((label.to_string(), text)),
        Err(e) => seen.push((label.to_string(), e.message)),
    }
}

/// The access and refresh tokens a sign-in learns, and the client secret of the entry, are
/// secrets like configured header values: a server echoing the token shows `[redacted]`, and no
/// listing, reason, error, `Debug` output or trace-level log line holds any of them — through
/// the sign-in, a refresh after a `401` (a new token learned at run time), and the calls.
#[tokio::test]
async fn tokens_learned_by_signing_in_never_escape() {
    let _guard = exclusive();
    crate::support::oauth_store();
    let (_capture, logs) = logs::capture("trace");
    let (server, host, link) = signed_in_with_echo(oauth::Options::default()).await;
    let call = |tool: &'static str| call_on_ok(&host, tool);
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut record = |label: &str, outcome| record_outcome(&mut seen, label, outcome);
    let first = call("whoami").await;
    assert_eq!(first.as_deref().unwrap(), "you sent [redacted]");
    record("call whoami", first);
    record("call fails", call("fails").await);
    // The token expires on the server: the 401 brings a refresh and a token learned now.
    server.expire_access_tokens();
    let second = call("whoami").await;
    assert_eq!(second.as_deref().unwrap(), "you sent [redacted]");
    record("call whoami after refresh", second);
    record("call fails after refresh", call("fails").await);
    record(
        "listing",
        host.call("get_dynamic_tools", json!({"namespace": "ok"}))
            .await,
    );
    record("tool", host.lookup("ok", "whoami").await);
    drop(host);
    tokio::time::sleep(Duration::from_millis(50)).await;

    let (tokens, grants) = {
        let log = server.log.lock().unwrap();
        let tokens: Vec<String> = log
            .mcp
            .iter()
            .filter_map(|t| t.split(' ').nth(1))
            .filter(|t| t.starts_with("access-token-"))
            .map(str::to_string)
            .collect();
        (tokens, log.token_requests.len())
    };
    assert_eq!(grants, 2, "a code exchange and a refresh");
    let mut secrets: Vec<String> = tokens.clone();
    secrets.sort();
    secrets.dedup();
    assert_eq!(secrets, ["access-token-000002", "access-token-000003"]);
    secrets.extend(["refresh-token-000002".into(), "refresh-token-000003".into()]);
    for (label, text) in &seen {
        assert_no_secret(label, text, &secrets);
    }
    let logs = logs.text();
    assert_no_secret("the log", &logs, &secrets);
    assert!(logs.contains("signed in"), "the capture works: {logs}");
    // The link is logged once, when it is made; the starts waiting for it do not repeat it.
    let with_link: Vec<&str> = logs.lines().filter(|l| l.contains(&link)).collect();
    assert_eq!(with_link.len(), 1, "{with_link:#?}");
    assert!(
        with_link[0].contains(" INFO ")
            && with_link[0].contains("the server needs a sign-in; its link waits in the listing"),
        "{}",
        with_link[0]
    );
}

/// DPoP (RFC 9449): an authorization server that binds tokens and both endpoints asking for a
/// nonce. Every token request and every MCP request carries a proof the servers accept, the
/// nonces are retried once each, a refresh proves the same key, and an echo of the token and
/// the proof shows `[redacted]` for both. No listing, reason, error, `Debug` output or
/// trace-level log line holds a token, a proof or the stored key.
#[tokio::test]
async fn dpop_proofs_and_keys_never_escape() {
    let _guard = exclusive();
    crate::support::oauth_store();
    let (_capture, logs) = logs::capture("trace");
    let (server, host, _) = signed_in_with_echo(oauth::Options::with_dpop(true, true)).await;
    let call = |tool: &'static str| call_on_ok(&host, tool);
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut record = |label: &str, outcome| record_outcome(&mut seen, label, outcome);
    let first = call("whoami").await;
    assert_eq!(
        first.as_deref().unwrap(),
        "you sent [redacted] with proof [redacted]"
    );
    record("call whoami", first);
    record("call fails", call("fails").await);
    server.expire_access_tokens();
    let second = call("whoami").await;
    assert_eq!(
        second.as_deref().unwrap(),
        "you sent [redacted] with proof [redacted]"
    );
    record("call whoami after refresh", second);
    record(
        "listing",
        host.call("get_dynamic_tools", json!({"namespace": "ok"}))
            .await,
    );
    record("tool", host.lookup("ok", "whoami").await);
    let stored: Value = serde_json::from_slice(
        &std::fs::read(crate::support::store_file(&server.mcp_url(), "", "ok")).unwrap(),
    )
    .unwrap();
    drop(host);
    tokio::time::sleep(Duration::from_millis(50)).await;

    let log = server.log.lock().unwrap();
    // The code exchange and the refresh each met the nonce once; the MCP endpoint's nonce once,
    // on the first request; the expired token's refusal is not a proof's.
    let (token_proofs, mcp_proofs): (Vec<&str>, Vec<&str>) = log
        .proofs
        .iter()
        .map(String::as_str)
        .partition(|p| p.starts_with("token "));
    assert_eq!(
        token_proofs,
        [
            "token POST use_dpop_nonce",
            "token POST ok",
            "token POST ok"
        ]
    );
    // The first initialize meets the nonce; then initialize, notifications/initialized,
    // tools/list, whoami, fails, whoami refused for its expired token (its proof was good),
    // and whoami with the refreshed token.
    let mut expected = vec!["mcp POST use_dpop_nonce"];
    expected.extend(["mcp POST ok"; 7]);
    assert_eq!(mcp_proofs, expected);
    let grant_types: Vec<&str> = log
        .token_requests
        .iter()
        .map(|f| f["grant_type"].as_str())
        .collect();
    assert_eq!(
        grant_types,
        ["authorization_code", "authorization_code", "refresh_token"]
    );
    let key = stored["grant"]["dpop_key"].as_str().unwrap().to_string();
    // A P-256 key in PKCS #8 (with its public key): 138 bytes, 184 in base64url.
    assert_eq!(key.len(), 184, "a PKCS #8 key");
    assert_eq!(stored["grant"].get("dpop_refresh_only"), None);
    let mut secrets: Vec<String> = log.proofs_seen.clone();
    // The authorization code and the PKCE verifier of each code exchange.
    for form in &log.token_requests {
        for field in ["code", "code_verifier"] {
            if let Some(value) = form.get(field) {
                secrets.push(value.clone());
            }
        }
    }
    assert_eq!(
        secrets.len(),
        log.proofs_seen.len() + 4,
        "two exchanges' codes and verifiers"
    );
    secrets.extend([
        key,
        "access-token-000002".into(),
        "access-token-000003".into(),
        "refresh-token-000002".into(),
        "refresh-token-000003".into(),
    ]);
    for (label, text) in &seen {
        assert_no_secret(label, text, &secrets);
    }
    let logs = logs.text();
    assert_no_secret("the log", &logs, &secrets);
    assert!(logs.contains("signed in"), "the capture works: {logs}");
}

/// A server that knows a configured header value (it receives it on every POST) names an
/// authorization endpoint holding it: the sign-in link shown in the listing, the call error and
/// the log must not carry the value.
#[tokio::test]
async fn a_header_value_echoed_into_the_sign_in_link_is_not_shown() {
    const KEY: &str = "sk-header-secret-12345";
    let _guard = exclusive();
    crate::support::oauth_store();
    let (_capture, logs) = logs::capture("trace");
    let (_server, base) =
        key_echoing_sign_in(|base, key| format!("{base}/authorize?tenant={key}")).await;
    let host = Host::new(json!({"ok": {
        "url": format!("{base}/mcp"),
        "headers": {"X-Api-Key": KEY},
    }}));
    let listing = host
        .wait_for(Duration::from_secs(10), |l| {
            server_entry(l, "ok")["status"] == "error"
        })
        .await;
    let call = host.call_tool("ok", "x").await;
    drop(host);
    let entry = server_entry(&listing, "ok");
    assert_eq!(entry["signInUrl"], serde_json::Value::Null, "{entry}");
    assert_eq!(
        entry["reason"],
        "signing in failed: the authorization server's metadata repeats a secret of this server entry; \
         refusing to show its link",
        "{entry}"
    );
    let logs = logs.text();
    assert_eq!(
        line_with(&logs, "repeats a secret of this server entry"),
        " WARN plugin_mcp::http::auth: the authorization server's metadata repeats a secret of \
         this server entry; refusing to show its link"
    );
    assert_eq!(
        logged_reason(&logs, "ok"),
        entry["reason"],
        "the start failure is logged with the listing's reason"
    );
    let shown = [listing.to_string(), format!("{call:?}"), logs];
    let leaked: Vec<&String> = shown.iter().filter(|t| t.contains(KEY)).collect();
    assert_eq!(leaked, Vec::<&String>::new());
}

/// A signed `client_assertion` (RFC 7523; valid for minutes) that the MCP server echoes in its
/// tool results reaches no result, listing or log line: the entry's redactor learns it before
/// it is sent, not only the token endpoint's refusal.
#[tokio::test]
async fn an_echoed_client_assertion_is_scrubbed_from_what_the_server_says() {
    let _guard = exclusive();
    crate::support::oauth_store();
    let (_capture, logs) = logs::capture("trace");
    let server = oauth::TestServer::start(oauth::Options {
        echo: true,
        echo_credentials: true,
        ..oauth::Options::default()
    })
    .await;
    let host = Host::new(json!({"bot": {"url": server.mcp_url().as_str(), "oauth": {
        "grantType": "client_credentials", "clientId": "assertion-bot",
        "privateKey": oauth::private_key_pem(),
    }}}));
    let listing = host.ready("bot", Duration::from_secs(10)).await;
    let answer = host.call_tool("bot", "whoami").await;
    drop(host);
    let assertion = server.log.lock().unwrap().assertion.clone().unwrap();
    assert_eq!(assertion.split('.').count(), 3, "a JWT was sent");
    assert_eq!(answer.as_deref(), Ok("you sent [redacted] and [redacted]"));
    let shown = [listing.to_string(), format!("{answer:?}"), logs.text()];
    let leaked: Vec<&String> = shown.iter().filter(|t| t.contains(&assertion)).collect();
    assert_eq!(leaked, Vec::<&String>::new());
}

/// A registered client's secret is a credential for the Pack's whole life: however many
/// refreshes rotate the tokens (each learned, the newest kept), a server echoing the secret
/// still shows `[redacted]`.
#[tokio::test]
async fn a_registered_client_secret_stays_scrubbed_after_many_refreshes() {
    let _guard = exclusive();
    crate::support::oauth_store();
    let (_capture, logs) = logs::capture("trace");
    let (server, host, _) = signed_in_with_echo(oauth::Options {
        echo_credentials: true,
        auth_methods: vec!["client_secret_post"],
        ..oauth::Options::default()
    })
    .await;
    let mut answers = Vec::new();
    for _ in 0..40 {
        server.expire_access_tokens();
        answers.push(host.call_tool("ok", "whoami").await);
    }
    drop(host);
    let (secret, refreshes) = {
        let log = server.log.lock().unwrap();
        let refreshes = log
            .token_requests
            .iter()
            .filter(|form| form.get("grant_type").map(String::as_str) == Some("refresh_token"))
            .count();
        (log.client_secret.clone().unwrap(), refreshes)
    };
    assert_eq!(refreshes, 40);
    assert_eq!(
        answers.last().unwrap().as_deref(),
        Ok("you sent [redacted] and [redacted]")
    );
    assert_eq!(
        answers
            .iter()
            .filter(|a| a.as_deref() != Ok("you sent [redacted] and [redacted]"))
            .count(),
        0
    );
    assert!(!logs.text().contains(&secret));
}

// ---------------------------------------------------------------------------------------------
// the resource indicator (RFC 8707)

/// Every `resource` the authorization server received: of the authorization requests (the
/// links opened) and of the token requests, in that order.
fn resources_received(server: &oauth::TestServer) -> Vec<String> {
    let log = server.log.lock().unwrap();
    log.authorizations
        .iter()
        .chain(&log.token_requests)
        .filter_map(|form| form.get("resource").cloned())
        .collect()
}

/// An authorization server and protected resource that publishes no protected resource
/// metadata (a 2025-03-26 server): the server's url is the resource indicator.
async fn without_prm() -> oauth::TestServer {
    oauth::TestServer::start(oauth::Options {
        prm: oauth::PrmAt::Nowhere,
        ..oauth::Options::default()
    })
    .await
}

/// `entry` signing in with the client credentials grant as client `resource-bot`
/// (`private_key_jwt`, RFC 7523), so no link is made.
fn resource_bot(mut entry: Value) -> Value {
    entry["oauth"] = json!({
        "grantType": "client_credentials", "clientId": "resource-bot",
        "privateKey": oauth::private_key_pem(),
    });
    entry
}

/// What the Host showed, and whether any of it, or any `resource` the authorization server
/// received, holds `secret`.
fn assert_resource_secret_nowhere(server: &oauth::TestServer, secret: &str, shown: &[String]) {
    let sent: Vec<String> = resources_received(server)
        .into_iter()
        .filter(|resource| resource.contains(secret))
        .collect();
    assert_eq!(
        sent,
        Vec::<String>::new(),
        "a resource sent holds the secret"
    );
    let leaked: Vec<&String> = shown.iter().filter(|t| t.contains(secret)).collect();
    assert_eq!(leaked, Vec::<&String>::new());
}

/// With no protected resource metadata (a 2025-03-26 server) the server's url, query and all,
/// is the resource indicator. An `${env:...}` value in that query is a secret: a client
/// credentials grant (no link to check) must not send it to the token endpoint as `resource`,
/// and the sign-in fails with a reason saying what to change.
#[tokio::test]
async fn a_secret_in_the_urls_query_is_never_the_resource_of_a_client_credentials_grant() {
    const KEY: &str = "rk-7d1e5c9a3b2f-query";
    let guard = exclusive();
    crate::support::oauth_store();
    let (_capture, logs) = logs::capture("trace");
    set_env(&guard, "MCP_SECRETS_RESOURCE_KEY", KEY);
    let server = without_prm().await;
    let url = format!("{}?key=${{env:MCP_SECRETS_RESOURCE_KEY}}", server.mcp_url());
    let host = Host::new(json!({"bot": resource_bot(json!({"url": url}))}));
    let listing = host.settled(Duration::from_secs(10)).await;
    let call = host.call_tool("bot", "whoami").await;
    drop(host);
    let shown = [listing.to_string(), format!("{call:?}"), logs.text()];
    assert_resource_secret_nowhere(&server, KEY, &shown);
    let entry = server_entry(&listing, "bot");
    assert_eq!(
        (&entry["status"], &entry["reason"]),
        (
            &json!("error"),
            &json!(format!("signing in failed: {URL_RESOURCE_REFUSED}"))
        ),
        "{entry}"
    );
    assert_eq!(server.log.lock().unwrap().token_requests.len(), 0);
    let message = call.unwrap_err().message;
    let unavailable = format!(
        "server \"bot\" is unavailable: signing in failed: {URL_RESOURCE_REFUSED}; it will be \
         started again in "
    );
    assert!(message.starts_with(&unavailable), "{message}");
}

/// Why a sign-in whose resource indicator would be the server's url holding a secret fails.
const URL_RESOURCE_REFUSED: &str = "the server's url holds a secret of this server entry and, \
     with no resource published in the server's protected resource metadata (RFC 9728), the url \
     is the resource indicator (RFC 8707) every authorization and token request names; it is \
     not sent, and signing in is refused: move the secret out of the url (a query parameter \
     such as ?key=${env:API_KEY}) into a header (\"headers\")";

/// A `resource` the protected resource metadata publishes holding a secret the entry knows (a
/// server that copies the `X-Api-Key` it received into it) never goes out either.
#[tokio::test]
async fn a_published_resource_holding_a_header_secret_is_never_sent() {
    const KEY: &str = "rk-header-5b8e2f0c4a6d";
    let _guard = exclusive();
    crate::support::oauth_store();
    let (_capture, logs) = logs::capture("trace");
    let server = oauth::TestServer::start(oauth::Options {
        resource_echoes_key: true,
        ..oauth::Options::default()
    })
    .await;
    let entry = json!({"url": server.mcp_url().as_str(), "headers": {"X-Api-Key": KEY}});
    let host = Host::new(json!({"bot": resource_bot(entry)}));
    let listing = host.settled(Duration::from_secs(10)).await;
    let call = host.call_tool("bot", "whoami").await;
    drop(host);
    let shown = [listing.to_string(), format!("{call:?}"), logs.text()];
    assert_resource_secret_nowhere(&server, KEY, &shown);
    let entry = server_entry(&listing, "bot");
    assert_eq!(
        (&entry["status"], &entry["reason"]),
        (
            &json!("error"),
            &json!(format!("signing in failed: {PUBLISHED_RESOURCE_REFUSED}"))
        ),
        "{entry}"
    );
    assert_eq!(server.log.lock().unwrap().token_requests.len(), 0);
}

/// Why a sign-in whose published resource holds a secret fails.
const PUBLISHED_RESOURCE_REFUSED: &str = "the resource the server's protected resource metadata \
     publishes (RFC 9728) holds a secret of this server entry, and it is the resource indicator \
     (RFC 8707) every authorization and token request names; it is not sent, and signing in is \
     refused: if the server's url holds the secret (a query parameter such as \
     ?key=${env:API_KEY}), move it into a header (\"headers\")";

/// A grant stored while the url's query held no known secret (signed in by an entry without
/// the header) is refreshed by an entry that configures that value as a header: the refresh
/// would name the url, secret and all, as its `resource`. It is not sent; the call fails with
/// the reason, and nothing shows the value.
#[tokio::test]
async fn a_refresh_never_sends_a_resource_holding_a_secret() {
    const KEY: &str = "rk-refresh-9c3f7a1e5d2b";
    let _guard = exclusive();
    crate::support::oauth_store();
    let server = without_prm().await;
    let url = format!("{}?key={KEY}", server.mcp_url());
    let first = Host::new(json!({"docs": {"url": url}}));
    crate::signin::sign_in(&first).await;
    drop(first);
    let signed_in = resources_received(&server).len();
    // Captured from here: the first entry, which knows no secret, shows its url as it is.
    let (_capture, logs) = logs::capture("trace");
    let host = Host::new(json!({"docs": {"url": url, "headers": {"X-Api-Key": KEY}}}));
    host.ready("docs", Duration::from_secs(10)).await;
    server.expire_access_tokens();
    let call = host.call_tool("docs", "whoami").await;
    let listing = host.listing(json!({})).await;
    drop(host);
    let later: Vec<String> = resources_received(&server)
        .split_off(signed_in)
        .into_iter()
        .filter(|resource| resource.contains(KEY))
        .collect();
    assert_eq!(later, Vec::<String>::new(), "a refresh sent the secret");
    let call = call.map_err(|e| e.message);
    assert_eq!(
        call,
        Err(format!(
            "server \"docs\": signing in failed: {URL_RESOURCE_REFUSED}"
        ))
    );
    let shown = [listing.to_string(), format!("{call:?}"), logs.text()];
    let leaked: Vec<&String> = shown.iter().filter(|t| t.contains(KEY)).collect();
    assert_eq!(leaked, Vec::<&String>::new());
}

/// An authorization code sign-in of such a url makes no link: its authorization request would
/// name the url as `resource` too. The reason says why, as for the client credentials grant.
#[tokio::test]
async fn a_secret_in_the_urls_query_is_never_the_resource_of_a_sign_in_link() {
    const KEY: &str = "rk-link-2e6b9d4f8a1c";
    let guard = exclusive();
    crate::support::oauth_store();
    let (_capture, logs) = logs::capture("trace");
    set_env(&guard, "MCP_SECRETS_RESOURCE_LINK_KEY", KEY);
    let server = without_prm().await;
    let url = format!(
        "{}?key=${{env:MCP_SECRETS_RESOURCE_LINK_KEY}}",
        server.mcp_url()
    );
    let host = Host::new(json!({"docs": {"url": url}}));
    let entry = host.failed("docs", Duration::from_secs(10)).await;
    let call = host.call_tool("docs", "whoami").await;
    drop(host);
    let shown = [entry.to_string(), format!("{call:?}"), logs.text()];
    assert_resource_secret_nowhere(&server, KEY, &shown);
    assert_eq!(
        (&entry["signInUrl"], &entry["reason"]),
        (
            &Value::Null,
            &json!(format!("signing in failed: {URL_RESOURCE_REFUSED}"))
        ),
        "{entry}"
    );
    let log = server.log.lock().unwrap();
    assert_eq!((log.authorizations.len(), log.token_requests.len()), (0, 0));
}

/// A query holding no secret stays part of the resource indicator (RFC 8707 §2: the url as
/// configured, without its fragment).
#[tokio::test]
async fn a_query_holding_no_secret_is_still_sent_in_the_resource() {
    let _guard = exclusive();
    crate::support::oauth_store();
    let server = without_prm().await;
    let url = format!("{}?tenant=public-tenant-1", server.mcp_url());
    let host = Host::new(json!({"bot": resource_bot(json!({"url": url}))}));
    host.ready("bot", Duration::from_secs(10)).await;
    drop(host);
    assert_eq!(resources_received(&server), [url]);
}

/// Confirmed right: secrets that overlap, contain each other, touch, or meet an escaped form
/// of another leave no byte behind, one `[redacted]` per covered run, in a text result and in
/// a description.
#[tokio::test]
async fn overlapping_nested_and_touching_secrets_leave_no_byte() {
    const A: &str = "AAAA1111BBBB";
    const B: &str = "BBBB2222CCCC";
    const INNER: &str = "1111BBBB2222";
    const SAY: &str = "x AAAA1111BBBB2222CCCC y AAAA1111BBBBBBBB2222CCCC z BBBB2222CCCCAAAA1111BBBB w a%2Fb%2Fc%2Fd%2Fe/f/g/h/i";
    let server = serve(|req| async move {
        if let Some(reply) = standard(&req) {
            return reply;
        }
        let id = req.id();
        let body = match req.method() {
            "tools/list" => json!({"jsonrpc":"2.0","id":id,"result":{"tools":[{"name":"t","description":SAY,"inputSchema":{"type":"object","default":SAY}}]}}),
            _ => json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":SAY}]}}),
        };
        Reply::json(&body)
    })
    .await;
    let host = Host::new(json!({"k": {"url": server.url, "headers": {
        "X-A": A, "X-B": B, "X-Inner": INNER, "X-Path": "a/b/c/d/e", "X-Tail": "e/f/g/h/i"
    }}}));
    host.ready("k", Duration::from_secs(10)).await;
    const SCRUBBED: &str = "x [redacted] y [redacted] z [redacted] w [redacted]";
    assert_eq!(host.call_tool("k", "t").await, Ok(SCRUBBED.to_string()));
    let one: serde_json::Value =
        serde_json::from_str(&host.lookup("k", "t").await.unwrap()).unwrap();
    assert_eq!(one["description"], SCRUBBED);
    assert_eq!(one["inputSchema"]["default"], SCRUBBED);
}

/// Secrets that look like placeholders: only a value the config wrote may hold one sent as written.
mod placeholder_looking_values {
    use std::time::Duration;

    use serde_json::json;

    use crate::support::Host;
    use crate::support::hostile::{self, Reply, server_entry};

    /// Sets `name` to `value` for this process (a name only this module reads).
    fn set_env(name: &str, value: &str) {
        // SAFETY: the variable is this module's own; other tests read the environment only through
        // `std::env`, which takes the same process-wide lock as `set_var`.
        unsafe { std::env::set_var(name, value) };
    }

    /// The start reason of a server that echoes the `X-Api-Key` it got, when the entry sends
    /// `${env:<name>}` there and the variable holds `value`.
    async fn reason_echoing_an_env_value(name: &str, value: &str) -> serde_json::Value {
        set_env(name, value);
        let server = hostile::serve_initialize(|req| {
            let key = req.header("x-api-key").unwrap_or_default();
            Reply::raw(500, "text/plain", format!("bad key {key}"))
        })
        .await;
        let host = Host::new(json!({
            "s": {"url": server.url, "headers": {"X-Api-Key": format!("${{env:{name}}}")}},
        }));
        let listing = host.settled(Duration::from_secs(10)).await;
        server_entry(&listing, "s")["reason"].clone()
    }

    /// An `${env:...}` value is a secret whatever it looks like: one that looks like Gemini
    /// CLI's bare `$NAME` (a `$` then upper-case letters and digits, as a generated API key may)
    /// is scrubbed when a server echoes it.
    #[tokio::test]
    async fn an_env_value_that_looks_like_a_bare_dollar_name_is_still_scrubbed() {
        assert_eq!(
            reason_echoing_an_env_value("MCP_FINDINGS3_DOLLAR_KEY", "$K7Q2X9ZP4M8WR3T6VN5B").await,
            "HTTP 500 Internal Server Error: bad key [redacted]"
        );
    }

    /// So is one that looks like a `${NAME}` placeholder.
    #[tokio::test]
    async fn an_env_value_that_looks_like_a_braced_placeholder_is_still_scrubbed() {
        assert_eq!(
            reason_echoing_an_env_value("MCP_FINDINGS3_BRACED_KEY", "${K7Q2X9ZP4M8WR3T6VN5B}")
                .await,
            "HTTP 500 Internal Server Error: bad key [redacted]"
        );
    }

    /// A configured header value is a secret (README "Secrets"): no listing shows it, not even
    /// one that begins with `$` and is otherwise upper-case letters and digits (as some
    /// generated API keys are), which a note on Gemini CLI's bare `$NAME` could take for a
    /// placeholder.
    #[tokio::test]
    async fn a_configured_header_value_that_looks_like_a_bare_dollar_name_is_never_listed() {
        const SECRET: &str = "$K7Q2X9ZP4M8WR3T6VN5B";
        let server =
            hostile::serve_tools(vec![hostile::tool("t1", "one tool")], |_| Reply::accepted())
                .await;
        let host = Host::new(json!({
            "s": {"url": server.url, "headers": {"X-Api-Key": SECRET}},
        }));
        host.ready("s", Duration::from_secs(10)).await;
        let listing = host.listing(json!({})).await.to_string();
        assert!(!listing.contains("K7Q2X9ZP4M8WR3T6VN5B"), "{listing}");
    }
}

/// The secret of the entry's header, as a server can write it twice escaped: a JSON text held in
/// a JSON string, its `t` written `\u0074`, then that string written in JSON again.
const TWICE_ESCAPED_TOKEN: &str = "tok-1234567890abc";

/// A server log message whose `data` is an object (written as its JSON text, scrubbed) holding
/// the header's token twice escaped is scrubbed like a result's JSON is: the plain rule decodes
/// escapes level by level (up to three), so the token's escaped form never reaches the log at
/// `RUST_LOG=trace`.
#[tokio::test]
async fn a_log_message_with_a_twice_escaped_token_in_object_data_is_scrubbed() {
    let (_capture, logs) = logs::capture("trace");
    let server = crate::support::hostile::serve_tools(
        vec![crate::support::hostile::tool("t", "t")],
        |req| {
            let inner = format!(r#"{{"t":"\u0074{}"}}"#, &TWICE_ESCAPED_TOKEN[1..]);
            Reply::sse(&[
                json!({"jsonrpc": "2.0", "method": "notifications/message",
                   "params": {"level": "error", "data": {"inner": inner}}}),
                crate::support::hostile::result(
                    &req.id(),
                    json!({"content": [], "structuredContent": {"inner": inner}}),
                ),
            ])
        },
    )
    .await;
    let mut config = crate::support::hostile::entry(&server.url);
    config["headers"] = json!({"Authorization": format!("Bearer {TWICE_ESCAPED_TOKEN}")});
    let host = Host::new(json!({"s": config}));
    host.ready("s", Duration::from_secs(10)).await;
    // The same object as a result's `structuredContent`: scrubbed by the JSON rule.
    let answer = host.call_tool("s", "t").await.unwrap();
    assert!(answer.contains("inner"), "{answer}");
    assert!(!answer.contains(&TWICE_ESCAPED_TOKEN[1..]), "{answer}");
    let logged = logs.lines_with("inner");
    assert_eq!(logged.len(), 1, "{}", logs.text());
    assert!(
        !logged[0].contains(&TWICE_ESCAPED_TOKEN[1..]),
        "{}",
        logged[0]
    );
}
