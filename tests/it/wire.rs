//! Wire behaviour (MCP spec "Streamable HTTP"): the headers and bodies the client sends, the
//! negotiated version, JSON and SSE replies (framing, batches, charsets, compression), refused
//! redirects, HTTP failures, session headers and expiry, and the standalone `GET` stream.
//! Most servers here are [`crate::support::mock`] servers; the rest are `support::hostile` ones.

use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use runvil_plugin::ToolErrorKind;
use serde_json::{Value, json};

use crate::bounds::{call_t_within, description, error_reason, ready_on, tool_server};
use crate::support::hostile::{
    Reply, SESSION, entry, result, serve, server_entry, sse_event, standard, text_result, tool,
    tools_page,
};
use crate::support::mock::matchers::{method, path};
use crate::support::mock::{self, Mock, MockServer, Request, ResponseTemplate, body, header};
use crate::support::{Host, WAIT, transport};

fn gzip(body: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(body).unwrap();
    encoder.finish().unwrap()
}

fn brotli(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::BrotliCompress(
        &mut &body[..],
        &mut out,
        &brotli::enc::BrotliEncoderParams::default(),
    )
    .unwrap();
    out
}

fn zstd(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(zstd_safe::compress_bound(body.len()));
    zstd_safe::compress(&mut out, body, 3).unwrap();
    out
}

/// `body` compressed by `encode`, sent with `Content-Encoding: name`.
fn encoded(content_type: &str, name: &str, encode: fn(&[u8]) -> Vec<u8>, body: &[u8]) -> Reply {
    Reply::raw(200, content_type, encode(body)).header("content-encoding", name)
}

pub(crate) fn mock_tool(name: &str) -> Value {
    json!({"name": name, "description": format!("{name} things"), "inputSchema": {"type": "object"}})
}

pub(crate) async fn mock_server(
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
pub(crate) async fn ready_mock(server: &MockServer) -> Host {
    let host = Host::new(json!({"s": {"url": format!("{}/mcp", server.uri())}}));
    host.ready("s", WAIT).await;
    host
}

/// Every request `server` received so far but the standalone `GET`s (no `Last-Event-ID`): the
/// client opens that stream on every session, so a trail about something else leaves them out;
/// the stream's own tests count them with [`count`].
pub(crate) async fn requests(server: &MockServer) -> Vec<Request> {
    let mut all = server.received_requests().await.unwrap();
    all.retain(|r| !is_standalone_get(r));
    all
}

/// Every request `server` received so far, the standalone `GET`s included.
pub(crate) async fn all_requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap()
}

pub(crate) fn is_standalone_get(request: &Request) -> bool {
    request.method.as_str() == "GET" && !request.headers.contains_key("last-event-id")
}

/// A Host with the one server `s` at `server`'s `/mcp`, once settled; asserts that `s` is ready
/// with `tools`.
pub(crate) async fn assert_ready_with(server: &MockServer, tools: Value) -> Host {
    let host = Host::new(json!({"s": {"url": format!("{}/mcp", server.uri())}}));
    let listing = host.settled(WAIT).await;
    assert_eq!(
        listing,
        json!({"servers": [{"namespace": "s", "status": "ready", "tools": tools}]})
    );
    host
}

/// Answers every `http_method` request to `server` with `status`, before its other mocks.
pub(crate) async fn answer_first(server: &MockServer, http_method: &str, status: u16) {
    Mock::given(method(http_method))
        .respond_with(ResponseTemplate::new(status))
        .with_priority(1)
        .mount(server)
        .await;
}

/// The bodies of `requests`, as JSON, for which `keep` holds.
fn bodies(requests: &[Request], keep: impl Fn(&Value) -> bool) -> Vec<Value> {
    requests.iter().map(body).filter(|b| keep(b)).collect()
}

/// `call_dynamic_tool` of the tool `name` of server `s`, with no arguments.
pub(crate) async fn call_s(host: &Host, name: &str) -> Result<String, runvil_plugin::ToolError> {
    host.call_tool("s", name).await
}

/// Asserts that a call failed with a transport error reading exactly `message`.
#[track_caller]
pub(crate) fn assert_transport(outcome: Result<String, runvil_plugin::ToolError>, message: &str) {
    let error = outcome.unwrap_err();
    assert_eq!(
        (error.kind, error.message.as_str()),
        (ToolErrorKind::Transport, message)
    );
}

/// A Host with `s` at `server`, ready; asserts that a call of `t` fails with a transport error
/// reading exactly `message`.
pub(crate) async fn assert_call_fails(server: &MockServer, message: &str) -> Host {
    let host = ready_mock(server).await;
    assert_transport(call_s(&host, "t").await, message);
    host
}

