//! The one argument validator of the four tools: each problem is an [`ArgProblem`] (data), never
//! text. `sessions_list` and `sessions_read` stop at the first problem ([`list`], [`read`]); the send
//! tools collect them all ([`send`]).

use serde_json::{Map, Value};

use crate::config::Config;
use crate::delivery::Mode;
use crate::outcome::{ArgProblem, Expected, Got, Hint, Refusal, Shown};
use crate::tools::list::{ListArgs, Scope, LIST_ARGS};
use crate::tools::read::{ReadArgs, READ_ARGS};
use crate::tools::send::{SendArgs, SendTool};
use crate::tools::Tool;

/// A `bad-argument` refusal of one problem (the `sessions_list` / `sessions_read` form: no usage line).
pub fn refuse(p: ArgProblem) -> Refusal {
    Refusal::BadArgument {
        problems: vec![p],
        usage: None,
    }
}

/// The argument object, refusing a non-object and any argument name not in `allowed`.
pub fn object<'a>(
    args: &'a Value,
    tool: Tool,
    allowed: &'static [&'static str],
) -> Result<Option<&'a Map<String, Value>>, ArgProblem> {
    let map = match args {
        Value::Null => return Ok(None),
        Value::Object(m) => m,
        other => {
            return Err(ArgProblem::invalid(
                "the arguments",
                Expected::JsonObject,
                Got::Value(Shown::of(other)),
                Some(Hint::Takes { tool, allowed }),
            ))
        }
    };
    let mut unknown: Vec<&String> = map
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .collect();
    unknown.sort();
    if let Some(k) = unknown.first() {
        return Err(ArgProblem::NotAnArgument {
            name: (*k).clone(),
            tool,
            allowed,
        });
    }
    Ok(Some(map))
}

/// The value of `name`, `None` when absent or `null`.
pub fn present<'a>(map: Option<&'a Map<String, Value>>, name: &str) -> Option<&'a Value> {
    map.and_then(|m| m.get(name)).filter(|v| !v.is_null())
}

pub fn opt_string(
    map: Option<&Map<String, Value>>,
    name: &str,
    hint: Hint,
) -> Result<Option<String>, ArgProblem> {
    match present(map, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(ArgProblem::invalid(
            name,
            Expected::Str,
            Got::Value(Shown::of(v)),
            Some(hint),
        )),
    }
}

pub fn opt_bool(map: Option<&Map<String, Value>>, name: &str) -> Result<Option<bool>, ArgProblem> {
    match present(map, name) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(ArgProblem::invalid(
            name,
            Expected::TrueOrFalse,
            Got::Value(Shown::of(v)),
            Some(Hint::OmitForDefault),
        )),
    }
}

/// An integer in `lo..=hi` (an integral float such as `5.0` counts).
pub fn opt_int(
    map: Option<&Map<String, Value>>,
    name: &str,
    lo: u64,
    hi: u64,
) -> Result<Option<u64>, ArgProblem> {
    let Some(v) = present(map, name) else {
        return Ok(None);
    };
    let n = v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= 1e15)
            .map(|f| f as u64)
    });
    match n {
        Some(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
        _ => Err(ArgProblem::invalid(
            name,
            Expected::IntRange { lo, hi },
            Got::Value(Shown::of(v)),
            Some(Hint::OmitForDefault),
        )),
    }
}

/// `sessions_list` arguments; the first problem stops.
pub fn list(args: &Value, max_list_results: usize) -> Result<ListArgs, ArgProblem> {
    let map = object(args, Tool::SessionsList, &LIST_ARGS)?;
    let query = opt_string(map, "query", Hint::QueryText)?
        .map(|q| q.trim().to_string())
        .filter(|q| !q.is_empty());
    let scope = match present(map, "scope") {
        None => Scope::TopLevel,
        Some(Value::String(s)) if s == "top-level" => Scope::TopLevel,
        Some(Value::String(s)) if s == "subagents" => Scope::Subagents,
        Some(Value::String(s)) if s == "all" => Scope::All,
        Some(v) => {
            return Err(ArgProblem::invalid(
                "scope",
                Expected::OneOf(&["top-level", "subagents", "all"]),
                Got::Value(Shown::of(v)),
                Some(Hint::ScopeDefault),
            ))
        }
    };
    let live_only = opt_bool(map, "live_only")?.unwrap_or(false);
    let repo_only = opt_bool(map, "repo_only")?.unwrap_or(false);
    let cap = max_list_results.clamp(1, 200);
    let limit = opt_int(map, "limit", 1, 200)?.map_or(cap, |n| (n as usize).min(cap));
    Ok(ListArgs {
        query,
        scope,
        live_only,
        limit,
        repo_only,
    })
}

