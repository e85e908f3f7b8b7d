//! Mapping a `CallToolResult` (MCP spec, "Tools": tool result) to the text a model reads
//! (README "What the tools answer").
//!
//! Blocks are mapped in order and joined with a blank line: text and embedded text resources
//! as their text; images, audio and binary resources as placeholders naming their MIME type;
//! resource links as `[resource: <uri>]`; unknown block types as `[<type> content omitted]`.
//! A result with no blocks gives its `structuredContent` JSON (compact: no whitespace between
//! tokens), and with neither
//! [`NO_CONTENT`]. `isError: true` makes the same text a backend error. The text is scrubbed of
//! the server entry's secrets, and each server string a placeholder quotes is scrubbed before
//! it is cut to 256 bytes.
//!
//! A tool with an `outputSchema` (MCP spec "Tools": output schema; clients SHOULD validate
//! structured results) has its `structuredContent` checked against it, unless the result is an
//! error. The tolerance: the check decides only when `structuredContent` is what the model
//! would read (a result without content blocks). A result with content blocks is read as its
//! blocks (a server sends the structured result's text copy there, as the spec asks), so a
//! mismatch there passes the text through and is logged at debug; without blocks, a mismatch,
//! or a missing `structuredContent`, is an [`OutputMismatch`] the caller turns into a `backend`
//! error.

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::redact::Redactor;
use crate::schema::{Checker, Problems};

/// The text of a successful result with no content blocks and no `structuredContent`.
pub(crate) const NO_CONTENT: &str = "[the tool returned no content]";

/// The longest server string (a MIME type, a URI, a block type) a placeholder quotes, in bytes.
const MAX_QUOTED_BYTES: usize = 256;

/// A `CallToolResult`, borrowed from the received text.
#[derive(Deserialize)]
struct CallToolResult<'a> {
    #[serde(borrow, default)]
    content: Vec<Block<'a>>,
    #[serde(rename = "structuredContent", borrow, default)]
    structured_content: Option<&'a RawValue>,
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
}

/// A JSON string borrowed from the received text when it holds no escapes. serde borrows a
/// `Cow<str>` only when it is a field itself: inside an `Option` it would always copy (a third
/// payload-sized buffer for a big text result, beside the received event and the mapped text).
#[derive(Deserialize)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

impl std::ops::Deref for Str<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// One content block; only the fields the mapping reads.
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Str<'a>>,
    #[serde(rename = "mimeType", borrow, default)]
    mime_type: Option<Str<'a>>,
    #[serde(borrow, default)]
    uri: Option<Str<'a>>,
    #[serde(borrow, default)]
    resource: Option<EmbeddedResource<'a>>,
}

/// The `resource` of an embedded resource block.
#[derive(Deserialize)]
struct EmbeddedResource<'a> {
    #[serde(borrow, default)]
    text: Option<Str<'a>>,
    #[serde(rename = "mimeType", borrow, default)]
    mime_type: Option<Str<'a>>,
    /// Only whether it is there matters: the data itself is skipped, not decoded.
    #[serde(default)]
    blob: Option<serde::de::IgnoredAny>,
}

/// A text result at least this long, in bytes, that is a slice of its reply is kept as that
/// slice rather than copied (see [`Text::Received`]).
const RECEIVED_MIN_BYTES: usize = 64 * 1024;

/// A mapped result: the text, whether the server marked it an error, and how the text failed
/// the tool's `outputSchema` when it did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Mapped {
    pub(crate) text: Text,
    pub(crate) is_error: bool,
    /// `None` when the result conforms, is an error, has content blocks, or the tool has no
    /// checked `outputSchema`.
    pub(crate) mismatch: Option<OutputMismatch>,
}

/// How a result without content blocks failed its tool's `outputSchema`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OutputMismatch {
    /// Its `structuredContent` does not match; each problem is rooted at `structuredContent`.
    Problems(Problems),
    /// It has no `structuredContent` at all.
    Missing,
}

