//! The one reader of untrusted JSON text — a server's body or event, an OAuth document, an
//! `mcp.json`, a store file — and how a reason names a JSON value's type ("found a number") and
//! which known key a config key misspells (the did-you-mean of a refusal). A leaf.
//!
//! Every JSON text the Pack reads is first made ready here, in place and at the same length (so
//! a later error's line and column are the text's own), then decoded by `serde_json`:
//!
//! - arrays and objects may nest [`MAX_JSON_DEPTH`] deep; deeper text is refused with the
//!   place, before any recursive reader sees it (RFC 8259 §9 lets a parser set this limit). A
//!   server's text is still made ready whole, each value past the bound written over as `0`,
//!   for the readers that go on with a refused text: an error body's preview, whose JSON-RPC
//!   error and words are still signals, and an event's, read as any event is. Text that is no
//!   JSON (not even cut short) is left as it came, so it stays none;
//! - an escaped UTF-16 surrogate pair (`\ud83d\ude80`) is the one character it encodes, and an
//!   unpaired surrogate escape (`\ud83d` alone, text cut by a server that counts UTF-16 units)
//!   becomes `\ufffd`, U+REPLACEMENT CHARACTER (RFC 8259 §8.2 leaves it to the reader);
//! - an object naming a key twice: in an `mcp.json` ([`Source::Config`]) it is refused, naming
//!   the key and the place, since the user can fix it and either reading could be the wrong
//!   one; in a server's text ([`Source::Server`]) the last member wins and the earlier ones are
//!   blanked out of the text itself, so no later step (a raw schema, a scrub, a result) can
//!   read a member the decoded value does not hold;
//! - in an `mcp.json` only: `//` and `/* */` comments and trailing commas are blanked out
//!   (JSONC as VS Code writes it).
//!
//! No refusal quotes the text: it names a position, a limit or (config text only) a key.
//! Reading text is this module's job, so it alone may look at the text's bytes
//! (`.ci/no-text-decisions.sh`).

use std::collections::HashMap;
use std::ops::Range;

use serde_json::Value;

use crate::limits::MAX_JSON_DEPTH;

/// The JSON type of `value`, as a reason names it.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The shortest key compared by edit distance (a shorter key is compared by case, `_` and `-`
/// only), so that short keys of other clients (`auth`, `env`) are not read as typos.
const MIN_FUZZY_KEY: usize = 5;

/// The key of `known` that the config key `key` misspells: `key` is none of them but is one of
/// them in another case or with `_` and `-` in it (`URL`, `mcp_servers`, `client_id`), or, when
/// `key` has [`MIN_FUZZY_KEY`] or more characters, one letter off once so compared (`header`,
/// `scope`, `Header`). The first such key in `known`'s order for which `absent` holds: a near
/// miss written beside the key itself is some other setting, not a typo. Decided on key names
/// only, which come from the config, never from a server.
pub(crate) fn misspelling_of<'k>(
    key: &str,
    known: &[&'k str],
    absent: impl Fn(&str) -> bool,
) -> Option<&'k str> {
    if known.contains(&key) {
        return None;
    }
    let folded: String = key
        .chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect();
    let fuzzy = key.chars().count() >= MIN_FUZZY_KEY;
    known.iter().copied().find(|k| {
        let lower = k.to_lowercase();
        absent(k)
            && (folded == lower || (fuzzy && strsim::damerau_levenshtein(&folded, &lower) == 1))
    })
}

/// The question a refusal of config key `key` ends with, naming the key `meant` (found by
/// [`misspelling_of`]): `did you mean "meant"?`, and `(keys are case-sensitive)` when the two
/// differ only in case, `_` and `-`, the only difference a reader could overlook.
pub(crate) fn did_you_mean(key: &str, meant: &str) -> String {
    let folded: String = key
        .chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect();
    let remark = if folded == meant.to_lowercase() {
        " (keys are case-sensitive)"
    } else {
        ""
    };
    format!("did you mean \"{meant}\"?{remark}")
}

/// Whose text is read: the rule for a key named twice, and whether comments and trailing
/// commas are allowed, depend on it (module docs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Source {
    /// The text of an `mcp.json` (JSONC): a repeated key is refused.
    Config,
    /// A server's or an authorization server's text, or the Pack's own store file (strict
    /// JSON): the last of a repeated key wins.
    Server,
}

/// Why a text cannot be read, and where (1-based line and column, columns in bytes).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Refusal {
    pub(crate) problem: Problem,
    pub(crate) line: usize,
    pub(crate) column: usize,
}

/// What is wrong with a text [`Refusal`] refuses.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum Problem {
    /// Arrays and objects nest deeper than [`MAX_JSON_DEPTH`].
    TooDeep,
    /// An object of config text names this key twice (the key is the user's own text).
    RepeatedKey(String),
    /// A `/*` comment of config text never ends.
    OpenComment,
    /// Not JSON (or JSONC): `serde_json`'s words, without its position.
    Syntax(String),
    /// JSON, but not of the shape the reader expects (a string where a number goes, a member
    /// missing). `serde_json`'s words for this may quote the text, so none are kept.
    Shape,
    /// Only whitespace and comments.
    Empty,
}

impl std::fmt::Display for Refusal {
    /// A sentence to follow the name of what was read: `is not JSON: <what> at line L column C`
    /// (config text: `is not JSON (comments and trailing commas are allowed): ...`), `nests
    /// arrays and objects deeper than 64 levels at line L column C`, `names the key "K" twice in
    /// one object; keep one at line L column C`, `is empty`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (line, column) = (self.line, self.column);
        match &self.problem {
            Problem::TooDeep => write!(
                f,
                "nests arrays and objects deeper than {MAX_JSON_DEPTH} levels at line {line} column {column}"
            ),
            Problem::RepeatedKey(key) => write!(
                f,
                "names the key {} twice in one object; keep one at line {line} column {column}",
                Value::String(key.clone())
            ),
            Problem::OpenComment => write!(
                f,
                "is not JSON (comments and trailing commas are allowed): a /* comment is not closed at line {line} column {column}"
            ),
            Problem::Syntax(what) if line == 0 => write!(f, "is not JSON: {what}"),
            Problem::Syntax(what) => {
                write!(f, "is not JSON: {what} at line {line} column {column}")
            }
            Problem::Shape => write!(
                f,
                "is JSON of another shape than expected at line {line} column {column}"
            ),
            Problem::Empty => f.write_str("is empty"),
        }
    }
}

impl Refusal {
    fn at(problem: Problem, text: &[u8], offset: usize) -> Self {
        let before = &text[..offset.min(text.len())];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |n| n + 1);
        Refusal {
            problem,
            line,
            column: offset - start + 1,
        }
    }

    /// A `serde_json` error as a refusal, its position kept apart. A value of the wrong shape
    /// is [`Problem::Shape`]: its words may quote the text (`invalid type: string "…"`, an
    /// unknown field's name).
    fn of(error: &serde_json::Error) -> Self {
        if error.classify() == serde_json::error::Category::Data {
            return Refusal {
                problem: Problem::Shape,
                line: error.line(),
                column: error.column(),
            };
        }
        let text = error.to_string();
        let what = match text.rfind(" at line ") {
            Some(at) if error.line() > 0 => text[..at].to_string(),
            _ => text,
        };
        Refusal {
            problem: Problem::Syntax(what),
            line: error.line(),
            column: error.column(),
        }
    }
}

