//! Links between machines (issue 31): this home's machine identity, the sealed list of linked machines,
//! one-time invites, the Iroh endpoint (one per home, held behind a lease) and the bounded request/response
//! protocol on ALPN [`wire::ALPN`]. Generic over the payload (`serde_json::Value`, or any
//! `Serialize`/`DeserializeOwned` through [`Machines::call_typed`]); it knows nothing of tools — the binding
//! hands it a [`node::Handler`] (core's `serve`) and calls [`Machines::call`] for core's trait.
//!
//! Trust: a peer is the `EndpointId` its QUIC/TLS handshake proved, never an id it reports; a connection
//! from an endpoint that is not linked is closed in [`node`]'s `after_handshake` hook, before any stream of
//! it is read. Only the human links (CLI, web routes): no tool reaches [`Machines::invite`],
//! [`Machines::accept_invite`] or [`Machines::unlink`]. See docs/machines.md.

pub mod b64;
pub mod error;
pub mod holder;
pub mod identity;
pub mod lease;
mod machines;
pub mod node;
pub mod store;
pub mod wire;

pub use error::{CallError, LinkError, WireError};
pub use machines::{Machines, Status};
pub use node::{Handler, Node, NodeConfig};
pub use store::{Link, Relay};

use std::path::{Path, PathBuf};

/// Largest frame either side of a link accepts (and sends): [`wire::MAX_FRAME`].
pub const MAX_FRAME: usize = 4 * 1024 * 1024;

/// This home's machine folder: `$DSH_HOME/dsh-session-mail/machine` (0700).
pub fn machine_dir(home: &Path) -> PathBuf {
    base::home::plugin_dir(home).join("machine")
}

/// Make the plugin folder and `machine/` private folders (0700), refusing links and foreign owners.
pub fn ensure_machine_dir(home: &Path) -> std::io::Result<PathBuf> {
    let p = base::home::plugin_dir(home);
    base::fsafe::ensure_private_dir(&p)?;
    let m = machine_dir(home);
    base::fsafe::ensure_private_dir(&m)?;
    Ok(m)
}

/// A machine's id: its Iroh `EndpointId` (the public half of its key) as lower-case hex, 64 characters.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct MachineId(String);

impl MachineId {
    pub fn parse(s: &str) -> Option<MachineId> {
        let ok = s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| MachineId(s.to_string()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn of(id: &iroh::EndpointId) -> MachineId {
        MachineId(hex(id.as_bytes()))
    }
    pub fn endpoint_id(&self) -> iroh::EndpointId {
        let mut b = [0u8; 32];
        for (i, c) in b.iter_mut().enumerate() {
            *c = u8::from_str_radix(&self.0[2 * i..2 * i + 2], 16).unwrap_or(0);
        }
        // a 64-hex string that is not a curve point cannot have come from a handshake
        iroh::EndpointId::from_bytes(&b)
            .unwrap_or_else(|_| iroh::SecretKey::from_bytes(&[0; 32]).public())
    }
}

impl std::fmt::Display for MachineId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for MachineId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        MachineId::parse(&s)
            .ok_or_else(|| "not a machine id (64 lower-case hex characters)".to_string())
    }
}

impl From<MachineId> for String {
    fn from(m: MachineId) -> String {
        m.0
    }
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push(H[(x >> 4) as usize] as char);
        s.push(H[(x & 15) as usize] as char);
    }
    s
}

/// Parse lower- or upper-case hex of exactly `N` bytes.
pub fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; N];
    for (i, c) in out.iter_mut().enumerate() {
        *c = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// A machine's name as its human gave it: `[a-z0-9][a-z0-9-]{0,31}`.
pub fn valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}
