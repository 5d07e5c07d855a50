use super::*;
use crate::render::ledger::render;

const NOW: i64 = 1_761_741_296_789;

fn e(i: i64, sender: &str, target: &str, outcome: &str) -> Entry {
    Entry::new(
        NOW + i,
        Some(sender),
        Some(target),
        "send_session_message",
        Some("queue"),
        Some(&format!("dsh-session-mail:{i}")),
        outcome.into(),
        Some("hello"),
    )
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_line_has_exactly_the_documented_fields() {
    let home = tempfile::tempdir().unwrap();
    append(home.path(), &e(0, "session-a", "session-b", "accepted")).unwrap();
    let l = lines(&path(home.path()));
    assert_eq!(l.len(), 1);
    let v: serde_json::Value = serde_json::from_str(&l[0]).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "bodyChars",
            "bodySha256",
            "mode",
            "outcome",
            "requestId",
            "sender",
            "target",
            "time",
            "tool"
        ]
    );
    assert_eq!(v["time"], "2025-10-29T12:34:56.789Z");
    assert_eq!(v["bodyChars"], 5);
    assert_eq!(
        v["bodySha256"],
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );
    // a refusal before an id was minted, for a call without a message string
    let r = Entry::new(
        NOW,
        None,
        None,
        "sessions_send",
        None,
        None,
        "refused:no-caller".into(),
        None,
    );
    let j = serde_json::to_value(&r).unwrap();
    assert!(
        j["sender"].is_null()
            && j["requestId"].is_null()
            && j["bodyChars"].is_null()
            && j["bodySha256"].is_null()
    );
}

#[cfg(unix)]
#[test]
fn owner_only_and_tightened() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    append(home.path(), &e(0, "a", "b", "accepted")).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir(home.path())), 0o700);
    assert_eq!(mode(&path(home.path())), 0o600);
    // found looser: tightened on the next append
    std::fs::set_permissions(dir(home.path()), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(path(home.path()), std::fs::Permissions::from_mode(0o644)).unwrap();
    append(home.path(), &e(1, "a", "b", "accepted")).unwrap();
    assert_eq!(mode(&dir(home.path())), 0o700);
    assert_eq!(mode(&path(home.path())), 0o600);
}

#[test]
fn never_the_body_nor_a_secret() {
    let home = tempfile::tempdir().unwrap();
    let secret = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc";
    let body = format!("the deploy password is hunter2-{secret}; cookie dsh-auth-abc=v1.xyz");
    let entry = Entry::new(
        NOW,
        Some("session-a"),
        Some("session-b"),
        "sessions_send",
        Some("steer"),
        Some("dsh-session-mail:1"),
        "accepted".into(),
        Some(&body),
    );
    append(home.path(), &entry).unwrap();
    let text = std::fs::read_to_string(path(home.path())).unwrap();
    for needle in [
        "hunter2",
        secret,
        &secret[..16],
        "dsh-auth-",
        "password",
        "v1.xyz",
    ] {
        assert!(!text.contains(needle), "{needle} leaked: {text}");
    }
    assert!(text.contains(&sha256_hex(&body)));
    assert!(text.contains(&format!("\"bodyChars\":{}", body.chars().count())));
}

#[test]
fn read_filters_and_renders() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    assert_eq!(
        read_ledger(h, &Filter::default()).unwrap(),
        LedgerRead::default(),
        "no ledger yet: empty"
    );
    append(h, &e(0, "session-a", "session-b", "accepted")).unwrap();
    append(h, &e(1000, "session-b", "session-a", "refused:budget")).unwrap();
    append(h, &e(2000, "session-a", "session-c", "may-have-landed")).unwrap();
    let all = read_ledger(h, &Filter::default()).unwrap();
    assert_eq!(all.entries.len(), 3);
    assert_eq!(all.files, vec![path(h)]);
    let f = |filter: Filter| read_ledger(h, &filter).unwrap().entries.len();
    assert_eq!(
        f(Filter {
            sender: Some("session-a".into()),
            ..Filter::default()
        }),
        2
    );
    assert_eq!(
        f(Filter {
            session: Some("session-a".into()),
            ..Filter::default()
        }),
        3
    );
    assert_eq!(
        f(Filter {
            target: Some("session-b".into()),
            ..Filter::default()
        }),
        1
    );
    assert_eq!(
        f(Filter {
            since_ms: Some(NOW + 1000),
            ..Filter::default()
        }),
        2
    );
    assert_eq!(
        f(Filter {
            until_ms: Some(NOW + 1000),
            ..Filter::default()
        }),
        1
    );
    assert_eq!(
        f(Filter {
            request_id: Some("dsh-session-mail:2000".into()),
            ..Filter::default()
        }),
        1
    );
    let last = read_ledger(
        h,
        &Filter {
            limit: Some(1),
            ..Filter::default()
        },
    )
    .unwrap();
    assert_eq!(
        last.entries[0].outcome.as_string(),
        "may-have-landed",
        "limit keeps the newest"
    );
    let text = render(&all);
    assert!(text.starts_with("2025-10-29T12:34:56.789Z session-a → session-b send_session_message queue accepted chars=5 sha256=2cf24dba5fb0… dsh-session-mail:0\n"), "{text}");
    assert!(text.ends_with("3 attempt(s)"), "{text}");
}

