//! A fake MCP server of the modern era (protocol version 2026-07-28), on hyper over loopback,
//! for the era-detection and modern-wire tests.
//!
//! It validates every `POST` as a modern server must (MCP 2026-07-28 "Streamable HTTP",
//! "Server Validation"): the `MCP-Protocol-Version` header is a version it supports (else
//! `400` with `-32022 UnsupportedProtocolVersion`, `data.supported` and `data.requested`), the
//! request's `params._meta` names the same version (missing: `400 -32602`; an `initialize`
//! without the header, an old client's handshake, is `-32022` too), `Mcp-Method` is the body's
//! `method`, and on `tools/call` `Mcp-Name` is `params.name` and each `Mcp-Param-{Name}`
//! of the tool's current `inputSchema` (`x-mcp-header`) is the argument's value, Base64 sentinel
//! decoded, present exactly once, and absent when the argument is absent or null (any mismatch:
//! `400 -32020 HeaderMismatch`). `GET` and `DELETE` are `405`.
//!
//! It answers `server/discover`, `tools/list` (pages, `ttlMs`, `cacheScope`), `tools/call` (an
//! echo, or a [`Call`] behaviour scripted per tool name) and `subscriptions/listen` (an event
//! stream: the acknowledgement first, then `notifications/tools/list_changed` whenever the test
//! calls [`Modern::notify_list_changed`]; [`Modern::drop_listens`] ends the streams).
//!
//! Its [`Era`] can be legacy (2025-11-25 with sessions, `server/discover` unknown) or dual, and
//! can change at runtime ([`Modern::restart`]). [`Modern::answer_next`] answers the next
//! requests of one method with a canned reply (a legacy `400`, a `404`, a modern error, ...).
//!
//! Every request lands in a trail of [`Step`]s: verb, method, id, every `mcp-*` header, whether
//! `Mcp-Session-Id` / `Last-Event-ID` were present, the `_meta` object and the status answered;
//! a streamed answer whose connection the client closed before its end adds a `CLOSED` step.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::hostile::{result, sse_event};
use super::net::{self, Connections, ReplyBody};

/// The modern protocol version.
pub const MODERN: &str = "2026-07-28";
/// The legacy version the legacy era answers `initialize` with by default.
pub const LEGACY: &str = "2025-11-25";
/// The body of the legacy `400` a Python SDK (1.8–1.25) server sends for a request without a
/// session.
pub const NO_SESSION: &str = "Bad Request: No valid session ID provided";

/// Which protocol era the server speaks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Era {
    /// 2026-07-28 only: `initialize` is `400 -32022`.
    Modern,
    /// 2025-11-25 only: `initialize` makes a session; anything without a live session is the
    /// plain-text legacy `400` [`NO_SESSION`] (so `server/discover` too).
    Legacy,
    /// Both: `initialize` and requests carrying a live session are legacy, the rest modern.
    Dual,
}

/// How a `tools/call` of one tool is answered (after validation).
#[derive(Clone, Debug)]
pub enum Call {
    /// `200 application/json`: one text block `echo <name> <arguments>`.
    Echo,
    /// The echo as one SSE event.
    Sse,
    /// An SSE stream whose headers come at once and whose echo event comes this much later.
    Hold(Duration),
    /// The first call: an SSE stream that ends before any response; later calls: the echo.
    CutFirst,
    /// Every call: an SSE stream that ends before any response.
    CutAlways,
    /// A `resultType: "input_required"` result with these `inputRequests`.
    InputRequired(Value),
    /// `400` with `-32021 MissingRequiredClientCapability`, `data.requiredCapabilities` this.
    MissingCapability(Value),
    /// The first call: `400 -32020 HeaderMismatch`; later calls: the echo.
    MismatchOnce,
    /// Every call: `400 -32020 HeaderMismatch`.
    MismatchAlways,
}

