//! `sessions_list {query, scope, live_only, limit}`: discover peer sessions (seed 000).

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::args;
use crate::outcome::Refusal;
use crate::request::{LiveSession, ToolRequest};
use store::{self, Header, StoreNote};

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

/// Live state of a session, as the host reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    Cold,
    /// The agent's public status (`running`, `idle`, …).
    Live(String),
    /// Live in another host process on this home (from its presence record).
    Elsewhere {
        status: String,
        pid: u32,
        profile: Option<String>,
        /// A send reaches the owner (its web server, or the mailbox it drains).
        routable: bool,
    },
}

impl Liveness {
    pub fn is_live(&self) -> bool {
        !matches!(self, Liveness::Cold)
    }
}

/// One `sessions_list` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRow {
    pub id: String,
    pub liveness: Liveness,
    pub subagent: bool,
    /// `parentSession` of the session (a fork's origin, or a subagent's owner).
    pub parent: Option<String>,
    pub cwd: Option<String>,
    pub preset: Option<String>,
    pub title: Option<String>,
    pub is_caller: bool,
    /// `same repo`: in the caller's git repository (any worktree of it); `same dir`: outside git, in the
    /// caller's directory. `None`: elsewhere.
    pub same_repo: Option<&'static str>,
    /// Files a live session's write/edit tools changed recently, newest first, relative to its checkout.
    pub files: Vec<String>,
    /// Of those, the ones the caller changed recently too.
    pub overlap: Vec<String>,
    /// The linked machine the session lives on (`None`: this home).
    pub machine: Option<crate::machine::Machine>,
}

/// One row of a listing and its sort key.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub row: ListRow,
    pub created_at: i64,
    /// Same repository as the caller, or (outside git) the caller's directory: what `repo_only` keeps.
    pub same_place: bool,
}

/// The rows a listing shows (filtered, sorted, limited), before rendering (`render::list`).
#[derive(Debug, Clone)]
pub struct Selection {
    pub rows: Vec<Candidate>,
    /// All readable sessions found (files + live), before filters.
    pub considered: usize,
    /// Store notes about unreadable logs.
    pub notes: Vec<StoreNote>,
    /// Whether cold sessions may be woken (the rows' send hint says it).
    pub allow_resume: bool,
    /// Linked machines whose sessions are missing or incomplete (a listing across machines).
    pub machines: Vec<MachineNote>,
}

/// A linked machine a listing could not list in full (`remote`): never a failure of the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineNote {
    pub machine: crate::machine::Machine,
    pub trouble: MachineTrouble,
}

/// What kept a linked machine's sessions out of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineTrouble {
    /// No answer (in time).
    NoAnswer(crate::machine::CallError),
    /// It refused the listing (its code).
    Refused(crate::code::RefusalCode),
    /// It listed, but could not read this many of its session logs.
    Unreadable(u64),
}

