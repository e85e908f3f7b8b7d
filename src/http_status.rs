//! What an HTTP error status tells the Pack beyond its number: where a refused redirect
//! pointed, how long a throttled server asks to be left alone (`Retry-After`), and the config
//! hint a `401`/`403` earns.
//!
//! Pure functions over a status and its headers, so the transport calls each in one line and
//! none of them does I/O. Every piece of server text they return is scrubbed, and still goes
//! through the transport's scrub-then-cut before it reaches a reason.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{StatusCode, Url};

use crate::redact::{REDACTED, Redactor};

/// The longest redirect target a reason quotes, in bytes (after scrubbing).
pub(crate) const MAX_LOCATION_BYTES: usize = 512;

/// A refused redirect's target as a reason shows it.
#[derive(Debug, PartialEq)]
pub(crate) struct RedirectTarget {
    /// Scheme, host, port and path; scrubbed, not yet bounded.
    pub(crate) url: String,
    /// Whether the `Location` had a query or a fragment, which is not shown.
    pub(crate) query_omitted: bool,
}

/// The URL a redirect's `Location` names, for a reason. The raw value is scrubbed by `redactor`
/// **before** anything parses it (the URL parser lower-cases and decodes a host, which would
/// hide an echoed secret from the scrubber). Its query and fragment are dropped: they often
/// hold a key, and scheme, host, port and path are what a config fix needs. A relative
/// reference is resolved against the request URL `base` (RFC 9110 §10.2.2); when `host_secret`
/// (the url's host came from an env value) and the target stays on that host, the host shows as
/// `[redacted]`. Not yet bounded.
pub(crate) fn redirect_target(
    location: &HeaderValue,
    base: &Url,
    redactor: &Redactor,
    host_secret: bool,
) -> RedirectTarget {
    let written = String::from_utf8_lossy(location.as_bytes());
    let scrubbed = redactor.scrub(written.trim());
    let (reference, query_omitted) = match scrubbed.find(['?', '#']) {
        Some(end) => (&scrubbed[..end], true),
        None => (&scrubbed[..], false),
    };
    let url = if has_scheme(reference) {
        // Absolute: shown as the server wrote it (scrubbed), never re-serialized.
        reference.to_string()
    } else {
        match base.join(reference) {
            Ok(resolved) => {
                let same_host = resolved.host() == base.host() && resolved.port() == base.port();
                let text = if host_secret && same_host {
                    let port = resolved
                        .port()
                        .map(|port| format!(":{port}"))
                        .unwrap_or_default();
                    format!(
                        "{}://{REDACTED}{port}{}",
                        resolved.scheme(),
                        resolved.path()
                    )
                } else {
                    let mut shown = resolved;
                    shown.set_query(None);
                    shown.set_fragment(None);
                    shown.to_string()
                };
                redactor.scrub_owned(text)
            }
            Err(_) => reference.to_string(),
        }
    };
    RedirectTarget { url, query_omitted }
}

