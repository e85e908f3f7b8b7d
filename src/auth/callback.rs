//! The loopback redirect listener (RFC 8252 §7.3; OAuth 2.1 §8.4.2).
//!
//! Owns `http://127.0.0.1:<port>/callback`: bound only while a sign-in waits (on
//! `oauth.callbackPort` when configured, else on a port the system picks), it accepts one
//! request carrying the expected `state` and a `code` (or an `error`), and closes. The browser
//! that brought a code is answered once the sign-in's outcome is known ([`Browser::answer`]):
//! a short HTML page saying "Signed in" or "Sign-in failed" with the reason, escaped. A request with another or no `state` gets a `400` page and the
//! listener keeps waiting: a stray or forged request does not end the sign-in. After
//! [`crate::limits::SIGN_IN_WAIT`] without a code it closes; the sign-in needs a new link.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::client::oauth_code;
use super::flow::Redirect;
use super::{Error, Kind};

/// The largest request head the listener reads, in bytes.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// How long one browser connection may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

const SIGNED_IN: &str = "<!doctype html><meta charset=utf-8><title>Signed in</title>\
<p>Signed in. You can close this tab and go back to your assistant.</p>";
const FINISHING: &str = "<!doctype html><meta charset=utf-8><title>Code received</title>\
<p>Code received; finishing sign-in. Your assistant shows whether it worked.</p>";
const FAILED: &str = "<!doctype html><meta charset=utf-8><title>Sign-in failed</title>\
<p>The sign-in did not complete. Ask your assistant for a new sign-in link.</p>";
const WRONG_STATE: &str = "<!doctype html><meta charset=utf-8><title>Not this sign-in</title>\
<p>This answer does not belong to the sign-in that is waiting. Use the latest sign-in link.</p>";
const NOT_FOUND: &str =
    "<!doctype html><meta charset=utf-8><title>Not found</title><p>Not found.</p>";

