//! The contenders: our Pack (through the runvil Host contract), rmcp's client (default and on a
//! pooled `reqwest::Client`), and the raw `reqwest` floor; plus a copy of our `tools/list`
//! decoding for the decode-only measurement.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use rmcp::model::{ClientConfig, ProtocolVersion};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt};
use runvil_plugin::{Pack, Packs, Services, Settled, TOKIO_RUNTIME};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// The contenders.

/// Our Pack, installed and constructed exactly as a runvil Host does.
pub(crate) fn our_pack(servers: Value) -> Box<dyn Pack> {
    let mut packs = Packs::new();
    plugin_mcp::install(&mut packs, &json!({ "mcp": servers }));
    let mut services = Services::new();
    services.insert(&TOKIO_RUNTIME, tokio::runtime::Handle::current());
    let spec = packs.get("runvil/mcp").expect("install inserts runvil/mcp");
    spec.construct("mcp", &services)
        .expect("the Pack constructs")
}

/// Awaits the Pack's readiness as a Host does (`Pack::settled`, no polling), then checks that `n`
/// servers are ready; should one show `error` (a start being retried), spins (yielding to the
/// runtime) until they are. Panics with the listing after `limit`.
pub(crate) async fn wait_ready(pack: &dyn Pack, n: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    if let Settled::Pending(names) = pack.settled(limit).await {
        panic!("servers still loading after {limit:?}: {names:?}");
    }
    loop {
        let listing = pack
            .call("mcp/get_dynamic_tools", json!({}))
            .await
            .expect("listing");
        if listing.matches("\"status\":\"ready\"").count() == n {
            return;
        }
        if Instant::now() > deadline {
            panic!("servers not ready after {limit:?}: {listing}");
        }
        tokio::task::yield_now().await;
    }
}

/// The protocol version the Pack speaks with server `namespace` (its listing's
/// `protocolVersion`).
pub(crate) async fn spoken(pack: &dyn Pack, namespace: &str) -> String {
    let listing = pack
        .call("mcp/get_dynamic_tools", json!({ "namespace": namespace }))
        .await
        .expect("listing");
    let listing: Value = serde_json::from_str(&listing).expect("the listing is JSON");
    listing["protocolVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The protocol version rmcp's client negotiated.
pub(crate) fn peer_version(client: &RmcpClient) -> String {
    client
        .peer_info()
        .map(|i| i.protocol_version.to_string())
        .unwrap_or_default()
}

pub(crate) type RmcpClient = RunningService<RoleClient, ClientConfig>;

/// rmcp's client as its docs show it: `from_uri` (its default reqwest client keeps no idle
/// connections).
pub(crate) async fn rmcp_default(url: &str) -> RmcpClient {
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    ClientConfig::default()
        .serve(transport)
        .await
        .expect("rmcp connects")
}

/// rmcp's Streamable HTTP transport to `url` on a pooled `reqwest::Client`.
fn pooled_transport(url: &str) -> StreamableHttpClientTransport<reqwest::Client> {
    StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(url.to_string()),
    )
}

/// rmcp's client on a pooled `reqwest::Client`.
pub(crate) async fn rmcp_pooled(url: &str) -> RmcpClient {
    ClientConfig::default()
        .serve(pooled_transport(url))
        .await
        .expect("rmcp connects")
}

/// rmcp's client on a pooled `reqwest::Client`, starting with `server/discover` and speaking
/// only 2026-07-28 (`ClientLifecycleMode::Discover`; `serve` always initializes, 2025-11-25).
pub(crate) async fn rmcp_pooled_modern(url: &str) -> RmcpClient {
    let transport = pooled_transport(url);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    ClientConfig::default()
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .expect("rmcp connects (server/discover)")
}

/// The floor of a modern cold start (M8): a fresh `reqwest::Client` built as the Pack builds
/// its client for `http://` servers, so a new TCP connection, then `server/discover` and
/// `tools/list` as MCP 2026-07-28 POSTs with the bytes and headers the Pack sends (`_meta`
/// first in `params`, `MCP-Protocol-Version`, `Mcp-Method`; no session), each body read whole.
/// Returns the `tools/list` body.
pub(crate) async fn modern_start_floor(url: &str) -> Bytes {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        .gzip(true)
        .brotli(true)
        .zstd(true)
        .tls_certs_only(std::iter::empty())
        .build()
        .unwrap();
    let post = |id: u64, method: &'static str| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"_meta":{MODERN_META}}}}}"#
        );
        let request = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .body(body);
        async move { request.send().await.unwrap().bytes().await.unwrap() }
    };
    let discovered = post(1, "server/discover").await;
    assert!(memfind(&discovered, b"supportedVersions").is_some());
    post(2, "tools/list").await
}

/// The `_meta` of every modern request, the bytes `src/http/modern.rs` writes (`META`, keys in
/// insertion order: the workspace builds `serde_json` with `preserve_order`).
const MODERN_META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"plugin-mcp","version":"0.1.0"}}"#;

/// The modern floor: raw `reqwest` POSTs of MCP 2026-07-28 stateless requests (`_meta` with
/// the protocol version, client capabilities and client info; `MCP-Protocol-Version`,
/// `Mcp-Method` and `Mcp-Name` headers), no session, reading whole bodies.
pub(crate) struct ModernFloor {
    http: reqwest::Client,
    url: String,
    next_id: std::sync::atomic::AtomicU64,
}

impl ModernFloor {
    pub(crate) fn new(url: &str) -> ModernFloor {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .build()
            .unwrap();
        ModernFloor {
            http,
            url: url.to_string(),
            next_id: 1.into(),
        }
    }

