//! Mail held for the human (a target set to `hold`, or a policy that does not verify).
//!
//! One folder per target, `$DSH_HOME/dsh-session-mail/awaiting-human/<session-id>/` (0700), per message:
//!
//! - `<uuid>.held` — the sealed envelope (the same [`Envelope`] the mailbox carries: the exact text the
//!   target would receive), written by the sender instead of delivering. Durable: it survives every
//!   process on the home.
//! - `<uuid>.decision` — the human's sealed decision (`approved` / `rejected`), created `O_EXCL` by the
//!   route the web client calls: one decision wins, a second one is refused.
//! - `<uuid>.posted` — written once an approved message was handed to the target's mailbox.
//!
//! **Exactly once / never.** Only an approval that verifies is ever handed on, and it is handed to the
//! mailbox ([`crate::mailbox::post`]), whose owner skips a request id already in the target's log; a
//! rejected message is never posted. An approval whose hand-off did not happen (the process died between
//! the two writes) is handed on by [`recover`] later — the mailbox's log check keeps it at once.
//!
//! Every file here is hostile: an envelope or a decision whose seal does not verify is ignored (an agent
//! cannot approve by writing a file), names and sizes are bounded, nothing follows a link.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ensure_private, key_or_make, read_key, PolicyError};
use crate::mailbox::{self, Envelope};
use base::fsafe::{self, Follow};
use base::seal;

/// Most held messages looked at per session.
pub const MAX_HELD: usize = 256;
const MAX_FILE_BYTES: u64 = mailbox::MAX_ENVELOPE_BYTES + 4096;

/// Where a held message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeldState {
    Held,
    Approved,
    Rejected,
    /// Held past its time (docs/architecture.md: the policy's `heldTtlMs`, the envelope's `expiresAt`):
    /// rejected as expired, never delivered. Nothing produces it yet; the expiry of held mail (issue
    /// 31) does, and `verify`, the mail rows and the held cards show it as the fate `expired`.
    Expired,
}

impl HeldState {
    pub fn as_str(self) -> &'static str {
        match self {
            HeldState::Held => "held",
            HeldState::Approved => "approved",
            HeldState::Rejected => "rejected",
            HeldState::Expired => "expired",
        }
    }
}

/// One held message as the human's view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldItem {
    pub envelope: Envelope,
    pub state: HeldState,
    pub decided_at: Option<i64>,
    /// Approved and handed to the target's mailbox.
    pub posted: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Decided {
    request_id: String,
    session_id: String,
    decision: HeldState,
    at: i64,
}

#[derive(Serialize, Deserialize)]
struct Sealed<T> {
    body: T,
    mac: String,
}

pub fn root(home: &Path) -> PathBuf {
    home.join("dsh-session-mail").join("awaiting-human")
}

fn folder(home: &Path, session: &str) -> Option<PathBuf> {
    mailbox::addressable(session).then(|| root(home).join(session))
}

fn key_of(request_id: &str) -> Option<&str> {
    let k = request_id.strip_prefix(crate::mail::REQUEST_ID_PREFIX)?;
    uuid::Uuid::parse_str(k).ok().map(|_| k)
}

/// Why a message could not be held, or a decision on it not taken.
#[derive(Debug)]
pub enum HeldError {
    /// The session id cannot name a folder.
    BadSessionId,
    /// The request id cannot name a file.
    BadRequestId,
    /// The folder, the key or the encoding (the policy's own errors).
    Policy(PolicyError),
    /// The session's folder could not be read or the message not written.
    Io(std::io::Error),
    /// This many messages already wait there.
    Full {
        names: usize,
    },
    TooLarge,
    /// Not a request id of this plugin (a decision).
    NotRequestId,
    /// Not a session id (a decision).
    NotSessionId,
    /// No key, so nothing is held on this home.
    NothingHeld,
    NotHeld {
        request_id: String,
        session: String,
    },
    /// Decided already.
    Decided {
        request_id: String,
        state: HeldState,
    },
    /// The decision could not be written.
    Decision(std::io::Error),
    /// The approval could not be handed to the target's mailbox.
    Mailbox(mailbox::PostError),
    /// The decision was written and is gone.
    Vanished,
}

/// Equal when the same variant says the same (the system's errors compare by their text).
impl PartialEq for HeldError {
    fn eq(&self, other: &HeldError) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.to_string() == other.to_string()
    }
}

impl Eq for HeldError {}

