//! A scripted stateful MCP server for session and cancellation tests, on hyper over loopback.
//!
//! It behaves like a strict stateful server: `initialize` issues the session `s-<n>`; every other
//! request must carry a live `Mcp-Session-Id` (404 otherwise) and an `MCP-Protocol-Version`
//! (400 otherwise); `DELETE` ends a session. Each `tools/call` is scripted by its arguments:
//! `{"ms": 200}` holds it 200 ms, `{"sse": true}` answers it as an event stream, `{"status": 503}`
//! refuses it. The test can expire a session, restart the server (forget every session, then
//! refuse connections or answer 404 for a while), and have `initialize` answered as SSE with a
//! server `ping` and a resumption. With [`Scripted::set_list_changed`] it declares
//! `tools.listChanged` and answers each standalone `GET` with an event stream that, 300 ms later,
//! carries `notifications/tools/list_changed` and ends.
//!
//! Every request lands in a trail: HTTP verb, JSON-RPC method and id, the session and version
//! headers, and the status answered.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::hostile::{result, sse_event as event};
use super::net::{self, Connections, ReplyBody as Body};

/// One request and the status it was answered with.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// `POST`, `GET` or `DELETE`.
    pub verb: String,
    /// The JSON-RPC method; `""` for a response or no body.
    pub method: String,
    /// The JSON-RPC id; for `notifications/cancelled`, its `requestId`; `Null` otherwise.
    pub id: Value,
    pub session: Option<String>,
    pub version: Option<String>,
    pub status: u16,
    /// The `tag` argument of a `tools/call` (how a test names its calls).
    pub tag: Option<u64>,
    /// The `reason` of a `notifications/cancelled`.
    pub reason: Option<String>,
}

impl Step {
    /// `verb method id session status`, e.g. `POST tools/call 3 s-1 200` (`-` for none).
    pub fn line(&self) -> String {
        let id = match &self.id {
            Value::Null => "-".to_string(),
            other => other.to_string(),
        };
        format!(
            "{} {} {id} {} {}",
            self.verb,
            if self.method.is_empty() {
                "-"
            } else {
                &self.method
            },
            self.session.as_deref().unwrap_or("-"),
            self.status
        )
    }
}

/// How `initialize` is answered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum InitStyle {
    Json,
    /// An event stream: a priming event with id `init-1`, a server `ping`, then the stream ends;
    /// the answer comes on the resumption (`GET` with `Last-Event-ID: init-1`).
    SseWithPingAndResume,
}

#[derive(Default)]
struct State {
    trail: Vec<Step>,
    next_session: usize,
    live: HashSet<String>,
    issued: Vec<String>,
    /// Until when `initialize` (and everything else) is answered 404 (a restart window).
    down_until: Option<tokio::time::Instant>,
    /// `initialize` answers with this protocol version (default 2025-11-25).
    version: Option<String>,
    /// `notifications/initialized` is answered with this status (default 202).
    initialized_status: Option<u16>,
    init_style: Option<InitStyle>,
    /// `initialize` is answered this long after it arrived.
    init_delay: Option<Duration>,
    /// Armed by [`Scripted::restart_refusing_at_next_404`].
    outage: Option<Duration>,
    /// The `initialize` request awaiting its answer on a resumption: (request id, session).
    pending_init: Option<(Value, String)>,
    /// Declares `tools.listChanged` and serves the standalone `GET` stream.
    list_changed: bool,
    /// How many standalone GETs were answered 405 without being recorded.
    unrecorded_gets: usize,
    /// A forgotten session is answered with a plain-text 400 (Python SDK 1.8–1.25).
    plain_text_expiry: bool,
    /// Every standalone GET is answered 404.
    no_get_endpoint: bool,
    /// The answers a resumption after event `e1` replays, by session: of calls whose stream
    /// was cut inside the answer's event.
    replays: std::collections::HashMap<String, Value>,
    /// Which life of the server this is: each going down ends one. A request still being
    /// handled on a connection of an earlier life is moot (its connection is cut): it changes
    /// nothing and is not recorded.
    life: u64,
}

