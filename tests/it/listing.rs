//! Listing and pagination (MCP spec "Tools": `tools/list`, "Pagination"): the cursor walk and
//! its ends (repeated, cycling, empty or endless cursors), the caps on tools and descriptions,
//! malformed and omitted tools, cached listings and their `ttl`, and relisting on
//! `notifications/tools/list_changed` or on a miss (README "What the tools answer").

use std::time::Duration;

use runvil_plugin::ToolErrorKind;
use serde_json::{Value, json};

use crate::bounds::{
    call_t_within, cursors_asked, error_reason, failed_start, first_start, list_server, ready_on,
};
use crate::eras::{LIMIT, call, lines, ready, trail_lines};
use crate::support::answers::{discover_declaring, heartbeat, namespace, tool_names};
use crate::support::hostile::{
    self, Received, Reply, Server, entry, result, rpc_error, serve, serve_routes, server_entry,
    standard, text_result, tool, tools_page,
};
use crate::support::mock::{self, ResponseTemplate, body};
use crate::support::modern::{Era, Modern, tool_with};
use crate::support::{Host, WAIT};
use crate::wire::{
    Live, assert_ready_with, call_s, count, keyed_host, list_changed, mock_server,
    mock_text_result, mock_tool, requests, settles_at, sse_then, tools, wait_count, wait_tools,
};

/// A [`Modern`] server of `era` whose `tools/list` answers `pages` (the cursor asked for, the
/// tools, the next cursor), and a Host whose start walked them: it must be ready, listing `tools`.
async fn walked(
    era: Era,
    pages: Vec<(Option<&str>, Vec<Value>, Option<&str>)>,
    tools: Value,
) -> (Modern, Host) {
    let server = Modern::start_in(era).await;
    server.set_pages(pages);
    let host = Host::new(json!({"m": entry(&server.url)}));
    let listing = host.settled(LIMIT).await;
    let entry = &listing["servers"][0];
    assert_eq!(entry["status"], "ready", "{era:?}: {entry}");
    assert_eq!(entry["tools"], tools, "{era:?}: {entry}");
    (server, host)
}

/// As [`walked`]; the `tools/list` requests asked with the cursors `asked` (`Null`: none), in
/// order.
async fn walked_asking(
    era: Era,
    pages: Vec<(Option<&str>, Vec<Value>, Option<&str>)>,
    tools: Value,
    asked: &[Value],
) -> (Modern, Host) {
    let (server, host) = walked(era, pages, tools).await;
    assert_eq!(cursors(&server), asked, "{era:?}");
    (server, host)
}

/// The `cursor` each `tools/list` asked with (`Null`: none), in order.
fn cursors(server: &Modern) -> Vec<Value> {
    server
        .steps("tools/list")
        .iter()
        .map(|s| s.params.get("cursor").cloned().unwrap_or(Value::Null))
        .collect()
}

/// A server whose `tools/list` answer is one page of `tools`; everything else is [`standard`].
async fn tools_server(tools: Vec<Value>) -> Server {
    list_server(move |req| Reply::json(&tools_page(&req.id(), tools.clone(), None))).await
}

/// A start whose `tools/list` pages each list `tools` and hand out the cursor `next(asked)`
/// (`asked`: the cursor the page was asked with) fails with `reason`; its pages were asked with
/// `cursors`.
async fn assert_pagination_fails(
    ns: &str,
    tools: Vec<Value>,
    next: fn(Option<&str>) -> &str,
    reason: &str,
    cursors: &[Value],
) {
    let server = list_server(move |req| {
        let next = next(req.rpc["params"]["cursor"].as_str());
        Reply::json(&tools_page(&req.id(), tools.clone(), Some(next)))
    })
    .await;
    let (_host, got) = failed_start(ns, &server.url, Duration::from_secs(10)).await;
    assert_eq!(got, reason);
    assert_eq!(cursors_asked(&first_start(&server)), cursors);
}

/// A server whose `initialize` declares only prompts and resources, with `tools/list` answered
/// by `list`.
async fn undeclared_server<F>(list: F) -> Server
where
    F: Fn(&Received) -> Reply + Send + Sync + 'static,
{
    serve(move |req| {
        let reply = match req.method() {
            "initialize" => Reply::json(&result(
                &req.id(),
                json!({"protocolVersion": "2025-06-18", "capabilities": {"prompts": {}, "resources": {}},
                    "serverInfo": {"name": "p", "version": "1"}}),
            )),
            "tools/list" => list(&req),
            _ => standard(&req)
                .unwrap_or_else(|| Reply::json(&rpc_error(&req.id(), -32601, "Method not found"))),
        };
        async move { reply }
    })
    .await
}

