//! The one `WWW-Authenticate` parser (RFC 9110 §11.6.1) and the OAuth challenge a `401` or
//! `403` carries: `Bearer` (RFC 6750 §3, RFC 9728 §5.1) or `DPoP` (RFC 9449 §7.1).
//!
//! Owns: splitting a header value into its challenges ([`parse`]: scheme, token68 or
//! parameters), the typed [`Challenge`] of a token scheme, and the scope syntax
//! ([`split_scopes`], RFC 6749 §3.3). The HTTP client asks it whether a refusal offers a
//! token scheme at all and whether it asks for a DPoP nonce; discovery and step-ups read the
//! parameters.

use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};

/// One challenge of a `WWW-Authenticate` value (RFC 9110 §11.6.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AuthChallenge {
    /// The auth-scheme as sent; schemes compare case-insensitively ([`AuthChallenge::is`]).
    pub(crate) scheme: String,
    /// The token68 (`Negotiate abc==`) of a scheme that sends one instead of parameters.
    pub(crate) token68: Option<String>,
    /// The auth-params in the order sent: names lower-cased, values unquoted and unescaped.
    pub(crate) params: Vec<(String, String)>,
}

impl AuthChallenge {
    /// Whether the scheme is `scheme` (case-insensitive, RFC 9110 §11.1).
    pub(crate) fn is(&self, scheme: &str) -> bool {
        self.scheme.eq_ignore_ascii_case(scheme)
    }

    /// The value of the first parameter named `name` (lower-case).
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The challenges of one `WWW-Authenticate` value, in order. A scheme is a token followed by
/// whitespace, a comma or the end; right after it comes a token68 or comma-separated
/// `name=value` parameters (values tokens or quoted strings, RFC 9110 §5.6.4). Parameters
/// before any scheme are ignored; nothing here fails.
pub(crate) fn parse(value: &str) -> Vec<AuthChallenge> {
    let mut out: Vec<AuthChallenge> = Vec::new();
    // Whether the last challenge was just opened: only then may a bare word be its token68.
    let mut fresh = false;
    let mut rest = value;
    loop {
        let skipped = rest.trim_start_matches([' ', '\t', ',']);
        if rest[..rest.len() - skipped.len()].contains(',') {
            fresh = false;
        }
        rest = skipped;
        if rest.is_empty() {
            return out;
        }
        let end = rest.find(['=', ',', ' ', '\t']).unwrap_or(rest.len());
        let word = &rest[..end];
        let after = rest[end..].trim_start_matches([' ', '\t']);
        match after.strip_prefix('=') {
            // `word=` then `=`, a comma or the end: a token68 with its `=` padding.
            Some(after_eq) if after_eq.is_empty() || after_eq.starts_with(['=', ',']) => {
                let padded = after_eq.trim_start_matches('=');
                let token = &rest[..rest.len() - padded.len()];
                if let Some(last) = out.last_mut().filter(|_| fresh) {
                    last.token68 =
                        Some(token.trim_end_matches([' ', '\t']).replace([' ', '\t'], ""));
                }
                fresh = false;
                rest = padded;
            }
            Some(after_eq) => {
                let after_eq = after_eq.trim_start_matches([' ', '\t']);
                let (param, next) = match after_eq.strip_prefix('"') {
                    Some(quoted) => read_quoted(quoted),
                    None => {
                        let end = after_eq.find([',', ' ', '\t']).unwrap_or(after_eq.len());
                        (after_eq[..end].to_string(), &after_eq[end..])
                    }
                };
                if let Some(last) = out.last_mut() {
                    last.params.push((word.to_ascii_lowercase(), param));
                }
                fresh = false;
                rest = next;
            }
            None if fresh => {
                if let Some(last) = out.last_mut() {
                    last.token68 = Some(word.to_string());
                }
                fresh = false;
                rest = after;
            }
            None => {
                out.push(AuthChallenge {
                    scheme: word.to_string(),
                    ..AuthChallenge::default()
                });
                fresh = true;
                rest = after;
            }
        }
    }
}

/// The unescaped quoted string that starts right after its opening quote, and what follows it.
fn read_quoted(text: &str) -> (String, &str) {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, &text[i + 1..]),
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    out.push(escaped);
                }
            }
            c => out.push(c),
        }
    }
    (out, "")
}

