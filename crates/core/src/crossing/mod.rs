//! What crosses between linked machines, kept on disk under `dsh-session-mail/machine/` (issue 31):
//!
//! - [`foreign`] — the receiving side's record of which machine each foreign sender session id first
//!   came from (`foreign.json`, sealed): a reply goes back there, and no other machine may use the id.
//! - [`arrivals`] — the receiving side's durable record of every request id that arrived and what it
//!   answered (`arrivals/`): a send delivered again (a retry, the outbox) lands once.
//! - [`seen`] — the sending side's memory of which machine listed a session (a routing hint: a message
//!   for a machine that is offline waits in the outbox instead of being refused as not found).
//! - [`outbox`] — the sending side's messages for a machine that could not be reached (`outbox/`,
//!   fsynced before the receipt says so), delivered by a later drain or expired after `outboxTtlMs`.
//! - [`sent`] — the sending side's copy of each message it sent to a linked machine (`sent/<day>/`), shown
//!   to the human only when it hashes to the ledger line's `bodySha256` (the text lands in the far log).
//! - [`fates`] — the sending side's memory of what the far side answered about each such message (at the
//!   send, the outbox's delivery, the latest `verify`) or what its outbox says (`fates/<day>/`, sealed with
//!   `fates.key`): the mail page's fate for it, "as of" when it was answered.
//!
//! Every file here is read as hostile (bounded, no links, this user's, sealed where a forgery would
//! loosen anything) and a record that cannot be read or written fails closed.

pub mod arrivals;
pub mod fates;
pub mod foreign;
pub mod outbox;
pub mod seen;
pub mod sent;

use std::path::{Path, PathBuf};

/// `$DSH_HOME/dsh-session-mail/machine`.
pub fn dir(home: &Path) -> PathBuf {
    home.join("dsh-session-mail").join("machine")
}

/// Make (or check) `machine/<sub>` and the folders above it, private.
pub(crate) fn ensure(home: &Path, sub: Option<&str>) -> std::io::Result<PathBuf> {
    let plugin = home.join("dsh-session-mail");
    let m = dir(home);
    let mut levels = vec![plugin, m.clone()];
    let out = match sub {
        Some(s) => {
            let d = m.join(s);
            levels.push(d.clone());
            d
        }
        None => m,
    };
    base::fsafe::ensure_private_dirs(levels).map_err(|(_, e)| e)?;
    Ok(out)
}

/// A file name for `request_id` (hex SHA-256, 32 characters: a request id is never a path).
pub(crate) fn file_key(request_id: &str) -> String {
    crate::ledger::sha256_hex(request_id)[..32].to_string()
}

/// A linked machine's own budget used up (`budgetPerMachine` in the window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineBudget {
    pub machine: crate::machine::MachineId,
    pub sent: u32,
    pub limit: u32,
    pub window_secs: u64,
    /// When one more send from that machine may pass (ms since the epoch).
    pub next_at_ms: i64,
}

/// Why the machine budget could not be checked (it fails closed: the send is refused).
pub type Unchecked = crate::ledger::LedgerError;

/// The budget of all sessions of linked machine `m` together, on top of the per-pair and per-sender
/// ones: sends that arrived from it in the last `budgetWindowSecs` (accepted or may-have-landed, by the
/// ledger's `fromMachine`) must stay under `budgetPerMachine`. Off when either is 0.
pub fn machine_budget(
    home: &Path,
    m: &crate::machine::MachineId,
    now_ms: i64,
    cfg: &crate::config::Config,
) -> Result<(), Result<MachineBudget, Unchecked>> {
    let (limit, window_secs) = (cfg.budget_per_machine, u64::from(cfg.budget_window_secs));
    if limit == 0 || window_secs == 0 {
        return Ok(());
    }
    let window_ms = i64::try_from(window_secs * 1000).unwrap_or(i64::MAX);
    let since = now_ms.saturating_sub(window_ms);
    let filter = crate::ledger::Filter {
        since_ms: Some(since),
        ..Default::default()
    };
    let mut times = Vec::new();
    crate::ledger::scan_timed(home, &filter, |e, t| {
        if e.from_machine.as_deref() == Some(m.as_str()) && e.counts_as_sent() {
            times.push(t.unwrap_or(now_ms).min(now_ms));
        }
    })
    .map_err(Err)?;
    times.retain(|t| *t >= since);
    times.sort_unstable();
    let sent = u32::try_from(times.len()).unwrap_or(u32::MAX);
    if sent < limit {
        return Ok(());
    }
    // one more may pass once enough of the oldest have left the window
    let k = times.len() - limit as usize;
    Err(Ok(MachineBudget {
        machine: m.clone(),
        sent,
        limit,
        window_secs,
        next_at_ms: times[k].saturating_add(window_ms),
    }))
}

/// The hop an arriving message counts: the sender's, never below the highest hop this home's ledger
/// knows for its chain (a machine cannot lower a count by sending a smaller one). `None` chain: the
/// sender's hop as it is.
pub fn arriving_hop(home: &Path, chain: Option<&str>, hop: u32) -> u32 {
    let Some(chain) = chain else {
        return hop.max(1);
    };
    let filter = crate::ledger::Filter {
        chain: Some(chain.to_string()),
        ..Default::default()
    };
    let mut known = 0u32;
    let _ = crate::ledger::scan(home, &filter, |e| {
        if let Some(h) = e.hop {
            known = known.max(h);
        }
    });
    hop.max(known).max(1)
}
