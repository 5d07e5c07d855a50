//! The tools across linked machines (issue 31), over the seam the binding hands down
//! ([`crate::machine::Machines`]):
//!
//! - [`serve`] — a request that arrived from a linked machine, run by this home's own tools: a listing
//!   and a read as a local call makes them (no caller), a send through this home's whole send path
//!   (`tools::send::CHECKS`: the human's policy with the machine's rule, stop-all, hold, budgets and the
//!   machine's own budget, header guard, frame, loop guard) with the sender's request id, chain and hop,
//!   after the sender id is checked ([`crate::crossing::foreign`]) and the request id claimed durably
//!   ([`crate::crossing::arrivals`]): a linked machine can do nothing here that a local agent could not,
//!   and a message delivered again lands once.
//! - [`run_result`] — a tool call that may reach linked machines: `sessions_list` adds their sessions,
//!   `sessions_read` and both send tools go to the machine that holds the session.
//! - [`drain`] — the outbox, delivered (the binding's tick) or expired.
//! - [`verify`] — what became of a message sent to a linked machine.
//!
//! Above `render` (a read window is cut there as a local read cuts it) and `tools`.

#[cfg(test)]
mod tests;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use serde_json::{json, Value};

use crate::code::FateState;
use crate::code::RefusalCode;
use crate::crossing::{self, arrivals, fates, foreign, outbox};
use crate::delivery::Mode;
use crate::fate;
use crate::machine::wire::{
    self, Landing, ListAnswer, ReadAnswer, Request, Response, SendAnswer, SendReq, VerifyAnswer,
    WireHead, WireMessage, WireMode, WireRefusal, WireRow,
};
use crate::machine::{CallError, Machine, MachineId, Machines};
use crate::outcome::{
    Refusal, RemoteFate, RemoteReceipt, RemoteRefusal, Route, SendOutcome, SendResult,
};
use crate::request::{Caller, Incoming, ToolRequest};
use crate::tool::{SendTool, Tool};
use crate::tools::list::{Candidate, ListRow, Liveness, MachineNote, MachineTrouble, Selection};
use crate::tools::read::{Hidden, ReadHead, ReadMessage, ReadResult, Window};
use crate::tools::{self, send, ToolResult};

/// How long a listing waits for the linked machines (each in parallel); a machine that has not
/// answered by then is a note, never a failure of the listing.
pub const LIST_DEADLINE: Duration = Duration::from_secs(3);
/// How long a read of a session on a linked machine may take.
pub const READ_DEADLINE: Duration = Duration::from_secs(15);
/// How long a lookup of which machine holds a session may take.
pub const FIND_DEADLINE: Duration = Duration::from_secs(2);
/// A send waits for the far side's answer this long beyond the host's own `requestTimeoutMs`; past it
/// the message goes to the outbox (it may have arrived: the far side lands it once either way).
pub const SEND_SLACK: Duration = Duration::from_secs(5);

fn home_of(req: &ToolRequest) -> PathBuf {
    store::resolve_dsh_home(req.host.dsh_home.as_deref())
}

// ---------------------------------------------------------------- the serving side

/// Serve one request that arrived from linked machine `from` (the binding resolved `from` from the
/// connection's verified endpoint id and its links; an unlinked peer never gets here). `here` is what
/// the serving process knows of itself, as for a tool call of its own (config, host facts, live
/// sessions); its tool, arguments and caller are ignored.
pub async fn serve(here: &ToolRequest, from: &Machine, req: Request) -> Response {
    let home = home_of(here);
    serve_at(
        &home,
        from,
        req,
        None,
        std::future::ready(Some(here.clone())),
    )
    .await
    .unwrap_or_else(|| Response::Refused(WireRefusal::code(RefusalCode::Busy)))
}

/// [`serve`] in `home` while this process's host facts are still being asked for (`here`: the
/// binding's question to its host; `None` when it did not answer in time). A send from a sender this
/// home has recorded as that machine's starts its fsynced claim at once, beside the question (the
/// claim needs only the home, not the host): the fsync and the host's answer overlap; its checks begin
/// then too, with `last` (the previous send's facts), kept only when `here` equals them. A read starts
/// with `last` ([`serve_read_asking`]); anything else waits for `here`. `None`: the host's facts did not come (nothing was delivered, no claim is left).
async fn serve_at<F>(
    home: &Path,
    from: &Machine,
    req: Request,
    last: Option<ToolRequest>,
    here: F,
) -> Option<Response>
where
    F: Future<Output = Option<ToolRequest>>,
{
    Some(match req {
        Request::Send(s) => Response::Send(serve_send(home, last, here, from, s).await?),
        Request::List { args } => serve_list(&here.await?, args).await,
        Request::Read { args } => serve_read_asking(last, here, args).await?,
        Request::Verify { request_id } => serve_verify(&here.await?, from, request_id).await,
    })
}

/// [`serve_value`] for the binding: the frame of linked machine `from` served in `home`, with this
/// process's host facts asked for meanwhile (`here`, as [`serve_at`]). `None`: they did not come in
/// time — the binding refuses the request `unavailable` (nothing delivered, nothing claimed). `last`: the
/// facts the host gave at the previous request of its kind, with which a read starts early
/// ([`serve_read_asking`]) and a send's checks begin at arrival ([`serve_send`]: the previous send's
/// facts), kept only when the host's answer equals them.
pub async fn serve_value_at<F>(
    home: &Path,
    from: &Machine,
    frame: Value,
    last: Option<ToolRequest>,
    here: F,
) -> Option<Value>
where
    F: Future<Output = Option<ToolRequest>>,
{
    let resp = match wire::request_from_value(frame) {
        Ok(req) => serve_at(home, from, req, last, here).await?,
        Err(_) => Response::Refused(WireRefusal::code(RefusalCode::BadArgument)),
    };
    Some(wire::encode_value(&resp))
}

/// What the binding asks its host for when a frame arrives (`here`, the shim's answer on its own thread),
/// read from the frame before the core decodes the same value: a read names its session (the host flushes
/// it and reports its length, as for a local read); a send names its target and sender — the facts a local
/// send reads (the target's live entry alone, no file activity of every live session), plus the sender's
/// entry when it is live there (a foreign sender id must never be a session of this home); anything else
/// (a listing, a verify, a frame that does not decode) asks for every live session. JSON for the shim
/// (lib/machines.js), empty fields left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Ask {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
}

impl Ask {
    /// The ask of a frame `{v, body: {op, ...}}` (as [`serve_value_at`] decodes it).
    pub fn of(frame: &Value) -> Ask {
        let body = frame.get("body");
        let op = body.and_then(|b| b.get("op")).and_then(Value::as_str);
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        match op {
            Some("read") => Ask {
                read: text(body.and_then(|b| b.pointer("/args/session_id"))),
                ..Ask::default()
            },
            Some("send") => match text(body.and_then(|b| b.get("target"))) {
                Some(target) => Ask {
                    send: Some(target),
                    sender: text(body.and_then(|b| b.get("sender"))),
                    ..Ask::default()
                },
                None => Ask::default(),
            },
            _ => Ask::default(),
        }
    }
    /// Asks for a send's facts alone (not what a later read may start with).
    pub fn is_send(&self) -> bool {
        self.send.is_some()
    }
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }
}

/// [`serve`] over bytes: a frame in, a frame out (a frame that does not decode is answered
/// `bad-argument`, nothing run).
pub async fn serve_bytes(here: &ToolRequest, from: &Machine, bytes: &[u8]) -> Vec<u8> {
    let resp = match wire::decode_request(bytes) {
        Ok(req) => serve(here, from, req).await,
        Err(_) => Response::Refused(WireRefusal::code(RefusalCode::BadArgument)),
    };
    wire::encode(&resp)
}

/// [`serve`] of a frame carried as a JSON value (the transport's `Handler` in `crates/link`).
pub async fn serve_value(here: &ToolRequest, from: &Machine, frame: Value) -> Value {
    let resp = match wire::request_from_value(frame) {
        Ok(req) => serve(here, from, req).await,
        Err(_) => Response::Refused(WireRefusal::code(RefusalCode::BadArgument)),
    };
    wire::encode_value(&resp)
}

