//! A reviewer's attacks on the connection machine through the public contract: interleavings
//! where a cancel, a stream or a session is not bound to the session the server still knows.
//! Each test is named after the failure it pins.
//!
//! The servers are [`crate::support::scripted`] and [`Sessioned`] (a 2025-era server on the
//! hostile harness that hands out sessions `m-1`, `m-2`, …, can forget them, and lets each test
//! script `tools/call` and the standalone `GET`).

use std::time::Duration;

use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

use crate::machine::{Sessioned, heartbeat, ready, saw_get, streaming};
use crate::support::Host;
use crate::support::hostile::{Reply, entry, tool};
use crate::support::scripted::Scripted;

/// The scripted server's `notifications/cancelled` steps, as `session status`.
fn scripted_cancels(server: &Scripted) -> Vec<String> {
    server
        .trail()
        .iter()
        .filter(|s| s.method == "notifications/cancelled")
        .map(|s| format!("{} {}", s.session.as_deref().unwrap_or("-"), s.status))
        .collect()
}

/// README "Protocol eras, sessions and cancellation": "No cancel follows ... an expired session". Call A is
/// held on `s-1`; the server then forgets `s-1`, and call B is answered 404 on it (the session
/// is forgotten and B goes on in `s-2`). Dropping A must not send its cancel to `s-1`, the
/// session the server just said it forgot (every cancel names a request in flight on the
/// session it is sent to); at the Pack's drop the same request is rightly left out.
#[tokio::test]
async fn a_dropped_call_sends_its_cancel_to_a_session_another_call_found_forgotten() {
    let server = Scripted::start().await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", Duration::from_secs(10)).await;
    let args = |a: Value| json!({"namespace": "s", "toolName": "t", "arguments": a});
    let held = tokio::spawn(host.pack.call(
        "mcp/call_dynamic_tool",
        args(json!({"ms": 20000, "tag": 1})),
    ));
    server
        .wait_until(Duration::from_secs(5), "call A held on s-1", |t| {
            t.iter()
                .any(|s| s.tag == Some(1) && s.session.as_deref() == Some("s-1"))
        })
        .await;
    server.expire("s-1");
    let b = tokio::time::timeout(
        Duration::from_secs(10),
        host.call("call_dynamic_tool", args(json!({"tag": 2}))),
    )
    .await
    .expect("call B ends");
    assert!(b.is_ok(), "{b:?}");
    assert_eq!(server.issued(), ["s-1", "s-2"]);
    held.abort();
    let _ = held.await;
    server
        .settle(Duration::from_millis(500), Duration::from_secs(5))
        .await;
    assert_eq!(
        scripted_cancels(&server),
        Vec::<String>::new(),
        "{:#?}",
        server.lines()
    );
}

/// README "The standalone stream": "A 404 means the session is gone". Call A is held on
/// `m-1`; the server forgets `m-1`; the standalone `GET` (reopened on `m-1`) is answered 404
/// and a new session is made. Dropping A then must not send its cancel to `m-1` ("No cancel
/// follows ... an expired session").
#[tokio::test]
async fn a_dropped_call_sends_its_cancel_to_a_session_the_standalone_get_found_gone() {
    let server = Sessioned::start(|req, _| {
        if req.http_method == "GET" {
            // Each stream ends after 200 ms, so the loop reopens it.
            let ends = futures_util::stream::once(async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok(bytes::Bytes::from_static(b": bye\n\n"))
            });
            return Some(Reply::stream(200, "text/event-stream", ends));
        }
        (req.method() == "tools/call")
            .then(|| Reply::stream(200, "application/json", futures_util::stream::pending()))
    })
    .await;
    let host = ready(&server).await;
    saw_get(&server).await;
    let held = tokio::spawn(host.pack.call(
        "mcp/call_dynamic_tool",
        json!({"namespace": "m", "toolName": "t", "arguments": {}}),
    ));
    server
        .server
        .wait_until(Duration::from_secs(5), "call A on m-1", |r| {
            r.iter().any(|r| r.method() == "tools/call")
        })
        .await;
    server.forget_all();
    server
        .server
        .wait_until(Duration::from_secs(20), "the GET's renewal", |r| {
            r.iter().filter(|r| r.method() == "initialize").count() == 2
        })
        .await;
    held.abort();
    let _ = held.await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cancels: Vec<String> = server
        .lines()
        .into_iter()
        .filter(|l| l.contains("notifications/cancelled"))
        .collect();
    assert_eq!(cancels, Vec::<String>::new(), "{:#?}", server.lines());
    drop(host);
}

