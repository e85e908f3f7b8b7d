//! Other clients' mcp.json dialects through the Host contract: every key of their remote-server
//! entries is read, mapped or refused by name (docs/configuration.md's table), tool filters,
//! credentials, per-server timeouts, Gemini CLI's `httpUrl`, a legacy SSE url, placeholders
//! sent as written (README "Configuration").

use std::time::Duration;

use runvil_plugin::ToolErrorKind;
use serde_json::{Value, json};

use crate::support::hostile::{self, Reply, server_entry};
use crate::support::{Host, logs};

const WAIT: Duration = Duration::from_secs(10);

/// A server listing `search`, `delete_repo`, `fetch` and `admin` at any path; a call to `slow`
/// never answers, any other call answers `called <name>`.
async fn tools_server() -> hostile::Server {
    let tools: Vec<Value> = ["search", "delete_repo", "fetch", "admin", "slow"]
        .into_iter()
        .map(|name| hostile::tool(name, "a tool"))
        .collect();
    hostile::serve_tools(tools, |req| {
        let name = req.rpc["params"]["name"].as_str().unwrap_or_default();
        if name == "slow" {
            return never();
        }
        Reply::json(&hostile::text_result(&req.id(), &format!("called {name}")))
    })
    .await
}

/// An event stream that never sends anything.
fn never() -> Reply {
    Reply::stream(200, "text/event-stream", futures_util::stream::pending())
}

fn tools_of(listing: &Value, namespace: &str) -> Vec<String> {
    server_entry(listing, namespace)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

/// Codex's `enabled_tools` / `disabled_tools` and Copilot CLI's `tools` are the filters they
/// are: an allow-list shows only what it names (`["*"]`: everything), a deny wins, and several
/// allow-lists must all name a tool. A hidden tool is `not_found`, naming the key, and never
/// reaches the server.
#[tokio::test]
async fn codex_and_copilot_tool_filters_hide_tools() {
    let server = tools_server().await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({
        "codex": {"url": url, "enabled_tools": ["search", "delete_repo", "fetch"], "disabled_tools": ["delete_repo"]},
        "copilot": {"url": url, "tools": ["search"]},
        "copilot_all": {"url": url, "tools": ["*"]},
        "mixed": {"url": url, "includeTools": ["search", "fetch"], "enabled_tools": ["search", "admin"]},
    }));
    let listing = host.settled(WAIT).await;
    let names = |ns| tools_of(&listing, ns);
    assert_eq!(names("codex"), ["fetch", "search"]);
    assert_eq!(names("copilot"), ["search"]);
    assert_eq!(
        names("copilot_all"),
        ["admin", "delete_repo", "fetch", "search", "slow"]
    );
    assert_eq!(names("mixed"), ["search"]);
    let cases = [
        ("codex", "delete_repo", "\"disabled_tools\" names it"),
        ("codex", "admin", "\"enabled_tools\" does not name it"),
        ("copilot", "fetch", "\"tools\" does not name it"),
        ("mixed", "admin", "\"includeTools\" does not name it"),
        ("mixed", "fetch", "\"enabled_tools\" does not name it"),
    ];
    for (namespace, tool, why) in cases {
        let error = host.call_tool(namespace, tool).await.unwrap_err();
        assert_eq!(
            (error.kind, error.message),
            (
                ToolErrorKind::NotFound,
                format!(
                    "server \"{namespace}\" has no tool \"{tool}\" that this Pack may call: its config entry's {why}, so it is neither listed nor callable"
                )
            )
        );
    }
    assert_eq!(
        host.call_tool("codex", "search").await.unwrap(),
        "called search"
    );
    let called: Vec<Value> = server
        .with_method("tools/call")
        .iter()
        .map(|r| r.rpc["params"]["name"].clone())
        .collect();
    assert_eq!(called, [json!("search")]);
}

