//! Finding a tool by what it does: the index of one server's listing and the ranking of a
//! `get_dynamic_tools` search over every ready server's index (README "What the tools answer",
//! docs/tools.md "Search").
//!
//! The ranking is lexical and local (no network, no model):
//!
//! - **Words.** Text is split into words at every character that is not a letter or a digit and
//!   inside identifiers (`snake_case`, `kebab-case`, `camelCase`, `HTTPServer`), lowercased,
//!   stripped of function words ([`STOP_WORDS`]) and stemmed by a light suffix stemmer
//!   ([`stem`]: plurals, `-ing`, `-ed`, `-ation`, a final `e`). Two-word phrases with one
//!   meaning become one word (`pull request`, `merge request` -> `pr`; [`PHRASES`]).
//! - **Concepts.** A word of a query also looks for the other words of its concept
//!   ([`CONCEPTS`]: `ticket` finds `issue`, `remove` finds `delete`), at [`RELATED_WEIGHT`] of its
//!   own weight; per query word only its best-matching form counts, so a large concept weighs no
//!   more than a small one.
//! - **Fields.** BM25F: a tool's name, title, description and parameter names are fields
//!   weighted [`NAME_WEIGHT`], [`TITLE_WEIGHT`], [`DESCRIPTION_WEIGHT`] and [`PARAM_WEIGHT`];
//!   the server (its namespace and one-line description) scores beside them at
//!   [`SERVER_WEIGHT`]. Word rarity (idf) is counted over every server searched.
//! - **Coverage.** A tool that matches more of the query's words ranks higher: its score is
//!   scaled by the share of the query's words it matches ([`COVERAGE`]).
//! - **Exact names win.** A query that is a tool's name ignoring case and every character that
//!   is not a letter or a digit (`Create-Issue` is `create_issue`), also with its namespace in
//!   front (`github/create_issue`, `github_create_issue`, `github.create_issue`), ranks that
//!   tool first.
//!
//! An [`Index`] is built once per listing (when the server stores it) and searched per query;
//! a query allocates only its scores. The index holds each distinct word once and one posting
//! (a tool number and a weight, 8 bytes) per word per tool.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::limits;

/// How much a query word's concept-related words count, against the word itself.
const RELATED_WEIGHT: f32 = 0.55;
/// The weight of a word of a tool's name.
const NAME_WEIGHT: f32 = 3.0;
/// The weight of a word of a tool's title.
const TITLE_WEIGHT: f32 = 2.0;
/// The weight of a word of a tool's description.
const DESCRIPTION_WEIGHT: f32 = 1.0;
/// The weight of a word of a tool's parameter names.
const PARAM_WEIGHT: f32 = 0.5;
/// The weight of a word of the server's namespace or one-line description, for each of its
/// tools.
const SERVER_WEIGHT: f32 = 0.8;
/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalization of the description field (names and titles: none; they are
/// short by nature).
const B_DESCRIPTION: f32 = 0.75;
/// How much the share of the query's words a tool matches scales its score: `score *
/// (1 - COVERAGE + COVERAGE * share)`.
const COVERAGE: f32 = 0.5;

/// The bounds of a search's `limit` (docs/tools.md "Search").
pub(crate) const LIMIT_RANGE: std::ops::RangeInclusive<u64> = 1..=50;
/// A search's `limit` when none is given.
pub(crate) const DEFAULT_LIMIT: usize = 10;
/// The longest query, in bytes.
pub(crate) const MAX_QUERY_BYTES: usize = 512;
/// The longest one-line description, in bytes ([`one_line`]).
pub(crate) const ONE_LINE_BYTES: usize = 160;

/// Words that carry no meaning of their own in a request.
const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "to", "of", "in", "on", "for", "with", "and", "or", "is", "are", "be", "it",
    "its", "this", "that", "these", "those", "my", "me", "i", "we", "our", "us", "you", "your",
    "please", "can", "could", "would", "should", "do", "does", "did", "from", "by", "at", "as",
    "into", "about", "some", "so", "what", "which", "there", "here", "want", "need", "let", "via",
    "using", "use", "tool", "tools", "will", "has", "have", "was", "were", "been", "then", "than",
    "also", "just", "them", "they", "their", "his", "her", "if", "any", "every", "s",
];

