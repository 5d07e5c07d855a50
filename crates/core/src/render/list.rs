//! Text of `sessions_list` and of the argument refusals shared by `sessions_list` / `sessions_read`
//! (docs/output-contract.md "sessions_list — output", "Common rules").

pub use base::text::{quote_short, show_id, MAX_ID_CHARS};
use store::StoreNote;

pub use crate::tools::list::{ListRow, Liveness};
use crate::tools::list::{MachineNote, MachineTrouble, Selection};

/// `refused (<code>): <message>`.
pub fn refusal(code: &str, message: &str) -> String {
    format!("refused ({code}): {message}")
}

/// `refused (bad-argument): <name> must be <expected>; got <what>. <hint>`
pub fn bad_argument(name: &str, expected: &str, got: &str, hint: &str) -> String {
    let mut s = refusal(
        "bad-argument",
        &format!("{name} must be {expected}; got {got}."),
    );
    if !hint.is_empty() {
        s.push(' ');
        s.push_str(hint);
    }
    s
}

/// One-line text for a row field (titles and paths are data from logs: no newlines or controls).
pub fn one_line(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Most characters of a title, cwd, preset or id echoed in a row or a read header.
pub const MAX_TITLE_CHARS: usize = 200;
pub const MAX_CWD_CHARS: usize = 400;
pub const MAX_PRESET_CHARS: usize = 64;

/// [`one_line`], cut to `max` characters (`…[+N chars]` says how many were cut).
pub fn capped(s: &str, max: usize) -> String {
    // Look at a bounded prefix only: a 10 MB title costs no more than a short one.
    let head: String = s.chars().take(max.saturating_mul(4).max(64)).collect();
    let line = one_line(&head);
    let total_cut = s.chars().count().saturating_sub(head.chars().count());
    let n = line.chars().count();
    if n <= max && total_cut == 0 {
        return line;
    }
    let kept: String = line.chars().take(max).collect();
    format!("{kept}…[+{} chars]", n.saturating_sub(max) + total_cut)
}

/// What a send can do to this row now.
pub fn send_hint(row: &ListRow, allow_resume: bool) -> String {
    if row.is_caller {
        return "this session (you)".into();
    }
    if row.subagent {
        return "not messageable".into();
    }
    if let Some(m) = &row.machine {
        // its own machine decides (hold, refuse, wake) when the message arrives
        return format!("send: delivered by machine {}", m.name);
    }
    match &row.liveness {
        Liveness::Live(s) if s == "running" => "send: steer lands in its running turn".into(),
        // its running turn waits on an open question or approval (lib/observe.js `awaitingUser`)
        Liveness::Live(s) if s == "awaiting-user" => {
            "send: waiting on its human; steer lands once they answer, queue after that turn".into()
        }
        Liveness::Live(_) => "send: queue or steer starts a turn now".into(),
        Liveness::Elsewhere {
            pid,
            routable: true,
            ..
        } => {
            format!("send: delivered by its own process (pid {pid})")
        }
        Liveness::Elsewhere {
            pid,
            routable: false,
            ..
        } => {
            format!("send: refused (its process, pid {pid}, has no web server)")
        }
        Liveness::Cold if allow_resume => "send: queue (wakes it)".into(),
        Liveness::Cold => "send: resume disabled".into(),
    }
}

fn row_text(row: &ListRow, allow_resume: bool) -> String {
    let mut tags = vec![
        match &row.liveness {
            Liveness::Cold => "cold".to_string(),
            Liveness::Live(_) | Liveness::Elsewhere { .. } => "live".to_string(),
        },
        if row.subagent {
            "subagent"
        } else {
            "top-level"
        }
        .to_string(),
    ];
    match &row.liveness {
        Liveness::Live(s) if !s.is_empty() => tags.push(one_line(s)),
        Liveness::Elsewhere {
            status,
            pid,
            profile,
            ..
        } => {
            if !status.is_empty() {
                tags.push(one_line(status));
            }
            tags.push(format!(
                "in pid {pid}, profile {}",
                profile.as_deref().map_or("(unknown)".into(), one_line)
            ));
        }
        _ => {}
    }
    if let Some(m) = &row.machine {
        tags.push(format!("machine {}", m.name));
    }
    let mut s = format!(
        "- {} [{}] | cwd={} | preset={}",
        show_id(&row.id),
        tags.join(", "),
        row.cwd
            .as_deref()
            .map_or("(none)".into(), |c| capped(c, MAX_CWD_CHARS)),
        row.preset
            .as_deref()
            .map_or("(none)".into(), |p| capped(p, MAX_PRESET_CHARS)),
    );
    if let Some(p) = &row.parent {
        s.push_str(&format!(
            " | {}={}",
            if row.subagent { "parent" } else { "fork-of" },
            show_id(p)
        ));
    }
    if let Some(tag) = row.same_repo.filter(|_| !row.is_caller) {
        s.push_str(" | ");
        s.push_str(tag);
    }
    s.push_str(" | ");
    s.push_str(&send_hint(row, allow_resume));
    s.push_str("\n  ");
    s.push_str(
        &row.title
            .as_deref()
            .map(|t| capped(t, MAX_TITLE_CHARS))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "(untitled)".into()),
    );
    if !row.files.is_empty() && !row.is_caller {
        s.push_str("\n  changed recently: ");
        s.push_str(&bounded_paths(&row.files));
    }
    if !row.overlap.is_empty() && !row.is_caller {
        s.push_str("\n  overlap: you changed ");
        s.push_str(&bounded_paths(&row.overlap));
        s.push_str(" recently too; coordinate before editing it further");
    }
    s
}

