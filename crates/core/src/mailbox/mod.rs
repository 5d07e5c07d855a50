//! The durable mailbox: how a send reaches a session live in another process that has no web server
//! (the headless profile), and how a message handed off survives its sender.
//!
//! One shard per target session, `$DSH_HOME/dsh-session-mail/mailbox/<session-id>/` (0700), one file
//! per message, named by its request id's UUID:
//!
//! - `<uuid>.msg` — posted by the sender (temp file created `O_EXCL|O_NOFOLLOW` 0600, then `rename`:
//!   a reader never sees half an envelope). Posting is the hand-off: from here on the sender may die.
//! - `<uuid>.claimed-<pid>` — claimed (renamed) by the process `<pid>` that holds the session live and
//!   is delivering it in-process.
//! - `<uuid>.done` — the receipt: what the owner's host did (delivered / rejected with its code),
//!   written atomically before the claimed file is removed. The sender waits up to ~2 s for it.
//!
//! **Only the process holding the session live drains its shard** (the shim asks for the shards of
//! its own live sessions only), and it takes an envelope only when it is addressed to it (pid and
//! `startedAt` of its presence record) or orphaned: addressed to a process that is gone (its pid is
//! dead, or its fresh presence record is another incarnation or no longer lists the session). A claim
//! left by a dead process is an orphan too.
//!
//! **Exactly once.** A claim is a `rename` (one winner). Before delivering, the owner skips a request
//! id found in the target's log (a previous holder delivered and flushed it: [`Claimed::landed`]) or in
//! its own memory (the shim's set of ids it delivered, and the live inbox's pending ids). It delivers,
//! flushes the session, then writes the receipt and removes the claim. A crash after the flush: the
//! log holds the id and the next holder skips it. A crash before the flush: the delivery died with
//! that process's memory (its inbox and unflushed events are gone), so the durable history does not
//! hold it and the next holder delivers it — once.
//!
//! Everything here is read as hostile: the shard must be a real private directory, files are opened
//! without following links and without blocking, sizes and counts are capped, and an envelope whose
//! request id, session or name disagree is deleted unread. Names are classified before anything is
//! opened: junk is unlinked, non-regular files with an envelope's name are unlinked unopened, other
//! records of the shard are never touched, and none of them counts toward a cap. An envelope that
//! passes is still a claim: the drain delivers only the text its [`admit::Admit`] check (mail policy's,
//! handed down) rebuilds from a verified sender.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::presence;

pub mod admit;
use base::fsafe::{self, Follow};

pub mod queued;
mod unsettled;
pub use unsettled::MAX_UNSETTLED;

/// Largest envelope posted or read (a message is capped at `maxSendChars` characters plus its frame;
/// a larger one is refused at the sender, never posted to be deleted unread).
pub const MAX_ENVELOPE_BYTES: u64 = 1024 * 1024;
/// Largest receipt read.
pub const MAX_RECEIPT_BYTES: u64 = 4096;
/// Most names of one shard looked at per drain.
pub const MAX_NAMES: usize = 512;
/// Most envelopes of one shard claimed per drain.
pub const MAX_BATCH: usize = 32;
/// A shard holding this many waiting envelopes takes no more.
pub const MAX_PENDING: usize = 256;
/// Receipts and leftover temp files older than this are removed by the draining process.
pub const RECEIPT_TTL_MS: u64 = 10 * 60_000;
/// How long a sender waits for the owner's receipt.
pub const RECEIPT_WAIT_MS: u64 = 2_000;

/// One message handed to the process that holds its target live.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Envelope {
    pub v: u32,
    /// `dsh-session-mail:<uuid>`; the file is named `<uuid>.msg`.
    pub request_id: String,
    /// The target; the shard is named after it.
    pub session_id: String,
    /// `queue` or `steer`.
    pub mode: String,
    /// The full delivered text (header or frame included), as the sender built it. A claim: the drain
    /// takes it apart and delivers only what [`admit`] rebuilds from it.
    pub text: String,
    pub sender: Option<String>,
    /// The owner the sender addressed (its presence record).
    pub owner_pid: u32,
    pub owner_started_at: i64,
    pub posted_at: i64,
}