/// The challenge of a token scheme in a `401` or `403`: `Bearer` (RFC 6750 §3, RFC 9728 §5.1)
/// or `DPoP` (RFC 9449 §7.1, the same parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// The protected resource metadata URL, as sent.
    pub(crate) resource_metadata: Option<String>,
    /// The space-separated scopes the resource asks for.
    pub(crate) scope: Option<String>,
    /// The OAuth error code, such as `invalid_token` or `insufficient_scope`.
    pub(crate) error: Option<String>,
}

impl Challenge {
    /// The first `Bearer` or `DPoP` challenge among the `WWW-Authenticate` headers; an empty
    /// one when there is none (a `401` without a challenge still starts discovery).
    pub(crate) fn from_headers(headers: &HeaderMap) -> Challenge {
        Challenge::offered(headers).unwrap_or_default()
    }

    /// The first `Bearer` or `DPoP` challenge among the `WWW-Authenticate` headers, or `None`
    /// when no challenge of any of them has one of those schemes (so
    /// `Basic realm="bearer-gateway"` offers none).
    pub(crate) fn offered(headers: &HeaderMap) -> Option<Challenge> {
        headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(Challenge::parse)
    }

    /// The first `Bearer` or `DPoP` challenge of one `WWW-Authenticate` value (which may hold
    /// several challenges), if any; of each parameter the first one counts.
    pub(crate) fn parse(value: &str) -> Option<Challenge> {
        let bearer = parse(value)
            .into_iter()
            .find(|c| c.is("bearer") || c.is("dpop"))?;
        let take = |name: &str| bearer.param(name).map(str::to_string);
        Some(Challenge {
            resource_metadata: take("resource_metadata"),
            scope: take("scope"),
            error: take("error"),
        })
    }

    /// The challenge's scopes, in order, without duplicates.
    pub(crate) fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref().unwrap_or(""))
    }

    /// Whether this is a `403` step-up challenge (RFC 6750 §3.1 `insufficient_scope`).
    pub(crate) fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// Whether a `DPoP` challenge among the `WWW-Authenticate` headers has the error
/// `use_dpop_nonce`: the resource server wants its nonce (from the `DPoP-Nonce` header) in the
/// proof (RFC 9449 §9).
pub(crate) fn asks_for_dpop_nonce(headers: &HeaderMap) -> bool {
    headers
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(parse)
        .any(|c| c.is("dpop") && c.param("error") == Some("use_dpop_nonce"))
}

