//! A reviewer's attacks on the connection machine through the public contract: interleavings
//! where a cancel, a stream or a session is not bound to the session the server still knows.
//! Each test is named after the failure it pins.
//!
//! The servers are [`crate::support::scripted`] and [`Sessioned`] (a 2025-era server on the
//! hostile harness that hands out sessions `m-1`, `m-2`, …, can forget them, and lets each test
//! script `tools/call` and the standalone `GET`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use runvil_plugin::ToolErrorKind;
use serde_json::{Value, json};

use crate::support::Host;
use crate::support::hostile::{
    Received, Reply, Server, entry, result, rpc_error, serve_every_get, text_result, tool,
    tools_page,
};
use crate::support::scripted::Scripted;

/// On a paused clock, keeps a timer at most 50 ms ahead, so no jump skips past a deadline while
/// the peers are between two socket reads.
fn heartbeat() {
    tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

#[derive(Default)]
struct State {
    issued: usize,
    live: Vec<String>,
    list_changed: bool,
}

type Answer = Arc<dyn Fn(&Received, &Arc<Mutex<State>>) -> Option<Reply> + Send + Sync>;

/// A scripted 2025-era server with sessions (as in the machine tests): a request carrying a
/// session it does not know gets 404; `initialize` makes `m-<n>`; `DELETE` ends a session; a
/// `GET` not handled is 405; `tools/list` lists `t`; `tools/call` not handled answers `done`.
struct Sessioned {
    server: Server,
    state: Arc<Mutex<State>>,
}

impl Sessioned {
    async fn start(
        answer: impl Fn(&Received, &Arc<Mutex<State>>) -> Option<Reply> + Send + Sync + 'static,
    ) -> Sessioned {
        let state = Arc::new(Mutex::new(State::default()));
        let answer: Answer = Arc::new(answer);
        let shared = Arc::clone(&state);
        let server = serve_every_get(move |req| {
            let state = Arc::clone(&shared);
            let answer = Arc::clone(&answer);
            async move { respond(&req, &state, &answer) }
        })
        .await;
        Sessioned { server, state }
    }

    fn forget_all(&self) {
        self.state.lock().unwrap().live.clear();
    }

    fn issued(&self) -> usize {
        self.state.lock().unwrap().issued
    }

    fn live(&self) -> Vec<String> {
        self.state.lock().unwrap().live.clone()
    }

    fn lines(&self) -> Vec<String> {
        self.server
            .requests()
            .iter()
            .map(|r| {
                let session = r.header("mcp-session-id").unwrap_or_else(|| "-".into());
                format!("{} {} {session}", r.http_method, r.method())
            })
            .collect()
    }
}

fn respond(req: &Received, state: &Arc<Mutex<State>>, answer: &Answer) -> Reply {
    let session = req.header("mcp-session-id");
    {
        let mut st = state.lock().unwrap();
        if let Some(s) = &session
            && !st.live.contains(s)
        {
            return Reply::raw(404, "text/plain", "no such session");
        }
        if req.method() == "initialize" {
            st.issued += 1;
            let id = format!("m-{}", st.issued);
            st.live.push(id.clone());
            let tools = if st.list_changed {
                json!({"listChanged": true})
            } else {
                json!({})
            };
            let body = json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": tools},
                              "serverInfo": {"name": "sessioned", "version": "0"}});
            return Reply::json(&result(&req.id(), body)).header("mcp-session-id", &id);
        }
        if req.http_method == "DELETE" {
            st.live.retain(|s| Some(s) != session.as_ref());
            return Reply::raw(200, "text/plain", "");
        }
    }
    if let Some(reply) = answer(req, state) {
        return reply;
    }
    if req.http_method == "GET" {
        return Reply::raw(405, "text/plain", "");
    }
    if req.rpc.get("id").is_none() || req.rpc.get("method").is_none() {
        return Reply::accepted();
    }
    match req.method() {
        "tools/list" => Reply::json(&tools_page(
            &req.id(),
            vec![tool("t", "a tool"), tool("book", "books")],
            None,
        )),
        "tools/call" => Reply::json(&text_result(&req.id(), "done")),
        _ => Reply::json(&rpc_error(&req.id(), -32601, "Method not found")),
    }
}

async fn ready(server: &Sessioned) -> Host {
    let host = Host::new(json!({"m": entry(&server.server.url)}));
    host.ready("m", Duration::from_secs(20)).await;
    host
}

/// The scripted server's `notifications/cancelled` steps, as `session status`.
fn scripted_cancels(server: &Scripted) -> Vec<String> {
    server
        .trail()
        .iter()
        .filter(|s| s.method == "notifications/cancelled")
        .map(|s| format!("{} {}", s.session.as_deref().unwrap_or("-"), s.status))
        .collect()
}

/// README "Sessions and cancellation": "No cancel follows ... an expired session". Call A is
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
    server
        .server
        .wait_until(Duration::from_secs(5), "a GET on m-1", |r| {
            r.iter().any(|r| r.http_method == "GET")
        })
        .await;
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
    let server = Sessioned::start(|req, _| {
        (req.http_method == "GET").then(|| {
            let ends = futures_util::stream::once(async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok(bytes::Bytes::from_static(b": bye\n\n"))
            });
            Reply::stream(200, "text/event-stream", ends)
        })
    })
    .await;
    server.state.lock().unwrap().list_changed = true;
    let host = ready(&server).await;
    server
        .server
        .wait_until(Duration::from_secs(5), "a GET on m-1", |r| {
            r.iter().any(|r| r.http_method == "GET")
        })
        .await;
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

/// README "Sessions and cancellation": a restart is recovered from without a re-initialize
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
    let host = ready(&server).await;
    for _ in 0..3 {
        let called = tokio::time::timeout(
            Duration::from_secs(10),
            host.call(
                "call_dynamic_tool",
                json!({"namespace": "m", "toolName": "book", "arguments": {}}),
            ),
        )
        .await
        .expect("the call ends");
        assert_eq!(called.unwrap_err().kind, ToolErrorKind::Transport);
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
