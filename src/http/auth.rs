//! The sign-in state of one connection: which access token goes out as
//! `Authorization: Bearer`, what a `401` or a `403 insufficient_scope` does, and the sign-in
//! link while one waits for the browser (MCP 2025-11-25 "Authorization"; RFC 6750 §3).
//!
//! Invariants:
//! - only an entry that configures no `Authorization` header has this state, so a configured
//!   header is never replaced and its `401` stays a plain error;
//! - the token is added per request and never stored in the configured header map;
//! - at most one sign-in starts at a time per server, and at most one link waits;
//! - a request is sent at most [`MAX_AUTH_RETRIES`] more times after a `401`/`403`, so a server
//!   that keeps refusing ends in an error, never a loop;
//! - every token learned is given to the entry's redactor before any request carries it;
//! - a sign-in link or metadata URL holding a configured secret is never shown: that sign-in
//!   is refused (a scrubbed link would be useless);
//! - a resource indicator (RFC 8707) holding one of the entry's secrets is never sent: the same
//!   check goes with every grant request ([`crate::auth::discovery::ResourceIndicator`]).
//!
//! # The sign-in phase
//!
//! Where the sign-in stands is one [`Phase`] behind one lock, changed only by its event
//! methods; a grant held while a link waits, or a link without its task, cannot be written.
//!
//! ```text
//!                       grant adopted
//!     +-----------+ ---------------------------> +-----------------+
//!     | SignedOut |                              | SignedIn(grant) |
//!     +-----------+ <--------------------------- +-----------------+
//!       |      ^           grant refused             |          ^
//!       |      | failure                   link made |          | redirect done
//!       |      | reported            (a step-up; the |          | (tokens)
//!       |      | (by the next start)  grant dropped) v          |
//!       |    +------------------+  redirect done  +----------------------+
//!       |    | Failed{reason}   | <-------------- | Waiting{link, task}  |
//!       |    +------------------+    (error)      +----------------------+
//!       |                                                ^
//!       +------------------- link made ------------------+
//!
//!     any phase --stop--> Stopped{grant}    (final: no sign-in starts, no link waits)
//! ```
//!
//! What each phase owns:
//! - `SignedOut`: nothing; the next `401` starts a sign-in (a stored grant first).
//! - `SignedIn(grant)`: the [`Tokens`] every request's token comes from.
//! - `Waiting{link, task}`: the link shown in the status, the task waiting for the
//!   browser's redirect, and where the redirect's address pasted by hand goes; no grant (a grant refused or stepped up from was dropped before).
//! - `Failed{reason}`: why the browser's sign-in did not complete; the next start reports it
//!   once (as [`Error::auth`], so it shows in the status), then makes a new link.
//! - `Stopped{grant}`: the connection is closing; the grant it held, if any, still serves the
//!   goodbye requests (and a grant a start adopts meanwhile joins it), but no link is made.
//!
//! A logout changes no phase: it deletes the store's file only, and a held grant stays until
//! its next refresh finds the file gone (README "Signing in").
//!
//! Starts are serialized (single-flight) by a separate async mutex that holds no state: a
//! start awaits the network between its events, and the phase's lock is never held across an
//! await.

use std::sync::{Arc, Mutex};

use reqwest::Url;
use reqwest::header::HeaderMap;
use secrecy::SecretString;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use super::{Error, lock};
use crate::auth::callback::Pasted;
use crate::auth::challenge::Challenge;
use crate::auth::config::OAuthConfig;
use crate::auth::scopes::StepUp;
use crate::auth::signin::{self, EntrySecrets, Started};
use crate::auth::store::Store;
use crate::auth::tokens::{AccessToken, ScrubText, Tokens};
use crate::redact::{HoldsSecret, Redactor};

/// How many times one request is sent again after the server refused its token.
pub(super) const MAX_AUTH_RETRIES: u32 = 2;

/// Why a sign-in whose link holds a secret is refused.
const REPEATS_SECRET: &str = "the authorization server's metadata repeats a secret of this \
     server entry; refusing to show its link";

/// Whether a sign-in link (or a metadata URL) holds one of the entry's secrets, configured or
/// learned (a token, a client secret, a DPoP proof a hostile server saw), checked on the text
/// exactly as it would be shown ([`Redactor::shown_checker`]). Only inside an occurrence of the
/// entry's own `oauth.clientId`, `oauth.clientMetadataUrl` or `oauth.scopes` may a secret show:
/// a link must carry the client id and the scopes, also when the config takes them from
/// `${env:NAME}`. A secret that contains one of them (a header value starting with the client
/// id) refuses the link all the same.
fn link_holds_secret(
    redactor: &Redactor,
    config: &OAuthConfig,
) -> impl Fn(&str) -> bool + Send + Sync + 'static {
    let scopes = config.scopes.iter().flat_map(|scopes| {
        // Each scope, and the `scope` parameter they make together (RFC 6749 §3.3).
        scopes
            .iter()
            .cloned()
            .chain(std::iter::once(scopes.join(" ")))
    });
    let public = [
        config.client_id.clone(),
        config.client_metadata_url.as_ref().map(|u| u.to_string()),
    ]
    .into_iter()
    .flatten()
    .chain(scopes)
    .collect();
    redactor.shown_checker(public)
}

