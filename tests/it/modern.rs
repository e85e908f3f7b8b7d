//! The modern era (MCP 2026-07-28, "Versioning" and "Streamable HTTP"): era detection by
//! `server/discover`, the per-request `_meta` and mirrored headers, `subscriptions/listen`,
//! cached listings, multi round-trip results, and the fallbacks between eras. Every test drives
//! the Pack through the `runvil-plugin` contract against a [`Modern`] fake on loopback and pins
//! the whole wire trail where it can.
//!
//! Where a test must guess the client's exact wording it asserts the structure (kind, and that
//! the message names the thing) and says `// lead: exact text`.
//!
//! The `fake_*` tests speak to the fake directly (reqwest) and prove it; the others need a client
//! that speaks 2026-07-28: a 2025-only client fails them at the start (its `initialize` meets
//! `-32022` from a modern-only server, or its trail lacks the `server/discover` probe).

use std::time::Duration;

use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

use crate::support::hostile::entry;
use crate::support::modern::{
    Call, Canned, Era, LEGACY, MODERN, Modern, NO_SESSION, Step, client_meta, sentinel, tool_with,
};
use crate::support::{Host, logs};

const LIMIT: Duration = Duration::from_secs(10);

/// A Pack with the one server `m` at `server`, waited on until ready.
async fn ready(server: &Modern) -> Host {
    let host = Host::new(json!({"m": entry(&server.url)}));
    host.ready("m", LIMIT).await;
    host
}

/// `call_dynamic_tool` of `tool` on `m` with `arguments`.
async fn call(host: &Host, tool: &str, arguments: Value) -> Result<String, ToolError> {
    let args = json!({"namespace": "m", "toolName": tool, "arguments": arguments});
    host.call("call_dynamic_tool", args).await
}

/// The namespace listing of `m`.
async fn namespace(host: &Host) -> Value {
    host.listing(json!({"namespace": "m"})).await
}

/// Calls `added`, a tool `m` does not list: the call re-lists once, and is refused as
/// `not_found`.
async fn relist_by_a_miss(host: &Host) {
    let refused = call(host, "added", json!({})).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::NotFound, "{refused:?}");
}

/// Waits (at most [`LIMIT`]) until `m`'s namespace listing names `version`.
async fn version_becomes(host: &Host, version: &str) {
    let named = async {
        while namespace(host).await["protocolVersion"] != version {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(LIMIT, named).await.is_err() {
        panic!(
            "the protocol version never became {version}: {}",
            namespace(host).await
        );
    }
}

/// The mirrored headers of a step but the three every modern request has, sorted.
fn extra_headers(step: &Step) -> Vec<(String, String)> {
    let mut rest: Vec<(String, String)> = step
        .headers
        .iter()
        .filter(|(n, _)| !matches!(n.as_str(), "mcp-protocol-version" | "mcp-method"))
        .cloned()
        .collect();
    rest.sort();
    rest
}

/// Asserts `step` is a modern request of `method`: the version and method headers once each,
/// no session or resumption header, and `_meta` exactly as the client sends it.
fn assert_modern(step: &Step, method: &str) {
    assert_eq!(step.verb, "POST", "{step:?}");
    assert_eq!(step.method, method, "{step:?}");
    assert_eq!(
        step.header_values("mcp-protocol-version"),
        [MODERN],
        "{step:?}"
    );
    assert_eq!(step.header_values("mcp-method"), [method], "{step:?}");
    assert!(!step.session, "no Mcp-Session-Id: {step:?}");
    assert!(!step.last_event_id, "no Last-Event-ID: {step:?}");
    assert_eq!(step.meta, client_meta(MODERN), "{step:?}");
}

fn lines(list: &[&str]) -> Vec<String> {
    list.iter().map(|l| l.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// the fake itself, spoken to directly

/// POSTs `body` to `url` with `headers`; the status and the body as JSON (`Null` if not JSON).
async fn post(url: &str, headers: &[(&str, &str)], body: Value) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.body(body.to_string()).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn discover_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
           "params": {"_meta": client_meta(MODERN)}})
}

#[tokio::test]
async fn fake_answers_discover_with_its_versions_and_capabilities() {
    let server = Modern::start().await;
    server.set_list_changed();
    server.set_instructions("use echo");
    let headers = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "server/discover"),
    ];
    let (status, body) = post(&server.url, &headers, discover_body()).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "supportedVersions": [MODERN],
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "modern-fake", "version": "0"},
            "instructions": "use echo", "ttlMs": 0, "cacheScope": "public"}})
    );
    assert_eq!(server.lines(), lines(&["POST server/discover 200"]));
}

#[tokio::test]
async fn fake_rejects_mismatched_headers_with_header_mismatch() {
    let server = Modern::start().await;
    server.set_tools(vec![tool_with(
        "sql",
        json!({"region": {"type": "string", "x-mcp-header": "Region"}}),
    )]);
    let call = |name: &str, region: &str| {
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": name, "arguments": {"region": region},
                          "_meta": client_meta(MODERN)}})
    };
    let base = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/call"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut all = base.to_vec();
        all.extend_from_slice(extra);
        all
    };
    // Mcp-Method says something else.
    let (status, body) = post(
        &server.url,
        &[
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/list"),
            ("mcp-name", "sql"),
            ("mcp-param-region", "eu"),
        ],
        call("sql", "eu"),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!(-32020))
    );
    // Mcp-Name differs from params.name.
    let (status, body) = post(
        &server.url,
        &with(&[("mcp-name", "other"), ("mcp-param-region", "eu")]),
        call("sql", "eu"),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!(-32020))
    );
    // The mirrored argument is missing, then wrong.
    let (status, body) = post(
        &server.url,
        &with(&[("mcp-name", "sql")]),
        call("sql", "eu"),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!(-32020))
    );
    let (status, body) = post(
        &server.url,
        &with(&[("mcp-name", "sql"), ("mcp-param-region", "us")]),
        call("sql", "eu"),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!(-32020))
    );
    // Right, also in the Base64 form.
    let (status, body) = post(
        &server.url,
        &with(&[("mcp-name", "sql"), ("mcp-param-region", "eu")]),
        call("sql", "eu"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let encoded = sentinel(" eu ");
    let encoded: &'static str = Box::leak(encoded.into_boxed_str());
    let (status, body) = post(
        &server.url,
        &with(&[("mcp-name", "sql"), ("mcp-param-region", encoded)]),
        call("sql", " eu "),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["result"]["content"][0]["text"],
        "echo sql {\"region\":\" eu \"}"
    );
    assert_eq!(
        server.lines(),
        lines(&[
            "POST tools/call 400",
            "POST tools/call 400",
            "POST tools/call 400",
            "POST tools/call 400",
            "POST tools/call 200",
            "POST tools/call 200",
        ])
    );
}

#[tokio::test]
async fn fake_rejects_an_unknown_version_with_supported_and_requested() {
    let server = Modern::start().await;
    server.set_supported(json!([MODERN, "2030-01-01"]));
    let headers = [
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-method", "server/discover"),
    ];
    let (status, body) = post(&server.url, &headers, discover_body()).await;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"],
        json!({"code": -32022, "message": "Unsupported protocol version",
               "data": {"supported": [MODERN, "2030-01-01"], "requested": "2025-11-25"}})
    );
    // An old client's initialize meets the same answer.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "x", "version": "0"}}});
    let (status, body) = post(&server.url, &[("mcp-protocol-version", "2025-11-25")], init).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!(-32022))
    );
    // No _meta at all, on a supported version header.
    let bare = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}});
    let headers = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/list"),
    ];
    let (status, body) = post(&server.url, &headers, bare).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!(-32602))
    );
}

