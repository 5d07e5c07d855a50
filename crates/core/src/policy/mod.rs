//! The human's inbound policy (issues 17, 32): per target session `accept` / `hold` / `refuse`, the
//! human's standing rules per sender session and per linked machine, one home-wide "stop all agent mail"
//! switch, and how long held mail waits (`heldTtlMs`).
//!
//! **One order, written once** ([`Policy::rule`], used by [`decide`] for every send — local, drained from
//! a mailbox, or arriving over a link): stop-all > the sender's rule > the sender machine's rule > the
//! target session's inbound > accept. The most specific rule that exists decides; a document that does
//! not verify holds everything.
//!
//! **Who may set it.** Only the human, through the host route the web client calls (`lib/client-host.js`,
//! behind the host's own request policy). No tool an agent can call writes here: the tools only read.
//!
//! **Where it lives.** `$DSH_HOME/dsh-session-mail/policy/policy.json`, one small sealed document, read on
//! every send by whichever process sends (so a switch flipped in one process is in force for every other
//! process on the home at its next send: no cache, no notification to miss).
//!
//! **Files under the home are hostile** (an agent's shell can write there). The document is sealed with an
//! HMAC-SHA256 under a per-home key (`policy/key`, 0600, made once with `O_EXCL`), and carries a sequence
//! number. A reading that cannot be verified — no key, a bad seal, a torn or oversized file, a link, a
//! foreign owner, or a sequence lower than one this process already saw (a replayed older document) — is
//! **never looser than "hold everything"**: [`Reading::Unverified`] makes every send wait for the human,
//! who can save the policy again to re-seal it. A missing document is the default (`accept`, no stop).
//! The seal stops forgeries by anything that does not hold the key; a process of this user that reads the
//! key file could forge — and could equally call the host's loopback routes: that is the host's own trust
//! boundary on rc.8 (docs/architecture.md "The human's inbound policy").

pub mod held;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use base::seal;
use serde::{Deserialize, Serialize};

use base::fsafe;

use crate::machine::MachineId;

/// Largest policy document read.
pub const MAX_POLICY_BYTES: u64 = 256 * 1024;
/// How long a change of the policy waits for another one in progress (`policy/policy.lock`).
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// Most sessions one document names (more is refused at write time); the same bound for sender rules
/// and for machine rules.
pub const MAX_SESSIONS: usize = 4096;
/// How long held mail waits for the human when the document does not say (24 h).
pub const DEFAULT_HELD_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// The shortest `heldTtlMs` the human may set (one second: the UI offers hours and days; a test or a
/// script may want seconds).
pub const MIN_HELD_TTL_MS: u64 = 1000;
/// The longest `heldTtlMs` the human may set (30 days).
pub const MAX_HELD_TTL_MS: u64 = 30 * 24 * 60 * 60 * 1000;

/// How one session takes agent mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Inbound {
    #[default]
    Accept,
    Hold,
    Refuse,
}

impl Inbound {
    pub fn parse(s: &str) -> Option<Inbound> {
        match s {
            "accept" => Some(Inbound::Accept),
            "hold" => Some(Inbound::Hold),
            "refuse" => Some(Inbound::Refuse),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Inbound::Accept => "accept",
            Inbound::Hold => "hold",
            Inbound::Refuse => "refuse",
        }
    }
}

/// The policy document (what the human set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Policy {
    pub v: u32,
    /// Raised on every write; a reading below the highest one seen is a replay.
    pub seq: u64,
    pub stop_all: bool,
    /// Sessions not named take `accept`.
    pub sessions: BTreeMap<String, Inbound>,
    /// The human's standing rules per sender session id ("always allow / hold / refuse from A").
    /// Absent from the document when empty (so a document written before rules existed seals the same).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub senders: BTreeMap<String, Inbound>,
    /// The human's standing rules per linked machine (mail arriving from it).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub machines: BTreeMap<MachineId, Inbound>,
    /// How long held mail waits for the human before it is rejected as expired; absent:
    /// [`DEFAULT_HELD_TTL_MS`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_ttl_ms: Option<u64>,
    pub updated_at: i64,
}

