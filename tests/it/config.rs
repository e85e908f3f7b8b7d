//! The config as its author wrote it, through the Host contract: other clients' tool filters
//! (`includeTools`, `excludeTools`, `disabledTools`), entries that are disabled or other
//! clients' (no I/O), and the `refusedStarts` count of a server that nothing listens for (README
//! "Configuration", "What the tools answer"). The hints a refused request earns for placeholders
//! and variables (VS Code's among them) are in `secrets`.

use crate::bounds::list_server;
use crate::support::answers::one_tool_or_400;
use crate::support::hostile::tools_page;
use std::time::Duration;

use runvil_plugin::ToolErrorKind;
use serde_json::{Value, json};

use crate::support::hostile::{self, Reply, server_entry};
use crate::support::{Host, net};

const WAIT: Duration = Duration::from_secs(10);

/// A server listing `search`, `delete_repo`, `fetch`, `admin` and a malformed `broken`; a call
/// answers `called <name>`.
async fn four_tools() -> hostile::Server {
    let mut tools: Vec<Value> = ["search", "delete_repo", "fetch", "admin"]
        .into_iter()
        .map(|name| hostile::tool(name, "a tool"))
        .collect();
    // Malformed, so left out: listed under `omitted` unless the config hides it.
    tools.push(json!({"name": "broken", "description": 5, "inputSchema": {"type": "object"}}));
    hostile::serve_tools(tools, |req| {
        let name = req.rpc["params"]["name"].as_str().unwrap_or_default();
        Reply::json(&hostile::text_result(&req.id(), &format!("called {name}")))
    })
    .await
}

/// `includeTools` shows only the tools it names, `excludeTools` and `disabledTools` hide the
/// ones they name, and an exclusion wins over an inclusion. A hidden tool is neither listed nor
/// callable: calling or looking it up is `not_found`, naming the config key, and never reaches
/// the server.
#[tokio::test]
async fn other_clients_tool_filters_hide_tools() {
    let server = four_tools().await;
    let url = &server.url;
    let host = Host::new(json!({
        "gemini": {"url": url, "includeTools": ["search", "delete_repo", "nowhere"], "excludeTools": ["delete_repo"]},
        "cline": {"url": url, "disabledTools": ["admin", "fetch", "broken"]},
        "plain": {"url": url, "includeTools": null, "disabledTools": []},
    }));
    for namespace in ["gemini", "cline", "plain"] {
        host.ready(namespace, WAIT).await;
    }
    let listing = host.listing(json!({})).await;
    assert_eq!(
        listing,
        json!({"servers": [
            {"namespace": "cline", "status": "ready", "tools": ["delete_repo", "search"]},
            {"namespace": "gemini", "status": "ready", "tools": ["search"]},
            {"namespace": "plain", "status": "ready", "tools": ["admin", "delete_repo", "fetch", "search"]},
        ]})
    );
    let one = host.listing(json!({"namespace": "gemini"})).await;
    assert_eq!(
        one,
        json!({"namespace": "gemini", "status": "ready", "protocolVersion": "2025-06-18", "tools": [
            {"name": "search", "description": "a tool", "inputSchema": {"type": "object"}}
        ]})
    );
    let omitted =
        [json!({"name": "broken", "reason": "\"description\" must be a string, found a number"})];
    assert_eq!(
        host.listing(json!({"namespace": "plain"})).await["omitted"],
        json!(omitted)
    );
    assert_eq!(
        host.listing(json!({"namespace": "cline"}))
            .await
            .get("omitted"),
        None
    );
    assert_eq!(
        host.call_tool("gemini", "search").await.unwrap(),
        "called search"
    );
    let cases = [
        (
            "gemini",
            "delete_repo",
            "server \"gemini\" has no tool \"delete_repo\" that this Pack may call: its config entry's \"excludeTools\" names it, so it is neither listed nor callable",
        ),
        (
            "gemini",
            "fetch",
            "server \"gemini\" has no tool \"fetch\" that this Pack may call: its config entry's \"includeTools\" does not name it, so it is neither listed nor callable",
        ),
        (
            "cline",
            "admin",
            "server \"cline\" has no tool \"admin\" that this Pack may call: its config entry's \"disabledTools\" names it, so it is neither listed nor callable",
        ),
    ];
    for (namespace, tool, message) in cases {
        let called = host.call_tool(namespace, tool).await.unwrap_err();
        assert_eq!(
            (called.kind, called.message.as_str()),
            (ToolErrorKind::NotFound, message)
        );
        let looked_up = host.lookup(namespace, tool).await.unwrap_err();
        assert_eq!(
            (looked_up.kind, looked_up.message.as_str()),
            (ToolErrorKind::NotFound, message)
        );
    }
    let called: Vec<String> = server
        .with_method("tools/call")
        .iter()
        .map(|r| {
            r.rpc["params"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(called, ["search"]);
}

/// A filter of the wrong type refuses the entry, naming the field.
#[tokio::test]
async fn a_tool_filter_of_the_wrong_type_refuses_the_entry() {
    let host = Host::new(json!({
        "a": {"url": "http://127.0.0.1:9/mcp", "includeTools": "search"},
        "b": {"url": "http://127.0.0.1:9/mcp", "excludeTools": ["search", 5]},
        "c": {"url": "http://127.0.0.1:9/mcp", "disabledTools": {"search": true}},
    }));
    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [
            {"namespace": "a", "status": "error", "reason": "\"includeTools\" must be an array of tool names (strings), found a string", "tools": []},
            {"namespace": "b", "status": "error", "reason": "\"excludeTools\" must be an array of tool names (strings); item 2 is a number", "tools": []},
            {"namespace": "c", "status": "error", "reason": "\"disabledTools\" must be an array of tool names (strings), found an object", "tools": []},
        ]})
    );
}

