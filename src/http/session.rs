//! Sessions (MCP 2025-11-25, lifecycle and transports: session management): the handshake, the
//! session every request after it carries, the single-flight task that initializes again when
//! the server forgot the session, and the `DELETE` that ends a session.
//!
//! What a reader of the state sees:
//! - `current` is the session new requests go out on; `None` before the first handshake, after
//!   the server forgot it, and after the connection ended its sessions.
//! - `owned` holds every session id a response header gave us that we have not deleted and the
//!   server has not forgotten — from the moment the header arrived, before the handshake
//!   finished. Ending the sessions (a failed start, the Pack's drop) deletes each of them, so no
//!   session the server issued is left behind, however a handshake was interrupted.
//! - `renewal` is the one running (re-)initialize task, spawned on the Host's runtime. Every
//!   request that finds no current session awaits the same task, so concurrent requests that saw
//!   the same expiry cause one `initialize`; a caller that gives up leaves the task running to
//!   completion, and the session it makes is owned like any other.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::HeaderValue;
use serde::Deserialize;
use tokio::sync::watch;

use super::{Connection, Decoded, Error, SESSION_ID, lock};
use crate::jsonrpc;
use crate::limits;

/// The protocol version the client offers in `initialize`.
pub(crate) const OFFERED_VERSION: &str = "2025-11-25";

/// The protocol versions the client accepts in a server's `initialize` answer. A server on
/// `2024-11-05` that speaks Streamable HTTP is spoken to like one on `2025-03-26` (as the
/// official TypeScript and Python clients do); its version is still the one the
/// `MCP-Protocol-Version` header carries.
pub(crate) const SUPPORTED_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// What a server's `initialize` result declared that the Pack uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Initialized {
    /// Whether `capabilities` has `tools` (MCP spec, "Tools": capabilities). Without it the
    /// server is still asked for `tools/list` once, and a JSON-RPC error means it has no tools.
    pub(crate) tools: bool,
}

impl Initialized {
    fn read(capabilities: Option<&serde_json::value::RawValue>) -> Self {
        #[derive(Deserialize)]
        struct ServerCapabilities {
            #[serde(default)]
            tools: Option<serde::de::IgnoredAny>,
        }
        let tools = capabilities
            .and_then(|raw| serde_json::from_str::<ServerCapabilities>(raw.get()).ok())
            .is_some_and(|c| c.tools.is_some());
        Self { tools }
    }
}

/// One session: what every request after `initialize` carries.
pub(crate) struct Session {
    /// The server's `Mcp-Session-Id`, when it gave one.
    pub(super) id: Option<HeaderValue>,
    /// The negotiated protocol version, for `MCP-Protocol-Version`; unset until the server's
    /// `initialize` answer was read and accepted.
    version: OnceLock<HeaderValue>,
    /// Set once the client sent the `DELETE` for it.
    deleted: AtomicBool,
}

impl Session {
    fn new(id: Option<HeaderValue>) -> Self {
        Self {
            id,
            version: OnceLock::new(),
            deleted: AtomicBool::new(false),
        }
    }

    /// The negotiated version, once there is one.
    pub(super) fn version(&self) -> Option<&HeaderValue> {
        self.version.get()
    }

    /// Whether the client already deleted it.
    pub(super) fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }
}

/// What a renewal ends with, shared with every waiter.
type Outcome = Option<Result<Arc<Session>, Arc<Error>>>;

/// The running (re-)initialize task.
struct Renewal {
    outcome: watch::Receiver<Outcome>,
    task: tokio::task::JoinHandle<()>,
}

/// A connection's session state; see the module docs.
#[derive(Default)]
pub(super) struct Sessions {
    current: Option<Arc<Session>>,
    owned: Vec<Arc<Session>>,
    renewal: Option<Renewal>,
    /// Set at shutdown: no session is made or handed out any more.
    closed: bool,
}

