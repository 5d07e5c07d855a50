//! What the `dsh-session-mail` command line needs from the core, as plain Rust returning JSON values:
//! the store's listing and window as data (`--json`), the host's project key and the default sender,
//! a request id's fate (`verify`), the send outcome as data, the cordis patch layers' verdict on our
//! row, and the browser-session cookie probe (`doctor`). The CLI has no live registry: every session
//! it sees comes from the store, so rows are `cold` unless a caller passes `live`.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use serde_yaml::Value as Yaml;

use crate::delivery::http::{loopback_base, post_json, Timeouts, TransportError};
use crate::delivery::{cookie, credentials};
use crate::render::list::{send_hint, Liveness};
use crate::request::ToolRequest;
use crate::store::{self, layout, Lookup};
use crate::tools::{self, list, read};

// ---------------------------------------------------------------------------------------------------
// project key and the default sender

/// The host's directory key for a project path: separator runs (`/`, `\`, `:`) become one `-`,
/// `[A-Za-z0-9._-]` stay, every other UTF-16 unit (and `~`) becomes `~XXXX`, leading dashes are
/// stripped (`root` when nothing is left), and the slug is cut to 251 units and wrapped as `--…--`.
/// `None` for an empty path (the host throws). [R8/Z17 `session-persistence-jsonl/src/format.ts` `projectKey`]
pub fn project_key(cwd: &str) -> Option<String> {
    if cwd.is_empty() {
        return None;
    }
    let mut readable = String::new();
    let mut separator_run = false;
    for unit in cwd.encode_utf16() {
        let ch = char::from_u32(u32::from(unit)).filter(|_| unit < 0x80);
        match ch {
            Some('/') | Some('\\') | Some(':') => {
                if !separator_run {
                    readable.push('-');
                }
                separator_run = true;
            }
            Some(c) if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') => {
                readable.push(c);
                separator_run = false;
            }
            _ => {
                readable.push_str(&format!("~{unit:04X}"));
                separator_run = false;
            }
        }
    }
    let trimmed = readable.trim_start_matches('-');
    let slug = if trimmed.is_empty() { "root" } else { trimmed };
    // Every unit of the slug is ASCII here, so 251 units are 251 bytes.
    let cut = &slug[..slug.len().min(251)];
    Some(format!("--{cut}--"))
}

/// The session a CLI send is signed as when no `--from` is given.
#[derive(Debug, Clone, PartialEq)]
pub struct Sender {
    pub id: String,
    pub log_path: PathBuf,
    pub modified_ms: u64,
}

fn mtime_ms(p: &Path) -> Option<u64> {
    let m = std::fs::metadata(p).ok()?.modified().ok()?;
    Some(m.duration_since(UNIX_EPOCH).ok()?.as_millis() as u64)
}

/// The most recently modified top-level session of the project `cwd` belongs to, as the host names
/// it: `$DSH_HOME/sessions/<projectKey(cwd)>/<session>/<newest generation>`, by the log's mtime.
/// Subagent sessions are skipped (a reply to one could not be delivered). `Err` says why none.
pub fn default_sender(home: &Path, cwd: &str) -> Result<Sender, String> {
    let key = project_key(cwd).ok_or_else(|| "the current directory is empty".to_string())?;
    let dir = home.join("sessions").join(&key);
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        format!(
            "no sessions for this directory's project ({}: {})",
            dir.display(),
            layout::short_io(&e)
        )
    })?;
    let mut logs: Vec<(u64, layout::LogFile)> = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        if let Ok(Some(log)) = layout::pick_generation(&p) {
            logs.push((mtime_ms(&log.path).unwrap_or(0), log));
        }
    }
    logs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.path.cmp(&b.1.path)));
    for (modified_ms, log) in logs {
        let Ok(fold) = store::index::load_log(&log) else {
            continue;
        };
        let Some(h) = fold.header.as_ref() else {
            continue;
        };
        if h.origin.as_deref() == Some("subagent") || h.id.is_empty() {
            continue;
        }
        return Ok(Sender {
            id: h.id.clone(),
            log_path: log.path.clone(),
            modified_ms,
        });
    }
    Err(format!(
        "no readable top-level session in this directory's project ({})",
        dir.display()
    ))
}

// ---------------------------------------------------------------------------------------------------
// list / read as data