/// Where one connection's sign-in stands (see the module docs' diagram). Changed only by the
/// event methods below; each takes the phase it finds and leaves exactly one.
enum Phase {
    /// No grant, no sign-in running.
    SignedOut,
    /// A grant is held; requests carry its access token.
    SignedIn(Arc<Tokens>),
    /// A sign-in waits for the browser.
    Waiting {
        /// The link shown in the status.
        link: Arc<str>,
        /// The task waiting for the redirect; aborted when the phase leaves `Waiting` any
        /// other way than by that redirect.
        task: AbortHandle,
        /// Takes the redirect's address pasted by hand (closed once the wait has ended).
        paste: tokio::sync::mpsc::Sender<Pasted>,
    },
    /// The browser's sign-in did not complete; the next start reports why, once.
    Failed {
        /// Scrubbed of the entry's secrets and cut ([`Auth::reason`]).
        reason: String,
    },
    /// The connection is closing: final.
    Stopped {
        /// The grant held when it stopped (or adopted after), for the goodbye requests.
        grant: Option<Arc<Tokens>>,
    },
}

/// What a start finds ([`Phase::start`]).
enum Start {
    /// A grant is held (another request signed in while this one waited): use it.
    Held(Arc<Tokens>),
    /// A sign-in already waits for the browser: show its link.
    Waiting(Arc<str>),
    /// The last sign-in failed: report why (the phase is now `SignedOut`).
    Failed(String),
    /// The connection is closing: no sign-in starts.
    Stopped,
    /// Begin a sign-in.
    Begin,
}

/// Only the phase's name: a link carries the sign-in's `state`, and a grant its tokens.
impl std::fmt::Debug for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::SignedOut => "SignedOut",
            Phase::SignedIn(_) => "SignedIn",
            Phase::Waiting { .. } => "Waiting",
            Phase::Failed { .. } => "Failed",
            Phase::Stopped { grant: Some(_) } => "Stopped(with a grant)",
            Phase::Stopped { grant: None } => "Stopped",
        })
    }
}

impl Phase {
    /// The grant requests' tokens come from: held signed in, or kept by a stop.
    fn grant(&self) -> Option<Arc<Tokens>> {
        match self {
            Phase::SignedIn(tokens)
            | Phase::Stopped {
                grant: Some(tokens),
            } => Some(Arc::clone(tokens)),
            _ => None,
        }
    }

    /// The link of the sign-in waiting for the browser.
    fn link(&self) -> Option<Arc<str>> {
        match self {
            Phase::Waiting { link, .. } => Some(Arc::clone(link)),
            _ => None,
        }
    }

    /// Event: a start (serialized) looks at the phase. A held grant serves it unless it asks
    /// for more scopes (`step_up`); a waiting link is shown; a failure is reported once
    /// (`Failed` -> `SignedOut`); a stopped connection starts nothing.
    fn start(&mut self, step_up: bool) -> Start {
        match self {
            Phase::SignedIn(tokens)
            | Phase::Stopped {
                grant: Some(tokens),
            } if !step_up => Start::Held(Arc::clone(tokens)),
            Phase::Waiting { link, .. } => Start::Waiting(Arc::clone(link)),
            Phase::Failed { reason } => {
                let reason = std::mem::take(reason);
                *self = Phase::SignedOut;
                Start::Failed(reason)
            }
            Phase::Stopped { .. } => Start::Stopped,
            Phase::SignedOut | Phase::SignedIn(_) => Start::Begin,
        }
    }

    /// Event: a grant adopted (a stored grant, or one from the client credentials grant): it
    /// becomes the grant, replacing any other (a waiting sign-in is aborted, and `true` says it
    /// ended). Stopped, it is kept for the goodbye requests and the phase stays final.
    fn grant_adopted(&mut self, tokens: Arc<Tokens>) -> bool {
        match self {
            Phase::Stopped { grant } => {
                *grant = Some(tokens);
                false
            }
            Phase::Waiting { task, .. } => {
                task.abort();
                *self = Phase::SignedIn(tokens);
                true
            }
            Phase::SignedOut | Phase::SignedIn(_) | Phase::Failed { .. } => {
                *self = Phase::SignedIn(tokens);
                false
            }
        }
    }

    /// Event: the grant `tokens` was refused (`invalid_grant`, or a step-up asks for more): it
    /// is dropped, unless another start already replaced it.
    fn grant_refused(&mut self, tokens: &Arc<Tokens>) {
        match self {
            Phase::SignedIn(held) if Arc::ptr_eq(held, tokens) => *self = Phase::SignedOut,
            Phase::Stopped { grant } if grant.as_ref().is_some_and(|g| Arc::ptr_eq(g, tokens)) => {
                *grant = None;
            }
            _ => {}
        }
    }

    /// Event: a sign-in link made, with the `task` waiting for its redirect: the phase waits
    /// for the browser, dropping a grant still held (a step-up's: requests go without a token
    /// until the new grant arrives, as after the grant refused). Stopped, the task is aborted
    /// and `false` says no link waits.
    fn link_made(
        &mut self,
        link: Arc<str>,
        task: AbortHandle,
        paste: tokio::sync::mpsc::Sender<Pasted>,
    ) -> bool {
        match self {
            Phase::Stopped { .. } => {
                task.abort();
                false
            }
            Phase::Waiting { task: earlier, .. } => {
                // Not reached (a start finding a link shows it); at most one link waits.
                earlier.abort();
                *self = Phase::Waiting { link, task, paste };
                true
            }
            Phase::SignedOut | Phase::SignedIn(_) | Phase::Failed { .. } => {
                *self = Phase::Waiting { link, task, paste };
                true
            }
        }
    }

