//! The loopback redirect listener (RFC 8252 §7.3; OAuth 2.1 §8.4.2).
//!
//! Owns `http://127.0.0.1:<port>/callback`: bound only while a sign-in waits (on
//! `oauth.callbackPort` when configured, else on a port the system picks), it accepts one
//! request carrying the expected `state` and a `code` (or an `error`), and closes. The browser
//! that brought a code is answered once the sign-in's outcome is known ([`Browser::answer`]):
//! a short HTML page saying "Signed in" or "Sign-in failed" with the reason, escaped.
//!
//! Every parameter of a redirect is checked as received ([`Awaited`]): none may come twice
//! (RFC 6749 §3.1), an empty one counts as omitted (RFC 6749 §3.1), `state` must be the
//! authorization request's, `iss` the authorization server's issuer (RFC 9207 §2.4; required when
//! its metadata promises it), and the redirect must carry exactly one of a `code` and an `error`
//! (RFC 6749 §4.1.2, §4.1.2.1). A redirect that fails any check gets a `400` page and the
//! listener keeps waiting: a stray, forged or mixed-up redirect (an error or a code of another
//! authorization server) does not end the sign-in, spends no code and no PKCE verifier, and is
//! never reported as the authorization server's answer. After [`crate::limits::SIGN_IN_WAIT`]
//! without a code it closes; the sign-in needs a new link.
//!
//! The same wait also takes the redirect's address pasted by hand ([`Pasted`]: sign-in from
//! another machine, README "Signing in"), checked exactly as the request would be: the
//! listener's own address and path, then the redirect's parameters. A pasted address that is
//! not the awaited redirect is refused to its sender and the wait goes on; the first accepted
//! one ends the wait, so an address is used once.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use secrecy::{ExposeSecret, SecretString};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use super::client::oauth_code;
use super::flow::Redirect;
use super::{Error, ErrorKind};

/// The largest request head the listener reads, in bytes; a longer one is refused (`431`).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// How long one browser connection may take to send its request head.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The most connections the listener serves at once; a new one beyond that closes the oldest.
const MAX_CONNECTIONS: usize = 16;

const SIGNED_IN: &str = "<!doctype html><meta charset=utf-8><title>Signed in</title>\
<p>Signed in. You can close this tab and go back to your assistant.</p>";
const FINISHING: &str = "<!doctype html><meta charset=utf-8><title>Code received</title>\
<p>Code received; finishing sign-in. Your assistant shows whether it worked.</p>";
const FAILED: &str = "<!doctype html><meta charset=utf-8><title>Sign-in failed</title>\
<p>The sign-in did not complete. Ask your assistant for a new sign-in link.</p>";
const WRONG_STATE: &str = "<!doctype html><meta charset=utf-8><title>Not this sign-in</title>\
<p>This answer does not belong to the sign-in that is waiting. Use the latest sign-in link.</p>";
const WRONG_ISSUER: &str = "<!doctype html><meta charset=utf-8><title>Not this authorization \
server</title><p>This answer does not name the authorization server the sign-in waits for. Use \
the latest sign-in link.</p>";
const MALFORMED: &str = "<!doctype html><meta charset=utf-8><title>Not a sign-in answer</title>\
<p>This answer does not carry exactly one code or one error, each parameter once. Use the \
latest sign-in link.</p>";
const WRONG_HOST: &str = "<!doctype html><meta charset=utf-8><title>Wrong host</title>\
<p>The sign-in redirect listener answers only requests to its own loopback address.</p>";
const NOT_FOUND: &str =
    "<!doctype html><meta charset=utf-8><title>Not found</title><p>Not found.</p>";

/// What the awaited redirect must carry besides its code or error: the authorization request's
/// `state` (RFC 6749 §4.1.2) and the authorization server's issuer (RFC 9207 §2.4). Its `Debug`
/// shows no state.
pub(crate) struct Awaited {
    /// The `state` of the authorization request, compared in constant time.
    pub(crate) state: SecretString,
    /// The issuer identifier the authorization server's metadata names, compared with `iss` as
    /// text (RFC 9207 §2.4: no normalization); `None` when no metadata names one (the
    /// 2025-03-26 default endpoints).
    pub(crate) issuer: Option<String>,
    /// The metadata promises `iss` (`authorization_response_iss_parameter_supported`, RFC 9207
    /// §3): a redirect without one is refused.
    pub(crate) iss_required: bool,
}

impl std::fmt::Debug for Awaited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Awaited")
            .field("issuer", &self.issuer)
            .field("iss_required", &self.iss_required)
            .finish_non_exhaustive()
    }
}

