//! The current grant of one server ([`Tokens`]): loaded from the store, refreshed
//! single-flight (across Hosts too, under the store's file lock), saved before use, and every
//! token learned as a secret of the entry (OAuth 2.1 §4.3; MCP 2025-11-25 "Token Handling").

use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};

use super::client::ClientIdentity;
use super::discovery::{AuthorizationServer, ResourceIndicator};
use super::dpop::DpopKey;
use super::flow::{Grant, client_credentials, refresh, refused_grant};
use super::net::Net;
use super::store::{Store, StoreKey};
use super::{Error, ErrorKind, now_secs};
use crate::limits;

/// How long a refresh waits for another Host's refresh of the same stored grant: longer than
/// the two token requests that refresh may make.
const STORE_LOCK_WAIT: std::time::Duration = limits::OAUTH_REQUEST_TIMEOUT
    .saturating_mul(2)
    .saturating_add(std::time::Duration::from_secs(5));

pub(crate) use crate::redact::LearnSecret;
use crate::redact::Learned;

/// Scrubs a text of the entry's secrets, configured and learned (see
/// [`crate::redact::Redactor::scrubber`]).
pub(crate) type ScrubText = dyn Fn(&str) -> String + Send + Sync;

/// An access token and how it is presented: `Authorization: Bearer` (RFC 6750 §2.1), or, with
/// a key, `Authorization: DPoP` and a fresh proof of the key in the `DPoP` header of every
/// request (RFC 9449 §7.1). The key is the one of the grant the token came from, so a request
/// always proves the key its own token is bound to. Its `Debug` shows neither.
#[derive(Clone)]
pub(crate) struct AccessToken {
    pub(crate) token: SecretString,
    pub(crate) dpop: Option<Arc<DpopKey>>,
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.dpop.is_some() {
            "DPoP"
        } else {
            "Bearer"
        };
        write!(f, "AccessToken({scheme}, [redacted])")
    }
}

impl AccessToken {
    fn of(grant: &Grant) -> AccessToken {
        AccessToken {
            token: grant.access_token.clone(),
            dpop: grant.binding.access_key().cloned(),
        }
    }

    /// Whether this is `token`.
    pub(crate) fn is(&self, token: &SecretString) -> bool {
        self.token.expose_secret() == token.expose_secret()
    }
}

/// The grant of one server, shared by every request to it.
///
/// Invariants: at most one refresh runs at a time (the others wait for it and then use its
/// result), across Hosts sharing the store too (its file lock, [`Store::lock`]); a refreshed grant is saved to the store before any request uses it; after
/// `invalid_grant` a grant another Host stored meanwhile is adopted (and refreshed at most once
/// more), else the stored grant is deleted if it is still the refused one and every caller
/// gets [`ErrorKind::SignInRequired`]. A
/// client credentials grant has no refresh token: it is renewed by the same grant.
pub(crate) struct Tokens {
    net: Net,
    server: AuthorizationServer,
    identity: ClientIdentity,
    resource: ResourceIndicator,
    store: Option<(Store, StoreKey)>,
    grant: tokio::sync::Mutex<Option<Grant>>,
    learn: Box<LearnSecret>,
    /// For the client credentials grant: the key and scopes to get a new grant with when the
    /// current one expires (no refresh token is involved).
    renewal: Option<ClientCredentialsRenewal>,
    /// Whether the current grant came from, or was saved to, the store: then a store without a
    /// grant means another Host found it refused and deleted it.
    in_store: std::sync::atomic::AtomicBool,
    /// The access token a refresh gave, until the MCP server accepts it ([`Tokens::accepted`]):
    /// a `401` to it means refreshing does not help (a token lacking what the server needs), so
    /// a new sign-in is asked for instead of another refresh.
    unproven: std::sync::Mutex<Option<SecretString>>,
}

