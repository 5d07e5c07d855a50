//! Feeding the mail index from the source of truth: the audit ledger (who sent what to whom, when, in
//! which chain; the outcome) and what the logs and the plugin's folders say of each request since (its
//! fate as `verify` reads it; its text from the target's log once landed, else from the held envelope or
//! the queued record).
//!
//! [`fold`] is the whole derivation: the rows the index must hold for a home as it is now. [`sync`]
//! brings an index there: a rebuild (`Index::replace_all` of [`fold`]) when it is new, replaced, of
//! another derivation, or its watermark no longer matches the ledger (truncated, replaced, deleted: the
//! watermark is the ledger file's device, inode and first line, and how many bytes of it were read);
//! else incrementally — the ledger's bytes appended since the watermark (through a rotation: the rest of
//! the file read last, then the newer ones), and the newest rows whose fate can still move (queued,
//! waiting, held, approved, lost, unknown) looked at again.
//! Every write is an idempotent upsert, so several processes feeding one index agree.
//!
//! Off the host's thread: the routes run it on the blocking pool before they read, and a send hands it
//! to the blocking pool after its result ([`nudge`]; coalesced: one pass at a time, at most one started
//! every [`PASS_EVERY`], one more if mail moved meanwhile). Nothing here is read by a delivery decision.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use index::{Aside, Index, IndexError, Opened, Row};
use serde::{Deserialize, Serialize};

use super::IndexStatus;
use crate::fate::FateState;
use crate::ledger::{self, Entry, Filter, LedgerOutcome};
use crate::mailview::{self, Titles};

/// The derivation's version: an index built by another is rebuilt.
pub const DERIVE_VERSION: u32 = 1;
/// Fates that can still change.
pub const OPEN_FATES: [FateState; 6] = [
    FateState::Queued,
    FateState::Waiting,
    FateState::Held,
    FateState::Approved,
    FateState::Lost,
    FateState::Unknown,
];

fn open_fates() -> Vec<&'static str> {
    OPEN_FATES.iter().map(|f| f.as_str()).collect()
}
/// Open rows looked at again on every pass: the newest ones.
pub const RECHECK_NEWEST: usize = 8;
/// Open rows looked at again per pass after those, in turn (fewer when the budget runs out first).
pub const RECHECK: usize = 64;
/// How long a pass spends looking at open rows again (past it the rest waits for the next pass; at
/// least one is looked at — a row whose target's log this process has not read yet costs a fold of it).
pub const RECHECK_BUDGET: std::time::Duration = std::time::Duration::from_millis(6);
/// Open rows are looked at again at most this often per home and process (the page polls every 2 s; a
/// thread opened right after a list, or a burst of sends, looks once).
pub const RECHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(1000);

/// When each home's open rows were last looked at again by this process.
static RECHECKED: Mutex<Vec<(PathBuf, std::time::Instant)>> = Mutex::new(Vec::new());

fn recheck_due(home: &Path) -> bool {
    let mut r = RECHECKED.lock().unwrap_or_else(|p| p.into_inner());
    let now = std::time::Instant::now();
    match r.iter_mut().find(|(h, _)| h == home) {
        Some((_, at)) if now.duration_since(*at) < RECHECK_EVERY => false,
        Some((_, at)) => {
            *at = now;
            true
        }
        None => {
            r.push((home.to_path_buf(), now));
            true
        }
    }
}

/// (time, row id) of the last open row a pass looked at: the next pass goes on after it.
type Cursor = Option<(i64, i64)>;

/// Where the next pass goes on looking at open rows, per home.
static CURSORS: Mutex<Vec<(PathBuf, Cursor)>> = Mutex::new(Vec::new());

