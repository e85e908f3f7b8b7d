//! A client for the official MCP conformance suite (`@modelcontextprotocol/conformance`).
//!
//! ```text
//! conformance SERVER_URL      (MCP_CONFORMANCE_SCENARIO names the scenario)
//! ```
//!
//! Installs the plugin through the Host contract with one server (namespace `conformance`),
//! waits until it is ready, calls `add_numbers {"a":2,"b":3}` or `test_reconnection {}` when the
//! server lists them, drops the Pack and exits 0; any failure exits 1 with the reason on stderr.

use std::process::ExitCode;
use std::time::Duration;

use runvil_plugin::{Packs, Services, TOKIO_RUNTIME};
use serde_json::{Value, json};

const NAMESPACE: &str = "conformance";

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("RUST_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: conformance SERVER_URL");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    eprintln!("conformance client: scenario {scenario:?}");
    match run(&url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("conformance client: {message}");
            ExitCode::from(1)
        }
    }
}

async fn run(url: &str) -> Result<(), String> {
    let mut packs = Packs::new();
    plugin_mcp::install(&mut packs, &json!({"mcp": {NAMESPACE: {"url": url}}}));
    let mut services = Services::new();
    services.insert(&TOKIO_RUNTIME, tokio::runtime::Handle::current());
    let spec = packs.get("runvil/mcp").ok_or("no runvil/mcp Pack")?;
    let pack = spec
        .construct("mcp", &services)
        .map_err(|e| e.to_string())?;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let tools = loop {
        let text = pack
            .call("mcp/get_dynamic_tools", json!({"namespace": NAMESPACE}))
            .await
            .map_err(|e| e.to_string())?;
        let listing: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        match listing["status"].as_str() {
            Some("ready") => break listing["tools"].as_array().cloned().unwrap_or_default(),
            Some("error") => return Err(format!("server failed to start: {}", listing["reason"])),
            _ if tokio::time::Instant::now() >= deadline => {
                return Err("server still loading after 20 s".into());
            }
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    };
    let listed = |name: &str| tools.iter().any(|t| t["name"] == name);
    for (tool, arguments) in [
        ("add_numbers", json!({"a": 2, "b": 3})),
        ("test_reconnection", json!({})),
    ] {
        if listed(tool) {
            let args = json!({"namespace": NAMESPACE, "toolName": tool, "arguments": arguments});
            let text = pack
                .call("mcp/call_dynamic_tool", args)
                .await
                .map_err(|e| format!("{tool}: {e}"))?;
            eprintln!("conformance client: {tool} -> {text}");
        }
    }
    drop(pack);
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}
