//! The in-flight table: which requests may be running on the server, and on which session.
//!
//! A request enters the table when its id is handed out, before any of its code runs, and leaves it
//! when the server answered it, refused it (an HTTP error status, an expired session), or never got
//! it (a failed connect). While it is on the wire its entry names the session it went out on — the
//! resend after a new `initialize` included — so a `notifications/cancelled` for it goes to that
//! session with that session's headers. Taking an entry out is the one way to decide to cancel, so
//! a request is cancelled at most once, however many parties (the dropped call, its deadline, the
//! Pack's shutdown) want it cancelled.
//!
//! "On the wire" starts when the POST is handed to the HTTP client and ends as soon as an error
//! status arrives (before its body is read). A request dropped just after it was handed over may
//! be cancelled although its bytes never left: the client cannot tell, and MCP 2025-11-25
//! (cancellation) lets a receiver ignore a cancel for a request it does not know.

use std::collections::HashMap;
use std::sync::Arc;

use super::session::Session;

/// Where a request stands.
enum Flight {
    /// Not on the wire: waiting for a session (a new `initialize`).
    Waiting,
    /// Sent on this session under JSON-RPC id `wire_id` (the handle's own id, or the new one of
    /// a re-issue); the server may be running it.
    Sent { session: Arc<Session>, wire_id: u64 },
}

/// The table; guarded by the connection's mutex.
#[derive(Default)]
pub(super) struct InFlight {
    entries: HashMap<u64, Flight>,
    /// Set when the connection shuts down: no request enters any more.
    closed: bool,
}

impl InFlight {
    /// Enters request `id`, not yet sent, as its id is handed out (so a cancel that comes
    /// before the request's own code runs finds it). Nothing once the connection is closed.
    pub(super) fn reserve(&mut self, id: u64) {
        if !self.closed {
            self.entries.insert(id, Flight::Waiting);
        }
    }

    /// Whether request `id` may go ahead: its entry is still there (not cancelled, not closed).
    pub(super) fn begin(&self, id: u64) -> bool {
        self.entries.contains_key(&id)
    }

    /// Records that `id` goes out on `session` as JSON-RPC id `wire_id`. `false` when the entry
    /// is gone (the request was cancelled or the connection closed): then it must not be sent.
    pub(super) fn sent(&mut self, id: u64, wire_id: u64, session: &Arc<Session>) -> bool {
        match self.entries.get_mut(&id) {
            Some(flight) => {
                *flight = Flight::Sent {
                    session: Arc::clone(session),
                    wire_id,
                };
                true
            }
            None => false,
        }
    }

    /// Records that `id` is off the wire again: refused (an error status, an expired session;
    /// a new session may be coming) or its connect refused (it is sent again).
    pub(super) fn waiting(&mut self, id: u64) {
        if let Some(flight) = self.entries.get_mut(&id) {
            *flight = Flight::Waiting;
        }
    }

    /// Removes `id` if it was never sent (still waiting): a call whose lookup failed. A request
    /// that went out stays, for whoever ends it (its own code, a cancel, the shutdown).
    pub(super) fn finish_unsent(&mut self, id: u64) {
        if matches!(self.entries.get(&id), Some(Flight::Waiting)) {
            self.entries.remove(&id);
        }
    }

    /// Removes `id`: it is over, nothing to cancel.
    pub(super) fn finish(&mut self, id: u64) {
        self.entries.remove(&id);
    }

    /// Removes `id`; returns the session to cancel it on, and the JSON-RPC id it went out
    /// under there, when it may be running there.
    pub(super) fn take(&mut self, id: u64) -> Option<(Arc<Session>, u64)> {
        match self.entries.remove(&id)? {
            Flight::Sent { session, wire_id } => Some((session, wire_id)),
            Flight::Waiting => None,
        }
    }

    /// Removes every request sent on one of `sessions` (all requests when `close`, which also
    /// refuses new ones); returns those to cancel, by the JSON-RPC id each went out under.
    pub(super) fn drain(
        &mut self,
        sessions: &[Arc<Session>],
        close: bool,
    ) -> Vec<(u64, Arc<Session>)> {
        if close {
            self.closed = true;
        }
        let mut out = Vec::new();
        self.entries.retain(|_, flight| {
            let on_drained = match flight {
                Flight::Sent { session, .. } => sessions.iter().any(|s| Arc::ptr_eq(s, session)),
                Flight::Waiting => false,
            };
            if !(close || on_drained) {
                return true;
            }
            if let Flight::Sent { session, wire_id } = flight {
                out.push((*wire_id, Arc::clone(session)));
            }
            false
        });
        out.sort_by_key(|(id, _)| *id);
        out
    }
}
