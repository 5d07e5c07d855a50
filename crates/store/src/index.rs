//! The incremental index: one cached fold per log file, keyed by the file's identity
//! (dev/ino where available) + size + mtime. A grown log is read only from the byte after its
//! last complete frame; an unchanged one is not read at all. A cold scan spreads over the cores.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use crate::brief::{self, Brief, Resume};
use crate::checkpoint;
use crate::error::ReadError;
use crate::fold::Fold;
use crate::layout::{self, file_key, LogFile, SessionDir, WalkItem};
use crate::log::{continue_fold, Scratch};
use crate::watch::WatchOff;

/// Most logs the in-process cache of full folds remembers (least recently used ones go first).
const CACHE_CAP: usize = 2048;
/// Most briefs (header + title, a few hundred bytes each) remembered: sized for homes with tens of
/// thousands of sessions (every subagent is one), so a warm listing of 20,000 stays two `stat`s each
/// instead of turning cold past the fold cache's size.
const BRIEF_CAP: usize = 65_536;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Ident {
    key: Option<(u64, u64)>,
    size: u64,
    mtime: Option<SystemTime>,
}

impl Ident {
    fn of(meta: &fs::Metadata) -> Ident {
        Ident {
            key: file_key(meta),
            size: meta.len(),
            mtime: meta.modified().ok(),
        }
    }

    /// The same file as `was` (a known identity), longer: an append.
    fn grew_from(&self, was: &Ident) -> bool {
        was.key.is_some() && was.key == self.key && self.size > was.size
    }
}

struct Entry {
    ident: Ident,
    /// State at the end of the last complete frame: what a later read resumes from.
    committed: Arc<Fold>,
    /// What readers see: `committed` plus the complete lines of a torn last frame, if any.
    view: Arc<Fold>,
    used: u64,
    /// When `committed` stopped at the decode budget: what a read gets instead ([`read_beside`]).
    beside: Option<Beside>,
}

/// A read's answer beside a full fold that stopped at the decode budget: the window fold of the
/// log as it was at `ident` (committed, view), or None when the window declined for it.
struct Beside {
    ident: Ident,
    fold: Option<(Arc<Fold>, Arc<Fold>)>,
}

/// A process-wide cache map, made at its first use.
struct SharedCache<K, V>(OnceLock<Mutex<HashMap<K, V>>>);

