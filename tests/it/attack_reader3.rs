//! Attacks on the reader's refusal of events nested past the bound: a skipped event still
//! moves the stream's last event id (an SSE event's `id` is the stream's place whatever its
//! data holds), so the standalone stream resumes after it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::support::Host;
use crate::support::hostile::{self, Reply, entry, list_changed_initialize, tool, tools_page};

/// A `notifications/message` whose params nest 70 arrays: past the reader's bound of 64.
fn deep_notification() -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":{}{}}}}}"#,
        "[".repeat(70),
        "]".repeat(70)
    )
}

/// The standalone stream's one event, `id: e1`, nests past the bound and is skipped; the
/// stream then ends. The `GET` that reopens it must resume after that event
/// (`Last-Event-ID: e1`), as it does after any event it skips: seen, it asks with no
/// `Last-Event-ID` (the skipped event's id was never taken), so the server replays it.
#[tokio::test]
async fn a_skipped_deep_event_on_the_standalone_stream_still_moves_the_last_event_id() {
    let opened = Arc::new(Mutex::new(0usize));
    let server = hostile::serve_every_get(move |req| {
        let opened = Arc::clone(&opened);
        async move {
            if req.http_method == "GET" {
                let mut opened = opened.lock().unwrap();
                *opened += 1;
                if *opened == 1 {
                    return Reply::raw(
                        200,
                        "text/event-stream",
                        format!("id: e1\nevent: message\ndata: {}\n\n", deep_notification()),
                    );
                }
                return Reply::stream(200, "text/event-stream", futures_util::stream::pending());
            }
            if req.http_method == "DELETE" {
                return Reply::raw(200, "text/plain", "");
            }
            match req.method() {
                "initialize" => list_changed_initialize(&req.id()),
                "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
                _ => Reply::accepted(),
            }
        }
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", Duration::from_secs(10)).await;
    let gets = server
        .wait_until(Duration::from_secs(10), "the stream reopened", |r| {
            r.iter().filter(|r| r.http_method == "GET").count() >= 2
        })
        .await;
    let asked: Vec<Option<String>> = gets
        .iter()
        .filter(|r| r.http_method == "GET")
        .map(|r| r.header("last-event-id"))
        .collect();
    assert_eq!(asked[..2], [None, Some("e1".to_string())]);
    drop(host);
}

/// On a call's own reply stream, a server notification nested past the bound (a log message
/// whose data nests 70 arrays) comes before the response, which is well formed. The
/// notification is no reply: skipped, the call's answer that follows is read. Seen: the call
/// fails at once with "the server's event … deeper than 64 levels", its answer lost.
#[tokio::test]
async fn a_deep_notification_before_the_answer_on_a_call_stream_does_not_lose_the_answer() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        let answer = hostile::text_result(&req.id(), "done");
        Reply::raw(
            200,
            "text/event-stream",
            format!(
                "event: message\ndata: {}\n\n{}",
                deep_notification(),
                hostile::sse_event(&answer)
            ),
        )
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", Duration::from_secs(10)).await;
    let answer = host.call_tool("s", "t").await;
    assert_eq!(server.count("tools/call"), 1);
    let text = answer.map_err(|e| e.message).unwrap();
    assert!(text.contains("done"), "{text}");
}
