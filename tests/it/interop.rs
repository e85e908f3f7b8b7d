//! Real servers nobody in this project wrote, reached through the Pack exactly as a Host reaches
//! it: `@modelcontextprotocol/server-everything` (Node 22) and the Python `mcp` SDK 1.x
//! (`FastMCP`) and 2.x (`MCPServer`), in SSE and JSON-response modes.
//!
//! Every test here is `#[ignore]`d: a plain `cargo test` on a fresh clone counts them as ignored,
//! never as passed. The peers are installed into `.interop/` by `.ci/interop-setup.sh`;
//! `.ci/interop.sh` runs it, then `cargo test --test it interop:: -- --ignored` with
//! `PLUGIN_MCP_INTEROP=1`, under which a missing peer fails the test (without it, a test run by
//! hand whose peer is missing prints a `skipped:` line and returns). The `modern_*` tests, against
//! MCP 2026-07-28 servers, are left out of that run (`--skip interop::modern_`) until
//! `PLUGIN_MCP_INTEROP_MODERN=1`.
//!
//! Each test starts its own peer on a free loopback port (killed when dropped) behind a
//! recording reverse proxy (`support::interop::Proxy`), and asserts the exact mapped texts and
//! errors the Pack gives and the exact sequence of exchanges the server saw. The servers'
//! recorded answers are in `tests/interop/server-everything.md` and `python-servers.md`.

use std::time::{Duration, Instant};

use crate::support::Host;
use crate::support::interop::{Exchange, Peer, Proxy, assert_with_time, installed, root};
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

/// Bound on a server becoming `ready` in the listing.
const READY: Duration = Duration::from_secs(30);
/// Bound on one tool call.
const CALL: Duration = Duration::from_secs(30);

async fn call(
    host: &Host,
    namespace: &str,
    tool: &str,
    arguments: Value,
) -> Result<String, ToolError> {
    let args = json!({"namespace": namespace, "toolName": tool, "arguments": arguments});
    tokio::time::timeout(CALL, host.call("call_dynamic_tool", args))
        .await
        .unwrap_or_else(|_| panic!("{namespace}/{tool} did not answer within {CALL:?}"))
}

async fn ok(host: &Host, namespace: &str, tool: &str, arguments: Value) -> String {
    call(host, namespace, tool, arguments)
        .await
        .unwrap_or_else(|e| panic!("{namespace}/{tool}: {e}"))
}

async fn listing_text(host: &Host, args: Value) -> String {
    host.call("get_dynamic_tools", args).await.expect("listing")
}

fn error(kind: ToolErrorKind, message: &str) -> Result<String, ToolError> {
    Err(ToolError::new(kind, message))
}

