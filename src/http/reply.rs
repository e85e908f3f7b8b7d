//! Reading a reply: the status check (with what an error status carries: a redirect's
//! `Location`, `Retry-After`), the refusal of a `Content-Encoding` the client cannot decode, a
//! JSON body or an SSE stream, routing each incoming message ([`Connection::route`]), answering
//! server requests, handing notifications to [`crate::notices`], resuming a stream with `GET` +
//! `Last-Event-ID` (counting only the resumptions that bring no new event id), and reading the
//! standalone `GET` stream ([`Connection::listen`]) (MCP 2025-11-25, transports: Streamable HTTP).
//!
//! Every byte read is bounded ([`crate::limits`]); every piece of server text that reaches an
//! [`Error`] is scrubbed of the entry's secrets and cut to a bounded length.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::{
    ACCEPT, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderValue, LOCATION, RETRY_AFTER,
};
use reqwest::{Response, StatusCode, Url};
use serde_json::value::RawValue;

use super::events::{AfterAnswer, BodyError, SseStream};
use super::session::{AfterRecheck, Era, EraSignal, Session};
use super::verdict::{self, Next, Spent, Stage};
use super::{Background, Connection, Decoded, Error, SessionHandle, Verdict, Wire};
use crate::json;
use crate::jsonrpc::{self, Awaited, ErrorMember, Flaw, Message, RpcError};
use crate::limits::{self, MAX_MESSAGE_BYTES};
use crate::protocol::{ACCEPT_SSE, LAST_EVENT_ID, codes};
use crate::redact::{REDACTED, Redactor};
use crate::sse::Event;

/// The JSON-RPC method of the modern change stream (MCP 2026-07-28,
/// basic/patterns/subscriptions).
const LISTEN: &str = "subscriptions/listen";

/// The longest redirect target a reason quotes, in bytes (after scrubbing).
const MAX_LOCATION_BYTES: usize = 512;

/// How a standalone `GET` stream ended without an error.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Listened {
    /// The server answered 405: it offers no standalone stream for this session.
    NotOffered,
    /// The session is gone (deleted, or the connection closed).
    NoSession,
    /// The server ended the stream.
    Ended,
}

impl Connection {
    /// Turns a non-2xx status into its [`Error`]; returns a 2xx response unchanged.
    /// `on` is the session the request went out on, and `answering` the JSON-RPC id of the
    /// request the response is to (none for a notification or a stream's `GET`). A redirect keeps
    /// its target ([`redirect_target`], bounded to 512 bytes); a 429/503 its `Retry-After`; a
    /// 401/403 the entry's config hint; any other status a scrubbed, bounded body preview. A
    /// "no valid session" 400 is read by the request path's rule ([`super::Words`]).
    pub(super) async fn check_status(
        &self,
        response: Response,
        on: Option<&Session>,
        answering: Option<u64>,
    ) -> Result<Response, Error> {
        self.check_status_by(response, on, answering, Some(&self.words))
            .await
    }

