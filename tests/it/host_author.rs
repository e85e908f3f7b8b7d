//! What a Host author meets (README "Add it to a Host", "The host CLI"): reasons that stay short
//! when a server that is no MCP server answers with a web page, config mistakes that are never
//! silent, errors that will not heal shown as such at once, readiness a Host can await, and a
//! shutdown it can await. Every server here is on 127.0.0.1.

use std::time::Duration;

use crate::support::Host;
use crate::support::hostile::{self, Reply, serve};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

/// A header value the tests configure; never in a reason.
const KEY: &str = "sk-host-author-0123456789";

/// A web page of `status` that quotes the configured key: an HTML error page of a server that is
/// no MCP server (a proxy, a web app at the wrong path).
async fn html_page(status: u16) -> hostile::Server {
    serve(move |_| async move {
        let page = format!(
            "<!doctype html><html><head><title>Error</title></head><body>{}<p>key {KEY}</p></body></html>",
            "<div>padding</div>".repeat(200)
        );
        Reply::raw(status, "text/html; charset=utf-8", page)
    })
    .await
}

/// An HTML error page is never pasted into a reason: the reason names the status and the
/// content type only, and holds nothing of the page (nor the key it quotes).
#[tokio::test]
async fn an_html_error_page_is_named_never_pasted() {
    let server = html_page(500).await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({"web": {"url": url, "headers": {"X-Api-Key": KEY}}}));
    let entry = host.failed("web", WAIT).await;
    assert_eq!(
        entry["reason"],
        "HTTP 500 Internal Server Error (a body of type text/html, not shown)"
    );
}

