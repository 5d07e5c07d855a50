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
            HeldState::Expired => format!(
                "expired: {request_id} was held for the human of {s} and nobody decided before its time ran out; it was rejected as expired, not delivered, and never will be"
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
    use crate::mailbox::queued::{QueuedState, RemovedWhy};
    let redelivered = match &v.in_memory {
        Some(QueuedState::Queued { redeliveries, .. } | QueuedState::Lost { redeliveries, .. }) => {
            *redeliveries
        }
        _ => 0,
    };
    let again = v.trace.as_ref().is_some_and(|t| t.insertions > 1) || redelivered > 0;
    if !matches!(v.fate, Fate::Landed { .. }) {
        match &v.in_memory {
            Some(QueuedState::Removed(r)) => {
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
            Some(QueuedState::Lost {
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
        Fate::Queued { seq, target } if matches!(v.in_memory, Some(QueuedState::Queued { .. })) => {
            let pid = match &v.in_memory {
                Some(QueuedState::Queued { pid, .. }) => *pid,
                _ => 0,
            };
            format!(
                "queued in {session} at seq {seq} (inbox {target}), waiting in the memory of DSH process pid {pid}; not landed yet: it lands when that session's {}",
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
        Fate::Unknown if matches!(v.in_memory, Some(QueuedState::Queued { .. })) => {
            let pid = match &v.in_memory {
                Some(QueuedState::Queued { pid, .. }) => *pid,
                _ => 0,
            };
            format!(
                "queued for {session}, waiting in the memory of DSH process pid {pid}; not in its log yet (the host writes it behind) and not landed yet"
            )
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mailbox::queued::{QueuedState, Removed, RemovedWhy};
    use store::{Cancel, RequestTrace};

    const RID: &str = "dsh-session-mail:11111111-2222-3333-4444-555555555555";

    fn v(fate: Fate, trace: Option<RequestTrace>, in_memory: Option<QueuedState>) -> Verification {
        Verification {
            fate,
            session_id: Some("session-b".into()),
            searched: 1,
            trace,
            in_memory,
            ..Verification::default()
        }
    }

    fn queued(seq: u64) -> Fate {
        Fate::Queued {
            seq,
            target: "next-turn".into(),
        }
    }

    /// `verify` for mail queued in a process's memory (issue 19 #4): the state and the exact text of
    /// queued (by which process), lost with its process (re-delivery pending), removed by the human,
    /// re-delivered and landed.
    #[test]
    fn verify_says_where_queued_mail_is_and_what_became_of_it() {
        let home = Path::new("/home");
        let pin = |v: &Verification, state: FateState, want: &str| {
            let f = request_fate(v, RID, home);
            assert_eq!((f.state, f.text.as_str()), (state, want));
        };
        let q = v(
            queued(5),
            None,
            Some(QueuedState::Queued {
                pid: 4242,
                redeliveries: 0,
            }),
        );
        pin(&q, FateState::Queued, "queued in session-b at seq 5 (inbox next-turn), waiting in the memory of DSH process pid 4242; not landed yet: it lands when that session's current turn ends");
        let early = v(Fate::Unknown, None, q.in_memory.clone());
        pin(&early, FateState::Queued, "queued for session-b, waiting in the memory of DSH process pid 4242; not in its log yet (the host writes it behind) and not landed yet");
        let lost = |handed_back, fate| {
            v(
                fate,
                None,
                Some(QueuedState::Lost {
                    pid: 4242,
                    handed_back,
                    redeliveries: 0,
                }),
            )
        };
        pin(&lost(false, queued(5)), FateState::Lost, "lost with its process, re-delivery pending: dsh-session-mail:11111111-2222-3333-4444-555555555555 was waiting in the memory of DSH process pid 4242, which is gone (it stopped or crashed) (session-b: inserted into its inbox at seq 5, not landed); it is delivered once, with the same request id, when session-b is live again in a process with dsh-session-mail (or woken by one where allowResume permits)");
        pin(&lost(true, Fate::Unknown), FateState::Lost, "lost with its process, re-delivery pending: dsh-session-mail:11111111-2222-3333-4444-555555555555 was waiting in the memory of DSH process pid 4242, which stopped and handed it back before its host canceled it (session-b: not in its log); it is delivered once, with the same request id, when session-b is live again in a process with dsh-session-mail (or woken by one where allowResume permits)");
        let removed = |why| {
            v(
                Fate::Canceled {
                    seq: 9,
                    target: "next-turn".into(),
                },
                None,
                Some(QueuedState::Removed(Removed {
                    request_id: RID.into(),
                    session_id: "session-b".into(),
                    seq: 9,
                    why,
                    holder_pid: 4242,
                })),
            )
        };
        pin(&removed(RemovedWhy::Human), FateState::Removed, "removed from the queue by the human: dsh-session-mail:11111111-2222-3333-4444-555555555555 was deleted from session-b's inbox at seq 9 (a single-row delete, as the queue dock does); a human's decision is final, so it is not delivered again");
        pin(&removed(RemovedWhy::Unattributed), FateState::Removed, "removed: dsh-session-mail:11111111-2222-3333-4444-555555555555 was canceled with the whole inbox of session-b at seq 9, and its holder (pid 4242) did not hand it back at a stop first: the human's cancel, closing the session, or a stop this plugin did not see cannot be told apart there, so it is treated as removed by the human and not delivered again");
        // a row delete the log shows, before any record says so
        let row = v(
            Fate::Canceled {
                seq: 9,
                target: "next-turn".into(),
            },
            Some(RequestTrace {
                cancel: Some(Cancel {
                    seq: 9,
                    whole: false,
                    list_len: 3,
                }),
                ..Default::default()
            }),
            None,
        );
        pin(&row, FateState::Removed, "removed from the queue by the human: inserted into session-b's inbox (next-turn) at seq 9, then deleted from it alone (a single-row delete, as the queue dock does) before it landed; a human's decision is final, so it is not delivered again");
        // re-delivered: inserted twice, landed once
        let again = v(
            Fate::Landed {
                seq: 31,
                turn: Some(4),
            },
            Some(RequestTrace {
                insertions: 2,
                landings: 1,
                ..Default::default()
            }),
            None,
        );
        pin(&again, FateState::Landed, "landed in session-b at seq 31 (turn 4) (re-delivered after the process that first held it stopped)");
        // a landing wins over a record that is still there
        let landed = v(
            Fate::Landed {
                seq: 31,
                turn: None,
            },
            None,
            Some(QueuedState::Lost {
                pid: 4242,
                handed_back: true,
                redeliveries: 1,
            }),
        );
        pin(&landed, FateState::Landed, "landed in session-b at seq 31 (re-delivered after the process that first held it stopped)");
    }
}
