//! Repository identity of a working directory, the way git itself groups worktrees — without running git.
//!
//! Walking up from `cwd`, the first `.git` entry decides:
//! - a directory: the checkout's own git dir is the repository (its common dir);
//! - a regular file (a *gitfile*, as `git worktree add` and submodules write it): `gitdir: <path>` names the
//!   worktree's private git dir (relative paths are relative to the gitfile's directory); that dir's
//!   `commondir` file, when present, names the shared git dir (relative to the private one). Two worktrees
//!   of one repository therefore share one key; a submodule (no `commondir`) is its own repository.
//!
//! The same rule as DSH 0.1.7's built-in peer sessions (kilinthecode/deepseek-harness
//! packages/experimental/peer-sessions/src/repo.ts `peerRepoKey`: `.git` dir, or gitfile `gitdir` +
//! `commondir`, no git subprocess); outside any repository the key is the directory itself (`dir:`).
//!
//! Hostile-safe: `cwd` comes from session headers, so every read is bounded — at most [`MAX_DEPTH`]
//! parents, `.git` entries are `lstat`ed (a symlinked `.git` is not followed), only regular files of at
//! most [`MAX_GITFILE_BYTES`] are read, nothing is written, and a failure is "no repository", never an error.

use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Parents walked from the working directory.
pub const MAX_DEPTH: usize = 64;
/// Longest gitfile / `commondir` file read.
pub const MAX_GITFILE_BYTES: u64 = 4096;

/// Where a working directory lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    /// Grouping key: `git:<common git dir>` or `dir:<directory>`.
    pub key: String,
    /// The checkout's top directory (the directory holding `.git`), or the directory itself outside git.
    pub root: PathBuf,
    /// Inside a git repository.
    pub git: bool,
}

