//! The store's listing and window and the audit ledger as JSON data for the
//! command line (`--json`): built from the tools' typed results, never from their text.

use std::path::Path;

use serde::Serialize;

use crate::outcome::RefusalCode;
use crate::render::list::{send_hint, store_note, Liveness};
use crate::render::read::ReadHead;
use crate::request::ToolRequest;
use crate::tools::{list, read};

// list / read / ledger as data. Every type here is the binding's too (declared once: the `napi` feature):
// `listSessions()`, `readSession()` and `readLedger()` return these values as they are, and the CLI's
// `--json` prints them (a refusal as `ok: false`, its `code` and `text`; every other field `null`).

/// Whether a session is running in some process (`cold`: only its log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "kebab-case"))]
pub enum RowLiveness {
    Cold,
    Live,
}

/// `top-level` or `subagent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "kebab-case"))]
pub enum RowScope {
    TopLevel,
    Subagent,
}

impl RowScope {
    fn of(subagent: bool) -> RowScope {
        if subagent {
            RowScope::Subagent
        } else {
            RowScope::TopLevel
        }
    }
}

/// The other process a session is live in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct RowOwner {
    pub pid: u32,
    pub profile: Option<String>,
    /// It has a web server a send is routed through.
    pub routable: bool,
}

/// One `sessions_list` row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct SessionRow {
    pub id: String,
    pub liveness: RowLiveness,
    /// The live status (`running`, `idle`, …).
    pub status: Option<String>,
    /// Live in another process.
    pub owner: Option<RowOwner>,
    pub scope: RowScope,
    pub parent_session: Option<String>,
    pub fork_of: Option<String>,
    pub cwd: Option<String>,
    pub preset: Option<String>,
    pub title: Option<String>,
    pub created_at: i64,
    pub is_caller: bool,
    pub messageable: bool,
    pub hint: String,
    pub same_repo: bool,
    pub files_changed: Vec<String>,
    pub overlap: Vec<String>,
}

/// `sessions_list` as data, or its refusal (`ok: false`, `code`, `text`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct Listing {
    pub ok: bool,
    pub code: Option<RefusalCode>,
    pub text: Option<String>,
    pub dsh_home: Option<String>,
    pub shown: Option<u32>,
    pub considered: Option<u32>,
    pub rows: Option<Vec<SessionRow>>,
    pub notes: Option<Vec<String>>,
}

/// `sessions_list` as data: the tool's own result ([`list::select`]) through [`listing`].
pub fn list_data(home: &Path, req: &ToolRequest) -> Listing {
    match list::parse_args(&req.args, req.config.max_list_results as usize) {
        Ok(args) => listing(home, &list::select(home, req, &args)),
        Err(r) => Listing {
            code: Some(r.code()),
            text: Some(r.render()),
            ..Listing::default()
        },
    }
}

/// The CLI's `--json` printer of a listing: the same [`list::Selection`] the tool's text
/// (`render::list`, the model's and the CLI's human text) prints, as data.
pub fn listing(home: &Path, sel: &list::Selection) -> Listing {
    let rows: Vec<SessionRow> = sel
        .rows
        .iter()
        .map(|c| {
            let r = &c.row;
            let (liveness, status, owner) = match &r.liveness {
                Liveness::Cold => (RowLiveness::Cold, None, None),
                Liveness::Live(s) => (RowLiveness::Live, Some(s.clone()), None),
                Liveness::Elsewhere {
                    status,
                    pid,
                    profile,
                    routable,
                } => (
                    RowLiveness::Live,
                    Some(status.clone()),
                    Some(RowOwner {
                        pid: *pid,
                        profile: profile.clone(),
                        routable: *routable,
                    }),
                ),
            };
            SessionRow {
                id: r.id.clone(),
                liveness,
                status,
                owner,
                scope: RowScope::of(r.subagent),
                parent_session: r.parent.clone(),
                fork_of: if r.subagent { None } else { r.parent.clone() },
                cwd: r.cwd.clone(),
                preset: r.preset.clone(),
                title: r.title.clone(),
                created_at: c.created_at,
                is_caller: r.is_caller,
                messageable: !r.subagent && !r.is_caller,
                hint: send_hint(r, sel.allow_resume),
                same_repo: r.same_repo.is_some(),
                files_changed: r.files.clone(),
                overlap: r.overlap.clone(),
            }
        })
        .collect();
    Listing {
        ok: true,
        dsh_home: Some(home.display().to_string()),
        shown: Some(count(rows.len())),
        considered: Some(count(sel.considered)),
        rows: Some(rows),
        notes: Some(sel.notes.iter().map(store_note).collect()),
        ..Listing::default()
    }
}

