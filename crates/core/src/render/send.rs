//! Every text `sessions_send` and `send_session_message` return: receipts and refusals.
//!
//! A refusal's first line always starts with `refused (<code>): `. No text here ever contains the
//! browser-session secret or a cookie: none of these functions is given one.

use crate::delivery::{Dialect, Failure, LookupError, Mode, Recovery, Then, Unclear, Unsettled};
use crate::mail::budget::{Allowance, Exceeded, Which};
use crate::mail::guard::Forgery;
use crate::mail::stacking::Stacked;
use crate::mailbox::{PostError, ReceiptError};
use crate::outcome::{
    DeliveryContext, HeldWhy, MailboxRefusal, Owner, Receipt, Route, SendNote, SendOutcome,
    SendResult, StoppingOwner, UnreadableReceipt, Unrecorded,
};
use crate::tool::SendTool;
use base::clock::{format_utc_secs, human_secs};

pub use crate::render::refusal::refused;

impl SendResult {
    /// The text the model sees.
    pub fn render(&self) -> String {
        result(self)
    }
}

pub fn no_caller() -> String {
    refused(
        "no-caller",
        "the runtime did not say which session is calling (neither exec.agent.session.id nor exec.agent.id), so the message could not carry a sender.",
        &["Nothing was sent. The sender is never taken from the arguments.".into()],
    )
}

pub fn no_web_server(profile: Option<&str>) -> String {
    let which = match profile.map(str::trim).filter(|p| !p.is_empty()) {
        Some(p) => format!("this host (profile {p}) has no web server"),
        None => "this host has no web server".to_string(),
    };
    refused(
        "no-web-server",
        &format!("{which}, so there is no route to deliver a message through."),
        &["The web and desktop profiles mount one; the headless profile does not. Nothing was sent.".into()],
    )
}

/// Why the owner's mailbox did not take the message, in the words of `held-elsewhere`.
fn mailbox_refusal(e: &MailboxRefusal) -> String {
    match e {
        MailboxRefusal::Post(PostError::Full(n)) => format!(
            "{n} messages already wait there undelivered; try again once that session has taken them"
        ),
        MailboxRefusal::Post(PostError::TooLarge(n)) => format!(
            "the message is {n} bytes, over the mailbox's {} cap; send a shorter one",
            base::text::human_bytes(crate::mailbox::MAX_ENVELOPE_BYTES)
        ),
        MailboxRefusal::Post(PostError::BadId) => "its id cannot name a mailbox folder".into(),
        MailboxRefusal::Post(PostError::Io(e)) => e.full(),
        MailboxRefusal::Post(PostError::Shard(e)) => e.to_string(),
        MailboxRefusal::Post(PostError::Encode(e)) => e.to_string(),
        MailboxRefusal::Late => "writing under DSH_HOME did not finish in time".into(),
        MailboxRefusal::NoLedgerLine(e) => {
            format!("the audit ledger line its owner checks it against could not be written: {e}")
        }
    }
}

/// The target is live in another host process that offers no route this process can use.
pub fn held_elsewhere(target: &str, owner: &Owner, why: &HeldWhy) -> String {
    let owner = match owner {
        Owner::Process { pid, profile } => format!(
            "pid {pid}, profile {}",
            profile.as_deref().unwrap_or("(unknown)")
        ),
        Owner::Unpublished => {
            "one that publishes no presence here: this plugin is not mounted there, or it is not running it".into()
        }
        Owner::Unknown => String::new(),
    };
    let what_to_do = match why {
        HeldWhy::Stopping => "Send it again in a few seconds, once that process has exited (the session is then woken here).",
        _ => "Send from a session in that process, open that process's profile with its web server, or close that session there and send again (it is then woken here).",
    };
    let why = match why {
        HeldWhy::NoRoute => "that process has no web server this process could hand the message to, and its plugin does not drain a mailbox (an older version)".into(),
        HeldWhy::MailboxRefused(e) => {
            format!("its mailbox could not take the message ({})", mailbox_refusal(e))
        }
        HeldWhy::WriterHeld => "the host refused the message with session/writer-held, so no process on this home can route it there".into(),
        HeldWhy::Stopping => "that process is stopping: it takes no more messages, and this process will not resume the session before that process has exited".into(),
    };
    refused(
        "held-elsewhere",
        &format!(
            "{} is live in another DSH process ({owner}), and {why}.",
            quote(target)
        ),
        &[
            "This process will not resume it: two writers would fork its history. Nothing was sent.".into(),
            what_to_do.into(),
        ],
    )
}

