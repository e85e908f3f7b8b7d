//! A local authorization server and protected resource on 127.0.0.1, for the sign-in tests: the
//! integration tests through the Host contract and the crate's unit tests (as
//! `crate::auth::testing`).
//!
//! One axum server plays both roles on one port: the MCP endpoint `/mcp` (answering `401` with a
//! challenge, or, for a valid token, a small MCP server with one tool `whoami`, with sessions and
//! a standalone stream when asked), the protected resource metadata, the authorization server
//! metadata at a chosen well-known place, `/authorize` (which redirects at once, like a browser
//! session that is already signed in), `/token` and `/register`. It checks what a real server
//! checks (PKCE S256, the redirect URI, `resource`, client authentication, rotated refresh
//! tokens, and with [`Options::dpop`] DPoP proofs and bound tokens, RFC 9449) and logs every
//! request so tests can assert the trail.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use reqwest::Url;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Where the protected resource metadata is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrmAt {
    /// Only at a custom path named in the challenge's `resource_metadata`.
    Header,
    /// At `/.well-known/oauth-protected-resource/mcp`.
    PathInserted,
    /// At `/.well-known/oauth-protected-resource`.
    Root,
    /// Nowhere (a 2025-03-26 server).
    Nowhere,
}

/// Where the authorization server metadata is served; the issuer is `<base>/tenant1` for the
/// path forms and `<base>` for the root forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataAt {
    /// `/.well-known/oauth-authorization-server` (issuer `<base>`).
    OAuthRoot,
    /// `/.well-known/openid-configuration` (issuer `<base>`).
    OpenIdRoot,
    /// `/.well-known/oauth-authorization-server/tenant1`.
    OAuthInserted,
    /// `/.well-known/openid-configuration/tenant1`.
    OpenIdInserted,
    /// `/tenant1/.well-known/openid-configuration`.
    OpenIdAppended,
    /// Nowhere: the 2025-03-26 default endpoints `/authorize`, `/token`, `/register`.
    Nowhere,
}

/// DPoP at the test server (RFC 9449): the authorization server metadata lists `ES256`, every
/// `DPoP` proof is verified (signature, `typ`, `jwk` without private parts, `htm`, `htu`, `iat`,
/// a `jti` never seen before, `ath` at the MCP endpoint, the nonce when asked for), a proved
/// token request's refresh token is bound to the proof's key, and a bound access token is only
/// taken with `Authorization: DPoP` and a proof of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dpop {
    /// A proved token request gets a `DPoP` access token (else a `Bearer` one; its refresh token
    /// is bound all the same, as for a public client).
    pub bound_access: bool,
    /// Both endpoints want a nonce of their own in every proof and refuse one without it with
    /// `use_dpop_nonce` and a `DPoP-Nonce` header (RFC 9449 §8, §9).
    pub nonce: bool,
}

/// The nonce the token endpoint asks for ([`Dpop::nonce`]).
pub const TOKEN_NONCE: &str = "token-endpoint-nonce-1";
/// The nonce the MCP endpoint asks for ([`Dpop::nonce`]).
pub const MCP_NONCE: &str = "mcp-endpoint-nonce-1";

