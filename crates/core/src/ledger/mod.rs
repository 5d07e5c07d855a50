//! The audit ledger: one append-only JSONL file per DSH home with one line per send attempt, readable
//! by the user (the CLI's `ledger` command) and the source of the send budget (`mail::budget`).
//!
//! - Where: `$DSH_HOME/dsh-session-mail/ledger.jsonl`; the directory is 0700 and the file 0600 (Unix),
//!   tightened when found looser.
//! - A line: `{"time","sender","target","tool","mode","requestId","outcome","bodyChars","bodySha256"}`, plus
//!   `chain` and `hop` (the loop guard, `mail::chain`) on a send that counts (accepted, may-have-landed).
//!   Never the body, never a secret or a cookie (nothing here is handed one). `bodySha256` is the hex
//!   SHA-256 of the message as the caller wrote it (before the From header or the frame) — note that a
//!   very short body can be guessed from its hash, which is one more reason the file is owner-only.
//! - Outcomes: `accepted`, `refused:<code>` (the refusal code of the tool text), `unreachable` (nothing
//!   reached a decision of the host), `may-have-landed` (the message went out and no clear answer came back).
//! - Writes: the whole line (newline included) in one `write(2)` on a file opened with `O_APPEND`, under a
//!   process-wide mutex, so concurrent senders in one host never interleave; between processes `O_APPEND`
//!   keeps each line whole on a local file system. A line left torn (disk full, crash) is repaired on the
//!   next append by starting on a fresh line; readers skip torn or unreadable lines and count them.
//! - Rotation by size: when a line would take `ledger.jsonl` past [`ROTATE_BYTES`], it becomes
//!   `ledger.1.jsonl` (`.1` → `.2` → `.3`; [`KEEP_ROTATED`] rotated files are kept, the oldest is dropped).
//! - A ledger that cannot be written never blocks a send: the send goes out and its text ends with
//!   `note: audit ledger not written: <reason>` (see `tools::send`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use base::clock as time;
use base::fsafe::{self, ensure_private_dir, Follow};

use crate::code::RefusalCode;

/// The plugin's directory under DSH_HOME (the name lives in `base::names`).
pub use base::names::DIR_NAME;
/// The live ledger file.
pub const FILE_NAME: &str = "ledger.jsonl";
/// Rotate when the live file would grow past this many bytes.
pub const ROTATE_BYTES: u64 = 8 * 1024 * 1024;
/// Rotated files kept (`ledger.1.jsonl` … `ledger.3.jsonl`).
pub const KEEP_ROTATED: usize = 3;
/// Longest id written into a line (longer ones are cut and marked with `…`).
const MAX_FIELD_CHARS: usize = 512;

/// Serializes appends and rotations inside this process.
static WRITE_LOCK: Mutex<()> = Mutex::new(());

/// How an attempt ended, as the ledger records it. On disk it is a string: `accepted`,
/// `refused:<code>`, `unreachable`, `may-have-landed` (the strings of every earlier version);
/// an unknown string is kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum LedgerOutcome {
    Accepted,
    /// Refused with this code (`refused:<code>`).
    Refused(RefusalCode),
    /// Refused with a code this version does not know (`refused:<code>`, the code kept as written): a
    /// refusal all the same, so no reader has to look at the string again.
    RefusedUnknown(String),
    /// No decision of the host (down, timeout, 5xx, carrier status, bad address).
    Unreachable,
    /// Went out without a clear answer; counts as sent.
    MayHaveLanded,
    /// Kept for the human's decision (the target's inbound policy, `crate::policy`); not sent.
    Held,
    /// A held message nobody decided on before its `expiresAt` (`crate::policy::held::expire`): written
    /// when it expired, never delivered.
    Expired,
    /// A string this version does not know.
    Other(String),
}

impl Default for LedgerOutcome {
    fn default() -> Self {
        LedgerOutcome::Other(String::new())
    }
}

impl LedgerOutcome {
    /// The on-disk string.
    pub fn as_string(&self) -> String {
        match self {
            LedgerOutcome::Accepted => "accepted".into(),
            LedgerOutcome::Refused(code) => format!("refused:{code}"),
            LedgerOutcome::RefusedUnknown(code) => format!("refused:{code}"),
            LedgerOutcome::Unreachable => "unreachable".into(),
            LedgerOutcome::MayHaveLanded => "may-have-landed".into(),
            LedgerOutcome::Held => "held".into(),
            LedgerOutcome::Expired => "expired".into(),
            LedgerOutcome::Other(s) => s.clone(),
        }
    }

    /// Refused when sent, with a code this version knows or not.
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            LedgerOutcome::Refused(_) | LedgerOutcome::RefusedUnknown(_)
        )
    }

    /// Counts against the send budget (it went out, or may have).
    pub fn counts_as_sent(&self) -> bool {
        matches!(self, LedgerOutcome::Accepted | LedgerOutcome::MayHaveLanded)
    }
}

impl From<String> for LedgerOutcome {
    fn from(s: String) -> Self {
        match s.as_str() {
            "accepted" => LedgerOutcome::Accepted,
            "held" => LedgerOutcome::Held,
            "expired" => LedgerOutcome::Expired,
            "unreachable" => LedgerOutcome::Unreachable,
            "may-have-landed" => LedgerOutcome::MayHaveLanded,
            _ => match s.strip_prefix("refused:") {
                Some(code) => match RefusalCode::parse(code) {
                    Some(code) => LedgerOutcome::Refused(code),
                    None => LedgerOutcome::RefusedUnknown(code.to_string()),
                },
                _ => LedgerOutcome::Other(s),
            },
        }
    }
}

