//! The modern era (MCP 2026-07-28): what a stateless request carries, how the client tells a
//! modern server from a legacy one, and the headers mirrored from a request's body.
//!
//! - [`META`]: the `_meta` every modern request carries (basic "Request metadata": protocol
//!   version, client capabilities — none — and client info).
//! - [`header_value`]: the transport's value encoding for `Mcp-Name` and `Mcp-Param-{Name}`
//!   (basic/transports/streamable-http "Value Encoding").
//! - [`Mirrored`]: a tool's `x-mcp-header` declarations, checked when the tool is listed and
//!   applied to each call's arguments (server/tools "x-mcp-header").
//! - [`Discovered`]: the era detection of basic/versioning "Backward
//!   Compatibility with Initialization-Based Versions" and the version choice of
//!   `UnsupportedProtocolVersion`.

use std::sync::LazyLock;

use base64::Engine;
use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::protocol::{MCP_PARAM_PREFIX, MODERN_VERSION, SUPPORTED_VERSIONS, codes};

/// The `_meta` object of every modern request (MCP 2026-07-28, basic "Request metadata"):
/// `io.modelcontextprotocol/protocolVersion` (the version the `MCP-Protocol-Version` header
/// carries too), `io.modelcontextprotocol/clientCapabilities` (`{}`: this client declares no
/// capability, in either era) and `io.modelcontextprotocol/clientInfo`.
pub(crate) static META: LazyLock<String> = LazyLock::new(|| {
    serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {
            "name": "plugin-mcp",
            "version": env!("CARGO_PKG_VERSION"),
        },
    })
    .to_string()
});

/// The most versions of a server's list that a reason shows, and the longest one shown (each
/// scrubbed first, then cut); the decision reads them all.
pub(crate) const MAX_SUPPORTED: usize = 16;
pub(crate) const MAX_VERSION_BYTES: usize = 32;

/// What the answer to the first modern request of a start says of the server's era (MCP
/// 2026-07-28, transports "Backward Compatibility"; basic/versioning "Backward Compatibility
/// with Initialization-Based Versions").
#[derive(PartialEq, Eq)]
pub(crate) enum Discovered {
    /// A `server/discover` result or a modern error other than a version refusal: the server
    /// is modern.
    Modern,
    /// `UnsupportedProtocolVersion` whose `supported` list names a legacy version this client
    /// speaks: the server is dual-era but not on 2026-07-28; the client initializes.
    LegacyOffered,
    /// `UnsupportedProtocolVersion` naming no version this client speaks: the versions it named,
    /// as received (the reason shows at most [`MAX_SUPPORTED`], each scrubbed and cut).
    NoMutualVersion(Vec<String>),
    /// Anything else a server answers that is no transport failure: a 4xx without a modern
    /// JSON-RPC error, a `-32601` in a 200, an empty body. The server is legacy.
    Legacy,
}

impl Discovered {
    /// The verdict's name, for logs: never the server's versions (its text, unscrubbed).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Discovered::Modern => "modern",
            Discovered::LegacyOffered => "legacy (offered by a version refusal)",
            Discovered::NoMutualVersion(_) => "no version in common",
            Discovered::Legacy => "legacy",
        }
    }
}

/// Shows the name only ([`Discovered::name`]).
impl std::fmt::Debug for Discovered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The versions a modern error's `data.supported` names, read leniently: non-strings are
/// skipped, every string is kept as it came (the reader bounded the message; a reason shows
/// them scrubbed and cut, [`MAX_SUPPORTED`] at most). `None` when `data` holds no `supported`
/// array.
pub(crate) fn supported_versions(data: Option<&RawValue>) -> Option<Vec<String>> {
    #[derive(Deserialize)]
    struct Data {
        supported: Vec<Value>,
    }
    let data: Data = serde_json::from_str(data?.get()).ok()?;
    Some(
        data.supported
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
    )
}