/// Two consecutive words (already lowercased, not yet stemmed) that mean one thing, and the
/// word they become.
const PHRASES: &[(&str, &str, &str)] = &[
    ("pull", "request", "pr"),
    ("pull", "requests", "pr"),
    ("merge", "request", "pr"),
    ("merge", "requests", "pr"),
    ("money", "back", "refund"),
    ("file", "a", "create"),
    ("file", "an", "create"),
    ("log", "a", "create"),
    ("log", "an", "create"),
    ("sign", "in", "login"),
    ("log", "in", "login"),
    ("set", "up", "create"),
    ("look", "up", "lookup"),
    ("e", "mail", "email"),
    ("to", "do", "todo"),
    ("up", "to", "date"),
];

/// Concepts: the words of one entry (each stemmed when the table is first used) find each other.
/// Broad, domain-general groups of what people ask MCP servers for; no entry names a server.
const CONCEPTS: &[&[&str]] = &[
    &[
        "create", "add", "new", "make", "insert", "generate", "build", "raise", "submit",
        "schedule", "book", "open",
    ],
    &[
        "delete", "remove", "drop", "erase", "destroy", "trash", "purge", "discard", "forget",
        "cancel",
    ],
    &[
        "update", "edit", "change", "modify", "set", "patch", "alter", "replace", "adjust",
    ],
    &[
        "list", "show", "get", "fetch", "retrieve", "read", "view", "display", "see", "browse",
        "dump",
    ],
    &["all", "entire", "everything", "whole", "full"],
    &[
        "search", "find", "query", "lookup", "look", "locate", "discover", "filter",
    ],
    &["issue", "ticket", "bug", "task", "story", "todo", "item"],
    &["pr", "merge", "patch", "review"],
    &[
        "message", "chat", "post", "dm", "text", "say", "said", "send", "tell", "notify",
    ],
    &["email", "mail", "inbox", "gmail"],
    &["file", "document", "doc", "readme", "content"],
    &["folder", "directory", "dir", "path"],
    &["repo", "repository", "codebase", "project"],
    &[
        "calendar",
        "event",
        "meeting",
        "appointment",
        "schedule",
        "invite",
        "invitation",
        "agenda",
        "call",
    ],
    &[
        "payment",
        "charge",
        "pay",
        "transaction",
        "purchase",
        "paymentintent",
    ],
    &["invoice", "bill", "billing", "receipt"],
    &["refund", "reimburse", "return"],
    &["dispute", "chargeback", "fraud"],
    &["coupon", "discount", "promo", "promotion", "voucher"],
    &["customer", "client", "buyer", "payer"],
    &["subscription", "plan", "recurring", "membership", "renewal"],
    &["price", "cost", "pricing", "amount", "fee"],
    &[
        "user",
        "member",
        "people",
        "person",
        "account",
        "profile",
        "who",
        "colleague",
        "coworker",
        "teammate",
        "employee",
        "someone",
        "contact",
    ],
    &[
        "team",
        "group",
        "teamspace",
        "org",
        "organization",
        "workspace",
    ],
    &[
        "database", "db", "sql", "postgres", "mysql", "table", "row", "select",
    ],
    &["commit", "history", "change"],
    &["branch", "fork"],
    &[
        "page",
        "wiki",
        "notion",
        "confluence",
        "doc",
        "note",
        "article",
    ],
    &[
        "comment",
        "note",
        "reply",
        "feedback",
        "remark",
        "discussion",
        "respond",
    ],
    &["label", "tag", "category"],
    &["status", "state", "transition", "progress", "stage"],
    &[
        "close", "resolve", "done", "finish", "complete", "archive", "status", "state",
    ],
    &["merge", "land", "squash", "integrate"],
    &["approve", "review", "lgtm", "accept"],
    &["release", "version", "deploy", "ship", "publish", "rollout"],
    &[
        "error",
        "exception",
        "crash",
        "failure",
        "fail",
        "problem",
        "fault",
        "bug",
        "issue",
    ],
    &["log", "output", "trace", "console", "stdout"],
    &[
        "screenshot",
        "image",
        "picture",
        "photo",
        "snapshot",
        "screen",
        "capture",
    ],
    &[
        "browser", "web", "website", "site", "webpage", "page", "url", "tab", "internet", "online",
    ],
    &["navigate", "go", "visit", "goto", "load", "url"],
    &["click", "press", "tap", "button", "push"],
    &[
        "type", "enter", "fill", "input", "keyboard", "form", "field",
    ],
    &[
        "time", "date", "now", "today", "current", "clock", "timezone",
    ],
    &["free", "busy", "available", "availability", "freebusy"],
    &["accept", "respond", "rsvp", "decline", "reply", "response"],
    &[
        "remember",
        "memory",
        "observation",
        "store",
        "save",
        "note",
        "know",
        "fact",
        "record",
    ],
    &["entity", "node", "thing", "fact", "graph"],
    &["relation", "relationship", "link", "connection", "connect"],
    &["channel", "room", "conversation", "chat"],
    &["thread", "reply", "conversation"],
    &["reaction", "emoji", "react"],
    &["move", "rename", "relocate", "transfer"],
    &["copy", "duplicate", "clone", "fork", "template"],
    &["upload", "attach", "attachment"],
    &["download", "export", "save", "pdf"],
    &["key", "token", "credential", "secret", "password", "apikey"],
    &[
        "alert",
        "warning",
        "vulnerability",
        "security",
        "advisory",
        "advisor",
        "leak",
        "cve",
        "risk",
    ],
    &[
        "workflow", "action", "pipeline", "ci", "build", "job", "run", "trigger",
    ],
    &["sprint", "cycle", "iteration"],
    &["news", "headline", "article", "stories"],
    &[
        "local",
        "nearby",
        "near",
        "place",
        "business",
        "shop",
        "restaurant",
        "store",
        "cafe",
        "coffee",
    ],
    &["video", "clip", "movie"],
    &["summary", "summarize", "summarizer", "tldr", "overview"],
    &["diff", "patch", "change", "changes", "delta"],
    &[
        "size", "big", "large", "metadata", "info", "detail", "details", "stat",
    ],
    &["notification", "inbox", "mention", "alert"],
    &["gist", "snippet", "paste"],
    &["balance", "fund", "money", "revenue"],
    &["product", "sku", "catalog", "good", "offering", "sell"],
    &["link", "url", "href"],
    &["me", "self", "whoami", "myself", "current", "authenticated"],
    &[
        "code",
        "source",
        "function",
        "class",
        "definition",
        "symbol",
    ],
    &["run", "execute", "exec", "evaluate", "eval", "invoke"],
    &["script", "javascript", "js", "code"],
    &["sql", "query"],
    &[
        "schema",
        "type",
        "types",
        "typescript",
        "column",
        "migration",
        "ddl",
    ],
    &["function", "lambda", "serverless", "edge"],
    &["dropdown", "select", "option", "choose", "pick"],
    &["dialog", "popup", "alert", "modal", "prompt", "confirm"],
    &["wait", "until", "appear", "pause"],
    &[
        "help",
        "doc",
        "documentation",
        "docs",
        "guide",
        "manual",
        "knowledge",
    ],
];

