//! The listing index: what a listing saw of each session folder of one home (the folder's
//! identity, the log it picked, that log's identity and its brief), persisted so the first listing
//! of a fresh process looks at each folder (two `fstatat`s) instead of opening and decoding every
//! log (issue 18: a cold listing of 20,000 sessions cost 0.7–1.6 s, nearly all of it the briefs).
//!
//! One file per home, `<cache>/list-index/<sha256(home)>.lidx`, `<cache>` as for the read
//! checkpoint ([`crate::checkpoint`]): **outside** `DSH_HOME`.
//! - **Derived**: each entry is what `brief::scan` returned for a log; deleting the folder costs
//!   one slow listing.
//! - **Bounded**: at most [`MAX_ENTRIES`] entries and [`MAX_FILE`] bytes a file, at most
//!   [`MAX_FILES`] homes (the least recently written go).
//! - **Private**: the folder 0700 and ours, files and key 0600 (the checkpoint's rules).
//! - **Never trusted blindly**: an HMAC-SHA256 ([`base::seal`], its own key in the same folder) of
//!   the body, which names its home: a file this code did not write, edited, or made for another
//!   home is not used. An entry is used only for a folder that is still a folder (not a link) of
//!   the same identity and the same settled mtime, whose log (same name) is a regular file of the
//!   same device, inode, size, mtime **and ctime** (which no one can set back: any write, rename
//!   or `utimes` after the entry was taken moves it): anything else is looked at as without an
//!   index. A planted or stale file changes no answer, it only costs the time the index saves.
//!
//! `DSH_SESSION_MAIL_NO_LIST_INDEX=1` turns it off (the bench's baseline).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::brief::Brief;
use crate::events::Header;
use crate::fold::Notes;

/// Most entries one index holds (the brief cache's size).
pub const MAX_ENTRIES: usize = 65_536;
/// Most bytes one index file may hold.
pub const MAX_FILE: u64 = 64 * 1024 * 1024;
/// Most homes with an index.
pub const MAX_FILES: usize = 8;
/// A listing that had to brief at least this many logs itself leaves an index.
pub const PERSIST_MIN: usize = if cfg!(test) { 4 } else { 256 };
const VERSION: u32 = 1;
const DIR: &str = "list-index";
const DOMAIN: &[u8] = b"dsh-session-mail list-index\0";

pub(crate) fn disabled() -> bool {
    std::env::var_os("DSH_SESSION_MAIL_NO_LIST_INDEX").is_some_and(|v| !v.is_empty() && v != "0")
}

/// A time as (seconds, nanoseconds) since the epoch.
pub(crate) type Stamp = (i64, i64);

/// One session folder as a listing saw it (short field names: 20,000 of them are read by the
/// first listing of a process).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Entry {
    /// The session folder's name in its project folder.
    #[serde(rename = "n")]
    pub name: String,
    #[serde(rename = "dk")]
    pub dir_key: (u64, u64),
    #[serde(rename = "dm")]
    pub dir_mtime: Stamp,
    /// The folder's ctime when the entry was written.
    #[serde(rename = "dc")]
    pub dir_ctime: Stamp,
    /// The log's file name in the session folder.
    #[serde(rename = "l")]
    pub log: String,
    #[serde(rename = "z")]
    pub zstd: bool,
    #[serde(rename = "g")]
    pub generation: u32,
    #[serde(rename = "lk")]
    pub log_key: (u64, u64),
    #[serde(rename = "s")]
    pub size: u64,
    #[serde(rename = "m")]
    pub mtime: Stamp,
    #[serde(rename = "c")]
    pub ctime: Stamp,
    #[serde(rename = "b")]
    pub brief: Compact,
}

/// A [`Brief`] without its empty fields.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Compact {
    #[serde(rename = "h", default, skip_serializing_if = "Option::is_none")]
    header: Option<CompactHeader>,
    #[serde(rename = "he", default, skip_serializing_if = "Option::is_none")]
    header_error: Option<String>,
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    #[serde(rename = "f", default, skip_serializing_if = "Option::is_none")]
    fallback_title: Option<String>,
    #[serde(rename = "no", default, skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    #[serde(rename = "nm", default, skip_serializing_if = "is_zero")]
    more: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A [`Header`] without its empty fields.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct CompactHeader {
    #[serde(rename = "v", default, skip_serializing_if = "Option::is_none")]
    version: Option<i64>,
    #[serde(rename = "i")]
    id: String,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    created_at: Option<i64>,
    #[serde(rename = "w", default, skip_serializing_if = "Option::is_none")]
    cwd: Option<String>,
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    parent_session: Option<String>,
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    origin: Option<String>,
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    agent_preset: Option<String>,
    #[serde(rename = "sl", default, skip_serializing_if = "Option::is_none")]
    seed_length: Option<u64>,
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    is_seeded: Option<bool>,
}

impl From<&Brief> for Compact {
    fn from(b: &Brief) -> Compact {
        Compact {
            header: b.header.as_ref().map(|h| CompactHeader {
                version: h.version,
                id: h.id.clone(),
                created_at: h.created_at,
                cwd: h.cwd.clone(),
                parent_session: h.parent_session.clone(),
                origin: h.origin.clone(),
                agent_preset: h.agent_preset.clone(),
                seed_length: h.seed_length,
                is_seeded: h.is_seeded,
            }),
            header_error: b.header_error.clone(),
            title: b.title.clone(),
            fallback_title: b.fallback_title.clone(),
            notes: b.notes.items.clone(),
            more: b.notes.more,
        }
    }
}

