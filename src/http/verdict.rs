//! The one verdict on an answer (docs/connection.md "Verdicts"): what an error a server gave
//! (or a failure on the way to it) means for the request, its session and its resends,
//! decided once, on types, by `super::judge`, and matched on by every consumer — the call
//! path, the listing's pages, the standalone stream, the ping, a resumption, the close and
//! the Pack's resend. Also the protocol [`Era`] and the [`EraSignal`] a verdict may carry.
//!
//! Two tables read a verdict, and nothing else decides from a raw code or status:
//! - [`Verdict::settles`]: what it does to the session (or modern route) it came on — forget
//!   it, set it aside, ask the era again, or keep it;
//! - [`next`]: what the exchange of one request does next — send again on the same route,
//!   wait out a rate limit and resend, renew the session and resend, re-issue a lost request,
//!   re-route after a probe, or answer; every request path reads it (a call, a listing's
//!   pages, the renewal a request waits for, the `ping`).
//!
//! Beside them: [`Words`], the one rule on what the server's "no valid session" words mean
//! (for the request path and the change stream alike), and [`NamedWait`], how a rate limit not
//! waited out is named.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::limits;

/// A protocol era (MCP 2026-07-28, basic/versioning "Terminology").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// `2025-11-25` and earlier: an `initialize` handshake, maybe a session.
    Legacy,
    /// `2026-07-28`: stateless, every request declares its version in `_meta`.
    Modern,
}

/// A sign, in an answer to a request, that the server speaks the other era (MCP 2026-07-28,
/// basic/versioning "Backward Compatibility"): a restart onto another version, unless a probe
/// finds the server still in the same era (then it was the server's own answer, such as a
/// 2025-era tool's own `-32021`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EraSignal {
    /// A legacy session's request answered with this modern JSON-RPC error code (`-32020`,
    /// `-32021`, `-32022`), in any status.
    ModernError(i64),
    /// A modern request refused with this HTTP status (`400`, `404`, `405`, `406`) and no
    /// JSON-RPC error answering it: what a legacy server gives a request without a session.
    PlainRefusal(u16),
    /// A modern request answered `-32022` naming only legacy versions this client speaks (a
    /// server redeployed without 2026-07-28).
    LegacyVersionsOnly,
}

/// What an error answering a request on one route means, computed once from the route's era,
/// what the client knows of the server's own answers, and the error's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing was sent: the connect was refused (a server restarting).
    Unsent,
    /// The server forgot the session for sure: a `404` to a request carrying its id (MCP
    /// 2025-11-25, transports "Session Management"), also when it refused a resumption so.
    /// Forgotten: no `DELETE` goes to it.
    Expired,
    /// The server's words (a `400` "no valid session" of older SDKs) say the session is gone:
    /// set aside, and still deleted at the drop.
    SetAside,
    /// An answer like the other era's that no probe found to be the server's own: the era is
    /// asked again.
    OtherEra(EraSignal),
    /// An answer like the other era's that a probe found to be this server's own answer to
    /// the method (a 2025-era tool's own `-32020`): it stands, and asks nothing.
    Own(EraSignal),
    /// The reply was lost on the way (the stream ended or broke before the answer, or the
    /// connection broke after the request went out): the request may have run.
    Lost,
    /// A modern route's `HeaderMismatch` (`-32020`; MCP 2026-07-28, transports "Client
    /// Behavior"): the tool's `Mcp-Param-*` headers may follow an old schema.
    HeaderMismatch,
    /// A modern route's `MissingRequiredClientCapability` (`-32021`).
    MissingCapability,
    /// Refused `429` or `503` with a `Retry-After` (RFC 6585 §4, RFC 9110 §10.2.3): the
    /// request was not processed; the status and the wait the server named.
    RateLimited { status: u16, wait: Duration },
    /// Refused `429` or `503` without a `Retry-After` (RFC 6585 §4, RFC 9110 §15.6.4): the
    /// request was not processed, and no wait was named; nothing is resent.
    Busy { status: u16 },
    /// JSON-RPC's "Method not found" (`-32601`, JSON-RPC 2.0 §5.1) of the route's era: the
    /// server does not offer the method (a `tools/list`, a `subscriptions/listen`).
    MethodNotFound,
    /// JSON-RPC's "Invalid params" (`-32602`, JSON-RPC 2.0 §5.1): the request's params (a
    /// call's arguments) do not fit what the server expects (MCP 2025-11-25, server/tools
    /// "Error Handling").
    InvalidParams,
    /// A response of no valid shape (neither `result` nor `error`, an `error` that is no
    /// JSON-RPC error object, a `result` of the wrong shape): an answer all the same, nothing
    /// to cancel.
    Malformed,
    /// Anything else: the answer is the request's own and stands (a JSON-RPC error of the
    /// server's era, an error status, a failure with nothing more to do).
    Stands,
}

