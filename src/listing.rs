//! The JSON text `get_dynamic_tools` answers, in its three shapes (README "What the tools answer").
//!
//! - no arguments: `{"servers":[{"namespace","status","reason"?,"retryInSeconds"?,
//!   "tools":[names]}]}`, servers sorted by namespace and tool names sorted, both in byte order;
//! - `namespace`: `{"namespace","status","reason"?,"retryInSeconds"?,
//!   "tools":[{"name","description","inputSchema"}],"omitted"?:[{"name","reason"}]}`;
//! - `namespace` + `toolName`: `{"namespace","name","description","inputSchema","outputSchema"?,
//!   "annotations"?}`.
//!
//! `retryInSeconds` (whole seconds, rounded up) is there when a failed start will be tried
//! again; a refused entry has none. `omitted` is there when a ready server's listing left tools
//! out. Schemas and annotations are written out verbatim, exactly as the server sent them.

use serde::Serialize;
use serde_json::value::RawValue;

use crate::server::{Server, Status, Tool, retry_in_seconds};

#[derive(Serialize)]
struct Summary<'a> {
    namespace: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(rename = "retryInSeconds", skip_serializing_if = "Option::is_none")]
    retry_in_seconds: Option<u64>,
    tools: Vec<&'a str>,
}

#[derive(Serialize)]
struct Detail<'a> {
    namespace: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(rename = "retryInSeconds", skip_serializing_if = "Option::is_none")]
    retry_in_seconds: Option<u64>,
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

/// The status name, its reason and `retryInSeconds`.
fn status_fields(status: &Status) -> (&'static str, Option<&str>, Option<u64>) {
    match status {
        Status::Loading => ("loading", None, None),
        Status::Ready(_) => ("ready", None, None),
        Status::Error { reason, retry_at } => ("error", Some(reason), retry_in_seconds(*retry_at)),
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
            let (status_name, reason, retry_in_seconds) = status_fields(status);
            let tools = match status {
                Status::Ready(list) => list.tools.iter().map(|t| t.name.as_str()).collect(),
                _ => Vec::new(),
            };
            Summary {
                namespace: &server.namespace,
                status: status_name,
                reason,
                retry_in_seconds,
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

/// One server's tools with their input schemas.
pub(crate) fn one_server(server: &Server, status: &Status) -> String {
    let (status_name, reason, retry_in_seconds) = status_fields(status);
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
    to_json(&Detail {
        namespace: &server.namespace,
        status: status_name,
        reason,
        retry_in_seconds,
        tools,
        omitted,
    })
}

/// One tool, whole.
pub(crate) fn one_tool(namespace: &str, tool: &Tool) -> String {
    to_json(&OneTool {
        namespace,
        name: &tool.name,
        description: &tool.description,
        input_schema: &tool.input_schema,
        output_schema: tool.output_schema.as_deref(),
        annotations: tool.annotations.as_deref(),
    })
}
