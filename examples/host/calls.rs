//! The call form: one call, or a script of calls on one Pack, each after waiting for what it
//! needs.

use std::collections::HashSet;
use std::process::ExitCode;
use std::time::Duration;

use runvil_plugin::{Pack, Settled, ToolError};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::time::Instant;

use crate::args::{Mode, Run};
use crate::config::without_bom;
use crate::script::{Step, parse_line};
use crate::{Closed, emit, exit_code};

/// How often the listing is polled while waiting.
const POLL: Duration = Duration::from_millis(20);

/// After how many starts in a row refused at connect (the listing's `refusedStarts`) a call
/// stops waiting for its server (once [`REFUSED_PATIENCE`] has passed too).
const REFUSED_ENOUGH: u64 = 2;

/// How long, from the Pack's construction, a call keeps waiting for a server whose starts are
/// refused at connect: a server started just before the host (a container, a Python server
/// importing for 2-3 s) is refused until it listens. Once it has passed, the call still waits
/// for the next start when that is due within it again (the listing's `retryInSeconds`), and
/// stops when that start is refused too. Still far under the default `--wait`.
const REFUSED_PATIENCE: Duration = Duration::from_secs(5);

/// Runs `args` on the Pack built from `config` (the config file's text); `script` holds the
/// steps of a script file (read whole before the first call), `None` for stdin.
pub(crate) async fn run(args: Run, config: Value, script: Option<Vec<(usize, Step)>>) -> ExitCode {
    let (pack, id) = match crate::construct(config, None, tokio::runtime::Handle::current()) {
        Ok(built) => built,
        Err(unavailable) => {
            eprintln!("host: {}: {unavailable}", args.config);
            return ExitCode::from(2);
        }
    };
    let mut waiter = Waiter::new(&*pack, &id, args.wait, &args.config).await;
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
                (true, outcome) => {
                    exit_code(emit(&json_line(&outcome, None, None)).is_ok() && outcome.is_ok())
                }
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
                for (number, step) in steps {
                    match run_step(&*pack, &mut waiter, number, step).await {
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
    // Honest exit codes: calls that answered still exit 3 when the entry of a server they named
    // was refused, its start failed, or it was still loading when the wait ran out; a listing
    // of every server names them all.
    let code = if code == ExitCode::SUCCESS {
        waiter.verdict(&*pack).await
    } else {
        code
    };
    // This Pack's cleanup, awaited through the contract (`Pack::closed`).
    crate::close(pack).await;
    code
}

/// Stdout was closed (`host ... | head -n 1`): drops the Pack and exits 1 without another word.
async fn stop(pack: Box<dyn Pack>) -> ExitCode {
    // This Pack's cleanup, awaited through the contract (`Pack::closed`).
    crate::close(pack).await;
    ExitCode::from(1)
}

/// Runs the lines of stdin as they arrive. A bad line prints an `invalid_arguments` JSON line
/// (`"line N: ..."`) and counts as a failed call; the script goes on.
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
            Ok(Some(step)) => all_ok &= run_step(pack, waiter, number, step).await?,
            Ok(None) => {}
            Err(e) => {
                let message = format!("line {number}: {e}");
                emit(
                    &json!({"line": number, "ok": false, "kind": "invalid_arguments", "message": message})
                        .to_string(),
                )?;
                all_ok = false;
            }
        }
    }
}

/// Runs one step, script line `number`; `Ok(false)` when it was a call that failed, `Err` when
/// stdout is closed.
async fn run_step(
    pack: &dyn Pack,
    waiter: &mut Waiter,
    number: usize,
    step: Step,
) -> Result<bool, Closed> {
    match step {
        Step::Sleep(duration) => {
            tokio::time::sleep(duration).await;
            Ok(true)
        }
        Step::Call {
            tool,
            arguments,
            id,
        } => {
            waiter.wait(pack, &tool, &arguments).await;
            let outcome = pack.call(&tool, arguments).await;
            emit(&json_line(&outcome, Some(number), id))?;
            Ok(outcome.is_ok())
        }
    }
}

