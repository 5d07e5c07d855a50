//! Scrub cookie- and secret-shaped text out of anything a host (or whatever answers on its port)
//! said, before we quote it in a tool result, on the CLI's stdout or in its `--json`.
//!
//! Whatever answers on the port may echo our request back (an error page that prints the
//! `Cookie` header, a proxy's 418, a rejected `error.message`). Redacted, each replaced by
//! `[redacted]`:
//! - a `dsh-auth-…` cookie (name and value) wherever it appears;
//! - the value after a `cookie`/`authorization`/`secret`/`x-dsh-auth` key, or any `…-<key>` such as
//!   `set-cookie` or `client-secret` (`: `, `=`, or a JSON key), case-insensitively;
//! - a `v1.<payload>.<signature>` token (the cookie value's shape);
//! - any run of base64url of 24 or more characters mixing upper case, lower case and digits (a
//!   secret, a signature, a payload): session ids, request ids, UUIDs and hex digests do not mix
//!   cases, so they pass.

const REDACTED: &str = "[redacted]";

/// The token characters (all ASCII: a token is a byte range on char boundaries, and every
/// non-ASCII char is copied through as it is).
const fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'=' | b'+' | b'/' | b'%')
}

const TOKEN: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = is_token_byte(b as u8);
        b += 1;
    }
    t
};

/// A part of a token (split on `.`, `=`, `%`) that looks like a secret: 24 or more base64url
/// characters mixing upper case, lower case and digits.
fn secret_like_part(p: &[u8]) -> bool {
    let (mut b64, mut upper, mut lower, mut digit) = (0usize, false, false, false);
    for &c in p {
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'+' | b'/') {
            b64 += 1;
        }
        upper |= c.is_ascii_uppercase();
        lower |= c.is_ascii_lowercase();
        digit |= c.is_ascii_digit();
    }
    b64 >= 24 && upper && lower && digit
}

fn contains_ignore_ascii_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len()
        && hay
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

fn token_is_secret(t: &[u8]) -> bool {
    // Each rule needs at least 9 bytes (`dsh-auth-`; a secret part needs 24, a `v1.` token 20).
    if t.len() < 9 {
        return false;
    }
    if contains_ignore_ascii_case(t, b"dsh-auth-") {
        return true;
    }
    if t.split(|&c| matches!(c, b'.' | b'=' | b'%'))
        .any(secret_like_part)
    {
        return true;
    }
    // v1.<payload>.<sig>: after the first `v1.`, two `.`-separated pieces of 8 or more.
    if let Some(i) = t.windows(3).position(|w| w.eq_ignore_ascii_case(b"v1.")) {
        let mut rest = t[i + 3..].split(|&c| c == b'.');
        if let (Some(payload), Some(sig)) = (rest.next(), rest.next()) {
            if payload.len() >= 8 && sig.len() >= 8 {
                return true;
            }
        }
    }
    false
}

/// Keys whose value is a secret whatever it looks like.
const KEYS: [&[u8]; 4] = [b"cookie", b"authorization", b"secret", b"x-dsh-auth"];

/// The token is a key: one of [`KEYS`] (any case), or ends with `-<key>` (which covers `set-<key>`).
fn is_key(t: &[u8]) -> bool {
    KEYS.iter().any(|k| {
        t.eq_ignore_ascii_case(k)
            || (t.len() > k.len()
                && t[t.len() - k.len() - 1] == b'-'
                && t[t.len() - k.len()..].eq_ignore_ascii_case(k))
    })
}

