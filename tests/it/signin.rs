//! Signing in to a server that answers `401` (MCP 2025-11-25 "Authorization"), end to end
//! through the Host contract, against the local authorization server of tests/support/oauth.rs
//! (127.0.0.1 only): the link in the listing, the browser played, the stored grant reused by a
//! second Pack, one refresh for concurrent calls, `invalid_grant`, and a configured
//! `Authorization` header that never starts OAuth.

use std::time::Duration;

use crate::support::host_cli::{code_and_stderr, host_command};
use crate::support::oauth::{Options, TestServer, play_browser, play_browser_page};
use crate::support::{Host, oauth_store, store_file};
use reqwest::Url;
use runvil_plugin::ToolErrorKind;
use serde_json::{Value, json};

pub(crate) const WAIT: Duration = Duration::from_secs(10);

fn entry(server: &TestServer) -> Value {
    json!({"docs": {"url": server.mcp_url().as_str()}})
}

fn reason_for(link: &str) -> String {
    format!(
        "sign-in required: open {link} in a browser and sign in; the server starts once the sign-in completes"
    )
}

/// Waits for the listing to show a sign-in link for `docs` and returns it.
pub(crate) async fn link_in_listing(host: &Host) -> String {
    let listing = host
        .wait_for(WAIT, |l| !l["servers"][0]["signInUrl"].is_null())
        .await;
    listing["servers"][0]["signInUrl"]
        .as_str()
        .unwrap()
        .to_string()
}

pub(crate) async fn call_whoami(host: &Host) -> Result<String, runvil_plugin::ToolError> {
    host.call_tool("docs", "whoami").await
}

/// Signs in through the listing's link; returns the link.
pub(crate) async fn sign_in(host: &Host) -> String {
    let link = link_in_listing(host).await;
    browse(host, &link).await;
    link
}

/// Plays the browser for `link` (it answers `200`) and waits until `docs` is ready.
async fn browse(host: &Host, link: &str) {
    assert_eq!(play_browser(&Url::parse(link).unwrap()).await, 200);
    host.ready("docs", WAIT).await;
}

/// A server started with the default options and a Host of it, not signed in yet.
async fn not_signed_in() -> (TestServer, Host) {
    let server = TestServer::start(Options::default()).await;
    let host = Host::new(entry(&server));
    (server, host)
}

/// A server started with `options` and a Host signed in to it.
async fn signed_in(options: Options) -> (TestServer, Host) {
    let server = TestServer::start(options).await;
    let host = Host::new(entry(&server));
    sign_in(&host).await;
    (server, host)
}

/// The default options with a challenge naming `mcp:read` and calls needing `mcp:write` too
/// (a `403 insufficient_scope` step-up, MCP 2025-11-25 "Authorization").
fn step_up_scopes() -> Options {
    Options {
        challenge_scope: Some("mcp:read"),
        call_scope: Some("mcp:write"),
        ..Options::default()
    }
}

/// The default options with sessions (`Mcp-Session-Id`).
fn with_sessions() -> Options {
    Options {
        sessions: true,
        ..Options::default()
    }
}

/// Expires the access tokens and drops `host` (its session's `DELETE` goes out); returns the
/// length of the trail before the drop.
fn drop_with_expired_tokens(server: &TestServer, host: Host) -> usize {
    server.expire_access_tokens();
    let before = trail(server).len();
    drop(host);
    before
}

/// A server whose refreshes take `refresh_delay`, and two Hosts of it: the first signs in
/// through the browser, the second reads the grant the first stored and is ready. Then the
/// access tokens expire.
async fn two_hosts(refresh_delay: Duration) -> (TestServer, Host, Host) {
    let server = TestServer::start(Options {
        refresh_delay,
        ..Options::default()
    })
    .await;
    let first = Host::new(entry(&server));
    sign_in(&first).await;
    let second = Host::new(entry(&server));
    second.ready("docs", WAIT).await;
    server.expire_access_tokens();
    (server, first, second)
}

/// Both calls answered `signed in`.
fn both_signed_in(
    a: Result<String, runvil_plugin::ToolError>,
    b: Result<String, runvil_plugin::ToolError>,
) {
    assert_eq!(
        (a.unwrap(), b.unwrap()),
        ("signed in".into(), "signed in".into())
    );
}

/// `docs` at the server's MCP URL with one more `field` (`headers`, `oauth`) beside the URL.
fn entry_with(server: &TestServer, field: &str, value: Value) -> Value {
    json!({"docs": {"url": server.mcp_url().as_str(), field: value}})
}

/// A server started with the default options changed by `change`, and a Host whose `docs` has
/// a configured `X-Api-Key: key` header (not `Authorization`: OAuth still signs in).
async fn with_key(key: &str, change: impl FnOnce(&mut Options)) -> (TestServer, Host) {
    let mut options = Options::default();
    change(&mut options);
    let server = TestServer::start(options).await;
    let host = Host::new(entry_with(&server, "headers", json!({"X-Api-Key": key})));
    (server, host)
}

/// Waits for the listing to show that signing in failed; returns the listing.
async fn sign_in_failed(host: &Host) -> Value {
    host.wait_for(WAIT, |l| {
        l["servers"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("signing in failed"))
    })
    .await
}

/// Plays the browser for the listing's link and waits for the listing to show that signing in
/// failed; returns the status and page the browser got and the listing's reason.
async fn browse_to_failure(host: &Host) -> (u16, String, String) {
    let link = link_in_listing(host).await;
    let (status, page) = play_browser_page(&Url::parse(&link).unwrap()).await;
    let listing = sign_in_failed(host).await;
    let reason = listing["servers"][0]["reason"].as_str().unwrap();
    (status, page, reason.to_string())
}

/// The texts of `texts` that contain `needle`.
fn holding<'a>(texts: [&'a str; 2], needle: &str) -> Vec<&'a str> {
    texts.into_iter().filter(|t| t.contains(needle)).collect()
}

/// Waits (at most [`WAIT`], polling every 20 ms) until `done()`; panics with `why()` when the
/// time runs out.
async fn until(mut done: impl FnMut() -> bool, why: impl Fn() -> String) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{}", why());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The value of the query parameter `name` of `link`.
fn query(link: &Url, name: &str) -> Option<String> {
    link.query_pairs()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.into_owned())
}

fn trail(server: &TestServer) -> Vec<String> {
    server.log.lock().unwrap().mcp.clone()
}

#[tokio::test]
async fn a_401_shows_the_link_in_both_listings_and_the_browser_makes_the_server_ready() {
    oauth_store();
    let (server, host) = not_signed_in().await;

    let link = link_in_listing(&host).await;
    let prefix = format!("{}authorize?", server.base);
    assert!(link.starts_with(&prefix), "{link}");
    let all = host.listing(json!({})).await;
    assert_eq!(
        all,
        json!({"servers": [{"namespace": "docs", "status": "error", "reason": reason_for(&link),
            "signInUrl": link, "tools": []}]})
    );
    let one = host.listing(json!({"namespace": "docs"})).await;
    assert_eq!(
        one,
        json!({"namespace": "docs", "status": "error", "reason": reason_for(&link),
            "signInUrl": link, "tools": []})
    );
    let refused = call_whoami(&host).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::Unavailable);
    assert_eq!(
        refused.message,
        format!("server \"docs\" is unavailable: {}", reason_for(&link))
    );

    // The start continues as soon as the code arrives (the backoff is at 1 s or more by now;
    // the wait below does not depend on it).
    browse(&host, &link).await;
    assert_eq!(call_whoami(&host).await.unwrap(), "signed in");
    let trail = trail(&server);
    let signed_in_at = trail
        .iter()
        .position(|t| t == "initialize access-token-000002")
        .unwrap();
    assert!(
        trail[..signed_in_at]
            .iter()
            .all(|t| t == "initialize no token")
    );
    assert_eq!(
        trail[signed_in_at..],
        [
            "initialize access-token-000002",
            "notifications/initialized access-token-000002",
            "tools/list access-token-000002",
            "tools/call access-token-000002",
        ]
    );
    assert_eq!(server.log.lock().unwrap().registrations, 1);
}

#[tokio::test]
async fn the_browser_and_the_listing_tell_why_a_sign_in_failed_then_a_new_link_waits() {
    oauth_store();
    let server = TestServer::start(Options {
        token_status: Some(axum::http::StatusCode::NOT_FOUND),
        ..Options::default()
    })
    .await;
    let host = Host::new(entry(&server));
    let link = link_in_listing(&host).await;
    let (status, page) = play_browser_page(&Url::parse(&link).unwrap()).await;
    assert_eq!(
        (status, page.as_str()),
        (
            200,
            "<!doctype html><meta charset=utf-8><title>Sign-in failed</title>\
<p>Sign-in failed: the token endpoint answered HTTP 404</p>\
<p>Ask your assistant for a new sign-in link.</p>"
        )
    );
    // The failure shows in the status (until the next start makes a new link).
    let failed = host
        .wait_for(WAIT, |l| l["servers"][0]["signInUrl"].is_null())
        .await;
    assert_eq!(
        failed["servers"][0]["reason"],
        "signing in failed: the token endpoint answered HTTP 404"
    );
    assert_eq!(failed["servers"][0]["status"], "error");
    let again = link_in_listing(&host).await;
    assert_ne!(again, link);
}