/// The watermark: what the index was built from.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
struct Source {
    v: u32,
    /// The live ledger file when it was last read.
    ledger: Option<FileId>,
    /// Bytes of it read (up to the end of its last complete line then).
    offset: u64,
    /// A rebuild is writing the index (its rows so far are the newest of the source): how many rows it
    /// writes in all, and when it last committed (ms). A marker older than [`BUILD_STALE_MS`] is a rebuild
    /// whose process died: the next pass starts another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    building: Option<Building>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
struct Building {
    total: u64,
    at: i64,
}

/// A rebuild whose marker has not moved for this long is taken over by the next pass (its process
/// died): one chunk, even the first (which folds every target's log), commits well within it.
pub const BUILD_STALE_MS: i64 = 120_000;
/// Rows a rebuild writes in its first chunk (the newest: the page's first screen), then in each next one.
pub const FIRST_CHUNK: usize = 200;
pub const CHUNK: usize = 1000;
/// A rebuild in the background rests this long between two chunks (the host's threads get the CPU).
pub const CHUNK_PAUSE: std::time::Duration = std::time::Duration::from_millis(4);

/// A ledger file as the watermark knows it: device, inode, length, and a hash of its first line (a file
/// removed and written anew can get the same inode back).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
struct FileId {
    dev: u64,
    ino: u64,
    len: u64,
    head: String,
}

/// Bytes of a ledger's head hashed (its first line, whole or in part).
const HEAD_BYTES: usize = 256;

fn identity(p: &Path) -> Option<FileId> {
    let (f, m) = base::fsafe::open_regular(p, base::fsafe::Follow::No, None).ok()?;
    let mut head = Vec::with_capacity(HEAD_BYTES);
    std::io::Read::read_to_end(&mut std::io::Read::take(&f, HEAD_BYTES as u64), &mut head).ok()?;
    let head = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let head = ledger::sha256_hex(&String::from_utf8_lossy(head));
    #[cfg(unix)]
    let (dev, ino) = {
        use std::os::unix::fs::MetadataExt;
        (m.dev(), m.ino())
    };
    #[cfg(not(unix))]
    let (dev, ino) = (0, 0);
    Some(FileId {
        dev,
        ino,
        len: m.len(),
        head,
    })
}

/// What an incremental pass reads: the ledger files from where the watermark ended, oldest first (the file
/// it ended in from its offset, and each file rotated after it whole), and the live file's identity; or
/// why the index must be rebuilt instead.
/// The ledger files to read (each from a byte offset), oldest first, and the live file's identity.
type ToRead = (Vec<(PathBuf, u64)>, Option<FileId>);

fn to_read(home: &Path, src: Option<&Source>) -> Result<ToRead, &'static str> {
    let Some(src) = src else {
        return Err("no watermark");
    };
    if src.v != DERIVE_VERSION {
        return Err("another derivation");
    }
    if src.building.is_some() {
        return Err("an unfinished rebuild");
    }
    let live = identity(&ledger::path(home));
    let Some(was) = src.ledger.as_ref() else {
        // no ledger when it was last read: all of the one there is now
        return Ok((live.iter().map(|_| (ledger::path(home), 0)).collect(), live));
    };
    let same = |now: &FileId| (now.dev, now.ino, &now.head) == (was.dev, was.ino, &was.head);
    // the file read last is the live one, or one rotated since (ledger.N, then N-1 … 1 and the live one)
    let files: Vec<PathBuf> = std::iter::once(ledger::path(home))
        .chain((1..=3).map(|n| ledger::rotated_path(home, n)))
        .collect();
    for (n, p) in files.iter().enumerate() {
        let Some(now) = (if n == 0 { live.clone() } else { identity(p) }) else {
            continue;
        };
        if !same(&now) {
            continue;
        }
        if now.len < src.offset {
            return Err("the ledger was truncated");
        }
        let mut read = vec![(p.clone(), src.offset)];
        read.extend(files[..n].iter().rev().map(|p| (p.clone(), 0)));
        return Ok((read, live));
    }
    Err("the ledger was replaced")
}

/// One request id's lines, folded.
#[derive(Default)]
struct Acc {
    time: Option<i64>,
    entry: Option<Entry>,
}

/// The ledger's lines as one entry per request id (its first line's time; sender, target, tool and
/// mode from the first line that names them; chain and hop from any; the outcome of the last line).
fn group(entries: &[Entry]) -> Vec<(String, i64, Entry)> {
    let mut order: Vec<String> = Vec::new();
    let mut accs: HashMap<String, Acc> = HashMap::new();
    for e in entries {
        let Some(rid) = e.request_id.as_deref().filter(|r| !r.is_empty()) else {
            continue;
        };
        let acc = accs.entry(rid.to_string()).or_insert_with(|| {
            order.push(rid.to_string());
            Acc::default()
        });
        let t = e.time_ms().unwrap_or(0);
        acc.time = Some(acc.time.map_or(t, |x| x.min(t)));
        match acc.entry.as_mut() {
            None => acc.entry = Some(e.clone()),
            Some(a) => {
                a.sender = a.sender.take().or_else(|| e.sender.clone());
                a.target = a.target.take().or_else(|| e.target.clone());
                a.mode = a.mode.take().or_else(|| e.mode.clone());
                a.chain = a.chain.take().or_else(|| e.chain.clone());
                a.from_machine = a.from_machine.take().or_else(|| e.from_machine.clone());
                a.to_machine = a.to_machine.take().or_else(|| e.to_machine.clone());
                a.hop = a.hop.max(e.hop);
                a.outcome = e.outcome.clone();
            }
        }
    }
    order
        .into_iter()
        .filter_map(|rid| {
            let a = accs.remove(&rid)?;
            Some((rid, a.time.unwrap_or(0), a.entry?))
        })
        .collect()
}

