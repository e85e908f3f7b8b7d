//! One configured server: its status, its tools, and the background task that starts it
//! (DESIGN §4, seed 001).
//!
//! A start is connect + `initialize` + `notifications/initialized` + every `tools/list` page,
//! inside [`START_DEADLINE`]. A failed start sets the status to `error` with the reason and is
//! tried again after 1 s, 2 s, 4 s … up to 60 s (`backon`), until it succeeds. `ready` is final.
//! When the Pack is dropped the task ends the session with a best-effort `DELETE`.
//!
//! Once ready, the task keeps the listing live (README "Lifecycle"; ARCHITECTURE "The listing's
//! life"): it re-lists when the server says its tools changed, when the session was initialized
//! again, or when a call names a tool the listing lacks ([`Server::relist_after_miss`]), and it
//! holds the standalone `GET` stream open for a server that declared `listChanged`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};

use backon::{BackoffBuilder, ExponentialBuilder, Retryable};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::http::{Connection, Error, Listened};
use crate::limits::{
    self, MAX_DESCRIPTION_BYTES, MAX_PAGES, MAX_SCHEMA_BYTES, MAX_TOOL_NAME_BYTES, MAX_TOOLS,
    START_DEADLINE,
};

/// A server's status as the listing shows it.
#[derive(Clone)]
pub(crate) enum Status {
    /// Its first start has not finished yet.
    Loading,
    /// Started; its tools, sorted by name.
    Ready(Arc<Vec<Tool>>),
    /// Its config was refused, or its last start failed (and another is on the way).
    Error(Arc<str>),
}

/// A tool as the listing shows it; all text scrubbed and bounded.
pub(crate) struct Tool {
    pub(crate) name: String,
    /// The description, else the title, else the name (seed 001).
    pub(crate) description: String,
    pub(crate) input_schema: Box<RawValue>,
    pub(crate) output_schema: Option<Box<RawValue>>,
    pub(crate) annotations: Option<Box<RawValue>>,
}

/// One namespace of the Pack.
pub(crate) struct Server {
    pub(crate) namespace: Arc<str>,
    status: RwLock<Status>,
    /// `None` for a refused entry.
    pub(crate) connection: Option<Arc<Connection>>,
    /// When a miss last asked this server for a re-listing, and that request's number.
    last_miss: Mutex<Option<(tokio::time::Instant, u64)>>,
}

impl Server {
    /// A namespace whose config entry was refused.
    pub(crate) fn refused(namespace: Arc<str>, reason: String) -> Self {
        Self {
            namespace,
            status: RwLock::new(Status::Error(reason.into())),
            connection: None,
            last_miss: Mutex::new(None),
        }
    }

    /// A namespace that will connect; `loading` until its task finishes a start.
    pub(crate) fn remote(namespace: Arc<str>, connection: Arc<Connection>) -> Self {
        Self {
            namespace,
            status: RwLock::new(Status::Loading),
            connection: Some(connection),
            last_miss: Mutex::new(None),
        }
    }

