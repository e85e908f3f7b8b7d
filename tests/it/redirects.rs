//! Sign-in redirects and links checked as received, through the Host contract: every value a
//! redirect carries (RFC 6749 §3.1, §4.1.2; RFC 9207 §2.4) and every part of a sign-in link is
//! checked as it arrives or as it would be shown, never an edited or partial view of it.
//!
//! - A redirect is refused, and the sign-in stays open, when it repeats a parameter, carries the
//!   wrong `state`, names another issuer than the authorization server's (or none where its
//!   metadata promises one), or carries not exactly one of a code and an error, an empty
//!   parameter counting as omitted. The genuine redirect that follows is accepted, at the
//!   loopback listener and pasted (`mcp/sign_in_redirect`) alike.
//! - A link holding a configured secret anywhere (also one that contains the entry's client id,
//!   or percent-encoded) is refused and never shown.

use reqwest::Url;
use runvil_plugin::ToolErrorKind;
use serde_json::{Value, json};

use crate::signin::{WAIT, call_whoami, grant_types, link_in_listing, paste};
use crate::support::answers::key_echoing_sign_in;
use crate::support::oauth::{Options, TestServer};
use crate::support::{Host, logs, oauth_store};

const SIGNED_IN: &str = "<!doctype html><meta charset=utf-8><title>Signed in</title>\
<p>Signed in. You can close this tab and go back to your assistant.</p>";
const WRONG_STATE: &str = "<!doctype html><meta charset=utf-8><title>Not this sign-in</title>\
<p>This answer does not belong to the sign-in that is waiting. Use the latest sign-in link.</p>";
const WRONG_ISSUER: &str = "<!doctype html><meta charset=utf-8><title>Not this authorization \
server</title><p>This answer does not name the authorization server the sign-in waits for. Use \
the latest sign-in link.</p>";
const MALFORMED: &str = "<!doctype html><meta charset=utf-8><title>Not a sign-in answer</title>\
<p>This answer does not carry exactly one code or one error, each parameter once. Use the \
latest sign-in link.</p>";

fn reason_for(link: &str) -> String {
    format!(
        "sign-in required: open {link} in a browser and sign in; the server starts once the sign-in completes"
    )
}

/// A sign-in waiting at the default test server: the server, its Host, the link the listing
/// shows and the genuine redirect the authorization endpoint answers it with (its code not yet
/// delivered).
struct Waiting {
    server: TestServer,
    host: Host,
    link: String,
    redirect: Url,
}

impl Waiting {
    async fn start() -> Waiting {
        oauth_store();
        let server = TestServer::start(Options::default()).await;
        let host = Host::new(json!({"docs": {"url": server.mcp_url().as_str()}}));
        let link = link_in_listing(&host).await;
        let redirect = Url::parse(&redirect_of(&link).await).unwrap();
        Waiting {
            server,
            host,
            link,
            redirect,
        }
    }

    /// The genuine redirect's parameter `name`, form-urlencoded as the redirect carries it.
    fn param(&self, name: &str) -> String {
        let value = self
            .redirect
            .query_pairs()
            .find(|(n, _)| n == name)
            .unwrap()
            .1
            .into_owned();
        url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
    }

    /// The listener's address with `query` as it is written (`{code}`, `{state}` and `{iss}`
    /// replaced by the genuine redirect's values).
    fn address(&self, query: &str) -> String {
        let query = query
            .replace("{code}", &self.param("code"))
            .replace("{state}", &self.param("state"))
            .replace("{iss}", &self.param("iss"));
        let mut callback = self.redirect.clone();
        callback.set_query(None);
        format!("{callback}?{query}")
    }

    /// The sign-in still waits for the same link, no code went to the token endpoint, and the
    /// listing blames nobody.
    async fn still_waits(&self, after: &str) {
        let entry = self.host.listing(json!({"namespace": "docs"})).await;
        assert_eq!(
            (&entry["signInUrl"], &entry["reason"]),
            (&json!(self.link), &json!(reason_for(&self.link))),
            "after {after}"
        );
        assert_eq!(
            grant_types(&self.server),
            Vec::<String>::new(),
            "after {after}"
        );
    }

