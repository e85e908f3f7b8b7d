//! Reading the text of an `mcp.json` file: JSONC as VS Code and other MCP clients write it
//! (README "Configuration"). Owns what counts as valid text — JSON plus `//` and `/* */`
//! comments and trailing commas, a leading byte order mark, and no object naming a key twice —
//! and the error that says where the text breaks. No I/O: the Host reads the file.
//!
//! Comments and trailing commas are found by `jsonc-parser` and blanked out in place (newlines
//! kept), then `serde_json` reads the rest strictly, so an error's line and column are the
//! file's own. No error quotes the text: they name a position, a token kind or a repeated key.
//! Reading text is this module's job, so it alone may look at the text's characters
//! (`.ci/no-text-decisions.sh`).

use jsonc_parser::tokens::Token;
use serde_json::Value;

/// The JSON value of `text`, an `mcp.json` file's contents (JSONC allowed, a leading UTF-8 byte
/// order mark skipped).
///
/// # Errors
/// A sentence to follow the name of what was read: `is empty`, `is not JSON (comments and
/// trailing commas are allowed): <what> at line L column C`, or `names the key "K" twice in one
/// object; keep one at line L column C`. Text holding no `{` at all, which cannot be an
/// `mcp.json` (a file's path or name passed instead of its contents), gets [`NOT_A_PATH`] after
/// the error.
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    let hint = if text.contains('{') { "" } else { NOT_A_PATH };
    read(text).map_err(|e| format!("{e}{hint}"))
}

/// What follows the error for a text that holds no `{` at all.
pub(crate) const NOT_A_PATH: &str =
    "; a string config is the text of an mcp.json file, not its path: pass the file's contents";

/// [`parse`] without the hint.
fn read(text: &str) -> Result<Value, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let not_json = |e: &dyn std::fmt::Display| {
        format!("is not JSON (comments and trailing commas are allowed): {e}")
    };
    let options = jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
    };
    let collect = jsonc_parser::CollectOptions {
        comments: jsonc_parser::CommentCollectionStrategy::AsTokens,
        tokens: true,
    };
    let parsed = jsonc_parser::parse_to_ast(text, &collect, &options).map_err(|e| not_json(&e))?;
    let tokens = parsed.tokens.unwrap_or_default();
    let is_comment =
        |token: &Token| matches!(token, Token::CommentLine(_) | Token::CommentBlock(_));
    let mut strict = text.as_bytes().to_vec();
    let mut blank = |range: &jsonc_parser::common::Range| {
        for byte in &mut strict[range.start..range.end] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut meaningful = tokens.iter().filter(|t| !is_comment(&t.token)).peekable();
    while let Some(token) = meaningful.next() {
        let trailing = matches!(token.token, Token::Comma)
            && meaningful
                .peek()
                .is_some_and(|next| matches!(next.token, Token::CloseBrace | Token::CloseBracket));
        if trailing {
            blank(&token.range);
        }
    }
    for comment in tokens.iter().filter(|t| is_comment(&t.token)) {
        blank(&comment.range);
    }
    // Every byte replaced was a whole token's, and by ASCII: still UTF-8.
    let strict = String::from_utf8(strict).map_err(|e| not_json(&e))?;
    if strict.trim().is_empty() {
        return Err("is empty".to_string());
    }
    match serde_json::from_str::<Unique>(&strict) {
        Ok(Unique(value)) => Ok(value),
        Err(e) if e.classify() == serde_json::error::Category::Data => Err(e.to_string()),
        Err(e) => Err(not_json(&e)),
    }
}

/// A JSON value whose objects name each key once; a repeated key is an error naming it.
struct Unique(Value);

impl<'de> serde::Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "names the key {} twice in one object; keep one",
                    Value::String(key)
                )));
            }
            let Unique(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
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
        assert_eq!(parse("{ // only a brace\n"), Err("is not JSON (comments and trailing commas are allowed): Unterminated object on line 1 column 1".to_string()));
    }
}
