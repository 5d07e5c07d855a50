//! The sending side's memory of what became of each message it sent to a linked machine
//! (`machine/fates/<day>/<key>.json`), for the human's view: the fate the far side answered at send time,
//! at the outbox's delivery, or to the latest `verify` (CLI or tool) — or this home's outbox's own state
//! (waiting, expired, unlinked) — with when it was answered. The mail page shows it on the message's row and
//! in its thread "as of" that time: it is a remembered answer, not a fresh reading (only `verify` asks).
//!
//! A record is a claim, read as hostile: sealed with the home's own key (`machine/fates.key`, made on first
//! write, [`base::seal`]), bounded ([`MAX_BYTES`]), never through a link, this user's only, and believed only
//! for the request id, machine and time it names: a forged, garbled, oversized record, one copied from
//! another request or machine, or one dated before the send or in the future is not shown (the row then
//! says `unknown`, as before). A newer answer replaces an older one; an older one never replaces a newer one
//! (a slow `verify` that finishes after the delivery's answer). Nothing decides a delivery by it.
//!
//! Not fsynced (a record lost in a crash shows `unknown` until the next answer); one folder per UTC day of
//! the send, swept after [`KEEP_DAYS`] like the sent copies ([`super::sent`]).

use std::path::{Path, PathBuf};

use base::fsafe::{self, Follow};
use base::seal;
use serde::{Deserialize, Serialize};

use crate::code::FateState;
use crate::machine::MachineId;

/// Day folders kept.
pub const KEEP_DAYS: i64 = super::sent::KEEP_DAYS;
/// Largest record read or written.
pub const MAX_BYTES: u64 = 2048;
/// How far a record may be dated before the send's ledger line (that line is written after the call
/// whose answer is recorded) or after now (clocks of one machine; a record from the future is forged).
pub const SLACK_MS: i64 = 60_000;
use super::sent::DAY_MS;
const DOMAIN: &str = "remote-fate";

/// Where the remembered state comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The far side's answer to the send itself.
    Send,
    /// The far side's answer when the outbox delivered it.
    Delivery,
    /// The far side's answer to a `verify`.
    Verify,
    /// This home's outbox: waiting there, expired there, or its machine unlinked before delivery.
    Outbox,
}

/// One remembered answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub request_id: String,
    /// The machine it was sent to (its id).
    pub machine: String,
    pub state: FateState,
    pub source: Source,
    /// When it was answered (ms since the epoch).
    pub at_ms: i64,
}

/// When and by whom a remote message's fate was answered, as the human's rows carry it (the page's
/// `MailItem::answered`, the mail tab's `mailview::Row::answered`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answered {
    /// When it was answered (ms since the epoch): the page says "as of" it.
    pub at: i64,
    pub source: Source,
}

impl Answer {
    pub fn answered(&self) -> Answered {
        Answered {
            at: self.at_ms,
            source: self.source,
        }
    }
}

/// The record's field in its sealed envelope (`{"answer": …, "mac": …}`, [`seal::sealed_bytes`]).
const FIELD: &str = "answer";

fn root(home: &Path) -> PathBuf {
    super::dir(home).join("fates")
}
fn key_path(home: &Path) -> PathBuf {
    super::dir(home).join("fates.key")
}
fn path(home: &Path, day: i64, request_id: &str) -> PathBuf {
    root(home)
        .join(day.to_string())
        .join(format!("{}.json", super::file_key(request_id)))
}

/// The home's key for these records, if one was made.
pub fn key(home: &Path) -> Option<seal::Key> {
    seal::read_key(&key_path(home)).ok().flatten()
}

fn open(key: &seal::Key, p: &Path) -> Option<Answer> {
    let (bytes, m) = fsafe::read_capped(p, Follow::No, MAX_BYTES).ok()?;
    if fsafe::foreign_owner(&m).is_some() {
        return None;
    }
    seal::open_bytes(key.bytes(), DOMAIN, FIELD, &bytes)
}

