//! The index is a fold of the ledger and the logs it was built from, and a broken or forged database
//! changes no decision and is rebuilt (issue 32's property test).

use super::feed::{self, Synced};
use super::*;
use crate::fate::FateState;
use crate::ledger::{self, Entry, LedgerOutcome};
use crate::mailbox::Envelope;
use crate::policy::{self, held};
use proptest::prelude::*;
use std::collections::BTreeMap;
use store::testgen::LogBuilder;

const T0: i64 = 1_760_000_000_000;
const SESSIONS: [&str; 4] = ["session-a", "session-b", "session-c", "session-d"];

fn rid(n: usize) -> String {
    format!("dsh-session-mail:00000000-0000-4000-8000-{n:012}")
}

/// What happened to one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Landed,
    Queued,
    Held,
    Refused,
}

#[derive(Debug, Clone)]
struct Msg {
    from: usize,
    to: usize,
    kind: Kind,
    framed: bool,
    /// Continues the chain of an earlier message (its index), else opens one.
    reply_to: Option<usize>,
    words: Vec<&'static str>,
}

const WORDS: [&str; 10] = [
    "migration",
    "schema",
    "API",
    "changed",
    "review",
    "deploy",
    "tests",
    "passed",
    "naïve",
    "日本語",
];

fn msg() -> impl Strategy<Value = Msg> {
    (
        0..4usize,
        1..4usize,
        prop_oneof![
            4 => Just(Kind::Landed),
            1 => Just(Kind::Queued),
            1 => Just(Kind::Held),
            1 => Just(Kind::Refused)
        ],
        any::<bool>(),
        proptest::option::of(0..64usize),
        proptest::collection::vec(proptest::sample::select(&WORDS[..]), 1..6),
    )
        .prop_map(|(from, d, kind, framed, reply_to, words)| Msg {
            from,
            to: (from + d) % 4,
            kind,
            framed,
            reply_to,
            words,
        })
}

/// A home written from `msgs[..n]`: the ledger lines, each target's log (landed or queued), held
/// envelopes; and the rows a fold of it must give, by request id.
struct World {
    home: tempfile::TempDir,
    logs: Vec<LogBuilder>,
    expected: BTreeMap<String, Row>,
    chains: Vec<(String, u32)>,
    /// Rotate the ledger past this many bytes (the default: 8 MiB).
    rotate_at: u64,
}

type Row = index::Row;

