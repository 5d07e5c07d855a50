//! The only file with napi types: argument conversion and error mapping, no logic.
//!
//! Results are `#[napi(object)]` structs (the generated `binding.d.ts` is exact); a tool outcome is
//! data, never an error. Errors are for misuse of the binding (a malformed request, a bad key) and carry
//! a stable `err.code` (`E_*`, [`ErrorCode`]). Sync exports use `catch_unwind` so a panic can never abort
//! the host process; a panic in an async export already becomes a rejected Promise.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use dsh_session_mail_core as mail_core;
use mail_core::cli::data;
use mail_core::error::ErrorCode;
use mail_core::mailbox::queued;
use mail_core::outcome::RefusalCode;
use mail_core::render::notice;
use mail_core::tools::ToolResult;

/// An error JS sees with `err.code` = the stable code.
type BindingResult<T> = Result<T, ErrorCode>;

fn error(code: ErrorCode, message: impl Into<String>) -> napi::Error<ErrorCode> {
    napi::Error::new(code, message.into())
}

fn parse<T: serde::de::DeserializeOwned>(json: &str, what: &str) -> Result<T, ErrorCode> {
    serde_json::from_str(json).map_err(|e| {
        error(
            ErrorCode::BadRequest,
            format!("{what} is not valid JSON: {e}"),
        )
    })
}

/// A failure inside an async export (the Promise rejects; napi gives async rejections no custom
/// code, so the message starts with `E_INTERNAL`).
fn internal(e: impl std::fmt::Display) -> napi::Error {
    napi::Error::new(
        Status::GenericFailure,
        format!("{}: {e}", ErrorCode::Internal),
    )
}

/// The Promise of an async export whose arguments were checked synchronously (so a bad request
/// throws with its `err.code` before any work starts).
fn promise<T, F>(env: &Env, fut: F) -> BindingResult<AsyncBlock<T>>
where
    T: ToNapiValue + Send + 'static,
    F: std::future::Future<Output = napi::Result<T>> + Send + 'static,
{
    AsyncBlockBuilder::new(fut)
        .build(env)
        .map_err(|e| error(ErrorCode::Internal, e.reason.clone()))
}

fn home_of(explicit: Option<&str>) -> std::path::PathBuf {
    base::home::resolve_dsh_home(explicit)
}

/// This process as the drainer of its live `sessions` (`startedAt`: its presence record's).
fn drainer(started_at: f64, sessions: Vec<String>) -> mail_core::mailbox::Drainer {
    mail_core::mailbox::Drainer {
        pid: std::process::id(),
        started_at: started_at as i64,
        sessions,
    }
}

/// Run blocking store work off the executor; a panic there is `E_INTERNAL`.
async fn blocking<T, F>(f: F) -> napi::Result<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    mail_core::tools::blocking(f)
        .await
        .map_err(|r| internal(r.render()))
}

// ---- the tools (index.js) ----

/// A tool call's text and what it ended in: the shim and the command line decide on these fields, never
/// on the text.
#[napi(object, use_nullable = true)]
pub struct ToolOutcome {
    /// The text the model sees.
    pub text: String,
    /// The refusal code (`bad-argument`, `not-found`, …; `unreachable` for a send that may have
    /// landed); `null` when the call was not refused.
    pub code: Option<RefusalCode>,
    /// A send tool: the message was accepted.
    pub accepted: bool,
    /// A send tool: the message went out without a clear answer (verify before sending again).
    pub may_have_landed: bool,
    /// A send tool: the request id, once one was minted.
    pub request_id: Option<String>,
    /// An accepted send given idle-notice facts: what was decided (`set`: the shim watches the target).
    /// Its `note:` is in `text` already.
    pub notice: Option<mail_core::mail::notice::IdleNoticeDecision>,
}

/// Run one tool call: its text and its typed outcome (index.js, the command line, the doctor).
/// `request` is the JSON of `request::ToolRequest`. `notice`: for a send with `notify_when_idle`, the JSON
/// of `mail_core::mail::notice::NoticeFacts` as the shim knows them before the call (caller, its turn,
/// the pending watches); whether the target is live here afterwards is known from the request and the
/// receipt (live before, or woken by this process's host), and the core decides, with the loop guard's
/// rule for a turn a notice opened, and words the `note:`.
#[napi(ts_return_type = "Promise<ToolOutcome>")]
pub fn run(
    env: &Env,
    request: String,
    notice: Option<String>,
) -> Result<AsyncBlock<ToolOutcome>, ErrorCode> {
    // A lone UTF-16 surrogate in an argument is a readable refusal, never a failed call.
    let parsed = mail_core::tools::parse_request(&request)
        .map_err(|why| error(ErrorCode::BadRequest, why.to_string()))?;
    let facts: Option<mail_core::mail::notice::NoticeFacts> =
        notice.map(|n| parse(&n, "idle notice facts")).transpose()?;
    // A send's checks start on the blocking pool from here, inside napi's runtime (`tools::begin`):
    // they run while napi hands the future below to its runtime.
    // a home with linked machines: the tools reach them (core's remote::begin over crates/link)
    let linked = match &parsed {
        Ok(req) => checked_or_none(&home_of(req.host.dsh_home.as_deref())),
        Err(_) => None,
    };
    let parsed = match parsed {
        Ok(req) if linked.is_some() => {
            let home = home_of(req.host.dsh_home.as_deref());
            let live: Vec<String> = req.live.iter().map(|l| l.id.clone()).collect();
            // (the links just read: `remote::begin` asks for them first)
            let lm = LinkMachines::read_now(&home, linked);
            // a send's place lookup and checks start on the blocking pool from here, as a local send's
            // checks do below
            let begun = napi::bindgen_prelude::within_runtime_if_available(|| {
                mail_core::remote::begin(req, &lm)
            });
            return promise(env, async move {
                let r = begun.result(&lm).await;
                // as below: a send that moved mail nudges the human's mail index
                if matches!(&r, ToolResult::Send(s) if s.request_id().is_some()) {
                    mail_core::mailindex::feed::nudge(&home);
                }
                Ok(tool_outcome(r, facts, &live))
            });
        }
        other => other,
    };
    let begun = parsed.map(|req| {
        let live: Vec<String> = req.live.iter().map(|l| l.id.clone()).collect();
        let home = req.host.dsh_home.clone();
        let begun =
            napi::bindgen_prelude::within_runtime_if_available(|| mail_core::tools::begin(req));
        (begun, live, home)
    });
    promise(env, async move {
        Ok(match begun {
            Ok((begun, live, home)) => {
                let r = begun.result().await;
                // a send moved mail (its ledger line is written): the human's mail index catches up on
                // the blocking pool, after this result (crates/core/src/mailindex/feed.rs `nudge`)
                if matches!(&r, ToolResult::Send(s) if s.request_id().is_some()) {
                    mail_core::mailindex::feed::nudge(&home_of(home.as_deref()));
                }
                tool_outcome(r, facts, &live)
            }
            Err(refusal) => tool_outcome(ToolResult::Refused(refusal), None, &[]),
        })
    })
}