#[tokio::test]
async fn fake_answers_get_and_delete_with_405_and_legacy_era_with_sessions() {
    let server = Modern::start().await;
    let client = reqwest::Client::new();
    let get = client
        .get(&server.url)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    let delete = client
        .delete(&server.url)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    assert_eq!((get, delete), (405, 405));
    server.restart(Era::Legacy);
    let headers = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "server/discover"),
    ];
    let response = reqwest::Client::new()
        .post(&server.url)
        .headers(
            headers
                .iter()
                .map(|(n, v)| (n.parse().unwrap(), v.parse().unwrap()))
                .collect(),
        )
        .body(discover_body().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(response.text().await.unwrap(), NO_SESSION);
    assert_eq!(
        server.lines(),
        lines(&["GET - 405", "DELETE - 405", "POST server/discover 400"])
    );
}

#[tokio::test]
async fn fake_canned_answers_come_first_and_once() {
    let server = Modern::start().await;
    server.answer_next("server/discover", Canned::Result(json!({"canned": true})));
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let headers = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "server/discover"),
    ];
    let (_, first) = post(&url, &headers, discover_body()).await;
    let (_, second) = post(&url, &headers, discover_body()).await;
    assert_eq!(first["result"], json!({"canned": true}));
    assert_eq!(second["result"]["supportedVersions"], json!([MODERN]));
    assert_eq!(server.unrecorded_gets(), 0);
}

/// Reads `response` until its body holds `needle` (at most 5 s); the text read.
async fn read_until(response: &mut reqwest::Response, needle: &str) -> String {
    let mut text = String::new();
    let read = async {
        while !text.contains(needle) {
            let chunk = response.chunk().await.unwrap().expect("the stream goes on");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .expect(needle);
    text
}

fn modern_post(url: &str, method: &str, body: Value) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method)
        .body(body.to_string())
}

#[tokio::test]
async fn fake_listen_stream_acknowledges_then_carries_list_changed_until_dropped() {
    let server = Modern::start().await;
    server.set_list_changed();
    let listen = json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true}, "_meta": client_meta(MODERN)}});
    let mut response = modern_post(&server.url, "subscriptions/listen", listen)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let ack = read_until(&mut response, "\n\n").await;
    assert_eq!(
        ack,
        "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":\"listen-1\"},\"notifications\":{\"toolsListChanged\":true}}}\n\n"
    );
    assert_eq!(server.notify_list_changed(), 1);
    let news = read_until(&mut response, "list_changed").await;
    assert!(news.contains("subscriptionId\":\"listen-1\""), "{news}");
    server.drop_listens();
    let end = tokio::time::timeout(Duration::from_secs(5), response.chunk()).await;
    assert!(matches!(end, Ok(Ok(None))), "the stream ends: {end:?}");
    assert_eq!(server.lines(), lines(&["POST subscriptions/listen 200"]));
}

#[tokio::test]
async fn fake_records_a_held_answer_closed_by_the_client() {
    let server = Modern::start().await;
    server.set_call("echo", Call::Hold(Duration::from_secs(60)));
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "echo", "arguments": {}, "_meta": client_meta(MODERN)}});
    let response = modern_post(&server.url, "tools/call", body)
        .header("mcp-name", "echo")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    drop(response);
    server
        .wait_until(LIMIT, "the closed stream", |t| t.len() == 2)
        .await;
    assert_eq!(
        server.lines(),
        lines(&["POST tools/call 200", "CLOSED tools/call 200"])
    );
    assert_eq!(server.trail()[1].id, json!(9));
}

#[tokio::test]
async fn fake_cuts_the_first_stream_before_the_answer_and_answers_the_second() {
    let server = Modern::start().await;
    server.set_call("echo", Call::CutFirst);
    let body = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "echo", "arguments": {}, "_meta": client_meta(MODERN)}})
    };
    let send = |id| {
        modern_post(&server.url, "tools/call", body(id))
            .header("mcp-name", "echo")
            .send()
    };
    let first = send(1).await.unwrap().text().await.unwrap();
    let second = send(2).await.unwrap().text().await.unwrap();
    assert_eq!(first, ": working\n\n");
    assert_eq!(
        second,
        "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"echo echo {}\"}]}}\n\n"
    );
    assert_eq!(
        server.lines(),
        lines(&["POST tools/call 200", "POST tools/call 200"])
    );
}

// ---------------------------------------------------------------------------------------------
// 1. era detection

#[tokio::test]
async fn discover_is_the_first_request_and_a_modern_start_is_discover_then_tools_list() {
    let server = Modern::start().await;
    server.set_instructions("use echo well");
    let host = ready(&server).await;
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>(),
        lines(&["POST server/discover 200", "POST tools/list 200"])
    );
    assert_modern(&trail[0], "server/discover");
    assert_eq!(trail[0].params, json!({"_meta": client_meta(MODERN)}));
    assert_modern(&trail[1], "tools/list");
    assert_eq!(extra_headers(&trail[0]), []);
    let listing = namespace(&host).await;
    assert_eq!(listing["protocolVersion"], MODERN);
    assert_eq!(listing["instructions"], "use echo well");
    assert_eq!(listing["status"], "ready");
    assert_eq!(listing["tools"][0]["name"], "echo");
}

#[tokio::test]
async fn unsupported_version_naming_a_legacy_version_goes_legacy() {
    let server = Modern::start_in(Era::Dual).await;
    server.set_legacy_version("2025-06-18");
    server.answer_next(
        "server/discover",
        Canned::Error(
            400,
            -32022,
            "Unsupported protocol version".into(),
            json!({"supported": ["2025-06-18"], "requested": MODERN}),
        ),
    );
    let host = ready(&server).await;
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>(),
        lines(&[
            "POST server/discover 400",
            "POST initialize 200",
            "POST notifications/initialized 202",
            "POST tools/list 200",
        ])
    );
    let offered = trail[1].params["protocolVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        ["2025-11-25", "2025-06-18", "2025-03-26"].contains(&offered.as_str()),
        "initialize offers a legacy version: {offered}"
    );
    assert_eq!(namespace(&host).await["protocolVersion"], "2025-06-18");
    assert_eq!(
        call(&host, "echo", json!({})).await,
        Ok("echo echo {}".into())
    );
}

#[tokio::test]
async fn unsupported_version_without_a_mutual_version_fails_naming_both_lists_and_waits() {
    let server = Modern::start().await;
    server.set_supported(json!(["2099-01-01", "1999-12-31"]));
    let host = Host::new(json!({"m": entry(&server.url)}));
    let failed = host.failed("m", LIMIT).await;
    let reason = failed["reason"].as_str().unwrap();
    // lead: exact text
    for named in ["2099-01-01", "1999-12-31", MODERN, LEGACY] {
        assert!(reason.contains(named), "the reason names {named}: {reason}");
    }
    assert_eq!(failed["retryInSeconds"], 60, "{failed}");
    // The next start waits the backoff maximum: nothing more within 3 s.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(server.lines(), lines(&["POST server/discover 400"]));
}

