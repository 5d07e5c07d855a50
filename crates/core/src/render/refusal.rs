//! The text of every refusal: `refused (<code>): <first line>`, then further lines.
//! The one place a [`Refusal`] becomes text (docs/output-contract.md "Common rules").

use base::offload::Offload;

use crate::outcome::{ArgProblem, Expected, Got, Hint, Internal, Missing, Refusal, Shown};
use crate::render::list::quote_short;
use crate::render::send as text;

impl Refusal {
    /// The text the model sees.
    pub fn render(&self) -> String {
        render(self)
    }
}

/// `refused (<code>): <first>` plus further lines.
pub fn refused(code: &str, first: &str, more: &[String]) -> String {
    let mut s = format!("refused ({code}): {first}");
    for line in more {
        s.push('\n');
        s.push_str(line);
    }
    s
}

/// One problem as a sentence: `<name> must be <expected>; got <got>. <hint>`.
pub fn problem_sentence(p: &ArgProblem) -> String {
    match p {
        ArgProblem::Invalid {
            name,
            expected,
            got,
            hint,
        } => {
            let mut s = format!(
                "{name} must be {}; got {}.",
                expected_text(expected),
                got_text(got)
            );
            if let Some(h) = hint {
                s.push(' ');
                s.push_str(&hint_text(h));
            }
            s
        }
        ArgProblem::NotAnArgument {
            name,
            tool,
            allowed,
        } => format!(
            "{} is not an argument of {}; expected only {}.",
            quote_short(name, 40),
            tool.name(),
            allowed.join(", ")
        ),
    }
}

/// What an argument must be, after `must be`.
pub fn expected_text(e: &Expected) -> String {
    match e {
        Expected::ValidUnicode => "valid Unicode text".into(),
        Expected::JsonObject => "a JSON object".into(),
        Expected::Object => "an object".into(),
        Expected::Str => "a string".into(),
        Expected::TrueOrFalse => "true or false".into(),
        Expected::Boolean => "a boolean (true or false)".into(),
        Expected::IntRange { lo, hi } => format!("an integer from {lo} to {hi}"),
        Expected::OneOf(these) => {
            let quoted: Vec<String> = these.iter().map(|s| format!("\"{s}\"")).collect();
            format!("one of {}", quoted.join(", "))
        }
        Expected::SessionId => "a session id string".into(),
        Expected::NonEmptySessionId => "a non-empty session id string".into(),
        Expected::ListedSessionId => {
            "a session id string (exactly as sessions_list shows it)".into()
        }
        Expected::MessageText => "a string (the text to deliver)".into(),
        Expected::NoControlCharacters => {
            "text without control characters other than newline and tab".into()
        }
        Expected::QueueOrSteer => r#""queue" or "steer""#.into(),
        Expected::LeftOut(tool) => format!(
            "left out: it is not an argument of {} (which takes {})",
            tool.name(),
            tool.known().join(", ")
        ),
    }
}

/// What came, after `got`.
pub fn got_text(g: &Got) -> String {
    match g {
        Got::Value(v) => value_text(v),
        Got::Arg(v) => arg_text(v.as_ref()),
        Got::Nothing => "nothing".into(),
        Got::EmptyString => "an empty string".into(),
        Got::LoneSurrogate => {
            "a lone UTF-16 surrogate (half of a surrogate pair, such as a cut emoji)".into()
        }
        Got::ControlCharacterIn {
            value,
            code,
            position,
        } => format!(
            "{} with the control character U+{code:04X} at position {position}",
            arg_text(Some(value))
        ),
        Got::ControlCharacter { code, position } => {
            format!("the control character U+{code:04X} at position {position}")
        }
        Got::LongString { chars } => format!("a string of {chars} characters"),
    }
}

