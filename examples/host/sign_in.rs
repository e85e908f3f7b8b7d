//! `host login` and `host logout` (README, "Signing in"). Everything about the store — which
//! file belongs to an entry, whether a grant reached it — is the Pack's to say: the host asks
//! it through the Host-only requests `<id>/sign_in_state` and `<id>/logout`.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use runvil_plugin::Pack;
use serde_json::{Value, json};

/// How the Pack's reason names a failed sign-in.
const SIGN_IN_FAILED: &str = "signing in failed: ";

/// The text of the config file at `config`, and the one-thread runtime a command runs on; the
/// exit code when either is missing (2).
fn prepare(config: &str) -> Result<(Value, tokio::runtime::Runtime), ExitCode> {
    let text = crate::config::read_text(config).map_err(|message| {
        eprintln!("host: {message}");
        ExitCode::from(2)
    })?;
    Ok((Value::String(text), crate::runtime()?))
}

/// The Pack built from the config file's `text` (read by the Pack, as for calls), serving only
/// `namespace`, on `runtime`: exit code 2 and the Pack's reason on stderr when it cannot be
/// built (a config text the Pack cannot read: the reason names the place), or when the file
/// has no server `namespace`.
fn construct(
    config: &str,
    namespace: &str,
    text: Value,
    runtime: tokio::runtime::Handle,
) -> Result<(Box<dyn Pack>, String), ExitCode> {
    crate::construct(text, Some(namespace), runtime).map_err(|unavailable| {
        eprintln!("host: {config}: {unavailable}");
        ExitCode::from(2)
    })
}

/// Exit code 2 for a config file without the server `namespace` (the Pack answered
/// `not_found` for it): a config problem, so no usage text.
fn no_server(config: &str, namespace: &str) -> ExitCode {
    eprintln!("host: {config} has no server {namespace:?}");
    ExitCode::from(2)
}

/// `host login [--wait SECONDS] CONFIG NAMESPACE`.
pub(crate) fn login(wait: Duration, config: &str, namespace: &str) -> ExitCode {
    // One thread, as for calls: the first listing, taken right after construction, shows an
    // entry its config refused before any I/O ran.
    let (text, runtime) = match prepare(config) {
        Ok(prepared) => prepared,
        Err(code) => return code,
    };
    runtime.block_on(crate::interruptible(wait_ready(
        config, namespace, text, wait,
    )))
}

/// Starts only `namespace` and waits for it to be `ready`, printing each sign-in link. An entry
/// its config refused fails at once; a sign-in made in this run that ends ready but whose grant
/// the Pack could not save fails too: the next run would ask again.
async fn wait_ready(config: &str, namespace: &str, text: Value, wait: Duration) -> ExitCode {
    let (pack, id) = match construct(config, namespace, text, tokio::runtime::Handle::current()) {
        Ok(built) => built,
        Err(code) => return code,
    };
    let deadline = tokio::time::Instant::now() + wait;
    let first = pack
        .call(
            &format!("{id}/get_dynamic_tools"),
            json!({ "namespace": namespace }),
        )
        .await;
    if first
        .as_ref()
        .is_err_and(|e| e.kind == runvil_plugin::ToolErrorKind::NotFound)
    {
        crate::close(pack).await;
        return no_server(config, namespace);
    }
    let first: Value = first
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    if first["status"] == "error" {
        let reason = first["reason"].as_str().unwrap_or("refused by its config");
        eprintln!("host: login failed: server {namespace:?} cannot start: {reason}");
        crate::close(pack).await;
        return ExitCode::from(1);
    }
    let mut shown: Option<String> = None;
    let mut unheard = crate::calls::Unheard::new();
    // The last reason the server was not ready, for when the wait runs out.
    let mut last: Option<String> = None;
    // Lines of stdin, read once a link is shown: the address the browser ended on, pasted by
    // a user whose browser runs on another machine.
    let mut pasted: Option<tokio::sync::mpsc::UnboundedReceiver<String>> = None;
    let outcome = loop {
        let listing = listing(&*pack, &id, namespace).await;
        let reason = listing["reason"].as_str().unwrap_or("");
        match (listing["status"].as_str(), listing["signInUrl"].as_str()) {
            (Some("ready"), _) => break Ok(()),
            (Some("error"), Some(link)) => match &shown {
                None => {
                    println!("{link}");
                    let _ = std::io::stdout().flush();
                    if std::io::stdin().is_terminal() {
                        eprintln!(
                            "host: open the link above; if the browser runs on another machine, \
                             paste the address it ends on here and press Enter"
                        );
                    }
                    shown = Some(link.to_string());
                    pasted = Some(stdin_lines());
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
            // sign in (a 401 or 403 and no OAuth), or its start failed in a way that will not
            // fix itself (the listing's `lasting`: a 404 at the url, no MCP endpoint): the
            // reason is final for a login.
            (Some("error"), None)
                if listing["lasting"] == true
                    || reason.contains(SIGN_IN_FAILED)
                    || reason.starts_with("HTTP 401")
                    || reason.starts_with("HTTP 403") =>
            {
                break Err(reason.to_string());
            }
            // Nothing listens at the url, as a call would judge it: a login waits no longer.
            (Some("error"), None)
                if unheard.in_vain(
                    namespace,
                    listing["refusedStarts"].as_u64().unwrap_or(0),
                    listing["retryInSeconds"].as_u64(),
                ) =>
            {
                break Err(format!(
                    "server {namespace:?} is not listening: its start was refused {} times in a row ({reason})",
                    listing["refusedStarts"]
                ));
            }
            // Anything else (the server briefly down, still starting): the start is retried,
            // so keep waiting.
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
        let line = async {
            match pasted.as_mut() {
                Some(lines) => lines.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            line = line => match line {
                Some(address) => paste(&*pack, &id, namespace, &address).await,
                // stdin ended: the loopback redirect is still awaited.
                None => pasted = None,
            },
        }
    };
    // A sign-in made in this run must have reached the store, or "ahead of time" did not
    // happen.
    let outcome = match (outcome, &shown) {
        (Ok(()), Some(_)) => saved(&*pack, &id, namespace).await,
        (outcome, _) => outcome,
    };
    crate::close(pack).await;
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(reason) => {
            eprintln!("host: login failed: {reason}");
            ExitCode::from(1)
        }
    }
}

/// The non-empty lines of stdin, trimmed, read on a thread of their own (a blocking read never
/// holds up the runtime; the thread ends with the process or at end of input).
fn stdin_lines() -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (send, lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            let line = line.trim();
            if !line.is_empty() && send.send(line.to_string()).is_err() {
                break;
            }
        }
    });
    lines
}