/// A cold target that a DSH process without this plugin may hold (`presence::foreign`).
pub fn may_be_held_elsewhere(target: &str, h: &crate::presence::foreign::Holder) -> String {
    let others = match h.others {
        0 => String::new(),
        1 => " (1 other such process started before that too)".into(),
        n => format!(" ({n} other such processes started before that too)"),
    };
    refused(
        "held-elsewhere",
        &format!(
            "{} may be live in another DSH process on this home ({}) that does not run dsh-session-mail, so it cannot say what it holds or take the message: its log was last written at {}, after that process started at {}{others}.",
            quote(target),
            h.describe(),
            format_utc_secs(h.log_written_ms),
            format_utc_secs(h.host.started_ms),
        ),
        &[
            "Waking it here could fork its history (rc.8 has no session lock), so this process will not. Nothing was sent.".into(),
            format!(
                "Send from a session in that process; or install dsh-session-mail in its profile and restart it (it then routes messages); or, if it does not hold the session, close it there or stop pid {} and send again (it is then woken here).",
                h.host.pid
            ),
        ],
    )
}

pub fn self_send(target: &str) -> String {
    refused(
        "self-send",
        "不能发给自己（会形成自问自答的循环）",
        &[format!(
            "You cannot send a message to your own session ({target}): it would make a loop of asking and answering yourself. Address another session from sessions_list."
        )],
    )
}

pub fn empty_body() -> String {
    refused(
        "empty-body",
        "message is empty after trimming.",
        &["Nothing was delivered; supply a body.".into()],
    )
}

pub fn too_long(chars: usize, max: usize) -> String {
    refused(
        "too-long",
        &format!("message has {chars} characters; the limit is {max} (maxSendChars)."),
        &["Nothing was delivered; shorten it, or send the essentials and let the other session ask.".into()],
    )
}

pub fn forged_header(f: &Forgery) -> String {
    let (line, what) = match f {
        Forgery::FromHeader { line } => (*line, "a From header (From <session id> ：)".to_string()),
        Forgery::FrameLine { line, what } => (*line, format!("{what} of the cross-session frame")),
    };
    refused(
        "forged-header",
        &format!("line {line} of message looks like {what}."),
        &["The plugin writes the sender line itself, from the runtime's session id; a body may not carry one (it would be a forged identity, or a forwarded message that bounces forever). Nothing was delivered; rephrase that line.".into()],
    )
}

pub fn not_found(target: &str) -> String {
    refused(
        "not-found",
        &format!("no session with id {} on this host (not live here, and not in this host's session store).", quote(target)),
        &["Nothing was sent. Re-run sessions_list for a valid id; a session of another DSH instance cannot be reached from here.".into()],
    )
}

pub fn resume_disabled(target: &str) -> String {
    refused(
        "resume-disabled",
        &format!("{} is not live in this host, and waking cold sessions is off (allowResume: false).", quote(target)),
        &["The session was left untouched. Target a live session (sessions_list with live_only: true), or ask the user to enable allowResume.".into()],
    )
}

pub fn not_messageable(target: &str, parent: Option<&str>) -> String {
    let owner = match parent {
        Some(p) => format!("owned by session {p}"),
        None => "owned by another agent (its parent session is not recorded)".into(),
    };
    let advice = match parent {
        Some(p) => format!("Nothing was sent. There is no supported way to message a subagent from here; message its owner {p} instead."),
        None => "Nothing was sent. There is no supported way to message a subagent from here.".into(),
    };
    refused(
        "not-messageable",
        &format!("{target} is a subagent session, {owner}."),
        &[advice],
    )
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| s.to_string())
}

/// What happened to an accepted message, in one line (`outcome: …`).
///
/// The host's own downgrade of a steer (the target's turn was being aborted: `send()` then resolves the
/// target to next-turn) cannot be seen in the HTTP answer, so the steer line says so instead of guessing.
pub fn outcome_line(mode: Mode, running: bool, woke: bool, pending_next_turn: usize) -> String {
    let behind = if pending_next_turn > 0 {
        format!(", behind {pending_next_turn} item(s) already waiting there")
    } else {
        String::new()
    };
    match (mode, running, woke) {
        (Mode::Queue, true, _) => format!(
            "outcome: queued for the next turn: it lands after the turn that session is running now ends{behind}."
        ),
        (Mode::Queue, false, false) => format!(
            "outcome: queued for the next turn: that session is idle, so the host starts that turn now{behind}."
        ),
        (Mode::Queue, false, true) => {
            "outcome: queued for the next turn: the session was not live, so the host resumed it and its next turn starts with this message.".into()
        }
        (Mode::Steer, true, _) => {
            "outcome: steered into the next step of its running turn (steer requested; if that session's turn was being aborted the host queues it for the next turn instead).".into()
        }
        (Mode::Steer, false, false) => {
            "outcome: started a turn: that session was idle, so the steer started a new turn at once.".into()
        }
        (Mode::Steer, false, true) => {
            "outcome: started a turn: the session was not live, so the host resumed it and the steer started a new turn.".into()
        }
    }
}

