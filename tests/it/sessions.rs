//! Sessions and cancellation (MCP 2025-11-25 "Session Management", "Cancellation"; ARCHITECTURE
//! "The connection machine"): every request, listing page, stream and cancel bound to the
//! session it was sent on, connections reused, sessions renewed once when forgotten, and a
//! call's I/O on the Host's runtime.
//!
//! The servers are the strict stateful [`crate::support::scripted`] server, which records a
//! trail of every request and the status it answered, and [`Sessioned`], a 2025-era server on
//! the hostile harness that hands out sessions `m-1`, `m-2`, …, can forget them, and lets each
//! test script `tools/list`, `tools/call`, the standalone `GET` and `initialize`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use runvil_plugin::{BoxFuture, ToolError, ToolErrorKind};
use serde_json::{Value, json};

use crate::support::answers::heartbeat;
use crate::support::hostile::{
    self, Received, Reply, Server, entry, result, rpc_error, serve_every_get, sse_event,
    text_result, tool, tools_page,
};
use crate::support::scripted::{InitStyle, Scripted, Step};
use crate::support::{Host, WAIT, transport};

/// The scripted server's `notifications/cancelled` steps, as `session status`.
fn scripted_cancels(server: &Scripted) -> Vec<String> {
    server
        .trail()
        .iter()
        .filter(|s| s.method == "notifications/cancelled")
        .map(|s| format!("{} {}", s.session.as_deref().unwrap_or("-"), s.status))
        .collect()
}

/// What a [`Sessioned`] server knows and how it answers.
#[derive(Default)]
pub(crate) struct State {
    pub(crate) issued: usize,
    pub(crate) live: Vec<String>,
    /// `initialize` answers after this long (none: at once).
    pub(crate) init_delay: Option<Duration>,
    /// `initialize` answers 404 (a server restarting) while set.
    pub(crate) restarting: bool,
    /// The `instructions` of each `initialize` answer.
    pub(crate) instructions: Option<String>,
    /// Declares `tools.listChanged`.
    pub(crate) list_changed: bool,
    /// `notifications/cancelled` and `DELETE` get no answer (their headers never come).
    pub(crate) hang_goodbyes: bool,
    /// Listed beside `t`.
    pub(crate) tools: Vec<Value>,
}

pub(crate) type Responder =
    Arc<dyn Fn(&Received, &Arc<Mutex<State>>) -> Option<Reply> + Send + Sync>;

/// A scripted 2025-era server with sessions.
pub(crate) struct Sessioned {
    pub(crate) server: Server,
    pub(crate) state: Arc<Mutex<State>>,
}

impl Sessioned {
    /// Starts one; `answer` handles what it wants to (returning `None` for the rest): every
    /// request carrying a session the server does not know gets 404 first, `initialize` makes a
    /// session, notifications get 202, `DELETE` ends the session, a `GET` not handled is 405,
    /// `tools/list` not handled lists one tool `t`, `tools/call` not handled answers `done`.
    pub(crate) async fn start(
        answer: impl Fn(&Received, &Arc<Mutex<State>>) -> Option<Reply> + Send + Sync + 'static,
    ) -> Sessioned {
        let state = Arc::new(Mutex::new(State::default()));
        let answer: Responder = Arc::new(answer);
        let shared = Arc::clone(&state);
        let server = serve_every_get(move |req| {
            let state = Arc::clone(&shared);
            let answer = Arc::clone(&answer);
            async move {
                let delay = respond_delay(&req, &state);
                if let Some(delay) = delay {
                    tokio::time::sleep(delay).await;
                }
                respond(&req, &state, &answer)
            }
        })
        .await;
        Sessioned { server, state }
    }

    pub(crate) fn set(&self, change: impl FnOnce(&mut State)) {
        change(&mut self.state.lock().unwrap());
    }

    /// Forgets every session (a restart that kept the port).
    pub(crate) fn forget_all(&self) {
        self.state.lock().unwrap().live.clear();
    }

    pub(crate) fn issued(&self) -> usize {
        self.state.lock().unwrap().issued
    }

    /// The sessions it still knows, in the order it issued them.
    pub(crate) fn live(&self) -> Vec<String> {
        self.state.lock().unwrap().live.clone()
    }

    /// `VERB method session` of every request, in arrival order.
    pub(crate) fn lines(&self) -> Vec<String> {
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

pub(crate) fn respond_delay(req: &Received, state: &Arc<Mutex<State>>) -> Option<Duration> {
    let state = state.lock().unwrap();
    let goodbye = req.http_method == "DELETE" || req.method() == "notifications/cancelled";
    if goodbye && state.hang_goodbyes {
        return Some(Duration::from_secs(3600));
    }
    (req.method() == "initialize")
        .then_some(state.init_delay)
        .flatten()
}

pub(crate) fn respond(req: &Received, state: &Arc<Mutex<State>>, answer: &Responder) -> Reply {
    let session = req.header("mcp-session-id");
    {
        let mut st = state.lock().unwrap();
        if let Some(s) = &session
            && !st.live.contains(s)
        {
            return Reply::raw(404, "text/plain", "no such session");
        }
        if req.method() == "initialize" {
            if st.restarting {
                return Reply::raw(404, "text/plain", "restarting");
            }
            st.issued += 1;
            let id = format!("m-{}", st.issued);
            st.live.push(id.clone());
            let tools = if st.list_changed {
                json!({"listChanged": true})
            } else {
                json!({})
            };
            let mut body = json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": tools},
                                  "serverInfo": {"name": "sessioned", "version": "0"}});
            if let Some(text) = &st.instructions {
                body["instructions"] = json!(text);
            }
            return Reply::json(&result(&req.id(), body)).header("mcp-session-id", &id);
        }
        if req.http_method == "DELETE" {
            st.live.retain(|s| Some(s) != session.as_ref());
            return Reply::raw(200, "text/plain", "");
        }
    }
    if let Some(reply) = answer(req, state).or_else(|| hostile::housekeeping(req)) {
        return reply;
    }
    match req.method() {
        "tools/list" => {
            let mut tools = vec![tool("t", "a tool")];
            tools.extend(state.lock().unwrap().tools.iter().cloned());
            Reply::json(&tools_page(&req.id(), tools, None))
        }
        "tools/call" => Reply::json(&text_result(&req.id(), "done")),
        _ => Reply::json(&rpc_error(&req.id(), -32601, "Method not found")),
    }
}

