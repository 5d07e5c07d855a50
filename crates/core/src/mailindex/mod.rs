//! The human's home-wide Agent mail page (issue 32): the data of the routes `mail.list` and
//! `mail.thread`, read from the mail index (crate `index`, a SQLite/FTS5 database the core feeds from
//! the audit ledger and the session logs: [`feed`]).
//!
//! The index is a view for the human and nothing else: no delivery decision (budget, loop guard,
//! policy, stacking, routing, `verify`) reads it. Before it answers, a route brings it up to date
//! ([`feed::sync`]); one that is missing, stale, corrupt or forged is rebuilt from the source first.
//!
//! The DTOs below are the routes' payloads and results, declared once (docs/client.md "The page's
//! routes"); the binding hands them to JS as JSON.

pub mod feed;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::fate::FateState;

/// Rows a page returns when the payload names no limit.
pub const DEFAULT_LIMIT: u32 = 50;
/// Most rows a page returns.
pub const MAX_LIMIT: u32 = index::MAX_LIMIT as u32;
/// Characters of a search query looked at.
pub const MAX_QUERY_CHARS: usize = 512;

/// A linked machine as a row shows it (`{id, name}`; `null`: this home): the one `machine::Machine`.
pub use crate::machine::Machine as MachineRef;

/// `mail.list`'s filter. Every field is optional; an empty filter lists all mail.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MailFilter {
    /// Mail from or to this session.
    pub session: Option<String>,
    /// Only mail in one of these fates; empty: any.
    pub fate: Vec<FateState>,
    /// `true`: only mail held for the human; `false`: none of it.
    pub held: Option<bool>,
    /// Only mail sent at or after this time (ms since the epoch).
    pub since: Option<i64>,
    /// Only mail sent before this time (ms since the epoch).
    pub until: Option<i64>,
}

/// `mail.list`'s payload.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MailListArgs {
    pub filter: MailFilter,
    /// Words to search for in the texts and the sessions' titles (FTS5; results best first). Absent or
    /// blank: newest first.
    pub query: Option<String>,
    /// The `next` of the previous page (opaque).
    pub before: Option<String>,
    /// Rows wanted: 1..=200, default 50.
    pub limit: Option<u32>,
}

/// `mail.thread`'s payload.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MailThreadArgs {
    pub request_id: String,
}

/// One agent message on the page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MailItem {
    pub request_id: String,
    /// When it was sent (ms since the epoch; the ledger's time).
    pub time: i64,
    pub sender: Option<String>,
    pub sender_title: Option<String>,
    pub sender_machine: Option<MachineRef>,
    pub target: Option<String>,
    pub target_title: Option<String>,
    pub target_machine: Option<MachineRef>,
    /// `sessions_send` or `send_session_message`.
    pub tool: String,
    /// `queue` or `steer`.
    pub mode: Option<String>,
    pub hop: Option<u32>,
    /// The chain it belongs to (its first request id).
    pub chain: Option<String>,
    /// Its fate, as `verify` reads it (the one enum, `fate::FateState`); for a message sent to a linked
    /// machine, the answer remembered in `answered`.
    pub fate: FateState,
    /// For a message sent to a linked machine: the remembered answer `fate` comes from
    /// (`crossing::fates`, sealed), when it was given and by whom — the far side at the send, at the
    /// outbox's delivery or to the latest `verify`, or this home's outbox. `null`: `fate` is this home's
    /// own reading, now (or nothing was answered: `unknown`).
    #[serde(default)]
    pub answered: Option<Answered>,
    /// The message as the sender wrote it (the From header or frame taken off): from the target's log
    /// once landed, else from the held envelope, the queued record or the mailbox envelope; `null` when
    /// none of them holds it (refused, or a log that no longer shows it).
    pub text: Option<String>,
}

/// When and by whom a remote message's fate was answered (`MailItem::answered`).
pub use crate::crossing::fates::Answered;

/// The remembered answers of the rows sent to linked machines (`crossing::fates`): read when a route
/// answers, so a `verify` or a delivery since the last index pass shows at once.
fn with_answers(home: &Path, items: &mut [MailItem]) {
    if !items.iter().any(|i| i.target_machine.is_some()) {
        return;
    }
    let Some(key) = crate::crossing::fates::key(home) else {
        return;
    };
    let now = base::clock::now_ms();
    for i in items.iter_mut() {
        let Some(m) = &i.target_machine else {
            continue;
        };
        if let Some(a) =
            crate::crossing::fates::read(home, &key, &i.request_id, m.id.as_str(), i.time, now)
        {
            i.fate = a.state;
            i.answered = Some(a.answered());
        }
    }
}

/// The index behind an answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexStatus {
    /// Messages in the index.
    pub rows: u64,
    /// Why it was rebuilt from the source during this call (`missing`, `stale`, `forged (row seal)`,
    /// `corrupt (…)`, …); `null`: brought up to date incrementally, or nothing changed.
    pub rebuilt: Option<String>,
    /// It could not be used or brought up to date (the answer may be empty or older).
    pub error: Option<String>,
    /// A rebuild is under way (on a thread of its own; the answer holds the newest rows written so
    /// far): how far it is. `null`: the index is complete.
    #[serde(default)]
    pub building: Option<IndexBuilding>,
}

