//! `sessions_list {query, scope, live_only, limit}`: discover peer sessions (seed 000).

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::args;
use crate::outcome::Refusal;
use crate::render::list::{render_list, ListRow, Liveness};
use crate::request::{LiveSession, ToolRequest};
use crate::store::{self, Header, StoreNote};

/// The header a live session reports, merged over the file's (live wins field by field).
pub(crate) fn merged_header(live: &LiveSession, file: Option<&Header>) -> Header {
    let l = Header::from_value(&live.header, &live.id);
    let f = file.cloned().unwrap_or_default();
    Header {
        version: l.version.or(f.version),
        id: live.id.clone(),
        created_at: l.created_at.or(f.created_at),
        cwd: l.cwd.or(f.cwd),
        parent_session: l.parent_session.or(f.parent_session),
        origin: l.origin.or(f.origin),
        agent_preset: l.agent_preset.or(f.agent_preset),
        seed_length: l.seed_length.or(f.seed_length),
        is_seeded: l.is_seeded.or(f.is_seeded),
    }
}

// ---- sessions_list ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    TopLevel,
    Subagents,
    All,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListArgs {
    pub query: Option<String>,
    pub scope: Scope,
    pub live_only: bool,
    pub limit: usize,
    /// Only sessions in the caller's git repository (any worktree), or its directory outside git.
    pub repo_only: bool,
}

pub const LIST_ARGS: [&str; 5] = ["query", "scope", "live_only", "repo_only", "limit"];

pub fn parse_args(args: &Value, max_list_results: usize) -> Result<ListArgs, Refusal> {
    args::list(args, max_list_results).map_err(args::refuse)
}

/// One row of a listing and its sort key.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub row: ListRow,
    pub created_at: i64,
    /// Same repository as the caller, or (outside git) the caller's directory: what `repo_only` keeps.
    pub same_place: bool,
}

/// The rows a listing shows (filtered, sorted, limited), before rendering.
#[derive(Debug, Clone)]
pub struct Selection {
    pub rows: Vec<Candidate>,
    /// All readable sessions found (files + live), before filters.
    pub considered: usize,
    /// Store notes about unreadable logs.
    pub notes: Vec<StoreNote>,
    /// Whether cold sessions may be woken (the rows' send hint says it).
    pub allow_resume: bool,
}

impl Selection {
    /// The text the model sees.
    pub fn render(&self) -> String {
        let rows: Vec<ListRow> = self.rows.iter().map(|c| c.row.clone()).collect();
        render_list(&rows, self.considered, &self.notes, self.allow_resume)
    }
}

/// Build the listing text (blocking: reads the store).
pub fn list_blocking(home: &Path, req: &ToolRequest, args: &ListArgs) -> String {
    select(home, req, args).render()
}

