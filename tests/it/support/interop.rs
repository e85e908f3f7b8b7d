//! Harness for the real-server tests (`interop`, all `#[ignore]`d): finding the peers that
//! `.ci/interop-setup.sh` installs into `.interop/`, running them on a free loopback port (killed
//! when dropped), and a recording reverse proxy between the Pack and a peer, so a test can assert
//! exactly what crossed the wire (methods, statuses, session ids, bodies) and can cut every
//! connection the way a restarting server would.

use std::convert::Infallible;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::Value;
use tokio::task::AbortHandle;

use super::net::{self, Connections, ReplyBody as ProxyBody, free_port, header};

/// Set to `1` (as `.ci/interop.sh` does) to make a missing peer a failure instead of a skip.
pub const STRICT_ENV: &str = "PLUGIN_MCP_INTEROP";

/// How long a peer may take to listen on its port.
const START_LIMIT: Duration = Duration::from_secs(60);

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `.interop/<relative>` if it exists. When it does not: panics under `PLUGIN_MCP_INTEROP=1`,
/// else prints a `skipped:` line straight to stderr (past the test harness's capture, so it
/// shows in `cargo test -- --ignored`) and returns `None`.
pub fn installed(test: &str, relative: &str) -> Option<PathBuf> {
    let strict = std::env::var(STRICT_ENV).as_deref() == Ok("1");
    match lookup(root().join(".interop").join(relative), strict) {
        Lookup::Found(path) => Some(path),
        Lookup::Skip(path) => {
            // One write straight to the process's stderr, past the harness's capture.
            let line = format!(
                "skipped: {test}: {} is missing; run .ci/interop-setup.sh (with {STRICT_ENV}=1 this is a failure)\n",
                path.display()
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
        Lookup::Fail(path) => panic!(
            "{test}: {} is missing and {STRICT_ENV}=1 demands the interop peers; run .ci/interop-setup.sh",
            path.display()
        ),
    }
}

#[derive(Debug, PartialEq)]
enum Lookup {
    Found(PathBuf),
    Skip(PathBuf),
    Fail(PathBuf),
}

fn lookup(path: PathBuf, strict: bool) -> Lookup {
    match (path.exists(), strict) {
        (true, _) => Lookup::Found(path),
        (false, false) => Lookup::Skip(path),
        (false, true) => Lookup::Fail(path),
    }
}

#[test]
fn a_missing_peer_skips_or_fails() {
    let missing = root().join(".interop/no-such-peer");
    let found = root().join("Cargo.toml");
    assert_eq!(
        lookup(missing.clone(), false),
        Lookup::Skip(missing.clone())
    );
    assert_eq!(lookup(missing.clone(), true), Lookup::Fail(missing));
    assert_eq!(lookup(found.clone(), true), Lookup::Found(found.clone()));
    assert_eq!(lookup(found.clone(), false), Lookup::Found(found));
}

/// A peer process listening on `127.0.0.1:<port>`; killed (and reaped) when dropped.
pub struct Peer {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    pub port: u16,
    log: PathBuf,
    child: Option<Child>,
}

impl Peer {
    /// Starts `program args...` with a minimal environment plus `envs` (`{port}` in an arg or
    /// env value is replaced by the chosen port), its output going to a log file, and waits
    /// (bounded) until it accepts connections.
    pub async fn start(name: &str, program: &Path, args: &[&str], envs: &[(&str, &str)]) -> Peer {
        let port = free_port();
        let log = std::env::temp_dir().join(format!(
            "plugin-mcp-interop-{}-{name}-{port}.log",
            std::process::id()
        ));
        let mut peer = Peer {
            name: name.to_string(),
            program: program.to_path_buf(),
            args: args.iter().map(|a| a.to_string()).collect(),
            envs: envs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            port,
            log,
            child: None,
        };
        peer.spawn().await;
        peer
    }

    /// The peer's base URL (no path).
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Kills the process and starts it again (a server restart: every session it had is
    /// gone). It listens on a new free port, so no other socket can have taken the old one in
    /// between: point the proxy at [`Peer::base`] again ([`Proxy::restart_upstream`]).
    pub async fn restart(&mut self) {
        self.kill();
        self.port = free_port();
        self.spawn().await;
    }

    /// The peer's output so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the peer's log file");
        let port = self.port.to_string();
        let fill = |s: &String| s.replace("{port}", &port);
        let child = Command::new(&self.program)
            .args(self.args.iter().map(fill))
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .envs(self.envs.iter().map(|(k, v)| (k, fill(v))))
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.name));
        self.child = Some(child);
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "{} exited ({status}) before listening on port {}; its output:\n{}",
                    self.name,
                    self.port,
                    self.output()
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "{} did not listen on port {} within {START_LIMIT:?}; its output:\n{}",
                    self.name,
                    self.port,
                    self.output()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- output of {} ---\n{}", self.name, self.output());
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// One HTTP exchange the proxy forwarded.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// `POST`, `GET`, `DELETE`, …
    pub method: String,
    /// The request's `Mcp-Session-Id`.
    pub session: Option<String>,
    /// The request's `MCP-Protocol-Version`.
    pub protocol_version: Option<String>,
    /// The request's `Last-Event-ID`.
    pub last_event_id: Option<String>,
    /// The request body as JSON (`Null` when empty or not JSON).
    pub body: Value,
    /// The upstream's status (`502` when it could not be reached; `0` while waiting).
    pub status: u16,
    /// The response's `Mcp-Session-Id`.
    pub response_session: Option<String>,
    /// The response body, as far as it has been forwarded.
    pub response: Arc<Mutex<Vec<u8>>>,
}

impl Exchange {
    /// `"<HTTP method> <what> <status>"`, where `<what>` is the JSON-RPC method, or `response`
    /// for a message without one (the client answering a server request), or nothing.
    pub fn summary(&self) -> String {
        let what = match self.body.get("method").and_then(Value::as_str) {
            Some(method) => format!(" {method}"),
            None if self.body.is_object() => " response".to_string(),
            None => String::new(),
        };
        format!("{}{what} {}", self.method, self.status)
    }

    /// The response body forwarded so far, as text.
    pub fn response_text(&self) -> String {
        String::from_utf8_lossy(&self.response.lock().unwrap()).into_owned()
    }
}

struct Shared {
    upstream: Mutex<String>,
    client: reqwest::Client,
    log: Mutex<Vec<Exchange>>,
    connections: Arc<Connections>,
}

/// A recording reverse proxy on 127.0.0.1 in front of one upstream base URL. Dropping it stops
/// it and closes every connection.
pub struct Proxy {
    shared: Arc<Shared>,
    port: u16,
    accept: AbortHandle,
}

const HOP_BY_HOP: [&str; 6] = [
    "host",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "upgrade",
];

impl Proxy {
    /// A proxy forwarding to `upstream` (e.g. `http://127.0.0.1:1234`), paths unchanged.
    pub async fn start(upstream: &str) -> Proxy {
        let (listener, port) = net::loopback().await;
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream.to_string()),
            // No pooling: every forwarded request opens its own upstream connection, so a
            // restarted upstream never meets a stale one.
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .pool_max_idle_per_host(0)
                .build()
                .unwrap(),
            log: Mutex::new(Vec::new()),
            connections: Arc::default(),
        });
        let service = {
            let shared = Arc::clone(&shared);
            move |_| {
                let shared = Arc::clone(&shared);
                hyper::service::service_fn(move |request| handle(Arc::clone(&shared), request))
            }
        };
        let connections = Arc::clone(&shared.connections);
        let accept = tokio::spawn(net::accept(listener, connections, service)).abort_handle();
        Proxy {
            shared,
            port,
            accept,
        }
    }

    /// The proxy's URL for `path`, e.g. `http://127.0.0.1:5555/mcp`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Every exchange so far, in order of arrival.
    pub fn log(&self) -> Vec<Exchange> {
        self.shared.log.lock().unwrap().clone()
    }

    /// [`Exchange::summary`] of every exchange so far.
    pub fn summary(&self) -> Vec<String> {
        self.log().iter().map(Exchange::summary).collect()
    }

    /// Restarts `peer` behind the proxy: closes every client connection (as a server going
    /// away does), restarts the peer, and forwards to it from then on. The client's URL stays
    /// the same.
    pub async fn restart_upstream(&self, peer: &mut Peer) {
        self.sever();
        peer.restart().await;
        *self.shared.upstream.lock().unwrap() = peer.base();
    }

    /// Closes every client connection, mid-response or idle.
    pub fn sever(&self) {
        self.shared.connections.cut(None);
    }

    /// Waits (at most `limit`) until some answered exchange (status known) satisfies `found`;
    /// panics with the log otherwise.
    pub async fn wait_for(&self, limit: Duration, found: impl Fn(&Exchange) -> bool) -> Exchange {
        let answered = || self.log().into_iter().find(|e| e.status != 0 && found(e));
        let every = Duration::from_millis(10);
        net::wait_for(limit, every, "an exchange", answered, || self.summary()).await
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.sever();
    }
}