/// A plain-text or JSON error body is still quoted (scrubbed, bounded); one without a
/// Content-Type too.
#[tokio::test]
async fn a_text_error_body_is_still_quoted() {
    let server = serve(|req| async move {
        match req.target.as_str() {
            "/json" => Reply::raw(500, "application/problem+json", r#"{"detail":"down"}"#),
            "/xml" => Reply::raw(500, "Application/XML", "<error>down</error>"),
            _ => Reply::raw(500, "text/plain", "down for maintenance"),
        }
    })
    .await;
    let url = |path: &str| format!("http://127.0.0.1:{}/{path}", server.port);
    let host = Host::new(json!({
        "json": {"url": url("json")},
        "text": {"url": url("text")},
        "xml": {"url": url("xml")},
    }));
    let reasons = [
        (
            "json",
            r#"HTTP 500 Internal Server Error: {"detail":"down"}"#,
        ),
        (
            "text",
            "HTTP 500 Internal Server Error: down for maintenance",
        ),
        (
            "xml",
            "HTTP 500 Internal Server Error (a body of type application/xml, not shown)",
        ),
    ];
    for (namespace, reason) in reasons {
        assert_eq!(
            host.failed(namespace, WAIT).await["reason"],
            reason,
            "{namespace}"
        );
    }
}

/// The reason the listing shows for namespace `namespace` of `host`.
async fn reason(host: &Host, namespace: &str) -> serde_json::Value {
    host.listing(json!({"namespace": namespace})).await["reason"].clone()
}

/// A web page sent as `text/plain` or without a `Content-Type` (a proxy's error page) is named,
/// never pasted: the reason reads as for a page that says it is HTML.
#[tokio::test]
async fn an_html_page_without_an_html_content_type_is_not_pasted() {
    let page = format!(
        "\n<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title><style>{}</style></head>\
         <body><h1>Bad Gateway</h1><p>{KEY}</p></body></html>",
        "body{font-family:sans-serif}".repeat(40)
    );
    let server = serve(move |req| {
        let page = page.clone();
        async move {
            match req.target.as_str() {
                "/plain" => Reply::raw(502, "text/plain", page),
                _ => Reply::raw(502, "text/plain", page).without_headers(),
            }
        }
    })
    .await;
    let url = |path: &str| format!("http://127.0.0.1:{}/{path}", server.port);
    let host = Host::new(json!({
        "bare": {"url": url("bare")},
        "plain": {"url": url("plain")},
    }));
    for namespace in ["bare", "plain"] {
        let entry = host.failed(namespace, WAIT).await;
        assert_eq!(
            entry["reason"], "HTTP 502 Bad Gateway (a body of type text/html, not shown)",
            "{namespace}"
        );
    }
}

/// A Host hands the Pack an `mcp.json` file's text as it is: JSONC as VS Code writes it (a byte
/// order mark, comments, trailing commas, `servers` beside `inputs`) is read by the Pack, and a
/// live server in it becomes ready; text the Pack cannot read makes it unavailable with the
/// place, never quoting the text (nor the secret in it).
#[tokio::test]
async fn a_host_passes_the_files_text_jsonc_allowed() {
    let server = crate::support::scripted::Scripted::start().await;
    let text = format!(
        "\u{feff}{{\n  // the team's servers\n  \"servers\": {{\n    \"live\": {{\"url\": \"{}\", \"headers\": {{\"X-Api-Key\": \"{KEY}\"}},}},\n    /* not yet */ \"local\": {{\"command\": \"npx\"}},\n  }},\n  \"inputs\": [],\n}}\n",
        server.url
    );
    let host = Host::new(serde_json::Value::String(text));
    host.ready("live", WAIT).await;
    let live = host.listing(json!({"namespace": "live"})).await;
    assert_eq!(live["status"], "ready");
    assert_eq!(
        reason(&host, "local").await,
        "local MCP servers (command) are not supported yet"
    );

    let cases = [
        (
            format!("{{\"servers\": {{\"a\": {{\"url\": \"http://127.0.0.1:9/mcp\", \"headers\": {{\"X-Api-Key\": '{KEY}'}}}}}}}}"),
            "the mcp config's text is not JSON (comments and trailing commas are allowed): expected value at line 1 column 78".to_string(),
        ),
        (
            format!("{{\"mcpServers\": {{\"a\": {{\"url\": \"http://127.0.0.1:9/mcp\"}},\n \"a\": {{\"command\": \"{KEY}\"}}}}}}"),
            "the mcp config's text names the key \"a\" twice in one object; keep one at line 2 column 4".to_string(),
        ),
        (
            "/home/me/.vscode/mcp.json".to_string(),
            "the mcp config's text is not JSON (comments and trailing commas are allowed): expected value at line 1 column 1; a string config is the text of an mcp.json file, not its path: pass the file's contents".to_string(),
        ),
        (
            "{\"inputs\": [{\"id\": \"token\"}]}".to_string(),
            "the mcp config has VS Code's \"inputs\" but no \"servers\" object; put the servers under \"servers\"".to_string(),
        ),
    ];
    for (text, expected) in cases {
        let refused = Host::try_new(serde_json::Value::String(text.clone()))
            .err()
            .unwrap_or_else(|| panic!("constructed from {text}"));
        assert_eq!(refused.reason, expected, "{text}");
        assert!(!refused.reason.contains(KEY));
    }
}

/// A whole `mcp.json` is read as one wherever a Host passes it: as the plugin config (Claude's
/// `mcpServers`, VS Code's `servers` with its `inputs`), or as the Pack's config; one naming
/// both keys is unavailable, saying so. A server that is named `servers` is still a server.
#[tokio::test]
async fn a_whole_mcp_json_is_read_as_one() {
    let off = json!({"url": "http://127.0.0.1:9/mcp", "disabled": true});
    let disabled = "the entry is disabled in the config (\"disabled\": true), so this Pack does not connect to it";
    for plugin_config in [
        json!({"servers": {"docs": off}, "inputs": []}),
        json!({"mcpServers": {"docs": off}}),
        json!({"mcp": {"servers": {"docs": off}, "inputs": []}}),
        json!({"mcp": {"mcpServers": {"docs": off}}}),
    ] {
        let pack = crate::support::construct(&plugin_config, "mcp").unwrap();
        let host = Host { pack };
        assert_eq!(
            host.listing(json!({})).await,
            json!({"servers": [{"namespace": "docs", "status": "error", "reason": disabled, "tools": []}]}),
            "{plugin_config}"
        );
    }
    let both = Host::try_new(json!({"mcpServers": {}, "servers": {}}))
        .err()
        .unwrap();
    assert_eq!(
        both.reason,
        "the mcp config is a whole mcp.json with both \"mcpServers\" and \"servers\"; keep one"
    );
    let wrong = Host::try_new(json!({"mcpServers": [off]})).err().unwrap();
    assert_eq!(
        wrong.reason,
        "the mcp config's \"mcpServers\" must be an object of servers, found an array"
    );
    let named = Host::new(json!({"servers": off}));
    assert_eq!(reason(&named, "servers").await, disabled);
}

/// Config mistakes of the kinds other clients' files hold are refused with a reason that says
/// what to write, never silently ignored: a key in the wrong case or one letter off (a
/// did-you-mean), `"type": "stdio"` beside a `url`, a url without a scheme.
#[tokio::test]
async fn config_mistakes_are_refused_with_what_to_write() {
    let host = Host::new(json!({
        "upper": {"URL": "http://127.0.0.1:9/mcp"},
        "headers": {"url": "http://127.0.0.1:9/mcp", "Headers": {"X-Api-Key": KEY}},
        "header": {"url": "http://127.0.0.1:9/mcp", "header": {"X-Api-Key": KEY}},
        "stdio": {"type": "stdio", "url": "http://127.0.0.1:9/mcp"},
        "bare": {"url": "127.0.0.1:9/mcp"},
        "host": {"url": "localhost:9/mcp"},
        "ws": {"url": "ws://127.0.0.1:9/mcp"},
    }));
    let cases = [
        (
            "upper",
            "the entry has \"URL\", which this Pack does not read; did you mean \"url\"? (keys are case-sensitive)",
        ),
        (
            "headers",
            "the entry has \"Headers\", which this Pack does not read; did you mean \"headers\"? (keys are case-sensitive)",
        ),
        (
            "header",
            "the entry has \"header\", which this Pack does not read; did you mean \"headers\"? (keys are case-sensitive)",
        ),
        (
            "stdio",
            "the entry has \"type\": \"stdio\" (a local server) and a \"url\": for a remote server remove \"type\" or write \"type\": \"http\"",
        ),
        (
            "bare",
            "\"url\" has no scheme: begin it with https:// (or http:// for a server on this machine)",
        ),
        (
            "host",
            "\"url\" has no scheme: begin it with https:// (or http:// for a server on this machine)",
        ),
        ("ws", "\"url\" must be an http:// or https:// URL"),
    ];
    for (namespace, expected) in cases {
        assert_eq!(reason(&host, namespace).await, expected, "{namespace}");
    }
}

/// `entry` without `retryInSeconds`, which a failed start always has (a lasting error is
/// retried on the backoff too).
fn without_retry(entry: &serde_json::Value) -> serde_json::Value {
    let mut entry = entry.clone();
    let retry = entry.as_object_mut().unwrap().remove("retryInSeconds");
    assert!(
        retry.is_some_and(|r| r.as_u64().is_some_and(|r| r <= 60)),
        "{entry}"
    );
    entry
}

/// Errors that will not fix themselves show at the first failed start as `error` with
/// `"lasting": true` and a reason saying what to change: a 404 at the url (the path lacks
/// `/mcp`), a 501, a 401 to an entry that cannot sign in, an https url for a plain-HTTP port. A
/// 500 may pass: no `lasting`.
#[tokio::test]
async fn errors_that_will_not_heal_are_lasting_at_once() {
    let server = serve(|req| async move {
        match req.target.as_str() {
            "/501" => Reply::raw(501, "text/plain", ""),
            "/401" => Reply::raw(401, "text/plain", "bad token"),
            "/500" => Reply::raw(500, "text/plain", "busy"),
            _ => Reply::raw(404, "text/plain", "Not Found"),
        }
    })
    .await;
    let port = server.port;
    let host = Host::new(json!({
        "path": {"url": format!("http://127.0.0.1:{port}/")},
        "unimplemented": {"url": format!("http://127.0.0.1:{port}/501")},
        "keyed": {"url": format!("http://127.0.0.1:{port}/401"), "headers": {"Authorization": format!("Bearer {KEY}")}},
        "tls": {"url": format!("https://127.0.0.1:{port}/mcp")},
        "busy": {"url": format!("http://127.0.0.1:{port}/500")},
    }));
    let lasting = |namespace: &str, reason: &str| json!({"namespace": namespace, "status": "error", "reason": reason, "lasting": true, "tools": []});
    let cases = [
        lasting(
            "path",
            "HTTP 404 Not Found: Not Found; nothing serves MCP at this URL: check the path in \"url\" (many servers serve MCP at /mcp)",
        ),
        lasting(
            "unimplemented",
            "HTTP 501 Not Implemented; the server does not take MCP requests at this URL: check that \"url\" is the server's MCP endpoint",
        ),
        lasting(
            "keyed",
            "HTTP 401 Unauthorized: bad token; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry's \"headers\" (e.g. \"Authorization\": \"Bearer ${env:TOKEN}\")",
        ),
        lasting(
            "tls",
            &format!(
                "the TLS handshake with https://127.0.0.1:{port} failed (is it an https URL for a plain-HTTP port?)"
            ),
        ),
        json!({"namespace": "busy", "status": "error", "reason": "HTTP 500 Internal Server Error: busy", "tools": []}),
    ];
    for expected in cases {
        let namespace = expected["namespace"].as_str().unwrap();
        let entry = host.failed(namespace, WAIT).await;
        assert_eq!(without_retry(&entry), expected, "{namespace}");
    }
}

/// A `401` with a `Bearer` challenge to an entry without headers, from a server that publishes no
/// OAuth metadata at all (it wants an API key): no sign-in can ever succeed, so the entry is
/// `lasting` at its first failed start, and the reason says to set the key in the headers. It
/// used to show the reason without `lasting`, so a Host (and the host CLI) waited its whole
/// deadline for it. A guessed registration endpoint that answers `503` may pass: no `lasting`.
#[tokio::test]
async fn a_401_that_offers_no_sign_in_is_lasting() {
    crate::support::oauth_store();
    let keyless = |register: u16| {
        serve(move |req| async move {
            match (req.http_method.as_str(), req.target.as_str()) {
                ("POST", "/mcp") => Reply::raw(401, "text/plain", "missing API key")
                    .header("www-authenticate", "Bearer"),
                ("POST", "/register") => Reply::raw(register, "text/plain", "no"),
                _ => Reply::raw(404, "text/plain", "not here"),
            }
        })
    };
    let (server, busy) = (keyless(404).await, keyless(503).await);
    let host = Host::new(json!({
        "keyless": {"url": format!("http://127.0.0.1:{}/mcp", server.port)},
        "busy": {"url": format!("http://127.0.0.1:{}/mcp", busy.port)},
    }));
    let entry = host.failed("busy", WAIT).await;
    assert_eq!(
        without_retry(&entry),
        json!({
            "namespace": "busy",
            "status": "error",
            "reason": "signing in failed: the registration endpoint refused to register a client: HTTP 503",
            "tools": [],
        })
    );
    let entry = host.failed("keyless", WAIT).await;
    assert_eq!(
        without_retry(&entry),
        json!({
            "namespace": "keyless",
            "status": "error",
            "reason": "signing in failed: the server answered HTTP 401 but offers no OAuth sign-in (no \
                       protected resource metadata, no authorization server metadata, no registration \
                       endpoint); it probably wants an API key or token: set it in the entry's headers",
            "lasting": true,
            "tools": [],
        })
    );
}

/// A url that points at a web site (a page that answers every request `200` with HTML, as a
/// single-page app's catch-all does) will not start serving MCP by itself, just like the 404 of
/// a url without `/mcp`: `lasting` at once, the page named by its type and never pasted, and the
/// reason says to check the url's path. It used to show no `lasting` and no advice.
#[tokio::test]
async fn a_web_page_that_answers_200_is_lasting() {
    let server = serve(|_| async move {
        Reply::raw(
            200,
            "text/html; charset=utf-8",
            format!("<!doctype html><html><body><div id=app></div><p>{KEY}</p></body></html>"),
        )
    })
    .await;
    let host = Host::new(json!({
        "site": {"url": format!("http://127.0.0.1:{}/", server.port), "headers": {"X-Api-Key": KEY}},
    }));
    let entry = host.failed("site", WAIT).await;
    assert_eq!(
        without_retry(&entry),
        json!({
            "namespace": "site",
            "status": "error",
            "reason": "the server answered with Content-Type \"text/html; charset=utf-8\", not \
                       application/json or text/event-stream; nothing serves MCP at this URL: check \
                       the path in \"url\" (many servers serve MCP at /mcp)",
            "lasting": true,
            "tools": [],
        })
    );
}

/// A Host awaits readiness through the contract instead of polling the listing:
/// `Pack::settled` resolves `All` once no server is `loading` (each is ready, or in `error`
/// with its reason), and `Pending` with the namespaces still loading when the time runs out.
#[tokio::test]
async fn a_host_awaits_every_server_settled() {
    use runvil_plugin::Settled;
    let server = hostile::serve_tools(vec![hostile::tool("echo", "echoes")], |req| {
        Reply::json(&hostile::text_result(&req.id(), "hi"))
    })
    .await;
    let silent = crate::support::net::unused_loopback().await;
    let silent_url = format!("http://{}/mcp", silent.local_addr().unwrap());
    let ready = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({
        "docs": {"url": ready},
        "files": {"command": "npx"},
    }));
    assert_eq!(host.pack.settled(WAIT).await, Settled::All);
    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [
            {"namespace": "docs", "status": "ready", "tools": ["echo"]},
            {"namespace": "files", "status": "error", "reason": "local MCP servers (command) are not supported yet", "tools": []},
        ]})
    );
    let hanging = Host::new(json!({"docs": {"url": ready}, "silent": {"url": silent_url}}));
    assert_eq!(
        hanging.pack.settled(Duration::from_millis(500)).await,
        Settled::Pending(vec!["silent".to_string()])
    );
    assert_eq!(Host::new(json!({})).pack.settled(WAIT).await, Settled::All);
}