/// The message as its sender wrote it: the delivered text without the From header or the frame.
pub fn body_of(text: &str) -> &str {
    use crate::mail::{FRAME_BEGIN, FRAME_END, FRAME_TITLE, HEADER_COLON};
    if let Some(head) = text.strip_prefix(FRAME_TITLE) {
        let begin = format!("\n{FRAME_BEGIN}\n");
        if let Some(i) = head.find(&begin) {
            let body = &head[i + begin.len()..];
            let end = format!("\n{FRAME_END}");
            return body.strip_suffix(&end).unwrap_or(body);
        }
        return text;
    }
    if let Some((first, rest)) = text.split_once('\n') {
        if first.starts_with("From ") && first.ends_with(HEADER_COLON) {
            return rest;
        }
    }
    text
}

/// The texts of `ids` that landed in `target`'s log (one fetch per log).
fn landed_texts(titles: &mut Titles, target: &str, ids: &[&str]) -> HashMap<String, String> {
    let Some(st) = titles.session(target) else {
        return HashMap::new();
    };
    let mut want: HashMap<u64, &str> = HashMap::new();
    for rid in ids {
        if let Some((seq, _)) = st.fold.requests.get(*rid).and_then(|t| t.landed) {
            want.insert(seq, rid);
        }
    }
    if want.is_empty() {
        return HashMap::new();
    }
    let wanted: Vec<(u64, store::frames::Loc)> = st
        .fold
        .surface
        .iter()
        .filter(|n| want.contains_key(&n.seq))
        .map(|n| (n.seq, n.loc))
        .collect();
    crate::mail::chain::texts(st, &wanted)
        .into_iter()
        .filter_map(|(seq, t)| {
            let rid = want.get(&seq)?;
            Some((rid.to_string(), t.trim_end_matches('\n').to_string()))
        })
        .collect()
}

/// The rows of `grouped` as the logs and the plugin's folders say now.
fn derive(home: &Path, titles: &mut Titles, grouped: &[(String, i64, Entry)]) -> Vec<Row> {
    let mut rows: Vec<Row> = grouped
        .iter()
        .map(|(rid, time, e)| {
            let (fate, _) = mailview::row_fate(home, titles, e, rid);
            let fate = fate.as_str().to_string();
            Row {
                request_id: rid.clone(),
                time: *time,
                sender_title: e.sender.as_deref().and_then(|s| titles.title(s)),
                sender: e.sender.clone(),
                sender_machine: e.from_machine.clone(),
                target_title: e.target.as_deref().and_then(|s| titles.title(s)),
                target: e.target.clone(),
                target_machine: e.to_machine.clone(),
                tool: e.tool.clone(),
                mode: e.mode.clone(),
                hop: e.hop,
                chain: e.chain.clone(),
                fate,
                text: None,
            }
        })
        .collect();
    // texts: landed ones from each target's log, one fetch per log; the others from the held
    // envelope or the queued record
    let mut by_target: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        if let (Some(t), "landed") = (r.target.as_deref(), r.fate.as_str()) {
            by_target.entry(t.to_string()).or_default().push(i);
        }
    }
    for (target, idx) in by_target {
        let ids: Vec<&str> = idx.iter().map(|&i| rows[i].request_id.as_str()).collect();
        let mut got = landed_texts(titles, &target, &ids);
        for i in idx {
            rows[i].text = got.remove(&rows[i].request_id);
        }
    }
    // sent to a linked machine: the fate its machine (or this home's outbox) last answered, sealed here
    // (crossing::fates; the routes read it again when they answer, so a later answer shows at once)
    if let Some(key) = crate::crossing::fates::key(home) {
        let now = base::clock::now_ms();
        for r in rows.iter_mut().filter(|r| r.fate == "unknown") {
            let Some(m) = r.target_machine.as_deref() else {
                continue;
            };
            if let Some(a) = crate::crossing::fates::read(home, &key, &r.request_id, m, r.time, now)
            {
                r.fate = a.state.as_str().to_string();
            }
        }
    }
    // sent to a linked machine: this home's copy, when it hashes to the ledger line's body
    for (r, (rid, time, e)) in rows.iter_mut().zip(grouped) {
        if let (None, Some(_), Some(sha)) = (&r.text, &r.target_machine, &e.body_sha256) {
            r.text = crate::crossing::sent::text_of(home, rid, sha, *time);
        }
    }
    for r in rows.iter_mut().filter(|r| r.text.is_none()) {
        r.text = match r.fate.as_str() {
            "held" | "approved" | "rejected" | "expired" => {
                crate::policy::held::state_of(home, &r.request_id, r.target.as_deref())
                    .map(|h| h.envelope.text)
            }
            "queued" | "lost" | "removed" | "canceled" => r
                .target
                .as_deref()
                .and_then(|t| crate::mailbox::queued::text_of(home, t, &r.request_id)),
            _ => None,
        };
    }
    for r in rows.iter_mut() {
        if let Some(t) = r.text.as_mut() {
            let b = body_of(t);
            if b.len() != t.len() {
                *t = b.to_string();
            }
        }
    }
    rows
}

