//! The HTTP client of a sign-in: every OAuth request goes through it.
//!
//! Owns three rules: redirects are refused (an OAuth endpoint that redirects is an error, never
//! followed; RFC 9700 §4.11); every URL and every resolved address passes the server's
//! [`UrlPolicy`]; and every body read is capped at [`MAX_OAUTH_DOCUMENT_BYTES`]. No configured
//! header of the MCP server is ever sent: requests carry only what the OAuth step puts on them.
//! It also adapts `reqwest` to the `oauth2` crate's [`oauth2::AsyncHttpClient`], plain
//! ([`Net`]) or with a DPoP proof on each token request ([`Proving`], RFC 9449 §5), and keeps
//! each authorization server's DPoP nonce (§8).

use std::collections::HashMap;
use std::sync::Arc;

use reqwest::{StatusCode, Url};
use serde::de::DeserializeOwned;

use secrecy::ExposeSecret;

use super::dpop::{DPOP, DpopKey, Nonce};
use super::policy::{PolicyResolver, UrlPolicy};
use super::{Error, ErrorKind};
use crate::json;
use crate::limits::{self, MAX_OAUTH_DOCUMENT_BYTES, OAUTH_REQUEST_TIMEOUT};
use crate::protocol::{OFFERED_VERSION, PROTOCOL_VERSION};

/// A failed request as the `oauth2` crate sees it: the [`Error`] it becomes again.
#[derive(Debug)]
pub(crate) struct NetError(pub(crate) Error);

impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.message())
    }
}

impl std::error::Error for NetError {}

/// The sign-in client of one MCP server.
#[derive(Clone)]
pub(crate) struct Net {
    client: reqwest::Client,
    policy: UrlPolicy,
    /// The newest DPoP nonce of each authorization server (RFC 9449 §8: a nonce is one
    /// server's own), by the origin of its token endpoint; shared by clones.
    nonces: Arc<std::sync::Mutex<HashMap<String, Nonce>>>,
}

/// At most this many authorization servers' nonces are kept ([`Net`]); one more forgets them
/// all (a forgotten nonce costs one `use_dpop_nonce` retry).
const MAX_NONCE_SERVERS: usize = 8;

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net").field("policy", &self.policy).finish()
    }
}

