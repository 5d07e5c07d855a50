//! The read checkpoint: a persisted copy of a log's committed fold, so a fresh process resumes a
//! big log where the last one stopped instead of folding its whole history again.
//!
//! The fold may be a window fold (`store::window`: read from the end, its prefix removed by a
//! compaction checkpoint; `Fold::is_window`): the same answer for `sessions_read`, but its requests
//! are only those of the frames it decoded, so only a read resumes it (`index::load_log` ignores it
//! and folds the log, then leaves a full fold's checkpoint in its place). A full fold that
//! stopped at the decode budget (`log::DECODE_BUDGET`) is marked as one (`FoldState::stopped`):
//! `load_log` resumes it, stopped, with its note; a read does not show it but takes the window
//! beside it (`index::read_beside`), as when this process had folded it, and writes no checkpoint
//! over it.
//!
//! What it is: one file per log, `<cache>/read-index/<sha256(log path)>.ckpt`, the committed
//! [`FoldState`] (surface nodes, title, requests, notes, the byte offset after the last complete
//! frame) written by a fold that had to read at least [`PERSIST_MIN`] bytes of the log. `<cache>`
//! is `$DSH_SESSION_MAIL_CACHE_DIR`, else `$XDG_CACHE_HOME/dsh-session-mail`, else
//! `~/.cache/dsh-session-mail`: **outside** `DSH_HOME`, whose files may be hostile.
//! - **Derived**: nothing in it that the log does not say; deleting the folder loses only time.
//! - **Bounded**: a file holds at most [`MAX_FILE`] bytes, the folder at most [`MAX_FILES`] files
//!   (the least recently written go first).
//! - **Private**: the folder is 0700 and ours (a link, another owner or group/other bits: not
//!   used); the files and the key are 0600, created exclusively, never through a link.
//! - **Never trusted blindly**: each file carries an HMAC-SHA256 of its body under a random key
//!   kept in the same private folder (`key`, 32 bytes): a file this code did not write (forged,
//!   or planted by whoever can write into `DSH_HOME`) is ignored. The body names the log it
//!   describes (path, device, inode) and two digests of the log's own bytes (SHA-256 of the
//!   first and of the last 64 KiB before the offset): a log replaced, truncated or rewritten
//!   where those digests see it is folded from the start. Anything that does not check out is
//!   ignored (and overwritten by the next fold): the answer is then the full fold's, only slower.
//!
//! `DSH_SESSION_MAIL_NO_CHECKPOINT=1` turns it off (the bench's baseline).

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::fold::{Fold, FoldState};

/// A fold that read at least this many file bytes leaves a checkpoint.
pub const PERSIST_MIN: u64 = 8 * 1024 * 1024;
/// Most bytes one checkpoint file may hold (a bigger state is not persisted).
pub const MAX_FILE: u64 = 32 * 1024 * 1024;
/// Most checkpoint files one home keeps.
pub const MAX_FILES: usize = 256;
/// Bytes each of the two digests covers.
const SPOT: u64 = 64 * 1024;
/// 2: the fold's notes carry where their lines are, and a resolved window fold is persisted
/// (marked; only `sessions_read` resumes it). 3: a window fold's compaction was checked to start
/// at the head of the surface (`window::Chain`) — a version 2 window fold may have dropped the
/// nodes before a compaction of a middle span, so of version 2 only a full fold is used. 4: a full
/// fold that stopped at the decode budget says so (`FoldState::stopped`: a read takes the window
/// beside it) — a full fold of an older version may have stopped without saying so, so of versions
/// 2 and 3 none is used, of version 3 a window fold is (a window fold never stops: one that meets
/// the budget is folded whole). A file of another version is not used.
pub(crate) const VERSION: u32 = 4;
const DIR: &str = "read-index";

/// [`PERSIST_MIN`]; tests lower it for their thread (they fold small logs).
pub(crate) static PERSIST: crate::threshold::Threshold =
    crate::threshold::Threshold::new(PERSIST_MIN);

pub(crate) fn persist_min() -> u64 {
    PERSIST.get()
}