impl<K, V> SharedCache<K, V> {
    const fn new() -> Self {
        SharedCache(OnceLock::new())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, V>> {
        // A panic while holding the lock leaves a usable map (entries are replaced whole).
        self.0
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

/// Make room for `key` in a cache of at most `cap` entries: when it is full and `key` is not in it,
/// the least recently used entry (the smallest `used`) goes.
fn make_room<K, Q, V>(map: &mut HashMap<K, V>, cap: usize, key: &Q, used: impl Fn(&V) -> u64)
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq + Clone,
    Q: std::hash::Hash + Eq + ?Sized,
{
    if map.len() >= cap && !map.contains_key(key) {
        if let Some(oldest) = map
            .iter()
            .min_by_key(|(_, e)| used(e))
            .map(|(k, _)| k.clone())
        {
            map.remove::<K>(&oldest);
        }
    }
}

/// The full folds, by log path.
static CACHE: SharedCache<PathBuf, Entry> = SharedCache::new();
static TICK: AtomicU64 = AtomicU64::new(0);

/// Open a log without blocking (a FIFO swapped in after the `stat`) and only if it is regular.
/// Err: what it is instead (`fsafe`'s refusal) or the system's reason.
fn open_log(p: &std::path::Path) -> Result<File, ReadError> {
    Ok(base::fsafe::open_regular(p, base::fsafe::Follow::Yes, None)?.0)
}

/// Fold one log, reusing and extending the cached fold when the file only grew.
/// Err: a short reason (the file could not be opened or read).
pub fn load_log(log: &LogFile) -> Result<Arc<Fold>, ReadError> {
    load_log_counted(log).0
}

/// [`load_log`], also returning how many file bytes this call had to read (0 when warm).
pub fn load_log_counted(log: &LogFile) -> (Result<Arc<Fold>, ReadError>, u64) {
    counted(load_inner(log, false))
}

/// What `sessions_read` needs of one log: [`load_log`], except that a long log this process has
/// not folded, with no checkpoint, may be read from its end (`store::window`): the same surface,
/// title and last seq, without the requests ([`Fold::is_window`]). Callers that need requests use
/// [`load_log`], which never returns (nor resumes) a window fold.
pub fn load_log_for_read(log: &LogFile) -> Result<Arc<Fold>, ReadError> {
    load_log_for_read_counted(log).0
}

/// [`load_log_for_read`], also returning how many file bytes this call had to read.
pub fn load_log_for_read_counted(log: &LogFile) -> (Result<Arc<Fold>, ReadError>, u64) {
    counted(load_inner(log, true))
}

/// [`load_inner`]'s answer as the `_counted` loads give it: the fold and the bytes read (0 on an error).
fn counted(r: Result<(Arc<Fold>, u64), ReadError>) -> (Result<Arc<Fold>, ReadError>, u64) {
    match r {
        Ok((f, n)) => (Ok(f), n),
        Err(e) => (Err(e), 0),
    }
}

/// The window read of a log with no usable cache entry or checkpoint, if it applies and proves
/// its answer: (committed, view, file bytes read from the end).
fn try_window(log: &LogFile, ident: &Ident, file: &mut File) -> Option<(Fold, Option<Fold>, u64)> {
    if log.enc != crate::log::Encoding::Zstd
        || ident.size < crate::window::window_min()
        || crate::window::disabled()
    {
        return None;
    }
    // The header and title from the listing's cache when a listing saw this log as it is now
    // (no scan here: else the window finds them itself, on the frames it decodes anyway).
    let brief = {
        let map = BRIEFS.lock();
        map.get(log.path.as_os_str())
            .filter(|e| e.ident == *ident)
            .map(|e| e.brief.clone())
    };
    crate::window::read(file, ident.size, brief.as_deref())
        .ok()
        .flatten()
}

/// The cache key of a log that is a regular file: a FIFO, a device (a link to /dev/zero) or a
/// directory is never opened, never read. Shared by the fold and the brief caches.
fn regular_ident(path: &Path) -> Result<Ident, ReadError> {
    let meta = fs::metadata(path)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular);
    }
    Ok(Ident::of(&meta))
}

fn load_inner(log: &LogFile, window: bool) -> Result<(Arc<Fold>, u64), ReadError> {
    let ident = regular_ident(&log.path)?;
    let tick = TICK.fetch_add(1, Ordering::Relaxed);
    if window {
        if let Some(got) = read_beside(log, &ident, tick)? {
            return Ok(got);
        }
    }
    // A read's window fold beside a stopped full fold (`read_beside`), kept when that fold is
    // resumed here.
    let mut kept = None;
    let base = {
        let mut map = CACHE.lock();
        match map.get_mut(&log.path) {
            // A window fold is only a read's: a caller that needs the requests folds the log.
            Some(e) if !window && e.committed.is_window() => None,
            Some(e) if e.ident == ident => {
                e.used = tick;
                return Ok((e.view.clone(), 0));
            }
            // Same file, longer: an append. Resume after the last complete frame, taking the
            // cached state over when no reader holds it any more (no copy of the fold).
            Some(e) if ident.grew_from(&e.ident) && e.committed.offset <= ident.size => {
                let e = map.remove(&log.path).expect("present");
                drop(e.view);
                kept = e.beside;
                Some(Arc::try_unwrap(e.committed).unwrap_or_else(|shared| (*shared).clone()))
            }
            _ => None,
        }
    };
    let mut file = open_log(&log.path)?;
    // Not in this process's cache: a read checkpoint another process (or an earlier run) left,
    // if it checks out (`checkpoint`), else the start of the log.
    let mut from_window = None;
    let base = match base {
        Some(b) => b,
        // A window fold's checkpoint serves a read only (its requests are partial).
        None => match checkpoint::load(&log.path, ident.key, ident.size, &mut file)
            .filter(|b| window || !b.is_window())
        {
            // A full fold that stopped at the budget (another process folded the log): the read
            // takes the window beside it, as beside one this process folded.
            Some(b) if window && b.stopped && !b.is_window() => {
                match beside_checkpoint(log, &ident, b, tick)? {
                    Stopped::Read(view, read) => return Ok((view, read)),
                    Stopped::Declined(b, beside) => {
                        kept = beside;
                        *b
                    }
                }
            }
            Some(b) => b,
            None => {
                if window {
                    from_window = try_window(log, &ident, &mut file);
                }
                Fold::default()
            }
        },
    };
    // A window read walked the frame headers of the whole file (and decoded back to the last title,
    // which may be the first turn): a log that big leaves its window fold, so the next process
    // resumes it instead of reading it again (`checkpoint`, a window fold marked as one).
    let walked = from_window.as_ref().map_or(0, |_| ident.size);
    let (committed, tail, read) = match from_window {
        Some(w) => w,
        None => {
            let start = base.offset;
            let (mut committed, mut tail) = continue_fold(&mut file, log.enc, ident.size, base)?;
            let mut start = start;
            if committed.is_window() && !committed.notes.is_empty() {
                // A grown window fold met a note: its line numbers are the full fold's to give.
                (committed, tail) = continue_fold(&mut file, log.enc, ident.size, Fold::default())?;
                start = 0;
            }
            (committed, tail, ident.size.saturating_sub(start))
        }
    };
    if read.max(walked) >= checkpoint::persist_min() {
        checkpoint::save(&log.path, ident.key, &mut file, &committed);
    }
    let committed = Arc::new(committed);
    let view = match tail {
        Some(t) => Arc::new(t),
        None => committed.clone(),
    };
    let mut map = CACHE.lock();
    make_room(&mut map, CACHE_CAP, &log.path, |e| e.used);
    // Still a stopped full fold: the read's window fold beside it stays (`read_beside` checks it
    // against the file as it is).
    let beside = kept
        .or_else(|| map.get_mut(&log.path).and_then(|e| e.beside.take()))
        .filter(|_| committed.stopped && !committed.is_window());
    map.insert(
        log.path.clone(),
        Entry {
            ident,
            committed,
            view: view.clone(),
            used: tick,
            beside,
        },
    );
    Ok((view, read))
}

/// A read that finds no cached fold but the checkpoint of a full fold that stopped at the decode
/// budget (`b`, of the log as it was at `b.offset`; another process folded it, `load_log`): cached
/// as this process's `load_log` would have left it, then the read takes the window beside it
/// ([`read_beside`]) — what a read gets beside a stopped fold this process folded. The checkpoint
/// stays the full fold's.
fn beside_checkpoint(
    log: &LogFile,
    ident: &Ident,
    b: Fold,
    tick: u64,
) -> Result<Stopped, ReadError> {
    // The log as the checkpoint saw it: the file now when that is its size (the checkpoint's
    // digests checked it), else an earlier size of it (`load_log` then resumes over the append).
    let at = if b.offset == ident.size {
        ident.clone()
    } else {
        Ident {
            key: ident.key,
            size: b.offset,
            mtime: None,
        }
    };
    let b = Arc::new(b);
    {
        let mut map = CACHE.lock();
        if !map.contains_key(&log.path) {
            make_room(&mut map, CACHE_CAP, &log.path, |e| e.used);
            map.insert(
                log.path.clone(),
                Entry {
                    ident: at,
                    committed: b.clone(),
                    view: b.clone(),
                    used: tick,
                    beside: None,
                },
            );
        }
    }
    if let Some((view, read)) = read_beside(log, ident, tick)? {
        return Ok(Stopped::Read(view, read));
    }
    let beside = {
        let mut map = CACHE.lock();
        let ours = map
            .get(&log.path)
            .is_some_and(|e| Arc::ptr_eq(&e.committed, &b));
        if ours {
            map.remove(&log.path).and_then(|e| e.beside)
        } else {
            None
        }
    };
    let b = Arc::try_unwrap(b).unwrap_or_else(|shared| (*shared).clone());
    Ok(Stopped::Declined(Box::new(b), beside))
}

/// What [`beside_checkpoint`] got.
enum Stopped {
    /// The read's window fold (view, file bytes read).
    Read(Arc<Fold>, u64),
    /// The window declines: the stopped fold back (the read takes it, resumed over what was
    /// appended, as a read beside a cached stopped fold does), with what the read noted beside it.
    Declined(Box<Fold>, Option<Beside>),
}

/// A read of a log whose cached full fold stopped at the decode budget (this process folded it
/// whole for a caller that needs the requests, `load_log`): that fold misses what the log holds
/// past the budget, and a read from the end, bounded by its own budgets, answers what it holds
/// now — the answer the read gives when no full fold is cached. So the read takes the window:
/// kept beside the full fold (which stays for the callers that need the requests: a 2 GiB fold
/// is not redone for them), resumed over appends like any cached window fold, never persisted
/// (the checkpoint stays the full fold's). A fresh process that finds such a fold's checkpoint
/// caches it first ([`beside_checkpoint`]). None: no such fold is cached, or the window declines
/// (a grown window fold met a note, no checkpoint ends its walk, …): the read takes the cached
/// fold as before.
fn read_beside(
    log: &LogFile,
    ident: &Ident,
    tick: u64,
) -> Result<Option<(Arc<Fold>, u64)>, ReadError> {
    let grown = {
        let mut map = CACHE.lock();
        let Some(e) = map
            .get_mut(&log.path)
            .filter(|e| e.committed.stopped && !e.committed.is_window())
        else {
            return Ok(None);
        };
        match &e.beside {
            Some(b) if b.ident == *ident => {
                e.used = tick;
                return Ok(b.fold.as_ref().map(|(_, v)| (v.clone(), 0)));
            }
            Some(b) if ident.grew_from(&b.ident) => b.fold.as_ref().map(|(c, _)| c.clone()),
            _ => None,
        }
    };
    let mut file = open_log(&log.path)?;
    let resumed = match grown {
        Some(c) if c.offset <= ident.size => {
            let start = c.offset;
            let (c, t) = continue_fold(&mut file, log.enc, ident.size, (*c).clone())?;
            // A note in the appended part: its line numbers are the full fold's to give.
            c.notes
                .is_empty()
                .then(|| (c, t, ident.size.saturating_sub(start)))
        }
        _ => None,
    };
    let got = resumed.or_else(|| try_window(log, ident, &mut file));
    let read = got.as_ref().map_or(0, |(_, _, n)| *n);
    let fold = got.map(|(c, t, _)| {
        let c = Arc::new(c);
        let v = t.map_or_else(|| c.clone(), Arc::new);
        (c, v)
    });
    let mut map = CACHE.lock();
    if let Some(e) = map.get_mut(&log.path).filter(|e| e.committed.stopped) {
        e.used = tick;
        e.beside = Some(Beside {
            ident: ident.clone(),
            fold: fold.clone(),
        });
    }
    Ok(fold.map(|(_, v)| (v, read)))
}

// ---- briefs: what a listing needs (header, title), cached apart from the full folds ----

struct BriefEntry {
    ident: Ident,
    brief: Arc<Brief>,
    /// Where a scan of the grown file starts again, from the state `brief` (None: from the
    /// start). `brief::scan` resumes from the brief it returned, so only the offset is kept (not
    /// a second copy of the brief: ~20 % of a 20,000-session listing's memory).
    resume_at: Option<u64>,
    used: u64,
}

/// The briefs, by log path.
static BRIEFS: SharedCache<OsString, BriefEntry> = SharedCache::new();

thread_local! {
    /// Per-thread decoding buffers, reused across the logs one worker scans.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// The brief of one log (header, title), reusing the cached one when the file is unchanged (one
/// `stat`) and scanning only the new frames when it only grew. Err: a short reason.
pub fn load_brief(log: &LogFile) -> Result<Arc<Brief>, ReadError> {
    load_brief_counted(log).0
}

/// [`load_brief`], also returning the offset the scan started at (`None` when it was a cache hit).
pub fn load_brief_counted(log: &LogFile) -> (Result<Arc<Brief>, ReadError>, Option<u64>) {
    match brief_inner(log) {
        Ok((b, from, _)) => (Ok(b), from),
        Err(e) => (Err(e), None),
    }
}

fn brief_inner(log: &LogFile) -> Result<(Arc<Brief>, Option<u64>, Ident), ReadError> {
    // A log this cache has not seen is read in any case: open it and `fstat` the descriptor (no
    // `stat` by path first: one path walk fewer per session on a cold listing). The walk only
    // offers names whose directory entry is a regular file; `open_regular` never blocks (a FIFO
    // swapped in meanwhile) and refuses what is not regular. A known log costs one `stat`.
    let known = BRIEFS.lock().contains_key(log.path.as_os_str());
    let (ident, mut opened) = if known {
        (regular_ident(&log.path)?, None)
    } else {
        let (f, meta) = base::fsafe::open_regular(&log.path, base::fsafe::Follow::Yes, None)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => ReadError::NotRegular,
                _ => e.into(),
            })?;
        (Ident::of(&meta), Some(f))
    };
    let tick = TICK.fetch_add(1, Ordering::Relaxed);
    let base = {
        let mut map = BRIEFS.lock();
        match map.get_mut(log.path.as_os_str()) {
            Some(e) if e.ident == ident => {
                e.used = tick;
                return Ok((e.brief.clone(), None, ident));
            }
            Some(e) if ident.grew_from(&e.ident) => e
                .resume_at
                .filter(|&offset| offset <= ident.size)
                .map(|offset| Resume {
                    offset,
                    brief: (*e.brief).clone(),
                }),
            _ => None,
        }
    };
    let from = base.as_ref().map_or(0, |r| r.offset);
    let mut file = match opened.take() {
        Some(f) => f,
        None => open_log(&log.path)?,
    };
    let (b, resume) = SCRATCH.with(|sc| {
        let mut sc = sc.borrow_mut();
        let out = brief::scan(&mut file, log.enc, ident.size, base.as_ref(), &mut sc);
        sc.trim();
        out
    })?;
    let b = Arc::new(b);
    let mut map = BRIEFS.lock();
    make_room(&mut map, BRIEF_CAP, log.path.as_os_str(), |e| e.used);
    map.insert(
        log.path.as_os_str().to_owned(),
        BriefEntry {
            ident: ident.clone(),
            brief: b.clone(),
            resume_at: resume.map(|r| r.offset),
            used: tick,
        },
    );
    Ok((b, Some(from), ident))
}