pub(crate) async fn ready(server: &Sessioned) -> Host {
    let host = Host::new(json!({"m": entry(&server.server.url)}));
    host.ready("m", Duration::from_secs(20)).await;
    host
}

/// A ready [`Sessioned`] server declaring `listChanged` whose standalone streams each end after
/// 1 s, once its first `GET` (on `m-1`) arrived.
pub(crate) async fn streaming() -> (Sessioned, Host) {
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
    server.set(|s| s.list_changed = true);
    let host = ready(&server).await;
    saw_get(&server).await;
    (server, host)
}

/// Waits (at most 5 s) until a standalone `GET` arrived.
pub(crate) async fn saw_get(server: &Sessioned) {
    server
        .server
        .wait_until(Duration::from_secs(5), "a GET", |r| {
            r.iter().any(|r| r.http_method == "GET")
        })
        .await;
}

/// Waits (at most `limit`) until `server` has seen a `GET` on `session`.
async fn saw_get_on(server: &Sessioned, session: &str, limit: Duration) -> Vec<Received> {
    let what = format!("a GET on {session}");
    server
        .server
        .wait_until(limit, &what, |r| {
            r.iter().any(|r| {
                r.http_method == "GET" && r.header("mcp-session-id").as_deref() == Some(session)
            })
        })
        .await
}

pub(crate) fn call_args(tool: &str) -> Value {
    json!({"namespace": "m", "toolName": tool, "arguments": {}})
}

pub(crate) const STOPPED: &str =
    "the call to server \"m\" was stopped because the mcp Pack was shut down";

/// A Host with the one server `s` at `server`, once it is ready.
pub(crate) async fn ready_host(server: &Scripted) -> Host {
    let host = Host::new(json!({"s": {"url": server.url}}));
    host.ready("s", WAIT).await;
    host
}

/// A [`Scripted`] server and a Host with it as `s`, ready.
pub(crate) async fn started() -> (Scripted, Host) {
    let server = Scripted::start().await;
    let host = ready_host(&server).await;
    // The session's standalone GET (405, not in the trail) is answered before a test goes on:
    // under load it could come late, meet a session the test expired, and add its `ping` to
    // the trail the test asserts.
    stream_answered(&server).await;
    (server, host)
}

/// Waits until the server answered the first standalone `GET` (405, not recorded).
pub(crate) async fn stream_answered(server: &Scripted) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while server.unrecorded_gets() == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no standalone GET");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `call_dynamic_tool` of `t` on `s` with `arguments` (the server's script for the call).
pub(crate) fn call_scripted(host: &Host, arguments: Value) -> BoxFuture<Result<String, ToolError>> {
    host.pack.call(
        "mcp/call_dynamic_tool",
        json!({"namespace": "s", "toolName": "t", "arguments": arguments}),
    )
}

/// Waits until the trail holds a step whose line is `line`.
pub(crate) async fn saw(server: &Scripted, line: &str) {
    server
        .wait_until(WAIT, line, |t| t.iter().any(|s| s.line() == line))
        .await;
}

/// Drops the Host and waits until the trail has been quiet for 300 ms; returns the lines.
pub(crate) async fn drop_and_settle(server: &Scripted, host: Host) -> Vec<String> {
    drop(host);
    server
        .settle(Duration::from_millis(300), WAIT)
        .await
        .iter()
        .map(Step::line)
        .collect()
}

pub(crate) const START: [&str; 3] = [
    "POST initialize 2 - 200",
    "POST notifications/initialized - s-1 202",
    "POST tools/list 3 s-1 200",
];

/// `lines` without the one re-listing a re-initialize to `session` sets off (a restarted server
/// may offer other tools): asserts that there is exactly one `POST tools/list` on `session`,
/// after its `notifications/initialized`, and that it was answered. Its place among the call's
/// own requests on the new session depends on timing.
fn without_relisting(lines: &[String], session: &str) -> Vec<String> {
    let initialized = format!("POST notifications/initialized - {session} 202");
    let is_relisting =
        |l: &String| l.starts_with("POST tools/list ") && l.ends_with(&format!(" {session} 200"));
    let at: Vec<usize> = (0..lines.len())
        .filter(|&i| is_relisting(&lines[i]))
        .collect();
    assert_eq!(at.len(), 1, "one re-listing on {session}: {lines:#?}");
    let after = lines.iter().position(|l| *l == initialized);
    assert!(after.is_some_and(|i| i < at[0]), "{lines:#?}");
    lines.iter().filter(|l| !is_relisting(l)).cloned().collect()
}

/// Waits for the re-listing on `session` (see [`without_relisting`]).
async fn relisted_on(server: &Scripted, session: &str) {
    let end = format!(" {session} 200");
    server
        .wait_until(WAIT, "a re-listing", |t| {
            t.iter()
                .any(|s| s.method == "tools/list" && s.line().ends_with(&end))
        })
        .await;
}

pub(crate) fn trail_of(lines: &[&str]) -> Vec<String> {
    START.iter().chain(lines).map(|l| l.to_string()).collect()
}

/// Drops `host` and asserts that the trail, once settled, is the start and then `lines`.
async fn assert_trail_at_drop(server: &Scripted, host: Host, lines: &[&str]) {
    assert_eq!(drop_and_settle(server, host).await, trail_of(lines));
}

/// Drops `host` and asserts that the trail after the start is `line`, then the `DELETE` of s-1.
async fn assert_deleted_after(server: &Scripted, host: Host, line: &str) {
    assert_trail_at_drop(server, host, &[line, "DELETE - - s-1 200"]).await;
}

