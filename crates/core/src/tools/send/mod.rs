//! `sessions_send` (seed 000) and `send_session_message` (seed 003), split by job:
//!
//! - [`run`] — the one entry point: arguments → checks → route → record. [`Context`] carries what a
//!   send takes from its surroundings (DSH_HOME, the clock, the deadline of its file work).
//! - [`checks`] — every check before delivery, one function each, in the order of [`checks::CHECKS`]
//!   (the order is documented there and only there). Argument validation (`tools::args::send`, pure)
//!   runs before that list, so a refused call's ledger line has the typed values it read.
//! - [`plan`] — what a send that passed every check will deliver: the framed text, the receipt's facts.
//! - routing: [`owner`] — who holds the target (this process, another one per presence, nobody);
//!   [`route`] — delivery through this process's host or the owner's web server, the
//!   `session/writer-held` retry, the typed outcome of the answer; [`mailbox`] — the hand-off to an
//!   owner without a web server.
//! - [`record`] — the audit ledger line of the attempt, built once.
//!
//! Every attempt, refused or not, is one line of the audit ledger (`crate::ledger`), written after the
//! outcome is known (except `busy`: the ledger may be what is stuck). A ledger that cannot be written
//! does not stop the send: the text ends with `note: audit ledger not written: <reason>`. Every outcome
//! is data ([`SendResult`]); nothing here panics on outside data.

pub mod checks;
pub mod mailbox;
pub mod owner;
pub mod plan;
pub mod record;
pub mod route;

#[cfg(test)]
pub(crate) mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::config::Config;
use crate::delivery::{Dialect, Mode};
use crate::outcome::{ArgProblem, Refusal, SendNote, SendOutcome, SendResult, Unrecorded};
use crate::request::ToolRequest;
use crate::tools::args::{PartialSend, SendArgsRefused};
use base::clock as time;
use base::offload;

pub use owner::Routed;
pub use plan::Plan;

pub use crate::tool::SendTool;

/// Validated arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendArgs {
    pub target: String,
    pub message: String,
    pub mode: Mode,
}

/// Validate the raw arguments (`tools::args::send`). All problems are reported, in argument order,
/// with what could still be read (the refused call's ledger line).
pub fn parse_args(tool: SendTool, args: &Value, cfg: &Config) -> Result<SendArgs, SendArgsRefused> {
    super::args::send(tool, args, cfg)
}

/// What a send takes from its surroundings. Tests and benches set each field; a host call uses
/// [`Context::of`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// DSH_HOME (resolved).
    pub home: PathBuf,
    /// The clock: ms since the epoch (budget windows, stacking ages, the ledger's time).
    pub now_ms: i64,
    /// How long each piece of file work may take on the blocking pool (issue 11 #3: a stuck file answers
    /// `busy` or a note, never a hang).
    pub deadline: Duration,
}

impl Context {
    /// The request's DSH_HOME (else the default one), the current time, [`offload::FILE_DEADLINE`].
    pub fn of(req: &ToolRequest) -> Context {
        Context::at(
            store::resolve_dsh_home(req.host.dsh_home.as_deref()),
            time::now_ms(),
        )
    }

    /// `home` at `now_ms`, with [`offload::FILE_DEADLINE`].
    pub fn at(home: impl Into<PathBuf>, now_ms: i64) -> Context {
        Context {
            home: home.into(),
            now_ms,
            deadline: offload::FILE_DEADLINE,
        }
    }

    pub fn home(&self) -> &Path {
        &self.home
    }
}

/// The `bad-argument` refusal of refused send arguments.
fn bad_arguments(tool: SendTool, problems: Vec<ArgProblem>) -> Refusal {
    Refusal::BadArgument {
        problems,
        usage: Some(tool.usage()),
    }
}

fn refused(refusal: Refusal) -> SendResult {
    SendResult {
        outcome: SendOutcome::Refused(refusal),
        notes: Vec::new(),
    }
}

/// What the first trip to the blocking pool found: the attempt whose ledger line records the call, and
/// the checks' plan (`Err`: the arguments' refusal, else the first check's).
type Checked = (record::Attempt, Result<Plan, Refusal>);