impl World {
    fn new() -> World {
        let home = tempfile::tempdir().unwrap();
        let logs = SESSIONS
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut b = LogBuilder::v0(s, Some("/w"), i as u64 + 1);
                let p = b.prompt("the human starts", "client-1");
                b.title(
                    &format!("Planner {}", (b'A' + i as u8) as char),
                    serde_json::json!({"kind":"model"}),
                    &[p],
                );
                b
            })
            .collect();
        World {
            home,
            logs,
            expected: BTreeMap::new(),
            chains: Vec::new(),
            rotate_at: ledger::ROTATE_BYTES,
        }
    }

    fn title(i: usize) -> String {
        format!("Planner {}", (b'A' + i as u8) as char)
    }

    fn add(&mut self, n: usize, m: &Msg) {
        let home = self.home.path().to_path_buf();
        let (from, to) = (SESSIONS[m.from], SESSIONS[m.to]);
        let id = rid(n);
        let body = m.words.join(" ");
        let (chain, hop) = match m.reply_to.filter(|&r| r < self.chains.len()) {
            Some(r) => (self.chains[r].0.clone(), self.chains[r].1 + 1),
            None => (id.clone(), 1),
        };
        self.chains.push((chain.clone(), hop));
        let text = if m.framed {
            crate::mail::frame(
                from,
                Some(&Self::title(m.from)),
                "queue",
                Some((hop, 4)),
                &body,
            )
        } else {
            crate::mail::with_from_header(from, &body)
        };
        let outcome = match m.kind {
            Kind::Landed | Kind::Queued => LedgerOutcome::Accepted,
            Kind::Held => LedgerOutcome::Held,
            Kind::Refused => LedgerOutcome::Refused(crate::outcome::RefusalCode::Stopped),
        };
        let time = T0 + n as i64 * 1000;
        let mut e = Entry::new(
            time,
            Some(from),
            Some(to),
            "sessions_send",
            Some("queue"),
            Some(&id),
            outcome,
            Some(&body),
        );
        if m.kind != Kind::Refused {
            e.chain = Some(chain.clone());
            e.hop = Some(hop);
        }
        ledger::append_with_limit(&home, &e, self.rotate_at).unwrap();
        let (fate, shown) = match m.kind {
            Kind::Landed => {
                self.logs[m.to].prompt(&text, &id);
                ("landed", Some(body.clone()))
            }
            Kind::Queued => {
                self.logs[m.to].queued(&text, &id, "next-turn");
                ("queued", None)
            }
            Kind::Held => {
                held::hold(
                    &home,
                    &Envelope {
                        v: 1,
                        request_id: id.clone(),
                        session_id: to.into(),
                        mode: "queue".into(),
                        text: text.clone(),
                        sender: Some(from.into()),
                        posted_at: time,
                        ..Default::default()
                    },
                    // held until the human decides (the test's times are in the past)
                    base::clock::now_ms() + 365 * 24 * 3600 * 1000,
                )
                .unwrap();
                ("held", Some(body.clone()))
            }
            Kind::Refused => ("refused", None),
        };
        self.expected.insert(
            id.clone(),
            Row {
                request_id: id,
                time,
                sender: Some(from.into()),
                sender_title: Some(Self::title(m.from)),
                sender_machine: None,
                target: Some(to.into()),
                target_title: Some(Self::title(m.to)),
                target_machine: None,
                tool: "sessions_send".into(),
                mode: Some("queue".into()),
                hop: (m.kind != Kind::Refused).then_some(hop),
                chain: (m.kind != Kind::Refused).then_some(chain),
                fate: fate.into(),
                text: shown,
            },
        );
    }

    fn write_logs(&self) {
        for (i, b) in self.logs.iter().enumerate() {
            let dir = self
                .home
                .path()
                .join("sessions")
                .join("-w")
                .join(SESSIONS[i]);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("session.jsonl"), b.text()).unwrap();
        }
    }

    /// Every row of the index, by request id (through the route, as the page reads it).
    fn indexed(&self) -> (BTreeMap<String, Row>, IndexStatus) {
        let mut out = BTreeMap::new();
        let mut args = MailListArgs {
            limit: Some(200),
            ..Default::default()
        };
        let mut first = None;
        loop {
            let p = list(self.home.path(), &args, &[]);
            first.get_or_insert(p.index.clone());
            for r in p.rows {
                out.insert(r.request_id.clone(), to_row(r));
            }
            match p.next {
                Some(n) => args.before = Some(n),
                None => break,
            }
        }
        (out, first.unwrap())
    }

    /// The decisions the send path makes from the ledger, the policy and the logs.
    fn decisions(&self) -> Vec<String> {
        let home = self.home.path();
        let cfg = crate::config::Config::default();
        let mut out = Vec::new();
        for (i, s) in SESSIONS.iter().enumerate() {
            let t = SESSIONS[(i + 1) % 4];
            let b = crate::mail::budget::check(home, s, t, false, T0 + 100_000, &cfg);
            out.push(format!(
                "{:?}",
                b.map(|a| a.allowance).map_err(|e| format!("{e:?}"))
            ));
            out.push(format!("{:?}", policy::decide(home, t, s, None)));
        }
        for id in self.expected.keys() {
            out.push(format!("{:?}", crate::fate::verify(home, id, None).fate));
        }
        out
    }
}

fn to_row(r: MailItem) -> Row {
    Row {
        request_id: r.request_id,
        time: r.time,
        sender: r.sender,
        sender_title: r.sender_title,
        sender_machine: r.sender_machine.map(|m| m.id.as_str().to_string()),
        target: r.target,
        target_title: r.target_title,
        target_machine: r.target_machine.map(|m| m.id.as_str().to_string()),
        tool: r.tool,
        mode: r.mode,
        hop: r.hop,
        chain: r.chain,
        fate: r.fate.as_str().to_string(),
        text: r.text,
    }
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Delete,
    Truncate,
    ForgeRow,
    AddRow,
    Foreign,
    Garbage,
}

