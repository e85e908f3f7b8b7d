//! The Pack: construction, the two model-facing tools, their argument rules and errors
//! (README "What the tools answer").
//!
//! `construct` parses the config, reads the Host runtime and spawns one task per remote entry;
//! it does no I/O. `get_dynamic_tools` renders the registry ([`crate::listing`]);
//! `call_dynamic_tool` sends `tools/call` with a five-minute deadline and maps the result
//! ([`crate::result`]). A call runs in a task on the Host's runtime; the future the Host polls
//! only awaits it. Dropping a call's future aborts the task and cancels the request while it may
//! be running; dropping the Pack stops every task and call (README "Protocol eras, sessions and cancellation").
//! A tool name that a ready server does not list re-lists that server once before the answer is
//! `not_found` ([`crate::server::Server::relist_after_miss`]). Beside the two tools it answers
//! the Host-only requests of [`host_only`], which [`Pack::tools`] never lists.

mod host_only;

use std::sync::Arc;

use runvil_plugin::{
    BoxFuture, Pack, Services, Settled, TOKIO_RUNTIME, ToolError, ToolErrorKind, ToolSpec,
    Unavailable, Value,
};
use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;

use crate::config::{self, Entry};
use crate::http::{Clients, Connection, Error, NamedWait, Verdict, Wire};
use crate::json::json_type;
use crate::limits;
use crate::limits::truncate;
use crate::protocol::codes::INVALID_PARAMS;
use crate::redact::{Gate, Shown};
use crate::server::{Server, Status, ToolList};
use crate::substitute::ProcessEnvironment;
use crate::{listing, result, search};

const GET: &str = "get_dynamic_tools";
const CALL: &str = "call_dynamic_tool";

/// The Pack's [`runvil_plugin::Construct`] function.
pub(crate) fn construct(
    id: &str,
    config: &Value,
    services: &Services,
) -> Result<Box<dyn Pack>, Unavailable> {
    build(id, config, services, None)
}

/// The [`runvil_plugin::Construct`] function `install` gives a plugin config with
/// [`crate::ONLY_KEY`] (README "Add it to a Host"): `config` is
/// `{"servers": <the Pack config>, "mcpOnly": [<namespace>, ...]}`, and only the entries of
/// those namespaces are read further and served; the others are left out, as if not written.
/// The whole config is still read first, by the same rules.
///
/// # Errors
/// As [`construct`], and a `mcpOnly` that is not an array of strings.
pub(crate) fn construct_only(
    id: &str,
    config: &Value,
    services: &Services,
) -> Result<Box<dyn Pack>, Unavailable> {
    let only = config.get(crate::ONLY_KEY).unwrap_or(&Value::Null);
    let names: Option<Vec<String>> = only.as_array().and_then(|names| {
        names
            .iter()
            .map(|n| n.as_str().map(str::to_string))
            .collect()
    });
    let Some(names) = names else {
        return Err(Unavailable::new(format!(
            "the plugin config's \"{}\" must be an array of namespaces (strings), found {}",
            crate::ONLY_KEY,
            json_type(only)
        )));
    };
    build(
        id,
        config.get("servers").unwrap_or(&Value::Null),
        services,
        Some(&names),
    )
}

/// [`construct`], serving only the namespaces of `only` when it is given.
fn build(
    id: &str,
    config: &Value,
    services: &Services,
    only: Option<&[String]>,
) -> Result<Box<dyn Pack>, Unavailable> {
    let runtime = services.get(&TOKIO_RUNTIME).cloned().ok_or_else(|| {
        Unavailable::new(
            "the Host provides no Tokio runtime (the TOKIO_RUNTIME service); the mcp Pack runs its connections there",
        )
    })?;
    let mut entries = config::parse(config, &ProcessEnvironment).map_err(Unavailable::new)?;
    if let Some(only) = only {
        entries.retain(|(namespace, _)| only.contains(namespace));
    }
    // The exit gate over every entry's secrets; each entry's redactor joins it before any task
    // runs, so every reason and log field made of one server's text is scrubbed of every
    // entry's secrets (docs/configuration.md, "The exit gate").
    let remotes = || {
        entries.iter().filter_map(|(_, entry)| match entry {
            Entry::Remote(remote) => Some(&remote.redactor),
            _ => None,
        })
    };
    let gate = Gate::new(remotes());
    for redactor in remotes() {
        redactor.join(&gate);
    }
    let shutdown = CancellationToken::new();
    let clients = Arc::new(Clients::default());
    // Every server task, so `Pack::closed` waits for this Pack's work only.
    let tasks = tokio_util::task::TaskTracker::new();
    let mut servers = Vec::with_capacity(entries.len());
    for (namespace, entry) in entries {
        let namespace: Arc<str> = namespace.into();
        let server = match entry {
            Entry::Refused(reason) => Arc::new(Server::refused(namespace, reason)),
            Entry::Unused { reason, sign_in } => {
                let (url, oauth) = *sign_in;
                let key = crate::auth::signin::store_key(&url, &oauth, &namespace);
                let mut server = Server::refused(namespace, reason);
                server.unused_sign_in = Some(key);
                Arc::new(server)
            }
            Entry::Remote(mut remote) => {
                let settings = std::mem::take(&mut remote.settings);
                for note in &settings.notes {
                    tracing::warn!(namespace = %namespace, "config entry: {note}");
                }
                let connection = Arc::new(Connection::new(
                    Arc::clone(&namespace),
                    *remote,
                    Arc::clone(&clients),
                    runtime.clone(),
                ));
                let server = Arc::new(Server::remote(namespace, Arc::clone(&connection), settings));
                tasks.spawn_on(
                    Arc::clone(&server).run(connection, shutdown.clone()),
                    &runtime,
                );
                server
            }
        };
        servers.push(server);
    }
    servers.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    tasks.close();
    Ok(Box::new(McpPack {
        tasks,
        gate,
        id: id.to_string(),
        servers: Arc::new(servers),
        shutdown,
        runtime,
    }))
}

/// The [`runvil_plugin::Construct`] function `install` gives a plugin config whose servers sit
/// under a key that misspells `mcp`, `mcpServers` or `servers`
/// ([`config::misnamed_plugin_key`]): the Pack is unavailable, naming the key and the one meant.
/// A config without such a key (one a Host passes in its place) is the Pack's config, as for
/// [`construct`].
pub(crate) fn construct_misnamed(
    id: &str,
    config: &Value,
    services: &Services,
) -> Result<Box<dyn Pack>, Unavailable> {
    match config::misnamed_plugin_key(config) {
        Some((key, meant)) => Err(Unavailable::new(config::misnamed_plugin_reason(key, meant))),
        None => construct(id, config, services),
    }
}

