//! Script lines: `TOOL [ARGUMENTS]` or `sleep SECONDS`; blank lines and `#` lines are skipped.

use std::time::Duration;

use serde_json::{Value, json};

use crate::args::seconds;
use crate::config::without_bom;

/// One script line that does something.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    Call { tool: String, arguments: Value },
    Sleep(Duration),
}

/// One script line: `None` for a blank or `#` line.
pub(crate) fn parse_line(line: &str) -> Result<Option<Step>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let (word, rest) = line
        .split_once(char::is_whitespace)
        .map_or((line, ""), |(w, r)| (w, r.trim()));
    if word == "sleep" {
        return seconds("sleep", rest).map(|d| Some(Step::Sleep(d)));
    }
    let arguments = if rest.is_empty() {
        json!({})
    } else {
        serde_json::from_str(rest).map_err(|e| format!("ARGUMENTS is not JSON: {e}"))?
    };
    Ok(Some(Step::Call {
        tool: word.to_string(),
        arguments,
    }))
}

/// Every step of a script file, or what is wrong with its first bad line.
pub(crate) fn read_script(path: &str) -> Result<Vec<Step>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read script {path}: {e}"))?;
    let mut steps = Vec::new();
    for (i, line) in without_bom(&text).lines().enumerate() {
        match parse_line(line) {
            Ok(Some(step)) => steps.push(step),
            Ok(None) => {}
            Err(e) => return Err(format!("{path} line {}: {e}", i + 1)),
        }
    }
    Ok(steps)
}
