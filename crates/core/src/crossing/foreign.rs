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

/// The document, `Err` when it exists and does not verify (or cannot be read).
fn read(home: &Path) -> Result<Doc, ()> {
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
