//! The grants and the token state of one server (OAuth 2.1 §4.1 and §4.3 with RFC 7636 PKCE,
//! RFC 8707 resource indicators and RFC 9207 `iss`; OAuth 2.1 §4.2 client credentials with
//! RFC 7523 assertions; MCP 2025-11-25 "Scope Selection Strategy" and "Step-Up Authorization
//! Flow").
//!
//! Owns: the authorization request (PKCE S256 only, a random `state`, `resource`, scopes) and
//! the code exchange (state and `iss` checked); refresh; client credentials; the scope choice
//! and step-up limit; and [`Tokens`], the current grant of one server, refreshed single-flight
//! and saved before use. The grants go through the `oauth2` crate over [`Net`].

use std::sync::Arc;

use oauth2::basic::{BasicClient, BasicErrorResponse, BasicErrorResponseType};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet,
    EndpointSet, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError,
    Scope, TokenResponse, TokenUrl,
};
use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};

use super::client::{AuthMethod, ClientIdentity, oauth_code};
use super::discovery::{AuthorizationServer, Challenge};
use super::net::{Net, NetError};
use super::store::{Store, StoreKey};
use super::{Error, Kind, now_secs};
use crate::limits::{self, REFRESH_MARGIN};
use crate::redact::Redactor;

/// How many new sign-ins in a row a `403 insufficient_scope` may ask for.
pub(crate) const MAX_STEP_UPS: u32 = 2;

/// Tokens from a token endpoint. Its `Debug` shows no token.
#[derive(Clone)]
pub(crate) struct Grant {
    pub(crate) access_token: SecretString,
    pub(crate) refresh_token: Option<SecretString>,
    /// Seconds since the Unix epoch; `None` when the server gave no (or a zero) `expires_in`.
    pub(crate) expires_at: Option<u64>,
    /// The `expires_in` the token came with, in seconds; `None` when not known (a grant stored
    /// by an older version).
    pub(crate) lifetime: Option<u64>,
    /// The scopes granted (or, when the server did not say, requested).
    pub(crate) scopes: Vec<String>,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("access_token", &"[redacted]")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "[redacted]"),
            )
            .field("expires_at", &self.expires_at)
            .field("lifetime", &self.lifetime)
            .field("scopes", &self.scopes)
            .finish()
    }
}

impl Grant {
    /// Whether the access token expires within the refresh margin of `now` (Unix seconds):
    /// [`REFRESH_MARGIN`], or half the token's lifetime when that is shorter, so a token that
    /// lives a minute or less is still used for half its life rather than refreshed before
    /// every request.
    pub(crate) fn expires_soon(&self, now: u64) -> bool {
        let margin = match self.lifetime {
            Some(lifetime) => REFRESH_MARGIN.as_secs().min(lifetime / 2),
            None => REFRESH_MARGIN.as_secs(),
        };
        self.expires_at
            .is_some_and(|at| at <= now.saturating_add(margin))
    }
}

/// The scopes to ask for: the entry's `oauth.scopes`; else the challenge's `scope`; else the
/// resource's `scopes_supported`; else none (MCP 2025-11-25 "Scope Selection Strategy").
pub(crate) fn choose_scopes(
    configured: Option<&[String]>,
    challenge: &Challenge,
    resource_scopes: Option<&[String]>,
) -> Vec<String> {
    if let Some(scopes) = configured {
        return scopes.to_vec();
    }
    let from_challenge = challenge.scopes();
    if !from_challenge.is_empty() {
        return from_challenge;
    }
    resource_scopes.map(<[String]>::to_vec).unwrap_or_default()
}

/// Counts the new sign-ins `403 insufficient_scope` asked for, per scope: a scope asked for
/// [`MAX_STEP_UPS`] times is not asked for again (a scope the authorization server never
/// grants, or a server that refuses whatever is granted) until the request that was refused for
/// it goes through. A request that passes in between with other scopes (a re-listing, another
/// tool) changes nothing, and a step-up for another scope gets its own count.
#[derive(Debug, Default)]
pub(crate) struct StepUp {
    state: std::sync::Mutex<StepUpState>,
}

#[derive(Debug, Default)]
struct StepUpState {
    /// Scope → step-ups that asked for it since a request refused for it went through.
    asked: std::collections::HashMap<String, u32>,
    /// The requests refused for scopes (their key: the method, and a tool call's name), newest
    /// last, at most [`MAX_REFUSED`].
    refused: Vec<(String, Vec<String>)>,
}

