//! Cases of the modern era (MCP 2026-07-28) and its fallbacks found by an adversarial review:
//! each test says what the contract (README, ARCHITECTURE, docs/, or the MCP 2026-07-28 text)
//! promises. They drive the Pack through the `runvil-plugin` contract against the [`Modern`]
//! fake on loopback.

use std::time::Duration;

use runvil_plugin::ToolErrorKind;
use serde_json::{Value, json};

use crate::support::hostile::entry;
use crate::support::modern::{Canned, Era, LEGACY, MODERN, Modern, Step, tool_with};
use crate::support::{Host, logs};

const LIMIT: Duration = Duration::from_secs(10);

/// A Pack with the one server `m` at `server`, waited on until ready.
async fn ready(server: &Modern) -> Host {
    let host = Host::new(json!({"m": entry(&server.url)}));
    host.ready("m", LIMIT).await;
    host
}

/// `call_dynamic_tool` of `tool` on `m` with `arguments`.
async fn call(
    host: &Host,
    tool: &str,
    arguments: Value,
) -> Result<String, runvil_plugin::ToolError> {
    let args = json!({"namespace": "m", "toolName": tool, "arguments": arguments});
    host.call("call_dynamic_tool", args).await
}

/// The namespace listing of `m`.
async fn namespace(host: &Host) -> Value {
    host.listing(json!({"namespace": "m"})).await
}

fn lines(trail: &[Step]) -> Vec<String> {
    trail.iter().map(Step::line).collect()
}

/// A response stream that ends before any response: the request is lost on the way.
fn cut() -> Canned {
    Canned::Raw(200, Some("text/event-stream"), ": working\n\n".into())
}

// ---------------------------------------------------------------------------------------------
// secrets

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

// ---------------------------------------------------------------------------------------------
// era flips

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
        lines(&trail)
    );
    let second = call(&host, "echo", json!({"x": 2})).await;
    assert_eq!(second, Ok("echo echo {\"x\":2}".into()));
    assert_eq!(namespace(&host).await["protocolVersion"], LEGACY);
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
        lines(&trail),
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

// ---------------------------------------------------------------------------------------------
// re-issue of a lost reply

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

// ---------------------------------------------------------------------------------------------
// pagination

/// docs/connection.md "Pagination": a page asked for with `""` that lists only tools already
/// kept is an older server's first page again (`""` meant "no more" to it), and ends the walk
/// whatever cursor it names; in both eras.
#[tokio::test]
async fn an_older_server_ending_a_two_page_walk_with_an_empty_cursor_is_listed() {
    for era in [Era::Modern, Era::Legacy] {
        let server = Modern::start_in(era).await;
        server.set_pages(vec![
            (None, vec![tool_with("a", json!({}))], Some("p2")),
            (Some("p2"), vec![tool_with("b", json!({}))], Some("")),
            // An older server reads the cursor "" as none: its first page again.
            (Some(""), vec![tool_with("a", json!({}))], Some("p2")),
        ]);
        let host = Host::new(json!({"m": entry(&server.url)}));
        let listing = host.settled(LIMIT).await;
        let entry = &listing["servers"][0];
        assert_eq!(entry["status"], "ready", "{era:?}: {entry}");
        assert_eq!(entry["tools"], json!(["a", "b"]), "{era:?}: {entry}");
        let cursors: Vec<Value> = server
            .steps("tools/list")
            .iter()
            .map(|s| s.params.get("cursor").cloned().unwrap_or(Value::Null))
            .collect();
        assert_eq!(cursors, [Value::Null, json!("p2"), json!("")], "{era:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// configuration

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
            let listing = namespace(&host).await;
            if listing["status"] == "ready" {
                return listing;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let listing =
        settled.unwrap_or_else(|_| panic!("never ready; the trail: {:?}", lines(&server.trail())));
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
    assert_eq!(namespace(&host).await["protocolVersion"], MODERN);
}

/// ARCHITECTURE "Invariants": every server output is bounded. The reason a tool with an
/// invalid `x-mcp-header` is omitted quotes its property path and declared type cut to 64
/// characters, as it quotes the header name.
#[tokio::test]
async fn an_omitted_tools_reason_is_bounded_whatever_its_property_name() {
    let server = Modern::start().await;
    let long = "p".repeat(100_000);
    let mut properties = serde_json::Map::new();
    properties.insert(
        long.clone(),
        json!({"type": "number", "x-mcp-header": "Amount"}),
    );
    server.set_tools(vec![
        tool_with("echo", json!({})),
        tool_with("pay", Value::Object(properties)),
    ]);
    let host = ready(&server).await;
    let listing = namespace(&host).await;
    let omitted = listing["omitted"].as_array().expect("pay is omitted");
    assert_eq!(omitted.len(), 1, "{}", &listing.to_string()[..300]);
    assert_eq!(omitted[0]["name"], "pay");
    let reason = omitted[0]["reason"].as_str().unwrap();
    assert!(
        reason.len() <= 1024,
        "the reason is {} bytes: {}…",
        reason.len(),
        &reason[..120]
    );
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
    assert_eq!(namespace(&host).await["protocolVersion"], MODERN);
    drop(host);
    let trail = server.settle(Duration::from_millis(1500), LIMIT).await;
    let after: Vec<String> = trail
        .iter()
        .filter(|s| matches!(s.verb.as_str(), "DELETE" | "GET"))
        .map(Step::line)
        .collect();
    assert_eq!(after, Vec::<String>::new(), "{:?}", lines(&trail));
}
