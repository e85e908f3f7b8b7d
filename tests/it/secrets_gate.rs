//! The exit gate (README "Secrets", docs/configuration.md): every text the Pack hands out — tool
//! answers, `ToolError` messages, listings, reasons, sign-in answers, the tool specs — passes one
//! scrub at the boundary, by one JSON rule: a secret in a JSON string or key becomes
//! `[redacted]` inside it, a JSON number or literal holding one becomes the string
//! `"[redacted]"`, so JSON text stays valid JSON; a key named twice is scrubbed twice.
//!
//! The property test at the end sends the configured secrets back in every JSON position and
//! encoding, through every tool, listing, error and sign-in path, at `RUST_LOG=trace`, and
//! finds no secret byte anywhere. Every server here is on 127.0.0.1.

use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use reqwest::Url;
use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

use crate::signin::{WAIT, link_in_listing};
use crate::support::hostile::{Reply, serve, server_entry, standard};
use crate::support::oauth::{Options, TestServer};
use crate::support::{Host, logs, oauth_store};

/// A header value that is all digits (an account number, a numeric API key): a configured
/// secret like any other (README "Configuration": header values are secrets).
const NUMERIC_KEY: &str = "20240517123456789";

const STRING_KEY: &str = "sk-review-0123456789abcdef";

/// The entry's secret, sent as a header.
const ECHOED_KEY: &str = "sk-live-0123456789";

/// The answer of tool `t` on a server (its entry keyed with [`ECHOED_KEY`]) whose `tools/call` result
/// is one text block holding `text`.
async fn json_text_answer(text: &'static str) -> String {
    let server = crate::support::hostile::serve_tools(
        vec![crate::support::hostile::tool("t", "a tool")],
        move |req| Reply::json(&crate::support::hostile::text_result(&req.id(), text)),
    )
    .await;
    let host = Host::new(json!({"s": {"url": server.url, "headers": {"X-Api-Key": ECHOED_KEY}}}));
    host.ready("s", WAIT).await;
    host.call_tool("s", "t").await.unwrap()
}

