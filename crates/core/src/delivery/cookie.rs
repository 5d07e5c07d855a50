//! The v2 browser-session cookie, minted in-process from the host's own signing secret.
//!
//! Host facts [Z17 `packages/client/connection/src/browser-auth.ts`; same logic in 0.2 per session-contract §4.4]:
//! - name: `'dsh-auth-' + base64url(sha256(authority))` (`cookieName`), where the authority is
//!   `new URL('http://' + Host).host` (`requestAuthority`): lower-cased, default port `:80` dropped, IPv6 bracketed;
//! - value: `'v1.' + body + '.' + base64url(HMAC-SHA256(secret, body))` with
//!   `body = base64url(JSON.stringify({version: 1, authority, issuedAt, expiresAt}))` (`encodeCookie`):
//!   the HMAC covers the base64url body string, not the raw JSON;
//! - base64url is unpadded (`encodeBase64Url` strips `=`);
//! - accept rule (`isAuthenticated`): signature, `authority` equal to the request's, `issuedAt <= now`,
//!   `expiresAt > now`, `expiresAt > issuedAt`, `expiresAt - issuedAt <= cookieMaxAgeDays` (30 by default).
//!   There is no clock-skew allowance, so `issuedAt` is "now" on this machine's clock, never later.
//!
//! We mint a short-lived cookie per request ([`COOKIE_TTL_MS`]) and never store it.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::credentials::Secret;

/// Cookie name prefix [Z17 `browser-auth.ts` `COOKIE_PREFIX`].
pub const COOKIE_PREFIX: &str = "dsh-auth-";
/// Lifetime of a cookie we mint: five minutes (far below the host's 30-day cap).
pub const COOKIE_TTL_MS: i64 = 5 * 60 * 1000;

/// Unpadded base64url, as the host's `encodeBase64Url`.
pub fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The host's canonical request authority: `new URL('http://' + host).host`.
/// `None` when `host` is not a valid authority.
pub fn normalize_authority(host: &str) -> Option<String> {
    if host.is_empty()
        || host.contains(['/', '?', '#', '@', '\\'])
        || host.chars().any(char::is_whitespace)
    {
        return None;
    }
    let url = reqwest::Url::parse(&format!("http://{host}/")).ok()?;
    let h = url.host_str()?;
    Some(match url.port() {
        Some(p) => format!("{h}:{p}"),
        None => h.to_string(),
    })
}

/// `dsh-auth-<b64url(sha256(authority))>`.
pub fn cookie_name(authority: &str) -> String {
    format!(
        "{COOKIE_PREFIX}{}",
        b64url(Sha256::digest(authority.as_bytes()).as_slice())
    )
}

/// Payload in the host's key order (`{version, authority, issuedAt, expiresAt}`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Payload<'a> {
    version: u8,
    authority: &'a str,
    issued_at: i64,
    expires_at: i64,
}

/// HMAC-SHA256(key, data) ([`base::seal::mac`], the plugin's one HMAC).
pub fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    base::seal::mac(key, &[data])
}

/// `v1.<body>.<sig>` for the given times (ms since the epoch).
pub fn cookie_value(secret: &Secret, authority: &str, issued_at: i64, expires_at: i64) -> String {
    let json = serde_json::to_vec(&Payload {
        version: 1,
        authority,
        issued_at,
        expires_at,
    })
    .unwrap_or_default();
    let body = b64url(&json);
    let sig = hmac_sha256(secret.bytes(), body.as_bytes());
    format!("v1.{body}.{}", b64url(&sig))
}

/// A cookie header value `name=value` for `authority`, issued at `now_ms`, valid for [`COOKIE_TTL_MS`].
pub fn cookie_header(secret: &Secret, authority: &str, now_ms: i64) -> String {
    format!(
        "{}={}",
        cookie_name(authority),
        cookie_value(
            secret,
            authority,
            now_ms,
            now_ms.saturating_add(COOKIE_TTL_MS)
        )
    )
}

