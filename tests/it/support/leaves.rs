//! The texts inside a JSON value, for tests that look for a secret anywhere in a JSON answer,
//! listing or log line: each string, each object key, and on request each number.

use serde_json::Value;

/// Every string and object key inside `value`, in document order.
pub fn strings(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(value, false, &mut out);
    out
}

/// Every string, object key and number (as JSON writes it) inside `value`, in document order.
pub fn strings_and_numbers(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(value, true, &mut out);
    out
}

fn walk(value: &Value, numbers: bool, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) if numbers => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|v| walk(v, numbers, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                walk(v, numbers, out);
            }
        }
        _ => {}
    }
}
