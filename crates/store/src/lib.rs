//! dsh-session-mail store: read-only access to `$DSH_HOME/sessions` (the DSH session logs). It
//! knows nothing of mail: it reads logs, folds them and says what became of a request id.
//!
//! Layers: [`layout`] (directories, generation files) → [`frames`] (zstd frames, bounded lines)
//! → [`events`] (header and envelope) → [`fold`] (title, surface, requests) → [`index`] (the
//! per-log incremental cache). [`log`] drives a file through a fold and fetches message text.
//!
//! Nothing here writes, renames, or takes `session.lock`: files are opened read-only.

pub mod brief;
pub mod checkpoint;
pub mod classify;
pub mod error;
pub mod events;
pub mod fate;
pub mod fold;
pub mod frames;
pub mod index;
pub mod layout;
pub mod listindex;
pub mod log;
#[cfg(any(test, feature = "testgen"))]
pub mod testgen;
#[cfg(test)]
mod tests;
mod threshold;
pub mod title;
pub mod watch;
pub mod window;

use std::path::{Path, PathBuf};

pub use fate::Fate;
use std::sync::Arc;

pub use events::Header;
pub use fold::{Cancel, Fold, RequestTrace};
pub use layout::LogFile;

/// What the send path needs to know about a session found on disk.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionMeta {
    pub id: String,
    pub cwd: Option<String>,
    pub parent_session: Option<String>,
    pub origin: Option<String>,
    pub agent_preset: Option<String>,
    pub created_at: Option<i64>,
    pub title: Option<String>,
    pub log_path: PathBuf,
}

impl SessionMeta {
    /// A subagent session (header `origin: "subagent"`). Forks (parentSession without origin) are top-level.
    pub fn is_subagent(&self) -> bool {
        events::is_subagent_origin(self.origin.as_deref())
    }

    /// A fork: `parentSession` without `origin` [Z17 `session-controller/src/commands.ts` `fork`].
    pub fn is_fork(&self) -> bool {
        self.parent_session.is_some() && !self.is_subagent()
    }

    /// Build from a header (and the fold's title).
    pub fn from_header(h: &Header, title: Option<&str>, log_path: PathBuf) -> SessionMeta {
        SessionMeta {
            id: h.id.clone(),
            cwd: h.cwd.clone(),
            parent_session: h.parent_session.clone(),
            origin: h.origin.clone(),
            agent_preset: h.agent_preset.clone(),
            created_at: h.created_at,
            title: title.map(str::to_string),
            log_path,
        }
    }
}

pub use base::home::resolve_dsh_home;

/// One session found on disk, folded.
#[derive(Debug, Clone)]
pub struct StoredSession {
    pub meta: SessionMeta,
    pub log: LogFile,
    pub fold: Arc<Fold>,
}

/// A note about something under `$DSH_HOME/sessions` that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreNote {
    /// A session folder without a session log: a live session that has not flushed its first batch
    /// yet, or debris. `path` is the folder (relative to `$DSH_HOME/sessions` in a listing).
    NoLog { session_id: String, path: String },
    /// `<path>: <what>`, already phrased where it was found.
    Text(String),
}

/// Every readable session under a home, plus notes about what could not be read.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub sessions: Vec<StoredSession>,
    /// What could not be read (paths relative to `$DSH_HOME/sessions`).
    pub notes: Vec<StoreNote>,
}

/// The result of looking one id up.
#[derive(Debug, Clone)]
pub enum Lookup {
    Found(StoredSession),
    /// A directory for that id exists but its log cannot be used.
    Unreadable(Unreadable),
    NotFound,
}

/// A session folder whose log cannot be used: where (relative to `$DSH_HOME/sessions`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub path: String,
    pub why: UnreadableWhy,
}

/// Why a session folder's log cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnreadableWhy {
    /// The folder holds no session log.
    NoLog,
    /// The folder could not be read.
    Dir(error::IoError),
    /// The log could not be opened or read.
    Read(error::ReadError),
    /// Its first line is no session header (the fold's reason, kept as the fold keeps it).
    Header(String),
    /// The log is empty (no header line).
    Empty,
    /// Its header claims another id than the folder is named after.
    Mismatch { claimed: String },
}

impl std::fmt::Display for UnreadableWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnreadableWhy::NoLog => f.write_str("no session log"),
            UnreadableWhy::Dir(e) => write!(f, "unreadable directory ({e})"),
            UnreadableWhy::Read(e) => e.fmt(f),
            UnreadableWhy::Header(why) => f.write_str(why),
            UnreadableWhy::Empty => f.write_str("empty log (no header line)"),
            UnreadableWhy::Mismatch { claimed } => write!(
                f,
                "its header claims the id {} but the folder is not named after it; not listed",
                base::text::show_id(claimed)
            ),
        }
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.why)
    }
}