/// The text of a store note (`<path>: <what>`).
pub fn store_note(n: &StoreNote) -> String {
    match n {
        StoreNote::NoLog { path, .. } => format!("{path}: no session log"),
        StoreNote::Text(t) => t.clone(),
    }
}

/// Most paths printed on one activity line, and the longest such line.
pub const MAX_PATHS: usize = 6;
pub const MAX_PATHS_CHARS: usize = 300;

/// `a, b, c (+N more)`, each path on one line, the whole bounded.
fn bounded_paths(paths: &[String]) -> String {
    let mut out = String::new();
    let mut shown = 0;
    for p in paths.iter().take(MAX_PATHS) {
        let p = one_line(p);
        if !out.is_empty() && out.chars().count() + p.chars().count() + 2 > MAX_PATHS_CHARS {
            break;
        }
        if !out.is_empty() {
            out.push_str(", ");
        }
        if p.chars().count() > MAX_PATHS_CHARS {
            out.push('…');
            out.extend(
                p.chars()
                    .rev()
                    .take(MAX_PATHS_CHARS - 1)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev(),
            );
        } else {
            out.push_str(&p);
        }
        shown += 1;
    }
    if paths.len() > shown {
        out.push_str(&format!(" (+{} more)", paths.len() - shown));
    }
    out
}

/// Most notes printed under a listing.
pub const MAX_NOTES: usize = 5;

/// The whole `sessions_list` result: rows (already ordered and cut), the footer, then notes.
pub fn render_list(
    rows: &[ListRow],
    considered: usize,
    notes: &[StoreNote],
    allow_resume: bool,
) -> String {
    let mut out: Vec<String> = rows.iter().map(|r| row_text(r, allow_resume)).collect();
    out.push(format!(
        "{} of {} considered sessions",
        rows.len(),
        considered
    ));
    out.push(
        "Top-level sessions are messageable with sessions_send; subagent sessions are not.".into(),
    );
    for n in notes.iter().take(MAX_NOTES) {
        out.push(format!("note: {}", one_line(&store_note(n))));
    }
    if notes.len() > MAX_NOTES {
        out.push(format!("note: … and {} more", notes.len() - MAX_NOTES));
    }
    out.join("\n")
}

/// The `note:` line of a linked machine a listing could not list in full.
pub fn machine_note(n: &MachineNote) -> String {
    let name = &n.machine.name;
    match &n.trouble {
        MachineTrouble::NoAnswer(e) => {
            format!("note: machine {name} did not answer ({e}): its sessions are not listed")
        }
        MachineTrouble::Refused(code) => {
            format!(
                "note: machine {name} refused the listing ({code}): its sessions are not listed"
            )
        }
        MachineTrouble::Unreadable(n) => {
            format!("note: machine {name} could not read {n} of its session logs")
        }
    }
}

