//! Findings of a review of the module-layers refactor, each pinned as a test through the Host
//! contract. A test marked `#[ignore = "finding: ..."]` fails on the code under review; the
//! others confirm behaviour the review probed and found right.
//!
//! Every server here is a `support::hostile` server on 127.0.0.1.

use std::time::Duration;

use crate::support::Host;
use crate::support::hostile::{Reply, serve, standard};
use runvil_plugin::ToolErrorKind;
use serde_json::json;

/// A header value that is all digits (an account number, a numeric API key): a configured
/// secret like any other (README "Configuration": header values are secrets).
const NUMERIC_KEY: &str = "20240517123456789";

/// A server that lists one tool `t` whose raw `inputSchema` text is `schema`, and answers a
/// call of it with the raw `result` object text.
async fn raw_server(schema: &'static str, result: &'static str) -> crate::support::hostile::Server {
    serve(move |req| async move {
        if let Some(reply) = standard(&req) {
            return reply;
        }
        let id = req.id();
        let body = match req.method() {
            "tools/list" => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"t","description":"d","inputSchema":{schema}}}]}}}}"#
            ),
            _ => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#),
        };
        Reply::raw(200, "application/json", body)
    })
    .await
}

async fn keyed(url: &str, key: &str) -> Host {
    let host = Host::new(json!({"k": {"url": url, "headers": {"X-Api-Key": key}}}));
    host.ready("k", Duration::from_secs(10)).await;
    host
}