#[test]
fn a_torn_last_line_is_tolerated_and_repaired() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    append(h, &e(0, "a", "b", "accepted")).unwrap();
    append(h, &e(1, "a", "b", "accepted")).unwrap();
    // a crash in the middle of the third write
    let full = serde_json::to_string(&e(2, "a", "b", "accepted")).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path(h))
        .unwrap();
    f.write_all(&full.as_bytes()[..full.len() / 2]).unwrap();
    drop(f);
    let r = read_ledger(h, &Filter::default()).unwrap();
    assert_eq!((r.entries.len(), r.unreadable, r.torn_tail), (2, 0, true));
    assert!(render(&r).ends_with("2 attempt(s); a torn last line skipped"));
    // a complete-looking line without its newline is not trusted either
    let home2 = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir(home2.path())).unwrap();
    std::fs::write(path(home2.path()), &full).unwrap();
    assert_eq!(
        read_ledger(home2.path(), &Filter::default())
            .unwrap()
            .entries
            .len(),
        0
    );
    // the next append starts on a fresh line: the torn one stays unreadable, the new one is whole
    append(h, &e(3, "a", "b", "accepted")).unwrap();
    let r = read_ledger(h, &Filter::default()).unwrap();
    assert_eq!((r.entries.len(), r.unreadable, r.torn_tail), (3, 1, false));
    assert_eq!(
        r.entries[2].request_id.as_deref(),
        Some("dsh-session-mail:3")
    );
    // garbage lines in the middle are counted, not fatal
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path(h))
        .unwrap();
    f.write_all(b"not json\n{\"time\":1}\n\n").unwrap();
    drop(f);
    append(h, &e(4, "a", "b", "accepted")).unwrap();
    let r = read_ledger(h, &Filter::default()).unwrap();
    assert_eq!((r.entries.len(), r.unreadable), (4, 3));
}

