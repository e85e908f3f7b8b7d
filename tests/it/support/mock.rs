//! A scriptable MCP server on `wiremock`: one responder that answers each JSON-RPC method with a
//! closure, echoing the request id, so tests can script the wire exactly.

use serde_json::{Value, json};
use wiremock::{Request, ResponseTemplate};

/// The JSON body of a request (`Null` when there is none or it is not JSON).
pub fn body(request: &Request) -> Value {
    serde_json::from_slice(&request.body).unwrap_or(Value::Null)
}

/// A header of a request as text, if present.
pub fn header(request: &Request, name: &str) -> Option<String> {
    request
        .headers
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

/// `200 application/json` with the JSON-RPC result `result` for `request`'s id.
pub fn result(request: &Request, result: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(
        json!({"jsonrpc": "2.0", "id": body(request)["id"], "result": result}).to_string(),
        "application/json",
    )
}

/// `200 text/event-stream` with `events` as the body, verbatim.
pub fn sse(events: impl Into<String>) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(events.into(), "text/event-stream")
}

/// An SSE event carrying `message` as its data.
pub fn event(message: &Value) -> String {
    format!("event: message\ndata: {message}\n\n")
}

/// The JSON-RPC response message for `request` with `result`.
pub fn response(request: &Request, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": body(request)["id"], "result": result})
}

/// The `initialize` answer choosing `version`, with `Mcp-Session-Id: session` when given.
pub fn initialize(request: &Request, version: &str, session: Option<&str>) -> ResponseTemplate {
    let mut template = result(
        request,
        json!({"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "mock", "version": "1"}}),
    );
    if let Some(session) = session {
        template = template.insert_header("mcp-session-id", session);
    }
    template
}

/// A responder: `initialize` (version 2025-11-25, session `s-1`), `202` for notifications, and
/// `other(request, method)` for everything else.
pub fn server(
    other: impl Fn(&Request, &str) -> ResponseTemplate + Send + Sync + 'static,
) -> impl Fn(&Request) -> ResponseTemplate + Send + Sync + 'static {
    move |request: &Request| {
        let message = body(request);
        let method = message["method"].as_str().unwrap_or("").to_string();
        if method == "initialize" {
            initialize(request, "2025-11-25", Some("s-1"))
        } else if message.get("id").is_none() {
            ResponseTemplate::new(202)
        } else {
            other(request, &method)
        }
    }
}

/// `tools/list` answered with `tools` in one page; `tools/call` by `call`.
pub fn with_tools(
    tools: Value,
    call: impl Fn(&Request, &Value) -> ResponseTemplate + Send + Sync + 'static,
) -> impl Fn(&Request) -> ResponseTemplate + Send + Sync + 'static {
    server(move |request, method| match method {
        "tools/list" => result(request, json!({ "tools": tools })),
        "tools/call" => call(request, &body(request)["params"]),
        _ => ResponseTemplate::new(400),
    })
}
