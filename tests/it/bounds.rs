//! Deadlines and bounds (README "Lifecycle and limits"): the start and call deadlines, the
//! bounds on reply bodies, events, decoded sizes and schemas, and the bound on every request
//! the client sends in the background (`server/discover`, `ping`, the standalone `GET`,
//! `subscriptions/listen`, resumptions), including answers whose body never ends.
//!
//! Tests about deadlines run on Tokio's paused clock (`start_paused`): the server and the Pack
//! share one current-thread runtime and talk over real loopback sockets, and the clock jumps
//! only when every task is idle, so a 70-second handshake or a 4-minute tool takes
//! milliseconds and the bounds are measured in exact virtual seconds.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::answers::{
    Answer, assert_call_cancelled, discover_result, headers_then_silence, heartbeat, legacy_with,
    namespace, never, seconds,
};
use crate::support::hostile::{
    self, Received, Reply, SESSION, Server, entry, rpc_error, serve, server_entry, sse_event,
    standard, text_result, tool, tools_page,
};
use crate::support::{Host, transport};

pub(crate) const MIB: usize = 1024 * 1024;

const CAP_MESSAGE: &str = "the server sent a message larger than the 16 MiB limit";

const START_DEADLINE: &str =
    "the server did not finish starting (initialize and tools/list) within 120 seconds";

/// A server whose `tools/list` answers come from `page`; everything else is [`standard`].
pub(crate) async fn list_server<F>(page: F) -> Server
where
    F: Fn(&Received) -> Reply + Send + Sync + 'static,
{
    serve(move |req| {
        let reply = standard(&req).unwrap_or_else(|| match req.method() {
            "tools/list" => page(&req),
            _ => Reply::json(&rpc_error(&req.id(), -32601, "Method not found")),
        });
        async move { reply }
    })
    .await
}

/// A server with one tool `t` whose `tools/call` answers come from `call`.
pub(crate) async fn tool_server<F, Fut>(call: F) -> Server
where
    F: Fn(Received) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Reply> + Send + 'static,
{
    let call = Arc::new(call);
    serve(move |req| {
        let call = Arc::clone(&call);
        async move {
            if let Some(reply) = standard(&req) {
                return reply;
            }
            match req.method() {
                "tools/list" => {
                    Reply::json(&tools_page(&req.id(), vec![tool("t", "a tool")], None))
                }
                "tools/call" => call(req).await,
                _ => Reply::json(&rpc_error(&req.id(), -32601, "Method not found")),
            }
        }
    })
    .await
}

/// A Host with one server `ns` at `url`, waited on until ready.
pub(crate) async fn ready_on(ns: &str, url: &str) -> Host {
    let host = Host::new(json!({ ns: entry(url) }));
    host.ready(ns, Duration::from_secs(20)).await;
    host
}

/// A Host with the servers `a` and `b` (namespace, server), both waited on until ready.
pub(crate) async fn ready_pair(a: (&str, &Server), b: (&str, &Server)) -> Host {
    let host = Host::new(json!({ a.0: entry(&a.1.url), b.0: entry(&b.1.url) }));
    host.ready(a.0, Duration::from_secs(10)).await;
    host.ready(b.0, Duration::from_secs(10)).await;
    host
}

/// A Host with one server `ns` at `url`, waited on (at most `limit`) until it shows `error`; the
/// Host and the reason.
pub(crate) async fn failed_start(ns: &str, url: &str, limit: Duration) -> (Host, String) {
    let host = Host::new(json!({ ns: entry(url) }));
    let reason = error_reason(&host, ns, limit).await;
    (host, reason)
}

/// Starts `ns` at `url` (on a paused clock) and asserts that the start fails at its 2-minute
/// deadline, 120 s in; the Host, and when it was made.
async fn failed_at_the_start_deadline(ns: &str, url: &str) -> (Host, Instant) {
    let t0 = Instant::now();
    let (host, reason) = failed_start(ns, url, Duration::from_secs(200)).await;
    assert_eq!(reason, START_DEADLINE);
    assert_eq!((Instant::now() - t0).as_secs(), 120);
    (host, t0)
}

/// Waits until `ns` shows `error`; returns its reason.
pub(crate) async fn error_reason(host: &Host, ns: &str, limit: Duration) -> String {
    host.failed(ns, limit).await["reason"]
        .as_str()
        .expect("an error has a reason")
        .to_string()
}