#[test]
fn rotation_keeps_three_files() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let mut first = e(0, "session-a", "session-b", "accepted");
    first.request_id = Some("dsh-session-mail:000".into());
    let one = serde_json::to_string(&first).unwrap().len() as u64 + 1;
    let limit = one * 10; // ten lines per file
    for i in 0..55 {
        let mut x = e(i, "session-a", "session-b", "accepted");
        x.request_id = Some(format!("dsh-session-mail:{i:03}")); // equal line lengths
        append_with_limit(h, &x, limit).unwrap();
    }
    assert!(
        rotated_path(h, 1).exists() && rotated_path(h, 2).exists() && rotated_path(h, 3).exists()
    );
    assert!(!rotated_path(h, 4).exists());
    for p in [
        path(h),
        rotated_path(h, 1),
        rotated_path(h, 2),
        rotated_path(h, 3),
    ] {
        assert!(
            std::fs::metadata(&p).unwrap().len() <= limit,
            "{}",
            p.display()
        );
    }
    let r = read_ledger(h, &Filter::default()).unwrap();
    // 55 lines written, 10 per file: the live file has 5, three rotated files hold 30, 20 were dropped
    assert_eq!(r.entries.len(), 35);
    let ids: Vec<i64> = r
        .entries
        .iter()
        .map(|x| {
            x.request_id.as_deref().unwrap()["dsh-session-mail:".len()..]
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(
        ids,
        (20..55).collect::<Vec<_>>(),
        "oldest first, across files, nothing lost or reordered"
    );
    assert_eq!(r.files.first(), Some(&rotated_path(h, 3)));
    // a since bound newer than every rotated file reads only the live one
    let r = read_ledger(
        h,
        &Filter {
            since_ms: Some(NOW + 52),
            ..Filter::default()
        },
    )
    .unwrap();
    assert_eq!(r.files, vec![path(h)]);
    assert_eq!(r.entries.len(), 3);
    // one that reaches into the previous file reads it too
    let r = read_ledger(
        h,
        &Filter {
            since_ms: Some(NOW + 45),
            ..Filter::default()
        },
    )
    .unwrap();
    assert_eq!(r.files, vec![rotated_path(h, 1), path(h)]);
    assert_eq!(r.entries.len(), 10);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(path(h)).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}

#[test]
fn concurrent_appends_never_interleave() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path().to_path_buf();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let h = h.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    // long bodies make long lines (hash only, but long ids too)
                    let target = format!("session-{t}-{}", "x".repeat(300));
                    let entry = Entry::new(
                        NOW + i,
                        Some(&format!("session-t{t}")),
                        Some(&target),
                        "sessions_send",
                        Some("queue"),
                        Some(&format!("dsh-session-mail:{t}-{i}")),
                        "accepted".into(),
                        Some(&"y".repeat(1000)),
                    );
                    append(&h, &entry).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let l = lines(&path(&h));
    assert_eq!(l.len(), 400);
    for line in &l {
        let entry: Entry = serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}"));
        assert_eq!(entry.outcome, LedgerOutcome::Accepted);
    }
    let r = read_ledger(&h, &Filter::default()).unwrap();
    assert_eq!(
        (r.entries.len(), r.unreadable, r.torn_tail),
        (400, 0, false)
    );
    let mut ids: Vec<String> = r.entries.into_iter().filter_map(|x| x.request_id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 400);
}

#[test]
fn long_fields_are_capped() {
    let long = "s".repeat(5000);
    let x = Entry::new(
        NOW,
        Some(&long),
        Some(&long),
        "sessions_send",
        None,
        None,
        "refused:bad-argument".into(),
        None,
    );
    assert_eq!(
        x.sender.as_ref().unwrap().chars().count(),
        MAX_FIELD_CHARS + 1
    );
    assert!(x.target.as_ref().unwrap().ends_with('…'));
}

#[test]
fn an_unwritable_ledger_is_an_error_not_a_panic() {
    let home = tempfile::tempdir().unwrap();
    // a file where the directory should be
    std::fs::write(dir(home.path()), "x").unwrap();
    let err = append(home.path(), &e(0, "a", "b", "accepted")).unwrap_err();
    assert!(
        matches!(&err, LedgerError::Refused { path, why: fsafe::Refused::NotDir { .. } } if *path == dir(home.path())),
        "{err:?}"
    );
    assert!(err.to_string().contains(DIR_NAME), "{err}");
}

#[cfg(unix)]
#[test]
fn a_rotated_ledger_is_owner_only_and_links_are_never_followed() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    append(h, &e(0, "session-a", "session-b", "accepted")).unwrap();
    // Someone loosened the live file: the rotated copy must not keep 0644.
    std::fs::set_permissions(path(h), std::fs::Permissions::from_mode(0o644)).unwrap();
    append_with_limit(h, &e(1, "session-a", "session-b", "accepted"), 10).unwrap();
    let m = std::fs::metadata(rotated_path(h, 1)).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    let m = std::fs::metadata(path(h)).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    // A ledger file linked out of the home: neither appended to nor chmod'ed.
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("v");
    std::fs::write(&victim, "x\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::remove_file(path(h)).unwrap();
    std::os::unix::fs::symlink(&victim, path(h)).unwrap();
    let err = append(h, &e(2, "session-a", "session-b", "accepted")).unwrap_err();
    assert_eq!(err, LedgerError::Link { path: path(h) });
    assert_eq!(
        read_ledger(h, &Filter::default()).unwrap_err(),
        LedgerError::Refused {
            path: path(h),
            why: fsafe::Refused::Link
        }
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "x\n");
    assert_eq!(
        std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777,
        0o644
    );
    assert!(health(h).unwrap().contains("symbolic link"));
    // Over the read cap: refused, never read whole.
    std::fs::remove_file(path(h)).unwrap();
    let f = std::fs::File::create(path(h)).unwrap();
    f.set_len(READ_CAP + 1).unwrap();
    assert_eq!(
        read_ledger(h, &Filter::default()).unwrap_err(),
        LedgerError::Refused {
            path: path(h),
            why: fsafe::Refused::TooBig {
                len: READ_CAP + 1,
                cap: READ_CAP
            }
        }
    );
}