fn refusal_code(text: &str) -> String {
    text.strip_prefix("refused (")
        .and_then(|r| r.split(')').next())
        .unwrap_or("internal")
        .to_string()
}

fn failure(text: String) -> Value {
    json!({ "ok": false, "code": refusal_code(&text), "text": text })
}

/// `sessions_list` as data: the same rows, order, filters and limit as the tool's text.
pub fn list_value(home: &Path, req: &ToolRequest) -> Value {
    let args = match list::parse_args(&req.args, req.config.max_list_results) {
        Ok(a) => a,
        Err(text) => return failure(text),
    };
    let sel = list::select(home, req, &args);
    let rows: Vec<Value> = sel
        .rows
        .iter()
        .map(|c| {
            let r = &c.row;
            let (liveness, status) = match &r.liveness {
                Liveness::Cold => ("cold", Value::Null),
                Liveness::Live(s) => ("live", json!(s)),
            };
            json!({
                "id": r.id,
                "liveness": liveness,
                "status": status,
                "scope": if r.subagent { "subagent" } else { "top-level" },
                "parentSession": r.parent,
                "forkOf": if r.subagent { None } else { r.parent.clone() },
                "cwd": r.cwd,
                "preset": r.preset,
                "title": r.title,
                "createdAt": c.created_at,
                "isCaller": r.is_caller,
                "messageable": !r.subagent && !r.is_caller,
                "hint": send_hint(r, req.config.allow_resume),
            })
        })
        .collect();
    json!({
        "ok": true,
        "dshHome": home.display().to_string(),
        "shown": rows.len(),
        "considered": sel.considered,
        "rows": rows,
        "notes": sel.notes,
    })
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

/// `sessions_read` of a session on disk as data: the same window, classes and markers as the tool.
/// Bodies are cut at `maxMessageChars` (`truncatedChars` says how much).
pub fn read_value(home: &Path, req: &ToolRequest) -> Value {
    let a = match read::parse_args(&req.args, &req.config) {
        Ok(a) => a,
        Err(text) => return failure(text),
    };
    let s = match store::load_session(home, &a.session_id) {
        Lookup::Found(s) => s,
        // The refusal texts are the tool's own (the lookup is repeated only on this path).
        _ => return failure(read::read_blocking(home, req, &a)),
    };
    let head = s.fold.header.clone().unwrap_or_default();
    let src = store::log::Source::File {
        path: &s.log.path,
        enc: s.log.enc,
    };
    let w = read::window(&head, false, &s.fold, &src, &a, Vec::new());
    let max = req.config.max_message_chars.max(1);
    let messages: Vec<Value> = w
        .messages
        .iter()
        .map(|m| {
            let (body, truncated) = cut(&m.body, max);
            json!({
                "seq": m.seq,
                "role": m.role,
                "label": m.label,
                "request": m.request,
                "injected": m.injected,
                "replaced": m.replaced,
                "error": m.error,
                "body": body,
                "truncatedChars": truncated,
            })
        })
        .collect();
    let h = &w.head;
    json!({
        "ok": true,
        "session": {
            "id": h.id,
            "liveness": if h.live { "live" } else { "cold" },
            "scope": if h.subagent { "subagent" } else { "top-level" },
            "parentSession": h.parent,
            "forkOf": if h.subagent { None } else { h.parent.clone() },
            "cwd": h.cwd,
            "title": h.title,
            "readable": h.readable,
            "capturedThroughSeq": h.captured_through,
            "logPath": s.log.path.display().to_string(),
        },
        "messages": messages,
        "omitted": w.omitted,
        "hidden": { "injected": w.hidden.injected, "system": w.hidden.system },
        "notes": w.notes,
    })
}

// ---------------------------------------------------------------------------------------------------
// verify

/// What the store says about one request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Landed as a `user/message` at this seq (turn if known).
    Landed {
        seq: u64,
        turn: Option<u64>,
    },
    /// Inserted into the inbox (`next-turn` or `next-step`) at this seq, not landed yet.
    Queued {
        seq: u64,
        target: String,
    },
    /// Inserted, then removed with `outcome: canceled` before landing.
    Canceled {
        seq: u64,
        target: String,
    },
    Unknown,
}

/// Where a request id was looked for and what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    pub fate: Fate,
    /// The session whose log holds it (or the one named).
    pub session_id: Option<String>,
    /// Session logs searched.
    pub searched: usize,
    /// The named session does not exist / cannot be read.
    pub session_missing: bool,
}