/// Drops `host`; asserts that the requests before the `DELETE` of its session are the start's
/// and the one call (no cancel, no new `initialize`).
pub(crate) async fn assert_only_the_call_before_delete(server: &MockServer, host: Host) {
    let (_, before_delete) = until_delete(server, host).await;
    assert_eq!(
        rpc_methods(&before_delete),
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
}

/// The JSON-RPC method of each request `requests` holds, in order (`""` where there is none,
/// as for a `DELETE`).
pub(crate) fn rpc_methods(requests: &[Request]) -> Vec<String> {
    requests
        .iter()
        .map(|r| body(r)["method"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Drops `host` and waits (at most [`WAIT`]) for the `DELETE` of its session; returns it and
/// every request that came before it. The Pack's shutdown awaits the `notifications/cancelled`
/// of dropped calls before it deletes a session, so a cancel that was ever going to be sent is
/// among the requests before the `DELETE`.
pub(crate) async fn until_delete(server: &MockServer, host: Host) -> (Request, Vec<Request>) {
    drop(host);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut requests = requests(server).await;
        if let Some(at) = requests.iter().position(|r| r.method.as_str() == "DELETE") {
            requests.truncate(at + 1);
            let delete = requests.pop().unwrap();
            return (delete, requests);
        }
        assert!(tokio::time::Instant::now() < deadline, "no DELETE arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub(crate) fn echo_call(request: &Request, params: &Value) -> ResponseTemplate {
    mock::result(
        request,
        json!({"content": [{"type": "text", "text": format!("called {}", params["name"])}]}),
    )
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
                "tools/list" => mock::result(request, json!({"tools": [mock_tool("t")]})),
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

pub(crate) fn list_changed() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
}

pub(crate) fn tools(names: &[&str]) -> Value {
    json!({"tools": names.iter().map(|n| mock_tool(n)).collect::<Vec<_>>()})
}

pub(crate) type Answer = Box<dyn Fn(&Request, usize) -> ResponseTemplate + Send + Sync>;

/// What answers the n-th request (from 1) of one kind, for [`Live`].
pub(crate) trait Answers:
    Fn(&Request, usize) -> ResponseTemplate + Send + Sync + 'static
{
}

impl<F: Fn(&Request, usize) -> ResponseTemplate + Send + Sync + 'static> Answers for F {}

/// A server (session `s-1`) whose `initialize` result carries `capabilities` and, when given,
/// `instructions`; it answers the n-th `tools/list` (from 1) with `list(request, n)`, the n-th
/// `tools/call` with `call(request, n)`, and the n-th `GET` with `get(request, n)`.
pub(crate) async fn live_server(
    capabilities: Value,
    instructions: Option<&str>,
    list: Answer,
    call: Answer,
    get: Answer,
) -> MockServer {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let mut init = json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
        "serverInfo": {"name": "live", "version": "1"}});
    if let Some(text) = instructions {
        init["instructions"] = json!(text);
    }
    let (lists, calls, gets) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    let server = MockServer::builder().start().await;
    Mock::given(path("/mcp"))
        .respond_with(move |request: &Request| {
            match request.method.as_str() {
                "GET" => return get(request, gets.fetch_add(1, SeqCst) + 1),
                "DELETE" => return ResponseTemplate::new(200),
                _ => {}
            }
            let message = body(request);
            match message["method"].as_str() {
                Some("initialize") => {
                    mock::result(request, init.clone()).insert_header("mcp-session-id", "s-1")
                }
                Some("tools/list") => list(request, lists.fetch_add(1, SeqCst) + 1),
                Some("tools/call") => call(request, calls.fetch_add(1, SeqCst) + 1),
                _ => ResponseTemplate::new(202),
            }
        })
        .mount(&server)
        .await;
    server
}

/// A [`live_server`] to start: unless told otherwise, its `initialize` declares `{"tools": {}}`
/// and no instructions, it lists `a`, answers every call `ok` and every `GET` 405.
pub(crate) struct Live {
    capabilities: Value,
    instructions: Option<String>,
    list: Answer,
    call: Answer,
    get: Answer,
}

impl Live {
    pub(crate) fn new() -> Live {
        Live {
            capabilities: json!({"tools": {}}),
            instructions: None,
            list: Box::new(|r, _| mock::result(r, tools(&["a"]))),
            call: Box::new(|r, _| mock::result(r, mock_text_result("ok"))),
            get: Box::new(|_, _| ResponseTemplate::new(405)),
        }
    }

    /// `initialize` declares `tools.listChanged`.
    pub(crate) fn list_changed(mut self) -> Live {
        self.capabilities = json!({"tools": {"listChanged": true}});
        self
    }

    pub(crate) fn instructions(mut self, text: &str) -> Live {
        self.instructions = Some(text.to_string());
        self
    }

    pub(crate) fn list(mut self, list: impl Answers) -> Live {
        self.list = Box::new(list);
        self
    }

    /// Lists `a` the first time, `a` and `b` from then on (the server added `b`).
    pub(crate) fn adding_b(self) -> Live {
        self.list(|r, n| mock::result(r, tools(if n == 1 { &["a"] } else { &["a", "b"] })))
    }

    pub(crate) fn call(mut self, call: impl Answers) -> Live {
        self.call = Box::new(call);
        self
    }

    pub(crate) fn get(mut self, get: impl Answers) -> Live {
        self.get = Box::new(get);
        self
    }

    /// Every call answers `text`.
    pub(crate) fn answering(self, text: &'static str) -> Live {
        self.call(move |r, _| mock::result(r, mock_text_result(text)))
    }

    /// The first call's answer `first` comes on an event stream after a `list_changed`; the
    /// later calls answer `then`.
    pub(crate) fn changing_at_the_first_call(
        self,
        first: &'static str,
        then: &'static str,
    ) -> Live {
        self.call(move |r, n| match n {
            1 => sse_then(r, &[list_changed()], mock_text_result(first)),
            _ => mock::result(r, mock_text_result(then)),
        })
    }

    /// Starts the server, and a Host with it as `s`, ready.
    pub(crate) async fn ready(self) -> (MockServer, Host) {
        let server = self.start().await;
        let host = ready_mock(&server).await;
        (server, host)
    }

    pub(crate) async fn start(self) -> MockServer {
        let instructions = self.instructions.as_deref();
        live_server(
            self.capabilities,
            instructions,
            self.list,
            self.call,
            self.get,
        )
        .await
    }
}

/// A Host with the one server `s` at `server`'s `/mcp`, sending `X-Key: sekrit-value-123`, once
/// it is ready.
pub(crate) async fn keyed_host(server: &MockServer) -> Host {
    let host = Host::new(json!({"s": {
        "url": format!("{}/mcp", server.uri()),
        "headers": {"X-Key": "sekrit-value-123"}
    }}));
    host.ready("s", WAIT).await;
    host
}

/// A server whose n-th `initialize` (from 0) is answered by `initialize(request, n)` (which starts
/// the session `s-<n>`), and every other request by `rest(request, method, on_first)`: `method`
/// its JSON-RPC method (`""` for none), `on_first` whether it carries the first session, `s-0`.
async fn session_server(
    initialize: impl Fn(&Request, usize) -> ResponseTemplate + Send + Sync + 'static,
    rest: impl Fn(&Request, &str, bool) -> ResponseTemplate + Send + Sync + 'static,
) -> MockServer {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let server = MockServer::builder().start().await;
    let inits = AtomicUsize::new(0);
    Mock::given(path("/mcp"))
        .respond_with(move |request: &Request| {
            match body(request)["method"].as_str().unwrap_or("") {
                "initialize" => initialize(request, inits.fetch_add(1, SeqCst)),
                method => {
                    let on_first = header(request, "mcp-session-id").as_deref() == Some("s-0");
                    rest(request, method, on_first)
                }
            }
        })
        .mount(&server)
        .await;
    server
}

/// Every request `server` received: its HTTP method, its JSON-RPC method and its session (`""`
/// where there is none).
async fn session_trail(server: &MockServer) -> Vec<(String, String, String)> {
    let step = |r: &Request| {
        let what = body(r)["method"].as_str().unwrap_or("").to_string();
        let session = header(r, "mcp-session-id").unwrap_or_default();
        (r.method.to_string(), what, session)
    };
    all_requests(server).await.iter().map(step).collect()
}

/// How many requests `server` received whose JSON-RPC method is `rpc`, or whose HTTP method is
/// `rpc` when it is upper case (`GET`).
pub(crate) async fn count(server: &MockServer, rpc: &str) -> usize {
    all_requests(server)
        .await
        .iter()
        .filter(|r| {
            if rpc.chars().all(|c| c.is_ascii_uppercase()) {
                r.method.as_str() == rpc
            } else {
                body(r)["method"] == rpc
            }
        })
        .count()
}

/// Waits (at most [`WAIT`]) until `server` received `n` requests of `rpc` (see [`count`]).
pub(crate) async fn wait_count(server: &MockServer, rpc: &str, n: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while count(server, rpc).await < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{rpc}: {} of {n}",
            count(server, rpc).await
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until server `s` lists exactly `names`.
pub(crate) async fn wait_tools(host: &Host, names: &[&str]) {
    host.wait_for(WAIT, |listing| {
        listing["servers"][0]["tools"] == json!(names)
    })
    .await;
}

/// An SSE body: each message as one event, then the answer `result` to `request`.
pub(crate) fn sse_then(request: &Request, messages: &[Value], result: Value) -> ResponseTemplate {
    let mut text: String = messages.iter().map(mock::event).collect();
    text.push_str(&mock::event(&mock::response(request, result)));
    mock::sse(text)
}

pub(crate) fn mock_text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// A short pause, then no request of `rpc` beyond `n` may have arrived.
pub(crate) async fn settles_at(server: &MockServer, rpc: &str, n: usize) {
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(count(server, rpc).await, n, "{rpc}");
}

/// Every reply compressed — gzip, br and zstd, JSON and SSE alike — is decoded, and every
/// request offers the three in `Accept-Encoding`.
#[tokio::test]
async fn compressed_json_and_sse_replies_are_decoded() {
    let server = serve(|req| async move {
        let id = req.id();
        match req.method() {
            "initialize" => {
                let body = serde_json::to_vec(&result(
                    &id,
                    json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                               "serverInfo": {"name": "z", "version": "1"}}),
                ))
                .unwrap();
                encoded("application/json", "zstd", zstd, &body).header("mcp-session-id", SESSION)
            }
            "tools/list" => encoded(
                "text/event-stream",
                "gzip",
                gzip,
                sse_event(&tools_page(&id, vec![tool("t", "squeezed")], None)).as_bytes(),
            ),
            "tools/call" => match req.nth {
                0 => encoded(
                    "application/json",
                    "gzip",
                    gzip,
                    &serde_json::to_vec(&text_result(&id, "gzip json")).unwrap(),
                ),
                1 => encoded(
                    "text/event-stream",
                    "br",
                    brotli,
                    sse_event(&text_result(&id, "br sse")).as_bytes(),
                ),
                _ => encoded(
                    "text/event-stream",
                    "zstd",
                    zstd,
                    sse_event(&text_result(&id, &"z".repeat(100_000))).as_bytes(),
                ),
            },
            _ => standard(&req).unwrap_or_else(Reply::accepted),
        }
    })
    .await;
    let host = ready_on("z", &server.url).await;
    assert_eq!(description(&host, "z", "t").await, "squeezed");
    let timeout = Duration::from_secs(10);
    assert_eq!(
        call_t_within(&host, "z", timeout).await,
        Ok("gzip json".into())
    );
    assert_eq!(
        call_t_within(&host, "z", timeout).await,
        Ok("br sse".into())
    );
    assert_eq!(
        call_t_within(&host, "z", timeout).await,
        Ok("z".repeat(100_000))
    );
    let offered: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|r| r.header("accept-encoding"))
        .collect();
    assert!(offered.len() >= 6, "{offered:?}");
    for offer in offered {
        assert_eq!(offer.as_deref(), Some("zstd,gzip,br"));
    }
}

/// A `Content-Encoding` the client cannot decode is named (scrubbed of the entry's secrets, cut
/// to 64 bytes) instead of read as text. A JSON reply so encoded is an answer the client cannot
/// read (nothing to cancel); an event stream so encoded may belong to a tool still running, so
/// that call is cancelled.
#[tokio::test]
async fn unknown_content_encoding_is_a_clear_error() {
    let body = |id: &Value| serde_json::to_vec(&text_result(id, "never read")).unwrap();
    let server = tool_server(move |req| {
        let case = req.rpc["params"]["arguments"]["case"].as_str();
        let content_type = match case {
            Some("sse") => "text/event-stream",
            _ => "application/json",
        };
        let reply = Reply::raw(200, content_type, body(&req.id()));
        let encoding = match case {
            Some("secret") => "x-Bearer-sup3r-s3cret-value".to_string(),
            Some("long") => format!("x-{}", "y".repeat(200)),
            _ => "compress".to_string(),
        };
        async move { reply.header("content-encoding", &encoding) }
    })
    .await;
    let host = Host::new(json!({"enc": {
        "url": server.url,
        "headers": {"Authorization": "Bearer sup3r-s3cret-value"}
    }}));
    host.ready("enc", Duration::from_secs(20)).await;
    let call = |case: &str| {
        host.call(
            "call_dynamic_tool",
            json!({"namespace": "enc", "toolName": "t", "arguments": {"case": case}}),
        )
    };
    let refused = |shown: &str| {
        transport(&format!(
            "server \"enc\": the server answered with Content-Encoding \"{shown}\", which this client cannot decode (it accepts gzip, br and zstd)"
        ))
    };
    assert_eq!(call("plain").await, refused("compress"));
    assert_eq!(call("secret").await, refused("x-Bearer-[redacted]"));
    assert_eq!(
        call("long").await,
        refused(&format!("x-{}…", "y".repeat(64 - 2 - '…'.len_utf8())))
    );
    assert_eq!(server.count("notifications/cancelled"), 0);
    assert_eq!(call("sse").await, refused("compress"));
    let sse = server.first(|r| r.rpc["params"]["arguments"]["case"] == "sse");
    assert_eq!(
        server.cancellations().await,
        [json!({"requestId": sse.id(), "reason": "the client lost the reply stream"})]
    );
}

#[tokio::test]
async fn redirects_are_refused_and_the_target_receives_nothing() {
    let elsewhere = serve(|req| async move {
        standard(&req).unwrap_or_else(|| Reply::json(&tools_page(&req.id(), vec![], None)))
    })
    .await;
    let target = elsewhere.url.clone();
    let on_init = serve(move |_req| {
        let target = target.clone();
        async move { Reply::raw(307, "text/plain", "").header("location", &target) }
    })
    .await;
    let target = elsewhere.url.clone();
    let on_call = tool_server(move |_req| {
        let target = target.clone();
        async move { Reply::raw(302, "text/plain", "").header("location", &target) }
    })
    .await;
    let headers = json!({"Authorization": "Bearer do-not-forward-me"});
    let host = Host::new(json!({
        "init": {"url": on_init.url, "headers": headers},
        "call": {"url": on_call.url, "headers": headers},
    }));
    assert_eq!(
        error_reason(&host, "init", Duration::from_secs(10)).await,
        format!(
            "the server answered with a redirect (HTTP 307) to \"{}\", which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\"",
            elsewhere.url
        )
    );
    host.ready("call", Duration::from_secs(10)).await;
    assert_eq!(
        call_t_within(&host, "call", Duration::from_secs(10)).await,
        transport(&format!(
            "server \"call\": the server answered with a redirect (HTTP 302) to \"{}\", which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\"",
            elsewhere.url
        ))
    );
    // Let a retry of "init" happen too, then check the redirect target saw nothing at all.
    on_init
        .wait_until(Duration::from_secs(5), "a second initialize", |r| {
            r.len() >= 2
        })
        .await;
    assert_eq!(elsewhere.requests().len(), 0);
}

/// FastMCP's `/mcp` → `/mcp/` answer: a relative `Location` is named as the full URL to put in
/// the config; one that quotes a configured secret is scrubbed and shown without its query, one
/// without a `Location` says only that it was refused, and a long one is cut.
#[tokio::test]
async fn a_redirect_names_its_target_scrubbed_and_bounded() {
    let server = serve(|req| async move {
        let key = req.header("x-api-key").unwrap_or_default();
        match req.target.as_str() {
            "/mcp" => Reply::raw(307, "text/plain", "").header("location", "/mcp/"),
            "/echo" => Reply::raw(308, "text/plain", "").header(
                "location",
                &format!("https://login.example/{key}/cb?key={key}"),
            ),
            "/long" => Reply::raw(301, "text/plain", "")
                .header("location", &format!("/{}", "l".repeat(600))),
            _ => Reply::raw(302, "text/plain", ""),
        }
    })
    .await;
    let base = format!("http://127.0.0.1:{}", server.port);
    let host = Host::new(json!({
        "slash": entry(&format!("{base}/mcp")),
        "echo": {"url": format!("{base}/echo"), "headers": {"X-Api-Key": "sk-live-4f9a8b7c6d5e"}},
        "long": entry(&format!("{base}/long")),
        "bare": entry(&format!("{base}/bare")),
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    let advice = "which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\"";
    assert_eq!(
        server_entry(&listing, "slash")["reason"],
        format!("the server answered with a redirect (HTTP 307) to \"{base}/mcp/\", {advice}")
    );
    assert_eq!(
        server_entry(&listing, "echo")["reason"],
        format!(
            "the server answered with a redirect (HTTP 308) to \"https://login.example/[redacted]/cb\" (query omitted), {advice}"
        )
    );
    // The target is cut to 512 bytes: the base, "/" and as many l as fit before "…".
    let kept = 512 - "…".len() - base.len() - 1;
    assert_eq!(
        server_entry(&listing, "long")["reason"],
        format!(
            "the server answered with a redirect (HTTP 301) to \"{base}/{}…\", {advice}",
            "l".repeat(kept)
        )
    );
    assert_eq!(
        server_entry(&listing, "bare")["reason"],
        "the server answered with a redirect (HTTP 302), which this client refuses to follow so that the configured headers reach no other server"
    );
}

/// Event streams framed the unusual ways the SSE rules allow — a BOM, lone CRs, the answer's
/// JSON split over data lines, comments between them, every byte its own chunk — reach the
/// answer; an event whose data is not UTF-8 is refused, not patched with U+FFFD.
#[tokio::test]
async fn unusual_but_valid_sse_framing_reaches_the_answer() {
    let server = tool_server(|req| async move {
        let answer = serde_json::to_string(&text_result(&req.id(), "framed")).unwrap();
        // Split between two members: the LF that joins data lines is JSON whitespace there.
        let (head, tail) = answer.split_at(answer.find(',').unwrap() + 1);
        match req.rpc["params"]["arguments"]["case"].as_str() {
            Some("cr") => Reply::raw(
                200,
                "text/event-stream",
                format!("\u{feff}: hello\rid: 1\r\rdata:{head}\r: between\rdata:{tail}\r\r"),
            ),
            Some("bytes") => {
                let text = format!("event:message\r\ndata: {head}\r\ndata: {tail}\r\n\r\n");
                let chunks: Vec<Result<Bytes, std::io::Error>> = text
                    .into_bytes()
                    .into_iter()
                    .map(|b| Ok(Bytes::from(vec![b])))
                    .collect();
                Reply::stream(200, "text/event-stream", stream::iter(chunks))
            }
            _ => Reply::raw(
                200,
                "text/event-stream",
                [b"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":\"\xFF\"}\n\n".as_slice()]
                    .concat(),
            ),
        }
    })
    .await;
    let host = ready_on("sse", &server.url).await;
    let call = |case: &str| {
        host.call(
            "call_dynamic_tool",
            json!({"namespace": "sse", "toolName": "t", "arguments": {"case": case}}),
        )
    };
    assert_eq!(call("cr").await, Ok("framed".into()));
    assert_eq!(call("bytes").await, Ok("framed".into()));
    assert_eq!(
        call("bad utf-8").await,
        transport("server \"sse\": the server's event stream is not UTF-8")
    );
}

#[tokio::test]
async fn every_request_carries_the_configured_headers_and_session_headers() {
    let server = mock_server(mock::with_tools(json!([mock_tool("search")]), echo_call)).await;
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

    let requests = requests(&server).await;
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
                let requests = requests(&server).await;
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
            mock::event(&mock::response(request, json!({"tools": [mock_tool("a")]})))
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
    let host = ready_mock(&server).await;
    let text = call_s(&host, "a").await.unwrap();
    assert_eq!(text, "done");
    let requests = requests(&server).await;
    let answers = bodies(&requests, |b| b.get("method").is_none());
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
                    mock::response(request, json!({"tools": [mock_tool("t")]}))
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
    let host = ready_mock(&server).await;
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
    let _host = assert_ready_with(&server, json!([])).await;
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
    assert!(requests(&target).await.is_empty());
}

#[tokio::test]
async fn http_failures_are_transport_errors_and_ready_stays_ready() {
    let server = mock_server(mock::with_tools(json!([mock_tool("t")]), |_, _| {
        ResponseTemplate::new(500).set_body_string("database on fire\nline two")
    }))
    .await;
    let host = ready_mock(&server).await;
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
        // The new session is listed again (a restarted server may offer other tools), beside
        // the resent call, in either order.
        wait_count(&server, "tools/list", 2).await;
        let requests = requests(&server).await;
        let relisting: Vec<(Option<String>, Value)> = requests
            .iter()
            .filter(|r| body(r)["method"] == "tools/list")
            .map(|r| (header(r, "mcp-session-id"), body(r)["id"].clone()))
            .collect();
        assert_eq!(
            relisting,
            [
                (Some("s-0".to_string()), json!(3)),
                (Some("s-1".to_string()), json!(6))
            ]
        );
        let trail: Vec<(String, Option<String>, Value)> = requests
            .iter()
            .filter(|r| !(body(r)["method"] == "tools/list" && body(r)["id"] == 6))
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
                s("initialize", None, json!(2)),
                s("notifications/initialized", Some("s-0"), Value::Null),
                s("tools/list", Some("s-0"), json!(3)),
                s("tools/call", Some("s-0"), json!(4)),
                s("initialize", None, json!(5)),
                s("notifications/initialized", Some("s-1"), Value::Null),
                s("tools/call", Some("s-1"), json!(4)),
            ]
        );
    }
}

#[tokio::test]
async fn a_session_forgotten_again_at_once_is_a_transport_error() {
    let server = MockServer::start().await;
    Mock::given(path("/mcp"))
        .respond_with(mock::server(|request, method| match method {
            "tools/list" => mock::result(request, json!({"tools": [mock_tool("t")]})),
            _ => ResponseTemplate::new(404),
        }))
        .mount(&server)
        .await;
    let _host = assert_call_fails(
        &server,
        "server \"s\": the server rejected the session again right after a new initialize",
    )
    .await;
}

#[tokio::test]
async fn a_refused_resumption_names_the_resumption() {
    let server = mock_server(mock::server(|_, method| match method {
        "tools/list" => ResponseTemplate::new(200).set_body_raw(
            r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"t","inputSchema":{}}]}}"#,
            "application/json",
        ),
        "tools/call" => mock::sse("id: e-1\nretry: 10\ndata: \n\n"),
        _ => ResponseTemplate::new(202),
    }))
    .await;
    answer_first(&server, "GET", 405).await;
    let _host = assert_call_fails(&server, "server \"s\": resuming the event stream (GET with Last-Event-ID) failed: HTTP 405 Method Not Allowed").await;
    let get = requests(&server)
        .await
        .into_iter()
        .find(|r| r.method.as_str() == "GET")
        .unwrap();
    assert_eq!(header(&get, "last-event-id").as_deref(), Some("e-1"));
    assert_eq!(header(&get, "accept").as_deref(), Some("text/event-stream"));
    assert_eq!(header(&get, "mcp-session-id").as_deref(), Some("s-1"));
}

