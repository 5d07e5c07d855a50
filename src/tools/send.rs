//! `sessions_send` (seed 000) and `send_session_message` (seed 003): validate → guards → resolve → build the
//! text → deliver → receipt. Every outcome is text; nothing here panics on outside data.
//!
//! Order of checks (each refusal leaves the target untouched; the first that applies wins):
//! 1. arguments (`bad-argument`: wrong type, missing, unknown name, non-boolean `urgent`, bad `mode`,
//!    control characters in an id);
//! 2. the caller (`no-caller`) — the sender is the runtime's id, never an argument;
//! 3. a web server to deliver through (`no-web-server`);
//! 4. the target is the caller (`self-send`);
//! 5. the body: `empty-body`, `too-long` (`maxSendChars`), `forged-header`;
//! 6. `resume-disabled`: a target not live in `req.live` while `allowResume` is false — decided before the
//!    target is resolved, so not even its log is opened (seed 000 ordering guarantee 1);
//! 7. resolve: live registry, else the session store (`not-found`);
//! 8. `not-messageable` (subagent) — before anything is sent (seed 000 ordering guarantee 2);
//! 9. deliver (`rejected`, `unreachable`, `auth-failed`, `forbidden`) or the receipt.
//!
//! Both tools apply the same guards; `allowResume` and `maxSendChars` govern both.

use serde_json::{Map, Value};

use crate::config::Config;
use crate::delivery::{self, http::Timeouts, Delivery, Mode, Outcome};
use crate::mail::{self, guard};
use crate::render::send::{self as text, describe_got, FailureContext, Problem, Receipt, SendTool};
use crate::request::{LiveSession, ToolRequest};
use crate::store;

/// Longest id accepted (ids are compared exactly; this only stops absurd input).
const MAX_ID_CHARS: usize = 512;

/// Validated arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendArgs {
    pub target: String,
    pub message: String,
    pub mode: Mode,
}

impl SendTool {
    fn from_name(name: &str) -> SendTool {
        if name == "sessions_send" {
            SendTool::SessionsSend
        } else {
            SendTool::SendSessionMessage
        }
    }
    fn name(self) -> &'static str {
        match self {
            SendTool::SessionsSend => "sessions_send",
            SendTool::SendSessionMessage => "send_session_message",
        }
    }
    fn target_arg(self) -> &'static str {
        match self {
            SendTool::SessionsSend => "session_id",
            SendTool::SendSessionMessage => "toSessionId",
        }
    }
    fn known(self) -> &'static [&'static str] {
        match self {
            SendTool::SessionsSend => &["session_id", "message", "mode"],
            SendTool::SendSessionMessage => &["toSessionId", "message", "urgent"],
        }
    }
    fn usage(self) -> &'static str {
        match self {
            SendTool::SessionsSend => r#"sessions_send {"session_id": "<id from sessions_list>", "message": "<text>", "mode": "queue" | "steer" (optional)}"#,
            SendTool::SendSessionMessage => r#"send_session_message {"toSessionId": "<session id>", "message": "<text>", "urgent": false | true (optional)}"#,
        }
    }
}

