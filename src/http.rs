//! The Streamable HTTP client of one server (MCP 2025-03-26, 2025-06-18, 2025-11-25;
//! transports: Streamable HTTP).
//!
//! [`Connection`] is the facade the rest of the crate uses: [`Connection::request`],
//! [`Connection::cancel`], [`Connection::start`], [`Connection::listen`] (the standalone
//! `GET` stream), [`Connection::abandon`] and [`Connection::close`]; notifications and session
//! renewals reach the server's task through [`Connection::signals`]. Behind it, one module per
//! concept:
//!
//! - `verdict`: the one [`Verdict`] on an answer (computed once by [`judge`], carried by the
//!   error), what it does to the session ([`Connection::settle`]) and the resend table;
//! - `error`: the typed [`Error`] every exchange returns;
//! - `client`: the [`Clients`] a Pack's servers share;
//! - `session`: the session, the handshake, the single-flight re-initialize task, `DELETE`;
//! - `inflight`: which requests may be running on the server, and on which session;
//! - `reply`: reading a reply (status, JSON, SSE), routing messages (notifications go to
//!   [`crate::notices`]), resumption, the standalone `GET` stream;
//! - `events`: the seam between a body and SSE framing;
//! - `auth`: the sign-in state (the Bearer token of each POST, what a `401` or a `403
//!   insufficient_scope` does, the waiting link), over the sign-in core in `crate::auth`.

mod auth;
mod client;
mod error;
mod events;
mod inflight;
mod modern;
mod reply;
mod session;
mod trace;
mod verdict;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Response, Url};
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) use auth::{Logout, SignInState};
pub(crate) use client::Clients;
pub(crate) use error::{Error, Lasting};
pub(crate) use modern::{Mirrored, input_required, required_capabilities};
pub(crate) use reply::Listened;
use session::{AfterRecheck, EraSignal, Rechecked};
pub(crate) use session::{Era, Initialized, Installs, SessionHandle};
pub(crate) use trace::tool_error;
pub(crate) use verdict::{NamedWait, Said, Verdict, Words, refused_as};
use verdict::{Next, Settle, Spent, Stage};

use crate::auth::challenge::{Challenge, asks_for_dpop_nonce};
use crate::auth::dpop::{DPOP, Nonce};
use crate::auth::tokens::AccessToken;
use crate::config::RemoteServer;
use crate::jsonrpc::{self, Awaited};
use crate::limits;
use crate::notices::Signals;
use crate::redact::Redactor;
use inflight::InFlight;
use session::{Session, Sessions};

use crate::protocol::{
    ACCEPT_BOTH, JSON, MCP_METHOD, MCP_NAME, PROTOCOL_VERSION, SESSION_ID, codes,
};

/// What decoding a response's `result` gives: the caller's value, or [`Error::malformed`] with
/// the reason the result does not fit its schema.
pub(crate) type Decoded<T> = Result<T, Error>;

/// What a POST names beside its body: the JSON-RPC method, the tool (or other name) of a
/// `tools/call`, and the tool's mirrored parameters. On a modern route these are sent as
/// `Mcp-Method`, `Mcp-Name` and `Mcp-Param-{Name}` (MCP 2026-07-28, transports "Request
/// Metadata"); in both eras the method and tool name the request for step-ups.
#[derive(Clone, Copy)]
pub(crate) struct Wire<'a> {
    method: &'a str,
    name: Option<&'a str>,
    mirrored: &'a [(HeaderName, HeaderValue)],
    /// The one re-issue of a lost modern request, shared by every send of one call (set once
    /// a send was re-issued; [`Wire::sharing_reissue`]); `None`: the request's own.
    reissued: Option<&'a AtomicBool>,
    /// How long the server may take to send the response headers of each POST of it
    /// ([`Wire::headers_within`]); `None`: the caller's deadline alone bounds it.
    headers_within: Option<std::time::Duration>,
    /// When the caller stops waiting for the request ([`Wire::until`]); `None`: the bounds of
    /// `limits` alone.
    deadline: Option<tokio::time::Instant>,
    /// Whose rule reads the server's "no valid session" words in a refusal of it
    /// ([`Wire::by_change_stream`]).
    words: WordsRule,
}

/// Whose rule reads the server's "no valid session" words ([`verdict::Words`]): each keeps its
/// own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WordsRule {
    /// The request path's ([`Connection::words`]).
    RequestPath,
    /// The change stream loop's: the words always say the session is gone, and the loop's
    /// machine decides what that means (its `GET`, and the `ping` it asks).
    ChangeStream,
}

impl<'a> Wire<'a> {
    /// A request of `method`, naming `name` (a `tools/call`'s tool), with the `Mcp-Param-*`
    /// headers `mirrored` ([`Mirrored::headers`]).
    pub(crate) fn new(
        method: &'a str,
        name: Option<&'a str>,
        mirrored: &'a [(HeaderName, HeaderValue)],
    ) -> Self {
        Self {
            method,
            name,
            mirrored,
            reissued: None,
            headers_within: None,
            deadline: None,
            words: WordsRule::RequestPath,
        }
    }

    /// The same request, asked by the change stream's loop: the server's "no valid session"
    /// words in its refusal are read by the loop's rule ([`WordsRule::ChangeStream`]).
    fn by_change_stream(self) -> Self {
        Self {
            words: WordsRule::ChangeStream,
            ..self
        }
    }

    /// The same request, whose caller stops waiting at `deadline`: a rate limit's wait that
    /// does not end before it is not waited out ([`verdict::waits_out`]).
    pub(crate) fn until(self, deadline: tokio::time::Instant) -> Self {
        Self {
            deadline: Some(deadline),
            ..self
        }
    }

    /// What is left of the request's deadline now; `None` when it has none.
    fn left(&self) -> Option<std::time::Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(tokio::time::Instant::now()))
    }

    /// The same request, whose every POST must bring its response headers within `within`
    /// (else [`Error::no_answer`]): for what the client sends in the background, with no
    /// caller's deadline above it. The time a sign-in takes is not counted.
    pub(crate) fn headers_within(self, within: std::time::Duration) -> Self {
        Self {
            headers_within: Some(within),
            ..self
        }
    }

    /// The same request, sharing the re-issue of a lost reply with the other sends of its call
    /// (`reissued` is set once any of them was re-issued): a call is re-issued at most once in
    /// all, however often it is sent (MCP 2026-07-28, transports "Receiving Messages").
    pub(crate) fn sharing_reissue(self, reissued: &'a AtomicBool) -> Self {
        Self {
            reissued: Some(reissued),
            ..self
        }
    }

    /// The answer to a server request (legacy only): it names nothing.
    fn answer() -> Wire<'static> {
        Wire {
            method: "",
            name: None,
            mirrored: &[],
            reissued: None,
            headers_within: None,
            deadline: None,
            words: WordsRule::RequestPath,
        }
    }

    /// Whether a lost reply is re-issued in `era`: always in the modern era (MCP 2026-07-28,
    /// transports "Receiving Messages": a broken stream loses the request); in the legacy era
    /// only a `tools/list` page, which changes nothing on the server (a legacy stream cut
    /// without an event id cannot be resumed).
    fn reissues_in(&self, era: Era) -> bool {
        era == Era::Modern || self.method == "tools/list"
    }

    /// What names the request for step-ups (MCP 2025-11-25 "Step-Up Authorization Flow";
    /// README "Signing in"): its JSON-RPC `method`, and for `tools/call` the tool's name
    /// (`tools/call search`). Built from what the caller sends, never read back from the body.
    fn step_up_key(&self) -> String {
        match self.name {
            Some(name) if self.method == "tools/call" => format!("{} {name}", self.method),
            _ => self.method.to_string(),
        }
    }
}

/// The body of JSON-RPC request `id` of `method` with `params` (the text of a JSON object
/// without `_meta`) in `era`: in the 2026-07-28 era with its `_meta` ([`modern::META`]), and
/// with the current span's W3C trace context added to `_meta` ([`trace::request_meta`]). Every
/// request body the client sends is made here, inside its request's span.
fn request_body(era: Era, id: u64, method: &str, params: &str) -> Bytes {
    let base = match era {
        Era::Legacy => None,
        Era::Modern => Some(modern::META.as_str()),
    };
    Bytes::from(match trace::request_meta(base) {
        None => jsonrpc::request(id, method, params),
        Some(meta) => jsonrpc::request_with_meta(id, method, params, &meta),
    })
}

