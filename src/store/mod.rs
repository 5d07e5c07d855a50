//! The session-log store: read-only access to `$DSH_HOME/sessions`.
//!
//! Layers: [`layout`] (directories, generation files) → [`frames`] (zstd frames, bounded lines)
//! → [`events`] (header and envelope) → [`fold`] (title, surface, requests) → [`index`] (the
//! per-log incremental cache). [`log`] drives a file through a fold and fetches message text.
//!
//! Nothing here writes, renames, or takes `session.lock`: files are opened read-only.

pub mod events;
pub mod fold;
pub mod frames;
pub mod index;
pub mod layout;
pub mod log;
#[cfg(test)]
pub(crate) mod testgen;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use events::Header;
pub use fold::{Fold, RequestTrace};
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
        self.origin.as_deref() == Some("subagent")
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

/// Where a request id was found in a session's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landing {
    /// Inserted into the inbox (an `agent/inbox/spliced` insertion) at this seq, not yet landed.
    /// Also returned when the insertion was later canceled (the host accepted it once; a resend
    /// would undo the cancel) — see [`request_trace`] for the detail.
    Queued { seq: u64, target: String },
    /// Landed as a `user/message` at this seq (turn if known).
    Landed { seq: u64, turn: Option<u64> },
}

/// Resolve DSH_HOME as the host does: explicit → `$DSH_HOME` (blank = unset, `~` expanded) → `~/.dsh`.
/// [R8 `packages/util/home-paths/src/index.ts` `resolveDshHome`]
pub fn resolve_dsh_home(explicit: Option<&str>) -> PathBuf {
    fn expand(p: &str) -> PathBuf {
        let home = std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE")).map(PathBuf::from).unwrap_or_default();
        if p == "~" {
            home
        } else if let Some(rest) = p.strip_prefix("~/").or_else(|| p.strip_prefix("~\\")) {
            home.join(rest)
        } else {
            PathBuf::from(p)
        }
    }
    if let Some(e) = explicit.map(str::trim).filter(|s| !s.is_empty()) {
        return expand(e);
    }
    if let Ok(v) = std::env::var("DSH_HOME") {
        if !v.trim().is_empty() {
            return expand(v.trim());
        }
    }
    expand("~").join(".dsh")
}

/// One session found on disk, folded.
#[derive(Debug, Clone)]
pub struct StoredSession {
    pub meta: SessionMeta,
    pub log: LogFile,
    pub fold: Arc<Fold>,
}

/// Every readable session under a home, plus notes about what could not be read.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub sessions: Vec<StoredSession>,
    /// `<path relative to $DSH_HOME/sessions>: <what>`.
    pub notes: Vec<String>,
}

/// The result of looking one id up.
#[derive(Debug, Clone)]
pub enum Lookup {
    Found(StoredSession),
    /// A directory for that id exists but its log cannot be used: (path note, reason).
    Unreadable(String),
    NotFound,
}

fn rel(home: &Path, p: &Path) -> String {
    p.strip_prefix(home.join("sessions")).unwrap_or(p).display().to_string()
}

fn stored(home: &Path, s: index::Scanned, notes: &mut Vec<String>) -> Option<StoredSession> {
    let log = s.log?;
    let where_ = rel(home, &log.path);
    let fold = match s.fold {
        Ok(f) => f,
        Err(e) => {
            notes.push(format!("{where_}: {e}"));
            return None;
        }
    };
    let Some(h) = fold.header.as_ref() else {
        let why = fold.header_error.clone().unwrap_or_else(|| "empty log (no header line)".into());
        notes.push(format!("{where_}: {why}"));
        return None;
    };
    if !fold.notes.is_empty() {
        notes.push(format!("{where_}: {}", fold.notes.summary()));
    }
    let meta = SessionMeta::from_header(h, fold.display_title(), log.path.clone());
    Some(StoredSession { meta, log, fold })
}

/// List every session under `home` (cached, incremental, parallel on a cold start).
pub fn list_sessions(home: &Path) -> Listing {
    let mut raw_notes = Vec::new();
    let scanned = index::scan(home, &mut raw_notes);
    let mut notes: Vec<String> = raw_notes
        .into_iter()
        .map(|n| n.strip_prefix(&format!("{}/", home.join("sessions").display())).map(str::to_string).unwrap_or(n))
        .collect();
    let mut sessions = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for s in scanned {
        if let Some(st) = stored(home, s, &mut notes) {
            if seen.insert(st.meta.id.clone()) {
                sessions.push(st);
            } else {
                notes.push(format!("{}: duplicate session id {}; ignored", rel(home, &st.log.path), st.meta.id));
            }
        }
    }
    Listing { sessions, notes }
}

/// Look one session up by exact id: first in `<project>/<encodeSegment(id)>`, then (if the
/// directory name does not match) by header id over the whole corpus.
pub fn load_session(home: &Path, id: &str) -> Lookup {
    let mut unreadable = None;
    for dir in layout::candidate_dirs(home, id) {
        let log = match layout::pick_generation(&dir) {
            Ok(Some(l)) => l,
            Ok(None) => {
                unreadable = Some(format!("{}: no session log", rel(home, &dir)));
                continue;
            }
            Err(e) => {
                unreadable = Some(format!("{}: unreadable directory ({})", rel(home, &dir), layout::short_io(&e)));
                continue;
            }
        };
        let mut notes = Vec::new();
        let fold = index::load_log(&log);
        match stored(home, index::Scanned { dir, log: Some(log), fold }, &mut notes) {
            Some(st) if st.meta.id == id => return Lookup::Found(st),
            Some(_) => {}
            None => unreadable = notes.pop(),
        }
    }
    if let Some(u) = unreadable {
        return Lookup::Unreadable(u);
    }
    match list_sessions(home).sessions.into_iter().find(|s| s.meta.id == id) {
        Some(s) => Lookup::Found(s),
        None => Lookup::NotFound,
    }
}

/// Find one session by exact id under `<home>/sessions/<project>/<id>/`.
pub fn find_session(home: &Path, id: &str) -> Option<SessionMeta> {
    match load_session(home, id) {
        Lookup::Found(s) => Some(s.meta),
        _ => None,
    }
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
/// else an `agent/inbox/spliced` insertion carrying it → Queued.
/// [R8/Z17 `core/agent-loop/src/agent.ts` `step()` appends claimed messages as `user/message`
/// with the inserted message's source; `inbox.ts` `mutate`]
pub fn find_request(home: &Path, session_id: &str, rpc_id: &str) -> Option<Landing> {
    let t = request_trace(home, session_id, rpc_id)?;
    if let Some((seq, turn)) = t.landed {
        return Some(Landing::Landed { seq, turn });
    }
    t.queued.map(|(seq, target)| Landing::Queued { seq, target })
}