#[tokio::test]
async fn an_overlong_event_id_is_not_sent_back() {
    let long_id = "i".repeat(1025);
    let server = mock_server(mock::server(move |request, method| match method {
        "tools/list" => mock::result(request, json!({"tools": [mock_tool("t")]})),
        "tools/call" => mock::sse(format!("id: {long_id}\ndata: \n\n")),
        _ => ResponseTemplate::new(202),
    }))
    .await;
    let _host = assert_call_fails(&server, "server \"s\": resuming the event stream (GET with Last-Event-ID) failed: the server's SSE event id is longer than 1024 bytes").await;
    let verbs: Vec<String> = requests(&server)
        .await
        .iter()
        .map(|r| r.method.to_string())
        .collect();
    assert!(!verbs.contains(&"GET".to_string()), "{verbs:?}");
}

#[tokio::test]
async fn a_get_answered_405_is_not_asked_again() {
    let (server, host) = Live::new().list_changed().ready().await;
    wait_count(&server, "GET", 1).await;
    // Longer than the first reopen wait (1 s).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let requests = all_requests(&server).await;
    let gets: Vec<&Request> = requests
        .iter()
        .filter(|r| r.method.as_str() == "GET")
        .collect();
    assert_eq!(gets.len(), 1);
    assert_eq!(
        header(gets[0], "accept").as_deref(),
        Some("text/event-stream")
    );
    assert_eq!(header(gets[0], "mcp-session-id").as_deref(), Some("s-1"));
    assert_eq!(
        header(gets[0], "mcp-protocol-version").as_deref(),
        Some("2025-11-25")
    );
    assert_eq!(header(gets[0], "last-event-id"), None);
    assert_eq!(call_s(&host, "a").await.unwrap(), "ok");
}