impl Connection {
    /// Runs the handshake and makes its session the current one: `initialize` (offering
    /// [`OFFERED_VERSION`], no capabilities), the version check, then
    /// `notifications/initialized`. Returns what the server declared that the Pack uses.
    ///
    /// # Errors
    /// Any transport failure, a JSON-RPC error, an unsupported version, a session id that is
    /// not visible ASCII. A session the failed handshake got is deleted before the error returns.
    ///
    /// # Cancel safety
    /// Dropping it may leave a session id the server gave in the owned set; the caller ends it
    /// with [`Connection::abandon`] or [`Connection::close`], which delete it.
    pub(crate) async fn initialize(&self) -> Result<Initialized, Error> {
        let (session, initialized) = self.handshake().await?;
        let mut state = lock(&self.sessions);
        if state.closed {
            return Err(Error::closed());
        }
        state.current = Some(session);
        Ok(initialized)
    }

    /// The session a request goes out on: the current one, or the outcome of the renewal task
    /// (spawned when none runs). `stale` is a session the server just said it does not know:
    /// it is forgotten first, unless a newer one already replaced it.
    ///
    /// # Errors
    /// The renewal failed ([`Error::reinitialize`]) or the connection is closed.
    ///
    /// # Cancel safety
    /// Cancel safe: the renewal runs in its own task and finishes without the caller.
    pub(super) async fn session(
        self: &Arc<Self>,
        stale: Option<&Arc<Session>>,
    ) -> Result<Arc<Session>, Error> {
        let mut outcome = {
            let mut state = lock(&self.sessions);
            if state.closed {
                return Err(Error::closed());
            }
            if let Some(stale) = stale {
                if state
                    .current
                    .as_ref()
                    .is_some_and(|c| Arc::ptr_eq(c, stale))
                {
                    state.current = None;
                }
                // The server forgot it: there is nothing left to delete.
                state.owned.retain(|s| !Arc::ptr_eq(s, stale));
            }
            if let Some(current) = &state.current {
                return Ok(Arc::clone(current));
            }
            match &state.renewal {
                Some(renewal) => renewal.outcome.clone(),
                None => self.spawn_renewal(&mut state),
            }
        };
        let done = outcome
            .wait_for(Option::is_some)
            .await
            .map_err(|_| Error::closed())?;
        let outcome = done.clone().ok_or_else(Error::closed)?;
        outcome.map_err(|cause| {
            if cause.is_closed() {
                Error::closed()
            } else {
                Error::reinitialize(cause)
            }
        })
    }

    /// Spawns the renewal task on the Host's runtime; called with the state locked.
    fn spawn_renewal(self: &Arc<Self>, state: &mut Sessions) -> watch::Receiver<Outcome> {
        tracing::debug!(namespace = %self.namespace, "initializing again");
        let (done, outcome) = watch::channel(None);
        let this = Arc::clone(self);
        let task = self.runtime.spawn(async move {
            let made = this.renew().await;
            {
                let mut state = lock(&this.sessions);
                state.renewal = None;
                if let Ok(session) = &made {
                    if !state.closed {
                        state.current = Some(Arc::clone(session));
                    }
                }
            }
            let _ = done.send(Some(made.map_err(Arc::new)));
        });
        state.renewal = Some(Renewal {
            outcome: outcome.clone(),
            task,
        });
        outcome
    }