fn fate_of(t: &store::RequestTrace) -> Fate {
    if let Some((seq, turn)) = t.landed {
        return Fate::Landed { seq, turn };
    }
    match (&t.queued, t.canceled) {
        (Some((seq, target)), true) => Fate::Canceled {
            seq: *seq,
            target: target.clone(),
        },
        (Some((seq, target)), false) => Fate::Queued {
            seq: *seq,
            target: target.clone(),
        },
        (None, _) => Fate::Unknown,
    }
}

fn rank(f: &Fate) -> u8 {
    match f {
        Fate::Landed { .. } => 3,
        Fate::Queued { .. } => 2,
        Fate::Canceled { .. } => 1,
        Fate::Unknown => 0,
    }
}

/// Look a request id up: in `session` when given, else in every session's log (the folds keep
/// every request id, so a warm scan is cheap).
pub fn verify(home: &Path, request_id: &str, session: Option<&str>) -> Verification {
    // Without a session, the audit ledger knows the target of every request id this plugin minted.
    let from_ledger = if session.is_none() {
        let filter = crate::ledger::Filter {
            request_id: Some(request_id.to_string()),
            ..Default::default()
        };
        crate::ledger::read_ledger(home, &filter)
            .ok()
            .and_then(|r| r.entries.into_iter().rev().find_map(|e| e.target))
    } else {
        None
    };
    if let Some(id) = session.or(from_ledger.as_deref()) {
        return match store::load_session(home, id) {
            Lookup::Found(s) => Verification {
                fate: s
                    .fold
                    .requests
                    .get(request_id)
                    .map(fate_of)
                    .unwrap_or(Fate::Unknown),
                session_id: Some(id.to_string()),
                searched: 1,
                session_missing: false,
            },
            _ => Verification {
                fate: Fate::Unknown,
                session_id: Some(id.to_string()),
                searched: 0,
                session_missing: true,
            },
        };
    }
    let listing = store::list_sessions(home);
    let mut best = Verification {
        fate: Fate::Unknown,
        session_id: None,
        searched: listing.sessions.len(),
        session_missing: false,
    };
    for s in &listing.sessions {
        if let Some(t) = s.fold.requests.get(request_id) {
            let f = fate_of(t);
            if rank(&f) > rank(&best.fate) {
                best.fate = f;
                best.session_id = Some(s.meta.id.clone());
            }
        }
    }
    best
}

pub fn verification_value(v: &Verification, request_id: &str) -> Value {
    let mut o = Map::new();
    o.insert("requestId".into(), json!(request_id));
    o.insert("sessionId".into(), json!(v.session_id));
    o.insert("searched".into(), json!(v.searched));
    o.insert("sessionMissing".into(), json!(v.session_missing));
    match &v.fate {
        Fate::Landed { seq, turn } => {
            o.insert("state".into(), json!("landed"));
            o.insert("seq".into(), json!(seq));
            o.insert("turn".into(), json!(turn));
        }
        Fate::Queued { seq, target } | Fate::Canceled { seq, target } => {
            o.insert(
                "state".into(),
                json!(if matches!(v.fate, Fate::Queued { .. }) {
                    "queued"
                } else {
                    "canceled"
                }),
            );
            o.insert("seq".into(), json!(seq));
            o.insert("target".into(), json!(target));
        }
        Fate::Unknown => {
            o.insert("state".into(), json!("unknown"));
        }
    }
    Value::Object(o)
}

// ---------------------------------------------------------------------------------------------------
// send as data

/// Run `sessions_send` / `send_session_message` and describe the outcome for a program: the tool's
/// text plus `accepted`, the refusal `code`, `mayHaveLanded` and the `requestId` (when one was minted).
pub async fn send_value(req: ToolRequest) -> Value {
    let text = tools::run(req).await;
    send_outcome(&text)
}

/// Classify a send tool's text (docs/architecture.md "sessions_send / send_session_message — output").
pub fn send_outcome(text: &str) -> Value {
    let accepted = text.starts_with("accepted for ");
    let code = if accepted {
        None
    } else {
        Some(refusal_code(text))
    };
    let may_have_landed = !accepted && text.contains("MAY have landed");
    let request_id = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("request: "))
        .map(str::to_string);
    json!({
        "accepted": accepted,
        "code": code,
        "mayHaveLanded": may_have_landed,
        "requestId": request_id,
        "text": text,
    })
}

