//! How requests reach the server in each protocol era: the era detection (MCP 2026-07-28,
//! basic/versioning "Backward Compatibility"), the legacy sessions (MCP 2025-11-25, lifecycle
//! and transports: session management) with their handshake, the single-flight task that
//! starts again when the server forgot the session, and the `DELETE` that ends a session.
//!
//! A modern server (2026-07-28) has no session: its [`Session`] is a stateless route (no id, the
//! version `2026-07-28`, what `server/discover` declared), never deleted, never expired, and a
//! request on it carries `_meta` and the standard headers instead ([`super::modern`]).
//!
//! The state is two machines behind the connection's lock, whose transitions are the methods
//! of [`Sessions`] and nothing else writes them: [`Known`], what the client knows of the
//! server's era, and [`Link`] (`Idle`, `Initializing`, `Live`, `Closed`), the route requests go
//! out on. `Live(s)` always agrees with the era: a session is installed together with the era
//! that made it.
//! - `Live` holds the session new requests go out on. A request carries the session it was
//!   sent on from then on (the in-flight table records it), never "the current one".
//! - `Initializing` holds the one running (re-)initialize task, spawned on the Host's runtime.
//!   Every request that finds no live session awaits the same task, so concurrent requests that
//!   saw the same expiry cause one `initialize`; a caller that gives up leaves the task running
//!   to completion, and the session it makes is owned like any other. It installs its session
//!   only while it is still the renewal the state holds, and then tells the server's task
//!   ([`crate::notices::Signals::session_renewed`]) whether only `tools/list` requests waited.
//! - Beside the machine, `owned` holds every session id a response header gave us that we have
//!   not deleted and the server has not forgotten — from the moment the header arrived, before
//!   the handshake finished. Ending the sessions (a failed start, the Pack's drop) deletes each
//!   of them, so no session the server issued is left behind, however a handshake was
//!   interrupted.
//! - Each session keeps what its `initialize` declared ([`Initialized`]: `tools`,
//!   `tools.listChanged`, `instructions`); a listing reads the one of the session it is made on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::HeaderValue;
use serde::Deserialize;
use tokio::sync::watch;

use super::events::AfterAnswer;
use super::modern;
use super::verdict::{self, Next, Settle, Spent, Stage, Verdict};
pub(crate) use super::verdict::{Era, EraSignal};
use super::{Background, Connection, Decoded, Error, lock};
use crate::jsonrpc::{self, Awaited};
use crate::limits;
use crate::protocol::{MODERN_VERSION, OFFERED_VERSION, SESSION_ID, SUPPORTED_VERSIONS};

/// What a server's `initialize` result declared that the Pack uses. Only `protocolVersion` is
/// required of the result; each of these is read on its own, and one of an unexpected type
/// counts as absent ([`jsonrpc::optional`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Initialized {
    /// Whether `capabilities` has `tools` (MCP spec, "Tools": capabilities). Without it the
    /// server is still asked for `tools/list` once, and a JSON-RPC error means it has no tools.
    pub(crate) tools: bool,
    /// Whether the server declared `capabilities.tools.listChanged: true` (MCP 2025-11-25,
    /// server/tools "List Changed Notification"): then the Pack holds the standalone `GET`
    /// stream open.
    pub(crate) tools_list_changed: bool,
    /// The result's `instructions` (MCP 2025-11-25, lifecycle: initialization), scrubbed of the
    /// entry's secrets and cut to [`limits::MAX_INSTRUCTIONS_BYTES`]; `None` when absent, blank
    /// or not a string.
    pub(crate) instructions: Option<Arc<str>>,
    /// The result's `serverInfo.description` (MCP 2025-11-25, schema `Implementation`),
    /// scrubbed and cut like `instructions`; `None` when absent, blank or not a string.
    pub(crate) description: Option<Arc<str>>,
    /// The protocol version requests carry: the one `initialize` negotiated, or `2026-07-28`
    /// for a modern server; `""` until known.
    pub(crate) version: &'static str,
}

impl Initialized {
    fn read(
        connection: &Connection,
        capabilities: Option<&serde_json::value::RawValue>,
        instructions: Option<&serde_json::value::RawValue>,
        server_info: Option<&serde_json::value::RawValue>,
    ) -> Self {
        #[derive(Deserialize)]
        struct ServerCapabilities<'a> {
            #[serde(borrow, default)]
            tools: Option<&'a serde_json::value::RawValue>,
        }
        #[derive(Deserialize)]
        struct ToolsCapability<'a> {
            #[serde(rename = "listChanged", borrow, default)]
            list_changed: Option<&'a serde_json::value::RawValue>,
        }
        let namespace = &*connection.namespace;
        let declared = capabilities
            .and_then(|raw| serde_json::from_str::<ServerCapabilities<'_>>(raw.get()).ok())
            .and_then(|c| c.tools)
            .filter(|raw| raw.get() != "null");
        let tools_capability: Option<ToolsCapability<'_>> =
            jsonrpc::optional(namespace, "capabilities.tools", declared);
        let tools_list_changed = jsonrpc::optional::<bool>(
            namespace,
            "capabilities.tools.listChanged",
            tools_capability.and_then(|t| t.list_changed),
        )
        .unwrap_or(false);
        let shown = |text: std::borrow::Cow<'_, str>| -> Option<Arc<str>> {
            if text.trim().is_empty() {
                return None;
            }
            let scrubbed = connection.redactor.scrub(&text);
            Some(Arc::from(
                limits::truncate(&scrubbed, limits::MAX_INSTRUCTIONS_BYTES).as_ref(),
            ))
        };
        let instructions: Option<std::borrow::Cow<'_, str>> =
            jsonrpc::optional(namespace, "instructions", instructions);
        let instructions = instructions.and_then(shown);
        #[derive(Deserialize)]
        struct Implementation<'a> {
            #[serde(borrow, default)]
            description: Option<&'a serde_json::value::RawValue>,
        }
        let server_info: Option<Implementation<'_>> =
            jsonrpc::optional(namespace, "serverInfo", server_info);
        let description: Option<std::borrow::Cow<'_, str>> = jsonrpc::optional(
            namespace,
            "serverInfo.description",
            server_info.and_then(|info| info.description),
        );
        let description = description.and_then(shown);
        Self {
            tools: declared.is_some(),
            tools_list_changed,
            instructions,
            description,
            version: "",
        }
    }
}

/// What the client knows of the server's era; the verdict belongs to the server for its life
/// in this Pack (MCP 2026-07-28, basic/versioning "Backward Compatibility").
///
/// ```text
///   Unknown ──server/discover answered, or a modern error──────▶ Era(Modern, none own)
///   Unknown ──anything else (4xx, -32601, empty, no answer)────▶ Era(Legacy, none own)
///   Era(e, own) ──an answer like the other era's (EraSignal)──▶ probed again at once:
///       e again ──▶ Era(e, own + that signal): the route is kept, the answer stands, and the
///                   same signal to the same method is the server's own from then on
///       the other ─▶ Era(other, none own): the route is set aside, the request resent once
///   Era(Legacy, _) ──initialize refused (a modern error, -32601, another 4xx)──▶ Unknown
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Known {
    /// Not probed yet, or an `initialize` suggested the other era: the next start asks
    /// `server/discover` first.
    Unknown,
    /// Decided: a legacy start goes straight to `initialize`, a modern one to `server/discover`;
    /// with the era signals a probe found to be this server's own answers.
    Era(Era, OwnAnswers),
}

