//! Regression tests from a fifth hostile review of the stream loop and the era doubts (README
//! "Lifecycle and limits", "Protocol eras"): replicas declaring other things cost one probe,
//! not a storm; a session a call made gets its stream at once whatever the loop waits on; the
//! stream loop's verdict on a server's words does not disarm the calls. Each test failed before
//! its fix and names the defect it proves.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::Host;
use crate::support::hostile::{
    self, Received, Reply, entry, result, standard, text_result, tool, tools_page,
};

/// Keeps a paused clock moving in small steps, so loopback I/O is served between timers.
fn heartbeat() {
    tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

/// A legacy `initialize` answer issuing `session`.
fn initialize(id: &Value, session: &str) -> Reply {
    Reply::json(&result(
        id,
        json!({"protocolVersion": "2025-11-25",
               "capabilities": {"tools": {"listChanged": true}},
               "serverInfo": {"name": "attack5", "version": "0"}}),
    ))
    .header("mcp-session-id", session)
}

// ---------------------------------------------------------------------------------------------
// era doubts that never heal

/// A modern server declaring `tools.listChanged` whose endpoint answers `subscriptions/listen`
/// with a plain 404 (no listen endpoint), behind a load balancer whose two replicas differ in
/// their `instructions` (a rolling deploy: "v1" and "v2"). The issue: "A modern server whose
/// endpoint answers `subscriptions/listen` with a plain 404 must not be re-probed forever".
/// Each 404 makes the loop probe; the probe finds the same modern era but other
/// `instructions`, so `recheck` installs a new route (`Moved`) instead of recording the 404 as
/// the server's own; the install wakes the stream loop at once (a non-listing install), whose
/// next listen meets the same 404 and probes again: a tight loop of `server/discover` +
/// `subscriptions/listen` + a full `tools/list`, with no backoff, for the Pack's life.
/// (On a paused clock the loop never lets virtual time move: this test runs in real time.)
/// Expected in 3 s: the start's probe and at most two more; observed: hundreds.
#[tokio::test]
async fn a_listen_404_on_replicas_with_other_instructions_does_not_probe_in_a_tight_loop() {
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => Reply::json(&result(
                &req.id(),
                json!({"supportedVersions": ["2026-07-28"],
                       "capabilities": {"tools": {"listChanged": true}},
                       "instructions": format!("replica v{}", req.nth % 2 + 1),
                       "serverInfo": {"name": "lb", "version": "0"}}),
            )),
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            "subscriptions/listen" => Reply::raw(404, "text/plain", "Not Found"),
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "lb": entry(&server.url) }));
    host.ready("lb", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let probes = server.count("server/discover");
    let listings = server.count("tools/list");
    assert!(
        probes <= 3,
        "{probes} server/discover, {listings} tools/list, {} subscriptions/listen in 3 s",
        server.count("subscriptions/listen")
    );
}

// ---------------------------------------------------------------------------------------------
// the stream loop's waits that do not watch the session machine

