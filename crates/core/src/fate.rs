//! Where a request id ended up: `verify` looks it up (the ledger names its target, the store holds
//! its fate, the mailbox what is not drained yet); the one request-state model is `store::fate::Fate`.

use std::path::Path;

use crate::ledger::LedgerOutcome;
pub use store::fate::{fate_of, rank, Fate};
use store::Lookup;

// verify

/// Where a request id was looked for and what was found (`Default`: nothing found, nothing searched).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verification {
    pub fate: Fate,
    /// The session whose log holds it (or the one named).
    pub session_id: Option<String>,
    /// Session logs searched.
    pub searched: usize,
    /// The named session does not exist / cannot be read.
    pub session_missing: bool,
    /// Unknown to the store but waiting in the mailbox of this session (handed to a process without
    /// a web server, not drained yet).
    pub waiting: Option<String>,
    /// Unknown to the store and kept for the human's decision (`crate::policy::held`): its state there
    /// and the session it waits for.
    pub awaiting_human: Option<(crate::policy::held::HeldState, String)>,
    /// Unknown to the store and refused by the drain of this session's mailbox (`mailbox::admit`):
    /// the session and why.
    pub mailbox_refused: Option<(String, String)>,
    /// Everything its log says about it (insertions, landings, how it was canceled).
    pub trace: Option<store::RequestTrace>,
    /// What the target's mailbox shard says: held in a process's memory, lost with its process
    /// (re-delivery pending), or not delivered again (`mailbox::queued`).
    pub in_memory: Option<crate::mailbox::queued::QueuedState>,
    /// The outcome of the audit ledger's last line for it, when the ledger was read (a send refused
    /// after its id was minted is `refused` there and nowhere else).
    pub ledger: Option<LedgerOutcome>,
}

/// Look a request id up: in `session` when given, else in every session's log (the folds keep
/// every request id, so a warm scan is cheap).
pub fn verify(home: &Path, request_id: &str, session: Option<&str>) -> Verification {
    let mut v = lookup(home, request_id, session);
    if v.fate == Fate::Unknown {
        if session.is_some() {
            v.ledger = ledger_lines(home, request_id).1;
        }
        v.waiting = crate::mailbox::find_waiting(home, request_id, v.session_id.as_deref());
        v.awaiting_human = crate::policy::held::state_of(home, request_id, v.session_id.as_deref())
            .map(|h| (h.state, h.envelope.session_id));
        v.mailbox_refused =
            crate::mailbox::admit::find_refused(home, request_id, v.session_id.as_deref())
                .map(|r| (r.session_id, r.why));
    }
    if let Some(s) = v.session_id.as_deref() {
        v.in_memory = crate::mailbox::queued::lookup(home, s, request_id, base::clock::now_ms());
    }
    v
}

/// The audit ledger's word on a request id: the target its lines name, and the outcome of its last.
fn ledger_lines(home: &Path, request_id: &str) -> (Option<String>, Option<LedgerOutcome>) {
    let filter = crate::ledger::Filter {
        request_id: Some(request_id.to_string()),
        ..Default::default()
    };
    let Ok(r) = crate::ledger::read_ledger(home, &filter) else {
        return (None, None);
    };
    let outcome = r.entries.last().map(|e| e.outcome.clone());
    (r.entries.into_iter().rev().find_map(|e| e.target), outcome)
}

fn lookup(home: &Path, request_id: &str, session: Option<&str>) -> Verification {
    // Without a session, the audit ledger knows the target of every request id this plugin minted.
    let (from_ledger, ledger) = if session.is_none() {
        ledger_lines(home, request_id)
    } else {
        (None, None)
    };
    let mut v = lookup_in(home, request_id, session.or(from_ledger.as_deref()));
    v.ledger = ledger;
    v
}