/// `entry` without `retryInSeconds`, which is checked to be at most 60 (the longest wait).
fn without_retry(entry: &Value) -> Value {
    let mut entry = entry.clone();
    let retry = entry
        .as_object_mut()
        .unwrap()
        .remove("retryInSeconds")
        .and_then(|r| r.as_u64());
    assert!(retry.is_some_and(|r| r <= 60), "retryInSeconds {retry:?}");
    entry
}

/// A server that nothing listens for shows how many starts in a row had their connection
/// refused (`refusedStarts`); once a server answers, the count is gone, and a failure of another
/// kind has none.
#[tokio::test]
async fn refused_starts_are_counted_in_the_listing() {
    let port = net::free_port();
    let failing = hostile::serve_initialize(|_| Reply::raw(500, "text/plain", "")).await;
    let host = Host::new(json!({
        "later": {"url": format!("http://127.0.0.1:{port}/mcp")},
        "broken": {"url": format!("http://127.0.0.1:{}/mcp", failing.port)},
    }));
    let refused =
        format!("connection refused by http://127.0.0.1:{port} (no server is listening there)");
    let first = host
        .wait_for(WAIT, |l| server_entry(l, "later")["status"] == "error")
        .await;
    assert_eq!(
        without_retry(server_entry(&first, "later")),
        json!({"namespace": "later", "status": "error", "reason": refused, "refusedStarts": 1, "tools": []})
    );
    let second = host
        .wait_for(WAIT, |l| server_entry(l, "later")["refusedStarts"] == 2)
        .await;
    assert_eq!(
        without_retry(server_entry(&second, "later")),
        json!({"namespace": "later", "status": "error", "reason": refused, "refusedStarts": 2, "tools": []})
    );
    assert_eq!(
        host.listing(json!({"namespace": "later"})).await["refusedStarts"],
        2
    );
    let broken = host.failed("broken", WAIT).await;
    assert_eq!(
        without_retry(&broken),
        json!({"namespace": "broken", "status": "error", "reason": "HTTP 500 Internal Server Error", "tools": []})
    );

    // The server comes up on that port: the next start gets through.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let _up = hostile::serve_on(
        listener,
        |req| async move { one_tool_or_400(&req, "search") },
    );
    host.ready("later", Duration::from_secs(30)).await;
    assert_eq!(
        server_entry(&host.listing(json!({})).await, "later"),
        &json!({"namespace": "later", "status": "ready", "tools": ["search"]})
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
