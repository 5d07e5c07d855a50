//! Recording: the one audit ledger line of a send attempt (`crate::ledger`). Its fields are gathered
//! once, when the arguments are read ([`Attempt::new`]); a planned send adds its request id and chain
//! ([`Attempt::delivering`]); the outcome is added when the line is written ([`Attempt::close`]).

use crate::ledger;
use crate::mail;
use crate::mail::chain::Hop;
use crate::outcome::{SendNote, SendResult};
use crate::request::ToolRequest;
use crate::tools::args::PartialSend;
use base::offload;

use super::plan::Plan;
use super::{Context, SendTool};

/// Everything the ledger line of one attempt says except its outcome. Never the body: its length
/// and hash only (`ledger::Entry::new`).
#[derive(Debug, Clone)]
pub struct Attempt {
    pub tool: SendTool,
    /// The runtime's caller id (never an argument).
    pub sender: Option<String>,
    /// The arguments as far as they could be read.
    pub args: PartialSend,
    /// Minted once the checks passed (a refused check records none).
    pub request_id: Option<String>,
    /// The chain this send is part of (written on a send that counts).
    pub hop: Option<Hop>,
    /// A line written already, at the mailbox hand-off ([`Attempt::record_hand_off`]): its outcome and
    /// whether it was written.
    pub written: Option<(ledger::LedgerOutcome, Option<ledger::LedgerError>)>,
    /// The delivered text (hashed on an accepted line: what a re-delivery is checked against).
    pub text: Option<String>,
    /// The linked machine the send arrived from (the line's `fromMachine`).
    pub from_machine: Option<String>,
    /// The linked machine the send went to (the line's `toMachine`).
    pub to_machine: Option<String>,
}

impl Attempt {
    pub fn new(req: &ToolRequest, tool: SendTool, args: PartialSend) -> Attempt {
        Attempt {
            tool,
            sender: mail::sender_id(req.caller.as_ref()).map(str::to_string),
            args,
            request_id: None,
            hop: None,
            written: None,
            text: None,
            from_machine: req
                .incoming
                .as_ref()
                .map(|i| i.machine.as_str().to_string()),
            to_machine: None,
        }
    }

    /// Every check passed: the line carries the request id and the chain.
    pub fn delivering(&mut self, p: &Plan) {
        self.request_id = Some(p.request_id.clone());
        self.hop = Some(p.hop.clone());
        self.text = Some(p.text.clone());
    }

    /// The ledger line of this attempt ending in `result`.
    pub fn entry(&self, now_ms: i64, result: &SendResult) -> ledger::Entry {
        self.entry_with(now_ms, result.ledger_outcome())
    }

    /// The ledger line of this attempt with `outcome`.
    pub fn entry_with(&self, now_ms: i64, outcome: ledger::LedgerOutcome) -> ledger::Entry {
        let mut entry = ledger::Entry::new(
            now_ms,
            self.sender.as_deref(),
            self.args.target.as_deref(),
            self.tool.name(),
            self.args.mode.map(|m| m.as_str()),
            self.request_id.as_deref(),
            outcome,
            self.args.message.as_deref(),
        );
        // Only a send that counts carries its chain: the next hop looks up landed deliveries only.
        // a held message carries its hop too: approved, it lands at that hop (its card and the mail view show it)
        let held = entry.outcome == crate::ledger::LedgerOutcome::Held;
        if let Some(h) = self.hop.as_ref().filter(|_| entry.counts_as_sent() || held) {
            entry.chain = Some(h.chain.clone());
            entry.hop = Some(h.hop);
        }
        entry.from_machine = self.from_machine.clone();
        entry.to_machine = self.to_machine.clone();
        if entry.outcome == ledger::LedgerOutcome::Accepted {
            entry.text_sha256 = self.text.as_deref().map(ledger::sha256_hex);
        }
        entry
    }

    /// The message was posted to its owner's mailbox: write the `accepted` line now, before the owner
    /// drains it — the owner delivers an envelope only once its sender's line vouches for it
    /// (`crate::mailbox::admit`), and the receiving session's loop guard finds the hop there.
    pub async fn record_hand_off(&mut self, ctx: &Context) {
        let outcome = ledger::LedgerOutcome::Accepted;
        let entry = self.entry_with(ctx.now_ms, outcome.clone());
        self.written = Some((outcome, write(ctx, entry).await));
    }

    /// Write the line off the executor and return `result` with the note of a line not written (a
    /// line not written in time is a note, never a hang). After a hand-off line, a second line is
    /// written only when the outcome is another one (the owner's host refused the message).
    pub async fn close(self, ctx: &Context, result: SendResult) -> SendResult {
        self.close_then(ctx, result, |_, _| ()).await.0
    }

    /// [`Attempt::close`], then `then(home, line_written)` in the same trip to the blocking pool, after
    /// the line: `line_written` is true when this attempt's line is in the ledger (the hand-off's, or
    /// the one just written). The accepted send's queued record goes there, so it is never written
    /// before the line that vouches for it, and costs no second trip. `Err(())`: the trip did not
    /// finish within the deadline (the line's note says so; `then` may still run after it).
    pub async fn close_then<T, F>(
        self,
        ctx: &Context,
        mut result: SendResult,
        then: F,
    ) -> (SendResult, Result<T, ()>)
    where
        T: Send + 'static,
        F: FnOnce(&std::path::Path, bool) -> T + Send + 'static,
    {
        let outcome = result.ledger_outcome();
        let (same, prior) = match &self.written {
            Some((o, n)) => (*o == outcome, n.clone()),
            None => (false, None),
        };
        let entry = (!same).then(|| self.entry_with(ctx.now_ms, outcome));
        let (home, prior_ok) = (ctx.home.clone(), prior.is_none());
        let job = offload::run(ctx.deadline, move || {
            let late = entry.and_then(|e| ledger::append(&home, &e).err());
            let line_written = prior_ok && late.is_none();
            (late, then(&home, line_written))
        })
        .await;
        let (note, after) = match job {
            Ok((late, t)) => (prior.or(late), Ok(t)),
            Err(_) => (prior.or(Some(ledger::LedgerError::Late)), Err(())),
        };
        result.notes.extend(note.map(SendNote::LedgerNotWritten));
        (result, after)
    }
}

/// Append `entry` off the executor: the error, if it was not written (in time).
async fn write(ctx: &Context, entry: ledger::Entry) -> Option<ledger::LedgerError> {
    let home = ctx.home.clone();
    offload::run(ctx.deadline, move || ledger::append(&home, &entry).err())
        .await
        .unwrap_or(Some(ledger::LedgerError::Late))
}
