//! A rate limit's named wait (`429`/`503` with `Retry-After`, RFC 6585 §4) on the paths that
//! ask again on their own: the change stream's loop stays away at least the wait the server
//! named, on a modern route's `subscriptions/listen` as on a legacy session's `GET`
//! (docs/connection.md "Verdicts").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use runvil_plugin::ToolErrorKind;
use serde_json::{Value, json};

use crate::support::Host;
use crate::support::answers::modern_with;
use crate::support::hostile::{self, Reply, entry};

const WAIT: Duration = Duration::from_secs(10);

/// A modern server refuses `subscriptions/listen` `429` with `Retry-After: 20`: the loop does
/// not ask again within the 20 seconds (its own backoff would ask after 1 s and 3 s).
#[tokio::test]
async fn a_modern_listen_refused_429_waits_the_named_wait_before_asking_again() {
    let server =
        modern_with(|_| Reply::raw(429, "text/plain", "slow down").header("retry-after", "20"))
            .await;
    let host = Host::new(json!({ "m": entry(&server.url) }));
    host.ready("m", WAIT).await;
    quiet_after(&server, "the first listen", |r| {
        r.iter().any(|r| r.method() == "subscriptions/listen")
    })
    .await;
    assert_eq!(
        server.count("subscriptions/listen"),
        1,
        "listens within 4.5 s of a Retry-After: 20"
    );
    drop(host);
}

/// A resumption (`GET` + `Last-Event-ID`, MCP 2025-11-25 "Resumability and Redelivery") refused
/// `429` with `Retry-After: 1`: docs/connection.md's verdict table says a rate limit is "sent once
/// more ... after the wait when it is at most 30 s", on every path, the resumption named among
/// them. The call's answer is still buffered on the server: the resumption is asked again after
/// the second, and the call answers `done`.
#[tokio::test]
async fn a_resumption_refused_429_with_a_short_retry_after_resumes_after_the_wait() {
    let (server, resumptions) = resumption_refused_once("1").await;
    let host = ready_host(&server).await;
    let answer = host.call_tool("s", "t").await;
    assert_eq!(
        answer.as_deref().map_err(|e| e.message.clone()),
        Ok("done"),
        "resumptions asked: {}",
        resumptions.load(Ordering::SeqCst)
    );
}

/// A resumption refused `429` with `Retry-After: 60`, longer than the Pack waits (30 s): the
/// call's reply is not waited for, and the answer is `unavailable` naming the wait in whole
/// seconds, as a call refused so is, and saying the call may have run (its request was taken).
#[tokio::test]
async fn a_resumption_refused_429_with_a_long_retry_after_answers_unavailable_naming_the_wait() {
    let (server, resumptions) = resumption_refused_once("60").await;
    let host = ready_host(&server).await;
    let error = host.call_tool("s", "t").await.unwrap_err();
    assert_eq!(resumptions.load(Ordering::SeqCst), 1);
    assert_eq!(error.kind, runvil_plugin::ToolErrorKind::Unavailable);
    assert_eq!(
        error.message,
        "server \"s\" is unavailable: it took the call but refused to resume its reply stream as too many requests (HTTP 429) and asked to be called again in 60 seconds; the call may have run"
    );
}

/// A server whose `tools/call` stream carries one event and ends before the answer; the first
/// resumption is refused `429` with `Retry-After: retry_after`, a later one carries the answer
/// `done`. Answers the server and the count of resumptions asked.
async fn resumption_refused_once(retry_after: &'static str) -> (hostile::Server, Arc<AtomicUsize>) {
    let resumptions = Arc::new(AtomicUsize::new(0));
    let call_id = Arc::new(Mutex::new(Value::Null));
    let server = hostile::serve({
        let resumptions = Arc::clone(&resumptions);
        let call_id = Arc::clone(&call_id);
        move |req| {
            let reply = if req.http_method == "GET" && req.header("last-event-id").is_some() {
                if resumptions.fetch_add(1, Ordering::SeqCst) == 0 {
                    Reply::raw(429, "text/plain", "slow down").header("retry-after", retry_after)
                } else {
                    let id = call_id.lock().unwrap().clone();
                    let answer = hostile::text_result(&id, "done");
                    Reply::raw(
                        200,
                        "text/event-stream",
                        format!("id: e2\ndata: {answer}\n\n"),
                    )
                }
            } else if let Some(reply) = hostile::standard(&req) {
                reply
            } else if req.method() == "tools/list" {
                Reply::json(&hostile::tools_page(
                    &req.id(),
                    vec![hostile::tool("t", "t")],
                    None,
                ))
            } else {
                *call_id.lock().unwrap() = req.id();
                let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                                  "params": {"level": "info", "data": "working"}});
                // The call's stream carries one event and ends before the answer.
                Reply::raw(
                    200,
                    "text/event-stream",
                    format!("retry: 100\nid: e1\ndata: {note}\n\n"),
                )
            };
            async move { reply }
        }
    })
    .await;
    (server, resumptions)
}

