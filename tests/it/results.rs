//! Call results and errors (MCP spec "Tools": results, `isError`, `structuredContent`,
//! `inputSchema`, `outputSchema`): arguments checked before a `tools/call` goes out, a server's
//! "Invalid params", results of a wrong shape, empty or huge results, and the error kinds a model
//! can act on (README "What the tools answer").

use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

use crate::bounds::{call_t_within, error_reason, ready_on, tool_server};
use crate::eras::{LIMIT, call, lines, ready, trail_lines};
use crate::support::hostile::{
    self, Reply, entry, result, rpc_error, sse_event, text_result, tool,
};
use crate::support::mock::matchers::path;
use crate::support::mock::{self, Mock, MockServer, ResponseTemplate, body};
use crate::support::modern::{Call, Modern};
use crate::support::{Host, WAIT, transport};
use crate::wire::{
    assert_call_fails, assert_only_the_call_before_delete, call_s, mock_server, mock_tool,
    ready_mock,
};

const SECRET: &str = "sk-live-4f9a8b7c6d5e4f3a2b1c";

/// The tools of [`server`]. `greet`'s schema refers to its own `$defs`.
fn tools() -> Value {
    json!([
        {"name": "greet", "description": "Greets",
         "inputSchema": {"type": "object",
             "properties": {"name": {"type": "string"}, "count": {"$ref": "#/$defs/count"}},
             "required": ["name"], "additionalProperties": false,
             "$defs": {"count": {"type": "integer", "minimum": 1}}}},
        {"name": "greet_all", "inputSchema": {"type": "object"}},
        {"name": "list", "inputSchema": {"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "integer"}}}}},
        {"name": "remote", "inputSchema": {"type": "object", "properties": {"a": {"$ref": "https://127.0.0.1:9/a.json"}}}},
        {"name": "odd", "inputSchema": {"type": "object", "properties": {"a": {"type": "no-such-type"}}}},
        {"name": "huge", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}},
            "description": "x".repeat(70 * 1024)}},
        {"name": "stats", "inputSchema": {"type": "object"},
         "outputSchema": {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}}
    ])
}

/// A server listing [`tools`]. `tools/call` answers by its `mode` argument: `rpc` a JSON-RPC
/// `-32602` with `message`, `structured` only `structuredContent` (`value`), `both` that and a
/// text copy, `nothing` an empty result, `error` an `isError` result with `value`; else it
/// echoes the arguments.
async fn server() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(path("/mcp"))
        .respond_with(mock::with_tools(tools(), |request, params| {
            let args = &params["arguments"];
            let value = args["value"].clone();
            match args["mode"].as_str() {
                Some("rpc") => ResponseTemplate::new(200).set_body_raw(
                    json!({"jsonrpc": "2.0", "id": body(request)["id"],
                           "error": {"code": -32602, "message": args["message"]}})
                    .to_string(),
                    "application/json",
                ),
                Some("structured") => mock::result(request, json!({"structuredContent": value})),
                Some("both") => mock::result(
                    request,
                    json!({"content": [{"type": "text", "text": value.to_string()}], "structuredContent": value}),
                ),
                Some("nothing") => mock::result(request, json!({"content": []})),
                Some("error") => mock::result(
                    request,
                    json!({"isError": true, "content": [{"type": "text", "text": "it broke"}], "structuredContent": value}),
                ),
                _ => mock::result(
                    request,
                    json!({"content": [{"type": "text", "text": format!("args {args}")}]}),
                ),
            }
        }))
        .mount(&server)
        .await;
    server
}

/// [`server`] as `s` (its entry holding [`SECRET`] in a header), ready.
async fn ready_with_schemas() -> (MockServer, Host) {
    let server = server().await;
    let host = Host::new(json!({"s": {
        "url": format!("{}/mcp", server.uri()),
        "headers": {"Authorization": format!("Bearer {SECRET}")}
    }}));
    host.ready("s", WAIT).await;
    (server, host)
}

async fn call_outcome(
    host: &Host,
    tool: &str,
    arguments: Value,
) -> Result<String, (ToolErrorKind, String)> {
    host.call(
        "call_dynamic_tool",
        json!({"namespace": "s", "toolName": tool, "arguments": arguments}),
    )
    .await
    .map_err(|e| (e.kind, e.message))
}

