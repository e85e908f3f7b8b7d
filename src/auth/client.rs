//! Who the client is to an authorization server (MCP 2025-11-25 "Client Registration
//! Approaches"; RFC 7591).
//!
//! Owns the order: a pre-registered client from the entry (`oauth.clientId`, with
//! `oauth.clientSecret` when it has one); else the entry's Client ID Metadata Document URL
//! (`oauth.clientMetadataUrl`) when the server advertises
//! `client_id_metadata_document_supported`; else a stored registration with this token
//! endpoint; else dynamic client registration, which the caller stores so that the next sign-in
//! (and the next Host) reuses it. It also owns the choice of token endpoint authentication
//! (`none`, `client_secret_basic`, `client_secret_post`).

use reqwest::Url;
use secrecy::SecretString;
use serde::Deserialize;

use super::config::OAuthConfig;
use super::discovery::{AuthorizationServer, EndpointSource};
use super::net::{Net, parse_json};
use super::{Error, ErrorKind};

/// How the client authenticates at the token endpoint (RFC 7591 §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthMethod {
    /// A public client: `client_id` in the body, no secret.
    None,
    /// `Authorization: Basic` with the id and secret.
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the body.
    ClientSecretPost,
    /// A signed JWT assertion (RFC 7523 §2.2), for the client credentials grant.
    PrivateKeyJwt,
}

impl AuthMethod {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::PrivateKeyJwt => "private_key_jwt",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<AuthMethod> {
        match text {
            "none" => Some(AuthMethod::None),
            "client_secret_basic" => Some(AuthMethod::ClientSecretBasic),
            "client_secret_post" => Some(AuthMethod::ClientSecretPost),
            "private_key_jwt" => Some(AuthMethod::PrivateKeyJwt),
            _ => None,
        }
    }
}

/// Where a client identity came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientIdSource {
    /// `oauth.clientId` in the entry.
    Configured,
    /// `oauth.clientMetadataUrl`: the URL is the client id.
    MetadataDocument,
    /// Dynamic client registration, now or in an earlier run.
    Registered,
}

