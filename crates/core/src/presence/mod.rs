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
//! `<digits>.json` are opened (never following a symlink), each is capped at [`MAX_RECORD_BYTES`],
//! at most [`MAX_RECORDS`] names are looked at, and a record whose `pid` differs from its name is
//! ignored.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use base::fsafe;

pub mod foreign;

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
/// Longest id / field kept from a record.
const MAX_FIELD: usize = 512;

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

fn cut(s: &mut String) {
    if s.len() > MAX_FIELD {
        let mut end = MAX_FIELD;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// Why this process's presence record was not written (the system's reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishError {
    /// The plugin's folder or its presence folder could not be made private.
    Folder(String),
    /// The record could not be encoded.
    Encode(String),
    /// Writing or renaming the record failed.
    Record(String),
}

impl std::fmt::Display for PublishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PublishError::Folder(e) => write!(f, "presence folder: {e}"),
            PublishError::Encode(e) => f.write_str(e),
            PublishError::Record(e) => write!(f, "presence record: {e}"),
        }
    }
}

impl std::error::Error for PublishError {}

/// Write this process's record atomically (temp file in the same folder, then rename). The
/// record's `updatedAt` is set to `now_ms`.
pub fn publish(home: &Path, record: &Record, now_ms: i64) -> Result<(), PublishError> {
    let d = dir(home);
    base::fsafe::ensure_private_dir(&base::home::plugin_dir(home))
        .and_then(|_| base::fsafe::ensure_private_dir(&d))
        .map_err(|e| PublishError::Folder(e.to_string()))?;
    let mut r = record.clone();
    r.v = 1;
    r.updated_at = now_ms;
    let text = serde_json::to_vec(&r).map_err(|e| PublishError::Encode(e.to_string()))?;
    let tmp = d.join(format!(".{}.{}.tmp", r.pid, uuid::Uuid::new_v4().simple()));
    let written = (|| -> io::Result<()> {
        let mut f = fsafe::create_private(&tmp)?;
        f.write_all(&text)?;
        fs::rename(&tmp, record_path(home, r.pid))
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(PublishError::Record(e.to_string()));
    }
    Ok(())
}

/// Remove this process's record (plugin disposed, process exiting).
pub fn withdraw(home: &Path, pid: u32) {
    let _ = fs::remove_file(record_path(home, pid));
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

/// Read one record file with every bound applied; None when it is not a usable record.
fn read_record(p: &Path, pid: u32) -> Option<Record> {
    let meta = fs::symlink_metadata(p).ok()?;
    if !meta.file_type().is_file() || meta.len() > MAX_RECORD_BYTES {
        return None;
    }
    let f = open_no_follow(p).ok()?;
    let m = f.metadata().ok()?;
    if !m.file_type().is_file() {
        return None;
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
        cut(&mut s.status);
    }
    for f in [&mut r.profile, &mut r.host_version, &mut r.base_url]
        .into_iter()
        .flatten()
    {
        cut(f);
    }
    Some(r)
}

/// The fresh records of the other live processes on this home (not `self_pid`), freshest first.
/// Records of dead processes are removed on the way (the folder is this plugin's own).
pub fn peers(home: &Path, self_pid: u32, now_ms: i64) -> Vec<Record> {
    let d = dir(home);
    match fs::symlink_metadata(&d) {
        Ok(m) if m.file_type().is_dir() => {}
        _ => return Vec::new(),
    }
    let Ok(rd) = fs::read_dir(&d) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in rd.flatten().take(MAX_RECORDS * 4) {
        if out.len() >= MAX_RECORDS {
            break;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(pid) = name
            .strip_suffix(".json")
            .filter(|n| !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == self_pid {
            continue;
        }
        let path = entry.path();
        if !pid_alive(pid) {
            // Its owner is gone for good: the record can never become true again.
            if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file()) {
                let _ = fs::remove_file(&path);
            }
            continue;
        }
        let Some(r) = read_record(&path, pid) else {
            continue;
        };
        if now_ms.saturating_sub(r.updated_at) > STALE_MS || r.updated_at > now_ms + STALE_MS {
            continue;
        }
        out.push(r);
    }
    out.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.pid.cmp(&b.pid)));
    out
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
    fn other_live_pid() -> u32 {
        std::os::unix::process::parent_id()
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
        assert!(names.iter().all(|n| n.ends_with(".json")), "{names:?}");
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

    #[test]
    fn withdraw_removes_the_record() {
        let home = tempfile::tempdir().unwrap();
        let other = other_live_pid();
        publish(home.path(), &rec(other, &[("session-b", "idle")]), 10_000).unwrap();
        withdraw(home.path(), other);
        assert!(peers(home.path(), 0, 10_000).is_empty());
    }
}
