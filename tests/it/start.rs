//! Starting a server: the `initialize` answers that fail a start and those that do not, the
//! plain-sentence reasons of a refused or mismatched connection, the retries with backoff and
//! `Retry-After`, and the failures that will not heal shown as lasting at once (README
//! "What the tools answer", "Lifecycle and limits").

use std::time::Duration;

use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::bounds::{error_reason, offsets_ms};
use crate::host::KEY;
use crate::support::answers::heartbeat;
use crate::support::hostile::{
    self, Reply, SESSION, Server, entry, initialize_reply, result, rpc_error, serve, serve_routes,
    server_entry, standard, tool, tools_page,
};
use crate::support::mock::matchers::path;
use crate::support::mock::{self, Mock, MockServer, ResponseTemplate};
use crate::support::{Host, WAIT, net};
use crate::wire::{echo_call, mock_tool};

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

/// `entry` without `retryInSeconds`, which a failed start always has (a lasting error is
/// retried on the backoff too).
fn without_retry(entry: &serde_json::Value) -> serde_json::Value {
    let mut entry = entry.clone();
    let retry = entry.as_object_mut().unwrap().remove("retryInSeconds");
    assert!(
        retry.is_some_and(|r| r.as_u64().is_some_and(|r| r <= 60)),
        "{entry}"
    );
    entry
}

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
            "the server's event stream held a response to another request and none to request {initialize}",
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