/// One session directory after a brief scan.
#[derive(Debug, Clone)]
pub struct Briefed {
    pub dir: PathBuf,
    pub log: Option<LogFile>,
    pub brief: Result<Arc<Brief>, ReadError>,
}

/// Run `f` over `items` on up to 8 threads (the available cores), results in input order.
fn parallel<T: Sync, U: Send>(items: &[T], f: impl Fn(&T) -> U + Sync) -> Vec<U> {
    let n = items.len();
    let workers = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .clamp(1, 8)
        .min(n.max(1));
    if workers <= 1 || n < 4 {
        return items.iter().map(f).collect();
    }
    let slots: Vec<Mutex<Option<U>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        let u = f(&items[i]);
        *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(u);
    };
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(work);
        }
    });
    slots
        .into_iter()
        .filter_map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .collect()
}

/// [`parallel`] over owned items (each handed to `f` once).
fn parallel_owned<T: Send, U: Send>(items: Vec<T>, f: impl Fn(T) -> U + Sync) -> Vec<U> {
    let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    parallel(&slots, |s| {
        let t = s.lock().unwrap_or_else(|p| p.into_inner()).take();
        f(t.expect("each slot is taken once"))
    })
}

/// Walk and brief-scan every session under `home`: the directory `stat`s and the briefs run
/// on the available cores; the result (and the notes) come in walk order.
pub fn scan_briefs(home: &Path, notes: &mut Vec<super::StoreNote>) -> Vec<Briefed> {
    let items = layout::walk_items(home);
    let done: Vec<Option<(layout::Visited, Loaded)>> = parallel(&items, |item| {
        let v = layout::visit(item.dir()?);
        let b = v.log().map(|log| {
            std::panic::catch_unwind(|| load_brief(log)).unwrap_or(Err(ReadError::Panicked))
        });
        Some((v, b))
    });
    let (visited, mut briefs): (Vec<Option<layout::Visited>>, Vec<Loaded>) = done
        .into_iter()
        .map(|d| d.map_or((None, None), |(v, b)| (Some(v), b)))
        .unzip();
    layout::assemble(items, visited, notes)
        .into_iter()
        .map(|(i, d)| Briefed {
            brief: briefs[i].take().unwrap_or(Err(ReadError::NoLog)),
            dir: d.dir,
            log: d.log,
        })
        .collect()
}

// ---- the listing memo: a warm listing without a `stat` per session ----

/// A listing re-checks a session it remembers (its folder and its log: two `stat`s) at most this
/// long after it last checked it, unless the session can change right now (see
/// [`list_cached`]). The staleness bound of a listing for a log appended by a writer that
/// publishes no presence.
pub const LIST_STALE: Duration = Duration::from_secs(2);
/// A log modified this recently belongs to a session that is probably running: re-checked on
/// every listing.
pub const LIST_RECENT: Duration = Duration::from_secs(60);
/// How long a memo whose watch was asked for waits for the watcher's check before the 2 s rule
/// applies again (the check normally answers within a second of the listing that asked; under a
/// heavy load, or for tens of thousands of folders, later: without this, the calls right after a
/// cold one re-checked by the 2 s rule what the watcher was about to check).
pub const LIST_PENDING: Duration = Duration::from_secs(10);
/// Homes whose listings are remembered (tests and odd setups use many; a host uses one); the
/// least recently listed goes first. (The unit tests list many homes in parallel.)
const LIST_HOMES: usize = if cfg!(test) { 64 } else { 8 };

type Loaded = Option<Result<Arc<Brief>, ReadError>>;

/// What the last listing saw of one session folder.
#[derive(Clone)]
struct Memo {
    visited: layout::Visited,
    brief: Loaded,
    /// The log's identity (size, mtime) when its brief was taken (None: no log, or unreadable).
    ident: Option<Ident>,
    /// The folder's mtime when it was last looked at, if settled (see [`layout::visit_again`]).
    dir_mtime: Option<SystemTime>,
    checked: Instant,
    /// The epoch of the home's watcher (see [`crate::watch`]) when a watch on this folder was in
    /// place before `checked` and the folder and its log can only change under it (not links, one
    /// name for the log): the memo is then current until an event marks the folder dirty. 0: not
    /// covered (swept every [`LIST_STALE`]).
    watched: u64,
    /// The epoch of the watcher asked to watch and check this folder (see [`Verified`]), its answer
    /// not in yet; 0: none. Such a memo is not swept by the 2 s rule for up to [`LIST_PENDING`]:
    /// the check will say whether it is still current (a change before it fails the check).
    asked: u64,
}

/// What a re-check found, for the built listing.
enum Change {
    /// Nothing a listing shows.
    Same,
    /// Only this brief (see [`Memo::patch_over`]).
    Patch(Arc<Brief>),
    /// Anything else: the listing is built again.
    Rebuild,
}

impl Memo {
    /// Look at one session folder now: folder `lstat`, generation pick, log `stat`, brief.
    fn check(dir: &Path, now: Instant) -> Memo {
        let (visited, dir_mtime) = layout::visit_again(dir, None);
        Memo::of(
            visited.expect("a first visit always answers"),
            dir_mtime,
            now,
        )
    }

    /// The memo of what a look at a folder found (`visited`, the folder's `dir_mtime`) `now`, its
    /// log's brief taken now.
    fn of(visited: layout::Visited, dir_mtime: Option<SystemTime>, now: Instant) -> Memo {
        let (brief, ident) = Self::brief_of(&visited);
        Memo::new(visited, brief, ident, dir_mtime, now)
    }

    /// A memo checked `now`: not covered by a watch, no watcher asked.
    fn new(
        visited: layout::Visited,
        brief: Loaded,
        ident: Option<Ident>,
        dir_mtime: Option<SystemTime>,
        now: Instant,
    ) -> Memo {
        Memo {
            visited,
            brief,
            ident,
            dir_mtime,
            checked: now,
            watched: 0,
            asked: 0,
        }
    }

    /// The folder's identity and its log pick (None: no log), when the last look found a folder
    /// with an identity and a readable pick.
    fn seen_dir(&self) -> Option<((u64, u64), Option<&LogFile>)> {
        match &self.visited {
            layout::Visited::Dir {
                key: Some(key),
                log: Ok(pick),
            } => Some((*key, pick.as_ref())),
            _ => None,
        }
    }

    fn brief_of(visited: &layout::Visited) -> (Loaded, Option<Ident>) {
        match visited.log() {
            None => (None, None),
            Some(log) => match std::panic::catch_unwind(|| brief_inner(log)) {
                Ok(Ok((b, _, ident))) => (Some(Ok(b)), Some(ident)),
                Ok(Err(e)) => (Some(Err(e)), None),
                Err(_) => (Some(Err(ReadError::Panicked)), None),
            },
        }
    }

