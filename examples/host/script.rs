//! Script lines: `TOOL [ARGUMENTS]`, a JSON object `{"tool": TOOL, "arguments": {...}, "id": ANY}`
//! (`arguments` and `id` optional; the answer line gives the `id` back), or `sleep SECONDS`;
//! blank lines and `#` lines are skipped.

use std::time::Duration;

use serde_json::{Value, json};

use crate::args::seconds;
use crate::config::without_bom;

/// One script line that does something.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    Call {
        tool: String,
        arguments: Value,
        /// The `id` a JSON object line gave, given back on its answer line.
        id: Option<Value>,
    },
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
    if line.starts_with('{') {
        return object_line(line).map(Some);
    }
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
        id: None,
    }))
}

/// A JSON object line: `{"tool": TOOL, "arguments": {...}, "id": ANY}`.
fn object_line(line: &str) -> Result<Step, String> {
    let Ok(Value::Object(mut fields)) = serde_json::from_str::<Value>(line) else {
        return Err("a line starting with { must be a JSON object".to_string());
    };
    let Some(Value::String(tool)) = fields.remove("tool") else {
        return Err("a JSON object line needs \"tool\", a string".to_string());
    };
    let arguments = match fields.remove("arguments") {
        None => json!({}),
        Some(arguments @ Value::Object(_)) => arguments,
        Some(_) => return Err("\"arguments\" must be a JSON object".to_string()),
    };
    let id = fields.remove("id");
    if let Some(other) = fields.keys().next() {
        return Err(format!(
            "a JSON object line has \"tool\", \"arguments\" and \"id\", not \"{other}\""
        ));
    }
    Ok(Step::Call {
        tool,
        arguments,
        id,
    })
}

/// Every step of a script file with its line number (from 1), or what is wrong with its first
/// bad line.
pub(crate) fn read_script(path: &str) -> Result<Vec<(usize, Step)>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read script {path}: {e}"))?;
    let mut steps = Vec::new();
    for (i, line) in without_bom(&text).lines().enumerate() {
        match parse_line(line) {
            Ok(Some(step)) => steps.push((i + 1, step)),
            Ok(None) => {}
            Err(e) => return Err(format!("{path} line {}: {e}", i + 1)),
        }
    }
    Ok(steps)
}