/// What the owner's host did with an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReceiptState {
    /// Delivered in-process (or found already delivered: exactly once).
    Delivered,
    /// The owner's host refused it (`code`, `message`).
    Rejected,
}

/// The owner's answer, `<uuid>.done`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    pub request_id: String,
    pub session_id: String,
    pub state: ReceiptState,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    /// How it was delivered (`session-controller`, `agent`, `already-delivered`).
    #[serde(default)]
    pub route: Option<String>,
    #[serde(default)]
    pub pid: u32,
}

/// What the owner's host did with a claimed envelope, as the shim reports it (the binding's
/// `MailboxSettlement`: `mailboxSettle()` takes it); `Settlement::receipt` is the receipt it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, js_name = "MailboxSettlement")
)]
pub struct Settlement {
    pub request_id: String,
    pub session_id: String,
    /// `delivered` or `rejected`.
    #[cfg_attr(feature = "napi", napi(ts_type = "'delivered' | 'rejected'"))]
    pub state: String,
    /// The host's error code when rejected.
    pub code: Option<String>,
    pub message: Option<String>,
    /// `session-controller`, `agent` or `already-delivered`.
    pub route: Option<String>,
}

/// The most characters of the host's `code`, `message` and `route` a receipt keeps.
pub const MAX_SETTLED_CHARS: usize = 512;

/// The most bytes each of a receipt's texts (`code`, `message`, `route`) takes once JSON-encoded
/// (quotes not counted). Characters alone do not bound a receipt: escaped, one character takes up to
/// 6 bytes (a control character is `\u00XX`), so 3 × [`MAX_SETTLED_CHARS`] of them can outgrow
/// [`MAX_RECEIPT_BYTES`], the bound the sender reads a receipt with, and a sender that cannot read
/// the receipt cannot tell what the owner's host answered. [`settle`] cuts each text to this budget:
/// 3 × (1024 + 2) bytes, plus the rest of a receipt (a request id of this plugin, a session id of at
/// most 200 plain characters, the state, a pid: under 400 bytes), stays under 4096.
pub const MAX_SETTLED_TEXT_BYTES: usize = 1024;

/// The mark a text cut to fit a receipt ends with.
pub const CUT_MARK: char = '…';

/// `s` JSON-encoded, its length in bytes without the quotes (serde_json's escaping, as written).
fn encoded_len(s: &str) -> usize {
    serde_json::to_string(s).map_or(usize::MAX, |e| e.len() - 2)
}

/// `s` cut on a character boundary so that, JSON-encoded, it takes at most `budget` bytes, marked
/// with [`CUT_MARK`] when cut.
fn fit_encoded(s: String, budget: usize) -> String {
    if encoded_len(&s) <= budget {
        return s;
    }
    let room = budget.saturating_sub(CUT_MARK.len_utf8());
    let mut used = 0;
    let mut end = 0;
    let mut buf = [0u8; 4];
    for (i, c) in s.char_indices() {
        let n = encoded_len(c.encode_utf8(&mut buf));
        if used + n > room {
            break;
        }
        used += n;
        end = i + c.len_utf8();
    }
    let mut out = s[..end].to_string();
    out.push(CUT_MARK);
    out
}

impl Receipt {
    /// This receipt with its texts cut to [`MAX_SETTLED_TEXT_BYTES`] encoded bytes each (what
    /// [`settle`] writes: readable under [`MAX_RECEIPT_BYTES`]).
    pub fn fitted(mut self) -> Receipt {
        let fit = |s: Option<String>| s.map(|s| fit_encoded(s, MAX_SETTLED_TEXT_BYTES));
        self.code = fit(self.code);
        self.message = fit(self.message);
        self.route = fit(self.route);
        self
    }
}

/// A settlement whose `state` is neither `delivered` nor `rejected`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownState(pub String);

impl std::fmt::Display for UnknownState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown settlement state {:?}", self.0)
    }
}