/// Words that say what to do rather than to what: a query word among them weighs
/// [`ACTION_WEIGHT`], since tools share their verbs (`list_*`, `create_*`) and differ by their
/// objects.
const ACTIONS: &[&str] = &[
    "create", "add", "new", "make", "insert", "generate", "build", "raise", "submit", "open",
    "delete", "remove", "drop", "erase", "destroy", "trash", "purge", "discard", "cancel",
    "update", "edit", "change", "modify", "set", "patch", "alter", "replace", "adjust", "list",
    "show", "get", "fetch", "retrieve", "read", "view", "display", "see", "browse", "dump",
    "search", "find", "query", "lookup", "look", "locate", "discover", "filter", "write", "put",
    "give", "make", "take", "go", "check", "tell",
];

/// How much a query word that is an action ([`ACTIONS`]) weighs, against an object word.
const ACTION_WEIGHT: f32 = 0.6;

/// The text of one tool that its ranking reads; every string as the listing holds it (scrubbed).
pub(crate) struct Doc<'a> {
    pub(crate) name: &'a str,
    pub(crate) title: Option<&'a str>,
    pub(crate) description: &'a str,
    pub(crate) params: Vec<&'a str>,
}

/// One server's search index, built when its listing is stored ([`Index::build`]); tool
/// numbers are the positions of the listing's tools.
#[derive(Default)]
pub(crate) struct Index {
    /// Every word of the tools' fields and, per tool that has it, its BM25F weight (the
    /// field-weighted, length-normalized term frequency).
    postings: HashMap<Box<str>, Vec<(u32, f32)>>,
    /// The words of the server's namespace and one-line description, with their weights.
    server: HashMap<Box<str>, f32>,
    /// Each tool's name, lowercased letters and digits only, with its number, sorted.
    names: Vec<(Box<str>, u32)>,
    /// The namespace, lowercased letters and digits only.
    namespace: Box<str>,
    /// How many tools.
    len: u32,
}