    /// [`Connection::check_status`], with the server's "no valid session" words read by
    /// `words`; `None`: the caller keeps its own rule (the change stream's machine), so words
    /// met on a session it carried are always [`Error::is_expired_by_text`].
    pub(super) async fn check_status_by(
        &self,
        response: Response,
        on: Option<&Session>,
        answering: Option<u64>,
        words: Option<&super::Words>,
    ) -> Result<Response, Error> {
        let carried_session = on.is_some_and(|s| s.id.is_some());
        let modern = on.is_some_and(|s| s.era == Era::Modern);
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        tracing::debug!(namespace = %self.namespace, status = status.as_u16(), "HTTP error status");
        if status.is_redirection() {
            let (location, query_omitted) = match response.headers().get(LOCATION) {
                Some(location) => {
                    let (target, query_omitted) =
                        redirect_target(location, &self.url, &self.redactor, self.origin.is_none());
                    let target = self.server_text(&target, MAX_LOCATION_BYTES).into_owned();
                    (Some(target), query_omitted)
                }
                None => (None, false),
            };
            return Err(Error::redirect(status, location, query_omitted));
        }
        if carried_session && status == StatusCode::NOT_FOUND {
            return Err(Error::session_expired());
        }
        let retry_after = match status {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                retry_after(response.headers())
            }
            _ => None,
        };
        // Read before the body: a web page is named by its type, never quoted (error::Body).
        let withheld = super::error::Body::withheld_type(response.headers().get(CONTENT_TYPE));
        let preview = read_preview(response).await;
        // A web page sent without its media type (none, or `text/plain`) is a page all the
        // same: named, not pasted.
        let withheld = withheld.or_else(|| looks_like_markup(&preview).then(|| "text/html".into()));
        // A modern error (either era may meet one: a restart onto 2026-07-28), and the 404 of
        // an unknown method, are JSON-RPC errors whatever the status (MCP 2026-07-28,
        // transports "Protocol Version Header" and "Backward Compatibility"; a 404 to a request
        // that carried a session id was read above); so is, on a modern route, a refusal (400,
        // 404, 405, 406) whose error answers the request's own id: the server read it as a
        // request of its era (a legacy server refusing a request without a session answers no
        // id of the client's).
        if let Some((error, answers)) = rpc_error_in(&preview, answering)
            && (codes::is_modern(error.code)
                || (status == StatusCode::NOT_FOUND && error.code == codes::METHOD_NOT_FOUND)
                || (modern && answers && matches!(status.as_u16(), 400 | 404 | 405 | 406)))
        {
            return Err(self.rpc_error(&error));
        }
        if carried_session
            && status == StatusCode::BAD_REQUEST
            && words.is_none_or(|words| words.met(false) == super::Said::SessionGone)
            && speaks_of_session(&preview)
        {
            return Err(Error::session_expired_by_text());
        }
        // A preview cut at its bound (less up to 3 bytes of a split character) may end inside
        // a secret: redact that piece too.
        let preview = if preview.len() + 3 >= limits::ERROR_PREVIEW_BYTES {
            self.redactor.scrub_cut(&preview)
        } else {
            preview.as_str().into()
        };
        let preview = match withheld {
            Some(media) => super::error::Body::Withheld(media),
            None => super::error::Body::Quoted(
                self.server_text(&preview, limits::MAX_REASON_BYTES)
                    .into_owned(),
            ),
        };
        Err(Error::http_status(status, retry_after, preview)
            .with_auth_hint(self.auth_hint.as_deref()))
    }

    /// Reads the answer to the `awaited` request from a 2xx response: a JSON body, or an SSE
    /// stream that may carry server requests and notifications first, and may need resuming.
    /// Server requests are answered on `session`. Every message of either goes through
    /// [`Connection::route`], so a response is read the same in both. A resumption's rate-limit
    /// wait must end before `deadline` (the request's, [`Wire::until`]; `None`: the bound alone).
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping it abandons the reply (the request may still run on the
    /// server; the in-flight table decides whether to cancel it).
    pub(super) async fn read_response<T>(
        self: &Arc<Self>,
        response: Response,
        awaited: Awaited<'_>,
        session: &Arc<Session>,
        deadline: Option<tokio::time::Instant>,
        decode: &impl Fn(&RawValue, &Bytes) -> Decoded<T>,
    ) -> Result<T, Error> {
        self.read_reply(
            response,
            awaited,
            session,
            deadline,
            decode,
            AfterAnswer::Background,
        )
        .await
    }

    /// As [`Connection::read_response`]; `after` says how an event stream's end is read once
    /// the answer came.
    ///
    /// # Cancel safety
    /// Not cancel safe, as [`Connection::read_response`].
    pub(super) async fn read_reply<T>(
        self: &Arc<Self>,
        response: Response,
        awaited: Awaited<'_>,
        session: &Arc<Session>,
        deadline: Option<tokio::time::Instant>,
        decode: &impl Fn(&RawValue, &Bytes) -> Decoded<T>,
        after: AfterAnswer,
    ) -> Result<T, Error> {
        self.check_encoding(&response)?;
        match media_type(&response) {
            Some(MediaType::Json) => {
                let mut body = read_capped(response)
                    .await
                    .map_err(|e| self.body_error(e))?;
                json::ready(&mut body, json::Source::Server)
                    .map_err(|r| Error::protocol(format!("the server's JSON reply {r}")))?;
                let body = Bytes::from(body);
                let text = std::str::from_utf8(&body)
                    .map_err(|_| Error::protocol("the server's JSON reply is not UTF-8"))?;
                let messages = jsonrpc::decode(text).map_err(Error::protocol)?;
                for message in &messages {
                    if let Some(found) = self.route(message, &body, awaited, session, decode).await
                    {
                        return found;
                    }
                }
                Err(Error::protocol(format!(
                    "the server's JSON reply held no response to request {}",
                    awaited.id
                )))
            }
            Some(MediaType::EventStream) => {
                self.read_stream(response, awaited, session, deadline, decode, after)
                    .await
            }
            None => {
                let shown = response.headers().get(CONTENT_TYPE).map(|v| {
                    self.server_text(&String::from_utf8_lossy(v.as_bytes()), 100)
                        .into_owned()
                });
                // A web page or a file: no MCP endpoint answers there ([`Error::lasting`]).
                Err(Error::not_mcp_type(match shown {
                    Some(ct) => format!(
                        "the server answered with Content-Type \"{ct}\", not application/json or text/event-stream"
                    ),
                    None => "the server answered without a Content-Type (HTTP 2xx with no JSON-RPC response)".to_string(),
                }))
            }
        }
    }

    /// Reads the answer to `id` from an SSE stream, resuming it with `GET` + `Last-Event-ID`
    /// when it ends (or breaks) after an event id: the server may close a stream and expect the
    /// client to poll after `retry` (MCP 2025-11-25, transports: resumability and redelivery).
    /// The id sent is that of the last event dispatched ([`crate::sse`]): an event the stream
    /// cut before its end never arrived, so the server is asked to send it again. A resumption
    /// refused with a rate limit whose wait fits the 30 s bound and what is left of `deadline`
    /// is asked once more with the same id after the wait ([`verdict::next`]). Any
    /// other refusal gets the one verdict ([`Connection::verdict`]) and is acted on
    /// ([`Connection::act_on`]: the other era asks the era again, the session is settled);
    /// the error carries it ([`Error::judged`]). Refused as an expired session, the request
    /// ends with [`Error::session_lost`] (not running, so never cancelled, and never resent).
    /// Only resumptions that bring no new event id count, up to [`limits::MAX_RESUMPTIONS`];
    /// the call's deadline bounds the rest. The wait is the server's `retry`, bounded to
    /// [`limits::MIN_RETRY`]..=[`limits::MAX_RETRY`].
    ///
    /// # Cancel safety
    /// Not cancel safe, as [`Connection::read_response`].
    async fn read_stream<T>(
        self: &Arc<Self>,
        response: Response,
        awaited: Awaited<'_>,
        session: &Arc<Session>,
        deadline: Option<tokio::time::Instant>,
        decode: &impl Fn(&RawValue, &Bytes) -> Decoded<T>,
        after: AfterAnswer,
    ) -> Result<T, Error> {
        let id = awaited.id;
        let mut events = SseStream::new(response);
        // The last event id the latest resumption asked with, and how many brought no new one.
        let mut asked: Option<String> = None;
        let mut fruitless = 0;
        // A response to another request met on this request's own reply: the server answered
        // something, so a stream that then ends is no lost reply to re-issue but a malformed one.
        let mut foreign = false;
        loop {
            let (event, refused) = match events.next().await {
                Some(Ok(event)) => (event, None),
                Some(Err(BodyError::TooLarge)) => return Err(self.body_error(BodyError::TooLarge)),
                // Its data made ready all the same: read below as every event is.
                Some(Err(BodyError::TooDeep(refusal, event))) => (event, Some(refusal)),
                Some(Err(BodyError::Utf8)) => {
                    return Err(Error::stream(
                        "the server's event stream is not UTF-8",
                        None,
                    ));
                }
                end @ (None | Some(Err(BodyError::Http(_)))) => {
                    if foreign {
                        return Err(Error::malformed(format!(
                            "the server's event stream held a response to another request and none to request {id}"
                        )));
                    }
                    // A modern stream is never resumed (MCP 2026-07-28 removed resumption).
                    let last_event_id = match session.era {
                        Era::Legacy => events.last_event_id(),
                        Era::Modern => "",
                    };
                    if asked.as_deref() == Some(last_event_id) {
                        fruitless += 1;
                    }
                    if last_event_id.is_empty() || fruitless == limits::MAX_RESUMPTIONS {
                        let ended = match end {
                            Some(Err(_)) => format!(
                                "the server's event stream broke before the response to request {id}: the connection was cut"
                            ),
                            _ => format!(
                                "the server closed the event stream before the response to request {id}"
                            ),
                        };
                        return Err(Error::broken(if fruitless == 0 {
                            ended
                        } else {
                            format!(
                                "{ended}; {fruitless} resumptions (GET with Last-Event-ID) brought no new event id"
                            )
                        }));
                    }
                    let retry = events.retry().map_or(limits::DEFAULT_RETRY, |r| {
                        r.clamp(limits::MIN_RETRY, limits::MAX_RETRY)
                    });
                    tracing::debug!(namespace = %self.namespace, id, fruitless, retry_ms = retry.as_millis() as u64, "resuming event stream");
                    let last_event_id = last_event_id.to_string();
                    tokio::time::sleep(retry).await;
                    // In a task the close awaits before any DELETE (bounded by the stream-open
                    // deadline): dropped with its reader while on the wire, the GET could still
                    // reach the session after its DELETE. None starts once the connection is
                    // closed.
                    // A resumption refused with a rate limit whose wait fits is asked once
                    // more after it, with the same id (`verdict::next`); it is no fruitless
                    // resumption, since the server sent nothing.
                    let mut spent = Spent::default();
                    let resumed = loop {
                        let this = Arc::clone(self);
                        let on = Arc::clone(session);
                        let asking = last_event_id.clone();
                        let resuming = self.before_delete.spawn_on(
                            async move {
                                if this.is_closed() {
                                    return Err(Error::closed());
                                }
                                if on.is_deleted() {
                                    // Forgotten meanwhile (another request's 404): nothing
                                    // goes to a session known gone, and the request is over
                                    // on it as if the resumption met that 404.
                                    return Err(Error::session_expired());
                                }
                                this.resume(&asking, &on).await
                            },
                            &self.runtime,
                        );
                        let resumed = resuming.await.unwrap_or_else(|_| Err(Error::closed()));
                        let e = match resumed {
                            Ok(response) => break Ok(response),
                            Err(e) => e,
                        };
                        let verdict = self.verdict(session, awaited.method, &e);
                        let left = deadline
                            .map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
                        let Next::Wait(wait) =
                            verdict::next(verdict, Stage::Status, spent, false, left)
                        else {
                            break Err((e, verdict));
                        };
                        spent.waited = true;
                        tracing::debug!(namespace = %self.namespace, id, wait_ms = wait.as_millis() as u64, "resumption rate limited; waiting");
                        tokio::time::sleep(wait).await;
                    };
                    let (e, verdict) = match resumed {
                        Ok(resumed) => {
                            asked = Some(last_event_id);
                            events.resume(resumed);
                            continue;
                        }
                        Err(refused) => refused,
                    };
                    // The refusal's verdict is acted on as every path that sends nothing once
                    // more acts on it (an answer of the other era asks the era again, the
                    // answer standing; the session settled), and travels out with the error:
                    // the exchange's own reading of it finds nothing more to act on, and a
                    // wait too long to take is named by the Pack (`verdict::NamedWait`).
                    let verdict = self
                        .act_on(session, awaited.method, verdict, true, deadline)
                        .await;
                    return Err(if e.is_session_expired() {
                        // The server forgot the session (MCP 2025-11-25, transports, session
                        // management): the request is over on it and may have run.
                        Error::session_lost(id, &e)
                    } else {
                        Error::stream(
                            "resuming the event stream (GET with Last-Event-ID) failed",
                            Some(e),
                        )
                    }
                    .judged(verdict));
                }
            };
            let messages = self.messages(&event)?;
            // An event the reader refused (nested too deep) goes the way every event goes, its
            // data written over where too deep; only the answer it gives is the refusal, as a
            // JSON reply's is. One left holding no JSON-RPC cannot be told apart: refused.
            if let Some(refusal) = &refused
                && messages.is_empty()
                && event.event == "message"
            {
                return Err(event_too_deep(refusal));
            }
            for message in &messages {
                foreign |= matches!(
                    message.kind(awaited),
                    Message::Response(rid, _) | Message::Malformed(Some(rid), _)
                        if !jsonrpc::id_matches(rid, id)
                );
                if let Some(answer) = self
                    .route(message, &event.data, awaited, session, decode)
                    .await
                {
                    let answer = match &refused {
                        Some(refusal) => Err(event_too_deep(refusal)),
                        None => answer,
                    };
                    // The stream's end is usually here already or one chunk away: the rest
                    // is read in the background, so the connection is reused, not closed.
                    let ended = match events.drain() {
                        None => true,
                        Some(rest) => {
                            let drained = self.runtime.spawn(rest);
                            after == AfterAnswer::Briefly
                                && tokio::time::timeout(limits::PROBE_DRAIN_WAIT, drained)
                                    .await
                                    .is_ok()
                        }
                    };
                    if after == AfterAnswer::Briefly && ended {
                        // The connection goes back to the pool in the HTTP client's own task,
                        // once it saw the body's end: let that task run first.
                        for _ in 0..4 {
                            tokio::task::yield_now().await;
                        }
                    }
                    return answer;
                }
            }
        }
    }

    /// Sends the `GET` of a stream on `session` ([`Connection::send_session_request`], the
    /// token refreshed first when it expires soon); its response headers must come within
    /// [`limits::STREAM_OPEN_TIMEOUT`], else [`Error::no_answer`] naming `what`. The status is
    /// not checked.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it drops the request.
    async fn open_stream(
        &self,
        what: &'static str,
        session: &Session,
        make: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<Response, Error> {
        let within = limits::STREAM_OPEN_TIMEOUT;
        let sent = self.send_session_request(session, reqwest::Method::GET, true, make);
        tokio::time::timeout(within, sent)
            .await
            .unwrap_or_else(|_| Err(Error::no_answer(what, within)))
    }

    /// Resumes a stream: `GET` with `Last-Event-ID`, carrying `session`; its headers within
    /// [`limits::STREAM_OPEN_TIMEOUT`].
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
        let response = self
            .open_stream("the resumption", session, |http| {
                http.get(self.url.clone())
                    .header(ACCEPT, ACCEPT_SSE)
                    .header(LAST_EVENT_ID, last.clone())
            })
            .await?;
        let response = self.check_status(response, Some(session), None).await?;
        self.check_encoding(&response)?;
        match media_type(&response) {
            Some(MediaType::EventStream) => Ok(response),
            _ => Err(Error::protocol(
                "the server answered the stream resumption without an event stream",
            )),
        }
    }

    /// Opens the standalone `GET` stream of session `on` (MCP 2025-11-25, transports, "Listening
    /// for Messages from the Server": `Accept: text/event-stream`, the session's id and version
    /// headers, and `Last-Event-ID` when `last_event_id` is not empty) and reads it until it
    /// ends. Every message on it goes through [`Connection::route`] like on any stream (server
    /// requests answered on `on`, notifications handed to [`crate::notices`], responses
    /// dropped); each event is bounded by [`MAX_MESSAGE_BYTES`]. Once the stream is open it asks
    /// for one re-listing ([`crate::notices::Signals::stream_opened`]): a change made while no
    /// stream was open was announced nowhere. `last_event_id` is updated with each event id the
    /// server sends (ids over [`limits::MAX_EVENT_ID_BYTES`] are not kept). The response headers
    /// must come within [`limits::STREAM_OPEN_TIMEOUT`]; once open, the stream may stay quiet.
    ///
    /// # Errors
    /// A transport failure, an HTTP error status (a 404: [`Error::is_session_expired`]), a 2xx
    /// answer that is not an event stream, a broken or oversized stream, or no headers in time
    /// ([`Error::no_answer`]).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future closes the stream; `last_event_id` holds the last id
    /// received.
    pub(crate) async fn listen(
        self: &std::sync::Arc<Self>,
        on: &SessionHandle,
        last_event_id: &mut String,
    ) -> Result<Listened, Error> {
        let session = on.session();
        if session.era == Era::Modern {
            return self.subscribe(on).await;
        }
        if session.is_deleted() {
            return Ok(Listened::NoSession);
        }
        let last = Some(last_event_id.as_str())
            .filter(|id| !id.is_empty())
            .and_then(|id| HeaderValue::from_str(id).ok());
        // In a task the close awaits before any DELETE (bounded by the stream-open deadline),
        // as a resumption's GET: dropped with the loop while on the wire, the GET could still
        // reach the session after its DELETE. None starts once the connection is closed or the
        // session deleted.
        let this = std::sync::Arc::clone(self);
        let on_session = std::sync::Arc::clone(session);
        let opening = self.before_delete.spawn_on(
            async move {
                if this.is_closed() || on_session.is_deleted() {
                    return Err(Error::closed());
                }
                this.open_stream("the standalone GET", &on_session, |http| {
                    let request = http.get(this.url.clone()).header(ACCEPT, ACCEPT_SSE);
                    match &last {
                        Some(last) => request.header(LAST_EVENT_ID, last.clone()),
                        None => request,
                    }
                })
                .await
            },
            &self.runtime,
        );
        let response = opening.await.unwrap_or_else(|_| Err(Error::closed()))?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(Listened::NotOffered);
        }
        // The stream's machine reads the server's words by its own rule.
        let response = match self
            .check_status_by(response, Some(session), None, None)
            .await
        {
            Ok(response) => response,
            Err(e) => return Err(self.background_verdict(session, "GET", e, false).await),
        };
        self.check_encoding(&response)?;
        if !matches!(media_type(&response), Some(MediaType::EventStream)) {
            return Err(Error::protocol(
                "the server answered the standalone GET without an event stream",
            ));
        }
        tracing::debug!(namespace = %self.namespace, "standalone stream open");
        self.signals.stream_opened();
        let mut events = SseStream::new(response);
        // No request awaits a response here: responses are dropped.
        let ignore = |_: &RawValue, _: &Bytes| -> Decoded<()> { Ok(()) };
        loop {
            let Some(event) = self.next_event(&mut events).await? else {
                return Ok(Listened::Ended);
            };
            let id = events.last_event_id();
            if !id.is_empty() && id.len() <= limits::MAX_EVENT_ID_BYTES && id != last_event_id {
                *last_event_id = id.to_string();
            }
            for message in &self.messages(&event)? {
                let _ = self
                    .route(message, &event.data, Awaited::NOTHING, session, &ignore)
                    .await;
            }
        }
    }

    /// The modern era's change stream (MCP 2026-07-28, basic/patterns/subscriptions): a
    /// `subscriptions/listen` POST opting in to `toolsListChanged`, sent only when the server's
    /// `server/discover` declared `tools.listChanged` (else [`Listened::NotOffered`] at once).
    /// Its answer is an event stream: the acknowledgment first, which asks for one re-listing
    /// ([`crate::notices::Signals::stream_opened`]: a change made while no stream was open was
    /// announced nowhere), then the notifications, handed to [`crate::notices`]. An
    /// acknowledgment without `toolsListChanged`, or `-32601`, means the server offers none, and
    /// so does a plain `404` or `405` once a probe found the server still modern
    /// ([`Connection::recheck`]); a response to the request is the server's graceful end
    /// ([`Listened::Ended`]). Its headers (and a JSON answer) must come within
    /// [`limits::STREAM_OPEN_TIMEOUT`].
    ///
    /// # Errors
    /// As [`Connection::listen`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future closes the stream, which ends the subscription.
    async fn subscribe(self: &std::sync::Arc<Self>, on: &SessionHandle) -> Result<Listened, Error> {
        if !on.declared().is_some_and(|d| d.tools_list_changed) {
            return Ok(Listened::NotOffered);
        }
        let session = on.session();
        let id = self.fresh_id();
        self.spanned(LISTEN, id, session, self.listen_on(session, id))
            .await
    }

    /// [`Connection::subscribe`]'s request `id` on `session`, in its span.
    async fn listen_on(
        self: &std::sync::Arc<Self>,
        session: &Arc<Session>,
        id: u64,
    ) -> Result<Listened, Error> {
        #[derive(serde::Deserialize)]
        struct Acknowledged {
            #[serde(default)]
            notifications: Option<serde_json::Map<String, serde_json::Value>>,
        }
        let body = super::request_body(
            super::Era::Modern,
            id,
            LISTEN,
            r#"{"notifications":{"toolsListChanged":true}}"#,
        );
        let awaited = Awaited { id, method: LISTEN };
        let within = limits::STREAM_OPEN_TIMEOUT;
        let wire = Wire::new(LISTEN, None, &[]).headers_within(within);
        let response = match self.post(body, &wire, Some(session), Some(id)).await {
            Ok(response) => response,
            Err(e) => {
                // By its verdict: an answer of the other era (maybe a restart onto the legacy
                // era) asks the era again (moved: the loop leaves this route for the next); the
                // server's own (the same era, now or before, also on a new route of replicas
                // declaring other things) is a plain 404 or 405 meaning no listen endpoint, and
                // nothing more is asked. The listen's refusal stands (nothing is resent), so the
                // probe records its verdict itself: asked about once, even when the loop drops
                // this future on the new route's install.
                let verdict = match self.verdict(session, LISTEN, &e) {
                    Verdict::MethodNotFound => return Ok(Listened::NotOffered),
                    // The verdict once the probe ruled.
                    Verdict::OtherEra(signal) => self
                        .recheck(session, LISTEN, signal, false, AfterRecheck::Stands, None)
                        .await
                        .verdict(signal),
                    verdict => verdict,
                };
                if let Verdict::Own(EraSignal::PlainRefusal(404 | 405)) = verdict {
                    tracing::debug!(namespace = %self.namespace, "subscriptions/listen has no endpoint on this server (a plain 404 or 405 from a modern server)");
                    return Ok(Listened::NotOffered);
                }
                return Err(e.judged(verdict));
            }
        };
        self.check_encoding(&response)?;
        if !matches!(media_type(&response), Some(MediaType::EventStream)) {
            // A JSON answer ends the subscription at once: an error, or a graceful end.
            let ignore = |_: &RawValue, _: &Bytes| -> Decoded<()> { Ok(()) };
            let read = tokio::time::timeout(
                within,
                self.read_response(response, awaited, session, None, &ignore),
            )
            .await
            .unwrap_or_else(|_| Err(Error::no_answer(LISTEN, within)));
            return match read {
                Ok(()) => Ok(Listened::Ended),
                Err(e) => self.listen_refused(session, e),
            };
        }
        let mut events = SseStream::new(response);
        let answered = |_: &RawValue, _: &Bytes| -> Decoded<()> { Ok(()) };
        loop {
            let Some(event) = self.next_event(&mut events).await? else {
                return Ok(Listened::Ended);
            };
            for message in &self.messages(&event)? {
                if message.method.as_deref() == Some("notifications/subscriptions/acknowledged") {
                    let ack: Option<Acknowledged> = jsonrpc::optional(
                        &self.namespace,
                        "notifications/subscriptions/acknowledged params",
                        message.params,
                    );
                    let tools = ack
                        .and_then(|a| a.notifications)
                        .and_then(|n| {
                            n.get("toolsListChanged")
                                .and_then(serde_json::Value::as_bool)
                        })
                        .unwrap_or(false);
                    if !tools {
                        tracing::debug!(namespace = %self.namespace, "the server acknowledged the subscription without toolsListChanged");
                        return Ok(Listened::NotOffered);
                    }
                    tracing::debug!(namespace = %self.namespace, "subscriptions/listen acknowledged");
                    self.signals.stream_opened();
                    continue;
                }
                if let Some(done) = self
                    .route(message, &event.data, awaited, session, &answered)
                    .await
                {
                    return match done {
                        Ok(()) => Ok(Listened::Ended),
                        Err(e) => self.listen_refused(session, e),
                    };
                }
            }
        }
    }

    /// A `subscriptions/listen` answered with `error` in its reply, by its verdict: JSON-RPC's
    /// "Method not found" means the server offers no subscription; anything else is the
    /// stream's failure, carrying its verdict.
    fn listen_refused(&self, session: &Arc<Session>, error: Error) -> Result<Listened, Error> {
        match self.verdict(session, LISTEN, &error) {
            Verdict::MethodNotFound => Ok(Listened::NotOffered),
            verdict => Err(error.judged(verdict)),
        }
    }

    /// The next event of a change stream (the standalone `GET`, `subscriptions/listen`);
    /// `None` at its end.
    ///
    /// # Errors
    /// A broken or oversized stream ([`Connection::body_error`]).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads the stream.
    async fn next_event(&self, events: &mut SseStream) -> Result<Option<Event>, Error> {
        match events.next().await {
            None => Ok(None),
            Some(Ok(event)) => Ok(Some(event)),
            // Read as every event is, its data written over where too deep.
            Some(Err(BodyError::TooDeep(refusal, event))) => {
                tracing::debug!(namespace = %self.namespace, %refusal, "an event nested too deep, read where it is not");
                Ok(Some(event))
            }
            Some(Err(error)) => Err(self.body_error(error)),
        }
    }

    /// The JSON-RPC messages an event carries (one, or a batch), borrowing its data; none for
    /// an event without data, of a type other than `message`, or whose data is not JSON-RPC
    /// (skipped, with a debug log).
    ///
    /// # Errors
    /// A stream error when the data is not UTF-8.
    fn messages<'e>(&self, event: &'e Event) -> Result<Vec<jsonrpc::Incoming<'e>>, Error> {
        if event.data.is_empty() || event.event != "message" {
            return Ok(Vec::new());
        }
        let Ok(text) = event.text() else {
            return Err(Error::stream(
                "the server's event stream is not UTF-8",
                None,
            ));
        };
        Ok(jsonrpc::decode(text).unwrap_or_else(|_| {
            tracing::debug!(namespace = %self.namespace, "skipped an event that is not JSON-RPC");
            Vec::new()
        }))
    }

    /// Refuses a body in a `Content-Encoding` the client did not decode. The HTTP client decodes
    /// gzip, br and zstd (it offers them in `Accept-Encoding`, see [`super::Clients`]) and drops
    /// the header when it does, so any value left other than `identity` is one it cannot read
    /// (RFC 9110 §8.4). The value is shown scrubbed and cut to 64 bytes. An unreadable JSON body
    /// is a complete reply ([`Error::protocol`]); an unreadable event stream may belong to a
    /// request that is still running ([`Error::stream`]).
    fn check_encoding(&self, response: &Response) -> Result<(), Error> {
        let Some(value) = response.headers().get(CONTENT_ENCODING) else {
            return Ok(());
        };
        if value.as_bytes().eq_ignore_ascii_case(b"identity") {
            return Ok(());
        }
        let value = String::from_utf8_lossy(value.as_bytes());
        let shown = self.server_text(&value, 64);
        let text = format!(
            "the server answered with Content-Encoding \"{shown}\", which this client cannot decode (it accepts gzip, br and zstd)"
        );
        Err(match media_type(response) {
            Some(MediaType::EventStream) => Error::stream(text, None),
            _ => Error::protocol(text),
        })
    }

    /// Handles one incoming message, from any stream or JSON body, as [`jsonrpc::Incoming::kind`]
    /// classifies it while `awaited` is: returns the answer when it is the response to
    /// `awaited`, or an error response whose `id` is `null` (the server could not read the
    /// request; every POST carries one request, so it answers `awaited`); a response to
    /// `awaited` of no valid shape is its answer too, [`Error::malformed`] at once; answers a server
    /// request on `session` (`ping` with `{}`, anything else with `-32601`) in a task that
    /// [`Connection::close`] awaits before any `DELETE`; hands notifications to
    /// [`crate::notices::handle`]; logs and drops responses to other ids. The one place where
    /// incoming messages are dispatched. `source` is the buffer the message's text lies in,
    /// handed to `decode` with the `result`.
    ///
    /// # Cancel safety
    /// Cancel safe: an answer to a server request on its way finishes without the caller.
    async fn route<T>(
        self: &Arc<Self>,
        message: &jsonrpc::Incoming<'_>,
        source: &Bytes,
        awaited: Awaited<'_>,
        session: &Arc<Session>,
        decode: &impl Fn(&RawValue, &Bytes) -> Decoded<T>,
    ) -> Option<Result<T, Error>> {
        let id = awaited.id;
        match message.kind(awaited) {
            Message::Response(rid, outcome) if jsonrpc::id_matches(rid, id) => {
                Some(match outcome {
                    Ok(result) => decode(result, source),
                    Err(error) => Err(self.rpc_error(error)),
                })
            }
            Message::ErrorWithoutId(error) => Some(Err(self.rpc_error(error))),
            // An answer all the same: it ends the wait at once, and nothing is left to cancel.
            Message::Malformed(rid, flaw) if rid.is_none_or(|rid| jsonrpc::id_matches(rid, id)) => {
                let holds = match flaw {
                    Flaw::Hollow => "neither a result nor an error",
                    Flaw::ErrorShape => {
                        "an error that is not a JSON-RPC error object with an integer code"
                    }
                    Flaw::NoId => "a result without the request's id",
                };
                Some(Err(Error::malformed(format!(
                    "the server's response to request {id} holds {holds}"
                ))))
            }
            Message::Response(..) | Message::Malformed(..) => {
                tracing::trace!(namespace = %self.namespace, id, "ignored a response to another request");
                None
            }
            Message::Request(_, method) if session.era == Era::Modern => {
                // A modern server sends no requests (MCP 2026-07-28: input requests travel in
                // results), and a modern client sends no responses: ignored.
                tracing::debug!(namespace = %self.namespace, id, ping = method == "ping", "ignored a request from a modern server");
                None
            }
            Message::Request(rid, method) => {
                tracing::debug!(namespace = %self.namespace, id, ping = method == "ping", "answering a server request");
                let answer = Bytes::from(jsonrpc::answer_server_request(rid, method));
                let this = Arc::clone(self);
                let on = Arc::clone(session);
                // In a task the close awaits before any DELETE: dropped with the stream it came
                // on, a half-sent answer could still reach the session after its DELETE. None
                // starts once the connection is closed or the session deleted.
                let sent = self.before_delete.spawn_on(
                    async move {
                        if this.is_closed() || on.is_deleted() {
                            return;
                        }
                        // An answer is no request: it names nothing for step-ups. Bounded, so a
                        // server that never answers this POST cannot stall the stream it asked
                        // on, nor the close.
                        // Refused 429/503 with a wait within the bound, it was not processed
                        // (RFC 6585 §4): sent once more after the wait, as a cancel is.
                        let wire = Wire::answer();
                        let deadline = tokio::time::Instant::now() + limits::GOODBYE_TIMEOUT;
                        let post = || this.post(answer.clone(), &wire, Some(&on), None);
                        match this.send_within(&on, Background::Answer, deadline, post).await {
                            Some(Ok(_)) => {}
                            Some(Err(e)) => {
                                tracing::debug!(namespace = %this.namespace, error = %e, "answering a server request failed");
                            }
                            None => {
                                tracing::debug!(namespace = %this.namespace, "answering a server request timed out");
                            }
                        }
                    },
                    &self.runtime,
                );
                // Awaited: a server asking faster than it reads answers holds its own stream,
                // not a pile of tasks.
                let _ = sent.await;
                None
            }
            Message::Notification(method) => {
                crate::notices::handle(&**self, method, message.params);
                None
            }
            Message::Invalid => {
                tracing::trace!(namespace = %self.namespace, id, "ignored a message that is not JSON-RPC");
                None
            }
        }
    }

    /// A server's JSON-RPC error with its message scrubbed and bounded. An "Invalid params"
    /// keeps only its first paragraph ([`jsonrpc::first_paragraph`], cut after the scrub): it
    /// is shown to the model beside the tool's schema, and what follows is often a stack trace.
    /// Its `data` is kept only for a modern error ([`codes::is_modern`]) and at most
    /// [`limits::MAX_ERROR_DATA_BYTES`].
    pub(super) fn rpc_error(&self, error: &RpcError) -> Error {
        let message = if error.code == codes::INVALID_PARAMS {
            let scrubbed = self.redactor.scrub(&error.message);
            self.server_text(
                &jsonrpc::first_paragraph(&scrubbed),
                limits::MAX_REASON_BYTES,
            )
            .into_owned()
        } else {
            self.server_text(&error.message, limits::MAX_REASON_BYTES)
                .into_owned()
        };
        let data = error
            .data
            .as_ref()
            .filter(|d| {
                codes::is_modern(error.code) && d.get().len() <= limits::MAX_ERROR_DATA_BYTES
            })
            .cloned();
        Error::rpc_error(RpcError {
            code: error.code,
            message,
            data,
        })
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
            BodyError::TooDeep(refusal, _) => event_too_deep(&refusal),
        }
    }
}

