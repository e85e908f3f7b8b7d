//! Findings of an attack on what the open issues claim: each test fails on the code it was
//! written against, for a defect it names (what should happen, what happens).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::Host;
use crate::support::hostile::{self, Reply, server_entry};

const WAIT: Duration = Duration::from_secs(10);

/// A server listing `search`, `delete_repo` and `fetch`; any call answers `called <name>`.
async fn three_tools() -> hostile::Server {
    let tools: Vec<Value> = ["search", "delete_repo", "fetch"]
        .into_iter()
        .map(|name| hostile::tool(name, "a tool"))
        .collect();
    hostile::serve_tools(tools, |req| {
        let name = req.rpc["params"]["name"].as_str().unwrap_or_default();
        Reply::json(&hostile::text_result(&req.id(), &format!("called {name}")))
    })
    .await
}

fn tools_of(listing: &Value, namespace: &str) -> Vec<String> {
    server_entry(listing, namespace)["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Goose's `available_tools` (its extension entry's allow-list: only these tools) decides which
/// tools a model may use, so by docs/configuration.md it must be read as a filter or refuse the
/// entry by name, never be ignored. Expected: `delete_repo` and `fetch` hidden (or the entry
/// refused naming `available_tools`). Actual: the key is ignored in silence, every tool is
/// listed and callable, and nothing says so.
#[tokio::test]
async fn gooses_available_tools_allow_list_is_not_ignored_in_silence() {
    let server = three_tools().await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({
        "goose": {"type": "streamable_http", "url": url, "timeout": 300, "available_tools": ["search"]},
    }));
    let listing = host.settled(WAIT).await;
    let entry = server_entry(&listing, "goose").to_string();
    let names = tools_of(&listing, "goose");
    assert!(
        names == ["search"] || entry.contains("available_tools"),
        "Goose's allow-list was ignored in silence: tools {names:?}, entry {entry}"
    );
}

/// Claude Code's `oauth.authServerMetadataUrl` (its override of RFC 9728 / RFC 8414 discovery:
/// the authorization server's metadata document to use) decides where a sign-in, and any
/// client credential, goes. Expected: read, or the entry refused naming the key (as Gemini CLI's
/// `tokenUrl` and `authorizationUrl` are). Actual: the `oauth` object's parse ignores it in
/// silence (it is no misspelling of a known key), and the entry starts as if it were absent.
#[tokio::test]
async fn claude_codes_auth_server_metadata_url_is_not_ignored_in_silence() {
    let server = three_tools().await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({
        "claude": {"type": "http", "url": url, "oauth": {
            "clientId": "claude-client",
            "callbackPort": 33418,
            "authServerMetadataUrl": "https://127.0.0.1:9/.well-known/oauth-authorization-server"
        }},
    }));
    let listing = host.settled(WAIT).await;
    let entry = server_entry(&listing, "claude").to_string();
    assert!(
        entry.contains("authServerMetadataUrl"),
        "Claude Code's discovery override was ignored in silence: {entry}"
    );
}

/// A placeholder of another client's form in the OAuth client (Cursor's `auth.CLIENT_ID` /
/// `CLIENT_SECRET`, or `oauth.clientId` / `clientSecret`) is sent as written to the
/// authorization server, exactly as one in a header is. docs/configuration.md "Notes": the
/// entry's listing and a `warn` line say which placeholder is sent as written and what to write
/// instead, "whether or not the server later refuses anything". Expected: a note naming the
/// field and `${env:...}`. Actual: the `oauth` object is substituted with a throw-away
/// `Notes::default()` (config.rs `parse_remote`), so nothing is said at any level and the
/// literal `${CURSOR_CLIENT_SECRET}` would be the client's secret.
#[tokio::test]
async fn a_placeholder_in_the_oauth_client_is_named_in_the_notes() {
    let server = three_tools().await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({
        "cursor": {"url": url, "auth": {
            "CLIENT_ID": "${CURSOR_CLIENT_ID}",
            "CLIENT_SECRET": "${CURSOR_CLIENT_SECRET}"
        }},
        "header": {"url": url, "headers": {"X-Key": "${HEADER_KEY}"}},
    }));
    let listing = host.settled(WAIT).await;
    // The header's placeholder is named (the rule holds there) ...
    let header = server_entry(&listing, "header")["notes"].to_string();
    assert!(header.contains("${env:HEADER_KEY}"), "{header}");
    // ... the OAuth client's are not.
    let notes = server_entry(&listing, "cursor")["notes"].to_string();
    assert!(
        notes.contains("CURSOR_CLIENT_ID") && notes.contains("CURSOR_CLIENT_SECRET"),
        "the OAuth client's placeholders are sent as written in silence: notes {notes}"
    );
}

