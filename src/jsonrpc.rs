//! JSON-RPC 2.0 messages as MCP carries them: what the Pack sends and how it reads what a server
//! sends (a single object or, under MCP 2025-03-26, a batch array).
//!
//! Decoding borrows from the received text; params and results stay raw JSON until the caller
//! decodes them into the shape it expects.

use serde::Deserialize;
use serde_json::value::RawValue;

/// One message from a server, as much as routing needs.
#[derive(Deserialize)]
pub(crate) struct Incoming<'a> {
    #[serde(borrow, default)]
    pub(crate) id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) method: Option<std::borrow::Cow<'a, str>>,
    /// A request's or notification's `params`, undecoded.
    #[serde(borrow, default)]
    pub(crate) params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) result: Option<&'a RawValue>,
    #[serde(default)]
    pub(crate) error: Option<RpcError>,
}

/// The first paragraph of `text`: up to its first blank line (a line of only whitespace),
/// leading blank lines skipped, its lines trimmed and joined with one space.
pub(crate) fn first_paragraph(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() {
            if out.is_empty() {
                continue;
            }
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
    }
    out
}

/// A JSON-RPC error object. `data` is kept raw (and unscrubbed: it is read, never shown whole)
/// for the modern errors whose `data` says what to do (MCP 2026-07-28, schema: "Errors").
#[derive(Deserialize, Clone, Default)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    #[serde(default)]
    pub(crate) message: String,
    #[serde(default)]
    pub(crate) data: Option<Box<RawValue>>,
}

impl RpcError {
    /// An error with no `data`.
    #[cfg(test)]
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
}

impl PartialEq for RpcError {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
            && self.message == other.message
            && self.data.as_ref().map(|d| d.get()) == other.data.as_ref().map(|d| d.get())
    }
}

/// Shows `data` by its size only: it is the server's, unscrubbed.
impl std::fmt::Debug for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcError")
            .field("code", &self.code)
            .field("message", &self.message)
            .field("data_bytes", &self.data.as_ref().map(|d| d.get().len()))
            .finish()
    }
}