/// The remembered answer for `request_id`, sent to `machine` at `sent_ms` (the ledger line's time), if a
/// record verifies and names them (looked for in that day's folder and the ones either side of it).
pub fn read(
    home: &Path,
    key: &seal::Key,
    request_id: &str,
    machine: &str,
    sent_ms: i64,
    now_ms: i64,
) -> Option<Answer> {
    let day = sent_ms.div_euclid(DAY_MS);
    [day, day + 1, day - 1].into_iter().find_map(|d| {
        let a = open(key, &path(home, d, request_id))?;
        (a.request_id == request_id
            && a.machine == machine
            && a.at_ms >= sent_ms.saturating_sub(SLACK_MS)
            && a.at_ms <= now_ms.saturating_add(SLACK_MS))
        .then_some(a)
    })
}

/// Remember `state` for `request_id` sent to `machine` at `sent_ms`, answered at `at_ms`. A record of
/// the same request answered later is kept instead (`Ok(false)`).
pub fn record(
    home: &Path,
    request_id: &str,
    machine: &MachineId,
    sent_ms: i64,
    state: FateState,
    source: Source,
    at_ms: i64,
) -> std::io::Result<bool> {
    ready_dir(home, sent_ms)?.record(request_id, machine, state, source, at_ms)
}

/// What [`record`] needs before it knows the answer: the home's key (made on first use), the day
/// folder of a send at `sent_ms` (made, and the old ones swept, when it is new) and the record's file,
/// made there without a name ([`fsafe::Unnamed`]: its inode is most of a small write's cost). A send to
/// a linked machine gets it ready while its request is in flight (`remote::send_to`), so what is left
/// after the answer — in the ledger line's trip, before the tool returns — is the seal, the write and
/// the link instead of a new temp file made, written and renamed (docs/machines.md "Known issues").
/// Dropped unused, it leaves nothing.
pub fn ready(home: &Path, sent_ms: i64) -> std::io::Result<Ready> {
    let mut r = ready_dir(home, sent_ms)?;
    r.file = fsafe::Unnamed::create_in(&r.dir);
    Ok(r)
}

/// [`ready`] without the file ([`record`]'s, which writes at once).
fn ready_dir(home: &Path, sent_ms: i64) -> std::io::Result<Ready> {
    let r = super::ensure(home, Some("fates"))?;
    let key = seal::key_or_make(&key_path(home)).map_err(|e| match e {
        seal::KeyError::Io(e) => e,
        other => std::io::Error::other(format!("fates.key{other}")),
    })?;
    let day = sent_ms.div_euclid(DAY_MS);
    let d = r.join(day.to_string());
    if std::fs::symlink_metadata(&d).is_err() {
        fsafe::ensure_private_dirs([d.clone()]).map_err(|(_, e)| e)?;
        super::sent::sweep(&r, day);
    }
    Ok(Ready {
        key,
        dir: d,
        file: None,
    })
}

/// [`ready`]'s key, day folder and unnamed file.
pub struct Ready {
    key: seal::Key,
    dir: PathBuf,
    /// The record's file, made without a name (`None`: none could be made, or [`record`]'s).
    file: Option<fsafe::Unnamed>,
}

