//! The Host-only requests `mcp/logout` and `mcp/sign_in_state` through the Host contract: the
//! Pack deletes the store file it keys itself, for every substitution form a url or an `oauth`
//! field may use, and never offers either request as a tool (README "Signing in").

use crate::support::Host;
use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use runvil_plugin::{Pack, Packs, Services, TOKIO_RUNTIME, ToolError, ToolErrorKind};
use serde_json::{Value, json};
use url::Url;

/// The variable a url's `${env:...}` names here.
const HOST_VARIABLE: &str = "PLUGIN_MCP_LOGOUT_TEST_HOST";
/// The variable an `oauth.clientId`'s `${env:...}` names here.
const CLIENT_VARIABLE: &str = "PLUGIN_MCP_LOGOUT_TEST_CLIENT";

/// The sign-in store of this test binary (`support::oauth_store`), with the variables the configs
/// name set. `${userHome}` expands to the process's own `HOME`, which the test reads, never writes.
fn store_dir() -> PathBuf {
    static ONCE: Once = Once::new();
    let dir = crate::support::oauth_store();
    ONCE.call_once(|| {
        // SAFETY: set once (the Once makes other callers wait), before the Packs that read them
        // are constructed; other threads read the environment only through `std::env`, which
        // takes the same process-wide lock as `set_var`.
        unsafe {
            std::env::set_var(HOST_VARIABLE, "127.0.0.1:9");
            std::env::set_var(CLIENT_VARIABLE, "client-from-env");
        }
    });
    assert!(
        home().is_some(),
        "the tests need HOME set, for ${{userHome}}"
    );
    dir
}

/// The home directory as README "Configuration" says `${userHome}` expands: `HOME`, else
/// `USERPROFILE`, the first one set and not empty.
fn home() -> Option<String> {
    ["HOME", "USERPROFILE"]
        .into_iter()
        .filter_map(|name| std::env::var(name).ok())
        .find(|home| !home.is_empty())
}

/// The store file README "Signing in" names for the entry `namespace` of the server at `url`
/// and `client`, with the variables the configs name set.
fn store_file(url: &str, client: &str, namespace: &str) -> PathBuf {
    store_dir();
    crate::support::store_file(&Url::parse(url).unwrap(), client, namespace)
}

/// The Pack with `servers` as its `mcpServers`, constructed as a Host does it.
fn pack(servers: Value) -> Box<dyn Pack> {
    store_dir();
    let mut packs = Packs::new();
    plugin_mcp::install(&mut packs, &json!({ "mcp": servers }));
    let mut services = Services::new();
    services.insert(&TOKIO_RUNTIME, tokio::runtime::Handle::current());
    let spec = packs.get("runvil/mcp").unwrap();
    spec.construct(&spec.default_id, &services).unwrap()
}

async fn logout(pack: &dyn Pack, namespace: &str) -> Result<String, ToolError> {
    pack.call("mcp/logout", json!({ "namespace": namespace }))
        .await
}

