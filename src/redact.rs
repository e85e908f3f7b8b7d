//! Scrubbing configured secrets out of server text, and the Pack's exit gate.
//!
//! A server may echo a header back (an error page quoting the request, an `isError` text quoting
//! a token). Every piece of server text that reaches a status reason, a tool error, a tool result
//! or the listing goes through [`Redactor::scrub`] first, so a configured secret of at least
//! [`MIN_SECRET_BYTES`] bytes shows as `[redacted]`. Those scrubs are an optimization (they come
//! before a cut, and they keep log fields clean); the guarantee is the [`Gate`]: every text the
//! Pack hands out passes [`Gate::pass`] at the boundary, with the secrets of every entry, and
//! only that makes a [`Shown`] (docs/configuration.md, "The exit gate").
//!
//! Two rules, each in one function. The plain rule ([`scrub_plain`], [`Redactor::scrub`]):
//! every byte an occurrence of a form covers, in the text as written or as its JSON escapes
//! read ([`Unescaped`]), is scrubbed. The JSON rule ([`scrub_json_text`],
//! [`Redactor::scrub_json`], the gate): JSON text stays valid JSON — a string or key keeps its
//! other text, a number or literal holding a secret becomes the string `"[redacted]"`, every
//! key is read as written (a key named twice is scrubbed twice).
//!
//! A secret is registered in the forms a server may quote it in: as written, JSON-escaped the
//! ways common encoders write it (`\"`, PHP's `\/`, Python's and PHP's `\u00e4`, Go's
//! `\u003c`), and percent-encoded the ways HTTP stacks encode text (a URL's path, query and
//! user info, a form, JavaScript's `encodeURIComponent`, Python's `quote` and `quote_plus`, every
//! non-alphanumeric byte; registered with upper-case hex digits, and a text is also searched
//! with its escapes' digits upper-cased ([`upper_hex`]), so any case, mixed too, matches), and
//! a `Basic` credential also decoded ([`basic_credentials`]); so every path that scrubs plain
//! text also catches those echoes. Once the Pack is built, every entry's redactor scrubs with
//! the secrets of every entry ([`Redactor::join`]): log fields never pass the gate.
//! All forms of all secrets, configured and learned, make one Aho-Corasick automaton, built
//! when the set changes; a scrub is one pass over the text, and each maximal run of bytes that
//! occurrences cover (overlapping or touching) becomes one `[redacted]` ([`Redactor::scrub`]).
//! Scrubbing comes before any cut: a bound on server text applies to text already scrubbed, so
//! a secret that straddles a cut never leaves its prefix behind.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, OnceLock, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use secrecy::{ExposeSecret, SecretString};

/// Secrets shorter than this are not scrubbed: replacing every `1` or `on` in a text would
/// mangle it without protecting anything worth protecting.
pub(crate) const MIN_SECRET_BYTES: usize = 8;

/// The shortest end of a cut text the [`Gate`] takes for what the cut left of another entry's
/// secret (half of [`MIN_SECRET_BYTES`]): a shorter one says next to nothing of a secret and
/// matches ordinary text too often.
const MIN_CUT_TAIL_BYTES: usize = MIN_SECRET_BYTES / 2;

/// What a scrubbed secret becomes.
pub(crate) const REDACTED: &str = "[redacted]";

/// The secrets of one server entry: its header values, the words of each header value (so the
/// token of `Bearer <token>` is caught alone), and every substituted env value; plus the tokens
/// a sign-in learns while the Pack runs ([`Redactor::learner`]).
///
/// The secret set lives behind one lock, shared with the learner and the scrubber; every change
/// (a configured secret added, a token learned, the oldest learned token dropped) builds the
/// matchers anew, so a scrub only takes the current matcher and searches.
///
/// Once the Pack is built, [`Redactor::join`] gives the redactor the [`Gate`] over every
/// entry: from then on its scrubs ([`Redactor::scrub`], [`Redactor::scrub_json`],
/// [`Redactor::scrubber`], so every reason, error and log field made of server text) take the
/// secrets of every entry, not only its own: one server may quote a header another entry
/// shares, and a log line leaves the Pack without passing the exit gate.
#[derive(Default)]
pub(crate) struct Redactor {
    set: Arc<RwLock<SecretSet>>,
    /// The secrets of the whole Pack, once [`Redactor::join`]ed; shared by the redactor's
    /// scrubbers made before and after.
    pack: Arc<OnceLock<Gate>>,
}

/// Every secret a [`Redactor`] scrubs, in its forms, and the matchers built from them.
#[derive(Default)]
struct SecretSet {
    /// The configured secrets' forms, each once, in the order added.
    configured: Vec<SecretString>,
    /// Rotating secrets learned at run time ([`Learned::Token`]: access and refresh tokens),
    /// oldest first, each as its forms (see [`Redactor::add_secret`]), the
    /// value as given first; at most [`MAX_LEARNED`].
    learned: VecDeque<Vec<SecretString>>,
    /// Long-lived client credentials learned at run time ([`Learned::Credential`]: a
    /// registered client's secret and its `client_secret_basic` forms), each as its forms, the
    /// value as given first; kept for the redactor's whole life, never pushed out by tokens.
    credentials: Vec<Vec<SecretString>>,
    /// Client assertions learned at run time ([`Learned::Assertion`]), oldest first, each as
    /// its forms; at most [`MAX_ASSERTIONS`], apart from the tokens so that no number of them
    /// pushes a token out.
    assertions: VecDeque<Vec<SecretString>>,
    /// JWT heads learned at run time ([`Learned::JwtHead`]), oldest first, each as its forms;
    /// at most [`MAX_JWT_HEADS`], apart from the tokens. An occurrence covers the JWT it starts
    /// too ([`Matcher::covered`]).
    jwt_heads: VecDeque<Vec<SecretString>>,
    /// Every form, configured and learned (for every scrub; [`Redactor::shown_checker`] builds its own).
    matcher: Arc<Matcher>,
}

impl SecretSet {
    /// How many bytes at the end of `text` are a proper prefix of one of the set's secret
    /// forms (the longest such, at least `shortest` bytes), when `text` was cut there: what a cut
    /// left of a secret. A JWT head starts every JWT of its key (`eyJ`, the encoding of `{"`,
    /// for all of them): only a cut prefix of it long enough to be its own is taken for it, so a
    /// preview ending in `e` keeps its last letter.
    fn cut_tail(&self, text: &str, shortest: usize) -> Option<usize> {
        let heads = self
            .jwt_heads
            .iter()
            .flatten()
            .map(|s| (s, MIN_SECRET_BYTES));
        let head_forms = self.jwt_heads.iter().map(Vec::len).sum();
        let others = self.forms().skip(head_forms).map(|s| (s, shortest));
        // A cut end in lower-case hex reads as the upper-case forms (see `covered_by`).
        let upper = upper_hex(text);
        let ends_with = |prefix: &str| {
            text.ends_with(prefix) || upper.as_deref().is_some_and(|u| u.ends_with(prefix))
        };
        heads
            .chain(others)
            .filter_map(|(secret, shortest)| {
                let secret = secret.expose_secret();
                (shortest..secret.len())
                    .rev()
                    .filter(|&k| secret.is_char_boundary(k))
                    .find(|&k| ends_with(&secret[..k]))
            })
            .max()
    }

    /// Builds the matcher from the forms held now; called after every change.
    fn rebuild(&mut self) {
        let heads = self.jwt_heads.iter().map(Vec::len).sum();
        self.matcher = Arc::new(Matcher::new(self.forms(), heads));
    }

    /// Every form held: the JWT heads first (as [`Matcher::new`] wants them), then the
    /// configured forms, then the learned ones.
    fn forms(&self) -> impl Iterator<Item = &SecretString> {
        self.jwt_heads
            .iter()
            .flatten()
            .chain(&self.configured)
            .chain(self.credentials.iter().flatten())
            .chain(self.assertions.iter().flatten())
            .chain(self.learned.iter().flatten())
    }
}

/// One Aho-Corasick automaton over a set of secret forms; `None` when the set is empty. The
/// first `heads` patterns are JWT heads ([`Learned::JwtHead`]).
///
/// Built with the standard match semantics and searched for every overlapping occurrence, so
/// the covered bytes are exactly the union of all occurrences of all forms, each occurrence of
/// a JWT head stretched over the JWT it starts (see [`Matcher::covered`]).
#[derive(Default)]
struct Matcher {
    automaton: Option<AhoCorasick>,
    heads: usize,
}

impl Matcher {
    fn new<'a>(forms: impl IntoIterator<Item = &'a SecretString>, heads: usize) -> Self {
        let forms: Vec<&[u8]> = forms
            .into_iter()
            .map(|s| s.expose_secret().as_bytes())
            .collect();
        if forms.is_empty() {
            return Self::default();
        }
        // Building fails only past the default automaton's size limits, far beyond what a
        // configuration and MAX_LEARNED tokens make; then the noncontiguous NFA, which has the
        // most room, holds the set.
        let built = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&forms)
            .or_else(|_| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::Standard)
                    .kind(Some(aho_corasick::AhoCorasickKind::NoncontiguousNFA))
                    .build(&forms)
            });
        Self {
            automaton: built.ok(),
            heads,
        }
    }

    fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// The byte ranges of `text` that some occurrence of some form covers, as maximal runs in
    /// ascending order: overlapping and touching occurrences make one run. One pass over
    /// `text`; the occurrences come in the order they end, so a run only ever grows back over
    /// the runs just before it. An occurrence of a JWT head reaches on over the rest of the JWT
    /// after it ([`jwt_rest`]).
    fn covered(&self, text: &str) -> Vec<Range<usize>> {
        let mut runs: Vec<Range<usize>> = Vec::new();
        let Some(ac) = &self.automaton else {
            return runs;
        };
        for found in ac.find_overlapping_iter(text) {
            let start = found.start();
            let end = if found.pattern().as_usize() < self.heads {
                found.end() + jwt_rest(&text.as_bytes()[found.end()..])
            } else {
                found.end()
            };
            match runs.last_mut() {
                Some(last) if start <= last.end => {
                    last.end = last.end.max(end);
                    last.start = last.start.min(start);
                }
                _ => runs.push(start..end),
            }
            // An occurrence reaching back past the run before the last merges them.
            while let [.., prev, last] = runs.as_slice() {
                if last.start > prev.end {
                    break;
                }
                let merged = prev.start.min(last.start)..last.end.max(prev.end);
                runs.pop();
                if let Some(prev) = runs.last_mut() {
                    *prev = merged;
                }
            }
        }
        runs
    }
}