/// Which rule of the one order decided a send ([`Policy::rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum By {
    /// The home-wide "stop all agent mail" switch.
    StopAll,
    /// The human's rule for the sender session.
    Sender,
    /// The human's rule for the machine the message came from.
    Machine,
    /// The target session's inbound policy.
    Session,
    /// No rule names it: accept.
    Default,
    /// The document does not verify: hold everything.
    Unverified,
}

impl By {
    /// The order, first rule first (the UI prints it once where rules are edited).
    pub const ORDER: [By; 5] = [
        By::StopAll,
        By::Sender,
        By::Machine,
        By::Session,
        By::Default,
    ];
}

impl Policy {
    /// The target session's own inbound (rule 4 alone; the view's per-session setting).
    pub fn inbound(&self, session: &str) -> Inbound {
        self.sessions.get(session).copied().unwrap_or_default()
    }

    /// How long held mail waits.
    pub fn held_ttl_ms(&self) -> u64 {
        self.held_ttl_ms.unwrap_or(DEFAULT_HELD_TTL_MS)
    }

    /// THE inbound order, written once: stop-all > the sender's rule > the sender machine's rule > the
    /// target session's inbound > accept. `None` for stop-all (a refusal of its own), else how the
    /// message is taken and which rule said so. `sender_machine`: `None` for a sender of this home.
    pub fn rule(
        &self,
        target: &str,
        sender: &str,
        sender_machine: Option<&MachineId>,
    ) -> (Option<Inbound>, By) {
        if self.stop_all {
            return (None, By::StopAll);
        }
        if let Some(i) = self.senders.get(sender) {
            return (Some(*i), By::Sender);
        }
        if let Some(i) = sender_machine.and_then(|m| self.machines.get(m)) {
            return (Some(*i), By::Machine);
        }
        if let Some(i) = self.sessions.get(target) {
            return (Some(*i), By::Session);
        }
        (Some(Inbound::Accept), By::Default)
    }
}

/// What reading the document gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// No document: the defaults.
    Absent,
    Verified(Policy),
    /// Present but not provably the human's: treated as "hold everything".
    Unverified(Unverified),
}

/// Why the document is not provably the human's (its words: `Display`).
#[derive(Debug, Clone)]
pub enum Unverified {
    /// Gone, while this process saw one verified or the home's key says one was written.
    Removed,
    /// It could not be inspected or read (the system's error, or `fsafe`'s refusal).
    Unreadable(std::sync::Arc<std::io::Error>),
    ForeignOwner,
    /// The home has no key to verify it with.
    NoKey,
    /// The home's key cannot be used.
    Key(std::sync::Arc<seal::KeyError>),
    /// Not a sealed policy document.
    NotADocument,
    /// Its seal does not verify.
    BadSeal,
    /// Its sequence is older than one this process verified (a replayed older copy).
    WentBack {
        seen: u64,
        seq: u64,
    },
}

impl std::fmt::Display for Unverified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unverified::Removed => f.write_str("the policy file was removed"),
            Unverified::Unreadable(e) => write!(f, "policy file: {e}"),
            Unverified::ForeignOwner => f.write_str("the policy file is owned by another user"),
            Unverified::NoKey => f.write_str("the policy file has no key to verify it"),
            Unverified::Key(e) => write!(f, "policy key{e}"),
            Unverified::NotADocument => f.write_str("the policy file is not a policy document"),
            Unverified::BadSeal => f.write_str("the policy file's seal does not verify"),
            Unverified::WentBack { seen, seq } => write!(
                f,
                "the policy file went back from seq {seen} to {seq} (an older copy)"
            ),
        }
    }
}

/// Equal when the same variant says the same (the system's errors compare by their text).
impl PartialEq for Unverified {
    fn eq(&self, other: &Unverified) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.to_string() == other.to_string()
    }
}

impl Eq for Unverified {}

/// What a send to `session` must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Accept,
    /// Wait for the human. `unverified`: why the policy could not be read (then every send waits).
    Hold {
        unverified: Option<Unverified>,
    },
    /// The human refuses it: the target session's inbound, or a standing rule for the sender or its machine
    /// (which one: `By::Session`, `By::Sender`, `By::Machine`).
    Refuse(By),
    /// The home-wide switch is on.
    Stopped,
}

