//! The Streamable HTTP client of one server (MCP 2025-03-26, 2025-06-18, 2025-11-25; DESIGN §5).
//!
//! Owns the wire: POSTing JSON-RPC, reading `application/json` and `text/event-stream` replies
//! (SSE framing by `eventsource-stream2`), the session (`Mcp-Session-Id`,
//! `MCP-Protocol-Version`), answering server requests that arrive inside a stream, resuming a
//! stream with `GET` + `Last-Event-ID`, the standalone `GET` stream ([`Connection::listen`]),
//! initializing again when the server forgot the session, handing notifications to
//! [`crate::notices`], `notifications/cancelled` when a call is dropped, and the `DELETE` at
//! shutdown.
//!
//! Every byte read is bounded ([`crate::limits`]), and every piece of server text that reaches an
//! [`Error`] is scrubbed of the entry's secrets and cut to a bounded length.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use eventsource_stream2::{Event, EventStream};
use futures_util::{Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Response, StatusCode, Url};
use serde::Deserialize;

use crate::config::RemoteServer;
use crate::jsonrpc::{self, Kind, RpcError};
use crate::limits::{self, MAX_MESSAGE_BYTES};
use crate::notices::{self, Signals};
use crate::redact::Redactor;

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
    /// The server's `instructions`, scrubbed and cut to [`limits::MAX_INSTRUCTIONS_BYTES`].
    instructions: Option<Arc<str>>,
    /// Whether the server declared `capabilities.tools.listChanged: true`.
    tools_list_changed: bool,
}

/// What the server's task needs to know of the current session.
pub(crate) struct SessionInfo {
    /// Counts initializations; a new value is a new session.
    pub(crate) generation: u64,
    /// The server's `instructions`, scrubbed and bounded.
    pub(crate) instructions: Option<Arc<str>>,
    /// Whether the server declared `capabilities.tools.listChanged: true`.
    pub(crate) tools_list_changed: bool,
}

/// How a standalone `GET` stream ended without an error.
#[derive(Debug, PartialEq)]
pub(crate) enum Listened {
    /// The server answered 405: it offers no standalone stream for this session.
    NotOffered,
    /// There is no session (none yet, or it was just forgotten).
    NoSession,
    /// The server ended the stream.
    Ended,
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
    /// What notifications and re-initializations tell the server's task.
    signals: Signals,
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
            signals: Signals::default(),
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

    /// The signals notifications and re-initializations raise for the server's task.
    pub(crate) fn signals(&self) -> &Signals {
        &self.signals
    }