/// Drops the Host and waits until the trail has been quiet for `quiet`; returns the lines.
pub(crate) async fn drop_and_settle_for(
    server: &Scripted,
    host: Host,
    quiet: Duration,
) -> Vec<String> {
    drop(host);
    server
        .settle(quiet, WAIT)
        .await
        .iter()
        .map(Step::line)
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
        saw_get_on(&server, "m-3", Duration::from_secs(300)),
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

/// README: a call future that outlives the Pack resolves to a `transport` error — also while
/// it waits for the re-listing a miss asked for (it used to answer `not_found`).
#[tokio::test]
async fn a_call_waiting_on_a_refresh_on_miss_when_the_pack_is_dropped_is_a_transport_error() {
    for (tool, args) in [
        ("mcp/call_dynamic_tool", call_args("unlisted")),
        (
            "mcp/get_dynamic_tools",
            json!({"namespace": "m", "toolName": "unlisted"}),
        ),
    ] {
        let server = Sessioned::start(|req, _| {
            // The first listing answers; every later one hangs.
            (req.method() == "tools/list" && req.id() != json!(2) && req.id() != json!(3))
                .then(|| Reply::stream(200, "application/json", futures_util::stream::pending()))
        })
        .await;
        let host = ready(&server).await;
        let call = tokio::spawn(host.pack.call(tool, args));
        server
            .server
            .wait_until(Duration::from_secs(5), "the miss's re-listing", |r| {
                r.iter().filter(|r| r.method() == "tools/list").count() == 2
            })
            .await;
        drop(host);
        let outcome = tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .expect("the call resolves once the Pack is dropped")
            .unwrap();
        assert_eq!(
            outcome,
            Err(ToolError::new(ToolErrorKind::Transport, STOPPED)),
            "{tool}"
        );
    }
}

/// A re-listing that starts while the session is being renewed waits for the new session and
/// reads its pages by what that session declared (`tools`): the server's -32603 is a failed
/// re-listing, which keeps the tools — not "ready with no tools".
#[tokio::test]
async fn a_relisting_during_a_renewal_keeps_the_tools() {
    let server = Sessioned::start(|req, _| {
        let session = req.header("mcp-session-id");
        match req.method() {
            "tools/list" if session.as_deref() != Some("m-1") => {
                Some(Reply::json(&rpc_error(&req.id(), -32603, "internal error")))
            }
            _ => None,
        }
    })
    .await;
    let host = ready(&server).await;
    server.forget_all();
    server.set(|s| s.init_delay = Some(Duration::from_millis(500)));
    // The call finds m-1 gone and starts the renewal; the miss re-lists while it runs.
    let (called, missed) = tokio::join!(host.call("call_dynamic_tool", call_args("t")), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        host.call("call_dynamic_tool", call_args("unlisted")).await
    });
    assert_eq!(called, Ok("done".into()));
    assert_eq!(
        missed,
        Err(ToolError::new(
            ToolErrorKind::NotFound,
            "server \"m\" has no tool \"unlisted\"; list its tools with mcp/get_dynamic_tools {\"namespace\":\"m\"}"
        ))
    );
    assert_eq!(host.tool_names("m").await, ["t"]);
    assert_eq!(server.issued(), 2);
}

/// A re-listing that hits its deadline cancels its page (MCP lifecycle "Timeouts": cancel and
/// stop waiting) instead of leaving it in the in-flight table until the Pack is dropped.
#[tokio::test(start_paused = true)]
async fn a_relisting_that_hits_its_deadline_cancels_its_page() {
    heartbeat();
    let server = Sessioned::start(|req, _| {
        (req.method() == "tools/list" && req.id() != json!(2) && req.id() != json!(3))
            .then(|| Reply::stream(200, "application/json", futures_util::stream::pending()))
    })
    .await;
    let host = ready(&server).await;
    let missed = host.call("call_dynamic_tool", call_args("unlisted")).await;
    assert_eq!(
        missed,
        Err(ToolError::new(
            ToolErrorKind::NotFound,
            "server \"m\" has no tool \"unlisted\"; list its tools with mcp/get_dynamic_tools {\"namespace\":\"m\"}"
        ))
    );
    let page = server.server.with_method("tools/list")[1].id();
    assert_eq!(
        server.server.cancellations().await,
        [json!({"requestId": page, "reason": "the client stopped waiting for tools/list"})]
    );
    // Sent on the session the page went out on, before the Pack's drop.
    let cancel = &server.server.with_method("notifications/cancelled")[0];
    assert_eq!(cancel.header("mcp-session-id").as_deref(), Some("m-1"));
    assert_eq!(host.tool_names("m").await, ["t"]);
}

/// After a restart longer than the renewal's own retries (about 3 s), the standalone stream's
/// loop makes a session itself once the server is back and opens the stream again: no call is
/// needed to hear `list_changed` again.
#[tokio::test(start_paused = true)]
async fn after_a_long_restart_the_standalone_stream_reopens_without_a_call() {
    heartbeat();
    let (server, host) = streaming().await;
    // The restart: m-1 forgotten, initialize refused for 20 s.
    server.forget_all();
    server.set(|s| s.restarting = true);
    tokio::time::sleep(Duration::from_secs(20)).await;
    server.set(|s| s.restarting = false);
    saw_get_on(&server, "m-2", Duration::from_secs(120)).await;
    assert_eq!(server.server.count("tools/call"), 0);
    drop(host);
}

/// The server's `instructions` stay in the listing while a new session is being made: they
/// belong to the listing, made on the session that gave them.
#[tokio::test]
async fn instructions_stay_listed_while_the_session_is_renewed() {
    let server = Sessioned::start(|_, _| None).await;
    server.set(|s| s.instructions = Some("Use t for everything.".into()));
    let host = ready(&server).await;
    server.forget_all();
    server.set(|s| s.init_delay = Some(Duration::from_millis(800)));
    let call = host.call("call_dynamic_tool", call_args("t"));
    let during = async {
        server
            .server
            .wait_until(Duration::from_secs(5), "the second initialize", |r| {
                r.iter().filter(|r| r.method() == "initialize").count() == 2
            })
            .await;
        host.listing(json!({"namespace": "m"})).await
    };
    let (called, listing) = tokio::join!(call, during);
    assert_eq!(called, Ok("done".into()));
    assert_eq!(listing["instructions"], "Use t for everything.");
    assert_eq!(server.issued(), 2);
}

