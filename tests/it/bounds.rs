//! Every request the client sends in the background is bounded, and the change-stream loop is a
//! machine beside the session machine: a silent `server/discover`, `ping`, standalone `GET`,
//! `subscriptions/listen` or resumption costs its bound (README "Lifecycle and limits") and the
//! loop goes on; a session replaced under a quiet stream gets its own stream at once.
//!
//! Each server is a [`support::hostile`] handler of this module. The tests about bounds run on
//! Tokio's paused clock (`start_paused`, as in `hostile.rs`): the bounds are measured in exact
//! virtual seconds.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::Host;
use crate::support::hostile::{
    self, Received, Reply, Server, entry, result, rpc_error, server_entry, standard, text_result,
    tool, tools_page,
};

/// Keeps a paused clock moving in small steps, so loopback I/O is served between timers (as in
/// `hostile.rs`).
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

/// A `server/discover` result of a modern server declaring `tools.listChanged`.
fn discover_result(id: &Value) -> Reply {
    Reply::json(&result(
        id,
        json!({"supportedVersions": ["2026-07-28"],
               "capabilities": {"tools": {"listChanged": true}},
               "serverInfo": {"name": "bounds", "version": "0"}}),
    ))
}

/// A legacy `initialize` answer declaring `tools.listChanged`, issuing `session`.
fn initialize(id: &Value, session: &str) -> Reply {
    Reply::json(&result(
        id,
        json!({"protocolVersion": "2025-11-25",
               "capabilities": {"tools": {"listChanged": true}},
               "serverInfo": {"name": "bounds", "version": "0"}}),
    ))
    .header("mcp-session-id", session)
}

/// Sets its flag when dropped: the body of a stream the client closed.
struct Closed(Arc<AtomicBool>);

impl Drop for Closed {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// `200 text/event-stream` whose headers go out at once and whose body never sends a byte;
/// `closed` is set once the client closed it.
fn quiet_stream(closed: Arc<AtomicBool>) -> Reply {
    let body = stream::unfold(Closed(closed), |held| async move {
        std::future::pending::<()>().await;
        drop(held);
        None::<(Result<Bytes, io::Error>, Closed)>
    });
    Reply::stream(200, "text/event-stream", body)
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
/// `GET` 405, `DELETE` 200, `tools/call` `ok on s-N`).
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

/// A modern server (`tools.listChanged`, tool `t`) whose `subscriptions/listen` is answered by
/// `listen`.
async fn modern_with(listen: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Server {
    let listen = Arc::new(listen);
    hostile::serve_all(move |req| {
        let listen = Arc::clone(&listen);
        async move {
            match req.method() {
                "server/discover" => discover_result(&req.id()),
                "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
                "subscriptions/listen" => listen(&req),
                _ => Reply::raw(400, "text/plain", ""),
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
// server/discover

/// MCP 2026-07-28, basic/versioning "Backward Compatibility": a server that does not answer
/// `server/discover` within a reasonable timeout is legacy. One that holds the probe open but
/// answers `initialize` is ready in the legacy era 10 s in, after one probe and one handshake.
#[tokio::test(start_paused = true)]
async fn a_discover_that_never_answers_falls_back_to_initialize_after_10_seconds() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => never().await,
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            _ => standard(&req).unwrap(),
        }
    })
    .await;
    let t0 = Instant::now();
    let host = Host::new(json!({ "silent": entry(&server.url) }));
    host.ready("silent", Duration::from_secs(200)).await;
    assert_eq!((Instant::now() - t0).as_secs(), 10);
    assert_eq!(
        namespace(&host, "silent").await["protocolVersion"],
        "2025-06-18"
    );
    assert_eq!(seconds(&server, "POST", "server/discover", t0), [0]);
    assert_eq!(seconds(&server, "POST", "initialize", t0), [10]);
}

/// A modern server that takes 3 s to answer `server/discover` is still modern.
#[tokio::test(start_paused = true)]
async fn a_modern_server_answering_discover_after_3_seconds_is_modern() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                discover_result(&req.id())
            }
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            "subscriptions/listen" => never().await,
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let t0 = Instant::now();
    let host = Host::new(json!({ "slow": entry(&server.url) }));
    host.ready("slow", Duration::from_secs(60)).await;
    assert_eq!((Instant::now() - t0).as_secs(), 3);
    assert_eq!(
        namespace(&host, "slow").await["protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(server.count("initialize"), 0);
}

/// A start stuck on a modern server's `tools/list` names what it was doing: there is no
/// `initialize` in that era.
#[tokio::test(start_paused = true)]
async fn a_modern_start_past_its_deadline_names_discover_and_tools_list() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => discover_result(&req.id()),
            "tools/list" => never().await,
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "stuck": entry(&server.url) }));
    let failed = host.failed("stuck", Duration::from_secs(200)).await;
    assert_eq!(
        failed["reason"],
        "the server did not finish starting (server/discover and tools/list) within 120 seconds"
    );
}

