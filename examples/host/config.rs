//! Reading CONFIG. Every command hands the file's text to the Pack as its config: the Pack
//! reads an `mcp.json` itself (JSONC, `mcpServers` or VS Code's `servers`; README
//! "Configuration"), with the one reader it reads servers' JSON with, and its reason for a file
//! it cannot use is what the host prints. `login` and `logout` have it serve their one server
//! only (the plugin config's `mcpOnly`), so the host never reads the file's JSON itself.

/// The text of the config file at `path`.
pub(crate) fn read_text(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
}

/// `text` without a leading UTF-8 byte order mark (Windows editors write one).
pub(crate) fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}
