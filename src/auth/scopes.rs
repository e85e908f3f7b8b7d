//! Which scopes a sign-in asks for (MCP 2025-11-25 "Scope Selection Strategy") and how many
//! new sign-ins a `403 insufficient_scope` may ask for ("Step-Up Authorization Flow").
//!
//! Owns [`choose_scopes`] and the step-up count [`StepUp`].

use super::challenge::Challenge;
use super::{Error, ErrorKind};

/// How many new sign-ins in a row a `403 insufficient_scope` may ask for.
pub(crate) const MAX_STEP_UPS: u32 = 2;

/// The scopes to ask for: the entry's `oauth.scopes`; else the challenge's `scope`; else the
/// resource's `scopes_supported`; else none (MCP 2025-11-25 "Scope Selection Strategy").
pub(crate) fn choose_scopes(
    configured: Option<&[String]>,
    challenge: &Challenge,
    resource_scopes: Option<&[String]>,
) -> Vec<String> {
    if let Some(scopes) = configured {
        return scopes.to_vec();
    }
    let from_challenge = challenge.scopes();
    if !from_challenge.is_empty() {
        return from_challenge;
    }
    resource_scopes.map(<[String]>::to_vec).unwrap_or_default()
}

/// The scope that asks an authorization server for a refresh token (OpenID Connect Core 1.0
/// §11).
pub(crate) const OFFLINE_ACCESS: &str = "offline_access";

/// `scopes` with [`OFFLINE_ACCESS`] added when the authorization server lists it in its
/// `scopes_supported` (`server_scopes`), for a sign-in through the browser that wants a
/// refresh token (MCP 2026-07-28 "Refresh Tokens"); never when the server does not list it.
pub(crate) fn with_offline_access(
    mut scopes: Vec<String>,
    server_scopes: Option<&[String]>,
) -> Vec<String> {
    let offered = server_scopes.is_some_and(|s| s.iter().any(|s| s == OFFLINE_ACCESS));
    if offered && !scopes.iter().any(|s| s == OFFLINE_ACCESS) {
        scopes.push(OFFLINE_ACCESS.to_string());
    }
    scopes
}

/// Counts the new sign-ins `403 insufficient_scope` asked for, per scope: a scope asked for
/// [`MAX_STEP_UPS`] times is not asked for again (a scope the authorization server never
/// grants, or a server that refuses whatever is granted) until the request that was refused for
/// it goes through. A request that passes in between with other scopes (a re-listing, another
/// tool) changes nothing, and a step-up for another scope gets its own count.
#[derive(Debug, Default)]
pub(crate) struct StepUp {
    state: std::sync::Mutex<StepUpState>,
}

#[derive(Debug, Default)]
struct StepUpState {
    /// Scope → step-ups that asked for it since a request refused for it went through.
    asked: std::collections::HashMap<String, u32>,
    /// The requests refused for scopes (their key: the method, and a tool call's name), newest
    /// last, at most [`MAX_REFUSED`].
    refused: Vec<(String, Vec<String>)>,
}

/// How many refused requests a [`StepUp`] remembers.
const MAX_REFUSED: usize = 32;

