//! `sessions_read {session_id, max_messages, include_injected, include_system}`: a bounded,
//! text-only window of another session's current model surface, newest first (seed 000).
//! A read never writes, never resumes, never takes `session.lock`.

use std::path::Path;

use serde_json::Value;

use super::args;
use super::list::merged_header;
use crate::outcome::{Missing, Refusal};
use crate::request::ToolRequest;
use store::events::{Header, Role};
use store::fold::{Class, Fold, Node};
use store::log::{fetch_events, Source};
use store::{self, Lookup};

pub const READ_ARGS: [&str; 5] = [
    "session_id",
    "max_messages",
    "since_seq",
    "include_injected",
    "include_system",
];

#[derive(Debug, Clone, PartialEq)]
pub struct ReadArgs {
    pub session_id: String,
    pub max_messages: usize,
    pub include_injected: bool,
    pub include_system: bool,
    /// Only messages after this seq (the `captured through seq` of an earlier read).
    pub since_seq: Option<u64>,
}

pub fn parse_args(args: &Value, cfg: &crate::config::Config) -> Result<ReadArgs, Refusal> {
    args::read(args, cfg).map_err(args::refuse)
}

/// Readable text of one event's message: text blocks, tool calls and results as short markers;
/// reasoning blocks never.
pub fn message_body(role: Role, ev: &Value) -> String {
    let msg = if role == Role::User {
        &ev["data"]
    } else {
        &ev["data"]["message"]
    };
    let Some(content) = msg.get("content").and_then(Value::as_array) else {
        return "(no content)".into();
    };
    let mut parts: Vec<String> = Vec::new();
    let mut reasoning = false;
    for block in content {
        let ty = block.get("type").and_then(Value::as_str).unwrap_or("");
        match ty {
            "text" => parts.push(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            ),
            "reasoning" => reasoning = true,
            "tool-call" => {
                let name = block.get("name").and_then(Value::as_str).unwrap_or("?");
                let args = block.get("arguments").and_then(Value::as_str).unwrap_or("");
                let args: String = if args.chars().count() > 200 {
                    args.chars().take(200).chain("…".chars()).collect()
                } else {
                    args.to_string()
                };
                parts.push(format!("[tool call {name} {args}]"));
            }
            // rc.8 wrapper: {type:'tool-result', toolCallId, content:[…], isError} [R8 real log, docs real-host.md]
            "tool-result" => {
                for inner in block
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match inner.get("type").and_then(Value::as_str) {
                        Some("text") => parts.push(
                            inner
                                .get("text")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        ),
                        Some(other) => parts.push(format!("[{other}]")),
                        None => {}
                    }
                }
            }
            "tool-addition" | "tool-removal" => {
                let name = block.get("toolName").and_then(Value::as_str).unwrap_or("?");
                parts.push(format!(
                    "[{} {name}]",
                    if ty == "tool-addition" {
                        "tool added:"
                    } else {
                        "tool removed:"
                    }
                ));
            }
            "" => {}
            other => parts.push(format!("[{other}]")),
        }
    }
    if parts.is_empty() {
        return if reasoning {
            "(reasoning only; not shown)".into()
        } else {
            "(no text)".into()
        };
    }
    parts.join("\n")
}

fn visible(n: &Node, a: &ReadArgs) -> bool {
    match n.class {
        Class::Conversation => true,
        Class::Injected => a.include_injected,
        Class::System => a.include_system,
        Class::Empty => false,
    }
}

/// The head of a read window: the header block of the text, and the `session` of the data
/// (`cli::data::ReadWindow`'s `session`, the binding's `ReadSession`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadHead {
    pub id: String,
    pub live: bool,
    pub subagent: bool,
    pub parent: Option<String>,
    pub cwd: Option<String>,
    pub title: Option<String>,
    /// Messages left after filtering.
    pub readable: usize,
    /// The last seq read.
    #[serde(rename = "capturedThroughSeq")]
    pub captured_through: Option<u64>,
    /// A delta read: only messages after this seq (`since_seq`).
    pub since: Option<u64>,
    /// The linked machine the session lives on (absent: this home); read there, by that machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<crate::machine::Machine>,
}