/// The JSON-RPC messages of a response body: one JSON value, or the `data:` of each SSE event.
fn messages(exchange: &Exchange) -> Vec<Value> {
    let text = exchange.response_text();
    if let Ok(value) = serde_json::from_str::<Value>(&text) {
        return vec![value];
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .filter(|data| !data.is_empty())
        .map(|data| serde_json::from_str(data).expect("an SSE data line is JSON"))
        .collect()
}

fn tools_calls(proxy: &Proxy, tool: &str) -> Vec<Exchange> {
    proxy
        .log()
        .into_iter()
        .filter(|e| e.body["method"] == "tools/call" && e.body["params"]["name"] == tool)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// @modelcontextprotocol/server-everything

const EVERYTHING: &str = "everything";

/// server-everything (`streamableHttp`, bound to 127.0.0.1 by the preload) behind a proxy, and a
/// Host whose `everything` namespace is ready.
async fn everything(test: &str) -> Option<(Peer, Proxy, Host)> {
    let node = installed(test, "node22/bin/node")?;
    let server = installed(
        test,
        "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    )?;
    let preload = root().join("tests/interop/loopback-listen.cjs");
    let peer = Peer::start(
        "server-everything",
        &node,
        &[
            "--require",
            preload.to_str().unwrap(),
            server.to_str().unwrap(),
            "streamableHttp",
        ],
        &[("PORT", "{port}")],
    )
    .await;
    let proxy = Proxy::start(&peer.base()).await;
    let host = Host::new(json!({EVERYTHING: {"url": proxy.url("/mcp")}}));
    host.ready(EVERYTHING, READY).await;
    Some((peer, proxy, host))
}

/// [`everything`] for the test `test`, or a return from that test when server-everything is not
/// installed.
macro_rules! everything_or_return {
    ($test:literal) => {
        match everything($test).await {
            Some(started) => started,
            None => return,
        }
    };
}

/// One summary line per exchange.
fn summaries(log: &[Exchange]) -> Vec<String> {
    log.iter().map(Exchange::summary).collect()
}

/// The exchanges without the standalone `GET` streams, which the Pack opens (and reopens) beside
/// the calls for a server that declared `tools.listChanged`, as server-everything does, and
/// without the re-listing each opened stream asks for: the first `tools/list` after a `GET`
/// answered 200, in its session (its place among the calls depends on timing). A `GET`
/// answered 404 takes the `ping` that asks whether its session is live with it (the stream's
/// loop may meet a restart before a call does).
fn without_streams(log: &[Exchange]) -> Vec<Exchange> {
    let mut skip = vec![false; log.len()];
    for (i, get) in log.iter().enumerate() {
        if get.method != "GET" {
            continue;
        }
        skip[i] = true;
        if get.status == 404 {
            let ping = (i + 1..log.len()).find(|&j| {
                !skip[j] && log[j].body["method"] == "ping" && log[j].session == get.session
            });
            if let Some(j) = ping {
                skip[j] = true;
            }
        }
        if get.status != 200 {
            continue;
        }
        let relisting = (i + 1..log.len()).find(|&j| {
            !skip[j] && log[j].body["method"] == "tools/list" && log[j].session == get.session
        });
        if let Some(j) = relisting {
            skip[j] = true;
        }
    }
    log.iter()
        .zip(skip)
        .filter(|(_, skip)| !skip)
        .map(|(e, _)| e.clone())
        .collect()
}

/// The exchanges without the `subscriptions/listen` streams, which the Pack opens (and reopens)
/// in the 2026-07-28 era beside the calls for a server that declared `tools.listChanged`, and
/// without the re-listing each acknowledged stream asks for: the first `tools/list` after a
/// `subscriptions/listen` answered 200 (its place among the calls depends on timing).
fn without_listens(log: &[Exchange]) -> Vec<Exchange> {
    let mut skip = vec![false; log.len()];
    for (i, listen) in log.iter().enumerate() {
        if listen.body["method"] != "subscriptions/listen" {
            continue;
        }
        skip[i] = true;
        if listen.status != 200 {
            continue;
        }
        let relisting =
            (i + 1..log.len()).find(|&j| !skip[j] && log[j].body["method"] == "tools/list");
        if let Some(j) = relisting {
            skip[j] = true;
        }
    }
    log.iter()
        .zip(skip)
        .filter(|(_, skip)| !skip)
        .map(|(e, _)| e.clone())
        .collect()
}

/// server-everything's answer to a request on a session it does not know.
const NO_SESSION: &str = r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#;

/// Checks the exchanges after server-everything lost session `old` (see [`without_streams`]):
/// requests on `old` answered 400 (the call, or a re-listing when the standalone stream's loop
/// noticed first), exactly one new `initialize`, and on the new session
/// `notifications/initialized`, the call (`params`) answered 200 and at most one re-listing
/// answered 200, the last two in either order (the renewal's re-listing and the one the reopened
/// standalone stream asks for may be one; [`wait_relisted`] saw at least one). Returns the new
/// session id.
/// Waits until the Pack re-listed on a session not in `known` and every `tools/list` there was
/// answered, the log quiet for 300 ms (a second re-listing may follow the first).
async fn wait_relisted(proxy: &Proxy, known: &[String]) {
    let deadline = Instant::now() + READY;
    let lists = || -> Option<usize> {
        let log = proxy.log();
        let on_new: Vec<&Exchange> = log
            .iter()
            .filter(|e| {
                e.body["method"] == "tools/list"
                    && e.session.as_ref().is_some_and(|s| !known.contains(s))
            })
            .collect();
        let done = !on_new.is_empty() && on_new.iter().all(|e| e.status == 200);
        done.then_some(on_new.len())
    };
    loop {
        if let Some(seen) = lists() {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if lists() == Some(seen) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{:?}", proxy.summary());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn assert_renewed(after: &[Exchange], old: &str, params: &Value) -> String {
    let shown = summaries(after);
    let inits: Vec<&Exchange> = after
        .iter()
        .filter(|e| e.body["method"] == "initialize")
        .collect();
    assert_eq!(inits.len(), 1, "{shown:?}");
    assert_eq!(inits[0].session, None);
    let new = inits[0].response_session.clone().expect("a new session id");
    assert_ne!(new, old);
    let lost: Vec<&Exchange> = after
        .iter()
        .filter(|e| e.session.as_deref() == Some(old))
        .collect();
    assert!(!lost.is_empty(), "{shown:?}");
    for exchange in &lost {
        assert_eq!(exchange.status, 400, "{shown:?}");
        let method = exchange.body["method"].as_str().unwrap_or("");
        assert!(
            method == "tools/call" || method == "tools/list",
            "{shown:?}"
        );
        assert_eq!(exchange.response_text(), NO_SESSION);
    }
    let renewed: Vec<&Exchange> = after
        .iter()
        .filter(|e| e.session.as_deref() == Some(new.as_str()))
        .collect();
    let mut got: Vec<String> = renewed.iter().map(|e| e.summary()).collect();
    got.sort();
    got.dedup();
    assert!(
        got == [
            "POST notifications/initialized 202",
            "POST tools/call 200",
            "POST tools/list 200"
        ] || got == ["POST notifications/initialized 202", "POST tools/call 200"],
        "{shown:?}"
    );
    let lists = renewed
        .iter()
        .filter(|e| e.body["method"] == "tools/list")
        .count();
    assert!(lists <= 1, "{shown:?}");
    assert_eq!(lost.len() + 1 + renewed.len(), after.len(), "{shown:?}");
    let call = renewed
        .iter()
        .find(|e| e.body["method"] == "tools/call")
        .unwrap();
    assert_eq!(&call.body["params"], params);
    new
}

#[tokio::test]
#[ignore = "needs server-everything (Node 22) in .interop/; run by .ci/interop.sh"]
async fn everything_lists_its_tools_and_maps_each_kind_of_result() {
    let (_peer, proxy, host) =
        everything_or_return!("everything_lists_its_tools_and_maps_each_kind_of_result");

    // The server's instructions reach the namespace form, whole (they are under 8 KiB).
    let one = host.listing(json!({"namespace": EVERYTHING})).await;
    let instructions = one["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.starts_with("# Everything Server – Server Instructions\n\nAudience: ")
            && instructions.ends_with("MCP's instructions feature in action.\"\n"),
        "{one}"
    );

    // A client with no capabilities gets the 13 tools that need none, sorted by name.
    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [{"namespace": "everything", "status": "ready",
            // The first line of its instructions (it gives no serverInfo.description).
            "description": "Everything Server – Server Instructions", "tools": [
            "echo",
            "get-annotated-message",
            "get-env",
            "get-resource-links",
            "get-resource-reference",
            "get-structured-content",
            "get-sum",
            "get-tiny-image",
            "gzip-file-as-resource",
            "simulate-research-query",
            "toggle-simulated-logging",
            "toggle-subscriber-updates",
            "trigger-long-running-operation",
        ]}]})
    );
    // One tool in full: schemas and annotations verbatim (key order, `$schema`), `title` and
    // `execution` not shown.
    assert_eq!(
        listing_text(
            &host,
            json!({"namespace": EVERYTHING, "toolName": "get-structured-content"})
        )
        .await,
        concat!(
            r#"{"namespace":"everything","name":"get-structured-content","#,
            r#""description":"Returns structured content along with an output schema for client data validation","#,
            r#""inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"location":{"type":"string","enum":["New York","Chicago","Los Angeles"],"description":"Choose city"}},"required":["location"]},"#,
            r#""outputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"temperature":{"type":"number","description":"Temperature in celsius"},"conditions":{"type":"string","description":"Weather conditions description"},"humidity":{"type":"number","description":"Humidity percentage"}},"required":["temperature","conditions","humidity"],"additionalProperties":false},"#,
            r#""annotations":{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}}"#
        )
    );

    assert_eq!(
        ok(&host, EVERYTHING, "echo", json!({"message": "hi"})).await,
        "Echo: hi"
    );
    assert_eq!(
        ok(&host, EVERYTHING, "get-sum", json!({"a": 2, "b": 3})).await,
        "The sum of 2 and 3 is 5."
    );
    assert_eq!(
        ok(&host, EVERYTHING, "get-tiny-image", json!({})).await,
        "Here's the image you requested:\n\n[image omitted: image/png]\n\nThe image above is the MCP logo."
    );
    assert_eq!(
        ok(&host, EVERYTHING, "get-resource-links", json!({})).await,
        "Here are 3 resource links to resources available in this server:\n\n\
         [resource: demo://resource/dynamic/blob/1]\n\n\
         [resource: demo://resource/dynamic/text/2]\n\n\
         [resource: demo://resource/dynamic/blob/3]"
    );
    assert_eq!(
        ok(&host, EVERYTHING, "get-resource-links", json!({"count": 2})).await,
        "Here are 2 resource links to resources available in this server:\n\n\
         [resource: demo://resource/dynamic/blob/1]\n\n\
         [resource: demo://resource/dynamic/text/2]"
    );
    // An embedded text resource is its text, which carries the server's local time.
    assert_with_time(
        &ok(
            &host,
            EVERYTHING,
            "get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 1}),
        )
        .await,
        "Returning resource reference for Resource 1:\n\n\
         Resource 1: This is a plaintext resource created at ",
        "\n\nYou can access this resource using the URI: demo://resource/dynamic/text/1",
    );
    assert_eq!(
        ok(
            &host,
            EVERYTHING,
            "get-resource-reference",
            json!({"resourceType": "Blob", "resourceId": 2})
        )
        .await,
        "Returning resource reference for Resource 2:\n\n\
         [binary resource omitted: text/plain]\n\n\
         You can access this resource using the URI: demo://resource/dynamic/blob/2"
    );
    // Content and structuredContent both present: the text block is what the model reads.
    assert_eq!(
        ok(
            &host,
            EVERYTHING,
            "get-structured-content",
            json!({"location": "Chicago"})
        )
        .await,
        r#"{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}"#
    );
    let structured = &tools_calls(&proxy, "get-structured-content")[0];
    assert_eq!(
        messages(structured).last().unwrap()["result"]["structuredContent"],
        json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82})
    );
    // gzip of "hello", from a data: URI (no network), both output types.
    for (name, output, shown) in [
        (
            "hello.txt.gz",
            "resourceLink",
            "[resource: demo://resource/session/hello.txt.gz]",
        ),
        (
            "hello2.txt.gz",
            "resource",
            "[binary resource omitted: application/gzip]",
        ),
    ] {
        let args =
            json!({"name": name, "data": "data:text/plain;base64,aGVsbG8=", "outputType": output});
        assert_eq!(
            ok(&host, EVERYTHING, "gzip-file-as-resource", args).await,
            shown,
            "{name}"
        );
    }
    let gzip = &tools_calls(&proxy, "gzip-file-as-resource")[1];
    assert_eq!(
        messages(gzip).last().unwrap()["result"]["content"][0]["resource"]["blob"],
        "H4sIAAAAAAAAA8tIzcnJBwCGphA2BQAAAA=="
    );

    // Bad arguments are refused by the Pack against the tool's inputSchema (draft-07 here),
    // never sent; a tool the server refuses: the server's own text, as a backend error.
    assert_eq!(
        call(&host, EVERYTHING, "get-sum", json!({"a": "x"})).await,
        error(
            ToolErrorKind::InvalidArguments,
            "the arguments do not match the inputSchema of tool \"get-sum\" of server \"everything\": \
             arguments: \"b\" is a required property; arguments/a: \"x\" is not of type \"number\"; \
             see the schema with mcp/get_dynamic_tools {\"namespace\":\"everything\",\"toolName\":\"get-sum\"}"
        )
    );
    assert_eq!(
        call(
            &host,
            EVERYTHING,
            "simulate-research-query",
            json!({"topic": "x"})
        )
        .await,
        error(
            ToolErrorKind::Backend,
            "MCP error -32601: Tool simulate-research-query requires task augmentation (taskSupport: 'required')"
        )
    );
    // A tool the server does not list never reaches it: the Pack answers not found.
    assert_eq!(
        call(&host, EVERYTHING, "no-such-tool", json!({})).await,
        error(
            ToolErrorKind::NotFound,
            r#"server "everything" has no tool "no-such-tool"; list its tools with mcp/get_dynamic_tools {"namespace":"everything"}"#
        )
    );
    assert!(tools_calls(&proxy, "no-such-tool").is_empty());

    // What the server saw: one handshake, one listing, and a call per tool call above.
    // The era probe first: server-everything (2025 only) refuses `server/discover` with 400.
    let mut expected = vec![
        "POST server/discover 400".to_string(),
        "POST initialize 200".to_string(),
        "POST notifications/initialized 202".to_string(),
        "POST tools/list 200".to_string(),
    ];
    // (get-sum with bad arguments never went out.)
    expected.extend(std::iter::repeat_n("POST tools/call 200".to_string(), 11));
    // The call naming no-such-tool re-listed the server once before its not_found.
    expected.push("POST tools/list 200".to_string());
    let log = without_streams(&proxy.log());
    assert_eq!(summaries(&log), expected);
    assert_eq!(
        (
            log[0].session.as_deref(),
            log[0].protocol_version.as_deref()
        ),
        (None, Some("2026-07-28"))
    );
    assert_eq!(log[1].body["params"]["capabilities"], json!({}));
    let session = log[1].response_session.clone().expect("a session id");
    for exchange in &log[2..] {
        assert_eq!(exchange.session.as_ref(), Some(&session));
        assert_eq!(exchange.protocol_version.as_deref(), Some("2025-11-25"));
    }
    // server-everything declared tools.listChanged: one standalone stream, held open.
    let stream = proxy.wait_for(READY, |e| e.method == "GET").await;
    assert_eq!(
        (
            stream.status,
            stream.session.as_ref(),
            stream.last_event_id.as_deref()
        ),
        (200, Some(&session), None)
    );
    assert_eq!(proxy.log().iter().filter(|e| e.method == "GET").count(), 1);
}