/// Whether `reference` starts with a URI scheme and `:` (RFC 3986 §3.1), i.e. is absolute.
fn has_scheme(reference: &str) -> bool {
    let Some((scheme, _)) = reference.split_once(':') else {
        return false;
    };
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// The reason for a refused redirect. `target` is the scrubbed, bounded target, when the server
/// sent a `Location`.
pub(crate) fn redirect_reason(status: StatusCode, target: Option<&RedirectTarget>) -> String {
    let status = status.as_u16();
    match target {
        Some(target) if !target.url.is_empty() => {
            let omitted = if target.query_omitted {
                " (query omitted)"
            } else {
                ""
            };
            format!(
                "the server answered with a redirect (HTTP {status}) to \"{}\"{omitted}, which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\"",
                target.url
            )
        }
        _ => format!(
            "the server answered with a redirect (HTTP {status}), which this client refuses to follow so that the configured headers reach no other server"
        ),
    }
}

/// The wait a `429 Too Many Requests` or `503 Service Unavailable` asks for with `Retry-After`
/// (RFC 9110 §10.2.3: delay-seconds or an HTTP-date, a date in the past meaning zero). `None`
/// for any other status, or a missing or unreadable value.
pub(crate) fn retry_after(status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
    if status != StatusCode::TOO_MANY_REQUESTS && status != StatusCode::SERVICE_UNAVAILABLE {
        return None;
    }
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // More digits than a u64 holds is still "a very long time".
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(
        date.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// `message` with the entry's config `hint` appended when the status is `401 Unauthorized` or
/// `403 Forbidden`; `message` unchanged otherwise.
pub(crate) fn with_auth_hint(status: StatusCode, message: String, hint: Option<&str>) -> String {
    match hint {
        Some(hint) if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN => {
            format!("{message}; {hint}")
        }
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(retry_after: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_str(retry_after).unwrap());
        headers
    }

    #[test]
    fn retry_after_reads_seconds_and_dates_on_429_and_503_only() {
        let wait = |status: u16, value: &str| {
            retry_after(StatusCode::from_u16(status).unwrap(), &headers(value))
        };
        assert_eq!(wait(429, "8"), Some(Duration::from_secs(8)));
        assert_eq!(wait(503, " 120 "), Some(Duration::from_secs(120)));
        assert_eq!(wait(503, "0"), Some(Duration::ZERO));
        assert_eq!(
            wait(429, "99999999999999999999999"),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            wait(503, "Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
        let until = wait(429, &later).unwrap();
        assert!(
            until > Duration::from_secs(3500) && until <= Duration::from_secs(3600),
            "{until:?}"
        );
        for bad in ["-1", "1.5", "soon", ""] {
            assert_eq!(wait(429, bad), None, "{bad:?}");
        }
        assert_eq!(wait(500, "8"), None);
        assert_eq!(wait(401, "8"), None);
        assert_eq!(
            retry_after(StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new()),
            None
        );
    }

    #[test]
    fn redirect_targets_resolve_against_the_request_url() {
        let base = Url::parse("http://127.0.0.1:8000/mcp").unwrap();
        let mut redactor = Redactor::default();
        redactor.add_secret("Sk-Live-4F9A8B7C6D5E");
        let target = |location: &str| {
            let t = redirect_target(
                &HeaderValue::from_str(location).unwrap(),
                &base,
                &redactor,
                false,
            );
            (t.url, t.query_omitted)
        };
        assert_eq!(
            target("/mcp/"),
            ("http://127.0.0.1:8000/mcp/".into(), false)
        );
        assert_eq!(
            target("/mcp/?api_key=sk-1234567890#frag"),
            ("http://127.0.0.1:8000/mcp/".into(), true)
        );
        assert_eq!(
            target("https://other.example/x"),
            ("https://other.example/x".into(), false)
        );
        assert_eq!(
            target("https://Sk-Live-4F9A8B7C6D5E.Login.example/cb?x=1"),
            ("https://[redacted].Login.example/cb".into(), true)
        );
        assert_eq!(
            target("//other.example/x"),
            ("http://other.example/x".into(), false)
        );
        assert_eq!(target("http://[::1"), ("http://[::1".into(), false));
        assert_eq!(
            redirect_reason(
                StatusCode::TEMPORARY_REDIRECT,
                Some(&RedirectTarget {
                    url: "http://127.0.0.1:8000/mcp/".into(),
                    query_omitted: false
                })
            ),
            "the server answered with a redirect (HTTP 307) to \"http://127.0.0.1:8000/mcp/\", which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\""
        );
        assert_eq!(
            redirect_reason(
                StatusCode::PERMANENT_REDIRECT,
                Some(&RedirectTarget {
                    url: "http://127.0.0.1:8000/mcp/".into(),
                    query_omitted: true
                })
            ),
            "the server answered with a redirect (HTTP 308) to \"http://127.0.0.1:8000/mcp/\" (query omitted), which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\""
        );
        assert_eq!(
            redirect_reason(StatusCode::FOUND, None),
            "the server answered with a redirect (HTTP 302), which this client refuses to follow so that the configured headers reach no other server"
        );
    }

    #[test]
    fn a_secret_host_is_never_shown_in_a_redirect_target() {
        let base = Url::parse("http://localhost:8000/a/mcp?k=v").unwrap();
        let mut redactor = Redactor::default();
        redactor.add_secret("LocalHost");
        redactor.add_secret("localhost");
        let target = |location: &str| {
            redirect_target(
                &HeaderValue::from_str(location).unwrap(),
                &base,
                &redactor,
                true,
            )
            .url
        };
        assert_eq!(target("/mcp/"), "http://[redacted]:8000/mcp/");
        assert_eq!(target("mcp/"), "http://[redacted]:8000/a/mcp/");
        assert_eq!(
            target("http://LocalHost:8000/x"),
            "http://[redacted]:8000/x"
        );
        assert_eq!(
            target("http://localhost:8000/x"),
            "http://[redacted]:8000/x"
        );
        assert_eq!(target("//other.example/x"), "http://other.example/x");
    }

    #[test]
    fn auth_hints_go_on_401_and_403_only() {
        let hint = Some("the environment variable \"K\" used in header \"X\" is set but empty");
        assert_eq!(
            with_auth_hint(
                StatusCode::UNAUTHORIZED,
                "HTTP 401 Unauthorized".into(),
                hint
            ),
            "HTTP 401 Unauthorized; the environment variable \"K\" used in header \"X\" is set but empty"
        );
        assert_eq!(
            with_auth_hint(StatusCode::FORBIDDEN, "HTTP 403 Forbidden: no".into(), hint),
            "HTTP 403 Forbidden: no; the environment variable \"K\" used in header \"X\" is set but empty"
        );
        assert_eq!(
            with_auth_hint(StatusCode::NOT_FOUND, "HTTP 404 Not Found".into(), hint),
            "HTTP 404 Not Found"
        );
        assert_eq!(
            with_auth_hint(
                StatusCode::UNAUTHORIZED,
                "HTTP 401 Unauthorized".into(),
                None
            ),
            "HTTP 401 Unauthorized"
        );
    }
}
