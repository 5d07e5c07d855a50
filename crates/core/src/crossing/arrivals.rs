//! The receiving side's durable record of each send that arrived from a linked machine
//! (`machine/arrivals/`): the **claim** `<key>.json`, written and fsynced before anything is delivered
//! and never rewritten after, then the **answer** the send path gave, `<key>.answer.json` beside it
//! (not fsynced: see below). A request id seen again — the sender's retry after a timeout, its outbox
//! drained by another process, a replay — is answered from the record and delivered nothing; one
//! still in flight answers `busy` (the sender tries later); one whose process died between the claim
//! and the answer is settled by the target's log (landed there: accepted; else delivered again with
//! the same request id, which the host itself deduplicates).
//!
//! Why only the claim is fsynced: the claim is what keeps a second delivery out, so it is on disk
//! before the message goes anywhere. An answer lost in a crash of the system (a process crash loses
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
            .filter(|x| x.from == a.from && x.target == a.target && x.sender == a.sender)
            .and_then(|x| x.answer);
    }
    Some(a)
}

/// Claim `a.request_id` (written and fsynced before the caller delivers anything).
pub fn claim(home: &Path, a: &Arrival, now_ms: i64) -> std::io::Result<Claim> {
    claim_within(home, a, now_ms, MAX_RECORDS)
}

/// [`claim`] with at most `max` records kept.
fn claim_within(home: &Path, a: &Arrival, now_ms: i64, max: usize) -> std::io::Result<Claim> {
    let d = super::ensure(home, Some("arrivals"))?;
    // a request id seen before is answered from its record whatever the count: only a new one is refused
    if count(home, now_ms, 0) >= max && lookup(home, &a.request_id).is_none() {
        return Ok(Claim::Full);
    }
    let bytes = serde_json::to_vec(a).map_err(std::io::Error::other)?;
    let put = fsafe::Put {
        sync: true,
        replace: false,
    };
    match fsafe::write_private(&d, &path(home, &a.request_id), &bytes, put) {
        Ok(()) => {
            count(home, now_ms, 1);
            Ok(Claim::New)
        }
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
        .find(|(h, r)| {
            h == home
                && r.request_id == a.request_id
                && r.from == a.from
                && r.target == a.target
                && r.sender == a.sender
        })
        .and_then(|(_, r)| r.answer.clone())
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
/// without an answer of the same arrival is removed.
pub fn release(home: &Path, a: &Arrival) -> std::io::Result<()> {
    match read_record(&path(home, &a.request_id), &a.request_id) {
        Some(old)
            if old.from == a.from
                && old.target == a.target
                && old.sender == a.sender
                && old.claimed_at == a.claimed_at
                && lookup(home, &a.request_id).is_some_and(|l| l.answer.is_none()) =>
        {
            std::fs::remove_file(path(home, &a.request_id))
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

/// Remove records older than [`KEEP_MS`] (at most `max_scan` names looked at). Returns how many
/// claim records (not their answer files) are left among those scanned.
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
        } else if !e.file_name().to_string_lossy().ends_with(".answer.json") {
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