    /// `tools/call` of `tool` with `args`, the whole body read.
    pub(crate) async fn call(&self, tool: &str, args: &Value) -> Bytes {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench-floor", "version": "0"}}}}))
        .unwrap();
        self.http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .body(body)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
    }
}

/// The floor: raw `reqwest` POSTs on an initialized session, reading whole bodies.
pub(crate) struct Floor {
    pub(crate) http: reqwest::Client,
    pub(crate) url: String,
    pub(crate) session: String,
    pub(crate) next_id: std::sync::atomic::AtomicU64,
}

impl Floor {
    pub(crate) async fn new(url: &str) -> Floor {
        Floor::with_pool(url, true).await
    }

    /// `pooled = false`: no idle connections are kept (a new connection per request).
    pub(crate) async fn with_pool(url: &str, pooled: bool) -> Floor {
        let mut http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true);
        if !pooled {
            http = http.pool_max_idle_per_host(0);
        }
        let http = http.build().unwrap();
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench-floor","version":"0"}}}"#;
        let response = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init)
            .send()
            .await
            .unwrap();
        let session = response
            .headers()
            .get("mcp-session-id")
            .expect("session id")
            .to_str()
            .unwrap()
            .to_string();
        let _ = response.bytes().await.unwrap();
        let floor = Floor {
            http,
            url: url.to_string(),
            session,
            next_id: 1.into(),
        };
        floor
            .post(Bytes::from_static(
                br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}"#,
            ))
            .await;
        floor
    }

    /// A POST of `body` with the headers the Pack sends after `initialize`.
    pub(crate) fn request(&self, body: Bytes) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", "2025-11-25")
            .body(body)
    }

    pub(crate) async fn post(&self, body: Bytes) -> Bytes {
        self.request(body)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
    }

    /// POSTs `body` and reads only until the SSE event holding the response; the rest of the
    /// body is dropped (`drain = false`: the connection is closed unless already finished) or
    /// read to its end by a spawned task (`drain = true`: the connection returns to the pool).
    pub(crate) async fn post_until_answer(&self, body: Bytes, drain: bool) {
        let response = self.request(body).send().await.unwrap();
        let mut stream = response.bytes_stream();
        let mut seen = Vec::new();
        while let Some(chunk) = stream.next().await {
            seen.extend_from_slice(&chunk.unwrap());
            if let Some(at) = memfind(&seen, b"\"result\"")
                && memfind(&seen[at..], b"\n\n").is_some()
            {
                break;
            }
        }
        if drain {
            tokio::spawn(async move { while stream.next().await.is_some() {} });
        }
    }

    /// The bytes our Pack sends for `call_dynamic_tool` of `tool` with `args` (same serializer,
    /// same key order), with a fresh id.
    pub(crate) fn call_body(&self, tool: &str, args: &Value) -> Bytes {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        Bytes::from(
            serde_json::to_vec(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}}))
                .unwrap(),
        )
    }
}

pub(crate) fn memfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The `result` of the JSON-RPC response inside an SSE body.
pub(crate) fn extract_result(sse: &[u8]) -> String {
    let text = std::str::from_utf8(sse).unwrap();
    for line in text.lines() {
        if let Some(data) = line.strip_prefix("data:") {
            let data = data.trim_start();
            if data.contains("\"result\"") {
                #[derive(serde::Deserialize)]
                struct Msg<'a> {
                    #[serde(borrow)]
                    result: &'a serde_json::value::RawValue,
                }
                let m: Msg<'_> = serde_json::from_str(data).unwrap();
                return m.result.get().to_string();
            }
        }
    }
    panic!("no result in the tools/list answer");
}

// A copy of the decoding in `src/server.rs` (`ListToolsResult`/`WireTool`, borrowed, then the
// owned `Tool` of the registry), without the redactor (no secrets are configured here, where it
// returns its input borrowed).
#[derive(serde::Deserialize)]
pub(crate) struct WireList<'a> {
    #[serde(borrow)]
    tools: Vec<WireTool<'a>>,
    #[serde(rename = "nextCursor", default)]
    #[allow(dead_code)]
    next_cursor: Option<String>,
}

#[derive(serde::Deserialize)]
pub(crate) struct WireTool<'a> {
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    title: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    description: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "inputSchema", borrow, default)]
    input_schema: Option<&'a serde_json::value::RawValue>,
    #[serde(rename = "outputSchema", borrow, default)]
    output_schema: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    annotations: Option<&'a serde_json::value::RawValue>,
}

#[allow(dead_code)]
pub(crate) struct OwnedTool {
    name: String,
    description: String,
    input_schema: Box<serde_json::value::RawValue>,
    output_schema: Option<Box<serde_json::value::RawValue>>,
    annotations: Option<Box<serde_json::value::RawValue>>,
}

pub(crate) fn decode_like_ours(text: &str) -> Vec<OwnedTool> {
    let list: WireList<'_> = serde_json::from_str(text).unwrap();
    let mut tools: Vec<OwnedTool> = list
        .tools
        .into_iter()
        .map(|w| {
            let name = w.name.into_owned();
            let description = w
                .description
                .filter(|d| !d.is_empty())
                .or(w.title.filter(|t| !t.is_empty()))
                .map_or_else(|| name.clone(), |d| d.into_owned());
            OwnedTool {
                name,
                description,
                input_schema: w.input_schema.map_or_else(
                    || {
                        serde_json::value::RawValue::from_string(r#"{"type":"object"}"#.into())
                            .unwrap()
                    },
                    |r| r.to_owned(),
                ),
                output_schema: w.output_schema.map(|r| r.to_owned()),
                annotations: w.annotations.map(|r| r.to_owned()),
            }
        })
        .collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}