/// A canned answer (see [`Modern::answer_next`]).
#[derive(Clone, Debug)]
pub enum Canned {
    /// Exactly this status, content type (none: no header) and body.
    Raw(u16, Option<&'static str>, String),
    /// A JSON-RPC error for the request's id, on `status`: code, message, data (`Null`: none).
    Error(u16, i64, String, Value),
    /// A JSON-RPC result for the request's id, on 200.
    Result(Value),
}

/// One request (or a closed stream) and the status it was answered with.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// `POST`, `GET`, `DELETE`, or `CLOSED` (a streamed answer ended before its end: the client
    /// closed it, or [`Modern::restart`] cut it).
    pub verb: String,
    /// The JSON-RPC method; `""` for a response or no body.
    pub method: String,
    /// The JSON-RPC id (`Null` for none).
    pub id: Value,
    /// Every header whose name starts with `mcp-` (lower case), in arrival order, repeats kept;
    /// `Mcp-Session-Id` is not among them (see `session`).
    pub headers: Vec<(String, String)>,
    /// Whether an `Mcp-Session-Id` header was present.
    pub session: bool,
    /// Whether a `Last-Event-ID` header was present.
    pub last_event_id: bool,
    /// The whole `params` of the request (`Null` when none).
    pub params: Value,
    /// `params._meta` (`Null` when absent).
    pub meta: Value,
    /// The status answered (for a `CLOSED` step, that of the answer cut).
    pub status: u16,
}

impl Step {
    /// `VERB method status`, e.g. `POST server/discover 200` (`-` for no method).
    pub fn line(&self) -> String {
        let method = if self.method.is_empty() {
            "-"
        } else {
            &self.method
        };
        format!("{} {method} {}", self.verb, self.status)
    }

    /// The values of header `name` (lower case), in order.
    pub fn header_values(&self, name: &str) -> Vec<String> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The one value of header `name`, if it came exactly once.
    pub fn header(&self, name: &str) -> Option<String> {
        match self.header_values(name).as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        }
    }
}

/// One `tools/list` page: the cursor it answers (`None`: no cursor), its tools, its
/// `nextCursor`.
type Page = (Option<String>, Vec<Value>, Option<String>);

/// What a test configures.
struct Config {
    era: Era,
    /// `supportedVersions` of the discover answer and `data.supported` of a `-32022`, verbatim
    /// (may be garbage); the versions accepted are its strings.
    supported: Value,
    capabilities: Value,
    instructions: Option<String>,
    /// The version a legacy `initialize` answers with.
    legacy_version: String,
    tools: Vec<Value>,
    /// Explicit pages, by the cursor asked (`None`: no cursor): the tools and the `nextCursor`.
    pages: Option<Vec<Page>>,
    /// Redeploys between two pages, in order: the `tools/list` asking for the first's cursor
    /// finds the server restarted onto its era with its pages (see [`Modern::redeploy_at_cursor`]).
    redeploys: Vec<(String, Era, Vec<Page>)>,
    /// `ttlMs` / `cacheScope` of the `tools/list` and discover results (`None`: left out).
    ttl_ms: Option<Value>,
    cache_scope: Option<Value>,
    /// A `_meta` put in every result.
    result_meta: Option<Value>,
    calls: HashMap<String, Call>,
    /// Canned answers by method (`*`: any), each used once, in order.
    canned: HashMap<String, Vec<Canned>>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            era: Era::Modern,
            supported: json!([MODERN]),
            capabilities: json!({"tools": {}}),
            instructions: None,
            legacy_version: LEGACY.to_string(),
            tools: vec![json!({"name": "echo", "description": "echoes",
                               "inputSchema": {"type": "object"}})],
            pages: None,
            redeploys: Vec::new(),
            ttl_ms: Some(json!(0)),
            cache_scope: Some(json!("public")),
            result_meta: None,
            calls: HashMap::new(),
            canned: HashMap::new(),
        }
    }
}

#[derive(Default)]
struct State {
    config: Config,
    trail: Vec<Step>,
    /// How many `tools/call`s of each tool arrived (validated or not).
    called: HashMap<String, usize>,
    next_session: usize,
    live: Vec<String>,
    /// The open listen streams.
    listens: Vec<(Value, mpsc::UnboundedSender<Value>)>,
    /// Standalone `GET`s of a legacy session (405, not recorded).
    unrecorded_gets: usize,
}

struct Shared {
    state: Mutex<State>,
    connections: Arc<Connections>,
}

