//! The `oauth` object of a server entry (the key Claude Code uses).
//!
//! ```json
//! "oauth": {
//!   "clientId": "…", "clientSecret": "${env:…}",
//!   "clientMetadataUrl": "https://…/client.json",
//!   "callbackPort": 33418,
//!   "scopes": "files:read files:write",
//!   "grantType": "client_credentials", "privateKey": "${env:…}", "signingAlgorithm": "ES256",
//!   "authorizationServer": "https://auth.example.com"
//! }
//! ```
//!
//! Owns the shape and its rules; a refusal names the field, never its value. A key that is one
//! of [`KEYS`] in another case, with `_` or `-`, or one letter off (`clientID`, `client_id`,
//! `scope`) refuses the entry with a did-you-mean, as a misspelled entry key does; Gemini CLI's
//! keys that route credentials (`tokenUrl`, `audiences`, …) and Claude Code's
//! `authServerMetadataUrl` ([`REFUSED_KEYS`]) refuse it naming what to write instead, and Gemini
//! CLI's `enabled: false` switches the object off; other unknown fields are ignored, like
//! everywhere in an entry. String values go through the entry's substitution
//! (`${env:NAME}`), given as a function; the substituted values become the entry's secrets,
//! except in the fields [`is_public`] names, which the sign-in link shows by design.

use reqwest::Url;
use secrecy::SecretString;
use serde_json::Value;

use super::challenge::split_scopes;
use crate::json::{did_you_mean, json_type, misspelling_of};
use crate::substitute::printable;

/// The keys of the `oauth` object this Pack reads.
const KEYS: [&str; 9] = [
    "clientId",
    "clientSecret",
    "clientMetadataUrl",
    "callbackPort",
    "scopes",
    "grantType",
    "privateKey",
    "signingAlgorithm",
    "authorizationServer",
];

/// Other clients' `oauth` keys that say where credentials go or how the token is sent, which
/// this Pack decides from the server instead, with the client that writes each: each refuses the
/// entry, naming the key and what to write instead (never ignored: a user who wrote one expects
/// it obeyed).
const REFUSED_KEYS: [(&str, &str, &str); 7] = [
    ("authorizationUrl", "Gemini CLI", FOUND_FROM_METADATA),
    ("tokenUrl", "Gemini CLI", FOUND_FROM_METADATA),
    ("registrationUrl", "Gemini CLI", FOUND_FROM_METADATA),
    (
        "authServerMetadataUrl",
        "Claude Code",
        "the authorization server's metadata is found from the server's (RFC 9728, RFC 8414): remove it, and write \"authorizationServer\" (the issuer) to say where a client secret may go",
    ),
    (
        "audiences",
        "Gemini CLI",
        "a token is asked for the server's url as its resource (RFC 8707): remove it",
    ),
    (
        "redirectUri",
        "Gemini CLI",
        "the browser comes back to a loopback port: remove it, and write \"callbackPort\" to choose the port",
    ),
    (
        "tokenParamName",
        "Gemini CLI",
        "the token goes in the Authorization header, never in the url: remove it",
    ),
];

/// What to write instead of an authorization server endpoint in the config.
const FOUND_FROM_METADATA: &str = "the authorization server's endpoints are found from the server's metadata (RFC 9728, RFC 8414): remove it";

/// Which grant gets the tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GrantType {
    /// Authorization code with PKCE: a user signs in in a browser (the default).
    AuthorizationCode,
    /// Client credentials (OAuth 2.1 §4.2; the MCP client-credentials extension): no browser.
    ClientCredentials,
}

/// The parsed `oauth` object. Its `Debug` shows which secrets are set, never them.
pub(crate) struct OAuthConfig {
    /// `clientId`: a pre-registered client.
    pub(crate) client_id: Option<String>,
    /// `clientSecret`: the pre-registered client's secret.
    pub(crate) client_secret: Option<SecretString>,
    /// `clientMetadataUrl`: an https URL used as the client id where the server supports
    /// Client ID Metadata Documents.
    pub(crate) client_metadata_url: Option<Url>,
    /// `callbackPort`: the fixed port of the loopback redirect listener.
    pub(crate) callback_port: Option<u16>,
    /// `scopes`: space-separated text or an array of strings.
    pub(crate) scopes: Option<Vec<String>>,
    /// `grantType`: `authorization_code` (default) or `client_credentials`.
    pub(crate) grant_type: GrantType,
    /// `privateKey`: a PKCS #8 PEM key for `private_key_jwt` client assertions (RFC 7523).
    pub(crate) private_key: Option<SecretString>,
    /// `signingAlgorithm`: the assertion's algorithm; `ES256` (the default) is supported.
    pub(crate) signing_algorithm: String,
    /// `authorizationServer`: the issuer identifier (RFC 8414 §2) of the authorization server
    /// `clientSecret` and `privateKey` belong to, exactly as written (an http(s) URL); the only
    /// one besides the MCP server's own origin they are sent to
    /// ([`super::client::credential_may_go`]).
    pub(crate) authorization_server: Option<String>,
}

