//! Attacks on the one reader of untrusted JSON (`src/json.rs`) through the Host contract: texts
//! that reach the model or a decoder without the reader's rules (lone surrogates mended, nesting
//! bounded, the earlier member of a key named twice blanked).

use serde_json::json;

use crate::support::hostile::{self, Reply};
use crate::support::{Host, WAIT};

/// The entry's secret, sent as a header.
const KEY: &str = "sk-live-0123456789";

/// The answer of tool `t` on a server (its entry keyed with [`KEY`]) whose `tools/call` result
/// is one text block holding `text`.
async fn text_answer(text: &'static str) -> String {
    let server = hostile::serve_tools(vec![hostile::tool("t", "a tool")], move |req| {
        Reply::json(&hostile::text_result(&req.id(), text))
    })
    .await;
    let host = Host::new(json!({"s": {"url": server.url, "headers": {"X-Api-Key": KEY}}}));
    host.ready("s", WAIT).await;
    host.call_tool("s", "t").await.unwrap()
}

/// A text result that is JSON text echoing the entry's secret behind a `\u0073` escape is
/// scrubbed (the JSON rule decodes each string's escapes); the same string holding a lone
/// surrogate escape as well must be scrubbed too. It is not: the scrub and the exit gate decode
/// the string with serde_json, which refuses the lone surrogate, and keep the string as
/// written, so the model reads the secret once it decodes the JSON it was given.
#[tokio::test]
async fn an_escaped_secret_beside_a_lone_surrogate_in_a_json_text_result_is_scrubbed() {
    // Without the lone surrogate: scrubbed.
    let plain = text_answer(r#"{"echo":"\u0073k-live-0123456789"}"#).await;
    assert_eq!(plain, r#"{"echo":"[redacted]"}"#);
    // With it: the secret must not be there, as written or decoded.
    let answer = text_answer(r#"{"echo":"\ud800 \u0073k-live-0123456789"}"#).await;
    let decoded: String = serde_json::from_str::<serde_json::Value>(&answer)
        .ok()
        .and_then(|v| v["echo"].as_str().map(str::to_string))
        .unwrap_or_else(|| answer.clone());
    assert!(!answer.contains("k-live-0123456789"), "{answer}");
    assert!(!decoded.contains(KEY), "{answer}");
}

/// The error message of tool `t` on a server whose `tools/call` is refused with HTTP 500 and a
/// JSON body naming `"error"` twice, its `"detail"` nesting `depth` arrays.
async fn preview_of(depth: usize) -> String {
    let server = hostile::serve_tools(vec![hostile::tool("t", "a tool")], move |_| {
        let body = format!(
            r#"{{"error":"earlier-member","error":"later-member","detail":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        Reply::raw(500, "application/json", body)
    })
    .await;
    let host = Host::new(json!({"s": hostile::entry(&server.url)}));
    host.ready("s", WAIT).await;
    host.call_tool("s", "t").await.unwrap_err().message
}

/// An error body is a server's JSON text too: its preview keeps only the last member of a key
/// named twice. It does, until the body nests past the reader's bound: then `ready` stops at
/// the depth and returns before it blanks anything, and the preview quotes the earlier member
/// the reader never lets a decoded value hold.
#[tokio::test]
async fn an_error_body_nested_past_the_bound_still_loses_the_earlier_member() {
    let shallow = preview_of(3).await;
    assert!(shallow.contains("later-member"), "{shallow}");
    assert!(!shallow.contains("earlier-member"), "{shallow}");
    let deep = preview_of(70).await;
    assert!(deep.contains("later-member"), "{deep}");
    assert!(!deep.contains("earlier-member"), "{deep}");
}

/// The error message of tool `t` on a server refusing `tools/call` with HTTP 500 and `body`.
async fn refusal_of(body: String) -> String {
    let server = hostile::serve_tools(vec![hostile::tool("t", "a tool")], move |_| {
        Reply::raw(500, "application/json", body.clone())
    })
    .await;
    let host = Host::new(json!({"s": hostile::entry(&server.url)}));
    host.ready("s", WAIT).await;
    host.call_tool("s", "t").await.unwrap_err().message
}

/// An error body longer than its preview, naming `"error"` twice, the later member cut by the
/// preview's bound: the reader blanks an earlier member only when the later one ends, so the
/// cut preview quotes the earlier member, which the whole body, read, would not hold.
#[tokio::test]
async fn an_error_body_cut_inside_the_later_member_does_not_show_the_earlier_one() {
    let long = "x".repeat(9000);
    let whole = refusal_of(format!(
        r#"{{"error":"earlier-member","error":"later-member {}"}}"#,
        &long[..100]
    ))
    .await;
    assert!(!whole.contains("earlier-member"), "{whole}");
    let cut = refusal_of(format!(
        r#"{{"error":"earlier-member","error":"later-member {long}"}}"#
    ))
    .await;
    assert!(cut.contains("later-member"), "{cut}");
    assert!(!cut.contains("earlier-member"), "{cut}");
}