impl From<&str> for LedgerOutcome {
    fn from(s: &str) -> Self {
        LedgerOutcome::from(s.to_string())
    }
}

impl From<LedgerOutcome> for String {
    fn from(o: LedgerOutcome) -> String {
        o.as_string()
    }
}

// To JS as its on-disk string (the binding's `LedgerEntry.outcome`).
#[cfg(feature = "napi")]
napi_as_string!(LedgerOutcome, |val| val.as_string());

/// One ledger line. Declared once for the binding too: `readLedger()`'s `entries` are these (napi
/// object `LedgerEntry`, an absent field `null`; `outcome` its on-disk string).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(
        object,
        object_from_js = false,
        use_nullable = true,
        js_name = "LedgerEntry"
    )
)]
pub struct Entry {
    /// UTC, `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub time: String,
    /// The calling session (from the runtime), `null` when the runtime gave none.
    pub sender: Option<String>,
    /// The target as the caller named it, `null` when the call had none.
    pub target: Option<String>,
    /// `sessions_send` or `send_session_message`.
    pub tool: String,
    /// `queue` or `steer`, `null` when the arguments did not say (bad call).
    pub mode: Option<String>,
    /// `dsh-session-mail:<uuid>`, `null` for a refusal decided before an id was minted.
    pub request_id: Option<String>,
    /// `accepted`, `refused:<code>`, `unreachable`, `may-have-landed`, `held` or `expired`.
    #[cfg_attr(feature = "napi", napi(ts_type = "string"))]
    pub outcome: LedgerOutcome,
    /// Characters of the message as written, `null` when the message was not a string.
    pub body_chars: Option<u32>,
    /// Hex SHA-256 of the message as written, `null` when the message was not a string.
    pub body_sha256: Option<String>,
    /// The loop guard's conversation chain (`mail::chain`): the request id of the chain's first delivery.
    /// Absent on refused lines and on lines written before the guard existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    /// This delivery's hop in its chain (1 = the first agent-to-agent delivery after a human message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop: Option<u32>,
    /// Hex SHA-256 of the text delivered (From header or frame included), on an accepted line: what a
    /// re-delivery of this request (`mailbox::queued`) is checked against, so a record that was not
    /// accepted, or whose text was changed, delivers nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_sha256: Option<String>,
    /// The linked machine the message came from (`MachineId`; absent: this home).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_machine: Option<String>,
    /// The linked machine the message went to (`MachineId`; absent: this home).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_machine: Option<String>,
}

impl Entry {
    /// A line for one attempt at `now_ms`; the body itself is only hashed and counted.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        now_ms: i64,
        sender: Option<&str>,
        target: Option<&str>,
        tool: &str,
        mode: Option<&str>,
        request_id: Option<&str>,
        outcome: LedgerOutcome,
        body: Option<&str>,
    ) -> Entry {
        Entry {
            time: time::format_utc_ms(now_ms),
            sender: sender.map(cap),
            target: target.map(cap),
            tool: cap(tool),
            mode: mode.map(cap),
            request_id: request_id.map(cap),
            outcome,
            body_chars: body.map(|b| u32::try_from(b.chars().count()).unwrap_or(u32::MAX)),
            body_sha256: body.map(sha256_hex),
            chain: None,
            hop: None,
            text_sha256: None,
            from_machine: None,
            to_machine: None,
        }
    }

    /// The time in ms since the epoch, if the line's time is readable.
    pub fn time_ms(&self) -> Option<i64> {
        time::parse_utc(&self.time)
    }

    /// Does this attempt count against the send budget? Accepted sends, and sends that may have landed.
    pub fn counts_as_sent(&self) -> bool {
        self.outcome.counts_as_sent()
    }
}

fn cap(s: &str) -> String {
    if s.chars().count() > MAX_FIELD_CHARS {
        let mut t: String = s.chars().take(MAX_FIELD_CHARS).collect();
        t.push('…');
        t
    } else {
        s.to_string()
    }
}

/// Hex SHA-256.
pub fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `<home>/dsh-session-mail`.
pub fn dir(home: &Path) -> PathBuf {
    home.join(DIR_NAME)
}

/// `<home>/dsh-session-mail/ledger.jsonl`.
pub fn path(home: &Path) -> PathBuf {
    dir(home).join(FILE_NAME)
}

/// `<home>/dsh-session-mail/ledger.<n>.jsonl` (n ≥ 1).
pub fn rotated_path(home: &Path, n: usize) -> PathBuf {
    dir(home).join(format!("ledger.{n}.jsonl"))
}

/// Why the ledger could not be read or written: the file or folder, and what went wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerError {
    /// The line could not be encoded (serde's reason).
    Encode(String),
    /// A file or folder of the ledger failed with this system error.
    Io {
        path: PathBuf,
        why: store::error::IoError,
    },
    /// A file or folder of the ledger is not what it must be (a link, not regular, someone else's).
    Refused { path: PathBuf, why: fsafe::Refused },
    /// The ledger file is a symbolic link.
    Link { path: PathBuf },
    /// The ledger file is not a regular file.
    NotRegular { path: PathBuf },
    /// Rotating the live file failed.
    Rotate {
        path: PathBuf,
        why: store::error::IoError,
    },
    /// The line was written only in part.
    ShortWrite {
        path: PathBuf,
        wrote: usize,
        len: usize,
    },
    /// The folder cannot take a new file.
    FolderNotWritable { path: PathBuf },
    /// The write did not finish before the send's deadline.
    Late,
}