impl Default for OAuthConfig {
    fn default() -> Self {
        OAuthConfig {
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            callback_port: None,
            scopes: None,
            grant_type: GrantType::AuthorizationCode,
            private_key: None,
            signing_algorithm: "ES256".to_string(),
            authorization_server: None,
        }
    }
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[set]"),
            )
            .field(
                "client_metadata_url",
                &self.client_metadata_url.as_ref().map(Url::as_str),
            )
            .field("callback_port", &self.callback_port)
            .field("scopes", &self.scopes)
            .field("grant_type", &self.grant_type)
            .field("private_key", &self.private_key.as_ref().map(|_| "[set]"))
            .field("signing_algorithm", &self.signing_algorithm)
            .field("authorization_server", &self.authorization_server)
            .finish()
    }
}

/// Whether `field` (`oauth.clientId`, as the substitution names it) is shown by design, so a
/// value substituted into it is no secret: the client identifier (RFC 6749 §2.2: not a
/// secret), the scopes and the client metadata URL travel in the authorization request the user
/// opens; the grant type, signing algorithm and callback port are settings, and the
/// authorization server's issuer is a public URL its metadata names. Scrubbing them would
/// break the sign-in link. Every other field (`clientSecret`, `privateKey`) is a secret.
pub(crate) fn is_public(field: &str) -> bool {
    matches!(
        field,
        "oauth.clientId"
            | "oauth.scopes"
            | "oauth.clientMetadataUrl"
            | "oauth.grantType"
            | "oauth.signingAlgorithm"
            | "oauth.callbackPort"
            | "oauth.authorizationServer"
    )
}

/// Substitutes `${env:...}` in a written string; the second argument names the field for the
/// refusal.
pub(crate) type Substitute<'a> = dyn FnMut(&str, &str) -> Result<String, String> + 'a;