/// Records the route `session` on the current request span ([`trace::on_route`]): its
/// version (a modern route's is `2026-07-28`), and a 2025-era session's id.
fn trace_route(session: &Session, redactor: &Redactor) {
    let version = session.version().and_then(|v| v.to_str().ok());
    let version = match session.era {
        Era::Modern => version.or(Some(crate::protocol::MODERN_VERSION)),
        Era::Legacy => version,
    };
    let id = match session.era {
        Era::Legacy => session.id.as_ref().and_then(|id| id.to_str().ok()),
        Era::Modern => None,
    };
    trace::on_route(redactor, version, id);
}

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
    /// The host and port of `origin`, for spans.
    peer: trace::Peer,
    /// Added to the reason of a 401/403 (see [`RemoteServer::auth_hint`]).
    auth_hint: Option<String>,
    headers: HeaderMap,
    redactor: Redactor,
    namespace: Arc<str>,
    runtime: tokio::runtime::Handle,
    next_id: AtomicU64,
    sessions: Mutex<Sessions>,
    flights: Mutex<InFlight>,
    /// What must reach a session before its `DELETE`: the `notifications/cancelled` of dropped
    /// calls, the answers to server requests and the stream resumptions on their way; awaited
    /// before the `DELETE`s.
    before_delete: TaskTracker,
    /// The `initialize` POSTs on their way, each in its own task that owns the session id the
    /// answer's header gives; awaited before the owned sessions are deleted.
    handshakes: TaskTracker,
    /// The cleanups of failed starts ([`Connection::abandon`]) and of failed handshakes (the
    /// `DELETE` of the session one got); [`Connection::close`] awaits them before it ends the
    /// sessions.
    cleanups: TaskTracker,
    /// Cancelled when the connection closes: a handshake POST still unanswered
    /// [`limits::GOODBYE_TIMEOUT`] later is given up.
    closing: CancellationToken,
    /// The sign-in state; `None` when the entry configures an `Authorization` header.
    auth: Option<Arc<auth::Auth>>,
    /// The access token the last request went out with, for the requests that do not ask for
    /// one themselves (`GET` streams, `DELETE`); with its DPoP key when it is bound to one.
    access: Mutex<Option<AccessToken>>,
    /// The newest DPoP nonce this server gave (RFC 9449 §9), put in every later proof.
    dpop_nonce: Nonce,
    /// A token a refresh gave a `GET` or `DELETE` that the server refused again: such a request
    /// does not spend another refresh on it (see [`Connection::send_session_request`]).
    refused_after_refresh: Mutex<Option<secrecy::SecretString>>,
    /// What notifications and session renewals tell the server's task.
    signals: Signals,
    /// Held by the one probe of the era after an answer that looked like the other era's
    /// ([`Connection::recheck`]): concurrent requests that met the same signal ask once.
    rechecks: tokio::sync::Mutex<()>,
    /// What a 400 whose words speak of the session means to a request ([`Words`]): the
    /// session gone, until a request's resend on a fresh session got the same 400 (then those
    /// words are about the request, such as a tool's own "session"). The standalone stream's
    /// loop keeps its own [`Words`] for its `GET`s (`server::listen`).
    words: Words,
}

