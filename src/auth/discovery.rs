//! From a `401` to the authorization server's endpoints (MCP 2025-11-25 "Authorization Server
//! Discovery"; RFC 9728; RFC 8414; OpenID Connect Discovery 1.0; MCP 2025-03-26 fallbacks).
//!
//! Owns the order of every lookup:
//! 1. the `WWW-Authenticate` challenge ([`Challenge`], parsed by [`super::challenge`]):
//!    `resource_metadata`, `scope`, `error`;
//! 2. the protected resource metadata (RFC 9728 §3): the challenge's URL, else the well-known
//!    URL with the server's path inserted, else the well-known URL at the root;
//! 3. its first `authorization_servers` entry's metadata: for an issuer with a path, RFC 8414
//!    with the path inserted, OpenID discovery with the path inserted, OpenID discovery with the
//!    path appended; for one without, RFC 8414 then OpenID discovery (MCP 2025-11-25);
//! 4. with no protected resource metadata (a 2025-03-26 server), the authorization server is the
//!    MCP server's origin: its RFC 8414 metadata, else `/authorize`, `/token` and `/register`
//!    there.
//!
//! Every URL here comes from a server and passes the [`super::policy::UrlPolicy`].
//!
//! Discovery also decides the resource indicator (RFC 8707) of every grant request: the
//! protected resource metadata's `resource`, else the server's url ([`ResourceIndicator`]). Its value
//! goes out only through [`ResourceIndicator::to_send`], which refuses one holding a secret of the entry.

use std::sync::Arc;

use reqwest::Url;
use serde::Deserialize;

use super::challenge::Challenge;
use super::net::Net;
use super::{Error, ErrorKind};
use crate::redact::HoldsSecret;

/// Protected resource metadata (RFC 9728 §2), the fields a client uses.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub(crate) struct ResourceMetadata {
    pub(crate) resource: Option<String>,
    #[serde(default)]
    pub(crate) authorization_servers: Vec<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
}

/// Authorization server metadata (RFC 8414 §2; OpenID Connect Discovery 1.0 §3), the fields a
/// client uses.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub(crate) struct ServerMetadata {
    pub(crate) issuer: Option<String>,
    pub(crate) authorization_endpoint: Option<String>,
    pub(crate) token_endpoint: Option<String>,
    pub(crate) registration_endpoint: Option<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
    pub(crate) code_challenge_methods_supported: Option<Vec<String>>,
    pub(crate) token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub(crate) grant_types_supported: Option<Vec<String>>,
    /// MCP 2025-11-25 "Client ID Metadata Documents".
    #[serde(default)]
    pub(crate) client_id_metadata_document_supported: bool,
    /// RFC 9207 §3.
    #[serde(default)]
    pub(crate) authorization_response_iss_parameter_supported: bool,
    /// RFC 9449 §5.1: the proof algorithms the server takes; absent when it issues no
    /// DPoP-bound tokens.
    pub(crate) dpop_signing_alg_values_supported: Option<Vec<String>>,
}

/// Where the authorization server's endpoints came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndpointSource {
    /// Protected resource metadata, then the authorization server's metadata.
    ResourceMetadata,
    /// No protected resource metadata: RFC 8414 metadata at the MCP server's origin
    /// (MCP 2025-03-26).
    LegacyMetadata,
    /// Protected resource metadata, but no authorization server metadata: the default
    /// endpoints at the authorization server's origin (MCP 2025-03-26).
    Defaults,
    /// No metadata at all, neither of the protected resource nor of an authorization server:
    /// the 2025-03-26 default endpoints at the MCP server's origin, guessed. Such a server may
    /// well offer no OAuth at all (it wants an API key).
    Guessed,
}