impl Settlement {
    /// The receipt [`settle`] writes for it (`pid`: the settling process's, set there); the host's texts
    /// cut to [`MAX_SETTLED_CHARS`] (and by [`settle`] to [`MAX_SETTLED_TEXT_BYTES`] encoded).
    pub fn receipt(self) -> Result<Receipt, UnknownState> {
        let state = match self.state.as_str() {
            "delivered" => ReceiptState::Delivered,
            "rejected" => ReceiptState::Rejected,
            _ => return Err(UnknownState(self.state)),
        };
        let cut = |s: Option<String>| s.map(|s| s.chars().take(MAX_SETTLED_CHARS).collect());
        Ok(Receipt {
            request_id: self.request_id,
            session_id: self.session_id,
            state,
            code: cut(self.code),
            message: cut(self.message),
            route: cut(self.route),
            pid: 0,
        })
    }
}

/// The mailbox folder of a home.
pub fn root(home: &Path) -> PathBuf {
    base::home::plugin_dir(home).join("mailbox")
}

/// A session id usable as a folder name (what DSH mints: `session-<uuid>`, letters, digits, `-_.`).
fn shard_name(session: &str) -> Option<&str> {
    let ok = !session.is_empty()
        && session.len() <= 200
        && !session.starts_with('.')
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    ok.then_some(session)
}

/// The shard of `session`, None when the id cannot name a folder.
pub fn shard(home: &Path, session: &str) -> Option<PathBuf> {
    shard_name(session).map(|s| root(home).join(s))
}

/// The UUID of a request id this plugin minted (the file stem).
fn key_of(request_id: &str) -> Option<&str> {
    let k = request_id.strip_prefix(base::names::REQUEST_ID_PREFIX)?;
    uuid::Uuid::parse_str(k).ok().map(|_| k)
}

/// Can this session be mailed at all (its id names a folder)?
pub fn addressable(session: &str) -> bool {
    shard_name(session).is_some()
}

/// Write `bytes` to `dest` atomically ([`fsafe::write_private`]: synced, renamed).
fn write_atomic(dir: &Path, dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let put = fsafe::Put {
        sync: true,
        replace: true,
    };
    fsafe::write_private(dir, dest, bytes, put)
}

/// Why a mailbox folder or receipt could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailboxError {
    /// The request id is not one this plugin mints.
    NotOurId,
    /// The session id cannot name a mailbox folder.
    BadSession,
    /// A level of the shard folder could not be made private (the system's error).
    Folder {
        path: PathBuf,
        why: store::error::IoError,
    },
    /// The shard folder is not a private directory of this user.
    Refused(fsafe::Refused),
    /// Encoding the receipt failed (serde's reason).
    Encode(std::sync::Arc<str>),
    /// Writing the receipt failed (the system's error).
    Io(store::error::IoError),
}

impl std::fmt::Display for MailboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MailboxError::NotOurId => f.write_str("not a request id of this plugin"),
            MailboxError::BadSession => f.write_str("the session id cannot name a mailbox folder"),
            MailboxError::Folder { path, why } => {
                write!(f, "mailbox folder {}: {}", path.display(), why.full())
            }
            MailboxError::Refused(r) => r.fmt(f),
            MailboxError::Encode(why) => f.write_str(why),
            MailboxError::Io(why) => f.write_str(&why.full()),
        }
    }
}

impl std::error::Error for MailboxError {}

/// Make (or check) the shard folder: every level private, no link followed.
fn ensure_shard(home: &Path, session: &str) -> Result<PathBuf, MailboxError> {
    let d = shard(home, session).ok_or(MailboxError::BadSession)?;
    fsafe::ensure_private_dirs([base::home::plugin_dir(home), root(home), d.clone()]).map_err(
        |(path, e)| MailboxError::Folder {
            path,
            why: e.into(),
        },
    )?;
    Ok(d)
}