/// `call_dynamic_tool` of `t` on `ns`, bounded by `limit`.
pub(crate) async fn call_t_within(
    host: &Host,
    ns: &str,
    limit: Duration,
) -> Result<String, ToolError> {
    tokio::time::timeout(
        limit,
        host.call(
            "call_dynamic_tool",
            json!({"namespace": ns, "toolName": "t", "arguments": {}}),
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("the call did not return within {limit:?}"))
}

/// A Host with one server `ns` at `url` whose start fails for a message over the 16 MiB cap.
async fn over_the_cap(ns: &str, url: &str) -> Host {
    let host = Host::new(json!({ ns: entry(url) }));
    assert_eq!(
        error_reason(&host, ns, Duration::from_secs(30)).await,
        CAP_MESSAGE
    );
    host
}

/// `sent` bytes had gone out when the Pack gave up on an endless body of 64 KiB chunks: it read
/// up to the 16 MiB cap, and stopped near it.
pub(crate) fn assert_read_to_the_cap(sent: usize) {
    assert!(
        sent >= 16 * MIB - 64 * 1024,
        "the Pack read up to the cap: {sent}"
    );
    assert!(
        sent < 40 * MIB,
        "the Pack stopped reading near the cap: {sent}"
    );
}

/// The description of `name` in the detail listing of `ns`.
pub(crate) async fn description(host: &Host, ns: &str, name: &str) -> Value {
    let detail = host
        .listing(json!({"namespace": ns, "toolName": name}))
        .await;
    detail["description"].clone()
}

/// The requests of the first start: everything before the second `initialize`.
pub(crate) fn first_start(server: &Server) -> Vec<Received> {
    let mut seen_initialize = false;
    server
        .requests()
        .into_iter()
        .take_while(|r| {
            if r.method() == "initialize" {
                if seen_initialize {
                    return false;
                }
                seen_initialize = true;
            }
            true
        })
        .collect()
}

pub(crate) fn cursors_asked(requests: &[Received]) -> Vec<Value> {
    requests
        .iter()
        .filter(|r| r.method() == "tools/list")
        .map(|r| r.rpc["params"]["cursor"].clone())
        .collect()
}

/// Arrival times of `method`, in whole milliseconds after `t0`.
pub(crate) fn offsets_ms(server: &Server, method: &str, t0: Instant) -> Vec<u128> {
    server
        .with_method(method)
        .iter()
        .map(|r| (r.at - t0).as_millis())
        .collect()
}

/// A gzip stream that never ends and inflates to zeros: `(header and first block, a block to
/// repeat forever)`, each block 1 MiB of zeros in about 1 KB.
fn gzip_of_endless_zeros() -> (Bytes, Bytes) {
    let zeros = vec![0u8; MIB];
    let mut deflate = flate2::Compress::new(flate2::Compression::best(), false);
    let mut block = |out: &mut Vec<u8>| {
        let before = deflate.total_in();
        deflate
            .compress_vec(&zeros, out, flate2::FlushCompress::Sync)
            .unwrap();
        assert_eq!(deflate.total_in() - before, MIB as u64);
    };
    // The gzip header: magic, deflate, no flags, no time, no extra flags, unknown OS.
    let mut first = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    first.reserve(64 * 1024);
    block(&mut first);
    // After a sync flush the next block is byte-aligned; behind it lie only zeros, so a block of
    // zeros decodes the same wherever it is repeated.
    let mut again = Vec::with_capacity(64 * 1024);
    block(&mut again);
    (first.into(), again.into())
}

/// A tool whose progress notification stream runs `secs` seconds (one every 10 s), then
/// answers.
async fn slow_tool_server(secs: u64) -> Server {
    tool_server(move |req| async move {
        let id = req.id();
        let ticks = stream::unfold(0u64, move |n| async move {
            if n * 10 >= secs {
                return None;
            }
            tokio::time::sleep(Duration::from_secs(10)).await;
            let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "p", "progress": n + 1}});
            Some((Ok(Bytes::from(sse_event(&note))), n + 1))
        });
        let answer =
            stream::once(async move { Ok(Bytes::from(sse_event(&text_result(&id, "finally")))) });
        Reply::stream(200, "text/event-stream", ticks.chain(answer))
    })
    .await
}

/// Calls `t` of a [`slow_tool_server`] of `secs` seconds, as server `ns` (a call deadline of 400
/// s of our own): the server, the Host, the result, and how many seconds the call took.
async fn call_slow_tool(secs: u64, ns: &str) -> (Server, Host, Result<String, ToolError>, u64) {
    heartbeat();
    let server = slow_tool_server(secs).await;
    let host = ready_on(ns, &server.url).await;
    let t0 = Instant::now();
    let got = call_t_within(&host, ns, Duration::from_secs(400)).await;
    (server, host, got, (Instant::now() - t0).as_secs())
}