/// The number of the session `s-N` a request carried (0 for none).
fn session_number(req: &Received) -> usize {
    req.header("mcp-session-id")
        .and_then(|s| s.strip_prefix("s-").and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// A response of `status` whose headers go out at once and whose body never ends.
fn headers_then_silence(status: u16, content_type: &str) -> Reply {
    let body = stream::pending::<Result<Bytes, io::Error>>();
    Reply::stream(status, content_type, body)
}

/// A legacy server that forgets s-1 … s-5 (their standalone `GET` and the loop's `ping` both
/// answered 404), so the stream loop itself renews them one after the other and its backoff
/// grows (1, 2, 4, 8, then 16 s). While the loop waits out that 16 s after making s-6, a call
/// finds s-6 forgotten too and renews it to s-7. docs/connection.md and the loop's own doc:
/// "Every wait of the loop ... ends as soon as its session stops being the live one ... the
/// next live session gets its own at once when a call ... made it". The wait after a renewal
/// the loop asked for (`Turn::BackoffOnly`) is a bare sleep that watches nothing, so s-7's
/// `GET` goes out only when the 16 s are over. Expected: s-7's `GET` 0 s after the call's
/// answer; observed: 14 s.
#[tokio::test(start_paused = true)]
async fn a_call_renewal_during_the_wait_after_the_loops_own_renewal_gets_its_stream_at_once() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        let n = session_number(&req);
        match (req.http_method.as_str(), req.method()) {
            ("DELETE", _) => Reply::raw(200, "text/plain", ""),
            ("GET", _) if n <= 6 => Reply::raw(404, "text/plain", "Not Found"),
            ("GET", _) => headers_then_silence(200, "text/event-stream"),
            (_, "ping") | (_, "tools/call") if n <= 6 => Reply::raw(404, "text/plain", "Not Found"),
            (_, "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
            (_, "initialize") => initialize(&req.id(), &format!("s-{}", req.nth + 1)),
            (_, "tools/list") => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            (_, "tools/call") => Reply::json(&text_result(&req.id(), &format!("ok on s-{n}"))),
            _ => standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
        }
    })
    .await;
    let host = Host::new(json!({ "grown": entry(&server.url) }));
    host.ready("grown", Duration::from_secs(20)).await;
    server
        .wait_until(Duration::from_secs(120), "s-6 made by the loop", |r| {
            r.iter().filter(|r| r.method() == "initialize").count() == 6
        })
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(host.call_tool("grown", "t").await, Ok("ok on s-7".into()));
    let answered = Instant::now();
    let get = server
        .wait_until(Duration::from_secs(120), "a GET on s-7", |r| {
            r.iter()
                .any(|r| r.http_method == "GET" && session_number(r) == 7)
        })
        .await
        .into_iter()
        .find(|r| r.http_method == "GET" && session_number(r) == 7)
        .unwrap();
    assert_eq!((get.at - answered).as_secs(), 0);
    drop(host);
}

/// The call-path twin of the tight loop above: a modern server whose tool `t` is refused with
/// a plain 400 every time (the server's own answer, e.g. a gateway's argument check), behind
/// replicas whose `instructions` differ. With one replica, the first call probes once, resends,
/// meets the 400 again and records it as the server's own: later calls cost nothing more
/// (tests/it/bounds.rs). Here the probe finds other `instructions`, installs a new route
/// (`Moved`), and the resend on that route is never recorded (`confirming` is only set when
/// the route was kept): every call costs a `server/discover` and a full re-listing, for the
/// Pack's life. Expected after three calls: 2 `server/discover` (the start's and one probe),
/// 2 `tools/list` (the start's, and one for the new instructions); observed: 4 and 4.
#[tokio::test]
async fn a_modern_tools_own_plain_400_on_replicas_with_other_instructions_costs_no_probe_per_call()
{
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => Reply::json(&result(
                &req.id(),
                json!({"supportedVersions": ["2026-07-28"],
                       "capabilities": {"tools": {}},
                       "instructions": format!("replica v{}", req.nth % 2 + 1),
                       "serverInfo": {"name": "lb", "version": "0"}}),
            )),
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            "tools/call" => Reply::raw(400, "text/plain", "argument check failed"),
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "lb": entry(&server.url) }));
    host.ready("lb", Duration::from_secs(10)).await;
    for _ in 0..3 {
        assert!(host.call_tool("lb", "t").await.is_err());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        (server.count("server/discover"), server.count("tools/list")),
        (2, 2)
    );
}

// ---------------------------------------------------------------------------------------------
// a heuristic learned on the stream path that outlives the server it was learned from

