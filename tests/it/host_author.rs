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