/// Why a post did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostError {
    /// The shard already holds [`MAX_PENDING`] waiting envelopes.
    Full(usize),
    /// The request id or the session id cannot name a file.
    BadId,
    /// The envelope would be this many bytes, over [`MAX_ENVELOPE_BYTES`].
    TooLarge(usize),
    /// The shard folder cannot be used.
    Shard(MailboxError),
    /// The shard could not be read, or the envelope not written (the system's error).
    Io(store::error::IoError),
    /// The envelope could not be encoded.
    Encode(std::sync::Arc<str>),
}

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PostError::Full(n) => write!(f, "{n} envelopes already wait in the shard"),
            PostError::BadId => f.write_str("the request or session id cannot name a file"),
            PostError::TooLarge(n) => write!(f, "the envelope would be {n} bytes"),
            PostError::Shard(e) => e.fmt(f),
            PostError::Io(e) => f.write_str(&e.full()),
            PostError::Encode(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for PostError {}

/// Hand `env` off to its target's shard. Once this returns Ok the message is durable: whoever
/// holds the session live delivers it, whether or not the sender is still alive.
pub fn post(home: &Path, env: &Envelope) -> Result<(), PostError> {
    let key = key_of(&env.request_id).ok_or(PostError::BadId)?;
    if !addressable(&env.session_id) {
        return Err(PostError::BadId);
    }
    let d = ensure_shard(home, &env.session_id).map_err(PostError::Shard)?;
    let waiting = fs::read_dir(&d)
        .map_err(|e| PostError::Io(e.into()))?
        .flatten()
        .take(MAX_SCAN)
        .filter(|e| {
            let n = e.file_name();
            let waits = n
                .to_str()
                .is_some_and(|n| matches!(classify(n), Name::Msg(_) | Name::Claimed(..)));
            // `DirEntry::file_type` does not follow links (d_type, else lstat): a FIFO, link or folder
            // with an envelope's name is no envelope and takes no place.
            waits && e.file_type().is_ok_and(|t| t.is_file())
        })
        .take(MAX_PENDING)
        .count();
    if waiting >= MAX_PENDING {
        return Err(PostError::Full(waiting));
    }
    let mut e = env.clone();
    e.v = 1;
    let bytes = serde_json::to_vec(&e).map_err(|e| PostError::Encode(e.to_string().into()))?;
    if bytes.len() as u64 > MAX_ENVELOPE_BYTES {
        return Err(PostError::TooLarge(bytes.len()));
    }
    write_atomic(&d, &d.join(format!("{key}.msg")), &bytes).map_err(|e| PostError::Io(e.into()))
}

/// Why a receipt that is there could not be read as the owner's answer to the request it is named for
/// (the words: `render::send`). Never read as "no receipt": the sender cannot tell what the owner's host
/// did, and says so; the file is left where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiptError {
    /// The shard folder is not a private directory of this user (what it is).
    Shard(fsafe::Refused),
    /// The file is not one a receipt can be: a link, not a regular file, over [`MAX_RECEIPT_BYTES`], grown
    /// while read.
    File(fsafe::Refused),
    /// Looking at or reading the file failed (the system's error).
    Io(store::error::IoError),
    /// Its bytes are not a receipt: not JSON (`json: false`), or JSON that is not a receipt this version
    /// reads; where the reading stopped. (Never the file's own text: it may be anyone's.)
    NotAReceipt {
        json: bool,
        line: usize,
        column: usize,
    },
    /// A receipt for another request or another session than the one it is named for.
    NotThisRequest,
}

/// The owner's receipt for `request_id`: `Ok(None)` when there is none (yet), `Err` when one is there
/// but cannot be read as this request's receipt. Nothing is removed or rewritten either way.
pub fn receipt(
    home: &Path,
    session: &str,
    request_id: &str,
) -> Result<Option<Receipt>, ReceiptError> {
    let (Some(key), Some(d)) = (key_of(request_id), shard(home, session)) else {
        return Ok(None);
    };
    let file = d.join(format!("{key}.done"));
    match fs::symlink_metadata(&file) {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(ReceiptError::Io(e.into())),
        Ok(_) => {}
    }
    fsafe::check_private_dir(&d).map_err(ReceiptError::Shard)?;
    let bytes = match fsafe::read_capped(&file, Follow::No, MAX_RECEIPT_BYTES) {
        Ok((b, _)) => b,
        // Swept between the look and the read: gone, as if never written.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(
                match e.get_ref().and_then(|i| i.downcast_ref::<fsafe::Refused>()) {
                    Some(r) => ReceiptError::File(r.clone()),
                    None => ReceiptError::Io(e.into()),
                },
            )
        }
    };
    let r: Receipt = serde_json::from_slice(&bytes).map_err(|e| ReceiptError::NotAReceipt {
        json: !e.is_syntax() && !e.is_eof(),
        line: e.line(),
        column: e.column(),
    })?;
    if r.request_id != request_id || r.session_id != session {
        return Err(ReceiptError::NotThisRequest);
    }
    Ok(Some(r))
}