/// Whether a JSON-RPC error (`code`, `data`) answering `server/discover` refuses 2026-07-28
/// while naming it as supported (`UnsupportedProtocolVersion`, MCP 2026-07-28,
/// basic/versioning): a server whose first answer is a version refusal, asked once more.
pub(crate) fn refuses_what_it_supports(code: i64, data: Option<&RawValue>) -> bool {
    code == codes::UNSUPPORTED_PROTOCOL_VERSION
        && supported_versions(data).is_some_and(|v| v.iter().any(|v| v == MODERN_VERSION))
}

/// The verdict a JSON-RPC error answering the first modern request gives: modern errors are
/// [`Discovered::Modern`] (a version refusal decides by its `supported` list), anything else is
/// [`Discovered::Legacy`].
pub(crate) fn verdict_of_error(code: i64, data: Option<&RawValue>) -> Discovered {
    if code != codes::UNSUPPORTED_PROTOCOL_VERSION {
        return if codes::is_modern(code) {
            Discovered::Modern
        } else {
            Discovered::Legacy
        };
    }
    let supported = supported_versions(data).unwrap_or_default();
    if supported.iter().any(|v| v == MODERN_VERSION) {
        // It refused the version it names as supported: the client cannot do better by
        // retrying; read as a modern server whose start fails on its own terms.
        return Discovered::Modern;
    }
    if supported
        .iter()
        .any(|v| SUPPORTED_VERSIONS.contains(&v.as_str()))
    {
        return Discovered::LegacyOffered;
    }
    Discovered::NoMutualVersion(supported)
}

/// A header value for `text` by the transport's value encoding (MCP 2026-07-28, transports
/// "Value Encoding"): as it is when every byte is visible ASCII or an inner space (so `""` is an
/// empty header) and it does not look like the Base64 sentinel; otherwise
/// `=?base64?{Base64 of its UTF-8}?=` (a tab, as any control character, is encoded). The
/// result never holds CR, LF or any other control byte, so no value can add a header.
pub(crate) fn header_value(text: &str) -> HeaderValue {
    let plain = text.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && (!text.starts_with("=?base64?") || !text.ends_with("?="));
    let encoded;
    let value = if plain {
        text
    } else {
        encoded = format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
        );
        &encoded
    };
    HeaderValue::from_str(value).expect("visible ASCII is a valid header value")
}

/// What a result with `resultType: "input_required"` asks for (MCP 2026-07-28,
/// basic/patterns/mrtr): the methods of its `inputRequests` (`elicitation/create`,
/// `sampling/createMessage`, `roots/list`), each once, at most four, unscrubbed (the caller
/// scrubs); or that it sent only a `requestState`. `None` for any other result (an absent
/// `resultType` is `complete`).
pub(crate) fn input_required(result: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Interim<'a> {
        #[serde(rename = "resultType", borrow, default)]
        result_type: Option<std::borrow::Cow<'a, str>>,
        #[serde(rename = "inputRequests", default)]
        input_requests: Option<serde_json::Map<String, Value>>,
    }
    // Cheap first: a result that never names the field is complete.
    if !result.get().contains("resultType") {
        return None;
    }
    let interim: Interim<'_> = serde_json::from_str(result.get()).ok()?;
    if interim.result_type.as_deref() != Some("input_required") {
        return None;
    }
    let mut methods: Vec<&str> = Vec::new();
    for request in interim.input_requests.iter().flat_map(|r| r.values()) {
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("a request without a method");
        if !methods.contains(&method) {
            methods.push(method);
        }
    }
    Some(match methods.len() {
        0 => "only a retry with its requestState".to_string(),
        n if n > 4 => format!("{} and {} more", methods[..4].join(", "), n - 4),
        _ => methods.join(", "),
    })
}

