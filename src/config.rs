//! Parsing the Pack's config: an `mcp.json` as its text, the whole file, or its servers object
//! (README "Configuration").
//!
//! Owns every config rule: which entries are remote, local, legacy SSE or disabled; the keys
//! of other clients' dialects (docs/configuration.md's table: each read, mapped onto what this
//! Pack does, or refused by name, never ignored when it decides tools, credentials or the
//! address), the notes an entry's listing shows ([`Settings::notes`]) and its deadlines; where `${env:NAME}` and `${userHome}` are
//! substituted ([`crate::substitute`] does it);
//! which headers the client owns; which values are secrets; and the hint a 401/403 answer gets
//! when a placeholder was not expanded or expanded to nothing. Each entry is parsed on its own,
//! so one bad entry never takes the others down. A refusal names the field or the header or the
//! variable, never a value.

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::json::{did_you_mean, json_type, misspelling_of};
use crate::redact::Redactor;
use crate::substitute::{Environment, Notes, printable, substitute};

/// Header names the MCP client sets itself; a config may not set them (compared
/// case-insensitively).
/// `accept-encoding` is among them because the client decodes only the encodings it offers (a
/// configured one could ask for a reply it cannot read).
const CLIENT_OWNED_HEADERS: [&str; 8] = [
    "accept",
    "accept-encoding",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    // MCP 2026-07-28, transports "Request Metadata": mirrored from each request's body.
    "mcp-method",
    "mcp-name",
];

/// The prefix of the headers that mirror a tool's `x-mcp-header` parameters (MCP 2026-07-28,
/// transports "Request Metadata"): the client's too.
const CLIENT_OWNED_PREFIX: &str = "mcp-param-";

/// Header names that belong to the HTTP connection (its target and framing); a config may not
/// set them either.
const CONNECTION_HEADERS: [&str; 9] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

/// The refusal of a local (`command`) entry, word for word as README "Configuration" gives it.
pub(crate) const LOCAL_REFUSED: &str = "local MCP servers (command) are not supported yet";

/// One `mcpServers` entry after parsing.
pub(crate) enum Entry {
    /// A remote server the Pack connects to (boxed: it is many times the size of a refusal).
    Remote(Box<RemoteServer>),
    /// An entry the Pack will not connect to; the reason is shown as its `error` status.
    Refused(String),
    /// A refused entry (`"disabled": true`, an unset `${env:NAME}` in a header, ...) whose
    /// stored sign-in can still be keyed, its `url` and `oauth` being readable: the reason is
    /// shown as for [`Entry::Refused`], and `<id>/logout` can still delete that grant
    /// (README "Signing in").
    Unused {
        reason: String,
        /// The endpoint after substitution and the entry's `oauth`, which key the store file.
        sign_in: Box<(Url, crate::auth::config::OAuthConfig)>,
    },
}

/// A remote server's connection settings. Holds secrets, so its `Debug` prints the header names
/// only.
pub(crate) struct RemoteServer {
    /// The endpoint after substitution. A secret when it used `${env:...}`: never printed.
    pub(crate) url: Url,
    /// The configured headers, each value marked sensitive.
    pub(crate) headers: HeaderMap,
    /// Scrubs this entry's header and env values out of server text.
    pub(crate) redactor: Redactor,
    /// What to add to the reason of a 401 or 403 answer: a `${NAME}` sent as written, or a
    /// `${env:NAME}` that is set but empty (names only, never a value).
    pub(crate) auth_hint: Option<String>,
    /// `scheme://host:port` of `url`, for connect errors; `None` when that part of the written
    /// url used a `${...}` or holds a configured secret: text about the url (a redirect's
    /// target on the same host) then shows `[redacted]` in place of its host.
    pub(crate) origin: Option<String>,
    /// The entry's `oauth` object (default when absent): how to sign in when the server
    /// answers `401` and the entry configures no `Authorization` header.
    pub(crate) oauth: crate::auth::config::OAuthConfig,
    /// What the Pack does differently for this entry: the tools it hides, its deadlines, and
    /// the notes its listing shows.
    pub(crate) settings: Settings,
}

/// An entry's settings that outlive its connection's: read by the server and the listing.
#[derive(Debug, Default)]
pub(crate) struct Settings {
    /// The tools the entry hides ([`ToolFilter`]).
    pub(crate) tool_filter: ToolFilter,
    /// The entry's start and call deadlines ([`Deadlines`]).
    pub(crate) deadlines: Deadlines,
    /// What the config says that the Pack reads differently from how it is written, one
    /// sentence each: a placeholder sent as written, a timeout capped, a key read in place of
    /// another. Shown as the entry's `notes` in the listing and logged at `warn` once. Names
    /// and numbers only, never a value.
    pub(crate) notes: Vec<String>,
    /// Whether the url's path ends in `/sse` ([`legacy_sse_path`]): a start refused like a
    /// legacy HTTP+SSE endpoint says so.
    pub(crate) sse_path: bool,
}

/// One server's deadlines: [`crate::limits::START_DEADLINE`] and
/// [`crate::limits::CALL_DEADLINE`], or shorter ones its entry asks for (Codex's
/// `startup_timeout_sec` / `startup_timeout_ms` and `tool_timeout_sec`; the `timeout` of Gemini
/// CLI, Claude Code and Cline). Honoured downward only: a longer one is capped, with a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deadlines {
    /// A whole start (era probe, handshake, every `tools/list` page) ends within it.
    pub(crate) start: std::time::Duration,
    /// A whole `tools/call` (a miss's re-listing included) ends within it.
    pub(crate) call: std::time::Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            start: crate::limits::START_DEADLINE,
            call: crate::limits::CALL_DEADLINE,
        }
    }
}

/// Which of a server's tools the entry hides, by the keys other clients write: Gemini CLI's
/// `includeTools` (only these) and `excludeTools` (never these), Cline's and Windsurf's
/// `disabledTools` (never these), Codex's `enabled_tools` (only these) and `disabled_tools`
/// (never these), Copilot CLI's `tools` (only these; `["*"]` is every tool) and Goose's
/// `available_tools` (only these). Each is an array
/// of tool names, compared exactly; a tool is shown only when every allow-list given names it,
/// and an exclusion wins over an inclusion. A hidden tool is neither listed nor callable (README
/// "Configuration").
#[derive(Debug, Default)]
pub(crate) struct ToolFilter {
    /// The allow-lists given, each with its key: only names in every one of them are shown.
    include: Vec<(&'static str, std::collections::HashSet<String>)>,
    /// The deny-lists given, each with its key and the names it hides.
    exclude: Vec<(&'static str, std::collections::HashSet<String>)>,
}

/// The allow-list keys of [`ToolFilter`], in the order a hidden tool's reason names them.
const INCLUDE_KEYS: [&str; 4] = ["includeTools", "enabled_tools", "tools", "available_tools"];

/// The deny-list keys of [`ToolFilter`].
const EXCLUDE_KEYS: [&str; 3] = ["excludeTools", "disabledTools", "disabled_tools"];

/// Why a [`ToolFilter`] hides a tool: the config key that does it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hidden {
    /// A deny-list (the key) names the tool.
    Excluded(&'static str),
    /// An allow-list (the key) is given and does not name the tool.
    NotIncluded(&'static str),
}

impl Hidden {
    /// How a reason says it: `"excludeTools" names it`, `"includeTools" does not name it`.
    pub(crate) fn describe(self) -> String {
        match self {
            Hidden::Excluded(key) => format!("its config entry's \"{key}\" names it"),
            Hidden::NotIncluded(key) => {
                format!("its config entry's \"{key}\" does not name it")
            }
        }
    }
}

impl ToolFilter {
    /// Whether (and by which key) the tool `name` is hidden; an exclusion wins.
    pub(crate) fn hides(&self, name: &str) -> Option<Hidden> {
        if let Some((key, _)) = self.exclude.iter().find(|(_, names)| names.contains(name)) {
            return Some(Hidden::Excluded(key));
        }
        self.include
            .iter()
            .find(|(_, names)| !names.contains(name))
            .map(|(key, _)| Hidden::NotIncluded(key))
    }

    /// The filter of an entry's fields. Copilot CLI's `"tools": ["*"]` (a `"*"` among the
    /// names) is no allow-list: every tool.
    ///
    /// # Errors
    /// A key that is neither absent, `null`, nor an array of strings, naming the key.
    fn parse(fields: &serde_json::Map<String, Value>) -> Result<ToolFilter, String> {
        let names = |key: &str| -> Result<Option<std::collections::HashSet<String>>, String> {
            match fields.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| match item {
                        Value::String(name) => Ok(name.clone()),
                        other => Err(format!(
                            "\"{key}\" must be an array of tool names (strings); item {} is {}",
                            i + 1,
                            json_type(other)
                        )),
                    })
                    .collect::<Result<_, _>>()
                    .map(Some),
                Some(other) => Err(wrong_type(key, "an array of tool names (strings)", other)),
            }
        };
        let mut filter = ToolFilter::default();
        for key in INCLUDE_KEYS {
            if let Some(shown) = names(key)? {
                if key == "tools" && shown.contains("*") {
                    continue;
                }
                filter.include.push((key, shown));
            }
        }
        for key in EXCLUDE_KEYS {
            if let Some(hidden) = names(key)? {
                filter.exclude.push((key, hidden));
            }
        }
        Ok(filter)
    }
}

impl std::fmt::Debug for RemoteServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.keys().map(HeaderName::as_str).collect();
        f.debug_struct("RemoteServer")
            .field("header_names", &names)
            .finish_non_exhaustive()
    }
}

/// Parses the whole Pack config: an `mcp.json`'s servers object, or the whole file (README
/// "Configuration"; its text is read by `jsonc` first).
///
/// The config is read as a whole `mcp.json` when it has a key `mcpServers` (Claude, Cursor and
/// most clients) or `servers` (VS Code) that is not itself a server entry ([`file_key`]): the
/// servers are then that key's object, and the file's other keys (VS Code's `inputs`, other
/// clients' settings) are not read, but Gemini CLI's choice of servers ([`Chosen`]). Returns the entries in config order, keyed by namespace
/// (the key exactly as written).
///
/// A string is the text of an `mcp.json` file, JSONC allowed ([`crate::jsonc`]), read as above
/// once parsed.
///
/// # Errors
/// A non-null, non-object, non-string value (naming the JSON type found), a text that is not
/// JSONC (naming the line and column, never quoting the text), a whole file with both
/// `mcpServers` and `servers`, a file key whose value is not an object, or a file of VS Code's
/// settings without its servers (`inputs` alone): the Pack is unavailable with that reason.
pub(crate) fn parse(config: &Value, env: &dyn Environment) -> Result<Vec<(String, Entry)>, String> {
    if let Value::String(text) = config {
        let file = crate::jsonc::parse(text).map_err(|e| format!("the mcp config's text {e}"))?;
        if file.is_string() {
            return Err(
                "the mcp config's text holds a JSON string, not an mcp.json object".to_string(),
            );
        }
        return parse(&file, env);
    }
    let mut chosen = Chosen::default();
    let servers = match config {
        Value::Null => return Ok(Vec::new()),
        Value::Object(top) => match file_servers(top)? {
            Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Object(servers)) => {
                chosen = Chosen::of_file(top)?;
                servers
            }
            Some(_) => unreachable!("file_servers answers an object or null"),
            None => top,
        },
        other => {
            return Err(format!(
                "the mcp config must be an object of servers (the mcpServers of an mcp.json), found {}",
                json_type(other)
            ));
        }
    };
    if let Some(reason) = settings_only(servers) {
        return Err(reason);
    }
    Ok(servers
        .iter()
        .map(|(name, entry)| {
            let parsed = match misnamed_servers_key(name, entry) {
                Some(reason) => Entry::Refused(reason),
                None => match chosen
                    .refusal(name)
                    .map_or_else(|| parse_entry(entry, env), Entry::Refused)
                {
                    Entry::Refused(reason) => match sign_in_of(entry, env) {
                        Some(sign_in) => Entry::Unused {
                            reason,
                            sign_in: Box::new(sign_in),
                        },
                        None => Entry::Refused(reason),
                    },
                    accepted => accepted,
                },
            };
            (name.clone(), parsed)
        })
        .collect())
}

