//! JSON-RPC 2.0 messages as MCP carries them: what the Pack sends and how it reads what a server
//! sends (a single object or, under MCP 2025-03-26, a batch array).
//!
//! Decoding borrows from the received text; params and results stay raw JSON until the caller
//! decodes them into the shape it expects.

use serde::Deserialize;
use serde_json::value::RawValue;

/// One message from a server, as much as routing needs. Decoding is lenient in the members a
/// server may shape oddly, so that a response to a request is still found by its `id` when the
/// rest of it is malformed: a `method` that is not a string names no method, an `error` that is
/// no JSON-RPC error object is kept as [`ErrorMember::Malformed`], and `"result": null` is a
/// result (JSON-RPC 2.0 §5: any value).
#[derive(Deserialize)]
pub(crate) struct Incoming<'a> {
    /// The `jsonrpc` member, undecoded: `"2.0"` tags a JSON-RPC message.
    #[serde(borrow, default)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "method_member")]
    pub(crate) method: Option<std::borrow::Cow<'a, str>>,
    /// A request's or notification's `params`, undecoded.
    #[serde(borrow, default)]
    pub(crate) params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "result_member")]
    pub(crate) result: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "error_member")]
    pub(crate) error: Option<ErrorMember>,
}

/// A message's `error` member (JSON-RPC 2.0 §5.1).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ErrorMember {
    /// A JSON-RPC error object.
    Object(RpcError),
    /// Anything else but `null`: an object without an integer `code`, a string, a number, …
    Malformed,
}

/// A `method` member: the string, or `None` for `null` or any value that is not a string.
fn method_member<'de: 'a, 'a, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<std::borrow::Cow<'a, str>>, D::Error> {
    let raw: &'de RawValue = Deserialize::deserialize(deserializer)?;
    Ok(match serde_json::from_str::<&'a str>(raw.get()) {
        Ok(method) => Some(std::borrow::Cow::Borrowed(method)),
        // An escaped string cannot be borrowed.
        Err(_) => serde_json::from_str::<String>(raw.get())
            .ok()
            .map(std::borrow::Cow::Owned),
    })
}

/// A `result` member, `null` included: present, it is the result.
fn result_member<'de: 'a, 'a, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'a RawValue>, D::Error> {
    <&'de RawValue>::deserialize(deserializer).map(Some)
}

/// An `error` member: `None` for `null` (servers that write `"error": null` beside a result).
fn error_member<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ErrorMember>, D::Error> {
    let raw: &'de RawValue = Deserialize::deserialize(deserializer)?;
    if raw.get() == "null" {
        return Ok(None);
    }
    Ok(Some(match serde_json::from_str::<RpcError>(raw.get()) {
        Ok(error) => ErrorMember::Object(error),
        Err(_) => ErrorMember::Malformed,
    }))
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

/// The request a reply is read for: its JSON-RPC id and method. Request ids start at 1, so
/// [`Awaited::NOTHING`] (id 0) is awaited by no request (the standalone stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Awaited<'m> {
    pub(crate) id: u64,
    pub(crate) method: &'m str,
}

impl Awaited<'static> {
    /// What a stream no request opened awaits: nothing.
    pub(crate) const NOTHING: Self = Self { id: 0, method: "" };
}

