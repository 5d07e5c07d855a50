//! On-disk layout: `$DSH_HOME/sessions/<project>/<session>/<generation file>`
//! [R8 and Z17 `packages/session/session-persistence-jsonl/src/format.ts` `projectDir`, `sessionDir`, `logPath`].

use super::StoreNote;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use crate::error::IoError;
use crate::log::Encoding;

/// A generation file picked in a session directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    pub path: PathBuf,
    pub enc: Encoding,
    /// Format generation from the name: 0 for `session.jsonl`, N for `session.vN.jsonl`.
    pub generation: u32,
}

/// Parse a canonical log file name. V0 is `session.jsonl`; V≥1 is `session.v<N>.jsonl`;
/// temporary, uppercase, leading-zero and `.v0` names are not canonical
/// [Z13+ `packages/session/session-format/src/filename.ts`]; the compression suffix follows
/// [Z17 `format.ts` `generationLogFilename`].
pub fn parse_log_name(name: &str) -> Option<(u32, Encoding)> {
    let (stem, enc) = if let Some(s) = name.strip_suffix(".jsonl.zstd") {
        (s, Encoding::Zstd)
    } else if let Some(s) = name.strip_suffix(".jsonl") {
        (s, Encoding::Plain)
    } else {
        return None;
    };
    if stem == "session" {
        return Some((0, enc));
    }
    let n = stem.strip_prefix("session.v")?;
    if n.is_empty() || n.len() > 9 || n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((n.parse().ok()?, enc))
}

/// Pick the newest generation in a session directory: highest N wins; at equal N the zstd file
/// (the default encoding) wins. Older generations stay beside it unchanged
/// [Z17 `session-persistence-jsonl/src/generation.ts` header comment].
pub fn pick_generation(dir: &Path) -> std::io::Result<Option<LogFile>> {
    let mut best: Option<LogFile> = None;
    for entry in fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let Some((generation, enc)) = name.to_str().and_then(parse_log_name) else {
            continue;
        };
        let path = entry.path();
        // The entry's own type (free from `readdir` on most file systems); only a link costs a `stat`.
        let Ok(ft) = entry.file_type() else { continue };
        let is_link = ft.is_symlink();
        if !(ft.is_file() || (is_link && path.is_file())) {
            continue;
        }
        // A log that is a link out of DSH_HOME (`<home>/sessions/<project>/<dir>/<log>`) is not read.
        if is_link && link_out_of_home(&path, 4).is_some() {
            continue;
        }
        let better = match &best {
            None => true,
            Some(b) => {
                generation > b.generation
                    || (generation == b.generation
                        && enc == Encoding::Zstd
                        && b.enc == Encoding::Plain)
            }
        };
        if better {
            best = Some(LogFile {
                path,
                enc,
                generation,
            });
        }
    }
    Ok(best)
}

/// `encodeSegment`: `[A-Za-z0-9._-]` literal, every other UTF-16 unit (and `~`) as `~XXXX`;
/// `.` and `..` escaped [R8 `format.ts` `encodeSegment`].
pub fn encode_segment(raw: &str) -> String {
    if raw == "." {
        return "~002E".into();
    }
    if raw == ".." {
        return "~002E~002E".into();
    }
    let mut out = String::with_capacity(raw.len());
    for unit in raw.encode_utf16() {
        let c = char::from_u32(u32::from(unit))
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        match c {
            Some(c) => out.push(c),
            None => out.push_str(&format!("~{unit:04X}")),
        }
    }
    out
}

// ---- directory cache: a directory whose mtime has not changed has the same entries ----

/// A directory modified this recently is read again next time (its mtime may not show a change
/// made in the same clock tick).
const RACY: Duration = Duration::from_secs(2);

#[derive(Default)]
struct DirCache {
    /// Sorted entries of a directory, by (path, mtime).
    entries: HashMap<OsString, (SystemTime, Arc<Vec<PathBuf>>)>,
    /// The generation picked in a session directory, by (path, mtime).
    picks: HashMap<OsString, (SystemTime, Option<LogFile>)>,
}