#[tokio::test]
#[ignore = "needs server-everything (Node 22) in .interop/; run by .ci/interop.sh"]
async fn everything_hears_notifications_cancelled_when_a_call_is_dropped() {
    let (_peer, proxy, host) =
        everything_or_return!("everything_hears_notifications_cancelled_when_a_call_is_dropped");
    let started = Instant::now();
    let dropped = tokio::time::timeout(
        Duration::from_millis(500),
        call(
            &host,
            EVERYTHING,
            "trigger-long-running-operation",
            json!({"duration": 30, "steps": 3}),
        ),
    )
    .await;
    assert!(dropped.is_err(), "a 30 s operation answered: {dropped:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    let long = &tools_calls(&proxy, "trigger-long-running-operation")[0];
    assert_eq!(long.status, 200);
    let cancelled = proxy
        .wait_for(Duration::from_secs(5), |e| {
            e.body["method"] == "notifications/cancelled"
        })
        .await;
    assert_eq!(
        cancelled.body,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": long.body["id"], "reason": "the client dropped the call"}})
    );
    assert_eq!(cancelled.method, "POST");
    assert_eq!(
        cancelled.status, 202,
        "the server accepted the notification"
    );
    assert_eq!(cancelled.session, long.session);

    // The connection is free for the next call at once, while the server's operation runs on.
    let started = Instant::now();
    assert_eq!(
        ok(&host, EVERYTHING, "echo", json!({"message": "next"})).await,
        "Echo: next"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        summaries(&without_streams(&proxy.log())),
        [
            "POST server/discover 400",
            "POST initialize 200",
            "POST notifications/initialized 202",
            "POST tools/list 200",
            "POST tools/call 200",
            "POST notifications/cancelled 202",
            "POST tools/call 200",
        ]
    );
}

#[tokio::test]
#[ignore = "needs server-everything (Node 22) in .interop/; run by .ci/interop.sh"]
async fn everything_session_deleted_or_lost_in_a_restart_is_renewed() {
    let (mut peer, proxy, host) =
        everything_or_return!("everything_session_deleted_or_lost_in_a_restart_is_renewed");
    assert_eq!(
        ok(&host, EVERYTHING, "echo", json!({"message": "one"})).await,
        "Echo: one"
    );
    // log[0] is the era probe (`server/discover`, refused 400), log[1] the initialize.
    let first = proxy.log()[1]
        .response_session
        .clone()
        .expect("a session id");

    // End the session behind the client's back, straight at the server.
    let deleted = reqwest::Client::new()
        .delete(format!("{}/mcp", peer.base()))
        .header("mcp-session-id", &first)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);

    // server-everything answers an unknown session with 400 "No valid session ID provided";
    // the Pack initializes again, sends the call once more, and lists the new session's tools.
    assert_eq!(
        ok(&host, EVERYTHING, "echo", json!({"message": "two"})).await,
        "Echo: two"
    );
    wait_relisted(&proxy, std::slice::from_ref(&first)).await;
    let log = without_streams(&proxy.log());
    assert_eq!(
        log[5].summary(),
        "POST tools/call 400",
        "the call noticed first"
    );
    let second = assert_renewed(
        &log[5..],
        &first,
        &json!({"name": "echo", "arguments": {"message": "two"}}),
    );
    let renewed = log.len();

    // A restart loses every session: the same renewal (the standalone stream's loop may notice
    // the loss first and renew before the call).
    proxy.restart_upstream(&mut peer).await;
    assert_eq!(
        ok(&host, EVERYTHING, "get-sum", json!({"a": 1, "b": 2})).await,
        "The sum of 1 and 2 is 3."
    );
    wait_relisted(&proxy, &[first.clone(), second.clone()]).await;
    let log = without_streams(&proxy.log());
    let third = assert_renewed(
        &log[renewed..],
        &second,
        &json!({"name": "get-sum", "arguments": {"a": 1, "b": 2}}),
    );

    // Dropping the Pack ends the live session (and sends a DELETE to the two the server's 400
    // set aside, which it answers as it likes).
    drop(host);
    let goodbye = proxy
        .wait_for(Duration::from_secs(10), |e| {
            e.method == "DELETE" && e.session.as_ref() == Some(&third)
        })
        .await;
    assert_eq!(goodbye.status, 200);
}

