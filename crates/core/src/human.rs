//! The human's routes of issue 32 (standing rules, held mail in bulk, the held counts, writing to many):
//! their payloads and results, declared once here (docs/client.md "The routes" lists them exactly), and
//! the work behind each. `lib/client-host.js` checks the shape of a payload and hands its JSON to the
//! binding (`src/lib.rs`), which parses it into these types; what comes back is one of these types as
//! JSON. Nothing here is reachable from a tool an agent calls.
//!
//! | route | payload | result |
//! |---|---|---|
//! | `rules.set` | [`RuleChange`] | [`RulesView`] |
//! | `rules.list` | `{}` | [`RulesView`] |
//! | `held.decideMany` | [`DecideMany`] | [`DecideManyResult`] |
//! | `held.counts` | `{}` | [`HeldCounts`] |
//! | `human.sendMany` | [`SendMany`] | [`SendManyResult`] |

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::machine::MachineId;
use crate::policy::held::HeldState;
use crate::policy::{By, Inbound};

// ---- rules.set / rules.list ----

/// `rules.set`: one standing rule, for a sender session OR a linked machine (exactly one of the two);
/// `inbound: null` removes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleChange {
    #[serde(default)]
    pub sender: Option<String>,
    #[serde(default)]
    pub machine: Option<MachineId>,
    pub inbound: Option<Inbound>,
}

/// The rules in force, for the human (the result of `rules.set` and `rules.list`; the per-session `view`
/// carries it too, as `rules`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RulesView {
    /// The one order, first rule first: `stop-all`, `sender`, `machine`, `session`, `default`
    /// (`crate::policy::Policy::rule`); the UI prints it once where rules are edited.
    pub order: Vec<By>,
    pub stop_all: bool,
    /// Standing rules per sender session id.
    pub senders: BTreeMap<String, Inbound>,
    /// Standing rules per linked machine.
    pub machines: BTreeMap<MachineId, Inbound>,
    /// Each target session's own inbound (only those not `accept`).
    pub sessions: BTreeMap<String, Inbound>,
    /// How long held mail waits before it expires.
    pub held_ttl_ms: u64,
    /// Why the policy document does not verify (then every message is held and the rules above are the
    /// defaults: saving any change re-seals from them).
    pub unverified: Option<String>,
}

/// The home's standing rules as the human sees them (`rules.list`, `rules.set`, the view's `rules`).
pub fn rules_view(home: &Path) -> RulesView {
    let (p, unverified) = match crate::policy::read(home) {
        crate::policy::Reading::Verified(p) => (p, None),
        crate::policy::Reading::Absent => (crate::policy::Policy::default(), None),
        crate::policy::Reading::Unverified(why) => {
            (crate::policy::Policy::default(), Some(why.to_string()))
        }
    };
    RulesView {
        order: By::ORDER.to_vec(),
        stop_all: p.stop_all,
        held_ttl_ms: p.held_ttl_ms(),
        senders: p.senders,
        machines: p.machines,
        sessions: p.sessions,
        unverified,
    }
}

// ---- held.decideMany ----

/// Which held messages a bulk decision takes: `{all: true}`, or `sender` and/or `session` (both: the
/// messages of that sender held for that session). An empty filter is refused (all must be said).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeldFilter {
    #[serde(default)]
    pub sender: Option<String>,
    /// The target session the messages are held for.
    #[serde(default)]
    pub session: Option<String>,
    #[serde(default)]
    pub all: bool,
}

/// The human's decision on held mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeldDecision {
    Approve,
    Reject,
}

/// `held.decideMany`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecideMany {
    pub filter: HeldFilter,
    pub decision: HeldDecision,
}

/// One held message a bulk decision took (or tried to).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecidedItem {
    pub session_id: String,
    pub request_id: String,
    pub sender: Option<String>,
    /// What it is now: `approved`, `rejected`, or `expired` (it expired before the decision; an
    /// approval past its time is refused). `held` only with `error`.
    pub state: HeldState,
    /// Approved and handed to the target's mailbox.
    pub posted: bool,
    /// Why this one was not decided as asked (decided already by someone else, the hand-off failed).
    pub error: Option<String>,
}

/// The result of `held.decideMany`: every message the filter matched that was still held, each decided
/// once (a second decision on the same message — this call's or another's — is refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecideManyResult {
    pub items: Vec<DecidedItem>,
    /// More held messages matched than one call decides (`crate::policy::held::MAX_DECIDE_MANY`).
    pub truncated: bool,
}

// ---- held.counts ----

/// Messages waiting for the human's decision on one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldCount {
    pub session_id: String,
    /// Held and not expired.
    pub held: u32,
    /// The earliest `expiresAt` among them (ms since the epoch).
    pub next_expires_at: Option<i64>,
}

/// The result of `held.counts`: every session of the home with mail waiting for the human (sessions
/// with none are left out), and the sum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldCounts {
    pub sessions: Vec<HeldCount>,
    pub total: u32,
    /// More session folders than one count reads (`crate::policy::held::MAX_SESSION_FOLDERS`).
    pub truncated: bool,
}

// ---- human.sendMany ----

/// The human's prompt mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptMode {
    Queue,
    Steer,
}

/// `human.sendMany`: one message from the human to several sessions, delivered as the human's own
/// prompt (the host's prompt route, as the human's browser does: no From header, no agent mail).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendMany {
    /// 1..=[`MAX_SEND_MANY`] session ids; a repeated id is sent once.
    pub session_ids: Vec<String>,
    pub text: String,
    pub mode: PromptMode,
}

/// Most sessions one `human.sendMany` writes to.
pub const MAX_SEND_MANY: usize = 64;
/// Longest text one `human.sendMany` sends (characters).
pub const MAX_SEND_MANY_CHARS: usize = 100_000;

/// What became of the human's message in one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LandingState {
    /// The session's host took it into the session's inbox (queue: its next turn; steer: the running
    /// turn's next step).
    Accepted,
    /// The host, or a check before it, refused it (`code`, `message`); nothing was delivered.
    Refused,
    /// It went out and no clear answer came back; looked up, still unsettled: it MAY have landed.
    MayHaveLanded,
}

/// One session's landing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Landing {
    pub session_id: String,
    /// The prompt's request id (the `source.rpcId` the host keeps, a plain UUID as the browser's), when
    /// it was sent.
    pub request_id: Option<String>,
    pub state: LandingState,
    /// A stable code: the host's error code, or ours (`held-elsewhere`, `no-web-server`,
    /// `not-a-session`, `unreachable`).
    pub code: Option<String>,
    pub message: Option<String>,
}

/// The result of `human.sendMany`: one landing per distinct session id, in the order given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SendManyResult {
    pub landings: Vec<Landing>,
}
