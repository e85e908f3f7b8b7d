//! A small MCP-ish server for hostile-server tests, built on hyper so that a reply can be sent
//! slowly, in pieces, endlessly, cut off mid-body, or never.
//!
//! Every request is recorded (HTTP method, headers, body, and when it arrived, in Tokio time so
//! paused-time tests read virtual seconds). The test gives an async handler that turns each
//! request into a [`Reply`]; [`standard`] answers the handshake the usual way so a handler only
//! writes the part it is about. It also builds the JSON-RPC messages and SSE events the other
//! servers of the family send ([`result`], [`sse_event`]).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, Stream, StreamExt};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::time::Instant;

use super::net::{self, Connections, ReplyBody};

/// The session id [`standard`] hands out.
pub const SESSION: &str = "hostile-session-1";

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Received {
    /// `POST`, `GET`, `DELETE`.
    pub http_method: String,
    /// The request target (path and query) exactly as sent.
    pub target: String,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub rpc: Value,
    /// When it arrived (Tokio time: virtual under a paused clock).
    pub at: Instant,
    /// How many requests of the same HTTP method and JSON-RPC method arrived before this one
    /// (0 for the first), so a handler can answer the first `tools/list` or `GET` differently
    /// without a counter of its own.
    pub nth: usize,
}

impl Received {
    /// The JSON-RPC method, or `""`.
    pub fn method(&self) -> &str {
        self.rpc["method"].as_str().unwrap_or("")
    }

    /// The JSON-RPC id (`Null` for a notification).
    pub fn id(&self) -> Value {
        self.rpc["id"].clone()
    }

    /// A header as text, if present.
    pub fn header(&self, name: &str) -> Option<String> {
        net::header(&self.headers, name)
    }
}

type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, io::Error>> + Send>>;

/// What the server answers.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    body: Option<BodyStream>,
    full: Bytes,
}

impl Reply {
    /// A whole body, sent at once with a `Content-Length`.
    pub fn raw(status: u16, content_type: &str, body: impl Into<Bytes>) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: None,
            full: body.into(),
        }
    }

    /// `200 application/json` with `value`.
    pub fn json(value: &Value) -> Reply {
        Reply::raw(200, "application/json", serde_json::to_vec(value).unwrap())
    }

    /// `202 Accepted`, no body (the answer to a notification or a response).
    pub fn accepted() -> Reply {
        Reply {
            status: 202,
            headers: Vec::new(),
            body: None,
            full: Bytes::new(),
        }
    }

    /// `200 text/event-stream` with one `message` event per value, sent at once.
    pub fn sse(messages: &[Value]) -> Reply {
        let text: String = messages.iter().map(sse_event).collect();
        Reply::raw(200, "text/event-stream", text)
    }

    /// A chunked body (no `Content-Length`) from `chunks`; an `Err` item cuts the connection
    /// mid-body.
    pub fn stream(
        status: u16,
        content_type: &str,
        chunks: impl Stream<Item = Result<Bytes, io::Error>> + Send + 'static,
    ) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: Some(Box::pin(chunks)),
            full: Bytes::new(),
        }
    }

    /// `prefix`, then `chunk` forever, one every `every` (none when zero), counting the bytes
    /// handed to the connection in `sent`. Ends only when the client goes away.
    pub fn endless(
        status: u16,
        content_type: &str,
        prefix: impl Into<Bytes>,
        chunk: Bytes,
        every: Duration,
        sent: Arc<AtomicUsize>,
    ) -> Reply {
        let prefix: Bytes = prefix.into();
        sent.fetch_add(prefix.len(), Ordering::SeqCst);
        let rest = stream::unfold((), move |()| {
            let chunk = chunk.clone();
            let sent = Arc::clone(&sent);
            async move {
                if !every.is_zero() {
                    tokio::time::sleep(every).await;
                }
                sent.fetch_add(chunk.len(), Ordering::SeqCst);
                Some((Ok(chunk), ()))
            }
        });
        Reply::stream(
            status,
            content_type,
            stream::once(async move { Ok(prefix) }).chain(rest),
        )
    }

    /// Drops every header (so no `Content-Type` either).
    pub fn without_headers(mut self) -> Reply {
        self.headers.clear();
        self
    }

    /// Sets a header, replacing any of the same name.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name.into(), value.into()));
        self
    }

    fn into_response(self) -> hyper::Response<ReplyBody> {
        let mut response = hyper::Response::builder().status(self.status);
        for (name, value) in &self.headers {
            response = response.header(name.as_str(), value.as_str());
        }
        let body = match self.body {
            Some(chunks) => StreamBody::new(chunks.map(|c| c.map(Frame::data))).boxed_unsync(),
            None => net::full(self.full),
        };
        response.body(body).unwrap()
    }
}

