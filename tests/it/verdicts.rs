//! One verdict per answer (docs/connection.md "Verdicts"): each rule about an answer — a
//! forgotten session, the server's words, the other era, the server's own answer, a rate limit,
//! a malformed response — is obeyed on every path that meets it: a call, a resumption, the
//! standalone stream, the close. Each server is [`support::hostile`] with a handler of this
//! module that issues sessions `s-1`, `s-2`, … and forgets them on demand.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

use crate::support::Host;
use crate::support::answers::cut_after;
use crate::support::hostile::{
    self, Received, Reply, Server, result, rpc_error, sse_event, text_result, tool, tools_page,
};

const WAIT: Duration = Duration::from_secs(10);

/// The plain-text answer of older SDKs to a session they do not know.
const NO_SESSION: &str = "Bad Request: No valid session ID provided";

/// A legacy server's state: the sessions it issued and still knows.
#[derive(Default)]
pub(crate) struct Known {
    issued: usize,
    pub(crate) live: HashSet<String>,
}

/// A `tools/call` (or resumption `GET`) answer decided by the test; `None` falls back to the
/// server's usual answers.
type Script = dyn Fn(&Received, &mut Known) -> Option<Reply> + Send + Sync;

/// A legacy server issuing `s-1`, `s-2`, … that answers a session it does not know with the
/// plain-text `400` of older SDKs, lists one tool `t`, and answers the rest with `script`.
pub(crate) async fn legacy(
    script: impl Fn(&Received, &mut Known) -> Option<Reply> + Send + Sync + 'static,
) -> (Server, Arc<Mutex<Known>>) {
    let known = Arc::new(Mutex::new(Known::default()));
    let script: Arc<Script> = Arc::new(script);
    let server =
        hostile::serve_with_state(Arc::clone(&known), move |req, st| answer(req, st, &*script))
            .await;
    (server, known)
}

fn answer(req: &Received, st: &mut Known, script: &Script) -> Reply {
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
                   "serverInfo": {"name": "verdicts", "version": "0"}}),
        ))
        .header("mcp-session-id", &sid);
    }
    if !known {
        return Reply::raw(400, "text/plain", NO_SESSION);
    }
    if let Some(reply) = script(req, st).or_else(|| hostile::housekeeping(req)) {
        return reply;
    }
    match req.method() {
        "tools/list" => Reply::json(&tools_page(
            &req.id(),
            vec![tool("t", "t"), tool("hold", "hold")],
            None,
        )),
        "ping" => Reply::json(&result(&req.id(), json!({}))),
        _ => Reply::json(&rpc_error(&req.id(), -32601, "Method not found")),
    }
}

/// A legacy server whose standalone `GET` is refused `404`, so the stream asks with a `ping`,
/// answered by `ping`; it lists one tool `t`.
pub(crate) async fn pinged(ping: fn(&Received) -> Reply) -> Server {
    hostile::serve_all(move |req| async move {
        match (req.http_method.as_str(), req.method()) {
            ("POST", "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
            ("GET", _) => Reply::raw(404, "text/plain", "Not Found"),
            ("POST", "ping") => ping(&req),
            ("POST", "tools/list") => {
                Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
            }
            _ => hostile::standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
        }
    })
    .await
}

/// `200 text/event-stream` sending `text`, then holding the stream open without a word.
fn held_after(text: String) -> Reply {
    Reply::stream(
        200,
        "text/event-stream",
        stream::once(async move { Ok(Bytes::from(text)) }).chain(stream::pending()),
    )
}

fn progress() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/progress",
           "params": {"progressToken": "p", "progress": 1}})
}

async fn ready_host(url: &str) -> Host {
    let host = Host::new(json!({"s": {"url": url}}));
    host.ready("s", WAIT).await;
    host
}

async fn call(host: &Host, tool: &str) -> Result<String, ToolError> {
    tokio::time::timeout(WAIT, host.call_tool("s", tool))
        .await
        .expect("the call returns within 10 s")
}

