//! The incremental index: one cached fold per log file, keyed by the file's identity
//! (dev/ino where available) + size + mtime. A grown log is read only from the byte after its
//! last complete frame; an unchanged one is not read at all. A cold scan spreads over the cores.

use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use super::fold::Fold;
use super::layout::{self, file_key, short_io, LogFile, SessionDir};
use super::log::continue_fold;

/// Most logs the in-process cache remembers (least recently used ones go first).
const CACHE_CAP: usize = 2048;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Ident {
    key: Option<(u64, u64)>,
    size: u64,
    mtime: Option<SystemTime>,
}

struct Entry {
    ident: Ident,
    /// State at the end of the last complete frame: what a later read resumes from.
    committed: Arc<Fold>,
    /// What readers see: `committed` plus the complete lines of a torn last frame, if any.
    view: Arc<Fold>,
    used: u64,
}

fn cache() -> &'static Mutex<HashMap<PathBuf, Entry>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Entry>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

static TICK: AtomicU64 = AtomicU64::new(0);

fn lock() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Entry>> {
    // A panic while holding the lock leaves a usable map (entries are replaced whole).
    cache().lock().unwrap_or_else(|p| p.into_inner())
}

/// Fold one log, reusing and extending the cached fold when the file only grew.
/// Err: a short reason (the file could not be opened or read).
pub fn load_log(log: &LogFile) -> Result<Arc<Fold>, String> {
    load_log_counted(log).0
}

/// [`load_log`], also returning how many file bytes this call had to read (0 when warm).
pub fn load_log_counted(log: &LogFile) -> (Result<Arc<Fold>, String>, u64) {
    match load_inner(log) {
        Ok((f, n)) => (Ok(f), n),
        Err(e) => (Err(e), 0),
    }
}

fn load_inner(log: &LogFile) -> Result<(Arc<Fold>, u64), String> {
    let meta = fs::metadata(&log.path).map_err(|e| short_io(&e))?;
    let ident = Ident { key: file_key(&meta), size: meta.len(), mtime: meta.modified().ok() };
    let tick = TICK.fetch_add(1, Ordering::Relaxed);
    let base = {
        let mut map = lock();
        match map.get_mut(&log.path) {
            Some(e) if e.ident == ident => {
                e.used = tick;
                return Ok((e.view.clone(), 0));
            }
            // Same file, longer: an append. Resume after the last complete frame.
            Some(e) if e.ident.key.is_some() && e.ident.key == ident.key && ident.size > e.ident.size && e.committed.offset <= ident.size => {
                (*e.committed).clone()
            }
            _ => Fold::default(),
        }
    };
    let start = base.offset;
    let mut file = File::open(&log.path).map_err(|e| short_io(&e))?;
    let (committed, tail) = continue_fold(&mut file, log.enc, ident.size, base).map_err(|e| short_io(&e))?;
    let read = ident.size.saturating_sub(start);
    let committed = Arc::new(committed);
    let view = match tail {
        Some(t) => Arc::new(t),
        None => committed.clone(),
    };
    let mut map = lock();
    if map.len() >= CACHE_CAP && !map.contains_key(&log.path) {
        if let Some(oldest) = map.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) {
            map.remove(&oldest);
        }
    }
    map.insert(log.path.clone(), Entry { ident, committed, view: view.clone(), used: tick });
    Ok((view, read))
}

/// One session directory after folding.
#[derive(Debug, Clone)]
pub struct Scanned {
    pub dir: PathBuf,
    pub log: Option<LogFile>,
    pub fold: Result<Arc<Fold>, String>,
}

/// Fold many directories, spread over the available cores (at most 8 threads).
pub fn fold_all(dirs: Vec<SessionDir>) -> Vec<Scanned> {
    let n = dirs.len();
    let workers = std::thread::available_parallelism().map_or(1, |p| p.get()).clamp(1, 8).min(n.max(1));
    let slots: Vec<Mutex<Option<Scanned>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        let d = &dirs[i];
        let fold = match &d.log {
            None => Err("no session log".to_string()),
            Some(log) => std::panic::catch_unwind(|| load_log(log)).unwrap_or_else(|_| Err("internal error while reading".into())),
        };
        *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(Scanned { dir: d.dir.clone(), log: d.log.clone(), fold });
    };
    if workers <= 1 || n < 4 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(work);
            }
        });
    }
    slots.into_iter().filter_map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner())).collect()
}

/// Walk and fold every session under `home`.
pub fn scan(home: &Path, notes: &mut Vec<String>) -> Vec<Scanned> {
    let dirs = layout::walk(home, notes);
    fold_all(dirs)
}

#[cfg(test)]
pub(crate) fn forget(path: &Path) {
    lock().remove(path);
}
