//! Protocol eras (README "Protocol eras"; MCP 2026-07-28 "Versioning" and "Streamable HTTP"):
//! era detection by `server/discover`, the per-request `_meta` and mirrored headers,
//! `subscriptions/listen`, and the fallbacks and re-probes between the modern and the legacy
//! era, with the doubts that must cost one probe, not a storm. Most tests drive the Pack against
//! a [`Modern`] fake on loopback and pin the whole wire trail; the `fake_*` tests prove the
//! fake itself.
//!
//! Where a test must guess the client's exact wording it asserts the structure (kind, and that
//! the message names the thing) and says `// lead: exact text`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

use crate::support::answers::{
    Answer, call_t_times, heartbeat, initialize, legacy_with, modern_with, namespace, tool_names,
};
use crate::support::hostile::{
    self, Reply, Server, entry, result, rpc_error, server_entry, standard, text_result, tool,
    tools_page,
};
use crate::support::modern::{
    Call, Canned, Era, LEGACY, MODERN, Modern, NO_SESSION, Step, client_meta, sentinel, tool_with,
};
use crate::support::{Host, logs};

pub(crate) const LIMIT: Duration = Duration::from_secs(10);

/// A Pack with the one server `m` at `server`, waited on until ready.
pub(crate) async fn ready(server: &Modern) -> Host {
    let host = Host::new(json!({"m": entry(&server.url)}));
    host.ready("m", LIMIT).await;
    host
}

/// `call_dynamic_tool` of `tool` on `m` with `arguments`.
pub(crate) async fn call(host: &Host, tool: &str, arguments: Value) -> Result<String, ToolError> {
    let args = json!({"namespace": "m", "toolName": tool, "arguments": arguments});
    host.call("call_dynamic_tool", args).await
}

pub(crate) fn trail_lines(trail: &[Step]) -> Vec<String> {
    trail.iter().map(Step::line).collect()
}

/// A response stream that ends before any response: the request is lost on the way.
fn cut() -> Canned {
    Canned::Raw(200, Some("text/event-stream"), ": working\n\n".into())
}