/// `sessions_read` arguments; the first problem stops.
pub fn read(args: &Value, cfg: &Config) -> Result<ReadArgs, ArgProblem> {
    let map = object(args, Tool::SessionsRead, &READ_ARGS)?;
    let hint = Some(Hint::ListedId);
    let session_id = match map.and_then(|m| m.get("session_id")) {
        None | Some(Value::Null) => {
            return Err(ArgProblem::invalid(
                "session_id",
                Expected::SessionId,
                Got::Nothing,
                hint,
            ))
        }
        Some(Value::String(s)) if s.trim().is_empty() => {
            return Err(ArgProblem::invalid(
                "session_id",
                Expected::NonEmptySessionId,
                Got::EmptyString,
                hint,
            ))
        }
        // The send tools' id rules (no control characters such as NUL, at most 512 characters):
        // such an id is a bad argument, not an unknown session (issue 11 #13).
        Some(v @ Value::String(s)) => match id_problem("session_id", Some(v)) {
            Some(p) => return Err(p),
            None => s.clone(),
        },
        Some(v) => {
            return Err(ArgProblem::invalid(
                "session_id",
                Expected::SessionId,
                Got::Value(Shown::of(v)),
                hint,
            ))
        }
    };
    let cap = (cfg.max_read_messages as usize).clamp(1, 100);
    let max_messages = opt_int(map, "max_messages", 1, 100)?.map_or(cap, |n| (n as usize).min(cap));
    Ok(ReadArgs {
        session_id,
        max_messages,
        include_injected: opt_bool(map, "include_injected")?
            .unwrap_or(cfg.include_injected_by_default),
        include_system: opt_bool(map, "include_system")?.unwrap_or(false),
        since_seq: opt_int(map, "since_seq", 0, 1_000_000_000_000)?,
    })
}

/// Longest id accepted (ids are compared exactly; this only stops absurd input).
const MAX_ID_CHARS: usize = 512;

fn squash(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// A hint for an unknown argument name.
fn unknown_hint(tool: SendTool, name: &str) -> Option<Hint> {
    let n = squash(name);
    for k in tool.known() {
        if squash(k) == n {
            return Some(Hint::DidYouMean(k));
        }
    }
    match n.as_str() {
        "to" | "target" | "targetid" | "sessionid" | "tosessionid" | "session"
        | "targetsessionid" | "id" => Some(Hint::TargetGoesIn(tool.target_arg())),
        "body" | "text" | "content" | "msg" => Some(Hint::TextGoesInMessage),
        "urgent" if tool == SendTool::SessionsSend => Some(Hint::ModeNotUrgent),
        "mode" if tool == SendTool::SendSessionMessage => Some(Hint::UrgentNotMode),
        "from" | "sender" | "fromsessionid" => Some(Hint::SenderIsYourOwn),
        _ => None,
    }
}

fn id_problem(name: &str, v: Option<&Value>) -> Option<ArgProblem> {
    let p = |got: Got, hint: Option<Hint>| {
        Some(ArgProblem::invalid(
            name,
            Expected::ListedSessionId,
            got,
            hint,
        ))
    };
    match v {
        Some(Value::String(s)) => {
            if s.is_empty() {
                p(Got::EmptyString, None)
            } else if let Some((i, c)) = s.chars().enumerate().find(|(_, c)| c.is_control()) {
                p(
                    Got::ControlCharacterIn {
                        value: Shown::of(&Value::String(s.clone())),
                        code: c as u32,
                        position: i + 1,
                    },
                    Some(Hint::IdsHaveNoControlCharacters),
                )
            } else if s.chars().count() > MAX_ID_CHARS {
                p(
                    Got::LongString {
                        chars: s.chars().count(),
                    },
                    None,
                )
            } else {
                None
            }
        }
        Some(n @ Value::Number(_)) => p(Got::Arg(Some(Shown::of(n))), Some(Hint::IdAsString)),
        other => p(Got::Arg(other.map(Shown::of)), None),
    }
}

/// The send arguments as far as they could be read: what a refused call's ledger line records.
/// `target` and `message` are the strings as written (even when refused); `mode` is `None` when
/// `mode` / `urgent` was not valid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartialSend {
    pub target: Option<String>,
    pub message: Option<String>,
    pub mode: Option<Mode>,
}

impl From<&SendArgs> for PartialSend {
    fn from(a: &SendArgs) -> PartialSend {
        PartialSend {
            target: Some(a.target.clone()),
            message: Some(a.message.clone()),
            mode: Some(a.mode),
        }
    }
}

/// Send arguments that were refused: every problem, and what could still be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendArgsRefused {
    pub partial: PartialSend,
    pub problems: Vec<ArgProblem>,
}