/// What an incoming JSON-RPC 2.0 message is (request, notification, response).
pub(crate) enum Message<'m, 'a> {
    /// An answer to a request with the given id.
    Response(&'a RawValue, Result<&'a RawValue, &'m RpcError>),
    /// A request the server makes of the client.
    Request(&'a RawValue, &'m str),
    /// A notification from the server.
    Notification(&'m str),
    /// A response with an id and neither `result` nor `error` (JSON-RPC 2.0 §5 requires
    /// exactly one): an answer, but a malformed one.
    Hollow(&'a RawValue),
    /// An error response whose `id` is `null` or missing: the server could not read the request
    /// far enough to know its id (JSON-RPC 2.0 §5).
    ErrorWithoutId(&'m RpcError),
    /// Not a JSON-RPC message.
    Invalid,
}

impl<'a> Incoming<'a> {
    /// Classifies the message. A message with an id and a `result` or `error` is a response,
    /// even when it also names a `method` (some servers echo the request's): a request never
    /// carries either (JSON-RPC 2.0 §4, §5).
    pub(crate) fn kind(&self) -> Message<'_, 'a> {
        let answer = match (&self.result, &self.error) {
            (_, Some(error)) => Some(Err(error)),
            (Some(result), None) => Some(Ok(*result)),
            (None, None) => None,
        };
        match (&self.method, self.id, answer) {
            (_, Some(id), Some(answer)) => Message::Response(id, answer),
            (Some(method), Some(id), None) => Message::Request(id, method),
            (Some(method), None, _) => Message::Notification(method),
            (None, Some(id), None) => Message::Hollow(id),
            (None, None, Some(Err(error))) => Message::ErrorWithoutId(error),
            (None, None, _) => Message::Invalid,
        }
    }
}

/// Decodes a message body: one JSON-RPC object or a batch array of them.
///
/// # Errors
/// Text that is not JSON, or JSON that is neither an object nor an array of objects.
pub(crate) fn decode(text: &str) -> Result<Vec<Incoming<'_>>, &'static str> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        serde_json::from_str::<Vec<Incoming<'_>>>(text).map_err(|_| NOT_JSON_RPC)
    } else if trimmed.starts_with('{') {
        serde_json::from_str::<Incoming<'_>>(text)
            .map(|m| vec![m])
            .map_err(|_| NOT_JSON_RPC)
    } else {
        Err(NOT_JSON_RPC)
    }
}

const NOT_JSON_RPC: &str = "the server sent a message that is not JSON-RPC";

/// Whether the raw JSON id `raw` is the request id `id` (a number; a server that echoes it as a
/// string of the same digits is accepted too).
pub(crate) fn id_matches(raw: &RawValue, id: u64) -> bool {
    let text = raw.get();
    let text = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text);
    text.parse::<u64>() == Ok(id)
}

/// A request body: `{"jsonrpc":"2.0","id":<id>,"method":<method>,"params":<params>}`, where
/// `params` is the text of a JSON object, written as it is.
pub(crate) fn request(id: u64, method: &str, params: &str) -> Vec<u8> {
    let method = serde_json::to_string(method).expect("a string serializes");
    let mut body = Vec::with_capacity(48 + method.len() + params.len());
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    body.extend_from_slice(id.to_string().as_bytes());
    body.extend_from_slice(br#","method":"#);
    body.extend_from_slice(method.as_bytes());
    body.extend_from_slice(br#","params":"#);
    body.extend_from_slice(params.as_bytes());
    body.push(b'}');
    body
}

/// A modern request body (MCP 2026-07-28, basic "Request metadata"): as [`request`], with
/// `meta` (the text of one JSON object) as the `_meta` member of `params`, which must be the
/// text of a JSON object without `_meta`.
pub(crate) fn request_with_meta(id: u64, method: &str, params: &str, meta: &str) -> Vec<u8> {
    let method = serde_json::to_string(method).expect("a string serializes");
    let rest = params.trim_start().strip_prefix('{').unwrap_or("}");
    let rest = rest.trim_start();
    let comma = if rest.starts_with('}') { "" } else { "," };
    let mut body = Vec::with_capacity(64 + method.len() + params.len() + meta.len());
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    body.extend_from_slice(id.to_string().as_bytes());
    body.extend_from_slice(br#","method":"#);
    body.extend_from_slice(method.as_bytes());
    body.extend_from_slice(br#","params":{"_meta":"#);
    body.extend_from_slice(meta.as_bytes());
    body.extend_from_slice(comma.as_bytes());
    body.extend_from_slice(rest.as_bytes());
    body.push(b'}');
    body
}

/// A notification body: `{"jsonrpc":"2.0","method":<method>,"params":<params>}`.
pub(crate) fn notification(method: &str, params: &impl serde::Serialize) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Notification<'a, P> {
        jsonrpc: &'static str,
        method: &'a str,
        params: &'a P,
    }
    serde_json::to_vec(&Notification {
        jsonrpc: "2.0",
        method,
        params,
    })
    .expect("a notification of plain data serializes")
}

/// The client's answer to a server request: `{}` for `ping`, `-32601 Method not found` for
/// anything else (the Pack declares no capabilities, so it serves nothing else).
pub(crate) fn answer_server_request(id: &RawValue, method: &str) -> Vec<u8> {
    if method == "ping" {
        format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, id.get()).into_bytes()
    } else {
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":{},"message":"Method not found"}}}}"#,
            id.get(),
            crate::protocol::codes::METHOD_NOT_FOUND
        )
        .into_bytes()
    }
}

/// An optional field of a result, read leniently: `None` when `raw` is absent, `null`, or not of
/// the shape `T` (logged at debug level with `field`, for `namespace`). For extras a server may
/// shape oddly (`capabilities.tools: true`) without that failing what does not need them.
pub(crate) fn optional<'a, T: Deserialize<'a>>(
    namespace: &str,
    field: &'static str,
    raw: Option<&'a RawValue>,
) -> Option<T> {
    let raw = raw?;
    match serde_json::from_str::<Option<T>>(raw.get()) {
        Ok(read) => read,
        Err(_) => {
            tracing::debug!(
                namespace,
                field,
                "ignored a result field of an unexpected type"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn first_paragraph_ends_at_the_first_blank_line() {
        assert_eq!(
            first_paragraph("\n  \nInvalid params:\n  a is required \r\n\t\nStack:\n at x"),
            "Invalid params: a is required"
        );
        assert_eq!(first_paragraph("one line"), "one line");
        assert_eq!(first_paragraph(""), "");
    }

    use super::*;

    #[test]
    fn optional_fields_of_another_type_count_as_absent() {
        let raw = |text: &str| RawValue::from_string(text.to_string()).unwrap();
        let text = raw(r#""use search first""#);
        assert_eq!(
            optional::<String>("s", "instructions", Some(&text)),
            Some("use search first".to_string())
        );
        for odd in [r#"["use search first"]"#, "true", "null", "{}"] {
            let odd = raw(odd);
            assert_eq!(optional::<String>("s", "instructions", Some(&odd)), None);
        }
        assert_eq!(optional::<bool>("s", "listChanged", None), None);
    }

    #[test]
    fn classifies_every_kind() {
        let msgs = decode(
            r#"[{"jsonrpc":"2.0","id":1,"result":{"a":1}},
                {"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"nope"}},
                {"jsonrpc":"2.0","id":9,"method":"ping"},
                {"jsonrpc":"2.0","method":"notifications/progress","params":{}},
                {"jsonrpc":"2.0"},
                {"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}},
                {"jsonrpc":"2.0","error":{"code":-32600,"message":"no id"}},
                {"jsonrpc":"2.0","id":null,"result":{}}]"#,
        )
        .unwrap();
        assert_eq!(msgs.len(), 8);
        assert!(
            matches!(msgs[0].kind(), Message::Response(id, Ok(r)) if id.get() == "1" && r.get() == r#"{"a":1}"#)
        );
        assert!(
            matches!(msgs[1].kind(), Message::Response(_, Err(e)) if e.code == -32601 && e.message == "nope")
        );
        assert!(matches!(msgs[2].kind(), Message::Request(id, "ping") if id.get() == "9"));
        assert!(matches!(
            msgs[3].kind(),
            Message::Notification("notifications/progress")
        ));
        assert!(matches!(msgs[4].kind(), Message::Invalid));
        assert!(
            matches!(msgs[5].kind(), Message::ErrorWithoutId(e) if e.code == -32700 && e.message == "Parse error")
        );
        assert!(
            matches!(msgs[6].kind(), Message::ErrorWithoutId(e) if e.code == -32600 && e.message == "no id")
        );
        assert!(matches!(msgs[7].kind(), Message::Invalid));
    }

    #[test]
    fn rejects_what_is_not_json_rpc() {
        for text in ["not json", "42", "\"s\"", "{\"id\":", "[1,2]"] {
            assert_eq!(decode(text).err(), Some(NOT_JSON_RPC), "{text}");
        }
    }

    #[test]
    fn id_matching_accepts_numbers_and_digit_strings() {
        let raw = |s: &str| RawValue::from_string(s.to_string()).unwrap();
        assert!(id_matches(&raw("7"), 7));
        assert!(id_matches(&raw("\"7\""), 7));
        assert!(!id_matches(&raw("8"), 7));
        assert!(!id_matches(&raw("null"), 7));
    }

    /// A response that echoes its request's `method` is still the response; a message with a
    /// method and an id but neither `result` nor `error` is a request.
    #[test]
    fn a_result_or_an_error_makes_a_response_whatever_else_it_names() {
        let text = r#"[{"jsonrpc":"2.0","id":4,"method":"tools/call","result":{}},
            {"jsonrpc":"2.0","id":5,"method":"tools/call","error":{"code":1,"message":"m"}},
            {"jsonrpc":"2.0","id":6,"method":"ping"}]"#;
        let messages = decode(text).unwrap();
        assert!(matches!(messages[0].kind(), Message::Response(id, Ok(_)) if id.get() == "4"));
        assert!(matches!(messages[1].kind(), Message::Response(id, Err(_)) if id.get() == "5"));
        assert!(matches!(messages[2].kind(), Message::Request(id, "ping") if id.get() == "6"));
    }

    #[test]
    fn encodes_requests_notifications_and_answers() {
        assert_eq!(
            request(3, "tools/list", r#"{"cursor":"c"}"#),
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"c"}}"#
        );
        assert_eq!(
            notification("notifications/initialized", &serde_json::json!({})),
            br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}"#
        );
        assert_eq!(
            request_with_meta(4, "tools/list", "{}", r#"{"v":1}"#),
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"v":1}}}"#
        );
        assert_eq!(
            request_with_meta(5, "tools/call", r#"{"name":"a","arguments":{}}"#, "{}"),
            br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{},"name":"a","arguments":{}}}"#
        );
        let id = RawValue::from_string("\"abc\"".into()).unwrap();
        assert_eq!(
            answer_server_request(&id, "ping"),
            br#"{"jsonrpc":"2.0","id":"abc","result":{}}"#
        );
        assert_eq!(
            answer_server_request(&id, "sampling/createMessage"),
            br#"{"jsonrpc":"2.0","id":"abc","error":{"code":-32601,"message":"Method not found"}}"#
        );
    }
}