/// A text result that is JSON text echoing the entry's secret behind a `\u0073` escape is
/// scrubbed (the JSON rule decodes each string's escapes), also when the same string holds a
/// lone surrogate escape: the string is decoded by the one reader, the surrogate as U+FFFD.
#[tokio::test]
async fn an_escaped_secret_beside_a_lone_surrogate_in_a_json_text_result_is_scrubbed() {
    // Without the lone surrogate: scrubbed.
    let plain = json_text_answer(r#"{"echo":"\u0073k-live-0123456789"}"#).await;
    assert_eq!(plain, r#"{"echo":"[redacted]"}"#);
    // With it: the secret must not be there, as written or decoded.
    let answer = json_text_answer(r#"{"echo":"\ud800 \u0073k-live-0123456789"}"#).await;
    let decoded: String = serde_json::from_str::<serde_json::Value>(&answer)
        .ok()
        .and_then(|v| v["echo"].as_str().map(str::to_string))
        .unwrap_or_else(|| answer.clone());
    // The string is written again from its decoded text: the lone surrogate as U+FFFD.
    assert_eq!(
        (answer.as_str(), decoded.as_str()),
        ("{\"echo\":\"\u{FFFD} [redacted]\"}", "\u{FFFD} [redacted]")
    );
}

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

/// A secret echoed as a JSON number in `structuredContent` that also holds an escape (`\/`):
/// the number becomes the string `"[redacted]"`, the escape is kept.
#[tokio::test]
async fn a_numeric_secret_in_structured_content_with_an_escape_is_shown() {
    let text =
        keyed_call(r#"{"structuredContent":{"account":20240517123456789,"path":"a\/b"}}"#).await;
    assert_eq!(text, r#"{"account":"[redacted]","path":"a\/b"}"#);
}

/// The same without an escape: scrubbed, and still JSON (README: a result with no blocks
/// "gives its structuredContent JSON").
#[tokio::test]
async fn a_numeric_secret_in_structured_content_leaves_valid_json() {
    let text = keyed_call(r#"{"structuredContent":{"account":20240517123456789}}"#).await;
    assert_eq!(text, r#"{"account":"[redacted]"}"#);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({"account": "[redacted]"})
    );
}

/// A secret under the first of two keys of one name (text with a `\/` escape), in a schema
/// and in `structuredContent`: the last member wins (docs/configuration.md "One reader"), so
/// the earlier one, secret and all, is dropped (blanked) before anything shows the text.
#[tokio::test]
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
    // The reader's blanks are gone too: a model reads the compact text.
    assert!(
        one.contains(r#""inputSchema":{"type":"object","description":"a\/b"}"#),
        "{one}"
    );
    assert_eq!(text, r#"{"echo":"a\/b"}"#);
}

/// A schema number holding a secret follows the same rule: the schema stays an object, the
/// number becomes `"[redacted]"`.
#[tokio::test]
async fn a_numeric_secret_in_a_schema_becomes_the_string_redacted() {
    let server = raw_server(
        r#"{"type":"object","properties":{"account":{"type":"integer","default":20240517123456789}}}"#,
        r#"{"content":[{"type":"text","text":"ok"}]}"#,
    )
    .await;
    let host = keyed(&server.url, NUMERIC_KEY).await;
    let one: Value = serde_json::from_str(&host.lookup("k", "t").await.unwrap()).unwrap();
    assert_eq!(
        one["inputSchema"],
        json!({"type":"object","properties":{"account":{"type":"integer","default":"[redacted]"}}})
    );
}

/// A text block whose text is JSON holding a secret number stays JSON too (one rule for
/// every answer), and a plain text block is scrubbed as text.
#[tokio::test]
async fn a_text_block_of_json_stays_json_and_plain_text_is_scrubbed_as_text() {
    let text = keyed_call(
        r#"{"content":[{"type":"text","text":"{\"n\":20240517123456789,\"s\":\"x 20240517123456789\"}"}]}"#,
    )
    .await;
    assert_eq!(text, r#"{"n":"[redacted]","s":"x [redacted]"}"#);
    let text = keyed_call(
        r#"{"content":[{"type":"text","text":"account 20240517123456789, [1, 20240517123456789]"}]}"#,
    )
    .await;
    assert_eq!(text, "account [redacted], [1, [redacted]]");
}

// ---------------------------------------------------------------------------------------------
// the pasted error redirect

/// A sign-in waiting at an OAuth test server whose entry also sends `X-Api-Key: STRING_KEY`:
/// the Host, the callback address (without its query) and the genuine redirect's `state` and
/// `iss`, form-urlencoded.
async fn waiting_with_a_header() -> (TestServer, Host, String, String, String) {
    oauth_store();
    let server = TestServer::start(Options::default()).await;
    let host = Host::new(json!({"docs": {
        "url": server.mcp_url().as_str(),
        "headers": {"X-Api-Key": STRING_KEY},
    }}));
    let link = link_in_listing(&host).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let answer = client.get(&link).send().await.unwrap();
    assert_eq!(answer.status().as_u16(), 302);
    let redirect = Url::parse(answer.headers()["location"].to_str().unwrap()).unwrap();
    let param = |name: &str| -> String {
        let value = redirect
            .query_pairs()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
    };
    let (state, iss) = (param("state"), param("iss"));
    let mut callback = redirect.clone();
    callback.set_query(None);
    (server, host, callback.to_string(), state, iss)
}

/// The `error` of a pasted redirect that repeats a header value: the answer, as the host CLI
/// prints it on stderr, and the listing say `[redacted]`; nothing logged holds it.
#[tokio::test]
async fn a_pasted_error_redirect_repeating_a_header_value_is_scrubbed() {
    let (_capture, logs) = logs::capture("trace");
    let (_server, host, callback, state, iss) = waiting_with_a_header().await;
    let address = format!("{callback}?error={STRING_KEY}&state={state}&iss={iss}");
    let answer = host
        .call(
            "sign_in_redirect",
            json!({"namespace": "docs", "address": address}),
        )
        .await;
    let error = answer.expect_err("an error redirect is not taken as a sign-in");
    assert_eq!(
        (error.kind, error.message.as_str()),
        (
            ToolErrorKind::InvalidArguments,
            "server \"docs\" did not take the pasted address: the authorization server did not \
             grant access ([redacted])"
        )
    );
    let listing = host
        .wait_for(WAIT, |l| server_entry(l, "docs")["signInUrl"].is_null())
        .await;
    let reason = server_entry(&listing, "docs")["reason"].to_string();
    assert!(
        reason.contains("[redacted]") && !reason.contains(STRING_KEY),
        "{reason}"
    );
    drop(host);
    let logged = logs.text();
    assert!(!logged.contains(STRING_KEY), "the log holds it: {logged}");
}

// ---------------------------------------------------------------------------------------------
// the property: no secret byte anywhere

/// Where a server's output carries a secret.
#[derive(Debug, Clone, Copy)]
enum Position {
    /// A JSON string value.
    String,
    /// A JSON key.
    Key,
    /// A JSON number (the numeric secret, whatever the encoding).
    Number,
    /// The first of two keys of one name.
    DuplicateKey,
}

/// How the secret is written inside a JSON string.
#[derive(Debug, Clone, Copy)]
enum Encoding {
    /// As it is (serde_json, JavaScript).
    Plain,
    /// `/` as `\/` (PHP).
    Slash,
    /// Every character as `\uXXXX`.
    Unicode,
    /// The first half as written, the rest as `\uXXXX`.
    Mixed,
    /// Percent-encoded, every non-alphanumeric byte.
    Percent,
    /// Percent-encoded, the hex digits of every other escape in lower case (`%2f` beside `%C3`),
    /// as a server that re-encodes a URL may write them.
    PercentMixed,
}

/// `secret` inside a JSON string, written the `encoding` way (the text between the quotes).
fn encode(secret: &str, encoding: Encoding) -> String {
    let unicode = |text: &str| -> String {
        text.encode_utf16()
            .map(|unit| format!("\\u{unit:04x}"))
            .collect()
    };
    match encoding {
        Encoding::Plain => secret.to_string(),
        Encoding::Slash => secret.replace('/', "\\/"),
        Encoding::Unicode => unicode(secret),
        Encoding::Mixed => {
            let half = secret
                .char_indices()
                .map(|(at, _)| at)
                .find(|&at| at >= secret.len() / 2)
                .unwrap_or(0);
            format!("{}{}", &secret[..half], unicode(&secret[half..]))
        }
        Encoding::Percent => {
            percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
                .to_string()
        }
        Encoding::PercentMixed => mixed_hex(&encode(secret, Encoding::Percent)),
    }
}

/// `encoded` with the hex digits of every other percent-encoding in lower case.
fn mixed_hex(encoded: &str) -> String {
    let mut out = String::new();
    for (n, part) in encoded.split('%').enumerate() {
        if n == 0 {
            out.push_str(part);
            continue;
        }
        out.push('%');
        let digits = part.len().min(2);
        if n % 2 == 1 {
            out.push_str(&part[..digits].to_ascii_lowercase());
        } else {
            out.push_str(&part[..digits]);
        }
        out.push_str(&part[digits..]);
    }
    out
}

/// A JSON object text carrying the secret at `position`: `string` is the secret as written
/// inside a JSON string, `number` the numeric secret.
fn object_with(position: Position, string: &str, number: &str) -> String {
    match position {
        Position::String => format!(r#"{{"a":"x {string} y","b":[1,"{string}"]}}"#),
        Position::Key => format!(r#"{{"{string}":1,"b":{{"{string}":"v"}}}}"#),
        Position::Number => format!(r#"{{"a":{number},"b":[{number},1.5],"c":"\/"}}"#),
        Position::DuplicateKey => format!(r#"{{"a":"{string}","a":"\/","b":1}}"#),
    }
}

/// One case of the property.
#[derive(Debug, Clone)]
struct Case {
    /// The `X-Api-Key` value: letters, digits, a `/` and maybe an `é`.
    key: String,
    /// The `X-Account` value: digits.
    account: String,
    position: Position,
    encoding: Encoding,
    /// Where the SSE answer's bytes are cut into HTTP chunks, as a fraction of the secret's
    /// offset (0..=7 eighths into the secret).
    cut: usize,
}

/// The tools of the echo server, each a path the secret comes back on.
const TOOLS: [&str; 8] = [
    "text",
    "structured",
    "is_error",
    "rpc_error",
    "http_400",
    "sse_chunks",
    "embedded",
    "structured_error",
];

/// A server echoing the case's secrets on every path: `initialize`'s instructions, each tool's
/// name, description, schemas and annotations, and every call's answer; a `notifications/message`
/// before the SSE answer logs it.
async fn echo_server(case: &Case) -> crate::support::hostile::Server {
    let string = encode(&case.key, case.encoding);
    let object = object_with(case.position, &string, &case.account);
    let case = case.clone();
    serve(move |req| {
        let (string, object, case) = (string.clone(), object.clone(), case.clone());
        async move {
            let id = req.id();
            if req.method() == "initialize" {
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-06-18","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"echo {string}","version":"1"}},"instructions":"use {string} well"}}}}"#
                );
                return Reply::raw(200, "application/json", body).header("mcp-session-id", "s-1");
            }
            if let Some(reply) = standard(&req) {
                return reply;
            }
            let envelope = |result: String| {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
            };
            match req.method() {
                "tools/list" => {
                    let mut tools: Vec<String> = TOOLS
                        .iter()
                        .map(|name| {
                            format!(
                                r#"{{"name":"{name}","title":"t {string}","description":"does {string}","inputSchema":{{"type":"object","properties":{{"p":{{"default":{object}}}}}}},"annotations":{object}}}"#
                            )
                        })
                        .collect();
                    tools.push(format!(
                        r#"{{"name":"n-{string}","inputSchema":{{"type":"object"}}}}"#
                    ));
                    let body = envelope(format!(r#"{{"tools":[{}]}}"#, tools.join(",")));
                    Reply::raw(200, "application/json", body)
                }
                "tools/call" => {
                    let name = req.rpc["params"]["name"].as_str().unwrap_or("").to_string();
                    let text = format!("said {string} and {}", case.account);
                    let body = match name.as_str() {
                        "text" => envelope(format!(
                            r#"{{"content":[{{"type":"text","text":"{text}"}},{{"type":"text","text":{}}}]}}"#,
                            serde_json::to_string(&object).unwrap()
                        )),
                        "structured" => envelope(format!(r#"{{"structuredContent":{object}}}"#)),
                        "structured_error" => envelope(format!(
                            r#"{{"structuredContent":{object},"isError":true}}"#
                        )),
                        "is_error" => envelope(format!(
                            r#"{{"content":[{{"type":"text","text":"{text}"}}],"isError":true}}"#
                        )),
                        "embedded" => envelope(format!(
                            r#"{{"content":[{{"type":"resource","resource":{{"uri":"file:///{string}","mimeType":"text/{string}","text":"{text}"}}}},{{"type":"image","data":"","mimeType":"image/{string}"}},{{"type":"x-{string}"}}]}}"#
                        )),
                        "rpc_error" => format!(
                            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32000,"message":"{text}","data":{object}}}}}"#
                        ),
                        "http_400" => {
                            return Reply::raw(400, "application/json", object);
                        }
                        _ => {
                            // An SSE answer: a log message quoting the secret, then the result,
                            // its bytes cut into chunks inside the secret.
                            let log = format!(
                                r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"error","logger":"l {string}","data":{object}}}}}"#
                            );
                            let result = envelope(format!(
                                r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#
                            ));
                            let sse = format!("data: {log}\n\ndata: {result}\n\n");
                            let at = sse.rfind(&string).unwrap_or(0)
                                + string.len() * case.cut / 8;
                            let at = (0..=at).rev().find(|&i| sse.is_char_boundary(i)).unwrap_or(0);
                            let (a, b) = sse.split_at(at);
                            let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
                                Ok(Bytes::from(a.to_string())),
                                Ok(Bytes::from(b.to_string())),
                            ];
                            return Reply::stream(
                                200,
                                "text/event-stream",
                                futures_util::stream::iter(chunks),
                            );
                        }
                    };
                    Reply::raw(200, "application/json", body)
                }
                _ => Reply::raw(
                    200,
                    "application/json",
                    format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"no {string}"}}}}"#
                    ),
                ),
            }
        }
    })
    .await
}