/// The live file's parse cache gives exactly what a whole parse gives, after every kind of change: appends
/// (also by another writer), a torn tail later completed, garbage, a rewrite and a truncation of the parsed
/// part, and a rotation.
#[test]
fn the_live_file_parse_cache_agrees_with_a_whole_parse_after_every_change() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let whole = || {
        let (f, _) = fsafe::open_regular(&path(h), Follow::No, Some(READ_CAP)).unwrap();
        let (entries, unreadable, torn) = read_file(f).unwrap();
        (entries, unreadable, torn)
    };
    let check = |what: &str| {
        let got = read_ledger(h, &Filter::default()).unwrap();
        let (entries, unreadable, torn) = whole();
        assert_eq!(got.entries, entries, "{what}: entries");
        assert_eq!(
            (got.unreadable, got.torn_tail),
            (unreadable, torn),
            "{what}: counts"
        );
        got.entries.len()
    };
    let raw = |bytes: &[u8]| {
        use std::io::Write;
        let mut f = OpenOptions::new().append(true).open(path(h)).unwrap();
        f.write_all(bytes).unwrap();
    };
    for i in 0..3 {
        append(h, &e(i, "session-a", "session-b", "accepted")).unwrap();
    }
    assert_eq!(check("three lines"), 3);
    // the same read again (nothing new) and an append by "another process" (raw bytes)
    assert_eq!(check("unchanged"), 3);
    let line = serde_json::to_string(&e(3, "session-c", "session-b", "accepted")).unwrap();
    raw(format!("{line}\n").as_bytes());
    assert_eq!(check("appended by another writer"), 4);
    // a write in progress: the half line is torn, then completed
    let line = serde_json::to_string(&e(4, "session-a", "session-d", "accepted")).unwrap();
    let (a, b) = line.split_at(line.len() / 2);
    raw(a.as_bytes());
    assert_eq!(check("half a line"), 4);
    assert!(read_ledger(h, &Filter::default()).unwrap().torn_tail);
    raw(format!("{b}\n").as_bytes());
    assert_eq!(check("the line completed"), 5);
    // garbage, an over-cap line, a blank line, then a good line
    raw(b"not json\n\n");
    raw(&vec![b'x'; LINE_CAP + 10]);
    raw(b"\n");
    append(h, &e(5, "session-a", "session-b", "refused:budget")).unwrap();
    assert_eq!(check("garbage and an over-cap line"), 6);
    assert_eq!(read_ledger(h, &Filter::default()).unwrap().unreadable, 2);
    // a chain: its lines (chain field) and its first delivery (request id = the chain)
    let mut first = e(20, "session-a", "session-b", "accepted");
    first.request_id = Some("dsh-session-mail:c1".into());
    let mut hop2 = e(21, "session-b", "session-c", "accepted");
    hop2.chain = Some("dsh-session-mail:c1".into());
    let mut other = e(22, "session-b", "session-c", "accepted");
    other.chain = Some("dsh-session-mail:c2".into());
    for x in [&first, &hop2, &other] {
        append(h, x).unwrap();
    }
    let c = Filter {
        chain: Some("dsh-session-mail:c1".into()),
        ..Filter::default()
    };
    assert_eq!(read_ledger(h, &c).unwrap().entries, vec![first, hop2]);
    assert_eq!(check("a chain appended"), 9);
    // the filter applies to cached entries too
    let f = Filter {
        target: Some("session-d".into()),
        ..Filter::default()
    };
    assert_eq!(read_ledger(h, &f).unwrap().entries.len(), 1);
    // rewritten in place (same inode, other content of the same length and more): parsed afresh
    let text = std::fs::read_to_string(path(h)).unwrap();
    let rewritten = text.replace("session-a", "session-z");
    assert_eq!(rewritten.len(), text.len());
    {
        use std::io::Write;
        let mut f = OpenOptions::new().write(true).open(path(h)).unwrap();
        f.write_all(rewritten.as_bytes()).unwrap();
        f.write_all(b"").unwrap();
    }
    let n = check("rewritten in place");
    assert!(read_ledger(h, &Filter::default())
        .unwrap()
        .entries
        .iter()
        .all(|x| x.sender.as_deref() != Some("session-a")));
    assert_eq!(n, 9);
    // truncated, then one line: parsed afresh
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path(h))
        .unwrap();
    append(h, &e(9, "session-q", "session-b", "accepted")).unwrap();
    assert_eq!(check("truncated"), 1);
    // rotated: the live file is a new inode
    append_with_limit(h, &e(10, "session-r", "session-b", "accepted"), 1).unwrap();
    let got = read_ledger(h, &Filter::default()).unwrap();
    assert_eq!(
        got.entries.len(),
        2,
        "the rotated line and the new live one"
    );
    assert_eq!(got.entries[1].sender.as_deref(), Some("session-r"));
}