    /// Where a pasted redirect address goes: the waiting sign-in's, else `None`.
    fn paste(&self) -> Option<tokio::sync::mpsc::Sender<Pasted>> {
        match self {
            Phase::Waiting { paste, .. } => Some(paste.clone()),
            _ => None,
        }
    }

    /// Event: the browser's redirect done for the sign-in of `link`, with its grant or the
    /// reason it failed. `true` when that sign-in was the one waiting (it ended); otherwise
    /// (stopped, or replaced) nothing changes.
    fn redirect_done(&mut self, link: &Arc<str>, outcome: Result<Arc<Tokens>, String>) -> bool {
        match self {
            Phase::Waiting { link: waiting, .. } if Arc::ptr_eq(waiting, link) => {
                *self = match outcome {
                    Ok(tokens) => Phase::SignedIn(tokens),
                    Err(reason) => Phase::Failed { reason },
                };
                true
            }
            _ => false,
        }
    }

    /// Event: stop (the connection is closing): a waiting sign-in is aborted; a held grant is
    /// kept for the goodbye requests.
    fn stop(&mut self) {
        let grant = match std::mem::replace(self, Phase::Stopped { grant: None }) {
            Phase::Waiting { task, .. } => {
                task.abort();
                None
            }
            Phase::SignedIn(tokens) => Some(tokens),
            Phase::Stopped { grant } => grant,
            Phase::SignedOut | Phase::Failed { .. } => None,
        };
        *self = Phase::Stopped { grant };
    }
}

/// One connection's sign-in state.
pub(crate) struct Auth {
    /// The entry's namespace: with the URL and the client, it keys the entry's store file, so
    /// two entries with the same url sign in on their own.
    namespace: Arc<str>,
    config: OAuthConfig,
    store: Option<Store>,
    /// Gives every token learned to the entry's redactor.
    learn: Arc<crate::redact::LearnSecret>,
    /// Whether a text holds one of the entry's secrets, configured or learned, as it would be
    /// shown or sent ([`link_holds_secret`]): for the sign-in link, and for the resource
    /// indicator of every grant request.
    holds_secret: Arc<HoldsSecret>,
    /// Scrubs the entry's secrets (configured and learned) from every failure reason and log
    /// line: an authorization server may echo a token or a header value into its errors.
    scrub: Arc<ScrubText>,
    /// Where the sign-in stands: the one place its state lives.
    phase: Mutex<Phase>,
    /// Serializes sign-in starts (single-flight); holds no state.
    starting: tokio::sync::Mutex<()>,
    /// Notified when a waiting sign-in ends (tokens, or a failure that needs a new link).
    ended: Notify,
    step_up: StepUp,
}

impl Auth {
    /// The sign-in state for an entry, or `None` when its `headers` configure `Authorization`
    /// (that entry never starts OAuth).
    pub(super) fn for_entry(
        namespace: Arc<str>,
        headers: &HeaderMap,
        config: OAuthConfig,
        redactor: &Redactor,
    ) -> Option<Arc<Auth>> {
        if headers.contains_key(reqwest::header::AUTHORIZATION) {
            return None;
        }
        let store = match Store::from_env() {
            Ok(store) => Some(store),
            Err(e) => {
                tracing::warn!(
                    "sign-in credentials will not be kept across restarts: {}",
                    e.message()
                );
                None
            }
        };
        let holds_secret = Arc::new(link_holds_secret(redactor, &config));
        Some(Arc::new(Auth {
            namespace,
            config,
            store,
            learn: Arc::new(redactor.learner()),
            holds_secret,
            scrub: Arc::new(redactor.scrubber()),
            phase: Mutex::new(Phase::SignedOut),
            starting: tokio::sync::Mutex::new(()),
            ended: Notify::new(),
            step_up: StepUp::default(),
        }))
    }

