//! Building blocks for [`super::hostile`] servers that many test modules share: a heartbeat for
//! Tokio's paused clock, requests never answered or answered with headers and then silence,
//! the `server/discover` and `initialize` results of a server declaring `tools.listChanged`, a
//! scripted legacy or modern server, and the arrival times of requests.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::Host;
use super::hostile::{
    self, Received, Reply, Server, result, standard, text_result, tool, tools_page,
};

/// On a paused clock, Tokio jumps to the next timer whenever every task is idle, also while a
/// loopback packet is still on its way. This heartbeat keeps a timer at most 50 ms ahead at all
/// times, so no jump skips past a deadline while the peers are merely between two socket reads.
pub fn heartbeat() {
    tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

/// A request the server never answers.
pub async fn never() -> Reply {
    std::future::pending().await
}

/// Sets its flag when dropped: the body of a response the client closed.
pub struct Closed(pub Arc<AtomicBool>);

impl Drop for Closed {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A response of `status` whose headers go out at once and whose body never sends a byte nor
/// ends (a silent proxy after the status line); `closed` is set once the client closed it.
pub fn headers_then_silence(status: u16, content_type: &str, closed: Arc<AtomicBool>) -> Reply {
    let body = stream::unfold(Closed(closed), |held| async move {
        std::future::pending::<()>().await;
        drop(held);
        None::<(Result<Bytes, io::Error>, Closed)>
    });
    Reply::stream(status, content_type, body)
}

/// A `server/discover` result of a modern server declaring `tools.listChanged`.
pub fn discover_result(id: &Value) -> Reply {
    Reply::json(&result(
        id,
        json!({"supportedVersions": ["2026-07-28"],
               "capabilities": {"tools": {"listChanged": true}},
               "serverInfo": {"name": "fixture", "version": "0"}}),
    ))
}

/// A legacy (MCP 2025-11-25) `initialize` answer declaring `tools.listChanged`, issuing
/// `session`.
pub fn initialize(id: &Value, session: &str) -> Reply {
    initialize_declaring(id, session, json!({"tools": {"listChanged": true}}))
}

/// A legacy (MCP 2025-11-25) `initialize` answer declaring `capabilities`, issuing `session`.
pub fn initialize_declaring(id: &Value, session: &str, capabilities: Value) -> Reply {
    Reply::json(&result(
        id,
        json!({"protocolVersion": "2025-11-25",
               "capabilities": capabilities,
               "serverInfo": {"name": "fixture", "version": "0"}}),
    ))
    .header("mcp-session-id", session)
}

/// When each request of HTTP method `verb` and JSON-RPC method `method` (`""` for a `GET`)
/// arrived, in whole seconds after `t0`.
pub fn seconds(server: &Server, verb: &str, method: &str, t0: Instant) -> Vec<u64> {
    server
        .requests()
        .iter()
        .filter(|r| r.http_method == verb && r.method() == method)
        .map(|r| (r.at - t0).as_secs())
        .collect()
}

/// How a test's script answers a request.
pub enum Answer {
    Now(Reply),
    /// Never: the request waits until the client gives up.
    Never,
}

/// A legacy server (sessions `s-1`, `s-2`, … one per `initialize`, each declaring
/// `tools.listChanged`; tool `t`) whose answers `script` decides first (`None`: the usual ones:
/// `server/discover` plain 400, `GET` 405, `DELETE` 200, `tools/call` `ok on s-N`).
pub async fn legacy_with(
    script: impl Fn(&Received) -> Option<Answer> + Send + Sync + 'static,
) -> Server {
    let script = Arc::new(script);
    hostile::serve_all(move |req| {
        let script = Arc::clone(&script);
        async move {
            match script(&req) {
                Some(Answer::Now(reply)) => return reply,
                Some(Answer::Never) => return never().await,
                None => {}
            }
            let session = req.header("mcp-session-id").unwrap_or_default();
            match (req.http_method.as_str(), req.method()) {
                ("GET", _) => Reply::raw(405, "text/plain", ""),
                ("DELETE", _) => Reply::raw(200, "text/plain", ""),
                (_, "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
                (_, "initialize") => initialize(&req.id(), &format!("s-{}", req.nth + 1)),
                (_, "tools/list") => {
                    Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
                }
                (_, "tools/call") => {
                    Reply::json(&text_result(&req.id(), &format!("ok on {session}")))
                }
                _ => standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
            }
        }
    })
    .await
}

/// A modern server (`tools.listChanged`, tool `t`) whose `subscriptions/listen` is answered by
/// `listen`.
pub async fn modern_with(listen: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Server {
    let listen = Arc::new(listen);
    hostile::serve_all(move |req| {
        let listen = Arc::clone(&listen);
        async move {
            match req.method() {
                "server/discover" => discover_result(&req.id()),
                "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
                "subscriptions/listen" => listen(&req),
                _ => Reply::raw(400, "text/plain", ""),
            }
        }
    })
    .await
}

/// The namespace listing of `ns` (`get_dynamic_tools` with `{"namespace": ns}`).
pub async fn namespace(host: &Host, ns: &str) -> Value {
    host.listing(json!({ "namespace": ns })).await
}

/// Asserts that `server` was told, once, to cancel the first `tools/call` it received, with
/// `reason` (MCP 2025-11-25 "Cancellation": `notifications/cancelled`).
pub async fn assert_call_cancelled(server: &Server, reason: &str) {
    let call = server.with_method("tools/call")[0].id();
    assert_eq!(
        server.cancellations().await,
        [json!({"requestId": call, "reason": reason})]
    );
}

/// `times` calls of tool `t` on `ns`, one after the other: each answer, or its error message.
pub async fn call_t_times(host: &Host, ns: &str, times: usize) -> Vec<Result<String, String>> {
    let mut answers = Vec::new();
    for _ in 0..times {
        answers.push(host.call_tool(ns, "t").await.map_err(|e| e.message));
    }
    answers
}

/// A protected MCP endpoint at `{base}/mcp` (MCP 2025-11-25 "Authorization") that is its own
/// authorization server, and names as its authorization endpoint `endpoint(base, key)`, `key`
/// being the `X-Api-Key` value the MCP endpoint last received: `POST /mcp` answers `401` with a
/// Bearer challenge, `/prm` the resource's metadata, `/.well-known/oauth-authorization-server`
/// the server's, and `/register` registers client `client-echo-1`. Returns it and its `base`.
pub async fn key_echoing_sign_in(endpoint: fn(&str, &str) -> String) -> (Server, String) {
    let listener = super::net::unused_loopback().await;
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let learned: Arc<Mutex<String>> = Arc::default();
    let b = base.clone();
    let server = hostile::serve_on(listener, move |req: Received| {
        let (base, seen) = (b.clone(), learned.clone());
        async move {
            if let Some(key) = req.header("x-api-key") {
                *seen.lock().unwrap() = key;
            }
            let key = seen.lock().unwrap().clone();
            match (req.http_method.as_str(), req.target.as_str()) {
                ("POST", "/mcp") => Reply::raw(401, "text/plain", "sign in first").header(
                    "www-authenticate",
                    &format!("Bearer resource_metadata=\"{base}/prm\""),
                ),
                ("GET", "/prm") => resource_metadata(&base, &base),
                ("GET", "/.well-known/oauth-authorization-server") => Reply::json(
                    &hostile::authorization_server_metadata(&base, &endpoint(&base, &key)),
                ),
                ("POST", "/register") => Reply::json(&hostile::public_client("client-echo-1")),
                _ => Reply::raw(404, "text/plain", "not here"),
            }
        }
    });
    (server, base)
}

/// A server listing the one tool `name`: the answers of [`hostile::standard`], `tools/list`, and
/// `400` to anything else.
pub fn one_tool_or_400(req: &Received, name: &str) -> Reply {
    standard(req).unwrap_or_else(|| match req.method() {
        "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool(name, "a tool")], None)),
        _ => Reply::raw(400, "text/plain", ""),
    })
}

/// The `name` of each tool of a namespace listing, in its order.
pub fn tool_names(listing: &Value) -> Vec<&Value> {
    listing["tools"]
        .as_array()
        .expect("a namespace listing has tools")
        .iter()
        .map(|t| &t["name"])
        .collect()
}

/// The protected resource metadata (RFC 9728) of `{base}/mcp`, naming `authorization_server`.
pub fn resource_metadata(base: &str, authorization_server: &str) -> Reply {
    Reply::json(&json!({
        "resource": format!("{base}/mcp"),
        "authorization_servers": [authorization_server],
    }))
}

/// A `server/discover` result (MCP 2026-07-28) of a modern server declaring `capabilities`.
pub fn discover_declaring(id: &Value, capabilities: Value) -> Reply {
    Reply::json(&result(
        id,
        json!({"supportedVersions": ["2026-07-28"],
               "capabilities": capabilities,
               "serverInfo": {"name": "fixture", "version": "0"}}),
    ))
}

/// Whether `req` is a `GET` on session `session` (its `Mcp-Session-Id`).
pub fn is_get_on(req: &Received, session: &str) -> bool {
    req.http_method == "GET" && req.header("mcp-session-id").as_deref() == Some(session)
}

/// Waits (at most `limit`, Tokio time) until `server` received a `GET` on session `session`;
/// returns the first.
pub async fn first_get_on(server: &Server, session: &str, limit: Duration) -> Received {
    let what = format!("a GET on {session}");
    server
        .wait_until(limit, &what, |r| r.iter().any(|r| is_get_on(r, session)))
        .await
        .into_iter()
        .find(|r| is_get_on(r, session))
        .expect("the GET waited for")
}

/// `first` as one body chunk, then, 50 ms later (after the headers and `first` went out), the
/// connection cut mid-body (`ConnectionReset`).
pub fn cut_stream(
    first: Bytes,
) -> impl futures_util::Stream<Item = Result<Bytes, io::Error>> + Send + 'static {
    let cut = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Err(io::Error::new(io::ErrorKind::ConnectionReset, "cut"))
    };
    stream::once(async move { Ok(first) }).chain(stream::once(cut))
}

/// `200 text/event-stream` sending `text`, then cutting the connection mid-body (as
/// [`cut_stream`]).
pub fn cut_after(text: String) -> Reply {
    Reply::stream(200, "text/event-stream", cut_stream(Bytes::from(text)))
}

/// What a legacy server restarted onto 2026-07-28 answers for the new build (tool `new`): its
/// `server/discover` result and a modern `tools/list`; `None` for anything else, which the
/// caller answers (a legacy request is refused with a modern error).
pub fn restarted_build(req: &Received) -> Option<Reply> {
    match (req.http_method.as_str(), req.method()) {
        ("POST", "server/discover") => Some(Reply::json(&super::hostile::result(
            &req.id(),
            serde_json::json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                   "serverInfo": {"name": "restarted", "version": "2"}}),
        ))),
        ("POST", "tools/list")
            if req.header("mcp-protocol-version").as_deref() == Some("2026-07-28") =>
        {
            Some(Reply::json(&super::hostile::tools_page(
                &req.id(),
                vec![super::hostile::tool("new", "new")],
                None,
            )))
        }
        _ => None,
    }
}