/// A server that is modern (no `listChanged`, tool `t`) until `legacy` is set, then a 2025-era
/// server (discover plain 400, sessions `s-N`, a request without a session refused with the
/// plain-text 400 of older SDKs). `flap` answers the first modern `tools/call` with a plain
/// 400 (a proxy that flapped once).
async fn flipping(legacy: Arc<AtomicBool>, flap: bool) -> Server {
    hostile::serve_all(move |req| {
        let legacy = legacy.load(Ordering::SeqCst);
        async move {
            let session = req.header("mcp-session-id");
            if !legacy {
                return match req.method() {
                    "server/discover" => Reply::json(&result(
                        &req.id(),
                        json!({"supportedVersions": ["2026-07-28"],
                               "capabilities": {"tools": {}},
                               "serverInfo": {"name": "flip", "version": "0"}}),
                    )),
                    "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
                    "tools/call" if flap && req.nth == 0 => {
                        Reply::raw(400, "text/html", "<html>400 Bad Request</html>")
                    }
                    "tools/call" => Reply::json(&text_result(&req.id(), "modern ok")),
                    _ => Reply::raw(400, "text/plain", ""),
                };
            }
            match (req.http_method.as_str(), req.method()) {
                ("GET", _) => Reply::raw(405, "text/plain", ""),
                ("DELETE", _) => Reply::raw(200, "text/plain", ""),
                (_, "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
                (_, "initialize") => {
                    let n = req.nth + 1;
                    initialize(&req.id(), &format!("s-{n}"))
                }
                _ if session.is_none() && req.rpc.get("id").is_some() => Reply::raw(
                    400,
                    "text/plain",
                    "Bad Request: No valid session ID provided",
                ),
                (_, "tools/list") => {
                    Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
                }
                (_, "tools/call") => Reply::json(&text_result(
                    &req.id(),
                    &format!("legacy ok on {}", session.unwrap_or_default()),
                )),
                _ => standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
            }
        }
    })
    .await
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
        while namespace(host, "m").await["protocolVersion"] != version {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(LIMIT, named).await.is_err() {
        panic!(
            "the protocol version never became {version}: {}",
            namespace(host, "m").await
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

pub(crate) fn lines(list: &[&str]) -> Vec<String> {
    list.iter().map(|l| l.to_string()).collect()
}

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

/// A `-32022` whose `data.supported` quotes a configured env secret longer than a shown
/// version (32 bytes): the versions are scrubbed whole before they are cut (README
/// "Configuration": scrubbed first, cut second), so neither the reason nor a log line shows a
/// prefix of the secret.
#[tokio::test]
async fn a_long_secret_quoted_in_a_version_refusal_leaves_no_prefix() {
    let (_capture, logs) = logs::capture("trace");
    const SECRET: &str = "attack2-env-secret-0123456789abcdefghijklmnop";
    // SAFETY: set before the Pack that reads it; other tests read the environment only through
    // `std::env`, which takes the same process-wide lock as `set_var`, and none reads this name.
    unsafe { std::env::set_var("MCP_ATTACK2_LONG_SECRET", SECRET) };
    let server = Modern::start().await;
    server.set_supported(json!([SECRET]));
    let host = Host::new(json!({"m": {"url": server.url, "headers": {
        "X-Api-Key": "${env:MCP_ATTACK2_LONG_SECRET}",
    }}}));
    let failed = host.failed("m", LIMIT).await;
    drop(host);
    let reason = failed["reason"].as_str().unwrap().to_string();
    let prefix = &SECRET[..16];
    assert!(
        !reason.contains(prefix),
        "the reason shows the start of the secret: {reason}"
    );
    let logs = logs.text();
    assert!(
        !logs.contains(prefix),
        "a log line shows the start of the secret: {:?}",
        logs.lines()
            .filter(|l| l.contains(prefix))
            .collect::<Vec<_>>()
    );
}

/// MCP 2026-07-28 basic/versioning: a refused version comes with the server's `supported`
/// list, from which the client picks a mutual version. A modern server redeployed as a dual-era
/// build without 2026-07-28 answers a modern call `-32022` naming only `2025-11-25`: that shows
/// the other era, so the client probes, initializes, and the call is answered in the legacy era.
#[tokio::test]
async fn a_modern_server_that_drops_2026_07_28_for_a_legacy_version_is_spoken_to_in_legacy() {
    let server = Modern::start().await;
    let host = ready(&server).await;
    server.set_supported(json!([LEGACY]));
    server.restart(Era::Dual);
    let answer = call(&host, "echo", json!({"x": 1})).await;
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        answer,
        Ok("echo echo {\"x\":1}".into()),
        "{:?}",
        trail_lines(&trail)
    );
    let second = call(&host, "echo", json!({"x": 2})).await;
    assert_eq!(second, Ok("echo echo {\"x\":2}".into()));
    assert_eq!(namespace(&host, "m").await["protocolVersion"], LEGACY);
}

/// docs/connection.md: the era is decided again only when a modern request meets a plain
/// refusal (no JSON-RPC error). A `400` carrying a JSON-RPC error that answers the request's own
/// id was read by a modern server: it is that call's error, with no probe and no resend.
#[tokio::test]
async fn a_400_with_a_json_rpc_error_for_the_call_is_no_era_flip() {
    let server = Modern::start().await;
    let host = ready(&server).await;
    let mut answers = Vec::new();
    for _ in 0..2 {
        server.answer_next(
            "tools/call",
            Canned::Error(
                400,
                -32602,
                "Invalid params: x must be positive".into(),
                Value::Null,
            ),
        );
        answers.push(call(&host, "echo", json!({"x": -1})).await);
    }
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        trail_lines(&trail),
        [
            "POST server/discover 200",
            "POST tools/list 200",
            "POST tools/call 400",
            "POST tools/call 400",
        ]
    );
    for answer in answers {
        let refused = answer.unwrap_err();
        assert_eq!(refused.kind, ToolErrorKind::InvalidArguments, "{refused:?}");
        assert_eq!(
            refused.message,
            "server \"m\" refused the arguments of tool \"echo\": Invalid params: x must be positive; see the schema with mcp/get_dynamic_tools {\"namespace\":\"m\",\"toolName\":\"echo\"}"
        );
    }
}

/// docs/connection.md: a lost reply is re-issued once per call (MCP 2026-07-28, transports
/// "Receiving Messages"). A call whose stream is cut, whose re-issue meets `HeaderMismatch`, and
/// whose retry after the re-listing is cut again is not re-issued a second time: three
/// `tools/call` POSTs, a `transport` error.
#[tokio::test]
async fn a_call_is_re_issued_at_most_once_even_across_a_header_mismatch_retry() {
    let server = Modern::start().await;
    let host = ready(&server).await;
    server.answer_next("tools/call", cut());
    server.answer_next(
        "tools/call",
        Canned::Error(400, -32020, "Header mismatch".into(), Value::Null),
    );
    server.answer_next("tools/call", cut());
    let answer = call(&host, "echo", json!({})).await;
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    let calls: Vec<String> = trail
        .iter()
        .filter(|s| s.method == "tools/call")
        .map(Step::line)
        .collect();
    assert_eq!(
        calls,
        [
            "POST tools/call 200",
            "POST tools/call 400",
            "POST tools/call 200",
        ],
        "answered {answer:?}"
    );
    let failed = answer.unwrap_err();
    assert_eq!(failed.kind, ToolErrorKind::Transport, "{failed:?}");
}

/// docs/configuration.md: `headers` may not set what the client sends itself; in the modern
/// era that includes `Mcp-Method`, `Mcp-Name` and `Mcp-Param-…` (MCP 2026-07-28, transports
/// "Request Metadata"). The entry is refused, and nothing is sent.
#[tokio::test]
async fn configured_modern_metadata_headers_are_refused() {
    let server = Modern::start().await;
    for name in ["Mcp-Method", "mcp-name", "Mcp-Param-Region"] {
        let host = Host::new(json!({"m": {"url": server.url, "headers": {name: "tools/call"}}}));
        let listing = host.settled(LIMIT).await;
        let entry = &listing["servers"][0];
        assert_eq!(entry["status"], "error", "{entry}");
        assert_eq!(
            entry["reason"],
            format!("header \"{name}\" is set by the MCP client itself and may not be configured"),
            "{entry}"
        );
        assert_eq!(entry.get("retryInSeconds"), None, "{entry}");
    }
    assert_eq!(server.lines(), Vec::<String>::new());
}

/// MCP 2026-07-28 transports: a modern server answers a method it does not implement with
/// `404` and a JSON-RPC `-32601`. A server known legacy, redeployed as a modern one, answers
/// `initialize` that way: the client probes again at once and starts in the modern era.
#[tokio::test]
async fn initialize_answered_404_method_not_found_by_a_redeployed_modern_server_reprobes() {
    let server = Modern::start_in(Era::Legacy).await;
    server.answer_next(
        "initialize",
        Canned::Raw(503, Some("text/plain"), "busy".into()),
    );
    let host = Host::new(json!({"m": entry(&server.url)}));
    server
        .wait_until(LIMIT, "the failed initialize", |t| {
            t.iter().any(|s| s.line() == "POST initialize 503")
        })
        .await;
    server.restart(Era::Modern);
    for _ in 0..50 {
        server.answer_next(
            "initialize",
            Canned::Error(404, -32601, "Method not found".into(), Value::Null),
        );
    }
    let settled = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let listing = namespace(&host, "m").await;
            if listing["status"] == "ready" {
                return listing;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let listing = settled
        .unwrap_or_else(|_| panic!("never ready; the trail: {:?}", trail_lines(&server.trail())));
    assert_eq!(listing["protocolVersion"], MODERN, "{listing}");
}

/// MCP 2026-07-28 basic/versioning: the client picks a mutual version from the whole
/// `supported` list; only the reason's copy of it is bounded (16 versions). A server naming
/// 2026-07-28 17th is started in it.
#[tokio::test]
async fn a_mutual_version_beyond_the_sixteenth_listed_is_still_found() {
    let server = Modern::start().await;
    let mut supported: Vec<String> = (0..16).map(|i| format!("2099-01-{:02}", i + 1)).collect();
    supported.push(MODERN.to_string());
    server.set_supported(json!(supported));
    // The probe's own answer refuses the version once, naming it 17th.
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
    let listing = host.settled(LIMIT).await;
    let entry = &listing["servers"][0];
    assert_eq!(entry["status"], "ready", "{entry}");
    assert_eq!(namespace(&host, "m").await["protocolVersion"], MODERN);
}

/// ARCHITECTURE "Invariants (eras)": no `DELETE` or `GET` goes to a modern server. A legacy
/// server redeployed as a modern one: the old session ended with the build that made it, and the
/// Pack's drop sends it no `DELETE`.
#[tokio::test]
async fn no_delete_goes_to_a_server_that_answered_the_old_session_as_a_modern_one() {
    let server = Modern::start_in(Era::Legacy).await;
    let host = ready(&server).await;
    server.restart(Era::Modern);
    // A first call may meet the pooled connection the restart cut (as in modern.rs).
    for _ in 0..3 {
        if call(&host, "echo", json!({})).await.is_ok() {
            break;
        }
    }
    assert_eq!(namespace(&host, "m").await["protocolVersion"], MODERN);
    drop(host);
    let trail = server.settle(Duration::from_millis(1500), LIMIT).await;
    let after: Vec<String> = trail
        .iter()
        .filter(|s| matches!(s.verb.as_str(), "DELETE" | "GET"))
        .map(Step::line)
        .collect();
    assert_eq!(after, Vec::<String>::new(), "{:?}", trail_lines(&trail));
}

/// docs/connection.md "How the era is chosen": the era is decided again only when a modern
/// request is answered with a plain `400`, `404`, `405` or `406` — "no JSON-RPC error answering
/// its own id". A modern server that refuses `subscriptions/listen` with a `400` carrying a
/// JSON-RPC error for that request's own id read it as a request of its era: that is the
/// stream's failure (opened again after 1 s), not a restart onto the legacy era, so the server
/// is not probed again and its tools are not listed again for a new route.
#[tokio::test]
async fn a_listen_refused_with_a_json_rpc_error_for_its_own_id_is_no_era_flip() {
    let server = Modern::start().await;
    server.set_list_changed();
    server.answer_next(
        "subscriptions/listen",
        Canned::Error(
            400,
            -32602,
            "Invalid params: unknown notifications".into(),
            Value::Null,
        ),
    );
    let _host = ready(&server).await;
    server
        .wait_until(LIMIT, "a second listen", |t| {
            t.iter()
                .filter(|s| s.method == "subscriptions/listen")
                .count()
                == 2
        })
        .await;
    let trail = server.settle(Duration::from_millis(500), LIMIT).await;
    assert_eq!(
        trail_lines(&trail),
        [
            "POST server/discover 200",
            "POST tools/list 200",
            "POST subscriptions/listen 400",
            "POST subscriptions/listen 200",
            // The acknowledgment's one re-listing.
            "POST tools/list 200",
        ]
    );
}

/// Calls `echo` with `args` on `m`, once more when the first call met the pooled connection
/// the restart cut (as in modern.rs); it answers `echo echo <args>` (else the panic shows the
/// trail once `server` settled).
async fn echo_after_restart(host: &Host, server: &Modern, args: Value) {
    let mut answer = call(host, "echo", args.clone()).await;
    if answer
        .as_ref()
        .is_err_and(|e| e.kind == runvil_plugin::ToolErrorKind::Transport)
    {
        answer = call(host, "echo", args.clone()).await;
    }
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        answer,
        Ok(format!("echo echo {args}")),
        "{:?}",
        trail_lines(&trail)
    );
}

/// docs/connection.md "How the era is chosen": the era is decided again when a modern request
/// is answered "with a `-32022` naming only legacy versions this client speaks (the request was
/// refused, so it is sent once more after the new start)" — a JSON-RPC error, whatever the
/// HTTP status carrying it (the probe's rule reads modern errors "with any status" too). A
/// server redeployed without 2026-07-28 that refuses a call with that error in a `200` is
/// probed, initialized, and the call is answered in the legacy era.
#[tokio::test]
async fn a_legacy_only_version_refusal_in_a_200_reply_flips_to_legacy() {
    let server = Modern::start().await;
    let host = ready(&server).await;
    server.set_supported(json!([LEGACY]));
    server.restart(Era::Dual);
    server.answer_next(
        "tools/call",
        Canned::Error(
            200,
            -32022,
            "Unsupported protocol version".into(),
            json!({"supported": [LEGACY], "requested": "2026-07-28"}),
        ),
    );
    echo_after_restart(&host, &server, json!({"x": 1})).await;
    assert_eq!(namespace(&host, "m").await["protocolVersion"], LEGACY);
}

/// docs/connection.md "How the era is chosen": the era is decided again when "a legacy
/// session's request [is] answered with a modern error" (ARCHITECTURE "The connection machine":
/// `Era(_) ──answered the way the other era does──▶ Unknown`, the request resent once). A legacy
/// server redeployed as a modern one that refuses the old session's call with `-32022` (naming
/// only 2026-07-28) in a `200` reply is probed again, and the call is answered in the modern
/// era.
#[tokio::test]
async fn a_modern_error_in_a_200_reply_to_a_legacy_session_flips_to_modern() {
    let server = Modern::start_in(Era::Legacy).await;
    let host = ready(&server).await;
    server.restart(Era::Modern);
    server.answer_next(
        "tools/call",
        Canned::Error(
            200,
            -32022,
            "Unsupported protocol version".into(),
            json!({"supported": ["2026-07-28"], "requested": LEGACY}),
        ),
    );
    echo_after_restart(&host, &server, json!({"x": 2})).await;
    assert_eq!(namespace(&host, "m").await["protocolVersion"], "2026-07-28");
}

/// A proxy in front of a modern server refuses one `tools/call` with a plain 400; the probe
/// finds the server still modern and the resend on the kept route succeeds — so that 400 was
/// a flap, not the server's own answer to `tools/call`. The change records it as an own answer
/// all the same (`Sessions::confirmed` for a `PlainRefusal`), so when the server is later
/// really redeployed onto the 2025 era, whose answer to a request without a session is that
/// same plain 400, no call ever probes again: every call fails for the Pack's life. README:
/// "It is decided again only when the server shows the other era — a restart onto another
/// version" (and without the earlier flap the same restart is followed by the next call).
/// The call after the restart is answered on a new legacy session (`legacy ok on s-1`).
#[tokio::test]
async fn a_plain_400_a_resend_got_past_does_not_hide_a_later_restart_onto_the_legacy_era() {
    let legacy = Arc::new(AtomicBool::new(false));
    let server = flipping(Arc::clone(&legacy), true).await;
    let host = Host::new(json!({ "flap": entry(&server.url) }));
    host.ready("flap", Duration::from_secs(10)).await;
    // The flap: refused once, probed, resent on the same route.
    assert_eq!(host.call_tool("flap", "t").await, Ok("modern ok".into()));
    assert_eq!(server.count("server/discover"), 2);
    legacy.store(true, Ordering::SeqCst);
    let answers = call_t_times(&host, "flap", 3).await;
    assert_eq!(
        answers,
        [
            Ok("legacy ok on s-1".to_string()),
            Ok("legacy ok on s-1".to_string()),
            Ok("legacy ok on s-1".to_string())
        ]
    );
}

/// A modern server declaring `tools.listChanged` whose endpoint answers `subscriptions/listen`
/// with a plain 404 (no listen endpoint), behind a load balancer whose two replicas differ in
/// their `instructions` (a rolling deploy: "v1" and "v2"). The issue: "A modern server whose
/// endpoint answers `subscriptions/listen` with a plain 404 must not be re-probed forever".
/// Each 404 makes the loop probe, and the probe finds the same modern era but other
/// `instructions` (a new route): that must not wake the loop into a tight loop of
/// `server/discover` + `subscriptions/listen` + `tools/list`. In 3 s: the start's probe and at
/// most two more. (A loop on a paused clock would never let virtual time move: this test runs
/// in real time.)
#[tokio::test]
async fn a_listen_404_on_replicas_with_other_instructions_does_not_probe_in_a_tight_loop() {
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => Reply::json(&result(
                &req.id(),
                json!({"supportedVersions": ["2026-07-28"],
                       "capabilities": {"tools": {"listChanged": true}},
                       "instructions": format!("replica v{}", req.nth % 2 + 1),
                       "serverInfo": {"name": "lb", "version": "0"}}),
            )),
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            "subscriptions/listen" => Reply::raw(404, "text/plain", "Not Found"),
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "lb": entry(&server.url) }));
    host.ready("lb", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let probes = server.count("server/discover");
    let listings = server.count("tools/list");
    assert!(
        probes <= 3,
        "{probes} server/discover, {listings} tools/list, {} subscriptions/listen in 3 s",
        server.count("subscriptions/listen")
    );
}

/// The call-path twin of the tight loop above: a modern server whose tool `t` is refused with
/// a plain 400 every time (the server's own answer, e.g. a gateway's argument check), behind
/// replicas whose `instructions` differ. With one replica, the first call probes once, resends,
/// meets the 400 again and records it as the server's own: later calls cost nothing more
/// (tests/it/bounds.rs). Here the probe finds other `instructions` and installs a new route
/// (`Moved`); the 400 met again on it is recorded all the same, so later calls cost nothing
/// more. After three calls: 2 `server/discover` (the start's and one probe), 2 `tools/list`
/// (the start's, and one for the new instructions).
#[tokio::test]
async fn a_modern_tools_own_plain_400_on_replicas_with_other_instructions_costs_no_probe_per_call()
{
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => Reply::json(&result(
                &req.id(),
                json!({"supportedVersions": ["2026-07-28"],
                       "capabilities": {"tools": {}},
                       "instructions": format!("replica v{}", req.nth % 2 + 1),
                       "serverInfo": {"name": "lb", "version": "0"}}),
            )),
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            "tools/call" => Reply::raw(400, "text/plain", "argument check failed"),
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "lb": entry(&server.url) }));
    host.ready("lb", Duration::from_secs(10)).await;
    for _ in 0..3 {
        assert!(host.call_tool("lb", "t").await.is_err());
    }
    let quiet = Duration::from_millis(500);
    let counts = server.counts_after(quiet, ["server/discover", "tools/list"]);
    assert_eq!(counts.await, [2, 2]);
}