/// An authorization server, ready for a grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthorizationServer {
    /// The issuer the metadata names (for the RFC 9207 `iss` check), when it names one.
    pub(crate) issuer: Option<String>,
    pub(crate) authorization_endpoint: Url,
    pub(crate) token_endpoint: Url,
    pub(crate) registration_endpoint: Option<Url>,
    pub(crate) metadata: ServerMetadata,
    pub(crate) source: EndpointSource,
    /// For a server that publishes no metadata but that the protected resource metadata names
    /// (RFC 9728 §2 `authorization_servers`), that issuer identifier: the `iss` of its
    /// authorization response must be it (RFC 9207 §2.4), as [`Self::issuer`] otherwise.
    /// Not its [`Self::identifier`], which keeps naming the token endpoint for such a server.
    pub(crate) named_issuer: Option<String>,
}

impl AuthorizationServer {
    /// Whether the server takes PKCE with S256. Servers known only by the 2025-03-26 defaults
    /// advertise nothing; that revision required PKCE, so they are taken to.
    pub(crate) fn supports_s256(&self) -> bool {
        match &self.metadata.code_challenge_methods_supported {
            Some(methods) => methods.iter().any(|m| m == "S256"),
            None => matches!(
                self.source,
                EndpointSource::Defaults | EndpointSource::Guessed
            ),
        }
    }

    /// Whether the server takes DPoP proofs signed with the one algorithm this client signs
    /// with ([`super::dpop::ALGORITHM`], RFC 9449 §5.1): then its tokens are asked for bound to
    /// a key of this client's.
    pub(crate) fn supports_dpop(&self) -> bool {
        self.metadata
            .dpop_signing_alg_values_supported
            .as_ref()
            .is_some_and(|algs| algs.iter().any(|a| a == super::dpop::ALGORITHM))
    }

    /// What identifies this authorization server for the credentials it issues: its issuer
    /// (RFC 8414 §2), else (a server known only by the 2025-03-26 defaults) its token
    /// endpoint. A stored grant is sent to the server of the same identifier only.
    pub(crate) fn identifier(&self) -> String {
        self.issuer
            .clone()
            .unwrap_or_else(|| self.token_endpoint.to_string())
    }

    /// The token endpoint authentication methods the server supports; RFC 8414 §2 makes
    /// `client_secret_basic` the default.
    pub(crate) fn auth_methods(&self) -> Vec<String> {
        self.metadata
            .token_endpoint_auth_methods_supported
            .clone()
            .unwrap_or_else(|| vec!["client_secret_basic".to_string()])
    }
}

/// Where a resource indicator came from: what a user can change when it holds a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResourceSource {
    /// The server's url without its fragment, query and all: there is no protected resource
    /// metadata (a 2025-03-26 server), or it names no `resource`.
    ServerUrl,
    /// The protected resource metadata's `resource` (RFC 9728 §2), exactly as published.
    Published,
}

/// The resource indicator (RFC 8707 §2) that the authorization request, the code exchange, every
/// refresh and every client credentials grant of one server name as `resource`.
///
/// Invariant: its value goes out only through [`ResourceIndicator::to_send`], which checks it, when each
/// request is made, for every secret the entry's redactor knows then (configured, or learned
/// since), exactly as it is sent ([`crate::redact::Redactor::shown_checker`]); one holding a
/// secret is never sent. Its `Debug` shows where it came from, not the value.
#[derive(Clone)]
pub(crate) struct ResourceIndicator {
    value: String,
    source: ResourceSource,
    holds_secret: Arc<HoldsSecret>,
}

impl ResourceIndicator {
    pub(crate) fn new(
        value: String,
        source: ResourceSource,
        holds_secret: Arc<HoldsSecret>,
    ) -> ResourceIndicator {
        ResourceIndicator {
            value,
            source,
            holds_secret,
        }
    }

    /// The value for a request's `resource` parameter.
    ///
    /// # Errors
    /// When it holds a secret of the entry: [`ErrorKind::Config`] for the server's url (its query,
    /// most likely: the secret belongs in a header), [`ErrorKind::Refused`] for a published
    /// `resource`. The message names no secret and says what to change.
    pub(crate) fn to_send(&self) -> Result<&str, Error> {
        if !(self.holds_secret)(&self.value) {
            return Ok(&self.value);
        }
        Err(match self.source {
            ResourceSource::ServerUrl => Error::new(ErrorKind::Config, URL_HOLDS_SECRET),
            ResourceSource::Published => Error::new(ErrorKind::Refused, PUBLISHED_HOLDS_SECRET),
        })
    }
}

