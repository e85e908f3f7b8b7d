//! The one reader of untrusted JSON text, through the Host contract: an `mcp.json` nested past
//! the bound makes the Pack unavailable with the place (never a stack overflow, even on a 2 MiB
//! thread), escaped surrogate pairs are characters, and a lone surrogate escape a server cut in
//! half keeps the tool and the text, as U+FFFD, in a JSON body and in an event alike (README
//! "Configuration"). A reply nested past the bound is refused at once in an event as in a JSON
//! body (never taken for a lost reply: no re-issue, no cancel); an error body's preview keeps
//! the last member of a repeated key, even cut, and has what is nested past the bound written
//! over, so its signals (a modern error, a gone session) are still read; a text body is shown.
//! An event nested too deep is read as any event is, what is too deep written over: when it
//! answers the call (also as an error with a `null` id, a result with no id) the call fails
//! with the refusal, once; else it is read on (a notification, a server request answered, a
//! response to another request), its id still the stream's place.

use std::time::Duration;

use runvil_plugin::{ToolError, ToolErrorKind};
use serde_json::{Value, json};

use crate::support::host_cli::{code_and_stderr, host_command};
use crate::support::hostile::{
    self, Reply, entry, list_changed_initialize, result, serve_routes, standard, tool, tools_page,
};
use crate::support::modern::{Canned, Modern, Step};
use crate::support::{Host, WAIT};

/// A config text whose `mcpServers` entry holds `depth` nested arrays, in one line.
fn deep_config(depth: usize) -> String {
    format!(
        r#"{{"mcpServers": {{"docs": {{"url": "http://127.0.0.1:9/mcp", "x": {}{}}}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

/// Constructs the Pack from `config` on a thread with a 2 MiB stack (a Host's worker thread),
/// answering the reason it is unavailable, if any.
fn construct_on_small_stack(config: Value) -> Result<(), String> {
    let runtime = tokio::runtime::Handle::current();
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            let _context = runtime.enter();
            Host::try_new(config).map(drop).map_err(|e| e.reason)
        })
        .unwrap()
        .join()
        .expect("constructing the Pack does not crash the thread")
}

#[tokio::test]
async fn a_deeply_nested_config_text_makes_the_pack_unavailable_with_the_place() {
    // 5 KB of brackets: today's JSONC parser recurses once per level.
    let refused = construct_on_small_stack(Value::String(deep_config(5000)));
    // The 65th open bracket: the entry's `{` is the third level, so the 62nd `[`.
    let column = r#"{"mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp", "x": "#.len() + 62;
    assert_eq!(
        refused,
        Err(format!(
            "the mcp config's text nests arrays and objects deeper than 64 levels at line 1 column {column}"
        ))
    );
    // At the bound the text is read, and the entry is the Pack's to judge.
    assert_eq!(
        construct_on_small_stack(Value::String(deep_config(61))),
        Ok(())
    );
}

#[tokio::test]
async fn an_escaped_surrogate_pair_in_config_text_is_one_character() {
    // Python's json.dumps writes every emoji so.
    let text = r#"{"note": "launch \ud83d\ude80", "mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp"}}}"#;
    let host = Host::try_new(Value::String(text.to_string())).map_err(|e| e.reason);
    assert!(host.is_ok(), "{:?}", host.err());
    // A lone half in config text is read too, as U+FFFD; a real error names no text.
    let lone = r#"{"note": "\ud83d", "mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp"}}}"#;
    assert!(Host::try_new(Value::String(lone.to_string())).is_ok());
    let broken = r#"{"mcpServers": {"docs": {"url": "\uZZZZ"}}}"#;
    let reason = Host::try_new(Value::String(broken.to_string()))
        .map(drop)
        .map_err(|e| e.reason);
    assert_eq!(
        reason,
        Err("the mcp config's text is not JSON (comments and trailing commas are allowed): invalid escape at line 1 column 39".to_string())
    );
}

