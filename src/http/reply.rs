//! Reading a reply: the status check, a JSON body or an SSE stream, routing each incoming message
//! ([`Connection::route`]), answering server requests, and resuming a stream with `GET` +
//! `Last-Event-ID` (MCP 2025-11-25, transports: Streamable HTTP).
//!
//! Every byte read is bounded ([`crate::limits`]); every piece of server text that reaches an
//! [`Error`] is scrubbed of the entry's secrets and cut to a bounded length.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue, LOCATION, RETRY_AFTER};
use reqwest::{Response, StatusCode};
use serde_json::value::RawValue;

use super::events::SseStream;
use super::session::Session;
use super::{ACCEPT_SSE, Connection, Decoded, Error, LAST_EVENT_ID};
use crate::jsonrpc::{self, Kind, RpcError};
use crate::limits::{self, MAX_MESSAGE_BYTES};

/// Why reading a body failed.
pub(super) enum BodyError {
    Http(reqwest::Error),
    TooLarge,
    Utf8,
}

impl Connection {
    /// Turns a non-2xx status into its [`Error`]; returns a 2xx response unchanged.
    /// `carried_session` says whether the request carried an `Mcp-Session-Id`.
    pub(super) async fn check_status(
        &self,
        response: Response,
        carried_session: bool,
    ) -> Result<Response, Error> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        tracing::debug!(namespace = %self.namespace, status = status.as_u16(), "HTTP error status");
        if status.is_redirection() {
            let location = response.headers().get(LOCATION).map(|v| {
                self.server_text(&String::from_utf8_lossy(v.as_bytes()), 512)
                    .into_owned()
            });
            return Err(Error::redirect(status, location));
        }
        if carried_session && status == StatusCode::NOT_FOUND {
            return Err(Error::session_expired());
        }
        let retry_after = match status {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs),
            _ => None,
        };
        let preview = read_preview(response).await;
        if carried_session && status == StatusCode::BAD_REQUEST && speaks_of_session(&preview) {
            return Err(Error::session_expired());
        }
        let preview = self
            .server_text(&preview, limits::MAX_REASON_BYTES)
            .into_owned();
        Err(Error::http_status(status, retry_after, preview))
    }

    /// Reads the answer to request `id` from a 2xx response: a JSON body, or an SSE stream that
    /// may carry server requests and notifications first, and may need resuming. Server requests
    /// are answered on `session`.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping it abandons the reply (the request may still run on the
    /// server; the in-flight table decides whether to cancel it).
    pub(super) async fn read_response<T>(
        &self,
        response: Response,
        id: u64,
        session: &Session,
        decode: &impl Fn(&RawValue) -> Decoded<T>,
    ) -> Result<T, Error> {
        match media_type(&response) {
            Some(MediaType::Json) => {
                let body = read_capped(response)
                    .await
                    .map_err(|e| self.body_error(e))?;
                let text = std::str::from_utf8(&body)
                    .map_err(|_| Error::protocol("the server's JSON reply is not UTF-8"))?;
                let messages = jsonrpc::decode(text).map_err(Error::protocol)?;
                for message in &messages {
                    if let Some(found) = self.route(message, id, session, decode).await {
                        return found;
                    }
                }
                Err(Error::protocol(format!(
                    "the server's JSON reply held no response to request {id}"
                )))
            }
            Some(MediaType::EventStream) => self.read_stream(response, id, session, decode).await,
            None => {
                let shown = response.headers().get(CONTENT_TYPE).map(|v| {
                    self.server_text(&String::from_utf8_lossy(v.as_bytes()), 100)
                        .into_owned()
                });
                Err(Error::protocol(match shown {
                    Some(ct) => format!(
                        "the server answered with Content-Type \"{ct}\", not application/json or text/event-stream"
                    ),
                    None => "the server answered without a Content-Type (HTTP 2xx with no JSON-RPC response)".to_string(),
                }))
            }
        }
    }

    async fn read_stream<T>(
        &self,
        response: Response,
        id: u64,
        session: &Session,
        decode: &impl Fn(&RawValue) -> Decoded<T>,
    ) -> Result<T, Error> {
        let mut events = SseStream::new(response);
        let mut last_event_id = String::new();
        let mut retry = limits::DEFAULT_RETRY;
        let mut resumptions = 0;
        loop {
            let event = match events.next().await {
                Some(Ok(event)) => event,
                Some(Err(BodyError::TooLarge)) => return Err(self.body_error(BodyError::TooLarge)),
                Some(Err(BodyError::Utf8)) => {
                    return Err(Error::stream(
                        "the server's event stream is not UTF-8",
                        None,
                    ));
                }
                end @ (None | Some(Err(BodyError::Http(_)))) => {
                    if last_event_id.is_empty() || resumptions == limits::MAX_RESUMPTIONS {
                        return Err(match end {
                            Some(Err(_)) => Error::stream(
                                format!(
                                    "the server's event stream broke before the response to request {id}: the connection was cut"
                                ),
                                None,
                            ),
                            _ => Error::stream(
                                format!(
                                    "the server closed the event stream before the response to request {id}"
                                ),
                                None,
                            ),
                        });
                    }
                    resumptions += 1;
                    tracing::debug!(namespace = %self.namespace, id, resumptions, retry_ms = retry.as_millis() as u64, "resuming event stream");
                    tokio::time::sleep(retry).await;
                    let resumed = self.resume(&last_event_id, session).await.map_err(|e| {
                        Error::stream(
                            "resuming the event stream (GET with Last-Event-ID) failed",
                            Some(e),
                        )
                    })?;
                    events = SseStream::new(resumed);
                    continue;
                }
            };
            if !event.id.is_empty() {
                last_event_id.clone_from(&event.id);
            }
            if let Some(wait) = event.retry {
                retry = wait.min(limits::MAX_RETRY);
            }
            if event.data.is_empty() || event.event != "message" {
                continue;
            }
            let messages = match jsonrpc::decode(&event.data) {
                Ok(messages) => messages,
                Err(_) => {
                    tracing::debug!(namespace = %self.namespace, id, "skipped an event that is not JSON-RPC");
                    continue;
                }
            };
            for message in &messages {
                if let Some(answer) = self.route(message, id, session, decode).await {
                    return answer;
                }
            }
        }
    }

    /// Resumes a stream: `GET` with `Last-Event-ID`, carrying `session`.
    async fn resume(&self, last_event_id: &str, session: &Session) -> Result<Response, Error> {
        if last_event_id.len() > limits::MAX_EVENT_ID_BYTES {
            return Err(Error::protocol(format!(
                "the server's SSE event id is longer than {} bytes",
                limits::MAX_EVENT_ID_BYTES
            )));
        }
        let last = HeaderValue::from_str(last_event_id).map_err(|_| {
            Error::protocol("the server's SSE event id is not a valid header value")
        })?;
        let request = self
            .with_session(self.http()?.get(self.url.clone()), Some(session))
            .header(ACCEPT, ACCEPT_SSE)
            .header(LAST_EVENT_ID, last);
        let response = request.send().await.map_err(|e| self.http_error(e))?;
        let response = self.check_status(response, session.id.is_some()).await?;
        match media_type(&response) {
            Some(MediaType::EventStream) => Ok(response),
            _ => Err(Error::protocol(
                "the server answered the stream resumption without an event stream",
            )),
        }
    }

    /// Handles one incoming message, from any stream or JSON body: returns the answer when it is
    /// the response to `id`; answers a server request on `session` (`ping` with `{}`, anything
    /// else with `-32601`); logs and drops notifications and responses to other ids. The one
    /// place where incoming messages are dispatched.
    async fn route<T>(
        &self,
        message: &jsonrpc::Incoming<'_>,
        id: u64,
        session: &Session,
        decode: &impl Fn(&RawValue) -> Decoded<T>,
    ) -> Option<Result<T, Error>> {
        match message.kind() {
            Kind::Response(rid, outcome) if jsonrpc::id_matches(rid, id) => Some(match outcome {
                Ok(result) => decode(result).map_err(Error::malformed),
                Err(error) => Err(Error::rpc_error(RpcError {
                    code: error.code,
                    message: self
                        .server_text(&error.message, limits::MAX_REASON_BYTES)
                        .into_owned(),
                })),
            }),
            Kind::Response(..) => {
                tracing::trace!(namespace = %self.namespace, id, "ignored a response to another request");
                None
            }
            Kind::Request(rid, method) => {
                tracing::debug!(namespace = %self.namespace, id, ping = method == "ping", "answering a server request");
                let answer = jsonrpc::answer_server_request(rid, method);
                if let Err(e) = self.post(Bytes::from(answer), Some(session)).await {
                    tracing::debug!(namespace = %self.namespace, error = %e, "answering a server request failed");
                }
                None
            }
            Kind::Notification(method) => {
                tracing::trace!(namespace = %self.namespace, id, notification = %self.server_text(method, 64), "ignored a server notification");
                None
            }
            Kind::Invalid => {
                tracing::trace!(namespace = %self.namespace, id, "ignored a message that is not JSON-RPC");
                None
            }
        }
    }

    fn body_error(&self, error: BodyError) -> Error {
        match error {
            BodyError::Http(e) => self.http_error(e),
            BodyError::TooLarge => Error::stream(
                format!(
                    "the server sent a message larger than the {} MiB limit",
                    MAX_MESSAGE_BYTES / (1024 * 1024)
                ),
                None,
            ),
            BodyError::Utf8 => Error::protocol("the server's reply is not UTF-8"),
        }
    }
}