/// Which servers of a whole settings file its own keys let run: Gemini CLI's
/// `"mcp": {"allowed": [...], "excluded": [...]}` (and its older top-level `allowMCPServers`,
/// `excludeMCPServers`), names compared exactly. A server they leave out is refused, naming the
/// key, as a disabled one is.
#[derive(Default)]
struct Chosen {
    /// `(key, names)`: only these run.
    allowed: Option<(&'static str, Vec<String>)>,
    /// `(key, names)`: these never run.
    excluded: Vec<(&'static str, Vec<String>)>,
}

impl Chosen {
    /// The choices of the whole file `top`.
    ///
    /// # Errors
    /// A key of them that is not an array of strings (or `mcp` not an object), naming it.
    fn of_file(top: &serde_json::Map<String, Value>) -> Result<Self, String> {
        let names = |key: &'static str, value: &Value| -> Result<Vec<String>, String> {
            let wrong = || format!("the mcp config's \"{key}\" must be an array of server names");
            value
                .as_array()
                .ok_or_else(wrong)?
                .iter()
                .map(|name| name.as_str().map(str::to_string).ok_or_else(wrong))
                .collect()
        };
        let mut chosen = Chosen::default();
        let mcp = match top.get("mcp") {
            None | Some(Value::Null) => None,
            Some(Value::Object(mcp)) => Some(mcp),
            Some(other) => return Err(wrong_type("mcp", "an object", other)),
        };
        let given = |inner: &str, outer: &str| {
            let inside = mcp.and_then(|m| m.get(inner)).filter(|v| !v.is_null());
            let top_level = top.get(outer).filter(|v| !v.is_null());
            [inside, top_level]
        };
        let [allowed, allowed_old] = given("allowed", "allowMCPServers");
        for (key, value) in [("mcp.allowed", allowed), ("allowMCPServers", allowed_old)] {
            if let Some(value) = value {
                let list = names(key, value)?;
                chosen.allowed = Some(match chosen.allowed.take() {
                    // Both given: a server must be in both.
                    Some((first, before)) => (
                        first,
                        before.into_iter().filter(|n| list.contains(n)).collect(),
                    ),
                    None => (key, list),
                });
            }
        }
        let [excluded, excluded_old] = given("excluded", "excludeMCPServers");
        for (key, value) in [
            ("mcp.excluded", excluded),
            ("excludeMCPServers", excluded_old),
        ] {
            if let Some(value) = value {
                chosen.excluded.push((key, names(key, value)?));
            }
        }
        Ok(chosen)
    }

    /// Why server `name` may not run, when the file's choices leave it out.
    fn refusal(&self, name: &str) -> Option<String> {
        let listed = |names: &[String]| names.iter().any(|n| n == name);
        if let Some((key, _)) = self.excluded.iter().find(|(_, names)| listed(names)) {
            return Some(format!(
                "the config's \"{key}\" (Gemini CLI's) excludes this server, so this Pack does not connect to it"
            ));
        }
        match &self.allowed {
            Some((key, names)) if !listed(names) => Some(format!(
                "the config's \"{key}\" (Gemini CLI's) does not name this server, so this Pack does not connect to it"
            )),
            _ => None,
        }
    }
}

/// The reason a servers object that is only VS Code's file settings is refused: an `inputs`
/// array (the prompts VS Code asks for `${input:..}`) beside no server entry means the file's
/// `servers` key is missing, not that `inputs` is a server.
fn settings_only(servers: &serde_json::Map<String, Value>) -> Option<String> {
    let inputs = servers.get("inputs").is_some_and(Value::is_array);
    (inputs && !servers.values().any(is_entry)).then(|| {
        "the mcp config has VS Code's \"inputs\" but no \"servers\" object; put the servers under \"servers\"".to_string()
    })
}

/// The keys of a whole `mcp.json` whose object holds the servers: `mcpServers` (Claude, Cursor
/// and most clients) and `servers` (VS Code).
const FILE_KEYS: [&str; 2] = ["mcpServers", "servers"];

/// Whether `config` is a whole `mcp.json` (an object with an `mcpServers` or `servers` key that
/// is no server entry: [`file_key`]), not a servers object.
pub(crate) fn is_whole_file(config: &Value) -> bool {
    config.as_object().is_some_and(|top| {
        FILE_KEYS
            .into_iter()
            .any(|key| top.get(key).is_some_and(|value| file_key(key, value)))
    })
}

/// The servers of a whole `mcp.json` passed as the config: the value of its `mcpServers` or
/// `servers` key ([`file_key`]), an object or `null`; `None` when `top` is a servers object.
///
/// # Errors
/// Both keys, or a file key whose value is neither an object nor `null`.
fn file_servers(top: &serde_json::Map<String, Value>) -> Result<Option<&Value>, String> {
    let found: Vec<(&str, &Value)> = FILE_KEYS
        .into_iter()
        .filter_map(|key| top.get(key).map(|value| (key, value)))
        .filter(|(key, value)| file_key(key, value))
        .collect();
    match found.as_slice() {
        [] => Ok(None),
        [(_, value @ (Value::Object(_) | Value::Null))] => Ok(Some(value)),
        [(key, value)] => Err(format!(
            "the mcp config's \"{key}\" must be an object of servers, found {}",
            json_type(value)
        )),
        _ => Err(
            "the mcp config is a whole mcp.json with both \"mcpServers\" and \"servers\"; keep one"
                .to_string(),
        ),
    }
}

/// Whether the key `name` of a config, holding `value`, is an `mcp.json`'s own servers key
/// rather than a server: an object without any of the keys an entry is read by
/// ([`ENTRY_KEYS`]), or for `mcpServers` (no client names a server so) any value but a server
/// entry.
fn file_key(name: &str, value: &Value) -> bool {
    match value {
        Value::Object(_) => !is_entry(value),
        _ => name == "mcpServers",
    }
}

/// The keys a server entry is recognised by: an object with one of them is a server.
const ENTRY_KEYS: [&str; 5] = ["url", "command", "serverUrl", "httpUrl", "type"];

/// The keys of a server entry this Pack reads or knows (other clients' included); a key that
/// is none of them but one of them in another case, or one letter off, is a typo
/// ([`misspelled`]).
const KNOWN_KEYS: [&str; 35] = [
    "url",
    "headers",
    "type",
    "oauth",
    "disabled",
    "enabled",
    "includeTools",
    "excludeTools",
    "disabledTools",
    "command",
    "args",
    "env",
    "cwd",
    "serverUrl",
    "httpUrl",
    "tools",
    "enabled_tools",
    "disabled_tools",
    "auth",
    "http_headers",
    "env_http_headers",
    "bearer_token_env_var",
    "headersHelper",
    "http_headers_helper",
    "timeout",
    "startup_timeout_sec",
    "startup_timeout_ms",
    "tool_timeout_sec",
    "authProviderType",
    "targetAudience",
    "targetServiceAccount",
    "transportType",
    "scopes",
    "oauth_resource",
    "available_tools",
];

/// The refusal of an entry holding a key that is a known key misspelled (`"URL"`, `"Headers"`,
/// `"header"`, `"include_tools"`: [`misspelling_of`]) while the key itself is absent: as
/// written, the setting would be silently ignored. Decided on the key names only (config text,
/// never server text).
fn misspelled(fields: &serde_json::Map<String, Value>) -> Option<String> {
    fields.keys().find_map(|key| {
        let meant = misspelling_of(key, &KNOWN_KEYS, |known| !fields.contains_key(known))
            .or_else(|| goose_uri(key, fields))?;
        Some(format!(
            "the entry has \"{}\", which this Pack does not read; {}",
            printable(key),
            did_you_mean(key, meant)
        ))
    })
}

/// `"url"` when `key` is Goose's `uri` (any case) and the entry has no address key: a key too
/// short for [`misspelling_of`]'s edit distance, but as surely a misspelling of `url` as `URL`.
fn goose_uri(key: &str, fields: &serde_json::Map<String, Value>) -> Option<&'static str> {
    let addressed = ["url", "httpUrl", "serverUrl"]
        .iter()
        .any(|known| fields.contains_key(*known));
    (key.eq_ignore_ascii_case("uri") && !addressed).then_some("url")
}

/// The keys a plugin config may hold this Pack's servers under: `mcp` (its own key), or those of
/// a whole `mcp.json` passed as the plugin config.
const PLUGIN_KEYS: [&str; 3] = ["mcp", "mcpServers", "servers"];

/// The key of a plugin config without `mcp` that misspells one of [`PLUGIN_KEYS`] and holds
/// servers ([`holds_servers`]), with the key meant: such a plugin config would give a Pack
/// without servers and no word why. Other plugins' keys are none of these near misses, and a
/// near miss that holds no servers (another plugin's `server` settings, a server entry of that
/// name) is not taken for one. `None` when `config` has an `mcp` key or is a whole file.
pub(crate) fn misnamed_plugin_key(config: &Value) -> Option<(&str, &'static str)> {
    let top = config.as_object()?;
    if top.contains_key("mcp") || is_whole_file(config) {
        return None;
    }
    top.iter().find_map(|(key, value)| {
        let meant = misspelling_of(key, &PLUGIN_KEYS, |_| true)?;
        holds_servers(value).then_some((key.as_str(), meant))
    })
}

/// The reason a plugin config with a [`misnamed_plugin_key`] makes the Pack unavailable: names
/// the key as written and the key meant, never a value.
pub(crate) fn misnamed_plugin_reason(key: &str, meant: &str) -> String {
    format!(
        "the plugin config has \"{}\", which this Plugin does not read, and no \"mcp\", so the mcp Pack would have no servers; {}",
        printable(key),
        did_you_mean(key, meant)
    )
}

/// Whether a plugin config that is itself a whole settings file ([`is_whole_file`]) has an `mcp`
/// key of that file's own, not the plugin's: an object holding no servers (Gemini CLI's
/// `"mcp": {"allowed": [...], "excluded": [...]}`), so the whole config is read as the file.
pub(crate) fn mcp_key_is_the_files(config: &Value) -> bool {
    is_whole_file(config)
        && config
            .get("mcp")
            .is_some_and(|own| own.is_object() && !holds_servers(own))
}

/// Whether `value` holds servers: an object one of whose values is a server entry (an object
/// with one of [`ENTRY_KEYS`]), a whole `mcp.json` ([`is_whole_file`]), or the JSONC text of
/// either. A server entry itself holds none.
fn holds_servers(value: &Value) -> bool {
    match value {
        Value::String(text) => {
            crate::jsonc::parse(text).is_ok_and(|file| !file.is_string() && holds_servers(&file))
        }
        Value::Object(fields) => {
            !is_entry(value) && (is_whole_file(value) || fields.values().any(is_entry))
        }
        _ => false,
    }
}

