//! Delivery: hand one prompt to the host's own route and report what happened.
//!
//! - `dialect`: rc.8 (`POST /api/session.prompt`) or v2 (`POST /api/session/prompt` + cookie), detected for
//!   `hostApi: auto` and cached per base URL;
//! - `envelope`: exact request bodies and the response reader;
//! - `cookie` + `credentials`: the v2 browser-session cookie from the host's own secret;
//! - `http`: loopback-only POST with a connect timeout and a whole-exchange timeout.
//!
//! **A retry never lands twice.** When a POST went out but no clear answer came back (timeout after
//! connecting, reset, garbled answer), the request id is looked up before anything is resent:
//! the session log (`store::find_request`), then for rc.8 the host's `session.history`; for v2 a resend
//! with the same `requestId` is itself the lookup (`hasPromptRequest` answers `{accepted:true}` without
//! delivering again [Z17 `packages/api/session-controller/src/commands.ts` `prompt`, `hasPromptRequest`]).
//! Found → accepted. Not found → one resend with the same id. Still unclear → `MayHaveLanded`.

pub mod cookie;
pub mod credentials;
pub mod dialect;
pub mod envelope;
pub mod http;

#[cfg(test)]
pub(crate) mod testserver;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use self::credentials::Secret;
use self::dialect::Choice;
use self::envelope::{parse_response, RpcResult};
use self::http::{post_json, Base, NetError, Timeouts};

/// The host's prompt mode [R8 `api/sessions.schema.ts` `sessionPromptRequestSchema`; Z15 `types.ts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `followup`: next-turn.
    Queue,
    /// `steer`: next-step (downgraded to next-turn by the host when the running turn was aborted).
    Steer,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Queue => "queue",
            Mode::Steer => "steer",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "queue" => Some(Mode::Queue),
            "steer" => Some(Mode::Steer),
            _ => None,
        }
    }
}

/// Host generation of the prompt route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    Rc8,
    V2,
}

impl Dialect {
    pub fn other(self) -> Dialect {
        match self {
            Dialect::Rc8 => Dialect::V2,
            Dialect::V2 => Dialect::Rc8,
        }
    }
}

/// Everything one delivery needs.
#[derive(Debug, Clone)]
pub struct Delivery<'a> {
    /// `http://127.0.0.1:<port>` of the host's web server (validated as loopback here).
    pub base_url: &'a str,
    /// DSH_HOME (credentials file, session logs for the dedup lookup).
    pub dsh_home: &'a Path,
    /// The browser-session secret if the shim handed it over (base64url).
    pub host_secret: Option<&'a str>,
    /// The host's version, if known (`hostApi: auto`).
    pub host_version: Option<&'a str>,
    /// `Config::host_api`: `auto`, `rc8` or `v2`.
    pub host_api: &'a str,
    pub timeouts: Timeouts,
    pub session_id: &'a str,
    pub mode: Mode,
    /// The full delivered text (header or frame included).
    pub text: &'a str,
    /// `dsh-session-mail:<uuid>`.
    pub request_id: &'a str,
}

/// How an accepted delivery was confirmed after an ambiguous first attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// The request id was found in the host's `session.history` (rc.8); nothing was resent.
    FoundInHistory,
    /// The request id was found in the session log on disk; nothing was resent.
    FoundInLog,
    /// Resent once with the same request id and accepted (v2: the host deduplicates; rc.8: only after
    /// the lookup showed it had not landed).
    Resent,
}

/// What the host route did with the message.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Accepted {
        dialect: Dialect,
        recovery: Option<Recovery>,
        /// Why the first attempt got no clear answer, when it was confirmed after one (`recovery`).
        ambiguity: Option<Unclear>,
    },
    /// `{ok:false, error:{code, message}}` — the host's own words.
    Rejected {
        code: String,
        message: String,
        after_ambiguous: bool,
    },
    Failed(Failure),
}