/// Makes `text` ready to decode, in place and at the same length (module docs): lone surrogate
/// escapes mended, nesting checked, repeated keys refused ([`Source::Config`]) or their earlier
/// members blanked ([`Source::Server`]), and for config text comments and trailing commas
/// blanked. Bytes are only ever replaced by ASCII inside whole tokens, so UTF-8 stays UTF-8.
///
/// # Errors
/// [`Problem::TooDeep`], [`Problem::RepeatedKey`] or [`Problem::OpenComment`], with the place.
/// Config text may then be partly changed. Server text is made ready whole all the same, each
/// value nested past the bound written over ([`Stub`]; text that is no JSON left as it came): a reader that goes on
/// with a refused text (an error body's preview) never meets what is too deep, nor an earlier
/// member of a repeated key. Other malformed text is left for the decoder to refuse.
pub(crate) fn ready(text: &mut [u8], source: Source) -> Result<(), Refusal> {
    let lone = lone_surrogates(text);
    mend(text, &lone, &[]);
    let scanned = scan(text, source)?;
    scanned.mend(text, source);
    scanned.verdict()
}

/// [`ready`] for shared bytes (an event's data): copied only when something must change.
///
/// # Errors
/// As [`ready`].
pub(crate) fn ready_shared(data: &mut bytes::Bytes, source: Source) -> Result<(), Refusal> {
    let lone = lone_surrogates(data);
    if !lone.is_empty() {
        // Mended before the scan, as [`ready`] does: two keys may be one key only once mended.
        let mut text = data.to_vec();
        let readied = ready(&mut text, source);
        *data = bytes::Bytes::from(text);
        return readied;
    }
    let scanned = scan(data, source)?;
    if !scanned.blanks.is_empty() || !scanned.stubs.is_empty() {
        let mut text = data.to_vec();
        scanned.mend(&mut text, source);
        *data = bytes::Bytes::from(text);
    }
    scanned.verdict()
}

/// What [`scan`] found to change in a text it does not refuse outright.
struct Scanned {
    /// Ranges blanked: earlier members of a repeated key; config comments and trailing commas.
    blanks: Vec<Range<usize>>,
    /// Values of server text nested past [`MAX_JSON_DEPTH`], each written over.
    stubs: Vec<Stub>,
    /// The first of those values, which refuses the text all the same.
    too_deep: Option<Refusal>,
}

/// A value nested past [`MAX_JSON_DEPTH`] and where it is: written over as `0` when it is
/// whole (`json`), as `!` when cut short, then spaces (newlines kept).
struct Stub {
    at: Range<usize>,
    json: bool,
}

impl Scanned {
    /// Writes the stubs, then the blanks (a blanked member may hold a stub). Server text that
    /// is no JSON, not even cut short, is left as it came (no decoder reads it; a preview
    /// quotes it as written); config text, JSONC, is the decoder's to judge.
    fn mend(&self, text: &mut [u8], source: Source) {
        if self.blanks.is_empty() && self.stubs.is_empty() {
            return;
        }
        if source == Source::Server && syntax(text) == Syntax::Invalid {
            return;
        }
        for stub in &self.stubs {
            mend(text, &[], std::slice::from_ref(&stub.at));
            // `!` (no JSON anywhere) for a value cut short: the text stays no JSON.
            text[stub.at.start] = if stub.json { b'0' } else { b'!' };
        }
        mend(text, &[], &self.blanks);
    }

    fn verdict(self) -> Result<(), Refusal> {
        self.too_deep.map_or(Ok(()), Err)
    }
}

/// Writes `\ufffd` over each escape at `lone` and blanks each range of `blanks` (newlines
/// kept, so lines and columns stay the text's own).
fn mend(text: &mut [u8], lone: &[usize], blanks: &[Range<usize>]) {
    for &i in lone {
        text[i + 2..i + 6].copy_from_slice(b"fffd");
    }
    for range in blanks {
        for byte in &mut text[range.clone()] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    }
}

/// `text`, one valid JSON value, without the whitespace between its tokens (RFC 8259 §2:
/// insignificant whitespace): what a server's raw JSON shows a model, its strings, numbers and
/// member order kept byte for byte. A reader's blanks ([`ready`]: an earlier member of a key
/// named twice) and a server's pretty-printing leave runs of spaces that would only cost a
/// model's context. Borrowed when there is nothing to drop.
pub(crate) fn compact(text: &str) -> std::borrow::Cow<'_, str> {
    let bytes = text.as_bytes();
    // Whitespace inside a string is the string's own; outside, it only sits between tokens.
    let mut in_string = false;
    let mut escaped = false;
    let mut out: Option<Vec<u8>> = None;
    for (at, &b) in bytes.iter().enumerate() {
        let keep = if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            true
        } else {
            in_string = b == b'"';
            !matches!(b, b' ' | b'\t' | b'\n' | b'\r')
        };
        match (&mut out, keep) {
            (Some(out), true) => out.push(b),
            (None, false) => out = Some(bytes[..at].to_vec()),
            _ => {}
        }
    }
    match out {
        None => std::borrow::Cow::Borrowed(text),
        // Only ASCII whitespace outside strings was dropped, so the bytes stay UTF-8.
        Some(out) => String::from_utf8(out).map_or(std::borrow::Cow::Borrowed(text), Into::into),
    }
}

/// Decodes a server's (or an authorization server's) JSON `body` into `T`, through [`ready`].
///
/// # Errors
/// A [`Refusal`]: not UTF-8, too deep, or not JSON of the shape `T`.
pub(crate) fn from_server<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    let mut text = body.to_vec();
    ready(&mut text, Source::Server)?;
    serde_json::from_slice(&text).map_err(|e| Refusal::of(&e))
}

/// The JSON value of an `mcp.json` file's contents (JSONC allowed, a leading UTF-8 byte order
/// mark skipped), through [`ready`].
///
/// # Errors
/// A [`Refusal`]: [`Problem::Empty`] for text of only whitespace and comments, else as [`ready`]
/// or not JSON.
pub(crate) fn config_value(text: &str) -> Result<Value, Refusal> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut bytes = text.as_bytes().to_vec();
    ready(&mut bytes, Source::Config)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Refusal {
            problem: Problem::Empty,
            line: 0,
            column: 0,
        });
    }
    serde_json::from_slice(&bytes).map_err(|e| Refusal::of(&e))
}

