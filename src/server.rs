//! One configured server: its status, its tools, and the background task that starts it
//! (README "Lifecycle and limits").
//!
//! A start is connect + the era probe (`server/discover`, MCP 2026-07-28) + for a legacy server
//! `initialize` + `notifications/initialized`, then every `tools/list` page, inside
//! [`START_DEADLINE`](limits::START_DEADLINE). A server that declares no `tools` capability is still asked for
//! `tools/list` once: it lists its tools if it answers, and is ready with no tools if it answers
//! with any JSON-RPC error. One that declares `tools` and answers `-32601 Method not found` is
//! ready with no tools too; any other error fails its start. A tool that is malformed
//! or over a per-tool bound is left out (and shown as omitted) while the rest are listed; the
//! page, tool-count and cursor bounds still fail the start. A page refused `429`/`503` with a
//! `Retry-After` that fits the listing's deadline and [`limits::MAX_RATE_LIMIT_WAIT`] is sent
//! once more after that wait (the connection's resend table); a longer one fails the listing,
//! naming the wait in whole seconds. A failed start first ends every
//! session it opened ([`Connection::abandon`]), sets the status to `error` with the reason, and
//! is tried again after [`backoff`]'s wait (1 s, 2 s, 4 s … plus jitter, never more than 60 s),
//! or after what a `429`/`503` asked for in `Retry-After` ([`Error::retry_after`]; at least 1 s,
//! at most 60 s), until it succeeds. `ready` stays `ready`. When the Pack is dropped the task
//! first closes the standalone `GET` stream, then closes the connection
//! ([`Connection::close`]): cancels of requests in flight first, then the `DELETE` of each
//! session.
//!
//! Once ready, the task keeps the listing live (README "Lifecycle and limits"; ARCHITECTURE
//! "The listing's life"): it re-lists when the server says its tools changed, when the session
//! was initialized again, or when a call names a tool the listing lacks
//! ([`Server::relist_after_miss`]), and it holds the standalone `GET` stream open for a server
//! that declared `listChanged`. A re-listing reads the pages under the same rules as a start, so
//! it yields the same [`ToolList`] (omitted tools included).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder, Retryable};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{Deadlines, Settings, ToolFilter};
use crate::http::{
    Connection, Era, Error, Initialized, Listened, Mirrored, NamedWait, Said, SessionHandle,
    Verdict, Wire, Words,
};
use crate::limits::{
    self, MAX_DESCRIPTION_BYTES, MAX_PAGES, MAX_SCHEMA_BYTES, MAX_TOOL_NAME_BYTES, MAX_TOOLS,
};
use crate::schema::Checker;

/// A server's status as the listing shows it.
#[derive(Clone)]
pub(crate) enum Status {
    /// Its first start has not finished yet.
    Loading,
    /// Started; its tools, sorted by name, and the ones left out.
    Ready(Arc<ToolList>),
    /// Its config was refused (`retry_at` is `None`: nothing will change), or its last start
    /// failed and another starts at `retry_at`; `failing` says whether that failure may pass.
    Error {
        reason: Arc<str>,
        retry_at: Option<Instant>,
        failing: Failing,
    },
    /// Its last start needs a user to sign in, or it was ready and lost its grant.
    SignIn {
        /// Why, starting `sign-in required`, with the link whole in it.
        reason: Arc<str>,
        /// The sign-in link (the authorization request URL, RFC 6749 §4.1.1) a user opens.
        link: Arc<str>,
    },
}

/// How a failed start failed, as the listing tells a Host whether waiting is worth it (README
/// "What the tools answer": `refusedStarts`, `lasting`). Each start's failure replaces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failing {
    /// A failure that may pass by itself (a 5xx, a timeout, a broken connection), or a
    /// refused config entry (which shows no retry).
    Passing,
    /// The connection was refused ([`Error::is_refused`]: nothing listens at the url) this many
    /// starts in a row (at least 1), this one included.
    Refused(u32),
    /// A failure that will not pass until the config or the server changes
    /// ([`Error::lasting`]); still retried on the backoff.
    Lasting,
}

impl Failing {
    /// The failing of a start that failed with `failure`, after a start that failed with
    /// `before`.
    fn after(before: Failing, failure: &StartFailure) -> Failing {
        if failure.is_refused() {
            let before = match before {
                Failing::Refused(n) => n,
                Failing::Passing | Failing::Lasting => 0,
            };
            Failing::Refused(before.saturating_add(1))
        } else if failure.lasting().is_some() {
            Failing::Lasting
        } else {
            Failing::Passing
        }
    }
}

impl Status {
    /// The status of a refused config entry.
    fn refused(reason: String) -> Self {
        Status::Error {
            reason: reason.into(),
            retry_at: None,
            failing: Failing::Passing,
        }
    }
}

/// What a start found.
pub(crate) struct ToolList {
    /// Sorted by name, names unique.
    pub(crate) tools: Vec<Tool>,
    /// Tools left out, in the order the server listed them.
    pub(crate) omitted: Vec<Omitted>,
    /// The `instructions` of the session the listing was made on (its `initialize` answer), so
    /// they stay shown while a later session is being made.
    pub(crate) instructions: Option<Arc<str>>,
    /// The `serverInfo.description` of that session (scrubbed), the server's own one-liner.
    pub(crate) description: Option<Arc<str>>,
    /// The search index of `tools` ([`crate::search`]): built when the listing is stored
    /// ([`Server::set_ready`]), never per query.
    pub(crate) index: crate::search::Index,
    /// The protocol version the listing was made in (`2026-07-28`, or the version
    /// `initialize` negotiated).
    pub(crate) protocol_version: &'static str,
    /// How long the listing is fresh, from `listed_at`: the smallest positive `ttlMs` of its
    /// pages (MCP 2026-07-28, server/utilities/caching), each taken as at least
    /// [`limits::MIN_TTL`] and at most [`limits::MAX_TTL`]; `None` when no page gave one (a ttl
    /// of 0, absent or negative adds no time-based refresh).
    pub(crate) ttl: Option<Duration>,
    /// When the listing's last page arrived.
    pub(crate) listed_at: Instant,
}

impl Default for ToolList {
    fn default() -> Self {
        Self {
            tools: Vec::new(),
            omitted: Vec::new(),
            instructions: None,
            description: None,
            index: crate::search::Index::default(),
            protocol_version: "",
            ttl: None,
            listed_at: Instant::now(),
        }
    }
}

impl ToolList {
    /// The server's one-line description (docs/tools.md "The listing"): its
    /// `serverInfo.description`, else its `instructions`, cut to the first sentence
    /// ([`crate::search::one_line`]); both scrubbed when they were read.
    pub(crate) fn one_line(&self) -> Option<std::borrow::Cow<'_, str>> {
        self.description
            .as_deref()
            .or(self.instructions.as_deref())
            .map(crate::search::one_line)
            .filter(|line| !line.is_empty())
    }

    /// Builds [`ToolList::index`] from the tools as they are now, for the server `namespace`.
    fn build_index(&mut self, namespace: &str) {
        let params: Vec<Vec<String>> = self
            .tools
            .iter()
            .map(|t| param_names(&t.input_schema))
            .collect();
        let description = self.one_line().map(std::borrow::Cow::into_owned);
        self.index = crate::search::Index::build(
            namespace,
            description.as_deref(),
            self.tools
                .iter()
                .zip(&params)
                .map(|(tool, params)| crate::search::Doc {
                    name: &tool.name,
                    title: tool.title.as_deref(),
                    description: &tool.description,
                    params: params.iter().map(String::as_str).collect(),
                }),
        );
        tracing::debug!(
            namespace,
            tools = self.tools.len(),
            index_bytes = self.index.heap_bytes(),
            "search index built"
        );
    }

    /// Whether the listing is older than its ttl (never without one).
    pub(crate) fn is_stale(&self) -> bool {
        self.ttl.is_some_and(|ttl| self.listed_at.elapsed() >= ttl)
    }
}

/// A tool left out of the listing, and why.
pub(crate) struct Omitted {
    /// Its name (scrubbed), or its position (`tool 3 of tools/list page 1`) when it has no
    /// readable name.
    pub(crate) name: String,
    pub(crate) reason: String,
}

/// The names of the top-level `properties` of an `inputSchema` (none when it has none).
fn param_names(schema: &RawValue) -> Vec<String> {
    #[derive(Deserialize)]
    struct Properties<'a> {
        #[serde(borrow, default)]
        properties:
            Option<std::collections::BTreeMap<std::borrow::Cow<'a, str>, serde::de::IgnoredAny>>,
    }
    serde_json::from_str::<Properties<'_>>(schema.get())
        .ok()
        .and_then(|p| p.properties)
        .map(|p| p.into_keys().map(std::borrow::Cow::into_owned).collect())
        .unwrap_or_default()
}

