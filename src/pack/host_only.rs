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
//! An unknown namespace is `not_found`; a namespace whose config entry was refused, or a store
//! that cannot be used, is `unavailable`.

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

/// `<id>/logout`: deletes the named server's stored sign-in.
pub(super) fn logout(servers: &[Arc<Server>], args: &Value) -> Result<String, ToolError> {
    let (namespace, connection) = connection(servers, args)?;
    let deleted = match connection.logout() {
        Ok(Some(Logout::Deleted)) => true,
        Ok(Some(Logout::NothingStored) | None) => false,
        Err(e) => {
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

/// `<id>/sign_in_state`: where the named server's sign-in stands.
pub(super) fn sign_in_state(servers: &[Arc<Server>], args: &Value) -> Result<String, ToolError> {
    let (namespace, connection) = connection(servers, args)?;
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

/// The namespace the arguments name, and its server's connection.
fn connection<'s>(
    servers: &'s [Arc<Server>],
    args: &Value,
) -> Result<(&'s str, &'s Connection), ToolError> {
    let args = arguments(args, &["namespace"])?;
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