/// A server whose start fails with a `500` quoting the case's secrets in a JSON body.
async fn failing_server(case: &Case) -> crate::support::hostile::Server {
    let object = object_with(
        case.position,
        &encode(&case.key, case.encoding),
        &case.account,
    );
    serve(move |req| {
        let object = object.clone();
        async move {
            match req.http_method.as_str() {
                "DELETE" | "GET" => standard(&req).unwrap(),
                _ => Reply::raw(500, "application/json", object),
            }
        }
    })
    .await
}

/// The forms a secret must not take in anything shown: as written, JSON-escaped (serde_json's,
/// PHP's `\/`, every character as `\uXXXX`, half so), percent-encoded.
fn forbidden(secrets: &[&str]) -> Vec<String> {
    let mut forms = Vec::new();
    for secret in secrets {
        let escaped = serde_json::to_string(secret).unwrap();
        forms.push(secret.to_string());
        forms.push(escaped[1..escaped.len() - 1].to_string());
        forms.push(encode(secret, Encoding::Slash));
        forms.push(encode(secret, Encoding::Unicode));
        forms.push(encode(secret, Encoding::Mixed));
        forms.push(
            percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
                .to_string(),
        );
        forms.push(encode(secret, Encoding::PercentMixed));
    }
    forms
}

