//! Every check of a send before anything is delivered, one function each, run in the order of
//! [`CHECKS`]. Each refusal leaves the target untouched; the first that applies wins and nothing after
//! it runs. The arguments were validated before (`bad-argument`, `tools::args::send`, pure).
//!
//! To add a check: write a `fn(&mut Draft) -> Result<(), Refusal>` here (a field on [`Draft`] if a
//! later step needs what it found) and put it in its place in [`CHECKS`]. Nothing of the target may
//! be read before `resume_allowed` (seed 000 ordering guarantee 1), nothing sent before
//! `messageable` (guarantee 2). Both tools run the same list; `allowResume` and `maxSendChars`
//! govern both.

use std::path::PathBuf;

use serde_json::Value;

use crate::config::Config;
use crate::delivery::Mode;
use crate::mail::budget::{self, Admitted};
use crate::mail::chain::{self, Hop};
use crate::mail::{self, guard, stacking};
use crate::outcome::{Missing, Refusal};
use crate::presence;
use crate::request::ToolRequest;

use super::owner::{self, Place, Routed};
use super::{Context, SendArgs, SendTool};

/// One check: `Err` is the refusal that ends the send.
pub type Check = fn(&mut Draft<'_>) -> Result<(), Refusal>;

/// The checks, in the order they run.
pub const CHECKS: &[Check] = &[
    // `no-caller`: the sender is the runtime's id, never an argument.
    caller,
    // `stopped` / `refused-by-human`: the human's inbound policy and standing rules (`crate::policy::decide`,
    // its one order; set only through the web client's routes), before anything of the target is read; a
    // message on hold passes every check below and is then kept for the human instead of delivered.
    human_policy,
    // (never refuses) where the target lives: this process's registry, else presence.
    locate,
    // `no-web-server`: a target held by another process needs none here.
    web_server,
    // `self-send`.
    not_self,
    // `empty-body`: nothing visible (whitespace, zero-width, bidi controls, fillers, tag characters).
    visible_body,
    // `too-long` (`maxSendChars`, in characters).
    short_body,
    // `forged-header`.
    unforged_body,
    // `budget` (`mail::budget`): from the ledger alone; nothing of the target has been read yet.
    budget,
    // `relay-limit`: the causal loop guard (`mail::chain`), from the caller's turn and the ledger.
    relay,
    // `held-elsewhere`: live in another process that offers no route (never resumed here).
    owner_reachable,
    // `resume-disabled`: not live anywhere while `allowResume` is false; decided before the
    // target is resolved, so not even its log is opened (ordering guarantee 1).
    resume_allowed,
    // `not-found`: resolve the live header, else the store.
    resolve,
    // `not-messageable` (a subagent): before anything is sent (ordering guarantee 2).
    messageable,
    // `held-elsewhere`: a cold target a DSH process without this plugin may hold (`presence::foreign`).
    not_held_by_foreign,
    // `stacked` (`mail::stacking`): queue sends only.
    not_stacked,
];

/// The checks of a send to a session of a linked machine, on the sending side, in order: the rest —
/// the human's policy there, the target, the holder, stacking, the frame — are the receiving home's own
/// ([`CHECKS`], run there by `remote::serve` on arrival, with this side's request id, chain and hop).
/// The budget here counts the pair and the sender as for a local send; the loop guard here gives the hop
/// that travels with the message.
pub const REMOTE_CHECKS: &[Check] = &[
    caller,
    not_self,
    visible_body,
    short_body,
    unforged_body,
    budget,
    relay,
];

/// A send under check: its request and arguments, and what the checks so far found.
pub struct Draft<'a> {
    pub req: &'a ToolRequest,
    pub ctx: &'a Context,
    pub tool: SendTool,
    pub args: SendArgs,
    /// Minted with the draft: the relay check names a new chain after it.
    pub request_id: String,
    /// Set by [`caller`].
    pub sender: String,
    /// Set by [`locate`].
    pub place: Place<'a>,
    /// The web server the message goes through; set by [`web_server`].
    pub base_url: String,
    /// Set by [`budget`].
    pub admitted: Option<Admitted>,
    /// Set by [`relay`].
    pub hop: Option<Hop>,
    /// Set by [`resolve`].
    pub target: Target,
    /// Set by [`human_policy`]: `Some(why the policy does not verify)` when the send is to be held.
    pub hold: Option<Option<crate::policy::Unverified>>,
}

/// What [`resolve`] found out about the target.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Target {
    pub subagent: bool,
    /// `parentSession` of its header.
    pub parent: Option<String>,
    /// Its log, when it is cold (resolved from the store).
    pub cold_log: Option<PathBuf>,
}

