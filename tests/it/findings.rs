//! Findings of a review: each test states what should happen and fails on the current code.
//! Variables set here are `MCP_FINDINGS3_*`, read by no other module.

use std::time::Duration;

use crate::support::hostile::{self, Reply, server_entry};
use crate::support::{Host, construct};
use serde_json::json;

/// Sets `name` to `value` for this process (a name only this module reads).
fn set_env(name: &str, value: &str) {
    // SAFETY: the variable is this module's own; other tests read the environment only through
    // `std::env`, which takes the same process-wide lock as `set_var`.
    unsafe { std::env::set_var(name, value) };
}

/// An `${env:...}` value is a secret whatever it looks like. One that happens to look like
/// Gemini CLI's bare `$NAME` (a `$` then upper-case letters and digits, as a generated API key
/// or password may be) should still be scrubbed when a server echoes it: the reason should
/// show `[redacted]`. It is shown whole, because the redactor skips any value that
/// `is_quotable_placeholder` accepts, and that now accepts `$NAME`.
#[tokio::test]
async fn an_env_value_that_looks_like_a_bare_dollar_name_is_still_scrubbed() {
    const SECRET: &str = "$K7Q2X9ZP4M8WR3T6VN5B";
    set_env("MCP_FINDINGS3_DOLLAR_KEY", SECRET);
    let server = hostile::serve_initialize(|req| {
        let key = req.header("x-api-key").unwrap_or_default();
        Reply::raw(500, "text/plain", format!("bad key {key}"))
    })
    .await;
    let host = Host::new(json!({
        "s": {"url": server.url, "headers": {"X-Api-Key": "${env:MCP_FINDINGS3_DOLLAR_KEY}"}},
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    assert_eq!(
        server_entry(&listing, "s")["reason"],
        "HTTP 500 Internal Server Error: bad key [redacted]"
    );
}

/// The same hole in its older form: an `${env:...}` value that looks like a `${NAME}`
/// placeholder (a secret generated with `${`, `}` in its alphabet is rare, but the rule is the
/// one above) should be scrubbed when echoed; it is shown whole.
#[tokio::test]
async fn an_env_value_that_looks_like_a_braced_placeholder_is_still_scrubbed() {
    const SECRET: &str = "${K7Q2X9ZP4M8WR3T6VN5B}";
    set_env("MCP_FINDINGS3_BRACED_KEY", SECRET);
    let server = hostile::serve_initialize(|req| {
        let key = req.header("x-api-key").unwrap_or_default();
        Reply::raw(500, "text/plain", format!("bad key {key}"))
    })
    .await;
    let host = Host::new(json!({
        "s": {"url": server.url, "headers": {"X-Api-Key": "${env:MCP_FINDINGS3_BRACED_KEY}"}},
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    assert_eq!(
        server_entry(&listing, "s")["reason"],
        "HTTP 500 Internal Server Error: bad key [redacted]"
    );
}

/// A Gemini CLI `settings.json` handed whole as the plugin config (README: a plugin config
/// without an `mcp` key that is a whole `mcp.json` is the Pack's config) carries Gemini's own
/// top-level `"mcp": {"excluded": [...]}`. Its servers should be read from `mcpServers`, with
/// `mcp.excluded` refusing `t` and `s` started. Instead `install` takes that `mcp` object as
/// the Pack's config: the servers object becomes `{"excluded": [...]}`, so `s` is never
/// listed and a namespace `excluded` appears.
#[tokio::test]
async fn a_gemini_settings_file_given_whole_is_read_from_its_mcp_servers_not_its_mcp_block() {
    let server =
        hostile::serve_tools(vec![hostile::tool("t1", "one tool")], |_| Reply::accepted()).await;
    let settings = json!({
        "mcpServers": {"s": {"httpUrl": server.url}, "t": {"httpUrl": server.url}},
        "mcp": {"excluded": ["t"]},
    });
    let host = Host {
        pack: construct(&settings, "mcp").expect("the Pack constructs"),
    };
    let listing = host.settled(Duration::from_secs(10)).await;
    let namespaces: Vec<&str> = listing["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, ["s", "t"], "{listing}");
    assert_eq!(server_entry(&listing, "s")["status"], "ready");
}

/// A configured header value is a secret (README "Secrets"): no listing may show it. A key
/// that begins with `$` and is otherwise upper-case letters and digits (as some generated API
/// keys are) is taken for Gemini CLI's bare `$NAME` and quoted whole in the server's notes:
/// `header "X-Api-Key" holds $K7Q2X9ZP4M8WR3T6VN5B, which was sent as written ...`. The
/// listing should not hold the value.
#[tokio::test]
async fn a_configured_header_value_that_looks_like_a_bare_dollar_name_is_never_listed() {
    const SECRET: &str = "$K7Q2X9ZP4M8WR3T6VN5B";
    let server =
        hostile::serve_tools(vec![hostile::tool("t1", "one tool")], |_| Reply::accepted()).await;
    let host = Host::new(json!({
        "s": {"url": server.url, "headers": {"X-Api-Key": SECRET}},
    }));
    host.ready("s", Duration::from_secs(10)).await;
    let listing = host.listing(json!({})).await.to_string();
    assert!(!listing.contains("K7Q2X9ZP4M8WR3T6VN5B"), "{listing}");
}

/// A server with no sign-in metadata whose guessed `/register` (MCP 2025-03-26's default
/// endpoints) exists but is closed answers `403` with an OAuth error object and a description
/// (`access_denied`: registration is disabled). That is a registration endpoint refusing, and
/// the reason should say so (keeping its description: a pre-registered `oauth.clientId` is what
/// is needed). Instead `is_registration_error` knows only RFC 7591's four codes, so the reason
/// claims there is "no registration endpoint" and that the server "probably wants an API key",
/// a lasting verdict that sends the user the wrong way.
#[tokio::test]
async fn a_closed_guessed_registration_endpoint_is_not_called_an_api_key_server() {
    crate::support::oauth_store();
    let listener = crate::support::net::unused_loopback().await;
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let _server = hostile::serve_on(listener, |req| async move {
        match (req.http_method.as_str(), req.target.as_str()) {
            ("POST", "/mcp") => {
                Reply::raw(401, "text/plain", "sign in").header("www-authenticate", "Bearer")
            }
            ("POST", "/register") => Reply::raw(
                403,
                "application/json",
                r#"{"error":"access_denied","error_description":"dynamic client registration is disabled"}"#,
            ),
            _ => Reply::raw(404, "text/plain", "not here"),
        }
    });
    let host = Host::new(json!({"docs": {"url": format!("{base}/mcp")}}));
    let reason = host
        .reason_starting(&["signing in failed", "sign-in required"])
        .await;
    assert!(
        !reason.contains("no registration endpoint") && !reason.contains("API key"),
        "{reason}"
    );
    assert!(
        reason.contains("dynamic client registration is disabled"),
        "{reason}"
    );
}

/// A modern server answers a call on an event stream with a response to another id, then
/// ends the stream. In a JSON body the same reply is refused at once ("held no response"),
/// never sent again; on the stream it should be read the same: the server answered, so the
/// tool ran, and re-issuing the call would run it twice. Counted here: `tools/call` requests.
#[tokio::test]
async fn a_modern_call_answered_with_another_id_on_a_stream_is_not_sent_twice() {
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => crate::support::answers::discover_result(&req.id()),
            "tools/list" => Reply::json(&hostile::tools_page(
                &req.id(),
                vec![hostile::tool("t", "t")],
                None,
            )),
            "tools/call" => {
                let other = json!(req.id().as_u64().unwrap() + 1000);
                Reply::sse(&[hostile::text_result(&other, "ran")])
            }
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({"m": {"url": server.url}}));
    host.ready("m", Duration::from_secs(10)).await;
    let call = host.call_tool("m", "t").await;
    assert!(call.is_err(), "{call:?}");
    assert_eq!(server.count("tools/call"), 1, "{call:?}");
}

/// A tagged message with neither `id`, `result` nor `error` but a `method` that is no string
/// (a malformed notification: `{"jsonrpc":"2.0","method":{...},"params":{}}`) is no response
/// to anything. On a call's stream it should be skipped, and the call's own answer, right
/// after it, read. Since a tagged message without id was made a malformed response
/// (`Incoming::kind`'s `(None, None, None) if self.is_tagged()`), it ends the call instead.
#[tokio::test]
async fn a_notification_with_an_odd_method_does_not_end_the_call_as_its_answer() {
    let server = hostile::serve_tools(vec![hostile::tool("t", "t")], |req| {
        let odd =
            json!({"jsonrpc": "2.0", "method": {"name": "notifications/progress"}, "params": {}});
        Reply::sse(&[odd, hostile::text_result(&req.id(), "served")])
    })
    .await;
    let host = Host::new(json!({"s": {"url": server.url}}));
    host.ready("s", Duration::from_secs(10)).await;
    assert_eq!(host.call_tool("s", "t").await, Ok("served".into()));
}