fn assert_clean(label: &str, text: &str, secrets: &[&str]) {
    for form in forbidden(secrets) {
        if let Some(line) = text.lines().find(|line| line.contains(&form)) {
            panic!("{label} shows {form:?}: {line}");
        }
    }
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        for leaf in crate::support::leaves::strings_and_numbers(&value) {
            for secret in secrets {
                assert!(
                    !leaf.contains(secret),
                    "{label} holds a secret in JSON: {leaf}"
                );
            }
        }
    }
}

/// Runs one case: two entries (one echoing, one failing its start), every tool, listing and
/// Host-only path, at trace level; nothing shown or logged holds a secret, and every listing
/// and structured answer is JSON.
fn no_secret_byte_anywhere(case: &Case) {
    let secrets = [case.key.as_str(), case.account.as_str()];
    let (_capture, logs) = logs::capture("trace");
    let runtime = crate::support::current_thread_runtime();
    runtime.block_on(async {
        let echo = echo_server(case).await;
        let failing = failing_server(case).await;
        let headers = json!({"X-Api-Key": case.key, "X-Account": case.account});
        let host = Host::new(json!({
            "echo": {"url": echo.url, "headers": headers},
            "fail": {"url": failing.url, "headers": headers},
        }));
        host.ready("echo", Duration::from_secs(10)).await;
        host.wait_for(Duration::from_secs(10), |l| {
            server_entry(l, "fail")["status"] == "error"
        })
        .await;
        // The secrets did go out and come back: the test is not vacuous.
        assert_eq!(
            echo.requests()[0].header("x-api-key").as_deref(),
            Some(case.key.as_str())
        );
        let mut seen: Vec<(String, Result<String, ToolError>)> = Vec::new();
        let get = |args: Value| host.call("get_dynamic_tools", args);
        seen.push(("listing".into(), get(json!({})).await));
        for ns in ["echo", "fail"] {
            seen.push((format!("listing {ns}"), get(json!({"namespace": ns})).await));
            for host_only in ["sign_in_state", "logout", "sign_in_redirect"] {
                let args = json!({"namespace": ns, "address": format!("http://127.0.0.1:1/callback?error={}", case.key)});
                let args = if host_only == "sign_in_redirect" {
                    args
                } else {
                    json!({"namespace": ns})
                };
                seen.push((format!("{host_only} {ns}"), host.call(host_only, args).await));
            }
        }
        for name in TOOLS {
            seen.push((
                format!("lookup {name}"),
                get(json!({"namespace": "echo", "toolName": name})).await,
            ));
            let call = host.call(
                "call_dynamic_tool",
                json!({"namespace": "echo", "toolName": name, "arguments": {}}),
            );
            let outcome = tokio::time::timeout(Duration::from_secs(10), call)
                .await
                .expect("no call hangs");
            seen.push((format!("call {name}"), outcome));
        }
        seen.push((
            "call on fail".into(),
            host.call_tool("fail", "text").await,
        ));
        seen.push((
            "unknown tool".into(),
            host.call_tool("echo", &format!("n-{}", case.key)).await,
        ));
        let specs = format!("{:?}", host.pack.tools());
        drop(host);
        assert_clean("tool specs", &specs, &secrets);
        for (label, outcome) in &seen {
            assert_clean(&format!("{label} (Debug)"), &format!("{outcome:?}"), &secrets);
            match outcome {
                Ok(text) => assert_clean(label, text, &secrets),
                Err(e) => {
                    assert_clean(label, &e.message, &secrets);
                    assert_clean(label, &e.to_string(), &secrets);
                }
            }
        }
        for (label, outcome) in &seen {
            let json_answer = label.starts_with("listing")
                || label.starts_with("lookup")
                || label == "call structured";
            if json_answer {
                let text = outcome.as_ref().expect(label);
                assert!(
                    serde_json::from_str::<Value>(text).is_ok(),
                    "{label} is no JSON: {text}"
                );
            }
        }
        let structured = seen
            .iter()
            .find(|(label, _)| label == "call structured")
            .and_then(|(_, outcome)| outcome.as_ref().ok())
            .unwrap();
        // A secret under the earlier of two keys of one name is dropped with that member (the
        // last one wins, docs/configuration.md "One reader"); anywhere else it is scrubbed.
        if matches!(case.position, Position::DuplicateKey) {
            assert_eq!(
                serde_json::from_str::<Value>(structured).unwrap(),
                json!({"a": "/", "b": 1}),
                "{structured}"
            );
        } else {
            assert!(
                structured.contains("[redacted]"),
                "the echo came back, scrubbed: {structured}"
            );
        }
    });
    drop(runtime);
    assert_clean("the log", &logs.text(), &secrets);
}