/// A JSON value as the list and read tools show it: `"x" (a string)`, `5`, `true`, `an array`.
pub fn value_text(v: &Shown) -> String {
    match v {
        Shown::Null => "null".into(),
        Shown::Bool(b) => b.to_string(),
        Shown::Number(n) => n.clone(),
        Shown::Str { head, cut } => {
            let quoted = serde_json::to_string(head).unwrap_or_default();
            if *cut {
                format!("{}…\" (a string)", &quoted[..quoted.len() - 1])
            } else {
                format!("{quoted} (a string)")
            }
        }
        Shown::Array => "an array".into(),
        Shown::Object => "an object".into(),
    }
}

/// A JSON value or its absence as the send tools show it: `the string "x"`, `the number 5`.
pub fn arg_text(v: Option<&Shown>) -> String {
    match v {
        None => "nothing (the argument is missing)".into(),
        Some(Shown::Null) => "null".into(),
        Some(Shown::Bool(b)) => format!("the boolean {b}"),
        Some(Shown::Number(n)) => format!("the number {n}"),
        Some(Shown::Str { head, cut }) => {
            let mut q = serde_json::to_string(head).unwrap_or_else(|_| "\"…\"".into());
            if *cut {
                q.pop();
                q.push_str("…\"");
            }
            format!("the string {q}")
        }
        Some(Shown::Array) => "an array".into(),
        Some(Shown::Object) => "an object".into(),
    }
}

/// The hint after a problem.
pub fn hint_text(h: &Hint) -> String {
    match h {
        Hint::Takes { tool, allowed } => format!("{} takes {}.", tool.name(), allowed.join(", ")),
        Hint::OmitForDefault => "Omit it for the default.".into(),
        Hint::QueryText => {
            "Pass text to match ids, titles, workspaces and presets, or omit it.".into()
        }
        Hint::ScopeDefault => "Omit it for top-level sessions.".into(),
        Hint::ListedId => "Pass a durable session id exactly as sessions_list shows it.".into(),
        Hint::IdsHaveNoControlCharacters => "Ids never contain control characters.".into(),
        Hint::IdAsString => "Pass the id as a string.".into(),
        Hint::JsonBoolean => "Pass the JSON boolean, not a string.".into(),
        Hint::UrgentMeaning => {
            "false (default) queues behind the current turn; true interjects at its next step."
                .into()
        }
        Hint::LowerCase => "Use the lower-case spelling.".into(),
        Hint::ModeDefault(m) => format!("Leave it out for the default ({}).", m.as_str()),
        Hint::NotifyMeaning => "true: one notice when that session's running turn ends.".into(),
        Hint::DidYouMean(k) => format!("Did you mean {k}?"),
        Hint::TargetGoesIn(t) => format!("The target goes in {t}."),
        Hint::TextGoesInMessage => "The text goes in message.".into(),
        Hint::ModeNotUrgent => {
            r#"sessions_send takes mode: "steer" instead of urgent: true."#.into()
        }
        Hint::UrgentNotMode => {
            r#"send_session_message takes urgent: true instead of mode: "steer"."#.into()
        }
        Hint::SenderIsYourOwn => "The sender is always your own session; it cannot be set.".into(),
        Hint::ReplaceSurrogate => {
            "Nothing was done. Replace or drop that character and call again.".into()
        }
    }
}

/// `refused (bad-argument): <first problem>`, `also: <problem>` per further problem, then the call
/// shape when one is given.
pub fn bad_arguments(problems: &[ArgProblem], usage: Option<&str>) -> String {
    let first = problems
        .first()
        .map(problem_sentence)
        .unwrap_or_else(|| "the arguments are invalid.".into());
    let mut more: Vec<String> = problems
        .iter()
        .skip(1)
        .map(|p| format!("also: {}", problem_sentence(p)))
        .collect();
    if let Some(u) = usage {
        more.push(format!("Nothing was sent. Call it as {u}."));
    }
    refused("bad-argument", &first, &more)
}