    /// The memo of a folder the persisted index has an entry for, if the folder and its log are
    /// still exactly what the entry says (see [`crate::listindex`]): the folder a folder (not a
    /// link) of the same identity and settled mtime and ctime, its log (same name) a regular file
    /// (not a link) of the same identity, size, mtime and ctime. Two `fstatat`s.
    #[cfg(unix)]
    fn from_index(
        e: crate::listindex::Entry,
        project: &File,
        name: &std::ffi::OsStr,
        dir: &Path,
        now: Instant,
    ) -> Option<Memo> {
        let generation = e.generation;
        let enc = if e.zstd {
            crate::log::Encoding::Zstd
        } else {
            crate::log::Encoding::Plain
        };
        // the name the walk would pick from the entries of this folder (mtime unchanged: the same)
        if layout::parse_log_name(&e.log) != Some((generation, enc)) {
            return None;
        }
        let d = stat_at(project, name, None, false)?;
        let di = ident_of(&d);
        if d.st_mode & libc::S_IFMT != libc::S_IFDIR
            || di.key != Some(e.dir_key)
            || di.mtime.and_then(stamp) != Some(e.dir_mtime)
            || ctime_of(&d) != Some(e.dir_ctime)
            || !di.mtime.is_some_and(layout::settled)
        {
            return None;
        }
        let l = stat_at(project, name, Some(std::ffi::OsStr::new(&e.log)), false)?;
        let li = ident_of(&l);
        if l.st_mode & libc::S_IFMT != libc::S_IFREG
            || li.key != Some(e.log_key)
            || li.size != e.size
            || li.mtime.and_then(stamp) != Some(e.mtime)
            || ctime_of(&l) != Some(e.ctime)
        {
            return None;
        }
        let log = LogFile {
            path: dir.join(&e.log),
            enc,
            generation,
        };
        Some(Memo::new(
            layout::Visited::Dir {
                key: Some(e.dir_key),
                log: Ok(Some(log)),
            },
            Some(Ok(Arc::new(Brief::from(e.brief)))),
            Some(li),
            di.mtime,
            now,
        ))
    }

    #[cfg(not(unix))]
    fn from_index(
        _e: crate::listindex::Entry,
        _project: &File,
        _name: &std::ffi::OsStr,
        _dir: &Path,
        _now: Instant,
    ) -> Option<Memo> {
        None
    }

    /// Look at a remembered folder again. The usual answer costs two `stat`s and no lock: the
    /// folder as it was (same identity, same settled mtime: the same pick) and its log as it was
    /// (same identity, size, mtime: the same brief). `at`: the project folder, opened, and this
    /// folder's name in it: those two `stat`s then walk one or two components, not the whole path.
    fn recheck(
        dir: &Path,
        at: Option<(&File, &std::ffi::OsStr)>,
        old: Option<Memo>,
        now: Instant,
    ) -> (Memo, Change) {
        let Some(mut old) = old else {
            return (Memo::check(dir, now), Change::Rebuild);
        };
        if at.is_some_and(|(p, name)| old.unchanged_at(p, name)) {
            old.checked = now;
            return (old, Change::Same);
        }
        let (visited, dir_mtime) = layout::visit_again(dir, Some((&old.visited, old.dir_mtime)));
        let Some(visited) = visited else {
            old.dir_mtime = dir_mtime;
            old.checked = now;
            let unchanged = match (old.visited.log(), &old.ident) {
                (None, _) => true,
                (Some(log), Some(was)) => regular_ident(&log.path).is_ok_and(|i| i == *was),
                (Some(_), None) => false,
            };
            if unchanged {
                return (old, Change::Same);
            }
            let new = Memo::of(old.visited.clone(), dir_mtime, now);
            let change = new.change_from(&old);
            return (new, change);
        };
        let new = Memo::of(visited, dir_mtime, now);
        let change = new.change_from(&old);
        (new, change)
    }

    /// The fast form of [`Memo::recheck`]'s usual answer, by `fstatat` relative to the project
    /// folder: true only when the folder is a directory (not a link) with the remembered identity
    /// and settled mtime, and its log a regular file with the remembered identity, size and mtime.
    /// Anything else (or any doubt) is false, and the caller looks again by path.
    #[cfg(unix)]
    fn unchanged_at(&self, project: &File, name: &std::ffi::OsStr) -> bool {
        let Some((key, pick)) = self.seen_dir() else {
            return false;
        };
        let Some(dir_mtime) = self.dir_mtime else {
            return false;
        };
        let Some(d) = stat_at(project, name, None, false) else {
            return false;
        };
        if d.st_mode & libc::S_IFMT != libc::S_IFDIR
            || ident_of(&d).key != Some(key)
            || ident_of(&d).mtime != Some(dir_mtime)
        {
            return false;
        }
        match (pick, &self.ident) {
            (None, _) => true,
            (Some(log), Some(was)) => {
                let Some(f) = log.path.file_name() else {
                    return false;
                };
                stat_at(project, name, Some(f), true).is_some_and(|l| {
                    l.st_mode & libc::S_IFMT == libc::S_IFREG && ident_of(&l) == *was
                })
            }
            (Some(_), None) => false,
        }
    }

    #[cfg(not(unix))]
    fn unchanged_at(&self, _project: &File, _name: &std::ffi::OsStr) -> bool {
        false
    }

    /// Whether a watch on `dir` sees every change a listing shows of this memo: the folder is a
    /// folder (not a link) with the remembered identity, and its log a regular file with one name
    /// (a write through a link or another hard link is reported in the other name's folder only).
    #[cfg(unix)]
    fn watchable(&self, dir: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Some((key, pick)) = self.seen_dir() else {
            return false;
        };
        let Ok(d) = fs::symlink_metadata(dir) else {
            return false;
        };
        if !d.file_type().is_dir() || file_key(&d) != Some(key) {
            return false;
        }
        match pick {
            None => true,
            Some(log) => fs::symlink_metadata(&log.path)
                .is_ok_and(|m| m.file_type().is_file() && m.nlink() == 1),
        }
    }

    #[cfg(not(unix))]
    fn watchable(&self, _dir: &Path) -> bool {
        false
    }

    /// What [`Memo::unchanged_at`] compares, for the watcher's check after a watch lands.
    fn snap(&self) -> Option<Snap> {
        let (key, pick) = self.seen_dir()?;
        let log = match (pick, &self.ident) {
            (None, _) => None,
            (Some(l), Some(i)) => Some((l.path.clone(), i.clone())),
            (Some(_), None) => return None,
        };
        Some(Snap {
            key,
            dir_mtime: self.dir_mtime?,
            log,
        })
    }

    /// Whether [`Memo::snap`] would be `Some` (without building it).
    fn has_snap(&self) -> bool {
        self.dir_mtime.is_some()
            && self
                .seen_dir()
                .is_some_and(|(_, pick)| pick.is_none() || self.ident.is_some())
    }

    /// Whether [`Memo::snap`] would equal `s` (without building it).
    fn matches(&self, s: &Snap) -> bool {
        let Some((key, pick)) = self.seen_dir() else {
            return false;
        };
        if key != s.key || self.dir_mtime != Some(s.dir_mtime) {
            return false;
        }
        match (pick, &self.ident, &s.log) {
            (None, _, None) => true,
            (Some(l), Some(i), Some((path, was))) => l.path == *path && i == was,
            _ => false,
        }
    }

    fn change_from(&self, old: &Memo) -> Change {
        if self.same_as(old) {
            Change::Same
        } else if let Some(b) = self.patch_over(old) {
            Change::Patch(b)
        } else {
            Change::Rebuild
        }
    }

    /// Still good for this call: checked within [`LIST_STALE`] (or covered by the watcher of
    /// `epoch`, and not marked dirty: the caller re-checks those), not hot, its log not recently
    /// modified, and not a folder still waiting for its first log batch.
    fn reusable(&self, now: Instant, wall: SystemTime, epoch: u64) -> bool {
        let covered = epoch != 0 && self.watched == epoch;
        let age = now.saturating_duration_since(self.checked);
        let pending = epoch != 0 && self.asked == epoch && age < LIST_PENDING;
        if !covered && !pending && age >= LIST_STALE {
            return false;
        }
        match (&self.visited, self.ident.as_ref().and_then(|i| i.mtime)) {
            (layout::Visited::Dir { log: Ok(None), .. }, _) => false,
            (
                layout::Visited::Dir {
                    log: Ok(Some(_)), ..
                },
                Some(m),
            ) => wall.duration_since(m).is_ok_and(|age| age >= LIST_RECENT),
            (
                layout::Visited::Dir {
                    log: Ok(Some(_)), ..
                },
                None,
            ) => false,
            _ => true,
        }
    }

    /// A listing shows this folder exactly as it showed `old` (same pick, the same brief).
    fn same_as(&self, old: &Memo) -> bool {
        let same_brief = match (&self.brief, &old.brief) {
            (None, None) => true,
            (Some(Ok(x)), Some(Ok(y))) => Arc::ptr_eq(x, y),
            (Some(Err(x)), Some(Err(y))) => x == y,
            _ => false,
        };
        same_brief && self.visited == old.visited
    }

    /// The new brief when this change can be applied to a built listing in place: the same
    /// folder and log, a header with the same id and the same [`super::ListKey`] before and
    /// after, and no notes either time (so the row is the only thing that moves: not its place,
    /// not the notes, not the id dedup, not the listing's keys).
    fn patch_over(&self, old: &Memo) -> Option<Arc<Brief>> {
        if self.visited != old.visited || self.visited.log().is_none() {
            return None;
        }
        let (Some(Ok(was)), Some(Ok(now))) = (&old.brief, &self.brief) else {
            return None;
        };
        let (Some(a), Some(b)) = (&was.header, &now.header) else {
            return None;
        };
        (a.id == b.id && super::ListKey::same(a, b) && was.notes.is_empty() && now.notes.is_empty())
            .then(|| now.clone())
    }
}