/// How the test server behaves.
#[derive(Debug, Clone)]
pub struct Options {
    pub prm: PrmAt,
    pub metadata: MetadataAt,
    /// `expires_in` of every access token, in seconds.
    pub lifetime: u64,
    pub s256: bool,
    pub auth_methods: Vec<&'static str>,
    pub cimd: bool,
    /// Send `iss` with the authorization response (and advertise it).
    pub iss: bool,
    /// The `scope` of the `401` challenge.
    pub challenge_scope: Option<&'static str>,
    pub scopes_supported: Option<Vec<&'static str>>,
    /// How long a refresh takes (to make concurrent refreshes overlap).
    pub refresh_delay: Duration,
    /// A pre-registered client: id and secret.
    pub client: Option<(&'static str, &'static str)>,
    /// Send this `iss` with the authorization response instead of the issuer.
    pub wrong_iss: Option<&'static str>,
    /// The MCP endpoint quotes the `Authorization` header it received in its tool description,
    /// its tool results and a JSON-RPC error of every other method (to test scrubbing).
    pub echo: bool,
    /// The token endpoint answers every request with this status and a plain-text body.
    pub token_status: Option<StatusCode>,
    /// `initialize` gives the session `s-1` (`Mcp-Session-Id`), and `DELETE /mcp` ends it.
    pub sessions: bool,
    /// `initialize` declares `tools.listChanged`, and `GET /mcp` answers an event stream that
    /// ends at once (so the client opens it again after its backoff).
    pub list_changed: bool,
    /// `tools/call` needs this scope: a valid token without it gets `403` with an
    /// `insufficient_scope` challenge naming it.
    pub call_scope: Option<&'static str>,
    /// `GET /mcp` (the standalone stream) answers every token `401` with an `invalid_token`
    /// challenge, while POSTs with a valid token go through.
    pub get_refused: bool,
    /// The authorization server never grants this scope, even when asked for it (a user
    /// without the right, or a consent screen that unticks it).
    pub withheld_scope: Option<&'static str>,
    /// A refresh is refused (`invalid_request`) with a description quoting every access token
    /// issued so far and the last `X-Api-Key` the MCP endpoint received (to test scrubbing).
    pub refresh_echo: bool,
    /// The token endpoint refuses every code exchange, quoting the `X-Api-Key` the MCP endpoint
    /// last received in its `error_description`.
    pub code_echo: bool,
    /// With [`Options::get_refused`]: the `WWW-Authenticate` value of the `GET` refusal
    /// instead of the Bearer challenge.
    pub get_challenge: Option<&'static str>,
    /// The token endpoint refuses every code exchange with `invalid_client`, quoting the
    /// `Authorization` header it received (a `client_secret_basic` credential) in its
    /// `error_description`.
    pub basic_echo: bool,
    /// A second tool (listed once signed in) whose `tools/call` needs its own scope instead of
    /// [`Options::call_scope`]: the tool's name and the scope.
    pub tool_scope: Option<(&'static str, &'static str)>,
    /// With [`Options::code_echo`]: the description is this many `a`s and then the key alone,
    /// so a cut of the description falls inside the key.
    pub code_echo_pad: usize,
    /// With [`Options::echo`]: the echo also quotes the last `client_assertion` the token
    /// endpoint received and the secret of the last client registered.
    pub echo_credentials: bool,
    /// Like Entra ID: a refresh that names no `scope` gives a token without the grant's scopes,
    /// which the MCP endpoint refuses with `401 invalid_token`.
    pub refresh_needs_scope: bool,
    /// The MCP endpoint refuses every token a refresh gave with `401 invalid_token`.
    pub refuse_refreshed: bool,
    /// The `token_type` of every token response (but those [`Dpop::bound_access`] makes
    /// `DPoP`).
    pub token_type: &'static str,
    /// DPoP proofs and bound tokens; `None`: the server knows nothing of DPoP.
    pub dpop: Option<Dpop>,
    /// The token endpoint refuses a code exchange or a client credentials grant with
    /// `invalid_dpop_proof`, quoting the proof it got.
    pub proof_echo: bool,
    /// The nonce the MCP endpoint asks for instead of [`MCP_NONCE`].
    pub mcp_nonce: Option<&'static str>,
    /// A second challenge appended to the MCP endpoint's `invalid_token` `401` (a server that
    /// speaks both schemes and asks every refused request for a DPoP nonce).
    pub extra_challenge: Option<&'static str>,
    /// The protected resource metadata's `resource` is the MCP endpoint with
    /// `?tenant=<the last X-Api-Key it received>`: a server that copies a secret it saw into its
    /// metadata.
    pub resource_echoes_key: bool,
    /// Every token response writes `expires_in` as a string (Entra v1, NetSuite, SAP): this
    /// text instead of the number.
    pub expires_in_text: Option<&'static str>,
    /// The token endpoint answers every code exchange HTTP 200 with this OAuth error code and
    /// description (GitHub's `bad_verification_code`).
    pub token_ok_error: Option<(&'static str, &'static str)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            prm: PrmAt::PathInserted,
            metadata: MetadataAt::OAuthRoot,
            lifetime: 3600,
            s256: true,
            auth_methods: vec!["none", "client_secret_basic", "client_secret_post"],
            cimd: false,
            iss: true,
            challenge_scope: None,
            scopes_supported: Some(vec!["mcp:read", "mcp:write"]),
            refresh_delay: Duration::ZERO,
            client: None,
            wrong_iss: None,
            echo: false,
            token_status: None,
            sessions: false,
            list_changed: false,
            call_scope: None,
            get_refused: false,
            withheld_scope: None,
            refresh_echo: false,
            code_echo: false,
            get_challenge: None,
            basic_echo: false,
            tool_scope: None,
            code_echo_pad: 0,
            echo_credentials: false,
            refresh_needs_scope: false,
            refuse_refreshed: false,
            token_type: "Bearer",
            dpop: None,
            proof_echo: false,
            mcp_nonce: None,
            extra_challenge: None,
            resource_echoes_key: false,
            expires_in_text: None,
            token_ok_error: None,
        }
    }
}

impl Options {
    /// The default options with DPoP ([`Dpop`]).
    pub fn with_dpop(bound_access: bool, nonce: bool) -> Options {
        Options {
            dpop: Some(Dpop {
                bound_access,
                nonce,
            }),
            ..Options::default()
        }
    }
}

/// A PKCS #8 PEM P-256 key made for this run (an `oauth.privateKey`).
pub fn private_key_pem() -> String {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
    )
}