/// `sessions_send` / `send_session_message` arguments: every problem, in argument order.
pub fn send(tool: SendTool, args: &Value, cfg: &Config) -> Result<SendArgs, SendArgsRefused> {
    let empty = Map::new();
    let obj = match args {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => {
            return Err(SendArgsRefused {
                partial: PartialSend::default(),
                problems: vec![ArgProblem::invalid(
                    "arguments",
                    Expected::Object,
                    Got::Arg(Some(Shown::of(other))),
                    None,
                )],
            })
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
            if let Some((i, c)) = s
                .chars()
                .enumerate()
                .find(|(_, c)| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
            {
                problems.push(ArgProblem::invalid(
                    "message",
                    Expected::NoControlCharacters,
                    Got::ControlCharacter {
                        code: c as u32,
                        position: i + 1,
                    },
                    None,
                ));
            }
        }
        other => problems.push(ArgProblem::invalid(
            "message",
            Expected::MessageText,
            Got::Arg(other.map(Shown::of)),
            None,
        )),
    }

    let default_mode = Mode::parse(cfg.default_send_mode.trim()).unwrap_or(Mode::Queue);
    let mut mode = Some(default_mode);
    match tool {
        SendTool::SendSessionMessage => match obj.get("urgent") {
            None => mode = Some(Mode::Queue),
            Some(Value::Bool(b)) => mode = Some(if *b { Mode::Steer } else { Mode::Queue }),
            Some(other) => {
                mode = None;
                let hint = match other {
                    Value::String(s)
                        if matches!(s.trim().to_ascii_lowercase().as_str(), "true" | "false") =>
                    {
                        Hint::JsonBoolean
                    }
                    _ => Hint::UrgentMeaning,
                };
                problems.push(ArgProblem::invalid(
                    "urgent",
                    Expected::Boolean,
                    Got::Arg(Some(Shown::of(other))),
                    Some(hint),
                ))
            }
        },
        SendTool::SessionsSend => match obj.get("mode") {
            None => {}
            Some(Value::String(s)) if Mode::parse(s).is_some() => mode = Mode::parse(s),
            Some(other) => {
                mode = None;
                let hint = match other {
                    Value::String(s) if Mode::parse(&s.trim().to_ascii_lowercase()).is_some() => {
                        Hint::LowerCase
                    }
                    _ => Hint::ModeDefault(default_mode),
                };
                problems.push(ArgProblem::invalid(
                    "mode",
                    Expected::QueueOrSteer,
                    Got::Arg(Some(Shown::of(other))),
                    Some(hint),
                ))
            }
        },
    }

    // `notify_when_idle` is acted on by the shim after an accepted send (lib/notice.js); checked here so a
    // bad value is refused like every other argument, before anything is sent.
    if let Some(v) = obj.get("notify_when_idle") {
        if !v.is_boolean() {
            problems.push(ArgProblem::invalid(
                "notify_when_idle",
                Expected::Boolean,
                Got::Arg(Some(Shown::of(v))),
                Some(Hint::NotifyMeaning),
            ));
        }
    }

    let mut unknown: Vec<&String> = obj
        .keys()
        .filter(|k| !tool.known().contains(&k.as_str()))
        .collect();
    unknown.sort();
    for k in unknown {
        let shown = if k.chars().count() > 40 {
            format!("{}…", k.chars().take(40).collect::<String>())
        } else {
            k.clone()
        };
        problems.push(ArgProblem::invalid(
            shown,
            Expected::LeftOut(tool),
            Got::Arg(obj.get(k).map(Shown::of)),
            unknown_hint(tool, k),
        ));
    }

    let partial = PartialSend {
        target: target_v.and_then(Value::as_str).map(str::to_string),
        message: message_v.and_then(Value::as_str).map(str::to_string),
        mode,
    };
    match partial {
        PartialSend {
            target: Some(target),
            message: Some(message),
            mode: Some(mode),
        } if problems.is_empty() => Ok(SendArgs {
            target,
            message,
            mode,
        }),
        partial => Err(SendArgsRefused { partial, problems }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refused_send_arguments_keep_what_could_be_read() {
        let cfg = Config::default();
        let bad_urgent = json!({"toSessionId": "peer", "message": "hi", "urgent": "yes"});
        let r = send(SendTool::SendSessionMessage, &bad_urgent, &cfg).unwrap_err();
        assert_eq!(r.problems.len(), 1);
        assert_eq!(
            r.partial,
            PartialSend {
                target: Some("peer".into()),
                message: Some("hi".into()),
                mode: None
            }
        );
        // A bad target still yields the mode the call asked for (and the default when it is left out).
        let bad_target = json!({"session_id": 5, "message": "hi"});
        let r = send(SendTool::SessionsSend, &bad_target, &cfg).unwrap_err();
        assert_eq!(r.partial.target, None);
        assert_eq!(r.partial.mode, Some(Mode::Queue));
        let steer = json!({"session_id": 5, "mode": "steer"});
        let r = send(SendTool::SessionsSend, &steer, &cfg).unwrap_err();
        assert_eq!(
            (r.partial.mode, r.partial.message),
            (Some(Mode::Steer), None)
        );
        assert_eq!(r.problems.len(), 2);
        // A non-object reads nothing.
        let r = send(SendTool::SessionsSend, &json!([1]), &cfg).unwrap_err();
        assert_eq!(r.partial, PartialSend::default());
    }
}
