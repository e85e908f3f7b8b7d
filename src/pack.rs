//! The Pack: construction, the two model-facing tools, their argument rules and errors
//! (DESIGN §2, §6; seed 001).
//!
//! `construct` parses the config, reads the Host runtime and spawns one task per remote entry;
//! it does no I/O. `get_dynamic_tools` renders the registry ([`crate::listing`]);
//! `call_dynamic_tool` sends `tools/call` with a five-minute deadline and maps the result
//! ([`crate::result`]). Dropping a call's future sends `notifications/cancelled`; dropping the
//! Pack stops every task and call. A tool name that a ready server does not list re-lists that
//! server once before the answer is `not_found` ([`crate::server::Server::relist_after_miss`]).

use std::sync::Arc;

use runvil_plugin::{
    BoxFuture, Pack, Services, TOKIO_RUNTIME, ToolError, ToolErrorKind, ToolSpec, Unavailable,
    Value,
};
use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;

use crate::config::{self, Entry, ProcessEnvironment, json_type};
use crate::http::{Clients, Connection, Error};
use crate::limits::{CALL_DEADLINE, truncate};
use crate::server::{Server, Status};
use crate::{listing, result};

const GET: &str = "get_dynamic_tools";
const CALL: &str = "call_dynamic_tool";

/// The Pack's [`runvil_plugin::Construct`] function.
pub(crate) fn construct(
    id: &str,
    config: &Value,
    services: &Services,
) -> Result<Box<dyn Pack>, Unavailable> {
    let runtime = services.get(&TOKIO_RUNTIME).cloned().ok_or_else(|| {
        Unavailable::new(
            "the Host provides no Tokio runtime (the TOKIO_RUNTIME service); the mcp Pack runs its connections there",
        )
    })?;
    let entries = config::parse(config, &ProcessEnvironment).map_err(Unavailable::new)?;
    let shutdown = CancellationToken::new();
    let clients = Arc::new(Clients::default());
    let mut servers = Vec::with_capacity(entries.len());
    for (namespace, entry) in entries {
        let namespace: Arc<str> = namespace.into();
        let server = match entry {
            Entry::Refused(reason) => Arc::new(Server::refused(namespace, reason)),
            Entry::Remote(remote) => {
                let connection = Arc::new(Connection::new(
                    Arc::clone(&namespace),
                    remote,
                    Arc::clone(&clients),
                    runtime.clone(),
                ));
                let server = Arc::new(Server::remote(namespace, Arc::clone(&connection)));
                runtime.spawn(Arc::clone(&server).run(connection, shutdown.clone()));
                server
            }
        };
        servers.push(server);
    }
    servers.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    Ok(Box::new(McpPack {
        id: id.to_string(),
        servers: Arc::new(servers),
        shutdown,
    }))
}

/// The running Pack. Dropping it cancels every server task and in-flight call.
struct McpPack {
    id: String,
    /// Sorted by namespace.
    servers: Arc<Vec<Arc<Server>>>,
    shutdown: CancellationToken,
}

impl Drop for McpPack {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Pack for McpPack {
    fn tools(&self) -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: format!("{}/{GET}", self.id),
                description: "Lists the MCP servers behind this Pack and their tools, as JSON text. \
                    With no arguments: every server's namespace, status (ready, loading, or error with a reason) \
                    and tool names. With namespace: that server's tools with descriptions and input schemas. \
                    With namespace and toolName: one tool in full."
                    .to_string(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "namespace": {"type": "string", "description": "A server's namespace, exactly as listed."},
                        "toolName": {"type": "string", "description": "A tool's name, exactly as its server lists it; needs namespace."}
                    },
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                name: format!("{}/{CALL}", self.id),
                description: "Calls one tool of one MCP server and returns its result as text. \
                    Look the tool and its input schema up with get_dynamic_tools first."
                    .to_string(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "namespace": {"type": "string", "description": "The server's namespace, exactly as listed."},
                        "toolName": {"type": "string", "description": "The tool's name, exactly as its server lists it."},
                        "arguments": {"type": "object", "description": "The tool's arguments, matching its input schema. Defaults to {}."}
                    },
                    "required": ["namespace", "toolName"],
                    "additionalProperties": false
                }),
            },
        ]
    }

    fn ready(&self) -> BoxFuture<()> {
        Box::pin(async {})
    }

    fn call(&self, tool: &str, args: Value) -> BoxFuture<Result<String, ToolError>> {
        let short = tool
            .strip_prefix(self.id.as_str())
            .and_then(|rest| rest.strip_prefix('/'));
        let servers = Arc::clone(&self.servers);
        let shutdown = self.shutdown.clone();
        match short {
            Some(GET) => {
                Box::pin(async move { get_dynamic_tools(&servers, &args, &shutdown).await })
            }
            Some(CALL) => Box::pin(async move {
                let call = prepare_call(&servers, &args, &shutdown).await?;
                call.run(shutdown).await
            }),
            _ => {
                let message = format!(
                    "unknown tool {}; this Pack offers {id}/{GET} and {id}/{CALL}",
                    quoted(tool),
                    id = self.id
                );
                Box::pin(async move { Err(ToolError::new(ToolErrorKind::NotFound, message)) })
            }
        }
    }
}