/// The arguments and [`checks::CHECKS`] of one call, in that order (one trip to the blocking pool).
fn check(req: &ToolRequest, ctx: &Context, title: plan::Title) -> Checked {
    #[cfg(test)]
    tests::count_check(ctx.home());
    let tool = SendTool::from_name(&req.tool);
    // The validator is pure: every refused call's ledger line records the typed values it read, never
    // a second reading of the raw arguments.
    match parse_args(tool, &req.args, &req.config) {
        Ok(args) => {
            let attempt = record::Attempt::new(req, tool, PartialSend::from(&args));
            (attempt, plan::make(req, args, ctx, title))
        }
        Err(bad) => (
            record::Attempt::new(req, tool, bad.partial),
            Err(bad_arguments(tool, bad.problems)),
        ),
    }
}

/// The arguments and [`checks::REMOTE_CHECKS`] of a send to a session of a linked machine (blocking:
/// run it on the blocking pool). The attempt records the call; `remote` delivers and closes it.
pub fn check_remote(req: &ToolRequest, ctx: &Context) -> (record::Attempt, Result<Plan, Refusal>) {
    let tool = SendTool::from_name(&req.tool);
    match parse_args(tool, &req.args, &req.config) {
        Ok(args) => {
            let attempt = record::Attempt::new(req, tool, PartialSend::from(&args));
            (attempt, plan::make_remote(req, args, ctx))
        }
        Err(bad) => (
            record::Attempt::new(req, tool, bad.partial),
            Err(bad_arguments(tool, bad.problems)),
        ),
    }
}

/// A send whose checks run on the blocking pool already ([`begin`]); [`Begun::finish`] delivers and
/// records it.
pub struct Begun {
    req: Arc<ToolRequest>,
    ctx: Context,
    checked: offload::Started<Checked>,
}

/// Start a send: its arguments and checks go to the blocking pool at once (the binding calls this
/// from the napi entry, so the checks run while napi schedules the call's future: one hand-over
/// less than starting them from that future). Without a tokio runtime they run inline.
pub fn begin(req: Arc<ToolRequest>, ctx: Context) -> Begun {
    // (the caller's title for the frame is looked up beside the checks, handed over after them)
    let (title, lookup) = plan::Title::prepare(&req, &ctx);
    let (r, c) = (Arc::clone(&req), ctx.clone());
    let checked = offload::start(move || check(&r, &c, title));
    if let Some(l) = lookup {
        l.start();
    }
    Begun { req, ctx, checked }
}

/// Run a send tool: validate the arguments, run [`checks::CHECKS`] on the blocking pool, deliver
/// ([`route::deliver`]), write the ledger line ([`record`]). The outcome as data.
pub async fn run(req: &ToolRequest, ctx: &Context) -> SendResult {
    begin(Arc::new(req.clone()), ctx.clone()).finish().await
}

impl Begun {
    /// Drop a send begun from facts that turned out not to be the host's (`remote::serve`'s early
    /// checks): its checks are waited for (within the context's deadline) and their plan dropped, so the
    /// budget slot it reserved is free before the send's checks run again; nothing was delivered or
    /// recorded (the ledger line is written only by [`Begun::finish`]).
    pub async fn discard(self) {
        drop(self.checked.finish(self.ctx.deadline).await);
    }

    /// Wait for the checks (within the context's deadline: past it the call is `busy`), then deliver
    /// and record. The outcome as data.
    pub async fn finish(self) -> SendResult {
        let Begun { req, ctx, checked } = self;
        match checked.finish(ctx.deadline).await {
            Ok((attempt, Ok(plan))) => deliver(&req, &ctx, attempt, plan).await,
            Ok((attempt, Err(refusal))) => attempt.close(&ctx, refused(refusal)).await,
            // Not recorded: the ledger may be what is stuck.
            Err(what) => refused(Refusal::Busy { what }),
        }
    }
}