/// How many refused requests a [`StepUp`] remembers.
const MAX_REFUSED: usize = 32;

impl StepUp {
    /// The scopes for the next sign-in after a `403` with `challenge` to the request `key`: the
    /// union of `held` and the challenge's scopes.
    ///
    /// # Errors
    /// [`Kind::Refused`] when every scope the challenge adds was asked for [`MAX_STEP_UPS`]
    /// times already: the server keeps refusing, and signing in again would loop.
    pub(crate) fn next(
        &self,
        held: &[String],
        challenge: &Challenge,
        key: &str,
    ) -> Result<Vec<String>, Error> {
        let challenged = challenge.scopes();
        let mut wanted: Vec<String> = challenged
            .iter()
            .filter(|s| !held.contains(s))
            .cloned()
            .collect();
        if wanted.is_empty() {
            // The server wants scopes already held: count them all the same.
            wanted.clone_from(&challenged);
            if wanted.is_empty() {
                wanted.push(String::new());
            }
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if wanted
            .iter()
            .all(|s| state.asked.get(s).copied().unwrap_or(0) >= MAX_STEP_UPS)
        {
            return Err(Error::new(
                Kind::Refused,
                format!(
                    "the server still answers 403 insufficient_scope after {MAX_STEP_UPS} new \
                     sign-ins with more scopes; giving up"
                ),
            ));
        }
        for scope in &wanted {
            *state.asked.entry(scope.clone()).or_default() += 1;
        }
        if state.refused.len() >= MAX_REFUSED {
            state.refused.remove(0);
        }
        state.refused.push((key.to_string(), wanted));
        let mut scopes = held.to_vec();
        for scope in challenged {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        Ok(scopes)
    }

    /// Whether a request refused for a scope waits to go through: only then does
    /// [`StepUp::succeeded`] need the request's key.
    pub(crate) fn waiting(&self) -> bool {
        !self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refused
            .is_empty()
    }

    /// The request `key` went through: the scopes it was refused for may be asked for again.
    pub(crate) fn succeeded(&self, key: &str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let StepUpState { asked, refused } = &mut *state;
        refused.retain(|(refused_key, scopes)| {
            if refused_key != key {
                return true;
            }
            for scope in scopes {
                asked.remove(scope);
            }
            false
        });
    }
}

/// A sign-in waiting for the browser: the link, and what the code exchange needs. Its `Debug`
/// shows neither the state nor the verifier.
pub(crate) struct Pending {
    /// The authorization URL to show the user.
    pub(crate) url: Url,
    pub(crate) state: SecretString,
    verifier: PkceCodeVerifier,
    pub(crate) redirect_uri: String,
    pub(crate) scopes: Vec<String>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("redirect_uri", &self.redirect_uri)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// What the browser brought back to the loopback listener.
pub(crate) struct Redirect {
    pub(crate) code: SecretString,
    pub(crate) iss: Option<String>,
}

impl std::fmt::Debug for Redirect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redirect")
            .field("code", &"[redacted]")
            .field("iss", &self.iss)
            .finish()
    }
}

type TokenClient =
    BasicClient<EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

fn token_client(server: &AuthorizationServer, identity: &ClientIdentity) -> TokenClient {
    let client = BasicClient::new(ClientId::new(identity.client_id.clone()))
        .set_token_uri(TokenUrl::from_url(server.token_endpoint.clone()));
    let client = match identity.auth_method {
        AuthMethod::ClientSecretBasic => client.set_auth_type(AuthType::BasicAuth),
        _ => client.set_auth_type(AuthType::RequestBody),
    };
    match (&identity.client_secret, identity.auth_method) {
        (Some(secret), AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost) => {
            client.set_client_secret(ClientSecret::new(secret.expose_secret().to_string()))
        }
        _ => client,
    }
}

/// Starts a sign-in: the authorization URL with PKCE S256, a random `state`, `resource` and
/// `scopes` (no `scope` parameter when empty).
///
/// # Errors
/// [`Kind::Refused`] when the server does not advertise S256 (MCP 2025-11-25 requires it).
pub(crate) fn authorization_request(
    server: &AuthorizationServer,
    identity: &ClientIdentity,
    resource: &Url,
    scopes: &[String],
    redirect_uri: &str,
) -> Result<Pending, Error> {
    if !server.supports_s256() {
        return Err(Error::new(
            Kind::Refused,
            "the authorization server does not advertise PKCE S256 \
             (code_challenge_methods_supported); signing in to it is refused",
        ));
    }
    let redirect = RedirectUrl::new(redirect_uri.to_string())
        .map_err(|_| Error::new(Kind::Refused, "the redirect URI is not a valid URL"))?;
    let client = token_client(server, identity)
        .set_auth_uri(AuthUrl::from_url(server.authorization_endpoint.clone()))
        .set_redirect_uri(redirect);
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state) = client
        .authorize_url(CsrfToken::new_random)
        .add_scopes(scopes.iter().cloned().map(Scope::new))
        .set_pkce_challenge(challenge)
        .add_extra_param("resource", resource.to_string())
        .url();
    Ok(Pending {
        url,
        state: SecretString::from(state.into_secret()),
        verifier,
        redirect_uri: redirect_uri.to_string(),
        scopes: scopes.to_vec(),
    })
}