/// The `tools/call` requests the server received: their `params`.
async fn calls(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(body)
        .filter(|b| b["method"] == "tools/call")
        .map(|b| b["params"].clone())
        .collect()
}

fn invalid(message: &str) -> Result<String, (ToolErrorKind, String)> {
    Err((ToolErrorKind::InvalidArguments, message.to_string()))
}

#[tokio::test]
async fn call_results_with_a_wrong_shape_type_or_id_are_errors() {
    let names = [
        "shape",
        "textless",
        "html",
        "wrong-id",
        "huge-error",
        "empty-error",
    ];
    let server = hostile::serve_tools(names.iter().map(|n| tool(n, n)).collect(), |req| {
        let id = req.id();
        match req.rpc["params"]["name"].as_str().unwrap() {
            "shape" => Reply::json(&result(&id, json!({"content": "text"}))),
            "textless" => Reply::json(&result(&id, json!({"content": [{"type": "text"}]}))),
            "html" => Reply::raw(200, "text/html", "<p>hi</p>"),
            "wrong-id" => Reply::json(&text_result(&json!(12345), "for someone else")),
            "huge-error" => Reply::json(&rpc_error(
                &id,
                -32000,
                &format!("line1\nline2{}", "z".repeat(5000)),
            )),
            _ => Reply::json(&rpc_error(&id, -32001, "")),
        }
    })
    .await;
    let host = ready_on("liar", &server.url).await;
    let call = |name: &'static str| {
        let host = &host;
        async move {
            tokio::time::timeout(
                Duration::from_secs(10),
                host.call(
                    "call_dynamic_tool",
                    json!({"namespace": "liar", "toolName": name}),
                ),
            )
            .await
            .unwrap()
        }
    };
    assert_eq!(
        call("shape").await,
        transport("server \"liar\": the server's tools/call result is not a valid CallToolResult")
    );
    assert_eq!(
        call("textless").await,
        transport("server \"liar\": the server sent a text block without text")
    );
    assert_eq!(
        call("html").await,
        transport(
            "server \"liar\": the server answered with Content-Type \"text/html\", not application/json or text/event-stream"
        )
    );
    assert_eq!(
        call("wrong-id").await,
        transport(&format!(
            "server \"liar\": the server's JSON reply held no response to request {}",
            server.first(|r| r.rpc["params"]["name"] == "wrong-id").id()
        ))
    );
    assert_eq!(
        call("huge-error").await,
        Err(ToolError::new(
            ToolErrorKind::Backend,
            format!("line1 line2{}…", "z".repeat(1024 - 3 - 11))
        ))
    );
    assert_eq!(
        call("empty-error").await,
        Err(ToolError::new(
            ToolErrorKind::Backend,
            "server \"liar\" answered with JSON-RPC error -32001"
        ))
    );
}

/// An error response with `"id": null` (the server could not read the request) answers the one
/// request of its POST: in a JSON reply, on an SSE stream that then stays open, and for
/// `initialize`.
#[tokio::test]
async fn an_error_with_a_null_id_answers_the_request() {
    let parse_error = |_: &Value| json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}});
    let calls = tool_server(move |req| async move {
        match req.rpc["params"]["arguments"]["how"].as_str() {
            Some("sse") => Reply::stream(
                200,
                "text/event-stream",
                stream::once(async move { Ok(Bytes::from(sse_event(&parse_error(&req.id())))) })
                    .chain(stream::pending()),
            ),
            _ => Reply::json(&parse_error(&req.id())),
        }
    })
    .await;
    let init = hostile::serve_initialize(|_| {
        Reply::json(
            &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "Invalid Request"}}),
        )
    })
    .await;
    let host = Host::new(json!({"calls": entry(&calls.url), "init": entry(&init.url)}));
    host.ready("calls", Duration::from_secs(10)).await;
    for how in ["json", "sse"] {
        let outcome = tokio::time::timeout(
            Duration::from_secs(10),
            host.call(
                "call_dynamic_tool",
                json!({"namespace": "calls", "toolName": "t", "arguments": {"how": how}}),
            ),
        )
        .await
        .expect("answered at once, not at the call deadline");
        assert_eq!(
            outcome,
            Err(ToolError::new(ToolErrorKind::Backend, "Parse error")),
            "{how}"
        );
    }
    assert_eq!(
        error_reason(&host, "init", Duration::from_secs(10)).await,
        "the server answered with error -32600: Invalid Request"
    );
}

