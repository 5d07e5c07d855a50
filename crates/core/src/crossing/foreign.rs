//! Which machine each foreign sender session id first came from (`machine/foreign.json`).
//!
//! A sender id arriving from machine M is taken only if it is not a session of this home and not
//! already recorded for another machine; then it is recorded for M (first seen wins, for good). A
//! reply to it goes to M. The document is sealed with its own key (`machine/foreign.key`, `base::seal`)
//! and bounded ([`MAX_IDS`]); a document that does not verify, or that cannot be written, refuses every
//! new claim (fails closed) — a forged file can never move an id to another machine. The human clears
//! it by removing both files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use base::fsafe::{self, Follow};
use base::seal;
use serde::{Deserialize, Serialize};

use crate::machine::wire::ForeignWhy;
use crate::machine::MachineId;

/// Most foreign ids remembered; past it a new one is refused (`Unrecorded`).
pub const MAX_IDS: usize = 16_384;
const MAX_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
struct Doc {
    ids: BTreeMap<String, MachineId>,
}

fn path(home: &Path) -> PathBuf {
    super::dir(home).join("foreign.json")
}
fn key_path(home: &Path) -> PathBuf {
    super::dir(home).join("foreign.key")
}

/// One writer per process at a time (a home's serving process is one, by the link's lease).
static LOCK: Mutex<()> = Mutex::new(());

/// What identifies one state of a file on disk: a write in place or a new file under the name changes
/// its inode, size, modification or change time (the change time cannot be set by a process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileState {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileState {
    fn of(m: &std::fs::Metadata) -> FileState {
        use std::os::unix::fs::MetadataExt;
        FileState {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        }
    }
    /// Changed at least [`SETTLED_MS`] before `at_ms`: a change after a reading at `at_ms` cannot
    /// leave the same times (the file system's clock ticks coarser than a nanosecond).
    fn settled_at(&self, at_ms: i64) -> bool {
        let changed = self.mtime_ns.max(self.ctime_ns) / 1_000_000;
        changed <= i128::from(at_ms) - i128::from(SETTLED_MS)
    }
}

/// How long before a reading a file must have last changed for that reading to be remembered ([`CACHE`]).
const SETTLED_MS: i64 = 2_000;

/// Per home, in this process: the document as last read and verified, with the states of the document
/// and its key file it was read from — an arriving send asks [`recorded`] each time, and reading and
/// verifying it costs ~0.1 ms; two `lstat`s decide it is still that document. Kept only when both files
/// had settled when they were read ([`SETTLED_MS`]); forgotten on any change of either, and on this
/// process's own writes.
static CACHE: Mutex<Vec<(PathBuf, FileState, FileState, Doc)>> = Mutex::new(Vec::new());

fn states(home: &Path) -> Option<(FileState, FileState)> {
    let d = std::fs::symlink_metadata(path(home)).ok()?;
    let k = std::fs::symlink_metadata(key_path(home)).ok()?;
    Some((FileState::of(&d), FileState::of(&k)))
}

/// The document, `Err` when it exists and does not verify (or cannot be read); from [`CACHE`] when
/// neither file changed since it was verified.
fn read(home: &Path) -> Result<Doc, ()> {
    let before = states(home);
    if let Some((d, k)) = before {
        let c = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((.., doc)) = c
            .iter()
            .find(|(h, cd, ck, _)| h == home && *cd == d && *ck == k)
        {
            return Ok(doc.clone());
        }
    }
    let at = base::clock::now_ms();
    #[cfg(test)]
    let at = at + tests::LATER_MS.with(|l| l.get());
    let doc = read_verified(home)?;
    // remembered only when the files are as they were before the reading, and had settled by then
    if let Some((d, k)) = before.filter(|(d, k)| d.settled_at(at) && k.settled_at(at)) {
        if states(home) == Some((d, k)) {
            let mut c = CACHE.lock().unwrap_or_else(|p| p.into_inner());
            c.retain(|(h, ..)| h != home);
            c.push((home.to_path_buf(), d, k, doc.clone()));
        }
    }
    Ok(doc)
}

