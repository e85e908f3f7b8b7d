//! Every bound the Pack puts on time and on what a server may send, in one place.
//!
//! A server is on the other side of a trust boundary: each limit here is on by default, and a
//! refusal names the limit and what was measured (never the offending bytes). README "Lifecycle and limits"
//! (`docs/lifecycle.md`) lists what a user sees when one trips.

use std::time::Duration;

/// A start (connect, `initialize`, `notifications/initialized`, every `tools/list` page) must
/// finish within this (README "Lifecycle and limits").
pub(crate) const START_DEADLINE: Duration = Duration::from_secs(120);

/// A `tools/call` waits at most this long for its result (README "Lifecycle and limits").
pub(crate) const CALL_DEADLINE: Duration = Duration::from_secs(300);

/// The first wait after a failed start; each later wait doubles, up to half of [`RETRY_MAX`],
/// and each gets a random jitter of up to as much again (README "Lifecycle and limits").
pub(crate) const RETRY_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two starts, jitter and `Retry-After` included (README "Lifecycle and limits").
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(60);

/// The first wait before a new `initialize` is tried again after a 404 or a refused connection
/// (a server that is restarting); each later wait doubles.
pub(crate) const REINIT_RETRY_FIRST: Duration = Duration::from_millis(100);

/// How often a new `initialize` is tried again after a 404 or a refused connection: 5 waits of
/// 100 ms doubling, 3.1 s in all.
pub(crate) const REINIT_RETRIES: usize = 5;

/// How long a best-effort `DELETE` of a session, or a `notifications/cancelled`, may take.
pub(crate) const GOODBYE_TIMEOUT: Duration = Duration::from_secs(5);

/// At the Pack's drop, how long an `initialize` still unanswered may take to bring the session
/// id it makes (then deleted); after that it is given up. A server that hangs costs no more.
pub(crate) const HANDSHAKE_GRACE: Duration = Duration::from_secs(1);

/// The whole of a connection's cleanup at the Pack's drop: cancels, then `DELETE`s. The steps
/// before the `DELETE`s end [`GOODBYE_TIMEOUT`] before it, so the `DELETE`s always get their
/// time; the host CLI (`docs/host-cli.md`) waits 11 s.
pub(crate) const CLOSE_DEADLINE: Duration = Duration::from_secs(10);

/// How long after the Pack's drop the future of `Pack::closed` (README "Add it to a Host")
/// waits at most for every server task to end: [`CLOSE_DEADLINE`] plus 1 s for the tasks to
/// finish after their last `DELETE`.
pub(crate) const CLOSED_WAIT: Duration = Duration::from_secs(11);

/// How long connecting a TCP (and TLS) connection may take; the start and call deadlines still
/// govern everything after it.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest HTTP response body (JSON), and the largest single SSE event, in bytes. Enforced
/// while reading: nothing beyond it is buffered.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How deep arrays and objects may nest in any JSON text the Pack reads (a server's body, an
/// `mcp.json`, an OAuth document, a store file); deeper text is refused with the place
/// (`crate::json`). Far below where reading it could exhaust a 2 MiB thread's stack.
pub(crate) const MAX_JSON_DEPTH: usize = 64;

/// How much of an error response's body is read and quoted, in bytes (cut on a char boundary).
pub(crate) const ERROR_PREVIEW_BYTES: usize = 8 * 1024;

/// How long an error response's body is read for its preview; what came by then is quoted (a
/// refusal whose body never ends costs no more).
pub(crate) const ERROR_PREVIEW_TIME: Duration = Duration::from_secs(5);

/// After the answer of an event stream was read, the client reads on in the background for at
/// most this long, and at most [`DRAIN_BYTES`], for the stream's end: a body read to its end
/// gives its connection back to the pool (README "Protocol eras, sessions and cancellation":
/// connections are reused), where one dropped early closes it.
pub(crate) const DRAIN_TIME: Duration = Duration::from_secs(1);