/// A legacy server behind a proxy that answers `server/discover` with a `400` whose headers
/// come at once and whose body never ends (README "Lifecycle and limits": nothing the Pack
/// sends in the background can hang it). An error body is read for its preview for at most
/// 5 s (docs/lifecycle.md), so the 400 gives its legacy verdict 5 s in and the start goes on
/// with `initialize`; before, the probe hung until the 2-minute start deadline on every start.
#[tokio::test(start_paused = true)]
async fn a_discover_refused_with_a_body_that_never_ends_falls_back_to_initialize_after_5_seconds() {
    heartbeat();
    let server = legacy_with(|req| {
        (req.method() == "server/discover")
            .then(|| Answer::Now(headers_then_silence(400, "text/plain", Arc::default())))
    })
    .await;
    let t0 = Instant::now();
    let host = Host::new(json!({ "slowbody": entry(&server.url) }));
    let listing = host
        .wait_for(Duration::from_secs(200), |listing| {
            hostile::server_entry(listing, "slowbody")["status"] != "loading"
        })
        .await;
    let entry = hostile::server_entry(&listing, "slowbody");
    assert_eq!(entry["status"], "ready", "{entry}");
    assert_eq!((Instant::now() - t0).as_secs(), 5);
    assert_eq!(seconds(&server, "POST", "initialize", t0), [5]);
}

/// A standalone `GET` answered `503` by a proxy whose headers come at once and whose body never
/// ends. README: "Nothing the Pack sends in the background can hang it"; docs/connection.md:
/// "Nothing it sends can stall it ... after either it opens the stream again on its backoff".
/// The 30 s bound covers only the headers: `check_status` then reads the 503's body for its
/// preview with no bound, and the stream loop waits on it for the Pack's life — the server
/// later offering a stream (here: answering 405, "no stream") is never asked again. The loop
/// should give the body up and send its next `GET` on its backoff: two `GET`s in 10 minutes.
#[tokio::test(start_paused = true)]
async fn a_standalone_get_refused_with_a_body_that_never_ends_does_not_stall_the_stream_loop() {
    heartbeat();
    let server = legacy_with(|req| {
        (req.http_method == "GET" && req.nth == 0)
            .then(|| Answer::Now(headers_then_silence(503, "text/plain", Arc::default())))
    })
    .await;
    let host = Host::new(json!({ "g503": entry(&server.url) }));
    host.ready("g503", Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    let t0 = server.first(|r| r.http_method == "GET").at;
    assert_eq!(seconds(&server, "GET", "", t0).len(), 2);
    drop(host);
}

/// A modern server's `subscriptions/listen` refused with a `400` whose headers come at once and
/// whose body never ends (README: "`subscriptions/listen` and a resumption 30 s to bring their
/// headers ... Nothing the Pack sends in the background can hang it"). The refusal's body is read
/// for its preview within a bound, so the stream loop goes on: a second listen (answered here
/// with an event stream) goes out on the backoff, and a `list_changed` on it re-lists the
/// server.
#[tokio::test(start_paused = true)]
async fn a_listen_refused_with_a_body_that_never_ends_does_not_stall_the_stream_loop() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => discover_result(&req.id()),
            "tools/list" if req.nth == 0 => {
                Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
            }
            "tools/list" => Reply::json(&tools_page(
                &req.id(),
                vec![tool("t", "t"), tool("u", "u")],
                None,
            )),
            "subscriptions/listen" if req.nth == 0 => {
                headers_then_silence(400, "text/plain", Arc::default())
            }
            "subscriptions/listen" => {
                let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                                 "params": {"notifications": {"toolsListChanged": true}}});
                let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
                let text = format!("{}{}", hostile::sse_event(&ack), hostile::sse_event(&changed));
                let body = stream::once(async move { Ok::<_, io::Error>(Bytes::from(text)) })
                    .chain(stream::pending());
                Reply::stream(200, "text/event-stream", body)
            }
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "l400": entry(&server.url) }));
    host.ready("l400", Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(server.count("subscriptions/listen"), 2);
    assert_eq!(host.tool_names("l400").await, ["t", "u"]);
    drop(host);
}

