//! Scrub cookie- and secret-shaped text out of anything a host (or whatever answers on its port)
//! said, before we quote it in a tool result, on the CLI's stdout or in its `--json`.
//!
//! Whatever answers on the port may echo our request back (an error page that prints the
//! `Cookie` header, a proxy's 418, a rejected `error.message`). Redacted, each replaced by
//! `[redacted]`:
//! - a `dsh-auth-…` cookie (name and value) wherever it appears;
//! - the value after a `cookie`/`set-cookie`/`authorization`/`secret` key (`: `, `=`, or a JSON key);
//! - a `v1.<payload>.<signature>` token (the cookie value's shape);
//! - any run of base64url of 24 or more characters mixing upper case, lower case and digits (a
//!   secret, a signature, a payload): session ids, request ids, UUIDs and hex digests do not mix
//!   cases, so they pass.

const REDACTED: &str = "[redacted]";

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '=' | '+' | '/' | '%')
}

fn secret_like_part(p: &str) -> bool {
    let b64 = p
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '/'))
        .count();
    b64 >= 24
        && p.chars().any(|c| c.is_ascii_uppercase())
        && p.chars().any(|c| c.is_ascii_lowercase())
        && p.chars().any(|c| c.is_ascii_digit())
}

fn token_is_secret(t: &str) -> bool {
    let lower = t.to_ascii_lowercase();
    if lower.contains("dsh-auth-") {
        return true;
    }
    let parts: Vec<&str> = t.split(['.', '=', '%']).collect();
    if parts.iter().any(|p| secret_like_part(p)) {
        return true;
    }
    // v1.<payload>.<sig>
    if let Some(i) = lower.find("v1.") {
        let rest: Vec<&str> = t[i + 3..].split('.').collect();
        if rest.len() >= 2 && rest[0].len() >= 8 && rest[1].len() >= 8 {
            return true;
        }
    }
    false
}

/// Keys whose value is a secret whatever it looks like.
const KEYS: [&str; 4] = ["cookie", "authorization", "secret", "x-dsh-auth"];

/// Scrub `text` (see the module comment). Text without anything secret-shaped is returned as is.
pub fn scrub(text: &str) -> String {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut redact_next = false;
    while i < chars.len() {
        let (start, c) = chars[i];
        if !is_token_char(c) {
            out.push(c);
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len() && is_token_char(chars[j].1) {
            j += 1;
        }
        let end = chars.get(j).map_or(text.len(), |(b, _)| *b);
        let tok = &text[start..end];
        let lower = tok.to_ascii_lowercase();
        let key = KEYS.iter().any(|k| {
            lower == *k || lower.ends_with(&format!("-{k}")) || lower == format!("set-{k}")
        });
        if redact_next && !key {
            out.push_str(REDACTED);
            redact_next = false;
        } else if token_is_secret(tok) {
            out.push_str(REDACTED);
        } else {
            out.push_str(tok);
        }
        if key {
            // Redact the value that follows `key:` / `key=` / `"key":"`.
            let mut k = j;
            while k < chars.len() && matches!(chars[k].1, '"' | '\'' | ' ' | '\t') {
                k += 1;
            }
            if k < chars.len() && matches!(chars[k].1, ':' | '=') {
                redact_next = true;
            }
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOKIE: &str = "dsh-auth-Qk9fR2xH3mZ1b2V0X3NvbWV0aGluZw=v1.eyJhdXRoIjoiMTI3LjAuMC4xOjMwODAiLCJpYXQiOjE3NjE3NDEyOTZ9.Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA";

    #[test]
    fn cookies_and_secrets_are_redacted_wherever_they_are_echoed() {
        let cases = [
            format!("Cookie: {COOKIE}"),
            format!("{{\"headers\":{{\"cookie\":\"{COOKIE}\"}}}}"),
            format!("bad request; got {COOKIE}; sorry"),
            format!("cookie={COOKIE}"),
            "secret: BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc".into(),
            "token v1.eyJhYmMiOjF9.c2lnbmF0dXJl here".into(),
            "Cookie: plainvalue".into(),
        ];
        for c in &cases {
            let s = scrub(c);
            assert!(!s.contains("v1.eyJ"), "{c} -> {s}");
            assert!(!s.contains("BwcHBwcH"), "{c} -> {s}");
            assert!(!s.contains("Qk9fR2xH"), "{c} -> {s}");
            assert!(!s.contains("plainvalue"), "{c} -> {s}");
            assert!(s.contains(REDACTED), "{c} -> {s}");
        }
    }

    #[test]
    fn ordinary_host_text_passes_unchanged() {
        for t in [
            "session-e218a09e-1b2c-4d5e-8f90-0123456789ab is not running",
            "dsh-session-mail:0b6c1f2e-3d4a-4b5c-8d9e-0f1a2b3c4d5e",
            "HTTP 500: Internal Server Error",
            "sha256=3f1a9c0d2b7e4f6a8c1d3e5f7a9b0c2d4e6f8a1b3c5d7e9f0a2b4c6d8e0f1a2b",
            "SESSION_NOT_FOUND: no session session-abc",
            "ECONNREFUSED 127.0.0.1:3080",
            "the cookie was accepted",
        ] {
            assert_eq!(scrub(t), t);
        }
    }
}
