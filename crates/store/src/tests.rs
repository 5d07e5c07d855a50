//! Store tests over the committed fixtures (written by `testgen`) and generated bad input.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::*;
use crate::fold::Class;
use crate::frames::{scan_frame, FrameScan};
use crate::index::load_log_counted;
use crate::layout::LogFile;
use crate::log::Encoding;
use crate::testgen::*;

/// A note as one line (the listing's printer, `render::list::store_note`, lives above this crate).
fn note_text(n: &StoreNote) -> String {
    match n {
        StoreNote::NoLog { path, .. } => format!("{path}: no session log"),
        StoreNote::Text(t) => t.clone(),
    }
}

fn log_of(home: &Path, proj: &str, id: &str, name: &str) -> PathBuf {
    home.join("sessions").join(proj).join(id).join(name)
}

fn zlog(path: PathBuf) -> LogFile {
    LogFile {
        path,
        enc: Encoding::Zstd,
        generation: 0,
    }
}

fn frames_in(bytes: &[u8]) -> usize {
    let mut c = std::io::Cursor::new(bytes.to_vec());
    let (mut pos, mut n) = (0u64, 0);
    while let Ok(FrameScan::Frame { end }) = scan_frame(&mut c, pos, bytes.len() as u64) {
        pos = end;
        n += 1;
    }
    n
}

#[test]
fn committed_fixtures_match_the_generator() {
    let root = fixtures_root();
    for (rel, bytes) in fixture_files() {
        let on_disk = fs::read(root.join(&rel))
            .unwrap_or_else(|e| panic!("{rel}: {e} (run regenerate_fixtures)"));
        if rel.ends_with(".zstd") {
            let a = zstd::stream::decode_all(&on_disk[..]).unwrap();
            let b = zstd::stream::decode_all(&bytes[..]).unwrap();
            assert!(a == b, "{rel} differs from the generator; run `cargo test --lib regenerate_fixtures -- --ignored`");
            assert_eq!(
                frames_in(&on_disk),
                frames_in(&bytes),
                "{rel}: frame layout"
            );
        } else {
            assert!(on_disk == bytes, "{rel} differs from the generator");
        }
    }
}

#[test]
fn fixture_logs_are_multi_frame() {
    let bytes = fs::read(log_of(&fixtures_root(), PROJ, MAIN, "session.jsonl.zstd")).unwrap();
    assert!(frames_in(&bytes) >= 8, "{}", frames_in(&bytes));
    // Decoding only the first frame would give the header alone.
    let first = zstd::stream::read::Decoder::new(&bytes[..])
        .unwrap()
        .single_frame();
    let mut s = String::new();
    std::io::Read::read_to_string(&mut { first }, &mut s).unwrap();
    assert_eq!(s.lines().count(), 1);
}

#[test]
fn listing_the_fixture_home() {
    let home = fixtures_root();
    let l = list_sessions(&home);
    assert!(l.notes.is_empty(), "{:?}", l.notes);
    let get = |id: &str| {
        l.sessions
            .iter()
            .find(|s| s.meta.id == id)
            .unwrap_or_else(|| panic!("{id} missing"))
    };
    assert_eq!(l.sessions.len(), 6);
    assert_eq!(
        get(MAIN).meta.title.as_deref(),
        Some("Fix the newapi reasoning-effort config")
    );
    // The newest generation (v4) wins over session.jsonl.zstd; .tmp and v05 names are ignored.
    assert_eq!(get(V4).meta.title.as_deref(), Some("Port the parser"));
    assert!(get(V4).log.path.ends_with("session.v4.jsonl.zstd"));
    assert!(get(SUB).meta.is_subagent() && !get(SUB).meta.is_fork());
    assert!(get(FORK).meta.is_fork() && !get(FORK).meta.is_subagent());
    assert_eq!(get(FORK).meta.parent_session.as_deref(), Some(MAIN));
    // No session/title in the plain log: the host's 5-word fallback.
    assert_eq!(
        get(PLAIN).meta.title.as_deref(),
        Some("Add retries to the upload")
    );
    assert_eq!(get(PLAIN).log.enc, Encoding::Plain);
    assert_eq!(get(MAIN).meta.cwd.as_deref(), Some("/home/ana/proj"));
    assert_eq!(get(MAIN).meta.agent_preset.as_deref(), Some("standard"));
}

#[test]
fn main_v0_surface_after_prune_and_compaction() {
    let f = match load_session(&fixtures_root(), MAIN) {
        Lookup::Found(s) => s.fold,
        other => panic!("{other:?}"),
    };
    let got: Vec<(u64, &str, Class, bool)> = f
        .surface
        .iter()
        .map(|n| (n.seq, n.role.name(), n.class, n.replaced))
        .collect();
    assert_eq!(
        got,
        vec![
            (55, "user", Class::Conversation, true), // compaction checkpoint replacing 7..27
            (37, "user", Class::Conversation, false),
            (38, "user", Class::Injected, false), // runtime context snapshot
            (39, "user", Class::System, false),   // plan-mode notice
            (40, "user", Class::Injected, false), // <system-reminder>
            (50, "assistant", Class::Conversation, false),
        ]
    );
    assert_eq!(&*f.surface[0].label, "plugin:compact");
    assert_eq!(f.surface[1].request.as_deref(), Some(REQ_LANDED));
    assert_eq!(
        &*f.surface[5].label,
        "model:opencode-go-deepseek/deepseek-flash"
    );
    assert_eq!(f.last_seq, Some(58));
    assert!(f.notes.is_empty(), "{:?}", f.notes);
}

#[test]
fn v4_surface_and_title() {
    let f = match load_session(&fixtures_root(), V4) {
        Lookup::Found(s) => s.fold,
        other => panic!("{other:?}"),
    };
    let roles: Vec<(&str, &str, bool)> = f
        .surface
        .iter()
        .map(|n| (n.role.name(), &*n.label, n.replaced))
        .collect();
    assert_eq!(
        roles,
        vec![
            ("user", "compact-checkpoint", true),
            ("system", "system-prompt", false),
            ("user", "user", false),
            ("user", "runtime-context", false),
            (
                "assistant",
                "model:deepseek-official/deepseek-v4-flash",
                false
            ),
        ]
    );
    assert_eq!(f.title.as_deref(), Some("Port the parser"));
}

#[test]
fn find_request_landed_queued_and_unknown() {
    let home = fixtures_root();
    assert_eq!(
        find_request(&home, MAIN, REQ_LANDED),
        Some(Fate::Landed {
            seq: 37,
            turn: Some(2)
        })
    );
    assert_eq!(
        find_request(&home, MAIN, "22915"),
        Some(Fate::Landed {
            seq: 7,
            turn: Some(1)
        })
    );
    assert_eq!(
        find_request(&home, MAIN, REQ_QUEUED),
        Some(Fate::Queued {
            seq: 58,
            target: "next-turn".into()
        })
    );
    assert_eq!(find_request(&home, MAIN, "dsh-session-mail:nope"), None);
    assert_eq!(find_request(&home, "session-nope", REQ_LANDED), None);
    assert!(matches!(
        find_request(&home, V4, REQ_V4),
        Some(Fate::Landed { .. })
    ));
    // Forks: the parent's requests they inherited are not theirs.
    assert_eq!(
        find_request(&home, FORK, "dsh-session-mail:inherited-1"),
        None
    );
    assert!(matches!(
        find_request(&home, FORK, "dsh-session-mail:fork-own"),
        Some(Fate::Landed { .. })
    ));
    assert_eq!(
        find_request(&home, V4FORK, "dsh-session-mail:inherited-v4"),
        None
    );
    assert!(matches!(
        find_request(&home, V4FORK, "dsh-session-mail:own-v4"),
        Some(Fate::Landed { .. })
    ));
    // The stub's contract: find_session still answers by exact id.
    let m = find_session(&home, SUB).unwrap();
    assert_eq!((m.id.as_str(), m.is_subagent()), (SUB, true));
    assert_eq!(find_session(&home, "019c3d96"), None);
}

#[test]
fn find_requests_answers_each_id_as_find_request_does() {
    // the stacking guard's batch lookup: one fold of the session's log, each id's answer the same
    let home = fixtures_root();
    for (sid, ids) in [
        (
            MAIN,
            vec![REQ_LANDED, "22915", REQ_QUEUED, "dsh-session-mail:nope"],
        ),
        (
            FORK,
            vec!["dsh-session-mail:inherited-1", "dsh-session-mail:fork-own"],
        ),
        ("session-nope", vec![REQ_LANDED, REQ_QUEUED]),
    ] {
        let ids: Vec<String> = ids.into_iter().map(str::to_string).collect();
        let one_by_one: Vec<Option<Fate>> =
            ids.iter().map(|id| find_request(&home, sid, id)).collect();
        assert_eq!(find_requests(&home, sid, &ids), one_by_one, "{sid}");
    }
    assert!(find_requests(&home, MAIN, &[]).is_empty());
    // (not vacuous: MAIN's answers hold a landed, a queued and a none)
    let main = find_requests(
        &home,
        MAIN,
        &[
            REQ_LANDED.to_string(),
            REQ_QUEUED.to_string(),
            "x".to_string(),
        ],
    );
    assert!(matches!(main[0], Some(Fate::Landed { .. })));
    assert!(matches!(main[1], Some(Fate::Queued { .. })));
    assert_eq!(main[2], None);
}

#[test]
fn a_grown_log_is_read_only_from_its_new_frames() {
    let d = tempfile::tempdir().unwrap();
    let mut b = main_v0();
    let p = d.path().join("session.jsonl.zstd");
    let first = b.zstd();
    fs::write(&p, &first).unwrap();
    let log = zlog(p.clone());
    let (f1, read1) = load_log_counted(&log);
    assert_eq!(read1, first.len() as u64);
    let (_, warm) = load_log_counted(&log);
    assert_eq!(warm, 0, "an unchanged log is not read again");
    // Append one batch as the host does: one more frame.
    b.flush();
    b.prompt("a later prompt", "dsh-session-mail:later");
    b.title("Later title", serde_json::json!({"kind":"user"}), &[]);
    b.end_turn();
    let all = b.zstd();
    let mut fh = fs::OpenOptions::new().append(true).open(&p).unwrap();
    fh.write_all(&all[first.len()..]).unwrap();
    drop(fh);
    let (f2, read2) = load_log_counted(&log);
    assert_eq!(
        read2,
        (all.len() - first.len()) as u64,
        "only the new frames"
    );
    let f2 = f2.unwrap();
    assert_eq!(f2.title.as_deref(), Some("Later title"));
    assert!(f2.requests.contains_key("dsh-session-mail:later"));
    // Same state as a cold fold of the whole file.
    crate::index::forget(&p);
    let (cold, _) = load_log_counted(&log);
    let cold = cold.unwrap();
    let seqs = |f: &Fold| f.surface.iter().map(|n| (n.seq, n.loc)).collect::<Vec<_>>();
    assert_eq!(seqs(&f2), seqs(&cold));
    assert_eq!((f2.last_seq, f2.offset), (cold.last_seq, cold.offset));
    assert!(f1.unwrap().surface.len() < f2.surface.len());
}