pub fn dir(home: &Path) -> PathBuf {
    home.join("dsh-session-mail").join("policy")
}
fn doc_path(home: &Path) -> PathBuf {
    dir(home).join("policy.json")
}
fn key_path(home: &Path) -> PathBuf {
    dir(home).join("key")
}

/// The policy's kind: sealed in the domain "policy", the document under "policy"; the highest
/// sequence verified per home, in this process (rolls a replayed older document back to hold).
static DOC: seal::Numbered = seal::Numbered::new("policy", "policy", MAX_POLICY_BYTES);

impl seal::Sequenced for Policy {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
    }
}

/// Why the human's policy (or mail held for the human) could not be changed.
#[derive(Debug)]
pub enum PolicyError {
    /// A folder of the plugin could not be made or is not private (`what`: "policy", "held").
    Folder {
        what: &'static str,
        path: PathBuf,
        why: std::io::Error,
    },
    /// The home's key cannot be used.
    Key(seal::KeyError),
    /// Not a session id.
    NotASession(String),
    /// Not a machine id (64 lower-case hex characters).
    NotAMachine(String),
    /// The policy names [`MAX_SESSIONS`] sessions (or sender rules, or machine rules) already.
    Full,
    /// A `heldTtlMs` outside [`MIN_HELD_TTL_MS`]..=[`MAX_HELD_TTL_MS`].
    HeldTtl(u64),
    /// The document could not be encoded.
    Encode(serde_json::Error),
    /// The document could not be written.
    Write(std::io::Error),
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyError::Folder { what, path, why } => {
                write!(f, "{what} folder {}: {why}", path.display())
            }
            PolicyError::Key(e) => write!(f, "policy key{e}"),
            PolicyError::NotASession(s) => write!(f, "{s:?} is not a session id"),
            PolicyError::NotAMachine(s) => write!(f, "{s:?} is not a machine id"),
            PolicyError::Full => write!(f, "the policy names {MAX_SESSIONS} of those already"),
            PolicyError::HeldTtl(ms) => write!(
                f,
                "heldTtlMs {ms} is outside {MIN_HELD_TTL_MS}..={MAX_HELD_TTL_MS} (one second to 30 days)"
            ),
            PolicyError::Encode(e) => e.fmt(f),
            PolicyError::Write(e) => write!(f, "policy file: {e}"),
        }
    }
}

impl std::error::Error for PolicyError {}

impl From<seal::KeyError> for PolicyError {
    fn from(e: seal::KeyError) -> PolicyError {
        PolicyError::Key(e)
    }
}

/// Make (or check) each private folder of `levels`.
pub(crate) fn ensure_private(
    what: &'static str,
    levels: impl IntoIterator<Item = PathBuf>,
) -> Result<(), PolicyError> {
    fsafe::ensure_private_dirs(levels).map_err(|(path, why)| PolicyError::Folder {
        what,
        path,
        why,
    })
}

fn ensure_dir(home: &Path) -> Result<PathBuf, PolicyError> {
    let d = dir(home);
    ensure_private("policy", [home.join("dsh-session-mail"), d.clone()])?;
    Ok(d)
}

fn write_atomic(dir: &Path, dest: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let put = fsafe::Put {
        sync: true,
        replace: true,
    };
    fsafe::write_private(dir, dest, bytes, put)
}

/// The home's key, if one exists and is ours ([`seal::read_key`]).
pub(crate) fn read_key(home: &Path) -> Result<Option<seal::Key>, PolicyError> {
    Ok(seal::read_key(&key_path(home))?)
}

/// The home's key, made on first use (only the human's route writes: a tool never calls this).
pub(crate) fn key_or_make(home: &Path) -> Result<seal::Key, PolicyError> {
    if let Some(k) = read_key(home)? {
        return Ok(k);
    }
    ensure_dir(home)?;
    Ok(seal::key_or_make(&key_path(home))?)
}

