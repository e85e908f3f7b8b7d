//! The error of one exchange with a server: what went wrong, as a kind the client decides on,
//! and as a sentence a model can act on.
//!
//! One struct over a boxed private inner (the shape of `reqwest::Error`): callers ask predicates
//! (`is_status`, `is_refused`, `is_session_expired`, `retry_after`, …) and never match on text.
//! `Display` is the model-facing sentence: it holds no URL beyond a `scheme://host:port` that
//! carries no secret and a refused redirect's scrubbed target (without query or fragment), no
//! header value and no unscrubbed server text; a 401/403 carries the entry's config hint (names
//! only). `Debug` names the kind only.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;

use super::verdict::Verdict;
use crate::jsonrpc::RpcError;
use crate::limits;

/// How every reason of a server waiting for a sign-in starts.
const SIGN_IN_REQUIRED: &str = "sign-in required";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why an exchange with a server failed.
pub(crate) struct Error {
    inner: Box<Inner>,
}

struct Inner {
    kind: Failure,
    source: Option<BoxError>,
    /// Set once by the exchange that met it ([`Error::judged`]).
    verdict: Option<Verdict>,
}

/// Why an error will not pass by itself ([`Error::lasting`]), so a reason can say what to
/// change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lasting {
    /// `404`: nothing serves MCP at the url's path.
    NoEndpoint,
    /// `400`, `405`, `406`, `410`, `415`, `501`: what answers there takes no MCP requests.
    NotMcp,
    /// `401`/`403` with no sign-in this client can use: the entry's credentials.
    Credentials,
    /// A redirect, a TLS failure, no shared version, a sign-in the entry's config rules out:
    /// the error's own sentence says what to do.
    Explained,
}

impl Lasting {
    /// What to change, as the end of a reason (`; ...`); empty when the error says it.
    pub(crate) fn advice(self) -> &'static str {
        match self {
            Lasting::NoEndpoint => {
                "; nothing serves MCP at this URL: check the path in \"url\" (many servers serve MCP at /mcp)"
            }
            Lasting::NotMcp => {
                "; the server does not take MCP requests at this URL: check that \"url\" is the server's MCP endpoint"
            }
            Lasting::Credentials => {
                "; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry's \"headers\" (e.g. \"Authorization\": \"Bearer ${env:TOKEN}\")"
            }
            Lasting::Explained => "",
        }
    }
}

/// How a connection attempt failed (TCP connect, name resolution or TLS handshake).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Connect {
    /// Nothing listens there (TCP RST).
    Refused,
    /// The host name could not be resolved.
    Dns,
    /// The TLS handshake failed.
    Tls,
    /// Connecting took longer than [`limits::CONNECT_TIMEOUT`].
    Timeout,
    /// Any other failure to connect.
    Other,
}

/// What went wrong in one exchange: the kind of an [`Error`], which every decision reads.
enum Failure {
    /// The HTTP client could not be built.
    Builder,
    /// No connection was made, so nothing was sent. `origin` is `scheme://host:port` when that
    /// part of the URL holds no secret.
    Connect {
        why: Connect,
        origin: Option<String>,
    },
    /// The connection broke after the request went out and before a status came back.
    Send,
    /// A non-2xx, non-redirect status: the server refused the request.
    Status {
        status: StatusCode,
        /// The wait a 429 or 503 asked for with `Retry-After` (seconds or an HTTP date).
        retry_after: Option<Duration>,
        /// The body: the start of it, or only its media type ([`Body`]).
        preview: Body,
        /// The entry's config hint, on a 401 or 403 only ([`Error::with_auth_hint`]).
        hint: Option<String>,
    },
    /// A 3xx: refused, never followed.
    Redirect {
        status: StatusCode,
        /// Where the `Location` pointed (scheme, host, port and path), scrubbed and bounded,
        /// when there was one.
        location: Option<String>,
        /// Whether the `Location` had a query or fragment, which is not shown.
        query_omitted: bool,
    },
    /// A 404 to a request that carried a session id: the server does not know the session (it
    /// did not process the request).
    SessionExpired,
    /// A 400 to such a request whose body speaks of the session (a JSON-RPC error, or the plain
    /// text of older SDKs): read as [`Failure::SessionExpired`], but from the server's words, so the
    /// session is not taken as gone for sure (it is still deleted) and a server whose fresh
    /// session gets the same 400 stops being read that way.
    SessionExpiredByText,
    /// The server forgot the session while request `id` was running: the resumption of its
    /// event stream (`GET` + `Last-Event-ID`) was refused as [`Failure::SessionExpired`]. The
    /// request is over (nothing to cancel, no session to cancel it on), but it may have run, so
    /// it is never sent again.
    SessionLost {
        id: u64,
        /// Whether the refusal was the server's words (a "no valid session" 400), not a 404.
        by_words: bool,
    },
    /// The resend after a new `initialize` was refused as expired too.
    ExpiredAgain,
    /// A JSON-RPC error answered the request.
    Rpc(RpcError),
    /// The answer arrived, but of no valid shape: neither `result` nor `error`, an `error` that
    /// is no JSON-RPC error object, or a `result` not of the expected shape.
    Malformed(String),
    /// A complete reply broke the protocol (not JSON-RPC, no answer in a JSON body, a bad
    /// header); the text says how.
    Protocol(String),
    /// A 2xx reply whose `Content-Type` is neither `application/json` nor `text/event-stream`
    /// (or is missing): what answers at the url (a web page, a file) is no MCP endpoint. The text
    /// names the type (scrubbed, bounded), never the body.
    NotMcpType(String),
    /// A 2xx reply ended or broke before the answer arrived (the request may still be running
    /// on the server); the text says how.
    Stream(String),
    /// As [`Failure::Stream`], but the stream itself ended or was cut before the answer (not an
    /// unreadable or oversized message): on a modern route the request is lost and re-issued
    /// (MCP 2026-07-28, transports "Receiving Messages").
    Broken(String),
    /// The server's `UnsupportedProtocolVersion` (or `server/discover`) named no version this
    /// client speaks: the versions it named, scrubbed and bounded.
    NoMutualVersion(Vec<String>),
    /// A modern server answered a request with `resultType: "input_required"` (MCP
    /// 2026-07-28, basic/patterns/mrtr): it asks for input this client never declared it could
    /// give; the text names what it asked for.
    InputRequired(String),
    /// The connection was cut while a reply was being read.
    Body,
    /// The server sent nothing for `what` (its response headers, or for `server/discover` its
    /// answer) within `within`: a silent server or proxy. The request is given up and not
    /// re-issued.
    NoAnswer { what: String, within: Duration },
    /// A new `initialize` after an expired session failed, and why (also the `source()`).
    Reinitialize(Arc<Error>),
    /// The connection was shut down (the Pack was dropped) or its start abandoned.
    Closed,
    /// The server wants a signed-in user (MCP 2025-11-25 "Authorization") and a sign-in waits
    /// for the browser at this link.
    SignIn(Arc<str>),
    /// Signing in failed; the text says which step and why (scrubbed, no secret). `lasting`
    /// when it will fail the same way until the entry's config changes
    /// ([`crate::auth::Error::is_lasting`]: e.g. the server offers no sign-in at all).
    Auth { text: String, lasting: bool },
}

