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
//! At the limit, whether a human has written in the chain since ([`human_spoke_in_chain`]) is read from the
//! logs alone, walking the chain back from the caller's trigger: the ledger may name the chain's
//! deliveries, but a writer who can append to it could name any, so its lines only say where to look.

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
    let lines: Vec<ledger::Entry> = lines_of(home, landed)
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

/// Most session logs the human-reset walk opens.
const MAX_RESET_SESSIONS: usize = 8;
/// Most deliveries the walk goes back through (a chain past the limit has `maxRelayHops` + 1 of them).
const MAX_RESET_STEPS: usize = 32;
/// Most tool results of one sender's log (its newest) searched for the receipt of a send.
const MAX_RECEIPT_SCAN: usize = 512;
/// Most senders tried for one delivery (the frame's, then the ledger's).
const MAX_SENDERS: usize = 4;

/// What the human-reset walk found (`human_spoke_in_chain`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reset {
    /// A human wrote in `session` at `seq`, after the chain's delivery landed there at `after`: the chain
    /// is over.
    HumanSpoke {
        session: String,
        seq: u64,
        after: u64,
    },
    /// The walk reached the chain's first delivery (sent in a turn no delivery of ours opened) and no
    /// human wrote in a session of the chain since it arrived there.
    Silent { deliveries: usize },
    /// A step of the chain is not in the logs as the host recorded it: no reset (the guard fails closed).
    Unverified(Gap),
}

/// Where the walk back through a chain lost the host's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gap {
    /// `request` is not a landed message of the log of the session it was sent to (no such log, not
    /// flushed yet, or never delivered there).
    NotLanded { request: String },
    /// No sender's log has the tool result that minted `request` (the send's receipt ends with
    /// `request: <id>`), among its newest [`MAX_RECEIPT_SCAN`] tool results.
    NoReceipt { request: String },
    /// The sender's turn that sent `request` was compacted (or its tool results pruned) before the
    /// receipt: what opened it is no longer in the log.
    Rewritten { request: String },
    /// The frames' `relay: hop N` lines do not go down towards the chain's first delivery.
    HopOrder { request: String },
    /// The walk passed its bounds ([`MAX_RESET_STEPS`] deliveries, [`MAX_RESET_SESSIONS`] logs).
    TooLong,
}

impl Reset {
    pub fn resets(&self) -> bool {
        matches!(self, Reset::HumanSpoke { .. })
    }
}

/// The session logs the walk has opened (each at most once, at most [`MAX_RESET_SESSIONS`]).
struct Logs<'h> {
    home: &'h Path,
    open: Vec<(String, Option<store::StoredSession>)>,
}

impl Logs<'_> {
    fn get(&mut self, id: &str) -> Result<Option<&store::StoredSession>, Gap> {
        if let Some(i) = self.open.iter().position(|(x, _)| x == id) {
            return Ok(self.open[i].1.as_ref());
        }
        if self.open.len() >= MAX_RESET_SESSIONS {
            return Err(Gap::TooLong);
        }
        let st = match store::load_session(self.home, id) {
            store::Lookup::Found(st) => Some(st),
            _ => None,
        };
        self.open.push((id.to_string(), st));
        Ok(self.open.last().and_then(|(_, s)| s.as_ref()))
    }
}

/// The texts of the events at `wanted` in `st`'s log (every `text` string of the event, joined by newlines).
pub(crate) fn texts(
    st: &store::StoredSession,
    wanted: &[(u64, store::frames::Loc)],
) -> Vec<(u64, String)> {
    fn collect(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("text", serde_json::Value::String(t)) => {
                            out.push_str(t);
                            out.push('\n');
                        }
                        _ => collect(x, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
            _ => {}
        }
    }
    let src = store::log::Source::File {
        path: &st.log.path,
        enc: st.log.enc,
    };
    let mut got: Vec<(u64, String)> = store::log::fetch_events(&src, wanted)
        .into_iter()
        .map(|(seq, ev)| {
            let mut s = String::new();
            if let Some(d) = ev.get("data") {
                collect(d, &mut s);
            }
            (seq, s)
        })
        .collect();
    got.sort_unstable_by_key(|(seq, _)| *seq);
    got
}

