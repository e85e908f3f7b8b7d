//! Closing (README "Lifecycle and limits"; MCP 2025-11-25 "Session Management"): what the Pack's
//! drop and a failed start leave behind. Every session it was given is deleted, cancels and
//! answers on their way go out before the `DELETE`, nothing is sent after the close, and the
//! cleanup a Host awaits is bounded.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt, stream};
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::sessions::{
    STOPPED, Sessioned, call_args, call_scripted, drop_and_settle, drop_and_settle_for, saw,
    started, trail_of,
};
use crate::support::answers::{Answer, initialize, initialize_declaring, legacy_with};
use crate::support::hostile::{
    self, Received, Reply, SESSION, entry, rpc_error, serve, standard, tool, tools_page,
};
use crate::support::mock::matchers::method;
use crate::support::mock::{self, Mock, ResponseTemplate, body, header};
use crate::support::scripted::{Scripted, Step};
use crate::support::{Host, WAIT, transport};
use crate::wire::{answer_first, echo_call, mock_server, requests, until_delete};

/// Whether `req` is the client's answer to the server request `p1`.
fn is_answer_to_p1(req: &Received) -> bool {
    req.http_method == "POST" && req.rpc.get("method").is_none() && req.id() == json!("p1")
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

/// A legacy server asks `ping` on the standalone stream and takes 600 ms to take the answer;
/// the Pack is dropped while the answer is on its way. The answer went out from inside the
/// stream loop, which the drop ends: dropped half-sent, it could still reach the session after
/// its `DELETE` (a generated schedule saw `POST - "get-ping" s-1 404` after `DELETE - - s-1`),
/// and here the `DELETE` overtook it. The close awaits it: the `DELETE` comes after the answer
/// was taken, and the answer went out once.
#[tokio::test]
async fn an_answer_to_a_server_request_on_its_way_at_the_drop_goes_before_the_delete() {
    on_its_way_at_the_drop("the answer to p1", is_answer_to_p1, |req| {
        if req.http_method == "GET" {
            let ping = hostile::sse_event(&json!({"jsonrpc": "2.0", "id": "p1", "method": "ping"}));
            let first = stream::iter([Ok::<_, io::Error>(Bytes::from(ping))]);
            return Some(Reply::stream(
                200,
                "text/event-stream",
                first.chain(stream::pending()),
            ));
        }
        is_answer_to_p1(req).then(Reply::accepted)
    })
    .await;
}

/// A legacy server takes 600 ms to answer the standalone `GET`'s headers, and the Pack is
/// dropped while that `GET` is on its way. The stream loop the drop ends held the request: on
/// the wire, it could still reach the session after its `DELETE`. The close awaits it as it
/// awaits a cancel, a ping or a resumption: the `DELETE` comes after the `GET` was answered.
#[tokio::test]
async fn a_standalone_get_on_its_way_at_the_drop_goes_before_the_delete() {
    let is_get = |req: &Received| req.http_method == "GET";
    on_its_way_at_the_drop("the standalone GET", is_get, move |req| {
        is_get(req).then(|| Reply::stream(200, "text/event-stream", stream::pending()))
    })
    .await;
}

/// A legacy server (s-1) whose `reply` answers a request, or none for the handshake's and the
/// listing's answers; the request that `is_it` picks takes 600 ms to be answered, and the Pack is
/// dropped once it arrived (`what` names it). The close's `DELETE` of s-1 comes after it was
/// answered, and it went out once.
async fn on_its_way_at_the_drop(
    what: &str,
    is_it: fn(&Received) -> bool,
    reply: impl Fn(&Received) -> Option<Reply> + Send + Sync + 'static,
) {
    let reply = std::sync::Arc::new(reply);
    let server = hostile::serve_every_get(move |req| {
        let reply = std::sync::Arc::clone(&reply);
        async move {
            if is_it(&req) {
                tokio::time::sleep(Duration::from_millis(600)).await;
            }
            if let Some(reply) = reply(&req) {
                return reply;
            }
            match req.method() {
                "initialize" => initialize(&req.id(), "s-1"),
                "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
                _ => standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
            }
        }
    })
    .await;
    let host = Host::new(json!({ "s": entry(&server.url) }));
    let seen = server
        .wait_until(Duration::from_secs(10), what, |r| r.iter().any(is_it))
        .await;
    let answered = seen.iter().find(|r| is_it(r)).unwrap().at + Duration::from_millis(600);
    drop(host);
    let seen = server
        .wait_until(Duration::from_secs(10), "the DELETE", |r| {
            r.iter().any(|r| r.http_method == "DELETE")
        })
        .await;
    let delete = seen.iter().find(|r| r.http_method == "DELETE").unwrap();
    assert!(
        delete.at >= answered,
        "the DELETE came {:?} before {what} was answered",
        answered - delete.at
    );
    assert_eq!(delete.header("mcp-session-id").as_deref(), Some("s-1"));
    assert_eq!(seen.iter().filter(|r| is_it(r)).count(), 1);
}

/// A legacy server (s-1) whose tool answers `-32021` (a modern error: an era signal), so the
/// call makes the connection ask `server/discover` again. The Pack is dropped while that probe
/// waits; the server then answers it `-32022` naming 2026-07-28 as supported, which a probe
/// would ask "once more". ARCHITECTURE.md: "after `close` no task of the Pack sends anything":
/// nothing reaches the server once `Pack::closed` resolved, no second `server/discover`.
#[tokio::test]
async fn an_era_probe_running_at_the_drop_sends_nothing_after_the_close() {
    let server = hostile::serve_all(|req| async move {
        match (req.http_method.as_str(), req.method()) {
            ("DELETE", _) => Reply::raw(200, "text/plain", ""),
            ("GET", _) => Reply::raw(405, "text/plain", ""),
            (_, "server/discover") if req.nth == 1 => {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                Reply::json(&json!({"jsonrpc": "2.0", "id": req.id(), "error": {
                    "code": -32022, "message": "Unsupported protocol version",
                    "data": {"supported": ["2026-07-28"]}}}))
            }
            (_, "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
            (_, "initialize") => initialize_declaring(&req.id(), "s-1", json!({"tools": {}})),
            (_, "tools/list") => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            (_, "tools/call") => Reply::json(&rpc_error(&req.id(), -32021, "needs a capability")),
            _ => standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
        }
    })
    .await;
    let host = Host::new(json!({ "l": entry(&server.url) }));
    host.ready("l", Duration::from_secs(10)).await;
    let call = host.call_tool("l", "t");
    // The call waits for the probe; it is dropped once the probe is out.
    let probed = server.wait_until(Duration::from_secs(5), "the call's probe", |r| {
        r.iter().filter(|r| r.method() == "server/discover").count() == 2
    });
    tokio::select! {
        _ = call => panic!("the call ended before its probe was answered"),
        _ = probed => {}
    }
    let closed = host.pack.closed();
    drop(host);
    closed.await;
    let after_close = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let late: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.at >= after_close)
        .map(|r| format!("{} {}", r.http_method, r.method()))
        .collect();
    assert_eq!(late, Vec::<String>::new());
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

/// A start fails because its `tools/list` reply breaks mid-body (so the page may still run), and
/// so does the page issued again; ending that start cancels the page, and the server takes 3 s to accept the cancel. The Pack
/// is dropped meanwhile: the session is still the client's, so its `DELETE` must go out.
#[tokio::test(start_paused = true)]
async fn pack_drop_while_a_failed_start_cancels_still_deletes_the_session() {
    let server = serve(|req: Received| async move {
        match req.method() {
            "tools/list" => Reply::stream(
                200,
                "text/event-stream",
                stream::iter([
                    Ok(Bytes::from_static(b": working\n\n")),
                    Err(std::io::Error::other("cut")),
                ]),
            ),
            "notifications/cancelled" => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                Reply::accepted()
            }
            _ => standard(&req).unwrap(),
        }
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    server
        .wait_until(Duration::from_secs(10), "the cancel", |r| {
            r.iter().any(|r| r.method() == "notifications/cancelled")
        })
        .await;
    drop(host);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let seen: Vec<String> = server
        .requests()
        .iter()
        .map(|r| {
            format!(
                "{} {} {:?}",
                r.http_method,
                r.method(),
                r.header("mcp-session-id")
            )
        })
        .collect();
    let session = format!("{:?}", Some(SESSION));
    assert_eq!(
        seen,
        [
            "POST initialize None".to_string(),
            format!("POST notifications/initialized {session}"),
            format!("POST tools/list {session}"),
            // The lost reply of a listing page is issued once more, with a new id.
            format!("POST tools/list {session}"),
            format!("POST notifications/cancelled {session}"),
            format!("DELETE  {session}"),
        ]
    );
    // The cancel names the id the page last went out under.
    let requests = server.requests();
    let pages: Vec<Value> = requests
        .iter()
        .filter(|r| r.method() == "tools/list")
        .map(Received::id)
        .collect();
    assert_ne!(pages[0], pages[1]);
    let cancel = requests
        .iter()
        .find(|r| r.method() == "notifications/cancelled")
        .unwrap();
    assert_eq!(cancel.rpc["params"]["requestId"], pages[1]);
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

/// Dropping the Pack with a call in flight: the cancel goes first, on the call's session with
/// its headers, then the DELETE; the call's future resolves, and dropping it later sends no
/// second cancel.
#[tokio::test]
async fn cancel_after_shutdown_goes_before_the_delete() {
    let (server, host) = started().await;
    let a = tokio::spawn(call_scripted(&host, json!({"ms": 10_000})));
    let b = call_scripted(&host, json!({"ms": 10_000}));
    saw(&server, "POST tools/call 4 s-1 200").await;
    saw(&server, "POST tools/call 5 s-1 200").await;
    drop(host);
    assert_eq!(
        a.await.unwrap(),
        transport("the call to server \"s\" was stopped because the mcp Pack was shut down")
    );
    drop(b);
    let mut trail: Vec<String> = server
        .settle(Duration::from_millis(300), WAIT)
        .await
        .iter()
        .map(Step::line)
        .collect();
    // The two calls travel on two connections, and the two cancels go out together: the order
    // within each pair is free.
    trail[3..5].sort();
    trail[5..7].sort();
    assert_eq!(
        trail,
        trail_of(&[
            "POST tools/call 4 s-1 200",
            "POST tools/call 5 s-1 200",
            "POST notifications/cancelled 4 s-1 202",
            "POST notifications/cancelled 5 s-1 202",
            "DELETE - - s-1 200",
        ])
    );
    for step in server.trail().iter().skip(3) {
        assert_eq!(step.version.as_deref(), Some("2025-11-25"), "{step:?}");
    }
}

/// A start that fails after the server gave a session id deletes that session: an unsupported
/// protocolVersion (the DELETE carries no version: none was negotiated), and a failed
/// notifications/initialized.
#[tokio::test]
async fn a_failed_start_deletes_the_session_it_was_given() {
    for (bad, expected, version) in [
        (
            "version",
            ["POST initialize 2 - 200", "DELETE - - s-1 200"].as_slice(),
            None,
        ),
        (
            "initialized",
            [
                "POST initialize 2 - 200",
                "POST notifications/initialized - s-1 500",
                "DELETE - - s-1 200",
            ]
            .as_slice(),
            Some("2025-11-25"),
        ),
    ] {
        let server = Scripted::start().await;
        match bad {
            "version" => server.set_version("2099-01-01"),
            _ => server.set_initialized_status(500),
        }
        let host = Host::new(json!({"s": {"url": server.url}}));
        let trail = server
            .wait_until(WAIT, "the DELETE", |t| t.iter().any(|s| s.verb == "DELETE"))
            .await;
        drop(host);
        let lines: Vec<String> = trail.iter().map(Step::line).collect();
        assert_eq!(lines, expected, "{bad}");
        assert_eq!(trail.last().unwrap().version.as_deref(), version, "{bad}");
        assert_eq!(server.live(), Vec::<String>::new());
    }
}

/// The Pack is dropped while the first `initialize` is on its way (the server already issued
/// s-1 and answers 400 ms later). The session is owned from the answer's header, so it must be
/// deleted, as a re-initialize caught by the drop is (allowed to finish, then deleted).
#[tokio::test]
async fn pack_drop_during_the_first_initialize_deletes_its_session() {
    let server = Scripted::start().await;
    server.set_init_delay(Duration::from_millis(400));
    let host = Host::new(json!({"s": {"url": server.url}}));
    saw(&server, "POST initialize 2 - 200").await;
    assert_eq!(
        drop_and_settle_for(&server, host, Duration::from_millis(1500)).await,
        ["POST initialize 2 - 200", "DELETE - - s-1 200"]
    );
    assert_eq!(server.issued(), ["s-1"]);
    assert_eq!(server.live(), Vec::<String>::new());
}

/// The 2-minute start deadline passes while `initialize` is unanswered (the server issued s-1
/// and answers 5 s later). The POST finishes in its own task: s-1 is deleted as soon as its
/// header arrives, the next start's s-2 is the session used, and it is deleted at the drop.
#[tokio::test(start_paused = true)]
async fn an_initialize_answered_after_the_start_deadline_is_deleted() {
    let server = Scripted::start().await;
    server.set_init_delay(Duration::from_secs(125));
    let host = Host::new(json!({"s": {"url": server.url}}));
    saw(&server, "POST initialize 2 - 200").await;
    server.set_init_delay(Duration::ZERO);
    host.ready("s", Duration::from_secs(200)).await;
    server
        .wait_until(Duration::from_secs(200), "DELETE of s-1", |t| {
            t.iter().any(|s| s.line() == "DELETE - - s-1 200")
        })
        .await;
    let trail = drop_and_settle(&server, host).await;
    assert_eq!(
        trail,
        [
            "POST initialize 2 - 200",
            "POST initialize 3 - 200",
            "POST notifications/initialized - s-2 202",
            "POST tools/list 4 s-2 200",
            "DELETE - - s-1 200",
            "DELETE - - s-2 200",
        ]
    );
    assert_eq!(server.issued(), ["s-1", "s-2"]);
    assert_eq!(server.live(), Vec::<String>::new());
}

#[tokio::test]
async fn dropping_the_pack_deletes_the_session() {
    let server = mock_server(mock::with_tools(json!([]), echo_call)).await;
    Mock::given(method("DELETE"))
        .respond_with(ResponseTemplate::new(405))
        .mount(&server)
        .await;
    let host = Host::new(
        json!({"s": {"url": format!("{}/mcp", server.uri()), "headers": {"X-Key": "k"}}}),
    );
    host.ready("s", WAIT).await;
    let (delete, _) = until_delete(&server, host).await;
    assert_eq!(header(&delete, "mcp-session-id").as_deref(), Some("s-1"));
    assert_eq!(
        header(&delete, "mcp-protocol-version").as_deref(),
        Some("2025-11-25")
    );
    assert_eq!(header(&delete, "x-key").as_deref(), Some("k"));
}

#[tokio::test]
async fn a_start_that_fails_after_initialize_deletes_its_session() {
    let server = mock_server(mock::server(|_, _| {
        ResponseTemplate::new(500).set_body_string("listing broke")
    }))
    .await;
    answer_first(&server, "DELETE", 204).await;
    let host = Host::new(json!({"s": {"url": format!("{}/mcp", server.uri())}}));
    let listing = host
        .wait_for(WAIT, |l| l["servers"][0]["status"] == "error")
        .await;
    assert_eq!(
        listing["servers"][0]["reason"],
        "HTTP 500 Internal Server Error: listing broke"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    let trail = loop {
        let trail: Vec<(String, String, Option<String>)> = requests(&server)
            .await
            .iter()
            .map(|r| {
                (
                    r.method.to_string(),
                    body(r)["method"].as_str().unwrap_or("").to_string(),
                    header(r, "mcp-session-id"),
                )
            })
            .take(4)
            .collect();
        if trail.len() == 4 || tokio::time::Instant::now() >= deadline {
            break trail;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let t = |verb: &str, m: &str, session: Option<&str>| {
        (verb.to_string(), m.to_string(), session.map(str::to_string))
    };
    assert_eq!(
        trail,
        [
            t("POST", "initialize", None),
            t("POST", "notifications/initialized", Some("s-1")),
            t("POST", "tools/list", Some("s-1")),
            t("DELETE", "", Some("s-1")),
        ]
    );
}