impl Known {
    /// The era, when decided.
    pub(crate) fn era(&self) -> Option<Era> {
        match self {
            Known::Era(era, _) => Some(*era),
            Known::Unknown => None,
        }
    }
}

/// The era signals a probe found to be one server's own answers, each with the JSON-RPC
/// method it answered (at most [`OwnAnswers::MAX`]; the oldest goes first).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct OwnAnswers(Vec<(Box<str>, EraSignal)>);

impl OwnAnswers {
    /// How many are kept: one per method and signal the client meets, with room to spare.
    const MAX: usize = 16;

    fn holds(&self, method: &str, signal: EraSignal) -> bool {
        self.0.iter().any(|(m, s)| &**m == method && *s == signal)
    }

    fn add(&mut self, method: &str, signal: EraSignal) {
        if self.holds(method, signal) {
            return;
        }
        if self.0.len() == Self::MAX {
            self.0.remove(0);
        }
        self.0.push((method.into(), signal));
    }
}

/// What asking the era again after an [`EraSignal`] found ([`Connection::recheck`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rechecked {
    /// The same era, and the route is kept: the answer was the server's own.
    Own,
    /// The route is another one now: the probe found the other era (a modern route is
    /// installed at once; a legacy one is made by the next request's handshake), or another
    /// probe did meanwhile (a renewal of the same era is no move). The request goes once more
    /// on the live route.
    Moved,
    /// The same modern era, declaring other things (another replica, a redeploy): its new
    /// route is installed and the request goes once more on it. The era was confirmed, so the
    /// same signal met again there is the server's own ([`Connection::confirm_own`]): replicas
    /// whose declarations differ cost one probe, not one per answer.
    Renewed,
    /// The probe gave no verdict (a transport failure, a 5xx, a rate limit not waited out, no
    /// mutual version): the answer stands as the other era's, not as the server's own, and the
    /// same signal asks again next time.
    Unsure,
}

impl Rechecked {
    /// The verdict on the answer that carried `signal`, once the probe ruled: the server's own
    /// when it found the same era ([`Rechecked::Own`], or [`Rechecked::Renewed`]: the same
    /// modern era on a new route); else still the other era's (the route moved, or no verdict).
    pub(crate) fn verdict(self, signal: EraSignal) -> Verdict {
        match self {
            Rechecked::Own | Rechecked::Renewed => Verdict::Own(signal),
            Rechecked::Moved | Rechecked::Unsure => Verdict::OtherEra(signal),
        }
    }
}

/// What the request that met an [`EraSignal`] does once [`Connection::recheck`] found its
/// server still of the same era.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterRecheck {
    /// It goes once more (on the kept or the new route); a plain refusal met again there is
    /// the server's own ([`Connection::confirm_own`]), one met once may be a proxy's flap.
    Resend,
    /// Its answer stands and nothing is resent (`subscriptions/listen`): the probe's verdict
    /// is recorded by the probe itself, so a caller dropped meanwhile (the stream loop leaving
    /// a route the probe replaced) cannot lose it.
    Stands,
}

/// What requests go out on: a legacy session (or a stateless legacy server), or a modern
/// server's stateless route.
pub(crate) struct Session {
    /// Which era requests on it speak.
    pub(super) era: Era,
    /// The server's `Mcp-Session-Id`, when it gave one (never in the modern era).
    pub(super) id: Option<HeaderValue>,
    /// The negotiated protocol version, for `MCP-Protocol-Version`; unset until the server's
    /// `initialize` answer was read and accepted.
    version: OnceLock<HeaderValue>,
    /// Set once the client sent the `DELETE` for it, or the server said it forgot it: no
    /// request, cancel or `DELETE` goes to it any more.
    deleted: AtomicBool,
    /// What the server's `initialize` answer declared; unset until it was read and accepted.
    initialized: OnceLock<Initialized>,
}

impl Session {
    fn new(id: Option<HeaderValue>) -> Self {
        Self {
            era: Era::Legacy,
            id,
            version: OnceLock::new(),
            deleted: AtomicBool::new(false),
            initialized: OnceLock::new(),
        }
    }

    /// A modern server's route: version `2026-07-28`; what its `server/discover` declared is
    /// set once the answer was read.
    pub(super) fn modern() -> Self {
        let version = OnceLock::new();
        let _ = version.set(HeaderValue::from_static(MODERN_VERSION));
        Self {
            era: Era::Modern,
            id: None,
            version,
            deleted: AtomicBool::new(false),
            initialized: OnceLock::new(),
        }
    }

    /// The negotiated version, once there is one.
    pub(super) fn version(&self) -> Option<&HeaderValue> {
        self.version.get()
    }

    /// What the server's `initialize` answer declared, once it was accepted.
    pub(super) fn initialized(&self) -> Option<&Initialized> {
        self.initialized.get()
    }

    /// Whether the client deleted it or the server forgot it.
    pub(super) fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// Whether a `notifications/cancelled` may go to it (MCP 2025-11-25, cancellation): a
    /// legacy session the server has not forgotten (a 404, or a server since found modern,
    /// whose legacy sessions ended with the build that made them) and the client has not
    /// deleted. A modern request is cancelled by closing its stream (MCP 2026-07-28,
    /// basic/patterns/cancellation "Transport-Specific Cancellation"): nothing is sent. The
    /// one rule for every cancel: [`Connection::cancel`] and the close's.
    pub(super) fn takes_cancel(&self) -> bool {
        self.era == Era::Legacy && !self.is_deleted()
    }
}

/// A handle to one session (or modern route) for the layers above the connection: which one it
/// is ([`SessionHandle::is`]: the one the same handshake made, not just alike) and what its
/// `initialize` (or the route's `server/discover`) answer declared. The server's task holds
/// the live one ([`super::Connection::current`], [`super::Connection::live`]) for its change
/// stream and `ping`; a request reports the one its last send went out on
/// ([`super::Connection::request_declared`]), and a listing keeps the one its first page came
/// from, since a cursor belongs to it.
#[derive(Clone)]
pub(crate) struct SessionHandle(Arc<Session>);

impl SessionHandle {
    pub(super) fn new(session: &Arc<Session>) -> Self {
        Self(Arc::clone(session))
    }

    /// The session itself, for the connection's own use.
    pub(super) fn session(&self) -> &Arc<Session> {
        &self.0
    }

    /// What the session's `initialize` (or the route's `server/discover`) answer declared;
    /// `None` for a session made before any answer was read.
    pub(crate) fn declared(&self) -> Option<&Initialized> {
        self.0.initialized()
    }