fn dir_cache() -> std::sync::MutexGuard<'static, DirCache> {
    static C: OnceLock<Mutex<DirCache>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(DirCache::default()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Tests: forget the cached entries and picks of every folder under `home`.
#[cfg(test)]
pub(crate) fn forget_picks(home: &Path) {
    let mut c = dir_cache();
    c.entries.retain(|p, _| !Path::new(p).starts_with(home));
    c.picks.retain(|p, _| !Path::new(p).starts_with(home));
}

/// Settled: modified long enough ago that a later change must move the mtime.
pub(crate) fn settled(mtime: SystemTime) -> bool {
    SystemTime::now()
        .duration_since(mtime)
        .is_ok_and(|age| age >= RACY)
}

/// What `compute` says of `dir`, remembered in the dir cache's map `of` while the directory's
/// `mtime` does not change (only a settled mtime is remembered; a map of 100,000 starts over).
fn cached<T: Clone>(
    dir: &Path,
    mtime: Option<SystemTime>,
    of: fn(&mut DirCache) -> &mut HashMap<OsString, (SystemTime, T)>,
    compute: impl FnOnce() -> std::io::Result<T>,
) -> std::io::Result<T> {
    if let Some(m) = mtime {
        if let Some((cm, v)) = of(&mut dir_cache()).get(dir.as_os_str()) {
            if *cm == m {
                return Ok(v.clone());
            }
        }
    }
    let v = compute()?;
    if let Some(m) = mtime.filter(|m| settled(*m)) {
        let mut c = dir_cache();
        let map = of(&mut c);
        if map.len() > 100_000 {
            map.clear();
        }
        map.insert(dir.as_os_str().to_owned(), (m, v.clone()));
    }
    Ok(v)
}

/// The sorted entries of `dir` (read again unless `mtime` shows it unchanged).
fn entries(dir: &Path, mtime: Option<SystemTime>) -> std::io::Result<Arc<Vec<PathBuf>>> {
    cached(
        dir,
        mtime,
        |c| &mut c.entries,
        || {
            let mut v: Vec<PathBuf> = fs::read_dir(dir)?.flatten().map(|e| e.path()).collect();
            // All in `dir`: ordered by file name, as `Path`'s order would (which parses every
            // component of both paths at each comparison), and as the listing memo's binary searches
            // expect.
            v.sort_unstable_by(|a, b| a.file_name().cmp(&b.file_name()));
            Ok(Arc::new(v))
        },
    )
}

/// [`pick_generation`], remembered while the directory's mtime does not change.
fn pick_cached(dir: &Path, mtime: Option<SystemTime>) -> std::io::Result<Option<LogFile>> {
    cached(dir, mtime, |c| &mut c.picks, || pick_generation(dir))
}

/// A session directory found by the walk.
#[derive(Debug, Clone)]
pub struct SessionDir {
    pub dir: PathBuf,
    pub log: Option<LogFile>,
}

/// Walk `<home>/sessions/*/*`. Unreadable directories, symlink loops and other oddities become
/// notes; the walk goes on. Each physical directory is visited once (symlink aliases).
pub fn walk(home: &Path, notes: &mut Vec<StoreNote>) -> Vec<SessionDir> {
    let items = walk_items(home);
    let visited: Vec<Option<Visited>> = items.iter().map(|i| i.dir().map(visit)).collect();
    assemble(items, visited, notes)
        .into_iter()
        .map(|(_, d)| d)
        .collect()
}

/// The first, sequential part of a walk: project directories and the session directories in
/// them, in walk order, with the notes about projects where they belong.
#[derive(Debug, Clone)]
pub enum WalkItem {
    Note(String),
    Dir(PathBuf),
}

impl WalkItem {
    pub fn dir(&self) -> Option<&Path> {
        match self {
            WalkItem::Dir(d) => Some(d),
            WalkItem::Note(_) => None,
        }
    }
}

/// What one candidate session directory holds (the part of a walk that can run in parallel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visited {
    Note(String),
    NotADir,
    Dir {
        key: Option<(u64, u64)>,
        /// Err: the folder could not be read (the note is phrased in [`assemble`]).
        log: Result<Option<LogFile>, IoError>,
    },
}

impl Visited {
    pub fn log(&self) -> Option<&LogFile> {
        match self {
            Visited::Dir {
                log: Ok(Some(l)), ..
            } => Some(l),
            _ => None,
        }
    }
}

pub fn walk_items(home: &Path) -> Vec<WalkItem> {
    let mut out = Vec::new();
    for p in walk_projects(home) {
        match p {
            ProjectWalk::Note(n) => out.push(WalkItem::Note(n)),
            ProjectWalk::Entries { entries, .. } => {
                out.extend(entries.iter().cloned().map(WalkItem::Dir))
            }
        }
    }
    out
}

/// The walk one project at a time: a note, or a project folder and its sorted entries (the
/// candidate session folders). The same `Arc` comes back while the folder's mtime has not moved.
#[derive(Debug, Clone)]
pub enum ProjectWalk {
    Note(String),
    Entries {
        project: PathBuf,
        entries: Arc<Vec<PathBuf>>,
    },
}