/// `content: []` without `structuredContent` answers a placeholder, not an empty string; with
/// `isError` it is the usual error without a message.
#[tokio::test]
async fn an_empty_result_answers_a_placeholder() {
    let server = tool_server(|req| async move {
        let is_error = req.rpc["params"]["arguments"]["error"] == true;
        Reply::json(&result(
            &req.id(),
            json!({"content": [], "isError": is_error}),
        ))
    })
    .await;
    let host = ready_on("empty", &server.url).await;
    assert_eq!(
        call_t_within(&host, "empty", Duration::from_secs(10)).await,
        Ok("[the tool returned no content]".to_string())
    );
    assert_eq!(
        host.call(
            "call_dynamic_tool",
            json!({"namespace": "empty", "toolName": "t", "arguments": {"error": true}}),
        )
        .await,
        Err(ToolError::new(
            ToolErrorKind::Backend,
            "the tool reported an error without a message"
        ))
    );
}

#[tokio::test]
async fn an_input_required_result_fails_at_once_naming_what_was_asked() {
    let server = Modern::start().await;
    server.set_call(
        "echo",
        Call::InputRequired(json!({
            "login": {"method": "elicitation/create", "params": {"message": "user?",
                      "requestedSchema": {"type": "object"}}},
            "sample": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1}},
        })),
    );
    let host = ready(&server).await;
    let failed = call(&host, "echo", json!({})).await.unwrap_err();
    assert_eq!(failed.kind, ToolErrorKind::Backend);
    // lead: exact text
    assert!(failed.message.contains("elicitation/create"), "{failed:?}");
    assert!(
        failed.message.contains("sampling/createMessage"),
        "{failed:?}"
    );
    assert!(!failed.message.contains("opaque-state-1"), "{failed:?}");
    let trail = server.settle(Duration::from_millis(500), LIMIT).await;
    assert_eq!(trail.iter().filter(|s| s.method == "tools/call").count(), 1);
}

#[tokio::test]
async fn a_missing_client_capability_error_fails_at_once_naming_it() {
    let server = Modern::start().await;
    server.set_call("echo", Call::MissingCapability(json!({"elicitation": {}})));
    let host = ready(&server).await;
    let failed = call(&host, "echo", json!({})).await.unwrap_err();
    assert_eq!(failed.kind, ToolErrorKind::Backend);
    assert!(failed.message.contains("elicitation"), "{failed:?}"); // lead: exact text
    let trail = server.settle(Duration::from_millis(500), LIMIT).await;
    assert_eq!(
        trail_lines(&trail),
        lines(&[
            "POST server/discover 200",
            "POST tools/list 200",
            "POST tools/call 400"
        ])
    );
}

#[tokio::test]
async fn a_huge_meta_in_results_is_neither_shown_nor_fatal() {
    let server = Modern::start().await;
    server.set_result_meta(json!({"io.example/blob": "m".repeat(1_000_000)}));
    let host = ready(&server).await;
    let listing = host
        .call("get_dynamic_tools", json!({"namespace": "m"}))
        .await
        .unwrap();
    assert!(!listing.contains("mmmmmmmmmm"), "{} bytes", listing.len());
    assert_eq!(
        call(&host, "echo", json!({})).await,
        Ok("echo echo {}".into())
    );
}