/// A server whose tool description and call result hold a lone high surrogate escape, the
/// emoji cut in half by a server that truncates UTF-16.
async fn cut_server() -> crate::support::hostile::Server {
    serve_routes(|req| async move {
        let id = req.id();
        match req.method() {
            "tools/list" => Some(Reply::raw(
                200,
                "application/json",
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"t","description":"launch \ud83d","inputSchema":{{"type":"object"}}}}]}}}}"#
                ),
            )),
            "tools/call" => Some(Reply::raw(
                200,
                "text/event-stream",
                format!(
                    "data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"cut \\ud83d\"}}]}}}}\n\n"
                ),
            )),
            _ => standard(&req),
        }
    })
    .await
}

#[tokio::test]
async fn a_lone_surrogate_keeps_the_tool_and_the_result_as_a_replacement_character() {
    let server = cut_server().await;
    let host = Host::new(json!({"k": {"url": server.url}}));
    host.ready("k", Duration::from_secs(10)).await;
    let one: Value = serde_json::from_str(&host.lookup("k", "t").await.expect("listed")).unwrap();
    assert_eq!(one["description"], json!("launch \u{FFFD}"), "{one}");
    let text = host.call_tool("k", "t").await.expect("the call answers");
    assert!(text.contains("cut \u{FFFD}"), "{text}");
}

/// Runs the host CLI with `args` after writing `text` as its config file (the last but one
/// argument is replaced by the file's path); answers the exit code and stderr.
async fn host_with_config(tag: &str, text: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("plugin-mcp-reader-{tag}-{}", std::process::id()));
    let config = dir.with_extension("json");
    std::fs::write(&config, text).unwrap();
    let mut command = host_command(&dir);
    for arg in args {
        match *arg {
            "CONFIG" => command.arg(&config),
            other => command.arg(other),
        };
    }
    let out = command.output().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&config);
    code_and_stderr(&out)
}