impl<'a> Draft<'a> {
    pub fn new(req: &'a ToolRequest, args: SendArgs, ctx: &'a Context) -> Draft<'a> {
        Draft {
            req,
            ctx,
            tool: SendTool::from_name(&req.tool),
            args,
            // A send that arrived from a linked machine keeps the sender's request id: a retry of it
            // lands once (`crossing::arrivals`, the host's own dedup), and both sides' `verify` name it.
            request_id: req
                .incoming
                .as_ref()
                .map_or_else(mail::new_request_id, |i| i.request_id.clone()),
            sender: String::new(),
            place: Place::default(),
            base_url: String::new(),
            admitted: None,
            hop: None,
            target: Target::default(),
            hold: None,
        }
    }

    pub fn cfg(&self) -> &'a Config {
        &self.req.config
    }

    pub fn urgent(&self) -> bool {
        self.args.mode == Mode::Steer
    }
}

fn caller(d: &mut Draft) -> Result<(), Refusal> {
    d.sender = mail::sender_id(d.req.caller.as_ref())
        .ok_or(Refusal::NoCaller)?
        .to_string();
    Ok(())
}

fn human_policy(d: &mut Draft) -> Result<(), Refusal> {
    // A local send: the sender is a session of this home (no sender machine); mail that arrived from a
    // linked machine (`remote::serve`) names that machine, so its standing rule applies.
    let machine = d.req.incoming.as_ref().map(|i| &i.machine);
    d.hold = match crate::policy::decide(d.ctx.home(), &d.args.target, &d.sender, machine) {
        crate::policy::Decision::Stopped => {
            return Err(Refusal::Stopped {
                target: d.args.target.clone(),
            })
        }
        crate::policy::Decision::Refuse(by) => {
            return Err(Refusal::RefusedByHuman {
                by,
                target: d.args.target.clone(),
            })
        }
        crate::policy::Decision::Hold { unverified } => Some(unverified),
        crate::policy::Decision::Accept => None,
    };
    Ok(())
}

fn locate(d: &mut Draft) -> Result<(), Refusal> {
    d.place = owner::locate(d.req, d.ctx.home(), &d.args.target);
    Ok(())
}

fn web_server(d: &mut Draft) -> Result<(), Refusal> {
    let host = &d.req.host;
    d.base_url = match &d.place.routed {
        Some(Routed {
            base_url: Some(b), ..
        }) => b.clone(),
        // The mailbox route needs no web server here.
        Some(_) => host.base_url.clone().unwrap_or_default(),
        None => host
            .base_url
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| Refusal::NoWebServer {
                profile: host.profile.clone(),
            })?
            .to_string(),
    };
    Ok(())
}

fn not_self(d: &mut Draft) -> Result<(), Refusal> {
    let target = d.args.target.as_str();
    let is_self = target == d.sender
        || d.req.caller.as_ref().is_some_and(|c| {
            c.session_id.as_deref() == Some(target) || c.agent_id.as_deref() == Some(target)
        });
    if is_self {
        return Err(Refusal::SelfSend {
            target: d.args.target.clone(),
        });
    }
    Ok(())
}

fn visible_body(d: &mut Draft) -> Result<(), Refusal> {
    if guard::is_blank(&d.args.message) {
        return Err(Refusal::EmptyBody);
    }
    Ok(())
}

fn short_body(d: &mut Draft) -> Result<(), Refusal> {
    let (chars, max) = (
        d.args.message.chars().count(),
        d.cfg().max_send_chars as usize,
    );
    if chars > max {
        return Err(Refusal::TooLong { chars, max });
    }
    Ok(())
}

fn unforged_body(d: &mut Draft) -> Result<(), Refusal> {
    guard::check_body(&d.args.message).map_err(Refusal::ForgedHeader)
}

fn budget(d: &mut Draft) -> Result<(), Refusal> {
    let checked = budget::check(
        d.ctx.home(),
        &d.sender,
        &d.args.target,
        d.urgent(),
        d.ctx.now_ms,
        d.cfg(),
    );
    d.admitted = Some(checked.map_err(|r| match r {
        budget::Refusal::Exceeded(exceeded) => Refusal::Budget {
            exceeded,
            target: d.args.target.clone(),
            tool: d.tool,
        },
        // Fails closed (issue 11 #11): a limit that cannot be checked refuses.
        budget::Refusal::Unchecked(why) => Refusal::BudgetUnchecked { why },
    })?);
    // Mail from a linked machine: that machine's own budget too (all its senders together).
    if let Some(i) = &d.req.incoming {
        crate::crossing::machine_budget(d.ctx.home(), &i.machine, d.ctx.now_ms, d.cfg()).map_err(
            |r| match r {
                Ok(exceeded) => Refusal::MachineBudget(exceeded),
                Err(why) => Refusal::BudgetUnchecked {
                    why: budget::Unchecked::Unreadable(why),
                },
            },
        )?;
    }
    Ok(())
}

