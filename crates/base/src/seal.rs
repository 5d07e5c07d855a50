//! The plugin's private keys and seals: one rule for a key file under DSH_HOME (32 random bytes in
//! a regular file of this user, mode 0600, never through a link; made once, atomically: two
//! processes racing both end up with the first one's) and one HMAC-SHA256 for what is sealed with
//! it (the human's policy and held mail, the store's read checkpoints); and one reader and writer
//! of a sealed, numbered document ([`Numbered`]: the human's policy, the links between machines).
//!
//! A key only proves "written by a process of this user that could read the key": see
//! docs/architecture.md (the trust model).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hmac::{Hmac, KeyInit, Mac};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor,
};
use serde::Serialize;
use sha2::Sha256;

use crate::fsafe::{self, Follow};

/// Bytes in a key.
pub const KEY_LEN: usize = 32;

/// A key read from (or made in) a key file. Redacted `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(Vec<u8>);

impl Key {
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(<redacted>)")
    }
}

/// Why a key file cannot be used (the caller names the file).
#[derive(Debug)]
pub enum KeyError {
    /// It could not be read or written (the system's error, or `fsafe`'s refusal: a link, not a
    /// regular file, too big).
    Io(io::Error),
    /// Owned by another user.
    ForeignOwner,
    /// Group or others may read it.
    Exposed,
    /// Not [`KEY_LEN`] bytes.
    WrongLength,
    /// Made by another process and gone before it could be read.
    Vanished,
}

impl From<io::Error> for KeyError {
    fn from(e: io::Error) -> KeyError {
        KeyError::Io(e)
    }
}

impl std::fmt::Display for KeyError {
    /// The words after the file's name: `<file>: <io error>`, `<file> is owned by another user`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::Io(e) => write!(f, ": {e}"),
            KeyError::ForeignOwner => f.write_str(" is owned by another user"),
            KeyError::Exposed => f.write_str(" is readable by others"),
            KeyError::WrongLength => f.write_str(" has the wrong length"),
            KeyError::Vanished => f.write_str(" vanished"),
        }
    }
}

/// The key in `path`, if there is one (`Ok(None)`: no such file). Never follows a link, never
/// blocks on a FIFO, reads at most 64 bytes.
pub fn read_key(path: &Path) -> Result<Option<Key>, KeyError> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
        Ok(_) => {}
    }
    let (bytes, m) = fsafe::read_capped(path, Follow::No, 64)?;
    if fsafe::foreign_owner(&m).is_some() {
        return Err(KeyError::ForeignOwner);
    }
    if fsafe::mode_of(&m) & 0o077 != 0 {
        return Err(KeyError::Exposed);
    }
    if bytes.len() != KEY_LEN {
        return Err(KeyError::WrongLength);
    }
    Ok(Some(Key(bytes)))
}

/// The key in `path`, made on first use in its folder (which must exist and be private). Written to
/// a temporary file and linked into place, so a reader never sees half a key; two processes racing:
/// the first link wins and the other reads it.
pub fn key_or_make(path: &Path) -> Result<Key, KeyError> {
    if let Some(k) = read_key(path)? {
        return Ok(k);
    }
    let mut key = Vec::with_capacity(KEY_LEN);
    key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    let dir = path.parent().unwrap_or(Path::new("."));
    let put = fsafe::Put {
        sync: true,
        replace: false,
    };
    match fsafe::write_private(dir, path, &key, put) {
        Ok(()) => Ok(Key(key)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            read_key(path)?.ok_or(KeyError::Vanished)
        }
        Err(e) => Err(e.into()),
    }
}

/// HMAC-SHA256 over the concatenation of `parts`.
pub fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC takes a key of any length: `new_from_slice` cannot fail.
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// Constant-time check of a [`mac`].
pub fn verify(key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    let Ok(mut m) = <Hmac<Sha256> as KeyInit>::new_from_slice(key) else {
        return false;
    };
    for p in parts {
        m.update(p);
    }
    m.verify_slice(tag).is_ok()
}

/// The seal of `bytes` in `domain` (a policy document, held mail, a decision): HMAC-SHA256 of
/// `domain || 0 || bytes`, lowercase hex.
pub fn seal_hex(key: &[u8], domain: &str, bytes: &[u8]) -> String {
    crate::text::hex(&mac(key, &[domain.as_bytes(), &[0], bytes]))
}