/// What the server saw and issued.
#[derive(Debug, Default)]
pub struct Log {
    /// `METHOD /path` of every request, in order.
    pub requests: Vec<String>,
    /// `METHOD TOKEN` of every MCP request (`no token`, or the token and ` (refused)`).
    pub mcp: Vec<String>,
    pub registrations: u32,
    /// The query of every authorization request.
    pub authorizations: Vec<HashMap<String, String>>,
    /// The form of every token request, plus `client_id`/`auth` as the server authenticated it.
    pub token_requests: Vec<HashMap<String, String>>,
    /// Registered clients: id → (secret, method, redirect URI).
    clients: HashMap<String, (Option<String>, String, String)>,
    /// Codes: code → (challenge, redirect URI, client id, scope).
    codes: HashMap<String, (String, String, String, String)>,
    /// Valid access tokens → expiry (Unix seconds).
    access: HashMap<String, u64>,
    /// Valid refresh tokens → scope.
    refresh: HashMap<String, String>,
    /// Access tokens → the scope granted.
    granted: HashMap<String, String>,
    /// Replaces [`Options::refresh_delay`] once set ([`TestServer::delay_refreshes`]).
    refresh_delay_now: Option<Duration>,
    /// The last `X-Api-Key` header the MCP endpoint received.
    api_key: Option<String>,
    /// The last `client_assertion` the token endpoint received.
    pub assertion: Option<String>,
    /// The secret of the last client registered.
    pub client_secret: Option<String>,
    /// Every DPoP proof received, as `where METHOD verdict` (`token`/`mcp`; `ok`, or why it
    /// was refused), in order.
    pub proofs: Vec<String>,
    /// Every proof received, whole.
    pub proofs_seen: Vec<String>,
    /// Every `jti` of an accepted proof.
    jtis: std::collections::HashSet<String>,
    /// Tokens bound to a key (RFC 9449 §6): access or refresh token → the key's `x.y`.
    bound: HashMap<String, String>,
    /// Access tokens the MCP endpoint refuses although they are valid (see
    /// [`Options::refresh_needs_scope`], [`Options::refuse_refreshed`]).
    refused: std::collections::HashSet<String>,
    next: u64,
}

/// A running test server.
pub struct TestServer {
    pub base: Url,
    pub log: Arc<Mutex<Log>>,
    options: Arc<Options>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Shared {
    base: Url,
    options: Arc<Options>,
    log: Arc<Mutex<Log>>,
}

impl TestServer {
    /// Starts a server with `options` on 127.0.0.1.
    pub async fn start(options: Options) -> TestServer {
        // A port no other listener of these tests had: the sign-in store is keyed by a server's
        // URL and shared by the process, so a reused port would find the grant and registration
        // of an earlier server (which this one refuses as `invalid_client`).
        let listener = super::unused_loopback().await;
        let base = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let options = Arc::new(options);
        let log = Arc::new(Mutex::new(Log::default()));
        if let Some((id, secret)) = options.client {
            log.lock().unwrap().clients.insert(
                id.to_string(),
                (
                    Some(secret.to_string()),
                    "client_secret_basic".into(),
                    String::new(),
                ),
            );
        }
        let shared = Shared {
            base: base.clone(),
            options: options.clone(),
            log: log.clone(),
        };
        let app = axum::Router::new().fallback(handle).with_state(shared);
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        TestServer {
            base,
            log,
            options,
            task,
        }
    }

    /// The MCP endpoint.
    pub fn mcp_url(&self) -> Url {
        self.base.join("/mcp").unwrap()
    }

    /// The `WWW-Authenticate` value of the endpoint's `401`.
    pub fn challenge(&self) -> String {
        challenge(&self.base, &self.options, None)
    }

    /// The request trail.
    pub fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().requests.clone()
    }

    /// Makes every issued access token expired, as if its lifetime passed.
    pub fn expire_access_tokens(&self) {
        for expiry in self.log.lock().unwrap().access.values_mut() {
            *expiry = 0;
        }
    }

    /// Forgets every refresh token, as if the user revoked the grant.
    pub fn revoke_refresh_tokens(&self) {
        self.log.lock().unwrap().refresh.clear();
    }

    /// From now on, every refresh takes `delay` (a token endpoint that hangs).
    pub fn delay_refreshes(&self, delay: Duration) {
        self.log.lock().unwrap().refresh_delay_now = Some(delay);
    }

    /// Whether `token` is a valid access token now.
    pub fn accepts(&self, token: &str) -> bool {
        let log = self.log.lock().unwrap();
        log.access
            .get(token)
            .is_some_and(|expiry| *expiry > now_secs())
    }
}

fn challenge(base: &Url, options: &Options, error: Option<&str>) -> String {
    let mut parts = Vec::new();
    if let Some(error) = error {
        parts.push(format!("error=\"{error}\""));
    }
    if let Some(scope) = options.challenge_scope {
        parts.push(format!("scope=\"{scope}\""));
    }
    if options.prm == PrmAt::Header {
        parts.push(format!(
            "resource_metadata=\"{}\"",
            base.join("/custom/metadata.json").unwrap()
        ));
    }
    if parts.is_empty() {
        "Bearer".to_string()
    } else {
        format!("Bearer {}", parts.join(", "))
    }
}