/// ` (urgent reserve: 1 of 2 left)` once a budget is in its reserve or spent, else nothing.
fn urgent_reserve(b: &crate::mail::budget::Left) -> String {
    if b.in_reserve() || b.left() == 0 {
        format!(
            " (urgent reserve: {} of {} left)",
            b.reserve_left(),
            b.reserve
        )
    } else {
        String::new()
    }
}

/// `budget: 4 of 6 left for this pair in the next 10 min; 17 of 20 left for all your sends.`
pub fn budget_line(a: &Allowance) -> Option<String> {
    let w = human_secs(a.window_secs);
    let mut parts = Vec::new();
    if let Some(p) = a.pair {
        let t = format!(
            "{} of {} left for this pair in the next {w}",
            p.left(),
            p.limit
        );
        parts.push(t + &urgent_reserve(&p));
    }
    if let Some(s) = a.sender {
        let mut t = format!("{} of {} left for all your sends", s.left(), s.limit);
        if a.pair.is_none() {
            t.push_str(&format!(" in the next {w}"));
        }
        parts.push(t + &urgent_reserve(&s));
    }
    if parts.is_empty() {
        None
    } else {
        Some(format!("budget: {}.", parts.join("; ")))
    }
}

/// The argument spelling of an urgent send for each tool.
fn urgent_spelling(tool: SendTool) -> &'static str {
    match tool {
        SendTool::SessionsSend => r#"mode: "steer""#,
        SendTool::SendSessionMessage => "urgent: true",
    }
}

/// `refused (budget): …` when the budget cannot be checked or enforced (fails closed).
pub fn budget_unchecked(why: &crate::mail::budget::Unchecked) -> String {
    refused(
        "budget",
        &format!("the send budget cannot be checked, so nothing was sent: {}.", base::scrub::scrub(&why.to_string())),
        &[
            "The budget is counted from the audit ledger ($DSH_HOME/dsh-session-mail/ledger.jsonl), and a limit that cannot be checked refuses rather than letting sends through unlimited.".into(),
            "Tell the user: the ledger file or its folder needs fixing (`dsh-session-mail doctor` says what is wrong), or the budget can be turned off with budgetWindowSecs: 0.".into(),
        ],
    )
}

/// `refused (budget): …` — which budget, how many were sent in the window, when one more send is possible.
pub fn budget_refused(e: &Exceeded, target: &str, tool: SendTool) -> String {
    let w = human_secs(e.window_secs);
    let reserve = if e.urgent && e.urgent_reserve > 0 {
        format!(
            " plus {} urgent (urgentReserve), used up as well",
            e.urgent_reserve
        )
    } else {
        String::new()
    };
    let first = match e.which {
        Which::Pair => format!(
            "you already sent {} message(s) to {target} in the last {w}; the budget for this pair is {} per {w} (budgetPerPair){reserve}.",
            e.sent, e.limit
        ),
        Which::Sender => format!(
            "you already sent {} message(s) to other sessions in the last {w}; the budget for all your sends is {} per {w} (budgetPerSender){reserve}.",
            e.sent, e.limit
        ),
    };
    let mut more = vec![format!(
        "It resets enough for one more send in {} s (at {} UTC). Nothing was sent.",
        e.wait_secs(),
        format_utc_secs(e.next_at_ms)
    )];
    match e.also {
        Some(Which::Sender) => {
            more.push("The budget for all your sends (budgetPerSender) is used up as well.".into())
        }
        Some(Which::Pair) => more.push(format!(
            "The budget for this pair (budgetPerPair, {target}) is used up as well."
        )),
        None => {}
    }
    if e.urgent_left > 0 {
        more.push(format!(
            "A correction that makes an earlier message wrong can still go now with {} ({} urgent send(s) left in reserve).",
            urgent_spelling(tool),
            e.urgent_left
        ));
    }
    more.push("Two or three exchanges are usually enough: take the conclusion back to the user instead of sending more.".into());
    refused("budget", &first, &more)
}

/// `refused (stacked): …` — this sender's queued messages the target has not taken yet.
pub fn stacked(s: &Stacked, target: &str, tool: SendTool) -> String {
    let n = s.waiting.len();
    refused(
        "stacked",
        &format!(
            "{n} of your earlier messages to {target} are still waiting unclaimed in its next-turn inbox (limit {}, maxStackedPerSender).",
            s.limit
        ),
        &[
            format!("waiting: {}", s.waiting.join(", ")),
            format!(
                "Wait for an answer before queueing more: they would stack up and land one turn after another. A correction that makes an earlier message wrong can go now with {}. Nothing was sent.",
                urgent_spelling(tool)
            ),
        ],
    )
}

/// Add a `note: …` line before the final `request: …` line (or at the end when there is none).
/// A refusal made after the request id was minted ends with `request: <id>`.
pub fn with_request(text: String, request_id: &str) -> String {
    format!("{text}\nrequest: {request_id}")
}