/// How far a rebuild of the index is: messages written of how many (`total` 0: still reading the
/// ledger).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexBuilding {
    pub done: u64,
    pub total: u64,
}

/// `mail.list`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MailPage {
    /// Newest first (a search: best first).
    pub rows: Vec<MailItem>,
    /// Pass as `before` for the next page; `null`: this was the last.
    pub next: Option<String>,
    pub index: IndexStatus,
}

/// A session taking part in a thread (opens with one click).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSession {
    pub id: String,
    pub title: Option<String>,
    pub machine: Option<MachineRef>,
}

/// `mail.thread`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MailThread {
    pub request_id: String,
    /// The message asked for is in the index.
    pub found: bool,
    /// The chain's id (its first request id).
    pub chain: Option<String>,
    /// The exchange, oldest first: the chain and the mail between the same two sessions around it.
    pub rows: Vec<MailItem>,
    /// The sessions in it, in the order they first appear.
    pub sessions: Vec<ThreadSession>,
    /// More messages belonged to it than were returned (200).
    pub truncated: bool,
    pub index: IndexStatus,
}

/// A stored fate name as the enum (the index keeps its text; a name this version does not know reads
/// `unknown`).
fn fate_of(name: &str) -> FateState {
    FateState::ALL
        .into_iter()
        .find(|f| f.as_str() == name)
        .unwrap_or(FateState::Unknown)
}

impl MailItem {
    /// A row of the index as the page shows it, its machines named from `linked`.
    pub fn of(r: index::Row, linked: &[MachineRef]) -> MailItem {
        MailItem {
            request_id: r.request_id,
            time: r.time,
            sender: r.sender,
            sender_title: r.sender_title,
            sender_machine: MachineRef::of_stored(r.sender_machine, linked),
            target: r.target,
            target_title: r.target_title,
            target_machine: MachineRef::of_stored(r.target_machine, linked),
            tool: r.tool,
            mode: r.mode,
            hop: r.hop,
            chain: r.chain,
            fate: fate_of(&r.fate),
            answered: None,
            text: r.text,
        }
    }
}

/// `mail.list`: bring the index up to date, then one page of it. `linked`: this home's linked machines
/// (their names for the rows).
pub fn list(home: &Path, args: &MailListArgs, linked: &[MachineRef]) -> MailPage {
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize;
    let q = index::ListQuery {
        session: args.filter.session.clone(),
        fates: args
            .filter
            .fate
            .iter()
            .map(|f| f.as_str().to_string())
            .collect(),
        held: args.filter.held,
        since: args.filter.since,
        until: args.filter.until,
        before: args.before.as_deref().and_then(|b| b.parse().ok()),
        limit,
    };
    let query: Option<String> = args
        .query
        .as_deref()
        .map(|s| s.chars().take(MAX_QUERY_CHARS).collect());
    let (got, index) = feed::with_index(home, |ix| match query.as_deref() {
        Some(text) => ix.search(text, &q),
        None => ix.list(&q),
    });
    match got {
        Some(p) => {
            let mut rows: Vec<MailItem> = p
                .rows
                .into_iter()
                .map(|r| MailItem::of(r, linked))
                .collect();
            with_answers(home, &mut rows);
            MailPage {
                rows,
                next: p.next.map(|c| c.to_string()),
                index,
            }
        }
        None => MailPage {
            index,
            ..MailPage::default()
        },
    }
}

/// `mail.thread`: bring the index up to date, then the thread of `request_id` (`linked` as in [`list`]).
pub fn thread(home: &Path, request_id: &str, linked: &[MachineRef]) -> MailThread {
    let (got, index) = feed::with_index(home, |ix| ix.thread(request_id));
    let Some(Some(t)) = got else {
        return MailThread {
            request_id: request_id.to_string(),
            index,
            ..MailThread::default()
        };
    };
    let mut sessions: Vec<ThreadSession> = Vec::new();
    for r in &t.rows {
        for (id, title, m) in [
            (&r.sender, &r.sender_title, &r.sender_machine),
            (&r.target, &r.target_title, &r.target_machine),
        ] {
            if let Some(id) = id {
                if !sessions.iter().any(|s| &s.id == id) {
                    sessions.push(ThreadSession {
                        id: id.clone(),
                        title: title.clone(),
                        machine: MachineRef::of_stored(m.clone(), linked),
                    });
                }
            }
        }
    }
    let mut rows: Vec<MailItem> = t
        .rows
        .into_iter()
        .map(|r| MailItem::of(r, linked))
        .collect();
    with_answers(home, &mut rows);
    MailThread {
        request_id: request_id.to_string(),
        found: true,
        chain: Some(t.chain),
        rows,
        sessions,
        truncated: t.truncated,
        index,
    }
}

#[cfg(test)]
mod tests;