    /// Whether both are the same session: not just alike, the one the same handshake made.
    pub(crate) fn is(&self, other: &SessionHandle) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What a renewal ends with, shared with every waiter.
type Renewed = Option<Result<Arc<Session>, Arc<Error>>>;

/// The running (re-)initialize task.
pub(super) struct Renewal {
    /// Which renewal this is: the task installs its session only while it is still the one
    /// the state holds.
    number: u64,
    outcome: watch::Receiver<Renewed>,
    task: tokio::task::JoinHandle<()>,
    /// Whether only `tools/list` requests (a listing's pages) asked for this renewal so far.
    /// Every requester that joins clears it unless it is one too; the task reads it, under the
    /// state lock, when it installs the session (see [`crate::notices::Signals::session_renewed`]).
    by_listing: bool,
}

/// Where a connection's session stands: the one machine every request, listing page, stream
/// and cancel reads (ARCHITECTURE "The connection machine").
///
/// ```text
///            initialize ok              server forgot it (404, "no valid session")
///   Idle ───────────────────▶ Live(s) ─────────────────────────────▶ Idle
///    │  ▲                      ▲  │                                   │
///    │  │ renewal failed,      │  │ a request finds no session        │
///    │  │ start abandoned      │  ▼                                   │
///    │  └──────────────── Initializing(renewal) ◀─────────────────────┘
///    │                          renewal ok ─▶ Live(new)
///    │                          renewal refused 429/503 with Retry-After ─▶ Throttled(until)
///    │                          Throttled ──a request after `until`──▶ Initializing
///    └── close (from any state) ─▶ Closed   (a renewal running is stopped)
/// ```
pub(super) enum Link {
    /// No session: before the first handshake, after the server forgot the last one, after a
    /// renewal failed and after a failed start was abandoned. The next request starts a renewal.
    Idle,
    /// A renewal task is making a session; every request that needs one awaits it.
    Initializing(Renewal),
    /// The session new requests go out on, with what its `initialize` declared.
    Live(Arc<Session>),
    /// The last renewal was refused `429`/`503` with a `Retry-After` (RFC 6585 §4): no
    /// renewal starts before `until`; a request that needs a session meanwhile gets that
    /// refusal (`cause`), whose verdict names the wait, and waits it out or answers with it.
    Throttled {
        until: tokio::time::Instant,
        cause: Arc<Error>,
    },
    /// The connection ended (the Pack was dropped): no session is made or handed out any more.
    Closed,
}

/// How many sessions a connection installed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Installs {
    /// Every session installed.
    pub(crate) all: u64,
    /// The first start's and those of renewals that a call or the standalone stream waited for
    /// (not only a listing's own pages; see [`crate::notices::Signals::session_renewed`]).
    pub(crate) not_by_listing: u64,
}

/// A connection's session state: the [`Link`], and every session id the server gave that the
/// client still has to delete; see the module docs.
pub(super) struct Sessions {
    /// What the client knows of the server's era.
    known: Known,
    link: Link,
    owned: Vec<Arc<Session>>,
    /// Counts the abandoned starts: an `initialize` sent before the latest abandon gives a
    /// session that is deleted as soon as its header arrives.
    generation: u64,
    /// Numbers the renewals.
    renewals: u64,
    /// Counts the sessions installed (`Live` entered): all of them, and those not made for
    /// listings alone. The standalone stream's loop waits on it.
    installs: watch::Sender<Installs>,
    /// Counts every transition of `link` ([`Sessions::relink`]): the stream's loop watches it
    /// to leave a stream whose session stopped being the live one.
    transitions: watch::Sender<u64>,
}

impl Default for Sessions {
    fn default() -> Self {
        Self {
            known: Known::Unknown,
            link: Link::Idle,
            owned: Vec::new(),
            generation: 0,
            renewals: 0,
            installs: watch::Sender::new(Installs::default()),
            transitions: watch::Sender::new(0),
        }
    }
}

impl Sessions {
    /// The session new requests go out on, if any.
    pub(super) fn current(&self) -> Option<Arc<Session>> {
        match &self.link {
            Link::Live(session) => Some(Arc::clone(session)),
            _ => None,
        }
    }

    fn is_closed(&self) -> bool {
        matches!(self.link, Link::Closed)
    }

    /// The server's era, when decided.
    pub(super) fn era(&self) -> Option<Era> {
        self.known.era()
    }

    /// Whether `signal` in an answer to `method` on a route of `era` is a known own answer of
    /// the server (a probe confirmed `era` after it), so no sign of the other era.
    pub(super) fn is_own(&self, era: Era, method: &str, signal: EraSignal) -> bool {
        matches!(&self.known, Known::Era(known, own) if *known == era && own.holds(method, signal))
    }

    /// Transition of [`Known`]: a start (or a probe) learned the server's era (a
    /// `server/discover` answer, or `initialize` after the probe found the server legacy). The
    /// own answers found so far are kept when the era is the same, and dropped when it
    /// changed. A server found modern holds no sessions (MCP 2026-07-28, basic/versioning): the
    /// legacy ones still owned (the server was legacy before a restart) ended with the build
    /// that made them, and get no `DELETE`.
    fn learned(&mut self, era: Era) {
        if era == Era::Modern {
            for gone in self.owned.drain(..) {
                gone.deleted.store(true, Ordering::Release);
            }
        }
        if self.known.era() != Some(era) {
            self.known = Known::Era(era, OwnAnswers::default());
        }
    }

    /// Transition of [`Known`]: a probe after `signal` in an answer to `method` found the server
    /// still in `era`: the signal is the server's own answer to that method from now on.
    fn confirmed(&mut self, era: Era, method: &str, signal: EraSignal) {
        self.learned(era);
        if let Known::Era(_, own) = &mut self.known {
            own.add(method, signal);
        }
    }

    /// Transition of [`Known`]: an `initialize` was refused in a way that suggests the other era
    /// (a modern error, `-32601`, another `4xx` to a server known legacy): the next start asks
    /// `server/discover` first.
    fn unsure(&mut self) {
        self.known = Known::Unknown;
    }

    /// Every write of `link` goes through here: it replaces the state (returning the old one)
    /// and tells the watchers of [`Sessions::transitions`].
    fn relink(&mut self, link: Link) -> Link {
        let before = std::mem::replace(&mut self.link, link);
        self.transitions.send_modify(|n| *n += 1);
        before
    }

    /// Sees each transition of the [`Link`] from now on.
    pub(super) fn transitions(&self) -> watch::Receiver<u64> {
        self.transitions.subscribe()
    }

    /// Sees each session installed from now on.
    pub(super) fn installs(&self) -> watch::Receiver<Installs> {
        self.installs.subscribe()
    }

    /// Transition: a handshake made `session` (the first start's, or renewal `number`'s).
    /// Installed unless the connection closed, or the renewal is no longer the one running (a
    /// failed start abandoned it). Returns whether it was installed and, for a renewal, whether
    /// only listings asked for it.
    fn install(&mut self, session: &Arc<Session>, renewal: Option<u64>) -> Option<bool> {
        let by_listing = match (&self.link, renewal) {
            (Link::Closed, _) => return None,
            (Link::Initializing(running), Some(number)) if running.number == number => {
                running.by_listing
            }
            (_, Some(_)) => return None,
            (_, None) => true,
        };
        self.learned(session.era);
        self.relink(Link::Live(Arc::clone(session)));
        self.installs.send_modify(|n| {
            n.all += 1;
            if !by_listing || renewal.is_none() {
                n.not_by_listing += 1;
            }
        });
        Some(by_listing)
    }