/// Has `request_id` a receipt that reads as its own? Only such a receipt settles its envelope: one that
/// cannot be read (forged, garbled, a newer writer's) settles nothing — the envelope is still waiting
/// and is delivered (exactly once: a delivery that landed is in the log), and its owner's receipt then
/// replaces that file.
fn settled(home: &Path, session: &str, request_id: &str) -> bool {
    matches!(receipt(home, session, request_id), Ok(Some(_)))
}

/// Is `request_id` still waiting in its target's shard (posted or claimed, not settled)?
pub fn waiting(home: &Path, session: &str, request_id: &str) -> bool {
    let (Some(key), Some(d)) = (key_of(request_id), shard(home, session)) else {
        return false;
    };
    if fsafe::check_private_dir(&d).is_err() {
        return false;
    }
    if settled(home, session, request_id) {
        return false;
    }
    let claimed = format!("{key}.claimed-");
    fs::symlink_metadata(d.join(format!("{key}.msg"))).is_ok_and(|m| m.is_file())
        || fs::read_dir(&d).is_ok_and(|rd| {
            rd.flatten().take(MAX_SCAN).any(|e| {
                e.file_name().to_string_lossy().starts_with(&claimed)
                    && e.file_type().is_ok_and(|t| t.is_file())
            })
        })
}

/// The session whose mailbox holds `request_id` undelivered (`session` when given, else every shard
/// looked at, at most [`MAX_NAMES`] × 8 of them).
pub fn find_waiting(home: &Path, request_id: &str, session: Option<&str>) -> Option<String> {
    if let Some(s) = session {
        return waiting(home, s, request_id).then(|| s.to_string());
    }
    fsafe::check_private_dir(&root(home)).ok()?;
    fs::read_dir(root(home))
        .ok()?
        .flatten()
        .take(MAX_NAMES * 8)
        .filter_map(|e| e.file_name().into_string().ok())
        .find(|s| waiting(home, s, request_id))
}

/// The draining process: its pid and presence `startedAt`, and the sessions it holds live.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Drainer {
    pub pid: u32,
    pub started_at: i64,
    pub sessions: Vec<String>,
}

/// One envelope claimed for delivery (the binding's `MailboxEnvelope`: `mailboxDrain()` returns these).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, js_name = "MailboxEnvelope")
)]
pub struct Claimed {
    pub request_id: String,
    pub session_id: String,
    /// `queue` or `steer`.
    pub mode: String,
    pub text: String,
    /// The target's log already holds this request id: a previous holder delivered it. Settle it as
    /// delivered without delivering again.
    pub landed: bool,
}

/// The believed presence record of each live process a pass asked [`is_mine_or_orphan`] about (`None`:
/// none), read once per pid and pass.
type Peers = Vec<(u32, Option<presence::Record>)>;

/// Whose is an envelope addressed to (`pid`, `started_at`) for `session`, as seen by `me`? Only that
/// process's own record is read (`presence::of_pid`, the checks `presence::peers` makes of each record),
/// never the home's whole listing: a pass over one shard cost a read and a `/proc` check of every
/// record on the home (~2 system calls a record, the mail index's fate of each queued row included).
fn is_mine_or_orphan(
    me: &Drainer,
    pid: u32,
    started_at: Option<i64>,
    session: &str,
    peers: &mut Peers,
    home: &Path,
    now_ms: i64,
) -> bool {
    if pid == me.pid {
        // Ours, or addressed to an earlier process that had our pid (it is gone: we have the pid).
        return true;
    }
    if !presence::pid_alive(pid) {
        return true;
    }
    // Alive: it still owns the envelope only while its fresh record (same incarnation) lists the session.
    let i = match peers.iter().position(|(p, _)| *p == pid) {
        Some(i) => i,
        None => {
            peers.push((pid, presence::of_pid(home, me.pid, now_ms, pid)));
            peers.len() - 1
        }
    };
    !peers[i].1.as_ref().is_some_and(|r| {
        started_at.is_none_or(|t| t == r.started_at) && r.sessions.iter().any(|s| s.id == session)
    })
}