impl std::fmt::Display for LedgerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LedgerError::Encode(e) => write!(f, "cannot encode the line: {e}"),
            LedgerError::Io { path, why } => write!(f, "{}: {}", path.display(), why.full()),
            LedgerError::Refused { path, why } => write!(f, "{}: {why}", path.display()),
            LedgerError::Link { path } => {
                write!(f, "{}: is a symbolic link (not followed)", path.display())
            }
            LedgerError::NotRegular { path } => write!(f, "{}: not a regular file", path.display()),
            LedgerError::Rotate { path, why } => {
                write!(f, "rotating {}: {}", path.display(), why.full())
            }
            LedgerError::ShortWrite { path, wrote, len } => write!(
                f,
                "{}: short write ({wrote} of {len} bytes)",
                path.display()
            ),
            LedgerError::FolderNotWritable { path } => {
                write!(f, "{}: the folder is not writable", path.display())
            }
            LedgerError::Late => f.write_str("the write did not finish in time"),
        }
    }
}

impl std::error::Error for LedgerError {}

/// An IO error at `path` as a [`LedgerError`] (a refusal of `fsafe` stays typed).
fn io_at(path: &Path) -> impl Fn(io::Error) -> LedgerError + '_ {
    move |e| match e.get_ref().and_then(|r| r.downcast_ref::<fsafe::Refused>()) {
        Some(why) => LedgerError::Refused {
            path: path.to_path_buf(),
            why: why.clone(),
        },
        None => LedgerError::Io {
            path: path.to_path_buf(),
            why: e.into(),
        },
    }
}

/// Append one line. `Err` is the reason for the `note: audit ledger not written: …` line.
pub fn append(home: &Path, entry: &Entry) -> Result<(), LedgerError> {
    append_with_limit(home, entry, ROTATE_BYTES)
}

/// Largest ledger file a reader accepts (rotation keeps the live file under 8 MiB; a bigger one was
/// not written by us). Past it the file is refused, so the budget fails closed instead of reading it.
pub const READ_CAP: u64 = 64 * 1024 * 1024;
/// Longest ledger line a reader keeps (a line is a few hundred bytes; ids are capped at 512 chars).
pub const LINE_CAP: usize = 64 * 1024;

/// [`append`] with an explicit rotation size (tests).
pub fn append_with_limit(home: &Path, entry: &Entry, rotate_bytes: u64) -> Result<(), LedgerError> {
    let mut line = serde_json::to_string(entry).map_err(|e| LedgerError::Encode(e.to_string()))?;
    line.push('\n');
    let _guard = WRITE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let d = dir(home);
    ensure_private_dir(&d).map_err(io_at(&d))?;
    let p = path(home);
    let size = match fs::symlink_metadata(&p) {
        Ok(m) if m.is_file() => m.len(),
        Ok(m) if m.file_type().is_symlink() => return Err(LedgerError::Link { path: p }),
        Ok(_) => return Err(LedgerError::NotRegular { path: p }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(io_at(&p)(e)),
    };
    if size > 0 && size + line.len() as u64 > rotate_bytes {
        rotate(home).map_err(|e| LedgerError::Rotate {
            path: p.clone(),
            why: e.into(),
        })?;
    }
    let (mut f, len) = open_append(&p, true).map_err(io_at(&p))?;
    // A torn last line (an earlier short write, a crash) would swallow this one: start afresh.
    if len > 0 && !ends_with_newline(&f, &p, len) {
        line.insert(0, '\n');
    }
    let n = f.write(line.as_bytes()).map_err(io_at(&p))?;
    if n != line.len() {
        return Err(LedgerError::ShortWrite {
            path: p,
            wrote: n,
            len: line.len(),
        });
    }
    Ok(())
}

/// Can a line be appended? Checks the folder and the file as [`append`] would (creating the private
/// folder if missing), without writing. The send budget uses it: a budget whose sends cannot be
/// recorded cannot be enforced.
pub fn check_writable(home: &Path) -> Result<(), LedgerError> {
    let _guard = WRITE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let d = dir(home);
    ensure_private_dir(&d).map_err(io_at(&d))?;
    let p = path(home);
    match fs::symlink_metadata(&p) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // Nothing to open yet: the folder must take a new file.
            if is_dir_writable(&d) {
                Ok(())
            } else {
                Err(LedgerError::FolderNotWritable { path: d })
            }
        }
        _ => open_append(&p, false).map(drop).map_err(io_at(&p)),
    }
}

