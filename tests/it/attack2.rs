//! A second adversarial review of the modern era (MCP 2026-07-28) and its fallbacks: each test
//! says what the contract (README, ARCHITECTURE, docs/, or the MCP 2026-07-28 text) promises,
//! and what the client does instead. They drive the Pack through the `runvil-plugin` contract
//! against the [`Modern`] fake on loopback.

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

/// README "Configuration" and docs/configuration.md: header values and env values are secrets,
/// "Text is scrubbed before it is cut to a bound, so a secret that straddles a cut leaves no
/// prefix behind". A `-32022` whose `data.supported` quotes a configured secret longer than 32
/// bytes: each version is cut to 32 bytes *before* it is scrubbed
/// (`http::modern::supported_versions`), so the cut piece no longer matches the secret and
/// its first 29 bytes show in the listing's reason and in the `warn` log line.
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

/// MCP 2026-07-28 basic/versioning: a server that does not implement the requested version
/// answers `UnsupportedProtocolVersion` listing the versions it does support, and "the client
/// SHOULD select a mutually supported version from the `supported` list and retry the
/// request"; the issue: "the verdict is ... re-decided only when the server shows the other
/// era". A modern server redeployed as a dual-era build that dropped 2026-07-28 answers every
/// modern request `-32022` with `supported: ["2025-11-25"]`. The client neither retries with
/// 2025-11-25 nor re-probes: each call is a `backend` error "Unsupported protocol version",
/// forever, though the server offers a version both speak.
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

/// docs/connection.md: the verdict "is decided again only when the server shows the other era
/// ... a modern request answered with a plain `400`, `404`, `405` or `406`"; `shows_other_era`'s
/// own doc: "a plain refusal (400, 404, 405 or 406 without a JSON-RPC error)"; the issue: "never
/// one probe per request". A modern server that refuses a call with `400` and a JSON-RPC
/// `-32602` *answering that request's id* has read the request as a modern one. The client
/// takes it for a legacy refusal: every such call costs a `server/discover` and a resend of a
/// call the server refused.
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
        assert!(answer.is_err(), "the server refused the call: {answer:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// re-issue of a lost reply

/// The issue (4): "A broken response stream loses the request: re-issue with a new request id,
/// at most once per call"; docs/connection.md: a lost reply "is re-issued once ... **A tool
/// call may then run twice**". A call whose first stream is cut, whose re-issue meets
/// `HeaderMismatch`, and whose retry after the re-listing is cut again is re-issued a second
/// time: four `tools/call` POSTs, three of which (the cut ones and the last) may have run the
/// tool.
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

/// docs/connection.md "Pagination": `nextCursor: ""` is followed, and "a page asked for with
/// `""` ... (older servers meant "no more" by it), and such a page listing only tools already
/// kept is dropped"; server.rs: "A page asked for with "" that lists only tools already kept is
/// an older server's first page again ... dropped, and the walk ends below". An older server
/// of two pages ends its walk with `nextCursor: ""`; asked for `""` it answers its first page
/// again, with its first cursor. The client drops that page but then follows the cursor, meets
/// it as already used, and fails the whole start ("returned a cursor already used") — a server
/// that listed fine when `""` meant the end never becomes ready.
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

/// README/docs/configuration.md: `headers` "may not set ... `Mcp-Session-Id`,
/// `MCP-Protocol-Version` ... (the MCP client owns them)"; MCP 2026-07-28 transports: the
/// client sets `Mcp-Method` on every POST and `Mcp-Name` on `tools/call`, mirrored from the
/// body. A configured `Mcp-Method` is accepted and sent beside the client's own: every modern
/// request carries two `Mcp-Method` values, the server refuses each with `HeaderMismatch`, and
/// the server never starts. The client owns these headers in the modern era as it owns
/// `MCP-Protocol-Version`: the entry is refused as such, or the header is not sent twice.
#[tokio::test]
async fn a_configured_mcp_method_header_is_refused_or_never_doubled() {
    let server = Modern::start().await;
    let host = Host::new(json!({"m": {"url": server.url, "headers": {
        "Mcp-Method": "tools/call",
    }}}));
    let listing = host.settled(LIMIT).await;
    let entry = &listing["servers"][0];
    if entry["status"] == "error" && entry.get("retryInSeconds").is_none() {
        assert_eq!(
            entry["reason"],
            "header \"Mcp-Method\" is set by the MCP client itself and may not be configured",
            "{entry}"
        );
        assert_eq!(server.lines(), Vec::<String>::new());
        return;
    }
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    for step in &trail {
        assert_eq!(
            step.header_values("mcp-method"),
            std::slice::from_ref(&step.method),
            "{:?}",
            lines(&trail)
        );
    }
    assert_eq!(entry["status"], "ready", "{entry}");
}

/// docs/connection.md: the verdict is decided again when the server shows the other era, among
/// others "an `initialize` answered with [a modern error] (probed again at once)"; MCP
/// 2026-07-28 transports "Protocol Version Header": a modern server that does not implement a
/// method "MUST respond with `404 Not Found` and a JSON-RPC error with code `-32601`", and the
/// body "distinguishes this case from a `404` returned by a legacy ... server". A server known
/// legacy (its start failed with a 503 after the probe) is redeployed as a modern server that
/// answers `initialize`, a method it does not implement, that way. The client reads it as a
/// plain 404: it keeps the legacy verdict and sends `initialize` at every start, forever; the
/// server never becomes ready.
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

/// MCP 2026-07-28 basic/versioning: "The client SHOULD select a mutually supported version
/// from the `supported` list"; `modern::supported_versions` promises only that the versions
/// *shown* are bounded ("at most 16 are kept"). A server that lists 2026-07-28 as the 17th of
/// its versions is judged on the first 16 alone: no version in common, the start fails naming
/// the server's list, and waits the longest backoff, though both speak 2026-07-28.
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

/// ARCHITECTURE "Invariants": "every server output is untrusted and bounded while it is read
/// (bodies, SSE events, error previews, pages, tools, schemas, names ...)"; the reason of an
/// `x-mcp-header` shows its header name cut to 64 characters. The same reason quotes the
/// parameter's path and its declared `type` whole: a tool whose property name is 100 KB long
/// puts a 100 KB reason in the listing's `omitted` (the reasons of the README table are at most
/// 1 KiB).
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

/// ARCHITECTURE "Invariants (eras)": "the client sends no `DELETE`, `GET`, `ping`,
/// `notifications/initialized` or `notifications/cancelled` to a modern server"; MCP
/// 2026-07-28 transports: a modern server holds no sessions. A legacy server redeployed as a
/// modern one answers the old session's call with a modern error; the client re-probes and
/// goes on in the modern era, but keeps the dead legacy session id and sends the modern server
/// a `DELETE` for it when the Pack is dropped.
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