/// What a [`Verdict`] does to the session (or modern route) the answer came on; the one
/// function from verdict to session transition is `Sessions::settle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settle {
    /// Forgotten: no longer live, no longer owned (no `DELETE`), no cancel goes to it.
    Forget,
    /// No longer live; still owned, so deleted with the others.
    SetAside,
    /// The era is asked again (`Connection::recheck`), which moves the route or keeps it.
    Recheck(EraSignal),
    /// Nothing changes.
    Keep,
}

impl Verdict {
    /// Whether the verdict is on the server's response to the request: a response of no valid
    /// shape, or — when the answer holds a JSON-RPC error (`rpc`, [`Error::rpc`](super::Error::rpc))
    /// — an error of its era or one a probe found to be its own. An answer of the other era,
    /// an expiry, a rate limit or a lost reply is none. A `ping` answered at all shows the
    /// session lives.
    pub(crate) fn is_response(self, rpc: bool) -> bool {
        match self {
            Verdict::Malformed => true,
            Verdict::Stands
            | Verdict::Own(_)
            | Verdict::MethodNotFound
            | Verdict::InvalidParams
            | Verdict::HeaderMismatch
            | Verdict::MissingCapability => rpc,
            Verdict::Unsent
            | Verdict::Expired
            | Verdict::SetAside
            | Verdict::OtherEra(_)
            | Verdict::Lost
            | Verdict::RateLimited { .. }
            | Verdict::Busy { .. } => false,
        }
    }

    /// How long a loop that asks again on its own backoff (the change stream, its `ping`, its
    /// renewal of the session) stays away after this verdict at least: the wait a rate limit
    /// named (RFC 6585 §4, RFC 9110 §10.2.3), at most `at_most` (the loop's longest backoff);
    /// `None` for any other verdict (the loop's backoff alone). Such a loop sends no request
    /// once more, so [`next`] does not apply; this is its half of the rate limit's rule.
    pub(crate) fn stays_away(self, at_most: Duration) -> Option<Duration> {
        match self {
            Verdict::RateLimited { wait, .. } => Some(wait.min(at_most)),
            _ => None,
        }
    }

    /// What this verdict does to the session the answer came on.
    pub(crate) fn settles(self) -> Settle {
        match self {
            Verdict::Expired => Settle::Forget,
            Verdict::SetAside => Settle::SetAside,
            Verdict::OtherEra(signal) => Settle::Recheck(signal),
            Verdict::Unsent
            | Verdict::Own(_)
            | Verdict::Lost
            | Verdict::HeaderMismatch
            | Verdict::MissingCapability
            | Verdict::RateLimited { .. }
            | Verdict::Busy { .. }
            | Verdict::MethodNotFound
            | Verdict::InvalidParams
            | Verdict::Malformed
            | Verdict::Stands => Settle::Keep,
        }
    }
}

/// Where in one send the answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The status (or the failure to get one): refused before anything ran.
    Status,
    /// A 2xx reply being read: the request was accepted and may have run.
    Reply,
}

