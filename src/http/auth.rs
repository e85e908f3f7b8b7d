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
//!   is refused (a scrubbed link would be useless).

use std::sync::{Arc, Mutex};

use reqwest::Url;
use reqwest::header::HeaderMap;
use secrecy::SecretString;
use tokio::sync::Notify;

use super::{Error, lock};
use crate::auth::challenge::Challenge;
use crate::auth::config::OAuthConfig;
use crate::auth::scopes::StepUp;
use crate::auth::signin::{self, Started};
use crate::auth::store::Store;
use crate::auth::tokens::{ScrubText, Tokens};
use crate::redact::Redactor;

/// How many times one request is sent again after the server refused its token.
pub(super) const MAX_AUTH_RETRIES: u32 = 2;

/// Why a sign-in whose link holds a configured secret is refused.
const REPEATS_SECRET: &str =
    "the authorization server's metadata repeats a configured secret; refusing to show its link";

/// Whether a sign-in link (or a metadata URL) holds one of the entry's configured secrets,
/// apart from the entry's own `oauth.clientId` and `oauth.clientMetadataUrl`: a link must carry
/// the client id, also when the config takes it from `${env:NAME}`.
fn link_holds_secret(
    redactor: &Redactor,
    config: &OAuthConfig,
) -> impl Fn(&str) -> bool + Send + Sync + 'static {
    let holds = redactor.configured_checker();
    let own: Vec<String> = [
        config.client_id.clone(),
        config.client_metadata_url.as_ref().map(|u| u.to_string()),
    ]
    .into_iter()
    .flatten()
    .filter(|value| !value.is_empty())
    .flat_map(|value| {
        let encoded: String = url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
        [value, encoded]
    })
    .collect();
    move |text: &str| {
        let mut text = text.to_string();
        for value in &own {
            text = text.replace(value.as_str(), "");
        }
        holds(&text)
    }
}

/// One connection's sign-in state.
pub(crate) struct Auth {
    config: OAuthConfig,
    store: Option<Store>,
    /// Gives every token learned to the entry's redactor.
    learn: Arc<dyn Fn(&SecretString) + Send + Sync>,
    /// Whether a text holds one of the entry's configured secrets.
    holds_secret: Box<dyn Fn(&str) -> bool + Send + Sync>,
    /// Scrubs the entry's secrets (configured and learned) from every failure reason and log
    /// line: an authorization server may echo a token or a header value into its errors.
    scrub: Arc<ScrubText>,
    tokens: Mutex<Option<Arc<Tokens>>>,
    /// The link of the sign-in waiting for the browser.
    link: Mutex<Option<Arc<str>>>,
    /// The task waiting for the browser's redirect; aborted when the connection closes.
    waiting: Mutex<Option<tokio::task::AbortHandle>>,
    /// Serializes sign-in starts (single-flight).
    starting: tokio::sync::Mutex<()>,
    /// Notified when a waiting sign-in ends (tokens, or a failure that needs a new link).
    ended: Notify,
    /// Why the last sign-in failed; the next start reports it once (as [`Error::auth`]) before
    /// it makes a new link, so the failure shows in the status.
    failed: Mutex<Option<String>>,
    step_up: StepUp,
}

impl Auth {
    /// The sign-in state for an entry, or `None` when its `headers` configure `Authorization`
    /// (that entry never starts OAuth).
    pub(super) fn for_entry(
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
        let holds_secret = Box::new(link_holds_secret(redactor, &config));
        Some(Arc::new(Auth {
            config,
            store,
            learn: Arc::new(redactor.learner()),
            holds_secret,
            scrub: Arc::new(redactor.scrubber()),
            tokens: Mutex::default(),
            link: Mutex::default(),
            waiting: Mutex::default(),
            starting: tokio::sync::Mutex::new(()),
            ended: Notify::new(),
            failed: Mutex::default(),
            step_up: StepUp::default(),
        }))
    }

    /// The link of the sign-in waiting for the browser, if one waits.
    pub(super) fn link(&self) -> Option<Arc<str>> {
        lock(&self.link).clone()
    }

