//! Checking JSON values against a tool's schemas (MCP spec "Tools": `inputSchema` and
//! `outputSchema`, JSON Schema 2020-12 unless the schema's `$schema` names another dialect).
//!
//! A schema sits beside its tool in a [`Checker`] and is compiled once, the first time a call
//! uses it (a start lists every tool, while a session calls few), and kept for the life of the
//! listing that holds it. `$ref`s inside the schema are resolved; a `$ref` to anything outside
//! it is never fetched (no network, no file), so such a schema does not compile. A schema this
//! Pack does not use for checking — larger than [`MAX_CHECKED_SCHEMA_BYTES`], with more than
//! [`MAX_CHECKED_SCHEMA_NODES`] JSON values, or one the validator cannot compile — is
//! [`Unchecked`]: the server decides what it accepts, and nothing here is an error (README
//! "What the tools answer").
//!
//! Patterns run on the `regex` engine (linear time, no backtracking); `format` is an annotation
//! only, as 2020-12 defines it.

use std::sync::OnceLock;

use jsonschema::{PatternOptions, Retrieve, Uri, Validator};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::limits::{
    MAX_CHECKED_SCHEMA_BYTES, MAX_CHECKED_SCHEMA_NODES, MAX_LISTED_PROBLEMS, MAX_PROBLEM_BYTES,
    truncate,
};
use crate::redact::Redactor;

/// A tool schema and, from its first use on, its compilation.
pub(crate) struct Checker {
    /// The schema as listed; `None` when the tool has none.
    schema: Option<Box<RawValue>>,
    /// The tool's name (scrubbed), for the debug log of a schema that is not used.
    tool: String,
    /// The compiled schema, or why it is not used for checking (the server decides then); set
    /// by the first check (or [`Checker::is_used`]), then read by every later one.
    compilation: OnceLock<Result<Box<Compiled>, Unchecked>>,
}

/// A compiled schema and the optional names of its root.
pub(crate) struct Compiled {
    validator: Validator,
    /// The names the root declares under `properties` with a `type` that excludes `null`, and
    /// does not list under `required`, for [`Checker::check_arguments`].
    optional: Vec<String>,
}

/// Why a schema is not used for checking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unchecked {
    /// The tool has no such schema.
    Absent,
    /// The schema's JSON text is this many bytes, over [`MAX_CHECKED_SCHEMA_BYTES`].
    TooLarge(usize),
    /// The schema holds more than [`MAX_CHECKED_SCHEMA_NODES`] JSON values.
    TooComplex,
    /// The validator could not compile it (an unknown dialect, an invalid keyword value, a `$ref`
    /// outside the schema, a pattern the `regex` engine refuses).
    NotCompiled,
}

/// The problems a check found: the first [`MAX_LISTED_PROBLEMS`], each
/// `<where>: <what was expected>`, and how many more there were.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problems {
    pub(crate) listed: Vec<String>,
    pub(crate) more: usize,
}

impl std::fmt::Display for Problems {
    /// `a; b; and 3 more problems`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.listed.join("; "))?;
        match self.more {
            0 => Ok(()),
            1 => f.write_str("; and 1 more problem"),
            n => write!(f, "; and {n} more problems"),
        }
    }
}

/// The retriever of every `$ref` outside the schema: it fetches nothing.
struct NoFetch;

impl Retrieve for NoFetch {
    fn retrieve(&self, _: &Uri<String>) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err("this Pack fetches no schema from outside the tool's own".into())
    }
}

impl Checker {
    /// The checker of `schema` (a tool's schema as listed, `None` when the tool has none),
    /// compiled when first used. `tool` names it in the debug log of a schema that is not used.
    pub(crate) fn new(schema: Option<&RawValue>, tool: &str) -> Checker {
        Checker {
            schema: schema.map(ToOwned::to_owned),
            tool: tool.to_string(),
            compilation: OnceLock::new(),
        }
    }

