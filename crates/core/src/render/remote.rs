//! The text of what crosses to a linked machine: receipts and refusals of a send to a session there,
//! the refusals a receiving home gives (machine budget, foreign sender), and the machine's name where
//! a listing row or a read window shows it (docs/output-contract.md "Across machines").
//!
//! The model sees the machine's *name* (what this home's human called it) on rows, read heads and
//! receipts; the id never. What the receiving model sees is unchanged: the From header stays seed 003's
//! `From <sender session id> ：`, the frame seed 000's.

use base::clock::{format_utc_secs, human_secs};

use crate::code::RefusalCode;
use crate::crossing::MachineBudget;
use crate::delivery::Mode;
use crate::machine::wire::{ForeignWhy, WireRefusal};
use crate::machine::CallError;
use crate::outcome::{RemoteFate, RemoteReceipt, RemoteRefusal};
use crate::render::list::quote_short;
use crate::render::refusal::refused;
use crate::tool::SendTool;

/// ```text
/// accepted for session-b… on machine laptop | mode=queue | chars=5
/// That machine's host took it: the message is queued in that session's inbox there. Its reply …
/// request: dsh-session-mail:…
/// ```
pub fn receipt(r: &RemoteReceipt) -> String {
    let head = |word: &str| {
        format!(
            "{word} for {} on machine {} | mode={} | chars={}",
            r.target,
            r.machine.name,
            r.mode.as_str(),
            r.chars
        )
    };
    let reply = match r.tool {
        SendTool::SessionsSend => "Its reply will not return through this call; read it later with sessions_read.".to_string(),
        SendTool::SendSessionMessage => format!(
            "Its reply will not return through this call; if that agent answers, the answer arrives here as a message headed From {} ：.",
            r.target
        ),
    };
    let mut s = match &r.fate {
        RemoteFate::Accepted {
            woke,
            waiting,
            repeated,
        } => {
            let mut s = head("accepted");
            if *woke {
                s.push_str(" (woke a cold session there)");
            }
            let landing = match (waiting, r.mode) {
                (true, _) => "That machine took it: the message waits in the mailbox of the DSH process there that holds the session, and lands once.",
                (false, Mode::Queue) => "That machine's host took it: the message is queued in that session's inbox there.",
                (false, Mode::Steer) => "That machine's host took it: it lands at the next step of that session's running turn there, or starts a turn.",
            };
            s.push('\n');
            s.push_str(landing);
            s.push(' ');
            s.push_str(&reply);
            if *repeated {
                s.push_str("\nnote: that machine had this request id already and answered from its record; nothing was delivered twice.");
            }
            s
        }
        RemoteFate::Held => format!(
            "{}\nNothing was delivered yet: the human of machine {} reviews agent mail before it lands there. It lands only if they approve it; a rejected message never lands. Do not send it again.",
            head("held for the human"),
            r.machine.name
        ),
        RemoteFate::MayHaveLanded => format!(
            "refused (unreachable): the message to {} on machine {} went out there without a clear answer from its host: it MAY have landed.\nCheck with sessions_read before sending it again.",
            r.target, r.machine.name
        ),
        RemoteFate::Outbox { expires_at_ms, why } => {
            let said = if why.may_have_arrived() {
                "no answer came back in time, so it may have arrived already"
            } else {
                "that machine could not be reached"
            };
            format!(
                "{}\nNot delivered yet: {said} ({why}). The message is kept in this host's outbox and is delivered once when machine {} answers, with the same request id, so it never lands twice. If that machine does not answer before {}, it expires undelivered. verify says where it is. Do not send it again.",
                head("waiting in the outbox"),
                r.machine.name,
                format_utc_secs(*expires_at_ms)
            )
        }
    };
    if r.hop >= 2 {
        s.push_str(&format!(
            "\nnote: relay hop {} in this agent-to-agent chain across machines.",
            r.hop
        ));
    }
    s.push_str(&format!("\nrequest: {}", r.request_id));
    s
}