impl Selection {
    /// The text the model sees.
    pub fn render(&self) -> String {
        let rows: Vec<ListRow> = self.rows.iter().map(|c| c.row.clone()).collect();
        let mut out = render_list(&rows, self.considered, &self.notes, self.allow_resume);
        for n in &self.machines {
            out.push('\n');
            out.push_str(&machine_note(n));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Shown;
    use crate::render::refusal::value_text;

    fn describe(v: &serde_json::Value) -> String {
        value_text(&Shown::of(v))
    }

    fn row(id: &str) -> ListRow {
        ListRow {
            same_repo: None,
            files: Vec::new(),
            overlap: Vec::new(),
            id: id.into(),
            liveness: Liveness::Cold,
            subagent: false,
            parent: None,
            cwd: Some("/w".into()),
            preset: Some("standard".into()),
            title: Some("A title".into()),
            is_caller: false,
            machine: None,
        }
    }

    #[test]
    fn rows_and_footer_match_the_contract() {
        let mut live = row("session-77aa");
        live.liveness = Liveness::Live("running".into());
        let mut sub = row("019c3d96");
        sub.subagent = true;
        sub.parent = Some("session-p".into());
        sub.title = None;
        let mut me = row("session-me");
        me.liveness = Liveness::Live("idle".into());
        me.is_caller = true;
        let mut fork = row("session-f");
        fork.parent = Some("session-p".into());
        fork.cwd = None;
        let notes: Vec<StoreNote> = (0..7)
            .map(|i| StoreNote::Text(format!("p{i}: bad\nthing")))
            .collect();
        let text = render_list(&[row("session-e2"), live, fork, sub, me], 60, &notes, true);
        let expected = "\
- session-e2 [cold, top-level] | cwd=/w | preset=standard | send: queue (wakes it)
  A title
- session-77aa [live, top-level, running] | cwd=/w | preset=standard | send: steer lands in its running turn
  A title
- session-f [cold, top-level] | cwd=(none) | preset=standard | fork-of=session-p | send: queue (wakes it)
  A title
- 019c3d96 [cold, subagent] | cwd=/w | preset=standard | parent=session-p | not messageable
  (untitled)
- session-me [live, top-level, idle] | cwd=/w | preset=standard | this session (you)
  A title
5 of 60 considered sessions
Top-level sessions are messageable with sessions_send; subagent sessions are not.
note: p0: bad thing
note: p1: bad thing
note: p2: bad thing
note: p3: bad thing
note: p4: bad thing
note: … and 2 more";
        assert_eq!(text, expected);
    }

    #[test]
    fn resume_disabled_and_idle_hints() {
        let mut idle = row("s");
        idle.liveness = Liveness::Live("idle".into());
        assert_eq!(
            send_hint(&idle, false),
            "send: queue or steer starts a turn now"
        );
        assert_eq!(send_hint(&row("s"), false), "send: resume disabled");
        let mut asking = row("s");
        asking.liveness = Liveness::Live("awaiting-user".into());
        assert_eq!(
            send_hint(&asking, true),
            "send: waiting on its human; steer lands once they answer, queue after that turn"
        );
        assert!(
            row_text(&asking, true).contains("[live, top-level, awaiting-user]"),
            "{}",
            row_text(&asking, true)
        );
    }

    #[test]
    fn activity_lines_are_bounded() {
        let mut r = row("s");
        r.liveness = Liveness::Live("running".into());
        r.same_repo = Some("same repo");
        r.files = (0..9).map(|i| format!("src/f{i}.rs")).collect();
        r.overlap = vec!["src/f1.rs".into()];
        let t = row_text(&r, true);
        assert!(t.contains(" | same repo | send: "), "{t}");
        assert!(t.ends_with("\n  changed recently: src/f0.rs, src/f1.rs, src/f2.rs, src/f3.rs, src/f4.rs, src/f5.rs (+3 more)\n  overlap: you changed src/f1.rs recently too; coordinate before editing it further"), "{t}");
        // one huge path (with a newline in it) stays one bounded line
        r.files = vec!["x\ny".repeat(400)];
        let t = row_text(&r, true);
        let line = t
            .lines()
            .find(|l| l.starts_with("  changed recently: "))
            .unwrap();
        assert!(line.chars().count() <= MAX_PATHS_CHARS + 24, "{line}");
        assert_eq!(t.lines().count(), 4, "{t}");
        // the caller's own row never shows activity lines
        r.is_caller = true;
        assert_eq!(row_text(&r, true).lines().count(), 2);
    }

    #[test]
    fn refusals_name_the_argument() {
        assert_eq!(
            bad_argument("limit", "an integer from 1 to 200", &describe(&serde_json::json!(500)), "Omit it for the default."),
            "refused (bad-argument): limit must be an integer from 1 to 200; got 500. Omit it for the default."
        );
        assert_eq!(
            describe(&serde_json::json!("x".repeat(70))),
            format!("\"{}…\" (a string)", "x".repeat(60))
        );
        assert_eq!(one_line("a\n\tb\u{1b}c"), "a b c");
        assert_eq!(capped("abc", 5), "abc");
        assert_eq!(capped(&"x".repeat(10_000_000), 5), "xxxxx…[+9999995 chars]");
        assert_eq!(show_id("session-e2_a.b:c~d"), "session-e2_a.b:c~d");
        assert_eq!(
            show_id("s [live, top-level] | cwd=/x"),
            "\"s [live, top-level] | cwd=/x\""
        );
        assert_eq!(show_id("a\nb"), "\"a\\nb\"");
    }
}
