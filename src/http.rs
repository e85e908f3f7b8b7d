//! The Streamable HTTP client of one server (MCP 2025-03-26, 2025-06-18, 2025-11-25, "Streamable
//! HTTP" transport).
//!
//! Owns the wire: POSTing JSON-RPC, reading `application/json` and `text/event-stream` replies
//! (SSE framing by [`crate::sse`]; gzip, br and zstd bodies decoded), the session
//! (`Mcp-Session-Id`, `MCP-Protocol-Version`), answering server requests that arrive inside a
//! stream, resuming a stream with `GET` + `Last-Event-ID`, initializing again when the server
//! forgot the session, `notifications/cancelled` when a call is dropped, and the `DELETE` at
//! shutdown.
//!
//! Every byte read is bounded ([`crate::limits`]), and every piece of server text that reaches an
//! [`Error`] is scrubbed of the entry's secrets and cut to a bounded length.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Response, StatusCode, Url};
use serde::Deserialize;

use crate::config::RemoteServer;
use crate::jsonrpc::{self, Kind, RpcError};
use crate::limits::{self, MAX_MESSAGE_BYTES};
use crate::redact::Redactor;
use crate::sse;

/// The protocol version the client offers in `initialize`.
pub(crate) const OFFERED_VERSION: &str = "2025-11-25";

/// The protocol versions the client accepts in a server's `initialize` answer.
pub(crate) const SUPPORTED_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
const ACCEPT_BOTH: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
const ACCEPT_SSE: HeaderValue = HeaderValue::from_static("text/event-stream");
const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// Why a request failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Error {
    /// The server could not be reached, broke the protocol, or did not answer in time. The text
    /// is for a model and holds no secret.
    Transport(String),
    /// The server answered with a JSON-RPC error (its message scrubbed and bounded).
    Rpc(RpcError),
    /// The server answered, but its `result` is not of the expected shape. Unlike a transport
    /// failure, the request is over on the server's side.
    Malformed(String),
    /// The server does not know the session any more (404, or a 400 saying so).
    SessionExpired,
}

impl Error {
    /// The text a status reason or a tool error shows.
    pub(crate) fn message(&self) -> String {
        match self {
            Error::Transport(text) | Error::Malformed(text) => text.clone(),
            Error::Rpc(e) => format!("the server answered with error {}: {}", e.code, e.message),
            Error::SessionExpired => "the server no longer knows this session".to_string(),
        }
    }
}

/// A negotiated session: what every request after `initialize` carries.
struct Session {
    /// The server's `Mcp-Session-Id`, when it gave one.
    id: Option<HeaderValue>,
    /// The negotiated protocol version, for `MCP-Protocol-Version`.
    version: HeaderValue,
    /// Counts initializations, so concurrent requests that all saw the session expire
    /// initialize again only once.
    generation: u64,
}

