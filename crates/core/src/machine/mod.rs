//! Machines (issue 31): the types every layer shares and the one seam to a linked machine.
//!
//! A **machine** is a DSH home. This home is `machine: None` everywhere; a linked one is a [`Machine`]
//! (`{id, name}`: its Iroh endpoint id and the name *this* home's human gave it). The core never
//! dials: the binding hands it a [`Machines`] (as it hands the mailbox's drain an `Admit`), an
//! implementation over the transport (`crates/link`) that carries one [`wire::Request`] to a linked
//! machine and brings back its [`wire::Response`]. Everything a request does on arrival is the
//! receiving core's own (`tools::remote::serve`). Tests carry requests through serde bytes into
//! another home's `serve` (`tools::remote::tests`).
//!
//! Ground layer: this module uses only `code` and `tool` (the wire's typed answers are its own
//! DTOs, converted to and from the tools' results by `tools::remote`).

pub mod wire;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A machine's identity: the public half of its Iroh secret key as Iroh prints an `EndpointId`
/// (64 lower-case hex characters). Checked on every construction, so a value of this type is
/// always one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct MachineId(String);

impl MachineId {
    /// The id in `s` (`None`: not 64 lower-case hex characters).
    pub fn parse(s: &str) -> Option<MachineId> {
        (s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| MachineId(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 characters (what a human needs to tell two ids apart).
    pub fn short(&self) -> &str {
        &self.0[..12]
    }
}

impl<'de> Deserialize<'de> for MachineId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MachineId, D::Error> {
        let s = String::deserialize(d)?;
        MachineId::parse(&s).ok_or_else(|| serde::de::Error::custom("not a machine id"))
    }
}

// To JS as its string (the binding's `Machine.id`, e.g. in `verifyRequest`'s `machine`).
#[cfg(feature = "napi")]
napi_as_string!(MachineId, |val| val.0);

impl std::fmt::Display for MachineId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Longest machine name (`[a-z0-9][a-z0-9-]{0,31}`).
pub const MAX_NAME: usize = 32;

/// Is `s` a machine name (`[a-z0-9][a-z0-9-]{0,31}`)?
pub fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// A linked machine as this home knows it: its id (the stable key) and the name this home's human
/// gave it at link time (unique per home, renameable).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, js_name = "Machine")
)]
pub struct Machine {
    #[cfg_attr(feature = "napi", napi(ts_type = "string"))]
    pub id: MachineId,
    pub name: String,
}

impl Machine {
    /// The machine a stored id names (the ledger's `fromMachine` / `toMachine`), by the name this home's
    /// human gave its link (`linked`: the binding reads them from crates/link on each call, so a rename
    /// shows at once); a machine no longer linked keeps its id's first 12 characters as its name. A
    /// stored id that is not one reads this home (`None`).
    pub fn of_stored(id: Option<String>, linked: &[Machine]) -> Option<Machine> {
        let id = MachineId::parse(id.as_deref()?)?;
        if let Some(m) = linked.iter().find(|m| m.id == id) {
            return Some(m.clone());
        }
        Some(Machine {
            name: id.as_str().chars().take(12).collect(),
            id,
        })
    }
}

/// Why a call to a linked machine brought back no answer. Nothing here says the far side did or did
/// not act: a request that may have arrived is answered by asking again with the same request id
/// (the far side deduplicates sends by it, durably).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The id is not a linked machine (never linked, or unlinked since).
    Unlinked,
    /// No connection could be made (the machine is offline, or the path is blocked): nothing was sent.
    Unreachable(String),
    /// The deadline passed before an answer (the request may have arrived).
    Timeout,
    /// The answer broke the protocol (over the frame bound, not a response, another version).
    Protocol(String),
}

impl CallError {
    /// The request may have reached the far side.
    pub fn may_have_arrived(&self) -> bool {
        matches!(self, CallError::Timeout | CallError::Protocol(_))
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unlinked => f.write_str("not a linked machine"),
            CallError::Unreachable(why) => write!(f, "unreachable: {why}"),
            CallError::Timeout => f.write_str("no answer before the deadline"),
            CallError::Protocol(why) => write!(f, "bad answer: {why}"),
        }
    }
}

/// What a call returns.
pub type Call<'a> = Pin<Box<dyn Future<Output = Result<wire::Response, CallError>> + Send + 'a>>;

/// The linked machines, as the binding hands them down. Implemented over the transport by the
/// binding (`crates/link`), and by the tests over other homes' `serve`.
pub trait Machines: Send + Sync {
    /// The machines linked now (the links store, read fresh: an unlink takes effect at once).
    fn linked(&self) -> Vec<Machine>;

    /// Carry `req` to machine `to` and bring back its answer within `deadline`. Never panics, never
    /// blocks the caller's thread; an unlinked id is `Err(CallError::Unlinked)`.
    fn call(&self, to: &MachineId, req: wire::Request, deadline: Duration) -> Call<'_>;
}

/// No machine linked (a home without links, the tests of one home).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMachines;

impl Machines for NoMachines {
    fn linked(&self) -> Vec<Machine> {
        Vec::new()
    }
    fn call(&self, _to: &MachineId, _req: wire::Request, _deadline: Duration) -> Call<'_> {
        Box::pin(async { Err(CallError::Unlinked) })
    }
}

/// The machine named `name_or_id` among `linked` (by name, else by full id).
pub fn find<'a>(linked: &'a [Machine], name_or_id: &str) -> Option<&'a Machine> {
    linked
        .iter()
        .find(|m| m.name == name_or_id)
        .or_else(|| linked.iter().find(|m| m.id.as_str() == name_or_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_id_is_64_lower_case_hex_and_nothing_else() {
        let good = "a".repeat(64);
        assert_eq!(MachineId::parse(&good).unwrap().as_str(), good);
        assert!(MachineId::parse(&"A".repeat(64)).is_none());
        assert!(MachineId::parse(&"a".repeat(63)).is_none());
        assert!(MachineId::parse(&format!("{}g", "a".repeat(63))).is_none());
        let j = serde_json::to_string(&good).unwrap();
        assert!(serde_json::from_str::<MachineId>(&j).is_ok());
        assert!(serde_json::from_str::<MachineId>("\"../etc\"").is_err());
    }

    #[test]
    fn only_64_lower_case_hex_characters_are_a_machine_id() {
        let ok = "0123456789abcdef".repeat(4);
        assert_eq!(
            MachineId::parse(&ok).map(|m| m.to_string()),
            Some(ok.clone())
        );
        assert!(MachineId::parse(&ok.to_uppercase()).is_none());
        assert!(MachineId::parse(&ok[1..]).is_none());
        assert!(MachineId::parse(&format!("{}g", &ok[1..])).is_none());
        assert!(serde_json::from_str::<MachineId>("\"../x\"").is_err());
        let m: MachineId = serde_json::from_str(&format!("\"{ok}\"")).unwrap();
        assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{ok}\""));
    }

    #[test]
    fn machine_names_follow_the_agreed_shape() {
        assert!(is_name("laptop"));
        assert!(is_name("box-2"));
        assert!(!is_name("-x"));
        assert!(!is_name("Laptop"));
        assert!(!is_name(""));
        assert!(!is_name(&"a".repeat(33)));
    }
}
