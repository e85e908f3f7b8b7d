//! Reading CONFIG. A call hands the file's text to the Pack as its config: the Pack reads an
//! `mcp.json` itself (JSONC, `mcpServers` or VS Code's `servers`; README "Configuration") and
//! its reason for a file it cannot use is what the host prints. `login` and `logout` start one
//! server only, so they pick that server's entry out of the file first.

use serde_json::Value;

/// The text of the config file at `path`.
pub(crate) fn read_text(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
}

/// The entry of `namespace` in the config file at `path`: under its `mcpServers`, VS Code's
/// `servers`, or at the top of a file that is only a servers object. The file is JSONC, read
/// with `jsonc-parser` as the Pack reads it; the Pack then checks the entry itself.
pub(crate) fn entry(path: &str, namespace: &str) -> Result<Value, String> {
    let text = read_text(path)?;
    let options = jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
    };
    let file = jsonc_parser::parse_to_serde_value(without_bom(&text), &options).map_err(|e| {
        format!("{path} is not JSON (comments and trailing commas are allowed): {e}")
    })?;
    let servers = match &file {
        Some(Value::Object(top)) => match (top.get("mcpServers"), top.get("servers")) {
            (Some(Value::Object(servers)), None) | (None, Some(Value::Object(servers))) => servers,
            _ => top,
        },
        _ => return Err(format!("{path} is not a JSON object")),
    };
    servers
        .get(namespace)
        .cloned()
        .ok_or_else(|| format!("{path} has no server {namespace:?}"))
}

/// `text` without a leading UTF-8 byte order mark (Windows editors write one).
pub(crate) fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}