#[tokio::test]
async fn a_second_pack_reuses_the_stored_grant_without_registering_or_signing_in() {
    oauth_store();
    let server = TestServer::start(Options::default()).await;
    let first = Host::new(entry(&server));
    sign_in(&first).await;
    drop(first);
    let before = trail(&server).len();
    // One file per server and client, named as README "Signing in" documents (what
    // `host logout` deletes), 0600 in a 0700 directory.
    let file = store_file(&server.mcp_url(), "", "docs");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    // The file names the server by a SHA-256 of its URL (a URL may hold a secret).
    let named = stored["server"].as_str().unwrap_or("");
    assert_eq!(
        (named.len(), named.starts_with("sha256:")),
        (71, true),
        "{named}"
    );
    assert_eq!(stored["client"]["client_id"], "client-1");
    assert_eq!(stored["grant"]["access_token"], "access-token-000002");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().unwrap()), 0o700);
    }

    let second = Host::new(entry(&server));
    second.ready("docs", WAIT).await;
    assert_eq!(call_whoami(&second).await.unwrap(), "signed in");
    let log = server.log.lock().unwrap();
    assert_eq!(log.registrations, 1);
    assert_eq!(log.authorizations.len(), 1);
    assert_eq!(log.token_requests.len(), 1);
    assert_eq!(
        log.mcp[before..],
        [
            "initialize no token",
            "initialize access-token-000002",
            "notifications/initialized access-token-000002",
            "tools/list access-token-000002",
            "tools/call access-token-000002",
        ]
    );
}

#[tokio::test]
async fn concurrent_calls_refused_with_401_wait_for_one_refresh_and_retry_once() {
    oauth_store();
    let (server, host) = signed_in(Options {
        refresh_delay: Duration::from_millis(800),
        ..Options::default()
    })
    .await;
    server.expire_access_tokens();
    let before = trail(&server).len();

    let calls = futures_util::future::join_all((0..4).map(|_| call_whoami(&host))).await;
    for result in calls {
        assert_eq!(result.unwrap(), "signed in");
    }
    assert_eq!(
        grant_types(&server),
        ["authorization_code", "refresh_token"]
    );
    let mut calls = trail(&server)[before..].to_vec();
    calls.sort();
    assert_eq!(
        calls,
        [
            "tools/call access-token-000002 (refused)",
            "tools/call access-token-000002 (refused)",
            "tools/call access-token-000002 (refused)",
            "tools/call access-token-000002 (refused)",
            "tools/call access-token-000003",
            "tools/call access-token-000003",
            "tools/call access-token-000003",
            "tools/call access-token-000003",
        ]
    );
}

#[tokio::test]
async fn invalid_grant_asks_for_a_new_sign_in_once() {
    oauth_store();
    let (server, host) = not_signed_in().await;
    let first_link = sign_in(&host).await;
    server.expire_access_tokens();
    server.revoke_refresh_tokens();

    let refused = call_whoami(&host).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::Unavailable);
    let prefix = "server \"docs\" is unavailable: sign-in required: open ";
    assert!(refused.message.starts_with(prefix), "{}", refused.message);
    let link = refused.message[prefix.len()..]
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    assert_ne!(link, first_link);
    assert_eq!(
        refused.message,
        format!("server \"docs\" is unavailable: {}", reason_for(&link))
    );
    // The same link while it waits: no second sign-in, no loop; the listing shows it too.
    let again = call_whoami(&host).await.unwrap_err();
    assert_eq!(again.message, refused.message);
    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [{"namespace": "docs", "status": "error", "reason": reason_for(&link),
            "signInUrl": link, "tools": []}]})
    );

    assert_eq!(play_browser(&Url::parse(&link).unwrap()).await, 200);
    let deadline = tokio::time::Instant::now() + WAIT;
    let answer = loop {
        match call_whoami(&host).await {
            Ok(text) => break text,
            Err(e) if tokio::time::Instant::now() < deadline => {
                assert_eq!(e.message, refused.message);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("still refused: {}", e.message),
        }
    };
    assert_eq!(answer, "signed in");
    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [{"namespace": "docs", "status": "ready", "tools": ["whoami"]}]})
    );
    assert_eq!(
        grant_types(&server),
        ["authorization_code", "refresh_token", "authorization_code"]
    );
    assert_eq!(server.log.lock().unwrap().registrations, 1);
}

#[tokio::test]
async fn a_configured_authorization_header_never_starts_oauth() {
    oauth_store();
    let server = TestServer::start(Options::default()).await;
    let host = Host::new(entry_with(
        &server,
        "headers",
        json!({"Authorization": "Bearer configured-token-1"}),
    ));
    let listing = host.settled(WAIT).await;
    let docs = &listing["servers"][0];
    assert_eq!(
        (&docs["status"], &docs["reason"], &docs["signInUrl"]),
        (
            &json!("error"),
            &json!(
                "HTTP 401 Unauthorized; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry's \"headers\" (e.g. \"Authorization\": \"Bearer ${env:TOKEN}\")"
            ),
            &Value::Null
        )
    );
    let requests = server.requests();
    assert!(!requests.is_empty());
    assert!(requests.iter().all(|r| r == "POST /mcp"), "{requests:?}");
    assert!(
        trail(&server)
            .iter()
            .all(|t| t == "initialize configured-token-1 (refused)")
    );
}

#[tokio::test]
async fn a_restart_with_an_expired_revoked_grant_shows_the_link_at_once() {
    oauth_store();
    let server = TestServer::start(Options {
        lifetime: 1,
        ..Options::default()
    })
    .await;
    let first = Host::new(entry(&server));
    sign_in(&first).await;
    drop(first);
    server.revoke_refresh_tokens();
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let second = Host::new(entry(&server));
    // The first failure the listing shows is the sign-in, with its link.
    let listing = second
        .wait_for(WAIT, |l| l["servers"][0]["status"] == "error")
        .await;
    let docs = &listing["servers"][0];
    let link = docs["signInUrl"].as_str().unwrap_or("").to_string();
    assert_eq!(
        (&docs["reason"], docs["signInUrl"].is_string()),
        (&json!(reason_for(&link)), true),
        "{listing}"
    );
}

/// Waits until the MCP trail holds `line` after index `from`; returns the trail.
async fn trail_reaches(server: &TestServer, from: usize, line: &str) -> Vec<String> {
    let reached = || {
        let trail = trail(server);
        trail[from.min(trail.len())..].iter().any(|t| t == line)
    };
    until(reached, || {
        format!("no {line:?} after {from}: {:#?}", trail(server))
    })
    .await;
    trail(server)
}

#[tokio::test]
async fn the_standalone_stream_refreshes_a_refused_token_without_a_new_sign_in() {
    oauth_store();
    let (server, host) = signed_in(Options {
        list_changed: true,
        ..with_sessions()
    })
    .await;
    // The stream opens, ends at once, and its opening asks for a re-listing; once that
    // re-listing went out, the next request is the stream's reopening, 1 s later.
    let opened = trail_reaches(&server, 0, "GET access-token-000002").await;
    let at = opened
        .iter()
        .position(|t| t == "GET access-token-000002")
        .unwrap();
    trail_reaches(&server, at, "tools/list access-token-000002").await;
    server.expire_access_tokens();
    let before = trail(&server).len();

    // The stream is opened again: with the refused token first,
    // then with the refreshed one, and no sign-in link is made.
    let after = trail_reaches(&server, before, "GET access-token-000003").await;
    let gets: Vec<&String> = after[before..]
        .iter()
        .filter(|t| t.starts_with("GET "))
        .collect();
    assert_eq!(
        gets[..2],
        [
            "GET access-token-000002 (refused)",
            "GET access-token-000003"
        ]
    );
    assert_eq!(
        grant_types(&server),
        ["authorization_code", "refresh_token"]
    );
    assert_eq!(server.log.lock().unwrap().authorizations.len(), 1);
    let listing = host.listing(json!({"namespace": "docs"})).await;
    assert_eq!(listing["status"], "ready");
    assert_eq!(listing["signInUrl"], Value::Null);
}

#[tokio::test]
async fn the_delete_at_shutdown_refreshes_a_refused_token_once() {
    oauth_store();
    let (server, host) = signed_in(with_sessions()).await;
    let before = drop_with_expired_tokens(&server, host);

    let after = trail_reaches(&server, before, "DELETE access-token-000003").await;
    assert_eq!(
        after[before..],
        [
            "DELETE access-token-000002 (refused)",
            "DELETE access-token-000003"
        ]
    );
    assert_eq!(
        grant_types(&server),
        ["authorization_code", "refresh_token"]
    );
}

