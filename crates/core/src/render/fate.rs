//! The one text of a request's fate (the CLI's `verify`, the doctor's delivery check): a printer
//! over `fate::Verification`; it reads nothing.

use std::path::Path;

use crate::fate::{Fate, NotFound, Reading, RemovedBy, RequestFate, Verification};

/// `landed in <session> at seq N (turn T)`, `queued in …`, `held: …`, `canceled: …`, `unknown: …`:
/// the line of [`crate::fate::read`]'s reading.
pub fn describe(v: &Verification, request_id: &str, home: &Path) -> String {
    line(&crate::fate::read(v), v, request_id, home)
}

/// The line of a message sent to a linked machine whose fate is a remembered answer
/// (`crossing::fates`): `held: as that machine answered at <time> (to the send); verify asks it again`.
pub fn remembered(a: &crate::crossing::fates::Answer) -> String {
    use crate::crossing::fates::Source;
    let at = base::clock::format_utc_secs(a.at_ms);
    let state = a.state.as_str();
    match a.source {
        Source::Outbox => format!(
            "{state}: as this home's outbox for that machine said at {at}; verify asks again"
        ),
        s => {
            let to = match s {
                Source::Send => "the send",
                Source::Delivery => "the outbox's delivery",
                _ => "a verify",
            };
            format!("{state}: as that machine answered {to} at {at}; verify asks it again")
        }
    }
}