fn tool_outcome(
    r: ToolResult,
    facts: Option<mail_core::mail::notice::NoticeFacts>,
    live: &[String],
) -> ToolOutcome {
    let mut text = r.render();
    let (accepted, may_have_landed, request_id, mut notice) = match &r {
        ToolResult::Send(s) => (
            s.accepted(),
            s.may_have_landed(),
            s.request_id().map(str::to_string),
            None,
        ),
        _ => (false, false, None, None),
    };
    if let (ToolResult::Send(s), Some(mut f)) = (&r, facts) {
        if let mail_core::outcome::SendOutcome::Accepted(receipt) = &s.outcome {
            f.target_live = receipt.woke() || live.contains(&receipt.target);
            let d = mail_core::mail::notice::decide(&f);
            text = mail_core::render::notice::receipt_with_note(text, d, f.ttl_ms);
            notice = Some(d.kind());
        }
    }
    ToolOutcome {
        text,
        code: r.code(),
        accepted,
        may_have_landed,
        request_id,
        notice,
    }
}

/// The notice for the send `requestId` to `target`, whose turn has ended; `sinceSeq`: the seq before
/// the watched message landed (the read it suggests starts after it).
#[napi(catch_unwind)]
pub fn idle_notice_message(
    target: String,
    request_id: String,
    since_seq: Option<i64>,
) -> notice::IdleNoticeMessage {
    let since = since_seq.and_then(|s| u64::try_from(s).ok());
    notice::idle_message(&target, &request_id, since)
}

/// The overlap notice for `fresh` (in the order found), or null when it is empty (lib/overlap.js).
#[napi(catch_unwind)]
pub fn overlap_notice(fresh: Vec<notice::OverlapFact>) -> Option<notice::OverlapNoticeMessage> {
    notice::overlap_message(&fresh)
}

/// The crate version (the CLI's doctor checks that the binary matches its package).
#[napi(catch_unwind)]
pub fn core_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

// ---- the command line (bin/dsh-session-mail.mjs) ----

/// The core's configuration defaults (`config::Config`, declared once in the core as the napi object
/// `ConfigDefaults`; index.js's Schemastery `Config` takes its defaults from them).
#[napi(catch_unwind, ts_return_type = "ConfigDefaults")]
pub fn config_defaults() -> mail_core::config::Config {
    mail_core::config::Config::default()
}

/// DSH_HOME as the host resolves it: `explicit` → `$DSH_HOME` → `~/.dsh`.
#[napi(catch_unwind)]
pub fn resolve_dsh_home(explicit: Option<String>) -> String {
    home_of(explicit.as_deref()).display().to_string()
}

/// The host's session directory key for a project path (`null` for an empty path).
#[napi(catch_unwind)]
pub fn project_key(cwd: String) -> Option<String> {
    mail_core::cli::sender::project_key(&cwd)
}

/// The newest top-level session of `cwd`'s project.
#[napi(catch_unwind)]
pub fn default_sender(
    dsh_home: Option<String>,
    cwd: String,
) -> mail_core::cli::sender::DefaultSender {
    mail_core::cli::sender::DefaultSender::of(&home_of(dsh_home.as_deref()), &cwd)
}

/// `sessions_list` over the store; `request` is a ToolRequest (tool `sessions_list`).
#[napi(ts_return_type = "Promise<Listing>")]
pub fn list_sessions(env: &Env, request: String) -> Result<AsyncBlock<data::Listing>, ErrorCode> {
    tool_data(env, &request, "list request", data::list_data)
}

/// A data export over a ToolRequest (`what` names it in the error of a malformed one, which throws
/// `E_BAD_REQUEST` before any work starts): `data` on the blocking pool (a refusal is its value).
fn tool_data<T>(
    env: &Env,
    request: &str,
    what: &str,
    data: fn(&std::path::Path, &mail_core::request::ToolRequest) -> T,
) -> BindingResult<AsyncBlock<T>>
where
    T: ToNapiValue + Send + 'static,
{
    let req: mail_core::request::ToolRequest = parse(request, what)?;
    let home = home_of(req.host.dsh_home.as_deref());
    promise(env, blocking(move || data(&home, &req)))
}

/// `sessions_read` of a stored session; `request` is a ToolRequest (tool `sessions_read`).
#[napi(ts_return_type = "Promise<ReadWindow>")]
pub fn read_session(env: &Env, request: String) -> Result<AsyncBlock<data::ReadWindow>, ErrorCode> {
    tool_data(env, &request, "read request", data::read_data)
}

/// Look a request id up in `sessionId`'s log, else in the log of the target the ledger names,
/// else in every session's log. A message sent to a linked machine is the core's `remote::verify`
/// (this home's outbox, else that machine asked; `machine` names it), when the home has a `machine/`
/// folder (one `stat` otherwise).
#[napi]
pub async fn verify_request(
    dsh_home: Option<String>,
    request_id: String,
    session_id: Option<String>,
) -> napi::Result<mail_core::fate::RequestFate> {
    let home = home_of(dsh_home.as_deref());
    if std::fs::symlink_metadata(mail_core::crossing::dir(&home)).is_ok() {
        let lm = LinkMachines::of(&home);
        if let Some(v) = mail_core::remote::verify(&home, &lm, &request_id).await {
            return Ok(mail_core::render::remote::request_fate(&v));
        }
    }
    let f = blocking(move || {
        let v = mail_core::fate::verify(&home, &request_id, session_id.as_deref());
        mail_core::render::fate::request_fate(&v, &request_id, &home)
    })
    .await?;
    Ok(f)
}

/// Apply the patch layers (bundle patches, profile, home, in the host's order) to one row.
#[napi(
    catch_unwind,
    ts_args_type = "layers: Array<PatchLayer>, rowId: string, module: string"
)]
pub fn patch_row_state(
    layers: Vec<mail_core::doctor::patch::Layer>,
    row_id: String,
    module: String,
) -> mail_core::doctor::patch::RowState {
    mail_core::doctor::patch::row_state(&layers, &row_id, &module)
}

/// The cookie probe against the host at `baseUrl` (never returns the secret).
#[napi]
pub async fn auth_probe(
    base_url: String,
    dsh_home: Option<String>,
    connect_timeout_ms: Option<u32>,
    request_timeout_ms: Option<u32>,
) -> napi::Result<mail_core::doctor::auth_probe::AuthProbe> {
    let home = home_of(dsh_home.as_deref());
    let t = mail_core::delivery::http::Timeouts::from_ms(
        connect_timeout_ms.map_or(2000, u64::from),
        request_timeout_ms.map_or(5000, u64::from),
    );
    Ok(mail_core::doctor::auth_probe::auth_probe(&base_url, &home, None, t).await)
}