fn rel(home: &Path, p: &Path) -> String {
    p.strip_prefix(home.join("sessions"))
        .unwrap_or(p)
        .display()
        .to_string()
}

/// The host names a session's folder `encodeSegment(id)` [R8 `format.ts` `sessionDir`]. A header
/// that claims another id is not that session: it would take over another session's row (its cwd,
/// title, subagent flag) while read and send use the real one.
pub fn folder_matches(log: &LogFile, id: &str) -> bool {
    log.path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == layout::encode_segment(id))
}

/// Why a header is no usable session header for its folder: none, or another id's.
fn header_why(
    header: Option<&Header>,
    error: Option<&String>,
    log: &LogFile,
) -> Option<UnreadableWhy> {
    match header {
        None => Some(error.map_or(UnreadableWhy::Empty, |e| UnreadableWhy::Header(e.clone()))),
        Some(h) if !folder_matches(log, &h.id) => Some(UnreadableWhy::Mismatch {
            claimed: h.id.clone(),
        }),
        Some(_) => None,
    }
}

/// The session of one scanned folder, or why its log cannot be used (a note then says so).
fn stored(home: &Path, s: index::Scanned, notes: &mut Vec<StoreNote>) -> Option<StoredSession> {
    let log = s.log?;
    match stored_or_why(&log, s.fold) {
        Ok(st) => {
            if !st.fold.notes.is_empty() {
                notes.push(StoreNote::Text(format!(
                    "{}: {}",
                    rel(home, &log.path),
                    st.fold.notes.summary()
                )));
            }
            Some(st)
        }
        Err(why) => {
            notes.push(StoreNote::Text(
                Unreadable {
                    path: rel(home, &log.path),
                    why,
                }
                .to_string(),
            ));
            None
        }
    }
}

fn stored_or_why(
    log: &LogFile,
    fold: Result<Arc<Fold>, error::ReadError>,
) -> Result<StoredSession, UnreadableWhy> {
    let fold = fold.map_err(UnreadableWhy::Read)?;
    if let Some(why) = header_why(fold.header.as_ref(), fold.header_error.as_ref(), log) {
        return Err(why);
    }
    let h = fold.header.as_ref().expect("checked");
    let meta = SessionMeta::from_header(h, fold.display_title(), log.path.clone());
    Ok(StoredSession {
        meta,
        log: log.clone(),
        fold,
    })
}

/// List every session under `home` (cached, incremental, parallel on a cold start).
pub fn list_sessions(home: &Path) -> Listing {
    let mut raw_notes = Vec::new();
    let scanned = index::scan(home, &mut raw_notes);
    let mut notes = strip_notes(home, raw_notes);
    let mut sessions = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for s in scanned {
        if let Some(st) = stored(home, s, &mut notes) {
            if seen.insert(st.meta.id.clone()) {
                sessions.push(st);
            } else {
                notes.push(StoreNote::Text(format!(
                    "{}: duplicate session id {}; ignored",
                    rel(home, &st.log.path),
                    st.meta.id
                )));
            }
        }
    }
    Listing { sessions, notes }
}

/// One session as a listing sees it: its log and its brief (the header is always there).
#[derive(Debug, Clone)]
pub struct BriefSession {
    pub log: LogFile,
    pub brief: Arc<brief::Brief>,
}

impl BriefSession {
    pub fn header(&self) -> &Header {
        self.brief
            .header
            .as_ref()
            .expect("a listed brief has a header")
    }

    pub fn meta(&self) -> SessionMeta {
        SessionMeta::from_header(
            self.header(),
            self.brief.display_title(),
            self.log.path.clone(),
        )
    }
}

/// Every readable session under a home as a listing needs it (header and title, not the full
/// fold), plus notes about what could not be read. Warm and unchanged: one `stat` per log.
#[derive(Debug, Clone, Default)]
pub struct BriefListing {
    pub sessions: Vec<BriefSession>,
    pub notes: Vec<StoreNote>,
    /// Each session's place in `sessions`, by header id (ids are unique there).
    pub by_id: std::collections::HashMap<String, usize>,
    /// Each session's sort and filter keys, in the order of `sessions` (see [`ListKey`]).
    pub keys: Vec<ListKey>,
}

