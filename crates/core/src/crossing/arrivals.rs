//! The receiving side's durable record of each send that arrived from a linked machine
//! (`machine/arrivals/`): the **claim** `<key>.json`, written and fsynced before anything is delivered
//! and never rewritten after, then the **answer** the send path gave, `<key>.answer.json` beside it
//! (not fsynced: see below). A request id seen again — the sender's retry after a timeout, its outbox
//! drained by another process, a replay — is answered from the record and delivered nothing; one
//! still in flight answers `busy` (the sender tries later); one whose process died between the claim
//! and the answer is settled by the target's log (landed there: accepted; else delivered again with
//! the same request id, which the host itself deduplicates).
//!
//! Why only the claim is durable: the claim is what keeps a second delivery out, so it is on disk
//! before the message goes anywhere. How (the **claim journal**): the claim's own file is linked into
//! place unsynced — the name is what makes a claim exclusive between the processes of a home (a hard
//! link fails on a name that exists) — and then its record is appended to `arrivals/claims.journal`
//! and `fdatasync`ed under a `flock` of the journal: an append to a file that exists costs about a third
//! of a new file's fsync (0.21 vs 0.66 ms here). A system crash may lose the unsynced claim file but not
//! its journal line: each process, before its first claim in a home, puts back every claim the journal
//! holds whose file is missing (durably: [`recover`]). Once the journal has grown to [`CHECKPOINT_AT`],
//! the hourly [`sweep`] starts a checkpoint on a thread of its own (no claim waits for it): the journal is
//! set aside under its lock (appends go to a new one), the file system flushed (`syncfs`), the set-aside
//! journal removed; a crash in between leaves it for [`recover`]. The journal is a claim like any file of the home: read
//! bounded ([`JOURNAL_CAP`]), never through a link or of another owner, and a line that does not read
//! as an arrival is skipped. An answer lost in a crash of the system (a process crash loses
//! nothing: the page cache keeps it) or torn leaves a claim without an answer — exactly what a process
//! that died after delivering leaves, which [`STALE_CLAIM_MS`] later is settled from the target's log
//! (tested: `remote::tests::a_claim_left_without_its_answer_is_settled_from_the_targets_log_not_delivered_twice`).
//! The answer lives in its own file so that no write after the claim can tear the claim itself.
//!
//! The answer leaves before its record is written ([`answering`], then [`answer`] on a blocking task of
//! its own: the record is off the arriving send's critical path). Meanwhile a repeat served by this
//! process is answered from memory ([`given`]); one served by another process of the home sees the
//! claim in flight and answers `busy` (its sender tries again later) — never delivered twice either way
//! (tested: `remote::tests::the_answer_leaves_before_its_record_and_a_repeat_in_between_is_never_delivered_twice`).
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

impl Arrival {
    /// The same arrival as `o`: from the same machine, for the same target, from the same sender (a
    /// record of another is never believed for this one, whatever its request id).
    pub fn same_as(&self, o: &Arrival) -> bool {
        self.from == o.from && self.target == o.target && self.sender == o.sender
    }
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
    /// [`MAX_RECORDS`] records are kept already: nothing is claimed or delivered (the sender's outbox
    /// tries again later; the hourly [`sweep`] makes room as records pass [`KEEP_MS`]).
    Full,
}

/// How often a process sweeps a home's records ([`sweep`], from [`claim`]).
pub const SWEEP_EVERY_MS: i64 = 3600 * 1000;

/// Per home, in this process: the claim records counted by the last [`sweep`] (plus the claims made
/// since) and when that sweep ran.
static COUNTED: std::sync::Mutex<Vec<(PathBuf, usize, i64)>> = std::sync::Mutex::new(Vec::new());

/// The records of `home` as this process counts them, sweeping first when it never did or
/// [`SWEEP_EVERY_MS`] passed; `add` more are counted.
fn count(home: &Path, now_ms: i64, add: usize) -> usize {
    let due = {
        let c = COUNTED.lock().unwrap_or_else(|p| p.into_inner());
        c.iter()
            .find(|(h, ..)| h == home)
            .is_none_or(|(_, _, at)| now_ms.saturating_sub(*at) >= SWEEP_EVERY_MS)
    };
    let swept = due.then(|| sweep(home, now_ms, 2 * MAX_RECORDS + 1024));
    let mut c = COUNTED.lock().unwrap_or_else(|p| p.into_inner());
    let i = match c.iter().position(|(h, ..)| h == home) {
        Some(i) => i,
        None => {
            c.push((home.to_path_buf(), 0, now_ms));
            c.len() - 1
        }
    };
    if let Some(n) = swept {
        c[i] = (home.to_path_buf(), n, now_ms);
    }
    c[i].1 += add;
    c[i].1
}

fn dir(home: &Path) -> PathBuf {
    super::dir(home).join("arrivals")
}
fn path(home: &Path, request_id: &str) -> PathBuf {
    dir(home).join(format!("{}.json", super::file_key(request_id)))
}
fn answer_path(home: &Path, request_id: &str) -> PathBuf {
    dir(home).join(format!("{}.answer.json", super::file_key(request_id)))
}

const JOURNAL: &str = "claims.journal";

fn journal_path(home: &Path) -> PathBuf {
    dir(home).join(JOURNAL)
}

/// A journal a checkpoint set aside (`claims.journal.<uuid>.old`): removed once the file system is
/// flushed; one a crash left behind is read by [`recover`].
fn is_set_aside(name: &str) -> bool {
    name.len() <= 64 && name.starts_with("claims.journal.") && name.ends_with(".old")
}

/// The most journals [`recover`] reads (the current one and those set aside).
pub const MAX_JOURNALS: usize = 16;

/// The most of one journal read ([`recover`]: its last `JOURNAL_CAP` bytes, where the newest claims
/// are); a checkpoint sets it aside once it reaches [`CHECKPOINT_AT`] ([`sweep`]): ~300 bytes a claim.
pub const JOURNAL_CAP: u64 = 16 * 1024 * 1024;