fn issuer(base: &Url, options: &Options) -> String {
    let origin = base.as_str().trim_end_matches('/').to_string();
    match options.metadata {
        MetadataAt::OAuthRoot | MetadataAt::OpenIdRoot | MetadataAt::Nowhere => origin,
        _ => format!("{origin}/tenant1"),
    }
}

fn json_response(status: StatusCode, value: Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn oauth_error(status: StatusCode, code: &str) -> Response {
    json_response(
        status,
        json!({"error": code, "error_description": format!("test server: {code}")}),
    )
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let query: HashMap<String, String> =
        url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let options = &shared.options;
    let base = &shared.base;
    let origin = base.as_str().trim_end_matches('/').to_string();
    shared
        .log
        .lock()
        .unwrap()
        .requests
        .push(format!("{method} {path}"));

    let prm_path = match options.prm {
        PrmAt::Header => Some("/custom/metadata.json"),
        PrmAt::PathInserted => Some("/.well-known/oauth-protected-resource/mcp"),
        PrmAt::Root => Some("/.well-known/oauth-protected-resource"),
        PrmAt::Nowhere => None,
    };
    let metadata_path = match options.metadata {
        MetadataAt::OAuthRoot => Some("/.well-known/oauth-authorization-server"),
        MetadataAt::OpenIdRoot => Some("/.well-known/openid-configuration"),
        MetadataAt::OAuthInserted => Some("/.well-known/oauth-authorization-server/tenant1"),
        MetadataAt::OpenIdInserted => Some("/.well-known/openid-configuration/tenant1"),
        MetadataAt::OpenIdAppended => Some("/tenant1/.well-known/openid-configuration"),
        MetadataAt::Nowhere => None,
    };
    let issuer = issuer(base, options);
    let prefix = if issuer.ends_with("/tenant1") {
        "/tenant1"
    } else {
        ""
    };

    if method == Method::GET && Some(path.as_str()) == prm_path {
        let resource = match &shared.log.lock().unwrap().api_key {
            Some(key) if options.resource_echoes_key => format!("{origin}/mcp?tenant={key}"),
            _ => format!("{origin}/mcp"),
        };
        let mut prm = json!({
            "resource": resource,
            "authorization_servers": [issuer],
        });
        if let Some(scopes) = &options.scopes_supported {
            prm["scopes_supported"] = json!(scopes);
        }
        return json_response(StatusCode::OK, prm);
    }
    if method == Method::GET && Some(path.as_str()) == metadata_path {
        let mut metadata = json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{origin}{prefix}/authorize"),
            "token_endpoint": format!("{origin}{prefix}/token"),
            "registration_endpoint": format!("{origin}{prefix}/register"),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "token_endpoint_auth_methods_supported": options.auth_methods,
            "client_id_metadata_document_supported": options.cimd,
            "authorization_response_iss_parameter_supported": options.iss,
        });
        if options.s256 {
            metadata["code_challenge_methods_supported"] = json!(["S256"]);
        }
        if options.dpop.is_some() {
            metadata["dpop_signing_alg_values_supported"] = json!(["ES256"]);
        }
        return json_response(StatusCode::OK, metadata);
    }
    let endpoint = path.strip_prefix(prefix).unwrap_or(&path);
    match (method.clone(), endpoint) {
        (Method::POST | Method::GET | Method::DELETE, "/mcp") => {
            mcp(&shared, &method, &headers, &body)
        }
        (Method::GET, "/authorize") => authorize(&shared, query, &issuer),
        (Method::POST, "/register") => register(&shared, &body),
        (Method::POST, "/token") => token(&shared, &path, &headers, &body).await,
        (Method::GET, "/moved") => (
            StatusCode::FOUND,
            [("location", format!("{origin}/.well-known/x"))],
        )
            .into_response(),
        (Method::GET, "/huge") => {
            json_response(StatusCode::OK, json!({"pad": "x".repeat(256 * 1024)}))
        }
        _ => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

/// The MCP endpoint: a `POST` is logged by its JSON-RPC method, a `GET` or `DELETE` by its verb.
fn mcp(shared: &Shared, verb: &Method, headers: &HeaderMap, body: &[u8]) -> Response {
    let (scheme, token) = match headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
    {
        Some((scheme @ ("Bearer" | "DPoP"), token)) => (scheme, Some(token)),
        _ => ("", None),
    };
    let proof = headers.get("dpop").and_then(|v| v.to_str().ok());
    if let Some(key) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        shared.log.lock().unwrap().api_key = Some(key.to_string());
    }
    // The client opens the standalone stream on every session; a server offering none (no
    // `list_changed`, nothing refused) answers 405 and does not log it, so the trails of the
    // sign-in tests stay about sign-in.
    if *verb == Method::GET && !shared.options.list_changed && !shared.options.get_refused {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let message: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    // A legacy (2025-era) server: the era probe gets a JSON-RPC error of its own, unlogged, so
    // the trails of the sign-in tests stay about sign-in.
    if *verb == Method::POST && message["method"] == "server/discover" {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: Server not initialized"}}),
        );
    }
    let method = match *verb {
        Method::POST => message["method"].as_str().unwrap_or("").to_string(),
        _ => verb.to_string(),
    };
    // A bound token only with `DPoP` and a proof of its key; an unbound one only as `Bearer`.
    let proved = token.map(|t| {
        let mut log = shared.log.lock().unwrap();
        let bound = log.bound.get(t).cloned();
        let Some(proof) = proof else {
            return if bound.is_none() && scheme == "Bearer" {
                Ok(())
            } else {
                Err("no proof")
            };
        };
        log.proofs_seen.push(proof.to_string());
        let htu = format!("{}/mcp", shared.base.as_str().trim_end_matches('/'));
        let nonce = shared
            .options
            .dpop
            .filter(|d| d.nonce)
            .map(|_| shared.options.mcp_nonce.unwrap_or(MCP_NONCE));
        let verdict = match (shared.options.dpop, bound, scheme) {
            (Some(_), Some(key), "DPoP") => {
                check_proof(&mut log, proof, verb, &htu, Some(t), nonce)
                    .and_then(|k| if k == key { Ok(()) } else { Err("another key") })
            }
            _ => Err("a proof for a token not bound"),
        };
        log.proofs
            .push(format!("mcp {verb} {}", verdict.err().unwrap_or("ok")));
        verdict
    });
    if let Some(Err("use_dpop_nonce")) = proved {
        return (
            StatusCode::UNAUTHORIZED,
            [
                (
                    "www-authenticate",
                    "DPoP error=\"use_dpop_nonce\", algs=\"ES256\"",
                ),
                ("dpop-nonce", shared.options.mcp_nonce.unwrap_or(MCP_NONCE)),
            ],
        )
            .into_response();
    }
    let valid = proved == Some(Ok(()))
        && token.is_some_and(|t| {
            shared
                .log
                .lock()
                .unwrap()
                .access
                .get(t)
                .is_some_and(|e| *e > now_secs())
                && !shared.log.lock().unwrap().refused.contains(t)
        });
    shared.log.lock().unwrap().mcp.push(format!(
        "{method} {}",
        match (token, valid) {
            (None, _) => "no token".to_string(),
            (Some(t), true) => t.to_string(),
            (Some(t), false) => format!("{t} (refused)"),
        }
    ));
    let refused_get = shared.options.get_refused && *verb == Method::GET;
    if refused_get && valid {
        shared
            .log
            .lock()
            .unwrap()
            .mcp
            .last_mut()
            .unwrap()
            .push_str(" (GET refused)");
    }
    if let (true, true, Some(other)) = (valid, refused_get, shared.options.get_challenge) {
        return (StatusCode::UNAUTHORIZED, [("www-authenticate", other)]).into_response();
    }
    if !valid || refused_get {
        let error = token.map(|_| "invalid_token");
        let mut value = challenge(&shared.base, &shared.options, error);
        if let (Some(extra), Some(_)) = (shared.options.extra_challenge, token) {
            value = format!("{value}, {extra}");
        }
        return (StatusCode::UNAUTHORIZED, [("www-authenticate", value)]).into_response();
    }
    let needed = match shared.options.tool_scope {
        Some((tool, scope)) if message["params"]["name"] == tool => Some(scope),
        _ => shared.options.call_scope,
    };
    if let (Some(needed), "tools/call") = (needed, method.as_str()) {
        let granted = token
            .and_then(|t| shared.log.lock().unwrap().granted.get(t).cloned())
            .unwrap_or_default();
        if !granted.split(' ').any(|s| s == needed) {
            let challenge = format!(
                "Bearer error=\"insufficient_scope\", scope=\"{needed}\", resource_metadata=\"{}\"",
                shared
                    .base
                    .join("/.well-known/oauth-protected-resource/mcp")
                    .unwrap()
            );
            return (StatusCode::FORBIDDEN, [("www-authenticate", challenge)]).into_response();
        }
    }
    match method.as_str() {
        "GET" if shared.options.list_changed => {
            return (
                StatusCode::OK,
                [("content-type", "text/event-stream")],
                ": no events\n\n",
            )
                .into_response();
        }
        "GET" => return StatusCode::METHOD_NOT_ALLOWED.into_response(),
        "DELETE" => return StatusCode::OK.into_response(),
        _ => {}
    }
    let id = message["id"].clone();
    if shared.options.echo {
        let mut sent = format!("you sent {}", token.unwrap_or(""));
        if let Some(proof) = proof {
            sent = format!("{sent} with proof {proof}");
        }
        if shared.options.echo_credentials {
            let log = shared.log.lock().unwrap();
            for credential in [&log.assertion, &log.client_secret].into_iter().flatten() {
                sent = format!("{sent} and {credential}");
            }
        }
        let result = match method.as_str() {
            "initialize" => json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": sent, "version": "1"}
            }),
            "tools/list" => json!({"tools": [
                {"name": "whoami", "description": sent, "inputSchema": {"type": "object"}},
                {"name": "fails", "inputSchema": {"type": "object"}},
            ]}),
            "tools/call" if message["params"]["name"] == "whoami" => {
                json!({"content": [{"type": "text", "text": sent}]})
            }
            "tools/call" => {
                return json_response(
                    StatusCode::OK,
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": sent}}),
                );
            }
            _ => return StatusCode::ACCEPTED.into_response(),
        };
        return json_response(
            StatusCode::OK,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
    }
    let result = match method.as_str() {
        "initialize" => {
            let tools = json!({"listChanged": shared.options.list_changed});
            let result = json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": tools},
                "serverInfo": {"name": "signed-in", "version": "1"}
            });
            let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
            let mut response =
                (StatusCode::OK, [("content-type", "application/json")], body).into_response();
            if shared.options.sessions {
                response
                    .headers_mut()
                    .insert("mcp-session-id", "s-1".parse().unwrap());
            }
            return response;
        }
        "tools/list" => {
            let mut tools = vec![json!({"name": "whoami", "inputSchema": {"type": "object"}})];
            if let Some((tool, _)) = shared.options.tool_scope {
                tools.push(json!({"name": tool, "inputSchema": {"type": "object"}}));
            }
            json!({ "tools": tools })
        }
        "tools/call" => json!({"content": [{"type": "text", "text": "signed in"}]}),
        _ => return StatusCode::ACCEPTED.into_response(),
    };
    json_response(
        StatusCode::OK,
        json!({"jsonrpc": "2.0", "id": id, "result": result}),
    )
}