#[test]
fn a_torn_last_frame_keeps_what_is_complete_and_is_resumed_later() {
    let d = tempfile::tempdir().unwrap();
    let mut b = main_v0();
    let head = b.zstd();
    b.flush();
    b.prompt("the torn prompt", "dsh-session-mail:torn");
    b.title("Torn title", serde_json::json!({"kind":"user"}), &[]);
    let all = b.zstd();
    let p = d.path().join("session.jsonl.zstd");
    // The last frame of `all` is the one we tear.
    let mut c = std::io::Cursor::new(all.clone());
    let mut last_start = head.len() as u64;
    while let Ok(FrameScan::Frame { end }) = scan_frame(&mut c, last_start, all.len() as u64) {
        if end == all.len() as u64 {
            break;
        }
        last_start = end;
    }
    assert!(last_start > head.len() as u64);
    let torn_len = last_start as usize + (all.len() - last_start as usize) / 2;
    fs::write(&p, &all[..torn_len]).unwrap();
    let log = zlog(p.clone());
    let (f, _) = load_log_counted(&log);
    let f = f.unwrap();
    assert!(
        f.notes.summary().contains("torn last frame"),
        "{:?}",
        f.notes
    );
    assert_eq!(
        f.title.as_deref(),
        Some("Fix the newapi reasoning-effort config"),
        "committed part intact"
    );
    assert_eq!(f.surface.len(), 6);
    // The writer finishes the frame: the next read resumes at the torn frame's start.
    fs::write(&p, &all).unwrap();
    let (f, read) = load_log_counted(&log);
    let f = f.unwrap();
    assert_eq!(
        read,
        all.len() as u64 - last_start,
        "resumed at the torn frame's start"
    );
    assert_eq!(f.title.as_deref(), Some("Torn title"));
    assert!(f.notes.is_empty(), "{:?}", f.notes);
}

#[test]
fn a_torn_multi_block_frame_keeps_its_complete_lines() {
    // A frame big enough for several zstd blocks: cut it, and the lines of its decodable
    // blocks still count.
    let d = tempfile::tempdir().unwrap();
    let mut b = LogBuilder::v0("s-big", Some("/w"), BASE_TIME);
    b.flush();
    for i in 0..400 {
        b.prompt(
            &format!("prompt {i} {}", "x".repeat(i * 7 % 500)),
            &format!("r{i}"),
        );
    }
    let all = b.zstd();
    let p = d.path().join("session.jsonl.zstd");
    fs::write(&p, &all[..all.len() - 10]).unwrap();
    let (f, _) = load_log_counted(&zlog(p));
    let f = f.unwrap();
    assert!(f.notes.summary().contains("torn last frame"));
    assert!(f.surface.len() > 100, "kept {} nodes", f.surface.len());
}

#[test]
fn a_corrupt_frame_in_the_middle_is_skipped_and_the_rest_read() {
    let d = tempfile::tempdir().unwrap();
    let b = main_v0();
    let mut bytes = b.zstd();
    // Find the 4th frame and damage its payload (keep the block headers intact).
    let mut c = std::io::Cursor::new(bytes.clone());
    let mut starts = vec![0u64];
    while let Ok(FrameScan::Frame { end }) =
        scan_frame(&mut c, *starts.last().unwrap(), bytes.len() as u64)
    {
        starts.push(end);
    }
    let (s, e) = (starts[3] as usize, starts[4] as usize);
    for byte in &mut bytes[s + 12..e - 6] {
        *byte ^= 0x5A;
    }
    let p = d.path().join("session.jsonl.zstd");
    fs::write(&p, &bytes).unwrap();
    let (f, _) = load_log_counted(&zlog(p));
    let f = f.unwrap();
    assert!(
        f.notes.summary().contains("corrupt zstd frame"),
        "{:?}",
        f.notes
    );
    // The damaged frame held the provider title: lost, so the earlier fallback title stands;
    // later frames were read (the queued request of the last frame is there).
    assert_eq!(f.title.as_deref(), Some("Fix the newapi reasoning"));
    assert!(f.requests.contains_key(REQ_QUEUED));
    assert!(f.requests.contains_key(REQ_LANDED));
}

#[test]
fn garbage_between_frames_is_skipped() {
    let d = tempfile::tempdir().unwrap();
    let b = main_v0();
    let bytes = b.zstd();
    let mut c = std::io::Cursor::new(bytes.clone());
    let FrameScan::Frame { end } = scan_frame(&mut c, 0, bytes.len() as u64).unwrap() else {
        panic!()
    };
    let mut out = bytes[..end as usize].to_vec();
    out.extend_from_slice(b"\x00\x01garbage garbage");
    out.extend_from_slice(&bytes[end as usize..]);
    let p = d.path().join("session.jsonl.zstd");
    fs::write(&p, &out).unwrap();
    let (f, _) = load_log_counted(&zlog(p));
    let f = f.unwrap();
    assert!(
        f.notes.summary().contains("skipped 17 bytes"),
        "{:?}",
        f.notes
    );
    assert_eq!(f.surface.len(), 6);
}

/// Each of `wanted` is in `notes`.
#[track_caller]
fn assert_notes(notes: &str, wanted: &[&str]) {
    for w in wanted {
        assert!(notes.contains(w), "{w:?} is not in {notes}");
    }
}

fn home_with(files: Vec<(String, Vec<u8>)>) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    write_tree(d.path(), &fixture_files());
    write_tree(d.path(), &files);
    d
}

#[test]
fn bad_logs_give_notes_and_the_rest_is_listed() {
    let bad = |id: &str| format!("sessions/--bad--/{id}/session.jsonl.zstd");
    let mut lines = LogBuilder::v0("s-lines", Some("/w"), BASE_TIME);
    lines.prompt("good one", "g");
    lines.raw("{this is not json".into());
    lines.raw("{\"type\":\"user/message\",\"seq\":99,\"data\":\"\u{0}\"}".into());
    let mut text = lines.text().into_bytes();
    text.extend_from_slice(b"{\"type\":\"x\",\"seq\":100,\"data\":\"\xff\xfe\"}\n");
    let home = home_with(vec![
        (bad("s-header"), frame(b"{\"type\":\"session\",\"id\":\n")),
        (
            bad("s-notheader"),
            frame(b"{\"type\":\"turn/start\",\"seq\":0}\n"),
        ),
        (bad("s-empty"), Vec::new()),
        (bad("s-lines"), frame(&text)),
        ("sessions/--bad--/s-nolog/session.lock".into(), Vec::new()),
        ("sessions/stray-file".into(), b"x".to_vec()),
    ]);
    let l = list_sessions(home.path());
    let ids: Vec<&str> = l.sessions.iter().map(|s| s.meta.id.as_str()).collect();
    assert!(ids.contains(&MAIN) && ids.contains(&"s-lines"), "{ids:?}");
    assert_eq!(l.sessions.len(), 7);
    let notes = l.notes.iter().map(note_text).collect::<Vec<_>>().join("\n");
    assert_notes(
        &notes,
        &[
            "--bad--/s-header/session.jsonl.zstd: header line is not valid JSON",
            "s-notheader/session.jsonl.zstd: first line is not a session header",
            "s-empty/session.jsonl.zstd: empty log",
            "s-nolog: no session log",
            "s-lines/session.jsonl.zstd: line 8: invalid JSON",
            "invalid UTF-8",
        ],
    );
    assert!(!notes.contains("stray-file"), "{notes}");
    // A broken session is reported by a lookup, not silently "not found".
    assert!(
        matches!(load_session(home.path(), "s-header"), Lookup::Unreadable(Unreadable { why: UnreadableWhy::Header(h), .. }) if h.contains("not valid JSON"))
    );
    // the lookup's reason is data; its words are the listing's note for the same folder
    match load_session(home.path(), "s-empty") {
        Lookup::Unreadable(u) => {
            assert_eq!(u.why, UnreadableWhy::Empty);
            assert!(notes.contains(&u.to_string()), "{u} in {notes}");
        }
        other => panic!("{other:?}"),
    }
    let s = l.sessions.iter().find(|s| s.meta.id == "s-lines").unwrap();
    assert_eq!(s.meta.title.as_deref(), Some("good one"));
}

#[test]
fn a_50_mib_line_is_skipped_with_a_note() {
    let mut b = LogBuilder::v0("s-huge", Some("/w"), BASE_TIME);
    b.prompt("before the big one", "a");
    let huge = "A".repeat(50 * 1024 * 1024);
    b.tool_result("call_x", &huge, serde_json::json!("append"), None);
    b.flush();
    b.prompt("after the big one", "dsh-session-mail:after");
    let plain = b.text();
    let home = home_with(vec![
        (
            "sessions/--big--/s-huge/session.jsonl.zstd".into(),
            b.zstd(),
        ),
        (
            "sessions/--big2--/s-huge-plain/session.jsonl".into(),
            plain.replace("\"s-huge\"", "\"s-huge-plain\"").into_bytes(),
        ),
    ]);
    drop(huge);
    for id in ["s-huge", "s-huge-plain"] {
        let Lookup::Found(s) = load_session(home.path(), id) else {
            panic!("{id}")
        };
        let notes = s.fold.notes.summary();
        assert!(notes.contains("skipped a 50.0 MiB line"), "{id}: {notes}");
        assert!(
            s.fold.requests.contains_key("dsh-session-mail:after"),
            "{id}: read past it"
        );
        assert_eq!(
            s.fold
                .surface
                .iter()
                .filter(|n| n.role == crate::events::Role::Tool)
                .count(),
            0
        );
    }
}

