//! The Pack's Host-only requests: answered by [`Pack::call`](runvil_plugin::Pack::call) like a
//! tool, but never listed in `Pack::tools`, so a model is never offered them (README "Signing
//! in"). They let a Host sign in ahead of time and sign out with the Pack's own config rules
//! (`${env:NAME}`, `${userHome}`) and the Pack's own store keys, instead of a copy of them.
//!
//! - `<id>/logout` `{"namespace": "docs"}` deletes that server's file in the credential store
//!   and answers `{"namespace":"docs","deleted":true}` (`false` when nothing was stored, or the
//!   entry configures its own `Authorization` header and so never signs in).
//! - `<id>/sign_in_state` `{"namespace": "docs"}` answers
//!   `{"namespace":"docs","signedIn":true,"stored":true,"storeDir":"/…/plugin-mcp/oauth"}`:
//!   whether the server's connection holds a grant, whether that grant came from the store or
//!   was saved there, and the store's directory (`null` when none is known).
//!
//! - `<id>/sign_in_redirect` `{"namespace": "docs", "address": "http://127.0.0.1:…/callback?…"}`
//!   hands the address the browser ended on (sign-in from another machine, where the redirect
//!   to `127.0.0.1` cannot reach this one) to the server's waiting sign-in, checked as its
//!   loopback listener checks a redirect: answers `{"namespace":"docs","accepted":true}` once
//!   the sign-in took it (the listing then shows the outcome); an address that is not the
//!   awaited redirect, or no sign-in waiting, is `invalid_arguments` with the reason (which
//!   never quotes the address).
//!
//! An unknown namespace is `not_found`; a namespace whose config entry was refused, or a store
//! that cannot be used, is `unavailable` — but `logout` of a refused entry whose `url` and
//! `oauth` can still be read (`"disabled": true`, an unset `${env:NAME}` in a header) deletes
//! its grant, keyed as when it signed in.

use std::sync::Arc;

use runvil_plugin::{ToolError, ToolErrorKind, Value};
use serde_json::json;

use super::{arguments, quoted, server, string_arg};
use crate::http::{Connection, Logout};
use crate::server::{Server, Status};

/// `<id>/logout`.
pub(super) const LOGOUT: &str = "logout";
/// `<id>/sign_in_state`.
pub(super) const SIGN_IN_STATE: &str = "sign_in_state";
/// `<id>/sign_in_redirect`.
pub(super) const SIGN_IN_REDIRECT: &str = "sign_in_redirect";

/// `<id>/logout`: deletes the named server's stored sign-in, also of a refused entry that
/// still keys one (`Server::unused_sign_in`).
pub(super) fn logout(servers: &[Arc<Server>], args: &Value) -> Result<String, ToolError> {
    let unused = arguments(args, &["namespace"])
        .ok()
        .and_then(|a| string_arg(a, "namespace").ok().flatten())
        .and_then(|namespace| server(servers, namespace).ok())
        .filter(|s| s.connection.is_none())
        .and_then(|s| Some((&*s.namespace, s.unused_sign_in.as_ref()?)));
    let outcome = match unused {
        Some((namespace, key)) => crate::auth::store::Store::from_env()
            .and_then(|store| store.delete(key))
            .map(|deleted| (namespace, deleted.then_some(Logout::Deleted))),
        None => {
            let (namespace, connection) = connection(servers, args, &["namespace"])?;
            connection.logout().map(|l| (namespace, l))
        }
    };
    let (namespace, deleted) = match outcome {
        Ok((namespace, logout)) => (namespace, matches!(logout, Some(Logout::Deleted))),
        Err(e) => {
            // Only reached once the namespace was found.
            let namespace = args.get("namespace").and_then(Value::as_str).unwrap_or("");
            return Err(ToolError::new(
                ToolErrorKind::Unavailable,
                format!(
                    "the sign-in of server {} could not be deleted: {}",
                    quoted(namespace),
                    e.message()
                ),
            ));
        }
    };
    Ok(json!({"namespace": namespace, "deleted": deleted}).to_string())
}

/// `<id>/sign_in_redirect`: the pasted redirect address, for the named server's sign-in.
///
/// # Cancel safety
/// Cancel safe (see `Connection::paste_redirect`).
pub(super) async fn sign_in_redirect(
    servers: &[Arc<Server>],
    args: &Value,
) -> Result<String, ToolError> {
    let (namespace, connection) = connection(servers, args, &["namespace", "address"])?;
    let address = args.get("address").and_then(Value::as_str).ok_or_else(|| {
        ToolError::new(
            ToolErrorKind::InvalidArguments,
            "\"address\" is required: the whole address the browser ended on after the \
                 sign-in link, as a string",
        )
    })?;
    let address = secrecy::SecretString::from(address.to_string());
    match connection.paste_redirect(address).await {
        Some(Ok(())) => Ok(json!({"namespace": namespace, "accepted": true}).to_string()),
        Some(Err(e)) => Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "server {} did not take the pasted address: {}",
                quoted(namespace),
                e.message()
            ),
        )),
        None => Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "server {} never signs in: its entry configures an Authorization header",
                quoted(namespace)
            ),
        )),
    }
}

/// `<id>/sign_in_state`: where the named server's sign-in stands.
pub(super) fn sign_in_state(servers: &[Arc<Server>], args: &Value) -> Result<String, ToolError> {
    let (namespace, connection) = connection(servers, args, &["namespace"])?;
    let state = connection.sign_in_state();
    let dir = state
        .as_ref()
        .and_then(|s| s.store_dir.as_ref())
        .map(|d| d.to_string_lossy().into_owned());
    Ok(json!({
        "namespace": namespace,
        "signedIn": state.as_ref().is_some_and(|s| s.signed_in),
        "stored": state.as_ref().is_some_and(|s| s.stored),
        "storeDir": dir,
    })
    .to_string())
}

/// The namespace the arguments name, and its server's connection; an argument not in
/// `accepted` is refused.
fn connection<'s>(
    servers: &'s [Arc<Server>],
    args: &Value,
    accepted: &[&str],
) -> Result<(&'s str, &'s Connection), ToolError> {
    let args = arguments(args, accepted)?;
    let namespace = string_arg(args, "namespace")?.ok_or_else(|| {
        ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "\"namespace\" is required, e.g. {{\"namespace\":{}}}",
                quoted(servers.first().map_or("docs", |s| &s.namespace))
            ),
        )
    })?;
    let server = server(servers, namespace)?;
    match &server.connection {
        Some(connection) => Ok((&server.namespace, connection)),
        None => {
            let reason = match server.status() {
                Status::Error { reason, .. } => reason.to_string(),
                _ => "it has no connection".to_string(),
            };
            Err(ToolError::new(
                ToolErrorKind::Unavailable,
                format!(
                    "the config entry of server {} was refused, so its sign-in cannot be found: {reason}",
                    quoted(namespace)
                ),
            ))
        }
    }
}
