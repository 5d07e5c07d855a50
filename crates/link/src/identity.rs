//! This home's machine identity: an Iroh (Ed25519) secret key in `machine/key`, 32 bytes, mode 0600, made on
//! first use with an exclusive create (two processes racing both end up with the first one's key), never
//! through a link, refused when another user owns it or others may read it. The key never leaves the
//! process that holds the lease (only that process binds an endpoint with it) and no tool reads it.

use std::io;
use std::path::{Path, PathBuf};

use base::fsafe;
use base::seal;

use crate::MachineId;

pub fn key_path(home: &Path) -> PathBuf {
    crate::machine_dir(home).join("key")
}

#[derive(Debug)]
pub enum IdentityError {
    Dir(io::Error),
    Key(seal::KeyError),
}

impl From<IdentityError> for crate::LinkError {
    fn from(e: IdentityError) -> Self {
        crate::LinkError::Identity {
            detail: e.to_string(),
        }
    }
}

impl std::fmt::Display for IdentityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdentityError::Dir(e) => write!(f, "the machine folder: {e}"),
            IdentityError::Key(e) => write!(f, "the machine key{e}"),
        }
    }
}

/// The key, if this home has one.
pub fn read(home: &Path) -> Result<Option<iroh::SecretKey>, IdentityError> {
    let k = seal::read_key(&key_path(home)).map_err(IdentityError::Key)?;
    Ok(k.map(|k| {
        let mut b = [0u8; 32];
        b.copy_from_slice(k.bytes());
        iroh::SecretKey::from_bytes(&b)
    }))
}

/// The key, made on first use (a fresh Ed25519 key from the system's random source).
pub fn load_or_make(home: &Path) -> Result<iroh::SecretKey, IdentityError> {
    if let Some(k) = read(home)? {
        return Ok(k);
    }
    let dir = crate::ensure_machine_dir(home).map_err(IdentityError::Dir)?;
    let sk = iroh::SecretKey::generate();
    let put = fsafe::Put {
        sync: true,
        replace: false,
    };
    match fsafe::write_private(&dir, &key_path(home), &sk.to_bytes(), put) {
        Ok(()) => Ok(sk),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            read(home)?.ok_or(IdentityError::Key(seal::KeyError::Vanished))
        }
        Err(e) => Err(IdentityError::Key(seal::KeyError::Io(e))),
    }
}

/// This home's machine id, if it has a key (doctor, `links`).
pub fn machine_id(home: &Path) -> Result<Option<MachineId>, IdentityError> {
    Ok(read(home)?.map(|k| MachineId::of(&k.public())))
}

/// The key that seals `links.json` and `invites.json`: derived from the machine key (one secret to keep).
pub(crate) fn seal_key(sk: &iroh::SecretKey) -> [u8; 32] {
    seal::mac(&sk.to_bytes(), &[b"dsh-session-mail/machine/seal"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_owner_only_and_read_back_the_same() {
        let h = tempfile::tempdir().unwrap();
        assert!(machine_id(h.path()).unwrap().is_none());
        let a = load_or_make(h.path()).unwrap();
        let b = load_or_make(h.path()).unwrap();
        assert_eq!(a.to_bytes(), b.to_bytes());
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::metadata(key_path(h.path())).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        let dm = std::fs::metadata(crate::machine_dir(h.path())).unwrap();
        assert_eq!(dm.permissions().mode() & 0o777, 0o700);
        assert_eq!(
            machine_id(h.path()).unwrap().unwrap(),
            MachineId::of(&a.public())
        );
        // a key others may read is refused, not used
        std::fs::set_permissions(key_path(h.path()), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        assert!(read(h.path()).is_err());
    }
}