/// Exchanges the code the browser brought back (RFC 6749 §4.1.3 with the PKCE verifier and
/// `resource`), after checking `iss` (RFC 9207 §2.4): when present it must be the server's
/// issuer, and it must be present when the server says it sends it.
///
/// # Errors
/// [`Kind::Refused`] for a wrong or missing `iss`; as [`token_error`] for the token request.
pub(crate) async fn exchange_code(
    net: &Net,
    server: &AuthorizationServer,
    identity: &ClientIdentity,
    resource: &Url,
    pending: Pending,
    redirect: Redirect,
) -> Result<Grant, Error> {
    match (&redirect.iss, &server.issuer) {
        (Some(iss), Some(issuer)) if iss != issuer => {
            return Err(Error::new(
                Kind::Refused,
                "the authorization response names another issuer (RFC 9207); the code is refused",
            ));
        }
        (None, _)
            if server
                .metadata
                .authorization_response_iss_parameter_supported =>
        {
            return Err(Error::new(
                Kind::Refused,
                "the authorization response lacks the iss the server promised (RFC 9207); the \
                 code is refused",
            ));
        }
        _ => {}
    }
    let redirect_url = RedirectUrl::new(pending.redirect_uri.clone())
        .map_err(|_| Error::new(Kind::Refused, "the redirect URI is not a valid URL"))?;
    let client = token_client(server, identity).set_redirect_uri(redirect_url);
    let verifier = SecretString::from(pending.verifier.secret().to_string());
    let secrets = [
        Some(&redirect.code),
        Some(&verifier),
        identity.client_secret.as_ref(),
    ];
    let answer = client
        .exchange_code(AuthorizationCode::new(
            redirect.code.expose_secret().to_string(),
        ))
        .set_pkce_verifier(pending.verifier)
        .add_extra_param("resource", resource.to_string())
        .request_async(net)
        .await
        .map_err(|e| refusal(e, &secrets, true))?;
    Ok(grant_from(&answer, None, &pending.scopes))
}

/// Refreshes `grant` (OAuth 2.1 §4.3 with `resource`). A rotated refresh token replaces the
/// old one; the old one stays when the server sends none.
///
/// # Errors
/// [`Kind::SignInRequired`] for `invalid_grant`; as [`token_error`] otherwise.
pub(crate) async fn refresh(
    net: &Net,
    server: &AuthorizationServer,
    identity: &ClientIdentity,
    resource: &Url,
    grant: &Grant,
) -> Result<Grant, Error> {
    let Some(refresh_token) = &grant.refresh_token else {
        return Err(Error::new(
            Kind::SignInRequired,
            "the access token expired and the server gave no refresh token; sign in again",
        ));
    };
    let secrets = [Some(refresh_token), identity.client_secret.as_ref()];
    let answer = token_client(server, identity)
        .exchange_refresh_token(&RefreshToken::new(
            refresh_token.expose_secret().to_string(),
        ))
        .add_extra_param("resource", resource.to_string())
        .request_async(net)
        .await
        .map_err(|e| token_error(e, &secrets))?;
    Ok(grant_from(&answer, Some(refresh_token), &grant.scopes))
}