impl std::fmt::Debug for ResourceIndicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceIndicator")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Why a sign-in whose resource indicator is the server's url holding a secret is refused.
const URL_HOLDS_SECRET: &str = "the server's url holds a secret of this server entry and, with \
     no resource published in the server's protected resource metadata (RFC 9728), the url is \
     the resource indicator (RFC 8707) every authorization and token request names; it is not \
     sent, and signing in is refused: move the secret out of the url (a query parameter such as \
     ?key=${env:API_KEY}) into a header (\"headers\")";

/// Why a sign-in whose published resource holds a secret is refused.
const PUBLISHED_HOLDS_SECRET: &str = "the resource the server's protected resource metadata \
     publishes (RFC 9728) holds a secret of this server entry, and it is the resource indicator \
     (RFC 8707) every authorization and token request names; it is not sent, and signing in is \
     refused: if the server's url holds the secret (a query parameter such as \
     ?key=${env:API_KEY}), move it into a header (\"headers\")";

/// What discovery found for one MCP server.
#[derive(Debug, Clone)]
pub(crate) struct Discovery {
    /// The resource indicator (RFC 8707) for the authorization and token requests: the
    /// protected resource metadata's `resource` exactly as published (a URL parser would add a
    /// `/` to a pathless one, which the authorization server may not know), else the server's
    /// URL.
    pub(crate) resource: ResourceIndicator,
    /// The protected resource metadata's `scopes_supported`.
    pub(crate) resource_scopes: Option<Vec<String>>,
    pub(crate) server: AuthorizationServer,
}

/// Runs discovery for the MCP server at `server_url` after it answered with `challenge`;
/// `holds_secret` tells whether a text holds a secret of the entry, for the [`ResourceIndicator`].
///
/// # Errors
/// [`ErrorKind::Refused`] when a document is malformed, a URL breaks the policy, the resource
/// metadata names another resource or no authorization server, or an issuer does not match;
/// [`ErrorKind::Transport`] when a server cannot be reached.
pub(crate) async fn discover(
    net: &Net,
    server_url: &Url,
    challenge: &Challenge,
    holds_secret: Arc<HoldsSecret>,
) -> Result<Discovery, Error> {
    let mut canonical = server_url.clone();
    canonical.set_fragment(None);
    let mut candidates = Vec::new();
    if let Some(url) = &challenge.resource_metadata {
        let url = Url::parse(url).map_err(|_| {
            Error::new(
                ErrorKind::Refused,
                "the resource_metadata URL of the server's WWW-Authenticate header is not a valid URL",
            )
        })?;
        candidates.push(url);
    }
    for url in resource_metadata_urls(server_url) {
        if !candidates.contains(&url) {
            candidates.push(url);
        }
    }
    let mut found = None;
    for url in &candidates {
        if let Some(document) = net
            .get_json::<ResourceMetadata>(url, "the protected resource metadata")
            .await?
        {
            found = Some(document);
            break;
        }
    }
    let Some(document) = found else {
        let server = legacy_server(net, server_url).await?;
        return Ok(Discovery {
            resource: ResourceIndicator::new(
                canonical.to_string(),
                ResourceSource::ServerUrl,
                holds_secret,
            ),
            resource_scopes: None,
            server,
        });
    };
    let resource = match &document.resource {
        Some(text) => {
            let named = Url::parse(text).map_err(|_| {
                Error::new(
                    ErrorKind::Refused,
                    "the protected resource metadata names a resource that is not a valid URL",
                )
            })?;
            if !resource_covers(&named, &canonical) {
                return Err(Error::new(
                    ErrorKind::Refused,
                    "the protected resource metadata is for another resource than this server \
                     (RFC 9728 §3.3); signing in is refused",
                ));
            }
            ResourceIndicator::new(text.clone(), ResourceSource::Published, holds_secret)
        }
        None => ResourceIndicator::new(
            canonical.to_string(),
            ResourceSource::ServerUrl,
            holds_secret,
        ),
    };
    let Some(published) = document.authorization_servers.first() else {
        return Err(Error::new(
            ErrorKind::Refused,
            "the protected resource metadata lists no authorization_servers",
        ));
    };
    let issuer = Url::parse(published).map_err(|_| {
        Error::new(
            ErrorKind::Refused,
            "the protected resource metadata's authorization server is not a valid URL",
        )
    })?;
    net.policy()
        .check(&issuer, "the authorization server")
        .map_err(|e| Error::new(ErrorKind::Refused, e))?;
    let server = match find_server_metadata(net, &issuer).await? {
        Some(metadata) => {
            if metadata.issuer.is_none() {
                return Err(Error::new(
                    ErrorKind::Refused,
                    "the authorization server's metadata names no issuer (RFC 8414 §2 requires \
                     one); signing in is refused",
                ));
            }
            if !issuer_matches(metadata.issuer.as_deref(), published) {
                return Err(Error::new(
                    ErrorKind::Refused,
                    "the authorization server's metadata names another issuer (RFC 8414 §3.3); \
                     signing in is refused",
                ));
            }
            from_metadata(net, metadata, &issuer, EndpointSource::ResourceMetadata)?
        }
        None => AuthorizationServer {
            named_issuer: Some(published.clone()),
            ..defaults(net, &issuer)?
        },
    };
    Ok(Discovery {
        resource,
        resource_scopes: document.scopes_supported,
        server,
    })
}

