//! Signing in to servers that require OAuth (MCP 2025-11-25 "Authorization"; OAuth 2.1 with
//! RFC 9728, RFC 8414, RFC 7591, RFC 7636, RFC 8707 and RFC 9207).
//!
//! The modules, in the order a sign-in uses them:
//! - [`config`]: the `oauth` object of a server entry;
//! - [`policy`]: which URLs and addresses a sign-in may reach (SSRF);
//! - [`net`]: the redirect-refusing, size-capped HTTP client every OAuth request goes through;
//! - [`challenge`]: the `WWW-Authenticate` parser and the `Bearer` challenge;
//! - [`discovery`]: from a `401` to the authorization server's endpoints;
//! - [`client`]: the client identity (pre-registered, metadata document, or registered);
//! - [`dpop`]: the key pair of a DPoP-bound grant, its proofs and the servers' nonces (RFC 9449);
//! - [`callback`]: the loopback listener the browser is redirected to;
//! - [`flow`]: the grants (authorization code with PKCE, refresh, client credentials);
//! - [`scopes`]: which scopes to ask for, and the step-up count;
//! - [`store`]: registrations and grants on disk;
//! - [`tokens`]: the per-server token state (the current grant, refreshed single-flight);
//! - [`signin`]: one sign-in from the `401` to the tokens.
//!
//! Every token, secret, code and verifier is held in a [`secrecy`] type and never appears in an
//! [`Error`], a log line or a `Debug` output.

pub(crate) mod callback;
pub(crate) mod challenge;
pub(crate) mod client;
pub(crate) mod config;
pub(crate) mod discovery;
pub(crate) mod dpop;
pub(crate) mod flow;
pub(crate) mod net;
pub(crate) mod policy;
pub(crate) mod scopes;
pub(crate) mod signin;
pub(crate) mod store;
pub(crate) mod tokens;

/// The local authorization server of the integration tests, shared with the unit tests.
#[cfg(test)]
#[path = "../tests/support/oauth.rs"]
#[allow(dead_code)] // Each test binary uses a part.
pub(crate) mod testing;

/// The listener of a [`testing::TestServer`] in the unit tests (the integration tests give it a
/// port no other listener of theirs had).
#[cfg(test)]
async fn unused_loopback() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()
}

/// Why a sign-in step failed. The message is for a user or a model: it names the step and the
/// rule broken, holds no secret, and quotes server text only scrubbed of tokens and cut to
/// [`crate::limits::MAX_REASON_BYTES`].
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Error {
    kind: ErrorKind,
    message: String,
}

/// What kind of failure an [`Error`] is; decisions are made on this, never on the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// The entry's `oauth` object is wrong, or asks for something the server cannot do.
    Config,
    /// A server's metadata or answer breaks a rule (no S256, a refused URL, a bad document).
    Refused,
    /// An authorization server could not be reached or did not answer in time.
    Transport,
    /// The authorization server answered a token request with an OAuth error other than
    /// `invalid_grant`.
    Denied,
    /// The grant is gone (`invalid_grant`, or no grant stored): a new sign-in is needed.
    SignInRequired,
    /// The browser's redirect did not complete the sign-in (state mismatch, `error=...`, or the
    /// listener's time ran out).
    Callback,
    /// The stored credentials could not be read or written.
    Storage,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    #[cfg(test)]
    pub(crate) fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The text a status reason or a tool error shows.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// Whether a new sign-in (a new link) is the way forward.
    pub(crate) fn is_sign_in_required(&self) -> bool {
        self.kind == ErrorKind::SignInRequired
    }

    /// Whether the sign-in will fail the same way until the entry's config changes: a
    /// [`ErrorKind::Config`] (the server offers no sign-in at all, no registration without
    /// `oauth.clientId`, an unusable `oauth.privateKey`, ...), whose message says what to change.
    /// Waiting for it is in vain (the listing's `lasting`).
    pub(crate) fn is_lasting(&self) -> bool {
        self.kind == ErrorKind::Config
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "auth::Error({:?}: {})", self.kind, self.message)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Seconds since the Unix epoch, the unit of every stored expiry.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
