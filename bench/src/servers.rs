//! The servers under test: rmcp Streamable HTTP servers on 127.0.0.1, one with `TCP_NODELAY` on
//! every accepted socket (counting the connections it accepts) and one plain `axum::serve`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use axum::response::Response;
use axum::serve::ListenerExt;
use bytes::Bytes;
use futures_util::StreamExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// The servers: rmcp Streamable HTTP servers with 50 realistic tools, `sum` and `text`.

/// How many TCP connections the nodelay server has accepted (M7 counts them per contender).
pub(crate) static NODELAY_ACCEPTED: AtomicUsize = AtomicUsize::new(0);

pub(crate) const PAYLOAD: usize = 8 * 1024 * 1024;

/// The scrub section's result text: 16 MiB less room for the JSON-RPC envelope and the SSE
/// framing, so the message stays within the Pack's 16 MiB bound (`MAX_MESSAGE_BYTES`).
pub(crate) const SCRUB_PAYLOAD: usize = 16 * 1024 * 1024 - 64 * 1024;

/// How many secrets the scrub section configures.
pub(crate) const SCRUB_SECRETS: usize = 64;

/// Secret `i` of the scrub section. Letters, digits and one `/`: the Redactor registers it in
/// exactly three forms (as written, JSON-escaped `\/`, percent-encoded `%2F`), see
/// [`secret_forms`].
pub(crate) fn scrub_secret(i: usize) -> String {
    format!("tok/{i:03}a7Q9xWv3")
}

/// The forms of [`scrub_secret`] the naive baseline replaces, one pass each: as written, as
/// PHP's `json_encode` writes it and percent-encoded.
pub(crate) fn secret_forms(secret: &str) -> [String; 3] {
    [
        secret.to_string(),
        secret.replace('/', "\\/"),
        secret.replace('/', "%2F"),
    ]
}

/// The scrub section's result: ASCII prose with one secret form every 256 KiB (each secret
/// once, in a form chosen round-robin), [`SCRUB_PAYLOAD`] bytes.
fn scrub_text() -> String {
    let filler = "the quick brown fox jumps over the lazy dog; ";
    let mut text = String::with_capacity(SCRUB_PAYLOAD);
    let mut next = 0;
    while text.len() < SCRUB_PAYLOAD {
        if text.len() >= next * 256 * 1024 && next < SCRUB_SECRETS {
            let forms = secret_forms(&scrub_secret(next));
            text.push_str(&forms[next % forms.len()]);
            text.push(' ');
            next += 1;
        }
        text.push_str(filler);
    }
    text.truncate(SCRUB_PAYLOAD);
    text
}

pub(crate) struct Shared {
    tools: Vec<Tool>,
    text: String,
    scrub_text: String,
    /// Serve the 2025 versions only (`/legacy`, M8's legacy arm): 2026-07-28 is refused with
    /// `-32022`, so a client falls back to the `initialize` handshake.
    legacy_only: bool,
}

#[derive(Clone)]
pub(crate) struct BenchServer {
    shared: Arc<Shared>,
}

