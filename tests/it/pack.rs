//! The Pack through the Host contract: construction, the two tools' specs, the listing for every
//! status, and every error a model can act on.

use std::time::Duration;

use crate::support::Host;
use crate::support::mock;
use crate::support::mock::matchers::path;
use crate::support::mock::{Mock, MockServer};
use runvil_plugin::{Pack, Packs, Services, TOKIO_RUNTIME, ToolErrorKind, Unavailable};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

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
            "query": {"type": "string", "minLength": 1, "maxLength": 512, "description": "What you want a tool to do, in your own words or by its name; answers the best matching tools of every ready server (or of namespace)."},
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

/// The rows of a table of calls that fail: `tool {arguments} => Kind "message";` each, as
/// `(tool, arguments, ToolErrorKind::Kind, message)`.
macro_rules! error_cases {
    ($($tool:ident $args:tt => $kind:ident $message:literal;)*) => {
        vec![$((stringify!($tool), json!($args), ToolErrorKind::$kind, $message)),*]
    };
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
