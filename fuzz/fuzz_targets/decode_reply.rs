//! Fuzzes the Pack's reply decoding — HTTP status and Content-Type handling, the capped JSON
//! body reader, the SSE framing and event routing, JSON-RPC classification, and the
//! `initialize` / `tools/list` / `tools/call` result shapes — through the public contract only:
//! a loopback server (tests/it/support/hostile.rs) answers one request of the handshake or of a
//! call with the fuzzed bytes, and a minimal Host (below) drives the Pack as runvil would.
//!
//! Input: the first byte picks which reply is fuzzed and how it is framed; the rest is the body.
//!   0: tools/list as application/json     1: tools/list as text/event-stream
//!   2: tools/call as application/json     3: tools/call as text/event-stream
//!   4: initialize as text/event-stream    5: initialize as application/json
//! Request ids are 1 (initialize), 2 (first tools/list page) and 3 (the call).
//!
//! Run (bounded), seeded from the hand-written inputs in fuzz/seeds/decode_reply:
//!   cd fuzz && cargo +nightly fuzz run -s none decode_reply corpus/decode_reply seeds/decode_reply \
//!       -- -max_total_time=300 -timeout=60 -rss_limit_mb=4096
//!
//! A finding is a panic (libFuzzer aborts on any panic, also one inside a Pack task), or a start
//! or call that outlives the Pack's own deadlines (a hang).
#![no_main]

// The integration tests' hyper server and the network parts it is built from (`super::net`).
#[path = "../../tests/it/support/hostile.rs"]
#[allow(dead_code)] // The tests use more of it than this target does.
mod hostile;
#[path = "../../tests/it/support/net.rs"]
#[allow(dead_code)]
mod net;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use hostile::{Reply, Server, initialize_reply, serve, standard, text_result, tool, tools_page};
use libfuzzer_sys::fuzz_target;
use serde_json::json;
use runvil_plugin::{Pack, Packs, Services, TOKIO_RUNTIME, ToolError, Value};

/// The Host side of the contract: install, construct under id `mcp`, call by full name.
struct Host {
    pack: Box<dyn Pack>,
}

impl Host {
    fn new(servers: Value) -> Host {
        let mut packs = Packs::new();
        plugin_mcp::install(&mut packs, &json!({ "mcp": servers }));
        let mut services = Services::new();
        services.insert(&TOKIO_RUNTIME, tokio::runtime::Handle::current());
        let pack = packs.get("runvil/mcp").unwrap().construct("mcp", &services).unwrap();
        Host { pack }
    }

    async fn call(&self, tool: &str, args: Value) -> Result<String, ToolError> {
        self.pack.call(&format!("mcp/{tool}"), args).await
    }

    async fn listing(&self, args: Value) -> Value {
        let text = self.call("get_dynamic_tools", args).await.expect("the listing never fails");
        serde_json::from_str(&text).expect("the listing is JSON")
    }
}

struct World {
    runtime: tokio::runtime::Runtime,
    input: Arc<Mutex<Bytes>>,
    server: Server,
    /// One long-lived Pack for the call modes (2, 3): building a Pack builds an HTTP client,
    /// which loads the system's root certificates, and that would dominate every run.
    caller: Host,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        // Mode 2 with no body: a normal handshake and tools/list while `caller` starts.
        let input = Arc::new(Mutex::new(Bytes::from_static(&[2])));
        let fuzzed = Arc::clone(&input);
        let server = runtime.block_on(serve(move |req| {
            let input = fuzzed.lock().unwrap().clone();
            async move {
                let mode = input.first().copied().unwrap_or(0) % 6;
                let body = input.slice(1.min(input.len())..);
                let framed = |ct: &str| Reply::raw(200, ct, body.clone());
                match (req.method(), mode) {
                    ("initialize", 4) => framed("text/event-stream"),
                    ("initialize", 5) => framed("application/json"),
                    ("initialize", _) => initialize_reply(&req.id()),
                    ("tools/list", 0) => framed("application/json"),
                    ("tools/list", 1) => framed("text/event-stream"),
                    ("tools/list", _) => {
                        Reply::json(&tools_page(&req.id(), vec![tool("t", "t")], None))
                    }
                    ("tools/call", 2) => framed("application/json"),
                    ("tools/call", 3) => framed("text/event-stream"),
                    ("tools/call", _) => Reply::json(&text_result(&req.id(), "ok")),
                    _ => standard(&req).unwrap_or_else(|| Reply::accepted()),
                }
            }
        }));
        let url = server.url.clone();
        let caller = runtime.block_on(async move {
            let host = Host::new(json!({"f": {"url": url}}));
            while host.listing(json!({})).await["servers"][0]["status"] != "ready" {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            host
        });
        World {
            runtime,
            input,
            server,
            caller,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let world = world();
    *world.input.lock().unwrap() = Bytes::copy_from_slice(data);
    world.server.clear();
    if matches!(data.first().map(|m| m % 6), Some(2 | 3)) {
        world.runtime.block_on(async {
            let call = world
                .caller
                .call("call_dynamic_tool", json!({"namespace": "f", "toolName": "t"}));
            // The call deadline is 5 minutes.
            let _ = tokio::time::timeout(Duration::from_secs(310), call)
                .await
                .expect("hang: the call outlived its deadline");
        });
        return;
    }
    let url = world.server.url.clone();
    world.runtime.block_on(async move {
        let host = Host::new(json!({"f": {"url": url}}));
        // The start deadline is 2 minutes; a start still loading after that is a hang.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(130);
        let status = loop {
            let listing = host.listing(json!({})).await;
            let status = listing["servers"][0]["status"].as_str().unwrap().to_string();
            if status != "loading" {
                break status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "hang: the start neither finished nor failed within its deadline"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let _ = host.listing(json!({"namespace": "f"})).await;
        if status == "ready" {
            let _ = host
                .call("get_dynamic_tools", json!({"namespace": "f", "toolName": "t"}))
                .await;
        }
    });
});
