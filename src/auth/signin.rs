//! One sign-in from start to tokens: what the request path calls after a `401`.
//!
//! Owns the sequence: discovery, the client identity (reusing a stored registration, else
//! registering and storing at once), then either the client credentials grant (no browser), the
//! stored grant, or a new authorization request whose link waits on the loopback listener.

use std::sync::Arc;

use reqwest::Url;
use secrecy::ExposeSecret;

use super::Error;
use super::callback::{Awaited, Listener, Outcome, Pasted};
use super::challenge::Challenge;
use super::client::{self, ClientIdentity};
use super::config::{GrantType, OAuthConfig};
use super::discovery::{self, Discovery};
use super::flow::{self, Grant, Pending};
use super::net::Net;
use super::scopes;
use super::store::{Store, StoreKey};
use super::tokens::{LearnSecret, ScrubText, Tokens};
use crate::limits::SIGN_IN_WAIT;
use crate::redact::{HoldsSecret, Learned};

/// How long the browser that brought the code waits for the code exchange before it is told
/// only that the code arrived.
const BROWSER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The entry's secrets as a sign-in meets them.
pub(crate) struct EntrySecrets {
    /// Gives every secret the sign-in learns (a token, a client secret) to the entry's
    /// redactor.
    pub(crate) learn: Box<LearnSecret>,
    /// Whether a text that goes out whole holds a secret of the entry, configured or learned.
    pub(crate) holds: Arc<HoldsSecret>,
}

/// What [`begin`] gives.
#[derive(Debug)]
pub(crate) enum Started {
    /// Tokens to try now: a stored grant, or one from the client credentials grant.
    Ready(Arc<Tokens>),
    /// A user must open [`SignIn::url`]; [`SignIn::finish`] waits for the redirect.
    Link(Box<SignIn>),
}

