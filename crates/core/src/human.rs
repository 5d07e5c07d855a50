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

// ---- the work behind the routes ----

/// Why a route's payload was not taken (the route answers `{ok:false, error:{code, message}}`).
#[derive(Debug)]
pub enum RouteError {
    /// The payload is not what the route takes (the message says what is).
    BadRequest(&'static str),
    /// The policy could not be changed.
    Policy(crate::policy::PolicyError),
}

impl std::fmt::Display for RouteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouteError::BadRequest(what) => f.write_str(what),
            RouteError::Policy(e) => e.fmt(f),
        }
    }
}

impl RouteError {
    /// The route's error code.
    pub fn code(&self) -> &'static str {
        match self {
            RouteError::BadRequest(_) => "bad-request",
            RouteError::Policy(_) => "policy",
        }
    }
}

/// `rules.set`: put or remove one standing rule (re-sealing the document), and the rules now in force.
pub fn rules_set(home: &Path, change: &RuleChange, now_ms: i64) -> Result<RulesView, RouteError> {
    use crate::policy::Change;
    let c = match (&change.sender, &change.machine) {
        (Some(s), None) => Change::Sender(s.clone(), change.inbound),
        (None, Some(m)) => Change::Machine(m.clone(), change.inbound),
        _ => {
            return Err(RouteError::BadRequest(
                "a rule is {sender: <session id>, inbound} or {machine: <machine id>, inbound}, inbound accept|hold|refuse or null",
            ))
        }
    };
    crate::policy::apply(home, &c, now_ms).map_err(RouteError::Policy)?;
    Ok(rules_view(home))
}

/// `held.counts`: the messages waiting for the human, per session of the home (`crate::policy::held::waiting`:
/// each file's seal checked once while it is the same file). Looking expires what is past its time.
pub fn held_counts(home: &Path, now_ms: i64) -> HeldCounts {
    let (sessions, truncated) = crate::policy::held::sessions(home);
    let mut out = Vec::new();
    for s in sessions {
        let (n, next) = crate::policy::held::waiting(home, &s, now_ms);
        if n == 0 {
            continue;
        }
        out.push(HeldCount {
            held: u32::try_from(n).unwrap_or(u32::MAX),
            next_expires_at: next,
            session_id: s,
        });
    }
    HeldCounts {
        total: out.iter().map(|c| c.held).sum(),
        sessions: out,
        truncated,
    }
}

/// `held.decideMany`: the human's one decision on every held message the filter matches, oldest first,
/// each taken once (`crate::policy::held::decide`: an exclusive sealed decision; one that expired or was
/// decided meanwhile is reported as it is, not decided again).
pub fn decide_many(
    home: &Path,
    req: &DecideMany,
    now_ms: i64,
) -> Result<DecideManyResult, RouteError> {
    use crate::policy::held::{self, HeldError, MAX_DECIDE_MANY};
    let f = &req.filter;
    let named = f.sender.is_some() || f.session.is_some();
    if f.all == named {
        return Err(RouteError::BadRequest(
            "a filter is {all: true}, or {sender} and/or {session}",
        ));
    }
    let sessions = match &f.session {
        Some(s) => vec![s.clone()],
        None => held::sessions(home).0,
    };
    let approve = req.decision == HeldDecision::Approve;
    let mut items = Vec::new();
    let mut truncated = false;
    for s in sessions {
        for item in held::pending(home, &s, now_ms) {
            if f.sender
                .as_ref()
                .is_some_and(|x| item.envelope.sender.as_ref() != Some(x))
            {
                continue;
            }
            if items.len() >= MAX_DECIDE_MANY {
                truncated = true;
                break;
            }
            let rid = item.envelope.request_id.clone();
            let sender = item.envelope.sender.clone();
            let (state, posted, error) = match held::decide(home, &s, &rid, approve, now_ms) {
                Ok(i) => (i.state, i.posted, None),
                Err(HeldError::Decided { state, .. }) if state == HeldState::Expired => {
                    (state, false, None)
                }
                Err(HeldError::Decided { state, .. }) => (
                    state,
                    false,
                    Some(format!("{rid} was {} already", state.as_str())),
                ),
                // (an approval whose hand-off failed is approved all the same: recovered later)
                Err(e) => (
                    held::state_of(home, &rid, Some(&s)).map_or(HeldState::Held, |i| i.state),
                    false,
                    Some(e.to_string()),
                ),
            };
            items.push(DecidedItem {
                session_id: s.clone(),
                request_id: rid,
                sender,
                state,
                posted,
                error,
            });
        }
    }
    Ok(DecideManyResult { items, truncated })
}