/// A tool as the listing shows it; all text scrubbed and bounded.
pub(crate) struct Tool {
    pub(crate) name: String,
    /// Its `title` when it has one and it differs from the description (scrubbed, cut to
    /// [`MAX_DESCRIPTION_BYTES`]); searched, not shown.
    pub(crate) title: Option<String>,
    /// The description, else the title, else the name.
    pub(crate) description: String,
    pub(crate) input_schema: Box<RawValue>,
    pub(crate) output_schema: Option<Box<RawValue>>,
    pub(crate) annotations: Option<Box<RawValue>>,
    /// The parameters its `inputSchema` mirrors into headers (`x-mcp-header`; sent on a modern
    /// route only).
    pub(crate) mirrored: Mirrored,
    /// `input_schema`, compiled at its first use for this listing: a call's arguments are
    /// checked with it before `tools/call` goes out.
    pub(crate) input_check: Checker,
    /// `output_schema`, compiled at its first use for this listing: a result's
    /// `structuredContent` is checked with it ([`crate::result::map`]).
    pub(crate) output_check: Checker,
}

/// Why a start (or a re-listing) failed. Decisions are made on the variant; its `Display` is
/// the reason the listing shows (scrubbed: an [`Error`] never quotes a secret).
enum StartFailure {
    /// An exchange with the server failed: HTTP, transport, protocol, JSON-RPC, or a sign-in
    /// the server needs ([`Error::sign_in_url`]).
    Exchange(Error),
    /// The start took over its deadline ([`START_DEADLINE`](limits::START_DEADLINE) or its entry's shorter one); the era the client knew of the server then
    /// (`None`: still probing), which says what the start was doing: `server/discover`, the
    /// legacy handshake and its listing, or a modern listing.
    /// The deadline is the server's ([`Deadlines::start`]).
    StartDeadline(Option<Era>, Duration),
    /// A re-listing took over [`limits::RELIST_DEADLINE`].
    RelistDeadline,
    /// More than [`MAX_TOOLS`] tools: at least `listed` by page `page`.
    TooManyTools { listed: usize, page: usize },
    /// Page `page` returned the cursor it was asked with.
    SameCursor { page: usize },
    /// Page `page` returned a cursor an earlier page returned.
    UsedCursor { page: usize },
    /// More than [`MAX_PAGES`] pages.
    TooManyPages,
    /// Page `page` of a listing already walked again from its first page (a page was answered
    /// on another session) was answered on yet another session.
    SessionChanged { page: usize },
    /// A `tools/list` page was refused `429`/`503` with a wait too long to wait out (past
    /// [`limits::MAX_RATE_LIMIT_WAIT`] or the listing's deadline), or refused again after it.
    RateLimited(NamedWait),
}

impl StartFailure {
    /// Whether the connection was refused ([`Error::is_refused`]: nothing listens at the url).
    fn is_refused(&self) -> bool {
        matches!(self, StartFailure::Exchange(error) if error.is_refused())
    }

    /// Why the failure will not pass by itself ([`Error::lasting`]), when it will not; the
    /// listing's own bounds (pages, tools, cursors) are broken by the server until it changes.
    fn lasting(&self) -> Option<crate::http::Lasting> {
        match self {
            StartFailure::Exchange(error) => error.lasting(),
            StartFailure::TooManyTools { .. }
            | StartFailure::SameCursor { .. }
            | StartFailure::UsedCursor { .. }
            | StartFailure::TooManyPages => Some(crate::http::Lasting::Explained),
            StartFailure::StartDeadline(..)
            | StartFailure::RelistDeadline
            | StartFailure::SessionChanged { .. }
            | StartFailure::RateLimited(_) => None,
        }
    }

    /// Whether the failure is what a legacy HTTP+SSE endpoint (MCP 2024-11-05 "Transports": a
    /// GET-only event stream) answers a POST: a `405`, or any answer that takes no MCP request
    /// ([`crate::http::Lasting::NoEndpoint`], [`crate::http::Lasting::NotMcp`]) at a url whose
    /// path ends in `/sse` (`sse_path`). Decided on the status and the config's url only.
    fn is_legacy_sse(&self, sse_path: bool) -> bool {
        let StartFailure::Exchange(error) = self else {
            return false;
        };
        let not_mcp = matches!(
            error.lasting(),
            Some(crate::http::Lasting::NoEndpoint | crate::http::Lasting::NotMcp)
        );
        not_mcp && (sse_path || error.status().is_some_and(|s| s.as_u16() == 405))
    }

    /// Whether the start waits for a user to sign in (the server answered with a sign-in link).
    fn needs_sign_in(&self) -> bool {
        matches!(self, StartFailure::Exchange(error) if error.sign_in_url().is_some())
    }

    /// The `Retry-After` of the `429`/`503` that failed the start ([`Error::retry_after`]);
    /// the start's own rules ask for no wait.
    /// A server sharing no protocol version with this client asks for the longest wait: its
    /// versions change only when it is updated.
    fn retry_after(&self) -> Option<Duration> {
        match self {
            StartFailure::Exchange(error) if error.is_no_mutual_version() => {
                Some(limits::RETRY_MAX)
            }
            StartFailure::Exchange(error) => error.retry_after(),
            StartFailure::RateLimited(named) => Some(named.wait),
            _ => None,
        }
    }
}

/// The end of a start failure's reason when the url answers like a legacy HTTP+SSE endpoint
/// ([`StartFailure::is_legacy_sse`]).
const LEGACY_SSE: &str = "; the url answers like a legacy HTTP+SSE endpoint (a GET-only event stream, often at /sse), a transport this Pack does not speak: point \"url\" at the server's Streamable HTTP endpoint (often /mcp)";

impl From<Error> for StartFailure {
    fn from(error: Error) -> Self {
        StartFailure::Exchange(error)
    }
}

impl std::fmt::Display for StartFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartFailure::Exchange(error) => {
                error.fmt(f)?;
                // What to change, for an error that will not pass by itself.
                f.write_str(error.lasting().map_or("", crate::http::Lasting::advice))
            }
            StartFailure::StartDeadline(era, limit) => write!(
                f,
                "the server did not finish starting ({}) within {} seconds",
                match era {
                    None => "server/discover",
                    Some(Era::Legacy) => "initialize and tools/list",
                    Some(Era::Modern) => "server/discover and tools/list",
                },
                limit.as_secs_f64()
            ),
            StartFailure::RelistDeadline => write!(
                f,
                "tools/list did not finish within {} seconds",
                limits::RELIST_DEADLINE.as_secs()
            ),
            StartFailure::TooManyTools { listed, page } => write!(
                f,
                "the server listed more than {MAX_TOOLS} tools (at least {listed} by page {page})"
            ),
            StartFailure::SameCursor { page } => write!(
                f,
                "tools/list page {page} returned the cursor it was asked with, so pagination would never end"
            ),
            StartFailure::UsedCursor { page } => write!(
                f,
                "tools/list page {page} returned a cursor already used by an earlier page, so pagination would loop"
            ),
            StartFailure::TooManyPages => write!(
                f,
                "the server had more than {MAX_PAGES} pages of tools (tools/list still returned a nextCursor)"
            ),
            StartFailure::SessionChanged { page } => write!(
                f,
                "the server's session changed twice during one tools/list walk (at page {page})"
            ),
            StartFailure::RateLimited(named) => write!(
                f,
                "the server refused tools/list {} and asked to wait {} before asking again",
                named.refused(),
                named.seconds()
            ),
        }
    }
}

/// The waits between starts: 1 s, 2 s, 4 s, 8 s, 16 s, then 30 s for good, each plus a random
/// jitter of up to as much again (so never more than [`limits::RETRY_MAX`]), so that Hosts
/// that lost the same server do not all come back in the same second.
pub(crate) fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(limits::RETRY_FIRST)
        .with_max_delay(limits::RETRY_MAX / 2)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
}

/// The wait before the next start: what the server asked for in `Retry-After`, kept within
/// [`limits::RETRY_FIRST`] and [`limits::RETRY_MAX`], instead of the backoff's `step`.
fn next_wait(step: Duration, retry_after: Option<Duration>) -> Duration {
    retry_after.map_or(step, |asked| {
        asked.clamp(limits::RETRY_FIRST, limits::RETRY_MAX)
    })
}

/// Whole seconds until `retry_at`, rounded up; `None` when no start is planned.
pub(crate) fn retry_in_seconds(retry_at: Option<Instant>) -> Option<u64> {
    retry_at.map(|at| {
        let left = at.saturating_duration_since(Instant::now());
        left.as_secs() + u64::from(left.subsec_nanos() > 0)
    })
}

