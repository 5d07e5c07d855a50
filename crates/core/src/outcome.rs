//! Typed outcomes: what a tool call ended in, as data. Text is made from these values only by the
//! renderers (`crate::render`); the CLI, the doctor, verify and the ledger consume the values.
//!
//! - [`Refusal`]: one variant per refusal code, carrying what the text needs (`refused (<code>): …`).
//! - [`SendOutcome`] / [`SendResult`]: accepted (with its receipt), refused, or may-have-landed.
//! - [`ArgProblem`]: one problem with one argument (the data of a `bad-argument` refusal).

pub use crate::code::RefusalCode;
use crate::delivery::{Dialect, Failure, Mode, Recovery};
use crate::mail::budget::{Allowance, Exceeded};
use crate::mail::guard::Forgery;
use crate::mail::stacking::Stacked;
pub use crate::tool::{SendTool, Tool};

/// One problem with one argument of a tool call: what the argument must be, what came, a hint, all
/// as data; `render::refusal::problem_sentence` words them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgProblem {
    /// `<name> must be <expected>; got <got>.` and an optional hint.
    Invalid {
        name: String,
        expected: Expected,
        got: Got,
        hint: Option<Hint>,
    },
    /// An argument name the tool does not take (the `sessions_list`/`sessions_read` form:
    /// `"<name>" is not an argument of <tool>; expected only <allowed>.`).
    NotAnArgument {
        name: String,
        tool: Tool,
        allowed: &'static [&'static str],
    },
}

/// What an argument must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Text without a lone UTF-16 surrogate.
    ValidUnicode,
    /// The list and read tools' arguments as a whole.
    JsonObject,
    /// The send tools' arguments as a whole.
    Object,
    Str,
    /// A boolean, in the list and read tools' words.
    TrueOrFalse,
    /// A boolean, in the send tools' words.
    Boolean,
    IntRange {
        lo: u64,
        hi: u64,
    },
    /// One of these strings.
    OneOf(&'static [&'static str]),
    SessionId,
    NonEmptySessionId,
    /// A send target: a session id exactly as sessions_list shows it.
    ListedSessionId,
    /// The send tools' `message`.
    MessageText,
    /// A message without control characters other than newline and tab.
    NoControlCharacters,
    QueueOrSteer,
    /// An argument name `tool` does not take: it is to be left out.
    LeftOut(SendTool),
}

/// What came instead of the expected argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Got {
    /// A JSON value, as the list and read tools show one (`"x" (a string)`, `5`, `an array`).
    Value(Shown),
    /// A JSON value or its absence, as the send tools show one (`the string "x"`, `the number 5`).
    Arg(Option<Shown>),
    /// Nothing at all (the list and read tools' words for a missing argument).
    Nothing,
    EmptyString,
    /// Half of a surrogate pair.
    LoneSurrogate,
    /// The string `value` with the control character `code` at `position` (1-based).
    ControlCharacterIn {
        value: Shown,
        code: u32,
        position: usize,
    },
    /// The control character `code` at `position` (1-based).
    ControlCharacter {
        code: u32,
        position: usize,
    },
    /// A string of `chars` characters (over the longest id).
    LongString {
        chars: usize,
    },
}

/// A JSON value as a refusal shows it: its kind, a number's digits, a string's first
/// [`Shown::MAX_CHARS`] characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    Null,
    Bool(bool),
    Number(String),
    Str {
        head: String,
        /// The string is longer than `head`.
        cut: bool,
    },
    Array,
    Object,
}

impl Shown {
    /// Most characters of a string shown.
    pub const MAX_CHARS: usize = 60;

    pub fn of(v: &serde_json::Value) -> Shown {
        use serde_json::Value;
        match v {
            Value::Null => Shown::Null,
            Value::Bool(b) => Shown::Bool(*b),
            Value::Number(n) => Shown::Number(n.to_string()),
            Value::String(s) => Shown::Str {
                head: s.chars().take(Self::MAX_CHARS).collect(),
                cut: s.chars().count() > Self::MAX_CHARS,
            },
            Value::Array(_) => Shown::Array,
            Value::Object(_) => Shown::Object,
        }
    }
}