impl std::fmt::Display for HeldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeldError::BadSessionId => f.write_str("the session id cannot name a folder"),
            HeldError::BadRequestId => f.write_str("the request id cannot name a file"),
            HeldError::Policy(e) => e.fmt(f),
            HeldError::Io(e) => e.fmt(f),
            HeldError::Full { names } => write!(f, "{names} messages already wait there"),
            HeldError::TooLarge => f.write_str("the message is too large to hold"),
            HeldError::NotRequestId => f.write_str("not a request id of this plugin"),
            HeldError::NotSessionId => f.write_str("not a session id"),
            HeldError::NothingHeld => f.write_str("nothing is held on this home"),
            HeldError::NotHeld {
                request_id,
                session,
            } => write!(f, "{request_id} is not held for {session}"),
            HeldError::Decided { request_id, state } => {
                write!(f, "{request_id} was {} already", state.as_str())
            }
            HeldError::Decision(e) => write!(f, "decision: {e}"),
            HeldError::Mailbox(e) => write!(f, "mailbox: {e}"),
            HeldError::Vanished => f.write_str("the decision vanished"),
        }
    }
}

impl std::error::Error for HeldError {}

impl From<PolicyError> for HeldError {
    fn from(e: PolicyError) -> HeldError {
        HeldError::Policy(e)
    }
}

fn ensure(home: &Path, session: &str) -> Result<PathBuf, HeldError> {
    let d = folder(home, session).ok_or(HeldError::BadSessionId)?;
    ensure_private(
        "held",
        [home.join("dsh-session-mail"), root(home), d.clone()],
    )?;
    Ok(d)
}

fn write_new(dir: &Path, dest: &Path, bytes: &[u8], exclusive: bool) -> std::io::Result<()> {
    if exclusive {
        let mut f = fsafe::create_private(dest)?;
        f.write_all(bytes)?;
        return f.sync_all();
    }
    super::write_atomic(dir, dest, bytes)
}

fn sealed_bytes<T: Serialize>(key: &[u8], domain: &str, body: T) -> Result<Vec<u8>, HeldError> {
    let encode = |e| HeldError::Policy(PolicyError::Encode(e));
    let raw = serde_json::to_vec(&body).map_err(encode)?;
    let mac = seal::seal_hex(key, domain, &raw);
    serde_json::to_vec(&Sealed { body, mac }).map_err(encode)
}

fn open_sealed<T: Serialize + for<'de> Deserialize<'de>>(
    key: &[u8],
    domain: &str,
    p: &Path,
) -> Option<T> {
    let (bytes, m) = fsafe::read_capped(p, Follow::No, MAX_FILE_BYTES).ok()?;
    if fsafe::foreign_owner(&m).is_some() {
        return None;
    }
    let s: Sealed<T> = serde_json::from_slice(&bytes).ok()?;
    let raw = serde_json::to_vec(&s.body).ok()?;
    seal::check_hex(key, domain, &raw, &s.mac).then_some(s.body)
}

/// Keep `env` for the human instead of delivering it (the sender's side).
pub fn hold(home: &Path, env: &Envelope) -> Result<(), HeldError> {
    let key = key_of(&env.request_id).ok_or(HeldError::BadRequestId)?;
    let d = ensure(home, &env.session_id)?;
    let names = fs::read_dir(&d)
        .map_err(HeldError::Io)?
        .flatten()
        .take(MAX_HELD * 4)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".held"))
        .count();
    if names >= MAX_HELD * 3 {
        return Err(HeldError::Full { names });
    }
    let k = key_or_make(home)?;
    let mut e = env.clone();
    e.v = 1;
    let bytes = sealed_bytes(k.bytes(), "held", &e)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(HeldError::TooLarge);
    }
    write_new(&d, &d.join(format!("{key}.held")), &bytes, false).map_err(HeldError::Io)
}

fn read_item(home: &Path, key: &[u8], d: &Path, stem: &str, session: &str) -> Option<HeldItem> {
    let env: Envelope = open_sealed(key, "held", &d.join(format!("{stem}.held")))?;
    if env.session_id != session || key_of(&env.request_id) != Some(stem) {
        return None;
    }
    let decided: Option<Decided> =
        open_sealed(key, "decision", &d.join(format!("{stem}.decision")))
            .filter(|x: &Decided| x.request_id == env.request_id && x.session_id == session);
    let posted = fs::symlink_metadata(d.join(format!("{stem}.posted"))).is_ok();
    let _ = home;
    Some(HeldItem {
        state: decided.as_ref().map_or(HeldState::Held, |x| x.decision),
        decided_at: decided.map(|x| x.at),
        posted,
        envelope: env,
    })
}