/// A 2025-era tool that answers with its own `-32021` (in the JSON-RPC implementation range):
/// the first such answer makes the client ask `server/discover` again; the server is still
/// legacy, so the session is kept, the answer is the tool's error, and the same answer later
/// is no era signal: no new session per call, no more probes.
#[tokio::test]
async fn a_legacy_tools_own_modern_error_code_costs_one_probe_and_no_session() {
    let server = legacy_with(|req| {
        (req.method() == "tools/call").then(|| {
            Answer::Now(Reply::json(&rpc_error(
                &req.id(),
                -32021,
                "the upstream API wants a client capability",
            )))
        })
    })
    .await;
    let host = Host::new(json!({ "old": entry(&server.url) }));
    host.ready("old", Duration::from_secs(10)).await;
    for _ in 0..3 {
        let failed = host.call_tool("old", "t").await.unwrap_err();
        // The tool's own words: no client capability is missing (docs/connection.md "Verdicts").
        assert_eq!(failed.message, "the upstream API wants a client capability");
    }
    assert_eq!(server.count("initialize"), 1);
    assert_eq!(server.count("server/discover"), 2);
    assert_eq!(server.count("tools/call"), 3);
    assert_eq!(
        server
            .requests()
            .iter()
            .filter(|r| r.http_method == "DELETE")
            .count(),
        0
    );
    assert_eq!(
        server_entry(&host.listing(json!({})).await, "old")["status"],
        "ready"
    );
}