#[cfg(unix)]
#[test]
fn unreadable_dirs_symlink_loops_and_aliases() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let home = home_with(vec![]);
    let sessions = home.path().join("sessions");
    symlink(sessions.join("loop"), sessions.join("loop")).unwrap();
    symlink(sessions.join(PROJ), sessions.join("alias-of-proj")).unwrap();
    fs::create_dir_all(sessions.join("--p--")).unwrap();
    symlink(
        sessions.join("--p--/nowhere"),
        sessions.join("--p--/dangling"),
    )
    .unwrap();
    let locked = sessions.join("--locked--");
    fs::create_dir_all(locked.join("s-x")).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let root_can_read = fs::read_dir(&locked).is_ok();
    let l = list_sessions(home.path());
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    let notes = l.notes.iter().map(note_text).collect::<Vec<_>>().join("\n");
    assert_notes(&notes, &["loop: unreadable", "--p--/dangling: unreadable"]);
    if !root_can_read {
        assert!(
            notes.contains("--locked--: unreadable directory"),
            "{notes}"
        );
    }
    // The alias shows the same sessions again: each is listed once.
    assert_eq!(
        l.sessions.len(),
        6,
        "{:?}",
        l.sessions.iter().map(|s| &s.meta.id).collect::<Vec<_>>()
    );
}

/// Scale check, in two processes so generation does not count in the reader's peak memory:
/// `BENCH_LOG=<file> BENCH_MB=1024 cargo test --release --lib bench_write -- --ignored`, then
/// `BENCH_LOG=<file> cargo test --release --lib bench_read -- --ignored --nocapture`.
#[test]
#[ignore = "writes a large log to $BENCH_LOG"]
fn bench_write() {
    let Ok(path) = std::env::var("BENCH_LOG") else {
        return;
    };
    let mb: u64 = std::env::var("BENCH_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let mut out = std::io::BufWriter::new(fs::File::create(&path).unwrap());
    let mut b = LogBuilder::v0("s-bench", Some("/w"), BASE_TIME);
    out.write_all(&frame(format!("{}\n", b.header_line()).as_bytes()))
        .unwrap();
    let (mut written, mut i) = (0u64, 0u64);
    let mut rng = 0x9E3779B97F4A7C15u64;
    while written < mb * 1024 * 1024 {
        let blob: String = (0..20_000)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                (b'a' + (rng % 26) as u8) as char
            })
            .collect();
        b.prompt(&format!("prompt {i}"), &format!("dsh-session-mail:{i}"));
        b.tool_round(&format!("c{i}"), "read", "{}", &blob, "p", "m");
        b.reply(&format!("reply {i}"), "p", "m");
        b.end_turn();
        for batch in b.batches.drain(..).filter(|x| !x.is_empty()) {
            let mut t = batch.join("\n");
            t.push('\n');
            written += t.len() as u64;
            out.write_all(&frame(t.as_bytes())).unwrap();
        }
        b.batches.push(Vec::new());
        if i % 500 == 0 {
            b.surface.clear();
        }
        i += 1;
    }
    eprintln!("wrote {} MiB of events in {i} turns", written >> 20);
}

#[test]
#[ignore = "reads the large log at $BENCH_LOG"]
fn bench_read() {
    let Ok(path) = std::env::var("BENCH_LOG") else {
        return;
    };
    let log = zlog(PathBuf::from(path));
    let t = std::time::Instant::now();
    let (f, read) = load_log_counted(&log);
    let cold = t.elapsed();
    let f = f.unwrap();
    let t = std::time::Instant::now();
    let (_, again) = load_log_counted(&log);
    let warm = t.elapsed();
    let hwm = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .map(str::to_string)
        })
        .unwrap_or_default();
    eprintln!(
        "cold: {cold:?} for {} MiB compressed, {} events, {} surface nodes, {} requests; warm: {warm:?} ({again} bytes); {hwm}",
        read >> 20,
        f.events,
        f.surface.len(),
        f.requests.len()
    );
    assert_eq!(again, 0);
}

// ---- briefs (the listing's backward title scan) against the full fold ----

mod briefs {
    use super::*;
    use crate::brief::{self, Brief, Resume};
    use crate::log::{continue_fold, Scratch};
    use serde_json::json;
    use std::io::Cursor;

    /// One checksummed frame that declares its content size (as the host's one-shot compressor writes it).
    fn sized(bytes: &[u8]) -> Vec<u8> {
        let mut c = zstd::bulk::Compressor::new(3).unwrap();
        c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
            .unwrap();
        c.compress(bytes).unwrap()
    }

    fn brief_of(bytes: &[u8], enc: Encoding) -> (Brief, Option<Resume>) {
        brief::scan(
            &mut Cursor::new(bytes.to_vec()),
            enc,
            bytes.len() as u64,
            None,
            &mut Scratch::new(),
        )
        .unwrap()
    }

    fn view_of(bytes: &[u8], enc: Encoding) -> Fold {
        let (c, t) = continue_fold(
            &mut Cursor::new(bytes.to_vec()),
            enc,
            bytes.len() as u64,
            Fold::default(),
        )
        .unwrap();
        t.unwrap_or(c)
    }

    /// The brief agrees with the full fold on header and title; returns the brief.
    fn agree(bytes: &[u8], enc: Encoding) -> Brief {
        let (b, _) = brief_of(bytes, enc);
        let f = view_of(bytes, enc);
        assert_eq!(b.header, f.header, "header");
        assert_eq!(b.header_error, f.header_error, "header error");
        if f.header.is_some() {
            assert_eq!(
                b.display_title(),
                f.display_title(),
                "title (fold notes: {:?}; brief notes: {:?})",
                f.notes,
                b.notes
            );
        }
        b
    }

    /// Frames cut from `text` at the given byte offsets (so lines may run across frames).
    fn cut(text: &[u8], at: &[usize], mk: fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
        let mut out = Vec::new();
        let mut prev = 0;
        for &a in at.iter().chain(std::iter::once(&text.len())) {
            if a > prev {
                out.extend(mk(&text[prev..a]));
                prev = a;
            }
        }
        out
    }

    fn long_log(title_turn: Option<usize>, turns: usize) -> LogBuilder {
        let mut b = LogBuilder::v0("s-brief", Some("/w"), BASE_TIME);
        for t in 0..turns {
            let p = b.prompt(
                &format!("prompt number {t} with some words"),
                &format!("r{t}"),
            );
            if Some(t) == title_turn {
                b.title(&format!("Title of turn {t}"), json!({"kind":"user"}), &[p]);
            }
            b.reply(&format!("reply {t}"), "p", "m");
            b.end_turn();
        }
        b
    }

    fn starts(bytes: &[u8]) -> Vec<u64> {
        let mut c = Cursor::new(bytes.to_vec());
        let mut v = vec![0u64];
        while let Ok(FrameScan::Frame { end }) =
            scan_frame(&mut c, *v.last().unwrap(), bytes.len() as u64)
        {
            v.push(end);
        }
        v
    }

    #[test]
    fn title_in_the_last_frame_in_the_middle_and_none() {
        for mk in [frame as fn(&[u8]) -> Vec<u8>, sized] {
            let mut b = long_log(Some(3), 6);
            b.title("The last word", json!({"kind":"user"}), &[]);
            let bytes = b.batches.iter().filter(|x| !x.is_empty()).fold(
                mk(format!("{}\n", b.header_line()).as_bytes()),
                |mut acc, batch| {
                    acc.extend(mk(format!("{}\n", batch.join("\n")).as_bytes()));
                    acc
                },
            );
            assert_eq!(
                agree(&bytes, Encoding::Zstd).title.as_deref(),
                Some("The last word")
            );
            let mid = long_log(Some(3), 8).zstd();
            assert_eq!(
                agree(&mid, Encoding::Zstd).title.as_deref(),
                Some("Title of turn 3")
            );
            let none = long_log(None, 5).zstd();
            let bn = agree(&none, Encoding::Zstd);
            assert_eq!(
                (bn.title.as_deref(), bn.display_title()),
                (None, Some("prompt number 0 with some"))
            );
            let plain = long_log(Some(2), 4).text();
            assert_eq!(
                agree(plain.as_bytes(), Encoding::Plain).title.as_deref(),
                Some("Title of turn 2")
            );
        }
    }

    #[test]
    fn torn_last_frame_and_corrupt_middle_frame() {
        let bytes = long_log(Some(1), 6).zstd();
        let s = starts(&bytes);
        // Torn: cut the last frame in half.
        let last = s[s.len() - 2] as usize;
        let torn = &bytes[..last + (bytes.len() - last) / 2];
        let b = agree(torn, Encoding::Zstd);
        assert!(
            b.notes.summary().contains("torn last frame"),
            "{:?}",
            b.notes
        );
        // Torn inside the frame that holds the last title: its complete lines still count.
        let mut t = long_log(Some(1), 3);
        t.flush();
        t.title("Torn but complete", json!({"kind":"user"}), &[]);
        t.raw("{\"type\":\"turn/start\",\"seq\":999,\"time\":1,\"data\":{\"turn\":9}}".into());
        let mut rng = 7u64;
        for i in 0..1500 {
            // Poorly compressible, so the frame spans several blocks.
            let noise: String = (0..200)
                .map(|_| {
                    rng = rng
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (b'a' + (rng >> 59) as u8) as char
                })
                .collect();
            t.raw(format!(
                "{{\"type\":\"x/y\",\"seq\":{},\"time\":1,\"data\":{{\"n\":\"{noise}\"}}}}",
                1000 + i
            ));
        }
        let all = t.zstd();
        let b = agree(&all[..all.len() - 5], Encoding::Zstd);
        assert_eq!(b.title.as_deref(), Some("Torn but complete"));
        // Corrupt: damage the payload of the frame holding the title (turn 1), keep its block headers.
        let frames = starts(&bytes);
        for k in 1..frames.len() - 1 {
            let mut bad = bytes.clone();
            let (a, z) = (frames[k] as usize, frames[k + 1] as usize);
            if z - a < 30 {
                continue;
            }
            for byte in &mut bad[a + 12..z - 6] {
                *byte ^= 0x5A;
            }
            let b = agree(&bad, Encoding::Zstd);
            let _ = b;
        }
    }

