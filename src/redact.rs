//! Scrubbing configured secrets out of server text.
//!
//! A server may echo a header back (an error page quoting the request, an `isError` text quoting
//! a token). Every piece of server text that reaches a status reason, a tool error, a tool result
//! or the listing goes through [`Redactor::scrub`] first, so a configured secret of at least
//! [`MIN_SECRET_BYTES`] bytes shows as `[redacted]` (DESIGN §8, issue 4).

use std::borrow::Cow;

use std::sync::{Arc, RwLock};

use secrecy::{ExposeSecret, SecretString};

/// Secrets shorter than this are not scrubbed: replacing every `1` or `on` in a text would
/// mangle it without protecting anything worth protecting.
pub(crate) const MIN_SECRET_BYTES: usize = 8;

/// What a scrubbed secret becomes.
pub(crate) const REDACTED: &str = "[redacted]";

/// The secrets of one server entry: its header values, the words of each header value (so the
/// token of `Bearer <token>` is caught alone), and every substituted env value; plus the tokens
/// a sign-in learns while the Pack runs ([`Redactor::learner`]).
#[derive(Default)]
pub(crate) struct Redactor {
    /// Longest first, so a secret that contains another is replaced whole.
    secrets: Vec<SecretString>,
    /// Access and refresh tokens learned at run time, longest first; shared with the learner.
    learned: Arc<RwLock<Vec<SecretString>>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

/// Keeps at most this many learned tokens per server (the newest): a long-running Pack refreshes
/// its tokens for days, and a token older than these is long expired.
const MAX_LEARNED: usize = 64;

impl Redactor {
    /// Adds `value`, and each whitespace-separated word of it, when long enough; also the form
    /// the value takes inside a JSON string, when that differs.
    pub(crate) fn add(&mut self, value: &str) {
        let words = value.split_whitespace();
        for candidate in std::iter::once(value).chain(words) {
            if candidate.len() < MIN_SECRET_BYTES {
                continue;
            }
            // A JSON string of a &str always serializes, quotes included.
            let quoted = serde_json::to_string(candidate).unwrap_or_default();
            let escaped = quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or("");
            for form in [candidate, escaped] {
                if form.len() >= MIN_SECRET_BYTES
                    && !self.secrets.iter().any(|s| s.expose_secret() == form)
                {
                    self.secrets.push(SecretString::from(form));
                }
            }
        }
        self.secrets
            .sort_by_key(|s| std::cmp::Reverse(s.expose_secret().len()));
    }

    /// A function that adds a token learned at run time (a sign-in's access or refresh token)
    /// to this redactor, from any thread; tokens shorter than [`MIN_SECRET_BYTES`] are skipped.
    pub(crate) fn learner(&self) -> impl Fn(&SecretString) + Send + Sync + 'static {
        let learned = Arc::clone(&self.learned);
        move |token: &SecretString| {
            if token.expose_secret().len() < MIN_SECRET_BYTES {
                return;
            }
            let mut learned = learned.write().unwrap_or_else(|e| e.into_inner());
            if learned
                .iter()
                .any(|s| s.expose_secret() == token.expose_secret())
            {
                return;
            }
            if learned.len() >= MAX_LEARNED {
                learned.remove(0);
            }
            learned.push(token.clone());
        }
    }

    /// `text` with every known secret replaced by [`REDACTED`]; borrowed when nothing matched.
    pub(crate) fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        let learned = self.learned.read().unwrap_or_else(|e| e.into_inner());
        for secret in learned.iter().chain(&self.secrets) {
            let secret = secret.expose_secret();
            if out.contains(secret) {
                out = Cow::Owned(out.replace(secret, REDACTED));
            }
        }
        out
    }

    /// Scrubs the JSON text `json` (a schema, annotations, `structuredContent`), also where a
    /// secret hides behind JSON escapes other than serde_json's own (`\/`, `\u0041`): such text
    /// is decoded, its strings and keys scrubbed, and encoded again. Text that is not JSON is
    /// scrubbed as plain text.
    pub(crate) fn scrub_json<'a>(&self, json: &'a str) -> Cow<'a, str> {
        let nothing_learned = self
            .learned
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty();
        if self.secrets.is_empty() && nothing_learned {
            return Cow::Borrowed(json);
        }
        if !json.contains('\\') {
            return self.scrub(json);
        }
        let Ok(mut value) = serde_json::from_str::<serde_json::Value>(json) else {
            return self.scrub(json);
        };
        if !self.scrub_value(&mut value) {
            return Cow::Borrowed(json);
        }
        Cow::Owned(value.to_string())
    }

    /// Scrubs every string and key inside `value`; whether anything changed.
    fn scrub_value(&self, value: &mut serde_json::Value) -> bool {
        use serde_json::Value;
        match value {
            Value::String(text) => match self.scrub(text) {
                Cow::Borrowed(_) => false,
                Cow::Owned(scrubbed) => {
                    *text = scrubbed;
                    true
                }
            },
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, v| self.scrub_value(v) | changed),
            Value::Object(map) => {
                let mut changed = false;
                let entries = std::mem::take(map);
                for (key, mut v) in entries {
                    changed |= self.scrub_value(&mut v);
                    let key = match self.scrub(&key) {
                        Cow::Borrowed(_) => key,
                        Cow::Owned(scrubbed) => {
                            changed = true;
                            scrubbed
                        }
                    };
                    map.insert(key, v);
                }
                changed
            }
            _ => false,
        }
    }

    /// [`Redactor::scrub`] into an owned string.
    pub(crate) fn scrub_owned(&self, text: String) -> String {
        match self.scrub(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(scrubbed) => scrubbed,
        }
    }
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

    #[test]
    fn tokens_learned_at_run_time_are_scrubbed() {
        let mut r = Redactor::default();
        r.add("configured-secret-1");
        let learn = r.learner();
        learn(&SecretString::from("access-token-000042"));
        learn(&SecretString::from("access-token-000042"));
        learn(&SecretString::from("short"));
        assert_eq!(
            r.scrub("Bearer access-token-000042 and configured-secret-1, short"),
            "Bearer [redacted] and [redacted], short"
        );
        assert_eq!(
            r.scrub_json(r#"{"t":"access-token-000042"}"#),
            r#"{"t":"[redacted]"}"#
        );
        for n in 0..MAX_LEARNED {
            learn(&SecretString::from(format!("rotated-token-{n:04}")));
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
    fn empty_redactor_borrows() {
        let r = Redactor::default();
        assert!(matches!(r.scrub("anything"), Cow::Borrowed("anything")));
        assert_eq!(r.scrub_owned("x".to_string()), "x");
    }
}