impl Ready {
    /// [`record`], in this day folder (into the file [`ready`] made, when it could make one).
    pub fn record(
        self,
        request_id: &str,
        machine: &MachineId,
        state: FateState,
        source: Source,
        at_ms: i64,
    ) -> std::io::Result<bool> {
        let p = self
            .dir
            .join(format!("{}.json", super::file_key(request_id)));
        if let Some(old) = open(&self.key, &p) {
            if old.request_id == request_id && old.at_ms > at_ms {
                return Ok(false);
            }
        }
        let answer = Answer {
            request_id: request_id.to_string(),
            machine: machine.as_str().to_string(),
            state,
            source,
            at_ms,
        };
        let bytes = seal::sealed_bytes(self.key.bytes(), DOMAIN, FIELD, &answer)
            .map_err(std::io::Error::other)?;
        if bytes.len() as u64 > MAX_BYTES {
            return Err(std::io::Error::other("over the bound"));
        }
        // the file made beforehand takes the name when none is there (a send's first answer); a record
        // there already (older: see above) is replaced through a new temp file
        if let Some(f) = self.file {
            if f.link(&p, &bytes).is_ok() {
                return Ok(true);
            }
        }
        let put = fsafe::Put {
            sync: false,
            replace: true,
        };
        fsafe::write_private(&self.dir, &p, &bytes, put)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RID: &str = "dsh-session-mail:00000000-0000-4000-8000-000000000001";
    const T: i64 = 1_765_000_000_000;

    fn far() -> MachineId {
        MachineId::parse(&"cd".repeat(32)).unwrap()
    }

    #[test]
    fn an_answer_reads_back_and_a_newer_one_replaces_it_but_an_older_one_does_not() {
        let h = tempfile::tempdir().unwrap();
        let m = far();
        assert!(key(h.path()).is_none(), "no key before the first record");
        assert!(record(h.path(), RID, &m, T, FateState::Held, Source::Send, T + 5).unwrap());
        let k = key(h.path()).unwrap();
        let a = read(h.path(), &k, RID, m.as_str(), T + 20, T + 1000).unwrap();
        assert_eq!(
            (a.state, a.source, a.at_ms),
            (FateState::Held, Source::Send, T + 5)
        );
        assert!(record(
            h.path(),
            RID,
            &m,
            T,
            FateState::Landed,
            Source::Verify,
            T + 900
        )
        .unwrap());
        // a slow answer from before it arrives late: the newer stays
        assert!(!record(
            h.path(),
            RID,
            &m,
            T,
            FateState::Held,
            Source::Delivery,
            T + 400
        )
        .unwrap());
        let a = read(h.path(), &k, RID, m.as_str(), T + 20, T + 1000).unwrap();
        assert_eq!((a.state, a.at_ms), (FateState::Landed, T + 900));
        // asked for another machine, or another request: nothing
        assert_eq!(read(h.path(), &k, RID, &"ab".repeat(32), T, T + 1000), None);
        assert_eq!(read(h.path(), &k, "other", m.as_str(), T, T + 1000), None);
        // a send whose line was written just after midnight finds the record of the day before
        let midnight = (T.div_euclid(DAY_MS) + 1) * DAY_MS;
        let rid2 = "dsh-session-mail:00000000-0000-4000-8000-000000000002";
        record(
            h.path(),
            rid2,
            &m,
            midnight - 3,
            FateState::Queued,
            Source::Send,
            midnight - 1,
        )
        .unwrap();
        assert_eq!(
            read(h.path(), &k, rid2, m.as_str(), midnight + 2, midnight + 10).map(|a| a.state),
            Some(FateState::Queued)
        );
    }

    /// The names in the day folder of a send at `T` (the records and any temp file left).
    fn names(h: &Path) -> Vec<String> {
        let d = root(h).join(T.div_euclid(DAY_MS).to_string());
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_ready_record_takes_the_file_made_before_the_answer_and_leaves_nothing_else() {
        let h = tempfile::tempdir().unwrap();
        let m = far();
        let r = ready(h.path(), T).unwrap();
        #[cfg(target_os = "linux")]
        assert!(
            r.file.is_some(),
            "the record's file is made before the answer"
        );
        // made, not seen: no name in the folder until the record
        assert!(names(h.path()).is_empty());
        assert!(r
            .record(RID, &m, FateState::Queued, Source::Send, T + 5)
            .unwrap());
        let k = key(h.path()).unwrap();
        let state = || read(h.path(), &k, RID, m.as_str(), T, T + 1000).map(|a| a.state);
        assert_eq!(state(), Some(FateState::Queued));
        let one = vec![format!("{}.json", super::super::file_key(RID))];
        assert_eq!(names(h.path()), one);
        // a newer answer of the same request: its made file cannot take the name, the record is
        // replaced all the same (a new temp file, renamed), and nothing else is left
        let r = ready(h.path(), T).unwrap();
        assert!(r
            .record(RID, &m, FateState::Landed, Source::Verify, T + 9)
            .unwrap());
        assert_eq!(state(), Some(FateState::Landed));
        assert_eq!(names(h.path()), one);
        // an older one is not written, and its made file is gone with it
        let r = ready(h.path(), T).unwrap();
        assert!(!r
            .record(RID, &m, FateState::Held, Source::Delivery, T + 7)
            .unwrap());
        assert_eq!(state(), Some(FateState::Landed));
        // one made and never used (a send refused before its answer) leaves nothing either
        drop(ready(h.path(), T).unwrap());
        assert_eq!(names(h.path()), one);
    }

    #[test]
    fn a_forged_stale_huge_or_linked_record_is_not_believed() {
        let h = tempfile::tempdir().unwrap();
        let m = far();
        record(h.path(), RID, &m, T, FateState::Queued, Source::Send, T + 5).unwrap();
        let k = key(h.path()).unwrap();
        let p = path(h.path(), T.div_euclid(DAY_MS), RID);
        let good = std::fs::read(&p).unwrap();
        let seen = |now: i64| read(h.path(), &k, RID, m.as_str(), T, now).map(|a| a.state);
        assert_eq!(seen(T + 10), Some(FateState::Queued));
        // forged: the state changed by hand, the seal kept
        let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
        v["answer"]["state"] = "landed".into();
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        assert_eq!(seen(T + 10), None, "forged");
        // sealed with another key
        let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
        v["mac"] = seal::seal_hex(&[7u8; 32], DOMAIN, b"x").into();
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        assert_eq!(seen(T + 10), None, "another key's seal");
        // garbage
        std::fs::write(&p, b"{not json").unwrap();
        assert_eq!(seen(T + 10), None);
        // huge: over the bound, not read (even with a good record at its start)
        let mut big = good.clone();
        big.extend(std::iter::repeat_n(b' ', MAX_BYTES as usize));
        std::fs::write(&p, &big).unwrap();
        assert_eq!(seen(T + 10), None, "over the bound");
        // stale: a genuine record of another request copied over this one's file
        let rid2 = "dsh-session-mail:00000000-0000-4000-8000-000000000002";
        record(
            h.path(),
            rid2,
            &m,
            T,
            FateState::Landed,
            Source::Verify,
            T + 6,
        )
        .unwrap();
        std::fs::copy(path(h.path(), T.div_euclid(DAY_MS), rid2), &p).unwrap();
        assert_eq!(seen(T + 10), None, "another request's record");
        // stale: dated long before the send it is read for (a record kept from an earlier send)
        std::fs::write(&p, &good).unwrap();
        assert_eq!(
            read(
                h.path(),
                &k,
                RID,
                m.as_str(),
                T + 2 * SLACK_MS,
                T + 3 * SLACK_MS
            ),
            None,
            "answered before the send"
        );
        // from the future
        assert_eq!(seen(T - 2 * SLACK_MS), None, "dated after now");
        // through a link: never
        std::fs::remove_file(&p).unwrap();
        let elsewhere = h.path().join("elsewhere.json");
        std::fs::write(&elsewhere, &good).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &p).unwrap();
        assert_eq!(seen(T + 10), None, "never through a link");
    }

    #[test]
    fn day_folders_older_than_the_kept_days_are_swept_when_a_new_day_begins() {
        let h = tempfile::tempdir().unwrap();
        let m = far();
        record(h.path(), RID, &m, T, FateState::Queued, Source::Send, T).unwrap();
        let later = T + (KEEP_DAYS + 2) * DAY_MS;
        record(
            h.path(),
            "r2",
            &m,
            later,
            FateState::Queued,
            Source::Send,
            later,
        )
        .unwrap();
        let k = key(h.path()).unwrap();
        assert_eq!(read(h.path(), &k, RID, m.as_str(), T, T), None, "swept");
        assert!(read(h.path(), &k, "r2", m.as_str(), later, later).is_some());
    }
}