fn relay(d: &mut Draft) -> Result<(), Refusal> {
    let max = d.cfg().max_relay_hops;
    if let Some(i) = &d.req.incoming {
        // Mail from a linked machine: its chain and hop travelled with it; the hop is never counted
        // lower than this home's ledger knows for that chain.
        let chain = i.chain.clone().unwrap_or_else(|| d.request_id.clone());
        let hop = crate::mail::chain::Hop {
            hop: crate::crossing::arriving_hop(d.ctx.home(), Some(&chain), i.hop),
            chain,
            sessions: Vec::new(),
            started: None,
            unverified: None,
        };
        if max > 0 && hop.hop > max {
            return Err(Refusal::RelayLimit { hop, max });
        }
        d.hop = Some(hop);
        return Ok(());
    }
    let ev = chain::Evidence::of(d.req.caller.as_ref());
    let hop = chain::check(d.ctx.home(), &ev, &d.request_id, max)
        .map_err(|hop| Refusal::RelayLimit { hop, max })?;
    d.hop = Some(hop);
    Ok(())
}

/// Never resume a session another process holds: without a route to its owner, refuse.
fn owner_reachable(d: &mut Draft) -> Result<(), Refusal> {
    if let (Some(o), None) = (&d.place.owner, &d.place.routed) {
        return Err(Refusal::unroutable(&d.args.target, &o.record, None));
    }
    Ok(())
}

fn resume_allowed(d: &mut Draft) -> Result<(), Refusal> {
    if d.place.cold() && !d.cfg().allow_resume {
        return Err(Refusal::ResumeDisabled {
            target: d.args.target.clone(),
        });
    }
    Ok(())
}

fn header_str<'a>(h: &'a Value, key: &str) -> Option<&'a str> {
    h.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Resolve: live header, else the store. A subagent is `origin: "subagent"`; a fork (parentSession
/// without origin) is top-level [R8/Z17 `session-controller/src/agent.ts`; docs/output-contract.md "Common rules"].
fn resolve(d: &mut Draft) -> Result<(), Refusal> {
    d.target = match d.place.live {
        Some(l) => Target {
            subagent: store::events::is_subagent_origin(header_str(&l.header, "origin")),
            parent: header_str(&l.header, "parentSession").map(str::to_string),
            cold_log: None,
        },
        None => {
            let owned = d.place.owner.is_some();
            match owner::find_target(d.ctx.home(), &d.args.target, owned) {
                Some(meta) => Target {
                    subagent: meta.is_subagent(),
                    parent: meta.parent_session.clone(),
                    cold_log: Some(meta.log_path),
                },
                None => {
                    return Err(Refusal::NotFound {
                        target: d.args.target.clone(),
                        missing: Missing::SendTarget,
                    })
                }
            }
        }
    };
    Ok(())
}

fn messageable(d: &mut Draft) -> Result<(), Refusal> {
    if d.target.subagent {
        return Err(Refusal::NotMessageable {
            target: d.args.target.clone(),
            owner: d.target.parent.clone(),
        });
    }
    Ok(())
}

/// A cold target may still be live in a DSH process on this home that does not mount this plugin (it
/// publishes no presence; rc.8 has no session lock): waking it here would fork its history. Evidence
/// from /proc (Linux, same user, bounded), looked at only when this send would wake the session.
fn not_held_by_foreign(d: &mut Draft) -> Result<(), Refusal> {
    if let (Some(log), None) = (&d.target.cold_log, &d.place.owner) {
        // every believed record's process says what it holds (none lists the target: it is cold)
        let known: Vec<u32> = d.req.peers_at(d.ctx.home()).iter().map(|r| r.pid).collect();
        if let Some(holder) = presence::foreign::holder_of(d.ctx.home(), log, &known) {
            return Err(Refusal::MayBeHeldElsewhere {
                target: d.args.target.clone(),
                holder,
            });
        }
    }
    Ok(())
}

/// Stacking: queue sends only; a live target's pending ids, or a cold target's log.
fn not_stacked(d: &mut Draft) -> Result<(), Refusal> {
    stacking::check(
        d.ctx.home(),
        &d.sender,
        &d.args.target,
        d.urgent(),
        d.place.live,
        d.ctx.now_ms,
        d.cfg(),
    )
    .map_err(|stacked| Refusal::Stacked {
        stacked,
        target: d.args.target.clone(),
        tool: d.tool,
    })
}