    /// The checker of a tool without such a schema: it checks nothing.
    #[cfg(test)]
    pub(crate) const fn absent() -> Checker {
        Checker {
            schema: None,
            tool: String::new(),
            compilation: OnceLock::new(),
        }
    }

    /// The compiled schema, compiling it on the first call (from any thread; concurrent first
    /// calls compile it once).
    fn compilation(&self) -> &Result<Box<Compiled>, Unchecked> {
        self.compilation.get_or_init(|| {
            let Some(schema) = &self.schema else {
                return Err(Unchecked::Absent);
            };
            match compile(schema) {
                Ok(compiled) => Ok(Box::new(compiled)),
                Err(why) => {
                    // The tool name is scrubbed already; the validator's own words (which may
                    // quote the schema) are not logged.
                    tracing::debug!(tool = %self.tool, ?why, "a tool schema is not used for checking");
                    Err(why)
                }
            }
        })
    }

    /// Whether the schema is used for checking (compiling it if not done yet).
    pub(crate) fn is_used(&self) -> bool {
        self.compilation().is_ok()
    }

    /// Why the schema is not used for checking; `None` when it is.
    #[cfg(test)]
    fn unchecked(&self) -> Option<Unchecked> {
        self.compilation().as_ref().err().copied()
    }

    /// Checks a `tools/call`'s `arguments` object like [`Checker::check`] (root `arguments`),
    /// with one tolerance for arguments that do not match as sent: a top-level argument whose
    /// value is `null`, declared under the schema root's `properties` with a `type` that
    /// excludes `null` and not listed under its `required`, counts as not given. Models send
    /// `null` for an optional parameter they leave out, and the MCP spec (2026-07-28 "Tools",
    /// `x-mcp-header`) treats a `null` parameter as an absent one. A `null` the property's own
    /// `type` allows is a value, checked as sent. The arguments sent are not changed.
    ///
    /// # Errors
    /// The problems found, when the arguments do not match.
    pub(crate) fn check_arguments(
        &self,
        arguments: &Value,
        redactor: &Redactor,
    ) -> Result<(), Problems> {
        let Ok(compiled) = self.compilation() else {
            return Ok(());
        };
        if compiled.validator.is_valid(arguments) {
            return Ok(());
        }
        let optional_null =
            |(name, value): (&String, &Value)| value.is_null() && compiled.optional.contains(name);
        match arguments {
            Value::Object(map) if map.iter().any(optional_null) => {
                let given: serde_json::Map<String, Value> = map
                    .iter()
                    .filter(|&entry| !optional_null(entry))
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect();
                self.check(&Value::Object(given), "arguments", redactor)
            }
            _ => self.check(arguments, "arguments", redactor),
        }
    }

    /// Checks `instance`; `root` names the instance's root in each problem (`arguments`,
    /// `structuredContent`), followed by the JSON Pointer (RFC 6901) of the failing value. Each
    /// problem is scrubbed with `redactor` (the validator quotes schema text, which is the
    /// server's), put on one line, then cut to [`MAX_PROBLEM_BYTES`].
    ///
    /// # Errors
    /// The problems found, when `instance` does not match.
    pub(crate) fn check(
        &self,
        instance: &Value,
        root: &str,
        redactor: &Redactor,
    ) -> Result<(), Problems> {
        let Ok(compiled) = self.compilation() else {
            return Ok(());
        };
        let validator = &compiled.validator;
        if validator.is_valid(instance) {
            return Ok(());
        }
        let mut listed = Vec::new();
        let mut more = 0;
        for error in validator.iter_errors(instance) {
            if listed.len() == MAX_LISTED_PROBLEMS {
                more += 1;
                continue;
            }
            let text = format!("{root}{}: {error}", error.instance_path());
            let text: String = redactor
                .scrub(&text)
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            listed.push(truncate(&text, MAX_PROBLEM_BYTES).into_owned());
        }
        if listed.is_empty() {
            // `is_valid` and `iter_errors` disagree only if the validator is broken: the server
            // decides then.
            return Ok(());
        }
        Err(Problems { listed, more })
    }
}