/// How the body of an error status is shown in its reason (README "Lifecycle and limits"):
/// quoted when it is text a person wrote for a client (JSON, plain text, or a body without a
/// `Content-Type`), otherwise (an HTML error page of a server that is no MCP server, XML) only
/// named by its media type, so a web page is never pasted into a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    /// The start of the body, scrubbed, single-line and bounded (empty: no body).
    Quoted(String),
    /// The body's media type (`type/subtype`, lower-case, at most
    /// [`limits::MAX_MEDIA_TYPE_BYTES`]; `an unreadable media type` otherwise); the body is not
    /// shown.
    Withheld(String),
}

impl From<String> for Body {
    fn from(text: String) -> Self {
        Body::Quoted(text)
    }
}

impl Body {
    /// Whether an error body with this `Content-Type` header (RFC 9110 §8.3) is quoted:
    /// `application/json`, a `+json` type (RFC 6839 §3.1, e.g. `application/problem+json`),
    /// `text/plain`, or no `Content-Type` at all. `Some(media)` when it is withheld instead.
    pub(crate) fn withheld_type(content_type: Option<&http::HeaderValue>) -> Option<String> {
        let value = content_type?;
        let essence = value
            .to_str()
            .ok()
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase());
        let Some(essence) = essence else {
            return Some("an unreadable media type".to_string());
        };
        let (kind, subtype) = essence.split_once('/').unwrap_or((&essence, ""));
        let token = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
        };
        if !token(kind) || !token(subtype) || essence.len() > limits::MAX_MEDIA_TYPE_BYTES {
            return Some("an unreadable media type".to_string());
        }
        let quoted = matches!((kind, subtype), ("application", "json") | ("text", "plain"))
            || (kind == "application" && subtype.ends_with("+json"));
        (!quoted).then_some(essence)
    }
}

impl Error {
    fn new(kind: Failure, source: Option<BoxError>) -> Self {
        Self {
            inner: Box::new(Inner {
                kind,
                source,
                verdict: None,
            }),
        }
    }

