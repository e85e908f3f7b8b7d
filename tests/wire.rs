//! Wire behaviour against a scripted server (`wiremock`): the headers and bodies the client
//! sends, JSON and SSE replies, pagination, redirects, session expiry, errors.

mod support;

use std::time::Duration;

use runvil_plugin::ToolErrorKind;
use serde_json::{Value, json};
use support::Host;
use support::mock::{self, body, header};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const WAIT: Duration = Duration::from_secs(10);

fn tool(name: &str) -> Value {
    json!({"name": name, "description": format!("{name} things"), "inputSchema": {"type": "object"}})
}

async fn mock_server(
    responder: impl Fn(&Request) -> ResponseTemplate + Send + Sync + 'static,
) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(path("/mcp"))
        .respond_with(responder)
        .mount(&server)
        .await;
    server
}

/// A Host with the one server `s` at `server`'s `/mcp`, once it is ready.
async fn ready_host(server: &MockServer) -> Host {
    let host = Host::new(json!({"s": {"url": format!("{}/mcp", server.uri())}}));
    host.ready("s", WAIT).await;
    host
}

/// `call_dynamic_tool` of the tool `name` of server `s`, with no arguments.
async fn call_s(host: &Host, name: &str) -> Result<String, runvil_plugin::ToolError> {
    host.call(
        "call_dynamic_tool",
        json!({"namespace": "s", "toolName": name}),
    )
    .await
}

/// Asserts that a call failed with a transport error reading exactly `message`.
#[track_caller]
fn assert_transport(outcome: Result<String, runvil_plugin::ToolError>, message: &str) {
    let error = outcome.unwrap_err();
    assert_eq!(
        (error.kind, error.message.as_str()),
        (ToolErrorKind::Transport, message)
    );
}

fn echo_call(request: &Request, params: &Value) -> ResponseTemplate {
    mock::result(
        request,
        json!({"content": [{"type": "text", "text": format!("called {}", params["name"])}]}),
    )
}

#[tokio::test]
async fn sends_the_right_headers_and_bodies() {
    let server = mock_server(mock::with_tools(json!([tool("search")]), echo_call)).await;
    let host = Host::new(json!({"docs": {
        "url": format!("{}/mcp", server.uri()),
        "headers": {"Authorization": "Bearer abc", "X-Team": "blue"}
    }}));
    host.ready("docs", WAIT).await;
    let answer = host
        .call(
            "call_dynamic_tool",
            json!({"namespace": "docs", "toolName": "search", "arguments": {"q": "x"}}),
        )
        .await;
    assert_eq!(answer.unwrap(), "called \"search\"");

    let requests = server.received_requests().await.unwrap();
    let methods: Vec<String> = requests
        .iter()
        .map(|r| body(r)["method"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
    for request in &requests {
        assert_eq!(request.method.as_str(), "POST");
        assert_eq!(
            header(request, "accept").as_deref(),
            Some("application/json, text/event-stream")
        );
        assert_eq!(
            header(request, "content-type").as_deref(),
            Some("application/json")
        );
        assert_eq!(
            header(request, "authorization").as_deref(),
            Some("Bearer abc")
        );
        assert_eq!(header(request, "x-team").as_deref(), Some("blue"));
        assert_eq!(header(request, "last-event-id"), None);
    }
    // initialize carries no session and no version; everything after carries both.
    assert_eq!(header(&requests[0], "mcp-session-id"), None);
    assert_eq!(header(&requests[0], "mcp-protocol-version"), None);
    for request in &requests[1..] {
        assert_eq!(header(request, "mcp-session-id").as_deref(), Some("s-1"));
        assert_eq!(
            header(request, "mcp-protocol-version").as_deref(),
            Some("2025-11-25")
        );
    }
    let init = body(&requests[0]);
    assert_eq!(init["jsonrpc"], "2.0");
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["params"]["capabilities"], json!({}));
    assert_eq!(
        init["params"]["clientInfo"],
        json!({"name": "plugin-mcp", "version": env!("CARGO_PKG_VERSION")})
    );
    assert_eq!(
        body(&requests[1]),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}})
    );
    assert_eq!(body(&requests[2])["params"], json!({}));
    assert_eq!(
        body(&requests[3])["params"],
        json!({"name": "search", "arguments": {"q": "x"}})
    );
}