    /// The sign-in phase, locked.
    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        lock(&self.phase)
    }

    /// The link of the sign-in waiting for the browser, if one waits.
    pub(super) fn link(&self) -> Option<Arc<str>> {
        self.phase().link()
    }

    /// Resolves when a waiting sign-in ends (at once if one ended since the last call).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(super) async fn ended(&self) {
        self.ended.notified().await;
    }

    /// Stops a sign-in waiting for the browser (the connection is closing).
    /// Final: no sign-in starts after it; a held grant still serves the goodbye requests.
    pub(super) fn stop(&self) {
        self.phase().stop();
    }

    /// The access token to send now, refreshed first when it expires soon; `None` before any
    /// sign-in, or after the grant was refused (the server's `401` then starts a sign-in).
    ///
    /// # Errors
    /// [`Error::auth`] when a refresh failed for another reason than `invalid_grant`.
    ///
    /// # Cancel safety
    /// Cancel safe (a refresh finishes in its own task).
    pub(super) async fn token(&self) -> Result<Option<AccessToken>, Error> {
        let tokens = self.phase().grant();
        let Some(tokens) = tokens else {
            return Ok(None);
        };
        match tokens.access_token().await {
            Ok(token) => Ok(Some(token)),
            Err(e) if e.is_sign_in_required() => {
                self.forget(&tokens);
                Ok(None)
            }
            Err(e) => Err(self.error(&e)),
        }
    }

    /// The server refused `sent` with `401`: the token a refresh of the held grant gives, or
    /// `None` when there is no grant or it cannot be refreshed (a grant the authorization server
    /// refused as `invalid_grant` is dropped, so the next request signs in). Never starts a
    /// sign-in.
    ///
    /// # Cancel safety
    /// Cancel safe (a refresh finishes in its own task).
    pub(super) async fn refreshed(&self, sent: &SecretString) -> Option<AccessToken> {
        let tokens = self.phase().grant()?;
        match tokens.rejected(sent).await {
            Ok(token) => Some(token),
            Err(e) => {
                if e.is_sign_in_required() {
                    self.forget(&tokens);
                }
                tracing::debug!(
                    "no refresh for a 401 to a session request: {}",
                    self.reason(e.message())
                );
                None
            }
        }
    }

    /// The server accepted `sent` (a 2xx to a request carrying it): a later `401` to it is
    /// answered by a refresh again ([`Tokens::accepted`]).
    pub(super) fn accepted(&self, sent: &SecretString) {
        if let Some(tokens) = self.phase().grant() {
            tokens.accepted(sent);
        }
    }

    /// The server refused `sent` (or no token) with `401` and `challenge`: the token to send
    /// the request again with, after a refresh, a stored grant or a client credentials grant.
    ///
    /// # Errors
    /// [`Error::sign_in`] with the link when a user must sign in; [`Error::auth`] when a step
    /// failed.
    ///
    /// # Cancel safety
    /// Cancel safe in effect: a refresh finishes in its own task; a dropped start leaves at
    /// most a stored registration.
    pub(super) async fn unauthorized(
        self: &Arc<Self>,
        server_url: &Url,
        runtime: &tokio::runtime::Handle,
        challenge: &Challenge,
        sent: Option<&SecretString>,
    ) -> Result<AccessToken, Error> {
        let tokens = self.phase().grant();
        if let (Some(tokens), Some(sent)) = (tokens, sent) {
            if tokens.just_refreshed(sent) {
                // Refused right after a refresh: refreshing again would give the same kind of
                // token (a server that drops a scope on refresh) and loop; one link instead.
                tracing::info!(
                    "the server refused the token a refresh just gave; a new sign-in is needed"
                );
                self.forget(&tokens);
            } else {
                match tokens.rejected(sent).await {
                    Ok(token) => return Ok(token),
                    Err(e) if e.is_sign_in_required() => self.forget(&tokens),
                    Err(e) => return Err(self.error(&e)),
                }
            }
            return self
                .start(server_url, runtime, challenge, false, None)
                .await;
        }
        self.start(server_url, runtime, challenge, true, None).await
    }

    /// The server answered `403 insufficient_scope` with `challenge` to the request `key` (its
    /// method, and a tool call's name): a new sign-in asking for the union of the held and the
    /// challenged scopes, at most [`crate::auth::scopes::MAX_STEP_UPS`] times per scope until a
    /// request refused for it goes through ([`crate::auth::scopes::StepUp`]).
    ///
    /// # Errors
    /// As [`Auth::unauthorized`]; [`Error::auth`] once the step-ups for the scopes are used up.
    ///
    /// # Cancel safety
    /// As [`Auth::unauthorized`].
    pub(super) async fn insufficient_scope(
        self: &Arc<Self>,
        server_url: &Url,
        runtime: &tokio::runtime::Handle,
        challenge: &Challenge,
        key: &str,
    ) -> Result<AccessToken, Error> {
        let tokens = self.phase().grant();
        let held = match &tokens {
            Some(tokens) => tokens.scopes().await,
            None => Vec::new(),
        };
        let scopes = self
            .step_up
            .next(&held, challenge, key)
            .map_err(|e| self.error(&e))?;
        if let Some(tokens) = &tokens {
            self.forget(tokens);
        }
        self.start(server_url, runtime, challenge, false, Some(scopes))
            .await
    }

    /// Whether a request refused with `403 insufficient_scope` waits to go through (see
    /// [`Auth::succeeded`]).
    pub(super) fn step_up_waiting(&self) -> bool {
        self.step_up.waiting()
    }

    /// The request `key` (see [`Auth::insufficient_scope`]) went through: the scopes it was
    /// refused for may be asked for again.
    pub(super) fn succeeded(&self, key: &str) {
        self.step_up.succeeded(key);
    }

    /// [`Error::auth`] with [`Auth::reason`] of `failure`'s message, lasting when `failure` is
    /// ([`crate::auth::Error::is_lasting`]).
    fn error(&self, failure: &crate::auth::Error) -> Error {
        Error::auth(self.reason(failure.message()), failure.is_lasting())
    }

    /// `message` scrubbed of the entry's secrets, then cut to
    /// [`crate::limits::MAX_REASON_BYTES`] (scrubbed first, so no part of a secret is left at
    /// the cut).
    fn reason(&self, message: &str) -> String {
        let scrubbed = (self.scrub)(message);
        crate::limits::truncate(&scrubbed, crate::limits::MAX_REASON_BYTES).into_owned()
    }

    /// Drops `tokens` as the current grant, unless another start already replaced it.
    fn forget(&self, tokens: &Arc<Tokens>) {
        self.phase().grant_refused(tokens);
    }

    /// Adopts `tokens` as the grant ([`Phase::grant_adopted`]).
    fn adopt(&self, tokens: &Arc<Tokens>) {
        let ended = self.phase().grant_adopted(Arc::clone(tokens));
        if ended {
            self.ended.notify_one();
        }
    }

    /// Starts a sign-in (single-flight): a grant ready now gives its token; a sign-in needing
    /// the browser leaves its link and a task waiting for the redirect, and gives
    /// [`Error::sign_in`]; a stopped connection gives [`Error::closed`].
    async fn start(
        self: &Arc<Self>,
        server_url: &Url,
        runtime: &tokio::runtime::Handle,
        challenge: &Challenge,
        reuse_grant: bool,
        scopes: Option<Vec<String>>,
    ) -> Result<AccessToken, Error> {
        let _one = self.starting.lock().await;
        let found = self.phase().start(scopes.is_some());
        match found {
            // Another request signed in while this one waited.
            Start::Held(tokens) => {
                return tokens.access_token().await.map_err(|e| self.error(&e));
            }
            Start::Waiting(link) => return Err(Error::sign_in(link)),
            Start::Failed(reason) => return Err(Error::auth(reason, false)),
            Start::Stopped => return Err(Error::closed()),
            Start::Begin => {}
        }
        let mut reuse_grant = reuse_grant;
        let sign_in = loop {
            let learner = Arc::clone(&self.learn);
            let learn = Box::new(move |secret: &SecretString, lifetime| learner(secret, lifetime));
            let started = signin::begin(
                server_url,
                &self.config,
                self.store.clone().map(|s| (s, &*self.namespace)),
                challenge,
                reuse_grant,
                scopes.clone(),
                EntrySecrets {
                    learn,
                    holds: Arc::clone(&self.holds_secret),
                },
            )
            .await
            .map_err(|e| self.error(&e))?;
            let tokens = match started {
                Started::Link(sign_in) => break sign_in,
                Started::Ready(tokens) => tokens,
            };
            self.adopt(&tokens);
            match tokens.access_token().await {
                Ok(token) => return Ok(token),
                // A stored grant the server refused (a revoked refresh token after a restart):
                // a new sign-in, whose link shows at once.
                Err(e) if e.is_sign_in_required() && reuse_grant => {
                    self.forget(&tokens);
                    reuse_grant = false;
                }
                Err(e) => return Err(self.error(&e)),
            }
        };
        if sign_in.urls().any(|u| (self.holds_secret)(u)) {
            // Scrubbed, the link would be useless; shown, it would leak the value.
            tracing::warn!("{REPEATS_SECRET}");
            return Err(Error::auth(REPEATS_SECRET, false));
        }
        let link: Arc<str> = sign_in.url().as_str().into();
        let this = Arc::clone(self);
        let mut sign_in = sign_in;
        sign_in.scrubbing(Arc::clone(&self.scrub));
        let paste = sign_in.paste_sender();
        let waited = Arc::clone(&link);
        // Spawned with the phase locked, so the task's end finds its `Waiting` in place.
        let mut phase = self.phase();
        let task = runtime.spawn(async move {
            let outcome = match sign_in.finish().await {
                Ok(tokens) => {
                    tracing::info!("signed in");
                    Ok(tokens)
                }
                Err(e) => {
                    let reason = this.reason(e.message());
                    tracing::warn!("the sign-in did not complete: {reason}");
                    Err(reason)
                }
            };
            let ended = this.phase().redirect_done(&waited, outcome);
            if ended {
                this.ended.notify_one();
            }
        });
        let made = phase.link_made(Arc::clone(&link), task.abort_handle(), paste);
        drop(phase);
        if !made {
            return Err(Error::closed());
        }
        // The link holds none of this entry's secrets; scrubbed of the other entries' too, as
        // the listing shows it through the exit gate.
        tracing::info!(link = %(self.scrub)(&link), "the server needs a sign-in; its link waits in the listing");
        Err(Error::sign_in(link))
    }
}

