//! Routing, part one: who holds the target. Live in this process (its registry, `req.live`), else live
//! in another process on this home (presence, `crate::presence`), else cold. A session another process
//! holds is never resumed here: it is [`Routed`] to that process, or refused.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::presence;
use crate::request::{LiveSession, ToolRequest};

/// Where a send to a session live in another process goes: its web server when it has one, else
/// the mailbox it drains (`crate::mailbox`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub pid: u32,
    pub profile: Option<String>,
    /// None: no web server; the message goes through the mailbox.
    pub base_url: Option<String>,
    /// The owner's presence `startedAt` (the envelope is addressed to this incarnation).
    pub started_at: i64,
    /// The owner's host version, as its verified record says: the route's dialect without asking that host
    /// (`host.describe` costs its main thread ~1.2 ms, and a process that sends once would ask every time).
    pub host_version: Option<String>,
}

impl Routed {
    /// The route to the process of `r`, if it offers one (a stopping process offers none).
    pub fn of(r: &presence::Record) -> Option<Routed> {
        (!r.stopping && (r.base_url.is_some() || r.mailbox)).then(|| Routed {
            pid: r.pid,
            profile: r.profile.clone(),
            base_url: r.base_url.clone(),
            started_at: r.started_at,
            host_version: r.host_version.clone(),
        })
    }

    /// The process, as a `held-elsewhere` refusal names it.
    pub fn owner(&self) -> crate::outcome::Owner {
        crate::outcome::Owner::Process {
            pid: self.pid,
            profile: self.profile.clone(),
        }
    }

    /// The receipt's route through this process: its host, or (`answered`: whether its receipt came
    /// back) its mailbox.
    pub fn route(&self, answered: Option<bool>) -> crate::outcome::Route {
        let (pid, profile) = (self.pid, self.profile.clone());
        match (&self.base_url, answered) {
            (Some(_), _) => crate::outcome::Route::Owner { pid, profile },
            (None, answered) => crate::outcome::Route::Mailbox {
                pid,
                profile,
                answered: answered.unwrap_or(false),
            },
        }
    }
}

/// The process presence names as the target's holder, and the target's status there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub record: presence::Record,
    pub status: String,
}

/// Where the target lives, as the send found it before any check of the target itself.
#[derive(Debug, Default, Clone)]
pub struct Place<'a> {
    /// Live in this process.
    pub live: Option<&'a LiveSession>,
    /// Live in another process on this home.
    pub owner: Option<Owner>,
    /// The route to that process, when it offers one.
    pub routed: Option<Routed>,
}

impl Place<'_> {
    /// Not live anywhere: delivering resumes it here.
    pub fn cold(&self) -> bool {
        self.live.is_none() && self.owner.is_none()
    }
}

/// Live here (this process's registry), else live in another process on this home (presence).
pub fn locate<'a>(req: &'a ToolRequest, home: &Path, target: &str) -> Place<'a> {
    let live = req.live.iter().find(|l| l.id == target);
    // only the records that list the target are checked against their process (`presence::owner`)
    let owner = match live {
        Some(_) => None,
        None => req.owner_at(home, target).map(|(record, s)| Owner {
            record,
            status: s.status,
        }),
    };
    let routed = owner.as_ref().and_then(|o| Routed::of(&o.record));
    Place {
        live,
        owner,
        routed,
    }
}

/// How long a send to a session another process holds waits for that session's log to appear. The owner
/// publishes a session as soon as its agent is created (lib/presence.js republishes on `agent/created`),
/// which can come before the host's write-behind wrote the log (rc.8 `DEFAULT_WRITE_BATCH_MAX_DELAY_MS =
/// 200`, `session-persistence/lib/index.js`); the log's header says whether it is a subagent.
const OWNED_LOG_WAIT_MS: u64 = 1000;

/// The target's log in the store; for a session held by another process (`owned`), waited for up to
/// [`OWNED_LOG_WAIT_MS`] (runs on the blocking pool, like the rest of the checks).
pub fn find_target(home: &Path, id: &str, owned: bool) -> Option<store::SessionMeta> {
    let t0 = Instant::now();
    loop {
        if let Some(meta) = store::find_session(home, id) {
            return Some(meta);
        }
        if !owned || t0.elapsed() >= Duration::from_millis(OWNED_LOG_WAIT_MS) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How long a `session/writer-held` answer waits for the owner's presence record to show up
/// (a little more than one refresh of the owner's publisher).
const OWNER_WAIT_MS: u64 = 1_500;

/// The owner of `target` per presence, polled for up to [`OWNER_WAIT_MS`]: the first record that lists
/// it ends the wait, whether or not it offers a route (a stopping process offers none: [`Routed::of`]).
pub async fn wait_for_owner(req: &ToolRequest, home: &Path, target: &str) -> Option<Owner> {
    let t0 = Instant::now();
    loop {
        if let Some((record, s)) = req.owner_at(home, target) {
            return Some(Owner {
                record,
                status: s.status,
            });
        }
        if req.peers.is_some() || t0.elapsed().as_millis() as u64 >= OWNER_WAIT_MS {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
