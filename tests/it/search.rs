//! Finding a tool by what it does through `get_dynamic_tools`: a `query` search over every ready
//! server, exact names first, batch lookup with `toolNames`, each ready server's one-line
//! `description` in the listing, and the `invalid_arguments` of every bad combination
//! (docs/tools.md "Search"). The servers list tool sets from `bench/data/catalog.json`.

use std::time::Duration;

use crate::support::catalog;
use crate::support::hostile::{self, Reply, result, serve, standard, tools_page};
use crate::support::net::unused_loopback;
use crate::support::{Host, construct};
use runvil_plugin::ToolErrorKind;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

/// The tools `namespace` lists in the bench catalog, as `tools/list` gives them (each
/// parameter a string property).
fn catalog_tools(namespace: &str) -> Vec<Value> {
    let catalog = catalog::catalog();
    let server = catalog["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["namespace"] == namespace)
        .unwrap_or_else(|| panic!("no server {namespace} in the catalog"));
    catalog::wire_tools(server, |_| json!({"type": "string"}))
}

/// A legacy server listing `tools` whose `initialize` answer carries `server_info` and
/// `instructions` (when given).
async fn serve_described(
    tools: Vec<Value>,
    server_info: Value,
    instructions: Option<&str>,
) -> hostile::Server {
    let instructions = instructions.map(str::to_string);
    serve(move |req| {
        let reply = match req.method() {
            "initialize" => {
                let mut answer = json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": server_info,
                });
                if let Some(text) = &instructions {
                    answer["instructions"] = json!(text);
                }
                Reply::json(&result(&req.id(), answer)).header("mcp-session-id", "s-1")
            }
            "tools/list" => Reply::json(&tools_page(&req.id(), tools.clone(), None)),
            _ => standard(&req).unwrap_or_else(|| Reply::raw(500, "text/plain", "")),
        };
        async move { reply }
    })
    .await
}

/// A Host over the catalog's `namespaces` (each its own loopback server), all ready.
async fn catalog_host(namespaces: &[&str]) -> (Host, Vec<hostile::Server>) {
    let mut servers = Vec::new();
    let mut config = serde_json::Map::new();
    for namespace in namespaces {
        let server = hostile::serve_tools(catalog_tools(namespace), |_| {
            Reply::raw(500, "text/plain", "")
        })
        .await;
        config.insert(namespace.to_string(), json!({"url": server.url}));
        servers.push(server);
    }
    let host = Host::new(Value::Object(config));
    host.settled(WAIT).await;
    (host, servers)
}

