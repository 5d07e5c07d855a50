//! Mail held for the human (a target set to `hold`, or a policy that does not verify).
//!
//! One folder per target, `$DSH_HOME/dsh-session-mail/awaiting-human/<session-id>/` (0700), per message:
//!
//! - `<uuid>.held` — the sealed envelope (the same [`Envelope`] the mailbox carries: the exact text the
//!   target would receive) and its `expiresAt` (the hold time + the policy's `heldTtlMs`), written by the
//!   sender instead of delivering. Durable: it survives every process on the home.
//! - `<uuid>.decision` — the sealed decision (`approved` / `rejected` by the human's route, `expired` by
//!   the first process that looks after `expiresAt`), created `O_EXCL`: one decision wins, a second one is
//!   refused, so an approval after the expiry is refused and an expired message is never delivered.
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
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ensure_private, key_or_make, read_key, PolicyError};
use crate::mailbox::{self, Envelope};
use base::fsafe::{self, Follow};
use base::seal;

/// Most held messages looked at per session.
pub const MAX_HELD: usize = 256;
/// Most session folders one home-wide pass reads (counts, bulk decisions, the sweep).
pub const MAX_SESSION_FOLDERS: usize = 4096;
/// Most messages one bulk decision takes.
pub const MAX_DECIDE_MANY: usize = 1024;
const MAX_FILE_BYTES: u64 = mailbox::MAX_ENVELOPE_BYTES + 4096;

/// Where a held message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeldState {
    Held,
    Approved,
    Rejected,
    /// Nobody decided before its `expiresAt`: rejected as expired, never delivered.
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
    /// As decided (a sealed decision), or `held`. A held item past `expires_at` is expired at its next
    /// look ([`list`], [`decide`], [`sweep`]); [`HeldItem::state_at`] says so before that.
    pub state: HeldState,
    pub decided_at: Option<i64>,
    /// Approved and handed to the target's mailbox.
    pub posted: bool,
    /// When it expires if nobody decides (ms since the epoch): sealed with it at hold time; for one
    /// held before expiry existed, its hold time + the policy's `heldTtlMs` now.
    pub expires_at: i64,
}

impl HeldItem {
    /// Its state at `now_ms`: a held item past its time is expired.
    pub fn state_at(&self, now_ms: i64) -> HeldState {
        if self.state == HeldState::Held && now_ms >= self.expires_at {
            HeldState::Expired
        } else {
            self.state
        }
    }
}

/// What a `.held` file seals: the envelope and its expiry (absent in files written before expiry
/// existed: those seal the envelope alone, and still verify).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept {
    #[serde(flatten)]
    envelope: Envelope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Decided {
    request_id: String,
    session_id: String,
    decision: HeldState,
    at: i64,
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

/// `exclusive`: `dest` is made whole or not at all — the bytes are written and fsynced under a temp name and
/// then hard-linked to `dest` (an existing one: `AlreadyExists`). Creating `dest` itself and then writing
/// into it let a racing decider read it half-written, judge it forged, move it aside and win too: two
/// deciders of one message could both succeed (human::tests::bulk_decisions_take_each_message_once, flaky
/// under load; held::tests::racing_deciders_of_one_message_one_wins_every_time).
fn write_new(dir: &Path, dest: &Path, bytes: &[u8], exclusive: bool) -> std::io::Result<()> {
    if exclusive {
        let put = fsafe::Put {
            sync: true,
            replace: false,
        };
        return fsafe::write_private(dir, dest, bytes, put);
    }
    super::write_atomic(dir, dest, bytes)
}

/// A held message or a decision, sealed (`base::seal::sealed_bytes`, the document under "body").
fn sealed_bytes<T: Serialize>(key: &[u8], domain: &str, body: T) -> Result<Vec<u8>, HeldError> {
    seal::sealed_bytes(key, domain, "body", &body)
        .map_err(|e| HeldError::Policy(PolicyError::Encode(e)))
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
    seal::open_bytes(key, domain, "body", &bytes)
}

/// Keep `env` for the human instead of delivering it (the sender's side), until `expires_at` (ms since
/// the epoch: the hold time + [`super::held_ttl_ms`]).
pub fn hold(home: &Path, env: &Envelope, expires_at: i64) -> Result<(), HeldError> {
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
    let kept = Kept {
        envelope: e,
        expires_at: Some(expires_at),
    };
    let bytes = sealed_bytes(k.bytes(), "held", &kept)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(HeldError::TooLarge);
    }
    write_new(&d, &d.join(format!("{key}.held")), &bytes, false).map_err(HeldError::Io)
}