/// What the route knows of this process for `human.sendMany` (the shim gathers it: lib/client-host.js).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PromptHost {
    /// This host's web server (`http://127.0.0.1:<port>`).
    pub base_url: Option<String>,
    /// The browser-session secret (v2 hosts), base64url.
    pub host_secret: Option<String>,
    pub host_version: Option<String>,
    /// `auto`, `rc8` or `v2` (the plugin's `hostApi`).
    pub host_api: Option<String>,
    /// The sessions live in this process.
    pub live: Vec<String>,
}

/// Where one session's prompt goes: this host, or the host of the process that holds it live.
fn prompt_route(
    home: &Path,
    host: &PromptHost,
    peers: &[crate::presence::Record],
    session: &str,
) -> Result<String, (&'static str, String)> {
    let here = || {
        host.base_url
            .clone()
            .filter(|u| !u.trim().is_empty())
            .ok_or((
                "no-web-server",
                "this process has no web server".to_string(),
            ))
    };
    if host.live.iter().any(|l| l == session) {
        return here();
    }
    if let Some((r, _)) = crate::presence::owner_of(peers, session) {
        // never written into from here: its own process's prompt route takes it (invariant 4)
        return match &r.base_url {
            Some(u) if !r.stopping => Ok(u.clone()),
            _ => Err((
                "held-elsewhere",
                format!(
                    "live in {} , which offers no prompt route now",
                    r.describe()
                ),
            )),
        };
    }
    let Some(meta) = store::find_session(home, session) else {
        return Err(("not-found", format!("no session {session} on this home")));
    };
    if meta.is_subagent() {
        return Err((
            "not-messageable",
            "a subagent session takes no prompt".to_string(),
        ));
    }
    let known: Vec<u32> = peers.iter().map(|r| r.pid).collect();
    if let Some(holder) = crate::presence::foreign::holder_of(home, &meta.log_path, &known) {
        return Err((
            "held-elsewhere",
            format!(
                "it may be held by another DSH process ({})",
                holder.describe()
            ),
        ));
    }
    here()
}