/// One namespace of the Pack.
pub(crate) struct Server {
    pub(crate) namespace: Arc<str>,
    status: RwLock<Status>,
    /// `None` for a refused entry.
    pub(crate) connection: Option<Arc<Connection>>,
    /// For a refused entry, the key of the sign-in it may have stored, when its `url` and
    /// `oauth` could be read (`<id>/logout` deletes that file); `None` otherwise.
    pub(crate) unused_sign_in: Option<crate::auth::store::StoreKey>,
    /// When a miss last asked this server for a re-listing, and that request's number.
    last_miss: Mutex<Option<(tokio::time::Instant, u64)>>,
    /// When a stale listing last asked for a refresh ([`Server::refresh_if_stale`]).
    last_refresh: Mutex<Option<Instant>>,
    /// The tools its config entry hides: never in its [`ToolList`], never called.
    pub(crate) tool_filter: ToolFilter,
    /// Its start and call deadlines (its entry's, capped by the Pack's).
    pub(crate) deadlines: Deadlines,
    /// Its config entry's notes ([`Settings::notes`]), shown in its listing.
    pub(crate) notes: Vec<String>,
    /// Whether its url's path ends in `/sse` ([`Settings::sse_path`]).
    sse_path: bool,
    /// Sent to on every status change, so [`Server::settled`] needs no polling.
    changes: tokio::sync::watch::Sender<()>,
}

impl Server {
    /// A namespace whose config entry was refused.
    pub(crate) fn refused(namespace: Arc<str>, reason: String) -> Self {
        Self {
            namespace,
            status: RwLock::new(Status::refused(reason)),
            connection: None,
            unused_sign_in: None,
            last_miss: Mutex::new(None),
            last_refresh: Mutex::new(None),
            tool_filter: ToolFilter::default(),
            deadlines: Deadlines::default(),
            notes: Vec::new(),
            sse_path: false,
            changes: tokio::sync::watch::Sender::new(()),
        }
    }

    /// A namespace that will connect; `loading` until its task finishes a start. The tools
    /// `settings.tool_filter` hides are left out of every listing it makes.
    pub(crate) fn remote(
        namespace: Arc<str>,
        connection: Arc<Connection>,
        settings: Settings,
    ) -> Self {
        let Settings {
            tool_filter,
            deadlines,
            notes,
            sse_path,
        } = settings;
        Self {
            namespace,
            status: RwLock::new(Status::Loading),
            connection: Some(connection),
            unused_sign_in: None,
            last_miss: Mutex::new(None),
            last_refresh: Mutex::new(None),
            tool_filter,
            deadlines,
            notes,
            sse_path,
            changes: tokio::sync::watch::Sender::new(()),
        }
    }

    /// The current status. A ready server whose grant was lost (`invalid_grant`, a step-up)
    /// shows the waiting sign-in instead, until it completes. Every use of the listing comes
    /// through here, so a listing older than its ttl asks for its refresh here
    /// ([`Server::refresh_if_stale`]).
    pub(crate) fn status(&self) -> Status {
        let status = self
            .status
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Status::Ready(list) = &status {
            self.refresh_if_stale(list);
        }
        if let (Status::Ready(_), Some(connection)) = (&status, &self.connection)
            && let Some(link) = connection.sign_in_url()
        {
            let reason = Error::sign_in(Arc::clone(&link)).to_string();
            return Status::SignIn {
                reason: reason.into(),
                link,
            };
        }
        status
    }

    fn set_status(&self, status: Status) {
        *self.status.write().unwrap_or_else(|e| e.into_inner()) = status;
        self.changes.send_replace(());
    }