/// Whether `value` is a server entry: an object with one of [`ENTRY_KEYS`].
fn is_entry(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|fields| ENTRY_KEYS.iter().any(|key| fields.contains_key(*key)))
}

/// The refusal of a namespace of a servers object that misspells a whole file's servers key
/// (`mcp_servers`, `Servers`) and holds servers itself: it is the file's servers under a key
/// this Pack does not read, not a server. Names the key and the one meant.
fn misnamed_servers_key(namespace: &str, entry: &Value) -> Option<String> {
    let meant = misspelling_of(namespace, &FILE_KEYS, |_| true)?;
    holds_servers(entry).then(|| {
        format!(
            "\"{}\" holds servers, not a server's settings, under a key this Pack does not read; {}",
            printable(namespace),
            did_you_mean(namespace, meant)
        )
    })
}

/// What keys a refused entry's stored sign-in, when it can be read: its `url` (substituted,
/// parsed as a connection's) and its OAuth client (substituted, [`oauth_value`]), nothing else
/// of the entry. `None`
/// for an entry with no usable `url` or `oauth`, which cannot have signed in as it is written.
fn sign_in_of(
    entry: &Value,
    env: &dyn Environment,
) -> Option<(Url, crate::auth::config::OAuthConfig)> {
    let fields = entry.as_object()?;
    let (key, written) = address(fields, &mut Vec::new()).ok()?;
    let url = substitute(
        written.as_str()?,
        key,
        env,
        &mut Vec::new(),
        &mut Notes::default(),
    )
    .ok()?;
    let mut url = parse_url(&url, key).ok()?;
    // As a connection's url: user information goes into a header, not the key.
    take_credentials(&mut url, &mut Redactor::default()).ok()?;
    // The OAuth client as a live entry reads it: `oauth`, Cursor's `auth`, Codex's `scopes`.
    let oauth = match oauth_value(fields).ok()? {
        None => crate::auth::config::OAuthConfig::default(),
        Some(value) => crate::auth::config::parse(&value, &mut |written, field| {
            substitute(written, field, env, &mut Vec::new(), &mut Notes::default())
        })
        .ok()?,
    };
    Some((url, oauth))
}

fn parse_entry(entry: &Value, env: &dyn Environment) -> Entry {
    match parse_remote(entry, env) {
        Ok(server) => Entry::Remote(Box::new(server)),
        Err(reason) => Entry::Refused(reason),
    }
}

fn parse_remote(entry: &Value, env: &dyn Environment) -> Result<RemoteServer, String> {
    let Value::Object(fields) = entry else {
        return Err(format!(
            "a server entry must be an object, found {}",
            json_type(entry)
        ));
    };
    disabled(fields)?;
    if fields.contains_key("command") {
        return Err(LOCAL_REFUSED.to_string());
    }
    if let Some(reason) = misspelled(fields) {
        return Err(reason);
    }
    match fields.get("type") {
        None | Some(Value::String(_)) => {}
        Some(other) => return Err(wrong_type("type", "a string", other)),
    }
    // VS Code's and Cursor's local type: beside a `url`, which of the two is meant is unclear.
    if fields.contains_key("url")
        && fields
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.eq_ignore_ascii_case("stdio"))
    {
        return Err(
            "the entry has \"type\": \"stdio\" (a local server) and a \"url\": for a remote server remove \"type\" or write \"type\": \"http\""
                .to_string(),
        );
    }
    if let Some(reason) = not_done(fields) {
        return Err(reason);
    }
    let tool_filter = ToolFilter::parse(fields)?;
    let mut config_notes = Vec::new();
    let deadlines = deadlines(fields, &mut config_notes)?;
    // Cline writes the transport as `type` or (older) `transportType`.
    if let Some(key) = ["type", "transportType"].into_iter().find(|key| {
        fields
            .get(*key)
            .and_then(Value::as_str)
            .is_some_and(|t| t.eq_ignore_ascii_case("sse"))
    }) {
        return Err(format!(
            "the legacy HTTP+SSE transport ({key} \"sse\") is not supported; \
             point \"url\" at the server's Streamable HTTP endpoint instead"
        ));
    }
    let mut redactor = Redactor::default();
    let mut notes = Notes::default();
    let (url_key, url_value) = address(fields, &mut config_notes)?;
    let (url, origin_is_public) = match url_value {
        Value::String(written) => {
            let mut used = Vec::new();
            let url = substitute(written, url_key, env, &mut used, &mut notes)?;
            for value in &used {
                redactor.add_secret(value);
            }
            let url = parse_url(&url, url_key).map_err(|reason| {
                // A placeholder of another client (`${NAME:-default}`) is what broke it.
                if notes.left_as_written() {
                    format!(
                        "{reason}: it holds a ${{...}} placeholder this Pack does not expand (only ${{env:NAME}} and ${{userHome}}, without fallback values); write ${{env:NAME}}"
                    )
                } else {
                    reason
                }
            })?;
            let authority = authority(written);
            // Decided on the parsed url too: a parser forgives `http:/host`, `http:\t//host`
            // and the like, so the text before the first `/` is not always the authority.
            let env_in_origin = authority.contains("${env:") || origin_holds(&url, &used);
            if env_in_origin {
                // The parser lower-cases (and IDNA-encodes) a host, and the request's Host
                // header carries it that way: a secret in that form too.
                if let Some(host) = url.host_str() {
                    redactor.add_secret(host);
                }
            }
            (url, !env_in_origin && !authority.contains("${"))
        }
        other => return Err(wrong_type(url_key, "a string", other)),
    };
    let sse_path = legacy_sse_path(&url);
    if sse_path {
        config_notes.push(format!(
            "\"{url_key}\"'s path ends in /sse, where legacy HTTP+SSE servers listen; this Pack speaks Streamable HTTP only, so if the server does not start, point \"{url_key}\" at its Streamable HTTP endpoint (often /mcp)"
        ));
    }
    let mut url = url;
    let mut headers = parse_headers(&all_headers(fields, env)?, env, &mut redactor, &mut notes)?;
    if let Some(basic) = take_credentials(&mut url, &mut redactor)? {
        headers
            .entry(reqwest::header::AUTHORIZATION)
            .or_insert(basic);
    }
    let oauth = match oauth_value(fields)? {
        None => crate::auth::config::OAuthConfig::default(),
        Some(value) => crate::auth::config::parse(&value, &mut |written, field| {
            let mut used = Vec::new();
            // A placeholder sent as written is named in the notes, as one in a header is.
            let value = substitute(written, field, env, &mut used, &mut notes)?;
            if !crate::auth::config::is_public(field) {
                for secret in &used {
                    redactor.add_secret(secret);
                }
            }
            Ok(value)
        })?,
    };
    for secret in [&oauth.client_secret, &oauth.private_key]
        .into_iter()
        .flatten()
    {
        redactor.add_secret(secrecy::ExposeSecret::expose_secret(secret));
    }
    let origin = origin_is_public
        .then(|| origin_of(&url))
        .flatten()
        .filter(|o| matches!(redactor.scrub(o), std::borrow::Cow::Borrowed(_)));
    config_notes.splice(0..0, notes.placeholders());
    Ok(RemoteServer {
        url,
        headers,
        redactor,
        auth_hint: notes.auth_hint(),
        origin,
        oauth,
        settings: Settings {
            tool_filter,
            deadlines,
            notes: config_notes,
            sse_path,
        },
    })
}

/// The scheme and authority of a written url (`scheme://user@host:port`): up to the path,
/// query or fragment after `://`, or up to the first `/`, `?` or `#` when it has no `://`.
fn authority(written: &str) -> &str {
    let start = written.find("://").map_or(0, |at| at + 3);
    let end = written[start..]
        .find(['/', '?', '#'])
        .map_or(written.len(), |end| start + end);
    &written[..end]
}

/// Whether the parsed url's scheme, host or port contains one of the env values substituted
/// into it (compared without case, as the parser lower-cases a host), however short: such an
/// origin is never shown.
fn origin_holds(url: &Url, used: &[String]) -> bool {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let port = url.port().map(|p| p.to_string()).unwrap_or_default();
    used.iter().filter(|v| !v.is_empty()).any(|value| {
        let value = value.to_ascii_lowercase();
        host.contains(&value) || port.contains(&value) || url.scheme().contains(&value)
    })
}

/// `scheme://host:port`, the port explicit even when it is the scheme's default.
fn origin_of(url: &Url) -> Option<String> {
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    Some(format!("{}://{host}:{port}", url.scheme()))
}

/// Refuses an entry that other clients' configs switch off: `"disabled": true` (Cline, Roo,
/// Windsurf) or `"enabled": false`. Such an entry is never contacted.
///
/// # Errors
/// The reason the listing shows, or a field of the wrong JSON type.
fn disabled(fields: &serde_json::Map<String, Value>) -> Result<(), String> {
    for (key, off) in [("disabled", true), ("enabled", false)] {
        match fields.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Bool(value)) if *value == off => {
                return Err(format!(
                    "the entry is disabled in the config (\"{key}\": {off}), so this Pack does not connect to it"
                ));
            }
            Some(Value::Bool(_)) => {}
            Some(other) => return Err(wrong_type(key, "a boolean", other)),
        }
    }
    Ok(())
}

/// The key an entry's address is read from, and its value: Gemini CLI's `httpUrl` (its
/// Streamable HTTP endpoint; Gemini CLI reads `url` as a legacy SSE endpoint) when given, else
/// `url`. Another address key given beside the one read (`url`, Windsurf's `serverUrl`) gets a
/// note saying it is not read.
///
/// # Errors
/// An entry with neither: naming Windsurf's `serverUrl` when it has one (its endpoint may be a
/// legacy SSE one, so the user renames it knowingly).
fn address<'a>(
    fields: &'a serde_json::Map<String, Value>,
    notes: &mut Vec<String>,
) -> Result<(&'static str, &'a Value), String> {
    let given = |key: &str| fields.get(key).filter(|value| !value.is_null());
    let keys = ["httpUrl", "url", "serverUrl"];
    let Some((key, value)) = keys[..2]
        .iter()
        .find_map(|key| given(key).map(|value| (*key, value)))
    else {
        return Err(if given("serverUrl").is_some() {
            "the entry has \"serverUrl\" (Windsurf's key) but no \"url\"; this Pack reads the server's address from \"url\", so rename \"serverUrl\" to \"url\"".to_string()
        } else {
            "the entry has neither \"url\" (a remote server) nor \"command\" (a local one)"
                .to_string()
        });
    };
    for other in keys.into_iter().filter(|k| *k != key && given(k).is_some()) {
        notes.push(format!(
            "\"{other}\" is not read: this Pack reads the address from \"{key}\"{}",
            if key == "httpUrl" {
                " (Gemini CLI's Streamable HTTP endpoint; Gemini CLI reads \"url\" as a legacy SSE endpoint)"
            } else {
                ""
            }
        ));
    }
    Ok((key, value))
}

/// Whether `url`'s path ends in `/sse` (any case, a trailing `/` aside): where legacy HTTP+SSE
/// servers listen (MCP 2024-11-05 "Transports": the SSE endpoint). Decided on the config's own
/// url, never on server text.
pub(crate) fn legacy_sse_path(url: &Url) -> bool {
    let path = url.path().trim_end_matches('/');
    path.len() >= 4 && path[path.len() - 4..].eq_ignore_ascii_case("/sse")
}