/// A client identity. Its `Debug` never shows the secret.
#[derive(Clone)]
pub(crate) struct ClientIdentity {
    pub(crate) client_id: String,
    pub(crate) client_secret: Option<SecretString>,
    pub(crate) auth_method: AuthMethod,
    pub(crate) source: ClientIdSource,
    /// For a registered client: the token endpoint it was registered with, and its redirect URI.
    pub(crate) token_endpoint: Option<String>,
    pub(crate) redirect_uri: Option<String>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("auth_method", &self.auth_method)
            .field("source", &self.source)
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// The identity that needs no registration: the entry's client, or its metadata document URL
/// when the server takes one; `None` when the caller must use a stored registration or
/// register.
pub(crate) fn without_registration(
    config: &OAuthConfig,
    server: &AuthorizationServer,
) -> Option<ClientIdentity> {
    if let Some(client_id) = &config.client_id {
        let auth_method = if config.private_key.is_some() && config.client_secret.is_none() {
            AuthMethod::PrivateKeyJwt
        } else {
            secret_method(config.client_secret.is_some(), &server.auth_methods())
        };
        return Some(ClientIdentity {
            client_id: client_id.clone(),
            client_secret: config.client_secret.clone(),
            auth_method,
            source: ClientIdSource::Configured,
            token_endpoint: None,
            redirect_uri: None,
        });
    }
    match &config.client_metadata_url {
        Some(url) if server.metadata.client_id_metadata_document_supported => {
            Some(ClientIdentity {
                client_id: url.to_string(),
                client_secret: None,
                auth_method: AuthMethod::None,
                source: ClientIdSource::MetadataDocument,
                token_endpoint: None,
                redirect_uri: None,
            })
        }
        _ => None,
    }
}

/// Whether the entry's configured client credential (`oauth.clientSecret`, or the assertions
/// `oauth.privateKey` signs) may go to `server`'s token endpoint, found for the MCP server at
/// `server_url`. The metadata that names a token endpoint comes from the MCP server (RFC 9728
/// §7.6: a resource may name any authorization server), so a credential written for one
/// authorization server would otherwise go wherever a server points it. The rule:
///
/// - with `oauth.authorizationServer`: the authorization server must be that issuer, as its
///   own metadata says (RFC 8414 §3.3: fetched from the issuer and naming it identically; or,
///   for an issuer that publishes none, its 2025-03-26 default endpoints), or its token
///   endpoint must be on that issuer's origin;
/// - without: the token endpoint must be named by an authorization server's own metadata (an
///   issuer the resource metadata names, checked per RFC 8414 §3.3), as every MCP client sends
///   a pre-registered client's credential, or be on the MCP server's origin; a token endpoint
///   on a third origin that only the MCP server's own (2025-03-26) metadata names is refused.
///   Writing `oauth.authorizationServer` pins the issuer.
///
/// An entry with no configured credential passes: a registered client's secret is issued by
/// the server it is sent to.
///
/// # Errors
/// [`ErrorKind::Config`] naming the key to write (`oauth.authorizationServer`) and the issuer
/// or origin found; no request has been sent.
pub(crate) fn credential_may_go(
    config: &OAuthConfig,
    server_url: &Url,
    server: &AuthorizationServer,
) -> Result<(), Error> {
    let key = match (&config.client_secret, &config.private_key) {
        (Some(_), _) => "oauth.clientSecret",
        (None, Some(_)) => "oauth.privateKey",
        (None, None) => return Ok(()),
    };
    // The issuer whose own metadata (or default endpoints) named the token endpoint; none when
    // the MCP server's origin served them (a 2025-03-26 server).
    let vouching = match server.source {
        EndpointSource::ResourceMetadata => server.issuer.as_deref(),
        EndpointSource::Defaults => server.named_issuer.as_deref(),
        EndpointSource::LegacyMetadata | EndpointSource::Guessed => None,
    };
    let origin_of = |text: &str| Url::parse(text).ok().map(|url| url.origin());
    let token_origin = server.token_endpoint.origin();
    let allowed = match &config.authorization_server {
        Some(named) => {
            vouching.is_some_and(|issuer| same_issuer(issuer, named))
                || origin_of(named).is_some_and(|origin| origin == token_origin)
        }
        None => vouching.is_some() || token_origin == server_url.origin(),
    };
    if allowed {
        return Ok(());
    }
    let found = vouching.map_or_else(
        || format!("a token endpoint at {}", token_origin.ascii_serialization()),
        |issuer| format!("the authorization server {issuer}"),
    );
    let message = match &config.authorization_server {
        Some(_) => format!(
            "the server's metadata names {found}, not the oauth.authorizationServer of this \
             entry, so {key} is not sent there and signing in is refused; if {key} belongs to \
             that authorization server, write its issuer as oauth.authorizationServer"
        ),
        None => format!(
            "the server's metadata names {found}, on another origin than the server's url, so \
             {key} is not sent there and signing in is refused; if {key} belongs to that \
             authorization server, write its issuer as \"oauth\": {{\"authorizationServer\": \
             \"<issuer>\"}}"
        ),
    };
    Err(Error::new(ErrorKind::Config, message))
}

/// Whether two issuer identifiers name the same authorization server: identical (RFC 8414
/// §3.3), a trailing `/` aside (a URL parser adds one to a pathless issuer).
fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// Whether a stored registration may be used with `server`: it was made at the same token
/// endpoint.
pub(crate) fn reusable(stored: &ClientIdentity, server: &AuthorizationServer) -> bool {
    stored.source == ClientIdSource::Registered
        && stored.token_endpoint.as_deref() == Some(server.token_endpoint.as_str())
}

/// The method for a client with or without a secret, given what the server supports: `none`
/// without a secret; with one, `client_secret_basic` unless the server supports only
/// `client_secret_post`.
fn secret_method(has_secret: bool, supported: &[String]) -> AuthMethod {
    if !has_secret {
        return AuthMethod::None;
    }
    let basic = supported.iter().any(|m| m == "client_secret_basic");
    let post = supported.iter().any(|m| m == "client_secret_post");
    if post && !basic {
        AuthMethod::ClientSecretPost
    } else {
        AuthMethod::ClientSecretBasic
    }
}

/// The registration response fields a client uses (RFC 7591 §3.2.1).
#[derive(Deserialize)]
struct Registered {
    client_id: String,
    client_secret: Option<String>,
    token_endpoint_auth_method: Option<String>,
}

/// Registers a client for `redirect_uri` (RFC 7591 §3). Asks for `none` when the server
/// supports it, else for a secret by the method the server supports.
///
/// # Errors
/// [`ErrorKind::Config`] when the server has no registration endpoint (the entry needs
/// `oauth.clientId`); [`ErrorKind::Refused`] when the server refuses the registration or answers
/// with something that is not a registration; as [`Net::post_json`] otherwise.
pub(crate) async fn register(
    net: &Net,
    server: &AuthorizationServer,
    redirect_uri: &str,
) -> Result<ClientIdentity, Error> {
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(Error::new(
            ErrorKind::Config,
            "the authorization server offers no dynamic client registration; configure a \
             pre-registered client with oauth.clientId (and oauth.clientSecret)",
        ));
    };
    let supported = server.auth_methods();
    let requested = if supported.iter().any(|m| m == "none") {
        AuthMethod::None
    } else {
        secret_method(true, &supported)
    };
    let body = serde_json::json!({
        "client_name": "plugin-mcp",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": requested.as_str(),
        "application_type": "native",
    });
    let answer = net
        .post_json(endpoint, &body, "the registration endpoint")
        .await?;
    if !answer.status.is_success() {
        // A guessed endpoint refused for good (a 4xx but 408 and 429) with no OAuth answer, or
        // asking to be signed in itself (a server wanting an API key answers every path 401,
        // maybe with a JSON `error` of its own): there is none. Anything else may pass, so it
        // stays a refusal, its OAuth error shown (no_sign_in_offered is for good: is_lasting).
        if server.source == EndpointSource::Guessed
            && refuses_for_good(answer.status)
            && (answer.status == reqwest::StatusCode::UNAUTHORIZED || !is_oauth_error(&answer.body))
        {
            return Err(no_sign_in_offered());
        }
        return Err(registration_refused(answer.status, &answer.body));
    }
    let registered: Registered = parse_json(&answer.body, "the registration response")?;
    let client_secret = registered
        .client_secret
        .filter(|s| !s.is_empty())
        .map(SecretString::from);
    let auth_method = registered
        .token_endpoint_auth_method
        .as_deref()
        .and_then(AuthMethod::parse)
        .filter(|m| *m != AuthMethod::PrivateKeyJwt)
        .unwrap_or_else(|| secret_method(client_secret.is_some(), &supported));
    if auth_method != AuthMethod::None && client_secret.is_none() {
        return Err(Error::new(
            ErrorKind::Refused,
            "the registration response names a secret-based method but holds no client_secret",
        ));
    }
    Ok(ClientIdentity {
        client_id: registered.client_id,
        client_secret,
        auth_method,
        source: ClientIdSource::Registered,
        token_endpoint: Some(server.token_endpoint.to_string()),
        redirect_uri: Some(redirect_uri.to_string()),
    })
}