/// Codex's `bearer_token_env_var` names a variable, but the easy mistake is to paste the token
/// itself there, and a GitHub (`ghp_…`) or Stripe (`sk_live_…`) token is a valid variable name.
/// The reader already guards this mistake for `${env:KEY:-fallback}` ("quoting only the valid
/// start of the name, since what follows is often a pasted secret"). Expected: the reason does
/// not quote a value that is not a plausible variable name in full, or at least the token does
/// not reach the model. Actual: `all_headers`'s refusal (config.rs, `environment variable "{name}"
/// (named by "bearer_token_env_var") is not set`) quotes the pasted token whole in the listing,
/// the same for `env_http_headers`.
#[tokio::test]
async fn a_token_pasted_into_bearer_token_env_var_is_not_quoted_back() {
    const PASTED: &str = "ghp_AttackPastedToken0123456789abcdEFGH";
    const PASTED_2: &str = "sk_live_AttackPastedKey0123456789";
    let host = Host::new(json!({
        "codex": {"url": "http://127.0.0.1:9/mcp", "bearer_token_env_var": PASTED},
        "codex2": {"url": "http://127.0.0.1:9/mcp", "env_http_headers": {"X-Api-Key": PASTED_2}},
    }));
    let listing = host.settled(WAIT).await.to_string();
    assert!(
        !listing.contains(PASTED) && !listing.contains(PASTED_2),
        "a pasted token is quoted back to the model: {listing}"
    );
}