fn compile(schema: &RawValue) -> Result<Compiled, Unchecked> {
    let bytes = schema.get().len();
    if bytes > MAX_CHECKED_SCHEMA_BYTES {
        return Err(Unchecked::TooLarge(bytes));
    }
    let value: Value = serde_json::from_str(schema.get()).map_err(|_| Unchecked::NotCompiled)?;
    if nodes(&value, MAX_CHECKED_SCHEMA_NODES).is_none() {
        return Err(Unchecked::TooComplex);
    }
    let validator = jsonschema::options()
        .with_retriever(NoFetch)
        .with_pattern_options(PatternOptions::regex())
        .should_validate_formats(false)
        .build(&value)
        .map_err(|_| Unchecked::NotCompiled)?;
    let required: Vec<&str> = value
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // A `type` that excludes `null`: a string other than "null", or an array of strings
    // without it.
    let excludes_null = |property: &Value| match property.get("type") {
        Some(Value::String(t)) => t != "null",
        Some(Value::Array(types)) => {
            types.iter().all(Value::is_string) && !types.contains(&Value::from("null"))
        }
        _ => false,
    };
    let optional = value
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .filter(|(name, property)| {
                    !required.contains(&name.as_str()) && excludes_null(property)
                })
                .map(|(name, _)| name.clone())
                .collect()
        })
        .unwrap_or_default();
    Ok(Compiled {
        validator,
        optional,
    })
}