/// MCP 2026-07-28, basic/versioning "Backward Compatibility": a server that does not answer
/// `server/discover` within a reasonable timeout is legacy. One that holds the probe open but
/// answers `initialize` is ready in the legacy era 10 s in, after one probe and one handshake.
#[tokio::test(start_paused = true)]
async fn a_discover_that_never_answers_falls_back_to_initialize_after_10_seconds() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => never().await,
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            _ => standard(&req).unwrap(),
        }
    })
    .await;
    let t0 = Instant::now();
    let host = Host::new(json!({ "silent": entry(&server.url) }));
    host.ready("silent", Duration::from_secs(200)).await;
    assert_eq!((Instant::now() - t0).as_secs(), 10);
    assert_eq!(
        namespace(&host, "silent").await["protocolVersion"],
        "2025-06-18"
    );
    assert_eq!(seconds(&server, "POST", "server/discover", t0), [0]);
    assert_eq!(seconds(&server, "POST", "initialize", t0), [10]);
}

/// A modern server that takes 3 s to answer `server/discover` is still modern.
#[tokio::test(start_paused = true)]
async fn a_modern_server_answering_discover_after_3_seconds_is_modern() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                discover_result(&req.id())
            }
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            "subscriptions/listen" => never().await,
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let t0 = Instant::now();
    let host = Host::new(json!({ "slow": entry(&server.url) }));
    host.ready("slow", Duration::from_secs(60)).await;
    assert_eq!((Instant::now() - t0).as_secs(), 3);
    assert_eq!(
        namespace(&host, "slow").await["protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(server.count("initialize"), 0);
}

/// A start stuck on a modern server's `tools/list` names what it was doing: there is no
/// `initialize` in that era.
#[tokio::test(start_paused = true)]
async fn a_modern_start_past_its_deadline_names_discover_and_tools_list() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => discover_result(&req.id()),
            "tools/list" => never().await,
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "stuck": entry(&server.url) }));
    let failed = host.failed("stuck", Duration::from_secs(200)).await;
    assert_eq!(
        failed["reason"],
        "the server did not finish starting (server/discover and tools/list) within 120 seconds"
    );
}

/// A Host with `server` as `namespace`, ready; returns it once `server` has had a third
/// standalone `GET` (waited for at most `limit`), with the first `GET`'s arrival.
async fn third_get(server: &Server, namespace: &str, limit: Duration) -> (Host, Instant) {
    let host = Host::new(json!({ namespace: entry(&server.url) }));
    host.ready(namespace, Duration::from_secs(20)).await;
    let t0 = server.first(|r| r.http_method == "GET").at;
    server
        .wait_until(limit, "a third GET", |r| {
            r.iter().filter(|r| r.http_method == "GET").count() >= 3
        })
        .await;
    (host, t0)
}

/// A standalone `GET` answered 404 is asked about with a `ping` on the session; a `ping` that
/// never answers is given up after 10 s, and the loop opens the stream again after its backoff
/// (1 s) instead of waiting on the ping for good.
#[tokio::test(start_paused = true)]
async fn a_ping_that_never_answers_does_not_stall_the_stream_loop() {
    heartbeat();
    let server = legacy_with(|req| match (req.http_method.as_str(), req.method()) {
        ("GET", _) => Some(Answer::Now(Reply::raw(404, "text/plain", "Not Found"))),
        (_, "ping") => Some(Answer::Never),
        _ => None,
    })
    .await;
    let (host, t0) = third_get(&server, "p", Duration::from_secs(60)).await;
    // GET, ping (10 s, no answer), 1 s, GET, ping (10 s), 2 s, GET.
    assert_eq!(seconds(&server, "GET", "", t0), [0, 11, 23]);
    assert_eq!(seconds(&server, "POST", "ping", t0)[..2], [0, 11]);
    drop(host);
}

/// A standalone `GET` whose headers never come (a silent proxy) is given up after 30 s and
/// opened again after the backoff (1 s).
#[tokio::test(start_paused = true)]
async fn a_standalone_get_without_headers_is_given_up_and_opened_again() {
    heartbeat();
    let server = legacy_with(|req| (req.http_method == "GET").then_some(Answer::Never)).await;
    let (host, t0) = third_get(&server, "g", Duration::from_secs(120)).await;
    assert_eq!(seconds(&server, "GET", "", t0), [0, 31, 63]);
    drop(host);
}