impl ServerHandler for BenchServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if self.shared.legacy_only {
            std::borrow::Cow::Borrowed(&[
                ProtocolVersion::V_2025_11_25,
                ProtocolVersion::V_2025_06_18,
                ProtocolVersion::V_2025_03_26,
            ])
        } else {
            std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let int = |k: &str| args.get(k).and_then(Value::as_i64).unwrap_or(0);
        let text = match request.name.as_ref() {
            "sum" | "sum_typed" | "sum_open" => (int("a") + int("b")).to_string(),
            "text" => {
                let n = (int("n").max(0) as usize).min(self.shared.text.len());
                self.shared.text[..n].to_string()
            }
            "secrets_text" => self.shared.scrub_text.clone(),
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// 50 tools with schemas like real servers publish (a GitHub/Jira/Slack-ish mix), then `sum` and
/// `text`. The 50 come to about 21 KB of `tools/list` JSON.
pub(crate) fn tools() -> Vec<Tool> {
    let areas = [
        ("issue", "an issue in the tracker"),
        ("pull_request", "a pull request of a repository"),
        ("repository", "a source repository"),
        ("branch", "a branch of a repository"),
        ("release", "a published release"),
        ("channel", "a chat channel"),
        ("message", "a chat message"),
        ("calendar_event", "an event on a shared calendar"),
        ("document", "a document in the knowledge base"),
        ("deployment", "a deployment of a service"),
    ];
    let verbs = [
        (
            "list",
            "Lists every {n} matching the filters, newest first, a page at a time.",
        ),
        (
            "get",
            "Fetches one {n} by its identifier, with all of its fields, as JSON.",
        ),
        (
            "create",
            "Creates {n} with the given fields and returns its identifier and web URL.",
        ),
        (
            "update",
            "Changes the given fields of {n}; fields left out keep their current value.",
        ),
        (
            "search",
            "Full-text search over every {n} the token can read.",
        ),
    ];
    let mut out = Vec::new();
    for (area, noun) in areas {
        for (verb, template) in verbs {
            let mut props = serde_json::Map::new();
            let mut required = vec![];
            props.insert(
                "owner".into(),
                json!({"type": "string", "description": "The owning account."}),
            );
            required.push("owner");
            match verb {
                "list" | "search" => {
                    if verb == "search" {
                        props.insert("query".into(), json!({"type": "string", "minLength": 1, "description": "The search expression."}));
                        required.push("query");
                    }
                    props.insert("state".into(), json!({"type": "string", "enum": ["open", "closed", "all"], "default": "open"}));
                    props.insert(
                        "perPage".into(),
                        json!({"type": "integer", "minimum": 1, "maximum": 100, "default": 30}),
                    );
                    props.insert("cursor".into(), json!({"type": "string"}));
                }
                "get" => {
                    props.insert("id".into(), json!({"type": "string"}));
                    required.push("id");
                }
                _ => {
                    if verb == "update" {
                        props.insert("id".into(), json!({"type": "string"}));
                        required.push("id");
                    }
                    props.insert("title".into(), json!({"type": "string", "maxLength": 256}));
                    props.insert("body".into(), json!({"type": "string"}));
                    props.insert(
                        "labels".into(),
                        json!({"type": "array", "items": {"type": "string"}}),
                    );
                }
            }
            let schema = json!({
                "type": "object",
                "properties": props,
                "required": required,
                "additionalProperties": false,
            });
            let Value::Object(schema) = schema else {
                unreachable!()
            };
            let description = template.replace("{n}", noun);
            out.push(Tool::new(
                format!("{verb}_{area}"),
                description,
                Arc::new(schema),
            ));
        }
    }
    let Value::Object(sum) = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]})
    else {
        unreachable!()
    };
    out.push(Tool::new("sum", "Adds two integers.", Arc::new(sum)));
    let Value::Object(text) = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]})
    else {
        unreachable!()
    };
    out.push(Tool::new(
        "text",
        "Returns n bytes of ASCII text.",
        Arc::new(text),
    ));
    out
}

/// The two tools of the check server (`/checked`), for the cost of the argument check: both
/// add `a` and `b`; `sum_typed` has an inputSchema like a real tool's (seven typed properties,
/// an enum, bounds, an array, three required, no others allowed), `sum_open` only
/// `{"type": "object"}`.
fn checked_tools() -> Vec<Tool> {
    let Value::Object(typed) = json!({
        "type": "object",
        "properties": {
            "owner": {"type": "string", "minLength": 1, "description": "The owning account."},
            "a": {"type": "integer"},
            "b": {"type": "integer"},
            "state": {"type": "string", "enum": ["open", "closed", "all"], "default": "open"},
            "labels": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
            "perPage": {"type": "integer", "minimum": 1, "maximum": 100},
            "cursor": {"type": "string"}
        },
        "required": ["owner", "a", "b"],
        "additionalProperties": false
    }) else {
        unreachable!()
    };
    let Value::Object(open) = json!({"type": "object"}) else {
        unreachable!()
    };
    vec![
        Tool::new("sum_typed", "Adds two integers.", Arc::new(typed)),
        Tool::new("sum_open", "Adds two integers.", Arc::new(open)),
    ]
}

/// The one tool of the scrub server (`/scrub`): `secrets_text`, the scrub section's result.
fn scrub_tools() -> Vec<Tool> {
    let Value::Object(schema) = json!({"type": "object"}) else {
        unreachable!()
    };
    vec![Tool::new(
        "secrets_text",
        "Returns 16 MiB of ASCII text quoting the scrub section's secrets.",
        Arc::new(schema),
    )]
}

