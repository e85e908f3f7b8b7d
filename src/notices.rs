//! What a server says unasked: the notifications that arrive on any stream (a request's SSE
//! stream, a resumed one, or the standalone `GET` stream), and the signals they raise for the
//! server's task.
//!
//! - `notifications/tools/list_changed` (MCP 2025-11-25, server/tools "List Changed
//!   Notification") asks the server's task for a re-listing ([`Signals::request_relist`]).
//! - `notifications/message` (MCP 2025-11-25, server/utilities/logging) becomes a `tracing` event
//!   with target [`SERVER_LOG_TARGET`], at the level the MCP level maps to
//!   ([`tracing_level`]), its text scrubbed of the entry's secrets and cut to
//!   [`limits::MAX_LOG_MESSAGE_BYTES`].
//!
//! Any other notification is ignored.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::{Notify, watch};

use crate::limits;

/// The connection a notification came on, as [`handle`] needs it: implemented by
/// `http::Connection`, so this module stays below the HTTP client that calls it.
pub(crate) trait Origin {
    /// The namespace of the server, for log fields.
    fn namespace(&self) -> &str;
    /// The signals to the server's task.
    fn signals(&self) -> &Signals;
    /// `text` from the server as a log line may show it: scrubbed of the entry's secrets,
    /// control characters replaced, cut to `max` bytes.
    fn server_text<'a>(&self, text: &'a str, max: usize) -> std::borrow::Cow<'a, str>;
}

/// The `tracing` target of server log messages.
pub(crate) const SERVER_LOG_TARGET: &str = "plugin_mcp::server_log";

/// What a connection tells its server's task, and how the task reports back.
///
/// Re-listings are counted: each request takes the next number ([`Signals::request_relist`]),
/// the worker notes the count when a re-listing starts ([`Signals::relist_wanted`]) and publishes
/// it when the re-listing ends ([`Signals::relisted`]). A request made while one runs wakes the
/// worker once more after it; a burst of requests wakes it once (a [`Notify`] holds one permit).
pub(crate) struct Signals {
    /// Re-listings asked for so far.
    requested: AtomicU64,
    /// Wakes the re-list worker.
    relist: Notify,
    /// The highest request number a finished re-listing covered.
    listed: watch::Sender<u64>,
}

impl Default for Signals {
    fn default() -> Self {
        Self {
            requested: AtomicU64::new(0),
            relist: Notify::new(),
            listed: watch::Sender::new(0),
        }
    }
}

impl Signals {
    /// Asks for a re-listing; returns its number, for [`Signals::wait_relisted`].
    pub(crate) fn request_relist(&self) -> u64 {
        let number = self.requested.fetch_add(1, Ordering::SeqCst) + 1;
        self.relist.notify_one();
        number
    }

    /// Waits until a re-listing is wanted; returns the number of requests the next re-listing
    /// covers.
    ///
    /// # Cancel safety
    /// Cancel safe: a wake-up not yet taken stays stored.
    pub(crate) async fn relist_wanted(&self) -> u64 {
        self.relist.notified().await;
        self.requested.load(Ordering::SeqCst)
    }

    /// Records that a re-listing (successful or not) covering requests up to `covered` ended.
    pub(crate) fn relisted(&self, covered: u64) {
        self.listed.send_if_modified(|listed| {
            let newer = covered > *listed;
            if newer {
                *listed = covered;
            }
            newer
        });
    }

    /// Waits until a re-listing covering request `number` has ended.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub(crate) async fn wait_relisted(&self, number: u64) {
        let mut listed = self.listed.subscribe();
        // The sender lives as long as `self`, so the wait cannot fail.
        let _ = listed.wait_for(|listed| *listed >= number).await;
    }

    /// The session was initialized again (the connection's renewal task calls it once per
    /// renewal, when it installs the new session). When a call or the standalone stream waited
    /// for the renewal too (`by_listing` false), asks for a re-listing (a restarted server may
    /// offer other tools). When only listings' own `tools/list` requests waited for it, the
    /// listing goes on in the new session, so it asks for none: otherwise a server that forgets
    /// every session on `tools/list` (a load balancer without sticky sessions) would be
    /// initialized and listed again in a loop.
    pub(crate) fn session_renewed(&self, by_listing: bool) {
        if !by_listing {
            self.request_relist();
        }
    }

    /// The standalone stream opened: asks for one re-listing, since a change made before the
    /// stream was open was announced nowhere.
    pub(crate) fn stream_opened(&self) {
        self.request_relist();
    }
}

