//! The seam between a reply body and SSE framing: [`SseStream`] reads a `text/event-stream`
//! response chunk by chunk and hands the chunks to the crate's own framer ([`sse::Framer`],
//! the WHATWG "event stream interpretation" rules), which bounds each event by
//! [`crate::limits::MAX_MESSAGE_BYTES`] while it is read. Nothing else in the client knows how
//! events are framed. It also owns [`BodyError`], why reading any reply body failed, and
//! [`AfterAnswer`], how a stream's end is read once its answer came.

use std::time::Duration;

use reqwest::Response;

use crate::json;
use crate::sse;

/// How the end of an event stream is read once it brought the answer: always to its end (what is
/// here at once, the rest in the background; at most [`crate::limits::DRAIN_TIME`] and
/// [`crate::limits::DRAIN_BYTES`]), so the connection goes back to the pool.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterAnswer {
    /// The caller goes on at once.
    Background,
    /// The caller waits for that end for at most [`crate::limits::PROBE_DRAIN_WAIT`]: the era
    /// probe, whose next request (the first `tools/list`) then reuses the connection instead
    /// of opening another.
    Briefly,
}

/// Why reading a body failed, as a JSON body ([`super::reply`]) or as events ([`SseStream`]).
pub(super) enum BodyError {
    /// The connection failed while the body was read.
    Http(reqwest::Error),
    /// The body, or one event of it, is over [`crate::limits::MAX_MESSAGE_BYTES`].
    TooLarge,
    /// The body, or one event of it, is not UTF-8.
    Utf8,
    /// An event's data nests past [`crate::limits::MAX_JSON_DEPTH`] (the one JSON reader's
    /// refusal), with the event, its data made ready all the same (what is too deep written
    /// over): a reader tells by it whether the refused text answered its request.
    TooDeep(json::Refusal, sse::Event),
}

/// The SSE events of a response and of the resumptions that continue it. The framer outlives
/// each response, so the last event id and the server's `retry` carry over a resumption.
pub(super) struct SseStream {
    response: Response,
    framer: sse::Framer,
}

impl SseStream {
    pub(super) fn new(response: Response) -> Self {
        Self {
            response,
            framer: sse::Framer::new(),
        }
    }

    /// Goes on with `response`, the stream of a resumption (`GET` + `Last-Event-ID`): the
    /// unfinished event of the old stream is dropped, its last event id and `retry` are kept.
    pub(super) fn resume(&mut self, response: Response) {
        self.response = response;
        self.framer.restart();
    }

    /// The last event id the server set, on this stream or an earlier one; empty when none.
    pub(super) fn last_event_id(&self) -> &str {
        self.framer.last_event_id()
    }

    /// The reconnection time the server last set with `retry`, unbounded; `None` when none.
    pub(super) fn retry(&self) -> Option<Duration> {
        self.framer.retry()
    }

    /// Reads the rest of the body and drops it, at most [`crate::limits::DRAIN_BYTES`] within
    /// [`crate::limits::DRAIN_TIME`]: once the answer was read, the stream's end is usually one
    /// chunk away, and a body read to its end gives its connection back to the pool, where a
    /// body dropped early closes it.
    ///
    /// What of the body is here already is read at once, without waiting: `None` when that was
    /// its end (or over the bound, or the connection failed); else the future that reads the
    /// rest, for the caller to run in the background.
    ///
    /// # Cancel safety
    /// The future is cancel safe: dropping it closes the connection, as dropping the stream
    /// would.
    pub(super) fn drain(mut self) -> Option<impl Future<Output = ()> + Send + 'static> {
        use std::task::{Context, Poll, Waker};
        let mut left = crate::limits::DRAIN_BYTES;
        // Polled with a waker that wakes nothing: a chunk not here yet is left for the future.
        let mut here = Context::from_waker(Waker::noop());
        loop {
            let polled = std::pin::pin!(self.response.chunk()).poll(&mut here);
            match polled {
                Poll::Ready(Ok(Some(chunk))) => left = left.checked_sub(chunk.len())?,
                Poll::Ready(_) => return None,
                Poll::Pending => break,
            }
        }
        Some(async move {
            let read = async {
                while let Ok(Some(chunk)) = self.response.chunk().await {
                    match left.checked_sub(chunk.len()) {
                        Some(rest) => left = rest,
                        None => return,
                    }
                }
            };
            let _ = tokio::time::timeout(crate::limits::DRAIN_TIME, read).await;
        })
    }

    /// The next event; `None` when the body ended.
    ///
    /// # Cancel safety
    /// Cancel safe: a chunk is handed to the framer as soon as it is read, so dropping this
    /// future loses no bytes.
    pub(super) async fn next(&mut self) -> Option<Result<sse::Event, BodyError>> {
        loop {
            match self.framer.next() {
                Ok(Some(mut event)) => {
                    return Some(
                        match json::ready_shared(&mut event.data, json::Source::Server) {
                            Ok(()) => Ok(event),
                            Err(refusal) => Err(BodyError::TooDeep(refusal, event)),
                        },
                    );
                }
                Ok(None) => {}
                Err(sse::SseError::TooLarge) => return Some(Err(BodyError::TooLarge)),
                Err(sse::SseError::Utf8) => return Some(Err(BodyError::Utf8)),
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.framer.feed(chunk),
                Ok(None) => return None,
                Err(e) => return Some(Err(BodyError::Http(e))),
            }
        }
    }
}