/// What a `MissingRequiredClientCapability` error's `data.requiredCapabilities` names: its
/// keys, at most four, unscrubbed (the caller scrubs); `None` without such a field.
pub(crate) fn required_capabilities(data: Option<&RawValue>) -> Option<String> {
    #[derive(Deserialize)]
    struct Data {
        #[serde(rename = "requiredCapabilities")]
        required: serde_json::Map<String, Value>,
    }
    let data: Data = serde_json::from_str(data?.get()).ok()?;
    let names: Vec<&str> = data.required.keys().map(String::as_str).take(4).collect();
    (!names.is_empty()).then(|| names.join(", "))
}

/// The JSON types `x-mcp-header` may be put on (server/tools "x-mcp-header": primitive, not
/// `number`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Primitive {
    String,
    Integer,
    Boolean,
}

/// One parameter a tool mirrors into a header: the chain of `properties` keys to it, and the
/// header it goes in (`Mcp-Param-{Name}`, lowercased as HTTP/1.1 sends it anyway).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Param {
    path: Vec<String>,
    header: HeaderName,
    kind: Primitive,
}

/// A tool's `x-mcp-header` declarations (MCP 2026-07-28, server/tools "x-mcp-header";
/// transports "Custom Headers from Tool Parameters"), checked once when the tool is listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Mirrored {
    params: Vec<Param>,
}

/// The largest integer a mirrored parameter may hold (2^53 − 1: exact in a double).
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

impl Mirrored {
    /// Reads the declarations of `schema` (a tool's `inputSchema`, an object).
    ///
    /// # Errors
    /// The reason the tool is left out of the listing: an `x-mcp-header` that is not a
    /// non-empty HTTP token (RFC 9110 §5.6.2), is named twice (case-insensitively), sits on a
    /// property that is not a string, integer or boolean, or is not reachable from the root
    /// through `properties` alone.
    pub(crate) fn declared(schema: &RawValue) -> Result<Self, String> {
        // Cheap first: most tools declare none.
        if !schema.get().contains("x-mcp-header") {
            return Ok(Self::default());
        }
        let schema: Value = serde_json::from_str(schema.get())
            .map_err(|_| "its inputSchema is not valid JSON".to_string())?;
        let mut params = Vec::new();
        let mut path = Vec::new();
        collect(&schema, &mut path, true, &mut params)?;
        let mut seen = std::collections::HashSet::new();
        for param in &params {
            if !seen.insert(param.header.clone()) {
                return Err(format!(
                    "its inputSchema names the x-mcp-header \"{}\" twice",
                    shown(&param.header.as_str()[MCP_PARAM_PREFIX.len()..])
                ));
            }
        }
        Ok(Self { params })
    }

    /// Whether the tool mirrors no parameter.
    pub(crate) fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// The `Mcp-Param-{Name}` headers for a call with `arguments`: one per declared parameter
    /// whose value is present and not `null`, in the value encoding ([`header_value`]). A value
    /// of another type than declared is mirrored by its own type when that is a string, an
    /// integer or a boolean (the server decides), and left out otherwise.
    pub(crate) fn headers(&self, arguments: &Value) -> Vec<(HeaderName, HeaderValue)> {
        let mut out = Vec::with_capacity(self.params.len());
        for param in &self.params {
            let mut at = arguments;
            for key in &param.path {
                match at.get(key) {
                    Some(next) => at = next,
                    None => {
                        at = &Value::Null;
                        break;
                    }
                }
            }
            let text = match at {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
                // An integral float for an integer parameter (`42.0`) goes as `42`.
                Value::Number(n) if param.kind == Primitive::Integer => match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER as f64 => {
                        (f as i64).to_string()
                    }
                    _ => continue,
                },
                _ => continue,
            };
            out.push((param.header.clone(), header_value(&text)));
        }
        out
    }
}