/// The standalone `GET` stream refused `429` with `Retry-After: 20`: the server named how long to
/// stay away (RFC 6585 §4), and docs/connection.md says every path, the standalone stream named,
/// acts on the rate-limit verdict: no second `GET` before the 20 seconds are up.
#[tokio::test]
async fn a_standalone_get_refused_429_waits_the_named_wait_before_asking_again() {
    let server = hostile::serve_every_get(|req| {
        let reply = if req.http_method == "GET" {
            Reply::raw(429, "text/plain", "slow down").header("retry-after", "20")
        } else {
            standard_or_t(&req)
        };
        async move { reply }
    })
    .await;
    let host = ready_host(&server).await;
    quiet_after(&server, "the first GET", |r| {
        r.iter().any(|r| r.http_method == "GET")
    })
    .await;
    let gets = server.count_verb("GET");
    assert_eq!(gets, 1, "GETs within 4.5 s of a Retry-After: 20");
    drop(host);
}

/// The standalone `GET` on `s-1` is refused `429` with `Retry-After: 20`; a call then meets the
/// `404` of `s-1` and renews onto `s-2`. A rate limit is the client's, not one session's (RFC
/// 6585 §4): the loop, which looks at a session a call renewed at once, still stays away the
/// named wait first: no second `GET` within the 20 seconds.
#[tokio::test]
async fn a_rate_limited_stream_stays_away_the_named_wait_across_a_calls_renewal() {
    let (server, live) = forgetful(|req, _| {
        (req.http_method == "GET")
            .then(|| Reply::raw(429, "text/plain", "slow down").header("retry-after", "20"))
    })
    .await;
    let host = ready_host(&server).await;
    server
        .wait_until(WAIT, "the first GET", |r| {
            r.iter().any(|r| r.http_method == "GET")
        })
        .await;
    live.lock().unwrap().clear();
    assert_eq!(host.call_tool("s", "t").await, Ok("served".into()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        server.count_verb("GET"),
        1,
        "GETs within 3 s of a Retry-After: 20"
    );
    drop(host);
}

/// The renewal a call waits for is refused `429` with `Retry-After: 3`. The server named how
/// long the client must stay away (RFC 6585 §4), and a renewal is one task shared by every
/// request that needs a session: a second call made during that wait sends no `initialize` of
/// its own before the wait is over, and both calls are served after it.
#[tokio::test]
async fn a_second_call_during_a_rate_limited_renewal_sends_no_initialize_inside_the_wait() {
    let (server, live) = forgetful(refusing_initialize(2, false, || {
        Reply::raw(429, "text/plain", "slow down").header("retry-after", "3")
    }))
    .await;
    let host = ready_host(&server).await;
    live.lock().unwrap().clear();
    let first = host.call_tool("s", "t");
    let second = async {
        let seen = server
            .wait_until(WAIT, "the renewal refused 429", |r| {
                r.iter().filter(|r| r.method() == "initialize").count() == 2
            })
            .await;
        let limited_at = seen
            .iter()
            .filter(|r| r.method() == "initialize")
            .nth(1)
            .expect("the second initialize")
            .at;
        tokio::time::sleep(Duration::from_millis(200)).await;
        (limited_at, host.call_tool("s", "t").await)
    };
    let (first, (limited_at, second)) = tokio::join!(first, second);
    assert_eq!(first, Ok("served".into()));
    assert_eq!(second, Ok("served".into()));
    let early: Vec<Duration> = server
        .with_method("initialize")
        .iter()
        .filter(|r| r.at > limited_at)
        .map(|r| r.at - limited_at)
        .filter(|after| *after < Duration::from_millis(2900))
        .collect();
    assert_eq!(
        early,
        Vec::<Duration>::new(),
        "initializes inside the named 3 s wait"
    );
    assert_eq!(server.count("initialize"), 3);
}

/// The close's `DELETE` refused `429` with `Retry-After: 1`: the session was not ended (RFC 6585
/// §4: the request was not processed), the wait fits the goodbye's 5 s bound, and
/// docs/connection.md lists the close among the paths that act on the verdict: the `DELETE` is sent
/// once more after the second.
#[tokio::test]
async fn a_delete_refused_429_with_a_short_retry_after_is_sent_again_after_the_wait() {
    let deletes = Arc::new(AtomicUsize::new(0));
    let server = hostile::serve({
        let deletes = Arc::clone(&deletes);
        move |req| {
            let reply = match req.http_method.as_str() {
                "DELETE" if deletes.fetch_add(1, Ordering::SeqCst) == 0 => {
                    Reply::raw(429, "text/plain", "slow down").header("retry-after", "1")
                }
                "DELETE" => Reply::raw(200, "text/plain", ""),
                _ => standard_or_t(&req),
            };
            async move { reply }
        }
    })
    .await;
    let host = ready_host(&server).await;
    drop(host);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let trail: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.http_method == "DELETE")
        .map(|r| format!("DELETE {}", r.header("mcp-session-id").unwrap_or_default()))
        .collect();
    let session = format!("DELETE {}", hostile::SESSION);
    assert_eq!(trail, [session.clone(), session]);
}