/// How many bytes at the start of `bytes` are the rest of a JWT whose first segment ends just
/// before them (RFC 7515 §7.1): a `.` and the payload segment, then a `.` and the signature
/// segment, each segment of base64url bytes. Percent-encoded forms count too, as written by an
/// encoder that encodes every non-alphanumeric byte (`%2E`, `%2D`, `%5F`, either case). What
/// follows the signature segment is not the JWT's.
fn jwt_rest(bytes: &[u8]) -> usize {
    // The byte at `at`, decoded when percent-encoded, and how many bytes it takes.
    let byte_at = |at: usize| -> Option<(u8, usize)> {
        match bytes.get(at)? {
            b'%' => {
                let decoded = match bytes.get(at + 1..at + 3)? {
                    [b'2', b'E' | b'e'] => b'.',
                    [b'2', b'D' | b'd'] => b'-',
                    [b'5', b'F' | b'f'] => b'_',
                    _ => return None,
                };
                Some((decoded, 3))
            }
            b => Some((*b, 1)),
        }
    };
    let base64url = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let mut at = 0;
    for _segment in 0..2 {
        match byte_at(at) {
            Some((b'.', n)) => at += n,
            _ => break,
        }
        while let Some((_, n)) = byte_at(at).filter(|(b, _)| base64url(*b)) {
            at += n;
        }
    }
    at
}

/// `text` with each run of `runs` (ascending, disjoint byte ranges on char boundaries) written
/// as one [`REDACTED`]; borrowed when there is none.
fn replace_runs<'a>(text: &'a str, runs: &[Range<usize>]) -> Cow<'a, str> {
    if runs.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for run in runs {
        out.push_str(&text[at..run.start]);
        out.push_str(REDACTED);
        at = run.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// The byte ranges of `text` that some occurrence of a form of any of `matchers` covers, as
/// maximal runs in ascending order ([`Matcher::covered`], over several secret sets at once),
/// in `text` as written and, when it holds a percent-encoding with a lower-case hex digit, in
/// its [`upper_hex`] view: the percent-encoded forms are registered with upper-case digits,
/// and a server may write either case, even both in one occurrence (RFC 3986 §2.1).
fn covered_by(matchers: &[Arc<Matcher>], text: &str) -> Vec<Range<usize>> {
    let runs = covered_as_written(matchers, text);
    let Some(upper) = upper_hex(text) else {
        return runs;
    };
    // The view has the text's length, so its runs are the text's.
    merge_runs(
        runs.into_iter()
            .chain(covered_as_written(matchers, &upper))
            .collect(),
    )
}

/// `runs` sorted and merged: overlapping or touching ranges make one.
fn merge_runs(mut runs: Vec<Range<usize>>) -> Vec<Range<usize>> {
    runs.sort_by_key(|run| run.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(runs.len());
    for run in runs {
        match merged.last_mut() {
            Some(last) if run.start <= last.end => last.end = last.end.max(run.end),
            _ => merged.push(run),
        }
    }
    merged
}

/// `text` with the hex digits of each percent-encoding in upper case (`%2f` → `%2F`, also the
/// one digit of an escape a cut left half: `%a` → `%A`), the same length; `None` when that
/// changes nothing. One copy of the text, made only when a `%` is followed by `a`–`f`.
fn upper_hex(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let lower_after = |at: usize| {
        bytes[at + 1..]
            .iter()
            .take(2)
            .take_while(|b| b.is_ascii_hexdigit())
            .any(u8::is_ascii_lowercase)
    };
    let first = memchr::memchr_iter(b'%', bytes).find(|&at| lower_after(at))?;
    let mut upper = bytes.to_vec();
    for at in memchr::memchr_iter(b'%', &bytes[first..]).map(|at| first + at) {
        for b in upper[at + 1..].iter_mut().take(2) {
            if !b.is_ascii_hexdigit() {
                break;
            }
            b.make_ascii_uppercase();
        }
    }
    // Only ASCII letters changed, so the bytes are still the text's UTF-8.
    String::from_utf8(upper).ok()
}

/// [`covered_by`] for `text` as written only.
fn covered_as_written(matchers: &[Arc<Matcher>], text: &str) -> Vec<Range<usize>> {
    match matchers {
        [] => Vec::new(),
        [one] => one.covered(text),
        many => merge_runs(many.iter().flat_map(|m| m.covered(text)).collect()),
    }
}

/// The plain rule: the runs of `text` that a form covers, as written and, when `text` holds a
/// backslash, as a reader decodes its JSON escapes ([`Unescaped`]: `\/`, `\u0041`, a
/// surrogate pair, `\"`, …), so a secret a server escaped in a way no registered form spells
/// (every character as `\uXXXX`, say, in an error body's JSON) is found in any text; each run
/// of either becomes one [`REDACTED`].
fn scrub_plain<'a>(matchers: &[Arc<Matcher>], text: &'a str) -> Cow<'a, str> {
    if matchers.iter().all(|m| m.is_empty()) {
        return Cow::Borrowed(text);
    }
    let mut runs = covered_by(matchers, text);
    // Each level of JSON escapes decoded in turn (JSON text inside a JSON string escapes a
    // secret twice), each run found mapped back through every level to the original bytes.
    let mut views: Vec<Unescaped> = Vec::new();
    while views.len() < ESCAPE_LEVELS {
        let under = views.last().map_or(text, |view| view.text.as_str());
        if memchr::memchr(b'\\', under.as_bytes()).is_none() {
            break;
        }
        let view = Unescaped::new(under);
        if view.escapes.is_empty() {
            break;
        }
        let hidden = covered_by(matchers, &view.text);
        views.push(view);
        for run in hidden {
            runs.push(views.iter().rev().fold(run, |run, view| view.origin(run)));
        }
    }
    replace_runs(text, &merge_runs(runs))
}

/// How many levels of JSON escapes [`scrub_plain`] decodes (a secret in JSON text inside a JSON
/// string inside a JSON string is the third).
const ESCAPE_LEVELS: usize = 3;

/// A text with its JSON escapes (RFC 8259 §7) decoded wherever they stand, and where each
/// escape came from. A backslash that starts no escape, and a `\u` escape of a lone surrogate,
/// are kept as written.
struct Unescaped {
    text: String,
    /// Per escape, in order: its decoded bytes in `text` and its bytes in the original.
    escapes: Vec<(Range<usize>, Range<usize>)>,
}

impl Unescaped {
    fn new(original: &str) -> Self {
        let bytes = original.as_bytes();
        let hex = |at: usize| -> Option<u32> {
            let digits = original.get(at..at + 4)?;
            if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            u32::from_str_radix(digits, 16).ok()
        };
        let mut text = String::with_capacity(original.len());
        let mut escapes = Vec::new();
        let mut copied = 0;
        let mut at = 0;
        while let Some(found) = memchr::memchr(b'\\', &bytes[at..]) {
            at += found;
            let escape: Option<(char, usize)> = match bytes.get(at + 1) {
                Some(b'/') => Some(('/', 2)),
                Some(b'"') => Some(('"', 2)),
                Some(b'\\') => Some(('\\', 2)),
                Some(b'n') => Some(('\n', 2)),
                Some(b't') => Some(('\t', 2)),
                Some(b'r') => Some(('\r', 2)),
                Some(b'b') => Some(('\u{8}', 2)),
                Some(b'f') => Some(('\u{c}', 2)),
                Some(b'u') => match hex(at + 2) {
                    Some(high @ 0xD800..=0xDBFF) => (bytes.get(at + 6..at + 8) == Some(b"\\u"))
                        .then(|| hex(at + 8))
                        .flatten()
                        .filter(|low| (0xDC00..=0xDFFF).contains(low))
                        .and_then(|low| {
                            char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                        })
                        .map(|c| (c, 12)),
                    Some(unit) => char::from_u32(unit).map(|c| (c, 6)),
                    None => None,
                },
                _ => None,
            };
            match escape {
                Some((c, len)) => {
                    text.push_str(&original[copied..at]);
                    let start = text.len();
                    text.push(c);
                    escapes.push((start..text.len(), at..at + len));
                    at += len;
                    copied = at;
                }
                None => at += 1,
            }
        }
        text.push_str(&original[copied..]);
        Self { text, escapes }
    }

    /// The bytes of the original that the decoded bytes `run` came from (whole escapes).
    fn origin(&self, run: Range<usize>) -> Range<usize> {
        // The original offset of decoded byte `p`: inside an escape, that escape's start (or,
        // `end`, its end); else shifted by the escapes before it.
        let map = |p: usize, end: bool| -> usize {
            let before = self.escapes.partition_point(|(view, _)| view.start <= p);
            match before.checked_sub(1).map(|i| &self.escapes[i]) {
                None => p + usize::from(end),
                Some((view, original)) if p < view.end => {
                    if end {
                        original.end
                    } else {
                        original.start
                    }
                }
                Some((view, original)) => original.end + (p - view.end) + usize::from(end),
            }
        };
        let last = run.end.saturating_sub(1).max(run.start);
        let end = map(last, true);
        let start = map(run.start, false);
        start..end
    }
}

/// What a JSON token that holds a secret and is not a string (a number, `true`, …) becomes, so
/// the text stays JSON: the JSON string `"[redacted]"`. A string holding one keeps its other
/// text, each covered run written as [`REDACTED`].
const REDACTED_JSON: &str = "\"[redacted]\"";