/// A sign-in waiting for the browser.
pub(crate) struct SignIn {
    net: Net,
    discovered: Discovery,
    identity: ClientIdentity,
    store: Option<(Store, StoreKey)>,
    listener: Listener,
    /// The redirect's address pasted by hand ([`SignIn::paste_sender`]), checked by the
    /// listener's wait like a redirect.
    pasted: tokio::sync::mpsc::Receiver<Pasted>,
    paste: tokio::sync::mpsc::Sender<Pasted>,
    pending: Pending,
    learn: Box<LearnSecret>,
    /// Scrubs the failure reason the browser's page shows.
    scrub: Option<Arc<ScrubText>>,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn")
            .field("identity", &self.identity)
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

/// The tokens of `identity` for the discovered resource, from `grant` when one is held.
fn tokens_at(
    net: Net,
    discovered: Discovery,
    identity: ClientIdentity,
    store: Option<(Store, StoreKey)>,
    grant: Option<Grant>,
    learn: Box<LearnSecret>,
) -> Tokens {
    Tokens::new(
        net,
        discovered.server,
        identity,
        discovered.resource,
        store,
        grant,
        learn,
    )
}

/// The key of the store file of the entry `namespace` for `server_url` and its client.
pub(crate) fn store_key(server_url: &Url, config: &OAuthConfig, namespace: &str) -> StoreKey {
    let client = match (&config.client_id, &config.client_metadata_url) {
        (Some(id), _) => id.clone(),
        (None, Some(url)) => url.to_string(),
        (None, None) => String::new(),
    };
    StoreKey::for_entry(server_url, &client, namespace)
}

/// Starts signing in to the MCP server at `server_url` after it answered with `challenge`.
/// With `reuse_grant`, a stored grant is returned as is (the caller tries it); without (after
/// `invalid_grant` or for a step-up) a new authorization request starts. `scopes` overrides the
/// scope choice (a step-up's union). `store` is the store and the entry's namespace, which
/// keys its file with the URL and the client ([`store_key`]).
///
/// `secrets` learns the secrets the sign-in meets and tells whether a text holds one: no
/// request names a resource indicator holding one ([`discovery::ResourceIndicator`]).
///
/// # Errors
/// Any [`Error`] of discovery, registration, the listener, the authorization request (a
/// resource holding a secret among them) or the client credentials grant.
///
/// # Cancel safety
/// Cancel safe in effect: dropped midway, it may leave a new registration stored (which the
/// next sign-in reuses) and nothing else.
pub(crate) async fn begin(
    server_url: &Url,
    config: &OAuthConfig,
    store: Option<(Store, &str)>,
    challenge: &Challenge,
    reuse_grant: bool,
    scopes: Option<Vec<String>>,
    secrets: EntrySecrets,
) -> Result<Started, Error> {
    let EntrySecrets { learn, holds } = secrets;
    let net = Net::new(server_url)?;
    let discovered = discovery::discover(&net, server_url, challenge, holds).await?;
    client::credential_may_go(config, server_url, &discovered.server)?;
    let store = store.map(|(s, namespace)| {
        let key = store_key(server_url, config, namespace);
        (s, key)
    });
    let stored = store.as_ref().map(|(s, k)| s.load(k)).unwrap_or_default();
    let scopes = scopes.unwrap_or_else(|| {
        scopes::choose_scopes(
            config.scopes.as_deref(),
            challenge,
            discovered.resource_scopes.as_deref(),
        )
    });

    if config.grant_type == GrantType::ClientCredentials {
        let identity = client::without_registration(config, &discovered.server)
            .ok_or_else(|| Error::new(super::ErrorKind::Config, "oauth.clientId is needed"))?;
        learn_client(&*learn, &identity);
        let grant = flow::client_credentials(
            &net,
            &discovered.server,
            &identity,
            config.private_key.as_ref(),
            &discovered.resource,
            &scopes,
            &*learn,
        )
        .await?;
        let tokens = Arc::new(
            tokens_at(net, discovered, identity, store, None, learn)
                .renewing_by_client_credentials(config.private_key.clone(), scopes),
        );
        tokens.install(grant).await;
        return Ok(Started::Ready(tokens));
    }

    let scopes = scopes::with_offline_access(
        scopes,
        discovered.server.metadata.scopes_supported.as_deref(),
    );
    let fixed = client::without_registration(config, &discovered.server);
    let reused = stored
        .client
        .clone()
        .filter(|c| fixed.is_none() && client::reusable(c, &discovered.server));
    // A stored grant goes only to the authorization server that issued it (RFC 6749 §10.4):
    // a server whose metadata names another one gets no refresh token of it.
    let bound = stored
        .grant
        .clone()
        .filter(|grant| issued_by(grant, &discovered.server, reused.is_some()));
    if stored.grant.is_some() && bound.is_none() {
        tracing::info!(
            "the stored grant was issued by another authorization server than this server now \
             names; it is not sent, and a new sign-in is needed"
        );
    }
    if reuse_grant && let (Some(grant), Some(identity)) = (bound, fixed.clone().or(reused.clone()))
    {
        learn_client(&*learn, &identity);
        let tokens = Arc::new(tokens_at(
            net,
            discovered,
            identity,
            store,
            Some(grant),
            learn,
        ));
        return Ok(Started::Ready(tokens));
    }

    let (identity, listener) = match (fixed, reused) {
        (Some(identity), _) => (identity, Listener::bind(config.callback_port).await?),
        (None, Some(identity)) => {
            // The registered redirect URI names a port: bind it again, else register anew.
            let port = config.callback_port.or(client::redirect_port(&identity));
            match Listener::bind(port).await {
                Ok(listener) if Some(listener.redirect_uri()) == identity.redirect_uri => {
                    (identity, listener)
                }
                _ => register(&net, &discovered, config, store.as_ref()).await?,
            }
        }
        (None, None) => register(&net, &discovered, config, store.as_ref()).await?,
    };
    learn_client(&*learn, &identity);
    let pending = flow::authorization_request(
        &discovered.server,
        &identity,
        &discovered.resource,
        &scopes,
        &listener.redirect_uri(),
    )?;
    // One paste waits at a time: a second sender waits for the first's verdict.
    let (paste, pasted) = tokio::sync::mpsc::channel(1);
    Ok(Started::Link(Box::new(SignIn {
        net,
        discovered,
        identity,
        store,
        listener,
        pasted,
        paste,
        pending,
        learn,
        scrub: None,
    })))
}

/// Whether `grant` was issued by `server`: its recorded issuer is the server's identifier.
/// A grant an older version stored records none: it is taken as the server's only with a
/// stored registration made at this server's token endpoint (`registered_here`), else a new
/// sign-in replaces it.
fn issued_by(
    grant: &Grant,
    server: &discovery::AuthorizationServer,
    registered_here: bool,
) -> bool {
    match &grant.issuer {
        Some(issuer) => *issuer == server.identifier(),
        None => registered_here,
    }
}

/// Gives the client's secret (configured, or learned by registration) to the redactor.
fn learn_client(learn: &LearnSecret, identity: &ClientIdentity) {
    use base64::Engine as _;
    use secrecy::ExposeSecret as _;
    let Some(secret) = &identity.client_secret else {
        return;
    };
    learn(secret, Learned::Credential);
    // `client_secret_basic` sends `base64(id:secret)` (RFC 6749 §2.3.1, each part
    // form-urlencoded first); a token endpoint that echoes its `Authorization` header quotes
    // that form.
    let encode =
        |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    let id = &identity.client_id;
    let secret = secret.expose_secret();
    let encoded = format!("{}:{}", encode(id), encode(secret));
    let plain = format!("{id}:{secret}");
    for credential in [Some(&encoded), (plain != encoded).then_some(&plain)]
        .into_iter()
        .flatten()
    {
        let basic = base64::engine::general_purpose::STANDARD.encode(credential);
        learn(&secrecy::SecretString::from(basic), Learned::Credential);
    }
}

/// Registers a client for a newly bound listener and stores it at once, so later sign-ins reuse
/// it even when this one is abandoned.
async fn register(
    net: &Net,
    discovered: &Discovery,
    config: &OAuthConfig,
    store: Option<&(Store, StoreKey)>,
) -> Result<(ClientIdentity, Listener), Error> {
    let listener = Listener::bind(config.callback_port).await?;
    let identity = client::register(net, &discovered.server, &listener.redirect_uri()).await?;
    if let Some((store, key)) = store {
        let mut stored = store.load(key);
        stored.client = Some(identity.clone());
        stored.grant = None;
        if let Err(e) = store.save(key, &stored) {
            tracing::warn!(
                "the client registration could not be saved: {}",
                e.message()
            );
        }
    }
    Ok((identity, listener))
}

impl SignIn {
    /// Scrubs the failure reason the browser's page shows with `scrub` (the entry's secrets).
    pub(crate) fn scrubbing(&mut self, scrub: Arc<ScrubText>) {
        self.scrub = Some(scrub);
    }

    /// Where to send the redirect's address pasted by hand while [`SignIn::finish`] waits;
    /// sending fails once the wait has ended.
    pub(crate) fn paste_sender(&self) -> tokio::sync::mpsc::Sender<Pasted> {
        self.paste.clone()
    }