#[tokio::test]
async fn logout_deletes_the_file_the_pack_keys_for_every_substitution_form() {
    let home = {
        store_dir();
        home().unwrap()
    };
    // Each entry, and the server URL and client its store file is keyed by.
    let cases = [
        (
            "plain",
            json!({"url": "http://127.0.0.1:9/plain/mcp"}),
            "http://127.0.0.1:9/plain/mcp".to_string(),
            "",
        ),
        (
            "env",
            json!({"url": format!("http://${{env:{HOST_VARIABLE}}}/env/mcp")}),
            "http://127.0.0.1:9/env/mcp".to_string(),
            "",
        ),
        // The drift a copy of the rules once had: `${userHome}` left as written.
        (
            "home",
            json!({"url": "http://127.0.0.1:9/home${userHome}/mcp"}),
            format!("http://127.0.0.1:9/home{home}/mcp"),
            "",
        ),
        (
            "client_env",
            json!({"url": "http://127.0.0.1:9/client/mcp", "oauth": {"clientId": format!("${{env:{CLIENT_VARIABLE}}}")}}),
            "http://127.0.0.1:9/client/mcp".to_string(),
            "client-from-env",
        ),
        // `${userHome}` in the query, and beside `${env:NAME}` in one url.
        (
            "home_query",
            json!({"url": "http://127.0.0.1:9/query/mcp?dir=${userHome}"}),
            format!("http://127.0.0.1:9/query/mcp?dir={home}"),
            "",
        ),
        (
            "env_and_home",
            json!({"url": format!("http://${{env:{HOST_VARIABLE}}}/both${{userHome}}/mcp")}),
            format!("http://127.0.0.1:9/both{home}/mcp"),
            "",
        ),
        // `${userHome}` in `oauth.clientId`.
        (
            "client_home",
            json!({"url": "http://127.0.0.1:9/client-home/mcp", "oauth": {"clientId": "${userHome}-client"}}),
            "http://127.0.0.1:9/client-home/mcp".to_string(),
            &*Box::leak(format!("{home}-client").into_boxed_str()),
        ),
        // `${env:NAME}` in `oauth.clientMetadataUrl`, keyed by the URL as parsed.
        (
            "metadata_env",
            json!({"url": "http://127.0.0.1:9/metadata-env/mcp", "oauth": {"clientMetadataUrl": format!("https://${{env:{HOST_VARIABLE}}}/Client.json")}}),
            "http://127.0.0.1:9/metadata-env/mcp".to_string(),
            "https://127.0.0.1:9/Client.json",
        ),
        // The metadata URL as parsed: a lower-cased host and no default port.
        (
            "metadata",
            json!({"url": "http://127.0.0.1:9/metadata/mcp", "oauth": {"clientId": "", "clientMetadataUrl": "https://App.Example.com:443/client.json"}}),
            "http://127.0.0.1:9/metadata/mcp".to_string(),
            "https://app.example.com/client.json",
        ),
    ];
    let servers: serde_json::Map<String, Value> = cases
        .iter()
        .map(|(namespace, entry, _, _)| (namespace.to_string(), entry.clone()))
        .collect();
    let pack = pack(Value::Object(servers));
    // A file of another server, which no logout here may touch.
    let other = store_file("http://127.0.0.1:9/other/mcp", "", "other");
    std::fs::write(&other, "{}").unwrap();
    for (namespace, _, url, client) in &cases {
        let file = store_file(url, client, namespace);
        std::fs::write(&file, "{}").unwrap();
        assert_eq!(
            logout(&*pack, namespace).await,
            Ok(json!({"namespace": namespace, "deleted": true}).to_string()),
            "{namespace}"
        );
        assert!(
            !file.exists(),
            "{namespace}: {} is still there",
            file.display()
        );
        assert_eq!(
            logout(&*pack, namespace).await,
            Ok(json!({"namespace": namespace, "deleted": false}).to_string()),
            "{namespace}, a second time"
        );
    }
    assert!(other.exists());
    std::fs::remove_file(other).unwrap();
}

#[tokio::test]
async fn the_host_only_requests_are_not_tools() {
    let pack = pack(json!({"docs": {"url": "http://127.0.0.1:9/listed/mcp"}}));
    let names: Vec<String> = pack.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["mcp/get_dynamic_tools", "mcp/call_dynamic_tool"]);
    let unknown = pack.call("mcp/logoutt", json!({})).await.unwrap_err();
    assert_eq!(
        unknown.message,
        "unknown tool \"mcp/logoutt\"; this Pack offers mcp/get_dynamic_tools and mcp/call_dynamic_tool"
    );
}