pub fn with_note(text: String, note: &str) -> String {
    match text.rfind("\nrequest: ") {
        Some(i) => format!("{}\nnote: {note}{}", &text[..i], &text[i..]),
        None => format!("{text}\nnote: {note}"),
    }
}

/// ```text
/// accepted for session-4b91… | mode=queue | chars=214 (woke a cold session)
/// The message is queued in that session's inbox. Its reply will not return through this call; read it later with sessions_read.
/// outcome: queued for the next turn: the session was not live, so the host resumed it and its next turn starts with this message.
/// budget: 5 of 6 left for this pair in the next 10 min; 19 of 20 left for all your sends.
/// request: dsh-session-mail:0b6c…
/// ```
pub fn accepted(r: &Receipt) -> String {
    let mut s = format!(
        "accepted for {} | mode={} | chars={}",
        r.target,
        r.mode.as_str(),
        r.chars
    );
    let woke = r.woke();
    if woke {
        s.push_str(" (woke a cold session)");
    }
    // Posted to a mailbox nobody has answered for yet: neither queued nor a started turn can be said.
    let waiting = matches!(
        r.route,
        Route::Mailbox {
            answered: false,
            ..
        }
    );
    let landing = match (r.mode, r.running) {
        _ if waiting => {
            "The message waits in the mailbox of the DSH process that holds that session."
        }
        (Mode::Queue, _) => "The message is queued in that session's inbox.",
        (Mode::Steer, true) => {
            "The message will be inserted at the next step of the turn that session is running."
        }
        (Mode::Steer, false) => "The message started a new turn in that session at once.",
    };
    let reply = match r.tool {
        SendTool::SessionsSend => "Its reply will not return through this call; read it later with sessions_read.".to_string(),
        SendTool::SendSessionMessage => format!(
            "Its reply will not return through this call; if that agent answers, the answer arrives here as a message headed From {} ：.",
            r.target
        ),
    };
    s.push('\n');
    s.push_str(landing);
    s.push(' ');
    s.push_str(&reply);
    s.push('\n');
    if waiting {
        s.push_str("outcome: waiting in that process's mailbox, which it drains about four times a second, so it lands once even if this session ends now. No answer came back within 2 s, so whether it was queued or started a turn is not known yet: check with verify before sending again.");
    } else {
        s.push_str(&outcome_line(r.mode, r.running, woke, r.pending_next_turn));
    }
    if let Some(rec) = r.recovery {
        let first = r
            .ambiguity
            .as_ref()
            .map_or_else(|| "no clear answer".to_string(), unclear);
        let how = match (rec, r.dialect) {
            (Recovery::FoundInHistory, _) => "the host's history shows this request id, so it was not sent again",
            (Recovery::FoundInLog, _) => "the session log shows this request id, so it was not sent again",
            (Recovery::Resent, Dialect::V2) => "it was resent once with the same request id and accepted; the host deduplicates by request id, so it lands once",
            (Recovery::Resent, Dialect::Rc8) => "the host's history did not show it, so it was resent once with the same request id and accepted",
        };
        s.push_str(&format!("\nnote: confirmed after an ambiguous failure (the first attempt got no clear answer: {first}); {how}."));
    }
    if r.pending_from_plugin > 0 {
        s.push_str(&format!(
            "\nnote: that session already had {} earlier message(s) from this plugin waiting in its inbox; wait for an answer before sending more.",
            r.pending_from_plugin
        ));
    }
    if let Some(line) = r.budget.as_ref().and_then(budget_line) {
        s.push('\n');
        s.push_str(&line);
    }
    if let Some(line) = route_note(&r.route) {
        s.push_str("\nnote: ");
        s.push_str(&line);
    }
    s.push_str(&format!("\nrequest: {}", r.request_id));
    s
}

/// The `note: routed: …` line of a receipt whose message went to another process (none for this one's host).
fn route_note(route: &Route) -> Option<String> {
    let profile = |p: &Option<String>| p.clone().unwrap_or_else(|| "(unknown)".into());
    Some(match route {
        Route::Here { .. } => return None,
        Route::Owner { pid, profile: p } => format!(
            "routed: that session is live in another DSH process (pid {pid}, profile {}); that process's own host took the message, and this process did not resume it.",
            profile(p)
        ),
        Route::Mailbox { pid, profile: p, answered: true } => format!(
            "routed: that session is live in another DSH process without a web server (pid {pid}, profile {}); that process took the message from its mailbox and its host answered, and this process did not resume it.",
            profile(p)
        ),
        Route::Mailbox { pid, profile: p, answered: false } => format!(
            "routed: that session is live in another DSH process without a web server (pid {pid}, profile {}); this process did not resume it.",
            profile(p)
        ),
    })
}