/// The running server; stops when dropped.
pub struct Modern {
    pub url: String,
    pub port: u16,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Modern {
    fn drop(&mut self) {
        self.task.abort();
        self.shared.connections.cut(None);
    }
}

impl Modern {
    /// Starts a modern-only server on 127.0.0.1 (a free port) listing one tool `echo`.
    pub async fn start() -> Modern {
        Modern::start_in(Era::Modern).await
    }

    /// Starts a server of `era`.
    pub async fn start_in(era: Era) -> Modern {
        let (listener, port) = net::loopback().await;
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            connections: Arc::default(),
        });
        shared.state.lock().unwrap().config.era = era;
        let task = tokio::spawn(accept(listener, Arc::clone(&shared)));
        Modern {
            url: format!("http://127.0.0.1:{port}/mcp"),
            port,
            shared,
            task,
        }
    }

    fn config(&self, change: impl FnOnce(&mut Config)) {
        change(&mut self.shared.state.lock().unwrap().config);
    }

    /// The versions accepted and advertised (verbatim, garbage allowed).
    pub fn set_supported(&self, supported: Value) {
        self.config(|c| c.supported = supported);
    }

    /// The discover answer's `capabilities`.
    pub fn set_capabilities(&self, capabilities: Value) {
        self.config(|c| c.capabilities = capabilities);
    }

    /// Declares `capabilities.tools.listChanged: true`.
    pub fn set_list_changed(&self) {
        self.set_capabilities(json!({"tools": {"listChanged": true}}));
    }

    /// The `instructions` of the discover answer and of a legacy `initialize` answer.
    pub fn set_instructions(&self, instructions: &str) {
        self.config(|c| c.instructions = Some(instructions.to_string()));
    }

    /// The version a legacy `initialize` answers with.
    pub fn set_legacy_version(&self, version: &str) {
        self.config(|c| c.legacy_version = version.to_string());
    }

    /// The tools listed (one page) and validated against from now on.
    pub fn set_tools(&self, tools: Vec<Value>) {
        self.config(|c| c.tools = tools);
    }

    /// Explicit pages: for each cursor asked (`None`: none), the tools and the `nextCursor`.
    /// A cursor not among them is `-32602`. Calls validate against every page's tools.
    pub fn set_pages(&self, pages: Vec<(Option<&str>, Vec<Value>, Option<&str>)>) {
        let pages = pages
            .into_iter()
            .map(|(at, tools, next)| (at.map(str::to_string), tools, next.map(str::to_string)))
            .collect();
        self.config(|c| c.pages = Some(pages));
    }

    /// The first `tools/list` that asks for `cursor` (after the redeploys queued before this
    /// one happened) finds the server redeployed: onto `era`,
    /// every session forgotten and every listen stream ended (as [`Modern::restart`], but the
    /// connection carrying that request stays up), now listing `pages`; then it is answered as
    /// the redeployed server answers it.
    pub fn redeploy_at_cursor(
        &self,
        cursor: &str,
        era: Era,
        pages: Vec<(Option<&str>, Vec<Value>, Option<&str>)>,
    ) {
        let pages = pages
            .into_iter()
            .map(|(at, tools, next)| (at.map(str::to_string), tools, next.map(str::to_string)))
            .collect();
        self.config(|c| c.redeploys.push((cursor.to_string(), era, pages)));
    }

    /// `ttlMs` and `cacheScope` of the results (`Value::Null`: left out).
    pub fn set_cache(&self, ttl_ms: Value, cache_scope: Value) {
        self.config(|c| {
            c.ttl_ms = Some(ttl_ms).filter(|v| !v.is_null());
            c.cache_scope = Some(cache_scope).filter(|v| !v.is_null());
        });
    }

    /// A `_meta` object in every result.
    pub fn set_result_meta(&self, meta: Value) {
        self.config(|c| c.result_meta = Some(meta));
    }

    /// How `tools/call` of `tool` is answered.
    pub fn set_call(&self, tool: &str, call: Call) {
        self.config(|c| {
            c.calls.insert(tool.to_string(), call);
        });
    }

    /// The next request of `method` (`*`: of any method) is answered with `canned`, before any
    /// validation; queued answers are used in order, once each.
    pub fn answer_next(&self, method: &str, canned: Canned) {
        self.config(|c| c.canned.entry(method.to_string()).or_default().push(canned));
    }

    /// Switches to `era`: forgets every session, ends every listen stream and cuts every open
    /// connection (a server restarted onto another build).
    pub fn restart(&self, era: Era) {
        {
            let mut state = self.shared.state.lock().unwrap();
            state.config.era = era;
            state.live.clear();
            state.listens.clear();
        }
        self.shared.connections.cut(None);
    }

    /// Sends `notifications/tools/list_changed` on every open listen stream; how many there were.
    pub fn notify_list_changed(&self) -> usize {
        let state = self.shared.state.lock().unwrap();
        let mut sent = 0;
        for (id, stream) in &state.listens {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                              "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id}}});
            if stream.send(note).is_ok() {
                sent += 1;
            }
        }
        sent
    }

    /// Ends every open listen stream (without a response: an abrupt close).
    pub fn drop_listens(&self) {
        self.shared.state.lock().unwrap().listens.clear();
    }

    /// How many listen streams are open.
    pub fn open_listens(&self) -> usize {
        let mut state = self.shared.state.lock().unwrap();
        state.listens.retain(|(_, s)| !s.is_closed());
        state.listens.len()
    }

    /// Standalone `GET`s of legacy sessions, answered 405 and not in the trail.
    pub fn unrecorded_gets(&self) -> usize {
        self.shared.state.lock().unwrap().unrecorded_gets
    }

    /// The trail so far.
    pub fn trail(&self) -> Vec<Step> {
        self.shared.state.lock().unwrap().trail.clone()
    }

    /// The trail as lines (see [`Step::line`]).
    pub fn lines(&self) -> Vec<String> {
        self.trail().iter().map(Step::line).collect()
    }

    /// The steps of `method`.
    pub fn steps(&self, method: &str) -> Vec<Step> {
        self.trail()
            .into_iter()
            .filter(|s| s.method == method)
            .collect()
    }

    /// Waits (at most `limit`) until `done(trail)`; panics with the trail's lines otherwise.
    pub async fn wait_until(
        &self,
        limit: Duration,
        what: &str,
        done: impl Fn(&[Step]) -> bool,
    ) -> Vec<Step> {
        net::wait_on(limit, what, || self.trail(), done, || self.lines()).await
    }

    /// How many requests of `method` arrived.
    pub fn count(&self, method: &str) -> usize {
        self.steps(method).len()
    }

    /// Waits until the trail has been quiet for `quiet` (at most `limit`); returns it.
    pub async fn settle(&self, quiet: Duration, limit: Duration) -> Vec<Step> {
        net::settle(quiet, limit, || self.trail()).await
    }
}