    #[test]
    fn lines_across_frames_garbage_escapes_and_bad_titles() {
        let mut b = long_log(Some(2), 5);
        b.title("Split across", json!({"kind":"user"}), &[]);
        b.reply("after", "p", "m");
        let text = b.text();
        let pos = text.find("Split across").unwrap();
        // A frame boundary inside the title line, and others at arbitrary places.
        for mk in [frame as fn(&[u8]) -> Vec<u8>, sized] {
            for at in [
                vec![pos],
                vec![pos - 40, pos + 3],
                vec![10, 500, pos + 30],
                vec![text.len() - 1],
            ] {
                let mut cuts = vec![b.header_line().len() + 1];
                cuts.extend(at);
                cuts.sort();
                let bytes = cut(text.as_bytes(), &cuts, mk);
                assert_eq!(
                    agree(&bytes, Encoding::Zstd).title.as_deref(),
                    Some("Split across"),
                    "{cuts:?}"
                );
            }
        }
        // Garbage between frames, a skippable frame, escaped type, an unreadable later title.
        let mut e = long_log(Some(1), 3);
        e.raw(r#"{"type":"session\/title","seq":500,"time":1,"data":{"title":"Escaped"}}"#.into());
        e.raw(r#"{"type":"session/title","seq":501,"time":1,"data":{"title":5}}"#.into());
        e.raw(r#"{"type":"session/title","time":1,"data":{"title":"no seq"}}"#.into());
        e.raw(r#"{"type":"session/title","seq":502,"time":1,"data":{"title":"bad json"}"#.into());
        let mut bytes = e.zstd();
        let s = starts(&bytes);
        let at = s[2] as usize;
        bytes.splice(at..at, b"\x00garbage!".iter().copied());
        bytes.extend([0x50, 0x2A, 0x4D, 0x18, 2, 0, 0, 0, 9, 9]);
        let b = agree(&bytes, Encoding::Zstd);
        assert_eq!(b.title.as_deref(), Some("Escaped"));
        let notes = b.notes.summary();
        assert!(
            notes.contains("skipped 9 bytes")
                && notes.contains("seq 501: unreadable session/title"),
            "{notes}"
        );
    }

    #[test]
    fn headers_that_fail_and_empty_logs() {
        for bytes in [
            frame(b"{\"type\":\"session\",\"id\":\n"),
            frame(b"{\"type\":\"x\",\"seq\":0}\n"),
            Vec::new(),
            frame(b""),
            b"junk".to_vec(),
        ] {
            agree(&bytes, Encoding::Zstd);
        }
        // The header spread over two frames.
        let b = long_log(Some(0), 2);
        let text = b.text();
        let bytes = cut(text.as_bytes(), &[7, 20], sized);
        assert_eq!(
            agree(&bytes, Encoding::Zstd).title.as_deref(),
            Some("Title of turn 0")
        );
    }

    /// Pseudo-random logs, frame cuts and damage: the brief always agrees with the fold.
    #[test]
    fn randomized_agreement_with_the_fold() {
        let mut rng = 0x2545F4914F6CDD1Du64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n.max(1)
        };
        for _ in 0..120 {
            let turns = 1 + next(6) as usize;
            let mut b = LogBuilder::v0("s-rand", Some("/w"), BASE_TIME);
            for t in 0..turns {
                let p = b.prompt(
                    &format!("rand prompt {t} {}", "w ".repeat(next(8) as usize)),
                    &format!("r{t}"),
                );
                if next(3) == 0 {
                    b.title(&format!("T{t}"), json!({"kind":"user"}), &[p]);
                }
                b.reply(&"z".repeat(next(300) as usize), "p", "m");
                if next(2) == 0 {
                    b.end_turn();
                }
            }
            let text = b.text().into_bytes();
            let mut cuts: Vec<usize> = (0..next(6))
                .map(|_| 1 + next(text.len() as u64 - 1) as usize)
                .collect();
            if next(2) == 0 {
                cuts.push(b.header_line().len() + 1);
            }
            cuts.sort();
            cuts.dedup();
            let mk = if next(2) == 0 {
                frame as fn(&[u8]) -> Vec<u8>
            } else {
                sized
            };
            let mut bytes = if cuts.is_empty() {
                b.zstd()
            } else {
                cut(&text, &cuts, mk)
            };
            match next(5) {
                0 => {
                    let n = bytes.len() as u64;
                    bytes.truncate(1 + next(n - 1) as usize);
                }
                1 => {
                    let i = next(bytes.len() as u64) as usize;
                    bytes[i] ^= 0x41;
                }
                2 => {
                    let i = next(bytes.len() as u64) as usize;
                    bytes.splice(i..i, b"zz\x00".iter().copied());
                }
                _ => {}
            }
            agree(&bytes, Encoding::Zstd);
            agree(
                &text[..next(text.len() as u64) as usize + 1],
                Encoding::Plain,
            );
        }
    }

    /// Message text is fetched the same whether lines sit inside one frame (the one-frame path)
    /// or run across frames (the streaming path).
    #[test]
    fn fetched_events_do_not_depend_on_the_framing() {
        use crate::log::{fetch_events, Source};
        let b = main_v0();
        let text = b.text();
        let d = tempfile::tempdir().unwrap();
        let plain = d.path().join("p.jsonl");
        fs::write(&plain, &text).unwrap();
        let want = |f: &Fold| f.surface.iter().map(|n| (n.seq, n.loc)).collect::<Vec<_>>();
        let pf = view_of(text.as_bytes(), Encoding::Plain);
        let reference = fetch_events(
            &Source::File {
                path: &plain,
                enc: Encoding::Plain,
            },
            &want(&pf),
        );
        assert_eq!(reference.len(), pf.surface.len());
        for cuts in [
            vec![],
            vec![b.header_line().len() + 1, 900, 2500, 4000],
            vec![333, 1234, 5555],
        ] {
            for mk in [frame as fn(&[u8]) -> Vec<u8>, sized] {
                let bytes = if cuts.is_empty() {
                    b.zstd()
                } else {
                    cut(text.as_bytes(), &cuts, mk)
                };
                let z = d.path().join("z.jsonl.zstd");
                fs::write(&z, &bytes).unwrap();
                let zf = view_of(&bytes, Encoding::Zstd);
                let got = fetch_events(
                    &Source::File {
                        path: &z,
                        enc: Encoding::Zstd,
                    },
                    &want(&zf),
                );
                assert_eq!(got, reference, "{cuts:?}");
            }
        }
    }

    #[test]
    fn a_grown_log_resumes_its_brief_and_an_unchanged_one_is_not_read() {
        let d = tempfile::tempdir().unwrap();
        let mut b = long_log(Some(1), 3);
        let p = d.path().join("session.jsonl.zstd");
        let first = b.zstd();
        fs::write(&p, &first).unwrap();
        let log = zlog(p.clone());
        let (b1, from) = crate::index::load_brief_counted(&log);
        assert_eq!(
            (b1.unwrap().title.as_deref(), from),
            (Some("Title of turn 1"), Some(0))
        );
        let (_, warm) = crate::index::load_brief_counted(&log);
        assert_eq!(warm, None, "an unchanged log is not read again");
        // Append: one frame without a title, then one with.
        b.flush();
        b.prompt("later", "r-later");
        let all = b.zstd();
        fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(&all[first.len()..])
            .unwrap();
        let (b2, from) = crate::index::load_brief_counted(&log);
        assert_eq!(
            (b2.unwrap().title.as_deref(), from),
            (Some("Title of turn 1"), Some(first.len() as u64))
        );
        b.flush();
        b.title("Renamed later", json!({"kind":"user"}), &[]);
        let all2 = b.zstd();
        fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(&all2[all.len()..])
            .unwrap();
        let (b3, from) = crate::index::load_brief_counted(&log);
        assert_eq!(
            (b3.unwrap().title.as_deref(), from),
            (Some("Renamed later"), Some(all.len() as u64))
        );
        // A torn append is read again from the start next time, and still agrees.
        let before = all2.len();
        b.flush();
        b.title("Being written", json!({"kind":"user"}), &[]);
        let all3 = b.zstd();
        fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(&all3[before..all3.len() - 3])
            .unwrap();
        let (b4, _) = crate::index::load_brief_counted(&log);
        assert!(b4.unwrap().notes.summary().contains("torn last frame"));
        fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(&all3[all3.len() - 3..])
            .unwrap();
        let (b5, from) = crate::index::load_brief_counted(&log);
        let b5 = b5.unwrap();
        assert_eq!(
            (b5.title.as_deref(), from),
            (Some("Being written"), Some(0))
        );
        assert!(b5.notes.is_empty(), "{:?}", b5.notes);
    }

    #[test]
    fn brief_listing_matches_the_full_listing() {
        let home = fixtures_root();
        let full = list_sessions(&home);
        let briefs = list_briefs(&home);
        let a: Vec<(String, Option<String>)> = full
            .sessions
            .iter()
            .map(|s| (s.meta.id.clone(), s.meta.title.clone()))
            .collect();
        let b: Vec<(String, Option<String>)> = briefs
            .sessions
            .iter()
            .map(|s| (s.meta().id, s.meta().title))
            .collect();
        assert_eq!(a, b);
        // find_session answers from the brief, with the same meta as the full fold.
        for s in &full.sessions {
            assert_eq!(find_session(&home, &s.meta.id).as_ref(), Some(&s.meta));
        }
    }

    #[test]
    fn bad_logs_in_a_brief_listing() {
        let bad = |id: &str| format!("sessions/--bad--/{id}/session.jsonl.zstd");
        let d = tempfile::tempdir().unwrap();
        write_tree(d.path(), &fixture_files());
        let good = long_log(Some(1), 3).zstd();
        let s = starts(&good);
        let torn = good[..(s[s.len() - 2] as usize + 5)].to_vec();
        let mut garbage = good.clone();
        garbage.splice(s[1] as usize..s[1] as usize, b"xyz".iter().copied());
        write_tree(
            d.path(),
            &[
                (bad("s-header"), frame(b"{\"type\":\"session\",\"id\":\n")),
                (bad("s-empty"), Vec::new()),
                ("sessions/--torn--/s-brief/session.jsonl.zstd".into(), torn),
                (bad("s-brief"), garbage.clone()),
                ("sessions/--bad--/s-nolog/session.lock".into(), Vec::new()),
                (
                    "sessions/--bad2--/s-brief/session.jsonl.zstd".into(),
                    garbage.clone(),
                ),
                // A header claiming another session's id (issue 11 #7): a note, not a row.
                (bad("s-claims"), garbage),
            ],
        );
        let l = list_briefs(d.path());
        let notes = l.notes.iter().map(note_text).collect::<Vec<_>>().join("\n");
        assert_notes(
            &notes,
            &[
                "--bad--/s-header/session.jsonl.zstd: header line is not valid JSON",
                "s-empty/session.jsonl.zstd: empty log",
                "s-nolog: no session log",
                "--torn--/s-brief/session.jsonl.zstd: torn last frame at byte",
                "--bad--/s-brief/session.jsonl.zstd: byte ",
                "s-claims/session.jsonl.zstd: its header claims the id s-brief but the folder is not named after it",
            ],
        );
        assert!(matches!(
            load_session(d.path(), "s-claims"),
            Lookup::NotFound | Lookup::Unreadable(_)
        ));
        assert!(
            notes.contains("duplicate session id s-brief; ignored"),
            "{notes}"
        );
        assert_eq!(l.sessions.len(), 7);
    }
}

// ---- hostile logs (issue 11) ----

/// A zstd frame of `n` RLE blocks, each 128 KiB of `byte` (4 bytes per block on disk).
fn rle_frame(byte: u8, blocks: usize) -> Vec<u8> {
    let mut f = crate::frames::ZSTD_MAGIC.to_vec();
    f.push(0x00); // FHD: no FCS, no checksum, not single-segment
    f.push(0x38); // window descriptor: 2^(10+7) = 128 KiB
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let bh: u32 = last | (1 << 1) | ((128 * 1024) << 3);
        f.extend_from_slice(&bh.to_le_bytes()[..3]);
        f.push(byte);
    }
    f
}

#[test]
fn an_rle_bomb_is_read_and_listed_within_the_decode_budget() {
    // 32 KiB on disk, 1 GiB of newlines decoded: the issue's 15 s listing.
    let b = LogBuilder::v0("s-bomb", Some("/w"), 5);
    let mut log = frame(format!("{}\n", b.header_line()).as_bytes());
    log.extend(rle_frame(b'\n', 8192));
    assert!(log.len() < 40 * 1024);
    let home = home_with(vec![(
        "sessions/--w--/s-bomb/session.jsonl.zstd".into(),
        log,
    )]);
    let l = list_briefs(home.path());
    assert!(
        l.sessions.iter().any(|s| s.header().id == "s-bomb"),
        "the header still lists"
    );
    assert!(
        l.notes
            .iter()
            .any(|n| format!("{n:?}").contains("stopped reading")),
        "{:?}",
        l.notes
    );
    // The other sessions of the home are listed as before.
    assert!(l.sessions.len() > 1);
    let Lookup::Found(s) = load_session(home.path(), "s-bomb") else {
        panic!("found")
    };
    let notes = s.fold.notes.summary();
    assert!(notes.contains("stopped reading"), "{notes}");
    // Far fewer lines than the 1 G newlines were split (the budget is 2 GiB at 64 per line).
    assert!(s.fold.lines <= 40 * 1024 * 1024, "{}", s.fold.lines);
}

#[test]
fn a_replace_storm_is_linear_and_matches_the_hosts_rule() {
    // 30 k appends, then 30 k replaces of the oldest node (the quadratic case of the old Vec splice).
    let n = 30_000u64;
    let mut b = LogBuilder::v0("s-storm", Some("/w"), 5);
    let mut reference: std::collections::VecDeque<u64> = Default::default();
    use serde_json::json;
    let msg = json!({"content":[{"type":"text","text":"x"}],"source":{"kind":"user"},"role":"user","id":"m"});
    let mut seq = 1u64;
    for _ in 0..n {
        b.raw(json!({"type":"user/message","seq":seq,"time":"2026-01-01T00:00:00.000Z","data":msg,"surfaceOp":"append"}).to_string());
        reference.push_back(seq);
        seq += 1;
    }
    b.flush();
    for _ in 0..n {
        let first = *reference.front().unwrap();
        b.raw(json!({"type":"user/message","seq":seq,"time":"2026-01-01T00:00:00.000Z","data":msg,"surfaceOp":{"op":"replace","start":first,"end":first}}).to_string());
        reference.pop_front();
        reference.push_front(seq);
        seq += 1;
    }
    // And a range replace in the middle: the nodes between two seqs go, one takes their place.
    let mid: Vec<u64> = reference.iter().copied().skip(100).take(50).collect();
    b.raw(json!({"type":"user/message","seq":seq,"time":"2026-01-01T00:00:00.000Z","data":msg,"surfaceOp":{"op":"replace","start":mid[0],"end":mid[49]}}).to_string());
    let at = reference.iter().position(|&x| x == mid[0]).unwrap();
    for _ in 0..50 {
        reference.remove(at);
    }
    reference.insert(at, seq);
    b.flush();
    let home = home_with(vec![(
        "sessions/--w--/s-storm/session.jsonl.zstd".into(),
        b.zstd(),
    )]);
    let Lookup::Found(s) = load_session(home.path(), "s-storm") else {
        panic!("found")
    };
    let got: Vec<u64> = s.fold.surface.iter().map(|n| n.seq).collect();
    assert_eq!(got, reference.into_iter().collect::<Vec<_>>());
    assert!(s.fold.notes.is_empty(), "{}", s.fold.notes.summary());
}

#[test]
fn the_surface_keeps_its_newest_nodes_past_the_bound() {
    let mut s = crate::fold::Surface::default();
    let node = |seq| crate::fold::Node {
        seq,
        role: crate::events::Role::User,
        class: crate::fold::Class::Conversation,
        replaced: false,
        is_error: false,
        label: "user".into(),
        request: None,
        loc: Default::default(),
    };
    for i in 0..5000 {
        s.push(node(i));
    }
    for _ in 0..3000 {
        s.drop_oldest();
    }
    assert_eq!(s.len(), 2000);
    assert_eq!(s.iter().next().unwrap().seq, 3000);
    // Replacing after drops (and compaction) still finds the right range.
    s.push(node(9999));
    assert!(s.replace(3000, 3009, node(10_000)).is_ok());
    assert_eq!(s.iter().next().unwrap().seq, 10_000);
    assert_eq!(s.iter().nth(1).unwrap().seq, 3010);
    assert!(
        s.replace(3000, 3001, node(10_001)).is_err(),
        "gone from the surface"
    );
    assert!(s.replace(4000, 3500, node(10_002)).is_err(), "wrong order");
}

#[cfg(unix)]
#[test]
fn a_fifo_log_or_a_device_link_is_a_note_never_a_hang() {
    let home = home_with(vec![]);
    let d = home.path().join("sessions/--w--/s-fifo");
    fs::create_dir_all(&d).unwrap();
    let c = std::ffi::CString::new(d.join("session.jsonl.zstd").to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let z = home.path().join("sessions/--w--/s-zero");
    fs::create_dir_all(&z).unwrap();
    std::os::unix::fs::symlink("/dev/zero", z.join("session.jsonl")).unwrap();
    let l = list_briefs(home.path());
    assert!(l.sessions.len() > 1, "the others are listed");
    assert!(!matches!(
        load_session(home.path(), "s-fifo"),
        Lookup::Found(_)
    ));
    assert!(!matches!(
        load_session(home.path(), "s-zero"),
        Lookup::Found(_)
    ));
}

#[cfg(unix)]
#[test]
fn a_session_folder_linked_out_of_the_home_is_not_read() {
    let outside = tempfile::tempdir().unwrap();
    let b = LogBuilder::v0("s-outside", Some("/w"), 5);
    let od = outside.path().join("s-outside");
    fs::create_dir_all(&od).unwrap();
    fs::write(od.join("session.jsonl.zstd"), b.zstd()).unwrap();
    let home = home_with(vec![]);
    let p = home.path().join("sessions/--w--");
    fs::create_dir_all(&p).unwrap();
    std::os::unix::fs::symlink(&od, p.join("s-outside")).unwrap();
    // A link that stays inside the home is fine.
    let inside = home.path().join("sessions/--w--/real-inside");
    fs::create_dir_all(&inside).unwrap();
    fs::write(
        inside.join("session.jsonl.zstd"),
        LogBuilder::v0("s-inside", Some("/w"), 6).zstd(),
    )
    .unwrap();
    std::os::unix::fs::symlink(&inside, p.join("s-inside")).unwrap();
    let l = list_briefs(home.path());
    assert!(!l.sessions.iter().any(|s| s.header().id == "s-outside"));
    assert!(
        l.notes
            .iter()
            .any(|n| format!("{n:?}").contains("out of DSH_HOME")),
        "{:?}",
        l.notes
    );
    assert!(matches!(
        load_session(home.path(), "s-outside"),
        Lookup::NotFound
    ));
    assert!(matches!(
        load_session(home.path(), "s-inside"),
        Lookup::Found(_)
    ));
}

// ---- the listing memo (`list_briefs_cached`): fresh where it matters, bounded elsewhere ----

mod listing_memo {
    use super::*;
    use crate::index::{LIST_RECENT, LIST_STALE};
    use std::time::{Duration, SystemTime};

    const P: &str = "--w-memo--";

    fn log_path(home: &Path, id: &str) -> PathBuf {
        home.join("sessions")
            .join(P)
            .join(id)
            .join("session.jsonl.zstd")
    }

    /// A session log with one title, its mtime (and its folders') set well in the past: a session
    /// nobody has touched for a while, so the memo may answer for it.
    fn write_old(home: &Path, id: &str, title: &str) {
        let mut b = LogBuilder::v0(id, Some("/w/memo"), BASE_TIME);
        b.title(title, serde_json::json!({"kind":"user"}), &[]);
        let p = log_path(home, id);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, b.zstd()).unwrap();
        age(&p);
        age(p.parent().unwrap());
        age(p.parent().unwrap().parent().unwrap());
    }

    fn age(p: &Path) {
        let old = SystemTime::now() - LIST_RECENT - Duration::from_secs(600);
        fs::File::open(p).unwrap().set_modified(old).unwrap();
    }

    /// Append a frame with a new title, as a writer that publishes no presence would.
    fn append_title(home: &Path, id: &str, title: &str, keep_old_mtime: bool) {
        let p = log_path(home, id);
        let row = serde_json::json!({"type":"session/title","seq":50,"time":BASE_TIME + 50,
            "data":{"title":title,"source":{"kind":"user"}}});
        fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(&frame(format!("{row}\n").as_bytes()))
            .unwrap();
        if keep_old_mtime {
            age(&p);
        }
    }

    fn titles<'a>(home: &Path, hot: impl IntoIterator<Item = &'a str>) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = list_briefs_cached(home, hot)
            .sessions
            .iter()
            .map(|s| (s.meta().id, s.meta().title.unwrap_or_default()))
            .collect();
        v.sort();
        v
    }