    /// The link a user opens to sign in.
    pub(crate) fn url(&self) -> &Url {
        &self.pending.url
    }

    /// Every URL the authorization server's metadata gave this sign-in, and the link itself.
    pub(crate) fn urls(&self) -> impl Iterator<Item = &str> {
        let server = &self.discovered.server;
        [
            Some(self.pending.url.as_str()),
            Some(server.authorization_endpoint.as_str()),
            Some(server.token_endpoint.as_str()),
            server.registration_endpoint.as_ref().map(Url::as_str),
            server.issuer.as_deref(),
        ]
        .into_iter()
        .flatten()
    }

    /// Waits (up to [`SIGN_IN_WAIT`]) for the browser's redirect, exchanges the code, saves the
    /// grant and returns the server's tokens. The browser's page tells the outcome ("Signed in"
    /// or "Sign-in failed: `<reason>`"), or, when the exchange takes longer than
    /// [`BROWSER_WAIT`], that the code arrived.
    ///
    /// # Errors
    /// [`super::ErrorKind::Callback`] when no redirect arrives in time or it carries an error; as
    /// [`flow::exchange_code`] otherwise.
    ///
    /// # Cancel safety
    /// Cancel safe until the redirect arrives (dropping it closes the listener); dropped during
    /// the code exchange, the sign-in is lost and a new link is needed.
    pub(crate) async fn finish(self: Box<Self>) -> Result<Arc<Tokens>, Error> {
        let mut this = *self;
        let server = &this.discovered.server;
        let awaited = Awaited {
            state: secrecy::SecretString::from(this.pending.state.expose_secret().to_string()),
            issuer: server
                .issuer
                .clone()
                .or_else(|| server.named_issuer.clone()),
            iss_required: server
                .metadata
                .authorization_response_iss_parameter_supported,
        };
        // Only the senders given out keep the channel open: the wait ends with the last paste.
        drop(this.paste);
        let (redirect, browser) = this
            .listener
            .wait(awaited, SIGN_IN_WAIT, &mut this.pasted)
            .await?;
        drop(this.pasted);
        let exchanged = {
            let exchange = flow::exchange_code(
                &this.net,
                &this.discovered.server,
                &this.identity,
                &this.discovered.resource,
                this.pending,
                redirect,
                &*this.learn,
            );
            tokio::pin!(exchange);
            // The browser waits for the outcome, at most `BROWSER_WAIT`; then it hears that the
            // code arrived and the exchange goes on.
            match tokio::time::timeout(BROWSER_WAIT, &mut exchange).await {
                Ok(exchanged) => {
                    let failed = exchanged.as_ref().err().map(|e| match &this.scrub {
                        Some(scrub) => scrub(e.message()),
                        None => e.message().to_string(),
                    });
                    let outcome = match &failed {
                        None => Outcome::SignedIn,
                        Some(reason) => Outcome::Failed(reason),
                    };
                    browser.answer(outcome).await;
                    exchanged
                }
                Err(_) => {
                    browser.answer(Outcome::Finishing).await;
                    exchange.await
                }
            }
        };
        let grant = exchanged?;
        let tokens = Arc::new(tokens_at(
            this.net,
            this.discovered,
            this.identity,
            this.store,
            None,
            this.learn,
        ));
        tokens.install(grant).await;
        Ok(tokens)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::Duration;

    use secrecy::SecretString;
    use tokio::task::JoinHandle;

    use super::*;
    use crate::auth::ErrorKind;
    use crate::auth::testing::{MetadataAt, Options, PrmAt, TestServer, play_browser};

    type LearnedTexts = Arc<Mutex<Vec<String>>>;

    fn learner() -> (LearnedTexts, Box<LearnSecret>) {
        let learned: LearnedTexts = Arc::default();
        let sink = learned.clone();
        let learn = Box::new(move |s: &SecretString, _: crate::redact::Learned| {
            sink.lock().unwrap().push(s.expose_secret().to_string());
        });
        (learned, learn)
    }

    fn temp_store(name: &str) -> Store {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "plugin-mcp-signin-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        Store::at(dir)
    }

    async fn start(
        server: &TestServer,
        config: &OAuthConfig,
        store: Option<Store>,
        scopes: Option<Vec<String>>,
    ) -> Result<Started, Error> {
        begin_at(server, config, store, false, scopes, learner().1).await
    }

    /// [`begin`] against `server`, answering the challenge its MCP endpoint sends.
    async fn begin_at(
        server: &TestServer,
        config: &OAuthConfig,
        store: Option<Store>,
        reuse_grant: bool,
        scopes: Option<Vec<String>>,
        learn: Box<LearnSecret>,
    ) -> Result<Started, Error> {
        let challenge = Challenge::parse(&server.challenge()).unwrap();
        begin(
            &server.mcp_url(),
            config,
            store.map(|s| (s, "docs")),
            &challenge,
            reuse_grant,
            scopes,
            EntrySecrets {
                learn,
                holds: Arc::new(|_: &str| false),
            },
        )
        .await
    }

    /// A new sign-in with the default config whose learned secrets are kept in the list.
    async fn start_learning(server: &TestServer) -> (LearnedTexts, Box<SignIn>) {
        let (learned, learn) = learner();
        let started = begin_at(server, &OAuthConfig::default(), None, false, None, learn).await;
        let Started::Link(sign_in) = started.unwrap() else {
            panic!("a link")
        };
        (learned, sign_in)
    }

    /// The task finishing `sign_in`, with the status the browser saw for its redirect.
    async fn play(sign_in: Box<SignIn>) -> (u16, JoinHandle<Result<Arc<Tokens>, Error>>) {
        let link = sign_in.url().clone();
        let finish = tokio::spawn(sign_in.finish());
        (play_browser(&link).await, finish)
    }

    /// A server that knows the pre-registered client `(id, secret)`, and the config naming it.
    async fn pre_registered(
        client: (&'static str, &'static str),
        grant_type: GrantType,
    ) -> (TestServer, OAuthConfig) {
        let server = TestServer::start(Options {
            client: Some(client),
            ..Options::default()
        })
        .await;
        let config = OAuthConfig {
            client_id: Some(client.0.into()),
            client_secret: Some(SecretString::from(client.1)),
            grant_type,
            ..OAuthConfig::default()
        };
        (server, config)
    }

    /// The `grant_type` of each token request the server saw, in order.
    fn grant_types(server: &TestServer) -> Vec<String> {
        each(&server.log.lock().unwrap().token_requests, "grant_type")
    }

    /// The `name` parameter of each logged request, in order.
    fn each(requests: &[HashMap<String, String>], name: &str) -> Vec<String> {
        requests.iter().map(|form| form[name].clone()).collect()
    }

    /// Signs in, playing the browser; returns the server's tokens.
    async fn sign_in(
        server: &TestServer,
        config: &OAuthConfig,
        store: Option<Store>,
    ) -> Arc<Tokens> {
        let Started::Link(sign_in) = start(server, config, store, None).await.unwrap() else {
            panic!("a new sign-in needs a link");
        };
        let (status, finish) = play(sign_in).await;
        assert_eq!(status, 200);
        finish.await.unwrap().unwrap()
    }

    #[tokio::test]
    async fn a_token_of_a_type_not_understood_is_refused_and_never_sent() {
        let server = TestServer::start(Options {
            token_type: "mac",
            ..Options::default()
        })
        .await;
        let Started::Link(sign_in) = start(&server, &OAuthConfig::default(), None, None)
            .await
            .unwrap()
        else {
            panic!("a link");
        };
        let (status, finish) = play(sign_in).await;
        assert_eq!(status, 200);
        let err = finish.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Refused);
        assert_eq!(
            err.message(),
            "the token endpoint issued a token of type mac, which this client does not use \
             (RFC 6749 §7.1); the token is not sent"
        );
    }