fn lookup_in(home: &Path, request_id: &str, session: Option<&str>) -> Verification {
    if let Some(id) = session {
        return match store::load_session(home, id) {
            Lookup::Found(s) => {
                let trace = s.fold.requests.get(request_id).cloned();
                Verification {
                    fate: trace.as_ref().map(fate_of).unwrap_or(Fate::Unknown),
                    session_id: Some(id.to_string()),
                    searched: 1,
                    trace,
                    ..Verification::default()
                }
            }
            _ => Verification {
                session_id: Some(id.to_string()),
                session_missing: true,
                ..Verification::default()
            },
        };
    }
    let listing = store::list_sessions(home);
    let mut best = Verification {
        searched: listing.sessions.len(),
        ..Verification::default()
    };
    for s in &listing.sessions {
        if let Some(t) = s.fold.requests.get(request_id) {
            let f = fate_of(t);
            if rank(&f) > rank(&best.fate) {
                best.fate = f;
                best.session_id = Some(s.meta.id.clone());
                best.trace = Some(t.clone());
            }
        }
    }
    best
}

// The enum is declared in `crate::code` (the ground layer), so the wire between linked machines
// (`crate::machine::wire`) carries this very type; its methods are here.
pub use crate::code::FateState;

impl FateState {
    pub const ALL: [FateState; 12] = [
        FateState::Landed,
        FateState::Queued,
        FateState::Waiting,
        FateState::Held,
        FateState::Approved,
        FateState::Rejected,
        FateState::Expired,
        FateState::Refused,
        FateState::Canceled,
        FateState::Lost,
        FateState::Removed,
        FateState::Unknown,
    ];

    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            FateState::Landed => "landed",
            FateState::Queued => "queued",
            FateState::Waiting => "waiting",
            FateState::Held => "held",
            FateState::Approved => "approved",
            FateState::Rejected => "rejected",
            FateState::Expired => "expired",
            FateState::Refused => "refused",
            FateState::Canceled => "canceled",
            FateState::Lost => "lost",
            FateState::Removed => "removed",
            FateState::Unknown => "unknown",
        }
    }

    /// Settled: it will not change any more (landed, or never delivered); `verify --wait` stops here.
    pub fn settled(self) -> bool {
        match self {
            FateState::Landed
            | FateState::Rejected
            | FateState::Expired
            | FateState::Refused
            | FateState::Canceled
            | FateState::Removed => true,
            FateState::Queued
            | FateState::Waiting
            | FateState::Held
            | FateState::Approved
            | FateState::Lost
            | FateState::Unknown => false,
        }
    }
}

impl From<crate::policy::held::HeldState> for FateState {
    fn from(s: crate::policy::held::HeldState) -> FateState {
        use crate::policy::held::HeldState;
        match s {
            HeldState::Held => FateState::Held,
            HeldState::Approved => FateState::Approved,
            HeldState::Rejected => FateState::Rejected,
            HeldState::Expired => FateState::Expired,
        }
    }
}

/// Why a request id was not found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotFound {
    /// The named session does not exist or its log cannot be read.
    SessionMissing,
    /// Not in the log of the one session looked in.
    NotInLog,
    /// In none of the logs searched.
    NoneOf { searched: usize },
}

/// How a removal from the queue is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovedBy {
    /// The holder's record: the human deleted its row.
    Human { seq: u64 },
    /// The holder's record: canceled with the whole inbox and not handed back first.
    Unattributed { seq: u64, holder_pid: u32 },
}