/// The browser connection that brought the code, waiting for the sign-in's outcome: the page
/// to answer its request with goes to `page`, and `connection` (the HTTP connection, its
/// request waiting for that page) is then driven until the page is written and it closes.
/// `None` when the code came pasted: no browser waits for a page.
pub(crate) struct Browser {
    waiting: Option<(oneshot::Sender<Response<String>>, ServedConnection)>,
}

/// The HTTP connection of the request that brought the code, driven until it closes.
type ServedConnection = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The redirect's address pasted by hand, for the waiting sign-in; `reply` hears whether it was
/// taken (`Ok`) or why not (the reason names no part of the address).
pub(crate) struct Pasted {
    pub(crate) address: SecretString,
    pub(crate) reply: oneshot::Sender<Result<(), Error>>,
}

/// Only the type: the address carries the code.
impl std::fmt::Debug for Pasted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pasted")
    }
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Browser")
    }
}

/// What the browser is told.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome<'a> {
    /// The grant is held.
    SignedIn,
    /// The sign-in failed; the reason (already free of secrets) is escaped and cut.
    Failed(&'a str),
    /// The outcome took too long to wait for.
    Finishing,
}

impl Browser {
    /// Answers the browser with the page for `outcome` and closes the connection.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it closes the connection unanswered.
    pub(crate) async fn answer(self, outcome: Outcome<'_>) {
        let body = match outcome {
            Outcome::SignedIn => SIGNED_IN.to_string(),
            Outcome::Finishing => FINISHING.to_string(),
            Outcome::Failed(reason) => failed_page(reason),
        };
        if let Some((page_sender, connection)) = self.waiting {
            // The request is waiting for it: the receiver lives as long as the connection.
            let _ = page_sender.send(page(StatusCode::OK, body));
            connection.await;
        }
    }
}

/// The page of a failed sign-in: the reason HTML-escaped, cut to
/// [`crate::limits::MAX_REASON_BYTES`] first.
fn failed_page(reason: &str) -> String {
    let reason = crate::limits::truncate(reason, crate::limits::MAX_REASON_BYTES);
    let mut escaped = String::with_capacity(reason.len());
    for c in reason.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c if c.is_control() => escaped.push(' '),
            c => escaped.push(c),
        }
    }
    format!(
        "<!doctype html><meta charset=utf-8><title>Sign-in failed</title>\
<p>Sign-in failed: {escaped}</p><p>Ask your assistant for a new sign-in link.</p>"
    )
}

/// A bound listener waiting for one redirect.
#[derive(Debug)]
pub(crate) struct Listener {
    listener: TcpListener,
    port: u16,
}

impl Listener {
    /// Binds `127.0.0.1:<port>` (`None`: a port the system picks).
    ///
    /// # Errors
    /// [`ErrorKind::Callback`] when the port is taken or cannot be bound, naming the port.
    pub(crate) async fn bind(port: Option<u16>) -> Result<Listener, Error> {
        let listener = TcpListener::bind(("127.0.0.1", port.unwrap_or(0)))
            .await
            .map_err(|e| {
                Error::new(
                    ErrorKind::Callback,
                    format!(
                        "the sign-in redirect listener could not bind 127.0.0.1:{}: {}",
                        port.unwrap_or(0),
                        e.kind()
                    ),
                )
            })?;
        let port = listener
            .local_addr()
            .map_err(|e| {
                Error::new(
                    ErrorKind::Callback,
                    format!("the sign-in redirect listener has no address: {}", e.kind()),
                )
            })?
            .port();
        Ok(Listener { listener, port })
    }

