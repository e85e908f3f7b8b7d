//! A fourth hostile review, of the change that bounds every background request, makes the
//! change-stream loop watch the session machine, and heals era doubts (tests/it/bounds.rs).
//! Each test failed on that change and names the defect it proved; all pass since the fixes.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::Host;
use crate::support::hostile::{
    self, Received, Reply, Server, entry, result, standard, text_result, tool, tools_page,
};

/// Keeps a paused clock moving in small steps, so loopback I/O is served between timers.
fn heartbeat() {
    tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

/// A request the server never answers.
async fn never() -> Reply {
    std::future::pending().await
}

/// Sets its flag when dropped: the body of a response the client closed.
struct Closed(Arc<AtomicBool>);

impl Drop for Closed {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A response of `status` whose headers go out at once and whose body never sends a byte nor
/// ends (a silent proxy after the status line); `closed` is set once the client closed it.
fn headers_then_silence(status: u16, content_type: &str, closed: Arc<AtomicBool>) -> Reply {
    let body = stream::unfold(Closed(closed), |held| async move {
        std::future::pending::<()>().await;
        drop(held);
        None::<(Result<Bytes, io::Error>, Closed)>
    });
    Reply::stream(status, content_type, body)
}

/// A `server/discover` result of a modern server declaring `tools.listChanged`.
fn discover_result(id: &Value) -> Reply {
    Reply::json(&result(
        id,
        json!({"supportedVersions": ["2026-07-28"],
               "capabilities": {"tools": {"listChanged": true}},
               "serverInfo": {"name": "attack4", "version": "0"}}),
    ))
}

/// A legacy `initialize` answer declaring `tools.listChanged`, issuing `session`.
fn initialize(id: &Value, session: &str) -> Reply {
    Reply::json(&result(
        id,
        json!({"protocolVersion": "2025-11-25",
               "capabilities": {"tools": {"listChanged": true}},
               "serverInfo": {"name": "attack4", "version": "0"}}),
    ))
    .header("mcp-session-id", session)
}

/// When each request of HTTP method `verb` and JSON-RPC method `method` (`""` for a `GET`)
/// arrived, in whole seconds after `t0`.
fn seconds(server: &Server, verb: &str, method: &str, t0: Instant) -> Vec<u64> {
    server
        .requests()
        .iter()
        .filter(|r| r.http_method == verb && r.method() == method)
        .map(|r| (r.at - t0).as_secs())
        .collect()
}

/// How a test's script answers a request.
enum Answer {
    Now(Reply),
    /// Never: the request waits until the client gives up.
    Never,
}

/// A legacy server (sessions `s-1`, `s-2`, … one per `initialize`, each declaring
/// `tools.listChanged`; tool `t`) whose answers `script` decides first (`None`: the usual ones:
/// `server/discover` plain 400, `GET` 405, `DELETE` 200, `tools/call` `ok on s-N`).
async fn legacy_with(
    script: impl Fn(&Received) -> Option<Answer> + Send + Sync + 'static,
) -> Server {
    let script = Arc::new(script);
    hostile::serve_all(move |req| {
        let script = Arc::clone(&script);
        async move {
            match script(&req) {
                Some(Answer::Now(reply)) => return reply,
                Some(Answer::Never) => return never().await,
                None => {}
            }
            let session = req.header("mcp-session-id").unwrap_or_default();
            match (req.http_method.as_str(), req.method()) {
                ("GET", _) => Reply::raw(405, "text/plain", ""),
                ("DELETE", _) => Reply::raw(200, "text/plain", ""),
                (_, "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
                (_, "initialize") => initialize(&req.id(), &format!("s-{}", req.nth + 1)),
                (_, "tools/list") => {
                    Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
                }
                (_, "tools/call") => {
                    Reply::json(&text_result(&req.id(), &format!("ok on {session}")))
                }
                _ => standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
            }
        }
    })
    .await
}

/// The namespace listing of `ns`.
async fn namespace(host: &Host, ns: &str) -> Value {
    host.listing(json!({ "namespace": ns })).await
}

// ---------------------------------------------------------------------------------------------
// silent proxies the bounds missed: a status line, then a body that never ends

/// A legacy server behind a proxy that answers `server/discover` with a `400` whose headers
/// come at once and whose body never ends (README "Lifecycle and limits": nothing the Pack
/// sends in the background can hang it). An error body is read for its preview for at most
/// 5 s (docs/lifecycle.md), so the 400 gives its legacy verdict 5 s in and the start goes on
/// with `initialize`; before, the probe hung until the 2-minute start deadline on every start.
#[tokio::test(start_paused = true)]
async fn a_discover_refused_with_a_body_that_never_ends_falls_back_to_initialize_after_5_seconds() {
    heartbeat();
    let server = legacy_with(|req| {
        (req.method() == "server/discover")
            .then(|| Answer::Now(headers_then_silence(400, "text/plain", Arc::default())))
    })
    .await;
    let t0 = Instant::now();
    let host = Host::new(json!({ "slowbody": entry(&server.url) }));
    let listing = host
        .wait_for(Duration::from_secs(200), |listing| {
            hostile::server_entry(listing, "slowbody")["status"] != "loading"
        })
        .await;
    let entry = hostile::server_entry(&listing, "slowbody");
    assert_eq!(entry["status"], "ready", "{entry}");
    assert_eq!((Instant::now() - t0).as_secs(), 5);
    assert_eq!(seconds(&server, "POST", "initialize", t0), [5]);
}

/// A standalone `GET` answered `503` by a proxy whose headers come at once and whose body never
/// ends. README: "Nothing the Pack sends in the background can hang it"; docs/connection.md:
/// "Nothing it sends can stall it ... after either it opens the stream again on its backoff".
/// The 30 s bound covers only the headers: `check_status` then reads the 503's body for its
/// preview with no bound, and the stream loop waits on it for the Pack's life — the server
/// later offering a stream (here: answering 405, "no stream") is never asked again. The loop
/// should give the body up and send its next `GET` on its backoff: two `GET`s in 10 minutes.
#[tokio::test(start_paused = true)]
async fn a_standalone_get_refused_with_a_body_that_never_ends_does_not_stall_the_stream_loop() {
    heartbeat();
    let server = legacy_with(|req| {
        (req.http_method == "GET" && req.nth == 0)
            .then(|| Answer::Now(headers_then_silence(503, "text/plain", Arc::default())))
    })
    .await;
    let host = Host::new(json!({ "g503": entry(&server.url) }));
    host.ready("g503", Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    let t0 = server.first(|r| r.http_method == "GET").at;
    assert_eq!(seconds(&server, "GET", "", t0).len(), 2);
    drop(host);
}

/// A modern server's `subscriptions/listen` refused with a `400` whose headers come at once and
/// whose body never ends (README: "`subscriptions/listen` and a resumption 30 s to bring their
/// headers ... Nothing the Pack sends in the background can hang it"). The body is read for its
/// preview without a bound, so the stream loop never sends another listen: a second one
/// (answered here with an event stream) should go out on the backoff, and a `list_changed` on
/// it re-list the server. Observed: one listen in 10 minutes, the new tool never listed.
#[tokio::test(start_paused = true)]
async fn a_listen_refused_with_a_body_that_never_ends_does_not_stall_the_stream_loop() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => discover_result(&req.id()),
            "tools/list" if req.nth == 0 => {
                Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
            }
            "tools/list" => Reply::json(&tools_page(
                &req.id(),
                vec![tool("t", "t"), tool("u", "u")],
                None,
            )),
            "subscriptions/listen" if req.nth == 0 => {
                headers_then_silence(400, "text/plain", Arc::default())
            }
            "subscriptions/listen" => {
                let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                                 "params": {"notifications": {"toolsListChanged": true}}});
                let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
                let text = format!("{}{}", hostile::sse_event(&ack), hostile::sse_event(&changed));
                let body = stream::once(async move { Ok::<_, io::Error>(Bytes::from(text)) })
                    .chain(stream::pending());
                Reply::stream(200, "text/event-stream", body)
            }
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "l400": entry(&server.url) }));
    host.ready("l400", Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(server.count("subscriptions/listen"), 2);
    assert_eq!(host.tool_names("l400").await, ["t", "u"]);
    drop(host);
}

