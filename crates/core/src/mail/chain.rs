//! The causal loop guard: how many agent-to-agent deliveries one conversation chain has made since a human
//! last spoke in it, and the refusal when the next one would pass `maxRelayHops`.
//!
//! A chain is a causal thread, not a pair or a time window:
//! - a send made in a turn whose newest triggering message came from the human opens a **new chain**
//!   (hop 1) — so a human's own request is never blocked by an agent storm that happened before it;
//! - a send made in a turn whose newest triggering message is a delivery of this plugin (its `source.rpcId`
//!   is one of our request ids) **continues that delivery's chain** at its hop + 1 — whichever session it
//!   goes to, so a multi-hop cycle A→B→C→A is one chain;
//! - a turn opened by an idle notice continues the chain of the send that asked for the notice.
//!
//! Authority: the triggering message is what the caller's own session recorded (its events as the host
//! published them, folded by the shim in lib/observe.js — the same events its log holds), and the hop of
//! a delivery is what *our* audit ledger recorded for that request id (`chain`, `hop` on the line). Nothing
//! comes from tool arguments or from message text: a model can write "hop 0" into a body, but the ledger
//! line keyed by the landed message's `source.rpcId` (set by the host from our request id) is what counts.

use std::path::Path;

use crate::ledger::{self, Filter};
use crate::mail::REQUEST_ID_PREFIX;
// The text prefixes of user-role messages the harness injects: the list `sessions_read` hides as
// harness-injected (docs/output-contract.md "sessions_read"), never a human speaking.
use store::classify::INJECTED_PREFIXES;

/// Prefix of the request id of an idle notice: `dsh-session-mail:notice:<request id of the watched send>`.
pub const NOTICE_PREFIX: &str = "dsh-session-mail:notice:";

pub use crate::request::TurnMessage;

/// What opened (or last fed) the caller's turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// A message the human typed (or nothing this guard recognizes): a new chain.
    Human,
    /// A delivery of this plugin, by its request id.
    Peer(String),
    /// An idle notice, by the request id of the send that asked for it.
    Notice(String),
    /// The shim could not see the caller's turn: treated as a new chain (the budgets stay the backstop).
    Unknown,
}

/// The newest message of the turn that is a human's, a delivery of ours, or an idle notice of ours.
/// Harness-injected context and other plugins' messages are skipped.
pub fn trigger(turn: Option<&[TurnMessage]>) -> Trigger {
    deciding(turn).0
}

/// [`trigger`], with the message that decided it.
fn deciding(turn: Option<&[TurnMessage]>) -> (Trigger, Option<&TurnMessage>) {
    let Some(turn) = turn else {
        return (Trigger::Unknown, None);
    };
    for m in turn.iter().rev() {
        let rpc = m.rpc_id.as_deref().unwrap_or("");
        if let Some(watched) = rpc.strip_prefix(NOTICE_PREFIX) {
            if m.plugin.as_deref() == Some(base::names::DIR_NAME) {
                return (Trigger::Notice(watched.to_string()), Some(m));
            }
        }
        match m.kind.as_deref() {
            Some("user") if rpc.starts_with(REQUEST_ID_PREFIX) => {
                return (Trigger::Peer(rpc.to_string()), Some(m))
            }
            Some("user") => {
                let text = m.text.as_deref().unwrap_or("").trim_start();
                if INJECTED_PREFIXES.iter().any(|p| text.starts_with(p)) {
                    continue;
                }
                return (Trigger::Human, Some(m));
            }
            // V4 names a relay from another agent `agent-message`; it is not ours, and not a human.
            _ => continue,
        }
    }
    (Trigger::Human, None)
}

/// What the loop guard knows of the caller's turn: who the caller is, what opened (or last fed) its
/// turn, and the hop the host recorded in that delivery's frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// The caller's ids (session id, agent id): the ledger line of a delivery that opened its turn must
    /// name one of them as its target (of a notice's watched send: as its sender).
    pub me: Vec<String>,
    pub trigger: Trigger,
    /// `relay: hop N of M` of the triggering delivery's frame as the host recorded it in the caller's
    /// session (`mail::framed_hop`); `None` for a From-header delivery or a sender whose guard was off.
    pub framed_hop: Option<u32>,
}

