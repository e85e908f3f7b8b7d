//! What a run does and what it prints: the plan (full, smoke, `--only`), the table rows and the
//! rounding of the JSON summary.

use std::time::Duration;

use serde_json::{Value, json};

use crate::metrics::Series;

// ---------------------------------------------------------------------------------------------

pub(crate) struct Plan {
    /// `--only m1,m4`: run only these sections (for profiling); M6's p99 part needs m1.
    pub(crate) only: Option<Vec<String>>,
    pub(crate) m1_rounds: usize,
    pub(crate) m1_calls: usize,
    pub(crate) m2_rounds: usize,
    pub(crate) m2_starts: usize,
    pub(crate) m2_decodes: usize,
    pub(crate) m3_rounds: usize,
    pub(crate) m3_starts: usize,
    pub(crate) m4_rounds: usize,
    pub(crate) m4_calls: usize,
    pub(crate) m6_renders: usize,
    pub(crate) m6_plain_rounds: usize,
    pub(crate) m6_plain_calls: usize,
    pub(crate) m7_rounds: usize,
    pub(crate) m7_bursts: usize,
    pub(crate) scrub_rounds: usize,
    pub(crate) scrub_calls: usize,
    /// How many times the search section runs every query over 10,000 tools.
    pub(crate) search_rounds: usize,
    pub(crate) budget: Duration,
}

impl Plan {
    pub(crate) fn runs(&self, section: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|s| s == section))
    }
    pub(crate) fn full() -> Plan {
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
            m7_rounds: 11,
            m7_bursts: 5,
            scrub_rounds: 6,
            scrub_calls: 1,
            search_rounds: 5,
            budget: Duration::from_secs(40),
        }
    }
    pub(crate) fn smoke() -> Plan {
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
            m7_rounds: 3,
            m7_bursts: 2,
            scrub_rounds: 3,
            scrub_calls: 1,
            search_rounds: 2,
            budget: Duration::from_secs(6),
        }
    }
}

pub(crate) struct Row {
    pub(crate) metric: String,
    pub(crate) what: String,
    pub(crate) p50: String,
    pub(crate) p99: String,
    pub(crate) extra: String,
}

pub(crate) fn row(metric: &str, s: &Series, unit_ms: bool, extra: String) -> Row {
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

pub(crate) fn r2(x: f64) -> Value {
    if x.is_finite() {
        json!((x * 100.0).round() / 100.0)
    } else {
        Value::Null
    }
}
