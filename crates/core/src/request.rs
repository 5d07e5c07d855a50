//! The one request shape the shim (index.js) or the CLI hands to the core for a tool call.
//! It carries the model's raw arguments (validated here, never trusted), the caller's identity
//! as the runtime reports it (`exec.agent`), and the facts only the host process knows.

use serde::Deserialize;
use serde_json::Value;

use crate::config::Config;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolRequest {
    /// `sessions_list`, `sessions_read`, `sessions_send` or `send_session_message`.
    pub tool: String,
    /// The arguments exactly as the model sent them (any JSON; validated by the core).
    pub args: Value,
    /// Who is calling, from the runtime (`exec.agent.session.id`, falling back to `exec.agent.id`).
    pub caller: Option<Caller>,
    pub config: Config,
    pub host: HostInfo,
    /// The sessions live in this host process right now (from `ctx.agents.list()`).
    pub live: Vec<LiveSession>,
    /// For `sessions_read` of a target live in this process: how many events it holds in memory
    /// (rc.8 `session.seq`, the next seq), read after the shim asked the host to flush it. The core
    /// reads the file and waits briefly when the file is behind this; no event crosses from JS.
    pub live_seq: Option<u64>,
    /// Whether the shim's flush of that session (`ctx.sessions.flush`) completed before the call.
    pub live_flushed: Option<bool>,
    /// The other host processes' presence records; None: the core reads them from DSH_HOME
    /// (tests set them directly).
    #[serde(skip)]
    pub peers: Option<Vec<crate::presence::Record>>,
    /// Set only by `remote::serve` (never from JSON): this send arrived from a linked machine, and runs
    /// this home's own send path with the sender's request id, chain and hop.
    #[serde(skip)]
    pub incoming: Option<Incoming>,
}

/// A send that arrived from a linked machine (`remote::serve`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    pub machine: crate::machine::MachineId,
    /// The sender's request id, kept: the far side's retries and `verify` name it.
    pub request_id: String,
    /// The chain and hop the sender counted.
    pub chain: Option<String>,
    pub hop: u32,
}

impl ToolRequest {
    /// The presence of the other processes on this home (given, or read once from disk).
    pub fn peers_at(&self, home: &std::path::Path) -> Vec<crate::presence::Record> {
        match &self.peers {
            Some(p) => p.clone(),
            None => crate::presence::current(home),
        }
    }

    /// The process that holds `session` live (another than this one) and its status there: from the given
    /// presence, or from DSH_HOME checking only the records that list it (`presence::owner`).
    pub fn owner_at(
        &self,
        home: &std::path::Path,
        session: &str,
    ) -> Option<(crate::presence::Record, crate::presence::PeerSession)> {
        match &self.peers {
            Some(p) => crate::presence::owner_of(p, session).map(|(r, s)| (r.clone(), s.clone())),
            None => crate::presence::owner(home, session),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Caller {
    /// `exec.agent.session.id` (preferred) — the durable id of the calling session.
    pub session_id: Option<String>,
    /// `exec.agent.id` — fallback.
    pub agent_id: Option<String>,
    /// The caller's title, if the shim knows it (used in the `sessions_send` frame).
    pub title: Option<String>,
    /// The user-role messages of the caller's current turn as its session recorded them (newest last),
    /// for the loop guard (`mail::chain`). `None`: the shim could not see them.
    #[serde(default)]
    pub turn: Option<Vec<TurnMessage>>,
}

impl Caller {
    /// The sender identity: session id, else agent id. Never taken from tool arguments.
    pub fn id(&self) -> Option<&str> {
        self.session_id
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .or_else(|| self.agent_id.as_deref().filter(|s| !s.trim().is_empty()))
    }
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct HostInfo {
    /// DSH_HOME as the host resolved it (None: resolve as the host does).
    pub dsh_home: Option<String>,
    /// `http://127.0.0.1:<port>` of the host's web server, or None when the profile has none.
    pub base_url: Option<String>,
    /// The DSH runtime version if known (e.g. `0.1.0-rc.8`), used by `hostApi: auto`.
    pub version: Option<String>,
    /// The browser-session secret (base64url) when the shim read it from the credentials
    /// service; otherwise the core reads `$DSH_HOME/.credentials.yaml` itself. Never printed.
    pub secret: Option<String>,
    /// The profile name, for messages (`web`, `desktop`, `headless`, ...).
    pub profile: Option<String>,
    /// This process's presence `startedAt` (ms): the incarnation a message accepted into one of
    /// its own inboxes is recorded as held by (`mailbox::queued`).
    pub started_at: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct LiveSession {
    pub id: String,
    /// `running` or `idle` (the agent's public status).
    pub status: String,
    /// The session header as the host holds it (`cwd`, `parentSession`, `origin`, `agentPreset`, `createdAt`...).
    pub header: Value,
    /// Request ids (`source.rpcId`) of the items pending in its inbox, both queues.
    pub pending_rpc_ids: Vec<String>,
    /// Pending next-turn items (count), for the stacking guard.
    pub pending_next_turn: usize,
    /// Request ids (`source.rpcId`) of the pending next-turn items only, in inbox order (filled by the
    /// shim from `agent.inbox.nextTurn`); the stacking guard intersects them with the sender's ledger.
    #[serde(default)]
    pub pending_next_turn_rpc_ids: Vec<String>,
    /// Files its write/edit tools changed recently, newest first, as the tool calls named them (the shim
    /// folds them from the session's events: lib/observe.js `filesOf`).
    #[serde(default)]
    pub files: Vec<FileTouch>,
}

/// One file a session's write/edit tool changed.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct FileTouch {
    /// The path as the tool call named it (absolute, or relative to the session's cwd).
    pub path: String,
    /// When (ms since the epoch), if the event said.
    pub time_ms: Option<i64>,
}

/// One user-role message of the caller's current turn, as the host recorded it (the shim copies
/// `data.source` and the first characters of the text; newest last).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnMessage {
    pub seq: Option<i64>,
    /// `source.kind` (`user`, `plugin`, …).
    pub kind: Option<String>,
    /// `source.rpcId`.
    pub rpc_id: Option<String>,
    /// `source.plugin` (for `kind: plugin`).
    pub plugin: Option<String>,
    /// `source.form`.
    pub form: Option<String>,
    /// The first characters of the message text.
    pub text: Option<String>,
}