/// A `subscriptions/listen` whose headers never come is given up after 30 s and sent again
/// after the backoff (1 s).
#[tokio::test(start_paused = true)]
async fn a_listen_without_headers_is_given_up_and_sent_again() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => discover_result(&req.id()),
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            "subscriptions/listen" => never().await,
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "l": entry(&server.url) }));
    host.ready("l", Duration::from_secs(20)).await;
    let t0 = server.first(|r| r.method() == "subscriptions/listen").at;
    server
        .wait_until(Duration::from_secs(120), "a third listen", |r| {
            r.iter()
                .filter(|r| r.method() == "subscriptions/listen")
                .count()
                >= 3
        })
        .await;
    assert_eq!(
        seconds(&server, "POST", "subscriptions/listen", t0),
        [0, 31, 63]
    );
    // Not an era signal: probed once, listed once.
    assert_eq!(server.count("server/discover"), 1);
    assert_eq!(server.count("tools/list"), 1);
    drop(host);
}

/// A call whose event stream ends after an event id is resumed with `GET` + `Last-Event-ID`;
/// a resumption whose headers never come fails the call 30 s later, not at the call's
/// 5-minute deadline.
#[tokio::test(start_paused = true)]
async fn a_resumption_without_headers_fails_the_call_after_30_seconds() {
    heartbeat();
    let server = legacy_with(|req| match (req.http_method.as_str(), req.method()) {
        ("GET", _) if req.header("last-event-id").is_some() => Some(Answer::Never),
        (_, "tools/call") => Some(Answer::Now(Reply::raw(
            200,
            "text/event-stream",
            "id: e1\nretry: 1000\ndata:\n\n",
        ))),
        _ => None,
    })
    .await;
    let host = Host::new(json!({ "r": entry(&server.url) }));
    host.ready("r", Duration::from_secs(20)).await;
    let t0 = Instant::now();
    let failed = host.call_tool("r", "t").await;
    assert_eq!((Instant::now() - t0).as_secs(), 31);
    assert_eq!(
        failed,
        Err(ToolError::new(
            ToolErrorKind::Transport,
            "server \"r\": resuming the event stream (GET with Last-Event-ID) failed: the server did not answer the resumption within 30 seconds"
        ))
    );
}

/// Pages that each take 7 s: the 2-minute start deadline covers the whole pagination, so the
/// start fails after the 18th page was asked for (pages asked at 0, 7, …, 119 s).
#[tokio::test(start_paused = true)]
async fn slow_pages_are_bounded_by_the_start_deadline() {
    heartbeat();
    let server = serve(|req| async move {
        if let Some(reply) = standard(&req) {
            return reply;
        }
        tokio::time::sleep(Duration::from_secs(7)).await;
        let n = req.id().as_u64().unwrap();
        Reply::json(&tools_page(&req.id(), vec![], Some(&format!("c{n}"))))
    })
    .await;
    let (_host, reason) = failed_start("slow", &server.url, Duration::from_secs(200)).await;
    assert_eq!(reason, START_DEADLINE);
    assert_eq!(cursors_asked(&first_start(&server)).len(), 18);
    // The page in flight at the deadline is cancelled, then the session is deleted.
    let start = first_start(&server);
    let tail: Vec<(&str, &str, Value, Option<String>)> = start[start.len() - 2..]
        .iter()
        .map(|r| {
            (
                r.http_method.as_str(),
                r.method(),
                r.rpc["params"].clone(),
                r.header("mcp-session-id"),
            )
        })
        .collect();
    let session = Some(SESSION.to_string());
    let last_page = start
        .iter()
        .rfind(|r| r.method() == "tools/list")
        .unwrap()
        .id();
    assert_eq!(
        tail,
        [
            (
                "POST",
                "notifications/cancelled",
                json!({"requestId": last_page, "reason": "the client abandoned the start of the session"}),
                session.clone()
            ),
            ("DELETE", "", Value::Null, session),
        ]
    );
}