/// What a verification says, with the facts its line of text names: the one value both the `state`
/// and the text are printed from (`render::fate`), so they cannot disagree. The order of the checks is
/// [`read`]'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading<'a> {
    Landed {
        seq: u64,
        turn: Option<u64>,
        /// Inserted more than once, or re-delivered after its first holder stopped.
        again: bool,
    },
    /// Inserted into the inbox at `seq`; `pid`: the process whose memory holds it, when recorded.
    Queued {
        seq: u64,
        target: &'a str,
        pid: Option<u32>,
    },
    /// Recorded as queued in the memory of process `pid`, not in the log yet (the host writes behind).
    QueuedUnlogged {
        pid: u32,
    },
    Waiting {
        session: &'a str,
    },
    /// The held store's state of it (held, approved, rejected, expired) and the session it waits for.
    Human {
        state: crate::policy::held::HeldState,
        session: &'a str,
    },
    /// The drain of `session`'s mailbox refused it.
    RefusedByMailbox {
        session: &'a str,
        why: &'a str,
    },
    /// The audit ledger's line says it was refused when sent, with this code.
    RefusedWhenSent {
        code: String,
    },
    Canceled {
        seq: u64,
        target: &'a str,
    },
    /// Removed, as the holder's record says.
    Removed(RemovedBy),
    /// Removed alone from the inbox at `seq` (a single-row delete the log shows).
    RemovedRow {
        seq: u64,
        target: &'a str,
    },
    Lost {
        pid: u32,
        handed_back: bool,
        /// The seq it was inserted at, when the log has it.
        inserted: Option<u64>,
    },
    Unknown(NotFound),
}

impl Reading<'_> {
    /// Its fate.
    pub fn state(&self) -> FateState {
        match self {
            Reading::Landed { .. } => FateState::Landed,
            Reading::Queued { .. } | Reading::QueuedUnlogged { .. } => FateState::Queued,
            Reading::Waiting { .. } => FateState::Waiting,
            Reading::Human { state, .. } => (*state).into(),
            Reading::RefusedByMailbox { .. } | Reading::RefusedWhenSent { .. } => {
                FateState::Refused
            }
            Reading::Canceled { .. } => FateState::Canceled,
            Reading::Removed(_) | Reading::RemovedRow { .. } => FateState::Removed,
            Reading::Lost { .. } => FateState::Lost,
            Reading::Unknown(_) => FateState::Unknown,
        }
    }
}

/// What a verification says, in this order: the log's landing; for a request the logs do not have,
/// the held store, the mailbox's refusal, the mailbox; the holder's record of a removal or a loss;
/// the log's queued / canceled; a record of it queued in memory; the ledger's refusal; else unknown.
pub fn read(v: &Verification) -> Reading<'_> {
    use crate::mailbox::queued::{QueuedState, RemovedWhy};
    if let Fate::Landed { seq, turn } = v.fate {
        let redelivered = match &v.in_memory {
            Some(
                QueuedState::Queued { redeliveries, .. } | QueuedState::Lost { redeliveries, .. },
            ) => *redeliveries,
            _ => 0,
        };
        let again = v.trace.as_ref().is_some_and(|t| t.insertions > 1) || redelivered > 0;
        return Reading::Landed { seq, turn, again };
    }
    if v.fate == Fate::Unknown {
        if let Some((state, s)) = &v.awaiting_human {
            return Reading::Human {
                state: *state,
                session: s,
            };
        }
        if let Some((s, why)) = &v.mailbox_refused {
            return Reading::RefusedByMailbox { session: s, why };
        }
        if let Some(s) = &v.waiting {
            return Reading::Waiting { session: s };
        }
    }
    match &v.in_memory {
        Some(QueuedState::Removed(r)) => {
            return Reading::Removed(match r.why {
                RemovedWhy::Human => RemovedBy::Human { seq: r.seq },
                RemovedWhy::Unattributed => RemovedBy::Unattributed {
                    seq: r.seq,
                    holder_pid: r.holder_pid,
                },
            })
        }
        Some(QueuedState::Lost {
            pid, handed_back, ..
        }) => {
            return Reading::Lost {
                pid: *pid,
                handed_back: *handed_back,
                inserted: match &v.fate {
                    Fate::Queued { seq, .. } | Fate::Canceled { seq, .. } => Some(*seq),
                    _ => None,
                },
            }
        }
        _ => {}
    }
    let in_memory = match &v.in_memory {
        Some(QueuedState::Queued { pid, .. }) => Some(*pid),
        _ => None,
    };
    match &v.fate {
        Fate::Queued { seq, target } => Reading::Queued {
            seq: *seq,
            target,
            pid: in_memory,
        },
        Fate::Canceled { seq, target }
            if v.trace
                .as_ref()
                .and_then(|t| t.cancel)
                .is_some_and(|c| !c.whole) =>
        {
            Reading::RemovedRow { seq: *seq, target }
        }
        Fate::Canceled { seq, target } => Reading::Canceled { seq: *seq, target },
        Fate::Landed { .. } => unreachable!("returned above"),
        Fate::Unknown => match (in_memory, &v.ledger) {
            (Some(pid), _) => Reading::QueuedUnlogged { pid },
            (None, Some(LedgerOutcome::Refused(code))) => Reading::RefusedWhenSent {
                code: code.to_string(),
            },
            (None, Some(LedgerOutcome::RefusedUnknown(code))) => {
                Reading::RefusedWhenSent { code: code.clone() }
            }
            _ if v.session_missing => Reading::Unknown(NotFound::SessionMissing),
            _ if v.session_id.is_some() => Reading::Unknown(NotFound::NotInLog),
            _ => Reading::Unknown(NotFound::NoneOf {
                searched: v.searched,
            }),
        },
    }
}