/// Probe the host generation at `baseUrl` (loopback only).
#[napi]
pub async fn probe_host(
    base_url: String,
    timeout_ms: Option<u32>,
) -> napi::Result<mail_core::doctor::HostProbe> {
    let ms = timeout_ms.map_or(3000, u64::from);
    let t = mail_core::delivery::http::Timeouts::from_ms(ms, ms);
    Ok(mail_core::doctor::host_probe(&base_url, t).await)
}

/// The audit ledger: lines sent by or to `session`, newer than `sinceMs`, the newest `limit`.
#[napi]
pub async fn read_ledger(
    dsh_home: Option<String>,
    session: Option<String>,
    since_ms: Option<f64>,
    limit: Option<u32>,
) -> napi::Result<data::Ledger> {
    let home = home_of(dsh_home.as_deref());
    let filter = mail_core::ledger::Filter {
        session,
        since_ms: since_ms.map(|v| v as i64),
        limit: limit.map(|l| l as usize),
        ..Default::default()
    };
    blocking(move || data::ledger_view(&home, &filter)).await
}

/// The doctor's file check as JSON (`{ledger, credentials}`, each `null` or the problem).
#[napi]
pub async fn home_files_json(dsh_home: Option<String>) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    blocking(move || mail_core::doctor::home_files(&home).to_string()).await
}

/// Publish this process's presence record (`presence::Record` as JSON; `updatedAt` is set here)
/// under `$DSH_HOME/dsh-session-mail/presence/<pid>.json`, atomically, owner-only. Runs on a
/// worker thread; an error (`E_INTERNAL`) is a short reason (the shim ignores it and tries again
/// next refresh). Resolves to `true` once written.
#[napi]
pub async fn publish_presence(record: String, dsh_home: Option<String>) -> napi::Result<bool> {
    let mut rec: mail_core::presence::Record = serde_json::from_str(&record)
        .map_err(|e| internal(format!("presence record is not valid JSON: {e}")))?;
    rec.pid = std::process::id();
    let home = home_of(dsh_home.as_deref());
    let now = base::clock::now_ms();
    blocking(move || mail_core::presence::publish(&home, &rec, now))
        .await?
        .map(|()| true)
        .map_err(internal)
}

/// Remove this process's presence record (the plugin is being disposed).
#[napi(catch_unwind)]
pub fn withdraw_presence(dsh_home: Option<String>) {
    let home = home_of(dsh_home.as_deref());
    mail_core::presence::withdraw(&home, std::process::id());
}

/// Claim what this process should deliver from the mailboxes of the sessions it holds live
/// (`sessions`: their ids; `startedAt`: this process's presence record), on a worker thread. Each
/// text is the one `mail::admit` rebuilt (framed, from a verified sender) under `config` (the
/// plugin's configuration as JSON, the core's keys; the defaults when absent or unreadable).
#[napi(ts_return_type = "Promise<Array<MailboxEnvelope>>")]
pub async fn mailbox_drain(
    sessions: Vec<String>,
    started_at: f64,
    dsh_home: Option<String>,
    config: Option<String>,
) -> napi::Result<Vec<mail_core::mailbox::Claimed>> {
    let home = home_of(dsh_home.as_deref());
    let cfg: mail_core::config::Config = config
        .as_deref()
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or_default();
    let me = drainer(started_at, sessions);
    let now = base::clock::now_ms();
    let claimed = blocking(move || {
        // an approved held message (the human's sealed decision) is vouched for by its `held` line
        let approved = |session: &str, request_id: &str| {
            mail_core::policy::held::state_of(&home, request_id, Some(session))
                .is_some_and(|h| h.state == mail_core::policy::held::HeldState::Approved)
        };
        // the human's policy, asked last (it may have changed since the send); a sender of this home, or
        // one that arrived from a linked machine (its machine's rule applies: `crossing::foreign`)
        let reading = mail_core::policy::read(&home);
        let says = |env: &mail_core::mailbox::Envelope| {
            use mail_core::mail::admit::HumanSays;
            use mail_core::policy::Decision;
            let sender = env.sender.as_deref().unwrap_or_default();
            let machine = mail_core::crossing::foreign::machine_of(&home, sender);
            match mail_core::policy::decision_of(
                &reading,
                &env.session_id,
                sender,
                machine.as_ref(),
            ) {
                Decision::Accept => HumanSays::Deliver,
                Decision::Hold { .. } => HumanSays::Hold,
                Decision::Refuse(_) => HumanSays::Refused,
                Decision::Stopped => HumanSays::Stopped,
            }
        };
        let hold = |env: &mail_core::mailbox::Envelope| {
            let ttl = i64::try_from(mail_core::policy::held_ttl_ms(&home)).unwrap_or(i64::MAX);
            mail_core::policy::held::hold(&home, env, now.saturating_add(ttl))
                .map_err(|e| e.to_string())
        };
        let checks = mail_core::mail::admit::Checks {
            cfg: &cfg,
            approved: &approved,
            human: Some(mail_core::mail::admit::Human {
                says: &says,
                hold: &hold,
            }),
        };
        // held mail past its time is expired by the first process that looks: this tick, every 10 s
        if sweep_due(now) {
            mail_core::policy::held::sweep(&home, now);
        }
        mail_core::mailbox::drain_with(&home, &me, &checks, now)
    })
    .await?;
    Ok(claimed)
}

/// Whether this process's mailbox tick sweeps held mail now (at most every [`SWEEP_EVERY_MS`]).
fn sweep_due(now: i64) -> bool {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST: AtomicI64 = AtomicI64::new(i64::MIN);
    let last = LAST.load(Ordering::Relaxed);
    now.saturating_sub(last) >= SWEEP_EVERY_MS
        && LAST
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}
const SWEEP_EVERY_MS: i64 = 10_000;

/// Write the receipt of a claimed envelope (the sender waits for it) and drop the claim; on a
/// worker thread. Resolves to `true` once written.
#[napi(ts_args_type = "settlement: MailboxSettlement, dshHome?: string | undefined | null")]
pub async fn mailbox_settle(
    settlement: mail_core::mailbox::Settlement,
    dsh_home: Option<String>,
) -> napi::Result<bool> {
    let r = settlement.receipt().map_err(internal)?;
    let home = home_of(dsh_home.as_deref());
    blocking(move || mail_core::mailbox::settle(&home, std::process::id(), &r))
        .await?
        .map(|()| true)
        .map_err(internal)
}

/// Give a claimed envelope back to its mailbox (the session is no longer live here).
#[napi]
pub async fn mailbox_release(
    session_id: String,
    request_id: String,
    dsh_home: Option<String>,
) -> napi::Result<()> {
    let home = home_of(dsh_home.as_deref());
    blocking(move || {
        mail_core::mailbox::release(&home, std::process::id(), &session_id, &request_id)
    })
    .await
}

