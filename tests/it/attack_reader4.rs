//! Attacks on the reader of events nested too deep (a fifth review): on a call's own reply
//! stream, an event whose data nests past the bound and that is the call's answer by the
//! crate's own reading of an event (an error with a `null` id, a result with no id) must fail
//! the call with the refusal, as the same event not nested too deep ends the call.

use std::time::Duration;

use serde_json::json;

use crate::support::Host;
use crate::support::hostile::{self, Reply, entry, tool};

/// 70 nested arrays: past the reader's bound of 64.
fn deep() -> String {
    format!("{}{}", "[".repeat(70), "]".repeat(70))
}

/// Serves one tool whose call is answered by a stream of one `message` event holding `data`,
/// then the stream's end (no event id, so no resumption). Returns the call's outcome and how
/// many `tools/call` the server saw.
async fn call_answered_by(data: String) -> (Result<String, String>, usize) {
    let server = hostile::serve_tools(vec![tool("t", "t")], move |_req| {
        Reply::raw(
            200,
            "text/event-stream",
            format!("event: message\ndata: {data}\n\n"),
        )
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", Duration::from_secs(10)).await;
    let answer = host.call_tool("s", "t").await.map_err(|e| e.message);
    (answer, server.count("tools/call"))
}

/// An error response with a `null` id (the server could not read the request) is the call's
/// answer on its own stream (`route`: `ErrorWithoutId`). Its `data` nested past the bound, it
/// is skipped as "answering no request", the stream ends, and the call fails as a stream
/// closed before its response. Expected: the call fails with the refusal ("nests arrays and
/// objects deeper than 64 levels"), the request sent once.
#[tokio::test]
async fn a_deep_error_with_a_null_id_on_a_call_stream_fails_the_call_with_the_refusal() {
    let data = format!(
        r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"boom","data":{}}}}}"#,
        deep()
    );
    let (answer, calls) = call_answered_by(data).await;
    let message = answer.unwrap_err();
    assert!(message.contains("deeper than 64 levels"), "{message}");
    assert_eq!(calls, 1);
}

/// A tagged result with no id is read as the answer to the request awaited on its own stream
/// (`Flaw::NoId`: "a result without the request's id"). Its result nested past the bound, it
/// is skipped, and the call fails as a stream closed before its response. Expected: the
/// refusal, the request sent once.
#[tokio::test]
async fn a_deep_result_without_an_id_on_a_call_stream_fails_the_call_with_the_refusal() {
    let data = format!(
        r#"{{"jsonrpc":"2.0","result":{{"content":[],"structuredContent":{{"a":{}}}}}}}"#,
        deep()
    );
    let (answer, calls) = call_answered_by(data).await;
    let message = answer.unwrap_err();
    assert!(message.contains("deeper than 64 levels"), "{message}");
    assert_eq!(calls, 1);
}

/// The modern path (MCP 2026-07-28): the call's reply is a stream of one event, an error with a
/// `null` id whose `data` nests past the bound. Expected: the call fails with the refusal and
/// `tools/call` is posted once (a reply was read: nothing to re-issue). Seen: posted twice,
/// the tool run again and its second answer returned.
#[tokio::test]
async fn a_deep_error_with_a_null_id_on_a_modern_call_stream_fails_the_call_once() {
    use crate::support::modern::{Canned, Modern};
    let server = Modern::start().await;
    let host = Host::new(json!({"m": entry(&server.url)}));
    host.ready("m", Duration::from_secs(10)).await;
    let data = format!(
        r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"boom","data":{}}}}}"#,
        deep()
    );
    server.answer_next(
        "tools/call",
        Canned::Raw(
            200,
            Some("text/event-stream"),
            format!("event: message\ndata: {data}\n\n"),
        ),
    );
    let args = json!({"namespace": "m", "toolName": "echo", "arguments": {}});
    let refused = host.call("call_dynamic_tool", args).await;
    server
        .settle(Duration::from_millis(300), Duration::from_secs(10))
        .await;
    // Seen: skipped, the stream ends, the call is posted again and the second answer read.
    assert_eq!(
        (
            server.count("tools/call"),
            refused.map_err(|e| e.message).is_err()
        ),
        (1, true)
    );
}

/// A response to another request met on a call's own reply means the server answered
/// something: a stream that then ends is no lost reply to re-issue (`foreign` in
/// `read_stream`). The same response with its result nested past the bound is skipped without
/// that mark. Modern path: the reply is one event, a result for id 999 whose result nests 70
/// arrays, then the end. Expected: `tools/call` posted once, the call fails. Seen: posted
/// twice, the tool run again.
#[tokio::test]
async fn a_deep_response_to_another_request_on_a_modern_call_stream_is_no_lost_reply() {
    use crate::support::modern::{Canned, Modern};
    let server = Modern::start().await;
    let host = Host::new(json!({"m": entry(&server.url)}));
    host.ready("m", Duration::from_secs(10)).await;
    let data = format!(
        r#"{{"jsonrpc":"2.0","id":999,"result":{{"a":{}}}}}"#,
        deep()
    );
    server.answer_next(
        "tools/call",
        Canned::Raw(
            200,
            Some("text/event-stream"),
            format!("event: message\ndata: {data}\n\n"),
        ),
    );
    let args = json!({"namespace": "m", "toolName": "echo", "arguments": {}});
    let refused = host.call("call_dynamic_tool", args).await;
    server
        .settle(Duration::from_millis(300), Duration::from_secs(10))
        .await;
    assert_eq!(
        (
            server.count("tools/call"),
            refused.map_err(|e| e.message).is_err()
        ),
        (1, true)
    );
}

/// Legacy path: the call's reply stream holds one event, a response to request 999 whose
/// result nests past the bound, then ends. The same response not nested too deep makes the
/// call fail as "a response to another request and none to request 4" (the server answered
/// something: no lost reply). Expected: that error, `tools/call` posted once. Seen: the deep
/// response is skipped unmarked and the call fails as a stream closed before its response.
#[tokio::test]
async fn a_deep_response_to_another_request_on_a_call_stream_is_no_lost_reply() {
    let data = format!(
        r#"{{"jsonrpc":"2.0","id":999,"result":{{"a":{}}}}}"#,
        deep()
    );
    let (answer, calls) = call_answered_by(data).await;
    let message = answer.unwrap_err();
    assert_eq!(
        (message.contains("a response to another request"), calls),
        (true, 1),
        "{message}"
    );
}

/// A server request (`ping`, id `srv-1`) on a call's reply stream, its params nested past the
/// bound, then the call's answer. The same request not nested too deep is answered (a `POST`
/// of a response to `srv-1`); a request must get a response (JSON-RPC 2.0 §4, MCP base
/// protocol), an error when it cannot be read. Expected: a response to `srv-1` posted. Seen:
/// none, the request skipped (the server left waiting).
#[tokio::test]
async fn a_deep_server_request_on_a_call_stream_still_gets_a_response() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        let ping = format!(
            r#"{{"jsonrpc":"2.0","id":"srv-1","method":"ping","params":{{"a":{}}}}}"#,
            deep()
        );
        let answer = hostile::text_result(&req.id(), "done");
        Reply::raw(
            200,
            "text/event-stream",
            format!(
                "event: message\ndata: {ping}\n\n{}",
                hostile::sse_event(&answer)
            ),
        )
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", Duration::from_secs(10)).await;
    let answer = host.call_tool("s", "t").await.map_err(|e| e.message);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let answered = server
        .requests()
        .iter()
        .filter(|r| r.rpc["id"] == "srv-1")
        .count();
    assert_eq!((answer.is_ok(), answered), (true, 1));
}
