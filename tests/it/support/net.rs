//! The parts every fake server of [`super`] is built from: a listener on 127.0.0.1 on a port the
//! OS picks, an accept loop serving each connection with hyper's HTTP/1 server on a task of its
//! own (kept, so a server can cut its connections the way a restarting server does), the header
//! and body helpers of a recorded request, and a bounded wait on what a server recorded.
//!
//! [`super::hostile`] is also compiled into the fuzz target `decode_reply`, which includes this
//! file next to it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::error::Error;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// The body type of every fake server's responses: whole or streamed, an `Err` item cutting the
/// connection mid-body.
pub type ReplyBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// Claims `port` for this process: whether no listener of these tests had it before. The sign-in
/// store is keyed by a server's URL and shared by the process, so a reused port would find the
/// grant and registration of an earlier server.
pub fn claim_port(port: u16) -> bool {
    static USED: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut used = USED.lock().unwrap_or_else(|e| e.into_inner());
    if used.contains(&port) {
        return false;
    }
    used.push(port);
    true
}

/// A listener on 127.0.0.1 on a port no earlier listener of these tests had ([`claim_port`]).
pub async fn unused_loopback() -> TcpListener {
    // Held until a fresh port is found, so the kernel offers another one each time.
    let mut refused = Vec::new();
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        if claim_port(listener.local_addr().unwrap().port()) {
            return listener;
        }
        refused.push(listener);
    }
}

/// A listener on 127.0.0.1 on a port the OS picked that no other listener of these tests had
/// ([`claim_port`]), and that port.
pub async fn loopback() -> (TcpListener, u16) {
    let listener = unused_loopback().await;
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// A port on 127.0.0.1 that nothing listens on (bound, read, released), and that no other
/// listener of these tests had ([`claim_port`]).
pub fn free_port() -> u16 {
    let mut refused = Vec::new();
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        if claim_port(port) {
            return port;
        }
        refused.push(listener);
    }
}

/// The connections a server has accepted, numbered from 0 in order of arrival; each one that is
/// still open can be cut.
#[derive(Default)]
pub struct Connections {
    open: Mutex<HashMap<u64, AbortHandle>>,
    next: AtomicU64,
    /// Bumped (under `open`'s lock) by [`Connections::close`]: an accept loop started before
    /// drops what it accepts from then on.
    closes: AtomicU64,
}

impl Connections {
    /// How many connections were accepted so far.
    pub fn accepted(&self) -> u64 {
        self.next.load(Ordering::SeqCst)
    }

    /// Cuts every open connection but `keep` (which goes on, e.g. to finish its answer).
    pub fn cut(&self, keep: Option<u64>) {
        Self::cut_in(&mut self.open.lock().unwrap(), keep);
    }

    /// As [`Connections::cut`], and the accept loop running now serves nothing more, even a
    /// connection it is accepting at this moment (the loop's task is being aborted: a server
    /// going down). A loop started afterwards serves as usual.
    pub fn close(&self, keep: Option<u64>) {
        let mut open = self.open.lock().unwrap();
        self.closes.fetch_add(1, Ordering::SeqCst);
        Self::cut_in(&mut open, keep);
    }

    fn cut_in(open: &mut HashMap<u64, AbortHandle>, keep: Option<u64>) {
        for (number, connection) in open.drain() {
            if Some(number) != keep {
                connection.abort();
            }
        }
    }
}

/// Accepts connections on `listener` until the task running it is aborted, serving each over
/// HTTP/1 with `service(number)` on a task of its own, kept in `connections` (no Nagle delay, so
/// a reply sent in pieces arrives in pieces).
pub async fn accept<S, B>(
    listener: TcpListener,
    connections: std::sync::Arc<Connections>,
    service: impl Fn(u64) -> S,
) where
    S: Service<hyper::Request<Incoming>, Response = hyper::Response<B>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn Error + Send + Sync>>,
{
    let life = connections.closes.load(Ordering::SeqCst);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Spawned and entered under the lock, so a `close` either sees it or makes it unserved.
        let mut open = connections.open.lock().unwrap();
        if connections.closes.load(Ordering::SeqCst) != life {
            return;
        }
        let number = connections.next.fetch_add(1, Ordering::SeqCst);
        let service = service(number);
        let task = tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        open.retain(|_, connection| !connection.is_finished());
        open.insert(number, task.abort_handle());
    }
}

/// The whole body of a request (empty when reading it fails).
pub async fn collect(body: Incoming) -> Bytes {
    body.collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default()
}

/// A header as text (invalid UTF-8 replaced), if present.
pub fn header(headers: &hyper::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// A whole body, sent at once.
pub fn full(body: impl Into<Bytes>) -> ReplyBody {
    Full::new(body.into())
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

/// Polls `found` every `every` until it gives a value, for at most `limit` (Tokio time, so a
/// paused clock counts virtual seconds); panics with `what` and `record()` when the time runs out.
pub async fn wait_for<T, R: std::fmt::Debug>(
    limit: Duration,
    every: Duration,
    what: &str,
    mut found: impl FnMut() -> Option<T>,
    record: impl Fn() -> R,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = found() {
            return value;
        }
        if Instant::now() >= deadline {
            panic!(
                "gave up after {limit:?} waiting for {what}; {:#?}",
                record()
            );
        }
        tokio::time::sleep(every).await;
    }
}

/// Takes `snapshot()` every 5 ms until `done` holds for it and returns it, for at most `limit`
/// (as [`wait_for`]); panics with `what` and `record()` when the time runs out.
pub async fn wait_on<T, R: std::fmt::Debug>(
    limit: Duration,
    what: &str,
    snapshot: impl Fn() -> Vec<T>,
    done: impl Fn(&[T]) -> bool,
    record: impl Fn() -> R,
) -> Vec<T> {
    let found = || Some(snapshot()).filter(|now| done(now));
    wait_for(limit, Duration::from_millis(5), what, found, record).await
}

/// Whether a request body is the client's era probe, `server/discover` (MCP 2026-07-28).
pub fn is_era_probe(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .is_ok_and(|rpc| rpc["method"] == "server/discover")
}

/// What a legacy (2025-era) server answers the era probe, as the Python SDK does: `400` with a
/// JSON-RPC error of its own (`-32000`), no modern error. The legacy harnesses answer the probe
/// with it and leave it out of their trails, so their tests read as before; the era tests
/// (`tests/it/eras.rs`) pin the probe itself.
pub fn legacy_probe_answer() -> hyper::Response<ReplyBody> {
    hyper::Response::builder()
        .status(400)
        .header("content-type", "application/json")
        .body(full(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}"#,
        ))
        .unwrap()
}

/// Waits until `trail()` has kept its length for `quiet` (at most `limit`, Tokio time), polling
/// every 10 ms; returns the trail then.
pub async fn settle<T>(quiet: Duration, limit: Duration, trail: impl Fn() -> Vec<T>) -> Vec<T> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut seen = trail().len();
    let mut since = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let now = trail().len();
        if now != seen {
            seen = now;
            since = tokio::time::Instant::now();
        } else if since.elapsed() >= quiet || tokio::time::Instant::now() >= deadline {
            return trail();
        }
    }
}
