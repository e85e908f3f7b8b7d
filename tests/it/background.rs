//! What the connection sends a session in the background — a call's `notifications/cancelled`,
//! the answer to a server's request — acts on the verdict of its refusal like every request
//! (docs/connection.md "Verdicts"): a `404` forgets the session, an answer of the other era
//! asks the era again.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use serde_json::json;

use crate::support::Host;
use crate::support::hostile::{
    self, Received, Reply, Server, result, text_result, tool, tools_page,
};
use crate::verdicts::{dropped, goodbyes};

const WAIT: Duration = Duration::from_secs(10);

/// A legacy server's sessions: issued `s-1`, `s-2`, … and still known.
#[derive(Default)]
struct Sessions {
    issued: usize,
    live: HashSet<String>,
}

/// How a request carrying a session the server no longer knows is refused.
type Unknown = fn(&Received) -> Reply;

/// A legacy server issuing `s-1`, `s-2`, …, listing `t` and `hold`, refusing its standalone
/// `GET` with `405` (no stream offered); a call of `hold` is held open after one progress
/// event; a request (of any verb but `DELETE`) carrying a session it forgot is answered
/// `unknown`; a `DELETE` of one it knows `200`, else `404`.
async fn legacy(unknown: Unknown) -> (Server, Arc<Mutex<Sessions>>) {
    let known = Arc::new(Mutex::new(Sessions::default()));
    let shared = Arc::clone(&known);
    let server = hostile::serve(move |req| {
        let mut st = shared.lock().unwrap();
        let reply = answer(&req, &mut st, unknown);
        async move { reply }
    })
    .await;
    (server, known)
}

fn answer(req: &Received, st: &mut Sessions, unknown: Unknown) -> Reply {
    if req.http_method == "GET" {
        return Reply::raw(405, "text/plain", "");
    }
    let session = req.header("mcp-session-id");
    let known = session.as_ref().is_some_and(|s| st.live.contains(s));
    if req.http_method == "DELETE" {
        return Reply::raw(if known { 200 } else { 404 }, "text/plain", "");
    }
    if req.method() == "initialize" {
        st.issued += 1;
        let sid = format!("s-{}", st.issued);
        st.live.insert(sid.clone());
        return Reply::json(&result(
            &req.id(),
            json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                   "serverInfo": {"name": "background", "version": "0"}}),
        ))
        .header("mcp-session-id", &sid);
    }
    if session.is_some() && !known {
        return unknown(req);
    }
    if let Some(reply) = hostile::housekeeping(req) {
        return reply;
    }
    match req.method() {
        "tools/list" => Reply::json(&tools_page(
            &req.id(),
            vec![tool("t", "t"), tool("hold", "hold"), tool("asker", "asker")],
            None,
        )),
        "tools/call" if req.rpc["params"]["name"] == "hold" => held_after(format!(
            "data: {}\n\n",
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": "p", "progress": 1}})
        )),
        // The server forgets the session as it asks the client something on the call's stream.
        "tools/call" if req.rpc["params"]["name"] == "asker" => {
            st.live.clear();
            held_after(format!(
                "data: {}\n\n",
                json!({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
            ))
        }
        "tools/call" => Reply::json(&text_result(&req.id(), "served")),
        "ping" => Reply::json(&result(&req.id(), json!({}))),
        _ => Reply::json(&hostile::rpc_error(&req.id(), -32601, "Method not found")),
    }
}

/// `200 text/event-stream` sending `text`, then holding the stream open without a word.
fn held_after(text: String) -> Reply {
    Reply::stream(
        200,
        "text/event-stream",
        stream::once(async move { Ok(Bytes::from(text)) }).chain(stream::pending()),
    )
}

/// The `404` of a server that forgot the session (MCP 2025-11-25, transports "Session
/// Management").
fn not_found(_: &Received) -> Reply {
    Reply::raw(404, "text/plain", "Not Found: Session not found")
}

/// Starts a call of `hold` (held open on `s-1`), waits until the server has it, makes the
/// server forget `s-1`, and drops the call: its `notifications/cancelled` goes to `s-1` and is
/// answered as a forgotten session.
async fn cancel_met_a_forgotten_session(unknown: Unknown) -> (Server, Host) {
    let (server, known) = legacy(unknown).await;
    let host = Host::new(json!({"s": {"url": server.url}}));
    host.ready("s", WAIT).await;
    let mut hold = host.pack.call(
        "mcp/call_dynamic_tool",
        json!({"namespace": "s", "toolName": "hold"}),
    );
    tokio::select! {
        _ = &mut hold => panic!("the held call returned"),
        _ = server.wait_until(WAIT, "the held call", |r| {
            r.iter().any(|r| r.method() == "tools/call")
        }) => {}
    }
    known.lock().unwrap().live.clear();
    drop(hold);
    server
        .wait_until(WAIT, "the cancel", |r| {
            r.iter().any(|r| r.method() == "notifications/cancelled")
        })
        .await;
    (server, host)
}

/// A cancel's `404` is the verdict "expired" like any other request's: the session is
/// forgotten, and no `DELETE` (nor any other cancel) goes to it (docs/connection.md
/// "Verdicts": expired — "forgotten (no `DELETE`, no cancel)"; every path "acts on that
/// verdict"). At the drop, only the cancel reached `s-1`.
#[tokio::test]
async fn a_cancel_answered_404_forgets_the_session_so_the_close_sends_it_no_delete() {
    let (server, host) = cancel_met_a_forgotten_session(not_found).await;
    dropped(host, &server).await;
    assert_eq!(goodbyes(&server), ["cancel s-1"]);
}

/// The same 404 on the cancel: the next call is sent straight on a new session, as after any
/// other request's `404` (the session is forgotten at once), never to the forgotten `s-1`.
#[tokio::test]
async fn a_call_after_a_cancel_answered_404_goes_to_a_new_session_at_once() {
    let (server, host) = cancel_met_a_forgotten_session(not_found).await;
    let called = tokio::time::timeout(WAIT, host.call_tool("s", "t"))
        .await
        .expect("the call returns within 10 s");
    assert_eq!(called, Ok("served".to_string()));
    let calls: Vec<Option<String>> = server
        .with_method("tools/call")
        .iter()
        .map(|r| r.header("mcp-session-id"))
        .collect();
    assert_eq!(
        calls,
        [Some("s-1".to_string()), Some("s-2".to_string())],
        "the held call on s-1, then the new call on s-2 only"
    );
}

/// The answer to a server request is a request path too: a `404` to it (the server forgot
/// the session it asked on) is the verdict "expired", and the session is forgotten, so at the
/// drop neither the call still held on it is cancelled there nor is it deleted
/// (docs/connection.md "Verdicts": expired — "forgotten (no `DELETE`, no cancel)").
#[tokio::test]
async fn an_answer_to_a_server_request_answered_404_forgets_the_session() {
    let (server, _known) = legacy(not_found).await;
    let host = Host::new(json!({"s": {"url": server.url}}));
    host.ready("s", WAIT).await;
    let mut asker = host.pack.call(
        "mcp/call_dynamic_tool",
        json!({"namespace": "s", "toolName": "asker"}),
    );
    tokio::select! {
        _ = &mut asker => panic!("the held call returned"),
        _ = server.wait_until(WAIT, "the answer to the server's ping", |r| {
            r.iter().any(|r| r.rpc.get("result").is_some() && r.rpc["id"] == "srv-1")
        }) => {}
    }
    // The answer's 404 has been read by now.
    tokio::time::sleep(Duration::from_millis(200)).await;
    dropped(host, &server).await;
    drop(asker);
    assert_eq!(goodbyes(&server), Vec::<String>::new());
}

/// A modern error answering no id: what a server restarted onto 2026-07-28 gives a legacy
/// request.
fn modern_error() -> Reply {
    Reply::raw(
        400,
        "application/json",
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32022,
               "message": "Unsupported protocol version",
               "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"}}})
        .to_string(),
    )
}