/// Cut to `max` characters: (text, characters cut).
fn cut(body: &str, max: usize) -> (String, usize) {
    let total = body.chars().count();
    if total <= max {
        (body.to_string(), 0)
    } else {
        (body.chars().take(max).collect(), total - max)
    }
}

/// The numbers of the binding's data are JS numbers: counts `u32`, seqs `i64` (never a BigInt).
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn seq(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// One message of a read window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct ReadMessage {
    pub seq: i64,
    pub role: String,
    pub label: String,
    pub request: Option<String>,
    pub injected: bool,
    pub replaced: bool,
    pub error: bool,
    pub body: String,
    pub truncated_chars: u32,
}

/// Messages filtered out of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "napi", napi_derive::napi(object))]
pub struct HiddenCounts {
    pub injected: u32,
    pub system: u32,
}

/// The head of a read window (the tool's [`ReadHead`], as a row names it), plus the log it was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct ReadSession {
    pub id: String,
    pub liveness: RowLiveness,
    pub scope: RowScope,
    pub parent_session: Option<String>,
    pub fork_of: Option<String>,
    pub cwd: Option<String>,
    pub title: Option<String>,
    pub readable: u32,
    pub captured_through_seq: Option<i64>,
    /// The log file the window was read from (`null`: a live session with nothing on disk yet).
    pub log_path: Option<String>,
}

impl ReadSession {
    fn of(h: ReadHead, log_path: Option<String>) -> ReadSession {
        ReadSession {
            liveness: if h.live {
                RowLiveness::Live
            } else {
                RowLiveness::Cold
            },
            scope: RowScope::of(h.subagent),
            fork_of: h.parent.clone().filter(|_| !h.subagent),
            parent_session: h.parent,
            id: h.id,
            cwd: h.cwd,
            title: h.title,
            readable: count(h.readable),
            captured_through_seq: h.captured_through.map(seq),
            log_path,
        }
    }
}

/// `sessions_read` as data, or its refusal (`ok: false`, `code`, `text`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct ReadWindow {
    pub ok: bool,
    pub code: Option<RefusalCode>,
    pub text: Option<String>,
    pub session: Option<ReadSession>,
    pub messages: Option<Vec<ReadMessage>>,
    pub omitted: Option<u32>,
    pub hidden: Option<HiddenCounts>,
    pub notes: Option<Vec<String>>,
}

/// `sessions_read` as data: the tool's own result ([`read::read_result`]: the same window, classes,
/// markers and notes, live or not) through [`read_view`].
pub fn read_data(home: &Path, req: &ToolRequest) -> ReadWindow {
    match read::parse_args(&req.args, &req.config).and_then(|a| read::read_result(home, req, &a)) {
        Ok(r) => read_view(&r),
        Err(r) => ReadWindow {
            code: Some(r.code()),
            text: Some(r.render()),
            ..ReadWindow::default()
        },
    }
}

/// The CLI's `--json` printer of a read: the same [`read::ReadResult`] the tool's text
/// (`render::read`, the model's and the CLI's human text) prints, as data. Bodies are cut at
/// `maxMessageChars` (`truncatedChars` says how much; the text says `…[truncated N chars]`).
pub fn read_view(r: &read::ReadResult) -> ReadWindow {
    let w = &r.window;
    let max = r.max_chars.max(1);
    let messages = w
        .messages
        .iter()
        .map(|m| {
            let (body, truncated_chars) = cut(&m.body, max);
            ReadMessage {
                seq: seq(m.seq),
                role: m.role.to_string(),
                label: m.label.clone(),
                request: m.request.clone(),
                injected: m.injected,
                replaced: m.replaced,
                error: m.error,
                body,
                truncated_chars: count(truncated_chars),
            }
        })
        .collect();
    ReadWindow {
        ok: true,
        session: Some(ReadSession::of(w.head.clone(), r.log_path.clone())),
        messages: Some(messages),
        omitted: Some(count(w.omitted)),
        hidden: Some(HiddenCounts {
            injected: count(w.hidden.injected),
            system: count(w.hidden.system),
        }),
        notes: Some(w.notes.clone()),
        ..ReadWindow::default()
    }
}

/// The audit ledger as data for the CLI's `ledger` command, or why it could not be read (`ok: false`,
/// `error`). Only returned: its entries never come from JS.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, object_from_js = false, use_nullable = true)
)]
pub struct Ledger {
    pub ok: bool,
    pub error: Option<String>,
    pub path: Option<String>,
    /// Matching lines, oldest first.
    #[cfg_attr(feature = "napi", napi(ts_type = "Array<LedgerEntry>"))]
    pub entries: Option<Vec<crate::ledger::Entry>>,
    /// Files read.
    pub files: Option<u32>,
    /// Lines that were not a ledger entry.
    pub unreadable: Option<u32>,
    pub torn_tail: Option<bool>,
    /// The lines for people (`render::ledger`).
    pub text: Option<String>,
}

