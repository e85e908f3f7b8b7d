//! Reading CONFIG: an `mcp.json` as VS Code and other clients write it (JSONC), down to its
//! servers object, which the host hands to the Pack as is.

use serde_json::Value;

/// The servers object of an `mcp.json` (JSONC allowed): its `mcpServers`, or VS Code's `servers`.
pub(crate) fn read_config(path: &str) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let file = parse_jsonc(without_bom(&text)).map_err(|e| format!("{path} {e}"))?;
    let Value::Object(file) = file else {
        return Err(format!("{path} is not a JSON object"));
    };
    match (file.get("mcpServers"), file.get("servers")) {
        (Some(_), Some(_)) => Err(format!(
            "{path} has both \"mcpServers\" and \"servers\"; keep one"
        )),
        (Some(servers), None) | (None, Some(servers)) => Ok(servers.clone()),
        (None, None) => Err(format!(
            "{path} has neither an \"mcpServers\" nor a \"servers\" key"
        )),
    }
}

/// JSONC as VS Code writes it: JSON plus comments and trailing commas, nothing looser (no
/// single quotes, no missing commas), and no object naming a key twice. The comments and trailing
/// commas are found by `jsonc-parser` and blanked out in place, then `serde_json` reads the rest
/// strictly, so an error's line and column are the file's. The error reads after the file name.
fn parse_jsonc(text: &str) -> Result<Value, String> {
    use jsonc_parser::tokens::Token;
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
    let mut strict = text.as_bytes().to_vec();
    let mut blank = |range: &jsonc_parser::common::Range| {
        for byte in &mut strict[range.start..range.end] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut meaningful = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::CommentLine(_) | Token::CommentBlock(_)))
        .peekable();
    while let Some(token) = meaningful.next() {
        let trailing = matches!(token.token, Token::Comma)
            && meaningful
                .peek()
                .is_some_and(|next| matches!(next.token, Token::CloseBrace | Token::CloseBracket));
        if trailing {
            blank(&token.range);
        }
    }
    for comment in tokens
        .iter()
        .filter(|t| matches!(t.token, Token::CommentLine(_) | Token::CommentBlock(_)))
    {
        blank(&comment.range);
    }
    // Every byte replaced was a whole token's, and by ASCII: still UTF-8.
    let strict = String::from_utf8(strict).map_err(|e| not_json(&e))?;
    if strict.trim().is_empty() {
        return Err("is empty".to_string());
    }
    match serde_json::from_str::<Unique>(&strict) {
        Ok(Unique(value)) => Ok(value),
        Err(e) if e.classify() == serde_json::error::Category::Data => Err(format!("{e}")),
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

/// `text` without a leading UTF-8 byte order mark (Windows editors write one).
pub(crate) fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}