/// One SSE `message` event holding `message`.
pub fn sse_event(message: &Value) -> String {
    format!("event: message\ndata: {message}\n\n")
}

/// A JSON-RPC result for request `id`.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A JSON-RPC error for request `id`.
pub fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A `tools/call` result of one text block.
pub fn text_result(id: &Value, text: &str) -> Value {
    result(id, json!({"content": [{"type": "text", "text": text}]}))
}

/// A tool as `tools/list` shows it.
pub fn tool(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "inputSchema": {"type": "object"}})
}

/// A `tools/list` result with `tools` and an optional `nextCursor`.
pub fn tools_page(id: &Value, tools: Vec<Value>, next: Option<&str>) -> Value {
    match next {
        Some(cursor) => result(id, json!({"tools": tools, "nextCursor": cursor})),
        None => result(id, json!({"tools": tools})),
    }
}

/// The usual answer to the handshake and the housekeeping requests: `initialize` (version
/// 2025-06-18, session [`SESSION`]), any notification or client response (202), `DELETE`
/// (200), `GET` (405: no standalone stream). `None` for everything else.
pub fn standard(req: &Received) -> Option<Reply> {
    if req.http_method == "DELETE" {
        return Some(Reply::raw(200, "text/plain", ""));
    }
    if req.http_method != "GET" && req.method() == "initialize" {
        return Some(initialize_reply(&req.id()));
    }
    housekeeping(req)
}

/// The usual answer to what is no request of a session: a `GET` (405: no standalone stream),
/// and a notification or the client's answer to a server request (202). `None` for a request.
pub fn housekeeping(req: &Received) -> Option<Reply> {
    if req.http_method == "GET" {
        return Some(Reply::raw(405, "text/plain", ""));
    }
    if req.rpc.get("id").is_none() || req.rpc.get("method").is_none() {
        return Some(Reply::accepted());
    }
    None
}

/// A successful `initialize` answer for request `id`.
pub fn initialize_reply(id: &Value) -> Reply {
    initialize_with(id, json!({"tools": {}}))
}

/// A successful `initialize` answer for request `id` declaring `tools.listChanged`.
pub fn list_changed_initialize(id: &Value) -> Reply {
    initialize_with(id, json!({"tools": {"listChanged": true}}))
}

/// An `initialize` answer (version 2025-06-18, session [`SESSION`]) with `capabilities`.
fn initialize_with(id: &Value, capabilities: Value) -> Reply {
    Reply::json(&result(
        id,
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": capabilities,
            "serverInfo": {"name": "hostile", "version": "0"}
        }),
    ))
    .header("mcp-session-id", SESSION)
}

type Handler = Arc<dyn Fn(Received) -> Pin<Box<dyn Future<Output = Reply> + Send>> + Send + Sync>;

/// A running server on 127.0.0.1; stops when dropped.
pub struct Server {
    pub url: String,
    pub port: u16,
    log: Arc<Mutex<Vec<Received>>>,
    connections: Arc<Connections>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
        self.connections.cut(None);
    }
}

