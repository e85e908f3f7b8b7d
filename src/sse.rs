//! Server-sent event framing: turns the bytes of a `text/event-stream` body into events, held to
//! the WHATWG HTML standard, "Server-sent events", section "Interpreting an event stream".
//!
//! This module owns the framing only. It does no I/O: [`Framer::feed`] hands it the body's
//! [`Bytes`] chunks as they arrive and [`Framer::next`] takes out the events they completed.
//! What an event means (JSON-RPC, resumption) is the HTTP client's business (`http/reply.rs`,
//! behind the seam in `http/events.rs`).
//!
//! # The rules it follows
//! - Lines end in CRLF, LF or a lone CR, wherever the chunks are cut (a CR that ends one chunk and
//!   the LF that starts the next are one line end). A CR ends its line at once; it never waits
//!   for the next byte.
//! - One UTF-8 byte order mark (`EF BB BF`) at the start of the stream is skipped, also when the
//!   chunks cut through it.
//! - An empty line dispatches the event; a line starting with `:` is a comment and is ignored; a
//!   line with a colon is `name:value` with one leading space of the value removed; a line
//!   without a colon is a field with an empty value.
//! - `data` values are joined with LF; `event` sets the type (`message` when none or empty);
//!   `id` sets the last event ID buffer unless its value contains NUL; `retry` sets the
//!   reconnection time when its value is ASCII digits only (milliseconds); other fields are
//!   ignored.
//! - The reconnection time changes when its field is read. The last event ID (the one a
//!   resumption sends as `Last-Event-ID`) changes only when an event is dispatched: the empty
//!   line copies the buffer into it, whether or not the event then dispatches anything (an event
//!   without `data` dispatches nothing). An event cut before its empty line never dispatches, so
//!   its `id` never becomes the last event ID.
//! - At the end of the stream an unfinished event is discarded.
//! - The last event ID and the reconnection time outlive the stream: [`Framer::restart`] keeps
//!   them for a resumed stream, whose last event ID buffer starts as the last event ID (the
//!   resumed stream goes on from there) instead of empty.
//!
//! # UTF-8
//! The standard decodes the stream as UTF-8 and turns invalid bytes into U+FFFD. A JSON-RPC
//! message changed that way would still parse but carry different text, so this client refuses
//! instead: an `event` or `id` value that is not UTF-8 is [`SseError::Utf8`], and so is an
//! event's data when read with [`Event::text`]. Comments and ignored fields are not checked.
//! (Line ends and colons are ASCII, so framing the bytes gives the same lines as framing the
//! decoded text.)
//!
//! # Bounds and copies
//! The bytes held for one event — its `data` values, its type, the last event ID (buffer and
//! dispatched value, once each) and the line still being read, field names included — never
//! exceed [`MAX_MESSAGE_BYTES`]: a line that would pass it is refused with [`SseError::TooLarge`]
//! before it is kept. A comment line is skipped as it arrives and holds nothing, however long.
//!
//! A line that arrives inside one chunk is a [`Bytes::slice`] of that chunk. A line cut by chunk
//! boundaries is copied piece by piece, as each chunk arrives, into one buffer of the framer's
//! own, which grows by half of its size when it must (so at most a third of it is unused room);
//! the chunks themselves are let go at once, so the HTTP client can reuse its read buffers
//! instead of keeping each alive, unused room included, until the line ends. An event with one
//! `data` line hands out that line's value without a copy, and it is then the only holder of
//! its buffer (see [`Event::data`]); one with several joins them once, into a buffer reserved at
//! its exact size.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};

use crate::limits::MAX_MESSAGE_BYTES;

/// The UTF-8 byte order mark.
const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

/// Why a stream cannot be framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SseError {
    /// One event would hold more than [`MAX_MESSAGE_BYTES`].
    TooLarge,
    /// An `event` or `id` value, or an event's data, is not UTF-8.
    Utf8,
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::TooLarge => write!(
                f,
                "an SSE event larger than the {} MiB limit",
                MAX_MESSAGE_BYTES / (1024 * 1024)
            ),
            SseError::Utf8 => f.write_str("an SSE event that is not UTF-8"),
        }
    }
}

/// One dispatched event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    /// The event type: the last `event` value, or `message` when there was none or it was empty.
    pub(crate) event: std::borrow::Cow<'static, str>,
    /// The `data` values joined with LF (UTF-8 not yet checked: see [`Event::text`]). When the
    /// event's data came in one line cut by chunks, or in several lines, nothing else holds the
    /// buffer, so a slice of it can become an owned `Vec` without a copy once the event is
    /// dropped (`From<Bytes> for Vec<u8>`).
    pub(crate) data: Bytes,
    /// The last event id when the event was dispatched (set by this event or an earlier one;
    /// empty when none).
    pub(crate) id: Arc<str>,
    /// The reconnection time this event's own `retry` field set, if any.
    pub(crate) retry: Option<Duration>,
}