/// Select the rows of a listing (blocking: reads the store). The text and the CLI's JSON share it.
pub fn select(home: &Path, req: &ToolRequest, args: &ListArgs) -> Selection {
    let peers = req.peers_at(home);
    // Sessions that can change right now are always read fresh; the rest within LIST_STALE.
    let hot = req.live.iter().map(|l| l.id.as_str()).chain(
        peers
            .iter()
            .flat_map(|r| r.sessions.iter().map(|s| s.id.as_str())),
    );
    let listing = store::list_briefs_cached(home, hot);
    let caller = req.caller.as_ref().and_then(|c| c.id()).map(str::to_string);
    let mut by_id: HashMap<String, usize> =
        HashMap::with_capacity(listing.sessions.len() + req.live.len());
    let mut all: Vec<Candidate> = Vec::with_capacity(listing.sessions.len() + req.live.len());
    let push = |all: &mut Vec<Candidate>,
                by_id: &mut HashMap<String, usize>,
                h: &Header,
                title: Option<String>,
                liveness: Liveness| {
        let row = ListRow {
            id: h.id.clone(),
            liveness,
            subagent: h.is_subagent(),
            parent: h.parent_session.clone(),
            cwd: h.cwd.clone(),
            preset: h.agent_preset.clone(),
            title,
            is_caller: caller.as_deref() == Some(h.id.as_str()),
            same_repo: None,
            files: Vec::new(),
            overlap: Vec::new(),
        };
        match by_id.get(&h.id) {
            Some(&i) => {
                all[i] = Candidate {
                    row,
                    created_at: h.created_at.unwrap_or(0),
                    same_place: false,
                }
            }
            None => {
                by_id.insert(h.id.clone(), all.len());
                all.push(Candidate {
                    row,
                    created_at: h.created_at.unwrap_or(0),
                    same_place: false,
                });
            }
        }
    };
    for s in &listing.sessions {
        push(
            &mut all,
            &mut by_id,
            s.header(),
            s.brief.display_title().map(str::to_string),
            Liveness::Cold,
        );
    }
    // Live sessions win over the file (the file lags ~200 ms; a new session has no file yet).
    for l in &req.live {
        if l.id.is_empty() {
            continue;
        }
        // Rows 0..len are the files' sessions, in order (ids are unique there).
        let file = by_id
            .get(&l.id)
            .and_then(|&i| listing.sessions.get(i))
            .map(|s| s.header());
        let h = merged_header(l, file);
        let title = by_id.get(&l.id).and_then(|&i| all[i].row.title.clone());
        push(
            &mut all,
            &mut by_id,
            &h,
            title,
            Liveness::Live(l.status.clone()),
        );
    }
    // Sessions live in another process on this home (presence records): live there, unless this
    // process holds them too (then the registry above wins).
    for r in &peers {
        for ps in &r.sessions {
            if req.live.iter().any(|l| l.id == ps.id) {
                continue;
            }
            let Some(&i) = by_id.get(&ps.id) else {
                // Not on disk yet (no first flush): nothing of its header is known here.
                continue;
            };
            if matches!(all[i].row.liveness, Liveness::Elsewhere { .. }) {
                continue; // a fresher record already claimed it
            }
            all[i].row.liveness = Liveness::Elsewhere {
                status: ps.status.clone(),
                pid: r.pid,
                profile: r.profile.clone(),
                routable: r.base_url.is_some() || r.mailbox,
            };
        }
    }
    let considered = all.len();
    annotate_repos_and_files(&mut all, &req.live);
    let q = args.query.as_deref().map(str::to_lowercase);
    // Filter and order indices, not rows (a row is a few hundred bytes; a home can hold 20,000).
    let mut keep: Vec<usize> = (0..all.len())
        .filter(|&i| {
            let c = &all[i];
            match args.scope {
                Scope::TopLevel => !c.row.subagent,
                Scope::Subagents => c.row.subagent,
                Scope::All => true,
            }
        })
        .filter(|&i| !args.live_only || all[i].row.liveness.is_live())
        .filter(|&i| !args.repo_only || all[i].same_place || all[i].row.is_caller)
        .filter(|&i| match &q {
            None => true,
            Some(q) => {
                let c = &all[i];
                [
                    Some(&c.row.id),
                    c.row.title.as_ref(),
                    c.row.cwd.as_ref(),
                    c.row.preset.as_ref(),
                ]
                .into_iter()
                .flatten()
                .any(|f| f.to_lowercase().contains(q.as_str()))
            }
        })
        .collect();
    // The caller's repository first, then newest first by createdAt, then id; the caller always last.
    let order = |&x: &usize, &y: &usize| {
        let (a, b) = (&all[x], &all[y]);
        a.row
            .is_caller
            .cmp(&b.row.is_caller)
            .then(b.row.same_repo.is_some().cmp(&a.row.same_repo.is_some()))
            .then(b.created_at.cmp(&a.created_at))
            .then(a.row.id.cmp(&b.row.id))
    };
    if keep.len() > args.limit {
        if args.limit > 0 {
            keep.select_nth_unstable_by(args.limit - 1, order);
        }
        keep.truncate(args.limit);
    }
    keep.sort_by(order);
    let mut all: Vec<Option<Candidate>> = all.into_iter().map(Some).collect();
    let rows: Vec<Candidate> = keep.into_iter().filter_map(|i| all[i].take()).collect();
    // A live session that has not written its first batch yet has a folder but no log (rc.8
    // `session-persistence`: "an unmaterialized session has no filesystem footprint" until its first
    // flush); the live registry already lists it, so its "no session log" note is noise.
    let notes = listing
        .notes
        .into_iter()
        .filter(|n| !is_live_without_log(n, &req.live))
        .collect();
    Selection {
        rows,
        considered,
        notes,
        allow_resume: req.config.allow_resume,
    }
}

/// Files changed within this window count as "recent".
pub const RECENT_FILES_MS: i64 = 30 * 60 * 1000;
/// Distinct working directories whose checkout one listing resolves (each is a bounded walk up).
const MAX_CHECKOUTS: usize = 256;