fn foreign_words(why: ForeignWhy) -> &'static str {
    match why {
        ForeignWhy::Local => "it names a session of that host, so it cannot be a sender from another machine",
        ForeignWhy::OtherMachine => "that host first received it from another machine, and an id belongs to the machine it came from",
        ForeignWhy::NotAnId => "it is not a session id",
        ForeignWhy::Unrecorded => "that host cannot record which machine it came from, so it takes no new sender ids until its human looks",
    }
}

/// What a linked machine's refusal says (after `refused (<code>): machine <name> refused …: `).
fn why_there(w: &WireRefusal) -> String {
    match w.code {
        RefusalCode::Stopped => "its human stopped all agent mail there".into(),
        RefusalCode::RefusedByHuman => "its human refuses agent mail for that session, or from this machine".into(),
        RefusalCode::Budget if w.machine_budget => "mail from this machine used its budget there (budgetPerMachine)".into(),
        RefusalCode::Budget => "your send budget there is used up".into(),
        RefusalCode::RelayLimit => match (w.hop, w.max) {
            (Some(h), Some(m)) => format!("this agent-to-agent chain would reach hop {h} there, past its maxRelayHops of {m}; it goes no further until a human writes in it"),
            _ => "this agent-to-agent chain reached the relay limit there".into(),
        },
        RefusalCode::ForeignSender => format!(
            "it does not take your session id as a sender: {}",
            foreign_words(w.foreign.unwrap_or(ForeignWhy::Unrecorded))
        ),
        RefusalCode::NotFound => "it has no session with that id".into(),
        RefusalCode::NotMessageable => "that session is a subagent there".into(),
        RefusalCode::ResumeDisabled => "that session is cold there and waking sessions is disabled there".into(),
        RefusalCode::Stacked => "your earlier queued messages still wait in that session's inbox there".into(),
        RefusalCode::TooLong => "the message is longer than that host takes (maxSendChars)".into(),
        RefusalCode::Busy => "it was busy and did not finish in time".into(),
        code => format!("its own send path refused it ({code})"),
    }
}

/// `refused (<code>): machine <name> refused the message to <target>: <why>.`
pub fn remote_refusal(r: &RemoteRefusal) -> String {
    let w = &r.refusal;
    let mut more = vec!["Nothing was delivered there.".to_string()];
    if let Some(t) = w.retry_at_ms {
        more.push(format!(
            "One more send is possible there from {}.",
            format_utc_secs(t)
        ));
    }
    more.push(match w.code {
        RefusalCode::Stopped | RefusalCode::RefusedByHuman | RefusalCode::ForeignSender => {
            "Do not retry or route it through another session. Tell the user if the message matters.".into()
        }
        RefusalCode::RelayLimit => "Wrap up and report to your human.".into(),
        RefusalCode::NotFound => "Re-run sessions_list for a valid id.".into(),
        _ => "Tell the user if the message matters.".into(),
    });
    more.push(format!("request: {}", r.request_id));
    refused(
        w.code.as_str(),
        &format!(
            "machine {} refused the message to {}: {}.",
            r.machine.name,
            quote_short(&r.target, 60),
            why_there(w)
        ),
        &more,
    )
}

/// `refused (budget)` of mail from a linked machine, on the receiving home (its ledger's words).
pub fn machine_budget(b: &MachineBudget, now_ms: i64) -> String {
    let wait = u64::try_from((b.next_at_ms - now_ms).max(1_000) / 1000).unwrap_or(1);
    refused(
        "budget",
        &format!(
            "mail from machine {} used its budget on this host: {} sends in the last {} (budgetPerMachine {}). Nothing was sent.",
            b.machine.short(),
            b.sent,
            human_secs(b.window_secs),
            b.limit
        ),
        &[format!(
            "One more send is possible in {} (at {}).",
            human_secs(wait),
            format_utc_secs(b.next_at_ms)
        )],
    )
}

