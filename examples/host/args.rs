//! The command line (on `lexopt`): the usage, the three command forms, and their errors.
//!
//! Every error is a sentence for `host: <sentence>` followed by the usage, exit 2.

use std::ffi::OsString;
use std::time::Duration;

use lexopt::Arg::{Long, Short, Value};
use lexopt::Parser;
use serde_json::json;

pub(crate) const USAGE: &str = "usage: host [--wait SECONDS] [--json] CONFIG TOOL [ARGUMENTS]
       host [--wait SECONDS] CONFIG --script FILE
       host login [--wait SECONDS] CONFIG NAMESPACE
       host logout CONFIG NAMESPACE
  CONFIG          an mcp.json: {\"mcpServers\": {...}} or {\"servers\": {...}} (comments and
                  trailing commas allowed)
  TOOL            a tool's full name, e.g. mcp/get_dynamic_tools
  ARGUMENTS       the tool's JSON argument object (default {})
  --wait SECONDS  how long after start a call may wait for the servers it needs (default 30)
  --json          print the outcome as one JSON line on stdout (text that is a JSON object or
                  array also decoded, as \"json\")
  --script FILE   run each line of FILE (- for stdin) on one Pack: `TOOL [ARGUMENTS]` prints
                  one JSON line, `sleep SECONDS` waits; blank and # lines are skipped; a bad
                  stdin line prints an invalid_arguments line and the script goes on
  login           sign in to the server NAMESPACE ahead of time: prints the sign-in link (the
                  only stdout line) when one is needed and waits (--wait, default 600) until
                  the server is ready; exit 1 when the sign-in fails or the wait runs out.
                  Without a browser here, open the link elsewhere and paste the address the
                  browser ended on (http://127.0.0.1:.../callback?...) as one line on stdin
  logout          delete the stored sign-in of the server NAMESPACE
exit: 0 every call ok and every server up, 1 a call failed, 2 bad usage, a bad script file line
      or a config problem, 3 every call ok but a server is not up: a config entry was refused, a
      server failed to start (status error), or one was still loading when the wait ran out
      (named on stderr), 130 Ctrl-C";

/// The longest `--wait` or `sleep`, in seconds.
const MAX_SECONDS: f64 = 86_400.0;

/// What to do.
pub(crate) enum Command {
    /// `--help` (or `-h`) anywhere before `--`: the usage on stdout, exit 0.
    Help,
    /// `host [--wait SECONDS] ...`: one call or a script.
    Run(Run),
    /// `host login [--wait SECONDS] CONFIG NAMESPACE`.
    Login {
        wait: Duration,
        config: String,
        namespace: String,
    },
    /// `host logout CONFIG NAMESPACE`.
    Logout { config: String, namespace: String },
}

/// The call form.
pub(crate) struct Run {
    pub(crate) wait: Duration,
    pub(crate) config: String,
    pub(crate) mode: Mode,
}

/// What the call form runs.
pub(crate) enum Mode {
    /// One call.
    Single {
        tool: String,
        arguments: serde_json::Value,
        json: bool,
    },
    /// The lines of a file, or of stdin when `-`.
    Script(String),
}

/// `value` as seconds from 0 to 86400 (fractions allowed), for `--wait` or `sleep` (`what`).
pub(crate) fn seconds(what: &str, value: &str) -> Result<Duration, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && (0.0..=MAX_SECONDS).contains(s))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{what} takes seconds from 0 to 86400, not {value:?}"))
}

/// The command `argv` (without the program name) asks for, or what is wrong with it.
pub(crate) fn parse(argv: Vec<OsString>) -> Result<Command, String> {
    if argv
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--help" || a == "-h")
    {
        return Ok(Command::Help);
    }
    let subcommand = argv.first().and_then(|a| a.to_str());
    match subcommand {
        Some("login") => login(parser(&argv[1..])),
        Some("logout") => logout(parser(&argv[1..])),
        _ => run(parser(&argv)),
    }
}

fn parser(args: &[OsString]) -> Parser {
    let mut parser = Parser::from_args(args.iter().cloned());
    // `-x=y` reads back as written in "takes no option -x=y".
    parser.set_short_equals(false);
    parser
}