    /// The handshake, tried again after a 404 or a refused connection (a server that is
    /// restarting) 100 ms, 200 ms … later ([`limits::REINIT_RETRY_FIRST`],
    /// [`limits::REINIT_RETRIES`] times), all within [`limits::START_DEADLINE`]. No retry once
    /// the connection is closed.
    ///
    /// # Cancel safety
    /// As [`Connection::handshake`]: it runs only inside the renewal task, which
    /// [`Connection::close`] lets finish before it deletes the owned sessions.
    async fn renew(&self) -> Result<Arc<Session>, Error> {
        let backoff = ExponentialBuilder::new()
            .with_min_delay(limits::REINIT_RETRY_FIRST)
            .with_factor(2.0)
            .with_max_times(limits::REINIT_RETRIES);
        let attempts = (|| async { self.handshake().await.map(|(session, _)| session) })
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .when(|e: &Error| {
                (e.status() == Some(StatusCode::NOT_FOUND) || e.is_refused()) && !self.is_closed()
            });
        match tokio::time::timeout(limits::START_DEADLINE, attempts).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::protocol(format!(
                "initialize did not finish within {} seconds",
                limits::START_DEADLINE.as_secs()
            ))),
        }
    }

    /// `initialize` and `notifications/initialized`; returns the new session without making it
    /// current, and what the server declared. A session id is owned from the header that gave it; every later failure deletes
    /// it. Server requests on the `initialize` stream, and its resumption, carry the id (the
    /// version only once negotiated).
    ///
    /// # Cancel safety
    /// Dropping it leaves a session id already received in the owned set (deleted by whoever
    /// ends the sessions); an id not yet received is lost with the dropped response.
    async fn handshake(&self) -> Result<(Arc<Session>, Initialized), Error> {
        if self.is_closed() {
            return Err(Error::closed());
        }
        let params = serde_json::json!({
            "protocolVersion": OFFERED_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "plugin-mcp", "version": env!("CARGO_PKG_VERSION")},
        });
        let id = self.next_id();
        let body = jsonrpc::request(id, "initialize", &params);
        let response = self.post(Bytes::from(body), None).await?;
        let session_id = match response.headers().get(&SESSION_ID) {
            Some(value) => Some(valid_session_id(value)?),
            None => None,
        };
        let session = Arc::new(Session::new(session_id));
        if session.id.is_some() && !self.own(&session) {
            // Shut down while the answer was on its way: end the session at once.
            self.delete(&session).await;
            return Err(Error::closed());
        }
        match self.negotiate(response, id, &session).await {
            Ok(initialized) => Ok((session, initialized)),
            Err(e) => {
                self.discard(&session).await;
                Err(e)
            }
        }
    }

    /// Reads the `initialize` answer, checks the version, sends `notifications/initialized`.
    async fn negotiate(
        &self,
        response: reqwest::Response,
        id: u64,
        session: &Arc<Session>,
    ) -> Result<Initialized, Error> {
        #[derive(Deserialize)]
        struct InitializeResult<'a> {
            #[serde(rename = "protocolVersion", borrow)]
            protocol_version: std::borrow::Cow<'a, str>,
            #[serde(borrow, default)]
            capabilities: Option<&'a serde_json::value::RawValue>,
        }
        let decode = |result: &serde_json::value::RawValue| -> Decoded<(String, Initialized)> {
            let result: InitializeResult<'_> = serde_json::from_str(result.get())
                .map_err(|_| "the server's initialize result has no protocolVersion".to_string())?;
            let initialized = Initialized::read(result.capabilities);
            Ok((result.protocol_version.into_owned(), initialized))
        };
        let (chosen, initialized) = self.read_response(response, id, session, &decode).await?;
        let Some(version) = SUPPORTED_VERSIONS.iter().find(|v| **v == chosen.as_str()) else {
            let shown = self.server_text(&chosen, 64);
            return Err(Error::protocol(format!(
                "the server chose MCP protocol version \"{shown}\", which this client does not support (it supports {})",
                SUPPORTED_VERSIONS.join(", ")
            )));
        };
        let _ = session.version.set(HeaderValue::from_static(version));
        self.notify(
            "notifications/initialized",
            &serde_json::json!({}),
            Some(session),
        )
        .await?;
        tracing::debug!(namespace = %self.namespace, version, tools = initialized.tools, "initialized");
        Ok(initialized)
    }

    fn is_closed(&self) -> bool {
        lock(&self.sessions).closed
    }

    /// Adds a session to the owned set; `false` once the connection is closed.
    fn own(&self, session: &Arc<Session>) -> bool {
        let mut state = lock(&self.sessions);
        if state.closed {
            return false;
        }
        state.owned.push(Arc::clone(session));
        true
    }

    /// Deletes a session a failed handshake got, unless something else already ended it.
    async fn discard(&self, session: &Arc<Session>) {
        let was_owned = {
            let mut state = lock(&self.sessions);
            let before = state.owned.len();
            state.owned.retain(|s| !Arc::ptr_eq(s, session));
            state.owned.len() != before
        };
        if was_owned {
            self.delete(session).await;
        }
    }

    /// Ends a failed start: stops a running renewal, cancels the requests in flight on the
    /// sessions it owns, then deletes those sessions. The connection stays usable: the next
    /// start makes a new session.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping it part-way may leave a session undeleted until
    /// [`Connection::close`].
    pub(crate) async fn abandon(&self) {
        self.end_sessions(false, "the client abandoned the start of the session")
            .await;
    }

    /// Ends the connection for good (the Pack was dropped): no request or session is made any
    /// more; a running renewal is stopped; every request in flight is sent its
    /// `notifications/cancelled` on the session it went out on, and the cancels of dropped calls
    /// already on their way are awaited — all bounded by [`limits::GOODBYE_TIMEOUT`] — and only
    /// then is each owned session deleted (`DELETE`, bounded by the same timeout).
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping it part-way may leave sessions undeleted. The Pack runs it to
    /// completion in the server's task.
    pub(crate) async fn close(&self) {
        self.end_sessions(true, "the client was shut down").await;
    }

    /// The work of [`Connection::abandon`] and [`Connection::close`].
    ///
    /// # Cancel safety
    /// Not cancel safe: the owned sessions are taken out before their `DELETE`s.
    async fn end_sessions(&self, close: bool, reason: &'static str) {
        let renewal = {
            let mut state = lock(&self.sessions);
            if close {
                state.closed = true;
            }
            state.renewal.take()
        };
        if let Some(mut renewal) = renewal {
            // Let a handshake in progress finish (bounded), so the session the server is making
            // right now is learnt and deleted rather than left behind; once closed, the task
            // neither retries nor installs, and deletes a session it gets at once.
            if tokio::time::timeout(limits::GOODBYE_TIMEOUT, &mut renewal.task)
                .await
                .is_err()
            {
                renewal.task.abort();
                let _ = renewal.task.await;
            }
        }
        let (sessions, idless) = {
            let mut state = lock(&self.sessions);
            let current = state.current.take();
            let owned = std::mem::take(&mut state.owned);
            let idless = current.filter(|c| c.id.is_none());
            (owned, idless)
        };
        let mut on: Vec<Arc<Session>> = sessions.clone();
        on.extend(idless);
        let cancels = lock(&self.flights).drain(&on, close);
        let sends = cancels
            .iter()
            .map(|(id, session)| self.send_cancel(*id, session, reason));
        let _ = tokio::time::timeout(
            limits::GOODBYE_TIMEOUT,
            futures_util::future::join_all(sends),
        )
        .await;
        // Cancels of dropped calls that are already on their way go before the DELETE too.
        self.cancels.close();
        let _ = tokio::time::timeout(limits::GOODBYE_TIMEOUT, self.cancels.wait()).await;
        if !close {
            self.cancels.reopen();
        }
        let deletes = sessions.iter().map(|session| self.delete(session));
        futures_util::future::join_all(deletes).await;
    }

    /// `DELETE` of one session, best effort, bounded by [`limits::GOODBYE_TIMEOUT`]; any answer
    /// is fine.
    ///
    /// # Cancel safety
    /// The session is marked deleted before the request goes out: dropping this leaves it
    /// undeleted on the server and no later cancel is sent to it.
    async fn delete(&self, session: &Session) {
        if session.id.is_none() || session.deleted.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(http) = self.http() else { return };
        let request = self.with_session(http.delete(self.url.clone()), Some(session));
        let status = tokio::time::timeout(limits::GOODBYE_TIMEOUT, request.send()).await;
        tracing::debug!(
            namespace = %self.namespace,
            status = ?status.ok().and_then(Result::ok).map(|r| r.status().as_u16()),
            "deleted session"
        );
    }
}

/// A session id is 1 to [`limits::MAX_SESSION_ID_BYTES`] visible ASCII characters (MCP
/// 2025-11-25, session management).
pub(super) fn valid_session_id(value: &HeaderValue) -> Result<HeaderValue, Error> {
    let bytes = value.as_bytes();
    if bytes.is_empty()
        || bytes.len() > limits::MAX_SESSION_ID_BYTES
        || !bytes.iter().all(|b| (0x21..=0x7e).contains(b))
    {
        return Err(Error::protocol(format!(
            "the server's Mcp-Session-Id is not 1 to {} visible ASCII characters",
            limits::MAX_SESSION_ID_BYTES
        )));
    }
    Ok(value.clone())
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
                valid_session_id(&value).unwrap_err().to_string(),
                "the server's Mcp-Session-Id is not 1 to 1024 visible ASCII characters"
            );
        }
        let long = HeaderValue::from_str(&"a".repeat(1025)).unwrap();
        assert!(valid_session_id(&long).is_err());
    }
}