/// One server's connection: the endpoint, the configured headers, the entry's secrets and the
/// current session, over the Pack's shared [`Clients`].
pub(crate) struct Connection {
    /// The Pack's shared HTTP clients.
    clients: Arc<Clients>,
    url: Url,
    headers: HeaderMap,
    redactor: Redactor,
    namespace: Arc<str>,
    runtime: tokio::runtime::Handle,
    next_id: AtomicU64,
    session: Mutex<Option<Arc<Session>>>,
    reinit: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// The HTTP clients a Pack's servers share, each built on first use: constructing the Pack does
/// no I/O, and the system's certificate store is read once, and only when a server uses https.
/// hyper pools connections per host, so each server still keeps its own warm connections.
///
/// Both refuse redirects, set no overall timeout (the start and call deadlines govern) and turn
/// Nagle off.
#[derive(Default)]
pub(crate) struct Clients {
    plain: std::sync::OnceLock<reqwest::Client>,
    tls: std::sync::OnceLock<reqwest::Client>,
}

impl Clients {
    fn get(&self, https: bool) -> Result<&reqwest::Client, Error> {
        let cell = if https { &self.tls } else { &self.plain };
        if let Some(client) = cell.get() {
            return Ok(client);
        }
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(limits::CONNECT_TIMEOUT)
            .tcp_nodelay(true);
        // A client for http:// URLs never does TLS (redirects are refused), so it skips loading
        // the system's certificate store, which costs milliseconds.
        let builder = if https {
            builder
        } else {
            builder.tls_certs_only(std::iter::empty())
        };
        let client = builder.build().map_err(|e| {
            Error::Transport(format!(
                "the HTTP client could not be built: {}",
                e.without_url()
            ))
        })?;
        Ok(cell.get_or_init(|| client))
    }
}

/// What decoding a response's `result` gives; `Err` is the text of an [`Error::Malformed`].
pub(crate) type Decoded<T> = Result<T, String>;

impl Connection {
    /// A connection to `server` through the Pack's `clients`; does no I/O.
    pub(crate) fn new(
        namespace: Arc<str>,
        server: RemoteServer,
        clients: Arc<Clients>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Self {
            clients,
            url: server.url,
            headers: server.headers,
            redactor: server.redactor,
            namespace,
            runtime,
            next_id: AtomicU64::new(1),
            session: Mutex::new(None),
            reinit: tokio::sync::Mutex::new(()),
        }
    }

    fn http(&self) -> Result<&reqwest::Client, Error> {
        self.clients.get(self.url.scheme() == "https")
    }

    /// The entry's secrets, to scrub server text outside this module.
    pub(crate) fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The namespace, for logs.
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
    }