/// What an incoming JSON-RPC 2.0 message is (request, notification, response).
pub(crate) enum Message<'m, 'a> {
    /// An answer to a request with the given id.
    Response(&'a RawValue, Result<&'a RawValue, &'m RpcError>),
    /// A request the server makes of the client.
    Request(&'a RawValue, &'m str),
    /// A notification from the server.
    Notification(&'m str),
    /// A response of no valid shape, to the given id (`None`: `null` or missing, so to the one
    /// request a POST carries, as [`Message::ErrorWithoutId`]): an answer, but a malformed one.
    Malformed(Option<&'a RawValue>, Flaw),
    /// An error response whose `id` is `null` or missing: the server could not read the request
    /// far enough to know its id (JSON-RPC 2.0 §5).
    ErrorWithoutId(&'m RpcError),
    /// Not a JSON-RPC message.
    Invalid,
}

/// What makes a response malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flaw {
    /// Neither `result` nor `error` (JSON-RPC 2.0 §5 requires exactly one).
    Hollow,
    /// An `error` that is no JSON-RPC error object (§5.1: an object with an integer `code`).
    ErrorShape,
    /// A `result` with no id, or a `null` one (§5: a response carries its request's id; only
    /// an error may have a `null` id).
    NoId,
}

impl<'a> Incoming<'a> {
    /// Classifies the message, read while `awaited` is (the one place that does). A message
    /// with an id and a `result` or `error` is a response, even when it also names a `method`
    /// (some servers echo the request's): a request never carries either (JSON-RPC 2.0 §4,
    /// §5). So is a message with the awaited request's own id and own method and neither: a
    /// response that echoes its request and answers nothing (a server's request would not
    /// name the method the client just sent it). An `error` of the wrong shape makes the
    /// response [`Message::Malformed`], also without an id.
    pub(crate) fn kind(&self, awaited: Awaited<'_>) -> Message<'_, 'a> {
        let answer = match (&self.result, &self.error) {
            (_, Some(error)) => Some(Err(error)),
            (Some(result), None) => Some(Ok(*result)),
            (None, None) => None,
        };
        let echoes =
            |id: &RawValue, method: &str| method == awaited.method && id_matches(id, awaited.id);
        match (&self.method, self.id, answer) {
            (_, Some(id), Some(Ok(result))) => Message::Response(id, Ok(result)),
            (_, Some(id), Some(Err(ErrorMember::Object(error)))) => {
                Message::Response(id, Err(error))
            }
            (_, Some(id), Some(Err(ErrorMember::Malformed))) => {
                Message::Malformed(Some(id), Flaw::ErrorShape)
            }
            (Some(method), Some(id), None) if echoes(id, method) => {
                Message::Malformed(Some(id), Flaw::Hollow)
            }
            (Some(method), Some(id), None) => Message::Request(id, method),
            (Some(method), None, _) => Message::Notification(method),
            (None, Some(id), None) => Message::Malformed(Some(id), Flaw::Hollow),
            (None, None, Some(Err(ErrorMember::Object(error)))) => Message::ErrorWithoutId(error),
            (None, None, Some(Err(ErrorMember::Malformed))) => {
                Message::Malformed(None, Flaw::ErrorShape)
            }
            // Tagged JSON-RPC with a `result` but no id: a response that lost its id, read as
            // the awaited request's, which it can only be on that request's own reply (nothing
            // else awaits there). Without a `result` it may be a notification whose `method`
            // is not a string: no message.
            (None, None, Some(Ok(_))) if self.is_tagged() => Message::Malformed(None, Flaw::NoId),
            (None, None, _) => Message::Invalid,
        }
    }

    /// Whether the message says it is JSON-RPC 2.0 (`"jsonrpc": "2.0"`).
    fn is_tagged(&self) -> bool {
        self.jsonrpc.is_some_and(|v| v.get() == r#""2.0""#)
    }

    /// The message's error, when it is a JSON-RPC error object.
    pub(crate) fn rpc_error(&self) -> Option<&RpcError> {
        match &self.error {
            Some(ErrorMember::Object(error)) => Some(error),
            _ => None,
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

/// Whether the raw JSON id `raw` is the request id `id` (JSON-RPC 2.0 §5: the same value): the
/// number as the client wrote it, in decimal digits without a sign or a leading zero; a server
/// that echoes it as a string of exactly those digits is accepted too (`"7"`, never `"+7"` or
/// `"007"`).
pub(crate) fn id_matches(raw: &RawValue, id: u64) -> bool {
    let text = raw.get();
    let text = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text);
    // As many characters as the id's decimal digits: no sign, no leading zero, no space.
    let digits = id.checked_ilog10().map_or(1, |log| log as usize + 1);
    text.len() == digits && text.parse::<u64>() == Ok(id)
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
            matches!(msgs[0].kind(Awaited::NOTHING), Message::Response(id, Ok(r)) if id.get() == "1" && r.get() == r#"{"a":1}"#)
        );
        assert!(
            matches!(msgs[1].kind(Awaited::NOTHING), Message::Response(_, Err(e)) if e.code == -32601 && e.message == "nope")
        );
        assert!(
            matches!(msgs[2].kind(Awaited::NOTHING), Message::Request(id, "ping") if id.get() == "9")
        );
        assert!(matches!(
            msgs[3].kind(Awaited::NOTHING),
            Message::Notification("notifications/progress")
        ));
        assert!(matches!(msgs[4].kind(Awaited::NOTHING), Message::Invalid));
        assert!(
            matches!(msgs[5].kind(Awaited::NOTHING), Message::ErrorWithoutId(e) if e.code == -32700 && e.message == "Parse error")
        );
        assert!(
            matches!(msgs[6].kind(Awaited::NOTHING), Message::ErrorWithoutId(e) if e.code == -32600 && e.message == "no id")
        );
        assert!(matches!(
            msgs[7].kind(Awaited::NOTHING),
            Message::Malformed(None, Flaw::NoId)
        ));
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
        for other in ["\"+7\"", "\"007\"", "\" 7\"", "\"\"", "7.0"] {
            assert!(!id_matches(&raw(other), 7), "{other}");
        }
        assert!(id_matches(&raw("0"), 0));
        assert!(id_matches(&raw("\"0\""), 0));
    }

    /// A response that echoes its request's `method` is still the response; a message with a
    /// method and an id but neither `result` nor `error` is a request (unless it echoes the
    /// awaited request's own id and method, below).
    #[test]
    fn a_result_or_an_error_makes_a_response_whatever_else_it_names() {
        let text = r#"[{"jsonrpc":"2.0","id":4,"method":"tools/call","result":{}},
            {"jsonrpc":"2.0","id":5,"method":"tools/call","error":{"code":1,"message":"m"}},
            {"jsonrpc":"2.0","id":6,"method":"ping"}]"#;
        let messages = decode(text).unwrap();
        assert!(
            matches!(messages[0].kind(Awaited::NOTHING), Message::Response(id, Ok(_)) if id.get() == "4")
        );
        assert!(
            matches!(messages[1].kind(Awaited::NOTHING), Message::Response(id, Err(_)) if id.get() == "5")
        );
        assert!(
            matches!(messages[2].kind(Awaited::NOTHING), Message::Request(id, "ping") if id.get() == "6")
        );
    }

    /// A response is found by its id however malformed the rest: an `error` that is no
    /// JSON-RPC error object, a `method` that is not a string, or an echo of the awaited
    /// request's own id and method with neither `result` nor `error`. `"result": null` is a
    /// result, `"error": null` no error.
    #[test]
    fn a_response_of_no_valid_shape_is_malformed_and_a_null_result_is_a_result() {
        let text = r#"[{"jsonrpc":"2.0","id":4,"error":{"message":"no code"}},
            {"jsonrpc":"2.0","id":4,"error":{"code":"-32000","message":"string code"}},
            {"jsonrpc":"2.0","id":4,"error":"a string"},
            {"jsonrpc":"2.0","error":7},
            {"jsonrpc":"2.0","id":4,"method":5},
            {"jsonrpc":"2.0","id":4,"method":"tools/call"},
            {"jsonrpc":"2.0","id":5,"method":"tools/call"},
            {"jsonrpc":"2.0","id":4,"method":"ping"},
            {"jsonrpc":"2.0","id":4,"result":null},
            {"jsonrpc":"2.0","id":4,"result":{},"error":null},
            {"jsonrpc":"2.0","id":4,"result":null,"error":{"code":1,"message":"m"}},
            {"jsonrpc":"2.0","id":4,"method":"tools\/call"}]"#;
        let messages = decode(text).unwrap();
        let awaited = Awaited {
            id: 4,
            method: "tools/call",
        };
        let kinds: Vec<_> = messages.iter().map(|m| m.kind(awaited)).collect();
        for (at, flaw) in [
            (0, Flaw::ErrorShape),
            (1, Flaw::ErrorShape),
            (2, Flaw::ErrorShape),
            (4, Flaw::Hollow),
            (5, Flaw::Hollow),
            (11, Flaw::Hollow),
        ] {
            assert!(
                matches!(kinds[at], Message::Malformed(Some(id), f) if id.get() == "4" && f == flaw),
                "message {at}"
            );
        }
        assert!(matches!(
            kinds[3],
            Message::Malformed(None, Flaw::ErrorShape)
        ));
        assert!(matches!(kinds[6], Message::Request(id, "tools/call") if id.get() == "5"));
        assert!(matches!(kinds[7], Message::Request(id, "ping") if id.get() == "4"));
        assert!(matches!(kinds[8], Message::Response(_, Ok(r)) if r.get() == "null"));
        assert!(matches!(kinds[9], Message::Response(_, Ok(r)) if r.get() == "{}"));
        assert!(matches!(kinds[10], Message::Response(_, Err(e)) if e.code == 1));
        // Awaited by nothing, the echo is a request.
        assert!(matches!(
            messages[5].kind(Awaited::NOTHING),
            Message::Request(_, "tools/call")
        ));
        assert_eq!(messages[0].rpc_error(), None);
        assert_eq!(messages[10].rpc_error().map(|e| e.code), Some(1));
    }

    /// A tagged response with a `result` but no id (or a `null` one) is malformed, so that the
    /// request whose reply carries it ends at once; a tagged message holding nothing, or a
    /// notification whose `method` is no string, and untagged JSON are no message at all.
    #[test]
    fn a_tagged_response_without_an_id_is_malformed_and_untagged_json_is_invalid() {
        let text = r#"[{"jsonrpc":"2.0","id":null,"result":{}},
            {"jsonrpc":"2.0","result":{"content":[]}},
            {"jsonrpc":"2.0","id":null},
            {"jsonrpc":"2.0"},
            {"jsonrpc":"2.0","method":{"x":1},"params":{}},
            {"result":{}},
            {"type":"heartbeat"},
            {"jsonrpc":"1.0","result":{}}]"#;
        let messages = decode(text).unwrap();
        let kinds: Vec<_> = messages.iter().map(|m| m.kind(Awaited::NOTHING)).collect();
        assert!(matches!(kinds[0], Message::Malformed(None, Flaw::NoId)));
        assert!(matches!(kinds[1], Message::Malformed(None, Flaw::NoId)));
        for (at, kind) in kinds.iter().enumerate().skip(2) {
            assert!(matches!(kind, Message::Invalid), "message {at}");
        }
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