/// The JSON rule: `text` scrubbed of the forms `matchers` hold, valid JSON (RFC 8259) when it
/// was valid JSON.
///
/// - Text that is not one JSON value is scrubbed as plain text: each covered run becomes
///   [`REDACTED`].
/// - In a JSON value, every string and key is looked at as written and, when it holds an
///   escape, as decoded (a secret behind `\/` or `\u0041` that no registered form spells); one
///   that holds a secret is written again from its decoded text with each covered run as
///   [`REDACTED`] (serde_json's escapes), and as [`REDACTED_JSON`] whole if it still shows one.
///   Keys are read as written, so a key named twice is scrubbed twice. A number or literal an
///   occurrence touches becomes [`REDACTED_JSON`]. Everything else is kept byte for byte.
/// - An occurrence that reaches over the JSON between tokens (a secret spelling `","`) leaves
///   the plain scrub, shown as one JSON string when it is no JSON value any more.
///
/// One pass of the matchers over `text` when it holds no secret and no backslash (then it is
/// borrowed); otherwise a JSON validation pass and the strings with escapes decoded.
fn scrub_json_text<'a>(matchers: &[Arc<Matcher>], text: &'a str) -> Cow<'a, str> {
    if matchers.iter().all(|m| m.is_empty()) {
        return Cow::Borrowed(text);
    }
    let runs = covered_by(matchers, text);
    if runs.is_empty() && memchr::memchr(b'\\', text.as_bytes()).is_none() {
        return Cow::Borrowed(text);
    }
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
        return scrub_plain(matchers, text);
    }
    let mut out = String::new();
    let mut copied = 0;
    let mut next_run = 0;
    for (token, string) in json_tokens(text) {
        while runs.get(next_run).is_some_and(|run| run.end <= token.start) {
            next_run += 1;
        }
        let hit = runs.get(next_run).is_some_and(|run| run.start < token.end);
        let raw = &text[token.clone()];
        let replacement = if !string {
            hit.then(|| REDACTED_JSON.to_string())
        } else if hit || raw.contains('\\') {
            // Decoded by the one reader, so a lone surrogate escape beside a secret is U+FFFD,
            // not a reason to skip the string; one it cannot read is withheld whole.
            let Ok(decoded) = crate::json::from_server::<String>(raw.as_bytes()) else {
                out.push_str(&text[copied..token.start]);
                out.push_str(REDACTED_JSON);
                copied = token.end;
                continue;
            };
            let scrubbed = scrub_plain(matchers, &decoded).into_owned();
            if !hit && scrubbed == decoded {
                None
            } else {
                let written = serde_json::to_string(&scrubbed).unwrap_or_default();
                Some(if covered_by(matchers, &written).is_empty() {
                    written
                } else {
                    REDACTED_JSON.to_string()
                })
            }
        } else {
            None
        };
        if let Some(replacement) = replacement {
            out.push_str(&text[copied..token.start]);
            out.push_str(&replacement);
            copied = token.end;
        }
    }
    if copied == 0 && runs.is_empty() {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    if !scrub_plain_changes(matchers, &out) {
        return Cow::Owned(out);
    }
    // An occurrence across tokens: the plain scrub, kept JSON.
    let plain = scrub_plain(matchers, text).into_owned();
    if serde_json::from_str::<serde::de::IgnoredAny>(&plain).is_ok() {
        Cow::Owned(plain)
    } else {
        Cow::Owned(serde_json::to_string(&plain).unwrap_or_default())
    }
}

/// Whether [`scrub_plain`] would change `text`.
fn scrub_plain_changes(matchers: &[Arc<Matcher>], text: &str) -> bool {
    matches!(scrub_plain(matchers, text), Cow::Owned(_))
}

/// The tokens of the valid JSON text `text` that hold data, in order: each string (key or
/// value, quotes included; `true`) and each number or literal (`false`). Structure and
/// whitespace are skipped.
fn json_tokens(text: &str) -> impl Iterator<Item = (Range<usize>, bool)> + '_ {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while let Some(&b) = bytes.get(at) {
            match b {
                b'{' | b'}' | b'[' | b']' | b':' | b',' | b' ' | b'\t' | b'\n' | b'\r' => at += 1,
                b'"' => {
                    let start = at;
                    at += 1;
                    while let Some(found) = memchr::memchr2(b'"', b'\\', &bytes[at..]) {
                        at += found;
                        if bytes[at] == b'\\' {
                            at += 2;
                        } else {
                            break;
                        }
                    }
                    at = (at + 1).min(bytes.len());
                    return Some((start..at, true));
                }
                _ => {
                    let start = at;
                    while bytes.get(at).is_some_and(|b| {
                        !matches!(
                            b,
                            b'{' | b'}'
                                | b'['
                                | b']'
                                | b':'
                                | b','
                                | b' '
                                | b'\t'
                                | b'\n'
                                | b'\r'
                                | b'"'
                        )
                    }) {
                        at += 1;
                    }
                    return Some((start..at, false));
                }
            }
        }
        None
    })
}

/// The one gate every text the Pack shows passes (README "Secrets"): tool answers,
/// `ToolError` messages, listings and their reasons and sign-in links, Host-only answers, and
/// the tool specs that quote a server's names. It scrubs the final text with the secrets of
/// every entry of the Pack, configured and learned, now and later, by the JSON rule
/// ([`scrub_json_text`]): a JSON answer stays valid JSON. Scrubs made earlier, closer to the
/// server's text (before a cut, say), are an optimization; this one is the guarantee.
///
/// Cloning shares the secret sets; a gate built before a secret is learned scrubs it too.
#[derive(Clone, Default)]
pub(crate) struct Gate {
    sets: Vec<Arc<RwLock<SecretSet>>>,
}

impl Gate {
    /// A gate over the secrets of `redactors` (the Pack's entries).
    pub(crate) fn new<'a>(redactors: impl IntoIterator<Item = &'a Redactor>) -> Self {
        Self {
            sets: redactors.into_iter().map(|r| Arc::clone(&r.set)).collect(),
        }
    }

    /// `text` scrubbed by the JSON rule with every secret of the gate's entries: the only way
    /// to a [`Shown`].
    pub(crate) fn pass(&self, text: String) -> Shown {
        let scrubbed = match scrub_json_text(&self.matchers(), &text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(scrubbed) => scrubbed,
        };
        Shown(self.cut_tails(scrubbed))
    }

    /// The matchers of every entry's secrets held now (empty ones left out).
    fn matchers(&self) -> Vec<Arc<Matcher>> {
        self.sets
            .iter()
            .map(|set| Arc::clone(&set.read().unwrap_or_else(|e| e.into_inner()).matcher))
            .filter(|m| !m.is_empty())
            .collect()
    }

    /// `text` with what a cut left of any entry's secret scrubbed: before each `…` (the mark
    /// of every cut, `limits::truncate`), an end of at least [`MIN_CUT_TAIL_BYTES`] that is a
    /// prefix of a secret form becomes `[redacted]`. A server's text is cut after its own
    /// entry's scrub ([`Redactor::scrub_cut`], which takes even one byte), and that does not
    /// know the other entries' secrets; this is where all of them are known. Shorter ends are
    /// kept: every cut text ending in a letter some secret starts with would lose it otherwise.
    fn cut_tails(&self, text: String) -> String {
        const CUT: &str = "\u{2026}";
        if !text.contains(CUT) {
            return text;
        }
        let sets: Vec<_> = self
            .sets
            .iter()
            .map(|set| set.read().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(CUT) {
            let before = &rest[..at];
            let tail = sets
                .iter()
                .filter_map(|set| set.cut_tail(before, MIN_CUT_TAIL_BYTES))
                .max();
            match tail {
                Some(len) => {
                    out.push_str(&before[..before.len() - len]);
                    out.push_str(REDACTED);
                }
                None => out.push_str(before),
            }
            out.push_str(CUT);
            rest = &rest[at + CUT.len()..];
        }
        out.push_str(rest);
        out
    }
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gate({} entries)", self.sets.len())
    }
}

/// Text that has passed the [`Gate`], and so may leave the Pack; made only by
/// [`Gate::pass`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Shown(String);

impl Shown {
    /// The text, to hand to the Host.
    pub(crate) fn into_string(self) -> String {
        self.0
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.read().configured.len())
    }
}

/// Keeps at most this many learned tokens per server (the newest): a long-running Pack refreshes
/// its tokens for days, and a token older than these is long expired. Client credentials
/// ([`Learned::Credential`]) are not counted: they stay.
const MAX_LEARNED: usize = 64;

/// Keeps at most this many learned client assertions per server (the newest), in a list of
/// their own: each client credentials request signs one (valid for five minutes), also each one
/// that fails, and none of them may push out a token still in use.
const MAX_ASSERTIONS: usize = 16;

/// Keeps at most this many learned JWT heads per server (the newest), in a list of their own:
/// each new grant (a code exchange, every client credentials renewal, failed ones too) makes a
/// DPoP key, and a Pack that renews for days must not grow with its uptime. A server holds one
/// grant at a time, so its key is always among the newest.
const MAX_JWT_HEADS: usize = 16;

/// Called with every secret the Pack learns at run time, and how long it lives, so the entry's
/// redactor scrubs it from server text ([`Redactor::learner`]).
pub(crate) type LearnSecret = dyn Fn(&SecretString, Learned) + Send + Sync;

/// Whether a text that must go out whole holds a secret of the entry
/// ([`Redactor::shown_checker`]).
pub(crate) type HoldsSecret = dyn Fn(&str) -> bool + Send + Sync;