/// How a client credentials grant is renewed.
struct ClientCredentialsRenewal {
    private_key: Option<SecretString>,
    scopes: Vec<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("client_id", &self.identity.client_id)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    pub(crate) fn new(
        net: Net,
        server: AuthorizationServer,
        identity: ClientIdentity,
        resource: ResourceIndicator,
        store: Option<(Store, StoreKey)>,
        grant: Option<Grant>,
        learn: Box<LearnSecret>,
    ) -> Tokens {
        if let Some(grant) = &grant {
            learn_grant(&*learn, grant);
        }
        let in_store = grant.is_some() && store.is_some();
        Tokens {
            net,
            server,
            identity,
            resource,
            store,
            grant: tokio::sync::Mutex::new(grant),
            learn,
            renewal: None,
            in_store: std::sync::atomic::AtomicBool::new(in_store),
            unproven: std::sync::Mutex::new(None),
        }
    }

    /// Whether `token` is the access token a refresh gave and the MCP server has not accepted
    /// yet: a `401` to it means refreshing does not help (another refresh would give the same
    /// kind of token), so a request refused with it asks for a new sign-in instead.
    pub(crate) fn just_refreshed(&self, token: &SecretString) -> bool {
        self.unproven
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|t| t.expose_secret() == token.expose_secret())
    }

    /// The MCP server accepted `token`: a later `401` to it is answered by a refresh again.
    pub(crate) fn accepted(&self, token: &SecretString) {
        let mut unproven = self.unproven.lock().unwrap_or_else(|e| e.into_inner());
        if unproven
            .as_ref()
            .is_some_and(|t| t.expose_secret() == token.expose_secret())
        {
            *unproven = None;
        }
    }

    /// Renews an expired grant with the client credentials grant (with `private_key` when set,
    /// asking for `scopes`) instead of a refresh token.
    pub(crate) fn renewing_by_client_credentials(
        mut self,
        private_key: Option<SecretString>,
        scopes: Vec<String>,
    ) -> Tokens {
        self.renewal = Some(ClientCredentialsRenewal {
            private_key,
            scopes,
        });
        self
    }

    /// Saves `grant` (a new sign-in), then makes it current.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped after the save, the grant is stored but not current here.
    pub(crate) async fn install(&self, grant: Grant) {
        learn_grant(&*self.learn, &grant);
        let mut current = self.grant.lock().await;
        self.save(Some(&grant));
        *current = Some(grant);
    }

    /// Whether the current grant came from the store or was saved there (`false` when saving
    /// it failed, or the entry has no store).
    pub(crate) fn in_store(&self) -> bool {
        self.in_store.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The scopes of the current grant.
    pub(crate) async fn scopes(&self) -> Vec<String> {
        self.grant
            .lock()
            .await
            .as_ref()
            .map(|g| g.scopes.clone())
            .unwrap_or_default()
    }

    /// An access token that does not expire within [`limits::REFRESH_MARGIN`], refreshing first when
    /// needed.
    ///
    /// # Errors
    /// [`ErrorKind::SignInRequired`] when there is no grant or the server refused the refresh with
    /// `invalid_grant`; another kind when the refresh failed otherwise (the grant is kept).
    ///
    /// # Cancel safety
    /// Cancel safe: a refresh runs in its own task and finishes, saved, even when this future
    /// is dropped.
    pub(crate) async fn access_token(self: &Arc<Self>) -> Result<AccessToken, Error> {
        {
            let current = self.grant.lock().await;
            match &*current {
                Some(grant) if !grant.expires_soon(now_secs()) => {
                    return Ok(AccessToken::of(grant));
                }
                None => return Err(no_grant()),
                Some(_) => {}
            }
        }
        self.refresh_in_task(None).await
    }

    /// The server refused `rejected` with `401`: refreshes once, unless another request already
    /// replaced that token, and returns the token to retry with.
    ///
    /// # Errors
    /// As [`Tokens::access_token`].
    ///
    /// # Cancel safety
    /// As [`Tokens::access_token`].
    pub(crate) async fn rejected(
        self: &Arc<Self>,
        rejected: &SecretString,
    ) -> Result<AccessToken, Error> {
        self.refresh_in_task(Some(rejected.expose_secret().to_string()))
            .await
    }

    async fn refresh_in_task(
        self: &Arc<Self>,
        rejected: Option<String>,
    ) -> Result<AccessToken, Error> {
        let this = Arc::clone(self);
        let task = tokio::spawn(async move { this.refresh_locked(rejected).await });
        task.await.unwrap_or_else(|_| {
            Err(Error::new(
                ErrorKind::Transport,
                "the token refresh stopped unexpectedly",
            ))
        })
    }

    async fn refresh_locked(&self, rejected: Option<String>) -> Result<AccessToken, Error> {
        let mut current = self.grant.lock().await;
        let Some(grant) = current.clone() else {
            return Err(no_grant());
        };
        let fresh = |g: &Grant| match &rejected {
            Some(token) => g.access_token.expose_secret() != token && !g.expires_soon(now_secs()),
            None => !g.expires_soon(now_secs()),
        };
        // Another request refreshed while this one waited for the lock.
        if fresh(&grant) {
            return Ok(AccessToken::of(&grant));
        }
        // Hosts sharing the store refresh one at a time: the one that waited here reads the
        // grant the other saved instead of sending the same refresh token again.
        let _locked = match &self.store {
            Some((store, key)) => store.lock(key, STORE_LOCK_WAIT).await,
            None => None,
        };
        // Another Host sharing the store refreshed (and maybe rotated the refresh token), or
        // found the grant refused and deleted it (or a logout did): the same refresh token
        // would be refused again (and could make the authorization server revoke the grant
        // family).
        let in_store = self.in_store.load(std::sync::atomic::Ordering::Acquire);
        let grant = match self.load_stored_grant() {
            StoredGrant::Deleted if in_store => {
                tracing::info!(
                    "the stored grant is gone (another Host found it refused, or a logout \
                     deleted it); a new sign-in is needed"
                );
                *current = None;
                return Err(refused_grant());
            }
            StoredGrant::Grant(stored)
                if stored.access_token.expose_secret() != grant.access_token.expose_secret() =>
            {
                match self.adopt(stored, &fresh, &mut current) {
                    Ok(token) => return Ok(token),
                    Err(stale) => *stale,
                }
            }
            _ => grant,
        };
        let mut grant = grant;
        let mut retried = false;
        loop {
            match self.renew(&grant).await {
                Ok(new) => {
                    learn_grant(&*self.learn, &new);
                    self.save(Some(&new));
                    let token = AccessToken::of(&new);
                    *self.unproven.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(token.token.clone());
                    *current = Some(new);
                    return Ok(token);
                }
                Err(e) if e.is_sign_in_required() => {
                    // Another Host sharing the store may have rotated the grant after it was
                    // read: adopt that one (once) instead of deleting it.
                    match self.load_stored() {
                        Some(stored) if !same_grant(&stored, &grant) && !retried => {
                            match self.adopt(stored, &fresh, &mut current) {
                                Ok(token) => return Ok(token),
                                Err(stale) => {
                                    retried = true;
                                    grant = *stale;
                                }
                            }
                        }
                        _ => {
                            tracing::info!("the stored grant was refused; a new sign-in is needed");
                            self.clear_stored(&grant);
                            *current = None;
                            return Err(e);
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Gets a new grant for `grant`: by its refresh token, or by the client credentials grant.
    /// Adopts `stored`, a grant another Host saved: learns its secrets and marks the grant as
    /// one in the store. A `fresh` one becomes `current` and its access token is returned; a
    /// stale one is handed back (`Err`) to be renewed.
    fn adopt(
        &self,
        stored: Grant,
        fresh: &dyn Fn(&Grant) -> bool,
        current: &mut Option<Grant>,
    ) -> Result<AccessToken, Box<Grant>> {
        learn_grant(&*self.learn, &stored);
        self.in_store
            .store(true, std::sync::atomic::Ordering::Release);
        if !fresh(&stored) {
            return Err(Box::new(stored));
        }
        let token = AccessToken::of(&stored);
        *current = Some(stored);
        Ok(token)
    }

    async fn renew(&self, grant: &Grant) -> Result<Grant, Error> {
        match &self.renewal {
            Some(renewal) if grant.refresh_token.is_none() => {
                client_credentials(
                    &self.net,
                    &self.server,
                    &self.identity,
                    renewal.private_key.as_ref(),
                    &self.resource,
                    &renewal.scopes,
                    &*self.learn,
                )
                .await
            }
            _ => {
                refresh(
                    &self.net,
                    &self.server,
                    &self.identity,
                    &self.resource,
                    grant,
                )
                .await
            }
        }
    }

    /// Deletes the stored grant only while it is still `failed` (compare, then delete): a grant
    /// another Host stored meanwhile is kept.
    fn clear_stored(&self, failed: &Grant) {
        let Some((store, key)) = &self.store else {
            return;
        };
        let mut stored = store.load(key);
        if !stored.grant.as_ref().is_some_and(|g| same_grant(g, failed)) {
            return;
        }
        stored.grant = None;
        if let Err(e) = store.save(key, &stored) {
            tracing::warn!("the refused grant could not be deleted: {}", e.message());
        }
    }

    /// What the store holds for this client: a grant, no grant (deleted, or never saved), or
    /// something else (another client's registration, or a file the store ignored).
    fn load_stored_grant(&self) -> StoredGrant {
        let Some((store, key)) = self.store.as_ref() else {
            return StoredGrant::Other;
        };
        let stored = store.load(key);
        if stored.ignored {
            return StoredGrant::Other;
        }
        match (&stored.client, stored.grant) {
            (Some(client), _) if client.client_id != self.identity.client_id => StoredGrant::Other,
            (_, Some(grant)) if !self.issued_here(&grant) => StoredGrant::Other,
            (_, Some(grant)) => StoredGrant::Grant(grant),
            (_, None) => StoredGrant::Deleted,
        }
    }

    /// The stored grant, when it was issued to this client (another Host may have stored its
    /// own registration and grant meanwhile).
    fn load_stored(&self) -> Option<Grant> {
        let (store, key) = self.store.as_ref()?;
        let stored = store.load(key);
        match &stored.client {
            Some(client) if client.client_id != self.identity.client_id => None,
            _ => stored.grant.filter(|g| self.issued_here(g)),
        }
    }

    /// Whether `grant` (one another Host stored) was issued by this grant's authorization
    /// server; a grant recording no issuer (an older version's) is taken as this one's.
    fn issued_here(&self, grant: &Grant) -> bool {
        grant
            .issuer
            .as_ref()
            .is_none_or(|issuer| *issuer == self.server.identifier())
    }

    fn save(&self, grant: Option<&Grant>) {
        let Some((store, key)) = &self.store else {
            return;
        };
        let mut stored = store.load(key);
        stored.grant = grant.cloned();
        // The grant is stored with the client it was issued to (a refresh needs both), even
        // when another Host stored its own registration meanwhile.
        if grant.is_some() && self.identity.source == super::client::ClientIdSource::Registered {
            stored.client = Some(self.identity.clone());
        }
        let saved = store.save(key, &stored);
        if let Err(e) = &saved {
            tracing::warn!("the grant could not be saved: {}", e.message());
        }
        self.in_store.store(
            saved.is_ok() && grant.is_some(),
            std::sync::atomic::Ordering::Release,
        );
    }
}

/// Whether `a` and `b` are the same grant (the same access and refresh tokens).
fn same_grant(a: &Grant, b: &Grant) -> bool {
    a.access_token.expose_secret() == b.access_token.expose_secret()
        && a.refresh_token.as_ref().map(ExposeSecret::expose_secret)
            == b.refresh_token.as_ref().map(ExposeSecret::expose_secret)
}

/// What the store holds for one client (see `Tokens::load_stored_grant`).
enum StoredGrant {
    Grant(Grant),
    Deleted,
    Other,
}

fn no_grant() -> Error {
    Error::new(
        ErrorKind::SignInRequired,
        "no stored sign-in for this server; sign in",
    )
}

/// Learns a grant's tokens and, for a grant with a DPoP key, the head of every proof of the key
/// ([`DpopKey::header_segment`] as [`Learned::JwtHead`], so an echoed proof goes whole).
fn learn_grant(learn: &LearnSecret, grant: &Grant) {
    learn(&grant.access_token, Learned::Token);
    if let Some(refresh) = &grant.refresh_token {
        learn(refresh, Learned::Token);
    }
    if let Some(key) = grant.binding.key() {
        learn(&key.header_segment(), Learned::JwtHead);
    }
}