/// Every answer a legacy server gives to `server/discover`, and what the fallback trail is.
#[tokio::test]
async fn legacy_answers_to_discover_fall_back_to_initialize() {
    let cases: Vec<(&str, Canned, u16)> = vec![
        (
            "400 plain text",
            Canned::Raw(400, Some("text/plain"), NO_SESSION.into()),
            400,
        ),
        (
            "400 non-modern JSON",
            Canned::Error(
                400,
                -32000,
                "Bad Request: no valid session".into(),
                Value::Null,
            ),
            400,
        ),
        (
            "200 -32601",
            Canned::Error(200, -32601, "Method not found".into(), Value::Null),
            200,
        ),
        (
            "404",
            Canned::Raw(404, Some("text/plain"), "Not Found".into()),
            404,
        ),
        ("405", Canned::Raw(405, None, String::new()), 405),
        (
            "406",
            Canned::Raw(406, Some("text/plain"), "Not Acceptable".into()),
            406,
        ),
        ("400 empty", Canned::Raw(400, None, String::new()), 400),
        (
            "200 result without supportedVersions",
            Canned::Result(json!({})),
            200,
        ),
    ];
    for (what, canned, status) in cases {
        let server = Modern::start_in(Era::Legacy).await;
        server.answer_next("server/discover", canned);
        let host = Host::new(json!({"m": entry(&server.url)}));
        host.ready("m", LIMIT).await;
        let trail = server.settle(Duration::from_millis(200), LIMIT).await;
        assert_eq!(
            trail.iter().map(Step::line).collect::<Vec<_>>(),
            vec![
                format!("POST server/discover {status}"),
                "POST initialize 200".into(),
                "POST notifications/initialized 202".into(),
                "POST tools/list 200".into(),
            ],
            "{what}"
        );
        assert_eq!(namespace(&host).await["protocolVersion"], LEGACY, "{what}");
    }
}

#[tokio::test]
async fn modern_errors_to_discover_mean_modern_and_no_initialize() {
    let cases = [
        (-32020, json!(null)),
        (-32021, json!({"requiredCapabilities": {"elicitation": {}}})),
    ];
    for (code, data) in cases {
        let server = Modern::start().await;
        server.answer_next(
            "server/discover",
            Canned::Error(400, code, "refused".into(), data),
        );
        let host = Host::new(json!({"m": entry(&server.url)}));
        host.settled(LIMIT).await;
        let trail = server.settle(Duration::from_millis(500), LIMIT).await;
        assert_eq!(trail[0].line(), "POST server/discover 400", "{code}");
        assert!(
            trail.iter().all(|s| s.method != "initialize"),
            "a modern error is no reason to go legacy ({code}): {:?}",
            server.lines()
        );
    }
}

#[tokio::test]
async fn the_era_is_probed_once_per_server_life() {
    let server = Modern::start().await;
    let host = ready(&server).await;
    for n in 0..3 {
        assert_eq!(
            call(&host, "echo", json!({"n": n})).await,
            Ok(format!("echo echo {{\"n\":{n}}}"))
        );
        namespace(&host).await;
    }
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>(),
        lines(&[
            "POST server/discover 200",
            "POST tools/list 200",
            "POST tools/call 200",
            "POST tools/call 200",
            "POST tools/call 200",
        ])
    );
}

#[tokio::test]
async fn a_legacy_session_answered_with_unsupported_version_probes_again() {
    let server = Modern::start_in(Era::Dual).await;
    server.answer_next("server/discover", Canned::Raw(404, None, String::new()));
    let host = ready(&server).await;
    assert_eq!(namespace(&host).await["protocolVersion"], LEGACY);
    // The server is redeployed modern-only: the legacy session's next request gets -32022.
    server.restart(Era::Modern);
    // A call may meet the pooled connection the restart cut ("the connection closed before the
    // server answered": a legacy tools/call is not sent again, it may have run); the next one
    // reaches the new server.
    for _ in 0..3 {
        let _ = call(&host, "echo", json!({})).await;
        if server.count("tools/call") > 0 {
            break;
        }
    }
    version_becomes(&host, MODERN).await;
    let lines = server.lines();
    let at = lines.iter().position(|l| l == "POST tools/call 400");
    let at = at.unwrap_or_else(|| panic!("the legacy call met -32022: {lines:?}"));
    assert_eq!(lines[at + 1], "POST server/discover 200", "{lines:?}");
    assert_eq!(server.count("server/discover"), 2, "{lines:?}");
    assert_eq!(
        call(&host, "echo", json!({})).await,
        Ok("echo echo {}".into())
    );
}

#[tokio::test]
async fn a_modern_request_answered_like_legacy_reprobes_and_initializes() {
    let server = Modern::start_in(Era::Modern).await;
    let host = ready(&server).await;
    // Redeployed as a legacy-only server.
    server.restart(Era::Legacy);
    let _ = call(&host, "echo", json!({})).await;
    let trail = server
        .wait_until(LIMIT, "a legacy start", |t| {
            t.iter()
                .any(|s| s.line() == "POST tools/list 200" && s.session)
        })
        .await;
    let lines: Vec<String> = trail.iter().map(Step::line).collect();
    assert_eq!(
        lines[..6],
        [
            "POST server/discover 200",
            "POST tools/list 200",
            "POST tools/call 400",
            "POST server/discover 400",
            "POST initialize 200",
            "POST notifications/initialized 202",
        ],
        "{lines:?}"
    );
    version_becomes(&host, LEGACY).await;
}

#[tokio::test]
async fn a_server_claiming_modern_then_answering_legacy_404_is_reprobed() {
    let server = Modern::start().await;
    server.answer_next(
        "tools/list",
        Canned::Raw(404, Some("text/plain"), "Not Found".into()),
    );
    let host = ready(&server).await;
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>(),
        lines(&[
            "POST server/discover 200",
            "POST tools/list 404",
            "POST server/discover 200",
            "POST tools/list 200",
        ])
    );
    assert_eq!(namespace(&host).await["protocolVersion"], MODERN);
}

#[tokio::test]
async fn a_server_claiming_legacy_then_answering_initialize_with_a_modern_error_is_modern() {
    let server = Modern::start().await;
    // The probe meets a proxy's plain 404; initialize then meets the modern server itself.
    server.answer_next("server/discover", Canned::Raw(404, None, String::new()));
    let host = ready(&server).await;
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    let lines: Vec<String> = trail.iter().map(Step::line).collect();
    assert_eq!(
        lines,
        [
            "POST server/discover 404",
            "POST initialize 400",
            "POST server/discover 200",
            "POST tools/list 200",
        ]
    );
    assert_eq!(namespace(&host).await["protocolVersion"], MODERN);
}

#[tokio::test]
async fn a_garbage_supported_list_fails_the_start_with_a_bounded_reason() {
    // Beyond the bound of an error's `data` (4 KiB), inside the error preview (8 KiB).
    let huge = "v".repeat(5_000);
    // Inside the bound of an error's `data`: the client reads 16 of them.
    let long: Vec<Value> = (0..200).map(|n| json!(format!("1900-01-{n}"))).collect();
    let cases = [
        (
            "numbers",
            json!([1, 2.5, -3, null, {"v": MODERN}, [MODERN], true]),
        ),
        ("not a list", json!("2026-07-28")),
        ("a huge string", json!([huge])),
        ("a very long list", Value::Array(long)),
    ];
    for (what, supported) in cases {
        let server = Modern::start().await;
        server.answer_next(
            "server/discover",
            Canned::Error(
                400,
                -32022,
                "Unsupported protocol version".into(),
                json!({"supported": supported, "requested": MODERN}),
            ),
        );
        let host = Host::new(json!({"m": entry(&server.url)}));
        let failed = host.failed("m", LIMIT).await;
        let reason = failed["reason"].as_str().unwrap();
        assert!(
            reason.len() <= 2048,
            "{what}: the reason is bounded ({} bytes)",
            reason.len()
        );
        assert!(
            !reason.contains(&"v".repeat(2000)),
            "{what}: the huge string is cut"
        );
        assert!(
            reason.contains(MODERN),
            "{what}: names what the client speaks: {reason}"
        ); // lead: exact text
        assert!(
            server.lines().iter().all(|l| !l.contains("initialize")),
            "{what}"
        );
    }
}