/// A server that declares `listChanged` but has no `GET` endpoint answers every `GET` 404.
/// A `ping` on the session tells that from a forgotten session: no endpoint, like a 405 — no
/// new session and re-listing every few seconds (it made seven sessions in 40 s).
#[tokio::test(start_paused = true)]
async fn a_server_that_answers_the_standalone_get_with_404_gets_no_session_storm() {
    heartbeat();
    let server = Sessioned::start(|req, _| {
        (req.http_method == "GET").then(|| Reply::raw(404, "text/plain", "Not Found"))
    })
    .await;
    server.set(|s| s.list_changed = true);
    let host = ready(&server).await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    // The 404 is asked about with a ping on the session, which answers: no GET endpoint, one
    // session, no new GET.
    assert_eq!(server.issued(), 1, "{:#?}", server.lines());
    let asked = server
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("GET") || l.contains("ping"))
        .collect::<Vec<_>>();
    assert_eq!(asked, ["GET  m-1", "POST ping m-1"]);
    assert_eq!(host.tool_names("m").await, ["t"]);
}

/// A server that does not declare `listChanged` may still send on the standalone stream: its
/// requests are answered there and its `list_changed` re-lists.
#[tokio::test]
async fn requests_and_list_changed_on_the_standalone_stream_are_heard_without_listchanged() {
    let sent = Arc::new(Mutex::new(false));
    let server = Sessioned::start(move |req, _| {
        if req.http_method != "GET" {
            return None;
        }
        let mut sent = sent.lock().unwrap();
        if *sent {
            return Some(Reply::stream(
                200,
                "text/event-stream",
                futures_util::stream::pending(),
            ));
        }
        *sent = true;
        let text = [
            json!({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}),
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        ]
        .iter()
        .map(sse_event)
        .collect::<String>();
        Some(Reply::raw(200, "text/event-stream", text))
    })
    .await;
    let host = ready(&server).await;
    let requests = server
        .server
        .wait_until(Duration::from_secs(10), "the ping's answer", |r| {
            r.iter()
                .any(|r| r.rpc["id"] == "srv-1" && r.rpc.get("result").is_some())
        })
        .await;
    let answer = requests.iter().find(|r| r.rpc["id"] == "srv-1").unwrap();
    assert_eq!(
        answer.rpc,
        json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}})
    );
    assert_eq!(answer.header("mcp-session-id").as_deref(), Some("m-1"));
    // The first listing, the one the opened stream asks for, and the list_changed's: at least 2.
    server
        .server
        .wait_until(Duration::from_secs(10), "a re-listing", |r| {
            r.iter().filter(|r| r.method() == "tools/list").count() >= 2
        })
        .await;
    drop(host);
}

/// The answer to a server's `ping` on a call's stream is bounded: a server that never answers
/// that POST does not stall the stream (the call gets its result, 5 s later).
#[tokio::test(start_paused = true)]
async fn a_ping_answer_the_server_never_accepts_does_not_stall_the_call() {
    heartbeat();
    let server = Sessioned::start(|req, _| {
        if req.rpc["id"] == "srv-1" {
            // The client's answer to the ping: never answered.
            return Some(Reply::stream(
                202,
                "text/plain",
                futures_util::stream::pending(),
            ));
        }
        (req.method() == "tools/call").then(|| {
            let text = [
                json!({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}),
                text_result(&req.id(), "after the ping"),
            ]
            .iter()
            .map(sse_event)
            .collect::<String>();
            Reply::raw(200, "text/event-stream", text)
        })
    })
    .await;
    let host = ready(&server).await;
    let t0 = tokio::time::Instant::now();
    let called = tokio::time::timeout(
        Duration::from_secs(60),
        host.call("call_dynamic_tool", call_args("t")),
    )
    .await
    .expect("the call does not wait for the ping's answer past its bound");
    assert_eq!(called, Ok("after the ping".into()));
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());
}

/// The call deadline (5 minutes) covers the wait for a refresh-on-miss too: a call whose tool
/// a slow re-listing brings, and which then hangs, ends 5 minutes after it was made — not 5
/// minutes after the re-listing.
#[tokio::test(start_paused = true)]
async fn the_call_deadline_covers_the_wait_for_a_refresh_on_miss() {
    heartbeat();
    let server = Sessioned::start(|req, _| match req.method() {
        "tools/list" if req.id() != json!(2) && req.id() != json!(3) => {
            let page = tools_page(
                &req.id(),
                vec![tool("t", "a tool"), tool("late", "late")],
                None,
            );
            let slow = futures_util::stream::once(async move {
                tokio::time::sleep(Duration::from_secs(110)).await;
                Ok(bytes::Bytes::from(page.to_string()))
            });
            Some(Reply::stream(200, "application/json", slow))
        }
        "tools/call" => Some(Reply::stream(
            200,
            "application/json",
            futures_util::stream::pending(),
        )),
        _ => None,
    })
    .await;
    let host = ready(&server).await;
    let t0 = tokio::time::Instant::now();
    let called = host.call("call_dynamic_tool", call_args("late")).await;
    let waited = t0.elapsed();
    assert_eq!(
        called,
        Err(ToolError::new(
            ToolErrorKind::Transport,
            "server \"m\" did not answer the tool call within 5 minutes"
        ))
    );
    assert!(
        waited >= Duration::from_secs(300) && waited < Duration::from_secs(301),
        "{waited:?}"
    );
    assert_eq!(server.server.count("tools/call"), 1);
}

/// A call dropped the moment it was made, racing its own task on a multi-thread runtime, is
/// either never sent or cancelled: no `tools/call` reaches the server without its cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_racing_its_own_task_is_never_left_running() {
    let server = Sessioned::start(|req, _| {
        (req.method() == "tools/call")
            .then(|| Reply::stream(200, "application/json", futures_util::stream::pending()))
    })
    .await;
    let host = ready(&server).await;
    for _ in 0..200 {
        drop(host.pack.call("mcp/call_dynamic_tool", call_args("t")));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent: Vec<Value> = server
        .server
        .with_method("tools/call")
        .iter()
        .map(|r| r.id())
        .collect();
    let cancelled: Vec<Value> = server
        .server
        .with_method("notifications/cancelled")
        .iter()
        .map(|r| r.rpc["params"]["requestId"].clone())
        .collect();
    for id in &sent {
        assert!(
            cancelled.contains(id),
            "request {id} was sent and never cancelled"
        );
    }
    drop(host);
}