/// See [`Connection::cancel_on_drop`].
pub(crate) struct CancelOnDrop {
    connection: Arc<Connection>,
    id: u64,
    reason: &'static str,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.connection.cancel(self.id, self.reason);
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// How many times one request is sent again with a new nonce a server asked for (RFC 9449 §9):
/// once for the first nonce, once more for a nonce rotated by a concurrent request's answer.
const MAX_NONCE_RETRIES: usize = 2;

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
        let auth = auth::Auth::for_entry(
            Arc::clone(&namespace),
            &server.headers,
            server.oauth,
            &server.redactor,
        );
        Self {
            auth,
            access: Mutex::default(),
            dpop_nonce: Nonce::default(),
            refused_after_refresh: Mutex::default(),
            clients,
            url: server.url,
            peer: trace::Peer::of(server.origin.as_deref()),
            origin: server.origin,
            auth_hint: server.auth_hint,
            headers: server.headers,
            redactor: server.redactor,
            namespace,
            runtime,
            next_id: AtomicU64::new(1),
            sessions: Mutex::default(),
            flights: Mutex::default(),
            before_delete: TaskTracker::new(),
            handshakes: TaskTracker::new(),
            cleanups: TaskTracker::new(),
            closing: CancellationToken::new(),
            signals: Signals::default(),
            rechecks: tokio::sync::Mutex::new(()),
            words: Words::default(),
        }
    }

    fn http(&self) -> Result<&reqwest::Client, Error> {
        self.clients.get(self.url.scheme() == "https")
    }

    /// The entry's secrets, to scrub server text outside this module.
    pub(crate) fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The link of the sign-in waiting for the browser, if one waits.
    pub(crate) fn sign_in_url(&self) -> Option<Arc<str>> {
        self.auth.as_ref().and_then(|a| a.link())
    }

    /// Deletes the entry's stored sign-in, keyed as its sign-ins key it; `Ok(None)` when the
    /// entry configures an `Authorization` header (it never signs in, so nothing is stored).
    ///
    /// # Errors
    /// [`crate::auth::ErrorKind::Storage`] when no store is known or the file cannot be deleted.
    pub(crate) fn logout(&self) -> Result<Option<Logout>, crate::auth::Error> {
        self.auth.as_ref().map(|a| a.logout(&self.url)).transpose()
    }

    /// Hands the sign-in redirect's address, pasted by hand, to the sign-in waiting for the
    /// browser (see [`auth::Auth::paste`]); `None` when the entry configures an
    /// `Authorization` header (it never signs in).
    ///
    /// # Errors
    /// As [`auth::Auth::paste`].
    ///
    /// # Cancel safety
    /// As [`auth::Auth::paste`].
    pub(crate) async fn paste_redirect(
        &self,
        address: secrecy::SecretString,
    ) -> Option<Result<(), crate::auth::Error>> {
        match &self.auth {
            Some(auth) => Some(auth.paste(address).await),
            None => None,
        }
    }

    /// Where the entry's sign-in stands; `None` when it configures an `Authorization` header.
    pub(crate) fn sign_in_state(&self) -> Option<SignInState> {
        self.auth.as_ref().map(|a| a.state())
    }

    /// Resolves when a sign-in that waited for the browser ends; never without sign-in.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn sign_in_ended(&self) {
        match &self.auth {
            Some(auth) => auth.ended().await,
            None => std::future::pending().await,
        }
    }

    /// The namespace, for logs.
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The signals notifications and session renewals raise for the server's task.
    pub(crate) fn signals(&self) -> &Signals {
        &self.signals
    }

    /// The current session and what its `initialize` declared; `None` before the first
    /// handshake, while a renewal runs, and after the sessions ended.
    pub(crate) fn current(&self) -> Option<SessionHandle> {
        let session = lock(&self.sessions).current()?;
        Some(SessionHandle::new(&session))
    }

    /// The server's era as the client knows it; `None` while it is not known (not probed yet,
    /// or doubted).
    pub(crate) fn era(&self) -> Option<Era> {
        lock(&self.sessions).era()
    }

    /// The live session, waiting for the one being made (or starting a renewal when there is
    /// none), and what its `initialize` declared.
    ///
    /// # Errors
    /// The renewal failed, or the connection is closed.
    ///
    /// # Cancel safety
    /// Cancel safe: the renewal runs in its own task and finishes without the caller.
    pub(crate) async fn live(self: &Arc<Self>) -> Result<SessionHandle, Error> {
        let session = self.session(None, true).await?;
        Ok(SessionHandle::new(&session))
    }

    /// Asks the server, with a `ping` on session `on` alone (no renewal, no resend), whether it
    /// still knows that session (MCP 2025-11-25, utilities: ping): for a `404` to the
    /// standalone `GET`, which means either a forgotten session or no `GET` endpoint. `Ok` when
    /// the server answered (any JSON-RPC answer: the session is live). A session the server
    /// says it does not know is forgotten here (no `DELETE`).
    ///
    /// The whole exchange is bounded by [`limits::PING_TIMEOUT`]; a `ping` refused `429`/`503`
    /// with a `Retry-After` that fits it is sent once more after the wait ([`verdict::next`]).
    ///
    /// # Errors
    /// [`Error::is_session_expired`] when the server forgot the session;
    /// [`Error::no_answer`] past the bound; any other failure.
    ///
    /// # Cancel safety
    /// Cancel safe as to state: a drop leaves the ping in the in-flight table only as it would
    /// any dropped request, cancelled by whoever ends it.
    pub(crate) async fn still_knows(self: &Arc<Self>, on: &SessionHandle) -> Result<(), Error> {
        let session = on.session();
        let id = self.next_id();
        let _cancel = self.cancel_on_drop(id, "the client stopped waiting for ping");
        let until = tokio::time::Instant::now() + limits::PING_TIMEOUT;
        let wire = Wire::new("ping", None, &[]).until(until).by_change_stream();
        let asked = async {
            let mut wire_id = id;
            let mut spent = Spent::default();
            loop {
                if !lock(&self.flights).sent(id, wire_id, session) {
                    return Err(Error::closed());
                }
                let body = request_body(session.era, wire_id, "ping", "{}");
                // The POST runs in a task the close awaits before any `DELETE` (as a
                // resumption's GET does): dropped with the stream loop while on the wire, it
                // could otherwise reach the session after its `DELETE`.
                let this = Arc::clone(self);
                let on = Arc::clone(session);
                let posting = self.before_delete.spawn_on(
                    async move {
                        if this.is_closed() {
                            return Err(Error::closed());
                        }
                        let wire = Wire::new("ping", None, &[]).until(until).by_change_stream();
                        this.post_request(id, wire_id, body, &wire, &on).await
                    },
                    &self.runtime,
                );
                let posted = posting.await.unwrap_or_else(|_| Err(Error::closed()));
                let response = match posted {
                    Ok(response) => response,
                    Err(e) => {
                        // Only the rate limit's resend applies: no renewal, no other resend.
                        let verdict = self.verdict(session, "ping", &e);
                        let step = verdict::next(verdict, Stage::Status, spent, false, wire.left());
                        let Next::Wait(wait) = step else {
                            return Err(e);
                        };
                        spent.waited = true;
                        lock(&self.flights).waiting(id);
                        tokio::time::sleep(wait).await;
                        wire_id = self.fresh_id();
                        continue;
                    }
                };
                let any = |_: &RawValue, _: &Bytes| -> Decoded<()> { Ok(()) };
                let awaited = Awaited {
                    id: wire_id,
                    method: "ping",
                };
                return self
                    .read_response(response, awaited, session, wire.deadline, &any)
                    .await;
            }
        };
        // Sent in the background, with no caller's deadline above it: bounded here.
        let answered = tokio::time::timeout(
            limits::PING_TIMEOUT,
            self.spanned("ping", id, session, asked),
        )
        .await
        .unwrap_or_else(|_| Err(Error::no_answer("ping", limits::PING_TIMEOUT)));
        let answered = match answered {
            Ok(()) => Ok(()),
            Err(e) => match self.background_verdict(session, "ping", e, true).await {
                // Any other response to the ping (a JSON-RPC error of the session's era, a
                // malformed one): it knows the session.
                e if e.verdict().is_response(e.rpc().is_some()) => Ok(()),
                e => Err(e),
            },
        };
        if answered
            .as_ref()
            .map_or_else(|e| !e.may_be_running(), |()| true)
        {
            lock(&self.flights).finish(id);
        }
        answered
    }

    /// Runs `request`, request `id` of `method` on `session` made and sent by a path of its
    /// own (not [`Connection::request`]), inside its span ([`trace::request_span`], README
    /// "Traces"): the body is made in it, so it carries the span's trace context
    /// ([`request_body`]); the route and the outcome are recorded on it.
    ///
    /// # Cancel safety
    /// Cancel safe as far as `request` is.
    async fn spanned<T>(
        &self,
        method: &'static str,
        id: u64,
        session: &Session,
        request: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let span = trace::request_span(method, None, id, &self.peer);
        span.in_scope(|| trace_route(session, &self.redactor));
        let outcome = tracing::Instrument::instrument(request, span.clone()).await;
        trace::on_outcome(&span, &outcome);
        outcome
    }

    /// Resolves once `on` is no longer the live session: another one was installed, or the
    /// [`session::Link`] left it (forgotten, set aside, replaced by a probe, ended). At once when it is not
    /// live now.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub(crate) async fn left(&self, on: &SessionHandle) {
        let mut transitions = lock(&self.sessions).transitions();
        loop {
            let live = lock(&self.sessions).current();
            if !live.is_some_and(|live| Arc::ptr_eq(&live, on.session())) {
                return;
            }
            if transitions.changed().await.is_err() {
                return;
            }
        }
    }

    /// Changes each time a session is installed (the first start's, or a renewal's).
    pub(crate) fn installs(&self) -> tokio::sync::watch::Receiver<Installs> {
        lock(&self.sessions).installs()
    }

    /// Joins the connection's renewal, or starts one when there is no live session: the
    /// standalone stream's session is gone ([`Connection::still_knows`] forgot it, or set it
    /// aside to be deleted at the drop), or a renewal failed while the server was down. Such a
    /// renewal asks for a re-listing ([`Signals::session_renewed`]). With a live session, it
    /// returns at once.
    ///
    /// # Errors
    /// The renewal failed, or the connection is closed; the error carries its verdict
    /// ([`Error::verdict`]).
    ///
    /// # Cancel safety
    /// Cancel safe: the renewal runs in its own task and finishes without the caller.
    pub(crate) async fn renew_now(self: &Arc<Self>) -> Result<(), Error> {
        self.session(None, false).await.map(drop).map_err(|e| {
            // Judged for the loop, which acts on a rate limit's wait ([`Verdict::stays_away`]).
            let era = lock(&self.sessions).era().unwrap_or(Era::Legacy);
            let verdict = judge(era, &e, |_| false);
            e.judged(verdict)
        })
    }

    /// The Host's runtime, where every exchange of this connection runs.
    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    /// A fresh JSON-RPC request id, entered in the in-flight table at once: a cancel from then
    /// on (a dropped call racing its own task) keeps the request from being sent. The caller
    /// sends it with [`Connection::request`], or ends it with [`Connection::finish_unsent`].
    pub(crate) fn next_id(&self) -> u64 {
        let id = self.fresh_id();
        lock(&self.flights).reserve(id);
        id
    }

    /// A guard that cancels request `id` with `reason` when dropped, if it may still be running
    /// then (the in-flight table decides; a no-op once the request is over). For work that is
    /// dropped by a deadline of its own, such as a listing's pages.
    pub(crate) fn cancel_on_drop(self: &Arc<Self>, id: u64, reason: &'static str) -> CancelOnDrop {
        CancelOnDrop {
            connection: Arc::clone(self),
            id,
            reason,
        }
    }

    /// A fresh id outside the in-flight table (the handshake's `initialize`).
    fn fresh_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Ends request `id` if it was never sent (its call ended before [`Connection::request`]:
    /// a lookup that failed). One that went out is left to its own end, a cancel or the close.
    pub(crate) fn finish_unsent(&self, id: u64) {
        lock(&self.flights).finish_unsent(id);
    }

    /// Sends the request `method` with `params` as JSON-RPC id `id` (see
    /// [`Connection::next_id`]) and decodes its `result` with `decode` while the received text
    /// is still borrowed. `decode` also gets the buffer that text lies in (the JSON body, or the
    /// SSE event's data), so it may keep a [`Bytes::slice_ref`] of it instead of copying a
    /// large string: once the reply is dropped, that slice is the buffer's only holder.
    ///
    /// The request is in the in-flight table from before it is sent until it is over: answered,
    /// refused, or never sent. When the server forgot the session it went out on, the request
    /// waits for the shared re-initialize and is sent once more on the new session; when its
    /// connect is refused (nothing was sent), it is sent again after 100 ms, 200 ms, … (the
    /// re-initialize's backoff, [`limits::REINIT_RETRIES`] times); when it (or the renewal it
    /// waits for) is refused `429`/`503` with a `Retry-After` that fits [`Wire::until`] and
    /// [`limits::MAX_RATE_LIMIT_WAIT`], it is sent once more after that wait.
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
        wire: Wire<'_>,
        params: &impl serde::Serialize,
        decode: impl Fn(&RawValue, &Bytes) -> Decoded<T>,
    ) -> Result<T, Error> {
        self.request_declared(id, wire, params, decode, None).await
    }

    /// As [`Connection::request`] (same errors and cancel safety); `answered_on`, when given,
    /// is set to the session each send went out on, so after a resend on a new session it names
    /// the session the answer came from (and what its `initialize` or `server/discover` answer
    /// declared). A listing reads its pages by it.
    pub(crate) async fn request_declared<T>(
        self: &Arc<Self>,
        id: u64,
        wire: Wire<'_>,
        params: &impl serde::Serialize,
        decode: impl Fn(&RawValue, &Bytes) -> Decoded<T>,
        answered_on: Option<&mut Option<SessionHandle>>,
    ) -> Result<T, Error> {
        let params = serde_json::value::to_raw_value(params)
            .expect("request params of plain data serialize");
        if !lock(&self.flights).begin(id) {
            // Cancelled before it could be sent, or the connection closed.
            return Err(Error::closed());
        }
        // The request's span (README "Traces"): a child of the caller's span.
        let span = trace::request_span(wire.method, wire.name, id, &self.peer);
        let outcome = tracing::Instrument::instrument(
            self.exchange(id, &wire, &params, &decode, answered_on),
            span.clone(),
        )
        .await;
        trace::on_outcome(&span, &outcome);
        let over = match &outcome {
            Ok(_) => true,
            Err(e) => !e.may_be_running(),
        };
        if over {
            lock(&self.flights).finish(id);
        }
        outcome
    }

    /// Sends and reads; see [`Connection::request`] (same cancel safety). Each attempt's error
    /// is judged once ([`Connection::verdict`]); the verdict settles the session it came on
    /// ([`Connection::settle`]) and the decision table [`verdict::next`] says what follows:
    /// sent once more (at most once in all) after an expired session or an answer of the other
    /// era, on the route made next; sent once more under a new id after a rate limit's wait
    /// that fits (RFC 6585 §4: nothing was processed); a modern request (or a legacy
    /// `tools/list` page) whose reply was lost is re-issued once with a new id (MCP 2026-07-28,
    /// transports "Receiving Messages": the server may have run it), which the in-flight table
    /// then names for a cancel. The error returned carries its verdict ([`Error::verdict`]).
    async fn exchange<T>(
        self: &Arc<Self>,
        id: u64,
        wire: &Wire<'_>,
        params: &RawValue,
        decode: &impl Fn(&RawValue, &Bytes) -> Decoded<T>,
        mut answered_on: Option<&mut Option<SessionHandle>>,
    ) -> Result<T, Error> {
        // A listing's own renewal asks for no re-listing (see `Connection::session`).
        let by_listing = wire.method == "tools/list";
        let mut spent = Spent::default();
        let mut session = self
            .session_within(None, by_listing, wire, &mut spent)
            .await?;
        // Set once the request was re-issued (or another send of its call was).
        let own = AtomicBool::new(false);
        let reissued = wire.reissued.unwrap_or(&own);
        // The JSON-RPC id on the wire: `id` until a re-issue takes a new one (the in-flight
        // table keeps `id`, the caller's handle).
        let mut wire_id = id;
        // A plain refusal sent once more on the same route after a probe found the same era:
        // met again, it is the server's own answer.
        let mut confirming: Option<EraSignal> = None;
        loop {
            if !lock(&self.flights).sent(id, wire_id, &session) {
                // Cancelled (or shut down) while waiting for a session.
                return Err(Error::closed());
            }
            if let Some(answered_on) = answered_on.as_deref_mut() {
                *answered_on = Some(SessionHandle::new(&session));
            }
            trace_route(&session, &self.redactor);
            let body = request_body(session.era, wire_id, wire.method, params.get());
            let (error, phase) = match self.post_request(id, wire_id, body, wire, &session).await {
                Ok(response) => match self
                    .read_response(
                        response,
                        Awaited {
                            id: wire_id,
                            method: wire.method,
                        },
                        &session,
                        wire.deadline,
                        decode,
                    )
                    .await
                {
                    Ok(answer) => return Ok(answer),
                    Err(e) => (e, Stage::Reply),
                },
                Err(e) => (e, Stage::Status),
            };
            let verdict = self.verdict(&session, wire.method, &error);
            spent.reissued = reissued.load(Ordering::Relaxed);
            let step = verdict::next(
                verdict,
                phase,
                spent,
                wire.reissues_in(session.era),
                wire.left(),
            );
            if step != Next::Answer {
                // Off the wire until it is sent again.
                lock(&self.flights).waiting(id);
            }
            match step {
                Next::Again(delay) => {
                    // Nothing was sent (a server restarting): try again after the same short
                    // backoff as a re-initialize, within the caller's deadline.
                    spent.refused += 1;
                    tracing::debug!(namespace = %self.namespace, method = wire.method, id, ?delay, "connection refused; sending again");
                    tokio::time::sleep(delay).await;
                    // As after any wait: sent on the live session (below).
                    session = self
                        .session_within(None, by_listing, wire, &mut spent)
                        .await?;
                }
                Next::Wait(wait) => {
                    // Refused unprocessed (RFC 6585 §4): once more after the wait named, under
                    // an id of its own (an id is never reused within a session).
                    spent.waited = true;
                    tracing::debug!(namespace = %self.namespace, method = wire.method, id, wait_ms = wait.as_millis() as u64, "rate limited; sending once more after the wait");
                    tokio::time::sleep(wait).await;
                    wire_id = self.fresh_id();
                    // The session may have left meanwhile (forgotten after another request's
                    // 404, set aside, moved off by a probe): the resend goes to the live one,
                    // as after a renewal ([`Connection::session_within`]).
                    session = self
                        .session_within(None, by_listing, wire, &mut spent)
                        .await?;
                }
                Next::Renew => {
                    spent.resent = Some(verdict);
                    tracing::debug!(namespace = %self.namespace, method = wire.method, id, ?verdict, "session expired; initializing again");
                    let stale = self.settle(&session, verdict);
                    session = self
                        .session_within(stale.as_ref(), by_listing, wire, &mut spent)
                        .await?;
                }
                Next::Reissue => {
                    reissued.store(true, Ordering::Relaxed);
                    wire_id = self.fresh_id();
                    tracing::debug!(namespace = %self.namespace, method = wire.method, id, wire_id, reason = %error, "the reply was lost; issuing the request again with a new id");
                }
                Next::Reroute(signal) => {
                    spent.resent = Some(verdict);
                    tracing::debug!(namespace = %self.namespace, method = wire.method, id, era = ?session.era, "the server answered like the other era; asking which era it speaks");
                    match self
                        .reroute(wire.method, &session, signal, by_listing, wire.deadline)
                        .await?
                    {
                        Rerouted::Resend { on, confirmed } => {
                            if confirmed && phase == Stage::Status {
                                confirming = Some(signal);
                            }
                            session = on;
                        }
                        // The probe ruled the answer the server's own, or gave no verdict: the
                        // answer stands with the verdict the probe left.
                        Rerouted::Stands(ruled) => return Err(error.judged(ruled)),
                    }
                }
                Next::Answer => {
                    if let (Some(signal), Verdict::OtherEra(met)) = (confirming, verdict)
                        && met == signal
                    {
                        self.confirm_own(&session, wire.method, signal);
                    }
                    return Err(self.answer(&session, wire.method, phase, spent, verdict, error));
                }
            }
        }
    }

    /// The error a request ends with, after `verdict` settled its session (`spent`: the
    /// resends spent, with the verdict the one resend followed): an expired session met again
    /// on the resend is "rejected again" (and when a session made after the server's words got
    /// the same words, they are the requests' own from now on); any other error is itself,
    /// carrying its verdict.
    fn answer(
        &self,
        session: &Arc<Session>,
        method: &str,
        phase: Stage,
        spent: Spent,
        verdict: Verdict,
        error: Error,
    ) -> Error {
        match (verdict, phase) {
            // The words met on the resend: when its session was made after the same words,
            // they were about the request, and the session stays; on a session made after
            // anything else (a 404, the other era) they still mean a gone session, which the
            // next request finds out for itself (as after a 404 below).
            (Verdict::SetAside, Stage::Status) => {
                let after_words = spent.resent == Some(Verdict::SetAside);
                if self.words.met(after_words) == Said::Own {
                    // The request's span names its id.
                    tracing::debug!(namespace = %self.namespace, method, "a fresh session got the same 400: such 400s are the request's own from now on");
                }
                Error::expired_again()
            }
            // The fresh session refused at once: the next request finds out for itself (a
            // renewal per refusal would let a server that refuses every request of one kind
            // take every session from under the stream).
            (Verdict::Expired, Stage::Status) => Error::expired_again(),
            // Mid-reply (a refused resumption) the session goes, and the request, which may
            // have run, is not resent.
            _ => {
                self.settle(session, verdict);
                error.judged(verdict)
            }
        }
    }

    /// The session a request of `wire` goes out on ([`Connection::session`], forgetting `stale`
    /// first). A renewal refused with a wait (429/503, also one refused earlier whose wait is
    /// not over: `Link::Throttled`) is read by the one table ([`verdict::next`]): waited out
    /// once when it fits what is left of the request's deadline (`spent` records it), else that
    /// verdict is the caller's answer.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Connection::session`].
    async fn session_within(
        self: &Arc<Self>,
        mut stale: Option<&Arc<Session>>,
        by_listing: bool,
        wire: &Wire<'_>,
        spent: &mut Spent,
    ) -> Result<Arc<Session>, Error> {
        loop {
            let e = match self.session(stale.take(), by_listing).await {
                Ok(session) => return Ok(session),
                Err(e) => e,
            };
            let era = lock(&self.sessions).era().unwrap_or(Era::Legacy);
            let verdict = judge(era, &e, |_| false);
            let Next::Wait(wait) =
                verdict::next(verdict, Stage::Status, *spent, false, wire.left())
            else {
                return Err(e.judged(verdict));
            };
            spent.waited = true;
            tracing::debug!(namespace = %self.namespace, method = wire.method, wait_ms = wait.as_millis() as u64, "the renewal was rate limited; asking for a session again after the wait");
            tokio::time::sleep(wait).await;
        }
    }

    /// The verdict on `error`, the answer to a request of `method` on `session` that the client
    /// sends in the background (the standalone `GET`, the session `ping`), acted on as every
    /// path acts on it: an answer like the other era's asks the era again
    /// ([`Connection::recheck`], the answer standing: nothing is resent; a route the probe
    /// moves off stops being live, which ends the stream's wait), and with `settles` the
    /// session is settled ([`Connection::settle`]). The standalone `GET` does not settle it: a
    /// `404` there means a forgotten session or no `GET` endpoint, and the `ping` that follows
    /// decides ([`Connection::still_knows`]). Returns `error` carrying its verdict.
    ///
    /// # Cancel safety
    /// Cancel safe: the probe runs in its own task and records its verdict itself.
    pub(super) async fn background_verdict(
        self: &Arc<Self>,
        session: &Arc<Session>,
        method: &str,
        error: Error,
        settles: bool,
    ) -> Error {
        let verdict = self.verdict(session, method, &error);
        let verdict = self.act_on(session, method, verdict, settles, None).await;
        error.judged(verdict)
    }

    /// Acts on `verdict`, the answer to a request of `method` on `session` that is sent
    /// nothing once more (a background request, or a resumption refused): an answer like the
    /// other era's asks the era again ([`Connection::recheck`], the answer standing), and with
    /// `settles` the session is settled ([`Connection::settle`]); a probe refused with a wait
    /// takes it only when it ends before `until` (the request's deadline; `None`: the bound
    /// alone). Returns the verdict once the probe ruled (the server's own when it found the same era). Boxed, with its type named:
    /// the probe reads a reply too, whose refused resumption acts here again, and the auto
    /// traits of such a cycle of futures must be written down.
    ///
    /// # Cancel safety
    /// Cancel safe: the probe runs in its own task and records its verdict itself.
    pub(super) fn act_on<'a>(
        self: &'a Arc<Self>,
        session: &'a Arc<Session>,
        method: &'a str,
        verdict: Verdict,
        settles: bool,
        until: Option<tokio::time::Instant>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Verdict> + Send + 'a>> {
        Box::pin(async move {
            let mut verdict = verdict;
            if let Verdict::OtherEra(signal) = verdict {
                tracing::debug!(namespace = %self.namespace, method, ?signal, "a request sent nothing once more was answered like the other era; asking which era the server speaks");
                verdict = self
                    .recheck(session, method, signal, false, AfterRecheck::Stands, until)
                    .await
                    .verdict(signal);
            }
            if settles {
                self.settle(session, verdict);
            }
            verdict
        })
    }

    /// The one verdict on `error`, the answer to a request of `method` on `session`
    /// ([`judge`], with the era signals a probe found to be this server's own).
    fn verdict(&self, session: &Session, method: &str, error: &Error) -> Verdict {
        judge(session.era, error, |signal| {
            lock(&self.sessions).is_own(session.era, method, signal)
        })
    }

    /// The one function from a verdict to a session transition ([`Verdict::settles`]):
    /// forgets `session` (no `DELETE`), sets it aside (deleted with the others), or keeps it;
    /// an era signal is left to the probe ([`Connection::recheck`]), which the caller runs.
    /// Returns the session a renewal must replace when it was forgotten (see
    /// [`Connection::session`]'s `stale`).
    fn settle(&self, session: &Arc<Session>, verdict: Verdict) -> Option<Arc<Session>> {
        let settle = verdict.settles();
        lock(&self.sessions).settle(session, settle);
        (settle == Settle::Forget).then(|| Arc::clone(session))
    }

    /// Request `id` (of `method`) on `stale` was answered with `signal`, the way the other era
    /// answers: it is off the wire, and the era is asked again ([`Connection::recheck`], within
    /// `until`, the request's deadline). A route changed (the other era: the server restarted
    /// onto another version and processed nothing; or the same modern era declaring other
    /// things): the live route, for the one resend. The same era and route: a plain refusal
    /// (nothing was processed; a proxy that flapped) is sent once more on `stale`; any other
    /// signal is the server's own answer ([`Rerouted::Stands`] with [`Verdict::Own`]). A probe
    /// that gave no verdict sends nothing more either, and the answer stands as the other
    /// era's ([`Verdict::OtherEra`]), never as the server's own.
    ///
    /// # Cancel safety
    /// Cancel safe: the probe and the new start run in tasks of their own.
    async fn reroute(
        self: &Arc<Self>,
        method: &str,
        stale: &Arc<Session>,
        signal: EraSignal,
        by_listing: bool,
        until: Option<tokio::time::Instant>,
    ) -> Result<Rerouted, Error> {
        let rechecked = self
            .recheck(
                stale,
                method,
                signal,
                by_listing,
                AfterRecheck::Resend,
                until,
            )
            .await;
        Ok(match rechecked {
            Rechecked::Moved => Rerouted::Resend {
                on: self.session(None, by_listing).await?,
                confirmed: false,
            },
            Rechecked::Renewed => Rerouted::Resend {
                on: self.session(None, by_listing).await?,
                confirmed: true,
            },
            Rechecked::Own if matches!(signal, EraSignal::PlainRefusal(_)) => Rerouted::Resend {
                on: Arc::clone(stale),
                confirmed: true,
            },
            Rechecked::Own | Rechecked::Unsure => Rerouted::Stands(rechecked.verdict(signal)),
        })
    }

    /// Tells the server to stop request `id` (`notifications/cancelled` with `reason`, MCP
    /// 2025-11-25, cancellation) when it may still be running: only when the in-flight table
    /// holds it as sent, and on the session it went out on. Sent in the background on the
    /// Host's runtime, bounded by [`limits::GOODBYE_TIMEOUT`]; a later [`Connection::close`]
    /// waits for it before any `DELETE`. At most one cancel per request, whoever asks.
    pub(crate) fn cancel(self: &Arc<Self>, id: u64, reason: &'static str) {
        let mut flights = lock(&self.flights);
        let Some((session, wire_id)) = flights.take(id) else {
            return;
        };
        if !session.takes_cancel() {
            // Forgotten or deleted: nothing to tell. Modern: the request's response stream
            // closes when its future is dropped, and that is the cancellation.
            return;
        }
        tracing::debug!(namespace = %self.namespace, id, wire_id, reason, "cancelling a request");
        let this = Arc::clone(self);
        // Spawned while the table is locked, so that a close that drains the table next also
        // waits for this cancel before its DELETE.
        self.before_delete.spawn_on(
            async move {
                let sent = tokio::time::timeout(
                    limits::GOODBYE_TIMEOUT,
                    this.send_cancel(wire_id, &session, reason),
                )
                .await;
                tracing::debug!(namespace = %this.namespace, id, sent = matches!(sent, Ok(Ok(()))), "sent notifications/cancelled");
            },
            &self.runtime,
        );
        drop(flights);
    }

    /// Sends `notifications/cancelled` for wire id `id` on `session` (when it
    /// [takes a cancel](Session::takes_cancel)), within [`limits::GOODBYE_TIMEOUT`]: refused
    /// `429`/`503` with a wait that ends within it, the cancel was not processed (RFC 6585 §4)
    /// and is sent once more after the wait ([`Connection::send_within`]).
    ///
    /// # Errors
    /// The cancel's refusal, or [`Error::no_answer`] past the bound.
    async fn send_cancel(
        self: &Arc<Self>,
        id: u64,
        session: &Arc<Session>,
        reason: &str,
    ) -> Result<(), Error> {
        const CANCELLED: &str = "notifications/cancelled";
        let params = serde_json::json!({"requestId": id, "reason": reason});
        let deadline = tokio::time::Instant::now() + limits::GOODBYE_TIMEOUT;
        let send = || async {
            if !session.takes_cancel() {
                return Ok(());
            }
            self.notify(CANCELLED, &params, Some(session)).await
        };
        self.send_within(session, Background::Cancel, deadline, send)
            .await
            .unwrap_or_else(|| Err(Error::no_answer(CANCELLED, limits::GOODBYE_TIMEOUT)))
    }

    /// Sends `what`, sent in the background to `session` with no resend of its own, by `send`
    /// before `deadline`, taking only the rate limit's resend from the decision table
    /// ([`verdict::next`]): refused `429`/`503` with a `Retry-After` that ends before the
    /// deadline, it was not processed (RFC 6585 §4) and is sent once more after the wait. Any
    /// other refusal's verdict is acted on like every request's ([`Connection::act_on`]: the
    /// session forgotten or set aside, the era asked again), except a `DELETE`'s, which ends
    /// the session whatever it says. `None` when the deadline passed first.
    ///
    /// # Cancel safety
    /// Cancel safe as far as `send` is; a probe it starts runs in its own task.
    async fn send_within<T, F>(
        self: &Arc<Self>,
        session: &Arc<Session>,
        what: Background,
        deadline: tokio::time::Instant,
        send: impl Fn() -> F,
    ) -> Option<Result<T, Error>>
    where
        F: std::future::Future<Output = Result<T, Error>>,
    {
        let method = what.method();
        let mut spent = Spent::default();
        loop {
            let sent = tokio::time::timeout_at(deadline, send()).await.ok()?;
            let Err(error) = sent else {
                return Some(sent);
            };
            let verdict = self.verdict(session, method, &error);
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match verdict::next(verdict, Stage::Status, spent, false, Some(left)) {
                Next::Wait(wait) => {
                    spent.waited = true;
                    tracing::debug!(namespace = %self.namespace, what = method, wait_ms = wait.as_millis() as u64, "rate limited; sending it once more after the wait");
                    tokio::time::sleep(wait).await;
                }
                _ if what == Background::Delete => return Some(Err(error)),
                _ => {
                    let verdict = self
                        .act_on(session, method, verdict, true, Some(deadline))
                        .await;
                    return Some(Err(error.judged(verdict)));
                }
            }
        }
    }

    /// POSTs a notification; any 2xx is accepted.
    async fn notify(
        &self,
        method: &str,
        params: &impl serde::Serialize,
        session: Option<&Session>,
    ) -> Result<(), Error> {
        let body = jsonrpc::notification(method, params);
        // The notification's span (README "Traces").
        let span = trace::notification_span(method, &self.peer);
        if let Some(session) = session {
            span.in_scope(|| trace_route(session, &self.redactor));
        }
        let outcome = tracing::Instrument::instrument(
            self.post(
                Bytes::from(body),
                &Wire::new(method, None, &[]),
                session,
                None,
            ),
            span.clone(),
        )
        .await
        .map(drop);
        trace::on_outcome(&span, &outcome);
        outcome
    }

    /// The configured headers, and the session's id and negotiated version when it has them;
    /// on a modern route, the request metadata headers of `wire` too (MCP 2026-07-28,
    /// transports "Request Metadata": `Mcp-Method`, `Mcp-Name` in the value encoding, the
    /// mirrored `Mcp-Param-{Name}`).
    ///
    /// With `token` (the one this request's own bookkeeping decides on), its `Authorization`
    /// (and for a DPoP-bound token a fresh proof of its key for `method` to the server's URL,
    /// see [`Connection::authorize`]).
    fn with_session(
        &self,
        request: reqwest::RequestBuilder,
        method: &reqwest::Method,
        token: Option<&AccessToken>,
        session: Option<&Session>,
        wire: Option<&Wire<'_>>,
    ) -> reqwest::RequestBuilder {
        let mut request = request.headers(self.headers.clone());
        if let Some(token) = token {
            request = self.authorize(request, method, token);
        }
        if let Some(session) = session {
            if let Some(id) = &session.id {
                request = request.header(SESSION_ID, id.clone());
            }
            if let Some(version) = session.version() {
                request = request.header(PROTOCOL_VERSION, version.clone());
            }
            if let (Era::Modern, Some(wire)) = (session.era, wire) {
                request = request.header(MCP_METHOD, modern::header_value(wire.method));
                if let Some(name) = wire.name {
                    request = request.header(MCP_NAME, modern::header_value(name));
                }
                for (header, value) in wire.mirrored {
                    request = request.header(header.clone(), value.clone());
                }
            }
        }
        request
    }

    /// Adds `token` to `request`: `Authorization: Bearer` (RFC 6750 §2.1), or for a DPoP-bound
    /// token `Authorization: DPoP` and a `DPoP` proof of its key for `method` to the server's
    /// URL, with `ath` and the server's newest nonce (RFC 9449 §7.1, §4.2, §9). Both values are
    /// marked sensitive. A proof that cannot be made (no randomness) leaves the request without
    /// one: the server refuses it, and the refusal is what the caller sees.
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        method: &reqwest::Method,
        token: &AccessToken,
    ) -> reqwest::RequestBuilder {
        use secrecy::ExposeSecret;
        let Some(key) = &token.dpop else {
            return request.bearer_auth(token.token.expose_secret());
        };
        let sensitive = |text: &str| {
            HeaderValue::from_str(text).ok().map(|mut value| {
                value.set_sensitive(true);
                value
            })
        };
        let mut request = request;
        if let Some(value) = sensitive(&format!("DPoP {}", token.token.expose_secret())) {
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        let nonce = self.dpop_nonce.get();
        match key.proof(
            method.as_str(),
            &self.url,
            Some(&token.token),
            nonce.as_deref(),
        ) {
            Ok(proof) => match sensitive(proof.expose_secret()) {
                Some(value) => request.header(DPOP, value),
                None => request,
            },
            Err(e) => {
                tracing::warn!(namespace = %self.namespace, reason = %e, "no DPoP proof");
                request
            }
        }
    }

    /// Whether `response` to a request that carried `sent` is a resource server's
    /// `401 use_dpop_nonce` that brought a nonce (RFC 9449 §9): the request goes again (at
    /// most [`MAX_NONCE_RETRIES`] times) with a proof carrying it. The nonce is taken from any
    /// answer to a DPoP-bound request that has one.
    fn wants_dpop_nonce(&self, response: &Response, sent: Option<&AccessToken>) -> bool {
        let bound = sent.is_some_and(|t| t.dpop.is_some());
        if !bound {
            return false;
        }
        let fresh = self.dpop_nonce.learn(response.headers());
        fresh
            && response.status() == reqwest::StatusCode::UNAUTHORIZED
            && asks_for_dpop_nonce(response.headers())
    }

    /// POSTs one JSON-RPC body and checks the status. Returns the 2xx response.
    ///
    /// With sign-in state, the request carries the current access token; a `401` (or a `403
    /// insufficient_scope`) gets a token by refresh, stored grant or sign-in and the request is
    /// sent again, at most [`auth::MAX_AUTH_RETRIES`] times.
    ///
    /// `wire` names the message for step-ups ([`Wire::step_up_key`]); `answering` is the
    /// request's JSON-RPC id when the status check may read an error answering it (see
    /// [`Connection::check_status`]).
    async fn post(
        &self,
        body: Bytes,
        wire: &Wire<'_>,
        session: Option<&Session>,
        answering: Option<u64>,
    ) -> Result<Response, Error> {
        let response = self.send_post(body, wire, session).await?;
        self.check_status(response, session, answering).await
    }

    /// [`Connection::post`] of request `id` (JSON-RPC id `wire_id` in `body`) on `session`: as
    /// soon as the status says the server did not accept the request (anything but 2xx), the
    /// in-flight table stops holding it as sent, before the error body is read — a drop while
    /// that body comes sends no cancel.
    async fn post_request(
        &self,
        id: u64,
        wire_id: u64,
        body: Bytes,
        wire: &Wire<'_>,
        session: &Session,
    ) -> Result<Response, Error> {
        let response = self.send_post(body, wire, Some(session)).await?;
        if !response.status().is_success() {
            lock(&self.flights).waiting(id);
        }
        let words = match wire.words {
            WordsRule::RequestPath => Some(&self.words),
            WordsRule::ChangeStream => None,
        };
        self.check_status_by(response, Some(session), Some(wire_id), words)
            .await
    }

    /// Sends one POST with the session's headers; the status is not checked.
    ///
    /// With sign-in state, the POST carries the current access token, and a `401` (or a `403
    /// insufficient_scope`) gets a token by refresh, stored grant or sign-in and the POST is
    /// sent again, at most [`auth::MAX_AUTH_RETRIES`] times.
    async fn send_post(
        &self,
        body: Bytes,
        wire: &Wire<'_>,
        session: Option<&Session>,
    ) -> Result<Response, Error> {
        let Some(auth) = &self.auth else {
            return self.send_once(body, None, session, wire).await;
        };
        let mut sent = auth.token().await?;
        *lock(&self.access) = sent.clone();
        let mut retries = 0;
        let mut nonce_retries = 0;
        loop {
            let response = self
                .send_once(body.clone(), sent.as_ref(), session, wire)
                .await?;
            if self.wants_dpop_nonce(&response, sent.as_ref()) {
                if nonce_retries < MAX_NONCE_RETRIES {
                    tracing::debug!(namespace = %self.namespace, "the server asked for a DPoP nonce; sending again with it");
                    nonce_retries += 1;
                    continue;
                }
                // Still no nonce the server takes: the token is not what it refuses, so no
                // refresh and no sign-in is spent on it; its refusal is the answer.
                return Ok(response);
            }
            // A nonce asked for but none this client can use (absent, two, too long): the same.
            if refuses_for_nonce(&response, sent.as_ref()) {
                return Ok(response);
            }
            let status = response.status();
            let refused = match (status, auth_challenge(&response)) {
                (reqwest::StatusCode::UNAUTHORIZED, Some(c)) => Some((false, c)),
                (reqwest::StatusCode::FORBIDDEN, Some(c)) if c.is_insufficient_scope() => {
                    Some((true, c))
                }
                _ => None,
            };
            let Some((forbidden, challenge)) = refused.filter(|_| retries < auth::MAX_AUTH_RETRIES)
            else {
                if status.is_success() && auth.step_up_waiting() {
                    auth.succeeded(&wire.step_up_key());
                }
                if let (true, Some(sent)) = (status.is_success(), &sent) {
                    auth.accepted(&sent.token);
                }
                return Ok(response);
            };
            retries += 1;
            // Boxed: the rare sign-in path keeps its large state off every request's future.
            let token = if forbidden {
                Box::pin(auth.insufficient_scope(
                    &self.url,
                    &self.runtime,
                    &challenge,
                    &wire.step_up_key(),
                ))
                .await
            } else {
                Box::pin(auth.unauthorized(
                    &self.url,
                    &self.runtime,
                    &challenge,
                    sent.as_ref().map(|t| &t.token),
                ))
                .await
            };
            let token = match token {
                Ok(token) => token,
                // Without a token challenge the server may not speak OAuth at all: when
                // signing in fails, its own refusal is the better reason.
                Err(e) if !offers_token_scheme(&response) && e.sign_in_url().is_none() => {
                    tracing::debug!(namespace = %self.namespace, reason = %e, "no sign-in for a 401 without a Bearer or DPoP challenge");
                    return Ok(response);
                }
                Err(e) => return Err(e),
            };
            drop(response);
            *lock(&self.access) = Some(token.clone());
            sent = Some(token);
        }
    }

    /// Sends a `GET` or `DELETE` of `session` that `make` builds from the HTTP client (the
    /// session's headers and the access token are added here); the status is not checked.
    ///
    /// With sign-in state, the request carries an access token: with `refresh_first`, the
    /// current one, refreshed first when it expires soon; without (the `DELETE` at shutdown,
    /// which must not wait on a token endpoint), the one the last request carried. A `401` to
    /// it is answered by one refresh of the grant (RFC 6749 §6) and one more try, unless its
    /// `WWW-Authenticate` names only another scheme (a proxy's `Basic`: a token does not help),
    /// or the token refused is one a refresh gave a request like this that was refused again (a
    /// server refusing this request whatever the token: each reopening of the stream would
    /// spend a refresh token). These requests never start a sign-in: the standalone stream and
    /// the `DELETE` run without a caller who could show a link, so a grant that cannot be
    /// refreshed leaves the `401` as it is (the next call signs in).
    ///
    /// # Errors
    /// A request that could not be sent ([`Error`] of a connect failure, a timeout).
    async fn send_session_request(
        &self,
        session: &Session,
        method: reqwest::Method,
        refresh_first: bool,
        make: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<Response, Error> {
        let http = self.http()?;
        let sent = match &self.auth {
            Some(auth) if refresh_first => match auth.token().await {
                Ok(token) => {
                    *lock(&self.access) = token.clone();
                    token
                }
                Err(e) => {
                    tracing::debug!(namespace = %self.namespace, reason = %e, "no fresh access token; sending the one held");
                    lock(&self.access).clone()
                }
            },
            Some(_) => lock(&self.access).clone(),
            None => None,
        };
        let make = &make;
        let send = |token: Option<AccessToken>| {
            let method = method.clone();
            async move {
                self.with_session(make(http), &method, token.as_ref(), Some(session), None)
                    .send()
                    .await
                    .map_err(|e| self.http_error(e))
            }
        };
        let mut response = send(sent.clone()).await?;
        for _ in 0..MAX_NONCE_RETRIES {
            if !self.wants_dpop_nonce(&response, sent.as_ref()) {
                break;
            }
            drop(response);
            response = send(sent.clone()).await?;
        }
        if refuses_for_nonce(&response, sent.as_ref()) {
            // A nonce the server still refuses, or one this client cannot use: no refresh is
            // spent on it.
            return Ok(response);
        }
        let (Some(auth), Some(sent)) = (&self.auth, sent) else {
            return Ok(response);
        };
        if response.status() != reqwest::StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let other_scheme = response
            .headers()
            .contains_key(reqwest::header::WWW_AUTHENTICATE)
            && !offers_token_scheme(&response);
        let refused_after_refresh = lock(&self.refused_after_refresh)
            .as_ref()
            .is_some_and(|t| sent.is(t));
        if other_scheme || refused_after_refresh {
            return Ok(response);
        }
        let Some(token) = auth.refreshed(&sent.token).await else {
            return Ok(response);
        };
        drop(response);
        *lock(&self.access) = Some(token.clone());
        let response = send(Some(token.clone())).await?;
        if response.status() == reqwest::StatusCode::UNAUTHORIZED {
            *lock(&self.refused_after_refresh) = Some(token.token);
        }
        Ok(response)
    }

    /// One POST with the session's headers and the current access token, if any.
    async fn send_once(
        &self,
        body: Bytes,
        token: Option<&AccessToken>,
        session: Option<&Session>,
        wire: &Wire<'_>,
    ) -> Result<Response, Error> {
        let request = self
            .with_session(
                self.http()?.post(self.url.clone()),
                &reqwest::Method::POST,
                token,
                session,
                Some(wire),
            )
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, JSON)
            .body(body);
        let Some(within) = wire.headers_within else {
            return request.send().await.map_err(|e| self.http_error(e));
        };
        match tokio::time::timeout(within, request.send()).await {
            Ok(sent) => sent.map_err(|e| self.http_error(e)),
            Err(_) => Err(Error::no_answer(wire.method, within)),
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
        Error::from_reqwest(error, self.origin.as_deref())
    }
}

impl crate::notices::Origin for Connection {
    fn namespace(&self) -> &str {
        Connection::namespace(self)
    }
    fn signals(&self) -> &Signals {
        Connection::signals(self)
    }
    fn server_text<'a>(&self, text: &'a str, max: usize) -> std::borrow::Cow<'a, str> {
        Connection::server_text(self, text, max)
    }
}