/// The refusal of an entry with a key asking for something this Pack will not do, naming the
/// key and what to write instead: a command that prints headers (Claude Code's
/// `headersHelper`, Codex's `http_headers_helper`: this Pack starts no process), or Gemini
/// CLI's Google credentials (`authProviderType` other than `dynamic_discovery`,
/// `targetAudience`, `targetServiceAccount`).
fn not_done(fields: &serde_json::Map<String, Value>) -> Option<String> {
    let given = |key: &str| fields.get(key).is_some_and(|value| !value.is_null());
    for (key, client) in [
        ("headersHelper", "Claude Code"),
        ("http_headers_helper", "Codex"),
    ] {
        if given(key) {
            return Some(format!(
                "the entry has \"{key}\" ({client}'s command that prints headers); this Pack starts no process: write each header in \"headers\", a secret as ${{env:NAME}} (\"Authorization\": \"Bearer ${{env:NAME}}\")"
            ));
        }
    }
    if given("oauth_resource") {
        return Some(
            "the entry has \"oauth_resource\" (Codex's RFC 8707 resource), which this Pack does not set: a token is always asked for the server's url as its resource (MCP authorization, \"Resource Parameter\"); remove it".to_string(),
        );
    }
    let google = match fields.get("authProviderType") {
        None | Some(Value::Null) => None,
        Some(Value::String(kind)) if kind == "dynamic_discovery" => None,
        Some(_) => Some("authProviderType"),
    };
    let google = google.or_else(|| {
        ["targetAudience", "targetServiceAccount"]
            .into_iter()
            .find(|key| given(key))
    });
    google.map(|key| {
        format!(
            "the entry has \"{key}\" (Gemini CLI's Google credentials or service account impersonation), which this Pack does not do: put a token in \"headers\" (\"Authorization\": \"Bearer ${{env:NAME}}\"), or remove the key to sign in with OAuth when the server asks"
        )
    })
}

/// The entry's headers as one object: `headers`, Codex's `http_headers` (the same), Codex's
/// `env_http_headers` (header name to the name of the environment variable holding its value:
/// `${env:NAME}`) and Codex's `bearer_token_env_var` (`Authorization: Bearer ${env:NAME}`).
///
/// # Errors
/// A key of the wrong type, a variable name that is not one or is not set (naming the key and
/// the variable), or one header given by two keys (in any case).
fn all_headers(
    fields: &serde_json::Map<String, Value>,
    env: &dyn Environment,
) -> Result<serde_json::Map<String, Value>, String> {
    let mut all = serde_json::Map::new();
    let mut given_by: Vec<(String, &'static str)> = Vec::new();
    let mut put = |name: &str, value: Value, key: &'static str| {
        let lower = name.to_ascii_lowercase();
        if let Some((_, first)) = given_by.iter().find(|(n, _)| *n == lower) {
            return Err(format!(
                "header \"{}\" is given by both \"{first}\" and \"{key}\"; keep one",
                printable(name)
            ));
        }
        given_by.push((lower, key));
        all.insert(name.to_string(), value);
        Ok(())
    };
    let variable = |key: &str, header: &str, name: &Value| -> Result<String, String> {
        let Value::String(name) = name else {
            return Err(format!(
                "\"{key}\" must name an environment variable (a string) for header \"{}\", found {}",
                printable(header),
                json_type(name)
            ));
        };
        if !crate::substitute::is_variable_name(name) {
            return Err(format!(
                "\"{key}\" must name an environment variable (letters, digits and underscores) for header \"{}\"",
                printable(header)
            ));
        }
        if env.var(name).is_none() {
            return Err(format!(
                "{} (named by \"{key}\") is not set",
                crate::substitute::variable_named(name)
            ));
        }
        Ok(format!("${{env:{name}}}"))
    };
    for key in ["headers", "http_headers"] {
        match fields.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Object(headers)) => {
                for (name, value) in headers {
                    put(name, value.clone(), key)?;
                }
            }
            Some(other) => return Err(wrong_type(key, "an object of strings", other)),
        }
    }
    match fields.get("env_http_headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(headers)) => {
            for (name, variable_name) in headers {
                let value = variable("env_http_headers", name, variable_name)?;
                put(name, Value::String(value), "env_http_headers")?;
            }
        }
        Some(other) => {
            return Err(wrong_type(
                "env_http_headers",
                "an object of header names to environment variable names",
                other,
            ));
        }
    }
    match fields.get("bearer_token_env_var") {
        None | Some(Value::Null) => {}
        Some(name @ Value::String(_)) => {
            let value = variable("bearer_token_env_var", "Authorization", name)?;
            put(
                "Authorization",
                Value::String(format!("Bearer {value}")),
                "bearer_token_env_var",
            )?;
        }
        Some(other) => {
            return Err(wrong_type(
                "bearer_token_env_var",
                "the name of an environment variable (a string)",
                other,
            ));
        }
    }
    Ok(all)
}

/// The entry's `oauth` object, or Cursor's `auth` (a pre-registered OAuth client: `CLIENT_ID`,
/// `CLIENT_SECRET`, `scopes`) as the `oauth` object it means (`clientId`, `clientSecret`,
/// `scopes`), with Codex's entry-level `scopes` as its `scopes`; `None` when none is given.
///
/// # Errors
/// Both `oauth` and `auth`, `auth` not an object, a key of `auth` other than those three
/// (named), or Codex's `scopes` beside scopes in the object.
fn oauth_value(fields: &serde_json::Map<String, Value>) -> Result<Option<Value>, String> {
    let oauth = oauth_object(fields)?;
    let Some(scopes) = fields.get("scopes").filter(|value| !value.is_null()) else {
        return Ok(oauth);
    };
    let mut oauth = match oauth {
        None => serde_json::Map::new(),
        Some(Value::Object(oauth)) => oauth,
        // Not an object: `oauth`'s own parse names it.
        Some(other) => return Ok(Some(other)),
    };
    if oauth.contains_key("scopes") {
        return Err(
            "the entry has \"scopes\" (Codex's key) and scopes in its OAuth client too; keep one"
                .to_string(),
        );
    }
    oauth.insert("scopes".to_string(), scopes.clone());
    Ok(Some(Value::Object(oauth)))
}

/// The entry's `oauth` object, or Cursor's `auth` as the `oauth` object it means; see
/// [`oauth_value`].
fn oauth_object(fields: &serde_json::Map<String, Value>) -> Result<Option<Value>, String> {
    let given = |key: &str| fields.get(key).filter(|value| !value.is_null());
    match (given("oauth"), given("auth")) {
        (Some(_), Some(_)) => Err(
            "the entry has both \"oauth\" and \"auth\" (Cursor's key for a pre-registered OAuth client); keep one"
                .to_string(),
        ),
        (Some(oauth), None) => Ok(Some(oauth.clone())),
        (None, None) => Ok(None),
        (None, Some(Value::Object(auth))) => {
            let mut oauth = serde_json::Map::new();
            for (key, value) in auth {
                let mapped = match key.as_str() {
                    "CLIENT_ID" => "clientId",
                    "CLIENT_SECRET" => "clientSecret",
                    "scopes" => "scopes",
                    other => {
                        return Err(format!(
                            "\"auth\" has \"{}\", which this Pack does not read; Cursor's \"auth\" holds \"CLIENT_ID\", \"CLIENT_SECRET\" and \"scopes\"",
                            printable(other)
                        ));
                    }
                };
                oauth.insert(mapped.to_string(), value.clone());
            }
            Ok(Some(Value::Object(oauth)))
        }
        (None, Some(other)) => Err(wrong_type("auth", "an object", other)),
    }
}

/// Which unit a `timeout` is written in: Cline and its forks (Roo Code, Kilo Code) and Goose
/// write seconds (their entries carry `alwaysAllow`, `autoApprove`, `transportType`; Goose's
/// `available_tools`, `envs`, `env_keys`, `bundled`; or a `type` spelling "streamable HTTP" —
/// `streamableHttp`, `streamable-http`, `streamable_http`), Gemini CLI and Claude Code
/// milliseconds. Without those marks a value below 1000 is read as seconds (no one means a
/// deadline under a second), with a note saying so. Read in doubt as seconds, a deadline can
/// only come out longer, and then it is capped.
fn timeout_in_seconds(fields: &serde_json::Map<String, Value>) -> bool {
    const MARKS: [&str; 7] = [
        "alwaysAllow",
        "autoApprove",
        "transportType",
        "available_tools",
        "envs",
        "env_keys",
        "bundled",
    ];
    MARKS.iter().any(|key| fields.contains_key(*key))
        || fields.get("type").and_then(Value::as_str).is_some_and(|t| {
            let spelled: String = t.chars().filter(|c| !matches!(c, '-' | '_')).collect();
            spelled.eq_ignore_ascii_case("streamableHttp")
        })
}

/// The entry's [`Deadlines`]: Codex's `startup_timeout_sec` or `startup_timeout_ms` for the
/// start, Codex's `tool_timeout_sec` and the `timeout` of Gemini CLI, Claude Code and Cline
/// ([`timeout_in_seconds`]) for calls; the shortest applies. One longer than the Pack's own
/// deadline is capped to it, with a note.
///
/// # Errors
/// A value that is not a number above 0, or both startup keys.
fn deadlines(
    fields: &serde_json::Map<String, Value>,
    notes: &mut Vec<String>,
) -> Result<Deadlines, String> {
    let given = |key: &str| fields.get(key).filter(|value| !value.is_null());
    if given("startup_timeout_sec").is_some() && given("startup_timeout_ms").is_some() {
        return Err(
            "the entry has both \"startup_timeout_sec\" and \"startup_timeout_ms\"; keep one"
                .to_string(),
        );
    }
    let cline = timeout_in_seconds(fields);
    let mut deadlines = Deadlines::default();
    for key in [
        "startup_timeout_sec",
        "startup_timeout_ms",
        "tool_timeout_sec",
        "timeout",
    ] {
        let Some(value) = given(key) else { continue };
        let Some(number) = value.as_f64().filter(|n| n.is_finite() && *n > 0.0) else {
            return Err(match value {
                Value::Number(_) => format!("\"{key}\" must be a number above 0"),
                other => wrong_type(key, "a number", other),
            });
        };
        let seconds = match key {
            "startup_timeout_ms" => false,
            "timeout" if !cline && number >= 1000.0 => false,
            "timeout" if !cline => {
                notes.push(format!(
                    "\"timeout\" is {value}, read as seconds (Cline's unit): Gemini CLI and Claude Code write milliseconds, but no deadline under a second is meant"
                ));
                true
            }
            _ => true,
        };
        let unit = if seconds { "seconds" } else { "milliseconds" };
        let asked =
            std::time::Duration::try_from_secs_f64(if seconds { number } else { number / 1000.0 })
                .unwrap_or(std::time::Duration::MAX);
        let (slot, limit, what) = if key.starts_with("startup") {
            (
                &mut deadlines.start,
                crate::limits::START_DEADLINE,
                "a start of this server",
            )
        } else {
            (
                &mut deadlines.call,
                crate::limits::CALL_DEADLINE,
                "a call to this server",
            )
        };
        if asked > limit {
            notes.push(format!(
                "\"{key}\" is {value} ({unit}), longer than this Pack allows: {what} still ends within {} seconds",
                limit.as_secs()
            ));
        } else {
            *slot = (*slot).min(asked);
        }
    }
    Ok(deadlines)
}