/// Calls made one after another reuse one connection: after the first call, eleven more,
/// answered as JSON and as event streams in turn, open no connection. The start
/// (`initialize`, `notifications/initialized`, `tools/list`) and the session's standalone `GET`
/// ran on one; the first call may find it still reading the `GET`'s 405 and open a second.
#[tokio::test]
async fn sequential_calls_reuse_one_connection() {
    let (server, host) = started().await;
    let mut after_first = 0;
    for i in 0..12u64 {
        let text = call_scripted(&host, json!({"sse": i % 2 == 1}))
            .await
            .unwrap();
        assert_eq!(text, format!("done {}", i + 4));
        if i == 0 {
            after_first = server.connections();
        }
    }
    assert!(matches!(after_first, 1 | 2), "{after_first} connections");
    assert_eq!(server.connections(), after_first, "{:#?}", server.lines());
    assert_eq!(server.trail().len(), 3 + 12, "{:#?}", server.lines());
}

/// Eight calls held by the server at once need eight connections (HTTP/1.1 carries one
/// request at a time); a second burst of eight, after the first is answered, reuses all of
/// them: the server accepts exactly eight connections in all.
#[tokio::test]
async fn a_second_burst_reuses_the_connections_of_the_first() {
    // The standalone GET (405) was answered first (`started`), so its connection is back in
    // the pool.
    let (server, host) = started().await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    for burst in 0..2u64 {
        let calls = (0..8u64).map(|i| call_scripted(&host, json!({"ms": 300, "sse": i % 2 == 1})));
        let texts: Vec<String> = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let first = 4 + 8 * burst;
        let expected: Vec<String> = (first..first + 8).map(|id| format!("done {id}")).collect();
        assert_eq!(texts, expected);
        assert_eq!(server.connections(), 8, "after burst {burst}");
    }
}

#[tokio::test]
/// A session the server's words (a plain-text 400) called gone is not known to be gone: a call
/// still held on it is cancelled there, never on the new session. (After a 404 no cancel goes
/// to the forgotten session: tests/it/attack.rs.)
async fn cancel_goes_to_the_session_the_call_was_sent_on() {
    let (server, host) = started().await;
    let a = call_scripted(&host, json!({"ms": 10_000}));
    saw(&server, "POST tools/call 4 s-1 200").await;
    server.set_plain_text_expiry();
    server.expire("s-1");
    assert_eq!(call_scripted(&host, json!({})).await, Ok("done 5".into()));
    drop(a);
    saw(&server, "POST notifications/cancelled 4 s-1 400").await;
    let cancel = server
        .trail()
        .into_iter()
        .find(|s| s.method == "notifications/cancelled")
        .unwrap();
    assert_eq!(cancel.version.as_deref(), Some("2025-11-25"));
    // The re-initialize re-lists on s-2 too (`POST tools/list 7 s-2 200`); both sessions are
    // deleted at the drop (s-1 was not known to be gone), in either order.
    let trail = without_relisting(&drop_and_settle(&server, host).await, "s-2");
    let (mut deletes, rest): (Vec<String>, Vec<String>) =
        trail.into_iter().partition(|l| l.starts_with("DELETE"));
    deletes.sort();
    assert_eq!(deletes, ["DELETE - - s-1 404", "DELETE - - s-2 200"]);
    assert_eq!(
        rest,
        trail_of(&[
            "POST tools/call 4 s-1 200",
            "POST tools/call 5 s-1 400",
            "POST initialize 6 - 200",
            "POST notifications/initialized - s-2 202",
            "POST tools/call 5 s-2 200",
            "POST notifications/cancelled 4 s-1 400",
        ])
    );
}

/// A call the server refused (HTTP 400/500/503) is not cancelled; nor is one whose
/// re-initialize failed.
#[tokio::test]
async fn no_cancel_for_a_refused_call() {
    let (server, host) = started().await;
    for status in [400, 500] {
        let reason = match status {
            400 => "Bad Request",
            _ => "Internal Server Error",
        };
        assert_eq!(
            call_scripted(&host, json!({"status": status})).await,
            transport(&format!("server \"s\": HTTP {status} {reason}: refused"))
        );
    }
    // A 503 without Retry-After: not processed, and no wait named (the busy verdict).
    assert_eq!(
        call_scripted(&host, json!({"status": 503})).await,
        Err(ToolError::new(
            ToolErrorKind::Unavailable,
            "server \"s\" is unavailable: it refused the call as unavailable for now (HTTP 503) without saying when to call again; try again later"
        ))
    );
    server.restart_with_404(Duration::from_secs(30));
    assert_eq!(
        call_scripted(&host, json!({})).await,
        transport(
            "server \"s\": the server forgot the session and initializing again failed: HTTP 404 Not Found: restarting"
        )
    );
    let lines = server
        .settle(Duration::from_millis(300), WAIT)
        .await
        .iter()
        .map(Step::line)
        .collect::<Vec<_>>();
    assert_eq!(
        lines,
        trail_of(&[
            "POST tools/call 4 s-1 400",
            "POST tools/call 5 s-1 500",
            "POST tools/call 6 s-1 503",
            "POST tools/call 7 s-1 404",
            // The first try and five retries, 100 ms doubling.
            "POST initialize 8 - 404",
            "POST initialize 9 - 404",
            "POST initialize 10 - 404",
            "POST initialize 11 - 404",
            "POST initialize 12 - 404",
            "POST initialize 13 - 404",
        ])
    );
}

/// `initialize` answered as an event stream with a server `ping` and a resumption: the ping's
/// answer and the resumption GET carry the session the header gave (no version yet).
#[tokio::test]
async fn the_initialize_stream_carries_its_session() {
    let server = Scripted::start().await;
    server.set_init_style(InitStyle::SseWithPingAndResume);
    let host = ready_host(&server).await;
    let trail = server.trail();
    let lines: Vec<String> = trail.iter().map(Step::line).collect();
    assert_eq!(
        lines,
        [
            "POST initialize 2 - 200",
            "POST - \"ping-1\" s-1 202",
            "GET - - s-1 200",
            "POST notifications/initialized - s-1 202",
            "POST tools/list 3 s-1 200",
        ]
    );
    assert_eq!(trail[1].version, None);
    assert_eq!(trail[2].version, None);
    assert_eq!(trail[3].version.as_deref(), Some("2025-11-25"));
    drop(host);
}