impl PartialEq for ProjectWalk {
    /// Same notes, same projects with the same entries (the same `Arc` is the cheap answer).
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ProjectWalk::Note(a), ProjectWalk::Note(b)) => a == b,
            (
                ProjectWalk::Entries {
                    project: p,
                    entries: a,
                },
                ProjectWalk::Entries {
                    project: q,
                    entries: b,
                },
            ) => p == q && (Arc::ptr_eq(a, b) || a == b),
            _ => false,
        }
    }
}

/// The sequential part of a walk: the sessions root and each project folder (one `stat` each; a
/// `readdir` only when a folder's mtime moved).
pub fn walk_projects(home: &Path) -> Vec<ProjectWalk> {
    let root = home.join("sessions");
    let mut out = Vec::new();
    let root_mtime = fs::metadata(&root).ok().and_then(|m| m.modified().ok());
    let projects = match entries(&root, root_mtime) {
        Ok(v) => v,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            out.push(ProjectWalk::Note(format!(
                "{}: unreadable directory ({e})",
                root.display()
            )));
            return out;
        }
    };
    for project in projects.iter() {
        let pmeta = match fs::symlink_metadata(project) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Some(why) = link_out_of_home(project, 2) {
                    out.push(ProjectWalk::Note(why));
                    continue;
                }
                fs::metadata(project)
            }
            other => other,
        };
        let pmeta = match pmeta {
            Ok(m) if m.is_dir() => m,
            Ok(_) => continue, // a stray file
            Err(e) => {
                out.push(ProjectWalk::Note(format!(
                    "{}: unreadable ({})",
                    project.display(),
                    short_io(&e)
                )));
                continue;
            }
        };
        match entries(project, pmeta.modified().ok()) {
            Ok(v) => out.push(ProjectWalk::Entries {
                project: project.clone(),
                entries: v,
            }),
            Err(e) => out.push(ProjectWalk::Note(format!(
                "{}: unreadable directory ({})",
                project.display(),
                short_io(&e)
            ))),
        }
    }
    out
}

/// Look at one candidate session directory: one `stat`, and its generation files only when
/// its mtime changed.
pub fn visit(dir: &Path) -> Visited {
    match look(dir, None, true) {
        (Some(v), _) => v,
        (None, _) => unreachable!("a first visit always answers"),
    }
}

/// [`visit`] that knows what an earlier one saw: `prev` is its answer and the folder mtime it
/// returned. `None` when the folder is as `prev` saw it (the same identity and the same settled
/// mtime: the same generation pick, not looked up again). Also returns the mtime a later visit may
/// compare against: only a settled one (a change in the same clock tick could hide behind it).
/// The caller remembers the pick: the shared pick cache is not used (nor filled).
pub fn visit_again(
    dir: &Path,
    prev: Option<(&Visited, Option<SystemTime>)>,
) -> (Option<Visited>, Option<SystemTime>) {
    look(dir, prev, false)
}

fn look(
    dir: &Path,
    prev: Option<(&Visited, Option<SystemTime>)>,
    shared_cache: bool,
) -> (Option<Visited>, Option<SystemTime>) {
    // A session folder that is a link is followed only when it stays inside DSH_HOME
    // (`<home>/sessions/<project>/<dir>`: three levels up).
    // One `lstat` in the usual case (not a link: it is the directory's own metadata).
    let meta = match fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => {
            if let Some(why) = link_out_of_home(dir, 3) {
                return (Some(Visited::Note(why)), None);
            }
            fs::metadata(dir)
        }
        other => other,
    };
    let meta = match meta {
        Ok(m) => m,
        Err(e) => {
            let note = format!("{}: unreadable ({})", dir.display(), short_io(&e));
            return (Some(Visited::Note(note)), None);
        }
    };
    if !meta.is_dir() {
        return (Some(Visited::NotADir), None);
    }
    let key = file_key(&meta);
    let mtime = meta.modified().ok();
    let remember = mtime.filter(|m| settled(*m));
    if let (Some((Visited::Dir { key: k, log: Ok(_) }, Some(was))), Some(m)) = (prev, remember) {
        if *k == key && was == m {
            return (None, remember);
        }
    }
    let log = if shared_cache {
        pick_cached(dir, mtime)
    } else {
        pick_generation(dir)
    };
    let log = log.map_err(IoError::from);
    (Some(Visited::Dir { key, log }), remember)
}

