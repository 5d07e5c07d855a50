//! Claims this process settled but could not write the receipt of (its name is taken by a folder a
//! hostile hand planted, which a `rename` cannot replace and nothing here removes; or the write failed
//! otherwise). The claim stays, and without this memory every drain would take it again — read the
//! envelope, look its request id up in the log, hand it to the shim, fail to settle it — every 250 ms
//! for as long as the process lives. Remembered here, in this process's memory only and bounded, such a
//! claim is passed over unopened: one delivery attempt and one settle per claim per process. Once this
//! process is gone the claim is an orphan, and the session's next holder tries once in its turn.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

/// Most claims remembered (the oldest is forgotten first: it is then claimed once more, and remembered
/// again when its receipt still cannot be written).
pub const MAX_UNSETTLED: usize = 4096;

/// A claim: its shard, the file stem (the request id's UUID) and the claiming pid.
type Claim = (PathBuf, String, u32);

#[derive(Default)]
struct Memory {
    order: VecDeque<Claim>,
    set: HashSet<Claim>,
}

static MEMORY: LazyLock<Mutex<Memory>> = LazyLock::new(Mutex::default);

/// Remember that the claim `<key>.claimed-<pid>` in `shard` was settled without a receipt written.
pub fn remember(shard: &Path, key: &str, pid: u32) {
    let c = (shard.to_path_buf(), key.to_string(), pid);
    let mut m = MEMORY.lock().unwrap_or_else(|p| p.into_inner());
    if m.set.contains(&c) {
        return;
    }
    if m.order.len() >= MAX_UNSETTLED {
        if let Some(old) = m.order.pop_front() {
            m.set.remove(&old);
        }
    }
    m.set.insert(c.clone());
    m.order.push_back(c);
}

/// Was the claim `<key>.claimed-<pid>` in `shard` settled here without a receipt written?
pub fn holds(shard: &Path, key: &str, pid: u32) -> bool {
    let m = MEMORY.lock().unwrap_or_else(|p| p.into_inner());
    m.set.contains(&(shard.to_path_buf(), key.to_string(), pid))
}