// ---------------------------------------------------------------------------------------------
// Python `mcp` SDK: 1.x FastMCP (tests/interop/py1_server.py), 2.x MCPServer (py2_server.py)

#[derive(Clone, Copy, PartialEq)]
enum Sdk {
    V1,
    V2,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Sse,
    Json,
}

/// A Python SDK server behind a proxy, and a Host whose namespace `ns` is ready.
async fn python(test: &str, sdk: Sdk, mode: Mode, ns: &str) -> Option<(Peer, Proxy, Host)> {
    python_with(test, sdk, mode, ns, &[]).await
}

/// Like [`python`], with more arguments for the server script.
async fn python_with(
    test: &str,
    sdk: Sdk,
    mode: Mode,
    ns: &str,
    more: &[&str],
) -> Option<(Peer, Proxy, Host)> {
    let (venv, script) = match sdk {
        Sdk::V1 => ("py1/bin/python", "tests/interop/py1_server.py"),
        Sdk::V2 => ("py2/bin/python", "tests/interop/py2_server.py"),
    };
    let python = installed(test, venv)?;
    let script = root().join(script);
    let mut args = vec![script.to_str().unwrap(), "--port", "{port}"];
    if mode == Mode::Json {
        args.push("--json-response");
    }
    args.extend(more);
    let peer = Peer::start(ns, &python, &args, &[]).await;
    let proxy = Proxy::start(&peer.base()).await;
    let host = Host::new(json!({ns: {"url": proxy.url("/mcp")}}));
    host.ready(ns, READY).await;
    Some((peer, proxy, host))
}

