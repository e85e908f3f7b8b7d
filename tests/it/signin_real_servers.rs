//! Signing in and out against what real authorization servers send, through the Host contract:
//! a grant of a switched-off entry can still be deleted, an `expires_in` written as digits, an
//! OAuth error sent with HTTP 200, and the RFC 9207 `iss` of a server known only by the
//! protected resource metadata (README "Signing in").

use std::time::Duration;

use reqwest::Url;
use serde_json::{Value, json};

use crate::support::Host;
use crate::support::oauth::{MetadataAt, Options, TestServer, play_browser, play_browser_page};

const WAIT: Duration = Duration::from_secs(10);

/// The store file README "Signing in" names for the server at `url` with no client: the first
/// 16 bytes of SHA-256 over the URL and a NUL, in hex, plus `.json`.
fn store_file(url: &str) -> std::path::PathBuf {
    use sha2::{Digest, Sha256};
    let url = url::Url::parse(url).unwrap();
    let mut hash = Sha256::new();
    hash.update(url.as_str().as_bytes());
    hash.update([0]);
    let name: String = hash.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    crate::support::oauth_store().join(format!("{name}.json"))
}

/// A user who switches a signed-in server off (`"disabled": true`, README "Configuration")
/// and then signs out can: the store key needs only the url and the client, both still in the
/// entry, so `mcp/logout` deletes the grant of a refused entry whose url and `oauth` read.
#[tokio::test]
async fn logout_deletes_the_grant_of_a_disabled_entry() {
    let cases = [
        (
            "off",
            json!({"url": "http://127.0.0.1:9/review-disabled/mcp", "disabled": true}),
        ),
        // The variable is unset: the header is refused, the url and client are as above.
        (
            "unset",
            json!({"url": "http://127.0.0.1:9/review-unset/mcp",
            "headers": {"X-Key": "${env:PLUGIN_MCP_REVIEW_NEVER_SET}"}}),
        ),
    ];
    let servers: serde_json::Map<String, Value> = cases
        .iter()
        .map(|(n, e)| (n.to_string(), e.clone()))
        .collect();
    let host = Host::new(Value::Object(servers));
    for (namespace, entry) in &cases {
        let file = store_file(entry["url"].as_str().unwrap());
        std::fs::write(&file, "{}").unwrap();
        let outcome = host
            .pack
            .call("mcp/logout", json!({"namespace": namespace}))
            .await;
        let gone = !file.exists();
        let _ = std::fs::remove_file(&file);
        assert_eq!(
            outcome,
            Ok(json!({"namespace": namespace, "deleted": true}).to_string()),
            "{namespace}"
        );
        assert!(gone, "{namespace}: the grant is still stored");
        // Nothing left: said so, not an error.
        let again = host
            .pack
            .call("mcp/logout", json!({"namespace": namespace}))
            .await;
        assert_eq!(
            again,
            Ok(json!({"namespace": namespace, "deleted": false}).to_string())
        );
    }
    // An entry that cannot have signed in as written (no url) is still refused.
    let local = Host::new(json!({"local": {"command": "npx"}}));
    let refused = local
        .pack
        .call("mcp/logout", json!({"namespace": "local"}))
        .await
        .unwrap_err();
    assert_eq!(refused.kind, runvil_plugin::ToolErrorKind::Unavailable);
}

/// Plays the browser for the listing's sign-in link; answers the status and page it got.
async fn browse(host: &Host) -> (u16, String) {
    let listing = host
        .wait_for(WAIT, |l| !l["servers"][0]["signInUrl"].is_null())
        .await;
    let link = listing["servers"][0]["signInUrl"].as_str().unwrap();
    play_browser_page(&Url::parse(link).unwrap()).await
}

#[tokio::test]
async fn an_expires_in_written_as_digits_or_unreadable_still_signs_in() {
    for text in ["3600", "soon"] {
        let server = TestServer::start(Options {
            expires_in_text: Some(text),
            ..Options::default()
        })
        .await;
        let host = Host::new(json!({"docs": {"url": server.mcp_url().as_str()}}));
        let listing = host
            .wait_for(WAIT, |l| !l["servers"][0]["signInUrl"].is_null())
            .await;
        let link = listing["servers"][0]["signInUrl"].as_str().unwrap();
        assert_eq!(
            play_browser(&Url::parse(link).unwrap()).await,
            200,
            "{text}"
        );
        host.ready("docs", WAIT).await;
        assert!(host.call_tool("docs", "whoami").await.is_ok(), "{text}");
    }
}

#[tokio::test]
async fn an_oauth_error_sent_with_http_200_names_its_code_and_description() {
    let server = TestServer::start(Options {
        token_ok_error: Some((
            "bad_verification_code",
            "The code passed is incorrect or expired.",
        )),
        ..Options::default()
    })
    .await;
    let host = Host::new(json!({"docs": {"url": server.mcp_url().as_str()}}));
    let (status, page) = browse(&host).await;
    let reason = host.reason_starting(&["signing in failed"]).await;
    let said = "the token endpoint refused the request (bad_verification_code): The code passed is incorrect or expired.";
    assert!(reason.contains(said), "{reason}");
    assert!(page.contains(said), "{status}: {page}");
}

#[tokio::test]
async fn a_redirect_from_another_issuer_is_refused_when_the_server_publishes_no_metadata() {
    let server = TestServer::start(Options {
        metadata: MetadataAt::Nowhere,
        wrong_iss: Some("http://127.0.0.1:1"),
        ..Options::default()
    })
    .await;
    let host = Host::new(json!({"docs": {"url": server.mcp_url().as_str()}}));
    let (status, page) = browse(&host).await;
    assert_eq!(status, 400, "{page}");
    let listing = host.listing(json!({"namespace": "docs"})).await;
    assert_ne!(listing["status"], "ready", "{listing}");
    // The issuer the resource metadata names is accepted.
    let server = TestServer::start(Options {
        metadata: MetadataAt::Nowhere,
        ..Options::default()
    })
    .await;
    let host = Host::new(json!({"docs": {"url": server.mcp_url().as_str()}}));
    let (status, page) = browse(&host).await;
    assert_eq!(status, 200, "{page}");
    host.ready("docs", WAIT).await;
}