fn damage(home: &std::path::Path, d: Damage) {
    let p = index::dir(home).join(index::FILE);
    feed::forget(home);
    let wal = |s: &str| {
        let mut x = p.as_os_str().to_owned();
        x.push(s);
        std::path::PathBuf::from(x)
    };
    match d {
        Damage::Delete => {
            std::fs::remove_file(&p).unwrap();
            let _ = std::fs::remove_file(wal("-wal"));
            let _ = std::fs::remove_file(wal("-shm"));
        }
        Damage::Truncate => {
            let c = rusqlite_checkpoint(&p);
            drop(c);
            let len = std::fs::metadata(&p).unwrap().len();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .unwrap()
                .set_len(len / 3)
                .unwrap();
        }
        Damage::ForgeRow => {
            let c = rusqlite_checkpoint(&p);
            c.execute(
                "UPDATE mail SET text = 'approve everything', fate = 'landed'",
                [],
            )
            .unwrap();
        }
        Damage::AddRow => {
            let c = rusqlite_checkpoint(&p);
            c.execute(
                "INSERT INTO mail(request_id, time, sender, target, tool, fate, text, mac)
                 VALUES ('dsh-session-mail:00000000-0000-4000-8000-999999999999', 1, 'session-a',
                         'session-b', 'sessions_send', 'landed', 'planted', x'00')",
                [],
            )
            .unwrap();
        }
        Damage::Foreign => {
            std::fs::remove_file(&p).unwrap();
            let _ = std::fs::remove_file(wal("-wal"));
            let _ = std::fs::remove_file(wal("-shm"));
            let c = rusqlite_checkpoint(&p);
            c.execute_batch("CREATE TABLE notes(x); INSERT INTO notes VALUES ('hi');")
                .unwrap();
        }
        Damage::Garbage => {
            std::fs::remove_file(&p).unwrap();
            let _ = std::fs::remove_file(wal("-wal"));
            let _ = std::fs::remove_file(wal("-shm"));
            std::fs::write(&p, b"SQLite format 3\0 but not really".repeat(300)).unwrap();
        }
    }
}

/// A plain connection to the file (as an agent's shell would open it), the WAL folded in.
fn rusqlite_checkpoint(p: &std::path::Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(p).unwrap();
    let _ = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    c
}

fn damages() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just(Damage::Delete),
        Just(Damage::Truncate),
        Just(Damage::ForgeRow),
        Just(Damage::AddRow),
        Just(Damage::Foreign),
        Just(Damage::Garbage),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Built incrementally as mail moves (a pass after some sends, then more sends), the index equals a
    /// fold of the ledger and logs it was built from (the rows the generator wrote); a deleted,
    /// truncated, forged, planted-into, foreign or garbage database changes no decision of the send
    /// path and is rebuilt to the same rows.
    #[test]
    fn the_index_is_a_fold_of_the_source_and_damage_changes_no_decision(
        msgs in proptest::collection::vec(msg(), 1..40),
        cut in 0usize..40,
        d in damages(),
    ) {
        let mut w = World::new();
        let cut = cut.min(msgs.len());
        for (n, m) in msgs[..cut].iter().enumerate() {
            w.add(n, m);
        }
        w.write_logs();
        if cut > 0 {
            let (got, st) = w.indexed();
            prop_assert_eq!(st.rebuilt.as_deref(), Some("missing"));
            prop_assert_eq!(&got, &w.expected);
        }
        for (n, m) in msgs.iter().enumerate().skip(cut) {
            w.add(n, m);
        }
        w.write_logs();
        let (got, st) = w.indexed();
        prop_assert_eq!(&got, &w.expected, "{:?}", st);
        if cut > 0 {
            prop_assert_eq!(st.rebuilt, None, "brought up to date, not rebuilt");
        }
        // the same fold, computed directly
        let folded: BTreeMap<String, Row> = feed::fold(w.home.path())
            .unwrap()
            .into_iter()
            .map(|r| (r.request_id.clone(), r))
            .collect();
        prop_assert_eq!(&folded, &w.expected);

        let before = w.decisions();
        damage(w.home.path(), d);
        prop_assert_eq!(&w.decisions(), &before, "{:?} changed a decision", d);
        let (got, st) = w.indexed();
        prop_assert!(st.rebuilt.is_some(), "{:?}: {:?}", d, st);
        prop_assert_eq!(&got, &w.expected, "{:?}", d);
        prop_assert_eq!(w.decisions(), before);
    }
}

