//! The one text of a request's fate (the CLI's `verify`, the doctor's delivery check).

use std::path::Path;

use crate::fate::{Fate, Verification};

/// `landed in <session> at seq N (turn T)`, `queued in …`, `canceled: …` or `unknown: …`.
pub fn describe(v: &Verification, request_id: &str, home: &Path) -> String {
    let session = v.session_id.as_deref().unwrap_or("(no session)");
    if v.fate == Fate::Unknown {
        // Handed to the mailbox of a session live in a process without a web server, not drained yet.
        if let Some(s) = crate::mailbox::find_waiting(home, request_id, v.session_id.as_deref()) {
            return format!(
                "waiting: {request_id} is in the mailbox of {s}, not delivered yet; the process holding {s} delivers it on its next drain (or, if that process ended, the next one to hold it)"
            );
        }
    }
    match &v.fate {
        Fate::Landed { seq, turn } => format!(
            "landed in {session} at seq {seq}{}",
            turn.map_or(String::new(), |t| format!(" (turn {t})"))
        ),
        Fate::Queued { seq, target } => format!(
            "queued in {session} at seq {seq} (inbox {target}); not landed yet: it lands when that session's {}",
            if target == "next-step" { "next step starts" } else { "current turn ends" }
        ),
        Fate::Canceled { seq, target } => format!(
            "canceled: inserted into {session}'s inbox ({target}) at seq {seq}, then removed before it landed"
        ),
        Fate::Unknown if v.session_missing => format!(
            "unknown: session {session} is not in {}/sessions (or its log cannot be read)",
            home.display()
        ),
        Fate::Unknown if v.session_id.is_some() => {
            format!("unknown: {request_id} is not in the log of {session}")
        }
        Fate::Unknown => format!(
            "unknown: {request_id} is in none of the {} session logs under {}/sessions",
            v.searched,
            home.display()
        ),
    }
}