#[tokio::test]
async fn negotiated_older_version_is_sent_back_and_unknown_versions_fail() {
    for (version, expected) in [
        ("2025-06-18", None),
        ("2025-03-26", None),
        // Spoken to like 2025-03-26, as the official TypeScript and Python clients do.
        ("2024-11-05", None),
        ("2099-01-01", Some("2099-01-01")),
    ] {
        let server = mock_server(
            move |request: &Request| match body(request)["method"].as_str() {
                Some("initialize") => mock::initialize(request, version, None),
                Some("tools/list") => mock::result(request, json!({"tools": []})),
                _ => ResponseTemplate::new(202),
            },
        )
        .await;
        let host = Host::new(json!({"s": {"url": format!("{}/mcp", server.uri())}}));
        let listing = host.settled(WAIT).await;
        match expected {
            None => {
                assert_eq!(
                    listing,
                    json!({"servers": [{"namespace": "s", "status": "ready", "tools": []}]})
                );
                let requests = server.received_requests().await.unwrap();
                assert_eq!(
                    header(&requests[2], "mcp-protocol-version").as_deref(),
                    Some(version)
                );
                assert_eq!(header(&requests[2], "mcp-session-id"), None);
            }
            Some(bad) => assert_eq!(
                listing["servers"][0]["reason"],
                format!(
                    "the server chose MCP protocol version \"{bad}\", which this client does not support (it supports 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)"
                )
            ),
        }
    }
}

#[tokio::test]
async fn sse_replies_with_priming_pings_and_other_ids() {
    let server = mock_server(mock::server(|request, method| match method {
        "tools/list" => mock::sse(format!(
            "id: p-0\ndata: \n\n: keep-alive comment\n\n{}",
            mock::event(&mock::response(request, json!({"tools": [tool("a")]})))
        )),
        "tools/call" => {
            let answer = mock::response(request, json!({"content": [{"type": "text", "text": "done"}]}));
            mock::sse(format!(
                "id: c-0\ndata:\n\n{}{}{}{}{}",
                mock::event(&json!({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})),
                mock::event(&json!({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {}})),
                mock::event(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})),
                "event: custom\ndata: {\"ignored\":true}\n\n",
                mock::event(&json!({"jsonrpc": "2.0", "id": 999, "result": {"content": []}})),
            ) + &format!("event: message\r\ndata: {answer}\r\n\r\n"))
        }
        _ => ResponseTemplate::new(202),
    }))
    .await;
    let host = ready_host(&server).await;
    let text = call_s(&host, "a").await.unwrap();
    assert_eq!(text, "done");
    let requests = server.received_requests().await.unwrap();
    let answers: Vec<Value> = requests
        .iter()
        .map(body)
        .filter(|b| b.get("method").is_none())
        .collect();
    assert_eq!(
        answers,
        [
            json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}}),
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "Method not found"}}),
        ]
    );
}

#[tokio::test]
async fn batch_arrays_and_charset_parameters_are_accepted() {
    let server = mock_server(mock::server(|request, method| match method {
        "tools/list" => ResponseTemplate::new(200).set_body_raw(
                json!([
                    {"jsonrpc": "2.0", "method": "notifications/message", "params": {}},
                    mock::response(request, json!({"tools": [tool("t")]}))
                ])
                .to_string(),
                "application/json; charset=utf-8",
            ),
        "tools/call" => ResponseTemplate::new(200).set_body_raw(
                format!(
                    "data: [{}]\n\n",
                    mock::response(request, json!({"content": [{"type": "text", "text": "multi"}, {"type": "text", "text": "line"}]}))
                ),
                "text/event-stream; charset=utf-8",
            ),
        _ => ResponseTemplate::new(202),
    }))
    .await;
    let host = ready_host(&server).await;
    let text = call_s(&host, "t").await;
    assert_eq!(text.unwrap(), "multi\n\nline");
}

#[tokio::test]
async fn multi_line_data_is_joined() {
    let server = mock_server(mock::server(|request, method| match method {
        "tools/list" => mock::sse(format!(
            "data: {{\"jsonrpc\":\"2.0\",\ndata: \"id\":{},\ndata: \"result\":{{\"tools\":[]}}}}\n\n",
            body(request)["id"]
        )),
        _ => ResponseTemplate::new(202),
    }))
    .await;
    let host = Host::new(json!({"s": {"url": format!("{}/mcp", server.uri())}}));
    let listing = host.settled(WAIT).await;
    assert_eq!(
        listing,
        json!({"servers": [{"namespace": "s", "status": "ready", "tools": []}]})
    );
}