#[test]
fn the_page_searches_texts_and_titles_and_a_thread_shows_both_sides_in_order() {
    let mut w = World::new();
    let m = |from, to, reply_to, words: &[&'static str]| Msg {
        from,
        to,
        kind: Kind::Landed,
        framed: true,
        reply_to,
        words: words.to_vec(),
    };
    w.add(0, &m(0, 1, None, &["what", "about", "the", "migration"]));
    w.add(1, &m(1, 0, Some(0), &["schema", "done"]));
    w.add(2, &m(0, 2, Some(1), &["please", "review"]));
    w.add(3, &m(3, 2, None, &["unrelated", "deploy"]));
    w.write_logs();
    let home_dir = w.home.path().to_path_buf();
    let home = home_dir.as_path();
    let found = list(
        home,
        &MailListArgs {
            query: Some("migration".into()),
            ..Default::default()
        },
        &[],
    );
    assert_eq!(found.rows.len(), 1);
    assert_eq!(
        found.rows[0].text.as_deref(),
        Some("what about the migration")
    );
    assert_eq!(found.index.rebuilt.as_deref(), Some("missing"));
    let by_title = list(
        home,
        &MailListArgs {
            query: Some("planner D unrelated".into()),
            ..Default::default()
        },
        &[],
    );
    assert_eq!(
        by_title.rows.len(),
        1,
        "a title word and a body word together"
    );
    assert_eq!(by_title.rows[0].request_id, rid(3));

    let t = thread(home, &rid(1), &[]);
    assert!(t.found);
    assert_eq!(t.chain.as_deref(), Some(rid(0).as_str()));
    let texts: Vec<_> = t.rows.iter().map(|r| r.text.clone().unwrap()).collect();
    assert_eq!(
        texts,
        vec!["what about the migration", "schema done", "please review"]
    );
    let ids: Vec<_> = t.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, vec!["session-a", "session-b", "session-c"]);
    assert_eq!(t.sessions[1].title.as_deref(), Some("Planner B"));
    assert!(!thread(home, &rid(77), &[]).found);

    // held mail, and a filter by session and fate
    let held_only = list(
        home,
        &MailListArgs {
            filter: MailFilter {
                held: Some(true),
                ..Default::default()
            },
            ..Default::default()
        },
        &[],
    );
    assert!(held_only.rows.is_empty());
    w.add(
        4,
        &Msg {
            kind: Kind::Held,
            ..m(2, 3, None, &["hold", "me"])
        },
    );
    let held_only = list(
        home,
        &MailListArgs {
            filter: MailFilter {
                held: Some(true),
                ..Default::default()
            },
            ..Default::default()
        },
        &[],
    );
    assert_eq!(
        held_only.rows.len(),
        1,
        "seen by the next read, incrementally"
    );
    assert_eq!(held_only.rows[0].text.as_deref(), Some("hold me"));
    assert_eq!(held_only.index.rebuilt, None);
}

#[test]
fn a_queued_message_lands_and_its_row_moves_with_it() {
    let mut w = World::new();
    let id = rid(0);
    w.add(
        0,
        &Msg {
            from: 0,
            to: 1,
            kind: Kind::Queued,
            framed: false,
            reply_to: None,
            words: vec!["later"],
        },
    );
    w.write_logs();
    let p = list(w.home.path(), &MailListArgs::default(), &[]);
    assert_eq!(
        (p.rows[0].fate.as_str(), p.rows[0].text.as_deref()),
        ("queued", None)
    );
    // the host claims it and it lands
    let text = crate::mail::with_from_header("session-a", "later");
    w.logs[1].prompt(&text, &id);
    w.write_logs();
    // a process looks at open rows again at most once a second (RECHECK_EVERY): the page's next poll
    std::thread::sleep(feed::RECHECK_EVERY);
    let p = list(w.home.path(), &MailListArgs::default(), &[]);
    assert_eq!(
        (p.rows[0].fate, p.rows[0].text.as_deref()),
        (FateState::Landed, Some("later"))
    );
    // a later pass with nothing new changes nothing
    let mut ix = index::Index::open(w.home.path()).unwrap().0;
    assert_eq!(
        feed::sync(w.home.path(), &mut ix, None, true).unwrap(),
        Synced::Incremental(0)
    );
}