/// `{"ok":true,"text":...}` or `{"ok":false,"kind":...,"message":...}`, after the script line
/// `number` it answers (`"line"`) and the `"id"` that line gave, when there are. When the text is
/// itself a JSON object or array (a listing, for one), `"json"` carries it decoded beside
/// `"text"`.
fn json_line(
    outcome: &Result<String, ToolError>,
    number: Option<usize>,
    id: Option<Value>,
) -> String {
    let mut line = serde_json::Map::new();
    if let Some(number) = number {
        line.insert("line".into(), json!(number));
    }
    if let Some(id) = id {
        line.insert("id".into(), id);
    }
    let answer = match outcome {
        Ok(text) => match serde_json::from_str::<Value>(text) {
            Ok(decoded @ (Value::Object(_) | Value::Array(_))) => {
                json!({"ok": true, "text": text, "json": decoded})
            }
            _ => json!({"ok": true, "text": text}),
        },
        Err(error) => json!({"ok": false, "kind": error.kind.as_str(), "message": error.message}),
    };
    if let Value::Object(answer) = answer {
        line.extend(answer);
    }
    Value::Object(line).to_string()
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
    /// The CONFIG argument, for the `host login` a sign-in message suggests.
    config: String,
    /// The servers the calls so far named, whose state decides the exit code.
    named: Named,
    /// When to stop waiting for a server nothing listens for.
    unheard: Unheard,
}

/// When to stop waiting for a server whose starts are refused at connect (nothing listens at
/// its url): a call and `host login` alike.
pub(crate) struct Unheard {
    /// When the Pack was built: a refused server is waited for [`REFUSED_PATIENCE`] from here.
    started: Instant,
    /// Per refused server, its `refusedStarts` when first seen after [`REFUSED_PATIENCE`].
    seen: std::collections::HashMap<String, u64>,
}

impl Unheard {
    pub(crate) fn new() -> Unheard {
        Unheard {
            started: Instant::now(),
            seen: std::collections::HashMap::new(),
        }
    }

    /// Whether waiting for `namespace` is likely in vain: its start was refused at connect
    /// [`REFUSED_ENOUGH`] times in a row (the listing's `refusedStarts`), the server had
    /// [`REFUSED_PATIENCE`] to come up, and a start since was refused too (or the next,
    /// `retryInSeconds` away, is far off).
    pub(crate) fn in_vain(
        &mut self,
        namespace: &str,
        refused_starts: u64,
        retry_in_seconds: Option<u64>,
    ) -> bool {
        if Instant::now() < self.started + REFUSED_PATIENCE || refused_starts < REFUSED_ENOUGH {
            return false;
        }
        let first = *self
            .seen
            .entry(namespace.to_string())
            .or_insert(refused_starts);
        refused_starts > first || retry_in_seconds.is_some_and(|r| r > REFUSED_PATIENCE.as_secs())
    }
}

/// The servers the calls of a run named ([`Waiter::verdict`]).
enum Named {
    /// These namespaces (none yet: every call so far named no server).
    These(HashSet<String>),
    /// Every server: a call listed them all.
    All,
}

impl Named {
    fn add(&mut self, need: &Need) {
        match (&mut *self, need) {
            (Named::All, _) | (_, Need::Nothing) => {}
            (Named::These(_), Need::Settled) => *self = Named::All,
            (Named::These(names), Need::Ready(namespace)) => {
                names.insert(namespace.clone());
            }
        }
    }

