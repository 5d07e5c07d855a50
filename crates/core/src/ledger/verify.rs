//! `verify`: where did a request id end up? The CLI's answer to "did my message land?".
//!
//! The first line is one of exactly three forms:
//! - `queued (seq N)` — inserted into the target's inbox (an `agent/inbox/spliced` insertion at seq N) and
//!   not landed yet;
//! - `landed at seq N (turn T)` — recorded as the `user/message` at seq N (`landed at seq N` when the turn
//!   is not known);
//! - `unknown` — the target's log does not show it (not delivered, claimed but discarded by a pre-step
//!   rejection, canceled, or the log has not caught up with the live session yet: it lags by ~200 ms).
//!
//! Further lines add what this plugin's own ledger knows about the id (who sent it, when, the outcome).
//! Claims are removals without an outcome in the host's log (session contract §5), so "claimed but not
//! landed" cannot be told apart from "canceled" here; only a landing is proof.

use std::path::Path;

use crate::store::{self, Landing};

use super::{read_ledger, Filter};

/// What the target's log says about a request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    Queued { seq: u64, target: String },
    Landed { seq: u64, turn: Option<u64> },
    Unknown,
}

impl Verified {
    /// The first line of [`verify`].
    pub fn line(&self) -> String {
        match self {
            Verified::Queued { seq, .. } => format!("queued (seq {seq})"),
            Verified::Landed { seq, turn: Some(t) } => format!("landed at seq {seq} (turn {t})"),
            Verified::Landed { seq, turn: None } => format!("landed at seq {seq}"),
            Verified::Unknown => "unknown".into(),
        }
    }
}

/// The status alone, from the store.
pub fn verify_status(home: &Path, session_id: &str, request_id: &str) -> Verified {
    status_from(store::find_request(home, session_id, request_id))
}

fn status_from(l: Option<Landing>) -> Verified {
    match l {
        Some(Landing::Queued { seq, target }) => Verified::Queued { seq, target },
        Some(Landing::Landed { seq, turn }) => Verified::Landed { seq, turn },
        None => Verified::Unknown,
    }
}

/// `queued (seq N)`, `landed at seq N (turn T)` or `unknown`, then detail lines.
pub fn verify(home: &Path, session_id: &str, request_id: &str) -> String {
    verify_with(home, session_id, request_id, store::find_request)
}

/// [`verify`] with the log lookup injected (tests, and the CLI once it has a live view).
pub fn verify_with(
    home: &Path,
    session_id: &str,
    request_id: &str,
    lookup: impl Fn(&Path, &str, &str) -> Option<Landing>,
) -> String {
    let status = status_from(lookup(home, session_id, request_id));
    let mut s = status.line();
    match &status {
        Verified::Queued { target, .. } => s.push_str(&format!(
            "\n{session_id} holds it in its {target} inbox; it has not landed yet."
        )),
        Verified::Landed { .. } => s.push_str(&format!(
            "\n{session_id} recorded it as a user message: the message reached that session's model."
        )),
        Verified::Unknown => s.push_str(&format!(
            "\nThe log of {session_id} does not show {request_id}: not delivered, discarded before it landed, or the log has not caught up yet."
        )),
    }
    let filter = Filter {
        request_id: Some(request_id.to_string()),
        ..Filter::default()
    };
    match read_ledger(home, &filter) {
        Ok(r) => {
            for e in &r.entries {
                s.push_str(&format!(
                    "\nledger: {} {} → {} via {} ({}): {}",
                    e.time,
                    e.sender.as_deref().unwrap_or("(no sender)"),
                    e.target.as_deref().unwrap_or("(no target)"),
                    e.tool,
                    e.mode.as_deref().unwrap_or("-"),
                    e.outcome.as_string()
                ));
                if e.target.as_deref().is_some_and(|t| t != session_id) {
                    s.push_str(&format!(
                        " (note: sent to {}, not to {session_id})",
                        e.target.as_deref().unwrap_or("")
                    ));
                }
            }
            if r.entries.is_empty() {
                s.push_str(
                    "\nledger: no attempt with this request id in this host's audit ledger.",
                );
            }
        }
        Err(why) => s.push_str(&format!("\nledger: not readable ({why})")),
    }
    s
}
