//! Findings of a review of the one-verdict work and the config dialects: each test states what
//! should happen and fails on the code it was written against.

use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use serde_json::json;

use crate::support::Host;
use crate::support::hostile::{self, Reply, text_result, tool};

const WAIT: Duration = Duration::from_secs(10);

/// Goose's extension entry (`"type": "streamable_http"`, `available_tools`, `envs`, `bundled`:
/// docs/configuration.md's table, Goose rows) writes `timeout` in **seconds** (Goose's default
/// is 300). The table reads `timeout` as the call deadline, "downward only", and Goose's entry
/// is recognised for `available_tools`, so a Goose `"timeout": 1800` (30 minutes) must leave
/// the call deadline at the Pack's own (a note says it is capped): a tool answering in 2 s is
/// served. What happens: without one of Cline's marks a `timeout` of 1000 or more is read as
/// milliseconds, so the Goose entry's calls end after 1.8 s with a deadline error.
#[tokio::test]
async fn a_goose_entrys_timeout_in_seconds_is_not_read_as_milliseconds() {
    let server = hostile::serve_tools(vec![tool("slow", "answers in 2 s")], |req| {
        let answer = serde_json::to_vec(&text_result(&req.id(), "served")).unwrap();
        Reply::stream(
            200,
            "application/json",
            stream::once(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok(Bytes::from(answer))
            })
            .boxed(),
        )
    })
    .await;
    let host = Host::new(json!({"goose": {
        "url": server.url,
        "type": "streamable_http",
        "timeout": 1800,
        "available_tools": ["slow"],
        "envs": {},
        "bundled": false,
    }}));
    host.ready("goose", WAIT).await;
    assert_eq!(
        tokio::time::timeout(WAIT, host.call_tool("goose", "slow"))
            .await
            .expect("answered within 10 s"),
        Ok("served".to_string())
    );
}

/// `200 text/event-stream` sending `text`, then holding the stream open without a word.
fn held_after(text: String) -> Reply {
    Reply::stream(
        200,
        "text/event-stream",
        stream::once(async move { Ok(Bytes::from(text)) })
            .chain(stream::pending())
            .boxed(),
    )
}

/// A response whose `id` is `null` but which holds a `result` (a server that lost the id) is
/// the answer to the one request a POST carries, read one way wherever it comes (the rule
/// route() keeps for an error with a `null` id, and issue 5's rule: "answered at once, on
/// every path, as a malformed response, with no cancel"). In a JSON body it is an error at
/// once. What happens on an event stream the server keeps open: `Incoming::kind` classifies it
/// `Message::Invalid`, route() ignores it, and the call waits for the stream's end or the call
/// deadline (here the test's 3 s pass first).
#[tokio::test]
async fn a_result_with_a_null_id_on_an_open_stream_is_answered_at_once() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |_| {
        held_after(hostile::sse_event(&json!({
            "jsonrpc": "2.0",
            "id": null,
            "result": {"content": [{"type": "text", "text": "served"}]}
        })))
    })
    .await;
    let host = Host::new(json!({"s": {"url": server.url}}));
    host.ready("s", WAIT).await;
    let called = tokio::time::timeout(Duration::from_secs(3), host.call_tool("s", "t")).await;
    assert!(
        called.is_ok(),
        "the call is still waiting 3 s after its answer came"
    );
}

/// A response's `id` must be the request's (JSON-RPC 2.0 §5: "the same value"); the Pack also
/// takes "a string of the same digits" (`jsonrpc::id_matches`). `"+7"` is neither, so a reply
/// holding only it holds no response to request 7: the call fails at once saying so, as for
/// any other id. What happens: `id_matches` parses the string with `u64::from_str`, which takes
/// a leading `+` (and leading zeros: `"007"`), so the response to another id is read as this
/// call's answer.
#[tokio::test]
async fn a_response_to_a_plus_signed_id_is_not_the_calls_answer() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        let id = req.id();
        Reply::json(&json!({
            "jsonrpc": "2.0",
            "id": format!("+{id}"),
            "result": {"content": [{"type": "text", "text": "served"}]}
        }))
    })
    .await;
    let host = Host::new(json!({"s": {"url": server.url}}));
    host.ready("s", WAIT).await;
    let called = host.call_tool("s", "t").await;
    assert_ne!(called, Ok("served".to_string()));
}

/// Gemini CLI's settings.json decides which of its `mcpServers` are used with a top-level
/// `"mcp": {"allowed": [...], "excluded": [...]}` (its docs, "Global MCP Settings"; enforced by
/// its `canLoadServer`). Given that file as the config, a server it excludes must not be
/// contacted, nor its tools offered (or the file refused naming the key): docs/configuration.md
/// promises that other clients' keys deciding tools are read or refused, never ignored in
/// silence. What happens: `config::parse` reads the `mcpServers` object and drops the file's
/// other keys unread, so the excluded server is started and its tools listed.
#[tokio::test]
async fn gemini_clis_mcp_excluded_servers_are_not_contacted() {
    let excluded = hostile::serve_tools(vec![tool("danger", "d")], |req| {
        Reply::json(&text_result(&req.id(), "ran"))
    })
    .await;
    let allowed = hostile::serve_tools(vec![tool("t", "t")], |req| {
        Reply::json(&text_result(&req.id(), "ran"))
    })
    .await;
    let settings = json!({
        "mcp": {"excluded": ["blocked"]},
        "mcpServers": {
            "blocked": {"httpUrl": excluded.url},
            "ok": {"httpUrl": allowed.url},
        }
    });
    let host = Host::new(json!(settings.to_string()));
    host.settled(WAIT).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        excluded.requests().len(),
        0,
        "the server Gemini CLI's settings exclude was contacted"
    );
}

/// Gemini CLI resolves `$NAME` (as well as `${NAME}`) in its settings' strings, and its own
/// docs write headers so (`"CONTEXT7_API_KEY": "$CONTEXT7_API_KEY"`). This Pack sends such a
/// header as written; a `401` to it must then carry the hint docs/configuration.md gives for
/// `${NAME}` (a placeholder sent as written: write `${env:NAME}`), or a note must say so.
/// What happens: only `${...}` forms are looked for (`substitute.rs` searches `"${"`), so the
/// entry fails with a bare `401` and nothing says the credential was never filled in.
#[tokio::test]
async fn a_gemini_cli_dollar_name_header_sent_as_written_is_named_on_a_401() {
    let server = hostile::serve_initialize(|_| Reply::raw(401, "text/plain", "unauthorized")).await;
    let host = Host::new(json!({"g": {
        "httpUrl": server.url,
        "headers": {"Authorization": "Bearer $GITHUB_TOKEN"},
    }}));
    let listing = host.settled(WAIT).await;
    let entry = hostile::server_entry(&listing, "g").to_string();
    assert!(
        entry.contains("GITHUB_TOKEN"),
        "neither reason nor note names the placeholder sent as written: {entry}"
    );
}
