//! Attacks on the one reader of JSON text (`src/json.rs`) through the Host contract: a key a
//! server names twice in one object, written so that only the mended text shows the repeat.

use serde_json::json;

use crate::support::hostile::{self, Reply, entry};
use crate::support::{Host, WAIT};

/// A `tools/call` result whose `structuredContent` names one key twice through two lone
/// surrogate escapes (`\ud800` and `\udc00`, both read as U+FFFD), as the body of a reply of
/// `content_type`.
fn twice_through_surrogates(id: &serde_json::Value, content_type: &str) -> Reply {
    let message = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"structuredContent":{{"\ud800":"first","\udc00":"last"}}}}}}"#
    );
    match content_type {
        "text/event-stream" => Reply::raw(
            200,
            content_type,
            format!("event: message\ndata: {message}\n\n"),
        ),
        _ => Reply::raw(200, content_type, message),
    }
}

/// The answer of tool `t` on a server replying in `content_type`.
async fn answer_in(content_type: &'static str) -> String {
    let server = hostile::serve_tools(vec![hostile::tool("t", "a tool")], move |req| {
        twice_through_surrogates(&req.id(), content_type)
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", WAIT).await;
    host.call_tool("s", "t").await.unwrap()
}

/// Over SSE (event data made ready as shared bytes) the answer is the one a JSON body gives:
/// the last member only, not the earlier one the decoded value does not hold.
#[tokio::test]
async fn a_key_named_twice_through_lone_surrogates_shows_one_member_in_an_event() {
    let last = r#"{"\ufffd":"last"}"#;
    assert_eq!(answer_in("application/json").await, last);
    assert_eq!(answer_in("text/event-stream").await, last);
}
