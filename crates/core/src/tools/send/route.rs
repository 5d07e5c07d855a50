//! Routing, part two: deliver the planned message where its target lives — this process's host, the
//! owner's web server, or the owner's mailbox ([`super::mailbox`]) — retry a `session/writer-held`
//! answer through an owner that published itself since, and turn the answer into the typed outcome.

use crate::config::Config;
use crate::delivery::{self, http::Timeouts, Delivery, Failure, Outcome};
use crate::mail;
use crate::outcome::{
    DeliveryContext, HeldWhy, MailboxRefusal, Owner, Receipt, Refusal, Route, SendOutcome,
    StoppingOwner, UnreadableReceipt,
};
use crate::presence;
use crate::request::ToolRequest;

use super::mailbox::{hand_off, HandOff};
use super::owner::{wait_for_owner, Routed};
use super::plan::Plan;
use super::record::Attempt;
use super::Context;

/// How the delivery ended.
#[derive(Debug)]
pub enum Answer {
    /// The host (this process's, or the owner's) answered, or failed to.
    Delivered(Outcome),
    /// Posted to the owner's mailbox: the owner's answer, and whether its receipt came back in time.
    Posted(Outcome, bool),
    /// Posted to the mailbox of the owner `pid`; a receipt is there that cannot be read as its answer
    /// (why).
    ReceiptUnreadable {
        pid: u32,
        profile: Option<String>,
        why: crate::mailbox::ReceiptError,
    },
    /// The owner's mailbox could not take the message (why).
    MailboxRefused(MailboxRefusal),
    /// The host answered `session/writer-held` and no process on this home publishes the session.
    HeldByUnknown,
    /// The host answered `session/writer-held`, and the process that presence shows holding the
    /// session offers no route (its record): it is stopping, or has neither web server nor mailbox.
    Unroutable(Box<presence::Record>),
    /// Sent to the web server of the owner `pid`, which went away (`failure`: no connection, or none
    /// that settled it), and that process's presence record then said it is stopping.
    OwnerStopping {
        failure: Failure,
        pid: u32,
        profile: Option<String>,
    },
}

/// Deliver `p`; the plan is updated with what the delivery learnt (route, notes, woke/running).
/// `attempt` is the send's ledger line: a mailbox hand-off writes it when it posts.
pub async fn deliver(
    req: &ToolRequest,
    ctx: &Context,
    p: &mut Plan,
    attempt: &mut Attempt,
) -> Answer {
    let sender = mail::sender_id(req.caller.as_ref());
    // A session live in a process without a web server: its mailbox.
    if let Some(r) = p.routed.clone().filter(|r| r.base_url.is_none()) {
        return via_mailbox(ctx, p, &r, sender, attempt).await;
    }
    let first = delivery::deliver(&http(req, ctx, p)).await;
    if let Some(r) = &p.routed {
        return unless_stopping(req, ctx, r, first).await;
    }
    if !(p.woke && is_writer_held(&first)) {
        return Answer::Delivered(first);
    }
    // 0.1.5+: another process holds the session's lock (`session/writer-held`, nothing delivered).
    // Its owner may have started publishing presence since the checks: wait one refresh for it and
    // hand the message to that process with the same request id.
    let Some(found) = wait_for_owner(req, ctx.home(), &p.target).await else {
        return Answer::HeldByUnknown;
    };
    // A holder that is stopping (or offers neither route) is refused as the checks refuse it: the
    // session is not resumed here before that process has exited.
    let Some(routed) = Routed::of(&found.record) else {
        return Answer::Unroutable(Box::new(found.record));
    };
    p.woke = false;
    p.running = found.status == "running";
    let answer = match &routed.base_url {
        Some(base) => {
            p.base_url = base.clone();
            let o = delivery::deliver(&http(req, ctx, p)).await;
            unless_stopping(req, ctx, &routed, o).await
        }
        None => via_mailbox(ctx, p, &routed, sender, attempt).await,
    };
    p.routed = Some(routed);
    answer
}

/// The answer of a delivery to the web server of the owner `r`. When that server went away — the
/// connection was not made (nothing was sent), or none settled the request (it may have landed) — the
/// owner's presence is read again, and a record of that process (the same incarnation) that now says
/// `stopping` makes the answer say so: a stopping process says so from its stop signal on, before its
/// host closes the web server (lib/mailbox.js `onStopping`, docs/delivery.md "Presence").
async fn unless_stopping(req: &ToolRequest, ctx: &Context, r: &Routed, o: Outcome) -> Answer {
    let failure = match o {
        Outcome::Failed(
            f @ (Failure::HostDown(_) | Failure::ConnectTimeout | Failure::MayHaveLanded(_)),
        ) => f,
        o => return Answer::Delivered(o),
    };
    let record = match &req.peers {
        Some(given) => given
            .iter()
            .find(|x| x.pid == r.pid && x.started_at == r.started_at && x.stopping)
            .cloned(),
        None => {
            let (home, pid) = (ctx.home.clone(), r.pid);
            base::offload::run(ctx.deadline, move || {
                presence::of_pid(&home, std::process::id(), base::clock::now_ms(), pid)
            })
            .await
            .unwrap_or_default()
        }
    };
    if !record.is_some_and(|x| x.started_at == r.started_at && x.stopping) {
        return Answer::Delivered(Outcome::Failed(failure));
    }
    Answer::OwnerStopping {
        failure,
        pid: r.pid,
        profile: r.profile.clone(),
    }
}

