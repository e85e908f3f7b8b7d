//! Event streams (MCP spec "Streamable HTTP": SSE, resumption, the standalone `GET` stream):
//! where a cut stream resumes, how resumptions and reopenings are bounded and backed off, what
//! a refused resumption or a plain-text "no valid session" ends, server requests inside a call
//! stream, and the change-stream loop following the session machine when a call renews the
//! session.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt, stream};
use runvil_plugin::ToolError;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::bounds::{assert_read_to_the_cap, call_t_within, ready_on, ready_pair, tool_server};
use crate::support::answers::{
    Answer, assert_call_cancelled, call_t_times, cut_after, cut_stream, first_get_on,
    headers_then_silence, heartbeat, initialize, legacy_with, seconds,
};
use crate::support::hostile::{
    self, Received, Reply, SESSION, Server, entry, list_changed_initialize, result, serve,
    serve_routes, server_entry, sse_event, standard, text_result, tool, tools_page,
};
use crate::support::{Host, WAIT, transport};

/// The number of the session `s-N` a request carried (0 for none).
fn session_number(req: &Received) -> usize {
    req.header("mcp-session-id")
        .and_then(|s| s.strip_prefix("s-").and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// `200 text/event-stream` whose headers go out at once and whose body never sends a byte;
/// `closed` is set once the client closed it.
fn quiet_stream(closed: Arc<AtomicBool>) -> Reply {
    headers_then_silence(200, "text/event-stream", closed)
}

/// A server declaring `tools.listChanged` whose standalone `GET`s are answered by `get` and
/// whose `tools/list` by `list`; the rest as [`serve_routes`].
async fn stream_server<G, L>(get: G, list: L) -> Server
where
    G: Fn(&Received) -> Reply + Send + Sync + 'static,
    L: Fn(&Received) -> Reply + Send + Sync + 'static,
{
    serve_routes(move |req| {
        let reply = match (req.http_method.as_str(), req.method()) {
            ("GET", _) => Some(get(&req)),
            (_, "initialize") => Some(list_changed_initialize(&req.id())),
            (_, "tools/list") => Some(list(&req)),
            _ => None,
        };
        async move { reply }
    })
    .await
}

/// Waits (at most `limit`) until `server` has had `n` `GET`s; the gaps between them, in ms.
async fn get_gaps(server: &Server, limit: Duration, what: &str, n: usize) -> Vec<u128> {
    let is_get = |r: &&Received| r.http_method == "GET";
    let requests = server
        .wait_until(limit, what, |requests| {
            requests.iter().filter(is_get).count() == n
        })
        .await;
    let at: Vec<Instant> = requests.iter().filter(is_get).map(|r| r.at).collect();
    at.windows(2).map(|w| (w[1] - w[0]).as_millis()).collect()
}

/// A server whose `tools/call` stream and every resumption come from `stream(n, call)`, `n`
/// being 0 for the POST and 1, 2, … for each `GET` + `Last-Event-ID`, and `call` the id of the
/// `tools/call`.
async fn polling_server<F>(stream: F) -> Server
where
    F: Fn(usize, &Value) -> String + Send + Sync + 'static,
{
    let gets = Arc::new(AtomicUsize::new(0));
    let call = Arc::new(Mutex::new(Value::Null));
    let stream = Arc::new(stream);
    serve(move |req| {
        let gets = Arc::clone(&gets);
        let call = Arc::clone(&call);
        let stream = Arc::clone(&stream);
        async move {
            if req.http_method == "GET" {
                let n = gets.fetch_add(1, Ordering::SeqCst) + 1;
                let body = stream(n, &call.lock().unwrap());
                return Reply::raw(200, "text/event-stream", body);
            }
            if let Some(reply) = standard(&req) {
                return reply;
            }
            match req.method() {
                "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
                _ => {
                    *call.lock().unwrap() = req.id();
                    Reply::raw(200, "text/event-stream", stream(0, &req.id()))
                }
            }
        }
    })
    .await
}

/// The `Last-Event-ID` of each resumption, and its time after the `tools/call` in whole ms.
fn resumptions(server: &Server) -> Vec<(String, u128)> {
    let call = server.with_method("tools/call")[0].at;
    server
        .requests()
        .iter()
        .filter(|r| r.http_method == "GET")
        .map(|r| {
            let id = r.header("last-event-id").unwrap_or_default();
            (id, (r.at - call).as_millis())
        })
        .collect()
}

/// A `tools/call` or resumption `GET`'s answer, decided by the test: `None` falls back to the
/// server's usual answers.
type Script = dyn Fn(&Received, &mut State) -> Option<Reply> + Send + Sync;

/// What the server knows, and the trail of what it answered.
#[derive(Default)]
struct State {
    /// Sessions issued so far.
    issued: usize,
    live: HashSet<String>,
    /// How a request carrying a session the server does not know is answered.
    forgotten: Forgotten,
    /// `VERB method id session status`, `-` for none; a `GET` shows its `Last-Event-ID` as its
    /// method (`GET last-event-id=e1 - s-1 404`), a cancel its `requestId` as its id.
    trail: Vec<String>,
}

/// How the server answers a session it forgot.
#[derive(Clone, Copy, Default)]
enum Forgotten {
    /// MCP 2025-11-25: `404 Not Found`.
    #[default]
    NotFound,
    /// The Python SDK `mcp` 1.8–1.25: `400` with a plain-text body.
    PlainText400,
}

impl State {
    /// Forgets every session (a restart).
    fn restart(&mut self) {
        self.live.clear();
    }
}

/// The running server and its state.
struct Sessions {
    server: Server,
    state: Arc<Mutex<State>>,
}

impl Sessions {
    async fn start(
        forgotten: Forgotten,
        script: impl Fn(&Received, &mut State) -> Option<Reply> + Send + Sync + 'static,
    ) -> Sessions {
        let state = Arc::new(Mutex::new(State {
            forgotten,
            ..State::default()
        }));
        let script: Arc<Script> = Arc::new(script);
        let server =
            hostile::serve_with_state(Arc::clone(&state), move |req, st| answer(req, st, &*script))
                .await;
        Sessions { server, state }
    }

    fn trail(&self) -> Vec<String> {
        self.state.lock().unwrap().trail.clone()
    }

    /// Waits until the trail has been quiet for 300 ms; returns it.
    async fn settled(&self) -> Vec<String> {
        let mut seen = self.trail();
        loop {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let now = self.trail();
            if now == seen {
                return now;
            }
            seen = now;
        }
    }

    /// Waits until the trail holds `line`; returns the trail.
    async fn saw(&self, line: &str) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let trail = self.trail();
            if trail.iter().any(|l| l == line) {
                return trail;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {line:?} in {trail:#?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Answers one request and records it in the trail.
fn answer(req: &Received, st: &mut State, script: &Script) -> Reply {
    let session = req.header("mcp-session-id");
    let known = session.as_ref().is_some_and(|s| st.live.contains(s));
    let method = req.method().to_string();
    let reply = if req.http_method == "DELETE" {
        if let Some(s) = &session {
            st.live.remove(s);
        }
        Reply::raw(if known { 200 } else { 404 }, "text/plain", "")
    } else if method == "initialize" {
        st.issued += 1;
        let sid = format!("s-{}", st.issued);
        st.live.insert(sid.clone());
        Reply::json(&result(
            &req.id(),
            json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                   "serverInfo": {"name": "streams", "version": "0"}}),
        ))
        .header("mcp-session-id", &sid)
    } else if !known {
        match st.forgotten {
            Forgotten::NotFound => Reply::raw(404, "text/plain", "Not Found: Session not found"),
            Forgotten::PlainText400 => Reply::raw(
                400,
                "text/plain",
                "Bad Request: No valid session ID provided",
            ),
        }
    } else if let Some(reply) = script(req, st).or_else(|| hostile::housekeeping(req)) {
        reply
    } else if method == "tools/list" {
        Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
    } else {
        Reply::json(&hostile::rpc_error(&req.id(), -32601, "Method not found"))
    };
    let id = if method == "notifications/cancelled" {
        req.rpc["params"]["requestId"].clone()
    } else {
        req.id()
    };
    let shown = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let what = if req.http_method == "GET" {
        format!("last-event-id={}", shown(req.header("last-event-id")))
    } else {
        shown(Some(method).filter(|m| !m.is_empty()))
    };
    let id = match id {
        Value::Null => "-".to_string(),
        other => other.to_string(),
    };
    st.trail.push(format!(
        "{} {what} {id} {} {}",
        req.http_method,
        shown(session),
        reply.status
    ));
    reply
}

/// A notification the server sends on a call's stream before its answer.
fn progress() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/progress",
           "params": {"progressToken": "p", "progress": 1}})
}