/// `host login` and `host logout` hand the file's text to the Pack, as calls do: a text the Pack
/// refuses (nested too deep, a missing comma, a single-quoted string, a key named twice) exits 2
/// with the Pack's reason, never a crash and never a looser reading that signs in to the second
/// of two `url`s.
#[tokio::test]
async fn host_login_and_logout_read_the_config_as_the_pack_does() {
    let key = "sk-reader-0123456789";
    let cases = [
        (
            "deep",
            deep_config(5000),
            "the mcp config's text nests arrays and objects deeper than 64 levels at line 1 column",
        ),
        (
            "comma",
            r#"{"mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp" "headers": {}}}}"#.to_string(),
            "the mcp config's text is not JSON (comments and trailing commas are allowed): expected `,` or `}` at line 1 column 58",
        ),
        (
            "quote",
            format!(r#"{{"mcpServers": {{"docs": {{"url": "http://127.0.0.1:9/mcp", "headers": {{"X-Key": '{key}'}}}}}}}}"#),
            "the mcp config's text is not JSON (comments and trailing commas are allowed): expected value at line 1 column 80",
        ),
        (
            "twice",
            r#"{"mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp", "url": "http://127.0.0.1:8/mcp"}}}"#.to_string(),
            r#"the mcp config's text names the key "url" twice in one object; keep one at line 1 column 63"#,
        ),
    ];
    for (tag, text, reason) in &cases {
        for command in [
            &["logout", "CONFIG", "docs"][..],
            &["login", "--wait", "1", "CONFIG", "docs"],
        ] {
            let (code, stderr) = host_with_config(tag, text, command).await;
            assert_eq!(code, Some(2), "{tag} {command:?}: {stderr}");
            assert!(stderr.contains(reason), "{tag} {command:?}: {stderr}");
            assert!(!stderr.contains(key), "{tag}: {stderr}");
        }
    }
    // What the Pack reads, the host reads: an emoji Python wrote as a surrogate pair, comments.
    let text = "{\n // the team's\n \"note\": \"\\ud83d\\ude80\", \"mcpServers\": {\"docs\": {\"url\": \"http://127.0.0.1:9/mcp\",},},}";
    let (code, stderr) = host_with_config("pair", text, &["logout", "CONFIG", "docs"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stderr) = host_with_config("pair-none", text, &["logout", "CONFIG", "other"]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("has no server \"other\""), "{stderr}");
    // A config problem, not bad usage: no usage text.
    assert!(!stderr.contains("usage:"), "{stderr}");
}

/// `host login` stops at once when the server's start failed in a way that will not fix itself
/// (the listing's `lasting`: nothing serves MCP at the url), instead of waiting out `--wait`.
#[tokio::test]
async fn host_login_stops_at_a_lasting_failure() {
    let server = crate::support::hostile::serve(|_| async {
        Reply::raw(404, "text/html", "<html>not here</html>")
    })
    .await;
    let text = json!({"mcpServers": {"docs": {"url": server.url}}}).to_string();
    let started = std::time::Instant::now();
    let (code, stderr) = host_with_config(
        "lasting",
        &text,
        &["login", "--wait", "60", "CONFIG", "docs"],
    )
    .await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with("host: login failed: HTTP 404"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(30), "{stderr}");
}

/// The config's text is JSONC "the way VS Code writes it: comments, trailing commas ..., nothing
/// looser" (docs/configuration.md). A comma with no value before it (`[,]`, `{,}`) is no trailing
/// comma: VS Code's parser reports "Value expected". The Pack is unavailable, naming the place.
#[tokio::test]
async fn a_comma_with_no_value_before_it_is_not_a_trailing_comma() {
    // What is refused: a missing comma.
    let missing =
        r#"{"mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp" "excludeTools": []}}}"#;
    assert!(Host::try_new(Value::String(missing.into())).is_err());
    for text in [
        r#"{"mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp", "excludeTools": [,]}}}"#,
        r#"{"mcpServers": {"docs": {, "url": "http://127.0.0.1:9/mcp"}}}"#,
    ] {
        let built = Host::try_new(Value::String(text.into())).map(drop);
        assert!(built.is_err(), "accepted: {text}");
    }
}

/// A `tools/call` result whose `structuredContent` names one key twice through two lone
/// surrogate escapes (`\ud800` and `\udc00`, both read as U+FFFD), as the body of a reply of
/// `content_type`.
fn twice_through_surrogates(id: &serde_json::Value, content_type: &str) -> Reply {
    let message = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"structuredContent":{{"\ud800":"first","\udc00":"last"}}}}}}"#
    );
    match content_type {
        "text/event-stream" => Reply::raw(
            200,
            content_type,
            format!("event: message\ndata: {message}\n\n"),
        ),
        _ => Reply::raw(200, content_type, message),
    }
}

