//! The grants and the token state of one server (OAuth 2.1 §4.1 and §4.3 with RFC 7636 PKCE,
//! RFC 8707 resource indicators and RFC 9207 `iss`; OAuth 2.1 §4.2 client credentials with
//! RFC 7523 assertions; MCP 2025-11-25 "Scope Selection Strategy" and "Step-Up Authorization
//! Flow").
//!
//! Owns the grant requests: the authorization request (PKCE S256 only, a random `state`,
//! `resource`, scopes) and the code exchange (of a redirect whose `state` and `iss` the listener
//! checked); refresh; client
//! credentials with its ES256 assertion; and how a token endpoint's refusal becomes an
//! [`Error`]. The grants go through the `oauth2` crate over [`Net`]. Which scopes to ask for is
//! [`super::scopes`]'s; the current grant of a server, refreshed single-flight and saved before
//! use, is [`super::tokens::Tokens`]. Every one of these requests takes its `resource` from
//! [`ResourceIndicator::to_send`], so none names a resource holding a secret of the entry.

use oauth2::basic::{BasicClient, BasicErrorResponse, BasicErrorResponseType};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet,
    EndpointSet, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError,
    Scope, TokenResponse, TokenUrl,
};
use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};

use std::sync::Arc;

use super::client::{AuthMethod, ClientIdentity, oauth_code};
use super::discovery::{AuthorizationServer, ResourceIndicator};
use super::dpop::DpopKey;
use super::net::{Net, NetError};
use super::{Error, ErrorKind, now_secs};
use crate::limits::REFRESH_MARGIN;
use crate::redact::{LearnSecret, Learned, Redactor};

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
    /// The authorization server that issued the grant ([`AuthorizationServer::identifier`]):
    /// its tokens go to that server only. `None` for a grant an older version stored.
    pub(crate) issuer: Option<String>,
    /// What the tokens are bound to (RFC 9449).
    pub(crate) binding: Binding,
}

/// The DPoP key a grant's tokens are bound to (RFC 9449 §5), if any.
#[derive(Clone)]
pub(crate) enum Binding {
    /// No key: a `Bearer` access token, refreshed without a proof.
    Unbound,
    /// A `DPoP` access token: every request presents it with a fresh proof of the key, and
    /// every refresh proves the key too.
    Dpop(Arc<DpopKey>),
    /// A proved token request that got a `Bearer` access token: the server chose not to bind
    /// the access token, which is sent as `Bearer`, but the refresh token may still be bound
    /// to the key (RFC 9449 §5, always so for a public client), so every refresh proves it.
    RefreshOnly(Arc<DpopKey>),
}

impl Binding {
    /// The key every request presenting the access token proves; `None` for a `Bearer` token.
    pub(crate) fn access_key(&self) -> Option<&Arc<DpopKey>> {
        match self {
            Binding::Dpop(key) => Some(key),
            Binding::Unbound | Binding::RefreshOnly(_) => None,
        }
    }

    /// The key of the grant, which every token request for it proves.
    pub(crate) fn key(&self) -> Option<&Arc<DpopKey>> {
        match self {
            Binding::Dpop(key) | Binding::RefreshOnly(key) => Some(key),
            Binding::Unbound => None,
        }
    }
}

impl std::fmt::Debug for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Binding::Unbound => "Unbound",
            Binding::Dpop(_) => "Dpop([redacted])",
            Binding::RefreshOnly(_) => "RefreshOnly([redacted])",
        })
    }
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
            .field("issuer", &self.issuer)
            .field("binding", &self.binding)
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

/// What the browser brought back to the loopback listener: the code of a redirect whose every
/// parameter the listener checked (`state`, and `iss` by RFC 9207 §2.4; see
/// [`super::callback`]).
pub(crate) struct Redirect {
    pub(crate) code: SecretString,
}