impl Evidence {
    /// The evidence of a call: the runtime's caller ids and the turn the shim saw.
    pub fn of(caller: Option<&crate::request::Caller>) -> Evidence {
        let me = caller
            .map(|c| {
                [c.session_id.as_deref(), c.agent_id.as_deref()]
                    .into_iter()
                    .flatten()
                    .filter(|s| !s.trim().is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let (trigger, by) = deciding(caller.and_then(|c| c.turn.as_deref()));
        let framed_hop = match &trigger {
            Trigger::Peer(_) => by
                .and_then(|m| m.text.as_deref())
                .and_then(crate::mail::framed_hop),
            _ => None,
        };
        Evidence {
            me,
            trigger,
            framed_hop,
        }
    }

    /// Evidence for a caller `me` whose turn `trigger` decided (no frame seen).
    pub fn new(me: &str, trigger: Trigger) -> Evidence {
        Evidence {
            me: vec![me.to_string()],
            trigger,
            framed_hop: None,
        }
    }
}

/// Why the delivery that opened the caller's turn has no verifiable place in a chain. Such a turn
/// counts as at the limit (issue 16 #3: the guard fails closed): only a human message resets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unverified {
    /// The ledger has no line that sent this request id to the caller (or, for a notice, from it): a
    /// message planted in a mailbox, or one whose line was rotated away or never written.
    UnknownRequest,
    /// The ledger's lines for this request id name different chains: one of them is not ours.
    Contradicted,
}

/// This send's place in its chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// The request id of the chain's first delivery (of the unverifiable delivery, when `unverified`).
    pub chain: String,
    /// 1 for the first agent-to-agent delivery after a human message.
    pub hop: u32,
    /// The sessions the chain has gone through so far (for the refusal), oldest first.
    pub sessions: Vec<String>,
    /// When the chain's first delivery was made (ledger time), if known.
    pub started: Option<String>,
    /// Set when the turn's trigger cannot be placed in a chain: the send counts as past the limit.
    pub unverified: Option<Unverified>,
}

impl Hop {
    /// The first hop of a new chain named by `request_id`.
    pub fn fresh(request_id: &str) -> Hop {
        Hop {
            chain: request_id.to_string(),
            hop: 1,
            sessions: Vec::new(),
            started: None,
            unverified: None,
        }
    }
}

/// Does this ledger line place its request id in a chain? A send that went out (or may have), and a
/// message held for the human (approved, it lands with that request id at that hop).
fn places(e: &ledger::Entry) -> bool {
    e.counts_as_sent() || e.outcome == ledger::LedgerOutcome::Held
}

/// The chain this send would continue, and its hop. `request_id` is the id minted for this send (it names
/// a new chain).
///
/// The ledger is the plugin's claim, the caller's session (the host's record) the evidence it must fit
/// (issue 16 #3): only lines that sent the landed request id *to the caller* count (a notice: the watched
/// send *from* it); of those the highest hop, and never below the hop the host recorded in the
/// delivery's frame, so an appended line with a lower hop lowers nothing. No such line, or lines that
/// disagree about the chain: the trigger is [`Unverified`].
pub fn next_hop(home: &Path, ev: &Evidence, request_id: &str) -> Hop {
    // A notice is not a delivery between agents: the turn it opens continues at the watched send's hop,
    // so both cases read the ledger lines of one request id and add one.
    let (landed, mine): (&str, fn(&ledger::Entry) -> Option<&String>) = match &ev.trigger {
        Trigger::Human | Trigger::Unknown => return Hop::fresh(request_id),
        Trigger::Peer(id) => (id.as_str(), |e| e.target.as_ref()),
        Trigger::Notice(id) => (id.as_str(), |e| e.sender.as_ref()),
    };
    let unverified = |why| Hop {
        chain: landed.to_string(),
        hop: 2,
        sessions: Vec::new(),
        started: None,
        unverified: Some(why),
    };
    let lines: Vec<ledger::Entry> = ledger::read_ledger(
        home,
        &Filter {
            request_id: Some(landed.to_string()),
            ..Filter::default()
        },
    )
    .map(|r| r.entries)
    .unwrap_or_default()
    .into_iter()
    .filter(|e| places(e) && mine(e).is_some_and(|id| ev.me.contains(id)))
    .collect();
    let Some(first) = lines.first() else {
        return unverified(Unverified::UnknownRequest);
    };
    let chain_of = |e: &ledger::Entry| e.chain.clone().unwrap_or_else(|| landed.to_string());
    let chain = chain_of(first);
    if lines.iter().any(|e| chain_of(e) != chain) {
        return unverified(Unverified::Contradicted);
    }
    let ledger_hop = lines
        .iter()
        .map(|e| e.hop.unwrap_or(1).max(1))
        .max()
        .unwrap_or(1);
    let hop = ledger_hop.max(ev.framed_hop.unwrap_or(0));
    let mut sessions: Vec<String> = Vec::new();
    let mut started = None;
    // Only the chain's lines are copied out of the ledger (a reply used to copy every line: ~1 ms a
    // thousand).
    let of_chain = Filter {
        chain: Some(chain.clone()),
        ..Filter::default()
    };
    if let Ok(r) = ledger::read_ledger(home, &of_chain) {
        for e in r.entries.iter().filter(|e| e.counts_as_sent()) {
            if started.is_none() {
                started = Some(e.time.clone());
            }
            for s in [&e.sender, &e.target].into_iter().flatten() {
                if !sessions.contains(s) && sessions.len() < 8 {
                    sessions.push(s.clone());
                }
            }
        }
    }
    Hop {
        chain,
        hop: hop.saturating_add(1),
        sessions,
        started,
        unverified: None,
    }
}

/// Most sessions of a chain whose logs the human-reset check reads.
const MAX_RESET_SESSIONS: usize = 8;

/// Did a human write in a session of `chain` after the chain reached it? For each session the chain
/// delivered into (its first delivery there, from the ledger), the session's log (`store`) is searched for
/// a human message — a conversation `user` message that is not one of our deliveries — with a later seq.
/// Read only when a send would pass the limit, so the normal path never opens another session's log.
pub fn human_spoke_in_chain(home: &Path, chain: &str) -> bool {
    use store::events::Role;
    use store::fold::Class;
    use store::Fate;
    use store::{self, Lookup};
    let of_chain = Filter {
        chain: Some(chain.to_string()),
        ..Filter::default()
    };
    let Ok(read) = ledger::read_ledger(home, &of_chain) else {
        return false;
    };
    let mut first: Vec<(&str, &str)> = Vec::new();
    for e in read
        .entries
        .iter()
        .filter(|e| e.counts_as_sent() && e.chain.as_deref() == Some(chain))
    {
        if let (Some(t), Some(rid)) = (e.target.as_deref(), e.request_id.as_deref()) {
            if !first.iter().any(|(x, _)| *x == t) && first.len() < MAX_RESET_SESSIONS {
                first.push((t, rid));
            }
        }
    }
    first.iter().any(|(session, rid)| {
        let Some(Fate::Landed { seq, .. }) = store::find_request(home, session, rid) else {
            return false;
        };
        let Lookup::Found(st) = store::load_session(home, session) else {
            return false;
        };
        let spoke = st.fold.surface.iter().any(|n| {
            n.seq > seq
                && n.role == Role::User
                && n.class == Class::Conversation
                && n.request.is_none()
                && &*n.label == "user"
        });
        spoke
    })
}

/// `Err(hop)` when this send would pass the limit (`max_hops` 0: the guard is off). A chain in which a
/// human has written since it reached that session (`human_spoke_in_chain`) is over: this send opens a new
/// one. An [`Unverified`] trigger counts as at the limit: refused until a human writes in the caller's
/// session (its next turn is then the human's).
pub fn check(home: &Path, ev: &Evidence, request_id: &str, max_hops: u32) -> Result<Hop, Hop> {
    let mut h = next_hop(home, ev, request_id);
    if max_hops == 0 {
        return Ok(h);
    }
    if h.unverified.is_some() {
        h.hop = h.hop.max(max_hops.saturating_add(1));
        return Err(h);
    }
    if h.hop > max_hops {
        if human_spoke_in_chain(home, &h.chain) {
            return Ok(Hop::fresh(request_id));
        }
        Err(h)
    } else {
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Entry;

    fn ev(me: &str, t: Trigger) -> Evidence {
        Evidence::new(me, t)
    }

    fn user(rpc: Option<&str>, text: &str) -> TurnMessage {
        TurnMessage {
            kind: Some("user".into()),
            rpc_id: rpc.map(str::to_string),
            text: Some(text.into()),
            ..TurnMessage::default()
        }
    }

    fn line(
        home: &Path,
        sender: &str,
        target: &str,
        rid: &str,
        chain: &str,
        hop: u32,
        outcome: &str,
    ) {
        let mut e = Entry::new(
            1_000,
            Some(sender),
            Some(target),
            "sessions_send",
            Some("queue"),
            Some(rid),
            outcome.to_string().into(),
            Some("x"),
        );
        e.chain = Some(chain.into());
        e.hop = Some(hop);
        ledger::append(home, &e).unwrap();
    }

    #[test]
    fn the_newest_human_or_delivery_decides_and_injected_context_is_skipped() {
        let peer = "dsh-session-mail:00000000-0000-4000-8000-000000000001";
        let t = vec![
            user(None, "do it"),
            user(Some(peer), "Cross-session message…"),
        ];
        assert_eq!(trigger(Some(&t)), Trigger::Peer(peer.into()));
        let t = vec![user(Some(peer), "x"), user(Some("client-7"), "human again")];
        assert_eq!(trigger(Some(&t)), Trigger::Human);
        let t = vec![
            user(Some(peer), "x"),
            user(None, "Current runtime context. cwd=/w"),
        ];
        assert_eq!(trigger(Some(&t)), Trigger::Peer(peer.into()));
        let t = vec![
            user(Some(peer), "x"),
            TurnMessage {
                kind: Some("plugin".into()),
                plugin: Some("plan-mode".into()),
                ..TurnMessage::default()
            },
        ];
        assert_eq!(trigger(Some(&t)), Trigger::Peer(peer.into()));
        let n = TurnMessage {
            kind: Some("plugin".into()),
            plugin: Some("dsh-session-mail".into()),
            rpc_id: Some(format!("{NOTICE_PREFIX}{peer}")),
            ..TurnMessage::default()
        };
        assert_eq!(
            trigger(Some(std::slice::from_ref(&n))),
            Trigger::Notice(peer.into())
        );
        // another plugin cannot pose as our notice
        let forged = TurnMessage {
            plugin: Some("other".into()),
            ..n
        };
        assert_eq!(trigger(Some(&[forged])), Trigger::Human);
        assert_eq!(trigger(None), Trigger::Unknown);
        assert_eq!(trigger(Some(&[])), Trigger::Human);
    }

    #[test]
    fn hops_follow_the_ledger_across_sessions_and_a_human_opens_a_new_chain() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let r1 = "dsh-session-mail:00000000-0000-4000-8000-0000000000a1";
        let r2 = "dsh-session-mail:00000000-0000-4000-8000-0000000000a2";
        let r3 = "dsh-session-mail:00000000-0000-4000-8000-0000000000a3";
        line(h, "P", "Q", r1, r1, 1, "accepted");
        line(h, "Q", "R", r2, r1, 2, "accepted");
        line(h, "R", "P", r3, r1, 3, "accepted");
        // P's turn was opened by R's delivery: the cycle continues chain r1 at hop 4
        let got = check(
            h,
            &ev("P", Trigger::Peer(r3.into())),
            "dsh-session-mail:new",
            4,
        )
        .unwrap();
        assert_eq!((got.chain.as_str(), got.hop), (r1, 4));
        assert_eq!(got.sessions, vec!["P", "Q", "R"]);
        // one more would be hop 5: refused at maxRelayHops 4, allowed when the guard is off
        line(h, "P", "Q", "dsh-session-mail:x4", r1, 4, "accepted");
        let refused = check(
            h,
            &ev("Q", Trigger::Peer("dsh-session-mail:x4".into())),
            "n",
            4,
        )
        .unwrap_err();
        assert_eq!(refused.hop, 5);
        assert!(check(
            h,
            &ev("Q", Trigger::Peer("dsh-session-mail:x4".into())),
            "n",
            0
        )
        .is_ok());
        // a human message opens a new chain at once, whatever happened before
        let fresh = check(h, &ev("Q", Trigger::Human), "dsh-session-mail:mine", 4).unwrap();
        assert_eq!(
            (fresh.chain.as_str(), fresh.hop),
            ("dsh-session-mail:mine", 1)
        );
        // a delivery the ledger does not know (a refused line places nothing in a chain) counts as at
        // the limit (issue 16 #3 b), and with the guard off it is let through
        line(h, "Q", "P", "dsh-session-mail:rf", r1, 9, "refused:budget");
        let unknown = check(
            h,
            &ev("P", Trigger::Peer("dsh-session-mail:rf".into())),
            "n",
            4,
        )
        .unwrap_err();
        assert_eq!(
            (unknown.hop, unknown.unverified),
            (5, Some(Unverified::UnknownRequest))
        );
        assert!(check(
            h,
            &ev("P", Trigger::Peer("dsh-session-mail:rf".into())),
            "n",
            0
        )
        .is_ok());
        // a real delivery claimed by a session it was not sent to is unknown there
        let stolen = check(h, &ev("R", Trigger::Peer(r1.into())), "n", 4).unwrap_err();
        assert_eq!(stolen.unverified, Some(Unverified::UnknownRequest));
        // a notice continues the watched send's chain at the same hop
        let n = check(h, &ev("Q", Trigger::Notice(r2.into())), "n", 4).unwrap();
        assert_eq!((n.chain.as_str(), n.hop), (r1, 3));
    }

    /// Issue 16 #3 (a): one appended line for the trigger with `hop: 0` used to reset the chain (the
    /// newest line won). The ledger's lines of one request id count by their highest hop, and never
    /// below the hop the host recorded in the delivered frame; lines that disagree about the chain are
    /// not believed.
    #[test]
    fn an_appended_ledger_line_cannot_lower_a_hop() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let r = |n: u32| format!("dsh-session-mail:00000000-0000-4000-8000-{n:012}");
        line(h, "A", "B", &r(1), &r(1), 1, "accepted");
        line(h, "B", "A", &r(2), &r(1), 2, "accepted");
        line(h, "A", "B", &r(3), &r(1), 3, "accepted");
        line(h, "B", "A", &r(4), &r(1), 4, "accepted");
        line(h, "B", "A", &r(4), &r(1), 0, "accepted");
        let got = check(h, &ev("A", Trigger::Peer(r(4))), "n", 4).unwrap_err();
        assert_eq!(
            (got.hop, got.unverified, got.chain.as_str()),
            (5, None, r(1).as_str())
        );
        // the host's record of the frame raises a hop the ledger understates
        let framed = Evidence {
            framed_hop: Some(4),
            ..ev("B", Trigger::Peer(r(3)))
        };
        assert_eq!(check(h, &framed, "n", 4).unwrap_err().hop, 5);
        let framed_low = Evidence {
            framed_hop: Some(1),
            ..ev("B", Trigger::Peer(r(3)))
        };
        assert_eq!(check(h, &framed_low, "n", 4).unwrap().hop, 4);
        // a line that moves the trigger to another chain: contradicted, at the limit, no human reset
        line(h, "A", "B", &r(3), &r(9), 1, "accepted");
        let c = check(h, &ev("B", Trigger::Peer(r(3))), "n", 4).unwrap_err();
        assert_eq!(c.unverified, Some(Unverified::Contradicted));
        // a held line places its request (approved, it lands with that id at that hop)
        line(h, "A", "B", &r(5), &r(5), 2, "held");
        assert_eq!(
            check(h, &ev("B", Trigger::Peer(r(5))), "n", 4).unwrap().hop,
            3
        );
    }