/// The `_meta` a modern client sends, with `version`.
pub fn client_meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "plugin-mcp",
                                               "version": env!("CARGO_PKG_VERSION")},
    })
}

/// `value` as the spec's Base64 sentinel form `=?base64?…?=`.
pub fn sentinel(value: &str) -> String {
    format!("=?base64?{}?=", BASE64.encode(value.as_bytes()))
}

/// A header value decoded from the sentinel form (as-is when not in it); `None` when the
/// sentinel's payload is not Base64 of UTF-8.
pub fn decode(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(payload) => String::from_utf8(BASE64.decode(payload).ok()?).ok(),
        None => Some(value.to_string()),
    }
}

/// A tool `name` whose `inputSchema` has `properties`.
pub fn tool_with(name: &str, properties: Value) -> Value {
    json!({"name": name, "description": name,
           "inputSchema": {"type": "object", "properties": properties}})
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    let connections = Arc::clone(&shared.connections);
    net::accept(listener, connections, move |_| {
        let shared = Arc::clone(&shared);
        service_fn(move |request: hyper::Request<Incoming>| {
            let shared = Arc::clone(&shared);
            async move { Ok::<_, Infallible>(answer(request, &shared).await) }
        })
    })
    .await;
}

fn reply(
    status: u16,
    content_type: Option<&str>,
    body: impl Into<Bytes>,
) -> hyper::Response<ReplyBody> {
    let mut response = hyper::Response::builder().status(status);
    if let Some(ct) = content_type {
        response = response.header("content-type", ct);
    }
    response.body(net::full(body)).unwrap()
}

fn json_reply(status: u16, value: &Value) -> hyper::Response<ReplyBody> {
    reply(status, Some("application/json"), value.to_string())
}

