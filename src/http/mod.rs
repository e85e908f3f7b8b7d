//! The Streamable HTTP client of one server (MCP 2025-03-26, 2025-06-18, 2025-11-25;
//! transports: Streamable HTTP).
//!
//! [`Connection`] is the facade the rest of the crate uses: [`Connection::request`],
//! [`Connection::cancel`], [`Connection::initialize`], [`Connection::abandon`] and
//! [`Connection::close`]. Behind it, one module per concept:
//!
//! - `error`: the typed [`Error`] every exchange returns;
//! - `client`: the [`Clients`] a Pack's servers share;
//! - `session`: the session, the handshake, the single-flight re-initialize task, `DELETE`;
//! - `inflight`: which requests may be running on the server, and on which session;
//! - `reply`: reading a reply (status, JSON, SSE), routing messages, resumption;
//! - `events`: the seam between a body and SSE framing.

mod client;
mod error;
mod events;
mod inflight;
mod reply;
mod session;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Response, Url};
use serde_json::value::RawValue;
use tokio_util::task::TaskTracker;

pub(crate) use client::Clients;
pub(crate) use error::Error;
#[allow(unused_imports)] // Named by tests and docs; the version list is the crate's contract.
pub(crate) use session::{OFFERED_VERSION, SUPPORTED_VERSIONS};

use crate::config::RemoteServer;
use crate::jsonrpc;
use crate::limits;
use crate::redact::Redactor;
use inflight::InFlight;
use session::{Session, Sessions};

const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
const ACCEPT_BOTH: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
const ACCEPT_SSE: HeaderValue = HeaderValue::from_static("text/event-stream");
const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// What decoding a response's `result` gives; `Err` is the text of a malformed answer.
pub(crate) type Decoded<T> = Result<T, String>;

/// One server's connection: the endpoint, the configured headers, the entry's secrets, the
/// session state and the in-flight table, over the Pack's shared [`Clients`]. All its I/O runs
/// on the Host's runtime.
pub(crate) struct Connection {
    /// The Pack's shared HTTP clients.
    clients: Arc<Clients>,
    url: Url,
    /// `scheme://host:port` of `url` when that part holds no secret, for connect errors; when
    /// `None`, a redirect target on the same host shows `[redacted]` for it.
    origin: Option<String>,
    /// Added to the reason of a 401/403 (see [`RemoteServer::auth_hint`]).
    auth_hint: Option<String>,
    headers: HeaderMap,
    redactor: Redactor,
    namespace: Arc<str>,
    runtime: tokio::runtime::Handle,
    next_id: AtomicU64,
    sessions: Mutex<Sessions>,
    flights: Mutex<InFlight>,
    /// The `notifications/cancelled` of dropped calls on their way; awaited before a `DELETE`.
    cancels: TaskTracker,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// Locks a mutex whose data stays consistent even if a holder panicked.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

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
            origin: server.origin,
            auth_hint: server.auth_hint,
            headers: server.headers,
            redactor: server.redactor,
            namespace,
            runtime,
            next_id: AtomicU64::new(1),
            sessions: Mutex::default(),
            flights: Mutex::default(),
            cancels: TaskTracker::new(),
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

    /// The Host's runtime, where every exchange of this connection runs.
    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    /// A fresh JSON-RPC request id.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends the request `method` with `params` as JSON-RPC id `id` (see
    /// [`Connection::next_id`]) and decodes its `result` with `decode` while the received text
    /// is still borrowed.
    ///
    /// The request is in the in-flight table from before it is sent until it is over: answered,
    /// refused, or never sent. When the server forgot the session it went out on, the request
    /// waits for the shared re-initialize and is sent once more on the new session.
    ///
    /// # Errors
    /// Any [`Error`]; an expired session only as "rejected again" after a resend.
    ///
    /// # Cancel safety
    /// Not cancel safe: when dropped (or when it fails with [`Error::may_be_running`]), the
    /// request stays in the in-flight table, and the caller must call [`Connection::cancel`]
    /// (or end the sessions) to tell the server.
    pub(crate) async fn request<T>(
        self: &Arc<Self>,
        id: u64,
        method: &str,
        params: &impl serde::Serialize,
        decode: impl Fn(&RawValue) -> Decoded<T>,
    ) -> Result<T, Error> {
        let body = Bytes::from(jsonrpc::request(id, method, params));
        if !lock(&self.flights).begin(id) {
            return Err(Error::closed());
        }
        let outcome = self.exchange(id, method, body, &decode).await;
        let over = match &outcome {
            Ok(_) => true,
            Err(e) => !e.may_be_running(),
        };
        if over {
            lock(&self.flights).finish(id);
        }
        outcome
    }