/// What a logout found in the credential store (README "Signing in").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Logout {
    /// The entry's file was deleted.
    Deleted,
    /// No file was stored for the entry.
    NothingStored,
}

/// Where this connection's sign-in stands, for a Host that signs in ahead of time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SignInState {
    /// A grant is held.
    pub(crate) signed_in: bool,
    /// The held grant came from the store or was saved there.
    pub(crate) stored: bool,
    /// The store's directory; `None` when no store is known.
    pub(crate) store_dir: Option<std::path::PathBuf>,
}

/// The Host-only requests (README "Signing in"): both key the store exactly as a sign-in does
/// ([`signin::store_key`] over the connection's URL and the entry's `oauth`).
impl Auth {
    /// Deletes the entry's file in the store. The grant in use stays until its access token
    /// expires; its next refresh finds the file gone and asks for a new sign-in.
    ///
    /// # Errors
    /// [`crate::auth::ErrorKind::Storage`] when no store is known or the file cannot be deleted.
    pub(super) fn logout(&self, server_url: &Url) -> Result<Logout, crate::auth::Error> {
        let store = match &self.store {
            Some(store) => store.clone(),
            None => Store::from_env()?,
        };
        let deleted = store.delete(&signin::store_key(
            server_url,
            &self.config,
            &self.namespace,
        ))?;
        Ok(if deleted {
            Logout::Deleted
        } else {
            Logout::NothingStored
        })
    }