/// Schemas (input + output) of exactly 256 KiB are kept verbatim; one byte more leaves that
/// tool out, naming it and the measured size, while the server's other tools stay listed.
#[tokio::test]
async fn schema_size_cap_is_exact() {
    fn schema_of(bytes: usize) -> Value {
        // {"type":"object","description":"xxx…"}
        let overhead = r#"{"type":"object","description":""}"#.len();
        json!({"type": "object", "description": "x".repeat(bytes - overhead)})
    }
    let limit = 256 * 1024;
    let fits = schema_of(limit);
    assert_eq!(serde_json::to_string(&fits).unwrap().len(), limit);
    let fits_clone = fits.clone();
    let ok = list_server(move |req| {
        Reply::json(&tools_page(
            &req.id(),
            vec![json!({"name": "big", "inputSchema": fits_clone})],
            None,
        ))
    })
    .await;
    let over = list_server(move |req| {
        Reply::json(&tools_page(
            &req.id(),
            vec![
                tool("small", "fine"),
                json!({"name": "big", "inputSchema": {"type": "object"}, "outputSchema": schema_of(limit - 15)}),
            ],
            None,
        ))
    })
    .await;
    let host = Host::new(json!({"ok": entry(&ok.url), "over": entry(&over.url)}));
    host.ready("over", Duration::from_secs(20)).await;
    let over_listing = host.listing(json!({"namespace": "over"})).await;
    assert_eq!(over_listing["tools"][0]["name"], "small");
    assert_eq!(
        over_listing["omitted"],
        // 15 bytes of {"type":"object"} + 262129 bytes of output schema = 262146
        json!([{"name": "big", "reason": "its schemas are 262146 bytes (limit 262144)"}])
    );
    host.ready("ok", Duration::from_secs(20)).await;
    let one = host
        .listing(json!({"namespace": "ok", "toolName": "big"}))
        .await;
    assert_eq!(one["inputSchema"], fits);
}

/// A JSON body sent slowly (64 KiB every millisecond) and without end: the Pack stops reading
/// at 16 MiB, and the server recovers on the retry.
#[tokio::test]
async fn json_body_over_the_cap_sent_slowly_is_refused_while_reading() {
    let sent = Arc::new(AtomicUsize::new(0));
    let sent2 = Arc::clone(&sent);
    let server = list_server(move |req| {
        if req.nth == 0 {
            Reply::endless(
                200,
                "application/json",
                format!(
                    r#"{{"jsonrpc":"2.0","id":{},"result":{{"tools":[],"pad":""#,
                    req.id()
                ),
                Bytes::from(vec![b'x'; 64 * 1024]),
                Duration::from_millis(1),
                Arc::clone(&sent2),
            )
        } else {
            Reply::json(&tools_page(&req.id(), vec![tool("t", "ok")], None))
        }
    })
    .await;
    let host = over_the_cap("flood", &server.url).await;
    assert_read_to_the_cap(sent.load(Ordering::SeqCst));
    let listing = host.ready("flood", Duration::from_secs(10)).await;
    assert_eq!(server_entry(&listing, "flood")["tools"], json!(["t"]));
    // The connection was dropped, not merely left unread.
    assert!(sent.load(Ordering::SeqCst) < 40 * MIB);
}

/// A body of exactly 16 MiB is read; a Content-Length of one byte more is refused before any
/// of it is read, and so is a chunked body one byte over.
#[tokio::test]
async fn json_body_cap_is_exact() {
    fn padded(id: &Value, size: usize) -> Vec<u8> {
        let mut body =
            serde_json::to_vec(&tools_page(id, vec![tool("t", "padded")], None)).unwrap();
        body.resize(size, b' ');
        body
    }
    let exact =
        list_server(|req| Reply::raw(200, "application/json", padded(&req.id(), 16 * MIB))).await;
    let over =
        list_server(|req| Reply::raw(200, "application/json", padded(&req.id(), 16 * MIB + 1)))
            .await;
    let over_chunked = list_server(|req| {
        let body = Bytes::from(padded(&req.id(), 16 * MIB + 1));
        let chunks: Vec<Result<Bytes, std::io::Error>> = (0..body.len())
            .step_by(MIB)
            .map(|i| Ok(body.slice(i..(i + MIB).min(body.len()))))
            .collect();
        Reply::stream(200, "application/json", stream::iter(chunks))
    })
    .await;
    let host = Host::new(json!({
        "exact": entry(&exact.url), "over": entry(&over.url), "chunked": entry(&over_chunked.url)
    }));
    assert_eq!(
        error_reason(&host, "over", Duration::from_secs(30)).await,
        CAP_MESSAGE
    );
    assert_eq!(
        error_reason(&host, "chunked", Duration::from_secs(30)).await,
        CAP_MESSAGE
    );
    let listing = host.ready("exact", Duration::from_secs(30)).await;
    assert_eq!(server_entry(&listing, "exact")["tools"], json!(["t"]));
}

