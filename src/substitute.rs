//! `${env:NAME}` and `${userHome}` substitution in a server entry's strings (README
//! "Configuration").
//!
//! Owns: where values come from ([`Environment`]), the substitution itself ([`substitute`]),
//! which names are variable names, the refusal texts of an unset or invalid variable, and what
//! substitution notices for a later 401/403 hint ([`Notes`]). A leaf: it imports nothing from
//! the crate but [`crate::limits`].

/// Where substitution reads from: the process environment and home directory in production, a
/// fixed map in tests.
pub(crate) trait Environment {
    /// The value of the variable `name`, if set.
    fn var(&self, name: &str) -> Option<String>;
    /// The user's home directory, if known.
    fn home(&self) -> Option<String>;
}

/// The real process environment.
pub(crate) struct ProcessEnvironment;

impl Environment for ProcessEnvironment {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
    fn home(&self) -> Option<String> {
        ["HOME", "USERPROFILE"]
            .into_iter()
            .filter_map(|name| std::env::var(name).ok())
            .find(|home| !home.is_empty())
    }
}

/// What substitution noticed that could explain a 401 or 403 later.
#[derive(Default)]
pub(crate) struct Notes {
    /// `${NAME}` or `${NAME:-fallback}` (a valid variable name) left as written.
    unexpanded: Vec<Unexpanded>,
    /// `${env:NAME}` whose value is empty, with the field it is in.
    empty: Vec<(String, String)>,
}

/// A `${NAME}` or `${NAME:-fallback}` left as written.
struct Unexpanded {
    name: String,
    /// The field it is in (`url`, `header "X"`).
    field: String,
    /// Whether it had a `:-fallback`, which a hint never quotes.
    fallback: bool,
}

impl Notes {
    /// How many hints a reason carries at most.
    const MAX_HINTS: usize = 3;

    /// The hints, at most [`Notes::MAX_HINTS`], joined with `; `.
    pub(crate) fn auth_hint(&self) -> Option<String> {
        let unexpanded = self.unexpanded.iter().map(|u| {
            let (name, field) = (&u.name, &u.field);
            if u.fallback {
                format!(
                    "{field} holds ${{{name}:-…}}, which was sent as written (this Pack expands only ${{env:NAME}} and ${{userHome}}, without fallback values); to use the environment variable, write ${{env:{name}}}"
                )
            } else {
                format!(
                    "{field} holds ${{{name}}}, which was sent as written (this Pack expands only ${{env:NAME}} and ${{userHome}}); to use the environment variable, write ${{env:{name}}}"
                )
            }
        });
        let empty = self.empty.iter().map(|(name, field)| {
            format!("the environment variable \"{name}\" used in {field} is set but empty")
        });
        let hints: Vec<String> = unexpanded.chain(empty).take(Self::MAX_HINTS).collect();
        (!hints.is_empty()).then(|| hints.join("; "))
    }
}

/// Replaces `${env:NAME}` and `${userHome}` in `written`; any other `${...}` stays as written.
/// Each env value used is pushed onto `used`, to become a secret; a `${NAME}` left as written
/// and an env value that is empty go into `notes`.
///
/// # Errors
/// An unset variable (naming it and `field`), a `${env:...}` whose name is not a valid variable
/// name (quoting at most the valid start of it: users paste `${env:KEY:-fallback-secret}`), or
/// `${userHome}` with no known home.
pub(crate) fn substitute(
    written: &str,
    field: &str,
    env: &dyn Environment,
    used: &mut Vec<String>,
    notes: &mut Notes,
) -> Result<String, String> {
    let mut out = String::with_capacity(written.len());
    let mut rest = written;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let token = &after[..end];
        if let Some(name) = token.strip_prefix("env:") {
            if !is_variable_name(name) {
                return Err(invalid_name(name, field));
            }
            let value = env.var(name).ok_or_else(|| {
                format!(
                    "environment variable \"{}\" (used in {field}) is not set",
                    printable(name)
                )
            })?;
            if value.is_empty() {
                if field == "url" {
                    // `https://${env:HOST}/mcp` would become `https:///mcp`, a URL to the host
                    // `mcp`: refused rather than sent anywhere.
                    return Err(format!(
                        "environment variable \"{name}\" (used in {field}) is set but empty"
                    ));
                }
                notes.empty.push((name.to_string(), field.to_string()));
            }
            out.push_str(&value);
            used.push(value);
        } else if token == "userHome" {
            let home = env.home().ok_or_else(|| {
                format!("{field} uses ${{userHome}} but the home directory is unknown")
            })?;
            out.push_str(&home);
        } else {
            if is_variable_name(token) {
                notes.unexpanded.push(Unexpanded {
                    name: token.to_string(),
                    field: field.to_string(),
                    fallback: false,
                });
            } else if let Some((name, fallback)) = token.split_once(":-") {
                // Claude Code's `${NAME:-fallback}`: the fallback is often a pasted key, so it
                // is a secret and no hint quotes it.
                if is_variable_name(name) {
                    notes.unexpanded.push(Unexpanded {
                        name: name.to_string(),
                        field: field.to_string(),
                        fallback: true,
                    });
                    used.push(fallback.to_string());
                }
            }
            out.push_str(&rest[start..start + 2 + end + 1]);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether `name` is an environment variable name: an ASCII letter or `_`, then letters, digits
/// and `_`.
pub(crate) fn is_variable_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The refusal of `${env:<name>}` whose name is not a variable name. Quotes only the leading
/// part that is a valid name: what follows is often a secret pasted as a fallback value.
fn invalid_name(name: &str, field: &str) -> String {
    let valid = name
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit())))
        .map_or(name, |(i, _)| &name[..i]);
    let valid = crate::limits::truncate(valid, 128);
    let shown = if valid.is_empty() {
        "${env:…}".to_string()
    } else {
        format!("${{env:{valid}…}}")
    };
    format!(
        "{field} uses {shown}, whose name is not a valid environment variable name; write ${{env:NAME}} with a NAME of letters, digits and underscores (a fallback such as ${{env:NAME:-value}} is not supported)"
    )
}

/// A key as a reason may quote it: bounded and free of control characters.
pub(crate) fn printable(key: &str) -> String {
    let key = crate::limits::truncate(key, 128);
    key.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}