/// The running Pack. Dropping it cancels every server task and in-flight call.
struct McpPack {
    id: String,
    /// Sorted by namespace.
    servers: Arc<Vec<Arc<Server>>>,
    shutdown: CancellationToken,
    /// The Host's runtime, where [`Pack::settled`] and [`Pack::closed`] wait (so any executor
    /// can poll them).
    runtime: tokio::runtime::Handle,
    /// The server tasks (closed: no more are added); each ends after its connection's cleanup.
    tasks: tokio_util::task::TaskTracker,
    /// The exit gate: every text [`Pack::call`] and [`Pack::tools`] hand out passes it
    /// ([`shown`]).
    gate: Gate,
}

impl Drop for McpPack {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Pack for McpPack {
    /// The two tools' specs, each description and schema passed through the gate (they quote a
    /// server's namespace and tool names as examples).
    fn tools(&self) -> Vec<ToolSpec> {
        self.specs()
            .into_iter()
            .map(|spec| ToolSpec {
                name: spec.name,
                description: self.gate.pass(spec.description).into_string(),
                parameters: gated_value(&self.gate, &spec.parameters),
            })
            .collect()
    }

    fn ready(&self) -> BoxFuture<()> {
        Box::pin(async {})
    }

    /// The answer of [`McpPack::answer`], through the gate ([`shown`]): the one exit of every
    /// tool answer, `ToolError` message and Host-only answer.
    fn call(&self, tool: &str, args: Value) -> BoxFuture<Result<String, ToolError>> {
        let answer = self.answer(tool, args);
        let gate = self.gate.clone();
        Box::pin(async move { shown(&gate, answer.await) })
    }

    /// Waits, in a task on the Host's runtime, until no server is `loading`
    /// ([`Server::settled`]), at most `within` (or until the Pack is dropped); `Pending` names
    /// the namespaces still loading then, sorted. The future only awaits that task.
    fn settled(&self, within: std::time::Duration) -> BoxFuture<Settled> {
        let servers = Arc::clone(&self.servers);
        let shutdown = self.shutdown.clone();
        let task = self.runtime.spawn(async move {
            let all = futures_util::future::join_all(servers.iter().map(|s| s.settled()));
            tokio::select! {
                _ = tokio::time::timeout(within, all) => {}
                () = shutdown.cancelled() => {}
            }
            let pending: Vec<String> = servers
                .iter()
                .filter(|s| s.is_loading())
                .map(|s| s.namespace.to_string())
                .collect();
            if pending.is_empty() {
                Settled::All
            } else {
                Settled::Pending(pending)
            }
        });
        Box::pin(async move {
            // Dropping the returned future leaves the task to end at its deadline; a task
            // that panicked or was aborted (the runtime shutting down) settled nothing.
            task.await.unwrap_or(Settled::Pending(Vec::new()))
        })
    }

