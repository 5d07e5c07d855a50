//! The one text of a request's fate (the CLI's `verify`, the doctor's delivery check): a printer
//! over `fate::Verification`; it reads nothing.

use std::path::Path;

use crate::fate::{Fate, FateState, RequestFate, Verification};

/// `landed in <session> at seq N (turn T)`, `queued in …`, `canceled: …` or `unknown: …`.
pub fn describe(v: &Verification, request_id: &str, home: &Path) -> String {
    let session = v.session_id.as_deref().unwrap_or("(no session)");
    // Kept for the human's decision by the target's inbound policy (crate::policy::held).
    if let (Fate::Unknown, Some((state, s))) = (&v.fate, &v.awaiting_human) {
        use crate::policy::held::HeldState;
        return match state {
            HeldState::Held => format!(
                "held: {request_id} is held for the human of {s}; it lands only if they approve it"
            ),
            HeldState::Approved => format!(
                "approved: the human of {s} approved {request_id}; it is handed to that session's mailbox and lands once the process holding it drains it"
            ),
            HeldState::Rejected => format!(
                "rejected: the human of {s} rejected {request_id}; it was not delivered and never will be"
            ),
        };
    }
    if let (Fate::Unknown, Some((s, why))) = (&v.fate, &v.mailbox_refused) {
        // The drain of the target's mailbox refused the envelope (crate::mailbox::admit).
        return format!(
            "refused: the process holding {s} refused {request_id} from its mailbox and did not deliver it: {why}"
        );
    }
    if let (Fate::Unknown, Some(s)) = (&v.fate, &v.waiting) {
        // Handed to the mailbox of a session live in a process without a web server, not drained yet.
        return format!(
            "waiting: {request_id} is in the mailbox of {s}, not delivered yet; the process holding {s} delivers it on its next drain (or, if that process ended, the next one to hold it)"
        );
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

/// A seq or turn as the binding's integer (a log's seqs are far below `i64::MAX`).
fn js_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// [`RequestFate`] of a verification.
pub fn request_fate(v: &Verification, request_id: &str, home: &Path) -> RequestFate {
    let (state, seq, turn, target) = match &v.fate {
        Fate::Landed { seq, turn } => (FateState::Landed, Some(*seq), *turn, None),
        Fate::Queued { seq, target } => (FateState::Queued, Some(*seq), None, Some(target.clone())),
        Fate::Canceled { seq, target } => {
            (FateState::Canceled, Some(*seq), None, Some(target.clone()))
        }
        Fate::Unknown => (FateState::Unknown, None, None, None),
    };
    RequestFate {
        request_id: request_id.to_string(),
        state,
        session_id: v.session_id.clone(),
        seq: seq.map(js_int),
        turn: turn.map(js_int),
        target,
        searched: u32::try_from(v.searched).unwrap_or(u32::MAX),
        session_missing: v.session_missing,
        text: describe(v, request_id, home),
    }
}