/// Mark rows in the caller's repository (`crate::repo`: worktrees grouped as git does), attach the files
/// live sessions changed recently (relative to their checkout, so two worktrees agree) and the overlap with
/// the caller's own recent changes. The caller's repository is known from its row (live header or file).
fn annotate_repos_and_files(all: &mut [Candidate], live: &[LiveSession]) {
    use crate::repo::{self, Checkout};
    let mut cache: HashMap<String, Option<Checkout>> = HashMap::new();
    let mut checkout_of = |cwd: Option<&String>| -> Option<Checkout> {
        let cwd = cwd?;
        if let Some(c) = cache.get(cwd) {
            return c.clone();
        }
        let c = if cache.len() < MAX_CHECKOUTS {
            repo::checkout(cwd)
        } else {
            None
        };
        cache.insert(cwd.clone(), c.clone());
        c
    };
    let now = crate::ledger::time::now_ms();
    let files_of = |id: &str, co: Option<&Checkout>, cwd: Option<&String>| -> Vec<String> {
        let Some(l) = live.iter().find(|l| l.id == id) else {
            return Vec::new();
        };
        let mut out: Vec<String> = Vec::new();
        for f in l.files.iter().take(64) {
            if f.path.is_empty() || f.time_ms.is_some_and(|t| now - t > RECENT_FILES_MS) {
                continue;
            }
            let k = repo::relative_key(co, cwd.map(String::as_str), &f.path);
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    };
    let caller = all.iter().position(|c| c.row.is_caller);
    let caller_co = caller.and_then(|i| checkout_of(all[i].row.cwd.as_ref()));
    let caller_files: Vec<String> = match caller {
        Some(i) => files_of(&all[i].row.id, caller_co.as_ref(), all[i].row.cwd.as_ref()),
        None => Vec::new(),
    };
    for c in all.iter_mut() {
        let co = checkout_of(c.row.cwd.as_ref());
        c.same_place = matches!((&co, &caller_co), (Some(a), Some(b)) if a.key == b.key);
        // only a git repository is tagged and ranked first; outside git, repo_only keeps the caller's dir
        c.row.same_repo =
            (c.same_place && co.as_ref().is_some_and(|x| x.git)).then_some("same repo");
        if matches!(c.row.liveness, Liveness::Live(_)) && !c.row.is_caller {
            c.row.files = files_of(&c.row.id, co.as_ref(), c.row.cwd.as_ref());
            if c.same_place {
                c.row.overlap = c
                    .row
                    .files
                    .iter()
                    .filter(|f| caller_files.contains(f))
                    .cloned()
                    .collect();
            }
        }
    }
}

/// A folder without a log whose session the live registry lists.
fn is_live_without_log(note: &StoreNote, live: &[LiveSession]) -> bool {
    match note {
        StoreNote::NoLog { session_id, .. } => {
            !session_id.is_empty() && live.iter().any(|l| l.id == *session_id)
        }
        StoreNote::Text(_) => false,
    }
}

/// Run `sessions_list`: the selection as data, or the refusal.
pub async fn run_result(req: &ToolRequest) -> Result<Selection, Refusal> {
    let args = parse_args(&req.args, req.config.max_list_results)?;
    let home = store::resolve_dsh_home(req.host.dsh_home.as_deref());
    let req = req.clone();
    super::blocking(move || select(&home, &req, &args)).await
}

/// The text of [`run_result`] (a test helper: the binding goes through `tools::run`).
#[cfg(test)]
pub async fn run(req: &ToolRequest) -> String {
    match run_result(req).await {
        Ok(s) => s.render(),
        Err(r) => r.render(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::request::Caller;
    use crate::store::testgen::*;
    use serde_json::json;

    fn req(args: Value, home: &Path) -> ToolRequest {
        ToolRequest {
            tool: "sessions_list".into(),
            args,
            caller: Some(Caller {
                session_id: Some(MAIN.into()),
                agent_id: None,
                title: None,
                turn: None,
            }),
            host: crate::request::HostInfo {
                dsh_home: Some(home.display().to_string()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    async fn list(args: Value) -> String {
        run(&req(args, &fixtures_root())).await
    }

    #[tokio::test]
    async fn default_listing_is_top_level_newest_first_caller_last() {
        let out = list(Value::Null).await;
        let expected = format!(
            "\
- {V4} [cold, top-level] | cwd=/home/ana/proj | preset=standard | send: queue (wakes it)
  Port the parser
- {FORK} [cold, top-level] | cwd=/home/ana/proj | preset=standard | fork-of={MAIN} | send: queue (wakes it)
  inherited prompt
- {V4FORK} [cold, top-level] | cwd=/srv/api | preset=standard | fork-of={V4} | send: queue (wakes it)
  inherited v4 prompt
- {PLAIN} [cold, top-level] | cwd=/srv/api | preset=standard | send: queue (wakes it)
  Add retries to the upload
- {MAIN} [cold, top-level] | cwd=/home/ana/proj | preset=standard | this session (you)
  Fix the newapi reasoning-effort config
5 of 6 considered sessions
Top-level sessions are messageable with sessions_send; subagent sessions are not."
        );
        assert_eq!(out, expected);
    }

    #[tokio::test]
    async fn scope_query_live_and_limit() {
        let out = list(json!({"scope":"subagents"})).await;
        assert!(out.starts_with(&format!("- {SUB} [cold, subagent] | cwd=/home/ana/proj | preset=standard | parent={MAIN} | not messageable\n  Bounded completed checkpoint\n1 of 6")), "{out}");
        let out = list(json!({"query":"SRV/api","scope":"all"})).await;
        assert!(
            out.contains(PLAIN) && out.contains(V4FORK) && !out.contains(MAIN),
            "{out}"
        );
        assert!(out.contains("2 of 6 considered"), "{out}");
        let out = list(json!({"query":"port the"})).await;
        assert!(out.contains("1 of 6") && out.contains(V4), "{out}");
        let out = list(json!({"limit":2,"scope":"all"})).await;
        assert!(
            out.contains("2 of 6") && !out.contains(&format!("- {MAIN} ")),
            "{out}"
        );
        let out = list(json!({"live_only":true})).await;
        assert!(out.starts_with("0 of 6 considered sessions"), "{out}");
    }

    #[tokio::test]
    async fn repo_scope_groups_worktrees_and_shows_file_overlap() {
        use crate::request::FileTouch;
        let t = tempfile::tempdir().unwrap();
        let main = t.path().join("repo");
        std::fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
        std::fs::write(main.join(".git/worktrees/wt/commondir"), "../..").unwrap();
        let wt = t.path().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}", main.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        let other = t.path().join("other");
        std::fs::create_dir_all(other.join(".git")).unwrap();
        let now = crate::ledger::time::now_ms();
        let touch = |p: &str| FileTouch {
            path: p.into(),
            time_ms: Some(now),
        };
        let live = |id: &str, cwd: &Path, created: i64, files: Vec<FileTouch>| LiveSession {
            id: id.into(),
            status: "idle".into(),
            header: json!({"cwd": cwd.display().to_string(), "createdAt": created}),
            files,
            ..Default::default()
        };
        let home = tempfile::tempdir().unwrap();
        let mut r = req(json!({}), home.path());
        r.caller.as_mut().unwrap().session_id = Some("session-me".into());
        r.live = vec![
            live(
                "session-me",
                &main,
                1,
                vec![touch("src/shared.rs"), touch("README.md")],
            ),
            live(
                "session-wt",
                &wt,
                2,
                vec![
                    touch(&wt.join("src/shared.rs").display().to_string()),
                    touch("docs/x.md"),
                ],
            ),
            live("session-other", &other, 3, vec![touch("src/shared.rs")]),
        ];
        let out = run(&r).await;
        let lines: Vec<&str> = out.lines().collect();
        // the caller's repository first (even though session-other is newer), the caller last
        assert!(
            lines[0].starts_with("- session-wt [live, top-level, idle] | cwd=")
                && lines[0].contains(" | same repo | "),
            "{out}"
        );
        assert_eq!(
            lines[2], "  changed recently: src/shared.rs, docs/x.md",
            "{out}"
        );
        assert_eq!(lines[3], "  overlap: you changed src/shared.rs recently too; coordinate before editing it further", "{out}");
        assert!(
            lines[4].starts_with("- session-other [") && !lines[4].contains("same repo"),
            "{out}"
        );
        assert!(!out.contains("overlap: you changed src/shared.rs recently too; coordinate before editing it further\n- session-me"), "another repository never overlaps: {out}");
        let mut r2 = r.clone();
        r2.args = json!({"repo_only": true});
        let out = run(&r2).await;
        assert!(!out.contains("session-other"), "{out}");
        assert!(
            out.contains("- session-wt [") && out.contains("- session-me ["),
            "{out}"
        );
    }

    #[tokio::test]
    async fn live_sessions_win_and_new_ones_appear() {
        let mut r = req(json!({}), &fixtures_root());
        r.live = vec![
            LiveSession {
                id: V4.into(),
                status: "running".into(),
                header: json!({"cwd":"/moved","createdAt":1}),
                ..Default::default()
            },
            LiveSession {
                id: "session-brand-new".into(),
                status: "idle".into(),
                header: json!({"cwd":"/n","agentPreset":"fast","createdAt":9_999_999_999_999i64}),
                ..Default::default()
            },
            LiveSession {
                id: MAIN.into(),
                status: "running".into(),
                header: Value::Null,
                ..Default::default()
            },
        ];
        r.config.allow_resume = false;
        let out = run(&r).await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "- session-brand-new [live, top-level, idle] | cwd=/n | preset=fast | send: queue or steer starts a turn now");
        assert_eq!(lines[1], "  (untitled)");
        assert!(out.contains(&format!("- {V4} [live, top-level, running] | cwd=/moved | preset=standard | send: steer lands in its running turn\n  Port the parser")), "{out}");
        assert!(out.contains(&format!("- {PLAIN} [cold, top-level] | cwd=/srv/api | preset=standard | send: resume disabled")), "{out}");
        assert!(out.contains(&format!("- {MAIN} [live, top-level, running] | cwd=/home/ana/proj | preset=standard | this session (you)")), "{out}");
        assert!(out.contains("6 of 7 considered"), "{out}");
        // V4's createdAt is now 1: it sorts just before the caller.
        let pos = |id: &str| out.find(&format!("- {id} ")).unwrap();
        assert!(pos(V4) > pos(PLAIN) && pos(V4) < pos(MAIN), "{out}");
    }

    #[tokio::test]
    async fn a_live_session_without_its_first_log_batch_is_not_a_note() {
        let home = tempfile::tempdir().unwrap();
        // rc.8: a new session's folder can exist before its first flush writes the log.
        std::fs::create_dir_all(
            home.path()
                .join("sessions")
                .join("--w--")
                .join("session-new"),
        )
        .unwrap();
        let cold = run(&req(json!({}), home.path())).await;
        assert!(cold.contains("session-new: no session log"), "{cold}");
        let mut r = req(json!({}), home.path());
        r.live = vec![LiveSession {
            id: "session-new".into(),
            status: "running".into(),
            header: json!({"cwd":"/w","createdAt":5}),
            ..Default::default()
        }];
        let live = run(&r).await;
        assert!(
            live.starts_with("- session-new [live, top-level, running]"),
            "{live}"
        );
        assert!(!live.contains("no session log"), "{live}");
    }

    #[tokio::test]
    async fn bad_arguments_are_refused_by_name() {
        let cases = [
            (json!({"limit":0}), "refused (bad-argument): limit must be an integer from 1 to 200; got 0."),
            (json!({"limit":"5"}), "refused (bad-argument): limit must be an integer from 1 to 200; got \"5\" (a string)."),
            (json!({"limit":2.5}), "refused (bad-argument): limit must be an integer from 1 to 200; got 2.5."),
            (json!({"scope":"everything"}), "refused (bad-argument): scope must be one of \"top-level\", \"subagents\", \"all\"; got \"everything\" (a string)."),
            (json!({"live_only":"yes"}), "refused (bad-argument): live_only must be true or false; got \"yes\" (a string)."),
            (json!({"query":5}), "refused (bad-argument): query must be a string; got 5."),
            (json!({"sessionId":"x"}), "refused (bad-argument): \"sessionId\" is not an argument of sessions_list; expected only query, scope, live_only, repo_only, limit."),
            (json!([1]), "refused (bad-argument): the arguments must be a JSON object; got an array."),
        ];
        for (args, want) in cases {
            let out = list(args.clone()).await;
            assert!(out.starts_with(want), "{args}: {out}");
        }
        // Accepted edge values.
        assert!(list(json!({"limit":200.0,"query":null}))
            .await
            .contains("of 6 considered"));
    }

    #[tokio::test]
    async fn a_listing_never_writes() {
        let home = fixture_home();
        let snap = snapshot(home.path());
        let out = run(&req(json!({"scope":"all"}), home.path())).await;
        assert!(out.contains("6 of 6"), "{out}");
        assert_eq!(snap, snapshot(home.path()));
    }

    /// (path, bytes, mtime) of every file under `root`.
    pub(crate) fn snapshot(
        root: &Path,
    ) -> Vec<(std::path::PathBuf, Vec<u8>, std::time::SystemTime)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let m = std::fs::metadata(&p).unwrap();
                    out.push((p.clone(), std::fs::read(&p).unwrap(), m.modified().unwrap()));
                }
            }
        }
        out.sort();
        out
    }
}