/// Every [`Position`], for the property to draw from.
const POSITIONS: [Position; 4] = [
    Position::String,
    Position::Key,
    Position::Number,
    Position::DuplicateKey,
];

/// Every [`Encoding`], for the property to draw from.
const ENCODINGS: [Encoding; 6] = [
    Encoding::Plain,
    Encoding::Slash,
    Encoding::Unicode,
    Encoding::Mixed,
    Encoding::Percent,
    Encoding::PercentMixed,
];

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 12,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_configured_secret_reaches_any_exit(
        head in "[a-z0-9]{4,10}",
        tail in "[a-zé0-9]{4,10}",
        account in "[1-9][0-9]{15,17}",
        position in proptest::sample::select(POSITIONS.to_vec()),
        encoding in proptest::sample::select(ENCODINGS.to_vec()),
        cut in 0usize..8,
    ) {
        let case = Case { key: format!("{head}/{tail}"), account, position, encoding, cut };
        no_secret_byte_anywhere(&case);
    }
}

// Cut secrets, session ids and re-encodings: each exit through the gate.
pub(crate) mod cut_and_echoed {
    use serde_json::json;

    use crate::support::hostile::{
        Received, Reply, result, serve, standard, text_result, tool, tools_page,
    };
    use crate::support::logs::Logs;
    use crate::support::{Host, WAIT};