/// Read the document (never blocks on it, never follows a link, bounded).
pub fn read(home: &Path) -> Reading {
    let key = || match seal::read_key(&key_path(home)) {
        Ok(Some(k)) => Ok(k),
        Ok(None) => Err(Unverified::NoKey),
        Err(e) => Err(Unverified::Key(e.into())),
    };
    match DOC.read(home, &doc_path(home), key) {
        // Gone, while the home's key says one was written: deleting it must not loosen. (A home where
        // neither this process saw one nor a key exists never had a policy: the defaults.)
        Ok(None) if fs::symlink_metadata(key_path(home)).is_ok() => {
            Reading::Unverified(Unverified::Removed)
        }
        Ok(None) => Reading::Absent,
        Ok(Some(p)) => Reading::Verified(p),
        Err(why) => Reading::Unverified(match why {
            seal::Refused::Removed => Unverified::Removed,
            seal::Refused::Unreadable(e) => Unverified::Unreadable(e.into()),
            seal::Refused::ForeignOwner => Unverified::ForeignOwner,
            seal::Refused::Key(u) => u,
            seal::Refused::NotADocument => Unverified::NotADocument,
            seal::Refused::BadSeal => Unverified::BadSeal,
            seal::Refused::WentBack { seen, seq } => Unverified::WentBack { seen, seq },
        }),
    }
}

/// What a message from `sender` (of `sender_machine`, `None` for this home) to `target` must do now:
/// the one order of [`Policy::rule`] over the document as read now (no document: accept; one that does
/// not verify: hold).
pub fn decide(
    home: &Path,
    target: &str,
    sender: &str,
    sender_machine: Option<&MachineId>,
) -> Decision {
    decision_of(&read(home), target, sender, sender_machine)
}

/// [`decide`] over a reading in hand (the drain reads the document once per pass).
pub fn decision_of(
    reading: &Reading,
    target: &str,
    sender: &str,
    sender_machine: Option<&MachineId>,
) -> Decision {
    let p = match reading {
        Reading::Absent => return Decision::Accept,
        Reading::Unverified(why) => {
            return Decision::Hold {
                unverified: Some(why.clone()),
            }
        }
        Reading::Verified(p) => p,
    };
    match p.rule(target, sender, sender_machine) {
        (None, _) => Decision::Stopped,
        (Some(Inbound::Accept), _) => Decision::Accept,
        (Some(Inbound::Hold), _) => Decision::Hold { unverified: None },
        (Some(Inbound::Refuse), by) => Decision::Refuse(by),
    }
}

/// How long held mail waits under the document as read now (the default when there is none or it does
/// not verify: an unverifiable document never shortens nor lengthens the human's window).
pub fn held_ttl_ms(home: &Path) -> u64 {
    match read(home) {
        Reading::Verified(p) => p.held_ttl_ms(),
        _ => DEFAULT_HELD_TTL_MS,
    }
}

/// A change the human asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The target session's inbound (`accept` removes it from the document).
    Session(String, Inbound),
    StopAll(bool),
    /// A standing rule for a sender session; `None` removes it.
    Sender(String, Option<Inbound>),
    /// A standing rule for a linked machine; `None` removes it.
    Machine(MachineId, Option<Inbound>),
    /// How long held mail waits (ms).
    HeldTtl(u64),
}

/// Put or remove `key`'s rule in `map`, bounded by [`MAX_SESSIONS`].
fn set_rule<K: Ord + Clone>(
    map: &mut BTreeMap<K, Inbound>,
    key: &K,
    rule: Option<Inbound>,
) -> Result<(), PolicyError> {
    match rule {
        None => {
            map.remove(key);
        }
        Some(r) => {
            if !map.contains_key(key) && map.len() >= MAX_SESSIONS {
                return Err(PolicyError::Full);
            }
            map.insert(key.clone(), r);
        }
    }
    Ok(())
}