impl std::fmt::Debug for Redirect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redirect")
            .field("code", &"[redacted]")
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
/// [`ErrorKind::Refused`] when the server does not advertise S256 (MCP 2025-11-25 requires it); as
/// [`ResourceIndicator::to_send`] for a resource holding a secret.
pub(crate) fn authorization_request(
    server: &AuthorizationServer,
    identity: &ClientIdentity,
    resource: &ResourceIndicator,
    scopes: &[String],
    redirect_uri: &str,
) -> Result<Pending, Error> {
    let resource = resource.to_send()?;
    if !server.supports_s256() {
        return Err(Error::new(
            ErrorKind::Refused,
            "the authorization server does not advertise PKCE S256 \
             (code_challenge_methods_supported); signing in to it is refused",
        ));
    }
    let redirect = RedirectUrl::new(redirect_uri.to_string())
        .map_err(|_| Error::new(ErrorKind::Refused, "the redirect URI is not a valid URL"))?;
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
/// `resource`). The redirect's `state` and `iss` (RFC 9207 §2.4) were checked by the listener
/// that took it, before any of it reached here.
///
/// # Errors
/// As [`ResourceIndicator::to_send`] for a resource holding a secret (nothing is sent); as
/// [`token_error`] for the token request.
pub(crate) async fn exchange_code(
    net: &Net,
    server: &AuthorizationServer,
    identity: &ClientIdentity,
    resource: &ResourceIndicator,
    pending: Pending,
    redirect: Redirect,
    learn: &LearnSecret,
) -> Result<Grant, Error> {
    let resource = resource.to_send()?;
    let redirect_url = RedirectUrl::new(pending.redirect_uri.clone())
        .map_err(|_| Error::new(ErrorKind::Refused, "the redirect URI is not a valid URL"))?;
    let client = token_client(server, identity).set_redirect_uri(redirect_url);
    let verifier = SecretString::from(pending.verifier.secret().to_string());
    let secrets = [
        Some(&redirect.code),
        Some(&verifier),
        identity.client_secret.as_ref(),
    ];
    let key = new_key(server, learn)?;
    let request = client
        .exchange_code(AuthorizationCode::new(
            redirect.code.expose_secret().to_string(),
        ))
        .set_pkce_verifier(pending.verifier)
        .add_extra_param("resource", resource.to_string());
    let answer = request
        .request_async(&net.proving(key.as_deref()))
        .await
        .map_err(|e| refusal(e, &secrets, true))?;
    grant_from(&answer, None, &pending.scopes, server, key)
}

/// A new key pair for a grant from `server`, when it takes DPoP proofs this client signs
/// ([`AuthorizationServer::supports_dpop`]): its tokens are then asked for bound to the key
/// (RFC 9449 §5). The head of every proof of the key is learned before the first proof goes
/// out ([`Learned::JwtHead`]): a token endpoint that refuses the request may quote the proof.
///
/// # Errors
/// [`ErrorKind::Config`] when no key pair could be generated.
fn new_key(
    server: &AuthorizationServer,
    learn: &LearnSecret,
) -> Result<Option<Arc<DpopKey>>, Error> {
    if !server.supports_dpop() {
        return Ok(None);
    }
    let key = DpopKey::generate()?;
    learn(&key.header_segment(), Learned::JwtHead);
    Ok(Some(Arc::new(key)))
}

/// Refreshes `grant` (OAuth 2.1 §4.3 with `resource`, and `scope` naming the grant's scopes:
/// some authorization servers, Entra ID among them, otherwise issue a token without them). A
/// rotated refresh token replaces the old one; the old one stays when the server sends none.
///
/// # Errors
/// As [`ResourceIndicator::to_send`] for a resource holding a secret (nothing is sent);
/// [`ErrorKind::SignInRequired`] for `invalid_grant`; as [`token_error`] otherwise.
pub(crate) async fn refresh(
    net: &Net,
    server: &AuthorizationServer,
    identity: &ClientIdentity,
    resource: &ResourceIndicator,
    grant: &Grant,
) -> Result<Grant, Error> {
    let resource = resource.to_send()?;
    let Some(refresh_token) = &grant.refresh_token else {
        return Err(Error::new(
            ErrorKind::SignInRequired,
            "the access token expired and the server gave no refresh token; sign in again",
        ));
    };
    let secrets = [Some(refresh_token), identity.client_secret.as_ref()];
    let refresh_token_value = RefreshToken::new(refresh_token.expose_secret().to_string());
    let client = token_client(server, identity);
    let request = client
        .exchange_refresh_token(&refresh_token_value)
        .add_scopes(grant.scopes.iter().cloned().map(Scope::new))
        .add_extra_param("resource", resource.to_string());
    // A grant with a key is refreshed with a proof of it (RFC 9449 §5: the refresh token of a
    // public client is bound to it).
    let key = grant.binding.key().cloned();
    let answer = request
        .request_async(&net.proving(key.as_deref()))
        .await
        .map_err(|e| token_error(e, &secrets))?;
    grant_from(&answer, Some(refresh_token), &grant.scopes, server, key)
}

/// The client credentials grant (OAuth 2.1 §4.2), authenticated by the client's secret or, with
/// `private_key` (`oauth.privateKey`), by an ES256 JWT assertion (RFC 7523 §2.2) whose `iss` and `sub` are the
/// client id and whose `aud` is the issuer (else the token endpoint).
///
/// # Errors
/// As [`ResourceIndicator::to_send`] for a resource holding a secret (nothing is sent, no assertion is
/// made); [`ErrorKind::Config`] for a key that is not a PKCS #8 P-256 key; as [`token_error`]
/// otherwise.
pub(crate) async fn client_credentials(
    net: &Net,
    server: &AuthorizationServer,
    identity: &ClientIdentity,
    private_key: Option<&SecretString>,
    resource: &ResourceIndicator,
    scopes: &[String],
    learn: &LearnSecret,
) -> Result<Grant, Error> {
    let resource = resource.to_send()?;
    let assertion = match (private_key, identity.auth_method) {
        (Some(key), AuthMethod::PrivateKeyJwt) => {
            let audience = server
                .issuer
                .clone()
                .unwrap_or_else(|| server.token_endpoint.to_string());
            let assertion = jwt_assertion(key, &identity.client_id, &audience)?;
            // Learned before it is sent: an MCP server that also saw it (or plays the
            // authorization server) may echo it while it is still valid.
            learn(&assertion, Learned::Assertion);
            Some(assertion)
        }
        _ => None,
    };
    let secrets = [identity.client_secret.as_ref(), assertion.as_ref()];
    let client = token_client(server, identity);
    let request = client
        .exchange_client_credentials()
        .add_scopes(scopes.iter().cloned().map(Scope::new))
        .add_extra_param("resource", resource.to_string());
    let request = match &assertion {
        Some(assertion) => request
            .add_extra_param(
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            )
            .add_extra_param("client_assertion", assertion.expose_secret().to_string()),
        None => request,
    };
    let key = new_key(server, learn)?;
    let answer = request
        .request_async(&net.proving(key.as_deref()))
        .await
        .map_err(|e| token_error(e, &secrets))?;
    grant_from(&answer, None, scopes, server, key)
}

/// An ES256 client assertion (RFC 7523 §3) valid for five minutes.
fn jwt_assertion(
    key: &SecretString,
    client_id: &str,
    audience: &str,
) -> Result<SecretString, Error> {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    let bad_key = || {
        Error::new(
            ErrorKind::Config,
            "oauth.privateKey is not a PKCS #8 PEM P-256 private key (BEGIN PRIVATE KEY)",
        )
    };
    let pem = key.expose_secret();
    let body: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .flat_map(|l| l.trim().chars())
        .collect();
    let der = STANDARD.decode(body).map_err(|_| bad_key())?;
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der).map_err(|_| bad_key())?;
    let mut jti = [0u8; 16];
    aws_lc_rs::rand::fill(&mut jti)
        .map_err(|_| Error::new(ErrorKind::Config, "no randomness for the client assertion"))?;
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
        .map_err(|_| {
            Error::new(
                ErrorKind::Config,
                "the client assertion could not be signed",
            )
        })?;
    Ok(SecretString::from(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature.as_ref())
    )))
}