impl Server {
    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Received> {
        self.log.lock().unwrap().clone()
    }

    /// Forgets the requests received so far (a long-running user such as the fuzz target).
    #[allow(dead_code, reason = "the fuzz target decode_reply calls it")]
    pub fn clear(&self) {
        self.log.lock().unwrap().clear();
    }

    /// The first request received for which `found` holds; panics when there is none.
    pub fn first(&self, found: impl Fn(&Received) -> bool) -> Received {
        let requests = self.requests();
        let first = requests.iter().find(|r| found(r)).cloned();
        first.unwrap_or_else(|| panic!("no such request among {} received", requests.len()))
    }

    /// The requests whose JSON-RPC method is `method`.
    pub fn with_method(&self, method: &str) -> Vec<Received> {
        self.requests()
            .into_iter()
            .filter(|r| r.method() == method)
            .collect()
    }

    /// How many requests had JSON-RPC method `method`.
    pub fn count(&self, method: &str) -> usize {
        self.with_method(method).len()
    }

    /// How many requests had the HTTP method `verb` (`GET`, `DELETE`, …).
    pub fn count_verb(&self, verb: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.http_method == verb)
            .count()
    }

    /// Waits (at most 10 s) for the standalone stream's first `ping`, then 4.5 s more (long
    /// enough for the stream loop's backoff, 1 s then 2 s, to ask again), and tells how many
    /// `GET`s and `ping`s arrived in all.
    pub async fn gets_and_pings_after_the_first_ping(&self) -> [usize; 2] {
        self.wait_until(Duration::from_secs(10), "the first ping", |r| {
            r.iter().any(|r| r.method() == "ping")
        })
        .await;
        tokio::time::sleep(Duration::from_millis(4500)).await;
        [self.count_verb("GET"), self.count("ping")]
    }

    /// Waits `quiet` (Tokio time), then tells how many requests had each JSON-RPC method of
    /// `methods`, in that order: what a test counts once nothing more should arrive.
    pub async fn counts_after<const N: usize>(
        &self,
        quiet: Duration,
        methods: [&str; N],
    ) -> [usize; N] {
        tokio::time::sleep(quiet).await;
        methods.map(|method| self.count(method))
    }

    /// Waits (at most `limit`, Tokio time) until `done(requests)`; panics otherwise.
    pub async fn wait_until(
        &self,
        limit: Duration,
        what: &str,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let received = || -> Vec<String> {
            self.requests()
                .iter()
                .map(|r| format!("{} {}", r.http_method, r.method()))
                .collect()
        };
        net::wait_on(limit, what, || self.requests(), done, received).await
    }

    /// Waits (at most 5 s) for a `notifications/cancelled`; returns the params of every one
    /// received.
    pub async fn cancellations(&self) -> Vec<Value> {
        let cancelled = "notifications/cancelled";
        self.wait_until(Duration::from_secs(5), cancelled, |r| {
            r.iter().any(|r| r.method() == cancelled)
        })
        .await
        .into_iter()
        .filter(|r| r.method() == cancelled)
        .map(|r| r.rpc["params"].clone())
        .collect()
    }
}

/// Starts a server on 127.0.0.1 (a free port) that answers with `handler`.
pub async fn serve<F, Fut>(handler: F) -> Server
where
    F: Fn(Received) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply> + Send + 'static,
{
    serve_on(net::loopback().await.0, handler)
}

/// Starts a server (as [`serve`]) that answers with `route` the requests it is about (`Some`),
/// the rest with [`standard`], and anything neither answers with `400`.
pub async fn serve_routes<F, Fut>(route: F) -> Server
where
    F: Fn(Received) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<Reply>> + Send + 'static,
{
    let route = Arc::new(route);
    serve(move |req| {
        let route = Arc::clone(&route);
        async move {
            let rest = standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", ""));
            route(req).await.unwrap_or(rest)
        }
    })
    .await
}