/// `get_dynamic_tools`. Without a miss it answers without awaiting anything.
async fn get_dynamic_tools(
    servers: &[Arc<Server>],
    args: &Value,
    shutdown: &CancellationToken,
) -> Result<String, ToolError> {
    let args = arguments(args, &["namespace", "toolName"])?;
    let namespace = string_arg(args, "namespace")?;
    let tool_name = string_arg(args, "toolName")?;
    match (namespace, tool_name) {
        (None, None) => Ok(listing::all(servers)),
        (None, Some(_)) => Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "toolName needs a namespace, e.g. {{\"namespace\":{},\"toolName\":\"search\"}}",
                quoted(servers.first().map_or("docs", |s| &s.namespace))
            ),
        )),
        (Some(namespace), None) => {
            let server = server(servers, namespace)?;
            Ok(listing::one_server(server, &server.status()))
        }
        (Some(namespace), Some(tool_name)) => {
            let server = server(servers, namespace)?;
            let (tools, i) = lookup(server, tool_name, shutdown).await?;
            Ok(listing::one_tool(&server.namespace, &tools[i]))
        }
    }
}

/// Checks a `call_dynamic_tool`'s arguments and finds its server and tool.
async fn prepare_call(
    servers: &[Arc<Server>],
    args: &Value,
    shutdown: &CancellationToken,
) -> Result<PreparedCall, ToolError> {
    let args = arguments(args, &["namespace", "toolName", "arguments"])?;
    let example = servers.first().map_or("docs", |s| &s.namespace);
    let namespace = string_arg(args, "namespace")?.ok_or_else(|| missing("namespace", example))?;
    let tool_name = string_arg(args, "toolName")?.ok_or_else(|| missing("toolName", example))?;
    let tool_args = match args.get("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(map)) => Value::Object(map.clone()),
        Some(other) => {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!(
                    "\"arguments\" must be an object, found {}",
                    json_type(other)
                ),
            ));
        }
    };
    let server = server(servers, namespace)?;
    lookup(server, tool_name, shutdown).await?;
    // Only remote entries become ready, and each has a connection.
    let connection = server.connection.clone().ok_or_else(|| {
        ToolError::new(
            ToolErrorKind::Unavailable,
            format!("server {} has no connection", quoted(&server.namespace)),
        )
    })?;
    Ok(PreparedCall {
        connection,
        namespace: Arc::clone(&server.namespace),
        params: json!({"name": tool_name, "arguments": tool_args}),
    })
}

fn server<'s>(servers: &'s [Arc<Server>], namespace: &str) -> Result<&'s Server, ToolError> {
    match servers.binary_search_by(|s| s.namespace.as_ref().cmp(namespace)) {
        Ok(i) => Ok(&servers[i]),
        Err(_) => {
            let known: Vec<String> = servers.iter().map(|s| s.namespace.to_string()).collect();
            let known = if known.is_empty() {
                "none (no servers are configured)".to_string()
            } else {
                known.join(", ")
            };
            Err(ToolError::new(
                ToolErrorKind::NotFound,
                format!(
                    "unknown namespace {}; known namespaces: {known}",
                    quoted(namespace)
                ),
            ))
        }
    }
}

fn ready_tools(server: &Server) -> Result<Arc<Vec<crate::server::Tool>>, ToolError> {
    match server.status() {
        Status::Ready(tools) => Ok(tools),
        Status::Loading => Err(ToolError::new(
            ToolErrorKind::Unavailable,
            format!(
                "server {} is still loading; try again shortly",
                quoted(&server.namespace)
            ),
        )),
        Status::Error(reason) => Err(ToolError::new(
            ToolErrorKind::Unavailable,
            format!(
                "server {} is unavailable: {reason}",
                quoted(&server.namespace)
            ),
        )),
    }
}

/// The ready server's tools and the index of `name` among them. A name the listing lacks
/// re-lists the server once (at most once per server per [`crate::limits::MISS_INTERVAL`])
/// before the answer is `not_found`.
async fn lookup(
    server: &Server,
    name: &str,
    shutdown: &CancellationToken,
) -> Result<(Arc<Vec<crate::server::Tool>>, usize), ToolError> {
    let tools = ready_tools(server)?;
    if let Ok(i) = tools.binary_search_by(|t| t.name.as_str().cmp(name)) {
        return Ok((tools, i));
    }
    let relisted = tokio::select! {
        relisted = server.relist_after_miss() => relisted,
        () = shutdown.cancelled() => false,
    };
    if relisted {
        let tools = ready_tools(server)?;
        if let Ok(i) = tools.binary_search_by(|t| t.name.as_str().cmp(name)) {
            return Ok((tools, i));
        }
    }
    Err(not_found(server, name))
}