    /// Waits, in a task on the Host's runtime, for the Pack's drop and then for every server
    /// task to end (each ends once its connection's cancels and `DELETE`s are done), at most
    /// [`limits::CLOSED_WAIT`] after the drop. The future only awaits that task.
    fn closed(&self) -> BoxFuture<()> {
        let tasks = self.tasks.clone();
        let shutdown = self.shutdown.clone();
        let task = self.runtime.spawn(async move {
            shutdown.cancelled().await;
            // A server task that outlives the bound is given up on, not waited for.
            let _ = tokio::time::timeout(limits::CLOSED_WAIT, tasks.wait()).await;
        });
        Box::pin(async move {
            // An error is the runtime shutting down: nothing is left to wait for.
            let _ = task.await;
        })
    }
}

impl McpPack {
    /// The two tools' specs, before the gate: only [`Pack::tools`] calls this.
    fn specs(&self) -> Vec<ToolSpec> {
        let get = format!("{}/{GET}", self.id);
        let call = format!("{}/{CALL}", self.id);
        // Examples name a namespace and a tool of this Pack as they are now, or none.
        let example = Example::of(&self.servers, None);
        let (namespace_eg, tool_eg) = match &example {
            Example::None => (None, None),
            Example::Namespace(ns) => (Some(quoted(ns)), None),
            Example::Tool(ns, tool) => (Some(quoted(ns)), Some(quoted(tool))),
        };
        let with_namespace = namespace_eg
            .as_ref()
            .map_or(String::new(), |ns| format!(", e.g. {{\"namespace\":{ns}}}"));
        let with_tool = match (&namespace_eg, &tool_eg) {
            (Some(ns), Some(tool)) => format!(", e.g. {{\"namespace\":{ns},\"toolName\":{tool}}}"),
            _ => String::new(),
        };
        let call_eg = match (&namespace_eg, &tool_eg) {
            (Some(ns), Some(tool)) => {
                format!(", e.g. {{\"namespace\":{ns},\"toolName\":{tool},\"arguments\":{{}}}}")
            }
            _ => " with its namespace, toolName and arguments".to_string(),
        };
        let eg = |value: &Option<String>| {
            value
                .as_ref()
                .map_or(String::new(), |v| format!(", e.g. {v}"))
        };
        vec![
            ToolSpec {
                description: format!(
                    "Finds and lists the tools of the MCP servers behind this Pack, as JSON text. \
                     When you do not know a tool's name, search by what you want done: \
                     {{\"query\":\"send a message to a channel\"}} answers the best matching tools \
                     (namespace, name, one-line description), best first; limit (1-50, default 10) \
                     and namespace narrow it. \
                     With no arguments: every server's namespace, status (ready, loading, or error \
                     with a reason, and retryInSeconds when it will be tried again), description and tool names. \
                     With namespace{with_namespace}: that server's tools with their \
                     descriptions and input schemas, and under omitted the tools it listed that were left out. \
                     With namespace and toolName{with_tool}: \
                     one tool in full; with namespace and toolNames (up to 20): several. Call a tool with {call}."
                ),
                name: get.clone(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "namespace": {"type": "string", "description": format!("A server's namespace, exactly as listed{}.", eg(&namespace_eg))},
                        "toolName": {"type": "string", "description": format!("A tool's name, exactly as its server lists it{}; needs namespace.", eg(&tool_eg))},
                        "toolNames": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_TOOL_NAMES, "description": "Several tools' names of one server, each answered in full (unknown ones under notFound with suggestions); needs namespace."},
                        "query": {"type": "string", "minLength": 1, "description": format!("What you want a tool to do, in your own words or by its name (at most {} bytes); answers the best matching tools of every ready server (or of namespace).", search::MAX_QUERY_BYTES)},
                        "limit": {"type": "integer", "minimum": search::LIMIT_RANGE.start(), "maximum": search::LIMIT_RANGE.end(), "description": "How many matches a query answers at most (default 10); needs query."}
                    },
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                description: format!(
                    "Calls one tool of one MCP server and returns its result as text. \
                     Look the tool and its input schema up with {get} first (search it by what you want \
                     done with {{\"query\":\"...\"}} when you do not know its name), then call it{call_eg}."
                ),
                name: call,
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "namespace": {"type": "string", "description": format!("The server's namespace, exactly as listed{}.", eg(&namespace_eg))},
                        "toolName": {"type": "string", "description": format!("The tool's name, exactly as its server lists it{}.", eg(&tool_eg))},
                        "arguments": {"type": "object", "description": "The tool's arguments, matching its input schema. Defaults to {}."}
                    },
                    "required": ["namespace", "toolName"],
                    "additionalProperties": false
                }),
            },
        ]
    }

    /// The answer to `tool` with `args`, before the gate: only [`Pack::call`] calls this, and
    /// hands what it gives to [`shown`].
    fn answer(&self, tool: &str, args: Value) -> BoxFuture<Result<String, ToolError>> {
        let short = tool
            .strip_prefix(self.id.as_str())
            .and_then(|rest| rest.strip_prefix('/'));
        let servers = Arc::clone(&self.servers);
        let shutdown = self.shutdown.clone();
        match short {
            Some(GET) => {
                let id = self.id.clone();
                Box::pin(async move { get_dynamic_tools(&id, &servers, &args, &shutdown).await })
            }
            Some(CALL) => match prepare_call(&self.id, &servers, args) {
                Ok(call) => Box::pin(call.spawn(self.id.clone(), shutdown)),
                Err(e) => Box::pin(async move { Err(e) }),
            },
            Some(host_only::LOGOUT) => Box::pin(async move { host_only::logout(&servers, &args) }),
            Some(host_only::SIGN_IN_STATE) => {
                Box::pin(async move { host_only::sign_in_state(&servers, &args) })
            }
            Some(host_only::SIGN_IN_REDIRECT) => {
                Box::pin(async move { host_only::sign_in_redirect(&servers, &args).await })
            }
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

/// The one exit of [`Pack::call`]: an answer's text, or a `ToolError`'s message, passed
/// through `gate` ([`Gate::pass`], the JSON rule: a JSON answer stays valid JSON). Nothing
/// else makes the contract's `Result<String, ToolError>` from inside the Pack.
fn shown(gate: &Gate, answer: Result<String, ToolError>) -> Result<String, ToolError> {
    match answer {
        Ok(text) => Ok(gate.pass(text).into_string()),
        Err(error) => Err(ToolError::new(
            error.kind,
            gate.pass(error.message).into_string(),
        )),
    }
}

/// `value` (a tool spec's schema) as JSON text passed through `gate`, read back: the gate keeps
/// JSON valid, and a value that could not be read back is shown as the gated text.
fn gated_value(gate: &Gate, value: &Value) -> Value {
    let shown: Shown = gate.pass(value.to_string());
    let text = shown.into_string();
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// `get_dynamic_tools` of the Pack `id`. Without a miss it answers without awaiting anything; a
/// miss awaits only the server task's re-listing (no I/O of its own), so any executor can poll it.
async fn get_dynamic_tools(
    id: &str,
    servers: &[Arc<Server>],
    args: &Value,
    shutdown: &CancellationToken,
) -> Result<String, ToolError> {
    match asked(servers, args)? {
        Asked::All => Ok(listing::all(servers)),
        Asked::Server(namespace) => {
            let server = server(servers, namespace)?;
            Ok(listing::one_server(server, &server.status()))
        }
        Asked::Tool(namespace, tool_name) => {
            let server = server(servers, namespace)?;
            let (list, i) = lookup(id, server, tool_name, shutdown).await?;
            Ok(listing::one_tool(&server.namespace, &list.tools[i]))
        }
        Asked::Tools(namespace, names) => {
            let server = server(servers, namespace)?;
            lookup_many(server, &names, shutdown).await
        }
        Asked::Search {
            query,
            limit,
            namespace,
        } => {
            let searched: &[Arc<Server>] = match namespace {
                Some(namespace) => std::slice::from_ref(server(servers, namespace)?),
                None => servers,
            };
            let mut ready = Vec::new();
            let mut not_searched = Vec::new();
            for server in searched {
                match server.status() {
                    Status::Ready(list) => ready.push((&**server, list)),
                    status => not_searched.push((&**server, status)),
                }
            }
            let indexes: Vec<&search::Index> = ready.iter().map(|(_, list)| &list.index).collect();
            let hits = search::rank(&search::Query::parse(query), &indexes, limit);
            let ready: Vec<(&Server, &ToolList)> = ready
                .iter()
                .map(|(server, list)| (*server, &**list))
                .collect();
            // Where to list what was searched: that server's tools, or every server.
            let listed = match namespace {
                Some(namespace) => json!({ "namespace": namespace }).to_string(),
                None => "{}".to_string(),
            };
            let hint = format!(
                "no tool matched; try other words for what the tool should do, or list every tool with {id}/{GET} {listed}"
            );
            Ok(listing::search(query, &hits, &ready, &not_searched, &hint))
        }
    }
}

/// What a `get_dynamic_tools` call asks for (docs/tools.md): its arguments checked, in one
/// place, against every rule of their combinations and bounds.
enum Asked<'a> {
    /// No arguments: every server.
    All,
    /// `namespace`: one server's tools.
    Server(&'a str),
    /// `namespace` + `toolName`: one tool.
    Tool(&'a str, &'a str),
    /// `namespace` + `toolNames`: up to [`MAX_TOOL_NAMES`] tools, each name once.
    Tools(&'a str, Vec<&'a str>),
    /// `query` (+ `limit`, `namespace`): a search.
    Search {
        query: &'a str,
        limit: usize,
        namespace: Option<&'a str>,
    },
}

/// The most names one `toolNames` lookup takes.
const MAX_TOOL_NAMES: usize = 20;

/// The [`Asked`] of `get_dynamic_tools` arguments `args`, or the
/// `invalid_arguments` error saying what to change.
fn asked<'a>(servers: &[Arc<Server>], args: &'a Value) -> Result<Asked<'a>, ToolError> {
    let args = arguments(
        args,
        &["namespace", "toolName", "toolNames", "query", "limit"],
    )?;
    let invalid = |message: String| ToolError::new(ToolErrorKind::InvalidArguments, message);
    let namespace = string_arg(args, "namespace")?;
    let tool_name = string_arg(args, "toolName")?;
    let query = string_arg(args, "query")?;
    let tool_names = match args.get("toolNames") {
        None | Some(Value::Null) => None,
        Some(Value::Array(names)) => Some(
            names
                .iter()
                .enumerate()
                .map(|(i, name)| match name {
                    Value::String(name) => Ok(name.as_str()),
                    other => Err(invalid(format!(
                        "toolNames[{i}] must be a string, found {}",
                        json_type(other)
                    ))),
                })
                .collect::<Result<Vec<&str>, ToolError>>()?,
        ),
        Some(other) => {
            return Err(invalid(format!(
                "\"toolNames\" must be an array of tool names, found {}",
                json_type(other)
            )));
        }
    };
    let limit = match args.get("limit") {
        None | Some(Value::Null) => None,
        // JSON Schema 2020-12 counts `5.0` as the integer 5, as the tool's spec does.
        Some(Value::Number(n)) if whole(n).is_some_and(|n| search::LIMIT_RANGE.contains(&n)) => {
            whole(n).map(|n| n as usize)
        }
        Some(other) => {
            return Err(invalid(format!(
                "\"limit\" must be a whole number from {} to {}, found {}",
                search::LIMIT_RANGE.start(),
                search::LIMIT_RANGE.end(),
                match other {
                    Value::Number(n) => n.to_string(),
                    other => json_type(other).to_string(),
                }
            )));
        }
    };
    if tool_name.is_some() && tool_names.is_some() {
        return Err(invalid(
            "give toolName (one tool) or toolNames (several), not both".to_string(),
        ));
    }
    if let Some(query) = query {
        if tool_name.is_some() || tool_names.is_some() {
            return Err(invalid(
                "query searches by what a tool does and takes no toolName or toolNames; \
                 drop query to look tools up by name"
                    .to_string(),
            ));
        }
        if query.trim().is_empty() {
            return Err(invalid(
                "\"query\" is empty; say in a few words what the tool should do, e.g. {\"query\":\"send a message\"}"
                    .to_string(),
            ));
        }
        if query.len() > search::MAX_QUERY_BYTES {
            return Err(invalid(format!(
                "\"query\" is {} bytes, over the {} allowed; say in a few words what the tool should do",
                query.len(),
                search::MAX_QUERY_BYTES
            )));
        }
        return Ok(Asked::Search {
            query,
            limit: limit.unwrap_or(search::DEFAULT_LIMIT),
            namespace,
        });
    }
    if limit.is_some() {
        return Err(invalid(
            "limit needs a query, e.g. {\"query\":\"send a message\",\"limit\":5}".to_string(),
        ));
    }
    if let Some(names) = tool_names {
        let Some(namespace) = namespace else {
            let example = match Example::of(servers, None) {
                Example::Tool(ns, tool) => (ns, tool),
                Example::Namespace(ns) => (ns, names.first().map_or("", |n| n).to_string()),
                Example::None => {
                    return Err(invalid(
                        "toolNames needs a namespace, and no servers are configured".to_string(),
                    ));
                }
            };
            return Err(invalid(format!(
                "toolNames needs a namespace, e.g. {{\"namespace\":{},\"toolNames\":[{}]}}",
                quoted(&example.0),
                quoted(&example.1)
            )));
        };
        if names.is_empty() {
            return Err(invalid(format!(
                "\"toolNames\" is empty; give 1 to {MAX_TOOL_NAMES} tool names"
            )));
        }
        if names.len() > MAX_TOOL_NAMES {
            return Err(invalid(format!(
                "\"toolNames\" has {} names; give at most {MAX_TOOL_NAMES} per call",
                names.len()
            )));
        }
        let mut unique: Vec<&str> = Vec::with_capacity(names.len());
        for name in names {
            if !unique.contains(&name) {
                unique.push(name);
            }
        }
        return Ok(Asked::Tools(namespace, unique));
    }
    match (namespace, tool_name) {
        (None, None) => Ok(Asked::All),
        (None, Some(tool_name)) => {
            // The example is a server that lists this tool, when one does.
            let example = match servers.iter().find(|s| lists(s, tool_name)) {
                Some(server) => Example::Tool(Arc::clone(&server.namespace), tool_name.to_string()),
                None => Example::of(servers, None),
            };
            let message = match example {
                Example::Tool(ns, tool) => format!(
                    "toolName needs a namespace, e.g. {{\"namespace\":{},\"toolName\":{}}}",
                    quoted(&ns),
                    quoted(&tool)
                ),
                Example::Namespace(ns) => format!(
                    "toolName needs a namespace, e.g. {{\"namespace\":{},\"toolName\":{}}}",
                    quoted(&ns),
                    quoted(tool_name)
                ),
                Example::None => {
                    "toolName needs a namespace, and no servers are configured".to_string()
                }
            };
            Err(ToolError::new(ToolErrorKind::InvalidArguments, message))
        }
        (Some(namespace), None) => Ok(Asked::Server(namespace)),
        (Some(namespace), Some(tool_name)) => Ok(Asked::Tool(namespace, tool_name)),
    }
}

/// The tools `names` of `server`, each whole, and the names it does not list with the
/// nearest names it does ([`nearest`]). A name the listing lacks re-lists the server once
/// before it counts as not found, as for one tool ([`lookup`]).
///
/// # Cancel safety
/// Cancel safe: it only reads the status and waits for the server task's re-listing.
async fn lookup_many(
    server: &Server,
    names: &[&str],
    shutdown: &CancellationToken,
) -> Result<String, ToolError> {
    let listed = |list: &ToolList, name: &str| {
        list.tools
            .binary_search_by(|t| t.name.as_str().cmp(name))
            .ok()
    };
    let hidden = |name: &str| server.tool_filter.hides(name);
    let mut list = ready_tools(server)?;
    let missing = |list: &ToolList| {
        names
            .iter()
            .any(|name| hidden(name).is_none() && listed(list, name).is_none())
    };
    if missing(&list) {
        let relisted = tokio::select! {
            relisted = server.relist_after_miss() => relisted,
            () = shutdown.cancelled() => return Err(stopped(&server.namespace)),
        };
        if relisted {
            list = ready_tools(server)?;
        }
    }
    let mut found = Vec::new();
    let mut not_found = Vec::new();
    for name in names {
        match (hidden(name), listed(&list, name)) {
            (None, Some(i)) => found.push(&list.tools[i]),
            (hidden, _) => not_found.push(listing::NotFound {
                name,
                suggestions: match hidden {
                    Some(_) => Vec::new(),
                    None => nearest(name, list.tools.iter().map(|t| t.name.as_str())),
                },
                reason: hidden
                    .map(|h| format!("{}, so it is neither listed nor callable", h.describe())),
            }),
        }
    }
    Ok(listing::tools(&server.namespace, &found, &not_found))
}

/// Checks a `call_dynamic_tool`'s arguments and finds its server; the tool is looked up in the
/// call's task ([`PreparedCall::run`]), where a miss may wait for a re-listing.
fn prepare_call(
    id: &str,
    servers: &[Arc<Server>],
    mut args: Value,
) -> Result<PreparedCall, ToolError> {
    let checked = arguments(&args, &["namespace", "toolName", "arguments"])?;
    let namespace = string_arg(checked, "namespace")?;
    let tool_name = string_arg(checked, "toolName")?;
    let namespace = namespace.ok_or_else(|| missing(id, "namespace", servers, None))?;
    let tool_name = tool_name.ok_or_else(|| missing(id, "toolName", servers, Some(namespace)))?;
    match checked.get("arguments") {
        None | Some(Value::Null | Value::Object(_)) => {}
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
    let server = Arc::clone(server(servers, namespace)?);
    // Refused entries have no connection; their status error is the answer.
    let Some(connection) = server.connection.clone() else {
        return Err(ready_tools(&server).err().unwrap_or_else(|| {
            ToolError::new(
                ToolErrorKind::Unavailable,
                format!("server {} has no connection", quoted(&server.namespace)),
            )
        }));
    };
    let tool_name = tool_name.to_string();
    // Moved out of the Host's value, not copied: checked above to be an object or nothing.
    let arguments = match args.as_object_mut().and_then(|a| a.remove("arguments")) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    Ok(PreparedCall {
        namespace: Arc::clone(&server.namespace),
        server,
        connection,
        tool_name,
        arguments: Value::Object(arguments),
    })
}

fn server<'s>(servers: &'s [Arc<Server>], namespace: &str) -> Result<&'s Arc<Server>, ToolError> {
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

fn ready_tools(server: &Server) -> Result<Arc<ToolList>, ToolError> {
    match server.status() {
        Status::Ready(tools) => Ok(tools),
        Status::Loading => Err(ToolError::new(
            ToolErrorKind::Unavailable,
            format!(
                "server {} is still loading; try again shortly",
                quoted(&server.namespace)
            ),
        )),
        Status::Error {
            reason, retry_at, ..
        } => {
            let retry = match crate::server::retry_in_seconds(retry_at) {
                None => String::new(),
                Some(0) => "; it is being started again now".to_string(),
                Some(1) => "; it will be started again in 1 second".to_string(),
                Some(n) => format!("; it will be started again in {n} seconds"),
            };
            Err(ToolError::new(
                ToolErrorKind::Unavailable,
                format!(
                    "server {} is unavailable: {reason}{retry}",
                    quoted(&server.namespace)
                ),
            ))
        }
        Status::SignIn { reason, .. } => Err(ToolError::new(
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
/// before the answer is `not_found`, which names `id`'s `get_dynamic_tools` (e.g.
/// `mcp/get_dynamic_tools`).
///
/// # Cancel safety
/// Cancel safe: it only reads the status and waits for the server task's re-listing.
async fn lookup(
    id: &str,
    server: &Server,
    name: &str,
    shutdown: &CancellationToken,
) -> Result<(Arc<ToolList>, usize), ToolError> {
    if let Some(hidden) = server.tool_filter.hides(name) {
        return Err(hidden_tool(server, name, hidden));
    }
    let list = ready_tools(server)?;
    if let Ok(i) = list.tools.binary_search_by(|t| t.name.as_str().cmp(name)) {
        return Ok((list, i));
    }
    let relisted = tokio::select! {
        relisted = server.relist_after_miss() => relisted,
        () = shutdown.cancelled() => return Err(stopped(&server.namespace)),
    };
    if relisted {
        let list = ready_tools(server)?;
        if let Ok(i) = list.tools.binary_search_by(|t| t.name.as_str().cmp(name)) {
            return Ok((list, i));
        }
    }
    let list = ready_tools(server)?;
    Err(not_found(id, server, &list, name))
}

/// The `transport` error of work on `namespace` that the Pack's drop stopped (README "Sessions
/// and cancellation": a call future that outlives the Pack resolves to it).
fn stopped(namespace: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::Transport,
        format!(
            "the call to server {} was stopped because the mcp Pack was shut down",
            quoted(namespace)
        ),
    )
}

/// The `NotFound` error for a tool `server` does not list: the nearest names `list` holds
/// ([`nearest`]), then the Pack `id`'s `get_dynamic_tools` for the whole listing.
fn not_found(id: &str, server: &Server, list: &ToolList, name: &str) -> ToolError {
    let near = nearest(name, list.tools.iter().map(|t| t.name.as_str()));
    let near = match near.as_slice() {
        [] => String::new(),
        [one] => format!(" (did you mean {}?)", quoted(one)),
        [init @ .., last] => format!(
            " (did you mean {} or {}?)",
            init.iter()
                .map(|n| quoted(n))
                .collect::<Vec<_>>()
                .join(", "),
            quoted(last)
        ),
    };
    ToolError::new(
        ToolErrorKind::NotFound,
        format!(
            "server {ns} has no tool {}{near}; list its tools with {id}/{GET} {{\"namespace\":{ns}}}",
            quoted(name),
            ns = quoted(&server.namespace)
        ),
    )
}

/// The `NotFound` error for a tool the server's config entry hides (README "Configuration"):
/// the reason names the config key.
fn hidden_tool(server: &Server, name: &str, hidden: crate::config::Hidden) -> ToolError {
    ToolError::new(
        ToolErrorKind::NotFound,
        format!(
            "server {} has no tool {} that this Pack may call: {}, so it is neither listed nor callable",
            quoted(&server.namespace),
            quoted(name),
            hidden.describe()
        ),
    )
}

/// The longest name prefix, in chars, [`nearest`] compares (a bound on its work per miss).
const NEAREST_MAX_CHARS: usize = 64;

/// Up to three of `names` nearest to `name`: the optimal-string-alignment distance (edits,
/// adjacent swaps counted as one) of the lowercased names is at most a third of the longer
/// one's length in chars (`gret` finds `greet`; a one-letter name only a case variant). Nearest
/// first, then by name.
fn nearest<'n>(name: &str, names: impl Iterator<Item = &'n str>) -> Vec<&'n str> {
    let lower = |text: &str| -> String {
        text.chars()
            .take(NEAREST_MAX_CHARS)
            .flat_map(char::to_lowercase)
            .collect()
    };
    let wanted = lower(name);
    let wanted_len = wanted.chars().count();
    let mut near: Vec<(usize, &str)> = names
        .filter_map(|candidate| {
            let other = lower(candidate);
            let longer = wanted_len.max(other.chars().count());
            let bound = longer / 3;
            if wanted_len.abs_diff(other.chars().count()) > bound {
                return None;
            }
            let distance = strsim::osa_distance(&wanted, &other);
            (distance <= bound).then_some((distance, candidate))
        })
        .collect();
    near.sort();
    near.into_iter().take(3).map(|(_, n)| n).collect()
}

/// A checked `call_dynamic_tool`, ready to send.
struct PreparedCall {
    server: Arc<Server>,
    connection: Arc<Connection>,
    namespace: Arc<str>,
    tool_name: String,
    /// The call's `arguments`: always a JSON object.
    arguments: Value,
}

/// The `params` of a `tools/call` request (MCP 2025-11-25, server/tools "Calling Tools"),
/// serialized straight from the prepared call.
#[derive(serde::Serialize)]
struct CallParams<'a> {
    name: &'a str,
    arguments: &'a Value,
}

/// The `reason` of a cancel for a call whose future was dropped.
const DROPPED: &str = "the client dropped the call";
/// The `reason` of a cancel for a call whose reply broke off before its answer.
const LOST: &str = "the client lost the reply stream";
/// The `reason` of a cancel for a call whose deadline passed.
const DEADLINE: &str = "the client's deadline for the call passed";

impl PreparedCall {
    /// Spawns the call on the Host's runtime and returns the future the Host polls, which only
    /// awaits the spawned task (so any executor can poll it).
    fn spawn(self, pack_id: String, shutdown: CancellationToken) -> CallFuture {
        let connection = Arc::clone(&self.connection);
        let id = connection.next_id();
        // The call runs in the caller's span, so its request's span is that span's child
        // (README "Traces").
        // Boxed where it is made: the task then moves a pointer, not the call's whole state.
        let run = Box::pin(self.run(pack_id, id, shutdown));
        let task = connection
            .runtime()
            .spawn(tracing::Instrument::in_current_span(run));
        CallFuture {
            task,
            armed: Some((connection, id)),
        }
    }

    /// The call task: the tool's lookup (a miss may wait for a re-listing), then `tools/call`
    /// under the server's call deadline ([`CALL_DEADLINE`](crate::limits::CALL_DEADLINE) or shorter), racing the Pack's shutdown. A
    /// request that may still be running when the call ends without an answer (deadline, a
    /// reply that broke off) is cancelled through the connection's in-flight table; at shutdown
    /// the connection's close cancels it (before the session's `DELETE`).
    async fn run(
        self,
        pack_id: String,
        id: u64,
        shutdown: CancellationToken,
    ) -> Result<String, ToolError> {
        let ns = quoted(&self.namespace);
        // One deadline for the whole call: a miss's wait for a re-listing counts too.
        let limit = self.server.deadlines.call;
        let deadline = tokio::time::Instant::now() + limit;
        let looked_up = tokio::time::timeout_at(
            deadline,
            lookup(&pack_id, &self.server, &self.tool_name, &shutdown),
        );
        let (mut list, mut i) = match looked_up.await {
            Ok(found) => found?,
            Err(_) => return Err(call_deadline(&ns, limit)),
        };
        let connection = &self.connection;
        let redactor = connection.redactor();
        let schema = SchemaPointer {
            pack_id: &pack_id,
            namespace: &self.namespace,
            tool: &self.tool_name,
        };
        let tool = Some(self.tool_name.as_str());
        let params = CallParams {
            name: &self.tool_name,
            arguments: &self.arguments,
        };
        let mut id = id;
        // The one resend of a call after a `HeaderMismatch` goes out under an id of its own,
        // cancelled when the call is dropped (a rate limit's resend is the connection's:
        // `http::verdict::next`).
        let mut retry_guard = None;
        // A call is re-issued at most once in all, the retry after a `HeaderMismatch` included.
        let reissued = std::sync::atomic::AtomicBool::new(false);
        let outcome = loop {
            let listed = &list.tools[i];
            // Checked before each send, against the tool as listed then (a resend after a
            // re-listing meets the schema it brought): a mismatch sends nothing.
            self.check_arguments(listed, &ns, &schema)?;
            tracing::debug!(namespace = %self.namespace, id, "tools/call");
            let mirrored = self.mirrored(listed);
            let output = &listed.output_check;
            let decode = |raw: &serde_json::value::RawValue, source: &bytes::Bytes| {
                if let Some(asked) = crate::http::input_required(raw) {
                    return Err(Error::input_required(
                        connection
                            .server_text(&asked, limits::MAX_REASON_BYTES)
                            .into_owned(),
                    ));
                }
                let mapped =
                    result::map(raw, source, redactor, output).map_err(Error::malformed)?;
                if mapped.is_error {
                    crate::http::tool_error();
                }
                Ok(mapped)
            };
            let request = connection.request(
                id,
                Wire::new("tools/call", tool, &mirrored)
                    .sharing_reissue(&reissued)
                    .until(deadline),
                &params,
                decode,
            );
            // The shutdown first: a request the close ended at the same time is the shutdown's.
            let outcome = tokio::select! {
                biased;
                () = shutdown.cancelled() => return Err(stopped(&self.namespace)),
                outcome = tokio::time::timeout_at(deadline, request) => outcome,
            };
            let outcome = match outcome {
                Err(_) => {
                    connection.cancel(id, DEADLINE);
                    return Err(call_deadline(&ns, limit));
                }
                // The connection closes only when the Pack shuts down.
                Ok(Err(e)) if e.is_closed() => return Err(stopped(&self.namespace)),
                Ok(outcome) => outcome,
            };
            // A no-op unless the request may still be running (the in-flight table decides):
            // its reply broke off before the answer.
            connection.cancel(id, LOST);
            let verdict = outcome.as_ref().err().map(Error::verdict);
            match verdict.map(|v| after_answer(v, retry_guard.is_some())) {
                Some(After::Relist) => {
                    // MCP 2026-07-28, transports "Client Behavior": the tool's inputSchema may
                    // have changed; list again, then send once more with its headers.
                    tracing::debug!(namespace = %self.namespace, id, "HeaderMismatch; re-listing and calling once more");
                    let relisted = tokio::time::timeout_at(deadline, async {
                        tokio::select! {
                            () = self.server.relist_now() => {}
                            () = shutdown.cancelled() => {}
                        }
                        lookup(&pack_id, &self.server, &self.tool_name, &shutdown).await
                    });
                    (list, i) = match relisted.await {
                        Ok(found) => found?,
                        Err(_) => return Err(call_deadline(&ns, limit)),
                    };
                }
                Some(After::Answer) | None => break outcome,
            }
            // The resend goes out under an id of its own, cancelled when the call is dropped.
            id = connection.next_id();
            retry_guard = Some(connection.cancel_on_drop(id, DROPPED));
        };
        drop(retry_guard);
        match outcome {
            Ok(mapped) => {
                if let Some(mismatch) = mapped.mismatch {
                    return Err(output_mismatch(&ns, &self.tool_name, &mismatch));
                }
                let text = mapped.text.into_string();
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
            Err(error) => Err(call_error(&ns, &error, &schema, connection)),
        }
    }
}

impl PreparedCall {
    /// Checks the call's arguments against `tool`'s `inputSchema` ([`Checker::check_arguments`](crate::schema::Checker::check_arguments)).
    ///
    /// # Errors
    /// `InvalidArguments` naming the problems (at most five, scrubbed) and where the schema is
    /// shown (`schema`).
    fn check_arguments(
        &self,
        tool: &crate::server::Tool,
        ns: &str,
        schema: &SchemaPointer<'_>,
    ) -> Result<(), ToolError> {
        tool.input_check
            .check_arguments(&self.arguments, self.connection.redactor())
            .map_err(|problems| {
                ToolError::new(
                    ToolErrorKind::InvalidArguments,
                    format!(
                        "the arguments do not match the inputSchema of tool {} of server {ns}: {problems}; {schema}",
                        quoted(&self.tool_name)
                    ),
                )
            })
    }

    /// The `Mcp-Param-{Name}` headers of this call to `tool` (its `x-mcp-header` parameters,
    /// read from the call's `arguments`).
    fn mirrored(&self, tool: &crate::server::Tool) -> Vec<(http::HeaderName, http::HeaderValue)> {
        if tool.mirrored.is_empty() {
            return Vec::new();
        }
        tool.mirrored.headers(&self.arguments)
    }
}

/// Where a model sees a tool's schema: `get_dynamic_tools` of the Pack `pack_id` with the
/// tool's namespace and name. Its `Display` is the pointer an `invalid_arguments` ends with:
/// `see the schema with mcp/get_dynamic_tools {"namespace":"docs","toolName":"search"}`.
struct SchemaPointer<'a> {
    pack_id: &'a str,
    namespace: &'a str,
    tool: &'a str,
}

impl std::fmt::Display for SchemaPointer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "see the schema with {}/{GET} {{\"namespace\":{},\"toolName\":{}}}",
            self.pack_id,
            quoted(self.namespace),
            quoted(self.tool)
        )
    }
}