#[tokio::test]
async fn the_get_stream_carries_notifications_and_server_requests_and_is_reopened() {
    let ping = json!({"jsonrpc": "2.0", "id": "p-1", "method": "ping"});
    let (server, host) = Live::new()
        .list_changed()
        // `b` only from the third listing on: the start's and the one after the stream opened
        // (which runs while the ping is answered) come before the notification.
        .list(|r, n| mock::result(r, tools(if n <= 2 { &["a"] } else { &["a", "b"] })))
        .get(move |_, n| match n {
            1 => mock::sse(format!(
                "id: ev-1\nevent: message\ndata: {ping}\n\nid: ev-2\nevent: message\ndata: {}\n\n",
                list_changed()
            )),
            _ => ResponseTemplate::new(405),
        })
        .ready()
        .await;
    wait_tools(&host, &["a", "b"]).await;
    // The stream ended: reopened after 1 s with the last event id; the 405 ends the asking.
    wait_count(&server, "GET", 2).await;
    let requests = all_requests(&server).await;
    let gets: Vec<Option<String>> = requests
        .iter()
        .filter(|r| r.method.as_str() == "GET")
        .map(|r| header(r, "last-event-id"))
        .collect();
    assert_eq!(gets, [None, Some("ev-2".to_string())]);
    let answers = bodies(&requests, |b| b.get("result").is_some());
    assert_eq!(
        answers,
        [json!({"jsonrpc": "2.0", "id": "p-1", "result": {}})]
    );
    // The start's, the one after the stream opened, the notification's (the 405 opened none).
    settles_at(&server, "tools/list", 3).await;
    drop(host);
}