/// See [`DRAIN_TIME`].
pub(crate) const DRAIN_BYTES: usize = 64 * 1024;

/// How long the era probe waits for the end of its answer's event stream (usually one chunk
/// away) before the start goes on, so its first `tools/list` reuses the probe's connection.
pub(crate) const PROBE_DRAIN_WAIT: Duration = Duration::from_millis(20);

/// The longest a `tools/list` ttl (`ttlMs`, MCP 2026-07-28, server/utilities/caching) is
/// taken for: a day.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The largest `data` of a modern JSON-RPC error that is read (MCP 2026-07-28: the `supported`
/// versions of `UnsupportedProtocolVersion`, the `requiredCapabilities` of
/// `MissingRequiredClientCapability`); a larger one counts as absent.
pub(crate) const MAX_ERROR_DATA_BYTES: usize = 4 * 1024;

/// How many `tools/list` pages one start may fetch.
pub(crate) const MAX_PAGES: usize = 100;

/// How many tools one server may list.
pub(crate) const MAX_TOOLS: usize = 1000;

/// The largest `inputSchema` plus `outputSchema` of one tool, in bytes of JSON text.
pub(crate) const MAX_SCHEMA_BYTES: usize = 256 * 1024;

/// A tool schema whose JSON text is longer than this, in bytes, is not used to check arguments
/// or `structuredContent` (the server decides); it is still listed (README "What the tools
/// answer").
pub(crate) const MAX_CHECKED_SCHEMA_BYTES: usize = 64 * 1024;

/// A tool schema holding more JSON values than this (objects, arrays, strings, numbers, … each
/// one) is not used for checking: it bounds the validator's compile time and memory per tool.
pub(crate) const MAX_CHECKED_SCHEMA_NODES: usize = 4096;

/// How many schema problems an `invalid_arguments` (or an `outputSchema` mismatch) lists; the
/// rest are counted (`and 3 more problems`).
pub(crate) const MAX_LISTED_PROBLEMS: usize = 5;

/// One listed schema problem is cut to this many bytes (it may quote a large value).
pub(crate) const MAX_PROBLEM_BYTES: usize = 300;

/// The longest tool name, in bytes (the MCP spec asks for at most 128 characters).
pub(crate) const MAX_TOOL_NAME_BYTES: usize = 256;

/// Tool descriptions longer than this, in bytes, are cut (on a char boundary) and end in `…`.
pub(crate) const MAX_DESCRIPTION_BYTES: usize = 4096;

/// Server text quoted in a status reason or an error is cut to this many bytes.
pub(crate) const MAX_REASON_BYTES: usize = 1024;

/// The longest media type (`type/subtype`, in bytes) a reason names for an error body it does
/// not quote (an HTML page: README "Lifecycle and limits"); a longer one reads "an unreadable
/// media type". RFC 6838 §4.2 allows 127 bytes per part; a real one is far shorter.
pub(crate) const MAX_MEDIA_TYPE_BYTES: usize = 64;

/// How many resumptions of one request's SSE stream (`GET` + `Last-Event-ID`) may bring no new
/// event id before the request fails. Resumptions that bring one are not counted: a server may
/// close the stream after every event and expect the client to poll (MCP 2025-11-25,
/// "Resumability and Redelivery"); [`CALL_DEADLINE`] bounds those.
pub(crate) const MAX_RESUMPTIONS: usize = 5;

/// The wait before resuming a stream whose server gave no `retry` field.
pub(crate) const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// The shortest wait before a resumption, whatever `retry` the server gave (so `retry: 0`
/// cannot make the client spin).
pub(crate) const MIN_RETRY: Duration = Duration::from_millis(100);

/// The longest `retry` wait a server may ask for before a resumption.
pub(crate) const MAX_RETRY: Duration = Duration::from_secs(30);