/// How many JSON values `value` holds (itself included), or `None` when more than `max`.
fn nodes(value: &Value, max: usize) -> Option<usize> {
    let mut count = 0usize;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        count += 1;
        if count > max {
            return None;
        }
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    Some(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checker(schema: &Value) -> Checker {
        let raw = serde_json::value::to_raw_value(schema).unwrap();
        Checker::new(Some(&raw), "t")
    }

    fn unchecked(schema: &Value) -> Option<Unchecked> {
        checker(schema).unchecked()
    }

    #[test]
    fn a_schema_is_compiled_at_its_first_use_and_kept() {
        let checker = checker(&json!({"type": "object", "required": ["a"]}));
        assert!(checker.compilation.get().is_none());
        let redactor = Redactor::default();
        assert!(checker.check_arguments(&json!({}), &redactor).is_err());
        assert!(matches!(checker.compilation.get(), Some(Ok(_))));
        assert!(checker.is_used());
        assert!(checker.check_arguments(&json!({"a": 1}), &redactor).is_ok());
    }

    #[test]
    fn local_refs_resolve_and_remote_refs_are_never_fetched() {
        let local = json!({"$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}});
        let problems = checker(&local)
            .check(&json!({"a": "x"}), "arguments", &Redactor::default())
            .unwrap_err();
        assert_eq!(
            problems.listed,
            vec![r#"arguments/a: "x" is not of type "integer""#]
        );
        for remote in [
            json!({"$ref": "https://127.0.0.1:9/schema.json"}),
            json!({"$ref": "file:///etc/passwd"}),
        ] {
            assert_eq!(unchecked(&remote), Some(Unchecked::NotCompiled));
        }
    }

    #[test]
    fn a_null_optional_argument_counts_as_not_given() {
        let schema = json!({
            "type": "object",
            "properties": {"region": {"type": "string"}, "verbose": {"type": "boolean"}},
            "required": ["region"],
            "additionalProperties": false
        });
        let checker = checker(&schema);
        let none = Redactor::default();
        assert_eq!(
            checker.check_arguments(&json!({"region": "us", "verbose": null}), &none),
            Ok(())
        );
        // The tolerance is for optional names only, and only for `null`.
        let problems = checker
            .check_arguments(&json!({"region": null, "verbose": null}), &none)
            .unwrap_err();
        assert_eq!(
            problems.listed,
            vec!["arguments/region: null is not of type \"string\""]
        );
        let problems = checker
            .check_arguments(&json!({"region": "us", "verbose": "yes"}), &none)
            .unwrap_err();
        assert_eq!(
            problems.listed,
            vec![r#"arguments/verbose: "yes" is not of type "boolean""#]
        );
        // A null for a name the schema does not declare is checked as sent.
        let problems = checker
            .check_arguments(&json!({"region": "us", "other": null}), &none)
            .unwrap_err();
        assert_eq!(
            problems.listed,
            vec!["arguments: Additional properties are not allowed ('other' was unexpected)"]
        );
        // Plain `check` (structuredContent) has no such tolerance.
        assert!(
            checker
                .check(&json!({"region": "us", "verbose": null}), "x", &none)
                .is_err()
        );
    }

    #[test]
    fn a_null_the_property_allows_is_a_value() {
        let none = Redactor::default();
        // Valid as sent: never refused by the tolerance.
        let note = checker(
            &json!({"properties": {"note": {"type": ["string", "null"]}},
                                   "minProperties": 1}),
        );
        assert_eq!(note.check_arguments(&json!({"note": null}), &none), Ok(()));
        let either = checker(&json!({"properties": {"a": {"type": "string"}, "b": {}},
                                     "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}));
        assert_eq!(either.check_arguments(&json!({"b": null}), &none), Ok(()));
        // A null the property allows is present: dependentRequired holds for it.
        let dependent = checker(&json!({"properties": {"a": {"type": ["string", "null"]},
                                                       "b": {"type": "string"}},
                                        "dependentRequired": {"a": ["b"]}}));
        let problems = dependent
            .check_arguments(&json!({"a": null}), &none)
            .unwrap_err();
        assert_eq!(
            problems.listed,
            vec![r#"arguments: "b" is a required property"#]
        );
    }

    #[test]
    fn schemas_beyond_the_bounds_are_not_used() {
        let wide: serde_json::Map<String, Value> = (0..MAX_CHECKED_SCHEMA_NODES)
            .map(|i| (format!("p{i}"), json!({})))
            .collect();
        assert_eq!(
            unchecked(&json!({"properties": wide})),
            Some(Unchecked::TooComplex)
        );
        let long = "x".repeat(MAX_CHECKED_SCHEMA_BYTES);
        assert_eq!(
            unchecked(&json!({"description": long})),
            Some(Unchecked::TooLarge(MAX_CHECKED_SCHEMA_BYTES + 18))
        );
        assert_eq!(
            unchecked(&json!({"type": "no-such-type"})),
            Some(Unchecked::NotCompiled)
        );
        assert_eq!(
            unchecked(&json!({"pattern": "(?<=a)b"})),
            Some(Unchecked::NotCompiled)
        );
        assert_eq!(Checker::new(None, "t").unchecked(), Some(Unchecked::Absent));
        assert_eq!(Checker::absent().unchecked(), Some(Unchecked::Absent));
    }

    #[test]
    fn problems_are_bounded_scrubbed_and_counted() {
        let mut redactor = Redactor::default();
        redactor.add("sk-live-4f9a8b7c6d5e4f3a2b1c");
        let schema = json!({"type": "array", "items": {"const": "sk-live-4f9a8b7c6d5e4f3a2b1c"}});
        let problems = checker(&schema)
            .check(&json!([1, 2, 3, 4, 5, 6, 7]), "arguments", &redactor)
            .unwrap_err();
        assert_eq!(problems.more, 2);
        assert_eq!(
            problems.listed[0],
            r#"arguments/0: "[redacted]" was expected"#
        );
        assert_eq!(
            problems.to_string(),
            (0..5)
                .map(|i| format!("arguments/{i}: \"[redacted]\" was expected"))
                .collect::<Vec<_>>()
                .join("; ")
                + "; and 2 more problems"
        );
    }
}
