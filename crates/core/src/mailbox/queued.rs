//! Messages held in a process's memory: what makes an accepted message survive the process that
//! holds it queued (issue 19).
//!
//! rc.8 keeps a session's inbox in the memory of the process that holds the session
//! [R8 `packages/core/agent/src/inbox.ts`]; the log records every change as `agent/inbox/spliced`,
//! written behind (≤ 200 ms). A graceful stop disposes each agent, and disposal is a cancel without
//! `keepInbox`, which clears the inbox durably [R8 `packages/core/agent-loop/src/index.ts` `dispose` →
//! `machine.cancel({kind:'disposed'})`; `packages/core/agent-loop/src/agent.ts` `cancel` →
//! `inbox.clear()`]. A crash loses what the write-behind had not written. Nothing replays either.
//!
//! So every accepted message gets a record in its target's shard, `<uuid>.held-<pid>`: "pending in
//! the inbox of process `<pid>` (presence `startedAt`)". It holds the delivered text exactly as sent.
//! - The **sender** writes it after the host accepted the message (never replacing one: the holder's
//!   hand-back may already be there).
//! - The **holder**, when it stops, rewrites it for every message still pending in its inboxes with
//!   [`HandBack`] (the log's seq at that moment) *before* the host cancels them: that is the evidence
//!   that the cancel which follows was the stop's, not a human's ([`hand_back`], synchronous and
//!   bounded in time).
//! - The **next holder** of the session (the process that holds it live, as for the mailbox) takes a
//!   record whose holder is gone ([`recover`]), checks it against the audit ledger (an `accepted` line
//!   with the same request id, this target, and the SHA-256 of this very text — a forged or altered
//!   record delivers nothing and is removed) and then the target's log:
//!   landed → done; removed by a single-row delete (the queue dock's `updateQueue` remove,
//!   [R8 `packages/host/apiproxy/src/api-proxy.ts` `updateQueue` → `Inbox.remove`]) → removed by the
//!   human, never re-delivered; cleared as a whole list after its holder's hand-back → the stop's, so
//!   re-delivered; cleared as a whole list without a hand-back (the human's cancel without keepInbox,
//!   closing the session, or a stop this plugin did not see) → not re-delivered, `verify` says why;
//!   inserted and never claimed, claimed and never landed, or not in the log at all (the write-behind
//!   died with the process) → re-delivered once. A re-delivery is the same text with the same request
//!   id, so what the receiving model sees is unchanged, and it is not counted against the budget again.
//!   Once re-delivered the record is held by the new holder, so a second stop is covered the same way.
//! - A decision not to deliver leaves a tombstone `<uuid>.removed` that `verify` reads.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{
    ensure_shard, is_mine_or_orphan, key_of, shard, Drainer, MailboxError, MAX_BATCH, MAX_NAMES,
};
use crate::ledger::{self, LedgerOutcome};
use base::fsafe::{self, Follow};
use store::{Lookup, RequestTrace};

/// Largest record read.
pub const MAX_RECORD_BYTES: u64 = super::MAX_ENVELOPE_BYTES;
/// A shard holding this many records takes no more (the sender's send is still accepted; its note
/// says the record was not written).
pub const MAX_RECORDS: usize = 1024;
/// How long a hand-back at stop may take before it gives up on the rest.
pub const HAND_BACK_MS: u64 = 300;

/// One rewrite of this process's own records at a time: the holder's [`hand_back`] (on the host's main
/// thread, in the stop signal's listener) against the drain's [`take`] and [`recover`]'s retiring of a
/// record of its own (on the blocking pool). Without it a stop could land between a worker's read of a
/// record and its write or removal, and the worker would erase the hand-back just written — the one
/// evidence that the clear which follows is the stop's, not the human's. Held for one record's read and
/// write, never across a log read; [`hand_back`] waits for it at most until its deadline.
static OWN_RECORDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn own_records() -> std::sync::MutexGuard<'static, ()> {
    OWN_RECORDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// [`own_records`] for the main thread: tried until `deadline` from `t0`, then `None` (the hand-back
/// goes on without it rather than hold the host's stop).
fn own_records_until(
    t0: Instant,
    deadline: Duration,
) -> Option<std::sync::MutexGuard<'static, ()>> {
    loop {
        match OWN_RECORDS.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        if t0.elapsed() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Why a holder handed its pending messages back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum StopWhy {
    /// The process is stopping (SIGTERM / SIGINT): the host's disposal clears the inbox next.
    #[default]
    Stop,
    /// The plugin was unmounted while the host went on: a later cancel may be anyone's.
    Unmount,
}

/// The holder's hand-back: written before the host cancelled the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct HandBack {
    pub at_ms: i64,
    /// The session's log length (`session.seq`) when the message was handed back.
    pub seq: u64,
    pub why: StopWhy,
}

/// One accepted message, pending in the memory of its holder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Queued {
    pub v: u32,
    pub request_id: String,
    pub session_id: String,
    /// `queue` or `steer`.
    pub mode: String,
    /// The delivered text, exactly (From header or frame included).
    pub text: String,
    pub holder_pid: u32,
    /// The holder's presence `startedAt` (0: not known).
    pub holder_started_at: i64,
    /// When it was accepted (or last handed to a holder).
    pub at_ms: i64,
    pub handed_back: Option<HandBack>,
    /// How often it was re-delivered.
    pub redeliveries: u32,
}