    /// The current status.
    pub(crate) fn status(&self) -> Status {
        self.status
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_status(&self, status: Status) {
        *self.status.write().unwrap_or_else(|e| e.into_inner()) = status;
    }

    /// The background task of a remote server: start until ready (or the Pack is dropped), then
    /// wait for the Pack to be dropped and end the session.
    pub(crate) async fn run(
        self: Arc<Self>,
        connection: Arc<Connection>,
        shutdown: CancellationToken,
    ) {
        let backoff = ExponentialBuilder::new()
            .with_min_delay(limits::RETRY_FIRST)
            .with_max_delay(limits::RETRY_MAX)
            .with_factor(2.0)
            .without_max_times();
        let start = || async {
            let outcome = match tokio::time::timeout(START_DEADLINE, discover(&connection)).await {
                Ok(result) => result,
                Err(_) => Err(format!(
                    "the server did not finish starting (initialize and tools/list) within {} seconds",
                    START_DEADLINE.as_secs()
                )),
            };
            if outcome.is_err() {
                // A start that got as far as a session leaves none behind on the server.
                connection.close().await;
            }
            outcome
        };
        let started = start
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .notify(|reason: &String, wait| {
                tracing::warn!(namespace = %self.namespace, retry_in_ms = wait.as_millis() as u64, "server failed to start");
                tracing::debug!(namespace = %self.namespace, reason = %reason, "start failure");
                self.set_status(Status::Error(limits::truncate(reason, 2 * limits::MAX_REASON_BYTES).into()));
            });
        tokio::select! {
            outcome = started => match outcome {
                Ok(tools) => {
                    tracing::info!(namespace = %self.namespace, tools = tools.len(), "server ready");
                    self.set_status(Status::Ready(Arc::new(tools)));
                }
                // The backoff has no last attempt; this arm only keeps a future change honest.
                Err(reason) => self.set_status(Status::Error(reason.into())),
            },
            () = shutdown.cancelled() => {}
        }
        if matches!(self.status(), Status::Ready(_)) {
            // Dropping the live future closes the standalone stream before the DELETE.
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = self.live(&connection) => {}
            }
        }
        shutdown.cancelled().await;
        connection.close().await;
    }
}

/// One start: the handshake and every `tools/list` page, bounded by the page, tool, schema and
/// cursor rules of [`crate::limits`]. Returns the tools sorted by name.
async fn discover(connection: &Connection) -> Result<Vec<Tool>, String> {
    connection.initialize().await.map_err(|e| e.message())?;
    list_tools(connection).await
}

/// Every `tools/list` page, bounded like a start's. Returns the tools sorted by name.
async fn list_tools(connection: &Connection) -> Result<Vec<Tool>, String> {
    let mut tools: Vec<Tool> = Vec::new();
    let mut cursors: HashSet<String> = HashSet::new();
    let mut cursor: Option<String> = None;
    for page in 1..=MAX_PAGES {
        let params = match &cursor {
            Some(c) => serde_json::json!({ "cursor": c }),
            None => serde_json::json!({}),
        };
        let id = connection.next_id();
        let next = connection
            .request(id, "tools/list", &params, |result| {
                read_page(connection, result, page)
            })
            .await;
        let (page_tools, next) = next.map_err(|e: Error| e.message())?;
        tools.extend(page_tools);
        if tools.len() > MAX_TOOLS {
            return Err(format!(
                "the server listed more than {MAX_TOOLS} tools (at least {} by page {page})",
                tools.len()
            ));
        }
        let Some(next) = next.filter(|c| !c.is_empty()) else {
            return Ok(finish(connection, tools));
        };
        if cursor.as_deref() == Some(next.as_str()) {
            return Err(format!(
                "tools/list page {page} returned the cursor it was asked with, so pagination would never end"
            ));
        }
        if !cursors.insert(next.clone()) {
            return Err(format!(
                "tools/list page {page} returned a cursor already used by an earlier page, so pagination would loop"
            ));
        }
        cursor = Some(next);
    }
    Err(format!(
        "the server had more than {MAX_PAGES} pages of tools (tools/list still returned a nextCursor)"
    ))
}

/// Sorts by name and keeps the first of any duplicate name (a later one is dropped, logged).
fn finish(connection: &Connection, mut tools: Vec<Tool>) -> Vec<Tool> {
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let before = tools.len();
    tools.dedup_by(|later, earlier| later.name == earlier.name);
    if tools.len() != before {
        tracing::debug!(namespace = %connection.namespace(), dropped = before - tools.len(), "dropped tools with duplicate names");
    }
    tools
}

#[derive(Deserialize)]
struct ListToolsResult<'a> {
    #[serde(borrow)]
    tools: Vec<WireTool<'a>>,
    #[serde(rename = "nextCursor", default)]
    next_cursor: Option<String>,
}

#[derive(Deserialize)]
struct WireTool<'a> {
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    title: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    description: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "inputSchema", borrow, default)]
    input_schema: Option<&'a RawValue>,
    #[serde(rename = "outputSchema", borrow, default)]
    output_schema: Option<&'a RawValue>,
    #[serde(borrow, default)]
    annotations: Option<&'a RawValue>,
}