fn new_titles(home: &Path) -> Titles<'_> {
    Titles {
        home,
        memo: HashMap::new(),
    }
}

/// The ledger's requests (one per request id, oldest first), the newest [`index::MAX_ROWS`] of them.
fn source_requests(home: &Path) -> Result<Vec<(String, i64, Entry)>, ledger::LedgerError> {
    let read = ledger::read_ledger(home, &Filter::default())?;
    let mut grouped = group(&read.entries);
    let keep = index::MAX_ROWS as usize;
    if grouped.len() > keep {
        grouped.drain(..grouped.len() - keep);
    }
    Ok(grouped)
}

/// The whole derivation: the rows the index must hold for `home` now, oldest first (by the ledger's
/// order). An unreadable ledger is an error (the index is then left as it is).
pub fn fold(home: &Path) -> Result<Vec<Row>, ledger::LedgerError> {
    let grouped = source_requests(home)?;
    let mut titles = new_titles(home);
    Ok(derive(home, &mut titles, &grouped))
}

/// How far a rebuild is: rows written of how many (`total` 0: the ledger is still being read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
}

/// What a pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Synced {
    /// Brought up to date: this many rows changed.
    Incremental(usize),
    /// Rebuilt from the source, for this reason.
    Rebuilt(String),
    /// A rebuild is under way (another process's, or this one's in the background): the index holds
    /// the newest rows written so far; nothing was changed.
    Building(Progress),
    /// It must be rebuilt, for this reason; the caller starts the rebuild (in the background).
    Stale(String),
}

fn ledger_error(e: ledger::LedgerError) -> IndexError {
    IndexError::Io(std::io::Error::other(e.to_string()))
}