    #[cfg(test)]
    /// The port bound.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// The redirect URI to register and send: `http://127.0.0.1:<port>/callback`.
    pub(crate) fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    /// Waits up to `limit` for the redirect `awaited` describes, then closes. A redirect with a
    /// code comes with the [`Browser`] to answer once the code is exchanged. Addresses pasted
    /// on `pasted` are checked like requests (see the module docs); each hears its verdict.
    ///
    /// Connections are served side by side (each given [`REQUEST_TIMEOUT`] to send its request
    /// head; at most [`MAX_CONNECTIONS`] at once, a new one closing the oldest), so idle
    /// connections — a browser's preconnects, or another local process — do not hold up the
    /// redirect. A request whose `Host` is not `127.0.0.1:<port>` is refused with a `400`
    /// and the wait goes on: a page of another origin that reaches the listener through DNS
    /// rebinding cannot end the sign-in.
    ///
    /// # Errors
    /// [`ErrorKind::Callback`] when the time runs out, or when the awaited redirect carries an OAuth
    /// `error` (its code quoted, bounded).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future closes the listener and every connection it serves; no
    /// code has been taken (a paste still unread stays in `pasted`; its sender hears nothing).
    pub(crate) async fn wait(
        self,
        awaited: Awaited,
        limit: Duration,
        pasted: &mut mpsc::Receiver<Pasted>,
    ) -> Result<(Redirect, Browser), Error> {
        let deadline = tokio::time::Instant::now() + limit;
        let awaited = std::sync::Arc::new(awaited);
        let host = format!("127.0.0.1:{}", self.port);
        let expected = std::sync::Arc::<str>::from(host);
        // Dropped with the future: aborts the connections still being served.
        let mut serving = tokio::task::JoinSet::new();
        // The connections being served, oldest first.
        let mut open: std::collections::VecDeque<tokio::task::AbortHandle> =
            std::collections::VecDeque::new();
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let Ok((stream, _)) = accepted else {
                        continue;
                    };
                    open.retain(|task| !task.is_finished());
                    if open.len() >= MAX_CONNECTIONS {
                        // The oldest gives way: a browser sends its request as soon as it
                        // connects, so connections left idle cannot keep its redirect out.
                        if let Some(oldest) = open.pop_front() {
                            oldest.abort();
                        }
                    }
                    open.push_back(serving.spawn(serve(
                        stream,
                        std::sync::Arc::clone(&awaited),
                        std::sync::Arc::clone(&expected),
                    )));
                }
                Some(served) = serving.join_next() => {
                    if let Ok(Some(result)) = served {
                        return result;
                    }
                }
                Some(paste) = pasted.recv() => {
                    let decided = decide_pasted(paste.address.expose_secret(), &awaited, self.port);
                    match decided {
                        Decided::Refused(_, _) => {
                            tracing::warn!("a pasted sign-in address was refused");
                            let _ = paste.reply.send(Err(Error::new(
                                ErrorKind::Callback,
                                format!(
                                    "that is not the address this sign-in waits for: paste the whole \
                                     address the browser ended on after the latest sign-in link \
                                     (it begins http://127.0.0.1:{}/callback?)",
                                    self.port
                                ),
                            )));
                        }
                        Decided::Failed(error) => {
                            let _ = paste.reply.send(Err(error.clone()));
                            return Err(error);
                        }
                        Decided::Code(redirect) => {
                            let _ = paste.reply.send(Ok(()));
                            return Ok((redirect, Browser { waiting: None }));
                        }
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    let secs = limit.as_secs();
                    let within = if secs >= 60 && secs.is_multiple_of(60) {
                        format!("{} minutes", secs / 60)
                    } else {
                        format!("{secs} seconds")
                    };
                    return Err(Error::new(
                        ErrorKind::Callback,
                        format!("no sign-in arrived within {within}; ask for a new sign-in link"),
                    ));
                }
            }
        }
    }
}

/// The authorization response the awaited redirect carried (RFC 6749 §4.1.2: a code, or
/// §4.1.2.1: an error), for the connection that carried it.
enum AuthorizationResponse {
    /// The awaited redirect carried an OAuth `error`: the sign-in ends with this error (the
    /// browser is answered [`FAILED`]).
    Failed(Error),
    /// The awaited redirect carried a code; the request waits for the page
    /// sent on the channel.
    Code(Redirect, oneshot::Sender<Response<String>>),
}