async fn ready_host(server: &Sessions) -> Host {
    let host = Host::new(json!({"s": {"url": server.server.url}}));
    host.ready("s", WAIT).await;
    host
}

async fn call_t(host: &Host, arguments: Value) -> Result<String, ToolError> {
    tokio::time::timeout(
        WAIT,
        host.call(
            "call_dynamic_tool",
            json!({"namespace": "s", "toolName": "t", "arguments": arguments}),
        ),
    )
    .await
    .expect("the call returns")
}

/// Starts a server that forgets every session (a restart) when `tools/call` arrives and answers
/// it with `reply()`; makes the call from a host ready on it. The host is kept so that the trail
/// stays the call's.
async fn call_across_a_restart(
    forgotten: Forgotten,
    reply: fn() -> Reply,
) -> (Sessions, Host, Result<String, ToolError>) {
    let server = Sessions::start(forgotten, move |req, st| {
        (req.method() == "tools/call").then(|| {
            st.restart();
            reply()
        })
    })
    .await;
    let host = ready_host(&server).await;
    let called = call_t(&host, json!({})).await;
    (server, host, called)
}

const START: [&str; 3] = [
    "POST initialize 2 - 200",
    "POST notifications/initialized - s-1 202",
    "POST tools/list 3 s-1 200",
];

fn trail_of(lines: &[&str]) -> Vec<String> {
    START.iter().chain(lines).map(|l| l.to_string()).collect()
}

/// A second later, a call of `t` on `namespace` answers `ok on <session>`, and `server` gets
/// the `GET` on `session` (waited for at most `limit`) within the same second as that answer.
async fn call_then_get_at_once(
    host: &Host,
    namespace: &str,
    server: &Server,
    session: &str,
    limit: Duration,
) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let answer = host.call_tool(namespace, "t").await;
    assert_eq!(answer, Ok(format!("ok on {session}")));
    let answered = Instant::now();
    let get = first_get_on(server, session, limit).await;
    assert_eq!((get.at - answered).as_secs(), 0);
}

/// The loop's `ping` (after a `404` to s-1's `GET`) goes unanswered while a call finds s-1
/// forgotten and renews it to s-2. docs/connection.md: "The loop watches the session machine
/// while it waits: when the session its stream is on stops being the live one (a call renewed
/// it ...) ... the new session gets its own stream — at once when a call made it". The `ping`
/// is such a wait: the loop does not keep asking about s-1, which is no longer live, for the
/// rest of the ping's 10 s. s-2's `GET` goes out at once (0 s after the call's answer).
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
    let limit = Duration::from_secs(60);
    call_then_get_at_once(&host, "pinging", &server, "s-2", limit).await;
    drop(host);
}

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

/// A legacy server that forgets s-1 … s-5 (their standalone `GET` and the loop's `ping` both
/// answered 404), so the stream loop itself renews them one after the other and its backoff
/// grows (1, 2, 4, 8, then 16 s). While the loop waits out that 16 s after making s-6, a call
/// finds s-6 forgotten too and renews it to s-7. docs/connection.md and the loop's own doc:
/// "Every wait of the loop ... ends as soon as its session stops being the live one ... the
/// next live session gets its own at once when a call ... made it". The wait after a renewal
/// the loop asked for (`Turn::BackoffOnly`) watches too: s-7's `GET` goes out 0 s after the
/// call's answer, not when the 16 s are over.
#[tokio::test(start_paused = true)]
async fn a_call_renewal_during_the_wait_after_the_loops_own_renewal_gets_its_stream_at_once() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        let n = session_number(&req);
        match (req.http_method.as_str(), req.method()) {
            ("DELETE", _) => Reply::raw(200, "text/plain", ""),
            ("GET", _) if n <= 6 => Reply::raw(404, "text/plain", "Not Found"),
            ("GET", _) => headers_then_silence(200, "text/event-stream", Arc::default()),
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
    let limit = Duration::from_secs(120);
    call_then_get_at_once(&host, "grown", &server, "s-7", limit).await;
    drop(host);
}