#[tokio::test]
async fn a_renewed_session_is_listed_again() {
    // The server forgets session s-0 at the first call; the new session offers another tool.
    let server = session_server(
        |request, n| mock::initialize(request, "2025-11-25", Some(&format!("s-{n}"))),
        |request, method, on_first| match method {
            "tools/list" if on_first => mock::result(request, tools(&["t"])),
            "tools/list" => mock::result(request, tools(&["t", "u"])),
            "tools/call" if on_first => ResponseTemplate::new(404),
            "tools/call" => mock::result(request, mock_text_result("fresh")),
            _ => ResponseTemplate::new(202),
        },
    )
    .await;
    let host = ready_mock(&server).await;
    assert_eq!(call_s(&host, "t").await.unwrap(), "fresh");
    wait_tools(&host, &["t", "u"]).await;
    settles_at(&server, "tools/list", 2).await;
    let lists: Vec<Option<String>> = requests(&server)
        .await
        .iter()
        .filter(|r| body(r)["method"] == "tools/list")
        .map(|r| header(r, "mcp-session-id"))
        .collect();
    assert_eq!(lists, [Some("s-0".to_string()), Some("s-1".to_string())]);
}

/// One re-initialize shared by a re-listing's `tools/list` and a call: since the call waited for
/// it too, the new session is listed once more after the re-listing's resend (a renewal only
/// listings wait for asks for none).
#[tokio::test]
async fn a_renewal_shared_by_a_relisting_and_a_call_lists_the_new_session() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let (lists, calls) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let server = session_server(
        |request, n| {
            let reply = mock::initialize(request, "2025-11-25", Some(&format!("s-{n}")));
            // The renewal is slow, so the call's 404 lands while it runs.
            if n == 0 {
                reply
            } else {
                reply.set_delay(Duration::from_millis(500))
            }
        },
        move |request, method, on_first| match method {
            "tools/list" if on_first => match lists.fetch_add(1, SeqCst) {
                0 => mock::result(request, tools(&["t"])),
                _ => ResponseTemplate::new(404),
            },
            "tools/list" => mock::result(request, tools(&["t", "u"])),
            "tools/call" if on_first => match calls.fetch_add(1, SeqCst) {
                0 => sse_then(request, &[list_changed()], mock_text_result("changed")),
                _ => ResponseTemplate::new(404),
            },
            "tools/call" => mock::result(request, mock_text_result("fresh")),
            _ => ResponseTemplate::new(202),
        },
    )
    .await;
    let host = ready_mock(&server).await;
    assert_eq!(call_s(&host, "t").await.unwrap(), "changed");
    // The re-listing met 404 and its re-initialize runs: the call joins it.
    wait_count(&server, "initialize", 2).await;
    assert_eq!(call_s(&host, "t").await.unwrap(), "fresh");
    wait_tools(&host, &["t", "u"]).await;
    settles_at(&server, "tools/list", 4).await;
    let trail: Vec<String> = session_trail(&server)
        .await
        .into_iter()
        .map(|(_, what, session)| format!("{what} {session}").trim().to_string())
        .filter(|line| line.starts_with("tools/list") || line.starts_with("initialize"))
        .collect();
    assert_eq!(
        trail,
        [
            "initialize",
            "tools/list s-0",
            "tools/list s-0",
            "initialize",
            "tools/list s-1",
            "tools/list s-1",
        ]
    );
    assert_eq!(count(&server, "initialize").await, 2);
}

