//! DPoP proofs (RFC 9449): the key pair a DPoP-bound grant is tied to and the proof JWT sent
//! in the `DPoP` header of a request.
//!
//! Owns: generating the ES256 (P-256) key pair ([`DpopKey::generate`]), its stored form
//! (PKCS #8, base64url), and one proof per request ([`DpopKey::proof`]): header
//! `{"typ":"dpop+jwt","alg":"ES256","jwk":{...}}` (the public key only, RFC 9449 §4.2), claims
//! `jti` (16 random bytes, base64url), `htm`, `htu` (the target URI without query and
//! fragment, [`htu`]), `iat` (Unix seconds), `ath` (base64url SHA-256 of the access token, on
//! resource requests, RFC 9449 §4.2) and `nonce` (when the server gave one, §8 and §9).
//!
//! Also owns the server-provided nonce ([`Nonce`], RFC 9449 §8 and §9): the newest
//! `DPoP-Nonce` a server sent, put in every later proof to that server.
//!
//! The key and every proof are secrets: `Debug` shows neither, and the redactor learns the
//! proofs' first segment ([`DpopKey::header_segment`]), which every proof of the key starts
//! with, so an echoed proof is never shown whole.

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};

use super::{Error, ErrorKind, now_secs};

/// The header a proof travels in (RFC 9449 §4.1).
pub(crate) const DPOP: &str = "dpop";
/// The header a server gives its nonce in (RFC 9449 §8.1).
pub(crate) const DPOP_NONCE: &str = "dpop-nonce";
/// The longest nonce taken from a server, in bytes (RFC 9449 sets none; nonces seen in use are
/// tens of bytes); a longer one is ignored, and the request it was asked for fails.
const MAX_NONCE_BYTES: usize = 2048;

/// The one proof algorithm this client signs with (RFC 9449 §5.1 `dpop_signing_alg_values_supported`).
pub(crate) const ALGORITHM: &str = "ES256";

/// An ES256 key pair a grant is bound to. Its `Debug` shows no key.
pub(crate) struct DpopKey {
    pair: EcdsaKeyPair,
    /// The PKCS #8 document, base64url without padding: the form the store keeps.
    stored: SecretString,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DpopKey([redacted])")
    }
}

impl DpopKey {
    /// A new random P-256 key pair.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] when no randomness is available.
    pub(crate) fn generate() -> Result<DpopKey, Error> {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| Error::new(ErrorKind::Config, "no DPoP key pair could be generated"))?;
        DpopKey::from_stored(&SecretString::from(URL_SAFE_NO_PAD.encode(pkcs8.as_ref())))
            .ok_or_else(|| Error::new(ErrorKind::Config, "no DPoP key pair could be generated"))
    }

    /// The key pair of its stored form ([`DpopKey::stored`]); `None` when it is not one.
    pub(crate) fn from_stored(stored: &SecretString) -> Option<DpopKey> {
        let der = URL_SAFE_NO_PAD.decode(stored.expose_secret()).ok()?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der).ok()?;
        Some(DpopKey {
            pair,
            stored: stored.clone(),
        })
    }

    /// The stored form: the PKCS #8 document, base64url without padding.
    pub(crate) fn stored(&self) -> &SecretString {
        &self.stored
    }

    /// The first segment of every proof of this key: the base64url of its JOSE header, which
    /// holds nothing but the type, the algorithm and the public key. Learned by the redactor
    /// for the key's life, so an echoed proof loses its head.
    pub(crate) fn header_segment(&self) -> SecretString {
        SecretString::from(URL_SAFE_NO_PAD.encode(self.header().to_string()))
    }

    fn header(&self) -> serde_json::Value {
        serde_json::json!({"typ": "dpop+jwt", "alg": ALGORITHM, "jwk": self.jwk()})
    }

    /// The public key as a JWK (RFC 7518 §6.2: `kty` `EC`, `crv` `P-256`, `x`, `y`).
    fn jwk(&self) -> serde_json::Value {
        // An uncompressed point: 0x04, then x and y of 32 bytes each.
        let point = self.pair.public_key().as_ref();
        serde_json::json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        })
    }

    /// A fresh proof for a `method` request to `uri` (RFC 9449 §4.2), with `ath` of
    /// `access_token` (a resource request) and `nonce` when given.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] when no randomness is available or signing fails.
    pub(crate) fn proof(
        &self,
        method: &str,
        uri: &Url,
        access_token: Option<&SecretString>,
        nonce: Option<&str>,
    ) -> Result<SecretString, Error> {
        let failed = || Error::new(ErrorKind::Config, "a DPoP proof could not be made");
        let mut jti = [0u8; 16];
        aws_lc_rs::rand::fill(&mut jti).map_err(|_| failed())?;
        let header = self.header();
        let mut claims = serde_json::json!({
            "jti": URL_SAFE_NO_PAD.encode(jti),
            "htm": method,
            "htu": htu(uri),
            "iat": now_secs(),
        });
        if let Some(token) = access_token {
            let digest = aws_lc_rs::digest::digest(
                &aws_lc_rs::digest::SHA256,
                token.expose_secret().as_bytes(),
            );
            claims["ath"] = URL_SAFE_NO_PAD.encode(digest.as_ref()).into();
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = nonce.into();
        }
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .pair
            .sign(
                &aws_lc_rs::rand::SystemRandom::new(),
                signing_input.as_bytes(),
            )
            .map_err(|_| failed())?;
        Ok(SecretString::from(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        )))
    }
}