/// A delivery that did not reach a decision of the host. The words: `render::send`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// `host.base_url` is not a usable loopback URL.
    BadBaseUrl(http::BaseUrlError),
    /// v2 needs the browser-session secret and it is missing or unusable.
    NoSecret(credentials::CredentialsError),
    /// HTTP 401: the cookie was refused.
    Unauthorized,
    /// HTTP 403: the host's Host/Origin fence refused the request (the start of its body).
    Forbidden(String),
    /// The connection was not made (refused, unreachable, the client not set up): the host is down
    /// (nothing was sent; [`NetError::nothing_sent`]).
    HostDown(NetError),
    /// Connecting timed out (nothing was sent).
    ConnectTimeout,
    /// The generation probe got no clear answer (nothing was sent).
    ProbeNoAnswer(NetError),
    /// HTTP 5xx.
    HostError { status: u16, body: String },
    /// Another carrier-level HTTP status (400, 404, 415, …): the route did not take the request.
    Carrier { status: u16, body: String },
    /// The message went out, no clear answer came back, and the lookup (or the one resend) could not
    /// settle it.
    MayHaveLanded(Box<Unsettled>),
}

/// Why an attempt that went out got no clear answer (it may have landed: looked up before any resend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unclear {
    /// The exchange failed after connecting: a timeout, a reset or close, an answer past its cap.
    Net(NetError),
    /// HTTP 200 whose body is not a `server-response` (its start: scrubbed, one line, ≤ 200 characters).
    NotAResponse { body: String },
}

/// Why rc.8's `session.history` could not say whether the request id landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// No answer (the connection failed, timed out, broke).
    Net(NetError),
    /// An HTTP status other than 200.
    Status(u16),
    /// `{ok:false, error:{code, message}}`, the host's words as it gave them (render scrubs them).
    Refused { code: String, message: String },
    /// HTTP 200 that is not a `server-response`.
    Unreadable,
}

/// A message that may have landed: the first attempt's unclear answer, and what followed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsettled {
    pub first: Unclear,
    pub then: Then,
}

/// What followed an unclear first attempt, leaving it unsettled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Then {
    /// rc.8: looking the request id up failed, so it was not sent again.
    LookupFailed(LookupError),
    /// The one resend with the same request id got no clear answer either.
    ResendUnclear(Unclear),
    /// The one resend failed (not `MayHaveLanded`).
    ResendFailed(Box<Failure>),
    /// The one resend got this carrier status (401 on the rc.8 route, 404).
    ResendStatus(u16),
}

/// Time given to the host to finish a request that timed out before its id is looked up.
const SETTLE: Duration = Duration::from_millis(250);
/// Pages of `session.history` (200 messages each) searched for the request id.
const HISTORY_PAGES: usize = 3;
const HISTORY_PAGE_MESSAGES: u32 = 200;
const MAX_PROMPT_REPLY: usize = 1024 * 1024;
const MAX_HISTORY_REPLY: usize = 32 * 1024 * 1024;

/// One attempt's result.
#[derive(Debug)]
enum Attempt {
    Accepted,
    Rejected {
        code: String,
        message: String,
    },
    Failed(Failure),
    Ambiguous(Unclear),
    /// 401 on the rc.8 route or 404 on either route: this host may speak the other generation.
    WrongDialect(u16, String),
}

/// Deliver one message. Never panics, never returns an error: every outcome is an [`Outcome`].
pub async fn deliver(d: &Delivery<'_>) -> Outcome {
    let base = match http::loopback_base(d.base_url) {
        Ok(b) => b,
        Err(why) => return Outcome::Failed(Failure::BadBaseUrl(why)),
    };
    let choice = dialect::choice(d.host_api);
    let mut current = match choice {
        Choice::Forced(x) => x,
        Choice::Auto => match dialect::detect(&base, d.host_version, d.timeouts).await {
            Ok(x) => x,
            Err(NetError::ConnectTimeout) => return Outcome::Failed(Failure::ConnectTimeout),
            Err(e) if e.nothing_sent() => return Outcome::Failed(Failure::HostDown(e)),
            Err(e) => return Outcome::Failed(Failure::ProbeNoAnswer(e)),
        },
    };
    let mut secret: Option<Secret> = None;
    let mut switched = false;
    loop {
        match attempt(d, &base, current, &mut secret).await {
            Attempt::Accepted => {
                return Outcome::Accepted {
                    dialect: current,
                    recovery: None,
                    ambiguity: None,
                }
            }
            Attempt::Rejected { code, message } => {
                return Outcome::Rejected {
                    code,
                    message,
                    after_ambiguous: false,
                }
            }
            Attempt::Failed(f) => return Outcome::Failed(f),
            Attempt::Ambiguous(why) => return recover(d, &base, current, &mut secret, why).await,
            Attempt::WrongDialect(status, body) => {
                // Nothing was delivered (401 / 404 come before any handler runs): trying the other
                // generation once is safe.
                if choice == Choice::Auto && !switched {
                    switched = true;
                    current = current.other();
                    dialect::remember(&base.origin, current);
                    continue;
                }
                return Outcome::Failed(if status == 401 {
                    Failure::Unauthorized
                } else {
                    Failure::Carrier { status, body }
                });
            }
        }
    }
}