/// What a refusal suggests after its problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hint {
    /// `tool` takes these arguments.
    Takes {
        tool: Tool,
        allowed: &'static [&'static str],
    },
    OmitForDefault,
    /// What sessions_list's `query` is.
    QueryText,
    /// sessions_list's `scope` defaults to top-level sessions.
    ScopeDefault,
    /// A session id exactly as sessions_list shows it.
    ListedId,
    IdsHaveNoControlCharacters,
    IdAsString,
    /// The JSON boolean, not its string.
    JsonBoolean,
    /// What `urgent` does.
    UrgentMeaning,
    LowerCase,
    /// `mode` left out is this mode.
    ModeDefault(Mode),
    /// What `notify_when_idle` does.
    NotifyMeaning,
    /// The argument name meant (`Did you mean <name>?`).
    DidYouMean(&'static str),
    /// The target goes in this argument.
    TargetGoesIn(&'static str),
    TextGoesInMessage,
    /// sessions_send takes `mode: "steer"`, not `urgent`.
    ModeNotUrgent,
    /// send_session_message takes `urgent: true`, not `mode`.
    UrgentNotMode,
    SenderIsYourOwn,
    /// Replace or drop a lone surrogate and call again.
    ReplaceSurrogate,
}

impl ArgProblem {
    pub fn invalid(
        name: impl Into<String>,
        expected: Expected,
        got: Got,
        hint: Option<Hint>,
    ) -> ArgProblem {
        ArgProblem::Invalid {
            name: name.into(),
            expected,
            got,
            hint,
        }
    }

    /// The argument the problem is about.
    pub fn name(&self) -> &str {
        match self {
            ArgProblem::Invalid { name, .. } | ArgProblem::NotAnArgument { name, .. } => name,
        }
    }
}

/// Where a `not-found` came from (the texts differ: a send says nothing was sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// A send target that is neither live nor in the store.
    SendTarget,
    /// A read target that is not in the store.
    ReadTarget,
    /// A read target whose log exists but cannot be read (where, why).
    Unreadable(store::Unreadable),
}

/// Where a delivery was going, for the texts of its failures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryContext {
    pub target: String,
    pub request_id: String,
    pub base_url: String,
    pub connect_timeout_ms: u64,
}

/// The process that holds a `held-elsewhere` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A host process that publishes its presence on this home.
    Process { pid: u32, profile: Option<String> },
    /// A process that publishes no presence here (this plugin is not mounted there, or not running).
    Unpublished,
    /// The route's owner was not recorded.
    Unknown,
}

/// Why a live target's owner cannot take the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldWhy {
    /// The owner has no web server to hand the message to, and its plugin drains no mailbox (an older
    /// version).
    NoRoute,
    /// The owner is stopping (its presence record says so): it takes no more messages, and the session is
    /// not resumed here before that process has exited.
    Stopping,
    /// The owner's mailbox did not take the message (why; boxed: a `Refusal` stays small).
    MailboxRefused(Box<MailboxRefusal>),
    /// The host answered `session/writer-held`: no process on this home can route it there.
    WriterHeld,
}

/// Why the owner's mailbox did not take a message (the words: `render::send`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailboxRefusal {
    /// Posting the envelope failed (`mailbox::post`'s reason).
    Post(crate::mailbox::PostError),
    /// Posting under DSH_HOME did not finish before the send's deadline.
    Late,
    /// The attempt's ledger line, which the owner checks the envelope against, could not be written
    /// (so nothing was posted).
    NoLedgerLine(crate::ledger::LedgerError),
}

/// What failed inside the plugin (`internal`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Internal {
    /// Reading the session store (a listing or a read) hit its deadline or panicked.
    Store(base::offload::Offload),
    /// The session changed between two reads of the same call.
    ChangedWhileRead { session: String },
    /// The held store did not take a message the human's policy holds (`policy::held::hold`).
    Held(std::sync::Arc<crate::policy::held::HeldError>),
}

/// Every refusal a tool answers with, one variant per code.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// `bad-argument`: every problem found (`usage`: the call shape the send tools add).
    BadArgument {
        problems: Vec<ArgProblem>,
        usage: Option<&'static str>,
    },
    /// `no-caller`: the runtime did not say which session calls.
    NoCaller,
    /// `no-web-server`: the host profile mounts no web server.
    NoWebServer { profile: Option<String> },
    /// `self-send`.
    SelfSend { target: String },
    /// `empty-body`.
    EmptyBody,
    /// `too-long`: `chars` over `max` (maxSendChars).
    TooLong { chars: usize, max: usize },
    /// `forged-header`: a body line looks like a From header or a frame line.
    ForgedHeader(Forgery),
    /// `budget`: a send budget is used up.
    Budget {
        exceeded: Exceeded,
        target: String,
        tool: SendTool,
    },
    /// `relay-limit`: the causal loop guard (`mail::chain`): this send would pass `maxRelayHops` in its chain.
    RelayLimit {
        hop: crate::mail::chain::Hop,
        max: u32,
    },
    /// `resume-disabled`: a cold target while `allowResume` is false.
    ResumeDisabled { target: String },
    /// `not-found`.
    NotFound { target: String, missing: Missing },
    /// `not-messageable`: a subagent session (its owner, when recorded).
    NotMessageable {
        target: String,
        owner: Option<String>,
    },
    /// `stacked`: this sender's queued messages the target has not taken yet.
    Stacked {
        stacked: Stacked,
        target: String,
        tool: SendTool,
    },
    /// `rejected`: the host answered `{ok:false, error:{code, message}}`.
    Rejected {
        code: String,
        message: String,
        after_ambiguous: bool,
        request_id: String,
    },
    /// `unreachable`, `auth-failed` or `forbidden`: the delivery reached no decision of the host
    /// (never `Failure::MayHaveLanded`: that is [`SendOutcome::MayHaveLanded`]).
    Undelivered {
        failure: Failure,
        context: DeliveryContext,
    },
    /// `held-elsewhere`: the target is live in another host process that cannot take the message
    /// (`owner`: which process; `why`: what is missing). This process never resumes it.
    HeldElsewhere {
        target: String,
        owner: Owner,
        why: HeldWhy,
        request_id: Option<String>,
    },
    /// `held-elsewhere`, from evidence on this machine: a cold target may be live in a DSH process on this
    /// home that publishes no presence (it does not mount this plugin; `presence::foreign`). Decided before
    /// anything is sent; this process does not wake it.
    MayBeHeldElsewhere {
        target: String,
        holder: crate::presence::foreign::Holder,
    },
    /// `unknown-tool`: a tool name this plugin does not provide.
    UnknownTool { name: String },
    /// `internal`: the plugin itself failed (nothing was changed).
    Internal { what: Internal },
    /// `budget`, failing closed (issue 11 #11): a budget is on but cannot be checked or enforced
    /// (the ledger cannot be read, or cannot take this send's line).
    BudgetUnchecked { why: crate::mail::budget::Unchecked },
    /// `busy`: the send path's file work (store, ledger) did not finish before its deadline, or
    /// stopped (`Offload::Panicked`).
    Busy { what: base::offload::Offload },
    /// `stopped`: the human's home-wide "stop all agent mail" switch is on (`crate::policy`).
    Stopped { target: String },
    /// `refused-by-human`: the human refuses this message (`crate::policy`): `by` the target's inbound
    /// (`Session`), a standing rule for the sender (`Sender`) or for its machine (`Machine`).
    RefusedByHuman {
        target: String,
        by: crate::policy::By,
    },
    /// `budget`: the linked machine the send arrived from used up its own budget here
    /// (`budgetPerMachine`, `crossing::machine_budget`).
    MachineBudget(crate::crossing::MachineBudget),
    /// `foreign-sender`: the sender id that arrived from a linked machine is one this home does not
    /// take (`crossing::foreign`).
    ForeignSender {
        sender: String,
        why: crate::machine::wire::ForeignWhy,
    },
    /// `unlinked`: the target's machine (the one its id came from) is not linked now.
    Unlinked { target: String, machine: String },
    /// A linked machine's own send path refused the message (its code and facts, typed); nothing
    /// was delivered there.
    Remote(Box<RemoteRefusal>),
}