/// The well-known protected resource metadata URLs of `server_url`: path-inserted (when it has
/// a path), then root (RFC 9728 §3.1).
pub(crate) fn resource_metadata_urls(server_url: &Url) -> Vec<Url> {
    well_known(server_url, "oauth-protected-resource")
}

/// The metadata URLs of the authorization server `issuer`, in the order MCP 2025-11-25 gives.
pub(crate) fn server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let origin = origin(issuer);
    if path.is_empty() {
        return ["oauth-authorization-server", "openid-configuration"]
            .iter()
            .filter_map(|name| Url::parse(&format!("{origin}/.well-known/{name}")).ok())
            .collect();
    }
    [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ]
    .iter()
    .filter_map(|u| Url::parse(u).ok())
    .collect()
}

fn well_known(url: &Url, name: &str) -> Vec<Url> {
    let path = url.path().trim_end_matches('/');
    let origin = origin(url);
    let mut out = Vec::new();
    if !path.is_empty() {
        out.extend(Url::parse(&format!("{origin}/.well-known/{name}{path}")).ok());
    }
    out.extend(Url::parse(&format!("{origin}/.well-known/{name}")).ok());
    out
}

/// `scheme://host[:port]`, without a trailing slash.
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// Whether the resource `named` by metadata covers the server's canonical URL: same origin, and
/// its path a prefix of the server's at a segment boundary.
fn resource_covers(named: &Url, canonical: &Url) -> bool {
    if named.origin() != canonical.origin() {
        return false;
    }
    let named_path = named.path().trim_end_matches('/');
    let path = canonical.path();
    path == named_path
        || path.trim_end_matches('/') == named_path
        || path.starts_with(&format!("{named_path}/"))
}

/// Whether the metadata's `issuer` (`named`) is identical to the issuer identifier the
/// metadata URL was built from, as the protected resource metadata published it (RFC 8414
/// §3.3): compared as text, so neither a trailing `/` nor a URL parser's normal form makes
/// another issuer pass.
fn issuer_matches(named: Option<&str>, published: &str) -> bool {
    named == Some(published)
}