/// The loop's `ping` (after a `404` to s-1's `GET`) goes unanswered while a call finds s-1
/// forgotten and renews it to s-2. docs/connection.md: "The loop watches the session machine
/// while it waits: when the session its stream is on stops being the live one (a call renewed
/// it ...) ... the new session gets its own stream — at once when a call made it". The `ping`
/// is a wait that does not watch: the loop keeps asking about s-1, which is no longer live, for
/// the rest of the ping's 10 s before s-2 gets its `GET`. s-2's `GET` should go out at once
/// (0 s after the call's answer); observed 8 s.
#[tokio::test(start_paused = true)]
async fn a_call_that_renews_the_session_while_the_loop_pings_moves_the_stream_at_once() {
    heartbeat();
    let server = legacy_with(|req| {
        let on_s1 = req.header("mcp-session-id").as_deref() == Some("s-1");
        match (req.http_method.as_str(), req.method()) {
            ("GET", _) if on_s1 => Some(Answer::Now(Reply::raw(404, "text/plain", "Not Found"))),
            ("GET", _) => Some(Answer::Now(headers_then_silence(
                200,
                "text/event-stream",
                Arc::default(),
            ))),
            (_, "ping") if on_s1 => Some(Answer::Never),
            (_, "tools/call") if on_s1 => {
                Some(Answer::Now(Reply::raw(404, "text/plain", "Not Found")))
            }
            _ => None,
        }
    })
    .await;
    let host = Host::new(json!({ "pinging": entry(&server.url) }));
    host.ready("pinging", Duration::from_secs(20)).await;
    server
        .wait_until(Duration::from_secs(20), "the ping on s-1", |r| {
            r.iter().any(|r| r.method() == "ping")
        })
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(host.call_tool("pinging", "t").await, Ok("ok on s-2".into()));
    let answered = Instant::now();
    let get = server
        .wait_until(Duration::from_secs(60), "a GET on s-2", |r| {
            r.iter().any(|r| {
                r.http_method == "GET" && r.header("mcp-session-id").as_deref() == Some("s-2")
            })
        })
        .await
        .into_iter()
        .find(|r| r.http_method == "GET" && r.header("mcp-session-id").as_deref() == Some("s-2"))
        .unwrap();
    assert_eq!((get.at - answered).as_secs(), 0);
    drop(host);
}