#[cfg(unix)]
fn is_dir_writable(d: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(d.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string; access(2) has no other preconditions.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

#[cfg(not(unix))]
fn is_dir_writable(d: &Path) -> bool {
    !fs::metadata(d)
        .map(|m| m.permissions().readonly())
        .unwrap_or(true)
}

/// Does the ledger end in a newline? Read through `f` (opened for appending, and for reading when it
/// could be: one `pread`), else through a second descriptor; unreadable counts as yes.
fn ends_with_newline(f: &File, p: &Path, len: u64) -> bool {
    let mut b = [0u8; 1];
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        if f.read_exact_at(&mut b, len - 1).is_ok() {
            return b[0] == b'\n';
        }
    }
    let _ = f;
    let Ok((mut f, _)) = fsafe::open_regular(p, Follow::No, None) else {
        return true;
    };
    f.seek(SeekFrom::Start(len - 1)).is_ok() && f.read_exact(&mut b).is_ok() && b[0] == b'\n'
}

fn rotate(home: &Path) -> io::Result<()> {
    let oldest = rotated_path(home, KEEP_ROTATED);
    match fs::remove_file(&oldest) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    for n in (1..KEEP_ROTATED).rev() {
        let from = rotated_path(home, n);
        if fs::symlink_metadata(&from).is_ok() {
            fs::rename(&from, rotated_path(home, n + 1))?;
        }
    }
    let first = rotated_path(home, 1);
    fs::rename(path(home), &first)?;
    // A live file found looser than 0600 keeps its mode through the rename: tighten the copy too
    // (through a no-follow descriptor: the rename moved a regular file we checked).
    tighten(&first);
    Ok(())
}

#[cfg(unix)]
fn tighten(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok((f, m)) = fsafe::open_regular(p, Follow::No, None) {
        if fsafe::mode_of(&m) & 0o077 != 0 && fsafe::foreign_owner(&m).is_none() {
            let _ = f.set_permissions(fs::Permissions::from_mode(0o600));
        }
    }
}

#[cfg(not(unix))]
fn tighten(_p: &Path) {}

/// Open for appending without following a link and without blocking; only a regular file owned by
/// this user is accepted (tightened to 0600 through the descriptor when looser). `read`: for reading
/// too when the file allows it (the torn-tail check reads its last byte through it). With its length.
#[cfg(unix)]
fn open_append(p: &Path, read: bool) -> io::Result<(File, u64)> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let open = |read: bool| {
        OpenOptions::new()
            .append(true)
            .read(read)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(p)
    };
    let f = match open(read) {
        Err(e) if read && e.raw_os_error() == Some(libc::EACCES) => open(false),
        r => r,
    }
    .map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            io::Error::other("is a symbolic link (not followed)")
        } else {
            e
        }
    })?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    if let Some(uid) = fsafe::foreign_owner(&m) {
        return Err(io::Error::other(format!(
            "owned by another user (uid {uid})"
        )));
    }
    if fsafe::mode_of(&m) & 0o077 != 0 {
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    Ok((f, m.len()))
}

#[cfg(not(unix))]
fn open_append(p: &Path, read: bool) -> io::Result<(File, u64)> {
    let f = OpenOptions::new()
        .append(true)
        .read(read)
        .create(true)
        .open(p)?;
    let len = f.metadata()?.len();
    Ok((f, len))
}

/// Why the ledger cannot be used as it is (a link, not a regular file, foreign-owned), for `doctor`;
/// `None` when it is fine or absent.
pub fn health(home: &Path) -> Option<String> {
    let d = dir(home);
    match fs::symlink_metadata(&d) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => return Some(format!("{}: {e}", d.display())),
        Ok(m) => {
            // (the metadata in hand: one `stat`, as `read_files` does)
            if let Err(why) = fsafe::check_private_meta(&m) {
                return Some(format!("{}: {why}", d.display()));
            }
        }
    }
    for p in std::iter::once(path(home)).chain((1..=KEEP_ROTATED).map(|n| rotated_path(home, n))) {
        match fsafe::open_regular(&p, Follow::No, Some(READ_CAP)) {
            Ok((_, m)) => {
                if let Some(uid) = fsafe::foreign_owner(&m) {
                    return Some(format!(
                        "{}: owned by another user (uid {uid})",
                        p.display()
                    ));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Some(format!("{}: {e}", p.display())),
        }
    }
    None
}

/// Which lines [`read_ledger`] returns. Every set field must match; `None` matches anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub sender: Option<String>,
    pub target: Option<String>,
    /// Either the sender or the target.
    pub session: Option<String>,
    pub request_id: Option<String>,
    /// Lines of this conversation chain (the loop guard): its `chain` field, or the chain's first delivery
    /// (whose request id names the chain).
    pub chain: Option<String>,
    pub tool: Option<String>,
    /// Only lines at or after this instant (ms since the epoch). Rotated files older than it are not read.
    pub since_ms: Option<i64>,
    /// Only lines before this instant.
    pub until_ms: Option<i64>,
    /// Keep only the newest N matching lines.
    pub limit: Option<usize>,
}

impl Filter {
    pub fn matches(&self, e: &Entry) -> bool {
        self.matches_at(e, || e.time_ms())
    }

    /// [`Filter::matches`] with the line's time given (`time` is asked only when a time bound is set).
    fn matches_at(&self, e: &Entry, time: impl FnOnce() -> Option<i64>) -> bool {
        let eq = |want: &Option<String>, got: &Option<String>| {
            want.as_ref()
                .is_none_or(|w| got.as_deref() == Some(w.as_str()))
        };
        if !eq(&self.sender, &e.sender)
            || !eq(&self.target, &e.target)
            || !eq(&self.request_id, &e.request_id)
        {
            return false;
        }
        if let Some(c) = &self.chain {
            if e.chain.as_deref() != Some(c) && e.request_id.as_deref() != Some(c) {
                return false;
            }
        }
        if let Some(s) = &self.session {
            if e.sender.as_deref() != Some(s) && e.target.as_deref() != Some(s) {
                return false;
            }
        }
        if self.tool.as_ref().is_some_and(|t| *t != e.tool) {
            return false;
        }
        if self.since_ms.is_some() || self.until_ms.is_some() {
            let Some(t) = time() else { return false };
            if self.since_ms.is_some_and(|s| t < s) || self.until_ms.is_some_and(|u| t >= u) {
                return false;
            }
        }
        true
    }
}