/// The standalone stream's loop renews a session it found gone (its `GET` and `ping` answered
/// `404`), and the server refuses the `initialize` `429` with `Retry-After: 20`. As with the
/// stream itself (above), the loop's own renewal is a path that must act on the rate-limit
/// verdict: no further `initialize` within the 20 seconds.
#[tokio::test]
async fn the_stream_loops_renewal_refused_429_waits_the_named_wait() {
    let initializes = Arc::new(AtomicUsize::new(0));
    let server = hostile::serve_every_get({
        let initializes = Arc::clone(&initializes);
        move |req| {
            let reply = match (req.http_method.as_str(), req.method()) {
                ("POST", "initialize") => {
                    if initializes.fetch_add(1, Ordering::SeqCst) == 0 {
                        hostile::initialize_reply(&req.id())
                    } else {
                        Reply::raw(429, "text/plain", "slow down").header("retry-after", "20")
                    }
                }
                ("GET", _) | ("POST", "ping") => Reply::raw(404, "text/plain", "no such session"),
                ("POST", "tools/list") => Reply::json(&hostile::tools_page(
                    &req.id(),
                    vec![hostile::tool("t", "t")],
                    None,
                )),
                _ => hostile::standard(&req).unwrap_or_else(|| Reply::raw(400, "text/plain", "")),
            };
            async move { reply }
        }
    })
    .await;
    let host = ready_host(&server).await;
    quiet_after(&server, "the renewal refused 429", |r| {
        r.iter().filter(|r| r.method() == "initialize").count() >= 2
    })
    .await;
    assert_eq!(
        server.count("initialize"),
        2,
        "initializes within 4.5 s of a Retry-After: 20"
    );
    drop(host);
}

/// A [`forgetful`] script refusing `initialize`s with `reply()`: the `n`-th only, or with
/// `later_too` every one from the `n`-th on (the first is the start's, the next a renewal's).
fn refusing_initialize(
    n: usize,
    later_too: bool,
    reply: fn() -> Reply,
) -> impl Fn(&hostile::Received, bool) -> Option<Reply> + Send + Sync + 'static {
    let initializes = AtomicUsize::new(0);
    move |req, _| {
        if req.method() != "initialize" {
            return None;
        }
        let nth = initializes.fetch_add(1, Ordering::SeqCst) + 1;
        (nth == n || (later_too && nth > n)).then(reply)
    }
}

/// The sessions a [`forgetful`] server still knows.
type Live = Arc<Mutex<std::collections::HashSet<String>>>;