/// The journal opened for appending (created 0600, never through a link, a regular file of this user)
/// and locked (`flock`, exclusive, waited for at most [`JOURNAL_LOCK_WAIT`]; released when the file is
/// dropped) — the file at its name once the
/// lock is held (a checkpoint may set it aside between the open and the lock: then opened again). A name
/// taken by anything else (a link, a folder, a pipe, another user's file) is never followed or written:
/// it is moved aside once ([`heal_journal`]) and a fresh journal started, so it does not refuse every
/// arriving send `busy` until someone removes it.
fn journal_locked(home: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let p = journal_path(home);
    let mut healed = false;
    for _ in 0..8 {
        let opened = std::fs::OpenOptions::new()
            .append(true)
            .read(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&p);
        let f = match opened {
            Ok(f) => f,
            // a link (ELOOP under O_NOFOLLOW), a folder, a file we may not write
            Err(e) if !healed && not_a_journal(&e) => {
                heal_journal(home)?;
                healed = true;
                continue;
            }
            Err(e) => return Err(e),
        };
        let m = f.metadata()?;
        if !m.is_file() || fsafe::foreign_owner(&m).is_some() {
            drop(f);
            if !healed {
                heal_journal(home)?;
                healed = true;
                continue;
            }
            return Err(std::io::Error::other(
                "the claim journal is not a file of ours",
            ));
        }
        // (bounded: any process of the user may take this lock and keep it; the claim is then `busy`)
        fsafe::flock_within(&f, JOURNAL_LOCK_WAIT)?;
        let now = std::fs::symlink_metadata(&p).ok();
        if now.is_some_and(|n| n.dev() == m.dev() && n.ino() == m.ino()) {
            return Ok(f);
        }
    }
    Err(std::io::Error::other(
        "the claim journal kept being set aside",
    ))
}

/// The open of the journal's name failed because what is there is no journal of ours.
fn not_a_journal(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ELOOP | libc::EISDIR | libc::EACCES | libc::EPERM | libc::ENXIO)
    )
}