/// How long a secret learned at run time stays worth scrubbing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Learned {
    /// A secret that rotates (an access or refresh token): the newest [`MAX_LEARNED`] are
    /// kept.
    Token,
    /// A signed client assertion (RFC 7523), valid for minutes: the newest [`MAX_ASSERTIONS`]
    /// are kept, apart from the tokens.
    Assertion,
    /// A long-lived client credential (a registered client's secret, its
    /// `client_secret_basic` form): kept for the redactor's whole life.
    Credential,
    /// The first segment of every JWT a long-lived key signs (a DPoP proof's JOSE header,
    /// which holds the public key, RFC 9449 §4.2): the newest [`MAX_JWT_HEADS`] are kept,
    /// apart from the tokens, and an occurrence also covers the rest of the JWT after it (its payload and signature segments,
    /// [`jwt_rest`]), so an echoed proof is scrubbed whole although no two proofs are alike.
    JwtHead,
}

/// Where a secret's text comes from: only a configured value as written may hold placeholders
/// sent as written (`${API_KEY}`: the config's own text, named by hints), which are no secret on
/// their own; any other secret (an `${env:NAME}` value, a token) is one whatever it looks like.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A header value as the config wrote it, its `${env:NAME}`s expanded.
    Written,
    /// Any other secret.
    Secret,
}

/// Pushes `value`, and each whitespace-separated word of it, when long enough, onto `forms`
/// unless there already; also the forms the value takes inside a JSON string, when they differ
/// (see [`json_escaped_forms`]). Of a [`Source::Written`] value, a word that is a placeholder
/// sent as written is skipped.
fn push_forms(forms: &mut Vec<SecretString>, value: &str, source: Source) {
    let words = value.split_whitespace();
    for candidate in std::iter::once(value).chain(words) {
        if candidate.len() < MIN_SECRET_BYTES
            || (source == Source::Written && crate::substitute::is_quotable_placeholder(candidate))
        {
            continue;
        }
        for form in std::iter::once(candidate.to_string()).chain(json_escaped_forms(candidate)) {
            if form.len() >= MIN_SECRET_BYTES && !forms.iter().any(|s| s.expose_secret() == form) {
                forms.push(SecretString::from(form));
            }
        }
    }
}

/// [`push_forms`] for `value` and for each percent-encoded form of it and of its words (see the
/// module docs).
fn push_secret_forms(forms: &mut Vec<SecretString>, value: &str, source: Source) {
    push_forms(forms, value, source);
    for word in std::iter::once(value).chain(value.split_whitespace()) {
        for form in percent_encoded_forms(word) {
            // Upper-case hex only: a text is also searched with its escapes' digits in upper
            // case (`covered_by`), so `%2f` and `%2F`, mixed in one occurrence too, both match.
            if form != word {
                push_forms(forms, &form, source);
            }
        }
    }
}

impl Redactor {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, SecretSet> {
        self.set.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The matchers of every form held now: of every entry of the Pack once joined
    /// ([`Redactor::join`]), else of this entry.
    fn matchers(&self) -> Vec<Arc<Matcher>> {
        match self.pack.get() {
            Some(gate) => gate.matchers(),
            None => vec![Arc::clone(&self.read().matcher)],
        }
    }

    /// Makes every scrub of this redactor (and of the scrubbers it made) take the secrets of
    /// every entry `pack` holds, configured and learned, now and later; `pack` should hold
    /// this redactor's own secrets too (the Pack's [`Gate`] does). [`Redactor::scrub_cut`]
    /// then also takes a cut end of at least [`MIN_CUT_TAIL_BYTES`] that starts another
    /// entry's secret, as [`Gate::pass`] does. A second call changes nothing.
    pub(crate) fn join(&self, pack: &Gate) {
        let _ = self.pack.set(pack.clone());
    }

    /// A redactor sharing this one's secrets and Pack.
    fn share(&self) -> Redactor {
        Redactor {
            set: Arc::clone(&self.set),
            pack: Arc::clone(&self.pack),
        }
    }

    /// Adds `value`, and each whitespace-separated word of it, when long enough; also the forms
    /// the value takes inside a JSON string, when they differ (see [`json_escaped_forms`]).
    pub(crate) fn add(&mut self, value: &str) {
        let mut set = self.set.write().unwrap_or_else(|e| e.into_inner());
        push_forms(&mut set.configured, value, Source::Secret);
        set.rebuild();
    }

    /// A function that adds a secret learned at run time (a sign-in's access or refresh token,
    /// a registered client's secret, a client assertion) to this redactor, from any thread, in
    /// the same forms as a configured secret ([`Redactor::add_secret`]); values shorter than
    /// [`MIN_SECRET_BYTES`] are skipped. Of the [`Learned::Token`]s the newest [`MAX_LEARNED`]
    /// are kept, of the [`Learned::Assertion`]s [`MAX_ASSERTIONS`] and of the
    /// [`Learned::JwtHead`]s [`MAX_JWT_HEADS`], each in a list of its own; every
    /// [`Learned::Credential`] is kept.
    pub(crate) fn learner(&self) -> impl Fn(&SecretString, Learned) + Send + Sync + 'static {
        let set = Arc::clone(&self.set);
        move |secret: &SecretString, lifetime: Learned| {
            let secret = secret.expose_secret();
            if secret.len() < MIN_SECRET_BYTES {
                return;
            }
            let mut set = set.write().unwrap_or_else(|e| e.into_inner());
            let named = |forms: &Vec<SecretString>| {
                forms.first().is_some_and(|s| s.expose_secret() == secret)
            };
            if set.credentials.iter().chain(&set.jwt_heads).any(named) {
                return;
            }
            if lifetime == Learned::Token && set.learned.iter().any(named) {
                return;
            }
            if lifetime == Learned::Assertion && set.assertions.iter().any(named) {
                return;
            }
            // The value as given comes first: it names the group.
            let mut group = vec![SecretString::from(secret.to_string())];
            push_secret_forms(&mut group, secret, Source::Secret);
            match lifetime {
                Learned::Token => {
                    if set.learned.len() >= MAX_LEARNED {
                        set.learned.pop_front();
                    }
                    set.learned.push_back(group);
                }
                Learned::Credential => {
                    set.learned.retain(|forms| !named(forms));
                    set.credentials.push(group);
                }
                Learned::Assertion => {
                    if set.assertions.len() >= MAX_ASSERTIONS {
                        set.assertions.pop_front();
                    }
                    set.assertions.push_back(group);
                }
                Learned::JwtHead => {
                    set.learned.retain(|forms| !named(forms));
                    if set.jwt_heads.len() >= MAX_JWT_HEADS {
                        set.jwt_heads.pop_front();
                    }
                    set.jwt_heads.push_back(group);
                }
            }
            set.rebuild();
        }
    }

    /// A function telling whether a text that is useless scrubbed and must be shown whole (a
    /// sign-in link a user opens) holds a secret this redactor knows, configured or learned,
    /// now or later, in any registered form, anywhere but inside an occurrence of one of the
    /// `public` values (the entry's own client id, say, which the link must carry although the
    /// config took it from `${env:NAME}`). Nothing is removed from the text first: a secret
    /// that contains a public value, or overlaps one, is found all the same.
    ///
    /// The text is looked at as shown and as a browser or a reader may decode it
    /// ([`shown_views`]: percent-decoded, `+` as a space, up to [`MAX_DECODES`] times over), and
    /// secrets are matched ignoring ASCII case (a URL parser lower-cases a host). A public
    /// value counts as written and form-urlencoded, matched exactly. When no matcher can be
    /// built over the secrets, every text counts as holding one.
    pub(crate) fn shown_checker(
        &self,
        public: Vec<String>,
    ) -> impl Fn(&str) -> bool + Send + Sync + 'static {
        let redactor = self.share();
        let public: Vec<String> = public
            .into_iter()
            .filter(|value| !value.is_empty())
            .flat_map(|value| {
                let encoded: String =
                    url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
                [value, encoded]
            })
            .collect();
        move |text: &str| {
            let automaton = {
                let set = redactor.read();
                let forms: Vec<&[u8]> = set.forms().map(|s| s.expose_secret().as_bytes()).collect();
                if forms.is_empty() {
                    return false;
                }
                let built = AhoCorasick::builder()
                    .match_kind(MatchKind::Standard)
                    .ascii_case_insensitive(true)
                    .build(&forms)
                    .or_else(|_| {
                        AhoCorasick::builder()
                            .match_kind(MatchKind::Standard)
                            .ascii_case_insensitive(true)
                            .kind(Some(aho_corasick::AhoCorasickKind::NoncontiguousNFA))
                            .build(&forms)
                    });
                match built {
                    Ok(automaton) => automaton,
                    Err(_) => return true,
                }
            };
            shown_views(text).iter().any(|view| {
                let allowed = occurrences(view, &public);
                automaton.find_overlapping_iter(view.as_str()).any(|found| {
                    !allowed
                        .iter()
                        .any(|span| span.start <= found.start() && found.end() <= span.end)
                })
            })
        }
    }

    /// [`Redactor::add`] for `value` and for each percent-encoded form of it and of its words
    /// (see the module docs): how a secret reads when a server echoes a request back as a URL
    /// or a form.
    ///
    /// A `Basic` credential (RFC 7617 §2: the scheme, then `base64(user-id ":" password)`)
    /// is also added decoded: the `user-id:password` text, the user id and the password, each
    /// in all its forms, since a server that decodes the header may quote what it read
    /// ([`basic_credentials`]). No other base64 form is made (docs/configuration.md,
    /// "Secrets").
    pub(crate) fn add_secret(&mut self, value: &str) {
        self.add_from(value, Source::Secret);
    }

    /// [`Redactor::add_secret`] for a header value as the config wrote it, its `${env:NAME}`s
    /// expanded (each of which is also added on its own, as a secret): a word of it that is a
    /// placeholder sent as written ([`crate::substitute::is_quotable_placeholder`]) is the
    /// config's text, which hints name, and no secret on its own.
    pub(crate) fn add_written(&mut self, value: &str) {
        self.add_from(value, Source::Written);
    }

    fn add_from(&mut self, value: &str, source: Source) {
        let mut set = self.set.write().unwrap_or_else(|e| e.into_inner());
        push_secret_forms(&mut set.configured, value, source);
        if let Some(decoded) = basic_credentials(value) {
            push_secret_forms(&mut set.configured, &decoded, source);
            if let Some((user, password)) = decoded.split_once(':') {
                push_secret_forms(&mut set.configured, user, source);
                push_secret_forms(&mut set.configured, password, source);
            }
        }
        set.rebuild();
    }

    /// `text` with every known secret replaced by [`REDACTED`]; borrowed when nothing matched.
    ///
    /// The rule ([`scrub_plain`]): every byte that some occurrence of some form covers is
    /// scrubbed, and each maximal run of such bytes (occurrences that overlap or touch) becomes
    /// one [`REDACTED`]. So secrets that overlap (`abcd` and `cdef` in `abcdef`), sit side by
    /// side, or contain one another leave no byte of either behind. One pass over `text`; a
    /// second over its JSON escapes decoded when it holds a backslash.
    pub(crate) fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        scrub_plain(&self.matchers(), text)
    }

    /// [`Redactor::scrub`] for text that was cut from a longer one (an error body's preview):
    /// a tail that is the start of a secret, which the cut split, is replaced by [`REDACTED`]
    /// too, so no prefix of a secret survives the cut.
    pub(crate) fn scrub_cut<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let scrubbed = self.scrub(text);
        let own = self.read().cut_tail(&scrubbed, 1);
        // Joined, what the cut left of another entry's secret goes too, as the gate takes it.
        let others = self.pack.get().and_then(|gate| {
            gate.sets
                .iter()
                .filter(|set| !Arc::ptr_eq(set, &self.set))
                .filter_map(|set| {
                    let set = set.read().unwrap_or_else(|e| e.into_inner());
                    set.cut_tail(&scrubbed, MIN_CUT_TAIL_BYTES)
                })
                .max()
        });
        let tail = own.max(others);
        match tail {
            None => scrubbed,
            Some(len) => {
                let kept = &scrubbed[..scrubbed.len() - len];
                Cow::Owned(format!("{kept}{REDACTED}"))
            }
        }
    }

    /// Scrubs `text` by the JSON rule ([`scrub_json_text`]): JSON text stays valid JSON (a
    /// schema, annotations, `structuredContent`), also where a secret hides behind JSON escapes
    /// other than serde_json's own (`\/`, `\u0041`), under a key named twice, or in a number;
    /// text that is not JSON is scrubbed as plain text ([`Redactor::scrub`]).
    pub(crate) fn scrub_json<'a>(&self, text: &'a str) -> Cow<'a, str> {
        scrub_json_text(&self.matchers(), text)
    }

    /// A function scrubbing text like [`Redactor::scrub`], from any thread, with this redactor's
    /// configured secrets and every secret learned now or later; for text made far from the
    /// entry, such as a sign-in's failure reasons.
    pub(crate) fn scrubber(&self) -> impl Fn(&str) -> String + Send + Sync + 'static {
        let redactor = self.share();
        move |text: &str| redactor.scrub(text).into_owned()
    }

    /// [`Redactor::scrub`] into an owned string.
    pub(crate) fn scrub_owned(&self, text: String) -> String {
        match self.scrub(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(scrubbed) => scrubbed,
        }
    }
}