/// The sender a delivered text names: the frame's `from-session: <id> (…)` line (its head only) or the
/// From header's `From <id> ：`.
fn named_sender(text: &str) -> Option<&str> {
    if let Some(head) = text
        .strip_prefix(crate::mail::FRAME_TITLE)
        .and_then(|h| h.strip_prefix('\n'))
    {
        let head = &head[..head.find(crate::mail::FRAME_BEGIN).unwrap_or(0)];
        return head
            .lines()
            .find_map(|l| l.strip_prefix("from-session: "))
            .and_then(|r| r.split_once(" (").map(|(id, _)| id));
    }
    let first = text.lines().next()?;
    first
        .strip_prefix("From ")?
        .strip_suffix(&format!(" {}", crate::mail::HEADER_COLON))
}

/// What opened (or last fed) a turn, as [`deciding`] reads it, from a log's surface.
enum Opened {
    Human,
    Peer(String),
    Notice(String),
}

/// A human message of the log after `seq`: a conversation `user` message that is not one of our deliveries.
fn human_after(fold: &store::Fold, seq: u64) -> Option<u64> {
    use store::events::Role;
    use store::fold::Class;
    fold.surface
        .iter()
        .rev()
        .take_while(|n| n.seq > seq)
        .find(|n| {
            n.role == Role::User
                && n.class == Class::Conversation
                && n.request.is_none()
                && &*n.label == "user"
        })
        .map(|n| n.seq)
}

/// The first of `candidates` (session ids) whose log has `rid` landed: (session, seq, turn).
fn landed_in(
    logs: &mut Logs<'_>,
    candidates: &[String],
    rid: &str,
) -> Result<Option<(String, u64, Option<u64>)>, Gap> {
    for c in candidates {
        let Some(st) = logs.get(c)? else { continue };
        if let Some((seq, turn)) = st.fold.requests.get(rid).and_then(|t| t.landed) {
            return Ok(Some((c.clone(), seq, turn)));
        }
    }
    Ok(None)
}

/// Did a human write in a session of the chain that opened the caller's turn, after the chain reached it?
///
/// The ledger's lines are claims (issue 16: a writer who can append to it could name any old delivery
/// as part of a chain), so the chain is walked back from the caller's trigger through what the host
/// recorded, one delivery at a time: the delivery landed in its target's log (a human `user` message
/// there after it ends the chain); its sender — the one its frame or From header names, else one the
/// ledger names, each believed only through the next fact — has in its own log the tool result that
/// minted that request id (the send's receipt ends `request: <id>`); the newest human message, delivery
/// of ours or idle notice of ours before that receipt in the same turn is what opened the sender's turn
/// ([`deciding`]'s rule): a human (or nothing of ours) is the chain's first delivery, a delivery of ours
/// the step before. The frames' `relay: hop N` lines must go down along the way. Anything the logs do
/// not show is [`Reset::Unverified`]: no reset. Read only when a send would pass the limit.
pub fn human_spoke_in_chain(home: &Path, ev: &Evidence) -> Reset {
    let mut logs = Logs {
        home,
        open: Vec::new(),
    };
    walk(&mut logs, ev).unwrap_or_else(Reset::Unverified)
}

/// The ledger's lines of one request id (none when the ledger cannot be read: the walk then finds no
/// sender or target through it).
fn lines_of(home: &Path, rid: &str) -> Vec<ledger::Entry> {
    let filter = Filter {
        request_id: Some(rid.to_string()),
        ..Filter::default()
    };
    ledger::read_ledger(home, &filter)
        .map(|r| r.entries)
        .unwrap_or_default()
}