/// A linked machine's refusal of a message (`Refusal::Remote`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRefusal {
    pub machine: crate::machine::Machine,
    pub target: String,
    pub request_id: String,
    pub refusal: crate::machine::wire::WireRefusal,
}

impl Refusal {
    /// The stable code (`refused (<code>): `).
    pub fn code(&self) -> RefusalCode {
        match self {
            Refusal::BadArgument { .. } => RefusalCode::BadArgument,
            Refusal::NoCaller => RefusalCode::NoCaller,
            Refusal::NoWebServer { .. } => RefusalCode::NoWebServer,
            Refusal::SelfSend { .. } => RefusalCode::SelfSend,
            Refusal::EmptyBody => RefusalCode::EmptyBody,
            Refusal::TooLong { .. } => RefusalCode::TooLong,
            Refusal::ForgedHeader(_) => RefusalCode::ForgedHeader,
            Refusal::Budget { .. } => RefusalCode::Budget,
            Refusal::RelayLimit { .. } => RefusalCode::RelayLimit,
            Refusal::ResumeDisabled { .. } => RefusalCode::ResumeDisabled,
            Refusal::NotFound { .. } => RefusalCode::NotFound,
            Refusal::NotMessageable { .. } => RefusalCode::NotMessageable,
            Refusal::Stacked { .. } => RefusalCode::Stacked,
            Refusal::Rejected { .. } => RefusalCode::Rejected,
            Refusal::Undelivered { failure, .. } => match failure {
                Failure::NoSecret(_) | Failure::Unauthorized => RefusalCode::AuthFailed,
                Failure::Forbidden(_) => RefusalCode::Forbidden,
                _ => RefusalCode::Unreachable,
            },
            Refusal::HeldElsewhere { .. } | Refusal::MayBeHeldElsewhere { .. } => {
                RefusalCode::HeldElsewhere
            }
            Refusal::UnknownTool { .. } => RefusalCode::UnknownTool,
            Refusal::Internal { .. } => RefusalCode::Internal,
            Refusal::BudgetUnchecked { .. } => RefusalCode::Budget,
            Refusal::Busy { .. } => RefusalCode::Busy,
            Refusal::Stopped { .. } => RefusalCode::Stopped,
            Refusal::RefusedByHuman { .. } => RefusalCode::RefusedByHuman,
            Refusal::MachineBudget(_) => RefusalCode::Budget,
            Refusal::ForeignSender { .. } => RefusalCode::ForeignSender,
            Refusal::Unlinked { .. } => RefusalCode::Unlinked,
            Refusal::Remote(r) => r.refusal.code,
        }
    }

    /// `held-elsewhere` for `target`, which the process of presence record `r` holds and which offers no
    /// route: it is stopping, or it has neither a web server nor a mailbox (`request_id`: the request
    /// already minted, when a delivery was tried first — a `session/writer-held` answer).
    pub fn unroutable(
        target: &str,
        r: &crate::presence::Record,
        request_id: Option<String>,
    ) -> Refusal {
        Refusal::HeldElsewhere {
            target: target.to_string(),
            owner: Owner::Process {
                pid: r.pid,
                profile: r.profile.clone(),
            },
            why: if r.stopping {
                HeldWhy::Stopping
            } else {
                HeldWhy::NoRoute
            },
            request_id,
        }
    }