#[tokio::test]
async fn every_tools_list_page_is_fetched() {
    let server = mock_server(mock::server(|request, method| {
        let cursor = body(request)["params"]["cursor"].clone();
        match (method, cursor.as_str()) {
            ("tools/list", None) => mock::result(
                request,
                json!({"tools": [tool("c"), tool("a")], "nextCursor": "p2"}),
            ),
            ("tools/list", Some("p2")) => {
                mock::result(request, json!({"tools": [tool("b")], "nextCursor": "p3"}))
            }
            ("tools/list", Some("p3")) => {
                mock::result(request, json!({"tools": [tool("d")], "nextCursor": ""}))
            }
            _ => ResponseTemplate::new(400),
        }
    }))
    .await;
    let host = Host::new(json!({"s": {"url": format!("{}/mcp", server.uri())}}));
    let listing = host.settled(WAIT).await;
    assert_eq!(
        listing,
        json!({"servers": [{"namespace": "s", "status": "ready", "tools": ["a", "b", "c", "d"]}]})
    );
    let cursors: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(body)
        .filter(|b| b["method"] == "tools/list")
        .map(|b| b["params"].clone())
        .collect();
    assert_eq!(
        cursors,
        [json!({}), json!({"cursor": "p2"}), json!({"cursor": "p3"})]
    );
}