fn disabled() -> bool {
    std::env::var_os("DSH_SESSION_MAIL_NO_CHECKPOINT").is_some_and(|v| v == "1")
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Body {
    v: u32,
    path: String,
    dev: u64,
    ino: u64,
    /// SHA-256 (hex) of the log's bytes `[0, min(SPOT, offset))` and `[offset - min(SPOT, offset), offset)`.
    head: String,
    tail: String,
    fold: FoldState,
}

/// The cache folder (see the module doc); None: no checkpoints.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    #[cfg(test)]
    return TEST_DIR.with(|c| c.borrow().clone());
    #[cfg(not(test))]
    {
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        env("DSH_SESSION_MAIL_CACHE_DIR")
            .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("dsh-session-mail")))
            .or_else(|| env("HOME").map(|d| d.join(".cache").join("dsh-session-mail")))
            .filter(|d| d.is_absolute())
    }
}

#[cfg(test)]
thread_local! {
    static TEST_DIR: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

/// Give the calling thread a cache folder (tests; without one a test thread keeps no checkpoints).
#[cfg(test)]
pub(crate) fn set_cache_dir(d: Option<PathBuf>) {
    TEST_DIR.with(|c| *c.borrow_mut() = d);
}

fn dir_of(_log: &Path) -> Option<PathBuf> {
    Some(cache_dir()?.join(DIR))
}

fn file_name(log: &Path) -> String {
    let h = Sha256::digest(log.as_os_str().as_encoded_bytes());
    format!("{}.ckpt", base::text::hex(&h[..16]))
}

/// The folder, if it is one we may trust: a real directory, ours, no group/other bits.
pub(crate) fn private_dir(d: &Path) -> bool {
    match base::fsafe::check_private_dir(d) {
        Ok(m) => base::fsafe::mode_of(&m) & 0o077 == 0,
        Err(_) => false,
    }
}

/// A private file of ours (regular, not a link, no group/other bits), at most `cap` bytes.
pub(crate) fn read_private(p: &Path, cap: u64) -> Option<Vec<u8>> {
    let (bytes, m) = base::fsafe::read_capped(p, base::fsafe::Follow::No, cap).ok()?;
    if base::fsafe::foreign_owner(&m).is_some() || base::fsafe::mode_of(&m) & 0o077 != 0 {
        return None;
    }
    Some(bytes)
}

/// The key of the checkpoint folder ([`base::seal`]: the plugin's one rule for a key file).
pub(crate) fn read_key(dir: &Path) -> Option<base::seal::Key> {
    base::seal::read_key(&dir.join("key")).ok().flatten()
}

/// The key, made on first use (two processes racing: the first link wins, the other reads it).
pub(crate) fn key_or_make(dir: &Path) -> Option<base::seal::Key> {
    base::seal::key_or_make(&dir.join("key")).ok()
}

/// The two digests of `file`'s bytes before `offset`.
fn digests<R: Read + Seek>(file: &mut R, offset: u64) -> Option<(String, String)> {
    let n = SPOT.min(offset);
    let mut buf = vec![0u8; n as usize];
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_exact(&mut buf).ok()?;
    let head = base::text::hex(&Sha256::digest(&buf));
    file.seek(SeekFrom::Start(offset - n)).ok()?;
    file.read_exact(&mut buf).ok()?;
    let tail = base::text::hex(&Sha256::digest(&buf));
    Some((head, tail))
}

/// The fold a checkpoint holds for `log` (open as `file`, of `size` bytes, identity `key`), if
/// there is one that checks out; `file`'s position is left anywhere.
pub(crate) fn load<R: Read + Seek>(
    log: &Path,
    key: Option<(u64, u64)>,
    size: u64,
    file: &mut R,
) -> Option<Fold> {
    if disabled() {
        return None;
    }
    let (dev, ino) = key?;
    let dir = dir_of(log)?;
    let b: Body = read_sealed(&dir, &file_name(log), b"", MAX_FILE, |body| {
        serde_json::from_slice(body).ok()
    })?;
    let offset = b.fold.offset();
    let fresh = b.v == VERSION || (b.v == 3 && b.fold.is_window());
    if !fresh
        || b.path != log.to_string_lossy()
        || (b.dev, b.ino) != (dev, ino)
        || offset > size
        || offset == 0
    {
        return None;
    }
    let (head, tail) = digests(file, offset)?;
    if (head, tail) != (b.head, b.tail) {
        return None;
    }
    Fold::from_state(b.fold)
}

/// Persist `fold` (the committed fold of `log`, open as `file`, identity `key`) when it is worth it.
pub(crate) fn save<R: Read + Seek>(log: &Path, key: Option<(u64, u64)>, file: &mut R, fold: &Fold) {
    if disabled() {
        return;
    }
    let _ = try_save(log, key, file, fold);
}

fn try_save<R: Read + Seek>(
    log: &Path,
    key: Option<(u64, u64)>,
    file: &mut R,
    fold: &Fold,
) -> Option<()> {
    let (dev, ino) = key?;
    let state = fold.state()?;
    let offset = state.offset();
    if offset == 0 {
        return None;
    }
    let dir = dir_of(log)?;
    let (head, tail) = digests(file, offset)?;
    let body = serde_json::to_vec(&Body {
        v: VERSION,
        path: log.to_string_lossy().into_owned(),
        dev,
        ino,
        head,
        tail,
        fold: state,
    })
    .ok()?;
    write_sealed(
        &dir,
        &file_name(log),
        b"",
        &body,
        MAX_FILE,
        (".ckpt", MAX_FILES),
    )
}

/// Read the signed file `name` of the private cache folder `dir` (at most `max` bytes: the
/// HMAC-SHA256 of `domain` ‖ body under the folder's key, then the body) and `parse` its body; None
/// when the folder or the file is not private, or the tag does not check out.
pub(crate) fn read_sealed<T>(
    dir: &Path,
    name: &str,
    domain: &[u8],
    max: u64,
    parse: impl FnOnce(&[u8]) -> Option<T>,
) -> Option<T> {
    if !private_dir(dir) {
        return None;
    }
    let bytes = read_private(&dir.join(name), max)?;
    let k = read_key(dir)?;
    if bytes.len() < 32 {
        return None;
    }
    let (tag, body) = bytes.split_at(32);
    if !base::seal::verify(k.bytes(), &[domain, body], tag) {
        return None;
    }
    parse(body)
}

/// Write `body` as the signed file `name` of the private cache folder `dir` (made 0700 when
/// missing; the key made on first use): the tag, then the body, through
/// [`base::fsafe::write_private_parts`] (a 0600 temp file, never through a link, renamed), then keep
/// at most `keep` files of the folder ending in `ext`. None (nothing written) when the folder is not
/// private or the file would be over `max` bytes. The read checkpoints and the listing index.
pub(crate) fn write_sealed(
    dir: &Path,
    name: &str,
    domain: &[u8],
    body: &[u8],
    max: u64,
    (ext, keep): (&str, usize),
) -> Option<()> {
    if !dir.exists() {
        make_private_dir(dir)?;
    }
    if !private_dir(dir) || body.len() as u64 + 32 > max {
        return None;
    }
    let k = key_or_make(dir)?;
    let tag = base::seal::mac(k.bytes(), &[domain, body]);
    let put = base::fsafe::Put {
        sync: false,
        replace: true,
    };
    base::fsafe::write_private_parts(dir, &dir.join(name), &[&tag, body], put).ok()?;
    prune_ext(dir, ext, keep);
    Some(())
}

#[cfg(unix)]
pub(crate) fn make_private_dir(d: &Path) -> Option<()> {
    use std::os::unix::fs::DirBuilderExt;
    match fs::DirBuilder::new().recursive(true).mode(0o700).create(d) {
        Ok(()) => Some(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Some(()),
        Err(_) => None,
    }
}

#[cfg(not(unix))]
pub(crate) fn make_private_dir(d: &Path) -> Option<()> {
    fs::create_dir_all(d).ok()
}

/// Keep at most `max` files of `dir` whose names end in `ext` (the least recently written go).
fn prune_ext(dir: &Path, ext: &str, max: usize) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = rd
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(ext))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if files.len() <= max {
        return;
    }
    files.sort();
    for (_, p) in &files[..files.len() - max] {
        let _ = fs::remove_file(p);
    }
}