/// A legacy server whose standalone `GET` and `ping` are answered with the plain-text 400 of
/// older SDKs ("No valid session ID provided") while calls on the session work. The stream
/// loop sets s-1 aside, makes s-2, meets the same words there and concludes that "such 400s are
/// the request's own from now on" (attack4). Learned from
/// `GET`/`ping` answers, that verdict does not disarm the `tools/call` path (which learns it on
/// its own after a resend): when the server later restarts and forgets s-2, answering every
/// request on it with those very words, a call still reads them as a forgotten session and is
/// answered `ok on s-3`.
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
    let answers = call_t_times(&host, "words", 2).await;
    assert_eq!(
        answers,
        [Ok("ok on s-3".to_string()), Ok("ok on s-3".to_string())]
    );
    drop(host);
}

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

/// A server whose `tools/call` is answered `200` as `content_type` with the bytes `first`, and
/// then the connection is cut.
async fn cut_call_server(content_type: &'static str, first: &'static [u8]) -> Server {
    tool_server(move |_req| async move {
        Reply::stream(200, content_type, cut_stream(Bytes::from_static(first)))
    })
    .await
}

/// The call's event stream breaks mid-event (no event id, so nothing to resume): a transport
/// error at once, and the server is told to drop the request.
#[tokio::test]
async fn call_stream_reset_mid_response_is_a_transport_error_at_once() {
    let server = cut_call_server(
        "text/event-stream",
        b"event: message\ndata: {\"jsonrpc\":\"2.0\",",
    )
    .await;
    let json_cut = cut_call_server("application/json", b"{\"jsonrpc\":\"2.0\",").await;
    let host = ready_pair(("reset", &server), ("jsoncut", &json_cut)).await;
    let started = std::time::Instant::now();
    let got = call_t_within(&host, "reset", Duration::from_secs(10)).await;
    let call = server.with_method("tools/call")[0].id();
    assert_eq!(
        got,
        transport(&format!(
            "server \"reset\": the server's event stream broke before the response to request {call}: the connection was cut"
        ))
    );
    assert_eq!(
        call_t_within(&host, "jsoncut", Duration::from_secs(10)).await,
        transport(
            "server \"jsoncut\": the connection was cut while the server's reply was being read"
        )
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "no hang: {:?}",
        started.elapsed()
    );
    for s in [&server, &json_cut] {
        assert_call_cancelled(s, "the client lost the reply stream").await;
    }
}

/// Resumptions that bring nothing new (the server replays no event, or only the id already
/// sent) count toward the limit of 5; then the call fails, saying how many came to nothing.
#[tokio::test(start_paused = true)]
async fn resumptions_that_bring_no_new_event_id_are_bounded() {
    heartbeat();
    let server = polling_server(|n, _| match n {
        0 => "id: p0\nretry: 5\ndata:\n\n".to_string(),
        // The first two resumptions bring new ids (the second in an event without data).
        1 => "id: g1\ndata:\n\n".to_string(),
        2 => "id: g2\n\n".to_string(),
        // Then: nothing, a comment, the same id again, a data event without an id, nothing.
        3 => String::new(),
        4 => ": still working\n\n".to_string(),
        5 => "id: g2\n\n".to_string(),
        6 => "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n".to_string(),
        _ => String::new(),
    })
    .await;
    let host = ready_on("resume", &server.url).await;
    let got = call_t_within(&host, "resume", Duration::from_secs(60)).await;
    let call = server.with_method("tools/call")[0].id();
    assert_eq!(
        got,
        transport(&format!(
            "server \"resume\": the server closed the event stream before the response to request {call}; 5 resumptions (GET with Last-Event-ID) brought no new event id"
        ))
    );
    // `retry: 5` is raised to the 100 ms floor.
    assert_eq!(
        resumptions(&server),
        [
            ("p0", 100),
            ("g1", 200),
            ("g2", 300),
            ("g2", 400),
            ("g2", 500),
            ("g2", 600),
            ("g2", 700)
        ]
        .map(|(id, at)| (id.to_string(), at))
    );
}

/// A server that closes the stream after every event and expects polling (MCP 2025-11-25,
/// SEP-1699): as long as each resumption brings a new event id, the call goes on — here through
/// 12 resumptions, waiting the server's `retry: 0` raised to 100 ms each time — until the answer.
#[tokio::test(start_paused = true)]
async fn polling_goes_on_while_each_resumption_brings_a_new_event_id() {
    heartbeat();
    let server = polling_server(|n, call| match n {
        0 => "id: 0\nretry: 0\ndata:\n\n".to_string(),
        12 => sse_event(&text_result(call, "done after polling")),
        n => format!(
            "id: {n}\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}}\n\n"
        ),
    })
    .await;
    let host = ready_on("poll", &server.url).await;
    assert_eq!(
        call_t_within(&host, "poll", Duration::from_secs(60)).await,
        Ok("done after polling".into())
    );
    let expected: Vec<(String, u128)> = (0..12)
        .map(|n| (n.to_string(), (n as u128 + 1) * 100))
        .collect();
    assert_eq!(resumptions(&server), expected);
}

/// `retry` is honoured exactly but capped at 30 s.
#[tokio::test(start_paused = true)]
async fn huge_retry_is_capped_at_30_seconds() {
    heartbeat();
    let server = polling_server(|n, call| match n {
        0 => "id: p0\nretry: 999999999\ndata:\n\n".to_string(),
        _ => sse_event(&text_result(call, "resumed")),
    })
    .await;
    let host = ready_on("r", &server.url).await;
    assert_eq!(
        call_t_within(&host, "r", Duration::from_secs(100)).await,
        Ok("resumed".into())
    );
    let call = &server.with_method("tools/call")[0];
    let get = server
        .requests()
        .into_iter()
        .find(|r| r.http_method == "GET")
        .unwrap();
    assert_eq!((get.at - call.at).as_millis(), 30_000);
}

