//! A scriptable MCP server: mounted responders, each behind matchers, that answer each request
//! with a closure, echoing the request id, so tests can script the wire exactly. It is the
//! harness family's (hyper over [`super::net`], like [`super::hostile`] and
//! [`super::scripted`]), with the small mock-server surface `wire` and `pack` are written in:
//! [`MockServer`], [`Mock`], [`Request`], [`ResponseTemplate`], [`matchers`].

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::service::service_fn;
use serde_json::{Value, json};

use super::net::{self, Connections, ReplyBody};

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: hyper::Method,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
}

/// What a mounted responder answers: a status, headers, a body, and a delay before the answer.
#[derive(Clone, Debug)]
pub struct ResponseTemplate {
    status: u16,
    headers: Vec<(String, String)>,
    body: Bytes,
    delay: Option<Duration>,
}

impl ResponseTemplate {
    pub fn new(status: u16) -> ResponseTemplate {
        ResponseTemplate {
            status,
            headers: Vec::new(),
            body: Bytes::new(),
            delay: None,
        }
    }

    /// Sets a header, replacing any of the same name.
    pub fn insert_header(mut self, name: &str, value: impl AsRef<str>) -> ResponseTemplate {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers
            .push((name.to_string(), value.as_ref().to_string()));
        self
    }

    /// A `text/plain` body.
    pub fn set_body_string(self, body: impl Into<String>) -> ResponseTemplate {
        self.set_body_raw(body.into(), "text/plain")
    }

    /// A body with its `Content-Type`.
    pub fn set_body_raw(
        mut self,
        body: impl Into<Vec<u8>>,
        content_type: &str,
    ) -> ResponseTemplate {
        self.body = Bytes::from(body.into());
        self.insert_header("content-type", content_type)
    }

    /// The answer goes out `delay` after the request arrived.
    pub fn set_delay(mut self, delay: Duration) -> ResponseTemplate {
        self.delay = Some(delay);
        self
    }

    fn into_response(self) -> hyper::Response<ReplyBody> {
        let mut response = hyper::Response::builder().status(self.status);
        for (name, value) in &self.headers {
            response = response.header(name.as_str(), value.as_str());
        }
        response.body(net::full(self.body)).unwrap()
    }
}

/// What answers a matched request.
pub trait Respond: Send + Sync + 'static {
    fn respond(&self, request: &Request) -> ResponseTemplate;
}

impl Respond for ResponseTemplate {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.clone()
    }
}

impl<F: Fn(&Request) -> ResponseTemplate + Send + Sync + 'static> Respond for F {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self(request)
    }
}

/// What a mounted responder answers.
pub mod matchers {
    /// A condition on a request.
    #[derive(Clone, Debug)]
    pub enum Matcher {
        /// The request target's path is this.
        Path(String),
        /// The HTTP method is this.
        Method(String),
    }

    pub fn path(path: &str) -> Matcher {
        Matcher::Path(path.to_string())
    }

    pub fn method(method: &str) -> Matcher {
        Matcher::Method(method.to_ascii_uppercase())
    }
}

use matchers::Matcher;

/// A responder to mount: its matchers, priority (lower first, then the earlier mounted) and
/// how many requests it answers at most.
pub struct Mock {
    matchers: Vec<Matcher>,
    responder: Option<Arc<dyn Respond>>,
    priority: u8,
    limit: Option<u64>,
}

impl Mock {
    pub fn given(matcher: Matcher) -> Mock {
        Mock {
            matchers: vec![matcher],
            responder: None,
            priority: 5,
            limit: None,
        }
    }

    pub fn respond_with(mut self, responder: impl Respond) -> Mock {
        self.responder = Some(Arc::new(responder));
        self
    }

    pub fn with_priority(mut self, priority: u8) -> Mock {
        self.priority = priority;
        self
    }

    pub fn up_to_n_times(mut self, n: u64) -> Mock {
        self.limit = Some(n);
        self
    }

    pub async fn mount(self, server: &MockServer) {
        let responder = self.responder.expect("a mock needs a responder");
        server.shared.mounted.lock().unwrap().push(Mounted {
            matchers: self.matchers,
            responder,
            priority: self.priority,
            limit: self.limit,
            used: AtomicU64::new(0),
        });
    }
}

struct Mounted {
    matchers: Vec<Matcher>,
    responder: Arc<dyn Respond>,
    priority: u8,
    limit: Option<u64>,
    used: AtomicU64,
}

#[derive(Default)]
struct Shared {
    mounted: Mutex<Vec<Mounted>>,
    received: Mutex<Vec<Request>>,
}

/// A running server on 127.0.0.1; stops when dropped. A request no mock matches gets 404.
pub struct MockServer {
    port: u16,
    shared: Arc<Shared>,
    connections: Arc<Connections>,
    task: tokio::task::JoinHandle<()>,
}

/// Builds a [`MockServer`].
pub struct MockServerBuilder;