#[tokio::test]
async fn a_delete_refused_after_a_revoked_grant_starts_no_sign_in() {
    oauth_store();
    let (server, host) = signed_in(with_sessions()).await;
    server.revoke_refresh_tokens();
    let before = drop_with_expired_tokens(&server, host);

    let after = trail_reaches(&server, before, "DELETE access-token-000002 (refused)").await;
    // Give a sign-in (registration, authorization) the chance to show up if one started.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let grants = grant_types(&server);
    let log = server.log.lock().unwrap();
    assert_eq!(log.mcp[before..], ["DELETE access-token-000002 (refused)"]);
    assert_eq!(after.len(), log.mcp.len());
    assert_eq!(grants, ["authorization_code", "refresh_token"]);
    assert_eq!(log.registrations, 1);
    assert_eq!(log.authorizations.len(), 1);
}

#[tokio::test]
async fn a_403_insufficient_scope_asks_for_a_new_sign_in_with_the_union_of_scopes() {
    oauth_store();
    let (server, host) = signed_in(step_up_scopes()).await;

    // The call's token lacks `mcp:write`: a new link, asking for both scopes, in its message.
    let refused = call_whoami(&host).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::Unavailable);
    let link = link_in_listing(&host).await;
    assert_eq!(
        refused.message,
        format!("server \"docs\" is unavailable: {}", reason_for(&link))
    );
    let scope = query(&Url::parse(&link).unwrap(), "scope");
    assert_eq!(scope.as_deref(), Some("mcp:read mcp:write"));
    browse(&host, &link).await;
    assert_eq!(call_whoami(&host).await.unwrap(), "signed in");
    let calls: Vec<String> = trail(&server)
        .into_iter()
        .filter(|t| t.starts_with("tools/call"))
        .collect();
    // The refused call, then the call with the new token (the second sign-in's code took
    // number 3).
    assert_eq!(
        calls,
        [
            "tools/call access-token-000002",
            "tools/call access-token-000004"
        ]
    );
    assert_eq!(
        grant_types(&server),
        ["authorization_code", "authorization_code"]
    );
}

// What two reviews that attacked the sign-in through the contract found, one test each.

/// The form field `field` of each token request whose `grant_type` is `grant` (of every
/// request with `None`), in order.
fn token_fields(server: &TestServer, grant: Option<&str>, field: &str) -> Vec<String> {
    server
        .log
        .lock()
        .unwrap()
        .token_requests
        .iter()
        .filter(|form| grant.is_none_or(|grant| form["grant_type"] == grant))
        .map(|form| form[field].clone())
        .collect()
}

/// The refresh tokens the token requests sent, in order.
fn refresh_tokens_sent(server: &TestServer) -> Vec<String> {
    token_fields(server, Some("refresh_token"), "refresh_token")
}

/// The grant types of the token requests, in order.
pub(crate) fn grant_types(server: &TestServer) -> Vec<String> {
    token_fields(server, None, "grant_type")
}

#[tokio::test]

async fn a_short_lived_token_is_refreshed_once_for_concurrent_calls() {
    oauth_store();
    // 30 s tokens: shorter than the 60 s refresh margin, but valid for the whole test.
    let (server, host) = signed_in(Options {
        lifetime: 30,
        ..Options::default()
    })
    .await;
    let before = trail(&server).len();
    let calls = futures_util::future::join_all((0..4).map(|_| call_whoami(&host))).await;
    for result in calls {
        assert_eq!(result.unwrap(), "signed in");
    }
    // Single-flight: the four calls go out with one token (at most one refresh for all).
    let mut tokens: Vec<String> = trail(&server)[before..]
        .iter()
        .filter(|t| t.starts_with("tools/call "))
        .map(|t| t["tools/call ".len()..].to_string())
        .collect();
    tokens.sort();
    tokens.dedup();
    assert_eq!(
        tokens.len(),
        1,
        "{tokens:?}; grants: {:?}",
        grant_types(&server)
    );
}

#[tokio::test]

async fn two_hosts_send_a_slow_refresh_token_once() {
    oauth_store();
    // The second Host reads the grant the first stored.
    let (server, first, second) = two_hosts(Duration::ZERO).await;
    // Slower than the 15 s lock wait, faster than the 30 s OAuth request timeout.
    server.delay_refreshes(Duration::from_secs(17));
    let (a, b) = tokio::join!(call_whoami(&first), call_whoami(&second));
    both_signed_in(a, b);
    assert_eq!(refresh_tokens_sent(&server), ["refresh-token-000002"]);
}

#[tokio::test]
async fn two_hosts_refreshing_at_once_send_the_refresh_token_once() {
    oauth_store();
    let (server, first, second) = two_hosts(Duration::from_millis(500)).await;
    let (a, b) = tokio::join!(call_whoami(&first), call_whoami(&second));
    both_signed_in(a, b);
    assert_eq!(
        grant_types(&server),
        ["authorization_code", "refresh_token"]
    );
}

#[tokio::test]
async fn a_host_dropped_mid_refresh_does_not_hold_up_the_other() {
    oauth_store();
    let (server, first, second) = two_hosts(Duration::from_millis(1500)).await;
    // The first Host's call starts the refresh; the Host is dropped while it runs.
    let call = call_whoami(&first);
    let _ = tokio::time::timeout(Duration::from_millis(300), call).await;
    drop(first);
    let started = tokio::time::Instant::now();
    assert_eq!(call_whoami(&second).await.unwrap(), "signed in");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        grant_types(&server),
        ["authorization_code", "refresh_token"]
    );
}

#[tokio::test]
async fn a_lock_file_that_cannot_be_made_does_not_break_sign_in_or_refresh() {
    oauth_store();
    let server = TestServer::start(Options::default()).await;
    let file = store_file(&server.mcp_url(), "", "docs");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // A directory where the lock file should be: opening it for writing fails.
    let lock = file.with_extension("json.lock");
    std::fs::create_dir_all(&lock).unwrap();
    let host = Host::new(entry(&server));
    sign_in(&host).await;
    server.expire_access_tokens();
    assert_eq!(call_whoami(&host).await.unwrap(), "signed in");
    assert_eq!(
        grant_types(&server),
        ["authorization_code", "refresh_token"]
    );
    let _ = std::fs::remove_dir(&lock);
}

#[tokio::test]
async fn a_hanging_refresh_does_not_keep_the_delete_from_going_out() {
    oauth_store();
    // 62 s tokens: within the 60 s refresh margin after 2 s, valid on the server for a minute.
    let (server, host) = signed_in(Options {
        lifetime: 62,
        ..with_sessions()
    })
    .await;
    assert_eq!(call_whoami(&host).await.unwrap(), "signed in");
    let held = trail(&server).last().unwrap()["tools/call ".len()..].to_string();
    server.delay_refreshes(Duration::from_secs(120));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(server.accepts(&held));
    let before = trail(&server).len();
    drop(host);
    // The DELETE is bounded by 5 s at shutdown; wait a little longer.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let deletes: Vec<String> = trail(&server)[before..]
        .iter()
        .filter(|t| t.starts_with("DELETE"))
        .cloned()
        .collect();
    assert_eq!(deletes, [format!("DELETE {held}")]);
}

#[tokio::test]
async fn a_stream_refused_after_its_refresh_does_not_refresh_on_every_reopen() {
    oauth_store();
    let (server, _host) = signed_in(Options {
        list_changed: true,
        get_refused: true,
        ..with_sessions()
    })
    .await;
    // Reopened after 1 s, 2 s, 4 s: give it three reopens.
    tokio::time::sleep(Duration::from_millis(7500)).await;
    let gets: Vec<String> = trail(&server)
        .into_iter()
        .filter(|t| t.starts_with("GET "))
        .collect();
    // One refresh for the first refusal; the refreshed token refused too says a refresh does
    // not help, so later reopens do not refresh again.
    assert_eq!(
        grant_types(&server),
        ["authorization_code", "refresh_token"],
        "{gets:#?}"
    );
}

#[tokio::test]
async fn a_scope_never_granted_stops_asking_after_two_step_ups() {
    oauth_store();
    // The stream ends at once and each reopen re-lists: a tools/list 2xx between the calls.
    let (server, host) = signed_in(Options {
        list_changed: true,
        withheld_scope: Some("mcp:write"),
        sessions: true,
        ..step_up_scopes()
    })
    .await;
    // Two step-ups, each signed in through the browser, each still without `mcp:write`.
    for _ in 0..2 {
        step_up(&host, "whoami").await;
        // Wait for a re-listing with the new token (the stream reopens after 1 s).
        let from = trail(&server).len();
        let relisted = || {
            trail(&server)[from..]
                .iter()
                .any(|t| t.starts_with("tools/list "))
        };
        until(relisted, || "no re-listing".to_string()).await;
    }
    // The third 403 in a row gives up instead of making a third step-up link.
    let third = call_whoami(&host).await.unwrap_err();
    let listing = host.listing(json!({"namespace": "docs"})).await;
    assert_eq!(
        (
            server.log.lock().unwrap().authorizations.len(),
            listing["signInUrl"].is_null()
        ),
        (3, true),
        "{}",
        third.message
    );
}