/// Where an escaped UTF-16 surrogate is not half of a pair (`\ud83d` not followed by
/// `\udc00`..`\udfff`, or a low half alone): [`mend`] writes `\ufffd` there. An escape is a
/// `\u` whose backslash ends an odd run of backslashes; outside a string a backslash is no
/// JSON, so mending one there changes nothing the decoder would accept.
fn lone_surrogates(text: &[u8]) -> Vec<usize> {
    let mut lone = Vec::new();
    let mut at = 0;
    let mut run = 0usize;
    while let Some(found) = memchr::memchr(b'\\', &text[at..]) {
        let i = at + found;
        // A backslash right after the last one continues its run.
        if found != 0 {
            run = 0;
        }
        run += 1;
        at = i + 1;
        if run.is_multiple_of(2) {
            continue;
        }
        let Some(unit) = surrogate_at(text, i) else {
            continue;
        };
        if (0xD800..0xDC00).contains(&unit)
            && surrogate_at(text, i + 6).is_some_and(|low| (0xDC00..0xE000).contains(&low))
        {
            // A pair: both halves kept, the low one not looked at again.
            at = i + 12;
        } else {
            lone.push(i);
            at = i + 6;
        }
        run = 0;
    }
    lone
}

/// The surrogate code unit of a `\uXXXX` escape at `i`, if it is one.
fn surrogate_at(text: &[u8], i: usize) -> Option<u32> {
    let escape = text.get(i..i + 6)?;
    if escape[0] != b'\\' || escape[1] != b'u' {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    let unit = u32::from_str_radix(hex, 16).ok()?;
    (0xD800..0xE000).contains(&unit).then_some(unit)
}

/// An open array or object while [`scan`] walks a text.
enum Open<'t> {
    Array,
    Object {
        /// Which object this is, in the order they opened (keys are kept per object).
        serial: usize,
        /// Whether the next string is a key.
        expect_key: bool,
        /// The member being read: where its key began, and the key.
        member: Option<(usize, Key<'t>)>,
        /// The members read so far.
        held: Held,
    },
}

/// A key as the decoded value holds it: the text's own bytes, or the unescaped ones.
type Key<'t> = std::borrow::Cow<'t, [u8]>;

/// The most members an object keeps in a list searched in order; a bigger one moves them into
/// [`Members`], so an object of many keys costs no quadratic time.
const FEW_MEMBERS: usize = 16;

/// Where an open object's members are: where each begins and ends (after its comma), by key.
enum Held {
    /// At most [`FEW_MEMBERS`], in [`Members::few`] from this index on (the open objects' lists
    /// are stacked there as the objects nest, so no object allocates one of its own).
    Few(usize),
    /// In [`Members::many`], under the object's serial.
    Many,
}

/// The members of every open object: the few, stacked, and those of objects grown past
/// [`FEW_MEMBERS`], keyed by the object's serial.
#[derive(Default)]
struct Members<'t> {
    few: Vec<(Key<'t>, Range<usize>)>,
    many: HashMap<(usize, Key<'t>), Range<usize>>,
}

impl Held {
    /// Takes member `key` out of object `serial`, answering where it was, if it holds one: a
    /// key named again is met as soon as it is read, so even text cut inside the later member
    /// loses the earlier one.
    fn take<'t>(
        &mut self,
        members: &mut Members<'t>,
        serial: usize,
        key: &Key<'t>,
    ) -> Option<Range<usize>> {
        match *self {
            Held::Few(from) => {
                // The innermost object's members are the list's tail: a swap stays inside it.
                let at = members.few[from..].iter().position(|(k, _)| k == key)?;
                Some(members.few.swap_remove(from + at).1)
            }
            Held::Many => members.many.remove(&(serial, key.clone())),
        }
    }

    /// Records member `key` of object `serial` at `at` (a key it no longer holds: [`Held::take`]).
    fn insert<'t>(
        &mut self,
        members: &mut Members<'t>,
        serial: usize,
        key: Key<'t>,
        at: Range<usize>,
    ) {
        let Held::Few(from) = *self else {
            members.many.insert((serial, key), at);
            return;
        };
        if members.few.len() - from < FEW_MEMBERS {
            members.few.push((key, at));
            return;
        }
        for (k, range) in members.few.drain(from..) {
            members.many.insert((serial, k), range);
        }
        *self = Held::Many;
        members.many.insert((serial, key), at);
    }

    /// Lets go of the object's few members when it closes.
    fn close(&self, members: &mut Members<'_>) {
        if let Held::Few(from) = *self {
            members.few.truncate(from);
        }
    }
}

/// Walks `text` once, token by token as far as nesting, strings, keys and (config text)
/// comments and commas go, and answers what [`ready`] changes.
fn scan(text: &[u8], source: Source) -> Result<Scanned, Refusal> {
    let config = source == Source::Config;
    let mut blanks = Vec::new();
    let mut stubs = Vec::new();
    let mut too_deep = None;
    let mut stack: Vec<Open> = Vec::new();
    // Each object's members by key: where the member begins and ends (after its comma).
    let mut members = Members::default();
    let mut objects = 0usize;
    let mut comma: Option<usize> = None;
    // Right after `{`, `[` or `,`: a comma here follows no value, so it is no trailing comma
    // (JSONC allows `[1,]`, never `[,]`), and the parser refuses it.
    let mut after_open = false;
    let mut i = 0;
    // The member of the innermost object ends at `end` (a `,` or `}`).
    fn end_member<'t>(stack: &mut [Open<'t>], members: &mut Members<'t>, end: usize) {
        if let Some(Open::Object {
            serial,
            member,
            held,
            ..
        }) = stack.last_mut()
            && let Some((start, key)) = member.take()
        {
            held.insert(members, *serial, key, start..end);
        }
    }
    while i < text.len() {
        let byte = text[i];
        match byte {
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'/' if config && text.get(i + 1) == Some(&b'/') => {
                let end = memchr::memchr(b'\n', &text[i..]).map_or(text.len(), |n| i + n);
                blanks.push(i..end);
                i = end;
                continue;
            }
            b'/' if config && text.get(i + 1) == Some(&b'*') => {
                let Some(n) = memchr::memmem::find(&text[i + 2..], b"*/") else {
                    return Err(Refusal::at(Problem::OpenComment, text, i));
                };
                let end = i + 2 + n + 2;
                blanks.push(i..end);
                i = end;
                continue;
            }
            b'"' => {
                comma = None;
                after_open = false;
                let start = i;
                let mut j = i + 1;
                let mut escaped = false;
                // To the closing quote: the next quote or backslash, an escape skipping the
                // byte after its backslash.
                loop {
                    let Some(n) = text
                        .get(j..)
                        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
                    else {
                        return Ok(Scanned {
                            blanks,
                            stubs,
                            too_deep,
                        });
                    };
                    j += n;
                    if text[j] == b'"' {
                        break;
                    }
                    escaped = true;
                    j += 2;
                }
                if let Some(Open::Object {
                    serial,
                    expect_key,
                    member,
                    held,
                }) = stack.last_mut()
                    && *expect_key
                {
                    *expect_key = false;
                    let quoted = &text[start..=j];
                    let key: Key<'_> = match escaped {
                        true => serde_json::from_slice::<String>(quoted)
                            .map_or_else(|_| quoted.to_vec(), String::into_bytes)
                            .into(),
                        false => quoted[1..quoted.len() - 1].into(),
                    };
                    if let Some(earlier) = held.take(&mut members, *serial, &key) {
                        if config {
                            let key = String::from_utf8_lossy(&key).into_owned();
                            return Err(Refusal::at(Problem::RepeatedKey(key), text, j));
                        }
                        blanks.push(earlier);
                    }
                    *member = Some((start, key));
                }
                i = j + 1;
                continue;
            }
            b'{' | b'[' => {
                comma = None;
                if stack.len() >= MAX_JSON_DEPTH {
                    if config {
                        return Err(Refusal::at(Problem::TooDeep, text, i));
                    }
                    // Server text: the value is written over, and the walk goes on after it.
                    // Only the first is placed (counting lines costs a pass over the text).
                    if too_deep.is_none() {
                        too_deep = Some(Refusal::at(Problem::TooDeep, text, i));
                    }
                    let end = value_end(text, i);
                    stubs.push(Stub {
                        at: i..end.unwrap_or(text.len()),
                        json: end.is_some(),
                    });
                    after_open = false;
                    i = end.unwrap_or(text.len());
                    continue;
                }
                after_open = true;
                stack.push(match byte {
                    b'{' => {
                        objects += 1;
                        Open::Object {
                            serial: objects,
                            expect_key: true,
                            member: None,
                            held: Held::Few(members.few.len()),
                        }
                    }
                    _ => Open::Array,
                });
            }
            b'}' | b']' => {
                if let Some(trailing) = comma.take()
                    && config
                {
                    blanks.push(trailing..trailing + 1);
                }
                end_member(&mut stack, &mut members, i);
                if let Some(Open::Object { held, .. }) = stack.pop() {
                    held.close(&mut members);
                }
                after_open = false;
            }
            b',' => {
                comma = (!after_open).then_some(i);
                after_open = true;
                end_member(&mut stack, &mut members, i + 1);
                if let Some(Open::Object { expect_key, .. }) = stack.last_mut() {
                    *expect_key = true;
                }
            }
            _ => {
                comma = None;
                after_open = false;
            }
        }
        i += 1;
    }
    Ok(Scanned {
        blanks,
        stubs,
        too_deep,
    })
}