    /// The HTTP status of a refusal or redirect.
    pub(crate) fn status(&self) -> Option<StatusCode> {
        match &self.inner.kind {
            Failure::Status { status, .. } | Failure::Redirect { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The wait a `429`/`503` refusal asked for with `Retry-After` (RFC 9110 §10.2.3), also
    /// when it refused the new `initialize` after an expired session.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match &self.inner.kind {
            Failure::Status { retry_after, .. } => *retry_after,
            Failure::Reinitialize(cause) => cause.retry_after(),
            _ => None,
        }
    }

    /// Whether the connection was refused (nothing listens there).
    pub(crate) fn is_refused(&self) -> bool {
        matches!(
            self.inner.kind,
            Failure::Connect {
                why: Connect::Refused,
                ..
            }
        )
    }

    /// Whether the server no longer knows the session the request carried (also when it forgot
    /// it while the request was running: [`Error::session_lost`]).
    pub(crate) fn is_session_expired(&self) -> bool {
        matches!(
            self.inner.kind,
            Failure::SessionExpired | Failure::SessionExpiredByText | Failure::SessionLost { .. }
        )
    }

    /// The JSON-RPC error that answered the request.
    pub(crate) fn rpc(&self) -> Option<&RpcError> {
        match &self.inner.kind {
            Failure::Rpc(error) => Some(error),
            _ => None,
        }
    }

    /// Whether the connection was shut down or its start abandoned.
    pub(crate) fn is_closed(&self) -> bool {
        matches!(self.inner.kind, Failure::Closed)
    }

    /// Whether the request may still be running on the server after this error: the server
    /// accepted it (2xx) and the reply ended or broke before the answer, or the connection broke
    /// after the request went out. Only then does a cancel make sense (MCP 2025-11-25,
    /// cancellation: only requests believed to be in progress). An answer, a malformed answer,
    /// an error status, a redirect, an expired session, a failed connect or a closed connection
    /// all mean it is not.
    pub(crate) fn may_be_running(&self) -> bool {
        matches!(
            self.inner.kind,
            Failure::Stream(_) | Failure::Broken(_) | Failure::Body | Failure::Send
        )
    }

    /// Whether the reply was lost on the way: the stream ended or was cut before the answer,
    /// or the connection broke after the request went out. A modern request is then re-issued
    /// with a new id (MCP 2026-07-28, basic/transports: a broken stream loses the request).
    pub(crate) fn is_lost_reply(&self) -> bool {
        matches!(
            self.inner.kind,
            Failure::Broken(_) | Failure::Body | Failure::Send
        )
    }

    /// Whether a complete answer came that is no MCP answer at all: the wrong content type, no
    /// JSON-RPC, no response in it, a `result` of another shape. To the era probe, a legacy
    /// server.
    pub(crate) fn is_unreadable_answer(&self) -> bool {
        matches!(
            self.inner.kind,
            Failure::Protocol(_) | Failure::NotMcpType(_) | Failure::Malformed(_)
        )
    }

    /// Whether the server refused with an HTTP status and no JSON-RPC error.
    pub(crate) fn is_plain_status(&self) -> bool {
        matches!(self.inner.kind, Failure::Status { .. })
    }

    /// Whether no version is shared with the server ([`Error::no_mutual_version`]): nothing
    /// changes until the server does, so starts are tried again at the longest wait.
    pub(crate) fn is_no_mutual_version(&self) -> bool {
        match &self.inner.kind {
            Failure::NoMutualVersion(_) => true,
            Failure::Reinitialize(cause) => cause.is_no_mutual_version(),
            _ => false,
        }
    }

    /// What will not change until the config or the server does, when this error is such
    /// (README "Lifecycle and limits": a lasting start failure): a `404 Not Found` to a request
    /// without a session, or a `2xx` that is neither JSON nor an event stream (a web page:
    /// nothing serves MCP at that path), `405`, `406`, `410`, `415` or `501` (no MCP endpoint
    /// there), a `400` without a JSON-RPC error, a `401`/`403` without a sign-in (the configured
    /// credentials, or none, are refused and no OAuth sign-in is offered, whether the status
    /// came plain or a sign-in found none: [`Failure::Auth`]'s `lasting`), a refused redirect, a
    /// failed TLS handshake, and no shared protocol version. Decided on the kind and the status
    /// only.
    pub(crate) fn lasting(&self) -> Option<Lasting> {
        match &self.inner.kind {
            Failure::Status { status, hint, .. } => match status.as_u16() {
                404 => Some(Lasting::NoEndpoint),
                400 | 405 | 406 | 410 | 415 | 501 => Some(Lasting::NotMcp),
                // The config hint says what to change already.
                401 | 403 if hint.is_some() => Some(Lasting::Explained),
                401 | 403 => Some(Lasting::Credentials),
                _ => None,
            },
            Failure::NotMcpType(_) => Some(Lasting::NoEndpoint),
            Failure::Auth { lasting: true, .. } => Some(Lasting::Explained),
            Failure::Redirect { .. }
            | Failure::Connect {
                why: Connect::Tls, ..
            }
            | Failure::NoMutualVersion(_) => Some(Lasting::Explained),
            _ => None,
        }
    }

    /// Whether the server sent nothing in time ([`Error::no_answer`]).
    pub(crate) fn is_no_answer(&self) -> bool {
        matches!(self.inner.kind, Failure::NoAnswer { .. })
    }

    /// Whether a modern server asked for input ([`Error::input_required`]).
    pub(crate) fn is_input_required(&self) -> bool {
        matches!(self.inner.kind, Failure::InputRequired(_))
    }

    // Constructors, one per kind, so call sites read as sentences.

    pub(crate) fn builder(source: reqwest::Error) -> Self {
        Self::new(Failure::Builder, Some(Box::new(source.without_url())))
    }

    /// A `reqwest` failure to send or read, classified; `origin` as in [`Failure::Connect`].
    pub(crate) fn from_reqwest(error: reqwest::Error, origin: Option<&str>) -> Self {
        let error = error.without_url();
        let kind = if error.is_builder() {
            Failure::Builder
        } else if error.is_connect() {
            Failure::Connect {
                why: classify_connect(&error, error.is_timeout(), error.is_dns()),
                origin: origin.map(str::to_string),
            }
        } else if error.is_body() || error.is_decode() {
            Failure::Body
        } else {
            Failure::Send
        };
        Self::new(kind, Some(Box::new(error)))
    }

    pub(crate) fn http_status(
        status: StatusCode,
        retry_after: Option<Duration>,
        preview: impl Into<Body>,
    ) -> Self {
        Self::new(
            Failure::Status {
                status,
                retry_after,
                preview: preview.into(),
                hint: None,
            },
            None,
        )
    }

    /// Adds the entry's config `hint` (a `${NAME}` sent as written, an empty `${env:NAME}`) to
    /// a `401 Unauthorized` or `403 Forbidden`; any other error is returned unchanged.
    pub(crate) fn with_auth_hint(mut self, hint: Option<&str>) -> Self {
        if let Failure::Status {
            status, hint: slot, ..
        } = &mut self.inner.kind
            && matches!(*status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
        {
            *slot = hint.map(str::to_string);
        }
        self
    }

    /// A refused redirect; `location` is its target: scrubbed, without query or fragment,
    /// bounded.
    pub(crate) fn redirect(
        status: StatusCode,
        location: Option<String>,
        query_omitted: bool,
    ) -> Self {
        Self::new(
            Failure::Redirect {
                status,
                location,
                query_omitted,
            },
            None,
        )
    }

    pub(crate) fn session_expired() -> Self {
        Self::new(Failure::SessionExpired, None)
    }

    /// A 400 whose body speaks of the session ([`Failure::SessionExpiredByText`]).
    pub(crate) fn session_expired_by_text() -> Self {
        Self::new(Failure::SessionExpiredByText, None)
    }

    /// Whether the expiry was read from a 400's words, not a 404 (also when those words
    /// refused a resumption: [`Error::session_lost`]).
    pub(crate) fn is_expired_by_text(&self) -> bool {
        matches!(
            self.inner.kind,
            Failure::SessionExpiredByText | Failure::SessionLost { by_words: true, .. }
        )
    }

    /// The server forgot the session while request `id` was running: its stream's resumption
    /// was refused with `refusal`, an expired session (a 404, or the server's words). Not
    /// [`Error::may_be_running`]; never to be resent.
    pub(crate) fn session_lost(id: u64, refusal: &Error) -> Self {
        let by_words = refusal.is_expired_by_text();
        Self::new(Failure::SessionLost { id, by_words }, None)
    }

    /// Whether the request was refused for too many requests, or as unavailable for now, with
    /// a `Retry-After` (RFC 6585 §4, RFC 9110 §15.6.4): not processed; the status and the wait.
    pub(crate) fn rate_limited(&self) -> Option<(StatusCode, Duration)> {
        match &self.inner.kind {
            Failure::Status {
                status,
                retry_after: Some(wait),
                ..
            } if matches!(status.as_u16(), 429 | 503) => Some((*status, *wait)),
            // The renewal of an expired session refused the same way: the same wait.
            Failure::Reinitialize(cause) => cause.rate_limited(),
            _ => None,
        }
    }

    /// The status of a request refused `429` or `503` without a `Retry-After` (RFC 6585 §4,
    /// RFC 9110 §15.6.4): not processed, and no wait named; also when it refused the new
    /// `initialize` after an expired session.
    pub(crate) fn busy(&self) -> Option<u16> {
        match &self.inner.kind {
            Failure::Status {
                status,
                retry_after: None,
                ..
            } if matches!(status.as_u16(), 429 | 503) => Some(status.as_u16()),
            Failure::Reinitialize(cause) => cause.busy(),
            _ => None,
        }
    }

    /// The same rate-limit refusal ([`Error::rate_limited`]) asking for `left` instead of the
    /// wait it named: what is left of that wait now. `None` when it is no such refusal.
    pub(crate) fn with_wait_left(&self, left: Duration) -> Option<Self> {
        match &self.inner.kind {
            Failure::Status {
                status,
                retry_after: Some(_),
                preview,
                hint,
            } if matches!(status.as_u16(), 429 | 503) => Some(Self::new(
                Failure::Status {
                    status: *status,
                    retry_after: Some(left),
                    preview: preview.clone(),
                    hint: hint.clone(),
                },
                None,
            )),
            Failure::Reinitialize(cause) => cause
                .with_wait_left(left)
                .map(|cause| Self::reinitialize(Arc::new(cause))),
            _ => None,
        }
    }

    /// Whether the answer is a response of no valid shape ([`Error::malformed`]).
    pub(crate) fn is_malformed(&self) -> bool {
        matches!(self.inner.kind, Failure::Malformed(_))
    }

    /// The [`Verdict`] the connection reached on this error, once, for the route it answered
    /// ([`super::judge`]); [`Verdict::Stands`] for an error no exchange judged.
    pub(crate) fn verdict(&self) -> Verdict {
        self.inner.verdict.unwrap_or(Verdict::Stands)
    }

    /// The same error, carrying `verdict` for the consumers past the connection (the Pack). A
    /// verdict it already carries (read where the failure happened, as a refused resumption's
    /// named wait) stands over an outer reading that found nothing to act on
    /// ([`Verdict::Stands`]).
    pub(crate) fn judged(mut self, verdict: Verdict) -> Self {
        if verdict != Verdict::Stands || self.inner.verdict.is_none() {
            self.inner.verdict = Some(verdict);
        }
        self
    }

    pub(crate) fn expired_again() -> Self {
        Self::new(Failure::ExpiredAgain, None)
    }

    pub(crate) fn rpc_error(error: RpcError) -> Self {
        Self::new(Failure::Rpc(error), None)
    }

    pub(crate) fn malformed(text: String) -> Self {
        Self::new(Failure::Malformed(text), None)
    }

    pub(crate) fn protocol(text: impl Into<String>) -> Self {
        Self::new(Failure::Protocol(text.into()), None)
    }

    /// A 2xx reply of a type that is no MCP answer ([`Failure::NotMcpType`]); `text` names the
    /// type.
    pub(crate) fn not_mcp_type(text: impl Into<String>) -> Self {
        Self::new(Failure::NotMcpType(text.into()), None)
    }

    pub(crate) fn stream(text: impl Into<String>, source: Option<Error>) -> Self {
        Self::new(
            Failure::Stream(text.into()),
            source.map(|e| Box::new(e) as BoxError),
        )
    }

    /// The stream of a 2xx reply ended or was cut before the answer ([`Failure::Broken`]).
    pub(crate) fn broken(text: impl Into<String>) -> Self {
        Self::new(Failure::Broken(text.into()), None)
    }

    /// No protocol version is shared with the server, which named `theirs` (scrubbed).
    pub(crate) fn no_mutual_version(theirs: Vec<String>) -> Self {
        Self::new(Failure::NoMutualVersion(theirs), None)
    }

    /// A modern server answered with `resultType: "input_required"`; `asked` names what it
    /// asked for (scrubbed, bounded).
    pub(crate) fn input_required(asked: String) -> Self {
        Self::new(Failure::InputRequired(asked), None)
    }

    /// The server sent nothing for `what` within `within` ([`Failure::NoAnswer`]).
    pub(crate) fn no_answer(what: impl Into<String>, within: Duration) -> Self {
        let what = what.into();
        Self::new(Failure::NoAnswer { what, within }, None)
    }

    #[cfg(test)]
    pub(crate) fn body() -> Self {
        Self::new(Failure::Body, None)
    }

    pub(crate) fn reinitialize(cause: Arc<Error>) -> Self {
        Self::new(Failure::Reinitialize(cause), None)
    }

    pub(crate) fn closed() -> Self {
        Self::new(Failure::Closed, None)
    }

    pub(crate) fn sign_in(url: Arc<str>) -> Self {
        Self::new(Failure::SignIn(url), None)
    }

    /// Signing in failed (`text`: which step and why, scrubbed); `lasting` when it fails the
    /// same way until the entry's config changes ([`crate::auth::Error::is_lasting`]).
    pub(crate) fn auth(text: impl Into<String>, lasting: bool) -> Self {
        Self::new(
            Failure::Auth {
                text: text.into(),
                lasting,
            },
            None,
        )
    }

    /// The link a user must open when the server needs a sign-in.
    pub(crate) fn sign_in_url(&self) -> Option<&Arc<str>> {
        match &self.inner.kind {
            Failure::SignIn(url) => Some(url),
            _ => None,
        }
    }

    /// The kind of the error as a short fixed name (`rpc`, `connect (refused)`, `no answer`):
    /// what `Debug` and a request span's `error.type` show. Never server text.
    pub(crate) fn kind_name(&self) -> &'static str {
        match &self.inner.kind {
            Failure::Builder => "builder",
            Failure::Connect { why, .. } => match why {
                Connect::Refused => "connect (refused)",
                Connect::Dns => "connect (dns)",
                Connect::Tls => "connect (tls)",
                Connect::Timeout => "connect (timeout)",
                Connect::Other => "connect",
            },
            Failure::Send => "send",
            Failure::Status { .. } => "status",
            Failure::Redirect { .. } => "redirect",
            Failure::SessionExpired => "session expired",
            Failure::SessionExpiredByText => "session expired (400)",
            Failure::SessionLost { .. } => "session lost",
            Failure::ExpiredAgain => "session expired again",
            Failure::Rpc(_) => "rpc",
            Failure::Malformed(_) => "malformed",
            Failure::Protocol(_) => "protocol",
            Failure::NotMcpType(_) => "not an MCP content type",
            Failure::Stream(_) => "stream",
            Failure::Broken(_) => "stream (broken)",
            Failure::NoMutualVersion(_) => "no mutual version",
            Failure::InputRequired(_) => "input required",
            Failure::Body => "body",
            Failure::NoAnswer { .. } => "no answer",
            Failure::Reinitialize(_) => "reinitialize",
            Failure::Closed => "closed",
            Failure::SignIn(_) => "sign-in required",
            Failure::Auth { .. } => "sign-in failed",
        }
    }
}

/// Finds why a connect failed by walking the source chain for the I/O error underneath;
/// `timed_out` and `dns` are what `reqwest` says of it ([`reqwest::Error::is_timeout`],
/// [`reqwest::Error::is_dns`]: its resolver's error is in the chain). A failed name lookup
/// is [`Connect::Dns`] unless an I/O error underneath says more.
fn classify_connect(
    error: &(dyn std::error::Error + 'static),
    timed_out: bool,
    dns: bool,
) -> Connect {
    if timed_out {
        return Connect::Timeout;
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return Connect::Refused,
                std::io::ErrorKind::TimedOut => return Connect::Timeout,
                // tokio-rustls reports every TLS failure (a bad record, a bad certificate) as
                // InvalidData wrapping the rustls error.
                std::io::ErrorKind::InvalidData => return Connect::Tls,
                _ => {}
            }
        }
        // An io::Error's source() skips the error it wraps; get_ref() is that error.
        cause = match current.downcast_ref::<std::io::Error>() {
            Some(io) => match io.get_ref() {
                Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                None => current.source(),
            },
            None => current.source(),
        };
    }
    if dns { Connect::Dns } else { Connect::Other }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner.kind {
            Failure::Builder => f.write_str("the HTTP client could not be built"),
            Failure::Connect { why, origin } => {
                let at = origin.as_deref();
                match (why, at) {
                    (Connect::Refused, Some(o)) => {
                        write!(f, "connection refused by {o} (no server is listening there)")
                    }
                    (Connect::Refused, None) => f.write_str(
                        "connection refused (no server is listening at the configured URL)",
                    ),
                    (Connect::Dns, Some(o)) => {
                        write!(f, "the host name of {o} could not be resolved (DNS failure)")
                    }
                    (Connect::Dns, None) => f.write_str(
                        "the host name of the configured URL could not be resolved (DNS failure)",
                    ),
                    (Connect::Tls, Some(o)) => write!(
                        f,
                        "the TLS handshake with {o} failed (is it an https URL for a plain-HTTP port?)"
                    ),
                    (Connect::Tls, None) => f.write_str(
                        "the TLS handshake with the server failed (is it an https URL for a plain-HTTP port?)",
                    ),
                    (Connect::Timeout, Some(o)) => write!(
                        f,
                        "connecting to {o} timed out after {} seconds",
                        limits::CONNECT_TIMEOUT.as_secs()
                    ),
                    (Connect::Timeout, None) => write!(
                        f,
                        "connecting to the server timed out after {} seconds",
                        limits::CONNECT_TIMEOUT.as_secs()
                    ),
                    (Connect::Other, Some(o)) => write!(f, "could not connect to {o}"),
                    (Connect::Other, None) => f.write_str("could not connect to the server"),
                }
            }
            Failure::Send => f.write_str("the connection closed before the server answered"),
            Failure::Status {
                status,
                preview,
                hint,
                ..
            } => {
                let reason = status.canonical_reason().unwrap_or("");
                write!(f, "HTTP {} {reason}", status.as_u16())?;
                match preview {
                    Body::Quoted(text) if text.is_empty() => {}
                    Body::Quoted(text) => write!(f, ": {text}")?,
                    Body::Withheld(media) => write!(f, " (a body of type {media}, not shown)")?,
                }
                match hint {
                    Some(hint) => write!(f, "; {hint}"),
                    None => Ok(()),
                }
            }
            Failure::Redirect {
                status,
                location,
                query_omitted,
            } => {
                let status = status.as_u16();
                match location.as_deref().filter(|l| !l.is_empty()) {
                    Some(location) => write!(
                        f,
                        "the server answered with a redirect (HTTP {status}) to \"{location}\"{}, which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\"",
                        if *query_omitted {
                            " (query omitted)"
                        } else {
                            ""
                        }
                    ),
                    None => write!(
                        f,
                        "the server answered with a redirect (HTTP {status}), which this client refuses to follow so that the configured headers reach no other server"
                    ),
                }
            }
            Failure::SessionExpired | Failure::SessionExpiredByText => {
                f.write_str("the server no longer knows this session")
            }
            Failure::SessionLost { id, .. } => write!(
                f,
                "the server forgot the session while request {id} was running (it refused to resume the event stream, GET with Last-Event-ID, for an unknown session); the request may have run, so it was not sent again"
            ),
            Failure::ExpiredAgain => {
                f.write_str("the server rejected the session again right after a new initialize")
            }
            Failure::Rpc(e) => write!(
                f,
                "the server answered with error {}: {}",
                e.code, e.message
            ),
            Failure::Malformed(text) | Failure::Protocol(text) | Failure::NotMcpType(text) => {
                f.write_str(text)
            }
            Failure::Stream(text) => match &self.inner.source {
                Some(cause) => write!(f, "{text}: {cause}"),
                None => f.write_str(text),
            },
            Failure::Broken(text) => f.write_str(text),
            Failure::NoMutualVersion(theirs) => {
                let theirs = if theirs.is_empty() {
                    "none that it named".to_string()
                } else {
                    theirs.join(", ")
                };
                write!(
                    f,
                    "the server and this client share no MCP protocol version: the server supports {theirs}; this client supports {}",
                    crate::protocol::versions_offered()
                )
            }
            Failure::InputRequired(asked) => write!(
                f,
                "the server asked for more input before it would answer ({asked}), which this client cannot provide: it declares no client capabilities"
            ),
            Failure::Body => {
                f.write_str("the connection was cut while the server's reply was being read")
            }
            Failure::NoAnswer { what, within } => write!(
                f,
                "the server did not answer {what} within {} seconds",
                within.as_secs()
            ),
            Failure::Reinitialize(cause) => write!(
                f,
                "the server forgot the session and initializing again failed: {cause}"
            ),
            Failure::Closed => f.write_str("the connection to the server was shut down"),
            Failure::SignIn(url) => write!(
                f,
                "{SIGN_IN_REQUIRED}: open {url} in a browser and sign in; the server starts once the sign-in completes"
            ),
            Failure::Auth { text, .. } => write!(f, "signing in failed: {text}"),
        }
    }
}

