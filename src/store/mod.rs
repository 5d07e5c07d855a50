//! The session-log store: read-only access to `$DSH_HOME/sessions`.
//!
//! STUB: a minimal first version so the send path can resolve targets; the store issue replaces
//! the internals (generations, torn frames, folds, the index cache) and keeps these signatures.

use std::path::{Path, PathBuf};

use serde_json::Value;

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
}

/// Where a request id was found in a session's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landing {
    /// Inserted into the inbox (an `agent/inbox/spliced` insertion) at this seq, not yet landed.
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

/// Find one session by exact id under `<home>/sessions/<project>/<id>/`.
pub fn find_session(home: &Path, id: &str) -> Option<SessionMeta> {
    let root = home.join("sessions");
    for project in std::fs::read_dir(&root).ok()?.flatten() {
        let dir = project.path().join(id);
        if !dir.is_dir() {
            continue;
        }
        for name in ["session.v4.jsonl.zstd", "session.v4.jsonl", "session.jsonl.zstd", "session.jsonl"] {
            let p = dir.join(name);
            if p.is_file() {
                let header = read_header(&p)?;
                return Some(meta_from_header(&header, p));
            }
        }
    }
    None
}

/// Look a request id up in a session's log (dedup before a resend; receipts).
pub fn find_request(_home: &Path, _session_id: &str, _rpc_id: &str) -> Option<Landing> {
    None
}

fn read_header(p: &Path) -> Option<Value> {
    use std::io::{BufRead, BufReader, Read};
    let f = std::fs::File::open(p).ok()?;
    let reader: Box<dyn Read> = if p.extension().and_then(|e| e.to_str()) == Some("zstd") {
        Box::new(zstd::stream::read::Decoder::new(f).ok()?)
    } else {
        Box::new(f)
    };
    let mut line = String::new();
    BufReader::new(reader).read_line(&mut line).ok()?;
    serde_json::from_str(&line).ok()
}

fn meta_from_header(h: &Value, log_path: PathBuf) -> SessionMeta {
    let s = |k: &str| h.get(k).and_then(Value::as_str).map(str::to_string);
    SessionMeta {
        id: s("id").unwrap_or_default(),
        cwd: s("cwd"),
        parent_session: s("parentSession"),
        origin: s("origin"),
        agent_preset: s("agentPreset"),
        created_at: h.get("createdAt").and_then(Value::as_i64),
        title: None,
        log_path,
    }
}
