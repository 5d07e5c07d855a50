//! The human's mail view of one session (issue 17): its inbound and outbound agent mail, newest first, with
//! the same facts `verify` reads — the audit ledger's line (time, mode, hop, outcome) and the request's
//! fate in the target's log, its mailbox, or the held store. Bounded: the newest `limit` ledger lines of
//! the session, each target's log loaded once per call.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use crate::fate::{self, Fate, FateState};
use crate::ledger::{self, Entry, Filter};
use crate::policy::{self, held, Reading};
use store::{self, Lookup};

/// Most rows a view returns.
pub const MAX_ROWS: usize = 200;

/// One row of the view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// Empty for a send refused before its request id was minted.
    pub request_id: String,
    /// `in` (to this session) or `out` (from it).
    pub direction: &'static str,
    pub peer: Option<String>,
    pub peer_title: Option<String>,
    pub time: String,
    pub time_ms: i64,
    pub mode: Option<String>,
    pub hop: Option<u32>,
    pub chain: Option<String>,
    /// The ledger's outcome as written (`accepted`, `refused:<code>`, `held`, …).
    pub outcome: String,
    /// Its fate, the same value `verify --json` answers (`fate::read` of the same facts).
    pub fate: FateState,
    /// The one line `verify` prints, from the same reading.
    pub fate_text: String,
    /// The peer's machine (the ledger's `fromMachine` for mail in, `toMachine` for mail out); `None`: this
    /// home. Named by the id's first 12 characters here; the routes put the human's name for it.
    pub machine: Option<crate::machine::Machine>,
    /// Mail out to a linked machine: the remembered answer `fate` comes from (`crossing::fates`: the far
    /// side's at the send, the delivery or the latest `verify`, or this home's outbox), and when. `None`:
    /// `fate` is this home's own reading, now.
    pub answered: Option<crate::crossing::fates::Answered>,
}

/// One held message, for the human's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    pub request_id: String,
    pub sender: Option<String>,
    pub sender_title: Option<String>,
    pub mode: String,
    pub text: String,
    pub posted_at: i64,
    /// `held`, `approved`, `rejected` or `expired`.
    pub state: held::HeldState,
    /// When it expires if nobody decides (ms since the epoch).
    pub expires_at: i64,
    /// Time left to decide at the moment of this view (ms; 0 once expired or decided).
    pub ms_left: i64,
    /// The human's standing rule for its sender, if one exists (the card's "always allow from …" shows
    /// what is set).
    pub sender_rule: Option<policy::Inbound>,
    /// The machine it came from (its ledger line's `fromMachine`); `None`: this home.
    pub machine: Option<crate::machine::Machine>,
}

/// The session's inbound policy as the view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyView {
    pub inbound: &'static str,
    pub stop_all: bool,
    /// Why the policy file does not verify (then every send is held).
    pub unverified: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct View {
    pub session_id: String,
    pub rows: Vec<Row>,
    pub held: Vec<Held>,
    pub policy: PolicyView,
    /// The home's standing rules and their order (`rules.list`'s result).
    pub rules: crate::human::RulesView,
    /// More ledger lines exist than were shown.
    pub truncated: bool,
    pub ledger_error: Option<String>,
}

/// The card facts of one delivered request (the conversation view's agent card).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Card {
    pub request_id: String,
    pub sender: Option<String>,
    pub sender_title: Option<String>,
    pub target: Option<String>,
    pub mode: Option<String>,
    pub hop: Option<u32>,
    pub chain: Option<String>,
    pub time: Option<String>,
    /// The machine the message came from (the ledger's `fromMachine`); `None`: this home.
    pub machine: Option<crate::machine::Machine>,
}

pub fn policy_view(home: &Path, session: &str) -> PolicyView {
    match policy::read(home) {
        Reading::Absent => PolicyView {
            inbound: "accept",
            stop_all: false,
            unverified: None,
        },
        Reading::Verified(p) => PolicyView {
            inbound: p.inbound(session).as_str(),
            stop_all: p.stop_all,
            unverified: None,
        },
        Reading::Unverified(why) => PolicyView {
            inbound: "hold",
            stop_all: false,
            unverified: Some(why.to_string()),
        },
    }
}

