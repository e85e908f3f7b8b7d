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
//! ```text
//! cargo run --example host -- login [--wait SECONDS] CONFIG NAMESPACE
//! cargo run --example host -- logout CONFIG NAMESPACE
//! ```
//!
//! `login` starts only that server and, when it needs a sign-in, prints the link as the only
//! line on stdout, then waits (default 600 s) for the browser's redirect: exit 0 once the server
//! is `ready` (also at once when stored credentials work), 1 on failure or timeout. `logout`
//! deletes that server's stored credentials (README, "Signing in").
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
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match argv.first().map(String::as_str) {
        Some("login") => return sign_in::login(&argv[1..]),
        Some("logout") => return sign_in::logout(&argv[1..]),
        _ => {}
    }
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

/// `host login` and `host logout` (README, "Signing in").
mod sign_in {
    use std::io::Write;
    use std::process::ExitCode;
    use std::time::Duration;

    use runvil_plugin::{Packs, Services, TOKIO_RUNTIME};
    use serde_json::{Value, json};
    use sha2::{Digest, Sha256};

    const LOGIN_USAGE: &str = "usage: host login [--wait SECONDS] CONFIG NAMESPACE\n\
        \x20      host logout CONFIG NAMESPACE";

    /// The entry of `namespace` in the config file at `path`.
    fn entry(path: &str, namespace: &str) -> Result<Value, String> {
        let servers = super::read_config(path)?;
        servers
            .get(namespace)
            .cloned()
            .ok_or_else(|| format!("{path} has no server {namespace:?}"))
    }

    fn usage(message: &str) -> ExitCode {
        eprintln!("host: {message}");
        eprintln!("{LOGIN_USAGE}");
        ExitCode::from(2)
    }

    /// `host login [--wait SECONDS] CONFIG NAMESPACE`.
    pub(super) fn login(args: &[String]) -> ExitCode {
        let mut wait = Duration::from_secs(600);
        let mut rest = args;
        if rest.first().map(String::as_str) == Some("--wait") {
            let Some(seconds) = rest
                .get(1)
                .and_then(|s| s.parse::<u64>().ok())
                .filter(|s| *s <= 86_400)
            else {
                return usage("--wait takes whole seconds from 0 to 86400");
            };
            wait = Duration::from_secs(seconds);
            rest = &rest[2..];
        }
        let [config, namespace] = rest else {
            return usage("login needs CONFIG and NAMESPACE");
        };
        let entry = match entry(config, namespace) {
            Ok(entry) => entry,
            Err(message) => return usage(&message),
        };
        let runtime = match tokio::runtime::Runtime::new() {
            Ok(runtime) => runtime,
            Err(e) => {
                eprintln!("host: cannot start a Tokio runtime: {e}");
                return ExitCode::from(2);
            }
        };
        runtime.block_on(wait_ready(namespace, entry, wait))
    }

    /// Starts only `namespace` and waits for it to be `ready`, printing each sign-in link.
    async fn wait_ready(namespace: &str, entry: Value, wait: Duration) -> ExitCode {
        let mut packs = Packs::new();
        plugin_mcp::install(&mut packs, &json!({"mcp": {namespace: entry}}));
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
        let deadline = tokio::time::Instant::now() + wait;
        let mut shown: Option<String> = None;
        let outcome = loop {
            let listing = pack
                .call("mcp/get_dynamic_tools", json!({"namespace": namespace}))
                .await
                .ok()
                .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                .unwrap_or_default();
            match (listing["status"].as_str(), listing["signInUrl"].as_str()) {
                (Some("ready"), _) => break Ok(()),
                (Some("error"), Some(link)) if shown.as_deref() != Some(link) => {
                    println!("{link}");
                    let _ = std::io::stdout().flush();
                    shown = Some(link.to_string());
                }
                // A plain error before any sign-in started is final for a login.
                (Some("error"), None) if shown.is_none() => {
                    break Err(listing["reason"].as_str().unwrap_or("").to_string());
                }
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                break Err(format!(
                    "server {namespace:?} was not ready within {} seconds",
                    wait.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        drop(pack);
        tokio::time::sleep(Duration::from_millis(100)).await;
        match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(reason) => {
                eprintln!("host: login failed: {reason}");
                ExitCode::from(1)
            }
        }
    }

    /// `host logout CONFIG NAMESPACE`: deletes the server's file in the credential store
    /// (`$PLUGIN_MCP_OAUTH_DIR`, else `<data dir>/plugin-mcp/oauth`), named by the first 16
    /// bytes of SHA-256 over the server URL, a NUL and the client (`oauth.clientId`, else
    /// `oauth.clientMetadataUrl`, else empty), in hex, plus `.json`.
    pub(super) fn logout(args: &[String]) -> ExitCode {
        let [config, namespace] = args else {
            return usage("logout needs CONFIG and NAMESPACE");
        };
        let entry = match entry(config, namespace) {
            Ok(entry) => entry,
            Err(message) => return usage(&message),
        };
        let Some(written) = entry["url"].as_str() else {
            return usage(&format!("server {namespace:?} has no \"url\""));
        };
        let url = match substitute(written).and_then(|u| {
            reqwest::Url::parse(&u).map_err(|_| "\"url\" is not a valid URL".to_string())
        }) {
            Ok(mut url) => {
                let _ = url.set_username("");
                let _ = url.set_password(None);
                url
            }
            Err(message) => return usage(&message),
        };
        let oauth = &entry["oauth"];
        let client = oauth["clientId"]
            .as_str()
            .or(oauth["clientMetadataUrl"].as_str())
            .map(substitute)
            .transpose();
        let client = match client {
            Ok(client) => client.unwrap_or_default(),
            Err(message) => return usage(&message),
        };
        let dir = match std::env::var_os("PLUGIN_MCP_OAUTH_DIR").filter(|d| !d.is_empty()) {
            Some(dir) => std::path::PathBuf::from(dir),
            None => match dirs::data_dir() {
                Some(data) => data.join("plugin-mcp").join("oauth"),
                None => {
                    eprintln!("host: no data directory is known; set PLUGIN_MCP_OAUTH_DIR");
                    return ExitCode::from(1);
                }
            },
        };
        let mut hash = Sha256::new();
        hash.update(url.as_str().as_bytes());
        hash.update([0]);
        hash.update(client.as_bytes());
        let name: String = hash.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        match std::fs::remove_file(dir.join(format!("{name}.json"))) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!(
                    "host: the stored credentials could not be deleted: {}",
                    e.kind()
                );
                ExitCode::from(1)
            }
        }
    }

    /// `${env:NAME}` replaced by the variable's value, as the Pack does.
    fn substitute(written: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = written;
        while let Some(start) = rest.find("${env:") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 6..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                return Ok(out);
            };
            let name = &after[..end];
            let value = std::env::var(name)
                .map_err(|_| format!("environment variable {name:?} is not set"))?;
            out.push_str(&value);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}
