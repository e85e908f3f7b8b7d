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
//! A call naming a namespace also stops waiting once that server's start was refused at
//! connect twice in a row (the listing's `refusedStarts`: nothing listens there) and at least
//! 5 s have passed (a server started just before the host is still booting), or failed in
//! a way that will not fix itself (the listing's `lasting`: a 404 at the url, a 401 with no
//! sign-in), saying so on stderr.
//!
//! One call prints the tool's text on stdout (exit 0) or `kind: message` on stderr (exit 1);
//! with `--json` it prints one JSON line on stdout instead: `{"ok":true,"text":"..."}` (plus
//! `"json"`, the text decoded, when the text is a JSON object or array) or
//! `{"ok":false,"kind":"...","message":"..."}`. `--script` runs every line of FILE (`-` for
//! stdin, read as it arrives) on one Pack: `TOOL [ARGUMENTS]` or a JSON object
//! `{"tool":..,"arguments":..,"id":..}` prints one such JSON line carrying `"line": N` (the
//! script line it answers) and the line's `"id"`, `sleep SECONDS` waits; blank lines and lines
//! starting with `#` are skipped. A bad stdin line prints
//! `{"line":N,"ok":false,"kind":"invalid_arguments","message":"line N: ..."}` and the script goes
//! on. The Pack is dropped after the last line; the exit code is 0 when every call was ok, 1 when
//! any failed, 3 when every call was ok but a server a call named is not up (a listing without
//! a namespace names every server): its config entry was refused or its start failed (`error`
//! at the end), or it was still `loading` when the wait ran out (named on stderr). Bad usage, a bad line of a script file (checked whole first) and every config
//! problem exit 2; a closed stdout stops the host with exit 1 and no message. Logs go to stderr under `RUST_LOG`, in
//! colour only on a terminal; at `RUST_LOG=plugin_mcp=debug` (or `info`) each request's span is
//! printed when it closes, with its attributes (`mcp.method.name`, `gen_ai.tool.name`, ...).
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
//! is waited through). `logout` has the Pack delete that server's stored sign-in and prints
//! whether there was one. Both ask the Pack about the store through its Host-only requests
//! (`mcp/sign_in_state`, `mcp/logout`; README, "Signing in"), so they key it exactly as the
//! Pack does. `--help` anywhere before `--` prints the usage, both subcommands included.
//!
//! Modules: `args` (the command line, on `lexopt`), `config` (CONFIG as JSONC), `script`
//! (script lines), `calls` (the call form and its waits), `sign_in` (`login`, `logout`).

mod args;
mod calls;
mod config;
mod script;
mod sign_in;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use runvil_plugin::{Pack, Packs, Services, TOKIO_RUNTIME, Unavailable};
use serde_json::{Value, json};
use tokio::time::Instant;

use args::{Command, Mode, USAGE};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("RUST_LOG"))
        // Each request's span (README "Traces") is printed when it closes, with its attributes.
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let command = match args::parse(std::env::args_os().skip(1).collect()) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("host: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let run = match command {
        Command::Help => return exit_code(emit(USAGE).is_ok()),
        Command::Login {
            wait,
            config,
            namespace,
        } => return sign_in::login(wait, &config, &namespace),
        Command::Logout { config, namespace } => return sign_in::logout(&config, &namespace),
        Command::Run(run) => run,
    };
    // The file's text is the Pack's config: the Pack reads it as an mcp.json (JSONC allowed).
    let servers = match config::read_text(&run.config) {
        Ok(text) => Value::String(text),
        Err(message) => {
            eprintln!("host: {message}");
            return ExitCode::from(2);
        }
    };
    // A script file is read whole first: a bad line stops the run before any call.
    let script = match &run.mode {
        Mode::Script(path) if path != "-" => match script::read_script(path) {
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
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    runtime.block_on(interruptible(calls::run(run, servers, script)))
}

/// A one-thread Tokio runtime; exit 2 when there is none.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("host: cannot start a Tokio runtime: {e}");
            ExitCode::from(2)
        })
}

/// The Pack `runvil/mcp` with `servers` (an mcp.json's text, or an `mcpServers` object) as its
/// config, serving only the namespace `only` when one is given (the plugin config's `mcpOnly`),
/// constructed as a Host does it (`install`, then `construct` under the default id with
/// `runtime` as its [`TOKIO_RUNTIME`]), and that id.
fn construct(
    servers: Value,
    only: Option<&str>,
    runtime: tokio::runtime::Handle,
) -> Result<(Box<dyn Pack>, String), Unavailable> {
    let mut packs = Packs::new();
    let mut config = json!({ "mcp": servers });
    if let Some(namespace) = only {
        config["mcpOnly"] = json!([namespace]);
    }
    plugin_mcp::install(&mut packs, &config);
    let mut services = Services::new();
    services.insert(&TOKIO_RUNTIME, runtime);
    let spec = packs
        .get("runvil/mcp")
        .ok_or_else(|| Unavailable::new("the plugin inserted no runvil/mcp Pack"))?;
    let pack = spec.construct(&spec.default_id, &services)?;
    Ok((pack, spec.default_id.clone()))
}

/// Drops `pack` and awaits its cleanup (the cancels, then each session's `DELETE`) through
/// the contract's `Pack::closed`, at most 11 s, so the process does not end it first.
pub(crate) async fn close(pack: Box<dyn Pack>) {
    let closed = pack.closed();
    drop(pack);
    closed.await;
}

/// After a Ctrl-C dropped the work that owned the Pack (so no `Pack::closed` future was taken):
/// waits until the runtime's tasks — here only the Pack's — have ended, at most 11 s.
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

fn exit_code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