    /// A configured key that the server echoes back in the tests below.
    const KEY: &str = "sk-attack-0123456789abcdef";

    /// A server with one tool `echo` whose call answers the value of the request header `header`
    /// (or `none`) as its text, and whose `initialize` sets `Mcp-Session-Id` to `session`.
    pub(crate) async fn echo_server(
        header: &'static str,
        session: &'static str,
    ) -> crate::support::hostile::Server {
        serve(move |req: Received| async move {
        if req.method() == "initialize" {
            return Reply::json(&result(
                &req.id(),
                json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "echo", "version": "0"}
                }),
            ))
            .header("mcp-session-id", session);
        }
        if let Some(reply) = standard(&req) {
            return reply;
        }
        let id = req.id();
        match req.method() {
            "tools/list" => Reply::json(&tools_page(&id, vec![tool("echo", "Echoes a header.")], None)),
            "tools/call" => {
                let echoed = req.header(header).unwrap_or_else(|| "none".into());
                Reply::json(&text_result(&id, &echoed))
            }
            _ => Reply::json(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"}})),
        }
    })
    .await
    }

    /// The rule: no log line at `RUST_LOG=trace` holds a secret; a server that echoes the
    /// configured key as its `Mcp-Session-Id` gets it recorded unscrubbed in the request span
    /// (`mcp.session.id`, src/http/trace.rs), which every event inside the span prints.
    #[tokio::test]
    async fn a_session_id_echoing_the_key_is_logged_in_the_request_span() {
        let server = echo_server("x-api-key", KEY).await;
        let logs = Logs::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .without_time()
            .with_env_filter(tracing_subscriber::EnvFilter::new("trace"))
            .finish();
        crate::support::logs::keep_interest();
        let guard = tracing::subscriber::set_default(subscriber);
        // Interest cached while another test's thread had no subscriber would hide the spans.
        tracing::callsite::rebuild_interest_cache();
        let host = Host::new(json!({"k": {"url": server.url, "headers": {"X-Api-Key": KEY}}}));
        host.ready("k", WAIT).await;
        let text = host.call_tool("k", "echo").await.expect("the call answers");
        drop(host);
        drop(guard);
        assert!(!text.contains(KEY), "{text}");
        assert!(
            !logs.lines_with("mcp.request{").is_empty(),
            "no request span was captured: {}",
            logs.text()
        );
        let leaked: Vec<String> = logs.lines_with(KEY);
        assert!(
            leaked.is_empty(),
            "{} log lines show the key, e.g. {:?}",
            leaked.len(),
            leaked.first()
        );
    }

    /// The rule: "Text is scrubbed before it is cut to a bound, so a secret that straddles a
    /// cut leaves no prefix behind", with the gate scrubbing "with the secrets of every entry".
    /// Server `b` repeats entry `a`'s key in a description; `b`'s own intake scrub does not know
    /// it, the search answer cuts the description to one line (160 bytes) inside the key, and the
    /// exit gate no longer finds the whole key: its first bytes are shown.
    #[tokio::test]
    async fn another_entrys_key_cut_by_a_search_answers_one_line_leaves_a_prefix() {
        let a = echo_server("x-api-key", "s-5").await;
        let description = format!("{} {KEY}", "w".repeat(140));
        let b =
            crate::support::hostile::serve_tools(vec![tool("leaky_tool", &description)], |req| {
                Reply::json(&text_result(&req.id(), "ok"))
            })
            .await;
        let host = super::keyed_and_plain(&a.url, KEY, &b.url).await;
        let answer = host
            .call("get_dynamic_tools", json!({"query": "leaky_tool"}))
            .await
            .expect("the search answers");
        assert!(
            !answer.contains(&KEY[..12]),
            "a prefix of a's key is shown: {answer}"
        );
    }

    /// The rule: the same cut, in a listing's reason: server `b` fails its start with a body
    /// repeating entry `a`'s key; the reason is cut to its bound inside one occurrence, and the
    /// gate, which knows `a`'s key, leaves the cut one's first bytes.
    #[tokio::test]
    async fn another_entrys_key_cut_by_a_reasons_bound_leaves_a_prefix() {
        let a = echo_server("x-api-key", "s-7").await;
        let b = serve(|req: Received| async move {
            if req.http_method == "DELETE" {
                return Reply::raw(200, "text/plain", "");
            }
            Reply::raw(500, "text/plain", format!("{KEY} ").repeat(200))
        })
        .await;
        let host = Host::new(json!({
            "a": {"url": a.url, "headers": {"X-Api-Key": KEY}},
            "b": {"url": b.url}
        }));
        host.ready("a", WAIT).await;
        let entry = host.failed("b", WAIT).await.to_string();
        assert!(
            !entry.contains(&KEY[..6]),
            "a prefix of a's key is shown: {entry}"
        );
    }
}