/// The `backend` error of a result without content blocks that fails its tool's
/// `outputSchema` ([`result::OutputMismatch`]).
fn output_mismatch(ns: &str, tool: &str, mismatch: &result::OutputMismatch) -> ToolError {
    let tool = quoted(tool);
    let message = match mismatch {
        result::OutputMismatch::Problems(problems) => format!(
            "server {ns} returned a structuredContent that does not match the outputSchema of tool {tool}: {problems}"
        ),
        result::OutputMismatch::Missing => format!(
            "server {ns} returned no content and no structuredContent, though tool {tool} declares an outputSchema"
        ),
    };
    ToolError::new(ToolErrorKind::Backend, message)
}

/// What a call does after its `tools/call` was answered with an error of `verdict`: the Pack's
/// half of the resend table, the one that needs the listing (the connection's, a rate limit's
/// wait included, is `http::verdict::next`). One resend (`resent`: it was spent): after a
/// modern `HeaderMismatch`, once re-listed.
#[derive(Debug, PartialEq, Eq)]
enum After {
    Relist,
    Answer,
}

fn after_answer(verdict: Verdict, resent: bool) -> After {
    match verdict {
        Verdict::HeaderMismatch if !resent => After::Relist,
        _ => After::Answer,
    }
}

/// `n` as a whole number when it is one: an unsigned integer, or a float with no fractional
/// part (JSON Schema 2020-12 §6.1.1 counts `5.0` as an integer).
fn whole(n: &serde_json::Number) -> Option<u64> {
    n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u32::MAX as f64)
            .map(|f| f as u64)
    })
}