#[tokio::test]
async fn instructions_reach_the_namespace_form_scrubbed_and_bounded() {
    let long = format!(
        "Use search first. Token: sekrit-value-123\n{}",
        "x".repeat(9000)
    );
    let server = Live::new().instructions(&long).start().await;
    let host = keyed_host(&server).await;
    let one = host.listing(json!({"namespace": "s"})).await;
    let instructions = one["instructions"].as_str().unwrap();
    assert!(
        instructions.starts_with("Use search first. Token: [redacted]\nxxx"),
        "{instructions}"
    );
    assert!(instructions.ends_with("x…"), "cut, ending in …");
    assert_eq!(instructions.len(), 8 * 1024);
    // Without instructions the field is absent.
    let plain = Live::new().start().await;
    let host = ready_mock(&plain).await;
    assert_eq!(
        host.call("get_dynamic_tools", json!({"namespace": "s"}))
            .await
            .unwrap(),
        r#"{"namespace":"s","status":"ready","protocolVersion":"2025-11-25","tools":[{"name":"a","description":"a things","inputSchema":{"type":"object"}}]}"#
    );
}

#[tokio::test]
async fn server_log_messages_become_tracing_events() {
    let (_guard, logs) = crate::support::logs::capture("plugin_mcp::server_log=debug");
    let message = |level: &str, data: Value| {
        json!({"jsonrpc": "2.0", "method": "notifications/message",
               "params": {"level": level, "logger": "db", "data": data}})
    };
    let messages = vec![
        message("warning", json!("disk at 91%\nsecond line")),
        message(
            "critical",
            json!({"error": "token sekrit-value-123 rejected"}),
        ),
        message("debug", json!("x".repeat(5000))),
        message("notice", json!("hello")),
    ];
    let server = Live::new()
        .call(move |r, _| sse_then(r, &messages, mock_text_result("logged")))
        .start()
        .await;
    let host = keyed_host(&server).await;
    assert_eq!(call_s(&host, "a").await.unwrap(), "logged");
    let lines = logs.lines_with("server_log");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(!logs.text().contains("sekrit"));
    assert_eq!(
        lines[0],
        " WARN plugin_mcp::server_log: disk at 91% second line namespace=\"s\" logger=db"
    );
    assert_eq!(
        lines[1],
        r#"ERROR plugin_mcp::server_log: {"error":"token [redacted] rejected"} namespace="s" logger=db"#
    );
    assert!(lines[2].starts_with("DEBUG plugin_mcp::server_log: xxx"));
    assert!(lines[2].contains("x… namespace"), "cut at 4 KiB");
    assert_eq!(
        lines[3],
        " INFO plugin_mcp::server_log: hello namespace=\"s\" logger=db"
    );
}

