//! A minimal runvil Host for scripts and for trying real `mcp.json` files.
//!
//! ```text
//! cargo run --example host -- [--wait SECONDS] CONFIG TOOL [ARGUMENTS]
//! ```
//!
//! CONFIG is a file holding `{"mcpServers": {...}}`; TOOL is a tool's full name, e.g.
//! `mcp/get_dynamic_tools`; ARGUMENTS is its JSON argument object (default `{}`). The host waits
//! until no server is `loading` (at most `--wait` seconds, default 30), then calls the tool once.
//!
//! Exit codes: 0 with the tool's text on stdout; 1 with the tool error (kind and message) on
//! stderr; 2 for bad usage or an unreadable config. Logs go to stderr under `RUST_LOG`.

use std::process::ExitCode;
use std::time::Duration;

use runvil_plugin::{Packs, Services, TOKIO_RUNTIME};
use serde_json::{Value, json};

const USAGE: &str = "usage: host [--wait SECONDS] CONFIG TOOL [ARGUMENTS]\n\
    CONFIG     a file holding {\"mcpServers\": {...}}\n\
    TOOL       a tool's full name, e.g. mcp/get_dynamic_tools\n\
    ARGUMENTS  the tool's JSON argument object (default {})";

struct Args {
    wait: Duration,
    config: String,
    tool: String,
    arguments: Value,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut wait = Duration::from_secs(30);
    let mut positional = Vec::new();
    let mut options_done = false;
    while let Some(arg) = args.next() {
        if options_done {
            positional.push(arg);
            continue;
        }
        match arg.as_str() {
            "--" => options_done = true,
            "--wait" => {
                let value = args.next().ok_or("--wait needs a number of seconds")?;
                let seconds: f64 = value
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s <= 86_400.0)
                    .ok_or_else(|| {
                        format!("--wait takes seconds from 0 to 86400, not {value:?}")
                    })?;
                wait = Duration::from_secs_f64(seconds);
            }
            "-h" | "--help" => return Err(String::new()),
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            _ => positional.push(arg),
        }
    }
    let mut positional = positional.into_iter();
    let (Some(config), Some(tool)) = (positional.next(), positional.next()) else {
        return Err("CONFIG and TOOL are required".into());
    };
    let arguments = match positional.next() {
        None => json!({}),
        Some(text) => {
            serde_json::from_str(&text).map_err(|e| format!("ARGUMENTS is not JSON: {e}"))?
        }
    };
    if let Some(extra) = positional.next() {
        return Err(format!("unexpected argument {extra:?}"));
    }
    Ok(Args {
        wait,
        config,
        tool,
        arguments,
    })
}

fn read_config(path: &str) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let file: Value =
        serde_json::from_str(&text).map_err(|e| format!("{path} is not JSON: {e}"))?;
    match file.get("mcpServers") {
        Some(servers) => Ok(servers.clone()),
        None => Err(format!("{path} has no \"mcpServers\" key")),
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("RUST_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("host: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let servers = match read_config(&args.config) {
        Ok(servers) => servers,
        Err(message) => {
            eprintln!("host: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("host: cannot start a Tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(run(args, servers))
}

async fn run(args: Args, servers: Value) -> ExitCode {
    let mut packs = Packs::new();
    plugin_mcp::install(&mut packs, &json!({ "mcp": servers }));
    let mut services = Services::new();
    services.insert(&TOKIO_RUNTIME, tokio::runtime::Handle::current());
    let Some(spec) = packs.get("runvil/mcp") else {
        eprintln!("host: the plugin inserted no runvil/mcp Pack");
        return ExitCode::from(2);
    };
    let pack = match spec.construct(&spec.default_id, &services) {
        Ok(pack) => pack,
        Err(unavailable) => {
            eprintln!("unavailable: the mcp Pack could not be built: {unavailable}");
            return ExitCode::from(1);
        }
    };
    pack.ready().await;

    // Wait until no server is loading, or the wait is over.
    let deadline = tokio::time::Instant::now() + args.wait;
    loop {
        let loading = match pack.call("mcp/get_dynamic_tools", json!({})).await {
            Ok(text) => serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|l| {
                    l["servers"]
                        .as_array()
                        .map(|s| s.iter().any(|s| s["status"] == "loading"))
                })
                .unwrap_or(false),
            Err(_) => false,
        };
        if !loading || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let outcome = pack.call(&args.tool, args.arguments).await;
    drop(pack);
    // Give the best-effort DELETE of each session a moment to go out.
    tokio::time::sleep(Duration::from_millis(100)).await;
    match outcome {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{}: {}", error.kind, error.message);
            ExitCode::from(1)
        }
    }
}
