//! How a reason names a JSON value's type ("found a number"), and which known key a config key
//! misspells (the did-you-mean of a refusal). A leaf.

use serde_json::Value;

/// The JSON type of `value`, as a reason names it.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The shortest key compared by edit distance (a shorter key is compared by case, `_` and `-`
/// only), so that short keys of other clients (`auth`, `env`) are not read as typos.
const MIN_FUZZY_KEY: usize = 5;

/// The key of `known` that the config key `key` misspells: `key` is none of them but is one of
/// them in another case or with `_` and `-` in it (`URL`, `mcp_servers`, `client_id`), or, when
/// `key` has [`MIN_FUZZY_KEY`] or more characters, one letter off once so compared (`header`,
/// `scope`, `Header`). The first such key in `known`'s order for which `absent` holds: a near
/// miss written beside the key itself is some other setting, not a typo. Decided on key names
/// only, which come from the config, never from a server.
pub(crate) fn misspelling_of<'k>(
    key: &str,
    known: &[&'k str],
    absent: impl Fn(&str) -> bool,
) -> Option<&'k str> {
    if known.contains(&key) {
        return None;
    }
    let folded: String = key
        .chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect();
    let fuzzy = key.chars().count() >= MIN_FUZZY_KEY;
    known.iter().copied().find(|k| {
        let lower = k.to_lowercase();
        absent(k)
            && (folded == lower || (fuzzy && strsim::damerau_levenshtein(&folded, &lower) == 1))
    })
}

#[cfg(test)]
mod tests {
    use super::misspelling_of;

    #[test]
    fn a_misspelling_is_a_case_a_separator_or_one_letter_away() {
        let known = ["url", "headers", "mcpServers", "clientId", "scopes"];
        let cases = [
            ("URL", Some("url")),
            ("Headers", Some("headers")),
            ("header", Some("headers")),
            ("Header", Some("headers")),
            ("mcp_servers", Some("mcpServers")),
            ("MCP-SERVERS", Some("mcpServers")),
            ("mcpserver", Some("mcpServers")),
            ("client_id", Some("clientId")),
            ("clientID", Some("clientId")),
            ("scope", Some("scopes")),
            // Itself, a short key one letter off, and keys of other kinds are no misspelling.
            ("url", None),
            ("uri", None),
            ("auth", None),
            ("timeout", None),
            ("", None),
        ];
        for (key, meant) in cases {
            assert_eq!(misspelling_of(key, &known, |_| true), meant, "{key}");
        }
        // A known key that is present is never the one meant.
        assert_eq!(misspelling_of("Headers", &known, |k| k != "headers"), None);
    }
}