/// The browser connection that brought the code, waiting for the sign-in's outcome.
pub(crate) struct Browser {
    stream: TcpStream,
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
    pub(crate) async fn answer(mut self, outcome: Outcome<'_>) {
        match outcome {
            Outcome::SignedIn => respond(&mut self.stream, "200 OK", SIGNED_IN).await,
            Outcome::Finishing => respond(&mut self.stream, "200 OK", FINISHING).await,
            Outcome::Failed(reason) => {
                respond(&mut self.stream, "200 OK", &failed_page(reason)).await;
            }
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
    /// [`Kind::Callback`] when the port is taken or cannot be bound, naming the port.
    pub(crate) async fn bind(port: Option<u16>) -> Result<Listener, Error> {
        let listener = TcpListener::bind(("127.0.0.1", port.unwrap_or(0)))
            .await
            .map_err(|e| {
                Error::new(
                    Kind::Callback,
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
                    Kind::Callback,
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

    /// Waits up to `limit` for the redirect carrying `state`, then closes. A redirect with a
    /// code comes with the [`Browser`] to answer once the code is exchanged.
    ///
    /// # Errors
    /// [`Kind::Callback`] when the time runs out, or when the redirect carries an OAuth `error`
    /// (its code quoted, bounded).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future closes the listener; no code has been taken.
    pub(crate) async fn wait(
        self,
        state: &SecretString,
        limit: Duration,
    ) -> Result<(Redirect, Browser), Error> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let accepted = tokio::time::timeout_at(deadline, self.listener.accept()).await;
            let Ok(accepted) = accepted else {
                let secs = limit.as_secs();
                let within = if secs >= 60 && secs % 60 == 0 {
                    format!("{} minutes", secs / 60)
                } else {
                    format!("{secs} seconds")
                };
                return Err(Error::new(
                    Kind::Callback,
                    format!("no sign-in arrived within {within}; ask for a new sign-in link"),
                ));
            };
            let Ok((stream, _)) = accepted else {
                continue;
            };
            if let Some(result) = serve(stream, state).await {
                return result;
            }
        }
    }
}

/// Answers one connection; `Some` when it ended the sign-in.
async fn serve(
    mut stream: TcpStream,
    state: &SecretString,
) -> Option<Result<(Redirect, Browser), Error>> {
    let head = match tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await {
        Ok(Some(head)) => head,
        _ => return None,
    };
    let target = head
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("GET "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or("");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != "/callback" {
        respond(&mut stream, "404 Not Found", NOT_FOUND).await;
        return None;
    }
    let mut code = None;
    let mut got_state = None;
    let mut iss = None;
    let mut error = None;
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let slot = match name.as_ref() {
            "code" => &mut code,
            "state" => &mut got_state,
            "iss" => &mut iss,
            "error" => &mut error,
            _ => continue,
        };
        slot.get_or_insert(value.into_owned());
    }
    let state_matches = got_state
        .as_deref()
        .is_some_and(|got| same(got.as_bytes(), state.expose_secret().as_bytes()));
    if !state_matches {
        tracing::warn!("a sign-in redirect with another state was refused");
        respond(&mut stream, "400 Bad Request", WRONG_STATE).await;
        return None;
    }
    if let Some(error) = error {
        respond(&mut stream, "200 OK", FAILED).await;
        return Some(Err(Error::new(
            Kind::Callback,
            format!(
                "the authorization server did not grant access ({})",
                oauth_code(&error)
            ),
        )));
    }
    let Some(code) = code else {
        respond(&mut stream, "400 Bad Request", FAILED).await;
        return Some(Err(Error::new(
            Kind::Callback,
            "the sign-in redirect carried no code",
        )));
    };
    Some(Ok((
        Redirect {
            code: SecretString::from(code),
            iss,
        },
        Browser { stream },
    )))
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads up to the end of the request head; `None` when the connection ends first or the head
/// is too long.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if buffer.windows(4).any(|w| w == b"\r\n\r\n") || buffer.windows(2).any(|w| w == b"\n\n") {
            return String::from_utf8(buffer).ok();
        }
        if buffer.len() > MAX_REQUEST_BYTES {
            return None;
        }
    }
}

async fn respond(stream: &mut TcpStream, status: &str, page: &str) {
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\
         cache-control: no-store\r\nconnection: close\r\n\r\n{page}",
        page.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[tokio::test]
    async fn one_code_with_the_right_state_wrong_states_refused() {
        let listener = Listener::bind(None).await.unwrap();
        let port = listener.port();
        assert_eq!(
            listener.redirect_uri(),
            format!("http://127.0.0.1:{port}/callback")
        );
        let state = SecretString::from("expected-state-123");
        let waiting =
            tokio::spawn(async move { listener.wait(&state, Duration::from_secs(30)).await });
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
        assert_eq!(redirect.iss.as_deref(), Some("https://a"));
        assert_eq!(
            format!("{redirect:?}"),
            "Redirect { code: \"[redacted]\", iss: Some(\"https://a\") }"
        );
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
            let listener = Listener::bind(None).await.unwrap();
            let port = listener.port();
            let state = SecretString::from("s-1234567");
            let waiting =
                tokio::spawn(async move { listener.wait(&state, Duration::from_secs(30)).await });
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
        let listener = Listener::bind(None).await.unwrap();
        let port = listener.port();
        let state = SecretString::from("s-1234567");
        let waiting =
            tokio::spawn(async move { listener.wait(&state, Duration::from_secs(30)).await });
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
        let state = SecretString::from("s-1234567");
        let err = listener
            .wait(&state, crate::limits::SIGN_IN_WAIT)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), Kind::Callback);
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

    /// Sends a raw request head and reads the status line's code.
    async fn raw(port: u16, head: &str) -> u16 {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    #[tokio::test]
    #[ignore = "known gap, not fixed yet: the listener accepts a redirect whose Host header is not the loopback address (DNS rebinding)"]
    async fn a_redirect_for_another_host_is_refused_and_the_wait_goes_on() {
        let listener = Listener::bind(None).await.unwrap();
        let port = listener.port();
        let state = SecretString::from("expected-state-123");
        let waiting =
            tokio::spawn(async move { listener.wait(&state, Duration::from_secs(30)).await });
        let rebound = format!(
            "GET /callback?code=rebound&state=expected-state-123 HTTP/1.1\r\nHost: evil.example:{port}\r\n\r\n"
        );
        assert_eq!(raw(port, &rebound).await, 400);
        let (status, _) = get(port, "/callback?code=real&state=expected-state-123").await;
        assert_eq!(status, 200);
        assert_eq!(
            waiting.await.unwrap().unwrap().0.code.expose_secret(),
            "real"
        );
    }

    #[tokio::test]
    #[ignore = "known gap, not fixed yet: one idle connection (a browser preconnect) blocks the listener for 10 s per connection"]
    async fn an_idle_connection_does_not_hold_up_the_redirect() {
        let listener = Listener::bind(None).await.unwrap();
        let port = listener.port();
        let state = SecretString::from("expected-state-123");
        let waiting =
            tokio::spawn(async move { listener.wait(&state, Duration::from_secs(60)).await });
        // Idle sockets that send nothing, as a browser's speculative preconnects do.
        let mut idle = Vec::new();
        for _ in 0..3 {
            idle.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
        }
        let real = tokio::time::timeout(
            Duration::from_secs(5),
            get(port, "/callback?code=real&state=expected-state-123"),
        )
        .await;
        assert_eq!(real.map(|(status, _)| status), Ok(200));
        assert_eq!(
            waiting.await.unwrap().unwrap().0.code.expose_secret(),
            "real"
        );
        drop(idle);
    }
}