/// The answer of tool `t` on a server replying in `content_type`.
async fn answer_in(content_type: &'static str) -> String {
    let server = hostile::serve_tools(vec![hostile::tool("t", "a tool")], move |req| {
        twice_through_surrogates(&req.id(), content_type)
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", WAIT).await;
    host.call_tool("s", "t").await.unwrap()
}

/// A key named twice only once its lone surrogate escapes are mended reads the same in an event
/// as in a JSON body: the last member only, not the earlier one the decoded value does not hold.
#[tokio::test]
async fn a_key_named_twice_through_lone_surrogates_shows_one_member_in_an_event() {
    let last = r#"{"\ufffd":"last"}"#;
    assert_eq!(answer_in("application/json").await, last);
    assert_eq!(answer_in("text/event-stream").await, last);
}

/// The error message of tool `t` on a server whose `tools/call` is refused with HTTP 500 and a
/// JSON body naming `"error"` twice, its `"detail"` nesting `depth` arrays.
async fn preview_of(depth: usize) -> String {
    let server = hostile::serve_tools(vec![hostile::tool("t", "a tool")], move |_| {
        let body = format!(
            r#"{{"error":"earlier-member","error":"later-member","detail":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        Reply::raw(500, "application/json", body)
    })
    .await;
    let host = Host::new(json!({"s": hostile::entry(&server.url)}));
    host.ready("s", WAIT).await;
    host.call_tool("s", "t").await.unwrap_err().message
}

/// An error body is a server's JSON text too: its preview keeps only the last member of a key
/// named twice, also when the body nests past the reader's bound, and what is nested past it
/// is shown as `0` (the reader writes it over), so no reader meets it.
#[tokio::test]
async fn an_error_body_shows_the_last_member_and_nothing_nested_past_the_bound() {
    let prefix = format!(
        r#"server "s": HTTP 500 Internal Server Error: {{{}"error":"later-member","detail":"#,
        " ".repeat(25)
    );
    assert_eq!(preview_of(3).await, format!("{prefix}[[[]]]}}"));
    // The object is the first level, so 63 arrays fit; the 64th, with the 6 inside it
    // (14 bytes), is written over.
    assert_eq!(
        preview_of(70).await,
        format!(
            "{prefix}{}0{}{}}}",
            "[".repeat(63),
            " ".repeat(13),
            "]".repeat(63)
        )
    );
}

/// The error message of tool `t` on a server refusing `tools/call` with HTTP 500 and `body`.
async fn refusal_of(body: String) -> String {
    let server = hostile::serve_tools(vec![hostile::tool("t", "a tool")], move |_| {
        Reply::raw(500, "application/json", body.clone())
    })
    .await;
    let host = Host::new(json!({"s": hostile::entry(&server.url)}));
    host.ready("s", WAIT).await;
    host.call_tool("s", "t").await.unwrap_err().message
}

/// An error body longer than its preview, naming `"error"` twice, the later member cut by the
/// preview's bound: the earlier member is blanked as soon as the key is named again, so the
/// cut preview does not quote it either.
#[tokio::test]
async fn an_error_body_cut_inside_the_later_member_does_not_show_the_earlier_one() {
    let long = "x".repeat(9000);
    let whole = refusal_of(format!(
        r#"{{"error":"earlier-member","error":"later-member {}"}}"#,
        &long[..100]
    ))
    .await;
    assert_eq!(
        whole,
        format!(
            r#"server "s": HTTP 500 Internal Server Error: {{{}"error":"later-member {}"}}"#,
            " ".repeat(25),
            &long[..100]
        )
    );
    let cut = refusal_of(format!(
        r#"{{"error":"earlier-member","error":"later-member {long}"}}"#
    ))
    .await;
    // The reason shows the first KiB of the preview, cut inside the later member.
    assert_eq!(
        cut,
        format!(
            r#"server "s": HTTP 500 Internal Server Error: {{{}"error":"later-member {}…"#,
            " ".repeat(25),
            "x".repeat(973)
        )
    );
}

const LIMIT: Duration = Duration::from_secs(10);

/// A `tools/call` response for `id` whose result's `structuredContent` nests 70 arrays: past the
/// reader's bound of 64.
fn deep_response(id: &Value) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"structuredContent":{{"deep":{}{}}}}}}}"#,
        "[".repeat(70),
        "]".repeat(70)
    )
}

/// `deep_response` as the one `message` event of a `200 text/event-stream` reply.
fn deep_event(id: &Value) -> Reply {
    Reply::raw(
        200,
        "text/event-stream",
        format!("event: message\ndata: {}\n\n", deep_response(id)),
    )
}