    /// Hands the redirect's address, pasted by hand, to the sign-in waiting for the browser,
    /// which checks it as its loopback listener checks a redirect (README "Signing in"); `Ok`
    /// once it took the address (the code exchange then runs in its task: the listing shows
    /// its outcome).
    ///
    /// # Errors
    /// [`crate::auth::ErrorKind::Callback`] when no sign-in waits, or the address is not the
    /// awaited redirect (the reason never quotes the address), or it carries the authorization
    /// server's refusal (which ends that sign-in).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before the sign-in read the address, nothing happened; after, the
    /// sign-in goes on with it.
    pub(super) async fn paste(&self, address: SecretString) -> Result<(), crate::auth::Error> {
        let none_waiting = || {
            crate::auth::Error::new(
                crate::auth::ErrorKind::Callback,
                "no sign-in of this server is waiting for its browser redirect; ask for the \
                 sign-in link first (its listing shows it)",
            )
        };
        let Some(to) = self.phase().paste() else {
            return Err(none_waiting());
        };
        let (reply, verdict) = tokio::sync::oneshot::channel();
        to.send(Pasted { address, reply })
            .await
            .map_err(|_| none_waiting())?;
        // The wait ended (time ran out, a browser brought the code) before reading it.
        verdict.await.map_err(|_| none_waiting())?
    }

    /// Whether a grant is held and stored.
    pub(super) fn state(&self) -> SignInState {
        let tokens = self.phase().grant();
        SignInState {
            signed_in: tokens.is_some(),
            stored: tokens.is_some_and(|t| t.in_store()),
            store_dir: self.store.as_ref().map(|s| s.dir().to_path_buf()),
        }
    }
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;
    use crate::auth::client::{self, AuthMethod, ClientIdentity};
    use crate::auth::discovery::{self, AuthorizationServer, ServerMetadata};
    use crate::auth::net::Net;
    use crate::auth::testing::{Options, TestServer, play_browser};

    /// A grant that is never asked for a token (no request leaves the test).
    fn grant() -> Arc<Tokens> {
        let url = Url::parse("http://127.0.0.1:9/mcp").unwrap();
        let server = AuthorizationServer {
            issuer: None,
            authorization_endpoint: url.join("/authorize").unwrap(),
            token_endpoint: url.join("/token").unwrap(),
            registration_endpoint: None,
            metadata: ServerMetadata::default(),
            source: discovery::EndpointSource::Defaults,
            named_issuer: None,
        };
        let identity = ClientIdentity {
            client_id: "test-client".into(),
            client_secret: None,
            auth_method: AuthMethod::None,
            source: client::ClientIdSource::Configured,
            token_endpoint: None,
            redirect_uri: None,
        };
        let net = Net::new(&url).unwrap();
        Arc::new(Tokens::new(
            net,
            server,
            identity,
            discovery::ResourceIndicator::new(
                url.to_string(),
                discovery::ResourceSource::ServerUrl,
                Arc::new(|_: &str| false),
            ),
            None,
            None,
            Box::new(|_: &SecretString, _| {}),
        ))
    }

    /// A task standing in for one waiting for the browser; its handle tells whether it was
    /// aborted.
    fn waiting_task() -> tokio::task::JoinHandle<()> {
        tokio::spawn(std::future::pending())
    }

    /// Whether `task` ended by an abort.
    async fn aborted(task: tokio::task::JoinHandle<()>) -> bool {
        match tokio::time::timeout(std::time::Duration::from_secs(5), task).await {
            Ok(Err(e)) => e.is_cancelled(),
            _ => false,
        }
    }

    fn link(text: &str) -> Arc<str> {
        text.into()
    }

    /// The phase's grant is exactly `tokens`.
    fn holds(phase: &Phase, tokens: &Arc<Tokens>) -> bool {
        phase.grant().is_some_and(|g| Arc::ptr_eq(&g, tokens))
    }

    /// An `Auth` without a store (nothing is written outside the test).
    fn auth(config: OAuthConfig) -> Arc<Auth> {
        let redactor = Redactor::default();
        Arc::new(Auth {
            namespace: "docs".into(),
            holds_secret: Arc::new(link_holds_secret(&redactor, &config)),
            config,
            store: None,
            learn: Arc::new(redactor.learner()),
            scrub: Arc::new(redactor.scrubber()),
            phase: Mutex::new(Phase::SignedOut),
            starting: tokio::sync::Mutex::new(()),
            ended: Notify::new(),
            step_up: StepUp::default(),
        })
    }

    /// The link every sign-in of these tests shows, unless it names its own.
    const AUTHORIZE: &str = "https://as.example/authorize";

    /// A phase that went from signed out to waiting for the browser at `url`, the link it
    /// shows, and the task waiting behind it.
    fn waiting_at(url: &str) -> (Phase, Arc<str>, tokio::task::JoinHandle<()>) {
        let mut phase = Phase::SignedOut;
        let task = waiting_task();
        let shown = link(url);
        assert!(phase.link_made(
            Arc::clone(&shown),
            task.abort_handle(),
            tokio::sync::mpsc::channel(1).0
        ));
        (phase, shown, task)
    }

