//! The host's project key for a directory, and the session a CLI send is signed as by default.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use store::{self, layout};

// project key and the default sender

/// The host's directory key for a project path: separator runs (`/`, `\`, `:`) become one `-`,
/// `[A-Za-z0-9._-]` stay, every other UTF-16 unit (and `~`) becomes `~XXXX`, leading dashes are
/// stripped (`root` when nothing is left), and the slug is cut to 251 units and wrapped as `--…--`.
/// `None` for an empty path (the host throws). [R8/Z17 `session-persistence-jsonl/src/format.ts` `projectKey`]
pub fn project_key(cwd: &str) -> Option<String> {
    if cwd.is_empty() {
        return None;
    }
    let mut readable = String::new();
    let mut separator_run = false;
    for unit in cwd.encode_utf16() {
        let ch = char::from_u32(u32::from(unit)).filter(|_| unit < 0x80);
        match ch {
            Some('/') | Some('\\') | Some(':') => {
                if !separator_run {
                    readable.push('-');
                }
                separator_run = true;
            }
            Some(c) if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') => {
                readable.push(c);
                separator_run = false;
            }
            _ => {
                readable.push_str(&format!("~{unit:04X}"));
                separator_run = false;
            }
        }
    }
    let trimmed = readable.trim_start_matches('-');
    let slug = if trimmed.is_empty() { "root" } else { trimmed };
    // Every unit of the slug is ASCII here, so 251 units are 251 bytes.
    let cut = &slug[..slug.len().min(251)];
    Some(format!("--{cut}--"))
}

/// The session a CLI send is signed as when no `--from` is given.
#[derive(Debug, Clone, PartialEq)]
pub struct Sender {
    pub id: String,
    pub log_path: PathBuf,
    pub modified_ms: u64,
}

fn mtime_ms(p: &Path) -> Option<u64> {
    let m = std::fs::metadata(p).ok()?.modified().ok()?;
    Some(m.duration_since(UNIX_EPOCH).ok()?.as_millis() as u64)
}

/// The most recently modified top-level session of the project `cwd` belongs to, as the host names
/// it: `$DSH_HOME/sessions/<projectKey(cwd)>/<session>/<newest generation>`, by the log's mtime.
/// Subagent sessions are skipped (a reply to one could not be delivered). `Err` says why none.
pub fn default_sender(home: &Path, cwd: &str) -> Result<Sender, NoSender> {
    let key = project_key(cwd).ok_or(NoSender::EmptyCwd)?;
    let dir = home.join("sessions").join(&key);
    let entries = std::fs::read_dir(&dir).map_err(|e| NoSender::NoProject {
        dir: dir.clone(),
        why: e.into(),
    })?;
    let mut logs: Vec<(u64, layout::LogFile)> = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        if let Ok(Some(log)) = layout::pick_generation(&p) {
            logs.push((mtime_ms(&log.path).unwrap_or(0), log));
        }
    }
    logs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.path.cmp(&b.1.path)));
    for (modified_ms, log) in logs {
        let Ok(fold) = store::index::load_log(&log) else {
            continue;
        };
        let Some(h) = fold.header.as_ref() else {
            continue;
        };
        if h.is_subagent() || h.id.is_empty() {
            continue;
        }
        return Ok(Sender {
            id: h.id.clone(),
            log_path: log.path.clone(),
            modified_ms,
        });
    }
    Err(NoSender::NoTopLevel { dir })
}

/// The session a CLI send is signed as by default, or why there is none (the binding's
/// `DefaultSender`: `default_sender` as data, with `cwd`'s project key either way).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct DefaultSender {
    pub ok: bool,
    pub id: Option<String>,
    pub log_path: Option<String>,
    pub modified_ms: Option<f64>,
    /// The project key of `cwd`.
    pub project: Option<String>,
    pub error: Option<String>,
}

impl DefaultSender {
    /// [`default_sender`] of `home` and `cwd`.
    pub fn of(home: &Path, cwd: &str) -> DefaultSender {
        let project = project_key(cwd);
        match default_sender(home, cwd) {
            Ok(s) => DefaultSender {
                ok: true,
                id: Some(s.id),
                log_path: Some(s.log_path.display().to_string()),
                modified_ms: Some(s.modified_ms as f64),
                project,
                error: None,
            },
            Err(e) => DefaultSender {
                project,
                error: Some(e.to_string()),
                ..DefaultSender::default()
            },
        }
    }
}

/// Why the CLI has no default sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoSender {
    /// The current directory is empty (no project key).
    EmptyCwd,
    /// The project's folder cannot be listed.
    NoProject {
        dir: std::path::PathBuf,
        why: store::error::IoError,
    },
    /// No readable top-level session in it.
    NoTopLevel { dir: std::path::PathBuf },
}