/// A legacy server that issues `s-1`, `s-2`, … and answers `404` on a session it no longer
/// knows (a test removes ids from the returned set to make it forget them). `script(req,
/// known)` answers first when it gives a reply (a refused `initialize`, a `GET`, a test's own
/// tool); else the handshake's and housekeeping's answers, a listing of `t` and `slow`, and
/// `served` for a call.
async fn forgetful(
    script: impl Fn(&hostile::Received, bool) -> Option<Reply> + Send + Sync + 'static,
) -> (hostile::Server, Live) {
    let live: Live = Arc::default();
    let issued = AtomicUsize::new(0);
    let server = hostile::serve_every_get({
        let live = Arc::clone(&live);
        move |req| {
            let known = req
                .header("mcp-session-id")
                .is_some_and(|s| live.lock().unwrap().contains(&s));
            let reply = if req.http_method == "DELETE" {
                Reply::raw(200, "text/plain", "")
            } else if let Some(reply) = script(&req, known) {
                reply
            } else if req.method() == "initialize" {
                let sid = format!("s-{}", issued.fetch_add(1, Ordering::SeqCst) + 1);
                live.lock().unwrap().insert(sid.clone());
                crate::support::answers::initialize(&req.id(), &sid)
            } else if let Some(reply) = hostile::housekeeping(&req) {
                reply
            } else if !known {
                Reply::raw(404, "text/plain", "Not Found: Session not found")
            } else {
                match req.method() {
                    "tools/list" => Reply::json(&hostile::tools_page(
                        &req.id(),
                        vec![hostile::tool("t", "t"), hostile::tool("slow", "slow")],
                        None,
                    )),
                    _ => Reply::json(&hostile::text_result(&req.id(), "served")),
                }
            };
            async move { reply }
        }
    })
    .await;
    (server, live)
}

/// What reached `s-1` after the call of `t` (which met its `404`): `VERB method` each.
fn sent_to_s1_after_the_call_of_t(server: &hostile::Server) -> Vec<String> {
    let requests = server.requests();
    let forgotten_at = requests
        .iter()
        .position(|r| r.method() == "tools/call" && r.rpc["params"]["name"] == "t")
        .expect("the call of t");
    requests[forgotten_at + 1..]
        .iter()
        .filter(|r| r.header("mcp-session-id").as_deref() == Some("s-1"))
        .map(|r| format!("{} {}", r.http_method, r.method()))
        .collect()
}

/// The handshake's and housekeeping's answers ([`hostile::standard`]), else a listing of one
/// tool `t`.
fn standard_or_t(req: &hostile::Received) -> Reply {
    hostile::standard(req).unwrap_or_else(|| {
        Reply::json(&hostile::tools_page(
            &req.id(),
            vec![hostile::tool("t", "t")],
            None,
        ))
    })
}

/// Waits (at most [`WAIT`]) until `server` received `what` (`seen`), then 4.5 s more: long
/// enough for a loop that ignored a `Retry-After: 20` to ask again (its backoff: 1 s, then 3 s).
async fn quiet_after(
    server: &hostile::Server,
    what: &str,
    seen: impl Fn(&[hostile::Received]) -> bool,
) {
    server.wait_until(WAIT, what, seen).await;
    tokio::time::sleep(Duration::from_millis(4500)).await;
}

/// A Host with the one entry `s` at `server`'s `/mcp`, once it is ready.
async fn ready_host(server: &hostile::Server) -> Host {
    let host = Host::new(json!({"s": {"url": format!("http://127.0.0.1:{}/mcp", server.port)}}));
    host.ready("s", WAIT).await;
    host
}

/// A server whose call `t` sends event `e1` and cuts its stream, and whose every resumption
/// (`GET` + `Last-Event-ID`) is refused `429` with `Retry-After: retry_after`.
async fn resumption_limited(retry_after: &'static str) -> hostile::Server {
    hostile::serve(move |req| async move {
        if req.http_method == "GET" && req.header("last-event-id").is_some() {
            return Reply::raw(429, "text/plain", "slow down").header("retry-after", retry_after);
        }
        match req.method() {
            "tools/call" => crate::support::answers::cut_after(format!(
                "retry: 100\nid: e1\ndata: {}\n\n",
                progress()
            )),
            _ => standard_or_t(&req),
        }
    })
    .await
}