    /// Transition: renewal `number` failed with `cause`, if it is still the one running: back to
    /// `Idle`, or `Throttled` until the wait a rate limit named is over.
    fn renewal_failed(&mut self, number: u64, cause: &Arc<Error>) {
        if matches!(&self.link, Link::Initializing(r) if r.number == number) {
            let wait = match super::judge(Era::Legacy, cause, |_| false) {
                Verdict::RateLimited { wait, .. } => Some(wait),
                _ => None,
            };
            // Held at most as long as the stream loop's longest backoff: a server naming
            // years (or more than an `Instant` holds) is asked again after that.
            let now = tokio::time::Instant::now();
            self.relink(match wait {
                Some(wait) => Link::Throttled {
                    until: now + wait.min(limits::RETRY_MAX),
                    cause: Arc::clone(cause),
                },
                None => Link::Idle,
            });
        }
    }

    /// Transition: the server said it does not know `stale`. The live session goes `Idle` if it
    /// is that one; either way it is no longer owned (there is nothing left to delete).
    pub(super) fn forget(&mut self, stale: &Arc<Session>) {
        if matches!(&self.link, Link::Live(s) if Arc::ptr_eq(s, stale)) {
            self.relink(Link::Idle);
        }
        // Marked as ended: a cancel of a request still held on it is not sent there.
        stale.deleted.store(true, Ordering::Release);
        self.owned.retain(|s| !Arc::ptr_eq(s, stale));
    }

    /// Transition: the live session goes `Idle` if it is `stale`, which stays owned and is
    /// deleted with the others: the server's words (a 400) said it is gone, not a 404.
    pub(super) fn retire(&mut self, stale: &Arc<Session>) {
        if matches!(&self.link, Link::Live(s) if Arc::ptr_eq(s, stale)) {
            self.relink(Link::Idle);
        }
    }

    /// The one write of a [`Verdict`] on the session `on` it came
    /// from ([`super::verdict::Verdict::settles`]): forgotten, set aside, or kept (a recheck is
    /// the probe's, [`Connection::recheck`], which sets aside what it moves off).
    pub(super) fn settle(&mut self, on: &Arc<Session>, settle: Settle) {
        match settle {
            Settle::Forget => self.forget(on),
            Settle::SetAside => self.retire(on),
            Settle::Recheck(_) | Settle::Keep => {}
        }
    }

    /// Transition: the sessions end (`close`: for good). Returns the renewal that was running
    /// and the live session, leaving `Idle` (or `Closed`).
    fn end(&mut self, close: bool) -> (Option<Renewal>, Option<Arc<Session>>) {
        if !close {
            self.generation += 1;
        }
        let after = if close { Link::Closed } else { Link::Idle };
        match self.relink(after) {
            Link::Initializing(renewal) => (Some(renewal), None),
            Link::Live(session) => (None, Some(session)),
            Link::Idle | Link::Throttled { .. } | Link::Closed => (None, None),
        }
    }
}

impl Connection {
    /// Starts the route and makes it the current one ([`Connection::open`]: `server/discover`
    /// unless the server is known legacy, then the legacy handshake when it is legacy). Returns
    /// what the server declared that the Pack uses.
    ///
    /// # Errors
    /// Any transport failure, a JSON-RPC error, an unsupported version or none in common
    /// ([`Error::no_mutual_version`]), a session id that is not visible ASCII. A session the
    /// failed handshake got is deleted before the error returns.
    ///
    /// # Cancel safety
    /// Dropping it may leave a session id the server gave in the owned set; the caller ends it
    /// with [`Connection::abandon`] or [`Connection::close`], which delete it.
    pub(crate) async fn start(self: &Arc<Self>) -> Result<Initialized, Error> {
        let (session, initialized) = self.open().await?;
        match lock(&self.sessions).install(&session, None) {
            Some(_) => Ok(initialized),
            None => Err(Error::closed()),
        }
    }