impl Index {
    /// The index of one server's tools (in listing order): `namespace` and its one-line
    /// `description` (the server field) and each tool's [`Doc`].
    pub(crate) fn build<'a>(
        namespace: &str,
        description: Option<&str>,
        docs: impl ExactSizeIterator<Item = Doc<'a>>,
    ) -> Self {
        let len = docs.len() as u32;
        let mut per_doc: Vec<(HashMap<String, f32>, usize)> = Vec::with_capacity(docs.len());
        let mut names = Vec::with_capacity(docs.len());
        for (i, doc) in docs.enumerate() {
            names.push((squash(doc.name).into_boxed_str(), i as u32));
            let mut fields: HashMap<String, f32> = HashMap::new();
            let mut add = |text: &str, weight: f32| {
                for word in words(text) {
                    *fields.entry(word).or_default() += weight;
                }
            };
            add(doc.name, NAME_WEIGHT);
            if let Some(title) = doc.title {
                add(title, TITLE_WEIGHT);
            }
            for param in &doc.params {
                add(param, PARAM_WEIGHT);
            }
            // The description is length-normalized below, so kept apart until then.
            let description = words(doc.description);
            let description_len = description.len();
            let mut described: HashMap<String, f32> = HashMap::new();
            for word in description {
                *described.entry(word).or_default() += DESCRIPTION_WEIGHT;
            }
            for (word, tf) in described {
                // Marked apart by a leading NUL until the average length is known.
                fields.insert(format!("\0{word}"), tf);
            }
            per_doc.push((fields, description_len));
        }
        let average = (per_doc.iter().map(|(_, l)| *l).sum::<usize>() as f32
            / per_doc.len().max(1) as f32)
            .max(1.0);
        let mut postings: HashMap<Box<str>, Vec<(u32, f32)>> = HashMap::new();
        for (i, (fields, description_len)) in per_doc.into_iter().enumerate() {
            let norm = 1.0 - B_DESCRIPTION + B_DESCRIPTION * description_len as f32 / average;
            let mut merged: HashMap<String, f32> = HashMap::new();
            for (word, tf) in fields {
                match word.strip_prefix('\0') {
                    Some(word) => *merged.entry(word.to_string()).or_default() += tf / norm,
                    None => *merged.entry(word).or_default() += tf,
                }
            }
            for (word, tf) in merged {
                postings
                    .entry(word.into_boxed_str())
                    .or_default()
                    .push((i as u32, tf));
            }
        }
        for list in postings.values_mut() {
            list.sort_by_key(|(doc, _)| *doc);
            list.shrink_to_fit();
        }
        postings.shrink_to_fit();
        let mut server: HashMap<Box<str>, f32> = HashMap::new();
        for word in words(namespace)
            .into_iter()
            .chain(description.map(words).unwrap_or_default())
        {
            *server.entry(word.into_boxed_str()).or_default() += 1.0;
        }
        names.sort();
        Self {
            postings,
            server,
            names,
            namespace: squash(namespace).into_boxed_str(),
            len,
        }
    }

    /// The tools whose name the squashed query names exactly: alone, or after the namespace.
    fn exact(&self, squashed: &str) -> impl Iterator<Item = u32> + '_ {
        let by_name = |name: &str| {
            let start = self.names.partition_point(|(n, _)| &**n < name);
            self.names[start..]
                .iter()
                .take_while(move |(n, _)| &**n == name)
                .map(|(_, i)| *i)
                .collect::<Vec<_>>()
        };
        let mut found = by_name(squashed);
        if let Some(rest) = squashed
            .strip_prefix(&*self.namespace)
            .filter(|r| !r.is_empty() && !self.namespace.is_empty())
        {
            found.extend(by_name(rest));
        }
        found.sort_unstable();
        found.dedup();
        found.into_iter()
    }

    /// The heap bytes the index holds (approximately: its strings, postings and tables).
    pub(crate) fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(Box<str>, Vec<(u32, f32)>)>() + 8;
        self.postings
            .iter()
            .map(|(k, v)| entry + k.len() + v.capacity() * 8)
            .sum::<usize>()
            + self
                .server
                .keys()
                .map(|k| k.len() + std::mem::size_of::<(Box<str>, f32)>() + 8)
                .sum::<usize>()
            + self
                .names
                .iter()
                .map(|(n, _)| n.len() + std::mem::size_of::<(Box<str>, u32)>())
                .sum::<usize>()
            + self.namespace.len()
    }
}

