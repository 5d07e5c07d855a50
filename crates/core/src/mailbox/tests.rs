use super::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

const S: &str = "session-t";

fn rid(n: u8) -> String {
    format!("dsh-session-mail:00000000-0000-4000-8000-0000000000{n:02x}")
}

fn env(n: u8, owner_pid: u32, started: i64) -> Envelope {
    Envelope {
        v: 1,
        request_id: rid(n),
        session_id: S.into(),
        mode: "queue".into(),
        text: format!("From session-s ：\nmessage {n}"),
        sender: Some("session-s".into()),
        owner_pid,
        owner_started_at: started,
        posted_at: 1_000 + n as i64,
    }
}

fn me(pid: u32) -> Drainer {
    Drainer {
        pid,
        started_at: 7,
        sessions: vec![S.into()],
    }
}

fn names(home: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(shard(home, S).unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn delivered(r: &str) -> Receipt {
    Receipt {
        request_id: r.into(),
        session_id: S.into(),
        state: ReceiptState::Delivered,
        code: None,
        message: None,
        route: Some("agent".into()),
        pid: 0,
    }
}

/// A log of session-t whose inbox holds request `r` (a previous holder delivered and flushed it).
fn log_with(home: &Path, r: &str) {
    let dir = home.join("sessions").join("--w--").join(S);
    fs::create_dir_all(&dir).unwrap();
    let msg = json!({"id":"m1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user","rpcId":r}});
    let lines = [
        json!({"type":"session","version":0,"id":S,"createdAt":1,"cwd":"/w"}),
        json!({"type":"agent/inbox/spliced","seq":0,"time":1,"data":{"target":"next-turn","start":0,"inserted":[msg]}}),
    ];
    fs::write(
        dir.join("session.jsonl"),
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
}

#[test]
fn posted_claimed_settled_once_and_private() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let pid = std::process::id();
    post(h, &env(2, pid, 7)).unwrap();
    post(h, &env(1, pid, 7)).unwrap();
    assert_eq!(mode(&root(h)), 0o700);
    assert_eq!(mode(&shard(h, S).unwrap()), 0o700);
    let key = rid(1)
        .strip_prefix("dsh-session-mail:")
        .unwrap()
        .to_string();
    assert_eq!(
        mode(&shard(h, S).unwrap().join(format!("{key}.msg"))),
        0o600
    );
    assert!(waiting(h, S, &rid(1)));
    // verify says where it waits (no log holds it yet; found with or without the session named)
    for named in [None, Some(S)] {
        let v = crate::fate::verify(h, &rid(1), named);
        let f = crate::render::fate::request_fate(&v, &rid(1), h);
        assert!(
            f.text
                .starts_with(&format!("waiting: {} is in the mailbox of {S}", rid(1))),
            "{}",
            f.text
        );
    }

    let got = drain(h, &me(pid), 0);
    // oldest first, both claimed, none in the log yet
    assert_eq!(
        got.iter().map(|c| c.request_id.clone()).collect::<Vec<_>>(),
        vec![rid(1), rid(2)]
    );
    assert!(got.iter().all(|c| !c.landed && c.session_id == S));
    assert!(
        names(h)
            .iter()
            .all(|n| n.contains(&format!(".claimed-{pid}"))),
        "{:?}",
        names(h)
    );
    assert!(waiting(h, S, &rid(1)), "claimed is still waiting");

    settle(h, pid, &delivered(&rid(1))).unwrap();
    let r = receipt(h, S, &rid(1)).unwrap();
    assert_eq!((r.state, r.pid), (ReceiptState::Delivered, pid));
    assert!(!waiting(h, S, &rid(1)));
    assert!(receipt(h, S, &rid(2)).is_none());
    // the unsettled claim of this process comes back on the next drain (the shim dedups by its memory
    // and the log); the settled one never does
    let again = drain(h, &me(pid), 0);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].request_id, rid(2));
    settle(h, pid, &delivered(&rid(2))).unwrap();
    assert!(drain(h, &me(pid), 0).is_empty());
}