async fn find_server_metadata(net: &Net, issuer: &Url) -> Result<Option<ServerMetadata>, Error> {
    for url in server_metadata_urls(issuer) {
        if let Some(metadata) = net
            .get_json::<ServerMetadata>(&url, "the authorization server metadata")
            .await?
        {
            return Ok(Some(metadata));
        }
    }
    Ok(None)
}

/// A 2025-03-26 server: the authorization server is the MCP server's origin.
async fn legacy_server(net: &Net, server_url: &Url) -> Result<AuthorizationServer, Error> {
    let base = Url::parse(&origin(server_url)).map_err(|_| {
        Error::new(
            ErrorKind::Refused,
            "the server URL has no origin to sign in at",
        )
    })?;
    let metadata_url = base
        .join("/.well-known/oauth-authorization-server")
        .map_err(|_| {
            Error::new(
                ErrorKind::Refused,
                "the server URL has no origin to sign in at",
            )
        })?;
    match net
        .get_json::<ServerMetadata>(&metadata_url, "the authorization server metadata")
        .await?
    {
        Some(metadata) => from_metadata(net, metadata, &base, EndpointSource::LegacyMetadata),
        None => defaults(net, &base).map(|server| AuthorizationServer {
            source: EndpointSource::Guessed,
            ..server
        }),
    }
}

fn endpoint(net: &Net, text: &str, what: &str) -> Result<Url, Error> {
    let url = Url::parse(text)
        .map_err(|_| Error::new(ErrorKind::Refused, format!("{what} is not a valid URL")))?;
    net.policy()
        .check(&url, what)
        .map_err(|e| Error::new(ErrorKind::Refused, e))?;
    Ok(url)
}

fn from_metadata(
    net: &Net,
    metadata: ServerMetadata,
    base: &Url,
    source: EndpointSource,
) -> Result<AuthorizationServer, Error> {
    let fallback = |path: &str| base.join(path).map(|u| u.to_string()).unwrap_or_default();
    let authorization = metadata
        .authorization_endpoint
        .clone()
        .unwrap_or_else(|| fallback("/authorize"));
    let token = metadata
        .token_endpoint
        .clone()
        .unwrap_or_else(|| fallback("/token"));
    let authorization_endpoint = endpoint(net, &authorization, "the authorization endpoint")?;
    let token_endpoint = endpoint(net, &token, "the token endpoint")?;
    let registration_endpoint = match &metadata.registration_endpoint {
        Some(url) => Some(endpoint(net, url, "the registration endpoint")?),
        None => None,
    };
    Ok(AuthorizationServer {
        issuer: metadata.issuer.clone(),
        authorization_endpoint,
        token_endpoint,
        registration_endpoint,
        metadata,
        source,
        named_issuer: None,
    })
}