#[tokio::test]
async fn a_get_answered_404_renews_the_session_which_is_listed_again() {
    let server = session_server(
        |request, n| {
            mock::result(
                request,
                json!({"protocolVersion": "2025-11-25",
                       "capabilities": {"tools": {"listChanged": true}},
                       "serverInfo": {"name": "m", "version": "1"}}),
            )
            .insert_header("mcp-session-id", format!("s-{n}").as_str())
        },
        |request, method, first| {
            if request.method.as_str() == "GET" {
                return ResponseTemplate::new(if first { 404 } else { 405 });
            }
            match method {
                "tools/list" if first => mock::result(request, tools(&["a"])),
                "tools/list" => mock::result(request, tools(&["a", "b"])),
                // Asked whether s-0 is live after its GET's 404: it is gone.
                "ping" if first => ResponseTemplate::new(404),
                _ => ResponseTemplate::new(202),
            }
        },
    )
    .await;
    let host = ready_mock(&server).await;
    wait_tools(&host, &["a", "b"]).await;
    // The new session's stream is asked for after the first wait (1 s): 405, asked no more.
    wait_count(&server, "GET", 2).await;
    settles_at(&server, "GET", 2).await;
    let trail: Vec<String> = session_trail(&server)
        .await
        .into_iter()
        .map(|(http, what, session)| format!("{http} {what} {session}").trim().to_string())
        .collect();
    assert_eq!(
        trail,
        [
            "POST initialize",
            "POST notifications/initialized s-0",
            "POST tools/list s-0",
            "GET  s-0",
            "POST ping s-0",
            "POST initialize",
            "POST notifications/initialized s-1",
            "POST tools/list s-1",
            "GET  s-1",
        ]
    );
}

