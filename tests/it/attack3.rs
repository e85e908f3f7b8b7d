//! Cases found by a third adversarial review (the modern era's walk restarts, re-issues, era
//! signals and pagination): each test says what the contract (README, ARCHITECTURE, docs/, or
//! the MCP 2026-07-28 text) promises. They drive the Pack through the `runvil-plugin` contract
//! against the [`Modern`] fake on loopback.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::Host;
use crate::support::hostile::entry;
use crate::support::modern::{Canned, Era, LEGACY, Modern, Step, tool_with};

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

/// The `cursor` each `tools/list` asked with (`Null`: none), in order.
fn cursors(server: &Modern) -> Vec<Value> {
    server
        .steps("tools/list")
        .iter()
        .map(|s| s.params.get("cursor").cloned().unwrap_or(Value::Null))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// pagination

/// docs/connection.md "Pagination": `nextCursor: ""` is a cursor like any other and is
/// followed; only a page asked for with `""` that answers `""` again, or that is the first page
/// again, ends the walk. An empty page is neither: a server whose `""` page is empty and names a
/// further cursor is walked to its end (MCP 2026-07-28, server/utilities/pagination: a page may
/// hold any number of items).
#[tokio::test]
async fn an_empty_page_at_the_empty_cursor_with_a_next_cursor_is_followed() {
    for era in [Era::Modern, Era::Legacy] {
        let server = Modern::start_in(era).await;
        server.set_pages(vec![
            (None, vec![tool_with("a", json!({}))], Some("")),
            (Some(""), vec![], Some("c2")),
            (Some("c2"), vec![tool_with("z", json!({}))], None),
        ]);
        let host = Host::new(json!({"m": entry(&server.url)}));
        let listing = host.settled(LIMIT).await;
        let entry = &listing["servers"][0];
        assert_eq!(entry["status"], "ready", "{era:?}: {entry}");
        assert_eq!(entry["tools"], json!(["a", "z"]), "{era:?}: {entry}");
        assert_eq!(
            cursors(&server),
            [Value::Null, json!(""), json!("c2")],
            "{era:?}"
        );
    }
}

/// CHANGELOG "Fixed" and docs/connection.md "Pagination": an older server that ends its walk
/// with `nextCursor: ""` and answers `""` with its first page (and that page's cursor) again is
/// listed. docs/tools.md: a malformed tool is left out (named under `omitted`) while the
/// server's other tools stay listed — so a first page holding one malformed tool is still that
/// server's first page, and its repetition ends the walk too, instead of failing the start as
/// "a cursor already used".
#[tokio::test]
async fn an_older_servers_repeated_first_page_with_a_malformed_tool_ends_the_walk() {
    let bad = json!({"name": "bad", "description": 5, "inputSchema": {"type": "object"}});
    for era in [Era::Modern, Era::Legacy] {
        let server = Modern::start_in(era).await;
        server.set_pages(vec![
            (
                None,
                vec![tool_with("a", json!({})), bad.clone()],
                Some("p2"),
            ),
            (Some("p2"), vec![tool_with("b", json!({}))], Some("")),
            // An older server reads the cursor "" as none: its first page again.
            (
                Some(""),
                vec![tool_with("a", json!({})), bad.clone()],
                Some("p2"),
            ),
        ]);
        let host = Host::new(json!({"m": entry(&server.url)}));
        let listing = host.settled(LIMIT).await;
        let entry = &listing["servers"][0];
        assert_eq!(entry["status"], "ready", "{era:?}: {entry}");
        assert_eq!(entry["tools"], json!(["a", "b"]), "{era:?}: {entry}");
        let one = host.listing(json!({"namespace": "m"})).await;
        assert_eq!(
            one["omitted"],
            json!([{"name": "bad", "reason": "\"description\" must be a string, found a number"}]),
            "{era:?}"
        );
        assert_eq!(
            cursors(&server),
            [Value::Null, json!("p2"), json!("")],
            "{era:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// era signals

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
        lines(&trail),
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
    // A first call may meet the pooled connection the restart cut (as in modern.rs).
    let mut answer = call(&host, "echo", json!({"x": 1})).await;
    if answer
        .as_ref()
        .is_err_and(|e| e.kind == runvil_plugin::ToolErrorKind::Transport)
    {
        answer = call(&host, "echo", json!({"x": 1})).await;
    }
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        answer,
        Ok("echo echo {\"x\":1}".into()),
        "{:?}",
        lines(&trail)
    );
    assert_eq!(namespace(&host).await["protocolVersion"], LEGACY);
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
    let mut answer = call(&host, "echo", json!({"x": 2})).await;
    if answer
        .as_ref()
        .is_err_and(|e| e.kind == runvil_plugin::ToolErrorKind::Transport)
    {
        answer = call(&host, "echo", json!({"x": 2})).await;
    }
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        answer,
        Ok("echo echo {\"x\":2}".into()),
        "{:?}",
        lines(&trail)
    );
    assert_eq!(namespace(&host).await["protocolVersion"], "2026-07-28");
}