/// Starts a server (as [`serve`]) that lists `tools` (one page) and answers every request neither
/// that nor [`standard`] with `call` (a `tools/call`, where the tests use it).
pub async fn serve_tools<F>(tools: Vec<Value>, call: F) -> Server
where
    F: Fn(&Received) -> Reply + Send + Sync + 'static,
{
    serve(move |req| {
        let reply = standard(&req).unwrap_or_else(|| match req.method() {
            "tools/list" => Reply::json(&tools_page(&req.id(), tools.clone(), None)),
            _ => call(&req),
        });
        async move { reply }
    })
    .await
}

/// Starts a server (as [`serve`]) answering each request with `answer(request, state)`, `state`
/// locked for the length of that call.
pub async fn serve_with_state<S, F>(state: Arc<Mutex<S>>, answer: F) -> Server
where
    S: Send + 'static,
    F: Fn(&Received, &mut S) -> Reply + Send + Sync + 'static,
{
    serve(move |req| {
        let reply = answer(&req, &mut state.lock().unwrap());
        async move { reply }
    })
    .await
}

/// Starts a server (as [`serve`]) whose `initialize` is answered by `initialize`, everything else
/// by [`standard`].
pub async fn serve_initialize<F>(initialize: F) -> Server
where
    F: Fn(&Received) -> Reply + Send + Sync + 'static,
{
    serve(move |req| {
        let reply = match req.method() {
            "initialize" => initialize(&req),
            _ => standard(&req).unwrap(),
        };
        async move { reply }
    })
    .await
}

/// Like [`serve`], on a listener the test bound (e.g. to a port chosen earlier).
pub fn serve_on<F, Fut>(listener: TcpListener, handler: F) -> Server
where
    F: Fn(Received) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply> + Send + 'static,
{
    serve_with(listener, Gets::UnlessListChanged, Probe::Legacy, handler)
}

/// Starts a server (as [`serve`]) whose `handler` sees and the log records every standalone
/// `GET` too, whatever the sessions declared.
pub async fn serve_every_get<F, Fut>(handler: F) -> Server
where
    F: Fn(Received) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply> + Send + 'static,
{
    serve_with(net::loopback().await.0, Gets::All, Probe::Legacy, handler)
}

/// Starts a server (as [`serve_every_get`]) whose `handler` answers the era probe
/// (`server/discover`) too, and the log records it: for the tests of the probe itself.
pub async fn serve_all<F, Fut>(handler: F) -> Server
where
    F: Fn(Received) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply> + Send + 'static,
{
    serve_with(net::loopback().await.0, Gets::All, Probe::Handled, handler)
}

/// Who answers the client's era probe (`server/discover`).
#[derive(Clone, Copy)]
enum Probe {
    /// The harness, as a legacy server ([`net::legacy_probe_answer`]), unrecorded.
    Legacy,
    /// The test's handler, recorded like any request.
    Handled,
}

/// Which standalone `GET`s (no `Last-Event-ID`) reach the handler and the log.
#[derive(Clone, Copy)]
enum Gets {
    /// All of them.
    All,
    /// Only once an `initialize` answer declared `tools.listChanged`; before, they are answered
    /// 405 (no stream offered) and not recorded. The client opens the stream on every session,
    /// so this keeps the trails of tests about other things exact; tests about the stream
    /// itself declare `listChanged` or use [`serve_every_get`].
    UnlessListChanged,
}