// ---- the human's side (issue 17: lib/client-host.js, the routes the web client calls) ----
//
// Plain JSON out (the core's serde DTOs, `mail_core::mailview`, `mail_core::policy`): these feed a browser
// view, not a tool. Nothing here is reachable from a tool an agent calls.

fn to_json<T: serde::Serialize>(v: &T) -> napi::Result<String> {
    serde_json::to_string(v).map_err(|e| internal(e.to_string()))
}

/// The mail view of one session (`mailview::View` as JSON): its agent mail newest first, the held messages,
/// and its inbound policy.
#[napi]
pub async fn mail_view(
    dsh_home: Option<String>,
    session_id: String,
    limit: Option<u32>,
) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let v = blocking(move || {
        mail_core::mailview::view(&home, &session_id, limit.unwrap_or(100) as usize)
    })
    .await?;
    to_json(&v)
}

/// The home-wide Agent mail page (issue 32): one page of the mail index, `mailindex::MailPage` as JSON.
/// `args` is the JSON of `mailindex::MailListArgs` (`{filter, query?, before?, limit}`). The index is
/// brought up to date (or rebuilt from the ledger and the logs) on the blocking pool first.
#[napi]
pub async fn mail_list(dsh_home: Option<String>, args: String) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let args: mail_core::mailindex::MailListArgs = serde_json::from_str(&args)
        .map_err(|e| napi::Error::from_reason(format!("E_BAD_REQUEST mail.list arguments: {e}")))?;
    let v =
        blocking(move || mail_core::mailindex::list(&home, &args, &linked_or_none(&home))).await?;
    to_json(&v)
}

/// The thread of one message (`mailindex::MailThread` as JSON): its chain and the mail between the same
/// two sessions around it, oldest first.
#[napi]
pub async fn mail_thread(dsh_home: Option<String>, request_id: String) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let v =
        blocking(move || mail_core::mailindex::thread(&home, &request_id, &linked_or_none(&home)))
            .await?;
    to_json(&v)
}

/// The agent card facts of one delivered request (`mailview::Card` as JSON).
#[napi]
pub async fn mail_card(dsh_home: Option<String>, request_id: String) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let v = blocking(move || mail_core::mailview::card(&home, &request_id)).await?;
    to_json(&v)
}

/// The human's change to the inbound policy: `{"sessionId", "inbound": "accept"|"hold"|"refuse"}` or
/// `{"stopAll": bool}`. Resolves to `{"ok":true,"policy":…}` or `{"ok":false,"error":…}`.
#[napi]
pub async fn policy_apply(dsh_home: Option<String>, change: String) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let v = blocking(move || {
        use mail_core::policy::{apply, Change, Inbound};
        let c: serde_json::Value = match serde_json::from_str(&change) {
            Ok(v) => v,
            Err(e) => return serde_json::json!({"ok": false, "error": format!("not JSON: {e}")}),
        };
        let ch = if let Some(on) = c.get("stopAll").and_then(|v| v.as_bool()) {
            Change::StopAll(on)
        } else if let Some(ms) = c.get("heldTtlMs").and_then(|v| v.as_u64()) {
            Change::HeldTtl(ms)
        } else {
            match (
                c.get("sessionId").and_then(|v| v.as_str()),
                c.get("inbound").and_then(|v| v.as_str()).and_then(Inbound::parse),
            ) {
                (Some(s), Some(m)) => Change::Session(s.to_string(), m),
                _ => return serde_json::json!({"ok": false, "error": "a change is {sessionId, inbound: accept|hold|refuse} or {stopAll: boolean}"}),
            }
        };
        match apply(&home, &ch, base::clock::now_ms()) {
            Ok(p) => serde_json::json!({"ok": true, "policy": p}),
            Err(e) => serde_json::json!({"ok": false, "error": e.to_string()}),
        }
    })
    .await?;
    to_json(&v)
}

/// The human's decision on one held message. Resolves to `{"ok":true,"state":…}` or `{"ok":false,"error":…}`.
#[napi]
pub async fn held_decide(
    dsh_home: Option<String>,
    session_id: String,
    request_id: String,
    approve: bool,
) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let v = blocking(move || {
        match mail_core::policy::held::decide(
            &home,
            &session_id,
            &request_id,
            approve,
            base::clock::now_ms(),
        ) {
            Ok(i) => serde_json::json!({"ok": true, "state": i.state.as_str(), "posted": i.posted}),
            Err(e) => serde_json::json!({"ok": false, "error": e.to_string()}),
        }
    })
    .await?;
    to_json(&v)
}

/// A route's answer as JSON: `{"ok":true,"value":…}` or `{"ok":false,"error":{"code","message"}}`.
fn answer<T: serde::Serialize>(
    r: std::result::Result<T, mail_core::human::RouteError>,
) -> serde_json::Value {
    match r {
        Ok(v) => serde_json::json!({"ok": true, "value": v}),
        Err(e) => {
            serde_json::json!({"ok": false, "error": {"code": e.code(), "message": e.to_string()}})
        }
    }
}

/// A route payload as its core DTO, or the route's bad-request answer.
fn payload<T: serde::de::DeserializeOwned>(
    json: &str,
) -> std::result::Result<T, serde_json::Value> {
    serde_json::from_str(json).map_err(|e| {
        serde_json::json!({"ok": false, "error": {"code": "bad-request", "message": e.to_string()}})
    })
}

/// One of issue 32's routes on the blocking pool: the payload `json` parsed as its core DTO `T` (else the
/// route's bad-request answer), `work` over DSH_HOME and the clock, the route answer as JSON.
async fn home_route<T, R>(
    dsh_home: Option<String>,
    json: String,
    work: fn(&std::path::Path, &T, i64) -> std::result::Result<R, mail_core::human::RouteError>,
) -> napi::Result<String>
where
    T: serde::de::DeserializeOwned + Send + 'static,
    R: serde::Serialize + Send + 'static,
{
    let home = home_of(dsh_home.as_deref());
    let v = blocking(move || match payload::<T>(&json) {
        Ok(p) => answer(work(&home, &p, base::clock::now_ms())),
        Err(bad) => bad,
    })
    .await?;
    to_json(&v)
}

/// `rules.set` (issue 32): `human::RuleChange` as JSON → `human::RulesView` (the route answer, JSON).
#[napi]
pub async fn rules_set(dsh_home: Option<String>, change: String) -> napi::Result<String> {
    home_route(dsh_home, change, mail_core::human::rules_set).await
}

/// `rules.list`: `human::RulesView` (the route answer, JSON).
#[napi]
pub async fn rules_list(dsh_home: Option<String>) -> napi::Result<String> {
    home_route(dsh_home, "{}".into(), |home, _: &serde_json::Value, _| {
        Ok(mail_core::human::rules_view(home))
    })
    .await
}

