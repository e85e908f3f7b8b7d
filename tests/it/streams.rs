//! Event streams and the sessions they run on: where a cut stream resumes (the last event that
//! arrived whole), what a resumption refused as a forgotten session ends, and the plain-text
//! "no valid session" of older SDKs. Each test's server is [`support::hostile`] with a handler of
//! this module that issues sessions `s-1`, `s-2`, … and forgets them on demand; it records a
//! trail of every request with the status it answered.

use std::collections::HashSet;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

use crate::support::Host;
use crate::support::hostile::{
    self, Received, Reply, Server, result, text_result, tool, tools_page,
};

const WAIT: Duration = Duration::from_secs(10);

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
        let shared = Arc::clone(&state);
        let server = hostile::serve(move |req| {
            let reply = answer(&req, &mut shared.lock().unwrap(), &*script);
            async move { reply }
        })
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
    } else if let Some(reply) = script(req, st) {
        reply
    } else if req.http_method == "GET" {
        Reply::raw(405, "text/plain", "")
    } else if req.rpc.get("id").is_none() || req.rpc.get("method").is_none() {
        Reply::accepted()
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

/// `200 text/event-stream` sending `text`, then (after the headers and `text` went out)
/// cutting the connection mid-body.
fn cut_after(text: String) -> Reply {
    let cut = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Err(io::Error::new(io::ErrorKind::ConnectionReset, "cut"))
    };
    Reply::stream(
        200,
        "text/event-stream",
        stream::once(async move { Ok(Bytes::from(text)) }).chain(stream::once(cut)),
    )
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

fn transport(message: &str) -> Result<String, ToolError> {
    Err(ToolError::new(ToolErrorKind::Transport, message))
}

const START: [&str; 3] = [
    "POST initialize 2 - 200",
    "POST notifications/initialized - s-1 202",
    "POST tools/list 3 s-1 200",
];

fn trail_of(lines: &[&str]) -> Vec<String> {
    START.iter().chain(lines).map(|l| l.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// regressions, one per failure

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