/// A read while this process's host facts are still being asked for (`here`, on the host's thread: the
/// binding's `here_of`). It starts at once, beside the question, with the facts of the previous request
/// (`last`) as for a session not live in this process (unless it was live in `last`: then it most likely is
/// now, and the early read would be thrown away); that answer is kept only when the host's answer says the
/// same — the session is not live here (nothing to flush: the host flushes a live one before it answers,
/// and the read is then run again, after the flush, with its length) and the configuration and home are
/// those of `last`. Otherwise the read runs after the host's answer. `None`: the host did not answer (the
/// request is refused by the caller, never answered from stale facts).
async fn serve_read_asking<F>(last: Option<ToolRequest>, here: F, args: Value) -> Option<Response>
where
    F: Future<Output = Option<ToolRequest>>,
{
    let id = args
        .get("session_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    let live_last = |l: &ToolRequest| {
        id.as_deref()
            .is_some_and(|id| l.live.iter().any(|s| s.id == id))
    };
    let early = match last {
        Some(mut last) if !live_last(&last) => {
            let (config, home) = (last.config.clone(), last.host.dsh_home.clone());
            last.live.clear();
            last.live_seq = None;
            last.live_flushed = None;
            let args = args.clone();
            let task = tokio::spawn(async move { serve_read(&last, args).await });
            Some((task, config, home))
        }
        _ => None,
    };
    let Some(here) = here.await else {
        if let Some((task, ..)) = early {
            task.abort();
        }
        return None;
    };
    if let Some((task, config, home)) = early {
        let cold_here = here.live_seq.is_none()
            && here.live_flushed.is_none()
            && id
                .as_deref()
                .is_none_or(|id| here.live.iter().all(|l| l.id != id));
        if cold_here && here.config == config && here.host.dsh_home == home {
            if let Ok(resp) = task.await {
                return Some(resp);
            }
        } else {
            task.abort();
        }
    }
    Some(serve_read(&here, args).await)
}

/// Do facts `a` and `b` make the same arriving send's request ([`local_send`])? Every field of the
/// request but those [`local_send`] sets from the frame itself (tool, arguments, caller, the arrival) or
/// clears (a read's length): the configuration, the host's fields (home, secret, web server, version,
/// profile, startedAt) and the live entries (the target's and the sender's: status, pending ids,
/// header), the presence given. Destructured whole, so a field added to the request is a compile error
/// here until it is compared or shown to be set from the frame: a missed one would let a send be
/// planned from stale facts.
fn same_send_facts(a: &ToolRequest, b: &ToolRequest) -> bool {
    let ToolRequest {
        tool: _,
        args: _,
        caller: _,
        config,
        host,
        live,
        live_seq: _,
        live_flushed: _,
        peers,
        incoming: _,
    } = a;
    *config == b.config && *host == b.host && *live == b.live && *peers == b.peers
}

/// The request this home's send path runs for arriving send `s`, with facts `here`: the frame's
/// arguments as a model would have written them, its sender as the caller, its machine, request id,
/// chain and hop.
fn local_send(here: &ToolRequest, from: &Machine, s: &SendReq) -> ToolRequest {
    let tool = match s.tool {
        wire::WireTool::SessionsSend => Tool::SessionsSend,
        wire::WireTool::SendSessionMessage => Tool::SendSessionMessage,
    };
    let mut req = as_local(here, tool, send_args(s));
    req.caller = Some(Caller {
        session_id: Some(s.sender.clone()),
        agent_id: None,
        // the sender's title as its machine gave it (the frame's `from-session`); never looked up here
        title: Some(s.sender_title.clone().unwrap_or_default()),
        turn: None,
    });
    req.incoming = Some(Incoming {
        machine: from.id.clone(),
        request_id: s.request_id.clone(),
        chain: s.chain.clone(),
        hop: s.hop,
    });
    req
}

fn as_local(here: &ToolRequest, tool: Tool, args: Value) -> ToolRequest {
    let mut r = here.clone();
    r.tool = tool.name().to_string();
    r.args = args;
    r.caller = None;
    r.live_seq = None;
    r.live_flushed = None;
    r.incoming = None;
    r
}

async fn serve_list(here: &ToolRequest, mut args: Value) -> Response {
    // the caller's repository means nothing here
    if let Some(o) = args.as_object_mut() {
        o.remove("repo_only");
    }
    let r = as_local(here, Tool::SessionsList, args);
    match tools::list::run_result(&r).await {
        Ok(sel) => Response::List(ListAnswer {
            rows: sel.rows.iter().take(wire::MAX_ROWS).map(wire_row).collect(),
            considered: sel.considered as u64,
            unreadable: sel.notes.len() as u64,
        }),
        Err(refusal) => Response::Refused(wire_refusal(&refusal)),
    }
}

fn wire_row(c: &Candidate) -> WireRow {
    let r = &c.row;
    let status = match &r.liveness {
        Liveness::Cold => None,
        Liveness::Live(s) => Some(s.clone()),
        Liveness::Elsewhere { status, .. } => Some(status.clone()),
    };
    WireRow {
        id: r.id.clone(),
        live: r.liveness.is_live(),
        status: status.filter(|s| !s.is_empty()),
        subagent: r.subagent,
        parent: r.parent.clone(),
        cwd: r.cwd.clone(),
        preset: r.preset.clone(),
        title: r.title.clone(),
        created_at: c.created_at,
    }
}

async fn serve_read(here: &ToolRequest, args: Value) -> Response {
    let mut r = as_local(here, Tool::SessionsRead, args);
    // the binding asked the serving host with this read's session: it flushed it and reported its
    // length, as for a local read (without, a live session's newest turns may not be in its log yet)
    r.live_seq = here.live_seq;
    r.live_flushed = here.live_flushed;
    match tools::read::run_result(&r).await {
        Ok(res) => {
            let w = &res.window;
            let h = &w.head;
            let answer = Response::Read(ReadAnswer {
                head: WireHead {
                    id: h.id.clone(),
                    live: h.live,
                    subagent: h.subagent,
                    parent: h.parent.clone(),
                    cwd: h.cwd.clone(),
                    title: h.title.clone(),
                    readable: h.readable as u64,
                    captured_through: h.captured_through,
                    since: h.since,
                },
                messages: w
                    .messages
                    .iter()
                    .take(wire::MAX_MESSAGES)
                    .map(|m| WireMessage {
                        role: m.role.to_string(),
                        seq: m.seq,
                        label: m.label.clone(),
                        request: m.request.clone(),
                        injected: m.injected,
                        replaced: m.replaced,
                        error: m.error,
                        // cut here, by this machine's maxMessageChars, as a local read cuts it
                        body: crate::render::read::truncate_body(
                            &m.body,
                            res.max_chars.min(wire::MAX_BODY - 64),
                        ),
                    })
                    .collect(),
                omitted: w.omitted as u64,
                hidden_injected: w.hidden.injected as u64,
                hidden_system: w.hidden.system as u64,
                notes: w.notes.iter().take(16).cloned().collect(),
            });
            fit_read(answer)
        }
        Err(refusal) => Response::Refused(wire_refusal(&refusal)),
    }
}

/// Keep a read answer under [`wire::MAX_RESPONSE_BYTES`]: the oldest messages of the window leave it
/// first and are counted as omitted (the caller's text then says `(N earlier messages omitted)`), as a
/// smaller `max_messages` would have left them out.
fn fit_read(answer: Response) -> Response {
    let Response::Read(mut a) = answer else {
        return answer;
    };
    let room = wire::MAX_RESPONSE_BYTES - 64 * 1024;
    // most windows are far under the bound: an upper bound of their JSON, from the lengths alone, spares
    // serializing every message once more only to measure it
    let bound = json_bound_head(&a.head)
        + a.notes.iter().map(|n| json_bound(n) + 3).sum::<usize>()
        + a.messages.iter().map(json_bound_message).sum::<usize>();
    if bound <= room {
        return Response::Read(a);
    }
    let size = |m: &WireMessage| serde_json::to_vec(m).map_or(usize::MAX, |b| b.len() + 1);
    let mut total: usize = serde_json::to_vec(&a.head).map_or(0, |b| b.len())
        + a.notes.iter().map(|n| n.len() + 3).sum::<usize>()
        + a.messages.iter().map(size).sum::<usize>();
    // messages are newest first: the last is the oldest
    while total > room {
        let Some(m) = a.messages.pop() else { break };
        total = total.saturating_sub(size(&m));
        a.omitted += 1;
    }
    Response::Read(a)
}

/// At least the bytes of `s` as a JSON string: each byte is at most 6 escaped (`\u001f`), plus quotes.
fn json_bound(s: &str) -> usize {
    6 * s.len() + 2
}

/// An upper bound of [`WireMessage`]'s JSON: its strings escaped at worst, its keys, numbers (20
/// digits at most) and booleans in a fixed allowance (they take under 160 bytes).
fn json_bound_message(m: &WireMessage) -> usize {
    json_bound(&m.role)
        + json_bound(&m.label)
        + m.request.as_deref().map_or(0, json_bound)
        + json_bound(&m.body)
        + 256
}