fn error(id: &Value, code: i64, message: &str, data: Value) -> Value {
    let mut error = json!({"code": code, "message": message});
    if !data.is_null() {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// What the server does once the step is recorded.
enum Then {
    Now(hyper::Response<ReplyBody>),
    /// A streamed answer whose closing before the end is recorded as a `CLOSED` step.
    Stream(Step, futures_util::stream::BoxStream<'static, Bytes>),
}

async fn answer(
    request: hyper::Request<Incoming>,
    shared: &Arc<Shared>,
) -> hyper::Response<ReplyBody> {
    let (parts, body) = request.into_parts();
    let body = net::collect(body).await;
    let rpc: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = rpc["method"].as_str().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter(|(n, _)| n.as_str().starts_with("mcp-") && n.as_str() != "mcp-session-id")
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let mut step = Step {
        verb: parts.method.to_string(),
        method: method.clone(),
        id: rpc["id"].clone(),
        headers,
        session: parts.headers.contains_key("mcp-session-id"),
        last_event_id: parts.headers.contains_key("last-event-id"),
        params: rpc["params"].clone(),
        meta: rpc["params"]["_meta"].clone(),
        status: 0,
    };
    let session = net::header(&parts.headers, "mcp-session-id");
    let then = {
        let mut st = shared.state.lock().unwrap();
        let then = decide(&mut st, &step, &rpc, session.as_deref(), &parts.headers);
        match then {
            Some(Then::Now(response)) => {
                step.status = response.status().as_u16();
                st.trail.push(step);
                Then::Now(response)
            }
            Some(Then::Stream(_, body)) => {
                step.status = 200;
                st.trail.push(step.clone());
                Then::Stream(step, body)
            }
            None => {
                st.unrecorded_gets += 1;
                return reply(405, None, "");
            }
        }
    };
    match then {
        Then::Now(response) => response,
        Then::Stream(step, body) => {
            let guard = Closed {
                step: Some(step),
                shared: Arc::clone(shared),
            };
            let body = body
                .map(Ok::<_, std::io::Error>)
                .chain(futures_util::stream::once(async move {
                    let mut guard = guard;
                    guard.step = None;
                    Ok(Bytes::new())
                }));
            hyper::Response::builder()
                .status(200)
                .header("content-type", "text/event-stream")
                .body(StreamBody::new(body.map(|c| c.map(Frame::data))).boxed_unsync())
                .unwrap()
        }
    }
}

/// Records a `CLOSED` step when dropped before the stream ended.
struct Closed {
    step: Option<Step>,
    shared: Arc<Shared>,
}

impl Drop for Closed {
    fn drop(&mut self) {
        if let Some(mut step) = self.step.take() {
            step.verb = "CLOSED".into();
            if let Ok(mut state) = self.shared.state.lock() {
                state.trail.push(step);
            }
        }
    }
}

/// The answer to one request; `None` for an unrecorded standalone `GET` of a legacy session.
fn decide(
    st: &mut State,
    step: &Step,
    rpc: &Value,
    session: Option<&str>,
    headers: &hyper::HeaderMap,
) -> Option<Then> {
    let id = rpc["id"].clone();
    let method = step.method.as_str();
    for key in [method, "*"] {
        if let Some(queue) = st.config.canned.get_mut(key)
            && !queue.is_empty()
        {
            let canned = queue.remove(0);
            return Some(Then::Now(match canned {
                Canned::Raw(status, ct, body) => reply(status, ct, body),
                Canned::Error(status, code, message, data) => {
                    json_reply(status, &error(&id, code, &message, data))
                }
                Canned::Result(value) => json_reply(200, &result(&id, value)),
            }));
        }
    }
    if method == "tools/list"
        && let Some((cursor, _, _)) = st.config.redeploys.first()
        && rpc["params"]["cursor"].as_str() == Some(cursor.as_str())
    {
        let (_, era, pages) = st.config.redeploys.remove(0);
        st.config.era = era;
        st.config.pages = Some(pages);
        st.live.clear();
        st.listens.clear();
    }
    let live = session.is_some_and(|s| st.live.iter().any(|l| l == s));
    let era = st.config.era;
    let legacy = match era {
        Era::Legacy => true,
        Era::Modern => false,
        Era::Dual => method == "initialize" || live,
    };
    if legacy {
        return legacy_answer(st, step, rpc, session, live);
    }
    if step.verb != "POST" {
        return Some(Then::Now(reply(405, None, "")));
    }
    Some(modern_answer(st, step, rpc, headers))
}

fn legacy_answer(
    st: &mut State,
    step: &Step,
    rpc: &Value,
    session: Option<&str>,
    live: bool,
) -> Option<Then> {
    let id = rpc["id"].clone();
    let now = |r| Some(Then::Now(r));
    match step.verb.as_str() {
        "DELETE" => {
            st.live.retain(|l| Some(l.as_str()) != session);
            return now(reply(if live { 200 } else { 404 }, None, ""));
        }
        "GET" if live => return None,
        "GET" => return now(reply(405, None, "")),
        _ => {}
    }
    if step.method == "initialize" {
        st.next_session += 1;
        let sid = format!("legacy-{}", st.next_session);
        st.live.push(sid.clone());
        let mut answer = json!({"protocolVersion": st.config.legacy_version,
                                "capabilities": st.config.capabilities,
                                "serverInfo": {"name": "modern-fake", "version": "0"}});
        if let Some(instructions) = &st.config.instructions {
            answer["instructions"] = json!(instructions);
        }
        let mut response = json_reply(200, &result(&id, answer));
        response
            .headers_mut()
            .insert("mcp-session-id", sid.parse().unwrap());
        return now(response);
    }
    if !live {
        return now(reply(400, Some("text/plain"), NO_SESSION));
    }
    if rpc.get("id").is_none() || rpc.get("method").is_none() {
        return now(reply(202, None, ""));
    }
    match step.method.as_str() {
        "tools/list" => now(json_reply(200, &list_result(st, &id, &rpc["params"]))),
        "tools/call" => Some(call_answer(st, &id, &rpc["params"])),
        "ping" => now(json_reply(200, &result(&id, json!({})))),
        _ => now(json_reply(
            200,
            &error(&id, -32601, "Method not found", Value::Null),
        )),
    }
}

fn modern_answer(st: &mut State, step: &Step, rpc: &Value, headers: &hyper::HeaderMap) -> Then {
    let id = rpc["id"].clone();
    let bad = |code: i64, message: String, data: Value| {
        Then::Now(json_reply(400, &error(&id, code, &message, data)))
    };
    let mismatch = |message: String| bad(-32020, message, Value::Null);
    if rpc.get("jsonrpc") != Some(&json!("2.0")) || step.method.is_empty() {
        return bad(-32600, "Invalid Request".into(), Value::Null);
    }
    let supported: Vec<&str> = st
        .config
        .supported
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let versions = headers.get_all("mcp-protocol-version").iter().count();
    if versions == 0 && step.method == "initialize" {
        // An old client's handshake: it names its version in the params only.
        return bad(
            -32022,
            "Unsupported protocol version".into(),
            json!({"supported": st.config.supported,
                   "requested": rpc["params"]["protocolVersion"]}),
        );
    }
    let Some(version) = step
        .header("mcp-protocol-version")
        .filter(|_| versions == 1)
    else {
        return mismatch("Header mismatch: MCP-Protocol-Version missing or repeated".into());
    };
    if !supported.contains(&version.as_str()) {
        return bad(
            -32022,
            "Unsupported protocol version".into(),
            json!({"supported": st.config.supported, "requested": version}),
        );
    }
    let is_request = rpc.get("id").is_some();
    let meta_version = step.meta["io.modelcontextprotocol/protocolVersion"].as_str();
    if is_request && meta_version.is_none() {
        return bad(
            -32602,
            "Invalid params: _meta protocolVersion missing".into(),
            Value::Null,
        );
    }
    if let Some(meta_version) = meta_version
        && meta_version != version
    {
        return mismatch(format!(
            "Header mismatch: MCP-Protocol-Version {version} but _meta names {meta_version}"
        ));
    }
    if step.header("mcp-method").as_deref() != Some(step.method.as_str()) {
        return mismatch("Header mismatch: Mcp-Method does not match method".into());
    }
    if !is_request {
        return Then::Now(reply(202, None, ""));
    }
    match step.method.as_str() {
        "server/discover" => {
            let mut answer = json!({
                "supportedVersions": st.config.supported,
                "capabilities": st.config.capabilities,
                "serverInfo": {"name": "modern-fake", "version": "0"},
            });
            if let Some(instructions) = &st.config.instructions {
                answer["instructions"] = json!(instructions);
            }
            cache_fields(&st.config, &mut answer);
            Then::Now(json_reply(200, &result(&id, with_meta(&st.config, answer))))
        }
        "tools/list" => Then::Now(json_reply(200, &list_result(st, &id, &rpc["params"]))),
        "tools/call" => {
            let params = &rpc["params"];
            let name = params["name"].as_str().unwrap_or("");
            let names = headers.get_all("mcp-name").iter().count();
            match step
                .header("mcp-name")
                .filter(|_| names == 1)
                .as_deref()
                .map(decode)
            {
                Some(Some(sent)) if sent == name => {}
                _ => {
                    return mismatch("Header mismatch: Mcp-Name does not match params.name".into());
                }
            }
            if let Err(message) = check_params(st, name, &params["arguments"], step, headers) {
                return mismatch(message);
            }
            call_answer(st, &id, params)
        }
        "subscriptions/listen" => {
            let (sender, receiver) = mpsc::unbounded_channel();
            let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id},
                           "notifications": {"toolsListChanged":
                               rpc["params"]["notifications"]["toolsListChanged"] == true}}});
            let _ = sender.send(ack);
            st.listens.push((id.clone(), sender));
            let events = futures_util::stream::unfold(receiver, |mut receiver| async move {
                let message = receiver.recv().await?;
                Some((Bytes::from(sse_event(&message)), receiver))
            });
            Then::Stream(Step::default_for(), events.boxed())
        }
        _ => Then::Now(json_reply(
            200,
            &error(&id, -32601, "Method not found", Value::Null),
        )),
    }
}