/// Why a message is re-delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "kebab-case"))]
pub enum RedeliverWhy {
    /// The log does not hold it: its holder died before the write-behind wrote the insertion.
    NotInLog,
    /// Inserted and never claimed (a crash; a resume may have replayed it: the shim checks).
    Pending,
    /// Claimed by a turn or step whose landing was never written.
    ClaimedNotLanded,
    /// Cleared with the whole inbox after its holder handed it back: the stop's cancel.
    ClearedAtStop,
}

/// A message to deliver again into a session live here (its holder is gone; the binding's
/// `QueuedRedelivery`: `queuedRecover()` returns these).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, js_name = "QueuedRedelivery")
)]
pub struct Redelivery {
    pub request_id: String,
    pub session_id: String,
    pub mode: String,
    pub text: String,
    pub why: RedeliverWhy,
    /// The process that held it.
    pub from_pid: u32,
}

/// Why a message is not delivered again (the tombstone `<uuid>.removed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RemovedWhy {
    /// A single-row delete: the human's queue-row delete.
    #[default]
    Human,
    /// A cancel of the whole inbox this plugin did not see happen at a stop (the human's cancel
    /// without keepInbox, closing the session, a stop without the plugin), or one that cannot be
    /// told from a row delete (a one-item queue after an unmount). A human's decision is final,
    /// so it is not delivered again.
    Unattributed,
}

/// `<uuid>.removed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Removed {
    pub request_id: String,
    pub session_id: String,
    /// The seq of the cancel.
    pub seq: u64,
    pub why: RemovedWhy,
    pub holder_pid: u32,
}

fn record_name(key: &str, pid: u32) -> String {
    format!("{key}.held-{pid}")
}

/// The request key and the holder's pid of a record's file name ([`record_name`]), or `None` for any
/// other name: the one rule every scan of a shard classifies names by.
fn parse_record_name(name: &str) -> Option<(&str, u32)> {
    let (k, pid) = name.split_once(".held-")?;
    let pid = pid.parse::<u32>().ok()?;
    key_of(&format!("{}{k}", base::names::REQUEST_ID_PREFIX))?;
    Some((k, pid))
}

/// Write `bytes` to `dest` through a private temp file; `replace: false` never replaces an existing
/// `dest` (a hard link is made instead of a rename). Not synced: it is to survive the process, and a
/// machine crash loses the host's unsynced inbox too.
fn write_file(dir: &Path, dest: &Path, bytes: &[u8], replace: bool) -> io::Result<()> {
    let tmp = dir.join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
    let r = (|| {
        let mut f = fsafe::create_private(&tmp)?;
        f.write_all(bytes)?;
        if replace {
            fs::rename(&tmp, dest)
        } else {
            let r = fs::hard_link(&tmp, dest);
            let _ = fs::remove_file(&tmp);
            match r {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
                r => r,
            }
        }
    })();
    if r.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    r
}

/// Why a record was not written: the sender's [`record`] of an accepted message, or a [`take`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// The request id is not one this plugin mints.
    NotARequest,
    /// The session id cannot name a mailbox folder.
    BadSession,
    /// The shard folder cannot be used.
    Shard(MailboxError),
    /// The shard already holds this many records (at most [`MAX_RECORDS`]).
    Full { session: String, records: usize },
    /// The record would be this many bytes, over [`MAX_RECORD_BYTES`].
    TooLarge(usize),
    /// The record could not be encoded (serde's reason).
    Encode(std::sync::Arc<str>),
    /// The shard could not be read, or the record not written (the system's error).
    Io(store::error::IoError),
    /// No record of that request is claimed by this process.
    NotClaimed,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::NotARequest => f.write_str("not a request id of this plugin"),
            RecordError::BadSession => f.write_str("the session id cannot name a mailbox folder"),
            RecordError::Shard(e) => e.fmt(f),
            RecordError::Full { session, records } => {
                write!(f, "the mailbox of {session} holds {records} records")
            }
            RecordError::TooLarge(n) => write!(f, "{n} bytes, over {MAX_RECORD_BYTES}"),
            RecordError::Encode(why) => f.write_str(why),
            RecordError::Io(e) => f.write_str(&e.full()),
            RecordError::NotClaimed => f.write_str("no record claimed by this process"),
        }
    }
}

impl std::error::Error for RecordError {}

fn encode(h: &Queued) -> Result<Vec<u8>, RecordError> {
    let mut h = h.clone();
    h.v = 1;
    let b = serde_json::to_vec(&h).map_err(|e| RecordError::Encode(e.to_string().into()))?;
    if b.len() as u64 > MAX_RECORD_BYTES {
        return Err(RecordError::TooLarge(b.len()));
    }
    Ok(b)
}

/// The file a sender's record will be written into, made while its message is in flight
/// ([`Slot::open`]): an unnamed private file in the target's shard (`base::fsafe::Unnamed`). It is
/// not a record — no reader of the mailbox can see it, and it has no name until [`record_with`]
/// gives it one, after the send's ledger line —, so a message refused or never sent leaves nothing:
/// the slot is dropped and the system frees it (so does a crash).
///
/// The shard's records are counted then too, for the [`MAX_RECORDS`] bound (a listing of the folder is the
/// other costly part; records another send adds while this one is in flight are not in that count, as
/// they would not be either had they come just after it).
#[derive(Debug)]
pub struct Slot {
    file: fsafe::Unnamed,
    /// The records the shard held when the slot was made.
    records: usize,
}

impl Slot {
    /// A slot in the shard of `session`, when that shard exists already, is private and can be listed:
    /// making one creates no folder and no name. `None` otherwise, or where the system makes no unnamed
    /// files ([`record_with`] then writes as [`record`] does).
    pub fn open(home: &Path, session: &str) -> Option<Slot> {
        Slot::open_for(home, session, None)
    }

