//! A real peer in-process: the official Rust SDK's (`rmcp`) Streamable HTTP server, listed and
//! called through the Pack exactly as a Host would.

use std::time::Duration;

use crate::support::Host;
use crate::support::demo_server;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use runvil_plugin::ToolErrorKind;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

/// A Host with the one server `demo` at `server`, once it is ready.
async fn ready_demo(server: &demo_server::DemoServer) -> Host {
    let host = Host::new(json!({"demo": {"url": server.url}}));
    host.ready("demo", WAIT).await;
    host
}

/// Calls the demo server's `echo` with `text`; asserts that `text` comes back.
async fn assert_echoes(host: &Host, text: &str) {
    let echo = host
        .call(
            "call_dynamic_tool",
            call("demo", "echo", json!({"text": text})),
        )
        .await;
    assert_eq!(echo.unwrap(), text);
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
    // The start's listing walks every page; the standalone stream rmcp serves asks for one
    // re-listing when it opens, which may be under way (it walks the same pages).
    let cursors = server.seen.lock().unwrap().list_cursors.clone();
    let walk = [None, Some("page-2".to_string()), Some("page-4".to_string())];
    assert_eq!(cursors[..3], walk, "{cursors:?}");
    for (i, cursor) in cursors.iter().enumerate().skip(3) {
        assert_eq!(*cursor, walk[i % 3], "{cursors:?}");
    }

    let add = host.lookup("demo", "add").await.unwrap();
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
    // Refused against the tool's inputSchema (schemars', 2020-12) before it is sent.
    assert_eq!(
        (bad.kind, bad.message.as_str()),
        (
            ToolErrorKind::InvalidArguments,
            "the arguments do not match the inputSchema of tool \"add\" of server \"demo\": \
             arguments: \"b\" is a required property; arguments/a: \"two\" is not of type \"integer\"; \
             see the schema with mcp/get_dynamic_tools {\"namespace\":\"demo\",\"toolName\":\"add\"}"
        )
    );
}

#[tokio::test]
async fn json_response_mode_answers_calls_and_cancels_a_dropped_one() {
    let mut config = StreamableHttpServerConfig::default();
    config.json_response = true;
    config.legacy_session_mode = false;
    let server = demo_server::start_with(config).await.unwrap();
    let host = ready_demo(&server).await;
    assert_echoes(&host, "plain JSON").await;
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
    assert_echoes(&host, "still here").await;
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

/// An rmcp server that declares `tools.listChanged` and gives instructions. Its tool `grow` adds
/// the tool `extra` and says so with `notifications/tools/list_changed`, which rmcp sends on the
/// standalone GET stream.
mod growing {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    use rmcp::{ErrorData, RoleServer, ServerHandler};
    use tokio_util::sync::CancellationToken;

    pub const INSTRUCTIONS: &str = "Call grow to get the extra tool.";

    #[derive(Clone)]
    struct Growing {
        grown: Arc<AtomicBool>,
    }

    fn tool(name: &'static str) -> Tool {
        let schema: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"type":"object"}"#).unwrap();
        Tool::new(name, format!("The {name} tool"), Arc::new(schema))
    }

    fn text(text: &str) -> CallToolResponse {
        CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    impl ServerHandler for Growing {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(
                ServerCapabilities::builder()
                    .enable_tools()
                    .enable_tool_list_changed()
                    .build(),
            )
            .with_instructions(INSTRUCTIONS)
        }

        async fn list_tools(
            &self,
            _request: Option<PaginatedRequestParams>,
            _context: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let mut tools = vec![tool("grow")];
            if self.grown.load(Ordering::SeqCst) {
                tools.push(tool("extra"));
            }
            Ok(ListToolsResult::with_all_items(tools))
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            context: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            match request.name.as_ref() {
                "grow" => {
                    self.grown.store(true, Ordering::SeqCst);
                    context
                        .peer
                        .notify_tool_list_changed()
                        .await
                        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                    Ok(text("grown"))
                }
                "extra" if self.grown.load(Ordering::SeqCst) => Ok(text("extra works")),
                _ => Err(ErrorData::invalid_params("no such tool", None)),
            }
        }
    }

    pub struct GrowingServer {
        pub url: String,
        /// Change streams the server has opened (answered 200): `subscriptions/listen` POSTs
        /// (MCP 2026-07-28, which rmcp 3.11 and this client speak to each other).
        pub streams: Arc<AtomicUsize>,
        stop: CancellationToken,
    }

    impl Drop for GrowingServer {
        fn drop(&mut self) {
            self.stop.cancel();
        }
    }

    pub async fn start() -> GrowingServer {
        let stop = CancellationToken::new();
        let mut config = StreamableHttpServerConfig::default();
        config.cancellation_token = stop.child_token();
        let grown = Arc::new(AtomicBool::new(false));
        let service: StreamableHttpService<Growing, LocalSessionManager> =
            StreamableHttpService::new(
                move || {
                    Ok(Growing {
                        grown: Arc::clone(&grown),
                    })
                },
                Default::default(),
                config,
            );
        let streams = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&streams);
        let router =
            axum::Router::new()
                .nest_service("/mcp", service)
                .layer(axum::middleware::from_fn(
                    move |request: axum::extract::Request, next: axum::middleware::Next| {
                        let counter = Arc::clone(&counter);
                        async move {
                            let listen = request
                                .headers()
                                .get("mcp-method")
                                .is_some_and(|m| m == "subscriptions/listen");
                            let response = next.run(request).await;
                            if listen && response.status() == axum::http::StatusCode::OK {
                                counter.fetch_add(1, Ordering::SeqCst);
                            }
                            response
                        }
                    },
                ));
        let listener = crate::support::net::unused_loopback().await;
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let shutdown = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await;
        });
        GrowingServer { url, streams, stop }
    }
}

#[tokio::test]
async fn a_tool_announced_on_the_call_stream_is_listed_and_instructions_are_shown() {
    let server = growing::start().await;
    let host = Host::new(json!({"grow": {"url": server.url}}));
    host.ready("grow", WAIT).await;
    assert_eq!(
        host.call("get_dynamic_tools", json!({"namespace": "grow"}))
            .await
            .unwrap(),
        r#"{"namespace":"grow","status":"ready","protocolVersion":"2026-07-28","instructions":"Call grow to get the extra tool.","tools":[{"name":"grow","description":"The grow tool","inputSchema":{"type":"object"}}]}"#
    );
    // rmcp 3.11 speaks 2026-07-28 with us but serves no `subscriptions/listen` (404, so the
    // client asks no more); it sends `list_changed` on the call's own response stream, which
    // the client hears there.
    let grown = host
        .call("call_dynamic_tool", call("grow", "grow", json!({})))
        .await;
    assert_eq!(grown.unwrap(), "grown");
    host.wait_for(WAIT, |l| {
        l["servers"][0]["tools"] == json!(["extra", "grow"])
    })
    .await;
    let extra = host
        .call("call_dynamic_tool", call("grow", "extra", json!({})))
        .await;
    assert_eq!(extra.unwrap(), "extra works");
    assert_eq!(server.streams.load(std::sync::atomic::Ordering::SeqCst), 0);
}
