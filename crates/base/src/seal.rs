//! The plugin's private keys and seals: one rule for a key file under DSH_HOME (32 random bytes in
//! a regular file of this user, mode 0600, never through a link; made once, atomically: two
//! processes racing both end up with the first one's) and one HMAC-SHA256 for what is sealed with
//! it (the human's policy and held mail, the store's read checkpoints).
//!
//! A key only proves "written by a process of this user that could read the key": see
//! docs/architecture.md (the trust model).

use std::fs;
use std::io;
use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
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
    }
}