    /// The request id minted before the refusal (delivery refusals only).
    pub fn request_id(&self) -> Option<&str> {
        match self {
            Refusal::Rejected { request_id, .. } => Some(request_id),
            Refusal::Undelivered { context, .. } => Some(&context.request_id),
            Refusal::HeldElsewhere { request_id, .. } => request_id.as_deref(),
            Refusal::Remote(r) => Some(&r.request_id),
            _ => None,
        }
    }
}

/// Everything an accepted receipt says.
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    pub tool: SendTool,
    pub target: String,
    pub mode: Mode,
    /// Characters of the message as the caller wrote it.
    pub chars: usize,
    /// Where it went: this process's host (woken or not), the owner's host, or the owner's mailbox.
    pub route: Route,
    /// The target was live and running a turn.
    pub running: bool,
    pub request_id: String,
    pub dialect: Dialect,
    pub recovery: Option<Recovery>,
    /// Why the first attempt got no clear answer, when it was confirmed after one (`recovery`).
    pub ambiguity: Option<crate::delivery::Unclear>,
    /// Earlier messages of this plugin still pending in the target's inbox.
    pub pending_from_plugin: usize,
    /// Items (anyone's) already waiting in the target's next-turn inbox, when it is live.
    pub pending_next_turn: usize,
    /// What is left of the send budget after this send (`None`: budgets off).
    pub budget: Option<Allowance>,
}

impl Receipt {
    /// This process's host resumed the session to take the message.
    pub fn woke(&self) -> bool {
        matches!(self.route, Route::Here { woke: true })
    }
}

/// Where an accepted message went: one typed route per receipt (issue 16 #9), worded once by
/// `render::send`. Each route carries only what is true of it, so a receipt cannot say that a host
/// started a turn for a message still waiting in a mailbox, and a refusal carries no route at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// This process's host took it; `woke`: the session was not live, so the host resumed it.
    Here { woke: bool },
    /// The host of the DSH process that holds the session took it, through that host's web server.
    Owner { pid: u32, profile: Option<String> },
    /// That process has no web server: the message was posted to the mailbox it drains. `answered`:
    /// its receipt came back within the wait (its host took it); else the message waits there.
    Mailbox {
        pid: u32,
        profile: Option<String>,
        answered: bool,
    },
}

/// How a send ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SendOutcome {
    Accepted(Receipt),
    /// Kept for the human's decision (the target's inbound policy is `hold`, or the policy does not
    /// verify): nothing was delivered; it lands only if the human approves it (`crate::policy::held`).
    Held(HeldReceipt),
    Refused(Refusal),
    /// The message went out without a clear answer and the lookup could not settle it (`why`: the
    /// first attempt's reason and what followed it).
    MayHaveLanded {
        why: Box<crate::delivery::Unsettled>,
        context: DeliveryContext,
    },
    /// Posted to the owner's mailbox (the durable hand-off), and the receipt found for it cannot be read
    /// as the owner's answer: that process may have delivered it or its host refused it. Not a claim that
    /// it was delivered, nor that it waits: like [`SendOutcome::MayHaveLanded`] (`may_have_landed`, code
    /// `unreachable`), the caller checks before sending again. Boxed: a `SendOutcome` stays small.
    ReceiptUnreadable(Box<UnreadableReceipt>),
    /// Routed over HTTP to the web server of the process holding the target, which went away — the
    /// connection was not made (nothing was sent), or none that settled it (it may have landed) — and
    /// that process's presence record then said it is stopping. Code `unreachable`, as the failure it
    /// carries; `may_have_landed` as that failure says. Boxed: a `SendOutcome` stays small.
    OwnerStopping(Box<StoppingOwner>),
    /// Sent to a session of a linked machine: what that machine's own send path made of it, or that it
    /// waits in this home's outbox. (A refusal there is `Refused(Refusal::Remote)`.)
    Remote(Box<RemoteReceipt>),
}

/// A send to a session of a linked machine that was not refused (`SendOutcome::Remote`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteReceipt {
    pub machine: crate::machine::Machine,
    pub tool: SendTool,
    pub target: String,
    pub mode: Mode,
    /// Characters of the message as the caller wrote it.
    pub chars: usize,
    pub request_id: String,
    /// Its hop in its chain (as the far side counted it, once it answered).
    pub hop: u32,
    pub fate: RemoteFate,
}

/// What became of a message for a linked machine, as far as this side knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteFate {
    /// That machine's host took it (`woke`: resumed a cold session there; `waiting`: it waits in the
    /// mailbox of the process there that holds the session; `repeated`: answered from its record of an
    /// earlier delivery of the same request id, nothing delivered again).
    Accepted {
        woke: bool,
        waiting: bool,
        repeated: bool,
    },
    /// Kept there for that machine's human.
    Held,
    /// Went out there without a clear answer from its host.
    MayHaveLanded,
    /// Not delivered yet: kept (fsynced) in this home's outbox, delivered once when the machine answers,
    /// expired at `expires_at_ms`. `why`: why the call brought no answer (`may_have_arrived`: it may be
    /// there already — the far side lands it once either way).
    Outbox {
        expires_at_ms: i64,
        why: crate::machine::CallError,
    },
}

