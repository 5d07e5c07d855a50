use super::*;

fn row(i: u32, sender: &str, target: &str, chain: Option<&str>, text: &str) -> Row {
    Row {
        request_id: format!("dsh-session-mail:00000000-0000-4000-8000-{i:012}"),
        time: 1_700_000_000_000 + i as i64 * 1000,
        sender: Some(sender.into()),
        sender_title: Some(format!("Title of {sender}")),
        sender_machine: None,
        target: Some(target.into()),
        target_title: Some(format!("Title of {target}")),
        target_machine: None,
        tool: "sessions_send".into(),
        mode: Some("queue".into()),
        hop: Some(1),
        chain: chain.map(str::to_string),
        fate: "landed".into(),
        text: Some(text.into()),
    }
}

fn open(d: &Path) -> (Index, Opened) {
    Index::open_in(d).unwrap()
}

fn q(limit: usize) -> ListQuery {
    ListQuery {
        limit,
        ..Default::default()
    }
}

#[test]
fn a_new_index_is_private_and_a_second_open_finds_it_sealed() {
    let d = tempfile::tempdir().unwrap();
    let (mut ix, o) = open(d.path());
    assert_eq!(o, Opened::Created);
    ix.upsert(&[row(1, "a", "b", None, "hello")], Some("w1"))
        .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(ix.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    drop(ix);
    let (ix, o) = open(d.path());
    assert_eq!(o, Opened::Existing);
    let st = ix.state().unwrap();
    assert_eq!((st.rows, st.source.as_str()), (1, "w1"));
}

#[test]
fn upserts_are_idempotent_replace_by_request_id_and_list_newest_first_in_pages() {
    let d = tempfile::tempdir().unwrap();
    let (mut ix, _) = open(d.path());
    let rows: Vec<Row> = (0..25)
        .map(|i| row(i, if i % 2 == 0 { "a" } else { "c" }, "b", None, "x"))
        .collect();
    assert_eq!(ix.upsert(&rows, None).unwrap(), 25);
    assert_eq!(
        ix.upsert(&rows, None).unwrap(),
        0,
        "the same rows change nothing"
    );
    let mut moved = rows[3].clone();
    moved.fate = "queued".into();
    assert_eq!(ix.upsert(&[moved.clone()], None).unwrap(), 1);
    assert_eq!(ix.state().unwrap().rows, 25);
    assert_eq!(ix.get(&moved.request_id).unwrap(), Some(moved));

    let mut seen = Vec::new();
    let mut query = q(10);
    loop {
        let p = ix.list(&query).unwrap();
        seen.extend(p.rows.iter().map(|r| r.time));
        match p.next {
            Some(c) => query.before = Some(c.to_string().parse().unwrap()),
            None => break,
        }
    }
    let mut want: Vec<i64> = rows.iter().map(|r| r.time).collect();
    want.reverse();
    assert_eq!(seen, want, "three pages, newest first, none twice");

    let only_a = ix
        .list(&ListQuery {
            session: Some("a".into()),
            ..q(100)
        })
        .unwrap();
    assert_eq!(only_a.rows.len(), 13);
    let only_queued = ix
        .list(&ListQuery {
            fates: vec!["queued".into()],
            ..q(100)
        })
        .unwrap();
    assert_eq!(only_queued.rows.len(), 1);
    let window = ix
        .list(&ListQuery {
            since: Some(rows[5].time),
            until: Some(rows[8].time),
            ..q(100)
        })
        .unwrap();
    assert_eq!(
        window.rows.iter().map(|r| r.time).collect::<Vec<_>>(),
        vec![rows[7].time, rows[6].time, rows[5].time]
    );
}

#[test]
fn search_finds_words_in_bodies_and_titles_and_reads_operators_as_text() {
    let d = tempfile::tempdir().unwrap();
    let (mut ix, _) = open(d.path());
    ix.upsert(
        &[
            row(1, "a", "b", None, "the migration of the schema is done"),
            row(2, "b", "a", None, "thanks; what about the API?"),
            row(3, "c", "a", None, "Migrations again: the MIGRATION failed"),
            row(4, "d", "e", None, "nothing \"here\" OR NEAR(x) -y"),
        ],
        None,
    )
    .unwrap();
    let ids = |p: Page| {
        p.rows
            .iter()
            .map(|r| r.request_id[r.request_id.len() - 1..].to_string())
            .collect::<Vec<_>>()
    };
    let got = ids(ix.search("migration", &q(10)).unwrap());
    assert_eq!(got.len(), 2);
    assert_eq!(got[0], "3", "two hits rank above one");
    assert_eq!(
        ids(ix.search("migrat", &q(10)).unwrap()).len(),
        2,
        "a prefix"
    );
    assert_eq!(ids(ix.search("Title of e", &q(10)).unwrap()), vec!["4"]);
    assert_eq!(
        ids(ix.search("Title of d", &q(10)).unwrap()).len(),
        2,
        "the last word is a prefix: d finds 'done' too"
    );
    assert_eq!(ids(ix.search("OR NEAR(x) -y", &q(10)).unwrap()), vec!["4"]);
    assert_eq!(ids(ix.search("\"", &q(10)).unwrap()).len(), 0);
    let filtered = ix
        .search(
            "migration",
            &ListQuery {
                session: Some("b".into()),
                ..q(10)
            },
        )
        .unwrap();
    assert_eq!(ids(filtered), vec!["1"]);
    // pages of search results
    let p1 = ix.search("the", &q(1)).unwrap();
    assert_eq!(p1.rows.len(), 1);
    let p2 = ix
        .search(
            "the",
            &ListQuery {
                before: p1.next,
                ..q(10)
            },
        )
        .unwrap();
    assert_eq!(p2.rows.len(), 2);
    assert!(p2.next.is_none());
    assert!(!p2.rows.contains(&p1.rows[0]));
}

#[test]
fn a_thread_is_the_chain_and_the_pairs_mail_around_it_oldest_first() {
    let d = tempfile::tempdir().unwrap();
    let (mut ix, _) = open(d.path());
    let first = row(10, "a", "b", None, "question");
    let c = first.request_id.clone();
    let mut rows = vec![
        first,
        row(11, "b", "a", Some(&c), "answer"),
        row(12, "a", "c", Some(&c), "follow-up to c"),
        row(13, "b", "a", None, "a reply in a new chain"),
        row(14, "a", "d", None, "unrelated"),
    ];
    // the same pair, far away in time: not in the thread
    let mut far = row(15, "a", "b", None, "a week later");
    far.time += 7 * 24 * 3600 * 1000;
    rows.push(far);
    ix.upsert(&rows, None).unwrap();
    let t = ix.thread(&rows[1].request_id).unwrap().unwrap();
    assert_eq!(t.chain, c);
    let texts: Vec<&str> = t.rows.iter().map(|r| r.text.as_deref().unwrap()).collect();
    assert_eq!(
        texts,
        vec![
            "question",
            "answer",
            "follow-up to c",
            "a reply in a new chain"
        ]
    );
    assert!(ix.thread("dsh-session-mail:nope").unwrap().is_none());
}

#[test]
fn a_row_written_by_anything_else_is_detected_on_read_and_on_open() {
    let d = tempfile::tempdir().unwrap();
    let (mut ix, _) = open(d.path());
    ix.upsert(&[row(1, "a", "b", None, "real")], None).unwrap();
    // changed in place with its seal kept: the read detects it
    ix.conn
        .execute("UPDATE mail SET text = 'forged'", [])
        .unwrap();
    assert!(matches!(
        ix.list(&q(10)),
        Err(IndexError::Forged("row seal"))
    ));
    drop(ix);
    let (ix, o) = open(d.path());
    assert_eq!(o, Opened::Existing, "a changed text keeps the seals' XOR");
    drop(ix);
    // a row added: the open detects it
    let c = Connection::open(d.path().join(FILE)).unwrap();
    c.execute(
        "INSERT INTO mail(request_id, time, tool, fate, mac) VALUES ('x', 1, 't', 'landed', x'00')",
        [],
    )
    .unwrap();
    drop(c);
    let (ix, o) = open(d.path());
    assert_eq!(o, Opened::Replaced(Aside::Forged("row count")));
    assert_eq!(ix.state().unwrap().rows, 0, "a new, empty index");
    assert!(d.path().join("mail.sqlite.aside").exists());
}

#[test]
fn a_foreign_corrupt_truncated_old_or_linked_file_is_moved_aside() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(FILE);
    // another application's database
    let c = Connection::open(&p).unwrap();
    c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    drop(c);
    assert_eq!(open(d.path()).1, Opened::Replaced(Aside::Foreign));
    // not a database at all
    std::fs::remove_file(&p).unwrap();
    std::fs::write(&p, vec![7u8; 8192]).unwrap();
    assert!(matches!(
        open(d.path()).1,
        Opened::Replaced(Aside::Corrupt(_))
    ));
    // truncated mid-file
    {
        let (mut ix, _) = open(d.path());
        let rows: Vec<Row> = (0..300)
            .map(|i| row(i, "a", "b", None, &"word ".repeat(50)))
            .collect();
        ix.upsert(&rows, None).unwrap();
        ix.checkpoint().unwrap();
    }
    let len = std::fs::metadata(&p).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    let (ix, o) = open(d.path());
    assert!(matches!(o, Opened::Replaced(_)), "{o:?}");
    assert_eq!(ix.state().unwrap().rows, 0);
    drop(ix);
    // another schema version of ours
    let c = Connection::open(&p).unwrap();
    c.pragma_update(None, "user_version", 99).unwrap();
    drop(c);
    assert_eq!(open(d.path()).1, Opened::Replaced(Aside::OtherSchema(99)));
    // a link in its place is never followed
    #[cfg(unix)]
    {
        let elsewhere = tempfile::tempdir().unwrap();
        let target = elsewhere.path().join("victim.sqlite");
        std::fs::write(&target, b"keep me").unwrap();
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&target, &p).unwrap();
        let (_ix, o) = open(d.path());
        assert!(matches!(o, Opened::Replaced(Aside::NotAFile(_))));
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        assert!(!std::fs::symlink_metadata(&p)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}

#[test]
fn the_index_is_bounded_and_drops_its_oldest_rows_first() {
    let r = row(1, "a", "b", None, &"é".repeat(MAX_TEXT_CHARS + 10)).bounded();
    assert_eq!(r.text.unwrap().chars().count(), MAX_TEXT_CHARS);
    let d = tempfile::tempdir().unwrap();
    let (mut ix, _) = open(d.path());
    // trim works on the sealed count: pretend the table is at the bound
    let rows: Vec<Row> = (0..5).map(|i| row(i, "a", "b", None, "x")).collect();
    ix.upsert(&rows, None).unwrap();
    let tx = ix.conn.transaction().unwrap();
    let mut st = read_state(&tx, &ix.key).unwrap();
    st.rows += MAX_ROWS - 3; // as if MAX_ROWS + 2 rows were stored
    trim(&tx, &mut st).unwrap();
    drop(tx);
    let st2 = ix.state().unwrap();
    assert_eq!(st2.rows, 5, "rolled back: the real table is untouched");
    let tx = ix.conn.transaction().unwrap();
    let mut st = read_state(&tx, &ix.key).unwrap();
    st.rows += MAX_ROWS - 3;
    trim(&tx, &mut st).unwrap();
    let left: Vec<i64> = tx
        .prepare("SELECT time FROM mail ORDER BY time")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(left, vec![rows[2].time, rows[3].time, rows[4].time]);
}

#[test]
fn two_connections_write_the_same_file_under_wal() {
    let d = tempfile::tempdir().unwrap();
    let (mut a, _) = open(d.path());
    let (mut b, o) = open(d.path());
    assert_eq!(o, Opened::Existing);
    let ta = std::thread::spawn(move || {
        for i in 0..50 {
            a.upsert(&[row(i, "a", "b", None, "from a")], None).unwrap();
        }
        a
    });
    for i in 50..100 {
        b.upsert(&[row(i, "c", "d", None, "from b")], None).unwrap();
    }
    let a = ta.join().unwrap();
    assert_eq!(a.state().unwrap().rows, 100);
    assert_eq!(b.list(&q(200)).unwrap().rows.len(), 100);
    drop((a, b));
    assert_eq!(open(d.path()).1, Opened::Existing, "the seals still add up");
}

#[test]
fn a_chinese_word_inside_a_sentence_is_found_and_english_still_is() {
    let d = tempfile::tempdir().unwrap();
    let (mut ix, _) = open(d.path());
    let mut titled = row(4, "d", "e", None, "plain");
    titled.sender_title = Some("规划助手".into());
    ix.upsert(
        &[
            row(1, "a", "b", None, "数据库迁移已经完成，请检查API变更。"),
            row(2, "b", "a", None, "the migration of the schema is done"),
            row(3, "c", "a", None, "迁徙的鸟：移动不是迁移"),
            titled,
        ],
        None,
    )
    .unwrap();
    let ids = |p: Page| {
        let mut v: Vec<String> = p
            .rows
            .iter()
            .map(|r| r.request_id[r.request_id.len() - 1..].to_string())
            .collect();
        v.sort();
        v
    };
    // a two-character word inside a sentence with no spaces: the adjacent characters, not either alone
    assert_eq!(ids(ix.search("迁移", &q(10)).unwrap()), vec!["1", "3"]);
    assert_eq!(ids(ix.search("数据库", &q(10)).unwrap()), vec!["1"]);
    assert_eq!(
        ids(ix.search("移迁", &q(10)).unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(ids(ix.search("迁徙", &q(10)).unwrap()), vec!["3"]);
    // Latin letters glued to Chinese ones are a word of their own; a title in Chinese is searched too
    assert_eq!(ids(ix.search("API", &q(10)).unwrap()), vec!["1"]);
    assert_eq!(ids(ix.search("助手", &q(10)).unwrap()), vec!["4"]);
    // mixed queries: a Chinese and an English word both required
    assert_eq!(ids(ix.search("完成 API", &q(10)).unwrap()), vec!["1"]);
    assert_eq!(ids(ix.search("migration", &q(10)).unwrap()), vec!["2"]);
    // a row changed (its text rewritten) is found by its new words only
    ix.upsert(&[row(1, "a", "b", None, "改为回滚")], None)
        .unwrap();
    assert_eq!(ids(ix.search("迁移", &q(10)).unwrap()), vec!["3"]);
    assert_eq!(ids(ix.search("回滚", &q(10)).unwrap()), vec!["1"]);
}

#[test]
fn rows_written_newest_chunk_first_keep_the_ledgers_order_for_the_search_window() {
    let d = tempfile::tempdir().unwrap();
    let (mut ix, _) = open(d.path());
    let n = SEARCH_WINDOW as u32 + 150;
    let all: Vec<Row> = (0..n)
        .map(|i| row(i, "a", "b", None, "common word"))
        .collect();
    // a rebuild: the newest 100 first, then the rest, each at its place in the ledger's order
    let cut = (n - 100) as usize;
    ix.upsert_at(&all[cut..], Some(cut as i64 + 1), None)
        .unwrap();
    ix.upsert_at(&all[..cut], Some(1), None).unwrap();
    // the window is the newest matches: the best (equal rank) is the newest message, not one of the oldest
    let p = ix.search("common", &q(3)).unwrap();
    let got: Vec<i64> = p.rows.iter().map(|r| r.time).collect();
    assert_eq!(
        got,
        vec![
            all[n as usize - 1].time,
            all[n as usize - 2].time,
            all[n as usize - 3].time
        ]
    );
    // a later send takes the next id
    ix.upsert(&[row(n + 5, "a", "b", None, "common again")], None)
        .unwrap();
    assert_eq!(
        ix.search("common", &q(1)).unwrap().rows[0].time,
        row(n + 5, "a", "b", None, "").time
    );
    ix.compact().unwrap();
    assert_eq!(
        ix.list(&q(1)).unwrap().rows[0].time,
        row(n + 5, "a", "b", None, "").time
    );
}