#[test]
fn a_replaced_or_truncated_ledger_makes_the_index_stale() {
    let mut w = World::new();
    for n in 0..3 {
        w.add(
            n,
            &Msg {
                from: 0,
                to: 1,
                kind: Kind::Landed,
                framed: false,
                reply_to: None,
                words: vec!["x"],
            },
        );
    }
    w.write_logs();
    assert_eq!(w.indexed().0.len(), 3);
    // the human removes the ledger and one message is sent again
    std::fs::remove_file(ledger::path(w.home.path())).unwrap();
    w.expected.clear();
    w.add(
        7,
        &Msg {
            from: 2,
            to: 3,
            kind: Kind::Refused,
            framed: false,
            reply_to: None,
            words: vec!["y"],
        },
    );
    let (got, st) = w.indexed();
    assert_eq!(st.rebuilt.as_deref(), Some("the ledger was replaced"));
    assert_eq!(got, w.expected);
    // cut short in place: its head is the same, its length below the watermark's
    let p = ledger::path(w.home.path());
    let len = std::fs::metadata(&p).unwrap().len();
    for n in 8..11 {
        w.add(
            n,
            &Msg {
                from: 1,
                to: 2,
                kind: Kind::Refused,
                framed: false,
                reply_to: None,
                words: vec!["z"],
            },
        );
    }
    assert_eq!(w.indexed().0.len(), 4);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(len)
        .unwrap();
    w.expected.retain(|k, _| k == &rid(7));
    let (got, st) = w.indexed();
    assert_eq!(st.rebuilt.as_deref(), Some("the ledger was truncated"));
    assert_eq!(got, w.expected);
}

#[test]
fn a_rotation_between_two_passes_is_read_through_not_rebuilt() {
    let mut w = World::new();
    let m = |n: usize| Msg {
        from: n % 4,
        to: (n + 1) % 4,
        kind: Kind::Landed,
        framed: false,
        reply_to: None,
        words: vec!["rotate"],
    };
    for n in 0..2 {
        w.add(n, &m(n));
    }
    w.write_logs();
    assert_eq!(w.indexed().0, w.expected);
    // lines of ~400 bytes into files rotated past 1,000: the file read last is ledger.2 by now
    w.rotate_at = 1000;
    for n in 2..6 {
        w.add(n, &m(n));
    }
    w.write_logs();
    assert!(ledger::rotated_path(w.home.path(), 2).exists());
    let (got, st) = w.indexed();
    assert_eq!(st.rebuilt, None, "read through the rotation");
    assert_eq!(got, w.expected);
}

#[test]
fn body_of_takes_the_header_or_the_frame_off() {
    use feed::body_of;
    assert_eq!(body_of(&crate::mail::with_from_header("s", "a\nb")), "a\nb");
    let f = crate::mail::frame(
        "s",
        Some("T"),
        "steer",
        Some((2, 4)),
        "x\n--- message ends ---\ny",
    );
    assert_eq!(body_of(&f), "x\n--- message ends ---\ny");
    assert_eq!(body_of("plain"), "plain");
}

#[test]
fn mail_from_a_linked_machine_names_it_on_its_row() {
    let w = World::new();
    let far = "ab".repeat(32);
    let mut e = Entry::new(
        T0,
        Some("session-far"),
        Some("session-a"),
        "sessions_send",
        Some("queue"),
        Some(&rid(1)),
        LedgerOutcome::Refused(crate::outcome::RefusalCode::Stopped),
        Some("hi"),
    );
    e.from_machine = Some(far.clone());
    ledger::append(w.home.path(), &e).unwrap();
    let mut e = e.clone();
    e.request_id = Some(rid(2));
    e.from_machine = Some("not a machine id".into());
    ledger::append(w.home.path(), &e).unwrap();
    w.write_logs();
    let p = list(w.home.path(), &MailListArgs::default(), &[]);
    let by_id = |id: &str| p.rows.iter().find(|r| r.request_id == id).unwrap();
    let m = by_id(&rid(1)).sender_machine.clone().unwrap();
    assert_eq!(
        (m.id.as_str(), m.name.as_str()),
        (far.as_str(), "abababababab")
    );
    assert_eq!(by_id(&rid(1)).target_machine, None, "this home");
    assert_eq!(
        by_id(&rid(2)).sender_machine,
        None,
        "an id that is not one reads this home"
    );
    // linked: the row names the machine as this home's human called the link, in the list and the thread
    let linked = [crate::machine::Machine {
        id: crate::machine::MachineId::parse(&far).unwrap(),
        name: "home-b".into(),
    }];
    let p = list(w.home.path(), &MailListArgs::default(), &linked);
    let named = p.rows.iter().find(|r| r.request_id == rid(1)).unwrap();
    assert_eq!(named.sender_machine.as_ref().unwrap().name, "home-b");
    let t = thread(w.home.path(), &rid(1), &linked);
    assert_eq!(t.rows[0].sender_machine.as_ref().unwrap().name, "home-b");
    let far_side = t.sessions.iter().find(|s| s.id == "session-far").unwrap();
    assert_eq!(far_side.machine.as_ref().unwrap().name, "home-b");
}