impl Step {
    fn default_for() -> Step {
        Step {
            verb: String::new(),
            method: String::new(),
            id: Value::Null,
            headers: Vec::new(),
            session: false,
            last_event_id: false,
            params: Value::Null,
            meta: Value::Null,
            status: 0,
        }
    }
}

fn cache_fields(config: &Config, answer: &mut Value) {
    if let Some(ttl) = &config.ttl_ms {
        answer["ttlMs"] = ttl.clone();
    }
    if let Some(scope) = &config.cache_scope {
        answer["cacheScope"] = scope.clone();
    }
}

fn with_meta(config: &Config, mut answer: Value) -> Value {
    if let Some(meta) = &config.result_meta {
        answer["_meta"] = meta.clone();
    }
    answer
}

fn list_result(st: &State, id: &Value, params: &Value) -> Value {
    let asked = params["cursor"].as_str().map(str::to_string);
    let (tools, next) = match &st.config.pages {
        None => (st.config.tools.clone(), None),
        Some(pages) => match pages.iter().find(|(at, _, _)| *at == asked) {
            Some((_, tools, next)) => (tools.clone(), next.clone()),
            None => return error(id, -32602, "Invalid params: unknown cursor", Value::Null),
        },
    };
    let mut answer = json!({"tools": tools});
    if let Some(next) = next {
        answer["nextCursor"] = json!(next);
    }
    cache_fields(&st.config, &mut answer);
    result(id, with_meta(&st.config, answer))
}