/// One ranked tool: the position of its index among those searched, its tool number there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Hit {
    pub(crate) server: usize,
    pub(crate) tool: u32,
    /// Whether the query named the tool exactly (these come first).
    pub(crate) exact: bool,
    pub(crate) score: f32,
}

/// A parsed query: its words, each with the words it looks for and their weights.
pub(crate) struct Query {
    /// Per query word: (word, weight) of the word and its concept relatives, the word first.
    words: Vec<Vec<(String, f32)>>,
    /// The query, lowercased letters and digits only (for exact names).
    squashed: String,
}

impl Query {
    /// `text` (the model's words) parsed.
    pub(crate) fn parse(text: &str) -> Self {
        let mut seen = std::collections::HashSet::new();
        let mut parsed = Vec::new();
        for word in words(text) {
            if !seen.insert(word.clone()) {
                continue;
            }
            let weight = if is_action(&word) { ACTION_WEIGHT } else { 1.0 };
            let mut forms = vec![(word.clone(), weight)];
            for related in related(&word) {
                if !forms.iter().any(|(w, _)| w == related) {
                    forms.push((related.to_string(), weight * RELATED_WEIGHT));
                }
            }
            parsed.push(forms);
        }
        Self {
            words: parsed,
            squashed: squash(text),
        }
    }
}

/// The best `limit` tools of `indexes` for `query`, best first: exact names first (by
/// namespace order of `indexes`, then name order), then by score, ties in index then tool
/// order. Tools that match no word of the query are left out.
pub(crate) fn rank(query: &Query, indexes: &[&Index], limit: usize) -> Vec<Hit> {
    let total: u32 = indexes.iter().map(|i| i.len).sum();
    let n = total.max(1) as f32;
    let bm25_idf = |df: usize, n: f32| -> f32 {
        if df == 0 {
            return 0.0;
        }
        let df = df as f32;
        ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
    };
    // Rarity over every searched tool (the tool fields), and over the searched servers (the
    // server field).
    let idf = |word: &str| -> (f32, f32) {
        let tools: usize = indexes
            .iter()
            .map(|i| i.postings.get(word).map_or(0, Vec::len))
            .sum();
        let servers = indexes
            .iter()
            .filter(|i| i.server.contains_key(word))
            .count();
        (
            bm25_idf(tools, n),
            bm25_idf(servers, indexes.len().max(1) as f32),
        )
    };
    let saturate = |tf: f32| tf * (K1 + 1.0) / (K1 + tf);
    let word_count = query.words.len().max(1) as f32;
    let idfs: Vec<Vec<(f32, f32)>> = query
        .words
        .iter()
        .map(|forms| forms.iter().map(|(w, _)| idf(w)).collect())
        .collect();
    let mut hits = Vec::new();
    for (s, index) in indexes.iter().enumerate() {
        let docs = index.len as usize;
        let mut scores = vec![0.0f32; docs];
        let mut matched = vec![0u16; docs];
        let mut best = vec![0.0f32; docs];
        for (forms, idfs) in query.words.iter().zip(&idfs) {
            best.iter_mut().for_each(|b| *b = 0.0);
            // The server field scores every tool of the server alike.
            let mut server_best = 0.0f32;
            for ((word, weight), (idf, server_idf)) in forms.iter().zip(idfs) {
                if let Some(tf) = index.server.get(word.as_str()) {
                    server_best =
                        server_best.max(weight * server_idf * SERVER_WEIGHT * saturate(*tf));
                }
                if let Some(list) = index.postings.get(word.as_str()) {
                    for &(doc, tf) in list {
                        let score = weight * idf * saturate(tf);
                        let b = &mut best[doc as usize];
                        if score > *b {
                            *b = score;
                        }
                    }
                }
            }
            for doc in 0..docs {
                let own = best[doc];
                let score = own + server_best;
                if score > 0.0 {
                    scores[doc] += score;
                    matched[doc] += 1;
                }
            }
        }
        let exact: Vec<u32> = index.exact(&query.squashed).collect();
        for doc in 0..docs {
            let is_exact = exact.binary_search(&(doc as u32)).is_ok();
            if scores[doc] <= 0.0 && !is_exact {
                continue;
            }
            let share = f32::from(matched[doc]) / word_count;
            hits.push(Hit {
                server: s,
                tool: doc as u32,
                exact: is_exact,
                score: scores[doc] * (1.0 - COVERAGE + COVERAGE * share),
            });
        }
    }
    let order = |a: &Hit, b: &Hit| {
        b.exact
            .cmp(&a.exact)
            .then(b.score.total_cmp(&a.score))
            .then(a.server.cmp(&b.server))
            .then(a.tool.cmp(&b.tool))
    };
    if hits.len() > limit {
        hits.select_nth_unstable_by(limit, order);
        hits.truncate(limit);
    }
    hits.sort_by(order);
    hits
}