/// A response read whole: the status and at most [`MAX_OAUTH_DOCUMENT_BYTES`] of body.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Net {
    /// A client for the sign-in of the MCP server at `server`.
    ///
    /// # Errors
    /// [`ErrorKind::Transport`] when the HTTP client cannot be built.
    pub(crate) fn new(server: &Url) -> Result<Net, Error> {
        let policy = UrlPolicy::for_server(server);
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(limits::CONNECT_TIMEOUT)
            .timeout(OAUTH_REQUEST_TIMEOUT)
            .dns_resolver(Arc::new(PolicyResolver { policy }))
            .build()
            .map_err(|e| {
                Error::new(
                    ErrorKind::Transport,
                    format!(
                        "the sign-in HTTP client could not be built: {}",
                        e.without_url()
                    ),
                )
            })?;
        Ok(Net {
            client,
            policy,
            nonces: Arc::default(),
        })
    }

    /// The nonce of the authorization server whose token endpoint is `url` (its origin).
    fn nonce_for(&self, url: &Url) -> Nonce {
        let mut nonces = self.nonces.lock().unwrap_or_else(|e| e.into_inner());
        let origin = url.origin().ascii_serialization();
        if !nonces.contains_key(&origin) && nonces.len() >= MAX_NONCE_SERVERS {
            nonces.clear();
        }
        nonces.entry(origin).or_default().clone()
    }

    /// The URL policy of this server.
    pub(crate) fn policy(&self) -> UrlPolicy {
        self.policy
    }

    /// Sends `request` (after checking its URL, named `what` in errors) and reads the answer.
    ///
    /// # Errors
    /// [`ErrorKind::Refused`] for a URL the policy refuses, a redirect, or a body over the cap;
    /// [`ErrorKind::Transport`] when the server cannot be reached or times out.
    pub(crate) async fn send(
        &self,
        request: reqwest::Request,
        what: &str,
    ) -> Result<Answer, Error> {
        self.policy
            .check(request.url(), what)
            .map_err(|e| Error::new(ErrorKind::Refused, e))?;
        let response =
            self.client.execute(request).await.map_err(|e| {
                transport(what, &e, "did not answer in time", "could not be reached")
            })?;
        let status = response.status();
        if status.is_redirection() {
            return Err(Error::new(
                ErrorKind::Refused,
                format!(
                    "{what} answered with a redirect ({status}); OAuth requests do not follow redirects"
                ),
            ));
        }
        let headers = response.headers().clone();
        let body = read_capped(response, what).await?;
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// GETs the JSON document at `url`: `Ok(None)` when the server answers with a 4xx status,
    /// or with a success whose body is no JSON at all (the document is not there; discovery
    /// tries the next place).
    ///
    /// # Errors
    /// As [`Net::send`]; [`ErrorKind::Refused`] for a 5xx status or a JSON body that is not the
    /// expected document.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        url: &Url,
        what: &str,
    ) -> Result<Option<T>, Error> {
        let request = self
            .client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .header(PROTOCOL_VERSION, OFFERED_VERSION)
            .build()
            .map_err(|e| Error::new(ErrorKind::Refused, format!("{what}: {}", e.without_url())))?;
        let answer = self.send(request, what).await?;
        if answer.status.is_client_error() {
            return Ok(None);
        }
        if !answer.status.is_success() {
            return Err(Error::new(
                ErrorKind::Refused,
                format!("{what} answered with HTTP {}", answer.status.as_u16()),
            ));
        }
        // A page that is no JSON at all (a web app's catch-all route answering `200` with HTML)
        // is not the document: the next place is tried, as for a `404`.
        if json::from_server::<serde::de::IgnoredAny>(&answer.body).is_err() {
            return Ok(None);
        }
        parse_json(&answer.body, what).map(Some)
    }

    /// POSTs the JSON `body` to `url` and reads the answer, whatever its status.
    ///
    /// # Errors
    /// As [`Net::send`].
    pub(crate) async fn post_json(
        &self,
        url: &Url,
        body: &serde_json::Value,
        what: &str,
    ) -> Result<Answer, Error> {
        let request = self
            .client
            .post(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .build()
            .map_err(|e| Error::new(ErrorKind::Refused, format!("{what}: {}", e.without_url())))?;
        self.send(request, what).await
    }

    /// Runs one request of the `oauth2` crate (a token request); the URL is checked like any
    /// other.
    ///
    /// # Errors
    /// A [`NetError`] holding the [`Error`] of [`Net::send`].
    pub(crate) async fn execute(
        &self,
        request: oauth2::HttpRequest,
    ) -> Result<oauth2::HttpResponse, NetError> {
        let answer = self.send_token_request(request).await?;
        token_response(answer)
    }

    /// [`Net::execute`] with a fresh proof of `key` in the `DPoP` header (RFC 9449 §5), with the
    /// newest nonce of the authorization server at the token endpoint's origin; an answer
    /// `400 use_dpop_nonce` that brings a new nonce is answered by one more request with a
    /// proof carrying it (§8).
    ///
    /// # Errors
    /// As [`Net::execute`]; a [`ErrorKind::Config`] [`NetError`] when no proof could be made.
    async fn execute_proved(
        &self,
        request: oauth2::HttpRequest,
        key: &DpopKey,
    ) -> Result<oauth2::HttpResponse, NetError> {
        let (parts, body) = request.into_parts();
        let url = Url::parse(&parts.uri.to_string()).map_err(|_| {
            NetError(Error::new(
                ErrorKind::Refused,
                "the token endpoint URL is not valid",
            ))
        })?;
        let nonce = self.nonce_for(&url);
        let mut retried = false;
        loop {
            let proof = key
                .proof(parts.method.as_str(), &url, None, nonce.get().as_deref())
                .map_err(NetError)?;
            let mut value = http::HeaderValue::from_str(proof.expose_secret()).map_err(|_| {
                NetError(Error::new(
                    ErrorKind::Config,
                    "a DPoP proof could not be made",
                ))
            })?;
            value.set_sensitive(true);
            let mut request = http::Request::new(body.clone());
            *request.method_mut() = parts.method.clone();
            *request.uri_mut() = parts.uri.clone();
            *request.headers_mut() = parts.headers.clone();
            request.headers_mut().insert(DPOP, value);
            let answer = self.send_token_request(request).await?;
            let fresh = nonce.learn(&answer.headers);
            if fresh && !retried && asks_for_nonce(answer.status, &answer.body) {
                tracing::debug!(
                    "the token endpoint asked for a DPoP nonce; sending the proof again with it"
                );
                retried = true;
                continue;
            }
            return token_response(answer);
        }
    }

    /// Sends one token request (its URL checked like any other) and reads the answer.
    async fn send_token_request(&self, request: oauth2::HttpRequest) -> Result<Answer, NetError> {
        let what = "the token endpoint";
        let request = reqwest::Request::try_from(request).map_err(|_| {
            NetError(Error::new(
                ErrorKind::Refused,
                format!("{what} URL is not valid"),
            ))
        })?;
        self.send(request, what).await.map_err(NetError)
    }

    /// This client for token requests proved with `key` (RFC 9449 §5), or plain without one.
    pub(crate) fn proving<'a>(&'a self, key: Option<&'a DpopKey>) -> Proving<'a> {
        Proving { net: self, key }
    }
}

