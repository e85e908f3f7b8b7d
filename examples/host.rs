//! A minimal runvil Host for scripts and for trying real `mcp.json` files.
//!
//! ```text
//! cargo run --example host -- [--wait SECONDS] [--json] CONFIG TOOL [ARGUMENTS]
//! cargo run --example host -- [--wait SECONDS] CONFIG --script FILE
//! ```
//!
//! CONFIG is an `mcp.json`: `{"mcpServers": {...}}`, or VS Code's `{"servers": {...}}`; comments
//! and trailing commas are allowed (JSONC), nothing looser, and no key twice in one object; a
//! leading byte order mark is skipped. TOOL is a tool's full name, e.g.
//! `mcp/get_dynamic_tools`; ARGUMENTS is its JSON argument object (default `{}`).
//!
//! Before a call the host waits for what the call needs, at most `--wait` seconds (default 30)
//! after the Pack was built: for a call naming a namespace, until that server is `ready`; for the
//! whole listing, until no server is `loading`. A namespace whose config entry was refused is
//! never waited for. When the wait runs out, stderr names the servers still not ready.
//!
//! One call prints the tool's text on stdout (exit 0) or `kind: message` on stderr (exit 1);
//! with `--json` it prints one JSON line on stdout instead: `{"ok":true,"text":"..."}` or
//! `{"ok":false,"kind":"...","message":"..."}`. `--script` runs every line of FILE (`-` for
//! stdin, read as it arrives) on one Pack: `TOOL [ARGUMENTS]` prints one such JSON line,
//! `sleep SECONDS` waits; blank lines and lines starting with `#` are skipped. The Pack is dropped
//! after the last line; the exit code is 0 when every call was ok, 1 when any failed. Bad usage,
//! a bad script line and every config problem exit 2; a closed stdout stops the host with exit 1
//! and no message. Logs go to stderr under `RUST_LOG`, in
//! colour only on a terminal.
//!
//! ```text
//! cargo run --example host -- login [--wait SECONDS] CONFIG NAMESPACE
//! cargo run --example host -- logout CONFIG NAMESPACE
//! ```
//!
//! `login` starts only that server and, when it needs a sign-in, prints the link as the only
//! line on stdout, then waits (default 600 s) for the browser's redirect: exit 0 once the server
//! is `ready` (also at once when stored credentials work), 1 as soon as signing in fails, or
//! when the wait runs out (naming the last reason; a start error such as a server briefly down
//! is waited through). `logout` deletes that server's stored credentials (README, "Signing
//! in"). `--help` anywhere before `--` prints the usage, both subcommands included.

use std::collections::HashSet;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use runvil_plugin::{Pack, Packs, Services, TOKIO_RUNTIME, ToolError};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::time::Instant;

const USAGE: &str = "usage: host [--wait SECONDS] [--json] CONFIG TOOL [ARGUMENTS]
       host [--wait SECONDS] CONFIG --script FILE
       host login [--wait SECONDS] CONFIG NAMESPACE
       host logout CONFIG NAMESPACE
  CONFIG          an mcp.json: {\"mcpServers\": {...}} or {\"servers\": {...}} (comments and
                  trailing commas allowed)
  TOOL            a tool's full name, e.g. mcp/get_dynamic_tools
  ARGUMENTS       the tool's JSON argument object (default {})
  --wait SECONDS  how long after start a call may wait for the servers it needs (default 30)
  --json          print the outcome as one JSON line on stdout
  --script FILE   run each line of FILE (- for stdin) on one Pack: `TOOL [ARGUMENTS]` prints
                  one JSON line, `sleep SECONDS` waits; blank and # lines are skipped
  login           sign in to the server NAMESPACE ahead of time: prints the sign-in link (the
                  only stdout line) when one is needed and waits (--wait, default 600) until
                  the server is ready; exit 1 when the sign-in fails or the wait runs out
  logout          delete the stored sign-in of the server NAMESPACE
exit: 0 every call ok, 1 a call failed, 2 bad usage, a bad script line or a config problem";

/// The longest `--wait` or `sleep`, in seconds.
const MAX_SECONDS: f64 = 86_400.0;

/// How often the listing is polled while waiting.
const POLL: Duration = Duration::from_millis(20);

/// Why the command line was not accepted.
enum Usage {
    /// `--help`: print the usage on stdout and exit 0.
    Help,
    /// Anything else wrong: the message, then the usage, on stderr; exit 2.
    Bad(String),
}