/// Constant-time check of a [`seal_hex`].
pub fn check_hex(key: &[u8], domain: &str, bytes: &[u8], mac_hex: &str) -> bool {
    let want = seal_hex(key, domain, bytes);
    want.len() == mac_hex.len()
        && want
            .bytes()
            .zip(mac_hex.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// A document `{"<field>": T, "mac": "<seal>"}` sealed under a key ([`seal_hex`] of the body in
/// its domain) and numbered: `seq` is raised on every write, and a reading below the highest one
/// this process verified (or wrote) for the home is a replayed older copy. One kind a static
/// ([`Numbered::new`]): the human's policy (crates/core/src/policy), the links (crates/link/src/store.rs).
pub struct Numbered {
    domain: &'static str,
    field: &'static str,
    max_bytes: u64,
    /// The highest sequence verified or written per home, in this process.
    seen: Mutex<Vec<(PathBuf, u64)>>,
}

/// A document a [`Numbered`] kind holds.
pub trait Sequenced: Serialize + DeserializeOwned {
    fn seq(&self) -> u64;
    fn set_seq(&mut self, seq: u64);
}

/// Why a numbered document is not believed (`E`: the caller's own "no key" words).
#[derive(Debug)]
pub enum Refused<E> {
    /// Gone, while this process saw one verified for the home.
    Removed,
    /// It could not be inspected or read (the system's error, or `fsafe`'s refusal: a link, not a
    /// regular file, too big).
    Unreadable(io::Error),
    ForeignOwner,
    /// The caller's key could not be had.
    Key(E),
    /// Not a sealed document of this kind.
    NotADocument,
    /// Its seal does not verify.
    BadSeal,
    /// Its sequence is older than the highest this process had verified or written when the read
    /// began (a replayed older copy).
    WentBack {
        seen: u64,
        seq: u64,
    },
}

/// Why a numbered document could not be written.
#[derive(Debug)]
pub enum WriteError {
    Encode(serde_json::Error),
    Io(io::Error),
}

impl Numbered {
    /// The kind sealed in `domain`, its document under `field`, read up to `max_bytes`.
    pub const fn new(domain: &'static str, field: &'static str, max_bytes: u64) -> Numbered {
        Numbered {
            domain,
            field,
            max_bytes,
            seen: Mutex::new(Vec::new()),
        }
    }

    /// The highest sequence this process verified or wrote for `home` (0: none).
    pub fn seen(&self, home: &Path) -> u64 {
        self.seen
            .lock()
            .map(|v| v.iter().find(|(p, _)| p == home).map_or(0, |(_, s)| *s))
            .unwrap_or(0)
    }

    /// Forget what this process saw for `home`: it reads on as a process that never read it (for
    /// tests of a fresh process).
    pub fn forget(&self, home: &Path) {
        if let Ok(mut v) = self.seen.lock() {
            v.retain(|(p, _)| p != home);
        }
    }

    fn note_seen(&self, home: &Path, seq: u64) {
        if let Ok(mut v) = self.seen.lock() {
            match v.iter_mut().find(|(p, _)| p == home) {
                Some(e) => e.1 = e.1.max(seq),
                None => v.push((home.to_path_buf(), seq)),
            }
        }
    }

    /// Read `home`'s document at `path`: `Ok(None)` when there is none and this process never
    /// verified one (a missing folder on the way counts as none). Bounded, never through a link,
    /// never blocking on a FIFO; the owner is checked before `key` is asked for, the key before the
    /// bytes are parsed.
    ///
    /// A replay is a document older than the highest this process had seen when the read **began**:
    /// one that a writer of this process superseded while it was being read was the one in force
    /// then (comparing with the mark the writer raised meanwhile refused it, and the links of a
    /// linked peer read as none mid-handshake).
    pub fn read<T: Sequenced, K: AsRef<[u8]>, E>(
        &self,
        home: &Path,
        path: &Path,
        key: impl FnOnce() -> Result<K, E>,
    ) -> Result<Option<T>, Refused<E>> {
        let seen = self.seen(home);
        match fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound || not_a_dir(&e) => {
                return if seen > 0 {
                    Err(Refused::Removed)
                } else {
                    Ok(None)
                };
            }
            Err(e) => return Err(Refused::Unreadable(e)),
            Ok(_) => {}
        }
        let (bytes, m) =
            fsafe::read_capped(path, Follow::No, self.max_bytes).map_err(Refused::Unreadable)?;
        if fsafe::foreign_owner(&m).is_some() {
            return Err(Refused::ForeignOwner);
        }
        let key = key().map_err(Refused::Key)?;
        let doc: T =
            unseal(key.as_ref(), self.domain, self.field, &bytes).map_err(|u| match u {
                Unseal::NotADocument => Refused::NotADocument,
                Unseal::BadSeal => Refused::BadSeal,
            })?;
        if doc.seq() < seen {
            return Err(Refused::WentBack {
                seen,
                seq: doc.seq(),
            });
        }
        self.note_seen(home, doc.seq());
        Ok(Some(doc))
    }

    /// Give `doc` the next sequence number (above its own and every one this process saw for
    /// `home`), seal it under `key` and write it to `path` in `dir` (private, synced, atomically
    /// replacing the one there).
    pub fn write<T: Sequenced>(
        &self,
        home: &Path,
        dir: &Path,
        path: &Path,
        key: &[u8],
        doc: &mut T,
    ) -> Result<(), WriteError> {
        doc.set_seq(doc.seq().max(self.seen(home)) + 1);
        let bytes =
            sealed_bytes(key, self.domain, self.field, &*doc).map_err(WriteError::Encode)?;
        let put = fsafe::Put {
            sync: true,
            replace: true,
        };
        fsafe::write_private(dir, path, &bytes, put).map_err(WriteError::Io)?;
        self.note_seen(home, doc.seq());
        Ok(())
    }
}

/// The bytes of `doc` sealed under `key` in `domain`: `{"<field>": doc, "mac": <seal_hex of doc's
/// JSON>}` (held mail and the human's decisions, foreign sender ids, the numbered documents).
pub fn sealed_bytes<T: Serialize>(
    key: &[u8],
    domain: &str,
    field: &'static str,
    doc: &T,
) -> Result<Vec<u8>, serde_json::Error> {
    let body = serde_json::to_vec(doc)?;
    let mac = seal_hex(key, domain, &body);
    serde_json::to_vec(&Envelope {
        field,
        doc,
        mac: &mac,
    })
}

/// The document of [`sealed_bytes`] when its seal checks under `key` in `domain`; `None` when the
/// bytes are not such a document (or carry more after it) or the seal does not check.
pub fn open_bytes<T: Serialize + DeserializeOwned>(
    key: &[u8],
    domain: &str,
    field: &'static str,
    bytes: &[u8],
) -> Option<T> {
    unseal(key, domain, field, bytes).ok()
}

enum Unseal {
    NotADocument,
    BadSeal,
}

fn unseal<T: Serialize + DeserializeOwned>(
    key: &[u8],
    domain: &str,
    field: &'static str,
    bytes: &[u8],
) -> Result<T, Unseal> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let (doc, mac) = Envelope::<T>::seed(field)
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|_| Unseal::NotADocument)?;
    let body = serde_json::to_vec(&doc).map_err(|_| Unseal::NotADocument)?;
    if !check_hex(key, domain, &body, &mac) {
        return Err(Unseal::BadSeal);
    }
    Ok(doc)
}