/// `human.sendMany`: the human's message to each distinct session, as the human's own prompt through
/// the host's prompt route (`delivery::deliver`: rc.8 `/api/session.prompt`, 0.1.2+ `session/prompt`,
/// the same route the human's browser posts to) — the text exactly as typed, a fresh plain UUID as its
/// request id (so no view takes it for agent mail), no ledger line (it is not agent mail). A session live
/// in another process is prompted through that process's host; one that may be held by a DSH process
/// without this plugin, or by a process with no web server, is refused, never resumed here.
pub async fn send_many(
    home: &Path,
    req: &SendMany,
    host: &PromptHost,
) -> Result<SendManyResult, RouteError> {
    let mut ids: Vec<&str> = Vec::new();
    for s in &req.session_ids {
        if !ids.contains(&s.as_str()) {
            ids.push(s);
        }
    }
    if ids.is_empty() || ids.len() > MAX_SEND_MANY {
        return Err(RouteError::BadRequest("sessionIds: 1 to 64 session ids"));
    }
    if crate::mail::guard::is_blank(&req.text) {
        return Err(RouteError::BadRequest("text: the message is empty"));
    }
    if req.text.chars().count() > MAX_SEND_MANY_CHARS {
        return Err(RouteError::BadRequest("text: at most 100000 characters"));
    }
    let mode = match req.mode {
        PromptMode::Queue => crate::delivery::Mode::Queue,
        PromptMode::Steer => crate::delivery::Mode::Steer,
    };
    let routes = {
        let (home, host) = (home.to_path_buf(), host.clone());
        let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        base::offload::run(base::offload::FILE_DEADLINE, move || {
            let peers = crate::presence::current(&home);
            ids.iter()
                .map(|s| {
                    if crate::mailbox::addressable(s) {
                        prompt_route(&home, &host, &peers, s)
                    } else {
                        Err(("not-a-session", format!("{s:?} is not a session id")))
                    }
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|_| RouteError::BadRequest("busy: the home could not be read in time"))?
    };
    let cfg = crate::config::Config::default();
    let mut landings = Vec::new();
    for (session, route) in ids.iter().zip(routes) {
        let base_url = match route {
            Ok(u) => u,
            Err((code, message)) => {
                landings.push(Landing {
                    session_id: session.to_string(),
                    request_id: None,
                    state: LandingState::Refused,
                    code: Some(code.to_string()),
                    message: Some(message),
                });
                continue;
            }
        };
        let request_id = uuid::Uuid::new_v4().to_string();
        let d = crate::delivery::Delivery {
            base_url: &base_url,
            dsh_home: home,
            host_secret: host.host_secret.as_deref(),
            host_version: host.host_version.as_deref(),
            host_api: host.host_api.as_deref().unwrap_or(&cfg.host_api),
            timeouts: crate::delivery::http::Timeouts::from_ms(2_000, 15_000),
            session_id: session,
            mode,
            text: &req.text,
            request_id: &request_id,
        };
        use crate::delivery::{Failure, Outcome};
        let (state, code, message) = match crate::delivery::deliver(&d).await {
            Outcome::Accepted { .. } => (LandingState::Accepted, None, None),
            Outcome::Rejected { code, message, .. } => {
                (LandingState::Refused, Some(code), Some(message))
            }
            Outcome::Failed(f) => (
                if matches!(f, Failure::MayHaveLanded(_)) {
                    LandingState::MayHaveLanded
                } else {
                    LandingState::Refused
                },
                Some("unreachable".to_string()),
                Some(crate::render::send::brief(&f)),
            ),
        };
        landings.push(Landing {
            session_id: session.to_string(),
            request_id: Some(request_id),
            state,
            code,
            message,
        });
    }
    Ok(SendManyResult { landings })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mailbox::{self, Envelope};
    use crate::policy::held;

    const B: &str = "session-bbbbbbbb-0000-0000-0000-000000000000";
    const C: &str = "session-cccccccc-0000-0000-0000-000000000000";
    fn rid(n: u8) -> String {
        format!("dsh-session-mail:00000000-0000-4000-8000-0000000000{n:02}")
    }
    fn env(n: u8, sender: &str, target: &str) -> Envelope {
        Envelope {
            v: 1,
            request_id: rid(n),
            session_id: target.into(),
            mode: "queue".into(),
            text: format!("From {sender} ：\nmessage {n}"),
            sender: Some(sender.into()),
            posted_at: n as i64,
            ..Envelope::default()
        }
    }

    #[test]
    fn bulk_decisions_take_each_message_once() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        for n in 1..=3 {
            held::hold(home, &env(n, "session-a", B), 10_000).unwrap();
        }
        held::hold(home, &env(4, "session-x", B), 10_000).unwrap();
        held::hold(home, &env(5, "session-a", C), 10_000).unwrap();
        let counts = held_counts(home, 100);
        assert_eq!(counts.total, 5);
        assert_eq!(
            counts
                .sessions
                .iter()
                .map(|c| (c.session_id.as_str(), c.held))
                .collect::<Vec<_>>(),
            vec![(B, 4), (C, 1)]
        );
        assert_eq!(counts.sessions[0].next_expires_at, Some(10_000));

        let bad = DecideMany {
            filter: HeldFilter::default(),
            decision: HeldDecision::Approve,
        };
        assert!(
            matches!(decide_many(home, &bad, 100), Err(RouteError::BadRequest(_))),
            "an empty filter decides nothing"
        );

        // all from session-a held for B: approved and handed on, once
        let from_a_to_b = DecideMany {
            filter: HeldFilter {
                sender: Some("session-a".into()),
                session: Some(B.into()),
                all: false,
            },
            decision: HeldDecision::Approve,
        };
        let r = decide_many(home, &from_a_to_b, 100).unwrap();
        assert_eq!(
            r.items
                .iter()
                .map(|i| (i.request_id.clone(), i.state, i.posted))
                .collect::<Vec<_>>(),
            (1..=3)
                .map(|n| (rid(n), HeldState::Approved, true))
                .collect::<Vec<_>>()
        );
        for n in 1..=3 {
            assert!(mailbox::find_waiting(home, &rid(n), Some(B)).is_some());
        }
        assert!(
            decide_many(home, &from_a_to_b, 101)
                .unwrap()
                .items
                .is_empty(),
            "taken once"
        );

        // everything left, from two deciders at once: each message decided exactly once
        let all = DecideMany {
            filter: HeldFilter {
                all: true,
                ..HeldFilter::default()
            },
            decision: HeldDecision::Reject,
        };
        let (p, q) = (home.to_path_buf(), home.to_path_buf());
        let (a1, a2) = (all.clone(), all.clone());
        let t1 = std::thread::spawn(move || decide_many(&p, &a1, 102).unwrap());
        let t2 = std::thread::spawn(move || decide_many(&q, &a2, 102).unwrap());
        let mut ok: Vec<String> = [t1.join().unwrap(), t2.join().unwrap()]
            .into_iter()
            .flat_map(|r| r.items)
            .filter(|i| i.error.is_none())
            .map(|i| i.request_id)
            .collect();
        ok.sort();
        assert_eq!(ok, vec![rid(4), rid(5)]);
        assert_eq!(held_counts(home, 103).total, 0);
        assert!(
            mailbox::find_waiting(home, &rid(4), Some(B)).is_none(),
            "rejected: never handed on"
        );
    }

    #[test]
    fn a_bulk_approval_past_the_time_expires_instead() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        held::hold(home, &env(1, "session-a", B), 1_000).unwrap();
        held::hold(home, &env(2, "session-a", B), 5_000).unwrap();
        let all = DecideMany {
            filter: HeldFilter {
                all: true,
                ..HeldFilter::default()
            },
            decision: HeldDecision::Approve,
        };
        // at 1000 the first one's time is up: looking expires it, and only the second is approved
        let r = decide_many(home, &all, 1_000).unwrap();
        assert_eq!(
            r.items
                .iter()
                .map(|i| (i.request_id.clone(), i.state))
                .collect::<Vec<_>>(),
            vec![(rid(2), HeldState::Approved)]
        );
        assert_eq!(
            held::state_of(home, &rid(1), Some(B)).unwrap().state,
            HeldState::Expired
        );
        assert!(mailbox::find_waiting(home, &rid(1), Some(B)).is_none());
    }

    #[test]
    fn rules_set_takes_one_rule_and_lists_them() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        let set = |json: serde_json::Value| {
            let c: RuleChange = serde_json::from_value(json).unwrap();
            rules_set(home, &c, 1)
        };
        let v = set(serde_json::json!({"sender": "session-a", "inbound": "accept"})).unwrap();
        assert_eq!(v.senders.get("session-a"), Some(&Inbound::Accept));
        let m = "ab".repeat(32);
        let v = set(serde_json::json!({"machine": m, "inbound": "refuse"})).unwrap();
        assert_eq!(v.machines.len(), 1);
        assert_eq!(
            serde_json::to_value(&v).unwrap()["order"],
            serde_json::json!(["stop-all", "sender", "machine", "session", "default"])
        );
        let v = set(serde_json::json!({"sender": "session-a", "inbound": null})).unwrap();
        assert!(v.senders.is_empty(), "null removes");
        assert!(matches!(
            set(serde_json::json!({"inbound": "hold"})),
            Err(RouteError::BadRequest(_))
        ));
        assert!(matches!(
            set(serde_json::json!({"sender": "session-a", "machine": m, "inbound": "hold"})),
            Err(RouteError::BadRequest(_))
        ));
        assert!(serde_json::from_value::<RuleChange>(
            serde_json::json!({"machine": "nope", "inbound": "hold"})
        )
        .is_err());
        assert!(serde_json::from_value::<RuleChange>(
            serde_json::json!({"sender": "s", "inbound": "always"})
        )
        .is_err());
    }

    /// The cost of `held.counts` (run by hand: `cargo test --release -p dsh-session-mail-core
    /// held_counts_cost -- --ignored --nocapture`): 100 sessions with 10 messages waiting and 10 decided
    /// each, against the same call on a home with nothing held (the ratio). Prints p50/p99/max; asserts
    /// nothing about time.
    #[test]
    #[ignore]
    fn held_counts_cost() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        let empty = tempfile::tempdir().unwrap();
        let mut n = 0u32;
        for s in 0..100u32 {
            let session = format!("session-{s:08}-0000-0000-0000-000000000000");
            for k in 0..20u32 {
                n += 1;
                let mut e = env(0, "session-a", &session);
                e.request_id = format!("dsh-session-mail:00000000-0000-4000-8000-{n:012}");
                held::hold(home, &e, i64::MAX).unwrap();
                if k >= 10 {
                    held::decide(home, &session, &e.request_id, false, 1).unwrap();
                }
            }
        }
        let time = |home: &Path| {
            let mut t: Vec<f64> = (0..60)
                .map(|_| {
                    let t0 = std::time::Instant::now();
                    let c = held_counts(home, 2);
                    std::hint::black_box(c);
                    t0.elapsed().as_secs_f64() * 1000.0
                })
                .collect();
            t.sort_by(|a, b| a.partial_cmp(b).unwrap());
            (t[t.len() / 2], t[t.len() * 99 / 100], t[t.len() - 1])
        };
        assert_eq!(held_counts(home, 2).total, 1000);
        let (p50, p99, max) = time(home);
        let (b50, b99, bmax) = time(empty.path());
        println!("held.counts 100 sessions x (10 waiting + 10 decided): p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms");
        println!("held.counts, nothing held (baseline): p50 {b50:.3} ms, p99 {b99:.3} ms, max {bmax:.3} ms; ratio of p50 {:.0}x", p50 / b50.max(1e-6));
    }
}