    /// The session a request goes out on: the current one, or the outcome of the renewal task
    /// (spawned when none runs). `stale` is a session the server just said it does not know:
    /// it is forgotten first, unless a newer one already replaced it. `by_listing` says that the
    /// asking request is a `tools/list`: a renewal that only listings asked for asks for no
    /// re-listing once it installs its session (the listing goes on in the new session).
    ///
    /// # Errors
    /// The renewal failed ([`Error::reinitialize`]) or the connection is closed.
    ///
    /// # Cancel safety
    /// Cancel safe: the renewal runs in its own task and finishes without the caller.
    pub(super) async fn session(
        self: &Arc<Self>,
        stale: Option<&Arc<Session>>,
        by_listing: bool,
    ) -> Result<Arc<Session>, Error> {
        let mut outcome = {
            let mut state = lock(&self.sessions);
            if let Some(stale) = stale {
                state.forget(stale);
            }
            match &mut state.link {
                Link::Closed => return Err(Error::closed()),
                Link::Live(current) => return Ok(Arc::clone(current)),
                Link::Initializing(renewal) => {
                    renewal.by_listing &= by_listing;
                    renewal.outcome.clone()
                }
                Link::Throttled { until, cause } if tokio::time::Instant::now() < *until => {
                    // The refusal, asking for what is left of its wait.
                    let left = until.saturating_duration_since(tokio::time::Instant::now());
                    let cause = cause
                        .with_wait_left(left)
                        .map_or_else(|| Arc::clone(cause), Arc::new);
                    return Err(Error::reinitialize(cause));
                }
                Link::Idle | Link::Throttled { .. } => self.spawn_renewal(&mut state, by_listing),
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

    /// Spawns the renewal task on the Host's runtime; called with the state locked. Once the
    /// task installed its session it tells the server's task
    /// ([`crate::notices::Signals::session_renewed`], with whether only listings asked for it).
    fn spawn_renewal(
        self: &Arc<Self>,
        state: &mut Sessions,
        by_listing: bool,
    ) -> watch::Receiver<Renewed> {
        tracing::debug!(namespace = %self.namespace, "initializing again");
        state.renewals += 1;
        let number = state.renewals;
        let (done, outcome) = watch::channel(None);
        let this = Arc::clone(self);
        let task = self.runtime.spawn(async move {
            let made = this.renew().await.map_err(Arc::new);
            let installed = {
                let mut state = lock(&this.sessions);
                match &made {
                    Ok(session) => state.install(session, Some(number)),
                    Err(cause) => {
                        state.renewal_failed(number, cause);
                        None
                    }
                }
            };
            if let Some(by_listing) = installed {
                this.signals.session_renewed(by_listing);
            }
            let _ = done.send(Some(made));
        });
        state.relink(Link::Initializing(Renewal {
            number,
            outcome: outcome.clone(),
            task,
            by_listing,
        }));
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
    async fn renew(self: &Arc<Self>) -> Result<Arc<Session>, Error> {
        let backoff = ExponentialBuilder::new()
            .with_min_delay(limits::REINIT_RETRY_FIRST)
            .with_factor(2.0)
            .with_max_times(limits::REINIT_RETRIES);
        let attempts = (|| async { self.open().await.map(|(session, _)| session) })
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .when(|e: &Error| {
                (e.status() == Some(StatusCode::NOT_FOUND) || e.is_refused()) && !self.is_closed()
            });
        match tokio::time::timeout(limits::START_DEADLINE, attempts).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::protocol(format!(
                "starting again (server/discover or initialize) did not finish within {} seconds",
                limits::START_DEADLINE.as_secs()
            ))),
        }
    }

    /// One start of the route, not yet current: `server/discover` first (the era probe of MCP
    /// 2026-07-28, transports "Backward Compatibility") unless the server is known legacy; a
    /// modern server's route is then ready, and a legacy one gets the handshake
    /// ([`Connection::handshake`]). An `initialize` answered with a modern error, or with
    /// `-32601` (no legacy server lacks `initialize`), means the server is modern after all:
    /// it is probed once more at once; a server known legacy whose
    /// `initialize` gets another 4xx is probed at the next start.
    ///
    /// # Cancel safety
    /// As [`Connection::handshake`].
    async fn open(self: &Arc<Self>) -> Result<(Arc<Session>, Initialized), Error> {
        if self.is_closed() {
            return Err(Error::closed());
        }
        let known = lock(&self.sessions).era();
        if known != Some(Era::Legacy)
            && let Some(modern) = self.discover().await?
        {
            return Ok(modern);
        }
        match self.handshake().await {
            Err(e)
                if matches!(
                    super::judge(Era::Legacy, &e, |_| false),
                    Verdict::OtherEra(EraSignal::ModernError(_)) | Verdict::MethodNotFound
                ) =>
            {
                // A modern error to initialize, or a server that does not know it: modern after
                // all (a restart onto 2026-07-28, or a probe answer that could not be read);
                // asked once more now.
                tracing::debug!(namespace = %self.namespace, "initialize was answered with a modern error; asking server/discover");
                lock(&self.sessions).unsure();
                match self.discover().await? {
                    Some(modern) => Ok(modern),
                    None => Err(e),
                }
            }
            Err(e)
                if known == Some(Era::Legacy)
                    && e.status().is_some_and(|s| {
                        s.is_client_error() && !matches!(s.as_u16(), 401 | 403 | 404 | 408 | 429)
                    }) =>
            {
                // Maybe a restart onto the modern era (a modern server refuses an initialize
                // without the modern headers with a 400): the next start asks first.
                lock(&self.sessions).unsure();
                Err(e)
            }
            other => other,
        }
    }

    /// The answer to a request of `method` on route `on` carried `signal`, a sign of the other
    /// era: asks the server `server/discover` again, one such probe at a time, in a task of the
    /// connection (MCP 2026-07-28, basic/versioning "Backward Compatibility"). The same era:
    /// the signal is the server's own answer to `method` from now on, and the route is kept
    /// ([`Rechecked::Own`]) — unless it is a modern route whose new `server/discover` declares
    /// other things, which is replaced by the new one. The other era: `on` stops being the
    /// route (a legacy session stays owned, deleted with the others unless the server was
    /// found modern); a modern route found is installed at once ([`Rechecked::Moved`]). A
    /// signal already confirmed, or a route of the era another probe already moved off, is
    /// answered without a probe; a route that left by a renewal of its own era is probed like
    /// a live one. The probe's `server/discover` is asked once more after a rate limit's wait
    /// that fits the bound and the caller's deadline `until` ([`verdict::next`]). A route
    /// installed here asks for a re-listing unless `by_listing`
    /// ([`crate::notices::Signals::session_renewed`]). Whether the same era makes a plain
    /// refusal the server's own at once depends on `after` ([`AfterRecheck`]).
    ///
    /// # Cancel safety
    /// Cancel safe: the probe runs in its own task and finishes without the caller, verdict
    /// recorded. [`Connection::close`] stops it (nothing is sent after the close).
    pub(super) async fn recheck(
        self: &Arc<Self>,
        on: &Arc<Session>,
        method: &str,
        signal: EraSignal,
        by_listing: bool,
        after: AfterRecheck,
        until: Option<tokio::time::Instant>,
    ) -> Rechecked {
        let this = Arc::clone(self);
        let on = Arc::clone(on);
        let method: Box<str> = method.into();
        let probe = self.runtime.spawn(async move {
            let _one = this.rechecks.lock().await;
            {
                let state = lock(&this.sessions);
                if state.is_own(on.era, &method, signal) {
                    return Rechecked::Own;
                }
                // Another probe found the other era: `on` is over. A route that left by a
                // renewal of its own era (forgotten, set aside) is no sign of the era, and
                // its answer is probed like one on the live route.
                if state.era().is_some_and(|era| era != on.era) {
                    return Rechecked::Moved;
                }
            }
            tracing::debug!(namespace = %this.namespace, method = &*method, ?signal, era = ?on.era, "an answer looked like the other era's; asking server/discover again");
            // Stopped by the close: a probe still out then sends nothing more (its `-32022`
            // re-ask, a sign-in's resend), and nothing after the close needs its verdict.
            let mut spent = Spent::default();
            let discovered = loop {
                let discovered = tokio::select! {
                    discovered = this.discover() => discovered,
                    () = this.closing.cancelled() => return Rechecked::Unsure,
                };
                // The probe is a request like every other: refused unprocessed with a wait
                // that fits the bound and the caller's deadline, it is asked once more after
                // the wait (RFC 6585 §4; `verdict::next`).
                if let Err(e) = &discovered {
                    let verdict = super::judge(Era::Modern, e, |_| false);
                    let left = until.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
                    if let Next::Wait(wait) =
                        verdict::next(verdict, Stage::Status, spent, false, left)
                    {
                        spent.waited = true;
                        tracing::debug!(namespace = %this.namespace, wait_ms = wait.as_millis() as u64, "server/discover was rate limited; asking again after the wait");
                        tokio::select! {
                            () = tokio::time::sleep(wait) => continue,
                            () = this.closing.cancelled() => return Rechecked::Unsure,
                        }
                    }
                }
                break discovered;
            };
            let found = match discovered {
                Ok(found) => found,
                Err(e) => {
                    tracing::debug!(namespace = %this.namespace, reason = %e, "server/discover gave no verdict; the answer stands");
                    let mut state = lock(&this.sessions);
                    if state.era().is_some_and(|era| era != on.era) {
                        // It named the other era all the same (a modern error): `on` is over.
                        state.retire(&on);
                        return Rechecked::Moved;
                    }
                    return Rechecked::Unsure;
                }
            };
            let era = found.as_ref().map_or(Era::Legacy, |_| Era::Modern);
            let mut state = lock(&this.sessions);
            if era == on.era {
                tracing::debug!(namespace = %this.namespace, method = &*method, ?signal, "the server is still of the same era: that answer is its own");
                // A plain refusal may be a proxy's flap: a caller that resends records it as
                // the server's own only once the request met it again
                // ([`Connection::confirm_own`]).
                if after == AfterRecheck::Stands || !matches!(signal, EraSignal::PlainRefusal(_)) {
                    state.confirmed(era, &method, signal);
                }
            }
            let replacement = match found {
                // The same modern server, declaring what it declared: nothing to change.
                Some((_, declared)) if on.initialized() == Some(&declared) => None,
                Some((route, _)) => Some(route),
                None if on.era == Era::Legacy => None,
                None => {
                    // A legacy server now: the next request makes its session.
                    state.retire(&on);
                    return Rechecked::Moved;
                }
            };
            let Some(route) = replacement else {
                return Rechecked::Own;
            };
            state.retire(&on);
            let installed = state.install(&route, None).is_some();
            drop(state);
            if installed {
                this.signals.session_renewed(by_listing);
            }
            if era == on.era {
                Rechecked::Renewed
            } else {
                Rechecked::Moved
            }
        });
        probe.await.unwrap_or(Rechecked::Unsure)
    }

    /// Records `signal`, answering `method` on `on`, as the server's own answer from now on: a
    /// probe found the same era ([`Rechecked::Own`]) and the request met the signal again.
    pub(super) fn confirm_own(&self, on: &Session, method: &str, signal: EraSignal) {
        let mut state = lock(&self.sessions);
        if state.era() == Some(on.era) {
            state.confirmed(on.era, method, signal);
        }
    }

    /// The era probe: `server/discover` as a modern request (MCP 2026-07-28, server/discover).
    /// `Some` with the modern route and what the server declared, when it is modern; `None`
    /// when it is legacy (the verdict is recorded either way; see [`modern::Discovered`]).
    ///
    /// # Errors
    /// A failure that gives no verdict (a transport failure, a 5xx, a 408/429, a redirect, a
    /// sign-in), the modern server's own refusal, or [`Error::no_mutual_version`].
    async fn discover(self: &Arc<Self>) -> Result<Option<(Arc<Session>, Initialized)>, Error> {
        #[derive(Deserialize)]
        struct DiscoverResult<'a> {
            #[serde(rename = "supportedVersions", borrow, default)]
            supported_versions: Option<&'a serde_json::value::RawValue>,
            #[serde(borrow, default)]
            capabilities: Option<&'a serde_json::value::RawValue>,
            #[serde(borrow, default)]
            instructions: Option<&'a serde_json::value::RawValue>,
            #[serde(rename = "serverInfo", borrow, default)]
            server_info: Option<&'a serde_json::value::RawValue>,
        }
        let session = Arc::new(Session::modern());
        let id = self.fresh_id();
        let decode = |result: &serde_json::value::RawValue,
                      _: &Bytes|
         -> Decoded<(modern::Discovered, Initialized)> {
            let read: DiscoverResult<'_> = serde_json::from_str(result.get()).map_err(|_| {
                Error::malformed("the server's server/discover result is not an object".to_string())
            })?;
            let listed = read.supported_versions.and_then(|raw| {
                let wrapped = format!(r#"{{"supported":{}}}"#, raw.get());
                let wrapped = serde_json::value::RawValue::from_string(wrapped).ok()?;
                modern::supported_versions(Some(&wrapped))
            });
            let verdict = match listed {
                // No `supportedVersions` list (which every DiscoverResult has): a server that
                // answers any method with a result, not a modern one; the handshake decides.
                None => modern::Discovered::Legacy,
                Some(list) if list.iter().any(|v| v == MODERN_VERSION) => {
                    modern::Discovered::Modern
                }
                Some(list)
                    if list
                        .iter()
                        .any(|v| SUPPORTED_VERSIONS.contains(&v.as_str())) =>
                {
                    modern::Discovered::LegacyOffered
                }
                Some(list) => modern::Discovered::NoMutualVersion(list),
            };
            let mut initialized =
                Initialized::read(self, read.capabilities, read.instructions, read.server_info);
            initialized.version = MODERN_VERSION;
            Ok((verdict, initialized))
        };
        // A server that does not answer in time is legacy (MCP 2026-07-28, basic/versioning
        // "Backward Compatibility"): its headers, and then its answer, each within the bound.
        let within = limits::DISCOVER_TIMEOUT;
        let wire = super::Wire::new("server/discover", None, &[]).headers_within(within);
        let ask = || {
            let span = super::trace::request_span("server/discover", None, id, &self.peer);
            let body =
                span.in_scope(|| super::request_body(Era::Modern, id, "server/discover", "{}"));
            let asked = async {
                super::trace::on_route(&self.redactor, Some(MODERN_VERSION), None);
                let response = self.post(body, &wire, Some(&session), None).await?;
                let awaited = Awaited {
                    id,
                    method: "server/discover",
                };
                let read = self.read_reply(
                    response,
                    awaited,
                    &session,
                    None,
                    &decode,
                    AfterAnswer::Briefly,
                );
                tokio::time::timeout(within, read)
                    .await
                    .unwrap_or_else(|_| Err(Error::no_answer("server/discover", within)))
            };
            async move {
                let outcome = tracing::Instrument::instrument(asked, span.clone()).await;
                super::trace::on_outcome(&span, &outcome);
                outcome
            }
        };
        let mut answered = ask().await;
        if let Err(e) = &answered
            && let Some(rpc) = e.rpc()
            && modern::refuses_what_it_supports(rpc.code, rpc.data.as_deref())
        {
            // It names the version it refused as supported (a server whose first answer is a
            // version refusal): the best mutual version is that one, asked once more.
            tracing::debug!(namespace = %self.namespace, "server/discover refused 2026-07-28 but names it as supported; asking once more");
            answered = ask().await;
        }
        let (verdict, answered) = match answered {
            Ok((verdict, initialized)) => (verdict, Ok(initialized)),
            Err(e) => {
                let verdict = match e.rpc() {
                    Some(rpc) => modern::verdict_of_error(rpc.code, rpc.data.as_deref()),
                    None if e.is_unreadable_answer() => modern::Discovered::Legacy,
                    None if e.is_no_answer() => {
                        tracing::debug!(namespace = %self.namespace, within_s = within.as_secs(), "server/discover got no answer in time: the server is legacy");
                        modern::Discovered::Legacy
                    }
                    None => match e.status() {
                        Some(status)
                            if status.is_client_error()
                                && !matches!(status.as_u16(), 401 | 403 | 408 | 429) =>
                        {
                            modern::Discovered::Legacy
                        }
                        // No verdict: the start fails and is tried again.
                        _ => return Err(e),
                    },
                };
                (verdict, Err(e))
            }
        };
        tracing::debug!(namespace = %self.namespace, verdict = verdict.name(), "server/discover answered");
        match verdict {
            modern::Discovered::Modern => {
                lock(&self.sessions).learned(Era::Modern);
                let initialized = answered?;
                let _ = session.initialized.set(initialized.clone());
                Ok(Some((session, initialized)))
            }
            modern::Discovered::LegacyOffered | modern::Discovered::Legacy => {
                lock(&self.sessions).learned(Era::Legacy);
                Ok(None)
            }
            modern::Discovered::NoMutualVersion(theirs) => {
                // Scrubbed whole, then cut: a secret the server echoes leaves no prefix.
                let theirs: Vec<String> = theirs
                    .iter()
                    .take(modern::MAX_SUPPORTED)
                    .map(|v| self.server_text(v, modern::MAX_VERSION_BYTES).into_owned())
                    .collect();
                Err(Error::no_mutual_version(theirs))
            }
        }
    }