    async fn token(tokens: &Arc<Tokens>) -> String {
        tokens
            .access_token()
            .await
            .unwrap()
            .token
            .expose_secret()
            .to_string()
    }

    #[tokio::test]
    async fn each_discovery_path_ends_in_a_working_token() {
        let get = |p: &str| format!("GET {p}");
        let cases = [
            (
                PrmAt::Header,
                MetadataAt::OAuthRoot,
                vec![
                    get("/custom/metadata.json"),
                    get("/.well-known/oauth-authorization-server"),
                ],
            ),
            (
                PrmAt::PathInserted,
                MetadataAt::OpenIdRoot,
                vec![
                    get("/.well-known/oauth-protected-resource/mcp"),
                    get("/.well-known/oauth-authorization-server"),
                    get("/.well-known/openid-configuration"),
                ],
            ),
            (
                PrmAt::Root,
                MetadataAt::OAuthInserted,
                vec![
                    get("/.well-known/oauth-protected-resource/mcp"),
                    get("/.well-known/oauth-protected-resource"),
                    get("/.well-known/oauth-authorization-server/tenant1"),
                ],
            ),
            (
                PrmAt::PathInserted,
                MetadataAt::OpenIdInserted,
                vec![
                    get("/.well-known/oauth-protected-resource/mcp"),
                    get("/.well-known/oauth-authorization-server/tenant1"),
                    get("/.well-known/openid-configuration/tenant1"),
                ],
            ),
            (
                PrmAt::Header,
                MetadataAt::OpenIdAppended,
                vec![
                    get("/custom/metadata.json"),
                    get("/.well-known/oauth-authorization-server/tenant1"),
                    get("/.well-known/openid-configuration/tenant1"),
                    get("/tenant1/.well-known/openid-configuration"),
                ],
            ),
            (
                PrmAt::Nowhere,
                MetadataAt::OAuthRoot,
                vec![
                    get("/.well-known/oauth-protected-resource/mcp"),
                    get("/.well-known/oauth-protected-resource"),
                    get("/.well-known/oauth-authorization-server"),
                ],
            ),
            (
                PrmAt::Nowhere,
                MetadataAt::Nowhere,
                vec![
                    get("/.well-known/oauth-protected-resource/mcp"),
                    get("/.well-known/oauth-protected-resource"),
                    get("/.well-known/oauth-authorization-server"),
                ],
            ),
        ];
        for (prm, metadata, discovery) in cases {
            let server = TestServer::start(Options {
                prm,
                metadata,
                ..Options::default()
            })
            .await;
            let tokens = sign_in(&server, &OAuthConfig::default(), None).await;
            let access = token(&tokens).await;
            assert!(server.accepts(&access), "{prm:?} {metadata:?}");
            let prefix = if discovery.iter().any(|r| r.contains("tenant1"))
                && metadata != MetadataAt::OAuthRoot
            {
                "/tenant1"
            } else {
                ""
            };
            let mut trail = discovery.clone();
            trail.extend([
                format!("POST {prefix}/register"),
                format!("GET {prefix}/authorize"),
                format!("POST {prefix}/token"),
            ]);
            assert_eq!(server.requests(), trail, "{prm:?} {metadata:?}");
            let (authorization, token_request) = {
                let log = server.log.lock().unwrap();
                (log.authorizations[0].clone(), log.token_requests[0].clone())
            };
            assert_eq!(authorization["resource"], format!("{}mcp", server.base));
            assert_eq!(authorization["code_challenge_method"], "S256");
            assert_eq!(token_request["resource"], format!("{}mcp", server.base));
            // No scope in the challenge: the resource's scopes_supported (none without one).
            let expected_scope = if prm == PrmAt::Nowhere {
                None
            } else {
                Some("mcp:read mcp:write")
            };
            assert_eq!(
                authorization.get("scope").map(String::as_str),
                expected_scope
            );
        }
    }