/// Select the rows of a listing (blocking: reads the store). The text and the CLI's JSON share it.
///
/// A home can hold 20,000 sessions: filters and the order work on a [`Lite`] per session (numbers,
/// flags and places, no strings copied), and rows are built only for the ≤ `limit` that survive.
pub fn select(home: &Path, req: &ToolRequest, args: &ListArgs) -> Selection {
    let peers = req.peers_at(home);
    // Sessions that can change right now are always read fresh; the rest within LIST_STALE.
    let hot = req.live.iter().map(|l| l.id.as_str()).chain(
        peers
            .iter()
            .flat_map(|r| r.sessions.iter().map(|s| s.id.as_str())),
    );
    let listing = store::list_briefs_cached(home, hot);
    let caller = req.caller.as_ref().and_then(|c| c.id());
    let files = &listing.sessions;
    // Rows 0..files.len() are the files' sessions, in order (ids are unique there); then the
    // sessions live here that have no file yet.
    let mut all: Vec<Lite> = Vec::with_capacity(files.len() + req.live.len());
    for k in &listing.keys {
        all.push(Lite {
            file: Some(all.len()),
            created_at: k.created_at,
            subagent: k.subagent,
            ..Lite::default()
        });
    }
    // Live sessions win over the file (the file lags ~200 ms; a new session has no file yet).
    let mut merged: Vec<(usize, Header)> = Vec::new();
    let mut live_only: HashMap<&str, usize> = HashMap::new();
    for (j, l) in req.live.iter().enumerate() {
        if l.id.is_empty() {
            continue;
        }
        let at = listing
            .by_id
            .get(&l.id)
            .copied()
            .or_else(|| live_only.get(l.id.as_str()).copied());
        let file = at.and_then(|i| all[i].file);
        let h = merged_header(l, file.map(|i| files[i].header()));
        let c = Lite::new(file, Some(merged.len()), &h);
        merged.push((j, h));
        match at {
            Some(i) => all[i] = c,
            None => {
                live_only.insert(l.id.as_str(), all.len());
                all.push(c);
            }
        }
    }
    // Sessions live in another process on this home (presence records): live there, unless this
    // process holds them too (then the registry above wins).
    for r in &peers {
        for ps in &r.sessions {
            if req.live.iter().any(|l| l.id == ps.id) {
                continue;
            }
            let Some(&i) = listing.by_id.get(&ps.id) else {
                // Not on disk yet (no first flush): nothing of its header is known here.
                continue;
            };
            if all[i].elsewhere.is_some() {
                continue; // a fresher record already claimed it
            }
            all[i].elsewhere = Some(Liveness::Elsewhere {
                status: ps.status.clone(),
                pid: r.pid,
                profile: r.profile.clone(),
                routable: r.base_url.is_some() || r.mailbox,
            });
        }
    }
    let view = View {
        files,
        keys: &listing.keys,
        merged: &merged,
        live: &req.live,
    };
    if let Some(c) = caller {
        let at = listing.by_id.get(c).or_else(|| live_only.get(c)).copied();
        if let Some(i) = at {
            all[i].is_caller = true;
        }
    }
    let considered = all.len();
    annotate_repos_and_files(&mut all, &view);
    let q = args.query.as_deref().map(str::to_lowercase);
    // Filter and order indices, not rows (a home can hold 20,000).
    let mut keep: Vec<usize> = (0..all.len())
        .filter(|&i| {
            let c = &all[i];
            match args.scope {
                Scope::TopLevel => !c.subagent,
                Scope::Subagents => c.subagent,
                Scope::All => true,
            }
        })
        .filter(|&i| !args.live_only || all[i].live.is_some() || all[i].elsewhere.is_some())
        .filter(|&i| !args.repo_only || all[i].same_place || all[i].is_caller)
        .filter(|&i| match &q {
            None => true,
            Some(q) => {
                let h = view.header(&all[i]);
                [
                    Some(h.id.as_str()),
                    view.title(&all[i]),
                    h.cwd.as_deref(),
                    h.agent_preset.as_deref(),
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
        a.is_caller
            .cmp(&b.is_caller)
            .then(b.same_repo.cmp(&a.same_repo))
            .then(b.created_at.cmp(&a.created_at))
            .then_with(|| view.header(a).id.cmp(&view.header(b).id))
    };
    if keep.len() > args.limit {
        if args.limit > 0 {
            keep.select_nth_unstable_by(args.limit - 1, order);
        }
        keep.truncate(args.limit);
    }
    keep.sort_by(order);
    let rows: Vec<Candidate> = keep
        .into_iter()
        .map(|i| view.candidate(std::mem::take(&mut all[i])))
        .collect();
    // A live session that has not written its first batch yet has a folder but no log (rc.8
    // `session-persistence`: "an unmaterialized session has no filesystem footprint" until its first
    // flush); the live registry already lists it, so its "no session log" note is noise.
    let notes = listing
        .notes
        .iter()
        .filter(|n| !is_live_without_log(n, &req.live))
        .cloned()
        .collect();
    Selection {
        rows,
        considered,
        notes,
        allow_resume: req.config.allow_resume,
        machines: Vec::new(),
    }
}

/// One session of a listing before it is a row: where its data is, and its sort key.
#[derive(Debug, Default)]
struct Lite {
    /// Its place in the listing's sessions (None: live here without a file yet).
    file: Option<usize>,
    /// Live in this process: its place in the merged headers (the registry wins over the file).
    live: Option<usize>,
    /// Live in another process (presence).
    elsewhere: Option<Liveness>,
    created_at: i64,
    subagent: bool,
    is_caller: bool,
    /// Same repository as the caller, or (outside git) the caller's directory: what `repo_only` keeps.
    same_place: bool,
    /// Same git repository as the caller: tagged and ranked first.
    same_repo: bool,
    files: Vec<String>,
    overlap: Vec<String>,
}

impl Lite {
    fn new(file: Option<usize>, live: Option<usize>, h: &Header) -> Lite {
        Lite {
            file,
            live,
            created_at: h.created_at.unwrap_or(0),
            subagent: h.is_subagent(),
            ..Lite::default()
        }
    }
}

/// Where a [`Lite`]'s strings live.
struct View<'a> {
    files: &'a [store::BriefSession],
    /// The files' keys (`store::ListKey`), in the order of `files`.
    keys: &'a [store::ListKey],
    merged: &'a [(usize, Header)],
    live: &'a [LiveSession],
}

impl<'a> View<'a> {
    fn header(&self, c: &Lite) -> &'a Header {
        match (c.live, c.file) {
            (Some(m), _) => &self.merged[m].1,
            (None, Some(i)) => self.files[i].header(),
            (None, None) => unreachable!("a listed session is live or on file"),
        }
    }

    /// The file's title (a live session's registry entry has none).
    fn title(&self, c: &Lite) -> Option<&'a str> {
        c.file.and_then(|i| self.files[i].brief.display_title())
    }

    fn live_session(&self, c: &Lite) -> Option<&'a LiveSession> {
        c.live.map(|m| &self.live[self.merged[m].0])
    }

    fn candidate(&self, c: Lite) -> Candidate {
        let h = self.header(&c);
        let title = self.title(&c).map(str::to_string);
        let liveness = match (self.live_session(&c), c.elsewhere) {
            (Some(l), _) => Liveness::Live(l.status.clone()),
            (None, Some(e)) => e,
            (None, None) => Liveness::Cold,
        };
        Candidate {
            row: ListRow {
                id: h.id.clone(),
                liveness,
                subagent: c.subagent,
                parent: h.parent_session.clone(),
                cwd: h.cwd.clone(),
                preset: h.agent_preset.clone(),
                title,
                is_caller: c.is_caller,
                same_repo: c.same_repo.then_some("same repo"),
                files: c.files,
                overlap: c.overlap,
                machine: None,
            },
            created_at: c.created_at,
            same_place: c.same_place,
        }
    }
}