impl StepUp {
    /// The scopes for the next sign-in after a `403` with `challenge` to the request `key`: the
    /// union of `held` and the challenge's scopes.
    ///
    /// # Errors
    /// [`ErrorKind::Refused`] when every scope the challenge adds was asked for [`MAX_STEP_UPS`]
    /// times already: the server keeps refusing, and signing in again would loop.
    pub(crate) fn next(
        &self,
        held: &[String],
        challenge: &Challenge,
        key: &str,
    ) -> Result<Vec<String>, Error> {
        let challenged = challenge.scopes();
        let mut wanted: Vec<String> = challenged
            .iter()
            .filter(|s| !held.contains(s))
            .cloned()
            .collect();
        if wanted.is_empty() {
            // The server wants scopes already held: count them all the same.
            wanted.clone_from(&challenged);
            if wanted.is_empty() {
                wanted.push(String::new());
            }
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if wanted
            .iter()
            .all(|s| state.asked.get(s).copied().unwrap_or(0) >= MAX_STEP_UPS)
        {
            return Err(Error::new(
                ErrorKind::Refused,
                format!(
                    "the server still answers 403 insufficient_scope after {MAX_STEP_UPS} new \
                     sign-ins with more scopes; giving up"
                ),
            ));
        }
        for scope in &wanted {
            *state.asked.entry(scope.clone()).or_default() += 1;
        }
        if state.refused.len() >= MAX_REFUSED {
            state.refused.remove(0);
        }
        state.refused.push((key.to_string(), wanted));
        let mut scopes = held.to_vec();
        for scope in challenged {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        Ok(scopes)
    }

    /// Whether a request refused for a scope waits to go through: only then does
    /// [`StepUp::succeeded`] need the request's key.
    pub(crate) fn waiting(&self) -> bool {
        !self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refused
            .is_empty()
    }

    /// The request `key` went through: the scopes it was refused for may be asked for again.
    pub(crate) fn succeeded(&self, key: &str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let StepUpState { asked, refused } = &mut *state;
        refused.retain(|(refused_key, scopes)| {
            if refused_key != key {
                return true;
            }
            for scope in scopes {
                asked.remove(scope);
            }
            false
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_access_is_asked_for_only_where_the_server_lists_it() {
        let listed = ["mcp:basic".to_string(), OFFLINE_ACCESS.to_string()];
        let chosen = vec!["mcp:basic".to_string()];
        assert_eq!(
            with_offline_access(chosen.clone(), Some(&listed)),
            ["mcp:basic", OFFLINE_ACCESS]
        );
        assert_eq!(
            with_offline_access(chosen.clone(), Some(&listed[..1])),
            ["mcp:basic"]
        );
        assert_eq!(with_offline_access(chosen, None), ["mcp:basic"]);
        // Once, also when the chosen scopes name it already.
        assert_eq!(
            with_offline_access(listed.to_vec(), Some(&listed)),
            ["mcp:basic", OFFLINE_ACCESS]
        );
    }

    #[test]
    fn scope_choice_order() {
        let challenge = Challenge {
            scope: Some("c1 c2".into()),
            ..Challenge::default()
        };
        let configured = vec!["k".to_string()];
        let supported = vec!["s1".to_string(), "s2".to_string()];
        assert_eq!(
            choose_scopes(Some(&configured), &challenge, Some(&supported)),
            ["k"]
        );
        assert_eq!(
            choose_scopes(None, &challenge, Some(&supported)),
            ["c1", "c2"]
        );
        assert_eq!(
            choose_scopes(None, &Challenge::default(), Some(&supported)),
            ["s1", "s2"]
        );
        assert!(choose_scopes(None, &Challenge::default(), None).is_empty());
    }

    #[test]
    fn step_up_takes_the_union_at_most_twice_per_scope() {
        let step = StepUp::default();
        let challenge = Challenge {
            scope: Some("read write".into()),
            error: Some("insufficient_scope".into()),
            ..Challenge::default()
        };
        let held = vec!["read".to_string(), "other".to_string()];
        assert_eq!(
            step.next(&held, &challenge, "tools/call a").unwrap(),
            ["read", "other", "write"]
        );
        // A re-listing that goes through changes nothing.
        step.succeeded("tools/list");
        assert_eq!(
            step.next(&held, &challenge, "tools/call a").unwrap(),
            ["read", "other", "write"]
        );
        assert_eq!(
            step.next(&held, &challenge, "tools/call a")
                .unwrap_err()
                .message(),
            "the server still answers 403 insufficient_scope after 2 new sign-ins with more \
             scopes; giving up"
        );
        // Another scope has its own count.
        let admin = Challenge {
            scope: Some("admin".into()),
            error: Some("insufficient_scope".into()),
            ..Challenge::default()
        };
        assert_eq!(
            step.next(&held, &admin, "tools/call b").unwrap(),
            ["read", "other", "admin"]
        );
        // Once the refused request goes through, its scope may be asked for again.
        assert!(step.waiting());
        step.succeeded("tools/call a");
        assert!(step.next(&held, &challenge, "tools/call a").is_ok());
    }
}