/// Lexically normalized absolute path (`.` and `..` folded; no filesystem access).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A regular file's text, at most `MAX_GITFILE_BYTES`; `None` for anything else (symlink, dir, fifo, huge).
fn small_regular_file(p: &Path) -> Option<String> {
    let meta = fs::symlink_metadata(p).ok()?;
    if !meta.file_type().is_file() || meta.len() > MAX_GITFILE_BYTES {
        return None;
    }
    let mut s = String::new();
    fs::File::open(p)
        .ok()?
        .take(MAX_GITFILE_BYTES)
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

/// The common git dir a gitfile points at.
fn from_gitfile(gitfile: &Path, dir: &Path) -> Option<PathBuf> {
    let text = small_regular_file(gitfile)?;
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    if target.is_empty() {
        return None;
    }
    let private = normalize(&dir.join(target));
    let common = match small_regular_file(&private.join("commondir")) {
        Some(c) if !c.trim().is_empty() => normalize(&private.join(c.trim())),
        _ => private,
    };
    Some(common)
}

/// The checkout of `cwd` (an absolute path; a relative one has no checkout).
pub fn checkout(cwd: &str) -> Option<Checkout> {
    let start = Path::new(cwd);
    if !start.is_absolute() {
        return None;
    }
    let start = normalize(start);
    let mut dir: &Path = &start;
    for _ in 0..MAX_DEPTH {
        let dotgit = dir.join(".git");
        if let Ok(meta) = fs::symlink_metadata(&dotgit) {
            let common = if meta.file_type().is_dir() {
                Some(dotgit.clone())
            } else if meta.file_type().is_file() {
                from_gitfile(&dotgit, dir)
            } else {
                None
            };
            if let Some(c) = common {
                // realpath when it resolves (two spellings of one repository agree), else the lexical path
                let c = fs::canonicalize(&c).unwrap_or(c);
                return Some(Checkout {
                    key: format!("git:{}", c.display()),
                    root: dir.to_path_buf(),
                    git: true,
                });
            }
        }
        match dir.parent() {
            Some(p) => dir = p,
            None => break,
        }
    }
    Some(Checkout {
        key: format!("dir:{}", start.display()),
        root: start,
        git: false,
    })
}

/// `path` (absolute, or relative to `cwd`) relative to the checkout root when it lies inside it, so the
/// same file edited in two worktrees has one key; otherwise the normalized absolute path.
pub fn relative_key(co: Option<&Checkout>, cwd: Option<&str>, path: &str) -> String {
    let p = Path::new(path);
    let abs = if p.is_absolute() {
        normalize(p)
    } else {
        match cwd {
            Some(c) => normalize(&Path::new(c).join(p)),
            None => normalize(p),
        }
    };
    match co.and_then(|c| abs.strip_prefix(&c.root).ok()) {
        Some(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => abs.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    #[test]
    fn worktrees_group_like_git_and_other_repos_do_not() {
        let t = tempfile::tempdir().unwrap();
        let main = t.path().join("main");
        fs::create_dir_all(main.join(".git/worktrees/wt1")).unwrap();
        fs::create_dir_all(main.join("src/deep")).unwrap();
        // a worktree: gitfile -> private dir, whose commondir points back to the shared .git
        let wt = t.path().join("wt1");
        write(
            &wt.join(".git"),
            &format!("gitdir: {}\n", main.join(".git/worktrees/wt1").display()),
        );
        write(&main.join(".git/worktrees/wt1/commondir"), "../..\n");
        fs::create_dir_all(wt.join("lib")).unwrap();
        // another repository, and a submodule-like gitfile without commondir
        let other = t.path().join("other");
        fs::create_dir_all(other.join(".git")).unwrap();
        let sub = main.join("vendor/sub");
        fs::create_dir_all(main.join(".git/modules/sub")).unwrap();
        write(&sub.join(".git"), "gitdir: ../../.git/modules/sub\n");

        let a = checkout(main.join("src/deep").to_str().unwrap()).unwrap();
        let b = checkout(wt.join("lib").to_str().unwrap()).unwrap();
        let c = checkout(other.to_str().unwrap()).unwrap();
        let s = checkout(sub.to_str().unwrap()).unwrap();
        assert!(a.git && b.git && c.git && s.git);
        assert_eq!(a.key, b.key, "two worktrees of one repository share a key");
        assert_ne!(a.key, c.key);
        assert_ne!(a.key, s.key, "a submodule is its own repository");
        assert_eq!(a.root, main);
        assert_eq!(b.root, wt);
        // the same file in two worktrees has one key
        assert_eq!(
            relative_key(
                Some(&a),
                Some(main.join("src/deep").to_str().unwrap()),
                "x.rs"
            ),
            "src/deep/x.rs"
        );
        assert_eq!(
            relative_key(Some(&b), None, wt.join("src/deep/x.rs").to_str().unwrap()),
            "src/deep/x.rs"
        );
        assert_eq!(relative_key(Some(&b), None, "/elsewhere/y"), "/elsewhere/y");
        // outside git: the directory is the key
        let plain = t.path().join("plain");
        fs::create_dir_all(&plain).unwrap();
        let p = checkout(plain.to_str().unwrap()).unwrap();
        assert!(!p.git);
        assert!(p.key.starts_with("dir:"));
        assert_eq!(checkout("relative/path"), None);
    }

    #[test]
    fn hostile_gitfiles_are_bounded_and_never_followed() {
        let t = tempfile::tempdir().unwrap();
        // a huge gitfile is not read: no repository there (the walk goes on to the parent, which has none)
        let huge = t.path().join("huge");
        write(
            &huge.join(".git"),
            &format!("gitdir: {}\n", "x".repeat(10_000)),
        );
        assert!(!checkout(huge.to_str().unwrap()).unwrap().git);
        // a gitfile without a gitdir line, and a fifo-like non-file, are "no repository"
        let junk = t.path().join("junk");
        write(&junk.join(".git"), "not a gitfile");
        assert!(!checkout(junk.to_str().unwrap()).unwrap().git);
        #[cfg(unix)]
        {
            // a symlinked .git is not followed
            let real = t.path().join("realrepo");
            fs::create_dir_all(real.join(".git")).unwrap();
            let link = t.path().join("linked");
            fs::create_dir_all(&link).unwrap();
            std::os::unix::fs::symlink(real.join(".git"), link.join(".git")).unwrap();
            assert!(!checkout(link.to_str().unwrap()).unwrap().git);
        }
        // a cwd that does not exist still yields a key (its directory) without error
        assert!(checkout("/nonexistent/a/b/c").is_some());
    }
}