/// The grant of a token response to a request that proved `key` (or none), when its
/// `token_type` is one this client sends (compared case-insensitively, RFC 6749 §5.1):
/// `Bearer`, or `DPoP` when the request proved a key (RFC 9449 §5). A `Bearer` answer to a
/// proved request is an unbound access token, sent as `Bearer`; the grant keeps the key for
/// its refreshes ([`Binding::RefreshOnly`]).
///
/// # Errors
/// [`ErrorKind::Refused`] for any other `token_type`, and for `DPoP` to a request that proved no
/// key: a token of a type the client cannot present is never sent (RFC 6749 §7.1).
fn grant_from(
    answer: &oauth2::basic::BasicTokenResponse,
    old_refresh: Option<&SecretString>,
    requested: &[String],
    server: &AuthorizationServer,
    key: Option<Arc<DpopKey>>,
) -> Result<Grant, Error> {
    let binding = match (check_token_type(answer.token_type(), key.is_some())?, key) {
        (TokenScheme::Dpop, Some(key)) => Binding::Dpop(key),
        (_, Some(key)) => Binding::RefreshOnly(key),
        (_, None) => Binding::Unbound,
    };
    let lifetime = answer
        .expires_in()
        .map(|d| d.as_secs())
        .filter(|secs| *secs > 0);
    Ok(Grant {
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
        issuer: Some(server.identifier()),
        binding,
    })
}