/// A modern (2026-07-28) server listing tool `t` whose `tools/call` is answered by `call`.
async fn modern_server(call: fn(&Value) -> Reply) -> hostile::Server {
    hostile::serve_all(move |req| async move {
        match req.method() {
            "server/discover" => Reply::json(&result(
                &req.id(),
                json!({"supportedVersions": ["2026-07-28"],
                       "capabilities": {"tools": {}},
                       "serverInfo": {"name": "deep", "version": "0"}}),
            )),
            "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
            "tools/call" => call(&req.id()),
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await
}

/// A modern server's answer to a `tools/call` that nests past the bound is an answer all the
/// same, whether it came as a JSON body or as an event: the call is sent once and refused with
/// the nesting named. In an event, the skipped message leaves a stream "closed before the
/// response", a lost reply, so the tool call is sent to the server a second time.
#[tokio::test]
async fn a_modern_reply_nested_past_the_bound_in_an_event_is_not_re_issued() {
    let body = modern_server(|id| Reply::raw(200, "application/json", deep_response(id))).await;
    let host = Host::new(json!({"m": entry(&body.url)}));
    host.ready("m", LIMIT).await;
    let refused = host.call_tool("m", "t").await.unwrap_err();
    assert_eq!(body.count("tools/call"), 1, "{refused:?}");
    assert_eq!(
        refused.message,
        r#"server "m": the server's JSON reply nests arrays and objects deeper than 64 levels at line 1 column 137"#
    );

    let event = modern_server(deep_event).await;
    let host = Host::new(json!({"m": entry(&event.url)}));
    host.ready("m", LIMIT).await;
    let refused = host.call_tool("m", "t").await.unwrap_err();
    assert_eq!(event.count("tools/call"), 1, "sent again: {refused:?}");
    assert_eq!(
        refused.message,
        r#"server "m": the server's event nests arrays and objects deeper than 64 levels at line 1 column 137"#
    );
}

/// A legacy server's answer nested past the bound, in an event: it was answered, so it is not
/// "closed before the response" and no `notifications/cancelled` goes out for it (as for the
/// same answer as a JSON body, refused as the server's JSON reply).
#[tokio::test]
async fn a_legacy_reply_nested_past_the_bound_in_an_event_is_not_cancelled() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| deep_event(&req.id())).await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", LIMIT).await;
    let refused = host.call_tool("s", "t").await.unwrap_err();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(server.count("notifications/cancelled"), 0, "{refused:?}");
    assert_eq!(
        refused.message,
        r#"server "s": the server's event nests arrays and objects deeper than 64 levels at line 1 column 137"#
    );
}

/// A `text/plain` error body is no JSON: a server's words that happen to open many brackets
/// (its echo of the arguments it could not parse) are shown, bounded and scrubbed, like any
/// other text, not withheld as "a JSON body nested deeper than 64 levels".
#[tokio::test]
async fn a_plain_text_error_body_with_many_brackets_is_shown_not_called_deep_json() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |_| {
        Reply::raw(
            400,
            "text/plain",
            format!("cannot parse the arguments near {}", "[".repeat(70)),
        )
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", LIMIT).await;
    let refused = host.call_tool("s", "t").await.unwrap_err();
    assert_eq!(
        refused.message,
        format!(
            r#"server "s": HTTP 400 Bad Request: cannot parse the arguments near {}"#,
            "[".repeat(70)
        )
    );
}

/// Nested `depth` arrays, as a JSON value.
fn nested(depth: usize) -> Value {
    serde_json::from_str(&format!("{}{}", "[".repeat(depth), "]".repeat(depth))).unwrap()
}

/// What a modern server's `400` refusal of `tools/call` with `-32602 Invalid params`, its `data`
/// nesting `depth` arrays (an echo of the arguments it could not take), makes of the call: the
/// error, and the server's trail of `POST method status` lines after the Pack was ready.
async fn invalid_params_with_data(depth: usize) -> (Result<String, ToolError>, Vec<String>) {
    let server = Modern::start().await;
    let host = Host::new(json!({"m": entry(&server.url)}));
    host.ready("m", LIMIT).await;
    let before = server.trail().len();
    server.answer_next(
        "tools/call",
        Canned::Error(400, -32602, "Invalid params".into(), nested(depth)),
    );
    let args = json!({"namespace": "m", "toolName": "echo", "arguments": {}});
    let refused = host.call("call_dynamic_tool", args).await;
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    (refused, trail[before..].iter().map(Step::line).collect())
}

/// A modern server's JSON-RPC error on `400` is its refusal of the request, whatever its `data`
/// holds: with data nested past the reader's bound the body is not read, so the `400` is taken
/// for a plain one, which on a modern route is the sign of a legacy server (`era_signal`): the
/// Pack probes the era again and sends the refused tool call a second time.
#[tokio::test]
async fn a_modern_error_with_deep_data_is_no_sign_of_a_legacy_server() {
    let (shallow, shallow_trail) = invalid_params_with_data(3).await;
    let (deep, deep_trail) = invalid_params_with_data(70).await;
    let kind = |answer: &Result<String, ToolError>| answer.as_ref().err().map(|e| e.kind);
    assert_eq!(
        kind(&shallow),
        Some(ToolErrorKind::InvalidArguments),
        "{shallow:?}"
    );
    assert_eq!(shallow_trail, ["POST tools/call 400"], "{shallow:?}");
    // Not taken for a plain 400 (a legacy server's sign): no `server/discover`, no resend.
    assert_eq!(deep_trail, shallow_trail, "{deep:?}");
    assert_eq!(kind(&deep), kind(&shallow), "{deep:?}");
}

/// What a legacy server whose first `tools/call` is refused with `400` and the JSON-RPC error
/// "Bad Request: No valid session ID provided" (the words of the TypeScript and Python SDKs),
/// its `data` nesting `depth` arrays, makes of the call, and how many `initialize` it received.
async fn session_gone_with_data(depth: usize) -> (Result<String, ToolError>, usize) {
    let server = hostile::serve_tools(vec![tool("t", "t")], move |req| {
        if req.nth == 0 {
            let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000,
                "message": "Bad Request: No valid session ID provided", "data": nested(depth)}});
            return Reply::raw(400, "application/json", body.to_string());
        }
        Reply::json(&hostile::text_result(&req.id(), "ok"))
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", LIMIT).await;
    let answer = host.call_tool("s", "t").await;
    (answer, server.count("initialize"))
}