/// A version refusal too large for the error preview (8 KiB) is no modern error the client can
/// read, so it falls back to `initialize`; the modern error that answers sends it back to
/// `server/discover` at once.
#[tokio::test]
async fn a_version_refusal_beyond_the_error_preview_falls_back_then_probes_again() {
    let server = Modern::start().await;
    server.answer_next(
        "server/discover",
        Canned::Error(
            400,
            -32022,
            "Unsupported protocol version".into(),
            json!({"supported": ["v".repeat(200_000)], "requested": MODERN}),
        ),
    );
    let host = ready(&server).await;
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>(),
        [
            "POST server/discover 400",
            "POST initialize 400",
            "POST server/discover 200",
            "POST tools/list 200",
        ]
    );
    assert_eq!(namespace(&host).await["protocolVersion"], MODERN);
}

#[tokio::test]
async fn a_supported_list_with_garbage_and_one_legacy_version_goes_legacy() {
    let server = Modern::start_in(Era::Dual).await;
    server.answer_next(
        "server/discover",
        Canned::Error(
            400,
            -32022,
            "Unsupported protocol version".into(),
            json!({"supported": [7, null, "x".repeat(10_000), "2025-11-25"], "requested": MODERN}),
        ),
    );
    let host = ready(&server).await;
    assert_eq!(namespace(&host).await["protocolVersion"], LEGACY);
    assert_eq!(
        server.lines()[..2],
        ["POST server/discover 400", "POST initialize 200"]
    );
}

// ---------------------------------------------------------------------------------------------
// 2. modern requests

#[tokio::test]
async fn a_modern_call_carries_meta_mcp_name_and_nothing_of_sessions() {
    let server = Modern::start().await;
    let host = ready(&server).await;
    let answer = call(&host, "echo", json!({"q": "hi"})).await;
    assert_eq!(answer, Ok("echo echo {\"q\":\"hi\"}".into()));
    let step = server.steps("tools/call").remove(0);
    assert_modern(&step, "tools/call");
    assert_eq!(
        step.params,
        json!({"name": "echo", "arguments": {"q": "hi"}, "_meta": client_meta(MODERN)})
    );
    assert_eq!(
        extra_headers(&step),
        [("mcp-name".to_string(), "echo".to_string())]
    );
}

#[tokio::test]
async fn a_modern_client_sends_no_get_delete_ping_initialized_or_cancelled() {
    let server = Modern::start().await;
    server.set_call("slow", Call::Hold(Duration::from_secs(30)));
    server.set_tools(vec![
        tool_with("echo", json!({})),
        tool_with("slow", json!({})),
    ]);
    let host = ready(&server).await;
    call(&host, "echo", json!({})).await.unwrap();
    let slow = call(&host, "slow", json!({}));
    let _ = tokio::time::timeout(Duration::from_millis(300), slow).await;
    drop(host);
    let trail = server.settle(Duration::from_secs(1), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>(),
        lines(&[
            "POST server/discover 200",
            "POST tools/list 200",
            "POST tools/call 200",
            "POST tools/call 200",
            "CLOSED tools/call 200",
        ])
    );
    for step in trail.iter().filter(|s| s.verb == "POST") {
        assert_modern(step, &step.method);
    }
}

#[tokio::test]
async fn mirrored_parameters_follow_their_types_and_are_left_out_when_absent_or_null() {
    let server = Modern::start().await;
    server.set_tools(vec![tool_with(
        "sql",
        json!({
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
            "scope": {"type": "object", "properties": {
                "tenant": {"type": "string", "x-mcp-header": "Tenant"}}},
            "absent": {"type": "string", "x-mcp-header": "Absent"},
            "nothing": {"type": ["string", "null"], "x-mcp-header": "Nothing"},
            "query": {"type": "string"},
        }),
    )]);
    let host = ready(&server).await;
    let args = json!({"region": "us-west1", "count": -7, "dry": false,
                      "scope": {"tenant": "acme"}, "nothing": null, "query": "SELECT 1"});
    assert!(call(&host, "sql", args).await.is_ok());
    let step = server.steps("tools/call").remove(0);
    assert_eq!(step.status, 200);
    assert_eq!(
        extra_headers(&step),
        [
            ("mcp-name", "sql"),
            ("mcp-param-count", "-7"),
            ("mcp-param-dry-run", "false"),
            ("mcp-param-region", "us-west1"),
            ("mcp-param-tenant", "acme"),
        ]
        .map(|(n, v)| (n.to_string(), v.to_string()))
    );
}

/// A model's `null` for an optional boolean is no schema mismatch: the call goes out as given,
/// without the parameter's header (the conformance suite's `http-custom-headers` does this).
#[tokio::test]
async fn a_null_for_an_optional_typed_parameter_is_sent_without_its_header() {
    let server = Modern::start().await;
    server.set_tools(vec![tool_with(
        "t",
        json!({
            "region": {"type": "string", "x-mcp-header": "Region"},
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
        }),
    )]);
    let host = ready(&server).await;
    let args = json!({"region": "us-east1", "verbose": null});
    assert!(call(&host, "t", args).await.is_ok());
    let step = server.steps("tools/call").remove(0);
    assert_eq!(step.status, 200);
    assert_eq!(
        extra_headers(&step),
        [("mcp-name", "t"), ("mcp-param-region", "us-east1")]
            .map(|(n, v)| (n.to_string(), v.to_string()))
    );
}