/// The `oauth2` crate's response of a token request's answer.
///
/// # Errors
/// A [`ErrorKind::Refused`] [`NetError`] for a refusal that is no OAuth error response.
fn token_response(answer: Answer) -> Result<oauth2::HttpResponse, NetError> {
    // A refusal without an OAuth error response (RFC 6749 §5.2) is named by its status; its
    // body is never quoted.
    if answer.status != StatusCode::OK && !is_oauth_error(&answer.body) {
        return Err(NetError(Error::new(
            ErrorKind::Refused,
            format!(
                "the token endpoint answered HTTP {}",
                answer.status.as_u16()
            ),
        )));
    }
    let (status, body) = token_answer(answer.status, answer.body);
    let mut response = http::Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = answer.headers;
    Ok(response)
}

/// A token endpoint's answer as the `oauth2` crate is to read it, read by the one JSON reader
/// ([`json::from_server`]; text that is no JSON object is left as it came, and text nested past
/// [`MAX_JSON_DEPTH`](crate::limits::MAX_JSON_DEPTH) is dropped, so no reader takes it):
///
/// - an OAuth error response (a string `error`, no `access_token`) sent with HTTP 200 (GitHub's
///   `bad_verification_code`) is the error response RFC 6749 §5.2 sends with 400, so its code and
///   description reach the reason;
/// - an `expires_in` written as a string of digits (Entra v1, NetSuite, SAP) is that number; one
///   that cannot be read as whole seconds is dropped: the lifetime is then unknown (RFC 6749
///   §5.1 makes it optional), never a reason to refuse a valid `access_token`.
fn token_answer(status: StatusCode, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let mut fields = match json::from_server(&body) {
        Ok(serde_json::Value::Object(fields)) => fields,
        // Text the reader refuses reaches no other reader: the `oauth2` crate's would take
        // JSON nested past the bound. Without a body its reading fails as for any non-answer.
        Err(refusal) if refusal.problem == json::Problem::TooDeep => return (status, Vec::new()),
        _ => return (status, body),
    };
    let oauth_error = fields
        .get("error")
        .is_some_and(serde_json::Value::is_string)
        && !fields.contains_key("access_token");
    let status = match (status, oauth_error) {
        (StatusCode::OK, true) => StatusCode::BAD_REQUEST,
        (status, _) => status,
    };
    if let Some(lifetime) = fields.get("expires_in") {
        let seconds = match lifetime {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(digits) => digits.trim().parse::<u64>().ok(),
            _ => None,
        };
        match seconds {
            Some(seconds) => fields.insert("expires_in".to_string(), seconds.into()),
            None => fields.remove("expires_in"),
        };
    }
    let body = serde_json::to_vec(&fields).unwrap_or(body);
    (status, body)
}

/// [`Net`] for the token requests of a grant: with a key (a DPoP-bound grant), each carries a
/// fresh proof of it; without, they go plain (see [`Net::proving`]).
pub(crate) struct Proving<'a> {
    net: &'a Net,
    key: Option<&'a DpopKey>,
}

impl<'c> oauth2::AsyncHttpClient<'c> for Proving<'_> {
    type Error = NetError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<oauth2::HttpResponse, NetError>> + Send + 'c>,
    >;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        match self.key {
            Some(key) => Box::pin(self.net.execute_proved(request, key)),
            None => Box::pin(self.net.execute(request)),
        }
    }
}

