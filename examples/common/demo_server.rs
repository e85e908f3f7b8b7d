//! A demo MCP server built with the official Rust SDK (`rmcp`), served over Streamable HTTP on
//! 127.0.0.1 with a free port. The quickstart talks to it, and so do the tests (a real peer that
//! no one here wrote the protocol side of).
//!
//! Tools: `add {a, b}`, `echo {text}`, `media {}` (text + image + embedded text resource +
//! binary resource + resource link), `fail {}` (an `isError` result), `slow {seconds}`
//! (records a cancellation it receives), `weather {city}` (with an output schema and
//! annotations). `tools/list` answers in pages of [`PAGE_SIZE`] tools.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{
    CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams, Resource,
    ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router};
use tokio_util::sync::CancellationToken;

/// How many tools one `tools/list` page holds.
pub const PAGE_SIZE: usize = 2;

/// What the server saw, for tests to assert on.
#[derive(Default, Debug)]
pub struct Seen {
    /// Request ids of `slow` calls, as the server received them (JSON text).
    pub slow_started: Vec<String>,
    /// Request ids of `slow` calls that were cancelled by `notifications/cancelled`.
    pub slow_cancelled: Vec<String>,
    /// The cursors `tools/list` was called with (`None` for the first page).
    pub list_cursors: Vec<Option<String>>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    /// The left operand.
    pub a: i64,
    /// The right operand.
    pub b: i64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// The text to send back.
    pub text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct SlowArgs {
    /// How long to work, in seconds.
    pub seconds: f64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct WeatherArgs {
    /// A city name.
    pub city: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Weather {
    /// The city asked about.
    pub city: String,
    /// Degrees Celsius.
    pub celsius: i32,
}

#[derive(Clone)]
pub struct Demo {
    tool_router: ToolRouter<Self>,
    seen: Arc<Mutex<Seen>>,
}

#[tool_router]
impl Demo {
    #[tool(description = "Adds two integers")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }

    #[tool(description = "Sends the text back")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(description = "Returns one block of each kind")]
    fn media(&self) -> CallToolResult {
        CallToolResult::success(vec![
            ContentBlock::text("a picture follows"),
            ContentBlock::image("iVBORw0KGgo=", "image/png"),
            ContentBlock::embedded_text("memo://readme", "embedded text"),
            ContentBlock::resource(ResourceContents::BlobResourceContents {
                uri: "memo://blob".into(),
                mime_type: Some("application/zip".into()),
                blob: "UEsDBA==".into(),
                meta: None,
            }),
            ContentBlock::resource_link(Resource::new("memo://notes.txt", "notes")),
        ])
    }

    #[tool(description = "Always fails")]
    fn fail(&self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text("the demo tool failed on purpose")])
    }

    #[tool(description = "Works for a while; notices cancellation")]
    async fn slow(
        &self,
        Parameters(SlowArgs { seconds }): Parameters<SlowArgs>,
        context: RequestContext<RoleServer>,
    ) -> String {
        let id = serde_json::to_string(&context.id).unwrap_or_default();
        self.seen.lock().unwrap().slow_started.push(id.clone());
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => format!("worked {seconds} s"),
            () = context.ct.cancelled() => {
                self.seen.lock().unwrap().slow_cancelled.push(id);
                "cancelled".to_string()
            }
        }
    }

    #[tool(
        title = "Current weather",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    fn weather(&self, Parameters(WeatherArgs { city }): Parameters<WeatherArgs>) -> Json<Weather> {
        Json(Weather { city, celsius: 21 })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Demo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        self.seen.lock().unwrap().list_cursors.push(cursor.clone());
        let start: usize = match cursor.as_deref() {
            None => 0,
            Some(c) => c
                .strip_prefix("page-")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| ErrorData::invalid_params("unknown cursor", None))?,
        };
        let mut tools = self.tool_router.list_all();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let end = (start + PAGE_SIZE).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools[start..end].to_vec());
        if end < tools.len() {
            page.next_cursor = Some(format!("page-{end}"));
        }
        Ok(page)
    }
}

/// A running demo server.
pub struct DemoServer {
    /// `http://127.0.0.1:<port>/mcp`.
    pub url: String,
    pub seen: Arc<Mutex<Seen>>,
    stop: CancellationToken,
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts the demo server on the current runtime; it stops when the handle is dropped.
pub async fn start() -> std::io::Result<DemoServer> {
    start_with(StreamableHttpServerConfig::default()).await
}

/// Starts the demo server with `config` (e.g. `json_response`, stateless mode).
pub async fn start_with(mut config: StreamableHttpServerConfig) -> std::io::Result<DemoServer> {
    let stop = CancellationToken::new();
    config.cancellation_token = stop.child_token();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let handler_seen = Arc::clone(&seen);
    let service: StreamableHttpService<Demo, LocalSessionManager> = StreamableHttpService::new(
        move || {
            Ok(Demo {
                tool_router: Demo::tool_router(),
                seen: Arc::clone(&handler_seen),
            })
        },
        Default::default(),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let shutdown = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
    });
    Ok(DemoServer { url, seen, stop })
}