/// A send whose owner stopped under it (`SendOutcome::OwnerStopping`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoppingOwner {
    /// How the delivery to its web server failed: `Failure::HostDown` or `Failure::ConnectTimeout`
    /// (nothing was sent), or `Failure::MayHaveLanded` (it went out; no clear answer).
    pub failure: Failure,
    pub context: DeliveryContext,
    /// The owner (its presence record, which says `stopping`).
    pub pid: u32,
    pub profile: Option<String>,
}

impl StoppingOwner {
    /// The message went out before the owner's web server went away.
    pub fn may_have_landed(&self) -> bool {
        matches!(self.failure, Failure::MayHaveLanded(_))
    }
}

/// A send whose owner's receipt could not be read (`SendOutcome::ReceiptUnreadable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableReceipt {
    pub target: String,
    pub request_id: String,
    /// The process whose mailbox took it (its presence record).
    pub pid: u32,
    pub profile: Option<String>,
    /// Why the receipt there cannot be read.
    pub why: crate::mailbox::ReceiptError,
}

/// A send kept for the human (`SendOutcome::Held`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldReceipt {
    pub target: String,
    pub mode: crate::delivery::Mode,
    pub chars: usize,
    pub request_id: String,
    /// Why the policy could not be verified (then every send is held).
    pub unverified: Option<crate::policy::Unverified>,
}

/// A `note:` line of a send's text (before its `request:` line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendNote {
    /// The ledger line of this attempt could not be written (why).
    LedgerNotWritten(crate::ledger::LedgerError),
    /// `.credentials.yaml` is readable by other users (its mode).
    CredentialsExposed(crate::delivery::credentials::Exposed),
    /// This delivery's hop in its agent-to-agent chain (from the second hop on): (hop, maxRelayHops).
    RelayHop { hop: u32, max: u32 },
    /// The target's running turn waits on its human (an open question or approval).
    AwaitingUser,
    /// The accepted message waits in its holder's inbox — the memory of that DSH process (`pid`;
    /// None: this one) — until the session takes it (its next turn; `step`: its next step, a steer);
    /// `mailbox::queued` recorded it for re-delivery should that process stop first. (Not
    /// [`SendOutcome::Held`], which is kept for the human and not delivered at all yet.)
    QueuedInMemory { pid: Option<u32>, step: bool },
    /// The re-delivery record could not be written (why): lost if its holder stops first.
    QueuedNotRecorded(Unrecorded),
}

/// Why no re-delivery record of an accepted message was written (the words: `render::send`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unrecorded {
    /// The attempt's `accepted` ledger line, which a re-delivery is checked against, was not written.
    NoLedgerLine,
    /// Writing the record failed (`mailbox::queued::record_with`; a trip past its deadline is `NoLedgerLine`).
    Record(crate::mailbox::queued::RecordError),
}

/// A send's outcome with its notes.
#[derive(Debug, Clone, PartialEq)]
pub struct SendResult {
    pub outcome: SendOutcome,
    pub notes: Vec<SendNote>,
}

impl SendResult {
    /// The request id, when one was minted (every delivery attempt has one).
    pub fn request_id(&self) -> Option<&str> {
        match &self.outcome {
            SendOutcome::Accepted(r) => Some(&r.request_id),
            SendOutcome::Held(h) => Some(&h.request_id),
            SendOutcome::Refused(r) => r.request_id(),
            SendOutcome::MayHaveLanded { context, .. } => Some(&context.request_id),
            SendOutcome::ReceiptUnreadable(u) => Some(&u.request_id),
            SendOutcome::OwnerStopping(o) => Some(&o.context.request_id),
            SendOutcome::Remote(r) => Some(&r.request_id),
        }
    }

    /// The refusal code (`unreachable` for may-have-landed, as its text says); `None` when accepted.
    pub fn code(&self) -> Option<RefusalCode> {
        match &self.outcome {
            SendOutcome::Accepted(_) | SendOutcome::Held(_) => None,
            SendOutcome::Remote(r) => {
                matches!(r.fate, RemoteFate::MayHaveLanded).then_some(RefusalCode::Unreachable)
            }
            SendOutcome::Refused(r) => Some(r.code()),
            SendOutcome::MayHaveLanded { .. }
            | SendOutcome::ReceiptUnreadable(_)
            | SendOutcome::OwnerStopping(_) => Some(RefusalCode::Unreachable),
        }
    }

    pub fn accepted(&self) -> bool {
        matches!(self.outcome, SendOutcome::Accepted(_))
    }

    pub fn may_have_landed(&self) -> bool {
        match &self.outcome {
            SendOutcome::MayHaveLanded { .. } | SendOutcome::ReceiptUnreadable(_) => true,
            SendOutcome::OwnerStopping(o) => o.may_have_landed(),
            SendOutcome::Remote(r) => matches!(r.fate, RemoteFate::MayHaveLanded),
            _ => false,
        }
    }