/// One SSE event that never ends, sent in small chunks: refused at 16 MiB.
#[tokio::test]
async fn single_sse_event_over_the_cap_is_refused() {
    let sent = Arc::new(AtomicUsize::new(0));
    let sent2 = Arc::clone(&sent);
    let server = list_server(move |_req| {
        Reply::endless(
            200,
            "text/event-stream",
            "event: message\ndata: {\"pad\":\"",
            Bytes::from(vec![b'x'; 32 * 1024]),
            Duration::ZERO,
            Arc::clone(&sent2),
        )
    })
    .await;
    let _host = over_the_cap("sse", &server.url).await;
    let at_error = sent.load(Ordering::SeqCst);
    assert!(
        (16 * MIB - 64 * 1024..40 * MIB).contains(&at_error),
        "the Pack stopped reading near the cap: {at_error}"
    );
}

/// The cap is per event: 24 MiB of 1 MiB notifications before the answer are fine.
#[tokio::test]
async fn many_events_totalling_more_than_the_cap_are_fine() {
    let server = list_server(|req| {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "n".repeat(MIB)}});
        let mut events: Vec<Result<Bytes, std::io::Error>> =
            (0..24).map(|_| Ok(Bytes::from(sse_event(&note)))).collect();
        events.push(Ok(Bytes::from(sse_event(&tools_page(
            &req.id(),
            vec![tool("t", "after 24 MiB")],
            None,
        )))));
        Reply::stream(200, "text/event-stream", stream::iter(events))
    })
    .await;
    let host = ready_on("big-stream", &server.url).await;
    assert_eq!(description(&host, "big-stream", "t").await, "after 24 MiB");
}

/// A few KB of gzip that would inflate without end is refused once 16 MiB are decoded, JSON and
/// SSE alike, long before much of it was even sent.
#[tokio::test]
async fn gzip_bomb_is_refused_at_the_decoded_limit() {
    let (first, again) = gzip_of_endless_zeros();
    assert!(again.len() < 4096, "{}", again.len());
    let sent_list = Arc::new(AtomicUsize::new(0));
    let sent_call = Arc::new(AtomicUsize::new(0));
    let (list_counter, call_counter) = (Arc::clone(&sent_list), Arc::clone(&sent_call));
    let bomb = move |content_type: &str, sent: &Arc<AtomicUsize>| {
        Reply::endless(
            200,
            content_type,
            first.clone(),
            again.clone(),
            Duration::ZERO,
            Arc::clone(sent),
        )
        .header("content-encoding", "gzip")
    };
    let bomb2 = bomb.clone();
    let list = list_server(move |_req| bomb("application/json", &list_counter)).await;
    let call = tool_server(move |_req| {
        let reply = bomb2("text/event-stream", &call_counter);
        async move { reply }
    })
    .await;
    let host = Host::new(json!({"list": entry(&list.url), "call": entry(&call.url)}));
    assert_eq!(
        error_reason(&host, "list", Duration::from_secs(60)).await,
        CAP_MESSAGE
    );
    host.ready("call", Duration::from_secs(20)).await;
    assert_eq!(
        call_t_within(&host, "call", Duration::from_secs(60)).await,
        transport(&format!("server \"call\": {CAP_MESSAGE}"))
    );
    // 16 MiB of zeros is about 16 KB of gzip; socket buffers may hold some more.
    for sent in [&sent_list, &sent_call] {
        let sent = sent.load(Ordering::SeqCst);
        assert!(
            (16 * 1024..4 * MIB).contains(&sent),
            "{sent} bytes of gzip sent"
        );
    }
}

/// A 500 whose body never ends: only a preview is read (8 KiB), and the reason quotes at most
/// 1 KiB of it, cut on a char boundary.
#[tokio::test]
async fn error_status_with_an_endless_body_reads_only_a_preview() {
    let sent = Arc::new(AtomicUsize::new(0));
    let sent2 = Arc::clone(&sent);
    let server = serve(move |req| {
        let sent = Arc::clone(&sent2);
        async move {
            if req.method() == "initialize" {
                Reply::endless(
                    500,
                    "text/plain",
                    "a",
                    Bytes::from("é".repeat(16 * 1024)),
                    Duration::from_millis(1),
                    sent,
                )
            } else {
                standard(&req).unwrap()
            }
        }
    })
    .await;
    let host = Host::new(json!({"e500": entry(&server.url)}));
    assert_eq!(
        error_reason(&host, "e500", Duration::from_secs(10)).await,
        format!("HTTP 500 Internal Server Error: a{}…", "é".repeat(510))
    );
    assert!(
        sent.load(Ordering::SeqCst) < 16 * MIB,
        "the body was not read to its end"
    );
}