/// A server's "no valid session" refusal is its word that the session is gone, whatever its
/// `data` holds: a new session is made and the call answered. With data nested past the
/// reader's bound the body is not read, the words are not seen, and the call fails with a plain
/// HTTP 400 on a session the server no longer knows.
#[tokio::test]
async fn a_session_gone_refusal_with_deep_data_still_renews_the_session() {
    let shallow = session_gone_with_data(3).await;
    assert_eq!(shallow, (Ok("ok".to_string()), 2));
    let deep = session_gone_with_data(70).await;
    assert_eq!(deep, shallow);
}

/// A `notifications/message` whose params nest 70 arrays: past the reader's bound of 64.
fn deep_notification() -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":{}{}}}}}"#,
        "[".repeat(70),
        "]".repeat(70)
    )
}

/// The standalone stream's one event, `id: e1`, nests past the bound and is skipped; the
/// stream then ends. The `GET` that reopens it must resume after that event
/// (`Last-Event-ID: e1`), as after any event: the event's id is the stream's place whatever
/// its data holds.
#[tokio::test]
async fn a_skipped_deep_event_on_the_standalone_stream_still_moves_the_last_event_id() {
    let opened = std::sync::Arc::new(std::sync::Mutex::new(0usize));
    let server = hostile::serve_every_get(move |req| {
        let opened = std::sync::Arc::clone(&opened);
        async move {
            if req.http_method == "GET" {
                let mut opened = opened.lock().unwrap();
                *opened += 1;
                if *opened == 1 {
                    return Reply::raw(
                        200,
                        "text/event-stream",
                        format!("id: e1\nevent: message\ndata: {}\n\n", deep_notification()),
                    );
                }
                return Reply::stream(200, "text/event-stream", futures_util::stream::pending());
            }
            if req.http_method == "DELETE" {
                return Reply::raw(200, "text/plain", "");
            }
            match req.method() {
                "initialize" => list_changed_initialize(&req.id()),
                "tools/list" => Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None)),
                _ => Reply::accepted(),
            }
        }
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", Duration::from_secs(10)).await;
    let gets = server
        .wait_until(Duration::from_secs(10), "the stream reopened", |r| {
            r.iter().filter(|r| r.http_method == "GET").count() >= 2
        })
        .await;
    let asked: Vec<Option<String>> = gets
        .iter()
        .filter(|r| r.http_method == "GET")
        .map(|r| r.header("last-event-id"))
        .collect();
    assert_eq!(asked[..2], [None, Some("e1".to_string())]);
    drop(host);
}