/// A hint for a host error code (rc.8 short codes and v2 namespaced codes).
fn rejection_hint(code: &str) -> Option<&'static str> {
    // rc.8 [R8 `host/apiproxy/src/api-proxy.ts` `prompt`, `turnAgentFor`]; v2 [Z17
    // `packages/api/session-controller/src/commands.ts` `prompt`, `agent.ts` `resolve`; `api/gateway/src/index.ts`].
    Some(match code {
        "session-not-found" | "session/not-found" => {
            "The host has no such session (deleted, or it belongs to another DSH instance). Re-run sessions_list."
        }
        "agent-busy" | "session/agent-busy" => {
            "The host would not take it now: the session is owned by a subagent relation, or its agent refused the prompt. Subagent sessions cannot be messaged from here."
        }
        "session/writer-held" => {
            "Another DSH process holds this session's write lock; it can only be messaged through that process."
        }
        "model-unavailable" | "session/model-unavailable" => {
            "That session's model is not served by this host; the user has to select a model for it first."
        }
        "invalid-time-zone" | "session/invalid-time-zone" | "attachment-error" | "session/attachment-invalid" => {
            "The host refused the prompt's content."
        }
        c if c.starts_with("gateway/") || c == "bad-request" => {
            "The host's API refused the call itself (a host/plugin generation mismatch? check hostApi)."
        }
        _ => return None,
    })
}

/// `{ok:false, error:{code, message}}`, in the host's own words.
pub fn rejected(code: &str, message: &str, after_ambiguous: bool, request_id: &str) -> String {
    let msg = if message.trim().is_empty() {
        "(no message)"
    } else {
        message.trim()
    };
    let mut more = Vec::new();
    if let Some(h) = rejection_hint(code) {
        more.push(h.to_string());
    }
    if after_ambiguous {
        more.push("note: an earlier attempt got no clear answer before this refusal; check with sessions_read whether it landed before sending again.".into());
    }
    more.push(format!("request: {request_id}"));
    refused(
        "rejected",
        &format!("the host refused the message: {code}: {msg}"),
        &more,
    )
}

/// A delivery that reached no decision of the host.
pub fn failure(f: &Failure, c: &DeliveryContext) -> String {
    let req = format!("request: {}", c.request_id);
    match f {
        Failure::BadBaseUrl(why) => refused(
            "unreachable",
            &format!("the host's web server address is unusable: {why}."),
            &[
                "Nothing was sent.".into(),
                req,
            ],
        ),
        Failure::NoSecret(why) => refused(
            "auth-failed",
            &format!("cannot sign the request for this host (DSH 0.1.2+ needs its browser-session cookie): {why}."),
            &[
                "Nothing was sent. Start the web connection once (or set hostApi: rc8 for a 0.1.0/0.1.1 host).".into(),
                req,
            ],
        ),
        Failure::Unauthorized => refused(
            "auth-failed",
            "the host refused the session cookie (HTTP 401).",
            &[
                "The browser-session secret may be stale: the host loads it once at start, so a secret that changed since (or a host started with another DSH_HOME) no longer matches; restarting DSH reloads it.".into(),
                "Nothing was delivered.".into(),
                req,
            ],
        ),
        Failure::Forbidden(body) => refused(
            "forbidden",
            &format!("the host's Host/Origin fence refused the request (HTTP 403{}).", if body.is_empty() { String::new() } else { format!(": {body}") }),
            &[
                "The plugin calls the host only on loopback; check that the web server listens on 127.0.0.1 or localhost (or add the address to trustedHosts). Nothing was delivered.".into(),
                req,
            ],
        ),
        Failure::HostDown(why) => refused(
            "unreachable",
            &format!("the host's web server at {} is down or not listening ({why}).", c.base_url),
            &[
                "Nothing was sent; try again once DSH is running.".into(),
                req,
            ],
        ),
        Failure::ConnectTimeout => refused(
            "unreachable",
            &format!("connecting to the host's web server at {} timed out after {} ms.", c.base_url, c.connect_timeout_ms),
            &[
                "Nothing was sent.".into(),
                req,
            ],
        ),
        Failure::ProbeNoAnswer(why) => refused(
            "unreachable",
            &format!("the host did not answer host.describe ({why})."),
            &[
                "Nothing was sent. Setting hostApi to rc8 or v2 skips this probe.".into(),
                req,
            ],
        ),
        Failure::HostError { status, body } => refused(
            "unreachable",
            &format!("the host failed with HTTP {status}{}.", if body.is_empty() { String::new() } else { format!(" ({body})") }),
            &[
                format!("The message was probably not delivered; check with sessions_read {{\"session_id\":{}}} before sending it again.", quote(&c.target)),
                req,
            ],
        ),
        Failure::Carrier { status, body } => refused(
            "unreachable",
            &format!("the host's prompt route answered HTTP {status}{}.", if body.is_empty() { String::new() } else { format!(" ({body})") }),
            &[
                "The message was not delivered. If the host generation is wrong, set hostApi (rc8 for 0.1.0/0.1.1, v2 for 0.1.2 and later).".into(),
                req,
            ],
        ),
        Failure::MayHaveLanded(u) => may_have_landed(u, c),
    }
}