/// The resends one request has spent ([`next`] reads it; the exchange updates it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Spent {
    /// Sent once more (at most once) after this verdict: an expired session ([`Verdict::Expired`]
    /// or the server's words, [`Verdict::SetAside`]: the session it went on was made after
    /// them), or an answer of the other era. `None`: not yet.
    pub(crate) resent: Option<Verdict>,
    /// Sent again after a refused connect (at most [`limits::REINIT_RETRIES`] times).
    pub(crate) refused: usize,
    /// Re-issued with a new id after a lost reply (at most once per call).
    pub(crate) reissued: bool,
    /// Sent once more after a rate limit's wait (at most once).
    pub(crate) waited: bool,
}

/// What the exchange of one request does after an attempt's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Send again on the same route after this wait (nothing was sent).
    Again(Duration),
    /// Send once more on the same route, under a new id, after the wait a rate limit named
    /// (the request was not processed: RFC 6585 §4).
    Wait(Duration),
    /// Take the next session (the renewal) and send once more.
    Renew,
    /// Send again under a new JSON-RPC id (MCP 2026-07-28, transports "Receiving Messages").
    Reissue,
    /// Ask the era again, then send once more on the route the probe leaves (or answer).
    Reroute(EraSignal),
    /// The error is the request's answer.
    Answer,
}

/// The decision table of one request's resends, read whole (the shape of hickory's retry
/// `match`), for every request path (a call, a listing's pages, a re-listing's, the `ping`):
/// `verdict` of the attempt in `phase`, with `spent` so far; `reissues` says whether a lost
/// reply of this request is re-issued in its era (`Wire::reissues_in`); `left` is what is left
/// of the request's deadline (`None`: no caller's deadline, only the bound).
pub(crate) fn next(
    verdict: Verdict,
    phase: Stage,
    spent: Spent,
    reissues: bool,
    left: Option<Duration>,
) -> Next {
    match (verdict, phase) {
        (Verdict::Unsent, _) if spent.refused < limits::REINIT_RETRIES => {
            Next::Again(limits::REINIT_RETRY_FIRST * 2u32.pow(spent.refused as u32))
        }
        // Refused unprocessed with a wait: sent once more when the wait fits.
        (Verdict::RateLimited { wait, .. }, _) if !spent.waited && waits_out(wait, left) => {
            Next::Wait(wait)
        }
        // Refused at the status: nothing ran, so the request goes once more on a new session.
        // Met while reading, the request may have run: it is never sent again.
        (Verdict::Expired | Verdict::SetAside, Stage::Status) if spent.resent.is_none() => {
            Next::Renew
        }
        (Verdict::Lost, _) if reissues && !spent.reissued => Next::Reissue,
        (Verdict::OtherEra(signal), _) if spent.resent.is_none() => Next::Reroute(signal),
        _ => Next::Answer,
    }
}

/// What the server's words (a "no valid session" `400` of older SDKs, read by
/// `reply::speaks_of_session`) mean: the one rule of the request path and of the change
/// stream's loop, each keeping its own [`Words`]. They say the session is gone until a
/// session made after the same words got them again: from then on they are the answer's own
/// (a tool's own "session" error, or a server whose `GET` always answers so).
///
/// ```text
///   SessionGone ──the words met on a session made after them──▶ Own (for good)
/// ```
#[derive(Debug, Default)]
pub(crate) struct Words {
    own: AtomicBool,
}

/// What the server's words said ([`Words::met`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Said {
    /// The session is gone: set it aside ([`Verdict::SetAside`]).
    SessionGone,
    /// The words are the answer's own: the session stays.
    Own,
}

impl Words {
    /// The words were met on a session; `fresh`: a session made after the same words. Returns
    /// what they say from now on (a fresh session's meeting makes them [`Said::Own`] for good).
    pub(crate) fn met(&self, fresh: bool) -> Said {
        if fresh {
            self.own.store(true, Ordering::Relaxed);
        }
        self.said()
    }