/// A session folder as a listing saw it: identity and settled mtime of the folder, and its log's
/// path and identity (size, mtime).
#[derive(Debug, Clone, PartialEq)]
struct Snap {
    key: (u64, u64),
    dir_mtime: SystemTime,
    log: Option<(PathBuf, Ident)>,
}

/// The folder and its log are as `s` says, and a watch on the folder sees every change of them
/// ([`Memo::watchable`]: the folder not a link, the log a regular file with one name).
#[cfg(unix)]
fn snap_holds(dir: &Path, s: &Snap) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(d) = fs::symlink_metadata(dir) else {
        return false;
    };
    if !d.file_type().is_dir()
        || file_key(&d) != Some(s.key)
        || d.modified().ok() != Some(s.dir_mtime)
    {
        return false;
    }
    match &s.log {
        None => true,
        Some((path, was)) => fs::symlink_metadata(path).is_ok_and(|m| {
            m.file_type().is_file()
                && m.nlink() == 1
                && Ident {
                    key: file_key(&m),
                    size: m.len(),
                    mtime: m.modified().ok(),
                } == *was
        }),
    }
}

#[cfg(not(unix))]
fn snap_holds(_dir: &Path, _s: &Snap) -> bool {
    false
}

/// Folders whose watch landed and whose check held. Filled by the watcher's thread, taken by the
/// next listing.
type Verified = Arc<Mutex<Vec<Arrival>>>;

/// One folder whose watch landed and whose check held: where its memo is (the project's entries as
/// the asking listing walked them, and its place in them), what it was checked against, and the
/// watcher's epoch. By place, not by path: the listing after a cold one takes 20,000 of these at
/// once, and a path lookup each (hash, binary search, a copy of the snapshot) cost 30–230 ms of that
/// one call (issue 18); this costs a pointer comparison and a field comparison each.
struct Arrival {
    entries: Arc<Vec<PathBuf>>,
    j: usize,
    snap: Snap,
    epoch: u64,
}

/// The projects of `walk` (its notes left out), in order: each one's folder and entry list.
fn project_lists(walk: &[layout::ProjectWalk]) -> (Vec<&Path>, Vec<&Arc<Vec<PathBuf>>>) {
    walk.iter()
        .filter_map(|p| match p {
            layout::ProjectWalk::Entries { project, entries } => Some((project.as_path(), entries)),
            layout::ProjectWalk::Note(_) => None,
        })
        .unzip()
}

/// Mark covered (by the watcher of `epoch`) each memo of `arrived` that is still what its check saw
/// and not in `dirty`.
fn apply_arrivals(
    arrived: Vec<Arrival>,
    epoch: u64,
    walk: &[layout::ProjectWalk],
    memos: &mut [Vec<Option<Memo>>],
    dirty: &HashSet<PathBuf>,
) {
    if arrived.is_empty() {
        return;
    }
    // the project of an arrival: the one whose entries are the very list the asking listing
    // walked (a project whose entries changed since is re-checked the usual way)
    let (_, projects) = project_lists(walk);
    let by_entries: HashMap<*const Vec<PathBuf>, usize> = projects
        .iter()
        .enumerate()
        .map(|(k, e)| (Arc::as_ptr(e), k))
        .collect();
    for a in arrived {
        if a.epoch != epoch {
            continue;
        }
        let Some(&k) = by_entries.get(&Arc::as_ptr(&a.entries)) else {
            continue;
        };
        if !dirty.is_empty() && projects[k].get(a.j).is_some_and(|d| dirty.contains(d)) {
            continue;
        }
        if let Some(Some(m)) = memos.get_mut(k).and_then(|ms| ms.get_mut(a.j)) {
            if m.watched == 0 && m.matches(&a.snap) {
                m.watched = epoch;
            }
        }
    }
}

impl HomeMemo {
    /// Between listings (the watcher's thread, after a batch of checks): take the folders that
    /// checked out, so the next listing finds them covered (the events since are in the watcher's
    /// dirty set, which that listing takes and re-checks).
    fn take_arrivals(&mut self) {
        let WatchSlot::On(w) = &self.watch else {
            return;
        };
        let epoch = w.epoch;
        let arrived = std::mem::take(&mut *self.verified.lock().unwrap_or_else(|p| p.into_inner()));
        apply_arrivals(arrived, epoch, &self.walk, &mut self.memos, &HashSet::new());
    }
}

/// `fstatat(dir, name[/sub])`: `None` on any error. The path is built on the stack (a cold listing
/// makes 40,000 of these calls).
#[cfg(unix)]
fn stat_at(
    dir: &File,
    name: &std::ffi::OsStr,
    sub: Option<&std::ffi::OsStr>,
    follow: bool,
) -> Option<libc::stat> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    let (a, b) = (name.as_bytes(), sub.map_or(&[][..], |s| s.as_bytes()));
    let len = a.len() + if sub.is_some() { 1 + b.len() } else { 0 };
    let mut stack = [0u8; 512];
    let mut heap = Vec::new();
    let buf: &mut [u8] = if len < stack.len() {
        &mut stack[..=len]
    } else {
        heap.resize(len + 1, 0);
        &mut heap
    };
    buf[..a.len()].copy_from_slice(a);
    if sub.is_some() {
        buf[a.len()] = b'/';
        buf[a.len() + 1..len].copy_from_slice(b);
    }
    buf[len] = 0;
    // a NUL inside a name is no path
    let rel = std::ffi::CStr::from_bytes_with_nul(buf).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    // SAFETY: a valid descriptor, a NUL-terminated path and a buffer of the right type; the buffer
    // is read only when the call succeeded (it filled it).
    let r = unsafe { libc::fstatat(dir.as_raw_fd(), rel.as_ptr(), st.as_mut_ptr(), flags) };
    // SAFETY: see above.
    (r == 0).then(|| unsafe { st.assume_init() })
}

/// The [`Ident`] of a `stat` answer, as `regular_ident` builds it from `std::fs::Metadata` (a
/// time before 1970 gives no mtime: it then never matches, and the caller looks by path).
#[cfg(unix)]
fn ident_of(st: &libc::stat) -> Ident {
    #[allow(clippy::unnecessary_cast)] // the field types differ between targets
    let (dev, ino, size) = (st.st_dev as u64, st.st_ino as u64, st.st_size as u64);
    let mtime = (st.st_mtime >= 0 && (0..1_000_000_000).contains(&st.st_mtime_nsec)).then(|| {
        SystemTime::UNIX_EPOCH + Duration::new(st.st_mtime as u64, st.st_mtime_nsec as u32)
    });
    Ident {
        key: Some((dev, ino)),
        size,
        mtime,
    }
}

/// Index writes under way (tests wait for them).
static SAVING: AtomicUsize = AtomicUsize::new(0);