/// Parses an entry's `oauth` value.
///
/// # Errors
/// A refusal naming the field (`oauth.callbackPort`, …) and what was expected, or a key that
/// misspells one of [`KEYS`] while that key is absent (the setting would be silently ignored),
/// naming the key as written and the one meant.
pub(crate) fn parse(value: &Value, substitute: &mut Substitute<'_>) -> Result<OAuthConfig, String> {
    let Value::Object(fields) = value else {
        return Err(format!(
            "oauth must be an object, found {}",
            json_type(value)
        ));
    };
    for key in fields.keys() {
        if let Some(meant) = misspelling_of(key, &KEYS, |known| !fields.contains_key(known)) {
            return Err(format!(
                "the entry's \"oauth\" has \"{}\", which this Pack does not read; {}",
                printable(key),
                did_you_mean(key, meant)
            ));
        }
    }
    if let Some((key, client, instead)) = REFUSED_KEYS
        .iter()
        .find(|(k, _, _)| fields.contains_key(*k))
    {
        return Err(format!(
            "the entry's \"oauth\" has \"{key}\" ({client}'s key), which this Pack does not read: {instead}"
        ));
    }
    // Gemini CLI's `enabled`: `false` switches the object's settings off (a sign-in a server asks
    // for is still offered, as for an entry without `oauth`).
    match fields.get("enabled") {
        None | Some(Value::Null | Value::Bool(true)) => {}
        Some(Value::Bool(false)) => return Ok(OAuthConfig::default()),
        Some(other) => {
            return Err(format!(
                "oauth.enabled must be true or false, found {}",
                json_type(other)
            ));
        }
    }
    let mut string = |key: &str| -> Result<Option<String>, String> {
        match fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => substitute(text, &format!("oauth.{key}")).map(Some),
            Some(other) => Err(format!(
                "oauth.{key} must be a string, found {}",
                json_type(other)
            )),
        }
    };
    let mut config = OAuthConfig {
        client_id: string("clientId")?.filter(|s| !s.is_empty()),
        client_secret: string("clientSecret")?
            .filter(|s| !s.is_empty())
            .map(SecretString::from),
        private_key: string("privateKey")?
            .filter(|s| !s.is_empty())
            .map(SecretString::from),
        ..OAuthConfig::default()
    };
    if let Some(url) = string("clientMetadataUrl")? {
        let url = Url::parse(&url)
            .ok()
            .filter(|u| u.scheme() == "https" && u.path() != "/")
            .ok_or("oauth.clientMetadataUrl must be an https URL with a path")?;
        config.client_metadata_url = Some(url);
    }
    if let Some(issuer) = string("authorizationServer")? {
        Url::parse(&issuer)
            .ok()
            .filter(|u| matches!(u.scheme(), "https" | "http") && u.host().is_some())
            .ok_or(
                "oauth.authorizationServer must be the authorization server's issuer, an https URL",
            )?;
        config.authorization_server = Some(issuer);
    }
    if let Some(algorithm) = string("signingAlgorithm")? {
        if algorithm != "ES256" {
            return Err("oauth.signingAlgorithm must be ES256 (the one supported)".to_string());
        }
        config.signing_algorithm = algorithm;
    }
    match string("grantType")?.as_deref() {
        None | Some("authorization_code") => {}
        Some("client_credentials") => config.grant_type = GrantType::ClientCredentials,
        Some(_) => {
            return Err(
                "oauth.grantType must be \"authorization_code\" or \"client_credentials\""
                    .to_string(),
            );
        }
    }
    match fields.get("callbackPort") {
        None | Some(Value::Null) => {}
        Some(Value::Number(n)) => {
            let port = n
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p != 0)
                .ok_or("oauth.callbackPort must be a port number from 1 to 65535")?;
            config.callback_port = Some(port);
        }
        Some(other) => {
            return Err(format!(
                "oauth.callbackPort must be a number, found {}",
                json_type(other)
            ));
        }
    }
    // Every string of the object follows the entry's substitution rules, the scopes too (an
    // unset `${env:NAME}` refuses the entry instead of reaching the authorization server).
    match fields.get("scopes") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => {
            config.scopes = Some(split_scopes(&substitute(text, "oauth.scopes")?));
        }
        Some(Value::Array(items)) => {
            let mut scopes = Vec::new();
            for item in items {
                let Value::String(scope) = item else {
                    return Err("oauth.scopes must be a string or an array of strings".to_string());
                };
                scopes.extend(split_scopes(&substitute(scope, "oauth.scopes")?));
            }
            config.scopes = Some(split_scopes(&scopes.join(" ")));
        }
        Some(other) => {
            return Err(format!(
                "oauth.scopes must be a string or an array of strings, found {}",
                json_type(other)
            ));
        }
    }
    if config.grant_type == GrantType::ClientCredentials {
        if config.client_id.is_none() {
            return Err("oauth.grantType \"client_credentials\" needs oauth.clientId".to_string());
        }
        if config.client_secret.is_none() && config.private_key.is_none() {
            return Err(
                "oauth.grantType \"client_credentials\" needs oauth.clientSecret or oauth.privateKey"
                    .to_string(),
            );
        }
    }
    if config.client_secret.is_some() && config.client_id.is_none() {
        return Err("oauth.clientSecret needs oauth.clientId".to_string());
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(written: &str, field: &str) -> Result<String, String> {
        match written {
            "${env:SECRET}" => Ok("s3cr3t-value-123".to_string()),
            "${env:MISSING}" => Err(format!(
                "environment variable \"MISSING\" (used in {field}) is not set"
            )),
            other => Ok(other.to_string()),
        }
    }

    fn parsed(value: Value) -> Result<OAuthConfig, String> {
        parse(&value, &mut env)
    }

    #[test]
    fn full_object_parses_and_debug_hides_secrets() {
        let config = parsed(json!({
            "clientId": "abc",
            "clientSecret": "${env:SECRET}",
            "clientMetadataUrl": "https://app.example.com/client.json",
            "callbackPort": 33418,
            "scopes": "a b a",
            "unknown": true
        }))
        .unwrap();
        use secrecy::ExposeSecret;
        assert_eq!(config.client_id.as_deref(), Some("abc"));
        assert_eq!(
            config.client_secret.as_ref().unwrap().expose_secret(),
            "s3cr3t-value-123"
        );
        assert_eq!(config.callback_port, Some(33418));
        assert_eq!(config.scopes, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(config.grant_type, GrantType::AuthorizationCode);
        assert_eq!(
            format!("{config:?}"),
            "OAuthConfig { client_id: Some(\"abc\"), client_secret: Some(\"[set]\"), \
             client_metadata_url: Some(\"https://app.example.com/client.json\"), \
             callback_port: Some(33418), scopes: Some([\"a\", \"b\"]), grant_type: \
             AuthorizationCode, private_key: None, signing_algorithm: \"ES256\", \
             authorization_server: None }"
        );
        assert_eq!(
            parsed(json!({"scopes": ["x y", "z"]})).unwrap().scopes,
            Some(vec!["x".to_string(), "y".to_string(), "z".to_string()])
        );
    }

    #[test]
    fn refusals_name_the_field_never_the_value() {
        let cases = [
            (json!("x"), "oauth must be an object, found a string"),
            (
                json!({"clientId": 5}),
                "oauth.clientId must be a string, found a number",
            ),
            (
                json!({"clientId": "a", "clientSecret": "${env:MISSING}"}),
                "environment variable \"MISSING\" (used in oauth.clientSecret) is not set",
            ),
            (
                json!({"callbackPort": 70000}),
                "oauth.callbackPort must be a port number from 1 to 65535",
            ),
            (
                json!({"callbackPort": "80"}),
                "oauth.callbackPort must be a number, found a string",
            ),
            (
                json!({"clientMetadataUrl": "http://secret-host.example.com/c.json"}),
                "oauth.clientMetadataUrl must be an https URL with a path",
            ),
            (
                json!({"grantType": "password"}),
                "oauth.grantType must be \"authorization_code\" or \"client_credentials\"",
            ),
            (
                json!({"grantType": "client_credentials", "clientId": "a"}),
                "oauth.grantType \"client_credentials\" needs oauth.clientSecret or oauth.privateKey",
            ),
            (
                json!({"grantType": "client_credentials", "clientSecret": "x"}),
                "oauth.grantType \"client_credentials\" needs oauth.clientId",
            ),
            (
                json!({"clientSecret": "x"}),
                "oauth.clientSecret needs oauth.clientId",
            ),
            (
                json!({"signingAlgorithm": "RS256"}),
                "oauth.signingAlgorithm must be ES256 (the one supported)",
            ),
            (
                json!({"scopes": "${env:MISSING}"}),
                "environment variable \"MISSING\" (used in oauth.scopes) is not set",
            ),
            (
                json!({"scopes": ["a", "${env:MISSING}"]}),
                "environment variable \"MISSING\" (used in oauth.scopes) is not set",
            ),
            (
                json!({"scopes": [1]}),
                "oauth.scopes must be a string or an array of strings",
            ),
        ];
        for (value, reason) in cases {
            assert_eq!(parsed(value.clone()).unwrap_err(), reason, "{value}");
        }
    }

    #[test]
    fn a_misspelled_key_is_refused_naming_the_key_meant() {
        let said = |key: &str, meant: &str| {
            format!(
                "the entry's \"oauth\" has \"{key}\", which this Pack does not read; {}",
                crate::json::did_you_mean(key, meant)
            )
        };
        let cases = [
            (json!({"clientID": "a"}), said("clientID", "clientId")),
            (json!({"client_id": "a"}), said("client_id", "clientId")),
            (json!({"scope": "a b"}), said("scope", "scopes")),
            (
                json!({"callbackport": 33418}),
                said("callbackport", "callbackPort"),
            ),
            (
                json!({"clientId": "a", "client_secret": "${env:SECRET}"}),
                said("client_secret", "clientSecret"),
            ),
            (
                json!({"grant_type": "client_credentials"}),
                said("grant_type", "grantType"),
            ),
            (json!({"privatekey": "k"}), said("privatekey", "privateKey")),
            (
                json!({"clientMetadataURL": "https://a.example/c.json"}),
                said("clientMetadataURL", "clientMetadataUrl"),
            ),
        ];
        for (value, reason) in cases {
            let refused = parsed(value.clone()).unwrap_err();
            assert_eq!(refused, reason, "{value}");
            assert!(!refused.contains("s3cr3t"));
        }
        // Keys of no known kind, and a near miss beside the key itself, are ignored.
        let config = parsed(json!({
            "clientId": "abc",
            "client_id": "other",
            "audience": "x",
        }))
        .unwrap();
        assert_eq!(config.client_id.as_deref(), Some("abc"));
    }

    /// Gemini CLI's keys that route credentials are refused by name, with what to write; its
    /// `enabled: false` switches the object's settings off.
    #[test]
    fn gemini_cli_keys_that_route_credentials_are_refused_and_enabled_false_is_read() {
        for (key, client, instead) in REFUSED_KEYS {
            let refused = parsed(json!({"clientId": "a", key: "https://a.example/x"})).unwrap_err();
            assert_eq!(
                refused,
                format!(
                    "the entry's \"oauth\" has \"{key}\" ({client}'s key), which this Pack does not read: {instead}"
                )
            );
        }
        let off =
            parsed(json!({"enabled": false, "clientId": "a", "clientSecret": "s3cr3t"})).unwrap();
        assert_eq!((off.client_id, off.client_secret.is_none()), (None, true));
        let on = parsed(json!({"enabled": true, "clientId": "a"})).unwrap();
        assert_eq!(on.client_id.as_deref(), Some("a"));
        assert_eq!(
            parsed(json!({"enabled": "no"})).unwrap_err(),
            "oauth.enabled must be true or false, found a string"
        );
    }
}