/// The text of a refusal.
pub fn render(r: &Refusal) -> String {
    match r {
        Refusal::BadArgument { problems, usage } => bad_arguments(problems, *usage),
        Refusal::NoCaller => text::no_caller(),
        Refusal::NoWebServer { profile } => text::no_web_server(profile.as_deref()),
        Refusal::SelfSend { target } => text::self_send(target),
        Refusal::EmptyBody => text::empty_body(),
        Refusal::TooLong { chars, max } => text::too_long(*chars, *max),
        Refusal::ForgedHeader(f) => text::forged_header(f),
        Refusal::Budget {
            exceeded,
            target,
            tool,
        } => text::budget_refused(exceeded, target, *tool),
        Refusal::RelayLimit { hop, max } => text::relay_limit(hop, *max),
        Refusal::ResumeDisabled { target } => text::resume_disabled(target),
        Refusal::Stopped { target } => refused(
            "stopped",
            &format!("the human stopped all agent mail on this host (\"stop all agent mail\" is on in the web UI). Nothing was sent to {}.", quote_short(target, 60)),
            &["Do not retry: every send is refused until the human switches it off. Tell the user if the message matters.".to_string()],
        ),
        Refusal::MachineBudget(b) => crate::render::remote::machine_budget(b, base::clock::now_ms()),
        Refusal::ForeignSender { sender, why } => crate::render::remote::foreign_sender(sender, *why),
        Refusal::Unlinked { target, machine } => crate::render::remote::unlinked(target, machine),
        Refusal::Remote(r) => crate::render::remote::remote_refusal(r),
        Refusal::RefusedByHuman { target, by } => refused(
            "refused-by-human",
            &match by {
                crate::policy::By::Sender => format!("the human refuses agent mail from your session (a standing rule). Nothing was sent to {}.", quote_short(target, 60)),
                crate::policy::By::Machine => format!("the human refuses agent mail from your machine (a standing rule). Nothing was sent to {}.", quote_short(target, 60)),
                _ => format!("the human set {} to refuse agent mail. Nothing was sent.", quote_short(target, 60)),
            },
            &["Do not retry or route it through another session. Tell the user if the message matters.".to_string()],
        ),
        Refusal::HeldElsewhere {
            target,
            owner,
            why,
            request_id,
        } => {
            let t = text::held_elsewhere(target, owner, why);
            match request_id {
                Some(id) => text::with_request(t, id),
                None => t,
            }
        }
        Refusal::MayBeHeldElsewhere { target, holder } => text::may_be_held_elsewhere(target, holder),
        Refusal::NotFound { target, missing } => match missing {
            Missing::SendTarget => text::not_found(target),
            Missing::ReadTarget => refused(
                "not-found",
                &format!("no session with id {} on this host. Run sessions_list for a valid id (ids are exact, e.g. session-…).", quote_short(target, 60)),
                &[],
            ),
            Missing::Unreadable(why) => refused(
                "not-found",
                &format!("session {} exists but its log cannot be read ({why}). Run sessions_list for readable sessions.", quote_short(target, 60)),
                &[],
            ),
        },
        Refusal::NotMessageable { target, owner } => text::not_messageable(target, owner.as_deref()),
        Refusal::Stacked {
            stacked,
            target,
            tool,
        } => text::stacked(stacked, target, *tool),
        Refusal::Rejected {
            code,
            message,
            after_ambiguous,
            request_id,
        } => text::rejected(code, message, *after_ambiguous, request_id),
        Refusal::Undelivered { failure, context } => text::failure(failure, context),
        Refusal::UnknownTool { name } => refused(
            "unknown-tool",
            &format!(
                "there is no tool {}. This plugin provides sessions_list, sessions_read, sessions_send and send_session_message.",
                quote_short(name, 60)
            ),
            &[],
        ),
        Refusal::Internal { what } => {
            let what = match what {
                Internal::Store(Offload::TimedOut(d)) => format!(
                    "reading the session store under DSH_HOME took longer than {} s (a slow or stuck file system?)",
                    d.as_secs()
                ),
                Internal::Store(Offload::Panicked) => {
                    "internal error while reading the session store".to_string()
                }
                Internal::ChangedWhileRead { session } => {
                    format!("session {session} changed while it was read")
                }
                Internal::Held(e) => {
                    format!("the message could not be kept for the human ({e})")
                }
            };
            refused("internal", &format!("{what}; nothing was changed."), &[])
        }
        Refusal::BudgetUnchecked { why } => crate::render::send::budget_unchecked(why),
        Refusal::Busy { what } => refused(
            "busy",
            &format!(
                "{}; nothing was sent.",
                match what {
                    Offload::TimedOut(d) => format!(
                        "reading the session store and the audit ledger under DSH_HOME took longer than {} s (a slow or stuck file system?)",
                        d.as_secs()
                    ),
                    Offload::Panicked => "an internal error stopped the checks before delivery".to_string(),
                }
            ),
            &["Try again in a minute; if it happens again, tell the user (`dsh-session-mail doctor` checks DSH_HOME).".into()],
        ),
    }
}