/// Names the kind (and a status or JSON-RPC code) only: never a URL, a header or a body.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("Error");
        out.field("kind", &self.kind_name());
        if let Some(status) = self.status() {
            out.field("status", &status.as_u16());
        }
        if let Some(rpc) = self.rpc() {
            out.field("code", &rpc.code);
        }
        out.finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        if let Failure::Reinitialize(cause) = &self.inner.kind {
            return Some(&**cause);
        }
        self.inner
            .source
            .as_ref()
            .map(|e| &**e as &(dyn std::error::Error + 'static))
    }
}

/// Predicates that only the tests ask; the crate decides on the kinds in the `impl` above.
#[cfg(test)]
impl Error {
    /// Whether the server refused the request with an HTTP error status (not a redirect).
    pub(crate) fn is_status(&self) -> bool {
        matches!(self.inner.kind, Failure::Status { .. })
    }

    /// Whether connecting timed out.
    pub(crate) fn is_timeout(&self) -> bool {
        matches!(
            self.inner.kind,
            Failure::Connect {
                why: Connect::Timeout,
                ..
            }
        )
    }

    /// Whether no connection could be made (refused, DNS, TLS, timeout): nothing was sent.
    pub(crate) fn is_connect(&self) -> bool {
        matches!(self.inner.kind, Failure::Connect { .. })
    }

