//! Captures the `tracing` events of the current thread as text, for tests that assert on logs.
//!
//! `#[tokio::test]` runs on one thread, and so do the Pack's tasks on that runtime: a capture set
//! up at the start of such a test sees every event the Pack emits.

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

/// The captured log lines, without timestamps or colours.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Everything captured so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The captured lines that contain `needle`.
    pub fn lines_with(&self, needle: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}

/// A writer appending to [`Logs`].
pub struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Logs {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LogWriter(Arc::clone(&self.0))
    }
}

/// Captures this thread's events that pass `filter` (an `EnvFilter` directive, e.g.
/// `plugin_mcp=debug`) until the guard is dropped. The request spans (`plugin_mcp::http::trace`,
/// README "Traces") are left out, so a line is the event alone; their attributes are tested
/// where they are made (`dialects`).
/// The process's global subscriber while tests capture logs: it records nothing, but keeps every
/// callsite's interest `sometimes` and the global level hint at TRACE. A `tracing` callsite's
/// interest and the global maximum level are shared by the whole process and recomputed from
/// the subscribers alive at the time; without this one, a capture at `warn` (or a filter that
/// switches a target off) alive alone at such a moment hides another test's events.
struct Quiet;

impl tracing::Subscriber for Quiet {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Installs [`Quiet`] as the global subscriber, once per process (a Host's own global
/// subscriber, if a test set one first, is kept).
pub fn keep_interest() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = tracing::subscriber::set_global_default(Quiet);
    });
}

pub fn capture(filter: &str) -> (tracing::subscriber::DefaultGuard, Logs) {
    keep_interest();
    let filter = format!("{filter},plugin_mcp::http::trace=off");
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .without_time()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&filter))
        .finish();
    (tracing::subscriber::set_default(subscriber), logs)
}