/// The checkpoint file of `log` (tests forge and damage it).
#[cfg(test)]
pub(crate) fn path_of(log: &Path) -> Option<PathBuf> {
    Some(dir_of(log)?.join(file_name(log)))
}

/// Tests: rewrite the checkpoint of `log` with `edit` applied to its body, signed as ours (what
/// an older build of this plugin would have left).
#[cfg(test)]
pub(crate) fn reseal(log: &Path, edit: impl FnOnce(&str) -> String) {
    let ck = path_of(log).unwrap();
    let bytes = std::fs::read(&ck).unwrap();
    let body = edit(std::str::from_utf8(&bytes[32..]).unwrap());
    let k = read_key(&dir_of(log).unwrap()).unwrap();
    let mut out = base::seal::mac(k.bytes(), &[b"", body.as_bytes()]).to_vec();
    out.extend_from_slice(body.as_bytes());
    std::fs::write(&ck, out).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::{scan_frame, FrameScan};
    use crate::index;
    use crate::layout::LogFile;
    use crate::log::continue_fold;
    use crate::log::Encoding;
    use crate::testgen::{LogBuilder, Rng, DS};
    use serde_json::json;
    use std::io::Cursor;
    use std::io::Write;

    /// A host-shaped session of random length: turns with tool rounds, titles, pruned tool
    /// results, compactions (head-anchored as rc.8 `selectCompactableRange` picks them, and
    /// arbitrary spans), queued requests, and now and then a line the fold must note (bad JSON).
    fn random_log(r: &mut Rng, v4: bool) -> LogBuilder {
        let id = "session-0c0c0c0c-1111-4222-8333-444444444444";
        let mut b = if v4 {
            LogBuilder::v4(id, Some("/home/ana/proj"), 1)
        } else {
            LogBuilder::v0(id, Some("/home/ana/proj"), 1)
        };
        let mut tools: Vec<(u64, String)> = Vec::new();
        for t in 0..3 + r.below(10) {
            let p = b.prompt(
                &format!("prompt {t} {}", "word ".repeat(r.below(30) as usize)),
                &format!("dsh-session-mail:req-{t}"),
            );
            if t == 0 || r.chance(15) {
                b.title(&format!("title {t}"), json!({"kind":"fallback"}), &[p]);
            }
            for k in 0..r.below(4) {
                let call = format!("call_{t}_{k}");
                let seq = b.tool_round(
                    &call,
                    "read_file",
                    r#"{"path":"a"}"#,
                    &"line\n".repeat(1 + r.below(50) as usize),
                    DS.0,
                    DS.1,
                );
                tools.push((seq, call));
            }
            b.reply(&format!("reply {t}"), DS.0, DS.1);
            if r.chance(10) {
                b.raw("{oops not json".into());
            }
            b.end_turn();
            if r.chance(30) {
                b.queued("later", &format!("dsh-session-mail:q-{t}"), "next-turn");
            }
            if r.chance(25) {
                if let Some((seq, call)) = tools
                    .iter()
                    .rev()
                    .find(|(s, _)| b.surface.contains(s))
                    .cloned()
                {
                    b.prune(seq, &call, "[pruned]");
                    b.flush();
                }
            }
            if b.surface.len() > 4 && r.chance(35) {
                let n = b.surface.len() as u64;
                let (i, j) = if r.chance(70) {
                    (0, n - 2)
                } else {
                    let i = r.below(n - 1);
                    (i, i + r.below(n - 1 - i))
                };
                let (s, e) = (b.surface[i as usize], b.surface[j as usize]);
                b.compact(s, e, &format!("summary after turn {t}"));
            }
        }
        b
    }

    /// Where the fold may stop and resume: after each zstd frame, or after each line of a plain log.
    fn boundaries(bytes: &[u8], enc: Encoding) -> Vec<u64> {
        let size = bytes.len() as u64;
        let mut out = Vec::new();
        match enc {
            Encoding::Zstd => {
                let mut c = Cursor::new(bytes);
                let mut pos = 0;
                while let Ok(FrameScan::Frame { end }) = scan_frame(&mut c, pos, size) {
                    out.push(end);
                    pos = end;
                }
            }
            Encoding::Plain => {
                for (i, b) in bytes.iter().enumerate() {
                    if *b == b'\n' {
                        out.push(i as u64 + 1);
                    }
                }
            }
        }
        out
    }

    fn full_fold(bytes: &[u8], enc: Encoding) -> Fold {
        let (committed, tail) = continue_fold(
            &mut Cursor::new(bytes),
            enc,
            bytes.len() as u64,
            Fold::default(),
        )
        .unwrap();
        tail.unwrap_or(committed)
    }

    struct Case {
        _dir: tempfile::TempDir,
        log: LogFile,
    }

    /// A home with one log file; this thread keeps checkpoints in the case's own cache folder.
    fn case(v4: bool, enc: Encoding) -> Case {
        let dir = tempfile::tempdir().unwrap();
        set_cache_dir(Some(dir.path().join("cache")));
        PERSIST.set(Some(0));
        let name = match (v4, enc) {
            (true, Encoding::Zstd) => "session.v4.jsonl.zstd",
            (true, Encoding::Plain) => "session.v4.jsonl",
            (false, Encoding::Zstd) => "session.jsonl.zstd",
            (false, Encoding::Plain) => "session.jsonl",
        };
        let path = dir
            .path()
            .join("home/sessions/--home-ana-proj--/session-0c0c0c0c-1111-4222-8333-444444444444")
            .join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let log = LogFile {
            path,
            enc,
            generation: if v4 { 4 } else { 0 },
        };
        Case { _dir: dir, log }
    }

    fn append(p: &Path, bytes: &[u8]) {
        let mut f = fs::OpenOptions::new().append(true).open(p).unwrap();
        f.write_all(bytes).unwrap();
    }

    /// The property: a fold resumed from a checkpoint persisted at any frame (or line) boundary,
    /// then fed the rest of the log (grown meanwhile, possibly with a torn last frame), equals
    /// the full fold from the first byte — surface, title, requests, notes, line count, offset.
    /// Over random rc.8 (V0) and V4 logs, zstd and plain, with compactions (head-anchored and
    /// arbitrary spans), pruned tool results (single-node replaces), queued requests, bad lines.
    #[test]
    fn a_fold_resumed_from_a_persisted_checkpoint_equals_the_full_fold() {
        let mut r = Rng(0x5eed_1234_abcd_0001);
        let mut resumed = 0;
        for round in 0..120 {
            let v4 = r.chance(50);
            let enc = if r.chance(80) {
                Encoding::Zstd
            } else {
                Encoding::Plain
            };
            let b = random_log(&mut r, v4);
            let mut bytes = match enc {
                Encoding::Zstd => b.zstd(),
                Encoding::Plain => b.text().into_bytes(),
            };
            let bounds = boundaries(&bytes, enc);
            // A torn tail: the last frame (or line) cut short, as while a write is in flight.
            if r.chance(30) && bounds.len() > 2 {
                let last = bounds[bounds.len() - 2];
                let cut = last + 1 + r.below(bytes.len() as u64 - last - 1);
                bytes.truncate(cut as usize);
            }
            let c = case(v4, enc);
            let cut = bounds[r.below(bounds.len() as u64 - 1) as usize] as usize;
            fs::write(&c.log.path, &bytes[..cut]).unwrap();
            let first = index::load_log(&c.log).unwrap();
            let at = first.state().map(|s| s.offset());
            index::forget(&c.log.path);
            append(&c.log.path, &bytes[cut..]);
            let (got, read) = index::load_log_counted(&c.log);
            let want = full_fold(&bytes, enc);
            assert_eq!(
                got.unwrap().state(),
                want.state(),
                "round {round} (v4 {v4}, {enc:?}, cut at {cut} of {})",
                bytes.len()
            );
            if let Some(at) = at {
                assert_eq!(
                    read,
                    bytes.len() as u64 - at,
                    "round {round}: resumed at {at}"
                );
                resumed += 1;
            }
            index::forget(&c.log.path);
        }
        assert!(
            resumed > 100,
            "most cases resumed from a checkpoint: {resumed}"
        );
        set_cache_dir(None);
        PERSIST.set(None);
    }

    fn big_case() -> (Case, Vec<u8>) {
        let mut r = Rng(7);
        let c = case(false, Encoding::Zstd);
        let mut b = random_log(&mut r, false);
        b.title("the real title", json!({"kind":"user"}), &[]);
        b.flush();
        let bytes = b.zstd();
        fs::write(&c.log.path, &bytes).unwrap();
        let f = index::load_log(&c.log).unwrap();
        assert_eq!(f.display_title(), Some("the real title"));
        index::forget(&c.log.path);
        assert!(path_of(&c.log.path).unwrap().exists());
        (c, bytes)
    }

    /// The log is folded again from its first byte: the checkpoint was not used.
    fn folded_from_scratch(c: &Case, bytes: &[u8]) {
        let (got, read) = index::load_log_counted(&c.log);
        assert_eq!(read, bytes.len() as u64, "read from the start");
        assert_eq!(
            got.unwrap().state(),
            full_fold(bytes, Encoding::Zstd).state()
        );
        index::forget(&c.log.path);
    }

    /// Red team: a checkpoint whose body says something else than what was signed (a forged title,
    /// another surface), one signed under another key, or one planted for another file, never
    /// changes an answer: the log is folded from its start instead.
    #[test]
    fn a_forged_checkpoint_changes_no_answer() {
        let (c, bytes) = big_case();
        let ck = path_of(&c.log.path).unwrap();
        let orig = fs::read(&ck).unwrap();
        // 1. the body edited, the tag kept
        let forged =
            String::from_utf8_lossy(&orig[32..]).replace("the real title", "FORGED TITLE!!");
        let mut f = orig[..32].to_vec();
        f.extend_from_slice(forged.as_bytes());
        fs::write(&ck, &f).unwrap();
        folded_from_scratch(&c, &bytes);
        // 2. the same forged body signed under another key (the attacker's)
        let body = forged.as_bytes();
        let tag = base::seal::mac(&[9u8; 32], &[body]);
        let mut f = tag.to_vec();
        f.extend_from_slice(body);
        fs::write(&ck, &f).unwrap();
        folded_from_scratch(&c, &bytes);
        // 3. a genuine checkpoint (same key) of another log copied over this one's name
        let other = LogFile {
            path: c
                .log
                .path
                .parent()
                .unwrap()
                .with_file_name("session-other")
                .join("session.jsonl.zstd"),
            ..c.log.clone()
        };
        fs::create_dir_all(other.path.parent().unwrap()).unwrap();
        fs::write(&other.path, random_log(&mut Rng(99), false).zstd()).unwrap();
        index::load_log(&other).unwrap();
        index::forget(&other.path);
        let theirs = fs::read(path_of(&other.path).unwrap()).unwrap();
        fs::write(&ck, &theirs).unwrap();
        folded_from_scratch(&c, &bytes);
        // 4. group-readable, or a link: not ours, not used
        fs::write(&ck, &orig).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&ck, fs::Permissions::from_mode(0o644)).unwrap();
            folded_from_scratch(&c, &bytes);
            let _ = fs::remove_file(&ck);
            let elsewhere = c._dir.path().join("elsewhere.ckpt");
            fs::write(&elsewhere, &orig).unwrap();
            fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::symlink(&elsewhere, &ck).unwrap();
            folded_from_scratch(&c, &bytes);
        }
        set_cache_dir(None);
        PERSIST.set(None);
    }

    /// A log replaced by another file, rewritten in place, or truncated under its checkpoint is
    /// folded from the start (the checkpoint names the inode and digests the log's own bytes).
    #[test]
    fn a_checkpoint_of_a_changed_log_is_not_used() {
        let (c, bytes) = big_case();
        let ck = path_of(&c.log.path).unwrap();
        let orig = fs::read(&ck).unwrap();
        // rewritten in place: one byte of the last frame before the checkpoint's offset
        let mut other = bytes.clone();
        let n = other.len();
        other[n - 6] ^= 0x55;
        fs::OpenOptions::new()
            .write(true)
            .open(&c.log.path)
            .and_then(|mut f| f.write_all(&other))
            .unwrap();
        let (_, read) = index::load_log_counted(&c.log);
        assert_eq!(read, n as u64, "read from the start");
        index::forget(&c.log.path);
        // replaced by a copy (another inode) with the same bytes
        fs::write(&ck, &orig).unwrap();
        let tmp = c.log.path.with_extension("copy");
        fs::write(&tmp, &bytes).unwrap();
        fs::rename(&tmp, &c.log.path).unwrap();
        folded_from_scratch(&c, &bytes);
        // truncated below the offset
        fs::write(&ck, &orig).unwrap();
        let cut = &bytes[..bytes.len() / 2];
        fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&c.log.path)
            .and_then(|mut f| f.write_all(cut))
            .unwrap();
        let (got, read) = index::load_log_counted(&c.log);
        assert_eq!(read, cut.len() as u64);
        assert_eq!(got.unwrap().state(), full_fold(cut, Encoding::Zstd).state());
        index::forget(&c.log.path);
        set_cache_dir(None);
        PERSIST.set(None);
    }
}