    /// The phase is `name` (as `Debug` shows it), shows the link `shown` and holds exactly the
    /// grant `held`, or none.
    #[track_caller]
    fn assert_phase(phase: &Phase, name: &str, shown: Option<&str>, held: Option<&Arc<Tokens>>) {
        assert_eq!(format!("{phase:?}"), name);
        assert_eq!(phase.link().as_deref(), shown);
        match held {
            Some(tokens) => assert!(holds(phase, tokens)),
            None => assert!(phase.grant().is_none()),
        }
    }

    /// A test server and an `Auth` for it.
    async fn started() -> (TestServer, Arc<Auth>) {
        let server = TestServer::start(Options::default()).await;
        (server, auth(OAuthConfig::default()))
    }

    /// What `auth` answers a 401 of `server` that carries the server's challenge; it refuses.
    async fn refusal_of_401(auth: &Arc<Auth>, server: &TestServer) -> Error {
        let challenge = Challenge::parse(&server.challenge()).unwrap();
        let runtime = tokio::runtime::Handle::current();
        auth.unauthorized(&server.mcp_url(), &runtime, &challenge, None)
            .await
            .unwrap_err()
    }

    #[test]
    fn a_grant_adopted_then_refused_signs_out_and_a_stale_refusal_changes_nothing() {
        let mut phase = Phase::SignedOut;
        assert_phase(&phase, "SignedOut", None, None);
        let first = grant();
        assert!(!phase.grant_adopted(Arc::clone(&first)));
        assert_phase(&phase, "SignedIn", None, Some(&first));
        // A refusal of a grant that is no longer held (another start replaced it) is stale.
        let second = grant();
        assert!(!phase.grant_adopted(Arc::clone(&second)));
        phase.grant_refused(&first);
        assert_phase(&phase, "SignedIn", None, Some(&second));
        phase.grant_refused(&second);
        assert_phase(&phase, "SignedOut", None, None);
    }

    #[tokio::test]
    async fn a_link_made_waits_and_its_redirect_signs_in() {
        let (mut phase, shown, task) = waiting_at("https://as.example/authorize?client_id=a");
        assert_phase(
            &phase,
            "Waiting",
            Some("https://as.example/authorize?client_id=a"),
            None,
        );
        assert!(matches!(phase.start(false), Start::Waiting(l) if Arc::ptr_eq(&l, &shown)));
        let tokens = grant();
        assert!(phase.redirect_done(&shown, Ok(Arc::clone(&tokens))));
        assert_phase(&phase, "SignedIn", None, Some(&tokens));
        assert!(matches!(phase.start(false), Start::Held(t) if Arc::ptr_eq(&t, &tokens)));
        task.abort();
    }

    #[tokio::test]
    async fn a_failed_redirect_is_reported_by_one_start_then_the_next_begins() {
        let (mut phase, shown, task) = waiting_at(AUTHORIZE);
        assert!(phase.redirect_done(&shown, Err("the sign-in timed out".into())));
        assert_phase(&phase, "Failed", None, None);
        assert!(matches!(phase.start(false), Start::Failed(r) if r == "the sign-in timed out"));
        assert_eq!(format!("{phase:?}"), "SignedOut");
        assert!(matches!(phase.start(false), Start::Begin));
        assert_eq!(format!("{phase:?}"), "SignedOut");
        task.abort();
    }

    #[tokio::test]
    async fn only_the_waiting_sign_in_ends_the_wait() {
        let (mut phase, _shown, task) = waiting_at(AUTHORIZE);
        // The same text, another sign-in's link.
        let other = link(AUTHORIZE);
        assert!(!phase.redirect_done(&other, Ok(grant())));
        assert_phase(&phase, "Waiting", Some(AUTHORIZE), None);
        assert!(!phase.redirect_done(&other, Err("late".into())));
        assert_eq!(format!("{phase:?}"), "Waiting");
        task.abort();
    }

    #[test]
    fn a_start_finds_a_held_grant_unless_it_steps_up() {
        let tokens = grant();
        let mut phase = Phase::SignedIn(Arc::clone(&tokens));
        assert!(matches!(phase.start(false), Start::Held(t) if Arc::ptr_eq(&t, &tokens)));
        assert!(matches!(phase.start(true), Start::Begin));
        assert_eq!(format!("{phase:?}"), "SignedIn");
        let mut phase = Phase::SignedOut;
        assert!(matches!(phase.start(false), Start::Begin));
        assert!(matches!(phase.start(true), Start::Begin));
    }

    /// Closed: "waiting for the browser" and "signed in" at once. A step-up's link made after
    /// another request adopted a grant (the step-up dropped the grant it had, then waited for
    /// the start lock) used to leave that grant next to the link.
    #[tokio::test]
    async fn a_link_made_while_signed_in_never_leaves_the_grant_next_to_the_link() {
        let tokens = grant();
        let mut phase = Phase::SignedIn(Arc::clone(&tokens));
        let task = waiting_task();
        assert!(phase.link_made(
            link(AUTHORIZE),
            task.abort_handle(),
            tokio::sync::mpsc::channel(1).0
        ));
        assert_phase(&phase, "Waiting", Some(AUTHORIZE), None);
        task.abort();
    }