/// What the server and its connections share.
struct Shared {
    state: Mutex<State>,
    port: u16,
    /// The accept loop (it owns the listener): aborted, connections are refused.
    accept: Mutex<Option<tokio::task::JoinHandle<()>>>,
    connections: Arc<Connections>,
}

impl Shared {
    /// Stops listening and drops every connection but `keep` (which closes after its answer).
    fn go_down(&self, keep: Option<u64>) {
        if let Some(task) = self.accept.lock().unwrap().take() {
            task.abort();
        }
        self.connections.close(keep);
        let mut state = self.state.lock().unwrap();
        state.live.clear();
        state.life += 1;
    }

    /// Listens again on the same port after `down`.
    fn come_back(
        self: Arc<Self>,
        down: Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move {
            tokio::time::sleep(down).await;
            let listener = TcpListener::bind(("127.0.0.1", self.port)).await.unwrap();
            let task = tokio::spawn(accept(listener, Arc::clone(&self)));
            *self.accept.lock().unwrap() = Some(task);
        })
    }
}

/// The running server; stops when dropped.
pub struct Scripted {
    pub url: String,
    shared: Arc<Shared>,
    state: Arc<StateRef>,
}

/// Access to the state through the shared struct.
struct StateRef(Arc<Shared>);

impl StateRef {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.shared.go_down(None);
    }
}

impl Scripted {
    /// Starts a server on 127.0.0.1 (a free port).
    pub async fn start() -> Scripted {
        let (listener, port) = net::loopback().await;
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            port,
            accept: Mutex::new(None),
            connections: Arc::default(),
        });
        let task = tokio::spawn(accept(listener, Arc::clone(&shared)));
        *shared.accept.lock().unwrap() = Some(task);
        Scripted {
            url: format!("http://127.0.0.1:{port}/mcp"),
            state: Arc::new(StateRef(Arc::clone(&shared))),
            shared,
        }
    }

    /// How many TCP connections the server has accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.accepted()
    }

    /// The trail so far.
    pub fn trail(&self) -> Vec<Step> {
        self.state.lock().trail.clone()
    }

    /// The trail as lines (see [`Step::line`]).
    pub fn lines(&self) -> Vec<String> {
        self.trail().iter().map(Step::line).collect()
    }

    /// Every session id issued so far.
    pub fn issued(&self) -> Vec<String> {
        self.state.lock().issued.clone()
    }

    /// The sessions the server still knows.
    pub fn live(&self) -> Vec<String> {
        let mut live: Vec<String> = self.state.lock().live.iter().cloned().collect();
        live.sort();
        live
    }

    /// Forgets `session`: later requests carrying it get 404 (held calls on it go on).
    pub fn expire(&self, session: &str) {
        self.state.lock().live.remove(session);
    }

    /// Forgets every session and answers 404 to everything for `down`.
    pub fn restart_with_404(&self, down: Duration) {
        let mut state = self.state.lock();
        state.live.clear();
        state.down_until = Some(tokio::time::Instant::now() + down);
    }

    /// Forgets every session, drops every connection, and refuses connections for `down`.
    pub async fn restart_refusing(&self, down: Duration) {
        self.shared.go_down(None);
        Arc::clone(&self.shared).come_back(down).await;
    }

    /// Like [`Scripted::restart_refusing`], at the moment the server answers a request with 404
    /// because it does not know its session: that answer still goes out, then nothing listens
    /// for `down`.
    pub fn restart_refusing_at_next_404(&self, down: Duration) {
        self.state.lock().outage = Some(down);
    }

    /// How many standalone `GET`s (of sessions that declared no `listChanged`) were answered
    /// 405; they are not in the trail.
    pub fn unrecorded_gets(&self) -> usize {
        self.state.lock().unrecorded_gets
    }

    /// From now on a forgotten session is answered `400 text/plain` "Bad Request: No valid
    /// session ID provided", as Python SDK `mcp` 1.8–1.25 do.
    pub fn set_plain_text_expiry(&self) {
        self.state.lock().plain_text_expiry = true;
    }

    /// From now on every standalone `GET` is answered 404 (the server has no `GET` endpoint).
    pub fn set_no_get_endpoint(&self) {
        self.state.lock().no_get_endpoint = true;
    }

    /// `initialize` answers with `version`.
    pub fn set_version(&self, version: &str) {
        self.state.lock().version = Some(version.to_string());
    }

    /// `notifications/initialized` is answered with `status`.
    pub fn set_initialized_status(&self, status: u16) {
        self.state.lock().initialized_status = Some(status);
    }

    /// How `initialize` is answered.
    pub fn set_init_style(&self, style: InitStyle) {
        self.state.lock().init_style = Some(style);
    }

    /// `initialize` is answered `delay` after it arrived.
    /// Declares `capabilities.tools.listChanged` from the next `initialize` on, and answers a
    /// standalone `GET` with a stream that carries `notifications/tools/list_changed` after
    /// 300 ms and ends (the `GET` is recorded when it arrives, as 200).
    pub fn set_list_changed(&self, on: bool) {
        self.state.lock().list_changed = on;
    }

    pub fn set_init_delay(&self, delay: Duration) {
        self.state.lock().init_delay = Some(delay);
    }

    /// Waits (at most `limit`) until `done(trail)`; panics with the trail otherwise.
    pub async fn wait_until<D: Fn(&[Step]) -> bool>(
        &self,
        limit: Duration,
        what: &str,
        done: D,
    ) -> Vec<Step> {
        net::wait_on(limit, what, || self.trail(), done, || self.lines()).await
    }

    /// Waits until the trail has been quiet for `quiet` (at most `limit`); returns it.
    pub async fn settle(&self, quiet: Duration, limit: Duration) -> Vec<Step> {
        net::settle(quiet, limit, || self.trail()).await
    }
}