// ---------------------------------------------------------------------------------------------
// the stream loop's requests

/// A standalone `GET` answered 404 is asked about with a `ping` on the session; a `ping` that
/// never answers is given up after 10 s, and the loop opens the stream again after its backoff
/// (1 s) instead of waiting on the ping for good.
#[tokio::test(start_paused = true)]
async fn a_ping_that_never_answers_does_not_stall_the_stream_loop() {
    heartbeat();
    let server = legacy_with(|req| match (req.http_method.as_str(), req.method()) {
        ("GET", _) => Some(Answer::Now(Reply::raw(404, "text/plain", "Not Found"))),
        (_, "ping") => Some(Answer::Never),
        _ => None,
    })
    .await;
    let host = Host::new(json!({ "p": entry(&server.url) }));
    host.ready("p", Duration::from_secs(20)).await;
    let t0 = server.first(|r| r.http_method == "GET").at;
    server
        .wait_until(Duration::from_secs(60), "a third GET", |r| {
            r.iter().filter(|r| r.http_method == "GET").count() >= 3
        })
        .await;
    // GET, ping (10 s, no answer), 1 s, GET, ping (10 s), 2 s, GET.
    assert_eq!(seconds(&server, "GET", "", t0), [0, 11, 23]);
    assert_eq!(seconds(&server, "POST", "ping", t0)[..2], [0, 11]);
    drop(host);
}

/// A standalone `GET` whose headers never come (a silent proxy) is given up after 30 s and
/// opened again after the backoff (1 s).
#[tokio::test(start_paused = true)]
async fn a_standalone_get_without_headers_is_given_up_and_opened_again() {
    heartbeat();
    let server = legacy_with(|req| (req.http_method == "GET").then_some(Answer::Never)).await;
    let host = Host::new(json!({ "g": entry(&server.url) }));
    host.ready("g", Duration::from_secs(20)).await;
    let t0 = server.first(|r| r.http_method == "GET").at;
    server
        .wait_until(Duration::from_secs(120), "a third GET", |r| {
            r.iter().filter(|r| r.http_method == "GET").count() >= 3
        })
        .await;
    assert_eq!(seconds(&server, "GET", "", t0), [0, 31, 63]);
    drop(host);
}

/// A `subscriptions/listen` whose headers never come is given up after 30 s and sent again
/// after the backoff (1 s).
#[tokio::test(start_paused = true)]
async fn a_listen_without_headers_is_given_up_and_sent_again() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => discover_result(&req.id()),
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            "subscriptions/listen" => never().await,
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "l": entry(&server.url) }));
    host.ready("l", Duration::from_secs(20)).await;
    let t0 = server.first(|r| r.method() == "subscriptions/listen").at;
    server
        .wait_until(Duration::from_secs(120), "a third listen", |r| {
            r.iter()
                .filter(|r| r.method() == "subscriptions/listen")
                .count()
                >= 3
        })
        .await;
    assert_eq!(
        seconds(&server, "POST", "subscriptions/listen", t0),
        [0, 31, 63]
    );
    // Not an era signal: probed once, listed once.
    assert_eq!(server.count("server/discover"), 1);
    assert_eq!(server.count("tools/list"), 1);
    drop(host);
}