/// A call's future needs no Tokio context: it is polled to completion on a plain thread by
/// another executor, and one dropped on a plain thread still cancels its request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_can_be_polled_by_any_executor() {
    let (server, host) = started().await;
    let quick = call_scripted(&host, json!({}));
    let answer = std::thread::spawn(move || futures_executor::block_on(quick))
        .join()
        .unwrap();
    assert_eq!(answer, Ok("done 4".into()));
    let held = call_scripted(&host, json!({"ms": 10_000}));
    saw(&server, "POST tools/call 5 s-1 200").await;
    std::thread::spawn(move || {
        let mut held = held;
        // Poll once (not ready), then drop it.
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(held.as_mut().poll(&mut cx).is_pending());
        drop(held);
    })
    .join()
    .unwrap();
    saw(&server, "POST notifications/cancelled 5 s-1 202").await;
    assert_trail_at_drop(
        &server,
        host,
        &[
            "POST tools/call 4 s-1 200",
            "POST tools/call 5 s-1 200",
            "POST notifications/cancelled 5 s-1 202",
            "DELETE - - s-1 200",
        ],
    )
    .await;
}

/// The re-initialize is one task of its own: the caller that saw the expiry may be dropped and
/// the session is still made, and used by the next call; a Pack dropped during a
/// re-initialize deletes the session that the initialize brings.
#[tokio::test]
async fn reinitialize_survives_its_caller_and_the_pack() {
    let (server, host) = started().await;
    server.set_init_delay(Duration::from_millis(300));
    server.expire("s-1");
    let b = call_scripted(&host, json!({}));
    // Dropped while the re-initialize it caused is half done (initialize held 300 ms).
    saw(&server, "POST initialize 5 - 200").await;
    drop(b);
    saw(&server, "POST notifications/initialized - s-2 202").await;
    // The new session is listed again, then the next call goes out on it.
    saw(&server, "POST tools/list 6 s-2 200").await;
    assert_eq!(call_scripted(&host, json!({})).await, Ok("done 7".into()));
    assert_trail_at_drop(
        &server,
        host,
        &[
            "POST tools/call 4 s-1 404",
            "POST initialize 5 - 200",
            "POST notifications/initialized - s-2 202",
            "POST tools/list 6 s-2 200",
            "POST tools/call 7 s-2 200",
            "DELETE - - s-2 200",
        ],
    )
    .await;

    let (server, host) = started().await;
    server.set_init_delay(Duration::from_millis(300));
    server.expire("s-1");
    let b = tokio::spawn(call_scripted(&host, json!({})));
    saw(&server, "POST initialize 5 - 200").await;
    // The initialize is held 300 ms from its arrival: the DELETE comes after its answer, so
    // the trail must stay quiet longer than that to be settled.
    let lines = drop_and_settle_for(&server, host, Duration::from_millis(1500)).await;
    assert_eq!(
        b.await.unwrap(),
        transport("the call to server \"s\" was stopped because the mcp Pack was shut down")
    );
    assert_eq!(
        lines,
        trail_of(&[
            "POST tools/call 4 s-1 404",
            "POST initialize 5 - 200",
            "DELETE - - s-2 200",
        ])
    );
    assert_eq!(server.live(), Vec::<String>::new());
}

/// A server restarting for a moment (404 to everything, or refusing connections) serves the
/// call once it is back: the re-initialize is retried 100 ms, 200 ms … later.
#[tokio::test]
async fn a_restarting_server_serves_the_call() {
    let (server, host) = started().await;
    server.restart_with_404(Duration::from_millis(250));
    assert_eq!(call_scripted(&host, json!({})).await, Ok("done 4".into()));
    relisted_on(&server, "s-2").await;
    let trail = server.trail();
    let lines: Vec<String> = trail.iter().map(Step::line).collect();
    let failed = trail
        .iter()
        .filter(|s| s.method == "initialize" && s.status == 404)
        .count();
    assert!((1..=3).contains(&failed), "{lines:#?}");
    let mut expected = vec!["POST tools/call 4 s-1 404".to_string()];
    expected.extend((0..failed).map(|i| format!("POST initialize {} - 404", 5 + i)));
    expected.push(format!("POST initialize {} - 200", 5 + failed));
    expected.push("POST notifications/initialized - s-2 202".into());
    expected.push("POST tools/call 4 s-2 200".into());
    // The re-initialize re-lists on s-2 too, with the next id.
    assert_eq!(without_relisting(&lines[3..], "s-2"), expected);
    assert!(lines.contains(&format!("POST tools/list {} s-2 200", 6 + failed)));

    // Now the server goes away right after its 404: the new initialize is refused (it never
    // arrives, but uses up an id), then tried again until the server listens again.
    let seen = lines.len();
    let id = 7 + failed as u64;
    server.restart_refusing_at_next_404(Duration::from_millis(250));
    server.expire("s-2");
    assert_eq!(
        call_scripted(&host, json!({})).await,
        Ok(format!("done {id}"))
    );
    relisted_on(&server, "s-3").await;
    let after: Vec<String> = without_relisting(&server.lines()[seen..], "s-3");
    let init_id: u64 = after[1].split(' ').nth(2).unwrap().parse().unwrap();
    assert!(init_id >= id + 2, "no refused attempt: {after:#?}");
    assert_eq!(
        after,
        [
            format!("POST tools/call {id} s-2 404"),
            format!("POST initialize {init_id} - 200"),
            "POST notifications/initialized - s-3 202".into(),
            format!("POST tools/call {id} s-3 200"),
        ]
    );
    let lines = drop_and_settle(&server, host).await;
    assert_eq!(lines.last().map(String::as_str), Some("DELETE - - s-3 200"));
    assert_eq!(server.live(), Vec::<String>::new());
}