/// The `user-id:password` text of `value` when it is an HTTP `Basic` credential (RFC 7617
/// §2): the scheme name in any case, one space, then the standard base64 (RFC 4648 §4) of
/// UTF-8 text holding a `:` and no control character. `None` for anything else.
fn basic_credentials(value: &str) -> Option<String> {
    use base64::Engine as _;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    String::from_utf8(decoded)
        .ok()
        .filter(|text| text.contains(':') && !text.contains(char::is_control))
}

/// How many times over [`shown_views`] percent-decodes a text: a link encoded twice or three
/// times still shows its secret to whoever decodes it.
const MAX_DECODES: usize = 4;

/// `text` as shown, then as decoded: percent-decoded again and again until nothing changes (at
/// most [`MAX_DECODES`] times), once taking `+` as written and once as a space (a form,
/// `application/x-www-form-urlencoded`). Bytes that are no UTF-8 become U+FFFD.
fn shown_views(text: &str) -> Vec<String> {
    let mut views = vec![text.to_string()];
    for plus_is_space in [false, true] {
        let mut view = text.to_string();
        for _ in 0..MAX_DECODES {
            let spaced = if plus_is_space {
                view.replace('+', " ")
            } else {
                view.clone()
            };
            let decoded = percent_encoding::percent_decode_str(&spaced)
                .decode_utf8_lossy()
                .into_owned();
            if decoded == view {
                break;
            }
            if !views.contains(&decoded) {
                views.push(decoded.clone());
            }
            view = decoded;
        }
    }
    views
}

/// The byte ranges of every occurrence of every value of `values` in `text`, overlapping ones
/// included.
fn occurrences(text: &str, values: &[String]) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    for value in values {
        let mut from = 0;
        while let Some(at) = text.get(from..).and_then(|rest| rest.find(value.as_str())) {
            let start = from + at;
            spans.push(start..start + value.len());
            // On to the next char boundary after this occurrence's start.
            from = start + text[start..].chars().next().map_or(1, char::len_utf8);
        }
    }
    spans
}

/// JavaScript's `encodeURIComponent` leaves these alone: letters, digits and `-_.!~*'()`.
const URI_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// Python's `urllib.parse.quote_plus` (and `urlencode`, a form) leaves these alone: letters,
/// digits and `_.-~`; it writes a space as `+`.
const PYTHON_QUOTE_PLUS: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b'~');

/// Python's `urllib.parse.quote` leaves these alone: letters, digits, `_.-~` and `/`.
const PYTHON_QUOTE: &AsciiSet = &PYTHON_QUOTE_PLUS.remove(b'/');

/// How a JSON encoder escapes beyond `"`, `\\` and control characters (which all escape).
#[derive(Clone, Copy)]
struct JsonEscapes {
    /// `/` as `\/` (PHP's `json_encode`).
    slash: bool,
    /// Non-ASCII as `\u00e4`, beyond the BMP as a surrogate pair (Python's `json.dumps`, PHP).
    ascii: bool,
    /// `<`, `>`, `&`, U+2028 and U+2029 as `\u003c` … (Go's `encoding/json`).
    html: bool,
}

impl JsonEscapes {
    /// serde_json and JavaScript, PHP, PHP with `JSON_UNESCAPED_UNICODE`, Python, Go.
    const ENCODERS: [JsonEscapes; 5] = [
        JsonEscapes::new(false, false, false),
        JsonEscapes::new(true, true, false),
        JsonEscapes::new(true, false, false),
        JsonEscapes::new(false, true, false),
        JsonEscapes::new(false, false, true),
    ];

    const fn new(slash: bool, ascii: bool, html: bool) -> Self {
        Self { slash, ascii, html }
    }