/// Fill `ix` (empty, or holding rows of this same source) from the source, newest first, in chunks:
/// [`FIRST_CHUNK`] rows, then [`CHUNK`] at a time, each one write transaction that also seals a
/// `building` marker with the total, so a reader (of this process or another) sees the newest rows at
/// once and how far the rebuild is; the watermark is sealed last. `pause` between chunks.
fn build(
    home: &Path,
    ix: &mut Index,
    pause: std::time::Duration,
    mut progress: impl FnMut(Progress),
) -> Result<(), IndexError> {
    // the live file's identity first: lines appended while the rebuild reads are read again next time
    // (an upsert of the same row changes nothing)
    let ledger_now = identity(&ledger::path(home));
    let marker = |total: u64| {
        serde_json::to_string(&Source {
            v: DERIVE_VERSION,
            ledger: None,
            offset: 0,
            building: Some(Building {
                total,
                at: base::clock::now_ms(),
            }),
        })
        .unwrap_or_default()
    };
    ix.upsert(&[], Some(&marker(0)))?;
    let grouped = source_requests(home).map_err(ledger_error)?;
    let total = grouped.len() as u64;
    ix.upsert(&[], Some(&marker(total)))?;
    progress(Progress { done: 0, total });
    let mut titles = new_titles(home);
    let mut end = grouped.len();
    let mut n = FIRST_CHUNK;
    while end > 0 {
        let start = end.saturating_sub(n);
        let rows = derive(home, &mut titles, &grouped[start..end]);
        // row ids in the ledger's order whatever the order written (a search walks them newest first)
        ix.upsert_at(&rows, Some(start as i64 + 1), Some(&marker(total)))?;
        progress(Progress {
            done: (grouped.len() - start) as u64,
            total,
        });
        end = start;
        n = CHUNK;
        if end > 0 && !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
    let src = Source {
        v: DERIVE_VERSION,
        offset: ledger_now
            .as_ref()
            .map_or(0, |l| complete_len(&ledger::path(home), l.len)),
        ledger: ledger_now,
        building: None,
    };
    ix.upsert(&[], Some(&serde_json::to_string(&src).unwrap_or_default()))?;
    ix.compact()?;
    Ok(())
}

/// A rebuild on this thread: every row of `ix` goes, then [`build`] without pauses.
fn rebuild(home: &Path, ix: &mut Index, why: &str) -> Result<Synced, IndexError> {
    if ix.state()?.rows > 0 {
        ix.replace_all(&[], "")?;
    }
    build(home, ix, std::time::Duration::ZERO, |_| {})?;
    Ok(Synced::Rebuilt(why.to_string()))
}

/// The length of `path`'s first `len` bytes up to the end of their last complete line.
fn complete_len(path: &Path, len: u64) -> u64 {
    let Ok((mut f, _)) = base::fsafe::open_regular(path, base::fsafe::Follow::No, None) else {
        return 0;
    };
    let back = len.min(ledger::LINE_CAP as u64 + 1);
    let mut buf = vec![0u8; back as usize];
    use std::io::{Read, Seek, SeekFrom};
    if f.seek(SeekFrom::Start(len - back)).is_err() || f.read_exact(&mut buf).is_err() {
        return 0;
    }
    match memchr::memrchr(b'\n', &buf) {
        Some(i) => len - back + i as u64 + 1,
        None => 0,
    }
}

/// Bring `ix` up to date with `home`'s ledger and logs (see the module's doc), on this thread: a
/// rebuild too. `opened`: how the file was found when this process opened it (a new or replaced one is
/// rebuilt).
pub fn sync(
    home: &Path,
    ix: &mut Index,
    opened: Option<&Opened>,
    look: bool,
) -> Result<Synced, IndexError> {
    match sync_in(home, ix, opened, look)? {
        Synced::Stale(why) => rebuild(home, ix, &why),
        s => Ok(s),
    }
}

/// [`sync`], but a rebuild it needs is returned as [`Synced::Stale`] for the caller to start.
fn sync_in(
    home: &Path,
    ix: &mut Index,
    opened: Option<&Opened>,
    look: bool,
) -> Result<Synced, IndexError> {
    match opened {
        Some(Opened::Created) => return Ok(Synced::Stale("missing".into())),
        Some(Opened::Replaced(a)) => return Ok(Synced::Stale(a.to_string())),
        _ => {}
    }
    let state = ix.state()?;
    let src: Option<Source> = serde_json::from_str(&state.source).ok();
    if let Some(b) = src.as_ref().and_then(|s| s.building) {
        if base::clock::now_ms().saturating_sub(b.at) < BUILD_STALE_MS {
            return Ok(Synced::Building(Progress {
                done: state.rows,
                total: b.total,
            }));
        }
    }
    let (files, live) = match to_read(home, src.as_ref()) {
        Ok(r) => r,
        Err(why) => {
            return Ok(Synced::Stale(
                if state.source.is_empty() {
                    "missing"
                } else {
                    why
                }
                .into(),
            ));
        }
    };
    let mut titles = new_titles(home);
    // the ledger's lines appended since the watermark
    let mut entries = Vec::new();
    let mut offset = 0;
    for (p, from) in &files {
        let (mut got, end) = ledger::read_tail(p, *from).map_err(IndexError::Io)?;
        entries.append(&mut got);
        offset = end;
    }
    let grouped = group(&entries);
    let mut seen: HashSet<String> = grouped.iter().map(|(r, _, _)| r.clone()).collect();
    let mut rows = derive(home, &mut titles, &grouped);
    // A request seen again through a later line alone (a second line past the slack): keep what the
    // index knew of its first.
    for r in rows.iter_mut() {
        if let Some(old) = ix.get(&r.request_id)? {
            if old.time < r.time {
                r.time = old.time;
            }
            r.sender = r.sender.take().or(old.sender);
            r.target = r.target.take().or(old.target);
            r.mode = r.mode.take().or(old.mode);
            r.chain = r.chain.take().or(old.chain);
            r.sender_title = r.sender_title.take().or(old.sender_title);
            r.target_title = r.target_title.take().or(old.target_title);
            r.sender_machine = r.sender_machine.take().or(old.sender_machine);
            r.target_machine = r.target_machine.take().or(old.target_machine);
        }
    }
    // mail that can still move, looked at again: the newest few on every pass, then the others in turn
    // from where the last pass stopped, while the pass's budget lasts
    let started = std::time::Instant::now();
    let as_entry = |r: index::Row| {
        let mut e = Entry::new(
            r.time,
            r.sender.as_deref(),
            r.target.as_deref(),
            &r.tool,
            r.mode.as_deref(),
            Some(&r.request_id),
            LedgerOutcome::Accepted,
            None,
        );
        e.hop = r.hop;
        e.chain = r.chain.clone();
        // the row's machines stay: a message to a linked machine is rechecked on every pass (its fate
        // here is unknown), and a row derived without them would lose where it went
        e.from_machine = r.sender_machine.clone();
        e.to_machine = r.target_machine.clone();
        (r.request_id.clone(), r.time, e)
    };
    let mut looked = 0usize;
    let mut recheck = |ids: Vec<(String, i64, i64)>,
                       rows: &mut Vec<Row>|
     -> Result<Option<(i64, i64)>, IndexError> {
        for (rid, time, id) in ids {
            if looked > 0 && started.elapsed() > RECHECK_BUDGET {
                // the next pass goes on with this one
                return Ok(Some((time, id.saturating_add(1))));
            }
            if seen.insert(rid.clone()) {
                if let Some(r) = ix.get(&rid)? {
                    looked += 1;
                    rows.extend(derive(home, &mut titles, &[as_entry(r)]));
                }
            }
        }
        Ok(None)
    };
    if look {
        recheck(
            ix.open_rows(&open_fates(), None, RECHECK_NEWEST)?,
            &mut rows,
        )?;
        let cursor = {
            let c = CURSORS.lock().unwrap_or_else(|p| p.into_inner());
            c.iter().find(|(h, _)| h == home).and_then(|(_, c)| *c)
        };
        let batch = ix.open_rows(&open_fates(), cursor, RECHECK)?;
        let full = batch.len() == RECHECK;
        let tail = batch.last().map(|(_, t, i)| (*t, *i));
        let stopped = recheck(batch, &mut rows)?;
        // where the next pass goes on: where this one's budget ran out, else after this batch, else
        // (all of them seen) from the newest again
        let next = stopped.or(if full { tail } else { None });
        let mut c = CURSORS.lock().unwrap_or_else(|p| p.into_inner());
        match c.iter_mut().find(|(h, _)| h == home) {
            Some((_, x)) => *x = next,
            None => c.push((home.to_path_buf(), next)),
        }
    }
    let src = Source {
        v: DERIVE_VERSION,
        // the live file read to its last complete line (no file: nothing read)
        offset: if files.is_empty() { 0 } else { offset },
        ledger: live,
        building: None,
    };
    let n = ix.upsert(
        &rows,
        Some(&serde_json::to_string(&src).unwrap_or_default()),
    )?;
    Ok(Synced::Incremental(n))
}

/// This process's open indexes (one per home; a connection is used by one thread at a time): the
/// routes' (`OPEN`), and the background passes' (`BACKGROUND`: a pass that looks at open mail again, or
/// rebuilds, never holds a route's connection).
static OPEN: Mutex<Vec<(PathBuf, Index)>> = Mutex::new(Vec::new());
static BACKGROUND: Mutex<Vec<(PathBuf, Index)>> = Mutex::new(Vec::new());

fn status(
    ix: &Index,
    rebuilt: Option<String>,
    error: Option<String>,
    building: Option<Progress>,
) -> IndexStatus {
    IndexStatus {
        rows: ix.state().map(|s| s.rows).unwrap_or(0),
        rebuilt,
        error,
        building: building.map(|p| super::IndexBuilding {
            done: p.done,
            total: p.total,
        }),
    }
}

/// Open `home`'s index (kept open for the process), bring it up to date, and run `f` on it. A row that
/// does not verify moves the file aside and the index is rebuilt and asked again, once. The routes'
/// path: the ledger's new lines are indexed before `f` reads; open mail is looked at again on the
/// blocking pool after it (at most once a second), so a read never waits for the logs' folds — the
/// fates it moves show on the next read. A rebuild runs on a thread of its own, in chunks, newest
/// first ([`build`]): `f` reads what is indexed so far and the status says `building`. Without a
/// runtime (tests, the command line) the look and a rebuild are made before `f`, on this thread.
pub fn with_index<T>(
    home: &Path,
    f: impl Fn(&Index) -> Result<T, IndexError>,
) -> (Option<T>, IndexStatus) {
    let due = recheck_due(home);
    let runtime = tokio::runtime::Handle::try_current().is_ok();
    let r = with_index_in(&OPEN, home, due && !runtime, runtime, f);
    if due && runtime && r.1.building.is_none() {
        schedule(home, true);
    }
    r
}

/// Rebuilds running in this process (their own thread each), by home, and how far they are.
static BUILDS: Mutex<Vec<(PathBuf, Progress)>> = Mutex::new(Vec::new());
/// The last background rebuild that failed, by home: why, and when (ms). Another starts after
/// [`BUILD_RETRY_MS`].
static BUILD_FAILED: Mutex<Vec<(PathBuf, String, i64)>> = Mutex::new(Vec::new());
/// How long a failed background rebuild is reported before the next pass tries again.
pub const BUILD_RETRY_MS: i64 = 10_000;

fn building_here(home: &Path) -> Option<Progress> {
    BUILDS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|(h, _)| h == home)
        .map(|(_, p)| *p)
}