/// docs/connection.md "Pagination": a page asked for with `""` that lists only tools already
/// kept is an older server's first page again (`""` meant "no more" to it), and ends the walk
/// whatever cursor it names; in both eras.
#[tokio::test]
async fn an_older_server_ending_a_two_page_walk_with_an_empty_cursor_is_listed() {
    for era in [Era::Modern, Era::Legacy] {
        walked_asking(
            era,
            vec![
                (None, vec![tool_with("a", json!({}))], Some("p2")),
                (Some("p2"), vec![tool_with("b", json!({}))], Some("")),
                // An older server reads the cursor "" as none: its first page again.
                (Some(""), vec![tool_with("a", json!({}))], Some("p2")),
            ],
            json!(["a", "b"]),
            &[Value::Null, json!("p2"), json!("")],
        )
        .await;
    }
}

/// ARCHITECTURE "Invariants": every server output is bounded. The reason a tool with an
/// invalid `x-mcp-header` is omitted quotes its property path and declared type cut to 64
/// characters, as it quotes the header name.
#[tokio::test]
async fn an_omitted_tools_reason_is_bounded_whatever_its_property_name() {
    let server = Modern::start().await;
    let long = "p".repeat(100_000);
    let mut properties = serde_json::Map::new();
    properties.insert(
        long.clone(),
        json!({"type": "number", "x-mcp-header": "Amount"}),
    );
    server.set_tools(vec![
        tool_with("echo", json!({})),
        tool_with("pay", Value::Object(properties)),
    ]);
    let host = ready(&server).await;
    let listing = namespace(&host, "m").await;
    let omitted = listing["omitted"].as_array().expect("pay is omitted");
    assert_eq!(omitted.len(), 1, "{}", &listing.to_string()[..300]);
    assert_eq!(omitted[0]["name"], "pay");
    let reason = omitted[0]["reason"].as_str().unwrap();
    assert!(
        reason.len() <= 1024,
        "the reason is {} bytes: {}…",
        reason.len(),
        &reason[..120]
    );
}

/// docs/connection.md "Pagination": `nextCursor: ""` is a cursor like any other and is
/// followed; only a page asked for with `""` that answers `""` again, or that is the first page
/// again, ends the walk. An empty page is neither: a server whose `""` page is empty and names a
/// further cursor is walked to its end (MCP 2026-07-28, server/utilities/pagination: a page may
/// hold any number of items).
#[tokio::test]
async fn an_empty_page_at_the_empty_cursor_with_a_next_cursor_is_followed() {
    for era in [Era::Modern, Era::Legacy] {
        walked_asking(
            era,
            vec![
                (None, vec![tool_with("a", json!({}))], Some("")),
                (Some(""), vec![], Some("c2")),
                (Some("c2"), vec![tool_with("z", json!({}))], None),
            ],
            json!(["a", "z"]),
            &[Value::Null, json!(""), json!("c2")],
        )
        .await;
    }
}

/// CHANGELOG "Fixed" and docs/connection.md "Pagination": an older server that ends its walk
/// with `nextCursor: ""` and answers `""` with its first page (and that page's cursor) again is
/// listed. docs/tools.md: a malformed tool is left out (named under `omitted`) while the
/// server's other tools stay listed — so a first page holding one malformed tool is still that
/// server's first page, and its repetition ends the walk too, instead of failing the start as
/// "a cursor already used".
#[tokio::test]
async fn an_older_servers_repeated_first_page_with_a_malformed_tool_ends_the_walk() {
    let bad = json!({"name": "bad", "description": 5, "inputSchema": {"type": "object"}});
    for era in [Era::Modern, Era::Legacy] {
        let (_server, host) = walked_asking(
            era,
            vec![
                (
                    None,
                    vec![tool_with("a", json!({})), bad.clone()],
                    Some("p2"),
                ),
                (Some("p2"), vec![tool_with("b", json!({}))], Some("")),
                // An older server reads the cursor "" as none: its first page again.
                (
                    Some(""),
                    vec![tool_with("a", json!({})), bad.clone()],
                    Some("p2"),
                ),
            ],
            json!(["a", "b"]),
            &[Value::Null, json!("p2"), json!("")],
        )
        .await;
        let one = host.listing(json!({"namespace": "m"})).await;
        assert_eq!(
            one["omitted"],
            json!([{"name": "bad", "reason": "\"description\" must be a string, found a number"}]),
            "{era:?}"
        );
    }
}