#[test]
fn only_the_holder_drains_and_orphans_of_dead_owners_are_taken() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let other = std::os::unix::process::parent_id(); // alive, not us
    presence::verify::testing::trust(other);
    let dead = i32::MAX as u32 - 7;
    assert!(!presence::pid_alive(dead));
    // the other process holds S live (fresh presence record of the same incarnation)
    let rec = presence::Record {
        v: 1,
        pid: other,
        started_at: 5,
        sessions: vec![presence::PeerSession {
            id: S.into(),
            status: "idle".into(),
        }],
        ..Default::default()
    };
    let now = base::clock::now_ms();
    presence::publish(h, &rec, now).unwrap();
    post(h, &env(1, other, 5)).unwrap();
    post(h, &env(2, dead, 5)).unwrap();
    let got = drain(h, &me(std::process::id()), now);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        got[0].request_id,
        rid(2),
        "the dead owner's envelope is an orphan"
    );
    // another incarnation of the live pid (a different startedAt) no longer owns its envelope
    post(h, &env(3, other, 99)).unwrap();
    let got = drain(h, &me(std::process::id()), now);
    assert!(got.iter().any(|c| c.request_id == rid(3)), "{got:?}");
    assert!(!got.iter().any(|c| c.request_id == rid(1)));
    // a session the drainer does not hold is never looked at
    let mut other_sessions = me(std::process::id());
    other_sessions.sessions = vec!["session-x".into()];
    post(h, &env(4, dead, 5)).unwrap();
    assert!(drain(h, &other_sessions, now).is_empty());
}

#[test]
fn a_claim_left_by_a_crashed_owner_is_taken_once_and_a_landed_one_is_not_delivered_again() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let dead = i32::MAX as u32 - 9;
    post(h, &env(1, dead, 5)).unwrap();
    post(h, &env(2, dead, 5)).unwrap();
    // the dead owner had claimed both; it flushed #1 into the log before it died, not #2
    let d = shard(h, S).unwrap();
    for n in [1u8, 2] {
        let key = rid(n)
            .strip_prefix("dsh-session-mail:")
            .unwrap()
            .to_string();
        fs::rename(
            d.join(format!("{key}.msg")),
            d.join(format!("{key}.claimed-{dead}")),
        )
        .unwrap();
    }
    log_with(h, &rid(1));
    let pid = std::process::id();
    let got = drain(h, &me(pid), 0);
    assert_eq!(got.len(), 2);
    let by = |r: &str| got.iter().find(|c| c.request_id == r).unwrap().clone();
    assert!(by(&rid(1)).landed, "in the log: settle without delivering");
    assert!(!by(&rid(2)).landed, "not in the log: deliver");
    // two drainers racing for one orphan: the rename has one winner
    assert!(names(h)
        .iter()
        .all(|n| n.ends_with(&format!(".claimed-{pid}"))));
}