/// The client credentials grant (OAuth 2.1 §4.2), authenticated by the client's secret or, with
/// `private_key` (`oauth.privateKey`), by an ES256 JWT assertion (RFC 7523 §2.2) whose `iss` and `sub` are the
/// client id and whose `aud` is the issuer (else the token endpoint).
///
/// # Errors
/// [`Kind::Config`] for a key that is not a PKCS #8 P-256 key; as [`token_error`] otherwise.
pub(crate) async fn client_credentials(
    net: &Net,
    server: &AuthorizationServer,
    identity: &ClientIdentity,
    private_key: Option<&SecretString>,
    resource: &Url,
    scopes: &[String],
) -> Result<Grant, Error> {
    let assertion = match (private_key, identity.auth_method) {
        (Some(key), AuthMethod::PrivateKeyJwt) => {
            let audience = server
                .issuer
                .clone()
                .unwrap_or_else(|| server.token_endpoint.to_string());
            Some(jwt_assertion(key, &identity.client_id, &audience)?)
        }
        _ => None,
    };
    let secrets = [identity.client_secret.as_ref(), assertion.as_ref()];
    let client = token_client(server, identity);
    let request = client
        .exchange_client_credentials()
        .add_scopes(scopes.iter().cloned().map(Scope::new))
        .add_extra_param("resource", resource.to_string());
    let answer = match &assertion {
        Some(assertion) => {
            request
                .add_extra_param(
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                )
                .add_extra_param("client_assertion", assertion.expose_secret().to_string())
                .request_async(net)
                .await
        }
        _ => request.request_async(net).await,
    }
    .map_err(|e| token_error(e, &secrets))?;
    Ok(grant_from(&answer, None, scopes))
}

/// An ES256 client assertion (RFC 7523 §3) valid for five minutes.
fn jwt_assertion(
    key: &SecretString,
    client_id: &str,
    audience: &str,
) -> Result<SecretString, Error> {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use rustls_pki_types::PrivatePkcs8KeyDer;
    use rustls_pki_types::pem::PemObject;
    let bad_key = || {
        Error::new(
            Kind::Config,
            "oauth.privateKey is not a PKCS #8 PEM P-256 private key (BEGIN PRIVATE KEY)",
        )
    };
    // RFC 7468 §10: the `PRIVATE KEY` block holds a PKCS #8 key.
    let der = PrivatePkcs8KeyDer::from_pem_slice(key.expose_secret().as_bytes())
        .map_err(|_| bad_key())?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.secret_pkcs8_der())
        .map_err(|_| bad_key())?;
    let mut jti = [0u8; 16];
    aws_lc_rs::rand::fill(&mut jti)
        .map_err(|_| Error::new(Kind::Config, "no randomness for the client assertion"))?;
    let now = now_secs();
    let header = serde_json::json!({"alg": "ES256", "typ": "JWT"});
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + 300,
        "jti": URL_SAFE_NO_PAD.encode(jti),
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = pair
        .sign(
            &aws_lc_rs::rand::SystemRandom::new(),
            signing_input.as_bytes(),
        )
        .map_err(|_| Error::new(Kind::Config, "the client assertion could not be signed"))?;
    Ok(SecretString::from(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature.as_ref())
    )))
}

fn grant_from(
    answer: &oauth2::basic::BasicTokenResponse,
    old_refresh: Option<&SecretString>,
    requested: &[String],
) -> Grant {
    let lifetime = answer
        .expires_in()
        .map(|d| d.as_secs())
        .filter(|secs| *secs > 0);
    Grant {
        access_token: SecretString::from(answer.access_token().secret().to_string()),
        refresh_token: answer
            .refresh_token()
            .map(|t| SecretString::from(t.secret().to_string()))
            .or_else(|| old_refresh.cloned()),
        // A zero `expires_in` says nothing usable: the token is used until a `401` refuses it.
        expires_at: lifetime.map(|secs| now_secs().saturating_add(secs)),
        lifetime,
        scopes: answer
            .scopes()
            .map(|s| s.iter().map(|s| s.to_string()).collect())
            .unwrap_or_else(|| requested.to_vec()),
    }
}

/// Maps a failed token request to an [`Error`]: `invalid_grant` is
/// [`Kind::SignInRequired`]; another OAuth error is [`Kind::Denied`] with its code and its
/// description scrubbed of `secrets` and bounded; a body that is no token response is
/// [`Kind::Refused`] (never quoted: it may hold a token); a refusal that is no OAuth error
/// response comes from [`Net::execute`] with its HTTP status.
fn token_error(
    error: RequestTokenError<NetError, BasicErrorResponse>,
    secrets: &[Option<&SecretString>],
) -> Error {
    refusal(error, secrets, false)
}