/// Hands a pasted address to the Pack (`<id>/sign_in_redirect`) and says on stderr what it
/// made of it; the wait for `ready` goes on either way.
async fn paste(pack: &dyn Pack, id: &str, namespace: &str, address: &str) {
    let answer = pack
        .call(
            &format!("{id}/sign_in_redirect"),
            json!({ "namespace": namespace, "address": address }),
        )
        .await;
    match answer {
        Ok(_) => eprintln!("host: the address was taken; finishing the sign-in"),
        Err(e) => eprintln!("host: {}", e.message),
    }
}

/// `Ok` when the Pack says the grant `namespace` holds is in the store (`<id>/sign_in_state`).
async fn saved(pack: &dyn Pack, id: &str, namespace: &str) -> Result<(), String> {
    let state = pack
        .call(
            &format!("{id}/sign_in_state"),
            json!({ "namespace": namespace }),
        )
        .await
        .map_err(|e| e.message)?;
    let state: Value = serde_json::from_str(&state).unwrap_or_default();
    match (state["stored"].as_bool(), state["storeDir"].as_str()) {
        (Some(true), _) => Ok(()),
        (_, Some(dir)) => Err(format!(
            "signed in, but the sign-in could not be saved in {dir} (see the log with \
             RUST_LOG=warn); the next run asks again"
        )),
        (_, None) => Err(
            "signed in, but no store is known to save the sign-in in (set PLUGIN_MCP_OAUTH_DIR); \
             the next run asks again"
                .to_string(),
        ),
    }
}

/// The namespace form of the listing; `Null` when it cannot be had.
async fn listing(pack: &dyn Pack, id: &str, namespace: &str) -> Value {
    pack.call(
        &format!("{id}/get_dynamic_tools"),
        json!({ "namespace": namespace }),
    )
    .await
    .ok()
    .and_then(|text| serde_json::from_str::<Value>(&text).ok())
    .unwrap_or_default()
}

/// `host logout CONFIG NAMESPACE`: the Pack deletes the server's file in the credential store
/// (`<id>/logout`), keyed with the Pack's own substitution and store key; stdout says whether
/// there was one.
pub(crate) fn logout(config: &str, namespace: &str) -> ExitCode {
    // The Pack is built on a runtime that nothing drives: its server task never runs, so a
    // logout contacts no server (and no refresh can write the grant back). The request itself
    // only deletes a file; it is polled here, in the runtime's context.
    let (text, runtime) = match prepare(config) {
        Ok(prepared) => prepared,
        Err(code) => return code,
    };
    let _context = runtime.enter();
    let (pack, id) = match construct(config, namespace, text, runtime.handle().clone()) {
        Ok(built) => built,
        Err(code) => return code,
    };
    let answer = futures_executor::block_on(
        pack.call(&format!("{id}/logout"), json!({ "namespace": namespace })),
    );
    drop(pack);
    let deleted = match answer {
        Ok(text) => serde_json::from_str::<Value>(&text).unwrap_or_default()["deleted"] == true,
        Err(error) if error.kind == runvil_plugin::ToolErrorKind::NotFound => {
            return no_server(config, namespace);
        }
        Err(error) => {
            eprintln!("host: logout failed: {}", error.message);
            return ExitCode::from(1);
        }
    };
    let line = if deleted {
        format!("deleted the stored sign-in of {namespace:?}")
    } else {
        format!("no sign-in of {namespace:?} was stored")
    };
    crate::exit_code(crate::emit(&line).is_ok())
}