/// What `claims.journal`'s name holds when it is no journal of ours is moved to `claims.journal.bad`
/// (replacing an earlier one; never read: only `.old` journals are read back), under [`HEAL_LOCK`]
/// (`fsafe::Flock::lock_within`), and only if the name still holds something that is not a regular file of this
/// user once the lock is held — a journal another process started meanwhile is never moved. Nothing is
/// followed: rename moves a link itself, not what it names.
fn heal_journal(home: &Path) -> std::io::Result<()> {
    let d = dir(home);
    // (any process of the user can take it: waited for at most HEAL_WAIT, then the claim fails as before)
    let _lock = fsafe::Flock::lock_within(&d.join(HEAL_LOCK), HEAL_WAIT)?;
    let p = journal_path(home);
    match std::fs::symlink_metadata(&p) {
        Ok(m) if m.is_file() && fsafe::foreign_owner(&m).is_none() => Ok(()),
        Ok(_) => {
            let bad = d.join(BAD_JOURNAL);
            std::fs::rename(&p, &bad).or_else(|_| {
                // an earlier one of another kind (a folder cannot replace a file, nor a file a folder):
                // it goes if it is a file, a link or an empty folder, then this one takes its name
                let _ = std::fs::remove_file(&bad).or_else(|_| std::fs::remove_dir(&bad));
                std::fs::rename(&p, &bad)
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Where [`heal_journal`] moves what took the journal's name.
const BAD_JOURNAL: &str = "claims.journal.bad";
/// The lock [`heal_journal`] moves it under (never swept: [`sweep`] keeps the journal's names).
const HEAL_LOCK: &str = "claims.journal.lock";
/// How long [`heal_journal`] waits for [`HEAL_LOCK`].
const HEAL_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a claim waits for the journal's lock (held by others for an append and its flush, ~0.2 ms;
/// past it — a process keeping it — the claim fails and the send is answered `busy`, its thread freed).
const JOURNAL_LOCK_WAIT: std::time::Duration = if cfg!(test) {
    std::time::Duration::from_millis(400)
} else {
    std::time::Duration::from_secs(5)
};

/// Append `a`'s record to the journal and flush it to the disk (`fdatasync`).
fn journal_append(home: &Path, a: &Arrival) -> std::io::Result<()> {
    journal_append_line(home, a, true)
}

/// A released claim's line in the journal ([`release`]): [`recover`] puts back no claim of that request id
/// and claim time. (A line an older build reads as no arrival, and skips.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Released {
    released: String,
    claimed_at: i64,
}

/// Append `line`'s JSON to the journal, flushed to the disk (`fdatasync`) when `sync`.
fn journal_append_line<T: Serialize>(home: &Path, rec: &T, sync: bool) -> std::io::Result<()> {
    use std::io::Write;
    let mut line = serde_json::to_vec(rec).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut f = journal_locked(home)?;
    // a torn last line (a crash mid-append) would swallow this one: a newline first
    let len = f.metadata()?.len();
    if len > 0 {
        use std::os::unix::fs::FileExt;
        let mut last = [0u8; 1];
        if f.read_at(&mut last, len - 1)? == 1 && last[0] != b'\n' {
            line.insert(0, b'\n');
        }
    }
    f.write_all(&line)?;
    if sync {
        f.sync_data()?;
    }
    Ok(())
}

/// The last [`JOURNAL_CAP`] bytes of the journal at `p` (never through a link, only a regular file of
/// this user), from its first whole line.
fn journal_tail(p: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek};
    let (mut f, m) = fsafe::open_regular(p, Follow::No, None)?;
    if fsafe::foreign_owner(&m).is_some() {
        return Err(std::io::Error::other("the claim journal is not ours"));
    }
    let from = m.len().saturating_sub(JOURNAL_CAP);
    f.seek(std::io::SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    f.take(JOURNAL_CAP).read_to_end(&mut bytes)?;
    if from > 0 {
        let cut = bytes
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        bytes.drain(..cut);
    }
    Ok(bytes)
}

/// Homes whose claim journal this process has recovered ([`recover`], once per home).
static RECOVERED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Put back, durably, every claim the journals hold whose file is missing (a system crash lost it
/// before it reached the disk); once per home in this process, before its first claim there. Returns
/// how many were put back.
pub fn recover(home: &Path) -> std::io::Result<usize> {
    let mut done = RECOVERED.lock().unwrap_or_else(|p| p.into_inner());
    if done.iter().any(|h| h == home) {
        return Ok(0);
    }
    let n = recover_now(home)?;
    done.push(home.to_path_buf());
    Ok(n)
}

fn recover_now(home: &Path) -> std::io::Result<usize> {
    let d = super::ensure(home, Some("arrivals"))?;
    // (locked: no append is half-written while it is read, and no checkpoint sets one aside)
    let _lock = journal_locked(home)?;
    // the journals a checkpoint set aside and did not get to remove (a crash between), then the current
    let mut aside: Vec<PathBuf> = std::fs::read_dir(&d)?
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(is_set_aside))
        .map(|e| e.path())
        .take(MAX_JOURNALS - 1)
        .collect();
    aside.sort();
    let journals: Vec<PathBuf> = aside
        .iter()
        .cloned()
        .chain(std::iter::once(journal_path(home)))
        .collect();
    // the claims released since (a line after the claim's, in its journal or a later one): not put back
    let mut released = std::collections::HashSet::new();
    for p in &journals {
        let Ok(bytes) = journal_tail(p) else {
            continue;
        };
        for line in bytes.split(|b| *b == b'\n') {
            if let Ok(r) = serde_json::from_slice::<Released>(line) {
                released.insert((r.released, r.claimed_at));
            }
        }
    }
    let mut put_back = 0;
    for p in &journals {
        // unreadable (not ours, a link, gone): nothing of it is believed or put back
        let Ok(bytes) = journal_tail(p) else {
            continue;
        };
        for line in bytes.split(|b| *b == b'\n') {
            let Ok(a) = serde_json::from_slice::<Arrival>(line) else {
                continue;
            };
            if !a.request_id.starts_with(base::names::REQUEST_ID_PREFIX) || a.answer.is_some() {
                continue;
            }
            if released.contains(&(a.request_id.clone(), a.claimed_at)) {
                continue;
            }
            let p = path(home, &a.request_id);
            // there and of this arrival (a renewed claim has a later time): nothing to do
            let there = read_record(&p, &a.request_id);
            if there.is_some_and(|o| o.same_as(&a)) {
                continue;
            }
            // missing, or torn or emptied by the crash (linked before its bytes reached the disk)
            let rec = serde_json::to_vec(&a).map_err(std::io::Error::other)?;
            let put = fsafe::Put {
                sync: true,
                replace: true,
            };
            fsafe::write_private(&d, &p, &rec, put)?;
            put_back += 1;
        }
    }
    // what they held is on the disk now (put back above, or there: flushed with the file system)
    if !aside.is_empty() && syncfs(&d).is_ok() {
        for p in &aside {
            let _ = std::fs::remove_file(p);
        }
    }
    Ok(put_back)
}

/// Flush the file system `d` lives on.
fn syncfs(d: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(d)?;
    // SAFETY: syncfs on a descriptor we own.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Set the journal aside (under its lock: appends go to a new journal from then on), flush the file
/// system (outside the lock: no claim waits for it; every claim file named in the set-aside journal was
/// linked before it was set aside, so it is on the disk after), then remove it. A crash in between
/// leaves it for [`recover`].
fn checkpoint(home: &Path) -> std::io::Result<()> {
    let aside = {
        let f = journal_locked(home)?;
        if f.metadata()?.len() == 0 {
            return Ok(());
        }
        let aside = dir(home).join(format!("{JOURNAL}.{}.old", uuid::Uuid::new_v4().simple()));
        std::fs::rename(journal_path(home), &aside)?;
        aside
    };
    syncfs(&dir(home))?;
    std::fs::remove_file(&aside)
}

/// How long the journal grows before the hourly [`sweep`] sets it aside (~800 claims): what
/// [`recover`] reads stays small, and the file system is flushed for it rarely.
pub const CHECKPOINT_AT: u64 = 256 * 1024;

/// [`checkpoint`] on a thread of its own once the journal has reached [`CHECKPOINT_AT`]: the flush may
/// take seconds on a busy disk, and the sweep runs inside a claim's trip.
fn checkpoint_aside(home: &Path) {
    let big = std::fs::symlink_metadata(journal_path(home)).is_ok_and(|m| m.len() >= CHECKPOINT_AT);
    if !big {
        return;
    }
    let h = home.to_path_buf();
    let _ = std::thread::Builder::new()
        .name("dsh-session-mail-claims-checkpoint".into())
        .spawn(move || checkpoint(&h));
}

fn read_record(p: &Path, request_id: &str) -> Option<Arrival> {
    let (bytes, m) = fsafe::read_capped(p, Follow::No, 64 * 1024).ok()?;
    if fsafe::foreign_owner(&m).is_some() {
        return None;
    }
    serde_json::from_slice::<Arrival>(&bytes)
        .ok()
        .filter(|a| a.request_id == request_id)
}

/// The record of `request_id`, if its claim exists and reads: with its answer when the answer file
/// reads and is of the same arrival (a missing, torn or foreign answer file is no answer).
pub fn lookup(home: &Path, request_id: &str) -> Option<Arrival> {
    let mut a = read_record(&path(home, request_id), request_id)?;
    if a.answer.is_none() {
        a.answer = read_record(&answer_path(home, request_id), request_id)
            .filter(|x| x.same_as(&a))
            .and_then(|x| x.answer);
    }
    Some(a)
}

/// Claim `a.request_id` (on disk before the caller delivers anything: its file linked, its record in
/// the journal, flushed).
pub fn claim(home: &Path, a: &Arrival, now_ms: i64) -> std::io::Result<Claim> {
    claim_within(home, a, now_ms, MAX_RECORDS)
}

/// [`claim`] with at most `max` records kept.
fn claim_within(home: &Path, a: &Arrival, now_ms: i64, max: usize) -> std::io::Result<Claim> {
    let d = super::ensure(home, Some("arrivals"))?;
    // a claim a system crash lost is back before any is looked at
    recover(home)?;
    // a request id seen before is answered from its record whatever the count: only a new one is refused
    if count(home, now_ms, 0) >= max && lookup(home, &a.request_id).is_none() {
        return Ok(Claim::Full);
    }
    let bytes = serde_json::to_vec(a).map_err(std::io::Error::other)?;
    // the name makes it exclusive; the journal makes it durable
    let p = path(home, &a.request_id);
    match link_claim(home, &d, &p, &bytes) {
        Ok(()) => {
            if let Err(e) = journal_append(home, a) {
                // not durable: taken back, nothing delivered (the retry claims anew)
                let _ = std::fs::remove_file(&p);
                return Err(e);
            }
            count(home, now_ms, 1);
            Ok(Claim::New)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let Some(old) = lookup(home, &a.request_id) else {
                // there, but not a record of ours: never delivered over it
                return Ok(Claim::Mismatch);
            };
            if !old.same_as(a) {
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

/// Per home, in this process: an unnamed private file made in `arrivals/` ahead of the next claim
/// ([`prepare`]): making an inode is most of a claim file's cost besides the flush (~0.2–0.4 ms of
/// system time here, against ~0.05 ms to write and name one made before), so it is made after a claim's
/// answer has left, off the next one's path. Invisible until a claim names it; dropped with the process.
static SPARE: std::sync::Mutex<Vec<(PathBuf, fsafe::Unnamed)>> = std::sync::Mutex::new(Vec::new());

/// Make the spare file the next claim in `home` names ([`SPARE`]), unless one is waiting. Run it off an
/// arriving send's path (after its answer left); a failure only leaves the next claim to make its own.
pub fn prepare(home: &Path) {
    let has = |s: &Vec<(PathBuf, fsafe::Unnamed)>| s.iter().any(|(h, _)| h == home);
    if has(&SPARE.lock().unwrap_or_else(|p| p.into_inner())) {
        return;
    }
    let Ok(d) = super::ensure(home, Some("arrivals")) else {
        return;
    };
    let Some(u) = fsafe::Unnamed::create_in(&d) else {
        return;
    };
    let mut s = SPARE.lock().unwrap_or_else(|p| p.into_inner());
    if !has(&s) {
        s.push((home.to_path_buf(), u));
    }
}

/// Is a spare file waiting for the next claim in `home` (for the tests)?
#[cfg(test)]
pub(crate) fn spare_waiting(home: &Path) -> bool {
    SPARE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|(h, _)| h == home)
}

fn take_spare(home: &Path) -> Option<fsafe::Unnamed> {
    let mut s = SPARE.lock().unwrap_or_else(|p| p.into_inner());
    let i = s.iter().position(|(h, _)| h == home)?;
    Some(s.swap_remove(i).1)
}

/// Give the claim file `p` (in `d`, this home's `arrivals/`) the `bytes`, never replacing one there
/// (`AlreadyExists`: claimed before): the spare file [`prepare`] made when there is one, else a new one.
fn link_claim(home: &Path, d: &Path, p: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let put = fsafe::Put {
        sync: false,
        replace: false,
    };
    match take_spare(home) {
        Some(u) if u.dir() == d => match u.link(p, bytes) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
            // (another file system under the same name since, …): a new file, as without a spare
            Err(_) => fsafe::write_private(d, p, bytes, put),
        },
        _ => fsafe::write_private(d, p, bytes, put),
    }
}

/// Answers this process gave and has not recorded yet ([`answering`] until [`answer`] wrote them), per
/// home. Bounded: past [`MAX_GIVEN`] the oldest is forgotten (its repeat is then `busy` until its record
/// is on disk, as in another process).
static GIVEN: std::sync::Mutex<Vec<(PathBuf, Arrival)>> = std::sync::Mutex::new(Vec::new());
/// Answers kept in memory at most while their records are written.
pub const MAX_GIVEN: usize = 4096;

/// `ans` was given to `a` and its record is about to be written: until [`answer`] has written it, a
/// repeat served by this process is answered from memory ([`given`]).
pub fn answering(home: &Path, a: &Arrival, ans: &SendAnswer) {
    let mut rec = a.clone();
    rec.answer = Some(ans.clone());
    let mut g = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    if g.len() >= MAX_GIVEN {
        g.remove(0);
    }
    g.push((home.to_path_buf(), rec));
}

/// The answer this process gave to the arrival `a` claimed (the same request id, machine, target and
/// sender) whose record is still being written; `None` once it is on disk, or never given here.
pub fn given(home: &Path, a: &Arrival) -> Option<SendAnswer> {
    let g = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    g.iter()
        .rev()
        .find(|(h, r)| h == home && r.request_id == a.request_id && r.same_as(a))
        .and_then(|(_, r)| r.answer.clone())
}

/// The answer given to the arrival `a` whose claim was found in flight: from this process's memory
/// while its record is being written ([`given`]), else from the record. In this order: [`answer`]
/// forgets what it gave only once the record is written, so a record the claim's look missed just
/// before it was written is on disk by the time memory no longer has it.
pub fn answered(home: &Path, a: &Arrival) -> Option<SendAnswer> {
    given(home, a).or_else(|| {
        lookup(home, &a.request_id)
            .filter(|x| x.same_as(a))
            .and_then(|x| x.answer)
    })
}

/// Record the answer given to `a`, beside its claim (not fsynced: a lost answer is a claim without
/// one, settled from the target's log — the module's note); from then on it is no longer [`given`]
/// from memory (written or not: a record that could not be written leaves the claim in flight).
pub fn answer(home: &Path, a: &Arrival, ans: &SendAnswer) -> std::io::Result<()> {
    let r = write_answer(home, a, ans);
    let mut g = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    g.retain(|(h, x)| !(h == home && x.request_id == a.request_id));
    r
}

fn write_answer(home: &Path, a: &Arrival, ans: &SendAnswer) -> std::io::Result<()> {
    let d = super::ensure(home, Some("arrivals"))?;
    let mut rec = a.clone();
    rec.answer = Some(ans.clone());
    let bytes = serde_json::to_vec(&rec).map_err(std::io::Error::other)?;
    let put = fsafe::Put {
        sync: false,
        replace: true,
    };
    fsafe::write_private(&d, &answer_path(home, &a.request_id), &bytes, put)
}

/// Take back the claim this process just made for `a` and delivered nothing under (the host's facts did
/// not come: the request is refused `unavailable`, and the sender's retry may claim it anew). Only a claim
/// without an answer of the same arrival is removed; the journal is told (a line naming the request id and
/// claim time, not flushed), so that a process started afterwards does not put the claim back from its
/// journal line and answer the retry `busy` until the claim is stale. (Lost in a crash of the system, the
/// line leaves that: busy, then settled from the target's log — never a second delivery.)
pub fn release(home: &Path, a: &Arrival) -> std::io::Result<()> {
    match read_record(&path(home, &a.request_id), &a.request_id) {
        Some(old)
            if old.same_as(a)
                && old.claimed_at == a.claimed_at
                && lookup(home, &a.request_id).is_some_and(|l| l.answer.is_none()) =>
        {
            std::fs::remove_file(path(home, &a.request_id))?;
            let line = Released {
                released: a.request_id.clone(),
                claimed_at: a.claimed_at,
            };
            journal_append_line(home, &line, false)
        }
        _ => Ok(()),
    }
}

/// Retake a stale claim (its process died): the claim is renewed at `now_ms` (fsynced, as a claim).
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

/// Remove records older than [`KEEP_MS`] (at most `max_scan` names looked at), and start the claims
/// journal's checkpoint when it has grown ([`checkpoint_aside`]: the journal set aside, the claims
/// flushed, the journal removed).
/// Returns how many claim records (not their answer files) are left among those scanned.
pub fn sweep(home: &Path, now_ms: i64, max_scan: usize) -> usize {
    let Ok(rd) = std::fs::read_dir(dir(home)) else {
        return 0;
    };
    checkpoint_aside(home);
    let mut left = 0;
    for e in rd.flatten().take(max_scan) {
        let p = e.path();
        let old = e
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .is_some_and(|t| now_ms.saturating_sub(t.as_millis() as i64) > KEEP_MS);
        // (never a journal: a process may be about to append to it, a checkpoint to remove it)
        let journal = e
            .file_name()
            .to_str()
            .is_some_and(|n| n == JOURNAL || n == HEAL_LOCK || is_set_aside(n));
        if old && e.file_type().is_ok_and(|t| t.is_file()) && !journal {
            let _ = std::fs::remove_file(p);
        } else if e.file_name().to_string_lossy().ends_with(".json")
            && !e.file_name().to_string_lossy().ends_with(".answer.json")
        {
            left += 1;
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::wire::Landing;

    const RID: &str = "dsh-session-mail:00000000-0000-4000-8000-0000000000c1";

    fn arrival(at: i64) -> Arrival {
        Arrival {
            request_id: RID.into(),
            from: MachineId::parse(&"a".repeat(64)).unwrap(),
            target: "session-t".into(),
            sender: "session-s".into(),
            claimed_at: at,
            answer: None,
        }
    }
    fn accepted() -> SendAnswer {
        SendAnswer {
            request_id: RID.into(),
            landing: Landing::Accepted {
                woke: false,
                waiting: true,
            },
            hop: 1,
            repeated: false,
        }
    }

    #[test]
    fn the_answer_is_kept_beside_the_claim_and_never_rewrites_it() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let a = arrival(1_000);
        assert_eq!(claim(h, &a, 1_000).unwrap(), Claim::New);
        let claimed = std::fs::read(path(h, RID)).unwrap();
        answer(h, &a, &accepted()).unwrap();
        // the fsynced claim is the same bytes after the answer: no later write can tear it
        assert_eq!(std::fs::read(path(h, RID)).unwrap(), claimed);
        assert_eq!(lookup(h, RID).unwrap().answer, Some(accepted()));
        assert_eq!(claim(h, &a, 2_000).unwrap(), Claim::Answered(accepted()));
    }

    #[test]
    fn a_claim_names_the_spare_file_made_before_it_and_the_name_still_keeps_a_repeat_out() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        prepare(h);
        assert!(spare_waiting(h));
        let names = || -> Vec<String> {
            std::fs::read_dir(dir(h))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        };
        assert!(names().is_empty(), "a spare is no file anyone sees");
        let a = arrival(1_000);
        assert_eq!(claim(h, &a, 1_000).unwrap(), Claim::New);
        assert!(!spare_waiting(h), "named by the claim");
        assert_eq!(lookup(h, RID), Some(a.clone()));
        let m = std::fs::symlink_metadata(path(h, RID)).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        let claimed = std::fs::read(path(h, RID)).unwrap();
        // a repeat with a spare waiting: the name is taken, in flight, never New, the claim unchanged
        prepare(h);
        let mut later = a.clone();
        later.claimed_at = 1_500;
        assert!(matches!(claim(h, &later, 1_500).unwrap(), Claim::InFlight(o) if o == a));
        assert_eq!(std::fs::read(path(h, RID)).unwrap(), claimed);
        assert_eq!(journal_lines(h), vec![a.clone()]);
        // the folder removed since the spare was made: the claim is still made, in the folder made anew
        prepare(h);
        std::fs::remove_dir_all(dir(h)).unwrap();
        let mut b = arrival(1_000);
        b.request_id = "dsh-session-mail:00000000-0000-4000-8000-0000000000c5".into();
        assert_eq!(claim(h, &b, 1_000).unwrap(), Claim::New);
        assert_eq!(lookup(h, &b.request_id), Some(b));
    }

    #[test]
    fn release_takes_back_only_its_own_unanswered_claim() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let a = arrival(1_000);
        assert_eq!(claim(h, &a, 1_000).unwrap(), Claim::New);
        // another arrival's release (another target, another claim time) leaves it
        let mut other = a.clone();
        other.target = "session-other".into();
        release(h, &other).unwrap();
        release(h, &arrival(999)).unwrap();
        assert!(lookup(h, RID).is_some());
        // its own: gone, and the retry claims anew
        release(h, &a).unwrap();
        assert!(lookup(h, RID).is_none());
        let b = arrival(2_000);
        assert_eq!(claim(h, &b, 2_000).unwrap(), Claim::New);
        // once answered, a release removes nothing: the answer stays the one given
        answer(h, &b, &accepted()).unwrap();
        release(h, &b).unwrap();
        assert_eq!(claim(h, &b, 3_000).unwrap(), Claim::Answered(accepted()));
    }

    #[test]
    fn a_lost_or_torn_answer_leaves_a_claim_in_flight_then_stale_never_new() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let a = arrival(1_000);
        assert_eq!(claim(h, &a, 1_000).unwrap(), Claim::New);
        answer(h, &a, &accepted()).unwrap();
        // a crash of the system before the unsynced answer reached the disk: torn, or empty
        for torn in [&b"{\"requestId\":\"dsh-sess"[..], &b""[..]] {
            std::fs::write(answer_path(h, RID), torn).unwrap();
            assert_eq!(lookup(h, RID).unwrap().answer, None);
            assert!(matches!(claim(h, &a, 1_500).unwrap(), Claim::InFlight(_)));
            let late = 1_000 + STALE_CLAIM_MS + 1;
            assert!(matches!(claim(h, &a, late).unwrap(), Claim::Stale(_)));
        }
        // an answer file of another arrival (forged beside the claim) is no answer either
        let mut other = a.clone();
        other.target = "session-other".into();
        answer(h, &other, &accepted()).unwrap();
        assert_eq!(lookup(h, RID).unwrap().answer, None);
        // and with no answer file at all
        std::fs::remove_file(answer_path(h, RID)).unwrap();
        assert!(matches!(claim(h, &a, 1_500).unwrap(), Claim::InFlight(_)));
    }

    /// A new process of the home (what [`recover`] remembers is per process).
    fn as_a_new_process(h: &Path) {
        RECOVERED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|x| x != h);
    }

    /// Is a set-aside journal there (a checkpoint between its rename and its removal, or a crash's)?
    fn set_aside(h: &Path) -> bool {
        std::fs::read_dir(dir(h))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_str().is_some_and(is_set_aside))
    }

    fn journal_lines(h: &Path) -> Vec<Arrival> {
        std::fs::read(journal_path(h))
            .unwrap_or_default()
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect()
    }

    #[test]
    fn a_released_claim_is_not_put_back_by_the_next_process_so_its_retry_is_claimed_anew_not_busy()
    {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let a = arrival(1_000);
        assert_eq!(claim(h, &a, 1_000).unwrap(), Claim::New);
        release(h, &a).unwrap();
        // a process started afterwards recovers the home: the released claim stays released
        as_a_new_process(h);
        assert_eq!(recover(h).unwrap(), 0);
        assert!(lookup(h, RID).is_none());
        // the sender's retry claims it anew at once (before the journal's release line: `InFlight`, busy
        // until the claim was stale)
        let b = arrival(2_000);
        assert_eq!(claim(h, &b, 2_000).unwrap(), Claim::New);
        // that new claim (another claim time) is one the release line does not cover: a crash that
        // loses its file has it put back
        std::fs::remove_file(path(h, RID)).unwrap();
        as_a_new_process(h);
        assert_eq!(recover(h).unwrap(), 1);
        assert_eq!(lookup(h, RID).map(|l| l.claimed_at), Some(2_000));
        // a release line in a later journal than its claim's (a checkpoint set the claim's journal aside
        // in between, and a crash kept it): still not put back
        let mut c = arrival(3_000);
        c.request_id = "dsh-session-mail:00000000-0000-4000-8000-0000000000c7".into();
        assert_eq!(claim(h, &c, 3_000).unwrap(), Claim::New);
        std::fs::rename(
            journal_path(h),
            dir(h).join("claims.journal.00000000-0000-4000-8000-000000000001.old"),
        )
        .unwrap();
        release(h, &c).unwrap();
        assert!(set_aside(h));
        as_a_new_process(h);
        assert_eq!(recover(h).unwrap(), 0);
        assert!(lookup(h, &c.request_id).is_none());
    }

    #[test]
    fn a_claim_file_a_crash_lost_or_tore_is_put_back_from_the_journal_never_claimed_anew() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let a = arrival(1_000);
        let mut b = arrival(1_000);
        b.request_id = "dsh-session-mail:00000000-0000-4000-8000-0000000000c2".into();
        assert_eq!(claim(h, &a, 1_000).unwrap(), Claim::New);
        assert_eq!(claim(h, &b, 1_000).unwrap(), Claim::New);
        assert_eq!(journal_lines(h), vec![a.clone(), b.clone()]);
        // the system crashed before the unsynced files reached the disk: one is gone, one linked empty
        std::fs::remove_file(path(h, &a.request_id)).unwrap();
        std::fs::write(path(h, &b.request_id), b"").unwrap();
        as_a_new_process(h);
        // the retries after the restart: in flight (then stale, settled from the target's log), never New
        assert!(matches!(claim(h, &a, 1_500).unwrap(), Claim::InFlight(o) if o == a));
        assert!(matches!(claim(h, &b, 1_500).unwrap(), Claim::InFlight(o) if o == b));
        assert_eq!(lookup(h, &a.request_id), Some(a.clone()));
        // a process that finds them all there puts nothing back
        as_a_new_process(h);
        assert_eq!(recover(h).unwrap(), 0);
    }

    #[test]
    fn racing_claimers_of_one_request_id_one_wins_and_it_alone_is_journaled() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().to_path_buf();
        for round in 0..20 {
            let mut a = arrival(1_000);
            a.request_id = format!("dsh-session-mail:00000000-0000-4000-8000-{round:012}");
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
            let racers: Vec<_> = (0..6)
                .map(|_| {
                    let (h, a, barrier) = (h.clone(), a.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        claim(&h, &a, 1_000).unwrap()
                    })
                })
                .collect();
            let claims: Vec<Claim> = racers.into_iter().map(|t| t.join().unwrap()).collect();
            assert_eq!(
                claims.iter().filter(|c| **c == Claim::New).count(),
                1,
                "{claims:?}"
            );
            assert!(claims
                .iter()
                .all(|c| matches!(c, Claim::New | Claim::InFlight(_))));
            let journaled = journal_lines(&h);
            assert_eq!(
                journaled
                    .iter()
                    .filter(|j| j.request_id == a.request_id)
                    .count(),
                1
            );
        }
    }

    /// One racer of [`racing_claimers_in_three_processes_one_wins_each_request_id_and_it_alone_is_journaled`]:
    /// run by that test as a process of its own (this test binary, this test alone); a no-op otherwise.
    #[test]
    fn claim_racer_process() {
        let Ok(home) = std::env::var("ARRIVALS_RACER_HOME") else {
            return;
        };
        let h = PathBuf::from(home);
        let go = h.join("go");
        println!("RACER ready");
        let t = std::time::Instant::now();
        while !go.exists() {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(30),
                "never told to go"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        for round in 0..RACER_ROUNDS {
            let mut a = arrival(1_000);
            a.request_id = format!("dsh-session-mail:00000000-0000-4000-8000-{round:012}");
            let c = claim(&h, &a, 1_000).unwrap();
            println!("RACER {round} {}", matches!(c, Claim::New));
        }
    }

    const RACER_ROUNDS: usize = 40;

    #[test]
    fn racing_claimers_in_three_processes_one_wins_each_request_id_and_it_alone_is_journaled() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let racers: Vec<_> = (0..3)
            .map(|_| {
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args([
                        "--exact",
                        "crossing::arrivals::tests::claim_racer_process",
                        "--nocapture",
                        "--test-threads",
                        "1",
                    ])
                    .env("ARRIVALS_RACER_HOME", h)
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        // each racer up (its binary loaded) before any claims: then they race
        std::thread::sleep(std::time::Duration::from_millis(300));
        std::fs::write(h.join("go"), b"").unwrap();
        let mut won = vec![0usize; RACER_ROUNDS];
        let mut by = Vec::new();
        for r in racers {
            let out = r.wait_with_output().unwrap();
            assert!(out.status.success());
            let text = String::from_utf8(out.stdout).unwrap();
            let lines: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("RACER "))
                .filter(|l| *l != "ready")
                .collect();
            assert_eq!(lines.len(), RACER_ROUNDS, "{text}");
            by.push(lines.iter().filter(|l| l.ends_with("true")).count());
            for l in lines {
                let (round, new) = l.split_once(' ').unwrap();
                if new == "true" {
                    won[round.parse::<usize>().unwrap()] += 1;
                }
            }
        }
        // (`by`: how many each process won — they do race: e.g. [11, 13, 16] here)
        assert!(
            won.iter().all(|n| *n == 1),
            "{won:?} (won by process: {by:?})"
        );
        // every journal line whole (no append torn by another process's) and each request id once
        let journaled = journal_lines(h);
        let raw = std::fs::read(journal_path(h)).unwrap();
        assert_eq!(
            raw.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count(),
            RACER_ROUNDS
        );
        for round in 0..RACER_ROUNDS {
            let rid = format!("dsh-session-mail:00000000-0000-4000-8000-{round:012}");
            assert_eq!(
                journaled.iter().filter(|j| j.request_id == rid).count(),
                1,
                "{rid}"
            );
        }
    }

    #[test]
    fn a_journal_lock_kept_by_another_process_fails_the_claim_in_bounded_time_then_it_claims() {
        use std::os::fd::AsRawFd;
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let a = arrival(1_000);
        let mut b = arrival(1_000);
        b.request_id = "dsh-session-mail:00000000-0000-4000-8000-0000000000c9".into();
        assert_eq!(claim(h, &b, 1_000).unwrap(), Claim::New);
        // any process of the user may open the journal and keep its lock (its own open file: a lock of
        // another open file description, as another process's would be)
        let keeper = std::fs::File::open(journal_path(h)).unwrap();
        // SAFETY: flock on a descriptor we own.
        assert_eq!(unsafe { libc::flock(keeper.as_raw_fd(), libc::LOCK_EX) }, 0);
        let t = std::time::Instant::now();
        let kept = claim(h, &a, 1_000);
        let waited = t.elapsed();
        assert!(kept.is_err(), "{kept:?}");
        assert!(waited >= JOURNAL_LOCK_WAIT, "{waited:?}");
        assert!(waited < JOURNAL_LOCK_WAIT * 10, "{waited:?}");
        // nothing of it stays claimed: once the lock is let go the same arrival claims anew
        assert!(lookup(h, RID).is_none());
        drop(keeper);
        assert_eq!(claim(h, &a, 1_000).unwrap(), Claim::New);
    }

    #[test]
    fn a_checkpoint_sets_the_journal_aside_flushes_and_removes_it_and_the_claims_still_answer() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let a = arrival(1_000);
        assert_eq!(claim(h, &a, 1_000).unwrap(), Claim::New);
        assert_eq!(journal_lines(h).len(), 1);
        checkpoint(h).unwrap();
        assert!(journal_lines(h).is_empty());
        assert!(!set_aside(h), "the set-aside journal is removed");
        assert!(matches!(claim(h, &a, 1_500).unwrap(), Claim::InFlight(_)));
        as_a_new_process(h);
        assert_eq!(recover(h).unwrap(), 0);
        // the next claim goes to a new journal
        let mut b = arrival(1_000);
        b.request_id = "dsh-session-mail:00000000-0000-4000-8000-0000000000c4".into();
        assert_eq!(claim(h, &b, 1_000).unwrap(), Claim::New);
        assert_eq!(journal_lines(h), vec![b]);
        // a journal is never swept as an old record (a process may be appending to it)
        checkpoint(h).unwrap();
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_000);
        std::fs::File::options()
            .append(true)
            .create(true)
            .open(journal_path(h))
            .unwrap()
            .set_modified(old)
            .unwrap();
        sweep(h, 1_000 + KEEP_MS + 1, 1024);
        assert!(journal_path(h).exists());
    }

    #[test]
    fn the_sweep_checkpoints_a_grown_journal_on_its_own_thread_and_leaves_a_small_one() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let a = arrival(1_000);
        assert_eq!(claim(h, &a, 1_000).unwrap(), Claim::New);
        sweep(h, 2_000, 1024);
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(journal_lines(h), vec![a.clone()], "a small journal stays");
        // grown past CHECKPOINT_AT: set aside, flushed, removed (the sweep returns before)
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(journal_path(h))
            .unwrap();
        std::io::Write::write_all(&mut f, &vec![b'\n'; CHECKPOINT_AT as usize]).unwrap();
        sweep(h, 3_000, 1024);
        let t = std::time::Instant::now();
        while (journal_lines(h).len() + usize::from(set_aside(h)) > 0)
            && t.elapsed() < std::time::Duration::from_secs(20)
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(journal_lines(h).is_empty() && !set_aside(h));
        // the claim it named still answers
        assert!(matches!(claim(h, &a, 1_500).unwrap(), Claim::InFlight(_)));
    }

    #[test]
    fn a_journal_a_crash_left_set_aside_is_read_back_then_removed() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let a = arrival(1_000);
        assert_eq!(claim(h, &a, 1_000).unwrap(), Claim::New);
        // the checkpoint set the journal aside and the system crashed before the flush: the claim
        // file is lost, the set-aside journal is there
        let aside = dir(h).join("claims.journal.0123456789abcdef0123456789abcdef.old");
        std::fs::rename(journal_path(h), &aside).unwrap();
        std::fs::remove_file(path(h, &a.request_id)).unwrap();
        as_a_new_process(h);
        assert!(matches!(claim(h, &a, 1_500).unwrap(), Claim::InFlight(o) if o == a));
        assert!(!aside.exists(), "removed once what it held is on the disk");
    }

    #[test]
    fn an_oversized_journal_is_read_from_its_last_cap_bytes() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        crate::crossing::ensure(h, Some("arrivals")).unwrap();
        let a = arrival(1_000);
        let mut text = vec![b'x'; JOURNAL_CAP as usize + 10];
        text.push(b'\n');
        text.extend(serde_json::to_vec(&a).unwrap());
        text.push(b'\n');
        std::fs::write(journal_path(h), &text).unwrap();
        assert_eq!(recover(h).unwrap(), 1, "the newest claim is put back");
        assert_eq!(lookup(h, &a.request_id), Some(a));
    }

    #[test]
    fn a_hostile_journal_is_never_followed_but_moved_aside_and_its_junk_is_skipped() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let d = crate::crossing::ensure(h, Some("arrivals")).unwrap();
        // junk, a torn line, a line that is no request id of ours, an answered record: none put back
        let mut answered = arrival(1_000);
        answered.answer = Some(accepted());
        let mut foreign = arrival(1_000);
        foreign.request_id = "x".into();
        let mut text = b"not json\n{\"requestId\":\"dsh-sess".to_vec();
        for r in [&foreign, &answered] {
            text.push(b'\n');
            text.extend(serde_json::to_vec(r).unwrap());
        }
        std::fs::write(journal_path(h), &text).unwrap();
        assert_eq!(recover(h).unwrap(), 0);
        assert!(lookup(h, RID).is_none());
        // a claim appended after the torn line is read whole
        assert_eq!(claim(h, &arrival(1_000), 1_000).unwrap(), Claim::New);
        assert!(journal_lines(h).contains(&arrival(1_000)));
        // a link in the journal's place: never followed, never written through — moved aside and a fresh
        // journal started, so the claim is made (before: every arriving send refused `busy` until removed)
        let other = tempfile::tempdir().unwrap();
        let outside = other.path().join("elsewhere");
        std::fs::write(&outside, b"").unwrap();
        std::fs::remove_file(journal_path(h)).unwrap();
        std::os::unix::fs::symlink(&outside, journal_path(h)).unwrap();
        let mut b = arrival(1_000);
        b.request_id = "dsh-session-mail:00000000-0000-4000-8000-0000000000c3".into();
        assert_eq!(claim(h, &b, 1_000).unwrap(), Claim::New);
        assert_eq!(lookup(h, &b.request_id), Some(b.clone()));
        assert_eq!(
            std::fs::read(&outside).unwrap(),
            b"",
            "never written through"
        );
        let bad = d.join(BAD_JOURNAL);
        assert!(std::fs::symlink_metadata(&bad)
            .unwrap()
            .file_type()
            .is_symlink());
        let fresh = std::fs::symlink_metadata(journal_path(h)).unwrap();
        assert!(fresh.file_type().is_file());
        assert_eq!(journal_lines(h), vec![b.clone()]);
        // a folder, then a pipe, in its place: the same
        for (n, make) in [
            (
                0xc4u32,
                &(|p: &Path| std::fs::create_dir(p).unwrap()) as &dyn Fn(&Path),
            ),
            (0xc6, &|p: &Path| {
                let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
                // SAFETY: a NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }),
        ] {
            std::fs::remove_file(journal_path(h)).unwrap();
            make(&journal_path(h));
            let mut c = arrival(1_000);
            c.request_id = format!("dsh-session-mail:00000000-0000-4000-8000-0000000000{n:x}");
            assert_eq!(claim(h, &c, 1_000).unwrap(), Claim::New, "{n:x}");
            assert_eq!(journal_lines(h), vec![c.clone()]);
            assert!(std::fs::symlink_metadata(journal_path(h))
                .unwrap()
                .is_file());
            // what was moved aside is never read back as a journal
            assert!(!is_set_aside(BAD_JOURNAL));
        }
        // the journal of ours is never moved by a heal
        let _ = std::fs::remove_dir(&bad).or_else(|_| std::fs::remove_file(&bad));
        heal_journal(h).unwrap();
        assert!(std::fs::symlink_metadata(journal_path(h))
            .unwrap()
            .is_file());
        assert!(std::fs::symlink_metadata(&bad).is_err());
        let _ = d;
    }

    #[test]
    fn a_record_of_the_earlier_single_file_shape_still_answers() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let mut a = arrival(1_000);
        a.answer = Some(accepted());
        crate::crossing::ensure(h, Some("arrivals")).unwrap();
        std::fs::write(path(h, RID), serde_json::to_vec(&a).unwrap()).unwrap();
        a.answer = None;
        assert_eq!(claim(h, &a, 2_000).unwrap(), Claim::Answered(accepted()));
    }

    #[test]
    fn past_the_bound_a_new_request_id_is_refused_full_and_the_sweep_makes_room() {
        let h = tempfile::tempdir().unwrap();
        let t0 = 1_765_000_000_000;
        let with = |n: usize| Arrival {
            request_id: format!("dsh-session-mail:00000000-0000-4000-8000-{n:012}"),
            ..arrival(t0)
        };
        for n in 0..3 {
            assert_eq!(claim_within(h.path(), &with(n), t0, 3).unwrap(), Claim::New);
        }
        assert_eq!(
            claim_within(h.path(), &with(3), t0, 3).unwrap(),
            Claim::Full
        );
        // one already claimed is still answered from its record, not refused as full
        assert!(matches!(
            claim_within(h.path(), &with(0), t0, 3).unwrap(),
            Claim::InFlight(_)
        ));
        // records past KEEP_MS go at the next sweep (an hour on): room again
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_millis(t0 as u64);
        for e in std::fs::read_dir(dir(h.path())).unwrap().flatten() {
            std::fs::File::options()
                .write(true)
                .open(e.path())
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        let later = t0 + KEEP_MS + SWEEP_EVERY_MS;
        assert_eq!(
            claim_within(h.path(), &with(3), later, 3).unwrap(),
            Claim::New
        );
        assert_eq!(lookup(h.path(), &with(0).request_id), None, "swept");
    }
}