#[tokio::test]
async fn server_requests_inside_a_call_stream_are_answered() {
    let server = tool_server(|req| async move {
        Reply::sse(&[
            json!({"jsonrpc": "2.0", "id": "s-1", "method": "sampling/createMessage", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 42, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 43, "method": "elicitation/create", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 44, "method": "roots/list"}),
            text_result(&req.id(), "answered after the questions"),
        ])
    })
    .await;
    let host = ready_on("asks", &server.url).await;
    assert_eq!(
        call_t_within(&host, "asks", Duration::from_secs(10)).await,
        Ok("answered after the questions".into())
    );
    let answers: Vec<(String, Option<String>, Option<String>)> = server
        .requests()
        .iter()
        .filter(|r| r.rpc.get("method").is_none())
        .map(|r| {
            (
                String::from_utf8(r.body.to_vec()).unwrap(),
                r.header("mcp-session-id"),
                r.header("mcp-protocol-version"),
            )
        })
        .collect();
    let with = |body: &str| {
        (
            body.to_string(),
            Some(SESSION.to_string()),
            Some("2025-06-18".to_string()),
        )
    };
    assert_eq!(
        answers,
        [
            with(
                r#"{"jsonrpc":"2.0","id":"s-1","error":{"code":-32601,"message":"Method not found"}}"#
            ),
            with(r#"{"jsonrpc":"2.0","id":42,"result":{}}"#),
            with(
                r#"{"jsonrpc":"2.0","id":43,"error":{"code":-32601,"message":"Method not found"}}"#
            ),
            with(
                r#"{"jsonrpc":"2.0","id":44,"error":{"code":-32601,"message":"Method not found"}}"#
            ),
        ]
    );
}

/// The standalone stream is bounded like every stream: an endless event is cut at 16 MiB and the
/// stream dropped, then asked for again after 1 s; the second answer (405) ends the asking.
#[tokio::test]
async fn an_endless_event_on_the_standalone_stream_is_cut_and_the_stream_reopened() {
    let sent = Arc::new(AtomicUsize::new(0));
    let sent2 = Arc::clone(&sent);
    let get = move |req: &Received| match req.nth {
        0 => Reply::endless(
            200,
            "text/event-stream",
            "data: ",
            Bytes::from(vec![b'x'; 64 * 1024]),
            Duration::from_millis(1),
            Arc::clone(&sent2),
        ),
        _ => Reply::raw(405, "text/plain", ""),
    };
    let server = stream_server(get, |req| {
        Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
    })
    .await;
    let host = ready_on("flood", &server.url).await;
    get_gaps(&server, Duration::from_secs(30), "a second GET", 2).await;
    assert_read_to_the_cap(sent.load(Ordering::SeqCst));
    let listing = host.listing(json!({})).await;
    assert_eq!(
        server_entry(&listing, "flood"),
        &json!({"namespace": "flood", "status": "ready", "tools": ["t"]})
    );
    // The start's listing and the one after the stream opened; a broken stream is no change.
    assert_eq!(server.count("tools/list"), 2);
}

/// Reopening waits 1 s, then doubles; a stream that stayed open a minute (proxies close idle
/// streams) starts the waits over.
#[tokio::test(start_paused = true)]
async fn the_standalone_stream_reopen_wait_doubles_and_a_long_stream_resets_it() {
    heartbeat();
    let get = |req: &Received| match req.nth + 1 {
        1 | 2 => Reply::raw(200, "text/event-stream", ": short\n\n"),
        3 => Reply::stream(
            200,
            "text/event-stream",
            stream::once(async { Ok(Bytes::from_static(b": long\n\n")) }).chain(stream::once(
                async {
                    tokio::time::sleep(Duration::from_secs(61)).await;
                    Ok(Bytes::from_static(b": bye\n\n"))
                },
            )),
        ),
        _ => Reply::raw(405, "text/plain", ""),
    };
    let server = stream_server(get, |req| {
        Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
    })
    .await;
    let _host = ready_on("long", &server.url).await;
    let gaps = get_gaps(&server, Duration::from_secs(200), "four GETs", 4).await;
    // 1 s, 2 s, then the 61 s stream and 1 s again (not 4 s).
    assert_eq!(gaps, [1000, 2000, 62_000]);
}

/// A tool the server adds between the start's listing and the opening of the standalone stream
/// has no stream to be announced on (a server does not keep notifications for a stream that is
/// not open). A change racing the listing must not be lost: once the stream is open, one
/// re-listing closes the gap, and the listing shows the tool without any call having to miss.
#[tokio::test]
async fn a_change_before_the_get_stream_opens_is_not_lost() {
    // Held open, with nothing to say: the change happened before it opened.
    let get = |_: &Received| {
        Reply::endless(
            200,
            "text/event-stream",
            ": open\n\n",
            Bytes::from_static(b": idle\n\n"),
            Duration::from_millis(500),
            Arc::new(AtomicUsize::new(0)),
        )
    };
    // The first answer is the start's; the tool `u` is added right after it.
    let server = stream_server(get, |req| {
        let tools = match req.nth {
            0 => vec![tool("t", "t")],
            _ => vec![tool("t", "t"), tool("u", "u")],
        };
        Reply::json(&tools_page(&req.id(), tools, None))
    })
    .await;
    let host = ready_on("gap", &server.url).await;
    server
        .wait_until(Duration::from_secs(10), "the standalone GET", |requests| {
            requests.iter().any(|r| r.http_method == "GET")
        })
        .await;
    let listing = host
        .wait_for(Duration::from_secs(5), |l| {
            server_entry(l, "gap")["tools"] == json!(["t", "u"])
        })
        .await;
    assert_eq!(
        server_entry(&listing, "gap"),
        &json!({"namespace": "gap", "status": "ready", "tools": ["t", "u"]})
    );
}

/// A server that opens every standalone stream (and ends it at once) but forgets the session on
/// every `tools/list` after the start: each open asks for a re-listing, whose 404 initializes
/// again. That renewal must not cut the stream's backoff short, or the GET, the re-listing and
/// the `initialize` would repeat in a tight loop: the streams open at 0 s, 1 s and 3 s.
#[tokio::test(start_paused = true)]
async fn a_stream_whose_relisting_meets_404_is_reopened_with_backoff() {
    heartbeat();
    let get = |_: &Received| Reply::raw(200, "text/event-stream", ": short\n\n");
    let server = stream_server(get, |req| match req.nth {
        0 => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
        _ => Reply::raw(404, "text/plain", "no such session"),
    })
    .await;
    let host = ready_on("lb", &server.url).await;
    let gaps = get_gaps(&server, Duration::from_secs(10), "three GETs", 3).await;
    assert_eq!(gaps, [1000, 2000]);
    // Long enough for the third stream's re-listing, well before a fourth stream (at 7 s).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The start's initialize, and one per opened stream's re-listing.
    assert_eq!(server.count("initialize"), 4);
    assert_eq!(server.count("tools/list"), 7);
    assert_eq!(
        server_entry(&host.listing(json!({})).await, "lb"),
        &json!({"namespace": "lb", "status": "ready", "tools": ["t"]})
    );
}

/// "A stream cut inside the response's own event loses the result." The call's stream carries
/// a notification as event `e1`, then starts the response as event `e2` and is cut inside it.
/// `e2` never arrived (WHATWG HTML, "Interpreting an event stream": an event is dispatched at
/// its blank line), so the resumption asks for what follows `e1`, and the server replays the
/// whole response.
#[tokio::test]
async fn a_stream_cut_inside_the_responses_own_event_resumes_after_the_last_whole_event() {
    // The answer to the call, made when the call arrives (from its request id).
    let answer = Mutex::new(String::new());
    let server = Sessions::start(Forgotten::NotFound, move |req, _| {
        if req.method() == "tools/call" {
            let mut answer = answer.lock().unwrap();
            *answer = text_result(&req.id(), "the tool's text").to_string();
            let (sent, _) = answer.split_at(answer.len() / 2);
            return Some(cut_after(format!(
                "retry: 100\nid: e1\ndata: {}\n\nid: e2\ndata: {sent}",
                progress()
            )));
        }
        if req.http_method == "GET" {
            // After e1 comes e2, whole; after e2 (or anything else) nothing.
            let replay = match req.header("last-event-id").as_deref() {
                Some("e1") => format!("id: e2\ndata: {}\n\n", answer.lock().unwrap()),
                _ => String::new(),
            };
            return Some(Reply::raw(200, "text/event-stream", replay));
        }
        None
    })
    .await;
    let host = ready_host(&server).await;
    assert_eq!(call_t(&host, json!({})).await, Ok("the tool's text".into()));
    assert_eq!(
        server.settled().await,
        trail_of(&[
            "POST tools/call 4 s-1 200",
            "GET last-event-id=e1 - s-1 200",
        ])
    );
}

/// "A cancel goes to a session the server just said it forgot." The call's stream is cut after
/// event `e1`; the server forgets the session meanwhile and answers the resumption `404`. The
/// request is over, on a session that is gone: no `notifications/cancelled` goes to it, and the
/// call, which may have run, is not sent again.
#[tokio::test]
async fn a_resumption_answered_404_sends_no_cancel_and_says_the_session_was_forgotten() {
    let (server, _host, called) = call_across_a_restart(Forgotten::NotFound, || {
        cut_after(format!("retry: 100\nid: e1\ndata: {}\n\n", progress()))
    })
    .await;
    let call = server.server.first(|r| r.method() == "tools/call").id();
    assert_eq!(
        called,
        transport(&format!(
            "server \"s\": the server forgot the session while request {call} was running (it refused to resume the event stream, GET with Last-Event-ID, for an unknown session); the request may have run, so it was not sent again"
        ))
    );
    // A cancel would go at once, in the background.
    assert_eq!(
        server.settled().await,
        trail_of(&[
            "POST tools/call 4 s-1 200",
            "GET last-event-id=e1 - s-1 404",
        ])
    );
}

/// "Python SDK `mcp` 1.8–1.25 (and FastMCP 2.x on them) answer a forgotten session with a
/// plain-text `400 Bad Request: No valid session ID provided`." After the server restarts, the
/// next call is refused that way on `s-1`: the client initializes once more and sends the call
/// again on `s-2`, which answers it.
#[tokio::test]
async fn a_plain_text_400_about_the_session_initializes_again_once_and_resends() {
    let server = Sessions::start(Forgotten::PlainText400, |req, _| {
        (req.method() == "tools/call").then(|| Reply::json(&text_result(&req.id(), "served")))
    })
    .await;
    let host = ready_host(&server).await;
    server.state.lock().unwrap().restart();
    assert_eq!(call_t(&host, json!({})).await, Ok("served".into()));
    // The new session's tools are listed again; where that lands among the call's requests
    // depends on timing.
    let relisting = "POST tools/list 6 s-2 200";
    let mut trail = server.saw(relisting).await;
    let at = trail.iter().position(|l| l == relisting).unwrap();
    assert!(
        at > 5,
        "the re-listing comes after s-2's initialized: {trail:#?}"
    );
    trail.remove(at);
    assert_eq!(
        trail,
        trail_of(&[
            "POST tools/call 4 s-1 400",
            "POST initialize 5 - 200",
            "POST notifications/initialized - s-2 202",
            "POST tools/call 4 s-2 200",
        ])
    );
    assert_eq!(server.settled().await.len(), 8);
}

/// The plain-text expiry keeps the rule of one resend: a server that forgets the session at
/// every call costs one `initialize`, and the call fails as rejected again.
#[tokio::test]
async fn a_plain_text_400_after_the_new_initialize_is_not_resent_again() {
    let (server, _host, called) = call_across_a_restart(Forgotten::PlainText400, || {
        Reply::raw(
            400,
            "text/plain",
            "Bad Request: No valid session ID provided",
        )
    })
    .await;
    assert_eq!(
        called,
        transport(
            "server \"s\": the server rejected the session again right after a new initialize"
        )
    );
    // Between the refusal and the resend, one handshake; nothing of the call after the resend.
    // (The re-listing on s-2 may meet the forgotten session too and initialize for itself.)
    let trail = server.settled().await;
    assert_eq!(trail[..4], trail_of(&["POST tools/call 4 s-1 400"]));
    let resend = trail
        .iter()
        .position(|l| l == "POST tools/call 4 s-2 400")
        .unwrap_or_else(|| panic!("no resend on s-2: {trail:#?}"));
    let between: Vec<&String> = trail[4..resend]
        .iter()
        .filter(|l| !l.starts_with("POST tools/list "))
        .collect();
    assert_eq!(
        between,
        [
            "POST initialize 5 - 200",
            "POST notifications/initialized - s-2 202"
        ]
    );
    let calls = trail.iter().filter(|l| l.contains(" tools/call ")).count();
    assert_eq!(calls, 2, "{trail:#?}");
}

/// A plain-text `400` that says nothing of the session (or names only an argument) is an
/// ordinary refusal: no `initialize`, no resend.
#[tokio::test]
async fn a_plain_text_400_about_an_argument_is_an_ordinary_400() {
    let server = Sessions::start(Forgotten::PlainText400, |req, _| {
        (req.method() == "tools/call")
            .then(|| Reply::raw(400, "text/plain", "Missing required argument: sessionId"))
    })
    .await;
    let host = ready_host(&server).await;
    assert_eq!(
        call_t(&host, json!({})).await,
        transport("server \"s\": HTTP 400 Bad Request: Missing required argument: sessionId")
    );
    assert_eq!(
        server.settled().await,
        trail_of(&["POST tools/call 4 s-1 400"])
    );
}

// ---------------------------------------------------------------------------------------------
// A response of no valid shape, wherever it comes (docs/connection.md "Verdicts": malformed)

/// `200 text/event-stream` sending `text`, then holding the stream open without a word.
fn held_open(text: String) -> Reply {
    Reply::stream(
        200,
        "text/event-stream",
        stream::once(async move { Ok(Bytes::from(text)) }).chain(stream::pending()),
    )
}

async fn ready_at(url: &str) -> Host {
    let host = Host::new(json!({"s": {"url": url}}));
    host.ready("s", WAIT).await;
    host
}

/// `error` members that are no JSON-RPC error object (JSON-RPC 2.0 §5.1: an object with an
/// integer `code`), as servers that build errors by hand send them.
fn errors_of_the_wrong_shape() -> [Value; 3] {
    [
        json!({"message": "quota exceeded"}),
        json!({"code": "-32000", "message": "quota exceeded"}),
        json!("quota exceeded"),
    ]
}

/// The answer to a call whose response to request `id` holds an `error` of the wrong shape.
fn error_of_the_wrong_shape(id: &Value) -> Result<String, ToolError> {
    transport(&format!(
        "server \"s\": the server's response to request {id} holds an error that is not a JSON-RPC error object with an integer code"
    ))
}

/// A response to the call's own id whose `error` is of the wrong shape, on an event stream the
/// server keeps open, is the call's answer: malformed, at once (not at the stream's end), and,
/// being an answer, never cancelled.
#[tokio::test]
async fn an_error_of_the_wrong_shape_on_an_open_stream_is_answered_at_once() {
    for error in errors_of_the_wrong_shape() {
        let sent = error.clone();
        let server = hostile::serve_tools(vec![tool("t", "t")], move |req| {
            held_open(sse_event(
                &json!({"jsonrpc": "2.0", "id": req.id(), "error": sent.clone()}),
            ))
        })
        .await;
        let host = ready_at(&server.url).await;
        let called = tokio::time::timeout(Duration::from_secs(3), host.call_tool("s", "t"))
            .await
            .unwrap_or_else(|_| panic!("error {error}: answered at once, not at the stream's end"));
        let id = server.first(|r| r.method() == "tools/call").id();
        assert_eq!(called, error_of_the_wrong_shape(&id), "error {error}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(server.count("notifications/cancelled"), 0, "error {error}");
    }
}

/// The same response in a JSON body is the same verdict, in the same words.
#[tokio::test]
async fn an_error_of_the_wrong_shape_in_a_json_body_is_malformed_in_the_same_words() {
    for error in errors_of_the_wrong_shape() {
        let sent = error.clone();
        let server = hostile::serve_tools(vec![tool("t", "t")], move |req| {
            Reply::json(&json!({"jsonrpc": "2.0", "id": req.id(), "error": sent.clone()}))
        })
        .await;
        let host = ready_at(&server.url).await;
        let called = host.call_tool("s", "t").await;
        let id = server.first(|r| r.method() == "tools/call").id();
        assert_eq!(called, error_of_the_wrong_shape(&id), "error {error}");
    }
}

/// And on the stream a resumption (`GET` with `Last-Event-ID`) opened: the call's stream is
/// cut after event `e1`, and the resumed stream, held open, brings the response with an
/// `error` of the wrong shape. The call is answered at once, and not cancelled.
#[tokio::test]
async fn an_error_of_the_wrong_shape_on_a_resumed_stream_is_answered_at_once() {
    let call = Arc::new(Mutex::new(Value::Null));
    let seen = Arc::clone(&call);
    let server = hostile::serve(move |req| {
        let reply = if req.http_method == "GET" && req.header("last-event-id").is_some() {
            let id = seen.lock().unwrap().clone();
            held_open(sse_event(
                &json!({"jsonrpc": "2.0", "id": id, "error": "quota exceeded"}),
            ))
        } else {
            standard(&req).unwrap_or_else(|| match req.method() {
                "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
                _ => {
                    *seen.lock().unwrap() = req.id();
                    cut_after(format!("retry: 100\nid: e1\ndata: {}\n\n", progress()))
                }
            })
        };
        async move { reply }
    })
    .await;
    let host = ready_at(&server.url).await;
    let called = tokio::time::timeout(Duration::from_secs(3), host.call_tool("s", "t"))
        .await
        .expect("answered at once, not at the resumed stream's end");
    let id = call.lock().unwrap().clone();
    assert_eq!(called, error_of_the_wrong_shape(&id));
    assert_eq!(server.count_verb("GET"), 1, "one resumption");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(server.count("notifications/cancelled"), 0);
}

/// The answer to a call whose response to request `id` holds neither `result` nor `error`.
fn holds_neither(id: &Value) -> Result<String, ToolError> {
    transport(&format!(
        "server \"s\": the server's response to request {id} holds neither a result nor an error"
    ))
}

/// A response that echoes its request's `method` and holds neither `result` nor `error`
/// (`{"jsonrpc":"2.0","id":N,"method":"tools/call"}`, the call's own id and method, from a
/// server that copies the request into its response) is a response of no valid shape, not a
/// server request: on the call's open stream it is answered at once as malformed, and no
/// `-32601` goes back to the server for it.
#[tokio::test]
async fn a_hollow_response_echoing_its_method_on_an_open_stream_is_answered_at_once() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        held_open(sse_event(
            &json!({"jsonrpc": "2.0", "id": req.id(), "method": "tools/call"}),
        ))
    })
    .await;
    let host = ready_at(&server.url).await;
    let called = tokio::time::timeout(Duration::from_secs(3), host.call_tool("s", "t"))
        .await
        .expect("answered at once, not at the stream's end");
    let id = server.first(|r| r.method() == "tools/call").id();
    assert_eq!(called, holds_neither(&id));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let answers = server.requests();
    let answers = answers.iter().filter(|r| r.rpc.get("error").is_some());
    assert_eq!(answers.count(), 0, "no answer to a server request");
    assert_eq!(server.count("notifications/cancelled"), 0);
}