/// Where a request answered like the other era goes once the probe ruled
/// ([`Connection::reroute`]).
enum Rerouted {
    /// Sent once more on `on`; `confirmed`: the probe found the same era, so the same signal
    /// met again there is the server's own ([`Connection::confirm_own`]).
    Resend { on: Arc<Session>, confirmed: bool },
    /// Not sent again: the answer stands with this verdict, the server's own
    /// ([`Verdict::Own`]), or the other era's when the probe gave no verdict.
    Stands(Verdict),
}

/// What the connection sends to a session in the background, with no resend of its own but a
/// rate limit's ([`Connection::send_within`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Background {
    /// `notifications/cancelled` (MCP 2025-11-25, cancellation).
    Cancel,
    /// The answer to a request the server sent on a stream (MCP 2025-11-25, transports).
    Answer,
    /// The close's `DELETE` (MCP 2025-11-25, transports "Session Management").
    Delete,
}

impl Background {
    /// The method or kind it is logged and judged as.
    fn method(self) -> &'static str {
        match self {
            Self::Cancel => "notifications/cancelled",
            Self::Answer => "an answer",
            Self::Delete => "DELETE",
        }
    }
}

/// The one verdict on `error`, the answer to a request on a route of `era` (docs/connection.md
/// "Verdicts"), read in this order: nothing sent; a rate limit with its wait (also one met by
/// the renewal of an expired session); the session gone (a 404 for sure, the
/// server's words set aside); an [`EraSignal`], the server's own when `own` (the signals a
/// probe found to be the server's own answers to the request's method) holds it, else the
/// other era's; a lost reply; a malformed answer; a modern
/// route's `-32020`/`-32021`; JSON-RPC's `-32601` and `-32602`; else the answer stands. So a legacy session's `-32020` is never
/// a `HeaderMismatch`: it is the other era's until a probe makes it the tool's own.
pub(crate) fn judge(era: Era, error: &Error, own: impl Fn(EraSignal) -> bool) -> Verdict {
    if error.is_refused() {
        return Verdict::Unsent;
    }
    // A 429/503 with its wait, also one that refused the renewal of an expired session.
    if let Some((status, wait)) = error.rate_limited() {
        return Verdict::RateLimited {
            status: status.as_u16(),
            wait,
        };
    }
    if let Some(status) = error.busy() {
        return Verdict::Busy { status };
    }
    if error.is_session_expired() {
        return if error.is_expired_by_text() {
            Verdict::SetAside
        } else {
            Verdict::Expired
        };
    }
    if let Some(signal) = era_signal(era, error) {
        return if own(signal) {
            Verdict::Own(signal)
        } else {
            Verdict::OtherEra(signal)
        };
    }
    if error.is_lost_reply() {
        return Verdict::Lost;
    }
    if error.is_malformed() {
        return Verdict::Malformed;
    }
    match (era, error.rpc().map(|r| r.code)) {
        (Era::Modern, Some(codes::HEADER_MISMATCH)) => Verdict::HeaderMismatch,
        (Era::Modern, Some(codes::MISSING_REQUIRED_CLIENT_CAPABILITY)) => {
            Verdict::MissingCapability
        }
        (_, Some(codes::METHOD_NOT_FOUND)) => Verdict::MethodNotFound,
        (_, Some(codes::INVALID_PARAMS)) => Verdict::InvalidParams,
        _ => Verdict::Stands,
    }
}