fn set_progress(home: &Path, p: Progress) {
    let mut b = BUILDS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, x)) = b.iter_mut().find(|(h, _)| h == home) {
        *x = p;
    }
}

/// Start rebuilding `home`'s index on a thread of its own (at a lower priority than the host's, where
/// the system allows it), unless one runs here already. `clear`: the file holds rows of a source that
/// is gone — moved aside first, so the page shows the new rows as they come, never the old ones.
fn start_build(home: &Path, clear: bool) -> Result<Progress, String> {
    {
        let failed = BUILD_FAILED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, e, at)) = failed.iter().find(|(h, _, _)| h == home) {
            if base::clock::now_ms().saturating_sub(*at) < BUILD_RETRY_MS {
                return Err(e.clone());
            }
        }
    }
    {
        let mut b = BUILDS.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, p)) = b.iter().find(|(h, _)| h == home) {
            return Ok(*p);
        }
        b.push((home.to_path_buf(), Progress::default()));
    }
    let h = home.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("dsh-mail-index".into())
        .spawn(move || {
            lower_priority();
            let r = (|| -> Result<(), IndexError> {
                let (mut ix, _) = Index::open(&h)?;
                if clear && ix.state().map(|s| s.rows).unwrap_or(0) > 0 {
                    ix = ix.clear()?;
                }
                build(&h, &mut ix, CHUNK_PAUSE, |p| set_progress(&h, p))
            })();
            let mut failed = BUILD_FAILED.lock().unwrap_or_else(|p| p.into_inner());
            failed.retain(|(x, _, _)| x != &h);
            if let Err(e) = r {
                failed.push((h.clone(), e.to_string(), base::clock::now_ms()));
            }
            drop(failed);
            BUILDS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|(x, _)| x != &h);
        });
    match spawned {
        Ok(_) => Ok(Progress::default()),
        Err(e) => {
            BUILDS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|(x, _)| x != home);
            Err(format!("mail index: no thread for the rebuild ({e})"))
        }
    }
}