/// `held.decideMany`: `human::DecideMany` as JSON → `human::DecideManyResult` (the route answer, JSON).
#[napi]
pub async fn held_decide_many(dsh_home: Option<String>, request: String) -> napi::Result<String> {
    home_route(dsh_home, request, mail_core::human::decide_many).await
}

/// `held.counts`: `human::HeldCounts` (the route answer, JSON).
#[napi]
pub async fn held_counts(dsh_home: Option<String>) -> napi::Result<String> {
    home_route(dsh_home, "{}".into(), |home, _: &serde_json::Value, now| {
        Ok(mail_core::human::held_counts(home, now))
    })
    .await
}

/// `human.sendMany`: `human::SendMany` as JSON, `host` = `human::PromptHost` as JSON (this process's web
/// server, secret, version, live sessions) → `human::SendManyResult` (the route answer, JSON).
#[napi]
pub async fn human_send_many(
    dsh_home: Option<String>,
    request: String,
    host: String,
) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let req = match payload::<mail_core::human::SendMany>(&request) {
        Ok(r) => r,
        Err(bad) => return to_json(&bad),
    };
    let host: mail_core::human::PromptHost = serde_json::from_str(&host).unwrap_or_default();
    to_json(&answer(
        mail_core::human::send_many(&home, &req, &host).await,
    ))
}

/// Hand on approved messages whose hand-off did not happen (a process died in between). How many.
#[napi]
pub async fn held_recover(dsh_home: Option<String>) -> napi::Result<u32> {
    let home = home_of(dsh_home.as_deref());
    let n =
        blocking(move || mail_core::policy::held::recover(&home, base::clock::now_ms())).await?;
    Ok(n as u32)
}

/// Hand every pending message of this plugin back to durable storage before the host cancels it
/// (`why`: `stop` or `unmount`). Synchronous on purpose — it runs in the signal handler, before the
/// host's disposal clears the inboxes — and bounded: it gives up after 300 ms and counts the rest.
#[napi(
    catch_unwind,
    ts_args_type = "pending: Array<QueuedPending>, startedAt: number, why: string, dshHome?: string | undefined | null"
)]
pub fn queued_hand_back(
    pending: Vec<queued::Pending>,
    started_at: f64,
    why: String,
    dsh_home: Option<String>,
) -> queued::HandBackReport {
    let home = home_of(dsh_home.as_deref());
    let items = &pending[..pending.len().min(4096)];
    let why = if why == "unmount" {
        queued::StopWhy::Unmount
    } else {
        queued::StopWhy::Stop
    };
    queued::hand_back(
        &home,
        std::process::id(),
        started_at as i64,
        why,
        items,
        base::clock::now_ms(),
        std::time::Duration::from_millis(queued::HAND_BACK_MS),
    )
}

/// The messages of gone holders to deliver again into the sessions this process holds live,
/// checked against the ledger and the target's log (`mailbox::queued::recover`); on a worker thread.
#[napi(ts_return_type = "Promise<Array<QueuedRedelivery>>")]
pub async fn queued_recover(
    sessions: Vec<String>,
    started_at: f64,
    dsh_home: Option<String>,
) -> napi::Result<Vec<queued::Redelivery>> {
    let home = home_of(dsh_home.as_deref());
    let me = drainer(started_at, sessions);
    let now = base::clock::now_ms();
    blocking(move || queued::recover(&home, &me, now)).await
}

/// A re-delivered message (or one found pending here already) is now held by this process.
#[napi]
pub async fn queued_take(
    session_id: String,
    request_id: String,
    started_at: f64,
    redelivered: bool,
    dsh_home: Option<String>,
) -> napi::Result<()> {
    let home = home_of(dsh_home.as_deref());
    let now = base::clock::now_ms();
    blocking(move || {
        queued::take(
            &home,
            std::process::id(),
            started_at as i64,
            &session_id,
            &request_id,
            redelivered,
            now,
        )
    })
    .await?
    .map_err(internal)
}

/// At this process's normal end: remove its own in-memory records of the messages that landed here
/// (`landed`: request ids whose `user/message` the host published in this process;
/// `mailbox::queued::sweep_mine`). Synchronous — it runs in the plugin's dispose, right before a
/// one-shot process exits — and bounded (300 ms). Returns how many were removed.
#[napi(catch_unwind)]
pub fn queued_sweep_mine(landed: Vec<String>, started_at: f64, dsh_home: Option<String>) -> u32 {
    let home = home_of(dsh_home.as_deref());
    let me = drainer(started_at, Vec::new());
    let landed: Vec<String> = landed.into_iter().take(4096).collect();
    let r = queued::sweep_mine(
        &home,
        &me,
        &landed,
        std::time::Duration::from_millis(queued::HAND_BACK_MS),
    );
    r.removed as u32
}

/// Remove the in-memory records of gone holders whose messages the target's log shows landed, in the
/// shards of sessions this process does not hold (`mailbox::queued::sweep_landed`); on a worker
/// thread. Resolves to how many were removed.
#[napi]
pub async fn queued_sweep(
    sessions: Vec<String>,
    started_at: f64,
    dsh_home: Option<String>,
) -> napi::Result<u32> {
    let home = home_of(dsh_home.as_deref());
    let me = drainer(started_at, sessions);
    let now = base::clock::now_ms();
    let r = blocking(move || queued::sweep_landed(&home, &me, now)).await?;
    Ok(r.removed as u32)
}

/// One cold session to wake (only where `allowResume` permits: the shim asks only then): nobody
/// holds it, a verified message waits for it, and this process is its one waker for 10 s.
/// Resolves to null when there is none. On a worker thread.
#[napi(ts_return_type = "Promise<QueuedWake | null>")]
pub async fn queued_wake(
    started_at: f64,
    sessions: Vec<String>,
    dsh_home: Option<String>,
) -> napi::Result<Option<queued::WakeCandidate>> {
    let home = home_of(dsh_home.as_deref());
    let me = drainer(started_at, sessions);
    let now = base::clock::now_ms();
    blocking(move || queued::wake_candidate(&home, &me, now)).await
}

// ---- machines (issue 31): the human's linking, through crates/link ----

/// One `Machines` handle per home in this process (the plugin's and the command line's).
fn machines_of(home: &std::path::Path) -> std::sync::Arc<link::Machines> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static ALL: OnceLock<Mutex<HashMap<std::path::PathBuf, Arc<link::Machines>>>> = OnceLock::new();
    let mut m = ALL
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    m.entry(home.to_path_buf())
        .or_insert_with(|| {
            let m = link::Machines::new(home, link::NodeConfig::from_env(), machines_handler(home));
            m.notify_when_heard(kick_of(home));
            m
        })
        .clone()
}

/// The outbox's kick, per home: notified when this process's endpoint serves a linked machine's request
/// (link's `Machines::notify_when_heard`; a machine that comes back announces itself with a ping), so the drain
/// tries what waits at once rather than at its next poll.
fn kick_of(home: &std::path::Path) -> std::sync::Arc<tokio::sync::Notify> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static ALL: OnceLock<Mutex<HashMap<std::path::PathBuf, Arc<tokio::sync::Notify>>>> =
        OnceLock::new();
    ALL.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(home.to_path_buf())
        .or_default()
        .clone()
}