/// Checks a successful result's `structuredContent` against `output` (see the module doc for
/// the tolerance). `has_blocks`: the result has content blocks, which the model reads instead.
fn check_output(
    output: &Checker,
    structured: Option<&RawValue>,
    has_blocks: bool,
    redactor: &Redactor,
) -> Option<OutputMismatch> {
    if !output.is_used() {
        return None;
    }
    let Some(raw) = structured else {
        return (!has_blocks).then_some(OutputMismatch::Missing);
    };
    // A value serde_json cannot build (nested deeper than its limit) is not checked.
    let value: serde_json::Value = serde_json::from_str(raw.get()).ok()?;
    let problems = output.check(&value, "structuredContent", redactor).err()?;
    if has_blocks {
        tracing::debug!(
            %problems,
            "structuredContent does not match the tool's outputSchema; its content blocks are passed through"
        );
        return None;
    }
    Some(OutputMismatch::Problems(problems))
}

/// The text of a mapped result.
#[derive(Debug)]
pub(crate) enum Text {
    /// Built by the mapping.
    Owned(String),
    /// A slice of the received reply, valid UTF-8: the one text block of a large result, which
    /// needed no unescaping and no scrubbing. Once the reply is dropped this slice is the only
    /// holder of the reply's buffer, and [`Text::into_string`] turns it into a `String` in
    /// place, so a multi-megabyte result is never held twice.
    Received(Bytes),
}

impl Text {
    /// The text as a `String`: a [`Text::Received`] slice takes over its buffer (moving the text
    /// to the buffer's start, then giving back the unused room) when nothing else holds it, and
    /// is copied otherwise.
    pub(crate) fn into_string(self) -> String {
        match self {
            Text::Owned(text) => text,
            Text::Received(bytes) => {
                let mut text = String::from_utf8(Vec::from(bytes))
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                text.shrink_to_fit();
                text
            }
        }
    }

    fn as_str(&self) -> &str {
        match self {
            Text::Owned(text) => text,
            Text::Received(bytes) => std::str::from_utf8(bytes).unwrap_or_default(),
        }
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text::Owned(text)
    }
}

/// Maps the raw `result` of a `tools/call` response. `source` is the buffer `result` lies in
/// (the reply's JSON body or SSE event data): a large result that is one text block, or one
/// embedded text resource, without escapes or secrets, is handed out as a slice of it.
///
/// `output` is the tool's compiled `outputSchema`.
///
/// # Errors
/// A result that is not a `CallToolResult` (a transport error's text).
pub(crate) fn map(
    result: &RawValue,
    source: &Bytes,
    redactor: &Redactor,
    output: &Checker,
) -> Result<Mapped, String> {
    const MALFORMED: &str = "the server's tools/call result is not a valid CallToolResult";
    if !result.get().starts_with('{') {
        return Err(MALFORMED.to_string());
    }
    let result: CallToolResult<'_> =
        serde_json::from_str(result.get()).map_err(|_| MALFORMED.to_string())?;
    let is_error = result.is_error == Some(true);
    let mismatch = if is_error {
        None
    } else {
        check_output(
            output,
            result.structured_content,
            !result.content.is_empty(),
            redactor,
        )
    };
    if result.content.is_empty() {
        // An error without any text is worded by the caller, which knows the server's name.
        let text = match result.structured_content {
            // Compact: blanks a reader left (a key named twice) are no text for a model.
            Some(raw) => redactor
                .scrub_json(&crate::json::compact(raw.get()))
                .into_owned(),
            None if is_error => String::new(),
            None => NO_CONTENT.to_string(),
        };
        return Ok(Mapped {
            text: text.into(),
            is_error,
            mismatch,
        });
    }
    if let [block] = result.content.as_slice()
        && let Some(text) = received(block, source, redactor)
    {
        return Ok(Mapped {
            text: Text::Received(text),
            is_error,
            mismatch,
        });
    }
    let mut text = String::new();
    for (i, block) in result.content.iter().enumerate() {
        if i > 0 {
            text.push_str("\n\n");
        }
        push_block(&mut text, block, redactor)?;
    }
    // The JSON rule, so a block holding JSON text stays JSON (the Pack's gate applies it too).
    let text = match redactor.scrub_json(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(scrubbed) => scrubbed,
    };
    Ok(Mapped {
        text: text.into(),
        is_error,
        mismatch,
    })
}