/// One message of the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadMessage {
    pub role: &'static str,
    pub seq: u64,
    pub label: String,
    pub request: Option<String>,
    pub injected: bool,
    pub replaced: bool,
    pub error: bool,
    pub body: String,
}

/// What was filtered out, for the closing hint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hidden {
    pub injected: usize,
    pub system: usize,
}

/// A window of one session, before rendering (newest first).
#[derive(Debug, Clone)]
pub struct Window {
    pub head: ReadHead,
    pub messages: Vec<ReadMessage>,
    /// Readable messages left out by `max_messages`.
    pub omitted: usize,
    pub hidden: Hidden,
    pub notes: Vec<String>,
}

/// A `sessions_read` result: the window and the cut applied when it is rendered.
#[derive(Debug, Clone)]
pub struct ReadResult {
    pub window: Window,
    /// `maxMessageChars`: a longer message ends with `…[truncated N chars]`.
    pub max_chars: usize,
    /// The log file the window was read from (`None`: a live session with nothing on disk yet).
    pub log_path: Option<String>,
}

/// A window of `fold` as a result, fetching message text from `src`.
fn result_of(
    head: &Header,
    live: bool,
    fold: &Fold,
    src: &Source<'_>,
    a: &ReadArgs,
    max_chars: usize,
    notes: Vec<String>,
) -> ReadResult {
    ReadResult {
        window: window(head, live, fold, src, a, notes),
        max_chars,
        log_path: match src {
            Source::File { path, .. } => Some(path.display().to_string()),
            Source::Memory(_) => None,
        },
    }
}

/// Select the window of `fold` and fetch its message text from `src` (the text and the CLI's JSON share it).
pub fn window(
    head: &Header,
    live: bool,
    fold: &Fold,
    src: &Source<'_>,
    a: &ReadArgs,
    mut notes: Vec<String>,
) -> Window {
    let mut hidden = Hidden::default();
    let mut shown: Vec<&Node> = Vec::new();
    let mut readable = 0usize;
    let since = a.since_seq;
    // A delta read: only what came after `since_seq`, with the same labels and limits. A node that entered
    // the surface by replacing others after that seq (a compaction checkpoint, a pruned tool result) means
    // the history the caller read before was rewritten: said plainly below.
    let mut rewritten = 0usize;
    for n in fold
        .surface
        .iter()
        .rev()
        .filter(|n| since.is_none_or(|s| n.seq > s))
    {
        if since.is_some() && n.replaced {
            rewritten += 1;
        }
        if visible(n, a) {
            readable += 1;
            if shown.len() < a.max_messages {
                shown.push(n);
            }
        } else {
            match n.class {
                Class::Injected => hidden.injected += 1,
                Class::System => hidden.system += 1,
                _ => {}
            }
        }
    }
    let wanted: Vec<(u64, store::frames::Loc)> = shown.iter().map(|n| (n.seq, n.loc)).collect();
    let events = fetch_events(src, &wanted);
    let messages: Vec<ReadMessage> = shown
        .iter()
        .map(|n| ReadMessage {
            role: n.role.name(),
            seq: n.seq,
            label: n.label.to_string(),
            request: n.request.as_deref().map(str::to_string),
            injected: n.class == Class::Injected,
            replaced: n.replaced,
            error: n.is_error,
            body: match events.get(&n.seq) {
                Some(ev) => message_body(n.role, ev),
                None => "[text unavailable: the log changed while it was read, or the line is over the 16 MiB cap]".into(),
            },
        })
        .collect();
    if let Some(s) = since {
        match fold.last_seq {
            Some(last) if s > last => notes.push(format!(
                "since_seq {s} is past this log's last seq {last}: the log was replaced (a new generation) or the seq belongs to another session; read without since_seq to see the whole window"
            )),
            _ if rewritten > 0 => notes.push(format!(
                "the conversation was compacted (or tool results pruned) after seq {s}: {rewritten} message(s) marked replaced stand in for history you read before"
            )),
            _ => {}
        }
    }
    // The notes about the lines this surface is made of (a note about compacted history is the full
    // fold's: `store::Fold::read_notes`), the same whether the log was folded whole or from its end.
    let store_notes = fold.read_notes();
    if !store_notes.is_empty() || store_notes.more > 0 {
        notes.push(store_notes.summary());
    }
    let rh = ReadHead {
        since,
        id: head.id.clone(),
        live,
        subagent: head.is_subagent(),
        parent: head.parent_session.clone(),
        cwd: head.cwd.clone(),
        title: fold.display_title().map(str::to_string),
        readable,
        captured_through: fold.last_seq,
        machine: None,
    };
    Window {
        head: rh,
        omitted: readable - messages.len(),
        messages,
        hidden,
        notes,
    }
}