/// A rotated file's kept parse gives exactly what reading the file gives, after every change a writer
/// can make to it: a rewrite in place of the same length with its modification time put back (soon
/// after the parse, when only its bytes can tell, and later, when its change time tells), an append, a
/// truncation, another file renamed over it.
#[test]
fn a_rotated_files_kept_parse_agrees_with_reading_the_file_after_every_change() {
    use std::io::Write;
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for i in 0..20 {
        append(h, &e(i, "session-a", "session-b", "accepted")).unwrap();
    }
    // the next line rotates: ledger.1.jsonl holds the 20 lines
    append_with_limit(h, &e(20, "session-a", "session-c", "accepted"), 1).unwrap();
    let p1 = rotated_path(h, 1);
    let whole = || {
        let mut entries = Vec::new();
        let mut unreadable = 0;
        for p in [rotated_path(h, 1), path(h)] {
            let (f, _) = fsafe::open_regular(&p, Follow::No, Some(READ_CAP)).unwrap();
            let (mut es, u, _) = read_file(f).unwrap();
            entries.append(&mut es);
            unreadable += u;
        }
        (entries, unreadable)
    };
    let check = |what: &str| {
        let got = read_ledger(h, &Filter::default()).unwrap();
        let (entries, unreadable) = whole();
        assert_eq!(got.entries, entries, "{what}: entries");
        assert_eq!(got.unreadable, unreadable, "{what}: unreadable");
        assert_eq!(got.files, vec![rotated_path(h, 1), path(h)], "{what}");
        got.entries.len()
    };
    // rewrite `from` → `to` (same length) in place and put the modification time back
    let rewrite = |from: &str, to: &str| {
        let text = std::fs::read_to_string(&p1).unwrap();
        let mtime = std::fs::metadata(&p1).unwrap().modified().unwrap();
        let changed = text.replace(from, to);
        assert_eq!(changed.len(), text.len());
        let mut f = OpenOptions::new().write(true).open(&p1).unwrap();
        f.write_all(changed.as_bytes()).unwrap();
        f.set_modified(mtime).unwrap();
    };
    assert_eq!(check("rotated"), 21);
    assert_eq!(check("read again: the kept parse"), 21);
    rewrite("session-b", "session-x");
    assert_eq!(check("rewritten right after the parse"), 21);
    assert!(read_ledger(h, &Filter::default())
        .unwrap()
        .entries
        .iter()
        .all(|x| x.target.as_deref() != Some("session-b")));
    // past the span in which a change may keep the change time: the times prove it unchanged, and a
    // rewrite with the modification time put back still shows (the change time moved)
    std::thread::sleep(parsed::RACY_COARSE + std::time::Duration::from_millis(100));
    assert_eq!(check("read again later"), 21);
    rewrite("session-x", "session-y");
    assert_eq!(check("rewritten later, its mtime put back"), 21);
    assert!(read_ledger(h, &Filter::default())
        .unwrap()
        .entries
        .iter()
        .any(|x| x.target.as_deref() == Some("session-y")));
    // appended to, truncated, replaced
    let line = serde_json::to_string(&e(30, "session-q", "session-b", "accepted")).unwrap();
    OpenOptions::new()
        .append(true)
        .open(&p1)
        .unwrap()
        .write_all(format!("{line}\nnot json\n").as_bytes())
        .unwrap();
    assert_eq!(check("appended"), 22);
    let text = std::fs::read_to_string(&p1).unwrap();
    let cut = text
        .lines()
        .take(5)
        .map(|l| format!("{l}\n"))
        .collect::<String>();
    OpenOptions::new()
        .write(true)
        .open(&p1)
        .unwrap()
        .set_len(cut.len() as u64)
        .unwrap();
    assert_eq!(check("truncated"), 6);
    let other = dir(h).join("other.jsonl");
    std::fs::write(&other, format!("{line}\n")).unwrap();
    std::fs::rename(&other, &p1).unwrap();
    assert_eq!(check("replaced by another file"), 2);
}