impl From<Compact> for Brief {
    /// By value: the first listing of a process takes 20,000 of them (a copy each cost it
    /// five string allocations per session).
    fn from(c: Compact) -> Brief {
        Brief {
            header: c.header.map(|h| Header {
                version: h.version,
                id: h.id,
                created_at: h.created_at,
                cwd: h.cwd,
                parent_session: h.parent_session,
                origin: h.origin,
                agent_preset: h.agent_preset,
                seed_length: h.seed_length,
                is_seeded: h.is_seeded,
            }),
            header_error: c.header_error,
            title: c.title,
            fallback_title: c.fallback_title,
            notes: Notes {
                items: c.notes,
                more: c.more,
            },
        }
    }
}

#[derive(serde::Serialize)]
struct Body {
    v: u32,
    home: String,
    /// Per project folder (its path), its entries.
    projects: Vec<(String, Vec<Entry>)>,
}

/// [`Body`] as read: each project's entries left as raw JSON, parsed on the cores in parallel
/// (one thread parsed the 7.9 MB of a 20,000-session index in 100–300 ms, issue 18).
#[derive(serde::Deserialize)]
struct RawBody<'a> {
    v: u32,
    home: String,
    #[serde(borrow)]
    projects: Vec<(String, &'a serde_json::value::RawValue)>,
}

/// The entries of one project folder, by folder name.
pub(crate) type ProjectIndex = HashMap<String, Entry>;

/// The folder of the indexes (None: none kept). Taken by the caller's thread (tests give theirs
/// a folder of their own) and handed to a background [`save`].
pub(crate) fn dir() -> Option<PathBuf> {
    if disabled() {
        return None;
    }
    Some(crate::checkpoint::cache_dir()?.join(DIR))
}

fn file_name(home: &Path) -> String {
    let h = Sha256::digest(home.as_os_str().as_encoded_bytes());
    format!("{}.lidx", base::text::hex(&h[..16]))
}

/// The index of `home`, per project folder and folder name, if there is one that checks out.
pub(crate) fn load(dir: &Path, home: &Path) -> Option<HashMap<PathBuf, ProjectIndex>> {
    let home_s = home.to_str()?;
    crate::checkpoint::read_sealed(dir, &file_name(home), DOMAIN, MAX_FILE, |body| {
        let b: RawBody = serde_json::from_slice(body).ok()?;
        if b.v != VERSION || b.home != home_s {
            return None;
        }
        let parsed = parse_projects(&b.projects)?;
        let mut n = 0usize;
        let mut out = HashMap::with_capacity(parsed.len());
        for ((p, _), entries) in b.projects.iter().zip(parsed) {
            n += entries.len();
            if n > MAX_ENTRIES {
                return None;
            }
            out.insert(PathBuf::from(p), entries);
        }
        Some(out)
    })
}

/// Each project's entries, parsed on up to 8 threads (the available cores); None if one does
/// not parse.
fn parse_projects(
    projects: &[(String, &serde_json::value::RawValue)],
) -> Option<Vec<ProjectIndex>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let parse = |raw: &serde_json::value::RawValue| -> Option<ProjectIndex> {
        let entries: Vec<Entry> = serde_json::from_str(raw.get()).ok()?;
        if entries.len() > MAX_ENTRIES {
            return None;
        }
        Some(
            entries
                .into_iter()
                .map(|mut e| (std::mem::take(&mut e.name), e))
                .collect(),
        )
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .clamp(1, 8)
        .min(projects.len());
    if workers <= 1 {
        return projects.iter().map(|(_, raw)| parse(raw)).collect();
    }
    let slots: Vec<Mutex<Option<Option<ProjectIndex>>>> =
        projects.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some((_, raw)) = projects.get(i) else {
            break;
        };
        let r = parse(raw);
        *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    };
    std::thread::scope(|s| {
        for _ in 1..workers {
            s.spawn(work);
        }
        work();
    });
    slots
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()).flatten())
        .collect()
}

/// Persist the index of `home` (per project folder path, its entries). Quietly nothing when the
/// folder is not ours or not private, or the index would be too big.
pub(crate) fn save(dir: &Path, home: &Path, projects: Vec<(PathBuf, Vec<Entry>)>) {
    let _ = try_save(dir, home, projects);
}

fn try_save(dir: &Path, home: &Path, projects: Vec<(PathBuf, Vec<Entry>)>) -> Option<()> {
    let home_s = home.to_str()?.to_string();
    let mut n = 0usize;
    let mut body_projects = Vec::with_capacity(projects.len());
    for (p, entries) in projects {
        n += entries.len();
        if n > MAX_ENTRIES {
            return None;
        }
        body_projects.push((p.to_str()?.to_string(), entries));
    }
    let body = serde_json::to_vec(&Body {
        v: VERSION,
        home: home_s,
        projects: body_projects,
    })
    .ok()?;
    crate::checkpoint::write_sealed(
        dir,
        &file_name(home),
        DOMAIN,
        &body,
        MAX_FILE,
        (".lidx", MAX_FILES),
    )
}

/// The index file of `home` (tests forge and damage it).
#[cfg(test)]
pub(crate) fn path_of(dir: &Path, home: &Path) -> PathBuf {
    dir.join(file_name(home))
}