async fn attempt(
    d: &Delivery<'_>,
    base: &Base,
    dialect: Dialect,
    secret: &mut Option<Secret>,
) -> Attempt {
    let (path, body, cookie) = match dialect {
        Dialect::Rc8 => (
            envelope::RC8_PROMPT_PATH,
            envelope::rc8_prompt(d.request_id, d.session_id, d.mode, d.text),
            None,
        ),
        Dialect::V2 => {
            let s = match secret {
                Some(s) => &*s,
                None => match credentials::load(d.host_secret, d.dsh_home) {
                    Ok(s) => &*secret.insert(s),
                    Err(why) => return Attempt::Failed(Failure::NoSecret(why)),
                },
            };
            let envelope_id = uuid::Uuid::new_v4().to_string();
            (
                envelope::V2_PROMPT_PATH,
                envelope::v2_prompt(&envelope_id, d.request_id, d.session_id, d.mode, d.text),
                Some(cookie::cookie_header(s, &base.authority, cookie::now_ms())),
            )
        }
    };
    match post_json(
        base,
        path,
        body,
        cookie.as_deref(),
        d.timeouts,
        MAX_PROMPT_REPLY,
    )
    .await
    {
        Err(NetError::ConnectTimeout) => Attempt::Failed(Failure::ConnectTimeout),
        Err(e) if e.nothing_sent() => Attempt::Failed(Failure::HostDown(e)),
        Err(e) => Attempt::Ambiguous(Unclear::Net(e)),
        Ok(reply) => interpret(reply, dialect),
    }
}

fn snippet(body: &str) -> String {
    // Whatever answers on the port may echo our Cookie header back: never quote it.
    let one_line: String = base::scrub::scrub(body)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let trimmed = one_line.trim();
    if trimmed.chars().count() > 200 {
        format!("{}…", trimmed.chars().take(200).collect::<String>())
    } else {
        trimmed.to_string()
    }
}

fn interpret(reply: http::Reply, dialect: Dialect) -> Attempt {
    match reply.status {
        // Business outcomes are always HTTP 200 [R8 `fetch/handler.ts` header comment; Z17 `rpc-host.ts` `fullResponse`].
        200 => match parse_response(&reply.body) {
            Some(RpcResult::Ok(_)) => Attempt::Accepted,
            Some(RpcResult::Err { code, message }) => Attempt::Rejected {
                code: base::scrub::scrub(&code),
                message: base::scrub::scrub(&message),
            },
            None => Attempt::Ambiguous(Unclear::NotAResponse {
                body: snippet(&reply.body),
            }),
        },
        // 403 (fence) comes before 401 (cookie) [Z17 `rpc-host.ts` `requestRejection`].
        401 if dialect == Dialect::Rc8 => Attempt::WrongDialect(401, snippet(&reply.body)),
        401 => Attempt::Failed(Failure::Unauthorized),
        403 => Attempt::Failed(Failure::Forbidden(snippet(&reply.body))),
        404 => Attempt::WrongDialect(404, snippet(&reply.body)),
        s @ 500..=599 => Attempt::Failed(Failure::HostError {
            status: s,
            body: snippet(&reply.body),
        }),
        s => Attempt::Failed(Failure::Carrier {
            status: s,
            body: snippet(&reply.body),
        }),
    }
}