fn squash(s: &str) -> String {
    s.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// A hint for an unknown argument name.
fn unknown_hint(tool: SendTool, name: &str) -> Option<String> {
    let n = squash(name);
    for k in tool.known() {
        if squash(k) == n {
            return Some(format!("Did you mean {k}?"));
        }
    }
    let target = tool.target_arg();
    match n.as_str() {
        "to" | "target" | "targetid" | "sessionid" | "tosessionid" | "session" | "targetsessionid" | "id" => {
            Some(format!("The target goes in {target}."))
        }
        "body" | "text" | "content" | "msg" => Some("The text goes in message.".into()),
        "urgent" if tool == SendTool::SessionsSend => Some(r#"sessions_send takes mode: "steer" instead of urgent: true."#.into()),
        "mode" if tool == SendTool::SendSessionMessage => {
            Some(r#"send_session_message takes urgent: true instead of mode: "steer"."#.into())
        }
        "from" | "sender" | "fromsessionid" => Some("The sender is always your own session; it cannot be set.".into()),
        _ => None,
    }
}

fn id_problem(name: &str, v: Option<&Value>) -> Option<Problem> {
    let expected = "a session id string (exactly as sessions_list shows it)";
    let p = |got: String, hint: Option<&str>| {
        Some(Problem { name: name.into(), expected: expected.into(), got, hint: hint.map(str::to_string) })
    };
    match v {
        Some(Value::String(s)) => {
            if s.is_empty() {
                p("an empty string".into(), None)
            } else if let Some((i, c)) = s.chars().enumerate().find(|(_, c)| c.is_control()) {
                p(
                    format!("{} with the control character U+{:04X} at position {}", describe_got(v), c as u32, i + 1),
                    Some("Ids never contain control characters."),
                )
            } else if s.chars().count() > MAX_ID_CHARS {
                p(format!("a string of {} characters", s.chars().count()), None)
            } else {
                None
            }
        }
        Some(Value::Number(_)) => p(describe_got(v), Some("Pass the id as a string.")),
        other => p(describe_got(other), None),
    }
}

/// Validate the raw arguments. All problems are reported, in argument order.
pub fn parse_args(tool: SendTool, args: &Value, cfg: &Config) -> Result<SendArgs, Vec<Problem>> {
    let empty = Map::new();
    let obj = match args {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => {
            return Err(vec![Problem {
                name: "arguments".into(),
                expected: "an object".into(),
                got: describe_got(Some(other)),
                hint: None,
            }])
        }
    };
    let mut problems = Vec::new();

    let target_name = tool.target_arg();
    let target_v = obj.get(target_name);
    if let Some(p) = id_problem(target_name, target_v) {
        problems.push(p);
    }

    let message_v = obj.get("message");
    match message_v {
        Some(Value::String(s)) => {
            if let Some((i, c)) = s.chars().enumerate().find(|(_, c)| c.is_control() && !matches!(c, '\n' | '\t' | '\r')) {
                problems.push(Problem {
                    name: "message".into(),
                    expected: "text without control characters other than newline and tab".into(),
                    got: format!("the control character U+{:04X} at position {}", c as u32, i + 1),
                    hint: None,
                });
            }
        }
        other => problems.push(Problem {
            name: "message".into(),
            expected: "a string (the text to deliver)".into(),
            got: describe_got(other),
            hint: None,
        }),
    }

    let default_mode = Mode::parse(cfg.default_send_mode.trim()).unwrap_or(Mode::Queue);
    let mut mode = default_mode;
    match tool {
        SendTool::SendSessionMessage => match obj.get("urgent") {
            None => mode = Mode::Queue,
            Some(Value::Bool(b)) => mode = if *b { Mode::Steer } else { Mode::Queue },
            Some(other) => problems.push(Problem {
                name: "urgent".into(),
                expected: "a boolean (true or false)".into(),
                got: describe_got(Some(other)),
                hint: match other {
                    Value::String(s) if matches!(s.trim().to_ascii_lowercase().as_str(), "true" | "false") => {
                        Some("Pass the JSON boolean, not a string.".into())
                    }
                    _ => Some("false (default) queues behind the current turn; true interjects at its next step.".into()),
                },
            }),
        },
        SendTool::SessionsSend => match obj.get("mode") {
            None => {}
            Some(Value::String(s)) if Mode::parse(s).is_some() => mode = Mode::parse(s).unwrap_or(default_mode),
            Some(other) => problems.push(Problem {
                name: "mode".into(),
                expected: r#""queue" or "steer""#.into(),
                got: describe_got(Some(other)),
                hint: match other {
                    Value::String(s) if Mode::parse(&s.trim().to_ascii_lowercase()).is_some() => {
                        Some("Use the lower-case spelling.".into())
                    }
                    _ => Some(format!("Leave it out for the default ({}).", default_mode.as_str())),
                },
            }),
        },
    }

    let mut unknown: Vec<&String> = obj.keys().filter(|k| !tool.known().contains(&k.as_str())).collect();
    unknown.sort();
    for k in unknown {
        let shown = if k.chars().count() > 40 { format!("{}…", k.chars().take(40).collect::<String>()) } else { k.clone() };
        problems.push(Problem {
            name: shown,
            expected: format!("left out: it is not an argument of {} (which takes {})", tool.name(), tool.known().join(", ")),
            got: describe_got(obj.get(k)),
            hint: unknown_hint(tool, k),
        });
    }

    if !problems.is_empty() {
        return Err(problems);
    }
    let target = target_v.and_then(Value::as_str).unwrap_or_default().to_string();
    let message = message_v.and_then(Value::as_str).unwrap_or_default().to_string();
    Ok(SendArgs { target, message, mode })
}

/// What the send will do once every check passed.
#[derive(Debug, Clone)]
pub struct Plan {
    pub tool: SendTool,
    pub target: String,
    pub mode: Mode,
    pub chars: usize,
    /// The exact delivered text (header or frame included).
    pub text: String,
    pub request_id: String,
    pub base_url: String,
    pub woke: bool,
    pub running: bool,
    pub pending_from_plugin: usize,
}

fn header_str<'a>(h: &'a Value, key: &str) -> Option<&'a str> {
    h.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Every check up to (not including) delivery. `Err` is the refusal text.
pub fn plan(req: &ToolRequest) -> Result<Plan, String> {
    let tool = SendTool::from_name(&req.tool);
    let args = parse_args(tool, &req.args, &req.config).map_err(|p| text::bad_arguments(&p, tool.usage()))?;
    let cfg = &req.config;

    let sender = mail::sender_id(req.caller.as_ref()).ok_or_else(text::no_caller)?.to_string();

    let base_url = req
        .host
        .base_url
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| text::no_web_server(req.host.profile.as_deref()))?
        .to_string();

    let is_self = args.target == sender
        || req.caller.as_ref().map_or(false, |c| {
            c.session_id.as_deref() == Some(args.target.as_str()) || c.agent_id.as_deref() == Some(args.target.as_str())
        });
    if is_self {
        return Err(text::self_send(&args.target));
    }

    if args.message.trim().is_empty() {
        return Err(text::empty_body());
    }
    let chars = args.message.chars().count();
    if chars > cfg.max_send_chars {
        return Err(text::too_long(chars, cfg.max_send_chars));
    }
    guard::check_body(&args.message).map_err(|f| text::forged_header(&f))?;

    // Ordering guarantee 1: decided from the live registry alone, before the target is resolved.
    let live: Option<&LiveSession> = req.live.iter().find(|l| l.id == args.target);
    if live.is_none() && !cfg.allow_resume {
        return Err(text::resume_disabled(&args.target));
    }

    // Resolve: live header, else the store.
    let (origin, parent) = match live {
        Some(l) => (
            header_str(&l.header, "origin").map(str::to_string),
            header_str(&l.header, "parentSession").map(str::to_string),
        ),
        None => {
            let home = store::resolve_dsh_home(req.host.dsh_home.as_deref());
            match store::find_session(&home, &args.target) {
                Some(meta) => (meta.origin.clone(), meta.parent_session.clone()),
                None => return Err(text::not_found(&args.target)),
            }
        }
    };
    // Ordering guarantee 2: a subagent is refused before anything is sent.
    if origin.as_deref() == Some("subagent") {
        return Err(text::not_messageable(&args.target, parent.as_deref()));
    }

    let delivered = match tool {
        SendTool::SendSessionMessage => mail::with_from_header(&sender, &args.message),
        SendTool::SessionsSend if cfg.frame_messages => {
            let title = req.caller.as_ref().and_then(|c| c.title.as_deref());
            mail::frame(&sender, title, args.mode.as_str(), &args.message)
        }
        SendTool::SessionsSend => args.message.clone(),
    };

    Ok(Plan {
        tool,
        target: args.target,
        mode: args.mode,
        chars,
        text: delivered,
        request_id: mail::new_request_id(),
        base_url,
        woke: live.is_none(),
        running: live.map_or(false, |l| l.status == "running"),
        pending_from_plugin: live.map_or(0, |l| {
            l.pending_rpc_ids.iter().filter(|id| id.starts_with(mail::REQUEST_ID_PREFIX)).count()
        }),
    })
}

/// Run `sessions_send` or `send_session_message`; the result is the text the model sees.
pub async fn run(req: &ToolRequest) -> String {
    let p = match plan(req) {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    let home = store::resolve_dsh_home(req.host.dsh_home.as_deref());
    let d = Delivery {
        base_url: &p.base_url,
        dsh_home: &home,
        host_secret: req.host.secret.as_deref(),
        host_version: req.host.version.as_deref(),
        host_api: &req.config.host_api,
        timeouts: Timeouts::from_ms(req.config.connect_timeout_ms, req.config.request_timeout_ms),
        session_id: &p.target,
        mode: p.mode,
        text: &p.text,
        request_id: &p.request_id,
    };
    match delivery::deliver(&d).await {
        Outcome::Accepted { dialect, recovery, ambiguity } => text::accepted(&Receipt {
            tool: p.tool,
            target: &p.target,
            mode: p.mode,
            chars: p.chars,
            woke: p.woke,
            running: p.running,
            request_id: &p.request_id,
            dialect,
            recovery,
            ambiguity: ambiguity.as_deref(),
            pending_from_plugin: p.pending_from_plugin,
        }),
        Outcome::Rejected { code, message, after_ambiguous } => {
            text::rejected(&code, &message, after_ambiguous, &p.request_id)
        }
        Outcome::Failed(f) => text::failure(
            &f,
            &FailureContext {
                target: &p.target,
                request_id: &p.request_id,
                base_url: &p.base_url,
                connect_timeout_ms: req.config.connect_timeout_ms,
            },
        ),
    }
}

