//! The protocol's constants both sides of the stack name: the MCP versions the client offers
//! and accepts, and the Streamable HTTP header names and values (MCP 2025-11-25, basic/
//! transports "Streamable HTTP"). A leaf: the HTTP client and the OAuth requests import it.

use http::{HeaderName, HeaderValue};

/// The protocol version the client offers in `initialize`.
pub(crate) const OFFERED_VERSION: &str = "2025-11-25";

/// The protocol versions the client accepts in a server's `initialize` answer. A server on
/// `2024-11-05` that speaks Streamable HTTP is spoken to like one on `2025-03-26` (as the
/// official TypeScript and Python clients do); its version is still the one the
/// `MCP-Protocol-Version` header carries.
pub(crate) const SUPPORTED_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

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
