//! What the integration tests share: a minimal Host that installs the plugin through the
//! `runvil-plugin` contract exactly as a runvil Host would and waits on the listing with bounded
//! waits, and the fake servers it talks to, all on 127.0.0.1.
//!
//! The servers, one family: [`hostile`] (hyper; a reply sent slowly, in pieces, endlessly, cut
//! off or never), [`scripted`] (a strict stateful server recording a trail), [`mock`] (mounted
//! responders behind matchers), [`oauth`] (an authorization server and protected resource, shared with the unit
//! tests), [`modern`] (a strict 2026-07-28 server, switchable to the legacy era, recording a
//! trail), [`demo_server`] (the examples' rmcp server) and [`interop`] (real peers behind a
//! recording proxy). What many tests build such servers from is in [`answers`]. What they have in common, binding, serving connections and waiting on a
//! record, is in [`net`]; log capture is in [`logs`]. The host example run as a child is in
//! [`host_cli`], the texts inside a JSON value in [`leaves`], and the bench's tool catalog
//! (`bench/data/catalog.json`, read as the bench reads it) in [`catalog`].

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use runvil_plugin::{Pack, Packs, Services, TOKIO_RUNTIME, ToolError, Value};
use serde_json::json;

/// Points the sign-in store of every Pack of this process (`PLUGIN_MCP_OAUTH_DIR`, see README
/// "Signing in") at one fresh directory, and returns it. Every test that signs in calls this
/// before it starts anything; each has its own server (its own port), so its own store file.
pub fn oauth_store() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("plugin-mcp-it-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // As the Pack makes it: only the owner may read the grants.
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&dir)
            .unwrap();
        // SAFETY: set once, before any Pack that reads it is constructed (the OnceLock makes
        // every other caller wait); other threads read the environment only through `std::env`,
        // which takes the same process-wide lock as `set_var`.
        unsafe { std::env::set_var("PLUGIN_MCP_OAUTH_DIR", &dir) };
        dir
    })
    .clone()
}

/// The store file README "Signing in" names for the entry `namespace` of the server at `url`
/// and `client`, in [`oauth_store`]: the first 16 bytes of SHA-256 over the URL, a NUL, the
/// client, a NUL and the namespace, in hex, plus `.json`.
pub fn store_file(url: &reqwest::Url, client: &str, namespace: &str) -> PathBuf {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(url.as_str().as_bytes());
    hash.update([0]);
    hash.update(client.as_bytes());
    hash.update([0]);
    hash.update(namespace.as_bytes());
    let name: String = hash.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    oauth_store().join(format!("{name}.json"))
}

/// How long a test waits for a server to be ready or for an answer: 10 seconds.
pub const WAIT: Duration = Duration::from_secs(10);

/// The `transport` error (`ToolErrorKind::Transport`) whose message is `message`, as a call's
/// outcome.
pub fn transport(message: &str) -> Result<String, ToolError> {
    Err(ToolError::new(
        runvil_plugin::ToolErrorKind::Transport,
        message,
    ))
}

/// Installs the plugin with the plugin config `config` and constructs its Pack under `id` on
/// the current Tokio runtime, as a Host does.
pub fn construct(config: &Value, id: &str) -> Result<Box<dyn Pack>, runvil_plugin::Unavailable> {
    let mut packs = Packs::new();
    plugin_mcp::install(&mut packs, config);
    let mut services = Services::new();
    services.insert(&TOKIO_RUNTIME, tokio::runtime::Handle::current());
    let spec = packs.get("runvil/mcp").expect("install inserts runvil/mcp");
    spec.construct(id, &services)
}

/// A current-thread Tokio runtime with I/O and time enabled, for a property case (proptest runs
/// each case outside `#[tokio::test]`).
pub fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A constructed `mcp` Pack on the current Tokio runtime.
pub struct Host {
    pub pack: Box<dyn Pack>,
}

impl Host {
    /// Installs the plugin with `{"mcp": servers}` and constructs the Pack under id `mcp`.
    pub fn new(servers: Value) -> Host {
        Host::try_new(servers).expect("the Pack constructs")
    }

    /// Like [`Host::new`], returning the unavailable reason instead of panicking.
    pub fn try_new(servers: Value) -> Result<Host, runvil_plugin::Unavailable> {
        let pack = construct(&json!({ "mcp": servers }), "mcp")?;
        Ok(Host { pack })
    }

