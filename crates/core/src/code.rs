//! The stable codes of refusals: what the texts, the CLI's exit codes, the ledger and the binding
//! key on.

/// The code of a refusal (`refused (<code>): …`): what the CLI's exit codes, the ledger and the
/// binding key on. Serialized as its kebab-case string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "kebab-case"))]
pub enum RefusalCode {
    BadArgument,
    NoCaller,
    NoWebServer,
    SelfSend,
    EmptyBody,
    TooLong,
    ForgedHeader,
    Budget,
    RelayLimit,
    ResumeDisabled,
    NotFound,
    NotMessageable,
    Stacked,
    Rejected,
    AuthFailed,
    Forbidden,
    Unreachable,
    HeldElsewhere,
    UnknownTool,
    Internal,
    Busy,
    /// The human's "stop all agent mail" switch is on (`crate::policy`).
    Stopped,
    /// The human set the target to refuse agent mail (`crate::policy`).
    RefusedByHuman,
    /// A sender id arriving from a linked machine that this home does not take (one of its own
    /// sessions, or first seen from another machine: `crossing::foreign`).
    ForeignSender,
    /// The target's machine is not linked (never, or no longer).
    Unlinked,
}

impl RefusalCode {
    /// Every code, in declaration order.
    pub const ALL: &'static [RefusalCode] = &[
        RefusalCode::BadArgument,
        RefusalCode::NoCaller,
        RefusalCode::NoWebServer,
        RefusalCode::SelfSend,
        RefusalCode::EmptyBody,
        RefusalCode::TooLong,
        RefusalCode::ForgedHeader,
        RefusalCode::Budget,
        RefusalCode::RelayLimit,
        RefusalCode::ResumeDisabled,
        RefusalCode::NotFound,
        RefusalCode::NotMessageable,
        RefusalCode::Stacked,
        RefusalCode::Rejected,
        RefusalCode::AuthFailed,
        RefusalCode::Forbidden,
        RefusalCode::Unreachable,
        RefusalCode::HeldElsewhere,
        RefusalCode::UnknownTool,
        RefusalCode::Internal,
        RefusalCode::Busy,
        RefusalCode::Stopped,
        RefusalCode::RefusedByHuman,
        RefusalCode::ForeignSender,
        RefusalCode::Unlinked,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RefusalCode::BadArgument => "bad-argument",
            RefusalCode::NoCaller => "no-caller",
            RefusalCode::NoWebServer => "no-web-server",
            RefusalCode::SelfSend => "self-send",
            RefusalCode::EmptyBody => "empty-body",
            RefusalCode::TooLong => "too-long",
            RefusalCode::ForgedHeader => "forged-header",
            RefusalCode::Budget => "budget",
            RefusalCode::RelayLimit => "relay-limit",
            RefusalCode::ResumeDisabled => "resume-disabled",
            RefusalCode::NotFound => "not-found",
            RefusalCode::NotMessageable => "not-messageable",
            RefusalCode::Stacked => "stacked",
            RefusalCode::Rejected => "rejected",
            RefusalCode::AuthFailed => "auth-failed",
            RefusalCode::Forbidden => "forbidden",
            RefusalCode::Unreachable => "unreachable",
            RefusalCode::HeldElsewhere => "held-elsewhere",
            RefusalCode::UnknownTool => "unknown-tool",
            RefusalCode::Internal => "internal",
            RefusalCode::Busy => "busy",
            RefusalCode::Stopped => "stopped",
            RefusalCode::RefusedByHuman => "refused-by-human",
            RefusalCode::ForeignSender => "foreign-sender",
            RefusalCode::Unlinked => "unlinked",
        }
    }

    /// The code of this string (`None`: not a code this version knows).
    pub fn parse(s: &str) -> Option<RefusalCode> {
        RefusalCode::ALL.iter().copied().find(|c| c.as_str() == s)
    }
}

impl std::fmt::Display for RefusalCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A message's fate: the one enum of docs/architecture.md "Fates", typed end to end — `verify --json`'s
/// `state` and its exit code (lib/cli/args.js `exitForFate`), the mail view's rows, the held cards.
/// Every value is printed from a `fate::Reading`, which also makes the line of text beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "kebab-case"))]
pub enum FateState {
    /// In the target's log as a user message.
    Landed,
    /// In the target's inbox (its log, or the memory of the process holding it), not landed yet.
    Queued,
    /// In the mailbox of a session live in a process without a web server, not drained yet.
    Waiting,
    /// Kept for the human's decision (the target's inbound policy is `hold`, or it does not verify).
    Held,
    /// Approved by the human and handed to the target's mailbox; not landed yet.
    Approved,
    /// Rejected by the human: not delivered, and never will be.
    Rejected,
    /// Held past its time and rejected as expired: not delivered, and never will be.
    Expired,
    /// Refused when it was sent (the ledger's `refused:<code>`) or by the drain of the target's mailbox:
    /// not delivered, and never will be.
    Refused,
    /// Inserted, then removed with its whole inbox before it landed (not delivered again).
    Canceled,
    /// Its holder stopped or crashed before it landed; re-delivered when the session is live again.
    Lost,
    /// Removed from the queue (by the human, or by a cancel that cannot be told from the human's):
    /// never delivered again.
    Removed,
    /// Not found: in no log, mailbox, held store or ledger line this home has.
    Unknown,
}