/// The text of a single `text` block (or embedded text resource) as a slice of `source`, when it
/// is at least [`RECEIVED_MIN_BYTES`] long and at least half of `source` (so the buffer it keeps
/// is mostly text), was borrowed from the received text (no escapes), lies in `source`, and
/// holds none of the entry's secrets — exactly what the mapping would have built.
fn received(block: &Block<'_>, source: &Bytes, redactor: &Redactor) -> Option<Bytes> {
    let text = match block.kind.as_ref() {
        "text" => block.text.as_ref()?,
        "resource" => block.resource.as_ref()?.text.as_ref()?,
        _ => return None,
    };
    let Cow::Borrowed(text) = text.0 else {
        return None;
    };
    if text.len() < RECEIVED_MIN_BYTES || text.len() < source.len() / 2 {
        return None;
    }
    let start = (text.as_ptr() as usize).checked_sub(source.as_ptr() as usize)?;
    if start.checked_add(text.len())? > source.len() {
        return None;
    }
    match redactor.scrub(text) {
        Cow::Borrowed(_) => Some(source.slice(start..start + text.len())),
        Cow::Owned(_) => None,
    }
}

fn push_block(out: &mut String, block: &Block<'_>, redactor: &Redactor) -> Result<(), String> {
    let sanitize = |text: &str| sanitize(text, redactor);
    let mime = |m: &Option<Str<'_>>, default: &'static str| -> String {
        m.as_deref().map_or(default.to_string(), sanitize)
    };
    match block.kind.as_ref() {
        "text" => out.push_str(
            block
                .text
                .as_deref()
                .ok_or_else(|| "the server sent a text block without text".to_string())?,
        ),
        "image" => out.push_str(&format!(
            "[image omitted: {}]",
            mime(&block.mime_type, "unknown")
        )),
        "audio" => out.push_str(&format!(
            "[audio omitted: {}]",
            mime(&block.mime_type, "unknown")
        )),
        "resource" => {
            let resource = block
                .resource
                .as_ref()
                .ok_or_else(|| "the server sent a resource block without a resource".to_string())?;
            match (&resource.text, resource.blob) {
                (Some(text), _) => out.push_str(text),
                (None, Some(_)) => out.push_str(&format!(
                    "[binary resource omitted: {}]",
                    mime(&resource.mime_type, "application/octet-stream")
                )),
                (None, None) => {
                    return Err(
                        "the server sent a resource block with neither text nor blob".to_string(),
                    );
                }
            }
        }
        "resource_link" => {
            let uri = block
                .uri
                .as_deref()
                .ok_or_else(|| "the server sent a resource_link block without a uri".to_string())?;
            out.push_str(&format!("[resource: {}]", sanitize(uri)));
        }
        other => out.push_str(&format!("[{} content omitted]", sanitize(other))),
    }
    Ok(())
}