/// Whether a token endpoint's answer is `400` with the OAuth error `use_dpop_nonce` (RFC 9449
/// §8): the proof lacked the nonce the server wants.
fn asks_for_nonce(status: StatusCode, body: &[u8]) -> bool {
    status == StatusCode::BAD_REQUEST
        && json::from_server::<serde_json::Value>(body)
            .ok()
            .is_some_and(|v| {
                v.get("error").and_then(serde_json::Value::as_str) == Some("use_dpop_nonce")
            })
}

impl<'c> oauth2::AsyncHttpClient<'c> for Net {
    type Error = NetError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<oauth2::HttpResponse, NetError>> + Send + 'c>,
    >;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(self.execute(request))
    }
}

/// Whether `body` is a JSON object with a string `error`: an OAuth error response.
fn is_oauth_error(body: &[u8]) -> bool {
    json::from_server::<serde_json::Value>(body)
        .ok()
        .is_some_and(|v| v.get("error").is_some_and(serde_json::Value::is_string))
}

/// Parses a JSON document, naming `what` (never the document or the parser's text, which may
/// quote it).
pub(crate) fn parse_json<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, Error> {
    json::from_server(body).map_err(|e| {
        let why = match e.problem {
            json::Problem::TooDeep => "nests too deep",
            _ => "JSON error",
        };
        Error::new(
            ErrorKind::Refused,
            format!(
                "{what} is not a valid document ({why} at line {}, column {})",
                e.line, e.column
            ),
        )
    })
}

async fn read_capped(mut response: reqwest::Response, what: &str) -> Result<Vec<u8>, Error> {
    let mut body = Vec::new();
    loop {
        let chunk = response.chunk().await.map_err(|e| {
            transport(
                what,
                &e,
                "did not finish its answer in time",
                "broke off its answer",
            )
        })?;
        let Some(chunk) = chunk else {
            return Ok(body);
        };
        if body.len() + chunk.len() > MAX_OAUTH_DOCUMENT_BYTES {
            return Err(Error::new(
                ErrorKind::Refused,
                format!("{what} sent more than {MAX_OAUTH_DOCUMENT_BYTES} bytes"),
            ));
        }
        body.extend_from_slice(&chunk);
    }
}

/// A transport failure of `what`: `late` when `e` is a timeout, else `lost`.
fn transport(what: &str, e: &reqwest::Error, late: &str, lost: &str) -> Error {
    let why = if e.is_timeout() { late } else { lost };
    Error::new(ErrorKind::Transport, format!("{what} {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_authorization_server_has_its_own_nonce_and_clones_share_them() {
        let net = Net::new(&Url::parse("http://127.0.0.1:9/mcp").unwrap()).unwrap();
        let mut answer = reqwest::header::HeaderMap::new();
        answer.insert(
            super::super::dpop::DPOP_NONCE,
            "nonce-of-a".parse().unwrap(),
        );
        let a = Url::parse("http://127.0.0.1:7/token").unwrap();
        assert!(net.nonce_for(&a).learn(&answer));
        // The same server by another path, and a clone of the client: the same nonce.
        let same = Url::parse("http://127.0.0.1:7/tenant/oauth/token").unwrap();
        assert_eq!(
            net.clone().nonce_for(&same).get().as_deref(),
            Some("nonce-of-a")
        );
        // Another origin has none of it.
        let b = Url::parse("http://127.0.0.1:8/token").unwrap();
        assert_eq!(net.nonce_for(&b).get(), None);
        // Past the bound, the nonces are forgotten.
        for port in 10..(10 + MAX_NONCE_SERVERS as u16) {
            net.nonce_for(&Url::parse(&format!("http://127.0.0.1:{port}/token")).unwrap());
        }
        assert_eq!(net.nonce_for(&a).get(), None);
        assert!(net.nonces.lock().unwrap().len() <= MAX_NONCE_SERVERS);
    }

    #[test]
    fn only_an_object_with_a_string_error_is_an_oauth_error_response() {
        let cases: [(&[u8], bool); 6] = [
            (br#"{"error":"invalid_client"}"#, true),
            (
                br#"{"error":"invalid_grant","error_description":"x"}"#,
                true,
            ),
            (br#"{"error":404}"#, false),
            (br#"{"message":"not found"}"#, false),
            (b"not found", false),
            (b"", false),
        ];
        for (body, expected) in cases {
            assert_eq!(
                is_oauth_error(body),
                expected,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