/// A schema as the SDK writes it: 1.x puts `title` before `type`; 2.x, serving us in the
/// 2026-07-28 era, puts `type` first and `title` last.
fn py_schema(sdk: Sdk, properties: &str, required: &str, title: &str) -> String {
    let required = if required.is_empty() {
        String::new()
    } else {
        format!(r#""required":[{required}],"#)
    };
    match sdk {
        Sdk::V1 => format!(
            r#"{{"properties":{{{properties}}},{required}"title":"{title}","type":"object"}}"#
        ),
        Sdk::V2 => format!(
            r#"{{"type":"object","properties":{{{properties}}},{required}"title":"{title}"}}"#
        ),
    }
}

fn py_namespace_listing(sdk: Sdk, ns: &str) -> String {
    let tools = [
        (
            "add",
            "Add two integers.",
            r#""a":{"title":"A","type":"integer"},"b":{"title":"B","type":"integer"}"#,
            r#""a","b""#,
        ),
        (
            "ask_sampling",
            "Send sampling/createMessage to the client and describe the error it answers.",
            "",
            "",
        ),
        (
            "echo",
            "Echo the text back.",
            r#""text":{"title":"Text","type":"string"}"#,
            r#""text""#,
        ),
        (
            "ping_then_answer",
            "Ping the client (a server->client request on this call's stream), then answer.",
            "",
            "",
        ),
        (
            "slow",
            "Sleep, then answer.",
            r#""seconds":{"title":"Seconds","type":"number"}"#,
            r#""seconds""#,
        ),
    ];
    let tools: Vec<String> = tools
        .iter()
        .map(|(name, description, properties, required)| {
            format!(
                r#"{{"name":"{name}","description":"{description}","inputSchema":{}}}"#,
                py_schema(sdk, properties, required, &format!("{name}Arguments"))
            )
        })
        .collect();
    // 1.x refuses the era probe and is spoken to in 2025-11-25; 2.x picks the era from
    // `MCP-Protocol-Version` and answers the probe, so it is spoken to in 2026-07-28.
    let version = match sdk {
        Sdk::V1 => "2025-11-25",
        Sdk::V2 => REVISION,
    };
    format!(
        r#"{{"namespace":"{ns}","status":"ready","protocolVersion":"{version}","tools":[{}]}}"#,
        tools.join(",")
    )
}

/// The whole Python scenario for one SDK and mode: listing (namespace and one tool, verbatim),
/// calls, `structuredContent` next to text, a bad argument, a server ping and a sampling request
/// inside the call, and a restart between two calls (404 → initialize → the call again).
async fn python_scenario(test: &str, sdk: Sdk, mode: Mode) {
    let ns = match (sdk, mode) {
        (Sdk::V1, Mode::Sse) => "py1",
        (Sdk::V1, Mode::Json) => "py1json",
        (Sdk::V2, Mode::Sse) => "py2",
        (Sdk::V2, Mode::Json) => "py2json",
    };
    let Some((mut peer, proxy, host)) = python(test, sdk, mode, ns).await else {
        return;
    };

    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [{"namespace": ns, "status": "ready",
                            "tools": ["add", "ask_sampling", "echo", "ping_then_answer", "slow"]}]})
    );
    assert_eq!(
        listing_text(&host, json!({"namespace": ns})).await,
        py_namespace_listing(sdk, ns)
    );
    assert_eq!(
        listing_text(&host, json!({"namespace": ns, "toolName": "add"})).await,
        format!(
            r#"{{"namespace":"{ns}","name":"add","description":"Add two integers.","inputSchema":{},"outputSchema":{}}}"#,
            py_schema(
                sdk,
                r#""a":{"title":"A","type":"integer"},"b":{"title":"B","type":"integer"}"#,
                r#""a","b""#,
                "addArguments"
            ),
            // 2.x writes an outputSchema as 1.x does, `title` before `type`.
            py_schema(
                Sdk::V1,
                r#""result":{"title":"Result","type":"integer"}"#,
                r#""result""#,
                "addOutput"
            ),
        )
    );

    // The result carries both a text block and structuredContent; the text is what maps.
    assert_eq!(ok(&host, ns, "add", json!({"a": 2, "b": 3})).await, "5");
    let add = &tools_calls(&proxy, "add")[0];
    let mut result = json!({
        "content": [{"type": "text", "text": "5"}],
        "structuredContent": {"result": 5},
        "isError": false
    });
    if sdk == Sdk::V2 {
        // In 2026-07-28 every result says it is complete and names the server in `_meta`.
        result["resultType"] = json!("complete");
        result["_meta"] =
            json!({"io.modelcontextprotocol/serverInfo": {"name": "py2-interop", "version": ""}});
    }
    assert_eq!(
        messages(add),
        [json!({"jsonrpc": "2.0", "id": add.body["id"], "result": result})]
    );
    assert_eq!(
        ok(&host, ns, "echo", json!({"text": "grüße\n\"quoted\""})).await,
        "grüße\n\"quoted\""
    );
    assert_eq!(
        ok(&host, ns, "slow", json!({"seconds": 0.1})).await,
        "slept 0.1"
    );
    // A bad argument is refused against the inputSchema before anything is sent.
    assert_eq!(
        call(&host, ns, "add", json!({"a": "x", "b": 3})).await,
        error(
            ToolErrorKind::InvalidArguments,
            &format!(
                "the arguments do not match the inputSchema of tool \"add\" of server \"{ns}\": \
                 arguments/a: \"x\" is not of type \"integer\"; see the schema with \
                 mcp/get_dynamic_tools {{\"namespace\":\"{ns}\",\"toolName\":\"add\"}}"
            )
        )
    );

    // Server requests inside the call: the Pack answers ping with {} and sampling with -32601.
    // In JSON-response mode there is no stream to carry them, and the servers say so.
    let (ping, sampling) = match mode {
        // Sequential, so the client's answers arrive in a fixed order.
        Mode::Sse => (
            call(&host, ns, "ping_then_answer", json!({})).await,
            call(&host, ns, "ask_sampling", json!({})).await,
        ),
        // 1.x waits out its 10 s timeouts here: run both at once.
        Mode::Json => tokio::join!(
            call(&host, ns, "ping_then_answer", json!({})),
            call(&host, ns, "ask_sampling", json!({}))
        ),
    };
    let (expect_ping, expect_sampling) = match (sdk, mode) {
        (Sdk::V1, Mode::Sse) => (
            "pong received".to_string(),
            "sampling failed: -32601 Method not found".to_string(),
        ),
        (Sdk::V1, Mode::Json) => (
            "ping failed: 408 Timed out while waiting for response to ServerRequest. Waited 10.0 seconds.".to_string(),
            "sampling failed: no answer within 10 s".to_string(),
        ),
        // Spoken to in 2026-07-28, 2.x has no back-channel for a request of its own inside a
        // call in either mode, and says so at once.
        (Sdk::V2, _) => (
            "ping failed: -32600 Cannot send 'ping': this transport context has no back-channel for server-initiated requests.".to_string(),
            "sampling failed: -32600 Cannot send 'sampling/createMessage': this transport context has no back-channel for server-initiated requests.".to_string(),
        ),
    };
    assert_eq!(ping, Ok(expect_ping));
    assert_eq!(sampling, Ok(expect_sampling));
    let answers: Vec<Value> = proxy
        .log()
        .into_iter()
        .filter(|e| e.summary().starts_with("POST response"))
        .map(|e| e.body)
        .collect();
    // Server request ids count per session from 0 in 1.x.
    let expected_answers = if (sdk, mode) == (Sdk::V1, Mode::Sse) {
        vec![
            json!({"jsonrpc": "2.0", "id": 0, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}),
        ]
    } else {
        vec![]
    };
    assert_eq!(answers, expected_answers);

    proxy.restart_upstream(&mut peer).await;
    assert_eq!(ok(&host, ns, "add", json!({"a": 20, "b": 22})).await, "42");
    match sdk {
        Sdk::V1 => assert_legacy_restart_trail(&proxy, mode).await,
        Sdk::V2 => assert_modern_restart_trail(&host, &proxy, ns).await,
    }
}

/// The trail of [`python_scenario`] for 1.x, spoken to in 2025-11-25: the era probe refused,
/// the handshake, the calls, and the restart, which forgot the session: 404, a new
/// initialize, and the same call again.
async fn assert_legacy_restart_trail(proxy: &Proxy, mode: Mode) {
    let mut expected: Vec<&str> = vec![
        "POST server/discover 400",
        "POST initialize 200",
        "POST notifications/initialized 202",
        "POST tools/list 200",
        "POST tools/call 200", // add
        "POST tools/call 200", // echo
        "POST tools/call 200", // slow
    ];
    match mode {
        Mode::Sse => expected.extend([
            "POST tools/call 200", // ping_then_answer
            "POST response 202",   // {} to the ping
            "POST tools/call 200", // ask_sampling
            "POST response 202",   // -32601 to sampling/createMessage
        ]),
        Mode::Json => expected.extend(["POST tools/call 200", "POST tools/call 200"]),
    }
    expected.extend([
        "POST tools/call 404",
        "POST initialize 200",
        "POST notifications/initialized 202",
        "POST tools/call 200",
    ]);
    // The new session is listed again, beside the resent call (in either order).
    // log[0] is the era probe (`server/discover`, refused 400), log[1] the initialize.
    let first_session = proxy.log()[1].response_session.clone();
    let relisting = proxy
        .wait_for(READY, |e| {
            e.body["method"] == "tools/list" && e.session.is_some() && e.session != first_session
        })
        .await;
    assert_eq!(relisting.status, 200);
    // The standalone stream is opened on each session (these servers serve it): wait for the
    // new session's, then leave the streams out of the exact trail.
    let stream = proxy
        .wait_for(READY, |e| {
            e.method == "GET" && e.last_event_id.is_none() && e.session == relisting.session
        })
        .await;
    assert_eq!(stream.status, 200);
    let log: Vec<Exchange> = without_streams(&proxy.log())
        .into_iter()
        .filter(|e| !(e.body["method"] == "tools/list" && e.session != first_session))
        .collect();
    assert_eq!(summaries(&log), expected);
    let n = log.len();
    let (lost, init, again) = (&log[n - 4], &log[n - 3], &log[n - 1]);
    let old = log[1].response_session.clone().expect("a session id");
    let new = init.response_session.clone().expect("a new session id");
    assert_ne!(old, new);
    assert_eq!(lost.session.as_ref(), Some(&old));
    assert_eq!(init.session, None);
    assert_eq!(again.session.as_ref(), Some(&new));
    assert_eq!(again.body, lost.body, "the same request, resent");
    assert_eq!(
        serde_json::from_str::<Value>(&lost.response_text()).unwrap()["error"],
        json!({"code": -32600, "message": "Session not found"})
    );
}