/// The DELETEs and cancels the server got, as `VERB session` lines.
pub(crate) fn goodbyes(server: &Server) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.http_method == "DELETE" || r.method() == "notifications/cancelled")
        .map(|r| {
            let what = if r.http_method == "DELETE" {
                "DELETE"
            } else {
                "cancel"
            };
            format!("{what} {}", r.header("mcp-session-id").unwrap_or_default())
        })
        .collect()
}

/// Drops the host and waits until the server has been quiet for 500 ms.
pub(crate) async fn dropped(host: Host, server: &Server) {
    drop(host);
    let mut seen = server.requests().len();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = server.requests().len();
        if now == seen {
            return;
        }
        seen = now;
    }
}

// ---------------------------------------------------------------------------------------------
// 1. The server's words, met on a resumption

/// "A session that a server's 'no valid session' words set aside during a resumption is
/// forgotten and never gets its DELETE." The call's stream is cut after event `e1`; the server
/// restarts, and answers the resumption with the plain-text `400` of older SDKs. Those words
/// only set the session aside (as on a POST): it is still deleted at the drop.
#[tokio::test]
async fn a_resumption_refused_by_the_servers_words_still_deletes_the_session_at_the_drop() {
    let (server, known) = legacy(|req, st| {
        (req.method() == "tools/call").then(|| {
            st.live.clear();
            cut_after(format!("retry: 100\nid: e1\ndata: {}\n\n", progress()))
        })
    })
    .await;
    let host = ready_host(&server.url).await;
    let called = call(&host, "t").await;
    assert_eq!(
        called.map_err(|e| e.kind),
        Err(ToolErrorKind::Transport),
        "the request may have run: not sent again"
    );
    assert_eq!(known.lock().unwrap().issued, 1);
    dropped(host, &server).await;
    assert_eq!(goodbyes(&server), ["DELETE s-1"]);
}

// ---------------------------------------------------------------------------------------------
// 2. A 2025-era tool's own modern code

/// A legacy server (the harness answers the era probe as one) whose tool answers with `code`.
async fn own_code_server(code: i64, message: &'static str) -> Server {
    hostile::serve_tools(vec![tool("t", "t")], move |req| {
        Reply::json(&rpc_error(&req.id(), code, message))
    })
    .await
}

/// A Host ready on an [`own_code_server`] of `code` and `message`, whose one call of `t` was
/// answered with the tool's own words: a `backend` error of `message`.
async fn answered_own_code(code: i64, message: &'static str) -> (Server, Host) {
    let server = own_code_server(code, message).await;
    let host = ready_host(&server.url).await;
    assert_eq!(
        call(&host, "t").await,
        Err(ToolError::new(ToolErrorKind::Backend, message))
    );
    (server, host)
}

/// "A 2025-era tool's own -32020 is sent again": once the probe found the server still legacy,
/// the answer is the tool's own, and the modern HeaderMismatch rule (re-list, send once more)
/// is not applied to it. The tool runs once; nothing is re-listed.
#[tokio::test]
async fn a_legacy_tools_own_header_mismatch_code_is_answered_once_without_a_relisting() {
    let (server, _host) = answered_own_code(-32020, "the booking header did not match").await;
    let quiet = Duration::from_millis(500);
    let counts = server.counts_after(quiet, ["tools/call", "tools/list"]);
    assert_eq!(counts.await, [1, 1]);
}

/// Its own `-32021` is its own words too, not a missing client capability.
#[tokio::test]
async fn a_legacy_tools_own_missing_capability_code_is_shown_as_its_own_words() {
    let (server, _host) = answered_own_code(-32021, "the calendar capability is off").await;
    assert_eq!(server.count("tools/call"), 1);
}

// ---------------------------------------------------------------------------------------------
// 3. The close and sessions known to be gone