/// 20,000 notifications (and responses to other ids) before the answer, in one stream and in a
/// JSON batch: the call gets its answer, quickly.
#[tokio::test]
async fn a_flood_of_notifications_before_the_answer_does_not_starve_the_call() {
    let sse = tool_server(|req| async move {
        let mut text = String::new();
        for i in 0..20_000 {
            let note = if i % 2 == 0 {
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": i, "progress": i}})
            } else {
                text_result(&json!(1_000_000 + i), "not yours")
            };
            text.push_str(&sse_event(&note));
        }
        text.push_str(&sse_event(&text_result(&req.id(), "sse survived")));
        Reply::raw(200, "text/event-stream", text)
    })
    .await;
    let batch = tool_server(|req| async move {
        let mut messages: Vec<Value> = (0..20_000)
            .map(|i| json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": i}}))
            .collect();
        messages.push(text_result(&req.id(), "batch survived"));
        Reply::json(&Value::Array(messages))
    })
    .await;
    let host = ready_pair(("sse", &sse), ("batch", &batch)).await;
    let started = std::time::Instant::now();
    assert_eq!(
        call_t_within(&host, "sse", Duration::from_secs(20)).await,
        Ok("sse survived".into())
    );
    assert_eq!(
        call_t_within(&host, "batch", Duration::from_secs(20)).await,
        Ok("batch survived".into())
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

/// `initialize` never answered twice: each start fails at the 2-minute deadline and is retried
/// 1 s, then 2 s later; the third start is answered and the server becomes ready.
#[tokio::test(start_paused = true)]
async fn handshake_that_never_answers_hits_the_start_deadline_then_backs_off() {
    heartbeat();
    let server = serve(|req| async move {
        if req.method() == "initialize" && req.nth < 2 {
            std::future::pending::<()>().await;
        }
        standard(&req)
            .unwrap_or_else(|| Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)))
    })
    .await;
    let (host, t0) = failed_at_the_start_deadline("mute", &server.url).await;
    host.ready("mute", Duration::from_secs(300)).await;
    // Each start runs 120 s; the waits after them are 1 s and 2 s plus up to as much jitter.
    let at = offsets_ms(&server, "initialize", t0);
    assert_eq!(at.len(), 3, "{at:?}");
    assert_eq!(at[0], 0);
    assert!((121_000..122_000).contains(&at[1]), "{at:?}");
    assert!(
        (at[1] + 122_000..at[1] + 124_000).contains(&at[2]),
        "{at:?}"
    );
}

/// Slow but legal: `initialize` answered after 70 s is inside the 2-minute deadline.
#[tokio::test(start_paused = true)]
async fn handshake_answered_after_70_seconds_succeeds() {
    heartbeat();
    let server = serve(|req| async move {
        if req.method() == "initialize" {
            tokio::time::sleep(Duration::from_secs(70)).await;
        }
        standard(&req)
            .unwrap_or_else(|| Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)))
    })
    .await;
    let t0 = Instant::now();
    let host = Host::new(json!({"slow": entry(&server.url)}));
    host.ready("slow", Duration::from_secs(100)).await;
    assert_eq!((Instant::now() - t0).as_secs(), 70);
    assert_eq!(server.count("initialize"), 1);
}

/// Slow but legal: a tool that takes 4 minutes, sending progress, is inside the 5-minute call
/// deadline.
#[tokio::test(start_paused = true)]
async fn tool_taking_four_minutes_with_progress_succeeds() {
    let (server, _host, got, took) = call_slow_tool(240, "slow").await;
    assert_eq!(got, Ok("finally".into()));
    assert_eq!(took, 240);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(server.count("notifications/cancelled"), 0);
}

/// Progress does not extend the call deadline: a 6-minute tool fails at 5 minutes and the
/// server is told why.
#[tokio::test(start_paused = true)]
async fn tool_taking_six_minutes_hits_the_call_deadline() {
    let (server, _host, got, took) = call_slow_tool(360, "slower").await;
    assert_eq!(
        got,
        transport("server \"slower\" did not answer the tool call within 5 minutes")
    );
    assert_eq!(took, 300);
    assert_call_cancelled(&server, "the client's deadline for the call passed").await;
}

/// Keep-alive comments forever (never an answer) do not keep a start alive past its deadline.
#[tokio::test(start_paused = true)]
async fn keep_alives_forever_do_not_outlive_the_start_deadline() {
    heartbeat();
    let server = list_server(|_req| {
        let pings = stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Some((Ok(Bytes::from_static(b": keep-alive\n\n")), ()))
        });
        Reply::stream(200, "text/event-stream", pings)
    })
    .await;
    failed_at_the_start_deadline("chatty", &server.url).await;
}