#[tokio::test]
async fn arguments_that_fail_the_input_schema_are_refused_and_nothing_is_sent() {
    let (server, host) = ready_with_schemas().await;
    assert_eq!(
        call_outcome(&host, "greet", json!({"count": "x", "extra": 1})).await,
        invalid(
            "the arguments do not match the inputSchema of tool \"greet\" of server \"s\": \
             arguments/count: \"x\" is not of type \"integer\"; \
             arguments: Additional properties are not allowed ('extra' was unexpected); \
             arguments: \"name\" is a required property; \
             see the schema with mcp/get_dynamic_tools {\"namespace\":\"s\",\"toolName\":\"greet\"}"
        )
    );
    // The `$ref` into `$defs` is followed: `minimum` there holds.
    assert_eq!(
        call_outcome(&host, "greet", json!({"name": "a", "count": 0})).await,
        invalid(
            "the arguments do not match the inputSchema of tool \"greet\" of server \"s\": \
             arguments/count: 0 is less than the minimum of 1; \
             see the schema with mcp/get_dynamic_tools {\"namespace\":\"s\",\"toolName\":\"greet\"}"
        )
    );
    // No arguments at all are checked as `{}`.
    assert_eq!(
        call_outcome(&host, "greet", Value::Null).await,
        invalid(
            "the arguments do not match the inputSchema of tool \"greet\" of server \"s\": \
             arguments: \"name\" is a required property; \
             see the schema with mcp/get_dynamic_tools {\"namespace\":\"s\",\"toolName\":\"greet\"}"
        )
    );
    assert_eq!(calls(&server).await, Vec::<Value>::new());
    // Arguments that fit go out as given.
    assert_eq!(
        call_outcome(&host, "greet", json!({"name": "a", "count": 2})).await,
        Ok(r#"args {"name":"a","count":2}"#.to_string())
    );
    assert_eq!(
        calls(&server).await,
        vec![json!({"name": "greet", "arguments": {"name": "a", "count": 2}})]
    );
    // The pointer is a working call.
    let schema: Value = serde_json::from_str(&host.lookup("s", "greet").await.unwrap()).unwrap();
    assert_eq!(schema["inputSchema"], tools()[0]["inputSchema"]);
}

#[tokio::test]
async fn at_most_five_problems_are_listed_and_the_rest_counted() {
    let (server, host) = ready_with_schemas().await;
    let ids = json!({"ids": ["a", "b", "c", "d", "e", "f", "g"]});
    let listed: Vec<String> = ["a", "b", "c", "d", "e"]
        .iter()
        .enumerate()
        .map(|(i, id)| format!("arguments/ids/{i}: \"{id}\" is not of type \"integer\""))
        .collect();
    assert_eq!(
        call_outcome(&host, "list", ids).await,
        invalid(&format!(
            "the arguments do not match the inputSchema of tool \"list\" of server \"s\": {}; \
             and 2 more problems; \
             see the schema with mcp/get_dynamic_tools {{\"namespace\":\"s\",\"toolName\":\"list\"}}",
            listed.join("; ")
        ))
    );
    assert_eq!(calls(&server).await, Vec::<Value>::new());
}

/// A schema with a `$ref` outside itself (never fetched), one the validator cannot compile and
/// one over the size bound are not used for checking: the server decides, and the call goes out.
#[tokio::test]
async fn schemas_the_pack_does_not_check_leave_the_decision_to_the_server() {
    let (server, host) = ready_with_schemas().await;
    for tool in ["remote", "odd", "huge"] {
        assert_eq!(
            call_outcome(&host, tool, json!({"a": "not an integer"})).await,
            Ok(r#"args {"a":"not an integer"}"#.to_string()),
            "{tool}"
        );
    }
    assert_eq!(calls(&server).await.len(), 3);
}

#[tokio::test]
async fn invalid_params_from_the_server_is_invalid_arguments() {
    let (_server, host) = ready_with_schemas().await;
    let said = format!(
        "Invalid arguments for greet_all:\n  token {SECRET} is wrong\n\nStack trace:\n at x.js:1"
    );
    assert_eq!(
        call_outcome(&host, "greet_all", json!({"mode": "rpc", "message": said})).await,
        invalid(
            "server \"s\" refused the arguments of tool \"greet_all\": \
             Invalid arguments for greet_all: token [redacted] is wrong; \
             see the schema with mcp/get_dynamic_tools {\"namespace\":\"s\",\"toolName\":\"greet_all\"}"
        )
    );
    assert_eq!(
        call_outcome(&host, "greet_all", json!({"mode": "rpc", "message": ""})).await,
        invalid(
            "server \"s\" refused the arguments of tool \"greet_all\" (JSON-RPC error -32602); \
             see the schema with mcp/get_dynamic_tools {\"namespace\":\"s\",\"toolName\":\"greet_all\"}"
        )
    );
}

#[tokio::test]
async fn structured_content_is_checked_against_the_output_schema() {
    let (_server, host) = ready_with_schemas().await;
    let backend = |message: &str| Err((ToolErrorKind::Backend, message.to_string()));
    let cases = [
        // Only structuredContent: it is the answer, so it must conform.
        (
            json!({"mode": "structured", "value": {"sum": 5}}),
            Ok(r#"{"sum":5}"#.to_string()),
        ),
        (
            json!({"mode": "structured", "value": {"sum": SECRET}}),
            backend(
                "server \"s\" returned a structuredContent that does not match the outputSchema of tool \"stats\": \
                 structuredContent/sum: \"[redacted]\" is not of type \"integer\"",
            ),
        ),
        (
            json!({"mode": "nothing"}),
            backend(
                "server \"s\" returned no content and no structuredContent, though tool \"stats\" declares an outputSchema",
            ),
        ),
        // A text copy beside it: the model reads the text, which passes through as sent.
        (
            json!({"mode": "both", "value": {"total": 5}}),
            Ok(r#"{"total":5}"#.to_string()),
        ),
        // An error result need not conform: its text is the error.
        (
            json!({"mode": "error", "value": {"total": 5}}),
            backend("it broke"),
        ),
    ];
    for (arguments, expected) in cases {
        let outcome = call_outcome(&host, "stats", arguments.clone()).await;
        assert_eq!(outcome, expected, "{arguments}");
    }
}

#[tokio::test]
async fn not_found_suggests_the_nearest_listed_names() {
    let (_server, host) = ready_with_schemas().await;
    let lookup = |name: &'static str| {
        let host = &host;
        async move {
            let e = host.lookup("s", name).await.unwrap_err();
            (e.kind, e.message)
        }
    };
    let not_found = |message: &str| (ToolErrorKind::NotFound, message.to_string());
    assert_eq!(
        lookup("gret").await,
        not_found(
            "server \"s\" has no tool \"gret\" (did you mean \"greet\"?); list its tools with mcp/get_dynamic_tools {\"namespace\":\"s\"}"
        )
    );
    assert_eq!(
        lookup("GREET_ALL").await,
        not_found(
            "server \"s\" has no tool \"GREET_ALL\" (did you mean \"greet_all\"?); list its tools with mcp/get_dynamic_tools {\"namespace\":\"s\"}"
        )
    );
    assert_eq!(
        lookup("greet_a").await,
        not_found(
            "server \"s\" has no tool \"greet_a\" (did you mean \"greet\" or \"greet_all\"?); list its tools with mcp/get_dynamic_tools {\"namespace\":\"s\"}"
        )
    );
    assert_eq!(
        lookup("weather").await,
        not_found(
            "server \"s\" has no tool \"weather\"; list its tools with mcp/get_dynamic_tools {\"namespace\":\"s\"}"
        )
    );
    assert_eq!(
        call_outcome(&host, "stat", json!({})).await,
        Err(not_found(
            "server \"s\" has no tool \"stat\" (did you mean \"stats\"?); list its tools with mcp/get_dynamic_tools {\"namespace\":\"s\"}"
        ))
    );
}

/// Every example in the tools' descriptions and in the errors names a namespace and a tool of
/// this Pack, or none.
#[tokio::test]
async fn examples_name_what_this_pack_has() {
    let (_server, host) = ready_with_schemas().await;
    let tools = host.pack.tools();
    assert_eq!(
        tools[0].description,
        "Finds and lists the tools of the MCP servers behind this Pack, as JSON text. When you do not know a tool's name, search by what you want done: {\"query\":\"send a message to a channel\"} answers the best matching tools (namespace, name, one-line description), best first; limit (1-50, default 10) and namespace narrow it. With no arguments: every server's namespace, status (ready, loading, or error with a reason, and retryInSeconds when it will be tried again), description and tool names. With namespace, e.g. {\"namespace\":\"s\"}: that server's tools with their descriptions and input schemas, and under omitted the tools it listed that were left out. With namespace and toolName, e.g. {\"namespace\":\"s\",\"toolName\":\"greet\"}: one tool in full; with namespace and toolNames (up to 20): several. Call a tool with mcp/call_dynamic_tool."
    );
    assert_eq!(
        tools[1].description,
        "Calls one tool of one MCP server and returns its result as text. Look the tool and its input schema up with mcp/get_dynamic_tools first (search it by what you want done with {\"query\":\"...\"} when you do not know its name), then call it, e.g. {\"namespace\":\"s\",\"toolName\":\"greet\",\"arguments\":{}}."
    );
    assert_eq!(
        tools[1].parameters["properties"]["toolName"]["description"],
        "The tool's name, exactly as its server lists it, e.g. \"greet\"."
    );
    let error = |tool: &'static str, args: Value| {
        let host = &host;
        async move {
            let e = host.call(tool, args).await.unwrap_err();
            (e.kind, e.message)
        }
    };
    let invalid = |m: &str| (ToolErrorKind::InvalidArguments, m.to_string());
    assert_eq!(
        error("call_dynamic_tool", json!({"toolName": "x"})).await,
        invalid(
            "\"namespace\" is required, e.g. {\"namespace\":\"s\",\"toolName\":\"greet\",\"arguments\":{}}"
        )
    );
    assert_eq!(
        error("get_dynamic_tools", json!({"toolName": "stats"})).await,
        invalid("toolName needs a namespace, e.g. {\"namespace\":\"s\",\"toolName\":\"stats\"}")
    );

    // A Pack whose only server is still loading: the namespace, and no made-up tool.
    let (_listener, url) = {
        let listener = crate::support::net::unused_loopback().await;
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        (listener, url)
    };
    let loading = Host::new(json!({"docs": {"url": url}}));
    let tools = loading.pack.tools();
    assert_eq!(
        tools[1].description,
        "Calls one tool of one MCP server and returns its result as text. Look the tool and its input schema up with mcp/get_dynamic_tools first (search it by what you want done with {\"query\":\"...\"} when you do not know its name), then call it with its namespace, toolName and arguments."
    );
    assert_eq!(
        tools[0].parameters["properties"]["toolName"]["description"],
        "A tool's name, exactly as its server lists it; needs namespace."
    );
    let e = loading
        .call("call_dynamic_tool", json!({"namespace": "docs"}))
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind, e.message),
        invalid(
            "\"toolName\" is required; list the tools with mcp/get_dynamic_tools {\"namespace\":\"docs\"}"
        )
    );
    let none = Host::new(json!({}));
    let e = none.call("call_dynamic_tool", json!({})).await.unwrap_err();
    assert_eq!(
        (e.kind, e.message),
        invalid("\"namespace\" is required, and no servers are configured")
    );
    assert!(!none.pack.tools()[0].description.contains("e.g."));
}