    #[test]
    fn a_human_writing_in_any_session_of_the_chain_after_it_arrived_there_resets_it() {
        use store::testgen::LogBuilder;
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let rid = |n: u32| format!("dsh-session-mail:00000000-0000-4000-8000-{n:012}");
        // A↔B ping-pong: four deliveries of chain r1, the last one into A
        line(h, "session-a", "session-b", &rid(1), &rid(1), 1, "accepted");
        line(h, "session-b", "session-a", &rid(2), &rid(1), 2, "accepted");
        line(h, "session-a", "session-b", &rid(3), &rid(1), 3, "accepted");
        line(h, "session-b", "session-a", &rid(4), &rid(1), 4, "accepted");
        let write = |id: &str, b: &LogBuilder| {
            let dir = h.join("sessions").join("-w").join(id);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("session.jsonl"), b.text()).unwrap();
        };
        let mut a = LogBuilder::v0("session-a", Some("/w"), 1);
        a.prompt("human starts it", "client-1");
        a.end_turn();
        a.prompt("relay 2", &rid(2));
        a.end_turn();
        a.prompt("relay 4", &rid(4));
        a.end_turn();
        let mut b = LogBuilder::v0("session-b", Some("/w"), 2);
        b.prompt("relay 1", &rid(1));
        b.end_turn();
        b.prompt("relay 3", &rid(3));
        b.end_turn();
        write("session-a", &a);
        write("session-b", &b);
        // A's turn opened by hop 4 would make hop 5: refused, nobody spoke since the chain arrived
        assert!(!human_spoke_in_chain(h, &rid(1)));
        assert!(check(
            h,
            &ev("session-a", Trigger::Peer(rid(4))),
            "dsh-session-mail:next",
            4
        )
        .is_err());
        // B's human writes (after the chain reached B): the chain is over, the send opens a new one
        b.prompt("the human in B says: keep going with A", "client-9");
        b.end_turn();
        write("session-b", &b);
        assert!(human_spoke_in_chain(h, &rid(1)));
        let fresh = check(
            h,
            &ev("session-a", Trigger::Peer(rid(4))),
            "dsh-session-mail:next",
            4,
        )
        .unwrap();
        assert_eq!(
            (fresh.chain.as_str(), fresh.hop),
            ("dsh-session-mail:next", 1)
        );
    }
}