fn read_item(home: &Path, key: &[u8], d: &Path, stem: &str, session: &str) -> Option<HeldItem> {
    let kept: Kept = open_sealed(key, "held", &d.join(format!("{stem}.held")))?;
    let env = kept.envelope;
    if env.session_id != session || key_of(&env.request_id) != Some(stem) {
        return None;
    }
    let decided: Option<Decided> =
        open_sealed(key, "decision", &d.join(format!("{stem}.decision")))
            .filter(|x: &Decided| x.request_id == env.request_id && x.session_id == session);
    let posted = fs::symlink_metadata(d.join(format!("{stem}.posted"))).is_ok();
    let expires_at = kept.expires_at.unwrap_or_else(|| {
        env.posted_at
            .saturating_add(i64::try_from(super::held_ttl_ms(home)).unwrap_or(i64::MAX))
    });
    Some(HeldItem {
        state: decided.as_ref().map_or(HeldState::Held, |x| x.decision),
        decided_at: decided.map(|x| x.at),
        posted,
        expires_at,
        envelope: env,
    })
}

/// The held messages of `session`, newest first (bounded; unverifiable files are left out). One past its
/// `expiresAt` at `now_ms` is expired here, by a sealed decision ([`expire`]): the first process that
/// looks rejects it.
pub fn list(home: &Path, session: &str, now_ms: i64) -> Vec<HeldItem> {
    let mut out = list_as_is(home, session);
    for item in out.iter_mut() {
        if item.state_at(now_ms) == HeldState::Expired && item.state == HeldState::Held {
            if let Some(now) = expire(home, session, item, now_ms) {
                *item = now;
            }
        }
    }
    out
}

/// The held messages of `session` as their files say, nothing written.
fn list_as_is(home: &Path, session: &str) -> Vec<HeldItem> {
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
        let mut item = read_item(home, key, &d, stem, s)?;
        // past its time nobody can approve it any more: say so before the sweep writes it
        item.state = item.state_at(base::clock::now_ms());
        Some(item)
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
    if item.state_at(now_ms) == HeldState::Expired {
        // too late: it is expired now (sealed), and the approval or rejection is refused
        let state = expire(home, session, &item, now_ms).map_or(HeldState::Expired, |i| i.state);
        return Err(HeldError::Decided {
            request_id: request_id.to_string(),
            state,
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
    write_decision(key, &d, stem, (request_id, session), &bytes)?;
    if approve {
        post(home, &d, stem, &item.envelope, now_ms)?;
    }
    read_item(home, key, &d, stem, session).ok_or(HeldError::Vanished)
}

/// Create `<stem>.decision` exclusively. A decision file already there that verifies (the human's, or
/// another decider's that won a race since the caller read the item) wins: `Decided` with its state, and
/// it is never replaced. One that does not verify is not the human's: it is moved aside under a name of
/// its own, checked again there (a verified decision written between the check and the move is put back
/// and wins), and ours is created exclusively — two deciders racing, one create wins, the other reads
/// the winner's decision.
fn write_decision(
    key: &[u8],
    d: &Path,
    stem: &str,
    who: (&str, &str),
    bytes: &[u8],
) -> Result<(), HeldError> {
    let p = d.join(format!("{stem}.decision"));
    let (request_id, session) = who;
    let verified = |path: &Path| -> Option<HeldState> {
        open_sealed::<Decided>(key, "decision", path)
            .filter(|x| x.request_id == request_id && x.session_id == session)
            .map(|x| x.decision)
    };
    let decided = |state: HeldState| HeldError::Decided {
        request_id: request_id.to_string(),
        state,
    };
    match write_new(d, &p, bytes, true) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(HeldError::Decision(e))
        }
        Err(_) => {}
    }
    if let Some(state) = verified(&p) {
        return Err(decided(state));
    }
    let aside = d.join(format!(
        "{stem}.decision-stale-{}",
        uuid::Uuid::new_v4().simple()
    ));
    if fs::rename(&p, &aside).is_ok() {
        if let Some(state) = verified(&aside) {
            // a real decision landed between the check and the move: put it back (never over another)
            let _ = fs::hard_link(&aside, &p);
            let _ = fs::remove_file(&aside);
            return Err(decided(verified(&p).unwrap_or(state)));
        }
        let _ = fs::remove_file(&aside);
    }
    match write_new(d, &p, bytes, true) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match verified(&p) {
            Some(state) => Err(decided(state)),
            None => Err(HeldError::Decision(e)),
        },
        Err(e) => Err(HeldError::Decision(e)),
    }
}