    /// Resolves once the server is no longer `loading`: ready, or `error` (a refused entry, a
    /// failed start, a sign-in it waits for). Woken by each status change, no polling.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub(crate) async fn settled(&self) {
        let mut changed = self.changes.subscribe();
        loop {
            let loading = matches!(
                *self.status.read().unwrap_or_else(|e| e.into_inner()),
                Status::Loading
            );
            // The sender lives as long as `self`: `changed` errs never while it is borrowed.
            if !loading || changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// Whether the server is still `loading` (its first start has not finished).
    pub(crate) fn is_loading(&self) -> bool {
        matches!(
            *self.status.read().unwrap_or_else(|e| e.into_inner()),
            Status::Loading
        )
    }

    /// Makes `list`, without the tools the config hides, the server's tools (`ready`) and logs
    /// `news` with how many there are.
    fn set_ready(&self, mut list: ToolList, news: &str) {
        list.tools
            .retain(|tool| self.tool_filter.hides(&tool.name).is_none());
        list.omitted
            .retain(|tool| self.tool_filter.hides(&tool.name).is_none());
        tracing::info!(
            namespace = %self.namespace,
            tools = list.tools.len(),
            omitted = list.omitted.len(),
            "{news}"
        );
        list.build_index(&self.namespace);
        self.set_status(Status::Ready(Arc::new(list)));
    }

    /// The background task of a remote server: start until ready (or the Pack is dropped), then
    /// wait for the Pack to be dropped and end the session.
    ///
    /// # Cancel safety
    /// Not meant to be dropped: it is spawned, and ends on its own once `shutdown` is cancelled.
    /// Dropped mid-start (the runtime shutting down), the status stays as it was and a session
    /// that start opened stays on the server.
    pub(crate) async fn run(
        self: Arc<Self>,
        connection: Arc<Connection>,
        shutdown: CancellationToken,
    ) {
        let start = || async {
            let limit = self.deadlines.start;
            let until = Instant::now() + limit;
            let outcome = match tokio::time::timeout_at(until, start_once(&connection, until)).await
            {
                Ok(result) => result,
                Err(_) => Err(StartFailure::StartDeadline(connection.era(), limit)),
            };
            if outcome.is_err() {
                // A start that got as far as a session leaves none behind on the server.
                connection.abandon().await;
            }
            outcome
        };
        let sleeping = Arc::clone(&connection);
        // How the last start failed (refused starts counted in a row).
        let mut failing = Failing::Passing;
        let started = start
            .retry(backoff())
            // A sign-in that ends (tokens, or a link that expired) starts again at once.
            .sleep(move |wait| {
                let connection = Arc::clone(&sleeping);
                async move {
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = connection.sign_in_ended() => {}
                    }
                }
            })
            .adjust(|failure: &StartFailure, step| {
                step.map(|step| next_wait(step, failure.retry_after()))
            })
            .notify(|failure: &StartFailure, wait| {
                failing = Failing::after(failing, failure);
                let mut whole = failure.to_string();
                if failure.is_legacy_sse(self.sse_path) {
                    whole.push_str(LEGACY_SSE);
                }
                let reason = limits::truncate(&whole, 2 * limits::MAX_REASON_BYTES);
                let link = connection.sign_in_url().filter(|_| failure.needs_sign_in());
                if link.is_some() {
                    // The link was logged once when it was made; a start waiting for the
                    // sign-in is no news.
                    tracing::debug!(
                        namespace = %self.namespace,
                        retry_in_ms = wait.as_millis() as u64,
                        "server waits for a sign-in"
                    );
                } else {
                    tracing::warn!(
                        namespace = %self.namespace,
                        retry_in_ms = wait.as_millis() as u64,
                        reason = %reason,
                        "server failed to start"
                    );
                }
                self.set_status(match link {
                    // The link is whole in the reason: a cut link could not be opened.
                    Some(link) => Status::SignIn {
                        reason: whole.as_str().into(),
                        link,
                    },
                    None => Status::Error {
                        reason: reason.into(),
                        retry_at: Some(Instant::now() + wait),
                        failing,
                    },
                });
            });
        tokio::select! {
            outcome = started => match outcome {
                Ok(list) => self.set_ready(list, "server ready"),
                // The backoff has no last attempt; this arm only keeps a future change honest.
                Err(failure) => self.set_status(Status::refused(failure.to_string())),
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

/// One start, to end by `until`: the era probe and the handshake ([`Connection::start`]) and
/// every `tools/list` page ([`list_tools`]). Returns the tools sorted by name and the ones left
/// out.
async fn start_once(
    connection: &Arc<Connection>,
    until: Instant,
) -> Result<ToolList, StartFailure> {
    let initialized = connection.start().await?;
    list_tools(connection, &initialized, ABANDONED_START, until).await
}

/// The `reason` of the cancel of a start's page that the start deadline dropped.
const ABANDONED_START: &str = "the client abandoned the start of the session";
/// The `reason` of the cancel of a re-listing's page that its deadline (or the Pack's drop)
/// dropped.
const RELIST_STOPPED: &str = "the client stopped waiting for tools/list";

/// Every `tools/list` page, bounded by the page, tool-count and cursor rules of
/// [`crate::limits`], on a session whose `initialize` declared `initialized`; a start's and a
/// re-listing's. A page sent again on a new session is read by what that session declared,
/// and the listing names the version and instructions of the session its pages came from.
/// A cursor belongs to the session that gave it (MCP 2026-07-28, server/utilities/pagination:
/// cursors are opaque): when a later page is answered on another session (the server forgot
/// the old one, or restarted onto the other era), the walk starts again from the first page
/// there, once; a second change fails the listing ([`StartFailure::SessionChanged`]).
/// Returns the tools sorted by name and the ones left out. A page dropped before
/// its answer (a deadline) is cancelled with `dropped` as the reason. `until` is the
/// listing's deadline: a page refused `429`/`503` is sent once more after the wait the server
/// named when that wait fits it and [`limits::MAX_RATE_LIMIT_WAIT`] (`http::verdict::next`),
/// else the listing fails naming the wait ([`StartFailure::RateLimited`]).
async fn list_tools(
    connection: &Arc<Connection>,
    initialized: &Initialized,
    dropped: &'static str,
    until: Instant,
) -> Result<ToolList, StartFailure> {
    let mut walk = Walk::default();
    // The session the walk's first page was answered on: its cursors are only good there.
    let mut walked_on: Option<SessionHandle> = None;
    let mut walked_again = false;
    let mut page = 0;
    loop {
        page += 1;
        if page > MAX_PAGES {
            return Err(StartFailure::TooManyPages);
        }
        let params = match &walk.cursor {
            Some(c) => serde_json::json!({ "cursor": c }),
            None => serde_json::json!({}),
        };
        let id = connection.next_id();
        // A page the start's or the re-listing's deadline drops is cancelled (MCP lifecycle,
        // "Timeouts").
        let _cancel = connection.cancel_on_drop(id, dropped);
        let mut answered_on = None;
        let next = connection
            .request_declared(
                id,
                Wire::new("tools/list", None, &[]).until(until),
                &params,
                |result, _| read_page(connection, result, page).map_err(Error::malformed),
                Some(&mut answered_on),
            )
            .await;
        if let (Some(walked), Some(now)) = (&walked_on, &answered_on)
            && !walked.is(now)
        {
            if walked_again {
                return Err(StartFailure::SessionChanged { page });
            }
            // Whatever the new session answered to the old session's cursor is dropped.
            tracing::debug!(namespace = %connection.namespace(), page, "a page was answered on another session; listing again from the first page");
            walked_again = true;
            walk = Walk::default();
            walked_on = None;
            page = 0;
            continue;
        }
        if walked_on.is_none() {
            walked_on = answered_on;
        }
        // What the session the page was answered on declared; the start's handshake until a
        // page went out.
        let answered = walked_on
            .as_ref()
            .and_then(SessionHandle::declared)
            .unwrap_or(initialized);
        let (listed_tools, next, page_ttl) = match next {
            Ok(read) => read,
            // A server that declared no `tools` capability is asked once anyway (some offer
            // tools without declaring them); any JSON-RPC error of its own then means it has
            // none, as "Method not found" does from any server.
            Err(error)
                if page == 1
                    && match error.verdict() {
                        Verdict::MethodNotFound => true,
                        Verdict::Stands | Verdict::InvalidParams => {
                            !answered.tools && error.rpc().is_some()
                        }
                        _ => false,
                    } =>
            {
                tracing::debug!(namespace = %connection.namespace(), code = ?error.rpc().map(|e| e.code), declared = answered.tools, "tools/list refused; ready with no tools");
                return Ok(ToolList {
                    instructions: answered.instructions.clone(),
                    description: answered.description.clone(),
                    protocol_version: answered.version,
                    ..ToolList::default()
                });
            }
            Err(error) => {
                return Err(match NamedWait::of(error.verdict()) {
                    Some(named) => StartFailure::RateLimited(named),
                    None => error.into(),
                });
            }
        };
        if let Some(list) = walk.take(listed_tools, next, page_ttl, page)? {
            return Ok(finish(list, answered));
        }
    }
}

/// A walk through a listing's pages, from its first page on one session.
#[derive(Default)]
struct Walk {
    tools: Vec<Tool>,
    omitted: Vec<Omitted>,
    /// Names of the tools kept so far: a later tool of one of these names is a duplicate.
    names: HashSet<String>,
    /// Every cursor a page returned so far.
    cursors: HashSet<String>,
    /// The cursor the next page is asked with (`None`: the first page).
    cursor: Option<String>,
    /// The shortest positive `ttlMs` of the pages so far.
    ttl: Option<Duration>,
    /// The first page as an older server would repeat it: the names of what it listed (kept
    /// or left out, in order) and its `nextCursor`.
    first: Option<(Vec<String>, Option<String>)>,
}

impl Walk {
    /// Takes page `page`'s tools, `nextCursor` and ttl. Returns the whole listing when it was
    /// the last page, `None` when there is a next one (its cursor is [`Walk::cursor`] now).
    ///
    /// # Errors
    /// [`StartFailure::TooManyTools`], [`StartFailure::SameCursor`],
    /// [`StartFailure::UsedCursor`].
    fn take(
        &mut self,
        listed_tools: Vec<Result<Tool, Omitted>>,
        next: Option<String>,
        page_ttl: Option<Duration>,
        page: usize,
    ) -> Result<Option<Walked>, StartFailure> {
        self.ttl = match (self.ttl, page_ttl) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // A page asked for with "" that lists what the first page listed, and names the same
        // next cursor, is an older server's first page again ("" meant "no more" to it):
        // dropped, and the walk ends there.
        let names = || {
            listed_tools
                .iter()
                .map(|t| match t {
                    Ok(tool) => tool.name.clone(),
                    Err(left_out) => left_out.name.clone(),
                })
                .collect::<Vec<_>>()
        };
        let repeat = match (&self.cursor, &self.first) {
            (None, _) => {
                self.first = Some((names(), next.clone()));
                false
            }
            (Some(asked), Some((first, first_next))) => {
                asked.is_empty() && *first_next == next && *first == names()
            }
            (Some(_), None) => false,
        };
        for listed in listed_tools.into_iter().filter(|_| !repeat) {
            match listed {
                Ok(tool) if self.names.contains(&tool.name) => self.omitted.push(Omitted {
                    name: tool.name,
                    reason: "another tool of the same name was listed first".to_string(),
                }),
                Ok(tool) => {
                    self.names.insert(tool.name.clone());
                    self.tools.push(tool);
                }
                Err(left_out) => self.omitted.push(left_out),
            }
        }
        let listed = self.tools.len() + self.omitted.len();
        if listed > MAX_TOOLS {
            return Err(StartFailure::TooManyTools { listed, page });
        }
        // "" is a cursor like any other (MCP 2026-07-28, server/utilities/pagination), but a
        // page asked for with "" that answers "" again, or that repeats the first page, ends
        // the walk: older servers meant "no more" by it.
        let asked_empty = self.cursor.as_deref() == Some("");
        let Some(next) = next.filter(|c| !(repeat || (asked_empty && c.is_empty()))) else {
            return Ok(Some(Walked {
                tools: std::mem::take(&mut self.tools),
                omitted: std::mem::take(&mut self.omitted),
                ttl: self.ttl,
            }));
        };
        if self.cursor.as_deref() == Some(next.as_str()) {
            return Err(StartFailure::SameCursor { page });
        }
        if !self.cursors.insert(next.clone()) {
            return Err(StartFailure::UsedCursor { page });
        }
        self.cursor = Some(next);
        Ok(None)
    }
}

/// A whole walk's tools (in listing order), the ones left out, and the shortest positive ttl.
struct Walked {
    tools: Vec<Tool>,
    omitted: Vec<Omitted>,
    ttl: Option<Duration>,
}

/// Sorts the tools by name (their names are unique); the omitted ones keep the listing order.
/// The listing names what `initialized` declared: the session its pages came from.
fn finish(walked: Walked, initialized: &Initialized) -> ToolList {
    let Walked {
        mut tools,
        omitted,
        ttl,
    } = walked;
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    ToolList {
        tools,
        omitted,
        instructions: initialized.instructions.clone(),
        description: initialized.description.clone(),
        index: crate::search::Index::default(),
        protocol_version: initialized.version,
        ttl,
        listed_at: Instant::now(),
    }
}

#[derive(Deserialize)]
struct ListToolsResult<'a> {
    /// Each tool is read on its own, so one malformed tool leaves the others listed.
    #[serde(borrow)]
    tools: Vec<&'a RawValue>,
    #[serde(rename = "nextCursor", default)]
    next_cursor: Option<String>,
    /// MCP 2026-07-28, server/utilities/caching; read leniently.
    #[serde(rename = "ttlMs", borrow, default)]
    ttl_ms: Option<&'a RawValue>,
    /// MCP 2026-07-28, basic "Result types": absent means `complete`.
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<&'a RawValue>,
}

/// A tool's fields, each still raw JSON, so a field of the wrong type is named, not fatal.
#[derive(Deserialize)]
struct WireTool<'a> {
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    title: Option<&'a RawValue>,
    #[serde(borrow, default)]
    description: Option<&'a RawValue>,
    #[serde(rename = "inputSchema", borrow, default)]
    input_schema: Option<&'a RawValue>,
    #[serde(rename = "outputSchema", borrow, default)]
    output_schema: Option<&'a RawValue>,
    #[serde(borrow, default)]
    annotations: Option<&'a RawValue>,
}

/// One page's tools in the order the server listed them (each fit for the listing, or left
/// out), its `nextCursor`, and its positive `ttlMs`.
type Page = (Vec<Result<Tool, Omitted>>, Option<String>, Option<Duration>);

/// Decodes one `tools/list` result into tools fit for the listing and the ones left out, in
/// listing order.
fn read_page(connection: &Connection, result: &RawValue, page: usize) -> Result<Page, String> {
    let malformed = || format!("tools/list page {page} is not a valid ListToolsResult");
    if !result.get().starts_with('{') {
        return Err(malformed());
    }
    let list: ListToolsResult<'_> = serde_json::from_str(result.get()).map_err(|_| malformed())?;
    let result_type: Option<String> =
        crate::jsonrpc::optional(connection.namespace(), "resultType", list.result_type);
    if result_type.as_deref().is_some_and(|t| t != "complete") {
        return Err(format!(
            "tools/list page {page} asked for more input (resultType \"{}\"), which this client cannot provide",
            connection.server_text(result_type.as_deref().unwrap_or_default(), 64)
        ));
    }
    let ttl = crate::jsonrpc::optional::<f64>(connection.namespace(), "ttlMs", list.ttl_ms)
        .filter(|ms| ms.is_finite() && *ms > 0.0)
        .map(|ms| {
            Duration::from_millis(ms.min(limits::MAX_TTL.as_millis() as f64) as u64)
                .max(limits::MIN_TTL)
        });
    let redactor = connection.redactor();
    let mut tools = Vec::with_capacity(list.tools.len());
    for (i, raw) in list.tools.into_iter().enumerate() {
        tools.push(read_tool(raw, redactor).map_err(|(name, reason)| {
            let name = name.unwrap_or_else(|| format!("tool {} of tools/list page {page}", i + 1));
            tracing::debug!(namespace = %connection.namespace(), page, position = i + 1, "left a tool out");
            Omitted { name, reason }
        }));
    }
    Ok((tools, list.next_cursor, ttl))
}

// The listing's life once ready: re-listings (coalesced, one at a time), the miss throttle, and
// the standalone GET stream.

impl Server {
    /// What a ready server's task does until the Pack is dropped: runs the re-list worker and
    /// the standalone stream's loop. Never returns.
    async fn live(&self, connection: &Arc<Connection>) {
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
    /// It reads the pages like a start ([`list_tools`], with what the current session's
    /// `initialize` declared), so it yields the same [`ToolList`], omitted tools included.
    async fn relist(&self, connection: &Arc<Connection>) {
        // Bound to the session its pages go out on: while a session is being made the
        // re-listing waits for it, and reads the pages by what that session declared.
        let until = Instant::now() + limits::RELIST_DEADLINE;
        let listing = async {
            let live = connection.live().await?;
            let none = Initialized::default();
            let declared = live.declared().unwrap_or(&none);
            list_tools(connection, declared, RELIST_STOPPED, until).await
        };
        let outcome = match tokio::time::timeout_at(until, listing).await {
            Ok(outcome) => outcome,
            Err(_) => Err(StartFailure::RelistDeadline),
        };
        match outcome {
            Ok(list) => self.set_ready(list, "tools re-listed"),
            Err(failure) => {
                let reason = failure.to_string();
                let reason = limits::truncate(&reason, 2 * limits::MAX_REASON_BYTES);
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

    /// Re-lists now (no throttle) and waits for it: a call answered `HeaderMismatch` (MCP
    /// 2026-07-28, transports "Client Behavior") needs the tool's current `inputSchema`.
    ///
    /// # Cancel safety
    /// Cancel safe: the re-listing runs in the server's task; dropping this only stops waiting.
    pub(crate) async fn relist_now(&self) {
        if let Some(connection) = &self.connection {
            let number = connection.signals().request_relist();
            connection.signals().wait_relisted(number).await;
        }
    }

    /// Asks for a re-listing in the background when `list` is older than its ttl (MCP
    /// 2026-07-28, server/utilities/caching: refreshed on the next use), at most once per ttl:
    /// the re-listing is single-flight and its result is fresh for the ttl again; a failed one
    /// keeps the old tools and is asked for again a ttl later.
    fn refresh_if_stale(&self, list: &ToolList) {
        let (Some(ttl), Some(connection)) = (list.ttl, &self.connection) else {
            return;
        };
        if !list.is_stale() {
            return;
        }
        let mut last = self.last_refresh.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if last.is_some_and(|at| now.duration_since(at) < ttl) {
            return;
        }
        *last = Some(now);
        tracing::debug!(namespace = %self.namespace, ttl_ms = ttl.as_millis() as u64, "the listing is older than its ttl; re-listing");
        connection.signals().request_relist();
    }
}

/// Where the change stream stands (ARCHITECTURE "The connection machine"): the standalone
/// `GET` of a legacy session (MCP 2025-11-25, transports, "Listening for Messages from the
/// Server"), or a modern route's `subscriptions/listen` (MCP 2026-07-28,
/// basic/patterns/subscriptions). Each state owns the session it is about; the one transition
/// function is [`Machine::step`], from what the last act found ([`Found`]) to the next act
/// ([`Act`]), with no I/O, so it is tested without a server.
///
/// ```text
///   every turn starts by looking at the live session:
///     none ─────────────────────────────────────▶ NoSession (await one; renew after the backoff)
///     s, not the state's ───────────────────────▶ Open { s } (last event id empty)
///   Open ──ends / breaks / no headers in 30 s / other era──▶ Open (after the backoff)
///   Open ──405, no listChanged, an ack without it, -32601──▶ NotOffered (await leaving)
///   Open ──404, or the server's words──▶ Asking (a ping on the session)
///   Open ──the server's words, and the stream's words are its own──▶ NotOffered
///   Asking ──answered──▶ NotOffered;  Asking ──gone──▶ Renewing ──▶ (backoff) look again
///   Asking ──failed──▶ Open (after the backoff)
///   Open, Asking ──rate limited──▶ Open (after the backoff, and at least the named wait)
///   Renewing, NoSession ──the renewal rate limited──▶ same (after the backoff, and at least
///                                                     the named wait) look again
///   any ──its session stops being the live one──▶ left: the next turn looks again
/// ```
#[derive(Debug, PartialEq)]
enum Stream<S> {
    /// No live session: a renewal runs, or none does (one failed while the server was down).
    NoSession,
    /// The stream may be opened on `on`, resuming after `last_event_id`; `fresh_by_words`
    /// when the loop made `on` itself after the server's words (a "no valid session" 400).
    Open {
        on: S,
        last_event_id: String,
        fresh_by_words: bool,
    },
    /// The stream on `on` was refused as a forgotten session: a `ping` asks whether it is.
    Asking { on: S, last_event_id: String },
    /// The loop renews the session after `on`'s `ping` found it gone (`words`: by the
    /// server's words).
    Renewing { words: bool },
    /// The server offers no stream on `on`.
    NotOffered { on: S },
}

/// What the act of a turn found, as the machine needs it.
#[derive(Debug)]
enum Found<S> {
    /// The live session, if any.
    Live(Option<S>),
    /// The session of the stream (or ping) stopped being the live one.
    Left,
    /// The stream's session was gone before the stream opened (deleted, or the connection
    /// closed), and has left: look again at once.
    Deleted,
    /// The stream ended or failed, with nothing to do but wait; also an answer of the other
    /// era, whose probe ran in the connection (a route it moves off stops being live).
    Ended,
    /// The server offers no stream on this session.
    NotOffered,
    /// The stream was refused as a forgotten session (`words`: by the server's words).
    Expired { words: bool },
    /// The `ping` was answered: the session lives (its `404` meant no `GET` endpoint).
    Alive,
    /// The `ping` found the session gone (`words`: by the server's words).
    Gone { words: bool },
    /// The `ping` failed otherwise.
    Unanswered,
    /// The loop's renewal ended.
    Renewed { ok: bool },
    /// The stream, the `ping` or the loop's renewal was refused with a rate limit: the server
    /// named a wait, here at most the longest backoff ([`Verdict::stays_away`]).
    RateLimited { wait: Duration },
}

/// What the loop does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    /// Open the stream on the state's session and read it.
    Listen,
    /// Ask the state's session with a `ping`.
    Ping,
    /// Join or start the connection's renewal.
    Renew,
    /// Look at the live session again at once.
    Look,
    /// Wait until the state's session stops being the live one.
    AwaitLeft,
    /// Wait for a session; after the backoff, make one.
    AwaitSession,
    /// Wait out the backoff, or until a session a call asked for is installed (counted from
    /// the turn's start, or with `after_renewal` from after the loop's own renewal); the
    /// backoff is at least `at_least` (a rate limit's named wait; zero when none).
    Backoff {
        after_renewal: bool,
        at_least: Duration,
    },
}

/// Two handles name the same session (not just alike).
trait Same {
    fn same(&self, other: &Self) -> bool;
}

impl Same for SessionHandle {
    fn same(&self, other: &Self) -> bool {
        self.is(other)
    }
}

/// The stream's machine: its [`Stream`] state, and what the loop learnt about this server's
/// streams: whether a fresh session's stream met the server's words again (then they are the
/// stream's own answer, and no session is set aside for them on this path), and whether "no
/// standalone stream" was said (once, at debug level).
struct Machine<S> {
    stream: Stream<S>,
    /// What the server's words mean to this loop's streams (the same rule as a request's).
    words: Words,
    said_no_endpoint: bool,
}

impl<S: Same> Machine<S> {
    fn new() -> Self {
        Self {
            stream: Stream::NoSession,
            words: Words::default(),
            said_no_endpoint: false,
        }
    }

    /// The one transition: from the state and what the last act found to the next act.
    fn step(&mut self, found: Found<S>) -> Act {
        let state = std::mem::replace(&mut self.stream, Stream::NoSession);
        let (next, act) = match (state, found) {
            (_, Found::Live(None)) => (Stream::NoSession, Act::AwaitSession),
            (state, Found::Live(Some(live))) => match state {
                Stream::Open {
                    on,
                    last_event_id,
                    fresh_by_words,
                } if on.same(&live) => (
                    Stream::Open {
                        on,
                        last_event_id,
                        fresh_by_words,
                    },
                    Act::Listen,
                ),
                Stream::Asking { on, last_event_id } if on.same(&live) => (
                    Stream::Open {
                        on,
                        last_event_id,
                        fresh_by_words: false,
                    },
                    Act::Listen,
                ),
                Stream::NotOffered { on } if on.same(&live) => {
                    (Stream::NotOffered { on }, Act::AwaitLeft)
                }
                Stream::Renewing { words } => (
                    Stream::Open {
                        on: live,
                        last_event_id: String::new(),
                        fresh_by_words: words,
                    },
                    Act::Listen,
                ),
                _ => (
                    Stream::Open {
                        on: live,
                        last_event_id: String::new(),
                        fresh_by_words: false,
                    },
                    Act::Listen,
                ),
            },
            (state, Found::Deleted) => (state, Act::Look),
            (state, Found::Left | Found::Ended | Found::Unanswered) => (
                Self::passed(state),
                Act::Backoff {
                    after_renewal: false,
                    at_least: Duration::ZERO,
                },
            ),
            // The server named how long to stay away (RFC 6585 §4): the loop's own renewal...
            (
                state @ (Stream::Renewing { .. } | Stream::NoSession),
                Found::RateLimited { wait },
            ) => {
                let state = match state {
                    Stream::Renewing { .. } => Stream::Renewing { words: false },
                    other => other,
                };
                (
                    state,
                    Act::Backoff {
                        after_renewal: true,
                        at_least: wait,
                    },
                )
            }
            // ... or the stream, or its ping.
            (state, Found::RateLimited { wait }) => (
                Self::passed(state),
                Act::Backoff {
                    after_renewal: false,
                    at_least: wait,
                },
            ),
            (Stream::Open { on, .. } | Stream::Asking { on, .. }, Found::NotOffered) => {
                (Stream::NotOffered { on }, Act::Look)
            }
            (
                Stream::Open {
                    on,
                    last_event_id,
                    fresh_by_words,
                },
                Found::Expired { words },
            ) => {
                let before = self.words.said();
                match words.then(|| self.words.met(fresh_by_words)) {
                    // The server's words, its stream's own answer (a fresh session got them
                    // too): not about the session, and this one offers no stream.
                    Some(Said::Own) => {
                        if before == Said::SessionGone {
                            tracing::debug!(
                                "a fresh session's stream got the same 400: the stream's 400s are its own answer from now on"
                            );
                        }
                        (Stream::NotOffered { on }, Act::Look)
                    }
                    Some(Said::SessionGone) | None => {
                        (Stream::Asking { on, last_event_id }, Act::Ping)
                    }
                }
            }
            (Stream::Asking { on, .. }, Found::Alive) => {
                if !self.said_no_endpoint {
                    self.said_no_endpoint = true;
                    tracing::debug!(
                        "the standalone GET was answered 404 on a live session: the server offers no standalone stream"
                    );
                }
                (Stream::NotOffered { on }, Act::Look)
            }
            (Stream::Asking { .. }, Found::Gone { words }) => {
                (Stream::Renewing { words }, Act::Renew)
            }
            (Stream::Renewing { words }, Found::Renewed { ok }) => (
                Stream::Renewing { words: words && ok },
                Act::Backoff {
                    after_renewal: true,
                    at_least: Duration::ZERO,
                },
            ),
            // A finding that does not fit the state (none is made so): look again.
            (state, _) => (state, Act::Look),
        };
        self.stream = next;
        act
    }

    /// After a stream or ping that passes: a session asked about is back to `Open`, and only
    /// the first stream of a session the loop made after the server's words counts as fresh.
    fn passed(state: Stream<S>) -> Stream<S> {
        match state {
            Stream::Asking { on, last_event_id }
            | Stream::Open {
                on, last_event_id, ..
            } => Stream::Open {
                on,
                last_event_id,
                fresh_by_words: false,
            },
            other => other,
        }
    }
}

/// Holds the change stream open on every live session, as its own machine ([`Machine`])
/// beside the session machine it watches ([`Connection::left`]): a legacy session's
/// standalone `GET` (whether or not it declared `tools.listChanged`: servers send log
/// messages, `list_changed` and requests there regardless), or a modern route's
/// `subscriptions/listen` when `server/discover` declared `tools.listChanged`. A stream that
/// ends or breaks is reopened (with `Last-Event-ID` on a legacy `GET`) after 1 s, doubling to
/// 60 s; one that stayed open a minute resets the wait. Every wait of the loop, a stream open
/// and quiet included, ends as soon as its session stops being the live one: the stream is
/// dropped, and the next live session gets its own at once when a call (or the loop) made
/// it, after the backoff when only a listing did (so a server that forgets every session on
/// `tools/list` is not asked in a tight loop). Every request it sends is bounded
/// ([`limits::STREAM_OPEN_TIMEOUT`] for the stream's headers, [`limits::PING_TIMEOUT`] for the
/// `ping`), and it recovers on the backoff after any failure; after a rate limit (the stream,
/// the `ping` or its renewal refused `429`/`503` with a `Retry-After`) the backoff lasts at
/// least the wait the server named, at most [`limits::RETRY_MAX`] ([`Verdict::stays_away`]).
///
/// The loop acts on the stream's verdicts ([`crate::http::Verdict`]), never on a raw status:
/// an answer of the other era was already asked about by the connection (the route it moves
/// off stops being live); a forgotten session (a `404`, or the server's words) is asked with
/// a `ping` ([`Connection::still_knows`], which settles the session by its own verdict):
/// answered, the stream is not offered; gone, the loop joins or starts the connection's
/// renewal ([`Connection::renew_now`]), which re-lists. With no session and none being made,
/// the loop makes one after the backoff. Each stream that opens asks for one re-listing (in
/// `Connection::listen`). Never returns.
async fn listen(connection: &Arc<Connection>) {
    let backoff = || {
        ExponentialBuilder::new()
            .with_min_delay(limits::LISTEN_RETRY_FIRST)
            .with_max_delay(limits::RETRY_MAX)
            .with_factor(2.0)
            .without_max_times()
            .build()
    };
    let namespace = connection.namespace();
    let mut installs = connection.installs();
    let mut waits = backoff();
    let mut machine = Machine::new();
    loop {
        let seen = *installs.borrow_and_update();
        let mut act = machine.step(Found::Live(connection.current()));
        let opened = tokio::time::Instant::now();
        // The acts of one turn, until it waits.
        let wait = loop {
            let found = match (&act, &mut machine.stream) {
                (
                    Act::Listen,
                    Stream::Open {
                        on, last_event_id, ..
                    },
                ) => {
                    // The stream, read until it ends, or until its session stops being live.
                    let listened = tokio::select! {
                        listened = connection.listen(on, last_event_id) => Some(listened),
                        () = connection.left(on) => None,
                    };
                    match listened {
                        None => {
                            tracing::debug!(
                                namespace,
                                "the stream's session is no longer the live one; leaving its stream"
                            );
                            Found::Left
                        }
                        Some(Ok(Listened::NotOffered)) => {
                            tracing::debug!(
                                namespace,
                                "the server offers no change stream on this session"
                            );
                            Found::NotOffered
                        }
                        Some(Ok(Listened::NoSession)) => {
                            connection.left(on).await;
                            Found::Deleted
                        }
                        Some(Ok(Listened::Ended)) => {
                            tracing::debug!(namespace, "the change stream ended");
                            Found::Ended
                        }
                        Some(Err(error)) => match error.verdict() {
                            Verdict::Expired => Found::Expired { words: false },
                            Verdict::SetAside => Found::Expired { words: true },
                            verdict => {
                                tracing::debug!(namespace, reason = %error, "the change stream failed");
                                match verdict.stays_away(limits::RETRY_MAX) {
                                    Some(wait) => Found::RateLimited { wait },
                                    None => Found::Ended,
                                }
                            }
                        },
                    }
                }
                (Act::Ping, Stream::Asking { on, .. }) => {
                    // Raced against the session being replaced meanwhile (a call's renewal):
                    // then its answer no longer matters.
                    let asked = tokio::select! {
                        asked = connection.still_knows(on) => Some(asked),
                        () = connection.left(on) => None,
                    };
                    match asked {
                        None => Found::Left,
                        Some(Ok(())) => Found::Alive,
                        Some(Err(gone)) => match gone.verdict() {
                            Verdict::Expired => Found::Gone { words: false },
                            Verdict::SetAside => Found::Gone { words: true },
                            verdict => {
                                tracing::debug!(namespace, reason = %gone, "asking whether the session is live failed");
                                match verdict.stays_away(limits::RETRY_MAX) {
                                    Some(wait) => Found::RateLimited { wait },
                                    None => Found::Unanswered,
                                }
                            }
                        },
                    }
                }
                (Act::Renew, _) => {
                    tracing::debug!(
                        namespace,
                        "the standalone stream's session expired; initializing again"
                    );
                    renewed(namespace, connection.renew_now().await)
                }
                (Act::AwaitLeft, Stream::NotOffered { on }) => {
                    connection.left(on).await;
                    break None;
                }
                (
                    Act::Backoff {
                        after_renewal,
                        at_least,
                    },
                    _,
                ) => {
                    let since = if *after_renewal {
                        *installs.borrow_and_update()
                    } else {
                        seen
                    };
                    break Some((since, *at_least));
                }
                (Act::AwaitSession, _) => {
                    let wait = waits.next().unwrap_or(limits::RETRY_MAX);
                    tokio::select! {
                        _ = installs.changed() => break None,
                        () = tokio::time::sleep(wait) => {
                            renewed(namespace, connection.renew_now().await)
                        }
                    }
                }
                // `Look`, or an act its state does not hold (none is made so).
                _ => break None,
            };
            act = machine.step(found);
        };
        if opened.elapsed() >= limits::LISTEN_STABLE {
            waits = backoff();
        }
        // A session a call renewed is looked at at once; one a listing alone renewed waits
        // out the backoff, so a server forgetting every session on tools/list is not asked in
        // a tight loop. The wait a rate limit named is the client's, not one session's (RFC
        // 6585 §4): it is kept whatever is installed meanwhile; only the backoff past it ends
        // early.
        if let Some((since, at_least)) = wait {
            let wait = waits.next().unwrap_or(limits::RETRY_MAX).max(at_least);
            tokio::time::sleep(at_least).await;
            tokio::select! {
                () = tokio::time::sleep(wait - at_least) => {}
                _ = installs.wait_for(|n| n.not_by_listing > since.not_by_listing) => {}
            }
        }
    }
}

/// What the loop's renewal ([`Connection::renew_now`]) found, by its verdict: made, failed,
/// or refused with a rate limit whose wait the loop stays away ([`Verdict::stays_away`]).
fn renewed(namespace: &str, renewal: Result<(), crate::http::Error>) -> Found<SessionHandle> {
    let Err(error) = renewal else {
        return Found::Renewed { ok: true };
    };
    tracing::debug!(namespace, reason = %error, "initializing again failed");
    match error.verdict().stays_away(limits::RETRY_MAX) {
        Some(wait) => Found::RateLimited { wait },
        None => Found::Renewed { ok: false },
    }
}

/// Why a tool is left out: its name when it has a readable one, and the reason.
type LeftOut = (Option<String>, String);

/// Reads one tool, or says why it is left out.
fn read_tool(raw: &RawValue, redactor: &crate::redact::Redactor) -> Result<Tool, LeftOut> {
    if !raw.get().starts_with('{') {
        return Err((None, format!("it is {}, not a tool object", raw_type(raw))));
    }
    let wire: WireTool<'_> = serde_json::from_str(raw.get())
        .map_err(|_| (None, "it is not a valid tool object".to_string()))?;
    let name: String = match wire.name {
        None => return Err((None, "it has no \"name\"".to_string())),
        Some(raw) => serde_json::from_str(raw.get()).map_err(|_| {
            (
                None,
                format!("\"name\" must be a string, found {}", raw_type(raw)),
            )
        })?,
    };
    if name.is_empty() || name.len() > MAX_TOOL_NAME_BYTES {
        return Err((
            None,
            format!(
                "its name is {} bytes (allowed: 1 to {MAX_TOOL_NAME_BYTES})",
                name.len()
            ),
        ));
    }
    let name = redactor.scrub_owned(name);
    let fail = |reason: String| (Some(name.clone()), reason);
    let text = |field: &str, raw: Option<&RawValue>| -> Result<Option<String>, LeftOut> {
        match raw {
            None => Ok(None),
            Some(raw) if raw.get() == "null" => Ok(None),
            Some(raw) => serde_json::from_str::<String>(raw.get())
                .map(Some)
                .map_err(|_| {
                    fail(format!(
                        "\"{field}\" must be a string, found {}",
                        raw_type(raw)
                    ))
                }),
        }
    };
    let object = |field: &str, raw: Option<&RawValue>| -> Result<Option<Box<RawValue>>, LeftOut> {
        match raw {
            None => Ok(None),
            Some(raw) if raw.get() == "null" => Ok(None),
            Some(raw) if raw.get().starts_with('{') => Ok(Some(scrubbed_json(raw, redactor))),
            Some(raw) => Err(fail(format!(
                "\"{field}\" must be an object, found {}",
                raw_type(raw)
            ))),
        }
    };
    let title = text("title", wire.title)?;
    let description = text("description", wire.description)?;
    let schema_bytes = wire.input_schema.map_or(0, |s| s.get().len())
        + wire.output_schema.map_or(0, |s| s.get().len());
    if schema_bytes > MAX_SCHEMA_BYTES {
        return Err(fail(format!(
            "its schemas are {schema_bytes} bytes (limit {MAX_SCHEMA_BYTES})"
        )));
    }
    let input_schema = object("inputSchema", wire.input_schema)?;
    let mirrored = match &input_schema {
        Some(schema) => Mirrored::declared(schema).map_err(fail)?,
        None => Mirrored::default(),
    };
    let output_schema = object("outputSchema", wire.output_schema)?;
    let annotations = object("annotations", wire.annotations)?;
    let title = title.filter(|t| !t.is_empty());
    let searched_title = title
        .as_ref()
        .filter(|t| {
            description
                .as_ref()
                .is_some_and(|d| !d.is_empty() && d != *t)
        })
        .map(|t| limits::truncate(&redactor.scrub(t), MAX_DESCRIPTION_BYTES).into_owned());
    let description = description.filter(|d| !d.is_empty()).or(title).map_or_else(
        || name.clone(),
        |d| limits::truncate(&redactor.scrub(&d), MAX_DESCRIPTION_BYTES).into_owned(),
    );
    let input_check = Checker::new(input_schema.as_deref(), &name);
    let output_check = Checker::new(output_schema.as_deref(), &name);
    Ok(Tool {
        input_check,
        output_check,
        input_schema: input_schema.unwrap_or_else(|| {
            RawValue::from_string(r#"{"type":"object"}"#.into()).expect("valid JSON")
        }),
        name,
        title: searched_title,
        description,
        output_schema,
        annotations,
        mirrored,
    })
}

/// `raw` compact ([`crate::json::compact`]: no blanks a reader left, no pretty-printing) with
/// the entry's secrets scrubbed out.
fn scrubbed_json(raw: &RawValue, redactor: &crate::redact::Redactor) -> Box<RawValue> {
    let compact = crate::json::compact(raw.get());
    match redactor.scrub_json(&compact) {
        std::borrow::Cow::Borrowed(_) => match compact {
            std::borrow::Cow::Borrowed(_) => raw.to_owned(),
            std::borrow::Cow::Owned(text) => {
                RawValue::from_string(text).unwrap_or_else(|_| raw.to_owned())
            }
        },
        // Never the original. The JSON rule keeps JSON valid (a number holding a secret becomes
        // "[redacted]"); text that is no JSON value all the same is shown as one JSON string.
        std::borrow::Cow::Owned(text) => match serde_json::from_str::<serde::de::IgnoredAny>(&text)
        {
            Ok(_) => RawValue::from_string(text).unwrap_or_default(),
            Err(_) => serde_json::value::to_raw_value(&text).unwrap_or_default(),
        },
    }
}

/// The JSON type of a raw value, as a reason names it (from its first byte: the value is valid
/// JSON).
fn raw_type(raw: &RawValue) -> &'static str {
    match raw.get().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backon::BackoffBuilder;

    impl Same for u32 {
        fn same(&self, other: &Self) -> bool {
            self == other
        }
    }

    const BACKOFF: Act = Act::Backoff {
        after_renewal: false,
        at_least: Duration::ZERO,
    };

    fn open(on: u32, fresh_by_words: bool) -> Stream<u32> {
        Stream::Open {
            on,
            last_event_id: String::new(),
            fresh_by_words,
        }
    }

    /// Session 1 live, its stream's `404` with the session-gone words, a ping that finds the
    /// session gone, a renewal that succeeds or not (`ok`), session 2 live; then `then`.
    fn renewal(ok: bool, then: impl IntoIterator<Item = Found<u32>>) -> Vec<Found<u32>> {
        let mut found = vec![
            Found::Live(Some(1)),
            Found::Expired { words: true },
            Found::Gone { words: true },
            Found::Renewed { ok },
            Found::Live(Some(2)),
        ];
        found.extend(then);
        found
    }

    /// Runs `found` through a fresh machine; returns each act and the state it left.
    fn run(found: Vec<Found<u32>>) -> (Vec<Act>, Machine<u32>) {
        let mut machine = Machine::new();
        let acts = found.into_iter().map(|f| machine.step(f)).collect();
        (acts, machine)
    }

    #[test]
    fn a_live_session_is_listened_on_and_a_new_one_starts_its_stream_fresh() {
        // What was found, the acts it led to, the stream it left.
        let cases = [
            (
                vec![Found::Live(Some(1)), Found::Ended, Found::Live(Some(1))],
                vec![Act::Listen, BACKOFF, Act::Listen],
                open(1, false),
            ),
            (
                vec![Found::Live(Some(1)), Found::Left, Found::Live(Some(2))],
                vec![Act::Listen, BACKOFF, Act::Listen],
                open(2, false),
            ),
            (
                vec![Found::Live(Some(1)), Found::Live(None)],
                vec![Act::Listen, Act::AwaitSession],
                Stream::NoSession,
            ),
        ];
        for (found, want_acts, want_stream) in cases {
            let (acts, machine) = run(found);
            assert_eq!(acts, want_acts);
            assert_eq!(machine.stream, want_stream);
        }
    }

    #[test]
    fn a_stream_not_offered_waits_for_its_session_to_leave() {
        let (acts, machine) = run(vec![
            Found::Live(Some(1)),
            Found::NotOffered,
            Found::Live(Some(1)),
            Found::Live(Some(2)),
        ]);
        assert_eq!(acts, [Act::Listen, Act::Look, Act::AwaitLeft, Act::Listen]);
        assert_eq!(machine.stream, open(2, false));
    }

    #[test]
    fn a_404_asks_with_a_ping_and_an_answer_means_no_get_endpoint() {
        let (acts, machine) = run(vec![
            Found::Live(Some(1)),
            Found::Expired { words: false },
            Found::Alive,
            Found::Live(Some(1)),
        ]);
        assert_eq!(acts, [Act::Listen, Act::Ping, Act::Look, Act::AwaitLeft]);
        assert_eq!(machine.stream, Stream::NotOffered { on: 1 });
        assert!(machine.said_no_endpoint);
    }

    #[test]
    fn a_ping_that_finds_the_session_gone_renews_and_the_next_session_is_fresh_by_words() {
        let (acts, machine) = run(renewal(true, []));
        assert_eq!(
            acts,
            [
                Act::Listen,
                Act::Ping,
                Act::Renew,
                Act::Backoff {
                    after_renewal: true,
                    at_least: Duration::ZERO,
                },
                Act::Listen
            ]
        );
        assert_eq!(machine.stream, open(2, true));
        // A failed renewal makes nothing fresh.
        let (_, machine) = run(renewal(false, []));
        assert_eq!(machine.stream, open(2, false));
    }

    #[test]
    fn the_same_words_on_a_fresh_session_are_the_streams_own_from_then_on() {
        let (acts, machine) = run(renewal(
            true,
            [
                Found::Expired { words: true },
                Found::Live(Some(3)),
                Found::Expired { words: true },
            ],
        ));
        assert_eq!(acts[5..], [Act::Look, Act::Listen, Act::Look]);
        assert_eq!(machine.words.said(), Said::Own);
        assert_eq!(machine.stream, Stream::NotOffered { on: 3 });
        // A 404 on a fresh session is still asked about.
        let (acts, _) = run(renewal(true, [Found::Expired { words: false }]));
        assert_eq!(acts[5], Act::Ping);
    }

    #[test]
    fn only_the_first_stream_of_a_session_made_after_the_words_is_fresh() {
        let (acts, machine) = run(renewal(
            true,
            [
                Found::Ended,
                Found::Live(Some(2)),
                Found::Expired { words: true },
            ],
        ));
        assert_eq!(acts[5..], [BACKOFF, Act::Listen, Act::Ping]);
        assert_eq!(machine.words.said(), Said::SessionGone);
    }

    #[test]
    fn a_ping_that_fails_or_is_overtaken_goes_back_to_the_stream_after_the_backoff() {
        for found in [Found::Unanswered, Found::Left] {
            let (acts, mut machine) = run(vec![
                Found::Live(Some(1)),
                Found::Expired { words: false },
                found,
            ]);
            assert_eq!(acts[2], BACKOFF);
            assert_eq!(machine.stream, open(1, false));
            assert_eq!(machine.step(Found::Live(Some(1))), Act::Listen);
        }
        let (acts, _) = run(vec![Found::Live(Some(1)), Found::Deleted]);
        assert_eq!(acts[1], Act::Look);
    }

    #[test]
    fn a_rate_limited_stream_or_ping_backs_off_at_least_the_named_wait() {
        let wait = Duration::from_secs(20);
        let limited = Act::Backoff {
            after_renewal: false,
            at_least: wait,
        };
        // The stream refused: back to the same session, after the wait.
        let (acts, machine) = run(vec![Found::Live(Some(1)), Found::RateLimited { wait }]);
        assert_eq!(acts, [Act::Listen, limited]);
        assert_eq!(machine.stream, open(1, false));
        // The ping refused: the same.
        let (acts, machine) = run(vec![
            Found::Live(Some(1)),
            Found::Expired { words: false },
            Found::RateLimited { wait },
        ]);
        assert_eq!(acts, [Act::Listen, Act::Ping, limited]);
        assert_eq!(machine.stream, open(1, false));
    }

    #[test]
    fn a_rate_limited_renewal_backs_off_at_least_the_named_wait() {
        let wait = Duration::from_secs(20);
        let limited = Act::Backoff {
            after_renewal: true,
            at_least: wait,
        };
        // The loop's own renewal after a ping found the session gone: nothing made is fresh.
        let (acts, machine) = run(vec![
            Found::Live(Some(1)),
            Found::Expired { words: true },
            Found::Gone { words: true },
            Found::RateLimited { wait },
        ]);
        assert_eq!(acts, [Act::Listen, Act::Ping, Act::Renew, limited]);
        assert_eq!(machine.stream, Stream::Renewing { words: false });
        // The renewal made while no session is live (`AwaitSession`).
        let (acts, machine) = run(vec![Found::Live(None), Found::RateLimited { wait }]);
        assert_eq!(acts, [Act::AwaitSession, limited]);
        assert_eq!(machine.stream, Stream::NoSession);
        // Any other end of that renewal: look again at once.
        let (acts, _) = run(vec![Found::Live(None), Found::Renewed { ok: false }]);
        assert_eq!(acts, [Act::AwaitSession, Act::Look]);
    }

    #[test]
    fn backoff_doubles_from_1_second_with_jitter_and_never_passes_60_seconds() {
        let bases = [1, 2, 4, 8, 16, 30, 30, 30, 30, 30];
        for seed in [1, 2, 3, 42] {
            let waits: Vec<Duration> = backoff().with_jitter_seed(seed).build().take(10).collect();
            for (wait, base) in waits.iter().zip(bases) {
                let base = Duration::from_secs(base);
                assert!(
                    *wait >= base && *wait < 2 * base && *wait <= limits::RETRY_MAX,
                    "seed {seed}: {waits:?}"
                );
            }
            assert!(
                waits
                    .iter()
                    .zip(bases)
                    .any(|(w, b)| *w != Duration::from_secs(b)),
                "seed {seed}: no jitter in {waits:?}"
            );
        }
    }

    #[test]
    fn retry_after_replaces_the_step_within_1_and_60_seconds() {
        let step = Duration::from_millis(4_700);
        assert_eq!(next_wait(step, None), step);
        assert_eq!(
            next_wait(step, Some(Duration::from_secs(8))),
            Duration::from_secs(8)
        );
        assert_eq!(
            next_wait(step, Some(Duration::ZERO)),
            Duration::from_secs(1)
        );
        assert_eq!(
            next_wait(step, Some(Duration::from_secs(3600))),
            Duration::from_secs(60)
        );
    }
}
