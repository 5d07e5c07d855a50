//! A machine's identity as every layer names it (docs/architecture.md "Machines and the human's overview"):
//! a DSH home, known by the public half of its Iroh secret key as Iroh prints an `EndpointId` — 64
//! lower-case hex characters. This home is `None` wherever a machine is optional; only a linked machine
//! has a [`MachineId`]. The key itself and the links live in `crates/link` (issue 31); this is the name.

use serde::{Deserialize, Serialize};

/// A linked machine's id: exactly 64 lower-case hex characters (checked when parsed and when read from
/// JSON, so a map keyed by it never holds anything else).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct MachineId(String);

impl MachineId {
    /// `Some` when `s` is 64 lower-case hex characters.
    pub fn parse(s: &str) -> Option<MachineId> {
        (s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| MachineId(s.to_string()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for MachineId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for MachineId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MachineId, D::Error> {
        let s = String::deserialize(d)?;
        MachineId::parse(&s)
            .ok_or_else(|| serde::de::Error::custom("a machine id is 64 lower-case hex characters"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