/// The same echo in a JSON body is the same verdict, in the same words.
#[tokio::test]
async fn a_hollow_response_echoing_its_method_in_a_json_body_is_malformed_too() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        Reply::json(&json!({"jsonrpc": "2.0", "id": req.id(), "method": "tools/call"}))
    })
    .await;
    let host = ready_at(&server.url).await;
    let called = host.call_tool("s", "t").await;
    let id = server.first(|r| r.method() == "tools/call").id();
    assert_eq!(called, holds_neither(&id));
}

/// `"result": null` is a result (JSON-RPC 2.0 §5 allows any value), not a response without
/// one: a `tools/call` so answered fails as a result of the wrong shape.
#[tokio::test]
async fn a_call_answered_with_a_null_result_is_a_result_of_the_wrong_shape() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        Reply::json(&json!({"jsonrpc": "2.0", "id": req.id(), "result": null}))
    })
    .await;
    let host = ready_at(&server.url).await;
    assert_eq!(
        host.call_tool("s", "t").await,
        transport("server \"s\": the server's tools/call result is not a valid CallToolResult")
    );
}

/// The standalone `GET` refused `404` is asked about with a `ping`; any response to the ping's
/// id shows the session lives — one with neither `result` nor `error` (malformed), or with
/// `"result": null` (a result) — so the server has no `GET` endpoint: one `GET`, one `ping`,
/// and the loop asks nothing more.
#[tokio::test]
async fn a_ping_answered_without_result_or_error_still_shows_the_session_lives() {
    for null_result in [false, true] {
        let server = hostile::serve_all(move |req| async move {
            let id = req.id();
            let pong = match null_result {
                false => json!({"jsonrpc": "2.0", "id": id}),
                true => json!({"jsonrpc": "2.0", "id": id, "result": null}),
            };
            match (req.http_method.as_str(), req.method()) {
                ("POST", "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
                ("GET", _) => Reply::raw(404, "text/plain", "Not Found"),
                ("POST", "ping") => Reply::json(&pong),
                ("POST", "tools/list") => Reply::json(&tools_page(&id, vec![tool("t", "t")], None)),
                _ => standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
            }
        })
        .await;
        let host = ready_at(&server.url).await;
        assert_eq!(
            server.gets_and_pings_after_the_first_ping().await,
            [1, 1],
            "GETs and pings after a ping answered without a result (null result: {null_result})"
        );
        assert_eq!(server.count("initialize"), 1);
        drop(host);
    }
}

/// A Host of `s` at `server`, ready; once the stream's first `ping` went out, a call of `t`
/// returns, and fails.
async fn a_call_fails_after_the_first_ping(server: &Server) -> Host {
    let host = Host::new(json!({ "s": entry(&server.url) }));
    host.ready("s", WAIT).await;
    server
        .wait_until(WAIT, "the ping on s-1", |r| {
            r.iter().any(|r| r.method() == "ping")
        })
        .await;
    let called = tokio::time::timeout(WAIT, host.call_tool("s", "t"))
        .await
        .expect("the call returns");
    assert!(called.is_err(), "{called:?}");
    host
}

/// The server's "no valid session" words are read by two rules, one for the request path and
/// one for the stream machine (docs/connection.md "The server's words"). A tool `t` answers
/// those words itself on every session (so, after a renewal that met them again, they are the
/// request path's own), on a server whose `GET` answers them too. On the renewed `s-2` the
/// stream machine has not met them yet: its `GET` is asked about with one `ping` (answered:
/// the session lives, no stream offered), and no `GET` is opened again.
#[tokio::test]
async fn the_streams_get_reads_the_servers_words_by_the_streams_own_rule() {
    const GONE: &str = "Bad Request: No valid session ID provided";
    let issued = Arc::new(AtomicUsize::new(0));
    let server = serve({
        let issued = Arc::clone(&issued);
        move |req| {
            let reply = if req.http_method == "DELETE" {
                Reply::raw(200, "text/plain", "")
            } else if req.http_method == "GET" {
                Reply::raw(400, "text/plain", GONE)
            } else {
                match req.method() {
                    "initialize" => {
                        let n = issued.fetch_add(1, Ordering::SeqCst) + 1;
                        initialize(&req.id(), &format!("s-{n}"))
                    }
                    "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
                    "tools/call" => Reply::raw(400, "text/plain", GONE),
                    _ => {
                        standard(&req).unwrap_or_else(|| Reply::json(&result(&req.id(), json!({}))))
                    }
                }
            };
            async move { reply }
        }
    })
    .await;
    let host = a_call_fails_after_the_first_ping(&server).await;
    assert_eq!(issued.load(Ordering::SeqCst), 2, "the call renewed once");
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let on_s2: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.header("mcp-session-id").as_deref() == Some("s-2"))
        .filter(|r| r.http_method == "GET" || r.method() == "ping")
        .map(|r| format!("{} {}", r.http_method, r.method()))
        .collect();
    assert_eq!(on_s2, ["GET ", "POST ping"], "the stream's requests on s-2");
    drop(host);
}

