//! The seam between a reply body and SSE framing: [`SseStream`] turns a `text/event-stream`
//! response into events (`id`, `retry`, `event`, `data`), each bounded by
//! [`MAX_MESSAGE_BYTES`] while it is read. The framing itself is `eventsource-stream2`'s; nothing
//! else in the client knows which framer is used.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use eventsource_stream2::{Event, EventStream};
use futures_util::{Stream, StreamExt};
use reqwest::Response;

use super::reply::BodyError;
use crate::limits::MAX_MESSAGE_BYTES;

/// The SSE events of a response, each bounded by [`MAX_MESSAGE_BYTES`] while it is read.
pub(super) struct SseStream {
    events: std::pin::Pin<
        Box<
            dyn Stream<Item = Result<Event, eventsource_stream2::EventStreamError<BodyError>>>
                + Send,
        >,
    >,
    unread: Arc<AtomicU64>,
}

impl SseStream {
    pub(super) fn new(response: Response) -> Self {
        let unread = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&unread);
        let bytes = response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(BodyError::Http)?;
            let pending =
                counter.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64;
            if pending > MAX_MESSAGE_BYTES as u64 {
                return Err(BodyError::TooLarge);
            }
            Ok(chunk)
        });
        Self {
            events: Box::pin(EventStream::new(bytes)),
            unread,
        }
    }

    /// The next event; `None` when the stream ended.
    ///
    /// # Cancel safety
    /// Cancel safe: an event is either returned or still buffered.
    pub(super) async fn next(&mut self) -> Option<Result<Event, BodyError>> {
        let item = self.events.next().await?;
        Some(match item {
            Ok(event) => {
                self.unread.store(0, Ordering::Relaxed);
                Ok(event)
            }
            Err(e) if e.is_utf8() => Err(BodyError::Utf8),
            Err(e) => Err(e.into_transport().unwrap_or(BodyError::Utf8)),
        })
    }
}
