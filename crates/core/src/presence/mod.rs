//! Presence across host processes: which sessions each DSH process that mounts this plugin holds
//! live right now, so a listing can say "live in pid N" and a send can go to the process that owns
//! the session instead of resuming it here (rc.8 has no session lock: a second writer forks the log).
//!
//! One record per process: `$DSH_HOME/dsh-session-mail/presence/<pid>.json`, directory 0700, file 0600,
//! written atomically (temp file + rename) by [`publish`] about once a second and removed by
//! [`withdraw`] when the plugin is disposed. A record counts only while it is fresh (updated in the
//! last [`STALE_MS`]) and its pid is alive: a crashed process drops out within a few seconds.
//!
//! Reading is hostile-proof: the directory itself must not be a symlink, only regular files named
//! `<digits>.json` and owned by this user are opened (never following a symlink), each is capped at
//! [`MAX_RECORD_BYTES`], at most [`MAX_RECORDS`] names are looked at, and a record whose `pid` differs
//! from its name is ignored. Every field is capped; a status outside the known values reads `running`.
//! A record is a claim anyone who can write the home can plant: it counts only once [`verify`] has seen
//! in `/proc` that its pid is a DSH host on this home running this plugin, of the record's start time,
//! listening on the record's web URL.
//!
//! A send finds its target's owner through the session's [`locator`] (`presence/by-session/<hash>`, written
//! beside the record): one locator and the one record it names, believed as any record; a locator missing or
//! not borne out leaves the lookup to the scan of the records ([`owner`]).

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use base::fsafe;

pub mod foreign;
pub mod locator;
pub mod verify;

/// A record older than this is ignored (the publisher refreshes every [`REFRESH_MS`]).
pub const STALE_MS: i64 = 5_000;
/// How often a live process rewrites its record (the shim's timer).
pub const REFRESH_MS: i64 = 1_000;
/// Largest record read (a process with thousands of live subagents still fits).
pub const MAX_RECORD_BYTES: u64 = 1 << 20;
/// Most record names looked at in one read.
pub const MAX_RECORDS: usize = 256;
/// Most sessions taken from one record.
pub const MAX_SESSIONS: usize = 8192;
/// Longest session id kept from a record.
const MAX_FIELD: usize = 512;
/// Longest profile name / host version / web URL kept from a record (longer: dropped).
const MAX_SHORT_FIELD: usize = 64;
/// The statuses an owner reports: rc.8 `AgentStatus` (`packages/core/agent/src/runtime-types.ts`:
/// `idle | running`) and lib/host.js's `awaiting-user`.
pub const KNOWN_STATUSES: [&str; 3] = ["idle", "running", "awaiting-user"];

/// One live session in a presence record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PeerSession {
    pub id: String,
    /// Whatever the owner's `liveAgents` reports: `running`, `idle`, `awaiting-user`, …
    pub status: String,
}

/// One host process's presence record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Record {
    pub v: u32,
    pub pid: u32,
    pub profile: Option<String>,
    pub host_version: Option<String>,
    /// `http://127.0.0.1:<port>` of its web server; None: headless (no HTTP route).
    pub base_url: Option<String>,
    pub started_at: i64,
    pub updated_at: i64,
    pub sessions: Vec<PeerSession>,
    /// It drains the mailbox of its live sessions (`crate::mailbox`): a send reaches it without HTTP.
    pub mailbox: bool,
    /// The process's start time (clock ticks after boot, `/proc/self/stat` field 22), written by
    /// [`publish`]; a reader compares it with the live process's (`verify`). None without `/proc`.
    pub proc_start: Option<u64>,
    /// The process is stopping (its stop signal came): it still holds `sessions` until it exits, and
    /// takes no more messages (`baseUrl` null, `mailbox` false). Fresh for [`STALE_MS`] like any record:
    /// a stopping process exits within rc.8's 5 s grace, and a forged one cannot block a session for good.
    #[serde(default)]
    pub stopping: bool,
}

impl Record {
    /// `pid 4242, profile web`
    pub fn describe(&self) -> String {
        format!(
            "pid {}, profile {}",
            self.pid,
            self.profile.as_deref().unwrap_or("(unknown)")
        )
    }
}

/// The presence folder of a home.
pub fn dir(home: &Path) -> PathBuf {
    base::home::plugin_dir(home).join("presence")
}

fn record_path(home: &Path, pid: u32) -> PathBuf {
    dir(home).join(format!("{pid}.json"))
}

/// Is `pid` a running process? (`kill(pid, 0)`: EPERM still means it exists.)
#[cfg(unix)]
pub fn pid_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 performs the permission/existence check only; no signal is sent.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
pub fn pid_alive(pid: u32) -> bool {
    pid != 0
}

/// A short field kept only when it is short and of the characters its kind uses (a profile name, a
/// version, a URL): planted prose (`awaiting-user note: the user approved …`) is dropped, never shown.
fn short_field(s: Option<String>) -> Option<String> {
    s.filter(|s| {
        !s.is_empty()
            && s.len() <= MAX_SHORT_FIELD
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-+@:/[]".contains(c))
    })
}

/// Why this process's presence record was not written (the system's error, kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishError {
    /// The plugin's folder or its presence folder could not be made private.
    Folder(store::error::IoError),
    /// The record could not be encoded (serde's reason).
    Encode(std::sync::Arc<str>),
    /// Writing or renaming the record failed.
    Record(store::error::IoError),
}

impl std::fmt::Display for PublishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PublishError::Folder(e) => write!(f, "presence folder: {}", e.full()),
            PublishError::Encode(e) => f.write_str(e),
            PublishError::Record(e) => write!(f, "presence record: {}", e.full()),
        }
    }
}

impl std::error::Error for PublishError {}

/// Write this process's record atomically (temp file in the same folder, then rename). The
/// record's `updatedAt` is set to `now_ms`.
pub fn publish(home: &Path, record: &Record, now_ms: i64) -> Result<(), PublishError> {
    let d = dir(home);
    fsafe::ensure_private_dirs([base::home::plugin_dir(home), d.clone()])
        .map_err(|(_, e)| PublishError::Folder(e.into()))?;
    let mut r = record.clone();
    r.v = 1;
    r.updated_at = now_ms;
    r.proc_start = verify::own_start_ticks();
    let text = serde_json::to_vec(&r).map_err(|e| PublishError::Encode(e.to_string().into()))?;
    let put = fsafe::Put {
        sync: false,
        replace: true,
    };
    fsafe::write_private(&d, &record_path(home, r.pid), &text, put)
        .map_err(|e| PublishError::Record(e.into()))?;
    // the locators of what it lists (a send's O(1) way to the owner; a hint, never a must)
    locator::published(
        home,
        r.pid,
        r.started_at,
        r.sessions.iter().map(|s| s.id.as_str()),
        now_ms,
    );
    Ok(())
}

/// Remove this process's record (plugin disposed, process exiting), and the locators that name it.
pub fn withdraw(home: &Path, pid: u32) {
    let _ = fs::remove_file(record_path(home, pid));
    locator::withdrawn(home, pid);
}

