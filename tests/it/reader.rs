//! The one reader of untrusted JSON text, through the Host contract: an `mcp.json` nested past
//! the bound makes the Pack unavailable with the place (never a stack overflow, even on a 2 MiB
//! thread), escaped surrogate pairs are characters, and a lone surrogate escape a server cut in
//! half keeps the tool and the text, as U+FFFD (README "Configuration").

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::Host;
use crate::support::hostile::{Reply, serve_routes, standard};

/// A config text whose `mcpServers` entry holds `depth` nested arrays, in one line.
fn deep_config(depth: usize) -> String {
    format!(
        r#"{{"mcpServers": {{"docs": {{"url": "http://127.0.0.1:9/mcp", "x": {}{}}}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

/// Constructs the Pack from `config` on a thread with a 2 MiB stack (a Host's worker thread),
/// answering the reason it is unavailable, if any.
fn construct_on_small_stack(config: Value) -> Result<(), String> {
    let runtime = tokio::runtime::Handle::current();
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            let _context = runtime.enter();
            Host::try_new(config).map(drop).map_err(|e| e.reason)
        })
        .unwrap()
        .join()
        .expect("constructing the Pack does not crash the thread")
}

#[tokio::test]
async fn a_deeply_nested_config_text_makes_the_pack_unavailable_with_the_place() {
    // 5 KB of brackets: today's JSONC parser recurses once per level.
    let refused = construct_on_small_stack(Value::String(deep_config(5000)));
    // The 65th open bracket: the entry's `{` is the third level, so the 62nd `[`.
    let column = r#"{"mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp", "x": "#.len() + 62;
    assert_eq!(
        refused,
        Err(format!(
            "the mcp config's text nests arrays and objects deeper than 64 levels at line 1 column {column}"
        ))
    );
    // At the bound the text is read, and the entry is the Pack's to judge.
    assert_eq!(construct_on_small_stack(Value::String(deep_config(61))), Ok(()));
}

#[tokio::test]
async fn an_escaped_surrogate_pair_in_config_text_is_one_character() {
    // Python's json.dumps writes every emoji so.
    let text = r#"{"note": "launch \ud83d\ude80", "mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp"}}}"#;
    let host = Host::try_new(Value::String(text.to_string())).map_err(|e| e.reason);
    assert!(host.is_ok(), "{:?}", host.err());
    // A lone half in config text is read too, as U+FFFD; a real error names no text.
    let lone = r#"{"note": "\ud83d", "mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp"}}}"#;
    assert!(Host::try_new(Value::String(lone.to_string())).is_ok());
    let broken = r#"{"mcpServers": {"docs": {"url": "\uZZZZ"}}}"#;
    let reason = Host::try_new(Value::String(broken.to_string()))
        .map(drop)
        .map_err(|e| e.reason);
    assert_eq!(
        reason,
        Err("the mcp config's text is not JSON (comments and trailing commas are allowed): invalid escape at line 1 column 39".to_string())
    );
}

/// A server whose tool description and call result hold a lone high surrogate escape, the
/// emoji cut in half by a server that truncates UTF-16.
async fn cut_server() -> crate::support::hostile::Server {
    serve_routes(|req| async move {
        let id = req.id();
        match req.method() {
            "tools/list" => Some(Reply::raw(
                200,
                "application/json",
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"t","description":"launch \ud83d","inputSchema":{{"type":"object"}}}}]}}}}"#
                ),
            )),
            "tools/call" => Some(Reply::raw(
                200,
                "text/event-stream",
                format!(
                    "data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"cut \\ud83d\"}}]}}}}\n\n"
                ),
            )),
            _ => standard(&req),
        }
    })
    .await
}

#[tokio::test]
async fn a_lone_surrogate_keeps_the_tool_and_the_result_as_a_replacement_character() {
    let server = cut_server().await;
    let host = Host::new(json!({"k": {"url": server.url}}));
    host.ready("k", Duration::from_secs(10)).await;
    let one: Value = serde_json::from_str(&host.lookup("k", "t").await.expect("listed")).unwrap();
    assert_eq!(
        one["description"],
        json!("launch \u{FFFD}"),
        "{one}"
    );
    let text = host.call_tool("k", "t").await.expect("the call answers");
    assert!(text.contains("cut \u{FFFD}"), "{text}");
}