/// `scan_timed` hands each line over with the time parsed when the line was read: the same as parsing the
/// line's own `time` (readable or not), through the live file's kept parse, across appends, and the time
/// bound filters on it as `Filter::matches` does.
#[test]
fn a_scanned_line_carries_its_own_time_parsed_once() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let mut odd = e(5, "session-a", "session-b", "accepted");
    odd.time = "yesterday".into();
    for x in [
        e(0, "session-a", "session-b", "accepted"),
        odd,
        e(9, "session-a", "session-c", "accepted"),
    ] {
        append(h, &x).unwrap();
    }
    let collect = |filter: &Filter| {
        let mut got = Vec::new();
        scan_timed(h, filter, |e, t| got.push((e.time.clone(), t, e.time_ms()))).unwrap();
        got
    };
    for round in 0..2 {
        let all = collect(&Filter::default());
        assert_eq!(all.len(), 3 + round, "round {round}");
        assert!(
            all.iter().all(|(_, t, own)| t == own),
            "round {round}: {all:?}"
        );
        assert_eq!(all[1].1, None, "an unreadable time is none");
        // since: the unreadable line is out, as `Filter::matches` has it
        let since = Filter {
            since_ms: Some(NOW + 1),
            ..Filter::default()
        };
        let kept: Vec<_> = collect(&since).into_iter().map(|(_, t, _)| t).collect();
        let mut want = vec![Some(NOW + 9)];
        if round == 1 {
            want.push(Some(NOW + 20));
        }
        assert_eq!(kept, want, "round {round}");
        let entries = read_ledger(h, &since).unwrap().entries;
        assert!(entries.iter().all(|x| since.matches(x)) && entries.len() == want.len());
        // an append in between: the kept parse takes the new line with its time
        append(h, &e(20, "session-a", "session-b", "accepted")).unwrap();
    }
}

#[test]
fn rotated_files_found_absent_are_looked_for_again_once_the_folder_changes() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let all = |h: &Path| {
        read_ledger(h, &Filter::default())
            .unwrap()
            .entries
            .iter()
            .map(|e| e.request_id.clone().unwrap())
            .collect::<Vec<_>>()
    };
    append(h, &e(0, "a", "b", "accepted")).unwrap();
    // the folder last changed past the racy span: the read finds no rotated file and keeps that
    std::thread::sleep(std::time::Duration::from_millis(150));
    assert_eq!(all(h), ["dsh-session-mail:0"]);
    assert_eq!(all(h), ["dsh-session-mail:0"]);
    // a rotated file renamed into the folder right after (as rotation makes it) is read at once
    let made = dir(h).join("made.tmp");
    std::fs::write(
        &made,
        serde_json::to_string(&e(-2, "a", "b", "accepted")).unwrap() + "\n",
    )
    .unwrap();
    std::fs::rename(&made, rotated_path(h, 1)).unwrap();
    assert_eq!(all(h), ["dsh-session-mail:-2", "dsh-session-mail:0"]);
    // and one planted in place, older still, after the folder was quiet again
    std::thread::sleep(std::time::Duration::from_millis(150));
    assert_eq!(all(h).len(), 2);
    std::fs::write(
        rotated_path(h, 2),
        serde_json::to_string(&e(-3, "a", "b", "accepted")).unwrap() + "\n",
    )
    .unwrap();
    assert_eq!(
        all(h),
        [
            "dsh-session-mail:-3",
            "dsh-session-mail:-2",
            "dsh-session-mail:0"
        ]
    );
    // the same folder with every rotated file gone again: only the live file
    std::fs::remove_file(rotated_path(h, 1)).unwrap();
    std::fs::remove_file(rotated_path(h, 2)).unwrap();
    assert_eq!(all(h), ["dsh-session-mail:0"]);
}