/// `text` cut to its first sentence (up to and with the first `.`, `!` or `?` followed by
/// whitespace, or to the first line break), then to [`ONE_LINE_BYTES`] ([`limits::truncate`]).
/// A Markdown ATX heading opening the text (`# Title`, as server instructions often begin) is
/// read as its title, without its `#` markers (CommonMark §4.2). The text is scrubbed already
/// (the listing holds only scrubbed text).
pub(crate) fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    let mut text = text.trim();
    let marks = text.len() - text.trim_start_matches('#').len();
    if (1..=6).contains(&marks) && text[marks..].starts_with([' ', '\t']) {
        text = text[marks..].trim_start();
    }
    let mut end = text.len();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\n' || c == '\r' {
            end = i;
            break;
        }
        if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|(_, next)| next.is_whitespace())
        {
            end = i + c.len_utf8();
            break;
        }
    }
    limits::truncate(text[..end].trim_end(), ONE_LINE_BYTES)
}

/// `text` lowercased, with only its letters and digits: how exact names compare.
fn squash(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The words of `text`: split at non-alphanumerics and inside identifiers, lowercased, phrases
/// joined ([`PHRASES`]), function words dropped, stemmed.
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut raw: Vec<String> = Vec::new();
    for run in text.split(|c: char| !c.is_alphanumeric()) {
        split_identifier(run, &mut raw);
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if let Some(next) = raw.get(i + 1)
            && let Some((_, _, joined)) = PHRASES
                .iter()
                .find(|(a, b, _)| *a == raw[i] && *b == next.as_str())
        {
            out.push((*joined).to_string());
            i += 2;
            continue;
        }
        if !STOP_WORDS.contains(&raw[i].as_str()) {
            out.push(stem(&raw[i]));
        }
        i += 1;
    }
    out
}

/// Splits one run of letters and digits at case changes (`getJiraIssue` -> get, jira, issue;
/// `HTTPServer` -> http, server) and letter/digit boundaries, lowercased, into `out`.
fn split_identifier(run: &str, out: &mut Vec<String>) {
    if run.is_empty() {
        return;
    }
    let chars: Vec<char> = run.chars().collect();
    let mut start = 0;
    for i in 1..chars.len() {
        let (prev, here) = (chars[i - 1], chars[i]);
        let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
        let boundary = (prev.is_lowercase() && here.is_uppercase())
            || (prev.is_uppercase() && here.is_uppercase() && next_lower)
            || (prev.is_alphabetic() && here.is_numeric())
            || (prev.is_numeric() && here.is_alphabetic());
        if boundary {
            out.push(
                chars[start..i]
                    .iter()
                    .flat_map(|c| c.to_lowercase())
                    .collect(),
            );
            start = i;
        }
    }
    out.push(
        chars[start..]
            .iter()
            .flat_map(|c| c.to_lowercase())
            .collect(),
    );
}

fn is_vowel(c: u8) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u' | b'y')
}