/// What [`read_ledger`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerRead {
    /// Matching lines, oldest first.
    pub entries: Vec<Entry>,
    /// Files read, oldest first.
    pub files: Vec<PathBuf>,
    /// Lines that were not a ledger entry (garbage, or torn by a crash in the middle of a file).
    pub unreadable: usize,
    /// The live file ends in a torn line (a write in progress, or a crash): skipped, not an error.
    pub torn_tail: bool,
}

/// Read the ledger (rotated files, then the live one) and keep the lines `filter` matches.
/// A missing ledger is empty; an unreadable file is an error (`Err` names it).
pub fn read_ledger(home: &Path, filter: &Filter) -> Result<LedgerRead, LedgerError> {
    let mut entries = Vec::new();
    let scanned = scan(home, filter, |e| entries.push(e.clone()))?;
    Ok(LedgerRead {
        entries,
        files: scanned.files,
        unreadable: scanned.unreadable,
        torn_tail: scanned.torn_tail,
    })
}

/// What [`scan`] read: [`LedgerRead`] without the lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scanned {
    /// Files read, oldest first.
    pub files: Vec<PathBuf>,
    /// Lines that were not a ledger entry.
    pub unreadable: usize,
    /// The live file ends in a torn line.
    pub torn_tail: bool,
}

/// [`read_ledger`]'s lines handed to `visit` one by one, oldest first, without copying them out of the
/// per-process parse (a budget check looks at a few fields of each line of its sender).
pub fn scan(
    home: &Path,
    filter: &Filter,
    mut visit: impl FnMut(&Entry),
) -> Result<Scanned, LedgerError> {
    scan_timed(home, filter, |e, _| visit(e))
}

/// [`scan`], each line handed over with its time (ms since the epoch; `None` when unreadable), parsed once
/// when the line was read: the per-process parse keeps it, so a budget check does not parse the times of
/// its sender's lines again on every send.
pub fn scan_timed(
    home: &Path,
    filter: &Filter,
    mut visit: impl FnMut(&Entry, Option<i64>),
) -> Result<Scanned, LedgerError> {
    let files = read_files(home, filter.since_ms)?;
    let keep = |l: &&Line| filter.matches_at(&l.entry, || l.time_ms);
    // `limit`: only the newest N matching lines.
    let skip = match filter.limit {
        Some(n) => files
            .iter()
            .map(|f| f.lines.iter().filter(keep).count())
            .sum::<usize>()
            .saturating_sub(n),
        None => 0,
    };
    let mut out = Scanned::default();
    let mut seen = 0usize;
    for f in files {
        out.unreadable += f.unreadable;
        out.torn_tail |= f.torn;
        for l in f.lines.iter().filter(keep) {
            seen += 1;
            if seen > skip {
                visit(&l.entry, l.time_ms);
            }
        }
        out.files.push(f.path);
    }
    Ok(out)
}

/// One parsed ledger line and its time ([`Entry::time_ms`], parsed once with the line).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    entry: Entry,
    time_ms: Option<i64>,
}

impl Line {
    fn of(entry: Entry) -> Line {
        let time_ms = entry.time_ms();
        Line { entry, time_ms }
    }
}

/// One ledger file as read: all its lines (shared with the per-process parse), oldest first.
struct FileRead {
    path: PathBuf,
    lines: Arc<Vec<Line>>,
    unreadable: usize,
    /// Ends in a torn line (reported for the live file only).
    torn: bool,
}

/// The ledger's files, oldest first: the rotated ones, then the live one. Read newest first, so that a
/// `since` bound stops before older rotated files.
fn read_files(home: &Path, since_ms: Option<i64>) -> Result<Vec<FileRead>, LedgerError> {
    let mut files: Vec<FileRead> = Vec::new();
    let candidates =
        std::iter::once(path(home)).chain((1..=KEEP_ROTATED).map(|n| rotated_path(home, n)));
    let d = dir(home);
    let began = std::time::SystemTime::now();
    let folder = match fs::symlink_metadata(&d) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(io_at(&d)(e)),
        Ok(m) => {
            fsafe::check_private_meta(&m).map_err(|why| LedgerError::Refused {
                path: d.clone(),
                why,
            })?;
            m
        }
    };
    // The rotated files were all absent when the folder last changed as it is now: not looked for again.
    let none_rotated = parsed::none_rotated(&d, &folder);
    let mut all_absent = true;
    for (i, p) in candidates.enumerate() {
        if i > 0 && none_rotated {
            break;
        }
        let (f, meta) = match fsafe::open_regular(&p, Follow::No, Some(READ_CAP)) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_at(&p)(e)),
        };
        all_absent &= i == 0;
        // Through the per-process parse caches: the live file's parses only appended bytes; the newest
        // rotated file's is used while that file is provably unchanged (`parsed::read_rotated`: a budget
        // reaches it whenever the live file is younger than its window). Older rotated files are read
        // whole (a reply's loop guard and `verify` reach them; their parses are not kept in memory).
        let (lines, unreadable, torn) = match i {
            0 => parsed::read_live(&p, f, &meta),
            1 => parsed::read_rotated(&p, f, &meta),
            _ => read_lines(f).map(|(all, unreadable, torn)| (Arc::new(all), unreadable, torn)),
        }
        .map_err(io_at(&p))?;
        let oldest = lines.iter().find_map(|l| l.time_ms);
        files.push(FileRead {
            path: p,
            lines,
            unreadable,
            torn: torn && i == 0,
        });
        if let (Some(since), Some(oldest)) = (since_ms, oldest) {
            if oldest < since {
                all_absent = false;
                break;
            }
        }
    }
    if all_absent && !none_rotated {
        parsed::saw_none_rotated(&d, &folder, began);
    }
    files.reverse();
    Ok(files)
}

