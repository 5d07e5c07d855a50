//! Routing, the mailbox hand-off: a session live in a process without a web server gets the message
//! through the mailbox that process drains (`crate::mailbox`).

use crate::delivery::{Dialect, Outcome};
use crate::mailbox;
use crate::outcome::MailboxRefusal;
use base::offload;

use super::owner::Routed;
use super::plan::Plan;
use super::record::Attempt;
use super::Context;

/// What the hand-off ended in.
#[derive(Debug)]
pub enum HandOff {
    /// Posted; the owner's answer (`Accepted` when no receipt came within the wait: the envelope waits
    /// for its owner) and whether that receipt came back (`answered`).
    Posted(Outcome, bool),
    /// Posted, and a receipt for it is there that cannot be read as the owner's answer (why): that
    /// process may have delivered it or its host refused it — the sender cannot tell which.
    Unreadable(mailbox::ReceiptError),
    /// It could not be posted (why): the send is refused as `held-elsewhere`.
    NotPosted(MailboxRefusal),
}

/// Hand the message to the mailbox of `r` and wait up to [`mailbox::RECEIPT_WAIT_MS`] for that
/// process's receipt. Posting is the durable hand-off: the owner delivers it whether or not this
/// process is still alive.
///
/// The attempt's `accepted` ledger line is written first, then the envelope is posted: the owner
/// delivers only what its sender's line vouches for (`crate::mailbox::admit`), so an envelope must
/// never exist without it — a sender killed (or only slow) between a post and its line left one the
/// owner refuses as unrecorded. A line that cannot be written posts nothing (the owner would refuse
/// the envelope); a post that fails after the line gets the attempt's refused line (`Attempt::close`),
/// which takes the vouch back.
pub async fn hand_off(
    ctx: &Context,
    p: &Plan,
    r: &Routed,
    sender: Option<&str>,
    attempt: &mut Attempt,
) -> HandOff {
    let env = mailbox::Envelope {
        v: 1,
        request_id: p.request_id.clone(),
        session_id: p.target.clone(),
        mode: p.mode.as_str().to_string(),
        text: p.text.clone(),
        sender: sender.map(str::to_string),
        owner_pid: r.pid,
        owner_started_at: r.started_at,
        posted_at: ctx.now_ms,
    };
    attempt.record_hand_off(ctx).await;
    if let Some((_, Some(e))) = &attempt.written {
        return HandOff::NotPosted(MailboxRefusal::NoLedgerLine(e.clone()));
    }
    let posted = {
        let home = ctx.home.clone();
        offload::run(ctx.deadline, move || mailbox::post(&home, &env)).await
    };
    match posted {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return HandOff::NotPosted(MailboxRefusal::Post(e)),
        Err(_) => return HandOff::NotPosted(MailboxRefusal::Late),
    }
    let receipt = wait_for_receipt(ctx, p).await;
    // No HTTP dialect is involved: the owner delivered in-process (`Dialect` only words a resend).
    let accepted = Outcome::Accepted {
        dialect: Dialect::Rc8,
        recovery: None,
        ambiguity: None,
    };
    match receipt {
        Err(why) => HandOff::Unreadable(why),
        Ok(Some(rc)) if rc.state == mailbox::ReceiptState::Rejected => HandOff::Posted(
            Outcome::Rejected {
                code: rc.code.unwrap_or_else(|| "rejected".into()),
                message: rc.message.unwrap_or_default(),
                after_ambiguous: false,
            },
            true,
        ),
        Ok(Some(_)) => HandOff::Posted(accepted, true),
        Ok(None) => HandOff::Posted(accepted, false),
    }
}

/// The owner drains every 250 ms (lib/mailbox.js): its receipt, polled for up to
/// [`mailbox::RECEIPT_WAIT_MS`]. A receipt that is there but cannot be read does not end the wait (the
/// owner's own may still replace it); at the end it is the answer: `Err`, never "no receipt". A trip
/// past the file deadline reads as no receipt that time.
async fn wait_for_receipt(
    ctx: &Context,
    p: &Plan,
) -> Result<Option<mailbox::Receipt>, mailbox::ReceiptError> {
    let t0 = std::time::Instant::now();
    loop {
        let (home, target, rid) = (ctx.home.clone(), p.target.clone(), p.request_id.clone());
        let got = offload::run(ctx.deadline, move || mailbox::receipt(&home, &target, &rid))
            .await
            .unwrap_or(Ok(None));
        if matches!(got, Ok(Some(_))) || t0.elapsed().as_millis() as u64 >= mailbox::RECEIPT_WAIT_MS
        {
            return got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}