#[tokio::test]
async fn unsafe_mirrored_values_go_base64_in_exactly_one_header_without_injection() {
    let server = Modern::start().await;
    let names = ["greeting", "padded", "newline", "crlf", "lookalike", "tab"];
    let properties: serde_json::Map<String, Value> = names
        .iter()
        .map(|n| (n.to_string(), json!({"type": "string", "x-mcp-header": n})))
        .collect();
    server.set_tools(vec![tool_with("t", Value::Object(properties))]);
    let host = ready(&server).await;
    let values = [
        ("greeting", "Hello, 世界"),
        ("padded", " padded "),
        ("newline", "line1\nline2"),
        ("crlf", "a\r\nX-Injected: 1"),
        ("lookalike", "=?base64?literal?="),
        ("tab", "\tlead"),
    ];
    let args: serde_json::Map<String, Value> = values
        .iter()
        .map(|(n, v)| (n.to_string(), json!(v)))
        .collect();
    assert!(call(&host, "t", Value::Object(args)).await.is_ok());
    let step = server.steps("tools/call").remove(0);
    assert_eq!(
        step.status, 200,
        "the fake decoded every header to its argument"
    );
    for (name, value) in values {
        assert_eq!(
            step.header_values(&format!("mcp-param-{name}")),
            [sentinel(value)],
            "{name}"
        );
    }
    assert_eq!(sentinel("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
    assert_eq!(step.headers.len(), 3 + values.len(), "{:?}", step.headers);
    assert!(step.headers.iter().all(|(n, _)| !n.contains("injected")));
}

#[tokio::test]
async fn a_tool_name_outside_the_safe_set_goes_base64_in_mcp_name() {
    let server = Modern::start().await;
    server.set_tools(vec![tool_with("café", json!({}))]);
    let host = ready(&server).await;
    assert_eq!(
        call(&host, "café", json!({})).await,
        Ok("echo café {}".into())
    );
    let step = server.steps("tools/call").remove(0);
    assert_eq!(step.header_values("mcp-name"), [sentinel("café")]);
}

#[tokio::test]
async fn tools_with_invalid_x_mcp_header_are_omitted_and_named() {
    let server = Modern::start().await;
    let invalid = [
        (
            "empty",
            json!({"a": {"type": "string", "x-mcp-header": ""}}),
        ),
        (
            "not_a_token",
            json!({"a": {"type": "string", "x-mcp-header": "a b"}}),
        ),
        (
            "control",
            json!({"a": {"type": "string", "x-mcp-header": "a\r\nb"}}),
        ),
        (
            "duplicate",
            json!({"a": {"type": "string", "x-mcp-header": "Key"},
                             "b": {"type": "string", "x-mcp-header": "KEY"}}),
        ),
        (
            "number",
            json!({"a": {"type": "number", "x-mcp-header": "N"}}),
        ),
        (
            "object",
            json!({"a": {"type": "object", "x-mcp-header": "O"}}),
        ),
        (
            "array",
            json!({"a": {"type": "array", "x-mcp-header": "A"}}),
        ),
        (
            "in_items",
            json!({"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}),
        ),
        (
            "in_one_of",
            json!({"a": {"oneOf": [{"type": "string", "x-mcp-header": "O"}]}}),
        ),
        (
            "not_a_string",
            json!({"a": {"type": "string", "x-mcp-header": 5}}),
        ),
    ];
    let mut tools = vec![tool_with(
        "fine",
        json!({"a": {"type": "string", "x-mcp-header": "A"}}),
    )];
    tools.extend(invalid.iter().map(|(n, p)| tool_with(n, p.clone())));
    server.set_tools(tools);
    let host = ready(&server).await;
    let listing = namespace(&host).await;
    let listed: Vec<&Value> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert_eq!(listed, [&json!("fine")]);
    let omitted = listing["omitted"].as_array().expect("omitted");
    let mut names: Vec<&str> = omitted
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    names.sort();
    let mut want: Vec<&str> = invalid.iter().map(|(n, _)| *n).collect();
    want.sort();
    assert_eq!(names, want);
    for entry in omitted {
        // lead: exact text
        assert!(
            entry["reason"].as_str().unwrap().contains("x-mcp-header"),
            "{entry}"
        );
    }
    let refused = call(&host, "in_items", json!({})).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::NotFound, "{refused:?}");
    assert_eq!(server.count("tools/call"), 0);
}

#[tokio::test]
async fn header_mismatch_relists_and_retries_once_with_a_new_id() {
    let server = Modern::start().await;
    server.set_tools(vec![tool_with(
        "sql",
        json!({"region": {"type": "string"}}),
    )]);
    let host = ready(&server).await;
    // The server's schema now mirrors region; the client's copy does not yet.
    server.set_tools(vec![tool_with(
        "sql",
        json!({"region": {"type": "string", "x-mcp-header": "Region"}}),
    )]);
    let answer = call(&host, "sql", json!({"region": "eu"})).await;
    assert_eq!(answer, Ok("echo sql {\"region\":\"eu\"}".into()));
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>(),
        lines(&[
            "POST server/discover 200",
            "POST tools/list 200",
            "POST tools/call 400",
            "POST tools/list 200",
            "POST tools/call 200",
        ])
    );
    assert_ne!(trail[2].id, trail[4].id, "the retry has a new id");
    assert_eq!(
        trail[2].header_values("mcp-param-region"),
        Vec::<String>::new()
    );
    assert_eq!(trail[4].header_values("mcp-param-region"), ["eu"]);
}

#[tokio::test]
async fn header_mismatch_once_is_retried_after_a_relist() {
    let server = Modern::start().await;
    server.set_call("echo", Call::MismatchOnce);
    let host = ready(&server).await;
    assert_eq!(
        call(&host, "echo", json!({})).await,
        Ok("echo echo {}".into())
    );
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>()[2..],
        [
            "POST tools/call 400",
            "POST tools/list 200",
            "POST tools/call 200"
        ]
    );
}

#[tokio::test]
async fn header_mismatch_twice_fails_without_a_loop() {
    let server = Modern::start().await;
    server.set_call("echo", Call::MismatchAlways);
    let host = ready(&server).await;
    let failed = call(&host, "echo", json!({})).await.unwrap_err();
    assert_eq!(failed.kind, ToolErrorKind::Backend, "{failed:?}");
    assert!(failed.message.contains("Header mismatch"), "{failed:?}"); // lead: exact text
    let trail = server.settle(Duration::from_millis(500), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>()[2..],
        [
            "POST tools/call 400",
            "POST tools/list 200",
            "POST tools/call 400"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// 3. list changes and cached listings

#[tokio::test]
async fn list_changed_opens_a_listen_stream_and_a_notification_relists() {
    let server = Modern::start().await;
    server.set_list_changed();
    let host = ready(&server).await;
    let trail = server
        .wait_until(LIMIT, "the listen stream", |t| {
            t.iter().any(|s| s.method == "subscriptions/listen")
        })
        .await;
    let listen = trail
        .iter()
        .find(|s| s.method == "subscriptions/listen")
        .unwrap();
    assert_modern(listen, "subscriptions/listen");
    assert_eq!(
        listen.params,
        json!({"notifications": {"toolsListChanged": true}, "_meta": client_meta(MODERN)})
    );
    server
        .wait_until(LIMIT, "an open stream", |_| server.open_listens() == 1)
        .await;
    // The acknowledgment asks for one re-listing: a change made before the stream was open
    // was announced nowhere.
    server
        .wait_until(LIMIT, "the re-listing the acknowledgment asks for", |t| {
            t.iter().filter(|s| s.method == "tools/list").count() == 2
        })
        .await;
    server.set_tools(vec![
        tool_with("echo", json!({})),
        tool_with("added", json!({})),
    ]);
    assert_eq!(server.notify_list_changed(), 1);
    server
        .wait_until(LIMIT, "a third listing", |t| {
            t.iter().filter(|s| s.method == "tools/list").count() == 3
        })
        .await;
    host.wait_for(LIMIT, |l| {
        crate::support::hostile::server_entry(l, "m")["tools"] == json!(["added", "echo"])
    })
    .await;
    let lines = server.lines();
    assert_eq!(
        lines,
        [
            "POST server/discover 200",
            "POST tools/list 200",
            "POST subscriptions/listen 200",
            "POST tools/list 200",
            "POST tools/list 200",
        ]
    );
}

/// A modern server whose listen stream is cut by a restart onto the legacy era: reopening the
/// stream (or the re-listing that goes with it) meets a legacy refusal, so the client asks again which era it speaks and starts over
/// with `initialize` without waiting for a call, and the legacy session's `GET` stream takes the
/// listen stream's place.
#[tokio::test]
async fn a_listen_stream_refused_like_legacy_reprobes_without_a_call() {
    let server = Modern::start_in(Era::Dual).await;
    server.set_list_changed();
    let host = ready(&server).await;
    server
        .wait_until(LIMIT, "an open stream", |_| server.open_listens() == 1)
        .await;
    server.restart(Era::Legacy);
    let trail = server
        .wait_until(Duration::from_secs(20), "a legacy start", |t| {
            t.iter().any(|s| s.line() == "POST initialize 200")
        })
        .await;
    let lines: Vec<String> = trail.iter().map(Step::line).collect();
    // Reopening the stream goes with a re-listing (a change made while it was down is not
    // lost); whichever of the two meets the refusal first sets off the probe.
    let refused = lines
        .iter()
        .position(|l| l == "POST subscriptions/listen 400" || l == "POST tools/list 400")
        .unwrap_or_else(|| panic!("the reopened listen stream was refused: {lines:#?}"));
    assert_eq!(
        lines[refused + 1..refused + 3],
        ["POST server/discover 400", "POST initialize 200",],
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("POST tools/call")),
        "{lines:?}"
    );
    version_becomes(&host, LEGACY).await;
}

/// A re-listing whose page meets a restart onto the legacy era is sent again on the legacy
/// session the probe makes: the listing then names that session's version and instructions,
/// not those of the modern session the re-listing began on.
#[tokio::test]
async fn a_relisting_answered_after_a_restart_onto_legacy_names_the_legacy_version() {
    let server = Modern::start_in(Era::Dual).await;
    server.set_instructions("modern words");
    let host = ready(&server).await;
    assert_eq!(namespace(&host).await["protocolVersion"], MODERN);
    server.restart(Era::Legacy);
    server.set_instructions("legacy words");
    // A tool the listing does not have: the call re-lists once, and that re-listing meets the
    // restart.
    relist_by_a_miss(&host).await;
    assert_eq!(
        server.lines()[2..],
        lines(&[
            "POST tools/list 400",
            "POST server/discover 400",
            "POST initialize 200",
            "POST notifications/initialized 202",
            "POST tools/list 200",
        ])
    );
    let listing = namespace(&host).await;
    assert_eq!(listing["protocolVersion"], LEGACY, "{listing}");
    assert_eq!(listing["instructions"], "legacy words", "{listing}");
    assert_eq!(
        call(&host, "echo", json!({})).await,
        Ok("echo echo {}".into())
    );
}

/// Two pages: `first`, then (at `cursor`) `second`.
fn two_pages<'c>(
    first: &str,
    cursor: &'c str,
    second: &str,
) -> Vec<(Option<&'c str>, Vec<Value>, Option<&'c str>)> {
    vec![
        (None, vec![tool_with(first, json!({}))], Some(cursor)),
        (Some(cursor), vec![tool_with(second, json!({}))], None),
    ]
}

// A cursor belongs to the server life (the session) that gave it (MCP 2026-07-28,
// server/utilities/pagination: cursors are opaque): a walk whose next page is answered on
// another session is walked again from its first page there, so a listing never mixes tools of
// two deployments.
#[tokio::test]
async fn a_start_whose_second_page_meets_a_redeploy_onto_legacy_lists_the_new_server_only() {
    let server = Modern::start().await;
    server.set_pages(two_pages("a", "c1", "b"));
    server.redeploy_at_cursor("c1", Era::Legacy, two_pages("x", "c1", "y"));
    let host = ready(&server).await;
    assert_eq!(host.tool_names("m").await, ["x", "y"]);
    assert_eq!(namespace(&host).await["protocolVersion"], LEGACY);
    assert_eq!(
        server.lines(),
        lines(&[
            "POST server/discover 200",
            "POST tools/list 200",
            "POST tools/list 400",
            "POST server/discover 400",
            "POST initialize 200",
            "POST notifications/initialized 202",
            "POST tools/list 200",
            "POST tools/list 200",
            "POST tools/list 200",
        ])
    );
    let cursors: Vec<Value> = server
        .steps("tools/list")
        .iter()
        .map(|s| s.params["cursor"].clone())
        .collect();
    assert_eq!(
        cursors,
        [
            json!(null),
            json!("c1"),
            json!("c1"),
            json!(null),
            json!("c1")
        ]
    );
    assert_eq!(call(&host, "x", json!({})).await, Ok("echo x {}".into()));
}

#[tokio::test]
async fn a_relisting_whose_second_page_meets_a_new_legacy_session_lists_the_new_server_only() {
    let server = Modern::start_in(Era::Legacy).await;
    server.set_pages(two_pages("a", "c1", "b"));
    let host = ready(&server).await;
    assert_eq!(host.tool_names("m").await, ["a", "b"]);
    server.redeploy_at_cursor("c1", Era::Legacy, two_pages("x", "c1", "y"));
    relist_by_a_miss(&host).await;
    assert_eq!(host.tool_names("m").await, ["x", "y"]);
    let relisting: Vec<String> = server.lines().into_iter().skip(5).collect();
    assert_eq!(
        relisting,
        lines(&[
            "POST tools/list 200",
            "POST tools/list 400",
            "POST initialize 200",
            "POST notifications/initialized 202",
            "POST tools/list 200",
            "POST tools/list 200",
            "POST tools/list 200",
        ])
    );
}

#[tokio::test]
async fn a_walk_that_meets_a_second_new_session_fails_the_start_which_is_tried_again() {
    let server = Modern::start_in(Era::Legacy).await;
    server.set_pages(two_pages("a", "c1", "b"));
    // The resent page meets `-32602` (an unknown cursor) on each new session: dropped too.
    server.redeploy_at_cursor("c1", Era::Legacy, two_pages("x", "c2", "y"));
    server.redeploy_at_cursor("c2", Era::Legacy, two_pages("p", "c3", "q"));
    let host = Host::new(json!({"m": entry(&server.url)}));
    host.wait_for(LIMIT, |l| {
        crate::support::hostile::server_entry(l, "m")["status"] == "error"
    })
    .await;
    let listing = host.listing(json!({})).await;
    assert_eq!(
        crate::support::hostile::server_entry(&listing, "m")["reason"],
        "the server's session changed twice during one tools/list walk (at page 2)",
        "{listing}"
    );
    host.ready("m", LIMIT).await;
    assert_eq!(host.tool_names("m").await, ["p", "q"]);
}

// A listing changes nothing on the server: a legacy `tools/list` whose event stream is cut
// before its answer (no event id to resume from) is issued once more with a new id, as a modern
// request is.
#[tokio::test]
async fn a_legacy_listing_page_whose_stream_is_cut_is_issued_again() {
    let server = Modern::start_in(Era::Legacy).await;
    let host = ready(&server).await;
    server.set_tools(vec![
        tool_with("echo", json!({})),
        tool_with("added", json!({})),
    ]);
    server.answer_next(
        "tools/list",
        Canned::Raw(200, Some("text/event-stream"), ": working\n\n".into()),
    );
    assert_eq!(
        call(&host, "added", json!({})).await,
        Ok("echo added {}".into())
    );
    let lists = server.steps("tools/list");
    assert_eq!(lists.len(), 3, "{:?}", server.lines());
    assert_ne!(lists[1].id, lists[2].id);
    assert!(lists[2].session);
}

#[tokio::test]
async fn no_listen_stream_without_the_list_changed_capability() {
    let server = Modern::start().await;
    let _host = ready(&server).await;
    let trail = server.settle(Duration::from_secs(1), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>(),
        lines(&["POST server/discover 200", "POST tools/list 200"])
    );
}

#[tokio::test]
async fn a_dropped_listen_stream_is_reopened_after_a_second() {
    let server = Modern::start().await;
    server.set_list_changed();
    let _host = ready(&server).await;
    server
        .wait_until(LIMIT, "an open stream", |_| server.open_listens() == 1)
        .await;
    let dropped = tokio::time::Instant::now();
    server.drop_listens();
    server
        .wait_until(LIMIT, "a second listen", |t| {
            t.iter()
                .filter(|s| s.method == "subscriptions/listen")
                .count()
                == 2
        })
        .await;
    assert!(
        dropped.elapsed() >= Duration::from_millis(900),
        "{:?}",
        dropped.elapsed()
    );
    let listens = server.steps("subscriptions/listen");
    assert_ne!(listens[0].id, listens[1].id);
    assert_eq!(server.count("server/discover"), 1, "{:?}", server.lines());
}

/// A listing older than its ttl is refreshed when next used, once; a server-chosen ttl below
/// the 5 s floor (`ttlMs: 1`) counts as 5 s, so using the listing does not re-list it every
/// time.
#[tokio::test]
async fn a_listing_older_than_its_ttl_is_refreshed_when_used_and_not_more_often() {
    let server = Modern::start().await;
    server.set_cache(json!(1), json!("private"));
    let host = ready(&server).await;
    for _ in 0..5 {
        namespace(&host).await;
        call(&host, "echo", json!({})).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(server.count("tools/list"), 1, "{:?}", server.lines());
    tokio::time::sleep(Duration::from_millis(5_000)).await;
    assert_eq!(server.count("tools/list"), 1, "no refresh until used");
    namespace(&host).await;
    namespace(&host).await;
    call(&host, "echo", json!({})).await.unwrap();
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        trail.iter().filter(|s| s.method == "tools/list").count(),
        2,
        "{:?}",
        server.lines()
    );
}

#[tokio::test]
async fn a_listing_with_ttl_zero_or_absent_is_not_refreshed_by_time() {
    for ttl in [json!(0), Value::Null] {
        let server = Modern::start().await;
        server.set_cache(ttl.clone(), Value::Null);
        let host = ready(&server).await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        namespace(&host).await;
        call(&host, "echo", json!({})).await.unwrap();
        let trail = server.settle(Duration::from_millis(300), LIMIT).await;
        assert_eq!(
            trail.iter().map(Step::line).collect::<Vec<_>>(),
            lines(&[
                "POST server/discover 200",
                "POST tools/list 200",
                "POST tools/call 200"
            ]),
            "ttl {ttl}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 4. calls

#[tokio::test]
async fn an_input_required_result_fails_at_once_naming_what_was_asked() {
    let server = Modern::start().await;
    server.set_call(
        "echo",
        Call::InputRequired(json!({
            "login": {"method": "elicitation/create", "params": {"message": "user?",
                      "requestedSchema": {"type": "object"}}},
            "sample": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1}},
        })),
    );
    let host = ready(&server).await;
    let failed = call(&host, "echo", json!({})).await.unwrap_err();
    assert_eq!(failed.kind, ToolErrorKind::Backend);
    // lead: exact text
    assert!(failed.message.contains("elicitation/create"), "{failed:?}");
    assert!(
        failed.message.contains("sampling/createMessage"),
        "{failed:?}"
    );
    assert!(!failed.message.contains("opaque-state-1"), "{failed:?}");
    let trail = server.settle(Duration::from_millis(500), LIMIT).await;
    assert_eq!(trail.iter().filter(|s| s.method == "tools/call").count(), 1);
}

#[tokio::test]
async fn a_missing_client_capability_error_fails_at_once_naming_it() {
    let server = Modern::start().await;
    server.set_call("echo", Call::MissingCapability(json!({"elicitation": {}})));
    let host = ready(&server).await;
    let failed = call(&host, "echo", json!({})).await.unwrap_err();
    assert_eq!(failed.kind, ToolErrorKind::Backend);
    assert!(failed.message.contains("elicitation"), "{failed:?}"); // lead: exact text
    let trail = server.settle(Duration::from_millis(500), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>(),
        lines(&[
            "POST server/discover 200",
            "POST tools/list 200",
            "POST tools/call 400"
        ])
    );
}

#[tokio::test]
async fn dropping_a_call_closes_its_stream_and_sends_nothing_else() {
    let server = Modern::start().await;
    server.set_call("echo", Call::Hold(Duration::from_secs(60)));
    let host = ready(&server).await;
    {
        let pending = call(&host, "echo", json!({}));
        tokio::pin!(pending);
        let arrived = async {
            server
                .wait_until(LIMIT, "the call", |t| {
                    t.iter().any(|s| s.method == "tools/call")
                })
                .await
        };
        tokio::select! {
            _ = &mut pending => panic!("the held call answered"),
            _ = arrived => {}
        }
    }
    let trail = server
        .wait_until(LIMIT, "the closed stream", |t| {
            t.iter().any(|s| s.verb == "CLOSED")
        })
        .await;
    let call_id = trail
        .iter()
        .find(|s| s.method == "tools/call")
        .unwrap()
        .id
        .clone();
    let trail = server.settle(Duration::from_millis(500), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>(),
        lines(&[
            "POST server/discover 200",
            "POST tools/list 200",
            "POST tools/call 200",
            "CLOSED tools/call 200",
        ])
    );
    assert_eq!(trail[3].id, call_id);
    drop(host);
}

#[tokio::test]
async fn a_response_stream_cut_before_the_answer_is_reissued_once_with_a_new_id() {
    let server = Modern::start().await;
    server.set_call("echo", Call::CutFirst);
    let host = ready(&server).await;
    assert_eq!(
        call(&host, "echo", json!({"x": 1})).await,
        Ok("echo echo {\"x\":1}".into())
    );
    let calls = server.steps("tools/call");
    assert_eq!(calls.len(), 2, "{:?}", server.lines());
    assert_ne!(calls[0].id, calls[1].id);
    assert_eq!(calls[0].params, calls[1].params);
}

#[tokio::test]
async fn a_response_stream_cut_twice_fails_after_one_reissue() {
    let server = Modern::start().await;
    server.set_call("echo", Call::CutAlways);
    let host = ready(&server).await;
    let failed = call(&host, "echo", json!({})).await.unwrap_err();
    assert_eq!(failed.kind, ToolErrorKind::Transport, "{failed:?}"); // lead: exact text
    let trail = server.settle(Duration::from_millis(500), LIMIT).await;
    assert_eq!(trail.iter().filter(|s| s.method == "tools/call").count(), 2);
}

#[tokio::test]
async fn an_sse_answer_is_read() {
    let server = Modern::start().await;
    server.set_call("echo", Call::Sse);
    let host = ready(&server).await;
    assert_eq!(
        call(&host, "echo", json!({})).await,
        Ok("echo echo {}".into())
    );
}

// ---------------------------------------------------------------------------------------------
// 5. pagination (both eras)

#[tokio::test]
async fn an_empty_next_cursor_is_followed_and_its_repeat_ends_the_walk() {
    for era in [Era::Modern, Era::Legacy] {
        let server = Modern::start_in(era).await;
        server.set_pages(vec![
            (None, vec![tool_with("a", json!({}))], Some("")),
            (Some(""), vec![tool_with("b", json!({}))], Some("")),
        ]);
        let host = ready(&server).await;
        let listing = namespace(&host).await;
        let names: Vec<&Value> = listing["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["name"])
            .collect();
        assert_eq!(names, [&json!("a"), &json!("b")], "{era:?}");
        let lists = server.steps("tools/list");
        assert_eq!(lists.len(), 2, "{era:?}: {:?}", server.lines());
        assert_eq!(lists[0].params.get("cursor"), None, "{era:?}");
        assert_eq!(lists[1].params["cursor"], "", "{era:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// bad input

#[tokio::test]
async fn a_huge_meta_in_results_is_neither_shown_nor_fatal() {
    let server = Modern::start().await;
    server.set_result_meta(json!({"io.example/blob": "m".repeat(1_000_000)}));
    let host = ready(&server).await;
    let listing = host
        .call("get_dynamic_tools", json!({"namespace": "m"}))
        .await
        .unwrap();
    assert!(!listing.contains("mmmmmmmmmm"), "{} bytes", listing.len());
    assert_eq!(
        call(&host, "echo", json!({})).await,
        Ok("echo echo {}".into())
    );
}

#[tokio::test]
async fn configured_secrets_never_show_in_errors_or_logs() {
    let (_capture, logs) = logs::capture("trace");
    const KEY: &str = "modern-env-secret-9f8e7d";
    const BEARER: &str = "sk-modern-bearer-1a2b3c";
    // SAFETY: set before the Pack that reads it; other tests read the environment only through
    // `std::env`, which takes the same process-wide lock as `set_var`, and none reads this name.
    unsafe { std::env::set_var("MCP_MODERN_SECRET_KEY", KEY) };
    let server = Modern::start().await;
    // The server quotes the secrets back everywhere it can.
    server.answer_next(
        "server/discover",
        Canned::Error(
            400,
            -32022,
            format!("no: {KEY} {BEARER}"),
            json!({"supported": [KEY, BEARER], "requested": BEARER}),
        ),
    );
    let host = Host::new(json!({"m": {"url": server.url, "headers": {
        "Authorization": format!("Bearer {BEARER}"),
        "X-Key": "${env:MCP_MODERN_SECRET_KEY}",
    }}}));
    let failed = host.failed("m", LIMIT).await;
    let shown = failed.to_string();
    let called = call(&host, "echo", json!({})).await.unwrap_err();
    drop(host);
    let logs = logs.text();
    for secret in [KEY, BEARER] {
        assert!(
            !shown.contains(secret),
            "the listing shows {secret}: {shown}"
        );
        assert!(
            !called.message.contains(secret),
            "the error shows {secret}: {called:?}"
        );
        assert!(
            !logs.contains(secret),
            "a log line shows {secret}: {:?}",
            logs.lines()
                .filter(|l| l.contains(secret))
                .collect::<Vec<_>>()
        );
    }
    let discover = server.steps("server/discover");
    let discover = discover.first().expect("a server/discover was sent");
    assert_eq!(
        discover.meta,
        client_meta(MODERN),
        "the headers are not in _meta"
    );
}

// ---------------------------------------------------------------------------------------------
// A listing is read by, and named after, the session its pages were answered on.

/// A legacy server restarted onto the same version with new instructions: the re-listing's
/// page meets the expired session, a renewal of the same version answers it, and the listing
/// names the instructions of that session (the one its tools came from).
#[tokio::test]
async fn a_relisting_on_a_renewed_legacy_session_of_the_same_version_names_its_instructions() {
    let server = Modern::start_in(Era::Legacy).await;
    server.set_instructions("first words");
    let host = ready(&server).await;
    let before = namespace(&host).await;
    assert_eq!(before["protocolVersion"], LEGACY, "{before}");
    assert_eq!(before["instructions"], "first words", "{before}");
    server.restart(Era::Legacy);
    server.set_instructions("second words");
    // Lets the client's pool see the cut connections (a legacy request on a cut connection is
    // not issued again).
    tokio::time::sleep(Duration::from_millis(200)).await;
    relist_by_a_miss(&host).await;
    let trail: Vec<String> = server
        .settle(Duration::from_millis(300), LIMIT)
        .await
        .iter()
        .map(Step::line)
        .collect();
    assert_eq!(
        trail.iter().filter(|l| *l == "POST initialize 200").count(),
        2,
        "{trail:#?}"
    );
    assert_eq!(
        trail.last().map(String::as_str),
        Some("POST tools/list 200"),
        "{trail:#?}"
    );
    let listing = namespace(&host).await;
    assert_eq!(listing["protocolVersion"], LEGACY, "{listing}");
    assert_eq!(
        listing["instructions"], "second words",
        "{listing} {trail:#?}"
    );
}

/// A modern re-listing whose page is refused like legacy re-probes and the server is modern
/// still: the new `server/discover` declares new instructions, the page is answered on that
/// route, and the listing names them (versions equal, instructions not).
#[tokio::test]
async fn a_relisting_after_a_reprobe_onto_the_same_era_names_the_new_instructions() {
    let server = Modern::start().await;
    server.set_instructions("modern words");
    let host = ready(&server).await;
    assert_eq!(namespace(&host).await["instructions"], "modern words");
    server.set_instructions("rediscovered words");
    server.answer_next(
        "tools/list",
        Canned::Raw(400, Some("text/plain"), NO_SESSION.to_string()),
    );
    relist_by_a_miss(&host).await;
    let trail = server.lines();
    assert_eq!(
        trail[2..],
        lines(&[
            "POST tools/list 400",
            "POST server/discover 200",
            "POST tools/list 200",
        ]),
        "{trail:#?}"
    );
    let listing = namespace(&host).await;
    assert_eq!(listing["protocolVersion"], MODERN, "{listing}");
    assert_eq!(listing["instructions"], "rediscovered words", "{listing}");
}

/// The start path: the first `server/discover` declares instructions, the first page is
/// refused like legacy, the probe's second `server/discover` declares others and the page is
/// answered on that route: the listing names the second route's instructions.
#[tokio::test]
async fn a_start_answered_after_a_reprobe_names_the_instructions_of_the_route_it_came_from() {
    let server = Modern::start().await;
    server.set_instructions("second words");
    server.answer_next(
        "server/discover",
        Canned::Result(json!({"supportedVersions": [MODERN],
                              "capabilities": {"tools": {}},
                              "serverInfo": {"name": "modern-fake", "version": "0"},
                              "instructions": "first words"})),
    );
    server.answer_next(
        "tools/list",
        Canned::Raw(400, Some("text/plain"), NO_SESSION.to_string()),
    );
    let host = ready(&server).await;
    let trail = server.lines();
    assert_eq!(
        trail,
        lines(&[
            "POST server/discover 200",
            "POST tools/list 400",
            "POST server/discover 200",
            "POST tools/list 200",
        ]),
        "{trail:#?}"
    );
    let listing = namespace(&host).await;
    assert_eq!(listing["instructions"], "second words", "{listing}");
}

/// A re-listing begun on a modern route (which declared `tools`) whose page is answered, after
/// the restart onto legacy, on a legacy session that declares no `tools`: the page is judged by
/// the legacy session's declaration (a server that declares no `tools` and answers
/// `tools/list` with a JSON-RPC error has none; ARCHITECTURE: "a listing reads its pages by
/// what the session they go out on declared"), so the server is ready with no tools, named
/// 2025-11-25.
#[tokio::test]
async fn a_relisting_answered_on_legacy_is_judged_by_the_legacy_declaration() {
    let server = Modern::start_in(Era::Dual).await;
    let host = ready(&server).await;
    assert_eq!(namespace(&host).await["protocolVersion"], MODERN);
    server.restart(Era::Legacy);
    server.set_capabilities(json!({}));
    server.answer_next(
        "tools/list",
        Canned::Raw(400, Some("text/plain"), NO_SESSION.to_string()),
    );
    server.answer_next(
        "tools/list",
        Canned::Error(200, -32603, "Internal error".into(), Value::Null),
    );
    relist_by_a_miss(&host).await;
    let trail = server.lines();
    assert_eq!(
        trail[2..],
        lines(&[
            "POST tools/list 400",
            "POST server/discover 400",
            "POST initialize 200",
            "POST notifications/initialized 202",
            "POST tools/list 200",
        ]),
        "{trail:#?}"
    );
    let listing = namespace(&host).await;
    assert_eq!(listing["protocolVersion"], LEGACY, "{listing}");
    assert_eq!(listing["status"], "ready", "{listing}");
    assert_eq!(listing["tools"], json!([]), "{listing}");
}