/// A Host awaits the Pack's cleanup instead of counting the runtime's tasks: the future
/// `Pack::closed` gave before the drop resolves once the session's `DELETE` was answered.
#[tokio::test]
async fn a_host_awaits_the_cleanup_after_the_drop() {
    let server = hostile::serve(|req| async move {
        if req.http_method == "DELETE" {
            tokio::time::sleep(Duration::from_millis(300)).await;
            return Reply::raw(200, "text/plain", "");
        }
        hostile::standard(&req).unwrap_or_else(|| match req.method() {
            "tools/list" => Reply::json(&hostile::tools_page(
                &req.id(),
                vec![hostile::tool("echo", "e")],
                None,
            )),
            _ => Reply::raw(400, "text/plain", ""),
        })
    })
    .await;
    let host = Host::new(json!({"docs": {"url": format!("http://127.0.0.1:{}/mcp", server.port)}}));
    host.ready("docs", WAIT).await;
    let closed = host.pack.closed();
    // A Host's own task, alive for the whole test: the wait is for this Pack's work only.
    let own = tokio::spawn(std::future::pending::<()>());
    drop(host);
    closed.await;
    let deletes: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.http_method == "DELETE")
        .map(|r| r.header("mcp-session-id").unwrap_or_default())
        .collect();
    assert_eq!(deletes, [hostile::SESSION]);
    assert!(!own.is_finished());
    own.abort();
}

