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
pub fn capture(filter: &str) -> (tracing::subscriber::DefaultGuard, Logs) {
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