/// README "The standalone stream": after a restart "the stream's loop makes a session itself
/// ... so `list_changed` is heard again without waiting for a call": the `GET` stream is open
/// whenever the session is live and the server allows it. Two restarts in a row: the
/// first is found by the `GET` on `m-1` (404, a new session `m-2`); the second forgets `m-2`
/// before its first `GET`. That `GET` is 404 too; the loop used to take the server for one
/// without a `GET` endpoint, so no session was made and the stream stayed shut until a call.
#[tokio::test(start_paused = true)]
async fn two_restarts_in_a_row_leave_the_standalone_stream_shut_until_a_call() {
    heartbeat();
    let (server, host) = streaming().await;
    // Restart 1: found by the GET on m-1, which makes m-2 and re-lists on it.
    server.forget_all();
    server
        .server
        .wait_until(Duration::from_secs(120), "the re-listing on m-2", |r| {
            r.iter().any(|r| {
                r.method() == "tools/list" && r.header("mcp-session-id").as_deref() == Some("m-2")
            })
        })
        .await;
    // Restart 2, before m-2's first GET.
    server.forget_all();
    let found = tokio::time::timeout(
        Duration::from_secs(300),
        server
            .server
            .wait_until(Duration::from_secs(300), "a GET on m-3", |r| {
                r.iter().any(|r| {
                    r.http_method == "GET" && r.header("mcp-session-id").as_deref() == Some("m-3")
                })
            }),
    )
    .await;
    assert!(found.is_ok(), "{:#?}", server.lines());
    assert_eq!(server.server.count("tools/call"), 0);
    drop(host);
}

/// README "Protocol eras, sessions and cancellation": a restart is recovered from without a re-initialize
/// storm on genuine 400s, and each session the client holds is deleted. A tool
/// whose plain-text 400 speaks of an application's session ("the booking session 42 was not
/// found") while the MCP session is alive: each call used to forget a session the server still
/// knew (never sent its `DELETE`) and make a new one.
#[tokio::test]
async fn a_tools_plain_text_400_about_its_own_session_leaks_a_session_per_call() {
    let server = Sessioned::start(|req, _| {
        (req.method() == "tools/call" && req.rpc["params"]["name"] == "book").then(|| {
            Reply::raw(
                400,
                "text/plain",
                "Bad Request: the booking session 42 was not found",
            )
        })
    })
    .await;
    server.set(|s| s.tools.push(tool("book", "books")));
    let host = ready(&server).await;
    // The first call learns that the 400 is the tool's own (one re-initialize); the next two get
    // it as an ordinary 400.
    let expected = [
        "server \"m\": the server rejected the session again right after a new initialize",
        "server \"m\": HTTP 400 Bad Request: Bad Request: the booking session 42 was not found",
        "server \"m\": HTTP 400 Bad Request: Bad Request: the booking session 42 was not found",
    ];
    for expected in expected {
        let called = tokio::time::timeout(
            Duration::from_secs(10),
            host.call(
                "call_dynamic_tool",
                json!({"namespace": "m", "toolName": "book", "arguments": {}}),
            ),
        )
        .await
        .expect("the call ends");
        assert_eq!(
            called,
            Err(ToolError::new(ToolErrorKind::Transport, expected))
        );
    }
    drop(host);
    tokio::time::sleep(Duration::from_secs(2)).await;
    // One re-initialize learns it: the fresh session got the same 400, so such 400s are the
    // tool's own from then on; both sessions are deleted at the drop.
    assert_eq!(
        (server.issued(), server.live()),
        (2, Vec::<String>::new()),
        "{:#?}",
        server.lines()
    );
}