/// The `transport` error of a call whose deadline (`limit`: [`CALL_DEADLINE`](crate::limits::CALL_DEADLINE), or the shorter
/// one its entry asks for) passed: in minutes when whole, else in seconds.
fn call_deadline(ns: &str, limit: std::time::Duration) -> ToolError {
    let within = match limit.as_millis() {
        ms if ms % 60_000 == 0 && ms >= 120_000 => format!("{} minutes", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{} seconds", ms / 1000),
        ms => format!("{:.3} seconds", ms as f64 / 1000.0),
    };
    ToolError::new(
        ToolErrorKind::Transport,
        format!("server {ns} did not answer the tool call within {within}"),
    )
}

/// How a call refused unprocessed (`429`/`503`: rate limited with a wait, or busy without one;
/// RFC 6585 §4) reads for a model, by whether the call may have run (its reply stream's
/// resumption was refused, not the call): `None` for any other verdict.
fn refusal(error: &Error) -> Option<String> {
    let (how, wait) = match error.verdict() {
        Verdict::RateLimited { status, .. } => (
            crate::http::refused_as(status),
            NamedWait::of(error.verdict()),
        ),
        Verdict::Busy { status } => (crate::http::refused_as(status), None),
        _ => return None,
    };
    Some(match (error.may_be_running(), wait) {
        (true, Some(named)) => format!(
            "it took the call but refused to resume its reply stream {how} and asked to be called again in {}; the call may have run",
            named.seconds()
        ),
        (true, None) => format!(
            "it took the call but refused to resume its reply stream {how} without saying when to ask again; the call may have run"
        ),
        (false, Some(named)) => format!(
            "it refused the call {how} and asked to be called again in {}",
            named.seconds()
        ),
        (false, None) => {
            format!("it refused the call {how} without saying when to call again; try again later")
        }
    })
}

/// The model-facing error of a failed `tools/call`. A JSON-RPC "Invalid params" (`-32602`,
/// MCP spec "Tools": error handling) is `invalid_arguments`: the server's first paragraph and
/// where the tool's schema is.
fn call_error(
    ns: &str,
    error: &Error,
    schema: &SchemaPointer<'_>,
    connection: &Connection,
) -> ToolError {
    if error.sign_in_url().is_some() {
        return ToolError::new(
            ToolErrorKind::Unavailable,
            format!("server {ns} is unavailable: {error}"),
        );
    }
    if error.is_input_required() {
        return ToolError::new(ToolErrorKind::Backend, format!("server {ns}: {error}"));
    }
    if let Some(refusal) = refusal(error) {
        return ToolError::new(
            ToolErrorKind::Unavailable,
            format!("server {ns} is unavailable: {refusal}"),
        );
    }
    if let Verdict::OtherEra(_) = error.verdict() {
        // No probe ruled the answer the server's own: it is not shown as the tool's error.
        return ToolError::new(
            ToolErrorKind::Unavailable,
            format!(
                "server {ns} is unavailable: it answered the call like a server of another MCP protocol era ({error}), and which era it speaks could not be decided, so the call was not sent again; try again later"
            ),
        );
    }
    match error.rpc() {
        Some(rpc) if error.verdict() == Verdict::MissingCapability => {
            let asked = crate::http::required_capabilities(rpc.data.as_deref())
                .map(|names| format!(" ({})", connection.server_text(&names, 256)))
                .unwrap_or_default();
            ToolError::new(
                ToolErrorKind::Backend,
                format!(
                    "server {ns} needs a client capability{asked} that this client does not have (it declares none): {}",
                    rpc.message
                ),
            )
        }
        Some(rpc) if error.verdict() == Verdict::InvalidParams => {
            let tool = quoted(schema.tool);
            // One paragraph, scrubbed and bounded already (the connection's reading of it).
            let said = &rpc.message;
            let message = if said.is_empty() {
                format!(
                    "server {ns} refused the arguments of tool {tool} (JSON-RPC error {INVALID_PARAMS}); {schema}"
                )
            } else {
                format!("server {ns} refused the arguments of tool {tool}: {said}; {schema}")
            };
            ToolError::new(ToolErrorKind::InvalidArguments, message)
        }
        Some(rpc) => {
            let message = if rpc.message.is_empty() {
                format!("server {ns} answered with JSON-RPC error {}", rpc.code)
            } else {
                rpc.message.clone()
            };
            ToolError::new(ToolErrorKind::Backend, message)
        }
        None => ToolError::new(ToolErrorKind::Transport, format!("server {ns}: {error}")),
    }
}

/// The future `call_dynamic_tool` returns: it only awaits the call's task on the Host's
/// runtime. Dropped before the task finished, it aborts the task and cancels the request
/// (which the in-flight table turns into a `notifications/cancelled` only while the request may
/// be running, and at most once).
struct CallFuture {
    task: tokio::task::JoinHandle<Result<String, ToolError>>,
    /// The connection and request id to cancel when dropped early; `None` once finished.
    armed: Option<(Arc<Connection>, u64)>,
}

impl std::future::Future for CallFuture {
    type Output = Result<String, ToolError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let joined = std::task::ready!(std::pin::Pin::new(&mut self.task).poll(cx));
        if let Some((connection, id)) = self.armed.take() {
            // A lookup that failed never sent it; one that went out ended on its own path.
            connection.finish_unsent(id);
        }
        std::task::Poll::Ready(joined.unwrap_or_else(|e| {
            Err(ToolError::new(
                ToolErrorKind::Transport,
                if e.is_cancelled() {
                    "the call was stopped"
                } else {
                    "the call failed inside the mcp Pack"
                },
            ))
        }))
    }
}