    fn pair(id: &str, t: &str) -> (String, String) {
        (id.to_string(), t.to_string())
    }

    #[test]
    fn an_outside_append_shows_within_the_stale_bound() {
        let d = tempfile::tempdir().unwrap();
        write_old(d.path(), "s-a", "first");
        write_old(d.path(), "s-b", "other");
        assert_eq!(
            titles(d.path(), []),
            [pair("s-a", "first"), pair("s-b", "other")]
        );
        // The writer publishes no presence and (worst case) the log's mtime says nothing new:
        // the next listing that starts LIST_STALE later re-checks the log and sees it.
        append_title(d.path(), "s-a", "second", true);
        std::thread::sleep(LIST_STALE + Duration::from_millis(50));
        assert_eq!(
            titles(d.path(), []),
            [pair("s-a", "second"), pair("s-b", "other")]
        );
    }

    #[test]
    fn a_session_written_recently_stays_fresh() {
        let d = tempfile::tempdir().unwrap();
        write_old(d.path(), "s-a", "first");
        append_title(d.path(), "s-a", "running", false);
        assert_eq!(titles(d.path(), []), [pair("s-a", "running")]);
        // Its log had moved within LIST_RECENT of that check: every listing re-checks it.
        append_title(d.path(), "s-a", "second", false);
        assert_eq!(titles(d.path(), []), [pair("s-a", "second")]);
        append_title(d.path(), "s-a", "third", false);
        assert_eq!(titles(d.path(), []), [pair("s-a", "third")]);
    }