fn read_verified(home: &Path) -> Result<Doc, ()> {
    #[cfg(test)]
    tests::VERIFIED.with(|v| v.set(v.get() + 1));
    let p = path(home);
    match std::fs::symlink_metadata(&p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Doc::default()),
        Err(_) => return Err(()),
        Ok(_) => {}
    }
    let (bytes, m) = fsafe::read_capped(&p, Follow::No, MAX_BYTES).map_err(|_| ())?;
    if fsafe::foreign_owner(&m).is_some() {
        return Err(());
    }
    let key = seal::read_key(&key_path(home)).ok().flatten().ok_or(())?;
    let doc: Doc = seal::open_bytes(key.bytes(), "foreign", "doc", &bytes).ok_or(())?;
    if doc.ids.len() > MAX_IDS {
        return Err(());
    }
    Ok(doc)
}

fn write(home: &Path, doc: &Doc) -> std::io::Result<()> {
    CACHE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|(h, ..)| h != home);
    let d = super::ensure(home, None)?;
    let key = seal::key_or_make(&key_path(home)).map_err(|e| match e {
        seal::KeyError::Io(e) => e,
        other => std::io::Error::other(format!("foreign.key{other}")),
    })?;
    let bytes =
        seal::sealed_bytes(key.bytes(), "foreign", "doc", doc).map_err(std::io::Error::other)?;
    let put = fsafe::Put {
        sync: true,
        replace: true,
    };
    fsafe::write_private(&d, &path(home), &bytes, put)
}

/// What [`claim`] decides for sender `id` from `from` without asking whether `id` is one of this home's
/// sessions — as it decides it: `Some(Ok)` when it is recorded for `from` already (every send of a sender
/// after its first), `Some(Err)` when `claim` refuses it before that question (not an id, another machine's,
/// a record that does not verify); `None` when it is not recorded yet and only [`claim`] can take it.
/// Writes nothing. An arriving send runs this beside the question to its host (`remote::serve_value_at`).
pub fn recorded(home: &Path, id: &str, from: &MachineId) -> Option<Result<(), ForeignWhy>> {
    if !crate::mailbox::addressable(id) {
        return Some(Err(ForeignWhy::NotAnId));
    }
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let doc = match read(home) {
        Ok(d) => d,
        Err(()) => return Some(Err(ForeignWhy::Unrecorded)),
    };
    match doc.ids.get(id) {
        Some(m) if m == from => Some(Ok(())),
        Some(_) => Some(Err(ForeignWhy::OtherMachine)),
        None => None,
    }
}

/// Take sender `id` arriving from `from`: `Ok` when it is (now) recorded for `from`. `is_local`: does
/// `id` name a session of this home (the caller asks the store and presence).
pub fn claim(
    home: &Path,
    id: &str,
    from: &MachineId,
    is_local: impl FnOnce(&str) -> bool,
) -> Result<(), ForeignWhy> {
    if !crate::mailbox::addressable(id) {
        return Err(ForeignWhy::NotAnId);
    }
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut doc = read(home).map_err(|_| ForeignWhy::Unrecorded)?;
    match doc.ids.get(id) {
        Some(m) if m == from => return Ok(()),
        Some(_) => return Err(ForeignWhy::OtherMachine),
        None => {}
    }
    if is_local(id) {
        return Err(ForeignWhy::Local);
    }
    if doc.ids.len() >= MAX_IDS {
        return Err(ForeignWhy::Unrecorded);
    }
    doc.ids.insert(id.to_string(), from.clone());
    write(home, &doc).map_err(|_| ForeignWhy::Unrecorded)
}