/// The newest nonce one server gave (RFC 9449 §8, §9), shared by every request to it; empty
/// until the server sends one. Clones share the value.
#[derive(Clone, Default)]
pub(crate) struct Nonce(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl std::fmt::Debug for Nonce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Nonce")
    }
}

impl Nonce {
    /// The nonce to put in the next proof.
    pub(crate) fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Takes the `DPoP-Nonce` of an answer, when it has a valid one ([`nonce_of`]); returns
    /// whether it did.
    pub(crate) fn learn(&self, headers: &reqwest::header::HeaderMap) -> bool {
        let Some(nonce) = nonce_of(headers) else {
            return false;
        };
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(nonce);
        true
    }
}

/// The `DPoP-Nonce` of an answer: one value of 1 to [`MAX_NONCE_BYTES`] `NQCHAR`s (RFC 9449
/// §8.1: visible ASCII but `"` and `\`); anything else is no nonce.
pub(crate) fn nonce_of(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let mut values = headers.get_all(DPOP_NONCE).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let bytes = value.as_bytes();
    let nqchar = |b: &u8| matches!(b, 0x21 | 0x23..=0x5b | 0x5d..=0x7e);
    (!bytes.is_empty() && bytes.len() <= MAX_NONCE_BYTES && bytes.iter().all(nqchar))
        .then(|| String::from_utf8_lossy(bytes).into_owned())
}