/// Parse one file: (entries, unreadable lines, ends in a torn line).
#[cfg(test)]
fn read_file(f: File) -> io::Result<(Vec<Entry>, usize, bool)> {
    read_lines(f).map(|(lines, u, t)| (lines.into_iter().map(|l| l.entry).collect(), u, t))
}

/// Parse one file: (lines, unreadable lines, ends in a torn line).
fn read_lines(f: File) -> io::Result<(Vec<Line>, usize, bool)> {
    read_from(f).map(|r| (r.lines, r.unreadable, r.torn))
}

/// The complete lines of the ledger file `path` from byte `offset` on (the human's mail index reads what
/// was appended since its watermark, `crate::mailindex::feed`), and the offset after the last complete
/// line (a torn tail is read again next time). Opened as the other reads open it: never through a link,
/// a regular file of at most [`READ_CAP`] bytes.
pub fn read_tail(path: &Path, offset: u64) -> io::Result<(Vec<Entry>, u64)> {
    let (mut f, m) = fsafe::open_regular(path, Follow::No, Some(READ_CAP))?;
    if offset > m.len() {
        return Err(io::Error::other("the ledger is shorter than the offset"));
    }
    f.seek(SeekFrom::Start(offset))?;
    let c = read_from(f.take(READ_CAP - offset))?;
    Ok((
        c.lines.into_iter().map(|l| l.entry).collect(),
        offset + c.used,
    ))
}

/// What [`read_from`] parsed.
struct Chunk {
    lines: Vec<Line>,
    unreadable: usize,
    torn: bool,
    /// Bytes up to the end of the last complete line (a torn tail is not counted: it is read again).
    used: u64,
}

/// Parse from the reader's position to its end. Line by line, so parsing a file in two pieces split at a
/// line end gives what parsing it whole gives (the parse cache relies on it).
fn read_from(f: impl Read) -> io::Result<Chunk> {
    let mut r = BufReader::new(f);
    let mut lines = Vec::new();
    let mut unreadable = 0;
    let mut torn = false;
    let mut used = 0u64;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut r).take(LINE_CAP as u64).read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        let complete = buf.last() == Some(&b'\n');
        if !complete && buf.len() >= LINE_CAP {
            // Over the line cap: skip to the end of the line, never buffering it.
            let mut skipped = 0u64;
            let mut line = n as u64;
            loop {
                let chunk = r.fill_buf()?;
                if chunk.is_empty() {
                    break;
                }
                match memchr::memchr(b'\n', chunk) {
                    Some(i) => {
                        r.consume(i + 1);
                        line += i as u64 + 1;
                        skipped += 1;
                        break;
                    }
                    None => {
                        let n = chunk.len();
                        r.consume(n);
                        line += n as u64;
                    }
                }
            }
            if skipped > 0 {
                unreadable += 1;
                used += line;
            } else {
                torn = true;
            }
            continue;
        }
        if complete {
            used += n as u64;
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        match serde_json::from_str::<Entry>(text) {
            Ok(e) if complete => lines.push(Line::of(e)),
            // A last line without its newline is a write in progress or a torn one: never trusted.
            Ok(_) | Err(_) if !complete => torn = true,
            _ => unreadable += 1,
        }
    }
    Ok(Chunk {
        lines,
        unreadable,
        torn,
        used,
    })
}

/// The live ledger file's parse, kept per process: a read parses only what was appended since the last
/// one (a budget check used to parse the whole file on every send: ~4 µs a line, 40–100 ms at 10,000
/// lines). The cache is keyed by path and checked against the file itself before it is used: the same
/// device and inode (a rotation renames the file away), a length not below what was parsed (no
/// truncation), the first and the last bytes of the parsed part unchanged, and a new modification time
/// only together with a new length (an in-place rewrite of the same length). Anything else parses the
/// file afresh. Bounded by the live file's size (rotation keeps it under [`ROTATE_BYTES`]).
mod parsed {
    use super::*;
    use std::collections::HashMap;
    use std::fs::Metadata;
    use std::sync::OnceLock;

    /// Bytes of the parsed part compared on every use.
    const TAIL: u64 = 64;

    struct Parsed {
        id: (u64, u64),
        used: u64,
        head: Vec<u8>,
        tail: Vec<u8>,
        /// Length and modification time when last parsed.
        seen: (u64, Option<std::time::SystemTime>),
        lines: Arc<Vec<Line>>,
        unreadable: usize,
    }