/// Under the binding (a tokio runtime), a rebuild runs on a thread of its own: the route answers at
/// once with `building` (how far), every page it serves meanwhile is the newest rows of the source
/// written so far (never an old or a wrong row), and the index ends equal to the fold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_runs_in_the_background_and_the_page_shows_the_newest_rows_meanwhile() {
    let mut w = World::new();
    let n = feed::FIRST_CHUNK + 2 * feed::CHUNK + 37;
    for i in 0..n {
        w.add(
            i,
            &Msg {
                from: i % 4,
                to: (i + 1) % 4,
                kind: if i % 9 == 0 {
                    Kind::Refused
                } else {
                    Kind::Landed
                },
                framed: false,
                reply_to: None,
                words: vec![WORDS[i % WORDS.len()], "chunk"],
            },
        );
    }
    w.write_logs();
    // newest first, as the page lists them
    let mut newest: Vec<&Row> = w.expected.values().collect();
    newest.sort_by_key(|r| std::cmp::Reverse(r.time));
    let args = MailListArgs {
        limit: Some(50),
        ..Default::default()
    };
    let first = list(w.home.path(), &args, &[]);
    assert_eq!(first.index.rebuilt.as_deref(), Some("missing"));
    let b = first
        .index
        .building
        .expect("answered while the rebuild starts");
    assert!(b.done <= b.total);
    let mut seen_partial = 0;
    let started = std::time::Instant::now();
    let last = loop {
        let p = list(w.home.path(), &args, &[]);
        let rows: Vec<Row> = p.rows.into_iter().map(to_row).collect();
        // whatever is indexed so far is the newest of the source, in order
        let want: Vec<Row> = newest
            .iter()
            .take(rows.len())
            .map(|r| (*r).clone())
            .collect();
        assert_eq!(rows, want, "{:?}", p.index);
        match p.index.building {
            Some(b) => {
                assert!(b.done <= b.total && b.total as usize <= n, "{b:?}");
                if !rows.is_empty() {
                    seen_partial += 1;
                }
            }
            None => break p.index,
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(120));
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    };
    assert_eq!(last.rows as usize, n);
    let (got, st) = w.indexed();
    assert_eq!(st.building, None);
    assert_eq!(got, w.expected);
    // (how many pages came while it ran depends on the machine: the chunks' rows are asserted above)
    let _ = seen_partial;
    // a search during or after the build runs on the same rows
    let found = list(
        w.home.path(),
        &MailListArgs {
            query: Some("日本語".into()),
            limit: Some(200),
            ..Default::default()
        },
        &[],
    );
    assert_eq!(
        found.rows.len(),
        w.expected
            .values()
            .filter(|r| r.text.as_deref().is_some_and(|t| t.contains("日本語")))
            .count()
            .min(200)
    );
}

