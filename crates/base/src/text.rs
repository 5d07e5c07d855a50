//! Text helpers every layer phrases with: sizes, ids shown safely, short quotes.

/// Lowercase hex of `b`.
pub fn hex(b: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// `12 B`, `3.4 KiB`, `5.6 MiB`.
pub fn human_bytes(n: u64) -> String {
    if n >= 1024 * 1024 {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    } else if n >= 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// Most characters of an id echoed in a row, a read header or a note.
pub const MAX_ID_CHARS: usize = 200;

/// A caller-supplied string quoted as JSON for a refusal, cut to `max` characters (with `…`) so a huge
/// argument name or id never comes back whole.
pub fn quote_short(s: &str, max: usize) -> String {
    if s.chars().count() > max {
        let short: String = s.chars().take(max).collect();
        let q = serde_json::to_string(&short).unwrap_or_default();
        format!("{}…\"", &q[..q.len() - 1])
    } else {
        serde_json::to_string(s).unwrap_or_default()
    }
}

/// An id as a row or header shows it: as written when it only has id characters
/// (`[A-Za-z0-9._:~-]`), else as a JSON string (so spaces, brackets, `|` or quotes in a hostile
/// header id cannot forge row structure), cut to [`MAX_ID_CHARS`].
pub fn show_id(id: &str) -> String {
    let plain = !id.is_empty()
        && id.chars().count() <= MAX_ID_CHARS
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '~' | '-'));
    if plain {
        id.to_string()
    } else {
        quote_short(id, MAX_ID_CHARS)
    }
}