/// What to run.
enum Mode {
    /// One call.
    Single {
        tool: String,
        arguments: Value,
        json: bool,
    },
    /// The lines of a file, or of stdin when `-`.
    Script(String),
}

struct Args {
    wait: Duration,
    config: String,
    mode: Mode,
}

/// One script line that does something.
#[derive(Debug, PartialEq)]
enum Step {
    Call { tool: String, arguments: Value },
    Sleep(Duration),
}

fn seconds(what: &str, value: &str) -> Result<Duration, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && (0.0..=MAX_SECONDS).contains(s))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{what} takes seconds from 0 to 86400, not {value:?}"))
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, Usage> {
    let bad = |m: String| Usage::Bad(m);
    let mut wait = Duration::from_secs(30);
    let mut json = false;
    let mut script = None;
    let mut positional = Vec::new();
    let mut options_done = false;
    while let Some(arg) = args.next() {
        if options_done {
            positional.push(arg);
            continue;
        }
        match arg.as_str() {
            "--" => options_done = true,
            "--wait" => {
                let value = args
                    .next()
                    .ok_or_else(|| bad("--wait needs a number of seconds".into()))?;
                wait = seconds("--wait", &value).map_err(bad)?;
            }
            "--json" => json = true,
            "--script" => {
                let file = args
                    .next()
                    .ok_or_else(|| bad("--script needs a FILE (- for stdin)".into()))?;
                if script.replace(file).is_some() {
                    return Err(bad("--script may be given once".into()));
                }
            }
            "-h" | "--help" => return Err(Usage::Help),
            flag if flag.starts_with("--") => return Err(bad(format!("unknown option {flag}"))),
            _ => positional.push(arg),
        }
    }
    let mut positional = positional.into_iter();
    let Some(config) = positional.next() else {
        return Err(bad("CONFIG is required".into()));
    };
    let mode = match script {
        Some(file) => {
            if let Some(extra) = positional.next() {
                return Err(bad(format!(
                    "unexpected argument {extra:?}: with --script the calls come from FILE"
                )));
            }
            Mode::Script(file)
        }
        None => {
            let Some(tool) = positional.next() else {
                return Err(bad("TOOL is required (or --script FILE)".into()));
            };
            let arguments = match positional.next() {
                None => json!({}),
                Some(text) => serde_json::from_str(&text)
                    .map_err(|e| bad(format!("ARGUMENTS is not JSON: {e}")))?,
            };
            if let Some(extra) = positional.next() {
                return Err(bad(format!("unexpected argument {extra:?}")));
            }
            Mode::Single {
                tool,
                arguments,
                json,
            }
        }
    };
    Ok(Args { wait, config, mode })
}

/// One script line: `None` for a blank or `#` line.
fn parse_line(line: &str) -> Result<Option<Step>, String> {
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

/// The servers object of an `mcp.json` (JSONC allowed): its `mcpServers`, or VS Code's `servers`.
fn read_config(path: &str) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let file = parse_jsonc(without_bom(&text)).map_err(|e| format!("{path} {e}"))?;
    let Value::Object(file) = file else {
        return Err(format!("{path} is not a JSON object"));
    };
    match (file.get("mcpServers"), file.get("servers")) {
        (Some(_), Some(_)) => Err(format!(
            "{path} has both \"mcpServers\" and \"servers\"; keep one"
        )),
        (Some(servers), None) | (None, Some(servers)) => Ok(servers.clone()),
        (None, None) => Err(format!(
            "{path} has neither an \"mcpServers\" nor a \"servers\" key"
        )),
    }
}

