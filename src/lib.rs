//! `plugin-mcp`: a runvil Plugin whose Pack reaches every remote MCP server of an `mcp.json`
//! through two model-facing tools, `<id>/get_dynamic_tools` and `<id>/call_dynamic_tool`.
//!
//! The only public item is [`install`]. Everything else is reached through the Host contract in
//! the `runvil-plugin` crate: the Host calls `install`, constructs the Pack `runvil/mcp` under an
//! id (by default `mcp`) with its [`runvil_plugin::Services`], and calls the Pack's tools.
//!
//! See `README.md` and the pages of `docs/` it links (the config, the JSON shapes, the limits),
//! and `ARCHITECTURE.md` for how the modules fit together.

mod auth;
mod config;
mod http;
mod json;
mod jsonc;
mod jsonrpc;
mod limits;
mod listing;
mod notices;
mod pack;
mod protocol;
mod redact;
mod result;
mod schema;
mod search;
mod server;
mod sse;
mod substitute;

use runvil_plugin::{Construct, PackSpec, Packs, Value};

/// The name of the Pack [`install`] inserts.
const PACK_NAME: &str = "runvil/mcp";

/// The key of a plugin config that names the only namespaces of the config the Pack serves
/// (an array of strings; README "Add it to a Host").
const ONLY_KEY: &str = "mcpOnly";

/// The id the Pack is mounted under unless the Host chooses another.
const PACK_ID: &str = "mcp";

/// The Plugin (a [`runvil_plugin::Plugin`]): inserts the Pack `runvil/mcp`, default id `mcp`,
/// with `config["mcp"]` as its config — the `mcpServers` object of an `mcp.json` file, the
/// whole file (`{"mcpServers": {...}}`, VS Code's `{"servers": {...}}`), or the file's text as a
/// string (JSONC: comments and trailing commas allowed) — or `Null` (no servers) when `config`
/// has no `mcp` key. A `config` without an `mcp` key that is itself a whole
/// `mcp.json` (it has `mcpServers`, or a `servers` object that is no server entry) is the
/// Pack's config as a whole. A `config` with `"mcpOnly": ["docs", ...]` beside them has the
/// Pack serve those namespaces of its config only: the whole config is read as always, the
/// other entries are then left out (not started, not listed), as a Host that signs in to one
/// server ahead of time wants (the host CLI's `login`).
///
/// Constructing the Pack does no I/O. It fails, leaving the Pack unavailable, when the Host
/// provides no [`runvil_plugin::TOKIO_RUNTIME`], when the config is neither `null`, an object
/// nor a string, when its text is not JSONC (the reason names the line and column) or nests
/// deeper than 64 levels, when it is a whole file naming both `mcpServers` and `servers`, when
/// `mcpOnly` is not an array of strings, or when `config` has no `mcp` key but one that
/// misspells `mcp`, `mcpServers` or `servers` (`MCP`, `mcp_servers`) and holds servers (the
/// reason names the key and the one meant). Each server entry is then
/// parsed on its own: a refused entry shows as a namespace with status `error` and the reason,
/// and each accepted one connects in the background on the Host's runtime (README
/// "Configuration" and "Lifecycle and limits").
pub fn install(packs: &mut Packs, config: &Value) {
    // A Host may serve some of the config's servers only (the host CLI's `login`).
    let served = |servers: Value| -> (Value, Construct) {
        match config.get(ONLY_KEY) {
            Some(only) => (
                serde_json::json!({ "servers": servers, ONLY_KEY: only.clone() }),
                pack::construct_only,
            ),
            None => (servers, pack::construct),
        }
    };
    let (pack_config, construct): (Value, Construct) = match config.get("mcp") {
        // A whole settings file whose own `mcp` key holds no servers (Gemini CLI's).
        Some(_) if config::mcp_key_is_the_files(config) => served(config.clone()),
        Some(own) => served(own.clone()),
        None if config::is_whole_file(config) => served(config.clone()),
        None => match config::misnamed_plugin_key(config) {
            // Only that key goes with the spec, not other plugins' settings.
            Some((key, _)) => (
                serde_json::json!({ key: config[key].clone() }),
                pack::construct_misnamed,
            ),
            None => served(Value::Null),
        },
    };
    packs.insert(PackSpec {
        name: PACK_NAME.to_string(),
        default_id: PACK_ID.to_string(),
        config: pack_config,
        construct,
    });
}
