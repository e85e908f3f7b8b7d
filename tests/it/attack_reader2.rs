//! Attacks on the one reader's refusals and the scrub beside it (README "Secrets"): a reply
//! nested past the bound that came in an event is read like one that came as a JSON body
//! (refused as such, never taken for a lost reply that is re-issued or cancelled); an error body
//! nested past the bound hides no signal the Pack needs (a modern error, a gone session); an
//! error body that is no JSON is not withheld as JSON; a log line is scrubbed as a result is.

use std::time::Duration;

use serde_json::{Value, json};

use runvil_plugin::{ToolError, ToolErrorKind};

use crate::support::Host;
use crate::support::hostile::{self, Reply, entry, result, tool, tools_page};
use crate::support::modern::{Canned, Modern, Step};

const LIMIT: Duration = Duration::from_secs(10);

/// A `tools/call` response for `id` whose result's `structuredContent` nests 70 arrays: past the
/// reader's bound of 64.
fn deep_response(id: &Value) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"structuredContent":{{"deep":{}{}}}}}}}"#,
        "[".repeat(70),
        "]".repeat(70)
    )
}

/// `deep_response` as the one `message` event of a `200 text/event-stream` reply.
fn deep_event(id: &Value) -> Reply {
    Reply::raw(
        200,
        "text/event-stream",
        format!("event: message\ndata: {}\n\n", deep_response(id)),
    )
}

/// A modern (2026-07-28) server listing tool `t` whose `tools/call` is answered by `call`.
async fn modern_server(call: fn(&Value) -> Reply) -> hostile::Server {
    hostile::serve_all(move |req| async move {
        match req.method() {
            "server/discover" => Reply::json(&result(
                &req.id(),
                json!({"supportedVersions": ["2026-07-28"],
                       "capabilities": {"tools": {}},
                       "serverInfo": {"name": "deep", "version": "0"}}),
            )),
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            "tools/call" => call(&req.id()),
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await
}

/// A modern server's answer to a `tools/call` that nests past the bound is an answer all the
/// same, whether it came as a JSON body or as an event: the call is sent once and refused with
/// the nesting named. In an event, the skipped message leaves a stream "closed before the
/// response", a lost reply, so the tool call is sent to the server a second time.
#[tokio::test]
async fn a_modern_reply_nested_past_the_bound_in_an_event_is_not_re_issued() {
    let body = modern_server(|id| Reply::raw(200, "application/json", deep_response(id))).await;
    let host = Host::new(json!({"m": entry(&body.url)}));
    host.ready("m", LIMIT).await;
    let refused = host.call_tool("m", "t").await.unwrap_err();
    assert_eq!(body.count("tools/call"), 1, "{refused:?}");
    assert!(
        refused.message.contains("deeper than 64 levels"),
        "{refused:?}"
    );

    let event = modern_server(deep_event).await;
    let host = Host::new(json!({"m": entry(&event.url)}));
    host.ready("m", LIMIT).await;
    let refused = host.call_tool("m", "t").await.unwrap_err();
    assert_eq!(event.count("tools/call"), 1, "sent again: {refused:?}");
    assert!(
        refused.message.contains("deeper than 64 levels"),
        "{refused:?}"
    );
}

/// A legacy server's answer nested past the bound, in an event: it was answered, so it is not
/// "closed before the response" and no `notifications/cancelled` goes out for it (as for the
/// same answer as a JSON body, refused as the server's JSON reply).
#[tokio::test]
async fn a_legacy_reply_nested_past_the_bound_in_an_event_is_not_cancelled() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| deep_event(&req.id())).await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", LIMIT).await;
    let refused = host.call_tool("s", "t").await.unwrap_err();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(server.count("notifications/cancelled"), 0, "{refused:?}");
    assert!(
        refused.message.contains("deeper than 64 levels"),
        "{refused:?}"
    );
}

/// A `text/plain` error body is no JSON: a server's words that happen to open many brackets
/// (its echo of the arguments it could not parse) are shown, bounded and scrubbed, like any
/// other text, not withheld as "a JSON body nested deeper than 64 levels".
#[tokio::test]
async fn a_plain_text_error_body_with_many_brackets_is_shown_not_called_deep_json() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |_| {
        Reply::raw(
            400,
            "text/plain",
            format!("cannot parse the arguments near {}", "[".repeat(70)),
        )
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", LIMIT).await;
    let refused = host.call_tool("s", "t").await.unwrap_err();
    assert!(
        refused
            .message
            .contains("cannot parse the arguments near [[["),
        "{refused:?}"
    );
    assert!(!refused.message.contains("JSON body"), "{refused:?}");
}

/// Nested `depth` arrays, as a JSON value.
fn nested(depth: usize) -> Value {
    serde_json::from_str(&format!("{}{}", "[".repeat(depth), "]".repeat(depth))).unwrap()
}

/// What a modern server's `400` refusal of `tools/call` with `-32602 Invalid params`, its `data`
/// nesting `depth` arrays (an echo of the arguments it could not take), makes of the call: the
/// error, and the server's trail of `POST method status` lines after the Pack was ready.
async fn invalid_params_with_data(depth: usize) -> (Result<String, ToolError>, Vec<String>) {
    let server = Modern::start().await;
    let host = Host::new(json!({"m": entry(&server.url)}));
    host.ready("m", LIMIT).await;
    let before = server.trail().len();
    server.answer_next(
        "tools/call",
        Canned::Error(400, -32602, "Invalid params".into(), nested(depth)),
    );
    let args = json!({"namespace": "m", "toolName": "echo", "arguments": {}});
    let refused = host.call("call_dynamic_tool", args).await;
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    (refused, trail[before..].iter().map(Step::line).collect())
}

/// A modern server's JSON-RPC error on `400` is its refusal of the request, whatever its `data`
/// holds: with data nested past the reader's bound the body is not read, so the `400` is taken
/// for a plain one, which on a modern route is the sign of a legacy server (`era_signal`): the
/// Pack probes the era again and sends the refused tool call a second time.
#[tokio::test]
async fn a_modern_error_with_deep_data_is_no_sign_of_a_legacy_server() {
    let (shallow, shallow_trail) = invalid_params_with_data(3).await;
    let (deep, deep_trail) = invalid_params_with_data(70).await;
    let kind = |answer: &Result<String, ToolError>| answer.as_ref().err().map(|e| e.kind);
    assert_eq!(
        kind(&shallow),
        Some(ToolErrorKind::InvalidArguments),
        "{shallow:?}"
    );
    assert_eq!(shallow_trail, ["POST tools/call 400"], "{shallow:?}");
    // Seen: `POST tools/call 400`, `POST server/discover 200`, `POST tools/call 200`: the
    // refused call is sent again and answered.
    assert_eq!(deep_trail, shallow_trail, "{deep:?}");
    assert_eq!(kind(&deep), kind(&shallow), "{deep:?}");
}

/// What a legacy server whose first `tools/call` is refused with `400` and the JSON-RPC error
/// "Bad Request: No valid session ID provided" (the words of the TypeScript and Python SDKs),
/// its `data` nesting `depth` arrays, makes of the call, and how many `initialize` it received.
async fn session_gone_with_data(depth: usize) -> (Result<String, ToolError>, usize) {
    let server = hostile::serve_tools(vec![tool("t", "t")], move |req| {
        if req.nth == 0 {
            let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000,
                "message": "Bad Request: No valid session ID provided", "data": nested(depth)}});
            return Reply::raw(400, "application/json", body.to_string());
        }
        Reply::json(&hostile::text_result(&req.id(), "ok"))
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", LIMIT).await;
    let answer = host.call_tool("s", "t").await;
    (answer, server.count("initialize"))
}

