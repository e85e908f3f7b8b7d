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
    /// `${NAME}`, `${NAME:-fallback}` and VS Code's placeholders left as written.
    unexpanded: Vec<Unexpanded>,
    /// `${env:NAME}` whose value is empty, with the field it is in.
    empty: Vec<(String, String)>,
    /// The fields holding a `${...}` of no form this module knows, left as written.
    other: Vec<String>,
}

/// A placeholder left as written.
struct Unexpanded {
    /// The field it is in (`url`, `header "X"`).
    field: String,
    form: Form,
}

/// The placeholders other clients expand and this Pack does not (README "Configuration").
enum Form {
    /// Claude Code's `${NAME}`, or `${NAME:-fallback}` when `fallback` (never quoted).
    Variable { name: String, fallback: bool },
    /// VS Code's `${input:ID}`: a value VS Code prompts for. The ID when it is short and plain.
    Input(Option<String>),
    /// One of VS Code's predefined variables, such as `${workspaceFolder}`, as written
    /// (`workspaceFolder`, `workspaceFolder:NAME` when NAME is short and plain).
    Predefined(String),
    /// VS Code's `${config:NAME}` or `${command:ID}`: the prefix (`config`, `command`).
    Editor(&'static str),
}

/// VS Code's predefined variables (its "Variables reference"); `userHome` is expanded here.
const VS_CODE_PREDEFINED: [&str; 20] = [
    "workspaceFolder",
    "workspaceFolderBasename",
    "file",
    "fileWorkspaceFolder",
    "relativeFile",
    "relativeFileDirname",
    "fileBasename",
    "fileBasenameNoExtension",
    "fileExtname",
    "fileDirname",
    "fileDirnameBasename",
    "cwd",
    "lineNumber",
    "columnNumber",
    "selectedText",
    "execPath",
    "defaultBuildTask",
    "pathSeparator",
    "extensionInstallFolder",
    "/",
];

/// `text` when it is a short, plain identifier a hint may quote (an input ID, a folder name):
/// 1 to 64 ASCII letters, digits, `_`, `-` and `.`.
fn plain(text: &str) -> Option<String> {
    (!text.is_empty()
        && text.len() <= 64
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')))
    .then(|| text.to_string())
}

impl Form {
    /// The form of the `${token}` left as written, if it is one this module knows; pushes a
    /// fallback (a secret) onto `used`.
    fn of(token: &str, used: &mut Vec<String>) -> Option<Form> {
        if VS_CODE_PREDEFINED.contains(&token) {
            return Some(Form::Predefined(token.to_string()));
        }
        if quotable_name(token) {
            return Some(Form::Variable {
                name: token.to_string(),
                fallback: false,
            });
        }
        if let Some(id) = token.strip_prefix("input:") {
            return Some(Form::Input(plain(id)));
        }
        if let Some(folder) = token.strip_prefix("workspaceFolder:") {
            let shown = plain(folder).map_or("workspaceFolder:…".to_string(), |f| {
                format!("workspaceFolder:{f}")
            });
            return Some(Form::Predefined(shown));
        }
        for prefix in ["config", "command"] {
            if token
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(':'))
            {
                return Some(Form::Editor(prefix));
            }
        }
        // Claude Code's `${NAME:-fallback}`: the fallback is often a pasted key, so it is a
        // secret and no hint quotes it.
        let (name, fallback) = token.split_once(":-")?;
        if !quotable_name(name) {
            return None;
        }
        used.push(fallback.to_string());
        Some(Form::Variable {
            name: name.to_string(),
            fallback: true,
        })
    }

    /// The hint for this placeholder in `field`.
    fn hint(&self, field: &str) -> String {
        match self {
            Form::Variable {
                name,
                fallback: true,
            } => format!(
                "{field} holds ${{{name}:-…}}, which was sent as written (this Pack expands only ${{env:NAME}} and ${{userHome}}, without fallback values); to use the environment variable, write ${{env:{name}}}"
            ),
            Form::Variable { name, .. } => format!(
                "{field} holds ${{{name}}}, which was sent as written (this Pack expands only ${{env:NAME}} and ${{userHome}}); to use the environment variable, write ${{env:{name}}}"
            ),
            Form::Input(id) => format!(
                "{field} holds ${{input:{}}}, a VS Code input (a value VS Code prompts for), which was sent as written: this Pack cannot prompt; put the value in an environment variable and write ${{env:NAME}}",
                id.as_deref().unwrap_or("…")
            ),
            Form::Predefined(variable) => format!(
                "{field} holds ${{{variable}}}, a VS Code predefined variable, which was sent as written (this Pack expands only ${{env:NAME}} and ${{userHome}}); write the value itself, or put it in an environment variable and write ${{env:NAME}}"
            ),
            Form::Editor(prefix) => format!(
                "{field} holds ${{{prefix}:…}}, a VS Code {} variable, which was sent as written (this Pack expands only ${{env:NAME}} and ${{userHome}}); put the value in an environment variable and write ${{env:NAME}}",
                if *prefix == "config" {
                    "setting"
                } else {
                    "command"
                }
            ),
        }
    }
}

impl Notes {
    /// How many hints a reason carries at most.
    const MAX_HINTS: usize = 3;