    /// Whether the server answered with a redirect.
    pub(crate) fn is_redirect(&self) -> bool {
        matches!(self.inner.kind, Failure::Redirect { .. })
    }

    /// Where a redirect pointed: its `Location` scrubbed, without query or fragment, bounded.
    pub(crate) fn redirect_location(&self) -> Option<&str> {
        match &self.inner.kind {
            Failure::Redirect { location, .. } => location.as_deref(),
            _ => None,
        }
    }

    /// Whether a JSON-RPC error answered the request.
    pub(crate) fn is_rpc(&self) -> bool {
        self.rpc().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_one_pointer_and_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Error>();
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
    }

    #[derive(Debug)]
    struct Wrapper(&'static str, Option<BoxError>);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_ref().map(|e| &**e as _)
        }
    }

    fn chain(outer: &'static str, middle: &'static str, io: Option<std::io::Error>) -> Wrapper {
        Wrapper(
            outer,
            Some(Box::new(Wrapper(
                middle,
                io.map(|e| Box::new(e) as BoxError),
            ))),
        )
    }

    #[test]
    fn connect_failures_are_classified_by_their_cause() {
        use std::io::{Error as Io, ErrorKind};
        let refused = chain(
            "client error (Connect)",
            "tcp connect error",
            Some(Io::from(ErrorKind::ConnectionRefused)),
        );
        assert_eq!(classify_connect(&refused, false, false), Connect::Refused);
        let dns = chain(
            "client error (Connect)",
            "dns error",
            Some(Io::other("failed to lookup address information")),
        );
        assert_eq!(classify_connect(&dns, false, true), Connect::Dns);
        // The text of hyper-util's connect error decides nothing: without reqwest's DNS
        // error in the chain it is an unnamed failure.
        assert_eq!(classify_connect(&dns, false, false), Connect::Other);
        let tls = chain(
            "client error (Connect)",
            "tls",
            Some(Io::new(ErrorKind::InvalidData, "corrupt message")),
        );
        assert_eq!(classify_connect(&tls, false, false), Connect::Tls);
        // As tokio-rustls reports it: an io::Error wrapping an io::Error of kind InvalidData.
        let nested = chain(
            "client error (Connect)",
            "connect",
            Some(Io::other(Io::new(
                ErrorKind::InvalidData,
                "corrupt message",
            ))),
        );
        assert_eq!(classify_connect(&nested, false, false), Connect::Tls);
        assert_eq!(classify_connect(&refused, true, false), Connect::Timeout);
        let other = chain("client error (Connect)", "tcp connect error", None);
        assert_eq!(classify_connect(&other, false, false), Connect::Other);
    }

    /// A refused connect to a URL holding a key: neither the sentence, nor `Debug`, nor any
    /// error of the source chain shows the URL.
    #[tokio::test]
    async fn a_refused_connect_shows_no_url() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let failed = reqwest::Client::builder()
            .tls_certs_only(std::iter::empty())
            .build()
            .unwrap()
            .get(format!("http://127.0.0.1:{port}/mcp?key=sekret-value-1"))
            .send()
            .await
            .unwrap_err();
        let error = Error::from_reqwest(failed, None);
        assert_eq!(
            error.to_string(),
            "connection refused (no server is listening at the configured URL)"
        );
        assert_eq!(
            format!("{error:?}"),
            r#"Error { kind: "connect (refused)" }"#
        );
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(current) = cause {
            let shown = format!("{current} {current:?}");
            assert!(
                !shown.contains("sekret") && !shown.contains("/mcp"),
                "{shown}"
            );
            cause = current.source();
        }
    }

    #[test]
    fn connect_sentences_name_the_origin_only_when_given() {
        // (why, whether the origin is given, the sentence)
        for (why, named, sentence) in [
            (
                Connect::Dns,
                true,
                "the host name of https://a.example:443 could not be resolved (DNS failure)",
            ),
            (
                Connect::Dns,
                false,
                "the host name of the configured URL could not be resolved (DNS failure)",
            ),
            (
                Connect::Refused,
                false,
                "connection refused (no server is listening at the configured URL)",
            ),
            (
                Connect::Timeout,
                true,
                "connecting to https://a.example:443 timed out after 30 seconds",
            ),
            (
                Connect::Tls,
                false,
                "the TLS handshake with the server failed (is it an https URL for a plain-HTTP port?)",
            ),
            (
                Connect::Other,
                true,
                "could not connect to https://a.example:443",
            ),
        ] {
            let origin = named.then(|| "https://a.example:443".into());
            let error = Error::new(Failure::Connect { why, origin }, None);
            assert_eq!(error.to_string(), sentence);
        }
    }

    #[test]
    fn redirect_sentences_name_the_target_and_what_to_do() {
        let target = Some("http://127.0.0.1:8000/mcp/".to_string());
        assert_eq!(
            Error::redirect(StatusCode::TEMPORARY_REDIRECT, target.clone(), false).to_string(),
            "the server answered with a redirect (HTTP 307) to \"http://127.0.0.1:8000/mcp/\", which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\""
        );
        assert_eq!(
            Error::redirect(StatusCode::PERMANENT_REDIRECT, target, true).to_string(),
            "the server answered with a redirect (HTTP 308) to \"http://127.0.0.1:8000/mcp/\" (query omitted), which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\""
        );
        for none in [None, Some(String::new())] {
            assert_eq!(
                Error::redirect(StatusCode::FOUND, none, false).to_string(),
                "the server answered with a redirect (HTTP 302), which this client refuses to follow so that the configured headers reach no other server"
            );
        }
    }

    #[test]
    fn auth_hints_go_on_401_and_403_only() {
        let hint = Some("the environment variable \"K\" used in header \"X\" is set but empty");
        let status = |code: u16, preview: &str| {
            Error::http_status(
                StatusCode::from_u16(code).unwrap(),
                None,
                preview.to_string(),
            )
        };
        for (code, preview, given, sentence) in [
            (
                401,
                "",
                hint,
                "HTTP 401 Unauthorized; the environment variable \"K\" used in header \"X\" is set but empty",
            ),
            (
                403,
                "no",
                hint,
                "HTTP 403 Forbidden: no; the environment variable \"K\" used in header \"X\" is set but empty",
            ),
            (404, "", hint, "HTTP 404 Not Found"),
            (401, "", None, "HTTP 401 Unauthorized"),
        ] {
            let error = status(code, preview).with_auth_hint(given);
            assert_eq!(error.to_string(), sentence);
        }
        assert_eq!(
            Error::session_expired().with_auth_hint(hint).to_string(),
            "the server no longer knows this session"
        );
    }

    #[test]
    fn display_debug_and_predicates() {
        let rpc = Error::rpc_error(RpcError::new(-32602, "bad"));
        assert_eq!(
            rpc.to_string(),
            "the server answered with error -32602: bad"
        );
        assert!(rpc.is_rpc() && !rpc.may_be_running());
        assert_eq!(format!("{rpc:?}"), r#"Error { kind: "rpc", code: -32602 }"#);

        let status = Error::http_status(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(Duration::from_secs(3)),
            "secret-free preview".to_string(),
        );
        assert_eq!(
            status.to_string(),
            "HTTP 503 Service Unavailable: secret-free preview"
        );
        assert_eq!(
            format!("{status:?}"),
            r#"Error { kind: "status", status: 503 }"#
        );
        assert!(status.is_status() && !status.may_be_running());
        assert_eq!(status.retry_after(), Some(Duration::from_secs(3)));

        let redirect = Error::redirect(
            StatusCode::TEMPORARY_REDIRECT,
            Some("http://127.0.0.1:8000/mcp/".into()),
            false,
        );
        assert!(redirect.is_redirect() && !redirect.is_status());
        assert_eq!(
            redirect.redirect_location(),
            Some("http://127.0.0.1:8000/mcp/")
        );
        assert_eq!(
            format!("{redirect:?}"),
            r#"Error { kind: "redirect", status: 307 }"#
        );

        let inner = Arc::new(Error::http_status(
            StatusCode::NOT_FOUND,
            None,
            String::new(),
        ));
        let reinit = Error::reinitialize(inner);
        assert_eq!(
            reinit.to_string(),
            "the server forgot the session and initializing again failed: HTTP 404 Not Found"
        );
        assert_eq!(
            std::error::Error::source(&reinit).map(ToString::to_string),
            Some("HTTP 404 Not Found".to_string())
        );
        assert_eq!(reinit.retry_after(), None);
        let throttled = Error::reinitialize(Arc::new(Error::http_status(
            StatusCode::TOO_MANY_REQUESTS,
            Some(Duration::from_secs(8)),
            String::new(),
        )));
        assert_eq!(throttled.retry_after(), Some(Duration::from_secs(8)));

        let broken = Error::stream(
            "the server closed the event stream before the response to request 3",
            None,
        );
        assert!(broken.may_be_running());
        assert!(Error::body().may_be_running());
        assert!(!Error::malformed("x".into()).may_be_running());
        assert!(Error::malformed("x".into()).is_malformed());
        let timeout = Error::new(
            Failure::Connect {
                why: Connect::Timeout,
                origin: None,
            },
            None,
        );
        assert!(timeout.is_timeout() && timeout.is_connect() && !timeout.is_refused());
        assert!(!timeout.may_be_running());
        assert!(Error::session_expired().is_session_expired());
        let lost = Error::session_lost(3, &Error::session_expired());
        assert!(lost.is_session_expired() && !lost.may_be_running());
        assert!(!lost.is_expired_by_text());
        let by_words = Error::session_lost(3, &Error::session_expired_by_text());
        assert!(by_words.is_session_expired() && by_words.is_expired_by_text());
        assert_eq!(
            lost.to_string(),
            "the server forgot the session while request 3 was running (it refused to resume the event stream, GET with Last-Event-ID, for an unknown session); the request may have run, so it was not sent again"
        );
        assert_eq!(format!("{lost:?}"), r#"Error { kind: "session lost" }"#);
        assert!(Error::closed().is_closed());
        assert!(!Error::protocol("x").may_be_running());
    }
}
