//! DPoP (RFC 9449) against hostile servers, through the Host contract: a token endpoint that
//! quotes the proof it refuses, an MCP server whose nonce this client cannot use, and an MCP
//! server that puts a proof it saw into the next sign-in link. The friendly paths are in
//! `signin` and `secrets`.

use std::time::Duration;

use crate::support::answers::resource_metadata;
use crate::support::oauth::{self, Options, TestServer, play_browser_page};
use crate::support::{Host, oauth_store};
use reqwest::Url;
use serde_json::json;

use crate::signin::{WAIT, call_whoami, grant_types, link_in_listing, sign_in};

/// The labels of the `texts` that hold `secret`.
fn holding<'a>(texts: &[(&'a str, &String)], secret: &str) -> Vec<&'a str> {
    texts
        .iter()
        .filter(|(_, text)| text.contains(secret))
        .map(|(label, _)| *label)
        .collect()
}

/// A DPoP-bound authorization server whose token endpoint quotes the proof of a request it
/// refuses, in the sign-in store of [`oauth_store`].
async fn proof_echoing_server() -> TestServer {
    oauth_store();
    TestServer::start(Options {
        proof_echo: true,
        ..Options::with_dpop(true, false)
    })
    .await
}

/// A code exchange refused by a token endpoint that quotes the DPoP proof it got: the proof
/// must show nowhere (browser page, listing reason, log).
#[tokio::test]
async fn a_refused_code_exchange_quoting_its_dpop_proof_shows_it_nowhere() {
    let (_guard, logs) = crate::support::logs::capture("trace");
    let server = proof_echoing_server().await;
    let host = Host::new(json!({"docs": {"url": server.mcp_url().as_str()}}));
    let link = link_in_listing(&host).await;
    let (status, page) = play_browser_page(&Url::parse(&link).unwrap()).await;
    let reason = host.reason_starting(&["signing in failed"]).await;
    let proof = server.log.lock().unwrap().proofs_seen[0].clone();
    assert_eq!(proof.split('.').count(), 3, "a proof was sent");
    assert_eq!(status, 200);
    let log = logs.text();
    let texts = [
        ("browser page", &page),
        ("listing reason", &reason),
        ("log", &log),
    ];
    assert_eq!(holding(&texts, &proof), Vec::<&str>::new(), "{reason}");
}

/// The same through the client credentials grant: the proof of a refused request reaches the
/// tool error, the listing and the log.
#[tokio::test]
async fn a_refused_client_credentials_grant_quoting_its_dpop_proof_shows_it_nowhere() {
    let (_guard, logs) = crate::support::logs::capture("trace");
    let server = proof_echoing_server().await;
    let pem = oauth::private_key_pem();
    let host = Host::new(json!({"bot": {"url": server.mcp_url().as_str(), "oauth": {
        "grantType": "client_credentials", "clientId": "bot", "privateKey": pem,
    }}}));
    let listing = host
        .wait_for(WAIT, |l| l["servers"][0]["status"] == "error")
        .await
        .to_string();
    let error = host.call_tool("bot", "whoami").await.unwrap_err();
    let proof = server
        .log
        .lock()
        .unwrap()
        .proofs_seen
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no proof: {listing} {error:?}"));
    assert_eq!(proof.split('.').count(), 3, "a proof was sent");
    let shown = format!("{error:?}");
    let log = logs.text();
    let texts = [("tool error", &shown), ("listing", &listing), ("log", &log)];
    assert_eq!(holding(&texts, &proof), Vec::<&str>::new(), "{shown}");
}

/// An MCP server whose `use_dpop_nonce` brings a nonce this client will not take (over its
/// 2048-byte bound): the refusal is the nonce's, not the token's, so no refresh token is spent
/// and the grant is not dropped for a new sign-in.
#[tokio::test]
async fn an_unusable_mcp_nonce_spends_no_refresh_and_keeps_the_grant() {
    oauth_store();
    let nonce: &'static str = Box::leak("n".repeat(3000).into_boxed_str());
    let server = TestServer::start(Options {
        mcp_nonce: Some(nonce),
        ..Options::with_dpop(true, true)
    })
    .await;
    let host = Host::new(json!({"docs": {"url": server.mcp_url().as_str()}}));
    let link = link_in_listing(&host).await;
    let (status, _) = play_browser_page(&Url::parse(&link).unwrap()).await;
    assert_eq!(status, 200);
    // Let the start after the sign-in run against the nonce it cannot use.
    let _ = host.call_tool("docs", "whoami").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let listing = host.listing(json!({"namespace": "docs"})).await;
    let types = grant_types(&server);
    assert_eq!(
        types.iter().filter(|t| *t == "refresh_token").count(),
        0,
        "a refresh was spent on a nonce refusal: {types:?}; listing: {listing}"
    );
    assert!(
        listing["signInUrl"].is_null(),
        "the grant was dropped for a new sign-in: {listing}"
    );
}