    /// The genuine redirect is then accepted: the server gets ready with one code exchange,
    /// whose PKCE verifier the test server checks.
    /// Pastes `address`, which the sign-in accepts, and goes on as [`Waiting::then_signs_in`].
    async fn accepts(&self, address: &str) {
        assert_eq!(
            paste(&self.host, address).await.unwrap(),
            r#"{"namespace":"docs","accepted":true}"#
        );
        self.then_signs_in().await;
    }

    async fn then_signs_in(&self) {
        self.host.ready("docs", WAIT).await;
        assert_eq!(call_whoami(&self.host).await.unwrap(), "signed in");
        assert_eq!(grant_types(&self.server), ["authorization_code"]);
    }
}

/// Where the authorization endpoint sends the browser for `link` (not followed).
async fn redirect_of(link: &str) -> String {
    let answer = browser().get(link).send().await.unwrap();
    assert_eq!(answer.status().as_u16(), 302);
    answer.headers()["location"].to_str().unwrap().to_string()
}

fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Delivers `address` to the loopback listener as the browser does: its status and page.
async fn deliver(address: &str) -> (u16, String) {
    let page = browser().get(address).send().await.unwrap();
    (page.status().as_u16(), page.text().await.unwrap())
}

/// RFC 9207 §2.4: an `error` redirect naming another issuer is refused like a code from one.
/// The listing keeps the link and never blames the authorization server for the error, and the
/// genuine redirect that follows signs in.
#[tokio::test]
async fn an_error_redirect_from_another_issuer_leaves_the_sign_in_open() {
    let waiting = Waiting::start().await;
    let forged =
        waiting.address("error=access_denied&state={state}&iss=https%3A%2F%2Fevil.example");
    assert_eq!(deliver(&forged).await, (400, WRONG_ISSUER.to_string()));
    waiting.still_waits("an error from another issuer").await;
    let genuine = waiting.address("code={code}&state={state}&iss={iss}");
    assert_eq!(deliver(&genuine).await, (200, SIGNED_IN.to_string()));
    waiting.then_signs_in().await;
}

/// RFC 6749 §3.1: an empty `code` counts as omitted. No token request goes out, the PKCE
/// verifier is kept for the genuine redirect that follows, and the sign-in stays open.
#[tokio::test]
async fn an_empty_code_sends_no_token_request_and_leaves_the_sign_in_open() {
    let waiting = Waiting::start().await;
    let empty = waiting.address("code=&state={state}&iss={iss}");
    assert_eq!(deliver(&empty).await, (400, MALFORMED.to_string()));
    waiting.still_waits("an empty code").await;
    assert_eq!(
        waiting
            .server
            .requests()
            .iter()
            .filter(|r| r.ends_with("/token"))
            .count(),
        0
    );
    let genuine = waiting.address("code={code}&state={state}&iss={iss}");
    assert_eq!(deliver(&genuine).await, (200, SIGNED_IN.to_string()));
    waiting.then_signs_in().await;
}

/// Redirects the listener and the paste path refuse, with the page the browser is shown; the
/// sign-in stays open after each. `{code}`, `{state}`, `{iss}`: the genuine values.
const REFUSED: [(&str, &str); 16] = [
    // RFC 9207 §2.4: an error from another issuer is refused like a code from one.
    (
        "error=access_denied&state={state}&iss=https%3A%2F%2Fevil.example",
        WRONG_ISSUER,
    ),
    (
        "code={code}&state={state}&iss=https%3A%2F%2Fevil.example",
        WRONG_ISSUER,
    ),
    // The metadata promises `iss` (authorization_response_iss_parameter_supported).
    ("error=access_denied&state={state}", WRONG_ISSUER),
    ("code={code}&state={state}", WRONG_ISSUER),
    ("error=access_denied&state={state}&iss=", WRONG_ISSUER),
    ("code={code}&state={state}&iss={iss}%2F", WRONG_ISSUER),
    // RFC 6749 §3.1: an empty parameter is omitted; none is sent twice.
    ("code=&state={state}&iss={iss}", MALFORMED),
    ("code=&error=&state={state}&iss={iss}", MALFORMED),
    ("code={code}&code={code}&state={state}&iss={iss}", MALFORMED),
    (
        "code={code}&state={state}&state={state}&iss={iss}",
        MALFORMED,
    ),
    ("code={code}&state={state}&iss={iss}&iss={iss}", MALFORMED),
    (
        "code={code}&state={state}&iss={iss}&iss=https%3A%2F%2Fevil.example",
        MALFORMED,
    ),
    (
        "error=access_denied&error=server_error&state={state}&iss={iss}",
        MALFORMED,
    ),
    // RFC 6749 §4.1.2 and §4.1.2.1: a code or an error, not both.
    (
        "code={code}&error=access_denied&state={state}&iss={iss}",
        MALFORMED,
    ),
    ("code={code}&state=&iss={iss}", WRONG_STATE),
    ("code={code}&iss={iss}", WRONG_STATE),
];