/// Whether a guessed registration endpoint's client error says there is none: any `4xx` but
/// `408 Request Timeout` and `429 Too Many Requests` (RFC 9110 §15.5.9, RFC 6585 §4), which say
/// "not now" about an endpoint that may well exist, so they stay a refusal the next start
/// tries again.
fn refuses_for_good(status: reqwest::StatusCode) -> bool {
    status.is_client_error()
        && status != reqwest::StatusCode::TOO_MANY_REQUESTS
        && status != reqwest::StatusCode::REQUEST_TIMEOUT
}

/// Why a server that answered `401` but showed no sign-in metadata at all, and whose guessed
/// 2025-03-26 registration endpoint answered a client error that is no OAuth answer either,
/// cannot be signed in to: [`ErrorKind::Config`], so it is lasting (the entry needs its key in the
/// headers).
pub(crate) fn no_sign_in_offered() -> Error {
    Error::new(
        ErrorKind::Config,
        "the server answered HTTP 401 but offers no OAuth sign-in (no protected resource \
         metadata, no authorization server metadata, no registration endpoint); it probably \
         wants an API key or token: set it in the entry's headers",
    )
}

/// Whether `body` is a JSON object with a string `error`: an OAuth error response.
fn is_oauth_error(body: &[u8]) -> bool {
    crate::json::from_server::<serde_json::Value>(body)
        .ok()
        .is_some_and(|v| v.get("error").is_some_and(serde_json::Value::is_string))
}