fn run(mut parser: Parser) -> Result<Command, String> {
    let mut wait = Duration::from_secs(30);
    let mut json = false;
    let mut script = None;
    let mut positional = Vec::new();
    while let Some(arg) = parser.next().map_err(lexopt_error)? {
        match arg {
            Long("wait") => wait = wait_value(&mut parser)?,
            Long("json") => json = true,
            Long("script") => {
                let file = value(&mut parser, "--script needs a FILE (- for stdin)")?;
                if script.replace(file).is_some() {
                    return Err("--script may be given once".into());
                }
            }
            Value(value) => positional.push(utf8(value)?),
            option => {
                let option = written(name(option), &mut parser);
                return Err(format!("unknown option {option}"));
            }
        }
    }
    let mut positional = positional.into_iter();
    let config = positional.next().ok_or("CONFIG is required")?;
    let mode = match script {
        Some(file) => {
            if let Some(extra) = positional.next() {
                return Err(format!(
                    "unexpected argument {extra:?}: with --script the calls come from FILE"
                ));
            }
            Mode::Script(file)
        }
        None => {
            let tool = positional
                .next()
                .ok_or("TOOL is required (or --script FILE)")?;
            let arguments = match positional.next() {
                None => json!({}),
                Some(text) => serde_json::from_str(&text)
                    .map_err(|e| format!("ARGUMENTS is not JSON: {e}"))?,
            };
            if let Some(extra) = positional.next() {
                return Err(format!("unexpected argument {extra:?}"));
            }
            Mode::Single {
                tool,
                arguments,
                json,
            }
        }
    };
    Ok(Command::Run(Run { wait, config, mode }))
}

fn login(mut parser: Parser) -> Result<Command, String> {
    let mut wait = Duration::from_secs(600);
    let mut positional = Vec::new();
    while let Some(arg) = parser.next().map_err(lexopt_error)? {
        match arg {
            Long("wait") => wait = wait_value(&mut parser)?,
            Value(value) => positional.push(utf8(value)?),
            option => {
                let option = written(name(option), &mut parser);
                return Err(format!(
                    "login takes no option {option}; it takes --wait SECONDS"
                ));
            }
        }
    }
    let [config, namespace] = <[String; 2]>::try_from(positional)
        .map_err(|_| "login needs CONFIG and NAMESPACE".to_string())?;
    Ok(Command::Login {
        wait,
        config,
        namespace,
    })
}

fn logout(mut parser: Parser) -> Result<Command, String> {
    let mut positional = Vec::new();
    while let Some(arg) = parser.next().map_err(lexopt_error)? {
        match arg {
            Value(value) => positional.push(utf8(value)?),
            option => {
                let option = written(name(option), &mut parser);
                return Err(format!("logout takes no option {option}"));
            }
        }
    }
    let [config, namespace] = <[String; 2]>::try_from(positional)
        .map_err(|_| "logout needs CONFIG and NAMESPACE".to_string())?;
    Ok(Command::Logout { config, namespace })
}

/// The value of `--wait`, in seconds.
fn wait_value(parser: &mut Parser) -> Result<Duration, String> {
    seconds(
        "--wait",
        &value(parser, "--wait needs a number of seconds")?,
    )
}

/// The value of the option just read (`--wait 5` or `--wait=5`); `missing` when there is none.
fn value(parser: &mut Parser, missing: &str) -> Result<String, String> {
    match parser.value() {
        Ok(value) => utf8(value),
        Err(lexopt::Error::MissingValue { .. }) => Err(missing.to_string()),
        Err(e) => Err(lexopt_error(e)),
    }
}

/// An option's name with its dashes: `--json`, `-x`.
fn name(option: lexopt::Arg<'_>) -> String {
    match option {
        Long(name) => format!("--{name}"),
        Short(name) => format!("-{name}"),
        Value(value) => value.to_string_lossy().into_owned(),
    }
}

/// The option `name` as it was written, with a value joined to it (`--json=yes`, `-xy`).
fn written(name: String, parser: &mut Parser) -> String {
    match parser.optional_value() {
        Some(joined) if name.starts_with("--") => format!("{name}={}", joined.to_string_lossy()),
        Some(joined) => format!("{name}{}", joined.to_string_lossy()),
        None => name,
    }
}

/// What `lexopt` found wrong, in the words of the other errors.
fn lexopt_error(error: lexopt::Error) -> String {
    match error {
        // A value joined to an option that takes none: `--json=yes`.
        lexopt::Error::UnexpectedValue { option, value } => {
            format!("unknown option {option}={}", value.to_string_lossy())
        }
        lexopt::Error::NonUnicodeValue(value) => format!("{value:?} is not UTF-8"),
        other => other.to_string(),
    }
}

fn utf8(value: OsString) -> Result<String, String> {
    value
        .into_string()
        .map_err(|value| format!("{value:?} is not UTF-8"))
}