/// The machine foreign session `id` came from, if this home recorded one (a document that does not
/// verify knows none).
pub fn machine_of(home: &Path, id: &str) -> Option<MachineId> {
    read(home).ok()?.ids.get(id).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// How much later than the clock this test thread reads (files written "long before").
        pub(super) static LATER_MS: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
        /// Full readings and verifications of the document on this test thread ([`CACHE`] missed).
        pub(super) static VERIFIED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn verified() -> usize {
        VERIFIED.with(|v| v.get())
    }

    #[test]
    fn a_settled_document_is_verified_once_and_any_change_of_it_or_its_key_is_read_again() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let other = "session-1123456789abcdef0123456789abcdef";
        assert_eq!(claim(h, ID, &m('a'), |_| false), Ok(()));
        // just written: not remembered (a change in the same tick of the clock would look the same)
        recorded(h, ID, &m('a'));
        let n = verified();
        recorded(h, ID, &m('a'));
        assert!(verified() > n, "read again while it has not settled");
        // settled: verified once, then answered from memory
        LATER_MS.with(|l| l.set(10_000));
        assert_eq!(recorded(h, ID, &m('a')), Some(Ok(())));
        let n = verified();
        assert_eq!(recorded(h, ID, &m('a')), Some(Ok(())));
        assert_eq!(recorded(h, other, &m('a')), None);
        assert_eq!(
            recorded(h, ID, &m('b')),
            Some(Err(ForeignWhy::OtherMachine))
        );
        assert_eq!(
            verified(),
            n,
            "a settled document is not verified at every call"
        );
        // (a real change comes after the remembered reading has settled: here it is made at least a
        // tick of the file system's clock after it, or its times could read the same)
        let tick = || std::thread::sleep(std::time::Duration::from_millis(30));
        // rewritten by hand (the id moved to b, the same length): read again, the seal fails
        let p = path(h);
        tick();
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, text.replace(&"a".repeat(64), &"b".repeat(64))).unwrap();
        assert_eq!(recorded(h, ID, &m('b')), Some(Err(ForeignWhy::Unrecorded)));
        assert!(verified() > n);
        assert_eq!(recorded(h, ID, &m('a')), Some(Err(ForeignWhy::Unrecorded)));
        tick();
        std::fs::write(&p, text).unwrap();
        assert_eq!(recorded(h, ID, &m('a')), Some(Ok(())));
        assert_eq!(recorded(h, ID, &m('a')), Some(Ok(())));
        // another key put in place: the document no longer verifies
        tick();
        std::fs::remove_file(key_path(h)).unwrap();
        seal::key_or_make(&key_path(h)).unwrap();
        assert_eq!(recorded(h, ID, &m('a')), Some(Err(ForeignWhy::Unrecorded)));
        // this process's own write is seen at once
        std::fs::remove_file(key_path(h)).unwrap();
        std::fs::remove_file(&p).unwrap();
        assert_eq!(claim(h, other, &m('b'), |_| false), Ok(()));
        assert_eq!(recorded(h, other, &m('b')), Some(Ok(())));
        assert_eq!(recorded(h, ID, &m('a')), None);
        LATER_MS.with(|l| l.set(0));
    }

    fn m(c: char) -> MachineId {
        MachineId::parse(&c.to_string().repeat(64)).unwrap()
    }
    const ID: &str = "session-0123456789abcdef0123456789abcdef";

    #[test]
    fn an_id_belongs_to_the_first_machine_that_used_it_and_a_forgery_moves_nothing() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        assert_eq!(machine_of(h, ID), None);
        assert_eq!(claim(h, ID, &m('a'), |_| false), Ok(()));
        assert_eq!(claim(h, ID, &m('a'), |_| false), Ok(()));
        assert_eq!(
            claim(h, ID, &m('b'), |_| false),
            Err(ForeignWhy::OtherMachine)
        );
        assert_eq!(machine_of(h, ID), Some(m('a')));
        // a local session's id is never taken
        let other = "session-1123456789abcdef0123456789abcdef";
        assert_eq!(claim(h, other, &m('b'), |_| true), Err(ForeignWhy::Local));
        assert_eq!(
            claim(h, "../x", &m('b'), |_| false),
            Err(ForeignWhy::NotAnId)
        );
        // rewritten by hand (the id moved to b): the seal fails, nothing is believed, claims refuse
        let p = path(h);
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, text.replace(&"a".repeat(64), &"b".repeat(64))).unwrap();
        assert_eq!(machine_of(h, ID), None);
        assert_eq!(
            claim(h, ID, &m('b'), |_| false),
            Err(ForeignWhy::Unrecorded)
        );
    }
}