impl Event {
    /// The data as text.
    ///
    /// # Errors
    /// [`SseError::Utf8`] when the data is not UTF-8.
    pub(crate) fn text(&self) -> Result<&str, SseError> {
        std::str::from_utf8(&self.data).map_err(|_| SseError::Utf8)
    }
}

/// The framing state of one event stream (see the module docs for the rules).
#[derive(Debug)]
pub(crate) struct Framer {
    /// What is left of the chunk being framed.
    input: Bytes,
    /// The line being read, copied here when it began in an earlier chunk.
    line: Vec<u8>,
    /// The rest of a comment line is being skipped.
    in_comment: bool,
    /// The last line ended in CR: an LF right after it completes that line end.
    after_cr: bool,
    /// How many bytes of a leading BOM have been seen; `None` once past the stream's start.
    bom: Option<usize>,
    /// This event's `data` values.
    data: Vec<Bytes>,
    /// Their length, each counted with the LF the standard appends after it.
    data_len: usize,
    /// This event's type, if an `event` field set one.
    event_type: Option<Bytes>,
    /// This event's `retry`, if it had a valid one.
    event_retry: Option<Duration>,
    /// The last event ID buffer: set by an `id` field, copied to `last_id` by a dispatch.
    id_buffer: Arc<str>,
    /// The last event ID: the buffer as the last dispatched (or skipped, data-less) event left it.
    last_id: Arc<str>,
    /// The reconnection time, once a `retry` field set one.
    reconnect: Option<Duration>,
}

impl Default for Framer {
    fn default() -> Self {
        Self::new()
    }
}

impl Framer {
    /// A framer at the start of a stream, with no last event id and no reconnection time.
    pub(crate) fn new() -> Self {
        Self {
            input: Bytes::new(),
            line: Vec::new(),
            in_comment: false,
            after_cr: false,
            bom: Some(0),
            data: Vec::new(),
            data_len: 0,
            event_type: None,
            event_retry: None,
            id_buffer: Arc::from(""),
            last_id: Arc::from(""),
            reconnect: None,
        }
    }

    /// Starts over at the start of a new stream (a resumption): drops every unfinished line and
    /// event (the `id` of an unfinished event included) and looks for a BOM again, but keeps the
    /// last event ID, which also starts the new stream's buffer, and the reconnection time.
    pub(crate) fn restart(&mut self) {
        let last_id = std::mem::replace(&mut self.last_id, Arc::from(""));
        let reconnect = self.reconnect;
        *self = Self::new();
        self.id_buffer = Arc::clone(&last_id);
        self.last_id = last_id;
        self.reconnect = reconnect;
    }

    /// The last event ID: the value of the last `id` field without NUL of an event that was
    /// dispatched (ended by its empty line), even one that dispatched nothing; empty when there
    /// was none (or the server sent `id` empty). An `id` of an event still unfinished does not
    /// count: if the stream ends there, that event never arrived.
    pub(crate) fn last_event_id(&self) -> &str {
        &self.last_id
    }

    /// The reconnection time the last valid `retry` field set, even one in an event that
    /// dispatched nothing.
    pub(crate) fn retry(&self) -> Option<Duration> {
        self.reconnect
    }

    /// Hands the framer the next chunk of the body. Call [`Framer::next`] until it returns
    /// `Ok(None)` before feeding another chunk: a chunk fed earlier and not yet framed is dropped
    /// from the framing (in debug builds, a panic).
    pub(crate) fn feed(&mut self, chunk: Bytes) {
        debug_assert!(
            self.input.is_empty(),
            "feed before the last chunk was framed"
        );
        self.input = chunk;
    }

    /// The bytes held for the current event (its data, type, the last event ID buffer, the
    /// dispatched last event ID when it is another value, and the pending line); never more than
    /// [`MAX_MESSAGE_BYTES`].
    pub(crate) fn held(&self) -> usize {
        let dispatched = if Arc::ptr_eq(&self.last_id, &self.id_buffer) {
            0
        } else {
            self.last_id.len()
        };
        self.line.len()
            + self.data_len
            + self.event_type.as_ref().map_or(0, Bytes::len)
            + self.id_buffer.len()
            + dispatched
    }

    /// Refuses to hold `more` bytes on top of what is held.
    fn reserve(&self, more: usize) -> Result<(), SseError> {
        if self.held().saturating_add(more) > MAX_MESSAGE_BYTES {
            Err(SseError::TooLarge)
        } else {
            Ok(())
        }
    }

