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
mod jsonrpc;
mod limits;
mod listing;
mod notices;
mod pack;
mod protocol;
mod redact;
mod result;
mod schema;
mod server;
mod sse;
mod substitute;

use runvil_plugin::{PackSpec, Packs, Value};

/// The name of the Pack [`install`] inserts.
const PACK_NAME: &str = "runvil/mcp";

/// The id the Pack is mounted under unless the Host chooses another.
const PACK_ID: &str = "mcp";

/// The Plugin (a [`runvil_plugin::Plugin`]): inserts the Pack `runvil/mcp`, default id `mcp`,
/// with `config["mcp"]` as its config — the `mcpServers` object of an `mcp.json` file, or `Null`
/// (no servers) when `config` has no `mcp` key.
///
/// Constructing the Pack does no I/O. It fails, leaving the Pack unavailable, when the Host
/// provides no [`runvil_plugin::TOKIO_RUNTIME`] or when the config is neither `null` nor an
/// object. Each server entry is then parsed on its own: a refused entry shows as a namespace with
/// status `error`, and each accepted one connects in the background on the Host's runtime
/// (README "Configuration" and "Lifecycle and limits").
///
/// A `config` without an `mcp` key that has `mcpServers` (a whole `mcp.json` passed as the
/// plugin config) logs one warning at `warn` naming the fix; the Pack then has no servers.
pub fn install(packs: &mut Packs, config: &Value) {
    if config.get("mcp").is_none() && config.get("mcpServers").is_some() {
        tracing::warn!(
            "the plugin config has \"mcpServers\" but no \"mcp\" key, so the mcp Pack has no servers; pass the mcpServers object under \"mcp\": {{\"mcp\": {{\"docs\": {{\"url\": ...}}}}}}"
        );
    }
    packs.insert(PackSpec {
        name: PACK_NAME.to_string(),
        default_id: PACK_ID.to_string(),
        config: config.get("mcp").cloned().unwrap_or(Value::Null),
        construct: pack::construct,
    });
}