/// JSONC as VS Code writes it: JSON plus comments and trailing commas, nothing looser (no
/// single quotes, no missing commas), and no object naming a key twice. The comments and trailing
/// commas are found by `jsonc-parser` and blanked out in place, then `serde_json` reads the rest
/// strictly, so an error's line and column are the file's. The error reads after the file name.
fn parse_jsonc(text: &str) -> Result<Value, String> {
    use jsonc_parser::tokens::Token;
    let not_json = |e: &dyn std::fmt::Display| {
        format!("is not JSON (comments and trailing commas are allowed): {e}")
    };
    let options = jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
    };
    let collect = jsonc_parser::CollectOptions {
        comments: jsonc_parser::CommentCollectionStrategy::AsTokens,
        tokens: true,
    };
    let parsed = jsonc_parser::parse_to_ast(text, &collect, &options).map_err(|e| not_json(&e))?;
    let tokens = parsed.tokens.unwrap_or_default();
    let mut strict = text.as_bytes().to_vec();
    let mut blank = |range: &jsonc_parser::common::Range| {
        for byte in &mut strict[range.start..range.end] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut meaningful = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::CommentLine(_) | Token::CommentBlock(_)))
        .peekable();
    while let Some(token) = meaningful.next() {
        let trailing = matches!(token.token, Token::Comma)
            && meaningful
                .peek()
                .is_some_and(|next| matches!(next.token, Token::CloseBrace | Token::CloseBracket));
        if trailing {
            blank(&token.range);
        }
    }
    for comment in tokens
        .iter()
        .filter(|t| matches!(t.token, Token::CommentLine(_) | Token::CommentBlock(_)))
    {
        blank(&comment.range);
    }
    // Every byte replaced was a whole token's, and by ASCII: still UTF-8.
    let strict = String::from_utf8(strict).map_err(|e| not_json(&e))?;
    if strict.trim().is_empty() {
        return Err("is empty".to_string());
    }
    match serde_json::from_str::<Unique>(&strict) {
        Ok(Unique(value)) => Ok(value),
        Err(e) if e.classify() == serde_json::error::Category::Data => Err(format!("{e}")),
        Err(e) => Err(not_json(&e)),
    }
}

/// A JSON value whose objects name each key once; a repeated key is an error naming it.
struct Unique(Value);

