//! What a send that passed every check ([`super::checks::CHECKS`]) will deliver: the exact text (the
//! `sessions_send` frame or the `send_session_message` From header) and the facts its receipt reports.

use crate::delivery::Mode;
use crate::mail;
use crate::mail::budget::{Allowance, Reservation};
use crate::mail::chain::Hop;
use crate::outcome::{Refusal, SendNote};
use crate::request::ToolRequest;

use super::checks::{Draft, CHECKS};
use super::owner::Routed;
use super::{Context, SendArgs, SendTool};

/// What the send will do once every check passed.
#[derive(Debug)]
pub struct Plan {
    pub tool: SendTool,
    pub target: String,
    pub mode: Mode,
    pub chars: usize,
    /// The exact delivered text (header or frame included).
    pub text: String,
    pub request_id: String,
    pub base_url: String,
    /// The target is live in another host process: delivered through that process's web server.
    pub routed: Option<Routed>,
    pub woke: bool,
    pub running: bool,
    pub pending_from_plugin: usize,
    /// Items already waiting in the live target's next-turn inbox.
    pub pending_next_turn: usize,
    /// What is left of the budget once this send is accepted (`None`: budgets off).
    pub budget: Option<Allowance>,
    /// Holds this send's budget slot until its ledger line is written.
    pub reservation: Option<Reservation>,
    /// `note:` lines for the receipt (e.g. the budget could not be checked).
    pub notes: Vec<SendNote>,
    /// This send's place in its conversation chain (the loop guard, `mail::chain`).
    pub hop: Hop,
    /// The human's inbound policy holds it (`crate::policy`): `Some(why the policy does not verify)`.
    pub hold: Option<Option<crate::policy::Unverified>>,
}

/// Every check of [`CHECKS`] in order, then the plan (`title`: the caller's, for the frame). `Err` is the
/// first refusal.
pub fn make(
    req: &ToolRequest,
    args: SendArgs,
    ctx: &Context,
    title: Title,
) -> Result<Plan, Refusal> {
    let mut d = Draft::new(req, args, ctx);
    for check in CHECKS {
        check(&mut d)?;
    }
    Ok(Plan::of(d, title))
}

/// Every check of [`super::checks::REMOTE_CHECKS`] in order, then the plan of a send to a session of a
/// linked machine (its text is the receiving home's to make: only its request id, chain, hop, counts and
/// budget reservation are used here).
pub fn make_remote(req: &ToolRequest, args: SendArgs, ctx: &Context) -> Result<Plan, Refusal> {
    let mut d = Draft::new(req, args, ctx);
    for check in super::checks::REMOTE_CHECKS {
        check(&mut d)?;
    }
    Ok(Plan::of(d, Title(None)))
}

impl Plan {
    /// The plan of a draft every check passed.
    pub fn of(d: Draft<'_>, title: Title) -> Plan {
        let text = delivered_text(&d, title);
        let cfg = d.cfg();
        let hop = d.hop.unwrap_or_else(|| Hop::fresh(&d.request_id));
        let (allowance, reservation) = match d.admitted {
            Some(a) => (a.allowance, a.reservation),
            None => (None, None),
        };
        let place = d.place;
        let live = place.live;
        let owner = place.owner.as_ref();
        let notes = (cfg.max_relay_hops > 0 && hop.hop >= 2)
            .then_some(SendNote::RelayHop {
                hop: hop.hop,
                max: cfg.max_relay_hops,
            })
            .into_iter()
            .chain(
                live.filter(|l| l.status == "awaiting-user")
                    .map(|_| SendNote::AwaitingUser),
            )
            .collect();
        Plan {
            tool: d.tool,
            chars: d.args.message.chars().count(),
            target: d.args.target,
            mode: d.args.mode,
            text,
            request_id: d.request_id,
            base_url: d.base_url,
            woke: place.cold(),
            // awaiting-user is a running turn that waits on its human (lib/observe.js `awaitingUser`,
            // applied by lib/host.js `liveAgents`)
            running: live.is_some_and(|l| l.status == "running" || l.status == "awaiting-user")
                || owner.is_some_and(|o| o.status == "running" || o.status == "awaiting-user"),
            pending_from_plugin: live.map_or(0, |l| {
                l.pending_rpc_ids
                    .iter()
                    .filter(|id| id.starts_with(mail::REQUEST_ID_PREFIX))
                    .count()
            }),
            pending_next_turn: live.map_or(0, |l| {
                l.pending_next_turn.max(l.pending_next_turn_rpc_ids.len())
            }),
            budget: allowance,
            reservation,
            notes,
            hop,
            routed: place.routed,
            hold: d.hold.clone(),
        }
    }
}