/// A modern server's `tools/list` page with `ttlMs: 0.5`. docs/lifecycle.md: "a listing's
/// `ttlMs` | at least 5 s, at most a day | a smaller positive ttl counts as 5 s"; README: "a
/// server-chosen `ttlMs` counts as at least 5 s". A positive ttl under 1 ms counts as 5 s
/// too, as `ttlMs: 1` does (it is not read as "no ttl"): used 6 s after the start, the listing
/// is re-listed once, two `tools/list`.
#[tokio::test(start_paused = true)]
async fn a_positive_ttl_under_one_millisecond_counts_as_the_5_second_floor() {
    heartbeat();
    let server = hostile::serve_all(|req| async move {
        match req.method() {
            "server/discover" => discover_declaring(&req.id(), json!({"tools": {}})),
            "tools/list" => Reply::json(&result(
                &req.id(),
                json!({"tools": [tool("t", "t")], "ttlMs": 0.5}),
            )),
            _ => Reply::raw(400, "text/plain", ""),
        }
    })
    .await;
    let host = Host::new(json!({ "ttl": entry(&server.url) }));
    host.ready("ttl", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    namespace(&host, "ttl").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    namespace(&host, "ttl").await;
    assert_eq!(server.count("tools/list"), 2);
}

#[tokio::test]
async fn cursor_echoed_on_the_last_page_fails_the_start() {
    assert_pagination_fails(
        "echo",
        vec![tool("a", "A")],
        |asked| match asked {
            None => "page-2",
            Some(asked) => asked, // echo: the "last" page hands back the cursor it was given
        },
        "tools/list page 2 returned the cursor it was asked with, so pagination would never end",
        &[Value::Null, json!("page-2")],
    )
    .await;
}

#[tokio::test]
async fn cursor_cycle_a_b_a_fails_the_start() {
    assert_pagination_fails(
        "cycle",
        vec![],
        |asked| match asked {
            None => "A",
            Some("A") => "B",
            Some(_) => "A",
        },
        "tools/list page 3 returned a cursor already used by an earlier page, so pagination would loop",
        &[Value::Null, json!("A"), json!("B")],
    )
    .await;
}

#[tokio::test]
async fn unique_cursors_with_empty_pages_forever_stop_at_the_page_cap() {
    let server = list_server(|req| {
        let cursor = format!("c{}", req.nth);
        Reply::json(&tools_page(&req.id(), vec![], Some(&cursor)))
    })
    .await;
    let (_host, reason) = failed_start("forever", &server.url, Duration::from_secs(20)).await;
    assert_eq!(
        reason,
        "the server had more than 100 pages of tools (tools/list still returned a nextCursor)"
    );
    let asked = cursors_asked(&first_start(&server));
    assert_eq!(asked.len(), 100, "exactly MAX_PAGES pages are fetched");
    assert_eq!(asked[99], json!("c98"));
}

/// A `nextCursor` of `""` is a cursor like any other and is followed; the page asked for with
/// `""` answering `""` again ends the walk (it lists only the tool already kept, so it adds
/// nothing).
#[tokio::test]
async fn an_empty_cursor_is_followed_and_an_empty_cursor_again_ends_the_listing() {
    let server = list_server(|req| {
        Reply::json(&tools_page(
            &req.id(),
            vec![tool("only", "the one")],
            Some(""),
        ))
    })
    .await;
    let host = ready_on("s", &server.url).await;
    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [{"namespace": "s", "status": "ready", "tools": ["only"]}]})
    );
    assert_eq!(cursors_asked(&server.requests()), [Value::Null, json!("")]);
}