/// An upper bound of [`WireHead`]'s JSON, as [`json_bound_message`].
fn json_bound_head(h: &WireHead) -> usize {
    [&h.parent, &h.cwd, &h.title]
        .into_iter()
        .map(|s| s.as_deref().map_or(0, json_bound))
        .sum::<usize>()
        + json_bound(&h.id)
        + 256
}

/// Does `id` name a session of this home (live in this process, listed by another, or in the store)?
fn is_local(here: &ToolRequest, home: &Path, id: &str) -> bool {
    here.live.iter().any(|l| l.id == id)
        || here
            .peers_at(home)
            .iter()
            .any(|r| r.sessions.iter().any(|s| s.id == id))
        || store::find_session(home, id).is_some()
}

/// The refusal an answer carries, typed.
pub fn wire_refusal(r: &Refusal) -> WireRefusal {
    let mut w = WireRefusal::code(r.code());
    match r {
        Refusal::RelayLimit { hop, max } => {
            w.hop = Some(hop.hop);
            w.max = Some(*max);
        }
        Refusal::Budget { exceeded, .. } => w.retry_at_ms = Some(exceeded.next_at_ms),
        Refusal::MachineBudget(b) => {
            w.retry_at_ms = Some(b.next_at_ms);
            w.machine_budget = true;
        }
        Refusal::ForeignSender { why, .. } => w.foreign = Some(*why),
        Refusal::Remote(r) => return r.refusal.clone(),
        _ => {}
    }
    w
}

/// What a send result here says to the machine it came from.
fn landing_of(r: &SendResult) -> Landing {
    match &r.outcome {
        SendOutcome::Accepted(rc) => Landing::Accepted {
            woke: rc.woke(),
            waiting: matches!(
                rc.route,
                Route::Mailbox {
                    answered: false,
                    ..
                }
            ),
        },
        SendOutcome::Held(_) => Landing::Held,
        SendOutcome::Refused(rf) => Landing::Refused(wire_refusal(rf)),
        SendOutcome::MayHaveLanded { .. } | SendOutcome::ReceiptUnreadable(_) => {
            Landing::MayHaveLanded
        }
        SendOutcome::OwnerStopping(o) if o.may_have_landed() => Landing::MayHaveLanded,
        SendOutcome::OwnerStopping(_) => {
            Landing::Refused(WireRefusal::code(RefusalCode::Unreachable))
        }
        // an arriving send is never sent on to another machine
        SendOutcome::Remote(_) => Landing::Refused(WireRefusal::code(RefusalCode::Internal)),
    }
}

fn refused_answer(s: &SendReq, w: WireRefusal) -> SendAnswer {
    SendAnswer {
        request_id: s.request_id.clone(),
        landing: Landing::Refused(w),
        hop: s.hop,
        repeated: false,
    }
}

/// The arguments of `tool` for this send, as a model would have written them.
fn send_args(s: &SendReq) -> Value {
    match s.tool {
        wire::WireTool::SessionsSend => json!({
            "session_id": s.target,
            "message": s.body,
            "mode": match s.mode { WireMode::Queue => "queue", WireMode::Steer => "steer" },
        }),
        wire::WireTool::SendSessionMessage => json!({
            "toSessionId": s.target,
            "message": s.body,
            "urgent": s.mode == WireMode::Steer,
        }),
    }
}

/// One ledger line for an arrival refused before the send path ran (every attempt is recorded).
fn ledger_refused(home: &Path, from: &Machine, s: &SendReq, code: RefusalCode, now_ms: i64) {
    let tool = SendTool::from(s.tool);
    let mut e = crate::ledger::Entry::new(
        now_ms,
        Some(&s.sender),
        Some(&s.target),
        tool.name(),
        Some(match s.mode {
            WireMode::Queue => "queue",
            WireMode::Steer => "steer",
        }),
        Some(&s.request_id),
        crate::ledger::LedgerOutcome::Refused(code),
        Some(&s.body),
    );
    e.from_machine = Some(from.id.as_str().to_string());
    let _ = crate::ledger::append(home, &e);
}

/// What an arriving send's first trip to the blocking pool found.
enum Early {
    /// The sender id is recorded as this machine's: claimed (fsynced).
    Claimed(std::io::Result<arrivals::Claim>),
    /// Refused by the foreign check (its ledger line written).
    Foreign(wire::ForeignWhy),
    /// A sender id not recorded yet: its check asks the host whether it is one of ours.
    Unrecorded,
}

async fn serve_send<F>(
    home: &Path,
    last: Option<ToolRequest>,
    here: F,
    from: &Machine,
    s: SendReq,
) -> Option<SendAnswer>
where
    F: Future<Output = Option<ToolRequest>>,
{
    let home = home.to_path_buf();
    let now = base::clock::now_ms();
    if !s.request_id.starts_with(base::names::REQUEST_ID_PREFIX) {
        return Some(refused_answer(
            &s,
            WireRefusal::code(RefusalCode::BadArgument),
        ));
    }
    let arrival = arrivals::Arrival {
        request_id: s.request_id.clone(),
        from: from.id.clone(),
        target: s.target.clone(),
        sender: s.sender.clone(),
        claimed_at: now,
        answer: None,
    };
    // 1. the sender id: never one of ours, never one another machine used first; then
    // 2. the request id, claimed durably (fsynced) before anything is delivered, in the same trip. A
    //    sender recorded as this machine's (every send of it after its first) needs nothing of the host
    //    for 1, so the trip starts now, while the host is asked for its facts.
    let (h, a, f, s2) = (home.clone(), arrival.clone(), from.clone(), s.clone());
    let early = base::offload::start(move || {
        match foreign::recorded(&h, &a.sender, &a.from) {
            Some(Ok(())) => {}
            Some(Err(why)) => {
                ledger_refused(&h, &f, &s2, RefusalCode::ForeignSender, now);
                return Early::Foreign(why);
            }
            None => return Early::Unrecorded,
        }
        Early::Claimed(arrivals::claim(&h, &a, now))
    });
    // 3. This home's own send path, whole: its checks (policy, budgets, the loop guard, the target) go
    // to the blocking pool now, beside the claim and the question, with the facts the host gave for the
    // previous send (`last`); they only read (the budget slot they reserve is in memory), and nothing is
    // delivered before `finish`, which runs only once the claim is on disk and only when the host's
    // answer equals those facts in everything the request carries (`same_send_facts`). Else they are
    // dropped (waited for: their slot is free again) and run again with the host's answer.
    let begin = |facts: &ToolRequest| {
        send::begin(
            std::sync::Arc::new(local_send(facts, from, &s)),
            send::Context::at(home.clone(), now),
        )
    };
    // (facts that name a live session other than this send's target and sender — the previous send went
    // elsewhere — can never equal the host's answer for this one: nothing is begun from them)
    let planned = last
        .filter(|l| l.live.iter().all(|e| e.id == s.target || e.id == s.sender))
        .map(|last| {
            let begun = begin(&last);
            (last, begun)
        });
    // the hop it arrives at (a scan of the ledger for its chain), for the answer: beside everything
    // above and below (started after the claim's trip and the checks, which the delivery waits for)
    let (h, chain, hop) = (home.clone(), s.chain.clone(), s.hop);
    let hop = base::offload::start(move || crossing::arriving_hop(&h, chain.as_deref(), hop));
    let Some(here) = here.await else {
        // no host facts: nothing is delivered, and a claim made meanwhile is taken back (the retry
        // claims anew)
        if let Some((_, begun)) = planned {
            begun.discard().await;
        }
        match early.finish(tools::STORE_DEADLINE).await {
            Ok(Early::Claimed(Ok(arrivals::Claim::New))) => {
                let (h, a) = (home.clone(), arrival.clone());
                let _ = tools::blocking(move || arrivals::release(&h, &a)).await;
            }
            // refused by its record: the refusal needs nothing of the host
            Ok(Early::Foreign(why)) => {
                let mut w = WireRefusal::code(RefusalCode::ForeignSender);
                w.foreign = Some(why);
                return Some(refused_answer(&s, w));
            }
            _ => {}
        }
        return None;
    };
    // the early checks are kept only when the host's facts are those they ran with; else (or with no
    // facts kept) they run now, beside the claim. A send refused at 1 or 2 drops them unused.
    let begun = match planned {
        Some((last, begun)) if same_send_facts(&last, &here) => begun,
        Some((_, stale)) => {
            stale.discard().await;
            begin(&here)
        }
        None => begin(&here),
    };
    let early = early.finish(tools::STORE_DEADLINE).await.map_err(|_| ());
    let claimed = match early {
        Ok(Early::Claimed(claim)) => Ok(Ok(claim)),
        Ok(Early::Foreign(why)) => Ok(Err(why)),
        // a sender id first seen here: 1 and 2 in one trip, now that the host's live sessions are known
        Ok(Early::Unrecorded) => {
            let (h, hr, a, f, s2) = (
                home.clone(),
                here.clone(),
                arrival.clone(),
                from.clone(),
                s.clone(),
            );
            tools::blocking(move || {
                if let Err(why) = foreign::claim(&h, &a.sender, &a.from, |id| is_local(&hr, &h, id))
                {
                    ledger_refused(&h, &f, &s2, RefusalCode::ForeignSender, now);
                    return Err(why);
                }
                Ok(arrivals::claim(&h, &a, now))
            })
            .await
            .map_err(|_| ())
        }
        Err(()) => Err(()),
    };
    let claim = match claimed {
        Ok(Err(why)) => {
            let mut w = WireRefusal::code(RefusalCode::ForeignSender);
            w.foreign = Some(why);
            return Some(refused_answer(&s, w));
        }
        Ok(Ok(c)) => c,
        // the store did not answer in time: nothing is delivered (a claim it made meanwhile is
        // settled from the target's log at a retry, after STALE_CLAIM_MS)
        Err(()) => return Some(refused_answer(&s, WireRefusal::code(RefusalCode::Busy))),
    };
    let answered = serve_claimed(home, &s, arrival, claim, hop, now, begun).await;
    Some(answered)
}