/// Scrub `text` (see the module comment). Text without anything secret-shaped is returned as is.
pub fn scrub(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    // `text[copied..]` is not in `out` yet: text is copied in runs, up to each redaction.
    let mut copied = 0;
    let mut i = 0;
    let mut redact_next = false;
    while i < b.len() {
        if !TOKEN[b[i] as usize] {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && TOKEN[b[i] as usize] {
            i += 1;
        }
        let tok = &b[start..i];
        let key = is_key(tok);
        let redact = if redact_next && !key {
            redact_next = false;
            true
        } else {
            token_is_secret(tok)
        };
        if redact {
            out.push_str(&text[copied..start]);
            out.push_str(REDACTED);
            copied = i;
        }
        if key {
            // Redact the value that follows `key:` / `key=` / `"key":"`.
            let mut k = i;
            while k < b.len() && matches!(b[k], b'"' | b'\'' | b' ' | b'\t') {
                k += 1;
            }
            if k < b.len() && matches!(b[k], b':' | b'=') {
                redact_next = true;
            }
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // ---- the previous implementation (the proptest below checks `scrub` against it) ----

    fn ref_is_token_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '=' | '+' | '/' | '%')
    }

    fn ref_secret_like_part(p: &str) -> bool {
        let b64 = p
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '/'))
            .count();
        b64 >= 24
            && p.chars().any(|c| c.is_ascii_uppercase())
            && p.chars().any(|c| c.is_ascii_lowercase())
            && p.chars().any(|c| c.is_ascii_digit())
    }

    fn ref_token_is_secret(t: &str) -> bool {
        let lower = t.to_ascii_lowercase();
        if lower.contains("dsh-auth-") {
            return true;
        }
        let parts: Vec<&str> = t.split(['.', '=', '%']).collect();
        if parts.iter().any(|p| ref_secret_like_part(p)) {
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
    const REF_KEYS: [&str; 4] = ["cookie", "authorization", "secret", "x-dsh-auth"];

    /// The implementation before the allocation-free rewrite, verbatim but for the names.
    fn scrub_reference(text: &str) -> String {
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        let mut redact_next = false;
        while i < chars.len() {
            let (start, c) = chars[i];
            if !ref_is_token_char(c) {
                out.push(c);
                i += 1;
                continue;
            }
            let mut j = i;
            while j < chars.len() && ref_is_token_char(chars[j].1) {
                j += 1;
            }
            let end = chars.get(j).map_or(text.len(), |(b, _)| *b);
            let tok = &text[start..end];
            let lower = tok.to_ascii_lowercase();
            let key = REF_KEYS.iter().any(|k| {
                lower == *k || lower.ends_with(&format!("-{k}")) || lower == format!("set-{k}")
            });
            if redact_next && !key {
                out.push_str(REDACTED);
                redact_next = false;
            } else if ref_token_is_secret(tok) {
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

    /// An accepted receipt as `render::send::accepted` writes it (with a route note, a budget and a
    /// `From … ：` reply line): nothing in it is secret-shaped, so it passes unchanged.
    const RECEIPT: &str = "accepted for session-4b91c2d3-5e6f-4a7b-8c9d-0e1f2a3b4c5d | mode=queue | chars=214 (woke a cold session)\n\
        The message is queued in that session's inbox. Its reply will not return through this call; if that agent answers, the answer arrives here as a message headed From session-4b91c2d3-5e6f-4a7b-8c9d-0e1f2a3b4c5d ：.\n\
        outcome: queued for the next turn: the session was not live, so the host resumed it and its next turn starts with this message.\n\
        budget: 5 of 6 left for this pair in the next 10 min; 19 of 20 left for all your sends.\n\
        note: routed: that session is live in another DSH process (pid 48213, profile default); that process's own host took the message, and this process did not resume it.\n\
        request: dsh-session-mail:0b6c1f2e-3d4a-4b5c-8d9e-0f1a2b3c4d5e";

    #[test]
    fn an_accepted_receipt_passes_unchanged() {
        assert_eq!(scrub(RECEIPT), RECEIPT);
    }

    #[test]
    fn a_cookie_in_a_json_key_and_in_a_header_line_is_redacted() {
        let t = format!(
            "HTTP 418\n{{\"headers\":{{\"Cookie\" : \"sid=abc123\",\"accept\":\"*/*\"}}}}\nCookie: {COOKIE}\nSet-Cookie: plainvalue; Path=/\nrequest: dsh-session-mail:0b6c1f2e-3d4a-4b5c-8d9e-0f1a2b3c4d5e"
        );
        assert_eq!(
            scrub(&t),
            "HTTP 418\n{\"headers\":{\"Cookie\" : \"[redacted]\",\"accept\":\"*/*\"}}\nCookie: [redacted]\nSet-Cookie: [redacted]; Path=/\nrequest: dsh-session-mail:0b6c1f2e-3d4a-4b5c-8d9e-0f1a2b3c4d5e"
        );
    }

    /// `cargo test -p dsh-session-mail-base --release -- --ignored --nocapture scrub`
    #[test]
    #[ignore = "timing, run by hand in release"]
    fn scrub_timing_against_the_previous_implementation() {
        use std::hint::black_box;
        use std::time::Instant;
        let text: String = RECEIPT.chars().take(500).collect();
        const N: u32 = 10_000;
        let time = |f: fn(&str) -> String| {
            let t = Instant::now();
            for _ in 0..N {
                black_box(f(black_box(&text)));
            }
            t.elapsed()
        };
        let (new, old) = (time(scrub), time(scrub_reference));
        println!(
            "scrub on {} bytes x {N}: {:?} ({:.2} µs/call); previous: {:?} ({:.2} µs/call)",
            text.len(),
            new,
            new.as_secs_f64() * 1e6 / f64::from(N),
            old,
            old.as_secs_f64() * 1e6 / f64::from(N),
        );
    }

    mod same_as_reference {
        use super::{scrub, scrub_reference};
        use proptest::prelude::*;

        /// A fragment of text: a key, a rule's marker, a separator, a run that is (or just is not)
        /// secret-shaped, a non-ASCII char, or anything at all.
        fn fragment() -> impl Strategy<Value = String> {
            prop_oneof![
                4 => prop::sample::select(vec![
                    "cookie", "Cookie", "COOKIE", "Set-Cookie", "set-cookie", "x-cookie", "-cookie",
                    "set-", "cookie-", "cooki", "x-dsh-auth", "X-DSH-AUTH", "dsh-auth", "authorization",
                    "AUTHORIZATION", "Authorization", "proxy-authorization", "secret", "Secret",
                    "client-secret", "secrets", "dsh-auth-", "DSH-AUTH-", "dsh-auth", "v1.", "V1.",
                    "v1", "1.", "session-", "dsh-session-mail:", ":", "=", "%", ".", "..", "-", "_",
                    "+", "/", "\"", "'", " ", "\t", "\n", ",", ";", "{", "}", "：", "é", "😀", "…",
                ])
                .prop_map(str::to_string),
                3 => "[A-Za-z0-9_-]{0,40}",
                1 => "[A-Za-z0-9+/_%=.-]{0,40}",
                1 => "[A-Z0-9]{20,30}",
                1 => "[a-z0-9]{20,30}",
                1 => "[0-9a-f]{0,64}",
                1 => "[A-Za-z0-9]{6,10}",
                1 => "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                1 => "[ \t\"':=]{0,4}",
                1 => any::<String>(),
            ]
        }

        fn text() -> impl Strategy<Value = String> {
            prop::collection::vec(fragment(), 0..24).prop_map(|v| v.concat())
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

            #[test]
            fn scrub_equals_the_previous_implementation(s in text()) {
                prop_assert_eq!(scrub(&s), scrub_reference(&s));
            }

            #[test]
            fn scrub_equals_the_previous_implementation_on_any_string(s in any::<String>()) {
                prop_assert_eq!(scrub(&s), scrub_reference(&s));
            }
        }

        #[test]
        fn scrub_equals_the_previous_implementation_at_the_edges() {
            for s in [
                "",
                "v1.",
                "V1.",
                "v1.abcdefgh",
                "v1.abcdefgh.",
                "v1.abcdefgh.abcdefg",
                "v1.abcdefgh.abcdefgh",
                "xv1.abcdefgh.abcdefgh",
                "v1.v1.abcdefgh.abcdefgh",
                "v1.abcdefg.v1.abcdefgh.abcdefgh",
                "dsh-auth",
                "dsh-auth-",
                "DsH-AuTh-x",
                "cookie",
                "cookie:",
                "cookie :",
                "cookie \"'\t =x",
                "cookie cookie: x y",
                "cookie: cookie x",
                "Set-Cookie=1",
                "set-cookie",
                "-cookie: x",
                "cookie\n: x",
                "cookie: é",
                "cookie：x",
                "aB3aaaaaaaaaaaaaaaaaaaaa",
                "aB3aaaaaaaaaaaaaaaaaaaa",
                "aB3aaaaaaaaaaa.aaaaaaaaaa",
                "aB3aaaaaaaaaaaaa+/aaaaaaaaa",
                "é😀：",
            ] {
                assert_eq!(scrub(s), scrub_reference(s), "{s:?}");
            }
        }
    }
}
