//! What a Host and its author meet (README "Add it to a Host", "The host CLI"): installing the
//! plugin and constructing the Pack, the two tools' specs, the listing for every status, errors
//! a model can act on, reasons that stay short when a server answers with a web page, config
//! mistakes that are never silent, and readiness and shutdown a Host can await.

use std::time::Duration;

use runvil_plugin::{Pack, Packs, Services, TOKIO_RUNTIME, ToolErrorKind, Unavailable};
use serde_json::{Value, json};

use crate::support::answers::one_tool_or_400;
use crate::support::hostile::{self, Reply, serve};
use crate::support::mock::matchers::path;
use crate::support::mock::{Mock, MockServer};
use crate::support::{Host, WAIT, mock};

/// A server that accepts connections and never answers: its namespace stays `loading`.
async fn silent_server() -> (tokio::net::TcpListener, String) {
    let listener = crate::support::net::unused_loopback().await;
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    (listener, url)
}

/// A [`ready_server`] and a Host with it as `docs`, ready.
async fn ready_docs() -> (MockServer, Host) {
    let ready = ready_server().await;
    let host = Host::new(json!({"docs": {"url": format!("{}/mcp", ready.uri())}}));
    host.ready("docs", WAIT).await;
    (ready, host)
}

/// A Host with a [`ready_server`] as `ready`, a [`silent_server`] as `silent` and the entries of
/// `others`; the two servers.
async fn ready_and_silent(
    ready: &str,
    silent: &str,
    others: Value,
) -> (MockServer, tokio::net::TcpListener, Host) {
    let server = ready_server().await;
    let (listener, silent_url) = silent_server().await;
    let mut servers = others;
    servers[ready] = json!({"url": format!("{}/mcp", server.uri())});
    servers[silent] = json!({"url": silent_url});
    (server, listener, Host::new(servers))
}

/// The kind and message of the error `pack` answers a call of `tool` (its full name) with.
async fn refusal(pack: &dyn Pack, tool: &str, args: Value) -> (ToolErrorKind, String) {
    let error = pack.call(tool, args).await.unwrap_err();
    (error.kind, error.message)
}

async fn ready_server() -> MockServer {
    let server = MockServer::start().await;
    let tools = json!([
        {"name": "search", "description": "Searches the docs", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "$defs": {"z": {}, "a": {}}}},
        {"name": "fetch_page", "title": "Fetch a page", "inputSchema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"},
         "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}},
        {"name": "bare", "description": "", "inputSchema": {"type": "object"}}
    ]);
    Mock::given(path("/mcp"))
        .respond_with(mock::with_tools(tools, |request, params| {
            mock::result(request, json!({"content": [{"type": "text", "text": format!("args {}", params["arguments"])}]}))
        }))
        .mount(&server)
        .await;
    server
}

/// The rows of a table of calls that fail: `tool {arguments} => Kind "message";` each, as
/// `(tool, arguments, ToolErrorKind::Kind, message)`.
macro_rules! error_cases {
    ($($tool:ident $args:tt => $kind:ident $message:literal;)*) => {
        vec![$((stringify!($tool), json!($args), ToolErrorKind::$kind, $message)),*]
    };
}

/// A header value the tests configure; never in a reason.
pub(crate) const KEY: &str = "sk-host-author-0123456789";

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

/// The reason the listing shows for namespace `namespace` of `host`.
pub(crate) async fn reason(host: &Host, namespace: &str) -> serde_json::Value {
    host.listing(json!({"namespace": namespace})).await["reason"].clone()
}

#[tokio::test]
async fn install_inserts_runvil_mcp_with_the_mcp_key() {
    let mut packs = Packs::new();
    plugin_mcp::install(&mut packs, &json!({"other": 1}));
    let spec = packs.get("runvil/mcp").unwrap();
    assert_eq!(spec.default_id, "mcp");
    assert_eq!(spec.config, Value::Null);
    plugin_mcp::install(
        &mut packs,
        &json!({"mcp": {"a": {"url": "https://a.example/mcp"}}}),
    );
    assert_eq!(packs.iter().count(), 1);
    assert_eq!(
        packs.get("runvil/mcp").unwrap().config,
        json!({"a": {"url": "https://a.example/mcp"}})
    );
}

