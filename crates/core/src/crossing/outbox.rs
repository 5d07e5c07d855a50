//! The sending side's outbox (`machine/outbox/<key>.json`): a send to a linked machine that could not
//! be reached, or whose answer never came, waits here — written and fsynced before the receipt says
//! so — until a drain (`remote::drain`, the binding's tick) delivers it with the same request id (the
//! far side lands it once: `crossing::arrivals`) or it expires after `outboxTtlMs` (then `verify` says
//! `expired`). The file is the whole truth about the message on this side, so it survives the process
//! that wrote it and whichever process holds the endpoint next.
//!
//! Bounded: [`MAX_PARCELS`] files (a full outbox refuses the send: nothing is accepted that could not
//! be kept), 64 KiB + the body per file, settled parcels swept after [`KEEP_SETTLED_MS`].

use std::path::{Path, PathBuf};

use base::fsafe::{self, Follow};
use serde::{Deserialize, Serialize};

use crate::machine::wire::{SendAnswer, SendReq};
use crate::machine::MachineId;

/// Most parcels (pending and settled) in one outbox.
pub const MAX_PARCELS: usize = 1024;
/// Settled parcels (delivered, expired) are kept this long for `verify`, then swept.
pub const KEEP_SETTLED_MS: i64 = 7 * 24 * 3600 * 1000;
const MAX_BYTES: u64 = 64 * 1024 + 4 * crate::machine::wire::MAX_BODY as u64;

/// Where a parcel is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum State {
    /// Waiting for its machine.
    Pending,
    /// The machine answered (what became of it there).
    #[serde(rename_all = "camelCase")]
    Delivered { answer: SendAnswer, at_ms: i64 },
    /// `outboxTtlMs` passed first: never delivered.
    #[serde(rename_all = "camelCase")]
    Expired { at_ms: i64 },
    /// The human unlinked the machine first: never delivered.
    #[serde(rename_all = "camelCase")]
    Unlinked { at_ms: i64 },
}

/// One message waiting for a machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Parcel {
    pub to: MachineId,
    /// The machine's name when it was sent (for the words; the id decides).
    pub name: String,
    pub req: SendReq,
    pub created_at: i64,
    pub expires_at: i64,
    pub state: State,
    #[serde(default)]
    pub attempts: u32,
}

impl Parcel {
    pub fn request_id(&self) -> &str {
        &self.req.request_id
    }
}

fn dir(home: &Path) -> PathBuf {
    super::dir(home).join("outbox")
}
fn path(home: &Path, request_id: &str) -> PathBuf {
    dir(home).join(format!("{}.json", super::file_key(request_id)))
}

/// Why a parcel was not kept.
#[derive(Debug)]
pub enum PutError {
    Full,
    Io(std::io::Error),
}

impl std::fmt::Display for PutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PutError::Full => write!(f, "the outbox holds {MAX_PARCELS} messages already"),
            PutError::Io(e) => write!(f, "the outbox could not be written: {e}"),
        }
    }
}

/// Keep `p` (fsynced; a parcel of the same request id already there is left as it is: `Ok`).
pub fn put(home: &Path, p: &Parcel) -> Result<(), PutError> {
    let d = super::ensure(home, Some("outbox")).map_err(PutError::Io)?;
    let n = std::fs::read_dir(&d)
        .map(|rd| rd.take(MAX_PARCELS + 1).count())
        .unwrap_or(0);
    if n >= MAX_PARCELS {
        return Err(PutError::Full);
    }
    let bytes = serde_json::to_vec(p).map_err(|e| PutError::Io(std::io::Error::other(e)))?;
    let put = fsafe::Put {
        sync: true,
        replace: false,
    };
    match fsafe::write_private(&d, &path(home, p.request_id()), &bytes, put) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(PutError::Io(e)),
    }
}

/// Replace `p`'s record with its new state (fsynced).
pub fn settle(home: &Path, p: &Parcel) -> std::io::Result<()> {
    let d = super::ensure(home, Some("outbox"))?;
    let bytes = serde_json::to_vec(p).map_err(std::io::Error::other)?;
    let put = fsafe::Put {
        sync: true,
        replace: true,
    };
    fsafe::write_private(&d, &path(home, p.request_id()), &bytes, put)
}

fn read(p: &Path) -> Option<Parcel> {
    let (bytes, m) = fsafe::read_capped(p, Follow::No, MAX_BYTES).ok()?;
    if fsafe::foreign_owner(&m).is_some() {
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}

/// The parcel of `request_id`, if there is one.
pub fn get(home: &Path, request_id: &str) -> Option<Parcel> {
    read(&path(home, request_id)).filter(|p| p.request_id() == request_id)
}

/// Every parcel (≤ [`MAX_PARCELS`] names looked at; unreadable files and other names skipped), oldest
/// first. Settled parcels older than [`KEEP_SETTLED_MS`] are removed on the way.
pub fn all(home: &Path, now_ms: i64) -> Vec<Parcel> {
    let Ok(rd) = std::fs::read_dir(dir(home)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten().take(MAX_PARCELS + 64) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.ends_with(".json") || name.starts_with('.') {
            continue;
        }
        let Some(p) = read(&e.path()) else { continue };
        if e.file_name().to_str() != Some(&format!("{}.json", super::file_key(p.request_id()))) {
            continue;
        }
        let settled_at = match &p.state {
            State::Pending => None,
            State::Delivered { at_ms, .. }
            | State::Expired { at_ms }
            | State::Unlinked { at_ms } => Some(*at_ms),
        };
        if settled_at.is_some_and(|t| now_ms.saturating_sub(t) > KEEP_SETTLED_MS) {
            let _ = std::fs::remove_file(e.path());
            continue;
        }
        out.push(p);
    }
    out.sort_by_key(|p| p.created_at);
    out
}