/// Space-separated scopes (RFC 6749 §3.3), in order, without duplicates or empty words.
pub(crate) fn split_scopes(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split_ascii_whitespace() {
        if !out.iter().any(|s| s == word) {
            out.push(word.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_parse_params_quoted_strings_and_other_schemes() {
        let c = Challenge::parse(
            r#"Bearer realm="mcp", error="insufficient_scope", scope="files:read files:write", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp""#,
        )
        .unwrap();
        assert_eq!(
            c,
            Challenge {
                resource_metadata: Some(
                    "https://mcp.example.com/.well-known/oauth-protected-resource/mcp".into()
                ),
                scope: Some("files:read files:write".into()),
                error: Some("insufficient_scope".into()),
            }
        );
        assert!(c.is_insufficient_scope());
        assert_eq!(c.scopes(), ["files:read", "files:write"]);

        let two = Challenge::parse(
            r#"Basic realm="x", Bearer Scope=a, error="bad \"q\"", DPoP algs="ES256""#,
        )
        .unwrap();
        assert_eq!(two.scope.as_deref(), Some("a"));
        assert_eq!(two.error.as_deref(), Some(r#"bad "q""#));
        assert_eq!(two.resource_metadata, None);

        assert_eq!(Challenge::parse("Bearer").unwrap(), Challenge::default());
        assert_eq!(Challenge::parse(r#"Basic realm="x""#), None);
        assert_eq!(Challenge::parse(""), None);
        assert_eq!(
            Challenge::parse("Negotiate abc==, bearer scope=\"s\"")
                .unwrap()
                .scope
                .as_deref(),
            Some("s")
        );

        let mut headers = HeaderMap::new();
        headers.append(WWW_AUTHENTICATE, "Basic realm=\"a\"".parse().unwrap());
        headers.append(WWW_AUTHENTICATE, "Bearer scope=\"x y x\"".parse().unwrap());
        assert_eq!(Challenge::from_headers(&headers).scopes(), ["x", "y"]);
        assert_eq!(
            Challenge::from_headers(&HeaderMap::new()),
            Challenge::default()
        );
    }

    #[test]
    fn one_value_splits_into_schemes_with_token68_or_params() {
        let all = parse(r#"Negotiate abc==, Basic realm="a, Bearer b", Bearer scope=x,error="e""#);
        let schemes: Vec<&str> = all.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, ["Negotiate", "Basic", "Bearer"]);
        assert_eq!(all[0].token68.as_deref(), Some("abc=="));
        assert_eq!(
            all[1].params,
            [("realm".to_string(), "a, Bearer b".to_string())]
        );
        assert_eq!(all[2].param("scope"), Some("x"));
        assert_eq!(all[2].param("error"), Some("e"));
        assert_eq!(parse("Foo tok68")[0].token68.as_deref(), Some("tok68"));
        assert!(parse("realm=x").is_empty());
    }

    #[test]
    fn bearer_is_offered_only_as_a_scheme() {
        let offered = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for v in values {
                headers.append(WWW_AUTHENTICATE, v.parse().unwrap());
            }
            Challenge::offered(&headers).is_some()
        };
        assert!(offered(&["bearer"]));
        assert!(offered(&["Basic realm=\"a\"", "Bearer realm=\"b\""]));
        assert!(offered(&["Basic realm=\"a\", Bearer"]));
        assert!(!offered(&["Basic realm=\"bearer-gateway\""]));
        assert!(!offered(&["Basic realm=\"x, Bearer y\""]));
        assert!(!offered(&["Basic bearer=1"]));
        assert!(!offered(&[]));
        // A resource server of DPoP-bound tokens may challenge with `DPoP` alone (RFC 9449 §7.1).
        assert!(offered(&["DPoP resource_metadata=\"http://127.0.0.1/x\""]));
        assert!(!offered(&["Basic realm=\"dpop\""]));
    }

    #[test]
    fn a_dpop_challenge_gives_its_parameters_and_asks_for_a_nonce_only_by_its_error() {
        let c = Challenge::parse(
            r#"DPoP error="use_dpop_nonce", resource_metadata="http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp""#,
        )
        .unwrap();
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.error.as_deref(), Some("use_dpop_nonce"));
        let asks = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for v in values {
                headers.append(WWW_AUTHENTICATE, v.parse().unwrap());
            }
            asks_for_dpop_nonce(&headers)
        };
        assert!(asks(&[r#"DPoP error="use_dpop_nonce""#]));
        assert!(asks(&[
            r#"Bearer realm="a""#,
            r#"dpop error=use_dpop_nonce"#
        ]));
        assert!(!asks(&[r#"Bearer error="use_dpop_nonce""#]));
        assert!(!asks(&[r#"DPoP error="invalid_token""#]));
        assert!(!asks(&[r#"Basic realm="use_dpop_nonce""#]));
        assert!(!asks(&[]));
    }
}