// ---------------------------------------------------------------------------------------------------
// doctor: the patch layers' verdict on our row

/// One cordis patch layer, in the host's order (bundle patches, profile, home).
#[derive(Debug, Clone)]
pub struct Layer {
    pub label: String,
    /// The file's text; `None` when the file does not exist (an absent layer is fine).
    pub text: Option<String>,
}

fn yaml_str<'a>(m: &'a serde_yaml::Mapping, key: &str) -> Option<&'a str> {
    m.get(Yaml::String(key.into())).and_then(Yaml::as_str)
}

/// Apply the layers to one row the way the include loader does: an `insert` row with that id
/// creates it; a later non-insert entry `{id, name?, …}` replaces each key it names (a `name` that
/// differs skips the entry). Reports whether the row exists, its final `disabled`, the plugin
/// config's `enabled`, and which layer decided them. [shared plugin-contract.md §1.2, §3;
/// `@deepseek-ai/cordis-plugin-include` `applyEntryPatches`]
pub fn row_state(layers: &[Layer], row_id: &str, module: &str) -> Value {
    let mut inserted_by: Option<String> = None;
    let mut disabled = false;
    let mut disabled_by: Option<String> = None;
    let mut config: Option<Yaml> = None;
    let mut config_by: Option<String> = None;
    let mut errors: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for layer in layers {
        let Some(text) = &layer.text else { continue };
        let doc: Yaml = match serde_yaml::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                errors.push(format!("{}: not valid YAML ({e})", layer.label));
                continue;
            }
        };
        let entries = match doc {
            Yaml::Null => continue,
            Yaml::Sequence(s) => s,
            _ => {
                errors.push(format!(
                    "{}: must be a top-level YAML array of patch entries",
                    layer.label
                ));
                continue;
            }
        };
        for entry in entries {
            let Yaml::Mapping(m) = entry else {
                errors.push(format!("{}: an entry is not a mapping", layer.label));
                continue;
            };
            if let Some(Yaml::Sequence(rows)) = m.get(Yaml::String("insert".into())) {
                for row in rows {
                    let Yaml::Mapping(r) = row else { continue };
                    if yaml_str(r, "id") == Some(row_id) {
                        inserted_by = Some(layer.label.clone());
                        disabled = matches!(
                            r.get(Yaml::String("disabled".into())),
                            Some(Yaml::Bool(true))
                        );
                        disabled_by = disabled.then(|| layer.label.clone());
                        config = r.get(Yaml::String("config".into())).cloned();
                        config_by = config.as_ref().map(|_| layer.label.clone());
                    }
                }
                continue;
            }
            if yaml_str(&m, "id") != Some(row_id) {
                continue;
            }
            if let Some(name) = yaml_str(&m, "name") {
                if name != module {
                    notes.push(format!("{}: an override for {row_id} names {name:?}, not {module:?}; the host skips it", layer.label));
                    continue;
                }
            }
            if let Some(d) = m.get(Yaml::String("disabled".into())) {
                disabled = matches!(d, Yaml::Bool(true));
                disabled_by = Some(layer.label.clone());
            }
            if let Some(c) = m.get(Yaml::String("config".into())) {
                config = Some(c.clone());
                config_by = Some(layer.label.clone());
            }
        }
    }
    let config_enabled = match &config {
        Some(Yaml::Mapping(c)) => match c.get(Yaml::String("enabled".into())) {
            Some(Yaml::Bool(b)) => Some(*b),
            _ => None,
        },
        _ => None,
    };
    json!({
        "inserted": inserted_by.is_some(),
        "insertedBy": inserted_by,
        "disabled": disabled,
        "disabledBy": disabled_by,
        "configEnabled": config_enabled,
        "configBy": config_by,
        "errors": errors,
        "notes": notes,
    })
}

// ---------------------------------------------------------------------------------------------------
// doctor: is our cookie accepted?