/// How a token is presented (RFC 6750 §2.1, RFC 9449 §7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokenScheme {
    Bearer,
    Dpop,
}

/// How a token of `token_type` is sent: `Bearer` (RFC 6750) always, `DPoP` (RFC 9449) when
/// the token request proved a key (`proved`); the `oauth2` crate lower-cases the field before
/// it parses it.
///
/// # Errors
/// [`ErrorKind::Refused`] otherwise, naming the type only when it is one of the IANA "OAuth Access
/// Token Types" (`DPoP`, `mac`, `N_A`, `PoP`); any other value is `unknown` (it is the server's
/// text and could echo a secret).
fn check_token_type(
    token_type: &oauth2::basic::BasicTokenType,
    proved: bool,
) -> Result<TokenScheme, Error> {
    let other = match token_type {
        oauth2::basic::BasicTokenType::Bearer => return Ok(TokenScheme::Bearer),
        other => other.as_ref(),
    };
    if other == "dpop" && proved {
        return Ok(TokenScheme::Dpop);
    }
    let name = match other {
        "dpop" => "DPoP",
        "mac" => "mac",
        "n_a" => "N_A",
        "pop" => "PoP",
        _ => "unknown",
    };
    Err(Error::new(
        ErrorKind::Refused,
        format!(
            "the token endpoint issued a token of type {name}, which this client does not use \
             (RFC 6749 §7.1); the token is not sent"
        ),
    ))
}