/// Serves one connection (HTTP/1.1, RFC 9112, one request, then closed); `Some` when it ended
/// the sign-in. `host` is the one `Host` header value accepted (`127.0.0.1:<port>`, compared
/// ignoring ASCII case).
///
/// The request head must arrive within [`REQUEST_TIMEOUT`] and fit in [`MAX_REQUEST_BYTES`].
/// A head HTTP/1.1 does not allow — among others a field name with whitespace before its
/// colon, or a folded line (one starting with a space or tab), either of which could smuggle
/// a `Host` (RFC 9112 §5.1, §5.2) — is refused by the HTTP parser with a `400`.
async fn serve(
    stream: TcpStream,
    awaited: std::sync::Arc<Awaited>,
    host: std::sync::Arc<str>,
) -> Option<Result<(Redirect, Browser), Error>> {
    let (response_tx, mut response_rx) = mpsc::unbounded_channel();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let decided = decide(&request, &awaited, &host);
        let response_tx = response_tx.clone();
        async move {
            let response = match decided {
                Decided::Refused(status, body) => page(status, body.to_string()),
                Decided::Failed(error) => {
                    let _ = response_tx.send(AuthorizationResponse::Failed(error));
                    page(StatusCode::OK, FAILED.to_string())
                }
                Decided::Code(redirect) => {
                    let (answer, page_sent) = oneshot::channel();
                    let _ = response_tx.send(AuthorizationResponse::Code(redirect, answer));
                    // The sender goes with the Browser, which owns this connection: when it is
                    // dropped unanswered, so is this request.
                    page_sent
                        .await
                        .unwrap_or_else(|_| page(StatusCode::OK, FINISHING.to_string()))
                }
            };
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let mut connection = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .auto_date_header(false)
        .max_buf_size(MAX_REQUEST_BYTES)
        .timer(TokioTimer::new())
        .header_read_timeout(REQUEST_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    let mut closed = false;
    let decided = tokio::select! {
        biased;
        Some(decided) = response_rx.recv() => decided,
        ended = &mut connection => {
            closed = true;
            if ended.is_err_and(|e| e.is_parse()) {
                tracing::warn!("a malformed request to the sign-in redirect listener was refused");
            }
            // The request may have been decided, answered and closed in one poll.
            response_rx.try_recv().ok()?
        }
    };
    match decided {
        AuthorizationResponse::Failed(error) => {
            if !closed {
                // The page is written, then the connection closes.
                let _ = connection.await;
            }
            Some(Err(error))
        }
        AuthorizationResponse::Code(redirect, page) => Some(Ok((
            redirect,
            Browser {
                waiting: Some((
                    page,
                    // Never closed here: the request waits for its page.
                    Box::pin(async move {
                        if !closed {
                            let _ = connection.await;
                        }
                    }),
                )),
            },
        ))),
    }
}

/// What the listener makes of one request.
enum Decided {
    /// Not the awaited redirect: answered with this status and page; the wait goes on.
    Refused(StatusCode, &'static str),
    /// The awaited redirect, with an OAuth `error`: answered with [`FAILED`].
    Failed(Error),
    /// The awaited redirect with its code.
    Code(Redirect),
}

/// Checks one request in order: its `Host`, its target (`GET /callback`), then its query
/// ([`decide_query`]).
fn decide(request: &Request<Incoming>, awaited: &Awaited, host: &str) -> Decided {
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let host_matches = match (hosts.next(), hosts.next()) {
        (Some(got), None) => got
            .to_str()
            .is_ok_and(|got| got.trim().eq_ignore_ascii_case(host)),
        _ => false,
    };
    if !host_matches {
        tracing::warn!("a request to the sign-in redirect listener for another host was refused");
        return Decided::Refused(StatusCode::BAD_REQUEST, WRONG_HOST);
    }
    // Only a GET in origin form (RFC 9112 §3.2.1) reaches the callback.
    let uri = request.uri();
    let origin_form = uri.scheme().is_none() && uri.authority().is_none();
    if request.method() != Method::GET || !origin_form || uri.path() != "/callback" {
        return Decided::Refused(StatusCode::NOT_FOUND, NOT_FOUND);
    }
    decide_query(uri.query().unwrap_or(""), awaited)
}

/// Checks a pasted address as [`decide`] checks a request: it must be the listener's own
/// redirect URI exactly as received (`http://127.0.0.1:<port>/callback`, byte for byte: no
/// other spelling of the host such as `127.1` or `0x7f.0.0.1`, no user info, no dot segments
/// or backslashes, no fragment), then its query as a request's. Surrounding whitespace is
/// ignored. Nothing is normalised first: a URL parser would rewrite the address before the
/// check (WHATWG host and path rules).
fn decide_pasted(address: &str, awaited: &Awaited, port: u16) -> Decided {
    let own = format!("http://127.0.0.1:{port}/callback");
    let query = match address.trim().strip_prefix(own.as_str()) {
        Some("") => "",
        Some(rest) => match rest.strip_prefix('?') {
            Some(query) => query,
            None => return Decided::Refused(StatusCode::BAD_REQUEST, WRONG_HOST),
        },
        None => return Decided::Refused(StatusCode::BAD_REQUEST, WRONG_HOST),
    };
    // A fragment, or a character a request line cannot carry (a browser would have encoded
    // it), is no redirect the listener could have received.
    if query
        .bytes()
        .any(|byte| byte == b'#' || byte.is_ascii_whitespace() || byte.is_ascii_control())
    {
        return Decided::Refused(StatusCode::BAD_REQUEST, WRONG_HOST);
    }
    decide_query(query, awaited)
}

/// The redirect's query, every parameter as received, in order (see the module docs):
/// 1. no parameter twice (RFC 6749 §3.1: a repeated `code`, `state` or `iss` is not taken
///    first-wins, since a check of one copy would pass the other);
/// 2. `state` is the authorization request's (compared in constant time);
/// 3. `iss` is the authorization server's issuer, as text, and present when its metadata
///    promises it (RFC 9207 §2.4), for an error as for a code;
/// 4. exactly one of `code` and `error` (RFC 6749 §4.1.2, §4.1.2.1).
///
/// An empty parameter counts as omitted (RFC 6749 §3.1): `code=` is no code, `iss=` no issuer.
fn decide_query(query: &str, awaited: &Awaited) -> Decided {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect();
    let repeated = pairs
        .iter()
        .enumerate()
        .any(|(at, (name, _))| pairs[..at].iter().any(|(earlier, _)| earlier == name));
    if repeated {
        tracing::warn!("a sign-in redirect repeating a parameter was refused (RFC 6749 §3.1)");
        return Decided::Refused(StatusCode::BAD_REQUEST, MALFORMED);
    }
    let param = |wanted: &str| {
        pairs
            .iter()
            .find(|(name, value)| name == wanted && !value.is_empty())
            .map(|(_, value)| value.as_str())
    };
    let state_matches = param("state")
        .is_some_and(|got| same(got.as_bytes(), awaited.state.expose_secret().as_bytes()));
    if !state_matches {
        tracing::warn!("a sign-in redirect with another state was refused");
        return Decided::Refused(StatusCode::BAD_REQUEST, WRONG_STATE);
    }
    let issuer_matches = match (param("iss"), &awaited.issuer) {
        (Some(iss), Some(issuer)) => iss == issuer,
        (Some(_), None) => true,
        (None, _) => !awaited.iss_required,
    };
    if !issuer_matches {
        tracing::warn!(
            "a sign-in redirect naming another issuer, or none where the authorization server \
             promises one, was refused (RFC 9207 §2.4)"
        );
        return Decided::Refused(StatusCode::BAD_REQUEST, WRONG_ISSUER);
    }
    match (param("code"), param("error")) {
        (Some(code), None) => Decided::Code(Redirect {
            code: SecretString::from(code.to_string()),
        }),
        (None, Some(error)) => Decided::Failed(Error::new(
            ErrorKind::Callback,
            format!(
                "the authorization server did not grant access ({})",
                oauth_code(error)
            ),
        )),
        _ => {
            tracing::warn!(
                "a sign-in redirect without exactly one of a code and an error was refused \
                 (RFC 6749 §4.1.2)"
            );
            Decided::Refused(StatusCode::BAD_REQUEST, MALFORMED)
        }
    }
}

/// Compares in constant time (no early exit at the first difference).
fn same(a: &[u8], b: &[u8]) -> bool {
    aws_lc_rs::constant_time::verify_slices_are_equal(a, b).is_ok()
}

/// A page answer: HTML, never cached, the connection closed after it.
fn page(status: StatusCode, body: String) -> Response<String> {
    let length = body.len();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CONTENT_LENGTH, http::HeaderValue::from(length));
    headers.insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    headers.insert(header::CONNECTION, http::HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(port: u16, target: &str) -> (u16, String) {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let response = client
            .get(format!("http://127.0.0.1:{port}{target}"))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    /// A bound listener's wait for `state`, `secs` seconds long, as a task.
    type Waiting = tokio::task::JoinHandle<Result<(Redirect, Browser), Error>>;

    fn wait_on(listener: Listener, state: &str, secs: u64) -> Waiting {
        wait_with_paste(listener, state, secs).0
    }

    /// As [`wait_on`], with the sender of its pasted addresses.
    fn wait_with_paste(
        listener: Listener,
        state: &str,
        secs: u64,
    ) -> (Waiting, mpsc::Sender<Pasted>) {
        let awaited = awaiting(state);
        let (paste, mut pasted) = mpsc::channel(1);
        let waiting = tokio::spawn(async move {
            listener
                .wait(awaited, Duration::from_secs(secs), &mut pasted)
                .await
        });
        (waiting, paste)
    }

    /// A redirect with `state` from the issuer `https://a`, whose metadata does not promise
    /// `iss`.
    fn awaiting(state: &str) -> Awaited {
        Awaited {
            state: SecretString::from(state),
            issuer: Some("https://a".to_string()),
            iss_required: false,
        }
    }

    /// Pastes `address` and returns the verdict's message (`None`: taken).
    async fn paste(to: &mpsc::Sender<Pasted>, address: &str) -> Option<String> {
        let (reply, verdict) = oneshot::channel();
        to.send(Pasted {
            address: SecretString::from(address),
            reply,
        })
        .await
        .unwrap();
        verdict
            .await
            .unwrap()
            .err()
            .map(|e| e.message().to_string())
    }

    #[tokio::test]
    async fn a_pasted_address_is_checked_like_the_redirect_and_taken_once() {
        let listener = Listener::bind(None).await.unwrap();
        let port = listener.port();
        let (waiting, to) = wait_with_paste(listener, "expected-state-123", 30);
        let refused = format!(
            "that is not the address this sign-in waits for: paste the whole address the browser \
             ended on after the latest sign-in link (it begins http://127.0.0.1:{port}/callback?)"
        );
        let wrong = [
            "not a url".to_string(),
            format!("http://127.0.0.1:{port}/callback?code=c&state=forged"),
            format!("http://127.0.0.1:{port}/callback?code=c"),
            format!(
                "http://127.0.0.1:{}/callback?code=c&state=expected-state-123",
                port ^ 1
            ),
            format!("https://127.0.0.1:{port}/callback?code=c&state=expected-state-123"),
            format!("http://localhost:{port}/callback?code=c&state=expected-state-123"),
            format!("http://u@127.0.0.1:{port}/callback?code=c&state=expected-state-123"),
            format!("http://127.0.0.1:{port}/other?code=c&state=expected-state-123"),
            format!("http://127.0.0.1:{port}/callback?code=c&state=expected-state-123#x"),
        ];
        for address in &wrong {
            assert_eq!(
                paste(&to, address).await.as_deref(),
                Some(&*refused),
                "{address}"
            );
        }
        // A wrong paste leaves the listener waiting for the browser too.
        assert_eq!(
            get(port, "/callback?code=evil&state=forged").await,
            (400, WRONG_STATE.to_string())
        );
        let address = format!(
            "  http://127.0.0.1:{port}/callback?code=the%20code&state=expected-state-123&iss=https%3A%2F%2Fa\n"
        );
        assert_eq!(paste(&to, &address).await, None);
        let (redirect, browser) = waiting.await.unwrap().unwrap();
        assert_eq!(redirect.code.expose_secret(), "the code");
        // No browser waits: answering it is a no-op.
        browser.answer(Outcome::SignedIn).await;
        // Taken once: the wait has ended, so nothing receives another paste.
        assert!(
            to.send(Pasted {
                address: SecretString::from(address),
                reply: oneshot::channel().0
            })
            .await
            .is_err()
        );
    }

    #[tokio::test]
    async fn a_pasted_error_ends_the_wait_with_it() {
        let listener = Listener::bind(None).await.unwrap();
        let port = listener.port();
        let (waiting, to) = wait_with_paste(listener, "expected-state-123", 30);
        let address = format!(
            "http://127.0.0.1:{port}/callback?error=access_denied&state=expected-state-123"
        );
        let reason = "the authorization server did not grant access (access_denied)";
        assert_eq!(paste(&to, &address).await.as_deref(), Some(reason));
        assert_eq!(waiting.await.unwrap().unwrap_err().message(), reason);
    }

    /// Binds a listener on a free port and starts its wait; returns the port and the wait.
    async fn listening(state: &str, secs: u64) -> (u16, Waiting) {
        let listener = Listener::bind(None).await.unwrap();
        let port = listener.port();
        (port, wait_on(listener, state, secs))
    }

    /// The browser's real redirect: its code is taken and the browser is told it signed in.
    async fn the_real_redirect_is_served(port: u16, waiting: Waiting) {
        let browser = tokio::spawn(get(port, "/callback?code=real&state=expected-state-123"));
        let (redirect, answer) = waiting.await.unwrap().unwrap();
        assert_eq!(redirect.code.expose_secret(), "real");
        answer.answer(Outcome::SignedIn).await;
        assert_eq!(browser.await.unwrap(), (200, SIGNED_IN.to_string()));
    }

    #[tokio::test]
    async fn one_code_with_the_right_state_wrong_states_refused() {
        let listener = Listener::bind(None).await.unwrap();
        let port = listener.port();
        assert_eq!(
            listener.redirect_uri(),
            format!("http://127.0.0.1:{port}/callback")
        );
        let waiting = wait_on(listener, "expected-state-123", 30);
        assert_eq!(get(port, "/other").await.0, 404);
        assert_eq!(
            get(port, "/callback?code=evil&state=forged").await,
            (400, WRONG_STATE.to_string())
        );
        assert_eq!(get(port, "/callback?code=evil").await.0, 400);
        let browser = tokio::spawn(get(
            port,
            "/callback?code=the%20code&state=expected-state-123&iss=https%3A%2F%2Fa",
        ));
        let (redirect, answer) = waiting.await.unwrap().unwrap();
        answer.answer(Outcome::SignedIn).await;
        assert_eq!(browser.await.unwrap(), (200, SIGNED_IN.to_string()));
        assert_eq!(redirect.code.expose_secret(), "the code");
        assert_eq!(format!("{redirect:?}"), "Redirect { code: \"[redacted]\" }");
        // Closed after the code: a second request cannot connect.
        let again = reqwest::get(format!("http://127.0.0.1:{port}/callback")).await;
        assert!(again.is_err());
    }

    #[tokio::test]
    async fn the_browser_hears_the_outcome_escaped_and_cut() {
        for (outcome, page) in [
            (Outcome::Finishing, FINISHING.to_string()),
            (
                Outcome::Failed("the token endpoint answered HTTP 404 <b>&\"'</b>\n"),
                "<!doctype html><meta charset=utf-8><title>Sign-in failed</title>\
<p>Sign-in failed: the token endpoint answered HTTP 404 &lt;b&gt;&amp;&quot;&#39;&lt;/b&gt; </p>\
<p>Ask your assistant for a new sign-in link.</p>"
                    .to_string(),
            ),
        ] {
            let (port, waiting) = listening("s-1234567", 30).await;
            let browser = tokio::spawn(get(port, "/callback?code=c&state=s-1234567"));
            let (_, answer) = waiting.await.unwrap().unwrap();
            answer.answer(outcome).await;
            assert_eq!(browser.await.unwrap(), (200, page));
        }
        let long = "x".repeat(10 * crate::limits::MAX_REASON_BYTES);
        let page = failed_page(&long);
        assert!(
            page.len() < 2 * crate::limits::MAX_REASON_BYTES,
            "{}",
            page.len()
        );
    }

    #[tokio::test]
    async fn an_error_ends_the_wait_and_time_runs_out() {
        let (port, waiting) = listening("s-1234567", 30).await;
        assert_eq!(
            get(port, "/callback?error=access_denied&state=s-1234567")
                .await
                .0,
            200
        );
        assert_eq!(
            waiting.await.unwrap().unwrap_err().message(),
            "the authorization server did not grant access (access_denied)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_listener_closes_after_ten_minutes() {
        let listener = Listener::bind(None).await.unwrap();
        let err = listener
            .wait(
                awaiting("s-1234567"),
                crate::limits::SIGN_IN_WAIT,
                &mut mpsc::channel(1).1,
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Callback);
        assert_eq!(
            err.message(),
            "no sign-in arrived within 10 minutes; ask for a new sign-in link"
        );
    }

    #[tokio::test]
    async fn a_taken_port_is_named() {
        let first = Listener::bind(None).await.unwrap();
        let err = Listener::bind(Some(first.port())).await.unwrap_err();
        assert_eq!(
            err.message(),
            format!(
                "the sign-in redirect listener could not bind 127.0.0.1:{}: address in use",
                first.port()
            )
        );
    }

    /// Sends a raw request head and reads the whole answer (empty when closed unanswered).
    async fn raw_answer(port: u16, head: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// Sends a raw request head and reads the status line's code.
    async fn raw(port: u16, head: &str) -> u16 {
        raw_answer(port, head)
            .await
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn a_redirect_for_another_host_is_refused_and_the_wait_goes_on() {
        let (port, waiting) = listening("expected-state-123", 30).await;
        let rebound = format!(
            "GET /callback?code=rebound&state=expected-state-123 HTTP/1.1\r\nHost: evil.example:{port}\r\n\r\n"
        );
        assert_eq!(raw(port, &rebound).await, 400);
        // No Host at all, two of them, and another port are refused the same way.
        let bare = "GET /callback?code=bare&state=expected-state-123 HTTP/1.0\r\n\r\n";
        assert_eq!(raw(port, bare).await, 400);
        let twice = format!(
            "GET /callback?code=twice&state=expected-state-123 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: evil.example\r\n\r\n"
        );
        assert_eq!(raw(port, &twice).await, 400);
        let other_port = format!(
            "GET /callback?code=port&state=expected-state-123 HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
            port.wrapping_add(1)
        );
        assert_eq!(raw(port, &other_port).await, 400);
        the_real_redirect_is_served(port, waiting).await;
    }

    #[tokio::test]
    async fn an_idle_connection_does_not_hold_up_the_redirect() {
        let (port, waiting) = listening("expected-state-123", 60).await;
        // Idle sockets that send nothing, as a browser's speculative preconnects do.
        let mut idle = Vec::new();
        for _ in 0..3 {
            idle.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
        }
        let browser = tokio::spawn(get(port, "/callback?code=real&state=expected-state-123"));
        let (redirect, answer) = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the redirect is served while idle connections are open")
            .unwrap()
            .unwrap();
        assert_eq!(redirect.code.expose_secret(), "real");
        answer.answer(Outcome::SignedIn).await;
        assert_eq!(browser.await.unwrap(), (200, SIGNED_IN.to_string()));
        drop(idle);
    }

    // What a review that attacked the listener found, one test each.

    #[tokio::test]
    async fn malformed_host_spellings_are_refused_and_the_wait_goes_on() {
        let (port, waiting) = listening("expected-state-123", 30).await;
        // The HTTP parser refuses both heads before any check of ours: not even the state is
        // looked at (it is the right one here).
        let refused = "HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        let spaced = format!(
            "GET /callback?code=c&state=expected-state-123 HTTP/1.1\r\nHost : 127.0.0.1:{port}\r\n\r\n"
        );
        let folded = format!(
            "GET /callback?code=c&state=expected-state-123 HTTP/1.1\r\nX-Note: a\r\n Host: 127.0.0.1:{port}\r\n\r\n"
        );
        let answers = [
            raw_answer(port, &spaced).await,
            raw_answer(port, &folded).await,
        ];
        assert_eq!(answers, [refused, refused]);
        the_real_redirect_is_served(port, waiting).await;
    }

    #[tokio::test]
    async fn a_head_longer_than_the_limit_is_refused() {
        let (port, waiting) = listening("expected-state-123", 30).await;
        let long = format!(
            "GET /callback?code=c&state=expected-state-123 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Pad: {}\r\n\r\n",
            "p".repeat(MAX_REQUEST_BYTES)
        );
        let answer = raw_answer(port, &long).await;
        assert!(!waiting.is_finished());
        waiting.abort();
        assert_eq!(
            answer.split("\r\n").next(),
            Some("HTTP/1.1 431 Request Header Fields Too Large")
        );
    }

    #[tokio::test]
    async fn our_pages_are_answered_with_exactly_these_fields() {
        let (port, waiting) = listening("expected-state-123", 30).await;
        let rebound = format!(
            "GET /callback?code=c&state=expected-state-123 HTTP/1.1\r\nHost: evil.example:{port}\r\n\r\n"
        );
        let answer = raw_answer(port, &rebound).await;
        waiting.abort();
        assert_eq!(
            answer,
            format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: text/html; charset=utf-8\r\n\
                 content-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{WRONG_HOST}",
                WRONG_HOST.len()
            )
        );
    }

    #[tokio::test]
    async fn sixteen_idle_connections_do_not_keep_the_redirect_out() {
        let (port, waiting) = listening("expected-state-123", 60).await;
        let mut idle = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            idle.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
        }
        // Let the listener accept them all.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let head = format!(
            "GET /callback?code=real&state=expected-state-123 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
        );
        let browser = tokio::spawn(async move { raw_answer(port, &head).await });
        let served = tokio::time::timeout(Duration::from_secs(5), waiting).await;
        let code = match served {
            Ok(Ok(Ok((redirect, answer)))) => {
                answer.answer(Outcome::SignedIn).await;
                redirect.code.expose_secret().to_string()
            }
            Ok(Ok(Err(e))) => format!("error: {}", e.message()),
            Ok(Err(_)) => "panicked".to_string(),
            Err(_) => "not served within 5 s".to_string(),
        };
        let page = browser.await.unwrap();
        drop(idle);
        assert_eq!(
            (code.as_str(), page.split("\r\n\r\n").nth(1)),
            ("real", Some(SIGNED_IN)),
        );
    }

    #[tokio::test]
    async fn a_redirect_written_a_byte_at_a_time_is_served() {
        let (port, waiting) = listening("expected-state-123", 30).await;
        let head = format!(
            "GET /callback?code=bytewise&state=expected-state-123 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
        );
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.set_nodelay(true).unwrap();
        for byte in head.as_bytes() {
            stream.write_all(&[*byte]).await.unwrap();
            stream.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let (redirect, answer) = waiting.await.unwrap().unwrap();
        assert_eq!(redirect.code.expose_secret(), "bytewise");
        answer.answer(Outcome::SignedIn).await;
        let mut page = String::new();
        stream.read_to_string(&mut page).await.unwrap();
        assert_eq!(page.split("\r\n\r\n").nth(1), Some(SIGNED_IN), "{page}");
    }
}