    fn contains(&self, namespace: &str) -> bool {
        match self {
            Named::All => true,
            Named::These(names) => names.contains(namespace),
        }
    }
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
    async fn new(pack: &dyn Pack, id: &str, wait: Duration, config: &str) -> Waiter {
        let mut waiter = Waiter {
            listing_tool: format!("{id}/get_dynamic_tools"),
            prefix: format!("{id}/"),
            deadline: Instant::now() + wait,
            refused: HashSet::new(),
            config: config.to_string(),
            named: Named::These(HashSet::new()),
            unheard: Unheard::new(),
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
                refused_starts: s["refusedStarts"].as_u64().unwrap_or(0),
                retry_in_seconds: s["retryInSeconds"].as_u64(),
                lasting: s["lasting"] == true,
                sign_in_url: s["signInUrl"].as_str().map(str::to_string),
            })
            .collect()
    }

    /// The exit code of a run whose calls all answered: 0 when every server the calls named
    /// is up (every server, after a listing of them all), else 3, naming on stderr the ones
    /// that are not: in `error` now (a refused entry, or a failed start), or still `loading`
    /// once the wait ran out. Before the deadline a server still `loading` has no verdict yet
    /// (no call waited for it). A server no call named does not count: its trouble is not the
    /// call's.
    async fn verdict(&self, pack: &dyn Pack) -> ExitCode {
        let waited_out = Instant::now() >= self.deadline;
        let down: Vec<String> = self
            .servers(pack)
            .await
            .iter()
            .filter(|s| self.named.contains(&s.namespace))
            .filter(|s| s.status == "error" || (waited_out && s.status == "loading"))
            .map(ServerState::describe)
            .collect();
        if down.is_empty() {
            return ExitCode::SUCCESS;
        }
        eprintln!("host: exit 3: not every server is up: {}", down.join(", "));
        ExitCode::from(3)
    }

    async fn wait(&mut self, pack: &dyn Pack, tool: &str, arguments: &Value) {
        let need = self.need(tool, arguments);
        self.named.add(&need);
        match need {
            Need::Nothing => return,
            // The whole listing: awaited through the contract (`Pack::settled`), no polling.
            Need::Settled => {
                let left = self.deadline.saturating_duration_since(Instant::now());
                if let Settled::Pending(names) = pack.settled(left).await {
                    let names: Vec<String> =
                        names.iter().map(|n| format!("{n} (loading)")).collect();
                    eprintln!("host: the wait ran out; not ready: {}", names.join(", "));
                }
                return;
            }
            Need::Ready(_) => {}
        }
        loop {
            let pending: Vec<ServerState> = self
                .servers(pack)
                .await
                .into_iter()
                .filter(|s| match &need {
                    Need::Nothing | Need::Settled => false,
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
            // Nothing listens at the url ([`Unheard::in_vain`]).
            let unheard = &mut self.unheard;
            if let Some(down) = pending
                .iter()
                .find(|s| unheard.in_vain(&s.namespace, s.refused_starts, s.retry_in_seconds))
            {
                eprintln!(
                    "host: not waiting for {}: its start was refused {} times in a row ({})",
                    down.namespace,
                    down.refused_starts,
                    down.reason.as_deref().unwrap_or_default()
                );
                return;
            }
            // Its start failed in a way that will not fix itself (the listing's `lasting`: a
            // 404 at the url, a 401 with no sign-in): waiting is in vain until the config or
            // the server changes, and the reason says what to change.
            if let Some(down) = pending.iter().find(|s| s.lasting) {
                eprintln!(
                    "host: not waiting for {}: its start failed in a way that will not fix itself ({})",
                    down.namespace,
                    down.reason.as_deref().unwrap_or_default()
                );
                return;
            }
            // It waits for a sign-in: no wait ends that but the user, so say how at once.
            if let Some((down, link)) = pending
                .iter()
                .find_map(|s| s.sign_in_url.as_deref().map(|link| (s, link)))
            {
                eprintln!(
                    "host: not waiting for {0}: it needs a sign-in; open {link} in a browser, or \
                     sign in first with `host login {1} {0}`",
                    down.namespace, self.config
                );
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
    /// The listing's `refusedStarts`: starts in a row whose connection was refused (0: none).
    refused_starts: u64,
    /// The listing's `retryInSeconds`: when its next start comes.
    retry_in_seconds: Option<u64>,
    /// The listing's `lasting`: the last start failed in a way that will not fix itself.
    lasting: bool,
    /// The listing's `signInUrl`: the link of a sign-in the server waits for.
    sign_in_url: Option<String>,
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