/// Put a walk together in order: notes where they occurred, each physical directory once
/// (symlink aliases). Returns (item index, directory).
pub fn assemble(
    items: Vec<WalkItem>,
    visited: Vec<Option<Visited>>,
    notes: &mut Vec<StoreNote>,
) -> Vec<(usize, SessionDir)> {
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut out = Vec::new();
    for (i, (item, v)) in items.into_iter().zip(visited).enumerate() {
        let dir = match item {
            WalkItem::Note(n) => {
                notes.push(StoreNote::Text(n));
                continue;
            }
            WalkItem::Dir(d) => d,
        };
        match v {
            None | Some(Visited::NotADir) => {}
            Some(Visited::Note(n)) => notes.push(StoreNote::Text(n)),
            Some(Visited::Dir { key, log }) => {
                if let Some(key) = key {
                    if !seen.insert(key) {
                        continue;
                    }
                }
                match log {
                    Ok(log) => {
                        if log.is_none() {
                            notes.push(StoreNote::NoLog {
                                session_id: dir
                                    .file_name()
                                    .map(|n| n.to_string_lossy().into_owned())
                                    .unwrap_or_default(),
                                path: dir.display().to_string(),
                            });
                        }
                        out.push((i, SessionDir { dir, log }));
                    }
                    Err(e) => notes.push(StoreNote::Text(format!(
                        "{}: unreadable directory ({e})",
                        dir.display()
                    ))),
                }
            }
        }
    }
    out
}

/// `Some(note)` when `p` is a symbolic link whose target lies outside the home `levels` directories
/// above it. Not a link, or a link that stays inside: `None`.
pub fn link_out_of_home(p: &Path, levels: usize) -> Option<String> {
    let m = fs::symlink_metadata(p).ok()?;
    if !m.file_type().is_symlink() {
        return None;
    }
    let home = p.ancestors().nth(levels)?;
    // A dangling link or a loop: reported as unreadable by the caller's own stat.
    fs::canonicalize(p).ok()?;
    if base::fsafe::resolves_inside(p, home) {
        None
    } else {
        Some(format!(
            "{}: a symbolic link out of DSH_HOME; not followed",
            p.display()
        ))
    }
}

/// Directories that could hold session `id`: `<project>/<encodeSegment(id)>` in every project.
pub fn candidate_dirs(home: &Path, id: &str) -> Vec<PathBuf> {
    if id.is_empty() {
        return Vec::new();
    }
    let seg = encode_segment(id);
    let Ok(rd) = fs::read_dir(home.join("sessions")) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path().join(&seg))
        .filter(|p| p.is_dir() && link_out_of_home(p, 3).is_none())
        .filter(|p| {
            p.parent()
                .is_some_and(|proj| link_out_of_home(proj, 2).is_none())
        })
        .collect();
    v.sort();
    v
}

#[cfg(unix)]
pub fn file_key(m: &fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
pub fn file_key(_m: &fs::Metadata) -> Option<(u64, u64)> {
    None
}

pub use crate::error::short_io;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names_only() {
        assert_eq!(parse_log_name("session.jsonl"), Some((0, Encoding::Plain)));
        assert_eq!(
            parse_log_name("session.jsonl.zstd"),
            Some((0, Encoding::Zstd))
        );
        assert_eq!(
            parse_log_name("session.v4.jsonl.zstd"),
            Some((4, Encoding::Zstd))
        );
        assert_eq!(
            parse_log_name("session.v12.jsonl"),
            Some((12, Encoding::Plain))
        );
        for bad in [
            "session.v0.jsonl",
            "session.v04.jsonl",
            "Session.jsonl",
            "session.V4.jsonl",
            "session.v4.jsonl.zstd.tmp",
            "session.jsonl.tmp",
            "session.v.jsonl",
            "session.lock",
            "x.jsonl",
        ] {
            assert_eq!(parse_log_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn newest_generation_wins() {
        let d = tempfile::tempdir().unwrap();
        for n in [
            "session.jsonl.zstd",
            "session.v3.jsonl",
            "session.v4.jsonl.zstd",
            "session.v4.jsonl",
            "session.v10.jsonl.tmp",
            "session.v05.jsonl",
            "session.lock",
        ] {
            fs::write(d.path().join(n), b"").unwrap();
        }
        let g = pick_generation(d.path()).unwrap().unwrap();
        assert_eq!((g.generation, g.enc), (4, Encoding::Zstd));
        assert!(g.path.ends_with("session.v4.jsonl.zstd"));
    }

    #[test]
    fn encode_segment_matches_the_host() {
        assert_eq!(encode_segment("session-ab12"), "session-ab12");
        assert_eq!(encode_segment("a/b~c"), "a~002Fb~007Ec");
        assert_eq!(encode_segment(".."), "~002E~002E");
        assert_eq!(encode_segment("é😀"), "~00E9~D83D~DE00");
    }
}