/// The caller's title for a `sessions_send` frame when the shim gives none (it does not know it): the
/// store folds it from the caller's own log (a live caller's log is flushed before each model request,
/// so it is on disk mid-turn). [`Title::prepare`]'s lookup runs on the blocking pool beside the checks
/// (the caller's log, nothing of the target's); the frame waits for it only once every check passed.
#[derive(Debug)]
pub struct Title(Option<std::sync::mpsc::Receiver<Option<String>>>);

impl Title {
    /// The title the checks will wait on, and the lookup to start (after the checks went to the blocking
    /// pool: handing a job over costs the caller's thread ~20–40 µs, and the checks are the longer path);
    /// `None`: nothing to look up. Looked up when the send will frame its message with a stored title:
    /// `sessions_send`, `frameMessages` on, no title from the shim, a caller. Without a tokio runtime the
    /// frame looks it up itself.
    pub fn prepare(req: &ToolRequest, ctx: &Context) -> (Title, Option<TitleLookup>) {
        let wanted = SendTool::from_name(&req.tool) == SendTool::SessionsSend
            && req.config.frame_messages
            && req.caller.as_ref().is_some_and(|c| c.title.is_none());
        let sender = mail::sender_id(req.caller.as_ref()).filter(|_| wanted);
        let (Some(sender), Ok(_)) = (sender, tokio::runtime::Handle::try_current()) else {
            return (Title(None), None);
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let lookup = TitleLookup {
            home: ctx.home.clone(),
            sender: sender.to_string(),
            tx,
        };
        (Title(Some(rx)), Some(lookup))
    }

    /// The stored title of `sender` (the started lookup's answer, else looked up now). A lookup that
    /// does not answer within `deadline` (a stuck file) frames without a title: the checks' thread is
    /// never held longer than their own deadline.
    fn of(
        self,
        home: &std::path::Path,
        sender: &str,
        deadline: std::time::Duration,
    ) -> Option<String> {
        use std::sync::mpsc::RecvTimeoutError;
        match self.0.map(|rx| rx.recv_timeout(deadline)) {
            Some(Ok(title)) => title,
            Some(Err(RecvTimeoutError::Timeout)) => None,
            // not started, or it did not answer (it panicked): look it up here
            None | Some(Err(RecvTimeoutError::Disconnected)) => {
                store::find_session(home, sender).and_then(|m| m.title)
            }
        }
    }
}

/// The caller's title lookup [`Title::prepare`] made, not started yet.
#[derive(Debug)]
pub struct TitleLookup {
    home: std::path::PathBuf,
    sender: String,
    tx: std::sync::mpsc::SyncSender<Option<String>>,
}

impl TitleLookup {
    /// Look the title up on the blocking pool (a lookup never started answers nothing: the frame then
    /// looks it up itself).
    pub fn start(self) {
        let TitleLookup { home, sender, tx } = self;
        drop(base::offload::start(move || {
            let _ = tx.send(store::find_session(&home, &sender).and_then(|m| m.title));
        }));
    }
}

/// The text the target receives: `send_session_message` heads it with `From <sender> ：`;
/// `sessions_send` frames it (`mail::frame`) unless `frameMessages` is off.
fn delivered_text(d: &Draft<'_>, title: Title) -> String {
    let (cfg, sender, message) = (d.cfg(), d.sender.as_str(), d.args.message.as_str());
    match d.tool {
        SendTool::SendSessionMessage => mail::with_from_header(sender, message),
        SendTool::SessionsSend if cfg.frame_messages => {
            let stored_title = match d.req.caller.as_ref().and_then(|c| c.title.clone()) {
                Some(t) => Some(t),
                None => title.of(d.ctx.home(), sender, d.ctx.deadline),
            };
            let hop = d.hop.as_ref().map_or(1, |h| h.hop);
            mail::frame(
                sender,
                stored_title.as_deref(),
                d.args.mode.as_str(),
                (cfg.max_relay_hops > 0).then_some((hop, cfg.max_relay_hops)),
                message,
            )
        }
        SendTool::SessionsSend => message.to_string(),
    }
}