/// `refused (foreign-sender)`.
pub fn foreign_sender(sender: &str, why: ForeignWhy) -> String {
    refused(
        "foreign-sender",
        &format!(
            "sender {} is not taken from that machine: {}. Nothing was sent.",
            quote_short(sender, 60),
            foreign_words(why)
        ),
        &[],
    )
}

/// `refused (unlinked)`.
pub fn unlinked(target: &str, machine: &str) -> String {
    refused(
        "unlinked",
        &format!(
            "{} is a session of machine {}, which is not linked to this host now. Nothing was sent.",
            quote_short(target, 60),
            &machine[..machine.len().min(12)]
        ),
        &["Only the human links machines (dsh-session-mail link). Tell the user if the message matters.".to_string()],
    )
}

/// The `verify` line of a message sent to a linked machine (`remote::verify`): its state first, then
/// where it is and what that machine said.
pub fn verification(v: &crate::outcome::RemoteVerification) -> String {
    use crate::code::FateState as S;
    let name = v
        .machine_name
        .clone()
        .unwrap_or_else(|| format!("{} (not linked now)", v.machine.short()));
    let target = v.target.as_deref().unwrap_or("(unknown session)");
    let rid = &v.request_id;
    let at = |t: Option<i64>| t.map_or_else(|| "(unknown)".to_string(), format_utc_secs);
    if v.in_outbox {
        return match v.state {
            S::Waiting => format!(
                "waiting: {rid} for {target} is in this host's outbox for machine {name}, not delivered yet: that machine has not answered. It is delivered once when it does, or expires at {}.",
                at(v.expires_at_ms)
            ),
            S::Expired => format!(
                "expired: {rid} for {target} waited in this host's outbox for machine {name} until {} and was never delivered.",
                at(v.expires_at_ms)
            ),
            state => format!(
                "{}: {rid} for {target} was for machine {name}, which was unlinked before it answered; it was never delivered.",
                state.as_str()
            ),
        };
    }
    let mut s = format!("{} on machine {name}: {rid} for {target}", v.state.as_str());
    if let Some(code) = v.there.as_ref().and_then(|t| t.code) {
        s.push_str(&format!(" (refused there: {code})"));
    }
    match &v.asked {
        None => s.push_str(", as that machine says now."),
        Some(e) => s.push_str(&format!(
            ", as that machine answered when it took it; it cannot be asked now ({e})."
        )),
    }
    s
}

/// `verify`'s data of a message sent to a linked machine (`remote::verify`): its state as this side
/// can tell it (the far side's answer when it was asked), the session there, the machine, and the
/// line of [`verification`]. The exit code keys on `state` alone, as for a local one.
pub fn request_fate(v: &crate::outcome::RemoteVerification) -> crate::fate::RequestFate {
    crate::fate::RequestFate {
        request_id: v.request_id.clone(),
        state: v.state,
        settled: v.state.settled(),
        session_id: v.target.clone(),
        seq: None,
        turn: None,
        target: None,
        searched: 0,
        session_missing: false,
        machine: Some(crate::machine::Machine {
            id: v.machine.clone(),
            name: v
                .machine_name
                .clone()
                .unwrap_or_else(|| v.machine.short().to_string()),
        }),
        text: verification(v),
        answered_there: v.there.is_some(),
    }
}