    /// [`Slot::open`], with the record the sender expects to write (`expected`) written into it at once
    /// (`fsafe::Unnamed::prewrite`): [`record_with`] of that same record then only names the file, and
    /// of another one (the answer changed a field) writes that one instead. A record that cannot be
    /// encoded or written now is written at [`record_with`], as without it.
    pub fn open_for(home: &Path, session: &str, expected: Option<&Queued>) -> Option<Slot> {
        let d = shard(home, session)?;
        fsafe::check_private_dir(&d).ok()?;
        let records = record_count(&d).ok()?;
        let mut file = fsafe::Unnamed::create_in(&d)?;
        if let Some(bytes) = expected.and_then(|q| encode(q).ok()) {
            let _ = file.prewrite(&bytes);
        }
        Some(Slot { file, records })
    }
}

/// How many records the shard `d` holds (a listing of at most `4 × MAX_RECORDS` entries).
fn record_count(d: &Path) -> io::Result<usize> {
    Ok(fs::read_dir(d)?
        .flatten()
        .take(MAX_RECORDS * 4)
        .filter(|e| e.file_name().to_string_lossy().contains(".held-"))
        .count())
}

/// The sender's record of an accepted message (never replaces one already there).
pub fn record(home: &Path, h: &Queued) -> Result<(), RecordError> {
    record_with(home, h, None)
}

/// [`record`], written into `slot` when it was made in the record's shard (the same checks, the same
/// name, the same bytes; only the file's inode was made earlier, and maybe the expected record written into
/// it, `Slot::open_for`: other bytes are replaced); a slot that cannot take the name
/// (another folder, a link that fails) is dropped and the record is written as [`record`] writes it.
pub fn record_with(home: &Path, h: &Queued, slot: Option<Slot>) -> Result<(), RecordError> {
    let key = key_of(&h.request_id).ok_or(RecordError::NotARequest)?;
    let d = ensure_shard(home, &h.session_id).map_err(|e| match e {
        MailboxError::BadSession => RecordError::BadSession,
        e => RecordError::Shard(e),
    })?;
    // a slot made in this shard counted its records while the message was in flight
    let slot = slot.filter(|s| s.file.dir() == d.as_path());
    let n = match &slot {
        Some(s) => s.records,
        None => record_count(&d).map_err(|e| RecordError::Io(e.into()))?,
    };
    if n >= MAX_RECORDS {
        return Err(RecordError::Full {
            session: h.session_id.clone(),
            records: n,
        });
    }
    let dest = d.join(record_name(key, h.holder_pid));
    let bytes = encode(h)?;
    if let Some(Slot { file, .. }) = slot {
        match file.link(&dest, &bytes) {
            // never replaces one already there (the holder's hand-back), as `write_file` below
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
            Ok(()) => return Ok(()),
            Err(_) => {}
        }
    }
    write_file(&d, &dest, &bytes, false).map_err(|e| RecordError::Io(e.into()))
}

/// One message pending in an inbox of the stopping process, as the shim found it (the binding's
/// `QueuedPending`: `queuedHandBack()` takes these).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[cfg_attr(feature = "napi", napi_derive::napi(object, js_name = "QueuedPending"))]
pub struct Pending {
    pub session_id: String,
    pub request_id: String,
    /// `queue` (next-turn) or `steer` (next-step).
    pub mode: String,
    pub text: String,
    /// The session's `seq` at the hand-back, the JS number the shim read (the record keeps
    /// `Pending::seq_at`).
    pub seq: f64,
}

impl Pending {
    /// The hand-back's seq: `seq` cut to a whole number; 0 for one that is negative, NaN or infinite.
    pub fn seq_at(&self) -> u64 {
        if self.seq.is_finite() && self.seq >= 0.0 {
            self.seq as u64
        } else {
            0
        }
    }
}