async fn handle(
    shared: Arc<Shared>,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<ProxyBody>, Infallible> {
    let (parts, incoming) = request.into_parts();
    let body = net::collect(incoming).await;
    let response = Arc::new(Mutex::new(Vec::new()));
    let index = {
        let mut log = shared.log.lock().unwrap();
        log.push(Exchange {
            method: parts.method.to_string(),
            session: header(&parts.headers, "mcp-session-id"),
            protocol_version: header(&parts.headers, "mcp-protocol-version"),
            last_event_id: header(&parts.headers, "last-event-id"),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            status: 0,
            response_session: None,
            response: Arc::clone(&response),
        });
        log.len() - 1
    };
    let target = format!(
        "{}{}",
        shared.upstream.lock().unwrap(),
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut forward = shared.client.request(parts.method.clone(), target);
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            forward = forward.header(name.clone(), value.clone());
        }
    }
    let upstream = match forward.body(body).send().await {
        Ok(upstream) => upstream,
        Err(_) => {
            shared.log.lock().unwrap()[index].status = 502;
            let mut reply = hyper::Response::new(net::full("proxy: upstream unreachable"));
            *reply.status_mut() = hyper::StatusCode::BAD_GATEWAY;
            return Ok(reply);
        }
    };
    let answered = {
        let status = upstream.status().as_u16();
        let session = header(upstream.headers(), "mcp-session-id");
        let shared = Arc::clone(&shared);
        move || {
            let mut log = shared.log.lock().unwrap();
            log[index].status = status;
            log[index].response_session = session;
        }
    };
    let mut reply = hyper::Response::builder().status(upstream.status());
    for (name, value) in upstream.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            reply = reply.header(name.clone(), value.clone());
        }
    }
    let streaming = upstream
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !streaming {
        // A whole body: record all of it even when the client stops reading early.
        let bytes = upstream.bytes().await.unwrap_or_default();
        response.lock().unwrap().extend_from_slice(&bytes);
        answered();
        return Ok(reply.body(net::full(bytes)).expect("a valid response"));
    }
    answered();
    let frames = upstream.bytes_stream().map(move |chunk| match chunk {
        Ok(bytes) => {
            response.lock().unwrap().extend_from_slice(&bytes);
            Ok(Frame::data(bytes))
        }
        Err(e) => Err(std::io::Error::other(e.without_url())),
    });
    Ok(reply
        .body(StreamBody::new(frames).boxed_unsync())
        .expect("a valid response"))
}

