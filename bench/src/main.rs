//! Benchmarks of `plugin-mcp` side by side with the official Rust SDK's client (`rmcp`), on the
//! same `rmcp` servers in the same run, with the physical floors measured alongside.
//!
//! `cargo run --release -p bench` runs the full set (a few minutes); `-- --smoke` a reduced one
//! (under a minute). The last line printed is one JSON object with every ratio (`m1` … `m6`).
//! See `BENCHMARKS.md` for what each metric measures and what it means for a user.
//!
//! Layout: the servers run on their own thread (a current-thread Tokio runtime); every client —
//! ours (through the runvil Host contract, exactly as a Host would), rmcp's, and the raw
//! `reqwest` floors — runs on the main thread on another current-thread runtime, so a client's
//! CPU time is that thread's CPU time. Contenders are interleaved in rounds (the starting
//! contender rotates each round), the first round is discarded, and every loop is bounded in
//! count and in time.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::Response;
use axum::serve::ListenerExt;
use bytes::Bytes;
use futures_util::StreamExt;
use hdrhistogram::Histogram;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientConfig, ContentBlock,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleClient, RoleServer, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use runvil_plugin::{Pack, Packs, Services, TOKIO_RUNTIME};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Peak memory: a counting allocator that counts only the threads that opted in (the client
// thread while an M4 call runs), so the servers' own copies of the payload are not counted.

struct Counting;

static CURRENT: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    static TRACKED: Cell<bool> = const { Cell::new(false) };
}

fn tracked() -> bool {
    TRACKED.try_with(Cell::get).unwrap_or(false)
}