impl<'de> serde::Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "names the key {} twice in one object; keep one",
                    Value::String(key)
                )));
            }
            let Unique(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// `text` without a leading UTF-8 byte order mark (Windows editors write one).
fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Every step of a script file, or what is wrong with its first bad line.
fn read_script(path: &str) -> Result<Vec<Step>, String> {
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

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("RUST_LOG"))
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let help = argv
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--help" || a == "-h");
    if help {
        return exit_code(emit(USAGE).is_ok());
    }
    match argv.first().map(String::as_str) {
        Some("login") => return sign_in::login(&argv[1..]),
        Some("logout") => return sign_in::logout(&argv[1..]),
        _ => {}
    }
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(Usage::Help) => {
            return exit_code(emit(USAGE).is_ok());
        }
        Err(Usage::Bad(message)) => {
            eprintln!("host: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let servers = match read_config(&args.config) {
        Ok(servers) => servers,
        Err(message) => {
            eprintln!("host: {message}");
            return ExitCode::from(2);
        }
    };
    // A script file is read whole first: a bad line stops the run before any call.
    let script = match &args.mode {
        Mode::Script(path) if path != "-" => match read_script(path) {
            Ok(steps) => Some(steps),
            Err(message) => {
                eprintln!("host: {message}");
                return ExitCode::from(2);
            }
        },
        _ => None,
    };
    // One thread: the server tasks run whenever the host waits, and the first listing (taken
    // right after construction) shows every entry refused by its config before any I/O ran.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("host: cannot start a Tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(interruptible(run(args, servers, script)))
}

async fn run(args: Args, servers: Value, script: Option<Vec<Step>>) -> ExitCode {
    let mut packs = Packs::new();
    plugin_mcp::install(&mut packs, &json!({ "mcp": servers }));
    let mut services = Services::new();
    services.insert(&TOKIO_RUNTIME, tokio::runtime::Handle::current());
    let Some(spec) = packs.get("runvil/mcp") else {
        eprintln!("host: the plugin inserted no runvil/mcp Pack");
        return ExitCode::from(2);
    };
    let pack = match spec.construct(&spec.default_id, &services) {
        Ok(pack) => pack,
        Err(unavailable) => {
            eprintln!("host: {}: {unavailable}", args.config);
            return ExitCode::from(2);
        }
    };
    let mut waiter = Waiter::new(&*pack, &spec.default_id, args.wait).await;
    pack.ready().await;

    let code = match args.mode {
        Mode::Single {
            tool,
            arguments,
            json,
        } => {
            waiter.wait(&*pack, &tool, &arguments).await;
            let outcome = pack.call(&tool, arguments).await;
            match (json, outcome) {
                (true, outcome) => exit_code(emit(&json_line(&outcome)).is_ok() && outcome.is_ok()),
                (false, Ok(text)) => exit_code(emit(&text).is_ok()),
                (false, Err(error)) => {
                    eprintln!("{}: {}", error.kind, error.message);
                    ExitCode::from(1)
                }
            }
        }
        Mode::Script(_) => match script {
            Some(steps) => {
                let mut all_ok = true;
                for step in steps {
                    match run_step(&*pack, &mut waiter, step).await {
                        Ok(ok) => all_ok &= ok,
                        Err(Closed) => return stop(pack).await,
                    }
                }
                exit_code(all_ok)
            }
            None => match run_stdin(&*pack, &mut waiter).await {
                Ok(code) => code,
                Err(Closed) => return stop(pack).await,
            },
        },
    };
    drop(pack);
    settle().await;
    code
}

/// Stdout was closed (`host ... | head -n 1`): drops the Pack and exits 1 without another word.
async fn stop(pack: Box<dyn Pack>) -> ExitCode {
    drop(pack);
    settle().await;
    ExitCode::from(1)
}

/// After the Pack's drop: waits until its background work (the cancels, then each session's
/// `DELETE`, each bounded by 5 s) has ended, at most 11 s, so the process does not end it
/// first.
async fn settle() {
    let handle = tokio::runtime::Handle::current();
    let deadline = Instant::now() + Duration::from_secs(11);
    while handle.metrics().num_alive_tasks() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs `work` until it ends or Ctrl-C. On Ctrl-C — also during the cleanup wait after the
/// last call — `work` (and the Pack it owns) is dropped, its cleanup waited for ([`settle`];
/// a second Ctrl-C ends the wait), and the exit code is 130 (128 + SIGINT).
async fn interruptible(work: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    let finished = {
        tokio::pin!(work);
        tokio::select! {
            code = &mut work => Some(code),
            _ = tokio::signal::ctrl_c() => None,
        }
    };
    match finished {
        Some(code) => code,
        None => {
            tokio::select! {
                () = settle() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            ExitCode::from(130)
        }
    }
}

/// The reader of stdout went away.
struct Closed;

/// Writes `line` and a newline to stdout; `Err` when stdout is closed or failing.
fn emit(line: &str) -> Result<(), Closed> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|_| Closed)
}

/// Runs the lines of stdin as they arrive; a bad line stops the script with exit 2.
async fn run_stdin(pack: &dyn Pack, waiter: &mut Waiter) -> Result<ExitCode, Closed> {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut all_ok = true;
    let mut number = 0;
    loop {
        number += 1;
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(exit_code(all_ok)),
            Err(e) => {
                eprintln!("host: cannot read the script from stdin: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        let line = if number == 1 {
            without_bom(&line)
        } else {
            &line
        };
        match parse_line(line) {
            Ok(Some(step)) => all_ok &= run_step(pack, waiter, step).await?,
            Ok(None) => {}
            Err(e) => {
                eprintln!("host: stdin line {number}: {e}");
                return Ok(ExitCode::from(2));
            }
        }
    }
}

/// Runs one step; `Ok(false)` when it was a call that failed, `Err` when stdout is closed.
async fn run_step(pack: &dyn Pack, waiter: &mut Waiter, step: Step) -> Result<bool, Closed> {
    match step {
        Step::Sleep(duration) => {
            tokio::time::sleep(duration).await;
            Ok(true)
        }
        Step::Call { tool, arguments } => {
            waiter.wait(pack, &tool, &arguments).await;
            let outcome = pack.call(&tool, arguments).await;
            emit(&json_line(&outcome))?;
            Ok(outcome.is_ok())
        }
    }
}

fn exit_code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `{"ok":true,"text":...}` or `{"ok":false,"kind":...,"message":...}`.
fn json_line(outcome: &Result<String, ToolError>) -> String {
    match outcome {
        Ok(text) => json!({"ok": true, "text": text}),
        Err(error) => json!({"ok": false, "kind": error.kind.as_str(), "message": error.message}),
    }
    .to_string()
}

/// Waits, before each call, for what that call needs, until one shared deadline.
struct Waiter {
    /// `<id>/get_dynamic_tools`.
    listing_tool: String,
    /// `<id>/`, the prefix of the Pack's tools.
    prefix: String,
    deadline: Instant,
    /// The namespaces whose config entry was refused: `error` before any I/O, and for good.
    refused: HashSet<String>,
}

/// What a call needs before it is sent.
enum Need {
    Nothing,
    /// No server is `loading`.
    Settled,
    /// This namespace is `ready`.
    Ready(String),
}

impl Waiter {
    async fn new(pack: &dyn Pack, id: &str, wait: Duration) -> Waiter {
        let mut waiter = Waiter {
            listing_tool: format!("{id}/get_dynamic_tools"),
            prefix: format!("{id}/"),
            deadline: Instant::now() + wait,
            refused: HashSet::new(),
        };
        waiter.refused = waiter
            .servers(pack)
            .await
            .into_iter()
            .filter(|s| s.status == "error")
            .map(|s| s.namespace)
            .collect();
        waiter
    }

    fn need(&self, tool: &str, arguments: &Value) -> Need {
        let namespace = arguments.get("namespace").and_then(Value::as_str);
        match (tool.strip_prefix(&self.prefix), namespace) {
            (Some("get_dynamic_tools" | "call_dynamic_tool"), Some(namespace)) => {
                Need::Ready(namespace.to_string())
            }
            (Some("get_dynamic_tools"), None) => Need::Settled,
            _ => Need::Nothing,
        }
    }

    /// Every server's namespace, status and reason, from the listing.
    async fn servers(&self, pack: &dyn Pack) -> Vec<ServerState> {
        let Ok(text) = pack.call(&self.listing_tool, json!({})).await else {
            return Vec::new();
        };
        let listing: Value = serde_json::from_str(&text).unwrap_or_default();
        let servers = listing["servers"].as_array().cloned().unwrap_or_default();
        servers
            .iter()
            .map(|s| ServerState {
                namespace: s["namespace"].as_str().unwrap_or_default().to_string(),
                status: s["status"].as_str().unwrap_or_default().to_string(),
                reason: s["reason"].as_str().map(str::to_string),
            })
            .collect()
    }

    async fn wait(&mut self, pack: &dyn Pack, tool: &str, arguments: &Value) {
        let need = self.need(tool, arguments);
        if matches!(need, Need::Nothing) {
            return;
        }
        loop {
            let pending: Vec<ServerState> = self
                .servers(pack)
                .await
                .into_iter()
                .filter(|s| match &need {
                    Need::Nothing => false,
                    Need::Settled => s.status == "loading",
                    Need::Ready(namespace) => {
                        s.namespace == *namespace
                            && s.status != "ready"
                            && !self.refused.contains(namespace)
                    }
                })
                .collect();
            if pending.is_empty() {
                return;
            }
            if Instant::now() >= self.deadline {
                let names: Vec<String> = pending.iter().map(ServerState::describe).collect();
                eprintln!("host: the wait ran out; not ready: {}", names.join(", "));
                return;
            }
            tokio::time::sleep(POLL.min(self.deadline - Instant::now())).await;
        }
    }
}

struct ServerState {
    namespace: String,
    status: String,
    reason: Option<String>,
}

impl ServerState {
    /// `docs (loading)` or `docs (error: <reason>)`.
    fn describe(&self) -> String {
        match &self.reason {
            Some(reason) => format!("{} ({}: {reason})", self.namespace, self.status),
            None => format!("{} ({})", self.namespace, self.status),
        }
    }
}

/// `host login` and `host logout` (README, "Signing in").
mod sign_in {
    use std::io::Write;
    use std::process::ExitCode;
    use std::time::Duration;

    use runvil_plugin::{Packs, Services, TOKIO_RUNTIME};
    use serde_json::{Value, json};
    use sha2::{Digest, Sha256};

    /// How the Pack's reason names a failed sign-in.
    const SIGN_IN_FAILED: &str = "signing in failed: ";

    /// The entry of `namespace` in the config file at `path`.
    fn entry(path: &str, namespace: &str) -> Result<Value, String> {
        let servers = super::read_config(path)?;
        servers
            .get(namespace)
            .cloned()
            .ok_or_else(|| format!("{path} has no server {namespace:?}"))
    }

    fn usage(message: &str) -> ExitCode {
        eprintln!("host: {message}");
        eprintln!("{}", super::USAGE);
        ExitCode::from(2)
    }

    /// `host login [--wait SECONDS] CONFIG NAMESPACE`.
    pub(super) fn login(args: &[String]) -> ExitCode {
        let mut wait = Duration::from_secs(600);
        let mut positional = Vec::new();
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            match arg.as_str() {
                "--wait" => {
                    let Some(value) = rest.next() else {
                        return usage("--wait needs a number of seconds");
                    };
                    wait = match super::seconds("--wait", value) {
                        Ok(wait) => wait,
                        Err(message) => return usage(&message),
                    };
                }
                option if option.starts_with('-') => {
                    return usage(&format!(
                        "login takes no option {option}; it takes --wait SECONDS"
                    ));
                }
                _ => positional.push(arg),
            }
        }
        let [config, namespace] = positional[..] else {
            return usage("login needs CONFIG and NAMESPACE");
        };
        let entry = match entry(config, namespace) {
            Ok(entry) => entry,
            Err(message) => return usage(&message),
        };
        // One thread, as for calls: the first listing, taken right after construction, shows
        // an entry its config refused before any I/O ran.
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(e) => {
                eprintln!("host: cannot start a Tokio runtime: {e}");
                return ExitCode::from(2);
            }
        };
        let store = store_file(&entry).map(|file| {
            let before = std::fs::read(&file).ok();
            (file, before)
        });
        runtime.block_on(super::interruptible(wait_ready(
            namespace, entry, wait, store,
        )))
    }

    /// Starts only `namespace` and waits for it to be `ready`, printing each sign-in link. An
    /// entry its config refused fails at once; a sign-in that ends ready but could not be
    /// saved at `store` (its file in the credential store) fails too: the next run would ask
    /// again.
    async fn wait_ready(
        namespace: &str,
        entry: Value,
        wait: Duration,
        store: Result<(std::path::PathBuf, Option<Vec<u8>>), String>,
    ) -> ExitCode {
        let mut packs = Packs::new();
        plugin_mcp::install(&mut packs, &json!({"mcp": {namespace: entry}}));
        let mut services = Services::new();
        services.insert(&TOKIO_RUNTIME, tokio::runtime::Handle::current());
        let Some(spec) = packs.get("runvil/mcp") else {
            eprintln!("host: the plugin inserted no runvil/mcp Pack");
            return ExitCode::from(2);
        };
        let pack = match spec.construct(&spec.default_id, &services) {
            Ok(pack) => pack,
            Err(unavailable) => {
                eprintln!("unavailable: the mcp Pack could not be built: {unavailable}");
                return ExitCode::from(1);
            }
        };
        let deadline = tokio::time::Instant::now() + wait;
        let first = listing(&*pack, namespace).await;
        if first["status"] == "error" {
            let reason = first["reason"].as_str().unwrap_or("refused by its config");
            eprintln!("host: login failed: server {namespace:?} cannot start: {reason}");
            drop(pack);
            super::settle().await;
            return ExitCode::from(1);
        }
        let mut shown: Option<String> = None;
        // The last reason the server was not ready, for when the wait runs out.
        let mut last: Option<String> = None;
        let outcome = loop {
            let listing = listing(&*pack, namespace).await;
            let reason = listing["reason"].as_str().unwrap_or("");
            match (listing["status"].as_str(), listing["signInUrl"].as_str()) {
                (Some("ready"), _) => break Ok(()),
                (Some("error"), Some(link)) => match &shown {
                    None => {
                        println!("{link}");
                        let _ = std::io::stdout().flush();
                        shown = Some(link.to_string());
                    }
                    // The link is the only line on stdout: a new one means the first failed.
                    Some(first) if first != link => {
                        break Err(last.take().unwrap_or_else(|| {
                            "the sign-in did not complete and a new link was made".to_string()
                        }));
                    }
                    Some(_) => {}
                },
                // The sign-in failed (or could not start), or the server refuses with no way to
                // sign in (a 401 or 403 and no OAuth): the reason is final for a login.
                (Some("error"), None)
                    if reason.contains(SIGN_IN_FAILED)
                        || reason.starts_with("HTTP 401")
                        || reason.starts_with("HTTP 403") =>
                {
                    break Err(reason.to_string());
                }
                // Anything else (the server briefly down, still starting): the start is
                // retried, so keep waiting.
                (Some(_), None) if !reason.is_empty() => last = Some(reason.to_string()),
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                let why = last.map(|r| format!("; last: {r}")).unwrap_or_default();
                break Err(format!(
                    "server {namespace:?} was not ready within {} seconds{why}",
                    wait.as_secs_f64()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        drop(pack);
        super::settle().await;
        // A sign-in made in this run must have reached the store, or "ahead of time" did not
        // happen.
        let outcome = match (outcome, &shown, store) {
            (Ok(()), Some(_), Ok((file, before)))
                if std::fs::read(&file)
                    .ok()
                    .is_none_or(|now| Some(now) == before) =>
            {
                Err(format!(
                    "signed in, but the sign-in could not be saved in {} (see the log with \
                 RUST_LOG=warn); the next run asks again",
                    file.parent()
                        .map(|d| d.display().to_string())
                        .unwrap_or_default()
                ))
            }
            (outcome, _, _) => outcome,
        };
        match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(reason) => {
                eprintln!("host: login failed: {reason}");
                ExitCode::from(1)
            }
        }
    }

    /// The namespace form of the listing; `Null` when it cannot be had.
    async fn listing(pack: &dyn runvil_plugin::Pack, namespace: &str) -> Value {
        pack.call("mcp/get_dynamic_tools", json!({"namespace": namespace}))
            .await
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .unwrap_or_default()
    }

    /// `host logout CONFIG NAMESPACE`: deletes the server's file in the credential store
    /// (`$PLUGIN_MCP_OAUTH_DIR`, else `<data dir>/plugin-mcp/oauth`), named by the first 16
    /// bytes of SHA-256 over the server URL, a NUL and the client (`oauth.clientId`, else
    /// `oauth.clientMetadataUrl`, else empty), in hex, plus `.json`.
    pub(super) fn logout(args: &[String]) -> ExitCode {
        if let Some(option) = args.iter().find(|a| a.starts_with('-')) {
            return usage(&format!("logout takes no option {option}"));
        }
        let [config, namespace] = args else {
            return usage("logout needs CONFIG and NAMESPACE");
        };
        let entry = match entry(config, namespace) {
            Ok(entry) => entry,
            Err(message) => return usage(&message),
        };
        let file = match store_file(&entry) {
            Ok(file) => file,
            Err(message) => {
                eprintln!("host: logout: {message}");
                return ExitCode::from(1);
            }
        };
        match std::fs::remove_file(file) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!(
                    "host: the stored credentials could not be deleted: {}",
                    e.kind()
                );
                ExitCode::from(1)
            }
        }
    }

    /// The entry's file in the credential store (`$PLUGIN_MCP_OAUTH_DIR`, else
    /// `<data dir>/plugin-mcp/oauth`), named by the first 16 bytes of SHA-256 over the server
    /// URL, a NUL and the client (`oauth.clientId`, else `oauth.clientMetadataUrl`, else
    /// empty), in hex, plus `.json`.
    fn store_file(entry: &Value) -> Result<std::path::PathBuf, String> {
        let Some(written) = entry["url"].as_str() else {
            return Err("the server has no \"url\"".to_string());
        };
        let mut url = substitute(written).and_then(|u| {
            reqwest::Url::parse(&u).map_err(|_| "\"url\" is not a valid URL".to_string())
        })?;
        let _ = url.set_username("");
        let _ = url.set_password(None);
        let oauth = &entry["oauth"];
        // As the Pack keys it: a non-empty client id, else the metadata URL as parsed.
        let client_id = oauth["clientId"]
            .as_str()
            .map(substitute)
            .transpose()?
            .filter(|id| !id.is_empty());
        let client = match client_id {
            Some(id) => id,
            None => match oauth["clientMetadataUrl"]
                .as_str()
                .map(substitute)
                .transpose()?
            {
                Some(written) => reqwest::Url::parse(&written)
                    .map(|u| u.to_string())
                    .unwrap_or(written),
                None => String::new(),
            },
        };
        let dir = match std::env::var_os("PLUGIN_MCP_OAUTH_DIR").filter(|d| !d.is_empty()) {
            Some(dir) => std::path::PathBuf::from(dir),
            None => dirs::data_dir()
                .ok_or("no data directory is known; set PLUGIN_MCP_OAUTH_DIR")?
                .join("plugin-mcp")
                .join("oauth"),
        };
        let mut hash = Sha256::new();
        hash.update(url.as_str().as_bytes());
        hash.update([0]);
        hash.update(client.as_bytes());
        let name: String = hash.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(dir.join(format!("{name}.json")))
    }

    /// `${env:NAME}` replaced by the variable's value, as the Pack does.
    fn substitute(written: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = written;
        while let Some(start) = rest.find("${env:") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 6..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                return Ok(out);
            };
            let name = &after[..end];
            let value = std::env::var(name)
                .map_err(|_| format!("environment variable {name:?} is not set"))?;
            out.push_str(&value);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}