    /// `initialize` and `notifications/initialized`; returns the new session without making it
    /// current, and what the server declared. A session id is owned from the header that gave it; every later failure deletes
    /// it. Server requests on the `initialize` stream, and its resumption, carry the id (the
    /// version only once negotiated).
    ///
    /// # Cancel safety
    /// Cancel safe as to sessions: the `initialize` POST runs in its own task (see
    /// [`Connection::post_initialize`]), so dropping this never loses a session id the server
    /// gives; a session already received stays in the owned set, deleted by whoever ends the
    /// sessions.
    async fn handshake(self: &Arc<Self>) -> Result<(Arc<Session>, Initialized), Error> {
        if self.is_closed() {
            return Err(Error::closed());
        }
        let params = serde_json::json!({
            "protocolVersion": OFFERED_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "plugin-mcp", "version": env!("CARGO_PKG_VERSION")},
        });
        let id = self.fresh_id();
        let span = super::trace::request_span("initialize", None, id, &self.peer);
        let body = span
            .in_scope(|| super::request_body(Era::Legacy, id, "initialize", &params.to_string()));
        let work = async {
            let (response, session) = self.post_initialize(body).await?;
            if let Some(id) = session.id.as_ref().and_then(|id| id.to_str().ok()) {
                super::trace::on_route(&self.redactor, None, Some(id));
            }
            match self.negotiate(response, id, &session).await {
                Ok(initialized) => {
                    let version = session.version().and_then(|v| v.to_str().ok());
                    super::trace::on_route(&self.redactor, version, None);
                    Ok((session, initialized))
                }
                Err(e) => {
                    self.discard(&session).await;
                    Err(e)
                }
            }
        };
        let outcome = tracing::Instrument::instrument(work, span.clone()).await;
        super::trace::on_outcome(&span, &outcome);
        outcome
    }

    /// POSTs `initialize` in a task on the Host's runtime (tracked, so ending the sessions
    /// waits for it) that reads the answer's status and header and owns the session id it
    /// gives, or deletes it at once when the connection closed meanwhile. The caller only
    /// awaits the task: dropping the caller (the Pack's drop, the start deadline) lets the POST
    /// finish, so the session the server made is learnt and deleted. Once the connection
    /// closes, a POST still unanswered [`limits::HANDSHAKE_GRACE`] later is given up. A session
    /// whose header arrives after the start was abandoned (its deadline passed) is deleted at
    /// once.
    ///
    /// # Errors
    /// As [`Connection::post`]; a session id that is not visible ASCII; closed.
    ///
    /// # Cancel safety
    /// Cancel safe: the work runs in its own task.
    async fn post_initialize(
        self: &Arc<Self>,
        body: Bytes,
    ) -> Result<(reqwest::Response, Arc<Session>), Error> {
        let this = Arc::clone(self);
        let generation = lock(&self.sessions).generation;
        let work = async move {
            let response = this
                .post(body, &super::Wire::new("initialize", None, &[]), None, None)
                .await?;
            let session_id = match response.headers().get(&SESSION_ID) {
                Some(value) => Some(valid_session_id(value)?),
                None => None,
            };
            let session = Arc::new(Session::new(session_id));
            if session.id.is_some() && !this.own(&session, generation) {
                // Shut down (or the start abandoned) while the answer was on its way: end the
                // session at once.
                this.delete(&session).await;
                return Err(Error::closed());
            }
            Ok((response, session))
        };
        let closing = self.closing.clone();
        let task = self.handshakes.spawn_on(
            async move {
                tokio::select! {
                    outcome = work => outcome,
                    () = async {
                        closing.cancelled().await;
                        tokio::time::sleep(limits::HANDSHAKE_GRACE).await;
                    } => Err(Error::closed()),
                }
            },
            &self.runtime,
        );
        task.await.unwrap_or_else(|_| Err(Error::closed()))
    }

    /// Reads the `initialize` answer, checks the version, sends `notifications/initialized`.
    async fn negotiate(
        self: &Arc<Self>,
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
            #[serde(borrow, default)]
            instructions: Option<&'a serde_json::value::RawValue>,
            #[serde(rename = "serverInfo", borrow, default)]
            server_info: Option<&'a serde_json::value::RawValue>,
        }
        let decode =
            |result: &serde_json::value::RawValue, _: &Bytes| -> Decoded<(String, Initialized)> {
                let result: InitializeResult<'_> =
                    serde_json::from_str(result.get()).map_err(|_| {
                        Error::malformed(
                            "the server's initialize result has no protocolVersion".to_string(),
                        )
                    })?;
                let initialized = Initialized::read(
                    self,
                    result.capabilities,
                    result.instructions,
                    result.server_info,
                );
                Ok((result.protocol_version.into_owned(), initialized))
            };
        let awaited = Awaited {
            id,
            method: "initialize",
        };
        let (chosen, mut initialized) = self
            .read_response(response, awaited, session, None, &decode)
            .await?;
        let Some(version) = SUPPORTED_VERSIONS.iter().find(|v| **v == chosen.as_str()) else {
            let shown = self.server_text(&chosen, 64);
            return Err(Error::protocol(format!(
                "the server chose MCP protocol version \"{shown}\", which this client does not support (it supports {})",
                SUPPORTED_VERSIONS.join(", ")
            )));
        };
        initialized.version = version;
        let _ = session.version.set(HeaderValue::from_static(version));
        let _ = session.initialized.set(initialized.clone());
        self.notify(
            "notifications/initialized",
            &serde_json::json!({}),
            Some(session),
        )
        .await?;
        tracing::debug!(namespace = %self.namespace, version, tools = initialized.tools, list_changed = initialized.tools_list_changed, "initialized");
        Ok(initialized)
    }

    /// Whether [`Connection::close`] began: no request or session is made any more.
    pub(super) fn is_closed(&self) -> bool {
        lock(&self.sessions).is_closed()
    }

    /// Adds a session to the owned set; `false` once the connection is closed or the start
    /// whose `initialize` (sent in `generation`) gave it was abandoned.
    fn own(&self, session: &Arc<Session>, generation: u64) -> bool {
        let mut state = lock(&self.sessions);
        if state.is_closed() || state.generation != generation {
            return false;
        }
        state.owned.push(Arc::clone(session));
        true
    }

    /// Deletes a session a failed handshake got, unless something else already ended it.
    ///
    /// # Cancel safety
    /// Cancel safe: the work runs in a cleanup task ([`Connection::abandon`]'s), which
    /// [`Connection::close`] awaits before it ends the sessions, so the Pack's drop, which stops
    /// the renewal running this, never loses the `DELETE` of a session taken out of the owned
    /// set.
    async fn discard(self: &Arc<Self>, session: &Arc<Session>) {
        let this = Arc::clone(self);
        let session = Arc::clone(session);
        let cleanup = self.cleanups.spawn_on(
            async move {
                let was_owned = {
                    let mut state = lock(&this.sessions);
                    let before = state.owned.len();
                    state.owned.retain(|s| !Arc::ptr_eq(s, &session));
                    state.owned.len() != before
                };
                if was_owned {
                    this.delete(&session).await;
                }
            },
            &self.runtime,
        );
        let _ = cleanup.await;
    }

    /// Ends a failed start: stops a running renewal, cancels the requests in flight on the
    /// sessions it owns, then deletes those sessions. The connection stays usable: the next
    /// start makes a new session.
    ///
    /// The work runs in a task on the Host's runtime that [`Connection::close`] awaits before
    /// it ends the sessions, so no session is lost when the caller is dropped part-way.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it leaves the cleanup running to completion.
    pub(crate) async fn abandon(self: &Arc<Self>) {
        let this = Arc::clone(self);
        let cleanup = self.cleanups.spawn_on(
            async move {
                let ended = lock(&this.sessions).end(false);
                this.end_sessions(ended, None, "the client abandoned the start of the session")
                    .await;
            },
            &self.runtime,
        );
        let _ = cleanup.await;
    }

    /// Ends the connection for good (the Pack was dropped): no request or session is made any
    /// more; a running renewal is stopped (an `initialize` it has out gets
    /// [`limits::HANDSHAKE_GRACE`] to bring its session id, then deleted); every request in
    /// flight is sent its `notifications/cancelled` on the session it went out on, and the
    /// cancels of dropped calls and answers to server requests already on their way are
    /// awaited — and only then is each owned
    /// session deleted (`DELETE`, each bounded by [`limits::GOODBYE_TIMEOUT`]). Cleanups of
    /// failed starts still running ([`Connection::abandon`]) are awaited first. The steps before
    /// the `DELETE`s end [`limits::GOODBYE_TIMEOUT`] before [`limits::CLOSE_DEADLINE`], so the
    /// whole close takes at most that; a connection with nothing to end takes no time.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping it part-way may leave sessions undeleted. The Pack runs it to
    /// completion in the server's task.
    pub(crate) async fn close(self: &Arc<Self>) {
        let deadline = tokio::time::Instant::now() + limits::CLOSE_DEADLINE;
        let before_deletes = deadline - limits::GOODBYE_TIMEOUT;
        if let Some(auth) = &self.auth {
            auth.stop();
        }
        let (renewal, live) = lock(&self.sessions).end(true);
        self.closing.cancel();
        if let Some(renewal) = renewal {
            // Its `initialize` POST, if one is out, runs in a task of its own (`handshakes`)
            // that owns the session id it brings: nothing is lost by stopping the rest now.
            renewal.task.abort();
        }
        self.cleanups.close();
        let _ = tokio::time::timeout_at(before_deletes, self.cleanups.wait()).await;
        let until = Some(before_deletes);
        self.end_sessions((None, live), until, "the client was shut down")
            .await;
    }

    /// The work of [`Connection::abandon`] (`until` is `None`) and [`Connection::close`]
    /// (`until`: when the steps before the `DELETE`s must have ended).
    ///
    /// # Cancel safety
    /// Not cancel safe: the owned sessions are taken out before their `DELETE`s.
    async fn end_sessions(
        self: &Arc<Self>,
        (renewal, live): (Option<Renewal>, Option<Arc<Session>>),
        until: Option<tokio::time::Instant>,
        reason: &'static str,
    ) {
        let close = until.is_some();
        // Each step before the DELETEs: bounded by GOODBYE_TIMEOUT, and at shutdown by `until`.
        let step = || {
            let bound = tokio::time::Instant::now() + limits::GOODBYE_TIMEOUT;
            until.map_or(bound, |until| bound.min(until))
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
        // An `initialize` POST still on its way deletes the session its answer gives at once
        // (closed, or its start abandoned); at shutdown, wait for those (bounded).
        if close {
            self.handshakes.close();
            let grace = tokio::time::Instant::now() + limits::HANDSHAKE_GRACE;
            let _ = tokio::time::timeout_at(grace.min(step()), self.handshakes.wait()).await;
        }
        // A renewal stopped part-way may still have installed its session: end that one too.
        let (live, sessions) = {
            let mut state = lock(&self.sessions);
            let installed = state.end(close).1;
            (live.or(installed), std::mem::take(&mut state.owned))
        };
        let idless = live.filter(|c| c.id.is_none());
        let mut on: Vec<Arc<Session>> = sessions.clone();
        on.extend(idless);
        let cancels = lock(&self.flights).drain(&on, close);
        let sends = cancels
            .iter()
            .filter(|(_, session)| session.takes_cancel())
            .map(|(id, session)| self.send_cancel(*id, session, reason));
        let _ = tokio::time::timeout_at(step(), futures_util::future::join_all(sends)).await;
        // Cancels of dropped calls and answers to server requests already on their way go
        // before the DELETE too.
        self.before_delete.close();
        let _ = tokio::time::timeout_at(step(), self.before_delete.wait()).await;
        if !close {
            self.before_delete.reopen();
        }
        let deletes = sessions.iter().map(|session| self.delete(session));
        futures_util::future::join_all(deletes).await;
    }

    /// `DELETE` of one session (MCP 2025-11-25, transports "Session Management"), best effort,
    /// bounded by [`limits::GOODBYE_TIMEOUT`]; any answer is fine but a rate limit: refused
    /// `429`/`503` with a `Retry-After` that ends within the bound, the session was not ended
    /// (RFC 6585 §4), and the `DELETE` is sent once more after the wait ([`verdict::next`]).
    ///
    /// # Cancel safety
    /// The session is marked deleted before the request goes out: dropping this leaves it
    /// undeleted on the server and no later cancel is sent to it.
    async fn delete(self: &Arc<Self>, session: &Arc<Session>) {
        if session.id.is_none() || session.deleted.swap(true, Ordering::AcqRel) {
            return;
        }
        let deadline = tokio::time::Instant::now() + limits::GOODBYE_TIMEOUT;
        let send = || async {
            let response = self
                .send_session_request(session, reqwest::Method::DELETE, false, |http| {
                    http.delete(self.url.clone())
                })
                .await?;
            let status = response.status().as_u16();
            self.check_status(response, Some(session), None)
                .await
                .map(|_| status)
        };
        let status = match self
            .send_within(session, Background::Delete, deadline, send)
            .await
        {
            Some(Ok(status)) => Some(status),
            Some(Err(e)) => e.status().map(|s| s.as_u16()),
            None => None,
        };
        tracing::debug!(namespace = %self.namespace, status, "deleted session");
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
    fn an_answer_is_the_servers_own_only_when_the_probe_found_the_same_era() {
        let signal = EraSignal::ModernError(-32020);
        let table = [
            (Rechecked::Own, Verdict::Own(signal)),
            (Rechecked::Renewed, Verdict::Own(signal)),
            (Rechecked::Moved, Verdict::OtherEra(signal)),
            // No verdict: never presented as the server's own answer.
            (Rechecked::Unsure, Verdict::OtherEra(signal)),
        ];
        for (rechecked, verdict) in table {
            assert_eq!(rechecked.verdict(signal), verdict, "{rechecked:?}");
        }
    }

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

    #[test]
    fn a_cancel_goes_only_to_a_legacy_session_still_known() {
        let live = Arc::new(Session::new(Some(HeaderValue::from_static("s-1"))));
        assert!(live.takes_cancel());
        assert!(!Session::modern().takes_cancel());
        // Forgotten by a 404: the one write of that verdict.
        let mut state = Sessions::default();
        state.owned.push(Arc::clone(&live));
        state.settle(&live, Settle::Forget);
        assert!(!live.takes_cancel() && state.owned.is_empty());
        // Set aside by the server's words: still owned (deleted at the drop), still cancelled.
        let aside = Arc::new(Session::new(Some(HeaderValue::from_static("s-2"))));
        state.owned.push(Arc::clone(&aside));
        state.settle(&aside, Settle::SetAside);
        assert!(aside.takes_cancel() && state.owned.len() == 1);
        // A server found modern: its legacy sessions ended with the build that made them.
        state.learned(Era::Modern);
        assert!(!aside.takes_cancel() && state.owned.is_empty());
    }
}