/// Handles one notification from `connection`'s server.
pub(crate) fn handle(connection: &impl Origin, method: &str, params: Option<&RawValue>) {
    match method {
        "notifications/tools/list_changed" => {
            tracing::debug!(namespace = %connection.namespace(), "the server's tools changed");
            connection.signals().request_relist();
        }
        "notifications/message" => log(connection, params),
        _ => {
            tracing::trace!(namespace = %connection.namespace(), notification = %connection.server_text(method, 64), "ignored a server notification");
        }
    }
}

#[derive(Deserialize)]
struct LogParams<'a> {
    #[serde(borrow)]
    level: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    logger: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

/// The `tracing` level of an MCP log level (RFC 5424 severities): `debug` → DEBUG; `info`,
/// `notice` → INFO; `warning` → WARN; `error`, `critical`, `alert`, `emergency` → ERROR; any
/// other → INFO.
pub(crate) fn tracing_level(level: &str) -> tracing::Level {
    match level {
        "debug" => tracing::Level::DEBUG,
        "warning" => tracing::Level::WARN,
        "error" | "critical" | "alert" | "emergency" => tracing::Level::ERROR,
        _ => tracing::Level::INFO,
    }
}

/// Emits a server log message as a `tracing` event: fields `namespace`, `logger` (empty when the
/// server named none) and the message (`data` when it is a string, else its JSON text), all
/// scrubbed, single-line and bounded.
fn log(connection: &impl Origin, params: Option<&RawValue>) {
    let Some(params) = params.and_then(|p| serde_json::from_str::<LogParams<'_>>(p.get()).ok())
    else {
        tracing::trace!(namespace = %connection.namespace(), "ignored a notifications/message without a level");
        return;
    };
    let data = match params.data {
        None => String::new(),
        Some(raw) => match serde_json::from_str::<String>(raw.get()) {
            Ok(text) => text,
            Err(_) => raw.get().to_string(),
        },
    };
    let message = connection.server_text(&data, limits::MAX_LOG_MESSAGE_BYTES);
    let logger = params
        .logger
        .as_deref()
        .map(|l| connection.server_text(l, 128))
        .unwrap_or_default();
    let namespace = connection.namespace();
    macro_rules! emit {
        ($level:expr) => {
            tracing::event!(target: SERVER_LOG_TARGET, $level, namespace, logger = %logger, "{message}")
        };
    }
    match tracing_level(&params.level) {
        tracing::Level::ERROR => emit!(tracing::Level::ERROR),
        tracing::Level::WARN => emit!(tracing::Level::WARN),
        tracing::Level::DEBUG => emit!(tracing::Level::DEBUG),
        _ => emit!(tracing::Level::INFO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[test]
    fn mcp_log_levels_map_to_tracing_levels() {
        let mapped: Vec<tracing::Level> = [
            "debug",
            "info",
            "notice",
            "warning",
            "error",
            "critical",
            "alert",
            "emergency",
            "loud",
        ]
        .iter()
        .map(|l| tracing_level(l))
        .collect();
        use tracing::Level as L;
        assert_eq!(
            mapped,
            [
                L::DEBUG,
                L::INFO,
                L::INFO,
                L::WARN,
                L::ERROR,
                L::ERROR,
                L::ERROR,
                L::ERROR,
                L::INFO
            ]
        );
    }

    #[tokio::test]
    async fn relistings_are_counted_and_coalesced() {
        let signals = Signals::default();
        let first = signals.request_relist();
        let second = signals.request_relist();
        assert_eq!((first, second), (1, 2));
        // Two requests before the worker woke: one wake-up covering both.
        assert_eq!(signals.relist_wanted().await, 2);
        let third = signals.request_relist();
        signals.relisted(2);
        // The request made while that re-listing ran wakes the worker once more.
        assert_eq!(signals.relist_wanted().await, 3);
        let waiter = signals.wait_relisted(third);
        tokio::pin!(waiter);
        assert!(waiter.as_mut().now_or_never().is_none());
        signals.relisted(3);
        waiter.await;
        // An older count never moves the published one back.
        signals.relisted(1);
        signals.wait_relisted(3).await;
    }

    #[tokio::test]
    async fn a_renewal_by_a_listing_asks_for_no_relisting() {
        let signals = Signals::default();
        signals.session_renewed(true);
        assert!(signals.relist_wanted().now_or_never().is_none());
        // A call's renewal asks for a re-listing.
        signals.session_renewed(false);
        assert_eq!(signals.relist_wanted().await, 1);
        signals.session_renewed(false);
        assert_eq!(signals.relist_wanted().await, 2);
        // An opened stream asks for one re-listing.
        signals.stream_opened();
        assert_eq!(signals.relist_wanted().await, 3);
    }
}