    /// Resolves when a waiting sign-in ends (at once if one ended since the last call).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(super) async fn ended(&self) {
        self.ended.notified().await;
    }

    /// Stops a sign-in waiting for the browser (the connection is closing).
    pub(super) fn stop(&self) {
        if let Some(task) = lock(&self.waiting).take() {
            task.abort();
        }
        *lock(&self.link) = None;
    }

    /// The access token to send now, refreshed first when it expires soon; `None` before any
    /// sign-in, or after the grant was refused (the server's `401` then starts a sign-in).
    ///
    /// # Errors
    /// [`Error::auth`] when a refresh failed for another reason than `invalid_grant`.
    ///
    /// # Cancel safety
    /// Cancel safe (a refresh finishes in its own task).
    pub(super) async fn token(&self) -> Result<Option<SecretString>, Error> {
        let tokens = lock(&self.tokens).clone();
        let Some(tokens) = tokens else {
            return Ok(None);
        };
        match tokens.access_token().await {
            Ok(token) => Ok(Some(token)),
            Err(e) if e.is_sign_in_required() => {
                self.forget(&tokens);
                Ok(None)
            }
            Err(e) => Err(self.error(e.message())),
        }
    }

    /// The server refused `sent` with `401`: the token a refresh of the held grant gives, or
    /// `None` when there is no grant or it cannot be refreshed (a grant the authorization server
    /// refused as `invalid_grant` is dropped, so the next request signs in). Never starts a
    /// sign-in.
    ///
    /// # Cancel safety
    /// Cancel safe (a refresh finishes in its own task).
    pub(super) async fn refreshed(&self, sent: &SecretString) -> Option<SecretString> {
        let tokens = lock(&self.tokens).clone()?;
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
    ) -> Result<SecretString, Error> {
        let tokens = lock(&self.tokens).clone();
        if let (Some(tokens), Some(sent)) = (tokens, sent) {
            match tokens.rejected(sent).await {
                Ok(token) => return Ok(token),
                Err(e) if e.is_sign_in_required() => self.forget(&tokens),
                Err(e) => return Err(self.error(e.message())),
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
    ) -> Result<SecretString, Error> {
        let tokens = lock(&self.tokens).clone();
        let held = match &tokens {
            Some(tokens) => tokens.scopes().await,
            None => Vec::new(),
        };
        let scopes = self
            .step_up
            .next(&held, challenge, key)
            .map_err(|e| self.error(e.message()))?;
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

    /// [`Error::auth`] with [`Auth::reason`] of `message`.
    fn error(&self, message: &str) -> Error {
        Error::auth(self.reason(message))
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
        let mut current = lock(&self.tokens);
        if current.as_ref().is_some_and(|t| Arc::ptr_eq(t, tokens)) {
            *current = None;
        }
    }

    /// Starts a sign-in (single-flight): a grant ready now gives its token; a sign-in needing
    /// the browser leaves its link and a task waiting for the redirect, and gives
    /// [`Error::sign_in`].
    async fn start(
        self: &Arc<Self>,
        server_url: &Url,
        runtime: &tokio::runtime::Handle,
        challenge: &Challenge,
        reuse_grant: bool,
        scopes: Option<Vec<String>>,
    ) -> Result<SecretString, Error> {
        let _one = self.starting.lock().await;
        if scopes.is_none() {
            let current = lock(&self.tokens).clone();
            if let Some(tokens) = current {
                // Another request signed in while this one waited.
                return tokens
                    .access_token()
                    .await
                    .map_err(|e| self.error(e.message()));
            }
        }
        if let Some(link) = self.link() {
            return Err(Error::sign_in(link));
        }
        if let Some(reason) = lock(&self.failed).take() {
            return Err(Error::auth(reason));
        }
        let mut reuse_grant = reuse_grant;
        let sign_in = loop {
            let learner = Arc::clone(&self.learn);
            let learn = Box::new(move |token: &SecretString| learner(token));
            let started = signin::begin(
                server_url,
                &self.config,
                self.store.clone(),
                challenge,
                reuse_grant,
                scopes.clone(),
                learn,
            )
            .await
            .map_err(|e| self.error(e.message()))?;
            let tokens = match started {
                Started::Link(sign_in) => break sign_in,
                Started::Ready(tokens) => tokens,
            };
            *lock(&self.tokens) = Some(Arc::clone(&tokens));
            match tokens.access_token().await {
                Ok(token) => return Ok(token),
                // A stored grant the server refused (a revoked refresh token after a restart):
                // a new sign-in, whose link shows at once.
                Err(e) if e.is_sign_in_required() && reuse_grant => {
                    self.forget(&tokens);
                    reuse_grant = false;
                }
                Err(e) => return Err(self.error(e.message())),
            }
        };
        if sign_in.urls().any(|u| (self.holds_secret)(u)) {
            // Scrubbed, the link would be useless; shown, it would leak the value.
            tracing::warn!("{REPEATS_SECRET}");
            return Err(Error::auth(REPEATS_SECRET));
        }
        let link: Arc<str> = sign_in.url().as_str().into();
        *lock(&self.link) = Some(Arc::clone(&link));
        tracing::info!(link = %link, "the server needs a sign-in; its link waits in the listing");
        let this = Arc::clone(self);
        let mut sign_in = sign_in;
        sign_in.scrubbing(Arc::clone(&self.scrub));
        let task = runtime.spawn(async move {
            match sign_in.finish().await {
                Ok(tokens) => {
                    tracing::info!("signed in");
                    *lock(&this.tokens) = Some(tokens);
                }
                Err(e) => {
                    let reason = this.reason(e.message());
                    tracing::warn!("the sign-in did not complete: {reason}");
                    *lock(&this.failed) = Some(reason);
                }
            }
            *lock(&this.link) = None;
            *lock(&this.waiting) = None;
            this.ended.notify_one();
        });
        *lock(&self.waiting) = Some(task.abort_handle());
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
    /// [`crate::auth::Kind::Storage`] when no store is known or the file cannot be deleted.
    pub(super) fn logout(&self, server_url: &Url) -> Result<Logout, crate::auth::Error> {
        let store = match &self.store {
            Some(store) => store.clone(),
            None => Store::from_env()?,
        };
        let deleted = store.delete(&signin::store_key(server_url, &self.config))?;
        Ok(if deleted {
            Logout::Deleted
        } else {
            Logout::NothingStored
        })
    }

    /// Whether a grant is held and stored.
    pub(super) fn state(&self) -> SignInState {
        let tokens = lock(&self.tokens).clone();
        SignInState {
            signed_in: tokens.is_some(),
            stored: tokens.is_some_and(|t| t.in_store()),
            store_dir: self.store.as_ref().map(|s| s.dir().to_path_buf()),
        }
    }
}
