//! The host's session-title fallback: the first human prompt, cleaned of terminal escapes and
//! invisible characters, cut to a few words and bytes [R8 `packages/session/session-title/src/normalize.ts`].

use crate::events::MessageLite;

/// The host's fallback title from one surface `user/message`: only a human prompt (source kind
/// `user`) counts, and only when its text gives a non-empty title.
pub fn prompt_fallback_title(m: &MessageLite<'_>) -> Option<String> {
    if m.source.kind.as_deref() != Some("user") {
        return None;
    }
    let text: Vec<&str> = m
        .content
        .iter()
        .filter(|b| b.ty.as_deref() == Some("text"))
        .filter_map(|b| b.text.as_deref())
        .collect();
    let t = fallback_session_title(&text.join("\n"), 5, 40);
    (!t.is_empty()).then_some(t)
}

fn strip_osc(s: &str) -> String {
    // /(?:\u001B\]|\u009D)(?:(?!\u0007|\u001B\\)[\s\S])*(?:\u0007|\u001B\\|$)/gu
    let cs: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < cs.len() {
        let intro = if cs[i] == '\u{1B}' && cs.get(i + 1) == Some(&']') {
            2
        } else if cs[i] == '\u{9D}' {
            1
        } else {
            0
        };
        if intro == 0 {
            out.push(cs[i]);
            i += 1;
            continue;
        }
        i += intro;
        while i < cs.len() {
            if cs[i] == '\u{07}' {
                i += 1;
                break;
            }
            if cs[i] == '\u{1B}' && cs.get(i + 1) == Some(&'\\') {
                i += 2;
                break;
            }
            i += 1;
        }
    }
    out
}

fn strip_csi(s: &str) -> String {
    // /(?:\u001B\[|\u009B)[0-?]*[ -/]*[@-~]/gu
    let cs: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < cs.len() {
        let intro = if cs[i] == '\u{1B}' && cs.get(i + 1) == Some(&'[') {
            2
        } else if cs[i] == '\u{9B}' {
            1
        } else {
            0
        };
        if intro > 0 {
            let mut j = i + intro;
            while j < cs.len() && ('0'..='?').contains(&cs[j]) {
                j += 1;
            }
            while j < cs.len() && (' '..='/').contains(&cs[j]) {
                j += 1;
            }
            if j < cs.len() && ('@'..='~').contains(&cs[j]) {
                i = j + 1;
                continue;
            }
        }
        out.push(cs[i]);
        i += 1;
    }
    out
}

fn clean_title_text(input: &str) -> String {
    let s = strip_csi(&strip_osc(input));
    // /\u001B[@-_]/gu
    let cs: Vec<char> = s.chars().collect();
    let mut t = String::with_capacity(s.len());
    let mut i = 0;
    while i < cs.len() {
        if cs[i] == '\u{1B}' && cs.get(i + 1).is_some_and(|c| ('@'..='_').contains(c)) {
            i += 2;
            continue;
        }
        t.push(cs[i]);
        i += 1;
    }
    let t: String = t
        .chars()
        .filter(|&c| {
            let u = c as u32;
            let control = matches!(u, 0x00..=0x08 | 0x0B | 0x0C | 0x0E..=0x1F | 0x7F..=0x9F);
            let directional = matches!(u, 0x200B | 0x200E | 0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF);
            !control && !directional
        })
        .collect();
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Longest leading code-point prefix within `max_bytes` UTF-8 bytes [R8 `normalize.ts` `truncateTitleUtf8`].
pub fn truncate_utf8(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = 0;
    for (i, c) in s.char_indices() {
        if i + c.len_utf8() > max_bytes {
            break;
        }
        end = i + c.len_utf8();
    }
    &s[..end]
}

/// The host's first-prompt fallback title: the first `max_words` words, cut to `max_bytes`
/// [R8 `normalize.ts` `fallbackSessionTitle`; base config 5 words / 40 bytes: R8 `packages/bundle/base/cordis.patch.yml` `session-title`].
pub fn fallback_session_title(input: &str, max_words: usize, max_bytes: usize) -> String {
    let clean = clean_title_text(input);
    let words: Vec<&str> = clean
        .split(' ')
        .filter(|w| !w.is_empty())
        .take(max_words)
        .collect();
    truncate_utf8(&words.join(" "), max_bytes)
        .trim_end()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_title_follows_the_host_rule() {
        assert_eq!(
            fallback_session_title("  please   greet the world with hello_tool", 5, 40),
            "please greet the world with"
        );
        // 40-byte cut, never splitting a code point, then trimEnd.
        assert_eq!(
            fallback_session_title("abcdefghij abcdefghij abcdefghij abcdefghij", 5, 40),
            "abcdefghij abcdefghij abcdefghij abcdefg"
        );
        assert_eq!(
            fallback_session_title("ééééééééééééééééééééé", 5, 41),
            "éééééééééééééééééééé"
        );
        // Escape sequences and controls vanish.
        assert_eq!(
            fallback_session_title(
                "\u{1b}[31mred\u{1b}[0m \u{1b}]0;title\u{7}text\u{200b}",
                5,
                40
            ),
            "red text"
        );
        assert_eq!(fallback_session_title(" \n\t ", 5, 40), "");
    }
}