fn count(delta: isize) {
    let now = CURRENT.fetch_add(delta, Ordering::Relaxed) + delta;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: forwards every call to `System` unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && tracked() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if tracked() {
            count(-(layout.size() as isize));
        }
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && tracked() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && tracked() {
            // Net change: glibc grows large (mmap'd) blocks with mremap, without a second copy.
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` with this thread's allocations counted; returns its output and the peak number of
/// bytes live above the level at the start.
async fn peak_bytes<T>(f: impl Future<Output = T>) -> (T, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    TRACKED.with(|t| t.set(true));
    let out = f.await;
    TRACKED.with(|t| t.set(false));
    let peak = PEAK.load(Ordering::Relaxed) - base;
    (out, peak.max(0) as usize)
}

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`), in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

// ---------------------------------------------------------------------------------------------
// The servers: rmcp Streamable HTTP servers with 50 realistic tools, `sum` and `text`.

const PAYLOAD: usize = 8 * 1024 * 1024;

struct Shared {
    tools: Vec<Tool>,
    text: String,
}

#[derive(Clone)]
struct BenchServer {
    shared: Arc<Shared>,
}

impl ServerHandler for BenchServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
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
            "sum" => (int("a") + int("b")).to_string(),
            "text" => {
                let n = (int("n").max(0) as usize).min(self.shared.text.len());
                self.shared.text[..n].to_string()
            }
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// 50 tools with schemas like real servers publish (a GitHub/Jira/Slack-ish mix), then `sum` and
/// `text`. The 50 come to about 21 KB of `tools/list` JSON.
fn tools() -> Vec<Tool> {
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

fn service(shared: &Arc<Shared>) -> StreamableHttpService<BenchServer, LocalSessionManager> {
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
fn rechunk(response: Response, frame: usize) -> Response {
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

fn router(shared: &Arc<Shared>) -> axum::Router {
    let framed = |path: &str, frame: usize| {
        axum::Router::new()
            .nest_service(path, service(shared))
            .layer(axum::middleware::map_response(
                move |r: Response| async move { rechunk(r, frame) },
            ))
    };
    axum::Router::new()
        .nest_service("/mcp", service(shared))
        .merge(framed("/f1k", 1024))
        .merge(framed("/f16k", 16 * 1024))
        .merge(framed("/f64k", 64 * 1024))
}

struct Addrs {
    nodelay: SocketAddr,
    plain: SocketAddr,
    listing_bytes: usize,
}

/// Starts both servers on their own thread: one sets TCP_NODELAY on every accepted socket, the
/// other is plain `axum::serve`.
fn start_servers() -> Addrs {
    let text: String = (0..PAYLOAD)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let tools = tools();
    let listing_bytes = serde_json::to_vec(&ListToolsResult::with_all_items(tools[..50].to_vec()))
        .expect("serializes")
        .len();
    let shared = Arc::new(Shared { tools, text });
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
                    let _ = tcp.set_nodelay(true);
                });
                let a = tokio::spawn(axum::serve(nodelay, router(&shared)).into_future());
                let _ = axum::serve(plain, router(&shared)).await;
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

// ---------------------------------------------------------------------------------------------
// The contenders.

/// Our Pack, installed and constructed exactly as a runvil Host does.
fn our_pack(servers: Value) -> Box<dyn Pack> {
    let mut packs = Packs::new();
    plugin_mcp::install(&mut packs, &json!({ "mcp": servers }));
    let mut services = Services::new();
    services.insert(&TOKIO_RUNTIME, tokio::runtime::Handle::current());
    let spec = packs.get("runvil/mcp").expect("install inserts runvil/mcp");
    spec.construct("mcp", &services)
        .expect("the Pack constructs")
}

/// Spins (yielding to the runtime, which polls its I/O driver between spins) until `n` servers
/// are ready; panics with the listing after `limit`.
async fn wait_ready(pack: &dyn Pack, n: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
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

type RmcpClient = RunningService<RoleClient, ClientConfig>;

/// rmcp's client as its docs show it: `from_uri` (its default reqwest client keeps no idle
/// connections).
async fn rmcp_default(url: &str) -> RmcpClient {
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    ClientConfig::default()
        .serve(transport)
        .await
        .expect("rmcp connects")
}

/// rmcp's client on a pooled `reqwest::Client`.
async fn rmcp_pooled(url: &str) -> RmcpClient {
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(url.to_string()),
    );
    ClientConfig::default()
        .serve(transport)
        .await
        .expect("rmcp connects")
}

/// The floor: raw `reqwest` POSTs on an initialized session, reading whole bodies.
struct Floor {
    http: reqwest::Client,
    url: String,
    session: String,
    next_id: std::sync::atomic::AtomicU64,
}

impl Floor {
    async fn new(url: &str) -> Floor {
        Floor::with_pool(url, true).await
    }

    /// `pooled = false`: no idle connections are kept (a new connection per request).
    async fn with_pool(url: &str, pooled: bool) -> Floor {
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
    fn request(&self, body: Bytes) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", "2025-11-25")
            .body(body)
    }

    async fn post(&self, body: Bytes) -> Bytes {
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
    async fn post_until_answer(&self, body: Bytes, drain: bool) {
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
    fn call_body(&self, tool: &str, args: &Value) -> Bytes {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        Bytes::from(
            serde_json::to_vec(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}}))
                .unwrap(),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics.

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).unwrap()
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn median_u64(v: &[u64]) -> f64 {
    let mut f: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    median(&mut f)
}

/// One contender's samples over the kept rounds.
struct Series {
    name: String,
    hist: Histogram<u64>,
    /// Median per kept round (ns).
    round_medians: Vec<f64>,
    /// CPU ns per op, per kept round.
    round_cpu: Vec<f64>,
    /// Peak bytes, max over ops.
    peak: usize,
}

impl Series {
    fn new(name: impl Into<String>) -> Series {
        Series {
            name: name.into(),
            hist: hist(),
            round_medians: vec![],
            round_cpu: vec![],
            peak: 0,
        }
    }

    fn keep(&mut self, block: &Block) {
        for &s in &block.samples {
            self.hist.record(s.max(1)).unwrap();
        }
        self.round_medians.push(median_u64(&block.samples));
        if !block.samples.is_empty() {
            self.round_cpu
                .push(block.cpu_ns as f64 / block.samples.len() as f64);
        }
        self.peak = self.peak.max(block.peak);
    }

    fn p50_us(&self) -> f64 {
        self.hist.value_at_quantile(0.5) as f64 / 1e3
    }
    fn p99_us(&self) -> f64 {
        self.hist.value_at_quantile(0.99) as f64 / 1e3
    }
    fn cpu_us(&self) -> f64 {
        median(&mut self.round_cpu.clone()) / 1e3
    }
}

/// Median over rounds of `a`'s round median ÷ `b`'s round median.
fn ratio(a: &Series, b: &Series) -> f64 {
    let mut r: Vec<f64> = a
        .round_medians
        .iter()
        .zip(&b.round_medians)
        .map(|(x, y)| x / y)
        .collect();
    median(&mut r)
}

fn cpu_ratio(a: &Series, b: &Series) -> f64 {
    let mut r: Vec<f64> = a
        .round_cpu
        .iter()
        .zip(&b.round_cpu)
        .map(|(x, y)| x / y)
        .collect();
    median(&mut r)
}

#[derive(Default)]
struct Block {
    samples: Vec<u64>,
    cpu_ns: u64,
    peak: usize,
}

/// Runs `op` up to `n` times (stopping early at `deadline`), timing each.
async fn block<F, Fut>(n: usize, deadline: Instant, track_memory: bool, mut op: F) -> Block
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut out = Block::default();
    let cpu = thread_cpu_ns();
    for _ in 0..n {
        let fut = op();
        let start = Instant::now();
        if track_memory {
            let ((), peak) = peak_bytes(fut).await;
            out.peak = out.peak.max(peak);
        } else {
            fut.await;
        }
        out.samples.push(start.elapsed().as_nanos() as u64);
        if Instant::now() > deadline {
            break;
        }
    }
    out.cpu_ns = thread_cpu_ns() - cpu;
    out
}

/// Rounds of interleaved blocks: round `r` runs every contender once, starting at contender
/// `r % k`. Round 0 is discarded. Stops at `rounds` or at `budget`.
async fn rounds<const K: usize>(
    series: &mut [Series; K],
    rounds: usize,
    budget: Duration,
    mut run: impl AsyncFnMut(usize, Instant) -> Block,
) -> usize {
    let deadline = Instant::now() + budget;
    let mut kept = 0;
    for r in 0..rounds {
        let mut blocks: Vec<Option<Block>> = (0..K).map(|_| None).collect();
        for k in 0..K {
            let c = (r + k) % K;
            blocks[c] = Some(run(c, deadline).await);
        }
        if r > 0 {
            for (s, b) in series.iter_mut().zip(blocks) {
                s.keep(&b.unwrap());
            }
            kept += 1;
        }
        if Instant::now() > deadline && r >= 2 {
            break;
        }
    }
    kept
}

// ---------------------------------------------------------------------------------------------

struct Plan {
    /// `--only m1,m4`: run only these sections (for profiling); M6's p99 part needs m1.
    only: Option<Vec<String>>,
    m1_rounds: usize,
    m1_calls: usize,
    m2_rounds: usize,
    m2_starts: usize,
    m2_decodes: usize,
    m3_rounds: usize,
    m3_starts: usize,
    m4_rounds: usize,
    m4_calls: usize,
    m6_renders: usize,
    m6_plain_rounds: usize,
    m6_plain_calls: usize,
    budget: Duration,
}

impl Plan {
    fn runs(&self, section: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|s| s == section))
    }
    fn full() -> Plan {
        Plan {
            only: None,
            m1_rounds: 21,
            m1_calls: 200,
            m2_rounds: 11,
            m2_starts: 20,
            m2_decodes: 200,
            m3_rounds: 11,
            m3_starts: 5,
            m4_rounds: 6,
            m4_calls: 3,
            m6_renders: 5000,
            m6_plain_rounds: 6,
            m6_plain_calls: 100,
            budget: Duration::from_secs(40),
        }
    }
    fn smoke() -> Plan {
        Plan {
            only: None,
            m1_rounds: 6,
            m1_calls: 50,
            m2_rounds: 4,
            m2_starts: 5,
            m2_decodes: 50,
            m3_rounds: 4,
            m3_starts: 2,
            m4_rounds: 3,
            m4_calls: 1,
            m6_renders: 1000,
            m6_plain_rounds: 3,
            m6_plain_calls: 30,
            budget: Duration::from_secs(6),
        }
    }
}

struct Row {
    metric: String,
    what: String,
    p50: String,
    p99: String,
    extra: String,
}

fn row(metric: &str, s: &Series, unit_ms: bool, extra: String) -> Row {
    let (p50, p99) = if unit_ms {
        (
            format!("{:.2} ms", s.p50_us() / 1e3),
            format!("{:.2} ms", s.p99_us() / 1e3),
        )
    } else {
        (
            format!("{:.1} µs", s.p50_us()),
            format!("{:.1} µs", s.p99_us()),
        )
    };
    Row {
        metric: metric.into(),
        what: s.name.clone(),
        p50,
        p99,
        extra,
    }
}

fn r2(x: f64) -> Value {
    if x.is_finite() {
        json!((x * 100.0).round() / 100.0)
    } else {
        Value::Null
    }
}

fn main() {
    let smoke = std::env::args().any(|a| a == "--smoke");
    let mut plan = if smoke { Plan::smoke() } else { Plan::full() };
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--only") {
        plan.only = args
            .get(i + 1)
            .map(|o| o.split(',').map(str::to_string).collect());
    }
    if args.iter().any(|a| a == "--probe-client-build") {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..3 {
                let t = Instant::now();
                let c = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .tcp_nodelay(true)
                    .build()
                    .unwrap();
                eprintln!("reqwest::Client build: {:?}", t.elapsed());
                drop(c);
                let t = Instant::now();
                let c = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .tcp_nodelay(true)
                    .tls_certs_only(std::iter::empty())
                    .build()
                    .unwrap();
                eprintln!(
                    "reqwest::Client build, tls_certs_only([]): {:?}",
                    t.elapsed()
                );
                drop(c);
            }
        });
        return;
    }
    let started = Instant::now();
    let addrs = start_servers();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let mut rows: Vec<Row> = vec![];
    let mut summary = serde_json::Map::new();
    rt.block_on(run(&plan, &addrs, &mut rows, &mut summary));

    println!(
        "plugin-mcp vs rmcp 3.11.0 — {} mode, {:.0} s, listing of the 50 tools: {} bytes",
        if smoke { "smoke" } else { "full" },
        started.elapsed().as_secs_f64(),
        addrs.listing_bytes
    );
    println!("| metric | contender | p50 | p99 | notes |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.metric, r.what, r.p50, r.p99, r.extra
        );
    }
    println!("{}", Value::Object(summary));
    // The server thread runs forever; leave without waiting for it.
    std::process::exit(0);
}