/// The 2025-03-26 default endpoints at `base`'s origin.
fn defaults(net: &Net, base: &Url) -> Result<AuthorizationServer, Error> {
    let at = |path: &str, what: &str| {
        let url = Url::parse(&format!("{}{path}", origin(base)))
            .map_err(|_| Error::new(ErrorKind::Refused, format!("{what} is not a valid URL")))?;
        net.policy()
            .check(&url, what)
            .map_err(|e| Error::new(ErrorKind::Refused, e))?;
        Ok::<_, Error>(url)
    };
    Ok(AuthorizationServer {
        issuer: None,
        authorization_endpoint: at("/authorize", "the authorization endpoint")?,
        token_endpoint: at("/token", "the token endpoint")?,
        registration_endpoint: Some(at("/register", "the registration endpoint")?),
        metadata: ServerMetadata::default(),
        source: EndpointSource::Defaults,
        named_issuer: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    fn strings(urls: Vec<Url>) -> Vec<String> {
        urls.into_iter().map(String::from).collect()
    }

    #[test]
    fn well_known_urls_in_the_spec_order() {
        assert_eq!(
            strings(resource_metadata_urls(&url(
                "https://mcp.example.com/public/mcp?x=1"
            ))),
            [
                "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
                "https://mcp.example.com/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            strings(resource_metadata_urls(&url(
                "https://mcp.example.com:8443/"
            ))),
            ["https://mcp.example.com:8443/.well-known/oauth-protected-resource"]
        );
        assert_eq!(
            strings(server_metadata_urls(&url(
                "https://auth.example.com/tenant1"
            ))),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            strings(server_metadata_urls(&url("https://auth.example.com"))),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn a_resource_covers_its_own_paths_only() {
        let server = url("https://mcp.example.com/api/mcp");
        assert!(resource_covers(
            &url("https://mcp.example.com/api/mcp"),
            &server
        ));
        assert!(resource_covers(
            &url("https://mcp.example.com/api"),
            &server
        ));
        assert!(resource_covers(&url("https://mcp.example.com/"), &server));
        assert!(!resource_covers(
            &url("https://mcp.example.com/ap"),
            &server
        ));
        assert!(!resource_covers(
            &url("https://mcp.example.com/other"),
            &server
        ));
        assert!(!resource_covers(
            &url("https://evil.example.com/api/mcp"),
            &server
        ));
        assert!(issuer_matches(
            Some("https://a.example.com/t1"),
            "https://a.example.com/t1"
        ));
        assert!(!issuer_matches(
            Some("https://a.example.com/t1/"),
            "https://a.example.com/t1"
        ));
        assert!(!issuer_matches(
            Some("https://A.example.com/t1"),
            "https://a.example.com/t1"
        ));
        assert!(!issuer_matches(
            Some("https://b.example.com/t1"),
            "https://a.example.com/t1"
        ));
        assert!(!issuer_matches(None, "https://a.example.com/t1"));
    }

    #[test]
    fn s256_and_auth_method_defaults() {
        let mut server = AuthorizationServer {
            issuer: None,
            authorization_endpoint: url("https://a.example.com/authorize"),
            token_endpoint: url("https://a.example.com/token"),
            registration_endpoint: None,
            metadata: ServerMetadata::default(),
            source: EndpointSource::Defaults,
            named_issuer: None,
        };
        assert!(server.supports_s256());
        assert_eq!(server.auth_methods(), ["client_secret_basic"]);
        server.source = EndpointSource::ResourceMetadata;
        assert!(!server.supports_s256());
        server.metadata.code_challenge_methods_supported = Some(vec!["plain".into()]);
        assert!(!server.supports_s256());
        server.metadata.code_challenge_methods_supported =
            Some(vec!["plain".into(), "S256".into()]);
        assert!(server.supports_s256());
    }

    #[test]
    fn a_resource_holding_a_secret_is_never_given_out() {
        use crate::redact::{Learned, Redactor};
        use secrecy::SecretString;
        let mut redactor = Redactor::default();
        redactor.add_secret("pass word-1234");
        let holds: Arc<HoldsSecret> = Arc::new(redactor.shown_checker(Vec::new()));
        let resource =
            |value: &str, source| ResourceIndicator::new(value.into(), source, holds.clone());
        let kind = |r: ResourceIndicator| r.to_send().map(str::to_string).map_err(|e| e.kind());
        // Percent-encoded, as a url carries it: refused all the same; by where it came from.
        let configured = "https://mcp.example.com/mcp?key=pass%20word-1234";
        assert_eq!(
            kind(resource(configured, ResourceSource::ServerUrl)),
            Err(ErrorKind::Config)
        );
        assert_eq!(
            kind(resource(configured, ResourceSource::Published)),
            Err(ErrorKind::Refused)
        );
        // A query holding no secret is sent as it is.
        let learned = "https://mcp.example.com/mcp?tenant=t-4f9a8b7c6d5e";
        let later = resource(learned, ResourceSource::ServerUrl);
        assert_eq!(kind(later.clone()), Ok(learned.to_string()));
        // Checked at each request: a secret learned since refuses it.
        redactor.learner()(&SecretString::from("t-4f9a8b7c6d5e"), Learned::Token);
        assert_eq!(kind(later), Err(ErrorKind::Config));
    }
}