/// An answer of the other era is the verdict "other era" on every path that meets it, and a
/// path that sends nothing once more asks the era again (docs/connection.md "Verdicts": other
/// era — "`server/discover` asked again"; `Connection::act_on`). A legacy server offering no
/// standalone stream restarts onto 2026-07-28 while a call of `hold` is on its way; the call is
/// dropped, and its `notifications/cancelled` is refused `400 -32022`: the era is asked
/// (`server/discover`) once, and the listing becomes the new build's without a call.
#[tokio::test]
async fn a_cancel_refused_by_the_other_era_asks_the_era_again() {
    let modern = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let restarted = Arc::clone(&modern);
    let server = hostile::serve_all(move |req| {
        let reply = if restarted.load(std::sync::atomic::Ordering::SeqCst) {
            crate::support::answers::restarted_build(&req).unwrap_or_else(modern_error)
        } else {
            match (req.http_method.as_str(), req.method()) {
                ("POST", "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
                ("GET", _) => Reply::raw(405, "text/plain", ""),
                ("POST", "tools/list") => Reply::json(&tools_page(
                    &req.id(),
                    vec![tool("old", "old"), tool("hold", "hold")],
                    None,
                )),
                ("POST", "tools/call") => held_after(String::from(": held\n\n")),
                _ => hostile::standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
            }
        };
        async move { reply }
    })
    .await;
    let host = Host::new(json!({"s": {"url": server.url}}));
    host.ready("s", WAIT).await;
    assert_eq!(host.tool_names("s").await, ["hold", "old"]);
    let mut hold = host.pack.call(
        "mcp/call_dynamic_tool",
        json!({"namespace": "s", "toolName": "hold"}),
    );
    tokio::select! {
        _ = &mut hold => panic!("the held call returned"),
        _ = server.wait_until(WAIT, "the held call", |r| {
            r.iter().any(|r| r.method() == "tools/call")
        }) => {}
    }
    let probes = server.count("server/discover");
    modern.store(true, std::sync::atomic::Ordering::SeqCst);
    drop(hold);
    server
        .wait_until(WAIT, "the cancel", |r| {
            r.iter().any(|r| r.method() == "notifications/cancelled")
        })
        .await;
    host.until_tools(
        "s",
        &["new"],
        WAIT,
        &server,
        "the cancel's -32022 asks the era again",
    )
    .await;
    assert_eq!(server.count("server/discover"), probes + 1);
    assert_eq!(server.count("tools/call"), 1);
}