/// The trail of [`python_scenario`] for 2.x, spoken to in 2026-07-28: the era probe answered,
/// the listing, the calls, and the restart, which lost nothing but the `subscriptions/listen`
/// stream: the same call went through at once, and the stream was opened again (the proxy
/// answers 502 while the server is down) and acknowledged, and the Pack listed again.
async fn assert_modern_restart_trail(host: &Host, proxy: &Proxy, ns: &str) {
    let listens = || -> Vec<Exchange> {
        proxy
            .log()
            .into_iter()
            .filter(|e| e.body["method"] == "subscriptions/listen")
            .collect()
    };
    let first = listens()[0].body["id"].clone();
    let reopened = proxy
        .wait_for(READY, |e| {
            e.body["method"] == "subscriptions/listen" && e.status == 200 && e.body["id"] != first
        })
        .await;
    let after = reopened.body["id"].as_u64().expect("a numeric id");
    let relisting = proxy
        .wait_for(READY, |e| {
            e.body["method"] == "tools/list" && e.body["id"].as_u64().is_some_and(|id| id > after)
        })
        .await;
    assert_eq!(relisting.status, 200);
    let listens: Vec<String> = listens().iter().map(Exchange::summary).collect();
    let n = listens.len();
    assert!(n >= 2, "{listens:?}");
    assert_eq!(listens[0], "POST subscriptions/listen 200");
    assert_eq!(listens[n - 1], "POST subscriptions/listen 200");
    assert!(
        listens[1..n - 1]
            .iter()
            .all(|s| s == "POST subscriptions/listen 502"),
        "{listens:?}"
    );
    let log = without_listens(&proxy.log());
    assert_eq!(
        summaries(&log),
        [
            "POST server/discover 200",
            "POST tools/list 200",
            "POST tools/call 200", // add
            "POST tools/call 200", // echo
            "POST tools/call 200", // slow
            "POST tools/call 200", // ping_then_answer
            "POST tools/call 200", // ask_sampling
            "POST tools/call 200", // add, after the restart
        ]
    );
    assert_eq!(
        log[7].body["params"],
        json!({"name": "add", "arguments": {"a": 20, "b": 22},
               "_meta": {"io.modelcontextprotocol/protocolVersion": REVISION,
                         "io.modelcontextprotocol/clientCapabilities": {},
                         "io.modelcontextprotocol/clientInfo":
                             {"name": "plugin-mcp", "version": env!("CARGO_PKG_VERSION")}}})
    );
    assert_spoke_2026(host, proxy, ns).await;
}

/// FastMCP (declaring `tools.listChanged`) registers a tool at run time. With SSE responses it
/// says so on the call's own stream and the Pack lists again at once; with JSON responses the
/// notification has no stream to ride on, and the first call naming the new tool re-lists (a
/// miss) and finds it. With SSE responses a second tool is announced on the standalone stream.
async fn python_tool_added_at_run_time(test: &str, sdk: Sdk, mode: Mode) {
    let ns = if mode == Mode::Sse {
        "grow"
    } else {
        "growjson"
    };
    let Some((_peer, proxy, host)) = python_with(test, sdk, mode, ns, &["--growing"]).await else {
        return;
    };
    let tools = |listing: &Value| listing["servers"][0]["tools"].clone();
    let base = [
        "add",
        "ask_sampling",
        "echo",
        "grow",
        "grow_more",
        "ping_then_answer",
        "slow",
    ];
    let with = |added: &[&str]| {
        let mut names: Vec<&str> = base.iter().chain(added).copied().collect();
        names.sort_unstable();
        json!(names)
    };
    assert_eq!(tools(&host.listing(json!({})).await), with(&[]));
    // The re-listing the opened standalone stream asks for goes first, so the change below is
    // news to the Pack (a re-listing that ran after it would already see the new tool, and
    // neither the notification nor the miss would have anything left to do).
    let deadline = tokio::time::Instant::now() + READY;
    while proxy
        .log()
        .iter()
        .filter(|e| e.status != 0 && e.body["method"] == "tools/list")
        .count()
        < 2
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            proxy.summary()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(ok(&host, ns, "grow", json!({})).await, "grown");
    if mode == Mode::Sse {
        let call = &tools_calls(&proxy, "grow")[0];
        assert_eq!(
            messages(call)[0],
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        );
        host.wait_for(READY, |listing| tools(listing) == with(&["extra"]))
            .await;
    }
    assert_eq!(ok(&host, ns, "extra", json!({})).await, "extra works");
    assert_eq!(tools(&host.listing(json!({})).await), with(&["extra"]));
    // 1.x is spoken to in 2025-11-25 (a standalone GET stream), 2.x in 2026-07-28 (a
    // subscriptions/listen stream).
    let trail = || match sdk {
        Sdk::V1 => without_streams(&proxy.log()),
        Sdk::V2 => without_listens(&proxy.log()),
    };
    let lists = || -> Vec<String> {
        trail()
            .iter()
            .filter(|e| e.body["method"] == "tools/list")
            .map(Exchange::summary)
            .collect()
    };
    assert_eq!(lists(), ["POST tools/list 200", "POST tools/list 200"]);
    if mode == Mode::Json {
        return;
    }

    if sdk == Sdk::V2 {
        // grow_more announces the change with the session's send_tool_list_changed, which 2.x
        // does not carry to a subscriptions/listen stream in 2026-07-28 (only its
        // notify_tools_changed does): the stream, acknowledged since the server became ready,
        // stays silent, and the first call naming the new tool re-lists (a miss) and finds it.
        assert_eq!(ok(&host, ns, "grow_more", json!({})).await, "grown more");
        assert_eq!(ok(&host, ns, "more", json!({})).await, "more works");
        assert_eq!(
            tools(&host.listing(json!({})).await),
            with(&["extra", "more"])
        );
        assert_eq!(lists().len(), 3);
        let listens: Vec<Exchange> = proxy
            .log()
            .into_iter()
            .filter(|e| e.body["method"] == "subscriptions/listen")
            .collect();
        assert_eq!(summaries(&listens), ["POST subscriptions/listen 200"]);
        assert_eq!(
            messages(&listens[0]),
            [
                json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                    "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": listens[0].body["id"]},
                               "notifications": {"toolsListChanged": true}}})
            ]
        );
        assert_eq!(proxy.log().iter().filter(|e| e.method == "GET").count(), 0);
        return;
    }

    // The standalone stream, open since the server became ready, carries the next change.
    let stream = proxy.wait_for(READY, |e| e.method == "GET").await;
    assert_eq!((stream.status, stream.last_event_id.clone()), (200, None));
    assert_eq!(ok(&host, ns, "grow_more", json!({})).await, "grown more");
    host.wait_for(READY, |listing| tools(listing) == with(&["extra", "more"]))
        .await;
    assert!(
        stream
            .response_text()
            .contains(r#""method":"notifications/tools/list_changed""#),
        "{}",
        stream.response_text()
    );
    assert_eq!(ok(&host, ns, "more", json!({})).await, "more works");
    assert_eq!(lists().len(), 3);
    assert_eq!(proxy.log().iter().filter(|e| e.method == "GET").count(), 1);
}