#[tokio::test]
async fn construct_needs_the_host_runtime_and_an_object_or_null() {
    let mut packs = Packs::new();
    plugin_mcp::install(&mut packs, &json!({}));
    let spec = packs.get("runvil/mcp").unwrap();
    let error = spec.construct("mcp", &Services::new()).err().unwrap();
    assert_eq!(
        error,
        Unavailable::new(
            "the Host provides no Tokio runtime (the TOKIO_RUNTIME service); the mcp Pack runs its connections there"
        )
    );
    let mut services = Services::new();
    services.insert(&TOKIO_RUNTIME, tokio::runtime::Handle::current());
    let pack = spec.construct("mcp", &services).unwrap();
    assert_eq!(pack.tools().len(), 2);

    for (config, found) in [
        (json!([1]), "an array"),
        (json!(7), "a number"),
        (json!(false), "a boolean"),
    ] {
        let error = Host::try_new(config).err().unwrap();
        assert_eq!(
            error.reason,
            format!(
                "the mcp config must be an object of servers (the mcpServers of an mcp.json), found {found}"
            )
        );
    }
    let none = Host::new(Value::Null);
    assert_eq!(none.listing(json!({})).await, json!({"servers": []}));
}

#[tokio::test]
async fn offers_exactly_two_tools_with_strict_schemas() {
    let host = Host::new(json!({}));
    let tools = host.pack.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["mcp/get_dynamic_tools", "mcp/call_dynamic_tool"]);
    assert_eq!(
        tools[0].parameters,
        json!({"type": "object", "properties": {
            "namespace": {"type": "string", "description": "A server's namespace, exactly as listed."},
            "toolName": {"type": "string", "description": "A tool's name, exactly as its server lists it; needs namespace."},
            "toolNames": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 20, "description": "Several tools' names of one server, each answered in full (unknown ones under notFound with suggestions); needs namespace."},
            "query": {"type": "string", "minLength": 1, "description": "What you want a tool to do, in your own words or by its name (at most 512 bytes); answers the best matching tools of every ready server (or of namespace)."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many matches a query answers at most (default 10); needs query."}},
            "additionalProperties": false})
    );
    // Each description names the other tool by its full name under this id.
    assert_eq!(
        tools[0].description,
        "Finds and lists the tools of the MCP servers behind this Pack, as JSON text. When you do not know a tool's name, search by what you want done: {\"query\":\"send a message to a channel\"} answers the best matching tools (namespace, name, one-line description), best first; limit (1-50, default 10) and namespace narrow it. With no arguments: every server's namespace, status (ready, loading, or error with a reason, and retryInSeconds when it will be tried again), description and tool names. With namespace: that server's tools with their descriptions and input schemas, and under omitted the tools it listed that were left out. With namespace and toolName: one tool in full; with namespace and toolNames (up to 20): several. Call a tool with mcp/call_dynamic_tool."
    );
    assert_eq!(
        tools[1].description,
        "Calls one tool of one MCP server and returns its result as text. Look the tool and its input schema up with mcp/get_dynamic_tools first (search it by what you want done with {\"query\":\"...\"} when you do not know its name), then call it with its namespace, toolName and arguments."
    );
    assert_eq!(
        tools[1].parameters["required"],
        json!(["namespace", "toolName"])
    );
    assert_eq!(tools[1].parameters["additionalProperties"], false);
    assert_eq!(
        tools[1].parameters["properties"]["arguments"]["type"],
        "object"
    );
    assert_eq!(host.pack.prelude(), None);
    host.pack.ready().await;

    let other = crate::support::construct(&json!({}), "tools").unwrap();
    let other_tools = other.tools();
    assert!(
        other_tools[1]
            .description
            .contains(" with tools/get_dynamic_tools first"),
        "{}",
        other_tools[1].description
    );
    assert!(
        other_tools[0]
            .description
            .ends_with(" with tools/call_dynamic_tool."),
        "{}",
        other_tools[0].description
    );
    let names: Vec<String> = other_tools.into_iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        ["tools/get_dynamic_tools", "tools/call_dynamic_tool"]
    );
    assert_eq!(
        refusal(&*host.pack, "tools/get_dynamic_tools", json!({})).await,
        (
            ToolErrorKind::NotFound,
            "unknown tool \"tools/get_dynamic_tools\"; this Pack offers mcp/get_dynamic_tools and mcp/call_dynamic_tool"
                .to_string()
        )
    );
}