#[tokio::test]
async fn a_refused_refresh_quoting_the_access_token_shows_no_token() {
    oauth_store();
    let (_guard, logs) = crate::support::logs::capture("plugin_mcp=trace");
    // A configured header that is not `Authorization`: OAuth still signs in.
    let (server, host) = with_key("sk-configured-key-123456", |o| o.refresh_echo = true).await;
    sign_in(&host).await;
    server.expire_access_tokens();
    let refused = call_whoami(&host).await.unwrap_err();
    assert_eq!(
        refused.message,
        "server \"docs\": signing in failed: the token endpoint refused the request \
         (invalid_request): refresh refused; your access tokens: [redacted]; your key: [redacted]"
    );
    assert_eq!(logs.lines_with("access-token-"), Vec::<String>::new());
}

/// A signed-in server whose standalone `GET` stream is refused `401` with `challenge`: the
/// first GET and the reopen after 1 s are refused, and no refresh token is spent on them (the
/// only grant is the sign-in's code exchange).
async fn stream_refused_with(challenge: &'static str) {
    oauth_store();
    let (server, _host) = signed_in(Options {
        list_changed: true,
        get_refused: true,
        get_challenge: Some(challenge),
        ..with_sessions()
    })
    .await;
    // The first GET, and the reopen after 1 s.
    let from = trail(&server).len();
    let reopened = || {
        trail(&server)[from..]
            .iter()
            .filter(|t| t.starts_with("GET "))
            .count()
            >= 2
    };
    until(reopened, || format!("{:#?}", trail(&server))).await;
    assert_eq!(grant_types(&server), ["authorization_code"]);
}

#[tokio::test]
async fn a_stream_401_without_a_bearer_challenge_spends_no_refresh_token() {
    stream_refused_with("Basic realm=\"proxy\"").await;
}