/// A light English suffix stemmer for lowercased words: plurals (`ies` -> `y`; `sses`, `ches`,
/// `shes`, `xes`, `zes` -> without `es`; else a final `s` unless `ss`, `us` or `is`), then `ing`
/// and `ed` (when a vowel stays; a doubled last consonant undoubled, `running` -> `run`), `ation`
/// and `tion` -> `t`, then a final `e` (`create`, `creating` and `created` all become
/// `creat`). Words of three letters or fewer, and words with non-ASCII letters, stay as they
/// are.
pub(crate) fn stem(word: &str) -> String {
    if word.len() <= 3 || !word.is_ascii() {
        return word.to_string();
    }
    let mut w = word.to_string();
    if let Some(base) = w.strip_suffix("ies")
        && base.len() >= 2
    {
        w = format!("{base}y");
    } else if ["sses", "ches", "shes", "xes", "zes"]
        .iter()
        .any(|s| w.ends_with(s))
    {
        w.truncate(w.len() - 2);
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w.truncate(w.len() - 1);
    }
    for suffix in ["ing", "ed"] {
        if let Some(base) = w.strip_suffix(suffix)
            && base.len() >= 3
            && base.bytes().any(is_vowel)
        {
            let b = base.as_bytes();
            let n = b.len();
            let doubled = n >= 4
                && b[n - 1] == b[n - 2]
                && !is_vowel(b[n - 1])
                && !matches!(b[n - 1], b'l' | b's' | b'z');
            w = if doubled {
                base[..n - 1].to_string()
            } else {
                base.to_string()
            };
            break;
        }
    }
    if let Some(base) = w.strip_suffix("ation")
        && base.len() >= 3
    {
        w = format!("{base}at");
    } else if let Some(base) = w.strip_suffix("tion")
        && base.len() >= 3
    {
        w = format!("{base}t");
    }
    if w.len() > 3 && w.ends_with('e') {
        w.truncate(w.len() - 1);
    }
    w
}

/// Whether the stemmed `word` is an action word ([`ACTIONS`]).
fn is_action(word: &str) -> bool {
    static TABLE: OnceLock<std::collections::HashSet<String>> = OnceLock::new();
    TABLE
        .get_or_init(|| ACTIONS.iter().flat_map(|w| words(w)).collect())
        .contains(word)
}

/// The stemmed words related to the stemmed `word` by [`CONCEPTS`] (the word itself included
/// when it is in a concept).
fn related(word: &str) -> &'static [String] {
    static TABLE: OnceLock<HashMap<String, Vec<String>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table: HashMap<String, Vec<String>> = HashMap::new();
        for concept in CONCEPTS {
            let stems: Vec<String> = concept.iter().flat_map(|w| words(w)).collect();
            for a in &stems {
                let entry = table.entry(a.clone()).or_default();
                for b in &stems {
                    if !entry.contains(b) {
                        entry.push(b.clone());
                    }
                }
            }
        }
        table
    });
    table.get(word).map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_into_stemmed_words() {
        assert_eq!(words("getJiraIssue"), ["get", "jira", "issu"]);
        assert_eq!(words("list_pull_requests"), ["list", "pr"]);
        assert_eq!(
            words("browser-take-screenshot"),
            ["browser", "tak", "screenshot"]
        );
        assert_eq!(words("HTTPServer v2"), ["http", "server", "v", "2"]);
        assert_eq!(words("Creating the new pages"), ["creat", "new", "pag"]);
    }

    #[test]
    fn stemming_joins_word_forms() {
        for (a, b) in [
            ("create", "created"),
            ("create", "creating"),
            ("issue", "issues"),
            ("entity", "entities"),
            ("branch", "branches"),
            ("run", "running"),
            ("add", "added"),
            ("meeting", "meet"),
            ("execute", "execution"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} / {b}");
        }
        assert_eq!(stem("string"), "string");
        assert_eq!(stem("class"), "class");
    }

    #[test]
    fn one_line_takes_the_first_sentence_within_160_bytes() {
        assert_eq!(one_line("Opens an issue. Needs a repo."), "Opens an issue.");
        assert_eq!(one_line("Version 1.2 of it\nmore"), "Version 1.2 of it");
        assert_eq!(one_line("  no stop  "), "no stop");
        assert_eq!(
            one_line("# Everything Server – Server Instructions\n\nAudience: models."),
            "Everything Server – Server Instructions"
        );
        assert_eq!(one_line("### Files. Read them"), "Files.");
        assert_eq!(one_line("#hashtag tools"), "#hashtag tools");
        assert_eq!(one_line("####### seven"), "####### seven");
        let long = "x".repeat(300);
        let cut = one_line(&long);
        assert_eq!(cut.len(), ONE_LINE_BYTES);
        assert!(cut.ends_with('…'));
    }

    fn index(namespace: &str, tools: &[(&str, &str, &[&str])]) -> Index {
        Index::build(
            namespace,
            None,
            tools.iter().map(|(name, description, params)| Doc {
                name,
                title: None,
                description,
                params: params.to_vec(),
            }),
        )
    }

    #[test]
    fn exact_names_win_in_every_written_form() {
        let github = index(
            "github",
            &[
                ("create_issue", "Open a new issue.", &["title"]),
                ("list_issues", "List issues; create filters.", &[]),
            ],
        );
        let linear = index(
            "linear",
            &[("create_issue", "Create a new issue, issue, issue.", &[])],
        );
        let indexes = [&github, &linear];
        for query in [
            "github/create_issue",
            "GITHUB_CREATE_ISSUE",
            "github.create_issue",
        ] {
            let hits = rank(&Query::parse(query), &indexes, 10);
            assert_eq!(
                (hits[0].server, hits[0].tool, hits[0].exact),
                (0, 0, true),
                "{query}"
            );
            assert!(!hits[1].exact, "{query}");
        }
        let hits = rank(&Query::parse("Create-Issue"), &indexes, 10);
        let mut exact: Vec<(usize, u32)> = hits
            .iter()
            .filter(|h| h.exact)
            .map(|h| (h.server, h.tool))
            .collect();
        exact.sort();
        assert_eq!(exact, [(0, 0), (1, 0)]);
        assert!(hits[..2].iter().all(|h| h.exact));
    }

    #[test]
    fn concepts_find_the_words_a_tool_uses() {
        let slack = index(
            "slack",
            &[
                (
                    "post_message",
                    "Post a message to a channel.",
                    &["channel_id", "text"],
                ),
                ("delete_file", "Delete a file.", &["path"]),
            ],
        );
        let hits = rank(
            &Query::parse("remove an attachment document"),
            &[&slack],
            10,
        );
        assert_eq!(hits[0].tool, 1);
        assert!(rank(&Query::parse("zebra"), &[&slack], 10).is_empty());
    }

    #[test]
    fn limit_bounds_the_hits() {
        let many: Vec<(String, &str, &[&str])> = (0..30)
            .map(|i| (format!("tool_{i}"), "Lists things.", &[] as &[&str]))
            .collect();
        let index = Index::build(
            "x",
            None,
            many.iter().map(|(name, description, params)| Doc {
                name,
                title: None,
                description,
                params: params.to_vec(),
            }),
        );
        assert_eq!(rank(&Query::parse("list"), &[&index], 7).len(), 7);
    }
}