#[tokio::test]
async fn is_error_is_backend_and_invalid_params_is_invalid_arguments() {
    let server = mock_server(mock::with_tools(json!([mock_tool("bad"), mock_tool("rpc")]), |request, params| {
        if params["name"] == "bad" {
            mock::result(request, json!({"isError": true, "content": [{"type": "text", "text": "quota exceeded"}]}))
        } else {
            ResponseTemplate::new(200).set_body_raw(
                json!({"jsonrpc": "2.0", "id": body(request)["id"], "error": {"code": -32602, "message": "Unknown tool: rpc"}}).to_string(),
                "application/json",
            )
        }
    }))
    .await;
    let host = ready_mock(&server).await;
    let bad = call_s(&host, "bad").await.unwrap_err();
    assert_eq!(
        (bad.kind, bad.message.as_str()),
        (ToolErrorKind::Backend, "quota exceeded")
    );
    let rpc = call_s(&host, "rpc").await.unwrap_err();
    // -32602 is "Invalid params": the arguments, with the way to the tool's schema.
    assert_eq!(
        (rpc.kind, rpc.message.as_str()),
        (
            ToolErrorKind::InvalidArguments,
            r#"server "s" refused the arguments of tool "rpc": Unknown tool: rpc; see the schema with mcp/get_dynamic_tools {"namespace":"s","toolName":"rpc"}"#
        )
    );
}

#[tokio::test]
async fn a_malformed_result_is_an_answer_and_is_not_cancelled() {
    let server = mock_server(mock::with_tools(json!([mock_tool("t")]), |request, _| {
        mock::result(request, json!({"content": [{"type": "resource_link"}]}))
    }))
    .await;
    let host = assert_call_fails(
        &server,
        "server \"s\": the server sent a resource_link block without a uri",
    )
    .await;
    // A cancellation would be sent at once, in the background, and before the session's DELETE.
    assert_only_the_call_before_delete(&server, host).await;
}