/// A short server string inside a placeholder: scrubbed, then bounded, on one line.
fn sanitize(text: &str, redactor: &Redactor) -> String {
    crate::limits::truncate(&redactor.scrub(text), MAX_QUOTED_BYTES)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Maps `json` as it would arrive: a `result` inside the buffer it was read from.
    fn map_received(json: &str, redactor: &Redactor) -> Result<Mapped, String> {
        let source = Bytes::from(json.to_string());
        let raw: &RawValue = serde_json::from_slice(&source).unwrap();
        map(raw, &source, redactor, &UNCHECKED)
    }

    static UNCHECKED: Checker = Checker::absent();

    fn mapped(json: &str) -> Result<Mapped, String> {
        map_received(json, &Redactor::default())
    }

    /// A block's strings are borrowed from the received text unless they hold escapes, so a
    /// big text result is not copied before it is mapped.
    #[test]
    fn block_strings_borrow_from_the_received_text() {
        let json = r#"{"type":"resource","text":"plain","mimeType":"a\/b","uri":"u",
            "resource":{"text":"also plain","mimeType":"text/plain"}}"#;
        let block: Block<'_> = serde_json::from_str(json).unwrap();
        fn borrowed<'a>(s: &Option<Str<'a>>) -> Option<Result<&'a str, String>> {
            match s {
                Some(Str(Cow::Borrowed(text))) => Some(Ok(*text)),
                Some(Str(Cow::Owned(text))) => Some(Err(text.clone())),
                None => None,
            }
        }
        assert_eq!(borrowed(&block.text), Some(Ok("plain")));
        assert_eq!(borrowed(&block.mime_type), Some(Err("a/b".to_string())));
        assert_eq!(borrowed(&block.uri), Some(Ok("u")));
        let resource = block.resource.unwrap();
        assert_eq!(borrowed(&resource.text), Some(Ok("also plain")));
        assert_eq!(borrowed(&resource.mime_type), Some(Ok("text/plain")));
    }

    fn text(json: &str) -> String {
        let m = mapped(json).unwrap();
        assert!(!m.is_error);
        m.text.into_string()
    }

    #[test]
    fn every_row_of_the_mapping_table() {
        let cases = [
            (r#"{"content":[{"type":"text","text":"hello"}]}"#, "hello"),
            (
                r#"{"content":[{"type":"resource","resource":{"uri":"file:///a","mimeType":"text/plain","text":"inside"}}]}"#,
                "inside",
            ),
            (
                r#"{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}"#,
                "[image omitted: image/png]",
            ),
            (
                r#"{"content":[{"type":"audio","data":"AAAA","mimeType":"audio/wav"}]}"#,
                "[audio omitted: audio/wav]",
            ),
            (
                r#"{"content":[{"type":"resource","resource":{"uri":"file:///b","mimeType":"application/pdf","blob":"AAAA"}}]}"#,
                "[binary resource omitted: application/pdf]",
            ),
            (
                r#"{"content":[{"type":"resource","resource":{"uri":"file:///b","blob":"AAAA"}}]}"#,
                "[binary resource omitted: application/octet-stream]",
            ),
            (
                r#"{"content":[{"type":"resource_link","uri":"file:///c.txt","name":"c"}]}"#,
                "[resource: file:///c.txt]",
            ),
            (
                r#"{"content":[{"type":"hologram","data":1}]}"#,
                "[hologram content omitted]",
            ),
            (
                r#"{"content":[],"structuredContent":{"b":1,"a":[true,null]}}"#,
                r#"{"b":1,"a":[true,null]}"#,
            ),
            (r#"{"structuredContent":{"sum":5}}"#, r#"{"sum":5}"#),
            (
                r#"{"content":[{"type":"text","text":"wins"}],"structuredContent":{"sum":5}}"#,
                "wins",
            ),
            (r#"{"content":[]}"#, NO_CONTENT),
            (r#"{}"#, NO_CONTENT),
            (r#"{"content":[],"isError":false}"#, NO_CONTENT),
        ];
        for (json, expected) in cases {
            assert_eq!(text(json), expected, "{json}");
        }
    }

    #[test]
    fn blocks_join_with_a_blank_line_in_order() {
        assert_eq!(
            text(
                r#"{"content":[{"type":"text","text":"a"},{"type":"image","mimeType":"image/gif","data":""},{"type":"text","text":"b"}]}"#
            ),
            "a\n\n[image omitted: image/gif]\n\nb"
        );
    }

    /// A large single text block is handed out as a slice of the reply, which becomes the
    /// result's `String` in place once the reply is dropped; anything the mapping changes, or
    /// a small text, is built as before.
    #[test]
    fn a_large_plain_text_result_is_a_slice_of_the_reply() {
        let big = "x".repeat(RECEIVED_MIN_BYTES);
        let kind = |json: &str, redactor: &Redactor| {
            let m = map_received(json, redactor).unwrap();
            let received = matches!(m.text, Text::Received(_));
            (received, m.text.into_string())
        };
        let plain = Redactor::default();
        let one = format!(r#"{{"content":[{{"type":"text","text":"{big}"}}]}}"#);
        assert_eq!(kind(&one, &plain), (true, big.clone()));
        let resource = format!(
            r#"{{"content":[{{"type":"resource","resource":{{"uri":"a:b","text":"{big}"}}}}]}}"#
        );
        assert_eq!(kind(&resource, &plain), (true, big.clone()));
        // An escape makes serde build the string: that string is the text.
        let escaped = format!(r#"{{"content":[{{"type":"text","text":"{big}\n"}}]}}"#);
        assert_eq!(kind(&escaped, &plain), (false, format!("{big}\n")));
        // Two blocks, a small text, or a text that is less than half of its reply: built.
        let two = format!(
            r#"{{"content":[{{"type":"text","text":"{big}"}},{{"type":"text","text":"b"}}]}}"#
        );
        assert_eq!(kind(&two, &plain), (false, format!("{big}\n\nb")));
        assert_eq!(
            kind(r#"{"content":[{"type":"text","text":"small"}]}"#, &plain),
            (false, "small".to_string())
        );
        let padded = format!(
            r#"{{"content":[{{"type":"text","text":"{big}"}}],"_meta":{{"pad":"{big}{big}"}}}}"#
        );
        assert_eq!(kind(&padded, &plain), (false, big.clone()));
        // A secret in the text is scrubbed, so the text is built.
        let mut redactor = Redactor::default();
        redactor.add("sk-live-4f9a8b7c6d5e4f3a2b1c");
        let secret = format!(
            r#"{{"content":[{{"type":"text","text":"{big}sk-live-4f9a8b7c6d5e4f3a2b1c"}}]}}"#
        );
        assert_eq!(
            kind(&secret, &redactor),
            (false, format!("{big}[redacted]"))
        );
    }

    /// Once the reply is dropped, the slice takes over the reply's buffer: no second buffer.
    #[test]
    fn a_received_text_reuses_the_reply_buffer() {
        let big = "y".repeat(RECEIVED_MIN_BYTES);
        let source = Bytes::from(format!(
            r#"{{"content":[{{"type":"text","text":"{big}"}}]}}"#
        ));
        let base = source.as_ptr();
        let raw: &RawValue = serde_json::from_slice(&source).unwrap();
        let mapped = map(raw, &source, &Redactor::default(), &UNCHECKED).unwrap();
        drop(source);
        let Text::Received(slice) = mapped.text else {
            panic!("the text was copied");
        };
        let vec = Vec::from(slice);
        assert_eq!(vec.as_ptr(), base);
        assert_eq!(vec, big.as_bytes());
    }

    #[test]
    fn is_error_is_reported() {
        assert_eq!(
            mapped(r#"{"content":[{"type":"text","text":"boom"}],"isError":true}"#),
            Ok(Mapped {
                text: "boom".to_string().into(),
                is_error: true,
                mismatch: None,
            })
        );
    }

    #[test]
    fn malformed_results_are_errors() {
        for json in [
            r#"{"content":"x"}"#,
            r#"{"content":[{"type":"text"}]}"#,
            r#"{"content":[{"type":"resource"}]}"#,
            "[]",
            r#"{"content":[{"text":"no type"}]}"#,
        ] {
            assert!(mapped(json).is_err(), "{json}");
        }
    }

    #[test]
    fn an_empty_error_is_left_to_the_caller() {
        assert_eq!(
            mapped(r#"{"content":[],"isError":true}"#),
            Ok(Mapped {
                text: String::new().into(),
                is_error: true,
                mismatch: None,
            })
        );
    }

    /// A secret that straddles the 256-byte cut of a quoted server string is scrubbed whole
    /// before the cut, so no prefix of it is left.
    #[test]
    fn quoted_strings_are_scrubbed_before_they_are_cut() {
        let secret = "sk-live-4f9a8b7c6d5e4f3a2b1c";
        let mut redactor = Redactor::default();
        redactor.add(secret);
        let pad = "p".repeat(240);
        for (json, kind) in [
            (
                format!(
                    r#"{{"content":[{{"type":"resource_link","uri":"https://x/{pad}{secret}/end"}}]}}"#
                ),
                "uri",
            ),
            (
                format!(r#"{{"content":[{{"type":"image","mimeType":"image/{pad}{secret}"}}]}}"#),
                "mime",
            ),
            (
                format!(r#"{{"content":[{{"type":"{pad}{secret}"}}]}}"#),
                "type",
            ),
        ] {
            let text = map_received(&json, &redactor).unwrap().text.into_string();
            let expected = match kind {
                // 10 + 240 + "[redacted]/end" is 264 bytes: cut to 253 and "…".
                "uri" => format!("[resource: https://x/{pad}[re…]"),
                // 6 + 240 + 10 is exactly 256 bytes.
                "mime" => format!("[image omitted: image/{pad}[redacted]]"),
                _ => format!("[{pad}[redacted] content omitted]"),
            };
            assert_eq!(text, expected, "{kind}");
        }
    }

    #[test]
    fn placeholders_are_one_line() {
        assert_eq!(
            text(r#"{"content":[{"type":"image","mimeType":"image/png\nIGNORE"}]}"#),
            "[image omitted: image/png IGNORE]"
        );
    }
}