/// The first attempt went out and got no clear answer: look the id up before any resend.
async fn recover(
    d: &Delivery<'_>,
    base: &Base,
    dialect: Dialect,
    secret: &mut Option<Secret>,
    first: Unclear,
) -> Outcome {
    tokio::time::sleep(SETTLE).await;
    let accepted = |recovery| Outcome::Accepted {
        dialect,
        recovery: Some(recovery),
        ambiguity: Some(first.clone()),
    };
    // The log lookup reads files: on the blocking pool, with a deadline (a stuck log is "not found").
    let found = {
        let (home, sid, rid) = (
            d.dsh_home.to_path_buf(),
            d.session_id.to_string(),
            d.request_id.to_string(),
        );
        base::offload::run(base::offload::FILE_DEADLINE, move || {
            store::find_request(&home, &sid, &rid).is_some()
        })
        .await
        .unwrap_or(false)
    };
    if found {
        return accepted(Recovery::FoundInLog);
    }
    if dialect == Dialect::Rc8 {
        // rc.8 has no idempotency check [R8 `api-proxy.ts` `prompt`]: a blind resend would land twice.
        match history_lookup(d, base).await {
            Lookup::Found => return accepted(Recovery::FoundInHistory),
            Lookup::NotFound => {}
            Lookup::Unknown(why) => return unsettled(first, Then::LookupFailed(why)),
        }
    }
    let then = match attempt(d, base, dialect, secret).await {
        Attempt::Accepted => return accepted(Recovery::Resent),
        Attempt::Rejected { code, message } => {
            return Outcome::Rejected {
                code,
                message,
                after_ambiguous: true,
            }
        }
        Attempt::Ambiguous(why) => Then::ResendUnclear(why),
        Attempt::Failed(f) => Then::ResendFailed(Box::new(f)),
        Attempt::WrongDialect(status, _) => Then::ResendStatus(status),
    };
    unsettled(first, then)
}

fn unsettled(first: Unclear, then: Then) -> Outcome {
    Outcome::Failed(Failure::MayHaveLanded(Box::new(Unsettled { first, then })))
}

enum Lookup {
    Found,
    NotFound,
    Unknown(LookupError),
}

/// rc.8: search the newest pages of `session.history` for the request id, in `user/message` events and in
/// `agent/inbox/spliced` insertions (a queued message appears only there until its turn claims it)
/// [R8 `api-proxy.ts` `history` (tail page, `beforeSeq` pages back), `paginate`; session-contract §5].
async fn history_lookup(d: &Delivery<'_>, base: &Base) -> Lookup {
    let mut before: Option<u64> = None;
    for _ in 0..HISTORY_PAGES {
        let body = envelope::rc8_history(
            &uuid::Uuid::new_v4().to_string(),
            d.session_id,
            before,
            HISTORY_PAGE_MESSAGES,
        );
        let reply = match post_json(
            base,
            envelope::RC8_HISTORY_PATH,
            body,
            None,
            d.timeouts,
            MAX_HISTORY_REPLY,
        )
        .await
        {
            Ok(r) => r,
            Err(e) => return Lookup::Unknown(LookupError::Net(e)),
        };
        if reply.status != 200 {
            return Lookup::Unknown(LookupError::Status(reply.status));
        }
        let value = match parse_response(&reply.body) {
            Some(RpcResult::Ok(v)) => v,
            Some(RpcResult::Err { code, message }) => {
                return Lookup::Unknown(LookupError::Refused { code, message })
            }
            None => return Lookup::Unknown(LookupError::Unreadable),
        };
        let events = value
            .get("events")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let mut min_seq: Option<u64> = None;
        for item in events {
            let ev = item.get("event").unwrap_or(item);
            if event_carries(ev, d.request_id) {
                return Lookup::Found;
            }
            if let Some(seq) = ev.get("seq").and_then(Value::as_u64) {
                min_seq = Some(min_seq.map_or(seq, |m: u64| m.min(seq)));
            }
        }
        let has_more = value
            .get("hasMore")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        match (has_more, min_seq) {
            (true, Some(m)) if m > 0 => before = Some(m),
            _ => return Lookup::NotFound,
        }
    }
    Lookup::NotFound
}

fn rpc_id_of(message: &Value) -> Option<&str> {
    message.get("source")?.get("rpcId")?.as_str()
}

/// Does this log event carry the request id in `source.rpcId`?
pub(crate) fn event_carries(ev: &Value, request_id: &str) -> bool {
    let data = ev.get("data").unwrap_or(&Value::Null);
    match ev.get("type").and_then(Value::as_str) {
        Some("user/message") => {
            rpc_id_of(data) == Some(request_id)
                || data.get("message").and_then(rpc_id_of) == Some(request_id)
        }
        Some("agent/inbox/spliced") => data
            .get("inserted")
            .and_then(Value::as_array)
            .map(|items| items.iter().any(|m| rpc_id_of(m) == Some(request_id)))
            .unwrap_or(false),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