fn not_a_dir(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ENOTDIR)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// The sealed form on disk: what `#[derive(Serialize, Deserialize)] struct { <field>: T, mac: String }`
/// would write and read, with the field's name chosen by the kind (a struct of two fields; unknown
/// fields are passed over, a field twice or missing is not a document).
struct Envelope<'a, T> {
    field: &'static str,
    doc: &'a T,
    mac: &'a str,
}

impl<T: Serialize> Serialize for Envelope<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Sealed", 2)?;
        st.serialize_field(self.field, self.doc)?;
        st.serialize_field("mac", self.mac)?;
        st.end()
    }
}

/// Reads an [`Envelope`]: the document and its seal.
struct EnvelopeSeed<T> {
    field: &'static str,
    doc: std::marker::PhantomData<T>,
}

impl<T> Envelope<'_, T> {
    fn seed(field: &'static str) -> EnvelopeSeed<T> {
        EnvelopeSeed {
            field,
            doc: std::marker::PhantomData,
        }
    }
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for EnvelopeSeed<T> {
    type Value = (T, String);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(T, String), D::Error> {
        d.deserialize_struct("Sealed", &[], self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for EnvelopeSeed<T> {
    type Value = (T, String);
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a sealed document ({} and mac)", self.field)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<(T, String), A::Error> {
        let doc = a
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let mac = a
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        Ok((doc, mac))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<(T, String), A::Error> {
        let (mut doc, mut mac) = (None, None);
        while let Some(k) = a.next_key::<std::borrow::Cow<'de, str>>()? {
            if k == self.field {
                if doc.is_some() {
                    return Err(de::Error::duplicate_field(self.field));
                }
                doc = Some(a.next_value()?);
            } else if k == "mac" {
                if mac.is_some() {
                    return Err(de::Error::duplicate_field("mac"));
                }
                mac = Some(a.next_value()?);
            } else {
                a.next_value::<de::IgnoredAny>()?;
            }
        }
        Ok((
            doc.ok_or_else(|| de::Error::missing_field(self.field))?,
            mac.ok_or_else(|| de::Error::missing_field("mac"))?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_made_once_private_and_whole_and_a_bad_file_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("key");
        assert!(read_key(&p).unwrap().is_none());
        let k = key_or_make(&p).unwrap();
        assert_eq!(k.bytes().len(), KEY_LEN);
        assert_eq!(format!("{k:?}"), "Key(<redacted>)");
        // made once: the second call reads the first one's; no temporary file is left
        assert_eq!(key_or_make(&p).unwrap(), k);
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                0o600
            );
            fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
            assert!(matches!(read_key(&p), Err(KeyError::Exposed)));
            fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
            let q = d.path().join("linked");
            std::os::unix::fs::symlink(&p, &q).unwrap();
            assert!(
                matches!(read_key(&q), Err(KeyError::Io(_))),
                "a link is not followed"
            );
        }
        fs::write(&p, b"short").unwrap();
        assert!(matches!(read_key(&p), Err(KeyError::WrongLength)));
        assert_eq!(KeyError::WrongLength.to_string(), " has the wrong length");
    }

    #[test]
    fn seals_are_hmac_sha256_and_check_only_with_the_same_key_domain_and_bytes() {
        // RFC 4231 test case 2
        let tag = mac(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            crate::text::hex(&tag),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(verify(b"Jefe", &[b"what do ya want for nothing?"], &tag));
        assert!(!verify(b"Jefx", &[b"what do ya want for nothing?"], &tag));
        let k = [7u8; 32];
        let s = seal_hex(&k, "policy", b"{}");
        assert_eq!(s, crate::text::hex(&mac(&k, &[b"policy\0{}"])));
        assert!(check_hex(&k, "policy", b"{}", &s));
        assert!(!check_hex(&k, "held", b"{}", &s));
        assert!(!check_hex(&k, "policy", b"{ }", &s));
        assert!(!check_hex(&k, "policy", b"{}", &s[..63]));
        // a sealed document: the derived two-field form; opened only under its key, domain and field
        let doc = serde_json::json!({"a": 1});
        let b = sealed_bytes(&k, "held", "body", &doc).unwrap();
        let mac = seal_hex(&k, "held", b"{\"a\":1}");
        assert_eq!(
            b,
            format!("{{\"body\":{{\"a\":1}},\"mac\":\"{mac}\"}}").into_bytes()
        );
        assert_eq!(open_bytes(&k, "held", "body", &b), Some(doc));
        assert_eq!(
            open_bytes::<serde_json::Value>(&k, "decision", "body", &b),
            None
        );
        assert_eq!(
            open_bytes::<serde_json::Value>(&[8; 32], "held", "body", &b),
            None
        );
        assert_eq!(open_bytes::<serde_json::Value>(&k, "held", "doc", &b), None);
        assert_eq!(
            open_bytes::<serde_json::Value>(&k, "held", "body", &b[1..]),
            None
        );
    }

    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Note {
        seq: u64,
        text: String,
    }
    impl Sequenced for Note {
        fn seq(&self) -> u64 {
            self.seq
        }
        fn set_seq(&mut self, seq: u64) {
            self.seq = seq;
        }
    }
    /// What `#[derive]` of the two fields writes: the shared piece reads and writes that form.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Derived {
        note: Note,
        mac: String,
    }

    #[test]
    fn a_numbered_document_reads_back_and_a_forged_torn_replayed_or_foreign_keyed_one_is_refused() {
        static KIND: Numbered = Numbered::new("note", "note", 4096);
        type R = Result<Option<Note>, Refused<&'static str>>;
        let h = tempfile::tempdir().unwrap();
        let (home, p) = (h.path(), h.path().join("note.json"));
        let k = [7u8; 32];
        let read = |key: [u8; 32]| -> R { KIND.read(home, &p, || Ok::<_, &str>(key)) };
        assert!(matches!(read(k), Ok(None)), "none yet: absent");
        let mut n = Note {
            seq: 0,
            text: "one".into(),
        };
        KIND.write(home, home, &p, &k, &mut n).unwrap();
        assert_eq!(n.seq, 1);
        let old = fs::read(&p).unwrap();
        let d: Derived = serde_json::from_slice(&old).unwrap();
        assert_eq!(d.note, n);
        assert_eq!(
            d.mac,
            seal_hex(&k, "note", &serde_json::to_vec(&n).unwrap())
        );
        assert_eq!(
            old,
            serde_json::to_vec(&d).unwrap(),
            "the derived form, byte for byte"
        );
        n.text = "two".into();
        KIND.write(home, home, &p, &k, &mut n).unwrap();
        assert_eq!(n.seq, 2);
        assert_eq!(read(k).unwrap(), Some(n.clone()));
        // the key is asked for after the owner, before the bytes are parsed
        fs::write(&p, b"junk").unwrap();
        let r: R = KIND.read(home, &p, || Err::<[u8; 32], _>("no key"));
        assert!(matches!(r, Err(Refused::Key("no key"))));
        // torn, not a document, a field twice, trailing bytes
        let now = {
            KIND.write(home, home, &p, &k, &mut n).unwrap();
            fs::read(&p).unwrap()
        };
        fs::write(&p, &now[..now.len() - 3]).unwrap();
        assert!(matches!(read(k), Err(Refused::NotADocument)));
        let twice = format!(
            "{{\"note\":{{\"seq\":9,\"text\":\"x\"}},{}",
            std::str::from_utf8(&now[1..]).unwrap()
        );
        fs::write(&p, twice).unwrap();
        assert!(matches!(read(k), Err(Refused::NotADocument)));
        fs::write(&p, [&now[..], b"x"].concat()).unwrap();
        assert!(matches!(read(k), Err(Refused::NotADocument)));
        // forged: numbered up without the key; the right document under another key
        let mut forged: serde_json::Value = serde_json::from_slice(&now).unwrap();
        forged["note"]["seq"] = 99.into();
        fs::write(&p, forged.to_string()).unwrap();
        assert!(matches!(read(k), Err(Refused::BadSeal)));
        fs::write(&p, &now).unwrap();
        assert!(matches!(read([8u8; 32]), Err(Refused::BadSeal)));
        assert_eq!(read(k).unwrap().map(|n| n.seq), Some(3));
        // numbered back: the older sealed copy put back
        fs::write(&p, &old).unwrap();
        assert!(matches!(
            read(k),
            Err(Refused::WentBack { seen: 3, seq: 1 })
        ));
        // removed after one was seen; a fresh process (forget) reads none
        fs::remove_file(&p).unwrap();
        assert!(matches!(read(k), Err(Refused::Removed)));
        KIND.forget(home);
        assert!(matches!(read(k), Ok(None)));
        // too big, and a link: not read
        fs::write(&p, vec![b' '; 4097]).unwrap();
        assert!(matches!(read(k), Err(Refused::Unreadable(_))));
        #[cfg(unix)]
        {
            fs::remove_file(&p).unwrap();
            let elsewhere = home.join("elsewhere.json");
            fs::write(&elsewhere, &now).unwrap();
            std::os::unix::fs::symlink(&elsewhere, &p).unwrap();
            assert!(matches!(read(k), Err(Refused::Unreadable(_))));
        }
    }

    /// A reader of this process that opened the document just before a writer of this process put
    /// the next one in its place read the one in force when it began: not a replay. (Before, the
    /// sequence was compared with the high-water mark as it stood after the read, which the writer
    /// had raised meanwhile: the links read as none and a linked peer was refused mid-handshake —
    /// bad_peers' flood let a fifth in when the gate refused one of the four.)
    #[test]
    fn a_document_superseded_by_this_process_while_it_is_read_is_not_a_replay() {
        static KIND: Numbered = Numbered::new("note", "note", 1 << 20);
        let h = tempfile::tempdir().unwrap();
        let (home, p) = (h.path().to_path_buf(), h.path().join("note.json"));
        let k = [7u8; 32];
        let mut n = Note {
            seq: 0,
            // a document big enough that reading and checking it takes a while
            text: "x".repeat(64 * 1024),
        };
        KIND.write(&home, &home, &p, &k, &mut n).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let bad = std::thread::scope(|s| {
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let mut bad = vec![];
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            match KIND.read::<Note, _, ()>(&home, &p, || Ok(k)) {
                                Ok(Some(_)) => {}
                                other => bad.push(format!("{other:?}")),
                            }
                        }
                        bad
                    })
                })
                .collect();
            for _ in 0..40 {
                KIND.write(&home, &home, &p, &k, &mut n).unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            readers
                .into_iter()
                .flat_map(|r| r.join().unwrap())
                .collect::<Vec<_>>()
        });
        assert!(
            bad.is_empty(),
            "{} readings refused, first: {}",
            bad.len(),
            bad[0].chars().take(120).collect::<String>()
        );
    }
}