/// A harmless authenticated call: POST `/api/host/describe` with the browser-session cookie minted
/// from the host's secret. The host checks the cookie before it looks the endpoint up [Z17
/// `rpc-host.ts` `requestRejection`], so any answer but 401 means the cookie passed (a 404 only says
/// the endpoint is unknown). `state`: `ok`, `rejected` (401), `forbidden` (403), `no-secret`,
/// `unreachable`, `bad-url`. The secret is never part of the answer.
pub async fn auth_probe(base_url: &str, home: &Path, secret: Option<&str>, t: Timeouts) -> Value {
    let base = match loopback_base(base_url) {
        Ok(b) => b,
        Err(why) => return json!({ "state": "bad-url", "detail": why }),
    };
    let s = match credentials::load(secret, home) {
        Ok(s) => s,
        Err(why) => return json!({ "state": "no-secret", "detail": why }),
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let c = cookie::cookie_header(&s, &base.authority, now);
    let body = json!({
        "type": "client-request",
        "rpcId": uuid::Uuid::new_v4().to_string(),
        "method": "host/describe",
        "payload": { "args": {} },
    })
    .to_string();
    match post_json(&base, "/api/host/describe", body, Some(&c), t, 256 * 1024).await {
        Ok(r) if r.status == 401 => json!({ "state": "rejected", "status": 401 }),
        Ok(r) if r.status == 403 => {
            json!({ "state": "forbidden", "status": 403, "detail": r.body.chars().take(200).collect::<String>() })
        }
        Ok(r) => json!({ "state": "ok", "status": r.status }),
        Err(TransportError::NotSent(why)) | Err(TransportError::Ambiguous(why)) => {
            json!({ "state": "unreachable", "detail": why })
        }
        Err(TransportError::ConnectTimeout) => {
            json!({ "state": "unreachable", "detail": "connect timeout" })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testgen::*;

    #[test]
    fn project_key_follows_the_host() {
        // Expected values computed with the host's own function (rc.8 format.ts `projectKey`).
        assert_eq!(project_key("/home/ana/proj").unwrap(), "--home-ana-proj--");
        assert_eq!(project_key("/").unwrap(), "--root--");
        assert_eq!(project_key("C:\\Users\\x").unwrap(), "--C-Users-x--");
        assert_eq!(project_key("/a//b:/c").unwrap(), "--a-b-c--");
        assert_eq!(project_key("/a b/~x").unwrap(), "--a~0020b-~007Ex--");
        assert_eq!(project_key("/é/😀").unwrap(), "--~00E9-~D83D~DE00--");
        assert_eq!(project_key("---x").unwrap(), "--x--");
        assert_eq!(project_key("rel/dir.v2_x-y").unwrap(), "--rel-dir.v2_x-y--");
        assert_eq!(project_key(""), None);
        let long = format!("/{}", "a".repeat(300));
        assert_eq!(
            project_key(&long).unwrap(),
            format!("--{}--", "a".repeat(251))
        );
        // A cut never splits an escape mid-way in a way that breaks UTF-8 (all ASCII).
        let esc = format!("/{}", "é".repeat(100));
        assert_eq!(project_key(&esc).unwrap().len(), 255);
    }

    fn write_session(home: &Path, cwd: &str, id: &str, extra: &str) -> PathBuf {
        let dir = home
            .join("sessions")
            .join(project_key(cwd).unwrap())
            .join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("session.jsonl");
        std::fs::write(&p, format!("{{\"type\":\"session\",\"version\":0,\"id\":\"{id}\",\"createdAt\":1,\"cwd\":\"{cwd}\"{extra}}}\n")).unwrap();
        p
    }

    fn set_mtime(p: &Path, secs: u64) {
        let f = std::fs::File::options().append(true).open(p).unwrap();
        f.set_modified(UNIX_EPOCH + std::time::Duration::from_secs(secs))
            .unwrap();
    }

    #[test]
    fn default_sender_is_the_newest_top_level_session_of_the_project() {
        let home = tempfile::tempdir().unwrap();
        let a = write_session(home.path(), "/w/p", "session-a", "");
        let b = write_session(home.path(), "/w/p", "session-b", "");
        let sub = write_session(
            home.path(),
            "/w/p",
            "session-sub",
            ",\"origin\":\"subagent\",\"parentSession\":\"session-a\"",
        );
        let other = write_session(home.path(), "/w/q", "session-q", "");
        set_mtime(&a, 1_000);
        set_mtime(&b, 2_000);
        set_mtime(&sub, 3_000);
        set_mtime(&other, 4_000);
        let s = default_sender(home.path(), "/w/p").unwrap();
        assert_eq!(s.id, "session-b");
        assert_eq!(s.modified_ms, 2_000_000);
        set_mtime(&a, 5_000);
        assert_eq!(default_sender(home.path(), "/w/p").unwrap().id, "session-a");
        let e = default_sender(home.path(), "/w/none").unwrap_err();
        assert!(
            e.contains("no sessions for this directory's project"),
            "{e}"
        );
    }

    fn req(tool: &str, args: Value) -> ToolRequest {
        ToolRequest {
            tool: tool.into(),
            args,
            ..Default::default()
        }
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
        let text = list::list_blocking(
            &home,
            &req("sessions_list", json!({"scope":"all"})),
            &list::parse_args(&json!({"scope":"all"}), 50).unwrap(),
        );
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
            read::read_blocking(&home, &req("sessions_read", Value::Null), &a)
        };
        let first_seq = r["messages"][0]["seq"].as_u64().unwrap();
        assert!(text.contains(&format!("seq {first_seq},")), "{text}");
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

    #[test]
    fn verify_finds_requests_by_session_or_by_scan() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("sessions").join("--w--").join("session-t");
        std::fs::create_dir_all(&dir).unwrap();
        let rid = "dsh-session-mail:11111111-2222-3333-4444-555555555555";
        let msg = json!({"id":"m1","role":"user","content":[{"type":"text","text":"From session-s ：\nhi"}],"source":{"kind":"user","rpcId":rid}});
        let lines = [
            json!({"type":"session","version":0,"id":"session-t","createdAt":1,"cwd":"/w"}),
            json!({"type":"agent/inbox/spliced","seq":0,"time":1,"data":{"target":"next-turn","start":0,"inserted":[msg]}}),
        ];
        let log = dir.join("session.jsonl");
        std::fs::write(
            &log,
            lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
        let v = verify(home.path(), rid, None);
        assert_eq!(
            v.fate,
            Fate::Queued {
                seq: 0,
                target: "next-turn".into()
            }
        );
        assert_eq!(v.session_id.as_deref(), Some("session-t"));
        let more = [
            json!({"type":"turn/start","seq":1,"time":2,"data":{"turn":3}}),
            json!({"type":"agent/inbox/spliced","seq":2,"time":2,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}),
            json!({"type":"user/message","seq":3,"time":2,"data":msg,"surfaceOp":"append"}),
        ];
        let mut text = std::fs::read_to_string(&log).unwrap();
        text.push_str(&more.iter().map(|l| format!("{l}\n")).collect::<String>());
        std::fs::write(&log, text).unwrap();
        let v = verify(home.path(), rid, Some("session-t"));
        assert_eq!(
            v.fate,
            Fate::Landed {
                seq: 3,
                turn: Some(3)
            },
            "{v:?}"
        );
        let val = verification_value(&v, rid);
        assert_eq!(val["state"], "landed");
        assert_eq!(val["turn"], 3);
        assert_eq!(
            verify(home.path(), "dsh-session-mail:nope", None).fate,
            Fate::Unknown
        );
        let gone = verify(home.path(), rid, Some("session-gone"));
        assert!(gone.session_missing);
    }

    #[test]
    fn send_outcomes_are_classified() {
        let ok = send_outcome("accepted for session-x | mode=queue | chars=2\nThe message is queued.\nrequest: dsh-session-mail:abc");
        assert_eq!(ok["accepted"], true);
        assert_eq!(ok["code"], Value::Null);
        assert_eq!(ok["requestId"], "dsh-session-mail:abc");
        let may = send_outcome("refused (unreachable): the message MAY have landed in session-x: reset.\nrequest: dsh-session-mail:q");
        assert_eq!(may["code"], "unreachable");
        assert_eq!(may["mayHaveLanded"], true);
        let nf = send_outcome("refused (not-found): no session with id \"x\".");
        assert_eq!(nf["code"], "not-found");
        assert_eq!(nf["requestId"], Value::Null);
    }

    fn layer(label: &str, text: Option<&str>) -> Layer {
        Layer {
            label: label.into(),
            text: text.map(str::to_string),
        }
    }

    #[test]
    fn row_state_applies_the_layers_in_order() {
        let bundle = layer(
            "bundle",
            Some("# c\n- insert:\n    - id: dsh-session-mail\n      name: dsh-session-mail\n"),
        );
        let s = row_state(
            &[
                bundle.clone(),
                layer("profile", Some("[]\n")),
                layer("home", None),
            ],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(
            (s["inserted"].as_bool(), s["disabled"].as_bool()),
            (Some(true), Some(false))
        );
        let off = layer(
            "profile",
            Some("- id: other\n  disabled: true\n- id: dsh-session-mail\n  disabled: true\n"),
        );
        let s = row_state(
            &[bundle.clone(), off.clone()],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(s["disabled"], true);
        assert_eq!(s["disabledBy"], "profile");
        // the home layer comes last and wins
        let on = layer("home", Some("- id: dsh-session-mail\n  disabled: false\n"));
        let s = row_state(
            &[bundle.clone(), off.clone(), on],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(s["disabled"], false);
        // a name mismatch is skipped by the host
        let other_name = layer(
            "profile",
            Some("- id: dsh-session-mail\n  name: something-else\n  disabled: true\n"),
        );
        let s = row_state(
            &[bundle.clone(), other_name],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(s["disabled"], false);
        assert_eq!(s["notes"].as_array().unwrap().len(), 1);
        // `disabled: yes` is a string in the host's JSON schema, not true
        let yes = layer("profile", Some("- id: dsh-session-mail\n  disabled: yes\n"));
        assert_eq!(
            row_state(
                &[bundle.clone(), yes],
                "dsh-session-mail",
                "dsh-session-mail"
            )["disabled"],
            false
        );
        // config replaced wholesale; enabled: false switches the plugin off
        let cfg = layer(
            "profile",
            Some("- id: dsh-session-mail\n  config: { enabled: false }\n"),
        );
        let s = row_state(
            &[bundle.clone(), cfg],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(s["configEnabled"], false);
        // broken layers are reported
        let bad = layer("profile", Some("id: x\n"));
        let s = row_state(
            &[bundle, bad, layer("home", Some("- [\n"))],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(s["errors"].as_array().unwrap().len(), 2, "{s}");
        let none = row_state(
            &[layer("profile", Some("[]"))],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(none["inserted"], false);
    }

    #[tokio::test]
    async fn auth_probe_states() {
        use crate::delivery::testserver::{serve, Act, Recorded};
        let home = tempfile::tempdir().unwrap();
        let t = Timeouts::from_ms(500, 1000);
        let secret = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc";
        let (base, log) = serve(|_, r: &Recorded| {
            let has_cookie = r
                .headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("cookie"));
            if has_cookie {
                Act::Reply(404, "not found".into())
            } else {
                Act::Reply(401, "unauthorized".into())
            }
        })
        .await;
        let v = auth_probe(&base, home.path(), Some(secret), t).await;
        assert_eq!(v["state"], "ok", "{v}");
        assert_eq!(v["status"], 404);
        assert!(!v.to_string().contains(secret));
        assert_eq!(log.lock().unwrap()[0].path, "/api/host/describe");
        let v = auth_probe(&base, home.path(), None, t).await;
        assert_eq!(v["state"], "no-secret", "{v}");
        let (base401, _) = serve(|_, _: &Recorded| Act::Reply(401, "unauthorized".into())).await;
        assert_eq!(
            auth_probe(&base401, home.path(), Some(secret), t).await["state"],
            "rejected"
        );
        assert_eq!(
            auth_probe("http://example.com:1", home.path(), Some(secret), t).await["state"],
            "bad-url"
        );
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = format!("http://127.0.0.1:{}", l.local_addr().unwrap().port());
        drop(l);
        assert_eq!(
            auth_probe(&dead, home.path(), Some(secret), t).await["state"],
            "unreachable"
        );
    }
}

/// The audit ledger as JSON data for the CLI's `ledger` command: `{entries, files, unreadable, tornTail, text}`.
pub fn ledger_value(home: &Path, filter: &crate::ledger::Filter) -> Value {
    match crate::ledger::read_ledger(home, filter) {
        Ok(read) => json!({
            "ok": true,
            "path": crate::ledger::path(home).display().to_string(),
            "entries": read.entries,
            "files": read.files.len(),
            "unreadable": read.unreadable,
            "tornTail": read.torn_tail,
            "text": crate::ledger::render(&read),
        }),
        Err(why) => json!({ "ok": false, "error": why }),
    }
}