#[tokio::test]
async fn redirects_the_listener_refuses_leave_the_sign_in_open_for_the_genuine_one() {
    let (_capture, logs) = logs::capture("trace");
    let waiting = Waiting::start().await;
    for (query, page) in REFUSED {
        let address = waiting.address(query);
        assert_eq!(deliver(&address).await, (400, page.to_string()), "{query}");
        waiting.still_waits(query).await;
    }
    let genuine = waiting.address("code={code}&state={state}&iss={iss}");
    assert_eq!(deliver(&genuine).await, (200, SIGNED_IN.to_string()));
    waiting.then_signs_in().await;
    let logged = logs.text();
    let code = waiting.param("code");
    assert!(!logged.contains(&code), "the log holds the code: {logged}");
    let warned = logs.lines_with(" WARN plugin_mcp::auth::callback: a sign-in redirect");
    assert_eq!(
        warned.len(),
        REFUSED.len(),
        "one warning per refused redirect: {warned:#?}"
    );
}

#[tokio::test]
async fn pasted_addresses_are_checked_as_the_listener_checks_redirects() {
    let waiting = Waiting::start().await;
    let port = waiting.redirect.port().unwrap();
    let not_this = format!(
        "server \"docs\" did not take the pasted address: that is not the address this sign-in \
         waits for: paste the whole address the browser ended on after the latest sign-in link \
         (it begins http://127.0.0.1:{port}/callback?)"
    );
    for (query, _) in REFUSED {
        let refused = paste(&waiting.host, &waiting.address(query))
            .await
            .unwrap_err();
        assert_eq!(
            (refused.kind, refused.message.as_str()),
            (ToolErrorKind::InvalidArguments, not_this.as_str()),
            "{query}"
        );
        waiting.still_waits(query).await;
    }
    // An empty `error` counts as omitted (RFC 6749 §3.1): this is the genuine redirect.
    let genuine = waiting.address("error=&code={code}&state={state}&iss={iss}");
    waiting.accepts(&genuine).await;
}

/// A pasted address is checked as received, like the listener's `Host` and path: another
/// spelling of the loopback host (`127.1`, `0x7f.0.0.1`, `2130706433`), a dot segment, a
/// backslash, a tab inside the query or a fragment is refused — a URL parser would have
/// rewritten each into the awaited redirect — and the genuine address is still taken.
#[tokio::test]
async fn a_pasted_address_is_not_rewritten_before_it_is_checked() {
    let waiting = Waiting::start().await;
    let port = waiting.redirect.port().unwrap();
    let query = waiting.redirect.query().unwrap().to_string();
    let not_this = format!(
        "server \"docs\" did not take the pasted address: that is not the address this sign-in \
         waits for: paste the whole address the browser ended on after the latest sign-in link \
         (it begins http://127.0.0.1:{port}/callback?)"
    );
    let rewritten = [
        format!("http://127.1:{port}/callback?{query}"),
        format!("http://0x7f.0.0.1:{port}/callback?{query}"),
        format!("http://2130706433:{port}/callback?{query}"),
        format!("http://127.0.0.1:{port}/x/../callback?{query}"),
        format!("http:\\\\127.0.0.1:{port}\\callback?{query}"),
        format!("HTTP://127.0.0.1:{port}/callback?{query}"),
        format!(
            "http://127.0.0.1:{port}/callback?{}",
            query.replacen('=', "=\t", 1)
        ),
        format!("http://127.0.0.1:{port}/callback?{query}#x"),
        format!("http://127.0.0.1:{port}/callbackx?{query}"),
    ];
    for address in &rewritten {
        let refused = paste(&waiting.host, address).await.unwrap_err();
        assert_eq!(
            (refused.kind, refused.message.as_str()),
            (ToolErrorKind::InvalidArguments, not_this.as_str()),
            "{address}"
        );
        waiting.still_waits(address).await;
    }
    let genuine = format!("  http://127.0.0.1:{port}/callback?{query}\n");
    waiting.accepts(&genuine).await;
}