/// Codex's `http_headers`, `env_http_headers` and `bearer_token_env_var` become headers; a helper
/// command, Google credentials, a header given twice, an unset variable and Cursor's `auth`
/// beside `oauth` or with another key refuse the entry, naming the key. Nothing quotes a value.
#[tokio::test]
async fn other_clients_credentials_are_mapped_or_refused_by_name() {
    const TOKEN: &str = "dialects-bearer-token-9f8e7d6c";
    const KEY: &str = "dialects-env-header-1a2b3c4d";
    // SAFETY: set before the Pack that reads them; other tests read the environment only
    // through `std::env`, which takes the same process-wide lock as `set_var`, and none reads
    // these names.
    unsafe {
        std::env::set_var("DIALECTS_BEARER", TOKEN);
        std::env::set_var("DIALECTS_KEY", KEY);
    }
    let (_capture, logs) = logs::capture("trace");
    let server = tools_server().await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({
        "codex": {
            "url": url,
            "http_headers": {"X-Plain": "plain-value"},
            "env_http_headers": {"X-Key": "DIALECTS_KEY"},
            "bearer_token_env_var": "DIALECTS_BEARER",
        },
        "helper": {"url": url, "headersHelper": "/usr/bin/print-headers"},
        "codex_helper": {"url": url, "http_headers_helper": "print-headers"},
        "google": {"url": url, "authProviderType": "google_credentials"},
        "impersonate": {"url": url, "targetServiceAccount": "sa@example.iam"},
        "twice": {"url": url, "headers": {"authorization": "Bearer x"}, "bearer_token_env_var": "DIALECTS_BEARER"},
        "unset": {"url": url, "bearer_token_env_var": "DIALECTS_NEVER_SET"},
        "cursor_both": {"url": url, "auth": {"CLIENT_ID": "a"}, "oauth": {}},
        "cursor_other": {"url": url, "auth": {"CLIENT_ID": "a", "REDIRECT": "b"}},
        "cursor_unset": {"url": url, "auth": {"CLIENT_ID": "a", "CLIENT_SECRET": "${env:DIALECTS_NEVER_SET}"}},
    }));
    let listing = host.settled(WAIT).await;
    let reason = |ns| {
        server_entry(&listing, ns)["reason"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(server_entry(&listing, "codex")["status"], "ready");
    let first = server.first(|r| r.method() == "tools/list");
    assert_eq!(
        (
            first.header("x-plain"),
            first.header("x-key"),
            first.header("authorization")
        ),
        (
            Some("plain-value".to_string()),
            Some(KEY.to_string()),
            Some(format!("Bearer {TOKEN}"))
        )
    );
    let helper = "this Pack starts no process: write each header in \"headers\", a secret as ${env:NAME} (\"Authorization\": \"Bearer ${env:NAME}\")";
    assert_eq!(
        reason("helper"),
        format!(
            "the entry has \"headersHelper\" (Claude Code's command that prints headers); {helper}"
        )
    );
    assert_eq!(
        reason("codex_helper"),
        format!(
            "the entry has \"http_headers_helper\" (Codex's command that prints headers); {helper}"
        )
    );
    let google = "(Gemini CLI's Google credentials or service account impersonation), which this Pack does not do: put a token in \"headers\" (\"Authorization\": \"Bearer ${env:NAME}\"), or remove the key to sign in with OAuth when the server asks";
    assert_eq!(
        reason("google"),
        format!("the entry has \"authProviderType\" {google}")
    );
    assert_eq!(
        reason("impersonate"),
        format!("the entry has \"targetServiceAccount\" {google}")
    );
    assert_eq!(
        reason("twice"),
        "header \"Authorization\" is given by both \"headers\" and \"bearer_token_env_var\"; keep one"
    );
    assert_eq!(
        reason("unset"),
        "environment variable \"DIALECTS_NEVER_SET\" (named by \"bearer_token_env_var\") is not set"
    );
    assert_eq!(
        reason("cursor_both"),
        "the entry has both \"oauth\" and \"auth\" (Cursor's key for a pre-registered OAuth client); keep one"
    );
    assert_eq!(
        reason("cursor_other"),
        "\"auth\" has \"REDIRECT\", which this Pack does not read; Cursor's \"auth\" holds \"CLIENT_ID\", \"CLIENT_SECRET\" and \"scopes\""
    );
    assert!(
        reason("cursor_unset").contains("\"DIALECTS_NEVER_SET\""),
        "{}",
        reason("cursor_unset")
    );
    drop(host);
    let text = logs.text() + &listing.to_string();
    assert!(!text.contains(TOKEN) && !text.contains(KEY), "{text}");
}

/// Goose's `uri` gets the did-you-mean `URL` gets.
#[tokio::test]
async fn goose_uri_gets_its_did_you_mean() {
    let host = Host::new(json!({
        "goose": {"uri": "http://127.0.0.1:9/mcp"},
        "upper": {"URI": "http://127.0.0.1:9/mcp"},
    }));
    let listing = host.listing(json!({})).await;
    for (ns, key) in [("goose", "uri"), ("upper", "URI")] {
        assert_eq!(
            server_entry(&listing, ns)["reason"],
            format!(
                "the entry has \"{key}\", which this Pack does not read; did you mean \"url\"?"
            )
        );
    }
}

/// Claude Code's `${API_TOKEN:-fallback}` and VS Code's `${input:tok}` / `${workspaceFolder}` are
/// sent as written (the config rule), and the listing's `notes` and a `warn` line say so and what
/// to write instead, while the server accepts them; the fallback is never quoted.
#[tokio::test]
async fn placeholders_sent_as_written_are_named_before_any_refusal() {
    const FALLBACK: &str = "sk-fallback-5e6f7a8b9c0d";
    let (_capture, logs) = logs::capture("plugin_mcp=warn");
    let server = tools_server().await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({
        "cc": {"url": url, "headers": {
            "Authorization": format!("Bearer ${{API_TOKEN:-{FALLBACK}}}"),
            "X-Tok": "${input:tok}",
            "X-Dir": "${workspaceFolder}",
        }},
    }));
    host.ready("cc", WAIT).await;
    let notes = host.listing(json!({"namespace": "cc"})).await["notes"].clone();
    let expected = json!([
        "header \"Authorization\" holds ${API_TOKEN:-…}, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}, without fallback values); to use the environment variable, write ${env:API_TOKEN}",
        "header \"X-Tok\" holds ${input:tok}, a VS Code input (a value VS Code prompts for), which was sent as written: this Pack cannot prompt; put the value in an environment variable and write ${env:NAME}",
        "header \"X-Dir\" holds ${workspaceFolder}, a VS Code predefined variable, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}); write the value itself, or put it in an environment variable and write ${env:NAME}",
    ]);
    assert_eq!(notes, expected);
    assert_eq!(
        server_entry(&host.listing(json!({})).await, "cc")["notes"],
        expected
    );
    let sent = server.first(|r| r.method() == "tools/list");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer ${{API_TOKEN:-{FALLBACK}}}"))
    );
    drop(host);
    let warned = logs.lines_with("WARN");
    assert_eq!(
        warned
            .iter()
            .filter(|l| l.contains("write ${env:API_TOKEN}"))
            .count(),
        1,
        "{warned:?}"
    );
    assert!(!logs.text().contains(FALLBACK), "{}", logs.text());
}