impl Drop for CallFuture {
    fn drop(&mut self) {
        if let Some((connection, id)) = self.armed.take() {
            self.task.abort();
            connection.cancel(id, DROPPED);
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

/// A required argument of `call_dynamic_tool` (of the Pack `id`) is missing. The example is a
/// namespace and a tool this Pack lists now ([`Example::of`], `namespace` preferred); with no
/// tool listed, the pointer to `get_dynamic_tools` instead; with no server, no example.
fn missing(id: &str, key: &str, servers: &[Arc<Server>], namespace: Option<&str>) -> ToolError {
    let message = match Example::of(servers, namespace) {
        Example::Tool(ns, tool) => format!(
            "\"{key}\" is required, e.g. {{\"namespace\":{},\"toolName\":{},\"arguments\":{{}}}}",
            quoted(&ns),
            quoted(&tool)
        ),
        Example::Namespace(ns) => format!(
            "\"{key}\" is required; list the tools with {id}/{GET} {{\"namespace\":{}}}",
            quoted(&ns)
        ),
        Example::None => format!("\"{key}\" is required, and no servers are configured"),
    };
    ToolError::new(ToolErrorKind::InvalidArguments, message)
}

/// A namespace and a tool that exist in this Pack now, for the examples in model-facing text.
enum Example {
    /// No server is configured.
    None,
    /// A configured namespace; no ready server lists a tool.
    Namespace(Arc<str>),
    /// A ready server's namespace and the first tool it lists.
    Tool(Arc<str>, String),
}

impl Example {
    /// `preferred`'s first tool when that server is configured, ready and lists one; else the
    /// first such server's; else `preferred` (when configured) or the first namespace alone.
    fn of(servers: &[Arc<Server>], preferred: Option<&str>) -> Example {
        let preferred = preferred.and_then(|ns| servers.iter().find(|s| &*s.namespace == ns));
        let first_tool = |server: &Server| match server.status() {
            Status::Ready(list) => list.tools.first().map(|t| t.name.clone()),
            _ => None,
        };
        let candidates = preferred.into_iter().chain(servers.iter());
        for server in candidates {
            if let Some(tool) = first_tool(server) {
                return Example::Tool(Arc::clone(&server.namespace), tool);
            }
        }
        match preferred.or(servers.first()) {
            Some(server) => Example::Namespace(Arc::clone(&server.namespace)),
            None => Example::None,
        }
    }
}

/// Whether `server` is ready and lists a tool named `name`.
fn lists(server: &Server, name: &str) -> bool {
    matches!(server.status(), Status::Ready(list)
        if list.tools.binary_search_by(|t| t.name.as_str().cmp(name)).is_ok())
}

/// `text` as a JSON string (quoted and escaped), cut to a readable length.
fn quoted(text: &str) -> String {
    serde_json::to_string(&truncate(text, 200)).expect("a string serializes")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{After, Verdict, after_answer};

    #[test]
    fn a_call_is_relisted_and_resent_once_after_a_mismatch() {
        let limited = Verdict::RateLimited {
            status: 429,
            wait: Duration::from_secs(1),
        };
        let table = [
            (Verdict::HeaderMismatch, false, After::Relist),
            (Verdict::HeaderMismatch, true, After::Answer),
            // The connection waits a rate limit out (`http::verdict::next`), not the Pack.
            (limited, false, After::Answer),
            (Verdict::MissingCapability, false, After::Answer),
            (Verdict::Stands, false, After::Answer),
            (Verdict::Malformed, false, After::Answer),
        ];
        for (verdict, resent, want) in table {
            assert_eq!(after_answer(verdict, resent), want, "{verdict:?} {resent}");
        }
    }
}