/// The rebuild's thread yields the CPU to the host's (Linux: a thread's nice value is its own).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority take no pointers; they change only this thread's nice value.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

fn with_index_in<T>(
    map: &Mutex<Vec<(PathBuf, Index)>>,
    home: &Path,
    look: bool,
    background: bool,
    f: impl Fn(&Index) -> Result<T, IndexError>,
) -> (Option<T>, IndexStatus) {
    let mut open = map.lock().unwrap_or_else(|p| p.into_inner());
    // a connection to a file moved aside or replaced since (by another connection or process) is dropped
    open.retain(|(h, ix)| h != home || ix.is_current());
    let mut opened = None;
    let pos = match open.iter().position(|(h, _)| h == home) {
        Some(i) => i,
        None => match Index::open(home) {
            Ok((ix, o)) => {
                opened = Some(o);
                open.push((home.to_path_buf(), ix));
                open.len() - 1
            }
            Err(e) => {
                return (
                    None,
                    IndexStatus {
                        error: Some(e.to_string()),
                        ..IndexStatus::default()
                    },
                )
            }
        },
    };
    let mut rebuilt = None;
    let mut error = None;
    let mut building = None;
    for attempt in 0..2 {
        let ix = &mut open[pos].1;
        // a rebuild of this process is writing the file: read what it has written so far
        let here = if background {
            building_here(home)
        } else {
            None
        };
        let synced = match here {
            Some(p) => Ok(Synced::Building(p)),
            None if background => sync_in(home, ix, opened.as_ref(), look),
            None => sync(home, ix, opened.as_ref(), look),
        };
        match synced {
            Ok(Synced::Rebuilt(why)) => rebuilt = Some(why),
            Ok(Synced::Incremental(_)) => {}
            Ok(Synced::Building(p)) => building = Some(p),
            Ok(Synced::Stale(why)) => {
                let fresh = matches!(opened, Some(Opened::Created | Opened::Replaced(_)));
                match start_build(home, !fresh) {
                    Ok(p) => {
                        building = Some(p);
                        rebuilt = Some(why);
                    }
                    Err(e) => error = Some(e),
                }
            }
            Err(IndexError::Forged(w)) if attempt == 0 => {
                if discard(&mut open, pos, w).is_err() {
                    break;
                }
                opened = Some(Opened::Replaced(Aside::Forged(w)));
                continue;
            }
            Err(e) => error = Some(e.to_string()),
        }
        let ix = &open[pos].1;
        match f(ix) {
            Ok(v) => return (Some(v), status(ix, rebuilt, error, building)),
            Err(IndexError::Forged(w)) if attempt == 0 => {
                if discard(&mut open, pos, w).is_err() {
                    break;
                }
                opened = Some(Opened::Replaced(Aside::Forged(w)));
            }
            Err(e) => {
                let st = status(ix, rebuilt, Some(e.to_string()), building);
                return (None, st);
            }
        }
    }
    // the index could not be opened again: forget it, the next call opens it afresh
    if pos < open.len() && open[pos].0 == home {
        open.remove(pos);
    }
    (
        None,
        IndexStatus {
            rebuilt,
            error: error.or_else(|| Some("mail index: could not be rebuilt".into())),
            ..IndexStatus::default()
        },
    )
}

fn discard(
    open: &mut Vec<(PathBuf, Index)>,
    pos: usize,
    w: &'static str,
) -> Result<(), IndexError> {
    let (h, ix) = open.remove(pos);
    let (ix, _) = ix.discard(Aside::Forged(w))?;
    open.insert(pos, (h, ix));
    Ok(())
}