    fn cache() -> &'static Mutex<HashMap<PathBuf, Parsed>> {
        static C: OnceLock<Mutex<HashMap<PathBuf, Parsed>>> = OnceLock::new();
        C.get_or_init(|| Mutex::new(HashMap::new()))
    }

    #[cfg(unix)]
    fn identity(m: &Metadata) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        Some((m.dev(), m.ino()))
    }

    #[cfg(not(unix))]
    fn identity(_m: &Metadata) -> Option<(u64, u64)> {
        None
    }

    fn bytes_at(f: &mut File, start: u64, end: u64) -> io::Result<Vec<u8>> {
        let mut b = vec![0u8; end.saturating_sub(start) as usize];
        #[cfg(unix)]
        {
            // (one `pread`, no `lseek` before it)
            use std::os::unix::fs::FileExt;
            f.read_exact_at(&mut b, start)?;
        }
        #[cfg(not(unix))]
        {
            f.seek(SeekFrom::Start(start))?;
            f.read_exact(&mut b)?;
        }
        Ok(b)
    }

    /// The ledger folder whose rotated files were all absent, as (folder, its identity and change time)
    /// when that was seen: a rotation (a rename into the folder) or any file made or removed in it
    /// changes the folder's change time, which no process can set back.
    fn absent() -> &'static Mutex<Option<(PathBuf, FolderKey)>> {
        static A: OnceLock<Mutex<Option<(PathBuf, FolderKey)>>> = OnceLock::new();
        A.get_or_init(|| Mutex::new(None))
    }

    type FolderKey = (Option<(u64, u64)>, i64, i64);

    #[cfg(unix)]
    fn folder_key(m: &Metadata) -> FolderKey {
        use std::os::unix::fs::MetadataExt;
        (identity(m), m.ctime(), m.ctime_nsec())
    }

    #[cfg(not(unix))]
    fn folder_key(_m: &Metadata) -> FolderKey {
        (None, 0, 0)
    }

    /// Were the rotated files of `folder` all absent when it was last as `meta` says?
    pub(super) fn none_rotated(folder: &Path, meta: &Metadata) -> bool {
        let key = folder_key(meta);
        key.0.is_some()
            && absent()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|(p, k)| p == folder && *k == key)
    }

    /// `folder` (as `meta`, read before `began`) has no rotated file: kept unless the folder changed
    /// within [`RACY`] of `began` (a change in the same clock tick would keep its change time).
    pub(super) fn saw_none_rotated(folder: &Path, meta: &Metadata, began: std::time::SystemTime) {
        if folder_key(meta).0.is_none() || racy(meta, began) {
            return;
        }
        *absent().lock().unwrap_or_else(|e| e.into_inner()) =
            Some((folder.to_path_buf(), folder_key(meta)));
    }

    fn tail_at(f: &mut File, end: u64) -> io::Result<Vec<u8>> {
        bytes_at(f, end.saturating_sub(TAIL), end)
    }

    fn head_of(f: &mut File, end: u64) -> io::Result<Vec<u8>> {
        bytes_at(f, 0, end.min(TAIL))
    }

    /// Largest rotated file whose parse is kept (rotation makes them ≤ [`ROTATE_BYTES`] plus a line;
    /// a bigger one was not written by us and is read whole every time).
    pub(super) const ROTATED_KEEP_BYTES: u64 = 2 * ROTATE_BYTES;
    /// Rotated parses kept: the newest rotated file's (`ledger.1.jsonl`) of one home (more homes take
    /// turns), ~1.6 bytes of memory per byte of the file.
    const ROTATED_KEEP: usize = 1;
    /// A file changed within this span before it was read may change again without a new change time
    /// (the kernel's timestamps are coarse: a clock tick, ≤ 10 ms): its parse is used again only after
    /// its bytes are compared (their SHA-256).
    const RACY: std::time::Duration = std::time::Duration::from_millis(100);
    /// The same on a file system whose change times are whole seconds (a change time without
    /// nanoseconds: FAT keeps 2 s).
    pub(super) const RACY_COARSE: std::time::Duration = std::time::Duration::from_secs(3);

    /// A rotated file's parse and what proves the file unchanged: the same device and inode, length,
    /// modification and change time (any write, truncation or `utimes` sets the change time to the
    /// current time, which no unprivileged writer can set back), the first and last bytes; when the
    /// file had changed within [`RACY`] of being read, the SHA-256 of all its bytes too.
    struct Rotated {
        key: RotatedKey,
        head: Vec<u8>,
        tail: Vec<u8>,
        /// `Some`: racy (see [`RACY`]); the digest of the bytes parsed.
        digest: Option<[u8; 32]>,
        lines: Arc<Vec<Line>>,
        unreadable: usize,
        torn: bool,
    }

    #[derive(Clone, Copy, PartialEq, Eq)]
    struct RotatedKey {
        id: (u64, u64),
        len: u64,
        mtime: (i64, i64),
        ctime: (i64, i64),
    }

    fn rotated_cache() -> &'static Mutex<Vec<(PathBuf, Rotated)>> {
        static C: OnceLock<Mutex<Vec<(PathBuf, Rotated)>>> = OnceLock::new();
        C.get_or_init(|| Mutex::new(Vec::new()))
    }

    #[cfg(unix)]
    fn rotated_key(m: &Metadata) -> Option<RotatedKey> {
        use std::os::unix::fs::MetadataExt;
        Some(RotatedKey {
            id: (m.dev(), m.ino()),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    #[cfg(not(unix))]
    fn rotated_key(_m: &Metadata) -> Option<RotatedKey> {
        None
    }

    fn digest(bytes: &[u8]) -> [u8; 32] {
        Sha256::digest(bytes).into()
    }

    /// (every entry, unreadable lines, torn tail) of the rotated file `f` at `p`: the kept parse when
    /// the file is provably the one parsed, else a parse of the whole file (kept when it is small
    /// enough). The same answer as reading the file, either way.
    pub(super) fn read_rotated(
        p: &Path,
        mut f: File,
        meta: &Metadata,
    ) -> io::Result<(Arc<Vec<Line>>, usize, bool)> {
        let Some(key) = rotated_key(meta).filter(|k| k.len <= ROTATED_KEEP_BYTES) else {
            let (all, unreadable, torn) = read_lines(f)?;
            return Ok((Arc::new(all), unreadable, torn));
        };
        // When this read began (a change after it has a later change time than the file shows now).
        let began = std::time::SystemTime::now();
        let kept = {
            let mut c = rotated_cache().lock().unwrap_or_else(|e| e.into_inner());
            c.iter()
                .position(|(q, _)| q == p)
                .map(|i| c.swap_remove(i).1)
        };
        let mut bytes: Option<Vec<u8>> = None;
        if let Some(r) = kept.filter(|r| r.key == key) {
            let same = head_of(&mut f, key.len).is_ok_and(|h| h == r.head)
                && tail_at(&mut f, key.len).is_ok_and(|t| t == r.tail)
                && match r.digest {
                    None => true,
                    Some(d) => {
                        let b = whole(&mut f, key.len)?;
                        let same = digest(&b) == d;
                        bytes = Some(b);
                        same
                    }
                };
            if same {
                let out = (Arc::clone(&r.lines), r.unreadable, r.torn);
                // proved unchanged by its bytes at `began`: past the racy span, the times prove it now
                let digest = r.digest.filter(|_| racy(meta, began));
                keep(p, Rotated { digest, ..r });
                return Ok(out);
            }
        }
        let b = match bytes {
            Some(b) => b,
            None => whole(&mut f, key.len)?,
        };
        let chunk = read_from(&b[..])?;
        let len = b.len() as u64;
        let r = Rotated {
            key: RotatedKey { len, ..key },
            head: b[..len.min(TAIL) as usize].to_vec(),
            tail: b[len.saturating_sub(TAIL) as usize..].to_vec(),
            digest: racy(meta, began).then(|| digest(&b)),
            lines: Arc::new(chunk.lines),
            unreadable: chunk.unreadable,
            torn: chunk.torn,
        };
        let out = (Arc::clone(&r.lines), r.unreadable, r.torn);
        // (a file that changed length while it was read is not kept: it is not the one its times describe)
        if len == key.len {
            keep(p, r);
        }
        Ok(out)
    }

    /// The file's bytes from its start to its end (`len` when it was opened; at most [`READ_CAP`]).
    fn whole(f: &mut File, len: u64) -> io::Result<Vec<u8>> {
        let mut b = Vec::with_capacity(len as usize);
        f.seek(SeekFrom::Start(0))?;
        f.take(READ_CAP).read_to_end(&mut b)?;
        Ok(b)
    }

    /// Did the file change (its change time) within [`RACY`] ([`RACY_COARSE`]) before `began`, or after
    /// it?
    fn racy(meta: &Metadata, began: std::time::SystemTime) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let ctime = std::time::UNIX_EPOCH
                + std::time::Duration::new(
                    meta.ctime().max(0) as u64,
                    meta.ctime_nsec().clamp(0, 999_999_999) as u32,
                );
            let span = if meta.ctime_nsec() == 0 {
                RACY_COARSE
            } else {
                RACY
            };
            began.duration_since(ctime).map_or(true, |d| d < span)
        }
        #[cfg(not(unix))]
        {
            let _ = (meta, began);
            true
        }
    }

    fn keep(p: &Path, r: Rotated) {
        let mut c = rotated_cache().lock().unwrap_or_else(|e| e.into_inner());
        if c.len() >= ROTATED_KEEP {
            c.remove(0);
        }
        c.push((p.to_path_buf(), r));
    }

    /// (every entry, unreadable lines, torn tail) of the live file `f` at `p`.
    pub(super) fn read_live(
        p: &Path,
        mut f: File,
        meta: &Metadata,
    ) -> io::Result<(Arc<Vec<Line>>, usize, bool)> {
        let Some(id) = identity(meta) else {
            let (all, unreadable, torn) = read_lines(f)?;
            return Ok((Arc::new(all), unreadable, torn));
        };
        let len = meta.len();
        let mtime = meta.modified().ok();
        // Taken out while the file is read (no lock held over IO): a concurrent reader parses afresh.
        let taken = cache().lock().unwrap_or_else(|e| e.into_inner()).remove(p);
        let mut state = match taken {
            Some(c)
                if c.id == id
                    && len >= c.used
                    && !(len == c.seen.0 && mtime != c.seen.1)
                    && head_of(&mut f, c.used).is_ok_and(|h| h == c.head)
                    && tail_at(&mut f, c.used).is_ok_and(|t| t == c.tail) =>
            {
                c
            }
            _ => Parsed {
                id,
                used: 0,
                head: Vec::new(),
                tail: Vec::new(),
                seen: (0, None),
                lines: Default::default(),
                unreadable: 0,
            },
        };
        f.seek(SeekFrom::Start(state.used))?;
        let chunk = read_from(&mut f)?;
        if !chunk.lines.is_empty() {
            // (copied only when a reader still holds the previous parse)
            Arc::make_mut(&mut state.lines).extend(chunk.lines);
        }
        state.unreadable += chunk.unreadable;
        let had = state.used;
        state.used += chunk.used;
        if chunk.used > 0 {
            // (a head complete already was compared with the file above: it is the same bytes)
            if had < TAIL {
                state.head = head_of(&mut f, state.used)?;
            }
            state.tail = tail_at(&mut f, state.used)?;
        }
        state.seen = (len, mtime);
        let out = (Arc::clone(&state.lines), state.unreadable, chunk.torn);
        cache()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p.to_path_buf(), state);
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