/// A plugin config without `mcp` whose servers sit under a key that misspells `mcp`,
/// `mcpServers` or `servers` (`mcpservers`, Codex's `mcp_servers`, `MCP`) is not an empty Pack
/// that says nothing: the Pack is unavailable, naming the key and the one meant. Other plugins'
/// keys, a near miss that holds no servers, and a server that happens to be named so are left as
/// they were (review 5, issue 32 item 4).
#[tokio::test]
async fn a_plugin_config_with_a_misspelled_servers_key_is_not_an_empty_pack() {
    let entry =
        json!({"url": "http://127.0.0.1:9/mcp", "disabled": true, "headers": {"X-Api-Key": KEY}});
    let reason = |key: &str, meant: &str| {
        format!(
            "the plugin config has \"{key}\", which this Plugin does not read, and no \"mcp\", so the mcp Pack would have no servers; did you mean \"{meant}\"? (keys are case-sensitive)"
        )
    };
    let text = format!("{{\"mcpServers\": {{\"docs\": {entry}}}}}");
    let cases = [
        (
            json!({"mcpservers": {"docs": entry}}),
            reason("mcpservers", "mcpServers"),
        ),
        (
            json!({"mcp_servers": {"docs": entry}}),
            reason("mcp_servers", "mcpServers"),
        ),
        (json!({"MCP": {"docs": entry}}), reason("MCP", "mcp")),
        (json!({"Mcp": text}), reason("Mcp", "mcp")),
        (
            json!({"MCP": {"mcpServers": {"docs": entry}}}),
            reason("MCP", "mcp"),
        ),
        (
            json!({"mcp-server": {"docs": entry}, "other": {"a": 1}}),
            reason("mcp-server", "mcpServers"),
        ),
        (
            json!({"Servers": {"docs": entry}, "inputs": []}),
            reason("Servers", "servers"),
        ),
    ];
    for (config, expected) in cases {
        let unavailable = crate::support::construct(&config, "mcp")
            .err()
            .unwrap_or_else(|| panic!("constructed from {config}"));
        assert_eq!(unavailable.reason, expected, "{config}");
        assert!(!unavailable.reason.contains(KEY));
    }
    // Not near misses holding servers: the Pack is empty, as before.
    for config in [
        json!({"server": {"port": 8080, "host": "0.0.0.0"}}),
        json!({"MCP": entry}),
        json!({"mcp_servers": {}}),
        json!({"fetch": {"docs": entry}}),
        json!({"mcps": {"docs": entry}}),
    ] {
        let pack = crate::support::construct(&config, "mcp").unwrap();
        assert_eq!(
            Host { pack }.listing(json!({})).await,
            json!({"servers": []}),
            "{config}"
        );
    }
    // `mcp` wins over a near miss beside it, and a server may be named like one.
    let disabled = "the entry is disabled in the config (\"disabled\": true), so this Pack does not connect to it";
    for config in [
        json!({"mcp": {"MCP": entry}, "mcp_servers": {"docs": entry}}),
        json!({"mcp": {"MCP": entry}}),
    ] {
        let pack = crate::support::construct(&config, "mcp").unwrap();
        assert_eq!(
            Host { pack }.listing(json!({})).await,
            json!({"servers": [{"namespace": "MCP", "status": "error", "reason": disabled, "tools": []}]}),
            "{config}"
        );
    }
}