/// The entry's url, an `http` or `https` URL with a host. A url without a scheme
/// (`127.0.0.1:8080/mcp`, `localhost:3000/mcp`, `api.example.com/mcp`: one that parses as an
/// `http://` URL with a host once that is put before it) is refused saying so; the url is
/// never quoted (it may hold a secret).
///
/// # Errors
/// The reason, naming the field only.
fn parse_url(url: &str, key: &str) -> Result<Url, String> {
    let parsed = Url::parse(url);
    if let Ok(parsed) = &parsed
        && matches!(parsed.scheme(), "http" | "https")
        && parsed.has_host()
    {
        return Ok(parsed.clone());
    }
    let no_scheme = !url.contains("://")
        && Url::parse(&format!("http://{url}")).is_ok_and(|with| with.has_host());
    if no_scheme {
        return Err(format!(
            "\"{key}\" has no scheme: begin it with https:// (or http:// for a server on this machine)"
        ));
    }
    match parsed {
        Ok(_) => Err(format!("\"{key}\" must be an http:// or https:// URL")),
        Err(_) => Err(format!("\"{key}\" is not a valid URL")),
    }
}

fn parse_headers(
    headers: &serde_json::Map<String, Value>,
    env: &dyn Environment,
    redactor: &mut Redactor,
    notes: &mut Notes,
) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let Value::String(written) = value else {
            return Err(format!(
                "header \"{}\" must be a string, found {}",
                printable(name),
                json_type(value)
            ));
        };
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            format!(
                "header name \"{}\" is not a valid HTTP header name",
                printable(name)
            )
        })?;
        if CLIENT_OWNED_HEADERS.contains(&header.as_str())
            || header.as_str().starts_with(CLIENT_OWNED_PREFIX)
        {
            return Err(format!(
                "header \"{name}\" is set by the MCP client itself and may not be configured"
            ));
        }
        if CONNECTION_HEADERS.contains(&header.as_str()) {
            return Err(format!(
                "header \"{name}\" belongs to the HTTP connection and may not be configured"
            ));
        }
        let field = format!("header \"{name}\"");
        let mut used = Vec::new();
        let value = substitute(written, &field, env, &mut used, notes)?;
        for secret in &used {
            redactor.add_secret(secret);
        }
        redactor.add_written(&value);
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            format!("the value of header \"{name}\" is not a valid HTTP header value")
        })?;
        value.set_sensitive(true);
        map.append(header, value);
    }
    Ok(map)
}

/// Moves `user:password@` out of `url` into a sensitive `Authorization: Basic` value (what an
/// HTTP client would send for it), adding the user, the password and that value to `redactor`:
/// credentials in a URL are secrets whether or not they came from `${env:...}` (a token is often
/// written as the user name alone, `https://TOKEN@host`). A configured `Authorization` header
/// wins over it.
///
/// # Errors
/// Credentials that are not UTF-8 once percent-decoded.
fn take_credentials(url: &mut Url, redactor: &mut Redactor) -> Result<Option<HeaderValue>, String> {
    use base64::Engine;
    if url.username().is_empty() && url.password().is_none() {
        return Ok(None);
    }
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .map(|t| t.into_owned())
            .map_err(|_| "the user or password in \"url\" is not UTF-8".to_string())
    };
    let user = decode(url.username())?;
    let password = url.password().map(decode).transpose()?;
    for written in [Some(url.username()), url.password()].into_iter().flatten() {
        redactor.add(written);
    }
    for decoded in [Some(&user), password.as_ref()].into_iter().flatten() {
        redactor.add_secret(decoded);
    }
    let credentials = format!("{user}:{}", password.as_deref().unwrap_or(""));
    redactor.add_secret(&credentials);
    let token = base64::engine::general_purpose::STANDARD.encode(credentials);
    let basic = format!("Basic {token}");
    redactor.add_secret(&basic);
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let mut value = HeaderValue::from_str(&basic)
        .map_err(|_| "the user or password in \"url\" cannot be sent".to_string())?;
    value.set_sensitive(true);
    Ok(Some(value))
}