// Log fields: every one made of a server's text is scrubbed of every entry's secrets.
mod log_fields {
    use serde_json::json;

    use crate::support::hostile::{Reply, rpc_error, serve_tools, text_result, tool};
    use crate::support::logs;

    /// Entry `a`'s key: `b`'s server quotes it (a header both entries' servers share, say).
    const KEY_A: &str = "sk-shared/0123456789abcdef";

    /// The rule: "No output (…, log line, …) may contain a header value": at `RUST_LOG=trace`,
    /// server `b`'s log notification, its logger's name, a notification of a method not read
    /// and its call's error all quote entry `a`'s key (as written and percent-encoded with hex
    /// digits in both cases); no log line shows it, although `b`'s entry does not hold it.
    #[tokio::test]
    async fn a_log_line_of_one_entry_quoting_another_entrys_key_is_scrubbed() {
        let (guard, logs) = logs::capture("trace");
        tracing::callsite::rebuild_interest_cache();
        let a = serve_tools(vec![tool("ok", "Answers ok.")], |req| {
            Reply::json(&text_result(&req.id(), "ok"))
        })
        .await;
        let encoded = "sk-shared%2f0123456789abcdef";
        let mixed = "sk%2Dshared%2f0123456789abcdef";
        let b = serve_tools(vec![tool("leak", "Quotes a header.")], move |req| {
            Reply::sse(&[
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {
                    "level": "error", "logger": format!("proxy {KEY_A}"),
                    "data": format!("upstream refused X-Api-Key: {KEY_A} ({encoded}, {mixed})")
                }}),
                json!({"jsonrpc": "2.0", "method": format!("notifications/{KEY_A}")}),
                rpc_error(&req.id(), -32000, &format!("upstream said {KEY_A}")),
            ])
        })
        .await;
        let host = super::keyed_and_plain(&a.url, KEY_A, &b.url).await;
        let answer = host.call_tool("b", "leak").await;
        drop(host);
        drop(guard);
        let error = answer.expect_err("the call fails");
        assert!(!error.message.contains(KEY_A), "{}", error.message);
        assert!(
            !logs.lines_with("upstream refused").is_empty(),
            "the server's log line was not captured: {}",
            logs.text()
        );
        for form in [KEY_A, "0123456789abcdef"] {
            let leaked = logs.lines_with(form);
            assert!(leaked.is_empty(), "a log line shows {form}: {:?}", leaked);
        }
    }
}

/// A Host with entry `a` at `a_url` sending `X-Api-Key: key` and entry `b` at `b_url` with no
/// secret of its own, once both are ready.
async fn keyed_and_plain(a_url: &str, key: &str, b_url: &str) -> crate::support::Host {
    let host = crate::support::Host::new(json!({
        "a": {"url": a_url, "headers": {"X-Api-Key": key}},
        "b": {"url": b_url}
    }));
    host.ready("a", crate::support::WAIT).await;
    host.ready("b", crate::support::WAIT).await;
    host
}