impl std::fmt::Display for NoSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoSender::EmptyCwd => f.write_str("the current directory is empty"),
            NoSender::NoProject { dir, why } => write!(
                f,
                "no sessions for this directory's project ({}: {why})",
                dir.display()
            ),
            NoSender::NoTopLevel { dir } => write!(
                f,
                "no readable top-level session in this directory's project ({})",
                dir.display()
            ),
        }
    }
}

impl std::error::Error for NoSender {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_key_follows_the_host() {
        // Expected values computed with the host's own function (rc.8 format.ts `projectKey`).
        assert_eq!(project_key("/home/ana/proj").unwrap(), "--home-ana-proj--");
        assert_eq!(project_key("/").unwrap(), "--root--");
        assert_eq!(project_key("C:\\Users\\x").unwrap(), "--C-Users-x--");
        assert_eq!(project_key("/a//b:/c").unwrap(), "--a-b-c--");
        assert_eq!(project_key("/a b/~x").unwrap(), "--a~0020b-~007Ex--");
        assert_eq!(project_key("/é/😀").unwrap(), "--~00E9-~D83D~DE00--");
        assert_eq!(project_key("---x").unwrap(), "--x--");
        assert_eq!(project_key("rel/dir.v2_x-y").unwrap(), "--rel-dir.v2_x-y--");
        assert_eq!(project_key(""), None);
        let long = format!("/{}", "a".repeat(300));
        assert_eq!(
            project_key(&long).unwrap(),
            format!("--{}--", "a".repeat(251))
        );
        // A cut never splits an escape mid-way in a way that breaks UTF-8 (all ASCII).
        let esc = format!("/{}", "é".repeat(100));
        assert_eq!(project_key(&esc).unwrap().len(), 255);
    }

    fn write_session(home: &Path, cwd: &str, id: &str, extra: &str) -> PathBuf {
        let dir = home
            .join("sessions")
            .join(project_key(cwd).unwrap())
            .join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("session.jsonl");
        std::fs::write(&p, format!("{{\"type\":\"session\",\"version\":0,\"id\":\"{id}\",\"createdAt\":1,\"cwd\":\"{cwd}\"{extra}}}\n")).unwrap();
        p
    }

    fn set_mtime(p: &Path, secs: u64) {
        let f = std::fs::File::options().append(true).open(p).unwrap();
        f.set_modified(UNIX_EPOCH + std::time::Duration::from_secs(secs))
            .unwrap();
    }

    #[test]
    fn default_sender_is_the_newest_top_level_session_of_the_project() {
        let home = tempfile::tempdir().unwrap();
        let a = write_session(home.path(), "/w/p", "session-a", "");
        let b = write_session(home.path(), "/w/p", "session-b", "");
        let sub = write_session(
            home.path(),
            "/w/p",
            "session-sub",
            ",\"origin\":\"subagent\",\"parentSession\":\"session-a\"",
        );
        let other = write_session(home.path(), "/w/q", "session-q", "");
        set_mtime(&a, 1_000);
        set_mtime(&b, 2_000);
        set_mtime(&sub, 3_000);
        set_mtime(&other, 4_000);
        let s = default_sender(home.path(), "/w/p").unwrap();
        assert_eq!(s.id, "session-b");
        assert_eq!(s.modified_ms, 2_000_000);
        set_mtime(&a, 5_000);
        assert_eq!(default_sender(home.path(), "/w/p").unwrap().id, "session-a");
        let e = default_sender(home.path(), "/w/none").unwrap_err();
        assert!(
            matches!(&e, NoSender::NoProject { why, .. } if why.kind() == std::io::ErrorKind::NotFound),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("no sessions for this directory's project ("),
            "{e}"
        );
        assert!(
            e.to_string().ends_with(": No such file or directory)"),
            "{e}"
        );
        assert_eq!(default_sender(home.path(), ""), Err(NoSender::EmptyCwd));
        // as the binding's data: the project key either way, the reason as text
        let d = DefaultSender::of(home.path(), "/w/p");
        assert_eq!(
            (d.ok, d.id.as_deref(), d.modified_ms, d.project.as_deref()),
            (true, Some("session-a"), Some(5_000_000.0), Some("--w-p--"))
        );
        assert_eq!(d.log_path, Some(a.display().to_string()));
        let none = DefaultSender::of(home.path(), "/w/none");
        assert_eq!(
            (none.ok, none.id, none.error),
            (false, None, Some(e.to_string()))
        );
        assert_eq!(none.project.as_deref(), Some("--w-none--"));
        assert_eq!(DefaultSender::of(home.path(), "").project, None);
    }
}