type Page = (Vec<Tool>, Option<String>);

/// Decodes one `tools/list` result into tools fit for the listing.
fn read_page(connection: &Connection, result: &RawValue, page: usize) -> Result<Page, String> {
    let malformed = || format!("tools/list page {page} is not a valid ListToolsResult");
    if !result.get().starts_with('{') {
        return Err(malformed());
    }
    let list: ListToolsResult<'_> = serde_json::from_str(result.get()).map_err(|_| malformed())?;
    let redactor = connection.redactor();
    let mut tools = Vec::with_capacity(list.tools.len());
    for (i, wire) in list.tools.into_iter().enumerate() {
        if wire.name.is_empty() || wire.name.len() > MAX_TOOL_NAME_BYTES {
            return Err(format!(
                "tool {} of tools/list page {page} has a name of {} bytes (allowed: 1 to {MAX_TOOL_NAME_BYTES})",
                i + 1,
                wire.name.len()
            ));
        }
        let schema_bytes = wire.input_schema.map_or(0, |s| s.get().len())
            + wire.output_schema.map_or(0, |s| s.get().len());
        if schema_bytes > MAX_SCHEMA_BYTES {
            return Err(format!(
                "tool {} of tools/list page {page} has schemas of {schema_bytes} bytes (limit {MAX_SCHEMA_BYTES})",
                i + 1
            ));
        }
        let name = redactor.scrub_owned(wire.name.into_owned());
        let description = wire
            .description
            .filter(|d| !d.is_empty())
            .or(wire.title.filter(|t| !t.is_empty()))
            .map_or_else(
                || name.clone(),
                |d| limits::truncate(&redactor.scrub(&d), MAX_DESCRIPTION_BYTES).into_owned(),
            );
        let raw = |raw: &RawValue| -> Box<RawValue> {
            match redactor.scrub_json(raw.get()) {
                std::borrow::Cow::Borrowed(_) => raw.to_owned(),
                std::borrow::Cow::Owned(text) => {
                    RawValue::from_string(text).unwrap_or_else(|_| raw.to_owned())
                }
            }
        };
        tools.push(Tool {
            name,
            description,
            input_schema: wire.input_schema.map_or_else(
                || RawValue::from_string(r#"{"type":"object"}"#.into()).expect("valid JSON"),
                raw,
            ),
            output_schema: wire.output_schema.map(raw),
            annotations: wire.annotations.map(raw),
        });
    }
    Ok((tools, list.next_cursor))
}

// The listing's life once ready: re-listings (coalesced, one at a time), the miss throttle, and
// the standalone GET stream.

impl Server {
    /// What a ready server's task does until the Pack is dropped: runs the re-list worker and
    /// the standalone stream's loop. Never returns.
    async fn live(&self, connection: &Connection) {
        let relists = async {
            loop {
                let covered = connection.signals().relist_wanted().await;
                self.relist(connection).await;
                connection.signals().relisted(covered);
            }
        };
        tokio::join!(relists, listen(connection));
    }

    /// One re-listing: every page within [`limits::RELIST_DEADLINE`]. Success replaces the tools
    /// at once; failure keeps them (and `ready`) and logs a warning with the reason.
    async fn relist(&self, connection: &Connection) {
        let outcome =
            match tokio::time::timeout(limits::RELIST_DEADLINE, list_tools(connection)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(format!(
                    "tools/list did not finish within {} seconds",
                    limits::RELIST_DEADLINE.as_secs()
                )),
            };
        match outcome {
            Ok(tools) => {
                tracing::info!(namespace = %self.namespace, tools = tools.len(), "tools re-listed");
                self.set_status(Status::Ready(Arc::new(tools)));
            }
            Err(reason) => {
                tracing::warn!(namespace = %self.namespace, reason = %reason, "re-listing the tools failed; keeping the previous list");
            }
        }
    }

    /// A call or lookup named a tool this ready server does not list: re-lists once and waits
    /// for it. Within [`limits::MISS_INTERVAL`] of the last miss that re-listed, asks for no
    /// other re-listing but waits for that one to end (at once when it has). Returns whether the
    /// caller should look again (false for a refused entry).
    ///
    /// # Cancel safety
    /// Cancel safe: the re-listing runs in the server's task; dropping this only stops waiting.
    pub(crate) async fn relist_after_miss(&self) -> bool {
        let Some(connection) = &self.connection else {
            return false;
        };
        let signals = connection.signals();
        let number = {
            let mut last = self.last_miss.lock().unwrap_or_else(|e| e.into_inner());
            let now = tokio::time::Instant::now();
            match *last {
                Some((at, number)) if now.duration_since(at) < limits::MISS_INTERVAL => number,
                _ => {
                    tracing::debug!(namespace = %self.namespace, "a call named an unlisted tool; re-listing");
                    let number = signals.request_relist();
                    *last = Some((now, number));
                    number
                }
            }
        };
        signals.wait_relisted(number).await;
        true
    }

    /// The server's `instructions` while it is ready, scrubbed and bounded.
    pub(crate) fn instructions(&self) -> Option<Arc<str>> {
        self.connection
            .as_ref()
            .and_then(|c| c.session_info())
            .and_then(|s| s.instructions)
    }
}

/// Holds the standalone `GET` stream open while the session's server declared
/// `capabilities.tools.listChanged`: reopens it with `Last-Event-ID` after 1 s, doubling to
/// 60 s (a stream that stayed open a minute resets the wait); after a 405, never asks again in
/// that session. A 404 (the server forgot the session) initializes a new one, which re-lists.
/// Each stream that opens asks for one re-listing (in `Connection::listen`), so a change made
/// while no stream was open is not lost. A session a call renewed (see
/// [`crate::notices::Signals::session_renewed`]) is looked at as soon as it exists; after this
/// loop's own renewal, or one a listing caused, the backoff is waited out, so that a server
/// answering every `GET` (or every `tools/list` after the stream opens) with 404 is not asked in a
/// tight loop. Never returns.
async fn listen(connection: &Connection) {
    let signals = connection.signals();
    let backoff = || {
        ExponentialBuilder::new()
            .with_min_delay(limits::LISTEN_RETRY_FIRST)
            .with_max_delay(limits::RETRY_MAX)
            .with_factor(2.0)
            .without_max_times()
            .build()
    };
    let mut waits = backoff();
    let mut last_event_id = String::new();
    let mut generation = None;
    let mut not_offered = None;
    loop {
        let Some(session) = connection.session_info() else {
            signals.any_renewal().await;
            continue;
        };
        if generation != Some(session.generation) {
            generation = Some(session.generation);
            last_event_id.clear();
        }
        if !session.tools_list_changed || not_offered == generation {
            signals.any_renewal().await;
            continue;
        }
        let opened = tokio::time::Instant::now();
        let mut wake_on_renewal = true;
        match connection.listen(&mut last_event_id).await {
            Ok(Listened::NotOffered) => {
                tracing::debug!(namespace = %connection.namespace(), "the server offers no standalone stream (405)");
                not_offered = generation;
                continue;
            }
            Ok(Listened::NoSession) => continue,
            Ok(Listened::Ended) => {
                tracing::debug!(namespace = %connection.namespace(), "the standalone stream ended");
            }
            Err(Error::SessionExpired) => {
                tracing::debug!(namespace = %connection.namespace(), "the standalone stream's session expired; initializing again");
                if let Err(error) = connection.renew(session.generation).await {
                    tracing::debug!(namespace = %connection.namespace(), reason = %error.message(), "initializing again failed");
                }
                wake_on_renewal = false;
            }
            Err(error) => {
                tracing::debug!(namespace = %connection.namespace(), reason = %error.message(), "the standalone stream failed");
            }
        }
        if opened.elapsed() >= limits::LISTEN_STABLE {
            waits = backoff();
        }
        let wait = waits.next().unwrap_or(limits::RETRY_MAX);
        if wake_on_renewal {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = signals.renewed() => {}
            }
        } else {
            tokio::time::sleep(wait).await;
        }
    }
}