/// A modern server whose endpoint answers `subscriptions/listen` with a plain 404: one probe
/// finds it still modern, and the client asks for no listen stream again — no probe and no
/// re-listing every few seconds for the Pack's life.
#[tokio::test(start_paused = true)]
async fn a_modern_server_without_a_listen_endpoint_is_probed_once() {
    heartbeat();
    let server = modern_with(|_| Reply::raw(404, "text/plain", "Not Found")).await;
    let host = Host::new(json!({ "nolisten": entry(&server.url) }));
    host.ready("nolisten", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    let methods: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.method().to_string())
        .collect();
    assert_eq!(
        methods,
        [
            "server/discover",
            "tools/list",
            "subscriptions/listen",
            "server/discover"
        ]
    );
    assert_eq!(
        namespace(&host, "nolisten").await["protocolVersion"],
        "2026-07-28"
    );
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
    let mismatched = [
        // Mcp-Method says something else.
        vec![
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/list"),
            ("mcp-name", "sql"),
            ("mcp-param-region", "eu"),
        ],
        // Mcp-Name differs from params.name.
        with(&[("mcp-name", "other"), ("mcp-param-region", "eu")]),
        // The mirrored argument is missing, then wrong.
        with(&[("mcp-name", "sql")]),
        with(&[("mcp-name", "sql"), ("mcp-param-region", "us")]),
    ];
    for headers in mismatched {
        let (status, body) = post(&server.url, &headers, call("sql", "eu")).await;
        assert_eq!(
            (status, body["error"]["code"].clone()),
            (400, json!(-32020)),
            "{headers:?}"
        );
    }
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
    let listing = namespace(&host, "m").await;
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
    assert_eq!(namespace(&host, "m").await["protocolVersion"], "2025-06-18");
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
        assert_eq!(
            namespace(&host, "m").await["protocolVersion"],
            LEGACY,
            "{what}"
        );
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
        namespace(&host, "m").await;
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
    assert_eq!(namespace(&host, "m").await["protocolVersion"], LEGACY);
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
    assert_eq!(namespace(&host, "m").await["protocolVersion"], MODERN);
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
    assert_eq!(namespace(&host, "m").await["protocolVersion"], MODERN);
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
    assert_eq!(namespace(&host, "m").await["protocolVersion"], MODERN);
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
    assert_eq!(namespace(&host, "m").await["protocolVersion"], LEGACY);
    assert_eq!(
        server.lines()[..2],
        ["POST server/discover 400", "POST initialize 200"]
    );
}

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
    let listing = namespace(&host, "m").await;
    let listed = tool_names(&listing);
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