#[tokio::test]
async fn redirects_are_refused_and_their_target_receives_nothing() {
    let target = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&target)
        .await;
    for status in [301, 302, 307, 308] {
        let server = MockServer::start().await;
        Mock::given(path("/mcp"))
            .respond_with(
                ResponseTemplate::new(status)
                    .insert_header("location", format!("{}/mcp", target.uri())),
            )
            .mount(&server)
            .await;
        let host = Host::new(
            json!({"s": {"url": format!("{}/mcp", server.uri()), "headers": {"Authorization": "Bearer secret-token"}}}),
        );
        let listing = host.settled(WAIT).await;
        assert_eq!(
            listing["servers"][0]["reason"],
            format!(
                "the server answered with a redirect (HTTP {status}) to \"{}/mcp\", which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\"",
                target.uri()
            )
        );
    }
    assert!(target.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn is_error_and_json_rpc_errors_are_backend_errors() {
    let server = mock_server(mock::with_tools(json!([tool("bad"), tool("rpc")]), |request, params| {
        if params["name"] == "bad" {
            mock::result(request, json!({"isError": true, "content": [{"type": "text", "text": "quota exceeded"}]}))
        } else {
            ResponseTemplate::new(200).set_body_raw(
                json!({"jsonrpc": "2.0", "id": body(request)["id"], "error": {"code": -32602, "message": "Unknown tool: rpc"}}).to_string(),
                "application/json",
            )
        }
    }))
    .await;
    let host = ready_host(&server).await;
    let bad = call_s(&host, "bad").await.unwrap_err();
    assert_eq!(
        (bad.kind, bad.message.as_str()),
        (ToolErrorKind::Backend, "quota exceeded")
    );
    let rpc = call_s(&host, "rpc").await.unwrap_err();
    assert_eq!(
        (rpc.kind, rpc.message.as_str()),
        (ToolErrorKind::Backend, "Unknown tool: rpc")
    );
}

#[tokio::test]
async fn http_failures_are_transport_errors_and_ready_stays_ready() {
    let server = mock_server(mock::with_tools(json!([tool("t")]), |_, _| {
        ResponseTemplate::new(500).set_body_string("database on fire\nline two")
    }))
    .await;
    let host = ready_host(&server).await;
    let error = call_s(&host, "t").await.unwrap_err();
    assert_eq!(error.kind, ToolErrorKind::Transport);
    assert_eq!(
        error.message,
        "server \"s\": HTTP 500 Internal Server Error: database on fire line two"
    );
    assert_eq!(
        host.listing(json!({})).await["servers"][0]["status"],
        "ready"
    );
}

/// A server that forgets its first session (`s-0`) before the first `tools/call`, which it answers
/// with `forgotten`; each `initialize` starts the session `s-<n>`.
async fn forgetful_server(forgotten: ResponseTemplate) -> MockServer {
    // Not a pooled server: a pooled one could hear the DELETE of the previous case's Pack.
    let server = MockServer::builder().start().await;
    let inits = std::sync::atomic::AtomicUsize::new(0);
    Mock::given(path("/mcp"))
        .respond_with(move |request: &Request| {
            match body(request)["method"].as_str().unwrap_or("") {
                "initialize" => {
                    let n = inits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    mock::initialize(request, "2025-11-25", Some(&format!("s-{n}")))
                }
                "tools/list" => mock::result(request, json!({"tools": [tool("t")]})),
                "tools/call" if header(request, "mcp-session-id").as_deref() == Some("s-0") => {
                    forgotten.clone()
                }
                "tools/call" => mock::result(
                    request,
                    json!({"content": [{"type": "text", "text": "fresh"}]}),
                ),
                _ => ResponseTemplate::new(202),
            }
        })
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_forgotten_session_is_initialized_again_once() {
    // A 404, and server-everything's 400 that names the session.
    let answers = [
        ResponseTemplate::new(404),
        ResponseTemplate::new(400).set_body_string(
            r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#,
        ),
    ];
    for forgotten in answers {
        let server = forgetful_server(forgotten).await;
        let host = Host::new(json!({"s": {"url": format!("{}/mcp", server.uri())}}));
        host.ready("s", WAIT).await;
        let text = call_s(&host, "t").await;
        assert_eq!(text.unwrap(), "fresh");
        let trail: Vec<(String, Option<String>, Value)> = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| {
                let message = body(r);
                (
                    message["method"].as_str().unwrap_or("").to_string(),
                    header(r, "mcp-session-id"),
                    message["id"].clone(),
                )
            })
            .collect();
        let s = |m: &str, session: Option<&str>, id: Value| {
            (m.to_string(), session.map(str::to_string), id)
        };
        assert_eq!(
            trail,
            [
                s("initialize", None, json!(1)),
                s("notifications/initialized", Some("s-0"), Value::Null),
                s("tools/list", Some("s-0"), json!(2)),
                s("tools/call", Some("s-0"), json!(3)),
                s("initialize", None, json!(4)),
                s("notifications/initialized", Some("s-1"), Value::Null),
                s("tools/call", Some("s-1"), json!(3)),
            ]
        );
    }
}

#[tokio::test]
async fn a_session_forgotten_again_at_once_is_a_transport_error() {
    let server = MockServer::start().await;
    Mock::given(path("/mcp"))
        .respond_with(mock::server(|request, method| match method {
            "tools/list" => mock::result(request, json!({"tools": [tool("t")]})),
            _ => ResponseTemplate::new(404),
        }))
        .mount(&server)
        .await;
    let host = ready_host(&server).await;
    assert_transport(
        call_s(&host, "t").await,
        "server \"s\": the server rejected the session again right after a new initialize",
    );
}

#[tokio::test]
async fn dropping_the_pack_deletes_the_session() {
    let server = mock_server(mock::with_tools(json!([]), echo_call)).await;
    Mock::given(method("DELETE"))
        .respond_with(ResponseTemplate::new(405))
        .mount(&server)
        .await;
    let host = Host::new(
        json!({"s": {"url": format!("{}/mcp", server.uri()), "headers": {"X-Key": "k"}}}),
    );
    host.ready("s", WAIT).await;
    drop(host);
    let deadline = tokio::time::Instant::now() + WAIT;
    let delete = loop {
        let requests = server.received_requests().await.unwrap();
        if let Some(delete) = requests.into_iter().find(|r| r.method.as_str() == "DELETE") {
            break delete;
        }
        assert!(tokio::time::Instant::now() < deadline, "no DELETE arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(header(&delete, "mcp-session-id").as_deref(), Some("s-1"));
    assert_eq!(
        header(&delete, "mcp-protocol-version").as_deref(),
        Some("2025-11-25")
    );
    assert_eq!(header(&delete, "x-key").as_deref(), Some("k"));
}

#[tokio::test]
async fn a_failed_start_is_retried_until_ready() {
    let server = MockServer::start().await;
    // The first initialize fails; the retry one second later succeeds.
    Mock::given(path("/mcp"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(path("/mcp"))
        .respond_with(mock::with_tools(json!([tool("t")]), echo_call))
        .with_priority(2)
        .mount(&server)
        .await;
    let host = Host::new(json!({"s": {"url": format!("{}/mcp", server.uri())}}));
    let mut failed = host
        .wait_for(WAIT, |l| l["servers"][0]["status"] == "error")
        .await;
    // The first wait is 1 s plus up to 1 s of jitter, rounded up to whole seconds.
    let retry = failed["servers"][0]
        .as_object_mut()
        .unwrap()
        .remove("retryInSeconds");
    assert!(
        matches!(retry.as_ref().and_then(Value::as_u64), Some(1 | 2)),
        "{retry:?}"
    );
    assert_eq!(
        failed,
        json!({"servers": [{"namespace": "s", "status": "error", "reason": "HTTP 503 Service Unavailable", "tools": []}]})
    );
    let started = tokio::time::Instant::now();
    let ready = host.ready("s", WAIT).await;
    assert_eq!(
        ready,
        json!({"servers": [{"namespace": "s", "status": "ready", "tools": ["t"]}]})
    );
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the retry waited {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_refused_resumption_names_the_resumption() {
    let server = mock_server(mock::server(|_, method| match method {
        "tools/list" => ResponseTemplate::new(200).set_body_raw(
            r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"t","inputSchema":{}}]}}"#,
            "application/json",
        ),
        "tools/call" => mock::sse("id: e-1\nretry: 10\ndata: \n\n"),
        _ => ResponseTemplate::new(202),
    }))
    .await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(405))
        .with_priority(1)
        .mount(&server)
        .await;
    let host = ready_host(&server).await;
    assert_transport(
        call_s(&host, "t").await,
        "server \"s\": resuming the event stream (GET with Last-Event-ID) failed: HTTP 405 Method Not Allowed",
    );
    let get = server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.method.as_str() == "GET")
        .unwrap();
    assert_eq!(header(&get, "last-event-id").as_deref(), Some("e-1"));
    assert_eq!(header(&get, "accept").as_deref(), Some("text/event-stream"));
    assert_eq!(header(&get, "mcp-session-id").as_deref(), Some("s-1"));
}

#[tokio::test]
async fn a_start_that_fails_after_initialize_deletes_its_session() {
    let server = mock_server(mock::server(|_, _| {
        ResponseTemplate::new(500).set_body_string("listing broke")
    }))
    .await;
    Mock::given(method("DELETE"))
        .respond_with(ResponseTemplate::new(204))
        .with_priority(1)
        .mount(&server)
        .await;
    let host = Host::new(json!({"s": {"url": format!("{}/mcp", server.uri())}}));
    let listing = host
        .wait_for(WAIT, |l| l["servers"][0]["status"] == "error")
        .await;
    assert_eq!(
        listing["servers"][0]["reason"],
        "HTTP 500 Internal Server Error: listing broke"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    let trail = loop {
        let trail: Vec<(String, String, Option<String>)> = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r.method.to_string(),
                    body(r)["method"].as_str().unwrap_or("").to_string(),
                    header(r, "mcp-session-id"),
                )
            })
            .take(4)
            .collect();
        if trail.len() == 4 || tokio::time::Instant::now() >= deadline {
            break trail;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let t = |verb: &str, m: &str, session: Option<&str>| {
        (verb.to_string(), m.to_string(), session.map(str::to_string))
    };
    assert_eq!(
        trail,
        [
            t("POST", "initialize", None),
            t("POST", "notifications/initialized", Some("s-1")),
            t("POST", "tools/list", Some("s-1")),
            t("DELETE", "", Some("s-1")),
        ]
    );
}

#[tokio::test]
async fn an_overlong_event_id_is_not_sent_back() {
    let long_id = "i".repeat(1025);
    let server = mock_server(mock::server(move |request, method| match method {
        "tools/list" => mock::result(request, json!({"tools": [tool("t")]})),
        "tools/call" => mock::sse(format!("id: {long_id}\ndata: \n\n")),
        _ => ResponseTemplate::new(202),
    }))
    .await;
    let host = ready_host(&server).await;
    assert_transport(
        call_s(&host, "t").await,
        "server \"s\": resuming the event stream (GET with Last-Event-ID) failed: the server's SSE event id is longer than 1024 bytes",
    );
    let verbs: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.method.to_string())
        .collect();
    assert!(!verbs.contains(&"GET".to_string()), "{verbs:?}");
}

#[tokio::test]
async fn a_malformed_result_is_an_answer_and_is_not_cancelled() {
    let server = mock_server(mock::with_tools(json!([tool("t")]), |request, _| {
        mock::result(request, json!({"content": [{"type": "resource_link"}]}))
    }))
    .await;
    let host = ready_host(&server).await;
    assert_transport(
        call_s(&host, "t").await,
        "server \"s\": the server sent a resource_link block without a uri",
    );
    // A cancellation would be sent at once, in the background; give it time to show up.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let methods: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| body(r)["method"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
}

#[tokio::test]
async fn a_400_that_only_mentions_the_session_is_not_an_expiry() {
    let server = mock_server(mock::with_tools(json!([tool("t")]), |_, _| {
        ResponseTemplate::new(400).set_body_string(
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad arguments","data":{"session":"fine"}}}"#,
        )
    }))
    .await;
    let host = ready_host(&server).await;
    assert_transport(
        call_s(&host, "t").await,
        r#"server "s": HTTP 400 Bad Request: {"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad arguments","data":{"session":"fine"}}}"#,
    );
    let methods: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| body(r)["method"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
}