    /// The next event the fed chunks complete, or `Ok(None)` when the framer needs the next
    /// chunk (it then holds no part of the chunks fed so far).
    ///
    /// # Errors
    /// [`SseError::TooLarge`] or [`SseError::Utf8`]; the stream cannot go on after either.
    pub(crate) fn next(&mut self) -> Result<Option<Event>, SseError> {
        loop {
            if self.input.is_empty() {
                // Lets go of the chunk: its buffer is the HTTP client's to reuse.
                self.input = Bytes::new();
                return Ok(None);
            }
            if let Some(seen) = self.bom {
                if !self.skip_bom(seen) {
                    return Ok(None);
                }
                continue;
            }
            if self.after_cr {
                self.after_cr = false;
                if self.input[0] == b'\n' {
                    self.input.advance(1);
                    continue;
                }
            }
            let end = memchr::memchr2(b'\n', b'\r', &self.input);
            if self.in_comment {
                match end {
                    Some(at) => self.end_line_at(at),
                    None => self.input.clear(),
                }
                self.in_comment = end.is_none();
                continue;
            }
            let Some(at) = end else {
                if self.line.is_empty() && self.input[0] == b':' {
                    self.in_comment = true;
                    self.input.clear();
                    return Ok(None);
                }
                self.reserve(self.input.len())?;
                let rest = std::mem::take(&mut self.input);
                self.keep(&rest);
                return Ok(None);
            };
            let tail = self.input.split_to(at);
            self.end_line_at(0);
            let line = if self.line.is_empty() {
                if tail.first() != Some(&b':') {
                    self.reserve(tail.len())?;
                }
                tail
            } else {
                self.reserve(tail.len())?;
                self.join_line(tail)
            };
            if let Some(event) = self.process(line)? {
                return Ok(Some(event));
            }
        }
    }

    /// Matches the stream's first bytes against the BOM. Returns whether the start is settled
    /// (`false`: the input ran out inside what may still be a BOM).
    fn skip_bom(&mut self, mut seen: usize) -> bool {
        while seen < BOM.len() {
            let Some(&byte) = self.input.first() else {
                self.bom = Some(seen);
                return false;
            };
            if byte != BOM[seen] {
                // Not a BOM: the bytes matched so far start the first line.
                if seen > 0 {
                    self.keep(&BOM[..seen]);
                }
                break;
            }
            self.input.advance(1);
            seen += 1;
        }
        self.bom = None;
        true
    }

    /// Consumes the line end at `at` in the input (after `at` bytes of line).
    fn end_line_at(&mut self, at: usize) {
        self.input.advance(at);
        if self.input[0] == b'\r' {
            self.after_cr = true;
        }
        self.input.advance(1);
    }

    /// Appends `piece` to the pending line. The buffer grows to at least half as much again as
    /// it holds (never past [`MAX_MESSAGE_BYTES`] unless `piece` needs it), so a long line costs
    /// few reallocations and at most a third of the buffer is unused room.
    fn keep(&mut self, piece: &[u8]) {
        let needed = self.line.len() + piece.len();
        if needed > self.line.capacity() {
            let grown = self.line.capacity() + self.line.capacity() / 2;
            let target = grown.min(MAX_MESSAGE_BYTES).max(needed);
            self.line.reserve_exact(target - self.line.len());
        }
        self.line.extend_from_slice(piece);
    }

    /// The pending line ended by `tail`, as one buffer that nothing else holds.
    fn join_line(&mut self, tail: Bytes) -> Bytes {
        self.keep(&tail);
        Bytes::from(std::mem::take(&mut self.line))
    }

    /// Interprets one complete line (without its line end).
    fn process(&mut self, line: Bytes) -> Result<Option<Event>, SseError> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return Ok(None);
        }
        let (name_end, value_start) = match memchr::memchr(b':', &line) {
            Some(colon) if line.get(colon + 1) == Some(&b' ') => (colon, colon + 2),
            Some(colon) => (colon, colon + 1),
            None => (line.len(), line.len()),
        };
        let value = line.slice(value_start..);
        match &line[..name_end] {
            b"data" => {
                self.data_len += value.len() + 1;
                self.data.push(value);
            }
            b"event" => self.event_type = Some(value),
            // An id with NUL is ignored.
            b"id" if !value.contains(&0) => {
                let id = std::str::from_utf8(&value).map_err(|_| SseError::Utf8)?;
                self.id_buffer = Arc::from(id);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Saturates: a value past u64 milliseconds means "as long as possible".
                let millis = value.iter().fold(0u64, |n, d| {
                    n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                let retry = Duration::from_millis(millis);
                self.reconnect = Some(retry);
                self.event_retry = Some(retry);
            }
            _ => {}
        }
        Ok(None)
    }

    /// Ends the current event: the last event ID buffer becomes the last event ID, and the
    /// event is dispatched if it has data.
    fn dispatch(&mut self) -> Result<Option<Event>, SseError> {
        if !Arc::ptr_eq(&self.last_id, &self.id_buffer) {
            self.last_id = Arc::clone(&self.id_buffer);
        }
        let event_type = self.event_type.take();
        let retry = self.event_retry.take();
        self.data_len = 0;
        if self.data.is_empty() {
            return Ok(None);
        }
        let data = if self.data.len() == 1 {
            self.data.pop().unwrap_or_default()
        } else {
            let size = self.data.iter().map(|d| d.len() + 1).sum::<usize>() - 1;
            let mut joined = Vec::with_capacity(size);
            for (i, piece) in self.data.drain(..).enumerate() {
                if i > 0 {
                    joined.push(b'\n');
                }
                joined.extend_from_slice(&piece);
            }
            Bytes::from(joined)
        };
        let event = match event_type {
            Some(name) if !name.is_empty() => std::str::from_utf8(&name)
                .map_err(|_| SseError::Utf8)?
                .to_owned()
                .into(),
            _ => "message".into(),
        };
        Ok(Some(Event {
            event,
            data,
            id: Arc::clone(&self.last_id),
            retry,
        }))
    }
}

