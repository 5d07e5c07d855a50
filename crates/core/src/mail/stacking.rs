//! The stacking guard (seed 003: "do not queue several messages before the other side answers; they stack
//! up in its next-turn inbox"). A queue send (mode `queue`, `urgent: false`) is refused while the target
//! still holds `maxStackedPerSender` (default 2) or more unclaimed next-turn messages from the same
//! sender. Urgent / steer sends are never refused by it: a correction must still get through.
//!
//! Which pending items are this sender's: the request ids this sender sent to this target according to the
//! audit ledger (accepted or may-have-landed, the last [`LOOKBACK_MS`]), intersected with
//! - a live target: its pending next-turn request ids as the shim reports them
//!   (`LiveSession::pending_next_turn_rpc_ids`; a shim that does not fill it yet but reports
//!   `pendingNextTurn > 0` falls back to `pendingRpcIds`, both queues — at worst a pending steer of the
//!   same sender counts as well);
//! - a cold target: the request ids its log shows as queued next-turn and not landed
//!   (`store::find_request` → `Fate::Queued { target: "next-turn" }`; a canceled insertion is not waiting), for the newest [`COLD_LOOKUPS`]
//!   ids only (each lookup reads the log).

use std::path::Path;

use crate::config::Config;
use crate::ledger::{self, Filter};
use crate::request::LiveSession;
use store::{self, Fate};

/// How far back the ledger is searched for this sender's earlier sends.
pub const LOOKBACK_MS: i64 = 24 * 60 * 60 * 1000;
/// At most this many of the newest ids are looked up in a cold target's log.
pub const COLD_LOOKUPS: usize = 16;

/// A refused queue send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stacked {
    /// This sender's request ids still waiting in the target's next-turn inbox, newest first.
    pub waiting: Vec<String>,
    pub limit: u32,
}

/// This sender's ids (newest first, from the ledger) that are still pending next-turn in the target.
pub fn pending_from_sender(
    sent_newest_first: &[String],
    live: Option<&LiveSession>,
    cold_lookup: impl Fn(&str) -> Option<Fate>,
) -> Vec<String> {
    match live {
        Some(l) => {
            let pending: &[String] = if l.pending_next_turn_rpc_ids.is_empty() && l.pending_next_turn > 0 {
                &l.pending_rpc_ids
            } else {
                &l.pending_next_turn_rpc_ids
            };
            sent_newest_first.iter().filter(|id| pending.contains(id)).cloned().collect()
        }
        None => sent_newest_first
            .iter()
            .take(COLD_LOOKUPS)
            .filter(|id| matches!(cold_lookup(id), Some(Fate::Queued { target, .. }) if target == "next-turn"))
            .cloned()
            .collect(),
    }
}

/// The pure rule.
pub fn decide(waiting: Vec<String>, urgent: bool, limit: u32) -> Result<(), Stacked> {
    if urgent || limit == 0 || waiting.len() < limit as usize {
        return Ok(());
    }
    Err(Stacked { waiting, limit })
}