/// `refused (unreachable): the message MAY have landed …`: it went out, and neither the lookup nor the
/// one resend settled it.
fn may_have_landed(u: &Unsettled, c: &DeliveryContext) -> String {
    refused(
        "unreachable",
        &format!("the message MAY have landed in {}: {}.", c.target, unsettled(u)),
        &[
            format!(
                "It was not sent again blindly. Check with sessions_read {{\"session_id\":{}}}: a landed copy shows request={} in its source label. Send it again only if it is not there.",
                quote(&c.target),
                c.request_id
            ),
            format!("request: {}", c.request_id),
        ],
    )
}

/// `refused (unreachable): the message MAY have landed …`: handed to the owner's mailbox, and the receipt
/// there cannot be read, so what the owner's host did is not known (never "waits" or "delivered").
fn receipt_unreadable(u: &UnreadableReceipt) -> String {
    refused(
        "unreachable",
        &format!(
            "the message MAY have landed in {}: it was handed to the mailbox of the DSH process that holds that session (pid {}, profile {}), but the receipt found there for it cannot be read ({}).",
            u.target,
            u.pid,
            u.profile.as_deref().unwrap_or("(unknown)"),
            receipt_error(&u.why)
        ),
        &[
            format!(
                "It was not sent again: that process may have delivered it, or its host may have refused it, and that receipt cannot say which. Check with sessions_read {{\"session_id\":{}}}: a landed copy shows request={} in its source label. Send it again only if it is not there.",
                quote(&u.target),
                u.request_id
            ),
            format!("request: {}", u.request_id),
        ],
    )
}

/// `refused (unreachable): …` for a send routed to the web server of a process that is stopping
/// (`SendOutcome::OwnerStopping`): what the failure says — nothing sent, or it MAY have landed — then
/// that process is stopping, and to send again only once it has exited.
fn owner_stopping(o: &StoppingOwner) -> String {
    let c = &o.context;
    let owner = format!(
        "pid {}, profile {}",
        o.pid,
        o.profile.as_deref().unwrap_or("(unknown)")
    );
    let request = format!("request: {}", c.request_id);
    match &o.failure {
        Failure::MayHaveLanded(u) => refused(
            "unreachable",
            &format!(
                "the message MAY have landed in {}: {}. The DSH process that holds it ({owner}) is stopping: its web server at {} went away while the message was on its way.",
                c.target,
                unsettled(u),
                c.base_url
            ),
            &[
                format!(
                    "It was not sent again blindly, and that process takes no more messages. Once it has exited (in a few seconds), check with sessions_read {{\"session_id\":{}}}: a landed copy shows request={} in its source label. Send it again only if it is not there (the session is then woken here).",
                    quote(&c.target),
                    c.request_id
                ),
                request,
            ],
        ),
        f => refused(
            "unreachable",
            &format!(
                "the DSH process that holds {} ({owner}) is stopping: its web server at {} took no connection ({}).",
                quote(&c.target),
                c.base_url,
                brief(f)
            ),
            &[
                "Nothing was sent, and that process takes no more messages; this process will not resume the session before that process has exited.".into(),
                "Send it again in a few seconds, once that process has exited (the session is then woken here).".into(),
                request,
            ],
        ),
    }
}

/// Why a receipt cannot be read, inside the sentence of [`receipt_unreadable`] (never the file's text).
fn receipt_error(e: &ReceiptError) -> String {
    match e {
        ReceiptError::Shard(r) => format!("its mailbox folder {r}"),
        ReceiptError::File(r) => format!("it {r}"),
        ReceiptError::Io(e) => format!("reading it failed: {e}"),
        ReceiptError::NotAReceipt {
            json: false,
            line,
            column,
        } => format!("it is not valid JSON: line {line}, column {column}"),
        ReceiptError::NotAReceipt { line, column, .. } => {
            format!("it is JSON but not a receipt this version reads: line {line}, column {column}")
        }
        ReceiptError::NotThisRequest => "it is the receipt of another request or session".into(),
    }
}

/// Why an attempt that went out got no clear answer (the system's words for a failed exchange).
fn unclear(u: &Unclear) -> String {
    match u {
        Unclear::Net(e) => e.to_string(),
        Unclear::NotAResponse { body } => format!(
            "the host answered HTTP 200 with something that is not a server-response ({body})"
        ),
    }
}

/// Why `session.history` could not settle a request id (the host's words scrubbed).
fn lookup_error(l: &LookupError) -> String {
    match l {
        LookupError::Net(e) => e.to_string(),
        LookupError::Status(status) => format!("session.history answered HTTP {status}"),
        LookupError::Refused { code, message } => {
            base::scrub::scrub(&format!("session.history refused: {code}: {message}"))
        }
        LookupError::Unreadable => "session.history answered something unreadable".into(),
    }
}