/// "At the drop, the close sends notifications/cancelled to sessions known to be gone." A call
/// of `hold` is on its way on `s-1` (its stream open, no answer) when the server restarts; a
/// call of `t` then meets the `404` of `s-1` (forgotten, no DELETE) and is answered on `s-2`.
/// At the drop, the held call gets no cancel on `s-1`; `s-2` is deleted.
#[tokio::test]
async fn the_close_sends_no_cancel_to_a_session_the_server_forgot() {
    let known = Arc::new(Mutex::new(Known::default()));
    let shared = Arc::clone(&known);
    let server = hostile::serve(move |req| {
        let mut st = shared.lock().unwrap();
        let session = req.header("mcp-session-id");
        let reply = if session.as_ref().is_some_and(|s| !st.live.contains(s))
            && req.http_method != "DELETE"
        {
            Reply::raw(404, "text/plain", "Not Found: Session not found")
        } else {
            answer(
                &req,
                &mut st,
                &|req: &Received, _: &mut Known| match req.method() {
                    "tools/call" if req.rpc["params"]["name"] == "hold" => {
                        Some(held_after(format!("data: {}\n\n", progress())))
                    }
                    "tools/call" => Some(Reply::json(&text_result(&req.id(), "served"))),
                    _ => None,
                },
            )
        };
        async move { reply }
    })
    .await;
    let host = ready_host(&server.url).await;
    // The Pack's future owns nothing of the host: it outlives the drop below.
    let mut hold = host.pack.call(
        "mcp/call_dynamic_tool",
        json!({"namespace": "s", "toolName": "hold"}),
    );
    tokio::select! {
        _ = &mut hold => panic!("the held call returned"),
        () = async {
            server
                .wait_until(WAIT, "the held call", |r| r.iter().any(|r| r.method() == "tools/call"))
                .await;
            known.lock().unwrap().live.clear();
            assert_eq!(call(&host, "t").await, Ok("served".into()));
        } => {}
    }
    dropped(host, &server).await;
    drop(hold);
    assert_eq!(goodbyes(&server), ["DELETE s-2"]);
}

// ---------------------------------------------------------------------------------------------
// 4. The standalone stream and the era

/// A modern error answering no id: what a server restarted onto 2026-07-28 gives a legacy
/// request.
fn modern_error(code: i64) -> Reply {
    Reply::raw(
        400,
        "application/json",
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": code,
               "message": "Unsupported protocol version",
               "data": {"supported": ["2026-07-28"], "requested": "2025-06-18"}}})
        .to_string(),
    )
}

/// A legacy server listing `old` whose standalone `GET` ends at once restarts onto 2026-07-28,
/// listing `new`; from then on its `GET` is answered `get()` and every other legacy request
/// with a modern `-32022`. Waits until the listing is the new build's, with no call made.
async fn restarted_onto_modern(get: fn() -> Reply) {
    let modern = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let restarted = Arc::clone(&modern);
    let server = hostile::serve_all(move |req| {
        let modern = restarted.load(std::sync::atomic::Ordering::SeqCst);
        let reply = if modern {
            crate::support::answers::restarted_build(&req).unwrap_or_else(|| {
                match req.http_method.as_str() {
                    "GET" => get(),
                    _ => modern_error(-32022),
                }
            })
        } else {
            match (req.http_method.as_str(), req.method()) {
                ("POST", "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
                ("GET", _) => Reply::raw(200, "text/event-stream", ""),
                ("POST", "tools/list") => {
                    Reply::json(&tools_page(&req.id(), vec![tool("old", "old")], None))
                }
                _ => hostile::standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
            }
        };
        async move { reply }
    })
    .await;
    let host = ready_host(&server.url).await;
    assert_eq!(host.tool_names("s").await, ["old"]);
    server
        .wait_until(WAIT, "the first GET and its re-listing", |r| {
            r.iter().any(|r| r.http_method == "GET")
                && r.iter().filter(|r| r.method() == "tools/list").count() == 2
        })
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    modern.store(true, std::sync::atomic::Ordering::SeqCst);
    host.until_tools(
        "s",
        &["new"],
        Duration::from_secs(15),
        &server,
        "still the old build's listing",
    )
    .await;
    assert_eq!(server.count("tools/call"), 0);
}

/// "The standalone stream never reads an era signal": after a restart onto 2026-07-28 the
/// stream's `GET` is refused `400 -32022`. The stream loop asks the era again, and the listing
/// becomes the new build's without a call.
#[tokio::test]
async fn a_standalone_get_refused_as_the_modern_era_moves_the_server_and_relists_without_a_call() {
    restarted_onto_modern(|| modern_error(-32022)).await;
}

/// Another era signal on the stream path, a `-32020` to the `GET`, is read the same way.
#[tokio::test]
async fn a_standalone_get_refused_with_a_header_mismatch_asks_the_era_too() {
    restarted_onto_modern(|| modern_error(-32020)).await;
}

/// The `GET` refused `404` is asked about with a `ping`; the ping answered by the other era
/// (`-32022`) is no live session: the era is asked, and the server moves without a call.
#[tokio::test]
async fn a_ping_answered_by_the_other_era_moves_the_server_without_a_call() {
    restarted_onto_modern(|| Reply::raw(404, "text/plain", "Not Found")).await;
}

// ---------------------------------------------------------------------------------------------
// 5. A response with neither result nor error

/// The `transport` error of server `s` for a response to request `id` that holds neither a
/// result nor an error (JSON-RPC 2.0 §5), as a call's outcome.
fn holds_neither(id: &Value) -> Result<String, ToolError> {
    Err(ToolError::new(
        ToolErrorKind::Transport,
        format!(
            "server \"s\": the server's response to request {id} holds neither a result nor an error"
        ),
    ))
}

/// "A reply {"jsonrpc":"2.0","id":4} ... on an event stream the server keeps open, the call
/// waits for the stream to end." It is answered at once as a malformed response, and, being an
/// answer, gets no cancel.
#[tokio::test]
async fn a_response_without_result_or_error_on_an_open_stream_is_malformed_at_once() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        held_after(sse_event(&json!({"jsonrpc": "2.0", "id": req.id()})))
    })
    .await;
    let host = ready_host(&server.url).await;
    let started = tokio::time::Instant::now();
    let called = tokio::time::timeout(Duration::from_secs(3), host.call_tool("s", "t"))
        .await
        .expect("answered at once, not at the stream's end");
    assert!(started.elapsed() < Duration::from_secs(3));
    let id = server.first(|r| r.method() == "tools/call").id();
    assert_eq!(called, holds_neither(&id));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(server.count("notifications/cancelled"), 0);
}