/// A `notifications/progress` of token `p`.
fn progress() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/progress",
           "params": {"progressToken": "p", "progress": 1}})
}

/// A resumption's rate-limit wait must fit the call's deadline, as a call's own does: a call
/// with a 10 s deadline (`"timeout": 10000`) whose resumption is refused `429` with
/// `Retry-After: 20` is answered at once, naming the wait, rather than sleeping past its
/// deadline.
#[tokio::test]
async fn a_resumption_refused_429_with_a_wait_past_the_calls_deadline_is_answered_at_once() {
    let server = resumption_limited("20").await;
    let host = Host::new(json!({"s": {"url": server.url, "timeout": 10000}}));
    host.ready("s", WAIT).await;
    let started = tokio::time::Instant::now();
    let called = tokio::time::timeout(Duration::from_secs(15), host.call_tool("s", "t"))
        .await
        .expect("the call returns by its deadline");
    let error = called.expect_err("the resumption was refused");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered after {:?}: {}",
        started.elapsed(),
        error.message
    );
    assert_eq!(error.kind, runvil_plugin::ToolErrorKind::Unavailable);
    assert_eq!(
        error.message,
        "server \"s\" is unavailable: it took the call but refused to resume its reply stream as too many requests (HTTP 429) and asked to be called again in 20 seconds; the call may have run"
    );
}

/// A request sent once more after a rate limit's wait goes to the live session: a call of
/// `slow` on `s-1` is refused `429` with `Retry-After: 2`; during its wait a call of `t` meets
/// the `404` of `s-1` (forgotten) and is served on `s-2`. The waiting call's one resend goes to
/// `s-2`, and nothing more is sent to `s-1`, known gone.
#[tokio::test]
async fn a_resend_after_a_rate_limit_wait_goes_to_the_live_session_not_one_known_gone() {
    let slow_calls = AtomicUsize::new(0);
    let (server, live) = forgetful(move |req, known| {
        if !(known && req.method() == "tools/call" && req.rpc["params"]["name"] == "slow") {
            return None;
        }
        Some(match slow_calls.fetch_add(1, Ordering::SeqCst) {
            0 => Reply::raw(429, "text/plain", "slow down").header("retry-after", "2"),
            _ => Reply::json(&hostile::text_result(&req.id(), "slow served")),
        })
    })
    .await;
    let host = ready_host(&server).await;
    let slow = host.call_tool("s", "slow");
    let other = async {
        server
            .wait_until(WAIT, "the slow call", |r| {
                r.iter().any(|r| r.method() == "tools/call")
            })
            .await;
        live.lock().unwrap().remove("s-1");
        host.call_tool("s", "t").await
    };
    let (slow, other) = tokio::join!(slow, other);
    assert_eq!(other, Ok("served".into()));
    assert_eq!(slow, Ok("slow served".into()));
    assert_eq!(
        sent_to_s1_after_the_call_of_t(&server),
        Vec::<String>::new(),
        "sent to s-1 after the server forgot it"
    );
}