    /// The current session's generation, instructions and `listChanged`; `None` before the
    /// first `initialize` and after [`Connection::close`].
    pub(crate) fn session_info(&self) -> Option<SessionInfo> {
        self.current_session().map(|s| SessionInfo {
            generation: s.generation,
            instructions: s.instructions.clone(),
            tools_list_changed: s.tools_list_changed,
        })
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
        // Only protocolVersion is required; the optional fields are read one by one, and one
        // of an unexpected type counts as absent.
        #[derive(Deserialize)]
        struct InitializeResult<'a> {
            #[serde(rename = "protocolVersion", borrow)]
            protocol_version: std::borrow::Cow<'a, str>,
            #[serde(borrow, default)]
            instructions: Option<&'a serde_json::value::RawValue>,
            #[serde(borrow, default)]
            capabilities: Option<&'a serde_json::value::RawValue>,
        }
        #[derive(Deserialize)]
        struct Capabilities<'a> {
            #[serde(borrow, default)]
            tools: Option<&'a serde_json::value::RawValue>,
        }
        #[derive(Deserialize)]
        struct ToolsCapability<'a> {
            #[serde(rename = "listChanged", borrow, default)]
            list_changed: Option<&'a serde_json::value::RawValue>,
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
        let (version, instructions, tools_list_changed) = self
            .read_response(
                response,
                id,
                None,
                &|result: &serde_json::value::RawValue| -> Decoded<(String, Option<Arc<str>>, bool)> {
                    let result: InitializeResult<'_> =
                        serde_json::from_str(result.get()).map_err(|_| {
                            "the server's initialize result has no protocolVersion".to_string()
                        })?;
                    let instructions: Option<std::borrow::Cow<'_, str>> =
                        jsonrpc::optional(&self.namespace, "instructions", result.instructions);
                    let instructions = instructions
                        .filter(|text| !text.trim().is_empty())
                        .map(|text| {
                            let scrubbed = self.redactor.scrub(&text);
                            Arc::from(limits::truncate(&scrubbed, limits::MAX_INSTRUCTIONS_BYTES).as_ref())
                        });
                    let capabilities: Option<Capabilities<'_>> =
                        jsonrpc::optional(&self.namespace, "capabilities", result.capabilities);
                    let tools: Option<ToolsCapability<'_>> =
                        jsonrpc::optional(&self.namespace, "capabilities.tools", capabilities.and_then(|c| c.tools));
                    let list_changed: Option<bool> = jsonrpc::optional(
                        &self.namespace,
                        "capabilities.tools.listChanged",
                        tools.and_then(|t| t.list_changed),
                    );
                    let list_changed = list_changed.unwrap_or(false);
                    Ok((result.protocol_version.into_owned(), instructions, list_changed))
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
            instructions,
            tools_list_changed,
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
                // A listing goes on in the new session: its renewal asks for no re-listing.
                let by_listing = method == "tools/list";
                self.reinitialize(session.as_deref().map(|s| s.generation), by_listing)
                    .await?;
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

    /// Initializes a new session because the server forgot the one of generation `stale`
    /// (the standalone stream's 404), unless another request already did.
    ///
    /// # Errors
    /// [`Error::Transport`] when the new `initialize` fails.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped midway, the session may be left half-replaced until the next
    /// request initializes again.
    pub(crate) async fn renew(&self, stale: u64) -> Result<(), Error> {
        self.reinitialize(Some(stale), false).await
    }

    /// `by_listing`: a `tools/list` request met the forgotten session (see
    /// [`Signals::session_renewed`]).
    async fn reinitialize(&self, stale: Option<u64>, by_listing: bool) -> Result<(), Error> {
        let _serialized = self.reinit.lock().await;
        let current = self.current_session();
        let already_renewed = match (stale, current.as_deref()) {
            (Some(stale), Some(current)) => current.generation != stale,
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
        })?;
        self.signals.session_renewed(by_listing);
        Ok(())
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
        let mut last_event_id = String::new();
        let mut retry = limits::DEFAULT_RETRY;
        let mut resumptions = 0;
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
                    if last_event_id.is_empty() || resumptions == limits::MAX_RESUMPTIONS {
                        return Err(Error::Transport(match end {
                            Some(Err(error)) => format!(
                                "the server's event stream broke before the response to request {id}: {}",
                                self.body_error(error).message()
                            ),
                            _ => format!(
                                "the server closed the event stream before the response to request {id}"
                            ),
                        }));
                    }
                    resumptions += 1;
                    tracing::debug!(namespace = %self.namespace, id, resumptions, retry_ms = retry.as_millis() as u64, "resuming event stream");
                    tokio::time::sleep(retry).await;
                    let resumed = self.resume(&last_event_id, session).await.map_err(|e| {
                        Error::Transport(format!(
                            "resuming the event stream (GET with Last-Event-ID) failed: {}",
                            e.message()
                        ))
                    })?;
                    events = SseStream::new(resumed);
                    continue;
                }
            };
            if !event.id.is_empty() {
                last_event_id.clone_from(&event.id);
            }
            if let Some(wait) = event.retry {
                retry = wait.min(limits::MAX_RETRY);
            }
            if event.data.is_empty() || event.event != "message" {
                continue;
            }
            let messages = match jsonrpc::decode(&event.data) {
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
        match media_type(&response) {
            Some(MediaType::EventStream) => Ok(response),
            _ => Err(Error::Transport(
                "the server answered the stream resumption without an event stream".to_string(),
            )),
        }
    }

    /// Opens the standalone `GET` stream of the current session (MCP 2025-11-25, transports,
    /// "Listening for Messages from the Server": `Accept: text/event-stream`, the session
    /// headers, and `Last-Event-ID` when `last_event_id` is not empty) and reads it until it
    /// ends. Server requests on it are answered and notifications handled like on any stream;
    /// each event is bounded by [`MAX_MESSAGE_BYTES`]; responses are ignored. Once the stream is
    /// open it asks for one re-listing ([`Signals::stream_opened`]). `last_event_id`
    /// is updated with each event id the server sends (ids over
    /// [`limits::MAX_EVENT_ID_BYTES`] are not kept).
    ///
    /// # Errors
    /// A transport failure, an HTTP error status (404 on a session: [`Error::SessionExpired`]),
    /// or a 2xx answer that is not an event stream.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future closes the stream; `last_event_id` holds the last id
    /// received.
    pub(crate) async fn listen(&self, last_event_id: &mut String) -> Result<Listened, Error> {
        let Some(session) = self.current_session() else {
            return Ok(Listened::NoSession);
        };
        let mut request = self
            .with_session(self.http()?.get(self.url.clone()), Some(&session))
            .header(ACCEPT, ACCEPT_SSE);
        if !last_event_id.is_empty() {
            if let Ok(last) = HeaderValue::from_str(last_event_id) {
                request = request.header(LAST_EVENT_ID, last);
            }
        }
        let response = request.send().await.map_err(|e| self.http_error(e))?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(Listened::NotOffered);
        }
        let response = self.check_status(response, session.id.is_some()).await?;
        if !matches!(media_type(&response), Some(MediaType::EventStream)) {
            return Err(Error::Transport(
                "the server answered the standalone GET without an event stream".to_string(),
            ));
        }
        tracing::debug!(namespace = %self.namespace, "standalone stream open");
        self.signals.stream_opened();
        let mut events = SseStream::new(response);
        // Request ids start at 1: a response to id 0 is one nobody waits for.
        let ignore = |_: &serde_json::value::RawValue| -> Decoded<()> { Ok(()) };
        loop {
            let event = match events.next().await {
                None => return Ok(Listened::Ended),
                Some(Ok(event)) => event,
                Some(Err(error)) => return Err(self.body_error(error)),
            };
            if !event.id.is_empty() && event.id.len() <= limits::MAX_EVENT_ID_BYTES {
                last_event_id.clone_from(&event.id);
            }
            if event.data.is_empty() || event.event != "message" {
                continue;
            }
            let Ok(messages) = jsonrpc::decode(&event.data) else {
                tracing::debug!(namespace = %self.namespace, "skipped an event that is not JSON-RPC");
                continue;
            };
            for message in &messages {
                let _ = self.route(message, 0, Some(&session), &ignore).await;
            }
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
                notices::handle(self, method, message.params);
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

/// The SSE events of a response, each bounded by [`MAX_MESSAGE_BYTES`] while it is read.
struct SseStream {
    events: std::pin::Pin<
        Box<
            dyn Stream<Item = Result<Event, eventsource_stream2::EventStreamError<BodyError>>>
                + Send,
        >,
    >,
    unread: Arc<AtomicU64>,
}

impl SseStream {
    fn new(response: Response) -> Self {
        let unread = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&unread);
        let bytes = response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(BodyError::Http)?;
            let pending =
                counter.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64;
            if pending > MAX_MESSAGE_BYTES as u64 {
                return Err(BodyError::TooLarge);
            }
            Ok(chunk)
        });
        Self {
            events: Box::pin(EventStream::new(bytes)),
            unread,
        }
    }

    async fn next(&mut self) -> Option<Result<Event, BodyError>> {
        let item = self.events.next().await?;
        Some(match item {
            Ok(event) => {
                self.unread.store(0, Ordering::Relaxed);
                Ok(event)
            }
            Err(e) if e.is_utf8() => Err(BodyError::Utf8),
            Err(e) => Err(e.into_transport().unwrap_or(BodyError::Utf8)),
        })
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