/// Tests: wait (≤ 10 s) until no index is being written.
#[cfg(test)]
pub(crate) fn wait_index_saved() {
    for _ in 0..1000 {
        if SAVING.load(Ordering::SeqCst) == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A time as the persisted index keeps it.
fn stamp(t: SystemTime) -> Option<crate::listindex::Stamp> {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    Some((
        i64::try_from(d.as_secs()).ok()?,
        i64::from(d.subsec_nanos()),
    ))
}

/// The ctime of a `stat` answer (no one can set it back: any change of the file moves it).
#[cfg(unix)]
fn ctime_of(st: &libc::stat) -> Option<crate::listindex::Stamp> {
    #[allow(clippy::unnecessary_cast)] // the field types differ between targets
    Some((st.st_ctime as i64, st.st_ctime_nsec as i64))
}

/// Write the index of this listing's memos (see [`crate::listindex`]) on a thread of its own:
/// the folders' and logs' ctimes are taken there (two `lstat`s each, compared with what the
/// memo saw: a folder or log changed since is left out), then it is serialized, sealed, written.
fn save_index(
    dir: PathBuf,
    home: &Path,
    project_dirs: &[&Path],
    projects: &[&Arc<Vec<PathBuf>>],
    memos: &[Vec<Option<Memo>>],
) {
    #[cfg(unix)]
    {
        type Seen = (String, (u64, u64), SystemTime, LogFile, Ident, Arc<Brief>);
        let mut per: Vec<(PathBuf, Vec<Seen>)> = Vec::with_capacity(memos.len());
        for (k, ms) in memos.iter().enumerate() {
            let (Some(p), Some(entries)) = (project_dirs.get(k), projects.get(k)) else {
                continue;
            };
            let mut seen = Vec::with_capacity(ms.len());
            for (m, d) in ms.iter().zip(entries.iter()) {
                let Some(m) = m else { continue };
                let (
                    layout::Visited::Dir {
                        key: Some(key),
                        log: Ok(Some(log)),
                    },
                    Some(Ok(b)),
                    Some(ident),
                    Some(dm),
                ) = (&m.visited, &m.brief, &m.ident, m.dir_mtime)
                else {
                    continue;
                };
                let Some(name) = d.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                seen.push((
                    name.to_string(),
                    *key,
                    dm,
                    log.clone(),
                    ident.clone(),
                    b.clone(),
                ));
            }
            per.push((p.to_path_buf(), seen));
        }
        let home = home.to_path_buf();
        SAVING.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name("dsh-list-index".into())
            .spawn(move || {
                let projects = per
                    .into_iter()
                    .map(|(p, seen)| {
                        let at = open_project(&p);
                        let entries = seen
                            .into_iter()
                            .filter_map(|(name, key, dm, log, ident, b)| {
                                let at = at.as_ref()?;
                                let d = stat_at(at, std::ffi::OsStr::new(&name), None, false)?;
                                let di = ident_of(&d);
                                if d.st_mode & libc::S_IFMT != libc::S_IFDIR
                                    || di.key != Some(key)
                                    || di.mtime != Some(dm)
                                {
                                    return None;
                                }
                                let file = log.path.file_name()?.to_str()?.to_string();
                                let l = stat_at(
                                    at,
                                    std::ffi::OsStr::new(&name),
                                    Some(std::ffi::OsStr::new(&file)),
                                    false,
                                )?;
                                let li = ident_of(&l);
                                if l.st_mode & libc::S_IFMT != libc::S_IFREG || li != ident {
                                    return None;
                                }
                                Some(crate::listindex::Entry {
                                    name,
                                    dir_key: key,
                                    dir_mtime: stamp(dm)?,
                                    log: file,
                                    zstd: log.enc == crate::log::Encoding::Zstd,
                                    generation: log.generation,
                                    log_key: ident.key?,
                                    size: ident.size,
                                    mtime: stamp(ident.mtime?)?,
                                    ctime: ctime_of(&l)?,
                                    dir_ctime: ctime_of(&d)?,
                                    brief: crate::listindex::Compact::from(&*b),
                                })
                            })
                            .collect();
                        (p, entries)
                    })
                    .collect();
                crate::listindex::save(&dir, &home, projects);
                SAVING.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            SAVING.fetch_sub(1, Ordering::SeqCst);
        }
    }
    #[cfg(not(unix))]
    let _ = (dir, home, project_dirs, projects, memos);
}

/// A project folder opened for the `*at` calls of a sweep (`None`: look by path).
fn open_project(p: &Path) -> Option<File> {
    let mut o = fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    o.open(p).ok()
}

/// What the last listing of one home saw: its walk, one memo per entry of each project (in the
/// walk's order), and the listing built from them.
struct HomeMemo {
    walk: Vec<layout::ProjectWalk>,
    /// All `Some` between calls (an `Option` so a call can fill the gaps in place).
    memos: Vec<Vec<Option<Memo>>>,
    listing: Arc<super::BriefListing>,
    watch: WatchSlot,
    /// Folders the watcher checked after their watch landed (see [`Verified`]).
    verified: Verified,
    /// Sessions the last call looked at again (tests).
    #[cfg_attr(not(test), allow(dead_code))]
    rechecked: usize,
    /// Of those, the ones it took from the persisted index (tests).
    #[cfg_attr(not(test), allow(dead_code))]
    from_index: usize,
    /// The identity of the sessions root and of each project folder of `walk` (see
    /// [`folder_ids`]).
    folders: Vec<(PathBuf, Option<(u64, u64)>)>,
}

/// The identity (dev, ino) of the sessions root and of each project folder a walk listed (links
/// followed: a link retargeted is another folder).
fn folder_ids(home: &Path, project_dirs: &[&Path]) -> Vec<(PathBuf, Option<(u64, u64)>)> {
    let id = |p: &Path| {
        (
            p.to_path_buf(),
            fs::metadata(p).ok().and_then(|m| file_key(&m)),
        )
    };
    std::iter::once(id(&home.join("sessions")))
        .chain(project_dirs.iter().map(|p| id(p)))
        .collect()
}

/// The change notification of one home.
enum WatchSlot {
    On(crate::watch::Watch),
    /// Swept as before; a new watcher is tried from `retry` on. `why`: the last reason (logs,
    /// tests).
    Off {
        retry: Instant,
        #[cfg_attr(not(test), allow(dead_code))]
        why: WatchOff,
    },
}

impl WatchSlot {
    fn start(home: &Path, now: Instant, slot: &HomeSlot) -> WatchSlot {
        #[cfg(test)]
        let w = match test_caps().get(home) {
            Some(&cap) => crate::watch::Watch::start_capped(home, cap),
            None => crate::watch::Watch::start(home),
        };
        #[cfg(not(test))]
        let w = crate::watch::Watch::start(home);
        match w {
            Ok(w) => {
                let slot = Arc::downgrade(slot);
                w.on_checked(Box::new(move || {
                    // not while a listing runs (it takes them itself at its start)
                    let Some(slot) = slot.upgrade() else { return };
                    let Ok(mut held) = slot.try_lock() else {
                        return;
                    };
                    if let Some(h) = held.as_mut() {
                        h.take_arrivals();
                    }
                }));
                WatchSlot::On(w)
            }
            Err(why) => WatchSlot::Off {
                retry: now + crate::watch::WATCH_RETRY,
                why,
            },
        }
    }
}

#[cfg(test)]
static TEST_CAPS: SharedCache<PathBuf, usize> = SharedCache::new();

#[cfg(test)]
fn test_caps() -> std::sync::MutexGuard<'static, HashMap<PathBuf, usize>> {
    TEST_CAPS.lock()
}

/// Tests: the watcher of `home` (made from now on) holds at most `cap` watches.
#[cfg(test)]
pub(crate) fn set_watch_cap(home: &Path, cap: usize) {
    test_caps().insert(home.to_path_buf(), cap);
}

/// Tests: how many sessions the last listing of `home` looked at again, and its watcher's state
/// (`Ok(())` watching, `Err(why)` swept).
#[cfg(test)]
pub(crate) fn memo_probe(home: &Path) -> Option<(usize, Result<(), WatchOff>)> {
    let slot = home_slot(home);
    let held = slot.lock().unwrap_or_else(|p| p.into_inner());
    held.as_ref().map(|h| {
        let w = match &h.watch {
            WatchSlot::On(_) => Ok(()),
            WatchSlot::Off { why, .. } => Err(why.clone()),
        };
        (h.rechecked, w)
    })
}

/// Tests: of the memo of `home` (between listings), the checked folders not taken yet and the
/// memos covered by its watcher.
#[cfg(test)]
pub(crate) fn cover_probe(home: &Path) -> Option<(usize, usize)> {
    let slot = home_slot(home);
    let held = slot.lock().unwrap_or_else(|p| p.into_inner());
    held.as_ref().map(|h| {
        let epoch = match &h.watch {
            WatchSlot::On(w) => w.epoch,
            WatchSlot::Off { .. } => 0,
        };
        let waiting = h.verified.lock().unwrap_or_else(|p| p.into_inner()).len();
        let covered = h
            .memos
            .iter()
            .flatten()
            .flatten()
            .filter(|m| epoch != 0 && m.watched == epoch)
            .count();
        (waiting, covered)
    })
}

/// Tests: wait until the watcher of `home` (if any) has watched and checked every folder asked
/// for, without holding the memo meanwhile (its thread takes what checked out into the memo).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn settle_watch(home: &Path) {
    let settle = {
        let slot = home_slot(home);
        let held = slot.lock().unwrap_or_else(|p| p.into_inner());
        match held.as_ref() {
            Some(HomeMemo {
                watch: WatchSlot::On(w),
                ..
            }) => Some(w.settler()),
            _ => None,
        }
    };
    if let Some(f) = settle {
        f();
    }
}

/// Tests: how many sessions the last listing of `home` took from the persisted index.
#[cfg(test)]
pub(crate) fn index_probe(home: &Path) -> Option<usize> {
    let slot = home_slot(home);
    let held = slot.lock().unwrap_or_else(|p| p.into_inner());
    held.as_ref().map(|h| h.from_index)
}

/// Tests: forget everything this process remembers of `home` (its listing memo, its briefs and
/// folds): the next listing is a fresh process's.
#[cfg(test)]
pub(crate) fn forget_home(home: &Path) {
    LIST_MEMO.lock().remove(home);
    BRIEFS.lock().retain(|p, _| !Path::new(p).starts_with(home));
    CACHE.lock().retain(|p, _| !p.starts_with(home));
    layout::forget_picks(home);
}

/// Tests: run `f` on the watcher of `home`, if it has one.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn with_watch(home: &Path, f: impl FnOnce(&crate::watch::Watch)) {
    let slot = home_slot(home);
    let held = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(HomeMemo {
        watch: WatchSlot::On(w),
        ..
    }) = held.as_ref()
    {
        f(w);
    }
}