/// How long a live read waits for the host's write-behind batch to reach the file (rc.8
/// `session-persistence` `DEFAULT_WRITE_BATCH_MAX_DELAY_MS = 200`, lib/index.js; the shim also asks
/// for an immediate flush through `ctx.sessions.flush`, so this wait is normally not used).
const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_millis(400);
const FLUSH_POLL: std::time::Duration = std::time::Duration::from_millis(25);

/// The window of a read as data, or the refusal (blocking: reads the store or the live events).
///
/// A live target is read from its log file through the store, like a session at rest: the cached
/// fold is extended by what was appended since the last read, so the cost follows what is new, not
/// the history. Nothing of the session crosses from the host's main thread: the shim only asks the
/// host to flush (its own batch write) and reports how many events the session holds (`live_seq`).
/// When the file is still behind that, the read waits for the host's next batch, up to `FLUSH_WAIT`.
pub fn read_result(home: &Path, req: &ToolRequest, a: &ReadArgs) -> Result<ReadResult, Refusal> {
    let max_chars = (req.config.max_message_chars as usize).max(1);
    let live = req.live.iter().find(|l| l.id == a.session_id);
    let mut lookup = store::load_session_for_read(home, &a.session_id);
    if let Some(l) = live {
        let mut notes = Vec::new();
        if let Some(want) = req.live_seq.filter(|n| *n > 0) {
            let have = |lk: &Lookup| match lk {
                Lookup::Found(s) => s.fold.last_seq.map_or(0, |q| q + 1),
                _ => 0,
            };
            let t0 = std::time::Instant::now();
            while have(&lookup) < want && t0.elapsed() < FLUSH_WAIT {
                std::thread::sleep(FLUSH_POLL);
                lookup = store::load_session_for_read(home, &a.session_id);
            }
            let got = have(&lookup);
            if got < want {
                notes.push(format!(
                    "the log file holds {got} of the {want} events this session has in memory; the newest {} are not shown yet (the host writes them within a moment)",
                    want - got
                ));
            }
        } else if req.live_flushed != Some(true) {
            notes.push(
                "this host did not report the session's in-memory events; this is its log file, which can lag by ~200 ms"
                    .to_string(),
            );
        }
        let file_header = match &lookup {
            Lookup::Found(s) => s.fold.header.clone(),
            _ => None,
        };
        let head = merged_header(l, file_header.as_ref());
        return match &lookup {
            Lookup::Found(s) => {
                let src = Source::File {
                    path: &s.log.path,
                    enc: s.log.enc,
                };
                Ok(result_of(&head, true, &s.fold, &src, a, max_chars, notes))
            }
            _ => Ok(result_of(
                &head,
                true,
                &Fold::with_header(head.clone()),
                &Source::Memory(b""),
                a,
                max_chars,
                vec!["the session has no events on disk yet".into()],
            )),
        };
    }
    // Live in another host process: read its file, never touching the session (no resume, no lock).
    if let Lookup::Found(s) = &lookup {
        if let Some((r, ps)) = req.owner_at(home, &a.session_id) {
            let head = s.fold.header.clone().unwrap_or_default();
            let src = Source::File {
                path: &s.log.path,
                enc: s.log.enc,
            };
            let note = format!(
                "live in another DSH process ({}{}); read from its log file, which lags that process by up to ~200 ms",
                r.describe(),
                if ps.status.is_empty() { String::new() } else { format!(", {}", ps.status) }
            );
            return Ok(result_of(
                &head,
                true,
                &s.fold,
                &src,
                a,
                max_chars,
                vec![note],
            ));
        }
    }
    match lookup {
        Lookup::Found(s) => {
            let head = s.fold.header.clone().unwrap_or_default();
            let src = Source::File {
                path: &s.log.path,
                enc: s.log.enc,
            };
            Ok(result_of(
                &head,
                false,
                &s.fold,
                &src,
                a,
                max_chars,
                Vec::new(),
            ))
        }
        Lookup::Unreadable(why) => Err(Refusal::NotFound {
            target: a.session_id.clone(),
            missing: Missing::Unreadable(why),
        }),
        Lookup::NotFound => Err(Refusal::NotFound {
            target: a.session_id.clone(),
            missing: Missing::ReadTarget,
        }),
    }
}