/// What a listing sorts and filters 20,000 sessions by, next to each other in memory: read from
/// each session's header (one allocation each, spread over the heap), they cost every warm
/// listing a cache miss or two per session (issue 18). A listing patched in place keeps its
/// keys: a patch never changes them (see `index::list_cached`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListKey {
    /// The header's `createdAt` (0 when it has none).
    pub created_at: i64,
    /// [`Header::is_subagent`].
    pub subagent: bool,
    /// The place in `sessions` of the first session of the run of sessions next to this one
    /// with the same header `cwd` (sessions of one project folder mostly share it).
    pub cwd_run: u32,
}

impl ListKey {
    /// Whether a change from header `a` to header `b` leaves a session's key as it is.
    pub fn same(a: &Header, b: &Header) -> bool {
        a.created_at == b.created_at && a.origin == b.origin && a.cwd == b.cwd
    }
}

fn list_keys(sessions: &[BriefSession]) -> Vec<ListKey> {
    let mut keys = Vec::with_capacity(sessions.len());
    let mut run: Option<(u32, Option<&str>)> = None;
    for (i, s) in sessions.iter().enumerate() {
        let h = s.header();
        let cwd = h.cwd.as_deref();
        let start = match run {
            Some((r, c)) if c == cwd => r,
            _ => {
                let r = u32::try_from(i).unwrap_or(u32::MAX);
                run = Some((r, cwd));
                r
            }
        };
        keys.push(ListKey {
            created_at: h.created_at.unwrap_or(0),
            subagent: h.is_subagent(),
            cwd_run: start,
        });
    }
    keys
}

fn strip_notes(home: &Path, raw: Vec<StoreNote>) -> Vec<StoreNote> {
    let prefix = format!("{}/", home.join("sessions").display());
    let strip = |n: String| n.strip_prefix(&prefix).map(str::to_string).unwrap_or(n);
    raw.into_iter()
        .map(|n| match n {
            StoreNote::NoLog { session_id, path } => StoreNote::NoLog {
                session_id,
                path: strip(path),
            },
            StoreNote::Text(t) => StoreNote::Text(strip(t)),
        })
        .collect()
}

/// List every session under `home` for a listing (cached, incremental, parallel on a cold start).
/// Notes: see [`brief`] (header, frame structure, titles; line problems are `sessions_read`'s).
pub fn list_briefs(home: &Path) -> BriefListing {
    let mut raw_notes = Vec::new();
    let scanned = index::scan_briefs(home, &mut raw_notes);
    briefs_listing(home, scanned, raw_notes)
}

/// [`list_briefs`] for `sessions_list`: reuses what the last listing of this home saw for sessions
/// that cannot be changing now. `hot`: ids of sessions live in this process or another one (always
/// re-checked). Staleness: see [`index::list_cached`] (at most [`index::LIST_STALE`] for a
/// log appended by a writer that publishes no presence; none for new, removed or hot sessions).
/// Shared: while nothing it shows changed, the same listing comes back.
pub fn list_briefs_cached<'a>(
    home: &Path,
    hot: impl IntoIterator<Item = &'a str>,
) -> Arc<BriefListing> {
    let hot: std::collections::HashSet<String> =
        hot.into_iter().map(layout::encode_segment).collect();
    index::list_cached(home, &hot)
}

fn briefs_listing(
    home: &Path,
    scanned: Vec<index::Briefed>,
    raw_notes: Vec<StoreNote>,
) -> BriefListing {
    let mut notes = strip_notes(home, raw_notes);
    let mut sessions = Vec::with_capacity(scanned.len());
    let mut by_id = std::collections::HashMap::with_capacity(scanned.len());
    for s in scanned {
        let Some(log) = s.log else { continue };
        let where_ = |log: &LogFile| rel(home, &log.path);
        let unusable = |why| {
            StoreNote::Text(
                Unreadable {
                    path: where_(&log),
                    why,
                }
                .to_string(),
            )
        };
        let b = match s.brief {
            Ok(b) => b,
            Err(e) => {
                notes.push(unusable(UnreadableWhy::Read(e)));
                continue;
            }
        };
        if let Some(why) = header_why(b.header.as_ref(), b.header_error.as_ref(), &log) {
            notes.push(unusable(why));
            continue;
        }
        let h = b.header.as_ref().expect("checked");
        if !b.notes.is_empty() {
            notes.push(StoreNote::Text(format!(
                "{}: {}",
                where_(&log),
                b.notes.summary()
            )));
        }
        match by_id.entry(h.id.clone()) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(sessions.len());
                sessions.push(BriefSession { log, brief: b });
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                notes.push(StoreNote::Text(format!(
                    "{}: duplicate session id {}; ignored",
                    where_(&log),
                    h.id
                )));
            }
        }
    }
    BriefListing {
        keys: list_keys(&sessions),
        sessions,
        notes,
        by_id,
    }
}

