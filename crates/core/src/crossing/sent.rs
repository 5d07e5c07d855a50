//! The sending side's copy of what this home's agents sent to linked machines
//! (`machine/sent/<day>/<key>.json`), for the human's view only: the ledger keeps a message's hash, and the
//! text itself lands in the far side's log, so without this copy the sending home's mail page shows such a
//! message with no text. A copy is a claim: it is shown only when its text hashes to the `bodySha256` of the
//! ledger line with the same request id ([`text_of`]); nothing else reads it, no delivery decision depends
//! on it.
//!
//! Not fsynced (a copy lost in a crash shows no text, nothing more); bounded: [`MAX_BYTES`] a file, one
//! folder per UTC day (days since the epoch), the folders older than [`KEEP_DAYS`] removed when a new
//! day's folder is made (the per-pair, per-sender and per-machine budgets bound how many sends a day has).

use std::path::{Path, PathBuf};

use base::fsafe::{self, Follow};
use serde::{Deserialize, Serialize};

/// Day folders kept (the newest; the outbox and the far side's arrivals keep 7 days too).
pub const KEEP_DAYS: i64 = 7;
/// Largest copy read or written.
pub const MAX_BYTES: u64 = 1024 + 4 * crate::machine::wire::MAX_BODY as u64;
pub(super) const DAY_MS: i64 = 24 * 3600 * 1000;
/// Names looked at when old day folders are swept.
const MAX_SWEEP: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Copy {
    request_id: String,
    body: String,
}

fn root(home: &Path) -> PathBuf {
    super::dir(home).join("sent")
}

fn path(home: &Path, day: i64, request_id: &str) -> PathBuf {
    root(home)
        .join(day.to_string())
        .join(format!("{}.json", super::file_key(request_id)))
}

/// Keep `body` as sent under `request_id` at `now_ms` (while the request is in flight: shown only
/// once the send's ledger line vouches for it, [`text_of`]).
pub fn record(home: &Path, request_id: &str, body: &str, now_ms: i64) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(&Copy {
        request_id: request_id.to_string(),
        body: body.to_string(),
    })
    .map_err(std::io::Error::other)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(std::io::Error::other("over the bound"));
    }
    let r = super::ensure(home, Some("sent"))?;
    let day = now_ms.div_euclid(DAY_MS);
    let d = r.join(day.to_string());
    if std::fs::symlink_metadata(&d).is_err() {
        fsafe::ensure_private_dirs([d.clone()]).map_err(|(_, e)| e)?;
        sweep(&r, day);
    }
    let put = fsafe::Put {
        sync: false,
        replace: true,
    };
    fsafe::write_private(&d, &path(home, day, request_id), &bytes, put)
}

/// Remove the copy kept under `request_id` at `now_ms` (its send was refused: nothing went). A copy is
/// written while the request is in flight (`remote::send_to`), before its answer is known.
pub fn forget(home: &Path, request_id: &str, now_ms: i64) {
    let _ = std::fs::remove_file(path(home, now_ms.div_euclid(DAY_MS), request_id));
}

/// The text sent under `request_id`, if a copy is kept and hashes to `body_sha256` (the ledger line's);
/// looked for in the day folder of `time_ms` (the line's time) and the day after it.
pub fn text_of(home: &Path, request_id: &str, body_sha256: &str, time_ms: i64) -> Option<String> {
    let day = time_ms.div_euclid(DAY_MS);
    [day, day + 1].into_iter().find_map(|d| {
        let (bytes, m) =
            fsafe::read_capped(&path(home, d, request_id), Follow::No, MAX_BYTES).ok()?;
        if fsafe::foreign_owner(&m).is_some() {
            return None;
        }
        let c = serde_json::from_slice::<Copy>(&bytes).ok()?;
        (c.request_id == request_id && crate::ledger::sha256_hex(&c.body) == body_sha256)
            .then_some(c.body)
    })
}

/// Remove the day folders older than [`KEEP_DAYS`] before `today` (never through a link); the day folders
/// of `crossing::fates` too.
pub(super) fn sweep(root: &Path, today: i64) {
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    for e in rd.flatten().take(MAX_SWEEP) {
        let old = e
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i64>().ok())
            .is_some_and(|d| d < today - KEEP_DAYS);
        if old && e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::sha256_hex;

    const RID: &str = "dsh-session-mail:00000000-0000-4000-8000-000000000001";
    const T: i64 = 1_765_000_000_000;

    #[test]
    fn a_copy_is_shown_only_when_it_hashes_to_the_ledgers_body() {
        let h = tempfile::tempdir().unwrap();
        record(h.path(), RID, "the migration is done", T).unwrap();
        let sha = sha256_hex("the migration is done");
        assert_eq!(
            text_of(h.path(), RID, &sha, T).as_deref(),
            Some("the migration is done")
        );
        // another request's hash, or the copy rewritten: nothing shown
        assert_eq!(text_of(h.path(), RID, &sha256_hex("other"), T), None);
        let p = path(h.path(), T.div_euclid(DAY_MS), RID);
        let forged = serde_json::to_vec(&Copy {
            request_id: RID.into(),
            body: "the migration failed".into(),
        })
        .unwrap();
        std::fs::write(&p, forged).unwrap();
        assert_eq!(text_of(h.path(), RID, &sha, T), None);
        // garbage, a link: nothing, no panic
        std::fs::write(&p, b"{not json").unwrap();
        assert_eq!(text_of(h.path(), RID, &sha, T), None);
        std::fs::remove_file(&p).unwrap();
        #[cfg(unix)]
        {
            let elsewhere = h.path().join("elsewhere.json");
            std::fs::write(
                &elsewhere,
                serde_json::to_vec(&Copy {
                    request_id: RID.into(),
                    body: "the migration is done".into(),
                })
                .unwrap(),
            )
            .unwrap();
            std::os::unix::fs::symlink(&elsewhere, &p).unwrap();
            assert_eq!(
                text_of(h.path(), RID, &sha, T),
                None,
                "never through a link"
            );
        }
    }

    #[test]
    fn a_line_written_just_before_midnight_finds_its_copy_of_the_next_day() {
        let h = tempfile::tempdir().unwrap();
        let midnight = (T.div_euclid(DAY_MS) + 1) * DAY_MS;
        record(h.path(), RID, "late", midnight + 5).unwrap();
        assert_eq!(
            text_of(h.path(), RID, &sha256_hex("late"), midnight - 5).as_deref(),
            Some("late")
        );
    }

    #[test]
    fn day_folders_older_than_the_kept_days_are_swept_when_a_new_day_begins() {
        let h = tempfile::tempdir().unwrap();
        record(h.path(), RID, "old", T).unwrap();
        let later = T + (KEEP_DAYS + 1) * DAY_MS;
        record(h.path(), RID, "new", later).unwrap();
        assert_eq!(text_of(h.path(), RID, &sha256_hex("old"), T), None, "swept");
        assert_eq!(
            text_of(h.path(), RID, &sha256_hex("new"), later).as_deref(),
            Some("new")
        );
        // a copy over the bound is not written
        let big = "x".repeat(MAX_BYTES as usize);
        assert!(record(h.path(), RID, &big, later).is_err());
    }
}