/// One home's memo, locked by a listing for its whole call: concurrent listings of one home take
/// turns (the second one is then warm), listings of different homes do not wait for each other.
type HomeSlot = Arc<Mutex<Option<HomeMemo>>>;

/// Each listed home's slot and when it was last listed.
static LIST_MEMO: SharedCache<PathBuf, (HomeSlot, u64)> = SharedCache::new();

/// The slot of `home` (made, and the least recently listed home dropped, when it is new).
fn home_slot(home: &Path) -> HomeSlot {
    let used = TICK.fetch_add(1, Ordering::Relaxed);
    let mut m = LIST_MEMO.lock();
    make_room(&mut m, LIST_HOMES, home, |(_, u)| *u);
    let e = m.entry(home.to_path_buf()).or_default();
    e.1 = used;
    e.0.clone()
}

/// [`scan_briefs`] + [`super::briefs_listing`] for a listing that may reuse what it saw before.
/// Always fresh: the set of projects and session folders (the root's and each project's mtime; a
/// new or removed session shows at once), and every session whose folder name is in `hot` (live in
/// this process or in another one per presence), whose log changed in the last [`LIST_RECENT`], or
/// whose folder has no log yet. Every other session is re-checked (folder `lstat`, generation
/// pick, log `stat`, brief) when its last check is [`LIST_STALE`] old or more: a log appended by a
/// writer nobody knows of shows in every listing that starts at least [`LIST_STALE`] after the
/// append.
///
/// The memo is kept per project folder, in the order of its (cached, sorted) entries: while a
/// project's entries are the same, its sessions' memos are reused by position (no path hashed).
/// When nothing a listing shows changed, the listing built last time is returned as it is (one
/// `Arc`); when only the briefs of sessions re-checked changed (an append to a live log), those
/// rows are replaced in place; anything else (a new or removed folder, a new generation, a note)
/// rebuilds the listing from the memos.
pub fn list_cached(home: &Path, hot: &HashSet<String>) -> Arc<super::BriefListing> {
    let slot = home_slot(home);
    // Held to the end of the call (a panic leaves `None`: the next listing starts cold).
    let mut held = slot.lock().unwrap_or_else(|p| p.into_inner());
    let mut old = held.take();
    // The watcher's thread holds back its adds and checks while this call runs.
    let _pause = old.as_ref().and_then(|o| match &o.watch {
        WatchSlot::On(w) => Some(w.pause()),
        WatchSlot::Off { .. } => None,
    });
    let started = Instant::now();
    // The first listing of this home in this process: the persisted index of an earlier one
    // (`listindex`), if it checks out; each of its entries is still verified against the folder.
    let index_dir = if old.is_none() {
        crate::listindex::dir()
    } else {
        None
    };
    // read and checked on a thread of its own while this one walks the home
    let index = index_dir.clone().and_then(|d| {
        let h = home.to_path_buf();
        std::thread::Builder::new()
            .name("dsh-list-index".into())
            .spawn(move || crate::listindex::load(&d, &h))
            .ok()
    });
    // The changes the watcher saw (drained before the walk: a change finished before this call
    // started is in it), or the sweep when there is no watcher (or it could not be trusted).
    let watch = match old.as_mut().map(|o| {
        std::mem::replace(
            &mut o.watch,
            WatchSlot::Off {
                retry: started,
                why: WatchOff::NotStarted,
            },
        )
    }) {
        None => WatchSlot::start(home, started, &slot),
        Some(WatchSlot::Off { retry, .. }) if retry <= started => {
            WatchSlot::start(home, started, &slot)
        }
        Some(w) => w,
    };
    let (mut watch, mut epoch, mut dirty) = match watch {
        WatchSlot::On(w) => match w.take() {
            Ok(dirty) => {
                let epoch = w.epoch;
                (WatchSlot::On(w), epoch, dirty)
            }
            Err(why) => (
                WatchSlot::Off {
                    retry: started + crate::watch::WATCH_RETRY,
                    why,
                },
                0,
                HashSet::new(),
            ),
        },
        off => (off, 0, HashSet::new()),
    };
    // Every check of this call starts after `now`, which is after the take: a watch in place by
    // then (its `since` ≤ `now`) reports any change the checks do not see.
    let now = Instant::now();
    let walk = layout::walk_projects(home);
    let index = index.and_then(|t| t.join().ok().flatten());
    let wall = SystemTime::now();
    // The watches hang on the folders' inodes, the memos on their paths: when the sessions root or
    // a project folder (by path) is another folder than last time (replaced, moved, a link retargeted), the
    // session folders under it are other ones too, watched or not. A new watcher then (nothing is
    // covered until it has watched each folder again; the 2 s rule meanwhile).
    let (project_dirs, projects) = project_lists(&walk);
    let folders = folder_ids(home, &project_dirs);
    if let (WatchSlot::On(_), Some(o)) = (&watch, &old) {
        let was: HashMap<&Path, Option<(u64, u64)>> =
            o.folders.iter().map(|(p, id)| (p.as_path(), *id)).collect();
        if folders
            .iter()
            .any(|(p, id)| was.get(p.as_path()).is_some_and(|w| w != id))
        {
            watch = WatchSlot::start(home, started, &slot);
            epoch = match &watch {
                WatchSlot::On(w) => w.epoch,
                WatchSlot::Off { .. } => 0,
            };
            dirty.clear();
        }
    }
    let verified: Verified = old.as_ref().map(|o| o.verified.clone()).unwrap_or_default();
    let mut rebuild = old.as_ref().is_none_or(|o| o.walk != walk);
    let (old_listing, mut old_projects) = match old {
        None => (None, HashMap::new()),
        Some(o) => {
            let mut by_project = HashMap::with_capacity(o.memos.len());
            let mut memos = o.memos.into_iter();
            for p in o.walk {
                if let layout::ProjectWalk::Entries { project, entries } = p {
                    if let Some(m) = memos.next() {
                        by_project.insert(project, (entries, m));
                    }
                }
            }
            (Some(o.listing), by_project)
        }
    };
    // 1. per project, the memos of its entries: by position when the entries are the same
    let mut memos: Vec<Vec<Option<Memo>>> = project_dirs
        .iter()
        .zip(&projects)
        .map(|(project, &entries)| match old_projects.remove(*project) {
            Some((was, m)) if Arc::ptr_eq(&was, entries) || was == *entries => m,
            Some((was, m)) => {
                let mut by_path: HashMap<PathBuf, Memo> = was
                    .iter()
                    .cloned()
                    .zip(m)
                    .filter_map(|(p, m)| Some((p, m?)))
                    .collect();
                entries.iter().map(|e| by_path.remove(e)).collect()
            }
            None => vec![None; entries.len()],
        })
        .collect();
    // 1b. folders whose watch landed since the last call and checked out (the watcher's thread
    // compared them with what the call that asked saw): covered from now on, not looked at again
    let arrived = std::mem::take(&mut *verified.lock().unwrap_or_else(|p| p.into_inner()));
    if epoch != 0 {
        apply_arrivals(arrived, epoch, &walk, &mut memos, &dirty);
    }
    // 2. what must be looked at now: unknown, stale or changing sessions, and the hot ones
    let mut todo: Vec<(usize, usize)> = Vec::new();
    for (k, (ms, entries)) in memos.iter().zip(&projects).enumerate() {
        let first = todo.len();
        for (j, m) in ms.iter().enumerate() {
            if !m.as_ref().is_some_and(|m| m.reusable(now, wall, epoch)) {
                todo.push((k, j));
            }
        }
        for name in hot {
            // the entries are one folder's, sorted: by name
            let name = std::ffi::OsStr::new(name);
            if let Ok(j) = entries.binary_search_by(|e| e.file_name().cmp(&Some(name))) {
                if !todo[first..].contains(&(k, j)) {
                    todo.push((k, j));
                }
            }
        }
    }
    if !dirty.is_empty() {
        // the folders the watcher saw change (a few: looked up, not scanned for)
        let by_project: HashMap<&Path, usize> = project_dirs
            .iter()
            .enumerate()
            .map(|(k, p)| (*p, k))
            .collect();
        let mut extra: HashSet<(usize, usize)> = HashSet::new();
        for d in &dirty {
            let (Some(p), Some(name)) = (d.parent(), d.file_name()) else {
                continue;
            };
            let Some(&k) = by_project.get(p) else {
                continue;
            };
            if let Ok(j) = projects[k].binary_search_by(|e| e.file_name().cmp(&Some(name))) {
                extra.insert((k, j));
            }
        }
        if !extra.is_empty() {
            let have: HashSet<(usize, usize)> = todo.iter().copied().collect();
            todo.extend(extra.into_iter().filter(|x| !have.contains(x)));
        }
    }
    // Which of them are watched since before this call (the others are asked for at the end of
    // the call: the watches land while nothing else runs).
    let since_ok: Vec<bool> = match &watch {
        WatchSlot::On(w) if !todo.is_empty() => {
            let dirs: Vec<&Path> = todo
                .iter()
                .map(|&(k, j)| projects[k][j].as_path())
                .collect();
            w.since_ok(&dirs, now)
        }
        _ => vec![false; todo.len()],
    };
    // The persisted index's entry of each folder seen for the first time, moved out of the index
    // (the entries of a project are found by its place in the walk, not by hashing its path).
    let mut index_of: Vec<Option<crate::listindex::ProjectIndex>> = match index {
        Some(mut ix) => project_dirs.iter().map(|p| ix.remove(*p)).collect(),
        None => Vec::new(),
    };
    type Work = (
        usize,
        usize,
        Option<Memo>,
        bool,
        Option<crate::listindex::Entry>,
    );
    let work: Vec<Work> = todo
        .iter()
        .zip(&since_ok)
        .map(|(&(k, j), &ok)| {
            let old = memos[k][j].take();
            let entry = match (&old, index_of.get_mut(k).and_then(Option::as_mut)) {
                (None, Some(ix)) => projects[k][j]
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| ix.remove(n)),
                _ => None,
            };
            (k, j, old, ok, entry)
        })
        .collect();
    // The project folders with something to re-check, opened once for the `fstatat`s.
    let mut opened: Vec<Option<File>> = (0..projects.len()).map(|_| None).collect();
    let mut seen_k = vec![false; projects.len()];
    for &(k, _) in &todo {
        if !seen_k[k] {
            seen_k[k] = true;
            opened[k] = project_dirs.get(k).and_then(|p| open_project(p));
        }
    }
    let rechecked = work.len();
    let briefed = AtomicUsize::new(0);
    let from_index = AtomicUsize::new(0);
    let fresh = parallel_owned(work, |(k, j, old, since_ok, entry)| {
        let dir = &projects[k][j];
        let at = opened[k].as_ref().zip(dir.file_name());
        // Its own moment, not the call's start: a long call (a cold one) does not leave every
        // memo due for the 2 s rule by the time it returns.
        let indexed = match (entry, at) {
            (Some(e), Some((p, name))) => Memo::from_index(e, p, name, dir, Instant::now()),
            _ => None,
        };
        let (mut memo, change) = match indexed {
            Some(m) => {
                from_index.fetch_add(1, Ordering::Relaxed);
                (m, Change::Rebuild)
            }
            None => {
                if old.is_none() {
                    briefed.fetch_add(1, Ordering::Relaxed);
                }
                Memo::recheck(dir, at, old, Instant::now())
            }
        };
        memo.watched = if since_ok && memo.watchable(dir) {
            epoch
        } else {
            0
        };
        (k, j, (memo, change))
    });
    // 3. what changed for the listing
    let mut patches: Vec<(usize, usize, Arc<Brief>)> = Vec::new();
    for (k, j, (memo, change)) in fresh {
        match change {
            Change::Same => {}
            Change::Patch(b) => patches.push((k, j, b)),
            Change::Rebuild => rebuild = true,
        }
        memos[k][j] = Some(memo);
    }
    let listing = match old_listing {
        Some(mut l) if !rebuild => {
            if !patches.is_empty() {
                let m = Arc::make_mut(&mut l);
                for (k, j, b) in patches {
                    let id = &b.header.as_ref().expect("a patch has a header").id;
                    let log = memos[k][j]
                        .as_ref()
                        .and_then(|m| m.visited.log())
                        .expect("a patch has a log");
                    match m.by_id.get(id) {
                        Some(&i) if m.sessions[i].log == *log => m.sessions[i].brief = b,
                        _ => {
                            rebuild = true;
                            break;
                        }
                    }
                }
            }
            (!rebuild).then_some(l)
        }
        _ => None,
    };
    let listing = listing.unwrap_or_else(|| Arc::new(build_listing(home, &walk, &memos)));
    if let WatchSlot::On(w) = &watch {
        // each with the check its watcher runs once the watch is in place (see `Verified`)
        let ask: Vec<(&Path, Option<crate::watch::Verify>)> = todo
            .iter()
            .zip(&since_ok)
            .filter(|&(&(k, j), &ok)| !ok && memos[k][j].as_ref().is_some_and(|m| m.watched == 0))
            .map(|(&(k, j), _)| {
                let dir = projects[k][j].as_path();
                let check = memos[k][j].as_ref().and_then(Memo::snap).map(|snap| {
                    let inbox = verified.clone();
                    let entries = projects[k].clone();
                    Box::new(move |d: &Path| {
                        let ok = snap_holds(d, &snap);
                        if ok {
                            inbox
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push(Arrival {
                                    entries,
                                    j,
                                    snap,
                                    epoch,
                                });
                        }
                        ok
                    }) as crate::watch::Verify
                });
                (dir, check)
            })
            .collect();
        if !ask.is_empty() {
            for (&(k, j), _) in todo.iter().zip(&since_ok).filter(|&(_, &ok)| !ok) {
                if let Some(m) = memos[k][j].as_mut() {
                    if m.watched == 0 && m.has_snap() {
                        m.asked = epoch;
                    }
                }
            }
            w.ask(ask);
        }
    }
    if let Some(d) = index_dir {
        if briefed.into_inner() >= crate::listindex::PERSIST_MIN {
            save_index(d, home, &project_dirs, &projects, &memos);
        }
    }
    *held = Some(HomeMemo {
        walk,
        memos,
        listing: listing.clone(),
        watch,
        verified,
        rechecked,
        from_index: from_index.into_inner(),
        folders,
    });
    listing
}