    #[tokio::test]
    async fn a_stored_grant_is_never_sent_to_another_authorization_server() {
        let client = Some(("bound-client", "bound-client-secret-1"));
        let config = OAuthConfig {
            client_id: Some("bound-client".into()),
            client_secret: Some(SecretString::from("bound-client-secret-1")),
            ..OAuthConfig::default()
        };
        let real = TestServer::start(Options {
            client,
            ..Options::default()
        })
        .await;
        let store = temp_store("bound");
        sign_in(&real, &config, Some(store.clone())).await;
        let issued = store.load(&store_key(&real.mcp_url(), &config, "docs"));
        assert_eq!(
            issued.grant.as_ref().and_then(|g| g.issuer.clone()),
            Some(real.base.as_str().trim_end_matches('/').to_string())
        );
        // Another server's metadata (another authorization server) finds that grant stored
        // under its own URL: it never receives its refresh token, and a new sign-in starts.
        let other = TestServer::start(Options {
            client,
            ..Options::default()
        })
        .await;
        store
            .save(&store_key(&other.mcp_url(), &config, "docs"), &issued)
            .unwrap();
        let started = begin_at(
            &other,
            &config,
            Some(store.clone()),
            true,
            None,
            learner().1,
        )
        .await
        .unwrap();
        assert!(matches!(started, Started::Link(_)), "{started:?}");
        assert_eq!(other.log.lock().unwrap().token_requests.len(), 0);
        let _ = std::fs::remove_dir_all(store.dir());
    }

    #[tokio::test]
    async fn a_registration_is_stored_and_reused_by_the_next_sign_in() {
        let server = TestServer::start(Options::default()).await;
        let store = temp_store("reuse");
        let config = OAuthConfig::default();
        let first = sign_in(&server, &config, Some(store.clone())).await;
        let second = sign_in(&server, &config, Some(store.clone())).await;
        assert_ne!(token(&first).await, token(&second).await);
        assert_eq!(server.log.lock().unwrap().registrations, 1);
        let ids = each(&server.log.lock().unwrap().authorizations, "client_id");
        assert_eq!(ids, ["client-1", "client-1"]);
        // A third start (another Host) finds the stored grant and needs no link.
        let started = begin_at(
            &server,
            &config,
            Some(store.clone()),
            true,
            None,
            learner().1,
        )
        .await
        .unwrap();
        let Started::Ready(tokens) = started else {
            panic!("the stored grant is reused")
        };
        assert_eq!(token(&tokens).await, token(&second).await);
        let _ = std::fs::remove_dir_all(store.dir());
    }

    #[tokio::test]
    async fn short_lived_tokens_refresh_and_rotated_refresh_tokens_are_saved() {
        let server = TestServer::start(Options {
            lifetime: 1,
            ..Options::default()
        })
        .await;
        let store = temp_store("rotate");
        let config = OAuthConfig::default();
        let tokens = sign_in(&server, &config, Some(store.clone())).await;
        // A 1-second token is refreshed once it expired (its margin is half its lifetime,
        // rounded down, at seconds resolution): each use after a second refreshes it first.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let first = token(&tokens).await;
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let second = token(&tokens).await;
        assert_eq!(first, "access-token-000003");
        assert_eq!(second, "access-token-000004");
        assert!(server.accepts(&second));
        let key = store_key(&server.mcp_url(), &config, "docs");
        let saved = store.load(&key).grant.unwrap();
        assert_eq!(saved.access_token.expose_secret(), "access-token-000004");
        assert_eq!(
            saved.refresh_token.unwrap().expose_secret(),
            "refresh-token-000004"
        );
        assert_eq!(
            grant_types(&server),
            ["authorization_code", "refresh_token", "refresh_token"]
        );
        {
            let log = server.log.lock().unwrap();
            let used: Vec<&str> = log.token_requests[1..]
                .iter()
                .map(|t| t["refresh_token"].as_str())
                .collect();
            assert_eq!(used, ["refresh-token-000002", "refresh-token-000003"]);
        }
        let _ = std::fs::remove_dir_all(store.dir());
    }

    #[tokio::test]
    async fn invalid_grant_clears_the_grant_once_and_asks_for_a_sign_in() {
        let server = TestServer::start(Options::default()).await;
        let store = temp_store("invalid");
        let config = OAuthConfig::default();
        let tokens = sign_in(&server, &config, Some(store.clone())).await;
        let access = SecretString::from(token(&tokens).await);
        server.revoke_refresh_tokens();
        server.expire_access_tokens();
        let err = tokens.rejected(&access).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::SignInRequired);
        assert_eq!(
            err.message(),
            "the authorization server no longer accepts the grant (invalid_grant); sign in again"
        );
        let again = tokens.access_token().await.unwrap_err();
        assert_eq!(
            again.message(),
            "no stored sign-in for this server; sign in"
        );
        assert_eq!(
            server.log.lock().unwrap().token_requests.len(),
            2,
            "no second refresh"
        );
        let stored = store.load(&store_key(&server.mcp_url(), &config, "docs"));
        assert!(stored.grant.is_none());
        assert_eq!(
            stored.client.unwrap().client_id,
            "client-1",
            "the registration stays"
        );
        // The way forward is a new link.
        assert!(matches!(
            start(&server, &config, Some(store.clone()), None).await,
            Ok(Started::Link(_))
        ));
        let _ = std::fs::remove_dir_all(store.dir());
    }