/// Serves `listener` until aborted, each request answered by [`answer`] for its connection.
async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    let connections = Arc::clone(&shared.connections);
    let life = shared.state.lock().unwrap().life;
    net::accept(listener, connections, move |number| {
        let shared = Arc::clone(&shared);
        service_fn(move |request: hyper::Request<Incoming>| {
            let shared = Arc::clone(&shared);
            async move { Ok::<_, Infallible>(answer(request, shared, number, life).await) }
        })
    })
    .await;
}

fn full(status: u16, content_type: Option<&str>, body: impl Into<Bytes>) -> hyper::Response<Body> {
    let mut response = hyper::Response::builder().status(status);
    if let Some(ct) = content_type {
        response = response.header("content-type", ct);
    }
    response.body(net::full(body)).unwrap()
}

/// A `status` response whose body `refused` follows `after` its headers.
fn slow_body(status: u16, after: Duration) -> hyper::Response<Body> {
    let body = futures_util::stream::once(async move {
        tokio::time::sleep(after).await;
        Ok::<_, std::io::Error>(hyper::body::Frame::data(Bytes::from_static(b"refused")))
    });
    hyper::Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(http_body_util::StreamBody::new(body).boxed_unsync())
        .unwrap()
}

fn json_reply(value: &Value) -> hyper::Response<Body> {
    full(200, Some("application/json"), value.to_string())
}

fn sse_reply(text: String) -> hyper::Response<Body> {
    full(200, Some("text/event-stream"), text)
}

/// The `capabilities` of an `initialize` answer.
fn capabilities(state: &State) -> Value {
    if state.list_changed {
        json!({"tools": {"listChanged": true}})
    } else {
        json!({"tools": {}})
    }
}