/// Seconds since the Unix epoch.
fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn authorize(shared: &Shared, query: HashMap<String, String>, issuer: &str) -> Response {
    let mut log = shared.log.lock().unwrap();
    log.authorizations.push(query.clone());
    let get = |k: &str| query.get(k).cloned().unwrap_or_default();
    if get("response_type") != "code" || get("code_challenge_method") != "S256" {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_request");
    }
    let client_id = get("client_id");
    let redirect_uri = get("redirect_uri");
    let known = match log.clients.get(&client_id) {
        Some((_, _, registered)) => registered.is_empty() || *registered == redirect_uri,
        None => client_id.starts_with("https://"),
    };
    if !known {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_client");
    }
    log.next += 1;
    let code = format!("code-{:06}", log.next);
    log.codes.insert(
        code.clone(),
        (
            get("code_challenge"),
            redirect_uri.clone(),
            client_id,
            get("scope"),
        ),
    );
    let mut location = Url::parse(&redirect_uri).unwrap();
    location
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &get("state"));
    if let Some(wrong) = shared.options.wrong_iss {
        location.query_pairs_mut().append_pair("iss", wrong);
    } else if shared.options.iss {
        location.query_pairs_mut().append_pair("iss", issuer);
    }
    (StatusCode::FOUND, [("location", location.to_string())]).into_response()
}