/// The error of a body that is one JSON-RPC error response (with or without an id), and
/// whether its id is `answering`.
fn rpc_error_in(body: &str, answering: Option<u64>) -> Option<(RpcError, bool)> {
    let messages = jsonrpc::decode(body).ok()?;
    let [message] = messages.as_slice() else {
        return None;
    };
    match message.kind(Awaited::NOTHING) {
        Message::Response(id, Err(error)) => Some((
            error.clone(),
            answering.is_some_and(|a| jsonrpc::id_matches(id, a)),
        )),
        Message::ErrorWithoutId(error) => Some((error.clone(), false)),
        _ => None,
    }
}

/// The wait a `Retry-After` asks for (RFC 9110 §10.2.3: delay-seconds or an HTTP-date, a date
/// in the past meaning zero); `None` when missing or unreadable.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // More digits than a u64 holds is still "a very long time".
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(
        date.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// Where a redirect's `Location` points, for a reason, and whether it had a query or fragment.
/// The raw value is scrubbed by `redactor` **before** anything parses it (the URL parser
/// lower-cases and decodes a host, which would hide an echoed secret from the scrubber). Its
/// query and fragment are dropped: they often hold a key, and scheme, host, port and path are
/// what a config fix needs. A relative reference is resolved against the request URL `base`
/// (RFC 9110 §10.2.2); when `hide_host` (the url's origin is a secret) and the target stays on
/// that host, the host shows as `[redacted]`. Not yet bounded.
fn redirect_target(
    location: &HeaderValue,
    base: &Url,
    redactor: &Redactor,
    hide_host: bool,
) -> (String, bool) {
    let written = String::from_utf8_lossy(location.as_bytes());
    let scrubbed = redactor.scrub(written.trim());
    let (reference, query_omitted) = match scrubbed.find(['?', '#']) {
        Some(end) => (&scrubbed[..end], true),
        None => (&scrubbed[..], false),
    };
    let url = if has_scheme(reference) {
        // Absolute: shown as the server wrote it (scrubbed), never re-serialized.
        reference.to_string()
    } else {
        match base.join(reference) {
            Ok(resolved) => {
                let same_host = resolved.host() == base.host() && resolved.port() == base.port();
                let text = if hide_host && same_host {
                    let port = resolved
                        .port()
                        .map(|port| format!(":{port}"))
                        .unwrap_or_default();
                    format!(
                        "{}://{REDACTED}{port}{}",
                        resolved.scheme(),
                        resolved.path()
                    )
                } else {
                    let mut shown = resolved;
                    shown.set_query(None);
                    shown.set_fragment(None);
                    shown.to_string()
                };
                redactor.scrub_owned(text)
            }
            Err(_) => reference.to_string(),
        }
    };
    (url, query_omitted)
}

/// Whether `reference` starts with a URI scheme and `:` (RFC 3986 §3.1), i.e. is absolute.
fn has_scheme(reference: &str) -> bool {
    let Some((scheme, _)) = reference.split_once(':') else {
        return false;
    };
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// Whether an error body (its preview) is markup — an HTML or XML page — whatever its
/// `Content-Type` said: its first non-blank character is `<` (a JSON-RPC error starts with `{`,
/// and a plain-text reason with a word). The body's own bytes are the only signal of a web page
/// sent as `text/plain` or without a type (a proxy's error page), so they are read here alone.
fn looks_like_markup(preview: &str) -> bool {
    preview.trim_start().starts_with('<')
}

/// Whether an error body says the session is gone: it names the session and says it is
/// missing, unknown, invalid, expired, terminated or not found. Two forms are read:
///
/// - a JSON-RPC error whose `message` says so (as server-everything and the TypeScript SDK
///   answer: "Bad Request: No valid session ID provided", "Session not found") and whose code is
///   not -32602 (invalid params) or -32601 (method not found), which are about the request
///   itself — a tool's own `sessionId` argument, say;
/// - a body that is not JSON-RPC (or whose `error` is no JSON-RPC error object), read as plain
///   text, which must name the session as a word of
///   its own ("session", not "sessionId" or "session_id", an argument's name): the Python SDK
///   `mcp` 1.8–1.25 (and FastMCP 2.x on it) answers "Bad Request: No valid session ID provided"
///   or "Bad Request: Missing session ID", others "Invalid or expired session".
///
/// Anything else is an ordinary 400.
fn speaks_of_session(preview: &str) -> bool {
    const GONE: [&str; 7] = [
        "missing",
        "unknown",
        "invalid",
        "no valid",
        "expired",
        "terminated",
        "not found",
    ];
    let says_gone = |message: &str| GONE.iter().any(|word| message.contains(word));
    // An `error` of no JSON-RPC shape (a string, an object without a code) is read as text.
    let decoded = jsonrpc::decode(preview).ok().filter(|messages| {
        !messages
            .iter()
            .any(|m| matches!(m.error, Some(ErrorMember::Malformed)))
    });
    match decoded {
        Some(messages) => messages.iter().any(|m| {
            m.rpc_error().is_some_and(|e| {
                let message = e.message.to_ascii_lowercase();
                e.code != codes::INVALID_PARAMS
                    && e.code != codes::METHOD_NOT_FOUND
                    && message.contains("session")
                    && says_gone(&message)
            })
        }),
        None => {
            let text = preview.to_ascii_lowercase();
            let word = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
            let names_session = text.match_indices("session").any(|(at, found)| {
                let before = at.checked_sub(1).and_then(|i| text.as_bytes().get(i));
                !word(before) && !word(text.as_bytes().get(at + found.len()))
            });
            names_session && says_gone(&text)
        }
    }
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

/// The error of a request whose answer came in an event the one JSON reader refused.
fn event_too_deep(refusal: &json::Refusal) -> Error {
    Error::protocol(format!("the server's event {refusal}"))
}

/// Reads at most [`limits::ERROR_PREVIEW_BYTES`] of an error body, cut on a char boundary, made
/// ready by the one JSON reader (a preview is not refused: cut anywhere, or nested past
/// [`limits::MAX_JSON_DEPTH`], it is still made ready whole, what is too deep written over).
async fn read_preview(response: Response) -> String {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    // A body that never ends (a silent proxy) gives what came within the bound.
    let until = tokio::time::Instant::now() + limits::ERROR_PREVIEW_TIME;
    while body.len() < limits::ERROR_PREVIEW_BYTES {
        match tokio::time::timeout_at(until, chunks.next()).await {
            Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(limits::ERROR_PREVIEW_BYTES);
    let _ = json::ready(&mut body, json::Source::Server);
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
    fn markup_is_named_by_its_first_character() {
        use super::looks_like_markup;
        assert!(looks_like_markup("<!DOCTYPE html><html>"));
        assert!(looks_like_markup("\n  <html><body>502</body></html>"));
        assert!(looks_like_markup("<?xml version=\"1.0\"?><Error/>"));
        assert!(!looks_like_markup(r#"{"jsonrpc":"2.0","error":{}}"#));
        assert!(!looks_like_markup(
            "Bad Request: No valid session ID provided"
        ));
        assert!(!looks_like_markup("a < b"));
        assert!(!looks_like_markup(""));
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let wait = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
            retry_after(&headers)
        };
        assert_eq!(wait("8"), Some(Duration::from_secs(8)));
        assert_eq!(wait(" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(wait("0"), Some(Duration::ZERO));
        assert_eq!(
            wait("99999999999999999999999"),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(wait("Sun, 06 Nov 1994 08:49:37 GMT"), Some(Duration::ZERO));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
        let until = wait(&later).unwrap();
        assert!(
            until > Duration::from_secs(3500) && until <= Duration::from_secs(3600),
            "{until:?}"
        );
        for bad in ["-1", "1.5", "soon", ""] {
            assert_eq!(wait(bad), None, "{bad:?}");
        }
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    /// [`redirect_target`] of a `Location` for a request to `base`, with `secrets` learned.
    fn targets(base: &str, secrets: &[&str], hide_host: bool) -> impl Fn(&str) -> (String, bool) {
        let base = Url::parse(base).unwrap();
        let mut redactor = Redactor::default();
        for secret in secrets {
            redactor.add_secret(secret);
        }
        move |location| {
            redirect_target(
                &HeaderValue::from_str(location).unwrap(),
                &base,
                &redactor,
                hide_host,
            )
        }
    }

    #[test]
    fn redirect_targets_resolve_against_the_request_url() {
        let target = targets(
            "http://127.0.0.1:8000/mcp",
            &["Sk-Live-4F9A8B7C6D5E"],
            false,
        );
        // (Location, the target shown, whether a query was left out)
        for (location, shown, omitted) in [
            ("/mcp/", "http://127.0.0.1:8000/mcp/", false),
            (
                "/mcp/?api_key=sk-1234567890#frag",
                "http://127.0.0.1:8000/mcp/",
                true,
            ),
            ("https://other.example/x", "https://other.example/x", false),
            (
                "https://Sk-Live-4F9A8B7C6D5E.Login.example/cb?x=1",
                "https://[redacted].Login.example/cb",
                true,
            ),
            ("//other.example/x", "http://other.example/x", false),
            ("http://[::1", "http://[::1", false),
        ] {
            assert_eq!(target(location), (shown.into(), omitted), "{location}");
        }
    }

    #[test]
    fn a_secret_host_is_never_shown_in_a_redirect_target() {
        let target = targets(
            "http://localhost:8000/a/mcp?k=v",
            &["LocalHost", "localhost"],
            true,
        );
        for (location, shown) in [
            ("/mcp/", "http://[redacted]:8000/mcp/"),
            ("mcp/", "http://[redacted]:8000/a/mcp/"),
            ("http://LocalHost:8000/x", "http://[redacted]:8000/x"),
            ("http://localhost:8000/x", "http://[redacted]:8000/x"),
            ("//other.example/x", "http://other.example/x"),
        ] {
            assert_eq!(target(location).0, shown, "{location}");
        }
    }

    #[test]
    fn only_a_json_rpc_error_about_the_session_is_an_expiry() {
        assert!(speaks_of_session(
            r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#
        ));
        assert!(!speaks_of_session(
            r#"{"jsonrpc":"2.0","error":{"code":-32602,"message":"bad params"},"id":null,"data":"session"}"#
        ));
        assert!(speaks_of_session(
            r#"{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}"#
        ));
        assert!(speaks_of_session(
            r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Bad Request: No valid session ID provided"},"id":null}"#
        ));
        // A tool's own argument error names a `sessionId` but is about the request.
        assert!(!speaks_of_session(
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid params: sessionId is required"}}"#
        ));
        // The right words under an invalid-params or method-not-found code are not an expiry.
        assert!(!speaks_of_session(
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid session id"}}"#
        ));
        assert!(!speaks_of_session(
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Session not found"}}"#
        ));
        // Naming the session without saying it is gone is not an expiry.
        assert!(!speaks_of_session(
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"session busy, try later"}}"#
        ));
        assert!(!speaks_of_session("Bad Request: no session"));
        assert!(!speaks_of_session(r#"{"hint":"session"}"#));
        // An error that is no JSON-RPC error object is read as text.
        assert!(speaks_of_session(
            r#"{"jsonrpc":"2.0","id":null,"error":"Bad Request: No valid session ID provided"}"#
        ));
        assert!(!speaks_of_session(
            r#"{"jsonrpc":"2.0","id":null,"error":{"message":"quota exceeded"}}"#
        ));
    }

    /// The plain-text answers of the Python SDK `mcp` 1.8–1.25 (FastMCP 2.x on it) and others
    /// to a session they forgot, and the near misses that stay ordinary 400s.
    #[test]
    fn a_plain_text_body_about_the_session_is_an_expiry() {
        for text in [
            "Bad Request: No valid session ID provided",
            "Bad Request: Missing session ID",
            "Invalid or expired session",
            "Not Found: Invalid or expired session ID",
            "Session not found\n",
            "  bad request: no valid session id provided  ",
            "session terminated",
            "Unknown session (s-1)",
            "Bad Request: Session-Id is missing",
        ] {
            assert!(speaks_of_session(text), "{text:?}");
        }
        for text in [
            "",
            "Bad Request",
            "Bad Request: no session",
            "Bad Request: Invalid JSON",
            "Bad Request: Missing MCP-Protocol-Version header",
            "Session busy, try later",
            // A request's own argument named after the session is about the request.
            "Missing required argument: sessionId",
            "Invalid session_id parameter",
            "invalid params: sessions must be an array",
            "Missing argument: subsession",
            // JSON-RPC keeps its own rule (the code decides), whatever its text says.
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Bad Request: No valid session ID provided"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Invalid or expired session"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"text":"invalid session"}}"#,
        ] {
            assert!(!speaks_of_session(text), "{text:?}");
        }
    }
}