/// On a call's own reply stream, a server notification nested past the bound (a log message
/// whose data nests 70 arrays) comes before the response, which is well formed. The
/// notification is no reply: read where it is not too deep, and the call's answer that follows
/// is read.
#[tokio::test]
async fn a_deep_notification_before_the_answer_on_a_call_stream_does_not_lose_the_answer() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        let answer = hostile::text_result(&req.id(), "done");
        Reply::raw(
            200,
            "text/event-stream",
            format!(
                "event: message\ndata: {}\n\n{}",
                deep_notification(),
                hostile::sse_event(&answer)
            ),
        )
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", Duration::from_secs(10)).await;
    let answer = host.call_tool("s", "t").await;
    assert_eq!(server.count("tools/call"), 1);
    let text = answer.map_err(|e| e.message).unwrap();
    assert!(text.contains("done"), "{text}");
}

/// 70 nested arrays: past the reader's bound of 64.
fn deep() -> String {
    format!("{}{}", "[".repeat(70), "]".repeat(70))
}

/// Serves one tool whose call is answered by a stream of one `message` event holding `data`,
/// then the stream's end (no event id, so no resumption). Returns the call's outcome and how
/// many `tools/call` the server saw.
async fn call_answered_by(data: String) -> (Result<String, String>, usize) {
    let server = hostile::serve_tools(vec![tool("t", "t")], move |_req| {
        Reply::raw(
            200,
            "text/event-stream",
            format!("event: message\ndata: {data}\n\n"),
        )
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", Duration::from_secs(10)).await;
    let answer = host.call_tool("s", "t").await.map_err(|e| e.message);
    (answer, server.count("tools/call"))
}

/// An error response with a `null` id (the server could not read the request) is the call's
/// answer on its own stream (`route`: `ErrorWithoutId`). Its `data` nested past the bound,
/// the call fails with the refusal, the request sent once.
#[tokio::test]
async fn a_deep_error_with_a_null_id_on_a_call_stream_fails_the_call_with_the_refusal() {
    let data = format!(
        r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"boom","data":{}}}}}"#,
        deep()
    );
    let (answer, calls) = call_answered_by(data).await;
    let message = answer.unwrap_err();
    assert_eq!(
        message,
        r#"server "s": the server's event nests arrays and objects deeper than 64 levels at line 1 column 137"#
    );
    assert_eq!(calls, 1);
}

/// A tagged result with no id is read as the answer to the request awaited on its own stream
/// (`Flaw::NoId`: "a result without the request's id"). Its result nested past the bound, the
/// call fails with the refusal, the request sent once.
#[tokio::test]
async fn a_deep_result_without_an_id_on_a_call_stream_fails_the_call_with_the_refusal() {
    let data = format!(
        r#"{{"jsonrpc":"2.0","result":{{"content":[],"structuredContent":{{"a":{}}}}}}}"#,
        deep()
    );
    let (answer, calls) = call_answered_by(data).await;
    let message = answer.unwrap_err();
    assert_eq!(
        message,
        r#"server "s": the server's event nests arrays and objects deeper than 64 levels at line 1 column 127"#
    );
    assert_eq!(calls, 1);
}