    /// Closed: a link waiting with no task behind it, or two tasks for one link. A grant adopted
    /// while a sign-in waits ends that sign-in (its task aborted, `ended` told).
    #[tokio::test]
    async fn a_grant_adopted_while_waiting_aborts_the_waiting_sign_in() {
        let (mut phase, _shown, task) = waiting_at(AUTHORIZE);
        let tokens = grant();
        assert!(phase.grant_adopted(Arc::clone(&tokens)));
        assert_phase(&phase, "SignedIn", None, Some(&tokens));
        assert!(aborted(task).await);

        let (mut phase, _first_shown, first) = waiting_at("https://as.example/1");
        let second = waiting_task();
        assert!(phase.link_made(
            link("https://as.example/2"),
            second.abort_handle(),
            tokio::sync::mpsc::channel(1).0
        ));
        assert_eq!(phase.link().as_deref(), Some("https://as.example/2"));
        assert!(aborted(first).await);
        phase.stop();
        assert!(aborted(second).await);
    }

    #[tokio::test]
    async fn stop_aborts_a_waiting_sign_in_and_is_final() {
        let (mut phase, shown, task) = waiting_at(AUTHORIZE);
        phase.stop();
        assert_phase(&phase, "Stopped", None, None);
        assert!(aborted(task).await);
        // Nothing leaves `Stopped`: a late redirect, a start, a link, a second stop.
        assert!(!phase.redirect_done(&shown, Ok(grant())));
        assert_eq!(format!("{phase:?}"), "Stopped");
        assert!(matches!(phase.start(false), Start::Stopped));
        assert!(matches!(phase.start(true), Start::Stopped));
        phase.stop();
        assert_eq!(format!("{phase:?}"), "Stopped");
        let tokens = grant();
        assert!(!phase.grant_adopted(Arc::clone(&tokens)));
        assert_phase(&phase, "Stopped(with a grant)", None, Some(&tokens));
        phase.grant_refused(&tokens);
        assert_eq!(format!("{phase:?}"), "Stopped");
    }

    #[test]
    fn stop_keeps_a_held_grant_for_the_goodbye_requests() {
        let tokens = grant();
        let mut phase = Phase::SignedIn(Arc::clone(&tokens));
        phase.stop();
        assert_phase(&phase, "Stopped(with a grant)", None, Some(&tokens));
        assert!(matches!(phase.start(false), Start::Held(t) if Arc::ptr_eq(&t, &tokens)));
        assert!(matches!(phase.start(true), Start::Stopped));
        phase.grant_refused(&grant());
        assert!(holds(&phase, &tokens));

        let mut phase = Phase::Failed {
            reason: "the sign-in timed out".into(),
        };
        phase.stop();
        assert_eq!(format!("{phase:?}"), "Stopped");
        assert!(matches!(phase.start(false), Start::Stopped));
    }

    /// Closed: a sign-in started after the connection stopped — a new link and a task waiting
    /// for the browser on a closed connection. A link made then is refused and its task
    /// aborted.
    #[tokio::test]
    async fn a_link_made_after_stop_is_refused_and_its_task_aborted() {
        let mut phase = Phase::SignedOut;
        phase.stop();
        let task = waiting_task();
        assert!(!phase.link_made(
            link(AUTHORIZE),
            task.abort_handle(),
            tokio::sync::mpsc::channel(1).0
        ));
        assert_phase(&phase, "Stopped", None, None);
        assert!(aborted(task).await);
    }

    #[tokio::test]
    async fn a_401_after_stop_starts_no_sign_in() {
        let (server, auth) = started().await;
        auth.stop();
        let refused = refusal_of_401(&auth, &server).await;
        assert!(refused.is_closed(), "{refused:?}");
        assert_eq!(auth.link(), None);
        assert!(server.requests().is_empty(), "{:?}", server.requests());
        assert!(!auth.state().signed_in);
    }

    #[tokio::test]
    async fn a_browser_sign_in_walks_signed_out_waiting_signed_in() {
        let (server, auth) = started().await;
        assert_eq!(format!("{:?}", auth.phase()), "SignedOut");
        assert!(auth.token().await.unwrap().is_none());
        let shown = refusal_of_401(&auth, &server)
            .await
            .sign_in_url()
            .unwrap()
            .clone();
        assert_eq!(format!("{:?}", auth.phase()), "Waiting");
        assert_eq!(auth.link().as_deref(), Some(&*shown));
        assert!(!auth.state().signed_in);
        // A second 401 while it waits shows the same link and starts nothing.
        let again = refusal_of_401(&auth, &server).await;
        assert_eq!(again.sign_in_url().map(|l| &**l), Some(&*shown));
        assert_eq!(play_browser(&Url::parse(&shown).unwrap()).await, 200);
        tokio::time::timeout(std::time::Duration::from_secs(10), auth.ended())
            .await
            .unwrap();
        assert_eq!(format!("{:?}", auth.phase()), "SignedIn");
        assert_eq!(auth.link(), None);
        assert!(auth.state().signed_in);
        let token = auth.token().await.unwrap().unwrap();
        assert!(server.accepts(token.token.expose_secret()));
        auth.stop();
        assert_eq!(format!("{:?}", auth.phase()), "Stopped(with a grant)");
        // The goodbye requests still carry the grant's token.
        let kept = auth.token().await.unwrap().unwrap();
        assert_eq!(kept.token.expose_secret(), token.token.expose_secret());
        assert!(auth.state().signed_in);
    }
}