/// A registration refusal (RFC 7591 §3.2.2): its HTTP status, the OAuth `error` code and the
/// `error_description` when the body is such an error response, never the body otherwise.
/// Nothing secret went out with the request; the description is scrubbed of the entry's
/// secrets and cut by the connection, like a token endpoint's refusal.
fn registration_refused(status: reqwest::StatusCode, body: &[u8]) -> Error {
    #[derive(Deserialize)]
    struct ErrorResponse {
        error: String,
        error_description: Option<String>,
    }
    let refusal = crate::json::from_server::<ErrorResponse>(body).ok();
    let code = refusal
        .as_ref()
        .map(|r| format!(" ({})", oauth_code(&r.error)))
        .unwrap_or_default();
    let description = refusal
        .and_then(|r| r.error_description)
        .map(|d| format!(": {}", description_text(&d)))
        .unwrap_or_default();
    Error::new(
        ErrorKind::Refused,
        format!(
            "the registration endpoint refused to register a client: HTTP {}{code}{description}",
            status.as_u16()
        ),
    )
}

/// An `error_description` as a reason quotes it: RFC 6749 §5.2 allows only printable ASCII
/// (minus `"` and `\\`); anything else (a line break a server slipped in) becomes a space.
fn description_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if (' '..='~').contains(&c) && c != '"' && c != '\\' {
                c
            } else {
                ' '
            }
        })
        .collect()
}

/// An OAuth error code as a reason may quote it: the RFC 6749 §5.2 characters only. Not cut:
/// the reason is cut as a whole once the entry's secrets are scrubbed from it.
pub(crate) fn oauth_code(code: &str) -> String {
    code.chars()
        .filter(|c| (' '..='~').contains(c) && *c != '"' && *c != '\\')
        .collect()
}

