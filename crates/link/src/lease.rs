//! One endpoint per home (Iroh's rule: two live endpoints must never use one key). The DSH processes of a
//! home elect one **holder**: the process that holds an exclusive `flock` on `machine/lease.lock`. The kernel
//! releases it the moment the holder exits or dies, so another process takes over at its next try (the
//! watchers try every second: within seconds). The holder also writes `machine/lease.json` — its pid, its
//! start time (`/proc/<pid>/stat` field 22) and when it last renewed — which the other processes check
//! before they trust the socket they reach it by: the pid must be alive with that same start time (a
//! recycled pid is not the holder) and the record renewed within [`STALE_MS`]. A record that fails these is
//! stale: nobody is reached through it, and the lock decides who takes over.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use base::fsafe::{self, Follow};
use serde::{Deserialize, Serialize};

use base::fsafe::Flock;

/// A record not renewed for this long is stale.
pub const STALE_MS: i64 = 10_000;
/// How often the holder renews (and a watcher tries to take over).
pub const RENEW_MS: u64 = 1_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub pid: u32,
    pub start: Option<u64>,
    pub renewed_at: i64,
}

pub fn lock_path(home: &Path) -> PathBuf {
    crate::machine_dir(home).join("lease.lock")
}
pub fn record_path(home: &Path) -> PathBuf {
    crate::machine_dir(home).join("lease.json")
}

/// `/proc/<pid>/stat` field 22, the process's start in clock ticks after boot.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let (b, _) = fsafe::read_capped(
        &PathBuf::from(format!("/proc/{pid}/stat")),
        Follow::Yes,
        4096,
    )
    .ok()?;
    let s = String::from_utf8_lossy(&b);
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The lease, while this process holds it. Dropping it releases the lock.
pub struct Lease {
    _lock: Flock,
    home: PathBuf,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lease({})", self.home.display())
    }
}

/// Take the lease if no process of the home holds it now.
pub fn try_take(home: &Path) -> io::Result<Option<Lease>> {
    crate::ensure_machine_dir(home)?;
    let Some(lock) = Flock::try_lock(&lock_path(home))? else {
        return Ok(None);
    };
    let l = Lease {
        _lock: lock,
        home: home.to_path_buf(),
    };
    l.renew()?;
    Ok(Some(l))
}

impl Lease {
    /// Write the record again with the time now.
    pub fn renew(&self) -> io::Result<()> {
        renew_record(&self.home)
    }
}

/// Write this process's record with the time now (what [`Lease::renew`] does): for its holder only, on the
/// blocking pool (a file write and a rename: the file system can stall them).
pub(crate) fn renew_record(home: &Path) -> io::Result<()> {
    let pid = std::process::id();
    let r = Record {
        pid,
        start: start_ticks(pid),
        renewed_at: base::clock::now_ms(),
    };
    let bytes = serde_json::to_vec(&r).map_err(io::Error::other)?;
    let put = fsafe::Put {
        sync: false,
        replace: true,
    };
    fsafe::write_private(&crate::machine_dir(home), &record_path(home), &bytes, put)
}

/// The record as written (bounded, never through a link), unchecked.
pub fn read_record(home: &Path) -> Option<Record> {
    let (b, m) = fsafe::read_capped(&record_path(home), Follow::No, 4096).ok()?;
    if fsafe::foreign_owner(&m).is_some() {
        return None;
    }
    serde_json::from_slice(&b).ok()
}

/// The live holder of the home's lease: its record, when the pid is alive with the recorded start time and
/// the record is fresh. (Without `/proc`, freshness alone.)
pub fn holder(home: &Path) -> Option<Record> {
    let r = read_record(home)?;
    if base::clock::now_ms() - r.renewed_at > STALE_MS {
        return None;
    }
    if std::path::Path::new("/proc/self/stat").exists() {
        let live = start_ticks(r.pid)?;
        if r.start != Some(live) {
            return None;
        }
    }
    Some(r)
}

/// Whether the lease is free right now (no process holds the lock). Takes and releases it at once.
pub fn is_free(home: &Path) -> bool {
    matches!(Flock::try_lock(&lock_path(home)), Ok(Some(_)))
}

/// Remove the record (the holder's orderly exit).
pub(crate) fn clear(home: &Path) {
    let _ = fs::remove_file(record_path(home));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_the_next_takes_over_when_it_goes() {
        let h = tempfile::tempdir().unwrap();
        let a = try_take(h.path()).unwrap().expect("free");
        assert!(try_take(h.path()).unwrap().is_none(), "held");
        let r = holder(h.path()).expect("a live holder");
        assert_eq!(r.pid, std::process::id());
        drop(a);
        let b = try_take(h.path()).unwrap();
        assert!(b.is_some(), "taken over once released");
    }

    #[test]
    fn a_stale_or_recycled_record_names_no_holder() {
        let h = tempfile::tempdir().unwrap();
        let _l = try_take(h.path()).unwrap().unwrap();
        let mut r = read_record(h.path()).unwrap();
        r.renewed_at -= STALE_MS + 1;
        fs::write(record_path(h.path()), serde_json::to_vec(&r).unwrap()).unwrap();
        assert!(holder(h.path()).is_none(), "not renewed");
        let mut r = read_record(h.path()).unwrap();
        r.renewed_at = base::clock::now_ms();
        r.start = r.start.map(|s| s + 1);
        fs::write(record_path(h.path()), serde_json::to_vec(&r).unwrap()).unwrap();
        assert!(holder(h.path()).is_none(), "another process under that pid");
        fs::write(record_path(h.path()), b"{garbage").unwrap();
        assert!(holder(h.path()).is_none());
    }
}