/// The listing of a walk and its memos (notes in walk order, each physical folder once).
fn build_listing(
    home: &Path,
    walk: &[layout::ProjectWalk],
    memos: &[Vec<Option<Memo>>],
) -> super::BriefListing {
    let n: usize = memos.iter().map(Vec::len).sum::<usize>() + walk.len();
    let mut items = Vec::with_capacity(n);
    let mut visited = Vec::with_capacity(n);
    let mut briefs: Vec<Loaded> = Vec::with_capacity(n);
    let mut ms = memos.iter();
    for p in walk {
        match p {
            layout::ProjectWalk::Note(t) => {
                items.push(WalkItem::Note(t.clone()));
                visited.push(None);
                briefs.push(None);
            }
            layout::ProjectWalk::Entries { entries, .. } => {
                let Some(m) = ms.next() else { continue };
                for (e, m) in entries.iter().zip(m) {
                    items.push(WalkItem::Dir(e.clone()));
                    visited.push(m.as_ref().map(|m| m.visited.clone()));
                    briefs.push(m.as_ref().and_then(|m| m.brief.clone()));
                }
            }
        }
    }
    let mut notes = Vec::new();
    let scanned = layout::assemble(items, visited, &mut notes)
        .into_iter()
        .map(|(i, d)| Briefed {
            brief: briefs[i].take().unwrap_or(Err(ReadError::NoLog)),
            dir: d.dir,
            log: d.log,
        })
        .collect();
    super::briefs_listing(home, scanned, notes)
}

/// One session directory after folding.
#[derive(Debug, Clone)]
pub struct Scanned {
    pub dir: PathBuf,
    pub log: Option<LogFile>,
    pub fold: Result<Arc<Fold>, ReadError>,
}

/// Fold many directories, spread over the available cores (at most 8 threads).
pub fn fold_all(dirs: Vec<SessionDir>) -> Vec<Scanned> {
    parallel(&dirs, |d| {
        let fold = match &d.log {
            None => Err(ReadError::NoLog),
            Some(log) => {
                std::panic::catch_unwind(|| load_log(log)).unwrap_or(Err(ReadError::Panicked))
            }
        };
        Scanned {
            dir: d.dir.clone(),
            log: d.log.clone(),
            fold,
        }
    })
}

/// Walk and fold every session under `home`.
pub fn scan(home: &Path, notes: &mut Vec<super::StoreNote>) -> Vec<Scanned> {
    let dirs = layout::walk(home, notes);
    fold_all(dirs)
}

#[cfg(test)]
pub(crate) fn forget(path: &Path) {
    CACHE.lock().remove(path);
    LIST_MEMO.lock().retain(|home, _| !path.starts_with(home));
    BRIEFS.lock().remove(path.as_os_str());
}