#[tokio::test]
async fn listing_shows_every_status_sorted() {
    let others = json!({
        "Alpha": {"command": "npx", "args": ["server"]},
        "legacy": {"type": "sse", "url": "https://legacy.example/sse"}
    });
    let (_ready, _silent, host) = ready_and_silent("zeta", "beta", others).await;
    let listing = host.ready("zeta", WAIT).await;
    assert_eq!(
        listing.to_string(),
        r#"{"servers":[{"namespace":"Alpha","status":"error","reason":"local MCP servers (command) are not supported yet","tools":[]},{"namespace":"beta","status":"loading","tools":[]},{"namespace":"legacy","status":"error","reason":"the legacy HTTP+SSE transport (type \"sse\") is not supported; point \"url\" at the server's Streamable HTTP endpoint instead","tools":[]},{"namespace":"zeta","status":"ready","tools":["bare","fetch_page","search"]}]}"#
    );
    // One server of each status, by namespace.
    #[rustfmt::skip]
    let one_each = [
        ("zeta", r#"{"namespace":"zeta","status":"ready","protocolVersion":"2025-11-25","tools":[{"name":"bare","description":"bare","inputSchema":{"type":"object"}},{"name":"fetch_page","description":"Fetch a page","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}},{"name":"search","description":"Searches the docs","inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"$defs":{"z":{},"a":{}}}}]}"#),
        ("beta", r#"{"namespace":"beta","status":"loading","tools":[]}"#),
        ("Alpha", r#"{"namespace":"Alpha","status":"error","reason":"local MCP servers (command) are not supported yet","tools":[]}"#),
    ];
    for (namespace, expected) in one_each {
        let text = host.call("get_dynamic_tools", json!({ "namespace": namespace }));
        assert_eq!(text.await.unwrap(), expected);
    }
    let one = host.lookup("zeta", "fetch_page").await.unwrap();
    assert_eq!(
        one,
        r#"{"namespace":"zeta","name":"fetch_page","description":"Fetch a page","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"},"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}"#
    );
}

#[tokio::test]
async fn errors_a_model_can_act_on() {
    let others = json!({"legacy": {"command": "old"}});
    let (_ready, _silent, host) = ready_and_silent("docs", "github", others).await;
    host.ready("docs", WAIT).await;
    // Each row: the tool, its arguments, the error kind and the exact message.
    let cases = error_cases! {
        get_dynamic_tools {"namespace": "gitlab"} => NotFound "unknown namespace \"gitlab\"; known namespaces: docs, github, legacy";
        get_dynamic_tools {"namespace": "docs", "toolName": "serach"} => NotFound "server \"docs\" has no tool \"serach\" (did you mean \"search\"?); list its tools with mcp/get_dynamic_tools {\"namespace\":\"docs\"}";
        get_dynamic_tools {"toolName": "search"} => InvalidArguments "toolName needs a namespace, e.g. {\"namespace\":\"docs\",\"toolName\":\"search\"}";
        get_dynamic_tools {"namespace": "github", "toolName": "x"} => Unavailable "server \"github\" is still loading; try again shortly";
        get_dynamic_tools {"name": "x"} => InvalidArguments "unknown argument \"name\"; accepted arguments: namespace, toolName, toolNames, query, limit";
        get_dynamic_tools {"namespace": 3} => InvalidArguments "\"namespace\" must be a string, found a number";
        get_dynamic_tools [] => InvalidArguments "the arguments must be a JSON object, found an array";
        call_dynamic_tool {"namespace": "github", "toolName": "x"} => Unavailable "server \"github\" is still loading; try again shortly";
        call_dynamic_tool {"namespace": "legacy", "toolName": "x"} => Unavailable "server \"legacy\" is unavailable: local MCP servers (command) are not supported yet";
        call_dynamic_tool {"namespace": "docs", "toolName": "nope"} => NotFound "server \"docs\" has no tool \"nope\"; list its tools with mcp/get_dynamic_tools {\"namespace\":\"docs\"}";
        call_dynamic_tool {"namespace": "nope", "toolName": "x"} => NotFound "unknown namespace \"nope\"; known namespaces: docs, github, legacy";
        call_dynamic_tool {"toolName": "search"} => InvalidArguments "\"namespace\" is required, e.g. {\"namespace\":\"docs\",\"toolName\":\"bare\",\"arguments\":{}}";
        call_dynamic_tool {"namespace": "docs"} => InvalidArguments "\"toolName\" is required, e.g. {\"namespace\":\"docs\",\"toolName\":\"bare\",\"arguments\":{}}";
        call_dynamic_tool {"namespace": "docs", "toolName": "search", "arguments": "q=x"} => InvalidArguments "\"arguments\" must be an object, found a string";
        call_dynamic_tool {"namespace": "docs", "toolName": "search", "args": {}} => InvalidArguments "unknown argument \"args\"; accepted arguments: namespace, toolName, arguments";
    };
    for (tool, args, kind, message) in cases {
        let error = host.call(tool, args.clone()).await.unwrap_err();
        assert_eq!(
            (error.kind, error.message.as_str()),
            (kind, message),
            "{tool} {args}"
        );
    }
    let no_servers = Host::new(json!({}));
    let error = no_servers
        .call("get_dynamic_tools", json!({"namespace": "x"}))
        .await
        .unwrap_err();
    assert_eq!(
        error.message,
        "unknown namespace \"x\"; known namespaces: none (no servers are configured)"
    );
}

#[tokio::test]
async fn call_arguments_default_to_an_empty_object() {
    let (_ready, host) = ready_docs().await;
    for args in [
        json!({"namespace": "docs", "toolName": "search"}),
        json!({"namespace": "docs", "toolName": "search", "arguments": null}),
    ] {
        assert_eq!(
            host.call("call_dynamic_tool", args).await.unwrap(),
            "args {}"
        );
    }
    let given =
        json!({"namespace": "docs", "toolName": "search", "arguments": {"q": "rust", "n": [1, 2]}});
    assert_eq!(
        host.call("call_dynamic_tool", given).await.unwrap(),
        r#"args {"q":"rust","n":[1,2]}"#
    );
}

#[tokio::test]
async fn every_echo_of_model_input_is_cut() {
    let (_ready, host) = ready_docs().await;
    let huge = "a".repeat(1024 * 1024);
    // Cut to 200 bytes: 197 of the text and "…".
    let cut = format!("\"{}…\"", "a".repeat(197));
    #[rustfmt::skip]
    let cases: Vec<(String, Value, ToolErrorKind, String)> = vec![
        ("get_dynamic_tools".into(), json!({"namespace": huge}), ToolErrorKind::NotFound, format!("unknown namespace {cut}; known namespaces: docs")),
        ("call_dynamic_tool".into(), json!({"namespace": huge, "toolName": huge}), ToolErrorKind::NotFound, format!("unknown namespace {cut}; known namespaces: docs")),
        ("get_dynamic_tools".into(), json!({"namespace": "docs", "toolName": huge}), ToolErrorKind::NotFound, format!("server \"docs\" has no tool {cut}; list its tools with mcp/get_dynamic_tools {{\"namespace\":\"docs\"}}")),
        ("call_dynamic_tool".into(), json!({"namespace": "docs", "toolName": huge}), ToolErrorKind::NotFound, format!("server \"docs\" has no tool {cut}; list its tools with mcp/get_dynamic_tools {{\"namespace\":\"docs\"}}")),
        ("get_dynamic_tools".into(), json!({ huge.clone(): 1 }), ToolErrorKind::InvalidArguments, format!("unknown argument {cut}; accepted arguments: namespace, toolName, toolNames, query, limit")),
        (huge.clone(), json!({}), ToolErrorKind::NotFound, format!("unknown tool \"mcp/{}…\"; this Pack offers mcp/get_dynamic_tools and mcp/call_dynamic_tool", "a".repeat(193))),
    ];
    for (tool, args, kind, message) in cases {
        let error = host.call(&tool, args).await.unwrap_err();
        assert_eq!((error.kind, error.message), (kind, message));
    }
}

/// A `not_found` for an unknown tool names the listing tool by the full name it has under the
/// id the Pack is mounted at.
#[tokio::test]
async fn not_found_names_the_listing_tool_under_the_packs_id() {
    let ready = ready_server().await;
    let config = json!({"mcp": {"docs": {"url": format!("{}/mcp", ready.uri())}}});
    let pack = crate::support::construct(&config, "tools").unwrap();
    let until = tokio::time::Instant::now() + WAIT;
    loop {
        let listing = pack
            .call("tools/get_dynamic_tools", json!({"namespace": "docs"}))
            .await
            .unwrap();
        if listing.contains("\"status\":\"ready\"") {
            break;
        }
        assert!(tokio::time::Instant::now() < until, "{listing}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let args = json!({"namespace": "docs", "toolName": "nope"});
    assert_eq!(
        refusal(&*pack, "tools/call_dynamic_tool", args).await,
        (
            ToolErrorKind::NotFound,
            "server \"docs\" has no tool \"nope\"; list its tools with tools/get_dynamic_tools {\"namespace\":\"docs\"}"
                .to_string()
        )
    );
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
            "the entry has \"header\", which this Pack does not read; did you mean \"headers\"?",
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
        one_tool_or_400(&req, "echo")
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
            reason("mcp-server", "mcpServers").replace(" (keys are case-sensitive)", ""),
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
    // Not a matter of case: no remark on it.
    assert_eq!(
        reason(&host, "scope").await,
        json!(
            "the entry's \"oauth\" has \"scope\", which this Pack does not read; did you mean \"scopes\"?"
        )
    );
    assert_eq!(
        reason(&host, "port").await,
        said("callbackport", "callbackPort")
    );
    assert_eq!(reason(&host, "snake").await, said("client_id", "clientId"));
    let unknown = host.listing(json!({"namespace": "unknown"})).await;
    assert_eq!(unknown["status"], "ready", "{unknown}");
}