/// The `htu` of a request to `uri`: the URI without its query and fragment (RFC 9449 §4.2).
pub(crate) fn htu(uri: &Url) -> String {
    let mut uri = uri.clone();
    uri.set_query(None);
    uri.set_fragment(None);
    uri.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    fn part(jwt: &str, index: usize) -> serde_json::Value {
        let text = URL_SAFE_NO_PAD
            .decode(jwt.split('.').nth(index).unwrap())
            .unwrap();
        serde_json::from_slice(&text).unwrap()
    }

    #[test]
    fn a_proof_is_a_signed_dpop_jwt_with_the_request_claims() {
        let key = DpopKey::generate().unwrap();
        let uri = Url::parse("http://127.0.0.1:8080/mcp?x=1#frag").unwrap();
        let token = SecretString::from("access-token-value-1");
        let proof = key.proof("POST", &uri, Some(&token), Some("n-1")).unwrap();
        let proof = proof.expose_secret();
        let header = part(proof, 0);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["jwk"]["kty"], "EC");
        assert_eq!(header["jwk"]["crv"], "P-256");
        assert_eq!(header["jwk"].get("d"), None);
        assert_eq!(header["jwk"].as_object().unwrap().len(), 4);
        let claims = part(proof, 1);
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "http://127.0.0.1:8080/mcp");
        assert_eq!(claims["nonce"], "n-1");
        // base64url(SHA-256("access-token-value-1")).
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, b"access-token-value-1");
        assert_eq!(claims["ath"], URL_SAFE_NO_PAD.encode(digest.as_ref()));
        assert!(claims["iat"].as_u64().unwrap().abs_diff(now_secs()) <= 1);
        assert_eq!(
            URL_SAFE_NO_PAD
                .decode(claims["jti"].as_str().unwrap())
                .unwrap()
                .len(),
            16
        );
        // The signature verifies with the public key of the header's JWK.
        let mut point = vec![4u8];
        for c in ["x", "y"] {
            point.extend(
                URL_SAFE_NO_PAD
                    .decode(header["jwk"][c].as_str().unwrap())
                    .unwrap(),
            );
        }
        let (input, signature) = proof.rsplit_once('.').unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(
                input.as_bytes(),
                &URL_SAFE_NO_PAD.decode(signature).unwrap(),
            )
            .unwrap();
        // A token request's proof has no `ath` and, without a nonce, no `nonce`.
        let plain = key.proof("POST", &uri, None, None).unwrap();
        let claims2 = part(plain.expose_secret(), 1);
        assert_eq!(claims2.get("ath"), None);
        assert_eq!(claims2.get("nonce"), None);
        assert_ne!(claims2["jti"], claims["jti"], "a fresh jti per proof");
    }

    #[test]
    fn every_proof_starts_with_the_header_segment() {
        let key = DpopKey::generate().unwrap();
        let uri = Url::parse("http://127.0.0.1:1/token").unwrap();
        let head = key.header_segment();
        for _ in 0..3 {
            let proof = key.proof("POST", &uri, None, None).unwrap();
            let first = proof.expose_secret().split('.').next().unwrap().to_string();
            assert_eq!(first, head.expose_secret());
        }
        let other = DpopKey::generate().unwrap();
        assert_ne!(other.header_segment().expose_secret(), head.expose_secret());
    }

    #[test]
    fn a_nonce_is_one_value_of_nqchars_within_the_bound() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let of = |values: &[&[u8]]| {
            let mut headers = HeaderMap::new();
            for v in values {
                headers.append(DPOP_NONCE, HeaderValue::from_bytes(v).unwrap());
            }
            nonce_of(&headers)
        };
        assert_eq!(
            of(&[b"eyJ7S_zG.eyJH0-Z.HX4w-7v"]).as_deref(),
            Some("eyJ7S_zG.eyJH0-Z.HX4w-7v")
        );
        assert_eq!(of(&[b"a!#[]~"]).as_deref(), Some("a!#[]~"));
        assert_eq!(of(&[]), None);
        assert_eq!(of(&[b"a", b"b"]), None, "two values: none is taken");
        assert_eq!(of(&[b"has space"]), None);
        assert_eq!(of(&[b"quote\"x"]), None);
        assert_eq!(of(&[b"back\\slash"]), None);
        assert_eq!(of(&[&[0xc3, 0xa9]]), None);
        assert_eq!(
            of(&[&[b'n'; MAX_NONCE_BYTES]]).map(|n| n.len()),
            Some(MAX_NONCE_BYTES)
        );
        assert_eq!(of(&[&[b'n'; MAX_NONCE_BYTES + 1]]), None);
        let nonce = Nonce::default();
        assert_eq!(nonce.get(), None);
        let mut headers = HeaderMap::new();
        assert!(!nonce.learn(&headers));
        headers.insert(DPOP_NONCE, HeaderValue::from_static("n-1"));
        assert!(nonce.learn(&headers));
        let shared = nonce.clone();
        headers.insert(DPOP_NONCE, HeaderValue::from_static("n-2"));
        assert!(shared.learn(&headers));
        assert_eq!(nonce.get().as_deref(), Some("n-2"));
    }

    #[test]
    fn the_key_survives_its_stored_form_and_debug_shows_none() {
        let key = DpopKey::generate().unwrap();
        let again = DpopKey::from_stored(key.stored()).unwrap();
        assert_eq!(again.jwk(), key.jwk());
        assert_eq!(format!("{key:?}"), "DpopKey([redacted])");
        assert!(DpopKey::from_stored(&SecretString::from("not-a-key")).is_none());
    }

    /// An echoed proof with every non-alphanumeric byte percent-encoded (a form the
    /// redactor registers for every secret): its head is learned, yet the claims and signature
    /// must not survive the scrub.
    #[test]
    fn a_fully_percent_encoded_proof_is_scrubbed_whole() {
        let key = DpopKey::generate().unwrap();
        let redactor = crate::redact::Redactor::default();
        let learn = redactor.learner();
        learn(&key.header_segment(), crate::redact::Learned::JwtHead);
        let uri = Url::parse("http://127.0.0.1:1/mcp").unwrap();
        let token = SecretString::from("access-token-value-1");
        let proof = key.proof("POST", &uri, Some(&token), None).unwrap();
        let proof = proof.expose_secret();
        // Plain, it goes whole.
        assert_eq!(redactor.scrub(&format!("got {proof}!")), "got [redacted]!");
        let encoded =
            percent_encoding::utf8_percent_encode(proof, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        let shown = redactor.scrub(&format!("got {encoded}!")).into_owned();
        let decoded = percent_encoding::percent_decode_str(&shown)
            .decode_utf8_lossy()
            .into_owned();
        let claims = proof.split('.').nth(1).unwrap();
        let signature = proof.rsplit('.').next().unwrap();
        assert!(
            !decoded.contains(claims) && !decoded.contains(&signature[..20]),
            "the proof's claims and signature survive: {shown}"
        );
    }
}