/// The text of a call of `t` on a [`raw_server`] whose schema is `{"type":"object"}` and whose
/// result is `result`, by a Host that sends [`NUMERIC_KEY`].
async fn keyed_call(result: &'static str) -> String {
    let server = raw_server(r#"{"type":"object"}"#, result).await;
    let host = keyed(&server.url, NUMERIC_KEY).await;
    host.call_tool("k", "t").await.expect("the call answers")
}

/// `Server::read_tool`'s `scrubbed_json`: the plain scrub turns `"default":2024...` into
/// `"default":[redacted]`, which is not JSON, and the fallback for text that does not parse
/// is the *unscrubbed* raw schema.
#[tokio::test]
async fn a_numeric_secret_echoed_as_a_schema_number_is_shown() {
    let server = raw_server(
        r#"{"type":"object","properties":{"account":{"type":"integer","default":20240517123456789}}}"#,
        r#"{"content":[{"type":"text","text":"ok"}]}"#,
    )
    .await;
    let host = keyed(&server.url, NUMERIC_KEY).await;
    let one = host.lookup("k", "t").await.expect("the tool is listed");
    assert!(
        !one.contains(NUMERIC_KEY),
        "the listing shows the configured header value: {one}"
    );
    // The scrubbed schema is no JSON value any more, so it is shown as one JSON string.
    assert!(
        one.contains(r#""{\"type\":\"object\",\"properties\":{\"account\":{\"type\":\"integer\",\"default\":[redacted]}}}""#),
        "the scrubbed schema is not shown as a string: {one}"
    );
}

/// `Redactor::scrub_json`, JSON holding a backslash: decoded, only strings and keys are
/// scrubbed, so a number holding a secret is re-encoded as it was.
#[tokio::test]
#[ignore = "finding: a secret echoed as a JSON number in structuredContent that also holds an escape (\\/) is returned unscrubbed"]
async fn a_numeric_secret_in_structured_content_with_an_escape_is_shown() {
    let text =
        keyed_call(r#"{"structuredContent":{"account":20240517123456789,"path":"a\/b"}}"#).await;
    assert!(
        !text.contains(NUMERIC_KEY),
        "the result shows the configured header value: {text}"
    );
}

/// The same without an escape is scrubbed, but the result is no longer JSON: the README says
/// a result with no blocks "gives its structuredContent JSON".
#[tokio::test]
#[ignore = "finding: scrubbing a JSON number in structuredContent makes the result text invalid JSON ([redacted] unquoted)"]
async fn a_numeric_secret_in_structured_content_leaves_valid_json() {
    let text = keyed_call(r#"{"structuredContent":{"account":20240517123456789}}"#).await;
    assert!(!text.contains(NUMERIC_KEY), "{text}");
    serde_json::from_str::<serde_json::Value>(&text)
        .unwrap_or_else(|e| panic!("the scrubbed structuredContent is not JSON ({e}): {text}"));
}

const STRING_KEY: &str = "sk-review-0123456789abcdef";

/// `Redactor::scrub_json` decodes JSON holding a backslash into a `Value`: of a key named twice
/// only the last value survives, so a secret in the first is never seen, nothing "changed", and
/// the original text (secret included) is returned as it was.
#[tokio::test]
#[ignore = "finding: a secret in the first of two duplicate JSON keys (text with a \\/ escape) passes scrub_json unscrubbed, in schemas and structuredContent"]
async fn a_secret_under_a_duplicated_json_key_is_shown() {
    let server = raw_server(
        r#"{"type":"object","description":"sk-review-0123456789abcdef","description":"a\/b"}"#,
        r#"{"structuredContent":{"echo":"sk-review-0123456789abcdef","echo":"a\/b"}}"#,
    )
    .await;
    let host = keyed(&server.url, STRING_KEY).await;
    let one = host.lookup("k", "t").await.expect("the tool is listed");
    let text = host.call_tool("k", "t").await.expect("the call answers");
    assert!(
        !one.contains(STRING_KEY),
        "the listing shows the secret: {one}"
    );
    assert!(
        !text.contains(STRING_KEY),
        "the result shows the secret: {text}"
    );
}

/// Confirmed right: secrets that overlap, contain each other, touch, or meet an escaped form
/// of another leave no byte behind, one `[redacted]` per covered run, in a text result and in
/// a description.
#[tokio::test]
async fn overlapping_nested_and_touching_secrets_leave_no_byte() {
    const A: &str = "AAAA1111BBBB";
    const B: &str = "BBBB2222CCCC";
    const INNER: &str = "1111BBBB2222";
    const SAY: &str = "x AAAA1111BBBB2222CCCC y AAAA1111BBBBBBBB2222CCCC z BBBB2222CCCCAAAA1111BBBB w a%2Fb%2Fc%2Fd%2Fe/f/g/h/i";
    let server = serve(|req| async move {
        if let Some(reply) = standard(&req) {
            return reply;
        }
        let id = req.id();
        let body = match req.method() {
            "tools/list" => json!({"jsonrpc":"2.0","id":id,"result":{"tools":[{"name":"t","description":SAY,"inputSchema":{"type":"object","default":SAY}}]}}),
            _ => json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":SAY}]}}),
        };
        Reply::json(&body)
    })
    .await;
    let host = Host::new(json!({"k": {"url": server.url, "headers": {
        "X-A": A, "X-B": B, "X-Inner": INNER, "X-Path": "a/b/c/d/e", "X-Tail": "e/f/g/h/i"
    }}}));
    host.ready("k", Duration::from_secs(10)).await;
    const SCRUBBED: &str = "x [redacted] y [redacted] z [redacted] w [redacted]";
    assert_eq!(host.call_tool("k", "t").await, Ok(SCRUBBED.to_string()));
    let one: serde_json::Value =
        serde_json::from_str(&host.lookup("k", "t").await.unwrap()).unwrap();
    assert_eq!(one["description"], SCRUBBED);
    assert_eq!(one["inputSchema"]["default"], SCRUBBED);
}

/// Confirmed right: a model cannot reach a Host-only request through `call_dynamic_tool` (its
/// namespace is a server's, never the Pack's), and an unknown tool's error names only the two
/// tools. A Host that forwards any `mcp/...` name a model emits would reach `mcp/logout` —
/// the contract (`Pack::call` takes "a full name from `Pack::tools`") is all that stops it.
#[tokio::test]
async fn host_only_requests_are_not_reachable_through_call_dynamic_tool() {
    let host = Host::new(json!({"docs": {"command": "npx"}}));
    for (namespace, tool) in [
        ("mcp", "logout"),
        ("mcp/logout", "x"),
        ("docs", "../logout"),
    ] {
        let error = host
            .call(
                "call_dynamic_tool",
                json!({"namespace": namespace, "toolName": tool, "arguments": {"namespace": "docs"}}),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                error.kind,
                ToolErrorKind::NotFound | ToolErrorKind::Unavailable
            ),
            "{namespace}/{tool}: {error}"
        );
        assert!(!error.message.contains("deleted"), "{error}");
    }
    // A Host-only request under another id, or with a suffix, is an unknown tool.
    for name in [
        "other/logout",
        "mcp/logout/",
        "mcp//logout",
        "MCP/logout",
        "mcp/Logout",
    ] {
        let error = host
            .pack
            .call(name, json!({"namespace": "docs"}))
            .await
            .unwrap_err();
        assert_eq!(error.kind, ToolErrorKind::NotFound, "{name}: {error}");
    }
}

/// Confirmed right: odd argument shapes of the Host-only requests are refused with a reason,
/// never a panic or a hang.
#[tokio::test]
async fn host_only_requests_refuse_odd_arguments() {
    let host = Host::new(json!({"docs": {"url": "http://127.0.0.1:9/review/mcp"}}));
    for request in ["mcp/logout", "mcp/sign_in_state"] {
        for (args, kind) in [
            (json!(null), ToolErrorKind::InvalidArguments),
            (json!([]), ToolErrorKind::InvalidArguments),
            (json!("docs"), ToolErrorKind::InvalidArguments),
            (json!({"namespace": null}), ToolErrorKind::InvalidArguments),
            (
                json!({"namespace": ["docs"]}),
                ToolErrorKind::InvalidArguments,
            ),
            (json!({"namespace": ""}), ToolErrorKind::NotFound),
            (json!({"namespace": "Docs"}), ToolErrorKind::NotFound),
        ] {
            let outcome = tokio::time::timeout(
                Duration::from_secs(5),
                host.pack.call(request, args.clone()),
            )
            .await
            .expect("no hang");
            assert_eq!(outcome.map_err(|e| e.kind), Err(kind), "{request} {args}");
        }
    }
}

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
/// and then signs out cannot: the entry is refused, so `mcp/logout` (and `host logout`) will
/// not delete its grant, although the store key needs only the url and the client, both
/// still in the entry. The grant stays on disk until the entry is enabled again — when it is
/// used at once.
#[tokio::test]
#[ignore = "finding: mcp/logout refuses a disabled entry (or one with an unset ${env:} in a header), so its stored grant cannot be deleted"]
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
    let servers: serde_json::Map<String, serde_json::Value> = cases
        .iter()
        .map(|(n, e)| (n.to_string(), e.clone()))
        .collect();
    let host = Host::new(serde_json::Value::Object(servers));
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
    }
}