/// Reject `item` (held, past its `expiresAt`) as expired: a sealed decision, then a ledger line of its
/// sender's request with the outcome `expired` (the receipt history says so). `None` when nothing could
/// be written (no key, the folder) — it stays held and the next look tries again; the item as it is
/// now otherwise (another decision may have won the race).
pub fn expire(home: &Path, session: &str, item: &HeldItem, now_ms: i64) -> Option<HeldItem> {
    let stem = key_of(&item.envelope.request_id)?;
    let d = folder(home, session)?;
    let key = read_key(home).ok()??;
    let bytes = sealed_bytes(
        key.bytes(),
        "decision",
        Decided {
            request_id: item.envelope.request_id.clone(),
            session_id: session.to_string(),
            decision: HeldState::Expired,
            at: now_ms,
        },
    )
    .ok()?;
    let won = write_decision(
        key.bytes(),
        &d,
        stem,
        (&item.envelope.request_id, session),
        &bytes,
    )
    .is_ok();
    let now = read_item(home, key.bytes(), &d, stem, session)?;
    if won && now.state == HeldState::Expired {
        record_expiry(home, &now, now_ms);
    }
    Some(now)
}

/// The ledger line of an expiry: the held line of the same request, its outcome `expired`, at `now_ms`.
fn record_expiry(home: &Path, item: &HeldItem, now_ms: i64) {
    use crate::ledger::{self, Filter, LedgerOutcome};
    let filter = Filter {
        request_id: Some(item.envelope.request_id.clone()),
        ..Filter::default()
    };
    let held_line = ledger::read_ledger(home, &filter).ok().and_then(|r| {
        r.entries
            .into_iter()
            .rev()
            .find(|l| l.outcome == LedgerOutcome::Held)
    });
    let mut line = held_line.unwrap_or_else(|| {
        ledger::Entry::new(
            now_ms,
            item.envelope.sender.as_deref(),
            Some(&item.envelope.session_id),
            "",
            Some(&item.envelope.mode),
            Some(&item.envelope.request_id),
            LedgerOutcome::Expired,
            None,
        )
    });
    line.time = base::clock::format_utc_ms(now_ms);
    line.outcome = LedgerOutcome::Expired;
    line.text_sha256 = None;
    let _ = ledger::append(home, &line);
}