#[tokio::test]
async fn a_pack_dropped_while_a_sign_in_waits_closes_the_listener() {
    oauth_store();
    let (_server, host) = not_signed_in().await;
    let link = Url::parse(&link_in_listing(&host).await).unwrap();
    let redirect = Url::parse(&query(&link, "redirect_uri").unwrap()).unwrap();
    let port = redirect.port().unwrap();
    drop(host);
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_ok()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "port {port} still open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]

async fn two_hosts_send_a_revoked_refresh_token_once() {
    oauth_store();
    let (server, first, second) = two_hosts(Duration::from_millis(300)).await;
    server.revoke_refresh_tokens();
    let (a, b) = tokio::join!(call_whoami(&first), call_whoami(&second));
    assert_eq!(
        (a.unwrap_err().kind, b.unwrap_err().kind),
        (ToolErrorKind::Unavailable, ToolErrorKind::Unavailable)
    );
    assert_eq!(refresh_tokens_sent(&server), ["refresh-token-000002"]);
}

#[tokio::test]
async fn a_refused_refresh_for_the_delete_logs_no_token() {
    oauth_store();
    let (_guard, logs) = crate::support::logs::capture("plugin_mcp=trace");
    let (server, host) = signed_in(Options {
        refresh_echo: true,
        ..with_sessions()
    })
    .await;
    let before = drop_with_expired_tokens(&server, host);
    trail_reaches(&server, before, "DELETE access-token-000002 (refused)").await;
    // The refresh the DELETE's 401 asks for, refused.
    until(
        || grant_types(&server).len() >= 2,
        || "no refresh".to_string(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(logs.lines_with("access-token-"), Vec::<String>::new());
}

#[tokio::test]
async fn a_refused_code_exchange_quoting_a_configured_header_shows_it_nowhere() {
    oauth_store();
    let (_guard, logs) = crate::support::logs::capture("plugin_mcp=trace");
    let (_server, host) = with_key("sk-configured-key-654321", |o| o.code_echo = true).await;
    let link = link_in_listing(&host).await;
    let (status, page) = play_browser_page(&Url::parse(&link).unwrap()).await;
    let reason = "the token endpoint refused the request (invalid_request): code refused; your \
                  key: [redacted]";
    assert_eq!(
        (status, page),
        (
            200,
            format!(
                "<!doctype html><meta charset=utf-8><title>Sign-in failed</title>\
                 <p>Sign-in failed: {reason}</p><p>Ask your assistant for a new sign-in link.</p>"
            )
        )
    );
    let listing = sign_in_failed(&host).await;
    assert_eq!(
        listing["servers"][0]["reason"],
        format!("signing in failed: {reason}")
    );
    assert_eq!(logs.lines_with("sk-configured-key"), Vec::<String>::new());
}

#[tokio::test]
async fn a_refused_code_exchange_quoting_the_basic_credential_shows_it_nowhere() {
    use base64::Engine as _;
    oauth_store();
    let (_guard, logs) = crate::support::logs::capture("plugin_mcp=trace");
    let server = TestServer::start(Options {
        basic_echo: true,
        client: Some(("client-basic", "client-secret-value-778899")),
        auth_methods: vec!["client_secret_basic"],
        ..Options::default()
    })
    .await;
    let host = Host::new(entry_with(
        &server,
        "oauth",
        json!({"clientId": "client-basic", "clientSecret": "client-secret-value-778899"}),
    ));
    // RFC 6749 §2.3.1: the id and secret, form-encoded, joined by `:`, in base64.
    let basic =
        base64::engine::general_purpose::STANDARD.encode("client-basic:client-secret-value-778899");
    let (status, page, reason) = browse_to_failure(&host).await;
    // The exchange did go out with the credential (the server quoted what it received).
    assert_eq!(token_fields(&server, None, "auth"), ["client_secret_basic"]);
    assert_eq!(status, 200);
    assert_eq!(holding([&page, &reason], &basic), Vec::<&str>::new());
    assert_eq!(logs.lines_with(&basic), Vec::<String>::new());
}

#[tokio::test]
async fn a_stream_401_with_bearer_only_in_a_basic_realm_spends_no_refresh_token() {
    // RFC 9110 §11.6.1: the scheme is the challenge's first token; the realm is free text.
    stream_refused_with("Basic realm=\"bearer-gateway\"").await;
}

#[tokio::test]
async fn a_withheld_scope_gets_no_third_link_after_another_tools_step_up() {
    oauth_store();
    let (server, host) = signed_in(Options {
        tool_scope: Some(("admin", "mcp:admin")),
        withheld_scope: Some("mcp:admin"),
        ..step_up_scopes()
    })
    .await;
    // `admin` needs `mcp:admin`, never granted: two step-ups, then an error.
    step_up(&host, "admin").await;
    step_up(&host, "admin").await;
    call_tool(&host, "admin").await.unwrap_err();
    // `whoami` needs `mcp:write`, granted: one step-up, and it answers.
    step_up(&host, "whoami").await;
    assert_eq!(call_tool(&host, "whoami").await.unwrap(), "signed in");
    // `admin` again: `mcp:admin` was asked for twice already and never granted.
    let again = call_tool(&host, "admin").await.unwrap_err();
    let listing = host.listing(json!({"namespace": "docs"})).await;
    let asked_admin = server
        .log
        .lock()
        .unwrap()
        .authorizations
        .iter()
        .filter(|query| {
            query
                .get("scope")
                .is_some_and(|s| s.split(' ').any(|s| s == "mcp:admin"))
        })
        .count();
    // A link shown now counts too (the browser has not opened it yet).
    let shown_admin = listing["signInUrl"].as_str().is_some_and(|link| {
        Url::parse(link)
            .unwrap()
            .query_pairs()
            .any(|(k, v)| k == "scope" && v.split(' ').any(|s| s == "mcp:admin"))
    });
    assert_eq!(
        (
            asked_admin + usize::from(shown_admin),
            listing["signInUrl"].is_null()
        ),
        (2, true),
        "{}",
        again.message
    );
}

async fn call_tool(host: &Host, tool: &str) -> Result<String, runvil_plugin::ToolError> {
    host.call_tool("docs", tool).await
}

/// A call to `tool` refused for a step-up; the browser signs in with the new link.
async fn step_up(host: &Host, tool: &str) {
    let refused = call_tool(host, tool).await.unwrap_err();
    assert_eq!(
        refused.kind,
        ToolErrorKind::Unavailable,
        "{}",
        refused.message
    );
    let link = link_in_listing(host).await;
    browse(host, &link).await;
}

/// A store directory `plugin-mcp-<tag>-<pid>` (emptied, not made) and a config file
/// `plugin-mcp-<tag>-<pid>.json` beside it with `servers` as its `mcpServers`, in the temp
/// directory, for the host example.
fn host_config(tag: &str, servers: Value) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("plugin-mcp-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = dir.with_extension("json");
    std::fs::write(&config, json!({ "mcpServers": servers }).to_string()).unwrap();
    (dir, config)
}

/// Runs `host login --wait 20 CONFIG docs` with the store in `dir`; plays the browser for the
/// link it prints; returns the exit code and stderr.
async fn host_login(config: &std::path::Path, dir: &std::path::Path) -> (Option<i32>, String) {
    host_login_with(config, dir, None).await
}

/// The address the authorization endpoint of `link` redirects to (the browser stops there).
async fn redirect_address(link: &str) -> String {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let answer = client.get(link).send().await.unwrap();
    assert_eq!(answer.status().as_u16(), 302);
    answer.headers()["location"].to_str().unwrap().to_string()
}

/// As [`host_login`]; with `paste`, the browser runs "on another machine": the lines `paste`
/// makes of the redirect address are written to the host's stdin instead of reaching its
/// listener.
async fn host_login_with(
    config: &std::path::Path,
    dir: &std::path::Path,
    paste: Option<fn(&str) -> String>,
) -> (Option<i32>, String) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut child = host_command(dir)
        .args(["login", "--wait", "20"])
        .arg(config)
        .arg("docs")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let link = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match paste {
        None => assert_eq!(play_browser(&Url::parse(&link).unwrap()).await, 200),
        Some(lines) => {
            let address = redirect_address(&link).await;
            stdin.write_all(lines(&address).as_bytes()).await.unwrap();
            stdin.flush().await.unwrap();
        }
    }
    let out = tokio::time::timeout(Duration::from_secs(40), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    code_and_stderr(&out)
}

#[tokio::test]
async fn host_login_fails_when_a_new_grant_could_not_replace_a_stored_one() {
    oauth_store();
    let server = TestServer::start(Options::default()).await;
    let (dir, config) = host_config("host-login", entry(&server));
    // A first login stores a registration and a grant.
    assert_eq!(host_login(&config, &dir).await, (Some(0), String::new()));
    // The user revoked the grant; the store becomes unwritable (an immutable directory: the
    // tests run as root, where modes do not stop a write).
    server.revoke_refresh_tokens();
    server.expire_access_tokens();
    let chattr = |flag: &str| {
        std::process::Command::new("chattr")
            .arg(flag)
            .arg(&dir)
            .status()
            .unwrap()
            .success()
    };
    let stored = || {
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect::<Vec<_>>()
    };
    let before = stored();
    assert!(chattr("+i"));
    let second = host_login(&config, &dir).await;
    // The new grant did not reach the store: the file is as the first login left it.
    assert_eq!(stored(), before);
    assert!(chattr("-i"));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&config);
    assert_eq!(
        second,
        (
            Some(1),
            format!(
                "host: login failed: signed in, but the sign-in could not be saved in {} (see the \
                 log with RUST_LOG=warn); the next run asks again\n",
                dir.display()
            )
        )
    );
}

#[tokio::test]
async fn a_configured_header_straddling_the_description_cut_leaves_no_prefix() {
    oauth_store();
    let (_guard, logs) = crate::support::logs::capture("plugin_mcp=trace");
    let (_server, host) = with_key("sk-configured-key-654321", |o| {
        o.code_echo = true;
        // The reason keeps 1021 bytes of the description: 1010 `a`s and 11 bytes of the key.
        o.code_echo_pad = 1010;
    })
    .await;
    let (status, page, reason) = browse_to_failure(&host).await;
    assert_eq!(status, 200);
    // What follows the padding is never a piece of the key.
    assert_eq!(holding([&page, &reason], "aask-conf"), Vec::<&str>::new());
    assert_eq!(logs.lines_with("sk-conf"), Vec::<String>::new());
}

#[tokio::test]
async fn a_redirect_error_straddling_its_cut_leaves_no_prefix_of_a_header() {
    oauth_store();
    let (_guard, logs) = crate::support::logs::capture("plugin_mcp=trace");
    let (server, host) = with_key("sk-configured-key-654321", |_| ()).await;
    let link = Url::parse(&link_in_listing(&host).await).unwrap();
    let query = |name: &str| query(&link, name).unwrap();
    // The authorization server redirects with an `error` that quotes the key after 54
    // characters: the 64 kept end inside it. It names itself (RFC 9207), as it promised.
    let mut redirect = Url::parse(&query("redirect_uri")).unwrap();
    redirect
        .query_pairs_mut()
        .append_pair("state", &query("state"))
        .append_pair("iss", server.base.as_str().trim_end_matches('/'))
        .append_pair(
            "error",
            &format!("{}sk-configured-key-654321", "a".repeat(54)),
        );
    let status = reqwest::get(redirect).await.unwrap().status();
    assert_eq!(status, 200);
    let listing = sign_in_failed(&host).await;
    let reason = listing["servers"][0]["reason"].as_str().unwrap();
    assert_eq!(
        reason.matches("aask-conf").count(),
        0,
        "the reason holds a prefix of the key: {reason}"
    );
    assert_eq!(logs.lines_with("aask-conf"), Vec::<String>::new());
}

#[tokio::test]
async fn a_corrupt_store_file_does_not_drop_a_working_grant() {
    oauth_store();
    let (server, host) = signed_in(Options::default()).await;
    let file = store_file(&server.mcp_url(), "", "docs");
    assert!(file.is_file());
    // Something (a crash of another program, an editor) leaves the file unreadable.
    std::fs::write(&file, "{ not json").unwrap();
    // The access token is refused; the refresh token still works.
    server.expire_access_tokens();
    let answer = call_whoami(&host).await.map_err(|e| e.message);
    assert_eq!(
        (answer, grant_types(&server)),
        (
            Ok("signed in".to_string()),
            vec![
                "authorization_code".to_string(),
                "refresh_token".to_string()
            ]
        )
    );
}

#[tokio::test]
async fn a_granted_step_up_after_each_new_sign_in_is_never_refused() {
    oauth_store();
    let (server, host) = signed_in(step_up_scopes()).await;
    let mut answers = Vec::new();
    for round in 0..3 {
        if round > 0 {
            // The user revoked the grant: the next call signs in again, with the challenge's
            // `mcp:read` only.
            server.revoke_refresh_tokens();
            server.expire_access_tokens();
            assert_eq!(
                call_whoami(&host).await.unwrap_err().kind,
                ToolErrorKind::Unavailable
            );
            let link = link_in_listing(&host).await;
            browse(&host, &link).await;
        }
        // `whoami` needs `mcp:write`: a step-up, granted.
        let refused = call_whoami(&host).await.unwrap_err();
        answers.push(
            match host.listing(json!({"namespace": "docs"})).await["signInUrl"].as_str() {
                Some(link) => {
                    browse(&host, link).await;
                    call_whoami(&host).await.map_err(|e| e.message)
                }
                None => Err(refused.message),
            },
        );
    }
    assert_eq!(answers, vec![Ok("signed in".to_string()); 3]);
}

#[tokio::test]
async fn a_client_id_from_the_environment_still_gets_a_link() {
    oauth_store();
    let server = TestServer::start(Options {
        client: Some(("client-from-env-42", "client-secret-value-778899")),
        ..Options::default()
    })
    .await;
    let oauth = json!({
        "clientId": "${env:DOCS_CLIENT_ID}", "clientSecret": "${env:DOCS_CLIENT_SECRET}"
    });
    let (dir, config) = host_config("env-client", entry_with(&server, "oauth", oauth));
    let env = [
        ("DOCS_CLIENT_ID", "client-from-env-42"),
        ("DOCS_CLIENT_SECRET", "client-secret-value-778899"),
    ];
    let (listing, link) = docs_listing_in_child(&dir, &config, &env).await;
    assert_eq!(
        link.map(|l| query(&l, "client_id")),
        Some(Some("client-from-env-42".to_string())),
        "{listing}"
    );
}

/// Runs `host --wait 3 CONFIG mcp/get_dynamic_tools {"namespace":"docs"}` with the store in
/// `dir` and `env` set in the child's environment only (this test binary's own stays
/// untouched); removes `dir` and `config`; returns docs' listing and its `signInUrl`, parsed.
async fn docs_listing_in_child(
    dir: &std::path::Path,
    config: &std::path::Path,
    env: &[(&str, &str)],
) -> (Value, Option<Url>) {
    let out = host_command(dir)
        .args(["--wait", "3"])
        .arg(config)
        .arg("mcp/get_dynamic_tools")
        .arg(r#"{"namespace":"docs"}"#)
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_file(config);
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let link = listing["signInUrl"]
        .as_str()
        .map(|l| Url::parse(l).unwrap());
    (listing, link)
}

/// A server on 127.0.0.1 whose every answer `route` gives, from the request's method and
/// target and the server's base URL; the MCP endpoint is `<base>/mcp`.
async fn scripted_server(
    route: impl Fn(&str, &str, &str) -> crate::support::hostile::Reply + Send + Sync + 'static,
) -> (crate::support::hostile::Server, String) {
    let listener = crate::support::net::unused_loopback().await;
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let b = base.clone();
    let route = std::sync::Arc::new(route);
    let server = crate::support::hostile::serve_on(listener, move |req| {
        let (base, route) = (b.clone(), route.clone());
        async move { route(&req.http_method, &req.target, &base) }
    });
    (server, base)
}

/// A [`scripted_server`] answering as [`challenge_and_prm`], and every other request with
/// `route(target, base)`.
async fn scripted_behind_prm(
    route: impl Fn(&str, &str) -> crate::support::hostile::Reply + Send + Sync + 'static,
) -> (crate::support::hostile::Server, String) {
    scripted_server(move |method, target, base| {
        challenge_and_prm(method, target, base).unwrap_or_else(|| route(target, base))
    })
    .await
}

/// The `401` of a server whose challenge names `<base>/prm`, and that protected resource
/// metadata naming `<base>` as the authorization server; `None` for other requests.
fn challenge_and_prm(
    method: &str,
    target: &str,
    base: &str,
) -> Option<crate::support::hostile::Reply> {
    use crate::support::hostile::Reply;
    match (method, target) {
        ("POST", "/mcp") => Some(Reply::raw(401, "text/plain", "sign in first").header(
            "www-authenticate",
            &format!("Bearer resource_metadata=\"{base}/prm\""),
        )),
        ("GET", "/prm") => Some(Reply::json(&json!({
            "resource": format!("{base}/mcp"),
            "authorization_servers": [base],
        }))),
        _ => None,
    }
}

/// Authorization server metadata at `base` (with `issuer` unless `None`).
fn server_metadata(base: &str, issuer: Option<&str>) -> Value {
    let mut metadata = json!({
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    });
    if let Some(issuer) = issuer {
        metadata["issuer"] = json!(issuer);
    }
    metadata
}

/// The listing's reason for `docs` at `base` once it settles on an error.
async fn failure_reason(base: &str) -> String {
    let host = Host::new(json!({"docs": {"url": format!("{base}/mcp")}}));
    host.reason_starting(&["signing in failed", "sign-in required"])
        .await
}

/// The link in the listing's reason for `docs` at `base` once it settles on `sign-in required:
/// open <link> ...`.
async fn required_link(base: &str) -> String {
    let reason = failure_reason(base).await;
    let link = reason
        .strip_prefix("sign-in required: open ")
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("no link: {reason}"));
    link.to_string()
}

#[tokio::test]
async fn authorization_server_metadata_without_an_issuer_is_said_to_name_none() {
    use crate::support::hostile::Reply;
    oauth_store();
    let (_server, base) = scripted_behind_prm(|target, base| match target {
        "/.well-known/oauth-authorization-server" => Reply::json(&server_metadata(base, None)),
        _ => Reply::raw(404, "text/plain", "not here"),
    })
    .await;
    assert_eq!(
        failure_reason(&base).await,
        "signing in failed: the authorization server's metadata names no issuer (RFC 8414 §2 \
         requires one); signing in is refused"
    );
}

#[tokio::test]
async fn an_html_page_at_the_first_metadata_url_sends_discovery_on_to_openid() {
    use crate::support::hostile::Reply;
    oauth_store();
    let (server, base) = scripted_behind_prm(|target, base| match target {
        // A web app's catch-all route.
        "/.well-known/oauth-authorization-server" => {
            Reply::raw(200, "text/html", "<!doctype html><html>app</html>")
        }
        "/.well-known/openid-configuration" => Reply::json(&server_metadata(base, Some(base))),
        "/register" => Reply::json(&json!({
            "client_id": "client-html-1",
            "token_endpoint_auth_method": "none",
        })),
        _ => Reply::raw(404, "text/plain", "not here"),
    })
    .await;
    let link = required_link(&base).await;
    assert!(link.starts_with(&format!("{base}/authorize?")), "{link}");
    let gets: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.http_method == "GET")
        .map(|r| r.target.clone())
        .collect();
    assert_eq!(
        gets,
        [
            "/prm",
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration"
        ]
    );
}

/// The reason of a server that answers `401` and offers no OAuth sign-in.
const NO_SIGN_IN: &str = "signing in failed: the server answered HTTP 401 but offers no OAuth \
     sign-in (no protected resource metadata, no authorization server metadata, no registration \
     endpoint); it probably wants an API key or token: set it in the entry's headers";

#[tokio::test]
async fn a_server_that_wants_an_api_key_is_said_to_offer_no_sign_in() {
    use crate::support::hostile::Reply;
    oauth_store();
    let (server, base) = scripted_server(|method, target, _| match (method, target) {
        ("POST", "/mcp") => {
            Reply::raw(401, "text/plain", "missing API key").header("www-authenticate", "Bearer")
        }
        _ => Reply::raw(404, "text/plain", "not here"),
    })
    .await;
    assert_eq!(failure_reason(&base).await, NO_SIGN_IN);
    assert!(
        !server.requests().iter().any(|r| r.target == "/authorize"),
        "no link was made"
    );
}

/// A server that wants an API key may refuse every path `401` with a JSON `error` of its own,
/// the guessed `/register` included: that is no registration error (RFC 7591 §3.2.2), so the
/// server still offers no sign-in, a lasting reason that says to set the key in the headers.
#[tokio::test]
async fn a_server_refusing_every_path_401_in_json_is_said_to_offer_no_sign_in() {
    use crate::support::hostile::Reply;
    oauth_store();
    let (server, base) = scripted_server(|_, _, _| {
        Reply::raw(401, "application/json", r#"{"error":"unauthorized"}"#)
            .header("www-authenticate", "Bearer")
    })
    .await;
    assert_eq!(failure_reason(&base).await, NO_SIGN_IN);
    assert!(
        server.requests().iter().any(|r| r.target == "/register"),
        "the guessed registration endpoint was asked"
    );
}

#[tokio::test]
async fn a_registration_refused_as_invalid_client_metadata_shows_its_description() {
    use crate::support::hostile::Reply;
    oauth_store();
    let (_server, base) = scripted_behind_prm(|target, base| match target {
        "/.well-known/oauth-authorization-server" => {
            Reply::json(&server_metadata(base, Some(base)))
        }
        "/register" => Reply::raw(
            400,
            "application/json",
            json!({"error": "invalid_client_metadata",
                "error_description": "redirect_uris: loopback addresses are not allowed"})
            .to_string(),
        ),
        _ => Reply::raw(404, "text/plain", "not here"),
    })
    .await;
    assert_eq!(
        failure_reason(&base).await,
        "signing in failed: the registration endpoint refused to register a client: HTTP 400 \
         (invalid_client_metadata): redirect_uris: loopback addresses are not allowed"
    );
}

#[tokio::test]
async fn an_unset_variable_in_the_oauth_scopes_refuses_the_entry() {
    oauth_store();
    let server = TestServer::start(Options::default()).await;
    let host = Host::new(entry_with(
        &server,
        "oauth",
        json!({"scopes": ["mcp:read", "${env:PLUGIN_MCP_SIGNIN_SCOPE_NEVER_SET}"]}),
    ));
    let listing = host
        .wait_for(WAIT, |l| l["servers"][0]["status"] == "error")
        .await;
    assert_eq!(
        listing["servers"][0]["reason"],
        "environment variable \"PLUGIN_MCP_SIGNIN_SCOPE_NEVER_SET\" (used in oauth.scopes) is not set",
        "{listing}"
    );
    assert_eq!(server.requests(), Vec::<String>::new(), "nothing was sent");
}

#[tokio::test]
async fn scopes_from_the_environment_reach_the_link() {
    oauth_store();
    let server = TestServer::start(Options::default()).await;
    let oauth = json!({"scopes": "${env:DOCS_SCOPES}"});
    let (dir, config) = host_config("env-scopes", entry_with(&server, "oauth", oauth));
    let env = [("DOCS_SCOPES", "files:read files:write")];
    let (listing, link) = docs_listing_in_child(&dir, &config, &env).await;
    assert_eq!(
        link.map(|l| query(&l, "scope")),
        Some(Some("files:read files:write".to_string())),
        "{listing}"
    );
}

#[tokio::test]
async fn a_refresh_names_the_granted_scopes_so_an_entra_like_server_keeps_them() {
    oauth_store();
    let (server, host) = signed_in(Options {
        refresh_needs_scope: true,
        ..Options::default()
    })
    .await;
    server.expire_access_tokens();
    assert_eq!(call_whoami(&host).await.unwrap(), "signed in");
    assert_eq!(
        token_fields(&server, Some("refresh_token"), "scope"),
        ["mcp:read mcp:write"]
    );
}

#[tokio::test]
async fn a_token_refused_right_after_its_refresh_asks_for_one_sign_in_never_a_loop() {
    oauth_store();
    let (server, host) = signed_in(Options {
        refuse_refreshed: true,
        ..Options::default()
    })
    .await;
    server.expire_access_tokens();
    let refused = call_whoami(&host).await.unwrap_err();
    let link = link_in_listing(&host).await;
    let unavailable = format!("server \"docs\" is unavailable: {}", reason_for(&link));
    assert_eq!(
        (refused.kind, refused.message),
        (ToolErrorKind::Unavailable, unavailable.clone())
    );
    // A second call waits for the same link; nothing is refreshed again.
    let again = call_whoami(&host).await.unwrap_err();
    assert_eq!(again.message, unavailable);
    assert_eq!(
        grant_types(&server),
        ["authorization_code", "refresh_token"]
    );
    // Signing in again makes the server ready with a token it accepts.
    browse(&host, &link).await;
    assert_eq!(call_whoami(&host).await.unwrap(), "signed in");
}

#[tokio::test]
async fn two_entries_with_one_url_sign_in_on_their_own() {
    oauth_store();
    let server = TestServer::start(Options::default()).await;
    let url = server.mcp_url();
    let host = Host::new(json!({
        "work": {"url": url.as_str()},
        "personal": {"url": url.as_str()},
    }));
    let links = host
        .wait_for(WAIT, |l| {
            l["servers"]
                .as_array()
                .is_some_and(|s| s.len() == 2 && s.iter().all(|s| !s["signInUrl"].is_null()))
        })
        .await;
    let link_of = |namespace: &str| {
        links["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["namespace"] == namespace)
            .unwrap()["signInUrl"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (work, personal) = (link_of("work"), link_of("personal"));
    assert_ne!(work, personal);
    // Only the first signs in: the second still waits for its own sign-in.
    assert_eq!(play_browser(&Url::parse(&work).unwrap()).await, 200);
    host.ready("work", WAIT).await;
    let second = host.call_tool("personal", "whoami").await.unwrap_err();
    assert_eq!(
        second.message,
        format!(
            "server \"personal\" is unavailable: {}",
            reason_for(&personal)
        )
    );
    assert_eq!(play_browser(&Url::parse(&personal).unwrap()).await, 200);
    host.ready("personal", WAIT).await;
    let log = server.log.lock().unwrap();
    assert_eq!(log.authorizations.len(), 2, "one sign-in each");
}

#[tokio::test]
async fn a_grant_stored_by_an_older_version_is_claimed_by_one_entry() {
    oauth_store();
    let server = TestServer::start(Options::default()).await;
    let first = Host::new(entry(&server));
    sign_in(&first).await;
    drop(first);
    // The file as an older version named it: keyed by the URL and client alone.
    let legacy = {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        hash.update(server.mcp_url().as_str().as_bytes());
        hash.update([0]);
        let name: String = hash.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        oauth_store().join(format!("{name}.json"))
    };
    let current = store_file(&server.mcp_url(), "", "docs");
    std::fs::rename(&current, &legacy).unwrap();
    let second = Host::new(entry(&server));
    second.ready("docs", WAIT).await;
    assert_eq!(call_whoami(&second).await.unwrap(), "signed in");
    assert!(current.exists() && !legacy.exists());
    assert_eq!(
        server.log.lock().unwrap().authorizations.len(),
        1,
        "no new sign-in"
    );
}

#[tokio::test]
async fn the_resource_goes_out_exactly_as_the_metadata_publishes_it() {
    use crate::support::hostile::Reply;
    oauth_store();
    let (_server, base) = scripted_server(|method, target, base| match (method, target) {
        ("POST", "/mcp") => Reply::raw(401, "text/plain", "sign in first").header(
            "www-authenticate",
            &format!("Bearer resource_metadata=\"{base}/prm\""),
        ),
        // A pathless identifier: a URL parser would write it with a trailing `/`.
        ("GET", "/prm") => Reply::json(&json!({
            "resource": base,
            "authorization_servers": [base],
        })),
        ("GET", "/.well-known/oauth-authorization-server") => {
            Reply::json(&server_metadata(base, Some(base)))
        }
        ("POST", "/register") => Reply::json(&json!({
            "client_id": "client-resource-1",
            "token_endpoint_auth_method": "none",
        })),
        _ => Reply::raw(404, "text/plain", "not here"),
    })
    .await;
    let link = required_link(&base).await;
    assert_eq!(query(&Url::parse(&link).unwrap(), "resource"), Some(base));
}

/// Hands `address` to the Pack's waiting sign-in of `docs` (`mcp/sign_in_redirect`).
pub(crate) async fn paste(host: &Host, address: &str) -> Result<String, runvil_plugin::ToolError> {
    host.call(
        "sign_in_redirect",
        json!({"namespace": "docs", "address": address}),
    )
    .await
}

#[tokio::test]
async fn a_pasted_redirect_address_signs_in_once_and_wrong_ones_are_refused_unquoted() {
    oauth_store();
    let (_capture, logs) = crate::support::logs::capture("trace");
    let (server, host) = not_signed_in().await;
    let refused_before = paste(&host, "http://127.0.0.1:1/callback?code=x&state=y")
        .await
        .unwrap_err();
    assert_eq!(
        refused_before.kind,
        ToolErrorKind::InvalidArguments,
        "{}",
        refused_before.message
    );
    let link = link_in_listing(&host).await;
    assert!(
        refused_before.message.starts_with(
            "server \"docs\" did not take the pasted address: no sign-in of this server is waiting"
        ),
        "{}",
        refused_before.message
    );
    let address = redirect_address(&link).await;
    let url = Url::parse(&address).unwrap();
    let port = url.port().unwrap();
    let code = query(&url, "code").unwrap();
    let state = query(&url, "state").unwrap();
    let not_this = format!(
        "server \"docs\" did not take the pasted address: that is not the address this sign-in \
         waits for: paste the whole address the browser ended on after the latest sign-in link \
         (it begins http://127.0.0.1:{port}/callback?)"
    );
    for wrong in [
        address.replace(&state, "forged-state"),
        address.replacen("127.0.0.1", "localhost", 1),
        format!("{address}#fragment"),
        code.clone(),
    ] {
        let refused = paste(&host, &wrong).await.unwrap_err();
        assert_eq!(
            (refused.kind, refused.message.as_str()),
            (ToolErrorKind::InvalidArguments, not_this.as_str()),
            "{wrong}"
        );
    }
    let missing = host
        .call("sign_in_redirect", json!({"namespace": "docs"}))
        .await
        .unwrap_err();
    assert_eq!(missing.kind, ToolErrorKind::InvalidArguments);
    // Still waiting: the right address is taken, and the server gets ready.
    assert_eq!(
        paste(&host, &format!(" {address}\n")).await.unwrap(),
        r#"{"namespace":"docs","accepted":true}"#
    );
    host.ready("docs", WAIT).await;
    assert_eq!(call_whoami(&host).await.unwrap(), "signed in");
    // Used once: the same address again finds no sign-in waiting.
    let again = paste(&host, &address).await.unwrap_err();
    assert!(
        again
            .message
            .contains("no sign-in of this server is waiting"),
        "{}",
        again.message
    );
    assert_eq!(server.log.lock().unwrap().registrations, 1);
    // The state is in the link the listing shows; the code is the secret.
    let logged = logs.text();
    assert!(!logged.contains(&code), "the log holds the code: {logged}");
    assert!(!again.message.contains(&state));
}

#[tokio::test]
async fn host_login_takes_the_address_pasted_on_stdin() {
    oauth_store();
    let server = TestServer::start(Options::default()).await;
    let (dir, config) = host_config("host-login-paste", entry(&server));
    // A line that is not the address first: refused on stderr, and the wait goes on.
    let outcome = host_login_with(
        &config,
        &dir,
        Some(|address| format!("\nhttp://127.0.0.1:1/elsewhere\n{address}\n")),
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&config);
    let (code, stderr) = outcome;
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with(
            "host: server \"docs\" did not take the pasted address: that is not the address this \
             sign-in waits for"
        ),
        "{stderr}"
    );
    assert_eq!(
        lines[1],
        "host: the address was taken; finishing the sign-in"
    );
}

/// The proofs the server received, as `where METHOD verdict`.
fn proofs(server: &TestServer) -> Vec<String> {
    server.log.lock().unwrap().proofs.clone()
}

/// RFC 9449 §5: an authorization server that takes DPoP may still answer a proved token
/// request with a `Bearer` access token and a refresh token bound to the key. The access token
/// goes as `Bearer` without a proof; every refresh proves the key, in this Pack and in the next
/// one, which reads the key from the store; no refresh falls back to a sign-in.
#[tokio::test]
async fn a_bearer_token_from_a_proved_request_keeps_the_key_for_its_refreshes() {
    oauth_store();
    let (server, host) = signed_in(Options::with_dpop(false, false)).await;
    assert_eq!(call_whoami(&host).await.unwrap(), "signed in");
    assert_eq!(proofs(&server), ["token POST ok"]);
    server.expire_access_tokens();
    assert_eq!(call_whoami(&host).await.unwrap(), "signed in");
    assert_eq!(proofs(&server), ["token POST ok", "token POST ok"]);
    drop(host);
    let stored: Value =
        serde_json::from_slice(&std::fs::read(store_file(&server.mcp_url(), "", "docs")).unwrap())
            .unwrap();
    assert_eq!(stored["grant"]["dpop_refresh_only"], true);
    assert!(stored["grant"]["dpop_key"].is_string());

    server.expire_access_tokens();
    let next = Host::new(entry(&server));
    next.ready("docs", WAIT).await;
    assert_eq!(call_whoami(&next).await.unwrap(), "signed in");
    assert_eq!(
        proofs(&server),
        ["token POST ok", "token POST ok", "token POST ok"]
    );
    assert_eq!(
        grant_types(&server),
        ["authorization_code", "refresh_token", "refresh_token"]
    );
    assert_eq!(server.log.lock().unwrap().authorizations.len(), 1);
    // Every MCP request presented its Bearer token without a proof (a proof would be logged);
    // only the expired tokens were refused.
    assert_eq!(
        trail(&server),
        [
            "initialize no token",
            "initialize access-token-000002",
            "notifications/initialized access-token-000002",
            "tools/list access-token-000002",
            "tools/call access-token-000002",
            "tools/call access-token-000002 (refused)",
            "tools/call access-token-000003",
            "initialize no token",
            "initialize access-token-000003 (refused)",
            "initialize access-token-000004",
            "notifications/initialized access-token-000004",
            "tools/list access-token-000004",
            "tools/call access-token-000004",
        ]
    );
}

/// A `DPoP` access token from a stored grant: a second Pack presents it with proofs of the
/// stored key (the server checks each, `ath` included) without refreshing or signing in.
#[tokio::test]
async fn a_second_pack_proves_the_stored_key_of_a_dpop_grant() {
    oauth_store();
    let (server, host) = signed_in(Options::with_dpop(true, false)).await;
    assert_eq!(call_whoami(&host).await.unwrap(), "signed in");
    drop(host);
    let next = Host::new(entry(&server));
    next.ready("docs", WAIT).await;
    assert_eq!(call_whoami(&next).await.unwrap(), "signed in");
    // The code exchange, then in each Pack initialize, notifications/initialized, tools/list
    // and whoami, each with a proof.
    let mut expected = vec!["token POST ok"];
    expected.extend(["mcp POST ok"; 8]);
    assert_eq!(proofs(&server), expected);
    assert_eq!(grant_types(&server), ["authorization_code"]);
    assert!(
        !trail(&server).iter().any(|t| t.ends_with("(refused)")),
        "{:#?}",
        trail(&server)
    );
}

/// Where a configured client secret may go (docs/sign-in.md, "Where a client secret goes").
mod credential_origin {
    use serde_json::json;

    use super::WAIT;
    use crate::support::hostile::{
        Reply, serve_every_get, standard, text_result, tool, tools_page,
    };
    use crate::support::oauth::{MetadataAt, Options, TestServer};
    use crate::support::{Host, oauth_store};

    const SECRET: &str = "svc-client-secret-0001";

    /// An MCP server on its own port (its own origin) whose protected resource metadata names
    /// `issuer` (another port) as its authorization server; it takes any Bearer token.
    async fn mcp_naming(issuer: String) -> crate::support::hostile::Server {
        serve_every_get(move |req| {
            let issuer = issuer.clone();
            async move {
                let host = req.header("host").unwrap_or_default();
                if req.http_method == "GET" && req.target == "/prm" {
                    return Reply::json(&json!({
                        "resource": format!("http://{host}/mcp"),
                        "authorization_servers": [issuer],
                    }));
                }
                if req.header("authorization").is_none() {
                    return Reply::raw(401, "application/json", "{}").header(
                        "www-authenticate",
                        &format!("Bearer resource_metadata=\"http://{host}/prm\""),
                    );
                }
                if let Some(reply) = standard(&req) {
                    return reply;
                }
                match req.method() {
                    "tools/list" => {
                        Reply::json(&tools_page(&req.id(), vec![tool("t", "T.")], None))
                    }
                    _ => Reply::json(&text_result(&req.id(), "ok")),
                }
            }
        })
        .await
    }

    fn entry(url: &str, authorization_server: Option<&str>) -> serde_json::Value {
        let mut oauth = json!({
            "clientId": "svc", "clientSecret": SECRET, "grantType": "client_credentials"
        });
        if let Some(issuer) = authorization_server {
            oauth["authorizationServer"] = json!(issuer);
        }
        json!({"docs": {"url": url, "oauth": oauth}})
    }

    /// The rule: a configured `oauth.clientSecret` goes to the token endpoint of the
    /// authorization server the server's metadata names (its own metadata vouching for it), as
    /// every MCP client sends a pre-registered client's secret; `oauth.authorizationServer` pins
    /// the issuer: a server naming another gets a refusal naming the key (lasting), and no
    /// request with the secret.
    #[tokio::test]
    async fn a_client_secret_goes_only_to_the_authorization_server_the_entry_names() {
        oauth_store();
        let auth = TestServer::start(Options {
            metadata: MetadataAt::OAuthRoot,
            client: Some(("svc", SECRET)),
            auth_methods: vec!["client_secret_basic"],
            ..Options::default()
        })
        .await;
        let issuer = auth.base.as_str().trim_end_matches('/').to_string();
        let mcp = mcp_naming(issuer.clone()).await;

        let host = Host::new(entry(&mcp.url, Some(PINNED_ELSEWHERE)));
        let failed = host.failed("docs", WAIT).await;
        let reason = failed["reason"].as_str().unwrap_or_default().to_string();
        assert!(
            reason.contains(&format!(
                "the server's metadata names the authorization server {issuer}, not the \
                 oauth.authorizationServer of this entry, so oauth.clientSecret is not sent there"
            )),
            "{failed}"
        );
        assert_eq!(failed["lasting"], true, "{failed}");
        assert!(!reason.contains(SECRET), "{failed}");
        drop(host);
        assert_eq!(auth.log.lock().unwrap().token_requests.len(), 0);

        for pinned in [None, Some(issuer.as_str())] {
            let host = Host::new(entry(&mcp.url, pinned));
            host.ready("docs", WAIT).await;
            drop(host);
        }
        let requests = auth.log.lock().unwrap().token_requests.clone();
        assert_eq!(requests.len(), 2, "{requests:?}");
        assert_eq!(requests[1]["auth"], "client_secret_basic");
    }

    /// An issuer pinned in the tests above that no server names (loopback, never asked).
    const PINNED_ELSEWHERE: &str = "http://127.0.0.1:9";

    /// The refusal is lasting (only the config can change it): `host login` stops at once
    /// with it instead of waiting out `--wait` (the listing's `lasting`).
    #[tokio::test]
    async fn host_login_stops_at_once_at_a_secret_bound_for_another_origin() {
        oauth_store();
        let auth = TestServer::start(Options {
            client: Some(("svc", SECRET)),
            ..Options::default()
        })
        .await;
        let issuer = auth.base.as_str().trim_end_matches('/').to_string();
        let mcp = mcp_naming(issuer).await;
        let (dir, config) =
            super::host_config("credential-origin", entry(&mcp.url, Some(PINNED_ELSEWHERE)));
        let started = std::time::Instant::now();
        let out = tokio::process::Command::new(crate::support::host_cli::host_example())
            .args(["login", "--wait", "60"])
            .arg(&config)
            .arg("docs")
            .env("PLUGIN_MCP_OAUTH_DIR", &dir)
            .env_remove("RUST_LOG")
            .output()
            .await
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(&config);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.starts_with(
                "host: login failed: signing in failed: the server's metadata names the \
                 authorization server http://127.0.0.1:"
            ),
            "{stderr}"
        );
        assert!(!stderr.contains(SECRET), "{stderr}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{stderr}"
        );
        assert_eq!(auth.log.lock().unwrap().token_requests.len(), 0);
    }
}

/// A guessed registration endpoint's refusals.
mod guessed_registration {
    use serde_json::json;

    use crate::support::Host;
    use crate::support::hostile::{self, Reply};

    /// A server with no sign-in metadata whose guessed `/register` (MCP 2025-03-26's default
    /// endpoints) exists but is closed answers `403` with an OAuth error object and a description
    /// (`access_denied`: registration is disabled). That is a registration endpoint refusing, and
    /// the reason says so, keeping its description (a pre-registered `oauth.clientId` is what is
    /// needed), never that the server "probably wants an API key".
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
}