/// An arriving send after its claim: answered from the record, refused, or delivered by `begun` (this
/// home's send path, its checks running already) and its answer kept beside the claim.
async fn serve_claimed(
    home: PathBuf,
    s: &SendReq,
    arrival: arrivals::Arrival,
    claim: std::io::Result<arrivals::Claim>,
    hop: base::offload::Started<u32>,
    now: i64,
    begun: send::Begun,
) -> SendAnswer {
    match claim {
        Ok(arrivals::Claim::New) => {}
        Ok(arrivals::Claim::Answered(mut ans)) => {
            ans.repeated = true;
            return ans;
        }
        // answered by this process a moment ago, its record still being written: the same answer
        Ok(arrivals::Claim::InFlight(old)) => {
            return match arrivals::answered(&home, &old) {
                Some(mut ans) => {
                    ans.repeated = true;
                    ans
                }
                None => refused_answer(s, WireRefusal::code(RefusalCode::Busy)),
            };
        }
        Ok(arrivals::Claim::Full) => {
            return refused_answer(s, WireRefusal::code(RefusalCode::Busy))
        }
        Ok(arrivals::Claim::Mismatch) => {
            return refused_answer(s, WireRefusal::code(RefusalCode::Rejected))
        }
        Ok(arrivals::Claim::Stale(old)) => {
            // its process died between the claim and the answer (or the unsynced answer was lost):
            // the target's log settles it
            let (h, rid, t, chain) = (
                home.clone(),
                s.request_id.clone(),
                s.target.clone(),
                s.chain.clone(),
            );
            let hop = s.hop;
            let settled = tools::blocking(move || {
                use fate::FateState as F;
                let v = fate::verify(&h, &rid, Some(&t));
                let landing = match fate::state_of(&v) {
                    F::Landed => Landing::Accepted {
                        woke: false,
                        waiting: false,
                    },
                    // taken, not landed yet (an inbox, a mailbox, a record its next holder re-delivers),
                    // or taken and removed by the human since: never delivered again
                    F::Queued | F::Waiting | F::Lost | F::Canceled | F::Removed => {
                        Landing::Accepted {
                            woke: false,
                            waiting: true,
                        }
                    }
                    // the human's to decide (or decided): never delivered past them
                    F::Held | F::Approved | F::Rejected | F::Expired => Landing::Held,
                    // refused then, or in no log, mailbox or held store: delivered again
                    F::Refused | F::Unknown => {
                        let _ = arrivals::renew(&h, &old, now);
                        return None;
                    }
                };
                let ans = SendAnswer {
                    request_id: rid,
                    landing,
                    hop: crossing::arriving_hop(&h, chain.as_deref(), hop),
                    repeated: true,
                };
                let _ = arrivals::answer(&h, &old, &ans);
                Some(ans)
            })
            .await;
            match settled {
                Ok(Some(ans)) => return ans,
                Ok(None) => {}
                Err(_) => return refused_answer(s, WireRefusal::code(RefusalCode::Busy)),
            }
        }
        // the record cannot be kept: nothing is delivered that could be delivered twice
        Err(_) => return refused_answer(s, WireRefusal::code(RefusalCode::Busy)),
    }
    let result = begun.finish().await;
    // the answer kept (not fsynced: `crossing::arrivals`)
    let ans = SendAnswer {
        request_id: s.request_id.clone(),
        landing: landing_of(&result),
        // (counted beside the claim; not in time: the hop that travelled, at least 1)
        hop: hop
            .finish(tools::STORE_DEADLINE)
            .await
            .unwrap_or(s.hop.max(1)),
        repeated: false,
    };
    // the answer leaves now and its record is written after it, on a blocking task of its own (not
    // awaited: what the send path did is the answer whether or not the record is kept); until it is on
    // disk a repeat here is answered from memory, one in another process is `busy` (`crossing::arrivals`);
    // then the file the next claim names is made (`arrivals::prepare`), off that claim's path
    let (h, kept) = (home, ans.clone());
    arrivals::answering(&h, &arrival, &kept);
    let _ = base::offload::start(move || {
        #[cfg(test)]
        tests::hold_record(&h);
        let r = arrivals::answer(&h, &arrival, &kept);
        arrivals::prepare(&h);
        r
    });
    ans
}

async fn serve_verify(here: &ToolRequest, from: &Machine, request_id: String) -> Response {
    let home = home_of(here);
    let from = from.id.clone();
    let answer = tools::blocking(move || verify_here(&home, &from, &request_id)).await;
    match answer {
        Ok(v) => Response::Verify(v),
        Err(r) => Response::Refused(wire_refusal(&r)),
    }
}

/// What became of `request_id`, which arrived from machine `from` (another machine's ids are unknown).
fn verify_here(home: &Path, from: &MachineId, request_id: &str) -> VerifyAnswer {
    use wire::FateState as S;
    let unknown = VerifyAnswer {
        request_id: request_id.to_string(),
        state: S::Unknown,
        target: None,
        code: None,
    };
    let Some(mut a) = arrivals::lookup(home, request_id).filter(|a| &a.from == from) else {
        return unknown;
    };
    // answered here a moment ago, its record still being written
    if a.answer.is_none() {
        a.answer = arrivals::answered(home, &a);
    }
    let mut v = VerifyAnswer {
        target: Some(a.target.clone()),
        ..unknown
    };
    match &a.answer {
        None => v.state = S::Waiting,
        Some(ans) => match &ans.landing {
            Landing::Refused(w) => {
                v.state = S::Refused;
                v.code = Some(w.code);
            }
            // held for this home's human: what the held store says until it lands (an approved message
            // is handed to the session's mailbox and lands: then the log says landed, as a local verify
            // says — `approved` for ever was what a linked machine heard before)
            Landing::Held => {
                let f = fate::verify(home, request_id, Some(&a.target));
                v.state = match fate::state_of(&f) {
                    S::Unknown => S::Held,
                    s => s,
                }
            }
            Landing::Accepted { .. } | Landing::MayHaveLanded => {
                let f = fate::verify(home, request_id, Some(&a.target));
                v.state = fate::state_of(&f);
            }
        },
    }
    v
}

// ---------------------------------------------------------------- the calling side

/// Wait for every future (in parallel, on this task).
struct JoinAll<'a, T> {
    futs: Vec<Option<Pin<Box<dyn Future<Output = T> + Send + 'a>>>>,
    out: Vec<Option<T>>,
}

impl<T> Unpin for JoinAll<'_, T> {}

impl<T> Future for JoinAll<'_, T> {
    type Output = Vec<T>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Vec<T>> {
        let this = &mut *self;
        let mut pending = false;
        for (i, slot) in this.futs.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => {
                        this.out[i] = Some(v);
                        *slot = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(this.out.iter_mut().filter_map(Option::take).collect())
        }
    }
}

fn join_all<'a, T>(futs: Vec<Pin<Box<dyn Future<Output = T> + Send + 'a>>>) -> JoinAll<'a, T> {
    let n = futs.len();
    JoinAll {
        futs: futs.into_iter().map(Some).collect(),
        out: (0..n).map(|_| None).collect(),
    }
}