/// Every tool the server lists now, over all pages.
fn all_tools(config: &Config) -> Vec<Value> {
    match &config.pages {
        None => config.tools.clone(),
        Some(pages) => pages.iter().flat_map(|(_, t, _)| t.clone()).collect(),
    }
}

/// Checks every `Mcp-Param-*` of tool `name` against `arguments` (MCP 2026-07-28 "Server
/// Behavior for Custom Headers"): each annotated property with a non-null value has its header
/// exactly once, decoded equal to the value's string form; the others have none; no
/// `Mcp-Param-*` the schema does not declare.
fn check_params(
    st: &State,
    name: &str,
    arguments: &Value,
    step: &Step,
    headers: &hyper::HeaderMap,
) -> Result<(), String> {
    let tools = all_tools(&st.config);
    let schema = tools
        .iter()
        .find(|t| t["name"] == name)
        .map(|t| t["inputSchema"].clone())
        .unwrap_or(Value::Null);
    let mut declared = Vec::new();
    annotated(&schema, &mut Vec::new(), &mut declared);
    let mut expected = Vec::new();
    for (path, header) in &declared {
        let header = format!("mcp-param-{}", header.to_ascii_lowercase());
        let mut value = arguments;
        for key in path {
            value = &value[key];
        }
        let wanted = match value {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Number(n) => Some(n.to_string()),
            other => Some(other.to_string()),
        };
        let sent: Vec<String> = headers
            .get_all(header.as_str())
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        match (wanted, sent.as_slice()) {
            (None, []) => {}
            (None, _) => {
                return Err(format!(
                    "Header mismatch: {header} sent for an absent value"
                ));
            }
            (Some(want), [one]) => match decode(one) {
                Some(got) if got == want => {}
                Some(got) if numeric_equal(&got, value) => {}
                _ => {
                    return Err(format!(
                        "Header mismatch: {header} does not match the argument"
                    ));
                }
            },
            (Some(_), []) => return Err(format!("Header mismatch: {header} missing")),
            (Some(_), _) => return Err(format!("Header mismatch: {header} repeated")),
        }
        expected.push(header);
    }
    for (n, _) in &step.headers {
        if n.starts_with("mcp-param-") && !expected.contains(n) {
            return Err(format!("Header mismatch: {n} not declared"));
        }
    }
    Ok(())
}

