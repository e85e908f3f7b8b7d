//! How a reason names a JSON value's type ("found a number"). A leaf.

use serde_json::Value;

/// The JSON type of `value`, as a reason names it.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
