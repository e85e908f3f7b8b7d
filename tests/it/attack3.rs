//! Cases found by a third adversarial review (the modern era's walk restarts, re-issues, era
//! signals and pagination): each test says what the contract (README, ARCHITECTURE, docs/, or
//! the MCP 2026-07-28 text) promises. They drive the Pack through the `runvil-plugin` contract
//! against the [`Modern`] fake on loopback.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::Host;
use crate::support::hostile::entry;
use crate::support::modern::{Era, Modern, tool_with};

const LIMIT: Duration = Duration::from_secs(10);

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
            (None, vec![tool_with("a", json!({})), bad.clone()], Some("p2")),
            (Some("p2"), vec![tool_with("b", json!({}))], Some("")),
            // An older server reads the cursor "" as none: its first page again.
            (Some(""), vec![tool_with("a", json!({})), bad.clone()], Some("p2")),
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