/// The longest `Retry-After` a request refused `429` or `503` (a call, a `tools/list` page, the
/// renewal a request waits for, a `ping`) waits out before it is sent once more (RFC 6585 §4,
/// RFC 9110 §10.2.3); a longer wait (or one past the request's deadline) is the answer, naming
/// the wait: a call is `unavailable`, a listing fails.
pub(crate) const MAX_RATE_LIMIT_WAIT: Duration = Duration::from_secs(30);

/// The longest SSE event id the Pack sends back as `Last-Event-ID`, in bytes.
pub(crate) const MAX_EVENT_ID_BYTES: usize = 1024;

/// A server's `instructions` (initialize result) longer than this, in bytes, are cut.
pub(crate) const MAX_INSTRUCTIONS_BYTES: usize = 8 * 1024;

/// A server log message (`notifications/message`) longer than this, in bytes, is cut before it
/// becomes a `tracing` event.
pub(crate) const MAX_LOG_MESSAGE_BYTES: usize = 4 * 1024;

/// A re-listing of a ready server's tools (every `tools/list` page) must finish within this.
pub(crate) const RELIST_DEADLINE: Duration = Duration::from_secs(120);

/// A call or lookup naming a tool that a ready server does not list re-lists that server at
/// most once per this interval, so a model guessing names cannot flood a server.
pub(crate) const MISS_INTERVAL: Duration = Duration::from_secs(10);

/// The first wait before reopening a standalone `GET` stream that ended or broke; each later
/// wait doubles, up to [`RETRY_MAX`].
pub(crate) const LISTEN_RETRY_FIRST: Duration = Duration::from_secs(1);

/// A standalone `GET` stream that stayed open this long resets the reopen backoff (proxies
/// close idle streams).
pub(crate) const LISTEN_STABLE: Duration = Duration::from_secs(60);

/// How long `server/discover`, the era probe, may take to answer (MCP 2026-07-28,
/// basic/versioning "Backward Compatibility": a server that does not respond within a
/// reasonable timeout is legacy). A server silent past it is spoken to in the legacy era; one
/// that is modern after all answers the `initialize` that follows with a modern error or
/// `-32601`, and is probed again.
pub(crate) const DISCOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the `ping` asking whether a session is still live (after a `404` to its standalone
/// `GET`) may take, answer included.
pub(crate) const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a stream the client opens in the background — the standalone `GET`, a
/// `subscriptions/listen` POST, a resumption (`GET` with `Last-Event-ID`) — may take to bring
/// its response headers. Once open, a stream may stay quiet for as long as it likes: the
/// stream's loop leaves it as soon as its session is replaced.
pub(crate) const STREAM_OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// The shortest ttl a `tools/list` page's `ttlMs` is taken for (MCP 2026-07-28,
/// server/utilities/caching): a smaller positive one counts as this, so a server cannot make
/// every use of the listing a re-listing.
pub(crate) const MIN_TTL: Duration = Duration::from_secs(5);

/// The longest session id the Pack keeps, in bytes.
pub(crate) const MAX_SESSION_ID_BYTES: usize = 1024;

/// The largest OAuth document (metadata, registration, token response) a sign-in reads, in bytes.
pub(crate) const MAX_OAUTH_DOCUMENT_BYTES: usize = 256 * 1024;

/// How long one OAuth request (a metadata fetch, a registration, a token request) may take.
pub(crate) const OAUTH_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the loopback listener waits for the browser's redirect after a sign-in link is
/// shown; a new link is needed after that.
pub(crate) const SIGN_IN_WAIT: Duration = Duration::from_secs(600);

/// An access token is refreshed when it expires within this margin.
pub(crate) const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// Cuts `text` to at most `max` bytes on a char boundary, ending it in `…` when cut.
pub(crate) fn truncate(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end]).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_keeps_short_text_and_cuts_on_char_boundaries() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("abcdefghij", 10), "abcdefghij");
        assert_eq!(truncate("abcdefghijk", 10), "abcdefg…");
        // 'é' is two bytes: a cut inside it moves back to its start.
        assert_eq!(truncate("ééééé", 8), "éé…");
        assert!(truncate("ééééé", 8).len() <= 8);
    }
}