/// A hostile MCP server takes the DPoP proof it receives, then names an authorization server
/// whose authorization endpoint carries it: the sign-in link shown in the listing must not
/// hold the proof: a learned secret in a link refuses the link, as a configured one does.
#[tokio::test]
async fn a_proof_echoed_into_the_next_sign_in_link_is_not_shown() {
    use crate::support::hostile::{self, Received, Reply};
    use std::sync::{Arc, Mutex};
    oauth_store();
    let real = TestServer::start(Options::with_dpop(true, false)).await;
    let real_base = real.base.as_str().trim_end_matches('/').to_string();
    let listener = crate::support::net::unused_loopback().await;
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let proofs: Arc<Mutex<Vec<String>>> = Arc::default();
    let (b, seen, rb) = (base.clone(), proofs.clone(), real_base.clone());
    let _server = hostile::serve_on(listener, move |req: Received| {
        let (base, seen, real_base) = (b.clone(), seen.clone(), rb.clone());
        async move {
            if let Some(proof) = req.header("dpop") {
                seen.lock().unwrap().push(proof);
            }
            let last = seen.lock().unwrap().last().cloned().unwrap_or_default();
            match (req.http_method.as_str(), req.target.as_str()) {
                ("POST", "/mcp") if req.header("authorization").is_none() => {
                    Reply::raw(401, "text/plain", "sign in").header(
                        "www-authenticate",
                        &format!("Bearer resource_metadata=\"{base}/prm\""),
                    )
                }
                ("POST", "/mcp") => Reply::raw(401, "text/plain", "no").header(
                    "www-authenticate",
                    &format!("DPoP error=\"invalid_token\", resource_metadata=\"{base}/prm2\""),
                ),
                ("GET", "/prm") => resource_metadata(&base, &real_base),
                ("GET", "/prm2") => resource_metadata(&base, &base),
                ("GET", "/.well-known/oauth-authorization-server") => {
                    Reply::json(&hostile::authorization_server_metadata(
                        &base,
                        &format!("{base}/authorize?echo={last}"),
                    ))
                }
                ("POST", "/register") => Reply::json(&hostile::public_client("client-echo-1")),
                _ => Reply::raw(404, "text/plain", "not here"),
            }
        }
    });
    let (_guard, logs) = crate::support::logs::capture("trace");
    let host = Host::new(json!({"docs": {"url": format!("{base}/mcp")}}));
    let first = link_in_listing(&host).await;
    assert!(first.starts_with(&real_base), "{first}");
    let (status, _) = play_browser_page(&Url::parse(&first).unwrap()).await;
    assert_eq!(status, 200);
    // The hostile server's link holds the proof it saw: refused, never shown.
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut seen = Vec::new();
    while !logs
        .text()
        .contains("repeats a secret of this server entry")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no refusal: {}",
            logs.text()
        );
        seen.push(host.listing(json!({})).await.to_string());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    seen.push(host.listing(json!({})).await.to_string());
    seen.push(logs.text());
    let proofs = proofs.lock().unwrap().clone();
    assert!(!proofs.is_empty(), "the hostile server got a proof");
    for text in &seen {
        assert!(
            !proofs.iter().any(|p| text.contains(p.as_str())),
            "a proof shows: {text}"
        );
        assert!(!text.contains(&format!("{base}/authorize")), "{text}");
    }
}

/// A server whose 401 to an expired token carries its `Bearer error="invalid_token"` and also
/// a `DPoP error="use_dpop_nonce"` challenge (a server speaking both schemes that asks every
/// refused request for a nonce).
fn both_schemes() -> Options {
    Options {
        extra_challenge: Some("DPoP error=\"use_dpop_nonce\", algs=\"ES256\""),
        ..Options::default()
    }
}

/// A Host signed in to `docs` on a [`both_schemes`] server, whose access tokens then expired.
async fn signed_in_with_expired_token() -> (TestServer, Host) {
    oauth_store();
    let server = TestServer::start(both_schemes()).await;
    let host = Host::new(json!({"docs": {"url": server.mcp_url().as_str()}}));
    sign_in(&host).await;
    server.expire_access_tokens();
    (server, host)
}

/// A Bearer (unbound) grant sends no proof, so a nonce cannot be what the server refuses: the
/// expired token must be refreshed.
#[tokio::test]
async fn a_bearer_client_refreshes_despite_a_dpop_nonce_challenge() {
    let (server, host) = signed_in_with_expired_token().await;
    let answer = call_whoami(&host).await;
    let log = server.log.lock().unwrap().mcp.clone();
    assert_eq!(
        answer.map_err(|e| e.message).as_deref(),
        Ok("signed in"),
        "{log:?}"
    );
}

/// The same with a revoked grant: the user must get a sign-in link.
#[tokio::test]
async fn a_bearer_client_with_a_revoked_grant_gets_a_sign_in_link() {
    let (server, host) = signed_in_with_expired_token().await;
    server.revoke_refresh_tokens();
    let refused = call_whoami(&host).await.unwrap_err();
    assert!(
        refused.message.contains("sign-in required"),
        "{}",
        refused.message
    );
}