/// Apply the human's change and write the re-sealed document. The base is the verified document, or the
/// defaults when there is none or it does not verify (saving re-seals: the human sees what they saved).
/// Returns the policy now in force.
pub fn apply(home: &Path, change: &Change, now_ms: i64) -> Result<Policy, PolicyError> {
    let key = key_or_make(home)?;
    let d = ensure_dir(home)?;
    // One change at a time, across the home's processes: each reads what the last one wrote.
    let _one =
        fsafe::Flock::lock_within(&d.join("policy.lock"), LOCK_WAIT).map_err(PolicyError::Write)?;
    let mut p = match read(home) {
        Reading::Verified(p) => p,
        _ => Policy::default(),
    };
    match change {
        Change::Session(s, mode) => {
            if !crate::mailbox::addressable(s) {
                return Err(PolicyError::NotASession(s.clone()));
            }
            if *mode == Inbound::Accept {
                p.sessions.remove(s);
            } else {
                if !p.sessions.contains_key(s) && p.sessions.len() >= MAX_SESSIONS {
                    return Err(PolicyError::Full);
                }
                p.sessions.insert(s.clone(), *mode);
            }
        }
        Change::StopAll(on) => p.stop_all = *on,
        Change::Sender(s, rule) => {
            if !crate::mailbox::addressable(s) {
                return Err(PolicyError::NotASession(s.clone()));
            }
            set_rule(&mut p.senders, s, *rule)?;
        }
        Change::Machine(m, rule) => set_rule(&mut p.machines, m, *rule)?,
        Change::HeldTtl(ms) => {
            if !(MIN_HELD_TTL_MS..=MAX_HELD_TTL_MS).contains(ms) {
                return Err(PolicyError::HeldTtl(*ms));
            }
            p.held_ttl_ms = (*ms != DEFAULT_HELD_TTL_MS).then_some(*ms);
        }
    }
    p.v = 1;
    p.updated_at = now_ms;
    DOC.write(home, &d, &doc_path(home), key.bytes(), &mut p)
        .map_err(|e| match e {
            seal::WriteError::Encode(e) => PolicyError::Encode(e),
            seal::WriteError::Io(e) => PolicyError::Write(e),
        })?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }
    const B: &str = "session-bbbbbbbb-0000-0000-0000-000000000000";
    const A: &str = "session-aaaaaaaa-0000-0000-0000-000000000000";

    #[test]
    fn no_document_accepts() {
        let h = home();
        assert_eq!(decide(h.path(), B, A, None), Decision::Accept);
        // the plugin's folder is a file: no document can be there either
        fs::write(h.path().join("dsh-session-mail"), b"x").unwrap();
        assert_eq!(decide(h.path(), B, A, None), Decision::Accept);
    }

    #[test]
    fn a_fresh_process_reads_a_removed_document_as_unverified_while_the_key_is_there() {
        let h = home();
        apply(h.path(), &Change::Session(B.into(), Inbound::Refuse), 1).unwrap();
        fs::remove_file(doc_path(h.path())).unwrap();
        DOC.forget(h.path()); // as a process that never read it
        assert!(matches!(
            decide(h.path(), B, A, None),
            Decision::Hold {
                unverified: Some(_)
            }
        ));
    }

    #[test]
    fn the_humans_settings_are_in_force_for_the_next_send() {
        let h = home();
        apply(h.path(), &Change::Session(B.into(), Inbound::Hold), 1).unwrap();
        assert_eq!(
            decide(h.path(), B, A, None),
            Decision::Hold { unverified: None }
        );
        assert_eq!(decide(h.path(), "session-other", A, None), Decision::Accept);
        apply(h.path(), &Change::Session(B.into(), Inbound::Refuse), 2).unwrap();
        assert_eq!(decide(h.path(), B, A, None), Decision::Refuse(By::Session));
        apply(h.path(), &Change::StopAll(true), 3).unwrap();
        assert_eq!(
            decide(h.path(), "session-other", A, None),
            Decision::Stopped
        );
        apply(h.path(), &Change::StopAll(false), 4).unwrap();
        apply(h.path(), &Change::Session(B.into(), Inbound::Accept), 5).unwrap();
        assert_eq!(decide(h.path(), B, A, None), Decision::Accept);
    }

    #[test]
    fn a_forged_document_never_loosens_it_holds_everything() {
        let h = home();
        apply(h.path(), &Change::StopAll(true), 1).unwrap();
        // an agent's shell rewrites the document: stop off, no seal it can make
        let forged = serde_json::json!({"policy": {"v":1,"seq":99,"stopAll":false,"sessions":{},"updatedAt":2}, "mac": "00"});
        fs::write(doc_path(h.path()), forged.to_string()).unwrap();
        assert!(matches!(
            decide(h.path(), B, A, None),
            Decision::Hold {
                unverified: Some(_)
            }
        ));
        // plain text, garbage, a link: the same
        fs::write(doc_path(h.path()), b"{\"stopAll\": false}").unwrap();
        assert!(matches!(
            decide(h.path(), B, A, None),
            Decision::Hold { .. }
        ));
        fs::remove_file(doc_path(h.path())).unwrap();
        #[cfg(unix)]
        {
            let elsewhere = h.path().join("elsewhere.json");
            fs::write(&elsewhere, b"{}").unwrap();
            std::os::unix::fs::symlink(&elsewhere, doc_path(h.path())).unwrap();
            assert!(matches!(
                decide(h.path(), B, A, None),
                Decision::Hold { .. }
            ));
        }
    }

    #[test]
    fn deleting_or_replaying_an_older_document_does_not_loosen() {
        let h = home();
        apply(h.path(), &Change::Session(B.into(), Inbound::Accept), 1).unwrap();
        let old = fs::read(doc_path(h.path())).unwrap();
        apply(h.path(), &Change::Session(B.into(), Inbound::Refuse), 2).unwrap();
        fs::write(doc_path(h.path()), &old).unwrap();
        assert!(matches!(
            decide(h.path(), B, A, None),
            Decision::Hold {
                unverified: Some(_)
            }
        ));
        fs::remove_file(doc_path(h.path())).unwrap();
        assert!(matches!(
            decide(h.path(), B, A, None),
            Decision::Hold { .. }
        ));
    }

    #[test]
    fn a_replaced_key_does_not_verify_the_old_document() {
        let h = home();
        apply(h.path(), &Change::Session(B.into(), Inbound::Refuse), 1).unwrap();
        fs::remove_file(key_path(h.path())).unwrap();
        let mut f = fsafe::create_private(&key_path(h.path())).unwrap();
        std::io::Write::write_all(&mut f, &[1u8; 32]).unwrap();
        assert!(matches!(
            decide(h.path(), B, A, None),
            Decision::Hold { .. }
        ));
    }

    /// Two of the human's changes at once (two tabs, two processes of the home) both stay: the
    /// read-modify-write runs under `policy/policy.lock`. (Before, each read the document, changed its
    /// copy and wrote it: the later write dropped the other's change.)
    #[test]
    fn changes_made_at_once_are_all_kept() {
        let h = home();
        apply(h.path(), &Change::StopAll(false), 1).unwrap();
        let session =
            |t: usize, i: usize| format!("session-{t:08x}-{i:04x}-0000-0000-000000000000");
        std::thread::scope(|s| {
            for t in 0..3 {
                let home = h.path();
                s.spawn(move || {
                    for i in 0..15 {
                        apply(home, &Change::Session(session(t, i), Inbound::Hold), 2).unwrap();
                    }
                });
            }
        });
        let Reading::Verified(p) = read(h.path()) else {
            panic!("the document verifies");
        };
        let lost: Vec<String> = (0..3)
            .flat_map(|t| (0..15).map(move |i| session(t, i)))
            .filter(|s| p.inbound(s) != Inbound::Hold)
            .collect();
        assert!(lost.is_empty(), "{} of 45 changes lost", lost.len());
        assert_eq!(p.seq, 46);
    }

    #[test]
    fn saving_again_reseals_from_the_defaults() {
        let h = home();
        apply(h.path(), &Change::Session(B.into(), Inbound::Hold), 1).unwrap();
        fs::write(doc_path(h.path()), b"junk").unwrap();
        let p = apply(h.path(), &Change::StopAll(false), 2).unwrap();
        assert!(
            p.sessions.is_empty(),
            "the unverifiable document is not the base"
        );
        assert_eq!(decide(h.path(), B, A, None), Decision::Accept);
    }

    fn m(n: u8) -> MachineId {
        MachineId::parse(&format!("{n:02x}").repeat(32)).unwrap()
    }

    /// The one order, case by case: stop-all > sender rule > machine rule > the target's inbound > accept.
    #[test]
    fn the_precedence_table_case_by_case() {
        use Inbound::{Accept as Ac, Hold as Ho, Refuse as Re};
        let mach = m(1);
        // (stop, sender rule, machine rule, session inbound, from that machine?) → (outcome, by)
        type Case = (
            bool,
            Option<Inbound>,
            Option<Inbound>,
            Option<Inbound>,
            bool,
        );
        let cases: &[(Case, (Option<Inbound>, By))] = &[
            ((false, None, None, None, false), (Some(Ac), By::Default)),
            (
                (false, None, None, Some(Ho), false),
                (Some(Ho), By::Session),
            ),
            (
                (false, None, None, Some(Re), false),
                (Some(Re), By::Session),
            ),
            // a machine rule applies to mail from that machine only
            (
                (false, None, Some(Re), Some(Ho), false),
                (Some(Ho), By::Session),
            ),
            (
                (false, None, Some(Re), Some(Ho), true),
                (Some(Re), By::Machine),
            ),
            (
                (false, None, Some(Ac), Some(Ho), true),
                (Some(Ac), By::Machine),
            ),
            // the sender's rule beats the machine's and the session's, in both directions
            (
                (false, Some(Ac), Some(Re), Some(Ho), true),
                (Some(Ac), By::Sender),
            ),
            (
                (false, Some(Ac), None, Some(Re), false),
                (Some(Ac), By::Sender),
            ),
            (
                (false, Some(Ho), Some(Ac), Some(Ac), true),
                (Some(Ho), By::Sender),
            ),
            ((false, Some(Re), None, None, false), (Some(Re), By::Sender)),
            // stop-all beats everything, an "always allow" too
            ((true, Some(Ac), Some(Ac), None, true), (None, By::StopAll)),
            ((true, None, None, None, false), (None, By::StopAll)),
        ];
        for &((stop, sender, machine, session, from_machine), want) in cases {
            let mut p = Policy {
                stop_all: stop,
                ..Policy::default()
            };
            if let Some(r) = sender {
                p.senders.insert(A.into(), r);
            }
            if let Some(r) = machine {
                p.machines.insert(mach.clone(), r);
            }
            if let Some(r) = session {
                p.sessions.insert(B.into(), r);
            }
            let from = from_machine.then_some(&mach);
            assert_eq!(
                p.rule(B, A, from),
                want,
                "{stop} {sender:?} {machine:?} {session:?} {from_machine}"
            );
            // another sender and another machine fall through to the session's inbound
            let other = p.rule(B, "session-other", Some(&m(2)));
            if !stop {
                assert_eq!(
                    other,
                    (
                        Some(session.unwrap_or(Ac)),
                        if session.is_some() {
                            By::Session
                        } else {
                            By::Default
                        }
                    )
                );
            }
        }
    }

    #[test]
    fn always_allow_from_a_lets_a_through_a_held_session_while_b_is_held() {
        let h = home();
        let c = "session-cccccccc-0000-0000-0000-000000000000";
        apply(h.path(), &Change::Session(c.into(), Inbound::Hold), 1).unwrap();
        apply(
            h.path(),
            &Change::Sender(A.into(), Some(Inbound::Accept)),
            2,
        )
        .unwrap();
        assert_eq!(decide(h.path(), c, A, None), Decision::Accept);
        assert_eq!(
            decide(h.path(), c, B, None),
            Decision::Hold { unverified: None }
        );
        // a refuse rule for B refuses B everywhere, an accepting target too
        apply(
            h.path(),
            &Change::Sender(B.into(), Some(Inbound::Refuse)),
            3,
        )
        .unwrap();
        assert_eq!(decide(h.path(), c, B, None), Decision::Refuse(By::Sender));
        assert_eq!(
            decide(h.path(), "session-other", B, None),
            Decision::Refuse(By::Sender)
        );
        // removing the rule (null) gives B back to the session's inbound
        apply(h.path(), &Change::Sender(B.into(), None), 4).unwrap();
        assert_eq!(
            decide(h.path(), c, B, None),
            Decision::Hold { unverified: None }
        );
        // a machine rule, for mail arriving from that machine
        apply(h.path(), &Change::Machine(m(7), Some(Inbound::Refuse)), 5).unwrap();
        assert_eq!(
            decide(h.path(), "session-other", B, Some(&m(7))),
            Decision::Refuse(By::Machine)
        );
        assert_eq!(decide(h.path(), "session-other", B, None), Decision::Accept);
        assert_eq!(
            decide(h.path(), "session-other", A, Some(&m(7))),
            Decision::Accept,
            "A's own rule is more specific"
        );
        // stop-all stops A too
        apply(h.path(), &Change::StopAll(true), 6).unwrap();
        assert_eq!(decide(h.path(), c, A, None), Decision::Stopped);
        // a sender id that cannot be a session is not a rule
        assert!(matches!(
            apply(
                h.path(),
                &Change::Sender("../x".into(), Some(Inbound::Hold)),
                7
            ),
            Err(PolicyError::NotASession(_))
        ));
    }

    #[test]
    fn a_forged_or_replayed_document_with_rules_still_holds_everything() {
        let h = home();
        let c = "session-cccccccc-0000-0000-0000-000000000000";
        apply(h.path(), &Change::Session(c.into(), Inbound::Hold), 1).unwrap();
        apply(
            h.path(),
            &Change::Sender(A.into(), Some(Inbound::Accept)),
            2,
        )
        .unwrap();
        let with_allow = fs::read(doc_path(h.path())).unwrap();
        apply(
            h.path(),
            &Change::Sender(A.into(), Some(Inbound::Refuse)),
            3,
        )
        .unwrap();
        assert_eq!(decide(h.path(), c, A, None), Decision::Refuse(By::Sender));
        // replayed: the older document that allowed A
        fs::write(doc_path(h.path()), &with_allow).unwrap();
        assert!(matches!(
            decide(h.path(), c, A, None),
            Decision::Hold {
                unverified: Some(Unverified::WentBack { .. })
            }
        ));
        // forged: an agent writes "always allow me" with a higher seq and no valid seal
        let forged = serde_json::json!({"policy": {"v":1,"seq":99,"stopAll":false,"sessions":{},
            "senders": {A: "accept"}, "machines": {m(3).as_str(): "accept"}, "updatedAt":2}, "mac": "00"});
        fs::write(doc_path(h.path()), forged.to_string()).unwrap();
        assert!(matches!(
            decide(h.path(), c, A, None),
            Decision::Hold {
                unverified: Some(Unverified::BadSeal)
            }
        ));
        assert!(matches!(
            decide(h.path(), "session-other", B, Some(&m(3))),
            Decision::Hold {
                unverified: Some(_)
            }
        ));
        // a sealed document's rules cannot be edited in place either (the seal covers them)
        apply(
            h.path(),
            &Change::Sender(A.into(), Some(Inbound::Refuse)),
            4,
        )
        .unwrap();
        let text = fs::read_to_string(doc_path(h.path())).unwrap();
        fs::write(doc_path(h.path()), text.replace("\"refuse\"", "\"accept\"")).unwrap();
        assert!(matches!(
            decide(h.path(), c, A, None),
            Decision::Hold {
                unverified: Some(Unverified::BadSeal)
            }
        ));
    }

    #[test]
    fn a_document_sealed_before_rules_existed_still_verifies_and_the_ttl_is_bounded() {
        let h = home();
        apply(h.path(), &Change::Session(B.into(), Inbound::Hold), 1).unwrap();
        // written without senders/machines/heldTtlMs: the fields are absent when empty, so the seal of
        // an older version's document is the same bytes
        let text = fs::read_to_string(doc_path(h.path())).unwrap();
        assert!(
            !text.contains("senders") && !text.contains("heldTtlMs"),
            "{text}"
        );
        assert_eq!(held_ttl_ms(h.path()), DEFAULT_HELD_TTL_MS);
        apply(h.path(), &Change::HeldTtl(2 * 60 * 60 * 1000), 2).unwrap();
        assert_eq!(held_ttl_ms(h.path()), 2 * 60 * 60 * 1000);
        assert!(matches!(
            apply(h.path(), &Change::HeldTtl(999), 3),
            Err(PolicyError::HeldTtl(999))
        ));
        assert!(matches!(
            apply(h.path(), &Change::HeldTtl(MAX_HELD_TTL_MS + 1), 3),
            Err(PolicyError::HeldTtl(_))
        ));
        assert_eq!(held_ttl_ms(h.path()), 2 * 60 * 60 * 1000);
        // an unverifiable document neither shortens nor lengthens the window
        fs::write(doc_path(h.path()), b"junk").unwrap();
        assert_eq!(held_ttl_ms(h.path()), DEFAULT_HELD_TTL_MS);
    }
}