    fn current_session(&self) -> Option<Arc<Session>> {
        self.session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Runs the handshake: `initialize` (offering [`OFFERED_VERSION`], no capabilities), checks
    /// the version the server chose, keeps its session id, then sends
    /// `notifications/initialized`. Replaces any earlier session.
    ///
    /// # Errors
    /// Any transport failure, a JSON-RPC error, an unsupported version, or a session id that is
    /// not visible ASCII.
    pub(crate) async fn initialize(&self) -> Result<(), Error> {
        #[derive(Deserialize)]
        struct InitializeResult<'a> {
            #[serde(rename = "protocolVersion", borrow)]
            protocol_version: std::borrow::Cow<'a, str>,
        }
        let params = serde_json::json!({
            "protocolVersion": OFFERED_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "plugin-mcp", "version": env!("CARGO_PKG_VERSION")},
        });
        let id = self.next_id();
        let body = jsonrpc::request(id, "initialize", &params);
        let response = self.post(body.into(), None).await?;
        let session_id = match response.headers().get(&SESSION_ID) {
            Some(value) => Some(valid_session_id(value)?),
            None => None,
        };
        let version = self
            .read_response(
                response,
                id,
                None,
                &|result: &serde_json::value::RawValue| -> Decoded<String> {
                    let result: InitializeResult<'_> =
                        serde_json::from_str(result.get()).map_err(|_| {
                            "the server's initialize result has no protocolVersion".to_string()
                        })?;
                    Ok(result.protocol_version.into_owned())
                },
            )
            .await?;
        let Some(version) = SUPPORTED_VERSIONS.iter().find(|v| **v == version.as_str()) else {
            let shown = self.server_text(&version, 64);
            return Err(Error::Transport(format!(
                "the server chose MCP protocol version \"{shown}\", which this client does not support (it supports {})",
                SUPPORTED_VERSIONS.join(", ")
            )));
        };
        let generation = self.current_session().map_or(0, |s| s.generation + 1);
        let session = Arc::new(Session {
            id: session_id,
            version: HeaderValue::from_static(version),
            generation,
        });
        self.notify(
            "notifications/initialized",
            &serde_json::json!({}),
            Some(&session),
        )
        .await?;
        *self.session.lock().unwrap_or_else(|e| e.into_inner()) = Some(session);
        tracing::debug!(namespace = %self.namespace, version, "initialized");
        Ok(())
    }

    /// Sends the request `method` with `params` and decodes its `result` with `decode` while the
    /// received text is still borrowed. When the server has forgotten the session, initializes
    /// again (once, serialized with other requests) and sends the request once more.
    ///
    /// `id` is the JSON-RPC id to use (see [`Connection::next_id`]).
    ///
    /// # Errors
    /// [`Error::Transport`], [`Error::Rpc`] or [`Error::Malformed`]; never
    /// [`Error::SessionExpired`].
    pub(crate) async fn request<T>(
        &self,
        id: u64,
        method: &str,
        params: &impl serde::Serialize,
        decode: impl Fn(&serde_json::value::RawValue) -> Decoded<T>,
    ) -> Result<T, Error> {
        let body = Bytes::from(jsonrpc::request(id, method, params));
        let session = self.current_session();
        match self
            .send_request(body.clone(), id, session.as_deref(), &decode)
            .await
        {
            Err(Error::SessionExpired) => {
                tracing::debug!(namespace = %self.namespace, method, id, "session expired; initializing again");
                self.reinitialize(session.as_deref()).await?;
                let session = self.current_session();
                match self
                    .send_request(body, id, session.as_deref(), &decode)
                    .await
                {
                    Err(Error::SessionExpired) => Err(Error::Transport(
                        "the server rejected the session again right after a new initialize"
                            .to_string(),
                    )),
                    other => other,
                }
            }
            other => other,
        }
    }

    /// A fresh JSON-RPC request id.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    async fn reinitialize(&self, stale: Option<&Session>) -> Result<(), Error> {
        let _serialized = self.reinit.lock().await;
        let current = self.current_session();
        let already_renewed = match (stale, current.as_deref()) {
            (Some(stale), Some(current)) => current.generation != stale.generation,
            _ => false,
        };
        if already_renewed {
            return Ok(());
        }
        self.initialize().await.map_err(|e| {
            Error::Transport(format!(
                "the server forgot the session and initializing again failed: {}",
                e.message()
            ))
        })
    }

    async fn send_request<T>(
        &self,
        body: Bytes,
        id: u64,
        session: Option<&Session>,
        decode: &impl Fn(&serde_json::value::RawValue) -> Decoded<T>,
    ) -> Result<T, Error> {
        let response = self.post(body, session).await?;
        self.read_response(response, id, session, decode).await
    }

    /// POSTs a notification; any 2xx is accepted.
    async fn notify(
        &self,
        method: &str,
        params: &impl serde::Serialize,
        session: Option<&Session>,
    ) -> Result<(), Error> {
        let body = jsonrpc::notification(method, params);
        self.post(body.into(), session).await.map(drop)
    }

    /// Sends `notifications/cancelled` for request `id`, in the background, bounded by
    /// [`limits::GOODBYE_TIMEOUT`].
    pub(crate) fn cancel_in_background(self: &Arc<Self>, id: u64, reason: &'static str) {
        let this = Arc::clone(self);
        self.runtime.spawn(async move {
            let session = this.current_session();
            let params = serde_json::json!({"requestId": id, "reason": reason});
            let sent = tokio::time::timeout(
                limits::GOODBYE_TIMEOUT,
                this.notify("notifications/cancelled", &params, session.as_deref()),
            )
            .await;
            tracing::debug!(namespace = %this.namespace, id, sent = matches!(sent, Ok(Ok(()))), "sent notifications/cancelled");
        });
    }

    /// Ends the session with `DELETE` when there is one, and forgets it; best effort, bounded by
    /// [`limits::GOODBYE_TIMEOUT`]. Any answer is fine.
    pub(crate) async fn close(&self) {
        let Some(session) = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        if session.id.is_none() {
            return;
        }
        let Ok(http) = self.http() else { return };
        let request = self.with_session(http.delete(self.url.clone()), Some(&session));
        let status = tokio::time::timeout(limits::GOODBYE_TIMEOUT, request.send()).await;
        tracing::debug!(
            namespace = %self.namespace,
            status = ?status.ok().and_then(Result::ok).map(|r| r.status().as_u16()),
            "deleted session"
        );
    }

    fn with_session(
        &self,
        request: reqwest::RequestBuilder,
        session: Option<&Session>,
    ) -> reqwest::RequestBuilder {
        let mut request = request.headers(self.headers.clone());
        if let Some(session) = session {
            if let Some(id) = &session.id {
                request = request.header(SESSION_ID, id.clone());
            }
            request = request.header(PROTOCOL_VERSION, session.version.clone());
        }
        request
    }

    /// POSTs one JSON-RPC body and checks the status. Returns the 2xx response.
    async fn post(&self, body: Bytes, session: Option<&Session>) -> Result<Response, Error> {
        let request = self
            .with_session(self.http()?.post(self.url.clone()), session)
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, JSON)
            .body(body);
        let response = request.send().await.map_err(|e| self.http_error(e))?;
        self.check_status(response, session.is_some_and(|s| s.id.is_some()))
            .await
    }

    async fn check_status(&self, response: Response, had_session: bool) -> Result<Response, Error> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        tracing::debug!(namespace = %self.namespace, status = status.as_u16(), "HTTP error status");
        if status.is_redirection() {
            return Err(Error::Transport(format!(
                "the server answered with a redirect (HTTP {}), which this client refuses to follow so that the configured headers reach no other server",
                status.as_u16()
            )));
        }
        if had_session && status == StatusCode::NOT_FOUND {
            return Err(Error::SessionExpired);
        }
        let preview = read_preview(response).await;
        if had_session && status == StatusCode::BAD_REQUEST && mentions_session(&preview) {
            return Err(Error::SessionExpired);
        }
        let preview = self.server_text(&preview, limits::MAX_REASON_BYTES);
        let reason = status.canonical_reason().unwrap_or("");
        Err(Error::Transport(if preview.is_empty() {
            format!("HTTP {} {reason}", status.as_u16())
        } else {
            format!("HTTP {} {reason}: {preview}", status.as_u16())
        }))
    }

    /// Reads the answer to request `id` from a 2xx response: a JSON body, or an SSE stream that
    /// may carry server requests and notifications first, and may need resuming.
    async fn read_response<T>(
        &self,
        response: Response,
        id: u64,
        session: Option<&Session>,
        decode: &impl Fn(&serde_json::value::RawValue) -> Decoded<T>,
    ) -> Result<T, Error> {
        self.check_encoding(&response)?;
        match media_type(&response) {
            Some(MediaType::Json) => {
                let body = read_capped(response)
                    .await
                    .map_err(|e| self.body_error(e))?;
                let text = std::str::from_utf8(&body).map_err(|_| {
                    Error::Transport("the server's JSON reply is not UTF-8".to_string())
                })?;
                let messages =
                    jsonrpc::decode(text).map_err(|e| Error::Transport(e.to_string()))?;
                let mut answer = None;
                for message in &messages {
                    if let Some(found) = self.route(message, id, session, decode).await {
                        answer = Some(found);
                        break;
                    }
                }
                answer.unwrap_or_else(|| {
                    Err(Error::Transport(format!(
                        "the server's JSON reply held no response to request {id}"
                    )))
                })
            }
            Some(MediaType::EventStream) => self.read_stream(response, id, session, decode).await,
            None => {
                let shown = response.headers().get(CONTENT_TYPE).map(|v| {
                    self.server_text(&String::from_utf8_lossy(v.as_bytes()), 100)
                        .into_owned()
                });
                Err(Error::Transport(match shown {
                    Some(ct) => format!(
                        "the server answered with Content-Type \"{ct}\", not application/json or text/event-stream"
                    ),
                    None => "the server answered without a Content-Type (HTTP 2xx with no JSON-RPC response)".to_string(),
                }))
            }
        }
    }

    async fn read_stream<T>(
        &self,
        response: Response,
        id: u64,
        session: Option<&Session>,
        decode: &impl Fn(&serde_json::value::RawValue) -> Decoded<T>,
    ) -> Result<T, Error> {
        let mut events = SseStream::new(response);
        // The last event id each resumption asked with, and how many brought no new one.
        let mut asked: Option<String> = None;
        let mut fruitless = 0;
        loop {
            let event = match events.next().await {
                Some(Ok(event)) => event,
                Some(Err(BodyError::TooLarge)) => return Err(self.body_error(BodyError::TooLarge)),
                Some(Err(BodyError::Utf8)) => {
                    return Err(Error::Transport(
                        "the server's event stream is not UTF-8".to_string(),
                    ));
                }
                end @ (None | Some(Err(BodyError::Http(_)))) => {
                    let last_event_id = events.framer.last_event_id();
                    if asked.as_deref() == Some(last_event_id) {
                        fruitless += 1;
                    }
                    if last_event_id.is_empty() || fruitless == limits::MAX_RESUMPTIONS {
                        let ended = match end {
                            Some(Err(error)) => format!(
                                "the server's event stream broke before the response to request {id}: {}",
                                self.body_error(error).message()
                            ),
                            _ => format!(
                                "the server closed the event stream before the response to request {id}"
                            ),
                        };
                        return Err(Error::Transport(if fruitless == 0 {
                            ended
                        } else {
                            format!(
                                "{ended}; {fruitless} resumptions (GET with Last-Event-ID) brought no new event id"
                            )
                        }));
                    }
                    let retry = events.framer.retry().map_or(limits::DEFAULT_RETRY, |r| {
                        r.clamp(limits::MIN_RETRY, limits::MAX_RETRY)
                    });
                    tracing::debug!(namespace = %self.namespace, id, fruitless, retry_ms = retry.as_millis() as u64, "resuming event stream");
                    let last_event_id = last_event_id.to_string();
                    tokio::time::sleep(retry).await;
                    let resumed = self.resume(&last_event_id, session).await.map_err(|e| {
                        Error::Transport(format!(
                            "resuming the event stream (GET with Last-Event-ID) failed: {}",
                            e.message()
                        ))
                    })?;
                    asked = Some(last_event_id);
                    events.resume(resumed);
                    continue;
                }
            };
            if event.data.is_empty() || event.event != "message" {
                continue;
            }
            let Ok(text) = event.text() else {
                return Err(Error::Transport(
                    "the server's event stream is not UTF-8".to_string(),
                ));
            };
            let messages = match jsonrpc::decode(text) {
                Ok(messages) => messages,
                Err(_) => {
                    tracing::debug!(namespace = %self.namespace, id, "skipped an event that is not JSON-RPC");
                    continue;
                }
            };
            for message in &messages {
                if let Some(answer) = self.route(message, id, session, decode).await {
                    return answer;
                }
            }
        }
    }

    /// Resumes a stream: `GET` with `Last-Event-ID`.
    async fn resume(
        &self,
        last_event_id: &str,
        session: Option<&Session>,
    ) -> Result<Response, Error> {
        if last_event_id.len() > limits::MAX_EVENT_ID_BYTES {
            return Err(Error::Transport(format!(
                "the server's SSE event id is longer than {} bytes",
                limits::MAX_EVENT_ID_BYTES
            )));
        }
        let last = HeaderValue::from_str(last_event_id).map_err(|_| {
            Error::Transport("the server's SSE event id is not a valid header value".to_string())
        })?;
        let request = self
            .with_session(self.http()?.get(self.url.clone()), session)
            .header(ACCEPT, ACCEPT_SSE)
            .header(LAST_EVENT_ID, last);
        let response = request.send().await.map_err(|e| self.http_error(e))?;
        let response = self
            .check_status(response, session.is_some_and(|s| s.id.is_some()))
            .await?;
        self.check_encoding(&response)?;
        match media_type(&response) {
            Some(MediaType::EventStream) => Ok(response),
            _ => Err(Error::Transport(
                "the server answered the stream resumption without an event stream".to_string(),
            )),
        }
    }

    /// Refuses a body in a `Content-Encoding` the client did not decode. The HTTP client decodes
    /// gzip, br and zstd (it offers them in `Accept-Encoding`) and drops the header when it does,
    /// so any value left other than `identity` is one it cannot read.
    fn check_encoding(&self, response: &Response) -> Result<(), Error> {
        match response.headers().get(CONTENT_ENCODING) {
            Some(value) if !value.as_bytes().eq_ignore_ascii_case(b"identity") => {
                let value = String::from_utf8_lossy(value.as_bytes());
                let shown = self.server_text(&value, 64);
                Err(Error::Transport(format!(
                    "the server answered with Content-Encoding \"{shown}\", which this client cannot decode (it accepts gzip, br and zstd)"
                )))
            }
            _ => Ok(()),
        }
    }

    /// Handles one incoming message. Returns the answer when it is the response to `id`.
    async fn route<T>(
        &self,
        message: &jsonrpc::Incoming<'_>,
        id: u64,
        session: Option<&Session>,
        decode: &impl Fn(&serde_json::value::RawValue) -> Decoded<T>,
    ) -> Option<Result<T, Error>> {
        match message.kind() {
            Kind::Response(rid, outcome) if jsonrpc::id_matches(rid, id) => Some(match outcome {
                Ok(result) => decode(result).map_err(Error::Malformed),
                Err(error) => Err(Error::Rpc(RpcError {
                    code: error.code,
                    message: self
                        .server_text(&error.message, limits::MAX_REASON_BYTES)
                        .into_owned(),
                })),
            }),
            Kind::Response(..) => {
                tracing::trace!(namespace = %self.namespace, id, "ignored a response to another request");
                None
            }
            Kind::Request(rid, method) => {
                tracing::debug!(namespace = %self.namespace, id, ping = method == "ping", "answering a server request");
                let answer = jsonrpc::answer_server_request(rid, method);
                if let Err(e) = self.post(answer.into(), session).await {
                    tracing::debug!(namespace = %self.namespace, error = %e.message(), "answering a server request failed");
                }
                None
            }
            Kind::Notification(method) => {
                tracing::trace!(namespace = %self.namespace, id, notification = %self.server_text(method, 64), "ignored a server notification");
                None
            }
            Kind::Invalid => {
                tracing::trace!(namespace = %self.namespace, id, "ignored a message that is not JSON-RPC");
                None
            }
        }
    }

    /// Server text fit for a reason: scrubbed of secrets, single-line, bounded.
    pub(crate) fn server_text<'a>(&self, text: &'a str, max: usize) -> std::borrow::Cow<'a, str> {
        let scrubbed = self.redactor.scrub(text);
        let clean = if scrubbed.chars().any(char::is_control) {
            scrubbed
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect::<String>()
                .into()
        } else {
            scrubbed
        };
        match limits::truncate(&clean, max) {
            std::borrow::Cow::Borrowed(_) => clean,
            std::borrow::Cow::Owned(cut) => cut.into(),
        }
    }

    fn http_error(&self, error: reqwest::Error) -> Error {
        let error = error.without_url();
        let mut text = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        Error::Transport(
            self.server_text(&text, limits::MAX_REASON_BYTES)
                .into_owned(),
        )
    }

    fn body_error(&self, error: BodyError) -> Error {
        match error {
            BodyError::Http(e) => self.http_error(e),
            BodyError::TooLarge => Error::Transport(format!(
                "the server sent a message larger than the {} MiB limit",
                MAX_MESSAGE_BYTES / (1024 * 1024)
            )),
            BodyError::Utf8 => Error::Transport("the server's reply is not UTF-8".to_string()),
        }
    }
}