/// The first attempt's reason, then what the lookup or the one resend did.
fn unsettled(u: &Unsettled) -> String {
    let first = unclear(&u.first);
    match &u.then {
        Then::LookupFailed(l) => format!(
            "{first}; looking the request id up failed too ({}), so it was not sent again",
            lookup_error(l)
        ),
        Then::ResendUnclear(w) => format!(
            "{first}; the one resend with the same request id got no clear answer either ({})",
            unclear(w)
        ),
        Then::ResendFailed(f) => format!(
            "{first}; the one resend with the same request id failed ({})",
            brief(f)
        ),
        Then::ResendStatus(status) => {
            format!("{first}; the one resend with the same request id got HTTP {status}")
        }
    }
}

/// A failure in a few words, inside another sentence (a resend that failed).
pub fn brief(f: &Failure) -> String {
    match f {
        Failure::BadBaseUrl(w) => w.to_string(),
        Failure::NoSecret(w) => format!("no usable browser-session secret: {w}"),
        Failure::Unauthorized => "HTTP 401, the cookie was refused".into(),
        Failure::Forbidden(_) => "HTTP 403, the Host/Origin fence refused the request".into(),
        Failure::HostDown(w) => format!("the host could not be reached: {w}"),
        Failure::ConnectTimeout => "connecting to the host timed out".into(),
        Failure::ProbeNoAnswer(w) => format!("host.describe got no clear answer: {w}"),
        Failure::HostError { status, .. } => format!("HTTP {status} from the host"),
        Failure::Carrier { status, .. } => format!("HTTP {status} from the host"),
        Failure::MayHaveLanded(u) => unsettled(u),
    }
}

/// The receipt of a send held for the human.
fn held(h: &crate::outcome::HeldReceipt) -> String {
    let mut out = format!(
        "held for the human: {} | mode={} | chars={}\nNothing was delivered yet: the human who owns that session reviews agent mail before it lands. It lands only if they approve it; a rejected message never lands. Do not send it again.",
        h.target,
        h.mode.as_str(),
        h.chars
    );
    if let Some(why) = &h.unverified {
        out.push_str(&format!("\n(The inbound policy could not be verified: {why}; every message waits for the human.)"));
    }
    out.push_str(&format!("\nrequest: {}", h.request_id));
    out
}

/// The text of a send: the receipt or refusal, its `note:` lines before the `request:` line.
pub fn result(r: &SendResult) -> String {
    let mut out = match &r.outcome {
        SendOutcome::Accepted(receipt) => accepted(receipt),
        SendOutcome::Held(h) => held(h),
        SendOutcome::Refused(refusal) => refusal.render(),
        SendOutcome::MayHaveLanded { why, context } => may_have_landed(why, context),
        SendOutcome::ReceiptUnreadable(u) => receipt_unreadable(u),
        SendOutcome::OwnerStopping(o) => owner_stopping(o),
        SendOutcome::Remote(r) => crate::render::remote::receipt(r),
    };
    for n in &r.notes {
        out = with_note(out, &note(n));
    }
    out
}

/// The text of a `note:` line (without `note: `).
pub fn note(n: &SendNote) -> String {
    match n {
        SendNote::LedgerNotWritten(why) => format!("audit ledger not written: {why}"),
        SendNote::CredentialsExposed(e) => e.to_string(),
        SendNote::RelayHop { hop, max } => format!(
            "relay hop {hop} of {max} in this agent-to-agent chain; past {max}, sends are refused until a human writes. Wrap up and report to your human."
        ),
        SendNote::AwaitingUser => "that session is waiting on its human (an open question or approval): nothing lands before the human answers.".into(),
        SendNote::QueuedInMemory { pid, step } => format!(
            "in memory: until {} it waits in that session's inbox, which lives in the memory of {}; if that process stops or crashes first, the session's next holder delivers it once (verify shows where it is).",
            if *step { "its next step starts" } else { "its turn starts" },
            pid.map_or("this DSH process".to_string(), |p| format!("DSH process pid {p}"))
        ),
        SendNote::QueuedNotRecorded(why) => {
            let why = match why {
                Unrecorded::NoLedgerLine => "the audit ledger line a re-delivery is checked against was not written".to_string(),
                Unrecorded::Record(e) => e.to_string(),
            };
            format!(
            "in memory: until the session takes it, it waits in the memory of the process holding that session, and its re-delivery record could not be written ({why}): if that process stops first, this message is lost."
        )
        }
    }
}