/// The sign in `error`, the answer to a request on a route of `era`, that the server speaks the
/// other era, if it has one: a modern error to a legacy session; to a modern request, a plain
/// refusal (400, 404, 405 or 406 without a JSON-RPC error), which a legacy server gives a
/// request without a session, or an `UnsupportedProtocolVersion` whose `supported` list names
/// only legacy versions this client speaks (a server redeployed without 2026-07-28; MCP
/// 2026-07-28, basic/versioning "Backward Compatibility").
fn era_signal(era: Era, error: &Error) -> Option<EraSignal> {
    match era {
        Era::Legacy => error
            .rpc()
            .filter(|r| codes::is_modern(r.code))
            .map(|r| EraSignal::ModernError(r.code)),
        Era::Modern => {
            if error.is_plain_status()
                && let Some(status) = error.status()
                && matches!(status.as_u16(), 400 | 404 | 405 | 406)
            {
                return Some(EraSignal::PlainRefusal(status.as_u16()));
            }
            error
                .rpc()
                .filter(|r| {
                    modern::verdict_of_error(r.code, r.data.as_deref())
                        == modern::Discovered::LegacyOffered
                })
                .map(|_| EraSignal::LegacyVersionsOnly)
        }
    }
}

/// Whether `response` to a request that carried a DPoP-bound token (`sent`, with a proof) is a
/// `401` whose `DPoP` challenge says `use_dpop_nonce` (RFC 9449 §9): the server refuses the
/// proof's nonce, not the token, so no refresh or sign-in may be spent on it, whether or not a
/// usable nonce came. A `Bearer` token carried no proof, so no nonce can be what was refused.
fn refuses_for_nonce(response: &Response, sent: Option<&AccessToken>) -> bool {
    sent.is_some_and(|t| t.dpop.is_some())
        && response.status() == reqwest::StatusCode::UNAUTHORIZED
        && asks_for_dpop_nonce(response.headers())
}

