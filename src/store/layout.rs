//! On-disk layout: `$DSH_HOME/sessions/<project>/<session>/<generation file>`
//! [R8 and Z17 `packages/session/session-persistence-jsonl/src/format.ts` `projectDir`, `sessionDir`, `logPath`].

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::log::Encoding;

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
        let Some((generation, enc)) = name.to_str().and_then(parse_log_name) else { continue };
        let path = entry.path();
        if !path.is_file() {
            continue;
        }
        let better = match &best {
            None => true,
            Some(b) => generation > b.generation || (generation == b.generation && enc == Encoding::Zstd && b.enc == Encoding::Plain),
        };
        if better {
            best = Some(LogFile { path, enc, generation });
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
        let c = char::from_u32(u32::from(unit)).filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        match c {
            Some(c) => out.push(c),
            None => out.push_str(&format!("~{unit:04X}")),
        }
    }
    out
}

/// A session directory found by the walk.
#[derive(Debug, Clone)]
pub struct SessionDir {
    pub dir: PathBuf,
    pub log: Option<LogFile>,
}

/// Walk `<home>/sessions/*/*`. Unreadable directories, symlink loops and other oddities become
/// notes; the walk goes on. Each physical directory is visited once (symlink aliases).
pub fn walk(home: &Path, notes: &mut Vec<String>) -> Vec<SessionDir> {
    let root = home.join("sessions");
    let mut out = Vec::new();
    let projects = match fs::read_dir(&root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            notes.push(format!("{}: unreadable directory ({e})", root.display()));
            return out;
        }
    };
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut projects: Vec<PathBuf> = projects.flatten().map(|e| e.path()).collect();
    projects.sort();
    for project in projects {
        match fs::metadata(&project) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => continue, // a stray file
            Err(e) => {
                notes.push(format!("{}: unreadable ({})", project.display(), short_io(&e)));
                continue;
            }
        }
        let sessions = match fs::read_dir(&project) {
            Ok(rd) => rd,
            Err(e) => {
                notes.push(format!("{}: unreadable directory ({})", project.display(), short_io(&e)));
                continue;
            }
        };
        let mut dirs: Vec<PathBuf> = sessions.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs {
            let meta = match fs::metadata(&dir) {
                Ok(m) => m,
                Err(e) => {
                    notes.push(format!("{}: unreadable ({})", dir.display(), short_io(&e)));
                    continue;
                }
            };
            if !meta.is_dir() {
                continue;
            }
            if let Some(key) = file_key(&meta) {
                if !seen.insert(key) {
                    continue;
                }
            }
            match pick_generation(&dir) {
                Ok(log) => {
                    if log.is_none() {
                        notes.push(format!("{}: no session log", dir.display()));
                    }
                    out.push(SessionDir { dir, log });
                }
                Err(e) => notes.push(format!("{}: unreadable directory ({})", dir.display(), short_io(&e))),
            }
        }
    }
    out
}

/// Directories that could hold session `id`: `<project>/<encodeSegment(id)>` in every project.
pub fn candidate_dirs(home: &Path, id: &str) -> Vec<PathBuf> {
    if id.is_empty() {
        return Vec::new();
    }
    let seg = encode_segment(id);
    let Ok(rd) = fs::read_dir(home.join("sessions")) else { return Vec::new() };
    let mut v: Vec<PathBuf> = rd.flatten().map(|e| e.path().join(&seg)).filter(|p| p.is_dir()).collect();
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

pub fn short_io(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names_only() {
        assert_eq!(parse_log_name("session.jsonl"), Some((0, Encoding::Plain)));
        assert_eq!(parse_log_name("session.jsonl.zstd"), Some((0, Encoding::Zstd)));
        assert_eq!(parse_log_name("session.v4.jsonl.zstd"), Some((4, Encoding::Zstd)));
        assert_eq!(parse_log_name("session.v12.jsonl"), Some((12, Encoding::Plain)));
        for bad in ["session.v0.jsonl", "session.v04.jsonl", "Session.jsonl", "session.V4.jsonl", "session.v4.jsonl.zstd.tmp", "session.jsonl.tmp", "session.v.jsonl", "session.lock", "x.jsonl"] {
            assert_eq!(parse_log_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn newest_generation_wins() {
        let d = tempfile::tempdir().unwrap();
        for n in ["session.jsonl.zstd", "session.v3.jsonl", "session.v4.jsonl.zstd", "session.v4.jsonl", "session.v10.jsonl.tmp", "session.v05.jsonl", "session.lock"] {
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
