//! Lone UTF-16 surrogates. JavaScript strings may hold half of a surrogate pair (a cut emoji, a
//! hostile tool result); `JSON.stringify` writes it as a `\uD800`-style escape, which is not
//! Unicode and which serde_json rightly refuses. So that one such character never fails a whole
//! call (or every call, when it sits in a live agent's header), JSON text is repaired first: each
//! lone surrogate escape becomes [`LONE`] (a noncharacter, never in real text). The caller then
//! refuses an argument that holds it (readable `bad-argument`) and shows it as U+FFFD elsewhere.

/// What a lone surrogate escape becomes: U+FDD0, a noncharacter.
pub const LONE: char = '\u{FDD0}';
const LONE_ESC: &str = "\\uFDD0";

fn hex4(b: &[u8]) -> Option<u16> {
    let s = std::str::from_utf8(b.get(..4)?).ok()?;
    u16::from_str_radix(s, 16).ok()
}

/// Replace every lone surrogate escape (`\uD800`–`\uDFFF` not forming a pair) in JSON text with
/// `replacement` (an escape such as `\uFDD0` or `\uFFFD`). `None` when there is none.
pub fn repair_json_with(json: &str, replacement: &str) -> Option<String> {
    let b = json.as_bytes();
    memchr::memmem::find(b, b"\\u")?;
    let mut out = String::new();
    let mut last = 0;
    let mut i = 0;
    let mut changed = false;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b.get(i + 1) != Some(&b'u') {
            i += 2; // another escape (including `\\`)
            continue;
        }
        let Some(u) = hex4(&b[i + 2..]) else {
            i += 2;
            continue;
        };
        let is_high = (0xD800..0xDC00).contains(&u);
        let is_low = (0xDC00..0xE000).contains(&u);
        if is_high {
            let paired = b.get(i + 6) == Some(&b'\\')
                && b.get(i + 7) == Some(&b'u')
                && hex4(&b[(i + 8).min(b.len())..]).is_some_and(|l| (0xDC00..0xE000).contains(&l));
            if paired {
                i += 12;
                continue;
            }
        }
        if is_high || is_low {
            out.push_str(&json[last..i]);
            out.push_str(replacement);
            i += 6;
            last = i;
            changed = true;
            continue;
        }
        i += 6;
    }
    if !changed {
        return None;
    }
    out.push_str(&json[last..]);
    Some(out)
}

/// [`repair_json_with`] using [`LONE`].
pub fn repair_json(json: &str) -> Option<String> {
    repair_json_with(json, LONE_ESC)
}

/// Parse a JSON value, repairing lone surrogates to U+FFFD when plain parsing fails on them
/// (log lines: the message is shown with a replacement character, not lost).
pub fn parse_lossy(bytes: &[u8]) -> Option<serde_json::Value> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Some(v),
        Err(_) => {
            let s = std::str::from_utf8(bytes).ok()?;
            let fixed = repair_json_with(s, "\\uFFFD")?;
            serde_json::from_str(&fixed).ok()
        }
    }
}

/// The first string (as a path like `message` or `args.x[2]`) holding [`LONE`], if any.
pub fn find_lone(v: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    match v {
        Value::String(s) if s.contains(LONE) => Some(path.to_string()),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| find_lone(x, &format!("{path}[{i}]"))),
        Value::Object(o) => o.iter().find_map(|(k, x)| {
            let k = if k.contains(LONE) {
                "(a key)"
            } else {
                k.as_str()
            };
            let p = if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}.{k}")
            };
            find_lone(x, &p)
        }),
        _ => None,
    }
}

/// Show [`LONE`] as U+FFFD in every string of `v`.
pub fn replace_lone(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) if s.contains(LONE) => *s = s.replace(LONE, "\u{FFFD}"),
        Value::Array(a) => a.iter_mut().for_each(replace_lone),
        Value::Object(o) => o.values_mut().for_each(replace_lone),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_are_repaired_pairs_and_escaped_backslashes_are_not() {
        assert_eq!(repair_json(r#"{"a":"x"}"#), None);
        assert_eq!(repair_json(r#"{"a":"\ud83d\ude00"}"#), None, "a pair");
        assert_eq!(
            repair_json(r#"{"a":"\\ud800"}"#),
            None,
            "an escaped backslash"
        );
        assert_eq!(
            repair_json(r#"{"a":"x\ud800y"}"#).unwrap(),
            r#"{"a":"x\uFDD0y"}"#
        );
        assert_eq!(
            repair_json(r#"{"a":"\udc00\ud83d"}"#).unwrap(),
            r#"{"a":"\uFDD0\uFDD0"}"#
        );
        let v: serde_json::Value =
            serde_json::from_str(&repair_json(r#"{"m":"hi\ud800"}"#).unwrap()).unwrap();
        assert_eq!(find_lone(&v, "").as_deref(), Some("m"));
        let got = parse_lossy(br#"{"t":"a\udfffb"}"#).unwrap();
        assert_eq!(got["t"], "a\u{FFFD}b");
    }
}