    /// Whether a `${...}` placeholder was left as written (one this module does not expand).
    pub(crate) fn left_as_written(&self) -> bool {
        !self.unexpanded.is_empty() || !self.other.is_empty()
    }

    /// Every hint, one sentence each, in the order [`Notes::auth_hint`] gives them: the notes an
    /// entry's listing shows and its `warn` log line, whether or not the server refuses the
    /// value (README "Configuration"). Names only, never a value.
    pub(crate) fn placeholders(&self) -> Vec<String> {
        self.hints().collect()
    }

    fn hints(&self) -> impl Iterator<Item = String> + '_ {
        let unexpanded = self.unexpanded.iter().map(|u| u.form.hint(&u.field));
        let empty = self.empty.iter().map(|(name, field)| {
            if quotable_name(name) {
                format!("the environment variable \"{name}\" used in {field} is set but empty")
            } else {
                format!("the environment variable used in {field} is set but empty")
            }
        });
        let other = self.other.iter().map(|field| {
            format!(
                "{field} holds a ${{...}} placeholder this Pack does not know, which was sent as written (this Pack expands only ${{env:NAME}} and ${{userHome}}); put the value in an environment variable and write ${{env:NAME}}"
            )
        });
        unexpanded.chain(empty).chain(other)
    }

    /// The hints, at most [`Notes::MAX_HINTS`], joined with `; `: the placeholders of a known
    /// form in the order written, then the empty `${env:NAME}`s, then the fields holding a
    /// `${...}` of another form (never quoted: it may be a pasted secret).
    pub(crate) fn auth_hint(&self) -> Option<String> {
        let hints: Vec<String> = self.hints().take(Self::MAX_HINTS).collect();
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
            let value = env
                .var(name)
                .ok_or_else(|| format!("{} (used in {field}) is not set", variable_named(name)))?;
            if value.is_empty() {
                if matches!(field, "url" | "httpUrl") {
                    // `https://${env:HOST}/mcp` would become `https:///mcp`, a URL to the host
                    // `mcp`: refused rather than sent anywhere.
                    return Err(format!(
                        "{} (used in {field}) is set but empty",
                        variable_named(name)
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
            match Form::of(token, used) {
                Some(form) => notes.unexpanded.push(Unexpanded {
                    field: field.to_string(),
                    form,
                }),
                None if !notes.other.iter().any(|f| f == field) => {
                    notes.other.push(field.to_string());
                }
                None => {}
            }
            out.push_str(&rest[start..start + 2 + end + 1]);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether a reason, a note or a hint may quote `name`, an environment variable's name the
/// config gives: a variable name ([`is_variable_name`]) without lower-case letters, at most 64
/// bytes. The easy mistake is to paste the secret itself where a name belongs, and tokens
/// (`ghp_…`, `sk_live_…`) are variable names too; they mix cases or run long, so they are never
/// quoted.
pub(crate) fn quotable_name(name: &str) -> bool {
    is_variable_name(name) && name.len() <= 64 && !name.bytes().any(|b| b.is_ascii_lowercase())
}

/// `environment variable "NAME"` when [`quotable_name`], else `the environment variable` (a
/// pasted secret is never quoted).
pub(crate) fn variable_named(name: &str) -> String {
    if quotable_name(name) {
        format!("environment variable \"{name}\"")
    } else {
        "the environment variable (its name is not quoted: it does not look like one; write the variable's name, not its value)".to_string()
    }
}

/// Whether `word` is one whole `${...}` of a form other clients expand and this Pack sends as
/// written, and which a hint may quote ([`Form`]: `${API_KEY}`, `${input:github-token}`,
/// `${workspaceFolder}`): the config's own text, no secret (the fallback of a
/// `${NAME:-fallback}` is one on its own, [`substitute`]). A `${...}` holding what looks like a
/// pasted secret (`${sk_live_…}`) is none.
pub(crate) fn is_quotable_placeholder(word: &str) -> bool {
    let Some(token) = word
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
    else {
        return false;
    };
    !token.contains(['$', '{', '}'])
        && matches!(
            Form::of(token, &mut Vec::new()),
            Some(Form::Variable { .. } | Form::Input(_) | Form::Predefined(_) | Form::Editor(_))
        )
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

#[cfg(test)]
mod tests {
    /// A name a reason may quote is one a user writes for a variable; a pasted token is not.
    #[test]
    fn only_plain_upper_case_names_are_quoted() {
        for name in ["GITHUB_TOKEN", "API_KEY_2", "_X"] {
            assert!(super::quotable_name(name), "{name}");
        }
        for name in [
            "ghp_AttackPastedToken0123",
            "sk_live_0123456789",
            "lower",
            "A B",
            "",
        ] {
            assert!(!super::quotable_name(name), "{name}");
        }
        assert!(!super::quotable_name(&"A".repeat(65)));
        assert_eq!(
            super::variable_named("sk_live_0123456789"),
            "the environment variable (its name is not quoted: it does not look like one; write the variable's name, not its value)"
        );
    }
}