pub(crate) struct Titles<'a> {
    pub(crate) home: &'a Path,
    pub(crate) memo: HashMap<String, Option<store::StoredSession>>,
}

impl Titles<'_> {
    pub(crate) fn session(&mut self, id: &str) -> Option<&store::StoredSession> {
        if !self.memo.contains_key(id) {
            let s = match store::load_session(self.home, id) {
                Lookup::Found(s) => Some(s),
                _ => None,
            };
            self.memo.insert(id.to_string(), s);
        }
        self.memo.get(id).and_then(|s| s.as_ref())
    }
    pub(crate) fn title(&mut self, id: &str) -> Option<String> {
        self.session(id).and_then(|s| s.meta.title.clone())
    }
}

pub(crate) fn row_fate(
    home: &Path,
    titles: &mut Titles,
    e: &Entry,
    request_id: &str,
) -> (FateState, String) {
    let target = e.target.as_deref();
    // A send refused when it was sent has no other trace: its ledger line is its fate.
    let refused = e.outcome.is_refused();
    let trace = target
        .filter(|_| !refused)
        .and_then(|t| titles.session(t))
        .and_then(|s| s.fold.requests.get(request_id))
        .cloned();
    let fate = trace.as_ref().map(fate::fate_of).unwrap_or(Fate::Unknown);
    // the same Verification `fate::verify` makes, with the target's log loaded once per view
    let look = fate == Fate::Unknown && !refused;
    let v = fate::Verification {
        fate: fate.clone(),
        session_id: target.map(str::to_string),
        searched: 1,
        session_missing: target.is_some_and(|t| titles.session(t).is_none()),
        waiting: if look {
            crate::mailbox::find_waiting(home, request_id, target)
        } else {
            None
        },
        awaiting_human: if look {
            held::state_of(home, request_id, target).map(|h| (h.state, h.envelope.session_id))
        } else {
            None
        },
        mailbox_refused: target.filter(|_| look).and_then(|t| {
            crate::mailbox::admit::refused(home, t, request_id).map(|r| (r.session_id, r.why))
        }),
        trace,
        // a message not landed may wait in a process's memory, or be lost with it (mailbox::queued)
        in_memory: match (&fate, target) {
            (Fate::Landed { .. }, _) | (_, None) => None,
            _ if refused => None,
            (_, Some(t)) => {
                crate::mailbox::queued::lookup(home, t, request_id, base::clock::now_ms())
            }
        },
        ledger: Some(e.outcome.clone()),
    };
    let reading = fate::read(&v);
    (
        reading.state(),
        crate::render::fate::line(&reading, &v, request_id, home),
    )
}