/// The answer of a modern server's (MCP 2026-07-28) `echo` whose `tools/call` reply is one
/// event holding `data`, and how many times `tools/call` was posted.
async fn modern_call_answered_by(data: String) -> (Result<String, String>, usize) {
    use crate::support::modern::{Canned, Modern};
    let server = Modern::start().await;
    let host = Host::new(json!({"m": entry(&server.url)}));
    host.ready("m", Duration::from_secs(10)).await;
    server.answer_next(
        "tools/call",
        Canned::Raw(
            200,
            Some("text/event-stream"),
            format!("event: message\ndata: {data}\n\n"),
        ),
    );
    let args = json!({"namespace": "m", "toolName": "echo", "arguments": {}});
    let answer = host.call("call_dynamic_tool", args).await;
    server
        .settle(Duration::from_millis(300), Duration::from_secs(10))
        .await;
    (answer.map_err(|e| e.message), server.count("tools/call"))
}

/// The modern path (MCP 2026-07-28): the call's reply is one event, an error with a `null` id
/// whose `data` nests past the bound: the call fails with the refusal, `tools/call` posted once
/// (a reply was read: nothing to re-issue, the tool not run twice).
#[tokio::test]
async fn a_deep_error_with_a_null_id_on_a_modern_call_stream_fails_the_call_once() {
    let data = format!(
        r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"boom","data":{}}}}}"#,
        deep()
    );
    assert_eq!(
        modern_call_answered_by(data).await,
        (
            Err(
                r#"server "m": the server's event nests arrays and objects deeper than 64 levels at line 1 column 137"#
                    .to_string()
            ),
            1
        )
    );
}

/// A response to another request met on a call's own reply means the server answered
/// something: a stream that then ends is no lost reply to re-issue, also when that response
/// nests past the bound. Modern path: `tools/call` posted once, the call fails.
#[tokio::test]
async fn a_deep_response_to_another_request_on_a_modern_call_stream_is_no_lost_reply() {
    let data = format!(
        r#"{{"jsonrpc":"2.0","id":999,"result":{{"a":{}}}}}"#,
        deep()
    );
    assert_eq!(
        modern_call_answered_by(data).await,
        (
            Err(
                r#"server "m": the server's event stream held a response to another request and none to request 3"#
                    .to_string()
            ),
            1
        )
    );
}

/// Legacy path: the call's reply stream holds one event, a response to request 999 whose
/// result nests past the bound, then ends. The same response not nested too deep makes the
/// call fail as "a response to another request and none to request 4" (the server answered
/// something: no lost reply); so does the deep one, `tools/call` posted once.
#[tokio::test]
async fn a_deep_response_to_another_request_on_a_call_stream_is_no_lost_reply() {
    let data = format!(
        r#"{{"jsonrpc":"2.0","id":999,"result":{{"a":{}}}}}"#,
        deep()
    );
    let (answer, calls) = call_answered_by(data).await;
    assert_eq!(
        (answer, calls),
        (
            Err(
                r#"server "s": the server's event stream held a response to another request and none to request 4"#
                    .to_string()
            ),
            1
        )
    );
}

/// A server request (`ping`, id `srv-1`) on a call's reply stream, its params nested past the
/// bound, then the call's answer. The same request not nested too deep is answered (a `POST`
/// of a response to `srv-1`); a request must get a response (JSON-RPC 2.0 §4, MCP base
/// protocol), an error when it cannot be read: so is the deep one, once.
#[tokio::test]
async fn a_deep_server_request_on_a_call_stream_still_gets_a_response() {
    let server = hostile::serve_tools(vec![tool("t", "t")], |req| {
        let ping = format!(
            r#"{{"jsonrpc":"2.0","id":"srv-1","method":"ping","params":{{"a":{}}}}}"#,
            deep()
        );
        let answer = hostile::text_result(&req.id(), "done");
        Reply::raw(
            200,
            "text/event-stream",
            format!(
                "event: message\ndata: {ping}\n\n{}",
                hostile::sse_event(&answer)
            ),
        )
    })
    .await;
    let host = Host::new(json!({"s": entry(&server.url)}));
    host.ready("s", Duration::from_secs(10)).await;
    let answer = host.call_tool("s", "t").await.map_err(|e| e.message);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let answered = server
        .requests()
        .iter()
        .filter(|r| r.rpc["id"] == "srv-1")
        .count();
    assert_eq!((answer.is_ok(), answered), (true, 1));
}