/// A resumption (`GET` + `Last-Event-ID`, MCP 2025-11-25 "Resumability and Redelivery") refused
/// `429` with `Retry-After: 1`: docs/connection.md's verdict table says a rate limit is "sent
/// once more ... after the wait when it is at most 30 s", on every path, the resumption named
/// among them. The call's answer is still buffered on the server. Expected: the resumption is
/// asked again after the second, and the call answers `done`. Actual: `read_sse`
/// (src/http/reply.rs, "resuming the event stream (GET with Last-Event-ID) failed") wraps the
/// 429 in `Error::stream`, whose verdict is no rate limit, so the wait is dropped and the call
/// fails though the server answered it.
#[tokio::test]
async fn a_resumption_refused_429_with_a_short_retry_after_resumes_after_the_wait() {
    let resumptions = Arc::new(AtomicUsize::new(0));
    let call_id = Arc::new(Mutex::new(Value::Null));
    let server = hostile::serve({
        let resumptions = Arc::clone(&resumptions);
        let call_id = Arc::clone(&call_id);
        move |req| {
            let reply = if req.http_method == "GET" && req.header("last-event-id").is_some() {
                if resumptions.fetch_add(1, Ordering::SeqCst) == 0 {
                    Reply::raw(429, "text/plain", "slow down").header("retry-after", "1")
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
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({"s": {"url": url}}));
    host.ready("s", WAIT).await;
    let answer = host.call_tool("s", "t").await;
    assert_eq!(
        answer.as_deref().map_err(|e| e.message.clone()),
        Ok("done"),
        "resumptions asked: {}",
        resumptions.load(Ordering::SeqCst)
    );
}

/// The standalone `GET` stream refused `429` with `Retry-After: 20`: the server named how long
/// to stay away (RFC 6585 §4), and docs/connection.md says every path, the standalone stream
/// named, acts on the rate-limit verdict. Expected: no second `GET` before the 20 seconds are
/// up. Actual: the stream machine (src/server.rs `listen`) maps every verdict but expired and
/// set-aside to `Found::Ended` and reopens on its own backoff (1 s, 2 s, ...), so the server is
/// asked again after 1 s and 3 s, against its word.
#[tokio::test]
async fn a_standalone_get_refused_429_waits_the_named_wait_before_asking_again() {
    let server = hostile::serve_every_get(|req| {
        let reply = if req.http_method == "GET" {
            Reply::raw(429, "text/plain", "slow down").header("retry-after", "20")
        } else if let Some(reply) = hostile::standard(&req) {
            reply
        } else {
            Reply::json(&hostile::tools_page(
                &req.id(),
                vec![hostile::tool("t", "t")],
                None,
            ))
        };
        async move { reply }
    })
    .await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({"s": {"url": url}}));
    host.ready("s", WAIT).await;
    server
        .wait_until(WAIT, "the first GET", |r| {
            r.iter().any(|r| r.http_method == "GET")
        })
        .await;
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let gets = server
        .requests()
        .iter()
        .filter(|r| r.http_method == "GET")
        .count();
    assert_eq!(gets, 1, "GETs within 4.5 s of a Retry-After: 20");
    drop(host);
}

/// The close's `DELETE` refused `429` with `Retry-After: 1`: the session was not ended (RFC
/// 6585 §4: the request was not processed), the wait fits the goodbye's 5 s bound, and
/// docs/connection.md lists the close among the paths that act on the verdict. Expected: the
/// `DELETE` sent once more after the second. Actual: `Connection::delete`
/// (src/http/session.rs) only logs the status; no verdict is made and the session is left open
/// on the server.
#[tokio::test]
async fn a_delete_refused_429_with_a_short_retry_after_is_sent_again_after_the_wait() {
    let deletes = Arc::new(AtomicUsize::new(0));
    let server = hostile::serve({
        let deletes = Arc::clone(&deletes);
        move |req| {
            let reply = if req.http_method == "DELETE" {
                if deletes.fetch_add(1, Ordering::SeqCst) == 0 {
                    Reply::raw(429, "text/plain", "slow down").header("retry-after", "1")
                } else {
                    Reply::raw(200, "text/plain", "")
                }
            } else if let Some(reply) = hostile::standard(&req) {
                reply
            } else {
                Reply::json(&hostile::tools_page(
                    &req.id(),
                    vec![hostile::tool("t", "t")],
                    None,
                ))
            };
            async move { reply }
        }
    })
    .await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({"s": {"url": url}}));
    host.ready("s", WAIT).await;
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

/// `logout` of an entry the config switched off deletes the grant its file is keyed by (the
/// url, the client and the namespace: README "Signing in"); an entry written in Cursor's
/// dialect keys its client by `auth.CLIENT_ID`, which the Pack maps onto `oauth.clientId`.
/// Expected: `deleted: true` for the disabled Cursor entry as for the enabled one. Actual:
/// `config::sign_in_of` (the key of a refused entry's stored sign-in) reads only `oauth`, not
/// the `auth` that `oauth_value` maps for a live entry, so it keys the file without the client
/// and the grant cannot be deleted (`deleted: false`, the file stays).
#[tokio::test]
async fn logout_deletes_the_grant_of_a_disabled_entry_written_in_cursors_dialect() {
    crate::support::oauth_store();
    let on = "http://127.0.0.1:9/findings-cursor-on/mcp";
    let off = "http://127.0.0.1:9/findings-cursor-off/mcp";
    let host = Host::new(json!({
        "cursor_on": {"url": on, "auth": {"CLIENT_ID": "cursor-client"}},
        "cursor_off": {"url": off, "disabled": true, "auth": {"CLIENT_ID": "cursor-client"}},
    }));
    let mut outcomes = Vec::new();
    for (namespace, url) in [("cursor_on", on), ("cursor_off", off)] {
        let file = crate::support::store_file(
            &reqwest::Url::parse(url).unwrap(),
            "cursor-client",
            namespace,
        );
        std::fs::write(&file, "{}").unwrap();
        let answer = host
            .pack
            .call("mcp/logout", json!({"namespace": namespace}))
            .await;
        outcomes.push((namespace, answer.map_err(|e| e.message), file.exists()));
        let _ = std::fs::remove_file(&file);
    }
    assert_eq!(
        outcomes,
        [
            (
                "cursor_on",
                Ok(json!({"namespace": "cursor_on", "deleted": true}).to_string()),
                false
            ),
            (
                "cursor_off",
                Ok(json!({"namespace": "cursor_off", "deleted": true}).to_string()),
                false
            ),
        ]
    );
}

/// The config's text is JSONC "the way VS Code writes it: comments, trailing commas ...,
/// nothing looser" (docs/configuration.md). A comma with no value before it (`[,]`, `{,}`) is
/// no trailing comma: VS Code's parser reports "Value expected". Expected: the Pack unavailable
/// with the place. Actual: `json::scan` blanks the last comma before any `]`/`}` without
/// asking whether a value precedes it, so `"excludeTools": [,]` reads as `[]` and `{,"url": …}`
/// as an entry — a typo taken for a config.
#[tokio::test]
async fn a_comma_with_no_value_before_it_is_not_a_trailing_comma() {
    // What is refused: a missing comma.
    let missing =
        r#"{"mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp" "excludeTools": []}}}"#;
    assert!(Host::try_new(Value::String(missing.into())).is_err());
    for text in [
        r#"{"mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp", "excludeTools": [,]}}}"#,
        r#"{"mcpServers": {"docs": {, "url": "http://127.0.0.1:9/mcp"}}}"#,
    ] {
        let built = Host::try_new(Value::String(text.into())).map(drop);
        assert!(built.is_err(), "accepted: {text}");
    }
}

/// A server whose response to `tools/call` also echoes the request's `method` (JSON-RPC 2.0 §5
/// says a response has none, but it carries the request's `id` and a `result`, so it can only
/// be that response). Expected: the call answers the result (or, at the least, fails at once as
/// a malformed response). Actual: `jsonrpc::Incoming::kind` decides on `method` + `id` first and
/// takes the message for a server *request*, so the result is lost and the call fails with
/// "the server's JSON reply held no response to request N" although the reply holds it.
#[tokio::test]
async fn a_response_that_echoes_the_method_is_still_the_response() {
    let tools = vec![hostile::tool("t", "t")];
    let server = hostile::serve_tools(tools, |req| {
        Reply::json(&json!({
            "jsonrpc": "2.0",
            "id": req.id(),
            "method": "tools/call",
            "result": {"content": [{"type": "text", "text": "done"}]}
        }))
    })
    .await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({"s": {"url": url}}));
    host.ready("s", WAIT).await;
    let answer = tokio::time::timeout(WAIT, host.call_tool("s", "t"))
        .await
        .expect("the call answers within 10 s");
    assert_eq!(answer.map_err(|e| e.message), Ok("done".to_string()));
}

/// The standalone stream's loop renews a session it found gone (its `GET` and `ping` answered
/// `404`), and the server refuses the `initialize` `429` with `Retry-After: 20`. As with the
/// stream itself (above), the loop's own renewal is a path that must act on the rate-limit
/// verdict. Expected: no further `initialize` within the 20 seconds. Actual: the machine's
/// `Found::Renewed { ok: false }` and `Act::AwaitSession` (src/server.rs `listen`) carry no
/// wait, so the loop initializes again on its 1 s, 2 s, ... backoff.
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
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({"s": {"url": url}}));
    host.ready("s", WAIT).await;
    server
        .wait_until(WAIT, "the renewal refused 429", |r| {
            r.iter().filter(|r| r.method() == "initialize").count() >= 2
        })
        .await;
    tokio::time::sleep(Duration::from_millis(4500)).await;
    assert_eq!(
        server.count("initialize"),
        2,
        "initializes within 4.5 s of a Retry-After: 20"
    );
    drop(host);
}

/// The same mistake in Claude Code's form: a key pasted inside `${...}` (`Bearer ${sk_live_…}`)
/// is sent as written, as part of a header value, and header values are secrets
/// (docs/configuration.md "Header values ... are secrets"). Expected: neither the notes nor the
/// 401 hint quote it. Actual: the note (`substitute::Notes`, the `${NAME}` hint) quotes the
/// word whole, and the gate lets it through because `redact::is_unexpanded_placeholder` takes
/// any `${...}` word of a header value for no secret.
#[tokio::test]
async fn a_key_pasted_inside_a_placeholder_is_not_quoted_in_the_notes() {
    const PASTED: &str = "sk_live_AttackPastedInBraces0123456789";
    let host = Host::new(json!({
        "claude": {"url": "http://127.0.0.1:9/mcp",
                   "headers": {"Authorization": format!("Bearer ${{{PASTED}}}")}},
    }));
    let listing = host.settled(WAIT).await.to_string();
    assert!(
        !listing.contains(PASTED),
        "a header value's word reaches the listing: {listing}"
    );
}
