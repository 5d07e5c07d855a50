//! The text of the audit ledger for people (the CLI's `ledger` command).

use crate::ledger::LedgerRead;

/// The ledger for people (the CLI's `ledger` command): one line per attempt, oldest first.
///
/// ```text
/// 2026-10-29T12:34:56.789Z session-a → session-b send_session_message queue accepted chars=12 sha256=3f1a…c2 dsh-session-mail:…
/// ```
pub fn render(read: &LedgerRead) -> String {
    let mut s = String::new();
    for e in &read.entries {
        let sha = e
            .body_sha256
            .as_deref()
            .map(|h| {
                if h.len() > 12 {
                    format!("{}…", &h[..12])
                } else {
                    h.to_string()
                }
            })
            .unwrap_or_else(|| "-".into());
        s.push_str(&format!(
            "{} {} → {} {} {} {} chars={} sha256={} {}\n",
            e.time,
            e.sender.as_deref().unwrap_or("(no sender)"),
            e.target.as_deref().unwrap_or("(no target)"),
            e.tool,
            e.mode.as_deref().unwrap_or("-"),
            e.outcome.as_string(),
            e.body_chars.map_or_else(|| "-".into(), |c| c.to_string()),
            sha,
            e.request_id.as_deref().unwrap_or("-"),
        ));
    }
    s.push_str(&format!("{} attempt(s)", read.entries.len()));
    if read.unreadable > 0 {
        s.push_str(&format!("; {} unreadable line(s) skipped", read.unreadable));
    }
    if read.torn_tail {
        s.push_str("; a torn last line skipped");
    }
    s
}