impl MockServerBuilder {
    pub async fn start(self) -> MockServer {
        MockServer::start().await
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
        self.connections.cut(None);
    }
}

impl MockServer {
    pub fn builder() -> MockServerBuilder {
        MockServerBuilder
    }

    pub async fn start() -> MockServer {
        let (listener, port) = net::loopback().await;
        let shared = Arc::new(Shared::default());
        let connections = Arc::new(Connections::default());
        let service = {
            let shared = Arc::clone(&shared);
            move |_| {
                let shared = Arc::clone(&shared);
                service_fn(move |request| answer(request, Arc::clone(&shared)))
            }
        };
        let task = tokio::spawn(net::accept(listener, Arc::clone(&connections), service));
        MockServer {
            port,
            shared,
            connections,
            task,
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn uri(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request received so far, in arrival order.
    pub async fn received_requests(&self) -> Option<Vec<Request>> {
        Some(self.shared.received.lock().unwrap().clone())
    }
}

async fn answer(
    request: hyper::Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<hyper::Response<ReplyBody>, Infallible> {
    let (parts, body) = request.into_parts();
    let received = Request {
        method: parts.method.clone(),
        headers: parts.headers,
        body: net::collect(body).await.to_vec(),
    };
    if net::is_era_probe(&received.body) {
        return Ok(net::legacy_probe_answer());
    }
    shared.received.lock().unwrap().push(received.clone());
    let template = {
        let mounted = shared.mounted.lock().unwrap();
        let matches = |m: &Mounted| {
            m.matchers.iter().all(|matcher| match matcher {
                Matcher::Path(path) => parts.uri.path() == path,
                Matcher::Method(method) => parts.method.as_str() == method,
            }) && m.limit.is_none_or(|n| m.used.load(Ordering::SeqCst) < n)
        };
        let chosen = mounted
            .iter()
            .enumerate()
            .filter(|(_, m)| matches(m))
            .min_by_key(|(i, m)| (m.priority, *i))
            .map(|(_, m)| m);
        chosen.map(|m| {
            m.used.fetch_add(1, Ordering::SeqCst);
            Arc::clone(&m.responder)
        })
    };
    let template = match template {
        Some(responder) => responder.respond(&received),
        None => ResponseTemplate::new(404),
    };
    if let Some(delay) = template.delay {
        tokio::time::sleep(delay).await;
    }
    Ok(template.into_response())
}

/// The JSON body of a request (`Null` when there is none or it is not JSON).
pub fn body(request: &Request) -> Value {
    serde_json::from_slice(&request.body).unwrap_or(Value::Null)
}

/// A header of a request as text, if present.
pub fn header(request: &Request, name: &str) -> Option<String> {
    request
        .headers
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

/// `200 application/json` with the JSON-RPC result `result` for `request`'s id.
pub fn result(request: &Request, result: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(
        json!({"jsonrpc": "2.0", "id": body(request)["id"], "result": result}).to_string(),
        "application/json",
    )
}

/// `200 text/event-stream` with `events` as the body, verbatim.
pub fn sse(events: impl Into<String>) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(events.into(), "text/event-stream")
}

/// An SSE event carrying `message` as its data.
pub fn event(message: &Value) -> String {
    format!("event: message\ndata: {message}\n\n")
}

/// The JSON-RPC response message for `request` with `result`.
pub fn response(request: &Request, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": body(request)["id"], "result": result})
}

/// The `initialize` answer choosing `version`, with `Mcp-Session-Id: session` when given.
pub fn initialize(request: &Request, version: &str, session: Option<&str>) -> ResponseTemplate {
    let mut template = result(
        request,
        json!({"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "mock", "version": "1"}}),
    );
    if let Some(session) = session {
        template = template.insert_header("mcp-session-id", session);
    }
    template
}

/// A responder: `initialize` (version 2025-11-25, session `s-1`), `202` for notifications, and
/// `other(request, method)` for everything else.
pub fn server(
    other: impl Fn(&Request, &str) -> ResponseTemplate + Send + Sync + 'static,
) -> impl Fn(&Request) -> ResponseTemplate + Send + Sync + 'static {
    move |request: &Request| {
        let message = body(request);
        let method = message["method"].as_str().unwrap_or("").to_string();
        if method == "initialize" {
            initialize(request, "2025-11-25", Some("s-1"))
        } else if message.get("id").is_none() {
            ResponseTemplate::new(202)
        } else {
            other(request, &method)
        }
    }
}

/// `tools/list` answered with `tools` in one page; `tools/call` by `call`.
pub fn with_tools(
    tools: Value,
    call: impl Fn(&Request, &Value) -> ResponseTemplate + Send + Sync + 'static,
) -> impl Fn(&Request) -> ResponseTemplate + Send + Sync + 'static {
    server(move |request, method| match method {
        "tools/list" => result(request, json!({ "tools": tools })),
        "tools/call" => call(request, &body(request)["params"]),
        _ => ResponseTemplate::new(400),
    })
}