/// A `notifications/cancelled` refused `429` with `Retry-After: 1` was not processed (RFC 6585
/// §4): the server still runs the tool the client gave up on. As the close's `DELETE`, the
/// cancel is sent once more after the wait when it fits its goodbye bound (5 s).
#[tokio::test]
async fn a_cancel_refused_429_with_a_short_retry_after_is_sent_again_after_the_wait() {
    use futures_util::stream::{self, StreamExt};
    let server = hostile::serve(|req| async move {
        match req.method() {
            "notifications/cancelled" => {
                Reply::raw(429, "text/plain", "slow down").header("retry-after", "1")
            }
            "tools/list" => Reply::json(&hostile::tools_page(
                &req.id(),
                vec![hostile::tool("hold", "hold")],
                None,
            )),
            // One progress event, then the stream held open without a word.
            "tools/call" => {
                let text = bytes::Bytes::from(hostile::sse_event(&progress()));
                Reply::stream(
                    200,
                    "text/event-stream",
                    stream::once(async move { Ok(text) }).chain(stream::pending()),
                )
            }
            _ => hostile::standard(&req)
                .unwrap_or_else(|| Reply::json(&hostile::text_result(&req.id(), "served"))),
        }
    })
    .await;
    let host = ready_host(&server).await;
    let hold = host.pack.call(
        "mcp/call_dynamic_tool",
        json!({"namespace": "s", "toolName": "hold"}),
    );
    let held = tokio::time::timeout(Duration::from_secs(1), hold).await;
    assert!(held.is_err(), "the held call returned");
    server
        .wait_until(WAIT, "the first cancel", |r| {
            r.iter().any(|r| r.method() == "notifications/cancelled")
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cancels = server.with_method("notifications/cancelled");
    assert_eq!(cancels.len(), 2, "cancels sent");
    let waited = cancels[1].at - cancels[0].at;
    assert!(waited >= Duration::from_secs(1), "{waited:?}");
}

/// The answer to a server request (a `ping` on a call's event stream) refused `429` with
/// `Retry-After: 1` was not processed (RFC 6585 §4): like a cancel, it is sent once more after
/// the wait, within its 5 s bound, and the call's own answer is read after it.
#[tokio::test]
async fn an_answer_to_a_server_request_refused_429_is_sent_again_after_the_wait() {
    let answers = Arc::new(AtomicUsize::new(0));
    let server = hostile::serve({
        let answers = Arc::clone(&answers);
        move |req| {
            let is_answer = req.rpc.get("method").is_none() && req.rpc["id"] == "srv-1";
            let reply = if is_answer {
                if answers.fetch_add(1, Ordering::SeqCst) == 0 {
                    Reply::raw(429, "text/plain", "slow down").header("retry-after", "1")
                } else {
                    Reply::accepted()
                }
            } else if req.method() == "tools/call" {
                let asked = json!({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"});
                Reply::sse(&[asked, hostile::text_result(&req.id(), "served")])
            } else {
                standard_or_t(&req)
            };
            async move { reply }
        }
    })
    .await;
    let host = ready_host(&server).await;
    assert_eq!(host.call_tool("s", "t").await, Ok("served".into()));
    let sent: Vec<_> = server
        .requests()
        .iter()
        .filter(|r| r.rpc.get("method").is_none() && r.rpc["id"] == "srv-1")
        .map(|r| r.at)
        .collect();
    assert_eq!(sent.len(), 2, "answers sent");
    assert!(sent[1] - sent[0] >= Duration::from_secs(1), "{sent:?}");
}

/// A resumption asked once more after a rate limit's wait goes nowhere when its session was
/// forgotten meanwhile: the call of `slow` on `s-1` has its stream cut after `e1`, and its
/// resumption is refused `429` with `Retry-After: 2`; during the wait a call of `t` meets the
/// `404` of `s-1` (forgotten) and is served on `s-2`. Nothing more goes to `s-1`, and the call
/// of `slow` is over on it, not cancelled.
#[tokio::test]
async fn a_resumption_after_a_rate_limit_wait_goes_nowhere_once_its_session_is_known_gone() {
    let (server, live) = forgetful(|req, known| {
        if req.http_method == "GET" && req.header("last-event-id").is_some() {
            return Some(if known {
                Reply::raw(429, "text/plain", "slow down").header("retry-after", "2")
            } else {
                Reply::raw(404, "text/plain", "Not Found: Session not found")
            });
        }
        (known && req.method() == "tools/call" && req.rpc["params"]["name"] == "slow").then(|| {
            crate::support::answers::cut_after(format!(
                "retry: 100\nid: e1\ndata: {}\n\n",
                progress()
            ))
        })
    })
    .await;
    let host = ready_host(&server).await;
    let slow = host.call_tool("s", "slow");
    let other = async {
        server
            .wait_until(WAIT, "the resumption refused 429", |r| {
                r.iter().any(|r| r.header("last-event-id").is_some())
            })
            .await;
        live.lock().unwrap().remove("s-1");
        host.call_tool("s", "t").await
    };
    let (slow, other) = tokio::join!(slow, other);
    assert_eq!(other, Ok("served".into()));
    assert!(slow.is_err(), "{slow:?}");
    assert_eq!(
        sent_to_s1_after_the_call_of_t(&server),
        Vec::<String>::new(),
        "sent to s-1 after the server forgot it"
    );
}

/// The renewal of a forgotten session is refused `429` with a `Retry-After` of more seconds than
/// a `u64` holds (read as "a very long time"): a wait past the 30 s bound is answered naming
/// it, the call `unavailable` with the wait in whole seconds, and nothing panics (the session
/// machine holds such a refusal at most the stream loop's longest backoff).
#[tokio::test]
async fn a_renewal_refused_429_with_an_enormous_retry_after_answers_unavailable_not_a_panic() {
    let (server, live) = forgetful(refusing_initialize(2, true, || {
        Reply::raw(429, "text/plain", "slow down").header("retry-after", "99999999999999999999999")
    }))
    .await;
    let host = ready_host(&server).await;
    live.lock().unwrap().clear();
    let error = host.call_tool("s", "t").await.unwrap_err();
    assert_eq!(error.kind, ToolErrorKind::Unavailable, "{}", error.message);
    assert!(
        error
            .message
            .contains("asked to be called again in 18446744073709551615 seconds"),
        "{}",
        error.message
    );
}

/// A call's reply stream is cut after one event and its resumption is refused `429` without a
/// `Retry-After` (the busy verdict): the server took the call, so the answer says the call may
/// have run, never that it was refused (which would invite a second run).
#[tokio::test]
async fn a_resumption_refused_429_without_retry_after_says_the_call_may_have_run() {
    let server = hostile::serve(move |req| async move {
        if req.http_method == "GET" && req.header("last-event-id").is_some() {
            return Reply::raw(429, "text/plain", "slow down");
        }
        match req.method() {
            "tools/call" => crate::support::answers::cut_after(format!(
                "retry: 100\nid: e1\ndata: {}\n\n",
                progress()
            )),
            _ => standard_or_t(&req),
        }
    })
    .await;
    let host = ready_host(&server).await;
    let error = host.call_tool("s", "t").await.unwrap_err();
    assert_eq!(
        error,
        runvil_plugin::ToolError::new(
            ToolErrorKind::Unavailable,
            "server \"s\" is unavailable: it took the call but refused to resume its reply stream as too many requests (HTTP 429) without saying when to ask again; the call may have run"
        )
    );
    assert_eq!(server.count("tools/call"), 1);
}

/// A call with a 10 s deadline meets a forgotten session whose renewal is refused `429` with
/// `Retry-After: 15`: past its deadline, so it is `unavailable` at once. 8 s later a second
/// call needs a session: 7 s of the wait are left, which ends before its deadline, so it waits
/// them out and is served (the refusal it meets asks for what is left of the wait).
#[tokio::test]
async fn a_call_during_a_throttled_renewal_waits_out_what_is_left_of_the_wait() {
    let (server, live) = forgetful(refusing_initialize(2, false, || {
        Reply::raw(429, "text/plain", "slow down").header("retry-after", "15")
    }))
    .await;
    let host = Host::new(json!({"s": {
        "url": format!("http://127.0.0.1:{}/mcp", server.port),
        "timeout": 10000
    }}));
    host.ready("s", WAIT).await;
    live.lock().unwrap().clear();
    let first = host.call_tool("s", "t").await.unwrap_err();
    assert_eq!(first.kind, ToolErrorKind::Unavailable, "{}", first.message);
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(host.call_tool("s", "t").await, Ok("served".into()));
}

/// The renewal of a forgotten session is refused `503` without a `Retry-After` (the busy
/// verdict: not processed, no wait named): the call, refused `404` before it ran and not sent
/// again, did not run, and is `unavailable` as a call refused busy itself is.
#[tokio::test]
async fn a_renewal_refused_503_without_retry_after_is_busy_for_the_call() {
    let (server, live) = forgetful(refusing_initialize(2, false, || {
        Reply::raw(503, "text/plain", "busy")
    }))
    .await;
    let host = ready_host(&server).await;
    live.lock().unwrap().clear();
    let error = host.call_tool("s", "t").await.unwrap_err();
    assert_eq!(error.kind, ToolErrorKind::Unavailable, "{}", error.message);
    assert_eq!(server.count("tools/call"), 1);
}