/// Forget this process's open index of `home` (tests: the next call opens the file afresh, as a new
/// process would).
pub fn forget(home: &Path) {
    for map in [&OPEN, &BACKGROUND] {
        let mut open = map.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|(h, _)| h != home);
    }
    RECHECKED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|(h, _)| h != home);
}

static RUNNING: AtomicBool = AtomicBool::new(false);
/// Homes waiting for a background pass, and whether it looks at open mail again.
static PENDING: Mutex<Vec<(PathBuf, bool)>> = Mutex::new(Vec::new());
/// When this process's last background pass started.
static LAST_PASS: Mutex<Option<std::time::Instant>> = Mutex::new(None);

/// Background passes start at most this often per process. Every send nudges one; a pass reads the
/// ledger's new lines, looks their targets up (logs, mailbox, presence) and writes one transaction into
/// the home's shared WAL — ~150 system calls in a sending process, more than the send's own checks — so
/// a burst of sends makes one pass for the lines it wrote meanwhile, not one each (bench/README.md, run
/// B). The page's reads bring the index up to date themselves (`with_index`): nothing waits for a pass.
pub const PASS_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// Mail moved in `home` (a send was recorded): bring its index up to date on the blocking pool, after
/// the caller's result. Returns at once; one pass runs at a time, at most one starts every
/// [`PASS_EVERY`] (the first at once), and nudges meanwhile make one more.
/// Without a tokio runtime (the command line) it does nothing: the page's next read catches up.
pub fn nudge(home: &Path) {
    if tokio::runtime::Handle::try_current().is_ok() {
        schedule(home, recheck_due(home));
    }
}

/// A background pass for `home` (looking at open mail again when `look`), on the blocking pool.
fn schedule(home: &Path, look: bool) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    {
        let mut p = PENDING.lock().unwrap_or_else(|p| p.into_inner());
        match p.iter_mut().find(|(h, _)| h == home) {
            Some((_, l)) => *l |= look,
            None => p.push((home.to_path_buf(), look)),
        }
    }
    if RUNNING.swap(true, Ordering::AcqRel) {
        return;
    }
    start(&rt);
}

/// Holds [`RUNNING`] for passes not started yet: dropped unrun (their runtime shut down while they
/// waited), it lets the next nudge start them.
struct Held(bool);

impl Drop for Held {
    fn drop(&mut self) {
        if self.0 {
            RUNNING.store(false, Ordering::Release);
        }
    }
}

/// Start the pending passes (the caller holds [`RUNNING`]): at once when none started in the last
/// [`PASS_EVERY`], else when that time is up (waiting on the runtime's timer, not a blocking thread).
fn start(rt: &tokio::runtime::Handle) {
    let wait = LAST_PASS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .map_or(std::time::Duration::ZERO, |t| {
            PASS_EVERY.saturating_sub(t.elapsed())
        });
    let held = Held(true);
    let run = move || {
        let mut held = held;
        held.0 = false;
        passes();
    };
    if wait.is_zero() {
        drop(rt.spawn_blocking(run));
    } else {
        drop(rt.spawn(async move {
            tokio::time::sleep(wait).await;
            drop(tokio::task::spawn_blocking(run));
        }));
    }
}

/// Run the pending passes (on the blocking pool, holding [`RUNNING`]); nudges that came meanwhile
/// start the next ones [`PASS_EVERY`] after.
fn passes() {
    *LAST_PASS.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
    let homes = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|p| p.into_inner()));
    for (h, look) in &homes {
        // no ledger (never sent, or the plugin's folder was removed since the nudge): nothing to index,
        // and a late pass must not make the folder again
        if std::fs::symlink_metadata(ledger::path(h)).is_err() {
            continue;
        }
        #[cfg(test)]
        tests_support::count_pass(h);
        let _ = with_index_in(&BACKGROUND, h, *look, true, |_| Ok(()));
    }
    RUNNING.store(false, Ordering::Release);
    let more = !PENDING.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
    if more && !RUNNING.swap(true, Ordering::AcqRel) {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => start(&rt),
            Err(_) => RUNNING.store(false, Ordering::Release),
        }
    }
}

/// Background passes run per home (tests: a burst of nudges makes few).
#[cfg(test)]
pub mod tests_support {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    static PASSES: Mutex<Vec<(PathBuf, usize)>> = Mutex::new(Vec::new());

    pub(super) fn count_pass(home: &Path) {
        let mut p = PASSES.lock().unwrap_or_else(|p| p.into_inner());
        match p.iter_mut().find(|(h, _)| h == home) {
            Some((_, n)) => *n += 1,
            None => p.push((home.to_path_buf(), 1)),
        }
    }

    /// The background passes this process ran for `home`.
    pub fn passes(home: &Path) -> usize {
        let p = PASSES.lock().unwrap_or_else(|p| p.into_inner());
        p.iter().find(|(h, _)| h == home).map_or(0, |(_, n)| *n)
    }
}
