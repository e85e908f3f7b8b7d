//! A real peer in-process: the official Rust SDK's (`rmcp`) Streamable HTTP server, listed and
//! called through the Pack exactly as a Host would.

#[path = "../examples/common/demo_server.rs"]
mod demo_server;
mod support;

use std::time::Duration;

use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use runvil_plugin::ToolErrorKind;
use serde_json::json;
use support::Host;

const WAIT: Duration = Duration::from_secs(10);

/// A Host with the one server `demo` at `server`, once it is ready.
async fn ready_demo(server: &demo_server::DemoServer) -> Host {
    let host = Host::new(json!({"demo": {"url": server.url}}));
    host.ready("demo", WAIT).await;
    host
}

fn call(namespace: &str, tool: &str, arguments: serde_json::Value) -> serde_json::Value {
    json!({"namespace": namespace, "toolName": tool, "arguments": arguments})
}

#[tokio::test]
async fn lists_every_page_and_renders_the_three_shapes() {
    let server = demo_server::start().await.unwrap();
    let host = Host::new(json!({"demo": {"url": server.url}}));
    let listing = host.ready("demo", WAIT).await;
    assert_eq!(
        listing,
        json!({"servers": [{"namespace": "demo", "status": "ready",
            "tools": ["add", "echo", "fail", "media", "slow", "weather"]}]})
    );
    assert_eq!(
        server.seen.lock().unwrap().list_cursors,
        [None, Some("page-2".to_string()), Some("page-4".to_string())]
    );

    let add = host
        .call(
            "get_dynamic_tools",
            json!({"namespace": "demo", "toolName": "add"}),
        )
        .await
        .unwrap();
    assert_eq!(
        add,
        r#"{"namespace":"demo","name":"add","description":"Adds two integers","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","required":["a","b"],"type":"object","properties":{"a":{"description":"The left operand.","type":"integer","format":"int64"},"b":{"description":"The right operand.","type":"integer","format":"int64"}}}}"#
    );
    let weather = host
        .listing(json!({"namespace": "demo", "toolName": "weather"}))
        .await;
    assert_eq!(
        weather["description"], "Current weather",
        "the title stands in for a missing description"
    );
    assert_eq!(
        weather["annotations"],
        json!({"readOnlyHint": true, "openWorldHint": false})
    );
    assert_eq!(
        weather["outputSchema"]["properties"]["celsius"]["type"],
        "integer"
    );
    assert_eq!(
        weather["outputSchema"]["required"],
        json!(["city", "celsius"])
    );

    let one = host.listing(json!({"namespace": "demo"})).await;
    let names: Vec<&str> = one["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add", "echo", "fail", "media", "slow", "weather"]);
    assert_eq!(one["status"], "ready");
    assert_eq!(one["tools"][1]["description"], "Sends the text back");
    assert_eq!(one["tools"][1]["inputSchema"]["required"], json!(["text"]));
    assert!(one["tools"][0].get("outputSchema").is_none());
}

#[tokio::test]
async fn calls_map_every_block_kind() {
    let server = demo_server::start().await.unwrap();
    let host = ready_demo(&server).await;
    let sum = host
        .call(
            "call_dynamic_tool",
            call("demo", "add", json!({"a": 2, "b": 40})),
        )
        .await;
    assert_eq!(sum.unwrap(), "42");
    let media = host
        .call("call_dynamic_tool", call("demo", "media", json!({})))
        .await;
    assert_eq!(
        media.unwrap(),
        "a picture follows\n\n[image omitted: image/png]\n\nembedded text\n\n[binary resource omitted: application/zip]\n\n[resource: memo://notes.txt]"
    );
    let weather = host
        .call(
            "call_dynamic_tool",
            call("demo", "weather", json!({"city": "Oslo"})),
        )
        .await;
    assert_eq!(weather.unwrap(), r#"{"city":"Oslo","celsius":21}"#);
    let fail = host
        .call("call_dynamic_tool", call("demo", "fail", json!({})))
        .await
        .unwrap_err();
    assert_eq!(
        (fail.kind, fail.message.as_str()),
        (ToolErrorKind::Backend, "the demo tool failed on purpose")
    );
    let bad = host
        .call(
            "call_dynamic_tool",
            call("demo", "add", json!({"a": "two"})),
        )
        .await
        .unwrap_err();
    assert_eq!(bad.kind, ToolErrorKind::Backend);
    assert_eq!(
        bad.message,
        "failed to deserialize parameters: invalid type: string \"two\", expected i64"
    );
}

#[tokio::test]
async fn json_response_mode_works_too() {
    let mut config = StreamableHttpServerConfig::default();
    config.json_response = true;
    config.legacy_session_mode = false;
    let server = demo_server::start_with(config).await.unwrap();
    let host = ready_demo(&server).await;
    let echo = host
        .call(
            "call_dynamic_tool",
            call("demo", "echo", json!({"text": "plain JSON"})),
        )
        .await;
    assert_eq!(echo.unwrap(), "plain JSON");
}

#[tokio::test]
async fn dropping_a_call_cancels_it_on_the_server() {
    let server = demo_server::start().await.unwrap();
    let host = ready_demo(&server).await;

    let pending = host.call(
        "call_dynamic_tool",
        call("demo", "slow", json!({"seconds": 60})),
    );
    let started = async {
        loop {
            if !server.seen.lock().unwrap().slow_started.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    // Run the call until the server has started the tool, then drop it.
    tokio::select! {
        outcome = pending => panic!("the slow call finished: {outcome:?}"),
        () = started => {}
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        {
            let seen = server.seen.lock().unwrap();
            if !seen.slow_cancelled.is_empty() {
                assert_eq!(seen.slow_cancelled, seen.slow_started);
                assert_eq!(seen.slow_started.len(), 1);
                break;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server saw no notifications/cancelled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The session is still good for the next call.
    let echo = host
        .call(
            "call_dynamic_tool",
            call("demo", "echo", json!({"text": "still here"})),
        )
        .await;
    assert_eq!(echo.unwrap(), "still here");
}

#[tokio::test]
async fn dropping_the_pack_ends_in_flight_calls() {
    let server = demo_server::start().await.unwrap();
    let host = ready_demo(&server).await;
    let pending = host.pack.call(
        "mcp/call_dynamic_tool",
        call("demo", "slow", json!({"seconds": 60})),
    );
    let waiter = tokio::spawn(pending);
    loop {
        if !server.seen.lock().unwrap().slow_started.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(host);
    let outcome = tokio::time::timeout(WAIT, waiter).await.unwrap().unwrap();
    let error = outcome.unwrap_err();
    assert_eq!(
        (error.kind, error.message.as_str()),
        (
            ToolErrorKind::Transport,
            "the call to server \"demo\" was stopped because the mcp Pack was shut down"
        )
    );
}