/// A call made while the server restarts (refusing connections for 300 ms; it forgets s-1)
/// is served once it is back: a refused connect means the server never got the request, so
/// it is as safe to retry as the re-initialize the client already retries after a refusal.
#[tokio::test]
async fn a_call_during_a_refusing_restart_is_served_after_it() {
    let (server, host) = started().await;
    let (_, outcome) = tokio::join!(server.restart_refusing(Duration::from_millis(300)), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        call_scripted(&host, json!({})).await
    });
    assert_eq!(outcome, Ok("done 4".into()));
    // How the client finds its way back (resend, then 404, then initialize) is its own; the
    // call ends served on the new session, which is deleted at the end.
    let trail = drop_and_settle(&server, host).await;
    assert_eq!(
        trail[trail.len() - 2..],
        ["POST tools/call 4 s-2 200", "DELETE - - s-2 200"]
    );
    assert_eq!(server.live(), Vec::<String>::new());
}

/// A tool's own argument error on a 400 (`Invalid params: sessionId is required`, code -32602)
/// is not an expiry: the session is fine, so no new `initialize`, no resend, and the model sees
/// the server's refusal rather than "rejected the session again".
#[tokio::test]
async fn a_400_about_a_session_argument_is_not_an_expiry() {
    let (server, host) = started().await;
    let outcome = call_scripted(
        &host,
        json!({"status": 400, "rpc": "Invalid params: sessionId is required"}),
    )
    .await;
    assert_eq!(
        outcome,
        transport(
            "server \"s\": HTTP 400 Bad Request: {\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32602,\"message\":\"Invalid params: sessionId is required\"}}"
        )
    );
    assert_deleted_after(&server, host, "POST tools/call 4 s-1 400").await;
}

/// A reply stream that ends before the answer (no event id, so no resumption): the request may
/// still run, so it is cancelled — but the caller did not drop the call, and the reason the
/// server reads must not say it did.
#[tokio::test]
async fn a_broken_stream_is_cancelled_with_its_own_reason() {
    let (server, host) = started().await;
    let outcome = call_scripted(&host, json!({"cut": true})).await;
    assert!(outcome.is_err(), "{outcome:?}");
    saw(&server, "POST notifications/cancelled 4 s-1 202").await;
    let reasons: Vec<Option<String>> = server
        .trail()
        .into_iter()
        .filter(|s| s.method == "notifications/cancelled")
        .map(|s| s.reason)
        .collect();
    // The call was not dropped; its reply stream broke, and the reason says so.
    assert_eq!(
        reasons,
        [Some("the client lost the reply stream".to_string())]
    );
    drop(host);
}

/// The server refuses the call with HTTP 500, its status line and headers at once and its body
/// a second later. The caller drops the call while the body is on its way: the status already
/// said the server did not accept the request, so no cancel may follow it.
#[tokio::test]
async fn no_cancel_for_a_refused_call_dropped_while_its_body_is_read() {
    let (server, host) = started().await;
    let refused = call_scripted(&host, json!({"status": 500, "slow_body_ms": 1000}));
    let refused = tokio::spawn(async move {
        tokio::select! {
            outcome = refused => Some(outcome),
            () = tokio::time::sleep(Duration::from_millis(300)) => None,
        }
    });
    saw(&server, "POST tools/call 4 s-1 500").await;
    assert_eq!(refused.await.unwrap(), None, "dropped before the body came");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_deleted_after(&server, host, "POST tools/call 4 s-1 500").await;
}

/// As above, but the Pack is dropped while the refusal's body is on its way: the shutdown has
/// nothing to cancel, and the session is deleted.
#[tokio::test]
async fn no_cancel_at_pack_drop_for_a_call_whose_refusal_body_is_read() {
    let (server, host) = started().await;
    let refused = call_scripted(&host, json!({"status": 500, "slow_body_ms": 1000}));
    let refused = tokio::spawn(refused);
    saw(&server, "POST tools/call 4 s-1 500").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_deleted_after(&server, host, "POST tools/call 4 s-1 500").await;
    assert_eq!(
        refused.await.unwrap(),
        transport("the call to server \"s\" was stopped because the mcp Pack was shut down")
    );
}

/// Calls dropped right after they were made (never polled, polled once, or after a moment), 300
/// times on a two-thread runtime: every `tools/call` that reaches the server is cancelled, once,
/// on its session. A cancel may also name a call whose POST was handed to the connection but
/// never reached the server (the client cannot know whether the bytes left; MCP says a receiver
/// ignores a cancel for a request it does not know) — but only one of these calls, and once.
/// Racy by nature, so many rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_dropped_at_once_cancel_everything_that_was_sent() {
    let (server, host) = started().await;
    for i in 0..300u64 {
        let dropped = call_scripted(&host, json!({"ms": 20_000, "tag": i}));
        match i % 3 {
            1 => tokio::task::yield_now().await,
            2 => std::thread::sleep(Duration::from_micros(50)),
            _ => {}
        }
        drop(dropped);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let trail = server.trail();
    let ids = |method: &str| {
        let mut ids: Vec<u64> = trail
            .iter()
            .filter(|s| s.method == method)
            .filter_map(|s| s.id.as_u64())
            .collect();
        ids.sort_unstable();
        ids
    };
    let cancelled = ids("notifications/cancelled");
    let mut once = cancelled.clone();
    once.dedup();
    assert_eq!(once, cancelled, "a request cancelled twice");
    // Id 1 went to the era probe, 2 and 3 to initialize and tools/list; the calls are 4 to 303.
    assert!(
        cancelled.iter().all(|id| (4..=303).contains(id)),
        "{cancelled:?}"
    );
    let received = ids("tools/call");
    let uncancelled: Vec<&u64> = received
        .iter()
        .filter(|id| !cancelled.contains(id))
        .collect();
    assert_eq!(
        uncancelled,
        Vec::<&u64>::new(),
        "received but never cancelled"
    );
    // Each cancel went on s-1, the one session.
    assert!(
        trail
            .iter()
            .filter(|s| s.method == "notifications/cancelled")
            .all(|s| s.session.as_deref() == Some("s-1")),
        "{:#?}",
        trail.iter().map(Step::line).collect::<Vec<_>>()
    );
    drop(host);
}