#[tokio::test]
async fn logout_names_what_is_wrong_with_its_request() {
    let pack = pack(json!({
        "docs": {"url": "http://127.0.0.1:9/errors/mcp"},
        "files": {"command": "npx"}
    }));
    let cases = [
        (
            json!({"namespace": "nowhere"}),
            ToolErrorKind::NotFound,
            "unknown namespace \"nowhere\"; known namespaces: docs, files",
        ),
        (
            json!({"namespace": "files"}),
            ToolErrorKind::Unavailable,
            "the config entry of server \"files\" was refused, so its sign-in cannot be found: local MCP servers (command) are not supported yet",
        ),
        (
            json!({}),
            ToolErrorKind::InvalidArguments,
            "\"namespace\" is required, e.g. {\"namespace\":\"docs\"}",
        ),
        (
            json!({"namespace": "docs", "toolName": "x"}),
            ToolErrorKind::InvalidArguments,
            "unknown argument \"toolName\"; accepted arguments: namespace",
        ),
        (
            json!({"namespace": 5}),
            ToolErrorKind::InvalidArguments,
            "\"namespace\" must be a string, found a number",
        ),
    ];
    for (args, kind, message) in cases {
        for request in ["mcp/logout", "mcp/sign_in_state"] {
            assert_eq!(
                pack.call(request, args.clone()).await,
                Err(ToolError::new(kind, message)),
                "{request} {args}"
            );
        }
    }
}

#[tokio::test]
async fn sign_in_state_tells_a_server_that_is_not_signed_in() {
    let dir = store_dir();
    let pack = pack(json!({
        "docs": {"url": "http://127.0.0.1:9/state/mcp"},
        "keyed": {"url": "http://127.0.0.1:9/keyed/mcp", "headers": {"Authorization": "Bearer k"}}
    }));
    let state = |namespace: &str| pack.call("mcp/sign_in_state", json!({ "namespace": namespace }));
    assert_eq!(
        state("docs").await,
        Ok(json!({"namespace": "docs", "signedIn": false, "stored": false, "storeDir": dir.to_str().unwrap()}).to_string())
    );
    // An entry that configures its own Authorization header never signs in: no store at all.
    assert_eq!(
        state("keyed").await,
        Ok(
            json!({"namespace": "keyed", "signedIn": false, "stored": false, "storeDir": null})
                .to_string()
        )
    );
    let file = store_file("http://127.0.0.1:9/keyed/mcp", "", "keyed");
    std::fs::write(&file, "{}").unwrap();
    assert_eq!(
        logout(&*pack, "keyed").await,
        Ok(json!({"namespace": "keyed", "deleted": false}).to_string())
    );
    assert!(
        file.exists(),
        "the Pack never keys a file for an entry with its own header"
    );
    std::fs::remove_file(file).unwrap();
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

/// `logout` of an entry the config switched off deletes the grant its file is keyed by (the url,
/// the client and the namespace: README "Signing in"); an entry written in Cursor's dialect keys
/// its client by `auth.CLIENT_ID`, which the Pack maps onto `oauth.clientId`. `deleted: true` for
/// the disabled Cursor entry as for the enabled one.
#[tokio::test]
async fn logout_deletes_the_grant_of_a_disabled_entry_written_in_cursors_dialect() {
    crate::support::oauth_store();
    let on = "http://127.0.0.1:9/findings-cursor-on/mcp";
    let off = "http://127.0.0.1:9/findings-cursor-off/mcp";
    let host = Host::new(json!({
        "cursor_on": {"url": on, "auth": {"CLIENT_ID": "cursor-client"}},
        "cursor_off": {"url": off, "disabled": true, "auth": {"CLIENT_ID": "cursor-client"}},
    }));
    let mut outcomes = Vec::new();
    for (namespace, url) in [("cursor_on", on), ("cursor_off", off)] {
        let file = crate::support::store_file(
            &reqwest::Url::parse(url).unwrap(),
            "cursor-client",
            namespace,
        );
        std::fs::write(&file, "{}").unwrap();
        let answer = host
            .pack
            .call("mcp/logout", json!({"namespace": namespace}))
            .await;
        outcomes.push((namespace, answer.map_err(|e| e.message), file.exists()));
        let _ = std::fs::remove_file(&file);
    }
    assert_eq!(
        outcomes,
        [
            (
                "cursor_on",
                Ok(json!({"namespace": "cursor_on", "deleted": true}).to_string()),
                false
            ),
            (
                "cursor_off",
                Ok(json!({"namespace": "cursor_off", "deleted": true}).to_string()),
                false
            ),
        ]
    );
}