/// `refused (relay-limit)`: the loop guard (`mail::chain`) stopped an agent-to-agent relay.
pub fn relay_limit(h: &crate::mail::chain::Hop, max: u32) -> String {
    use crate::mail::chain::Unverified;
    if let Some(why) = h.unverified {
        let why = match why {
            Unverified::UnknownRequest => {
                "the audit ledger has no send of that request id to this session"
            }
            Unverified::Contradicted => {
                "the audit ledger's lines for that request id disagree about its chain"
            }
        };
        return format!(
            "refused (relay-limit): this turn was opened by agent mail (request {}) whose place in a conversation chain cannot be verified: {why}. Mail that cannot be verified counts as at the limit of {max} (maxRelayHops).\n\
             Do not relay it. Take it to your human instead. Nothing was sent; a new message from your human starts a new chain.",
            h.chain
        );
    }
    let via = if h.sessions.is_empty() {
        String::new()
    } else {
        format!(" through {}", h.sessions.join(", "))
    };
    let since = h
        .started
        .as_deref()
        .map(|t| format!(" since {t}"))
        .unwrap_or_default();
    format!(
        "refused (relay-limit): this would be agent-to-agent delivery {} in one conversation chain (started by {}{since}{via}); the limit is {max} (maxRelayHops) until a human writes in it.\n\
         Stop relaying. Take the conclusion, or the open question, to your human instead. Nothing was sent; a new message from your human starts a new chain.",
        h.hop, h.chain
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAST: &str = "This process will not resume it: two writers would fork its history. Nothing was sent.\nSend from a session in that process, open that process's profile with its web server, or close that session there and send again (it is then woken here).";

    /// The words of `held-elsewhere` are made here from its data (owner, why), byte for byte as before.
    #[test]
    fn held_elsewhere_text_from_its_owner_and_reason() {
        let cases = [
            (
                Owner::Process { pid: 777, profile: Some("web".into()) },
                HeldWhy::NoRoute,
                "refused (held-elsewhere): \"session-b\" is live in another DSH process (pid 777, profile web), and that process has no web server this process could hand the message to, and its plugin does not drain a mailbox (an older version).",
            ),
            (
                Owner::Process { pid: 9, profile: None },
                HeldWhy::MailboxRefused(Box::new(MailboxRefusal::Post(PostError::Io(
                    std::io::Error::other("disk full").into(),
                )))),
                "refused (held-elsewhere): \"session-b\" is live in another DSH process (pid 9, profile (unknown)), and its mailbox could not take the message (disk full).",
            ),
            (
                Owner::Unpublished,
                HeldWhy::WriterHeld,
                "refused (held-elsewhere): \"session-b\" is live in another DSH process (one that publishes no presence here: this plugin is not mounted there, or it is not running it), and the host refused the message with session/writer-held, so no process on this home can route it there.",
            ),
            (
                Owner::Unknown,
                HeldWhy::MailboxRefused(Box::new(MailboxRefusal::Late)),
                "refused (held-elsewhere): \"session-b\" is live in another DSH process (), and its mailbox could not take the message (writing under DSH_HOME did not finish in time).",
            ),
            (
                Owner::Unknown,
                HeldWhy::MailboxRefused(Box::new(MailboxRefusal::Post(PostError::Full(64)))),
                "refused (held-elsewhere): \"session-b\" is live in another DSH process (), and its mailbox could not take the message (64 messages already wait there undelivered; try again once that session has taken them).",
            ),
            (
                Owner::Unknown,
                HeldWhy::MailboxRefused(Box::new(MailboxRefusal::Post(PostError::TooLarge(2_000_000)))),
                "refused (held-elsewhere): \"session-b\" is live in another DSH process (), and its mailbox could not take the message (the message is 2000000 bytes, over the mailbox's 1.0 MiB cap; send a shorter one).",
            ),
            (
                Owner::Unknown,
                HeldWhy::MailboxRefused(Box::new(MailboxRefusal::Post(PostError::BadId))),
                "refused (held-elsewhere): \"session-b\" is live in another DSH process (), and its mailbox could not take the message (its id cannot name a mailbox folder).",
            ),
        ];
        for (owner, why, first) in cases {
            assert_eq!(
                held_elsewhere("session-b", &owner, &why),
                format!("{first}\n{LAST}")
            );
        }
    }

    /// A stopping owner: the same code and first hint, the reason and what to do true to it.
    #[test]
    fn held_elsewhere_by_a_stopping_process_says_to_send_again_once_it_has_exited() {
        assert_eq!(
            held_elsewhere(
                "B",
                &Owner::Process { pid: 4242, profile: Some("web".into()) },
                &HeldWhy::Stopping
            ),
            "refused (held-elsewhere): \"B\" is live in another DSH process (pid 4242, profile web), and that process is stopping: it takes no more messages, and this process will not resume the session before that process has exited.\n\
             This process will not resume it: two writers would fork its history. Nothing was sent.\n\
             Send it again in a few seconds, once that process has exited (the session is then woken here)."
        );
    }
}