fn post(home: &Path, d: &Path, stem: &str, env: &Envelope, now_ms: i64) -> Result<(), HeldError> {
    let (pid, started_at) = match crate::presence::owner(home, &env.session_id) {
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

/// The session folders under `awaiting-human/` (names that can be session ids), at most
/// [`MAX_SESSION_FOLDERS`]; `true` when there were more.
pub fn sessions(home: &Path) -> (Vec<String>, bool) {
    let Ok(rd) = fs::read_dir(root(home)) else {
        return (Vec::new(), false);
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if !mailbox::addressable(&n) {
            continue;
        }
        if out.len() >= MAX_SESSION_FOLDERS {
            return (out, true);
        }
        out.push(n);
    }
    out.sort();
    (out, false)
}

/// The stems of a session's held folder (bounded to `MAX_HELD * 4` entries): the envelopes
/// (`<stem>.held`) in the folder's order, and the stems that have a decision file (`<stem>.decision`).
fn stems(d: &Path) -> Option<(Vec<String>, std::collections::HashSet<String>)> {
    let rd = fs::read_dir(d).ok()?;
    let mut held = Vec::new();
    let mut decided = std::collections::HashSet::new();
    for e in rd.flatten().take(MAX_HELD * 4) {
        let n = e.file_name().to_string_lossy().into_owned();
        if let Some(stem) = n.strip_suffix(".held") {
            held.push(stem.to_string());
        } else if let Some(stem) = n.strip_suffix(".decision") {
            decided.insert(stem.to_string());
        }
    }
    Some((held, decided))
}

/// The messages of `session` still waiting for the human at `now_ms`, oldest first. Cheap: a message
/// with a decision file is skipped when that decision verifies (a few hundred bytes), so only the
/// envelopes still waiting are read; one past its time is expired here ([`expire`]) and left out.
pub fn pending(home: &Path, session: &str, now_ms: i64) -> Vec<HeldItem> {
    pending_and_expired(home, session, now_ms).0
}

/// [`pending`], and how many it expired.
fn pending_and_expired(home: &Path, session: &str, now_ms: i64) -> (Vec<HeldItem>, usize) {
    let none = (Vec::new(), 0);
    let Some(d) = folder(home, session) else {
        return none;
    };
    if fsafe::check_private_dir(&d).is_err() {
        return none;
    }
    let Ok(Some(key)) = read_key(home) else {
        return none;
    };
    let Some((held, decided)) = stems(&d) else {
        return none;
    };
    let mut out = Vec::new();
    let mut expired = 0;
    for stem in held {
        if uuid::Uuid::parse_str(&stem).is_err() || out.len() >= MAX_HELD {
            continue;
        }
        if decided.contains(&stem) {
            let rid = format!("{}{stem}", crate::mail::REQUEST_ID_PREFIX);
            let ok: Option<Decided> =
                open_sealed(key.bytes(), "decision", &d.join(format!("{stem}.decision")));
            if ok.is_some_and(|x| x.request_id == rid && x.session_id == session) {
                continue;
            }
        }
        let Some(item) = read_item(home, key.bytes(), &d, &stem, session) else {
            continue;
        };
        if item.state != HeldState::Held {
            continue;
        }
        if item.state_at(now_ms) == HeldState::Expired {
            if expire(home, session, &item, now_ms).is_some_and(|i| i.state == HeldState::Expired) {
                expired += 1;
            }
            continue;
        }
        out.push(item);
    }
    out.sort_by_key(|i| (i.envelope.posted_at, i.envelope.request_id.clone()));
    (out, expired)
}

/// What a verified file of the held store said, kept while the file is the same one (`held.counts` asks
/// every few seconds; a `.held` or `.decision` file is never rewritten in place: a new one is a new inode).
/// Value: the key's identity it was verified under, the file's identity, and `Some(expiresAt)` for a valid
/// waiting envelope / `Some(0)` for a valid decision, `None` for a file that did not verify.
type Memo = std::collections::HashMap<PathBuf, (u64, (u64, u64, i64, i64), Option<i64>)>;
static MEMO: std::sync::Mutex<Option<Memo>> = std::sync::Mutex::new(None);
/// Most files remembered (then the memo starts over).
const MEMO_MAX: usize = 65_536;

fn file_ident(p: &Path) -> Option<(u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(p).ok()?;
    m.file_type()
        .is_file()
        // the change time: the kernel's, not settable (a rewrite in place that puts mtime back still moves it)
        .then(|| (m.ino(), m.size(), m.ctime(), m.ctime_nsec()))
}

/// `check(p)` memoized by `p`'s identity and the key's.
fn memo_check(p: &Path, key_id: u64, check: impl FnOnce() -> Option<i64>) -> Option<i64> {
    let ident = file_ident(p)?;
    if let Ok(g) = MEMO.lock() {
        if let Some((k, i, v)) = g.as_ref().and_then(|m| m.get(p)) {
            if *k == key_id && *i == ident {
                return *v;
            }
        }
    }
    let v = check();
    if let Ok(mut g) = MEMO.lock() {
        let m = g.get_or_insert_with(Default::default);
        if m.len() >= MEMO_MAX {
            m.clear();
        }
        m.insert(p.to_path_buf(), (key_id, ident, v));
    }
    v
}

/// How many messages of `session` wait for the human at `now_ms`, and the earliest `expiresAt` among them:
/// [`pending`]'s answer, cheap on repeat (each file's verification is remembered while it is the same
/// file). One past its time sends the session through [`pending`], which expires it.
pub fn waiting(home: &Path, session: &str, now_ms: i64) -> (usize, Option<i64>) {
    let Some(d) = folder(home, session) else {
        return (0, None);
    };
    if fsafe::check_private_dir(&d).is_err() {
        return (0, None);
    }
    let Ok(Some(key)) = read_key(home) else {
        return (0, None);
    };
    let key_id = u64::from_le_bytes(key.bytes()[..8].try_into().unwrap_or([0; 8]));
    let Some((held, decided)) = stems(&d) else {
        return (0, None);
    };
    let (mut n, mut next) = (0usize, None::<i64>);
    for stem in held {
        if uuid::Uuid::parse_str(&stem).is_err() || n >= MAX_HELD {
            continue;
        }
        let rid = format!("{}{stem}", crate::mail::REQUEST_ID_PREFIX);
        if decided.contains(&stem) {
            let p = d.join(format!("{stem}.decision"));
            let ok = memo_check(&p, key_id, || {
                let x: Decided = open_sealed(key.bytes(), "decision", &p)?;
                (x.request_id == rid && x.session_id == session).then_some(0)
            });
            if ok.is_some() {
                continue;
            }
        }
        let p = d.join(format!("{stem}.held"));
        let expires = memo_check(&p, key_id, || {
            let item = read_item(home, key.bytes(), &d, &stem, session)?;
            Some(item.expires_at)
        });
        let Some(at) = expires else { continue };
        if now_ms >= at {
            // past its time: the full look expires it (and answers for the whole session)
            let p = pending(home, session, now_ms);
            return (p.len(), p.iter().map(|i| i.expires_at).min());
        }
        n += 1;
        next = Some(next.map_or(at, |x: i64| x.min(at)));
    }
    (n, next)
}

/// Expire every held message of the home past its time (the mailbox tick's sweep): how many.
pub fn sweep(home: &Path, now_ms: i64) -> usize {
    let (sessions, _) = sessions(home);
    sessions
        .iter()
        .map(|s| pending_and_expired(home, s, now_ms).1)
        .sum()
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
        for item in list_as_is(home, &session) {
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
    use std::io::Write;

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

    /// The race two deciders run (a bulk decision from two pages, an expiry sweep beside the human): the
    /// loser reaches the create after the winner's verified decision is in place. Before, the loser took
    /// any file there for an unverified one, removed it and wrote its own — both "won", the message was
    /// decided twice (human::tests::bulk_decisions_take_each_message_once failed now and then).
    #[test]
    fn a_verified_decision_written_meanwhile_wins_the_create_and_a_forged_one_does_not() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        hold(home, &env(1), i64::MAX).unwrap();
        let stem = key_of(&rid(1)).unwrap().to_string();
        let d = folder(home, B).unwrap();
        let key = read_key(home).unwrap().unwrap();
        let bytes = |decision| {
            sealed_bytes(
                key.bytes(),
                "decision",
                Decided {
                    request_id: rid(1),
                    session_id: B.into(),
                    decision,
                    at: 7,
                },
            )
            .unwrap()
        };
        // the winner's decision is in place; the loser (who read the item as held) tries to reject
        write_decision(
            key.bytes(),
            &d,
            &stem,
            (&rid(1), B),
            &bytes(HeldState::Approved),
        )
        .unwrap();
        let lost = write_decision(
            key.bytes(),
            &d,
            &stem,
            (&rid(1), B),
            &bytes(HeldState::Rejected),
        );
        assert!(
            matches!(
                lost,
                Err(HeldError::Decided {
                    state: HeldState::Approved,
                    ..
                })
            ),
            "{lost:?}"
        );
        assert_eq!(
            state_of(home, &rid(1), Some(B)).unwrap().state,
            HeldState::Approved
        );

        // a decision file that does not verify is not the human's: replaced, and nothing is left aside
        hold(home, &env(2), i64::MAX).unwrap();
        let stem2 = key_of(&rid(2)).unwrap().to_string();
        fs::write(
            d.join(format!("{stem2}.decision")),
            b"{\"body\":{},\"mac\":\"00\"}",
        )
        .unwrap();
        decide(home, B, &rid(2), false, 8).unwrap();
        assert_eq!(
            state_of(home, &rid(2), Some(B)).unwrap().state,
            HeldState::Rejected
        );
        let stale = fs::read_dir(&d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("decision-stale"))
            .count();
        assert_eq!(stale, 0);
    }

    /// Deciders racing for one message at once (two pages, two processes): exactly one wins, every other
    /// is told the winner's decision, and the message ends as the winner decided — handed on only if that
    /// was an approval. A decision file is never visible half-written (it is linked in whole, `write_new`):
    /// a reader that found it half-written took it for forged, moved it aside and won as well.
    #[test]
    fn racing_deciders_of_one_message_one_wins_every_time() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        for n in 1..=24u8 {
            hold(home, &env(n), i64::MAX).unwrap();
            let gate = std::sync::Arc::new(std::sync::Barrier::new(6));
            let racers: Vec<_> = (0..6)
                .map(|i| {
                    let (home, gate) = (home.to_path_buf(), gate.clone());
                    std::thread::spawn(move || {
                        gate.wait();
                        (i % 2 == 0, decide(&home, B, &rid(n), i % 2 == 0, 100))
                    })
                })
                .collect();
            let results: Vec<_> = racers.into_iter().map(|t| t.join().unwrap()).collect();
            let won: Vec<_> = results.iter().filter(|(_, r)| r.is_ok()).collect();
            assert_eq!(won.len(), 1, "message {n}: {results:?}");
            let state = if won[0].0 {
                HeldState::Approved
            } else {
                HeldState::Rejected
            };
            for (_, r) in &results {
                match r {
                    Ok(i) => assert_eq!(i.state, state),
                    Err(HeldError::Decided { state: s, .. }) => {
                        assert_eq!(*s, state, "message {n}")
                    }
                    Err(e) => panic!("message {n}: {e:?}"),
                }
            }
            assert_eq!(state_of(home, &rid(n), Some(B)).unwrap().state, state);
            assert_eq!(
                mailbox_has(home, n),
                state == HeldState::Approved,
                "message {n}"
            );
        }
    }

    #[test]
    fn approve_hands_on_once_and_reject_never() {
        let h = tempfile::tempdir().unwrap();
        hold(h.path(), &env(1), i64::MAX).unwrap();
        hold(h.path(), &env(2), i64::MAX).unwrap();
        let l = list(h.path(), B, 0);
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
        hold(h.path(), &env(1), i64::MAX).unwrap();
        let d = folder(h.path(), B).unwrap();
        // an agent writes an approval without the key
        let r1 = rid(1);
        let stem = key_of(&r1).unwrap();
        fs::write(
            d.join(format!("{stem}.decision")),
            br#"{"body":{"requestId":"x","sessionId":"y","decision":"approved","at":1},"mac":"00"}"#,
        )
        .unwrap();
        assert_eq!(list(h.path(), B, 0)[0].state, HeldState::Held);
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
        assert_eq!(list(h.path(), B, 0).len(), 1);
    }

    #[test]
    fn an_approval_whose_hand_off_died_is_recovered_once() {
        let h = tempfile::tempdir().unwrap();
        hold(h.path(), &env(1), i64::MAX).unwrap();
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

    #[test]
    fn held_mail_expires_at_its_time_exactly_and_is_never_delivered_after() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        crate::ledger::append(home, &{
            let mut l = crate::ledger::Entry::new(
                1,
                Some("session-a"),
                Some(B),
                "send_session_message",
                Some("queue"),
                Some(&rid(1)),
                crate::ledger::LedgerOutcome::Held,
                Some("message 1"),
            );
            l.hop = Some(1);
            l
        })
        .unwrap();
        hold(home, &env(1), 1_000).unwrap();
        // one ms before: still waiting, 1 ms left
        let p = pending(home, B, 999);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].expires_at, 1_000);
        assert_eq!(p[0].state_at(999), HeldState::Held);
        assert_eq!(list(home, B, 999)[0].state, HeldState::Held);
        // at the boundary: expired by the first look, sealed
        assert!(pending(home, B, 1_000).is_empty());
        let l = list(home, B, 1_000);
        assert_eq!(
            (l[0].state, l[0].decided_at),
            (HeldState::Expired, Some(1_000))
        );
        // the ledger says so: the held line's request, outcome expired
        let lines = crate::ledger::read_ledger(
            home,
            &crate::ledger::Filter {
                request_id: Some(rid(1)),
                ..Default::default()
            },
        )
        .unwrap()
        .entries;
        assert_eq!(
            lines
                .iter()
                .map(|l| l.outcome.as_string())
                .collect::<Vec<_>>(),
            vec!["held", "expired"]
        );
        assert_eq!(lines[1].hop, Some(1));
        // an approval after expiry is refused, and nothing is handed on, ever
        let e = decide(home, B, &rid(1), true, 1_001).unwrap_err();
        assert!(
            matches!(
                e,
                HeldError::Decided {
                    state: HeldState::Expired,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(recover(home, 1_002), 0);
        assert!(!mailbox_has(home, 1));
        // a later sweep finds nothing more to expire, and writes no second line
        assert_eq!(sweep(home, 5_000), 0);
        assert_eq!(
            crate::ledger::read_ledger(
                home,
                &crate::ledger::Filter {
                    request_id: Some(rid(1)),
                    ..Default::default()
                }
            )
            .unwrap()
            .entries
            .len(),
            2
        );
    }

    #[test]
    fn an_approval_at_the_expiry_instant_is_refused_and_one_before_it_lands() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        hold(home, &env(1), 1_000).unwrap();
        hold(home, &env(2), 1_000).unwrap();
        assert_eq!(
            decide(home, B, &rid(2), true, 999).unwrap().state,
            HeldState::Approved
        );
        assert!(matches!(
            decide(home, B, &rid(1), true, 1_000),
            Err(HeldError::Decided {
                state: HeldState::Expired,
                ..
            })
        ));
        assert!(mailbox_has(home, 2));
        assert!(!mailbox_has(home, 1));
        // an approved message never expires
        assert_eq!(sweep(home, 10_000), 0);
        assert_eq!(
            state_of(home, &rid(2), Some(B)).unwrap().state,
            HeldState::Approved
        );
    }

    #[test]
    fn the_sweep_expires_every_session_and_verify_says_expired_before_it() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        hold(home, &env(1), 1_000).unwrap();
        let mut other = env(2);
        other.session_id = "session-cccccccc-0000-0000-0000-000000000000".into();
        hold(home, &other, 2_000).unwrap();
        // before any sweep, past its time: state_of (what verify reads) already says expired
        assert_eq!(
            state_of(home, &rid(1), None).unwrap().state,
            HeldState::Expired
        );
        assert_eq!(sweep(home, 1_500), 1);
        assert_eq!(sweep(home, 2_500), 1);
        assert_eq!(sweep(home, 3_000), 0);
    }

    #[test]
    fn a_message_held_before_expiry_existed_still_verifies_and_expires_after_the_policys_ttl() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        // as an older version sealed it: the envelope alone
        let k = key_or_make(home).unwrap();
        let d = ensure(home, B).unwrap();
        let e = env(1);
        let bytes = sealed_bytes(k.bytes(), "held", &e).unwrap();
        let r1 = rid(1);
        fs::write(d.join(format!("{}.held", key_of(&r1).unwrap())), bytes).unwrap();
        let l = list_as_is(home, B);
        assert_eq!(l.len(), 1, "the old seal verifies");
        assert_eq!(
            l[0].expires_at,
            1 + super::super::DEFAULT_HELD_TTL_MS as i64
        );
    }

    #[test]
    fn the_counts_memo_follows_every_change_of_a_file() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        hold(home, &env(1), 10_000).unwrap();
        hold(home, &env(2), 20_000).unwrap();
        assert_eq!(waiting(home, B, 5), (2, Some(10_000)));
        assert_eq!(
            waiting(home, B, 5),
            (2, Some(10_000)),
            "asked again: the same answer"
        );
        let d = folder(home, B).unwrap();
        let r1 = rid(1);
        let held1 = d.join(format!("{}.held", key_of(&r1).unwrap()));
        // rewritten in place, same length, its times put back: the change time still moves, it is re-checked
        let len = fs::metadata(&held1).unwrap().len() as usize;
        let mtime = fs::metadata(&held1).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        {
            let mut f = fs::OpenOptions::new().write(true).open(&held1).unwrap();
            f.write_all(&vec![b' '; len]).unwrap();
            f.set_modified(mtime).unwrap();
        }
        assert_eq!(
            waiting(home, B, 5),
            (1, Some(20_000)),
            "a file that no longer verifies is not counted"
        );
        // a forged decision does not hide the other one; the human's does
        let r2 = rid(2);
        let dec2 = d.join(format!("{}.decision", key_of(&r2).unwrap()));
        fs::write(&dec2, br#"{"body":{"requestId":"x","sessionId":"y","decision":"rejected","at":1},"mac":"00"}"#).unwrap();
        assert_eq!(waiting(home, B, 5), (1, Some(20_000)));
        decide(home, B, &rid(2), false, 6).unwrap();
        assert_eq!(waiting(home, B, 7), (0, None));
        // past its time the count goes through the full look, which expires it
        hold(home, &env(3), 100).unwrap();
        assert_eq!(waiting(home, B, 50), (1, Some(100)));
        assert_eq!(waiting(home, B, 100), (0, None));
        assert_eq!(
            list_as_is(home, B)
                .iter()
                .find(|i| i.envelope.request_id == rid(3))
                .unwrap()
                .state,
            HeldState::Expired
        );
    }
}