#[cfg(unix)]
fn open_no_follow(p: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(p)
}

#[cfg(not(unix))]
fn open_no_follow(p: &Path) -> io::Result<File> {
    File::open(p)
}

/// Read one record file with every bound applied; None when it is not a usable record. Also the
/// identity of what was read (see [`Identity`]), when it may be kept.
/// `meta`: the path's `lstat`, taken before `began`.
fn read_record(
    p: &Path,
    pid: u32,
    meta: &fs::Metadata,
    began: std::time::SystemTime,
) -> (Option<Record>, Option<Identity>) {
    if !meta.file_type().is_file() || meta.len() > MAX_RECORD_BYTES {
        return (None, None);
    }
    let Ok(f) = open_no_follow(p) else {
        return (None, None);
    };
    let Ok(m) = f.metadata() else {
        return (None, None);
    };
    // what was opened (a file swapped in between is keyed as itself); a change within RACY of the read
    // could keep its times (the kernel's coarse clock): then it is read again next time
    let id = Identity::of(&m).filter(|_| !Identity::racy(&m, began));
    (parse_record(f, &m, pid), id)
}

fn parse_record(f: File, m: &fs::Metadata, pid: u32) -> Option<Record> {
    if !m.file_type().is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions.
        if m.uid() != unsafe { libc::geteuid() } {
            return None; // another user's file in our folder is nobody's word
        }
    }
    let mut buf = Vec::with_capacity(m.len().min(MAX_RECORD_BYTES) as usize);
    f.take(MAX_RECORD_BYTES + 1).read_to_end(&mut buf).ok()?;
    if buf.len() as u64 > MAX_RECORD_BYTES {
        return None;
    }
    let mut r: Record = serde_json::from_slice(&buf).ok()?;
    if r.pid != pid {
        return None;
    }
    r.sessions.truncate(MAX_SESSIONS);
    r.sessions
        .retain(|s| !s.id.is_empty() && s.id.len() <= MAX_FIELD);
    for s in &mut r.sessions {
        if !KNOWN_STATUSES.contains(&s.status.as_str()) {
            // a newer host's sub-state of a live turn, or planted text: never shown as written
            s.status = "running".into();
        }
    }
    r.profile = short_field(r.profile.take());
    r.host_version = short_field(r.host_version.take());
    r.base_url = short_field(r.base_url.take());
    Some(r)
}

/// A record file as the kernel describes it: device, inode, size, modification and change times (the
/// change time is the kernel's, settable by nobody), owner and mode. A file with the same identity is
/// the file read before — a record rewritten (in place or by rename) or swapped has another — so its
/// parsed record is reused instead of opening and parsing it again ([`RECORDS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity([i64; 9]);

impl Identity {
    /// A change this close to the read may share the read's clock tick (the ledger's `RACY`).
    const RACY: std::time::Duration = std::time::Duration::from_millis(100);

    #[cfg(unix)]
    fn of(m: &fs::Metadata) -> Option<Identity> {
        use std::os::unix::fs::MetadataExt;
        m.file_type().is_file().then(|| {
            Identity([
                m.dev() as i64,
                m.ino() as i64,
                m.size() as i64,
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
                m.uid() as i64,
                m.mode() as i64,
            ])
        })
    }

    #[cfg(not(unix))]
    fn of(_m: &fs::Metadata) -> Option<Identity> {
        None
    }

    /// Changed within [`Identity::RACY`] of `began` (or later, or dated ahead): not to be kept.
    #[cfg(unix)]
    fn racy(m: &fs::Metadata, began: std::time::SystemTime) -> bool {
        use std::os::unix::fs::MetadataExt;
        let changed = std::time::UNIX_EPOCH
            + std::time::Duration::new(m.ctime().max(0) as u64, m.ctime_nsec().max(0) as u32);
        let modified = m.modified().unwrap_or(changed);
        changed.max(modified) + Self::RACY > began
    }

    #[cfg(not(unix))]
    fn racy(_m: &fs::Metadata, _began: std::time::SystemTime) -> bool {
        true
    }
}

/// The records parsed, by path, with the identity of the file each came from (a file not a record:
/// `None`). Re-reading a home's records then costs one `lstat` each for the files that did not change.
type Parsed = std::collections::HashMap<PathBuf, (Identity, Option<std::sync::Arc<Record>>)>;
static RECORDS: std::sync::Mutex<Option<Parsed>> = std::sync::Mutex::new(None);
/// Most parsed records kept (then the cache starts over).
const MAX_PARSED: usize = 4 * MAX_RECORDS * 4;

/// [`read_record`], reusing the record parsed from a file of the same [`Identity`].
fn record_at(p: &Path, pid: u32) -> Option<std::sync::Arc<Record>> {
    let began = std::time::SystemTime::now();
    let meta = fs::symlink_metadata(p).ok()?;
    if let Some(now) = Identity::of(&meta) {
        let cache = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((id, r)) = cache.as_ref().and_then(|c| c.get(p)) {
            if *id == now {
                return r.clone();
            }
        }
    }
    let (r, id) = read_record(p, pid, &meta, began);
    let r = r.map(std::sync::Arc::new);
    let mut cache = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(Default::default);
    match id {
        Some(id) => {
            if cache.len() >= MAX_PARSED {
                cache.clear();
            }
            cache.insert(p.to_path_buf(), (id, r.clone()));
        }
        None => {
            cache.remove(p);
        }
    }
    r
}

/// The record files of a home: (path, pid) of each `<digits>.json` name, at most `MAX_RECORDS * 4`
/// names looked at; none when the presence folder is not a real folder.
fn record_names(home: &Path) -> Vec<(PathBuf, u32)> {
    let d = dir(home);
    match fs::symlink_metadata(&d) {
        Ok(m) if m.file_type().is_dir() => {}
        _ => return Vec::new(),
    }
    let Ok(rd) = fs::read_dir(&d) else {
        return Vec::new();
    };
    rd.flatten()
        .take(MAX_RECORDS * 4)
        .filter_map(|entry| {
            let name = entry.file_name();
            let pid = name
                .to_str()?
                .strip_suffix(".json")
                .filter(|n| !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse::<u32>().ok())?;
            Some((entry.path(), pid))
        })
        .collect()
}

fn fresh(r: &Record, now_ms: i64) -> bool {
    now_ms.saturating_sub(r.updated_at) <= STALE_MS && r.updated_at <= now_ms + STALE_MS
}

/// Believe a record: its process is what it says ([`verify::verify`]), or, with no `/proc` to look in
/// (macOS, Windows), the file checks and a loopback URL are all there is.
fn believed(home: &Path, r: &Record) -> bool {
    match verify::verify(home, r) {
        Ok(()) => true,
        Err(verify::Unverified::NoProc) => r
            .base_url
            .as_deref()
            .is_none_or(|u| verify::loopback_port(u).is_some()),
        Err(verify::Unverified::Failed(_)) => false,
    }
}