/// `text` is `prefix`, then a time as Node's `toLocaleTimeString()` writes it in the `en-US`
/// locale (`H:MM:SS AM` / `H:MM:SS PM`, hour 1–12), then `suffix`; panics naming the
/// difference otherwise.
pub fn assert_with_time(text: &str, prefix: &str, suffix: &str) {
    let middle = text
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(suffix))
        .unwrap_or_else(|| {
            panic!("{text:?} is not {prefix:?} + <time> + {suffix:?}");
        });
    assert!(
        is_locale_time(middle),
        "{middle:?} in {text:?} is not an en-US time"
    );
}

fn is_locale_time(text: &str) -> bool {
    let Some((clock, meridiem)) = text.split_once(' ') else {
        return false;
    };
    let parts: Vec<&str> = clock.split(':').collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    matches!(meridiem, "AM" | "PM")
        && parts.len() == 3
        && parts.iter().all(|p| digits(p))
        && matches!(parts[0].len(), 1 | 2)
        && !parts[0].starts_with('0')
        && parts[1].len() == 2
        && parts[2].len() == 2
        && (1..=12).contains(&parts[0].parse::<u8>().unwrap())
        && parts[1].parse::<u8>().unwrap() < 60
        && parts[2].parse::<u8>().unwrap() < 60
}

#[test]
fn locale_times() {
    for good in ["9:05:02 PM", "12:00:00 AM", "1:59:59 PM"] {
        assert!(is_locale_time(good), "{good}");
    }
    for bad in [
        "09:05:02 PM",
        "13:00:00 PM",
        "9:5:02 PM",
        "9:05:60 PM",
        "9:05:02 pm",
        "9:05:02\u{202f}PM",
        "9:05:02",
        "9:05:02 PM ",
        "",
    ] {
        assert!(!is_locale_time(bad), "{bad}");
    }
}