/// What a hand-back did (counts as JS numbers: the binding's `HandBackReport`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "napi", napi_derive::napi(object))]
pub struct HandBackReport {
    pub written: u32,
    /// Not ours (no request id of this plugin), or a session id that names no folder.
    pub skipped: u32,
    /// Left when the deadline passed.
    pub not_written: u32,
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The stopping holder hands every pending message of this plugin back: its record is (re)written
/// with [`HandBack`]. Bounded by `deadline`; what is left is counted, never waited for.
pub fn hand_back(
    home: &Path,
    pid: u32,
    started_at: i64,
    why: StopWhy,
    items: &[Pending],
    now_ms: i64,
    deadline: Duration,
) -> HandBackReport {
    let t0 = Instant::now();
    let mut rep = HandBackReport::default();
    let mut shards: HashMap<String, Option<std::path::PathBuf>> = HashMap::new();
    let _own = own_records_until(t0, deadline);
    for (i, p) in items.iter().enumerate() {
        if t0.elapsed() > deadline {
            rep.not_written += count(items.len() - i);
            break;
        }
        let Some(key) = key_of(&p.request_id) else {
            rep.skipped += 1;
            continue;
        };
        let d = shards
            .entry(p.session_id.clone())
            .or_insert_with(|| ensure_shard(home, &p.session_id).ok());
        let Some(d) = d.clone() else {
            rep.skipped += 1;
            continue;
        };
        let h = Queued {
            v: 1,
            request_id: p.request_id.clone(),
            session_id: p.session_id.clone(),
            mode: if p.mode == "steer" { "steer" } else { "queue" }.into(),
            text: p.text.clone(),
            holder_pid: pid,
            holder_started_at: started_at,
            at_ms: now_ms,
            handed_back: Some(HandBack {
                at_ms: now_ms,
                seq: p.seq_at(),
                why,
            }),
            redeliveries: read_queued(&d.join(record_name(key, pid))).map_or(0, |o| o.redeliveries),
        };
        match encode(&h).and_then(|b| {
            write_file(&d, &d.join(record_name(key, pid)), &b, true)
                .map_err(|e| RecordError::Io(e.into()))
        }) {
            Ok(()) => rep.written += 1,
            Err(_) => rep.not_written += 1,
        }
    }
    rep
}

fn read_queued(p: &Path) -> Option<Queued> {
    let (b, _) = fsafe::read_capped(p, Follow::No, MAX_RECORD_BYTES).ok()?;
    serde_json::from_slice(&b).ok()
}

fn write_removed(d: &Path, key: &str, r: &Removed) {
    if let Ok(b) = serde_json::to_vec(r) {
        let _ = write_file(d, &d.join(format!("{key}.removed")), &b, true);
    }
}

/// A message not to deliver again: its tombstone (what `verify` reads) replaces its record.
fn retire(d: &Path, key: &str, record: &Path, h: &Queued, why: RemovedWhy, seq: u64) {
    write_removed(
        d,
        key,
        &Removed {
            request_id: h.request_id.clone(),
            session_id: h.session_id.clone(),
            seq,
            why,
            holder_pid: h.holder_pid,
        },
    );
    let _ = fs::remove_file(record);
}

/// [`retire`] the record at `record` only if it still reads as `h`, the record the verdict judged: a
/// stop of this process may have handed it back since it was read (its [`hand_back`] runs on the
/// host's main thread while [`recover`] runs on the blocking pool), and that hand-back is what makes the
/// clear that follows the stop's. Re-read and retired under [`own_records`]; a changed record is left
/// for the next pass.
fn retire_unchanged(d: &Path, key: &str, record: &Path, h: &Queued, why: RemovedWhy, seq: u64) {
    let _own = own_records();
    if read_queued(record).as_ref() == Some(h) {
        retire(d, key, record, h, why, seq);
    }
}

/// What the log says should happen to a record whose holder is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Done,
    Redeliver(RedeliverWhy),
    Removed(RemovedWhy, u64),
}

/// The rule (see the module docs), from the target's log (`resumed_at`: the seq where the session's
/// current holder resumed it, [`store::Fold::resumed_at`]) and the holder's hand-back.
pub fn verdict(
    trace: Option<&RequestTrace>,
    hb: Option<&HandBack>,
    resumed_at: Option<u64>,
) -> Verdict {
    let Some(t) = trace else {
        return Verdict::Redeliver(RedeliverWhy::NotInLog);
    };
    if t.landed.is_some() {
        return Verdict::Done;
    }
    if let Some(c) = t.cancel.filter(|_| t.canceled) {
        if !c.whole {
            return Verdict::Removed(RemovedWhy::Human, c.seq);
        }
        return match hb {
            // After the hand-back: the stop's clear — unless a one-item cancel after an unmount,
            // which a row delete looks exactly like.
            Some(h) if c.seq >= h.seq && (c.list_len > 1 || h.why == StopWhy::Stop) => {
                Verdict::Redeliver(RedeliverWhy::ClearedAtStop)
            }
            _ => Verdict::Removed(RemovedWhy::Unattributed, c.seq),
        };
    }
    if let Some(c) = t.claimed {
        // Claimed before the current holder resumed the session: the turn that took it died with its
        // process. Claimed after: a turn running now took it, and its landing is being written.
        if resumed_at.is_some_and(|r| c < r) {
            return Verdict::Redeliver(RedeliverWhy::ClaimedNotLanded);
        }
        return Verdict::Done;
    }
    if t.queued.is_some() {
        return Verdict::Redeliver(RedeliverWhy::Pending);
    }
    Verdict::Redeliver(RedeliverWhy::NotInLog)
}

/// Accepted request ids of `session` in the ledger, with the SHA-256 of the text they delivered.
fn accepted_texts(home: &Path, session: &str) -> HashMap<String, String> {
    let filter = ledger::Filter {
        target: Some(session.to_string()),
        ..Default::default()
    };
    let Ok(read) = ledger::read_ledger(home, &filter) else {
        return HashMap::new();
    };
    read.entries
        .into_iter()
        .filter(|e| e.outcome == LedgerOutcome::Accepted && e.target.as_deref() == Some(session))
        .filter_map(|e| Some((e.request_id?, e.text_sha256?)))
        .collect()
}