/// The held messages of `session`, newest first (bounded; unverifiable files are left out).
pub fn list(home: &Path, session: &str) -> Vec<HeldItem> {
    let Some(d) = folder(home, session) else {
        return Vec::new();
    };
    if fsafe::check_private_dir(&d).is_err() {
        return Vec::new();
    }
    let Ok(Some(key)) = read_key(home) else {
        return Vec::new();
    };
    let key = key.bytes();
    let Ok(rd) = fs::read_dir(&d) else {
        return Vec::new();
    };
    let mut out: Vec<HeldItem> = rd
        .flatten()
        .take(MAX_HELD * 4)
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let stem = n.strip_suffix(".held")?.to_string();
            uuid::Uuid::parse_str(&stem).ok()?;
            read_item(home, key, &d, &stem, session)
        })
        .take(MAX_HELD)
        .collect();
    out.sort_by_key(|i| std::cmp::Reverse(i.envelope.posted_at));
    out
}

/// The state of one request id held for `session` (or in any session's folder when None).
pub fn state_of(home: &Path, request_id: &str, session: Option<&str>) -> Option<HeldItem> {
    let stem = key_of(request_id)?;
    let key = read_key(home).ok()??;
    let key = key.bytes();
    let sessions: Vec<String> = match session {
        Some(s) => vec![s.to_string()],
        None => fs::read_dir(root(home))
            .ok()?
            .flatten()
            .take(4096)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
    };
    sessions.iter().find_map(|s| {
        let d = folder(home, s)?;
        read_item(home, key, &d, stem, s)
    })
}

/// The human's decision on one held message. `Ok` with the item as it is now; an approval is handed
/// to the target's mailbox at once (addressed to the process that holds the target live, else to
/// this one). `Err`: nothing was decided (unknown id, decided already, a file that does not verify).
pub fn decide(
    home: &Path,
    session: &str,
    request_id: &str,
    approve: bool,
    now_ms: i64,
) -> Result<HeldItem, HeldError> {
    let stem = key_of(request_id).ok_or(HeldError::NotRequestId)?;
    let d = folder(home, session).ok_or(HeldError::NotSessionId)?;
    let key = read_key(home)?.ok_or(HeldError::NothingHeld)?;
    let key = key.bytes();
    let item = read_item(home, key, &d, stem, session).ok_or_else(|| HeldError::NotHeld {
        request_id: request_id.to_string(),
        session: session.to_string(),
    })?;
    if item.state != HeldState::Held {
        return Err(HeldError::Decided {
            request_id: request_id.to_string(),
            state: item.state,
        });
    }
    let decision = if approve {
        HeldState::Approved
    } else {
        HeldState::Rejected
    };
    let bytes = sealed_bytes(
        key,
        "decision",
        Decided {
            request_id: request_id.to_string(),
            session_id: session.to_string(),
            decision,
            at: now_ms,
        },
    )?;
    let p = d.join(format!("{stem}.decision"));
    match write_new(&d, &p, &bytes, true) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // A decision file that did not verify (read_item saw none): not the human's; replace it once.
            let _ = fs::remove_file(&p);
            write_new(&d, &p, &bytes, true).map_err(HeldError::Decision)?;
        }
        Err(e) => return Err(HeldError::Decision(e)),
    }
    if approve {
        post(home, &d, stem, &item.envelope, now_ms)?;
    }
    read_item(home, key, &d, stem, session).ok_or(HeldError::Vanished)
}

fn post(home: &Path, d: &Path, stem: &str, env: &Envelope, now_ms: i64) -> Result<(), HeldError> {
    let peers = crate::presence::current(home);
    let (pid, started_at) = match crate::presence::owner_of(&peers, &env.session_id) {
        Some((r, _)) => (r.pid, r.started_at),
        None => (std::process::id(), 0),
    };
    let e = Envelope {
        owner_pid: pid,
        owner_started_at: started_at,
        posted_at: now_ms,
        ..env.clone()
    };
    mailbox::post(home, &e).map_err(HeldError::Mailbox)?;
    let _ = write_new(d, &d.join(format!("{stem}.posted")), b"", false);
    Ok(())
}