/// A HeaderMismatch re-lists because the tool's `inputSchema` may have changed (MCP 2026-07-28,
/// transports "Client Behavior"): the resend is checked against the schema the re-listing
/// brought, like the first send. Arguments that no longer match are `invalid_arguments` and
/// are not sent again.
#[tokio::test]
async fn a_resend_after_header_mismatch_is_checked_against_the_relisted_schema() {
    let server = Modern::start().await;
    server.set_tools(vec![tool_with("echo", json!({"n": {"type": "integer"}}))]);
    let host = ready(&server).await;
    // The server is redeployed: `n` is now a string, and the call meets HeaderMismatch.
    server.set_tools(vec![tool_with("echo", json!({"n": {"type": "string"}}))]);
    server.answer_next(
        "tools/call",
        Canned::Error(400, -32020, "Header mismatch".into(), Value::Null),
    );
    let refused = call(&host, "echo", json!({"n": 1})).await.unwrap_err();
    assert_eq!(
        refused,
        ToolError::new(
            ToolErrorKind::InvalidArguments,
            r#"the arguments do not match the inputSchema of tool "echo" of server "m": arguments/n: 1 is not of type "string"; see the schema with mcp/get_dynamic_tools {"namespace":"m","toolName":"echo"}"#
        )
    );
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        trail.iter().map(Step::line).collect::<Vec<_>>()[2..],
        ["POST tools/call 400", "POST tools/list 200"]
    );
}

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
    assert_eq!(namespace(&host, "m").await["protocolVersion"], MODERN);
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
    let listing = namespace(&host, "m").await;
    assert_eq!(listing["protocolVersion"], LEGACY, "{listing}");
    assert_eq!(listing["instructions"], "legacy words", "{listing}");
    assert_eq!(
        call(&host, "echo", json!({})).await,
        Ok("echo echo {}".into())
    );
}