/// The records of the sessions `me` holds live: what to deliver again now (each claimed by renaming
/// it to `<uuid>.held-<me>`), oldest first, ≤ [`MAX_BATCH`] per session. On the way: records of
/// landed messages go, a record the ledger does not vouch for is removed unread-as-junk, and a
/// message not to deliver again leaves its tombstone.
pub fn recover(home: &Path, me: &Drainer, now_ms: i64) -> Vec<Redelivery> {
    let mut out = Vec::new();
    if fsafe::check_private_dir(&super::root(home)).is_err() {
        return out;
    }
    let mut peers = Vec::new();
    for session in me.sessions.iter().take(crate::presence::MAX_SESSIONS) {
        let Some(d) = shard(home, session) else {
            continue;
        };
        if fsafe::check_private_dir(&d).is_err() {
            continue;
        }
        let Ok(rd) = fs::read_dir(&d) else { continue };
        let mut names: Vec<(String, u32, std::path::PathBuf)> = Vec::new();
        for e in rd.flatten().take(MAX_NAMES * 4) {
            let name = e.file_name();
            let Some((k, pid)) = name.to_str().and_then(parse_record_name) else {
                continue;
            };
            let path = e.path();
            match fs::symlink_metadata(&path) {
                Ok(m) if m.is_file() => names.push((k.to_string(), pid, path)),
                Ok(m) if m.file_type().is_symlink() => {
                    let _ = fs::remove_file(&path);
                }
                _ => {}
            }
            if names.len() >= MAX_NAMES {
                break;
            }
        }
        if names.is_empty() {
            continue;
        }
        // Whose is each record? Mine (accepted into my inbox, or re-delivered by me), a live holder's
        // (not mine to touch), or an orphan.
        let mut mine = Vec::new();
        let mut orphans = Vec::new();
        for (key, pid, path) in names {
            let Some(h) = read_queued(&path).filter(|h| {
                h.session_id == *session && key_of(&h.request_id) == Some(key.as_str())
            }) else {
                let _ = fs::remove_file(&path);
                continue;
            };
            let named_me = pid == me.pid;
            if named_me
                && h.holder_pid == me.pid
                && (h.holder_started_at == 0 || h.holder_started_at == me.started_at)
            {
                mine.push((key, path, h));
            } else if named_me
                || is_mine_or_orphan(
                    me,
                    pid,
                    (h.holder_started_at != 0).then_some(h.holder_started_at),
                    session,
                    &mut peers,
                    home,
                    now_ms,
                )
            {
                orphans.push((key, path, h));
            }
        }
        if mine.is_empty() && orphans.is_empty() {
            continue;
        }
        let Lookup::Found(s) = store::load_session(home, session) else {
            continue; // no readable log yet: look again on the next pass
        };
        let requests = &s.fold.requests;
        for (key, path, h) in mine {
            if h.handed_back.is_some() {
                // This process handed it back at its stop (or unmount): the clear the log may show now is
                // that stop's, and the session's next holder judges it with the hand-back.
                continue;
            }
            let t = requests.get(&h.request_id);
            // A re-delivery of mine is judged on the log only once its insertion shows there (the
            // cancel the log still holds may be the stop's that this re-delivery answered).
            let current = h.redeliveries == 0 || t.is_some_and(|t| t.insertions > h.redeliveries);
            match verdict(t, None, s.fold.resumed_at) {
                Verdict::Removed(..) if !current => {}
                Verdict::Done => {
                    let _ = fs::remove_file(&path);
                }
                Verdict::Removed(why, seq) => retire_unchanged(&d, &key, &path, &h, why, seq),
                // Still pending in my memory (or claimed by a turn of mine): nothing to do.
                Verdict::Redeliver(_) => {}
            }
        }
        if orphans.is_empty() {
            continue;
        }
        let vouched = accepted_texts(home, session);
        let mut batch = Vec::new();
        for (key, path, h) in orphans {
            if vouched.get(&h.request_id) != Some(&ledger::sha256_hex(&h.text)) {
                // Not an accepted send of this text to this session: deliver nothing.
                let _ = fs::remove_file(&path);
                continue;
            }
            match verdict(
                requests.get(&h.request_id),
                h.handed_back.as_ref(),
                s.fold.resumed_at,
            ) {
                Verdict::Done => {
                    let _ = fs::remove_file(&path);
                }
                Verdict::Removed(why, seq) => retire_unchanged(&d, &key, &path, &h, why, seq),
                Verdict::Redeliver(why) => {
                    if batch.len() >= MAX_BATCH {
                        continue;
                    }
                    let claim = d.join(record_name(&key, me.pid));
                    if path != claim && fs::rename(&path, &claim).is_err() {
                        continue;
                    }
                    batch.push((
                        h.at_ms,
                        Redelivery {
                            request_id: h.request_id.clone(),
                            session_id: session.clone(),
                            mode: h.mode.clone(),
                            text: h.text.clone(),
                            why,
                            from_pid: h.holder_pid,
                        },
                    ));
                }
            }
        }
        batch.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.request_id.cmp(&b.1.request_id)));
        out.extend(batch.into_iter().map(|(_, r)| r));
    }
    out
}

/// What a sweep of landed messages' records did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Swept {
    /// Records of messages that landed: removed.
    pub removed: usize,
    /// Records looked at and kept: not landed (pending, handed back, claimed by a turn whose landing
    /// the log does not show yet), another holder's, or not readable as a record of that shard.
    pub kept: usize,
}

/// The `<uuid>.held-<pid>` records of one shard folder: (key, pid, path), regular files only,
/// ≤ [`MAX_NAMES`] of them.
fn records_in(d: &Path) -> Vec<(String, u32, std::path::PathBuf)> {
    let Ok(rd) = fs::read_dir(d) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten().take(MAX_NAMES * 4) {
        let name = e.file_name();
        let Some((k, pid)) = name.to_str().and_then(parse_record_name) else {
            continue;
        };
        if fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_file()) {
            out.push((k.to_string(), pid, e.path()));
        }
        if out.len() >= MAX_NAMES {
            break;
        }
    }
    out
}

/// The shard folders of the mailbox (≤ [`MAX_NAMES`]), by session id.
fn shards_of(home: &Path) -> Vec<String> {
    let root = super::root(home);
    if fsafe::check_private_dir(&root).is_err() {
        return Vec::new();
    }
    let Ok(rd) = fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .flatten()
        .take(MAX_NAMES)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|s| super::addressable(s))
        .collect();
    v.sort();
    v
}