fn walk(logs: &mut Logs<'_>, ev: &Evidence) -> Result<Reset, Gap> {
    // The targets a notice's watched send went to: the ledger's claim, checked by the landing.
    let watched_targets = |home: &Path, rid: &str, senders: &[String]| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in lines_of(home, rid) {
            if places(&e) && e.sender.as_ref().is_some_and(|s| senders.contains(s)) {
                if let Some(t) = e.target {
                    if !out.contains(&t) && out.len() < MAX_SENDERS {
                        out.push(t);
                    }
                }
            }
        }
        out
    };
    let home = logs.home;
    let (mut targets, mut rid) = match &ev.trigger {
        Trigger::Peer(id) => (ev.me.clone(), id.clone()),
        Trigger::Notice(w) => (watched_targets(home, w, &ev.me), w.clone()),
        Trigger::Human | Trigger::Unknown => return Ok(Reset::Silent { deliveries: 0 }),
    };
    let mut above: Option<u32> = None;
    for step in 0..MAX_RESET_STEPS {
        let Some((target, seq, _)) = landed_in(logs, &targets, &rid)? else {
            return Err(Gap::NotLanded { request: rid });
        };
        let Some(st) = logs.get(&target)? else {
            return Err(Gap::NotLanded { request: rid });
        };
        if let Some(h) = human_after(&st.fold, seq) {
            return Ok(Reset::HumanSpoke {
                session: target,
                seq: h,
                after: seq,
            });
        }
        // The delivered text as the host recorded it: its hop and the sender it names.
        let node = st.fold.surface.iter().rev().find(|n| n.seq == seq);
        let delivered = node
            .map(|n| texts(st, &[(n.seq, n.loc)]))
            .and_then(|t| t.into_iter().next())
            .map(|(_, t)| t)
            .unwrap_or_default();
        let hop = crate::mail::framed_hop(&delivered);
        if let (Some(h), Some(a)) = (hop, above) {
            if h >= a {
                return Err(Gap::HopOrder { request: rid });
            }
        }
        if hop == Some(1) {
            return Ok(Reset::Silent {
                deliveries: step + 1,
            });
        }
        above = hop.or(above);
        let mut senders: Vec<String> = named_sender(&delivered)
            .map(str::to_string)
            .into_iter()
            .collect();
        for e in lines_of(home, &rid) {
            if places(&e) && e.target.as_deref() == Some(target.as_str()) {
                if let Some(s) = e.sender {
                    if !senders.contains(&s) && senders.len() < MAX_SENDERS {
                        senders.push(s);
                    }
                }
            }
        }
        let mut found = None;
        for s in &senders {
            if s == &target {
                continue;
            }
            let Some(sl) = logs.get(s)? else { continue };
            if let Some(at) = receipt_in(sl, &rid) {
                found = Some((s.clone(), at));
                break;
            }
        }
        let Some((sender, (at, turn))) = found else {
            return Err(Gap::NoReceipt { request: rid });
        };
        let Some(sl) = logs.get(&sender)? else {
            return Err(Gap::NoReceipt { request: rid });
        };
        match opened_before(sl, at, turn) {
            None => return Err(Gap::Rewritten { request: rid }),
            Some(Opened::Human) => {
                return Ok(Reset::Silent {
                    deliveries: step + 1,
                })
            }
            Some(Opened::Peer(d)) => {
                targets = vec![sender];
                rid = d;
            }
            Some(Opened::Notice(w)) => {
                targets = watched_targets(home, &w, std::slice::from_ref(&sender));
                rid = w;
            }
        }
    }
    Err(Gap::TooLong)
}

/// The seq (and turn) of the oldest of the newest [`MAX_RECEIPT_SCAN`] tool results of `st`'s log whose
/// text has the line `request: <rid>` (the first time the id shows is the send that minted it).
fn receipt_in(st: &store::StoredSession, rid: &str) -> Option<(u64, Option<u64>)> {
    let wanted: Vec<(u64, store::frames::Loc)> = st
        .fold
        .surface
        .iter()
        .rev()
        .filter(|n| n.label.starts_with("tool:"))
        .take(MAX_RECEIPT_SCAN)
        .map(|n| (n.seq, n.loc))
        .collect();
    let line = format!("request: {rid}");
    let seq = texts(st, &wanted)
        .into_iter()
        .find(|(_, t)| t.lines().any(|l| l.trim_end() == line))
        .map(|(seq, _)| seq)?;
    Some((seq, turn_of(st, seq)))
}

/// The `turn` a wrapped event (`tool/result {turn, step, message}`) states.
fn turn_of(st: &store::StoredSession, seq: u64) -> Option<u64> {
    let n = st.fold.surface.iter().rev().find(|n| n.seq == seq)?;
    let src = store::log::Source::File {
        path: &st.log.path,
        enc: st.log.enc,
    };
    store::log::fetch_events(&src, &[(n.seq, n.loc)])
        .get(&seq)?
        .get("data")?
        .get("turn")?
        .as_u64()
}

