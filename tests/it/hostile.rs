//! Hostile servers: each test stands up a small server of our own (tests/it/support/hostile.rs)
//! that lies, loops, floods, stalls or breaks the connection, and asserts the exact reason or
//! error the Pack shows, and that it never hangs.
//!
//! Tests about the start and call deadlines and the retry backoff run on Tokio's paused clock
//! (`start_paused`): the server and the Pack share one current-thread runtime and talk over
//! real loopback sockets, and the clock jumps only when every task is idle, so a 70-second
//! handshake or a 4-minute tool takes milliseconds and the backoff is measured in exact
//! virtual seconds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::hostile::{
    self, Received, Reply, SESSION, Server, entry, initialize_reply, list_changed_initialize,
    result, rpc_error, serve, serve_routes, server_entry, sse_event, standard, text_result, tool,
    tools_page,
};
use crate::support::{Host, net};
use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};
use tokio::time::Instant;

const MIB: usize = 1024 * 1024;
const CAP_MESSAGE: &str = "the server sent a message larger than the 16 MiB limit";
const START_DEADLINE: &str =
    "the server did not finish starting (initialize and tools/list) within 120 seconds";

// ---------------------------------------------------------------------------------------------
// helpers

/// A server whose `tools/list` answers come from `page`; everything else is [`standard`].
async fn list_server<F>(page: F) -> Server
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

/// A server whose `tools/list` answer is one page of `tools`; everything else is [`standard`].
async fn tools_server(tools: Vec<Value>) -> Server {
    list_server(move |req| Reply::json(&tools_page(&req.id(), tools.clone(), None))).await
}

/// A server with one tool `t` whose `tools/call` answers come from `call`.
async fn tool_server<F, Fut>(call: F) -> Server
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
async fn ready_host(ns: &str, url: &str) -> Host {
    let host = Host::new(json!({ ns: entry(url) }));
    host.ready(ns, Duration::from_secs(20)).await;
    host
}