/// What [`syntax`] found a text to be.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Syntax {
    /// One JSON value (RFC 8259 §2), nothing after it but whitespace.
    Valid,
    /// The start of one: a text cut short (an error body's preview) that nothing yet refutes.
    Prefix,
    /// No JSON, cut or not.
    Invalid,
}

/// Whether `text` is JSON (RFC 8259), the start of it, or neither: one pass, no recursion
/// (any depth), so [`Scanned::mend`] never turns text that was no JSON into JSON.
fn syntax(text: &[u8]) -> Syntax {
    // What may come next, outside strings and numbers.
    #[derive(PartialEq)]
    enum Next {
        Value,
        ValueOrClose,
        KeyOrClose,
        Key,
        Colon,
        CommaOrClose,
        End,
    }
    let mut open: Vec<u8> = Vec::new();
    let mut next = Next::Value;
    let mut i = 0;
    let after_value = |open: &Vec<u8>| {
        if open.is_empty() {
            Next::End
        } else {
            Next::CommaOrClose
        }
    };
    while i < text.len() {
        let byte = text[i];
        if matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
            continue;
        }
        match (&next, byte) {
            (Next::Value | Next::ValueOrClose, b'{') => {
                open.push(b'}');
                next = Next::KeyOrClose;
            }
            (Next::Value | Next::ValueOrClose, b'[') => {
                open.push(b']');
                next = Next::ValueOrClose;
            }
            (Next::ValueOrClose, b']')
            | (Next::KeyOrClose, b'}')
            | (Next::CommaOrClose, b']' | b'}') => {
                if open.pop() != Some(byte) {
                    return Syntax::Invalid;
                }
                next = after_value(&open);
            }
            (Next::CommaOrClose, b',') => {
                next = if open.last() == Some(&b'}') {
                    Next::Key
                } else {
                    Next::Value
                };
            }
            (Next::Colon, b':') => next = Next::Value,
            (Next::Value | Next::ValueOrClose | Next::KeyOrClose | Next::Key, b'"') => {
                let key = matches!(next, Next::KeyOrClose | Next::Key);
                let end = match string_end(text, i) {
                    Ok(end) => end,
                    Err(cut_or_invalid) => return cut_or_invalid,
                };
                i = end;
                next = if key { Next::Colon } else { after_value(&open) };
                continue;
            }
            (Next::Value | Next::ValueOrClose, b'-' | b'0'..=b'9') => {
                let (end, whole) = number_end(text, i);
                if !whole {
                    return if end == text.len() {
                        Syntax::Prefix
                    } else {
                        Syntax::Invalid
                    };
                }
                i = end;
                next = after_value(&open);
                continue;
            }
            (Next::Value | Next::ValueOrClose, b't' | b'f' | b'n') => {
                let word: &[u8] = match byte {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                let have = &text[i..text.len().min(i + word.len())];
                if have != &word[..have.len()] {
                    return Syntax::Invalid;
                }
                if have.len() < word.len() {
                    return Syntax::Prefix;
                }
                i += word.len();
                next = after_value(&open);
                continue;
            }
            _ => return Syntax::Invalid,
        }
        i += 1;
    }
    if next == Next::End {
        Syntax::Valid
    } else {
        Syntax::Prefix
    }
}

/// Where the string opening at `quote` ends (after its closing quote), its escapes and
/// characters checked (RFC 8259 §7); else [`Syntax::Prefix`] when the text ends inside it with
/// no rule broken, [`Syntax::Invalid`] when one is.
fn string_end(text: &[u8], quote: usize) -> Result<usize, Syntax> {
    let mut i = quote + 1;
    loop {
        let Some(&byte) = text.get(i) else {
            return Err(Syntax::Prefix);
        };
        match byte {
            b'"' => return Ok(i + 1),
            b'\\' => match text.get(i + 1) {
                None => return Err(Syntax::Prefix),
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                Some(b'u') => {
                    let hex = &text[(i + 2).min(text.len())..(i + 6).min(text.len())];
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return Err(Syntax::Invalid);
                    }
                    i += 6;
                }
                Some(_) => return Err(Syntax::Invalid),
            },
            0..0x20 => return Err(Syntax::Invalid),
            _ => i += 1,
        }
    }
}