/// Maps a failed token request to an [`Error`]: `invalid_grant` is
/// [`ErrorKind::SignInRequired`]; another OAuth error is [`ErrorKind::Denied`] with its code and its
/// description scrubbed of `secrets` and bounded; a body that is no token response is
/// [`ErrorKind::Refused`] (never quoted: it may hold a token); a refusal that is no OAuth error
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
                ErrorKind::Denied,
                format!("the token endpoint refused the request ({code}){description}"),
            )
        }
        RequestTokenError::Request(e) => e.0,
        RequestTokenError::Parse(..) => Error::new(
            ErrorKind::Refused,
            "the token endpoint answered HTTP 200 but not with a valid token response",
        ),
        RequestTokenError::Other(_) => Error::new(
            ErrorKind::Refused,
            "the token endpoint answered HTTP 200 but not with a JSON token response",
        ),
    }
}
/// The error of a grant the authorization server refused (`invalid_grant`).
pub(crate) fn refused_grant() -> Error {
    Error::new(
        ErrorKind::SignInRequired,
        "the authorization server no longer accepts the grant (invalid_grant); sign in again",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_debug_hides_tokens_and_expiry_uses_the_margin() {
        let grant = Grant {
            access_token: SecretString::from("access-token-value-1"),
            refresh_token: Some(SecretString::from("refresh-token-value-1")),
            expires_at: Some(1000),
            lifetime: None,
            scopes: vec!["a".into()],
            issuer: None,
            binding: Binding::Unbound,
        };
        assert_eq!(
            format!("{grant:?}"),
            "Grant { access_token: \"[redacted]\", refresh_token: Some(\"[redacted]\"), \
             expires_at: Some(1000), lifetime: None, scopes: [\"a\"], issuer: None, \
             binding: Unbound }"
        );
        let key = Arc::new(DpopKey::generate().unwrap());
        let bound = Grant {
            binding: Binding::Dpop(Arc::clone(&key)),
            ..grant.clone()
        };
        assert!(format!("{bound:?}").ends_with("issuer: None, binding: Dpop([redacted]) }"));
        let refresh_bound = Grant {
            binding: Binding::RefreshOnly(key),
            ..grant.clone()
        };
        assert!(
            format!("{refresh_bound:?}")
                .ends_with("issuer: None, binding: RefreshOnly([redacted]) }")
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

    /// What [`token_error`] makes of an `invalid_client` refusal saying `description`, to a
    /// request that sent the refresh token `refresh` and the client secret `secret`.
    fn invalid_client_echo(description: &str, refresh: &str, secret: &str) -> Error {
        let refresh = SecretString::from(refresh);
        let secret = SecretString::from(secret);
        let echo = BasicErrorResponse::new(
            BasicErrorResponseType::InvalidClient,
            Some(description.to_string()),
            None,
        );
        token_error(
            RequestTokenError::ServerResponse(echo),
            &[Some(&refresh), Some(&secret)],
        )
    }

    #[test]
    fn token_errors_scrub_what_was_sent_and_never_quote_a_body() {
        let err = invalid_client_echo(
            "bad client-secret-echoed-1 for refresh-token-echoed-1",
            "refresh-token-echoed-1",
            "client-secret-echoed-1",
        );
        assert_eq!(err.kind(), ErrorKind::Denied);
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
        assert_eq!(err.kind(), ErrorKind::Denied);
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
    fn bearer_tokens_are_accepted_whatever_the_case_and_dpop_ones_only_after_a_proof() {
        use oauth2::basic::BasicTokenType;
        let parse = |t: &str| -> oauth2::basic::BasicTokenResponse {
            serde_json::from_value(serde_json::json!({"access_token": "at-1", "token_type": t}))
                .unwrap()
        };
        assert_eq!(parse("Bearer").token_type(), &BasicTokenType::Bearer);
        assert_eq!(
            check_token_type(parse("bEaReR").token_type(), false),
            Ok(TokenScheme::Bearer)
        );
        // A proved request may get an unbound token: it is sent as Bearer.
        assert_eq!(
            check_token_type(parse("Bearer").token_type(), true),
            Ok(TokenScheme::Bearer)
        );
        assert_eq!(
            check_token_type(parse("dpop").token_type(), true),
            Ok(TokenScheme::Dpop)
        );
        for (sent, named) in [
            ("mac", "mac"),
            ("DPoP", "DPoP"),
            ("N_A", "N_A"),
            ("pop", "PoP"),
            // A short value that is no registered type may echo a secret: never named.
            ("sk4f9a8b", "unknown"),
            ("secret-looking-token-type-1", "unknown"),
            ("a b", "unknown"),
        ] {
            let err = check_token_type(parse(sent).token_type(), false).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Refused);
            assert_eq!(
                err.message(),
                format!(
                    "the token endpoint issued a token of type {named}, which this client does \
                     not use (RFC 6749 §7.1); the token is not sent"
                )
            );
        }
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
        let err = invalid_client_echo(
            "got refresh_token=rt%2Fabc%2Bdef%3D12345678&client_secret=cs%2Fsecret%2Bvalue%3D987",
            "rt/abc+def=12345678",
            "cs/secret+value=987",
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
        learn(&SecretString::from("at/abc+def=12345678"), Learned::Token);
        assert_eq!(
            redactor.scrub("you sent at%2Fabc%2Bdef%3D12345678"),
            "you sent [redacted]"
        );
        assert_eq!(
            redactor.scrub("{\"echo\":\"at\\/abc+def=12345678\"}"),
            "{\"echo\":\"[redacted]\"}"
        );
    }

    /// The authorization server at `http://127.0.0.1:{port}` (endpoints at their default paths),
    /// the resource indicator of its MCP server at `/mcp` and a [`Net`] for that server.
    fn loopback_authorization_server(port: u16) -> (ResourceIndicator, Net, AuthorizationServer) {
        let base = Url::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        let net = Net::new(&base.join("/mcp").unwrap()).unwrap();
        let server = AuthorizationServer {
            issuer: Some(base.to_string()),
            authorization_endpoint: base.join("/authorize").unwrap(),
            token_endpoint: base.join("/token").unwrap(),
            registration_endpoint: None,
            metadata: Default::default(),
            source: crate::auth::discovery::EndpointSource::Defaults,
            named_issuer: None,
        };
        let resource = ResourceIndicator::new(
            base.join("/mcp").unwrap().to_string(),
            crate::auth::discovery::ResourceSource::ServerUrl,
            std::sync::Arc::new(|_: &str| false),
        );
        (resource, net, server)
    }

    /// A token endpoint on 127.0.0.1 that answers one request: `answer` gets the request's
    /// body and gives the status (`"200 OK"`) and the JSON body. Returns its port.
    async fn one_token_answer(
        answer: impl FnOnce(&str) -> (&'static str, String) + Send + 'static,
    ) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut chunk = [0u8; 4096];
            let body = loop {
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
                    if n == 0 || body.len() >= length {
                        break body.to_string();
                    }
                }
            };
            let (status, json) = answer(&body);
            let reply = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}",
                json.len()
            );
            stream.write_all(reply.as_bytes()).await.unwrap();
        });
        port
    }

    #[tokio::test]
    async fn an_echoed_client_assertion_is_scrubbed() {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
        use base64::Engine;

        // A token endpoint on 127.0.0.1 that refuses the request, quoting the assertion sent.
        let sent = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let seen = sent.clone();
        let port = one_token_answer(move |body| {
            let assertion = url::form_urlencoded::parse(body.as_bytes())
                .find(|(k, _)| k == "client_assertion")
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default();
            *seen.lock().unwrap() = assertion.clone();
            let answer = serde_json::json!({
                "error": "invalid_client",
                "error_description": format!("assertion {assertion} is not trusted"),
            });
            ("400 Bad Request", answer.to_string())
        })
        .await;

        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
        );
        let (resource, net, server) = loopback_authorization_server(port);
        let identity = ClientIdentity {
            client_id: "jwt-client".into(),
            client_secret: None,
            auth_method: AuthMethod::PrivateKeyJwt,
            source: crate::auth::client::ClientIdSource::Configured,
            token_endpoint: None,
            redirect_uri: None,
        };
        let err = client_credentials(
            &net,
            &server,
            &identity,
            Some(&SecretString::from(pem)),
            &resource,
            &[],
            &|_: &SecretString, _: Learned| {},
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

    /// A token endpoint's answer is a server's JSON text: nested past the reader's bound it is
    /// refused, as every other such text is (`crate::json`, module docs): the `oauth2` crate's
    /// own reader never gets it, and no grant is taken.
    #[tokio::test]
    async fn a_token_answer_nested_past_the_bound_is_refused() {
        let depth = crate::limits::MAX_JSON_DEPTH + 6;
        let answer = format!(
            r#"{{"access_token":"at-deep-1","token_type":"Bearer","extra":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        assert!(crate::json::from_server::<serde_json::Value>(answer.as_bytes()).is_err());
        let port = one_token_answer(move |_| ("200 OK", answer)).await;
        let (resource, net, server) = loopback_authorization_server(port);
        let identity = ClientIdentity {
            client_id: "secret-client".into(),
            client_secret: Some(SecretString::from("client-secret-1")),
            auth_method: AuthMethod::ClientSecretPost,
            source: crate::auth::client::ClientIdSource::Configured,
            token_endpoint: None,
            redirect_uri: None,
        };
        let taken = client_credentials(
            &net,
            &server,
            &identity,
            None,
            &resource,
            &[],
            &|_: &SecretString, _: Learned| {},
        )
        .await;
        assert_eq!(
            taken.map(|_| ()).map_err(|e| e.to_string()),
            Err("the token endpoint answered HTTP 200 but not with a JSON token response".into())
        );
    }
}