/// How this process's host facts are asked for at serve time: the shim's function (`machinesServeWith`),
/// called on the host's main thread, returning a ToolRequest's JSON (tool, args and caller ignored) — at
/// once when it has everything at hand (a send's facts on a host whose secret needs no wait: no second
/// trip through the host's event loop for a Promise), else a Promise of it.
/// Weak: it never keeps the host's event loop alive.
type HereFn = napi::threadsafe_function::ThreadsafeFunction<
    String,
    napi::bindgen_prelude::Either<String, napi::bindgen_prelude::Promise<String>>,
    String,
    napi::Status,
    false,
    true,
>;

/// The shim's `here` per home in this process (none: the command line, which hosts no session).
static HERE: std::sync::Mutex<Vec<(std::path::PathBuf, std::sync::Arc<HereFn>)>> =
    std::sync::Mutex::new(Vec::new());

/// How long a linked machine's request waits for this process's host facts.
const HERE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(3);

/// What this process knows of itself when a linked machine's request arrives — asked of the host now,
/// never a copy taken earlier (a session that became live since must be served live, not cold). `ask`:
/// what the request needs (core `remote::Ask`: a read's session, flushed first; a send's target and
/// sender alone, as a local send reads them; else every live session).
/// The question is queued on the host's thread when this is called, not when the future is first
/// polled: the host's event loop wakes and answers while the caller decodes the frame and claims.
/// `Err`: the host did not answer in time (the request is refused, not answered from stale facts).
fn here_of(
    home: &std::path::Path,
    ask: mail_core::remote::Ask,
) -> impl std::future::Future<Output = std::result::Result<mail_core::request::ToolRequest, ()>>
       + Send
       + 'static {
    use napi::bindgen_prelude::Either;
    let f = HERE
        .lock()
        .ok()
        .and_then(|h| h.iter().find(|(p, _)| p == home).map(|(_, f)| f.clone()));
    // a read names its session: the host flushes it and reports its length, as for a local read
    let asked = f.map(|f| {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let queued = f.call_with_return_value(
            ask.to_json(),
            napi::threadsafe_function::ThreadsafeFunctionCallMode::NonBlocking,
            move |r, _| {
                let _ = tx.send(r);
                Ok(())
            },
        );
        (queued == napi::Status::Ok).then_some(rx)
    });
    let home = home.to_path_buf();
    async move {
        let json = match asked {
            // the host's thread is closing (or its queue refused the call)
            Some(None) => return Err(()),
            Some(Some(rx)) => {
                let answer = async move {
                    match rx.await {
                        Ok(Ok(Either::A(json))) => Ok(json),
                        Ok(Ok(Either::B(later))) => later.await.map_err(|_| ()),
                        _ => Err(()),
                    }
                };
                match tokio::time::timeout(HERE_DEADLINE, answer).await {
                    Ok(Ok(json)) => json,
                    _ => return Err(()),
                }
            }
            // a process without a host (the command line holding the endpoint): the store and the
            // presence records of the home's other processes
            None => serde_json::json!({"tool": "sessions_list", "args": {}, "caller": null,
            "config": {}, "host": {"dshHome": home.to_string_lossy(), "baseUrl": null,
            "version": null, "secret": null, "profile": null}, "live": []})
            .to_string(),
        };
        mail_core::tools::parse_request(&json)
            .ok()
            .and_then(|r| r.ok())
            .ok_or(())
    }
}

/// The host facts of the last request served here, per home and kind (only where a host answers:
/// `here_of` asks it): what a read starts with (the facts of every live session, `whole`) or a send's
/// checks begin with (a send's: its target's and sender's entries alone) beside the host's answer (core's
/// `remote::serve_value_at`, which keeps what they made only when the answer equals them).
type Kept = (std::path::PathBuf, bool, mail_core::request::ToolRequest);
static LAST_HERE: std::sync::Mutex<Vec<Kept>> = std::sync::Mutex::new(Vec::new());

fn last_here(home: &std::path::Path, whole: bool) -> Option<mail_core::request::ToolRequest> {
    let has_host = HERE
        .lock()
        .ok()
        .is_some_and(|h| h.iter().any(|(p, _)| p == home));
    if !has_host {
        return None;
    }
    let l = LAST_HERE.lock().ok()?;
    l.iter()
        .find(|(p, w, _)| p == home && *w == whole)
        .map(|(_, _, r)| r.clone())
}

fn keep_here(home: &std::path::Path, whole: bool, here: &mail_core::request::ToolRequest) {
    if let Ok(mut l) = LAST_HERE.lock() {
        l.retain(|(p, w, _)| !(p == home && *w == whole));
        l.push((home.to_path_buf(), whole, here.clone()));
    }
}

/// The linked machine of link `l` as the core names it.
fn machine_of_link(l: &link::Link) -> Option<mail_core::machine::Machine> {
    Some(mail_core::machine::Machine {
        id: mail_core::machine::MachineId::parse(l.id.as_str())?,
        name: l.name.clone(),
    })
}

/// What runs a request arriving from a linked machine: the core's own tools (`remote::serve`), with this
/// process's host facts. `from` is its link as crates/link's accept path found it in the verified links
/// after reading the request (the id the connection's handshake proved): not read again here.
fn machines_handler(home: &std::path::Path) -> link::Handler {
    let home = home.to_path_buf();
    std::sync::Arc::new(move |from: link::Link, body: serde_json::Value| {
        let home = home.clone();
        Box::pin(async move {
            let refused = |code: &str, message: &str| link::wire::WireError {
                code: code.into(),
                message: message.into(),
            };
            let Some(machine) = machine_of_link(&from) else {
                return Err(refused("unlinked", "not a linked machine"));
            };
            // what the request needs of the host (a read's session, a send's target and sender; read
            // from the frame the core then decodes strictly)
            let ask = mail_core::remote::Ask::of(&body);
            // the host is asked for its facts first: it answers on its own thread while (a send) the
            // core claims the request id and its checks begin with the previous send's facts, and (a
            // read) the window read starts with the facts it gave last (kept only when its answer says
            // nothing else: `remote::serve_value_at`)
            let h = home.clone();
            // a send's facts name its target alone: never what a later read starts with
            let whole = !ask.is_send();
            let starts_early = ask.read.is_some() || !whole;
            // asked now, on the host's thread (`here_of`), before the kept facts are copied out; its
            // answer waits in a channel until the core awaits it (no task of its own: that would only
            // add a wake before the core sees it)
            let asked = here_of(&home, ask);
            let last = if starts_early {
                last_here(&home, whole)
            } else {
                None
            };
            let here = async move {
                let here = asked.await.ok()?;
                keep_here(&h, whole, &here);
                Some(here)
            };
            mail_core::remote::serve_value_at(&home, &machine, body, last, here)
                .await
                .ok_or_else(|| refused("unavailable", "this process cannot serve now"))
        })
    })
}