    /// What the audit ledger records.
    pub fn ledger_outcome(&self) -> crate::ledger::LedgerOutcome {
        use crate::ledger::LedgerOutcome as L;
        match &self.outcome {
            SendOutcome::Accepted(_) => L::Accepted,
            SendOutcome::Held(_) => L::Held,
            SendOutcome::MayHaveLanded { .. } => L::MayHaveLanded,
            // The mailbox took it: the hand-off's `accepted` line stands (it vouches for the envelope,
            // which may still be delivered), and a second line would count the one message twice
            // against the budget. `verify` tells from the log whether it landed.
            SendOutcome::ReceiptUnreadable(_) => L::Accepted,
            // What the failure alone would record: the owner's stop changes the words, not the fate.
            SendOutcome::OwnerStopping(o) if o.may_have_landed() => L::MayHaveLanded,
            SendOutcome::OwnerStopping(_) => L::Unreachable,
            SendOutcome::Remote(r) => match r.fate {
                RemoteFate::Accepted { .. } => L::Accepted,
                RemoteFate::Held => L::Held,
                RemoteFate::MayHaveLanded => L::MayHaveLanded,
                // durable here and delivered once when the machine answers: it counts as sent
                RemoteFate::Outbox { .. } => L::Accepted,
            },
            // A delivery that reached no host decision (down, timeout, 5xx, carrier, bad URL) is
            // `unreachable`; a refused cookie or fence is a refusal with its code.
            SendOutcome::Refused(r) => match r.code() {
                RefusalCode::Unreachable => L::Unreachable,
                code => L::Refused(code),
            },
        }
    }
}