/// A legacy server whose standalone `GET` and `ping` are answered with the plain-text 400 of
/// older SDKs ("No valid session ID provided") while calls on the session work. The stream
/// loop sets s-1 aside, makes s-2, meets the same words there and concludes that "such 400s are
/// the request's own from now on" (attack4). That verdict
/// is connection-wide and for good: when the server later restarts and forgets s-2, answering
/// every request on it with those very words (as it answers any unknown session), the call
/// path no longer reads them as a forgotten session, never makes s-3, and every call fails for
/// the Pack's life. Learned from `GET`/`ping` answers, it should not disarm the `tools/call`
/// path (which learns it on its own after a resend). Expected after the restart: `ok on s-3`;
/// observed: the 400, on every call.
#[tokio::test(start_paused = true)]
async fn a_stream_paths_verdict_on_session_400s_does_not_hide_a_real_restart_from_calls() {
    heartbeat();
    const GONE: &str = "Bad Request: No valid session ID provided";
    let restarted = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&restarted);
    let server = hostile::serve_all(move |req| {
        let restarted = flag.load(Ordering::SeqCst);
        async move {
            let n = session_number(&req);
            let known = n > 0 && (!restarted || n > 2);
            match (req.http_method.as_str(), req.method()) {
                ("DELETE", _) => Reply::raw(200, "text/plain", ""),
                ("GET", _) | (_, "ping") => Reply::raw(400, "text/plain", GONE),
                (_, "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
                (_, "initialize") => initialize(&req.id(), &format!("s-{}", req.nth + 1)),
                _ if req.rpc.get("id").is_none() => Reply::accepted(),
                _ if !known => Reply::raw(400, "text/plain", GONE),
                (_, "tools/list") => {
                    Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
                }
                (_, "tools/call") => Reply::json(&text_result(&req.id(), &format!("ok on s-{n}"))),
                _ => Reply::raw(400, "text/plain", ""),
            }
        }
    })
    .await;
    let host = Host::new(json!({ "words": entry(&server.url) }));
    host.ready("words", Duration::from_secs(20)).await;
    server
        .wait_until(Duration::from_secs(60), "the GET on s-2", |r| {
            r.iter()
                .any(|r| r.http_method == "GET" && session_number(r) == 2)
        })
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(host.call_tool("words", "t").await, Ok("ok on s-2".into()));
    restarted.store(true, Ordering::SeqCst);
    let mut answers = Vec::new();
    for _ in 0..2 {
        answers.push(host.call_tool("words", "t").await.map_err(|e| e.message));
    }
    assert_eq!(
        answers,
        [Ok("ok on s-3".to_string()), Ok("ok on s-3".to_string())]
    );
    drop(host);
}

// ---------------------------------------------------------------------------------------------
// nothing reaches a session after its DELETE

/// Whether `req` is the client's answer to the server request `p1`.
fn is_answer_to_p1(req: &Received) -> bool {
    req.http_method == "POST" && req.rpc.get("method").is_none() && req.id() == json!("p1")
}

/// A legacy server asks `ping` on the standalone stream and takes 600 ms to take the answer;
/// the Pack is dropped while the answer is on its way. The answer went out from inside the
/// stream loop, which the drop ends: dropped half-sent, it could still reach the session after
/// its `DELETE` (a generated schedule saw `POST - "get-ping" s-1 404` after `DELETE - - s-1`),
/// and here the `DELETE` overtook it. The close awaits it: the `DELETE` comes after the answer
/// was taken, and the answer went out once.
#[tokio::test]
async fn an_answer_to_a_server_request_on_its_way_at_the_drop_goes_before_the_delete() {
    let server = hostile::serve_every_get(|req| async move {
        if req.http_method == "GET" {
            let ping = hostile::sse_event(&json!({"jsonrpc": "2.0", "id": "p1", "method": "ping"}));
            let first = stream::iter([Ok::<_, io::Error>(Bytes::from(ping))]);
            return Reply::stream(200, "text/event-stream", first.chain(stream::pending()));
        }
        if is_answer_to_p1(&req) {
            tokio::time::sleep(Duration::from_millis(600)).await;
            return Reply::accepted();
        }
        match req.method() {
            "initialize" => initialize(&req.id(), "s-1"),
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            _ => standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
        }
    })
    .await;
    let host = Host::new(json!({ "s": entry(&server.url) }));
    let seen = server
        .wait_until(Duration::from_secs(10), "the answer to p1", |r| {
            r.iter().any(is_answer_to_p1)
        })
        .await;
    let answered =
        seen.iter().find(|r| is_answer_to_p1(r)).unwrap().at + Duration::from_millis(600);
    drop(host);
    let seen = server
        .wait_until(Duration::from_secs(10), "the DELETE", |r| {
            r.iter().any(|r| r.http_method == "DELETE")
        })
        .await;
    let delete = seen.iter().find(|r| r.http_method == "DELETE").unwrap();
    assert!(
        delete.at >= answered,
        "the DELETE came {:?} before the answer was taken",
        answered - delete.at
    );
    assert_eq!(delete.header("mcp-session-id").as_deref(), Some("s-1"));
    assert_eq!(seen.iter().filter(|r| is_answer_to_p1(r)).count(), 1);
}