/// What opened the turn of `st`'s log that holds `at`, by [`deciding`]'s rule: the newest human message,
/// delivery of ours or notice of ours before `at` (a delivery or notice counts only when it landed in
/// `turn`, when the log states both). `None` when the surface was rewritten (a compaction checkpoint or
/// a pruned tool result) between that message and `at`, or before `at` with no such message after it.
fn opened_before(st: &store::StoredSession, at: u64, turn: Option<u64>) -> Option<Opened> {
    use store::fold::Class;
    let ours = format!("plugin:{}", base::names::DIR_NAME);
    for n in st.fold.surface.iter().rev().skip_while(|n| n.seq >= at) {
        if n.replaced {
            return None;
        }
        let rpc = n.request.as_deref();
        let in_turn = |rid: &str| {
            let landed = st.fold.requests.get(rid).and_then(|t| t.landed);
            match (landed.and_then(|l| l.1), turn) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
        };
        if let Some(watched) = rpc.and_then(|r| r.strip_prefix(NOTICE_PREFIX)) {
            if n.label.starts_with(&ours) {
                return Some(if in_turn(rpc.unwrap_or("")) {
                    Opened::Notice(watched.to_string())
                } else {
                    Opened::Human
                });
            }
            continue;
        }
        if &*n.label != "user" || n.class != Class::Conversation {
            continue;
        }
        return Some(match rpc {
            Some(r) if in_turn(r) => Opened::Peer(r.to_string()),
            Some(_) => Opened::Human,
            None => Opened::Human,
        });
    }
    Some(Opened::Human)
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
        if human_spoke_in_chain(home, ev).resets() {
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

    /// The logs of a real chain, as the host records them: each delivery lands in its target's log as
    /// the framed text the sender's plugin built (hop N in its `relay:` line), and the sender's log
    /// has the tool result whose receipt ends `request: <id>` in the turn that delivery opened.
    struct Chain {
        home: tempfile::TempDir,
        logs: Vec<(String, store::testgen::LogBuilder)>,
    }

    impl Chain {
        fn new(sessions: &[&str]) -> Chain {
            let logs = sessions
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    (
                        s.to_string(),
                        store::testgen::LogBuilder::v0(s, Some("/w"), i as u64 + 1),
                    )
                })
                .collect();
            Chain {
                home: tempfile::tempdir().unwrap(),
                logs,
            }
        }
        fn log(&mut self, s: &str) -> &mut store::testgen::LogBuilder {
            &mut self.logs.iter_mut().find(|(x, _)| x == s).unwrap().1
        }
        fn human(&mut self, s: &str, text: &str) {
            let b = self.log(s);
            b.prompt(text, "client-7");
        }
        /// `from` (in its current turn) sends `rid` to `to` at `hop`: its receipt, the ledger line, the landing.
        fn send(&mut self, from: &str, to: &str, rid: &str, chain: &str, hop: u32) {
            let receipt = format!("accepted for {to} (queued for the next turn).\nrequest: {rid}");
            let call = format!("call-{rid}");
            self.log(from)
                .tool_round(&call, "sessions_send", "{}", &receipt, "p", "m");
            self.log(from).end_turn();
            line(self.home.path(), from, to, rid, chain, hop, "accepted");
            let text = crate::mail::frame(from, Some("t"), "queue", Some((hop, 4)), "go on");
            self.log(to).prompt(&text, rid);
        }
        fn write(&self) {
            for (id, b) in &self.logs {
                let dir = self.home.path().join("sessions").join("-w").join(id);
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("session.jsonl"), b.text()).unwrap();
            }
        }
    }

    fn rid(n: u32) -> String {
        format!("dsh-session-mail:00000000-0000-4000-8000-{n:012}")
    }

    /// A↔B ping-pong: the human asks A, four deliveries of chain r1 follow, the last one into A.
    fn ping_pong() -> Chain {
        let mut c = Chain::new(&["session-a", "session-b", "session-c"]);
        c.ping_pong();
        c
    }

    impl Chain {
        /// The human asks A, then four deliveries of chain r1 between A and B, the last one into A.
        fn ping_pong(&mut self) {
            self.human("session-a", "human starts it");
            self.send("session-a", "session-b", &rid(1), &rid(1), 1);
            self.send("session-b", "session-a", &rid(2), &rid(1), 2);
            self.send("session-a", "session-b", &rid(3), &rid(1), 3);
            self.send("session-b", "session-a", &rid(4), &rid(1), 4);
            self.write();
        }
    }

    #[test]
    fn a_human_writing_in_any_session_of_the_chain_after_it_arrived_there_resets_it() {
        let mut c = ping_pong();
        let h = c.home.path().to_path_buf();
        let at_a = ev("session-a", Trigger::Peer(rid(4)));
        // A's turn opened by hop 4 would make hop 5: refused, nobody spoke since the chain arrived
        assert_eq!(
            human_spoke_in_chain(&h, &at_a),
            Reset::Silent { deliveries: 4 }
        );
        assert!(check(&h, &at_a, "dsh-session-mail:next", 4).is_err());
        // B's human writes (after the chain reached B): the chain is over, the send opens a new one
        c.human("session-b", "the human in B says: keep going with A");
        c.write();
        assert!(matches!(
            human_spoke_in_chain(&h, &at_a),
            Reset::HumanSpoke { ref session, .. } if session == "session-b"
        ));
        let fresh = check(&h, &at_a, "dsh-session-mail:next", 4).unwrap();
        assert_eq!(
            (fresh.chain.as_str(), fresh.hop),
            ("dsh-session-mail:next", 1)
        );
    }

    /// The human reset used to take the ledger's `chain` field to pick the deliveries whose logs it read:
    /// one appended line naming an old delivery into session C (a human wrote in C after it landed there,
    /// long before this chain) as part of chain r1 reset r1 at its limit, as often as the writer liked.
    /// The chain is now walked back through the logs from the caller's trigger; the forged line is on no
    /// path the host recorded, so nothing resets.
    #[test]
    fn a_forged_chain_line_does_not_reset_the_chain() {
        let mut c = Chain::new(&["session-a", "session-b", "session-c"]);
        // long ago: A mailed C (chain r9), and C's human wrote afterwards
        c.human("session-a", "tell C");
        c.send("session-a", "session-c", &rid(9), &rid(9), 1);
        c.log("session-c").end_turn();
        c.human("session-c", "the human in C");
        c.log("session-c").end_turn();
        c.ping_pong();
        let h = c.home.path().to_path_buf();
        let at_a = ev("session-a", Trigger::Peer(rid(4)));
        assert!(check(&h, &at_a, "dsh-session-mail:next", 4).is_err());
        // the writer appends: r9 was chain r1's, into C (and r4 came from C)
        line(
            &h,
            "session-a",
            "session-c",
            &rid(9),
            &rid(1),
            2,
            "accepted",
        );
        line(
            &h,
            "session-c",
            "session-a",
            &rid(4),
            &rid(1),
            4,
            "accepted",
        );
        let refused = check(&h, &at_a, "dsh-session-mail:next", 4).unwrap_err();
        assert_eq!((refused.chain.as_str(), refused.hop), (rid(1).as_str(), 5));
        assert_eq!(
            human_spoke_in_chain(&h, &at_a),
            Reset::Silent { deliveries: 4 }
        );
    }

    /// Where the logs do not show a step of the chain, nothing resets (fail closed), and the gap is named.
    #[test]
    fn a_chain_the_logs_do_not_show_never_resets() {
        let mut c = Chain::new(&["session-a", "session-b", "session-c"]);
        c.human("session-a", "human starts it");
        c.send("session-a", "session-b", &rid(1), &rid(1), 1);
        c.send("session-b", "session-a", &rid(2), &rid(1), 2);
        // a delivery of r1 into A that no log's tool result minted (a planted envelope the writer vouched
        // for in the ledger), C's human having written after it landed
        line(
            c.home.path(),
            "session-c",
            "session-a",
            &rid(5),
            &rid(1),
            5,
            "accepted",
        );
        let text = crate::mail::frame("session-c", None, "queue", Some((5, 4)), "x");
        c.log("session-a").prompt(&text, &rid(5));
        c.human("session-c", "the human in C");
        c.write();
        let h = c.home.path().to_path_buf();
        let at_a = ev("session-a", Trigger::Peer(rid(5)));
        assert_eq!(
            human_spoke_in_chain(&h, &at_a),
            Reset::Unverified(Gap::NoReceipt { request: rid(5) })
        );
        assert!(check(&h, &at_a, "n", 4).is_err());
        // a trigger that landed in no log of the caller's
        let nowhere = ev("session-b", Trigger::Peer(rid(2)));
        assert_eq!(
            human_spoke_in_chain(&h, &nowhere),
            Reset::Unverified(Gap::NotLanded { request: rid(2) })
        );
        // a turn a notice opened walks back from the watched send (r1, sent by A into B)
        let notice = ev("session-a", Trigger::Notice(rid(1)));
        assert_eq!(
            human_spoke_in_chain(&h, &notice),
            Reset::Silent { deliveries: 1 }
        );
    }
}
