//! Regression tests from a sixth hostile review of the answers to server requests, the era
//! probe's life and the close (README "Lifecycle and limits", "Protocol eras";
//! ARCHITECTURE.md "Invariants"). Each test failed before its fix and names the defect it
//! proves.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::Host;
use crate::support::hostile::{self, Reply, entry, result, rpc_error, standard, tool, tools_page};

/// A legacy `initialize` answer issuing `session`.
fn initialize(id: &Value, session: &str) -> Reply {
    Reply::json(&result(
        id,
        json!({"protocolVersion": "2025-11-25",
               "capabilities": {"tools": {}},
               "serverInfo": {"name": "attack6", "version": "0"}}),
    ))
    .header("mcp-session-id", session)
}

// ---------------------------------------------------------------------------------------------
// after the close, no task of the Pack sends anything

/// A legacy server (s-1) whose tool answers `-32021` (a modern error: an era signal), so the
/// call makes the connection ask `server/discover` again. That probe runs in a task of its own
/// that nothing tracks or stops: the Pack is dropped while it waits, the close (a `DELETE` of
/// s-1) ends and `Pack::closed` resolves, and then the server answers the probe `-32022`
/// naming 2026-07-28 as supported, which `discover` asks "once more" — a `server/discover` POST
/// after the close. ARCHITECTURE.md: "after `close` no task of the Pack sends anything".
/// Expected: nothing reaches the server once `Pack::closed` resolved; observed: the probe's
/// second `server/discover`, about 1.5 s later.
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
            (_, "initialize") => initialize(&req.id(), "s-1"),
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