fn register(shared: &Shared, body: &[u8]) -> Response {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let method = request["token_endpoint_auth_method"]
        .as_str()
        .unwrap_or("client_secret_basic")
        .to_string();
    let redirect = request["redirect_uris"][0]
        .as_str()
        .unwrap_or("")
        .to_string();
    let mut log = shared.log.lock().unwrap();
    log.registrations += 1;
    let id = format!("client-{}", log.registrations);
    let secret = (method != "none").then(|| format!("client-secret-{:06}", log.registrations));
    log.clients
        .insert(id.clone(), (secret.clone(), method.clone(), redirect));
    log.client_secret = secret.clone();
    let mut answer = json!({"client_id": id, "token_endpoint_auth_method": method});
    if let Some(secret) = secret {
        answer["client_secret"] = json!(secret);
    }
    json_response(StatusCode::CREATED, answer)
}

async fn token(shared: &Shared, path: &str, headers: &HeaderMap, body: &[u8]) -> Response {
    if let Some(status) = shared.options.token_status {
        return (status, "no token here").into_response();
    }
    if let Some((code, description)) = shared.options.token_ok_error {
        return json_response(
            StatusCode::OK,
            json!({"error": code, "error_description": description}),
        );
    }
    let mut form: HashMap<String, String> =
        url::form_urlencoded::parse(body).into_owned().collect();
    // Client authentication.
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok());
    let (client_id, secret, auth) = match basic {
        Some(pair) => {
            let (id, secret) = pair.split_once(':').unwrap_or((&pair, ""));
            let decode = |s: &str| {
                url::form_urlencoded::parse(format!("x={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            (decode(id), Some(decode(secret)), "client_secret_basic")
        }
        None => {
            let id = form.get("client_id").cloned().unwrap_or_default();
            match form.get("client_secret") {
                Some(s) => (id, Some(s.clone()), "client_secret_post"),
                None if form.contains_key("client_assertion") => (id, None, "private_key_jwt"),
                None => (id, None, "none"),
            }
        }
    };
    form.insert("auth".into(), auth.into());
    form.insert("authenticated_client".into(), client_id.clone());
    if form.get("grant_type").map(String::as_str) == Some("refresh_token") {
        let delay = shared.log.lock().unwrap().refresh_delay_now;
        tokio::time::sleep(delay.unwrap_or(shared.options.refresh_delay)).await;
    }
    let mut log = shared.log.lock().unwrap();
    log.token_requests.push(form.clone());
    if let Some(assertion) = form.get("client_assertion") {
        log.assertion = Some(assertion.clone());
    }
    if shared.options.basic_echo
        && form.get("grant_type").map(String::as_str) == Some("authorization_code")
    {
        let sent = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        return json_response(
            StatusCode::UNAUTHORIZED,
            json!({"error": "invalid_client",
                "error_description": format!("client authentication failed: {sent}")}),
        );
    }
    if shared.options.proof_echo
        && matches!(
            form.get("grant_type").map(String::as_str),
            Some("authorization_code" | "client_credentials")
        )
    {
        let proof = headers
            .get("dpop")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        log.proofs_seen.push(proof.clone());
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": "invalid_dpop_proof",
                "error_description": format!("proof {proof} is not accepted")}),
        );
    }
    if shared.options.code_echo
        && form.get("grant_type").map(String::as_str) == Some("authorization_code")
    {
        let key = log.api_key.clone().unwrap_or_default();
        let description = match shared.options.code_echo_pad {
            0 => format!("code refused; your key: {key}"),
            pad => format!("{}{key}", "a".repeat(pad)),
        };
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": "invalid_request", "error_description": description}),
        );
    }
    if shared.options.refresh_echo
        && form.get("grant_type").map(String::as_str) == Some("refresh_token")
    {
        let mut issued: Vec<&String> = log.access.keys().collect();
        issued.sort();
        let mut quoted = issued
            .iter()
            .map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        if let Some(key) = &log.api_key {
            quoted = format!("{quoted}; your key: {key}");
        }
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": "invalid_request",
                "error_description": format!("refresh refused; your access tokens: {quoted}")}),
        );
    }
    if auth != "private_key_jwt" {
        let expected = log.clients.get(&client_id).map(|c| c.0.clone());
        let ok = match (expected, &secret) {
            (Some(expected), got) => expected == *got,
            // Metadata-document clients are public.
            (None, None) => client_id.starts_with("https://"),
            (None, Some(_)) => false,
        };
        if !ok {
            return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
        }
    }
    if !form.contains_key("resource") {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_target");
    }
    // The key a proof proved, when the server takes DPoP and the request carried one.
    let proved = match (shared.options.dpop, headers.get("dpop")) {
        (Some(dpop), Some(proof)) => {
            let proof = proof.to_str().unwrap_or("");
            log.proofs_seen.push(proof.to_string());
            let htu = format!("{}{path}", shared.base.as_str().trim_end_matches('/'));
            let nonce = dpop.nonce.then_some(TOKEN_NONCE);
            let verdict = check_proof(&mut log, proof, &Method::POST, &htu, None, nonce);
            log.proofs.push(format!(
                "token POST {}",
                verdict.as_ref().err().copied().unwrap_or("ok")
            ));
            match verdict {
                Ok(key) => Some(key),
                Err("use_dpop_nonce") => {
                    let mut answer = oauth_error(StatusCode::BAD_REQUEST, "use_dpop_nonce");
                    answer
                        .headers_mut()
                        .insert("dpop-nonce", TOKEN_NONCE.parse().unwrap());
                    return answer;
                }
                Err(_) => return oauth_error(StatusCode::BAD_REQUEST, "invalid_dpop_proof"),
            }
        }
        _ => None,
    };
    let scope = match form.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let code = form.get("code").cloned().unwrap_or_default();
            let Some((challenge, redirect, owner, scope)) = log.codes.remove(&code) else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            let verifier = form.get("code_verifier").cloned().unwrap_or_default();
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(Sha256::digest(verifier.as_bytes()));
            if computed != challenge
                || form.get("redirect_uri") != Some(&redirect)
                || owner != client_id
            {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            match shared.options.withheld_scope {
                Some(withheld) => scope
                    .split(' ')
                    .filter(|s| *s != withheld)
                    .collect::<Vec<_>>()
                    .join(" "),
                None => scope,
            }
        }
        Some("refresh_token") => {
            let old = form.get("refresh_token").cloned().unwrap_or_default();
            // A bound refresh token needs a proof of its key (RFC 9449 §5).
            if log
                .bound
                .get(&old)
                .is_some_and(|key| proved.as_ref() != Some(key))
            {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            // Rotation: a refresh token works once.
            let Some(scope) = log.refresh.remove(&old) else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            scope
        }
        Some("client_credentials") => form.get("scope").cloned().unwrap_or_default(),
        _ => return oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
    };
    log.next += 1;
    let n = log.next;
    let access = format!("access-token-{n:06}");
    let refresh = format!("refresh-token-{n:06}");
    let expiry = now_secs() + shared.options.lifetime;
    log.access.insert(access.clone(), expiry);
    log.granted.insert(access.clone(), scope.clone());
    let refreshed = form.get("grant_type").map(String::as_str) == Some("refresh_token");
    if refreshed
        && (shared.options.refuse_refreshed
            || (shared.options.refresh_needs_scope && !form.contains_key("scope")))
    {
        log.refused.insert(access.clone());
    }
    let mut token_type = shared.options.token_type;
    if let Some(key) = &proved {
        log.bound.insert(refresh.clone(), key.clone());
        if shared.options.dpop.is_some_and(|d| d.bound_access) {
            log.bound.insert(access.clone(), key.clone());
            token_type = "DPoP";
        }
    }
    let mut answer = json!({
        "access_token": access,
        "token_type": token_type,
        "expires_in": shared.options.lifetime,
        "scope": scope,
    });
    if let Some(text) = shared.options.expires_in_text {
        answer["expires_in"] = json!(text);
    }
    // No refresh token for client credentials (OAuth 2.1 §4.2.3).
    if form.get("grant_type").map(String::as_str) != Some("client_credentials") {
        log.refresh.insert(refresh.clone(), scope);
        answer["refresh_token"] = json!(refresh);
    }
    json_response(StatusCode::OK, answer)
}