    /// `minimal` (a JSON string's content as serde_json writes it) with these escapes added.
    /// None of the characters they escape is part of one of serde_json's escapes.
    fn apply(self, minimal: &str) -> String {
        let mut out = String::with_capacity(minimal.len());
        for c in minimal.chars() {
            let escaped = match c {
                '/' => self.slash,
                '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => self.html,
                _ => self.ascii && !c.is_ascii(),
            };
            if !escaped {
                out.push(c);
            } else if c == '/' {
                out.push_str("\\/");
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
        out
    }
}

/// The forms `text` takes inside a JSON string (RFC 8259 §7) as common encoders write it (see
/// [`JsonEscapes::ENCODERS`]), when they differ from `text`. Hex digits are lower case, as those
/// encoders write them. Linear in `text`; at most five forms.
fn json_escaped_forms(text: &str) -> Vec<String> {
    // A JSON string of a &str always serializes, quotes included.
    let quoted = serde_json::to_string(text).unwrap_or_default();
    let minimal = quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or("");
    let mut forms: Vec<String> = Vec::new();
    for encoder in JsonEscapes::ENCODERS {
        let form = encoder.apply(minimal);
        if form != text && !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// The percent-encoded forms of `text`, deduplicated (the text itself may be among them).
fn percent_encoded_forms(text: &str) -> Vec<String> {
    let mut forms: Vec<String> = Vec::new();
    let mut push = |form: String| {
        if !forms.contains(&form) {
            forms.push(form);
        }
    };
    for set in [NON_ALPHANUMERIC, URI_COMPONENT, PYTHON_QUOTE] {
        push(utf8_percent_encode(text, set).to_string());
    }
    // A form (application/x-www-form-urlencoded) turns spaces into `+`: as JavaScript's
    // URLSearchParams-style encoders and Python's `quote_plus` write it.
    for set in [URI_COMPONENT, PYTHON_QUOTE_PLUS] {
        push(
            utf8_percent_encode(text, set)
                .to_string()
                .replace("%20", "+"),
        );
    }
    // What the URL parser makes of it in a path, a query and a password.
    if let Ok(mut url) = reqwest::Url::parse("http://h/") {
        url.set_path(text);
        push(url.path().trim_start_matches('/').to_string());
        url.set_query(Some(text));
        push(url.query().unwrap_or_default().to_string());
        if url.set_password(Some(text)).is_ok() {
            push(url.password().unwrap_or_default().to_string());
        }
    }
    forms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubs_whole_values_words_and_json_escaped_forms() {
        let mut r = Redactor::default();
        r.add("Bearer tok-1234567890");
        r.add("short");
        r.add(r#"quote"inside-it"#);
        assert_eq!(
            r.scrub("got Bearer tok-1234567890 and tok-1234567890"),
            "got [redacted] and [redacted]"
        );
        assert_eq!(r.scrub("short stays"), "short stays");
        assert_eq!(
            r.scrub(r#"{"v":"quote\"inside-it"}"#),
            r#"{"v":"[redacted]"}"#
        );
        assert!(matches!(r.scrub("nothing here"), Cow::Borrowed(_)));
        assert_eq!(format!("{r:?}"), "Redactor(4 secrets)");
    }

    #[test]
    fn json_scrubbing_sees_through_other_escapes() {
        let mut r = Redactor::default();
        r.add("tok/abc+def/ghi123");
        let escaped =
            r#"{"a":"tok\/abc+def\/ghi\u0031\u00323","tok\/abc+def\/ghi123":1,"n":[1,"x"]}"#;
        assert_eq!(
            r.scrub_json(escaped),
            r#"{"a":"[redacted]","[redacted]":1,"n":[1,"x"]}"#
        );
        let plain = r#"{"b":"tok/abc+def/ghi123","a":2}"#;
        assert_eq!(r.scrub_json(plain), r#"{"b":"[redacted]","a":2}"#);
        let clean = r#"{"q":"line\nbreak"}"#;
        assert!(matches!(r.scrub_json(clean), Cow::Borrowed(_)));
        assert_eq!(
            r.scrub_json("not json tok/abc+def/ghi123 \\"),
            "not json [redacted] \\"
        );
    }

    /// The JSON rule: strings and keys keep their other text, a number or literal holding a
    /// secret becomes the string "[redacted]", a key named twice is scrubbed twice, the text
    /// stays JSON and is otherwise kept byte for byte.
    #[test]
    fn the_json_rule_keeps_json_valid() {
        let mut r = Redactor::default();
        r.add("20240517123456789");
        r.add("sk/secret-value");
        let cases = [
            (
                r#"{"n": 20240517123456789, "m": [1, 20240517123456789.5e3]}"#,
                r#"{"n": "[redacted]", "m": [1, "[redacted]"]}"#,
            ),
            (
                r#"{"a":"sk/secret-value","a":"\/"}"#,
                r#"{"a":"[redacted]","a":"\/"}"#,
            ),
            (
                r#"{"sk\/secret-value":1,"k":"x \u0073k\/secret-value y"}"#,
                r#"{"[redacted]":1,"k":"x [redacted] y"}"#,
            ),
            // A JSON string holding JSON text with escapes of its own.
            (
                r#"["{\"v\":\"\\u0073k\\/secret-value\"}"]"#,
                r#"["{\"v\":\"[redacted]\"}"]"#,
            ),
            (r#""sk/secret-value""#, r#""[redacted]""#),
            ("20240517123456789", r#""[redacted]""#),
        ];
        for (json, scrubbed) in cases {
            assert_eq!(r.scrub_json(json), scrubbed, "{json}");
            serde_json::from_str::<serde::de::IgnoredAny>(scrubbed).unwrap();
        }
        // Clean JSON is borrowed, escapes and all.
        assert!(matches!(
            r.scrub_json(r#"{"a":"\/\u0041","n":12}"#),
            Cow::Borrowed(_)
        ));
        // A secret across tokens: the plain scrub, kept JSON as one string.
        let mut across = Redactor::default();
        across.add(r#"ab","c":"de"#);
        assert_eq!(
            across.scrub_json(r#"{"x":"ab","c":"de"}"#),
            r#"{"x":"[redacted]"}"#
        );
        // One whose plain scrub is no JSON: shown as one JSON string.
        across.add(r#"abcx":{"y"#);
        assert_eq!(
            across.scrub_json(r#"{"abcx":{"y":1}}"#),
            r#""{\"[redacted]\":1}}""#
        );
    }

    /// The plain rule reads JSON escapes wherever they stand, and scrubs the escapes whole.
    #[test]
    fn a_secret_escaped_in_any_json_way_is_scrubbed_in_plain_text() {
        let mut r = Redactor::default();
        r.add("sk/secret-valué");
        assert_eq!(
            r.scrub(r#"HTTP 500: {"a":"\u0073\u006b\u002f\u0073ecret-valu\u00e9"} x"#),
            r#"HTTP 500: {"a":"[redacted]"} x"#
        );
        assert_eq!(r.scrub(r"a sk\/secret-valu\u00e9\n b"), r"a [redacted]\n b");
        // A lone surrogate or a bad escape is kept as written.
        assert_eq!(r.scrub(r"\ud800 \q \u12"), r"\ud800 \q \u12");
        let view = Unescaped::new(r"x\u00e9y\/z");
        assert_eq!(view.text, "xéy/z");
        // "é" (2 bytes) came from 6, "y/" from "y\/".
        assert_eq!(view.origin(1..3), 1..7);
        assert_eq!(view.origin(3..5), 7..10);
        assert_eq!(view.origin(0..1), 0..1);
        assert_eq!(view.origin(5..6), 10..11);
    }

    /// A `${NAME}` the Pack sent as written is the config's text, named by a reason's hint;
    /// the value around it is still a secret.
    #[test]
    fn an_unexpanded_placeholder_alone_is_no_secret() {
        let mut r = Redactor::default();
        r.add_written("Bearer ${API_KEY}");
        r.add_written("${workspaceFolder:my-app}");
        assert_eq!(
            r.scrub("holds ${API_KEY} and ${workspaceFolder:my-app}; sent Bearer ${API_KEY}"),
            "holds ${API_KEY} and ${workspaceFolder:my-app}; sent [redacted]"
        );
        let quotable = crate::substitute::is_quotable_placeholder;
        assert!(quotable("${API_KEY}"));
        assert!(quotable("${input:github-token}"));
        assert!(!quotable("${a}${b}"));
        assert!(!quotable("x${API_KEY}"));
        // What looks like a pasted secret is one, placeholder or not.
        assert!(!quotable("${sk_live_0123456789abcdef}"));
        assert!(quotable("${API_KEY:-sk-fallback-0123456789}"));
        assert!(!quotable("${sk_live_01234:-sk-fallback-0123456789}"));
        r.add_written("Bearer ${sk_live_0123456789abcdef}");
        assert_eq!(
            r.scrub("holds ${sk_live_0123456789abcdef}"),
            "holds [redacted]"
        );
    }

    /// The gate scrubs with every entry's secrets, learned later too, by the JSON rule.
    #[test]
    fn the_gate_scrubs_every_entrys_secrets_by_the_json_rule() {
        let mut a = Redactor::default();
        a.add("alpha-secret-1");
        let b = Redactor::default();
        let gate = Gate::new([&a, &b]);
        let learn = b.learner();
        learn(&SecretString::from("beta-token-000002"), Learned::Token);
        assert_eq!(
            gate.pass(r#"{"x":"alpha-secret-1 beta-token-000002","n":1}"#.to_string())
                .into_string(),
            r#"{"x":"[redacted] [redacted]","n":1}"#
        );
        assert_eq!(
            gate.pass("plain alpha-secret-1".to_string()).into_string(),
            "plain [redacted]"
        );
        assert_eq!(Gate::default().pass("x".to_string()).into_string(), "x");
        assert_eq!(format!("{gate:?}"), "Gate(2 entries)");
    }

    #[test]
    fn the_gate_scrubs_what_a_cut_left_of_any_entrys_secret_from_four_bytes_on() {
        let mut a = Redactor::default();
        a.add("alpha-secret-1");
        let gate = Gate::new([&a]);
        let pass = |text: &str| gate.pass(text.to_string()).into_string();
        assert_eq!(pass("cut alpha-sec\u{2026}"), "cut [redacted]\u{2026}");
        assert_eq!(
            pass("{\"d\":\"x alph\u{2026}\"}"),
            "{\"d\":\"x [redacted]\u{2026}\"}"
        );
        // Three bytes are kept: ordinary words end in a secret's first letters.
        assert_eq!(pass("the alp\u{2026}"), "the alp\u{2026}");
        // No cut, no tail: a prefix of a secret that ends the text is the text's own.
        assert_eq!(pass("cut alpha-sec"), "cut alpha-sec");
    }

    #[test]
    fn tokens_learned_at_run_time_are_scrubbed() {
        let mut r = Redactor::default();
        r.add("configured-secret-1");
        let learn = r.learner();
        learn(&SecretString::from("access-token-000042"), Learned::Token);
        learn(&SecretString::from("access-token-000042"), Learned::Token);
        learn(&SecretString::from("short"), Learned::Token);
        assert_eq!(
            r.scrub("Bearer access-token-000042 and configured-secret-1, short"),
            "Bearer [redacted] and [redacted], short"
        );
        assert_eq!(
            r.scrub_json(r#"{"t":"access-token-000042"}"#),
            r#"{"t":"[redacted]"}"#
        );
        for n in 0..MAX_LEARNED {
            learn(
                &SecretString::from(format!("rotated-token-{n:04}")),
                Learned::Token,
            );
        }
        assert_eq!(
            r.scrub("access-token-000042"),
            "access-token-000042",
            "the oldest goes"
        );
        assert_eq!(r.scrub("rotated-token-0063"), "[redacted]");
        assert_eq!(format!("{r:?}"), "Redactor(1 secrets)");
    }

    #[test]
    fn a_learned_client_credential_outlives_any_number_of_tokens() {
        let r = Redactor::default();
        let learn = r.learner();
        learn(
            &SecretString::from("client-secret-000001"),
            Learned::Credential,
        );
        // Learned as a token first, then as a credential: it becomes a credential.
        learn(&SecretString::from("basic-credential-01"), Learned::Token);
        learn(
            &SecretString::from("basic-credential-01"),
            Learned::Credential,
        );
        for n in 0..MAX_LEARNED * 3 {
            learn(
                &SecretString::from(format!("rotated-token-{n:04}")),
                Learned::Token,
            );
        }
        assert_eq!(
            r.scrub(
                "client-secret-000001 basic-credential-01 rotated-token-0000 rotated-token-0191"
            ),
            "[redacted] [redacted] rotated-token-0000 [redacted]"
        );
    }

    #[test]
    fn a_shown_text_holds_a_secret_anywhere_but_inside_a_public_value() {
        let mut r = Redactor::default();
        r.add_secret("docs-app-4f9a8b7c6d5e");
        r.add_secret("Cloud Key/77");
        let check = r.shown_checker(vec!["docs-app".into(), "x-docs-app-4f9a8b7c6d5e-y".into()]);
        let holding = [
            "https://as.example/authorize?t=docs-app-4f9a8b7c6d5e&client_id=docs-app",
            "https://as.example/authorize/docs-app-4f9a8b7c6d5e",
            // Percent-encoded, every byte or twice over; a host a URL parser lower-cased.
            "https://as.example/a?t=%64%6F%63%73%2D%61%70%70-4f9a8b7c6d5e",
            "https://as.example/a?t=%2564ocs-app-4f9a8b7c6d5e",
            "https://docs-app-4f9a8b7c6d5e.as.example/a",
            "https://as.example/a?t=cloud+key%2F77",
            "https://as.example/a?t=CLOUD%20KEY/77",
        ];
        for text in holding {
            assert!(check(text), "{text}");
        }
        let clean = [
            "https://as.example/authorize?client_id=docs-app&app=docs-app",
            // Inside a public value the secret is as public as the value.
            "https://as.example/a?v=x-docs-app-4f9a8b7c6d5e-y",
            "https://as.example/a?v=x-docs-app-4f9a8b7c6d5e-y%2B",
            "https://as.example/a?t=docs-app-4f9a8b7c6d5",
        ];
        for text in clean {
            assert!(!check(text), "{text}");
        }
        // Learned later, found later.
        let learn = r.learner();
        learn(&SecretString::from("learned-token-000001"), Learned::Token);
        assert!(check("https://as.example/a?t=learned-token-000001"));
        assert!(!Redactor::default().shown_checker(Vec::new())(
            "https://as.example/a"
        ));
    }

    #[test]
    fn secrets_are_scrubbed_in_every_percent_encoded_form() {
        let mut r = Redactor::default();
        r.add_secret("Bearer tok/a b+c'(x)~");
        // encodeURIComponent, quote(), form encoding, every non-alphanumeric byte, and the URL
        // parser's query form; of the whole value and of each word.
        assert_eq!(
            r.scrub(
                "js Bearer%20tok%2Fa%20b%2Bc'(x)~ py Bearer%20tok/a%20b%2Bc%27%28x%29~ \
                 form Bearer+tok%2Fa+b%2Bc'(x)~ all Bearer%20tok%2Fa%20b%2Bc%27%28x%29%7E \
                 query Bearer%20tok/a%20b+c'(x)~ word tok%2Fa raw Bearer tok/a b+c'(x)~"
            ),
            "js [redacted] py [redacted] form [redacted] all [redacted] query [redacted] \
             word tok%2Fa raw [redacted]"
        );
        let mut words = Redactor::default();
        words.add_secret("Bearer tok/abcdefgh");
        assert_eq!(
            words.scrub("tok%2Fabcdefgh tok/abcdefgh"),
            "[redacted] [redacted]"
        );
    }

    #[test]
    fn secrets_are_scrubbed_in_every_json_escaped_form() {
        let mut r = Redactor::default();
        r.add("k3y/pässwort-\u{1F511}\"x");
        // serde_json/JavaScript, PHP (`\/` and `\u`), Python (`\u` with a surrogate pair), and
        // `\/` alone (PHP with JSON_UNESCAPED_UNICODE).
        assert_eq!(
            r.scrub(concat!(
                r#"js k3y/pässwort-🔑\"x "#,
                r#"php k3y\/p\u00e4sswort-\ud83d\udd11\"x "#,
                r#"py k3y/p\u00e4sswort-\ud83d\udd11\"x "#,
                r#"slash k3y\/pässwort-🔑\"x"#
            )),
            "js [redacted] php [redacted] py [redacted] slash [redacted]"
        );
        let mut go = Redactor::default();
        go.add("tok<a>&b-1234");
        assert_eq!(
            go.scrub(r#"go tok\u003ca\u003e\u0026b-1234 raw tok<a>&b-1234"#),
            "go [redacted] raw [redacted]"
        );
        let mut ascii = Redactor::default();
        ascii.add("plain-ascii-token");
        assert_eq!(format!("{ascii:?}"), "Redactor(1 secrets)");
    }

    #[test]
    fn a_secret_split_by_a_cut_is_scrubbed_whole_and_partly() {
        let mut r = Redactor::default();
        r.add("sk-live-4f9a8b7c6d5e");
        r.add("other-secret-value");
        assert_eq!(
            r.scrub_cut("a sk-live-4f9a8b7c6d5e b sk-live-4f9a"),
            "a [redacted] b [redacted]"
        );
        assert_eq!(r.scrub_cut("ends in o"), "ends in [redacted]");
        assert_eq!(r.scrub_cut("nothing"), "nothing");
        assert!(matches!(r.scrub_cut("nothing"), Cow::Borrowed(_)));
        assert_eq!(r.scrub("b sk-live-4f9a"), "b sk-live-4f9a");
    }

    #[test]
    fn empty_redactor_borrows() {
        let r = Redactor::default();
        assert!(matches!(r.scrub("anything"), Cow::Borrowed("anything")));
        assert_eq!(r.scrub_owned("x".to_string()), "x");
    }

    /// Python's form encoding (`urllib.parse.urlencode`, `quote_plus`, what `requests` sends
    /// for `data=`) writes spaces as `+` and percent-encodes `!*'()`; README promises the ways
    /// forms and Python encode text. A passphrase whose words are each under 8 bytes is caught
    /// by no word, so only the whole-value form could scrub it.
    #[test]
    fn python_form_encoding_is_scrubbed() {
        let mut r = Redactor::default();
        r.add_secret("correct horse staple!");
        // urllib.parse.urlencode({"pw": "correct horse staple!"})
        assert_eq!(r.scrub("pw=correct+horse+staple%21"), "pw=[redacted]");
    }
    #[test]
    fn overlapping_adjacent_and_nested_secrets_leave_no_byte() {
        let mut r = Redactor::default();
        r.add("abcdefgh");
        r.add("efghijkl");
        r.add("mnopqrst");
        r.add("nopqrs-inner");
        r.add("opqrstuv");
        // Overlapping: leftmost-longest alone would leave "ijkl".
        assert_eq!(r.scrub("<abcdefghijkl>"), "<[redacted]>");
        // Side by side: one run, one marker.
        assert_eq!(r.scrub("abcdefghmnopqrst."), "[redacted].");
        // One inside another, and one reaching past it.
        assert_eq!(r.scrub("x mnopqrstuv y"), "x [redacted] y");
        assert_eq!(r.scrub("abcdefg hijkl"), "abcdefg hijkl");
        let learn = r.learner();
        learn(&SecretString::from("ghijklmn"), Learned::Token);
        assert_eq!(r.scrub("abcdefghijklmnopqrstuv!"), "[redacted]!");
    }

    #[test]
    fn a_learned_jwt_head_scrubs_every_jwt_it_starts_whole() {
        let r = Redactor::default();
        let learn = r.learner();
        let head = "eyJhbGciOiJFUzI1NiIsImp3ayI6e30";
        learn(&SecretString::from(head), Learned::JwtHead);
        // Two proofs of the key: same head, different claims and signatures; each goes whole
        // and the scrub stops at the first byte no JWT has.
        let text = format!(
            "proof {head}.eyJqdGkiOiIxIn0.c2lnLTE, again \"{head}.eyJqdGkiOiIyIn0.c2ln_LTI-\"!"
        );
        assert_eq!(r.scrub(&text), "proof [redacted], again \"[redacted]\"!");
        // Text after the signature segment is not the proof's.
        let text = format!("refused {head}.eyJqdGkiOiIxIn0.c2lnLTE.Retry-After_later");
        assert_eq!(r.scrub(&text), "refused [redacted].Retry-After_later");
        // Percent-encoded with every non-alphanumeric byte escaped, the same; `%20` ends it.
        let text = format!("q={head}%2EeyJqdGkiOiIzIn0%2Ec2ln%5FLTM%2d%20next");
        assert_eq!(r.scrub(&text), "q=[redacted]%20next");
        // A head cut short by a preview leaves no prefix of it behind.
        let cut = &head[..20];
        assert_eq!(r.scrub_cut(&format!("seen {cut}")), "seen [redacted]");
        // A preview that ends like every JWT starts keeps its letters.
        assert_eq!(r.scrub_cut("not acceptable"), "not acceptable");
        assert_eq!(r.scrub_cut("seen eyJhbGci"), "seen [redacted]");
        // It stays however many tokens come after it.
        for n in 0..(MAX_LEARNED + 2) {
            learn(
                &SecretString::from(format!("rotating-token-{n:04}")),
                Learned::Token,
            );
        }
        assert_eq!(r.scrub(&format!("{head}.x.y")), "[redacted]");
        // Learned again as a token, it keeps its reach.
        learn(&SecretString::from(head), Learned::Token);
        assert_eq!(r.scrub(&format!("{head}.x.y z")), "[redacted] z");
    }

    #[test]
    fn assertions_and_keys_of_many_renewals_neither_grow_nor_push_a_token_out() {
        let r = Redactor::default();
        let learn = r.learner();
        learn(&SecretString::from("live-access-token-1"), Learned::Token);
        // Renewals, failed ones too, each sign an assertion and make a key.
        for n in 0..MAX_ASSERTIONS.max(MAX_JWT_HEADS) * 8 {
            learn(
                &SecretString::from(format!("eyJhbGciOiJFUzI1NiJ9.assertion-{n:04}.sig")),
                Learned::Assertion,
            );
            learn(
                &SecretString::from(format!("eyJ0eXAiOiJkcG9wK2p3dCJ9key{n:04}")),
                Learned::JwtHead,
            );
        }
        assert_eq!(r.scrub("echo live-access-token-1"), "echo [redacted]");
        let set = r.read();
        assert_eq!(
            (set.assertions.len(), set.jwt_heads.len(), set.learned.len()),
            (MAX_ASSERTIONS, MAX_JWT_HEADS, 1)
        );
        drop(set);
        let last = MAX_ASSERTIONS.max(MAX_JWT_HEADS) * 8 - 1;
        assert_eq!(
            r.scrub(&format!("eyJ0eXAiOiJkcG9wK2p3dCJ9key{last:04}.p.s x")),
            "[redacted] x"
        );
        assert_eq!(
            r.scrub(&format!("eyJhbGciOiJFUzI1NiJ9.assertion-{last:04}.sig")),
            "[redacted]"
        );
    }

    #[test]
    fn percent_encodings_in_lower_case_hex_are_scrubbed_too() {
        let mut r = Redactor::default();
        r.add_secret("sk/live-secret_1");
        assert_eq!(r.scrub("a=sk%2Flive-secret_1&"), "a=[redacted]&");
        assert_eq!(r.scrub("a=sk%2flive-secret_1&"), "a=[redacted]&");
        assert_eq!(r.scrub("a=sk%2flive%2dsecret%5f1&"), "a=[redacted]&");
        let learner = r.learner();
        let head = "eyJhbGciOiJFUzI1NiIsImp3ayI6e30-x_y";
        learner(&SecretString::from(head), Learned::JwtHead);
        let lower = head.replace('-', "%2d").replace('_', "%5f");
        let text = format!("q={lower}%2eeyJqdGkiOiIzIn0%2ec2ln%20next");
        assert_eq!(r.scrub(&text), "q=[redacted]%20next");
    }

    /// Some servers re-encode a URL and write the hex digits of each escape in whatever case
    /// they like, even both cases in one occurrence (RFC 3986 §2.1: they are equivalent).
    #[test]
    fn percent_encodings_in_mixed_case_hex_are_scrubbed() {
        let mut r = Redactor::default();
        r.add_secret("sk/live-secret_1");
        assert_eq!(r.scrub("a=sk%2flive%2Dsecret%5f1&"), "a=[redacted]&");
        assert_eq!(r.scrub("a=sk%2Flive%2dsecret%5F1&"), "a=[redacted]&");
        let mut words = Redactor::default();
        words.add_secret("p/a:t~h!x*y");
        assert_eq!(words.scrub("q=p%2fa%3At%7eh%21x%2Ay."), "q=[redacted].");
        assert_eq!(
            words.scrub_json(r#"{"q":"p%2fa%3At%7eh%21x%2Ay"}"#),
            r#"{"q":"[redacted]"}"#
        );
        // A different letter is a different text: only the escapes' hex digits fold.
        assert_eq!(
            r.scrub("a=SK%2flive%2Dsecret%5f1&"),
            "a=SK%2flive%2Dsecret%5f1&"
        );
        let gate = Gate::new([&r, &words]);
        assert_eq!(
            gate.pass("x p%2Fa%3at%7Eh%21x%2ay sk%2flive%2Dsecret%5f1".into())
                .into_string(),
            "x [redacted] [redacted]"
        );
    }

    /// A server that decodes a `Basic` header may quote what it read: the credentials, the
    /// user id or the password alone, in any of their forms.
    #[test]
    fn a_basic_credential_is_scrubbed_decoded_too() {
        let mut r = Redactor::default();
        // base64("svc-account:pass word/1234")
        r.add_secret("Basic c3ZjLWFjY291bnQ6cGFzcyB3b3JkLzEyMzQ=");
        assert_eq!(
            r.scrub(
                "got c3ZjLWFjY291bnQ6cGFzcyB3b3JkLzEyMzQ= as svc-account:pass word/1234, \
                 user svc-account, password pass+word%2F1234 or pass word/1234"
            ),
            "got [redacted] as [redacted], user [redacted], password [redacted] or [redacted]"
        );
        // Not a Basic credential, or not text once decoded: nothing more is added.
        assert_eq!(basic_credentials("Bearer c3ZjLWFjY291bnQ6cGFzcw=="), None);
        assert_eq!(basic_credentials("Basic //79/w=="), None);
        assert_eq!(basic_credentials("Basic not base64!"), None);
        assert_eq!(
            basic_credentials("basic c3ZjLWFjY291bnQ6cGFzcw==").as_deref(),
            Some("svc-account:pass")
        );
    }

    /// Joined to the Pack's gate, an entry's scrubs take every entry's secrets: those of the
    /// other entries, learned later too, and what a cut left of them.
    #[test]
    fn a_joined_redactor_scrubs_every_entrys_secrets() {
        let mut own = Redactor::default();
        own.add_secret("own-secret-000001");
        let mut other = Redactor::default();
        other.add_secret("other-secret-000002");
        let scrub = own.scrubber();
        assert_eq!(own.scrub("other-secret-000002"), "other-secret-000002");
        let gate = Gate::new([&own, &other]);
        own.join(&gate);
        assert_eq!(
            own.scrub("own-secret-000001 other-secret-000002"),
            "[redacted] [redacted]"
        );
        // A scrubber made before the join follows it; a learned secret is found at once.
        other.learner()(&SecretString::from("other-token-000003"), Learned::Token);
        assert_eq!(scrub("other-token-000003"), "[redacted]");
        assert_eq!(
            own.scrub_json(r#"{"k":"other-secret-000002"}"#),
            r#"{"k":"[redacted]"}"#
        );
        // A cut end: one byte of its own secret, four of another entry's.
        assert_eq!(own.scrub_cut("a o"), "a [redacted]");
        assert_eq!(own.scrub_cut("a othe"), "a [redacted]");
        assert_eq!(own.scrub_cut("a ot"), "a ot");
        assert_eq!(other.scrub("own-secret-000001"), "own-secret-000001");
    }

    /// The reference model of [`Redactor::scrub`]: mark every byte any occurrence of any held
    /// form covers, then write each maximal marked run as one [`REDACTED`].
    fn reference_scrub(r: &Redactor, text: &str) -> String {
        let mut covered = vec![false; text.len()];
        // Every occurrence in `view`, each marked on `text` through `origin`.
        let mut mark = |view: &str, origin: &dyn Fn(Range<usize>) -> Range<usize>| {
            for form in r.read().forms() {
                let form = form.expose_secret().as_bytes();
                for at in 0..view.len() {
                    if view.as_bytes()[at..].starts_with(form) {
                        covered[origin(at..at + form.len())].fill(true);
                    }
                }
            }
        };
        // Each view also with its escapes' hex digits in upper case (same length, same places).
        mark(text, &|run| run);
        if let Some(upper) = upper_hex(text) {
            mark(&upper, &|run| run);
        }
        // The text as its JSON escapes read (see `Unescaped`'s own test for the mapping).
        let view = Unescaped::new(text);
        mark(&view.text, &|run| view.origin(run));
        if let Some(upper) = upper_hex(&view.text) {
            mark(&upper, &|run| view.origin(run));
        }
        let mut out = String::new();
        for (at, c) in text.char_indices() {
            if !covered[at] {
                out.push(c);
            } else if at == 0 || !covered[at - 1] {
                out.push_str(REDACTED);
            }
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Secrets cut from one base text overlap, nest and sit side by side; the text is made
        /// of pieces of the same base, of the secrets and of their other forms.
        #[test]
        fn scrub_matches_the_reference_model(
            base in "[ab/é%2f]{8,40}",
            cuts in proptest::collection::vec((0usize..40, 8usize..20, proptest::bool::ANY), 1..6),
            pieces in proptest::collection::vec((0usize..40, 0usize..24, 0usize..5), 0..12),
        ) {
            let chars: Vec<char> = base.chars().collect();
            // `len` characters of the base read round from `at`.
            let slice = |at: usize, len: usize| -> String {
                (at..at + len).map(|i| chars[i % chars.len()]).collect()
            };
            let mut r = Redactor::default();
            let learn = r.learner();
            let mut secrets = Vec::new();
            for (at, len, learned) in cuts {
                let secret = slice(at, len);
                if learned {
                    learn(&SecretString::from(secret.clone()), Learned::Token);
                } else {
                    r.add_secret(&secret);
                }
                secrets.push(secret);
            }
            let forms: Vec<String> =
                r.read().forms().map(|s| s.expose_secret().to_string()).collect();
            let mut text = String::new();
            for (at, len, kind) in pieces {
                match kind {
                    0 | 1 => text.push_str(&slice(at, len)),
                    2 => text.push_str(&secrets[at % secrets.len()]),
                    3 => text.push_str(&forms[at % forms.len()]),
                    // A form with the hex digits of some escapes in lower case, by `len`'s bits.
                    _ => {
                        let form = &forms[at % forms.len()];
                        let mut bytes = form.as_bytes().to_vec();
                        for (n, i) in memchr::memchr_iter(b'%', form.as_bytes()).enumerate() {
                            if len >> (n % 5) & 1 == 1 {
                                for b in bytes[i + 1..].iter_mut().take(2) {
                                    b.make_ascii_lowercase();
                                }
                            }
                        }
                        text.push_str(&String::from_utf8(bytes).expect("ASCII changed only"));
                    }
                }
            }
            proptest::prop_assert_eq!(r.scrub(&text).into_owned(), reference_scrub(&r, &text));
        }
    }
}

#[cfg(test)]
mod escape_levels {
    use super::*;

    /// A secret escaped twice (a JSON text held in a JSON string, `\\u0074` for `t`) is
    /// scrubbed when the whole text is valid JSON (its string is decoded, then read as plain
    /// text, which decodes again), and when an invalid escape (`\x`) elsewhere leaves the text
    /// to the plain rule, which decodes level by level.
    #[test]
    fn a_secret_escaped_twice_is_scrubbed_beside_an_invalid_escape_too() {
        let mut r = Redactor::default();
        r.add("tok-1234567890abc");
        let valid = r#"["\\u0074ok-1234567890abc", "y"]"#;
        let invalid = r#"["\\u0074ok-1234567890abc", "\x"]"#;
        assert_eq!(r.scrub_json(valid), r#"["[redacted]", "y"]"#);
        assert_eq!(r.scrub_json(invalid), r#"["[redacted]", "\x"]"#);
    }
}