/// One call with a hard deadline of our own (the trait's is the transport's to keep; this one is ours).
async fn call(
    machines: &dyn Machines,
    to: &MachineId,
    req: Request,
    deadline: Duration,
) -> Result<Response, CallError> {
    match tokio::time::timeout(deadline, machines.call(to, req, deadline)).await {
        Ok(r) => r,
        Err(_) => Err(CallError::Timeout),
    }
}

/// Run one tool call that may reach linked machines (with none linked it is `tools::run_result`):
/// [`begin`] then [`Begun::result`].
pub async fn run_result(req: ToolRequest, machines: &dyn Machines) -> ToolResult {
    begin(req, machines).result(machines).await
}

/// A tool call that may reach linked machines, begun ([`begin`]).
pub struct Begun {
    linked: Vec<Machine>,
    call: Call,
}

/// What [`begin`] started.
enum Call {
    /// A send to a session not live in this process: its place lookup (and checks), on the blocking
    /// pool since [`begin`].
    Placing(Box<(ToolRequest, Placing)>),
    /// A send to a session live in this process (or with no target): this home's send, its checks on
    /// the blocking pool since [`begin`], as an unlinked home's (`tools::begin`).
    Here(tools::Begun),
    /// A listing, a read or an unknown tool: run by [`Begun::result`].
    Other(Box<ToolRequest>),
}

/// A send's place lookup under way: where `target` lives and, when this home's files place it on a
/// linked machine, this side's checks of the send ([`send::check_remote`]).
struct Placing {
    target: String,
    ctx: send::Context,
    found: base::offload::Started<Option<(Known, Option<Checked>)>>,
}

/// [`send::check_remote`]'s answer.
type Checked = (send::record::Attempt, Result<send::Plan, Refusal>);

/// Begin one tool call that may reach linked machines (the binding's entry point when it has a
/// [`Machines`]; it calls this from the napi entry, inside napi's runtime): a send's place lookup and
/// checks start on the blocking pool at once, so they run while napi hands the call's future to its
/// runtime — one hand-over less on a remote send's path than starting them from that future, as
/// `tools::begin` does for a local send. Without a tokio runtime they run inline.
pub fn begin(req: ToolRequest, machines: &dyn Machines) -> Begun {
    let linked = machines.linked();
    let call = match Tool::parse(&req.tool) {
        Some(Tool::SessionsSend | Tool::SendSessionMessage) => match placing(&req, &linked) {
            Some(p) => Call::Placing(Box::new((req, p))),
            None => Call::Here(tools::begin(req)),
        },
        _ => Call::Other(Box::new(req)),
    };
    Begun { linked, call }
}

impl Begun {
    /// The call's result as data.
    pub async fn result(self, machines: &dyn Machines) -> ToolResult {
        let Begun { linked, call } = self;
        let req = match call {
            Call::Placing(b) => {
                let (req, p) = *b;
                return send_placed(req, machines, linked, p).await;
            }
            // no target, or one live in this process: this home's send, as locally
            Call::Here(b) => return b.result().await,
            Call::Other(req) => *req,
        };
        match Tool::parse(&req.tool) {
            // nothing linked: this home alone (a send to an id that came from a machine unlinked since
            // is still refused as such, by `send_placed`)
            Some(Tool::SessionsList | Tool::SessionsRead) if linked.is_empty() => {
                tools::run_result(req).await
            }
            Some(Tool::SessionsList) => list_across(req, machines, linked).await,
            Some(Tool::SessionsRead) => read_across(req, machines, linked).await,
            // (sends are begun as `Placing` or `Here`)
            Some(Tool::SessionsSend | Tool::SendSessionMessage) | None => {
                tools::run_result(req).await
            }
        }
    }
}

async fn list_across(
    req: ToolRequest,
    machines: &dyn Machines,
    linked: Vec<Machine>,
) -> ToolResult {
    let mut sel = match tools::list::run_result(&req).await {
        Ok(s) => s,
        Err(r) => return ToolResult::Refused(r),
    };
    let Ok(args) = tools::list::parse_args(&req.args, req.config.max_list_results as usize) else {
        return ToolResult::List(sel);
    };
    if args.repo_only {
        // the caller's repository is on this machine
        return ToolResult::List(sel);
    }
    let query = args.query.as_deref().map(str::to_lowercase);
    let futs = linked
        .iter()
        .map(|m| {
            let mut a = req.args.clone();
            if let Some(o) = a.as_object_mut() {
                o.remove("repo_only");
                // `query` matches the machine's name: then every session there matches
                if query.as_deref().is_some_and(|q| m.name.contains(q)) {
                    o.remove("query");
                }
            }
            let id = m.id.clone();
            Box::pin(
                async move { call(machines, &id, Request::List { args: a }, LIST_DEADLINE).await },
            ) as Pin<Box<dyn Future<Output = _> + Send + '_>>
        })
        .collect();
    let answers = join_all(futs).await;
    // where each listed session lives, for a send while its machine is offline
    let learned: Vec<(MachineId, Vec<String>)> = linked
        .iter()
        .zip(&answers)
        .filter_map(|(m, a)| match a {
            Ok(Response::List(l)) => {
                Some((m.id.clone(), l.rows.iter().map(|r| r.id.clone()).collect()))
            }
            _ => None,
        })
        .filter(|(_, ids): &(MachineId, Vec<String>)| !ids.is_empty())
        .collect();
    if !learned.is_empty() {
        let (h, now) = (home_of(&req), base::clock::now_ms());
        let _ = tools::blocking(move || {
            for (m, ids) in learned {
                crossing::seen::remember(&h, &m, &ids, now);
            }
        })
        .await;
    }
    merge_rows(&mut sel, &linked, answers, args.limit);
    ToolResult::List(sel)
}

/// Add the machines' rows to a local selection: newest first (this home's rows in the caller's
/// repository first, as locally), the caller still last, `limit` rows in all.
fn merge_rows(
    sel: &mut Selection,
    linked: &[Machine],
    answers: Vec<Result<Response, CallError>>,
    limit: usize,
) {
    let caller = sel
        .rows
        .iter()
        .position(|c| c.row.is_caller)
        .map(|i| sel.rows.remove(i));
    for (m, ans) in linked.iter().zip(answers) {
        let trouble = match ans {
            Ok(Response::List(l)) => {
                sel.considered += l.considered as usize;
                for r in l.rows {
                    sel.rows.push(Candidate {
                        row: ListRow {
                            id: r.id,
                            liveness: match (r.live, r.status) {
                                (false, _) => Liveness::Cold,
                                (true, s) => Liveness::Live(s.unwrap_or_default()),
                            },
                            subagent: r.subagent,
                            parent: r.parent,
                            cwd: r.cwd,
                            preset: r.preset,
                            title: r.title,
                            is_caller: false,
                            same_repo: None,
                            files: Vec::new(),
                            overlap: Vec::new(),
                            machine: Some(m.clone()),
                        },
                        created_at: r.created_at,
                        same_place: false,
                    });
                }
                (l.unreadable > 0).then_some(MachineTrouble::Unreadable(l.unreadable))
            }
            Ok(Response::Refused(w)) => Some(MachineTrouble::Refused(w.code)),
            Ok(_) => Some(MachineTrouble::NoAnswer(CallError::Protocol(
                "not a listing".into(),
            ))),
            Err(e) => Some(MachineTrouble::NoAnswer(e)),
        };
        if let Some(trouble) = trouble {
            sel.machines.push(MachineNote {
                machine: m.clone(),
                trouble,
            });
        }
    }
    sel.rows.sort_by(|a, b| {
        b.row
            .same_repo
            .cmp(&a.row.same_repo)
            .then(b.created_at.cmp(&a.created_at))
            .then_with(|| a.row.id.cmp(&b.row.id))
    });
    let room = if caller.is_some() {
        limit.saturating_sub(1)
    } else {
        limit
    };
    sel.rows.truncate(room);
    sel.rows.extend(caller);
}

/// Where a session named by a read or a send lives.
enum Place {
    Here,
    There(Machine),
    /// Its id came from a machine that is not linked now.
    Unlinked(MachineId),
}