/// Codex's `tool_timeout_sec` and `startup_timeout_sec` and the `timeout` of the others shorten a
/// server's deadlines; a longer one is capped to the Pack's own, with a note.
#[tokio::test]
async fn per_server_timeouts_shorten_deadlines_and_longer_ones_are_capped() {
    let server = tools_server().await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let silent = hostile::serve(|_req| async { never() }).await;
    let silent_url = format!("http://127.0.0.1:{}/mcp", silent.port);
    let host = Host::new(json!({
        "codex": {"url": url, "tool_timeout_sec": 1},
        "gemini": {"url": url, "timeout": 1500},
        "cline": {"url": url, "timeout": 2000, "alwaysAllow": []},
        "guessed": {"url": url, "timeout": 60},
        "starting": {"url": silent_url, "startup_timeout_sec": 1},
        "bad": {"url": url, "timeout": "60"},
        "zero": {"url": url, "tool_timeout_sec": 0},
    }));
    let listing = host.listing(json!({})).await;
    let notes = |ns: &str| server_entry(&listing, ns)["notes"].clone();
    let reason = |ns: &str| server_entry(&listing, ns)["reason"].clone();
    assert_eq!(notes("codex"), Value::Null);
    assert_eq!(notes("gemini"), Value::Null);
    assert_eq!(
        notes("cline"),
        json!([
            "\"timeout\" is 2000 (seconds), longer than this Pack allows: a call to this server still ends within 300 seconds"
        ])
    );
    assert_eq!(
        notes("guessed"),
        json!([
            "\"timeout\" is 60, read as seconds (Cline's unit): Gemini CLI and Claude Code write milliseconds, but no deadline under a second is meant"
        ])
    );
    assert_eq!(
        reason("bad"),
        "\"timeout\" must be a number, found a string"
    );
    assert_eq!(
        reason("zero"),
        "\"tool_timeout_sec\" must be a number above 0"
    );
    host.ready("codex", WAIT).await;
    host.ready("gemini", WAIT).await;
    for (ns, within) in [("codex", "1 seconds"), ("gemini", "1.500 seconds")] {
        let started = tokio::time::Instant::now();
        let error = host.call_tool(ns, "slow").await.unwrap_err();
        assert_eq!(
            (error.kind, error.message),
            (
                ToolErrorKind::Transport,
                format!("server \"{ns}\" did not answer the tool call within {within}")
            )
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    let failed = host.failed("starting", WAIT).await;
    assert_eq!(
        failed["reason"],
        "the server did not finish starting (initialize and tools/list) within 1 seconds"
    );
}

/// Gemini CLI's `httpUrl` is the address read (its `url` is a legacy SSE endpoint, left with a
/// note); a start refused like a legacy SSE endpoint (a 405 to the POST, or a url ending in
/// `/sse`) says so in its reason.
#[tokio::test]
async fn gemini_http_url_is_read_and_a_legacy_sse_url_is_named() {
    let server = tools_server().await;
    let sse = hostile::serve(|_req| async { Reply::raw(405, "text/plain", "") }).await;
    let host = Host::new(json!({
        "gemini": {
            "httpUrl": format!("http://127.0.0.1:{}/mcp", server.port),
            "url": format!("http://127.0.0.1:{}/sse", sse.port),
        },
        "old": {"url": format!("http://127.0.0.1:{}/sse", sse.port)},
    }));
    host.ready("gemini", WAIT).await;
    assert_eq!(
        host.listing(json!({"namespace": "gemini"})).await["notes"],
        json!([
            "\"url\" is not read: this Pack reads the address from \"httpUrl\" (Gemini CLI's Streamable HTTP endpoint; Gemini CLI reads \"url\" as a legacy SSE endpoint)"
        ])
    );
    let failed = host.failed("old", WAIT).await;
    let reason = failed["reason"].as_str().unwrap();
    assert!(
        reason.ends_with("; the url answers like a legacy HTTP+SSE endpoint (a GET-only event stream, often at /sse), a transport this Pack does not speak: point \"url\" at the server's Streamable HTTP endpoint (often /mcp)"),
        "{reason}"
    );
    assert_eq!(
        failed["notes"],
        json!([
            "\"url\"'s path ends in /sse, where legacy HTTP+SSE servers listen; this Pack speaks Streamable HTTP only, so if the server does not start, point \"url\" at its Streamable HTTP endpoint (often /mcp)"
        ])
    );
}

/// The keys of docs/configuration.md's dialect table, with what the table says the Pack does.
fn documented_keys() -> Vec<(String, String)> {
    let doc = include_str!("../../docs/configuration.md");
    let mut keys = Vec::new();
    for line in doc.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let action = cells[3].split(':').next().unwrap().to_string();
        for key in cells[1].split(", ") {
            keys.push((key.trim_matches('`').to_string(), action.clone()));
        }
    }
    keys
}

/// An entry holding `key` with a value that must change what the Pack does, at `url`.
fn entry_with(key: &str, url: &str) -> Value {
    let value = match key {
        "url" | "httpUrl" | "serverUrl" | "uri" => return json!({ key: url }),
        "type" | "transportType" => json!("sse"),
        "headers" | "http_headers" => json!({"X-Probe": "probe"}),
        "env_http_headers" => json!({"X-Probe": "DIALECTS_PROBE"}),
        "bearer_token_env_var" => json!("DIALECTS_PROBE"),
        "headersHelper" | "http_headers_helper" | "command" => json!("print"),
        "oauth" => json!({"clientId": 5}),
        "auth" => json!({"CLIENT_ID": 5}),
        "authProviderType" => json!("google_credentials"),
        "targetAudience" | "targetServiceAccount" | "oauth_resource" => json!("x"),
        "scopes" => json!(5),
        "includeTools" | "enabled_tools" | "tools" | "available_tools" => json!(["search"]),
        "excludeTools" | "disabledTools" | "disabled_tools" => json!(["search"]),
        "disabled" => json!(true),
        "enabled" => json!(false),
        "timeout" => json!(900_000),
        "startup_timeout_sec" | "tool_timeout_sec" => json!(900),
        "startup_timeout_ms" => json!(900_000),
        other => panic!("no sample value for the documented key {other:?}"),
    };
    json!({"url": url, key: value})
}

/// No key of the dialects is ignored in silence: every key the table lists as read, mapped or
/// refused changes what the Pack does (its listing of the entry, or the headers the server
/// receives) against the same entry without it; the keys it lists as of no effect are the few
/// that decide neither tools, credentials nor addresses.
#[tokio::test]
async fn no_dialect_key_is_ignored_in_silence() {
    // SAFETY: as in the credentials test; no other test reads this name.
    unsafe { std::env::set_var("DIALECTS_PROBE", "probe-from-env") };
    let keys = documented_keys();
    assert!(keys.len() >= 35, "{keys:?}");
    let no_effect: Vec<&str> = keys
        .iter()
        .filter(|(_, action)| action == "no effect")
        .map(|(key, _)| key.as_str())
        .collect();
    assert_eq!(
        no_effect,
        [
            "args",
            "env",
            "cwd",
            "envFile",
            "trust",
            "alwaysAllow",
            "autoApprove",
            "description",
            "name",
            "envs",
            "env_keys",
            "bundled"
        ]
    );
    let server = tools_server().await;
    let base = format!("http://127.0.0.1:{}", server.port);
    let mut config = serde_json::Map::new();
    let checked: Vec<&str> = keys
        .iter()
        .filter(|(_, action)| action != "no effect")
        .map(|(key, _)| key.as_str())
        .collect();
    for key in &checked {
        assert!(
            ["reads", "maps", "refuses"].iter().any(|a| keys
                .iter()
                .any(|(k, action)| k == key && action.starts_with(a))),
            "{key}"
        );
        let with = entry_with(key, &format!("{base}/with-{key}"));
        let mut without = entry_with(key, &format!("{base}/without-{key}"));
        without.as_object_mut().unwrap().remove(*key);
        config.insert(format!("with-{key}"), with);
        config.insert(format!("without-{key}"), without);
    }
    let host = Host::new(Value::Object(config));
    host.settled(WAIT).await;
    let requests = server.requests();
    for key in checked {
        let outcome = async |side: &str| {
            let mut listing = host
                .listing(json!({"namespace": format!("{side}-{key}")}))
                .await;
            listing.as_object_mut().unwrap().remove("namespace");
            listing.as_object_mut().unwrap().remove("retryInSeconds");
            let headers: Vec<(Option<String>, Option<String>)> = requests
                .iter()
                .filter(|r| r.target == format!("/{side}-{key}"))
                .map(|r| (r.header("x-probe"), r.header("authorization")))
                .collect();
            (listing, headers.first().cloned())
        };
        let (with, without) = (outcome("with").await, outcome("without").await);
        assert_ne!(with, without, "\"{key}\" changed nothing");
    }
}

/// Gemini CLI's `oauth` keys that route credentials are refused by name before anything is sent
/// (the server gets no request), and `"enabled": false` switches the object off: its client
/// secret is not a setting any more, and the entry starts as one without `oauth`.
#[tokio::test]
async fn gemini_oauth_keys_that_route_credentials_are_refused_by_name() {
    let server = tools_server().await;
    let url = |path: &str| format!("http://127.0.0.1:{}/{path}", server.port);
    let host = Host::new(json!({
        "routed": {"httpUrl": url("routed"), "oauth": {
            "enabled": true, "clientId": "gemini-app", "tokenUrl": "https://auth.example/token",
        }},
        "off": {"httpUrl": url("off"), "oauth": {"enabled": false, "clientId": "gemini-app"}},
    }));
    let failed = host.failed("routed", WAIT).await;
    assert_eq!(
        failed["reason"],
        "the entry's \"oauth\" has \"tokenUrl\" (Gemini CLI's key), which this Pack does not read: the authorization server's endpoints are found from the server's metadata (RFC 9728, RFC 8414): remove it"
    );
    host.ready("off", WAIT).await;
    assert!(
        server.requests().iter().all(|r| r.target != "/routed"),
        "a refused entry was sent a request"
    );
}

/// The listing of the entry `entry` (at the tools server's `/mcp`, as `"e"`) once settled.
async fn settled_entry(entry: Value) -> Value {
    let server = tools_server().await;
    let mut entry = entry;
    entry["url"] = json!(format!("http://127.0.0.1:{}/mcp", server.port));
    let host = Host::new(json!({ "e": entry }));
    server_entry(&host.settled(WAIT).await, "e").clone()
}

/// Goose's `available_tools` (its extension entry's allow-list: only these tools) decides which
/// tools a model may use: it is read as an allow-list, like `includeTools`.
#[tokio::test]
async fn gooses_available_tools_allow_list_is_not_ignored_in_silence() {
    let entry = json!({"type": "streamable_http", "timeout": 300, "available_tools": ["search"]});
    assert_eq!(settled_entry(entry).await["tools"], json!(["search"]));
}

/// Claude Code's `oauth.authServerMetadataUrl` (its override of RFC 9728 / RFC 8414 discovery)
/// decides where a sign-in, and any client credential, goes: the entry is refused naming it, as
/// Gemini CLI's `tokenUrl` is.
#[tokio::test]
async fn claude_codes_auth_server_metadata_url_is_not_ignored_in_silence() {
    let entry = json!({"type": "http", "oauth": {
        "clientId": "claude-client",
        "callbackPort": 33418,
        "authServerMetadataUrl": "https://127.0.0.1:9/.well-known/oauth-authorization-server"
    }});
    assert_eq!(
        settled_entry(entry).await["reason"],
        "the entry's \"oauth\" has \"authServerMetadataUrl\" (Claude Code's key), which this Pack does not read: the authorization server's metadata is found from the server's (RFC 9728, RFC 8414): remove it, and write \"authorizationServer\" (the issuer) to say where a client secret may go"
    );
}

/// A placeholder of another client's form in the OAuth client (Cursor's `auth.CLIENT_ID` /
/// `CLIENT_SECRET`, or `oauth.clientId` / `clientSecret`) is sent as written to the authorization
/// server, exactly as one in a header is. docs/configuration.md "Notes": the entry's listing and a
/// `warn` line say which placeholder is sent as written and what to write instead, "whether or not
/// the server later refuses anything". a note naming the field and `${env:...}`.
#[tokio::test]
async fn a_placeholder_in_the_oauth_client_is_named_in_the_notes() {
    let server = tools_server().await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let host = Host::new(json!({
        "cursor": {"url": url, "auth": {
            "CLIENT_ID": "${CURSOR_CLIENT_ID}",
            "CLIENT_SECRET": "${CURSOR_CLIENT_SECRET}"
        }},
        "header": {"url": url, "headers": {"X-Key": "${HEADER_KEY}"}},
    }));
    let listing = host.settled(WAIT).await;
    // The header's placeholder is named (the rule holds there) ...
    let header = server_entry(&listing, "header")["notes"].to_string();
    assert!(header.contains("${env:HEADER_KEY}"), "{header}");
    // ... the OAuth client's are not.
    let notes = server_entry(&listing, "cursor")["notes"].to_string();
    assert!(
        notes.contains("CURSOR_CLIENT_ID") && notes.contains("CURSOR_CLIENT_SECRET"),
        "the OAuth client's placeholders are sent as written in silence: notes {notes}"
    );
}

/// Codex's `bearer_token_env_var` names a variable, but the easy mistake is to paste the token
/// itself there, and a GitHub (`ghp_…`) or Stripe (`sk_live_…`) token is a valid variable name.
/// The reader already guards this mistake for `${env:KEY:-fallback}` ("quoting only the valid
/// start of the name, since what follows is often a pasted secret"). the reason does not quote a
/// value that is not a plausible variable name in full, or at least the token does not reach the
/// model.
#[tokio::test]
async fn a_token_pasted_into_bearer_token_env_var_is_not_quoted_back() {
    const PASTED: &str = "ghp_AttackPastedToken0123456789abcdEFGH";
    const PASTED_2: &str = "sk_live_AttackPastedKey0123456789";
    let host = Host::new(json!({
        "codex": {"url": "http://127.0.0.1:9/mcp", "bearer_token_env_var": PASTED},
        "codex2": {"url": "http://127.0.0.1:9/mcp", "env_http_headers": {"X-Api-Key": PASTED_2}},
    }));
    let listing = host.settled(WAIT).await.to_string();
    assert!(
        !listing.contains(PASTED) && !listing.contains(PASTED_2),
        "a pasted token is quoted back to the model: {listing}"
    );
}

/// The same mistake in Claude Code's form: a key pasted inside `${...}` (`Bearer ${sk_live_…}`) is
/// sent as written, as part of a header value, and header values are secrets
/// (docs/configuration.md "Header values ... are secrets"). neither the notes nor the 401 hint
/// quote it.
#[tokio::test]
async fn a_key_pasted_inside_a_placeholder_is_not_quoted_in_the_notes() {
    const PASTED: &str = "sk_live_AttackPastedInBraces0123456789";
    let host = Host::new(json!({
        "claude": {"url": "http://127.0.0.1:9/mcp",
                   "headers": {"Authorization": format!("Bearer ${{{PASTED}}}")}},
    }));
    let listing = host.settled(WAIT).await.to_string();
    assert!(
        !listing.contains(PASTED),
        "a header value's word reaches the listing: {listing}"
    );
}

/// Goose (`"type": "streamable_http"`, `available_tools`, `envs`, `bundled`) writes `timeout` in
/// seconds (its default is 300): a Goose `"timeout": 1800` is 30 minutes, capped to the Pack's
/// own call deadline, never read as 1.8 s: a tool answering in 2 s is served.
#[tokio::test]
async fn a_goose_entrys_timeout_is_read_in_seconds() {
    use bytes::Bytes;
    use futures_util::stream::{self, StreamExt};
    let server = hostile::serve_tools(vec![hostile::tool("slow", "answers in 2 s")], |req| {
        let answer = serde_json::to_vec(&hostile::text_result(&req.id(), "served")).unwrap();
        Reply::stream(
            200,
            "application/json",
            stream::once(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok(Bytes::from(answer))
            })
            .boxed(),
        )
    })
    .await;
    let host = Host::new(json!({"goose": {
        "url": server.url,
        "type": "streamable_http",
        "timeout": 1800,
        "available_tools": ["slow"],
        "envs": {},
        "bundled": false,
    }}));
    host.ready("goose", WAIT).await;
    assert_eq!(
        tokio::time::timeout(WAIT, host.call_tool("goose", "slow"))
            .await
            .expect("answered within 10 s"),
        Ok("served".to_string())
    );
}