/// The `Bearer` challenge of a `401` or `403` (RFC 6750 §3), if the response is one; an empty
/// one when it offers none.
fn auth_challenge(response: &Response) -> Option<Challenge> {
    let status = response.status();
    if status != reqwest::StatusCode::UNAUTHORIZED && status != reqwest::StatusCode::FORBIDDEN {
        return None;
    }
    Some(Challenge::from_headers(response.headers()))
}

/// Whether a `WWW-Authenticate` challenge of `response` has a token scheme, `Bearer` or `DPoP`
/// (RFC 9110 §11.6.1, RFC 9449 §7.1), so `Basic realm="bearer-gateway"` does not count.
fn offers_token_scheme(response: &Response) -> bool {
    Challenge::offered(response.headers()).is_some()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use reqwest::StatusCode;

    use super::{Era, EraSignal, Error, Verdict, judge};
    use crate::jsonrpc::RpcError;

    fn rpc(code: i64) -> Error {
        Error::rpc_error(RpcError::new(code, "said"))
    }

    fn status(code: u16, retry_after: Option<u64>) -> Error {
        let status = StatusCode::from_u16(code).unwrap();
        Error::http_status(status, retry_after.map(Duration::from_secs), String::new())
    }

    #[test]
    fn each_answer_gets_one_verdict_by_its_route_and_the_servers_own_answers() {
        let none = |_: EraSignal| false;
        let all = |_: EraSignal| true;
        let wait = Duration::from_secs(2);
        let lost = Error::session_lost(7, &Error::session_expired_by_text());
        let table: Vec<(Era, Error, bool, Verdict)> = vec![
            (
                Era::Legacy,
                Error::session_expired(),
                false,
                Verdict::Expired,
            ),
            (
                Era::Legacy,
                Error::session_expired_by_text(),
                false,
                Verdict::SetAside,
            ),
            (Era::Legacy, lost, false, Verdict::SetAside),
            (
                Era::Legacy,
                rpc(-32020),
                false,
                Verdict::OtherEra(EraSignal::ModernError(-32020)),
            ),
            // A probe found it the tool's own: never a HeaderMismatch on a legacy session.
            (
                Era::Legacy,
                rpc(-32020),
                true,
                Verdict::Own(EraSignal::ModernError(-32020)),
            ),
            (Era::Modern, rpc(-32020), false, Verdict::HeaderMismatch),
            (Era::Modern, rpc(-32021), false, Verdict::MissingCapability),
            (Era::Legacy, rpc(-32602), false, Verdict::InvalidParams),
            (Era::Modern, rpc(-32602), false, Verdict::InvalidParams),
            (Era::Legacy, rpc(-32601), false, Verdict::MethodNotFound),
            (Era::Modern, rpc(-32601), false, Verdict::MethodNotFound),
            (Era::Legacy, rpc(-32000), false, Verdict::Stands),
            (
                Era::Modern,
                status(404, None),
                false,
                Verdict::OtherEra(EraSignal::PlainRefusal(404)),
            ),
            (
                Era::Modern,
                status(405, None),
                true,
                Verdict::Own(EraSignal::PlainRefusal(405)),
            ),
            (Era::Legacy, status(404, None), false, Verdict::Stands),
            (
                Era::Legacy,
                status(429, Some(2)),
                false,
                Verdict::RateLimited { status: 429, wait },
            ),
            (
                Era::Modern,
                status(503, Some(2)),
                false,
                Verdict::RateLimited { status: 503, wait },
            ),
            (
                Era::Legacy,
                status(429, None),
                false,
                Verdict::Busy { status: 429 },
            ),
            (
                Era::Modern,
                status(503, None),
                false,
                Verdict::Busy { status: 503 },
            ),
            (Era::Legacy, status(500, Some(2)), false, Verdict::Stands),
            (
                Era::Legacy,
                Error::malformed("x".into()),
                false,
                Verdict::Malformed,
            ),
            (Era::Modern, Error::broken("cut"), false, Verdict::Lost),
            (Era::Legacy, Error::closed(), false, Verdict::Stands),
        ];
        for (era, error, own, want) in table {
            let got = if own {
                judge(era, &error, all)
            } else {
                judge(era, &error, none)
            };
            assert_eq!(got, want, "{era:?} {error}");
        }
    }

    #[test]
    fn a_judged_error_carries_its_verdict_and_an_unjudged_one_stands() {
        assert_eq!(rpc(-32020).verdict(), Verdict::Stands);
        assert_eq!(
            rpc(-32020).judged(Verdict::HeaderMismatch).verdict(),
            Verdict::HeaderMismatch
        );
        // An outer reading that found nothing keeps the inner one; any other replaces it.
        let inner = Verdict::RateLimited {
            status: 429,
            wait: std::time::Duration::from_secs(60),
        };
        let judged = rpc(-32020).judged(inner);
        assert_eq!(judged.judged(Verdict::Stands).verdict(), inner);
        let judged = rpc(-32020).judged(inner);
        assert_eq!(
            judged.judged(Verdict::Malformed).verdict(),
            Verdict::Malformed
        );
    }
}