/// [`token_error`], or for a code exchange (`code`): there `invalid_grant` means the code (or
/// its verifier or redirect URI) was refused, not a grant that ended (RFC 6749 §5.2), so it is
/// quoted like any other refusal.
fn refusal(
    error: RequestTokenError<NetError, BasicErrorResponse>,
    secrets: &[Option<&SecretString>],
    code: bool,
) -> Error {
    match error {
        RequestTokenError::ServerResponse(response) => {
            if !code && *response.error() == BasicErrorResponseType::InvalidGrant {
                return refused_grant();
            }
            let mut redactor = Redactor::default();
            for secret in secrets.iter().flatten() {
                redactor.add_secret(secret.expose_secret());
            }
            // Scrubbed before it is filtered and cut: a secret echoed as the code goes whole.
            let code = oauth_code(&redactor.scrub(response.error().as_ref()));
            let description = response
                .error_description()
                // Not cut here: the connection scrubs the entry's secrets first, then cuts.
                .map(|d| format!(": {}", redactor.scrub(d)))
                .unwrap_or_default();
            Error::new(
                Kind::Denied,
                format!("the token endpoint refused the request ({code}){description}"),
            )
        }
        RequestTokenError::Request(e) => e.0,
        RequestTokenError::Parse(..) => Error::new(
            Kind::Refused,
            "the token endpoint answered HTTP 200 but not with a valid token response",
        ),
        RequestTokenError::Other(_) => Error::new(
            Kind::Refused,
            "the token endpoint answered HTTP 200 but not with a JSON token response",
        ),
    }
}

/// How long a refresh waits for another Host's refresh of the same stored grant: longer than
/// the two token requests that refresh may make.
const STORE_LOCK_WAIT: std::time::Duration = limits::OAUTH_REQUEST_TIMEOUT
    .saturating_mul(2)
    .saturating_add(std::time::Duration::from_secs(5));

/// Called with every token the Pack learns, so the entry's redactor scrubs it from server text.
pub(crate) type LearnSecret = dyn Fn(&SecretString) + Send + Sync;

/// Scrubs a text of the entry's secrets, configured and learned (see
/// [`crate::redact::Redactor::scrubber`]).
pub(crate) type ScrubText = dyn Fn(&str) -> String + Send + Sync;

/// The grant of one server, shared by every request to it.
///
/// Invariants: at most one refresh runs at a time (the others wait for it and then use its
/// result), across Hosts sharing the store too (its file lock, [`Store::lock`]); a refreshed grant is saved to the store before any request uses it; after
/// `invalid_grant` a grant another Host stored meanwhile is adopted (and refreshed at most once
/// more), else the stored grant is deleted if it is still the refused one and every caller
/// gets [`Kind::SignInRequired`]. A
/// client credentials grant has no refresh token: it is renewed by the same grant.
pub(crate) struct Tokens {
    net: Net,
    server: AuthorizationServer,
    identity: ClientIdentity,
    resource: Url,
    store: Option<(Store, StoreKey)>,
    grant: tokio::sync::Mutex<Option<Grant>>,
    learn: Box<LearnSecret>,
    /// For the client credentials grant: the key and scopes to get a new grant with when the
    /// current one expires (no refresh token is involved).
    renewal: Option<Renewal>,
    /// Whether the current grant came from, or was saved to, the store: then a store without a
    /// grant means another Host found it refused and deleted it.
    in_store: std::sync::atomic::AtomicBool,
}