/// The `namespace/name` of each match of a search answer, in order.
fn matched(answer: &Value) -> Vec<String> {
    answer["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("no matches in {answer}"))
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["namespace"].as_str().unwrap(),
                m["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn a_query_ranks_tools_by_what_they_do_across_servers() {
    let (host, _servers) = catalog_host(&["github", "slack", "linear", "stripe"]).await;
    let answer = host
        .listing(json!({"query": "send a message to the team channel", "limit": 3}))
        .await;
    assert_eq!(answer["query"], "send a message to the team channel");
    assert_eq!(answer["matches"].as_array().unwrap().len(), 3);
    assert_eq!(
        answer["matches"][0],
        json!({
            "namespace": "slack",
            "name": "slack_post_message",
            "description": "Post a new message to a Slack channel."
        })
    );
    // Every server was ready: nothing unsearched, no hint.
    assert_eq!(answer.get("notSearched"), None);
    assert_eq!(answer.get("hint"), None);
    // The user's words, not the tool's: "give the customer their money back" is a refund.
    let answer = host
        .listing(json!({"query": "give the customer their money back"}))
        .await;
    assert_eq!(matched(&answer)[0], "stripe/create_refund");
    // The default limit is 10.
    let answer = host.listing(json!({"query": "list"})).await;
    assert_eq!(answer["matches"].as_array().unwrap().len(), 10);
}

#[tokio::test]
async fn an_exact_name_ranks_first_in_any_case_and_with_its_namespace() {
    let (host, _servers) = catalog_host(&["github", "linear", "slack"]).await;
    for query in [
        "github/create_issue",
        "GITHUB_CREATE_ISSUE",
        "github.create_issue",
        "Github Create_Issue",
    ] {
        let answer = host.listing(json!({"query": query})).await;
        let names = matched(&answer);
        assert_eq!(names[0], "github/create_issue", "{query}: {names:?}");
    }
    // The name alone: both servers' create_issue come before anything else.
    let answer = host.listing(json!({"query": "create_issue"})).await;
    let mut first_two = matched(&answer)[..2].to_vec();
    first_two.sort();
    assert_eq!(first_two, ["github/create_issue", "linear/create_issue"]);
    // A name that already carries its server's name.
    let answer = host.listing(json!({"query": "SLACK_GET_USERS"})).await;
    assert_eq!(matched(&answer)[0], "slack/slack_get_users");
}

#[tokio::test]
async fn namespace_narrows_a_search_to_one_server() {
    let (host, _servers) = catalog_host(&["github", "linear"]).await;
    let answer = host
        .listing(json!({"query": "file a bug", "namespace": "linear", "limit": 50}))
        .await;
    let names = matched(&answer);
    assert_eq!(names[0], "linear/create_issue");
    assert!(names.iter().all(|n| n.starts_with("linear/")), "{names:?}");
    let unknown = host
        .call(
            "get_dynamic_tools",
            json!({"query": "x", "namespace": "nope"}),
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.kind, ToolErrorKind::NotFound);
    assert_eq!(
        unknown.message,
        "unknown namespace \"nope\"; known namespaces: github, linear"
    );
}

#[tokio::test]
async fn a_search_names_the_servers_it_could_not_search_and_a_miss_is_no_error() {
    let ready = hostile::serve_tools(catalog_tools("slack"), |_| {
        Reply::raw(500, "text/plain", "")
    })
    .await;
    let refused = unused_loopback().await;
    let down = format!("http://{}/mcp", refused.local_addr().unwrap());
    drop(refused);
    let host = Host::new(json!({
        "chat": {"url": ready.url},
        "down": {"url": down},
        "bad": {"url": "ftp://127.0.0.1/mcp"}
    }));
    host.ready("chat", WAIT).await;
    host.failed("down", WAIT).await;
    let answer = host.listing(json!({"query": "zebra quasar"})).await;
    assert_eq!(answer["matches"], json!([]));
    assert_eq!(
        answer["hint"],
        "no tool matched; try other words for what the tool should do, or list every tool with mcp/get_dynamic_tools {}"
    );
    let not_searched: Vec<(&str, &str)> = answer["notSearched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["namespace"].as_str().unwrap(),
                s["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(not_searched, [("bad", "error"), ("down", "error")]);
    // The entries are the listing's own heads: the reason comes along.
    let listing = host.listing(json!({})).await;
    assert_eq!(
        answer["notSearched"][0]["reason"],
        hostile::server_entry(&listing, "bad")["reason"]
    );
    // A match still names them: the search was partial.
    let answer = host.listing(json!({"query": "post a message"})).await;
    assert_eq!(matched(&answer)[0], "chat/slack_post_message");
    assert_eq!(answer["notSearched"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_loading_server_is_named_as_not_searched() {
    // A server that never answers: its start is still under way.
    let hanging = serve(|_| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Reply::accepted()
    })
    .await;
    let host = Host::new(json!({"slow": {"url": hanging.url}}));
    let answer = host.listing(json!({"query": "anything"})).await;
    assert_eq!(
        answer,
        json!({
            "query": "anything",
            "matches": [],
            "notSearched": [{"namespace": "slow", "status": "loading"}],
            "hint": "no tool matched; try other words for what the tool should do, or list every tool with mcp/get_dynamic_tools {}"
        })
    );
}

#[tokio::test]
async fn match_descriptions_are_the_first_sentence_scrubbed_and_at_most_160_bytes() {
    let key = "k3y-search-0123456789abcdef";
    let long = format!("Creates {} widgets without a stop", "many ".repeat(60));
    let tools = vec![
        json!({"name": "leaky", "description": format!("Uses {key} to post a message. Then more."), "inputSchema": {"type": "object"}}),
        json!({"name": "long_one", "description": long, "inputSchema": {"type": "object"}}),
        json!({"name": "titled", "title": "Post a message (title)", "inputSchema": {"type": "object"}}),
    ];
    let server = hostile::serve_tools(tools, |_| Reply::raw(500, "text/plain", "")).await;
    let host = Host::new(json!({"s": {"url": server.url, "headers": {"X-Api-Key": key}}}));
    host.ready("s", WAIT).await;
    let answer = host.listing(json!({"query": "leaky"})).await;
    assert_eq!(
        answer["matches"][0]["description"],
        "Uses [redacted] to post a message."
    );
    let answer = host.listing(json!({"query": "long_one"})).await;
    let description = answer["matches"][0]["description"].as_str().unwrap();
    assert_eq!(description.len(), 160);
    assert!(description.ends_with('…'), "{description}");
    // No description: the title, as the listing defines it.
    let answer = host.listing(json!({"query": "titled"})).await;
    assert_eq!(
        answer["matches"][0]["description"],
        "Post a message (title)"
    );
    let text = host
        .call("get_dynamic_tools", json!({"query": "post a message"}))
        .await
        .unwrap();
    assert!(!text.contains(key), "{text}");
}

#[tokio::test]
async fn tool_names_answers_each_tool_whole_and_the_unknown_ones_with_suggestions() {
    let (host, _servers) = catalog_host(&["github"]).await;
    let answer = host
        .listing(json!({
            "namespace": "github",
            "toolNames": ["create_issue", "get_me", "create_isue", "nothing_like_it", "get_me"]
        }))
        .await;
    let one = |name: &str| {
        let host = &host;
        let name = name.to_string();
        async move {
            serde_json::from_str::<Value>(&host.lookup("github", &name).await.unwrap()).unwrap()
        }
    };
    assert_eq!(
        answer,
        json!({
            "namespace": "github",
            "tools": [one("create_issue").await, one("get_me").await],
            "notFound": [
                {"name": "create_isue", "suggestions": ["create_issue", "create_gist", "update_issue"]},
                {"name": "nothing_like_it", "suggestions": []}
            ]
        })
    );
}

#[tokio::test]
async fn tool_names_of_a_hidden_tool_says_why() {
    let server = hostile::serve_tools(catalog_tools("filesystem"), |_| {
        Reply::raw(500, "text/plain", "")
    })
    .await;
    let host = Host::new(json!({"fs": {"url": server.url, "disabledTools": ["write_file"]}}));
    host.ready("fs", WAIT).await;
    let answer = host
        .listing(json!({"namespace": "fs", "toolNames": ["write_file", "move_file"]}))
        .await;
    assert_eq!(answer["tools"][0]["name"], "move_file");
    assert_eq!(answer["notFound"][0]["name"], "write_file");
    assert_eq!(answer["notFound"][0]["suggestions"], json!([]));
    let reason = answer["notFound"][0]["reason"].as_str().unwrap();
    assert!(
        reason.ends_with(", so it is neither listed nor callable"),
        "{reason}"
    );
    assert!(reason.contains("disabledTools"), "{reason}");
}

#[tokio::test]
async fn bad_arguments_say_what_to_change() {
    let (host, _servers) = catalog_host(&["github"]).await;
    let too_long = "a".repeat(513);
    let many: Vec<String> = (0..21).map(|i| format!("t{i}")).collect();
    let cases = [
        (json!({"query": ""}), "\"query\" is empty; say in a few words what the tool should do, e.g. {\"query\":\"send a message\"}".to_string()),
        (json!({"query": "   "}), "\"query\" is empty; say in a few words what the tool should do, e.g. {\"query\":\"send a message\"}".to_string()),
        (json!({"query": too_long}), "\"query\" is 513 bytes, over the 512 allowed; say in a few words what the tool should do".to_string()),
        (json!({"query": "x", "limit": 0}), "\"limit\" must be a whole number from 1 to 50, found 0".to_string()),
        (json!({"query": "x", "limit": 51}), "\"limit\" must be a whole number from 1 to 50, found 51".to_string()),
        (json!({"query": "x", "limit": 2.5}), "\"limit\" must be a whole number from 1 to 50, found 2.5".to_string()),
        (json!({"query": "x", "limit": "5"}), "\"limit\" must be a whole number from 1 to 50, found a string".to_string()),
        (json!({"limit": 5}), "limit needs a query, e.g. {\"query\":\"send a message\",\"limit\":5}".to_string()),
        (json!({"namespace": "github", "limit": 5}), "limit needs a query, e.g. {\"query\":\"send a message\",\"limit\":5}".to_string()),
        (json!({"namespace": "github", "toolNames": []}), "\"toolNames\" is empty; give 1 to 20 tool names".to_string()),
        (json!({"namespace": "github", "toolNames": many}), "\"toolNames\" has 21 names; give at most 20 per call".to_string()),
        (json!({"toolNames": ["get_me"]}), "toolNames needs a namespace, e.g. {\"namespace\":\"github\",\"toolNames\":[\"add_issue_comment\"]}".to_string()),
        (json!({"namespace": "github", "toolName": "get_me", "toolNames": ["get_me"]}), "give toolName (one tool) or toolNames (several), not both".to_string()),
        (json!({"namespace": "github", "toolNames": "get_me"}), "\"toolNames\" must be an array of tool names, found a string".to_string()),
        (json!({"namespace": "github", "toolNames": ["get_me", 3]}), "toolNames[1] must be a string, found a number".to_string()),
        (json!({"query": "x", "toolName": "get_me", "namespace": "github"}), "query searches by what a tool does and takes no toolName or toolNames; drop query to look tools up by name".to_string()),
        (json!({"query": 5}), "\"query\" must be a string, found a number".to_string()),
    ];
    for (args, message) in cases {
        let error = host
            .call("get_dynamic_tools", args.clone())
            .await
            .unwrap_err();
        assert_eq!(error.kind, ToolErrorKind::InvalidArguments, "{args}");
        assert_eq!(error.message, message, "{args}");
    }
    // The arguments that were accepted before still answer as before.
    let error = host
        .call("get_dynamic_tools", json!({"nope": 1}))
        .await
        .unwrap_err();
    assert_eq!(
        error.message,
        "unknown argument \"nope\"; accepted arguments: namespace, toolName, toolNames, query, limit"
    );
}

#[tokio::test]
async fn the_listing_gives_each_ready_server_a_one_line_description() {
    let tools = || vec![hostile::tool("t", "A tool.")];
    let described = serve_described(
        tools(),
        json!({"name": "a", "version": "1", "description": "Issues and pull requests. Also more."}),
        Some("Ignored while serverInfo has a description."),
    )
    .await;
    let instructed = serve_described(
        tools(),
        json!({"name": "b", "version": "1"}),
        Some("Use search first.\nThen fetch."),
    )
    .await;
    let plain = serve_described(tools(), json!({"name": "c", "version": "1"}), None).await;
    let host = Host::new(json!({
        "a": {"url": described.url},
        "b": {"url": instructed.url},
        "c": {"url": plain.url}
    }));
    let listing = host.settled(WAIT).await;
    assert_eq!(
        listing,
        json!({"servers": [
            {"namespace": "a", "status": "ready", "description": "Issues and pull requests.", "tools": ["t"]},
            {"namespace": "b", "status": "ready", "description": "Use search first.", "tools": ["t"]},
            {"namespace": "c", "status": "ready", "tools": ["t"]}
        ]})
    );
}

#[tokio::test]
async fn the_tools_tell_the_model_to_search_by_what_it_wants_done() {
    let pack = construct(&json!({"mcp": {}}), "mcp").unwrap();
    let tools = pack.tools();
    let get = &tools[0];
    assert!(
        get.description.contains(
            "When you do not know a tool's name, search by what you want done: {\"query\":\"send a message to a channel\"}"
        ),
        "{}",
        get.description
    );
    assert_eq!(get.parameters["properties"]["limit"]["maximum"], 50);
    assert_eq!(get.parameters["properties"]["toolNames"]["maxItems"], 20);
    // A byte bound JSON Schema cannot state (its maxLength counts characters): said in words.
    assert_eq!(get.parameters["properties"]["query"].get("maxLength"), None);
    assert!(
        tools[1]
            .description
            .contains("search it by what you want done with {\"query\":\"...\"}"),
        "{}",
        tools[1].description
    );
}

/// A search of one server that finds nothing points at that server's own listing.
#[tokio::test]
async fn a_miss_in_one_namespace_hints_at_that_servers_listing() {
    let (host, _servers) = catalog_host(&["slack"]).await;
    let answer = host
        .listing(json!({"query": "zebra quasar", "namespace": "slack"}))
        .await;
    assert_eq!(
        answer,
        json!({
            "query": "zebra quasar",
            "matches": [],
            "hint": "no tool matched; try other words for what the tool should do, or list every tool with mcp/get_dynamic_tools {\"namespace\":\"slack\"}"
        })
    );
}

// Arguments the tool spec admits.
mod spec_admits {
    use serde_json::json;

    use crate::secrets_gate::cut_and_echoed::echo_server;
    use crate::support::hostile::Server;
    use crate::support::{Host, WAIT};

    /// A Host whose one entry `k`, an [`echo_server`] of `x-api-key` issuing session `session`,
    /// is ready.
    async fn echo_host(session: &'static str) -> (Server, Host) {
        let server = echo_server("x-api-key", session).await;
        let host = Host::new(json!({"k": {"url": server.url}}));
        host.ready("k", WAIT).await;
        (server, host)
    }

    /// The rule: the tool's own spec (`"limit": {"type": "integer"}`, JSON Schema 2020-12
    /// §6.1.1: a number with a zero fractional part is an integer) admits `5.0`, yet the Pack
    /// refuses it as not "a whole number".
    #[tokio::test]
    async fn a_limit_of_five_point_zero_is_refused_though_the_spec_admits_it() {
        let (_server, host) = echo_host("s-3").await;
        let answer = host
            .call(
                "get_dynamic_tools",
                json!({"query": "echo a header", "limit": 5.0}),
            )
            .await;
        assert!(answer.is_ok(), "{answer:?}");
    }

    /// A query is bounded in bytes (512), which JSON Schema's `maxLength` (characters) cannot
    /// state, so the spec says it in words; 256 two-byte characters pass, 257 do not.
    #[tokio::test]
    async fn a_query_is_bounded_in_bytes_as_the_spec_says_in_words() {
        let (_server, host) = echo_host("s-4").await;
        let at_bound = host
            .call("get_dynamic_tools", json!({"query": "é".repeat(256)}))
            .await;
        assert!(at_bound.is_ok(), "{at_bound:?}");
        let over = host
            .call("get_dynamic_tools", json!({"query": "é".repeat(257)}))
            .await
            .unwrap_err();
        assert_eq!(
            over.message,
            "\"query\" is 514 bytes, over the 512 allowed; say in a few words what the tool should do"
        );
    }
}