fn valid_session_id(value: &HeaderValue) -> Result<HeaderValue, Error> {
    let bytes = value.as_bytes();
    if bytes.is_empty()
        || bytes.len() > limits::MAX_SESSION_ID_BYTES
        || !bytes.iter().all(|b| (0x21..=0x7e).contains(b))
    {
        return Err(Error::Transport(format!(
            "the server's Mcp-Session-Id is not 1 to {} visible ASCII characters",
            limits::MAX_SESSION_ID_BYTES
        )));
    }
    Ok(value.clone())
}

/// Whether an error body is a server saying the session is missing or unknown.
fn mentions_session(preview: &str) -> bool {
    preview.to_ascii_lowercase().contains("session")
}

enum MediaType {
    Json,
    EventStream,
}

fn media_type(response: &Response) -> Option<MediaType> {
    let value = response.headers().get(CONTENT_TYPE)?.to_str().ok()?;
    let essence = value.split(';').next()?.trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Some(MediaType::Json)
    } else if essence.eq_ignore_ascii_case("text/event-stream") {
        Some(MediaType::EventStream)
    } else {
        None
    }
}

/// Why reading a body failed.
enum BodyError {
    Http(reqwest::Error),
    TooLarge,
    Utf8,
}

/// Reads a whole JSON body, refusing it as soon as it passes [`MAX_MESSAGE_BYTES`].
async fn read_capped(response: Response) -> Result<Vec<u8>, BodyError> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_MESSAGE_BYTES as u64)
    {
        return Err(BodyError::TooLarge);
    }
    let capacity = response.content_length().unwrap_or(0) as usize;
    let mut body = Vec::with_capacity(capacity);
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(BodyError::Http)?;
        if body.len() + chunk.len() > MAX_MESSAGE_BYTES {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Reads at most [`limits::ERROR_PREVIEW_BYTES`] of an error body, cut on a char boundary.
async fn read_preview(response: Response) -> String {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while body.len() < limits::ERROR_PREVIEW_BYTES {
        match chunks.next().await {
            Some(Ok(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(limits::ERROR_PREVIEW_BYTES);
    match String::from_utf8(body) {
        Ok(text) => text,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut body = e.into_bytes();
            body.truncate(valid);
            String::from_utf8(body).unwrap_or_default()
        }
    }
}

/// The SSE events of a response, framed by [`sse::Framer`] (each event bounded by
/// [`MAX_MESSAGE_BYTES`] while it is read). A resumed stream goes on with the same framer, so the
/// last event id and the server's `retry` carry over.
struct SseStream {
    response: Response,
    framer: sse::Framer,
}

impl SseStream {
    fn new(response: Response) -> Self {
        Self {
            response,
            framer: sse::Framer::new(),
        }
    }

    /// Continues with `response`, the stream of a resumption.
    fn resume(&mut self, response: Response) {
        self.response = response;
        self.framer.restart();
    }

    /// The next event; `None` when the body ended.
    ///
    /// # Cancel safety
    /// Cancel safe: a chunk is handed to the framer as soon as it is read, so dropping this
    /// future loses no bytes.
    async fn next(&mut self) -> Option<Result<sse::Event, BodyError>> {
        loop {
            match self.framer.next() {
                Ok(Some(event)) => return Some(Ok(event)),
                Ok(None) => {}
                Err(sse::SseError::TooLarge) => return Some(Err(BodyError::TooLarge)),
                Err(sse::SseError::Utf8) => return Some(Err(BodyError::Utf8)),
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.framer.feed(chunk),
                Ok(None) => return None,
                Err(e) => return Some(Err(BodyError::Http(e))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_must_be_visible_ascii() {
        let ok = HeaderValue::from_static("abc-123_XYZ");
        assert_eq!(valid_session_id(&ok).unwrap(), ok);
        for bad in ["has space", ""] {
            let value = HeaderValue::from_str(bad).unwrap();
            assert_eq!(
                valid_session_id(&value),
                Err(Error::Transport(
                    "the server's Mcp-Session-Id is not 1 to 1024 visible ASCII characters".into()
                ))
            );
        }
        let long = HeaderValue::from_str(&"a".repeat(1025)).unwrap();
        assert!(valid_session_id(&long).is_err());
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            Error::Rpc(RpcError {
                code: -32602,
                message: "bad".into()
            })
            .message(),
            "the server answered with error -32602: bad"
        );
        assert_eq!(Error::Transport("x".into()).message(), "x");
    }
}