#[tokio::test]
async fn a_failed_start_is_retried_until_ready() {
    let server = MockServer::start().await;
    // The first initialize fails; the retry one second later succeeds.
    Mock::given(path("/mcp"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(path("/mcp"))
        .respond_with(mock::with_tools(json!([mock_tool("t")]), echo_call))
        .with_priority(2)
        .mount(&server)
        .await;
    let host = Host::new(json!({"s": {"url": format!("{}/mcp", server.uri())}}));
    let mut failed = host
        .wait_for(WAIT, |l| l["servers"][0]["status"] == "error")
        .await;
    // The first wait is 1 s plus up to 1 s of jitter, rounded up to whole seconds.
    let retry = failed["servers"][0]
        .as_object_mut()
        .unwrap()
        .remove("retryInSeconds");
    assert!(
        matches!(retry.as_ref().and_then(Value::as_u64), Some(1 | 2)),
        "{retry:?}"
    );
    assert_eq!(
        failed,
        json!({"servers": [{"namespace": "s", "status": "error", "reason": "HTTP 503 Service Unavailable", "tools": []}]})
    );
    let started = tokio::time::Instant::now();
    let ready = host.ready("s", WAIT).await;
    assert_eq!(
        ready,
        json!({"servers": [{"namespace": "s", "status": "ready", "tools": ["t"]}]})
    );
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the retry waited {:?}",
        started.elapsed()
    );
}

/// Errors that will not fix themselves show at the first failed start as `error` with
/// `"lasting": true` and a reason saying what to change: a 404 at the url (the path lacks
/// `/mcp`), a 501, a 401 to an entry that cannot sign in, an https url for a plain-HTTP port. A
/// 500 may pass: no `lasting`.
#[tokio::test]
async fn errors_that_will_not_heal_are_lasting_at_once() {
    let server = serve(|req| async move {
        match req.target.as_str() {
            "/501" => Reply::raw(501, "text/plain", ""),
            "/401" => Reply::raw(401, "text/plain", "bad token"),
            "/500" => Reply::raw(500, "text/plain", "busy"),
            _ => Reply::raw(404, "text/plain", "Not Found"),
        }
    })
    .await;
    let port = server.port;
    let host = Host::new(json!({
        "path": {"url": format!("http://127.0.0.1:{port}/")},
        "unimplemented": {"url": format!("http://127.0.0.1:{port}/501")},
        "keyed": {"url": format!("http://127.0.0.1:{port}/401"), "headers": {"Authorization": format!("Bearer {KEY}")}},
        "tls": {"url": format!("https://127.0.0.1:{port}/mcp")},
        "busy": {"url": format!("http://127.0.0.1:{port}/500")},
    }));
    let lasting = |namespace: &str, reason: &str| json!({"namespace": namespace, "status": "error", "reason": reason, "lasting": true, "tools": []});
    let cases = [
        lasting(
            "path",
            "HTTP 404 Not Found: Not Found; nothing serves MCP at this URL: check the path in \"url\" (many servers serve MCP at /mcp)",
        ),
        lasting(
            "unimplemented",
            "HTTP 501 Not Implemented; the server does not take MCP requests at this URL: check that \"url\" is the server's MCP endpoint",
        ),
        lasting(
            "keyed",
            "HTTP 401 Unauthorized: bad token; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry's \"headers\" (e.g. \"Authorization\": \"Bearer ${env:TOKEN}\")",
        ),
        lasting(
            "tls",
            &format!(
                "the TLS handshake with https://127.0.0.1:{port} failed (is it an https URL for a plain-HTTP port?)"
            ),
        ),
        json!({"namespace": "busy", "status": "error", "reason": "HTTP 500 Internal Server Error: busy", "tools": []}),
    ];
    for expected in cases {
        let namespace = expected["namespace"].as_str().unwrap();
        let entry = host.failed(namespace, WAIT).await;
        assert_eq!(without_retry(&entry), expected, "{namespace}");
    }
}

/// A `401` with a `Bearer` challenge to an entry without headers, from a server that publishes no
/// OAuth metadata at all (it wants an API key): no sign-in can ever succeed, so the entry is
/// `lasting` at its first failed start, and the reason says to set the key in the headers. It
/// used to show the reason without `lasting`, so a Host (and the host CLI) waited its whole
/// deadline for it. A guessed registration endpoint that answers `503` may pass: no `lasting`.
#[tokio::test]
async fn a_401_that_offers_no_sign_in_is_lasting() {
    crate::support::oauth_store();
    let keyless = |register: u16| {
        serve(move |req| async move {
            match (req.http_method.as_str(), req.target.as_str()) {
                ("POST", "/mcp") => Reply::raw(401, "text/plain", "missing API key")
                    .header("www-authenticate", "Bearer"),
                ("POST", "/register") => Reply::raw(register, "text/plain", "no"),
                _ => Reply::raw(404, "text/plain", "not here"),
            }
        })
    };
    let (server, busy) = (keyless(404).await, keyless(503).await);
    let host = Host::new(json!({
        "keyless": {"url": format!("http://127.0.0.1:{}/mcp", server.port)},
        "busy": {"url": format!("http://127.0.0.1:{}/mcp", busy.port)},
    }));
    let entry = host.failed("busy", WAIT).await;
    assert_eq!(
        without_retry(&entry),
        json!({
            "namespace": "busy",
            "status": "error",
            "reason": "signing in failed: the registration endpoint refused to register a client: HTTP 503",
            "tools": [],
        })
    );
    let entry = host.failed("keyless", WAIT).await;
    assert_eq!(
        without_retry(&entry),
        json!({
            "namespace": "keyless",
            "status": "error",
            "reason": "signing in failed: the server answered HTTP 401 but offers no OAuth sign-in (no \
                       protected resource metadata, no authorization server metadata, no registration \
                       endpoint); it probably wants an API key or token: set it in the entry's headers",
            "lasting": true,
            "tools": [],
        })
    );
}

/// A url that points at a web site (a page that answers every request `200` with HTML, as a
/// single-page app's catch-all does) will not start serving MCP by itself, just like the 404 of
/// a url without `/mcp`: `lasting` at once, the page named by its type and never pasted, and the
/// reason says to check the url's path. It used to show no `lasting` and no advice.
#[tokio::test]
async fn a_web_page_that_answers_200_is_lasting() {
    let server = serve(|_| async move {
        Reply::raw(
            200,
            "text/html; charset=utf-8",
            format!("<!doctype html><html><body><div id=app></div><p>{KEY}</p></body></html>"),
        )
    })
    .await;
    let host = Host::new(json!({
        "site": {"url": format!("http://127.0.0.1:{}/", server.port), "headers": {"X-Api-Key": KEY}},
    }));
    let entry = host.failed("site", WAIT).await;
    assert_eq!(
        without_retry(&entry),
        json!({
            "namespace": "site",
            "status": "error",
            "reason": "the server answered with Content-Type \"text/html; charset=utf-8\", not \
                       application/json or text/event-stream; nothing serves MCP at this URL: check \
                       the path in \"url\" (many servers serve MCP at /mcp)",
            "lasting": true,
            "tools": [],
        })
    );
}

/// An https url for a plain-HTTP server that answers the TLS hello with a plain-text `400` and
/// closes (Python's `http.server` does): the same lasting reason as a port that says nothing
/// back, not "could not connect to …" (which is retried and not lasting, so the host CLI would
/// wait its whole `--wait` for it).
#[tokio::test]
async fn an_https_url_for_a_server_answering_plain_http_is_lasting() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (listener, port) = crate::support::net::loopback().await;
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut hello = [0u8; 512];
                let _ = socket.read(&mut hello).await;
                let page = "HTTP/1.0 400 Bad request version\r\nContent-Type: text/html\r\n\r\n<html>bad</html>";
                let _ = socket.write_all(page.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    let host = Host::new(json!({"tls": {"url": format!("https://127.0.0.1:{port}/mcp")}}));
    let entry = host.failed("tls", WAIT).await;
    assert_eq!(
        without_retry(&entry),
        json!({"namespace": "tls", "status": "error", "lasting": true, "tools": [],
               "reason": format!("the TLS handshake with https://127.0.0.1:{port} failed (is it an https URL for a plain-HTTP port?)")})
    );
}