#[cfg(test)]
mod internal_tests {
    use super::*;
    use std::time::Duration;

    /// The human's refusal names which rule refused: the target's inbound, or a standing rule for the
    /// sender or its machine (the sender reads it: "your session").
    #[test]
    fn refused_by_human_says_whose_rule() {
        use crate::policy::By;
        let r = |by| {
            Refusal::RefusedByHuman {
                target: "session-t".into(),
                by,
            }
            .render()
        };
        let tail = "\nDo not retry or route it through another session. Tell the user if the message matters.";
        assert_eq!(r(By::Session), format!("refused (refused-by-human): the human set \"session-t\" to refuse agent mail. Nothing was sent.{tail}"));
        assert_eq!(r(By::Sender), format!("refused (refused-by-human): the human refuses agent mail from your session (a standing rule). Nothing was sent to \"session-t\".{tail}"));
        assert_eq!(r(By::Machine), format!("refused (refused-by-human): the human refuses agent mail from your machine (a standing rule). Nothing was sent to \"session-t\".{tail}"));
    }

    /// `internal` and `busy` carry what failed as data; the words are made here, byte for byte as before.
    #[test]
    fn internal_and_busy_text_from_what_failed() {
        let internal = |what| Refusal::Internal { what }.render();
        assert_eq!(
            internal(Internal::Store(Offload::TimedOut(Duration::from_secs(60)))),
            "refused (internal): reading the session store under DSH_HOME took longer than 60 s (a slow or stuck file system?); nothing was changed."
        );
        assert_eq!(
            internal(Internal::Store(Offload::Panicked)),
            "refused (internal): internal error while reading the session store; nothing was changed."
        );
        assert_eq!(
            internal(Internal::ChangedWhileRead {
                session: "session-a".into()
            }),
            "refused (internal): session session-a changed while it was read; nothing was changed."
        );
        assert_eq!(
            internal(Internal::Held(
                crate::policy::held::HeldError::Full { names: 64 }.into()
            )),
            "refused (internal): the message could not be kept for the human (64 messages already wait there); nothing was changed."
        );
        let hint = "\nTry again in a minute; if it happens again, tell the user (`dsh-session-mail doctor` checks DSH_HOME).";
        assert_eq!(
            Refusal::Busy { what: Offload::TimedOut(Duration::from_secs(15)) }.render(),
            format!("refused (busy): reading the session store and the audit ledger under DSH_HOME took longer than 15 s (a slow or stuck file system?); nothing was sent.{hint}")
        );
        assert_eq!(
            Refusal::Busy { what: Offload::Panicked }.render(),
            format!("refused (busy): an internal error stopped the checks before delivery; nothing was sent.{hint}")
        );
    }
}