/// Deliver a send every check passed, then record it.
async fn deliver(
    req: &ToolRequest,
    ctx: &Context,
    mut attempt: record::Attempt,
    mut plan: Plan,
) -> SendResult {
    attempt.delivering(&plan);
    if let Some(unverified) = plan.hold.clone() {
        let outcome = hold_for_human(req, ctx, &plan, unverified).await;
        let result = SendResult {
            outcome,
            notes: std::mem::take(&mut plan.notes),
        };
        let result = attempt.close(ctx, result).await;
        drop(plan.reservation);
        return result;
    }
    // The queued record's file is made while the message is in flight (its inode is the costly part
    // of the write); it stays unnamed, invisible to every reader, until the ledger line's trip names it
    // after the line (`Queueing`). A message refused or not sent drops it, and nothing is left. The
    // record an acceptance in the planned mode leaves is written into it then too; an answer that
    // changes it (another mode) has the trip write the changed one.
    let slot = holder(req, &plan).map(|(pid, started_at)| {
        let (home, target) = (ctx.home.clone(), plan.target.clone());
        let expected = Queueing::record(&plan, ctx, plan.mode, (pid, started_at));
        offload::start(move || {
            crate::mailbox::queued::Slot::open_for(&home, &target, Some(&expected))
        })
    });
    let answer = route::deliver(req, ctx, &mut plan, &mut attempt).await;
    let outcome = route::outcome(answer, &plan, &req.config);
    let result = SendResult {
        outcome,
        notes: std::mem::take(&mut plan.notes),
    };
    // (a slot not made by now is not waited for: the record is written without it)
    let slot = match slot {
        Some(s) => s.finish(std::time::Duration::ZERO).await.ok().flatten(),
        None => None,
    };
    // One trip to the blocking pool: the ledger line, then the queued record, only once the line is in.
    let queued = Queueing::of(req, ctx, &plan, &result);
    let rec = queued.as_ref().map(|q| q.rec.clone());
    let (mut result, recorded) = attempt
        .close_then(ctx, result, move |home, line_written| match rec {
            Some(rec) if line_written => {
                Some(crate::mailbox::queued::record_with(home, &rec, slot))
            }
            _ => None,
        })
        .await;
    // The slot is released only now that the ledger line (or its failure) and the held record are settled.
    if let Some(q) = queued {
        q.note(&plan, &mut result, recorded);
    }
    drop(plan.reservation);
    result
        .notes
        .extend(credentials_exposed(req, ctx.home(), &result));
    result
}

/// A send the human's inbound policy holds: kept (sealed) in the held store with the exact text it would
/// deliver (`crate::policy::held`); nothing reaches the target until the human approves it.
async fn hold_for_human(
    req: &ToolRequest,
    ctx: &Context,
    p: &plan::Plan,
    unverified: Option<crate::policy::Unverified>,
) -> SendOutcome {
    let env = crate::mailbox::Envelope {
        v: 1,
        request_id: p.request_id.clone(),
        session_id: p.target.clone(),
        mode: p.mode.as_str().to_string(),
        text: p.text.clone(),
        sender: crate::mail::sender_id(req.caller.as_ref()).map(str::to_string),
        owner_pid: 0,
        owner_started_at: 0,
        posted_at: ctx.now_ms,
    };
    let home = ctx.home().to_path_buf();
    let now = ctx.now_ms;
    let hold = move || {
        // it waits for the human until the hold time + the policy's heldTtlMs (sealed with it)
        let ttl = i64::try_from(crate::policy::held_ttl_ms(&home)).unwrap_or(i64::MAX);
        crate::policy::held::hold(&home, &env, now.saturating_add(ttl))
    };
    match base::offload::run(ctx.deadline, hold).await {
        Ok(Ok(())) => SendOutcome::Held(crate::outcome::HeldReceipt {
            target: p.target.clone(),
            mode: p.mode,
            chars: p.chars,
            request_id: p.request_id.clone(),
            unverified,
        }),
        // the held store did not take it: nothing was delivered
        Ok(Err(e)) => SendOutcome::Refused(Refusal::Internal {
            what: crate::outcome::Internal::Held(e.into()),
        }),
        Err(off) => SendOutcome::Refused(Refusal::Busy { what: off }),
    }
}

