//! The sending side's memory of which linked machine listed a session (`machine/seen.json`): where a
//! send or a read goes when that machine cannot be asked right now (it is offline: the message then
//! waits in the outbox instead of being refused as not found). A hint for routing only, never a
//! permission: a session of this home always wins over it, the receiving machine checks everything
//! itself, and a forged entry can at most send a message to a machine the human linked. Bounded
//! ([`MAX_IDS`], the oldest dropped); an unreadable file is an empty memory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use base::fsafe::{self, Follow};
use serde::{Deserialize, Serialize};

use crate::machine::MachineId;

/// Most sessions remembered.
pub const MAX_IDS: usize = 4096;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Seen {
    m: MachineId,
    at: i64,
}

fn path(home: &Path) -> PathBuf {
    super::dir(home).join("seen.json")
}

static LOCK: Mutex<()> = Mutex::new(());

fn read(home: &Path) -> BTreeMap<String, Seen> {
    let Ok((bytes, m)) = fsafe::read_capped(&path(home), Follow::No, 1024 * 1024) else {
        return BTreeMap::new();
    };
    if fsafe::foreign_owner(&m).is_some() {
        return BTreeMap::new();
    }
    serde_json::from_slice(&bytes).unwrap_or_default()
}

/// Remember that machine `m` listed sessions `ids` at `now_ms` (written only when something changed).
pub fn remember(home: &Path, m: &MachineId, ids: &[String], now_ms: i64) {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut map = read(home);
    let mut changed = false;
    for id in ids {
        if map.get(id).is_none_or(|s| &s.m != m) {
            changed = true;
        }
        map.insert(
            id.clone(),
            Seen {
                m: m.clone(),
                at: now_ms,
            },
        );
    }
    if !changed {
        return;
    }
    while map.len() > MAX_IDS {
        let Some(oldest) = map.iter().min_by_key(|(_, s)| s.at).map(|(k, _)| k.clone()) else {
            break;
        };
        map.remove(&oldest);
    }
    let Ok(d) = super::ensure(home, None) else {
        return;
    };
    let Ok(bytes) = serde_json::to_vec(&map) else {
        return;
    };
    let put = fsafe::Put {
        sync: false,
        replace: true,
    };
    let _ = fsafe::write_private(&d, &path(home), &bytes, put);
}

/// The machine that last listed session `id`, if any.
pub fn machine_of(home: &Path, id: &str) -> Option<MachineId> {
    read(home).get(id).map(|s| s.m.clone())
}