#[cfg(test)]
mod catalog {
    //! Correctness on the bench's catalog (`bench/data/catalog.json`, 13 servers modeled on
    //! public ones); its recall is measured by the bench, not here.
    use super::*;

    #[test]
    fn every_catalog_tool_ranks_first_by_its_exact_name_in_every_form() {
        let catalog: serde_json::Value =
            serde_json::from_str(include_str!("../bench/data/catalog.json")).unwrap();
        let servers = catalog["servers"].as_array().unwrap();
        let mut names: Vec<Vec<&str>> = Vec::new();
        let mut indexes = Vec::new();
        for server in servers {
            let mut tools: Vec<&serde_json::Value> =
                server["tools"].as_array().unwrap().iter().collect();
            tools.sort_by_key(|t| t["name"].as_str().unwrap());
            names.push(tools.iter().map(|t| t["name"].as_str().unwrap()).collect());
            indexes.push(Index::build(
                server["namespace"].as_str().unwrap(),
                server["description"].as_str(),
                tools.iter().map(|t| Doc {
                    name: t["name"].as_str().unwrap(),
                    title: None,
                    description: t["description"].as_str().unwrap(),
                    params: t["params"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| p.as_str().unwrap())
                        .collect(),
                }),
            ));
        }
        let refs: Vec<&Index> = indexes.iter().collect();
        let mut checked = 0;
        for (s, server) in servers.iter().enumerate() {
            let namespace = server["namespace"].as_str().unwrap();
            for (t, name) in names[s].iter().enumerate() {
                for query in [
                    format!("{namespace}/{name}"),
                    format!("{namespace}_{}", name.to_uppercase()),
                    format!("{namespace}.{name}"),
                ] {
                    let hits = rank(&Query::parse(&query), &refs, 10);
                    assert_eq!(
                        (hits[0].server, hits[0].tool, hits[0].exact),
                        (s, t as u32, true),
                        "{query}"
                    );
                    checked += 1;
                }
                // The bare name: this tool among the exact ones, and they come first.
                let hits = rank(&Query::parse(name), &refs, 10);
                let exact: Vec<(usize, u32)> = hits
                    .iter()
                    .take_while(|h| h.exact)
                    .map(|h| (h.server, h.tool))
                    .collect();
                assert!(exact.contains(&(s, t as u32)), "{name}: {exact:?}");
            }
        }
        assert_eq!(checked, 208 * 3);
    }
}