/// The HTTP delivery of `p` through `p.base_url`.
fn http<'a>(req: &'a ToolRequest, ctx: &'a Context, p: &'a Plan) -> Delivery<'a> {
    let cfg = &req.config;
    Delivery {
        base_url: &p.base_url,
        dsh_home: ctx.home(),
        host_secret: req.host.secret.as_deref(),
        // a route to another process speaks that host's dialect: its record's version, else as before
        host_version: p
            .routed
            .as_ref()
            .and_then(|r| r.host_version.as_deref())
            .or(req.host.version.as_deref()),
        host_api: &cfg.host_api,
        timeouts: Timeouts::from_ms(cfg.connect_timeout_ms.into(), cfg.request_timeout_ms.into()),
        session_id: &p.target,
        mode: p.mode,
        text: &p.text,
        request_id: &p.request_id,
    }
}

async fn via_mailbox(
    ctx: &Context,
    p: &mut Plan,
    r: &Routed,
    sender: Option<&str>,
    attempt: &mut Attempt,
) -> Answer {
    match hand_off(ctx, p, r, sender, attempt).await {
        HandOff::Posted(o, answered) => Answer::Posted(o, answered),
        HandOff::Unreadable(why) => Answer::ReceiptUnreadable {
            pid: r.pid,
            profile: r.profile.clone(),
            why,
        },
        HandOff::NotPosted(why) => Answer::MailboxRefused(why),
    }
}

fn is_writer_held(o: &Outcome) -> bool {
    matches!(o, Outcome::Rejected { code, .. } if code == "session/writer-held")
}

/// The typed outcome of the delivery of `p`.
pub fn outcome(answer: Answer, p: &Plan, cfg: &Config) -> SendOutcome {
    let context = || DeliveryContext {
        target: p.target.clone(),
        request_id: p.request_id.clone(),
        base_url: p.base_url.clone(),
        connect_timeout_ms: cfg.connect_timeout_ms.into(),
    };
    let (delivered, answered) = match answer {
        Answer::Delivered(o) => (o, None),
        Answer::Posted(o, answered) => (o, Some(answered)),
        Answer::MailboxRefused(why) => {
            return SendOutcome::Refused(Refusal::HeldElsewhere {
                target: p.target.clone(),
                owner: p.routed.as_ref().map_or(Owner::Unknown, Routed::owner),
                why: HeldWhy::MailboxRefused(Box::new(why)),
                request_id: Some(p.request_id.clone()),
            })
        }
        Answer::ReceiptUnreadable { pid, profile, why } => {
            return SendOutcome::ReceiptUnreadable(Box::new(UnreadableReceipt {
                target: p.target.clone(),
                request_id: p.request_id.clone(),
                pid,
                profile,
                why,
            }));
        }
        Answer::Unroutable(r) => {
            return SendOutcome::Refused(Refusal::unroutable(
                &p.target,
                &r,
                Some(p.request_id.clone()),
            ))
        }
        Answer::OwnerStopping {
            failure,
            pid,
            profile,
        } => {
            return SendOutcome::OwnerStopping(Box::new(StoppingOwner {
                failure,
                context: context(),
                pid,
                profile,
            }))
        }
        Answer::HeldByUnknown => {
            return SendOutcome::Refused(Refusal::HeldElsewhere {
                target: p.target.clone(),
                owner: Owner::Unpublished,
                why: HeldWhy::WriterHeld,
                request_id: Some(p.request_id.clone()),
            })
        }
    };
    match delivered {
        Outcome::Accepted {
            dialect,
            recovery,
            ambiguity,
        } => SendOutcome::Accepted(Receipt {
            tool: p.tool,
            target: p.target.clone(),
            mode: p.mode,
            chars: p.chars,
            route: match &p.routed {
                Some(r) => r.route(answered),
                None => Route::Here { woke: p.woke },
            },
            running: p.running,
            request_id: p.request_id.clone(),
            dialect,
            recovery,
            ambiguity,
            pending_from_plugin: p.pending_from_plugin,
            pending_next_turn: p.pending_next_turn,
            budget: p.budget,
        }),
        Outcome::Rejected {
            code,
            message,
            after_ambiguous,
        } => SendOutcome::Refused(Refusal::Rejected {
            code,
            message,
            after_ambiguous,
            request_id: p.request_id.clone(),
        }),
        Outcome::Failed(Failure::MayHaveLanded(why)) => SendOutcome::MayHaveLanded {
            why,
            context: context(),
        },
        Outcome::Failed(failure) => SendOutcome::Refused(Refusal::Undelivered {
            failure,
            context: context(),
        }),
    }
}