/// The same response in a JSON body is the same verdict, in the same words.
#[tokio::test]
async fn a_response_without_result_or_error_in_a_json_body_is_malformed_too() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        Reply::json(&json!({"jsonrpc": "2.0", "id": req.id()}))
    })
    .await;
    let host = ready_host(&server.url).await;
    let called = call(&host, "t").await;
    let id = server.first(|r| r.method() == "tools/call").id();
    assert_eq!(called, holds_neither(&id));
}

// ---------------------------------------------------------------------------------------------
// 6. A rate limit with Retry-After

/// A server whose first `tools/call` is refused `status` with `Retry-After: retry_after`, and
/// the next answered.
async fn limited_once(status: u16, retry_after: &'static str) -> Server {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    hostile::serve_tools(vec![tool("t", "t")], move |req| {
        if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            let refusal = Reply::raw(status, "text/plain", "slow down");
            match retry_after {
                "" => refusal,
                wait => refusal.header("retry-after", wait),
            }
        } else {
            Reply::json(&text_result(&req.id(), "served"))
        }
    })
    .await
}

/// "A tools/call answered 429 with Retry-After is an immediate transport error that drops the
/// wait the server named." A 429 means the request was not processed: it is sent once more
/// after the wait.
#[tokio::test]
async fn a_call_refused_429_with_a_short_retry_after_is_sent_again_after_the_wait() {
    let server = limited_once(429, "1").await;
    let host = ready_host(&server.url).await;
    assert_eq!(call(&host, "t").await, Ok("served".into()));
    let calls = server.with_method("tools/call");
    assert_eq!(calls.len(), 2);
    about_a_second_apart(calls[0].at, calls[1].at);
}

/// A `503` with `Retry-After` is the same verdict.
#[tokio::test]
async fn a_call_refused_503_with_a_short_retry_after_is_sent_again_after_the_wait() {
    let server = limited_once(503, "1").await;
    let host = ready_host(&server.url).await;
    assert_eq!(call(&host, "t").await, Ok("served".into()));
    assert_eq!(server.count("tools/call"), 2);
}