/// The state that tells the truth: [`read`]'s.
pub fn state_of(v: &Verification) -> FateState {
    read(v).state()
}

/// A verification as data, with its one line of text (`render::fate::request_fate` makes it);
/// the binding's `verifyRequest` returns it as it is (numbers as JS numbers: `i64`, `u32`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, use_nullable = true)
)]
pub struct RequestFate {
    pub request_id: String,
    /// Its fate (every value is documented in `dsh-session-mail verify --help` and docs/output-contract.md).
    pub state: FateState,
    /// It will not change any more: landed, or never delivered ([`FateState::settled`]).
    pub settled: bool,
    pub session_id: Option<String>,
    pub seq: Option<i64>,
    pub turn: Option<i64>,
    /// The inbox (`next-turn`, `next-step`) of a queued or canceled request.
    pub target: Option<String>,
    /// Session logs searched.
    pub searched: u32,
    /// The named session does not exist or cannot be read.
    pub session_missing: bool,
    /// A message sent to a linked machine: that machine (`{id, name}`, the name this home gave it;
    /// an unlinked one by its id's first 12 characters); `null` for this home's own sessions.
    pub machine: Option<crate::machine::Machine>,
    /// One line for people (`landed in … at seq N (turn T)`, …).
    pub text: String,
    /// That machine answered this verify: `state` is what became of the message there now (else what
    /// it answered when it took it, or what this home's outbox says).
    pub answered_there: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn verify_finds_requests_by_session_or_by_scan() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("sessions").join("--w--").join("session-t");
        std::fs::create_dir_all(&dir).unwrap();
        let rid = "dsh-session-mail:11111111-2222-3333-4444-555555555555";
        let msg = json!({"id":"m1","role":"user","content":[{"type":"text","text":"From session-s ：\nhi"}],"source":{"kind":"user","rpcId":rid}});
        let lines = [
            json!({"type":"session","version":0,"id":"session-t","createdAt":1,"cwd":"/w"}),
            json!({"type":"agent/inbox/spliced","seq":0,"time":1,"data":{"target":"next-turn","start":0,"inserted":[msg]}}),
        ];
        let log = dir.join("session.jsonl");
        std::fs::write(
            &log,
            lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
        let v = verify(home.path(), rid, None);
        assert_eq!(
            v.fate,
            Fate::Queued {
                seq: 0,
                target: "next-turn".into()
            }
        );
        assert_eq!(v.session_id.as_deref(), Some("session-t"));
        let more = [
            json!({"type":"turn/start","seq":1,"time":2,"data":{"turn":3}}),
            json!({"type":"agent/inbox/spliced","seq":2,"time":2,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}),
            json!({"type":"user/message","seq":3,"time":2,"data":msg,"surfaceOp":"append"}),
        ];
        let mut text = std::fs::read_to_string(&log).unwrap();
        text.push_str(&more.iter().map(|l| format!("{l}\n")).collect::<String>());
        std::fs::write(&log, text).unwrap();
        let v = verify(home.path(), rid, Some("session-t"));
        assert_eq!(
            v.fate,
            Fate::Landed {
                seq: 3,
                turn: Some(3)
            },
            "{v:?}"
        );
        let val =
            serde_json::to_value(crate::render::fate::request_fate(&v, rid, home.path())).unwrap();
        assert_eq!(val["state"], "landed");
        assert_eq!(val["turn"], 3);
        assert_eq!(val["text"], "landed in session-t at seq 3 (turn 3)");
        assert_eq!(
            verify(home.path(), "dsh-session-mail:nope", None).fate,
            Fate::Unknown
        );
        let gone = verify(home.path(), rid, Some("session-gone"));
        assert!(gone.session_missing);
    }