    #[tokio::test]
    async fn concurrent_rejections_share_one_refresh() {
        let server = TestServer::start(Options {
            refresh_delay: Duration::from_millis(200),
            ..Options::default()
        })
        .await;
        let tokens = sign_in(&server, &OAuthConfig::default(), None).await;
        let old = SecretString::from(token(&tokens).await);
        server.expire_access_tokens();
        let calls: Vec<_> = (0..5)
            .map(|_| {
                let tokens = tokens.clone();
                let old = old.clone();
                tokio::spawn(async move {
                    tokens
                        .rejected(&old)
                        .await
                        .unwrap()
                        .token
                        .expose_secret()
                        .to_string()
                })
            })
            .collect();
        let mut got = Vec::new();
        for call in calls {
            got.push(call.await.unwrap());
        }
        assert_eq!(got, vec!["access-token-000003".to_string(); 5]);
        let log = server.log.lock().unwrap();
        let refreshes = log
            .token_requests
            .iter()
            .filter(|t| t["grant_type"] == "refresh_token")
            .count();
        assert_eq!(refreshes, 1);
    }

    /// Host A signs in with `store`; host B, sharing it, starts from A's stored grant.
    async fn two_hosts(
        server: &TestServer,
        config: &OAuthConfig,
        store: &Store,
    ) -> (Arc<Tokens>, Arc<Tokens>) {
        let host_a = sign_in(server, config, Some(store.clone())).await;
        let started = begin_at(server, config, Some(store.clone()), true, None, learner().1).await;
        let Started::Ready(host_b) = started.unwrap() else {
            panic!("host B reuses the stored grant")
        };
        (host_a, host_b)
    }

    #[tokio::test]
    async fn two_hosts_sharing_the_store_follow_each_others_rotation() {
        let server = TestServer::start(Options::default()).await;
        let store = temp_store("shared");
        let config = OAuthConfig::default();
        let (host_a, host_b) = two_hosts(&server, &config, &store).await;
        let shared = SecretString::from(token(&host_a).await);
        server.expire_access_tokens();
        // A refreshes (rotating the refresh token B holds); B then adopts A's saved grant.
        let a = host_a.rejected(&shared).await.unwrap();
        let b = host_b.rejected(&shared).await.unwrap();
        assert_eq!(a.token.expose_secret(), b.token.expose_secret());
        assert_eq!(server.log.lock().unwrap().token_requests.len(), 2);
        let _ = std::fs::remove_dir_all(store.dir());
    }

    #[tokio::test]
    async fn a_forged_redirect_is_refused_and_the_real_one_still_works() {
        let server = TestServer::start(Options::default()).await;
        let Started::Link(sign_in) = start(&server, &OAuthConfig::default(), None, None)
            .await
            .unwrap()
        else {
            panic!("a link");
        };
        let link = sign_in.url().clone();
        let redirect_uri = server.log.lock().unwrap().authorizations.len();
        assert_eq!(redirect_uri, 0);
        let callback = link
            .query_pairs()
            .find(|(k, _)| k == "redirect_uri")
            .map(|(_, v)| v.into_owned())
            .unwrap();
        let finish = tokio::spawn(sign_in.finish());
        let forged = reqwest::get(format!("{callback}?code=code-000001&state=forged"))
            .await
            .unwrap();
        assert_eq!(forged.status().as_u16(), 400);
        assert_eq!(play_browser(&link).await, 200);
        let tokens = finish.await.unwrap().unwrap();
        assert!(server.accepts(&token(&tokens).await));
    }

    #[tokio::test]
    async fn step_up_asks_for_the_union_and_a_server_without_s256_is_refused() {
        let server = TestServer::start(Options {
            challenge_scope: Some("mcp:read"),
            ..Options::default()
        })
        .await;
        let config = OAuthConfig::default();
        let tokens = sign_in(&server, &config, None).await;
        assert_eq!(tokens.scopes().await, ["mcp:read"]);
        let step = scopes::StepUp::default();
        let challenge =
            Challenge::parse(r#"Bearer error="insufficient_scope", scope="mcp:write""#).unwrap();
        let union = step
            .next(&tokens.scopes().await, &challenge, "tools/call whoami")
            .unwrap();
        let Started::Link(again) = start(&server, &config, None, Some(union)).await.unwrap() else {
            panic!("a link");
        };
        let scope = again
            .url()
            .query_pairs()
            .find(|(k, _)| k == "scope")
            .unwrap()
            .1
            .into_owned();
        assert_eq!(scope, "mcp:read mcp:write");

        let no_pkce = TestServer::start(Options {
            s256: false,
            ..Options::default()
        })
        .await;
        let err = start(&no_pkce, &config, None, None).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Refused);
        assert_eq!(
            err.message(),
            "the authorization server does not advertise PKCE S256 \
             (code_challenge_methods_supported); signing in to it is refused"
        );
        assert!(!no_pkce.requests().iter().any(|r| r.contains("/authorize")));
    }