/// What this home's files say of where `id` lives (blocking; the session is not live in this
/// process): `Some(Here)` a session of this home, `Some(There)` / `Some(Unlinked)` the machine its id
/// came from (a reply goes back, linked or not) or the linked machine that listed it (then `listed`:
/// that machine is remembered for it already), `None` nothing known (the linked machines are asked).
fn place_known(req: &ToolRequest, home: &Path, linked: &[Machine], id: &str) -> Option<Known> {
    if is_local(req, home, id) {
        return Some(Known {
            place: Place::Here,
            listed: false,
        });
    }
    // a sender id that came from a machine: a reply goes back there (linked or not)
    if let Some(mid) = foreign::machine_of(home, id) {
        let place = match linked.iter().find(|m| m.id == mid) {
            Some(m) => Place::There(m.clone()),
            None => Place::Unlinked(mid),
        };
        return Some(Known {
            place,
            listed: false,
        });
    }
    // a session a linked machine listed: there, even while it is offline (then the outbox)
    let m =
        crossing::seen::machine_of(home, id).and_then(|mid| linked.iter().find(|m| m.id == mid))?;
    Some(Known {
        place: Place::There(m.clone()),
        listed: true,
    })
}

/// [`place_known`]'s answer.
struct Known {
    place: Place,
    /// `crossing::seen` names this place's machine for the session already.
    listed: bool,
}

/// Find the session `id`: this home first (live, presence, the store), then the machine its id came
/// from (a reply goes back), then — bounded — the linked machines' listings.
async fn place_of(
    req: &ToolRequest,
    machines: &dyn Machines,
    linked: &[Machine],
    id: &str,
) -> Place {
    // live in this process: no file is read for it
    if req.live.iter().any(|l| l.id == id) {
        return Place::Here;
    }
    let home = home_of(req);
    let (h, r, l, i) = (home.clone(), req.clone(), linked.to_vec(), id.to_string());
    match tools::blocking(move || place_known(&r, &h, &l, &i)).await {
        Ok(Some(k)) => k.place,
        Ok(None) => ask_place(home, machines, linked, id).await,
        Err(_) => Place::Here,
    }
}

/// Ask the linked machines' listings for the session `id` (bounded); found, it is remembered.
async fn ask_place(home: PathBuf, machines: &dyn Machines, linked: &[Machine], id: &str) -> Place {
    let futs = linked
        .iter()
        .map(|m| {
            let args = json!({"query": id, "scope": "all", "limit": 5});
            let mid = m.id.clone();
            Box::pin(
                async move { call(machines, &mid, Request::List { args }, FIND_DEADLINE).await },
            ) as Pin<Box<dyn Future<Output = _> + Send + '_>>
        })
        .collect();
    let answers = join_all(futs).await;
    for (m, a) in linked.iter().zip(answers) {
        if let Ok(Response::List(l)) = a {
            if l.rows.iter().any(|r| r.id == id) {
                // remembered as a listing is (`crossing::seen`): the next read or send of it goes
                // straight to that machine instead of asking every linked machine again (a round trip
                // and a search of its sessions: 2.9 ms of the 100 MiB remote read, bench:machines)
                let (h, mid, i, now) = (home, m.id.clone(), id.to_string(), base::clock::now_ms());
                let _ =
                    tools::blocking(move || crossing::seen::remember(&h, &mid, &[i], now)).await;
                return Place::There(m.clone());
            }
        }
    }
    Place::Here
}

async fn read_across(
    req: ToolRequest,
    machines: &dyn Machines,
    linked: Vec<Machine>,
) -> ToolResult {
    let Some(id) = req
        .args
        .get("session_id")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return tools::run_result(req).await;
    };
    let m = match place_of(&req, machines, &linked, &id).await {
        Place::There(m) => m,
        Place::Here | Place::Unlinked(_) => return tools::run_result(req).await,
    };
    // the arguments are checked here first, with this side's words
    if let Err(r) = tools::read::parse_args(&req.args, &req.config) {
        return ToolResult::Refused(r);
    }
    match call(
        machines,
        &m.id,
        Request::Read {
            args: req.args.clone(),
        },
        READ_DEADLINE,
    )
    .await
    {
        Ok(Response::Read(a)) => ToolResult::Read(read_result(a, m)),
        Ok(Response::Refused(w)) if w.code != RefusalCode::NotFound => {
            ToolResult::Refused(Refusal::Remote(Box::new(RemoteRefusal {
                machine: m,
                target: id,
                request_id: String::new(),
                refusal: w,
            })))
        }
        // not there after all, or no answer: what this home knows (its refusal)
        _ => tools::run_result(req).await,
    }
}

fn role(s: &str) -> &'static str {
    match s {
        "user" => "user",
        "assistant" => "assistant",
        "tool" => "tool",
        "system" => "system",
        "developer" => "developer",
        _ => "message",
    }
}

/// A read answer as this side's typed result (the machine on its head; the bodies were cut there).
fn read_result(a: ReadAnswer, m: Machine) -> ReadResult {
    let h = a.head;
    ReadResult {
        window: Window {
            head: ReadHead {
                id: h.id,
                live: h.live,
                subagent: h.subagent,
                parent: h.parent,
                cwd: h.cwd,
                title: h.title,
                readable: h.readable as usize,
                captured_through: h.captured_through,
                since: h.since,
                machine: Some(m),
            },
            messages: a
                .messages
                .into_iter()
                .map(|x| ReadMessage {
                    role: role(&x.role),
                    seq: x.seq,
                    label: x.label,
                    request: x.request,
                    injected: x.injected,
                    replaced: x.replaced,
                    error: x.error,
                    body: x.body,
                })
                .collect(),
            omitted: a.omitted as usize,
            hidden: Hidden {
                injected: a.hidden_injected as usize,
                system: a.hidden_system as usize,
            },
            notes: a.notes,
        },
        // cut on the far side by its own bound; not cut again here
        max_chars: usize::MAX,
        log_path: None,
    }
}

/// A send's place lookup started on the blocking pool (`None`: no target argument, or a target live in
/// this process — no file is read for it).
fn placing(req: &ToolRequest, linked: &[Machine]) -> Option<Placing> {
    let tool = SendTool::from_name(&req.tool);
    let target = req.args.get(tool.target_arg()).and_then(Value::as_str)?;
    // live in this process: no file is read for it
    if req.live.iter().any(|l| l.id == target) {
        return None;
    }
    // One trip to the blocking pool: where the target lives and, when this home's files place it on a
    // linked machine (every send after the first to a session), this side's checks of the send too
    // (`send::check_remote`; nothing has left this home until they pass).
    let ctx = send::Context::of(req);
    let (r, c, l, t) = (
        req.clone(),
        ctx.clone(),
        linked.to_vec(),
        target.to_string(),
    );
    let found = base::offload::start(move || {
        let known = place_known(&r, &c.home, &l, &t)?;
        let checked = match known.place {
            Place::Here => None,
            Place::There(_) | Place::Unlinked(_) => Some(send::check_remote(&r, &c)),
        };
        Some((known, checked))
    });
    Some(Placing {
        target: target.to_string(),
        ctx,
        found,
    })
}

/// A send whose place lookup [`placing`] started: this home's send, a linked machine's, or a refusal
/// (an unlinked machine's session).
async fn send_placed(
    req: ToolRequest,
    machines: &dyn Machines,
    linked: Vec<Machine>,
    placing: Placing,
) -> ToolResult {
    let Placing { target, ctx, found } = placing;
    let (place, checked, listed) = match found.finish(tools::STORE_DEADLINE).await {
        Ok(Some((k, checked))) => (k.place, checked, k.listed),
        Ok(None) => (
            ask_place(ctx.home.clone(), machines, &linked, &target).await,
            None,
            false,
        ),
        Err(_) => (Place::Here, None, false),
    };
    match place {
        Place::Here => tools::run_result(req).await,
        Place::There(m) => {
            let to = Sending { m, checked, listed };
            ToolResult::Send(send_checked(req, ctx, machines, to).await)
        }
        Place::Unlinked(mid) => {
            let (attempt, _) = match checked {
                Some(v) => v,
                None => {
                    let (r, c) = (req.clone(), ctx.clone());
                    match tools::blocking(move || send::check_remote(&r, &c)).await {
                        Ok(v) => v,
                        Err(refusal) => return ToolResult::Refused(refusal),
                    }
                }
            };
            let result = SendResult {
                outcome: SendOutcome::Refused(Refusal::Unlinked {
                    target,
                    machine: mid.as_str().to_string(),
                }),
                notes: Vec::new(),
            };
            ToolResult::Send(attempt.close(&ctx, result).await)
        }
    }
}

/// A send to a session of linked machine `m`, as far as [`send_placed`] got: this side's checks, when
/// they ran in the place's trip, and whether `crossing::seen` names `m` for the target already.
struct Sending {
    m: Machine,
    checked: Option<Checked>,
    listed: bool,
}