fn serve_with<F, Fut>(listener: TcpListener, gets: Gets, probe: Probe, handler: F) -> Server
where
    F: Fn(Received) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply> + Send + 'static,
{
    let port = listener.local_addr().unwrap().port();
    let handler: Handler = Arc::new(move |req| Box::pin(handler(req)));
    let log: Arc<Mutex<Vec<Received>>> = Arc::default();
    let connections = Arc::new(Connections::default());
    let streams = Arc::new(std::sync::atomic::AtomicBool::new(matches!(
        gets,
        Gets::All
    )));
    let service = {
        let log = Arc::clone(&log);
        move |_| {
            let (handler, log, streams) =
                (Arc::clone(&handler), Arc::clone(&log), Arc::clone(&streams));
            service_fn(move |request| {
                record(
                    request,
                    Arc::clone(&handler),
                    Arc::clone(&log),
                    Arc::clone(&streams),
                    probe,
                )
            })
        }
    };
    let task = tokio::spawn(net::accept(listener, Arc::clone(&connections), service));
    Server {
        url: format!("http://127.0.0.1:{port}/mcp"),
        port,
        log,
        connections,
        task,
    }
}

/// Records `request` in `log` and answers it with `handler`.
async fn record(
    request: hyper::Request<Incoming>,
    handler: Handler,
    log: Arc<Mutex<Vec<Received>>>,
    streams: Arc<std::sync::atomic::AtomicBool>,
    probe: Probe,
) -> Result<hyper::Response<ReplyBody>, Infallible> {
    let (parts, body) = request.into_parts();
    // The client's standalone stream: a GET for an event stream, not resuming one (OAuth
    // metadata GETs ask for JSON).
    let standalone = parts.method == hyper::Method::GET
        && !parts.headers.contains_key("last-event-id")
        && net::header(&parts.headers, "accept").is_some_and(|a| a.contains("text/event-stream"));
    if standalone && !streams.load(Ordering::SeqCst) {
        return Ok(Reply::raw(405, "text/plain", "").into_response());
    }
    let body = net::collect(body).await;
    if matches!(probe, Probe::Legacy) && net::is_era_probe(&body) {
        return Ok(net::legacy_probe_answer());
    }
    let mut received = Received {
        http_method: parts.method.to_string(),
        target: parts
            .uri
            .path_and_query()
            .map_or_else(String::new, |p| p.as_str().to_string()),
        headers: parts.headers,
        rpc: serde_json::from_slice(&body).unwrap_or(Value::Null),
        body,
        at: Instant::now(),
        nth: 0,
    };
    {
        let mut log = log.lock().unwrap();
        received.nth = log
            .iter()
            .filter(|r| r.http_method == received.http_method && r.method() == received.method())
            .count();
        log.push(received.clone());
    }
    let initialize = received.method() == "initialize";
    let reply = handler(received).await;
    if initialize && declares_list_changed(&reply.full) {
        streams.store(true, Ordering::SeqCst);
    }
    Ok(reply.into_response())
}

/// Whether a whole `initialize` answer (JSON, or SSE events) declares `tools.listChanged: true`.
fn declares_list_changed(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim);
    std::iter::once(text.as_ref())
        .chain(json)
        .filter_map(|t| serde_json::from_str::<Value>(t).ok())
        .any(|v| v["result"]["capabilities"]["tools"]["listChanged"] == true)
}

/// The config entry `{"url": url}`.
pub fn entry(url: &str) -> Value {
    json!({ "url": url })
}

/// The listing entry of `namespace` in a full listing.
pub fn server_entry<'a>(listing: &'a Value, namespace: &str) -> &'a Value {
    listing["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["namespace"] == namespace)
        .unwrap_or_else(|| panic!("no server {namespace} in {listing}"))
}

/// Authorization server metadata (RFC 8414) of an issuer at `base` whose authorization endpoint
/// is `authorization_endpoint`, with `/token` and `/register`, PKCE S256 and public clients.
pub fn authorization_server_metadata(base: &str, authorization_endpoint: &str) -> Value {
    json!({
        "issuer": base,
        "authorization_endpoint": authorization_endpoint,
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    })
}

/// A dynamic registration's answer (RFC 7591) for the public client `client_id`.
pub fn public_client(client_id: &str) -> Value {
    json!({"client_id": client_id, "token_endpoint_auth_method": "none"})
}
