//! The connection machine (ARCHITECTURE "The connection machine"): every request, listing page,
//! stream and cancel bound to the session it was made on. Each test pins one failure the
//! loose-field session logic had, named after it, through the public contract.
//!
//! The servers are [`Sessioned`]: a 2025-era server on the hostile harness that hands out
//! sessions `m-1`, `m-2`, …, can forget them, and lets each test script `tools/list`,
//! `tools/call`, the standalone `GET` and `initialize`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

use crate::support::Host;
use crate::support::hostile::{
    Received, Reply, Server, entry, result, rpc_error, serve_every_get, sse_event, text_result,
    tool, tools_page,
};

/// On a paused clock, keeps a timer at most 50 ms ahead, so no jump skips past a deadline while
/// the peers are between two socket reads (as in the hostile tests).
pub(crate) fn heartbeat() {
    tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
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

type Answer = Arc<dyn Fn(&Received, &Arc<Mutex<State>>) -> Option<Reply> + Send + Sync>;

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
        let answer: Answer = Arc::new(answer);
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

fn respond_delay(req: &Received, state: &Arc<Mutex<State>>) -> Option<Duration> {
    let state = state.lock().unwrap();
    let goodbye = req.http_method == "DELETE" || req.method() == "notifications/cancelled";
    if goodbye && state.hang_goodbyes {
        return Some(Duration::from_secs(3600));
    }
    (req.method() == "initialize")
        .then_some(state.init_delay)
        .flatten()
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

pub(crate) fn call_args(tool: &str) -> Value {
    json!({"namespace": "m", "toolName": tool, "arguments": {}})
}

const STOPPED: &str = "the call to server \"m\" was stopped because the mcp Pack was shut down";

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
    server
        .server
        .wait_until(Duration::from_secs(120), "a GET on m-2", |r| {
            r.iter().any(|r| {
                r.http_method == "GET" && r.header("mcp-session-id").as_deref() == Some("m-2")
            })
        })
        .await;
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

/// A Pack on a runtime of its own (its tasks alone), for `servers`; the runtime is returned so
/// the test can watch its tasks end after the Pack's drop.
fn pack_on_own_runtime(servers: Value) -> (tokio::runtime::Runtime, Box<dyn runvil_plugin::Pack>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pack = {
        let _entered = runtime.enter();
        crate::support::construct(&json!({ "mcp": servers }), "mcp").expect("the Pack constructs")
    };
    (runtime, pack)
}

/// How long after the Pack's drop every task of `runtime` has ended (at most `limit`).
async fn cleanup_time(runtime: &tokio::runtime::Runtime, limit: Duration) -> Duration {
    let t0 = tokio::time::Instant::now();
    while runtime.metrics().num_alive_tasks() > 0 && t0.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t0.elapsed()
}

/// A server that accepts connections and never answers (it hangs) costs the Pack's drop at
/// most the 1 s an unanswered `initialize` gets to bring its session id; it used to cost 5 s.
#[tokio::test]
async fn a_server_that_hangs_costs_the_packs_drop_at_most_a_second() {
    let (listener, port) = crate::support::net::loopback().await;
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let healthy = Sessioned::start(|_, _| None).await;
    let (runtime, pack) = pack_on_own_runtime(json!({
        "m": entry(&healthy.server.url),
        "h": entry(&format!("http://127.0.0.1:{port}/mcp")),
    }));
    let host = Host { pack };
    host.ready("m", Duration::from_secs(20)).await;
    assert_eq!(
        host.call("call_dynamic_tool", call_args("t")).await,
        Ok("done".into())
    );
    drop(host);
    let took = cleanup_time(&runtime, Duration::from_secs(10)).await;
    assert!(took < Duration::from_millis(1_500), "{took:?}");
    assert_eq!(
        healthy.lines().last().map(String::as_str),
        Some("DELETE  m-1")
    );
    held.abort();
    runtime.shutdown_background();
}

/// The Pack's drop is bounded as a whole for a connection: with a call in flight whose cancel
/// the server never answers and a `DELETE` it never answers either, every step waiting its
/// own 5 s would add up past the host CLI's 11 s; the whole cleanup ends within 10 s.
#[tokio::test]
async fn the_cleanup_of_a_connection_is_bounded_as_a_whole() {
    let server = Sessioned::start(|req, _| {
        (req.method() == "tools/call")
            .then(|| Reply::stream(200, "application/json", futures_util::stream::pending()))
    })
    .await;
    server.set(|s| s.hang_goodbyes = true);
    let (runtime, pack) = pack_on_own_runtime(json!({"m": entry(&server.server.url)}));
    let host = Host { pack };
    host.ready("m", Duration::from_secs(20)).await;
    let call = runtime.spawn(host.pack.call("mcp/call_dynamic_tool", call_args("t")));
    server
        .server
        .wait_until(Duration::from_secs(5), "the call", |r| {
            r.iter().any(|r| r.method() == "tools/call")
        })
        .await;
    drop(host);
    let took = cleanup_time(&runtime, Duration::from_secs(30)).await;
    // The cancel waits 5 s (it may not eat into the DELETE's time), the DELETE 5 s.
    assert!(
        took >= Duration::from_secs(9) && took <= Duration::from_millis(10_500),
        "{took:?}"
    );
    let ended = call.await.unwrap();
    assert_eq!(
        ended,
        Err(ToolError::new(ToolErrorKind::Transport, STOPPED))
    );
    assert!(
        server.lines().contains(&"DELETE  m-1".to_string()),
        "{:#?}",
        server.lines()
    );
    runtime.shutdown_background();
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