/// Check one send. A ledger that cannot be read lets the send through (the budget's note says so).
pub fn check(
    home: &Path,
    sender: &str,
    target: &str,
    urgent: bool,
    live: Option<&LiveSession>,
    now_ms: i64,
    cfg: &Config,
) -> Result<(), Stacked> {
    let limit = cfg.max_stacked_per_sender;
    if urgent || limit == 0 {
        return Ok(());
    }
    // A live target with nothing of this plugin pending next-turn needs no ledger read.
    if let Some(l) = live {
        let ours = |ids: &[String]| {
            ids.iter()
                .any(|i| i.starts_with(crate::mail::REQUEST_ID_PREFIX))
        };
        if !(ours(&l.pending_next_turn_rpc_ids)
            || (l.pending_next_turn > 0 && ours(&l.pending_rpc_ids)))
        {
            return Ok(());
        }
    }
    let filter = Filter {
        sender: Some(sender.to_string()),
        target: Some(target.to_string()),
        since_ms: Some(now_ms.saturating_sub(LOOKBACK_MS)),
        ..Filter::default()
    };
    let Ok(read) = ledger::read_ledger(home, &filter) else {
        return Ok(());
    };
    let mut ids: Vec<String> = Vec::new();
    for e in read.entries.iter().rev().filter(|e| e.counts_as_sent()) {
        if let Some(id) = &e.request_id {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
    }
    // (not live here: the newest ids are looked up in the target's log, found and folded once for all)
    let fates = match live {
        Some(_) => Vec::new(),
        None => {
            let newest: Vec<String> = ids.iter().take(COLD_LOOKUPS).cloned().collect();
            let fates = store::find_requests(home, target, &newest);
            newest.into_iter().zip(fates).collect::<Vec<_>>()
        }
    };
    let waiting = pending_from_sender(&ids, live, |id| {
        fates
            .iter()
            .find(|(i, _)| i == id)
            .and_then(|(_, f)| f.clone())
    });
    decide(waiting, urgent, limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Entry;

    const NOW: i64 = 1_761_741_296_789;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn live_with(next_turn: &[&str]) -> LiveSession {
        LiveSession {
            id: "session-b".into(),
            status: "running".into(),
            pending_rpc_ids: ids(next_turn),
            pending_next_turn: next_turn.len(),
            pending_next_turn_rpc_ids: ids(next_turn),
            ..LiveSession::default()
        }
    }

    #[test]
    fn live_intersection_counts_only_this_senders_next_turn_items() {
        let sent = ids(&[
            "dsh-session-mail:3",
            "dsh-session-mail:2",
            "dsh-session-mail:1",
        ]);
        let mut l = live_with(&[
            "dsh-session-mail:1",
            "dsh-session-mail:3",
            "dsh-session-mail:other",
            "22915",
        ]);
        // a pending steer of ours sits in next-step only: not counted
        l.pending_rpc_ids.push("dsh-session-mail:2".into());
        let w = pending_from_sender(&sent, Some(&l), |_| {
            panic!("no log lookups for a live target")
        });
        assert_eq!(w, ids(&["dsh-session-mail:3", "dsh-session-mail:1"]));
        assert_eq!(
            decide(w.clone(), false, 2),
            Err(Stacked {
                waiting: w.clone(),
                limit: 2
            })
        );
        assert_eq!(
            decide(w.clone(), true, 2),
            Ok(()),
            "urgent is never stacked"
        );
        assert_eq!(decide(w.clone(), false, 3), Ok(()));
        assert_eq!(decide(w, false, 0), Ok(()), "0 turns the guard off");
    }

    #[test]
    fn old_shim_without_next_turn_ids_falls_back_to_all_pending() {
        let sent = ids(&["dsh-session-mail:2", "dsh-session-mail:1"]);
        let mut l = live_with(&[]);
        l.pending_rpc_ids = ids(&["dsh-session-mail:1", "dsh-session-mail:2"]);
        l.pending_next_turn = 2;
        assert_eq!(pending_from_sender(&sent, Some(&l), |_| None).len(), 2);
        l.pending_next_turn = 0;
        assert!(pending_from_sender(&sent, Some(&l), |_| None).is_empty());
    }

    #[test]
    fn cold_target_uses_queued_next_turn_landings() {
        let sent = ids(&[
            "dsh-session-mail:5",
            "dsh-session-mail:4",
            "dsh-session-mail:3",
            "dsh-session-mail:2",
            "dsh-session-mail:1",
        ]);
        let look = |id: &str| match id {
            // Inserted, then canceled by the host: not waiting any more.
            "dsh-session-mail:5" => Some(Fate::Canceled {
                seq: 50,
                target: "next-turn".into(),
            }),
            "dsh-session-mail:4" => Some(Fate::Queued {
                seq: 40,
                target: "next-turn".into(),
            }),
            "dsh-session-mail:3" => Some(Fate::Queued {
                seq: 30,
                target: "next-step".into(),
            }),
            "dsh-session-mail:2" => Some(Fate::Landed {
                seq: 20,
                turn: Some(2),
            }),
            "dsh-session-mail:1" => Some(Fate::Queued {
                seq: 10,
                target: "next-turn".into(),
            }),
            _ => None,
        };
        let w = pending_from_sender(&sent, None, look);
        assert_eq!(w, ids(&["dsh-session-mail:4", "dsh-session-mail:1"]));
        assert!(decide(w, false, 2).is_err());
    }

    #[test]
    fn check_reads_this_senders_ids_from_the_ledger() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let add = |sender: &str, target: &str, rid: &str, outcome: &str| {
            let e = Entry::new(
                NOW,
                Some(sender),
                Some(target),
                "send_session_message",
                Some("queue"),
                Some(rid),
                outcome.into(),
                Some("x"),
            );
            ledger::append(h, &e).unwrap();
        };
        add("session-a", "session-b", "dsh-session-mail:1", "accepted");
        add(
            "session-a",
            "session-b",
            "dsh-session-mail:2",
            "may-have-landed",
        );
        add(
            "session-a",
            "session-b",
            "dsh-session-mail:3",
            "refused:rejected",
        );
        add("session-x", "session-b", "dsh-session-mail:9", "accepted");
        let cfg = Config::default();
        // the target holds 1, 2 (ours), 3 (refused: not ours to count), 9 (another sender)
        let l = live_with(&[
            "dsh-session-mail:1",
            "dsh-session-mail:2",
            "dsh-session-mail:3",
            "dsh-session-mail:9",
        ]);
        // a send from `sender` to session-b, whose live inbox is `l`, at `now`
        let to_b = |sender: &str, urgent: bool, l: &LiveSession, now: i64| {
            check(h, sender, "session-b", urgent, Some(l), now, &cfg)
        };
        let e = to_b("session-a", false, &l, NOW + 1000).unwrap_err();
        assert_eq!(
            e.waiting,
            ids(&["dsh-session-mail:2", "dsh-session-mail:1"])
        );
        assert!(to_b("session-a", true, &l, NOW + 1000).is_ok());
        // session-x has only one waiting
        assert!(to_b("session-x", false, &l, NOW + 1000).is_ok());
        // once the target claimed one, the next queue send passes
        let l = live_with(&["dsh-session-mail:2"]);
        assert!(to_b("session-a", false, &l, NOW + 1000).is_ok());
        // older than the lookback: forgotten
        let l = live_with(&["dsh-session-mail:1", "dsh-session-mail:2"]);
        assert!(to_b("session-a", false, &l, NOW + LOOKBACK_MS + 1).is_ok());
    }
}