/// What became of a message sent to a linked machine, as this side can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteVerification {
    pub request_id: String,
    /// The machine (by its name here; an unlinked one by its id).
    pub machine: crate::machine::MachineId,
    pub machine_name: Option<String>,
    pub target: Option<String>,
    pub state: crate::code::FateState,
    /// `waiting` in the outbox: when it expires.
    pub expires_at_ms: Option<i64>,
    /// The far side's answer to this verify (`None`: not asked, or no answer: `asked` says why).
    pub there: Option<crate::machine::wire::VerifyAnswer>,
    pub asked: Option<crate::machine::CallError>,
    /// Still in this home's outbox (not delivered yet), expired or unlinked there.
    pub in_outbox: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::http::{Cause, NetError};
    use crate::ledger::LedgerOutcome;
    use crate::mail::budget::Which;

    fn cause(text: &str) -> Cause {
        Cause {
            kind: None,
            text: text.into(),
        }
    }

    fn ctx() -> DeliveryContext {
        DeliveryContext {
            target: "session-t".into(),
            request_id: "dsh-session-mail:r".into(),
            base_url: "http://127.0.0.1:1".into(),
            connect_timeout_ms: 500,
        }
    }

    /// One value of every variant (and of every delivery failure that is a refusal).
    fn every_refusal() -> Vec<Refusal> {
        let exceeded = Exceeded {
            which: Which::Pair,
            also: None,
            sent: 6,
            limit: 6,
            window_secs: 600,
            next_at_ms: 1_761_741_296_789,
            now_ms: 1_761_741_296_000,
            urgent: false,
            urgent_reserve: 2,
            urgent_left: 2,
        };
        let mut v = vec![
            Refusal::BadArgument {
                problems: vec![ArgProblem::invalid(
                    "message",
                    Expected::Str,
                    Got::Nothing,
                    None,
                )],
                usage: Some("send_session_message {…}"),
            },
            Refusal::BadArgument {
                problems: vec![ArgProblem::NotAnArgument {
                    name: "limit".into(),
                    tool: Tool::SessionsRead,
                    allowed: &["session_id"],
                }],
                usage: None,
            },
            Refusal::NoCaller,
            Refusal::NoWebServer { profile: None },
            Refusal::SelfSend {
                target: "session-me".into(),
            },
            Refusal::EmptyBody,
            Refusal::TooLong { chars: 9, max: 8 },
            Refusal::ForgedHeader(Forgery::FromHeader { line: 1 }),
            Refusal::Budget {
                exceeded,
                target: "session-t".into(),
                tool: SendTool::SessionsSend,
            },
            Refusal::RelayLimit {
                hop: crate::mail::chain::Hop {
                    chain: "dsh-session-mail:c".into(),
                    hop: 5,
                    sessions: vec!["session-a".into(), "session-b".into()],
                    started: None,
                    unverified: None,
                },
                max: 4,
            },
            Refusal::ResumeDisabled {
                target: "session-t".into(),
            },
            Refusal::NotMessageable {
                target: "session-t".into(),
                owner: Some("session-o".into()),
            },
            Refusal::Stacked {
                stacked: Stacked {
                    waiting: vec!["dsh-session-mail:a".into()],
                    limit: 1,
                },
                target: "session-t".into(),
                tool: SendTool::SendSessionMessage,
            },
            Refusal::Rejected {
                code: "session-not-found".into(),
                message: "gone".into(),
                after_ambiguous: false,
                request_id: "dsh-session-mail:r".into(),
            },
            Refusal::UnknownTool {
                name: "sessions_nuke".into(),
            },
            Refusal::Internal {
                what: Internal::Store(base::offload::Offload::Panicked),
            },
            Refusal::BudgetUnchecked {
                why: crate::mail::budget::Unchecked::Unreadable(crate::ledger::LedgerError::Io {
                    path: "/h/dsh-session-mail/ledger.jsonl".into(),
                    why: std::io::Error::other("ledger unreadable").into(),
                }),
            },
            Refusal::Busy {
                what: base::offload::Offload::TimedOut(std::time::Duration::from_secs(15)),
            },
            Refusal::Stopped {
                target: "session-t".into(),
            },
            Refusal::RefusedByHuman {
                target: "session-t".into(),
                by: crate::policy::By::Session,
            },
            Refusal::RefusedByHuman {
                target: "session-t".into(),
                by: crate::policy::By::Sender,
            },
            Refusal::ForeignSender {
                sender: "session-f".into(),
                why: crate::machine::wire::ForeignWhy::OtherMachine,
            },
            Refusal::Unlinked {
                target: "session-t".into(),
                machine: "e".repeat(64),
            },
            Refusal::MachineBudget(crate::crossing::MachineBudget {
                machine: crate::machine::MachineId::parse(&"e".repeat(64)).unwrap(),
                sent: 30,
                limit: 30,
                window_secs: 600,
                next_at_ms: 1_761_741_296_789,
            }),
            Refusal::Remote(Box::new(RemoteRefusal {
                machine: crate::machine::Machine {
                    id: crate::machine::MachineId::parse(&"e".repeat(64)).unwrap(),
                    name: "laptop".into(),
                },
                target: "session-t".into(),
                request_id: "dsh-session-mail:r".into(),
                refusal: crate::machine::wire::WireRefusal::code(RefusalCode::NotFound),
            })),
            Refusal::HeldElsewhere {
                target: "session-t".into(),
                owner: Owner::Process {
                    pid: 42,
                    profile: None,
                },
                why: HeldWhy::NoRoute,
                request_id: Some("dsh-session-mail:h".into()),
            },
            Refusal::MayBeHeldElsewhere {
                target: "session-t".into(),
                holder: crate::presence::foreign::Holder {
                    host: crate::presence::foreign::Host {
                        pid: 43,
                        profile: Some("plain".into()),
                        started_ms: 1_000,
                    },
                    log_written_ms: 2_000,
                    others: 0,
                },
            },
        ];
        for missing in [
            Missing::SendTarget,
            Missing::ReadTarget,
            Missing::Unreadable(store::Unreadable {
                path: "--w--/session-x/session.jsonl".into(),
                why: store::UnreadableWhy::Empty,
            }),
        ] {
            v.push(Refusal::NotFound {
                target: "session-x".into(),
                missing,
            });
        }
        for failure in [
            Failure::BadBaseUrl(
                crate::delivery::http::loopback_base("http://10.0.0.1").unwrap_err(),
            ),
            Failure::NoSecret(crate::delivery::credentials::CredentialsError::Missing),
            Failure::Unauthorized,
            Failure::Forbidden(String::new()),
            Failure::HostDown(NetError::Connect(cause("refused"))),
            Failure::ConnectTimeout,
            Failure::ProbeNoAnswer(NetError::Request(cause("reset"))),
            Failure::HostError {
                status: 500,
                body: String::new(),
            },
            Failure::Carrier {
                status: 404,
                body: String::new(),
            },
        ] {
            v.push(Refusal::Undelivered {
                failure,
                context: ctx(),
            });
        }
        v
    }

    #[test]
    fn every_refusal_renders_with_its_code_first() {
        let all = every_refusal();
        let codes: std::collections::BTreeSet<&str> =
            all.iter().map(|r| r.code().as_str()).collect();
        // Every code is some refusal's, and each serializes as its text.
        let declared: std::collections::BTreeSet<&str> =
            RefusalCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(codes, declared);
        for c in RefusalCode::ALL {
            assert_eq!(serde_json::to_string(c).unwrap(), format!("\"{c}\""));
            assert_eq!(RefusalCode::parse(c.as_str()), Some(*c));
        }
        for r in &all {
            let text = r.render();
            let prefix = format!("refused ({}): ", r.code());
            assert!(text.starts_with(&prefix), "{text}");
            // A refusal after the request id was minted ends with it.
            if let Some(id) = r.request_id() {
                assert!(text.ends_with(&format!("request: {id}")), "{text}");
            }
        }
    }

    #[test]
    fn every_send_outcome_round_trips_through_the_ledger() {
        let mut results: Vec<SendResult> = every_refusal()
            .into_iter()
            .map(|r| SendResult {
                outcome: SendOutcome::Refused(r),
                notes: vec![],
            })
            .collect();
        results.push(SendResult {
            outcome: SendOutcome::MayHaveLanded {
                why: Box::new(crate::delivery::Unsettled {
                    first: crate::delivery::Unclear::Net(NetError::Request(cause("reset"))),
                    then: crate::delivery::Then::ResendStatus(404),
                }),
                context: ctx(),
            },
            notes: vec![],
        });
        results.push(SendResult {
            outcome: SendOutcome::ReceiptUnreadable(Box::new(UnreadableReceipt {
                target: "session-t".into(),
                request_id: "dsh-session-mail:r".into(),
                pid: 42,
                profile: None,
                why: crate::mailbox::ReceiptError::NotThisRequest,
            })),
            notes: vec![],
        });
        let unsettled = crate::delivery::Unsettled {
            first: crate::delivery::Unclear::Net(NetError::Request(cause("reset"))),
            then: crate::delivery::Then::ResendStatus(404),
        };
        for failure in [
            Failure::HostDown(NetError::Connect(cause("refused"))),
            Failure::MayHaveLanded(Box::new(unsettled)),
        ] {
            results.push(SendResult {
                outcome: SendOutcome::OwnerStopping(Box::new(StoppingOwner {
                    failure,
                    context: ctx(),
                    pid: 42,
                    profile: Some("web".into()),
                })),
                notes: vec![],
            });
        }
        for r in &results {
            let o = r.ledger_outcome();
            let wire = serde_json::to_string(&o).unwrap();
            let back: LedgerOutcome = serde_json::from_str(&wire).unwrap();
            assert_eq!(back, o, "{wire}");
            assert!(!matches!(back, LedgerOutcome::Other(_)), "{wire}");
            match &r.outcome {
                SendOutcome::MayHaveLanded { .. } => {
                    assert_eq!(wire, "\"may-have-landed\"");
                    assert_eq!(r.code(), Some(RefusalCode::Unreachable));
                    assert!(r.render().contains("MAY have landed"));
                }
                // the hand-off's `accepted` line stands: no second line for the one message
                SendOutcome::ReceiptUnreadable(_) => {
                    assert_eq!(wire, "\"accepted\"");
                    assert_eq!(r.code(), Some(RefusalCode::Unreachable));
                    assert!(r.may_have_landed() && !r.accepted());
                    let text = r.render();
                    assert!(text.starts_with("refused (unreachable): the message MAY have landed"));
                    assert!(text.ends_with("\nrequest: dsh-session-mail:r"), "{text}");
                }
                // the fate of the failure it carries; the owner's stop is in the words
                SendOutcome::OwnerStopping(o) => {
                    let landed = o.may_have_landed();
                    let want = if landed {
                        "may-have-landed"
                    } else {
                        "unreachable"
                    };
                    assert_eq!(wire, format!("\"{want}\""));
                    assert_eq!(r.code(), Some(RefusalCode::Unreachable));
                    assert!(r.may_have_landed() == landed && !r.accepted());
                    let text = r.render();
                    assert!(text.starts_with("refused (unreachable): "), "{text}");
                    assert_eq!(text.contains("MAY have landed"), landed, "{text}");
                    assert!(text.contains("is stopping"), "{text}");
                    assert!(text.ends_with("\nrequest: dsh-session-mail:r"), "{text}");
                }
                SendOutcome::Refused(x) if x.code() == RefusalCode::Unreachable => {
                    assert_eq!(wire, "\"unreachable\"")
                }
                SendOutcome::Refused(x) => assert_eq!(wire, format!("\"refused:{}\"", x.code())),
                SendOutcome::Accepted(_) | SendOutcome::Held(_) | SendOutcome::Remote(_) => {
                    unreachable!()
                }
            }
        }
        // Strings of older ledgers read back as the same outcomes; unknown ones are kept as written.
        for (old, want) in [
            ("accepted", LedgerOutcome::Accepted),
            ("unreachable", LedgerOutcome::Unreachable),
            ("may-have-landed", LedgerOutcome::MayHaveLanded),
            (
                "refused:stacked",
                LedgerOutcome::Refused(RefusalCode::Stacked),
            ),
            // a refusal whose code this version does not know is a refusal still (mailview's row)
            ("refused:", LedgerOutcome::RefusedUnknown(String::new())),
            (
                "refused:held-by-mars",
                LedgerOutcome::RefusedUnknown("held-by-mars".into()),
            ),
            ("queued?", LedgerOutcome::Other("queued?".into())),
        ] {
            let got: LedgerOutcome = serde_json::from_str(&format!("\"{old}\"")).unwrap();
            assert_eq!(got, want);
            assert_eq!(got.as_string(), old);
            assert_eq!(got.is_refused(), old.starts_with("refused:"), "{old}");
        }
    }

    #[test]
    fn notes_go_before_the_request_line() {
        let r = SendResult {
            outcome: SendOutcome::Refused(Refusal::Undelivered {
                failure: Failure::ConnectTimeout,
                context: ctx(),
            }),
            notes: vec![SendNote::LedgerNotWritten(crate::ledger::LedgerError::Io {
                path: "/h/ledger.jsonl".into(),
                why: std::io::Error::other("disk full").into(),
            })],
        };
        let text = r.render();
        assert!(
            text.ends_with(
                "\nnote: audit ledger not written: /h/ledger.jsonl: disk full\nrequest: dsh-session-mail:r"
            ),
            "{text}"
        );
        assert_eq!(r.request_id(), Some("dsh-session-mail:r"));
        assert!(!r.accepted());
    }
}