/// The view of `session`: the newest `limit` (≤ [`MAX_ROWS`]) ledger lines it sent or received.
pub fn view(home: &Path, session: &str, limit: usize) -> View {
    let limit = limit.clamp(1, MAX_ROWS);
    let filter = Filter {
        session: Some(session.to_string()),
        ..Default::default()
    };
    let mut titles = Titles {
        home,
        memo: HashMap::new(),
    };
    let (entries, ledger_error) = match ledger::read_ledger(home, &filter) {
        Ok(r) => (r.entries, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    // send tools only, one row per request id (its last line), newest first
    let mut seen = std::collections::HashSet::new();
    let now_ms = base::clock::now_ms();
    let mut fates_key: Option<Option<base::seal::Key>> = None;
    let mut rows = Vec::new();
    let mut truncated = false;
    for e in entries.iter().rev() {
        // A send refused before its id was minted has none: it is a row of its own.
        let rid = e.request_id.clone().unwrap_or_default();
        if !rid.is_empty() && !seen.insert(rid.clone()) {
            continue;
        }
        if rows.len() >= limit {
            truncated = true;
            break;
        }
        let out = e.sender.as_deref() == Some(session);
        let peer = if out {
            e.target.clone()
        } else {
            e.sender.clone()
        };
        let (mut fate, mut fate_text) = row_fate(home, &mut titles, e, &rid);
        let time_ms = base::clock::parse_utc(&e.time).unwrap_or(0);
        // mail out to a linked machine: its fate is what that machine (or the outbox) last answered
        let answer = e
            .to_machine
            .as_deref()
            .filter(|_| out && !rid.is_empty())
            .and_then(|m| {
                let key = fates_key.get_or_insert_with(|| crate::crossing::fates::key(home));
                crate::crossing::fates::read(home, key.as_ref()?, &rid, m, time_ms, now_ms)
            });
        if let Some(a) = &answer {
            fate = a.state;
            fate_text = crate::render::fate::remembered(a);
        }
        let machine = crate::machine::Machine::of_stored(
            if out {
                e.to_machine.clone()
            } else {
                e.from_machine.clone()
            },
            &[],
        );
        rows.push(Row {
            machine,
            peer_title: peer.as_deref().and_then(|p| titles.title(p)),
            peer,
            direction: if out { "out" } else { "in" },
            time_ms,
            time: e.time.clone(),
            mode: e.mode.clone(),
            hop: e.hop,
            chain: e.chain.clone(),
            outcome: e.outcome.as_string(),
            fate,
            fate_text,
            answered: answer.as_ref().map(|a| a.answered()),
            request_id: rid,
        });
    }
    let now = base::clock::now_ms();
    let rules = crate::human::rules_view(home);
    // looking expires what is past its time (held::list): the first process that looks rejects it
    let held = held::list(home, session, now)
        .into_iter()
        .map(|i| Held {
            machine: crate::machine::Machine::of_stored(
                entries
                    .iter()
                    .rev()
                    .find(|e| e.request_id.as_deref() == Some(i.envelope.request_id.as_str()))
                    .and_then(|e| e.from_machine.clone()),
                &[],
            ),
            sender_title: i.envelope.sender.as_deref().and_then(|s| titles.title(s)),
            sender_rule: i
                .envelope
                .sender
                .as_deref()
                .and_then(|s| rules.senders.get(s).copied()),
            ms_left: if i.state_at(now) == held::HeldState::Held {
                i.expires_at.saturating_sub(now).max(0)
            } else {
                0
            },
            expires_at: i.expires_at,
            state: i.state_at(now),
            sender: i.envelope.sender,
            request_id: i.envelope.request_id,
            mode: i.envelope.mode,
            text: i.envelope.text,
            posted_at: i.envelope.posted_at,
        })
        .collect();
    View {
        session_id: session.to_string(),
        rows,
        held,
        policy: policy_view(home, session),
        rules,
        truncated,
        ledger_error,
    }
}

/// The card facts of `request_id`: its ledger line (sender, target, mode, hop) and the sender's title.
pub fn card(home: &Path, request_id: &str) -> Card {
    let filter = Filter {
        request_id: Some(request_id.to_string()),
        ..Default::default()
    };
    let line = ledger::read_ledger(home, &filter)
        .ok()
        .and_then(|r| r.entries.into_iter().rev().find(|e| e.sender.is_some()));
    let Some(e) = line else {
        return Card {
            request_id: request_id.to_string(),
            ..Default::default()
        };
    };
    let sender_title = e
        .sender
        .as_deref()
        .and_then(|s| match store::load_session(home, s) {
            Lookup::Found(s) => s.meta.title,
            _ => None,
        });
    Card {
        request_id: request_id.to_string(),
        machine: crate::machine::Machine::of_stored(e.from_machine.clone(), &[]),
        sender: e.sender,
        sender_title,
        target: e.target,
        mode: e.mode,
        hop: e.hop,
        chain: e.chain,
        time: Some(e.time),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::LedgerOutcome;

    fn line(
        sender: &str,
        target: &str,
        rid: Option<&str>,
        outcome: LedgerOutcome,
        hop: Option<u32>,
    ) -> Entry {
        let mut e = Entry::new(
            1_700_000_000_000,
            Some(sender),
            Some(target),
            "send_session_message",
            Some("queue"),
            rid,
            outcome,
            Some("hi"),
        );
        e.hop = hop;
        e
    }

    #[test]
    fn a_view_lists_in_and_out_newest_first_with_refusals_and_held_mail() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        let r1 = "dsh-session-mail:00000000-0000-4000-8000-000000000001";
        let r2 = "dsh-session-mail:00000000-0000-4000-8000-000000000002";
        ledger::append(
            home,
            &line(
                "session-a",
                "session-b",
                Some(r1),
                LedgerOutcome::Accepted,
                Some(1),
            ),
        )
        .unwrap();
        ledger::append(
            home,
            &line(
                "session-b",
                "session-c",
                None,
                LedgerOutcome::Refused(crate::outcome::RefusalCode::Stopped),
                None,
            ),
        )
        .unwrap();
        ledger::append(
            home,
            &line(
                "session-a",
                "session-b",
                Some(r2),
                LedgerOutcome::Held,
                Some(2),
            ),
        )
        .unwrap();
        ledger::append(
            home,
            &line(
                "session-x",
                "session-y",
                None,
                LedgerOutcome::Accepted,
                None,
            ),
        )
        .unwrap();
        policy::apply(
            home,
            &policy::Change::Session("session-b".into(), policy::Inbound::Hold),
            1,
        )
        .unwrap();
        held::hold(
            home,
            &crate::mailbox::Envelope {
                v: 1,
                request_id: r2.into(),
                session_id: "session-b".into(),
                mode: "queue".into(),
                text: "From session-a ：\nhi".into(),
                sender: Some("session-a".into()),
                posted_at: 5,
                ..Default::default()
            },
            i64::MAX,
        )
        .unwrap();
        let v = view(home, "session-b", 10);
        type Seen<'a> = (&'a str, &'a str, Option<&'a str>, FateState, Option<u32>);
        let got: Vec<Seen> = v
            .rows
            .iter()
            .map(|r| {
                (
                    r.request_id.as_str(),
                    r.direction,
                    r.peer.as_deref(),
                    r.fate,
                    r.hop,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (r2, "in", Some("session-a"), FateState::Held, Some(2)),
                ("", "out", Some("session-c"), FateState::Refused, None),
                (r1, "in", Some("session-a"), FateState::Unknown, Some(1)),
            ],
            "another session's mail is not listed"
        );
        assert_eq!(
            v.rows[1].fate_text,
            "refused (stopped): the send was refused when it was sent (the audit ledger's line); it was not delivered and never will be"
        );
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(
            (&json["rows"][0]["fate"], &json["held"][0]["state"]),
            (&serde_json::json!("held"), &serde_json::json!("held"))
        );
        assert_eq!(v.held.len(), 1);
        assert_eq!(v.held[0].state, held::HeldState::Held);
        assert_eq!(
            v.held[0].machine, None,
            "held mail of this home names no machine"
        );
        assert_eq!(v.policy.inbound, "hold");
        assert_eq!(view(home, "session-a", 10).policy.inbound, "accept");
        assert!(!v.truncated);
        assert!(view(home, "session-b", 1).truncated);
        let c = card(home, r2);
        assert_eq!(
            (c.sender.as_deref(), c.hop, c.mode.as_deref()),
            (Some("session-a"), Some(2), Some("queue"))
        );
        assert_eq!(card(home, "dsh-session-mail:nope").sender, None);
    }

    /// Mail across a link names the other end's machine (issue 31 #6): a row in names the machine it came
    /// from (`fromMachine`), a row out the one it went to (`toMachine`), the card its sender's; a line of
    /// this home names none, and a stored value that is not a machine id reads as this home.
    #[test]
    fn rows_and_cards_name_the_other_machine_from_the_ledger_line() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        let (ma, mb) = ("a".repeat(64), "b".repeat(64));
        let rid = |n: u8| format!("dsh-session-mail:00000000-0000-4000-8000-00000000000{n}");
        let mut inb = line(
            "session-far",
            "session-b",
            Some(&rid(1)),
            LedgerOutcome::Accepted,
            Some(1),
        );
        inb.from_machine = Some(ma.clone());
        let mut out = line(
            "session-b",
            "session-far2",
            Some(&rid(2)),
            LedgerOutcome::Accepted,
            Some(1),
        );
        out.to_machine = Some(mb.clone());
        let local = line(
            "session-c",
            "session-b",
            Some(&rid(3)),
            LedgerOutcome::Accepted,
            Some(1),
        );
        let mut forged = line(
            "session-d",
            "session-b",
            Some(&rid(4)),
            LedgerOutcome::Accepted,
            Some(1),
        );
        forged.from_machine = Some("not-a-machine".into());
        for e in [&inb, &out, &local, &forged] {
            ledger::append(home, e).unwrap();
        }
        let v = view(home, "session-b", 10);
        let got: Vec<(String, Option<String>)> = v
            .rows
            .iter()
            .map(|r| {
                (
                    r.request_id.clone(),
                    r.machine.as_ref().map(|m| m.id.as_str().to_string()),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (rid(4), None),
                (rid(3), None),
                (rid(2), Some(mb.clone())),
                (rid(1), Some(ma.clone()))
            ]
        );
        assert_eq!(
            v.rows[3].machine.as_ref().unwrap().name,
            "aaaaaaaaaaaa",
            "the id's start until the routes name it"
        );
        assert_eq!(
            card(home, &rid(1))
                .machine
                .map(|m| m.id.as_str().to_string()),
            Some(ma.clone())
        );
        assert_eq!(card(home, &rid(3)).machine, None);
        // held mail from a linked machine names it on its held card too
        let mut h5 = line(
            "session-far",
            "session-b",
            Some(&rid(5)),
            LedgerOutcome::Held,
            Some(1),
        );
        h5.from_machine = Some(ma.clone());
        ledger::append(home, &h5).unwrap();
        held::hold(
            home,
            &crate::mailbox::Envelope {
                v: 1,
                request_id: rid(5),
                session_id: "session-b".into(),
                mode: "queue".into(),
                text: "From session-far ：\nhi".into(),
                sender: Some("session-far".into()),
                posted_at: 5,
                ..Default::default()
            },
            i64::MAX,
        )
        .unwrap();
        let v = view(home, "session-b", 1);
        assert_eq!(v.held.len(), 1);
        assert_eq!(
            v.held[0].machine.as_ref().map(|m| m.id.as_str()),
            Some(ma.as_str()),
            "found past the rows shown"
        );
        let json = serde_json::to_value(card(home, &rid(3))).unwrap();
        assert_eq!(json["machine"], serde_json::Value::Null);
    }

    /// The row's fate is decided on the ledger outcome's type, never on its string form (issue 30 #4):
    /// a refusal with a code this version does not know is `refused` too, and an outcome that merely
    /// reads like one (`refused?`) or is none (`unreachable`) is not.
    #[test]
    fn a_row_is_refused_by_the_outcome_type_not_its_string() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        let rid = |n: u8| format!("dsh-session-mail:00000000-0000-4000-8000-00000000000{n}");
        let lines = [
            (rid(1), LedgerOutcome::RefusedUnknown("held-by-mars".into())),
            (
                rid(2),
                LedgerOutcome::Refused(crate::outcome::RefusalCode::AuthFailed),
            ),
            (rid(3), LedgerOutcome::Other("refused?".into())),
            (rid(4), LedgerOutcome::Unreachable),
        ];
        for (r, o) in &lines {
            ledger::append(
                home,
                &line("session-a", "session-b", Some(r), o.clone(), None),
            )
            .unwrap();
        }
        let v = view(home, "session-a", 10);
        let got: Vec<(&str, FateState)> = v
            .rows
            .iter()
            .map(|r| (r.request_id.as_str(), r.fate))
            .collect();
        let (r1, r2, r3, r4) = (rid(1), rid(2), rid(3), rid(4));
        assert_eq!(
            got,
            vec![
                (r4.as_str(), FateState::Unknown),
                (r3.as_str(), FateState::Unknown),
                (r2.as_str(), FateState::Refused),
                (r1.as_str(), FateState::Refused),
            ]
        );
        assert_eq!(
            v.rows[3].fate_text,
            format!("refused (held-by-mars): {r1} was refused when it was sent (the audit ledger's line); it was not delivered and never will be")
        );
        assert!(v.rows[2].fate_text.starts_with("refused (auth-failed): "));
    }
}