/// At this process's normal end (the plugin's dispose): remove its own records (`<uuid>.held-<pid>`,
/// holder `me.pid` of `me.started_at`) of the messages in `landed` — request ids whose `user/message`
/// the host published in this process (the shim saw them land; the host is the authority, no file is
/// read for it). A landed message is never delivered again, so its record only waited for this
/// process's next pass, which a process that ends right after the landing turn never makes: rc.8
/// ends a one-shot `dsh --profile headless "<task>"` through the root fiber's dispose
/// [R8 `apps/cli/src/profile-boot.ts` `headlessIo.exit` → `createProcessShutdown` → `fiber.dispose()`].
/// Every other record stays (a hand-back, a message still pending). Synchronous and bounded: only this
/// pid's names are opened, ≤ [`MAX_NAMES`] shards, and it gives up at `deadline`.
pub fn sweep_mine(home: &Path, me: &Drainer, landed: &[String], deadline: Duration) -> Swept {
    let t0 = Instant::now();
    let mut out = Swept::default();
    if landed.is_empty() {
        return out;
    }
    let root = super::root(home);
    for session in shards_of(home) {
        if t0.elapsed() > deadline {
            break;
        }
        let d = root.join(&session);
        if fsafe::check_private_dir(&d).is_err() {
            continue;
        }
        for (key, pid, path) in records_in(&d) {
            if pid != me.pid {
                continue;
            }
            let ours = read_queued(&path).filter(|h| {
                h.session_id == session
                    && key_of(&h.request_id) == Some(key.as_str())
                    && h.holder_pid == me.pid
                    && (h.holder_started_at == 0 || h.holder_started_at == me.started_at)
            });
            match ours {
                Some(h) if landed.contains(&h.request_id) => {
                    let _ = fs::remove_file(&path);
                    out.removed += 1;
                }
                _ => out.kept += 1,
            }
        }
    }
    out
}

/// Most session logs one [`sweep_landed`] pass reads.
pub const SWEEP_LOGS: usize = 16;

/// Any process's pass over the shards of sessions it does not hold: the records of gone holders
/// (their pid dead, or alive without a fresh presence record of that incarnation listing the session)
/// whose message the target's log shows landed are removed. A headless process that ended right after
/// the landing turn without its dispose (a crash, SIGKILL) leaves them until the session is held
/// again; nothing ever re-delivers a landed message, so they only stood in `verify`'s way. A live
/// holder's records, and any record of a message not landed, are left alone; nothing is written into a
/// session (only the plugin's own folder is). ≤ [`SWEEP_LOGS`] logs read per pass.
pub fn sweep_landed(home: &Path, me: &Drainer, now_ms: i64) -> Swept {
    let mut out = Swept::default();
    let root = super::root(home);
    let mut peers = Vec::new();
    let mut logs = 0usize;
    for session in shards_of(home) {
        if me.sessions.contains(&session) {
            continue; // recover() judges the records of the sessions held here
        }
        let d = root.join(&session);
        if fsafe::check_private_dir(&d).is_err() {
            continue;
        }
        let gone: Vec<(std::path::PathBuf, Queued)> = records_in(&d)
            .into_iter()
            .filter_map(|(key, pid, path)| {
                let h = read_queued(&path).filter(|h| {
                    h.session_id == session && key_of(&h.request_id) == Some(key.as_str())
                });
                let Some(h) = h else {
                    out.kept += 1;
                    return None;
                };
                let started = (h.holder_started_at != 0).then_some(h.holder_started_at);
                if pid != me.pid
                    && !is_mine_or_orphan(me, pid, started, &session, &mut peers, home, now_ms)
                {
                    out.kept += 1;
                    return None;
                }
                Some((path, h))
            })
            .collect();
        if gone.is_empty() {
            continue;
        }
        if logs >= SWEEP_LOGS {
            out.kept += gone.len();
            continue;
        }
        logs += 1;
        let Lookup::Found(s) = store::load_session(home, &session) else {
            out.kept += gone.len();
            continue;
        };
        for (path, h) in gone {
            if s.fold
                .requests
                .get(&h.request_id)
                .is_some_and(|t| t.landed.is_some())
            {
                let _ = fs::remove_file(&path);
                out.removed += 1;
            } else {
                out.kept += 1;
            }
        }
    }
    out
}

/// A cold session a message of a gone holder waits for, to wake where `allowResume` permits (the
/// binding's `QueuedWake`: `queuedWake()` returns it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "napi", napi_derive::napi(object, js_name = "QueuedWake"))]
pub struct WakeCandidate {
    pub session_id: String,
    /// Its header's cwd (rc.8 adopts a stored session by id and cwd: `session.create`).
    pub cwd: String,
}