#[tokio::test]
async fn more_than_1000_tools_fail_the_start_and_exactly_1000_are_fine() {
    let many = |per_page: usize, pages: usize| {
        move |req: &Received| {
            let page = match req.rpc["params"]["cursor"].as_str() {
                None => 0,
                Some(c) => c.parse::<usize>().unwrap(),
            };
            let tools = (0..per_page)
                .map(|i| tool(&format!("t{page:02}_{i:04}"), "x"))
                .collect();
            let next = (page + 1 < pages).then(|| (page + 1).to_string());
            Reply::json(&tools_page(&req.id(), tools, next.as_deref()))
        }
    };
    let too_many = list_server(many(300, 4)).await;
    let exactly = list_server(many(250, 4)).await;
    let host = Host::new(json!({"big": entry(&too_many.url), "full": entry(&exactly.url)}));
    assert_eq!(
        error_reason(&host, "big", Duration::from_secs(20)).await,
        "the server listed more than 1000 tools (at least 1200 by page 4)"
    );
    let listing = host.ready("full", Duration::from_secs(20)).await;
    assert_eq!(
        server_entry(&listing, "full")["tools"]
            .as_array()
            .unwrap()
            .len(),
        1000
    );
}

#[tokio::test]
async fn duplicate_tool_names_first_wins_within_and_across_pages() {
    let server = list_server(|req| match req.rpc["params"]["cursor"].as_str() {
        None => Reply::json(&tools_page(
            &req.id(),
            vec![tool("dup", "first"), tool("b", "b1"), tool("dup", "second")],
            Some("p2"),
        )),
        Some(_) => Reply::json(&tools_page(
            &req.id(),
            vec![tool("b", "b2"), tool("dup", "third"), tool("a", "a1")],
            None,
        )),
    })
    .await;
    let host = ready_on("d", &server.url).await;
    let listing = host.listing(json!({"namespace": "d"})).await;
    let names_and_descriptions: Vec<(String, String)> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["description"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        names_and_descriptions,
        [
            ("a".to_string(), "a1".to_string()),
            ("b".to_string(), "b1".to_string()),
            ("dup".to_string(), "first".to_string()),
        ]
    );
}