fn numeric_equal(got: &str, value: &Value) -> bool {
    match (got.parse::<f64>(), value.as_f64()) {
        (Ok(g), Some(v)) => g == v,
        _ => false,
    }
}

/// The `x-mcp-header` annotations reachable through `properties` only: (path, header name).
fn annotated(schema: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    if let Some(header) = schema["x-mcp-header"].as_str()
        && !path.is_empty()
    {
        out.push((path.clone(), header.to_string()));
    }
    if let Some(properties) = schema["properties"].as_object() {
        for (key, sub) in properties {
            path.push(key.clone());
            annotated(sub, path, out);
            path.pop();
        }
    }
}

fn call_answer(st: &mut State, id: &Value, params: &Value) -> Then {
    let name = params["name"].as_str().unwrap_or("").to_string();
    let nth = {
        let count = st.called.entry(name.clone()).or_default();
        *count += 1;
        *count - 1
    };
    let echo = with_meta(
        &st.config,
        json!({"content": [{"type": "text",
                            "text": format!("echo {name} {}", params["arguments"])}]}),
    );
    let echo = result(id, echo);
    let call = st.config.calls.get(&name).cloned().unwrap_or(Call::Echo);
    let cut = || {
        let body = futures_util::stream::once(async { Bytes::from_static(b": working\n\n") });
        Then::Stream(Step::default_for(), body.boxed())
    };
    let sse =
        |message: Value| Then::Now(reply(200, Some("text/event-stream"), sse_event(&message)));
    let mismatch = || {
        Then::Now(json_reply(
            400,
            &error(
                id,
                -32020,
                "Header mismatch: Mcp-Param-Region missing",
                Value::Null,
            ),
        ))
    };
    match call {
        Call::Echo => Then::Now(json_reply(200, &echo)),
        Call::Sse => sse(echo),
        Call::Hold(after) => {
            let body = futures_util::stream::once(async move {
                tokio::time::sleep(after).await;
                Bytes::from(sse_event(&echo))
            });
            Then::Stream(Step::default_for(), body.boxed())
        }
        Call::CutFirst if nth == 0 => cut(),
        Call::CutFirst => sse(echo),
        Call::CutAlways => cut(),
        Call::InputRequired(requests) => Then::Now(json_reply(
            200,
            &result(
                id,
                json!({"resultType": "input_required", "inputRequests": requests,
                       "requestState": "opaque-state-1"}),
            ),
        )),
        Call::MissingCapability(required) => Then::Now(json_reply(
            400,
            &error(
                id,
                -32021,
                "Server requires a client capability for this request",
                json!({"requiredCapabilities": required}),
            ),
        )),
        Call::MismatchOnce if nth == 0 => mismatch(),
        Call::MismatchOnce => Then::Now(json_reply(200, &echo)),
        Call::MismatchAlways => mismatch(),
    }
}