/// Hand on the approvals whose hand-off did not happen (a process died between decision and post).
/// Returns how many were handed on.
pub fn recover(home: &Path, now_ms: i64) -> usize {
    let Ok(rd) = fs::read_dir(root(home)) else {
        return 0;
    };
    let mut n = 0;
    for s in rd.flatten().take(4096) {
        let session = s.file_name().to_string_lossy().into_owned();
        for item in list(home, &session) {
            if item.state == HeldState::Approved && !item.posted {
                if let (Some(d), Some(stem)) = (
                    folder(home, &session),
                    key_of(&item.envelope.request_id).map(str::to_string),
                ) {
                    if post(home, &d, &stem, &item.envelope, now_ms).is_ok() {
                        n += 1;
                    }
                }
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: &str = "session-bbbbbbbb-0000-0000-0000-000000000000";
    fn rid(n: u8) -> String {
        format!("dsh-session-mail:00000000-0000-4000-8000-0000000000{n:02}")
    }
    fn env(n: u8) -> Envelope {
        Envelope {
            v: 1,
            request_id: rid(n),
            session_id: B.into(),
            mode: "queue".into(),
            text: format!("From session-a ：\nmessage {n}"),
            sender: Some("session-a".into()),
            owner_pid: 0,
            owner_started_at: 0,
            posted_at: n as i64,
        }
    }
    fn mailbox_has(home: &Path, n: u8) -> bool {
        mailbox::find_waiting(home, &rid(n), Some(B)).is_some()
    }

    #[test]
    fn approve_hands_on_once_and_reject_never() {
        let h = tempfile::tempdir().unwrap();
        hold(h.path(), &env(1)).unwrap();
        hold(h.path(), &env(2)).unwrap();
        let l = list(h.path(), B);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].envelope.request_id, rid(2), "newest first");
        assert!(l.iter().all(|i| i.state == HeldState::Held));
        assert!(!mailbox_has(h.path(), 1));

        let a = decide(h.path(), B, &rid(1), true, 10).unwrap();
        assert_eq!(a.state, HeldState::Approved);
        assert!(a.posted);
        assert!(mailbox_has(h.path(), 1));
        let again = decide(h.path(), B, &rid(1), false, 11).unwrap_err();
        assert!(
            matches!(&again, HeldError::Decided { state: HeldState::Approved, request_id } if *request_id == rid(1)),
            "{again:?}"
        );
        assert_eq!(
            again.to_string(),
            format!("{} was approved already", rid(1))
        );

        let r = decide(h.path(), B, &rid(2), false, 12).unwrap();
        assert_eq!(r.state, HeldState::Rejected);
        assert!(!mailbox_has(h.path(), 2));
        assert!(matches!(
            decide(h.path(), B, &rid(2), true, 13),
            Err(HeldError::Decided {
                state: HeldState::Rejected,
                ..
            })
        ));
        assert!(matches!(
            decide(h.path(), B, "not-ours", true, 13),
            Err(HeldError::NotRequestId)
        ));
        assert!(
            !mailbox_has(h.path(), 2),
            "a rejected message is never handed on"
        );
        assert_eq!(
            state_of(h.path(), &rid(2), None).map(|i| i.state),
            Some(HeldState::Rejected)
        );
    }

    #[test]
    fn a_forged_approval_or_envelope_is_not_the_humans() {
        let h = tempfile::tempdir().unwrap();
        hold(h.path(), &env(1)).unwrap();
        let d = folder(h.path(), B).unwrap();
        // an agent writes an approval without the key
        let r1 = rid(1);
        let stem = key_of(&r1).unwrap();
        fs::write(
            d.join(format!("{stem}.decision")),
            br#"{"body":{"requestId":"x","sessionId":"y","decision":"approved","at":1},"mac":"00"}"#,
        )
        .unwrap();
        assert_eq!(list(h.path(), B)[0].state, HeldState::Held);
        assert_eq!(recover(h.path(), 5), 0, "nothing handed on");
        assert!(!mailbox_has(h.path(), 1));
        // and the human can still decide
        assert_eq!(
            decide(h.path(), B, &rid(1), false, 6).unwrap().state,
            HeldState::Rejected
        );
        // a forged envelope is not listed
        let forged = uuid::Uuid::new_v4();
        fs::write(
            d.join(format!("{forged}.held")),
            b"{\"body\":{},\"mac\":\"\"}",
        )
        .unwrap();
        assert_eq!(list(h.path(), B).len(), 1);
    }

    #[test]
    fn an_approval_whose_hand_off_died_is_recovered_once() {
        let h = tempfile::tempdir().unwrap();
        hold(h.path(), &env(1)).unwrap();
        decide(h.path(), B, &rid(1), true, 10).unwrap();
        // simulate the crash between the decision and the post
        let d = folder(h.path(), B).unwrap();
        let r1 = rid(1);
        let stem = key_of(&r1).unwrap();
        fs::remove_file(d.join(format!("{stem}.posted"))).unwrap();
        fs::remove_file(mailbox::root(h.path()).join(B).join(format!("{stem}.msg"))).unwrap();
        assert_eq!(recover(h.path(), 11), 1);
        assert!(mailbox_has(h.path(), 1));
        assert_eq!(recover(h.path(), 12), 0);
    }
}