#[tokio::test]
async fn a_start_whose_second_page_meets_a_redeploy_onto_legacy_lists_the_new_server_only() {
    let server = Modern::start().await;
    server.set_pages(two_pages("a", "c1", "b"));
    server.redeploy_at_cursor("c1", Era::Legacy, two_pages("x", "c1", "y"));
    let host = ready(&server).await;
    assert_eq!(host.tool_names("m").await, ["x", "y"]);
    assert_eq!(namespace(&host, "m").await["protocolVersion"], LEGACY);
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

/// A legacy server restarted onto the same version with new instructions: the re-listing's
/// page meets the expired session, a renewal of the same version answers it, and the listing
/// names the instructions of that session (the one its tools came from).
#[tokio::test]
async fn a_relisting_on_a_renewed_legacy_session_of_the_same_version_names_its_instructions() {
    let server = Modern::start_in(Era::Legacy).await;
    server.set_instructions("first words");
    let host = ready(&server).await;
    let before = namespace(&host, "m").await;
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
    let listing = namespace(&host, "m").await;
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
    assert_eq!(namespace(&host, "m").await["instructions"], "modern words");
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
    let listing = namespace(&host, "m").await;
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
    let listing = namespace(&host, "m").await;
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
    assert_eq!(namespace(&host, "m").await["protocolVersion"], MODERN);
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
    let listing = namespace(&host, "m").await;
    assert_eq!(listing["protocolVersion"], LEGACY, "{listing}");
    assert_eq!(listing["status"], "ready", "{listing}");
    assert_eq!(listing["tools"], json!([]), "{listing}");
}

/// A resumption's refusal is judged by the one verdict like every other answer
/// (docs/connection.md "Verdicts"): a legacy server restarts onto 2026-07-28 while a call's
/// event stream is cut after event `e1`, and the resumption (`GET` + `Last-Event-ID`) is
/// refused `400 -32022`. The era is asked again, the server moves to its modern route and its
/// listing becomes the new build's without another call; no `notifications/cancelled` goes to
/// the legacy session of a server found modern.
#[tokio::test]
async fn a_resumption_refused_by_the_other_era_asks_the_era_again() {
    let modern = Arc::new(AtomicBool::new(false));
    let restarted = Arc::clone(&modern);
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": "p", "progress": 1}});
    let server = hostile::serve_all(move |req| {
        let reply = if restarted.load(Ordering::SeqCst) {
            match crate::support::answers::restarted_build(&req) {
                Some(reply) => reply,
                // A modern error answering no id: what the restarted server gives a legacy
                // request (here the resumption's GET).
                None => Reply::raw(
                    400,
                    "application/json",
                    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32022,
                           "message": "Unsupported protocol version",
                           "data": {"supported": ["2026-07-28"], "requested": "2025-06-18"}}})
                    .to_string(),
                ),
            }
        } else {
            match (req.http_method.as_str(), req.method()) {
                ("POST", "server/discover") => Reply::raw(400, "text/plain", "Bad Request"),
                ("POST", "tools/list") => {
                    Reply::json(&tools_page(&req.id(), vec![tool("old", "old")], None))
                }
                ("POST", "tools/call") => {
                    // The restart happens while the call runs: its stream is cut after e1.
                    restarted.store(true, Ordering::SeqCst);
                    crate::support::answers::cut_after(format!(
                        "retry: 100\nid: e1\ndata: {progress}\n\n"
                    ))
                }
                _ => standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
            }
        };
        async move { reply }
    })
    .await;
    let host = Host::new(json!({"s": {"url": server.url}}));
    host.ready("s", LIMIT).await;
    assert_eq!(host.tool_names("s").await, ["old"]);
    // Whatever the call's outcome (it may have run, so it is not sent again), the era is
    // what this test is about.
    let _ = tokio::time::timeout(LIMIT, host.call_tool("s", "old"))
        .await
        .expect("the call returns");
    host.until_tools(
        "s",
        &["new"],
        Duration::from_secs(8),
        &server,
        "still the old build's listing, no era probe after the resumption's -32022",
    )
    .await;
    assert_eq!(server.count("notifications/cancelled"), 0);
}