/// The plain-text answer of older SDKs (Python SDK `mcp` 1.8–1.25) to a session they do not
/// know.
const NO_SESSION: &str = "Bad Request: No valid session ID provided";

/// A Host with the one entry `s` at `url`, once it is ready.
async fn ready_at(url: &str) -> Host {
    let host = Host::new(json!({"s": {"url": url}}));
    host.ready("s", WAIT).await;
    host
}

/// A renewal is no change of era (docs/connection.md "Verdicts"): a 2025-era tool that runs a
/// while on `s-1` and answers its own `-32020`, while a call of `u` meets the `404` of `s-1`
/// and is served on the renewed `s-2`. The route `t` came on left by a renewal of the same era,
/// so its answer is probed like any other (the server is still legacy): `t` is answered with
/// its own error and sent once, never again on `s-2`.
#[tokio::test]
async fn a_legacy_tools_own_code_is_not_sent_again_when_its_session_was_renewed_meanwhile() {
    #[derive(Default)]
    struct State {
        issued: usize,
        live: std::collections::HashSet<String>,
    }
    let state = Arc::new(std::sync::Mutex::new(State::default()));
    let shared = Arc::clone(&state);
    let server = hostile::serve(move |req| {
        let reply = {
            let mut st = shared.lock().unwrap();
            let session = req.header("mcp-session-id");
            let known = session.as_ref().is_some_and(|s| st.live.contains(s));
            if req.http_method == "DELETE" {
                Some(Reply::raw(200, "text/plain", ""))
            } else if req.method() == "initialize" {
                st.issued += 1;
                let sid = format!("s-{}", st.issued);
                st.live.insert(sid.clone());
                Some(hostile::initialize_reply(&req.id()).header("mcp-session-id", &sid))
            } else if let Some(reply) = hostile::housekeeping(&req) {
                Some(reply)
            } else if !known {
                Some(Reply::raw(
                    404,
                    "text/plain",
                    "Not Found: Session not found",
                ))
            } else {
                match req.method() {
                    "tools/list" => Some(Reply::json(&tools_page(
                        &req.id(),
                        vec![tool("t", "t"), tool("u", "u")],
                        None,
                    ))),
                    "tools/call" if req.rpc["params"]["name"] == "t" => None,
                    _ => Some(Reply::json(&text_result(&req.id(), "served"))),
                }
            }
        };
        async move {
            match reply {
                Some(reply) => reply,
                None => {
                    // The tool runs for a while, then answers with its own -32020.
                    tokio::time::sleep(Duration::from_millis(600)).await;
                    Reply::json(&hostile::rpc_error(
                        &req.id(),
                        -32020,
                        "the booking header did not match",
                    ))
                }
            }
        }
    })
    .await;
    let host = ready_at(&server.url).await;
    let t = host.call_tool("s", "t");
    let u = async {
        server
            .wait_until(WAIT, "the call of t", |r| {
                r.iter().any(|r| r.method() == "tools/call")
            })
            .await;
        state.lock().unwrap().live.remove("s-1");
        host.call_tool("s", "u").await
    };
    let (t, u) = tokio::join!(t, u);
    assert_eq!(u, Ok("served".into()));
    let runs: Vec<String> = server
        .with_method("tools/call")
        .iter()
        .filter(|r| r.rpc["params"]["name"] == "t")
        .map(|r| format!("t on {}", r.header("mcp-session-id").unwrap_or_default()))
        .collect();
    assert_eq!(runs, ["t on s-1"], "the tool's answer: {t:?}");
}

/// The server's words are the request's own only when met on a session made after the same
/// words (docs/connection.md "The server's words"). A call on `s-1` is refused `404`, and its
/// resend on the renewed `s-2` meets the words once (a replica that does not know `s-2` yet):
/// that session was made after a `404`, not after the words, so they still mean a gone
/// session. When the server later forgets `s-2` and answers with the same words, the session
/// is set aside, a new one made, and the call served.
#[tokio::test]
async fn words_met_after_a_404s_renewal_still_mean_a_gone_session_later() {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let (server, state) = crate::verdicts::legacy(move |req, st| {
        if req.method() != "tools/call" {
            return None;
        }
        Some(
            match calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 {
                // s-1 forgotten: a 404.
                1 => {
                    st.live.clear();
                    Reply::raw(404, "text/plain", "Not Found: Session not found")
                }
                // The resend on s-2 meets a replica that does not know s-2 yet.
                2 => Reply::raw(400, "text/plain", NO_SESSION),
                _ => Reply::json(&text_result(&req.id(), "served")),
            },
        )
    })
    .await;
    let host = ready_at(&server.url).await;
    let first = tokio::time::timeout(WAIT, host.call_tool("s", "t"))
        .await
        .expect("the first call returns");
    assert!(first.is_err(), "{first:?}");
    // The server restarts: s-2 (and any other session) is forgotten, answered with the words.
    state.lock().unwrap().live.clear();
    let later = tokio::time::timeout(WAIT, host.call_tool("s", "t"))
        .await
        .expect("the later call returns");
    assert_eq!(
        later.map_err(|e| e.message),
        Ok("served".to_string()),
        "the forgotten session is renewed"
    );
}

/// A `ping` answered with a code a probe finds to be the server's own shows the session lives
/// (docs/connection.md "The standalone stream"): the standalone `GET` is refused `404`, the
/// ping answered `-32022`, and `server/discover` finds the server still legacy. The ping's
/// verdict is the one after the probe ruled (the server's own): one `GET`, one `ping`, and the
/// server offers no standalone stream.
#[tokio::test]
async fn a_ping_answered_with_the_servers_own_modern_code_shows_the_session_lives_at_once() {
    let server = crate::verdicts::pinged(|req| {
        Reply::json(&hostile::rpc_error(&req.id(), -32022, "not this one"))
    })
    .await;
    let host = ready_at(&server.url).await;
    assert_eq!(
        server.gets_and_pings_after_the_first_ping().await,
        [1, 1],
        "GETs and pings after a ping answered with the server's own -32022"
    );
    drop(host);
}