    #[tokio::test]
    async fn client_identity_and_token_endpoint_auth() {
        // A metadata document URL is the client id; nothing is registered.
        let cimd = TestServer::start(Options {
            cimd: true,
            ..Options::default()
        })
        .await;
        let config = OAuthConfig {
            client_metadata_url: Some(Url::parse("https://app.example.com/client.json").unwrap()),
            ..OAuthConfig::default()
        };
        sign_in(&cimd, &config, None).await;
        {
            let log = cimd.log.lock().unwrap();
            assert_eq!(log.registrations, 0);
            assert_eq!(
                log.authorizations[0]["client_id"],
                "https://app.example.com/client.json"
            );
            assert_eq!(log.token_requests[0]["auth"], "none");
        }

        // The registered method follows what the server supports.
        for (methods, used) in [
            (vec!["client_secret_post"], "client_secret_post"),
            (vec!["client_secret_basic"], "client_secret_basic"),
            (vec!["none"], "none"),
        ] {
            let server = TestServer::start(Options {
                auth_methods: methods,
                ..Options::default()
            })
            .await;
            sign_in(&server, &OAuthConfig::default(), None).await;
            assert_eq!(server.log.lock().unwrap().token_requests[0]["auth"], used);
        }

        // A pre-registered client is used as configured.
        let (pre, config) = pre_registered(
            ("pre-client", "pre-secret-12345"),
            GrantType::AuthorizationCode,
        )
        .await;
        sign_in(&pre, &config, None).await;
        let log = pre.log.lock().unwrap();
        assert_eq!(log.registrations, 0);
        assert_eq!(log.token_requests[0]["authenticated_client"], "pre-client");
        assert_eq!(log.token_requests[0]["auth"], "client_secret_basic");
    }