/// The line of one reading (its first word is the fate's, but nothing reads it back: the state is
/// [`Reading::state`]).
pub fn line(r: &Reading, v: &Verification, request_id: &str, home: &Path) -> String {
    use crate::policy::held::HeldState;
    let session = v.session_id.as_deref().unwrap_or("(no session)");
    let lands_when = |target: &str| {
        if target == "next-step" {
            "next step starts"
        } else {
            "current turn ends"
        }
    };
    match r {
        // Kept for the human's decision by the target's inbound policy (crate::policy::held).
        Reading::Human { state, session: s } => match state {
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
                "expired: {request_id} was held for the human of {s} past its time and rejected as expired; it was not delivered and never will be"
            ),
        },
        // The drain of the target's mailbox refused the envelope (crate::mailbox::admit).
        Reading::RefusedByMailbox { session: s, why } => format!(
            "refused: the process holding {s} refused {request_id} from its mailbox and did not deliver it: {why}"
        ),
        Reading::RefusedWhenSent { code } => {
            let what = if request_id.is_empty() {
                "the send"
            } else {
                request_id
            };
            format!(
                "refused ({code}): {what} was refused when it was sent (the audit ledger's line); it was not delivered and never will be"
            )
        }
        // Handed to the mailbox of a session live in a process without a web server, not drained yet.
        Reading::Waiting { session: s } => format!(
            "waiting: {request_id} is in the mailbox of {s}, not delivered yet; the process holding {s} delivers it on its next drain (or, if that process ended, the next one to hold it)"
        ),
        Reading::Removed(RemovedBy::Human { seq }) => format!(
            "removed from the queue by the human: {request_id} was deleted from {session}'s inbox at seq {seq} (a single-row delete, as the queue dock does); a human's decision is final, so it is not delivered again"
        ),
        Reading::Removed(RemovedBy::Unattributed { seq, holder_pid }) => format!(
            "removed: {request_id} was canceled with the whole inbox of {session} at seq {seq}, and its holder (pid {holder_pid}) did not hand it back at a stop first: the human's cancel, closing the session, or a stop this plugin did not see cannot be told apart there, so it is treated as removed by the human and not delivered again"
        ),
        Reading::Lost {
            pid,
            handed_back,
            inserted,
        } => {
            let how = if *handed_back {
                "stopped and handed it back before its host canceled it"
            } else {
                "is gone (it stopped or crashed)"
            };
            let seen = match inserted {
                Some(seq) => format!("inserted into its inbox at seq {seq}, not landed"),
                None => "not in its log".into(),
            };
            format!(
                "lost with its process, re-delivery pending: {request_id} was waiting in the memory of DSH process pid {pid}, which {how} ({session}: {seen}); it is delivered once, with the same request id, when {session} is live again in a process with dsh-session-mail (or woken by one where allowResume permits)"
            )
        }
        Reading::Landed { seq, turn, again } => format!(
            "landed in {session} at seq {seq}{}{}",
            turn.map_or(String::new(), |t| format!(" (turn {t})")),
            if *again {
                " (re-delivered after the process that first held it stopped)"
            } else {
                ""
            }
        ),
        Reading::Queued {
            seq,
            target,
            pid: Some(pid),
        } => format!(
            "queued in {session} at seq {seq} (inbox {target}), waiting in the memory of DSH process pid {pid}; not landed yet: it lands when that session's {}",
            lands_when(target)
        ),
        Reading::Queued {
            seq,
            target,
            pid: None,
        } => format!(
            "queued in {session} at seq {seq} (inbox {target}); not landed yet: it lands when that session's {}",
            lands_when(target)
        ),
        Reading::RemovedRow { seq, target } => format!(
            "removed from the queue by the human: inserted into {session}'s inbox ({target}) at seq {seq}, then deleted from it alone (a single-row delete, as the queue dock does) before it landed; a human's decision is final, so it is not delivered again"
        ),
        Reading::Canceled { seq, target } => format!(
            "canceled: inserted into {session}'s inbox ({target}) at seq {seq}, then removed with its whole inbox before it landed"
        ),
        Reading::QueuedUnlogged { pid } => format!(
            "queued for {session}, waiting in the memory of DSH process pid {pid}; not in its log yet (the host writes it behind) and not landed yet"
        ),
        Reading::Unknown(NotFound::SessionMissing) => format!(
            "unknown: session {session} is not in {}/sessions (or its log cannot be read)",
            home.display()
        ),
        Reading::Unknown(NotFound::NotInLog) => {
            format!("unknown: {request_id} is not in the log of {session}")
        }
        Reading::Unknown(NotFound::NoneOf { searched }) => format!(
            "unknown: {request_id} is in none of the {searched} session logs under {}/sessions",
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
    let reading = crate::fate::read(v);
    let state = reading.state();
    RequestFate {
        request_id: request_id.to_string(),
        state,
        settled: state.settled(),
        session_id: v.session_id.clone(),
        seq: seq.map(js_int),
        turn: turn.map(js_int),
        target,
        searched: u32::try_from(v.searched).unwrap_or(u32::MAX),
        session_missing: v.session_missing,
        machine: None,
        text: line(&reading, v, request_id, home),
        answered_there: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fate::FateState;
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

    /// One pin per fate the held store, the mailbox and the ledger decide (issue 30 #3): the state and
    /// the text come from the one reading, so `verify --json` never says `unknown` beside a text that
    /// says `rejected`.
    #[test]
    fn the_state_and_the_text_of_every_fate_come_from_one_reading() {
        use crate::fate::FateState as S;
        use crate::ledger::LedgerOutcome;
        use crate::outcome::RefusalCode;
        use crate::policy::held::HeldState;
        let home = Path::new("/home");
        let unknown = |f: &dyn Fn(&mut Verification)| {
            let mut x = v(Fate::Unknown, None, None);
            f(&mut x);
            x
        };
        let human = |state| unknown(&|x| x.awaiting_human = Some((state, "session-b".into())));
        let cases: Vec<(Verification, S, String)> = vec![
            (human(HeldState::Held), S::Held, format!("held: {RID} is held for the human of session-b; it lands only if they approve it")),
            (human(HeldState::Approved), S::Approved, format!("approved: the human of session-b approved {RID}; it is handed to that session's mailbox and lands once the process holding it drains it")),
            (human(HeldState::Rejected), S::Rejected, format!("rejected: the human of session-b rejected {RID}; it was not delivered and never will be")),
            (human(HeldState::Expired), S::Expired, format!("expired: {RID} was held for the human of session-b past its time and rejected as expired; it was not delivered and never will be")),
            (
                unknown(&|x| x.mailbox_refused = Some(("session-b".into(), "its From header is forged".into()))),
                S::Refused,
                format!("refused: the process holding session-b refused {RID} from its mailbox and did not deliver it: its From header is forged"),
            ),
            (
                unknown(&|x| x.ledger = Some(LedgerOutcome::Refused(RefusalCode::AuthFailed))),
                S::Refused,
                format!("refused (auth-failed): {RID} was refused when it was sent (the audit ledger's line); it was not delivered and never will be"),
            ),
            (
                unknown(&|x| x.waiting = Some("session-b".into())),
                S::Waiting,
                format!("waiting: {RID} is in the mailbox of session-b, not delivered yet; the process holding session-b delivers it on its next drain (or, if that process ended, the next one to hold it)"),
            ),
            (
                v(Fate::Canceled { seq: 7, target: "next-step".into() }, None, None),
                S::Canceled,
                "canceled: inserted into session-b's inbox (next-step) at seq 7, then removed with its whole inbox before it landed".into(),
            ),
            (
                v(queued(5), None, None),
                S::Queued,
                "queued in session-b at seq 5 (inbox next-turn); not landed yet: it lands when that session's current turn ends".into(),
            ),
            (
                v(Fate::Landed { seq: 8, turn: None }, None, None),
                S::Landed,
                "landed in session-b at seq 8".into(),
            ),
            (unknown(&|_| {}), S::Unknown, format!("unknown: {RID} is not in the log of session-b")),
            (
                unknown(&|x| x.session_missing = true),
                S::Unknown,
                "unknown: session session-b is not in /home/sessions (or its log cannot be read)".into(),
            ),
            (
                unknown(&|x| {
                    x.session_id = None;
                    x.searched = 3;
                }),
                S::Unknown,
                format!("unknown: {RID} is in none of the 3 session logs under /home/sessions"),
            ),
        ];
        for (x, state, text) in &cases {
            let f = request_fate(x, RID, home);
            assert_eq!((f.state, f.text.as_str()), (*state, text.as_str()), "{x:?}");
            assert_eq!(f.settled, state.settled());
            assert_eq!(serde_json::to_value(&f).unwrap()["state"], state.as_str());
        }
        // where the facts overlap, the state follows the text's order: a held message with a stale
        // in-memory record is held (the old state_of said queued beside a text that said held)
        let mut both = human(HeldState::Held);
        both.in_memory = Some(QueuedState::Queued {
            pid: 4242,
            redeliveries: 0,
        });
        let f = request_fate(&both, RID, home);
        assert_eq!(f.state, S::Held);
        assert!(f.text.starts_with("held: "), "{}", f.text);
        // what the log says outranks a ledger line: a refused line of an id that landed is landed
        let mut landed = v(Fate::Landed { seq: 8, turn: None }, None, None);
        landed.ledger = Some(LedgerOutcome::Refused(RefusalCode::AuthFailed));
        assert_eq!(request_fate(&landed, RID, home).state, S::Landed);
        // and a ledger line that is not a refusal decides nothing
        for o in [
            LedgerOutcome::Accepted,
            LedgerOutcome::Unreachable,
            LedgerOutcome::Other("refused?".into()),
        ] {
            let x = unknown(&|x| x.ledger = Some(o.clone()));
            assert_eq!(request_fate(&x, RID, home).state, S::Unknown, "{o:?}");
        }
    }

    /// Every fate has one JSON name (the binding's string enum, kebab-case), and the names are the
    /// architecture's list plus `lost` and `removed`; settled ones are landed or never delivered.
    #[test]
    fn every_fate_has_one_json_name_and_a_settledness() {
        use crate::fate::FateState;
        let names: Vec<String> = FateState::ALL
            .iter()
            .map(|s| {
                let json = serde_json::to_value(s).unwrap();
                assert_eq!(json, s.as_str());
                let back: FateState = serde_json::from_value(json).unwrap();
                assert_eq!(back, *s);
                s.as_str().to_string()
            })
            .collect();
        assert_eq!(
            names,
            [
                "landed", "queued", "waiting", "held", "approved", "rejected", "expired",
                "refused", "canceled", "lost", "removed", "unknown"
            ]
        );
        let settled: Vec<&str> = FateState::ALL
            .iter()
            .filter(|s| s.settled())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(
            settled,
            ["landed", "rejected", "expired", "refused", "canceled", "removed"]
        );
    }
}