/// Milliseconds since the Unix epoch on this machine's clock (the host's clock too: same machine).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    use base::text::hex;

    #[test]
    fn hmac_rfc4231_vectors() {
        // RFC 4231 test case 1
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // test case 2
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // test case 6 (key longer than the block size)
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn sha256_and_b64url_known_values() {
        // SHA-256("abc") (FIPS 180-2)
        assert_eq!(
            hex(Sha256::digest(b"abc").as_slice()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // RFC 4648 §10 vectors, unpadded; and the url-safe alphabet
        assert_eq!(b64url(b"fo"), "Zm8");
        assert_eq!(b64url(b"foob"), "Zm9vYg");
        assert_eq!(b64url(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn authority_normalization_matches_whatwg_url_host() {
        assert_eq!(
            normalize_authority("127.0.0.1:3080").as_deref(),
            Some("127.0.0.1:3080")
        );
        assert_eq!(
            normalize_authority("LOCALHOST:3080").as_deref(),
            Some("localhost:3080")
        );
        assert_eq!(
            normalize_authority("localhost:80").as_deref(),
            Some("localhost")
        );
        assert_eq!(
            normalize_authority("127.0.0.1").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            normalize_authority("[::1]:8081").as_deref(),
            Some("[::1]:8081")
        );
        assert_eq!(
            normalize_authority("[0:0:0:0:0:0:0:1]:80").as_deref(),
            Some("[::1]")
        );
        assert_eq!(
            normalize_authority("127.0.0.1:03080").as_deref(),
            Some("127.0.0.1:3080")
        );
        assert_eq!(
            normalize_authority("127.1:3080").as_deref(),
            Some("127.0.0.1:3080")
        );
        assert_eq!(normalize_authority(""), None);
        assert_eq!(normalize_authority("a b"), None);
        assert_eq!(normalize_authority("host:99999"), None);
    }

    #[test]
    fn cookie_name_is_sha256_of_authority() {
        let name = cookie_name("127.0.0.1:3080");
        let expected = format!(
            "dsh-auth-{}",
            b64url(Sha256::digest(b"127.0.0.1:3080").as_slice())
        );
        assert_eq!(name, expected);
        assert_eq!(name.len(), "dsh-auth-".len() + 43);
    }

    #[test]
    fn fixed_secret_cookie_recomputed_from_primitives() {
        let secret = Secret::from_b64url(&b64url(&[7u8; 32])).unwrap();
        let value = cookie_value(
            &secret,
            "127.0.0.1:3080",
            1_700_000_000_000,
            1_700_000_300_000,
        );
        // the body is the exact JSON, in the host's key order
        let json = r#"{"version":1,"authority":"127.0.0.1:3080","issuedAt":1700000000000,"expiresAt":1700000300000}"#;
        let body = b64url(json.as_bytes());
        // recompute the signature with the hmac crate directly (independent of hmac_sha256)
        use hmac::{Hmac, KeyInit, Mac};
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&[7u8; 32]).unwrap();
        mac.update(body.as_bytes());
        let sig = b64url(mac.finalize().into_bytes().as_slice());
        assert_eq!(value, format!("v1.{body}.{sig}"));
        // the body decodes back to the JSON; no padding anywhere
        assert_eq!(URL_SAFE_NO_PAD.decode(&body).unwrap(), json.as_bytes());
        assert!(!value.contains('='));
        assert_eq!(value.split('.').count(), 3);
    }

    #[test]
    fn cookie_header_is_short_lived_and_not_in_the_future() {
        let secret = Secret::from_b64url(&b64url(&[9u8; 32])).unwrap();
        let before = now_ms();
        let header = cookie_header(&secret, "127.0.0.1:3080", now_ms());
        let after = now_ms();
        let (name, value) = header.split_once('=').unwrap();
        assert_eq!(name, cookie_name("127.0.0.1:3080"));
        let body = value.split('.').nth(1).unwrap();
        let payload: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).unwrap()).unwrap();
        let issued = payload["issuedAt"].as_i64().unwrap();
        let expires = payload["expiresAt"].as_i64().unwrap();
        assert!(issued >= before && issued <= after);
        assert_eq!(expires - issued, COOKIE_TTL_MS);
        assert_eq!(payload["version"], 1);
        assert_eq!(payload["authority"], "127.0.0.1:3080");
    }
}