/// A wait longer than the bound is not waited out: the call is `unavailable`, naming the wait
/// in whole seconds, and nothing is sent again.
#[tokio::test]
async fn a_call_refused_429_with_a_long_retry_after_is_unavailable_naming_the_wait() {
    let server = limited_once(429, "3600").await;
    let host = ready_host(&server.url).await;
    assert_eq!(
        call(&host, "t").await,
        Err(ToolError::new(
            ToolErrorKind::Unavailable,
            "server \"s\" is unavailable: it refused the call as too many requests (HTTP 429) and asked to be called again in 3600 seconds"
        ))
    );
    assert_eq!(server.count("tools/call"), 1);
}

/// A `429` or `503` without `Retry-After`: the request was not processed (RFC 6585 §4), so the
/// call did not run, but no wait was named: nothing is resent, and the answer is `unavailable`
/// (try later), not a `transport` error that says the tool may have run.
#[tokio::test]
async fn a_call_refused_429_or_503_without_retry_after_is_unavailable_and_not_resent() {
    for (status, how) in [
        (429, "as too many requests"),
        (503, "as unavailable for now"),
    ] {
        let server = limited_once(status, "").await;
        let host = ready_host(&server.url).await;
        assert_eq!(
            call(&host, "t").await,
            Err(ToolError::new(
                ToolErrorKind::Unavailable,
                format!(
                    "server \"s\" is unavailable: it refused the call {how} (HTTP {status}) without saying when to call again; try again later"
                )
            ))
        );
        assert_eq!(server.count("tools/call"), 1);
    }
}

// A rate limit met on the renewal of an expired session.
mod renewal_rate_limit {
    use serde_json::json;

    use crate::support::hostile::{
        Received, Reply, serve, standard, text_result, tool, tools_page,
    };
    use crate::support::{Host, WAIT};

    /// The rule: one verdict per answer — a `429` with a short `Retry-After` is waited out and
    /// sent once more, or answered `unavailable` naming the wait. When the `429` answers the
    /// renewal `initialize` of a call whose session expired (`404`), the verdict is lost (the
    /// error is wrapped as a re-initialization failure, which `Error::rate_limited` does not
    /// see through though `Error::retry_after` does).
    #[tokio::test]
    async fn a_429_on_the_renewal_of_an_expired_session_is_no_rate_limit() {
        let server = serve(|req: Received| async move {
        let id = req.id();
        match (req.method(), req.nth) {
            ("initialize", 1) => {
                Reply::raw(429, "text/plain", "slow down").header("retry-after", "1")
            }
            ("tools/call", 0) => Reply::raw(404, "text/plain", "no such session"),
            ("tools/call", _) => Reply::json(&text_result(&id, "served")),
            ("tools/list", _) => Reply::json(&tools_page(&id, vec![tool("t", "d")], None)),
            _ => standard(&req).unwrap_or_else(|| {
                Reply::json(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}}))
            }),
        }
    })
    .await;
        let host = Host::new(json!({"k": {"url": server.url}}));
        host.ready("k", WAIT).await;
        // The renewal's wait (1 s) is waited out, the renewal made, and the call sent once
        // more on the new session.
        assert_eq!(host.call_tool("k", "t").await, Ok("served".to_string()));
        assert_eq!(server.count("initialize"), 3);
        assert_eq!(server.count("tools/call"), 2);
    }
}

// ---------------------------------------------------------------------------------------------
// 7. A rate limit on a listing's page: the same resend as a call's

/// A legacy server (the usual handshake) whose `tools/list` pages are answered by `page`, given
/// the page's number among all `tools/list` requests (from 0); `tools/call` is `served`.
async fn listing_limited(page: fn(usize, &Value) -> Option<Reply>) -> Server {
    hostile::serve(move |req: Received| async move {
        let id = req.id();
        match req.method() {
            "tools/list" => page(req.nth, &id).unwrap_or_else(|| {
                Reply::json(&tools_page(&id, vec![tool("t", "t"), tool("u", "u")], None))
            }),
            "tools/call" => Reply::json(&text_result(&id, "served")),
            _ => hostile::standard(&req)
                .unwrap_or_else(|| Reply::json(&rpc_error(&id, -32601, "Method not found"))),
        }
    })
    .await
}

