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