/// How long ago the file was last written; a file dated in the future (or without a time) counts as
/// old, so dating a file ahead cannot keep it young. The one age of a mailbox file: the drain's
/// envelopes and receipts, the waker's `.wake` (`queued::wake_lock`).
fn age_ms(m: &fs::Metadata) -> u64 {
    m.modified()
        .ok()
        .and_then(|t| t.elapsed().ok())
        .map_or(u64::MAX, |d| {
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
        })
}

/// Read and check one envelope file; None (and the file removed) when it is not a valid envelope
/// for `session` named `key`.
fn read_envelope(p: &Path, session: &str, key: &str) -> Option<Envelope> {
    let parsed = fsafe::read_capped(p, Follow::No, MAX_ENVELOPE_BYTES)
        .ok()
        .and_then(|(b, _)| serde_json::from_slice::<Envelope>(&b).ok())
        .filter(|e| {
            e.session_id == session
                && key_of(&e.request_id) == Some(key)
                && matches!(e.mode.as_str(), "queue" | "steer")
        });
    if parsed.is_none() && fs::symlink_metadata(p).is_ok() {
        let _ = fs::remove_file(p);
    }
    parsed
}

/// What one name of a shard is (only the name is looked at: nothing is opened to classify it).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Name<'a> {
    /// `.<hex>.tmp`: a temp file of an atomic write.
    Tmp,
    /// `<uuid>.msg`: posted, waiting.
    Msg(&'a str),
    /// `<uuid>.claimed-<pid>`.
    Claimed(&'a str, u32),
    /// `<uuid>.done`: a receipt.
    Done(&'a str),
    /// `<uuid>.refused`: an envelope the drain refused ([`admit`]), kept for `verify` and the human.
    Refused,
    /// `<uuid>.<anything else>`: a record of another part of this plugin (issue 19's `<uuid>.held-<pid>`
    /// and `<uuid>.removed`) or of a newer version: never opened, renamed, removed or counted here.
    Other,
    /// Not a name this plugin writes: skipped without counting, and removed (never opened).
    Junk,
}

fn classify(name: &str) -> Name<'_> {
    if name.starts_with('.') && name.ends_with(".tmp") {
        return Name::Tmp;
    }
    let Some((stem, rest)) = name.split_once('.') else {
        return Name::Junk;
    };
    if stem.len() != 36 || uuid::Uuid::try_parse(stem).is_err() {
        return Name::Junk;
    }
    match rest {
        "msg" => Name::Msg(stem),
        "done" => Name::Done(stem),
        "refused" => Name::Refused,
        _ => match rest.strip_prefix("claimed-") {
            Some(pid)
                if !pid.is_empty()
                    && pid.len() <= 10
                    && pid.bytes().all(|b| b.is_ascii_digit()) =>
            {
                pid.parse::<u32>()
                    .map_or(Name::Other, |p| Name::Claimed(stem, p))
            }
            _ => Name::Other,
        },
    }
}

/// Most names of one shard read per drain (junk included: the cost of a hostile shard is bounded, and
/// every junk name read is removed, so a shard of more junk than this is cleared over a few drains).
pub const MAX_SCAN: usize = 16_384;
/// Most refused envelopes kept per shard (the oldest goes first).
pub const MAX_REFUSED: usize = 64;

/// Claim what the drainer should deliver now from the shards of its live sessions, oldest first.
/// Each envelope is delivered only as `admit` answers ([`admit::Admit`]: mail policy's check,
/// `crate::mail::admit::Checks`, rebuilds its text framed, from a sender its ledger line vouches for,
/// after the checks a direct send passes); one it refuses is moved aside (`<uuid>.refused`) with a
/// rejected receipt. Housekeeping on the way: old receipts and temp files go, an envelope already
/// settled (a receipt that reads as its own exists: [`settled`]) is removed, an invalid one is deleted, junk names and non-regular files
/// are removed without being opened or counted.
pub fn drain_with(
    home: &Path,
    me: &Drainer,
    admit: &impl admit::Admit,
    now_ms: i64,
) -> Vec<Claimed> {
    let mut out = Vec::new();
    if fsafe::check_private_dir(&root(home)).is_err() {
        return out;
    }
    let mut peers = Peers::new();
    for session in me.sessions.iter().take(presence::MAX_SESSIONS) {
        let Some(d) = shard(home, session) else {
            continue;
        };
        if fsafe::check_private_dir(&d).is_err() {
            continue;
        }
        let Ok(rd) = fs::read_dir(&d) else { continue };
        // (key, path, claimer, age of the file)
        let mut todo: Vec<(String, PathBuf, Option<u32>, u64)> = Vec::new();
        let mut refused: Vec<(u64, PathBuf)> = Vec::new();
        for entry in rd.flatten().take(MAX_SCAN) {
            let path = entry.path();
            let name = entry.file_name();
            let kind = name.to_str().map_or(Name::Junk, classify);
            if matches!(kind, Name::Other) {
                continue;
            }
            if let Name::Claimed(k, p) = kind {
                // Settled here once already, its receipt not written ([`unsettled`]): passed over
                // unopened, not taken again every drain.
                if p == me.pid && unsettled::holds(&d, k, p) {
                    continue;
                }
            }
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            let (key, claimer) = match kind {
                Name::Other => continue,
                Name::Junk => {
                    // Unlinking never opens (a FIFO cannot block us); a folder is left, uncounted.
                    if !meta.is_dir() {
                        let _ = fs::remove_file(&path);
                    }
                    continue;
                }
                Name::Tmp => {
                    if age_ms(&meta) > RECEIPT_TTL_MS && !meta.is_dir() {
                        let _ = fs::remove_file(&path);
                    }
                    continue;
                }
                Name::Done(_) => {
                    if age_ms(&meta) > RECEIPT_TTL_MS && !meta.is_dir() {
                        let _ = fs::remove_file(&path);
                    }
                    continue;
                }
                Name::Refused => {
                    refused.push((age_ms(&meta), path));
                    continue;
                }
                Name::Msg(k) => (k, None),
                Name::Claimed(k, p) => (k, Some(p)),
            };
            if !meta.is_file() {
                // A link, FIFO, socket or device is unlinked, never opened or followed; a folder is
                // left alone. None of them counts toward any cap.
                if !meta.is_dir() {
                    let _ = fs::remove_file(&path);
                }
                continue;
            }
            if settled(
                home,
                session,
                &format!("{}{key}", base::names::REQUEST_ID_PREFIX),
            ) {
                // Settled already (a crash between the receipt and the removal).
                let _ = fs::remove_file(&path);
                continue;
            }
            todo.push((key.to_string(), path, claimer, age_ms(&meta)));
            if todo.len() >= MAX_NAMES {
                break;
            }
        }
        let mut batch: Vec<(i64, Claimed)> = Vec::new();
        for (key, path, claimer, age) in todo {
            if batch.len() >= MAX_BATCH {
                break;
            }
            // A claim by a live other process is that process's business.
            if let Some(c) = claimer {
                if c != me.pid && !is_mine_or_orphan(me, c, None, session, &mut peers, home, now_ms)
                {
                    continue;
                }
            }
            let Some(env) = read_envelope(&path, session, &key) else {
                continue;
            };
            if claimer.is_none()
                && !is_mine_or_orphan(
                    me,
                    env.owner_pid,
                    Some(env.owner_started_at),
                    session,
                    &mut peers,
                    home,
                    now_ms,
                )
            {
                continue;
            }
            // Delivered already by a previous holder: settled without a second delivery.
            #[cfg(test)]
            tests::LOG_LOOKUPS.with(|n| n.set(n.get() + 1));
            let landed = store::find_request(home, session, &env.request_id).is_some();
            let verdict = if landed {
                admit::Verdict::Deliver(String::new())
            } else {
                admit.check(home, &env, age)
            };
            if matches!(verdict, admit::Verdict::Wait) {
                continue;
            }
            let mine = d.join(format!("{key}.claimed-{}", me.pid));
            if path != mine && fs::rename(&path, &mine).is_err() {
                continue; // someone else claimed it first
            }
            match verdict {
                admit::Verdict::Deliver(text) => batch.push((
                    env.posted_at,
                    Claimed {
                        request_id: env.request_id,
                        session_id: env.session_id,
                        mode: env.mode,
                        text,
                        landed,
                    },
                )),
                admit::Verdict::Refuse(why) => {
                    admit::refuse(home, &d, &key, &env, &why, me.pid, now_ms);
                    refused.push((0, d.join(format!("{key}.refused"))));
                }
                admit::Verdict::Divert => match admit.divert(home, &env) {
                    Ok(()) => {
                        let _ = fs::remove_file(&mine);
                    }
                    Err(why) => {
                        admit::refuse(home, &d, &key, &env, &why, me.pid, now_ms);
                        refused.push((0, d.join(format!("{key}.refused"))));
                    }
                },
                admit::Verdict::Wait => {}
            }
        }
        // Bounded: the oldest refused records beyond [`MAX_REFUSED`] go.
        if refused.len() > MAX_REFUSED {
            refused.sort_by_key(|(age, _)| std::cmp::Reverse(*age));
            for (_, p) in refused.iter().take(refused.len() - MAX_REFUSED) {
                let _ = fs::remove_file(p);
            }
        }
        batch.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.request_id.cmp(&b.1.request_id)));
        out.extend(batch.into_iter().map(|(_, c)| c));
    }
    out
}