/// Send to a session of linked machine `m`: this side's checks, then the far side's whole send path;
/// no answer → the outbox. One ledger line here (`toMachine`).
pub async fn send_to(req: ToolRequest, machines: &dyn Machines, m: Machine) -> SendResult {
    let ctx = send::Context::of(&req);
    let to = Sending {
        m,
        checked: None,
        listed: false,
    };
    send_checked(req, ctx, machines, to).await
}

/// [`send_to`] with what [`send_placed`] found: the checks run already (else they run here), whether
/// `crossing::seen` names the machine for the target already (then it is not remembered again). What
/// does not depend on the answer — the human's copy of the text, the fates' key and day folder — is done
/// on the blocking pool while the request is in flight; the ledger line, and what the answer decides,
/// in one trip after it, before the tool returns.
async fn send_checked(
    req: ToolRequest,
    ctx: send::Context,
    machines: &dyn Machines,
    to: Sending,
) -> SendResult {
    let Sending { m, checked, listed } = to;
    let checked = match checked {
        Some(v) => v,
        None => {
            let (r, c) = (req.clone(), ctx.clone());
            match tools::blocking(move || send::check_remote(&r, &c)).await {
                Ok(v) => v,
                Err(refusal) => {
                    return SendResult {
                        outcome: SendOutcome::Refused(refusal),
                        notes: Vec::new(),
                    }
                }
            }
        }
    };
    let (mut attempt, plan) = checked;
    attempt.to_machine = Some(m.id.as_str().to_string());
    let plan = match plan {
        Ok(p) => p,
        Err(refusal) => {
            let result = SendResult {
                outcome: SendOutcome::Refused(refusal),
                notes: Vec::new(),
            };
            return attempt.close(&ctx, result).await;
        }
    };
    attempt.request_id = Some(plan.request_id.clone());
    attempt.hop = Some(plan.hop.clone());
    let sreq = SendReq {
        request_id: plan.request_id.clone(),
        sender: attempt.sender.clone().unwrap_or_default(),
        sender_title: req.caller.as_ref().and_then(|c| c.title.clone()),
        target: plan.target.clone(),
        body: attempt.args.message.clone().unwrap_or_default(),
        mode: match plan.mode {
            Mode::Queue => WireMode::Queue,
            Mode::Steer => WireMode::Steer,
        },
        tool: plan.tool.into(),
        chain: Some(plan.hop.chain.clone()),
        hop: plan.hop.hop,
    };
    let deadline = Duration::from_millis(u64::from(req.config.request_timeout_ms)) + SEND_SLACK;
    let receipt = |hop: u32, fate: RemoteFate| {
        SendOutcome::Remote(Box::new(RemoteReceipt {
            machine: m.clone(),
            tool: plan.tool,
            target: plan.target.clone(),
            mode: plan.mode,
            chars: plan.chars,
            request_id: plan.request_id.clone(),
            hop,
            fate,
        }))
    };
    // Beside the request's flight: the human's copy of the text (crossing::sent: shown only once the
    // ledger line with its hash is in, so a crash before that line leaves nothing shown; removed again
    // if the send is refused) and the fates' key and day folder (crossing::fates).
    let beside = {
        let (h, rid, body, now) = (
            ctx.home.clone(),
            plan.request_id.clone(),
            sreq.body.clone(),
            ctx.now_ms,
        );
        base::offload::start(move || {
            let copied = crossing::sent::record(&h, &rid, &body, now).is_ok();
            (copied, fates::ready(&h, now).ok())
        })
    };
    let answer = call(machines, &m.id, Request::Send(sreq.clone()), deadline).await;
    // it answered for this session: a later send goes there even while it is offline (remembered in
    // the ledger line's trip, after the line: one hand-over to the blocking pool, not two); not when
    // this home remembers that machine for it already
    let seen = (!listed && matches!(&answer, Ok(Response::Send(_))))
        .then(|| (m.id.clone(), plan.target.clone(), ctx.now_ms));
    let outcome = match answer {
        Ok(Response::Send(a)) => outcome_of(&m, &plan.target, a, &receipt),
        Err(CallError::Unlinked) => SendOutcome::Refused(Refusal::Unlinked {
            target: plan.target.clone(),
            machine: m.id.as_str().to_string(),
        }),
        other => {
            let why = match other {
                Err(e) => e,
                Ok(_) => CallError::Protocol("not an answer to a send".into()),
            };
            let expires_at = ctx
                .now_ms
                .saturating_add(i64::from(req.config.outbox_ttl_ms));
            let parcel = outbox::Parcel {
                to: m.id.clone(),
                name: m.name.clone(),
                req: sreq,
                created_at: ctx.now_ms,
                expires_at,
                state: outbox::State::Pending,
                attempts: 1,
            };
            let h = ctx.home.clone();
            match tools::blocking(move || outbox::put(&h, &parcel).map_err(|e| e.to_string())).await
            {
                Ok(Ok(())) => receipt(
                    plan.hop.hop,
                    RemoteFate::Outbox {
                        expires_at_ms: expires_at,
                        why,
                    },
                ),
                // not kept: a receipt never says it waits where it does not
                _ if why.may_have_arrived() => receipt(plan.hop.hop, RemoteFate::MayHaveLanded),
                _ => SendOutcome::Refused(Refusal::Remote(Box::new(RemoteRefusal {
                    machine: m.clone(),
                    target: plan.target.clone(),
                    request_id: plan.request_id.clone(),
                    refusal: WireRefusal::code(RefusalCode::Unreachable),
                }))),
            }
        }
    };
    // (done long since, unless the disk is stuck: then no copy and the fate the slow way)
    let (copied, ready) = beside.finish(ctx.deadline).await.unwrap_or((false, None));
    // the human's copy of what went (crossing::sent): not for a refusal, nothing went
    let forget = (copied && matches!(outcome, SendOutcome::Refused(_))).then_some(ctx.now_ms);
    let rid = plan.request_id.clone();
    // what it answered (or the outbox keeps), for the human's row (crossing::fates)
    let answered = sent_state(&outcome)
        .map(|(state, source)| (m.id.clone(), ctx.now_ms, state, source, ready));
    let result = SendResult {
        outcome,
        notes: plan.notes.clone(),
    };
    let (result, _) = attempt
        .close_then(&ctx, result, move |home, _| {
            if let Some(now) = forget {
                crossing::sent::forget(home, &rid, now);
            }
            if let Some((mid, t, now)) = seen {
                crossing::seen::remember(home, &mid, &[t], now);
            }
            if let Some((mid, sent, state, source, ready)) = answered {
                let at = base::clock::now_ms();
                let _ = match ready {
                    Some(r) => r.record(&rid, &mid, state, source, at),
                    None => fates::record(home, &rid, &mid, sent, state, source, at),
                };
            }
        })
        .await;
    drop(plan.reservation);
    result
}

/// The state a send's receipt says it has, to remember for the human's row (`None`: no clear answer).
fn sent_state(o: &SendOutcome) -> Option<(FateState, fates::Source)> {
    let SendOutcome::Remote(r) = o else {
        return None;
    };
    match &r.fate {
        RemoteFate::Accepted { waiting: true, .. } => {
            Some((FateState::Waiting, fates::Source::Send))
        }
        RemoteFate::Accepted { .. } => Some((FateState::Queued, fates::Source::Send)),
        RemoteFate::Held => Some((FateState::Held, fates::Source::Send)),
        RemoteFate::Outbox { .. } => Some((FateState::Waiting, fates::Source::Outbox)),
        RemoteFate::MayHaveLanded => None,
    }
}

/// The state a far side's answer to a send gives it (`None`: no clear answer).
fn landing_state(l: &Landing) -> Option<FateState> {
    match l {
        Landing::Accepted { waiting: true, .. } => Some(FateState::Waiting),
        Landing::Accepted { .. } => Some(FateState::Queued),
        Landing::Held => Some(FateState::Held),
        Landing::Refused(_) => Some(FateState::Refused),
        Landing::MayHaveLanded => None,
    }
}

fn outcome_of(
    m: &Machine,
    target: &str,
    a: SendAnswer,
    receipt: &dyn Fn(u32, RemoteFate) -> SendOutcome,
) -> SendOutcome {
    match a.landing {
        Landing::Accepted { woke, waiting } => receipt(
            a.hop,
            RemoteFate::Accepted {
                woke,
                waiting,
                repeated: a.repeated,
            },
        ),
        Landing::Held => receipt(a.hop, RemoteFate::Held),
        Landing::MayHaveLanded => receipt(a.hop, RemoteFate::MayHaveLanded),
        Landing::Refused(w) => SendOutcome::Refused(Refusal::Remote(Box::new(RemoteRefusal {
            machine: m.clone(),
            target: target.to_string(),
            request_id: a.request_id,
            refusal: w,
        }))),
    }
}