/// The core's `Machines` (the seam it reaches linked machines through) over crates/link.
struct LinkMachines {
    home: std::path::PathBuf,
    m: std::sync::Arc<link::Machines>,
    /// The links as read and verified a moment ago for this same tool call (`run`): the first
    /// `linked()` is answered from them instead of reading and verifying links.json again (later ones
    /// read it), and a call made while the reading is fresh goes by it (`link::Machines::call_checked`:
    /// a machine not in it refused at once, one in it called without a third reading).
    read_now: std::sync::Mutex<Option<Vec<mail_core::machine::Machine>>>,
    checked: Option<link::store::Checked>,
}

impl LinkMachines {
    fn of(home: &std::path::Path) -> LinkMachines {
        LinkMachines::read_now(home, None)
    }
    fn read_now(home: &std::path::Path, checked: Option<link::store::Checked>) -> LinkMachines {
        LinkMachines {
            home: home.to_path_buf(),
            m: machines_of(home),
            read_now: std::sync::Mutex::new(checked.as_ref().map(machines_in)),
            checked,
        }
    }
    fn read_linked(home: &std::path::Path) -> Vec<mail_core::machine::Machine> {
        machines_in(&link::store::checked(home))
    }
}

/// The machines of a reading of the links, as the core names them.
fn machines_in(c: &link::store::Checked) -> Vec<mail_core::machine::Machine> {
    c.links().iter().filter_map(machine_of_link).collect()
}

impl mail_core::machine::Machines for LinkMachines {
    fn linked(&self) -> Vec<mail_core::machine::Machine> {
        match self.read_now.lock().ok().and_then(|mut l| l.take()) {
            Some(l) => l,
            None => LinkMachines::read_linked(&self.home),
        }
    }

    fn call(
        &self,
        to: &mail_core::machine::MachineId,
        req: mail_core::machine::wire::Request,
        deadline: std::time::Duration,
    ) -> mail_core::machine::Call<'_> {
        use mail_core::machine::CallError as E;
        let to = to.clone();
        Box::pin(async move {
            let id = link::MachineId::parse(to.as_str()).ok_or(E::Unlinked)?;
            let frame = mail_core::machine::wire::encode_value(&req);
            let call = async {
                match &self.checked {
                    Some(c) => self.m.call_checked(c, &id, frame).await,
                    None => self.m.call(&id, frame).await,
                }
            };
            match tokio::time::timeout(deadline, call).await {
                Err(_) => Err(E::Timeout),
                Ok(Ok(v)) => mail_core::machine::wire::response_from_value(v)
                    .map_err(|e| E::Protocol(e.to_string())),
                Ok(Err(e)) => Err(match e {
                    link::CallError::NotLinked | link::CallError::UnlinkedByPeer => E::Unlinked,
                    link::CallError::Unreachable(w) | link::CallError::NoHolder(w) => {
                        E::Unreachable(w)
                    }
                    link::CallError::Timeout => E::Timeout,
                    other => E::Protocol(other.to_string()),
                }),
            }
        })
    }
}

/// The home's linked machines, by the names its human gave them (the page's rows name them so); one
/// `stat` when it has none.
fn linked_or_none(home: &std::path::Path) -> Vec<mail_core::machine::Machine> {
    checked_or_none(home)
        .as_ref()
        .map_or_else(Vec::new, machines_in)
}

/// [`linked_or_none`] as read (`None` without a links document, or with no link in it).
fn checked_or_none(home: &std::path::Path) -> Option<link::store::Checked> {
    if std::fs::symlink_metadata(link::store::doc_path(home)).is_err() {
        return None;
    }
    Some(link::store::checked(home)).filter(|c| !c.links().is_empty())
}

/// How this process's host facts are read when a linked machine's request arrives: `here(ask)` resolves
/// to a ToolRequest's JSON (config, host, the sessions live in this process now). `ask` is core
/// `remote::Ask` as JSON: `{"read": id}` — the request carries `liveSeq` / `liveFlushed` of that session —,
/// `{"send": target, "sender": id}` — the live entries of those two alone, as a local send reads its
/// target —, or `{}` — every live session. Registered by the shim while the plugin is mounted
/// (lib/machines.js), dropped by `machinesStop`.
#[napi(ts_args_type = "dshHome: string | undefined | null, here: (ask: string) => Promise<string>")]
pub fn machines_serve_with(dsh_home: Option<String>, here: HereFn) {
    let home = home_of(dsh_home.as_deref());
    // a new host function (the plugin applied again, maybe with another configuration): nothing kept
    if let Ok(mut l) = LAST_HERE.lock() {
        l.retain(|(p, _, _)| p != &home);
    }
    if let Ok(mut h) = HERE.lock() {
        h.retain(|(p, _)| p != &home);
        h.push((home, std::sync::Arc::new(here)));
    }
}

/// `{ok: true, ...fields}` or `{ok: false, error: {kind, ...fields, message, refused}}` as JSON: the human's
/// commands get link's typed error as data (its words in `message`, from its `Display`; `refused`: a
/// refusal, not a failure to carry it out).
fn machines_json(r: std::result::Result<serde_json::Value, link::LinkError>) -> String {
    match r {
        Ok(serde_json::Value::Object(mut o)) => {
            o.insert("ok".into(), true.into());
            serde_json::Value::Object(o).to_string()
        }
        Ok(v) => serde_json::json!({"ok": true, "value": v}).to_string(),
        Err(e) => serde_json::json!({"ok": false, "error": e.to_json()}).to_string(),
    }
}

/// `link`: a one-time invite (`relay`: `none`, `public` — Iroh's public relays, refused under
/// `DSH_SESSION_MAIL_NO_PUBLIC_NETWORK=1` — or the human's iroh-relay URL; `ttlMinutes` 1-1440, default
/// 10). JSON `{ok, invite, expiresAt}` or `{ok: false, error}`.
#[napi]
pub async fn machines_invite(
    dsh_home: Option<String>,
    relay: Option<String>,
    ttl_minutes: Option<u32>,
) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let r = async {
        let relay = link::Relay::parse(relay.as_deref().unwrap_or("none"))?;
        let ttl = ttl_minutes.unwrap_or(10).clamp(1, 1440);
        let m = machines_of(&home);
        let inv = m
            .invite(relay, std::time::Duration::from_secs(u64::from(ttl) * 60))
            .await?;
        let exp = link::node::Invite::decode(&inv).map(|i| i.exp).unwrap_or(0);
        Ok::<_, link::LinkError>(serde_json::json!({"invite": inv, "expiresAt": exp}))
    }
    .await;
    Ok(machines_json(r))
}