/// Files changed within this window count as "recent".
pub const RECENT_FILES_MS: i64 = 30 * 60 * 1000;
/// Distinct working directories whose checkout one listing resolves (each is a bounded walk up).
const MAX_CHECKOUTS: usize = 256;

/// Mark rows in the caller's repository (`crate::repo`: worktrees grouped as git does), attach the files
/// live sessions changed recently (relative to their checkout, so two worktrees agree) and the overlap with
/// the caller's own recent changes. The caller's repository is known from its row (live header or file).
fn annotate_repos_and_files<'a>(all: &mut [Lite], view: &View<'a>) {
    use crate::repo::{self, Checkout};
    // Shared, not copied: a home of 20,000 sessions asks for a checkout per session.
    let mut cache: HashMap<&'a str, Option<std::rc::Rc<Checkout>>> = HashMap::new();
    let mut checkout_of = |cwd: Option<&'a str>| -> Option<std::rc::Rc<Checkout>> {
        let cwd = cwd?;
        if let Some(c) = cache.get(cwd) {
            return c.clone();
        }
        let c = if cache.len() < MAX_CHECKOUTS {
            repo::checkout(cwd).map(std::rc::Rc::new)
        } else {
            None
        };
        cache.insert(cwd, c.clone());
        c
    };
    let live = view.live;
    let now = base::clock::now_ms();
    let files_of = |id: &str, co: Option<&Checkout>, cwd: Option<&str>| -> Vec<String> {
        let Some(l) = live.iter().find(|l| l.id == id) else {
            return Vec::new();
        };
        let mut out: Vec<String> = Vec::new();
        for f in l.files.iter().take(64) {
            if f.path.is_empty() || f.time_ms.is_some_and(|t| now - t > RECENT_FILES_MS) {
                continue;
            }
            let k = repo::relative_key(co, cwd, &f.path);
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    };
    let caller = all
        .iter()
        .position(|c| c.is_caller)
        .map(|i| view.header(&all[i]));
    let caller_co = caller.and_then(|h| checkout_of(h.cwd.as_deref()));
    let caller_files: Vec<String> = match caller {
        Some(h) => files_of(&h.id, caller_co.as_deref(), h.cwd.as_deref()),
        None => Vec::new(),
    };
    // Rows of one project folder mostly share their directory: ask the cache once per run of them
    // (a file's row by its key's run, without reading its header).
    let mut last: Option<(&str, Option<std::rc::Rc<Checkout>>)> = None;
    let mut last_run: Option<(u32, Option<std::rc::Rc<Checkout>>)> = None;
    for c in all.iter_mut() {
        let run = match (c.live, c.file) {
            (None, Some(i)) => view.keys.get(i).map(|k| k.cwd_run),
            _ => None,
        };
        let co = match (run, &last_run) {
            (Some(r), Some((l, co))) if r == *l => co.clone(),
            _ => {
                let cwd = view.header(c).cwd.as_deref();
                let co = match (&last, cwd) {
                    (Some((l, co)), Some(d)) if *l == d => co.clone(),
                    _ => {
                        let co = checkout_of(cwd);
                        last = cwd.map(|d| (d, co.clone()));
                        co
                    }
                };
                if let Some(r) = run {
                    last_run = Some((r, co.clone()));
                }
                co
            }
        };
        c.same_place = matches!((&co, &caller_co), (Some(a), Some(b)) if std::rc::Rc::ptr_eq(a, b) || a.key == b.key);
        // only a git repository is tagged and ranked first; outside git, repo_only keeps the caller's dir
        c.same_repo = c.same_place && co.as_ref().is_some_and(|x| x.git);
        if c.live.is_some() && !c.is_caller {
            let h = view.header(c);
            let cwd = h.cwd.as_deref();
            c.files = files_of(&h.id, co.as_deref(), cwd);
            if c.same_place {
                c.overlap = c
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
    let args = parse_args(&req.args, req.config.max_list_results as usize)?;
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
    use serde_json::json;
    use store::testgen::*;

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
        let now = base::clock::now_ms();
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
