//! Reading the text of an `mcp.json` file: JSONC as VS Code and other MCP clients write it
//! (README "Configuration"). Owns what counts as valid text — JSON plus `//` and `/* */`
//! comments and trailing commas, a leading byte order mark, and no object naming a key twice —
//! and the error that says where the text breaks. No I/O: the Host reads the file.
//!
//! The text is read by the one reader of JSON text, [`crate::json`] (its `Source::Config`
//! rules): comments and trailing commas blanked out in place, nesting bounded, surrogate pairs
//! decoded, a repeated key refused. No error quotes the text: they name a position, a token kind,
//! a limit or a repeated key.

use serde_json::Value;

use crate::json::{Problem, config_value};

/// The JSON value of `text`, an `mcp.json` file's contents (JSONC allowed, a leading UTF-8 byte
/// order mark skipped), read as `json::Source::Config`.
///
/// # Errors
/// A sentence to follow the name of what was read: `is empty`, `is not JSON (comments and
/// trailing commas are allowed): <what> at line L column C`, `nests arrays and objects deeper
/// than 64 levels at line L column C`, or `names the key "K" twice in one object; keep one at
/// line L column C`. Text holding no `{` at all, which cannot be an `mcp.json` (a file's path or
/// name passed instead of its contents), gets [`NOT_A_PATH`] after the error.
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    let hint = if text.contains('{') { "" } else { NOT_A_PATH };
    read(text).map_err(|e| format!("{e}{hint}"))
}

/// What follows the error for a text that holds no `{` at all.
pub(crate) const NOT_A_PATH: &str =
    "; a string config is the text of an mcp.json file, not its path: pass the file's contents";

/// [`parse`] without the hint.
fn read(text: &str) -> Result<Value, String> {
    config_value(text).map_err(|refusal| match &refusal.problem {
        Problem::Syntax(what) => format!(
            "is not JSON (comments and trailing commas are allowed): {what} at line {} column {}",
            refusal.line, refusal.column
        ),
        _ => refusal.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::parse;

    #[test]
    fn comments_trailing_commas_and_a_bom_are_read() {
        let text = "\u{feff}{\n  // a line comment\n  \"servers\": {\"docs\": {\"url\": \"http://127.0.0.1:1/mcp\",},}, /* a block */\n}\n";
        assert_eq!(
            parse(text),
            Ok(json!({"servers": {"docs": {"url": "http://127.0.0.1:1/mcp"}}}))
        );
    }

    #[test]
    fn a_comma_inside_a_string_before_a_brace_is_kept() {
        assert_eq!(parse(r#"{"a": ",}"}"#), Ok(json!({"a": ",}"})));
    }

    #[test]
    fn errors_name_the_place_and_never_quote_the_text() {
        assert_eq!(
            parse(r#"{"servers": {} "inputs": []}"#),
            Err(
                "is not JSON (comments and trailing commas are allowed): expected `,` or `}` at line 1 column 16"
                    .to_string()
            )
        );
        assert_eq!(
            parse("{'sk-secret-value': 1}"),
            Err(
                "is not JSON (comments and trailing commas are allowed): key must be a string at line 1 column 2"
                    .to_string()
            )
        );
        assert_eq!(
            parse(r#"{"a": {"b": 1, "b": 2}}"#),
            Err(
                r#"names the key "b" twice in one object; keep one at line 1 column 18"#
                    .to_string()
            )
        );
        assert_eq!(
            parse(" // only a comment\n"),
            Err(format!("is empty{}", super::NOT_A_PATH))
        );
        assert_eq!(parse("{ // only a brace\n"), Err("is not JSON (comments and trailing commas are allowed): EOF while parsing an object at line 2 column 0".to_string()));
    }
}