#[tokio::test]
async fn a_call_in_flight_outlives_the_replacement_of_its_tool() {
    // `slow` is dropped from the listing while a call to it is under way.
    let (server, host) = Live::new()
        .list(|r, n| mock::result(r, tools(if n == 1 { &["a", "slow"] } else { &["a"] })))
        .call(|r, _| match body(r)["params"]["name"].as_str() {
            Some("slow") => {
                mock::result(r, mock_text_result("slow done")).set_delay(Duration::from_millis(500))
            }
            _ => sse_then(r, &[list_changed()], mock_text_result("changed")),
        })
        .ready()
        .await;
    let (slow, changed) = tokio::join!(call_s(&host, "slow"), async {
        wait_count(&server, "tools/call", 1).await;
        let changed = call_s(&host, "a").await;
        wait_tools(&host, &["a"]).await;
        changed
    });
    assert_eq!(changed.unwrap(), "changed");
    assert_eq!(slow.unwrap(), "slow done");
    // Now it is gone: a miss re-lists once, then not_found.
    assert_eq!(
        call_s(&host, "slow").await.unwrap_err().kind,
        ToolErrorKind::NotFound
    );
    assert_eq!(count(&server, "tools/list").await, 3);
}

#[tokio::test]
async fn a_400_that_only_mentions_the_session_is_not_an_expiry() {
    let server = mock_server(mock::with_tools(json!([mock_tool("t")]), |_, _| {
        ResponseTemplate::new(400).set_body_string(
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad arguments","data":{"session":"fine"}}}"#,
        )
    }))
    .await;
    let host = assert_call_fails(&server, r#"server "s": HTTP 400 Bad Request: {"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad arguments","data":{"session":"fine"}}}"#).await;
    // No new initialize (nor a cancel) comes after the call, up to the session's DELETE.
    assert_only_the_call_before_delete(&server, host).await;
}

/// A server whose response to `tools/call` also echoes the request's `method` (JSON-RPC 2.0 §5
/// says a response has none, but it carries the request's `id` and a `result`, so it can only be
/// that response): the call answers the result.
#[tokio::test]
async fn a_response_that_echoes_the_method_is_still_the_response() {
    let tools = vec![crate::support::hostile::tool("t", "t")];
    let server = crate::support::hostile::serve_tools(tools, |req| {
        Reply::json(&json!({
            "jsonrpc": "2.0",
            "id": req.id(),
            "method": "tools/call",
            "result": {"content": [{"type": "text", "text": "done"}]}
        }))
    })
    .await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({"s": {"url": url}}));
    host.ready("s", WAIT).await;
    let answer = tokio::time::timeout(WAIT, host.call_tool("s", "t"))
        .await
        .expect("the call answers within 10 s");
    assert_eq!(answer.map_err(|e| e.message), Ok("done".to_string()));
}