/// Look one session up by exact id in `<project>/<encodeSegment(id)>` (a header id must match its
/// folder; a folder whose header claims another id is not that session).
pub fn load_session(home: &Path, id: &str) -> Lookup {
    lookup(home, id, index::load_log)
}

/// [`load_session`] for `sessions_read`: the fold may be read from the log's end
/// ([`index::load_log_for_read`]; its requests are not known, [`fold::Fold::is_window`]).
pub fn load_session_for_read(home: &Path, id: &str) -> Lookup {
    lookup(home, id, index::load_log_for_read)
}

fn lookup(
    home: &Path,
    id: &str,
    load: fn(&LogFile) -> Result<Arc<Fold>, error::ReadError>,
) -> Lookup {
    let mut unreadable = None;
    for dir in layout::candidate_dirs(home, id) {
        let log = match layout::pick_generation(&dir) {
            Ok(Some(l)) => l,
            Ok(None) => {
                unreadable = Some(Unreadable {
                    path: rel(home, &dir),
                    why: UnreadableWhy::NoLog,
                });
                continue;
            }
            Err(e) => {
                unreadable = Some(Unreadable {
                    path: rel(home, &dir),
                    why: UnreadableWhy::Dir(e.into()),
                });
                continue;
            }
        };
        match stored_or_why(&log, load(&log)) {
            Ok(st) if st.meta.id == id => return Lookup::Found(st),
            Ok(_) => {}
            Err(why) => {
                unreadable = Some(Unreadable {
                    path: rel(home, &log.path),
                    why,
                })
            }
        }
    }
    if let Some(u) = unreadable {
        return Lookup::Unreadable(u);
    }
    // Only a folder named after the id can hold it (see [`folder_matches`]).
    Lookup::NotFound
}

/// Find one session by exact id under `<home>/sessions/<project>/<id>/`.
/// Only the header and the title are read (a brief), never the full fold.
pub fn find_session(home: &Path, id: &str) -> Option<SessionMeta> {
    let mut unreadable = false;
    for dir in layout::candidate_dirs(home, id) {
        let log = match layout::pick_generation(&dir) {
            Ok(Some(l)) => l,
            _ => {
                unreadable = true;
                continue;
            }
        };
        match index::load_brief(&log) {
            Ok(b) => match &b.header {
                Some(h) if h.id == id => {
                    return Some(SessionMeta::from_header(
                        h,
                        b.display_title(),
                        log.path.clone(),
                    ))
                }
                Some(_) => {}
                None => unreadable = true,
            },
            Err(_) => unreadable = true,
        }
    }
    let _ = unreadable;
    // Only a folder named after the id can hold it (see [`folder_matches`]).
    None
}

/// Everything the log says about one request id (`source.rpcId`) in one session, ignoring the
/// part a fork inherited from its parent.
pub fn request_trace(home: &Path, session_id: &str, rpc_id: &str) -> Option<RequestTrace> {
    match load_session(home, session_id) {
        Lookup::Found(s) => s.fold.requests.get(rpc_id).cloned(),
        _ => None,
    }
}

/// Look a request id up in a session's log (dedup before a resend; receipts).
/// `user/message` with that `source.rpcId` → Landed (seq, turn of the enclosing `turn/start`);
/// else an `agent/inbox/spliced` insertion carrying it → Queued (Canceled when it was removed with
/// `outcome: canceled`); the one request-fate model, [`fate::Fate`] (`None`: not in that log).
/// [R8/Z17 `core/agent-loop/src/agent.ts` `step()` appends claimed messages as `user/message`
/// with the inserted message's source; `inbox.ts` `mutate`]
pub fn find_request(home: &Path, session_id: &str, rpc_id: &str) -> Option<Fate> {
    let t = request_trace(home, session_id, rpc_id)?;
    Some(fate::fate_of(&t)).filter(|f| *f != Fate::Unknown)
}

/// [`find_request`] of several request ids of one session, in their order: the session's log is found
/// and its fold taken once for all of them (the stacking guard looks up to 16 ids of one target; each
/// [`find_request`] would look the session's folder up again).
pub fn find_requests(home: &Path, session_id: &str, rpc_ids: &[String]) -> Vec<Option<Fate>> {
    match load_session(home, session_id) {
        Lookup::Found(s) => rpc_ids
            .iter()
            .map(|id| {
                s.fold
                    .requests
                    .get(id)
                    .map(fate::fate_of)
                    .filter(|f| *f != Fate::Unknown)
            })
            .collect(),
        _ => vec![None; rpc_ids.len()],
    }
}