/// The text of a call error in a listing note.
pub fn call_error(e: &CallError) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{Machine, MachineId};

    fn m() -> Machine {
        Machine {
            id: MachineId::parse(&"e".repeat(64)).unwrap(),
            name: "laptop".into(),
        }
    }

    fn receipt_with(fate: RemoteFate, tool: SendTool) -> RemoteReceipt {
        RemoteReceipt {
            machine: m(),
            tool,
            target: "session-b".into(),
            mode: Mode::Steer,
            chars: 5,
            request_id: "dsh-session-mail:r".into(),
            hop: 2,
            fate,
        }
    }

    #[test]
    fn receipts_across_machines() {
        assert_eq!(
            receipt(&receipt_with(
                RemoteFate::Accepted { woke: false, waiting: true, repeated: true },
                SendTool::SessionsSend
            )),
            "accepted for session-b on machine laptop | mode=steer | chars=5\nThat machine took it: the message waits in the mailbox of the DSH process there that holds the session, and lands once. Its reply will not return through this call; read it later with sessions_read.\nnote: that machine had this request id already and answered from its record; nothing was delivered twice.\nnote: relay hop 2 in this agent-to-agent chain across machines.\nrequest: dsh-session-mail:r"
        );
        assert_eq!(
            receipt(&receipt_with(RemoteFate::Held, SendTool::SendSessionMessage)),
            "held for the human for session-b on machine laptop | mode=steer | chars=5\nNothing was delivered yet: the human of machine laptop reviews agent mail before it lands there. It lands only if they approve it; a rejected message never lands. Do not send it again.\nnote: relay hop 2 in this agent-to-agent chain across machines.\nrequest: dsh-session-mail:r"
        );
        assert_eq!(
            receipt(&receipt_with(
                RemoteFate::Outbox { expires_at_ms: 1_761_741_296_789, why: CallError::Timeout },
                SendTool::SendSessionMessage
            )),
            "waiting in the outbox for session-b on machine laptop | mode=steer | chars=5\nNot delivered yet: no answer came back in time, so it may have arrived already (no answer before the deadline). The message is kept in this host's outbox and is delivered once when machine laptop answers, with the same request id, so it never lands twice. If that machine does not answer before 2025-10-29T12:34:56Z, it expires undelivered. verify says where it is. Do not send it again.\nnote: relay hop 2 in this agent-to-agent chain across machines.\nrequest: dsh-session-mail:r"
        );
    }

    /// A message to machine laptop waiting in this host's outbox.
    fn waiting() -> crate::outcome::RemoteVerification {
        crate::outcome::RemoteVerification {
            request_id: "dsh-session-mail:r".into(),
            machine: m().id,
            machine_name: Some("laptop".into()),
            target: Some("session-b".into()),
            state: crate::code::FateState::Waiting,
            expires_at_ms: Some(1_761_741_296_789),
            there: None,
            asked: None,
            in_outbox: true,
        }
    }

    #[test]
    fn verify_lines_across_machines() {
        use crate::code::FateState as S;
        let v = waiting();
        assert_eq!(
            verification(&v),
            "waiting: dsh-session-mail:r for session-b is in this host's outbox for machine laptop, not delivered yet: that machine has not answered. It is delivered once when it does, or expires at 2025-10-29T12:34:56Z."
        );
        let expired = crate::outcome::RemoteVerification {
            state: S::Expired,
            ..v.clone()
        };
        assert_eq!(
            verification(&expired),
            "expired: dsh-session-mail:r for session-b waited in this host's outbox for machine laptop until 2025-10-29T12:34:56Z and was never delivered."
        );
        let landed = crate::outcome::RemoteVerification {
            state: S::Landed,
            in_outbox: false,
            ..v.clone()
        };
        assert_eq!(
            verification(&landed),
            "landed on machine laptop: dsh-session-mail:r for session-b, as that machine says now."
        );
        let queued = crate::outcome::RemoteVerification {
            state: S::Queued,
            in_outbox: false,
            machine_name: None,
            asked: Some(CallError::Unlinked),
            ..v
        };
        assert_eq!(
            verification(&queued),
            "queued on machine eeeeeeeeeeee (not linked now): dsh-session-mail:r for session-b, as that machine answered when it took it; it cannot be asked now (not a linked machine)."
        );
    }

    /// `verify --json` of a message sent to a linked machine: its state and `settled` (the exit code keys
    /// on them), the session there, the machine by the name this home gave it (an unlinked one by its
    /// id's first 12 characters), and the line.
    #[test]
    fn verify_data_across_machines() {
        use crate::code::FateState as S;
        let waiting = waiting();
        let f = request_fate(&waiting);
        assert_eq!(
            (
                f.state,
                f.settled,
                f.session_id.as_deref(),
                f.machine.as_ref()
            ),
            (S::Waiting, false, Some("session-b"), Some(&m()))
        );
        assert_eq!(f.text, verification(&waiting));
        assert_eq!((f.seq, f.turn, f.target, f.searched), (None, None, None, 0));
        let expired = request_fate(&crate::outcome::RemoteVerification {
            state: S::Expired,
            ..waiting.clone()
        });
        assert_eq!((expired.state, expired.settled), (S::Expired, true));
        let unlinked = request_fate(&crate::outcome::RemoteVerification {
            state: S::Landed,
            in_outbox: false,
            machine_name: None,
            ..waiting
        });
        assert_eq!((unlinked.state, unlinked.settled), (S::Landed, true));
        assert_eq!(
            unlinked.machine.map(|x| (x.id, x.name)),
            Some((m().id, "eeeeeeeeeeee".to_string()))
        );
    }

    #[test]
    fn refusals_across_machines() {
        let mut w = WireRefusal::code(RefusalCode::RelayLimit);
        w.hop = Some(5);
        w.max = Some(4);
        let r = RemoteRefusal {
            machine: m(),
            target: "session-b".into(),
            request_id: "dsh-session-mail:r".into(),
            refusal: w,
        };
        assert_eq!(
            remote_refusal(&r),
            "refused (relay-limit): machine laptop refused the message to \"session-b\": this agent-to-agent chain would reach hop 5 there, past its maxRelayHops of 4; it goes no further until a human writes in it.\nNothing was delivered there.\nWrap up and report to your human.\nrequest: dsh-session-mail:r"
        );
        let mut w = WireRefusal::code(RefusalCode::ForeignSender);
        w.foreign = Some(ForeignWhy::OtherMachine);
        assert_eq!(
            remote_refusal(&RemoteRefusal { refusal: w, ..r.clone() }),
            "refused (foreign-sender): machine laptop refused the message to \"session-b\": it does not take your session id as a sender: that host first received it from another machine, and an id belongs to the machine it came from.\nNothing was delivered there.\nDo not retry or route it through another session. Tell the user if the message matters.\nrequest: dsh-session-mail:r"
        );
        let mut w = WireRefusal::code(RefusalCode::Budget);
        w.machine_budget = true;
        w.retry_at_ms = Some(1_761_741_296_789);
        assert_eq!(
            remote_refusal(&RemoteRefusal { refusal: w, ..r }),
            "refused (budget): machine laptop refused the message to \"session-b\": mail from this machine used its budget there (budgetPerMachine).\nNothing was delivered there.\nOne more send is possible there from 2025-10-29T12:34:56Z.\nTell the user if the message matters.\nrequest: dsh-session-mail:r"
        );
        assert_eq!(
            unlinked("session-b", &"e".repeat(64)),
            "refused (unlinked): \"session-b\" is a session of machine eeeeeeeeeeee, which is not linked to this host now. Nothing was sent.\nOnly the human links machines (dsh-session-mail link). Tell the user if the message matters."
        );
        assert_eq!(
            foreign_sender("session-c", ForeignWhy::Local),
            "refused (foreign-sender): sender \"session-c\" is not taken from that machine: it names a session of that host, so it cannot be a sender from another machine. Nothing was sent."
        );
        let b = MachineBudget {
            machine: m().id,
            sent: 30,
            limit: 30,
            window_secs: 600,
            next_at_ms: 1_761_741_296_789,
        };
        assert_eq!(
            machine_budget(&b, 1_761_741_296_789 - 90_000),
            "refused (budget): mail from machine eeeeeeeeeeee used its budget on this host: 30 sends in the last 10 min (budgetPerMachine 30). Nothing was sent.\nOne more send is possible in 90 s (at 2025-10-29T12:34:56Z)."
        );
    }
}