/// Walks a schema for `x-mcp-header`: `reachable` says whether `node` is the root or reached
/// from it through `properties` keys alone.
fn collect(
    node: &Value,
    path: &mut Vec<String>,
    reachable: bool,
    out: &mut Vec<Param>,
) -> Result<(), String> {
    match node {
        Value::Object(map) => {
            if let Some(name) = map.get("x-mcp-header") {
                if !reachable || path.is_empty() {
                    return Err(
                        "its inputSchema puts an x-mcp-header where it is not reachable through \"properties\" alone".to_string(),
                    );
                }
                out.push(param(name, map, path)?);
            }
            for (key, child) in map {
                if key == "properties" {
                    if let Value::Object(props) = child {
                        for (name, schema) in props {
                            path.push(name.clone());
                            collect(schema, path, reachable, out)?;
                            path.pop();
                        }
                    }
                } else if key != "x-mcp-header"
                    && key != "const"
                    && key != "default"
                    && key != "enum"
                    && key != "examples"
                {
                    collect(child, path, false, out)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            for item in items {
                collect(item, path, false, out)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A schema's text (already scrubbed with the schema) as a reason quotes it: its first 64
/// characters, control characters as spaces.
fn shown(text: &str) -> String {
    let mut shown: String = text
        .chars()
        .take(64)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(64).is_some() {
        shown.push('…');
    }
    shown
}

/// One declaration, checked: the name a token, the property's type a primitive other than
/// `number`.
fn param(
    name: &Value,
    schema: &serde_json::Map<String, Value>,
    path: &[String],
) -> Result<Param, String> {
    let at = shown(&path.join("."));
    let Some(name) = name.as_str().filter(|n| !n.is_empty()) else {
        return Err(format!(
            "the x-mcp-header of its parameter \"{at}\" is not a non-empty string"
        ));
    };
    let token = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    let header = format!("{MCP_PARAM_PREFIX}{}", name.to_ascii_lowercase());
    let header = match HeaderName::from_bytes(header.as_bytes()) {
        Ok(header) if token => header,
        _ => {
            return Err(format!(
                "the x-mcp-header \"{}\" of its parameter \"{at}\" is not an HTTP token",
                shown(name)
            ));
        }
    };
    // One primitive type, maybe with "null" beside it (`["string", "null"]`).
    let declared = match schema.get("type") {
        Some(Value::Array(types)) => {
            let named: Vec<&str> = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            match named.as_slice() {
                [one] if types.len() <= 2 => Some(*one),
                _ => None,
            }
        }
        other => other.and_then(Value::as_str),
    };
    let kind = match declared {
        Some("string") => Primitive::String,
        Some("integer") => Primitive::Integer,
        Some("boolean") => Primitive::Boolean,
        other => {
            return Err(format!(
                "its parameter \"{at}\" has an x-mcp-header but its type is {}, not string, integer or boolean",
                other.map_or_else(
                    || "not declared".to_string(),
                    |t| format!("\"{}\"", shown(t))
                )
            ));
        }
    };
    Ok(Param {
        path: path.to_vec(),
        header,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    #[test]
    fn a_version_refusal_naming_the_refused_version_is_asked_once_more() {
        let data =
            |list: &str| Some(RawValue::from_string(format!(r#"{{"supported":{list}}}"#)).unwrap());
        assert!(refuses_what_it_supports(
            -32022,
            data(r#"["2026-07-28"]"#).as_deref()
        ));
        assert!(!refuses_what_it_supports(
            -32022,
            data(r#"["2025-11-25"]"#).as_deref()
        ));
        assert!(!refuses_what_it_supports(
            -32020,
            data(r#"["2026-07-28"]"#).as_deref()
        ));
        assert!(!refuses_what_it_supports(-32022, None));
    }

    #[test]
    fn values_follow_the_transports_encoding() {
        let cases = [
            ("us-west1", "us-west1"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
            ("a\r\nX-Injected: 1", "=?base64?YQ0KWC1JbmplY3RlZDogMQ==?="),
            ("", ""),
            ("tab\tinside", "=?base64?dGFiCWluc2lkZQ==?="),
            ("in side", "in side"),
        ];
        for (text, want) in cases {
            assert_eq!(header_value(text).to_str().unwrap(), want, "{text:?}");
        }
    }

    #[test]
    fn declarations_are_read_along_properties_only() {
        let schema = raw(r#"{"type":"object","properties":{
                "region":{"type":"string","x-mcp-header":"Region"},
                "n":{"type":"integer","x-mcp-header":"Count"},
                "deep":{"type":"object","properties":{"on":{"type":"boolean","x-mcp-header":"On"}}},
                "q":{"type":"string"}}}"#);
        let mirrored = Mirrored::declared(&schema).unwrap();
        let headers = mirrored.headers(&serde_json::json!({
            "region": "eu", "n": 42.0, "deep": {"on": true}, "q": "x"
        }));
        let shown: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        let mut shown = shown;
        shown.sort();
        assert_eq!(
            shown,
            [
                ("mcp-param-count".to_string(), "42".to_string()),
                ("mcp-param-on".to_string(), "true".to_string()),
                ("mcp-param-region".to_string(), "eu".to_string()),
            ]
        );
        assert_eq!(
            mirrored.headers(&serde_json::json!({"region": null})),
            Vec::new()
        );
    }

    #[test]
    fn invalid_declarations_leave_the_tool_out() {
        let cases = [
            (
                r#"{"properties":{"a":{"type":"string","x-mcp-header":""}}}"#,
                "the x-mcp-header of its parameter \"a\" is not a non-empty string",
            ),
            (
                r#"{"properties":{"a":{"type":"string","x-mcp-header":"Has Space"}}}"#,
                "the x-mcp-header \"Has Space\" of its parameter \"a\" is not an HTTP token",
            ),
            (
                r#"{"properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}"#,
                "its inputSchema names the x-mcp-header \"x\" twice",
            ),
            (
                r#"{"properties":{"a":{"type":"number","x-mcp-header":"A"}}}"#,
                "its parameter \"a\" has an x-mcp-header but its type is \"number\", not string, integer or boolean",
            ),
            (
                r#"{"properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}"#,
                "its inputSchema puts an x-mcp-header where it is not reachable through \"properties\" alone",
            ),
            (
                r#"{"anyOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}"#,
                "its inputSchema puts an x-mcp-header where it is not reachable through \"properties\" alone",
            ),
            (
                r#"{"type":"object","x-mcp-header":"Root"}"#,
                "its inputSchema puts an x-mcp-header where it is not reachable through \"properties\" alone",
            ),
        ];
        for (schema, want) in cases {
            assert_eq!(
                Mirrored::declared(&raw(schema)).unwrap_err(),
                want,
                "{schema}"
            );
        }
        assert!(
            Mirrored::declared(&raw(r#"{"properties":{"a":{"type":"string"}}}"#))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn version_refusals_decide_by_their_supported_list() {
        let data = |text: &str| Some(raw(text));
        assert_eq!(
            verdict_of_error(
                -32022,
                data(r#"{"supported":["2025-11-25"],"requested":"2026-07-28"}"#).as_deref()
            ),
            Discovered::LegacyOffered
        );
        assert_eq!(
            verdict_of_error(
                -32022,
                data(r#"{"supported":["2027-01-01",7,null,"x"]}"#).as_deref()
            ),
            Discovered::NoMutualVersion(vec!["2027-01-01".into(), "x".into()])
        );
        assert_eq!(
            verdict_of_error(-32022, None),
            Discovered::NoMutualVersion(Vec::new())
        );
        assert_eq!(verdict_of_error(-32020, None), Discovered::Modern);
        assert_eq!(verdict_of_error(-32601, None), Discovered::Legacy);
        assert_eq!(verdict_of_error(-32600, None), Discovered::Legacy);
        let many = format!(
            r#"{{"supported":[{}]}}"#,
            (0..100)
                .map(|i| format!("\"v{i}\""))
                .collect::<Vec<_>>()
                .join(",")
        );
        match verdict_of_error(-32022, data(&many).as_deref()) {
            Discovered::NoMutualVersion(list) => assert_eq!(list.len(), 100),
            other => panic!("{}", other.name()),
        }
    }
}