/// A key of an entry's `oauth` object in the wrong case or one letter off (`clientID`, `scope`,
/// `callbackport`, Python's `client_id`) is not silently ignored (the entry would register a
/// client of its own, ask for no scopes, bind a random port): the entry is refused with a
/// did-you-mean, as a misspelled entry key is. A key of no known kind is still ignored (review
/// 5, issue 32 item 4).
#[tokio::test]
async fn a_misspelled_oauth_key_is_not_silently_ignored() {
    let server = hostile::serve_tools(vec![hostile::tool("echo", "echoes")], |req| {
        Reply::json(&hostile::text_result(&req.id(), "hi"))
    })
    .await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({
        "id": {"url": url, "oauth": {"clientID": "docs-app"}},
        "scope": {"url": url, "oauth": {"scope": "files:read"}},
        "port": {"url": url, "oauth": {"callbackport": 33418}},
        "snake": {"url": url, "oauth": {"client_id": "docs-app", "clientSecret": KEY}},
        "unknown": {"url": url, "oauth": {"audience": "x", "clientId": "docs-app"}},
    }));
    host.settled(WAIT).await;
    let said = |key: &str, meant: &str| {
        json!(format!(
            "the entry's \"oauth\" has \"{key}\", which this Pack does not read; did you mean \"{meant}\"? (keys are case-sensitive)"
        ))
    };
    assert_eq!(reason(&host, "id").await, said("clientID", "clientId"));
    assert_eq!(reason(&host, "scope").await, said("scope", "scopes"));
    assert_eq!(
        reason(&host, "port").await,
        said("callbackport", "callbackPort")
    );
    assert_eq!(reason(&host, "snake").await, said("client_id", "clientId"));
    let unknown = host.listing(json!({"namespace": "unknown"})).await;
    assert_eq!(unknown["status"], "ready", "{unknown}");
}

/// An https url for a plain-HTTP server that answers the TLS hello with a plain-text `400` and
/// closes (Python's `http.server` does): the same lasting reason as a port that says nothing
/// back, not "could not connect to …" (which is retried and not lasting, so the host CLI would
/// wait its whole `--wait` for it).
#[tokio::test]
async fn an_https_url_for_a_server_answering_plain_http_is_lasting() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (listener, port) = crate::support::net::loopback().await;
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut hello = [0u8; 512];
                let _ = socket.read(&mut hello).await;
                let page = "HTTP/1.0 400 Bad request version\r\nContent-Type: text/html\r\n\r\n<html>bad</html>";
                let _ = socket.write_all(page.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    let host = Host::new(json!({"tls": {"url": format!("https://127.0.0.1:{port}/mcp")}}));
    let entry = host.failed("tls", WAIT).await;
    assert_eq!(
        without_retry(&entry),
        json!({"namespace": "tls", "status": "error", "lasting": true, "tools": [],
               "reason": format!("the TLS handshake with https://127.0.0.1:{port} failed (is it an https URL for a plain-HTTP port?)")})
    );
}