async fn run(
    plan: &Plan,
    addrs: &Addrs,
    rows: &mut Vec<Row>,
    summary: &mut serde_json::Map<String, Value>,
) {
    let url = format!("http://{}/mcp", addrs.nodelay);
    let plain_url = format!("http://{}/mcp", addrs.plain);
    let sum_args = json!({"a": 1, "b": 2});
    let sum_map = sum_args.as_object().unwrap().clone();
    let url_ref = &url;
    let eight: Value = (0..8)
        .map(|i| (format!("s{i}"), json!({"url": url})))
        .collect::<serde_json::Map<_, _>>()
        .into();
    let mut rmcp_version = String::new();
    let mut m6_plain = serde_json::Map::new();

    if plan.runs("m1") {
        // ---- M1 + M5: warm call_dynamic_tool round trip, one in flight; client CPU per call.
        eprintln!("M1/M5: warm round trips ...");
        let pack = our_pack(json!({"s": {"url": url}, "p": {"url": plain_url}}));
        wait_ready(pack.as_ref(), 2, Duration::from_secs(10)).await;
        let rd = rmcp_default(&url).await;
        let rp = rmcp_pooled(&url).await;
        let floor = Floor::new(&url).await;
        rmcp_version = rd
            .peer_info()
            .map(|i| i.protocol_version.to_string())
            .unwrap_or_default();
        let ours_call = |ns: &'static str| {
            let pack = &pack;
            let args = json!({"namespace": ns, "toolName": "sum", "arguments": sum_args});
            move || {
                let args = args.clone();
                async move {
                    let text = pack.call("mcp/call_dynamic_tool", args).await.expect("sum");
                    assert_eq!(text, "3");
                }
            }
        };
        let rmcp_call = |client: &'static RmcpClient| {
            let map = sum_map.clone();
            move || {
                let params = CallToolRequestParams::new("sum").with_arguments(map.clone());
                async move {
                    let r = client.call_tool(params).await.expect("sum");
                    assert!(r.is_error != Some(true));
                }
            }
        };
        // Leaked so the closures can borrow them for 'static; they live to the end anyway.
        let rd: &'static RmcpClient = Box::leak(Box::new(rd));
        let rp: &'static RmcpClient = Box::leak(Box::new(rp));
        let floor: &'static Floor = Box::leak(Box::new(floor));
        let floor_call = || {
            let body = floor.call_body("sum", &sum_args);
            async move {
                let b = floor.post(body).await;
                assert!(!b.is_empty());
            }
        };
        let mut m1 = [
            Series::new("ours"),
            Series::new("rmcp default (from_uri)"),
            Series::new("rmcp pooled reqwest::Client"),
            Series::new("floor: raw reqwest POST"),
        ];
        let n = plan.m1_calls;
        rounds(&mut m1, plan.m1_rounds, plan.budget, async |c, d| match c {
            0 => block(n, d, false, ours_call("s")).await,
            1 => block(n, d, false, rmcp_call(rd)).await,
            2 => block(n, d, false, rmcp_call(rp)).await,
            _ => block(n, d, false, floor_call).await,
        })
        .await;
        let (v_rd, v_rp, v_fl) = (
            ratio(&m1[0], &m1[1]),
            ratio(&m1[0], &m1[2]),
            ratio(&m1[0], &m1[3]),
        );
        rows.push(row(
            "M1 warm call",
            &m1[0],
            false,
            format!("÷ rmcp default {v_rd:.2}, ÷ rmcp pooled {v_rp:.2}, ÷ floor {v_fl:.2}"),
        ));
        for s in &m1[1..] {
            rows.push(row("M1 warm call", s, false, String::new()));
        }
        summary.insert(
            "m1".into(),
            json!({"vs_rmcp": r2(v_rd), "vs_rmcp_pooled": r2(v_rp), "vs_floor": r2(v_fl)}),
        );
        let cpu = cpu_ratio(&m1[0], &m1[1]);
        let cpu_p = cpu_ratio(&m1[0], &m1[2]);
        rows.push(Row {
            metric: "M5 client CPU/call".into(),
            what: "ours / rmcp default / rmcp pooled / floor".into(),
            p50: format!(
                "{:.1} / {:.1} / {:.1} / {:.1} µs",
                m1[0].cpu_us(),
                m1[1].cpu_us(),
                m1[2].cpu_us(),
                m1[3].cpu_us()
            ),
            p99: "—".into(),
            extra: format!(
                "ours ÷ rmcp default {cpu:.2}, ÷ rmcp pooled {cpu_p:.2}, ÷ floor {:.2}",
                cpu_ratio(&m1[0], &m1[3])
            ),
        });
        summary.insert(
        "m5".into(),
        json!({"vs_rmcp": r2(cpu), "vs_rmcp_pooled": r2(cpu_p), "vs_floor": r2(cpu_ratio(&m1[0], &m1[3])), "ours_us": r2(m1[0].cpu_us())}),
    );

        // ---- M6 (second half): M1 against the server without TCP_NODELAY.
        eprintln!("M6: round trips against the no-nodelay server ...");
        let rdp: &'static RmcpClient = Box::leak(Box::new(rmcp_default(&plain_url).await));
        let rpp: &'static RmcpClient = Box::leak(Box::new(rmcp_pooled(&plain_url).await));
        let mut plain = [
            Series::new("ours (no-nodelay server)"),
            Series::new("rmcp default (no-nodelay server)"),
            Series::new("rmcp pooled (no-nodelay server)"),
        ];
        let n = plan.m6_plain_calls;
        rounds(
            &mut plain,
            plan.m6_plain_rounds,
            plan.budget,
            async |c, d| match c {
                0 => block(n, d, false, ours_call("p")).await,
                1 => block(n, d, false, rmcp_call(rdp)).await,
                _ => block(n, d, false, rmcp_call(rpp)).await,
            },
        )
        .await;
        for s in &plain {
            rows.push(row("M6 call, no-nodelay server", s, false, String::new()));
        }
        let p99_plain = plain[0].p99_us();
        m6_plain.insert("p99_plain_us".into(), r2(p99_plain));
        m6_plain.insert(
            "p99_plain_vs_nodelay".into(),
            r2(p99_plain / m1[0].p99_us()),
        );
        m6_plain.insert(
            "p99_plain_vs_rmcp_pooled".into(),
            r2(p99_plain / plain[2].p99_us()),
        );
        drop(pack);
    }

    if plan.runs("m2") {
        // ---- M2: one server's start (initialize + tools/list, decoded into the registry) vs rmcp
        // connect + list_tools.
        eprintln!("M2: one server's start ...");
        let mut m2 = [
            Series::new("ours: construct → ready (1 server)"),
            Series::new("rmcp default: connect + list_tools"),
            Series::new("rmcp pooled: connect + list_tools"),
        ];
        let n = plan.m2_starts;
        rounds(&mut m2, plan.m2_rounds, plan.budget, async |c, d| {
            let mut b = Block::default();
            let cpu = thread_cpu_ns();
            for _ in 0..n {
                let start = Instant::now();
                match c {
                    0 => {
                        let pack = our_pack(json!({"s": {"url": url_ref}}));
                        wait_ready(pack.as_ref(), 1, Duration::from_secs(10)).await;
                        b.samples.push(start.elapsed().as_nanos() as u64);
                        drop(pack);
                    }
                    _ => {
                        let client = if c == 1 {
                            rmcp_default(url_ref).await
                        } else {
                            rmcp_pooled(url_ref).await
                        };
                        let tools = client.list_tools(None).await.expect("list_tools");
                        assert_eq!(tools.tools.len(), 52);
                        b.samples.push(start.elapsed().as_nanos() as u64);
                        let _ = client.cancel().await;
                    }
                }
                // Let the goodbye (DELETE) finish outside the timed part.
                tokio::time::sleep(Duration::from_millis(2)).await;
                if Instant::now() > d {
                    break;
                }
            }
            b.cpu_ns = thread_cpu_ns() - cpu;
            b
        })
        .await;
        let v2 = ratio(&m2[0], &m2[1]);
        let v2p = ratio(&m2[0], &m2[2]);
        rows.push(row(
            "M2 start + tools/list",
            &m2[0],
            true,
            format!("÷ rmcp default {v2:.2}, ÷ rmcp pooled {v2p:.2}"),
        ));
        rows.push(row("M2 start + tools/list", &m2[1], true, String::new()));
        rows.push(row("M2 start + tools/list", &m2[2], true, String::new()));

        // M2 decode-only, on the bytes of a real tools/list result.
        let list_floor = Floor::new(&url).await;
        let sse = list_floor
            .post(Bytes::from_static(
                br#"{"jsonrpc":"2.0","id":99,"method":"tools/list","params":{}}"#,
            ))
            .await;
        let result_text = extract_result(&sse);
        let mut dec = [
            Series::new("decode: ours (borrowed WireTool → Tool)"),
            Series::new("decode: serde IgnoredAny"),
            Series::new("decode: rmcp ListToolsResult"),
        ];
        let n = plan.m2_decodes;
        let text = result_text.as_str();
        rounds(
            &mut dec,
            plan.m2_rounds,
            plan.budget,
            async |c, d| match c {
                0 => {
                    block(n, d, false, || async {
                        let tools = decode_like_ours(text);
                        assert_eq!(tools.len(), 52);
                        std::hint::black_box(tools);
                    })
                    .await
                }
                1 => {
                    block(n, d, false, || async {
                        let v: serde::de::IgnoredAny = serde_json::from_str(text).unwrap();
                        std::hint::black_box(v);
                    })
                    .await
                }
                _ => {
                    block(n, d, false, || async {
                        let v: ListToolsResult = serde_json::from_str(text).unwrap();
                        std::hint::black_box(v);
                    })
                    .await
                }
            },
        )
        .await;
        let vd = ratio(&dec[0], &dec[1]);
        let vdr = ratio(&dec[0], &dec[2]);
        for s in &dec {
            rows.push(row(
                "M2 decode only",
                s,
                false,
                if s.name.contains("ours") {
                    format!(
                        "÷ IgnoredAny {vd:.2}, ÷ rmcp decode {vdr:.2} ({} bytes)",
                        text.len()
                    )
                } else {
                    String::new()
                },
            ));
        }
        summary.insert(
        "m2".into(),
        json!({"vs_rmcp": r2(v2), "vs_rmcp_pooled": r2(v2p), "decode_vs_ignored": r2(vd), "decode_vs_rmcp_decode": r2(vdr)}),
    );
    }

    if plan.runs("m3") {
        // ---- M3: cold start of 8 servers to all ready vs 8 concurrent rmcp clients.
        eprintln!("M3: cold start of 8 servers ...");
        let mut m3 = [
            Series::new("ours: construct → 8 ready"),
            Series::new("rmcp default: 8 × connect + list_tools (JoinSet)"),
        ];
        let n = plan.m3_starts;
        rounds(&mut m3, plan.m3_rounds, plan.budget, async |c, d| {
            let mut b = Block::default();
            for _ in 0..n {
                let start = Instant::now();
                if c == 0 {
                    let pack = our_pack(eight.clone());
                    wait_ready(pack.as_ref(), 8, Duration::from_secs(10)).await;
                    b.samples.push(start.elapsed().as_nanos() as u64);
                    drop(pack);
                } else {
                    let mut set = tokio::task::JoinSet::new();
                    for _ in 0..8 {
                        let url = url_ref.clone();
                        set.spawn(async move {
                            let client = rmcp_default(&url).await;
                            let tools = client.list_tools(None).await.expect("list_tools");
                            assert_eq!(tools.tools.len(), 52);
                            client
                        });
                    }
                    let clients = set.join_all().await;
                    b.samples.push(start.elapsed().as_nanos() as u64);
                    for client in clients {
                        let _ = client.cancel().await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                if Instant::now() > d {
                    break;
                }
            }
            b
        })
        .await;
        let v3 = ratio(&m3[0], &m3[1]);
        rows.push(row(
            "M3 cold start ×8",
            &m3[0],
            true,
            format!("÷ rmcp {v3:.2}"),
        ));
        rows.push(row("M3 cold start ×8", &m3[1], true, String::new()));
        summary.insert("m3".into(), json!({"vs_rmcp": r2(v3)}));
    }

    if plan.runs("m6") {
        // ---- M6 (first half): get_dynamic_tools render for 8 servers × 52 tools.
        eprintln!("M6: render ...");
        let pack8 = our_pack(eight.clone());
        wait_ready(pack8.as_ref(), 8, Duration::from_secs(10)).await;
        let all = pack8
            .call("mcp/get_dynamic_tools", json!({}))
            .await
            .unwrap();
        let one = pack8
            .call("mcp/get_dynamic_tools", json!({"namespace": "s3"}))
            .await
            .unwrap();
        let mut m6 = [
            Series::new("render: get_dynamic_tools {} (8 × 52 names)"),
            Series::new("floor: copy of the same bytes"),
            Series::new("render: get_dynamic_tools {namespace} (52 tools + schemas)"),
            Series::new("floor: copy of the same bytes "),
        ];
        let n = plan.m6_renders / 10;
        let (all_ref, one_ref, p8) = (&all, &one, pack8.as_ref());
        rounds(&mut m6, 11, plan.budget, async |c, d| match c {
            0 => {
                block(n, d, false, || async {
                    let s = p8.call("mcp/get_dynamic_tools", json!({})).await.unwrap();
                    std::hint::black_box(s);
                })
                .await
            }
            1 => {
                block(n, d, false, || async {
                    std::hint::black_box(std::hint::black_box(all_ref).clone());
                })
                .await
            }
            2 => {
                block(n, d, false, || async {
                    let s = p8
                        .call("mcp/get_dynamic_tools", json!({"namespace": "s3"}))
                        .await
                        .unwrap();
                    std::hint::black_box(s);
                })
                .await
            }
            _ => {
                block(n, d, false, || async {
                    std::hint::black_box(std::hint::black_box(one_ref).clone());
                })
                .await
            }
        })
        .await;
        rows.push(row(
            "M6 render",
            &m6[0],
            false,
            format!("{} bytes; ÷ floor {:.1}", all.len(), ratio(&m6[0], &m6[1])),
        ));
        rows.push(row("M6 render", &m6[1], false, String::new()));
        rows.push(row(
            "M6 render",
            &m6[2],
            false,
            format!("{} bytes; ÷ floor {:.1}", one.len(), ratio(&m6[2], &m6[3])),
        ));
        rows.push(row("M6 render", &m6[3], false, String::new()));
        summary.insert(
            "m6".into(),
            json!({
                "render_us": r2(m6[0].p50_us()),
                "render_vs_floor": r2(ratio(&m6[0], &m6[1])),
                "render_namespace_us": r2(m6[2].p50_us()),
            }),
        );
        drop(pack8);
    }

    if plan.runs("m4") {
        // ---- Connection-reuse policies, measured with raw reqwest on both servers.
        if plan.runs("policy") {
            eprintln!("policy: connection reuse ...");
            for (server, addr) in [("nodelay", addrs.nodelay), ("no-nodelay", addrs.plain)] {
                let u = format!("http://{addr}/mcp");
                let pooled = Floor::new(&u).await;
                let fresh = Floor::with_pool(&u, false).await;
                let (pooled, fresh, sa) = (&pooled, &fresh, &sum_args);
                let mut s = [
                    Series::new(format!("{server}: pooled, read to end")),
                    Series::new(format!("{server}: new connection per call")),
                    Series::new(format!("{server}: pooled, stop at answer, drop rest")),
                    Series::new(format!(
                        "{server}: pooled, stop at answer, drain rest in a task"
                    )),
                ];
                let n = plan.m6_plain_calls / 2;
                rounds(
                    &mut s,
                    plan.m6_plain_rounds,
                    plan.budget,
                    async |c, d| match c {
                        0 => {
                            block(n, d, false, || async {
                                pooled.post(pooled.call_body("sum", sa)).await;
                            })
                            .await
                        }
                        1 => {
                            block(n, d, false, || async {
                                fresh.post(fresh.call_body("sum", sa)).await;
                            })
                            .await
                        }
                        2 => {
                            block(n, d, false, || async {
                                pooled
                                    .post_until_answer(pooled.call_body("sum", sa), false)
                                    .await
                            })
                            .await
                        }
                        _ => {
                            block(n, d, false, || async {
                                pooled
                                    .post_until_answer(pooled.call_body("sum", sa), true)
                                    .await
                            })
                            .await
                        }
                    },
                )
                .await;
                for x in &s {
                    rows.push(row("policy (raw reqwest)", x, false, String::new()));
                }
            }
        }

        // ---- M4: one 8 MiB text result as one SSE event, in 1/16/64 KiB frames.
        eprintln!("M4: 8 MiB results ...");
        let mut m4 = serde_json::Map::new();
        let text_args = json!({"n": PAYLOAD});
        for (path, label) in [("f1k", "1k"), ("f16k", "16k"), ("f64k", "64k")] {
            let furl = format!("http://{}/{path}", addrs.nodelay);
            let pack = our_pack(json!({"f": {"url": furl}}));
            wait_ready(pack.as_ref(), 1, Duration::from_secs(10)).await;
            let rc = rmcp_default(&furl).await;
            let fl = Floor::new(&furl).await;
            let (p, rc, fl, ta) = (pack.as_ref(), &rc, &fl, &text_args);
            let mut s = [
                Series::new(format!("ours, {label} frames")),
                Series::new(format!("rmcp default, {label} frames")),
                Series::new(format!("floor: raw bytes(), {label} frames")),
            ];
            let n = plan.m4_calls;
            rounds(&mut s, plan.m4_rounds, plan.budget, async |c, d| match c {
                0 => {
                    block(n, d, true, || async {
                        let args = json!({"namespace": "f", "toolName": "text", "arguments": ta});
                        let t = p.call("mcp/call_dynamic_tool", args).await.expect("text");
                        assert_eq!(t.len(), PAYLOAD);
                    })
                    .await
                }
                1 => {
                    block(n, d, true, || async {
                        let params = CallToolRequestParams::new("text")
                            .with_arguments(ta.as_object().unwrap().clone());
                        let r = rc.call_tool(params).await.expect("text");
                        assert_eq!(r.content.len(), 1);
                    })
                    .await
                }
                _ => {
                    block(n, d, true, || async {
                        let b = fl.post(fl.call_body("text", ta)).await;
                        assert!(b.len() > PAYLOAD);
                    })
                    .await
                }
            })
            .await;
            let (vr, vf) = (ratio(&s[0], &s[1]), ratio(&s[0], &s[2]));
            let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
            rows.push(row(
                "M4 8 MiB result",
                &s[0],
                true,
                format!(
                    "÷ rmcp {vr:.2}, ÷ floor {vf:.2}; peak {:.1} MiB ({:.2}× payload)",
                    mib(s[0].peak),
                    s[0].peak as f64 / PAYLOAD as f64
                ),
            ));
            rows.push(row(
                "M4 8 MiB result",
                &s[1],
                true,
                format!("peak {:.1} MiB", mib(s[1].peak)),
            ));
            rows.push(row(
                "M4 8 MiB result",
                &s[2],
                true,
                format!("peak {:.1} MiB", mib(s[2].peak)),
            ));
            m4.insert(format!("vs_rmcp_{label}"), r2(vr));
            m4.insert(format!("vs_floor_{label}"), r2(vf));
            m4.insert(
                format!("mem_x_payload_{label}"),
                r2(s[0].peak as f64 / PAYLOAD as f64),
            );
            drop(pack);
            let _ = std::hint::black_box(rc);
        }
        summary.insert("m4".into(), Value::Object(m4));
    }

    if let Some(Value::Object(m6)) = summary.get_mut("m6") {
        m6.extend(m6_plain);
    } else if !m6_plain.is_empty() {
        summary.insert("m6".into(), Value::Object(m6_plain));
    }
    // Keep key order m1..m6 for readers.
    let mut ordered = serde_json::Map::new();
    for k in ["m1", "m2", "m3", "m4", "m5", "m6"] {
        if let Some(v) = summary.remove(k) {
            ordered.insert(k.into(), v);
        }
    }
    *summary = ordered;
    rows.push(Row {
        metric: "info".into(),
        what: format!("rmcp client negotiated protocol {rmcp_version}; ours 2025-11-25"),
        p50: String::new(),
        p99: String::new(),
        extra: String::new(),
    });
}

fn memfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The `result` of the JSON-RPC response inside an SSE body.
fn extract_result(sse: &[u8]) -> String {
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
struct WireList<'a> {
    #[serde(borrow)]
    tools: Vec<WireTool<'a>>,
    #[serde(rename = "nextCursor", default)]
    #[allow(dead_code)]
    next_cursor: Option<String>,
}

#[derive(serde::Deserialize)]
struct WireTool<'a> {
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
struct OwnedTool {
    name: String,
    description: String,
    input_schema: Box<serde_json::value::RawValue>,
    output_schema: Option<Box<serde_json::value::RawValue>>,
    annotations: Option<Box<serde_json::value::RawValue>>,
}

fn decode_like_ours(text: &str) -> Vec<OwnedTool> {
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