/// The audit ledger, or why it could not be read.
pub fn ledger_view(home: &Path, filter: &crate::ledger::Filter) -> Ledger {
    match crate::ledger::read_ledger(home, filter) {
        Ok(read) => Ledger {
            ok: true,
            path: Some(crate::ledger::path(home).display().to_string()),
            text: Some(crate::render::ledger::render(&read)),
            files: Some(count(read.files.len())),
            unreadable: Some(count(read.unreadable)),
            torn_tail: Some(read.torn_tail),
            entries: Some(read.entries),
            ..Ledger::default()
        },
        Err(why) => Ledger {
            error: Some(why.to_string()),
            ..Ledger::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use store::testgen::*;

    /// The data as the CLI's `--json` prints it.
    fn list_value(home: &Path, req: &ToolRequest) -> Value {
        serde_json::to_value(list_data(home, req)).unwrap()
    }

    fn read_value(home: &Path, req: &ToolRequest) -> Value {
        serde_json::to_value(read_data(home, req)).unwrap()
    }

    fn req(tool: &str, args: Value) -> ToolRequest {
        ToolRequest {
            tool: tool.into(),
            args,
            ..Default::default()
        }
    }

    /// The model's text, the CLI's human text and the CLI's `--json` are three printers of one typed
    /// result: `tools::run_result` gives the value, `ToolResult::render` is the model's text (the binding's
    /// `run` returns it as `ToolOutcome.text`, which the CLI prints as it is), [`listing`] / [`read_view`]
    /// print the same value as data, and the CLI's data calls are exactly those printers over the
    /// tool's own result (a session live in another process reads as live in both).
    #[tokio::test]
    async fn text_and_json_are_printers_of_one_typed_result() {
        use crate::tools::{self, ToolResult};
        let home = fixtures_root();
        let with_home = |mut r: ToolRequest| {
            r.host.dsh_home = Some(home.display().to_string());
            r
        };
        // list
        let lr = with_home(req("sessions_list", json!({"scope": "all"})));
        let sel = match tools::run_result(lr.clone()).await {
            ToolResult::List(s) => s,
            other => panic!("not a listing: {}", other.render()),
        };
        let text = ToolResult::List(sel.clone()).render();
        let data = listing(&home, &sel);
        assert_eq!(
            list_data(&home, &lr),
            data,
            "--json is listing() of the tool's result"
        );
        let rows = data.rows.unwrap();
        assert!(!rows.is_empty());
        let text_ids: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("- "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, text_ids, "the same rows in the same order");
        for (row, c) in rows.iter().zip(&sel.rows) {
            assert_eq!(row.id, c.row.id);
            assert_eq!(row.scope == RowScope::Subagent, c.row.subagent);
        }
        // read
        let rr = with_home(req(
            "sessions_read",
            json!({"session_id": MAIN, "max_messages": 3}),
        ));
        let r = match tools::run_result(rr.clone()).await {
            ToolResult::Read(r) => r,
            other => panic!("not a read: {}", other.render()),
        };
        let text = ToolResult::Read(r.clone()).render();
        let view = read_view(&r);
        assert_eq!(
            read_data(&home, &rr),
            view,
            "--json is read_view() of the tool's result"
        );
        let (session, messages) = (view.session.unwrap(), view.messages.unwrap());
        assert_eq!(messages.len(), r.window.messages.len());
        for (m, w) in messages.iter().zip(&r.window.messages) {
            assert_eq!((m.seq, m.role.as_str()), (w.seq as i64, w.role));
            assert!(text.contains(&format!("seq {},", m.seq)), "{text}");
        }
        assert!(text.contains(&format!(
            "readable messages: {} | captured through seq: {}\n",
            session.readable,
            session.captured_through_seq.unwrap()
        )));
        assert_eq!(session.log_path, r.log_path);
        assert!(session.log_path.is_some());
    }

    #[test]
    fn list_and_read_values_match_the_tool_text() {
        let home = fixtures_root();
        let v = list_value(&home, &req("sessions_list", json!({"scope":"all"})));
        assert_eq!(v["ok"], true);
        assert_eq!(v["considered"], 6);
        let ids: Vec<&str> = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        let text = list::select(
            &home,
            &req("sessions_list", json!({"scope":"all"})),
            &list::parse_args(&json!({"scope":"all"}), 50).unwrap(),
        )
        .render();
        let text_ids: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("- "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert_eq!(ids, text_ids);
        let sub = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == SUB)
            .unwrap();
        assert_eq!(sub["scope"], "subagent");
        assert_eq!(sub["parentSession"], MAIN);
        assert_eq!(sub["forkOf"], Value::Null);
        assert_eq!(sub["messageable"], false);
        let fork = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == FORK)
            .unwrap();
        assert_eq!(fork["forkOf"], MAIN);
        assert_eq!(fork["liveness"], "cold");

        let bad = list_value(&home, &req("sessions_list", json!({"limit":0})));
        assert_eq!(bad["ok"], false);
        assert_eq!(bad["code"], "bad-argument");
        assert!(bad["text"]
            .as_str()
            .unwrap()
            .starts_with("refused (bad-argument): "));
        assert_eq!(
            (&bad["dshHome"], &bad["rows"]),
            (&Value::Null, &Value::Null)
        );

        let r = read_value(
            &home,
            &req(
                "sessions_read",
                json!({"session_id": MAIN, "max_messages": 2}),
            ),
        );
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["session"]["id"], MAIN);
        assert_eq!(r["messages"].as_array().unwrap().len(), 2);
        let text = {
            let a = read::parse_args(
                &json!({"session_id": MAIN, "max_messages": 2}),
                &Default::default(),
            )
            .unwrap();
            match read::read_result(&home, &req("sessions_read", Value::Null), &a) {
                Ok(r) => r.render(),
                Err(r) => r.render(),
            }
        };
        let first_seq = r["messages"][0]["seq"].as_u64().unwrap();
        assert!(text.contains(&format!("seq {first_seq},")), "{text}");
        // the data's head is the text's head: its readable count and captured-through seq are the header's
        let s = &r["session"];
        assert!(
            text.contains(&format!(
                "readable messages: {} | captured through seq: {}\n",
                s["readable"], s["capturedThroughSeq"]
            )),
            "{s} vs {text}"
        );
        let log = s["logPath"].as_str().unwrap();
        assert!(log.ends_with(".jsonl") || log.ends_with(".zstd"), "{log}");
        assert_eq!(
            (s["liveness"].as_str(), s["scope"].as_str()),
            (Some("cold"), Some("top-level"))
        );
        let missing = read_value(
            &home,
            &req("sessions_read", json!({"session_id": "session-nope"})),
        );
        assert_eq!(missing["code"], "not-found");
        assert!(missing["text"]
            .as_str()
            .unwrap()
            .starts_with("refused (not-found): no session with id"));
    }

    #[tokio::test]
    async fn send_outcomes_come_from_the_typed_result() {
        use crate::outcome::RefusalCode;
        use crate::tools::{self, ToolResult};
        let send = |r: ToolRequest| async move {
            match tools::run_result(r).await {
                ToolResult::Send(s) => s,
                other => panic!("not a send: {}", other.render()),
            }
        };
        let home = tempfile::tempdir().unwrap();
        let mut r = req(
            "send_session_message",
            json!({"toSessionId": "session-x", "message": "hi"}),
        );
        r.host.dsh_home = Some(home.path().display().to_string());
        r.caller = Some(crate::request::Caller {
            session_id: Some("session-me".into()),
            agent_id: None,
            title: None,
            turn: None,
        });
        // No web server: refused before any id is minted.
        let v = send(r.clone()).await;
        assert!(!v.accepted());
        assert_eq!(v.code(), Some(RefusalCode::NoWebServer));
        assert_eq!(v.request_id(), None);
        assert!(v.render().starts_with("refused (no-web-server): "));
        // A host that is down: unreachable, with the minted request id.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        r.host.base_url = Some(format!(
            "http://127.0.0.1:{}",
            l.local_addr().unwrap().port()
        ));
        drop(l);
        r.config.host_api = "rc8".into();
        r.live = vec![crate::request::LiveSession {
            id: "session-x".into(),
            status: "idle".into(),
            header: json!({}),
            pending_rpc_ids: vec![],
            pending_next_turn: 0,
            pending_next_turn_rpc_ids: vec![],
            files: vec![],
        }];
        let v = send(r).await;
        assert_eq!(v.code(), Some(RefusalCode::Unreachable), "{}", v.render());
        assert!(!v.may_have_landed());
        let rid = v.request_id().unwrap();
        assert!(rid.starts_with("dsh-session-mail:"));
        assert!(v.render().ends_with(&format!("request: {rid}")));
        // Not a send tool at all.
        let v = tools::run_result(req("nope", json!({}))).await;
        assert_eq!(v.code(), Some(RefusalCode::UnknownTool));
    }
}