/// Checks the DPoP proof `proof` (RFC 9449 §4.3) of a `method` request to `htu`: a JWT of
/// `typ` `dpop+jwt` and `alg` `ES256` whose `jwk` is a public P-256 key (no `d`) that verifies
/// its signature, with `htm` and `htu` as sent, `iat` within a minute of now, `ath` the hash of
/// `token` (absent without one), `nonce` equal to `nonce` when one is wanted, and a `jti` no
/// proof had before. The key's `x.y` when it holds, else why not (`use_dpop_nonce` for the
/// nonce).
fn check_proof(
    log: &mut Log,
    proof: &str,
    method: &Method,
    htu: &str,
    token: Option<&str>,
    nonce: Option<&str>,
) -> Result<String, &'static str> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let [head, body, signature] = proof.split('.').collect::<Vec<_>>()[..] else {
        return Err("not a JWT");
    };
    let decode = |s: &str| {
        b64.decode(s)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    };
    let (Some(header), Some(claims)) = (decode(head), decode(body)) else {
        return Err("not JSON");
    };
    if header["typ"] != "dpop+jwt" || header["alg"] != "ES256" {
        return Err("typ or alg");
    }
    let jwk = &header["jwk"];
    if jwk["kty"] != "EC" || jwk["crv"] != "P-256" || jwk.get("d").is_some() {
        return Err("jwk");
    }
    let (Some(x), Some(y)) = (jwk["x"].as_str(), jwk["y"].as_str()) else {
        return Err("jwk");
    };
    let mut point = vec![4u8];
    point.extend(b64.decode(x).map_err(|_| "jwk")?);
    point.extend(b64.decode(y).map_err(|_| "jwk")?);
    let signature = b64.decode(signature).map_err(|_| "signature")?;
    aws_lc_rs::signature::UnparsedPublicKey::new(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED,
        &point,
    )
    .verify(format!("{head}.{body}").as_bytes(), &signature)
    .map_err(|_| "signature")?;
    if claims["htm"] != method.as_str() || claims["htu"] != htu {
        return Err("htm or htu");
    }
    let iat = claims["iat"].as_u64().ok_or("iat")?;
    if iat.abs_diff(now_secs()) > 60 {
        return Err("iat");
    }
    let ath = token.map(|t| b64.encode(Sha256::digest(t.as_bytes())));
    if claims["ath"].as_str() != ath.as_deref() {
        return Err("ath");
    }
    if nonce.is_some() && claims["nonce"].as_str() != nonce {
        return Err("use_dpop_nonce");
    }
    let jti = claims["jti"]
        .as_str()
        .filter(|j| !j.is_empty())
        .ok_or("jti")?;
    if !log.jtis.insert(jti.to_string()) {
        return Err("jti replayed");
    }
    Ok(format!("{x}.{y}"))
}

/// Plays the browser: opens `link` without following redirects and delivers the redirect to
/// the loopback listener; returns the listener's status code.
pub async fn play_browser(link: &Url) -> u16 {
    play_browser_page(link).await.0
}

/// As [`play_browser`]; returns the listener's status code and page.
pub async fn play_browser_page(link: &Url) -> (u16, String) {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let answer = client.get(link.clone()).send().await.unwrap();
    assert_eq!(
        answer.status(),
        StatusCode::FOUND,
        "the authorization endpoint redirects"
    );
    let location = answer.headers()["location"].to_str().unwrap().to_string();
    let page = client.get(location).send().await.unwrap();
    (page.status().as_u16(), page.text().await.unwrap())
}
