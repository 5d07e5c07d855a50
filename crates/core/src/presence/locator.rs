//! The locator of a live session: `presence/by-session/<sha256 of its id, hex>`, a file naming the process
//! that published the session last (`{"v":1,"session":…,"pid":…,"startedAt":…}`), so a send finds its
//! target's owner by reading one locator and one record instead of every record on the home (issue 30:
//! the lookup's cost must not grow with the processes, sessions or records on the machine).
//!
//! A locator is a claim like any file of the home, and only a hint: [`super::owner`] believes it only when
//! the record of the process it names (of its `startedAt`) is fresh, lists the session, and passes the same
//! check against `/proc` as any record ([`super::verify`]). A locator missing, unreadable, forged (naming a
//! process that does not list the session, or one that fails the check), stale (its process exited, or its
//! pid now belongs to another start) or left behind by a move (the process named no longer lists the
//! session) sends the lookup to the full scan of the records: a locator can make a lookup slower, never
//! find another owner than a record the scan would believe.
//!
//! Written by the publishing process ([`Written`], from [`super::publish`]): a locator when a session first
//! appears in its record and again every [`REASSERT_MS`] while it is listed (so one overwritten by someone
//! else, or by a process the session left, heals), at most [`MAX_WRITES`] a publish; removed, when it still
//! names this process, once the session leaves the record and when the record is withdrawn. A publish that
//! lists what it listed a second ago writes nothing: the locators cost nothing per refresh.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use base::fsafe;

/// A listed session's locator is written again this long after it was last written.
pub const REASSERT_MS: i64 = 10_000;
/// Most locators written by one publish (a process listing thousands writes the rest on the next ones).
pub const MAX_WRITES: usize = 256;
/// Largest locator read (an id is at most 512 bytes).
const MAX_BYTES: u64 = 4096;

/// What a locator says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Locator {
    pub v: u32,
    pub session: String,
    pub pid: u32,
    pub started_at: i64,
}

/// The locators' folder of a home.
pub fn dir(home: &Path) -> PathBuf {
    super::dir(home).join("by-session")
}

/// Where the locator of `session` is (its id hashed: any id is a safe file name of one length).
pub fn path(home: &Path, session: &str) -> PathBuf {
    let digest = Sha256::digest(session.as_bytes());
    let mut name = String::with_capacity(64);
    for b in digest.as_slice() {
        name.push_str(&format!("{b:02x}"));
    }
    dir(home).join(name)
}

fn real_dir(d: &Path) -> bool {
    fs::symlink_metadata(d).is_ok_and(|m| m.file_type().is_dir())
}

/// The locator of `session`, when there is a readable one that names it: the presence folder and the
/// locators' folder real folders (never a link out of the home), the file a regular file of this user,
/// opened without following a link, at most [`MAX_BYTES`].
pub fn read(home: &Path, session: &str) -> Option<Locator> {
    if !real_dir(&super::dir(home)) || !real_dir(&dir(home)) {
        return None;
    }
    let (bytes, m) = fsafe::read_capped(&path(home, session), fsafe::Follow::No, MAX_BYTES).ok()?;
    if fsafe::foreign_owner(&m).is_some() {
        return None;
    }
    let l: Locator = serde_json::from_slice(&bytes).ok()?;
    (l.v == 1 && l.session == session).then_some(l)
}

fn write(home: &Path, l: &Locator) -> bool {
    let Ok(bytes) = serde_json::to_vec(l) else {
        return false;
    };
    let d = dir(home);
    if fsafe::ensure_private_dir(&d).is_err() {
        return false;
    }
    let put = fsafe::Put {
        sync: false,
        replace: true,
    };
    fsafe::write_private(&d, &path(home, &l.session), &bytes, put).is_ok()
}

/// Remove the locator of `session` when it names `pid` (another process's is left alone).
fn remove_if_mine(home: &Path, session: &str, pid: u32) {
    if read(home, session).is_some_and(|l| l.pid == pid) {
        let _ = fs::remove_file(path(home, session));
    }
}

/// The locators this process wrote, by home: the session, and when its locator was last written.
struct Mine {
    pid: u32,
    started_at: i64,
    at: HashMap<String, i64>,
}

static WRITTEN: Mutex<Option<HashMap<PathBuf, Mine>>> = Mutex::new(None);

/// The publishing side: after this process's record (`pid`, `started_at`, listing `sessions`) was written
/// at `now_ms`, write the locators it owes and remove those of the sessions it no longer lists.
pub fn published<'a>(
    home: &Path,
    pid: u32,
    started_at: i64,
    sessions: impl Iterator<Item = &'a str>,
    now_ms: i64,
) {
    let mut all = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    let all = all.get_or_insert_with(HashMap::new);
    let mine = all.entry(home.to_path_buf()).or_insert_with(|| Mine {
        pid,
        started_at,
        at: HashMap::new(),
    });
    if mine.pid != pid || mine.started_at != started_at {
        // another record of this process (a test's, or a new startedAt): what it wrote names the old one
        mine.pid = pid;
        mine.started_at = started_at;
        mine.at.clear();
    }
    let listed: std::collections::HashSet<&str> = sessions.collect();
    let gone: Vec<String> = mine
        .at
        .keys()
        .filter(|s| !listed.contains(s.as_str()))
        .cloned()
        .collect();
    for s in gone {
        mine.at.remove(&s);
        remove_if_mine(home, &s, pid);
    }
    let mut writes = 0;
    for s in listed {
        if writes >= MAX_WRITES {
            break;
        }
        if mine
            .at
            .get(s)
            .is_some_and(|&t| now_ms.saturating_sub(t) < REASSERT_MS && t <= now_ms)
        {
            continue;
        }
        writes += 1;
        let l = Locator {
            v: 1,
            session: s.to_string(),
            pid,
            started_at,
        };
        if write(home, &l) {
            mine.at.insert(l.session, now_ms);
        }
    }
}

/// The publishing side: the record of `pid` was withdrawn; remove the locators that still name it.
pub fn withdrawn(home: &Path, pid: u32) {
    let mine = {
        let mut all = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
        all.as_mut().and_then(|a| a.remove(home))
    };
    if let Some(mine) = mine.filter(|m| m.pid == pid) {
        for s in mine.at.keys() {
            remove_if_mine(home, s, pid);
        }
    }
}