/// A server's "no valid session" refusal is its word that the session is gone, whatever its
/// `data` holds: a new session is made and the call answered. With data nested past the
/// reader's bound the body is not read, the words are not seen, and the call fails with a plain
/// HTTP 400 on a session the server no longer knows.
#[tokio::test]
async fn a_session_gone_refusal_with_deep_data_still_renews_the_session() {
    let shallow = session_gone_with_data(3).await;
    assert_eq!(shallow, (Ok("ok".to_string()), 2));
    let deep = session_gone_with_data(70).await;
    assert_eq!(deep, shallow);
}

/// The secret of the entry's header, as a server can write it twice escaped: a JSON text held in
/// a JSON string, its `t` written `\u0074`, then that string written in JSON again.
const TOKEN: &str = "tok-1234567890abc";

/// A server log message whose `data` is an object (written as its JSON text, scrubbed) holding
/// the header's token twice escaped is scrubbed like a result's JSON is: the JSON rule decodes
/// each string and reads the result again as text, so a twice-escaped token is found; the log
/// line's plain rule decodes once, and the token's escaped form reaches the log at
/// `RUST_LOG=trace`.
#[tokio::test]
async fn a_log_message_with_a_twice_escaped_token_in_object_data_is_scrubbed() {
    let (_capture, logs) = crate::support::logs::capture("trace");
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        let inner = format!(r#"{{"t":"\u0074{}"}}"#, &TOKEN[1..]);
        Reply::sse(&[
            json!({"jsonrpc": "2.0", "method": "notifications/message",
                   "params": {"level": "error", "data": {"inner": inner}}}),
            result(
                &req.id(),
                json!({"content": [], "structuredContent": {"inner": inner}}),
            ),
        ])
    })
    .await;
    let mut config = entry(&server.url);
    config["headers"] = json!({"Authorization": format!("Bearer {TOKEN}")});
    let host = Host::new(json!({"s": config}));
    host.ready("s", LIMIT).await;
    // The same object as a result's `structuredContent`: scrubbed by the JSON rule.
    let answer = host.call_tool("s", "t").await.unwrap();
    assert!(answer.contains("inner"), "{answer}");
    assert!(!answer.contains(&TOKEN[1..]), "{answer}");
    let logged = logs.lines_with("inner");
    assert_eq!(logged.len(), 1, "{}", logs.text());
    assert!(!logged[0].contains(&TOKEN[1..]), "{}", logged[0]);
}