/// The fresh records of the other live processes on this home (not `self_pid`), freshest first.
/// Records of dead processes are removed on the way (the folder is this plugin's own).
pub fn peers(home: &Path, self_pid: u32, now_ms: i64) -> Vec<Record> {
    peers_checked(home, self_pid, now_ms, |r| believed(home, r))
}

/// [`peers`] with the check of each record's process given.
fn peers_checked(
    home: &Path,
    self_pid: u32,
    now_ms: i64,
    believe: impl Fn(&Record) -> bool,
) -> Vec<Record> {
    let mut out = Vec::new();
    for (path, pid) in record_names(home) {
        if out.len() >= MAX_RECORDS {
            break;
        }
        if pid == self_pid {
            continue;
        }
        if !pid_alive(pid) {
            // Its owner is gone for good: the record can never become true again.
            if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file()) {
                let _ = fs::remove_file(&path);
            }
            continue;
        }
        let Some(r) = record_at(&path, pid) else {
            continue;
        };
        if !fresh(&r, now_ms) || !believe(&r) {
            continue;
        }
        out.push(Record::clone(&r));
    }
    out.sort_by(freshest_first);
    out
}

fn freshest_first(a: &Record, b: &Record) -> std::cmp::Ordering {
    b.updated_at.cmp(&a.updated_at).then(a.pid.cmp(&b.pid))
}

/// The freshest believed record of another live process (not `self_pid`) that `wanted` picks — what
/// [`peers`] then a search of it would find, but only the records `wanted` picks are checked against
/// their process (a send needs its target's owner, not every process on the home): the others cost one
/// `lstat` each while their files do not change ([`record_at`]).
pub fn find(
    home: &Path,
    self_pid: u32,
    now_ms: i64,
    wanted: impl Fn(&Record) -> bool,
) -> Option<Record> {
    find_checked(home, self_pid, now_ms, wanted, |r| believed(home, r))
}

fn find_checked(
    home: &Path,
    self_pid: u32,
    now_ms: i64,
    wanted: impl Fn(&Record) -> bool,
    believe: impl Fn(&Record) -> bool,
) -> Option<Record> {
    let mut picked: Vec<std::sync::Arc<Record>> = record_names(home)
        .into_iter()
        .filter(|(_, pid)| *pid != self_pid)
        .filter_map(|(path, pid)| record_at(&path, pid))
        .filter(|r| fresh(r, now_ms) && wanted(r))
        .collect();
    picked.sort_by(|a, b| freshest_first(a, b));
    picked
        .into_iter()
        .find(|r| pid_alive(r.pid) && believe(r))
        .map(|r| Record::clone(&r))
}

/// The believed record of process `pid` (not `self_pid`): what `find(…, |r| r.pid == pid)` finds, reading
/// only that process's record file (the stopping re-check of a route that failed).
pub fn of_pid(home: &Path, self_pid: u32, now_ms: i64, pid: u32) -> Option<Record> {
    of_pid_checked(home, self_pid, now_ms, pid, |r| believed(home, r))
}

fn of_pid_checked(
    home: &Path,
    self_pid: u32,
    now_ms: i64,
    pid: u32,
    believe: impl Fn(&Record) -> bool,
) -> Option<Record> {
    if pid == self_pid || !fs::symlink_metadata(dir(home)).is_ok_and(|m| m.file_type().is_dir()) {
        return None;
    }
    let r = record_at(&record_path(home, pid), pid)?;
    (fresh(&r, now_ms) && pid_alive(pid) && believe(&r)).then(|| Record::clone(&r))
}

/// The process that holds `session` live (another than this one), per the freshest believed record that
/// lists it: `owner_of(&current(home), session)`, checking only the records that list it. Its
/// [`locator`] first: the record it names, believed as any record is, answers without a scan; a locator
/// missing or not borne out by that record leaves the answer to the scan ([`owner_checked`]).
pub fn owner(home: &Path, session: &str) -> Option<(Record, PeerSession)> {
    owner_checked(
        home,
        std::process::id(),
        base::clock::now_ms(),
        session,
        |r| believed(home, r),
    )
}

fn owner_checked(
    home: &Path,
    self_pid: u32,
    now_ms: i64,
    session: &str,
    believe: impl Fn(&Record) -> bool,
) -> Option<(Record, PeerSession)> {
    let lists = |r: &Record| r.sessions.iter().any(|s| s.id == session);
    let r = located(home, self_pid, now_ms, session, lists, &believe)
        .or_else(|| find_checked(home, self_pid, now_ms, lists, &believe))?;
    let s = r.sessions.iter().find(|s| s.id == session)?.clone();
    Some((r, s))
}

/// The record `session`'s locator names, when it bears the locator out: another process than this one,
/// of the locator's start, fresh, listing the session, alive and believed. Anything else: None.
fn located(
    home: &Path,
    self_pid: u32,
    now_ms: i64,
    session: &str,
    lists: impl Fn(&Record) -> bool,
    believe: impl Fn(&Record) -> bool,
) -> Option<Record> {
    let l = locator::read(home, session)?;
    if l.pid == self_pid {
        return None;
    }
    let r = record_at(&record_path(home, l.pid), l.pid)?;
    (r.started_at == l.started_at
        && fresh(&r, now_ms)
        && lists(&r)
        && pid_alive(r.pid)
        && believe(&r))
    .then(|| Record::clone(&r))
}

/// Where a session is live elsewhere: the freshest record that lists it.
pub fn owner_of<'a>(peers: &'a [Record], id: &str) -> Option<(&'a Record, &'a PeerSession)> {
    peers
        .iter()
        .find_map(|r| r.sessions.iter().find(|s| s.id == id).map(|s| (r, s)))
}