/// Run `sessions_read`: the window as data, or the refusal.
pub async fn run_result(req: &ToolRequest) -> Result<ReadResult, Refusal> {
    let args = parse_args(&req.args, &req.config)?;
    let home = store::resolve_dsh_home(req.host.dsh_home.as_deref());
    let req = req.clone();
    super::blocking(move || read_result(&home, &req, &args)).await?
}

/// The text of [`run_result`] (a test helper: the binding goes through `tools::run`).
#[cfg(test)]
pub async fn run(req: &ToolRequest) -> String {
    match run_result(req).await {
        Ok(r) => r.render(),
        Err(r) => r.render(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{HostInfo, LiveSession};
    use crate::tools::list::tests::snapshot;
    use serde_json::json;
    use store::testgen::*;

    fn req(args: Value, home: &Path) -> ToolRequest {
        ToolRequest {
            tool: "sessions_read".into(),
            args,
            host: HostInfo {
                dsh_home: Some(home.display().to_string()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    async fn read(args: Value) -> String {
        run(&req(args, &fixtures_root())).await
    }

    #[tokio::test]
    async fn ids_the_send_tools_refuse_are_bad_arguments_here_too() {
        for (id, what) in [
            ("session-\u{0}x".to_string(), "control character U+0000"),
            ("s".repeat(100_000), "a string of 100000 characters"),
        ] {
            let out = read(json!({ "session_id": id })).await;
            assert!(
                out.starts_with("refused (bad-argument): session_id must be"),
                "{out}"
            );
            assert!(out.contains(what), "{out}");
            assert!(out.len() < 1000, "the id is not echoed whole");
        }
        // NaN/Infinity arrive as strings from the shim: refused by name, never defaulted.
        let out = read(json!({"session_id": MAIN, "max_messages": "NaN"})).await;
        assert!(
            out.starts_with("refused (bad-argument): max_messages must be"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn reads_the_current_surface_newest_first() {
        let out = read(json!({"session_id": MAIN})).await;
        let expected = format!(
            "\
session {MAIN} [cold, top-level] | cwd=/home/ana/proj
title: Fix the newapi reasoning-effort config
readable messages: 3 | captured through seq: 58
--- assistant (seq 50, model:opencode-go-deepseek/deepseek-flash) ---
the reasoning selector is empty for every model
--- user (seq 37, user, request={REQ_LANDED}) ---
Cross-session message from another session of this harness.
from-session: {V4} (\"Port the parser\")
delivery: queue
│ --- message begins ---
please also check the selector
│ --- message ends ---
--- user (seq 55, plugin:compact, replaced) ---
<compaction-summary>
Earlier: the user asked to fix the reasoning-effort config.
</compaction-summary>
(hidden: 2 harness-injected (include_injected: true); 1 system/plugin notices (include_system: true))"
        );
        assert_eq!(out, expected);
        assert!(!out.contains("SECRET REASONING"));
    }

    #[tokio::test]
    async fn since_seq_returns_only_the_news_and_says_when_history_was_rewritten() {
        // after seq 40: the assistant reply (50) and the compaction checkpoint (55) that replaced earlier history
        let out = read(json!({"session_id": MAIN, "since_seq": 40})).await;
        assert!(
            out.contains("\nreadable messages: 2 after seq 40 | captured through seq: 58\n"),
            "{out}"
        );
        assert!(
            out.contains("--- assistant (seq 50, model:opencode-go-deepseek/deepseek-flash) ---"),
            "{out}"
        );
        assert!(
            out.contains("--- user (seq 55, plugin:compact, replaced) ---"),
            "{out}"
        );
        assert!(!out.contains("(seq 37,"), "{out}");
        assert!(out.contains("\nnote: the conversation was compacted (or tool results pruned) after seq 40: 1 message(s) marked replaced stand in for history you read before"), "{out}");
        // after the compaction: only the reply, no note
        let out = read(json!({"session_id": MAIN, "since_seq": 55})).await;
        assert!(out.contains("readable messages: 0 after seq 55 | captured through seq: 58\n(no new readable messages after seq 55)"), "{out}");
        let out = read(json!({"session_id": MAIN, "since_seq": 45, "max_messages": 1})).await;
        assert!(
            out.contains("(1 earlier messages after seq 45 omitted)"),
            "{out}"
        );
        // nothing new since the last read
        let out = read(json!({"session_id": MAIN, "since_seq": 58})).await;
        assert!(
            out.contains("(no new readable messages after seq 58)") && !out.contains("note:"),
            "{out}"
        );
        // a seq from the future: said plainly
        let out = read(json!({"session_id": MAIN, "since_seq": 900})).await;
        assert!(
            out.contains("note: since_seq 900 is past this log's last seq 58"),
            "{out}"
        );
        let out = read(json!({"session_id": MAIN, "since_seq": -3})).await;
        assert!(
            out.starts_with("refused (bad-argument): since_seq must be an integer from 0 to"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn include_flags_window_and_truncation() {
        let mut r = req(
            json!({"session_id": MAIN, "include_injected": true, "include_system": true, "max_messages": 2}),
            &fixtures_root(),
        );
        r.config.max_message_chars = 20;
        let out = run(&r).await;
        assert!(
            out.contains("readable messages: 6 | captured through seq: 58"),
            "{out}"
        );
        assert!(out.contains("--- user (seq 40, plugin:agent-instructions, harness-injected) ---\n<system-reminder>\nFo…[truncated 33 chars]"), "{out}");
        assert!(out.contains("--- assistant (seq 50,"), "{out}");
        assert!(out.ends_with("(4 earlier messages omitted)"), "{out}");
        assert!(!out.contains("(hidden:"), "{out}");
        // include_injected defaults from config.
        let mut r = req(json!({"session_id": MAIN}), &fixtures_root());
        r.config.include_injected_by_default = true;
        let out = run(&r).await;
        assert!(out.contains("readable messages: 5"), "{out}");
        assert!(
            out.contains("plugin:@deepseek-ai/dsh-system-prompt/snapshot, harness-injected"),
            "{out}"
        );
        // max_messages is capped by maxReadMessages.
        let mut r = req(
            json!({"session_id": MAIN, "max_messages": 100}),
            &fixtures_root(),
        );
        r.config.max_read_messages = 1;
        let out = run(&r).await;
        assert_eq!(out.matches("\n--- ").count(), 1, "{out}");
        assert!(out.contains("(2 earlier messages omitted)"), "{out}");
    }

    #[tokio::test]
    async fn v4_tool_results_system_and_developer() {
        let out =
            read(json!({"session_id": V4, "include_system": true, "max_messages": 100})).await;
        // The first turn's system prompt was compacted away; the second turn's is on the surface.
        assert!(
            out.contains("--- system (seq 22, system-prompt) ---\nYou are a coding agent."),
            "{out}"
        );
        assert!(
            out.contains("readable messages: 4 | captured through seq: 32"),
            "{out}"
        );
        assert!(out.contains(&format!("request={REQ_V4}")), "{out}");
        assert!(out.contains("compact-checkpoint, replaced) ---"), "{out}");
        // The compaction shadowed the first turn's tool round; the second turn's reply remains.
        assert!(out.contains("lexer ported as well"), "{out}");
        assert!(!out.contains("src/parse.rs:12"), "{out}");
        // rc.8 tool results (V0 wrapper) come through as text with the call id.
        let mut b = LogBuilder::v0("s-tools", Some("/w"), BASE_TIME);
        b.prompt("use the tool", "r");
        b.tool_round("call_9", "grep", "{}", "HELLO_TOOL_RESULT: hi", "p", "m");
        let mut v4 = LogBuilder::v4("s-tools4", Some("/w"), BASE_TIME);
        v4.prompt("use the tool", "r");
        v4.tool_round("call_8", "grep", "{}", "V4 RESULT", "p", "m");
        let d = tempfile::tempdir().unwrap();
        write_tree(
            d.path(),
            &[
                ("sessions/--w--/s-tools/session.jsonl.zstd".into(), b.zstd()),
                (
                    "sessions/--w--/s-tools4/session.v4.jsonl.zstd".into(),
                    v4.zstd(),
                ),
            ],
        );
        let out = run(&req(json!({"session_id":"s-tools"}), d.path())).await;
        assert!(out.contains("--- tool (seq 8, tool:call_9) ---\nHELLO_TOOL_RESULT: hi\n--- assistant (seq 6, model:p/m) ---\n[tool call grep {}]"), "{out}");
        let out = run(&req(json!({"session_id":"s-tools4"}), d.path())).await;
        assert!(out.contains("tool:call_8) ---\nV4 RESULT"), "{out}");
    }

    #[tokio::test]
    async fn a_live_read_comes_from_the_file_and_waits_for_the_hosts_flush() {
        let home = tempfile::tempdir().unwrap();
        let log = home
            .path()
            .join(format!("sessions/{PROJ}/{MAIN}/session.jsonl.zstd"));
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let mut b = main_v0();
        b.flush();
        std::fs::write(&log, b.zstd()).unwrap();
        let before = b.zstd().len();
        // The host holds one more landed message than its file so far (not flushed yet).
        b.prompt("fresh from memory", "dsh-session-mail:live-1");
        let grown = b.zstd();
        let in_memory = b.seq;
        let mut r = req(json!({"session_id": MAIN}), home.path());
        r.live = vec![LiveSession {
            id: MAIN.into(),
            status: "running".into(),
            header: json!({"cwd":"/live/cwd"}),
            ..Default::default()
        }];
        r.live_seq = Some(in_memory);
        r.peers = Some(vec![]);
        // The host's write-behind batch lands 100 ms into the read: the read waits for it.
        let writer = {
            let log = log.clone();
            let tail = grown[before..].to_vec();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(100));
                let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
                std::io::Write::write_all(&mut f, &tail).unwrap();
            })
        };
        let live = run(&r).await;
        writer.join().unwrap();
        assert!(
            live.starts_with(&format!(
                "session {MAIN} [live, top-level] | cwd=/live/cwd\n"
            )),
            "{live}"
        );
        assert!(
            live.contains(
                "--- user (seq 63, user, request=dsh-session-mail:live-1) ---\nfresh from memory"
            ),
            "{live}"
        );
        assert!(!live.contains("note:"), "{live}");
        // The same session read at rest agrees on every message (only the head line differs).
        let mut rest = req(json!({"session_id": MAIN}), home.path());
        rest.peers = Some(vec![]);
        let at_rest = run(&rest).await;
        let body = |t: &str| t.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert_eq!(body(&live), body(&at_rest));
        // A host that says it holds more than ever reaches the file: the read says what is missing.
        r.live_seq = Some(in_memory + 2);
        let out = run(&r).await;
        let want = format!("note: the log file holds {in_memory} of the {} events this session has in memory; the newest 2 are not shown yet", in_memory + 2);
        assert!(out.contains(&want), "{out}");
        // No seq and no flush reported (a host without either API): the file, with a note.
        r.live_seq = None;
        let out = run(&r).await;
        assert!(
            out.contains("fresh from memory")
                && out.contains("note: this host did not report the session's in-memory events"),
            "{out}"
        );
        r.live_flushed = Some(true);
        assert!(!run(&r).await.contains("note:"));
        // A live session with no file yet.
        r.args = json!({"session_id":"session-new"});
        r.live = vec![LiveSession {
            id: "session-new".into(),
            status: "idle".into(),
            header: json!({"cwd":"/n"}),
            ..Default::default()
        }];
        let out = run(&r).await;
        assert!(out.starts_with("session session-new [live, top-level] | cwd=/n\ntitle: (untitled)\nreadable messages: 0 | captured through seq: (none)\n(no readable messages)"), "{out}");
    }

    #[tokio::test]
    async fn a_session_live_in_another_process_is_read_from_disk_and_says_where_it_lives() {
        let home = fixture_home();
        let mut r = req(json!({"session_id": MAIN}), home.path());
        r.peers = Some(vec![crate::presence::Record {
            pid: 4242,
            profile: Some("web".into()),
            base_url: Some("http://127.0.0.1:9".into()),
            sessions: vec![crate::presence::PeerSession {
                id: MAIN.into(),
                status: "running".into(),
            }],
            ..Default::default()
        }]);
        let out = run(&r).await;
        assert!(
            out.starts_with(&format!("session {MAIN} [live, top-level]")),
            "{out}"
        );
        assert!(out.contains("note: live in another DSH process (pid 4242, profile web, running); read from its log file"), "{out}");
        r.peers = Some(vec![]);
        let rest = run(&r).await;
        let body = |t: &str| {
            t.lines()
                .skip(1)
                .filter(|l| !l.starts_with("note:"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(body(&out), body(&rest));
        // never touched: no lock file, no new generation
        let dir = home.path().join(format!("sessions/{PROJ}/{MAIN}"));
        let names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[tokio::test]
    async fn subagent_and_fork_heads() {
        let out = read(json!({"session_id": SUB})).await;
        assert!(out.starts_with(&format!("session {SUB} [cold, subagent] | cwd=/home/ana/proj | parent={MAIN}\ntitle: Bounded completed checkpoint")), "{out}");
        let out = read(json!({"session_id": FORK})).await;
        assert!(
            out.starts_with(&format!(
                "session {FORK} [cold, top-level] | cwd=/home/ana/proj | fork-of={MAIN}"
            )),
            "{out}"
        );
        // The fork's model surface includes what it inherited.
        assert!(
            out.contains("inherited reply") && out.contains("fork reply"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn bad_arguments_and_unknown_ids() {
        let cases = [
            (json!({}), "refused (bad-argument): session_id must be a session id string; got nothing."),
            (Value::Null, "refused (bad-argument): session_id must be a session id string; got nothing."),
            (json!({"session_id": 5}), "refused (bad-argument): session_id must be a session id string; got 5."),
            (json!({"session_id": "  "}), "refused (bad-argument): session_id must be a non-empty session id string; got an empty string."),
            (json!({"session_id": MAIN, "max_messages": 101}), "refused (bad-argument): max_messages must be an integer from 1 to 100; got 101."),
            (json!({"session_id": MAIN, "max_messages": -1}), "refused (bad-argument): max_messages must be an integer from 1 to 100; got -1."),
            (json!({"session_id": MAIN, "include_system": 1}), "refused (bad-argument): include_system must be true or false; got 1."),
            (json!({"session_id": MAIN, "include_injected": "true"}), "refused (bad-argument): include_injected must be true or false; got \"true\" (a string)."),
            (json!({"session_id": MAIN, "limit": 3}), "refused (bad-argument): \"limit\" is not an argument of sessions_read; expected only session_id, max_messages, since_seq, include_injected, include_system."),
            (json!("session-x"), "refused (bad-argument): the arguments must be a JSON object; got \"session-x\" (a string)."),
            (json!({"session_id": "session-e218a09e"}), "refused (not-found): no session with id \"session-e218a09e\" on this host."),
            (json!({"session_id": "../../etc"}), "refused (not-found): no session with id \"../../etc\" on this host."),
        ];
        for (args, want) in cases {
            let out = read(args.clone()).await;
            assert!(out.starts_with(want), "{args}: {out}");
        }
    }

    #[tokio::test]
    async fn huge_ids_and_argument_names_come_back_cut() {
        let long = "k".repeat(100_000);
        let mut named = serde_json::Map::new();
        named.insert("session_id".into(), json!(MAIN));
        named.insert(long.clone(), json!(1));
        for args in [json!({"session_id": long.clone()}), Value::Object(named)] {
            let out = read(args).await;
            assert!(
                out.starts_with("refused ("),
                "{}",
                &out[..80.min(out.len())]
            );
            assert!(out.chars().count() < 400, "{} chars", out.chars().count());
            assert!(
                out.contains("kkkk…\"") || out.contains("got a string of 100000 characters"),
                "{out}"
            );
        }
    }

    #[tokio::test]
    async fn reading_a_cold_session_never_modifies_it() {
        let home = fixture_home();
        let before = snapshot(home.path());
        for id in [MAIN, V4, PLAIN, FORK] {
            let out = run(&req(
                json!({"session_id": id, "include_injected": true, "include_system": true}),
                home.path(),
            ))
            .await;
            assert!(out.starts_with(&format!("session {id} [cold")), "{out}");
        }
        assert_eq!(
            before,
            snapshot(home.path()),
            "bytes and mtimes unchanged, no lock file created"
        );
    }

    #[tokio::test]
    async fn a_broken_log_is_refused_with_its_reason() {
        let d = tempfile::tempdir().unwrap();
        write_tree(
            d.path(),
            &[(
                "sessions/--w--/s-bad/session.jsonl.zstd".into(),
                frame(b"{\"type\":\"nope\"}\n"),
            )],
        );
        let out = run(&req(json!({"session_id":"s-bad"}), d.path())).await;
        assert!(out.starts_with("refused (not-found): session \"s-bad\" exists but its log cannot be read (--w--/s-bad/session.jsonl.zstd: first line is not a session header)"), "{out}");
    }
}

/// Manual check against a real host's home: `DSH_REAL_HOME=<dir> cargo test --lib real_home -- --ignored --nocapture`.
#[cfg(test)]
#[tokio::test]
#[ignore = "needs DSH_REAL_HOME pointing at a real DSH home"]
async fn real_home() {
    let Ok(home) = std::env::var("DSH_REAL_HOME") else {
        return;
    };
    let mk = |tool: &str, args: Value| ToolRequest {
        tool: tool.into(),
        args,
        host: crate::request::HostInfo {
            dsh_home: Some(home.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    let listing = super::list::run(&mk("sessions_list", serde_json::json!({"scope":"all"}))).await;
    println!("{listing}\n");
    for s in store::list_sessions(Path::new(&home)).sessions {
        let out = run(&mk("sessions_read", serde_json::json!({"session_id": s.meta.id, "include_injected": true, "include_system": true}))).await;
        println!("{out}\n");
    }
}