/// One ignored test per Python peer and scenario: `name => scenario(sdk, mode)` runs
/// `scenario("name", Sdk::sdk, Mode::mode)`, under the `#[ignore]` reason before its group.
macro_rules! python_tests {
    ($($needs:literal: $($name:ident => $scenario:ident($sdk:ident, $mode:ident);)*)*) => {$($(
        #[tokio::test]
        #[ignore = $needs]
        async fn $name() {
            $scenario(stringify!($name), Sdk::$sdk, Mode::$mode).await;
        }
    )*)*};
}

python_tests! {
    "needs the Python mcp SDK 1.x in .interop/; run by .ci/interop.sh":
        python_sdk1_fastmcp_sse => python_scenario(V1, Sse);
        python_sdk1_fastmcp_json_response => python_scenario(V1, Json);
        python_sdk1_tool_added_at_run_time_sse => python_tool_added_at_run_time(V1, Sse);
        python_sdk1_tool_added_at_run_time_json_response => python_tool_added_at_run_time(V1, Json);
    "needs the Python mcp SDK 2.x in .interop/; run by .ci/interop.sh":
        python_sdk2_mcpserver_sse => python_scenario(V2, Sse);
        python_sdk2_mcpserver_json_response => python_scenario(V2, Json);
        python_sdk2_tool_added_at_run_time_sse => python_tool_added_at_run_time(V2, Sse);
        python_sdk2_tool_added_at_run_time_json_response => python_tool_added_at_run_time(V2, Json);
}

// ---------------------------------------------------------------------------------------------
// MCP 2026-07-28 servers: the TypeScript SDK v2 (`createMcpHandler`, tests/interop/ts2_server.mjs)
// modern-only (`legacy: "reject"`) and dual-era (its default), Mastra (`mastra_server.mjs`,
// modern-only), and the Python SDK 2.x's modern path (`py2_modern_server.py`, dual-era). Their
// recorded answers are in tests/interop/modern-servers.md.
//
// These tests need a client that speaks 2026-07-28 (no `initialize`; `server/discover`, the
// per-request `_meta` and the `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` /
// `Mcp-Param-*` headers; `subscriptions/listen`). `.ci/interop.sh` leaves them out
// (`--skip interop::modern_`) unless PLUGIN_MCP_INTEROP_MODERN=1.

const REVISION: &str = "2026-07-28";

#[derive(Clone, Copy)]
enum Modern {
    /// `ts2_server.mjs --legacy reject`: answers 2025-era requests with -32022.
    TsStrict,
    /// `ts2_server.mjs --legacy stateless`: serves 2025-era requests too, statelessly.
    TsDual,
    /// `mastra_server.mjs`: 2026-07-28 only.
    Mastra,
    /// `py2_modern_server.py`: picks the era by the `MCP-Protocol-Version` header alone.
    Python,
}

/// A 2026-07-28 peer behind a proxy, and a Host whose namespace `ns` is ready.
async fn modern(test: &str, peer: Modern, ns: &str) -> Option<(Peer, Proxy, Host)> {
    let script = |name: &str| root().join("tests/interop").join(name);
    let (program, script, more): (_, _, &[&str]) = match peer {
        Modern::TsStrict | Modern::TsDual => {
            installed(
                test,
                "npm/node_modules/@modelcontextprotocol/server/package.json",
            )?;
            installed(
                test,
                "npm/node_modules/@modelcontextprotocol/node/package.json",
            )?;
            let legacy: &[&str] = match peer {
                Modern::TsStrict => &["--legacy", "reject"],
                _ => &["--legacy", "stateless"],
            };
            (
                installed(test, "node22/bin/node")?,
                script("ts2_server.mjs"),
                legacy,
            )
        }
        Modern::Mastra => {
            installed(test, "npm/node_modules/@mastra/mcp/package.json")?;
            (
                installed(test, "node22/bin/node")?,
                script("mastra_server.mjs"),
                &[],
            )
        }
        Modern::Python => (
            installed(test, "py2/bin/python")?,
            script("py2_modern_server.py"),
            &[],
        ),
    };
    let mut args = vec![script.to_str().unwrap(), "--port", "{port}"];
    args.extend(more);
    let peer = Peer::start(ns, &program, &args, &[]).await;
    let proxy = Proxy::start(&peer.base()).await;
    let host = Host::new(json!({ns: {"url": proxy.url("/mcp")}}));
    host.ready(ns, READY).await;
    Some((peer, proxy, host))
}

/// [`modern`] for the test `test`, or a return from that test when its peer is not installed.
macro_rules! modern_or_return {
    ($test:literal, $peer:expr, $ns:literal) => {
        match modern($test, $peer, $ns).await {
            Some(started) => started,
            None => return,
        }
    };
}

/// The namespace form names the revision spoken; what crossed the wire is 2026-07-28 only: the
/// first request is `server/discover`, no `initialize`, no session, and every POST carries the
/// revision in its `MCP-Protocol-Version` header, every request also in `_meta`.
async fn assert_spoke_2026(host: &Host, proxy: &Proxy, ns: &str) {
    let namespace = host.listing(json!({"namespace": ns})).await;
    assert_eq!(namespace["protocolVersion"], REVISION, "{namespace}");
    let log = proxy.log();
    assert_eq!(
        log[0].body["method"],
        "server/discover",
        "{:#?}",
        summaries(&log)
    );
    for exchange in log.iter().filter(|e| e.method == "POST") {
        assert_ne!(
            exchange.body["method"],
            "initialize",
            "{}",
            exchange.summary()
        );
        assert_eq!(
            exchange.protocol_version.as_deref(),
            Some(REVISION),
            "{}",
            exchange.summary()
        );
        if exchange.body.get("id").is_some() {
            assert_eq!(
                exchange.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
                REVISION,
                "{}",
                exchange.summary()
            );
        }
        assert_eq!(exchange.session, None, "{}", exchange.summary());
    }
}

/// The tools of ts2_server.mjs and py2_modern_server.py before `grow`, by name.
const GROWING_TOOLS: [&str; 4] = ["add", "echo", "grow", "region_echo"];

