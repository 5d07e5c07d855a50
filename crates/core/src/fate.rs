//! Where a request id ended up: `verify` looks it up (the ledger names its target, the store holds
//! its fate, the mailbox what is not drained yet); the one request-state model is `store::fate::Fate`.

use std::path::Path;

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
}

/// Look a request id up: in `session` when given, else in every session's log (the folds keep
/// every request id, so a warm scan is cheap).
pub fn verify(home: &Path, request_id: &str, session: Option<&str>) -> Verification {
    let mut v = lookup(home, request_id, session);
    if v.fate == Fate::Unknown {
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

fn lookup(home: &Path, request_id: &str, session: Option<&str>) -> Verification {
    // Without a session, the audit ledger knows the target of every request id this plugin minted.
    let from_ledger = if session.is_none() {
        let filter = crate::ledger::Filter {
            request_id: Some(request_id.to_string()),
            ..Default::default()
        };
        crate::ledger::read_ledger(home, &filter)
            .ok()
            .and_then(|r| r.entries.into_iter().rev().find_map(|e| e.target))
    } else {
        None
    };
    if let Some(id) = session.or(from_ledger.as_deref()) {
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

/// The state of a request, as the binding hands it to JS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "kebab-case"))]
pub enum FateState {
    Landed,
    Queued,
    Canceled,
    /// Its holder stopped or crashed before it landed; re-delivered when the session is live again.
    Lost,
    /// Removed from the queue (by the human, or by a cancel that cannot be told from the human's):
    /// never delivered again.
    Removed,
    Unknown,
}

/// The state that tells the truth: the log's fate, corrected by the mailbox shard and by how it was
/// canceled.
pub fn state_of(v: &Verification) -> FateState {
    use crate::mailbox::queued::QueuedState;
    match (&v.fate, &v.in_memory) {
        (Fate::Landed { .. }, _) => FateState::Landed,
        (_, Some(QueuedState::Removed(_))) => FateState::Removed,
        (_, Some(QueuedState::Lost { .. })) => FateState::Lost,
        (Fate::Canceled { .. }, _)
            if v.trace
                .as_ref()
                .and_then(|t| t.cancel)
                .is_some_and(|c| !c.whole) =>
        {
            FateState::Removed
        }
        (Fate::Queued { .. }, _) | (Fate::Unknown, Some(QueuedState::Queued { .. })) => {
            FateState::Queued
        }
        (Fate::Canceled { .. }, _) => FateState::Canceled,
        (Fate::Unknown, _) => FateState::Unknown,
    }
}

/// A verification as data, with its one line of text (`render::fate::request_fate` makes it);
/// the binding's `verifyRequest` returns it as it is (numbers as JS numbers: `i64`, `u32`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct RequestFate {
    pub request_id: String,
    /// `landed`, `queued`, `canceled` or `unknown`.
    pub state: FateState,
    pub session_id: Option<String>,
    pub seq: Option<i64>,
    pub turn: Option<i64>,
    /// The inbox (`next-turn`, `next-step`) of a queued or canceled request.
    pub target: Option<String>,
    /// Session logs searched.
    pub searched: u32,
    /// The named session does not exist or cannot be read.
    pub session_missing: bool,
    /// One line for people (`landed in … at seq N (turn T)`, …).
    pub text: String,
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
}