#[test]
fn hostile_files_are_ignored_or_removed() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let pid = std::process::id();
    post(h, &env(1, pid, 7)).unwrap();
    let d = shard(h, S).unwrap();
    let key = |n: u8| {
        rid(n)
            .strip_prefix("dsh-session-mail:")
            .unwrap()
            .to_string()
    };
    // a link to a valid envelope elsewhere, an envelope for another session, a name that is not its
    // request id, garbage, a huge file, a directory, a FIFO
    let outside = tempfile::tempdir().unwrap();
    let mut e = env(2, pid, 7);
    fs::write(outside.path().join("x"), serde_json::to_vec(&e).unwrap()).unwrap();
    std::os::unix::fs::symlink(outside.path().join("x"), d.join(format!("{}.msg", key(2))))
        .unwrap();
    e = env(3, pid, 7);
    e.session_id = "session-other".into();
    fs::write(
        d.join(format!("{}.msg", key(3))),
        serde_json::to_vec(&e).unwrap(),
    )
    .unwrap();
    e = env(4, pid, 7);
    fs::write(
        d.join(format!("{}.msg", key(5))),
        serde_json::to_vec(&e).unwrap(),
    )
    .unwrap();
    fs::write(d.join(format!("{}.msg", key(6))), b"{not json").unwrap();
    fs::write(
        d.join(format!("{}.msg", key(7))),
        vec![b' '; MAX_ENVELOPE_BYTES as usize + 1],
    )
    .unwrap();
    fs::create_dir(d.join(format!("{}.msg", key(8)))).unwrap();
    let c = std::ffi::CString::new(d.join(format!("{}.msg", key(9))).to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    fs::write(
        d.join("not-a-uuid.msg"),
        serde_json::to_vec(&env(10, pid, 7)).unwrap(),
    )
    .unwrap();
    let got = drain(h, &me(pid), 0);
    assert_eq!(
        got.iter().map(|c| c.request_id.clone()).collect::<Vec<_>>(),
        vec![rid(1)]
    );
    // the link was not followed (its target is intact); the invalid envelopes are gone
    assert!(outside.path().join("x").exists());
    for n in [2u8, 3, 5, 6, 7] {
        assert!(
            fs::symlink_metadata(d.join(format!("{}.msg", key(n)))).is_err(),
            "{n} should be removed"
        );
    }
    // a symlinked shard is not drained and a post does not go through it
    let home2 = tempfile::tempdir().unwrap();
    fs::create_dir_all(root(home2.path())).unwrap();
    std::os::unix::fs::symlink(&d, shard(home2.path(), S).unwrap()).unwrap();
    assert!(drain(home2.path(), &me(pid), 0).is_empty());
    assert!(matches!(
        post(home2.path(), &env(11, pid, 7)),
        Err(PostError::Io(_))
    ));
    // ids that cannot name a file
    let mut bad = env(12, pid, 7);
    bad.session_id = "../escape".into();
    assert_eq!(post(h, &bad), Err(PostError::BadId));
    bad = env(12, pid, 7);
    bad.request_id = "dsh-session-mail:../../x".into();
    assert_eq!(post(h, &bad), Err(PostError::BadId));
    // too large to be read back: refused at the sender, never posted
    bad = env(13, pid, 7);
    bad.text = "x".repeat(MAX_ENVELOPE_BYTES as usize);
    assert!(matches!(post(h, &bad), Err(PostError::TooLarge(_))));
    assert!(!waiting(h, S, &rid(13)));
}

#[test]
fn a_full_shard_refuses_release_gives_back_and_a_settled_leftover_goes() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let pid = std::process::id();
    let d = ensure_shard(h, S).unwrap();
    for _ in 0..MAX_PENDING {
        fs::write(d.join(format!("{}.msg", uuid::Uuid::new_v4())), b"{}").unwrap();
    }
    assert_eq!(post(h, &env(1, pid, 7)), Err(PostError::Full(MAX_PENDING)));
    fs::remove_dir_all(&d).unwrap();

    post(h, &env(1, pid, 7)).unwrap();
    assert_eq!(drain(h, &me(pid), 0).len(), 1);
    release(h, pid, S, &rid(1));
    assert!(names(h).iter().any(|n| n.ends_with(".msg")));
    // receipt written, claim not yet removed (a crash in between): the next drain removes it unsent
    assert_eq!(drain(h, &me(pid), 0).len(), 1);
    let key = rid(1)
        .strip_prefix("dsh-session-mail:")
        .unwrap()
        .to_string();
    let r = serde_json::to_vec(&delivered(&rid(1))).unwrap();
    fs::write(d.join(format!("{key}.done")), r).unwrap();
    assert!(drain(h, &me(pid), 0).is_empty());
    assert_eq!(names(h), vec![format!("{key}.done")]);
}