/// Gemini CLI's settings choose servers with `"mcp": {"allowed": [...], "excluded": [...]}`:
/// given that file as the config, a server it excludes is refused by name and never contacted;
/// the others start.
#[tokio::test]
async fn gemini_clis_excluded_servers_are_refused_and_never_contacted() {
    let excluded = hostile::serve_tools(vec![hostile::tool("danger", "d")], |req| {
        Reply::json(&hostile::text_result(&req.id(), "ran"))
    })
    .await;
    let allowed = hostile::serve_tools(vec![hostile::tool("t", "t")], |req| {
        Reply::json(&hostile::text_result(&req.id(), "ran"))
    })
    .await;
    let settings = json!({
        "mcp": {"excluded": ["blocked"]},
        "mcpServers": {
            "blocked": {"httpUrl": excluded.url},
            "ok": {"httpUrl": allowed.url},
        }
    });
    let host = Host::new(json!(settings.to_string()));
    let listing = host.settled(WAIT).await;
    assert_eq!(
        server_entry(&listing, "blocked"),
        &json!({"namespace": "blocked", "status": "error",
            "reason": "the config's \"mcp.excluded\" (Gemini CLI's) excludes this server, so this Pack does not connect to it",
            "tools": []})
    );
    assert_eq!(server_entry(&listing, "ok")["status"], "ready");
    assert_eq!(host.call_tool("ok", "t").await, Ok("ran".to_string()));
    assert_eq!(
        excluded.requests().len(),
        0,
        "the excluded server was contacted"
    );
}