    /// Calls `mcp/<tool>` with `args`.
    pub async fn call(&self, tool: &str, args: Value) -> Result<String, ToolError> {
        self.pack.call(&format!("mcp/{tool}"), args).await
    }

    /// `get_dynamic_tools` for the one tool `name` of server `namespace`, as text.
    pub async fn lookup(&self, namespace: &str, name: &str) -> Result<String, ToolError> {
        let args = json!({"namespace": namespace, "toolName": name});
        self.call("get_dynamic_tools", args).await
    }

    /// `call_dynamic_tool` of `tool` on server `namespace`, without arguments.
    pub async fn call_tool(&self, namespace: &str, tool: &str) -> Result<String, ToolError> {
        let args = json!({"namespace": namespace, "toolName": tool});
        self.call("call_dynamic_tool", args).await
    }

    /// `get_dynamic_tools` with `args`, parsed.
    pub async fn listing(&self, args: Value) -> Value {
        let text = self.call("get_dynamic_tools", args).await.expect("listing");
        serde_json::from_str(&text).expect("the listing is JSON")
    }

    /// The names of `namespace`'s tools in its namespace listing, in listing order.
    pub async fn tool_names(&self, namespace: &str) -> Vec<String> {
        let listing = self
            .listing(serde_json::json!({ "namespace": namespace }))
            .await;
        listing["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools in {listing}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Waits (at most `limit`, looking every 50 ms) until `namespace` lists exactly the tools
    /// `names`; else fails saying `why`, with what `server` received.
    pub async fn until_tools(
        &self,
        namespace: &str,
        names: &[&str],
        limit: std::time::Duration,
        server: &hostile::Server,
        why: &str,
    ) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.tool_names(namespace).await != names {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{why}: {:#?}",
                server
                    .requests()
                    .iter()
                    .map(|r| format!("{} {}", r.http_method, r.method()))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Waits (at most `limit`) until no server is `loading`; returns the last full listing.
    pub async fn settled(&self, limit: Duration) -> Value {
        self.wait_for(limit, |listing| {
            listing["servers"]
                .as_array()
                .unwrap()
                .iter()
                .all(|s| s["status"] != "loading")
        })
        .await
    }

    /// Waits (at most `limit`) until `namespace` is `ready`; panics with the listing otherwise.
    pub async fn ready(&self, namespace: &str, limit: Duration) -> Value {
        self.wait_for(limit, |listing| {
            listing["servers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["namespace"] == namespace && s["status"] == "ready")
        })
        .await
    }

    /// Waits (at most `limit`) until `namespace` shows `error`; returns its listing entry.
    pub async fn failed(&self, namespace: &str, limit: Duration) -> Value {
        let listing = self
            .wait_for(limit, |listing| {
                hostile::server_entry(listing, namespace)["status"] == "error"
            })
            .await;
        hostile::server_entry(&listing, namespace).clone()
    }

    /// Waits (at most [`WAIT`]) until the first server's listing `reason` starts with one of
    /// `starts`; returns that reason. Panics with the listing otherwise.
    pub async fn reason_starting(&self, starts: &[&str]) -> String {
        let listing = self
            .wait_for(WAIT, |l| {
                l["servers"][0]["reason"]
                    .as_str()
                    .is_some_and(|r| starts.iter().any(|s| r.starts_with(s)))
            })
            .await;
        listing["servers"][0]["reason"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Waits (at most `limit`, polling every 10 ms) until `done(listing)`; panics with the last
    /// listing when the time runs out.
    pub async fn wait_for(&self, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let listing = self.listing(json!({})).await;
            if done(&listing) {
                return listing;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("gave up after {limit:?}; listing: {listing}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

pub mod answers;
#[path = "../../bench/src/catalog.rs"]
pub mod catalog;
#[path = "../../examples/common/demo_server.rs"]
pub mod demo_server;
pub mod host_cli;
pub mod hostile;
pub mod interop;
pub mod leaves;
pub mod logs;
pub mod mock;
pub mod modern;
pub mod net;
// The test authorization server's listener (`super::unused_loopback` in oauth.rs).
use net::unused_loopback;
#[path = "../support/oauth.rs"]
#[allow(
    dead_code,
    reason = "shared with the unit tests (as crate::auth::testing), which use the rest"
)]
pub mod oauth;
pub mod scripted;