/// Where the number starting at `start` ends, and whether it is whole
/// (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, RFC 8259 §6).
fn number_end(text: &[u8], start: usize) -> (usize, bool) {
    let digits = |from: usize| {
        text[from.min(text.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut i = start;
    if text.get(i) == Some(&b'-') {
        i += 1;
    }
    match text.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i += digits(i),
        _ => return (i, false),
    }
    if text.get(i) == Some(&b'.') {
        let n = digits(i + 1);
        if n == 0 {
            return ((i + 1).min(text.len()), false);
        }
        i += 1 + n;
    }
    if matches!(text.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(text.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(i);
        if n == 0 {
            return (i.min(text.len()), false);
        }
        i += n;
    }
    (i, true)
}

/// Where the array or object opening at `open` ends (after its closing bracket): brackets
/// matched by kind outside strings. `None` when the text is cut inside it or a bracket closes
/// the wrong kind.
fn value_end(text: &[u8], open: usize) -> Option<usize> {
    let mut closers: Vec<u8> = Vec::new();
    let mut i = open;
    while i < text.len() {
        match text[i] {
            b'"' => {
                // To the closing quote, an escape skipping the byte after its backslash.
                let mut j = i + 1;
                loop {
                    let n = memchr::memchr2(b'"', b'\\', text.get(j..)?)?;
                    j += n;
                    if text[j] == b'"' {
                        break;
                    }
                    j += 2;
                }
                i = j;
            }
            b'{' => closers.push(b'}'),
            b'[' => closers.push(b']'),
            close @ (b'}' | b']') => {
                if closers.pop() != Some(close) {
                    return None;
                }
                if closers.is_empty() {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{Problem, Refusal, Source, config_value, from_server, misspelling_of, ready};

    #[test]
    fn compact_drops_whitespace_between_tokens_only() {
        let mut text = br#"{"a": 1, "a" : "x y\" z",
  "b": [ 1.50 , "\\", {"c" :true} ] }"#
            .to_vec();
        ready(&mut text, Source::Server).unwrap();
        let text = String::from_utf8(text).unwrap();
        // The first "a" is blanked by the reader; its blanks go too.
        assert_eq!(
            super::compact(&text),
            r#"{"a":"x y\" z","b":[1.50,"\\",{"c":true}]}"#
        );
        assert!(matches!(
            super::compact(r#"{"a":"b c"}"#),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(super::compact(" \"é  ü\" "), "\"é  ü\"");
    }

    fn server(text: &str) -> Result<Value, Refusal> {
        from_server(text.as_bytes())
    }

    #[test]
    fn surrogate_pairs_are_one_character_and_lone_halves_are_replaced() {
        let cases = [
            (r#"["\ud83d\ude80"]"#, "\u{1F680}"),
            (r#"["\uD83D\uDE80"]"#, "\u{1F680}"),
            (r#"["cut \ud83d"]"#, "cut \u{FFFD}"),
            (r#"["\ud83d\ud83d\ude80"]"#, "\u{FFFD}\u{1F680}"),
            (r#"["\ude80\ud83d"]"#, "\u{FFFD}\u{FFFD}"),
            (r#"["\ud83dx\ude80"]"#, "\u{FFFD}x\u{FFFD}"),
            // An escaped backslash before `u` is no escape; the one after the pair is kept.
            (r#"["\\ud83d"]"#, "\\ud83d"),
            (r#"["\\\ud83d"]"#, "\\\u{FFFD}"),
            (r#"["\ud83d\n"]"#, "\u{FFFD}\n"),
        ];
        for (text, read) in cases {
            assert_eq!(server(text), Ok(json!([read])), "{text}");
            assert_eq!(config_value(text), Ok(json!([read])), "{text}");
        }
    }

    #[test]
    fn nesting_past_the_limit_is_refused_with_the_place() {
        let limit = crate::limits::MAX_JSON_DEPTH;
        let fits = format!("{}{}", "[".repeat(limit), "]".repeat(limit));
        assert!(server(&fits).is_ok());
        assert!(config_value(&fits).is_ok());
        let deep = format!("{{\"a\":\n{}", "[{\"b\":".repeat(20_000));
        let refused = Refusal {
            problem: Problem::TooDeep,
            line: 2,
            column: 188,
        };
        assert_eq!(server(&deep), Err(refused.clone()));
        assert_eq!(config_value(&deep), Err(refused));
        // Brackets in strings and comments do not count.
        let quoted = format!("[\"{}\" /* {} */]", "[".repeat(500), "{".repeat(500));
        assert_eq!(
            config_value(&quoted).map(|v| v[0].as_str().map(str::len)),
            Ok(Some(500))
        );
    }

    #[test]
    fn a_repeated_key_is_refused_in_config_and_the_last_wins_in_a_server_text() {
        let text = r#"{"a": {"b": 1, "\u0062": 2}, "c": 3}"#;
        assert_eq!(
            config_value(text).map_err(|e| e.to_string()),
            Err(
                r#"names the key "b" twice in one object; keep one at line 1 column 23"#
                    .to_string()
            )
        );
        assert_eq!(server(text), Ok(json!({"a": {"b": 2}, "c": 3})));
        // The earlier member is gone from the text itself, not only from the value.
        let mut body = br#"{"k":"first","o":{"k":1},"k":"last"}"#.to_vec();
        ready(&mut body, Source::Server).unwrap();
        assert_eq!(
            std::str::from_utf8(&body),
            Ok(r#"{            "o":{"k":1},"k":"last"}"#)
        );
        // Keys of different objects, and equal strings that are values, are no repeat.
        assert!(config_value(r#"{"a": "a", "b": {"a": 1}, "c": [{"a": 1}, {"a": 2}]}"#).is_ok());
    }

    #[test]
    fn the_case_remark_is_made_only_for_keys_that_differ_in_case_or_separators() {
        let cases = [
            (
                "clientID",
                "clientId",
                r#"did you mean "clientId"? (keys are case-sensitive)"#,
            ),
            (
                "mcp_servers",
                "mcpServers",
                r#"did you mean "mcpServers"? (keys are case-sensitive)"#,
            ),
            (
                "URL",
                "url",
                r#"did you mean "url"? (keys are case-sensitive)"#,
            ),
            ("uri", "url", r#"did you mean "url"?"#),
            ("header", "headers", r#"did you mean "headers"?"#),
            ("scope", "scopes", r#"did you mean "scopes"?"#),
        ];
        for (key, meant, said) in cases {
            assert_eq!(super::did_you_mean(key, meant), said, "{key}");
        }
    }

    #[test]
    fn a_repeated_key_is_found_in_an_object_of_many_members() {
        // Twenty members, `k7` again as the last one (past the listed few), and an inner
        // object that reuses the outer names without repeating its own.
        let members: Vec<String> = (0..20).map(|i| format!(r#""k{i}":{i}"#)).collect();
        let inner: Vec<String> = (0..20).map(|i| format!(r#""k{i}":0"#)).collect();
        let text = format!(
            r#"{{{},"in":{{{}}},"k7":"last"}}"#,
            members.join(","),
            inner.join(",")
        );
        let value = server(&text).unwrap();
        assert_eq!(value["k7"], json!("last"));
        assert_eq!(value["k8"], json!(8));
        assert_eq!(value["in"]["k19"], json!(0));
        assert_eq!(value.as_object().map(|o| o.len()), Some(21));
        let mut body = text.clone().into_bytes();
        ready(&mut body, Source::Server).unwrap();
        assert!(!std::str::from_utf8(&body).unwrap().contains(r#""k7":7"#));
        assert_eq!(
            config_value(&text).map_err(|e| e.to_string()),
            Err(format!(
                r#"names the key "k7" twice in one object; keep one at line 1 column {}"#,
                text.len() - 8
            ))
        );
        // Both places of a repeat past the few: refused in config, the last wins from a server.
        let late = format!(r#"{{{},"k19":"again"}}"#, members.join(","));
        assert_eq!(server(&late).unwrap()["k19"], json!("again"));
        assert!(config_value(&late).is_err());
        assert!(config_value(&format!("{{{}}}", members.join(","))).is_ok());
    }

    #[test]
    fn a_text_cut_inside_the_later_member_loses_the_earlier_one() {
        // An error preview is cut at its bound: the repeated key alone shows the earlier
        // member is not the one a whole text would hold.
        for (text, blanked, rest) in [
            (r#"{"a":"first","a":"sec"#, 1..13, r#""a":"sec"#),
            (r#"{"a":{"b":1,"b":"x"#, 6..12, r#""b":"x"#),
        ] {
            let mut body = text.as_bytes().to_vec();
            ready(&mut body, Source::Server).unwrap();
            let readied = format!(
                "{}{}{rest}",
                &text[..blanked.start],
                " ".repeat(blanked.len())
            );
            assert_eq!(std::str::from_utf8(&body), Ok(readied.as_str()), "{text}");
        }
    }

    #[test]
    fn server_text_nested_past_the_bound_is_refused_and_made_ready_whole() {
        use crate::limits::MAX_JSON_DEPTH;
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_JSON_DEPTH + 2),
            "]".repeat(MAX_JSON_DEPTH + 2)
        );
        // One level is the object: the array at the bound's next level is written over as 0.
        let kept = MAX_JSON_DEPTH - 1;
        let stubbed = format!(
            "{}0{}{}",
            "[".repeat(kept),
            " ".repeat(2 * (MAX_JSON_DEPTH + 2 - kept) - 1),
            "]".repeat(kept)
        );
        let text = format!(r#"{{"a":1,"deep":{deep},"a":2}}"#);
        let mut body = text.clone().into_bytes();
        let refused = ready(&mut body, Source::Server).unwrap_err();
        assert_eq!(refused.problem, Problem::TooDeep);
        assert_eq!((refused.line, refused.column), (1, 15 + kept));
        let readied = String::from_utf8(body).unwrap();
        assert_eq!(readied, format!(r#"{{      "deep":{stubbed},"a":2}}"#));
        assert_eq!(
            serde_json::from_str::<Value>(&readied).unwrap()["a"],
            json!(2)
        );
        // An earlier member holding what was written over is blanked whole.
        let text = format!(r#"{{"deep":{deep},"deep":[]}}"#);
        let mut body = text.clone().into_bytes();
        assert_eq!(
            ready(&mut body, Source::Server).map_err(|r| r.problem),
            Err(Problem::TooDeep)
        );
        assert_eq!(
            std::str::from_utf8(&body),
            Ok(format!(r#"{{{}"deep":[]}}"#, " ".repeat(text.len() - 11)).as_str())
        );
        // Cut inside the deep value: written over to the end.
        let mut body = format!(r#"{{"deep":{}"#, &deep[..MAX_JSON_DEPTH + 1]).into_bytes();
        assert_eq!(
            ready(&mut body, Source::Server).map_err(|r| r.problem),
            Err(Problem::TooDeep)
        );
        assert_eq!(
            std::str::from_utf8(&body),
            Ok(format!(r#"{{"deep":{}! "#, "[".repeat(kept)).as_str())
        );
        // Config text is refused as it stands.
        assert!(matches!(
            config_value(&text),
            Err(Refusal {
                problem: Problem::TooDeep,
                ..
            })
        ));
    }

    #[test]
    fn nested_and_sibling_objects_keep_their_own_few_members() {
        // The inner objects reuse the outer keys and each other's; only the outer `a`, named
        // again after two inner objects closed, repeats.
        let text = r#"{"a":1,"in":{"a":2,"b":{"a":3}},"next":{"a":4},"a":5}"#;
        let value = server(text).unwrap();
        assert_eq!(
            value,
            json!({"a": 5, "in": {"a": 2, "b": {"a": 3}}, "next": {"a": 4}})
        );
        let mut body = text.as_bytes().to_vec();
        ready(&mut body, Source::Server).unwrap();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{      "in":{"a":2,"b":{"a":3}},"next":{"a":4},"a":5}"#
        );
        assert_eq!(
            config_value(text).map_err(|e| e.to_string()),
            Err(r#"names the key "a" twice in one object; keep one at line 1 column 50"#.into())
        );
        assert!(config_value(r#"{"a":{"a":{"a":1}},"b":{"a":1,"b":2}}"#).is_ok());
    }

    /// A JSON value of strings (any chars, so escapes and astral characters), numbers,
    /// arrays and objects, nested a little.
    fn any_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            any::<String>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            Just(Value::Null),
        ];
        leaf.prop_recursive(6, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Valid JSON the bounds allow reads as `serde_json` reads it, in both sources, and
        /// with every non-ASCII character written as `\u` escapes (surrogate pairs included).
        #[test]
        fn valid_json_reads_as_serde_json_reads_it(value in any_value()) {
            let text = value.to_string();
            proptest::prop_assert_eq!(server(&text), Ok(value.clone()));
            proptest::prop_assert_eq!(config_value(&text), Ok(value.clone()));
            let escaped: String = text
                .encode_utf16()
                .map(|unit| match unit {
                    0..0x80 => char::from(unit as u8).to_string(),
                    _ => format!("\\u{unit:04x}"),
                })
                .collect();
            proptest::prop_assert_eq!(server(&escaped), Ok(value));
        }

        /// The syntax check agrees with `serde_json`: a JSON text (pretty or not) is JSON,
        /// each of its prefixes at most the start of one, and any text it calls JSON parses.
        #[test]
        fn the_syntax_check_agrees_with_serde_json(value in any_value(), junk in ".{0,12}") {
            for text in [value.to_string(), serde_json::to_string_pretty(&value).unwrap()] {
                proptest::prop_assert_eq!(super::syntax(text.as_bytes()), super::Syntax::Valid);
                for cut in 0..text.len() {
                    let cut = &text.as_bytes()[..cut];
                    proptest::prop_assert_ne!(super::syntax(cut), super::Syntax::Invalid);
                }
                let glued = format!("{text}{junk}");
                let said = super::syntax(glued.as_bytes());
                let parses = serde_json::from_str::<Value>(&glued).is_ok();
                proptest::prop_assert_eq!(said == super::Syntax::Valid, parses, "{}", glued);
            }
        }

        /// Any bytes at all: made ready without a panic, at the same length, UTF-8 kept.
        #[test]
        fn any_text_is_made_ready_in_place(text in ".{0,200}", config in proptest::bool::ANY) {
            let mut bytes = text.clone().into_bytes();
            let source = if config { Source::Config } else { Source::Server };
            let _ = ready(&mut bytes, source);
            proptest::prop_assert_eq!(bytes.len(), text.len());
            proptest::prop_assert!(std::str::from_utf8(&bytes).is_ok());
        }
    }

    #[test]
    fn comments_and_trailing_commas_are_config_text_only() {
        let text = "{\"a\": [1, 2,], // note\n \"b\": 2, /* x */}";
        assert_eq!(config_value(text), Ok(json!({"a": [1, 2], "b": 2})));
        assert!(matches!(
            server(text),
            Err(Refusal {
                problem: Problem::Syntax(_),
                ..
            })
        ));
        assert_eq!(
            config_value("{\"a\": 1 /* open").map_err(|e| e.to_string()),
            Err("is not JSON (comments and trailing commas are allowed): a /* comment is not closed at line 1 column 9".to_string())
        );
        // A comma after no value is no trailing comma: refused, as VS Code's JSONC refuses it.
        for text in ["[,]", "{, \"a\": 1}", "[1,,]", "{\"a\": 1,,}"] {
            assert!(config_value(text).is_err(), "{text}");
        }
        assert_eq!(config_value("[1, /* c */ ]"), Ok(json!([1])));
        assert_eq!(
            config_value(" // only\n").map(|_| ()),
            Err(Refusal {
                problem: Problem::Empty,
                line: 0,
                column: 0
            })
        );
    }

    #[test]
    fn a_misspelling_is_a_case_a_separator_or_one_letter_away() {
        let known = ["url", "headers", "mcpServers", "clientId", "scopes"];
        let cases = [
            ("URL", Some("url")),
            ("Headers", Some("headers")),
            ("header", Some("headers")),
            ("Header", Some("headers")),
            ("mcp_servers", Some("mcpServers")),
            ("MCP-SERVERS", Some("mcpServers")),
            ("mcpserver", Some("mcpServers")),
            ("client_id", Some("clientId")),
            ("clientID", Some("clientId")),
            ("scope", Some("scopes")),
            // Itself, a short key one letter off, and keys of other kinds are no misspelling.
            ("url", None),
            ("uri", None),
            ("auth", None),
            ("timeout", None),
            ("", None),
        ];
        for (key, meant) in cases {
            assert_eq!(misspelling_of(key, &known, |_| true), meant, "{key}");
        }
        // A known key that is present is never the one meant.
        assert_eq!(misspelling_of("Headers", &known, |k| k != "headers"), None);
    }

    #[test]
    fn shared_event_data_blanks_a_key_named_twice_through_lone_surrogates() {
        // Both keys read as U+FFFD once their lone surrogate escapes are mended, so the
        // decoded value holds only the last member; the text must not hold the first either.
        let text = br#"{"\ud800":"first","\udc00":"last"}"#;
        let mut owned = text.to_vec();
        ready(&mut owned, Source::Server).unwrap();
        assert_eq!(
            std::str::from_utf8(&owned),
            Ok(r#"{                 "\ufffd":"last"}"#)
        );
        let mut shared = bytes::Bytes::from_static(text);
        super::ready_shared(&mut shared, Source::Server).unwrap();
        assert_eq!(
            std::str::from_utf8(&shared),
            Ok(r#"{                 "\ufffd":"last"}"#)
        );
        assert!(serde_json::from_slice::<Unique>(&shared).is_ok());
    }

    #[test]
    fn a_refusal_of_server_text_of_the_wrong_shape_does_not_quote_it() {
        // Module docs: no refusal quotes the text. A typed read's mismatch is `serde_json`'s
        // words, which quote the string or key it met.
        for refusal in [
            from_server::<u64>(br#""sk-live-0123""#).unwrap_err(),
            from_server::<Option<bool>>(br#""sk-live-0123""#).unwrap_err(),
        ] {
            let said = refusal.to_string();
            assert!(!said.contains("sk-live-0123"), "{said}");
        }
    }

    /// A JSON value decoded from text that names no key twice in one object: a reader of the
    /// raw text (not only of the decoded value) sees one member per key.
    struct Unique(Value);

    impl<'de> serde::Deserialize<'de> for Unique {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Unique;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("JSON naming no key twice in one object")
                }
                fn visit_unit<E>(self) -> Result<Unique, E> {
                    Ok(Unique(Value::Null))
                }
                fn visit_i64<E>(self, v: i64) -> Result<Unique, E> {
                    Ok(Unique(v.into()))
                }
                fn visit_u64<E>(self, v: u64) -> Result<Unique, E> {
                    Ok(Unique(v.into()))
                }
                fn visit_str<E>(self, v: &str) -> Result<Unique, E> {
                    Ok(Unique(v.into()))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<Unique, A::Error> {
                    let mut items = Vec::new();
                    while let Some(Unique(item)) = seq.next_element()? {
                        items.push(item);
                    }
                    Ok(Unique(Value::Array(items)))
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Unique, A::Error> {
                    let mut object = serde_json::Map::new();
                    while let Some(key) = map.next_key::<String>()? {
                        if object.contains_key(&key) {
                            return Err(serde::de::Error::custom(format!("{key:?} twice")));
                        }
                        let Unique(value) = map.next_value()?;
                        object.insert(key, value);
                    }
                    Ok(Unique(Value::Object(object)))
                }
            }
            d.deserialize_any(Visit)
        }
    }

    /// An array or object tree whose objects name keys from a small pool (so keys repeat), each
    /// key written plain or as `\u` escapes, objects of up to 24 members (past the few).
    #[derive(Clone, Debug)]
    enum Tree {
        Leaf(u8),
        Array(Vec<Tree>),
        Object(Vec<(u8, bool, Tree)>),
    }

    /// The pool's key `n`: the empty key, then `a`, `b`, `k2`..
    fn pool_key(n: u8) -> String {
        match n {
            0 => String::new(),
            1 => "a".into(),
            2 => "b".into(),
            _ => format!("k{n}"),
        }
    }

    impl Tree {
        fn text(&self, out: &mut String) {
            match self {
                Tree::Leaf(n) => out.push_str(&n.to_string()),
                Tree::Array(items) => {
                    out.push('[');
                    for (at, item) in items.iter().enumerate() {
                        if at > 0 {
                            out.push(',');
                        }
                        item.text(out);
                    }
                    out.push(']');
                }
                Tree::Object(members) => {
                    out.push('{');
                    for (at, (key, escaped, value)) in members.iter().enumerate() {
                        if at > 0 {
                            out.push(',');
                        }
                        out.push('"');
                        for c in pool_key(*key).chars() {
                            match escaped {
                                true => out.push_str(&format!("\\u{:04x}", u32::from(c))),
                                false => out.push(c),
                            }
                        }
                        out.push_str("\":");
                        value.text(out);
                    }
                    out.push('}');
                }
            }
        }

        /// The value `serde_json` keeps: the last member of a key named twice.
        fn last_wins(&self) -> Value {
            match self {
                Tree::Leaf(n) => Value::from(*n),
                Tree::Array(items) => Value::Array(items.iter().map(Tree::last_wins).collect()),
                Tree::Object(members) => {
                    let mut object = serde_json::Map::new();
                    for (key, _, value) in members {
                        object.insert(pool_key(*key), value.last_wins());
                    }
                    Value::Object(object)
                }
            }
        }

        fn repeats(&self) -> bool {
            match self {
                Tree::Leaf(_) => false,
                Tree::Array(items) => items.iter().any(Tree::repeats),
                Tree::Object(members) => {
                    let keys: std::collections::HashSet<u8> =
                        members.iter().map(|(k, _, _)| *k).collect();
                    keys.len() < members.len() || members.iter().any(|(_, _, v)| v.repeats())
                }
            }
        }
    }

    fn any_tree() -> impl proptest::strategy::Strategy<Value = Tree> {
        use proptest::prelude::*;
        any::<u8>()
            .prop_map(Tree::Leaf)
            .prop_recursive(4, 160, 24, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..4).prop_map(Tree::Array),
                    proptest::collection::vec((0u8..22, any::<bool>(), inner), 0..24)
                        .prop_map(Tree::Object),
                ]
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(200))]

        /// Valid JSON with keys named twice: from a server the last member wins and the text
        /// itself names each key once; in config text it is refused.
        #[test]
        fn repeated_keys_at_any_depth_leave_the_last_member(tree in any_tree()) {
            let mut text = String::new();
            tree.text(&mut text);
            let expected = tree.last_wins();
            proptest::prop_assert_eq!(server(&text), Ok(expected.clone()));
            let mut body = text.clone().into_bytes();
            ready(&mut body, Source::Server).unwrap();
            let read = serde_json::from_slice::<Unique>(&body).map(|u| u.0);
            proptest::prop_assert_eq!(read.map_err(|e| e.to_string()), Ok(expected.clone()));
            let config = config_value(&text);
            match tree.repeats() {
                true => proptest::prop_assert!(
                    matches!(config, Err(Refusal { problem: Problem::RepeatedKey(_), .. })),
                    "config text naming a key twice was not refused"
                ),
                false => proptest::prop_assert_eq!(config, Ok(expected)),
            }
        }
    }
}

#[cfg(test)]
mod deep_values {
    use serde_json::Value;

    use super::{Problem, Source, ready};
    use crate::limits::MAX_JSON_DEPTH;

    /// Many values past the bound in one server text (an event's data or an error body may be
    /// 16 MiB): each is walked once and written over, and only the first is placed (a place
    /// counts lines from the text's start; counting one per value took minutes here).
    #[test]
    fn many_deep_values_are_each_written_over_and_the_first_placed() {
        let count = 60_000;
        let text = format!(
            "{}{}[]{}",
            "[".repeat(MAX_JSON_DEPTH),
            "[],".repeat(count),
            "]".repeat(MAX_JSON_DEPTH)
        );
        let mut body = text.into_bytes();
        let refused = ready(&mut body, Source::Server).unwrap_err();
        assert_eq!(
            (refused.problem, refused.line, refused.column),
            (Problem::TooDeep, 1, MAX_JSON_DEPTH + 1)
        );
        let expected = format!(
            "{}{}0 {}",
            "[".repeat(MAX_JSON_DEPTH),
            "0 ,".repeat(count),
            "]".repeat(MAX_JSON_DEPTH)
        );
        assert!(body == expected.as_bytes());
    }

    /// A text that is no JSON (a value glued to a number or a sign, brackets that do not
    /// match) stays no JSON when a value past the bound in it is written over: a `0` stub
    /// must not turn `-[…]` into `-0`, `1[…]` into the number `10` or `{…]` into a value.
    #[test]
    fn a_stub_never_turns_malformed_text_into_json() {
        for deep in ["-[1]", "1[]", "1e[]", "{]", "[\"a\"}"] {
            let text = format!(
                "{}{deep}{}",
                "[".repeat(MAX_JSON_DEPTH),
                "]".repeat(MAX_JSON_DEPTH)
            );
            assert!(serde_json::from_str::<Value>(&text).is_err(), "{deep}");
            let mut body = text.into_bytes();
            assert_eq!(
                ready(&mut body, Source::Server).map_err(|r| r.problem),
                Err(Problem::TooDeep),
                "{deep}"
            );
            let readied = String::from_utf8(body).unwrap();
            assert!(
                serde_json::from_slice::<Value>(readied.as_bytes()).is_err(),
                "{deep} readied as JSON: {}",
                readied.trim_matches(['[', ']'])
            );
        }
    }
}

#[cfg(test)]
mod no_json_stays_none {
    use serde_json::Value;

    use super::{Source, ready};
    use crate::limits::MAX_JSON_DEPTH;

    /// Readies `text` as server text and says whether the result parses as JSON.
    fn readied_is_json(text: &str) -> (bool, String) {
        let mut body = text.as_bytes().to_vec();
        let _ = ready(&mut body, Source::Server);
        let readied = String::from_utf8(body).unwrap();
        (serde_json::from_str::<Value>(&readied).is_ok(), readied)
    }

    /// A value past the bound whose brackets match by kind but whose inside is no JSON
    /// (`[1 2]`, `[x]`, `{:}`, `[,]`) makes the text no JSON: it is left as it came.
    #[test]
    fn a_stub_over_a_deep_value_that_is_no_json_inside_keeps_the_text_no_json() {
        for deep in ["[1 2]", "[x]", "{:}", "[,]", "[1,]"] {
            let text = format!(
                "{}{deep}{}",
                "[".repeat(MAX_JSON_DEPTH),
                "]".repeat(MAX_JSON_DEPTH)
            );
            assert!(serde_json::from_str::<Value>(&text).is_err(), "{deep}");
            assert_eq!(readied_is_json(&text), (false, text.clone()), "{deep}");
        }
    }

    /// A repeated key in text that is no JSON (a deep value glued to a sign, a missing colon,
    /// two values): nothing is blanked, the text is left as it came.
    #[test]
    fn blanking_an_earlier_member_keeps_malformed_text_no_json() {
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_JSON_DEPTH + 1),
            "]".repeat(MAX_JSON_DEPTH + 1)
        );
        for text in [
            format!(r#"{{"a":-{deep},"a":1}}"#),
            r#"{"a" 1,"a":2}"#.to_string(),
            r#"{"a":1 2,"a":3}"#.to_string(),
        ] {
            assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
            assert_eq!(readied_is_json(&text), (false, text.clone()));
        }
    }
}
