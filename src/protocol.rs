//! The protocol's constants both sides of the stack name: the MCP versions the client offers
//! and accepts in each era, and the Streamable HTTP header names and values (MCP 2025-11-25 and
//! 2026-07-28, basic/transports "Streamable HTTP"). A leaf: the HTTP client and the OAuth
//! requests import it.

use http::{HeaderName, HeaderValue};

/// The modern protocol version (MCP 2026-07-28, basic/versioning): stateless, declared in each
/// request's `_meta` and its `MCP-Protocol-Version` header. The client tries it first.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";

/// The protocol version the client offers in `initialize` (the legacy era).
pub(crate) const OFFERED_VERSION: &str = "2025-11-25";

/// The protocol versions the client accepts in a server's `initialize` answer. A server on
/// `2024-11-05` that speaks Streamable HTTP is spoken to like one on `2025-03-26` (as the
/// official TypeScript and Python clients do); its version is still the one the
/// `MCP-Protocol-Version` header carries.
pub(crate) const SUPPORTED_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Every version this client speaks, newest first, as a reason lists them.
pub(crate) fn versions_offered() -> String {
    std::iter::once(MODERN_VERSION)
        .chain(SUPPORTED_VERSIONS)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The session header (MCP 2025-11-25, transports: "Session Management").
pub(crate) const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

/// The protocol version header every request after `initialize` carries (MCP 2025-11-25,
/// transports: "Protocol Version Header").
pub(crate) const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

/// The header a resumed SSE stream names its last event with (MCP 2025-11-25, transports:
/// "Resumability and Redelivery"; WHATWG HTML "Server-sent events").
pub(crate) const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// The `Accept` of a POST: a JSON body or an SSE stream (MCP 2025-11-25, transports: "Sending
/// Messages to the Server").
pub(crate) const ACCEPT_BOTH: HeaderValue =
    HeaderValue::from_static("application/json, text/event-stream");

/// The `Accept` of a `GET` stream.
pub(crate) const ACCEPT_SSE: HeaderValue = HeaderValue::from_static("text/event-stream");

/// The `Content-Type` of a POST body.
pub(crate) const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// The method header every modern POST carries (MCP 2026-07-28, transports: "Standard Request
/// Headers").
pub(crate) const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");

/// The name header of a modern `tools/call` (MCP 2026-07-28, transports: "Standard Request
/// Headers"): the tool's name, Base64-wrapped when it is not a safe header value.
pub(crate) const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// How the header of a tool parameter marked `x-mcp-header` starts (MCP 2026-07-28,
/// transports: "Custom Headers from Tool Parameters").
pub(crate) const MCP_PARAM_PREFIX: &str = "mcp-param-";

/// Every JSON-RPC error code the crate reads or writes, in one place: JSON-RPC 2.0's own
/// (JSON-RPC 2.0 §5.1 "Error object") and the modern ones (MCP 2026-07-28, schema: "Errors"),
/// whose answer identifies a modern server (basic/versioning "Backward Compatibility"). What an
/// error answering a request means is decided from these by `http::judge` alone.
pub(crate) mod codes {
    /// `HeaderMismatch` (MCP 2026-07-28, transports "Client Behavior"): the HTTP headers do
    /// not match the body.
    pub(crate) const HEADER_MISMATCH: i64 = -32020;
    /// `MissingRequiredClientCapability` (MCP 2026-07-28, schema: "Errors"): the request needs
    /// a client capability not declared.
    pub(crate) const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// `UnsupportedProtocolVersion` (MCP 2026-07-28, basic/versioning): `data.supported` lists
    /// the versions the server speaks.
    pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// JSON-RPC 2.0's "Method not found" (§5.1): the method does not exist or is not offered.
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    /// JSON-RPC 2.0's "Invalid params" (§5.1), which MCP servers answer a `tools/call` with
    /// when its arguments do not fit (MCP 2025-11-25, server/tools "Error Handling").
    pub(crate) const INVALID_PARAMS: i64 = -32602;

    /// Whether `code` is one of the errors only a modern server sends.
    pub(crate) fn is_modern(code: i64) -> bool {
        matches!(
            code,
            HEADER_MISMATCH | MISSING_REQUIRED_CLIENT_CAPABILITY | UNSUPPORTED_PROTOCOL_VERSION
        )
    }
}