/// A call whose event stream ends after an event id is resumed with `GET` + `Last-Event-ID`;
/// a resumption whose headers never come fails the call 30 s later, not at the call's
/// 5-minute deadline.
#[tokio::test(start_paused = true)]
async fn a_resumption_without_headers_fails_the_call_after_30_seconds() {
    heartbeat();
    let server = legacy_with(|req| match (req.http_method.as_str(), req.method()) {
        ("GET", _) if req.header("last-event-id").is_some() => Some(Answer::Never),
        (_, "tools/call") => Some(Answer::Now(Reply::raw(
            200,
            "text/event-stream",
            "id: e1\nretry: 1000\ndata:\n\n",
        ))),
        _ => None,
    })
    .await;
    let host = Host::new(json!({ "r": entry(&server.url) }));
    host.ready("r", Duration::from_secs(20)).await;
    let t0 = Instant::now();
    let failed = host.call_tool("r", "t").await;
    assert_eq!((Instant::now() - t0).as_secs(), 31);
    assert_eq!(
        failed,
        Err(ToolError::new(
            ToolErrorKind::Transport,
            "server \"r\": resuming the event stream (GET with Last-Event-ID) failed: the server did not answer the resumption within 30 seconds"
        ))
    );
}

// ---------------------------------------------------------------------------------------------
// the stream loop watches the session machine

/// A call renews session s-1 (the server answers it 404) to s-2 while s-1's standalone stream
/// stays open and quiet (a load balancer pinned it): the loop leaves s-1's stream at once —
/// the client closes it — and s-2 gets its own `GET`. s-1 was forgotten by the server's 404,
/// so only s-2 is deleted at the drop.
#[tokio::test]
async fn a_call_that_renews_the_session_moves_the_stream_off_a_quiet_old_one() {
    let closed = Arc::new(AtomicBool::new(false));
    let opened: Arc<Mutex<Vec<String>>> = Arc::default();
    let server = {
        let closed = Arc::clone(&closed);
        let opened = Arc::clone(&opened);
        legacy_with(move |req| {
            let session = req.header("mcp-session-id").unwrap_or_default();
            match (req.http_method.as_str(), req.method()) {
                ("GET", _) => {
                    opened.lock().unwrap().push(session.clone());
                    let flag = if session == "s-1" {
                        Arc::clone(&closed)
                    } else {
                        Arc::default()
                    };
                    Some(Answer::Now(quiet_stream(flag)))
                }
                (_, "tools/call") if session == "s-1" => {
                    Some(Answer::Now(Reply::raw(404, "text/plain", "Not Found")))
                }
                _ => None,
            }
        })
        .await
    };
    let host = Host::new(json!({ "lb": entry(&server.url) }));
    host.ready("lb", Duration::from_secs(10)).await;
    server
        .wait_until(Duration::from_secs(10), "the GET on s-1", |r| {
            r.iter().any(|r| r.http_method == "GET")
        })
        .await;
    assert_eq!(host.call_tool("lb", "t").await, Ok("ok on s-2".into()));
    server
        .wait_until(Duration::from_secs(10), "a GET on s-2", |r| {
            r.iter().any(|r| {
                r.http_method == "GET" && r.header("mcp-session-id").as_deref() == Some("s-2")
            })
        })
        .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !closed.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the s-1 stream was never closed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*opened.lock().unwrap(), ["s-1", "s-2"]);
    drop(host);
    let deletes = server
        .wait_until(Duration::from_secs(15), "the DELETE", |r| {
            r.iter().any(|r| r.http_method == "DELETE")
        })
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let deleted: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.http_method == "DELETE")
        .filter_map(|r| r.header("mcp-session-id"))
        .collect();
    assert_eq!(deleted, ["s-2"], "{} requests", deletes.len());
}