    /// What the words say now.
    pub(crate) fn said(&self) -> Said {
        if self.own.load(Ordering::Relaxed) {
            Said::Own
        } else {
            Said::SessionGone
        }
    }
}

/// Whether a request refused `429`/`503` with a `Retry-After` of `wait` waits it out and is
/// sent once more: when the wait is at most [`limits::MAX_RATE_LIMIT_WAIT`] and ends before
/// the request's deadline (`left` of it; `None`: the bound alone). Else the refusal is the
/// answer, naming the wait ([`NamedWait`]).
pub(crate) fn waits_out(wait: Duration, left: Option<Duration>) -> bool {
    wait <= limits::MAX_RATE_LIMIT_WAIT && left.is_none_or(|left| wait < left)
}

/// A rate limit not waited out, as a model reads it (RFC 6585 §4, RFC 9110 §10.2.3): the
/// refusal by its status and the wait in whole seconds, rounded up so it is never shown
/// shorter than the server asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NamedWait {
    /// `429` or `503`.
    pub(crate) status: u16,
    /// The wait `Retry-After` named.
    pub(crate) wait: Duration,
}

impl NamedWait {
    /// The named wait of `verdict`, when it is a rate limit.
    pub(crate) fn of(verdict: Verdict) -> Option<Self> {
        match verdict {
            Verdict::RateLimited { status, wait } => Some(Self { status, wait }),
            _ => None,
        }
    }

    /// How the request was refused ([`refused_as`]).
    pub(crate) fn refused(&self) -> String {
        refused_as(self.status)
    }

    /// The wait in whole seconds, rounded up, with its unit: `1 second`, `3600 seconds`.
    pub(crate) fn seconds(&self) -> String {
        let seconds = self.wait.as_secs() + u64::from(self.wait.subsec_nanos() > 0);
        let unit = if seconds == 1 { "second" } else { "seconds" };
        format!("{seconds} {unit}")
    }
}