// ---------------------------------------------------------------- the outbox

/// What one drain did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Drained {
    /// Delivered (answered by their machine, whatever the answer).
    pub delivered: usize,
    pub expired: usize,
    /// Their machine is not linked any more.
    pub unlinked: usize,
    /// Still waiting.
    pub waiting: usize,
}

/// Deliver what waits in the outbox (the binding's tick, about every few seconds, in whichever process
/// holds the endpoint): each pending parcel whose machine answers is delivered with its own request id
/// (the far side lands it once), one past its expiry is expired, one whose machine was unlinked is
/// settled as such. Bounded: each call waits at most `deadline` per machine.
pub async fn drain(
    home: &Path,
    machines: &dyn Machines,
    now_ms: i64,
    deadline: Duration,
) -> Drained {
    let h = home.to_path_buf();
    let parcels = tools::blocking(move || outbox::all(&h, now_ms))
        .await
        .unwrap_or_default();
    let mut out = Drained::default();
    // nothing waits (the common case: every request a linked machine sends here kicks a drain): the
    // links are not read
    if !parcels.iter().any(|p| p.state == outbox::State::Pending) {
        return out;
    }
    let linked = machines.linked();
    let mut down: Vec<MachineId> = Vec::new();
    for mut p in parcels
        .into_iter()
        .filter(|p| p.state == outbox::State::Pending)
    {
        // settled, and what it now is remembered for the human's row (crossing::fates)
        let settle = |p: outbox::Parcel| {
            let h = home.to_path_buf();
            let state = match &p.state {
                outbox::State::Delivered { answer, .. } => {
                    landing_state(&answer.landing).map(|s| (s, fates::Source::Delivery))
                }
                outbox::State::Expired { .. } => Some((FateState::Expired, fates::Source::Outbox)),
                outbox::State::Unlinked { .. } => Some((FateState::Refused, fates::Source::Outbox)),
                outbox::State::Pending => None,
            };
            async move {
                tools::blocking(move || {
                    let r = outbox::settle(&h, &p);
                    if let Some((state, source)) = state {
                        let rid = &p.req.request_id;
                        let _ = fates::record(&h, rid, &p.to, p.created_at, state, source, now_ms);
                    }
                    r
                })
                .await
            }
        };
        if now_ms >= p.expires_at {
            p.state = outbox::State::Expired { at_ms: now_ms };
            let _ = settle(p).await;
            out.expired += 1;
            continue;
        }
        if !linked.iter().any(|m| m.id == p.to) {
            p.state = outbox::State::Unlinked { at_ms: now_ms };
            let _ = settle(p).await;
            out.unlinked += 1;
            continue;
        }
        if down.contains(&p.to) {
            out.waiting += 1;
            continue;
        }
        match call(machines, &p.to, Request::Send(p.req.clone()), deadline).await {
            // another delivery of it is in flight there (a drain of another process, the first attempt
            // still running): not an answer about the message; ask again on a later drain
            Ok(Response::Send(SendAnswer {
                landing: Landing::Refused(w),
                ..
            })) if w.code == RefusalCode::Busy => {
                p.attempts = p.attempts.saturating_add(1);
                let _ = settle(p).await;
                out.waiting += 1;
            }
            Ok(Response::Send(answer)) => {
                p.state = outbox::State::Delivered {
                    answer,
                    at_ms: now_ms,
                };
                let _ = settle(p).await;
                out.delivered += 1;
            }
            Err(CallError::Unlinked) => {
                p.state = outbox::State::Unlinked { at_ms: now_ms };
                let _ = settle(p).await;
                out.unlinked += 1;
            }
            _ => {
                down.push(p.to.clone());
                p.attempts = p.attempts.saturating_add(1);
                let _ = settle(p).await;
                out.waiting += 1;
            }
        }
    }
    out
}

// ---------------------------------------------------------------- verify

pub use crate::outcome::RemoteVerification;

/// `verify` of a request sent to a linked machine (`None`: not one — the local `fate::verify` answers).
/// The outbox says what it holds; a delivered message is asked of its machine (its answer then, else
/// what it answered at delivery).
pub async fn verify(
    home: &Path,
    machines: &dyn Machines,
    request_id: &str,
) -> Option<RemoteVerification> {
    let (h, rid) = (home.to_path_buf(), request_id.to_string());
    let (parcel, line) = tools::blocking(move || {
        let parcel = outbox::get(&h, &rid);
        let filter = crate::ledger::Filter {
            request_id: Some(rid.clone()),
            ..Default::default()
        };
        let line = crate::ledger::read_ledger(&h, &filter)
            .ok()
            .and_then(|r| r.entries.into_iter().rev().find(|e| e.to_machine.is_some()));
        (parcel, line)
    })
    .await
    .ok()?;
    let sent_ms = match (&parcel, &line) {
        (Some(p), _) => p.created_at,
        (None, Some(l)) => base::clock::parse_utc(&l.time).unwrap_or(0),
        (None, None) => 0,
    };
    let v = verify_with(machines, request_id, parcel, line).await?;
    // remembered for the human's row (crossing::fates): the far side's answer, or the outbox's state
    let source = match (&v.there, v.in_outbox) {
        (_, true) => Some(fates::Source::Outbox),
        (Some(a), _) if a.state != wire::FateState::Unknown => Some(fates::Source::Verify),
        _ => None,
    };
    if let Some(source) = source {
        let (h, rid, mid, state) = (
            home.to_path_buf(),
            v.request_id.clone(),
            v.machine.clone(),
            v.state,
        );
        let at = base::clock::now_ms();
        let _ = tools::blocking(move || fates::record(&h, &rid, &mid, sent_ms, state, source, at))
            .await;
    }
    Some(v)
}

async fn verify_with(
    machines: &dyn Machines,
    request_id: &str,
    parcel: Option<outbox::Parcel>,
    line: Option<crate::ledger::Entry>,
) -> Option<RemoteVerification> {
    use wire::FateState as S;
    let (mid, target, known) = match (&parcel, &line) {
        (Some(p), _) => (p.to.clone(), Some(p.req.target.clone()), Some(&p.state)),
        (None, Some(l)) => (
            MachineId::parse(l.to_machine.as_deref()?)?,
            l.target.clone(),
            None,
        ),
        (None, None) => return None,
    };
    let linked = machines.linked();
    let name = linked.iter().find(|m| m.id == mid).map(|m| m.name.clone());
    let mut v = RemoteVerification {
        request_id: request_id.to_string(),
        machine: mid.clone(),
        machine_name: name.clone(),
        target,
        state: S::Unknown,
        expires_at_ms: None,
        there: None,
        asked: None,
        in_outbox: false,
    };
    let delivered = match known {
        Some(outbox::State::Pending) => {
            v.state = S::Waiting;
            v.expires_at_ms = parcel.as_ref().map(|p| p.expires_at);
            v.in_outbox = true;
            return Some(v);
        }
        Some(outbox::State::Expired { .. }) => {
            v.state = S::Expired;
            v.expires_at_ms = parcel.as_ref().map(|p| p.expires_at);
            v.in_outbox = true;
            return Some(v);
        }
        Some(outbox::State::Unlinked { .. }) => {
            v.state = S::Refused;
            v.in_outbox = true;
            return Some(v);
        }
        Some(outbox::State::Delivered { answer, .. }) => Some(answer.clone()),
        None => None,
    };
    // what it answered at delivery, until the machine says more
    if let Some(a) = &delivered {
        v.state = match &a.landing {
            Landing::Accepted { waiting: true, .. } => S::Waiting,
            Landing::Accepted { .. } => S::Queued,
            Landing::Held => S::Held,
            Landing::Refused(_) => S::Refused,
            Landing::MayHaveLanded => S::Unknown,
        };
    }
    if name.is_none() {
        v.asked = Some(CallError::Unlinked);
        return Some(v);
    }
    let req = Request::Verify {
        request_id: request_id.to_string(),
    };
    match call(machines, &mid, req, FIND_DEADLINE).await {
        Ok(Response::Verify(a)) => {
            if a.state != S::Unknown || delivered.is_none() {
                v.state = a.state;
            }
            v.there = Some(a);
        }
        Ok(_) => v.asked = Some(CallError::Protocol("not a verify answer".into())),
        Err(e) => v.asked = Some(e),
    }
    Some(v)
}