fn not_found(server: &Server, name: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::NotFound,
        format!(
            "server {ns} has no tool {}; list its tools with get_dynamic_tools {{\"namespace\":{ns}}}",
            quoted(name),
            ns = quoted(&server.namespace)
        ),
    )
}

/// A checked `call_dynamic_tool`, ready to send.
struct PreparedCall {
    connection: Arc<Connection>,
    namespace: Arc<str>,
    params: Value,
}

impl PreparedCall {
    async fn run(self, shutdown: CancellationToken) -> Result<String, ToolError> {
        let namespace = quoted(&self.namespace);
        tokio::select! {
            outcome = self.call() => outcome,
            () = shutdown.cancelled() => Err(ToolError::new(
                ToolErrorKind::Transport,
                format!("the call to server {namespace} was stopped because the mcp Pack was shut down"),
            )),
        }
    }

    async fn call(&self) -> Result<String, ToolError> {
        let connection = &self.connection;
        let id = connection.next_id();
        let mut guard = CancelOnDrop {
            connection,
            id,
            reason: Some("the client dropped the call"),
        };
        tracing::debug!(namespace = %self.namespace, id, "tools/call");
        let redactor = connection.redactor();
        let request = connection.request(id, "tools/call", &self.params, |raw| {
            result::map(raw, redactor)
        });
        let outcome = tokio::time::timeout(CALL_DEADLINE, request).await;
        let ns = quoted(&self.namespace);
        match outcome {
            Err(_) => {
                guard.reason = Some("the client's deadline for the call passed");
                Err(ToolError::new(
                    ToolErrorKind::Transport,
                    format!(
                        "server {ns} did not answer the tool call within {} minutes",
                        CALL_DEADLINE.as_secs() / 60
                    ),
                ))
            }
            Ok(Ok(mapped)) => {
                guard.disarm();
                let text = mapped.text;
                if mapped.is_error {
                    let text = if text.is_empty() {
                        "the tool reported an error without a message".to_string()
                    } else {
                        text
                    };
                    Err(ToolError::new(ToolErrorKind::Backend, text))
                } else {
                    Ok(text)
                }
            }
            Ok(Err(Error::Rpc(error))) => {
                guard.disarm();
                let message = if error.message.is_empty() {
                    format!("server {ns} answered with JSON-RPC error {}", error.code)
                } else {
                    error.message
                };
                Err(ToolError::new(ToolErrorKind::Backend, message))
            }
            Ok(Err(error @ Error::Malformed(_))) => {
                guard.disarm();
                Err(ToolError::new(
                    ToolErrorKind::Transport,
                    format!("server {ns}: {}", error.message()),
                ))
            }
            Ok(Err(error)) => Err(ToolError::new(
                ToolErrorKind::Transport,
                format!("server {ns}: {}", error.message()),
            )),
        }
    }
}

/// Sends `notifications/cancelled` for its request when dropped armed: when the call's future
/// is dropped, its deadline passes, or its stream fails before an answer.
struct CancelOnDrop<'a> {
    connection: &'a Arc<Connection>,
    id: u64,
    /// The `reason` the notification gives; `None` once the server has answered.
    reason: Option<&'static str>,
}

impl CancelOnDrop<'_> {
    fn disarm(&mut self) {
        self.reason = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(reason) = self.reason {
            tracing::debug!(namespace = %self.connection.namespace(), id = self.id, reason, "cancelling a call");
            self.connection.cancel_in_background(self.id, reason);
        }
    }
}

/// The argument object, checking that every key is one of `accepted`.
fn arguments<'a>(args: &'a Value, accepted: &[&str]) -> Result<&'a Map<String, Value>, ToolError> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    let map = match args {
        Value::Object(map) => map,
        Value::Null => EMPTY.get_or_init(Map::new),
        other => {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!(
                    "the arguments must be a JSON object, found {}",
                    json_type(other)
                ),
            ));
        }
    };
    if let Some(unknown) = map.keys().find(|k| !accepted.contains(&k.as_str())) {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "unknown argument {}; accepted arguments: {}",
                quoted(unknown),
                accepted.join(", ")
            ),
        ));
    }
    Ok(map)
}

fn string_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!("\"{key}\" must be a string, found {}", json_type(other)),
        )),
    }
}

/// A required argument is missing; the example names a configured namespace when there is one.
fn missing(key: &str, namespace: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::InvalidArguments,
        format!(
            "\"{key}\" is required, e.g. {{\"namespace\":{},\"toolName\":\"search\",\"arguments\":{{}}}}",
            quoted(namespace)
        ),
    )
}

/// `text` as a JSON string (quoted and escaped), cut to a readable length.
fn quoted(text: &str) -> String {
    serde_json::to_string(&truncate(text, 200)).expect("a string serializes")
}
