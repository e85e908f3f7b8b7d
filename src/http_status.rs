//! What an HTTP error status tells the Pack beyond its number: where a refused redirect
//! pointed, how long a throttled server asks to be left alone (`Retry-After`), and the config
//! hint a `401`/`403` earns.
//!
//! Pure functions over a status and its headers, so the transport calls each in one line and
//! none of them does I/O. Every piece of server text they return still goes through the
//! transport's scrub-then-cut before it reaches a reason.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{StatusCode, Url};

/// The longest redirect target a reason quotes, in bytes (after scrubbing).
pub(crate) const MAX_LOCATION_BYTES: usize = 512;

/// The URL a redirect's `Location` names, resolved against the request URL when it is relative
/// (RFC 9110 §10.2.2), as text. Not yet scrubbed or bounded.
pub(crate) fn redirect_target(location: &HeaderValue, base: &Url) -> String {
    let written = String::from_utf8_lossy(location.as_bytes());
    match base.join(written.trim()) {
        Ok(resolved) => resolved.to_string(),
        Err(_) => written.into_owned(),
    }
}

/// The reason for a refused redirect. `target` is the scrubbed, bounded `Location`, when the
/// server sent one.
pub(crate) fn redirect_reason(status: StatusCode, target: Option<&str>) -> String {
    let status = status.as_u16();
    match target {
        Some(target) if !target.is_empty() => format!(
            "the server answered with a redirect (HTTP {status}) to \"{target}\", which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\""
        ),
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
        let target =
            |location: &str| redirect_target(&HeaderValue::from_str(location).unwrap(), &base);
        assert_eq!(target("/mcp/"), "http://127.0.0.1:8000/mcp/");
        assert_eq!(target("https://other.example/x"), "https://other.example/x");
        assert_eq!(target("http://[::1"), "http://[::1");
        assert_eq!(
            redirect_reason(
                StatusCode::TEMPORARY_REDIRECT,
                Some("http://127.0.0.1:8000/mcp/")
            ),
            "the server answered with a redirect (HTTP 307) to \"http://127.0.0.1:8000/mcp/\", which this client does not follow so that the configured headers reach no other server; if that is the server's address, put that URL in the config's \"url\""
        );
        assert_eq!(
            redirect_reason(StatusCode::FOUND, None),
            "the server answered with a redirect (HTTP 302), which this client refuses to follow so that the configured headers reach no other server"
        );
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