    #[test]
    fn live_sessions_are_always_fresh() {
        let d = tempfile::tempdir().unwrap();
        write_old(d.path(), "s-live", "first");
        write_old(d.path(), "s-cold", "cold");
        assert_eq!(
            titles(d.path(), ["s-live"]),
            [pair("s-cold", "cold"), pair("s-live", "first")]
        );
        // Even with an mtime that says nothing changed, a live (hot) session is re-read.
        append_title(d.path(), "s-live", "second", true);
        assert_eq!(
            titles(d.path(), ["s-live"]),
            [pair("s-cold", "cold"), pair("s-live", "second")]
        );
    }

    #[test]
    fn new_and_removed_sessions_show_at_once() {
        let d = tempfile::tempdir().unwrap();
        write_old(d.path(), "s-a", "a");
        write_old(d.path(), "s-b", "b");
        assert_eq!(titles(d.path(), []), [pair("s-a", "a"), pair("s-b", "b")]);
        let mut b = LogBuilder::v0("s-new", Some("/w/memo"), BASE_TIME);
        b.title("new", serde_json::json!({"kind":"user"}), &[]);
        let p = log_path(d.path(), "s-new");
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, b.zstd()).unwrap();
        assert_eq!(
            titles(d.path(), []),
            [pair("s-a", "a"), pair("s-b", "b"), pair("s-new", "new")]
        );
        fs::remove_dir_all(log_path(d.path(), "s-b").parent().unwrap()).unwrap();
        assert_eq!(
            titles(d.path(), []),
            [pair("s-a", "a"), pair("s-new", "new")]
        );
        // A whole new project appears too (the root's mtime).
        let q = d.path().join("sessions/--w-other--/s-q/session.jsonl.zstd");
        fs::create_dir_all(q.parent().unwrap()).unwrap();
        fs::write(
            &q,
            LogBuilder::v0("s-q", Some("/w/other"), BASE_TIME).zstd(),
        )
        .unwrap();
        assert_eq!(titles(d.path(), []).len(), 3);
    }

    #[test]
    fn a_folder_waiting_for_its_first_log_is_picked_up_at_once() {
        let d = tempfile::tempdir().unwrap();
        write_old(d.path(), "s-a", "a");
        let dir = d.path().join("sessions").join(P).join("s-late");
        fs::create_dir_all(&dir).unwrap();
        age(&dir);
        age(dir.parent().unwrap());
        let l = list_briefs_cached(d.path(), []);
        assert_eq!(l.sessions.len(), 1);
        assert!(l.notes.iter().any(|n| matches!(n, StoreNote::NoLog { .. })));
        // Its first flush shows on the next listing.
        let mut b = LogBuilder::v0("s-late", Some("/w/memo"), BASE_TIME);
        b.title("late", serde_json::json!({"kind":"user"}), &[]);
        fs::write(dir.join("session.jsonl.zstd"), b.zstd()).unwrap();
        assert_eq!(
            titles(d.path(), []),
            [pair("s-a", "a"), pair("s-late", "late")]
        );
    }

    #[test]
    fn an_unchanged_home_returns_the_same_listing_and_a_hot_append_patches_it() {
        let d = tempfile::tempdir().unwrap();
        write_old(d.path(), "s-a", "first");
        write_old(d.path(), "s-b", "other");
        let l1 = list_briefs_cached(d.path(), []);
        let l2 = list_briefs_cached(d.path(), ["s-a"]);
        assert!(
            std::sync::Arc::ptr_eq(&l1, &l2),
            "nothing changed (a hot re-check included): the listing built last time"
        );
        // An append to a hot session: its row is replaced in place, the others stay.
        append_title(d.path(), "s-a", "second", true);
        let l3 = list_briefs_cached(d.path(), ["s-a"]);
        assert!(!std::sync::Arc::ptr_eq(&l2, &l3));
        assert_eq!(
            titles(d.path(), ["s-a"]),
            [pair("s-a", "second"), pair("s-b", "other")]
        );
        for (id, &i) in &l3.by_id {
            assert_eq!(
                &l3.sessions[i].header().id,
                id,
                "by_id points at its session"
            );
        }
        assert_eq!(l3.by_id.len(), l3.sessions.len());
        let l4 = list_briefs_cached(d.path(), ["s-a"]);
        assert!(std::sync::Arc::ptr_eq(&l3, &l4));
        // The patched listing equals one built from scratch.
        assert_eq!(shape(&l4), shape(&list_briefs(d.path())));
    }

    #[test]
    fn sessions_added_and_removed_around_remembered_ones_keep_their_rows() {
        // The memo is positional per project folder; a folder's entries shifting must not hand
        // one session's brief to its neighbour.
        let d = tempfile::tempdir().unwrap();
        write_old(d.path(), "s-b", "bee");
        write_old(d.path(), "s-d", "dee");
        assert_eq!(
            titles(d.path(), []),
            [pair("s-b", "bee"), pair("s-d", "dee")]
        );
        write_old(d.path(), "s-a", "ay");
        write_old(d.path(), "s-c", "cee");
        assert_eq!(
            titles(d.path(), []),
            [
                pair("s-a", "ay"),
                pair("s-b", "bee"),
                pair("s-c", "cee"),
                pair("s-d", "dee")
            ]
        );
        fs::remove_dir_all(log_path(d.path(), "s-a").parent().unwrap()).unwrap();
        assert_eq!(
            titles(d.path(), []),
            [pair("s-b", "bee"), pair("s-c", "cee"), pair("s-d", "dee")]
        );
        assert_eq!(
            shape(&list_briefs_cached(d.path(), [])),
            shape(&list_briefs(d.path()))
        );
    }

    /// What a listing shows: ids with titles in order, and the notes.
    fn shape(l: &BriefListing) -> (Vec<(String, Option<String>)>, Vec<String>) {
        (
            l.sessions
                .iter()
                .map(|s| {
                    (
                        s.header().id.clone(),
                        s.brief.display_title().map(str::to_string),
                    )
                })
                .collect(),
            l.notes.iter().map(|n| format!("{n:?}")).collect(),
        )
    }

    /// Random changes to a home, each one of a kind the memo must see at once (new, removed,
    /// written recently, or hot), and after each the cached listing equals a full re-check:
    /// whatever path it took (the same listing, a patch in place, a rebuild).
    #[test]
    fn the_memo_agrees_with_a_full_recheck_through_random_changes() {
        random_changes(false);
    }

    /// The same with the home watched (Linux): now an idle session changed by a writer that
    /// publishes no presence (never hot) must show at once too, through the watcher alone.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_watched_memo_agrees_with_a_full_recheck_through_random_changes() {
        random_changes(true);
    }

    fn random_changes(watched: bool) {
        let d = tempfile::tempdir().unwrap();
        let home = d.path();
        let mut seed: u64 = 0x5eed_1234_abcd_0042;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let projects = ["--w-memo--", "--w-two--"];
        let dir = |p: &str, id: &str| home.join("sessions").join(p).join(id);
        let mut alive: Vec<(usize, String)> = Vec::new();
        let mut hot: Vec<String> = Vec::new();
        // written within LIST_RECENT of the memo's last look (so re-checked on every listing)
        let mut fresh: Vec<String> = Vec::new();
        // An idle session's change shows within LIST_STALE only: change idle ones while hot.
        // Watched: nothing is made hot for a change (the watcher must see it).
        let touch = |id: &str, hot: &mut Vec<String>, fresh: &[String]| {
            if !watched && !fresh.iter().any(|f| f == id) && !hot.iter().any(|h| h == id) {
                hot.push(id.to_string());
            }
        };
        let mut next = 0;
        for step in 0..160 {
            let op = if alive.len() < 3 { 0 } else { rnd(8) };
            match op {
                0 | 1 => {
                    // a new session, idle (aged) or just written
                    next += 1;
                    let id = format!("s-{:03}", rnd(1000) * 10 + next % 10);
                    let p = rnd(2) as usize;
                    if alive.iter().any(|(_, a)| *a == id) {
                        continue;
                    }
                    let mut b = LogBuilder::v0(&id, Some("/w/memo"), BASE_TIME + next);
                    b.title(&format!("t{step}"), serde_json::json!({"kind":"user"}), &[]);
                    let f = dir(projects[p], &id).join("session.jsonl.zstd");
                    fs::create_dir_all(f.parent().unwrap()).unwrap();
                    fs::write(&f, b.zstd()).unwrap();
                    if op == 0 {
                        age(&f);
                        age(f.parent().unwrap());
                    } else {
                        fresh.push(id.clone());
                    }
                    alive.push((p, id));
                }
                2 => {
                    let (p, id) = alive.remove(rnd(alive.len() as u64) as usize);
                    fs::remove_dir_all(dir(projects[p], &id)).unwrap();
                }
                3 | 4 => {
                    // an append: to a hot session (its mtime may say nothing), or recent
                    let (p, id) = alive[rnd(alive.len() as u64) as usize].clone();
                    touch(&id, &mut hot, &fresh);
                    let is_hot = hot.contains(&id);
                    let f = dir(projects[p], &id).join("session.jsonl.zstd");
                    let row = serde_json::json!({"type":"session/title","seq":50 + step,
                        "time":BASE_TIME + 50,"data":{"title":format!("u{step}"),"source":{"kind":"user"}}});
                    let mut w = fs::OpenOptions::new().append(true).open(&f).unwrap();
                    w.write_all(&frame(format!("{row}\n").as_bytes())).unwrap();
                    if rnd(4) == 0 {
                        w.write_all(b"\x28\xb5\x2f\xfd not a frame").unwrap(); // a note
                    }
                    if is_hot && rnd(2) == 0 {
                        age(&f);
                        fresh.retain(|f| *f != id);
                    }
                }
                5 => {
                    // the log rewritten, maybe under another header id (a folder mismatch note)
                    let (p, id) = alive[rnd(alive.len() as u64) as usize].clone();
                    touch(&id, &mut hot, &fresh);
                    let other = if rnd(2) == 0 {
                        format!("{id}-x")
                    } else {
                        id.clone()
                    };
                    // maybe another cwd under the same id (the listing's keys change)
                    let cwd = if rnd(2) == 0 { "/w/memo" } else { "/w/moved" };
                    let f = dir(projects[p], &id).join("session.jsonl.zstd");
                    fs::write(&f, LogBuilder::v0(&other, Some(cwd), BASE_TIME).zstd()).unwrap();
                }
                6 => {
                    // a newer generation in a hot session's folder (its folder's mtime is not watched)
                    let (p, id) = alive[rnd(alive.len() as u64) as usize].clone();
                    touch(&id, &mut hot, &[]);
                    let mut b = LogBuilder::v0(&id, Some("/w/memo"), BASE_TIME);
                    b.title(&format!("g{step}"), serde_json::json!({"kind":"user"}), &[]);
                    let g = dir(projects[p], &id).join(format!("session.v{}.jsonl.zstd", step + 1));
                    fs::write(g, b.zstd()).unwrap();
                }
                _ => {
                    // hot set changes
                    let (_, id) = alive[rnd(alive.len() as u64) as usize].clone();
                    match hot.iter().position(|h| *h == id) {
                        Some(i) => {
                            hot.remove(i);
                        }
                        None => hot.push(id),
                    }
                }
            }
            let cached = list_briefs_cached(home, hot.iter().map(String::as_str));
            assert_eq!(
                shape(&cached),
                shape(&list_briefs(home)),
                "step {step} (op {op})"
            );
            assert_eq!(cached.by_id.len(), cached.sessions.len());
            // a listing patched in place keeps keys that are its sessions' own
            assert_eq!(
                cached.keys,
                crate::list_keys(&cached.sessions),
                "step {step}"
            );
            if watched {
                // a new folder's watch lands (the next listing looks at it under watch)
                #[cfg(target_os = "linux")]
                crate::index::settle_watch(home);
            }
        }
        if watched {
            let (_, state) = crate::index::memo_probe(home).unwrap();
            assert_eq!(state, Ok(()), "the watcher held to the end");
        }
    }

    /// List, let the watches land, list again (each folder looked at once more under watch).
    #[cfg(target_os = "linux")]
    fn watched(home: &Path) {
        list_briefs_cached(home, []);
        crate::index::settle_watch(home);
        list_briefs_cached(home, []);
        let (_, state) = crate::index::memo_probe(home).unwrap();
        assert_eq!(state, Ok(()));
    }

    #[cfg(target_os = "linux")]
    fn rechecked(home: &Path) -> usize {
        crate::index::memo_probe(home).unwrap().0
    }

    /// A home for the listing index tests: sessions with titles (one a subagent-free fork of
    /// another), this thread's cache folder, and an index written by a first listing.
    #[cfg(unix)]
    fn indexed_home(n: usize) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        let cache = d.path().join("cache");
        crate::checkpoint::set_cache_dir(Some(cache.clone()));
        for i in 0..n {
            write_old(&home, &format!("s-{i:02}"), &format!("title {i:02}"));
        }
        let first = list_briefs_cached(&home, []);
        assert_eq!(first.sessions.len(), n);
        assert_eq!(crate::index::index_probe(&home), Some(0));
        let ix = crate::listindex::path_of(&cache.join("list-index"), &home);
        crate::index::wait_index_saved();
        assert!(
            ix.exists(),
            "a cold listing of {n} sessions leaves an index"
        );
        (d, home, ix)
    }

    /// What a fresh process lists (no memo, no caches, no index) and what a fresh process that
    /// finds the index lists, with how many sessions it took from the index.
    #[cfg(unix)]
    fn fresh_vs_indexed(home: &Path) -> (ListShape, ListShape, usize) {
        crate::index::forget_home(home);
        let truth = shape(&list_briefs(home));
        crate::index::forget_home(home);
        let got = shape(&list_briefs_cached(home, []));
        let used = crate::index::index_probe(home).unwrap();
        crate::index::wait_index_saved();
        crate::index::forget_home(home);
        (truth, got, used)
    }

    type ListShape = (Vec<(String, Option<String>)>, Vec<String>);

    /// A fresh process's first listing takes every unchanged session from the persisted index
    /// (two `fstatat`s each, no log opened) and lists what a listing without it lists; a session
    /// changed after the index was written is looked at as without it, even when its size and
    /// mtime are set back (the ctime moves) or its folder's mtime is (a new generation).
    #[cfg(unix)]
    #[test]
    fn a_listing_from_the_persisted_index_equals_the_listing_without_it() {
        let (_d, home, _ix) = indexed_home(8);
        let (truth, got, used) = fresh_vs_indexed(&home);
        assert_eq!(got, truth);
        assert_eq!(used, 8, "every session from the index");
        // the same size and mtime, other bytes: only the ctime tells
        let p = home
            .join("sessions")
            .join(P)
            .join("s-01")
            .join("session.jsonl.zstd");
        let mtime = fs::metadata(&p).unwrap().modified().unwrap();
        let size = fs::metadata(&p).unwrap().len();
        let (title, bytes) = (0..100)
            .map(|i| {
                let t = format!("title {i:02}").chars().rev().collect::<String>();
                let mut b = LogBuilder::v0("s-01", Some("/w/memo"), BASE_TIME);
                b.title(&t, serde_json::json!({"kind":"user"}), &[]);
                (t, b.zstd())
            })
            .find(|(_, b)| b.len() as u64 == size)
            .expect("a title of the same compressed size");
        fs::write(&p, &bytes).unwrap();
        fs::File::open(&p).unwrap().set_modified(mtime).unwrap();
        // a newer generation in a folder whose mtime is set back
        let dir = home.join("sessions").join(P).join("s-02");
        let dm = fs::metadata(&dir).unwrap().modified().unwrap();
        let mut g = LogBuilder::v0("s-02", Some("/w/memo"), BASE_TIME);
        g.title("generation 2", serde_json::json!({"kind":"user"}), &[]);
        let gp = dir.join("session.v2.jsonl.zstd");
        fs::write(&gp, g.zstd()).unwrap();
        age(&gp);
        fs::File::open(&dir).unwrap().set_modified(dm).unwrap();
        // an append
        append_title(&home, "s-03", "appended", true);
        let (truth, got, used) = fresh_vs_indexed(&home);
        assert_eq!(got, truth);
        assert_eq!(used, 5, "the three changed sessions looked at");
        for (id, t) in [
            ("s-01", title.as_str()),
            ("s-02", "generation 2"),
            ("s-03", "appended"),
        ] {
            assert!(
                got.0.contains(&(id.to_string(), Some(t.to_string()))),
                "{id}: {t}"
            );
        }
    }

    /// A forged index changes no answer: one edited after it was sealed, one sealed under
    /// another key, and another home's (sealed, ours) copied into this home's place are not used.
    #[cfg(unix)]
    #[test]
    fn a_forged_listing_index_changes_no_answer() {
        let (d, home, ix) = indexed_home(6);
        let (truth, _, used) = fresh_vs_indexed(&home);
        assert_eq!(used, 6);
        let sealed = fs::read(&ix).unwrap();
        let text = String::from_utf8_lossy(&sealed[32..]).into_owned();
        assert!(text.contains("title 03"));
        let write = |bytes: &[u8]| {
            let _ = fs::remove_file(&ix);
            let mut f = base::fsafe::create_private(&ix).unwrap();
            f.write_all(bytes).unwrap();
        };
        // edited: another title under the old seal
        let edited = [
            &sealed[..32],
            text.replace("title 03", "forged 3").as_bytes(),
        ]
        .concat();
        write(&edited);
        let (t, got, used) = fresh_vs_indexed(&home);
        assert_eq!((got, used), (t.clone(), 0));
        assert_eq!(t, truth);
        // sealed under a key that is not the folder's
        let body = text.replace("title 03", "forged 3");
        let tag = base::seal::mac(
            &[7u8; 32],
            &[b"dsh-session-mail list-index\0", body.as_bytes()],
        );
        write(&[&tag[..], body.as_bytes()].concat());
        let (t, got, used) = fresh_vs_indexed(&home);
        assert_eq!((got, used), (t, 0));
        // another home's index (sealed by us) in this home's place
        let other = d.path().join("other");
        for i in 0..6 {
            write_old(&other, &format!("s-{i:02}"), &format!("other {i:02}"));
        }
        list_briefs_cached(&other, []);
        let oix = crate::listindex::path_of(&d.path().join("cache").join("list-index"), &other);
        crate::index::wait_index_saved();
        write(&fs::read(&oix).unwrap());
        let (t, got, used) = fresh_vs_indexed(&home);
        assert_eq!((got.clone(), used), (t, 0));
        assert!(got
            .0
            .iter()
            .all(|(_, t)| !t.as_deref().unwrap_or("").starts_with("other")));
        crate::checkpoint::set_cache_dir(None);
    }

    /// The folders the watcher checked after a cold listing are taken by the watcher's thread
    /// between listings (issue 18: the call after a cold one at 20,000 sessions spent 30–230 ms
    /// taking 20,000 of them): before the next listing every folder is covered and none waits.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_checked_folders_are_taken_between_listings_not_by_the_next_one() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path();
        let ids: Vec<String> = (0..12).map(|i| format!("s-{i:02}")).collect();
        for id in &ids {
            write_old(home, id, id);
        }
        let cold = list_briefs_cached(home, []);
        assert_eq!(rechecked(home), ids.len());
        crate::index::settle_watch(home);
        assert_eq!(crate::index::cover_probe(home), Some((0, ids.len())));
        std::thread::sleep(LIST_STALE + Duration::from_millis(100));
        let warm = list_briefs_cached(home, []);
        assert_eq!(rechecked(home), 0, "nothing looked at again");
        assert!(Arc::ptr_eq(&cold, &warm));
        // a change after the watches landed still shows at once
        append_title(home, "s-03", "later", true);
        let l = list_briefs_cached(home, []);
        assert_eq!(rechecked(home), 1);
        assert_eq!(shape(&l), shape(&list_briefs(home)));
        assert!(shape(&l).0.contains(&("s-03".into(), Some("later".into()))));
    }

    /// A watched home is not swept: past LIST_STALE a listing looks at nothing, and a change by a
    /// writer that publishes no presence (never hot, its mtime set back) shows on the very next
    /// listing, which looks at that folder only.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_watched_home_shows_an_outside_change_at_once_without_a_sweep() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path();
        for id in ["s-a", "s-b", "s-c", "s-d"] {
            write_old(home, id, id);
        }
        watched(home);
        std::thread::sleep(LIST_STALE + Duration::from_millis(100));
        let before = list_briefs_cached(home, []);
        assert_eq!(rechecked(home), 0, "no sweep past LIST_STALE");
        let check = |what: &str, n: usize| {
            let cached = list_briefs_cached(home, []);
            assert_eq!(shape(&cached), shape(&list_briefs(home)), "{what}");
            assert_eq!(rechecked(home), n, "{what}: folders looked at");
            cached
        };
        // an append
        append_title(home, "s-a", "second", true);
        let l = check("append", 1);
        assert!(!Arc::ptr_eq(&l, &before));
        assert!(shape(&l).0.contains(&("s-a".into(), Some("second".into()))));
        // a newer generation
        let mut b = LogBuilder::v0("s-b", Some("/w/memo"), BASE_TIME);
        b.title("gen", serde_json::json!({"kind":"user"}), &[]);
        let g = home
            .join("sessions")
            .join(P)
            .join("s-b")
            .join("session.v2.jsonl.zstd");
        fs::write(&g, b.zstd()).unwrap();
        age(&g);
        let l = check("generation", 1);
        assert!(shape(&l).0.contains(&("s-b".into(), Some("gen".into()))));
        // the log replaced by a rename (an atomic rewrite), its mtime set back
        let mut b = LogBuilder::v0("s-c", Some("/w/memo"), BASE_TIME);
        b.title("rewritten", serde_json::json!({"kind":"user"}), &[]);
        let tmp = home.join("sessions").join(P).join("s-c").join("tmp");
        fs::write(&tmp, b.zstd()).unwrap();
        age(&tmp);
        fs::rename(&tmp, log_path(home, "s-c")).unwrap();
        let l = check("rewrite", 1);
        assert!(shape(&l)
            .0
            .contains(&("s-c".into(), Some("rewritten".into()))));
        // a new session, a deleted one, a renamed folder: the walk shows them at once
        write_old(home, "s-e", "new");
        let l = check("new", 1);
        assert!(shape(&l).0.contains(&("s-e".into(), Some("new".into()))));
        // its watch lands and the watcher's thread checks it against what the listing saw: the
        // next listing has nothing to look at
        crate::index::settle_watch(home);
        check("new, under watch", 0);
        fs::remove_dir_all(home.join("sessions").join(P).join("s-c")).unwrap();
        let l = check("deleted", 0);
        assert!(!shape(&l).0.iter().any(|(id, _)| id == "s-c"));
        fs::rename(
            home.join("sessions").join(P).join("s-d"),
            home.join("sessions").join(P).join("s-z"),
        )
        .unwrap();
        check("renamed", 1);
        // nothing more: the same listing, nothing looked at
        crate::index::settle_watch(home);
        let a = list_briefs_cached(home, []);
        let b = list_briefs_cached(home, []);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(rechecked(home), 0);
        assert_eq!(crate::index::memo_probe(home).unwrap().1, Ok(()));
    }

    /// A change between a listing's look at a folder and the moment its watch lands is not lost:
    /// the watcher's check sees the log differ from what the listing saw and marks the folder
    /// dirty (or the change comes after the watch: an event). Nothing changed: nothing is looked at.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_change_before_the_watch_landed_is_not_lost() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path();
        let ids: Vec<String> = (0..6).map(|i| format!("s-{i}")).collect();
        for id in &ids {
            write_old(home, id, id);
        }
        list_briefs_cached(home, []);
        // at once, before the watcher's thread (it waits for its poll) has added the watches
        for id in &ids[..3] {
            append_title(home, id, "changed", true);
        }
        crate::index::settle_watch(home);
        let l = list_briefs_cached(home, []);
        assert_eq!(shape(&l), shape(&list_briefs(home)));
        for id in &ids[..3] {
            assert!(
                shape(&l).0.contains(&(id.clone(), Some("changed".into()))),
                "{id}"
            );
        }
        assert_eq!(rechecked(home), 3, "the three changed folders, no others");
        crate::index::settle_watch(home);
        list_briefs_cached(home, []);
        assert_eq!(rechecked(home), 0);
        assert_eq!(crate::index::memo_probe(home).unwrap().1, Ok(()));
    }

    /// A project folder replaced by a copy (other inodes, the same names, old mtimes): the
    /// watches were on the old session folders, so none of the copies is covered; a change to
    /// one shows as soon as the 2 s rule allows (here at once: the memo's last look is older).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_project_folder_replaced_under_a_watched_home_is_looked_at_again() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path();
        for id in ["s-a", "s-b"] {
            write_old(home, id, id);
        }
        watched(home);
        std::thread::sleep(LIST_STALE + Duration::from_millis(100));
        list_briefs_cached(home, []);
        assert_eq!(rechecked(home), 0);
        let project = home.join("sessions").join(P);
        fs::rename(&project, home.join("moved")).unwrap();
        for id in ["s-a", "s-b"] {
            let from = home.join("moved").join(id).join("session.jsonl.zstd");
            let to = log_path(home, id);
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            fs::copy(&from, &to).unwrap();
            age(&to);
            age(to.parent().unwrap());
        }
        age(&project);
        append_title(home, "s-a", "second", true);
        let l = list_briefs_cached(home, []);
        assert_eq!(shape(&l), shape(&list_briefs(home)));
        assert!(shape(&l).0.contains(&("s-a".into(), Some("second".into()))));
        assert_eq!(crate::index::memo_probe(home).unwrap().1, Ok(()));
    }

    /// An overflowed event queue ends the watcher: the home is swept again (an outside append
    /// shows within LIST_STALE, by a sweep of every folder).
    #[cfg(target_os = "linux")]
    #[test]
    fn an_event_queue_overflow_falls_back_to_the_sweep() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path();
        for id in ["s-a", "s-b", "s-c"] {
            write_old(home, id, id);
        }
        watched(home);
        crate::index::with_watch(home, |w| w.inject(inotify::EventMask::Q_OVERFLOW));
        append_title(home, "s-a", "second", true);
        list_briefs_cached(home, []);
        let (_, state) = crate::index::memo_probe(home).unwrap();
        assert_eq!(state, Err(crate::watch::WatchOff::Overflow));
        std::thread::sleep(LIST_STALE + Duration::from_millis(100));
        assert_eq!(titles(home, [])[0], pair("s-a", "second"));
        assert_eq!(rechecked(home), 3, "a sweep");
    }

    /// More session folders than the watch limit allows: the watches are given back and the
    /// home is swept as before.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_watch_limit_falls_back_to_the_sweep() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path();
        crate::index::set_watch_cap(home, 2);
        for id in ["s-a", "s-b", "s-c"] {
            write_old(home, id, id);
        }
        list_briefs_cached(home, []);
        list_briefs_cached(home, []);
        let (_, state) = crate::index::memo_probe(home).unwrap();
        assert_eq!(state, Err(crate::watch::WatchOff::TooMany { cap: 2 }));
        append_title(home, "s-b", "second", true);
        std::thread::sleep(LIST_STALE + Duration::from_millis(100));
        assert_eq!(titles(home, [])[1], pair("s-b", "second"));
        assert_eq!(rechecked(home), 3, "a sweep");
    }

    #[cfg(unix)]
    #[test]
    fn a_session_folder_linked_inside_the_home_is_re_checked_through_its_link() {
        // The sweep's fast `fstatat` does not follow a folder link: it must fall back to the
        // path (which follows a link that stays inside DSH_HOME) and still see an append.
        let d = tempfile::tempdir().unwrap();
        write_old(d.path(), "s-a", "a");
        let real = d.path().join("stash").join("s-link");
        fs::create_dir_all(&real).unwrap();
        let mut b = LogBuilder::v0("s-link", Some("/w/memo"), BASE_TIME);
        b.title("linked", serde_json::json!({"kind":"user"}), &[]);
        fs::write(real.join("session.jsonl.zstd"), b.zstd()).unwrap();
        age(&real.join("session.jsonl.zstd"));
        age(&real);
        let link = d.path().join("sessions").join(P).join("s-link");
        std::os::unix::fs::symlink("../../stash/s-link", &link).unwrap();
        assert_eq!(
            titles(d.path(), ["s-link"]),
            [pair("s-a", "a"), pair("s-link", "linked")]
        );
        append_title(d.path(), "s-link", "moved", true);
        assert_eq!(
            titles(d.path(), ["s-link"]),
            [pair("s-a", "a"), pair("s-link", "moved")]
        );
        assert_eq!(
            shape(&list_briefs_cached(d.path(), ["s-link"])),
            shape(&list_briefs(d.path()))
        );
    }

    #[test]
    fn concurrent_listings_of_one_home_take_turns_and_share_one_listing() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..40 {
            write_old(d.path(), &format!("s-{i:02}"), &format!("t{i}"));
        }
        let home = d.path().to_path_buf();
        let got: Vec<std::sync::Arc<BriefListing>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| list_briefs_cached(&home, ["s-07"])))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // One of them built it; the others waited and found nothing changed.
        for l in &got[1..] {
            assert!(std::sync::Arc::ptr_eq(&got[0], l));
        }
        assert_eq!(shape(&got[0]), shape(&list_briefs(&home)));
        assert_eq!(got[0].sessions.len(), 40);
    }
}
