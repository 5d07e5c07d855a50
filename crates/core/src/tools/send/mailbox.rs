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
/// [`mailbox::RECEIPT_WAIT_MS`] ([`wait_with`]).
async fn wait_for_receipt(
    ctx: &Context,
    p: &Plan,
) -> Result<Option<mailbox::Receipt>, mailbox::ReceiptError> {
    wait_with(|| {
        let (home, target, rid) = (ctx.home.clone(), p.target.clone(), p.request_id.clone());
        offload::run(ctx.deadline, move || mailbox::receipt(&home, &target, &rid))
    })
    .await
}

/// One look for the receipt: what it found, or why the trip gave nothing (past the file deadline).
type Look = Result<Result<Option<mailbox::Receipt>, mailbox::ReceiptError>, offload::Offload>;

/// Poll `look` every 25 ms until a readable receipt comes or [`mailbox::RECEIPT_WAIT_MS`] have passed.
/// A receipt that is there but cannot be read does not end the wait (the owner's own may still replace
/// it); the answer at the end is the strongest thing seen: a readable receipt, else an unreadable one
/// (`Err`, whatever the later looks found: a look past the file deadline, or the file gone, does not
/// make it "no receipt"), else none. A look past the file deadline finds nothing that time.
async fn wait_with<F, L>(mut look: F) -> Result<Option<mailbox::Receipt>, mailbox::ReceiptError>
where
    F: FnMut() -> L,
    L: std::future::Future<Output = Look>,
{
    let t0 = std::time::Instant::now();
    let mut unreadable = None;
    loop {
        match look().await {
            Ok(Ok(Some(r))) => return Ok(Some(r)),
            Ok(Err(why)) => unreadable = Some(why),
            Ok(Ok(None)) | Err(_) => {}
        }
        if t0.elapsed().as_millis() as u64 >= mailbox::RECEIPT_WAIT_MS {
            return unreadable.map_or(Ok(None), Err);
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailbox::ReceiptError;
    use std::time::Duration;

    /// The wait's answer when its looks find, in turn, `first` for the first 3 looks, then `rest` till
    /// the end of the wait.
    async fn answer(first: Look, rest: Look) -> Result<Option<mailbox::Receipt>, ReceiptError> {
        let mut n = 0;
        wait_with(|| {
            n += 1;
            let got = if n <= 3 { first.clone() } else { rest.clone() };
            std::future::ready(got)
        })
        .await
    }

    /// The last look of the wait came back past the file deadline (a slow home): on d88262b it counted as
    /// "no receipt" though every look before had found an unreadable one, and the send said the message
    /// waits in the mailbox. The strongest thing seen is the answer: unreadable beats none. (The waits
    /// run side by side: 2 s in all.)
    #[tokio::test]
    async fn an_unreadable_receipt_seen_once_is_the_answer_whatever_the_later_looks_find() {
        let late = || Err(offload::Offload::TimedOut(Duration::from_secs(15)));
        let unreadable = || Ok(Err(ReceiptError::NotThisRequest));
        let r = mailbox::Receipt {
            request_id: "dsh-session-mail:00000000-0000-4000-8000-000000000001".into(),
            session_id: "session-b".into(),
            state: mailbox::ReceiptState::Delivered,
            code: None,
            message: None,
            route: None,
            pid: 7,
        };
        let (past_deadline, panicked, gone, replaced, nothing) = tokio::join!(
            answer(unreadable(), late()),
            answer(unreadable(), Err(offload::Offload::Panicked)),
            answer(unreadable(), Ok(Ok(None))),
            answer(unreadable(), Ok(Ok(Some(r.clone())))),
            answer(late(), late()),
        );
        let no = Err(ReceiptError::NotThisRequest);
        assert_eq!(past_deadline, no, "past the file deadline at the end");
        assert_eq!(panicked, no);
        assert_eq!(gone, no, "the file gone since");
        assert_eq!(replaced, Ok(Some(r)), "the owner's own receipt replaced it");
        assert_eq!(nothing, Ok(None), "nothing seen");
    }
}