// ---------------------------------------------------------------------------------------------
// era doubts that heal, and real restarts after them

/// A server that is modern (no `listChanged`, tool `t`) until `legacy` is set, then a 2025-era
/// server (discover plain 400, sessions `s-N`, a request without a session refused with the
/// plain-text 400 of older SDKs). `flap` answers the first modern `tools/call` with a plain
/// 400 (a proxy that flapped once).
async fn flipping(legacy: Arc<AtomicBool>, flap: bool) -> Server {
    hostile::serve_all(move |req| {
        let legacy = legacy.load(Ordering::SeqCst);
        async move {
            let session = req.header("mcp-session-id");
            if !legacy {
                return match req.method() {
                    "server/discover" => Reply::json(&result(
                        &req.id(),
                        json!({"supportedVersions": ["2026-07-28"],
                               "capabilities": {"tools": {}},
                               "serverInfo": {"name": "flip", "version": "0"}}),
                    )),
                    "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
                    "tools/call" if flap && req.nth == 0 => {
                        Reply::raw(400, "text/html", "<html>400 Bad Request</html>")
                    }
                    "tools/call" => Reply::json(&text_result(&req.id(), "modern ok")),
                    _ => Reply::raw(400, "text/plain", ""),
                };
            }
            match (req.http_method.as_str(), req.method()) {
                ("GET", _) => Reply::raw(405, "text/plain", ""),
                ("DELETE", _) => Reply::raw(200, "text/plain", ""),
                (_, "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
                (_, "initialize") => {
                    let n = req.nth + 1;
                    initialize(&req.id(), &format!("s-{n}"))
                }
                _ if session.is_none() && req.rpc.get("id").is_some() => Reply::raw(
                    400,
                    "text/plain",
                    "Bad Request: No valid session ID provided",
                ),
                (_, "tools/list") => {
                    Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
                }
                (_, "tools/call") => Reply::json(&text_result(
                    &req.id(),
                    &format!("legacy ok on {}", session.unwrap_or_default()),
                )),
                _ => standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
            }
        }
    })
    .await
}

/// A proxy in front of a modern server refuses one `tools/call` with a plain 400; the probe
/// finds the server still modern and the resend on the kept route succeeds — so that 400 was
/// a flap, not the server's own answer to `tools/call`. The change records it as an own answer
/// all the same (`Sessions::confirmed` for a `PlainRefusal`), so when the server is later
/// really redeployed onto the 2025 era, whose answer to a request without a session is that
/// same plain 400, no call ever probes again: every call fails for the Pack's life. README:
/// "It is decided again only when the server shows the other era — a restart onto another
/// version" (and without the earlier flap the same restart is followed by the next call).
/// The call after the restart should be answered on a new legacy session (`legacy ok on
/// s-1`); observed: the plain 400, forever.
#[tokio::test]
async fn a_plain_400_a_resend_got_past_does_not_hide_a_later_restart_onto_the_legacy_era() {
    let legacy = Arc::new(AtomicBool::new(false));
    let server = flipping(Arc::clone(&legacy), true).await;
    let host = Host::new(json!({ "flap": entry(&server.url) }));
    host.ready("flap", Duration::from_secs(10)).await;
    // The flap: refused once, probed, resent on the same route.
    assert_eq!(host.call_tool("flap", "t").await, Ok("modern ok".into()));
    assert_eq!(server.count("server/discover"), 2);
    legacy.store(true, Ordering::SeqCst);
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(host.call_tool("flap", "t").await.map_err(|e| e.message));
    }
    assert_eq!(
        answers,
        [
            Ok("legacy ok on s-1".to_string()),
            Ok("legacy ok on s-1".to_string()),
            Ok("legacy ok on s-1".to_string())
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// storms and floors

/// Every standalone `GET` and `ping` is answered with the plain-text 400 of older SDKs ("No
/// valid session ID provided") while calls on the same session work: those words are about the
/// `GET`, not the session. On the call path, "a fresh session got the same 400: such 400s are
/// the request's own from now on" (`session_400s`), so it costs one extra session; the stream
/// path, which the change made set sessions aside "as on the call path" (docs/connection.md),
/// never learns it: it sets aside a fresh session and initializes another on every backoff
/// step, forever — a new session and a re-listing every minute for the Pack's life, each kept
/// to be deleted at the drop (16 sessions and 16 `DELETE`s after 10 minutes, growing). It
/// should stop at s-2, the fresh session that got the same 400: two `initialize`s in all.
#[tokio::test(start_paused = true)]
async fn a_stream_400_that_speaks_of_sessions_on_every_fresh_session_does_not_make_a_session_a_minute()
 {
    heartbeat();
    const GONE: &str = "Bad Request: No valid session ID provided";
    let server = legacy_with(|req| match (req.http_method.as_str(), req.method()) {
        ("GET", _) | (_, "ping") => Some(Answer::Now(Reply::raw(400, "text/plain", GONE))),
        _ => None,
    })
    .await;
    let t0 = Instant::now();
    let host = Host::new(json!({ "words": entry(&server.url) }));
    host.ready("words", Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(seconds(&server, "POST", "initialize", t0).len(), 2);
    assert_eq!(host.call_tool("words", "t").await, Ok("ok on s-2".into()));
    drop(host);
}

/// A modern server's `tools/list` page with `ttlMs: 0.5`. docs/lifecycle.md: "a listing's
/// `ttlMs` | at least 5 s, at most a day | a smaller positive ttl counts as 5 s"; README: "a
/// server-chosen `ttlMs` counts as at least 5 s". `read_page` drops every ttl under 1 ms
/// before the floor applies, so this positive ttl counts as none: the listing is never
/// refreshed by time (where `ttlMs: 1` is refreshed after 5 s). Used 6 s after the start, it
/// should be re-listed once: two `tools/list`; observed one.
#[tokio::test(start_paused = true)]
async fn a_positive_ttl_under_one_millisecond_counts_as_the_5_second_floor() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => Reply::json(&result(
                &req.id(),
                json!({"supportedVersions": ["2026-07-28"],
                       "capabilities": {"tools": {}},
                       "serverInfo": {"name": "ttl", "version": "0"}}),
            )),
            "tools/list" => Reply::json(&result(
                &req.id(),
                json!({"tools": [tool("t", "t")], "ttlMs": 0.5}),
            )),
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "ttl": entry(&server.url) }));
    host.ready("ttl", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    namespace(&host, "ttl").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    namespace(&host, "ttl").await;
    assert_eq!(server.count("tools/list"), 2);
}