/// A client's whole settings file given as the plugin config.
mod whole_settings_files {
    use std::time::Duration;

    use serde_json::json;

    use crate::support::hostile::{self, Reply, server_entry};
    use crate::support::{Host, construct};

    /// A Gemini CLI `settings.json` handed whole as the plugin config (README: a plugin config
    /// without an `mcp` key that is a whole `mcp.json` is the Pack's config) carries Gemini's own
    /// top-level `"mcp": {"excluded": [...]}`. Its servers are read from `mcpServers`, with
    /// `mcp.excluded` refusing `t` and `s` started; the `mcp` object is not taken for the
    /// Pack's config (no namespace `excluded`).
    #[tokio::test]
    async fn a_gemini_settings_file_given_whole_is_read_from_its_mcp_servers_not_its_mcp_block() {
        let server =
            hostile::serve_tools(vec![hostile::tool("t1", "one tool")], |_| Reply::accepted())
                .await;
        let settings = json!({
            "mcpServers": {"s": {"httpUrl": server.url}, "t": {"httpUrl": server.url}},
            "mcp": {"excluded": ["t"]},
        });
        let host = Host {
            pack: construct(&settings, "mcp").expect("the Pack constructs"),
        };
        let listing = host.settled(Duration::from_secs(10)).await;
        let namespaces: Vec<&str> = listing["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["namespace"].as_str().unwrap())
            .collect();
        assert_eq!(namespaces, ["s", "t"], "{listing}");
        assert_eq!(server_entry(&listing, "s")["status"], "ready");
    }
}