    #[tokio::test]
    async fn client_credentials_with_a_secret_and_with_a_signed_assertion() {
        let (server, config) = pre_registered(
            ("machine", "machine-secret-1"),
            GrantType::ClientCredentials,
        )
        .await;
        let Started::Ready(tokens) = start(&server, &config, None, None).await.unwrap() else {
            panic!("no browser for client credentials");
        };
        let first = SecretString::from(token(&tokens).await);
        assert!(server.accepts(first.expose_secret()));
        // Expired, it is renewed by the same grant: there is no refresh token and no browser.
        server.expire_access_tokens();
        let renewed = tokens.rejected(&first).await.unwrap();
        assert!(server.accepts(renewed.token.expose_secret()));
        assert_eq!(
            grant_types(&server),
            ["client_credentials", "client_credentials"]
        );
        {
            let log = server.log.lock().unwrap();
            assert_eq!(log.token_requests[1]["auth"], "client_secret_basic");
            assert_eq!(log.token_requests[1]["scope"], "mcp:read mcp:write");
        }

        use aws_lc_rs::signature::{
            ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
            UnparsedPublicKey,
        };
        use base64::Engine;
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
        );
        let jwt = TestServer::start(Options::default()).await;
        let config = OAuthConfig {
            client_id: Some("jwt-client".into()),
            private_key: Some(SecretString::from(pem)),
            grant_type: GrantType::ClientCredentials,
            ..OAuthConfig::default()
        };
        let Started::Ready(tokens) = start(&jwt, &config, None, None).await.unwrap() else {
            panic!("no browser for client credentials");
        };
        assert!(jwt.accepts(&token(&tokens).await));
        let log = jwt.log.lock().unwrap();
        let request = &log.token_requests[0];
        assert_eq!(request["auth"], "private_key_jwt");
        assert_eq!(
            request["client_assertion_type"],
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        );
        let assertion = &request["client_assertion"];
        let (input, signature) = assertion.rsplit_once('.').unwrap();
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, pair.public_key().as_ref())
            .verify(input.as_bytes(), &b64.decode(signature).unwrap())
            .expect("the assertion is signed with the configured key");
        let claims: serde_json::Value =
            serde_json::from_slice(&b64.decode(input.split('.').nth(1).unwrap()).unwrap()).unwrap();
        assert_eq!(claims["iss"], "jwt-client");
        assert_eq!(claims["sub"], "jwt-client");
        assert_eq!(claims["aud"], jwt.base.as_str().trim_end_matches('/'));
        assert_eq!(
            claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
            300
        );
    }

    #[tokio::test]
    async fn no_secret_in_debug_errors_or_the_learned_list_misses_one() {
        let server = TestServer::start(Options {
            lifetime: 1,
            ..Options::default()
        })
        .await;
        let (learned, sign_in) = start_learning(&server).await;
        let debug = format!("{sign_in:?}");
        let link = sign_in.url().clone();
        let state = link
            .query_pairs()
            .find(|(k, _)| k == "state")
            .unwrap()
            .1
            .into_owned();
        assert!(!debug.contains(&state), "{debug}");
        assert!(!debug.contains("client-secret"), "{debug}");
        let (_, finish) = play(sign_in).await;
        let tokens = finish.await.unwrap().unwrap();
        // Past the 1-second token's expiry (seconds resolution): the next use refreshes it.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let refreshed = token(&tokens).await;
        let debug = format!("{tokens:?}");
        assert_eq!(debug, "Tokens { client_id: \"client-1\", .. }");
        assert_eq!(
            *learned.lock().unwrap(),
            [
                "access-token-000002",
                "refresh-token-000002",
                "access-token-000003",
                "refresh-token-000003"
            ]
        );
        assert_eq!(refreshed, "access-token-000003");
    }

    #[tokio::test]
    async fn a_wrong_iss_is_refused_and_the_sign_in_client_refuses_redirects_and_huge_bodies() {
        let server = TestServer::start(Options {
            wrong_iss: Some("https://evil.example.com"),
            ..Options::default()
        })
        .await;
        let Started::Link(sign_in) = start(&server, &OAuthConfig::default(), None, None)
            .await
            .unwrap()
        else {
            panic!("a link");
        };
        // Refused at the listener (RFC 9207 §2.4): the sign-in keeps waiting for its redirect.
        let (status, finish) = play(sign_in).await;
        assert_eq!(status, 400);
        assert!(!finish.is_finished());
        finish.abort();
        assert!(
            !server.requests().iter().any(|r| r.ends_with("/token")),
            "no exchange"
        );

        let net = Net::new(&server.mcp_url()).unwrap();
        let moved = net
            .get_json::<serde_json::Value>(&server.base.join("/moved").unwrap(), "the metadata")
            .await
            .unwrap_err();
        assert_eq!(
            moved.message(),
            "the metadata answered with a redirect (302 Found); OAuth requests do not follow redirects"
        );
        let huge = net
            .get_json::<serde_json::Value>(&server.base.join("/huge").unwrap(), "the metadata")
            .await
            .unwrap_err();
        assert_eq!(huge.message(), "the metadata sent more than 262144 bytes");
        assert_eq!(
            server
                .requests()
                .iter()
                .filter(|r| r.contains("/.well-known/x"))
                .count(),
            0
        );
    }

    #[tokio::test]
    async fn two_hosts_refreshing_at_once_keep_the_rotated_grant() {
        let server = TestServer::start(Options {
            refresh_delay: Duration::from_millis(300),
            ..Options::default()
        })
        .await;
        let store = temp_store("race");
        let config = OAuthConfig::default();
        let (host_a, host_b) = two_hosts(&server, &config, &store).await;
        let shared = SecretString::from(token(&host_a).await);
        server.expire_access_tokens();
        let (a, b) = {
            let (sa, sb) = (shared.clone(), shared.clone());
            let (ha, hb) = (host_a.clone(), host_b.clone());
            let a = tokio::spawn(async move {
                ha.rejected(&sa)
                    .await
                    .map(|t| t.token.expose_secret().to_string())
            });
            let b = tokio::spawn(async move {
                hb.rejected(&sb)
                    .await
                    .map(|t| t.token.expose_secret().to_string())
            });
            (a.await.unwrap(), b.await.unwrap())
        };
        // Both Hosts end with the one rotated grant; neither is asked to sign in again.
        assert_eq!(
            a.as_deref().map_err(Error::message),
            Ok("access-token-000003")
        );
        assert_eq!(
            b.as_deref().map_err(Error::message),
            Ok("access-token-000003")
        );
        let stored = store.load(&store_key(&server.mcp_url(), &config, "docs"));
        assert_eq!(
            stored
                .grant
                .map(|g| g.access_token.expose_secret().to_string()),
            Some("access-token-000003".to_string())
        );
        // The store's lock let one Host refresh; the other read its grant: the refresh token
        // was sent once, so an authorization server that revokes a grant whose rotated refresh
        // token is replayed has nothing to revoke.
        assert_eq!(
            grant_types(&server),
            ["authorization_code", "refresh_token"]
        );
        let _ = std::fs::remove_dir_all(store.dir());
    }

    #[tokio::test]
    async fn a_registered_client_secret_is_learned_for_scrubbing() {
        let server = TestServer::start(Options {
            auth_methods: vec!["client_secret_basic"],
            ..Options::default()
        })
        .await;
        let (learned, sign_in) = start_learning(&server).await;
        let (_, finish) = play(sign_in).await;
        finish.await.unwrap().unwrap();
        assert_eq!(
            server.log.lock().unwrap().token_requests[0]["auth"],
            "client_secret_basic"
        );
        // The secret, and the `client_secret_basic` credential a token endpoint may echo.
        use base64::Engine as _;
        let basic =
            base64::engine::general_purpose::STANDARD.encode("client-1:client-secret-000001");
        assert_eq!(
            *learned.lock().unwrap(),
            [
                "client-secret-000001",
                basic.as_str(),
                "access-token-000002",
                "refresh-token-000002"
            ]
        );
    }

    #[tokio::test]
    async fn a_grant_is_stored_with_the_client_it_was_issued_to() {
        let server = TestServer::start(Options::default()).await;
        let store = temp_store("two-sign-ins");
        let config = OAuthConfig::default();
        // Host A starts a sign-in: registers client-1, its listener holds client-1's port.
        let Started::Link(first) = start(&server, &config, Some(store.clone()), None)
            .await
            .unwrap()
        else {
            panic!("a link")
        };
        // Host B starts one too while A waits: client-1's port is taken, so B registers.
        let Started::Link(second) = start(&server, &config, Some(store.clone()), None)
            .await
            .unwrap()
        else {
            panic!("a link")
        };
        assert_eq!(server.log.lock().unwrap().registrations, 2);
        // The user completes A's sign-in.
        let (status, finish) = play(first).await;
        assert_eq!(status, 200);
        let tokens = finish.await.unwrap().unwrap();
        assert_eq!(
            format!("{tokens:?}"),
            "Tokens { client_id: \"client-1\", .. }"
        );
        drop(second);
        let stored = store.load(&store_key(&server.mcp_url(), &config, "docs"));
        let pair = (
            stored.client.map(|c| c.client_id),
            stored
                .grant
                .map(|g| g.access_token.expose_secret().to_string()),
        );
        let _ = std::fs::remove_dir_all(store.dir());
        // The stored grant and the stored client belong together (a refresh sends both).
        assert_eq!(
            pair,
            (
                Some("client-1".to_string()),
                Some("access-token-000002".to_string())
            )
        );
    }
}