pub(crate) fn service(
    shared: &Arc<Shared>,
) -> StreamableHttpService<BenchServer, LocalSessionManager> {
    let shared = Arc::clone(shared);
    StreamableHttpService::new(
        move || {
            Ok(BenchServer {
                shared: Arc::clone(&shared),
            })
        },
        Default::default(),
        StreamableHttpServerConfig::default().with_sse_keep_alive(None),
    )
}

/// Cuts every body frame of an SSE response into frames of at most `frame` bytes (zero-copy), so
/// the client receives one big SSE event as many HTTP chunks.
pub(crate) fn rechunk(response: Response, frame: usize) -> Response {
    let sse = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !sse {
        return response;
    }
    let (parts, body) = response.into_parts();
    let frames = body.into_data_stream().flat_map(move |chunk| {
        let pieces: Vec<Result<Bytes, axum::Error>> = match chunk {
            Ok(bytes) => (0..bytes.len())
                .step_by(frame)
                .map(|at| Ok(bytes.slice(at..(at + frame).min(bytes.len()))))
                .collect(),
            Err(e) => vec![Err(e)],
        };
        futures_util::stream::iter(pieces)
    });
    Response::from_parts(parts, Body::from_stream(frames))
}

pub(crate) fn router(
    shared: &Arc<Shared>,
    scrub: &Arc<Shared>,
    checked: &Arc<Shared>,
    legacy: &Arc<Shared>,
) -> axum::Router {
    let framed = |path: &str, frame: usize| {
        axum::Router::new()
            .nest_service(path, service(shared))
            .layer(axum::middleware::map_response(
                move |r: Response| async move { rechunk(r, frame) },
            ))
    };
    axum::Router::new()
        .nest_service("/mcp", service(shared))
        .nest_service("/scrub", service(scrub))
        .nest_service("/checked", service(checked))
        .nest_service("/legacy", service(legacy))
        .merge(framed("/f1k", 1024))
        .merge(framed("/f16k", 16 * 1024))
        .merge(framed("/f64k", 64 * 1024))
}

pub(crate) struct Addrs {
    pub(crate) nodelay: SocketAddr,
    pub(crate) plain: SocketAddr,
    pub(crate) listing_bytes: usize,
}

/// Starts both servers on their own thread: one sets TCP_NODELAY on every accepted socket, the
/// other is plain `axum::serve`.
pub(crate) fn start_servers() -> Addrs {
    let text: String = (0..PAYLOAD)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let tools = tools();
    let listing_bytes = serde_json::to_vec(&ListToolsResult::with_all_items(tools[..50].to_vec()))
        .expect("serializes")
        .len();
    let shared = Arc::new(Shared {
        tools,
        text,
        scrub_text: String::new(),
        legacy_only: false,
    });
    let scrub = Arc::new(Shared {
        tools: scrub_tools(),
        text: String::new(),
        scrub_text: scrub_text(),
        legacy_only: false,
    });
    let checked = Arc::new(Shared {
        tools: checked_tools(),
        text: String::new(),
        scrub_text: String::new(),
        legacy_only: false,
    });
    let legacy = Arc::new(Shared {
        tools: shared.tools.clone(),
        text: String::new(),
        scrub_text: String::new(),
        legacy_only: true,
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("servers".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("server runtime");
            rt.block_on(async move {
                let nodelay = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send((nodelay.local_addr().unwrap(), plain.local_addr().unwrap()))
                    .unwrap();
                let nodelay = nodelay.tap_io(|tcp| {
                    NODELAY_ACCEPTED.fetch_add(1, Ordering::Relaxed);
                    let _ = tcp.set_nodelay(true);
                });
                let a = tokio::spawn(
                    axum::serve(nodelay, router(&shared, &scrub, &checked, &legacy)).into_future(),
                );
                let _ = axum::serve(plain, router(&shared, &scrub, &checked, &legacy)).await;
                let _ = a.await;
            });
        })
        .expect("server thread");
    let (nodelay, plain) = rx.recv().expect("servers started");
    Addrs {
        nodelay,
        plain,
        listing_bytes,
    }
}
