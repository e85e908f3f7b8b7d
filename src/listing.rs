//! The JSON text `get_dynamic_tools` answers, in its three shapes (README "What the tools answer").
//!
//! - no arguments: `{"servers":[{"namespace","status","reason"?,"retryInSeconds"?,"signInUrl"?,
//!   "refusedStarts"?,"lasting"?,"notes"?,"description"?,"tools":[names]}]}`, servers sorted by
//!   namespace and tool names sorted, both in byte order; `description` is a ready server's one
//!   line ([`ToolList::one_line`]);
//! - `namespace`: `{"namespace","status","reason"?,"retryInSeconds"?,"signInUrl"?,
//!   "refusedStarts"?,"lasting"?,"notes"?,"protocolVersion"?,"instructions"?,
//!   "tools":[{"name","description","inputSchema"}],"omitted"?:[{"name","reason"}]}`;
//! - `namespace` + `toolName`: `{"namespace","name","description","inputSchema","outputSchema"?,
//!   "annotations"?}`;
//! - `namespace` + `toolNames`: `{"namespace","tools":[one tool, as above],"notFound":[{"name",
//!   "suggestions":[names],"reason"?}]}`;
//! - `query`: `{"query","matches":[{"namespace","name","description"}],"notSearched"?:[head],
//!   "hint"?}`, best first; each `description` the tool's first sentence
//!   ([`crate::search::one_line`]); `notSearched` names the servers not ready (with the head
//!   the listing gives them), `hint` is there when nothing matched.
//!
//! `retryInSeconds` (whole seconds, rounded up) is there when a failed start will be tried
//! again; a refused entry has none. `refusedStarts` (a count, at least 1) is there when the last
//! start failed because the connection was refused (nothing listens at the url): how many starts
//! in a row failed that way, so a Host can stop waiting for a server that is not running.
//! `lasting` (`true`, else absent) is there when the last start failed in a way that will not
//! pass until the config or the server changes (a 404 at the url, a 401 with no sign-in, a TLS
//! handshake with a plain-HTTP port; the reason says what to change): the start is still
//! retried, but a Host need not wait for it.
//! `notes` (an array of sentences) is there when the server's config entry is read differently
//! from how it is written: a placeholder sent as written, a timeout capped, a key not read.
//! `omitted` is there when a ready server's listing left tools out; `protocolVersion` while a
//! server is ready (the version its tools were listed in, which its requests carry: `2026-07-28`,
//! or the one `initialize` negotiated; a change of era shows with the re-listing that follows); `instructions` (scrubbed, at most 8 KiB) when a ready server's
//! `server/discover` or `initialize` gave them.
//! Schemas and annotations are written out as the server sent them, without the whitespace
//! between their tokens ([`crate::json::compact`]): strings, numbers and member order kept.

use serde::Serialize;
use serde_json::value::RawValue;

use std::borrow::Cow;

use crate::search::{Hit, one_line};
use crate::server::{Failing, Server, Status, Tool, ToolList, retry_in_seconds};

/// The fields a server's entry starts with in both listings: its namespace and its status.
#[derive(Serialize)]
struct Head<'a> {
    namespace: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(rename = "retryInSeconds", skip_serializing_if = "Option::is_none")]
    retry_in_seconds: Option<u64>,
    #[serde(rename = "signInUrl", skip_serializing_if = "Option::is_none")]
    sign_in_url: Option<&'a str>,
    #[serde(rename = "refusedStarts", skip_serializing_if = "Option::is_none")]
    refused_starts: Option<u32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    lasting: bool,
    /// The config entry's notes (`config::Settings::notes`).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    notes: &'a [String],
}

#[derive(Serialize)]
struct Summary<'a> {
    #[serde(flatten)]
    head: Head<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<Cow<'a, str>>,
    tools: Vec<&'a str>,
}

#[derive(Serialize)]
struct Detail<'a> {
    #[serde(flatten)]
    head: Head<'a>,
    #[serde(rename = "protocolVersion", skip_serializing_if = "Option::is_none")]
    protocol_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    tools: Vec<ToolEntry<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    omitted: Vec<OmittedEntry<'a>>,
}

#[derive(Serialize)]
struct OmittedEntry<'a> {
    name: &'a str,
    reason: &'a str,
}

#[derive(Serialize)]
struct ToolEntry<'a> {
    name: &'a str,
    description: &'a str,
    #[serde(rename = "inputSchema")]
    input_schema: &'a RawValue,
}

#[derive(Serialize)]
struct OneTool<'a> {
    namespace: &'a str,
    name: &'a str,
    description: &'a str,
    #[serde(rename = "inputSchema")]
    input_schema: &'a RawValue,
    #[serde(rename = "outputSchema", skip_serializing_if = "Option::is_none")]
    output_schema: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a RawValue>,
}

/// The entry's head for the server at `namespace` in `status`: the status name, its reason,
/// `retryInSeconds` and the sign-in link.
fn head<'a>(server: &'a Server, status: &'a Status) -> Head<'a> {
    let namespace = &*server.namespace;
    let (status, reason, retry_in_seconds, sign_in_url, failing) = match status {
        Status::Loading => ("loading", None, None, None, Failing::Passing),
        Status::Ready(_) => ("ready", None, None, None, Failing::Passing),
        Status::Error {
            reason,
            retry_at,
            failing,
        } => (
            "error",
            Some(&**reason),
            retry_in_seconds(*retry_at),
            None,
            *failing,
        ),
        Status::SignIn { reason, link } => (
            "error",
            Some(&**reason),
            None,
            Some(&**link),
            Failing::Passing,
        ),
    };
    Head {
        namespace,
        status,
        reason,
        retry_in_seconds,
        sign_in_url,
        refused_starts: match failing {
            Failing::Refused(n) => Some(n),
            Failing::Passing | Failing::Lasting => None,
        },
        lasting: failing == Failing::Lasting,
        notes: &server.notes,
    }
}

fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("the listing holds only strings and valid raw JSON")
}

/// Every server with its status and tool names. `servers` must be sorted by namespace.
pub(crate) fn all(servers: &[std::sync::Arc<Server>]) -> String {
    let statuses: Vec<Status> = servers.iter().map(|s| s.status()).collect();
    let summaries: Vec<Summary<'_>> = servers
        .iter()
        .zip(&statuses)
        .map(|(server, status)| {
            let (tools, description) = match status {
                Status::Ready(list) => (
                    list.tools.iter().map(|t| t.name.as_str()).collect(),
                    list.one_line(),
                ),
                _ => (Vec::new(), None),
            };
            Summary {
                head: head(server, status),
                description,
                tools,
            }
        })
        .collect();
    #[derive(Serialize)]
    struct All<'a> {
        servers: Vec<Summary<'a>>,
    }
    to_json(&All { servers: summaries })
}

/// One server's tools with their input schemas, and its `instructions` while it is ready.
pub(crate) fn one_server(server: &Server, status: &Status) -> String {
    // From the same snapshot as the tools: a re-listing since cannot mix two listings.
    let instructions = match status {
        Status::Ready(list) => list.instructions.as_deref(),
        _ => None,
    };
    let (tools, omitted) = match status {
        Status::Ready(list) => (
            list.tools
                .iter()
                .map(|t| ToolEntry {
                    name: &t.name,
                    description: &t.description,
                    input_schema: &t.input_schema,
                })
                .collect(),
            list.omitted
                .iter()
                .map(|o| OmittedEntry {
                    name: &o.name,
                    reason: &o.reason,
                })
                .collect(),
        ),
        _ => (Vec::new(), Vec::new()),
    };
    let protocol_version = match status {
        Status::Ready(list) => Some(list.protocol_version).filter(|v| !v.is_empty()),
        _ => None,
    };
    to_json(&Detail {
        head: head(server, status),
        protocol_version,
        instructions,
        tools,
        omitted,
    })
}

/// One tool, whole.
pub(crate) fn one_tool(namespace: &str, tool: &Tool) -> String {
    to_json(&one_tool_entry(namespace, tool))
}

fn one_tool_entry<'a>(namespace: &'a str, tool: &'a Tool) -> OneTool<'a> {
    OneTool {
        namespace,
        name: &tool.name,
        description: &tool.description,
        input_schema: &tool.input_schema,
        output_schema: tool.output_schema.as_deref(),
        annotations: tool.annotations.as_deref(),
    }
}

/// A search's answer: `query` as asked, the `hits` of [`crate::search::rank`] over `ready` (the
/// servers searched, in the order their indexes were given), the servers `not_searched` with
/// their status, and `hint` (said only when nothing matched).
pub(crate) fn search(
    query: &str,
    hits: &[Hit],
    ready: &[(&Server, &ToolList)],
    not_searched: &[(&Server, Status)],
    hint: &str,
) -> String {
    #[derive(Serialize)]
    struct Match<'a> {
        namespace: &'a str,
        name: &'a str,
        description: Cow<'a, str>,
    }
    #[derive(Serialize)]
    struct Found<'a> {
        query: &'a str,
        matches: Vec<Match<'a>>,
        #[serde(rename = "notSearched", skip_serializing_if = "Vec::is_empty")]
        not_searched: Vec<Head<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        hint: Option<&'a str>,
    }
    let matches: Vec<Match<'_>> = hits
        .iter()
        .map(|hit| {
            let (server, list) = ready[hit.server];
            let tool = &list.tools[hit.tool as usize];
            Match {
                namespace: &server.namespace,
                name: &tool.name,
                description: one_line(&tool.description),
            }
        })
        .collect();
    to_json(&Found {
        query,
        hint: matches.is_empty().then_some(hint),
        matches,
        not_searched: not_searched
            .iter()
            .map(|(server, status)| head(server, status))
            .collect(),
    })
}

/// A tool name a batch lookup did not find: the nearest names its server lists, and why it
/// is not there when the config hides it.
pub(crate) struct NotFound<'a> {
    pub(crate) name: &'a str,
    pub(crate) suggestions: Vec<&'a str>,
    pub(crate) reason: Option<String>,
}

/// A batch lookup's answer: each found tool whole (as [`one_tool`] gives it), then the names
/// not found.
pub(crate) fn tools(namespace: &str, found: &[&Tool], not_found: &[NotFound<'_>]) -> String {
    #[derive(Serialize)]
    struct Missing<'a> {
        name: &'a str,
        suggestions: &'a [&'a str],
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'a str>,
    }
    #[derive(Serialize)]
    struct Batch<'a> {
        namespace: &'a str,
        tools: Vec<OneTool<'a>>,
        #[serde(rename = "notFound")]
        not_found: Vec<Missing<'a>>,
    }
    to_json(&Batch {
        namespace,
        tools: found
            .iter()
            .map(|tool| one_tool_entry(namespace, tool))
            .collect(),
        not_found: not_found
            .iter()
            .map(|n| Missing {
                name: n.name,
                suggestions: &n.suggestions,
                reason: n.reason.as_deref(),
            })
            .collect(),
    })
}