fn slow_down(retry_after: &str) -> Reply {
    Reply::raw(429, "text/plain", "slow down").header("retry-after", retry_after)
}

/// "A listing page answered 429 with a short Retry-After is not resent: the rate-limit resend
/// lives only in the call path." A start's first `tools/list` page refused `429` with
/// `Retry-After: 1` is sent once more after the wait on the same session: the start lists the
/// tools without failing, so no second `initialize`.
#[tokio::test]
async fn a_start_whose_tools_list_is_refused_429_with_a_short_retry_after_lists_the_tools() {
    let server = listing_limited(|nth, _| (nth == 0).then(|| slow_down("1"))).await;
    let host = Host::new(json!({"k": {"url": server.url}}));
    host.ready("k", WAIT).await;
    assert_eq!(host.tool_names("k").await, ["t", "u"]);
    assert_eq!(server.count("initialize"), 1);
    let pages = server.with_method("tools/list");
    assert_eq!(pages.len(), 2);
    about_a_second_apart(pages[0].at, pages[1].at);
}

/// The same on a re-listing: a call naming a tool the listing lacks re-lists; that page is
/// refused `429` with `Retry-After: 1`, sent once more after the wait, and lists the tool,
/// which the call then reaches.
#[tokio::test]
async fn a_relisting_refused_429_with_a_short_retry_after_lists_the_tools_after_the_wait() {
    let server = listing_limited(|nth, id| match nth {
        0 => Some(Reply::json(&tools_page(id, vec![tool("t", "t")], None))),
        1 => Some(slow_down("1")),
        _ => None,
    })
    .await;
    let host = Host::new(json!({"k": {"url": server.url}}));
    host.ready("k", WAIT).await;
    assert_eq!(host.tool_names("k").await, ["t"]);
    assert_eq!(host.call_tool("k", "u").await, Ok("served".into()));
    assert_eq!(host.tool_names("k").await, ["t", "u"]);
    assert_eq!(server.count("tools/list"), 3);
    assert_eq!(server.count("initialize"), 1);
}

/// A wait past the bound (`Retry-After: 3600`) is not waited out: the start fails, its reason
/// naming the wait in whole seconds, and the page is not sent again within the start.
#[tokio::test]
async fn a_start_whose_tools_list_asks_for_a_long_wait_names_the_wait_in_its_reason() {
    let server = listing_limited(|_, _| Some(slow_down("3600"))).await;
    let host = Host::new(json!({"k": {"url": server.url}}));
    let failed = host.failed("k", WAIT).await;
    assert_eq!(
        failed["reason"],
        "the server refused tools/list as too many requests (HTTP 429) and asked to wait 3600 seconds before asking again"
    );
    assert_eq!(server.count("tools/list"), 1);
}

/// The same resend on the standalone stream's `ping`: the `GET` refused `404` is asked about
/// with a `ping`, refused `429` with `Retry-After: 1`; the ping is sent once more after the
/// wait, answered, and the session is live (no `GET` endpoint): one `GET`, two pings, no
/// renewal. Read as a failed ping instead, the loop would open the stream again.
#[tokio::test]
async fn a_ping_refused_429_with_a_short_retry_after_is_sent_again_after_the_wait() {
    let server = pinged(|req| match req.nth {
        0 => slow_down("1"),
        _ => Reply::json(&result(&req.id(), json!({}))),
    })
    .await;
    let host = ready_host(&server.url).await;
    let pings = server
        .wait_until(WAIT, "two pings", |r| {
            r.iter().filter(|r| r.method() == "ping").count() == 2
        })
        .await;
    let pings: Vec<_> = pings.iter().filter(|r| r.method() == "ping").collect();
    about_a_second_apart(pings[0].at, pings[1].at);
    // Long enough for the loop's backoff (1 s and more) to have opened the stream again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let gets = server.count_verb("GET");
    assert_eq!(gets, 1);
    assert_eq!(server.count("ping"), 2);
    assert_eq!(server.count("initialize"), 1);
    drop(host);
}