/// An accepted message now waits in its holder's inbox, which is that process's memory: a record of
/// it in the target's mailbox shard lets the session's next holder re-deliver it once if that process
/// stops or dies before the message lands (`mailbox::queued`; not the human's held mail,
/// `policy::held`). The holder: the owner it was routed to, else this process when it is the host
/// (the shim says when it started); a caller outside the host (the CLI) does not know which process
/// took it. A record is believed only with the ledger's `accepted` line of the same text: without
/// that line none is written (it could never be re-delivered) and the receipt says so, after the
/// ledger's own note. The record is written in the ledger line's trip, after the line
/// (`record::Attempt::close_then`), into the file made while the message was in flight when there is
/// one (`mailbox::queued::Slot`, dropped unnamed when no record is written).
struct Queueing {
    rec: crate::mailbox::queued::Queued,
    /// It waits in an inbox: a queued message, or a steer into a running turn (not one still in the
    /// owner's mailbox).
    waits: bool,
    step: bool,
}

impl Queueing {
    /// The record an accepted send of `p` leaves, when it has a holder.
    fn of(
        req: &ToolRequest,
        ctx: &Context,
        p: &plan::Plan,
        result: &SendResult,
    ) -> Option<Queueing> {
        let (SendOutcome::Accepted(r), Some((pid, started_at))) = (&result.outcome, holder(req, p))
        else {
            return None;
        };
        // (a message still in the owner's mailbox is described by its route: not in any inbox yet)
        let in_mailbox = matches!(
            r.route,
            crate::outcome::Route::Mailbox {
                answered: false,
                ..
            }
        );
        Some(Queueing {
            rec: Queueing::record(p, ctx, r.mode, (pid, started_at)),
            waits: (r.mode == Mode::Queue || r.running) && !in_mailbox,
            step: r.mode == Mode::Steer,
        })
    }

    /// The record of `p` accepted in `mode`, waiting in the inbox of `holder` (pid, presence `startedAt`).
    fn record(
        p: &plan::Plan,
        ctx: &Context,
        mode: Mode,
        (pid, started_at): (u32, i64),
    ) -> crate::mailbox::queued::Queued {
        crate::mailbox::queued::Queued {
            v: 1,
            request_id: p.request_id.clone(),
            session_id: p.target.clone(),
            mode: mode.as_str().to_string(),
            text: p.text.clone(),
            holder_pid: pid,
            holder_started_at: started_at,
            at_ms: ctx.now_ms,
            handed_back: None,
            redeliveries: 0,
        }
    }

    /// The receipt's note of the record: `recorded` is what the ledger line's trip did with it (`None`:
    /// the line is not in the ledger, so the record was not written; `Err`: the trip did not finish in
    /// time — [`record::Attempt::close_then`] has then noted the line as not written too).
    fn note(
        self,
        p: &plan::Plan,
        result: &mut SendResult,
        recorded: Result<Option<Result<(), crate::mailbox::queued::RecordError>>, ()>,
    ) {
        match recorded {
            Ok(None) | Err(()) if self.waits => result
                .notes
                .push(SendNote::QueuedNotRecorded(Unrecorded::NoLedgerLine)),
            Ok(Some(Ok(()))) if self.waits => result.notes.push(SendNote::QueuedInMemory {
                pid: p.routed.as_ref().map(|o| o.pid),
                step: self.step,
            }),
            Ok(None) | Err(()) | Ok(Some(Ok(()))) => {}
            Ok(Some(Err(e))) => result
                .notes
                .push(SendNote::QueuedNotRecorded(Unrecorded::Record(e))),
        }
    }
}

/// The process whose inbox an accepted message of `p` waits in, as (pid, presence `startedAt`): the
/// owner it was routed to, else this process when it is the host (the shim says when it started).
fn holder(req: &ToolRequest, p: &plan::Plan) -> Option<(u32, i64)> {
    match &p.routed {
        Some(o) => Some((o.pid, o.started_at)),
        None => req.host.started_at.map(|t| (std::process::id(), t)),
    }
}

/// An accepted v2 send whose secret came from the credentials file: a warning when other users can
/// read that file.
fn credentials_exposed(req: &ToolRequest, home: &Path, result: &SendResult) -> Option<SendNote> {
    let accepted_v2 = matches!(
        &result.outcome,
        SendOutcome::Accepted(r) if r.dialect == Dialect::V2
    );
    let from_file = req
        .host
        .secret
        .as_deref()
        .is_none_or(|s| s.trim().is_empty());
    if !(accepted_v2 && from_file) {
        return None;
    }
    crate::delivery::credentials::exposure(home).map(SendNote::CredentialsExposed)
}