async fn answer(
    request: hyper::Request<Incoming>,
    shared: Arc<Shared>,
    connection: u64,
    life: u64,
) -> hyper::Response<Body> {
    let state = &shared.state;
    let (parts, body) = request.into_parts();
    let body = net::collect(body).await;
    if net::is_era_probe(&body) {
        return net::legacy_probe_answer();
    }
    let rpc: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let header = |name: &str| net::header(&parts.headers, name);
    let verb = parts.method.to_string();
    let method = rpc["method"].as_str().unwrap_or("").to_string();
    let id = if method == "notifications/cancelled" {
        rpc["params"]["requestId"].clone()
    } else {
        rpc["id"].clone()
    };
    let session = header("mcp-session-id");
    let version = header("mcp-protocol-version");
    let mut step = Step {
        verb: verb.clone(),
        method: method.clone(),
        id: id.clone(),
        session: session.clone(),
        version: version.clone(),
        status: 0,
        tag: rpc["params"]["arguments"]["tag"].as_u64(),
        reason: rpc["params"]["reason"].as_str().map(str::to_string),
    };
    // Decide under the lock; hold (sleep) outside it.
    enum Then {
        Now(hyper::Response<Body>),
        Unrecorded(hyper::Response<Body>),
        Hold(Duration, hyper::Response<Body>),
    }
    let mut outage = None;
    let then = {
        let mut st = state.lock().unwrap();
        if st.life != life {
            return full(503, None, "");
        }
        let down = st
            .down_until
            .is_some_and(|until| tokio::time::Instant::now() < until);
        let known = session.as_ref().is_some_and(|s| st.live.contains(s));
        let then = if down {
            Then::Now(full(404, Some("text/plain"), "restarting"))
        } else if verb == "DELETE" {
            if let Some(s) = &session {
                st.live.remove(s);
            }
            Then::Now(full(if known { 200 } else { 404 }, None, ""))
        } else if method == "initialize" {
            st.next_session += 1;
            let sid = format!("s-{}", st.next_session);
            st.live.insert(sid.clone());
            st.issued.push(sid.clone());
            let version = st.version.clone().unwrap_or_else(|| "2025-11-25".into());
            let answer = result(
                &id,
                json!({"protocolVersion": version, "capabilities": capabilities(&st),
                       "serverInfo": {"name": "scripted", "version": "0"}}),
            );
            let style = st.init_style.unwrap_or(InitStyle::Json);
            let mut response = match style {
                InitStyle::Json => json_reply(&answer),
                InitStyle::SseWithPingAndResume => {
                    st.pending_init = Some((id.clone(), sid.clone()));
                    sse_reply(format!(
                        "id: init-1\nretry: 10\ndata:\n\n{}",
                        event(&json!({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"}))
                    ))
                }
            };
            response
                .headers_mut()
                .insert("mcp-session-id", sid.parse().unwrap());
            match st.init_delay {
                Some(delay) => Then::Hold(delay, response),
                None => Then::Now(response),
            }
        } else if !known && st.plain_text_expiry && session.is_some() {
            Then::Now(full(
                400,
                Some("text/plain"),
                "Bad Request: No valid session ID provided",
            ))
        } else if !known {
            let mut response = full(
                if session.is_some() { 404 } else { 400 },
                Some("application/json"),
                json!({"jsonrpc": "2.0", "id": null,
                       "error": {"code": -32000, "message": "Bad Request: no valid session"}})
                .to_string(),
            );
            if session.is_some()
                && let Some(down) = st.outage.take()
            {
                response
                    .headers_mut()
                    .insert("connection", "close".parse().unwrap());
                outage = Some(down);
            }
            Then::Now(response)
        } else if verb == "GET" {
            let replay = match header("last-event-id").as_deref() {
                Some("e1") => session.as_ref().and_then(|s| st.replays.remove(s)),
                _ => None,
            };
            match (header("last-event-id").as_deref(), st.pending_init.take()) {
                (Some("e1"), _) if replay.is_some() => {
                    Then::Now(sse_reply(event(&replay.unwrap_or_default())))
                }
                (None, _) if st.no_get_endpoint => {
                    Then::Now(full(404, Some("text/plain"), "Not Found"))
                }
                (Some("init-1"), Some((init_id, sid))) if session.as_deref() == Some(&sid) => {
                    let version = st.version.clone().unwrap_or_else(|| "2025-11-25".into());
                    Then::Now(sse_reply(event(&result(
                        &init_id,
                        json!({"protocolVersion": version, "capabilities": capabilities(&st),
                               "serverInfo": {"name": "scripted", "version": "0"}}),
                    ))))
                }
                // A server request first (answered on this stream's session), then the news.
                _ if st.list_changed => Then::Hold(
                    Duration::from_millis(300),
                    sse_reply(format!(
                        "{}{}",
                        event(&json!({"jsonrpc": "2.0", "id": "get-ping", "method": "ping"})),
                        event(&json!({"jsonrpc": "2.0",
                                      "method": "notifications/tools/list_changed"}))
                    )),
                ),
                // A standalone GET to a session that declared no listChanged: no stream. The
                // client opens one on every session; it is not recorded, so the trails of
                // tests about other things stay exact.
                (None, _) => {
                    st.unrecorded_gets += 1;
                    Then::Unrecorded(full(405, None, ""))
                }
                _ => Then::Now(full(405, None, "")),
            }
        } else if version.is_none() && !method.is_empty() && rpc.get("id").is_some() {
            // A request without the version header (a response to a ping may lack it).
            Then::Now(full(
                400,
                Some("text/plain"),
                "missing MCP-Protocol-Version",
            ))
        } else if rpc.get("id").is_none() || rpc.get("method").is_none() {
            let status = if method == "notifications/initialized" {
                st.initialized_status.unwrap_or(202)
            } else {
                202
            };
            Then::Now(full(status, None, ""))
        } else if method == "tools/list" {
            Then::Now(json_reply(&result(
                &id,
                json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}),
            )))
        } else if method == "tools/call" {
            let args = &rpc["params"]["arguments"];
            let text = json!({"content": [{"type": "text", "text": format!("done {id}")}]});
            match args["status"].as_u64() {
                // `{"status": 400, "rpc": "text"}`: a JSON-RPC error (Invalid params) on a 400.
                Some(status) if args["rpc"].is_string() => Then::Now(full(
                    status as u16,
                    Some("application/json"),
                    json!({"jsonrpc": "2.0", "id": id,
                           "error": {"code": -32602, "message": args["rpc"]}})
                    .to_string(),
                )),
                // `{"status": 500, "slow_body_ms": 2000}`: the status and headers at once, the
                // body (`refused`) that much later.
                Some(status) if args["slow_body_ms"].is_u64() => Then::Now(slow_body(
                    status as u16,
                    Duration::from_millis(args["slow_body_ms"].as_u64().unwrap_or(0)),
                )),
                Some(status) => Then::Now(full(status as u16, Some("text/plain"), "refused")),
                // `{"cut": true}`: an event stream that ends before the answer, with no event id.
                None if args["cut"].as_bool() == Some(true) => {
                    Then::Now(sse_reply(": working\n\n".to_string()))
                }
                // `{"cut_in_event": true}`: a whole event `e1`, then the answer's event `e2` cut
                // before its end; a resumption after `e1` replays the answer.
                None if args["cut_in_event"].as_bool() == Some(true) => {
                    if let Some(s) = &session {
                        st.replays.insert(s.clone(), result(&id, text));
                    }
                    Then::Now(sse_reply(
                        "id: e1\nretry: 10\ndata:\n\nid: e2\ndata: {\"jsonrpc\": \"2.0\", \"id\""
                            .to_string(),
                    ))
                }
                None => {
                    let answer = result(&id, text);
                    let reply = if args["sse"].as_bool() == Some(true) {
                        sse_reply(event(&answer))
                    } else {
                        json_reply(&answer)
                    };
                    match args["ms"].as_u64() {
                        Some(ms) if ms > 0 => Then::Hold(Duration::from_millis(ms), reply),
                        _ => Then::Now(reply),
                    }
                }
            }
        } else {
            Then::Now(json_reply(&json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "Method not found"}})))
        };
        if let Then::Now(response) = &then {
            step.status = response.status().as_u16();
            st.trail.push(step.clone());
        }
        then
    };
    if let Some(down) = outage {
        shared.go_down(Some(connection));
        tokio::spawn(Arc::clone(&shared).come_back(down));
    }
    match then {
        Then::Now(response) | Then::Unrecorded(response) => response,
        Then::Hold(wait, response) => {
            // Recorded when it arrives (status 200: accepted, answer pending).
            step.status = 200;
            state.lock().unwrap().trail.push(step);
            tokio::time::sleep(wait).await;
            response
        }
    }
}