/// A Host with the servers `a` and `b` (namespace, server), both waited on until ready.
async fn ready_pair(a: (&str, &Server), b: (&str, &Server)) -> Host {
    let host = Host::new(json!({ a.0: entry(&a.1.url), b.0: entry(&b.1.url) }));
    host.ready(a.0, Duration::from_secs(10)).await;
    host.ready(b.0, Duration::from_secs(10)).await;
    host
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

/// A Host with one server `ns` at `url`, waited on (at most `limit`) until it shows `error`; the
/// Host and the reason.
async fn failed_start(ns: &str, url: &str, limit: Duration) -> (Host, String) {
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

/// A start whose `tools/list` pages each list `tools` and hand out the cursor `next(asked)`
/// (`asked`: the cursor the page was asked with) fails with `reason`; its pages were asked with
/// `cursors`.
async fn assert_pagination_fails(
    ns: &str,
    tools: Vec<Value>,
    next: fn(Option<&str>) -> &str,
    reason: &str,
    cursors: &[Value],
) {
    let server = list_server(move |req| {
        let next = next(req.rpc["params"]["cursor"].as_str());
        Reply::json(&tools_page(&req.id(), tools.clone(), Some(next)))
    })
    .await;
    let (_host, got) = failed_start(ns, &server.url, Duration::from_secs(10)).await;
    assert_eq!(got, reason);
    assert_eq!(cursors_asked(&first_start(&server)), cursors);
}

/// Waits until `ns` shows `error`; returns its reason.
async fn error_reason(host: &Host, ns: &str, limit: Duration) -> String {
    host.failed(ns, limit).await["reason"]
        .as_str()
        .expect("an error has a reason")
        .to_string()
}

/// `call_dynamic_tool` of `t` on `ns`, bounded by `limit`.
async fn call_t(host: &Host, ns: &str, limit: Duration) -> Result<String, ToolError> {
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
fn assert_read_to_the_cap(sent: usize) {
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
async fn description(host: &Host, ns: &str, name: &str) -> Value {
    let detail = host
        .listing(json!({"namespace": ns, "toolName": name}))
        .await;
    detail["description"].clone()
}

fn transport(message: &str) -> Result<String, ToolError> {
    Err(ToolError::new(ToolErrorKind::Transport, message))
}

/// The requests of the first start: everything before the second `initialize`.
fn first_start(server: &Server) -> Vec<Received> {
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

fn cursors_asked(requests: &[Received]) -> Vec<Value> {
    requests
        .iter()
        .filter(|r| r.method() == "tools/list")
        .map(|r| r.rpc["params"]["cursor"].clone())
        .collect()
}

/// On a paused clock, Tokio jumps to the next timer whenever every task is idle — also while a
/// loopback packet is still on its way. This heartbeat keeps a timer at most 50 ms ahead at all times,
/// so no jump can skip past a deadline while the peers are merely between two socket reads.
fn heartbeat() {
    tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

/// Arrival times of `method`, in whole milliseconds after `t0`.
fn offsets_ms(server: &Server, method: &str, t0: Instant) -> Vec<u128> {
    server
        .with_method(method)
        .iter()
        .map(|r| (r.at - t0).as_millis())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// pagination

#[tokio::test]
async fn cursor_echoed_on_the_last_page_fails_the_start() {
    assert_pagination_fails(
        "echo",
        vec![tool("a", "A")],
        |asked| match asked {
            None => "page-2",
            Some(asked) => asked, // echo: the "last" page hands back the cursor it was given
        },
        "tools/list page 2 returned the cursor it was asked with, so pagination would never end",
        &[Value::Null, json!("page-2")],
    )
    .await;
}

#[tokio::test]
async fn cursor_cycle_a_b_a_fails_the_start() {
    assert_pagination_fails(
        "cycle",
        vec![],
        |asked| match asked {
            None => "A",
            Some("A") => "B",
            Some(_) => "A",
        },
        "tools/list page 3 returned a cursor already used by an earlier page, so pagination would loop",
        &[Value::Null, json!("A"), json!("B")],
    )
    .await;
}

#[tokio::test]
async fn unique_cursors_with_empty_pages_forever_stop_at_the_page_cap() {
    let server = list_server(|req| {
        let cursor = format!("c{}", req.nth);
        Reply::json(&tools_page(&req.id(), vec![], Some(&cursor)))
    })
    .await;
    let (_host, reason) = failed_start("forever", &server.url, Duration::from_secs(20)).await;
    assert_eq!(
        reason,
        "the server had more than 100 pages of tools (tools/list still returned a nextCursor)"
    );
    let asked = cursors_asked(&first_start(&server));
    assert_eq!(asked.len(), 100, "exactly MAX_PAGES pages are fetched");
    assert_eq!(asked[99], json!("c98"));
}

/// A `nextCursor` of `""` is a cursor like any other and is followed; the page asked for with
/// `""` answering `""` again ends the walk (it lists only the tool already kept, so it adds
/// nothing).
#[tokio::test]
async fn an_empty_cursor_is_followed_and_an_empty_cursor_again_ends_the_listing() {
    let server = list_server(|req| {
        Reply::json(&tools_page(
            &req.id(),
            vec![tool("only", "the one")],
            Some(""),
        ))
    })
    .await;
    let host = ready_host("s", &server.url).await;
    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [{"namespace": "s", "status": "ready", "tools": ["only"]}]})
    );
    assert_eq!(cursors_asked(&server.requests()), [Value::Null, json!("")]);
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

// ---------------------------------------------------------------------------------------------
// tool count, schema size, duplicates, description length

#[tokio::test]
async fn more_than_1000_tools_fail_the_start_and_exactly_1000_are_fine() {
    let many = |per_page: usize, pages: usize| {
        move |req: &Received| {
            let page = match req.rpc["params"]["cursor"].as_str() {
                None => 0,
                Some(c) => c.parse::<usize>().unwrap(),
            };
            let tools = (0..per_page)
                .map(|i| tool(&format!("t{page:02}_{i:04}"), "x"))
                .collect();
            let next = (page + 1 < pages).then(|| (page + 1).to_string());
            Reply::json(&tools_page(&req.id(), tools, next.as_deref()))
        }
    };
    let too_many = list_server(many(300, 4)).await;
    let exactly = list_server(many(250, 4)).await;
    let host = Host::new(json!({"big": entry(&too_many.url), "full": entry(&exactly.url)}));
    assert_eq!(
        error_reason(&host, "big", Duration::from_secs(20)).await,
        "the server listed more than 1000 tools (at least 1200 by page 4)"
    );
    let listing = host.ready("full", Duration::from_secs(20)).await;
    assert_eq!(
        server_entry(&listing, "full")["tools"]
            .as_array()
            .unwrap()
            .len(),
        1000
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

#[tokio::test]
async fn duplicate_tool_names_first_wins_within_and_across_pages() {
    let server = list_server(|req| match req.rpc["params"]["cursor"].as_str() {
        None => Reply::json(&tools_page(
            &req.id(),
            vec![tool("dup", "first"), tool("b", "b1"), tool("dup", "second")],
            Some("p2"),
        )),
        Some(_) => Reply::json(&tools_page(
            &req.id(),
            vec![tool("b", "b2"), tool("dup", "third"), tool("a", "a1")],
            None,
        )),
    })
    .await;
    let host = ready_host("d", &server.url).await;
    let listing = host.listing(json!({"namespace": "d"})).await;
    let names_and_descriptions: Vec<(String, String)> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["description"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        names_and_descriptions,
        [
            ("a".to_string(), "a1".to_string()),
            ("b".to_string(), "b1".to_string()),
            ("dup".to_string(), "first".to_string()),
        ]
    );
}

#[tokio::test]
async fn long_descriptions_are_cut_on_a_char_boundary() {
    let server = tools_server(vec![
        tool("ascii", &"x".repeat(10_000)),
        tool("accents", &"é".repeat(5_000)),
        json!({"name": "titled", "title": "t".repeat(4097)}),
        tool("exact", &"y".repeat(4096)),
    ])
    .await;
    let host = ready_host("long", &server.url).await;
    let described = |name: &str| {
        let host = &host;
        let name = name.to_string();
        async move {
            host.listing(json!({"namespace": "long", "toolName": name}))
                .await["description"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    assert_eq!(described("ascii").await, format!("{}…", "x".repeat(4093)));
    // 4093 would split an 'é': the cut moves back to 4092 bytes = 2046 'é'.
    assert_eq!(described("accents").await, format!("{}…", "é".repeat(2046)));
    assert_eq!(described("titled").await, format!("{}…", "t".repeat(4093)));
    assert_eq!(described("exact").await, "y".repeat(4096));
}

// ---------------------------------------------------------------------------------------------
// byte caps

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
    let host = ready_host("big-stream", &server.url).await;
    assert_eq!(description(&host, "big-stream", "t").await, "after 24 MiB");
}

// ---------------------------------------------------------------------------------------------
// compressed replies

fn gzip(body: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(body).unwrap();
    encoder.finish().unwrap()
}

fn brotli(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::BrotliCompress(
        &mut &body[..],
        &mut out,
        &brotli::enc::BrotliEncoderParams::default(),
    )
    .unwrap();
    out
}

fn zstd(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(zstd_safe::compress_bound(body.len()));
    zstd_safe::compress(&mut out, body, 3).unwrap();
    out
}

/// `body` compressed by `encode`, sent with `Content-Encoding: name`.
fn encoded(content_type: &str, name: &str, encode: fn(&[u8]) -> Vec<u8>, body: &[u8]) -> Reply {
    Reply::raw(200, content_type, encode(body)).header("content-encoding", name)
}

/// Every reply compressed — gzip, br and zstd, JSON and SSE alike — is decoded, and every
/// request offers the three in `Accept-Encoding`.
#[tokio::test]
async fn compressed_json_and_sse_replies_are_decoded() {
    let server = serve(|req| async move {
        let id = req.id();
        match req.method() {
            "initialize" => {
                let body = serde_json::to_vec(&result(
                    &id,
                    json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                               "serverInfo": {"name": "z", "version": "1"}}),
                ))
                .unwrap();
                encoded("application/json", "zstd", zstd, &body).header("mcp-session-id", SESSION)
            }
            "tools/list" => encoded(
                "text/event-stream",
                "gzip",
                gzip,
                sse_event(&tools_page(&id, vec![tool("t", "squeezed")], None)).as_bytes(),
            ),
            "tools/call" => match req.nth {
                0 => encoded(
                    "application/json",
                    "gzip",
                    gzip,
                    &serde_json::to_vec(&text_result(&id, "gzip json")).unwrap(),
                ),
                1 => encoded(
                    "text/event-stream",
                    "br",
                    brotli,
                    sse_event(&text_result(&id, "br sse")).as_bytes(),
                ),
                _ => encoded(
                    "text/event-stream",
                    "zstd",
                    zstd,
                    sse_event(&text_result(&id, &"z".repeat(100_000))).as_bytes(),
                ),
            },
            _ => standard(&req).unwrap_or_else(Reply::accepted),
        }
    })
    .await;
    let host = ready_host("z", &server.url).await;
    assert_eq!(description(&host, "z", "t").await, "squeezed");
    let timeout = Duration::from_secs(10);
    assert_eq!(call_t(&host, "z", timeout).await, Ok("gzip json".into()));
    assert_eq!(call_t(&host, "z", timeout).await, Ok("br sse".into()));
    assert_eq!(call_t(&host, "z", timeout).await, Ok("z".repeat(100_000)));
    let offered: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|r| r.header("accept-encoding"))
        .collect();
    assert!(offered.len() >= 6, "{offered:?}");
    for offer in offered {
        assert_eq!(offer.as_deref(), Some("zstd,gzip,br"));
    }
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
        call_t(&host, "call", Duration::from_secs(60)).await,
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

/// A `Content-Encoding` the client cannot decode is named (scrubbed of the entry's secrets, cut
/// to 64 bytes) instead of read as text. A JSON reply so encoded is an answer the client cannot
/// read (nothing to cancel); an event stream so encoded may belong to a tool still running, so
/// that call is cancelled.
#[tokio::test]
async fn unknown_content_encoding_is_a_clear_error() {
    let body = |id: &Value| serde_json::to_vec(&text_result(id, "never read")).unwrap();
    let server = tool_server(move |req| {
        let case = req.rpc["params"]["arguments"]["case"].as_str();
        let content_type = match case {
            Some("sse") => "text/event-stream",
            _ => "application/json",
        };
        let reply = Reply::raw(200, content_type, body(&req.id()));
        let encoding = match case {
            Some("secret") => "x-Bearer-sup3r-s3cret-value".to_string(),
            Some("long") => format!("x-{}", "y".repeat(200)),
            _ => "compress".to_string(),
        };
        async move { reply.header("content-encoding", &encoding) }
    })
    .await;
    let host = Host::new(json!({"enc": {
        "url": server.url,
        "headers": {"Authorization": "Bearer sup3r-s3cret-value"}
    }}));
    host.ready("enc", Duration::from_secs(20)).await;
    let call = |case: &str| {
        host.call(
            "call_dynamic_tool",
            json!({"namespace": "enc", "toolName": "t", "arguments": {"case": case}}),
        )
    };
    let refused = |shown: &str| {
        transport(&format!(
            "server \"enc\": the server answered with Content-Encoding \"{shown}\", which this client cannot decode (it accepts gzip, br and zstd)"
        ))
    };
    assert_eq!(call("plain").await, refused("compress"));
    assert_eq!(call("secret").await, refused("x-Bearer-[redacted]"));
    assert_eq!(
        call("long").await,
        refused(&format!("x-{}…", "y".repeat(64 - 2 - '…'.len_utf8())))
    );
    assert_eq!(server.count("notifications/cancelled"), 0);
    assert_eq!(call("sse").await, refused("compress"));
    let sse = server.first(|r| r.rpc["params"]["arguments"]["case"] == "sse");
    assert_eq!(
        server.cancellations().await,
        [json!({"requestId": sse.id(), "reason": "the client lost the reply stream"})]
    );
}

// ---------------------------------------------------------------------------------------------
// lies: bodies that are not what they claim

/// A server whose `initialize` answer is `reply(id)`.
async fn initialize_server(reply: fn(&Value) -> Reply) -> Server {
    serve(move |req| {
        let answer = if req.method() == "initialize" {
            reply(&req.id())
        } else {
            standard(&req).unwrap_or_else(|| Reply::json(&tools_page(&req.id(), vec![], None)))
        };
        async move { answer }
    })
    .await
}

/// Builds a server's answer to a request id.
type Answer = fn(&Value) -> Reply;

#[tokio::test]
async fn lying_initialize_answers_each_give_an_exact_reason() {
    let cases: Vec<(&str, Answer, &str)> = vec![
        (
            "invalid-json",
            |_| Reply::raw(200, "application/json", "{\"jsonrpc\":\"2.0\",\"id\":1,"),
            "the server sent a message that is not JSON-RPC",
        ),
        (
            "number",
            |_| Reply::raw(200, "application/json", "42"),
            "the server sent a message that is not JSON-RPC",
        ),
        (
            "not-jsonrpc",
            |_| Reply::raw(200, "application/json", r#"{"hello":"world"}"#),
            "the server's JSON reply held no response to request {initialize}",
        ),
        (
            "wrong-id",
            |_| {
                Reply::json(&result(
                    &json!(999),
                    json!({"protocolVersion": "2025-06-18"}),
                ))
            },
            "the server's JSON reply held no response to request {initialize}",
        ),
        (
            "wrong-id-sse",
            |id| {
                let other = json!(id.as_u64().unwrap() + 1);
                Reply::sse(&[result(&other, json!({"protocolVersion": "2025-06-18"}))])
            },
            "the server closed the event stream before the response to request {initialize}",
        ),
        (
            "no-version",
            |id| Reply::json(&result(id, json!({"capabilities": {}}))),
            "the server's initialize result has no protocolVersion",
        ),
        (
            "future-version",
            |id| Reply::json(&result(id, json!({"protocolVersion": "2099-01-01\n"}))),
            "the server chose MCP protocol version \"2099-01-01 \", which this client does not support (it supports 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)",
        ),
        (
            "html",
            |_| Reply::raw(200, "text/html; charset=utf-8", "<html>hello</html>"),
            "the server answered with Content-Type \"text/html; charset=utf-8\", not application/json or text/event-stream; nothing serves MCP at this URL: check the path in \"url\" (many servers serve MCP at /mcp)",
        ),
        (
            "no-content-type",
            |_| Reply::raw(200, "x", "{}").without_headers(),
            "the server answered without a Content-Type (HTTP 2xx with no JSON-RPC response); nothing serves MCP at this URL: check the path in \"url\" (many servers serve MCP at /mcp)",
        ),
        (
            "rpc-error",
            |id| Reply::json(&rpc_error(id, -32600, "no\tthanks")),
            "the server answered with error -32600: no thanks",
        ),
        (
            "bad-session",
            |id| initialize_reply(id).header("mcp-session-id", "two words"),
            "the server's Mcp-Session-Id is not 1 to 1024 visible ASCII characters",
        ),
        (
            "not-utf8",
            |_| {
                Reply::raw(
                    200,
                    "application/json",
                    &b"{\"id\":1,\"result\":\"\xff\"}"[..],
                )
            },
            "the server's JSON reply is not UTF-8",
        ),
        (
            "sse-not-utf8",
            |_| Reply::raw(200, "text/event-stream", &b"data: \xff\xfe\n\n"[..]),
            "the server's event stream is not UTF-8",
        ),
    ];
    let mut servers = Vec::new();
    let mut config = serde_json::Map::new();
    for (name, reply, _) in &cases {
        let server = initialize_server(*reply).await;
        config.insert(name.to_string(), entry(&server.url));
        servers.push(server);
    }
    let host = Host::new(Value::Object(config));
    let listing = host.settled(Duration::from_secs(20)).await;
    for ((name, _, expected), server) in cases.iter().zip(&servers) {
        // `{initialize}`: the id of the initialize that server was sent.
        let initialize = server.first(|r| r.method() == "initialize").id();
        let expected = expected.replace("{initialize}", &initialize.to_string());
        let server = server_entry(&listing, name);
        assert_eq!(
            (server["status"].as_str(), server["reason"].as_str()),
            (Some("error"), Some(expected.as_str())),
            "server {name}"
        );
    }
}

#[tokio::test]
async fn a_malformed_tools_list_fails_the_start_and_a_nameless_tool_is_omitted() {
    let server = list_server(|req| Reply::json(&result(&req.id(), json!({"tools": "none"})))).await;
    let nameless = list_server(|req| {
        Reply::json(&tools_page(
            &req.id(),
            vec![tool("ok", "x"), json!({"name": ""})],
            None,
        ))
    })
    .await;
    let host = Host::new(json!({"shape": entry(&server.url), "nameless": entry(&nameless.url)}));
    assert_eq!(
        error_reason(&host, "shape", Duration::from_secs(10)).await,
        "tools/list page 1 is not a valid ListToolsResult"
    );
    host.ready("nameless", Duration::from_secs(10)).await;
    assert_eq!(
        host.listing(json!({"namespace": "nameless"})).await,
        json!({"namespace": "nameless", "status": "ready", "protocolVersion": "2025-06-18",
            "tools": [{"name": "ok", "description": "x", "inputSchema": {"type": "object"}}],
            "omitted": [{"name": "tool 2 of tools/list page 1", "reason": "its name is 0 bytes (allowed: 1 to 256)"}]})
    );
}

/// Each tool that is malformed or over a per-tool bound is left out and shown under `omitted`
/// (by name when it has a readable one, else by position); the rest stay listed and callable.
#[tokio::test]
async fn malformed_tools_are_omitted_and_the_rest_stay_ready() {
    let server = list_server(|req| match req.rpc["params"]["cursor"].as_str() {
        None => Reply::json(&tools_page(
            &req.id(),
            vec![
                tool("search", "Searches"),
                json!({"name": "fetch_page", "description": {"en": "Fetches a page"}}),
                json!({"name": 42}),
                json!("not a tool"),
                json!({"description": "no name"}),
                json!({"name": "x".repeat(257)}),
                json!({"name": "titled", "title": ["a"]}),
                json!({"name": "schema_text", "inputSchema": "object"}),
                json!({"name": "output_list", "inputSchema": {"type": "object"}, "outputSchema": []}),
                json!({"name": "notes", "annotations": 3}),
                json!({"name": "nulls", "description": null, "title": null, "outputSchema": null}),
                tool("search", "a second search"),
            ],
            Some("p2"),
        )),
        Some(_) => Reply::json(&tools_page(
            &req.id(),
            vec![
                json!({"name": "huge", "inputSchema": {"type": "object", "description": "y".repeat(300 * 1024)}}),
                tool("zeta", "last"),
            ],
            None,
        )),
    })
    .await;
    let host = ready_host("m", &server.url).await;
    assert_eq!(
        server_entry(&host.listing(json!({})).await, "m")["tools"],
        json!(["nulls", "search", "zeta"])
    );
    let detail = host.listing(json!({"namespace": "m"})).await;
    assert_eq!(
        detail["omitted"],
        json!([
            {"name": "fetch_page", "reason": "\"description\" must be a string, found an object"},
            {"name": "tool 3 of tools/list page 1", "reason": "\"name\" must be a string, found a number"},
            {"name": "tool 4 of tools/list page 1", "reason": "it is a string, not a tool object"},
            {"name": "tool 5 of tools/list page 1", "reason": "it has no \"name\""},
            {"name": "tool 6 of tools/list page 1", "reason": "its name is 257 bytes (allowed: 1 to 256)"},
            {"name": "titled", "reason": "\"title\" must be a string, found an array"},
            {"name": "schema_text", "reason": "\"inputSchema\" must be an object, found a string"},
            {"name": "output_list", "reason": "\"outputSchema\" must be an object, found an array"},
            {"name": "notes", "reason": "\"annotations\" must be an object, found a number"},
            {"name": "search", "reason": "another tool of the same name was listed first"},
            {"name": "huge", "reason": "its schemas are 307234 bytes (limit 262144)"},
        ])
    );
    assert_eq!(detail["tools"][0]["description"], "nulls");
    assert_eq!(detail["tools"][1]["description"], "Searches");
    let one = host
        .listing(json!({"namespace": "m", "toolName": "nulls"}))
        .await;
    assert_eq!(
        one,
        json!({"namespace": "m", "name": "nulls", "description": "nulls", "inputSchema": {"type": "object"}})
    );
}

#[tokio::test]
async fn call_results_with_a_wrong_shape_type_or_id_are_errors() {
    let names = [
        "shape",
        "textless",
        "html",
        "wrong-id",
        "huge-error",
        "empty-error",
    ];
    let server = hostile::serve_tools(names.iter().map(|n| tool(n, n)).collect(), |req| {
        let id = req.id();
        match req.rpc["params"]["name"].as_str().unwrap() {
            "shape" => Reply::json(&result(&id, json!({"content": "text"}))),
            "textless" => Reply::json(&result(&id, json!({"content": [{"type": "text"}]}))),
            "html" => Reply::raw(200, "text/html", "<p>hi</p>"),
            "wrong-id" => Reply::json(&text_result(&json!(12345), "for someone else")),
            "huge-error" => Reply::json(&rpc_error(
                &id,
                -32000,
                &format!("line1\nline2{}", "z".repeat(5000)),
            )),
            _ => Reply::json(&rpc_error(&id, -32001, "")),
        }
    })
    .await;
    let host = ready_host("liar", &server.url).await;
    let call = |name: &'static str| {
        let host = &host;
        async move {
            tokio::time::timeout(
                Duration::from_secs(10),
                host.call(
                    "call_dynamic_tool",
                    json!({"namespace": "liar", "toolName": name}),
                ),
            )
            .await
            .unwrap()
        }
    };
    assert_eq!(
        call("shape").await,
        transport("server \"liar\": the server's tools/call result is not a valid CallToolResult")
    );
    assert_eq!(
        call("textless").await,
        transport("server \"liar\": the server sent a text block without text")
    );
    assert_eq!(
        call("html").await,
        transport(
            "server \"liar\": the server answered with Content-Type \"text/html\", not application/json or text/event-stream"
        )
    );
    assert_eq!(
        call("wrong-id").await,
        transport(&format!(
            "server \"liar\": the server's JSON reply held no response to request {}",
            server.first(|r| r.rpc["params"]["name"] == "wrong-id").id()
        ))
    );
    assert_eq!(
        call("huge-error").await,
        Err(ToolError::new(
            ToolErrorKind::Backend,
            format!("line1 line2{}…", "z".repeat(1024 - 3 - 11))
        ))
    );
    assert_eq!(
        call("empty-error").await,
        Err(ToolError::new(
            ToolErrorKind::Backend,
            "server \"liar\" answered with JSON-RPC error -32001"
        ))
    );
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

// ---------------------------------------------------------------------------------------------
// redirects

#[tokio::test]
async fn redirects_are_refused_and_the_target_receives_nothing() {
    let elsewhere = serve(|req| async move {
        standard(&req).unwrap_or_else(|| Reply::json(&tools_page(&req.id(), vec![], None)))
    })
    .await;
    let target = elsewhere.url.clone();
    let on_init = serve(move |_req| {
        let target = target.clone();
        async move { Reply::raw(307, "text/plain", "").header("location", &target) }
    })
    .await;
    let target = elsewhere.url.clone();
    let on_call = tool_server(move |_req| {
        let target = target.clone();
        async move { Reply::raw(302, "text/plain", "").header("location", &target) }
    })
    .await;
    let headers = json!({"Authorization": "Bearer do-not-forward-me"});
    let host = Host::new(json!({
        "init": {"url": on_init.url, "headers": headers},
        "call": {"url": on_call.url, "headers": headers},
    }));
    assert_eq!(
        error_reason(&host, "init", Duration::from_secs(10)).await,
        format!(
            "the server answered with a redirect (HTTP 307) to \"{}\", which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\"",
            elsewhere.url
        )
    );
    host.ready("call", Duration::from_secs(10)).await;
    assert_eq!(
        call_t(&host, "call", Duration::from_secs(10)).await,
        transport(&format!(
            "server \"call\": the server answered with a redirect (HTTP 302) to \"{}\", which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\"",
            elsewhere.url
        ))
    );
    // Let a retry of "init" happen too, then check the redirect target saw nothing at all.
    on_init
        .wait_until(Duration::from_secs(5), "a second initialize", |r| {
            r.len() >= 2
        })
        .await;
    assert_eq!(elsewhere.requests().len(), 0);
}

/// FastMCP's `/mcp` → `/mcp/` answer: a relative `Location` is named as the full URL to put in
/// the config; one that quotes a configured secret is scrubbed and shown without its query, one
/// without a `Location` says only that it was refused, and a long one is cut.
#[tokio::test]
async fn a_redirect_names_its_target_scrubbed_and_bounded() {
    let server = serve(|req| async move {
        let key = req.header("x-api-key").unwrap_or_default();
        match req.target.as_str() {
            "/mcp" => Reply::raw(307, "text/plain", "").header("location", "/mcp/"),
            "/echo" => Reply::raw(308, "text/plain", "").header(
                "location",
                &format!("https://login.example/{key}/cb?key={key}"),
            ),
            "/long" => Reply::raw(301, "text/plain", "")
                .header("location", &format!("/{}", "l".repeat(600))),
            _ => Reply::raw(302, "text/plain", ""),
        }
    })
    .await;
    let base = format!("http://127.0.0.1:{}", server.port);
    let host = Host::new(json!({
        "slash": entry(&format!("{base}/mcp")),
        "echo": {"url": format!("{base}/echo"), "headers": {"X-Api-Key": "sk-live-4f9a8b7c6d5e"}},
        "long": entry(&format!("{base}/long")),
        "bare": entry(&format!("{base}/bare")),
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    let advice = "which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\"";
    assert_eq!(
        server_entry(&listing, "slash")["reason"],
        format!("the server answered with a redirect (HTTP 307) to \"{base}/mcp/\", {advice}")
    );
    assert_eq!(
        server_entry(&listing, "echo")["reason"],
        format!(
            "the server answered with a redirect (HTTP 308) to \"https://login.example/[redacted]/cb\" (query omitted), {advice}"
        )
    );
    // The target is cut to 512 bytes: the base, "/" and as many l as fit before "…".
    let kept = 512 - "…".len() - base.len() - 1;
    assert_eq!(
        server_entry(&listing, "long")["reason"],
        format!(
            "the server answered with a redirect (HTTP 301) to \"{base}/{}…\", {advice}",
            "l".repeat(kept)
        )
    );
    assert_eq!(
        server_entry(&listing, "bare")["reason"],
        "the server answered with a redirect (HTTP 302), which this client refuses to follow so that the configured headers reach no other server"
    );
}

// ---------------------------------------------------------------------------------------------
// servers as public bug reports describe them

/// An error response with `"id": null` (the server could not read the request) answers the one
/// request of its POST: in a JSON reply, on an SSE stream that then stays open, and for
/// `initialize`.
#[tokio::test]
async fn an_error_with_a_null_id_answers_the_request() {
    let parse_error = |_: &Value| json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}});
    let calls = tool_server(move |req| async move {
        match req.rpc["params"]["arguments"]["how"].as_str() {
            Some("sse") => Reply::stream(
                200,
                "text/event-stream",
                stream::once(async move { Ok(Bytes::from(sse_event(&parse_error(&req.id())))) })
                    .chain(stream::pending()),
            ),
            _ => Reply::json(&parse_error(&req.id())),
        }
    })
    .await;
    let init = hostile::serve_initialize(|_| {
        Reply::json(
            &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "Invalid Request"}}),
        )
    })
    .await;
    let host = Host::new(json!({"calls": entry(&calls.url), "init": entry(&init.url)}));
    host.ready("calls", Duration::from_secs(10)).await;
    for how in ["json", "sse"] {
        let outcome = tokio::time::timeout(
            Duration::from_secs(10),
            host.call(
                "call_dynamic_tool",
                json!({"namespace": "calls", "toolName": "t", "arguments": {"how": how}}),
            ),
        )
        .await
        .expect("answered at once, not at the call deadline");
        assert_eq!(
            outcome,
            Err(ToolError::new(ToolErrorKind::Backend, "Parse error")),
            "{how}"
        );
    }
    assert_eq!(
        error_reason(&host, "init", Duration::from_secs(10)).await,
        "the server answered with error -32600: Invalid Request"
    );
}

/// A server whose `initialize` declares only prompts and resources, with `tools/list` answered
/// by `list`.
async fn undeclared_server<F>(list: F) -> Server
where
    F: Fn(&Received) -> Reply + Send + Sync + 'static,
{
    serve(move |req| {
        let reply = match req.method() {
            "initialize" => Reply::json(&result(
                &req.id(),
                json!({"protocolVersion": "2025-06-18", "capabilities": {"prompts": {}, "resources": {}},
                    "serverInfo": {"name": "p", "version": "1"}}),
            )),
            "tools/list" => list(&req),
            _ => standard(&req)
                .unwrap_or_else(|| Reply::json(&rpc_error(&req.id(), -32601, "Method not found"))),
        };
        async move { reply }
    })
    .await
}

/// A server that declares no `tools` capability is still asked for `tools/list` once: a
/// JSON-RPC error of any code means it is ready with no tools, and an answer lists its tools. A
/// server that declared `tools` and answers -32601 is ready with no tools too. None is asked
/// again or initialized again.
#[tokio::test]
async fn servers_without_tools_are_ready_with_none() {
    let prompts_only =
        undeclared_server(|req| Reply::json(&rpc_error(&req.id(), -32601, "Method not found")))
            .await;
    let internal =
        undeclared_server(|req| Reply::json(&rpc_error(&req.id(), -32603, "no tools here"))).await;
    let undeclared_tools = undeclared_server(|req| {
        Reply::json(&tools_page(
            &req.id(),
            vec![tool("search", "Searches.")],
            None,
        ))
    })
    .await;
    let not_found =
        list_server(|req| Reply::json(&rpc_error(&req.id(), -32601, "Method not found"))).await;
    let host = Host::new(json!({
        "prompts": entry(&prompts_only.url),
        "internal": entry(&internal.url),
        "tools": entry(&undeclared_tools.url),
        "nf": entry(&not_found.url)
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    assert_eq!(
        listing,
        json!({"servers": [
            {"namespace": "internal", "status": "ready", "tools": []},
            {"namespace": "nf", "status": "ready", "tools": []},
            {"namespace": "prompts", "status": "ready", "tools": []},
            {"namespace": "tools", "status": "ready", "tools": ["search"]}]})
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let servers = [&prompts_only, &internal, &undeclared_tools, &not_found];
    assert_eq!(
        servers.map(|s| (s.count("initialize"), s.count("tools/list"))),
        [(1, 1); 4]
    );
}

/// A server that declared `tools` and answers `tools/list` with an error other than -32601
/// fails its start, with the server's error as the reason.
#[tokio::test]
async fn a_declared_tools_server_whose_tools_list_fails_is_an_error() {
    let server =
        list_server(|req| Reply::json(&rpc_error(&req.id(), -32603, "database down"))).await;
    let (_host, reason) = failed_start("strict", &server.url, Duration::from_secs(10)).await;
    assert_eq!(
        reason,
        "the server answered with error -32603: database down"
    );
}

/// `content: []` without `structuredContent` answers a placeholder, not an empty string; with
/// `isError` it is the usual error without a message.
#[tokio::test]
async fn an_empty_result_answers_a_placeholder() {
    let server = tool_server(|req| async move {
        let is_error = req.rpc["params"]["arguments"]["error"] == true;
        Reply::json(&result(
            &req.id(),
            json!({"content": [], "isError": is_error}),
        ))
    })
    .await;
    let host = ready_host("empty", &server.url).await;
    assert_eq!(
        call_t(&host, "empty", Duration::from_secs(10)).await,
        Ok("[the tool returned no content]".to_string())
    );
    assert_eq!(
        host.call(
            "call_dynamic_tool",
            json!({"namespace": "empty", "toolName": "t", "arguments": {"error": true}}),
        )
        .await,
        Err(ToolError::new(
            ToolErrorKind::Backend,
            "the tool reported an error without a message"
        ))
    );
}

/// Disabled entries never touch the network (the server sees nothing, not even after the other
/// entry is ready and a retry would have come); an entry with only `serverUrl` names the key.
#[tokio::test]
async fn disabled_and_other_clients_entries_do_no_io() {
    let server = list_server(|req| Reply::json(&tools_page(&req.id(), vec![], None))).await;
    let host = Host::new(json!({
        "off": {"url": server.url, "headers": {"Authorization": "Bearer sk-live-4f9a8b7c6d5e"}, "disabled": true},
        "not-enabled": {"url": server.url, "enabled": false},
        "windsurf": {"serverUrl": server.url},
    }));
    let listing = host.listing(json!({})).await;
    assert_eq!(
        listing,
        json!({"servers": [
            {"namespace": "not-enabled", "status": "error", "reason": "the entry is disabled in the config (\"enabled\": false), so this Pack does not connect to it", "tools": []},
            {"namespace": "off", "status": "error", "reason": "the entry is disabled in the config (\"disabled\": true), so this Pack does not connect to it", "tools": []},
            {"namespace": "windsurf", "status": "error", "reason": "the entry has \"serverUrl\" (Windsurf's key) but no \"url\"; this Pack reads the server's address from \"url\", so rename \"serverUrl\" to \"url\"", "tools": []}]})
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(host.listing(json!({})).await, listing);
    assert_eq!(server.requests().len(), 0);
}

// ---------------------------------------------------------------------------------------------
// streams

/// `first`, then (after the headers and `first` went out) the connection is cut mid-body.
fn cut_after(
    first: &'static [u8],
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let cut = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "cut",
        ))
    };
    stream::iter([Ok(Bytes::from_static(first))]).chain(stream::once(cut))
}

/// The call's event stream breaks mid-event (no event id, so nothing to resume): a transport
/// error at once, and the server is told to drop the request.
#[tokio::test]
async fn call_stream_reset_mid_response_is_a_transport_error_at_once() {
    let server = tool_server(|_req| async move {
        Reply::stream(
            200,
            "text/event-stream",
            cut_after(b"event: message\ndata: {\"jsonrpc\":\"2.0\","),
        )
    })
    .await;
    let json_cut = tool_server(|_req| async move {
        Reply::stream(200, "application/json", cut_after(b"{\"jsonrpc\":\"2.0\","))
    })
    .await;
    let host = ready_pair(("reset", &server), ("jsoncut", &json_cut)).await;
    let started = std::time::Instant::now();
    let got = call_t(&host, "reset", Duration::from_secs(10)).await;
    let call = server.with_method("tools/call")[0].id();
    assert_eq!(
        got,
        transport(&format!(
            "server \"reset\": the server's event stream broke before the response to request {call}: the connection was cut"
        ))
    );
    assert_eq!(
        call_t(&host, "jsoncut", Duration::from_secs(10)).await,
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
        let call = s.with_method("tools/call")[0].id();
        assert_eq!(
            s.cancellations().await,
            [json!({"requestId": call, "reason": "the client lost the reply stream"})]
        );
    }
}

/// Event streams framed the unusual ways the SSE rules allow — a BOM, lone CRs, the answer's
/// JSON split over data lines, comments between them, every byte its own chunk — reach the
/// answer; an event whose data is not UTF-8 is refused, not patched with U+FFFD.
#[tokio::test]
async fn unusual_but_valid_sse_framing_reaches_the_answer() {
    let server = tool_server(|req| async move {
        let answer = serde_json::to_string(&text_result(&req.id(), "framed")).unwrap();
        // Split between two members: the LF that joins data lines is JSON whitespace there.
        let (head, tail) = answer.split_at(answer.find(',').unwrap() + 1);
        match req.rpc["params"]["arguments"]["case"].as_str() {
            Some("cr") => Reply::raw(
                200,
                "text/event-stream",
                format!("\u{feff}: hello\rid: 1\r\rdata:{head}\r: between\rdata:{tail}\r\r"),
            ),
            Some("bytes") => {
                let text = format!("event:message\r\ndata: {head}\r\ndata: {tail}\r\n\r\n");
                let chunks: Vec<Result<Bytes, std::io::Error>> = text
                    .into_bytes()
                    .into_iter()
                    .map(|b| Ok(Bytes::from(vec![b])))
                    .collect();
                Reply::stream(200, "text/event-stream", stream::iter(chunks))
            }
            _ => Reply::raw(
                200,
                "text/event-stream",
                [b"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":\"\xFF\"}\n\n".as_slice()]
                    .concat(),
            ),
        }
    })
    .await;
    let host = ready_host("sse", &server.url).await;
    let call = |case: &str| {
        host.call(
            "call_dynamic_tool",
            json!({"namespace": "sse", "toolName": "t", "arguments": {"case": case}}),
        )
    };
    assert_eq!(call("cr").await, Ok("framed".into()));
    assert_eq!(call("bytes").await, Ok("framed".into()));
    assert_eq!(
        call("bad utf-8").await,
        transport("server \"sse\": the server's event stream is not UTF-8")
    );
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
    let host = ready_host("resume", &server.url).await;
    let got = call_t(&host, "resume", Duration::from_secs(60)).await;
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
    let host = ready_host("poll", &server.url).await;
    assert_eq!(
        call_t(&host, "poll", Duration::from_secs(60)).await,
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
    let host = ready_host("r", &server.url).await;
    assert_eq!(
        call_t(&host, "r", Duration::from_secs(100)).await,
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
    let host = ready_host("asks", &server.url).await;
    assert_eq!(
        call_t(&host, "asks", Duration::from_secs(10)).await,
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
        call_t(&host, "sse", Duration::from_secs(20)).await,
        Ok("sse survived".into())
    );
    assert_eq!(
        call_t(&host, "batch", Duration::from_secs(20)).await,
        Ok("batch survived".into())
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// deadlines and backoff (paused clock)

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

/// Nothing listens at first; the server comes up at 5 s. Starts at 0, 1 and 3 s fail with a
/// connection error, the one at 7 s succeeds — without a new Host.
#[tokio::test(start_paused = true)]
async fn server_down_at_start_becomes_ready_after_three_failed_attempts() {
    heartbeat();
    let port = net::free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let t0 = Instant::now();
    let host = Host::new(json!({"late": entry(&url)}));
    let reason = error_reason(&host, "late", Duration::from_secs(1)).await;
    assert_eq!(
        reason,
        format!("connection refused by http://127.0.0.1:{port} (no server is listening there)")
    );
    tokio::time::sleep_until(t0 + Duration::from_secs(5)).await;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let server = hostile::serve_on(listener, |req| async move {
        standard(&req)
            .unwrap_or_else(|| Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)))
    });
    let listing = host.ready("late", Duration::from_secs(30)).await;
    assert_eq!(server_entry(&listing, "late")["tools"], json!(["t"]));
    // Starts at 0, then after 1–2 s, 2–4 s and 4–8 s (backoff with jitter): the first one
    // after 5 s reaches the server, and it is the only one that does.
    let at = offsets_ms(&server, "initialize", t0);
    assert_eq!(at.len(), 1, "{at:?}");
    assert!((5_000..14_000).contains(&at[0]), "{at:?}");
}

/// A server that answers `initialize` with `status` and, when given, `Retry-After: retry_after`.
async fn throttled(status: u16, retry_after: Option<&'static str>) -> Server {
    hostile::serve_initialize(move |_| {
        let reply = Reply::raw(status, "text/plain", "");
        match retry_after {
            Some(wait) => reply.header("retry-after", wait),
            None => reply,
        }
    })
    .await
}

/// A 429 or 503 with `Retry-After` during a start: the next start comes exactly that long
/// after (at least 1 s, so `0` never makes a tight loop; at most 60 s), instead of the next
/// backoff step, and the listing says when in `retryInSeconds`. Without the header the waits
/// are the backoff's: 1, 2, 4, 8 s, each plus up to as much jitter.
#[tokio::test(start_paused = true)]
async fn throttled_starts_wait_what_retry_after_says() {
    heartbeat();
    let zero = throttled(429, Some("0")).await;
    let eight = throttled(503, Some("8")).await;
    let hour = throttled(429, Some("3600")).await;
    let date = throttled(503, Some("Sun, 06 Nov 1994 08:49:37 GMT")).await;
    let plain = throttled(503, None).await;
    let t0 = Instant::now();
    let host = Host::new(json!({
        "zero": entry(&zero.url), "eight": entry(&eight.url), "hour": entry(&hour.url),
        "date": entry(&date.url), "plain": entry(&plain.url),
    }));
    let listing = host.settled(Duration::from_secs(1)).await;
    let shown = |ns: &str| {
        let s = server_entry(&listing, ns);
        (s["reason"].clone(), s["retryInSeconds"].clone())
    };
    for (ns, reason, retry) in [
        ("zero", "HTTP 429 Too Many Requests", 1),
        ("eight", "HTTP 503 Service Unavailable", 8),
        ("hour", "HTTP 429 Too Many Requests", 60),
        ("date", "HTTP 503 Service Unavailable", 1),
    ] {
        assert_eq!(shown(ns), (json!(reason), json!(retry)), "{ns}");
    }
    let eight_detail = host.listing(json!({"namespace": "eight"})).await;
    assert_eq!(
        eight_detail,
        json!({"namespace": "eight", "status": "error", "reason": "HTTP 503 Service Unavailable",
            "retryInSeconds": 8, "tools": []})
    );
    assert_eq!(
        host.call_tool("eight", "t").await,
        Err(ToolError::new(
            ToolErrorKind::Unavailable,
            "server \"eight\" is unavailable: HTTP 503 Service Unavailable; it will be started again in 8 seconds"
        ))
    );
    assert_eq!(
        host.call_tool("zero", "t").await,
        Err(ToolError::new(
            ToolErrorKind::Unavailable,
            "server \"zero\" is unavailable: HTTP 429 Too Many Requests; it will be started again in 1 second"
        ))
    );
    let plain_retry = shown("plain").1.as_u64().unwrap();
    assert!((1..=2).contains(&plain_retry), "{plain_retry}");
    tokio::time::sleep_until(t0 + Duration::from_millis(30_500)).await;
    assert_eq!(
        offsets_ms(&zero, "initialize", t0),
        (0..=30).map(|s| s * 1_000).collect::<Vec<_>>()
    );
    assert_eq!(
        offsets_ms(&eight, "initialize", t0),
        [0, 8_000, 16_000, 24_000]
    );
    assert_eq!(offsets_ms(&hour, "initialize", t0), [0]);
    assert_eq!(
        offsets_ms(&date, "initialize", t0)[..4],
        [0, 1_000, 2_000, 3_000]
    );
    let at = offsets_ms(&plain, "initialize", t0);
    let gaps: Vec<u128> = at.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.len() >= 3, "{at:?}");
    for (gap, base) in gaps.iter().zip([1_000, 2_000, 4_000, 8_000]) {
        assert!((base..2 * base).contains(gap), "{at:?}");
    }
    // A minute later, the hour-long Retry-After has been cut to the 60 s cap.
    tokio::time::sleep_until(t0 + Duration::from_millis(60_500)).await;
    assert_eq!(offsets_ms(&hour, "initialize", t0), [0, 60_000]);
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
    let host = ready_host(ns, &server.url).await;
    let t0 = Instant::now();
    let got = call_t(&host, ns, Duration::from_secs(400)).await;
    (server, host, got, (Instant::now() - t0).as_secs())
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
    let call = server.with_method("tools/call")[0].id();
    assert_eq!(
        server.cancellations().await,
        [json!({"requestId": call, "reason": "the client's deadline for the call passed"})]
    );
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

// ---------------------------------------------------------------------------------------------
// the standalone GET stream

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
    let host = ready_host("flood", &server.url).await;
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
    let _host = ready_host("long", &server.url).await;
    let gaps = get_gaps(&server, Duration::from_secs(200), "four GETs", 4).await;
    // 1 s, 2 s, then the 61 s stream and 1 s again (not 4 s).
    assert_eq!(gaps, [1000, 2000, 62_000]);
}

// ---------------------------------------------------------------------------------------------
// Re-listing interleavings

/// A server that forgets every session at once on `tools/list` after the start (a load balancer
/// without sticky sessions does this): the re-listing's 404 initializes again, and that renewal
/// must not ask for yet another re-listing forever. After one `list_changed`, the Pack should
/// initialize again once (the re-listing's own renewal) and then stop; it should not flood the
/// server with `initialize` + `tools/list` in a tight loop.
#[tokio::test]
async fn a_relisting_that_keeps_meeting_404_does_not_loop() {
    let server = serve_routes(|req| async move {
        Some(match req.method() {
            "tools/list" if req.nth == 0 => {
                Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
            }
            "tools/list" => Reply::raw(404, "text/plain", "no such session"),
            "tools/call" => Reply::sse(&[
                json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
                text_result(&req.id(), "done"),
            ]),
            _ => return None,
        })
    })
    .await;
    let host = ready_host("lb", &server.url).await;
    assert_eq!(
        call_t(&host, "lb", Duration::from_secs(10)).await,
        Ok("done".to_string())
    );
    // Let the re-listing (and whatever it sets off) run.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The start's initialize, and the one the re-listing's 404 caused.
    assert_eq!(server.count("initialize"), 2);
    let listing = host.listing(json!({"namespace": "lb"})).await;
    assert_eq!(listing["status"], "ready");
    assert_eq!(listing["tools"][0]["name"], "t");
}

/// Two lookups of a tool the server added silently, the second made while the first one's
/// re-listing is still running: the second should see the tool that re-listing brings (it
/// causes no extra re-listing by waiting for the running one), not `not_found`.
#[tokio::test]
async fn a_miss_racing_a_miss_relisting_sees_the_new_tool() {
    let server = serve_routes(|req| async move {
        if req.method() != "tools/list" {
            return None;
        }
        let mut tools = vec![tool("t", "t")];
        if req.nth > 0 {
            // The re-listing is slow: the second lookup lands while it runs.
            tokio::time::sleep(Duration::from_millis(500)).await;
            tools.push(tool("u", "u"));
        }
        Some(Reply::json(&tools_page(&req.id(), tools, None)))
    })
    .await;
    let host = ready_host("slow", &server.url).await;
    let ask = || {
        host.call(
            "get_dynamic_tools",
            json!({"namespace": "slow", "toolName": "u"}),
        )
    };
    let first = ask();
    let second = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        ask().await
    };
    let (first, second) = tokio::join!(first, second);
    let expected = json!({"namespace": "slow", "name": "u", "description": "u",
                          "inputSchema": {"type": "object"}})
    .to_string();
    assert_eq!(first.as_deref(), Ok(expected.as_str()));
    assert_eq!(second.as_deref(), Ok(expected.as_str()));
    assert_eq!(server.count("tools/list"), 2);
}

/// `instructions` and `capabilities.tools.listChanged` are optional extras of the initialize
/// result: a server that sends one in a shape this client does not expect (here `instructions`
/// as an array and `tools` as `true`) still starts, as it did before the client read them, just
/// without instructions and without the standalone stream. The start must not fail, least of all
/// with a reason saying the result has no `protocolVersion` when it has one.
#[tokio::test]
async fn odd_optional_initialize_fields_do_not_fail_the_start() {
    let server = serve_routes(|req| async move {
        let id = req.id();
        Some(match req.method() {
            "initialize" => Reply::json(&result(
                &id,
                json!({"protocolVersion": "2025-06-18",
                       "capabilities": {"tools": true},
                       "instructions": ["use search first"],
                       "serverInfo": {"name": "hostile", "version": "0"}}),
            ))
            .header("mcp-session-id", SESSION),
            "tools/list" => Reply::json(&tools_page(&id, vec![tool("t", "t")], None)),
            _ => return None,
        })
    })
    .await;
    let host = Host::new(json!({ "odd": entry(&server.url) }));
    let listing = host.settled(Duration::from_secs(10)).await;
    assert_eq!(
        server_entry(&listing, "odd"),
        &json!({"namespace": "odd", "status": "ready", "tools": ["t"]})
    );
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
    let host = ready_host("gap", &server.url).await;
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
    let host = ready_host("lb", &server.url).await;
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

// Reasons a model can act on

/// A refused connection reads as a plain sentence naming `scheme://host:port` (this url holds
/// no secret), not reqwest's chain of library text ("tcp connect error … (os error 111)").
#[tokio::test]
async fn connection_refused_reason_is_a_plain_sentence_naming_the_address() {
    let port = net::free_port();
    let host = Host::new(json!({"down": entry(&format!("http://127.0.0.1:{port}/mcp"))}));
    assert_eq!(
        error_reason(&host, "down", Duration::from_secs(5)).await,
        format!("connection refused by http://127.0.0.1:{port} (no server is listening there)")
    );
}

/// An https URL pointed at a plain-HTTP port is a TLS failure, said as such (naming
/// `https://host:port`), not the TLS library's "received corrupt message of type
/// InvalidContentType".
#[tokio::test]
async fn tls_to_a_plain_http_port_is_a_plain_sentence_naming_the_address() {
    let server = serve(|req| async move { standard(&req).unwrap_or_else(Reply::accepted) }).await;
    let url = format!("https://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({"tls": entry(&url)}));
    assert_eq!(
        error_reason(&host, "tls", Duration::from_secs(10)).await,
        format!(
            "the TLS handshake with https://127.0.0.1:{} failed (is it an https URL for a plain-HTTP port?)",
            server.port
        )
    );
}

/// `ToolList::omitted` is documented as "tools left out, in the order the server listed them",
/// but duplicates are appended after every other omitted tool, in name order: a duplicate
/// listed first shows last.
#[tokio::test]
async fn omitted_tools_keep_the_order_the_server_listed_them() {
    let server = tools_server(vec![
        tool("b", "first b"),
        tool("b", "second b"),
        json!({"name": "x", "description": {}}),
        tool("a", "first a"),
        tool("a", "second a"),
    ])
    .await;
    let host = ready_host("o", &server.url).await;
    let detail = host.listing(json!({"namespace": "o"})).await;
    let dup = "another tool of the same name was listed first";
    assert_eq!(
        detail["omitted"],
        json!([
            {"name": "b", "reason": dup},
            {"name": "x", "reason": "\"description\" must be a string, found an object"},
            {"name": "a", "reason": dup},
        ])
    );
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