/// Wait until `invite` is used (`true`) or expires, or `limitMs` passes (`false`).
#[napi]
pub async fn machines_wait_invite(
    dsh_home: Option<String>,
    invite: String,
    limit_ms: u32,
) -> napi::Result<bool> {
    let home = home_of(dsh_home.as_deref());
    machines_of(&home)
        .wait_invite(
            &invite,
            std::time::Duration::from_millis(u64::from(limit_ms)),
        )
        .await
        .map_err(internal)
}

/// `link <invite> --name <name>`: JSON `{ok, link}` or `{ok: false, error}`.
#[napi]
pub async fn machines_link(
    dsh_home: Option<String>,
    invite: String,
    name: String,
) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let r = machines_of(&home).accept_invite(&invite, &name).await;
    Ok(machines_json(r.map(|l| serde_json::json!({"link": l}))))
}

/// `links`: JSON `{ok, id, holderPid, thisProcessHolds, unverified, links: [{id, name, relay, addrs,
/// linkedAt, online, lastSeen, rttMs, error}]}` (`probe`: ask each machine for a round trip).
#[napi]
pub async fn machines_list(dsh_home: Option<String>, probe: bool) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let v = machines_of(&home).list(probe).await;
    Ok(machines_json(Ok(v)))
}

/// `unlink <name>`: JSON `{ok, link, told}` or `{ok: false, error}`.
#[napi]
pub async fn machines_unlink(dsh_home: Option<String>, name: String) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let r = machines_of(&home).unlink(&name).await;
    Ok(machines_json(r.map(
        |(l, told)| serde_json::json!({"link": l, "told": told}),
    )))
}

/// The `@` locator's sessions on linked machines (issue 31 #6): each machine's own `sessions_list` rows
/// (its bounds, `query` matched there; a query that is part of the machine's name matches every session
/// there, as the tool does), all machines asked at once within the listing's deadline. JSON
/// `{machines: [{id, name, rows: [wire row], error: string | null}]}`; no link, no machines.
#[napi]
pub async fn machines_sessions(
    dsh_home: Option<String>,
    query: Option<String>,
    limit: Option<u32>,
) -> napi::Result<String> {
    use mail_core::machine::{wire, Machines};
    let home = home_of(dsh_home.as_deref());
    let linked = LinkMachines::read_linked(&home);
    let limit = limit.unwrap_or(20).clamp(1, 200);
    let query = query
        .map(|q| q.trim().to_lowercase())
        .filter(|q| !q.is_empty());
    let asks = linked.into_iter().map(|m| {
        let lm = LinkMachines::of(&home);
        let mut args = serde_json::json!({ "limit": limit });
        if let Some(q) = query.as_ref().filter(|q| !m.name.contains(q.as_str())) {
            args["query"] = q.clone().into();
        }
        tokio::spawn(async move {
            let deadline = mail_core::remote::LIST_DEADLINE;
            let (rows, error) = match lm.call(&m.id, wire::Request::List { args }, deadline).await {
                Ok(wire::Response::List(l)) => {
                    (serde_json::to_value(&l.rows).unwrap_or_default(), None)
                }
                Ok(wire::Response::Refused(r)) => (
                    serde_json::json!([]),
                    Some(format!("refused ({})", r.code.as_str())),
                ),
                Ok(_) => (
                    serde_json::json!([]),
                    Some("an answer of another kind".to_string()),
                ),
                Err(e) => (serde_json::json!([]), Some(e.to_string())),
            };
            serde_json::json!({ "id": m.id, "name": m.name, "rows": rows, "error": error })
        })
    });
    let mut out = Vec::new();
    for a in asks.collect::<Vec<_>>() {
        if let Ok(v) = a.await {
            out.push(v);
        }
    }
    Ok(serde_json::json!({ "machines": out }).to_string())
}

/// `machines rename <name> <new>`: JSON `{ok, link}` or `{ok: false, error}`.
#[napi]
pub async fn machines_rename(
    dsh_home: Option<String>,
    name: String,
    new_name: String,
) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    let r = machines_of(&home).rename(&name, &new_name).await;
    Ok(machines_json(r.map(|l| serde_json::json!({"link": l}))))
}

/// `doctor`'s machine rows: JSON `[{name, status, detail}]`.
#[napi]
pub async fn machines_doctor(dsh_home: Option<String>) -> napi::Result<String> {
    let home = home_of(dsh_home.as_deref());
    Ok(serde_json::Value::from(machines_of(&home).doctor().await).to_string())
}

/// The plugin's start: keep the home's lease (take it when the home has links and no live holder, take
/// over when the holder goes). Resolves to whether this process holds the endpoint now.
#[napi]
pub async fn machines_start(dsh_home: Option<String>) -> napi::Result<bool> {
    let home = home_of(dsh_home.as_deref());
    let m = machines_of(&home);
    m.watch();
    if m.has_links() && link::lease::holder(&home).is_none() {
        let _ = m.try_hold().await;
    }
    // the outbox: delivered (once: the far side dedups by request id) or expired by whichever process
    // holds the endpoint, every 2 s
    static TICKING: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());
    let first = TICKING
        .lock()
        .map(|mut t| {
            let new = !t.contains(&home);
            if new {
                t.push(home.clone());
            }
            new
        })
        .unwrap_or(false);
    if first {
        let weak = std::sync::Arc::downgrade(&m);
        let h = home.clone();
        let kick = kick_of(&home);
        tokio::spawn(async move {
            let deadline = std::time::Duration::from_secs(10);
            loop {
                // every 2 s, or at once when a linked machine is heard from (one that comes back
                // announces itself: its mail goes now)
                let _ =
                    tokio::time::timeout(std::time::Duration::from_secs(2), kick.notified()).await;
                let Some(m) = weak.upgrade() else { break };
                if m.node().await.is_none() {
                    continue;
                }
                let lm = LinkMachines {
                    home: h.clone(),
                    m,
                    read_now: std::sync::Mutex::new(None),
                    checked: None,
                };
                // a drain that waits out a dial to a machine that was down when it began starts over
                // (once) when a machine is heard from meanwhile; a delivery cut short is only asked
                // again with its request id, which the far side lands once
                let drain = mail_core::remote::drain(&h, &lm, base::clock::now_ms(), deadline);
                tokio::select! {
                    _ = drain => {}
                    _ = kick.notified() => {
                        mail_core::remote::drain(&h, &lm, base::clock::now_ms(), deadline).await;
                    }
                }
            }
        });
    }
    Ok(m.node().await.is_some())
}

/// Give up the endpoint and the lease (the plugin's dispose, the end of a command): closed and awaited.
#[napi]
pub async fn machines_stop(dsh_home: Option<String>) -> napi::Result<()> {
    let home = home_of(dsh_home.as_deref());
    if let Ok(mut h) = HERE.lock() {
        h.retain(|(p, _)| p != &home);
    }
    machines_of(&home).stop().await;
    Ok(())
}