/// Whether an error body is a JSON-RPC error whose `message` speaks of the session (what
/// server-everything and the TypeScript SDK answer for an unknown session).
fn speaks_of_session(preview: &str) -> bool {
    let Ok(messages) = jsonrpc::decode(preview) else {
        return false;
    };
    messages.iter().any(|m| {
        m.error
            .as_ref()
            .is_some_and(|e| e.message.to_ascii_lowercase().contains("session"))
    })
}

enum MediaType {
    Json,
    EventStream,
}

fn media_type(response: &Response) -> Option<MediaType> {
    let value = response.headers().get(CONTENT_TYPE)?.to_str().ok()?;
    let essence = value.split(';').next()?.trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Some(MediaType::Json)
    } else if essence.eq_ignore_ascii_case("text/event-stream") {
        Some(MediaType::EventStream)
    } else {
        None
    }
}

/// Reads a whole JSON body, refusing it as soon as it passes [`MAX_MESSAGE_BYTES`].
async fn read_capped(response: Response) -> Result<Vec<u8>, BodyError> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_MESSAGE_BYTES as u64)
    {
        return Err(BodyError::TooLarge);
    }
    let capacity = response.content_length().unwrap_or(0) as usize;
    let mut body = Vec::with_capacity(capacity);
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(BodyError::Http)?;
        if body.len() + chunk.len() > MAX_MESSAGE_BYTES {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Reads at most [`limits::ERROR_PREVIEW_BYTES`] of an error body, cut on a char boundary.
async fn read_preview(response: Response) -> String {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while body.len() < limits::ERROR_PREVIEW_BYTES {
        match chunks.next().await {
            Some(Ok(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(limits::ERROR_PREVIEW_BYTES);
    match String::from_utf8(body) {
        Ok(text) => text,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut body = e.into_bytes();
            body.truncate(valid);
            String::from_utf8(body).unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_json_rpc_error_about_the_session_is_an_expiry() {
        assert!(speaks_of_session(
            r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#
        ));
        assert!(!speaks_of_session(
            r#"{"jsonrpc":"2.0","error":{"code":-32602,"message":"bad params"},"id":null,"data":"session"}"#
        ));
        assert!(!speaks_of_session("Bad Request: no session"));
        assert!(!speaks_of_session(r#"{"hint":"session"}"#));
    }
}
