//! The receiving side's durable record of each send that arrived from a linked machine
//! (`machine/arrivals/<key>.json`): claimed (fsynced) before anything is delivered, then the answer
//! the send path gave. A request id seen again — the sender's retry after a timeout, its outbox
//! drained by another process, a replay — is answered from the record and delivered nothing; one
//! still in flight answers `busy` (the sender tries later); one whose process died between the claim
//! and the answer is settled by the target's log (landed there: accepted; else delivered again with
//! the same request id, which the host itself deduplicates).
//!
//! Records are bounded (≤ 64 KiB each, [`MAX_RECORDS`]) and kept [`KEEP_MS`] (longer than any outbox
//! lives), then swept.

use std::path::{Path, PathBuf};

use base::fsafe::{self, Follow};
use serde::{Deserialize, Serialize};

use crate::machine::wire::SendAnswer;
use crate::machine::MachineId;

/// Records kept at most (past it a new arrival answers `busy` until the sweep makes room).
pub const MAX_RECORDS: usize = 100_000;
/// How long a record is kept (7 days: the outbox gives up after `outboxTtlMs`, 24 h by default).
pub const KEEP_MS: i64 = 7 * 24 * 3600 * 1000;
/// A claim older than this without an answer was left by a process that died.
pub const STALE_CLAIM_MS: i64 = 120_000;

/// One arrival.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Arrival {
    pub request_id: String,
    pub from: MachineId,
    pub target: String,
    /// The foreign sender id.
    pub sender: String,
    pub claimed_at: i64,
    #[serde(default)]
    pub answer: Option<SendAnswer>,
}

/// What claiming a request id found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// First arrival: deliver it, then [`answer`].
    New,
    /// Answered before: answer the same, deliver nothing.
    Answered(SendAnswer),
    /// Another delivery of it is in flight (claimed at this time).
    InFlight(Arrival),
    /// Claimed long ago and never answered: its process died mid-delivery.
    Stale(Arrival),
    /// The id arrived before from another machine, or for another target: refused.
    Mismatch,
}

fn dir(home: &Path) -> PathBuf {
    super::dir(home).join("arrivals")
}
fn path(home: &Path, request_id: &str) -> PathBuf {
    dir(home).join(format!("{}.json", super::file_key(request_id)))
}

/// The record of `request_id`, if one exists and reads.
pub fn lookup(home: &Path, request_id: &str) -> Option<Arrival> {
    let (bytes, m) = fsafe::read_capped(&path(home, request_id), Follow::No, 64 * 1024).ok()?;
    if fsafe::foreign_owner(&m).is_some() {
        return None;
    }
    serde_json::from_slice::<Arrival>(&bytes)
        .ok()
        .filter(|a| a.request_id == request_id)
}

/// Claim `a.request_id` (written and fsynced before the caller delivers anything).
pub fn claim(home: &Path, a: &Arrival, now_ms: i64) -> std::io::Result<Claim> {
    let d = super::ensure(home, Some("arrivals"))?;
    let bytes = serde_json::to_vec(a).map_err(std::io::Error::other)?;
    let put = fsafe::Put {
        sync: true,
        replace: false,
    };
    match fsafe::write_private(&d, &path(home, &a.request_id), &bytes, put) {
        Ok(()) => Ok(Claim::New),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let Some(old) = lookup(home, &a.request_id) else {
                // there, but not a record of ours: never delivered over it
                return Ok(Claim::Mismatch);
            };
            if old.from != a.from || old.target != a.target || old.sender != a.sender {
                return Ok(Claim::Mismatch);
            }
            Ok(match old.answer {
                Some(ans) => Claim::Answered(ans),
                None if now_ms.saturating_sub(old.claimed_at) > STALE_CLAIM_MS => Claim::Stale(old),
                None => Claim::InFlight(old),
            })
        }
        Err(e) => Err(e),
    }
}

/// Record the answer given to `a` (replaces the claim, fsynced).
pub fn answer(home: &Path, a: &Arrival, ans: &SendAnswer) -> std::io::Result<()> {
    let d = super::ensure(home, Some("arrivals"))?;
    let mut rec = a.clone();
    rec.answer = Some(ans.clone());
    let bytes = serde_json::to_vec(&rec).map_err(std::io::Error::other)?;
    let put = fsafe::Put {
        sync: true,
        replace: true,
    };
    fsafe::write_private(&d, &path(home, &a.request_id), &bytes, put)
}

/// Retake a stale claim (its process died): the claim is renewed at `now_ms`.
pub fn renew(home: &Path, a: &Arrival, now_ms: i64) -> std::io::Result<()> {
    let d = super::ensure(home, Some("arrivals"))?;
    let mut rec = a.clone();
    rec.claimed_at = now_ms;
    let bytes = serde_json::to_vec(&rec).map_err(std::io::Error::other)?;
    let put = fsafe::Put {
        sync: true,
        replace: true,
    };
    fsafe::write_private(&d, &path(home, &a.request_id), &bytes, put)
}

/// Remove records older than [`KEEP_MS`] (at most `max_scan` names looked at). Returns how many
/// records are left among those scanned.
pub fn sweep(home: &Path, now_ms: i64, max_scan: usize) -> usize {
    let Ok(rd) = std::fs::read_dir(dir(home)) else {
        return 0;
    };
    let mut left = 0;
    for e in rd.flatten().take(max_scan) {
        let p = e.path();
        let old = e
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .is_some_and(|t| now_ms.saturating_sub(t.as_millis() as i64) > KEEP_MS);
        if old && e.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(p);
        } else {
            left += 1;
        }
    }
    left
}
