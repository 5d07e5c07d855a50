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
    use crate::mailbox::held::{HeldState, RemovedWhy};
    let redelivered = match &v.held {
        Some(HeldState::Held { redeliveries, .. } | HeldState::Lost { redeliveries, .. }) => {
            *redeliveries
        }
        _ => 0,
    };
    let again = v.trace.as_ref().is_some_and(|t| t.insertions > 1) || redelivered > 0;
    if !matches!(v.fate, Fate::Landed { .. }) {
        match &v.held {
            Some(HeldState::Removed(r)) => {
                return match r.why {
                    RemovedWhy::Human => format!(
                        "removed from the queue by the human: {request_id} was deleted from {session}'s inbox at seq {} (a single-row delete, as the queue dock does); a human's decision is final, so it is not delivered again",
                        r.seq
                    ),
                    RemovedWhy::Unattributed => format!(
                        "removed: {request_id} was canceled with the whole inbox of {session} at seq {}, and its holder (pid {}) did not hand it back at a stop first: the human's cancel, closing the session, or a stop this plugin did not see cannot be told apart there, so it is treated as removed by the human and not delivered again",
                        r.seq, r.holder_pid
                    ),
                };
            }
            Some(HeldState::Lost {
                pid, handed_back, ..
            }) => {
                let how = if *handed_back {
                    "stopped and handed it back before its host canceled it"
                } else {
                    "is gone (it stopped or crashed)"
                };
                let seen = match &v.fate {
                    Fate::Queued { seq, .. } | Fate::Canceled { seq, .. } => {
                        format!("inserted into its inbox at seq {seq}, not landed")
                    }
                    _ => "not in its log".into(),
                };
                return format!(
                    "lost with its process, re-delivery pending: {request_id} was waiting in the memory of DSH process pid {pid}, which {how} ({session}: {seen}); it is delivered once, with the same request id, when {session} is live again in a process with dsh-session-mail (or woken by one where allowResume permits)"
                );
            }
            _ => {}
        }
    }
    match &v.fate {
        Fate::Landed { seq, turn } => format!(
            "landed in {session} at seq {seq}{}{}",
            turn.map_or(String::new(), |t| format!(" (turn {t})")),
            if again {
                " (re-delivered after the process that first held it stopped)"
            } else {
                ""
            }
        ),
        Fate::Queued { seq, target } if matches!(v.held, Some(HeldState::Held { .. })) => {
            let pid = match &v.held {
                Some(HeldState::Held { pid, .. }) => *pid,
                _ => 0,
            };
            format!(
                "queued in {session} at seq {seq} (inbox {target}), held in the memory of DSH process pid {pid}; not landed yet: it lands when that session's {}",
                if target == "next-step" { "next step starts" } else { "current turn ends" }
            )
        }
        Fate::Queued { seq, target } => format!(
            "queued in {session} at seq {seq} (inbox {target}); not landed yet: it lands when that session's {}",
            if target == "next-step" { "next step starts" } else { "current turn ends" }
        ),
        Fate::Canceled { seq, target }
            if v.trace.as_ref().and_then(|t| t.cancel).is_some_and(|c| !c.whole) =>
        {
            format!(
                "removed from the queue by the human: inserted into {session}'s inbox ({target}) at seq {seq}, then deleted from it alone (a single-row delete, as the queue dock does) before it landed; a human's decision is final, so it is not delivered again"
            )
        }
        Fate::Canceled { seq, target } => format!(
            "canceled: inserted into {session}'s inbox ({target}) at seq {seq}, then removed with its whole inbox before it landed"
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
    let (seq, turn, target) = match &v.fate {
        Fate::Landed { seq, turn } => (Some(*seq), *turn, None),
        Fate::Queued { seq, target } | Fate::Canceled { seq, target } => {
            (Some(*seq), None, Some(target.clone()))
        }
        Fate::Unknown => (None, None, None),
    };
    let state: FateState = crate::fate::state_of(v);
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