/// Asserts a resend went out after the server's `Retry-After: 1`: one to three seconds after the
/// first send.
fn about_a_second_apart(first: tokio::time::Instant, second: tokio::time::Instant) {
    let waited = second - first;
    assert!(waited >= Duration::from_secs(1), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
}

/// A legacy server that restarts onto 2026-07-28 once ready (see
/// [`restarts_with_refused_probes`], its first `refused` probes answered `refusal()`), and the
/// answer to a call of `t` made after the restart.
async fn call_after_a_restart(
    refused: usize,
    refusal: fn() -> Reply,
) -> (Server, Result<String, ToolError>) {
    let modern = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = restarts_with_refused_probes(Arc::clone(&modern), refused, refusal).await;
    let host = ready_host(&server.url).await;
    modern.store(true, std::sync::atomic::Ordering::SeqCst);
    let called = tokio::time::timeout(WAIT, host.call_tool("s", "t"))
        .await
        .expect("the call returns");
    (server, called)
}

/// A legacy server that restarts onto 2026-07-28 when `restarted` is set: then the legacy
/// session's requests are answered `-32022`, its first `refused` `server/discover`s with
/// `refusal` and the later ones as a modern server.
async fn restarts_with_refused_probes(
    restarted: Arc<std::sync::atomic::AtomicBool>,
    refused: usize,
    refusal: fn() -> Reply,
) -> Server {
    let discovers = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    hostile::serve_all(move |req| {
        let reply = if restarted.load(std::sync::atomic::Ordering::SeqCst) {
            match (req.http_method.as_str(), req.method()) {
                ("POST", "server/discover") => {
                    if discovers.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < refused {
                        refusal()
                    } else {
                        Reply::json(&result(
                            &req.id(),
                            json!({"supportedVersions": ["2026-07-28"],
                                   "capabilities": {"tools": {}},
                                   "serverInfo": {"name": "verdicts", "version": "2"}}),
                        ))
                    }
                }
                ("POST", _)
                    if req.header("mcp-protocol-version").as_deref() == Some("2026-07-28") =>
                {
                    match req.method() {
                        "tools/list" => {
                            Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
                        }
                        _ => Reply::json(&text_result(&req.id(), "served")),
                    }
                }
                _ => modern_error(-32022),
            }
        } else {
            match (req.http_method.as_str(), req.method()) {
                ("POST", "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
                ("POST", "tools/list") => {
                    Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
                }
                _ => hostile::standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
            }
        };
        async move { reply }
    })
    .await
}

/// The era probe is a request like any other (docs/connection.md "Verdicts"): a legacy server
/// restarts onto 2026-07-28 and answers a call on `s-1` with `-32022`; the `server/discover`
/// that follows is refused `429` with `Retry-After: 1`. The probe is asked once more after the
/// wait, finds the server modern, and the call is sent once more on the new route and served.
#[tokio::test]
async fn an_era_probe_refused_429_with_a_short_retry_after_is_asked_again_after_the_wait() {
    let (_server, called) = call_after_a_restart(1, || {
        Reply::raw(429, "text/plain", "slow down").header("retry-after", "1")
    })
    .await;
    assert_eq!(called.map_err(|e| e.message), Ok("served".to_string()));
}

/// A probe that gives no verdict (here every one refused `429` with a wait past the 30 s
/// bound) leaves
/// the answer standing as the other era's, never as the tool's own (docs/connection.md
/// "Verdicts"): the call on the old session, answered `-32022`, is not sent again, and it is
/// `unavailable`, saying that the server's era could not be decided.
#[tokio::test]
async fn an_era_probe_without_a_verdict_leaves_the_answer_as_the_other_eras_not_the_tools() {
    let (server, called) = call_after_a_restart(usize::MAX, || {
        Reply::raw(429, "text/plain", "slow down").header("retry-after", "3600")
    })
    .await;
    assert_eq!(
        called,
        Err(ToolError::new(
            ToolErrorKind::Unavailable,
            "server \"s\" is unavailable: it answered the call like a server of another MCP protocol era (the server answered with error -32022: Unsupported protocol version), and which era it speaks could not be decided, so the call was not sent again; try again later"
        ))
    );
    assert_eq!(server.count("tools/call"), 1, "the call is not sent again");
}