/// Everything a [`Framer`] made of a stream: the events, the error that stopped it if any, and
/// the last event id and the reconnection time at the end.
#[cfg(any(test, fuzzing))]
pub(crate) type Framed = (Vec<Event>, Option<SseError>, String, Option<Duration>);

/// Frames `stream` fed in chunks of `sizes` bytes (used in turn, each at least 1), calling
/// `each` with the framer after every chunk's feed and before each event is kept. The test
/// oracle shared by the unit tests and the fuzz target: where the chunks are cut must never
/// change what it made.
#[cfg(any(test, fuzzing))]
pub(crate) fn frame_in_chunks(
    stream: &Bytes,
    sizes: &[usize],
    mut each: impl FnMut(&Framer, Option<&Event>),
) -> Framed {
    let mut framer = Framer::new();
    let mut events = Vec::new();
    let (mut at, mut turn) = (0, 0);
    while at < stream.len() {
        let size = sizes[turn % sizes.len()].min(stream.len() - at);
        turn += 1;
        framer.feed(stream.slice(at..at + size));
        at += size;
        loop {
            each(&framer, None);
            match framer.next() {
                Ok(Some(event)) => {
                    each(&framer, Some(&event));
                    events.push(event);
                }
                Ok(None) => break,
                Err(e) => {
                    return (
                        events,
                        Some(e),
                        framer.last_event_id().into(),
                        framer.retry(),
                    );
                }
            }
        }
    }
    (events, None, framer.last_event_id().into(), framer.retry())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An event as plain values, for exact comparisons.
    #[derive(Debug, Clone, PartialEq)]
    struct Seen {
        event: String,
        data: String,
        id: String,
        retry: Option<u64>,
    }

    fn seen(event: &Event) -> Seen {
        Seen {
            event: event.event.to_string(),
            data: event.text().unwrap().to_string(),
            id: event.id.to_string(),
            retry: event.retry.map(|r| r.as_millis() as u64),
        }
    }

    fn ev(event: &str, data: &str, id: &str, retry: Option<u64>) -> Seen {
        Seen {
            event: event.into(),
            data: data.into(),
            id: id.into(),
            retry,
        }
    }

    fn msg(data: &str) -> Seen {
        ev("message", data, "", None)
    }

    /// Feeds `framer` one chunk and takes out every event it completes.
    fn feed(framer: &mut Framer, chunk: &[u8]) -> Result<Vec<Seen>, SseError> {
        framer.feed(Bytes::copy_from_slice(chunk));
        let mut out = Vec::new();
        while let Some(event) = framer.next()? {
            out.push(seen(&event));
        }
        Ok(out)
    }

    /// Feeds `framer` one chunk: it completes exactly `events`, and the last event ID is then
    /// `last`.
    #[track_caller]
    fn fed(framer: &mut Framer, chunk: &[u8], events: &[Seen], last: &str) {
        assert_eq!(feed(framer, chunk).unwrap(), events);
        assert_eq!(framer.last_event_id(), last);
    }

    /// Feeds `framer` each chunk in turn: each completes no event, and the framer then holds
    /// the bytes given with it.
    #[track_caller]
    fn fed_holding(framer: &mut Framer, steps: &[(&[u8], usize)]) {
        for &(chunk, held) in steps {
            assert_eq!(feed(framer, chunk).unwrap(), [], "{chunk:?}");
            assert_eq!(framer.held(), held, "{chunk:?}");
        }
    }

    /// Frames `chunks` in order with a new framer; every event, in order.
    fn frame(chunks: &[&[u8]]) -> Vec<Seen> {
        let mut framer = Framer::new();
        chunks
            .iter()
            .flat_map(|c| feed(&mut framer, c).unwrap())
            .collect()
    }

    #[test]
    fn lf_crlf_and_lone_cr_all_end_lines() {
        assert_eq!(
            frame(&[b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\r\n\ndata: e\n\r"]),
            [msg("a"), msg("b"), msg("c"), msg("d"), msg("e")]
        );
        // A CR followed by something else than LF ends the line alone.
        assert_eq!(frame(&[b"data: x\rdata: y\r\r"]), [msg("x\ny")]);
    }

    #[test]
    fn cr_at_a_chunk_end_and_lf_at_the_next_start_are_one_line_end() {
        let mut framer = Framer::new();
        assert_eq!(feed(&mut framer, b"data: a\r").unwrap(), []);
        assert_eq!(feed(&mut framer, b"\ndata: b\r").unwrap(), []);
        // The CR of the empty line dispatches at once, before its LF arrives.
        assert_eq!(feed(&mut framer, b"\n\r").unwrap(), [msg("a\nb")]);
        // That LF is the rest of the CRLF, not a second (empty) line.
        assert_eq!(feed(&mut framer, b"\n").unwrap(), []);
        assert_eq!(feed(&mut framer, b"data: c\n\n").unwrap(), [msg("c")]);
    }

    /// eventsource-stream2 holds a line that ends in CR until the next byte arrives; the
    /// standard ends it there.
    #[test]
    fn a_lone_cr_at_the_end_of_what_arrived_dispatches_without_waiting() {
        let mut framer = Framer::new();
        assert_eq!(
            feed(&mut framer, b"id: 7\rdata: now\r\r").unwrap(),
            [ev("message", "now", "7", None)]
        );
    }

    #[test]
    fn a_bom_at_the_stream_start_is_skipped_once_even_across_chunks() {
        assert_eq!(frame(&[b"\xEF\xBB\xBFdata: a\n\n"]), [msg("a")]);
        assert_eq!(frame(&[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"]), [msg("a")]);
        // A second BOM is part of the field name, which is then unknown.
        assert_eq!(
            frame(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n"]),
            [msg("b")]
        );
        // Only at the start of the stream.
        assert_eq!(
            frame(&[b"data: a\n\n\xEF\xBB\xBFdata: b\n\ndata: c\n\n"]),
            [msg("a"), msg("c")]
        );
        // The start of a BOM that turns out not to be one begins the first line.
        let mut framer = Framer::new();
        assert_eq!(feed(&mut framer, b"\xEF\xBB").unwrap(), []);
        assert_eq!(feed(&mut framer, b"x\n\ndata: b\n\n").unwrap(), [msg("b")]);
        assert_eq!(framer.held(), 0);
    }

    #[test]
    fn a_field_without_colon_has_an_empty_value() {
        assert_eq!(frame(&[b"data\n\n"]), [msg("")]);
        assert_eq!(frame(&[b"data\ndata\n\n"]), [msg("\n")]);
        assert_eq!(frame(&[b"data: x\nevent\n\n"]), [msg("x")]);
        fed(&mut Framer::new(), b"id: 5\nid\n\n", &[], "");
    }

    #[test]
    fn exactly_one_leading_space_of_a_value_is_removed() {
        assert_eq!(
            frame(&[b"data:x\n\ndata: x\n\ndata:  x\n\ndata:\tx\n\ndata: a:b\n\n"]),
            [msg("x"), msg("x"), msg(" x"), msg("\tx"), msg("a:b")]
        );
        assert_eq!(
            frame(&[b"event:  ping\ndata: x\n\n"]),
            [ev(" ping", "x", "", None)]
        );
    }

    #[test]
    fn data_lines_are_joined_with_lf_and_one_trailing_lf_is_dropped() {
        assert_eq!(frame(&[b"data: a\ndata: b\ndata:\n\n"]), [msg("a\nb\n")]);
        assert_eq!(
            frame(&[b"data: {\"a\":\ndata: 1}\n\n"]),
            [msg("{\"a\":\n1}")]
        );
        // An event with no data line dispatches nothing.
        assert_eq!(frame(&[b"event: x\n\n\n\n"]), []);
    }

    #[test]
    fn the_event_type_defaults_to_message_and_resets_after_each_event() {
        assert_eq!(
            frame(&[
                b"event: ping\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\nevent: lost\n\ndata: 4\n\n"
            ]),
            [ev("ping", "1", "", None), msg("2"), msg("3"), msg("4")]
        );
    }

    /// A line cut by chunks is copied out of them as they arrive, so the framer holds on to no
    /// chunk (the HTTP client may reuse its buffers), and the event's data is then the only
    /// holder of its buffer: it becomes a `Vec` in place.
    #[test]
    fn a_line_cut_by_chunks_keeps_no_chunk_and_owns_its_buffer() {
        let mut framer = Framer::new();
        let first = Bytes::from(b"data: {\"a\":".to_vec());
        framer.feed(first.clone());
        assert_eq!(framer.next(), Ok(None));
        assert!(first.is_unique(), "the framer still holds the first chunk");
        assert_eq!(framer.held(), 11);
        let second = Bytes::from(b"1}\n\n".to_vec());
        framer.feed(second.clone());
        let event = framer.next().unwrap().unwrap();
        assert_eq!(framer.next(), Ok(None));
        assert!(
            second.is_unique(),
            "the framer still holds the second chunk"
        );
        assert_eq!(event.text(), Ok("{\"a\":1}"));
        assert_eq!(framer.held(), 0);
        // The buffer starts with the line's `data: `; the Vec takes it over from there.
        let at = event.data.as_ptr() as usize;
        let data = Vec::from(event.data);
        assert_eq!(data.as_ptr() as usize, at - b"data: ".len());
        assert_eq!(data, b"{\"a\":1}");
    }

    /// eventsource-stream2 forgets the id of an event without data; resumption needs it.
    #[test]
    fn an_id_counts_even_when_its_event_dispatches_nothing() {
        let mut framer = Framer::new();
        let first = [ev("message", "x", "p0", Some(5))];
        fed(&mut framer, b"id: p0\nretry: 5\ndata: x\n\n", &first, "p0");
        fed(&mut framer, b"id: p1\nretry: 250\n\n", &[], "p1");
        assert_eq!(framer.retry(), Some(Duration::from_millis(250)));
        // The id stays with later events until another replaces it; retry is per event.
        let later = [msg_with_id("y", "p1")];
        fed(&mut framer, b"data: y\n\n", &later, "p1");
        // An unfinished event's id is only in the buffer: its dispatch makes it the last one.
        fed(&mut framer, b"id: p2\ndata: cut off", &[], "p1");
        fed(&mut framer, b"\n\n", &[msg_with_id("cut off", "p2")], "p2");
        // An empty id clears it, and an event sees the id as it stands when it dispatches.
        fed(&mut framer, b"data: z\nid\n\n", &[msg("z")], "");
    }

    /// WHATWG "Interpreting an event stream": `id` sets the last event ID buffer, only the
    /// dispatch copies it into the last event ID, and an event the stream cuts before its empty
    /// line is never dispatched. A resumption must ask for what comes after the last event that
    /// arrived, not after one that was cut off.
    #[test]
    fn an_event_cut_before_its_empty_line_leaves_the_last_event_id() {
        const CUT: &[u8] = b"id: e1\ndata: n\n\nid: e2\ndata: {partial";
        let dispatched = [msg_with_id("n", "e1")];
        fed(&mut Framer::new(), CUT, &dispatched, "e1");
        // An event without data dispatches nothing but still sets the last event ID, once its
        // empty line arrives; until then its id is only in the buffer.
        let mut framer = Framer::new();
        fed(&mut framer, b"id: e1\n\nid: e2\n", &[], "e1");
        fed(&mut framer, b"\r", &[], "e2");
        // The cut event's id does not carry over a resumption: the new stream's events see the
        // last dispatched id until one of them sets another.
        let mut framer = Framer::new();
        fed(&mut framer, CUT, &dispatched, "e1");
        framer.restart();
        assert_eq!(framer.last_event_id(), "e1");
        let resumed = [msg_with_id("a", "e1"), msg_with_id("b", "e2")];
        fed(
            &mut framer,
            b"data: a\n\nid: e2\ndata: b\n\n",
            &resumed,
            "e2",
        );
        // At the end of a stream cut mid-event the last event ID is that of the last dispatch,
        // however the chunks were cut.
        let stream = Bytes::from_static(CUT);
        for sizes in [&[1][..], &[3, 7], &[100]] {
            let (events, error, last, _) = frame_in_chunks(&stream, sizes, |_, _| {});
            assert_eq!(events.len(), 1);
            assert_eq!(error, None);
            assert_eq!(last, "e1", "{sizes:?}");
        }
    }

    /// The buffer and the dispatched last event ID are held once each, once each when they are
    /// the same value.
    #[test]
    fn the_last_event_id_is_held_once_when_dispatched() {
        let mut framer = Framer::new();
        fed_holding(
            &mut framer,
            &[(b"id: abc\n\n", 3), (b"id: defgh\n", 3 + 5), (b"\n", 5)],
        );
        framer.restart();
        assert_eq!(framer.held(), 5);
    }

    #[test]
    fn an_id_with_nul_is_ignored() {
        let chunk = b"id: a\nid: b\0c\ndata: x\n\n";
        fed(&mut Framer::new(), chunk, &[msg_with_id("x", "a")], "a");
    }

    #[test]
    fn retry_takes_ascii_digits_only() {
        let mut framer = Framer::new();
        let bad = [
            "retry: -1",
            "retry: +5",
            "retry: 1.5",
            "retry: 10a",
            "retry:",
            "retry",
            "retry:  7",
            "retry: ١",
        ]
        .map(|lines| (lines, None));
        let good = [
            ("retry: 0250", Some(Duration::from_millis(250))),
            ("retry: 0", Some(Duration::ZERO)),
            (
                "retry: 99999999999999999999999",
                Some(Duration::from_millis(u64::MAX)),
            ),
            // A bad value leaves the last good one.
            ("retry: 5\nretry: x", Some(Duration::from_millis(5))),
        ];
        for (lines, retry) in bad.into_iter().chain(good) {
            assert_eq!(
                feed(&mut framer, format!("{lines}\n\n").as_bytes()).unwrap(),
                []
            );
            assert_eq!(framer.retry(), retry, "{lines}");
        }
    }

    #[test]
    fn comments_are_ignored_and_hold_nothing_however_long() {
        assert_eq!(frame(&[b": hi\ndata: a\n: there\n\n:\n\n"]), [msg("a")]);
        let mut framer = Framer::new();
        assert_eq!(feed(&mut framer, b"data: a\n:").unwrap(), []);
        let chunk = vec![b'x'; 1024 * 1024];
        for _ in 0..20 {
            assert_eq!(feed(&mut framer, &chunk).unwrap(), []);
            assert_eq!(framer.held(), "a".len() + 1);
        }
        // A comment line that begins with a chunk.
        assert_eq!(feed(&mut framer, b"\r").unwrap(), []);
        assert_eq!(feed(&mut framer, b":").unwrap(), []);
        assert_eq!(feed(&mut framer, &chunk).unwrap(), []);
        assert_eq!(framer.held(), 2);
        assert_eq!(feed(&mut framer, b"\n\n").unwrap(), [msg("a")]);
        assert_eq!(framer.held(), 0);
    }

    #[test]
    fn other_fields_are_ignored() {
        assert_eq!(
            frame(&[b"Data: no\nDATA: no\ndata : no\nfoo: bar\ndata: yes\n\n"]),
            [msg("yes")]
        );
    }

    #[test]
    fn restart_drops_the_unfinished_event_but_keeps_id_and_retry() {
        let mut framer = Framer::new();
        assert_eq!(
            feed(
                &mut framer,
                b"id: 9\nretry: 300\n\nid: 10\nevent: e\ndata: half"
            )
            .unwrap(),
            []
        );
        framer.restart();
        assert_eq!(
            feed(&mut framer, b"\xEF\xBB\xBFdata: b\n\n").unwrap(),
            [msg_with_id("b", "9")]
        );
        assert_eq!(framer.retry(), Some(Duration::from_millis(300)));
    }

    fn msg_with_id(data: &str, id: &str) -> Seen {
        ev("message", data, id, None)
    }

    #[test]
    fn one_event_is_bounded_exactly_at_the_limit() {
        // The line, field name included, may be exactly the limit.
        let mut framer = Framer::new();
        let mut line = b"data:".to_vec();
        line.resize(MAX_MESSAGE_BYTES, b'a');
        for part in line.chunks(1 << 20) {
            assert_eq!(feed(&mut framer, part).unwrap(), []);
        }
        assert_eq!(framer.held(), MAX_MESSAGE_BYTES);
        framer.feed(Bytes::from_static(b"\n\n"));
        assert_eq!(
            framer.next().unwrap().unwrap().data.len(),
            MAX_MESSAGE_BYTES - 5
        );
        // One byte more is refused as it arrives.
        let mut framer = Framer::new();
        line.push(b'a');
        let mut result = Ok(Vec::new());
        for part in line.chunks(1 << 20) {
            result = feed(&mut framer, part);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(SseError::TooLarge));
        // Within one chunk too.
        let mut framer = Framer::new();
        line.extend_from_slice(b"\n\n");
        assert_eq!(feed(&mut framer, &line), Err(SseError::TooLarge));
        assert_eq!(
            SseError::TooLarge.to_string(),
            "an SSE event larger than the 16 MiB limit"
        );
    }

    #[test]
    fn many_data_lines_count_together_with_their_line_feeds() {
        let mut framer = Framer::new();
        let mut line = b"data:".to_vec();
        line.resize(1 << 20, b'a');
        line.push(b'\n');
        // Each line keeps 2^20 - 5 value bytes plus its LF.
        let kept = (1 << 20) - 5 + 1;
        for _ in 0..MAX_MESSAGE_BYTES / kept {
            assert_eq!(feed(&mut framer, &line).unwrap(), []);
        }
        assert_eq!(framer.held(), (MAX_MESSAGE_BYTES / kept) * kept);
        assert_eq!(feed(&mut framer, &line), Err(SseError::TooLarge));
        // Many events, each under the limit, are fine.
        let mut framer = Framer::new();
        for _ in 0..40 {
            assert_eq!(feed(&mut framer, &line).unwrap(), []);
            assert_eq!(feed(&mut framer, b"\n").unwrap().len(), 1);
        }
    }

    #[test]
    fn data_inside_one_chunk_is_a_slice_of_it() {
        let chunk = Bytes::from_static(b"id: 1\ndata: {\"jsonrpc\":\"2.0\"}\n\n");
        let mut framer = Framer::new();
        framer.feed(chunk.clone());
        let event = framer.next().unwrap().unwrap();
        let range = chunk.as_ptr_range();
        assert!(range.contains(&event.data.as_ptr()));
        assert_eq!(event.text(), Ok("{\"jsonrpc\":\"2.0\"}"));
        // A line cut by chunks is joined into one buffer of its exact size.
        let mut framer = Framer::new();
        assert_eq!(feed(&mut framer, b"data: ab").unwrap(), []);
        assert_eq!(feed(&mut framer, b"cd").unwrap(), []);
        assert_eq!(framer.held(), 10);
        framer.feed(Bytes::from_static(b"ef\n\n"));
        assert_eq!(framer.next().unwrap().unwrap().text(), Ok("abcdef"));
    }

    #[test]
    fn invalid_utf8_is_refused_where_it_would_reach_a_message() {
        let mut framer = Framer::new();
        framer.feed(Bytes::from_static(b"data: \xFF\n\n"));
        assert_eq!(framer.next().unwrap().unwrap().text(), Err(SseError::Utf8));
        let mut framer = Framer::new();
        assert_eq!(feed(&mut framer, b"id: \xC3\n"), Err(SseError::Utf8));
        let mut framer = Framer::new();
        assert_eq!(
            feed(&mut framer, b"event: \xC3\ndata: x\n\n"),
            Err(SseError::Utf8)
        );
        // Comments, unknown fields and a bad retry are never read as text.
        assert_eq!(
            frame(&[b": \xFF\n\xFF: x\nretry: \xFF\ndata: ok\n\n"]),
            [msg("ok")]
        );
        assert_eq!(SseError::Utf8.to_string(), "an SSE event that is not UTF-8");
    }

    /// A line of a generated stream, for the differential test.
    fn line() -> impl Strategy<Value = String> {
        let value = "[a-z0-9 :{}\"é\u{0}]{0,12}";
        prop_oneof![
            value.prop_map(|v| format!("data:{v}")),
            value.prop_map(|v| format!("data: {v}")),
            value.prop_map(|v| format!("event:{v}")),
            value.prop_map(|v| format!("id: {v}")),
            "[0-9]{0,6}".prop_map(|v| format!("retry: {v}")),
            "[0-9a-z.-]{0,4}".prop_map(|v| format!("retry:{v}")),
            value.prop_map(|v| format!(":{v}")),
            value.prop_map(|v| format!("x-other: {v}")),
            prop_oneof![Just("data"), Just("id"), Just("event"), Just("retry")]
                .prop_map(str::to_string),
            Just(String::new()),
            Just(String::new()),
        ]
    }

    /// eventsource-stream2's events for the same chunks.
    fn oracle(chunks: &[Vec<u8>]) -> Vec<Seen> {
        let stream = futures_util::stream::iter(
            chunks
                .iter()
                .cloned()
                .map(Ok::<_, std::convert::Infallible>),
        );
        let mut stream = std::pin::pin!(eventsource_stream2::EventStream::new(stream));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut out = Vec::new();
        loop {
            match futures_util::Stream::poll_next(stream.as_mut(), &mut cx) {
                std::task::Poll::Ready(Some(Ok(e))) => out.push(Seen {
                    event: e.event,
                    data: e.data,
                    id: e.id,
                    retry: e.retry.map(|r| r.as_millis() as u64),
                }),
                std::task::Poll::Ready(Some(Err(e))) => panic!("oracle failed: {e}"),
                std::task::Poll::Ready(None) => return out,
                std::task::Poll::Pending => unreachable!("an iterator stream is always ready"),
            }
        }
    }

    fn outcome(stream: &[u8], sizes: &[usize]) -> Framed {
        frame_in_chunks(&Bytes::copy_from_slice(stream), sizes, |_, _| {})
    }

    proptest! {
        /// Where the chunks are cut never changes the outcome, whatever the bytes (CR, LF,
        /// colons, BOM pieces, NUL, invalid UTF-8 included).
        #[test]
        fn chunk_cuts_never_change_the_outcome(
            stream in proptest::collection::vec(
                prop_oneof![
                    Just(b'\r'), Just(b'\n'), Just(b':'), Just(b' '), Just(0u8), Just(0xEF),
                    Just(0xBB), Just(0xBF), Just(0xFF), Just(b'd'), Just(b'a'), Just(b't'),
                    Just(b'i'), Just(b'e'), Just(b'v'), Just(b'n'), Just(b'r'), Just(b'y'),
                    Just(b'1'), any::<u8>(),
                ],
                0..300,
            ),
            sizes in proptest::collection::vec(1usize..20, 1..6),
        ) {
            let whole = outcome(&stream, &[stream.len().max(1)]);
            prop_assert_eq!(outcome(&stream, &sizes), whole);
        }

        /// Against eventsource-stream2 on streams where it follows the standard: LF and CRLF line
        /// ends (its lone CR handling waits for more input), no BOM, UTF-8 only, retry values
        /// without a sign, and comparing dispatched events only (it drops the id and retry of an
        /// event without data from its own last-id state, which these events do not show).
        #[test]
        fn agrees_with_eventsource_stream2(
            lines in proptest::collection::vec((line(), any::<bool>()), 0..40),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let mut stream = Vec::new();
            for (line, crlf) in &lines {
                stream.extend_from_slice(line.as_bytes());
                stream.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
            }
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
            at.push(0);
            at.push(stream.len());
            at.sort_unstable();
            let chunks: Vec<Vec<u8>> = at.windows(2).map(|w| stream[w[0]..w[1]].to_vec()).collect();
            let mut framer = Framer::new();
            let mut ours = Vec::new();
            for chunk in &chunks {
                ours.extend(feed(&mut framer, chunk).unwrap());
            }
            prop_assert_eq!(ours, oracle(&chunks));
        }
    }
}