/// The stream path meets the plain-text 400 of older SDKs ("No valid session ID") on s-1's
/// `GET` and on its `ping`: the server's words, not a 404, so s-1 is only set aside — a new
/// session is made, and s-1 is still deleted at the drop, as on the call path.
#[tokio::test]
async fn a_session_the_stream_finds_gone_by_the_servers_words_is_deleted_at_the_drop() {
    const GONE: &str = "Bad Request: No valid session ID provided";
    let server = legacy_with(|req| {
        let on_s1 = req.header("mcp-session-id").as_deref() == Some("s-1");
        match (req.http_method.as_str(), req.method()) {
            ("GET", _) | (_, "ping") if on_s1 => {
                Some(Answer::Now(Reply::raw(400, "text/plain", GONE)))
            }
            _ => None,
        }
    })
    .await;
    let host = Host::new(json!({ "py": entry(&server.url) }));
    host.ready("py", Duration::from_secs(10)).await;
    server
        .wait_until(
            Duration::from_secs(10),
            "s-2 made by the stream's loop",
            |r| r.iter().filter(|r| r.method() == "initialize").count() == 2,
        )
        .await;
    assert_eq!(host.call_tool("py", "t").await, Ok("ok on s-2".into()));
    drop(host);
    server
        .wait_until(Duration::from_secs(15), "two DELETEs", |r| {
            r.iter().filter(|r| r.http_method == "DELETE").count() == 2
        })
        .await;
    let mut deleted: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.http_method == "DELETE")
        .filter_map(|r| r.header("mcp-session-id"))
        .collect();
    deleted.sort();
    assert_eq!(deleted, ["s-1", "s-2"]);
}

// ---------------------------------------------------------------------------------------------
// era doubts that heal

/// A 2025-era tool that answers with its own `-32021` (in the JSON-RPC implementation range):
/// the first such answer makes the client ask `server/discover` again; the server is still
/// legacy, so the session is kept, the answer is the tool's error, and the same answer later
/// is no era signal: no new session per call, no more probes.
#[tokio::test]
async fn a_legacy_tools_own_modern_error_code_costs_one_probe_and_no_session() {
    let server = legacy_with(|req| {
        (req.method() == "tools/call").then(|| {
            Answer::Now(Reply::json(&rpc_error(
                &req.id(),
                -32021,
                "the upstream API wants a client capability",
            )))
        })
    })
    .await;
    let host = Host::new(json!({ "old": entry(&server.url) }));
    host.ready("old", Duration::from_secs(10)).await;
    for _ in 0..3 {
        let failed = host.call_tool("old", "t").await.unwrap_err();
        // The tool's own words: no client capability is missing (docs/connection.md "Verdicts").
        assert_eq!(failed.message, "the upstream API wants a client capability");
    }
    assert_eq!(server.count("initialize"), 1);
    assert_eq!(server.count("server/discover"), 2);
    assert_eq!(server.count("tools/call"), 3);
    assert_eq!(
        server
            .requests()
            .iter()
            .filter(|r| r.http_method == "DELETE")
            .count(),
        0
    );
    assert_eq!(
        server_entry(&host.listing(json!({})).await, "old")["status"],
        "ready"
    );
}

/// A modern server whose endpoint answers `subscriptions/listen` with a plain 404: one probe
/// finds it still modern, and the client asks for no listen stream again — no probe and no
/// re-listing every few seconds for the Pack's life.
#[tokio::test(start_paused = true)]
async fn a_modern_server_without_a_listen_endpoint_is_probed_once() {
    heartbeat();
    let server = modern_with(|_| Reply::raw(404, "text/plain", "Not Found")).await;
    let host = Host::new(json!({ "nolisten": entry(&server.url) }));
    host.ready("nolisten", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    let methods: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.method().to_string())
        .collect();
    assert_eq!(
        methods,
        [
            "server/discover",
            "tools/list",
            "subscriptions/listen",
            "server/discover"
        ]
    );
    assert_eq!(
        namespace(&host, "nolisten").await["protocolVersion"],
        "2026-07-28"
    );
}