/// The namespace form's `tools` of ts2_server.mjs, schemas exactly as the server wrote them.
fn ts2_tools() -> Value {
    json!([
        {"name": "add", "description": "Add two integers.",
         "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                         "required": ["a", "b"]}},
        {"name": "echo", "description": "Echo the text back.",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "grow", "description": "Add the tool extra and announce the change to subscriptions/listen streams.",
         "inputSchema": {"type": "object", "properties": {}}},
        {"name": "region_echo",
         "description": "Echo the region and the text; region is mirrored into the Mcp-Param-Region header.",
         "inputSchema": {"type": "object",
                         "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "text": {"type": "string"}},
                         "required": ["region", "text"]}}
    ])
}

/// The calls both TS servers answer, with `region` mirrored into `Mcp-Param-Region` (plain for
/// ASCII, `=?base64?…?=` otherwise: the server checks the header against the body).
async fn ts2_calls(host: &Host, proxy: &Proxy, ns: &str) {
    assert_eq!(ok(host, ns, "add", json!({"a": 2, "b": 3})).await, "5");
    assert_eq!(
        ok(host, ns, "echo", json!({"text": "grüße"})).await,
        "grüße"
    );
    assert_eq!(
        ok(
            host,
            ns,
            "region_echo",
            json!({"region": "us-west1", "text": "hi"})
        )
        .await,
        "us-west1: hi"
    );
    assert_eq!(
        ok(
            host,
            ns,
            "region_echo",
            json!({"region": "Hello, 世界", "text": "hi"})
        )
        .await,
        "Hello, 世界: hi"
    );
    let calls = tools_calls(proxy, "region_echo");
    assert_eq!(calls.len(), 2, "{:#?}", summaries(&proxy.log()));
    assert!(
        calls.iter().all(|e| e.status == 200),
        "{:#?}",
        summaries(&calls)
    );
}

#[tokio::test]
#[ignore = "needs a 2026-07-28 peer; .ci/interop.sh runs it"]
async fn modern_ts_sdk_strict_server_lists_calls_and_names_the_revision() {
    let (_peer, proxy, host) = modern_or_return!(
        "modern_ts_sdk_strict_server_lists_calls_and_names_the_revision",
        Modern::TsStrict,
        "ts2"
    );
    assert_spoke_2026(&host, &proxy, "ts2").await;
    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [{"namespace": "ts2", "status": "ready", "tools": GROWING_TOOLS}]})
    );
    assert_eq!(
        host.listing(json!({"namespace": "ts2"})).await["tools"],
        ts2_tools()
    );
    ts2_calls(&host, &proxy, "ts2").await;
    assert_spoke_2026(&host, &proxy, "ts2").await;
}

#[tokio::test]
#[ignore = "needs a 2026-07-28 peer; .ci/interop.sh runs it"]
async fn modern_ts_sdk_dual_era_server_is_spoken_to_in_2026() {
    let (_peer, proxy, host) = modern_or_return!(
        "modern_ts_sdk_dual_era_server_is_spoken_to_in_2026",
        Modern::TsDual,
        "ts2dual"
    );
    assert_spoke_2026(&host, &proxy, "ts2dual").await;
    assert_eq!(
        host.listing(json!({"namespace": "ts2dual"})).await["tools"],
        ts2_tools()
    );
    ts2_calls(&host, &proxy, "ts2dual").await;
    assert_spoke_2026(&host, &proxy, "ts2dual").await;
}

/// `grow` adds the tool `extra` and publishes notifications/tools/list_changed; the Pack hears it
/// on its `subscriptions/listen` stream and re-lists, so `extra` shows and can be called.
async fn modern_tool_added_at_run_time(host: &Host, proxy: &Proxy, ns: &str) {
    assert_spoke_2026(host, proxy, ns).await;
    let listen = proxy
        .wait_for(Duration::from_secs(10), |e| {
            e.body["method"] == "subscriptions/listen"
        })
        .await;
    assert_eq!(
        listen.body["params"]["notifications"]["toolsListChanged"],
        true,
        "{}",
        listen.summary()
    );
    assert_eq!(ok(host, ns, "grow", json!({})).await, "grown");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listing = host.listing(json!({})).await;
        let tools = &listing["servers"][0]["tools"];
        if *tools == json!(["add", "echo", "extra", "grow", "region_echo"]) {
            break;
        }
        assert!(Instant::now() < deadline, "extra never listed: {listing}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ok(host, ns, "extra", json!({"text": "more"})).await, "more");
}

#[tokio::test]
#[ignore = "needs a 2026-07-28 peer; .ci/interop.sh runs it"]
async fn modern_ts_sdk_tool_added_at_run_time_reaches_the_listing() {
    let (_peer, proxy, host) = modern_or_return!(
        "modern_ts_sdk_tool_added_at_run_time_reaches_the_listing",
        Modern::TsStrict,
        "ts2grow"
    );
    modern_tool_added_at_run_time(&host, &proxy, "ts2grow").await;
}

#[tokio::test]
#[ignore = "needs a 2026-07-28 peer; .ci/interop.sh runs it"]
async fn modern_mastra_server_lists_calls_and_names_the_revision() {
    let (_peer, proxy, host) = modern_or_return!(
        "modern_mastra_server_lists_calls_and_names_the_revision",
        Modern::Mastra,
        "mastra"
    );
    assert_spoke_2026(&host, &proxy, "mastra").await;
    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [{"namespace": "mastra", "status": "ready", "tools": ["add", "echo"]}]})
    );
    // Mastra converts the zod schemas to JSON Schema 2020-12 and says so.
    let int = json!({"type": "integer", "minimum": -9007199254740991_i64, "maximum": 9007199254740991_i64});
    assert_eq!(
        host.listing(json!({"namespace": "mastra"})).await["tools"],
        json!([
            {"name": "add", "description": "Add two integers.",
             "inputSchema": {"type": "object", "properties": {"a": int, "b": int}, "required": ["a", "b"],
                             "$schema": "https://json-schema.org/draft/2020-12/schema",
                             "additionalProperties": false}},
            {"name": "echo", "description": "Echo the text back.",
             "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
                             "$schema": "https://json-schema.org/draft/2020-12/schema",
                             "additionalProperties": false}}
        ])
    );
    // A tool's object result is sent as its JSON text.
    assert_eq!(
        ok(&host, "mastra", "add", json!({"a": 2, "b": 3})).await,
        r#"{"sum":5}"#
    );
    assert_eq!(
        ok(&host, "mastra", "echo", json!({"text": "hi"})).await,
        "hi"
    );
    assert_spoke_2026(&host, &proxy, "mastra").await;
}

#[tokio::test]
#[ignore = "needs a 2026-07-28 peer; .ci/interop.sh runs it"]
async fn modern_python_sdk2_server_lists_calls_and_names_the_revision() {
    let (_peer, proxy, host) = modern_or_return!(
        "modern_python_sdk2_server_lists_calls_and_names_the_revision",
        Modern::Python,
        "py2modern"
    );
    assert_spoke_2026(&host, &proxy, "py2modern").await;
    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [{"namespace": "py2modern", "status": "ready", "tools": GROWING_TOOLS}]})
    );
    assert_eq!(
        host.listing(json!({"namespace": "py2modern", "toolName": "region_echo"}))
            .await["inputSchema"],
        json!({"type": "object",
               "properties": {"region": {"title": "Region", "type": "string", "x-mcp-header": "Region"},
                              "text": {"title": "Text", "type": "string"}},
               "required": ["region", "text"], "title": "region_echoArguments"})
    );
    assert_eq!(
        ok(&host, "py2modern", "add", json!({"a": 2, "b": 3})).await,
        "5"
    );
    assert_eq!(
        ok(
            &host,
            "py2modern",
            "region_echo",
            json!({"region": "Hello, 世界", "text": "hi"})
        )
        .await,
        "Hello, 世界: hi"
    );
    assert_spoke_2026(&host, &proxy, "py2modern").await;
}

#[tokio::test]
#[ignore = "needs a 2026-07-28 peer; .ci/interop.sh runs it"]
async fn modern_python_sdk2_tool_added_at_run_time_reaches_the_listing() {
    let (_peer, proxy, host) = modern_or_return!(
        "modern_python_sdk2_tool_added_at_run_time_reaches_the_listing",
        Modern::Python,
        "py2grow"
    );
    modern_tool_added_at_run_time(&host, &proxy, "py2grow").await;
}