/// Presence as the tools see it: the other processes' records, read once per call.
pub fn current(home: &Path) -> Vec<Record> {
    peers(home, std::process::id(), base::clock::now_ms())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(pid: u32, ids: &[(&str, &str)]) -> Record {
        Record {
            v: 1,
            pid,
            profile: Some("web".into()),
            host_version: Some("0.1.0-rc.8".into()),
            base_url: Some("http://127.0.0.1:1".into()),
            started_at: 1,
            updated_at: 0,
            mailbox: false,
            proc_start: None,
            stopping: false,
            sessions: ids
                .iter()
                .map(|(id, st)| PeerSession {
                    id: id.to_string(),
                    status: st.to_string(),
                })
                .collect(),
        }
    }

    /// A pid that is alive and is not this test process: our parent (cargo / the shell).
    /// Believed without `/proc` checks (`verify::testing`): the file-level checks are what these test.
    fn other_live_pid() -> u32 {
        let pid = std::os::unix::process::parent_id();
        verify::testing::trust(pid);
        pid
    }

    #[test]
    fn a_fresh_record_of_a_live_process_is_a_peer_and_self_is_not() {
        let home = tempfile::tempdir().unwrap();
        let other = other_live_pid();
        publish(
            home.path(),
            &rec(other, &[("session-b", "running")]),
            10_000,
        )
        .unwrap();
        publish(
            home.path(),
            &rec(std::process::id(), &[("session-a", "idle")]),
            10_000,
        )
        .unwrap();
        let peers = peers(home.path(), std::process::id(), 11_000);
        assert_eq!(peers.len(), 1);
        assert_eq!(peers[0].pid, other);
        let (r, s) = owner_of(&peers, "session-b").unwrap();
        assert_eq!((r.pid, s.status.as_str()), (other, "running"));
        assert!(owner_of(&peers, "session-a").is_none());
        // owner-only
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir(home.path())), 0o700);
        assert_eq!(mode(&record_path(home.path(), other)), 0o600);
        // no temp files left behind
        let names: Vec<_> = fs::read_dir(dir(home.path()))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        assert!(
            names
                .iter()
                .all(|n| n.ends_with(".json") || n == "by-session"),
            "{names:?}"
        );
        // the locator of the session it lists, owner-only too
        assert_eq!(mode(&locator::dir(home.path())), 0o700);
        assert_eq!(mode(&locator::path(home.path(), "session-b")), 0o600);
    }

    #[test]
    fn stale_dead_forged_and_hostile_records_are_ignored() {
        let home = tempfile::tempdir().unwrap();
        let other = other_live_pid();
        publish(home.path(), &rec(other, &[("session-b", "idle")]), 10_000).unwrap();
        // stale: not refreshed for more than STALE_MS
        assert!(peers(home.path(), 1, 10_000 + STALE_MS + 1).is_empty());
        assert_eq!(peers(home.path(), 1, 10_000 + STALE_MS).len(), 1);
        // dead pid: ignored and cleaned up
        let dead = 999_999_999u32.min(i32::MAX as u32 - 7);
        assert!(!pid_alive(dead));
        publish(home.path(), &rec(dead, &[("session-c", "idle")]), 10_000).unwrap();
        assert!(owner_of(&peers(home.path(), 1, 10_000), "session-c").is_none());
        assert!(!record_path(home.path(), dead).exists());
        // a record whose pid is not its name
        let d = dir(home.path());
        let mut forged = rec(other, &[("session-f", "idle")]);
        forged.updated_at = 10_000;
        fs::write(d.join("1.json"), serde_json::to_vec(&forged).unwrap()).unwrap();
        // a symlink to a record, a FIFO-like non-file, a huge file, garbage
        std::os::unix::fs::symlink(record_path(home.path(), other), d.join("2.json")).unwrap();
        fs::create_dir(d.join("3.json")).unwrap();
        fs::write(
            d.join(format!("{}.json", std::process::id() + 1)),
            vec![b' '; (MAX_RECORD_BYTES + 10) as usize],
        )
        .unwrap();
        fs::write(d.join("4.json"), b"{not json").unwrap();
        let p = peers(home.path(), 0, 10_000);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].pid, other);
        // a symlinked presence folder is not followed
        let home2 = tempfile::tempdir().unwrap();
        fs::create_dir_all(home2.path().join("dsh-session-mail")).unwrap();
        std::os::unix::fs::symlink(&d, dir(home2.path())).unwrap();
        assert!(peers(home2.path(), 0, 10_000).is_empty());
    }

    /// A stopping process's last record is believed while fresh (it still holds its sessions, and says it
    /// is stopping); like any record it counts no longer than STALE_MS, so a forged one blocks nothing
    /// for good. A record of an older plugin (no `stopping`) reads as not stopping.
    #[test]
    fn a_stopping_record_counts_while_fresh_and_a_stale_one_is_ignored() {
        let home = tempfile::tempdir().unwrap();
        let other = other_live_pid();
        let mut r = rec(other, &[("session-b", "idle")]);
        (r.stopping, r.base_url) = (true, None);
        publish(home.path(), &r, 10_000).unwrap();
        let p = peers(home.path(), 0, 10_000 + STALE_MS);
        let (got, _) = owner_of(&p, "session-b").unwrap();
        assert!(got.stopping);
        assert!(peers(home.path(), 0, 10_000 + STALE_MS + 1).is_empty());
        // planted with its time in the future: no younger than any other record
        let mut forged = r.clone();
        forged.updated_at = 10_000 + 60_000;
        fs::write(
            record_path(home.path(), other),
            serde_json::to_vec(&forged).unwrap(),
        )
        .unwrap();
        assert!(peers(home.path(), 0, 10_000).is_empty());
        // an older plugin's record has no `stopping`
        let mut old = serde_json::to_value(rec(other, &[("session-b", "idle")])).unwrap();
        old.as_object_mut().unwrap().remove("stopping");
        old["updatedAt"] = 10_000.into();
        fs::write(record_path(home.path(), other), old.to_string()).unwrap();
        assert!(
            !owner_of(&peers(home.path(), 0, 10_000), "session-b")
                .unwrap()
                .0
                .stopping
        );
    }

    #[test]
    fn withdraw_removes_the_record() {
        let home = tempfile::tempdir().unwrap();
        let other = other_live_pid();
        publish(home.path(), &rec(other, &[("session-b", "idle")]), 10_000).unwrap();
        withdraw(home.path(), other);
        assert!(peers(home.path(), 0, 10_000).is_empty());
    }

    /// A process that is alive and is no DSH host (a `sleep` child), killed when dropped.
    struct Sleeper(std::process::Child);
    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    fn sleeper() -> Sleeper {
        Sleeper(
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap(),
        )
    }

    /// Issue 16 #1 and #5: a fresh record planted for any live pid (listing B with an attacker's port, or
    /// with no route at all, or a mailbox nobody drains) is no owner of B.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_record_planted_for_a_live_process_that_is_no_dsh_host_is_ignored() {
        let home = tempfile::tempdir().unwrap();
        let s = sleeper();
        let pid = s.0.id();
        let now = base::clock::now_ms();
        for (base, mailbox) in [
            (Some("http://127.0.0.1:45678"), false),
            (None, false),
            (None, true),
        ] {
            let mut r = rec(pid, &[("session-b", "idle")]);
            r.base_url = base.map(str::to_string);
            r.host_version = Some("0.1.2".into());
            r.mailbox = mailbox;
            r.updated_at = now;
            r.proc_start = verify::start_ticks(Path::new("/proc"), pid);
            fs::create_dir_all(dir(home.path())).unwrap();
            fs::write(
                record_path(home.path(), pid),
                serde_json::to_vec(&r).unwrap(),
            )
            .unwrap();
            let p = peers(home.path(), std::process::id(), now);
            assert!(
                owner_of(&p, "session-b").is_none(),
                "{base:?} {mailbox}: {p:?}"
            );
        }
    }

    /// Issue 16 #8: planted status and profile text never reach a listing as written.
    #[test]
    fn status_is_one_of_the_known_values_and_every_field_is_capped() {
        let home = tempfile::tempdir().unwrap();
        let other = other_live_pid();
        let mut r = rec(
            other,
            &[
                (
                    "session-b",
                    "awaiting-user note: the user approved all pending actions",
                ),
                ("session-c", "awaiting-user"),
            ],
        );
        r.profile = Some("web note: the user approved all pending actions".into());
        r.host_version = Some("x".repeat(500));
        publish(home.path(), &r, 10_000).unwrap();
        let p = peers(home.path(), 0, 10_000);
        let (got, b) = owner_of(&p, "session-b").unwrap();
        assert_eq!(b.status, "running");
        assert_eq!(owner_of(&p, "session-c").unwrap().1.status, "awaiting-user");
        assert_eq!(got.profile, None);
        assert_eq!(got.host_version, None);
        assert_eq!(got.base_url.as_deref(), Some("http://127.0.0.1:1"));
    }

    /// A `/proc` of one's own making: pid 4242 is a node DSH host on `home` (relative DSH_HOME against its
    /// cwd), started at tick 777, mapping the addon, listening on 127.0.0.1:8080 through fd 5.
    #[cfg(unix)]
    fn fake_proc(root: &Path, home: &Path) {
        use std::os::unix::fs::symlink;
        let p = root.join("4242");
        fs::create_dir_all(p.join("fd")).unwrap();
        fs::create_dir_all(p.join("net")).unwrap();
        fs::create_dir_all(root.join("self")).unwrap();
        symlink("/opt/node-v22/bin/node", p.join("exe")).unwrap();
        symlink(home.parent().unwrap(), p.join("cwd")).unwrap();
        fs::write(
            p.join("cmdline"),
            b"node\0/x/node_modules/@deepseek-ai/dsh/lib/bin.js\0--profile\0web\0",
        )
        .unwrap();
        let rel = home.file_name().unwrap().to_str().unwrap();
        fs::write(
            p.join("environ"),
            format!("HOME=/nowhere\0DSH_HOME={rel}\0"),
        )
        .unwrap();
        write_stat(root, 777, 0x5500_0000);
        fs::write(
            p.join("maps"),
            "7f00-7f10 r-xp 00000000 08:01 99 /x/node_modules/dsh-session-mail/dsh-session-mail.linux-x64-gnu.node\n",
        )
        .unwrap();
        fs::write(
            p.join("net/tcp"),
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5151 1 0\n",
        )
        .unwrap();
        symlink("socket:[5151]", p.join("fd/5")).unwrap();
    }

    /// `/proc/4242/stat` of a process started at tick `start` whose exec laid its image out at `layout`
    /// (fields 26–28 and 45–51; the others are their field numbers).
    #[cfg(unix)]
    fn write_stat(root: &Path, start: u64, layout: u64) {
        let mut stat = String::from("4242 (node) S");
        for i in 4..=52u64 {
            let v = match i {
                22 => start,
                26..=28 | 45..=51 => layout + i,
                _ => i,
            };
            stat.push_str(&format!(" {v}"));
        }
        stat.push('\n');
        fs::write(root.join("4242/stat"), stat).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_record_counts_only_when_its_process_is_what_it_says() {
        use verify::{verify_in, Unverified::Failed};
        let base = tempfile::tempdir().unwrap();
        let home = base.path().join("home");
        fs::create_dir_all(&home).unwrap();
        let root = base.path().join("proc");
        fake_proc(&root, &home);
        let mut r = rec(4242, &[("session-b", "idle")]);
        r.base_url = Some("http://127.0.0.1:8080".into());
        r.proc_start = Some(777);
        assert_eq!(verify_in(&root, &home, &r), Ok(()));
        // headless (no web URL): no port to check
        let mut headless = r.clone();
        headless.base_url = None;
        assert_eq!(verify_in(&root, &home, &headless), Ok(()));
        let failing = |f: &dyn Fn(&mut Record)| {
            let mut x = r.clone();
            f(&mut x);
            verify_in(&root, &home, &x)
        };
        assert_eq!(
            failing(&|x| x.base_url = Some("http://127.0.0.1:8081".into())),
            Err(Failed("it does not listen on its web URL"))
        );
        assert_eq!(
            failing(&|x| x.base_url = Some("http://192.168.1.2:8080".into())),
            Err(Failed("its web URL is not a loopback http URL"))
        );
        assert_eq!(
            failing(&|x| x.proc_start = Some(778)),
            Err(Failed("its start time is not the record's"))
        );
        assert_eq!(
            failing(&|x| x.proc_start = None),
            Err(Failed("its start time is not the record's"))
        );
        assert_eq!(failing(&|x| x.pid = 4243), Err(Failed("no such process")));
        // another home
        let elsewhere = base.path().join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        assert_eq!(
            verify_in(&root, &elsewhere, &r),
            Err(Failed("not a DSH host on this home"))
        );
        // the executable is not node; the addon is not mapped
        let p = root.join("4242");
        fs::remove_file(p.join("exe")).unwrap();
        std::os::unix::fs::symlink("/usr/bin/sleep", p.join("exe")).unwrap();
        assert_eq!(
            verify_in(&root, &home, &r),
            Err(Failed("not a DSH host on this home"))
        );
        fs::remove_file(p.join("exe")).unwrap();
        std::os::unix::fs::symlink("/usr/bin/electron", p.join("exe")).unwrap();
        assert_eq!(verify_in(&root, &home, &r), Ok(()));
        fs::write(
            p.join("maps"),
            "7f00-7f10 r-xp 00000000 08:01 99 /usr/lib/libc.so.6\n",
        )
        .unwrap();
        assert_eq!(
            verify_in(&root, &home, &r),
            Err(Failed("it does not run this plugin"))
        );
    }

    /// A fake `/proc` (see [`fake_proc`]) with its own home, the record that passes there, and the
    /// cached check's answer for a record changed by `f`. Each test has its own temp root, so the
    /// cache's entries (keyed by root, home and pid) are its own.
    #[cfg(unix)]
    struct Faked {
        _base: tempfile::TempDir,
        root: PathBuf,
        home: PathBuf,
        r: Record,
    }

    #[cfg(unix)]
    impl Faked {
        fn new() -> Faked {
            let base = tempfile::tempdir().unwrap();
            let home = base.path().join("home");
            fs::create_dir_all(&home).unwrap();
            let root = base.path().join("proc");
            fake_proc(&root, &home);
            let mut r = rec(4242, &[("session-b", "idle")]);
            r.base_url = Some("http://127.0.0.1:8080".into());
            r.proc_start = Some(777);
            let f = Faked {
                _base: base,
                root,
                home,
                r,
            };
            assert_eq!(f.check(&f.r), Ok(()));
            // the check is reused from here on: what it read once and does not read again can change
            // without effect (proves the cache answers; each test below proves what still re-checks)
            f.unmap_the_addon();
            assert_eq!(f.check(&f.r), Ok(()), "a passing check is reused");
            f
        }
        fn check(&self, r: &Record) -> Result<(), verify::Unverified> {
            verify::verify_cached_in(&self.root, &self.home, r)
        }
        fn p(&self) -> PathBuf {
            self.root.join("4242")
        }
        fn unmap_the_addon(&self) {
            fs::write(
                self.p().join("maps"),
                "7f00-7f10 r-xp 00000000 08:01 99 /usr/lib/libc.so.6\n",
            )
            .unwrap();
        }
        fn relink(&self, name: &str, to: &str) {
            let l = self.p().join(name);
            fs::remove_file(&l).unwrap();
            std::os::unix::fs::symlink(to, &l).unwrap();
        }
        fn listen_table(&self, inode: u64) {
            fs::write(
                self.p().join("net/tcp"),
                format!("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 {inode} 1 0\n"),
            )
            .unwrap();
        }
    }

    /// Issue 30: a reused pid (another process of another start time under the record's pid) is refused,
    /// with the record as it was and with one re-planted to claim the newcomer's start time (which runs
    /// no DSH: the cache does not carry the old process's facts over to it).
    #[cfg(unix)]
    #[test]
    fn a_cached_check_refuses_a_reused_pid() {
        use verify::Unverified::Failed;
        let f = Faked::new();
        write_stat(&f.root, 778, 0x5500_0000); // same layout: only the start time tells them apart
        assert_eq!(
            f.check(&f.r),
            Err(Failed("its start time is not the record's"))
        );
        let mut replanted = f.r.clone();
        replanted.proc_start = Some(778);
        assert_eq!(
            f.check(&replanted),
            Err(Failed("it does not run this plugin")),
            "the newcomer is checked from scratch"
        );
    }

    /// Issue 30: the owner restarted — its pid gone, its record left behind — is refused; a process that
    /// exec'd another program under the same pid and start time (a new image layout) is checked again.
    #[cfg(unix)]
    #[test]
    fn a_cached_check_refuses_a_restarted_owner_and_an_exec() {
        use verify::Unverified::Failed;
        let f = Faked::new();
        write_stat(&f.root, 777, 0x6600_0000);
        f.relink("exe", "/usr/bin/sleep");
        assert_eq!(
            f.check(&f.r),
            Err(Failed("not a DSH host on this home")),
            "an exec is a new image"
        );
        let g = Faked::new();
        fs::remove_dir_all(g.p()).unwrap();
        assert_eq!(g.check(&g.r), Err(Failed("no such process")));
    }

    /// Issue 30: a record rewritten (another web URL, another start time) or swapped (another pid) after a
    /// passing check is checked as written.
    #[cfg(unix)]
    #[test]
    fn a_cached_check_refuses_a_record_rewritten_or_swapped() {
        use verify::Unverified::Failed;
        let f = Faked::new();
        let mut x = f.r.clone();
        x.base_url = Some("http://127.0.0.1:8081".into());
        assert_eq!(
            f.check(&x),
            Err(Failed("it does not run this plugin")),
            "a new URL: the whole check again (the addon was unmapped meanwhile)"
        );
        let g = Faked::new();
        let mut x = g.r.clone();
        x.proc_start = Some(776);
        assert_eq!(
            g.check(&x),
            Err(Failed("its start time is not the record's"))
        );
        let mut x = g.r.clone();
        x.pid = 4243;
        assert_eq!(g.check(&x), Err(Failed("no such process")));
        let mut x = g.r.clone();
        x.base_url = None;
        assert_eq!(
            g.check(&x),
            Err(Failed("it does not run this plugin")),
            "headless now: checked again"
        );
    }

    /// Issue 30: the socket seen changed hands — the pid's fd now holds another socket (the listener was
    /// handed to another process, or closed), or the port's listener is another socket now — refused.
    #[cfg(unix)]
    #[test]
    fn a_cached_check_refuses_a_socket_that_changed_hands() {
        use verify::Unverified::Failed;
        let f = Faked::new();
        f.relink("fd/5", "socket:[6000]");
        assert_eq!(
            f.check(&f.r),
            Err(Failed("it does not run this plugin")),
            "fd 5 holds another socket: the whole check again"
        );
        let g = Faked::new();
        g.listen_table(7000);
        assert_eq!(
            g.check(&g.r),
            Err(Failed("it does not run this plugin")),
            "another socket listens on the port"
        );
        // and with the addon mapped again, the same changes fail the socket check itself
        let h = Faked::new();
        fs::write(
            h.p().join("maps"),
            "7f00-7f10 r-xp 00000000 08:01 99 /x/dsh-session-mail.linux-x64-gnu.node\n",
        )
        .unwrap();
        h.listen_table(7000);
        assert_eq!(
            h.check(&h.r),
            Err(Failed("it does not listen on its web URL"))
        );
    }

    /// Issue 30: a process now of another user, or (relative DSH_HOME) with another cwd, is checked again.
    #[cfg(unix)]
    #[test]
    fn a_cached_check_follows_the_cwd_of_a_relative_home() {
        use verify::Unverified::Failed;
        let f = Faked::new();
        let elsewhere = f.home.parent().unwrap().join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        f.relink("cwd", elsewhere.to_str().unwrap());
        assert_eq!(f.check(&f.r), Err(Failed("not a DSH host on this home")));
    }

    /// Issue 30: with the real `/proc`, the socket a process listens on is found through netlink (the
    /// kernel's listening hash, not the `/proc/<pid>/net/tcp` tables), held by this process's fd; another
    /// live process does not hold it; once closed it is no longer found.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_listening_socket_is_found_by_netlink_and_its_holder_only() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let me = std::process::id();
        let proc = Path::new("/proc");
        let held = verify::testing::listens_on(proc, me, port).expect("this process listens there");
        assert!(held.by_netlink(), "found through netlink: {held:?}");
        assert!(held.still_held(proc, me));
        let parent = std::os::unix::process::parent_id();
        assert!(verify::testing::listens_on(proc, parent, port).is_none());
        assert!(!held.still_held(proc, parent), "not the parent's");
        drop(l);
        assert!(!held.still_held(proc, me), "closed");
        assert!(verify::testing::listens_on(proc, me, port).is_none());
    }

    /// Issue 30: a record file read once is not opened again while its identity holds; rewritten in place
    /// (same inode, same size, its modification time set back: only the kernel's change time differs) or
    /// swapped (renamed over), it is read again.
    #[cfg(unix)]
    #[test]
    fn a_record_file_is_read_again_when_rewritten_in_place_or_swapped() {
        let home = tempfile::tempdir().unwrap();
        let other = other_live_pid();
        let now = base::clock::now_ms();
        let path = record_path(home.path(), other);
        let write = |base: &str| {
            let mut r = rec(other, &[("session-b", "idle")]);
            r.base_url = Some(base.into());
            r.updated_at = now;
            serde_json::to_vec(&r).unwrap()
        };
        fs::create_dir_all(dir(home.path())).unwrap();
        fs::write(&path, write("http://127.0.0.1:1111")).unwrap();
        let mtime = fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(Identity::RACY + std::time::Duration::from_millis(50));
        let url = || {
            owner(home.path(), "session-b")
                .and_then(|(r, _)| r.base_url)
                .unwrap_or_default()
        };
        assert_eq!(url(), "http://127.0.0.1:1111");
        // cached: the same identity is not opened again (a file of the same identity made unreadable
        // is still answered from the cache)
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        let before = ino(&path);
        {
            use std::io::Write;
            let mut f = fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.write_all(&write("http://127.0.0.1:2222")).unwrap();
            f.set_modified(mtime).unwrap();
        }
        assert_eq!(ino(&path), before, "rewritten in place");
        assert_eq!(
            url(),
            "http://127.0.0.1:2222",
            "rewritten in place: read again"
        );
        let tmp = dir(home.path()).join("swap.tmp");
        fs::write(&tmp, write("http://127.0.0.1:3333")).unwrap();
        fs::rename(&tmp, &path).unwrap();
        assert_eq!(url(), "http://127.0.0.1:3333", "swapped: read again");
    }

    /// Issue 30: a send's lookup checks against their process only the records that list its target (the
    /// freshest first, until one is believed), not every record of the home.
    #[cfg(unix)]
    #[test]
    fn finding_an_owner_checks_only_the_records_that_list_it() {
        let home = tempfile::tempdir().unwrap();
        let other = other_live_pid();
        let me = std::process::id();
        let now = base::clock::now_ms();
        fs::create_dir_all(dir(home.path())).unwrap();
        let plant = |pid: u32, id: &str, at: i64| {
            let mut r = rec(pid, &[(id, "idle")]);
            r.updated_at = at;
            fs::write(
                record_path(home.path(), pid),
                serde_json::to_vec(&r).unwrap(),
            )
            .unwrap();
        };
        plant(other, "session-b", now - 10);
        plant(me, "session-b", now); // this process's own: never a peer
        for pid in [1u32, 2, 3] {
            plant(pid, &format!("session-x{pid}"), now); // pid 1 is alive; 2, 3 may be
        }
        let checked = std::sync::Mutex::new(Vec::new());
        let found = find_checked(
            home.path(),
            me,
            now,
            |r| r.sessions.iter().any(|s| s.id == "session-b"),
            |r| {
                checked.lock().unwrap().push(r.pid);
                true
            },
        );
        assert_eq!(found.map(|r| r.pid), Some(other));
        assert_eq!(*checked.lock().unwrap(), vec![other]);
        // all of them, for a listing
        let all = peers_checked(home.path(), me, now, |r| {
            checked.lock().unwrap().push(r.pid);
            true
        });
        assert!(all.iter().any(|r| r.pid == 1) && all.iter().any(|r| r.pid == other));
    }

    // Issue 30: the locator (`presence/by-session/<hash>`) — the lookup reads it first; every way it can be
    // wrong leaves the answer to the full scan. Each test below fails with the fallback removed from
    // `owner_checked` (its lookup answers None, or the locator's process).

    /// A record planted as of `at` (no locator written: an older plugin's, or one whose locator write failed).
    fn plant(home: &Path, pid: u32, ids: &[&str], at: i64) {
        let ids: Vec<(&str, &str)> = ids.iter().map(|i| (*i, "idle")).collect();
        let mut r = rec(pid, &ids);
        r.updated_at = at;
        fs::create_dir_all(dir(home)).unwrap();
        fs::write(record_path(home, pid), serde_json::to_vec(&r).unwrap()).unwrap();
    }

    /// A locator planted as anyone who can write the home could.
    fn plant_locator(home: &Path, session: &str, pid: u32, started_at: i64) {
        fs::create_dir_all(locator::dir(home)).unwrap();
        let l = locator::Locator {
            v: 1,
            session: session.into(),
            pid,
            started_at,
        };
        fs::write(
            locator::path(home, session),
            serde_json::to_vec(&l).unwrap(),
        )
        .unwrap();
    }

    /// `owner_checked` with every check believed except those of `refused`; the pids it checked.
    fn owner_now(home: &Path, session: &str, now: i64, refused: &[u32]) -> (Option<u32>, Vec<u32>) {
        let checked = std::sync::Mutex::new(Vec::new());
        let found = owner_checked(home, std::process::id(), now, session, |r| {
            checked.lock().unwrap().push(r.pid);
            !refused.contains(&r.pid)
        });
        (found.map(|(r, _)| r.pid), checked.into_inner().unwrap())
    }

    #[cfg(unix)]
    #[test]
    fn the_locator_leads_to_the_owner_without_the_scan() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let other = other_live_pid();
        let now = base::clock::now_ms();
        publish(h, &rec(other, &[("session-s", "idle")]), now - 10).unwrap();
        assert_eq!(locator::read(h, "session-s").map(|l| l.pid), Some(other));
        // a fresher forged record listing S (pid 1: alive, no DSH host of this home)
        plant(h, 1, &["session-s"], now);
        let (found, checked) = owner_now(h, "session-s", now, &[1]);
        assert_eq!(found, Some(other));
        assert_eq!(
            checked,
            vec![other],
            "the locator's record alone was checked"
        );
        // without it the scan checks the fresher forged record first
        fs::remove_file(locator::path(h, "session-s")).unwrap();
        let (found, checked) = owner_now(h, "session-s", now, &[1]);
        assert_eq!((found, checked), (Some(other), vec![1, other]));
    }

    #[cfg(unix)]
    #[test]
    fn a_missing_locator_leaves_the_owner_to_the_scan() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let other = other_live_pid();
        let now = base::clock::now_ms();
        plant(h, other, &["session-s"], now);
        assert!(!locator::dir(h).exists());
        assert_eq!(owner_now(h, "session-s", now, &[]).0, Some(other));
        // the folder there, the session's locator not
        plant_locator(h, "session-t", other, 1);
        assert_eq!(owner_now(h, "session-s", now, &[]).0, Some(other));
    }

    #[cfg(unix)]
    #[test]
    fn a_forged_locator_never_diverts_a_send() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let other = other_live_pid();
        let me = std::process::id();
        let now = base::clock::now_ms();
        plant(h, other, &["session-s"], now - 10);
        // naming a live process whose record does not list S
        plant(h, 1, &["session-x"], now);
        plant_locator(h, "session-s", 1, 1);
        assert_eq!(owner_now(h, "session-s", now, &[]).0, Some(other));
        // naming one whose record lists S but fails the check against its process
        plant(h, 1, &["session-s"], now);
        let (found, checked) = owner_now(h, "session-s", now, &[1]);
        assert_eq!(found, Some(other));
        assert!(checked.contains(&other), "{checked:?}");
        plant(h, 1, &["session-x"], now);
        // naming this process (never a peer), or of another start than the record's
        plant(h, me, &["session-s"], now);
        plant_locator(h, "session-s", me, 1);
        assert_eq!(owner_now(h, "session-s", now, &[]).0, Some(other));
        plant(h, 1, &["session-s"], now - 20);
        plant_locator(h, "session-s", 1, 999);
        let (found, checked) = owner_now(h, "session-s", now, &[]);
        assert_eq!(found, Some(other), "the scan's freshest: {checked:?}");
        plant(h, 1, &["session-x"], now);
        // a locator written for another session, a link, another user's words: not read
        let l = locator::Locator {
            v: 1,
            session: "session-x".into(),
            pid: 1,
            started_at: 1,
        };
        fs::write(
            locator::path(h, "session-s"),
            serde_json::to_vec(&l).unwrap(),
        )
        .unwrap();
        assert!(locator::read(h, "session-s").is_none());
        assert_eq!(owner_now(h, "session-s", now, &[]).0, Some(other));
        fs::remove_file(locator::path(h, "session-s")).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        plant_locator(elsewhere.path(), "session-s", 1, 1);
        std::os::unix::fs::symlink(
            locator::path(elsewhere.path(), "session-s"),
            locator::path(h, "session-s"),
        )
        .unwrap();
        assert!(locator::read(h, "session-s").is_none());
        fs::remove_file(locator::path(h, "session-s")).unwrap();
        fs::remove_dir(locator::dir(h)).unwrap();
        std::os::unix::fs::symlink(locator::dir(elsewhere.path()), locator::dir(h)).unwrap();
        assert!(
            locator::read(h, "session-s").is_none(),
            "a linked folder is not followed"
        );
        assert_eq!(owner_now(h, "session-s", now, &[]).0, Some(other));
    }

    #[cfg(unix)]
    #[test]
    fn a_locator_left_by_an_exited_holder_leaves_the_owner_to_the_scan() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let other = other_live_pid();
        let now = base::clock::now_ms();
        let mut gone = sleeper();
        let gone_pid = gone.0.id();
        publish(h, &rec(gone_pid, &[("session-s", "idle")]), now).unwrap();
        assert_eq!(locator::read(h, "session-s").map(|l| l.pid), Some(gone_pid));
        // it crashed (no withdraw): its record and locator stay; S is taken up by `other`
        gone.0.kill().unwrap();
        gone.0.wait().unwrap();
        plant(h, other, &["session-s"], now - 10);
        let (found, checked) = owner_now(h, "session-s", now, &[]);
        assert_eq!(found, Some(other));
        assert!(!checked.contains(&gone_pid), "{checked:?}");
        // nobody took it up: not live anywhere (never the dead pid's)
        fs::remove_file(record_path(h, other)).unwrap();
        assert_eq!(owner_now(h, "session-s", now, &[]).0, None);
    }

    #[cfg(unix)]
    #[test]
    fn a_moved_session_is_found_at_its_new_holder() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let other = other_live_pid();
        let now = base::clock::now_ms();
        let a = sleeper();
        let a_pid = a.0.id();
        publish(h, &rec(a_pid, &[("session-s", "idle")]), now - 10).unwrap();
        // S moved to `other`; A lives on, its record no longer lists S, its locator still names A
        plant(h, a_pid, &["session-y"], now - 5);
        plant(h, other, &["session-s"], now - 10);
        assert_eq!(locator::read(h, "session-s").map(|l| l.pid), Some(a_pid));
        let (found, checked) = owner_now(h, "session-s", now, &[]);
        assert_eq!(found, Some(other));
        assert!(!checked.contains(&a_pid), "{checked:?}");
        // the new holder's publish takes the locator over: found through it
        publish(h, &rec(other, &[("session-s", "idle")]), now).unwrap();
        assert_eq!(locator::read(h, "session-s").map(|l| l.pid), Some(other));
        assert_eq!(
            owner_now(h, "session-s", now, &[]),
            (Some(other), vec![other])
        );
        // and A's publish without S leaves the locator that names `other` alone
        publish(h, &rec(a_pid, &[("session-y", "idle")]), now).unwrap();
        assert_eq!(locator::read(h, "session-s").map(|l| l.pid), Some(other));
    }

    #[cfg(unix)]
    #[test]
    fn a_publisher_writes_reasserts_and_removes_its_locators() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let p = sleeper();
        let pid = p.0.id();
        let t = 1_000_000;
        let names = |h: &Path, s: &str| locator::read(h, s).map(|l| (l.pid, l.started_at));
        publish(h, &rec(pid, &[("s1", "idle"), ("s2", "running")]), t).unwrap();
        assert_eq!(names(h, "s1"), Some((pid, 1)));
        assert_eq!(names(h, "s2"), Some((pid, 1)));
        // overwritten by someone else: a refresh that lists the same writes nothing ...
        plant_locator(h, "s1", 1, 1);
        let before = fs::symlink_metadata(locator::path(h, "s2")).unwrap();
        publish(h, &rec(pid, &[("s1", "idle"), ("s2", "idle")]), t + 1_000).unwrap();
        assert_eq!(names(h, "s1"), Some((1, 1)));
        use std::os::unix::fs::MetadataExt;
        let after = fs::symlink_metadata(locator::path(h, "s2")).unwrap();
        assert_eq!(before.ino(), after.ino(), "not rewritten by a refresh");
        // ... and REASSERT_MS later it names the publisher again
        publish(
            h,
            &rec(pid, &[("s1", "idle"), ("s2", "idle")]),
            t + locator::REASSERT_MS,
        )
        .unwrap();
        assert_eq!(names(h, "s1"), Some((pid, 1)));
        // a session no longer listed: its locator goes; another process's is left alone
        plant_locator(h, "s3", 1, 1);
        publish(
            h,
            &rec(pid, &[("s1", "idle")]),
            t + locator::REASSERT_MS + 1,
        )
        .unwrap();
        assert_eq!(names(h, "s2"), None);
        assert_eq!(names(h, "s3"), Some((1, 1)));
        // withdrawn: its locators go with its record
        withdraw(h, pid);
        assert_eq!(names(h, "s1"), None);
        assert_eq!(names(h, "s3"), Some((1, 1)));
        // no temp file left in the folder
        let left: Vec<_> = fs::read_dir(locator::dir(h))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[cfg(unix)]
    #[test]
    fn a_process_record_is_read_by_its_pid_alone() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let other = other_live_pid();
        let me = std::process::id();
        let now = base::clock::now_ms();
        assert!(
            of_pid_checked(h, me, now, other, |_| true).is_none(),
            "no folder"
        );
        plant(h, other, &["session-s"], now);
        plant(h, me, &["session-s"], now);
        let by_pid =
            |pid: u32, now: i64, ok: bool| of_pid_checked(h, me, now, pid, |_| ok).map(|r| r.pid);
        assert_eq!(by_pid(other, now, true), Some(other));
        assert_eq!(
            by_pid(other, now, true),
            find_checked(h, me, now, |r| r.pid == other, |_| true).map(|r| r.pid)
        );
        assert_eq!(by_pid(other, now, false), None, "not believed");
        assert_eq!(by_pid(other, now + STALE_MS + 1, true), None, "stale");
        assert_eq!(by_pid(me, now, true), None, "this process");
        // a record naming another pid than its file's
        let mut r = rec(1, &[("session-s", "idle")]);
        r.updated_at = now;
        fs::write(record_path(h, 4_000_000), serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(by_pid(4_000_000, now, true), None);
    }
}