/// How a request refused unprocessed with `status` (`429` or `503`) was refused, as a model
/// reads it: `as too many requests (HTTP 429)` or `as unavailable for now (HTTP 503)`.
pub(crate) fn refused_as(status: u16) -> String {
    let how = if status == 429 {
        "as too many requests"
    } else {
        "as unavailable for now"
    };
    format!("{how} (HTTP {status})")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRESH: Spent = Spent {
        resent: None,
        refused: 0,
        reissued: false,
        waited: false,
    };
    const RESENT: Spent = Spent {
        resent: Some(Verdict::Expired),
        ..FRESH
    };
    const MINUTE: Option<Duration> = Some(Duration::from_secs(60));

    #[test]
    fn each_verdict_settles_its_session_one_way() {
        let signal = EraSignal::ModernError(-32022);
        let table = [
            (Verdict::Expired, Settle::Forget),
            (Verdict::Own(signal), Settle::Keep),
            (Verdict::SetAside, Settle::SetAside),
            (Verdict::OtherEra(signal), Settle::Recheck(signal)),
            (Verdict::Unsent, Settle::Keep),
            (Verdict::Lost, Settle::Keep),
            (Verdict::HeaderMismatch, Settle::Keep),
            (Verdict::MissingCapability, Settle::Keep),
            (
                Verdict::RateLimited {
                    status: 429,
                    wait: Duration::from_secs(1),
                },
                Settle::Keep,
            ),
            (Verdict::MethodNotFound, Settle::Keep),
            (Verdict::InvalidParams, Settle::Keep),
            (Verdict::Malformed, Settle::Keep),
            (Verdict::Stands, Settle::Keep),
        ];
        for (verdict, settle) in table {
            assert_eq!(verdict.settles(), settle, "{verdict:?}");
        }
    }

    /// A malformed response is a response whatever it holds; an error of the server's own is
    /// one only with its JSON-RPC error; the other era's answer, an expiry, a limit or a lost
    /// reply never.
    #[test]
    fn a_response_is_a_malformed_answer_or_a_json_rpc_error_of_the_servers_own() {
        let signal = EraSignal::ModernError(-32022);
        let table = [
            (Verdict::Malformed, [true, true]),
            (Verdict::Stands, [false, true]),
            (Verdict::Own(signal), [false, true]),
            (Verdict::MethodNotFound, [false, true]),
            (Verdict::InvalidParams, [false, true]),
            (Verdict::HeaderMismatch, [false, true]),
            (Verdict::MissingCapability, [false, true]),
            (Verdict::OtherEra(signal), [false, false]),
            (Verdict::Expired, [false, false]),
            (Verdict::SetAside, [false, false]),
            (Verdict::Unsent, [false, false]),
            (Verdict::Lost, [false, false]),
            (Verdict::Busy { status: 503 }, [false, false]),
            (
                Verdict::RateLimited {
                    status: 429,
                    wait: Duration::from_secs(1),
                },
                [false, false],
            ),
        ];
        for (verdict, responses) in table {
            assert_eq!(
                [verdict.is_response(false), verdict.is_response(true)],
                responses,
                "{verdict:?}"
            );
        }
    }

    #[test]
    fn the_resend_table_spends_each_resend_once() {
        use Stage::{Reply, Status};
        let signal = EraSignal::PlainRefusal(404);
        let limited = Verdict::RateLimited {
            status: 429,
            wait: Duration::from_secs(1),
        };
        let table = [
            (
                Verdict::Unsent,
                Status,
                FRESH,
                false,
                Next::Again(limits::REINIT_RETRY_FIRST),
            ),
            (Verdict::Expired, Status, FRESH, false, Next::Renew),
            (Verdict::SetAside, Status, FRESH, false, Next::Renew),
            (Verdict::Expired, Status, RESENT, false, Next::Answer),
            (Verdict::SetAside, Reply, FRESH, false, Next::Answer),
            (Verdict::Expired, Reply, FRESH, true, Next::Answer),
            (Verdict::Lost, Reply, FRESH, true, Next::Reissue),
            (Verdict::Lost, Status, FRESH, true, Next::Reissue),
            (Verdict::Lost, Reply, FRESH, false, Next::Answer),
            (
                Verdict::Lost,
                Reply,
                Spent {
                    reissued: true,
                    ..FRESH
                },
                true,
                Next::Answer,
            ),
            (
                Verdict::OtherEra(signal),
                Status,
                FRESH,
                false,
                Next::Reroute(signal),
            ),
            (
                Verdict::OtherEra(signal),
                Reply,
                FRESH,
                false,
                Next::Reroute(signal),
            ),
            (
                Verdict::OtherEra(signal),
                Status,
                RESENT,
                false,
                Next::Answer,
            ),
            (Verdict::Own(signal), Status, FRESH, true, Next::Answer),
            (Verdict::HeaderMismatch, Status, FRESH, true, Next::Answer),
            (
                limited,
                Status,
                FRESH,
                true,
                Next::Wait(Duration::from_secs(1)),
            ),
            (
                limited,
                Reply,
                RESENT,
                false,
                Next::Wait(Duration::from_secs(1)),
            ),
            (
                limited,
                Status,
                Spent {
                    waited: true,
                    ..FRESH
                },
                true,
                Next::Answer,
            ),
            (Verdict::Malformed, Reply, FRESH, true, Next::Answer),
            (Verdict::MethodNotFound, Status, FRESH, true, Next::Answer),
            (Verdict::InvalidParams, Status, FRESH, true, Next::Answer),
            (Verdict::Stands, Status, FRESH, true, Next::Answer),
        ];
        for (verdict, phase, spent, reissues, want) in table {
            assert_eq!(
                next(verdict, phase, spent, reissues, MINUTE),
                want,
                "{verdict:?} {phase:?} {spent:?} {reissues}"
            );
        }
    }

    #[test]
    fn a_refused_connect_is_sent_again_with_a_doubling_wait_until_the_bound() {
        let waits: Vec<Next> = (0..=limits::REINIT_RETRIES)
            .map(|refused| {
                let spent = Spent { refused, ..FRESH };
                next(Verdict::Unsent, Stage::Status, spent, false, None)
            })
            .collect();
        let mut want: Vec<Next> = (0..limits::REINIT_RETRIES)
            .map(|n| Next::Again(limits::REINIT_RETRY_FIRST * 2u32.pow(n as u32)))
            .collect();
        want.push(Next::Answer);
        assert_eq!(waits, want);
    }

    #[test]
    fn a_rate_limit_is_waited_out_once_when_the_wait_fits_the_bound_and_the_deadline() {
        let limited = |secs| Verdict::RateLimited {
            status: 429,
            wait: Duration::from_secs(secs),
        };
        let bound = limits::MAX_RATE_LIMIT_WAIT.as_secs();
        let five = Some(Duration::from_secs(5));
        let table = [
            (limited(1), MINUTE, Next::Wait(Duration::from_secs(1))),
            (limited(1), None, Next::Wait(Duration::from_secs(1))),
            (
                limited(bound),
                MINUTE,
                Next::Wait(limits::MAX_RATE_LIMIT_WAIT),
            ),
            (
                limited(bound),
                None,
                Next::Wait(limits::MAX_RATE_LIMIT_WAIT),
            ),
            (limited(bound + 1), MINUTE, Next::Answer),
            (limited(bound + 1), None, Next::Answer),
            (limited(5), five, Next::Answer),
            (limited(4), five, Next::Wait(Duration::from_secs(4))),
        ];
        for (verdict, left, want) in table {
            assert_eq!(
                next(verdict, Stage::Status, FRESH, false, left),
                want,
                "{verdict:?} {left:?}"
            );
        }
    }

    #[test]
    fn a_loop_stays_away_the_named_wait_up_to_its_longest_backoff() {
        let minute = Duration::from_secs(60);
        let limited = |secs| Verdict::RateLimited {
            status: 429,
            wait: Duration::from_secs(secs),
        };
        assert_eq!(
            limited(20).stays_away(minute),
            Some(Duration::from_secs(20))
        );
        assert_eq!(limited(3600).stays_away(minute), Some(minute));
        assert_eq!(Verdict::Expired.stays_away(minute), None);
        assert_eq!(Verdict::Stands.stays_away(minute), None);
        assert_eq!(Verdict::Unsent.stays_away(minute), None);
    }

    #[test]
    fn a_named_wait_is_in_whole_seconds_rounded_up() {
        let named = |status, millis| NamedWait {
            status,
            wait: Duration::from_millis(millis),
        };
        assert_eq!(named(429, 1000).seconds(), "1 second");
        assert_eq!(named(429, 1001).seconds(), "2 seconds");
        assert_eq!(named(503, 3_600_000).seconds(), "3600 seconds");
        assert_eq!(
            named(429, 1000).refused(),
            "as too many requests (HTTP 429)"
        );
        assert_eq!(
            named(503, 1000).refused(),
            "as unavailable for now (HTTP 503)"
        );
        assert_eq!(NamedWait::of(Verdict::Stands), None);
        assert_eq!(
            NamedWait::of(Verdict::RateLimited {
                status: 503,
                wait: Duration::from_secs(2)
            }),
            Some(named(503, 2000))
        );
    }

    #[test]
    fn the_servers_words_say_the_session_is_gone_until_a_fresh_session_gets_them() {
        let words = Words::default();
        assert_eq!(words.said(), Said::SessionGone);
        assert_eq!(words.met(false), Said::SessionGone);
        assert_eq!(words.met(false), Said::SessionGone);
        assert_eq!(words.met(true), Said::Own);
        // For good: an older session meeting them later does not undo it.
        assert_eq!(words.met(false), Said::Own);
        assert_eq!(words.said(), Said::Own);
    }
}