/// The loop's `ping` is the stream's own request: the server's "no valid session" words in its
/// refusal are read by the stream machine's rule, as its `GET`'s are (docs/connection.md "The
/// server's words"), never by what the call path learned. A tool `t` answers those words on
/// every session, so after a call met them again on the renewed `s-2` they are the call path's
/// own; the `GET` is refused `404` and the `ping` asked after it gets the words. By the stream's
/// rule, which has not met them on a session made after them, `s-2` is gone: the loop makes
/// `s-3` (three `initialize`s); read by the call path's rule, the words would be the answer's
/// own and the loop would only back off.
#[tokio::test]
async fn the_streams_ping_reads_the_servers_words_by_the_streams_own_rule() {
    const GONE: &str = "Bad Request: No valid session ID provided";
    let calls = Arc::new(AtomicUsize::new(0));
    let issued = Arc::new(AtomicUsize::new(0));
    let server = hostile::serve_all({
        let (calls, issued) = (Arc::clone(&calls), Arc::clone(&issued));
        move |req| {
            let (calls, issued) = (Arc::clone(&calls), Arc::clone(&issued));
            async move {
                match (req.http_method.as_str(), req.method()) {
                    ("DELETE", _) => Reply::raw(200, "text/plain", ""),
                    ("GET", _) => Reply::raw(404, "text/plain", "Not Found"),
                    (_, "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
                    (_, "initialize") => {
                        let n = issued.fetch_add(1, Ordering::SeqCst) + 1;
                        initialize(&req.id(), &format!("s-{n}"))
                    }
                    _ if req.rpc.get("id").is_none() => Reply::accepted(),
                    (_, "tools/list") => {
                        Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
                    }
                    (_, "tools/call") => {
                        calls.fetch_add(1, Ordering::SeqCst);
                        Reply::raw(400, "text/plain", GONE)
                    }
                    (_, "ping") => {
                        // Held until the call path has learned the words.
                        while calls.load(Ordering::SeqCst) < 2 {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        Reply::raw(400, "text/plain", GONE)
                    }
                    _ => Reply::raw(400, "text/plain", ""),
                }
            }
        }
    })
    .await;
    let host = a_call_fails_after_the_first_ping(&server).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the call was resent once, on s-2"
    );
    server
        .wait_until(WAIT, "the ping on s-2", |r| {
            r.iter().any(|r| {
                r.method() == "ping" && r.header("mcp-session-id").as_deref() == Some("s-2")
            })
        })
        .await;
    server
        .wait_until(WAIT, "the loop's renewal after the ping's words", |_| {
            issued.load(Ordering::SeqCst) == 3
        })
        .await;
    drop(host);
}

/// A response that lost its id (`"id": null`, or none) but holds a `result` can only answer the
/// one request its POST carries: on an event stream the server keeps open it ends the call at
/// once as malformed, as it does in a JSON body, and no cancel is sent for a request the server
/// answered.
#[tokio::test]
async fn a_result_without_an_id_on_an_open_stream_is_answered_at_once() {
    for id in [Some(Value::Null), None] {
        let mut response = json!({
            "jsonrpc": "2.0",
            "result": {"content": [{"type": "text", "text": "served"}]}
        });
        if let Some(id) = &id {
            response["id"] = id.clone();
        }
        let server = hostile::serve_tools(vec![tool("t", "t")], move |_| {
            held_open(sse_event(&response))
        })
        .await;
        let host = ready_at(&server.url).await;
        let called = tokio::time::timeout(WAIT, host.call_tool("s", "t"))
            .await
            .expect("answered at once");
        let call_id = server.first(|r| r.method() == "tools/call").id();
        assert_eq!(
            called,
            transport(&format!(
                "server \"s\": the server's response to request {call_id} holds a result without the request's id"
            )),
            "id {id:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(server.count("notifications/cancelled"), 0, "id {id:?}");
    }
}

/// A response's id is the request's own (JSON-RPC 2.0 §5: the same value), also when a server
/// echoes it as a string of the same digits, never another spelling of the number: a reply
/// holding only `"+7"` or `"007"` holds no response to request 7.
#[tokio::test]
async fn a_response_to_another_spelling_of_the_id_is_no_answer() {
    for spelled in ["+{}", "00{}", " {}"] {
        let server = hostile::serve_tools(vec![tool("t", "t")], move |req| {
            let id = req.id();
            Reply::json(&json!({
                "jsonrpc": "2.0",
                "id": spelled.replace("{}", &id.to_string()),
                "result": {"content": [{"type": "text", "text": "served"}]}
            }))
        })
        .await;
        let host = ready_at(&server.url).await;
        let called = host.call_tool("s", "t").await;
        let call_id = server.first(|r| r.method() == "tools/call").id();
        assert_eq!(
            called,
            transport(&format!(
                "server \"s\": the server's JSON reply held no response to request {call_id}"
            )),
            "{spelled}"
        );
    }
}

/// Messages on a call's own reply that answer nothing of it.
mod foreign_and_odd_messages {
    use std::time::Duration;

    use serde_json::json;

    use crate::support::Host;
    use crate::support::hostile::{self, Reply};

    /// A modern server answers a call on an event stream with a response to another id, then
    /// ends the stream. In a JSON body the same reply is refused at once ("held no response"),
    /// never sent again; on the stream it is read the same: the server answered, so the tool
    /// ran, and re-issuing the call would run it twice. Counted here: `tools/call` requests.
    #[tokio::test]
    async fn a_modern_call_answered_with_another_id_on_a_stream_is_not_sent_twice() {
        let server = hostile::serve_all(|req| async move {
            match req.method() {
                "server/discover" => crate::support::answers::discover_result(&req.id()),
                "tools/list" => Reply::json(&hostile::tools_page(
                    &req.id(),
                    vec![hostile::tool("t", "t")],
                    None,
                )),
                "tools/call" => {
                    let other = json!(req.id().as_u64().unwrap() + 1000);
                    Reply::sse(&[hostile::text_result(&other, "ran")])
                }
                _ => Reply::raw(400, "text/plain", ""),
            }
        })
        .await;
        let host = Host::new(json!({"m": {"url": server.url}}));
        host.ready("m", Duration::from_secs(10)).await;
        let call = host.call_tool("m", "t").await;
        assert!(call.is_err(), "{call:?}");
        assert_eq!(server.count("tools/call"), 1, "{call:?}");
    }

    /// A tagged message with neither `id`, `result` nor `error` but a `method` that is no string
    /// (a malformed notification: `{"jsonrpc":"2.0","method":{...},"params":{}}`) is no response
    /// to anything. On a call's stream it is skipped, and the call's own answer, right after it,
    /// read: only a tagged message with a `result` and no id is a response that lost its id.
    #[tokio::test]
    async fn a_notification_with_an_odd_method_does_not_end_the_call_as_its_answer() {
        let server = hostile::serve_tools(vec![hostile::tool("t", "t")], |req| {
            let odd =
                json!({"jsonrpc": "2.0", "method": {"name": "notifications/progress"}, "params": {}});
            Reply::sse(&[odd, hostile::text_result(&req.id(), "served")])
        })
        .await;
        let host = Host::new(json!({"s": {"url": server.url}}));
        host.ready("s", Duration::from_secs(10)).await;
        assert_eq!(host.call_tool("s", "t").await, Ok("served".into()));
    }
}
