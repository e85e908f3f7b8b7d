//! The main job, with nothing to set up: `cargo run --example quickstart`.
//!
//! Starts a demo MCP server (built with the official Rust SDK, `rmcp`) on 127.0.0.1, installs the
//! plugin like a runvil Host would with a config naming that server plus one local (`command`)
//! entry, and prints what a model would see: the listing while the server loads (when it is
//! caught loading), the listing once ready, one tool's schema, and one call's result.
//!
//! `cargo run --example quickstart -- --serve` only starts the demo server, prints its URL on
//! stdout and serves until killed: a loopback server for trying the host CLI (and for
//! `.ci/examples.sh`).

#[path = "common/demo_server.rs"]
mod demo_server;

use std::time::Duration;

use runvil_plugin::{Pack, Packs, Services, Settled, TOKIO_RUNTIME};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = demo_server::start().await?;
    if std::env::args().skip(1).any(|a| a == "--serve") {
        println!("{}", server.url);
        std::future::pending::<()>().await;
    }
    let config = json!({
        "mcp": {
            "demo": {"url": server.url},
            "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]}
        }
    });
    println!(
        "mcp config:\n{}\n",
        serde_json::to_string_pretty(&config["mcp"])?
    );

    // What a Host does: install the plugin, give it the runtime, construct the Pack.
    let mut packs = Packs::new();
    plugin_mcp::install(&mut packs, &config);
    let mut services = Services::new();
    services.insert(&TOKIO_RUNTIME, tokio::runtime::Handle::current());
    let spec = packs
        .get("runvil/mcp")
        .ok_or("the plugin inserted no runvil/mcp Pack")?;
    let pack = spec.construct(&spec.default_id, &services)?;
    pack.ready().await;
    let names: Vec<String> = pack.tools().into_iter().map(|t| t.name).collect();
    println!(
        "the model sees {} tools: {}\n",
        names.len(),
        names.join(", ")
    );

    let first = call(&*pack, "mcp/get_dynamic_tools", json!({})).await?;
    if any_loading(&first)? {
        println!("mcp/get_dynamic_tools {{}} while the server starts:\n{first}\n");
    }
    // Awaits every server's first outcome (ready, or error with its reason); no polling.
    if let Settled::Pending(names) = pack.settled(Duration::from_secs(30)).await {
        return Err(format!("still loading after 30 s: {}", names.join(", ")).into());
    }
    let listing = call(&*pack, "mcp/get_dynamic_tools", json!({})).await?;
    println!("mcp/get_dynamic_tools {{}} once settled:\n{listing}\n");

    let args = json!({"namespace": "demo", "toolName": "add"});
    let schema = call(&*pack, "mcp/get_dynamic_tools", args.clone()).await?;
    println!("mcp/get_dynamic_tools {args}:\n{schema}\n");

    let args = json!({"namespace": "demo", "toolName": "add", "arguments": {"a": 2, "b": 3}});
    let sum = call(&*pack, "mcp/call_dynamic_tool", args.clone()).await?;
    println!("mcp/call_dynamic_tool {args}:\n{sum}");

    // Dropping the Pack ends its sessions in the background; `closed` waits for that, bounded.
    let closed = pack.closed();
    drop(pack);
    closed.await;
    Ok(())
}

async fn call(
    pack: &dyn Pack,
    tool: &str,
    args: Value,
) -> Result<String, runvil_plugin::ToolError> {
    pack.call(tool, args).await
}

/// Whether any server in a `get_dynamic_tools {}` listing is still `loading`.
fn any_loading(listing: &str) -> Result<bool, serde_json::Error> {
    let listing: Value = serde_json::from_str(listing)?;
    let servers = listing["servers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    Ok(servers.iter().any(|s| s["status"] == "loading"))
}