#[tokio::test]
async fn an_error_from_the_authorization_server_itself_still_ends_the_sign_in() {
    let waiting = Waiting::start().await;
    let address = waiting.address("error=access_denied&state={state}&iss={iss}");
    assert_eq!(
        deliver(&address).await,
        (
            200,
            "<!doctype html><meta charset=utf-8><title>Sign-in failed</title>\
<p>The sign-in did not complete. Ask your assistant for a new sign-in link.</p>"
                .to_string()
        )
    );
    let listing = waiting
        .host
        .wait_for(WAIT, |l| l["servers"][0]["signInUrl"].is_null())
        .await;
    assert_eq!(
        listing["servers"][0]["reason"],
        "signing in failed: the authorization server did not grant access (access_denied)"
    );
    assert_eq!(grant_types(&waiting.server), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// the link, as it would be shown

/// The entry's client id, and a configured header secret that contains it.
const CLIENT_ID: &str = "docs-app";
const KEY: &str = "docs-app-4f9a8b7c6d5e";

/// What the Host shows of a sign-in at a hostile authorization server whose authorization
/// endpoint `endpoint(base, key)` makes from the `X-Api-Key` value the MCP endpoint received:
/// the `docs` entry of the listing once it shows an error, and every text shown (the listing,
/// the call's error, the log at trace level).
async fn shown_for(endpoint: Endpoint) -> (Value, [String; 3]) {
    oauth_store();
    let (_capture, logs) = logs::capture("trace");
    let (_server, base) = key_echoing_sign_in(endpoint).await;
    let host = Host::new(json!({"docs": {
        "url": format!("{base}/mcp"),
        "headers": {"X-Api-Key": KEY},
        "oauth": {"clientId": CLIENT_ID},
    }}));
    let entry = host.failed("docs", WAIT).await;
    let call = host.call_tool("docs", "x").await;
    drop(host);
    let shown = [entry.to_string(), format!("{call:?}"), logs.text()];
    (entry, shown)
}

/// Makes the authorization endpoint from the server's base URL and the key it received.
type Endpoint = fn(&str, &str) -> String;

/// Every byte of `text` percent-encoded, letters and digits too.
fn every_byte_encoded(text: &str) -> String {
    text.bytes().map(|b| format!("%{b:02X}")).collect()
}

#[tokio::test]
async fn a_link_holding_a_header_secret_that_contains_the_client_id_is_never_shown() {
    let endpoints: [(&str, Endpoint); 4] = [
        ("in the query", |base, key| {
            format!("{base}/authorize?tenant={key}")
        }),
        ("in the path", |base, key| format!("{base}/authorize/{key}")),
        ("every byte percent-encoded", |base, key| {
            format!("{base}/authorize?tenant={}", every_byte_encoded(key))
        }),
        ("the client id's part percent-encoded", |base, key| {
            let rest = key.strip_prefix(CLIENT_ID).unwrap();
            format!(
                "{base}/authorize?tenant={}{rest}",
                every_byte_encoded(CLIENT_ID)
            )
        }),
    ];
    for (place, endpoint) in endpoints {
        let (entry, shown) = shown_for(endpoint).await;
        assert_eq!(
            (&entry["signInUrl"], &entry["reason"]),
            (
                &Value::Null,
                &json!(
                    "signing in failed: the authorization server's metadata repeats a secret of \
                     this server entry; refusing to show its link"
                )
            ),
            "{place}: {entry}"
        );
        let forms = [
            KEY.to_string(),
            every_byte_encoded(KEY),
            "4f9a8b7c6d5e".into(),
        ];
        for text in &shown {
            for form in &forms {
                assert!(!text.contains(form.as_str()), "{place}: {form} in {text}");
            }
        }
    }
}

#[tokio::test]
async fn a_link_holding_only_the_client_id_is_shown() {
    let (entry, _) = shown_for(|base, _| format!("{base}/authorize?app={CLIENT_ID}")).await;
    let link = entry["signInUrl"]
        .as_str()
        .unwrap_or_else(|| panic!("{entry}"));
    assert!(
        link.contains(&format!("/authorize?app={CLIENT_ID}&")),
        "{link}"
    );
    assert_eq!(entry["reason"], reason_for(link));
}