/// Record what happened to a claimed envelope: the receipt first (atomically), then the claim goes.
/// The receipt is [`Receipt::fitted`]: the sender reads it whole under [`MAX_RECEIPT_BYTES`].
///
/// A receipt that cannot be written (its name taken by a folder: hostile input, left as it is; or the
/// write failed) leaves the claim, and this process remembers it ([`unsettled`]): its drain does not take
/// that claim again. The sender, meanwhile, finds no receipt it can read there and says the message may
/// have landed.
pub fn settle(home: &Path, pid: u32, r: &Receipt) -> Result<(), MailboxError> {
    let key = key_of(&r.request_id).ok_or(MailboxError::NotOurId)?;
    let d = shard(home, &r.session_id).ok_or(MailboxError::BadSession)?;
    fsafe::check_private_dir(&d).map_err(MailboxError::Refused)?;
    let mut r = r.clone().fitted();
    r.pid = pid;
    let bytes = serde_json::to_vec(&r).map_err(|e| MailboxError::Encode(e.to_string().into()))?;
    if bytes.len() as u64 > MAX_RECEIPT_BYTES {
        // Not reached with ids this plugin accepts (see [`MAX_SETTLED_TEXT_BYTES`]); a receipt the
        // sender could not read is never written.
        return Err(MailboxError::Encode(
            format!("the receipt would be {} bytes", bytes.len()).into(),
        ));
    }
    if let Err(e) = write_atomic(&d, &d.join(format!("{key}.done")), &bytes) {
        unsettled::remember(&d, key, pid);
        return Err(MailboxError::Io(e.into()));
    }
    let _ = fs::remove_file(d.join(format!("{key}.claimed-{pid}")));
    Ok(())
}

/// Give a claimed envelope back (the session is no longer live here): its next holder drains it.
pub fn release(home: &Path, pid: u32, session: &str, request_id: &str) {
    let (Some(key), Some(d)) = (key_of(request_id), shard(home, session)) else {
        return;
    };
    if fsafe::check_private_dir(&d).is_ok() {
        let _ = fs::rename(
            d.join(format!("{key}.claimed-{pid}")),
            d.join(format!("{key}.msg")),
        );
    }
}

#[cfg(all(test, unix))]
mod tests;