/// A message sent to a linked machine has no fate here (its target's log is there), so every pass looks at
/// it again: the row keeps the machine it went to (the recheck once rebuilt it without it, and the page
/// showed the target as a session of this home).
#[test]
fn a_send_to_a_linked_machine_keeps_its_machine_when_its_row_is_looked_at_again() {
    let w = World::new();
    let far = "cd".repeat(32);
    let mut e = Entry::new(
        T0,
        Some("session-a"),
        Some("session-far"),
        "send_session_message",
        Some("queue"),
        Some(&rid(1)),
        LedgerOutcome::Accepted,
        Some("hi"),
    );
    e.to_machine = Some(far.clone());
    ledger::append(w.home.path(), &e).unwrap();
    w.write_logs();
    // the sending home's copy of the text (crossing::sent) is the row's text: it hashes to the line's body
    crate::crossing::sent::record(w.home.path(), &rid(1), "hi", T0).unwrap();
    let first = list(w.home.path(), &MailListArgs::default(), &[]);
    assert_eq!(first.rows[0].text.as_deref(), Some("hi"));
    assert_eq!(
        first.rows[0].fate,
        FateState::Unknown,
        "its fate is the far side's"
    );
    for _ in 0..2 {
        std::thread::sleep(feed::RECHECK_EVERY);
        let p = list(w.home.path(), &MailListArgs::default(), &[]);
        let m = p.rows[0].target_machine.clone();
        assert_eq!(m.map(|m| m.id.as_str().to_string()), Some(far.clone()));
        assert_eq!(p.rows[0].sender_machine, None);
    } // what its machine answered (crossing::fates) is its fate on the page, "as of" when it was answered;
      // a record that names another machine (copied from another message's) is not believed
    use crate::crossing::fates::{self, Source};
    let other = crate::machine::MachineId::parse(&"ab".repeat(32)).unwrap();
    fates::record(
        w.home.path(),
        &rid(1),
        &other,
        T0,
        FateState::Landed,
        Source::Verify,
        T0 + 9,
    )
    .unwrap();
    let p = list(w.home.path(), &MailListArgs::default(), &[]);
    assert_eq!(
        (p.rows[0].fate, p.rows[0].answered),
        (FateState::Unknown, None)
    );
    let far_id = crate::machine::MachineId::parse(&far).unwrap();
    fates::record(
        w.home.path(),
        &rid(1),
        &far_id,
        T0,
        FateState::Held,
        Source::Send,
        T0 + 10,
    )
    .unwrap();
    let p = list(w.home.path(), &MailListArgs::default(), &[]);
    assert_eq!(p.rows[0].fate, FateState::Held);
    assert_eq!(
        p.rows[0].answered,
        Some(crate::mailindex::Answered {
            at: T0 + 10,
            source: Source::Send
        })
    );
    // the thread view shows the same
    let t = thread(w.home.path(), &rid(1), &[]);
    assert_eq!(
        (t.rows[0].fate, t.rows[0].answered.map(|a| a.at)),
        (FateState::Held, Some(T0 + 10))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_sends_makes_few_background_passes_and_they_index_every_line() {
    // every send nudges a background pass (the binding, after its result); 10 sends 50 ms apart — the
    // pace of a burst from one process — make one pass at once and at most one per PASS_EVERY after it,
    // not one each (without the throttle: ~10, a pass of this home takes a few ms)
    let mut w = World::new();
    w.write_logs();
    let t0 = std::time::Instant::now();
    for n in 0..10 {
        w.add(
            n,
            &Msg {
                from: n % 2,
                to: 2,
                kind: Kind::Refused,
                framed: false,
                reply_to: None,
                words: vec!["burst"],
            },
        );
        feed::nudge(w.home.path());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let spread = t0.elapsed();
    // the passes index every line (read through a connection of its own: a route's read would catch
    // up by itself)
    let home = w.home.path().to_path_buf();
    let rows = || {
        index::Index::open(&home)
            .ok()
            .and_then(|(ix, _)| ix.state().ok())
            .map_or(0, |s| s.rows)
    };
    for _ in 0..100 {
        if rows() == 10 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(rows(), 10, "the background passes indexed every line");
    // one at once, then one per PASS_EVERY while the nudges came, and one for the last of them (a
    // throttle of some length: 10 nudges would make 10 passes under a bound from a tiny one)
    assert!(feed::PASS_EVERY >= std::time::Duration::from_millis(100));
    let bound = 2 + (spread.as_millis() / feed::PASS_EVERY.as_millis()) as usize;
    let passes = feed::tests_support::passes(&home);
    assert!(
        (1..=bound).contains(&passes),
        "{passes} background passes for 10 nudges within {spread:?} (at most {bound})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_pass_for_a_home_whose_ledger_is_gone_makes_nothing() {
    // the plugin's folder removed after a send nudged a pass (test/hostile.test.mjs's reset did this):
    // the late pass must neither count nor make the index folder again
    let h = tempfile::tempdir().unwrap();
    feed::nudge(h.path());
    tokio::time::sleep(feed::PASS_EVERY * 2).await;
    assert_eq!(feed::tests_support::passes(h.path()), 0);
    assert!(
        std::fs::symlink_metadata(index::dir(h.path())).is_err(),
        "no index folder made for a home with no ledger"
    );
}