/// The port of a registered loopback redirect URI, to bind the listener on it again.
pub(crate) fn redirect_port(identity: &ClientIdentity) -> Option<u16> {
    let uri = Url::parse(identity.redirect_uri.as_deref()?).ok()?;
    uri.port()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::discovery::ServerMetadata;

    fn server(methods: Option<&[&str]>, cimd: bool) -> AuthorizationServer {
        AuthorizationServer {
            issuer: Some("https://a.example.com".into()),
            authorization_endpoint: Url::parse("https://a.example.com/authorize").unwrap(),
            token_endpoint: Url::parse("https://a.example.com/token").unwrap(),
            registration_endpoint: None,
            metadata: ServerMetadata {
                token_endpoint_auth_methods_supported: methods
                    .map(|m| m.iter().map(|s| s.to_string()).collect()),
                client_id_metadata_document_supported: cimd,
                ..ServerMetadata::default()
            },
            source: EndpointSource::ResourceMetadata,
            named_issuer: None,
        }
    }

    #[test]
    fn a_configured_credential_goes_only_to_a_trusted_token_endpoint() {
        let mcp = Url::parse("https://mcp.example.com/mcp").unwrap();
        let secret = OAuthConfig {
            client_id: Some("svc".into()),
            client_secret: Some(SecretString::from("very-secret-value")),
            ..OAuthConfig::default()
        };
        let named = |issuer: &str| OAuthConfig {
            authorization_server: Some(issuer.into()),
            ..OAuthConfig {
                client_id: Some("svc".into()),
                private_key: Some(SecretString::from("pem")),
                ..OAuthConfig::default()
            }
        };
        // `a.example.com` vouched for by its own metadata: unless the entry pins another.
        let other = server(None, false);
        assert!(credential_may_go(&secret, &mcp, &other).is_ok());
        assert!(credential_may_go(&named("https://a.example.com/"), &mcp, &other).is_ok());
        let refused = credential_may_go(&named("https://b.example.com"), &mcp, &other).unwrap_err();
        assert!(
            refused
                .message()
                .contains("oauth.privateKey is not sent there")
        );
        // No configured credential: nothing to keep.
        assert!(credential_may_go(&OAuthConfig::default(), &mcp, &other).is_ok());
        // On the MCP server's origin: its own issuer, or its own (2025-03-26) token endpoint.
        let own = AuthorizationServer {
            issuer: Some("https://mcp.example.com".into()),
            ..server(None, false)
        };
        assert!(credential_may_go(&secret, &mcp, &own).is_ok());
        let legacy = AuthorizationServer {
            issuer: Some("https://a.example.com".into()),
            token_endpoint: Url::parse("https://mcp.example.com/token").unwrap(),
            source: EndpointSource::LegacyMetadata,
            ..server(None, false)
        };
        assert!(credential_may_go(&secret, &mcp, &legacy).is_ok());
        // A 2025-03-26 server's metadata claiming another issuer vouches for nothing: the
        // token endpoint's origin decides.
        let claimed = AuthorizationServer {
            token_endpoint: Url::parse("https://evil.example.net/token").unwrap(),
            ..legacy
        };
        let refused = credential_may_go(&secret, &mcp, &claimed).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::Config);
        assert!(refused.message().starts_with(
            "the server's metadata names a token endpoint at https://evil.example.net, on \
             another origin than the server's url, so oauth.clientSecret is not sent there"
        ));
        assert!(credential_may_go(&named("https://a.example.com"), &mcp, &claimed).is_err());
    }

    #[test]
    fn a_guessed_registration_endpoint_saying_not_now_is_not_absent() {
        use reqwest::StatusCode;
        let cases = [
            (StatusCode::NOT_FOUND, true),
            (StatusCode::METHOD_NOT_ALLOWED, true),
            (StatusCode::UNAUTHORIZED, true),
            (StatusCode::TOO_MANY_REQUESTS, false),
            (StatusCode::REQUEST_TIMEOUT, false),
            (StatusCode::SERVICE_UNAVAILABLE, false),
        ];
        for (status, for_good) in cases {
            assert_eq!(refuses_for_good(status), for_good, "{status}");
        }
    }

    #[test]
    fn configured_client_then_metadata_document_then_registration() {
        let mut config = OAuthConfig {
            client_id: Some("pre".into()),
            client_secret: Some(SecretString::from("very-secret-value")),
            client_metadata_url: Some(Url::parse("https://app.example.com/c.json").unwrap()),
            ..OAuthConfig::default()
        };
        let s = server(Some(&["client_secret_post"]), true);
        let id = without_registration(&config, &s).unwrap();
        assert_eq!(
            (id.client_id.as_str(), id.auth_method, id.source),
            (
                "pre",
                AuthMethod::ClientSecretPost,
                ClientIdSource::Configured
            )
        );
        assert_eq!(
            format!("{id:?}"),
            "ClientIdentity { client_id: \"pre\", client_secret: Some(\"[redacted]\"), \
             auth_method: ClientSecretPost, source: Configured, redirect_uri: None, .. }"
        );
        let basic = without_registration(&config, &server(None, true)).unwrap();
        assert_eq!(basic.auth_method, AuthMethod::ClientSecretBasic);

        config.client_id = None;
        config.client_secret = None;
        let id = without_registration(&config, &s).unwrap();
        assert_eq!(
            (id.client_id.as_str(), id.auth_method, id.source),
            (
                "https://app.example.com/c.json",
                AuthMethod::None,
                ClientIdSource::MetadataDocument
            )
        );
        assert!(without_registration(&config, &server(None, false)).is_none());
        config.client_metadata_url = None;
        assert!(without_registration(&config, &s).is_none());
    }

    #[test]
    fn a_registration_refusal_names_its_code_and_description_never_another_body() {
        let refused = |body: &str| {
            registration_refused(reqwest::StatusCode::BAD_REQUEST, body.as_bytes())
                .message()
                .to_string()
        };
        assert_eq!(
            refused(
                r#"{"error":"invalid_client_metadata","error_description":"redirect_uris must be https\nsee docs"}"#
            ),
            "the registration endpoint refused to register a client: HTTP 400 \
             (invalid_client_metadata): redirect_uris must be https see docs"
        );
        assert_eq!(
            refused(r#"{"error":"invalid_redirect_uri"}"#),
            "the registration endpoint refused to register a client: HTTP 400 (invalid_redirect_uri)"
        );
        assert_eq!(
            refused("<html>secret-looking body</html>"),
            "the registration endpoint refused to register a client: HTTP 400"
        );
    }

    #[test]
    fn error_codes_are_quoted_bounded_and_printable() {
        assert_eq!(
            oauth_code("invalid_client_metadata"),
            "invalid_client_metadata"
        );
        assert_eq!(oauth_code("a\"b\\c\nd"), "abcd");
        assert_eq!(oauth_code(&"x".repeat(100)).len(), 100);
    }
}