    /// The case end to end: a message the human rejected is `rejected` to `verify` (it said
    /// `unknown` beside a text that said rejected); held before the decision; approved after one.
    #[test]
    fn verify_answers_the_held_stores_fate_as_the_state() {
        use crate::policy::held;
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        crate::policy::apply(
            home,
            &crate::policy::Change::Session("session-b".into(), crate::policy::Inbound::Hold),
            1,
        )
        .unwrap();
        let rid = |n: u8| format!("dsh-session-mail:00000000-0000-4000-8000-00000000000{n}");
        for n in [1, 2, 3] {
            // 3 expired long ago (its expiresAt is 1 ms after the epoch); 1 and 2 wait
            let expires_at = if n == 3 { 1 } else { i64::MAX };
            held::hold(
                home,
                &crate::mailbox::Envelope {
                    v: 1,
                    request_id: rid(n),
                    session_id: "session-b".into(),
                    mode: "queue".into(),
                    text: "From session-a ：\nhi".into(),
                    sender: Some("session-a".into()),
                    posted_at: 5,
                    ..Default::default()
                },
                expires_at,
            )
            .unwrap();
        }
        let state = |n: u8, session: Option<&str>| {
            let f =
                crate::render::fate::request_fate(&verify(home, &rid(n), session), &rid(n), home);
            (f.state, f.settled)
        };
        assert_eq!(state(1, None), (FateState::Held, false));
        assert_eq!(state(1, Some("session-b")), (FateState::Held, false));
        held::decide(home, "session-b", &rid(1), false, 10).unwrap();
        assert_eq!(state(1, None), (FateState::Rejected, true));
        assert_eq!(state(1, Some("session-b")), (FateState::Rejected, true));
        held::decide(home, "session-b", &rid(2), true, 10).unwrap();
        assert_eq!(state(2, None), (FateState::Approved, false));
        // the sender's verify says expired from the instant, before any sweep wrote it; settled
        assert_eq!(state(3, None), (FateState::Expired, true));
        let f = crate::render::fate::request_fate(&verify(home, &rid(3), None), &rid(3), home);
        assert!(f.text.starts_with("expired: "), "{}", f.text);
        assert_eq!(held::sweep(home, base::clock::now_ms()), 1);
        assert_eq!(state(3, Some("session-b")), (FateState::Expired, true));
    }

    /// A send refused after its request id was minted (the host refused it) is `refused` to `verify`
    /// by its ledger line, with or without `--session`.
    #[test]
    fn verify_answers_refused_for_a_send_the_ledger_saw_refused() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        let rid = "dsh-session-mail:00000000-0000-4000-8000-000000000009";
        let e = crate::ledger::Entry::new(
            1_700_000_000_000,
            Some("session-a"),
            Some("session-b"),
            "send_session_message",
            Some("queue"),
            Some(rid),
            LedgerOutcome::Refused(crate::outcome::RefusalCode::AuthFailed),
            Some("hi"),
        );
        crate::ledger::append(home, &e).unwrap();
        for session in [None, Some("session-b")] {
            let v = verify(home, rid, session);
            assert_eq!(state_of(&v), FateState::Refused, "{session:?}");
        }
        assert_eq!(
            state_of(&verify(
                home,
                "dsh-session-mail:00000000-0000-4000-8000-000000000008",
                None
            )),
            FateState::Unknown
        );
    }
}