/// The first session (by name) with a verified orphan record to deliver again that no process lists
/// live (presence) and that no DSH process without this plugin may hold (`presence::foreign`); this
/// process becomes its one waker for [`WAKE_LOCK_MS`]. The shim then has its own host adopt the
/// session — without a new message: rc.8's resume replays the inbox insertions the log holds
/// [R8 `packages/core/agent/src/inbox.ts` constructor], so sending one of those again would land it
/// twice — and [`recover`] delivers the rest once it is live here. ≤ [`MAX_NAMES`] shards looked at.
pub fn wake_candidate(home: &Path, me: &Drainer, now_ms: i64) -> Option<WakeCandidate> {
    let root = super::root(home);
    fsafe::check_private_dir(&root).ok()?;
    let peers = crate::presence::peers(home, me.pid, now_ms);
    // (the records listed above, by pid, for is_mine_or_orphan: the listing is read once)
    let mut known: Vec<(u32, Option<crate::presence::Record>)> =
        peers.iter().map(|r| (r.pid, Some(r.clone()))).collect();
    let mut shards: Vec<String> = fs::read_dir(&root)
        .ok()?
        .flatten()
        .take(MAX_NAMES)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|s| super::addressable(s) && !me.sessions.contains(s))
        .filter(|s| crate::presence::owner_of(&peers, s).is_none())
        .collect();
    shards.sort();
    for session in shards {
        let d = root.join(&session);
        if fsafe::check_private_dir(&d).is_err() {
            continue;
        }
        let Ok(rd) = fs::read_dir(&d) else { continue };
        let held: Vec<Queued> = rd
            .flatten()
            .take(MAX_NAMES * 4)
            .filter_map(|e| {
                let n = e.file_name().into_string().ok()?;
                let (k, pid) = parse_record_name(&n)?;
                let m = fs::symlink_metadata(e.path()).ok()?;
                if !m.is_file() {
                    return None;
                }
                let h = read_queued(&e.path())?;
                let started = (h.holder_started_at != 0).then_some(h.holder_started_at);
                (h.session_id == session
                    && key_of(&h.request_id) == Some(k)
                    && is_mine_or_orphan(me, pid, started, &session, &mut known, home, now_ms))
                .then_some(h)
            })
            .collect();
        if held.is_empty() {
            continue;
        }
        let Some(meta) = store::find_session(home, &session) else {
            continue;
        };
        let Some(cwd) = meta.cwd.clone().filter(|_| !meta.is_subagent()) else {
            continue;
        };
        let known: Vec<u32> = peers.iter().map(|r| r.pid).collect();
        if crate::presence::foreign::holder_of(home, &meta.log_path, &known).is_some() {
            continue;
        }
        let Lookup::Found(s) = store::load_session(home, &session) else {
            continue;
        };
        let vouched = accepted_texts(home, &session);
        let wanted = held.iter().any(|h| {
            vouched.get(&h.request_id) == Some(&ledger::sha256_hex(&h.text))
                && matches!(
                    verdict(
                        s.fold.requests.get(&h.request_id),
                        h.handed_back.as_ref(),
                        s.fold.resumed_at
                    ),
                    Verdict::Redeliver(_)
                )
        });
        // One waker per session: two processes resuming one session would fork its history.
        if wanted && wake_lock(&d, me.pid) {
            return Some(WakeCandidate {
                session_id: session,
                cwd,
            });
        }
    }
    None
}

/// How long a process's claim to wake a session keeps others off it (its presence lists the session
/// within a refresh once it is live).
pub const WAKE_LOCK_MS: u64 = 10_000;

/// Take `<shard>/.wake`'s place as the one waker of this session. One judge at a time: the judging runs
/// under a `flock` of `<shard>/.wake.lock` (released on return, or when the process dies), taken only if
/// free — one held means another process is judging now and will be the waker. Under it, a `.wake` left by
/// a live process younger than [`WAKE_LOCK_MS`] keeps this process off; otherwise this pid replaces it.
/// (Before, `.wake` was created and then written, and a stale one removed: a racer that read it empty, or
/// removed a fresh one taken in between, woke the session too —
/// `wake_tests::racing_wakers_of_one_session_one_wins_and_a_stale_lock_goes_to_one`.)
fn wake_lock(d: &Path, pid: u32) -> bool {
    let Ok(Some(_judging)) = fsafe::Flock::try_lock(&d.join(".wake.lock")) else {
        return false;
    };
    let p = d.join(".wake");
    let keeps_off = fsafe::read_capped(&p, Follow::No, 32)
        .ok()
        .and_then(|(b, m)| {
            let p2 = std::str::from_utf8(&b).ok()?.trim().parse::<u32>().ok()?;
            let young = super::age_ms(&m) < WAKE_LOCK_MS;
            Some(young && p2 != pid && crate::presence::pid_alive(p2))
        })
        .unwrap_or(false);
    let put = fsafe::Put {
        sync: false,
        replace: true,
    };
    !keeps_off && fsafe::write_private(d, &p, pid.to_string().as_bytes(), put).is_ok()
}

#[cfg(test)]
mod wake_tests {
    use super::*;

    /// Racing wakers of one session (processes of one home): exactly one takes the lock each round, and a
    /// stale lock (a dead pid) is taken over by one of them only.
    #[test]
    fn racing_wakers_of_one_session_one_wins_and_a_stale_lock_goes_to_one() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // our own test process is the live holder every racer but the winner respects: racers use pids
        // of processes that are alive (this one's, its parent's) but differ from the lock's
        let me = std::process::id();
        let parent = std::os::unix::process::parent_id();
        for round in 0..40 {
            let _ = fs::remove_file(d.join(".wake"));
            if round % 2 == 1 {
                // a stale lock: a pid that is not running
                fs::write(d.join(".wake"), b"4194303").unwrap();
            }
            let gate = std::sync::Arc::new(std::sync::Barrier::new(6));
            let racers: Vec<_> = (0..6)
                .map(|i| {
                    let (d, gate) = (d.to_path_buf(), gate.clone());
                    let pid = if i % 2 == 0 { me } else { parent };
                    std::thread::spawn(move || {
                        gate.wait();
                        wake_lock(&d, pid)
                    })
                })
                .collect();
            let won: Vec<bool> = racers.into_iter().map(|t| t.join().unwrap()).collect();
            // two racers with the same pid may both pass (a process is its own waker); one pid wins
            let pids: std::collections::HashSet<u32> = won
                .iter()
                .enumerate()
                .filter(|(_, w)| **w)
                .map(|(i, _)| if i % 2 == 0 { me } else { parent })
                .collect();
            assert_eq!(pids.len(), 1, "round {round}: {won:?}");
            let held: u32 = fs::read_to_string(d.join(".wake"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            assert!(pids.contains(&held), "round {round}: the lock names {held}");
        }
    }

    /// Only a young `.wake` of a live other process keeps a waker off: one older than
    /// [`WAKE_LOCK_MS`], or dated ahead (dating it ahead cannot keep it young), is taken over.
    #[test]
    fn a_live_wakers_lock_keeps_others_off_only_while_it_is_young() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let other = std::os::unix::process::parent_id();
        let lock = d.join(".wake");
        let now = std::time::SystemTime::now();
        let ms = std::time::Duration::from_millis;
        for (dated, kept_off) in [
            (now, true),
            (now - ms(WAKE_LOCK_MS - 2_000), true),
            (now - ms(WAKE_LOCK_MS + 1_000), false),
            (now + ms(60_000), false),
        ] {
            fs::write(&lock, other.to_string()).unwrap();
            fs::File::options()
                .write(true)
                .open(&lock)
                .unwrap()
                .set_modified(dated)
                .unwrap();
            let me = std::process::id();
            assert_eq!(wake_lock(d, me), !kept_off, "dated {dated:?}");
            let named = fs::read_to_string(&lock).unwrap();
            assert_eq!(named, if kept_off { other } else { me }.to_string());
        }
    }
}