#[tokio::test]
async fn long_descriptions_are_cut_on_a_char_boundary() {
    let server = tools_server(vec![
        tool("ascii", &"x".repeat(10_000)),
        tool("accents", &"é".repeat(5_000)),
        json!({"name": "titled", "title": "t".repeat(4097)}),
        tool("exact", &"y".repeat(4096)),
    ])
    .await;
    let host = ready_on("long", &server.url).await;
    let described = |name: &str| {
        let host = &host;
        let name = name.to_string();
        async move {
            host.listing(json!({"namespace": "long", "toolName": name}))
                .await["description"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    assert_eq!(described("ascii").await, format!("{}…", "x".repeat(4093)));
    // 4093 would split an 'é': the cut moves back to 4092 bytes = 2046 'é'.
    assert_eq!(described("accents").await, format!("{}…", "é".repeat(2046)));
    assert_eq!(described("titled").await, format!("{}…", "t".repeat(4093)));
    assert_eq!(described("exact").await, "y".repeat(4096));
}

#[tokio::test]
async fn a_malformed_tools_list_fails_the_start_and_a_nameless_tool_is_omitted() {
    let server = list_server(|req| Reply::json(&result(&req.id(), json!({"tools": "none"})))).await;
    let nameless = list_server(|req| {
        Reply::json(&tools_page(
            &req.id(),
            vec![tool("ok", "x"), json!({"name": ""})],
            None,
        ))
    })
    .await;
    let host = Host::new(json!({"shape": entry(&server.url), "nameless": entry(&nameless.url)}));
    assert_eq!(
        error_reason(&host, "shape", Duration::from_secs(10)).await,
        "tools/list page 1 is not a valid ListToolsResult"
    );
    host.ready("nameless", Duration::from_secs(10)).await;
    assert_eq!(
        host.listing(json!({"namespace": "nameless"})).await,
        json!({"namespace": "nameless", "status": "ready", "protocolVersion": "2025-06-18",
            "tools": [{"name": "ok", "description": "x", "inputSchema": {"type": "object"}}],
            "omitted": [{"name": "tool 2 of tools/list page 1", "reason": "its name is 0 bytes (allowed: 1 to 256)"}]})
    );
}

/// Each tool that is malformed or over a per-tool bound is left out and shown under `omitted`
/// (by name when it has a readable one, else by position); the rest stay listed and callable.
#[tokio::test]
async fn malformed_tools_are_omitted_and_the_rest_stay_ready() {
    let server = list_server(|req| match req.rpc["params"]["cursor"].as_str() {
        None => Reply::json(&tools_page(
            &req.id(),
            vec![
                tool("search", "Searches"),
                json!({"name": "fetch_page", "description": {"en": "Fetches a page"}}),
                json!({"name": 42}),
                json!("not a tool"),
                json!({"description": "no name"}),
                json!({"name": "x".repeat(257)}),
                json!({"name": "titled", "title": ["a"]}),
                json!({"name": "schema_text", "inputSchema": "object"}),
                json!({"name": "output_list", "inputSchema": {"type": "object"}, "outputSchema": []}),
                json!({"name": "notes", "annotations": 3}),
                json!({"name": "nulls", "description": null, "title": null, "outputSchema": null}),
                tool("search", "a second search"),
            ],
            Some("p2"),
        )),
        Some(_) => Reply::json(&tools_page(
            &req.id(),
            vec![
                json!({"name": "huge", "inputSchema": {"type": "object", "description": "y".repeat(300 * 1024)}}),
                tool("zeta", "last"),
            ],
            None,
        )),
    })
    .await;
    let host = ready_on("m", &server.url).await;
    assert_eq!(
        server_entry(&host.listing(json!({})).await, "m")["tools"],
        json!(["nulls", "search", "zeta"])
    );
    let detail = host.listing(json!({"namespace": "m"})).await;
    assert_eq!(
        detail["omitted"],
        json!([
            {"name": "fetch_page", "reason": "\"description\" must be a string, found an object"},
            {"name": "tool 3 of tools/list page 1", "reason": "\"name\" must be a string, found a number"},
            {"name": "tool 4 of tools/list page 1", "reason": "it is a string, not a tool object"},
            {"name": "tool 5 of tools/list page 1", "reason": "it has no \"name\""},
            {"name": "tool 6 of tools/list page 1", "reason": "its name is 257 bytes (allowed: 1 to 256)"},
            {"name": "titled", "reason": "\"title\" must be a string, found an array"},
            {"name": "schema_text", "reason": "\"inputSchema\" must be an object, found a string"},
            {"name": "output_list", "reason": "\"outputSchema\" must be an object, found an array"},
            {"name": "notes", "reason": "\"annotations\" must be an object, found a number"},
            {"name": "search", "reason": "another tool of the same name was listed first"},
            {"name": "huge", "reason": "its schemas are 307234 bytes (limit 262144)"},
        ])
    );
    assert_eq!(detail["tools"][0]["description"], "nulls");
    assert_eq!(detail["tools"][1]["description"], "Searches");
    let one = host
        .listing(json!({"namespace": "m", "toolName": "nulls"}))
        .await;
    assert_eq!(
        one,
        json!({"namespace": "m", "name": "nulls", "description": "nulls", "inputSchema": {"type": "object"}})
    );
}

/// A server that declares no `tools` capability is still asked for `tools/list` once: a
/// JSON-RPC error of any code means it is ready with no tools, and an answer lists its tools. A
/// server that declared `tools` and answers -32601 is ready with no tools too. None is asked
/// again or initialized again.
#[tokio::test]
async fn servers_without_tools_are_ready_with_none() {
    let prompts_only =
        undeclared_server(|req| Reply::json(&rpc_error(&req.id(), -32601, "Method not found")))
            .await;
    let internal =
        undeclared_server(|req| Reply::json(&rpc_error(&req.id(), -32603, "no tools here"))).await;
    let undeclared_tools = undeclared_server(|req| {
        Reply::json(&tools_page(
            &req.id(),
            vec![tool("search", "Searches.")],
            None,
        ))
    })
    .await;
    let not_found =
        list_server(|req| Reply::json(&rpc_error(&req.id(), -32601, "Method not found"))).await;
    let host = Host::new(json!({
        "prompts": entry(&prompts_only.url),
        "internal": entry(&internal.url),
        "tools": entry(&undeclared_tools.url),
        "nf": entry(&not_found.url)
    }));
    let listing = host.settled(Duration::from_secs(10)).await;
    assert_eq!(
        listing,
        json!({"servers": [
            {"namespace": "internal", "status": "ready", "tools": []},
            {"namespace": "nf", "status": "ready", "tools": []},
            {"namespace": "prompts", "status": "ready", "tools": []},
            {"namespace": "tools", "status": "ready", "tools": ["search"]}]})
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let servers = [&prompts_only, &internal, &undeclared_tools, &not_found];
    assert_eq!(
        servers.map(|s| (s.count("initialize"), s.count("tools/list"))),
        [(1, 1); 4]
    );
}

/// A server that declared `tools` and answers `tools/list` with an error other than -32601
/// fails its start, with the server's error as the reason.
#[tokio::test]
async fn a_declared_tools_server_whose_tools_list_fails_is_an_error() {
    let server =
        list_server(|req| Reply::json(&rpc_error(&req.id(), -32603, "database down"))).await;
    let (_host, reason) = failed_start("strict", &server.url, Duration::from_secs(10)).await;
    assert_eq!(
        reason,
        "the server answered with error -32603: database down"
    );
}

/// A server that forgets every session at once on `tools/list` after the start (a load balancer
/// without sticky sessions does this): the re-listing's 404 initializes again, and that renewal
/// must not ask for yet another re-listing forever. After one `list_changed`, the Pack should
/// initialize again once (the re-listing's own renewal) and then stop; it should not flood the
/// server with `initialize` + `tools/list` in a tight loop.
#[tokio::test]
async fn a_relisting_that_keeps_meeting_404_does_not_loop() {
    let server = serve_routes(|req| async move {
        Some(match req.method() {
            "tools/list" if req.nth == 0 => {
                Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
            }
            "tools/list" => Reply::raw(404, "text/plain", "no such session"),
            "tools/call" => Reply::sse(&[
                json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
                text_result(&req.id(), "done"),
            ]),
            _ => return None,
        })
    })
    .await;
    let host = ready_on("lb", &server.url).await;
    assert_eq!(
        call_t_within(&host, "lb", Duration::from_secs(10)).await,
        Ok("done".to_string())
    );
    // Let the re-listing (and whatever it sets off) run.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The start's initialize, and the one the re-listing's 404 caused.
    assert_eq!(server.count("initialize"), 2);
    let listing = host.listing(json!({"namespace": "lb"})).await;
    assert_eq!(listing["status"], "ready");
    assert_eq!(listing["tools"][0]["name"], "t");
}

/// Two lookups of a tool the server added silently, the second made while the first one's
/// re-listing is still running: the second should see the tool that re-listing brings (it
/// causes no extra re-listing by waiting for the running one), not `not_found`.
#[tokio::test]
async fn a_miss_racing_a_miss_relisting_sees_the_new_tool() {
    let server = serve_routes(|req| async move {
        if req.method() != "tools/list" {
            return None;
        }
        let mut tools = vec![tool("t", "t")];
        if req.nth > 0 {
            // The re-listing is slow: the second lookup lands while it runs.
            tokio::time::sleep(Duration::from_millis(500)).await;
            tools.push(tool("u", "u"));
        }
        Some(Reply::json(&tools_page(&req.id(), tools, None)))
    })
    .await;
    let host = ready_on("slow", &server.url).await;
    let ask = || {
        host.call(
            "get_dynamic_tools",
            json!({"namespace": "slow", "toolName": "u"}),
        )
    };
    let first = ask();
    let second = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        ask().await
    };
    let (first, second) = tokio::join!(first, second);
    let expected = json!({"namespace": "slow", "name": "u", "description": "u",
                          "inputSchema": {"type": "object"}})
    .to_string();
    assert_eq!(first.as_deref(), Ok(expected.as_str()));
    assert_eq!(second.as_deref(), Ok(expected.as_str()));
    assert_eq!(server.count("tools/list"), 2);
}

/// `ToolList::omitted` is documented as "tools left out, in the order the server listed them",
/// but duplicates are appended after every other omitted tool, in name order: a duplicate
/// listed first shows last.
#[tokio::test]
async fn omitted_tools_keep_the_order_the_server_listed_them() {
    let server = tools_server(vec![
        tool("b", "first b"),
        tool("b", "second b"),
        json!({"name": "x", "description": {}}),
        tool("a", "first a"),
        tool("a", "second a"),
    ])
    .await;
    let host = ready_on("o", &server.url).await;
    let detail = host.listing(json!({"namespace": "o"})).await;
    let dup = "another tool of the same name was listed first";
    assert_eq!(
        detail["omitted"],
        json!([
            {"name": "b", "reason": dup},
            {"name": "x", "reason": "\"description\" must be a string, found an object"},
            {"name": "a", "reason": dup},
        ])
    );
}

/// A listing older than its ttl is refreshed when next used, once; a server-chosen ttl below
/// the 5 s floor (`ttlMs: 1`) counts as 5 s, so using the listing does not re-list it every
/// time.
#[tokio::test]
async fn a_listing_older_than_its_ttl_is_refreshed_when_used_and_not_more_often() {
    let server = Modern::start().await;
    server.set_cache(json!(1), json!("private"));
    let host = ready(&server).await;
    for _ in 0..5 {
        namespace(&host, "m").await;
        call(&host, "echo", json!({})).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(server.count("tools/list"), 1, "{:?}", server.lines());
    tokio::time::sleep(Duration::from_millis(5_000)).await;
    assert_eq!(server.count("tools/list"), 1, "no refresh until used");
    namespace(&host, "m").await;
    namespace(&host, "m").await;
    call(&host, "echo", json!({})).await.unwrap();
    let trail = server.settle(Duration::from_millis(300), LIMIT).await;
    assert_eq!(
        trail.iter().filter(|s| s.method == "tools/list").count(),
        2,
        "{:?}",
        server.lines()
    );
}

#[tokio::test]
async fn a_listing_with_ttl_zero_or_absent_is_not_refreshed_by_time() {
    for ttl in [json!(0), Value::Null] {
        let server = Modern::start().await;
        server.set_cache(ttl.clone(), Value::Null);
        let host = ready(&server).await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        namespace(&host, "m").await;
        call(&host, "echo", json!({})).await.unwrap();
        let trail = server.settle(Duration::from_millis(300), LIMIT).await;
        assert_eq!(
            trail_lines(&trail),
            lines(&[
                "POST server/discover 200",
                "POST tools/list 200",
                "POST tools/call 200"
            ]),
            "ttl {ttl}"
        );
    }
}

#[tokio::test]
async fn an_empty_next_cursor_is_followed_and_its_repeat_ends_the_walk() {
    for era in [Era::Modern, Era::Legacy] {
        let server = Modern::start_in(era).await;
        server.set_pages(vec![
            (None, vec![tool_with("a", json!({}))], Some("")),
            (Some(""), vec![tool_with("b", json!({}))], Some("")),
        ]);
        let host = ready(&server).await;
        let listing = namespace(&host, "m").await;
        let names = tool_names(&listing);
        assert_eq!(names, [&json!("a"), &json!("b")], "{era:?}");
        let lists = server.steps("tools/list");
        assert_eq!(lists.len(), 2, "{era:?}: {:?}", server.lines());
        assert_eq!(lists[0].params.get("cursor"), None, "{era:?}");
        assert_eq!(lists[1].params["cursor"], "", "{era:?}");
    }
}

#[tokio::test]
async fn every_tools_list_page_is_fetched() {
    let server = mock_server(mock::server(|request, method| {
        let cursor = body(request)["params"]["cursor"].clone();
        match (method, cursor.as_str()) {
            ("tools/list", None) => mock::result(
                request,
                json!({"tools": [mock_tool("c"), mock_tool("a")], "nextCursor": "p2"}),
            ),
            ("tools/list", Some("p2")) => mock::result(
                request,
                json!({"tools": [mock_tool("b")], "nextCursor": "p3"}),
            ),
            ("tools/list", Some("p3")) => mock::result(
                request,
                json!({"tools": [mock_tool("d")], "nextCursor": ""}),
            ),
            // "" is a cursor too (MCP 2026-07-28, pagination); answered "" again, the walk ends.
            ("tools/list", Some("")) => mock::result(
                request,
                json!({"tools": [mock_tool("e")], "nextCursor": ""}),
            ),
            _ => ResponseTemplate::new(400),
        }
    }))
    .await;
    let _host = assert_ready_with(&server, json!(["a", "b", "c", "d", "e"])).await;
    let cursors: Vec<Value> = requests(&server)
        .await
        .iter()
        .map(body)
        .filter(|b| b["method"] == "tools/list")
        .map(|b| b["params"].clone())
        .collect();
    assert_eq!(
        cursors,
        [
            json!({}),
            json!({"cursor": "p2"}),
            json!({"cursor": "p3"}),
            json!({"cursor": ""})
        ]
    );
}

#[tokio::test]
async fn a_list_changed_notification_on_a_call_stream_relists() {
    let (server, host) = Live::new()
        .adding_b()
        .changing_at_the_first_call("added b", "plain")
        .ready()
        .await;
    assert_eq!(call_s(&host, "a").await.unwrap(), "added b");
    wait_tools(&host, &["a", "b"]).await;
    assert_eq!(call_s(&host, "b").await.unwrap(), "plain");
    settles_at(&server, "tools/list", 2).await;
    assert_eq!(
        count(&server, "GET").await,
        1,
        "a server that declared no listChanged is asked for the stream once (405: none)"
    );
}

#[tokio::test]
async fn a_change_during_the_start_listing_is_not_lost() {
    let (server, host) = Live::new()
        .list(|r, n| match n {
            1 => sse_then(r, &[list_changed()], tools(&["a"])),
            _ => mock::result(r, tools(&["a", "b"])),
        })
        .ready()
        .await;
    wait_tools(&host, &["a", "b"]).await;
    settles_at(&server, "tools/list", 2).await;
}

#[tokio::test]
async fn a_notification_racing_an_in_flight_listing_causes_exactly_one_more() {
    // The re-listing's own answer carries a second notification: that change may have missed
    // the page just listed, so exactly one more listing follows.
    let (server, host) = Live::new()
        .list(|r, n| match n {
            1 => mock::result(r, tools(&["a"])),
            2 => sse_then(r, &[list_changed()], tools(&["a", "b"])),
            _ => mock::result(r, tools(&["a", "b", "c"])),
        })
        .changing_at_the_first_call("changed", "ok")
        .ready()
        .await;
    assert_eq!(call_s(&host, "a").await.unwrap(), "changed");
    wait_tools(&host, &["a", "b", "c"]).await;
    settles_at(&server, "tools/list", 3).await;
}

#[tokio::test]
async fn a_burst_of_notifications_causes_one_or_two_listings() {
    let (server, host) = Live::new()
        .adding_b()
        .call(|r, n| match n {
            1 => sse_then(r, &vec![list_changed(); 100], mock_text_result("burst")),
            _ => mock::result(r, mock_text_result("ok")),
        })
        .ready()
        .await;
    assert_eq!(call_s(&host, "a").await.unwrap(), "burst");
    wait_tools(&host, &["a", "b"]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let relistings = count(&server, "tools/list").await - 1;
    assert!(
        relistings == 1 || relistings == 2,
        "100 notifications caused {relistings} re-listings"
    );
}

#[tokio::test]
async fn a_failed_relisting_keeps_the_tools_and_ready_and_warns() {
    let (_guard, logs) = crate::support::logs::capture("plugin_mcp=warn");
    let server = Live::new()
        .list(|r, n| match n {
            1 => mock::result(r, tools(&["a"])),
            _ => ResponseTemplate::new(500).set_body_string("listing broke for sekrit-value-123"),
        })
        .call(|r, _| sse_then(r, &[list_changed()], mock_text_result("changed")))
        .start()
        .await;
    let host = keyed_host(&server).await;
    assert_eq!(call_s(&host, "a").await.unwrap(), "changed");
    wait_count(&server, "tools/list", 2).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while logs.lines_with("re-listing").is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no warning");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        logs.lines_with("re-listing"),
        [
            r#" WARN plugin_mcp::server: re-listing the tools failed; keeping the previous list namespace=s reason=HTTP 500 Internal Server Error: listing broke for [redacted]"#
        ]
    );
    assert!(!logs.text().contains("sekrit"));
    assert_eq!(
        host.listing(json!({})).await,
        json!({"servers": [{"namespace": "s", "status": "ready", "tools": ["a"]}]})
    );
}

#[tokio::test]
async fn a_miss_relists_once_then_answers_not_found() {
    // The server adds `b` without telling anyone.
    let (server, host) = Live::new().adding_b().answering("called").ready().await;
    assert_eq!(call_s(&host, "b").await.unwrap(), "called");
    assert_eq!(count(&server, "tools/list").await, 2);
    // Another miss within 10 s does not re-list: not_found at once, for calls and lookups.
    let miss = call_s(&host, "c").await.unwrap_err();
    assert_eq!(
        (miss.kind, miss.message.as_str()),
        (
            ToolErrorKind::NotFound,
            r#"server "s" has no tool "c"; list its tools with mcp/get_dynamic_tools {"namespace":"s"}"#
        )
    );
    let lookup = host.lookup("s", "d").await.unwrap_err();
    assert_eq!(lookup.kind, ToolErrorKind::NotFound);
    assert_eq!(count(&server, "tools/list").await, 2);
    assert_eq!(count(&server, "tools/call").await, 1);
}

#[tokio::test]
async fn a_lookup_miss_relists_too() {
    let (server, host) = Live::new().adding_b().answering("called").ready().await;
    let b = host
        .listing(json!({"namespace": "s", "toolName": "b"}))
        .await;
    assert_eq!(b["name"], "b");
    assert_eq!(count(&server, "tools/list").await, 2);
}