    /// Sends and reads, resending once after an expired session; see [`Connection::request`]
    /// (same cancel safety).
    async fn exchange<T>(
        self: &Arc<Self>,
        id: u64,
        method: &str,
        body: Bytes,
        decode: &impl Fn(&RawValue) -> Decoded<T>,
    ) -> Result<T, Error> {
        let mut session = self.session(None).await?;
        let mut resent = false;
        loop {
            if !lock(&self.flights).sent(id, &session) {
                // Cancelled (or shut down) while waiting for a session.
                return Err(Error::closed());
            }
            let response = match self.post(body.clone(), Some(&session)).await {
                Ok(response) => response,
                Err(e) if e.is_session_expired() => {
                    lock(&self.flights).waiting(id);
                    if resent {
                        return Err(Error::expired_again());
                    }
                    resent = true;
                    tracing::debug!(namespace = %self.namespace, method, id, "session expired; initializing again");
                    session = self.session(Some(&session)).await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            return self.read_response(response, id, &session, decode).await;
        }
    }

    /// Tells the server to stop request `id` (`notifications/cancelled` with `reason`, MCP
    /// 2025-11-25, cancellation) when it may still be running: only when the in-flight table
    /// holds it as sent, and on the session it went out on. Sent in the background on the
    /// Host's runtime, bounded by [`limits::GOODBYE_TIMEOUT`]; a later [`Connection::close`]
    /// waits for it before any `DELETE`. At most one cancel per request, whoever asks.
    pub(crate) fn cancel(self: &Arc<Self>, id: u64, reason: &'static str) {
        let mut flights = lock(&self.flights);
        let Some(session) = flights.take(id) else {
            return;
        };
        if session.is_deleted() {
            return;
        }
        tracing::debug!(namespace = %self.namespace, id, reason, "cancelling a request");
        let this = Arc::clone(self);
        // Spawned while the table is locked, so that a close that drains the table next also
        // waits for this cancel before its DELETE.
        self.cancels.spawn_on(
            async move {
                let sent = tokio::time::timeout(
                    limits::GOODBYE_TIMEOUT,
                    this.send_cancel(id, &session, reason),
                )
                .await;
                tracing::debug!(namespace = %this.namespace, id, sent = matches!(sent, Ok(Ok(()))), "sent notifications/cancelled");
            },
            &self.runtime,
        );
        drop(flights);
    }

    async fn send_cancel(&self, id: u64, session: &Session, reason: &str) -> Result<(), Error> {
        let params = serde_json::json!({"requestId": id, "reason": reason});
        self.notify("notifications/cancelled", &params, Some(session))
            .await
    }

    /// POSTs a notification; any 2xx is accepted.
    async fn notify(
        &self,
        method: &str,
        params: &impl serde::Serialize,
        session: Option<&Session>,
    ) -> Result<(), Error> {
        let body = jsonrpc::notification(method, params);
        self.post(Bytes::from(body), session).await.map(drop)
    }

    /// The configured headers, and the session's id and negotiated version when it has them.
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
            if let Some(version) = session.version() {
                request = request.header(PROTOCOL_VERSION, version.clone());
            }
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
        Error::from_reqwest(error, self.origin.as_deref())
    }
}