/// After the shim delivered a [`Redelivery`] (or found it pending in its inbox already): the record
/// is now held by `me`, so a later stop of this process is covered the same way.
pub fn take(
    home: &Path,
    pid: u32,
    started_at: i64,
    session: &str,
    request_id: &str,
    redelivered: bool,
    now_ms: i64,
) -> Result<(), RecordError> {
    let key = key_of(request_id).ok_or(RecordError::NotARequest)?;
    let d = shard(home, session).ok_or(RecordError::BadSession)?;
    fsafe::check_private_dir(&d).map_err(|e| RecordError::Shard(MailboxError::Refused(e)))?;
    let p = d.join(record_name(key, pid));
    let _own = own_records();
    let mut h = read_queued(&p).ok_or(RecordError::NotClaimed)?;
    if h.holder_pid == pid && h.holder_started_at == started_at && h.handed_back.is_some() {
        // This process handed it back at its stop since it delivered it: the hand-back stands.
        return Ok(());
    }
    h.holder_pid = pid;
    h.holder_started_at = started_at;
    h.at_ms = now_ms;
    h.handed_back = None;
    if redelivered {
        h.redeliveries = h.redeliveries.saturating_add(1);
    }
    write_file(&d, &p, &encode(&h)?, true).map_err(|e| RecordError::Io(e.into()))
}

/// What the mailbox knows about a request, for `verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueuedState {
    /// Queued (pending) in the memory of a live process.
    Queued { pid: u32, redeliveries: u32 },
    /// Its holder is gone: re-delivered when the session is live again.
    Lost {
        pid: u32,
        handed_back: bool,
        redeliveries: u32,
    },
    /// Not delivered again: the tombstone.
    Removed(Removed),
}

/// The delivered text of `request_id` as its queued record in `session`'s shard keeps it (the human's
/// mail index shows it until the message lands; `crate::mailindex::feed`). None: no record.
pub fn text_of(home: &Path, session: &str, request_id: &str) -> Option<String> {
    let key = key_of(request_id)?;
    let d = shard(home, session)?;
    fsafe::check_private_dir(&d).ok()?;
    let prefix = format!("{key}.held-");
    fs::read_dir(&d)
        .ok()?
        .flatten()
        .take(MAX_NAMES * 4)
        .find_map(|e| {
            let n = e.file_name().into_string().ok()?;
            n.strip_prefix(&prefix)?.parse::<u32>().ok()?;
            let h = read_queued(&e.path())?;
            (h.request_id == request_id && h.session_id == session).then_some(h.text)
        })
}

/// The record or tombstone of `request_id` in `session`'s shard.
pub fn lookup(home: &Path, session: &str, request_id: &str, now_ms: i64) -> Option<QueuedState> {
    let key = key_of(request_id)?;
    let d = shard(home, session)?;
    fsafe::check_private_dir(&d).ok()?;
    if let Ok((b, _)) = fsafe::read_capped(&d.join(format!("{key}.removed")), Follow::No, 4096) {
        if let Ok(r) = serde_json::from_slice::<Removed>(&b) {
            if r.request_id == request_id && r.session_id == session {
                return Some(QueuedState::Removed(r));
            }
        }
    }
    let prefix = format!("{key}.held-");
    let rd = fs::read_dir(&d).ok()?;
    let (pid, h) = rd.flatten().take(MAX_NAMES * 4).find_map(|e| {
        let n = e.file_name().into_string().ok()?;
        let pid = n.strip_prefix(&prefix)?.parse::<u32>().ok()?;
        let h = read_queued(&e.path())?;
        (h.request_id == request_id && h.session_id == session).then_some((pid, h))
    })?;
    // Seen from no process (pid 0): gone when its pid is dead, or its fresh presence record is
    // another incarnation or no longer lists the session.
    let nobody = Drainer::default();
    let started = (h.holder_started_at != 0).then_some(h.holder_started_at);
    let gone = is_mine_or_orphan(
        &nobody,
        pid,
        started,
        session,
        &mut Vec::new(),
        home,
        now_ms,
    );
    Some(if gone {
        QueuedState::Lost {
            pid: h.holder_pid,
            handed_back: h.handed_back.is_some(),
            redeliveries: h.redeliveries,
        }
    } else {
        QueuedState::Queued {
            pid,
            redeliveries: h.redeliveries,
        }
    })
}

#[cfg(all(test, unix))]
mod tests;