/// How a client credentials grant is renewed.
struct Renewal {
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
        resource: Url,
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
        }
    }

    /// Renews an expired grant with the client credentials grant (with `private_key` when set,
    /// asking for `scopes`) instead of a refresh token.
    pub(crate) fn renewing_by_client_credentials(
        mut self,
        private_key: Option<SecretString>,
        scopes: Vec<String>,
    ) -> Tokens {
        self.renewal = Some(Renewal {
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

    /// An access token that does not expire within [`REFRESH_MARGIN`], refreshing first when
    /// needed.
    ///
    /// # Errors
    /// [`Kind::SignInRequired`] when there is no grant or the server refused the refresh with
    /// `invalid_grant`; another kind when the refresh failed otherwise (the grant is kept).
    ///
    /// # Cancel safety
    /// Cancel safe: a refresh runs in its own task and finishes, saved, even when this future
    /// is dropped.
    pub(crate) async fn access_token(self: &Arc<Self>) -> Result<SecretString, Error> {
        {
            let current = self.grant.lock().await;
            match &*current {
                Some(grant) if !grant.expires_soon(now_secs()) => {
                    return Ok(grant.access_token.clone());
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
    ) -> Result<SecretString, Error> {
        self.refresh_in_task(Some(rejected.expose_secret().to_string()))
            .await
    }

    async fn refresh_in_task(
        self: &Arc<Self>,
        rejected: Option<String>,
    ) -> Result<SecretString, Error> {
        let this = Arc::clone(self);
        let task = tokio::spawn(async move { this.refresh_locked(rejected).await });
        task.await.unwrap_or_else(|_| {
            Err(Error::new(
                Kind::Transport,
                "the token refresh stopped unexpectedly",
            ))
        })
    }

    async fn refresh_locked(&self, rejected: Option<String>) -> Result<SecretString, Error> {
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
            return Ok(grant.access_token.clone());
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
            Stored::Deleted if in_store => {
                tracing::info!(
                    "the stored grant is gone (another Host found it refused, or a logout \
                     deleted it); a new sign-in is needed"
                );
                *current = None;
                return Err(refused_grant());
            }
            Stored::Grant(stored)
                if stored.access_token.expose_secret() != grant.access_token.expose_secret() =>
            {
                learn_grant(&*self.learn, &stored);
                self.in_store
                    .store(true, std::sync::atomic::Ordering::Release);
                if fresh(&stored) {
                    let token = stored.access_token.clone();
                    *current = Some(stored);
                    return Ok(token);
                }
                stored
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
                    let token = new.access_token.clone();
                    *current = Some(new);
                    return Ok(token);
                }
                Err(e) if e.is_sign_in_required() => {
                    // Another Host sharing the store may have rotated the grant after it was
                    // read: adopt that one (once) instead of deleting it.
                    match self.load_stored() {
                        Some(stored) if !same_grant(&stored, &grant) && !retried => {
                            learn_grant(&*self.learn, &stored);
                            self.in_store
                                .store(true, std::sync::atomic::Ordering::Release);
                            if fresh(&stored) {
                                let token = stored.access_token.clone();
                                *current = Some(stored);
                                return Ok(token);
                            }
                            retried = true;
                            grant = stored;
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
    fn load_stored_grant(&self) -> Stored {
        let Some((store, key)) = self.store.as_ref() else {
            return Stored::Other;
        };
        let stored = store.load(key);
        if stored.ignored {
            return Stored::Other;
        }
        match (&stored.client, stored.grant) {
            (Some(client), _) if client.client_id != self.identity.client_id => Stored::Other,
            (_, Some(grant)) => Stored::Grant(grant),
            (_, None) => Stored::Deleted,
        }
    }

    /// The stored grant, when it was issued to this client (another Host may have stored its
    /// own registration and grant meanwhile).
    fn load_stored(&self) -> Option<Grant> {
        let (store, key) = self.store.as_ref()?;
        let stored = store.load(key);
        match &stored.client {
            Some(client) if client.client_id != self.identity.client_id => None,
            _ => stored.grant,
        }
    }

    fn save(&self, grant: Option<&Grant>) {
        let Some((store, key)) = &self.store else {
            return;
        };
        let mut stored = store.load(key);
        stored.grant = grant.cloned();
        // The grant is stored with the client it was issued to (a refresh needs both), even
        // when another Host stored its own registration meanwhile.
        if grant.is_some() && self.identity.source == super::client::Source::Registered {
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
enum Stored {
    Grant(Grant),
    Deleted,
    Other,
}

/// The error of a grant the authorization server refused (`invalid_grant`).
fn refused_grant() -> Error {
    Error::new(
        Kind::SignInRequired,
        "the authorization server no longer accepts the grant (invalid_grant); sign in again",
    )
}

fn no_grant() -> Error {
    Error::new(
        Kind::SignInRequired,
        "no stored sign-in for this server; sign in",
    )
}

fn learn_grant(learn: &LearnSecret, grant: &Grant) {
    learn(&grant.access_token);
    if let Some(refresh) = &grant.refresh_token {
        learn(refresh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_choice_order() {
        let challenge = Challenge {
            scope: Some("c1 c2".into()),
            ..Challenge::default()
        };
        let configured = vec!["k".to_string()];
        let supported = vec!["s1".to_string(), "s2".to_string()];
        assert_eq!(
            choose_scopes(Some(&configured), &challenge, Some(&supported)),
            ["k"]
        );
        assert_eq!(
            choose_scopes(None, &challenge, Some(&supported)),
            ["c1", "c2"]
        );
        assert_eq!(
            choose_scopes(None, &Challenge::default(), Some(&supported)),
            ["s1", "s2"]
        );
        assert!(choose_scopes(None, &Challenge::default(), None).is_empty());
    }

    #[test]
    fn step_up_takes_the_union_at_most_twice_per_scope() {
        let step = StepUp::default();
        let challenge = Challenge {
            scope: Some("read write".into()),
            error: Some("insufficient_scope".into()),
            ..Challenge::default()
        };
        let held = vec!["read".to_string(), "other".to_string()];
        assert_eq!(
            step.next(&held, &challenge, "tools/call a").unwrap(),
            ["read", "other", "write"]
        );
        // A re-listing that goes through changes nothing.
        step.succeeded("tools/list");
        assert_eq!(
            step.next(&held, &challenge, "tools/call a").unwrap(),
            ["read", "other", "write"]
        );
        assert_eq!(
            step.next(&held, &challenge, "tools/call a")
                .unwrap_err()
                .message(),
            "the server still answers 403 insufficient_scope after 2 new sign-ins with more \
             scopes; giving up"
        );
        // Another scope has its own count.
        let admin = Challenge {
            scope: Some("admin".into()),
            error: Some("insufficient_scope".into()),
            ..Challenge::default()
        };
        assert_eq!(
            step.next(&held, &admin, "tools/call b").unwrap(),
            ["read", "other", "admin"]
        );
        // Once the refused request goes through, its scope may be asked for again.
        assert!(step.waiting());
        step.succeeded("tools/call a");
        assert!(step.next(&held, &challenge, "tools/call a").is_ok());
    }

    #[test]
    fn grant_debug_hides_tokens_and_expiry_uses_the_margin() {
        let grant = Grant {
            access_token: SecretString::from("access-token-value-1"),
            refresh_token: Some(SecretString::from("refresh-token-value-1")),
            expires_at: Some(1000),
            lifetime: None,
            scopes: vec!["a".into()],
        };
        assert_eq!(
            format!("{grant:?}"),
            "Grant { access_token: \"[redacted]\", refresh_token: Some(\"[redacted]\"), \
             expires_at: Some(1000), lifetime: None, scopes: [\"a\"] }"
        );
        assert!(grant.expires_soon(1000 - REFRESH_MARGIN.as_secs()));
        assert!(!grant.expires_soon(1000 - REFRESH_MARGIN.as_secs() - 1));
        // A 30 s token is refreshed in its last 15 s; a long one in its last 60 s.
        let short = Grant {
            lifetime: Some(30),
            ..grant.clone()
        };
        assert!(short.expires_soon(1000 - 15));
        assert!(!short.expires_soon(1000 - 16));
        let long = Grant {
            lifetime: Some(3600),
            ..grant
        };
        assert!(long.expires_soon(1000 - 60));
        assert!(!long.expires_soon(1000 - 61));
    }

    #[test]
    fn token_errors_scrub_what_was_sent_and_never_quote_a_body() {
        let refresh = SecretString::from("refresh-token-echoed-1");
        let secret = SecretString::from("client-secret-echoed-1");
        let echo = BasicErrorResponse::new(
            BasicErrorResponseType::InvalidClient,
            Some("bad client-secret-echoed-1 for refresh-token-echoed-1".to_string()),
            None,
        );
        let err = token_error(
            RequestTokenError::ServerResponse(echo),
            &[Some(&refresh), Some(&secret)],
        );
        assert_eq!(err.kind(), Kind::Denied);
        assert_eq!(
            err.message(),
            "the token endpoint refused the request (invalid_client): bad [redacted] for [redacted]"
        );
        let grant = BasicErrorResponse::new(BasicErrorResponseType::InvalidGrant, None, None);
        let err = token_error(RequestTokenError::ServerResponse(grant), &[]);
        assert!(err.is_sign_in_required());
        // In a code exchange, `invalid_grant` refuses the code: quoted like any refusal.
        let code = BasicErrorResponse::new(
            BasicErrorResponseType::InvalidGrant,
            Some("the code expired".to_string()),
            None,
        );
        let err = refusal(RequestTokenError::ServerResponse(code), &[], true);
        assert_eq!(err.kind(), Kind::Denied);
        assert_eq!(
            err.message(),
            "the token endpoint refused the request (invalid_grant): the code expired"
        );
        let err = token_error(
            RequestTokenError::Other("unexpected body access-token-leaked-1".to_string()),
            &[],
        );
        assert_eq!(
            format!("{err:?}"),
            "auth::Error(Refused: the token endpoint answered HTTP 200 but not with a JSON token response)"
        );
    }

    #[test]
    fn an_error_code_echoing_the_refresh_token_is_scrubbed() {
        let refresh = SecretString::from("refresh-token-echoed-2");
        let echo = BasicErrorResponse::new(
            BasicErrorResponseType::Extension("refresh-token-echoed-2".to_string()),
            None,
            None,
        );
        let err = token_error(RequestTokenError::ServerResponse(echo), &[Some(&refresh)]);
        assert_eq!(
            err.message(),
            "the token endpoint refused the request ([redacted])"
        );
    }

    #[test]
    fn token_errors_scrub_percent_encoded_echoes() {
        let refresh = SecretString::from("rt/abc+def=12345678");
        let secret = SecretString::from("cs/secret+value=987");
        let echo = BasicErrorResponse::new(
            BasicErrorResponseType::InvalidClient,
            Some(
                "got refresh_token=rt%2Fabc%2Bdef%3D12345678&client_secret=cs%2Fsecret%2Bvalue%3D987"
                    .to_string(),
            ),
            None,
        );
        let err = token_error(
            RequestTokenError::ServerResponse(echo),
            &[Some(&refresh), Some(&secret)],
        );
        assert_eq!(
            err.message(),
            "the token endpoint refused the request (invalid_client): got \
             refresh_token=[redacted]&client_secret=[redacted]"
        );
    }

    #[test]
    fn learned_tokens_are_scrubbed_in_their_encoded_forms() {
        let redactor = crate::redact::Redactor::default();
        let learn = redactor.learner();
        learn(&SecretString::from("at/abc+def=12345678"));
        assert_eq!(
            redactor.scrub("you sent at%2Fabc%2Bdef%3D12345678"),
            "you sent [redacted]"
        );
        assert_eq!(
            redactor.scrub("{\"echo\":\"at\\/abc+def=12345678\"}"),
            "{\"echo\":\"[redacted]\"}"
        );
    }

    #[tokio::test]
    async fn an_echoed_client_assertion_is_scrubbed() {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
        use base64::Engine;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        // A token endpoint on 127.0.0.1 that refuses the request, quoting the assertion sent.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let sent = Arc::new(std::sync::Mutex::new(String::new()));
        let seen = sent.clone();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let n = stream.read(&mut chunk).await.unwrap();
                request.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        break;
                    }
                }
            }
            let text = String::from_utf8_lossy(&request).to_string();
            let body = text.split_once("\r\n\r\n").unwrap().1.to_string();
            let assertion = url::form_urlencoded::parse(body.as_bytes())
                .find(|(k, _)| k == "client_assertion")
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default();
            *seen.lock().unwrap() = assertion.clone();
            let answer = serde_json::json!({
                "error": "invalid_client",
                "error_description": format!("assertion {assertion} is not trusted"),
            })
            .to_string();
            let reply = format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
            stream.write_all(reply.as_bytes()).await.unwrap();
        });

        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
        );
        let base = Url::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        let net = Net::new(&base.join("/mcp").unwrap()).unwrap();
        let server = AuthorizationServer {
            issuer: Some(base.to_string()),
            authorization_endpoint: base.join("/authorize").unwrap(),
            token_endpoint: base.join("/token").unwrap(),
            registration_endpoint: None,
            metadata: Default::default(),
            source: crate::auth::discovery::Source::Defaults,
        };
        let identity = ClientIdentity {
            client_id: "jwt-client".into(),
            client_secret: None,
            auth_method: AuthMethod::PrivateKeyJwt,
            source: crate::auth::client::Source::Configured,
            token_endpoint: None,
            redirect_uri: None,
        };
        let err = client_credentials(
            &net,
            &server,
            &identity,
            Some(&SecretString::from(pem)),
            &base.join("/mcp").unwrap(),
            &[],
        )
        .await
        .unwrap_err();
        assert_eq!(sent.lock().unwrap().split('.').count(), 3, "a JWT was sent");
        assert_eq!(
            err.message(),
            "the token endpoint refused the request (invalid_client): assertion [redacted] is not \
             trusted"
        );
    }
}