fn wrong_type(field: &str, expected: &str, found: &Value) -> String {
    format!("\"{field}\" must be {expected}, found {}", json_type(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::substitute::is_variable_name;
    use serde_json::json;
    use std::collections::HashMap;

    struct FakeEnv(HashMap<&'static str, &'static str>, Option<&'static str>);

    impl Environment for FakeEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| v.to_string())
        }
        fn home(&self) -> Option<String> {
            self.1.map(str::to_string)
        }
    }

    fn env() -> FakeEnv {
        FakeEnv(
            HashMap::from([("TOKEN", "s3cr3t-token-value"), ("HOST", "example.com")]),
            Some("/home/ada"),
        )
    }

    fn one(entry: Value) -> Entry {
        let mut parsed = parse(&json!({ "x": entry }), &env()).unwrap();
        assert_eq!(parsed.len(), 1);
        parsed.remove(0).1
    }

    fn refused(entry: Value) -> String {
        match one(entry) {
            Entry::Refused(reason) | Entry::Unused { reason, .. } => reason,
            Entry::Remote(_) => panic!("entry was accepted"),
        }
    }

    fn remote(entry: Value) -> RemoteServer {
        match one(entry) {
            Entry::Remote(server) => *server,
            Entry::Refused(reason) | Entry::Unused { reason, .. } => panic!("refused: {reason}"),
        }
    }

    #[test]
    fn null_is_no_servers_and_non_objects_are_unavailable() {
        assert!(parse(&Value::Null, &env()).unwrap().is_empty());
        let cases = [
            (json!([]), "an array"),
            (json!(1), "a number"),
            (json!(true), "a boolean"),
        ];
        for (config, found) in cases {
            assert_eq!(
                parse(&config, &env()).err().unwrap(),
                format!(
                    "the mcp config must be an object of servers (the mcpServers of an mcp.json), found {found}"
                )
            );
        }
    }

    #[test]
    fn a_string_is_an_mcp_json_text_jsonc_allowed() {
        let text = "\u{feff}{\n  // VS Code writes comments\n  \"servers\": {\"docs\": {\"url\": \"https://d.example/mcp\"},},\n  \"inputs\": [],\n}";
        let parsed = parse(&json!(text), &env()).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].0, "docs");
        assert!(matches!(parsed[0].1, Entry::Remote(_)));
        let servers_only = parse(&json!(r#"{"files": {"command": "npx"}}"#), &env()).unwrap();
        assert!(matches!(&servers_only[0].1, Entry::Refused(r) if r == LOCAL_REFUSED));
        assert!(
            parse(&json!("{\"mcpServers\": null}"), &env())
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_string_that_is_no_mcp_json_says_why() {
        let cases = [
            (
                r#"{"servers": {} "inputs": []}"#,
                "the mcp config's text is not JSON (comments and trailing commas are allowed): expected `,` or `}` at line 1 column 16",
            ),
            (
                "/home/me/.vscode/mcp.json",
                "the mcp config's text is not JSON (comments and trailing commas are allowed): expected value at line 1 column 1; a string config is the text of an mcp.json file, not its path: pass the file's contents",
            ),
            (
                "",
                "the mcp config's text is empty; a string config is the text of an mcp.json file, not its path: pass the file's contents",
            ),
            (
                r#""{}""#,
                "the mcp config's text holds a JSON string, not an mcp.json object",
            ),
            (
                "[1]",
                "the mcp config must be an object of servers (the mcpServers of an mcp.json), found an array",
            ),
            (
                r#"{"mcpServers": {}, "servers": {}}"#,
                "the mcp config is a whole mcp.json with both \"mcpServers\" and \"servers\"; keep one",
            ),
        ];
        for (text, reason) in cases {
            assert_eq!(
                parse(&json!(text), &env()).err().as_deref(),
                Some(reason),
                "{text}"
            );
        }
    }

    #[test]
    fn vs_code_inputs_without_servers_is_refused_whole() {
        let reason = "the mcp config has VS Code's \"inputs\" but no \"servers\" object; put the servers under \"servers\"";
        assert_eq!(
            parse(&json!({"inputs": []}), &env()).err().as_deref(),
            Some(reason)
        );
        assert_eq!(
            parse(&json!(r#"{"inputs": [{"id": "token"}]}"#), &env())
                .err()
                .as_deref(),
            Some(reason)
        );
        // A server that happens to be called "inputs" is still one.
        let parsed = parse(&json!({"inputs": {"command": "npx"}}), &env()).unwrap();
        assert_eq!(parsed[0].0, "inputs");
    }

    #[test]
    fn a_plugin_key_that_misspells_a_servers_key_is_named_when_it_holds_servers() {
        let entry = json!({"url": "https://a.example/mcp"});
        let text = format!("// the file\n{{\"servers\": {{\"docs\": {entry},}}}}");
        let cases = [
            (json!({"MCP": {"docs": entry}}), Some(("MCP", "mcp"))),
            (json!({"Mcp": text}), Some(("Mcp", "mcp"))),
            (
                json!({"mcp_servers": {"docs": entry}}),
                Some(("mcp_servers", "mcpServers")),
            ),
            (
                json!({"mcpservers": {"docs": entry}}),
                Some(("mcpservers", "mcpServers")),
            ),
            (
                json!({"mcpServer": {"docs": entry}}),
                Some(("mcpServer", "mcpServers")),
            ),
            (
                json!({"Servers": {"docs": entry}}),
                Some(("Servers", "servers")),
            ),
            (
                json!({"other": {"url": "x"}, "MCP": {"mcpServers": {}}}),
                Some(("MCP", "mcp")),
            ),
            // No near miss, or one that holds no servers: nothing to name.
            (json!({"fetch": {"docs": entry}}), None),
            (json!({"mcps": {"docs": entry}}), None),
            (json!({"server": {"port": 8080}}), None),
            (json!({"MCP": entry}), None),
            (json!({"MCP": {}}), None),
            (json!({"MCP": "not json"}), None),
            (json!({"MCP": "\"{}\""}), None),
            (json!({"MCP": [entry]}), None),
            // `mcp` or a whole file beside it wins.
            (json!({"mcp": null, "MCP": {"docs": entry}}), None),
            (
                json!({"servers": {"docs": entry}, "MCP": {"docs": entry}}),
                None,
            ),
            (json!(null), None),
        ];
        for (config, expected) in cases {
            assert_eq!(misnamed_plugin_key(&config), expected, "{config}");
        }
        assert_eq!(
            misnamed_plugin_reason("mcp_servers", "mcpServers"),
            "the plugin config has \"mcp_servers\", which this Plugin does not read, and no \"mcp\", so the mcp Pack would have no servers; did you mean \"mcpServers\"? (keys are case-sensitive)"
        );
    }

    #[test]
    fn a_namespace_that_misspells_a_file_key_and_holds_servers_is_refused() {
        let entry = json!({"url": "https://a.example/mcp"});
        let parsed = parse(
            &json!({
                "mcp_servers": {"docs": entry},
                "Servers": {"docs": entry},
                "server": entry,
                "MCPServers": {"note": "x"},
                "docs": entry,
            }),
            &env(),
        )
        .unwrap();
        let reason = |i: usize| match &parsed[i].1 {
            Entry::Refused(reason) | Entry::Unused { reason, .. } => Some(reason.clone()),
            Entry::Remote(_) => None,
        };
        assert_eq!(
            reason(0).as_deref(),
            Some(
                "\"mcp_servers\" holds servers, not a server's settings, under a key this Pack does not read; did you mean \"mcpServers\"? (keys are case-sensitive)"
            )
        );
        assert_eq!(
            reason(1).as_deref(),
            Some(
                "\"Servers\" holds servers, not a server's settings, under a key this Pack does not read; did you mean \"servers\"? (keys are case-sensitive)"
            )
        );
        assert_eq!(reason(2), None, "a server named so is a server");
        assert_eq!(
            reason(3).as_deref(),
            Some("the entry has neither \"url\" (a remote server) nor \"command\" (a local one)")
        );
        assert_eq!(reason(4), None);
    }

    #[test]
    fn entry_keys_with_separators_or_another_case_are_misspellings() {
        let said = |key: &str, meant: &str| {
            format!(
                "the entry has \"{key}\", which this Pack does not read; {}",
                super::did_you_mean(key, meant)
            )
        };
        let url = "https://a.example/mcp";
        let cases = [
            (json!({"url": url, "Header": {}}), said("Header", "headers")),
            (
                json!({"url": url, "include_tools": []}),
                said("include_tools", "includeTools"),
            ),
            (
                json!({"url": url, "disabled-tools": []}),
                said("disabled-tools", "disabledTools"),
            ),
            (json!({"url": url, "OAuth": {}}), said("OAuth", "oauth")),
        ];
        for (entry, expected) in cases {
            assert_eq!(refused(entry.clone()), expected, "{entry}");
        }
        // Other clients' keys of other kinds are not taken for misspellings.
        let server = remote(json!({
            "url": url, "timeout": 5, "auth": {}, "alwaysAllow": [], "autoApprove": [],
            "startup_timeout_sec": 10, "http_headers": {}, "trust": true, "description": "d"
        }));
        assert_eq!(server.url.as_str(), url);
    }

    #[test]
    fn entries_keep_config_order_and_exact_names() {
        let config = json!({
            "Zeta Docs": {"url": "https://z.example/mcp"},
            "alpha": {"command": "npx"},
            "b": 3
        });
        let parsed = parse(&config, &env()).unwrap();
        let names: Vec<&str> = parsed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["Zeta Docs", "alpha", "b"]);
        assert!(matches!(parsed[0].1, Entry::Remote(_)));
        assert!(matches!(&parsed[1].1, Entry::Refused(r) if r == LOCAL_REFUSED));
        assert!(
            matches!(&parsed[2].1, Entry::Refused(r) if r == "a server entry must be an object, found a number")
        );
    }

    #[test]
    fn remote_entry_with_substitution_and_unknown_fields() {
        let server = remote(json!({
            "url": "https://${env:HOST}/mcp?home=${userHome}&keep=${other}",
            "type": "http",
            "headers": {"Authorization": "Bearer ${env:TOKEN}", "X-Plain": "plain"},
            "disabled": false,
            "timeout": 5
        }));
        assert_eq!(
            server.url.as_str(),
            "https://example.com/mcp?home=/home/ada&keep=${other}"
        );
        assert_eq!(server.headers.len(), 2);
        assert_eq!(
            server.headers["authorization"].as_bytes(),
            b"Bearer s3cr3t-token-value"
        );
        assert!(server.headers["authorization"].is_sensitive());
        assert_eq!(
            server.redactor.scrub("s3cr3t-token-value example.com"),
            "[redacted] [redacted]",
            "every substituted env value is a secret, the host's too"
        );
        assert_eq!(
            server.redactor.scrub("got /mcp?k=pass%20word%22x%22 back"),
            "got /mcp?k=pass%20word%22x%22 back",
            "values not used in the URL are not scrubbed in encoded form"
        );
        let debug = format!("{server:?}");
        assert_eq!(
            debug,
            r#"RemoteServer { header_names: ["authorization", "x-plain"], .. }"#
        );
    }

    #[test]
    fn origin_is_named_only_when_it_holds_no_secret() {
        let plain = remote(json!({"url": "https://user:pw-secret-1@a.example/mcp/${env:TOKEN}"}));
        assert_eq!(plain.origin.as_deref(), Some("https://a.example:443"));
        let local = remote(json!({"url": "http://127.0.0.1:8931/mcp"}));
        assert_eq!(local.origin.as_deref(), Some("http://127.0.0.1:8931"));
        let hidden = remote(json!({"url": "https://${env:HOST}/mcp"}));
        assert_eq!(hidden.origin, None);
    }

    #[test]
    fn an_env_value_in_the_parsed_origin_hides_it_however_the_url_is_written() {
        let env = FakeEnv(HashMap::from([("P", "8931"), ("H", "Mcp.Example")]), None);
        let origin = |url: &str| {
            let parsed = parse(&json!({"x": {"url": url}}), &env).unwrap();
            let Entry::Remote(server) = &parsed[0].1 else {
                panic!("refused: {url}")
            };
            server.origin.clone()
        };
        assert_eq!(origin("http://127.0.0.1:${env:P}/mcp"), None);
        assert_eq!(origin("http:/127.0.0.1:${env:P}/mcp"), None);
        assert_eq!(origin("http:\t//127.0.0.1:${env:P}/mcp"), None);
        assert_eq!(origin("http:${env:H}/mcp"), None);
        assert_eq!(origin("https:/${env:H}/mcp"), None);
        // An env value only in the path leaves the origin shown, one slash or two.
        assert_eq!(
            origin("http:/127.0.0.1:8000/${env:P}"),
            Some("http://127.0.0.1:8000".to_string())
        );
        assert_eq!(
            origin("http://127.0.0.1:8000/${env:P}"),
            Some("http://127.0.0.1:8000".to_string())
        );
    }

    #[test]
    fn url_env_values_are_scrubbed_in_encoded_forms_too() {
        let env = FakeEnv(HashMap::from([("Q", "pass word\"x\"{y}")]), None);
        let parsed = parse(
            &json!({"x": {"url": "https://h.example/${env:Q}?k=${env:Q}"}}),
            &env,
        )
        .unwrap();
        let Entry::Remote(server) = &parsed[0].1 else {
            panic!("refused")
        };
        assert_eq!(
            server.url.as_str(),
            "https://h.example/pass%20word%22x%22%7By%7D?k=pass%20word%22x%22{y}"
        );
        assert_eq!(
            server.redactor.scrub("path /pass%20word%22x%22%7By%7D query k=pass%20word%22x%22{y} raw pass word\"x\"{y}"),
            "path /[redacted] query k=[redacted] raw [redacted]"
        );
    }

    #[test]
    fn other_placeholders_pass_through() {
        let server = remote(json!({"url": "https://h.example/${workspaceFolder}/${env:TOKEN"}));
        assert_eq!(
            server.url.as_str(),
            "https://h.example/$%7BworkspaceFolder%7D/$%7Benv:TOKEN"
        );
    }

    #[test]
    fn the_oauth_object_is_parsed_and_its_secrets_are_scrubbed() {
        let server = remote(json!({"url": "https://a.example/mcp", "oauth": {
            "clientId": "app-1", "clientSecret": "${env:TOKEN}", "callbackPort": 33418,
            "scopes": "files:read files:write"
        }}));
        assert_eq!(server.oauth.client_id.as_deref(), Some("app-1"));
        assert_eq!(server.oauth.callback_port, Some(33418));
        assert_eq!(
            server.oauth.scopes,
            Some(vec!["files:read".to_string(), "files:write".to_string()])
        );
        assert_eq!(
            server.redactor.scrub("echo s3cr3t-token-value"),
            "echo [redacted]"
        );
        let plain = remote(json!({"url": "https://a.example/mcp"}));
        assert_eq!(plain.oauth.client_id, None);
        assert_eq!(
            plain.oauth.grant_type,
            crate::auth::config::GrantType::AuthorizationCode
        );
    }

    #[test]
    fn refusals_name_the_field_never_the_value() {
        let cases = [
            (json!({"command": "npx", "args": ["x"], "env": {"K": "V"}, "cwd": "/"}), LOCAL_REFUSED.to_string()),
            (json!({"url": "https://a.example", "command": "npx"}), LOCAL_REFUSED.to_string()),
            (
                json!({"type": "sse", "url": "https://a.example/sse"}),
                "the legacy HTTP+SSE transport (type \"sse\") is not supported; point \"url\" at the server's Streamable HTTP endpoint instead".to_string(),
            ),
            (json!({"type": 7, "url": "https://a.example"}), "\"type\" must be a string, found a number".to_string()),
            (json!({}), "the entry has neither \"url\" (a remote server) nor \"command\" (a local one)".to_string()),
            (json!({"url": ["x"]}), "\"url\" must be a string, found an array".to_string()),
            (json!({"url": "not a url"}), "\"url\" is not a valid URL".to_string()),
            (
                json!({"url": "${DEMO_URL:-http://127.0.0.1:9/mcp}"}),
                "\"url\" is not a valid URL: it holds a ${...} placeholder this Pack does not expand (only ${env:NAME} and ${userHome}, without fallback values); write ${env:NAME}".to_string(),
            ),
            (json!({"url": "ftp://a.example/x"}), "\"url\" must be an http:// or https:// URL".to_string()),
            (json!({"url": "https://a.example", "headers": ["x"]}), "\"headers\" must be an object of strings, found an array".to_string()),
            (json!({"url": "https://a.example", "headers": {"X-N": 5}}), "header \"X-N\" must be a string, found a number".to_string()),
            (json!({"url": "https://a.example", "headers": {"bad name": "v"}}), "header name \"bad name\" is not a valid HTTP header name".to_string()),
            (json!({"url": "https://a.example", "headers": {"X-A": "line\nbreak-s3cr3t"}}), "the value of header \"X-A\" is not a valid HTTP header value".to_string()),
            (json!({"url": "https://${env:MISSING}/x"}), "environment variable \"MISSING\" (used in url) is not set".to_string()),
            (json!({"url": "https://a.example", "headers": {"Authorization": "${env:NOPE}"}}), "environment variable \"NOPE\" (used in header \"Authorization\") is not set".to_string()),
            (json!({"url": "https://a.example", "oauth": 5}), "oauth must be an object, found a number".to_string()),
            (json!({"url": "https://a.example", "oauth": {"callbackPort": "x"}}), "oauth.callbackPort must be a number, found a string".to_string()),
            (json!({"url": "https://a.example", "oauth": {"clientSecret": "${env:NOPE}"}}), "environment variable \"NOPE\" (used in oauth.clientSecret) is not set".to_string()),
        ];
        for (entry, expected) in cases {
            assert_eq!(refused(entry.clone()), expected, "entry {entry}");
        }
    }

    #[test]
    fn client_owned_headers_are_refused_case_insensitively() {
        for name in [
            "Accept",
            "Accept-Encoding",
            "ACCEPT-ENCODING",
            "MCP-SESSION-ID",
            "last-event-id",
            "Mcp-Protocol-Version",
            "Content-Type",
            "Mcp-Method",
            "MCP-NAME",
            "Mcp-Param-Region",
        ] {
            assert_eq!(
                refused(json!({"url": "https://a.example", "headers": {name: "v"}})),
                format!(
                    "header \"{name}\" is set by the MCP client itself and may not be configured"
                )
            );
        }
    }

    #[test]
    fn connection_headers_are_refused() {
        for name in [
            "Host",
            "connection",
            "Content-Length",
            "Transfer-Encoding",
            "Upgrade",
            "TE",
        ] {
            assert_eq!(
                refused(json!({"url": "https://a.example", "headers": {name: "v"}})),
                format!(
                    "header \"{name}\" belongs to the HTTP connection and may not be configured"
                )
            );
        }
    }

    #[test]
    fn legacy_sse_is_refused_in_any_case() {
        assert!(
            refused(json!({"type": "SSE", "url": "https://a.example/sse"}))
                .starts_with("the legacy HTTP+SSE transport (type \"sse\") is not supported")
        );
    }

    #[test]
    fn url_credentials_become_a_sensitive_basic_header_and_secrets() {
        let server = remote(json!({"url": "https://ada:p%40ss-${env:TOKEN}@h.example/mcp"}));
        assert_eq!(server.url.as_str(), "https://h.example/mcp");
        let basic = &server.headers["authorization"];
        assert!(basic.is_sensitive());
        // base64("ada:p@ss-s3cr3t-token-value")
        assert_eq!(
            basic.as_bytes(),
            b"Basic YWRhOnBAc3MtczNjcjN0LXRva2VuLXZhbHVl"
        );
        assert_eq!(
            server.redactor.scrub(
                "Basic YWRhOnBAc3MtczNjcjN0LXRva2VuLXZhbHVl p@ss-s3cr3t-token-value p%40ss-s3cr3t-token-value"
            ),
            "[redacted] [redacted] [redacted]"
        );
        let explicit = remote(
            json!({"url": "https://ada:pw@h.example/mcp", "headers": {"Authorization": "Bearer abcdefgh"}}),
        );
        assert_eq!(
            explicit.headers["authorization"].as_bytes(),
            b"Bearer abcdefgh"
        );
        assert_eq!(explicit.url.as_str(), "https://h.example/mcp");
    }

    /// Gemini CLI's settings choose servers: `mcp.excluded`/`excludeMCPServers` refuse the
    /// named ones, `mcp.allowed`/`allowMCPServers` all but the named ones; a list of the wrong
    /// shape refuses the file.
    #[test]
    fn gemini_clis_server_choices_refuse_the_servers_they_leave_out() {
        let env = env();
        let url = "https://a.example/mcp";
        let reasons = |file: Value| -> Vec<(String, Option<String>)> {
            parse(&file, &env)
                .unwrap()
                .into_iter()
                .map(|(name, entry)| match entry {
                    Entry::Refused(reason) | Entry::Unused { reason, .. } => (name, Some(reason)),
                    Entry::Remote(_) => (name, None),
                })
                .collect()
        };
        let servers = json!({"a": {"httpUrl": url}, "b": {"httpUrl": url}, "c": {"httpUrl": url}});
        assert_eq!(
            reasons(json!({"mcp": {"excluded": ["b"]}, "mcpServers": servers})),
            [
                ("a".to_string(), None),
                ("b".to_string(), Some("the config's \"mcp.excluded\" (Gemini CLI's) excludes this server, so this Pack does not connect to it".to_string())),
                ("c".to_string(), None),
            ]
        );
        assert_eq!(
            reasons(json!({"mcp": {"allowed": ["a", "b"]}, "excludeMCPServers": ["a"], "mcpServers": servers})),
            [
                ("a".to_string(), Some("the config's \"excludeMCPServers\" (Gemini CLI's) excludes this server, so this Pack does not connect to it".to_string())),
                ("b".to_string(), None),
                ("c".to_string(), Some("the config's \"mcp.allowed\" (Gemini CLI's) does not name this server, so this Pack does not connect to it".to_string())),
            ]
        );
        assert_eq!(
            reasons(json!({"allowMCPServers": ["c"], "mcpServers": servers}))
                .into_iter()
                .filter(|(_, refused)| refused.is_none())
                .map(|(name, _)| name)
                .collect::<Vec<_>>(),
            ["c"]
        );
        for (file, reason) in [
            (
                json!({"mcp": {"excluded": "b"}, "mcpServers": servers}),
                "the mcp config's \"mcp.excluded\" must be an array of server names",
            ),
            (
                json!({"allowMCPServers": [1], "mcpServers": servers}),
                "the mcp config's \"allowMCPServers\" must be an array of server names",
            ),
            (
                json!({"mcp": ["x"], "mcpServers": servers}),
                "\"mcp\" must be an object, found an array",
            ),
        ] {
            assert_eq!(parse(&file, &env).err().as_deref(), Some(reason), "{file}");
        }
    }

    #[test]
    fn disabled_entries_are_refused_before_anything_else() {
        let cases = [
            (
                json!({"url": "https://a.example/mcp", "headers": {"Authorization": "Bearer ${env:TOKEN}"}, "disabled": true}),
                "the entry is disabled in the config (\"disabled\": true), so this Pack does not connect to it",
            ),
            (
                json!({"url": "https://a.example/mcp", "enabled": false}),
                "the entry is disabled in the config (\"enabled\": false), so this Pack does not connect to it",
            ),
            (
                json!({"command": "npx", "disabled": true}),
                "the entry is disabled in the config (\"disabled\": true), so this Pack does not connect to it",
            ),
            (
                json!({"url": "https://${env:MISSING}/x", "enabled": false}),
                "the entry is disabled in the config (\"enabled\": false), so this Pack does not connect to it",
            ),
            (
                json!({"url": "https://a.example/mcp", "disabled": "yes"}),
                "\"disabled\" must be a boolean, found a string",
            ),
            (
                json!({"url": "https://a.example/mcp", "enabled": 0}),
                "\"enabled\" must be a boolean, found a number",
            ),
        ];
        for (entry, expected) in cases {
            assert_eq!(refused(entry.clone()), expected, "entry {entry}");
        }
        for on in [
            json!({"url": "https://a.example/mcp", "disabled": false, "enabled": true}),
            json!({"url": "https://a.example/mcp", "disabled": null}),
        ] {
            assert_eq!(remote(on).url.as_str(), "https://a.example/mcp");
        }
    }

    #[test]
    fn cursor_auth_is_the_oauth_object_it_means() {
        let server = remote(json!({
            "url": "https://a.example/mcp",
            "auth": {"CLIENT_ID": "app-1", "CLIENT_SECRET": "${env:TOKEN}", "scopes": ["read", "write"]}
        }));
        assert_eq!(server.oauth.client_id.as_deref(), Some("app-1"));
        assert_eq!(
            server
                .oauth
                .client_secret
                .as_ref()
                .map(|s| secrecy::ExposeSecret::expose_secret(s).to_string()),
            Some("s3cr3t-token-value".to_string())
        );
        assert_eq!(
            server.oauth.scopes,
            Some(vec!["read".to_string(), "write".to_string()])
        );
        assert_eq!(server.redactor.scrub("s3cr3t-token-value"), "[redacted]");
    }

    /// Codex's entry-level `scopes` are the OAuth scopes asked for; its `oauth_resource` is
    /// refused by name.
    #[test]
    fn codex_scopes_are_the_oauth_scopes_and_its_resource_is_refused() {
        let url = "https://a.example/mcp";
        let codex = remote(json!({"url": url, "scopes": ["repo", "read:org"]}));
        assert_eq!(
            codex.oauth.scopes,
            Some(vec!["repo".to_string(), "read:org".to_string()])
        );
        let with_client = remote(json!({"url": url, "scopes": "a b", "oauth": {"clientId": "c"}}));
        assert_eq!(
            (
                with_client.oauth.client_id.as_deref(),
                with_client.oauth.scopes
            ),
            (Some("c"), Some(vec!["a".to_string(), "b".to_string()]))
        );
        assert_eq!(
            refused(json!({"url": url, "scopes": "a", "oauth": {"scopes": "b"}})),
            "the entry has \"scopes\" (Codex's key) and scopes in its OAuth client too; keep one"
        );
        assert_eq!(
            refused(json!({"url": url, "oauth_resource": "https://a.example"})),
            "the entry has \"oauth_resource\" (Codex's RFC 8707 resource), which this Pack does not set: a token is always asked for the server's url as its resource (MCP authorization, \"Resource Parameter\"); remove it"
        );
        assert_eq!(
            refused(json!({"url": url, "scope": "a"})),
            "the entry has \"scope\", which this Pack does not read; did you mean \"scopes\"?"
        );
    }

    #[test]
    fn timeouts_shorten_the_deadlines_only() {
        use std::time::Duration;
        let deadlines = |entry: Value| remote(entry).settings.deadlines;
        let url = "https://a.example/mcp";
        assert_eq!(deadlines(json!({"url": url})), Deadlines::default());
        assert_eq!(
            deadlines(json!({"url": url, "startup_timeout_sec": 10, "tool_timeout_sec": 20.5})),
            Deadlines {
                start: Duration::from_secs(10),
                call: Duration::from_millis(20_500)
            }
        );
        assert_eq!(
            deadlines(
                json!({"url": url, "startup_timeout_ms": 2500, "timeout": 30000, "tool_timeout_sec": 60})
            ),
            Deadlines {
                start: Duration::from_millis(2500),
                call: Duration::from_secs(30)
            }
        );
        assert_eq!(
            deadlines(json!({"url": url, "timeout": 45, "type": "streamableHttp"})).call,
            Duration::from_secs(45)
        );
        // Roo Code's and Kilo Code's spelling, and Goose's marks: seconds too.
        for entry in [
            json!({"url": url, "timeout": 1200, "type": "streamable-http"}),
            json!({"url": url, "timeout": 1200, "type": "Streamable_HTTP"}),
            json!({"url": url, "timeout": 1200, "envs": {}}),
            json!({"url": url, "timeout": 1200, "bundled": false}),
        ] {
            assert_eq!(
                deadlines(entry.clone()).call,
                Duration::from_secs(300),
                "{entry}"
            );
        }
        assert_eq!(
            deadlines(json!({"url": url, "timeout": 90, "type": "streamable-http"})).call,
            Duration::from_secs(90)
        );
        let capped =
            remote(json!({"url": url, "startup_timeout_sec": 600, "tool_timeout_sec": 10}));
        assert_eq!(
            capped.settings.deadlines,
            Deadlines {
                start: crate::limits::START_DEADLINE,
                call: Duration::from_secs(10)
            }
        );
        assert_eq!(
            capped.settings.notes,
            [
                "\"startup_timeout_sec\" is 600 (seconds), longer than this Pack allows: a start of this server still ends within 120 seconds"
            ]
        );
        assert_eq!(
            refused(json!({"url": url, "startup_timeout_sec": 1, "startup_timeout_ms": 1})),
            "the entry has both \"startup_timeout_sec\" and \"startup_timeout_ms\"; keep one"
        );
        assert_eq!(
            refused(json!({"url": url, "timeout": -1})),
            "\"timeout\" must be a number above 0"
        );
    }

    #[test]
    fn other_clients_url_keys_are_read() {
        assert_eq!(
            refused(json!({"serverUrl": "https://a.example/mcp"})),
            "the entry has \"serverUrl\" (Windsurf's key) but no \"url\"; this Pack reads the server's address from \"url\", so rename \"serverUrl\" to \"url\""
        );
        let gemini =
            remote(json!({"httpUrl": "https://a.example/mcp", "url": "https://a.example/sse"}));
        assert_eq!(gemini.url.as_str(), "https://a.example/mcp");
        assert_eq!(
            gemini.settings.notes,
            [
                "\"url\" is not read: this Pack reads the address from \"httpUrl\" (Gemini CLI's Streamable HTTP endpoint; Gemini CLI reads \"url\" as a legacy SSE endpoint)"
            ]
        );
        let both =
            remote(json!({"url": "https://a.example/mcp", "serverUrl": "https://b.example"}));
        assert_eq!(both.url.as_str(), "https://a.example/mcp");
        assert_eq!(
            both.settings.notes,
            ["\"serverUrl\" is not read: this Pack reads the address from \"url\""]
        );
        assert_eq!(
            refused(json!({"httpUrl": "localhost:3000/mcp"})),
            "\"httpUrl\" has no scheme: begin it with https:// (or http:// for a server on this machine)"
        );
    }

    #[test]
    fn invalid_variable_names_are_refused_quoting_only_the_valid_start() {
        let cases = [
            (
                json!({"url": "https://a.example", "headers": {"Authorization": "Bearer ${env:OPENAI_KEY:-sk-live-4f9a8b7c6d5e}"}}),
                "header \"Authorization\" uses ${env:OPENAI_KEY…}, whose name is not a valid environment variable name; write ${env:NAME} with a NAME of letters, digits and underscores (a fallback such as ${env:NAME:-value} is not supported)",
            ),
            (
                json!({"url": "https://a.example/${env:9sk-live-4f9a8b7c6d5e}"}),
                "url uses ${env:…}, whose name is not a valid environment variable name; write ${env:NAME} with a NAME of letters, digits and underscores (a fallback such as ${env:NAME:-value} is not supported)",
            ),
            (
                json!({"url": "https://a.example/${env:}"}),
                "url uses ${env:…}, whose name is not a valid environment variable name; write ${env:NAME} with a NAME of letters, digits and underscores (a fallback such as ${env:NAME:-value} is not supported)",
            ),
            (
                json!({"url": "https://a.example", "headers": {"X-Key": "${env:TOKEN extra}"}}),
                "header \"X-Key\" uses ${env:TOKEN…}, whose name is not a valid environment variable name; write ${env:NAME} with a NAME of letters, digits and underscores (a fallback such as ${env:NAME:-value} is not supported)",
            ),
        ];
        for (entry, expected) in cases {
            assert_eq!(refused(entry.clone()), expected, "entry {entry}");
        }
        assert!(is_variable_name("_A1"));
        assert!(!is_variable_name("1A"));
        assert!(!is_variable_name("A-B"));
        assert!(!is_variable_name("É"));
    }

    #[test]
    fn auth_hints_name_unexpanded_and_empty_variables() {
        let env = FakeEnv(
            HashMap::from([("EMPTY_KEY", ""), ("TOKEN", "s3cr3t-token-value")]),
            None,
        );
        let parsed = parse(
            &json!({
                "cc": {
                    "url": "https://a.example/${TENANT_ID}/mcp",
                    "headers": {
                        "Authorization": "Bearer ${API_KEY}",
                        "X-Key": "${env:EMPTY_KEY}",
                        "X-Other": "${not a name} ${env:TOKEN}"
                    }
                },
                "plain": {"url": "https://a.example/mcp", "headers": {"X-Key": "${env:TOKEN}"}}
            }),
            &env,
        )
        .unwrap();
        let hint = |i: usize| match &parsed[i].1 {
            Entry::Remote(server) => server.auth_hint.clone(),
            Entry::Refused(reason) | Entry::Unused { reason, .. } => panic!("refused: {reason}"),
        };
        assert_eq!(
            hint(0).as_deref(),
            Some(
                "url holds ${TENANT_ID}, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}); to use the environment variable, write ${env:TENANT_ID}; \
                 header \"Authorization\" holds ${API_KEY}, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}); to use the environment variable, write ${env:API_KEY}; \
                 the environment variable \"EMPTY_KEY\" used in header \"X-Key\" is set but empty"
            )
        );
        assert_eq!(hint(1), None);
    }

    /// VS Code's placeholders are named in the hint with what they are; an input ID or folder
    /// name is quoted only when short and plain, and a `${...}` of no known form never is.
    #[test]
    fn vs_code_placeholders_are_named_in_the_hint() {
        let long = "x".repeat(65);
        let server = remote(json!({
            "url": "https://a.example/${workspaceFolder:my-app}/mcp",
            "headers": {
                "Authorization": format!("Bearer ${{input:{long}}}"),
                "X-Cmd": "${command:pick.key}",
                "X-A": "${sk live key}",
                "X-B": "${env:TOKEN}"
            }
        }));
        assert_eq!(
            server.auth_hint.as_deref(),
            Some(
                "url holds ${workspaceFolder:my-app}, a VS Code predefined variable, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}); write the value itself, or put it in an environment variable and write ${env:NAME}; \
                 header \"Authorization\" holds ${input:…}, a VS Code input (a value VS Code prompts for), which was sent as written: this Pack cannot prompt; put the value in an environment variable and write ${env:NAME}; \
                 header \"X-Cmd\" holds ${command:…}, a VS Code command variable, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}); put the value in an environment variable and write ${env:NAME}"
            )
        );
        let other = remote(json!({
            "url": "https://a.example/mcp",
            "headers": {"X-A": "${sk live key} ${another one}"}
        }));
        assert_eq!(
            other.auth_hint.as_deref(),
            Some(
                "header \"X-A\" holds a ${...} placeholder this Pack does not know, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}); put the value in an environment variable and write ${env:NAME}"
            )
        );
    }

    #[test]
    fn a_url_user_name_alone_is_a_secret() {
        let server = remote(json!({"url": "https://ghp_4f9a8b7c6d5e%2Fx@h.example/mcp"}));
        assert_eq!(server.url.as_str(), "https://h.example/mcp");
        // base64("ghp_4f9a8b7c6d5e/x:")
        assert_eq!(
            server.headers["authorization"].as_bytes(),
            b"Basic Z2hwXzRmOWE4YjdjNmQ1ZS94Og=="
        );
        assert_eq!(
            server.redactor.scrub(
                "u ghp_4f9a8b7c6d5e/x e ghp_4f9a8b7c6d5e%2Fx b Z2hwXzRmOWE4YjdjNmQ1ZS94Og=="
            ),
            "u [redacted] e [redacted] b [redacted]"
        );
    }

    #[test]
    fn header_values_are_scrubbed_percent_encoded_too() {
        let server = remote(json!({
            "url": "https://a.example/mcp",
            "headers": {"Authorization": "Bearer ${env:TOKEN}", "X-Api-Key": "k3y/with spaces+plus"}
        }));
        assert_eq!(
            server.redactor.scrub(
                "auth=Bearer%20s3cr3t-token-value key=k3y%2Fwith%20spaces%2Bplus form=k3y%2Fwith+spaces%2Bplus"
            ),
            "auth=[redacted] key=[redacted] form=[redacted]"
        );
    }

    #[test]
    fn the_host_is_a_secret_when_the_authority_uses_an_env_value() {
        let cases = [
            ("https://${env:HOST}/mcp", true),
            ("http://${env:HOST}:8000/mcp", true),
            ("http://127.0.0.1:${env:PORT}", true),
            ("${env:BASE}/mcp", true),
            ("https://a.example/${env:TOKEN}", false),
            ("https://a.example?k=${env:TOKEN}", false),
            ("https://a.example#${env:TOKEN}", false),
            ("https://a.example/mcp", false),
        ];
        for (written, expected) in cases {
            assert_eq!(authority(written).contains("${env:"), expected, "{written}");
        }
        assert_eq!(
            authority("${env:SCHEME}://a.example/x"),
            "${env:SCHEME}://a.example"
        );
        let env = FakeEnv(HashMap::from([("H", "MCP.Example")]), None);
        let parsed = parse(&json!({"x": {"url": "https://${env:H}/mcp"}}), &env).unwrap();
        let Entry::Remote(server) = &parsed[0].1 else {
            panic!("refused")
        };
        assert_eq!(server.origin, None);
        assert_eq!(
            server.redactor.scrub("MCP.Example mcp.example"),
            "[redacted] [redacted]"
        );
        assert_eq!(
            remote(json!({"url": "https://a.example/${env:TOKEN}"})).origin,
            Some("https://a.example:443".to_string())
        );
    }

    #[test]
    fn a_default_form_fallback_is_a_secret() {
        let server = remote(json!({
            "url": "https://a.example/mcp",
            "headers": {"Authorization": "Bearer ${API_KEY:-sk-live-4f9a8b7c6d5e}"}
        }));
        assert_eq!(
            server.redactor.scrub("fallback sk-live-4f9a8b7c6d5e"),
            "fallback [redacted]"
        );
        assert_eq!(
            server.auth_hint.as_deref(),
            Some(
                "header \"Authorization\" holds ${API_KEY:-…}, which was sent as written (this Pack expands only ${env:NAME} and ${userHome}, without fallback values); to use the environment variable, write ${env:API_KEY}"
            )
        );
    }

    #[test]
    fn user_home_unknown_is_refused() {
        let env = FakeEnv(HashMap::new(), None);
        let parsed = parse(
            &json!({"x": {"url": "https://a.example/${userHome}"}}),
            &env,
        )
        .unwrap();
        assert!(matches!(&parsed[0].1,
            Entry::Refused(r) if r == "url uses ${userHome} but the home directory is unknown"));
    }

    /// An `${env:NAME}` that is set but empty and stands for the url's host turns
    /// `https://${env:HOST}/mcp` into `https:///mcp`, which the URL parser reads as the host
    /// `mcp`: the entry is accepted and its headers (tokens) go to whatever `mcp` resolves to.
    /// An unset NAME refuses the entry; an empty one used as the host should too (naming NAME).
    #[test]
    fn an_empty_env_value_as_the_url_host_is_refused() {
        let env = FakeEnv(HashMap::from([("MCP_HOST", "")]), Some("/home/ada"));
        let parsed = parse(
            &json!({"x": {"url": "https://${env:MCP_HOST}/mcp", "headers": {"Authorization": "Bearer s3cr3t-token-value"}}}),
            &env,
        )
        .unwrap();
        match &parsed[0].1 {
            Entry::Remote(server) => panic!(
                "accepted: the request (with its Authorization header) would go to {}",
                server.url
            ),
            Entry::Refused(reason) | Entry::Unused { reason, .. } => assert_eq!(
                reason,
                "environment variable \"MCP_HOST\" (used in url) is set but empty"
            ),
        }
    }

    /// Claude Code's default-value form `${NAME:-fallback}` is sent as written like `${NAME}`,
    /// but a 401/403 gets no hint for it (README: a `${NAME}` sent as written, Claude Code's
    /// form, earns a hint). The hint must name NAME only, never the fallback (often a pasted key).
    #[test]
    fn claude_code_default_form_earns_a_hint_without_its_fallback() {
        let server = remote(json!({
            "url": "https://a.example/mcp",
            "headers": {"Authorization": "Bearer ${API_KEY:-sk-live-4f9a8b7c6d5e}"}
        }));
        let hint = server.auth_hint.unwrap_or_default();
        assert_eq!(
            (
                hint.contains("${env:API_KEY}"),
                hint.contains("sk-live-4f9a8b7c6d5e"),
                hint.contains("4f9a8b7c6d5e")
            ),
            (true, false, false),
            "hint: {hint:?}"
        );
    }
}
